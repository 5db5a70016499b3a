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

Checks the wiring, not rclpy (the stand-ins of ros_doubles): parameters declared from the
settings, node name, rclpy's SIGINT handler disabled and ours installed, lifecycle callbacks
mapped to the core, and the summary written (``finish``) before shutdown. test_ros_path runs
the node against a peer and lifecycle requests.
"""

import signal
import sys

import pytest
from rog_ros.nodes import lifecycle as lc
from rog_ros.nodes import node_main
from rog_ros.nodes import rog_worker
import ros_doubles

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

    def spin_once(self):
        for transition in self.requests.take():
            self.life.request(transition)
        if self.life.finished:
            return False
        self.turns += 1
        if self.turns == 3:               # Ctrl-C under ros2 launch, delivered to us
            signal.raise_signal(signal.SIGINT)
        return True

    def spin(self):
        while self.spin_once():
            pass

    def finish(self):
        CALLS.append(('finish', self.life.state))
        return {'completed': False}

    def shutdown(self):
        CALLS.append(('shutdown', self.life.state))

    def cleanup(self):
        self.life.trigger('cleanup')


@pytest.fixture
def ros_node(monkeypatch):
    old = {sig: signal.getsignal(sig)
           for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)}
    ros = ros_doubles.install(monkeypatch)
    from rog_ros.nodes import ros_node as module
    CALLS.clear()
    yield module, ros
    for sig, handler in old.items():
        signal.signal(sig, handler)
    ros_doubles.uninstall(monkeypatch)


def test_lifecycle_node_wires_core_and_ctrl_c_writes_the_summary(ros_node):
    module, ros = ros_node
    argv = ['--workload', 'toy', '--ros-args', '-p', 'rank:=2', '-p', 'workers:=3']
    args = rog_worker.build_parser().parse_args(argv)
    # Execute
    code = module.run('rog_worker', args, FakeCore, argv, node_main.finish)
    # Assert
    assert code == 0
    assert ros.args == ['rog'] + argv                           # rclpy's handler disabled
    assert ros.signal_handler_options.name == 'NO'
    node = ros.node('rog_worker_2')
    assert [(t, r.name) for t, r in node.transitions] == [
        ('configure', 'SUCCESS'), ('activate', 'SUCCESS')]
    assert CALLS[0] == ('finish', lc.FINALIZED)                # Ctrl-C: summary, then leave
    assert CALLS[1][0] == 'shutdown'
    assert node.destroyed and not ros.ok and ros.violations == []


def test_lifecycle_node_declares_parameters_and_is_named_per_rank(ros_node):
    module, ros = ros_node
    sys.modules['rclpy'].init(args=[])
    args = rog_worker.build_parser().parse_args(['--rank', '1', '--staleness', '2'])
    from rog_ros.nodes.signals import SignalRequests
    core = FakeCore(args, SignalRequests())
    node = module.RogLifecycleNode('rog_worker', args, core)
    assert node.get_name() == 'rog_worker_1' and core.ros_node is node
    assert node.get_parameter('staleness').value == 2
    assert node.get_parameter('rank').value == 1
    ok, fail = ros_doubles.TransitionCallbackReturn.SUCCESS, \
        ros_doubles.TransitionCallbackReturn.FAILURE
    assert node.on_configure(None) == ok and node.on_activate(None) == ok
    assert node.activation_requested and core.life.state == lc.INACTIVE   # run() activates
    node.started = True
    assert node.on_deactivate(None) == ok and node.on_activate(None) == ok
    assert core.requests.take() == ['deactivate', 'activate']    # applied by the loop
    assert node.on_cleanup(None) == ok and node.cleanup_requested   # run() cleans up
    assert node.on_configure(None) == fail                      # not before it is done
    node.started = node.cleanup_requested = False
    assert node.on_cleanup(None) == ok and core.life.state == lc.UNCONFIGURED
    assert node.on_cleanup(None) == fail                        # not from unconfigured
    assert isinstance(node.failure, lc.LifecycleError)
