# Copyright 2026 rog_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""
The rclpy lifecycle node, structurally, with a stand-in ``rclpy`` (ROS 2 is not installed).

Checks the wiring, not rclpy: parameters declared from the settings, node name, rclpy's
SIGINT handler disabled and ours installed, lifecycle callbacks mapped to the core, and the
summary written (``finish``) before shutdown.
"""

import importlib
import signal
import sys
import types

import pytest

from rog_ros.nodes import lifecycle as lc
from rog_ros.nodes import node_main
from rog_ros.nodes import rog_worker


class FakeLifecycleNode:
    """Stand-in for rclpy.lifecycle.LifecycleNode."""

    def __init__(self, name):
        self.name, self.params, self.destroyed = name, {}, False

    def declare_parameter(self, name, value, descriptor):
        self.params[name] = value

    def get_logger(self):
        import logging
        return logging.getLogger('fake.' + self.name)

    def trigger_configure(self):
        CALLS.append(('configure', self.on_configure(None)))

    def trigger_activate(self):
        CALLS.append(('activate', self.on_activate(None)))

    def destroy_node(self):
        self.destroyed = True


CALLS = []


class FakeCore:
    """What ServerNode/WorkerNode offer to the lifecycle node."""

    def __init__(self, args, requests):
        self.args, self.requests = args, requests
        self.life = lc.Lifecycle()
        self.turns = 0

    def configure(self):
        self.life.trigger('configure')

    def activate(self):
        self.life.trigger('activate')
        return True

    def spin(self):
        while True:
            for transition in self.requests.take():
                self.life.request(transition)
            if self.life.finished:
                return
            self.turns += 1
            if self.turns == 3:           # Ctrl-C under ros2 launch, delivered to us
                signal.raise_signal(signal.SIGINT)

    def finish(self):
        CALLS.append(('finish', self.life.state))
        return {'completed': False}

    def shutdown(self):
        CALLS.append(('shutdown', self.life.state))

    def cleanup(self):
        self.life.trigger('cleanup')


@pytest.fixture
def ros_node(monkeypatch):
    inits = []
    rclpy = types.ModuleType('rclpy')
    rclpy.init = lambda args=None, signal_handler_options=None: inits.append(
        (args, signal_handler_options))
    rclpy.ok = lambda: True
    rclpy.shutdown = lambda: CALLS.append(('rclpy.shutdown', None))
    rclpy.spin_once = lambda node, timeout_sec=None: None
    lifecycle = types.ModuleType('rclpy.lifecycle')
    lifecycle.LifecycleNode = FakeLifecycleNode
    lifecycle.TransitionCallbackReturn = types.SimpleNamespace(SUCCESS='ok', FAILURE='fail')
    signals = types.ModuleType('rclpy.signals')
    signals.SignalHandlerOptions = types.SimpleNamespace(NO='no-handlers')
    for name, mod in (('rclpy', rclpy), ('rclpy.lifecycle', lifecycle),
                      ('rclpy.signals', signals)):
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr('rog_ros.nodes.settings.parameter_descriptor', lambda s: s.name)
    old = signal.getsignal(signal.SIGINT)
    module = importlib.reload(importlib.import_module('rog_ros.nodes.ros_node'))
    CALLS.clear()
    yield module, inits
    signal.signal(signal.SIGINT, old)
    for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    monkeypatch.undo()
    importlib.reload(module)


def test_lifecycle_node_wires_core_and_ctrl_c_writes_the_summary(ros_node):
    module, inits = ros_node
    argv = ['--workload', 'toy', '--ros-args', '-p', 'rank:=2', '-p', 'workers:=3']
    args = rog_worker.build_parser().parse_args(argv)
    # Execute
    code = module.run('rog_worker', args, FakeCore, argv, node_main.finish)
    # Assert
    assert code == 0
    assert inits == [(['rog'] + argv, 'no-handlers')]         # rclpy's handler disabled
    assert CALLS[:2] == [('configure', 'ok'), ('activate', 'ok')]
    assert CALLS[2] == ('finish', lc.FINALIZED)                # Ctrl-C: summary, then leave
    assert CALLS[3][0] == 'shutdown' and CALLS[-1][0] == 'rclpy.shutdown'


def test_lifecycle_node_declares_parameters_and_is_named_per_rank(ros_node):
    module, _ = ros_node
    args = rog_worker.build_parser().parse_args(['--rank', '1', '--staleness', '2'])
    from rog_ros.nodes.signals import SignalRequests
    core = FakeCore(args, SignalRequests())
    node = module.RogLifecycleNode('rog_worker', args, core)
    assert node.name == 'rog_worker_1' and core.ros_node is node
    assert node.params['staleness'] == 2 and node.params['rank'] == 1
    assert node.on_configure(None) == 'ok' and node.on_activate(None) == 'ok'
    assert node.on_deactivate(None) == 'ok' and node.on_activate(None) == 'ok'
    assert core.requests.take() == ['deactivate', 'activate']    # applied by the loop
    assert node.on_activate(None) == 'ok'
    core.life.trigger('deactivate')
    assert node.on_cleanup(None) == 'ok' and core.life.state == lc.UNCONFIGURED
    assert node.on_cleanup(None) == 'fail'                      # not from unconfigured
