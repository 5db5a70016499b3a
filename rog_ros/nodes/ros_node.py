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
through ``get_logger()``, hands itself and its executor to the core's RclpyBus (so the process
is one ROS node named ``rog_server`` / ``rog_worker_<rank>`` in the fleet namespace, or as
``-r __node:=`` / ``-r __ns:=`` say, spun by one executor) and maps
the lifecycle services to the core:

* configure -> ``core.configure()`` (workload, engine, bus); cleanup -> ``core.cleanup()``;
* activate -> the first time, :func:`run` calls ``core.activate()`` (peers matched, training
  starts) after the transition returned, outside every callback; later a resume request;
  deactivate -> pause (the protocol keeps running, no computation starts);
* shutdown (and Ctrl-C) -> the core stops, the server writes its summary;
* SIGUSR2 while waiting to be activated (``autostart:=false``) -> configure if need be, then
  activate, as on the non-ROS path; SIGUSR1/SIGUSR2 while training pause and resume.

Lifecycle requests are callbacks of the node's executor, which the core's bus spins while
training. Nothing that waits runs inside them: ``core.activate()`` waits for the peers (up to
``startup_timeout``) and a cleanup while training must not close the bus under the running
loop, so both are done by :func:`run`'s loop once the callback returned. A failed transition
keeps its exception; :func:`run` ends with the exit status of the non-ROS path for it.

