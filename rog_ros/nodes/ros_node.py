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
ros_node: a training core inside a managed rclpy lifecycle node (ROS 2 only, import-guarded).

The node is thin: it declares every setting as a ROS 2 parameter with its descriptor, logs
through ``get_logger()``, hands itself to the core's RclpyBus (so the process is one ROS node
named ``rog_server`` / ``rog_worker_<rank>``) and maps the lifecycle services to the core:

* configure -> ``core.configure()`` (workload, engine, bus); cleanup -> ``core.cleanup()``;
* activate -> the first time ``core.activate()`` (peers matched, training starts), later a
  resume request; deactivate -> pause (the protocol keeps running, no computation starts);
* shutdown (and Ctrl-C) -> the core stops, the server writes its summary.

rclpy's own SIGINT handler is disabled (``SignalHandlerOptions.NO`` where rclpy has it, else
replaced after ``rclpy.init``): Ctrl-C under ``ros2 launch`` reaches our handler, which
requests shutdown, so the summary is written before the process ends.
"""

from __future__ import annotations

from rog_ros.nodes import lifecycle as lc
from rog_ros.nodes.driver import EngineFailure
from rog_ros.nodes.respawn import ENGINE_FAILED
from rog_ros.nodes.settings import declare_ros_parameters
from rog_ros.nodes.signals import SignalRequests

try:
    import rclpy
    from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
except ImportError:  # no ROS 2: node_main never calls in here (use_ros() is False)
    rclpy = None
    LifecycleNode = object
    TransitionCallbackReturn = None


class RogLifecycleNode(LifecycleNode):
    """A managed node around a ServerNode/WorkerNode core (see the module docstring)."""

    def __init__(self, role: str, args, core):
        super().__init__(args.node_name)
        declare_ros_parameters(self, role, args)
        self.core = core
        core.ros_node = self                 # the core's RclpyBus uses this node
        core.log = self.get_logger()
        self.started = False

    def _result(self, fn) -> object:
        try:
            fn()
        except Exception as err:  # noqa: B902 - a failed transition is reported, not raised
            self.get_logger().error(f'{type(err).__name__}: {err}')
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS

    def on_configure(self, state):
        return self._result(self.core.configure)

    def on_activate(self, state):
        if self.started:
            return self._result(lambda: self.core.requests.request('activate'))

        def start():
            if not self.core.activate():
                raise RuntimeError('shut down while waiting for the peers')
            self.started = True
        return self._result(start)

    def on_deactivate(self, state):
        return self._result(lambda: self.core.requests.request('deactivate'))

    def on_cleanup(self, state):
        return self._result(self.core.cleanup)

    def on_shutdown(self, state):
        return self._result(lambda: self.core.requests.request('shutdown'))


def init_rclpy(argv) -> SignalRequests:
    """``rclpy.init`` without its SIGINT handler; return our installed signal requests."""
    try:
        from rclpy.signals import SignalHandlerOptions
        rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    except (ImportError, TypeError):        # older rclpy: ours replaces its handler below
        rclpy.init(args=argv)
    return SignalRequests().install()


def plain_node(role: str, args, argv) -> tuple:
    """
    Return ``(signal requests, node)``: an rclpy node named ``args.node_name`` (netmon).

    Its settings are declared as parameters; SIGINT stays with our handler.
    """
    from rclpy.node import Node
    requests = init_rclpy(['rog'] + list(argv))
    node = Node(args.node_name)
    declare_ros_parameters(node, role, args)
    return requests, node


def run(role: str, args, core_class, argv, finish) -> int:
    """
    Run the core as a lifecycle node until it finishes or shutdown; the exit status.

    ``finish(core, log)`` writes and logs the results (``node_main.finish``, passed in so that
    this module does not import the one that imports it).
    """
    requests = init_rclpy(['rog'] + list(argv))
    core = core_class(args, requests)
    node = RogLifecycleNode(role, args, core)
    log = node.get_logger()
    try:
        if getattr(args, 'autostart', True):
            node.trigger_configure()
            node.trigger_activate()
        while not node.started and not requests.shutdown_requested:
            rclpy.spin_once(node, timeout_sec=0.1)  # lifecycle services until activated
        if node.started:
            core.spin()        # the bus spins this node: lifecycle services keep working
            finish(core, log)
        return 0
    except KeyboardInterrupt:
        return 0
    except EngineFailure as err:
        log.error(str(err))
        return ENGINE_FAILED
    except (RuntimeError, TimeoutError) as err:
        log.error(str(err))
        return 1
    finally:
        core.shutdown()
        if core.life.state != lc.FINALIZED:
            core.life.request('shutdown')
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