rclpy's own SIGINT handler is disabled (``SignalHandlerOptions.NO`` where rclpy has it, else
replaced after ``rclpy.init``): Ctrl-C under ``ros2 launch`` reaches our handler, which
requests shutdown, so the summary is written before the process ends.
"""

from __future__ import annotations

from rog_ros.nodes import lifecycle as lc
from rog_ros.nodes.connect import PeerTimeout
from rog_ros.nodes.driver import EngineFailure
from rog_ros.nodes.respawn import ENGINE_FAILED, USAGE_ERROR
from rog_ros.nodes.settings import declare_ros_parameters, RUNTIME_SETTABLE
from rog_ros.nodes.signals import SignalRequests

try:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
except ImportError:  # no ROS 2: node_main never calls in here (missing_ros() says why)
    rclpy = None
    SingleThreadedExecutor = None
try:
    from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
except ImportError:  # no ROS 2, or one older than Humble (Foxy, Galactic): no managed nodes
    LifecycleNode = object
    TransitionCallbackReturn = None


def missing_ros(lifecycle: bool = True) -> str | None:
    """
    Return why this process cannot be a ROS 2 node, or None when it can.

    ``lifecycle``: the node is a managed one (rog_server, rog_worker), which needs
    ``rclpy.lifecycle`` (ROS 2 Humble or newer); netmon is a plain node.
    """
    from rog_ros.transport.choose import rclpy_available
    if rclpy is None or not rclpy_available():
        return ("rclpy or the built rog_ros messages do not import (source ROS 2's setup.bash "
                "and the workspace's install/setup.bash)")
    if lifecycle and TransitionCallbackReturn is None:
        return ('this rclpy has no rclpy.lifecycle (ROS 2 Foxy or Galactic): rog_server and '
                'rog_worker need ROS 2 Humble or newer')
    return None


class RogLifecycleNode(LifecycleNode):
    """A managed node around a ServerNode/WorkerNode core (see the module docstring)."""

    def __init__(self, role: str, args, core):
        # rcl applies the -r __node:= / __ns:= rules again: the same result (ros_names)
        super().__init__(args.node_name, namespace=args.node_namespace)
        declare_ros_parameters(self, role, args)
        follow_runtime_settings(self, args, lambda: getattr(core, 'diagnostics', None))
        self.core = core
        core.ros_node = self                 # the core's RclpyBus uses this node
        core.log = self.get_logger()
        if getattr(args, 'namespace_note', None):
            core.log.warning(args.namespace_note)
        self.started = False                 # core.activate() done: the core is training
        self.activation_requested = False    # activate accepted; run() activates the core
        self.cleanup_requested = False       # cleanup accepted while training; run() does it
        self.configured = False              # the state machine is past configure
        self.failure = None                  # the exception of the last failed transition

    def _result(self, fn) -> object:
        try:
            fn()
        except Exception as err:  # noqa: B902 - a failed transition is reported, not raised
            self.failure = err
            self.get_logger().error(f'{type(err).__name__}: {err}')
            return TransitionCallbackReturn.FAILURE
        self.failure = None
        return TransitionCallbackReturn.SUCCESS

    def on_configure(self, state):
        if self.cleanup_requested:          # run() has not released the last bus yet
            self.get_logger().warning('configure refused: the cleanup before it is still '
                                      'under way; request configure again')
            return TransitionCallbackReturn.FAILURE
        result = self._result(self.core.configure)
        self.configured = result == TransitionCallbackReturn.SUCCESS
        return result

    def on_activate(self, state):
        if self.started:
            return self._result(lambda: self.core.requests.request('activate'))
        self.activation_requested = True     # run() waits for the peers, not this callback
        return TransitionCallbackReturn.SUCCESS

    def on_deactivate(self, state):
        return self._result(lambda: self.core.requests.request('deactivate'))

    def on_cleanup(self, state):
        if self.started:                     # inside the core's bus.poll: run() cleans up
            self.cleanup_requested = True
            self.configured = False
            return TransitionCallbackReturn.SUCCESS
        result = self._result(self.core.cleanup)
        self.configured = result != TransitionCallbackReturn.SUCCESS
        return result

    def on_shutdown(self, state):
        return self._result(lambda: self.core.requests.request('shutdown'))


def follow_runtime_settings(node, args, diagnostics) -> None:
    """
    Apply ``ros2 param set`` of the settings that may change at run time (RUNTIME_SETTABLE).

    ``diagnostics()`` returns the node's DiagnosticsPublisher (None before configure): a new
    ``diagnostics_hz`` changes its rate, and ``args`` keeps it for a later configure. rclpy
    has checked the descriptor (type, range, read-only) before it calls this.
    """
    from rcl_interfaces.msg import SetParametersResult

    def on_set(parameters):
        for param in parameters:
            if param.name not in RUNTIME_SETTABLE:
                continue
            setattr(args, param.name, param.value)
            publisher = diagnostics()
            if param.name == 'diagnostics_hz' and publisher is not None:
                publisher.set_rate(float(param.value))
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(on_set)


def init_rclpy(argv) -> SignalRequests:
    """``rclpy.init`` without its SIGINT handler; return our installed signal requests."""
    try:
        from rclpy.signals import SignalHandlerOptions
        rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    except (ImportError, TypeError):        # older rclpy: ours replaces its handler below
        rclpy.init(args=argv)
    return SignalRequests().install()


def node_executor(node):
    """Return a SingleThreadedExecutor that ``node`` was added to (the process's one)."""
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    return executor


def close_node(node, executor) -> None:
    """Shut ``executor`` down, destroy ``node``, shut rclpy down (never from a callback)."""
    try:
        if executor is not None:
            executor.shutdown()
        node.destroy_node()
    finally:
        if rclpy.ok():
            rclpy.shutdown()


def plain_node(role: str, args, argv) -> tuple:
    """
    Return ``(signal requests, node, executor)``: an rclpy node named ``args.node_name`` (netmon).

    Its settings are declared as parameters; SIGINT stays with our handler. The caller spins
    ``executor`` (parameter services) and ends with :func:`close_node`.
    """
    from rclpy.node import Node
    requests = init_rclpy(['rog'] + list(argv))
    node = Node(args.node_name, namespace=args.node_namespace)
    declare_ros_parameters(node, role, args)
    return requests, node, node_executor(node)


def failure_status(err, usage_errors=(), configuring: bool = False) -> int:
    """
    Return the exit status of a node that failed with ``err``: node_main's, for the same errors.

    3 (ENGINE_FAILED) when the engine cannot go on, 4 (INCOMPATIBLE_FLEET) when every robot
    runs an incompatible rog_ros (the server's) or the server does (a robot's:
    ``worker_node.ServerIncompatible``), 1 when the peers did not appear or went silent, 2
    (USAGE_ERROR) for ``usage_errors`` and, while configuring, for every ValueError (bad
    settings or state, an unusable model file: starting again cannot help), else 1.
    """
    if isinstance(err, EngineFailure):
        return ENGINE_FAILED
    if isinstance(err, (PeerTimeout, TimeoutError)):
        return getattr(err, 'exit_status', 1)     # (4: robots' or server's rog_ros differs)
    if isinstance(err, tuple(usage_errors)) or (configuring and isinstance(err, ValueError)):
        return USAGE_ERROR
    return 1


def _transition_failed(log, transition: str, node, usage_errors) -> int:
    err = node.failure
    status = failure_status(err, usage_errors, configuring=transition == 'configure')
    cause = f'{type(err).__name__}: {err}' if err is not None else 'its callback failed'
    log.error(f'{transition} failed ({cause}): exit status {status}')
    return status


def _train(node, core) -> bool:
    """Run the activated core; True when it finished, False after a lifecycle cleanup."""
    node.started = True
    try:
        while core.spin_once():
            if node.cleanup_requested:
                break
    finally:
        node.started = False
    if not node.cleanup_requested:
        return True
    node.cleanup_requested = False
    for transition in core.requests.take():     # the deactivate before it, not yet applied
        core.life.request(transition)
    if core.life.finished:                       # a shutdown came with it
        return True
    core.cleanup()                               # outside every callback, the loop stopped
    return False


def _activate_on_signal(node, requests, log) -> None:
    """
    SIGUSR2 while the node waits to be activated: configure (if need be) and activate.

    The non-ROS path does the same for ``autostart:=false`` (it configures at start and
    waits for SIGUSR2), so a robot's start script works under both; the transitions are the
    ones ``ros2 lifecycle set`` would request, triggered here outside every callback. A
    failed one is logged and the node keeps waiting, as after a failed service request.
    """
    for transition in requests.take():
        if transition != 'activate':   # (shutdown: shutdown_requested; deactivate: not active)
            continue
        for name, trigger in (('configure', node.trigger_configure),
                              ('activate', node.trigger_activate)):
            if name == 'configure' and node.configured:
                continue
            try:
                ok = trigger() == TransitionCallbackReturn.SUCCESS
            except Exception as err:  # noqa: B902 - rclpy's RCLError: not from this state
                log.error(f'SIGUSR2: {name} refused: {err}')
                ok = False
            if not ok:
                log.error(f'SIGUSR2: {name} failed; still waiting to be activated')
                break
        else:
            log.info('SIGUSR2: configured and activated')


def run(role: str, args, core_class, argv, finish, usage_errors=()) -> int:
    """
    Run the core as a lifecycle node until it finishes or shutdown; the exit status.

    ``finish(core, log)`` writes and logs the results (``node_main.finish``, passed in so that
    this module does not import the one that imports it). Exit status as on the non-ROS path:
    0 finished or shut down, 1 peers not found or silent, 2 bad settings (a failed configure,
    ``usage_errors``), 3 engine failure, 4 every robot of another rog_ros build (a server on
    the embedded DDS bus only: ``RclpyBus`` cannot tell the builds apart).
    """
    requests = init_rclpy(['rog'] + list(argv))
    core = core_class(args, requests)
    node = RogLifecycleNode(role, args, core)
    log = node.get_logger()
    executor = node_executor(node)
    core.ros_executor = executor    # the core's RclpyBus spins this one, and adds no other
    try:
        if getattr(args, 'autostart', True):
            if node.trigger_configure() != TransitionCallbackReturn.SUCCESS:
                return _transition_failed(log, 'configure', node, usage_errors)
            if node.trigger_activate() != TransitionCallbackReturn.SUCCESS:
                return _transition_failed(log, 'activate', node, usage_errors)
        while True:
            while not node.activation_requested and not requests.shutdown_requested:
                executor.spin_once(timeout_sec=0.1)   # lifecycle services until activated
                _activate_on_signal(node, requests, log)
            if requests.shutdown_requested:
                return 0
            node.activation_requested = False
            if not core.activate():     # waits for the peers: here, never in a callback
                log.info('shut down while waiting for the peers')
                return 0
            if _train(node, core):      # the bus spins the executor: services keep working
                finish(core, log)
                return 0
            log.info('cleaned up: unconfigured, waiting for configure')
    except KeyboardInterrupt:
        return 0
    except (RuntimeError, TimeoutError) + tuple(usage_errors) as err:  # peers, engine, rcl
        log.error(str(err))
        return failure_status(err, usage_errors)
    finally:
        try:
            core.shutdown()
            if core.life.state != lc.FINALIZED:
                core.life.request('shutdown')
        finally:
            close_node(node, executor)
