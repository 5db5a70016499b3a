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
The rclpy path against stand-ins that behave as rclpy and rosidl do (see ros_doubles).

ROS 2 is not installed here, so these run the real RclpyBus, settings, ros_node and netmon on
stand-ins that refuse what rclpy refuses: a generated message's setter asserts its field's
Python type (an octet takes ``bytes``), a parameter override of another type raises, a node
belongs to one executor at a time, and an executor refuses to be spun or shut down from one of
its own callbacks (rclpy would hang). A peer node on the same graph and scripted
``ros2 lifecycle set`` requests drive a small core that uses the real bus code.
"""

import os
import signal
import subprocess
import sys
import time

import pytest
from rog_ros.nodes import lifecycle as lc
from rog_ros.nodes import node_main, rog_worker, settings
from rog_ros.nodes.connect import open_bus, wait_matched
from rog_ros.nodes.diagnostics import DiagnosticsPublisher, link_statuses
from rog_ros.nodes.driver import EngineFailure
from rog_ros.nodes.durable import StateError
from rog_ros.protocol.messages import LinkStats
from rog_ros.transport import standard_msgs
import ros_doubles

NODE = 'rog_worker_0'
ROS = []
CORES = []
CONFIGURE_ERROR = []


class Hung(BaseException):
    """The test ran 60 s: code that spins forever (no ``except Exception`` catches this)."""


def _hung(signum, frame):
    raise Hung('no progress in 60 s')


@pytest.fixture
def ros(monkeypatch):
    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE', 'ROG_BUS'):
        monkeypatch.delenv(var, raising=False)
    handlers = {sig: signal.getsignal(sig) for sig in (
        signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM)}
    signal.signal(signal.SIGALRM, _hung)
    signal.alarm(60)
    doubles = ros_doubles.install(monkeypatch, deadline_s=10.0)
    for registry in (ROS, CORES, CONFIGURE_ERROR):
        registry.clear()
    ROS.append(doubles)
    yield doubles
    signal.alarm(0)
    for sig, handler in handlers.items():
        signal.signal(sig, handler)
    ros_doubles.uninstall(monkeypatch)


def _ros_node():
    from rog_ros.nodes import ros_node
    return ros_node


def _worker_args(*extra):
    argv = ['--workload', 'toy', '--workers', '1', '--rank', '0', '--startup-timeout', '2',
            *extra]
    return argv, rog_worker.build_parser().parse_args(argv)


# ---------------------------------------------------------------------- harness
class Core:
    """A small core shaped like ServerNode/WorkerNode, on the real open_bus, RclpyBus, waits."""

    def __init__(self, args, requests):
        self.args, self.requests = args, requests
        self.life = lc.Lifecycle()
        self.bus = self.ros_node = self.ros_executor = self.diagnostics = None
        self.received, self.calls, self.configures = [], [], 0
        CORES.append(self)

    def _inside(self) -> bool:
        return ROS[0].in_callback()

    def configure(self):
        self.calls.append(('configure', self._inside()))
        if CONFIGURE_ERROR:
            raise CONFIGURE_ERROR[0]
        self.bus = open_bus('rclpy', '/t', None, None, self.ros_node, self.ros_executor)
        self.bus.subscribe('peer/link_stats')
        self.bus.advertise('core/link_stats')
        self.diagnostics = DiagnosticsPublisher(
            self.bus, lambda now: link_statuses('core', self.received[-1:]),
            self.args.diagnostics_hz)
        self.received, self.configures = [], self.configures + 1
        self.life.trigger('configure')

    def _keep_waiting(self) -> bool:
        ROS[0].tick()                # time passes: the peer may appear meanwhile
        return not self.requests.shutdown_requested

    def activate(self) -> bool:
        self.calls.append(('activate', self._inside()))
        waited = wait_matched(self.bus, ['peer/link_stats', 'core/link_stats'],
                              self.args.startup_timeout, keep_waiting=self._keep_waiting,
                              poll_s=0.002)
        if waited < 0:
            return False
        self.life.trigger('activate')
        return True

    def spin_once(self) -> bool:
        for transition in self.requests.take():
            self.life.request(transition)
        if self.life.finished:
            return False
        self.received += [msg for _, msg in self.bus.poll(0.002)]
        self.diagnostics.maybe_publish()
        if self.life.training:
            self.bus.publish('core/link_stats', LinkStats(0, 'core', time.time()))
        return True

    def spin(self):
        while self.spin_once():
            pass

    def cleanup(self):
        self.calls.append(('cleanup', self._inside()))
        self.life.trigger('cleanup')
        self.bus.close()
        self.bus = None

    def shutdown(self):
        self.life.request('shutdown')
        if self.bus is not None:
            self.bus.close()
            self.bus = None

    def finish(self):
        self.calls.append(('finish', self.life.state))
        return {}


class Peer:
    """The other robot: a node of its own (own executor) that talks LinkStats with the core."""

    def __init__(self, ros):
        from rog_ros.transport.rclpy_bus import RclpyBus
        self.node = ros.Node('peer')
        self.bus = RclpyBus(namespace='/t', node=self.node)
        self.bus.subscribe('core/link_stats')
        self.bus.advertise('peer/link_stats')
        self.received, self.diagnostics, self.next_at = [], [], 0.0
        array = ros.messages.classes['diagnostic_msgs/DiagnosticArray']
        self.node.create_subscription(array, '/diagnostics', self.diagnostics.append, 10)

    def tick(self):
        if time.monotonic() >= self.next_at:        # 200 Hz
            self.next_at = time.monotonic() + 0.005
            self.bus.publish('peer/link_stats', LinkStats(1, 'wlan0', time.time()))
        self.received += self.bus.poll(0.0)


class World:
    """Outside the node under test, one step per executor turn: a peer, `ros2 lifecycle set`."""

    def __init__(self, ros):
        self.ros, self.peer, self.steps, self.calls, self.pending = ros, None, [], [], None
        self.peer_at = None
        self.gave_up = False
        ros.on_tick.append(self.tick)
        ros.on_deadline = self.give_up

    def give_up(self):
        """Out of time (a hang): ask the node to shut down, as Ctrl-C would."""
        self.gave_up = True
        for core in CORES:
            core.requests.request('shutdown')

    def script(self, *steps):
        """Do ``(condition, action)`` steps in turn; an action's service call must end first."""
        self.steps = list(steps)

    def tick(self):
        if self.peer is not None:
            self.peer.tick()
        if self.pending is not None and not self.pending['done']:
            return
        if self.steps and self.steps[0][0]():
            _, action = self.steps.pop(0)
            self.pending = action()

    def change(self, transition):
        """Return the action ``ros2 lifecycle set rog_worker_0 <transition>``."""
        def action():
            call = self.ros.node(NODE).request_change_state(transition)
            self.calls.append(call)
            return call
        return action

    def peer_up(self):
        self.peer, self.peer_at = Peer(self.ros), time.monotonic()


def always():
    return True


def received(n):
    return lambda: bool(CORES) and len(CORES[-1].received) >= n


@pytest.fixture
def world(ros):
    return World(ros)


# ---------------------------------------------------------------------- A: messages
def test_standard_messages_get_the_generated_field_types(ros):
    from rog_ros.transport import rclpy_bus
    status_cls = ros.messages.classes['diagnostic_msgs/DiagnosticStatus']
    with pytest.raises(AssertionError, match="'level' field must be of type 'bytes'"):
        status_cls(level=1)                           # the stand-in refuses it, as rosidl does
    stats = [LinkStats(1, 'wlan0', 5.0, emulated_mbps=0.0)]  # no traffic: WARN
    msg = standard_msgs.DiagnosticArray.now(link_statuses('netmon_1', stats))
    # Execute
    out = rclpy_bus.to_ros(msg)
    # Assert
    status = out.status[0]
    assert status.level == status_cls.WARN == b'\x01'
    assert isinstance(out.header, ros.messages.classes['std_msgs/Header'])
    assert (out.header.stamp.sec, out.header.stamp.nanosec) == \
        (msg.header.stamp.sec, msg.header.stamp.nanosec)
    assert status.name == msg.status[0].name and status.hardware_id == msg.status[0].hardware_id
    assert [(kv.key, kv.value) for kv in status.values] == \
        [(kv.key, kv.value) for kv in msg.status[0].values]


def test_diagnostics_and_protocol_messages_publish_on_rclpy(ros):
    from rog_ros.transport.rclpy_bus import RclpyBus
    sys.modules['rclpy'].init(args=[])
    listener = ros.Node('rqt_runtime_monitor')
    got = []
    listener.create_subscription(ros.messages.classes['diagnostic_msgs/DiagnosticArray'],
                                 '/diagnostics', got.append, 10)
    bus, other = (RclpyBus(namespace='/t', node=ros.Node(name)) for name in ('a', 'b'))
    other.subscribe('netmon/link_stats')
    other.subscribe('/diagnostics')               # a standard type: fleet's watcher reads it
    sent = LinkStats(3, 'wlan0', 12.5, tx_bytes=7, tx_mbps=1.5, auth_tag=b'\x01\x02')
    publisher = DiagnosticsPublisher(bus, lambda now: link_statuses('netmon_3', [sent]), 1.0)
    # Execute
    assert publisher.maybe_publish()
    bus.publish('netmon/link_stats', sent)
    # Assert
    while listener.work:
        listener.work.popleft()()
    assert got and got[0].status[0].level == b'\x00'   # traffic: OK
    heard = dict(other.poll(0.0))
    assert sorted(heard) == ['/diagnostics', '/t/netmon/link_stats']
    assert heard['/t/netmon/link_stats'] == sent
    diagnostics = heard['/diagnostics']
    assert isinstance(diagnostics, standard_msgs.DiagnosticArray)
    expected = link_statuses('netmon_3', [sent])
    assert [(d.level, d.name, d.message) for d in diagnostics.status] == \
        [(d.level, d.name, d.message) for d in expected]
    assert diagnostics.status[0].values == expected[0].values
    assert (diagnostics.header.stamp.sec, diagnostics.header.stamp.nanosec) == \
        (got[0].header.stamp.sec, got[0].header.stamp.nanosec)
    bus.close()
    other.close()
    assert ros.violations == []


def test_a_second_node_of_one_name_in_the_graph_is_said_once_in_one_line(ros, monkeypatch):
    from rog_ros.transport.rclpy_bus import RclpyBus
    monkeypatch.setenv('ROS_DOMAIN_ID', '7')
    sys.modules['rclpy'].init(args=[])
    ros.Node('rog_worker_0', namespace='/rog')     # the same node of another robot fleet
    twin, alone = (RclpyBus(namespace='/rog', node=ros.Node(name, namespace='/rog'))
                   for name in ('rog_worker_0', 'rog_worker_1'))
    # Execute
    for _ in range(3):
        twin.poll(0.0)
        alone.poll(0.0)
    # Assert
    said = [(name, m) for _, name, m in ros.logs if 'already announces a node named' in m]
    assert said == [('rog_worker_0', twin.namesake_said)]
    assert twin.namesake_said.startswith('another participant on DDS domain 7 already '
                                         'announces a node named /rog/rog_worker_0 (')
    assert 'namespace:=, --namespace' in said[0][1] and '\n' not in said[0][1]
    assert alone.namesake_said is None
    twin.close()
    alone.close()
    assert ros.violations == []


class _Clock:
    """Stand in for rclpy_bus's ``time``: a monotonic clock the test moves."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        """Return the test's time."""
        return self.now


def test_the_node_already_running_warns_of_a_namesake_started_long_after_it_rclpy(
        ros, monkeypatch):
    """Look for the bus's whole life (every few seconds after the first): the earlier warns."""
    from rog_ros.transport import rclpy_bus, topics
    monkeypatch.setenv('ROS_DOMAIN_ID', '7')
    clock = _Clock()
    monkeypatch.setattr(rclpy_bus, 'time', clock)
    sys.modules['rclpy'].init(args=[])
    first = rclpy_bus.RclpyBus(namespace='/rog', node=ros.Node('rog_worker_0', namespace='/rog'))
    for _ in range(20):                            # a minute alone: nothing to say
        first.poll(0.0)
        clock.now += 3.0
    alone = first.namesake_said
    # Execute: the same node of another robot fleet, a minute later
    ros.Node('rog_worker_0', namespace='/rog')
    looks = 0
    while first.namesake_said is None and looks < 10:
        first.poll(0.0)
        clock.now += 1.0
        looks += 1
    # Assert: said within one later period, once
    assert alone is None
    assert first.namesake_said is not None and looks <= topics.NAMESAKE_LATER_S + 1
    clock.now += 2 * topics.NAMESAKE_LATER_S
    first.poll(0.0)                                # (said once: no look after it)
    said = [m for _, _, m in ros.logs if 'already announces a node named' in m]
    assert len(said) == 1
    first.close()
    assert ros.violations == []


def _no_domain_id():
    """Stand in for a context whose domain cannot be read (rclpy's RCLError, shut down)."""
    raise RuntimeError('rcl context is invalid')


def test_a_domain_that_cannot_be_read_leaves_the_namesake_line_and_the_node(ros, monkeypatch):
    """Say the namesake with $ROS_DOMAIN_ID's domain where the context's cannot be read."""
    from rog_ros.transport.rclpy_bus import RclpyBus
    monkeypatch.setenv('ROS_DOMAIN_ID', '9')
    sys.modules['rclpy'].init(args=[])
    ros.get_domain_id = _no_domain_id
    ros.Node('rog_worker_0', namespace='/rog')     # the same node of another robot fleet
    twin = RclpyBus(namespace='/rog', node=ros.Node('rog_worker_0', namespace='/rog'))
    # Execute: a diagnostics look never ends the node
    got = twin.poll(0.0)
    # Assert
    assert got == []
    assert twin.namesake_said.startswith('another participant on DDS domain 9 already ')
    twin.close()


# ---------------------------------------------------------------------- B: overrides
def test_rclpy_overrides_of_another_type_do_not_abort_the_node(ros, tmp_path):
    params = tmp_path / 'fleet.yaml'
    params.write_text('/**:\n  ros__parameters:\n    workers: 3\n    trace_scale: 1\n')
    argv = ['--workers', '5', '--ros-args', '-p', 'lr:=1', '-p', 'epoch:=0',
            '--params-file', str(params)]
    args = rog_worker.build_parser().parse_args(argv)
    sys.modules['rclpy'].init(args=['rog'] + argv)
    descriptor = ros.messages.classes['rcl_interfaces/ParameterDescriptor']
    with pytest.raises(ros_doubles.InvalidParameterTypeException):
        ros.Node('plain').declare_parameter('lr', 0.0, descriptor())   # rclpy, as is
    node = ros.Node(args.node_name)
    # Execute
    settings.declare_ros_parameters(node, 'rog_worker', args)
    # Assert: the values the node runs with, typed as declared
    assert node.get_parameter('lr').value == args.lr == 1.0
    assert node.get_parameter('epoch').value == 0.0
    assert node.get_parameter('trace_scale').value == 1.0
    assert node.get_parameter('workers').value == args.workers == 5   # flag over the file
    assert node.describe_parameter('lr').type == ros_doubles.ParameterType.DOUBLE


def test_an_rclpy_without_ignore_override_still_declares(ros):
    sys.modules['rclpy'].init(args=[])
    _, args = _worker_args('--staleness', '2')

    class OldNode(ros.Node):
        """An rclpy whose declare_parameter has no ignore_override (Dashing)."""

        def declare_parameter(self, name, value=None, descriptor=None):
            return super().declare_parameter(name, value, descriptor)

    node = OldNode(args.node_name)
    settings.declare_ros_parameters(node, 'rog_worker', args)
    assert node.get_parameter('staleness').value == 2
    with pytest.raises(TypeError, match='ParameterDescriptor'):     # other TypeErrors stay
        node.declare_parameter('other', 1, 'not a descriptor')


# ---------------------------------------------------------------------- C, D, E: one executor
def test_lifecycle_services_and_messages_share_one_executor(ros, world):
    ros_node = _ros_node()
    argv, args = _worker_args('--ros-args', '-p', 'autostart:=false', '-p',
                              'diagnostics_hz:=100.0')
    world.script((always, world.peer_up), (always, world.change('configure')),
                 (always, world.change('activate')),
                 (received(5), world.change('shutdown')))
    # Execute
    code = ros_node.run('rog_worker', args, Core, argv, node_main.finish)
    # Assert: every request answered, traffic both ways while training, one executor
    core = CORES[-1]
    assert not world.gave_up, f'hung: received {len(core.received)} messages'
    assert code == 0
    assert [(c['transition'], c['success']) for c in world.calls] == \
        [('configure', True), ('activate', True), ('shutdown', True)]
    assert len(core.received) >= 5 and world.peer.received
    levels = {s.level for array in world.peer.diagnostics for s in array.status}
    assert levels and levels <= {b'\x00', b'\x01', b'\x02'}    # octets, on /diagnostics
    assert core.calls[-1] == ('finish', lc.FINALIZED)
    assert len(ros.executors) == 2               # the node's one and the peer's
    assert ros.violations == []
    assert ros.node(NODE).destroyed and not ros.ok


class Opened(Exception):
    """open_bus was called (the test needs no more of configure)."""


@pytest.mark.parametrize('role', ['rog_server', 'rog_worker'])
def test_the_cores_hand_their_node_and_its_executor_to_the_bus(role, tmp_path, monkeypatch):
    from rog_ros.nodes import rog_server, server_node, worker_node
    seen = []

    def open_bus_(kind, namespace, key=None, record=None, node=None, executor=None,
                  node_name=None, node_namespace=None):
        seen.append((node, executor))
        raise Opened

    common = ['--workload', 'toy', '--workers', '1']
    if role == 'rog_server':
        monkeypatch.setattr(server_node, 'open_bus', open_bus_)
        core = server_node.ServerNode(rog_server.build_parser().parse_args(
            common + ['--out', str(tmp_path)]), background_eval=False)
    else:
        monkeypatch.setattr(worker_node, 'open_bus', open_bus_)
        core = worker_node.WorkerNode(rog_worker.build_parser().parse_args(common))
    core.ros_node, core.ros_executor = 'the lifecycle node', 'its executor'   # as run() does
    # Execute
    with pytest.raises(Opened):
        core.configure()
    # Assert
    assert seen == [('the lifecycle node', 'its executor')]


def test_activate_returns_at_once_and_run_waits_for_the_peers(ros, world):
    ros_node = _ros_node()
    argv, args = _worker_args('--ros-args', '-p', 'autostart:=false', '-p',
                              'startup_timeout:=0.5')
    world.script((always, world.change('configure')), (always, world.change('activate')),
                 (always, world.peer_up), (received(3), world.change('shutdown')))
    # Execute: the peer appears only once the activate request was answered
    code = ros_node.run('rog_worker', args, Core, argv, node_main.finish)
    # Assert
    core = CORES[-1]
    assert not world.gave_up and code == 0
    activate = world.calls[1]
    assert activate['success'] is True and activate['at'] <= world.peer_at
    assert ('activate', False) in core.calls      # in run()'s loop, not in the callback
    assert ros.violations == []


def _signal(signum):
    """Return the action ``kill -<signum> <node's pid>`` (the handler only queues it)."""
    def action():
        os.kill(os.getpid(), signum)
    return action


@pytest.mark.parametrize('configured_first', [False, True])
def test_sigusr2_activates_a_node_started_with_autostart_false(ros, world, configured_first):
    """As the non-ROS path and the docs say: SIGUSR2 configures if need be and activates."""
    ros_node = _ros_node()
    argv, args = _worker_args('--ros-args', '-p', 'autostart:=false')
    first = [(always, world.change('configure'))] if configured_first else []
    world.script(*first, (always, world.peer_up), (always, _signal(signal.SIGUSR2)),
                 (received(3), world.change('shutdown')))
    # Execute
    code = ros_node.run('rog_worker', args, Core, argv, node_main.finish)
    # Assert: trained (messages received), then shut down by the service; nothing hung
    core = CORES[-1]
    assert not world.gave_up, f'hung: received {len(core.received)} messages'
    assert code == 0 and len(core.received) >= 3
    assert [c[0] for c in core.calls].count('configure') == 1
    assert ('activate', False) in core.calls
    assert ros.node(NODE).state == 'finalized'
    assert ros.violations == []


def test_sigusr2_with_a_failing_configure_keeps_waiting(ros, world):
    ros_node = _ros_node()
    argv, args = _worker_args('--ros-args', '-p', 'autostart:=false')
    CONFIGURE_ERROR.append(ValueError('no such workload'))
    world.script((always, _signal(signal.SIGUSR2)), (always, world.change('shutdown')))
    # Execute
    code = ros_node.run('rog_worker', args, Core, argv, node_main.finish)
    # Assert: logged, not activated, shut down on request
    assert not world.gave_up and code == 0
    assert any('SIGUSR2: configure failed' in message for _, _, message in ros.logs)
    assert not any(c[0] == 'activate' for c in CORES[-1].calls)


@pytest.mark.parametrize('autostart', ['true', 'false'])
def test_peers_that_never_appear_end_the_node_with_status_1(ros, world, autostart):
    ros_node = _ros_node()
    argv, args = _worker_args('--ros-args', '-p', f'autostart:={autostart}', '-p',
                              'startup_timeout:=0.3')
    if autostart == 'false':
        world.script((always, world.change('configure')), (always, world.change('activate')))
    # Execute
    code = ros_node.run('rog_worker', args, Core, argv, node_main.finish)
    # Assert: as rog_worker without ROS (node_main): 1, so that respawn restarts it
    assert not world.gave_up and code == 1
    assert any('no peer on' in message for _, _, message in ros.logs)


def test_cleanup_while_training_waits_on_nothing_and_configure_starts_again(ros, world):
    ros_node = _ros_node()
    argv, args = _worker_args()                   # autostart: the bus polls the services
    world.script((always, world.peer_up), (received(3), world.change('deactivate')),
                 (always, world.change('cleanup')),
                 (lambda: ('cleanup', False) in CORES[-1].calls, world.change('configure')),
                 (always, world.change('activate')),
                 (lambda: CORES[-1].configures == 2 and len(CORES[-1].received) >= 3,
                  world.change('shutdown')))
    # Execute
    code = ros_node.run('rog_worker', args, Core, argv, node_main.finish)
    # Assert
    core = CORES[-1]
    assert ros.violations == []                   # no shutdown() from inside a callback
    assert not world.gave_up and code == 0
    assert [c['success'] for c in world.calls] == [True] * 5
    assert ('cleanup', False) in core.calls       # done by run(), the loop stopped
    assert [t for t, _, _ in core.life.history] == [
        'configure', 'activate', 'deactivate', 'cleanup', 'configure', 'activate', 'shutdown']


def test_closing_a_bus_from_a_callback_of_its_executor_waits_for_nothing(ros):
    from rog_ros.transport.rclpy_bus import RclpyBus
    sys.modules['rclpy'].init(args=[])
    node = ros.Node('lifecycle_node')
    executor = ros.SingleThreadedExecutor()
    executor.add_node(node)
    shared = RclpyBus('/t', node=node, executor=executor)
    own = RclpyBus('/t', node=ros.Node('other'))
    assert node.executor is executor                 # the bus did not take the node away
    node.work.append(shared.close)                   # a lifecycle cleanup, served by poll
    own._node.work.append(own.close)
    # Execute
    executor.spin_once(0.0)
    own._executor.spin_once(0.0)
    # Assert: nothing waited for the running callback; the shared executor goes on
    assert ros.violations == []
    assert executor.get_nodes() == [node] and node.executor is executor
    node.work.append(lambda: None)
    executor.spin_once(0.0)
    assert not node.work


# ---------------------------------------------------------------------- F: exit status
@pytest.mark.parametrize('error, status', [
    (ValueError('--init-model old.pt: no such file'), 2),
    (StateError('state_dir/worker_0.pt is from another fleet'), 2),
    (EngineFailure('worker 0: training diverged'), 3),
    (RuntimeError('no DDS participant'), 1),
])
def test_a_failed_configure_ends_with_the_status_of_its_cause(ros, world, error, status):
    CONFIGURE_ERROR.append(error)
    argv, _ = _worker_args('--bus', 'rclpy')
    # Execute: as `ros2 run rog_ros rog_worker` does
    code = node_main.run_node('rog_worker', rog_worker.__doc__, Core, argv,
                              usage_errors=(StateError,))
    # Assert: the status of the non-ROS path, and the real cause in the log
    assert code == status
    errors = [message for severity, _, message in ros.logs if severity == 'ERROR']
    assert any(str(error) in message for message in errors)
    assert not any('not registered' in message for message in errors)
    assert not world.gave_up and ros.violations == []


# ---------------------------------------------------------------------- G: netmon
def test_netmon_serves_its_parameters_and_leaves_rclpy_clean(ros, world):
    from rog_ros.nodes import netmon
    got, calls = [], []
    listener = []

    def ask():
        node = [n for n in ros.nodes if n.get_name().startswith('netmon')][0]
        calls.append(node.call(lambda: node.get_parameter('rate_hz').value))
        calls.append(node.call(lambda: node.set_parameters(
            [ros_doubles.Parameter('diagnostics_hz', value=40.0)])[0].successful))
        listener.append(ros.Node('listener'))
        listener[0].create_subscription(
            ros.messages.classes['diagnostic_msgs/DiagnosticArray'], '/diagnostics',
            got.append, 10)
        return None

    def drain():
        while listener and listener[0].work:
            listener[0].work.popleft()()
    world.script((always, ask))
    ros.on_tick.append(drain)
    # Execute
    code = netmon.main(['--bus', 'rclpy', '--interface', 'lo', '--nodes', '0',
                        '--rate-hz', '50', '--duration', '0.6'])
    # Assert: parameter services answered, diagnostics at the new rate, node and rclpy closed
    assert code == 0
    assert [c['result'] for c in calls] == [50.0, True]
    assert len(got) >= 3 and got[-1].status[0].level in (b'\x00', b'\x01')
    node = [n for n in ros.nodes if n.get_name().startswith('netmon')][0]
    assert node.destroyed and not ros.ok and ros.violations == []


def test_the_rclpy_nodes_are_where_ros_args_put_them(ros):
    # Prepare: a worker and a netmon started with launch_ros's remap rules
    ros_node = _ros_node()
    argv = ['--ros-args', '-r', '__ns:=/robot1', '-r', '__node:=arm']
    sys.modules['rclpy'].init(args=['rog'] + argv)
    _, args = _worker_args(*argv)
    from rog_ros.nodes import netmon
    from rog_ros.nodes.signals import SignalRequests
    # Execute
    node = ros_node.RogLifecycleNode('rog_worker', args, Core(args, SignalRequests()))
    sys.modules['rclpy'].shutdown()
    mon_argv = ['--nodes', '1', '--ros-args', '-r', '__ns:=/robot2']
    _, plain, _ = ros_node.plain_node('netmon', netmon.build_parser().parse_args(mon_argv),
                                      mon_argv)
    # Assert: what DdsBus publishes for the same arguments (test_wire_ros_graph)
    assert (node.get_namespace(), node.get_name()) == ('/robot1', 'arm')
    assert (plain.get_namespace(), plain.get_name()) == ('/robot2', 'netmon_1')


# ---------------------------------------------------------------------- H: run-time settings
def test_diagnostics_hz_set_at_run_time_changes_the_rate(ros):
    ros_node = _ros_node()
    sys.modules['rclpy'].init(args=[])
    _, args = _worker_args()
    from rog_ros.nodes.signals import SignalRequests
    core = Core(args, SignalRequests())
    core.diagnostics = DiagnosticsPublisher(None, lambda now: [], args.diagnostics_hz)
    node = ros_node.RogLifecycleNode('rog_worker', args, core)
    # Execute: ros2 param set rog_worker_0 diagnostics_hz 4.0
    result = node.set_parameters([ros_doubles.Parameter('diagnostics_hz', value=4.0)])[0]
    # Assert
    assert result.successful and core.diagnostics.period == 0.25 and args.diagnostics_hz == 4.0
    refused = node.set_parameters([ros_doubles.Parameter('workers', value=7)])[0]
    assert not refused.successful and args.workers == 1          # the others are read-only
    assert not node.set_parameters([ros_doubles.Parameter('diagnostics_hz', value=1)])[0] \
        .successful                                               # (an int for a float)


# ---------------------------------------------------------------------- I: a ROS 2 that cannot
def _parsed(argv):
    """Return ``(parser, args)`` of rog_worker for ``argv``."""
    parser = settings_parser()
    return parser, parser.parse_args(argv)


def settings_parser():
    """Return rog_worker's argument parser."""
    from rog_ros.nodes.params import node_parser
    return node_parser('rog_worker', 'rog_worker', 'rog_worker.')


def test_bus_rclpy_without_ros_is_one_usage_line(capsys, monkeypatch):
    # Prepare: no rclpy in this process (also where ROS 2 is sourced)
    from rog_ros.nodes import ros_node
    monkeypatch.setattr(ros_node, 'rclpy', None)
    assert node_main.use_ros(_parsed(['--bus', 'rclpy'])[1])
    # Execute
    with pytest.raises(SystemExit) as exit_:
        rog_worker.main(['--bus', 'rclpy', '--workers', '1'])
    # Assert: argparse's usage error, not rclpy.init's AttributeError on None
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert 'error: --bus rclpy: rclpy or the built rog_ros messages do not import' in err
    assert '--bus dds' in err and 'Traceback' not in err


def test_rog_bus_is_the_default_of_bus_for_the_ros_path(monkeypatch):
    """ROG_BUS=rclpy makes an rclpy node, as make_bus then opens an RclpyBus; dds does not."""
    from rog_ros.transport import choose
    monkeypatch.setattr(choose, 'rclpy_available', lambda: True)
    monkeypatch.setenv('ROG_BUS', 'rclpy')
    assert node_main.use_ros(_parsed([])[1]) is True
    assert node_main.use_ros(_parsed(['--bus', 'dds'])[1]) is False
    monkeypatch.setenv('ROG_BUS', 'dds')
    assert node_main.use_ros(_parsed([])[1]) is False
    assert node_main.use_ros(_parsed(['--bus', 'rclpy'])[1]) is True
    monkeypatch.setenv('ROG_BUS', 'auto')
    assert node_main.use_ros(_parsed([])[1]) is True


def test_rog_bus_rclpy_without_ros_is_one_usage_line(capsys, monkeypatch):
    # Prepare: no rclpy in this process; --bus auto, ROG_BUS=rclpy
    from rog_ros.nodes import ros_node
    monkeypatch.setattr(ros_node, 'rclpy', None)
    monkeypatch.setenv('ROG_BUS', 'rclpy')
    parser, args = _parsed([])
    # Execute
    with pytest.raises(SystemExit) as exit_:
        node_main.ros_path(parser, args)
    # Assert: the variable named, and the way out
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert 'error: ROG_BUS=rclpy: rclpy or the built rog_ros messages do not import' in err
    assert 'ROG_BUS=dds' in err and 'Traceback' not in err


@pytest.mark.parametrize('lifecycle', [True, False])
def test_an_unknown_rog_bus_is_one_usage_line(capsys, monkeypatch, lifecycle):
    monkeypatch.setenv('ROG_BUS', 'ddS')
    parser, args = _parsed([])
    with pytest.raises(SystemExit) as exit_:
        node_main.ros_path(parser, args, lifecycle=lifecycle)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.strip().splitlines()[-1] == (
        "rog_worker: error: ROG_BUS (the default of --bus): unknown bus kind 'ddS'; use auto, "
        'dds, rclpy, or unset ROG_BUS')
    assert node_main.ros_path(*_parsed(['--bus', 'dds'])) is False   # not asked for


def test_a_ros_2_without_lifecycle_refuses_rclpy_and_auto_falls_back(ros, monkeypatch, caplog):
    # Prepare: Foxy's rclpy has no rclpy.lifecycle
    ros_node = _ros_node()
    monkeypatch.setattr(ros_node, 'TransitionCallbackReturn', None)
    parser, args = _parsed(['--bus', 'auto'])
    # Execute: auto
    with caplog.at_level('WARNING'):
        chosen = node_main.ros_path(parser, args)
    # Assert: the embedded transport, said once
    assert chosen is False and args.bus == 'dds'
    assert 'no rclpy.lifecycle (ROS 2 Foxy or Galactic)' in caplog.text
    assert 'running on the embedded DDS transport' in caplog.text
    # netmon is a plain node: its ROS 2 path stays
    parser, args = _parsed(['--bus', 'auto'])
    assert node_main.ros_path(parser, args, lifecycle=False) is True and args.bus == 'auto'
    # --bus rclpy: a usage error
    parser, args = _parsed(['--bus', 'rclpy'])
    with pytest.raises(SystemExit) as exit_:
        node_main.ros_path(parser, args)
    assert exit_.value.code == 2


# ---------------------------------------------------------------------- E: no DDS binding
NO_BINDING_SCRIPT = r"""
import sys
sys.modules['cyclonedds'] = None          # any import of the binding fails
from _pytest.monkeypatch import MonkeyPatch
import numpy as np
import ros_doubles
ros = ros_doubles.install(MonkeyPatch(), deadline_s=10.0)
sys.modules['rclpy'].init(args=[])
from rog_ros.nodes import netmon, node_main, ros_node, rog_server, rog_worker  # noqa: F401
from rog_ros.nodes.connect import open_bus
from rog_ros.protocol.messages import RowChunk
from rog_ros.protocol.auth import parse_key
key = parse_key('ab' * 32)
sender, receiver = (open_bus('rclpy', '/t', key, node=ros.Node(name)) for name in 'ab')
receiver.subscribe('worker_1/chunks')
sent = RowChunk(transfer_id=7, seq=0, sender=0, receiver=1, kind=0, clock=3,
                row_ranges=np.array([2, 6], dtype=np.uint32), payload=b'rows')
sender.publish('worker_1/chunks', sent)
(topic, got), = receiver.poll(0.0)
assert topic == '/t/worker_1/chunks' and got.transfer_id == 7 and got.payload == b'rows'
assert np.array_equal(got.row_ranges, [2, 6]) and got.auth_tag != b''
from rog_ros.transport.bus import RecordError
try:                                      # the bag writer does need it: one clear error
    open_bus('rclpy', '/t', key, record='run.mcap', node=ros.Node('c'))
except RecordError as err:
    assert 'needs the Cyclone DDS Python binding' in str(err), err
else:
    raise AssertionError('--record without the binding was accepted')
# cyclone_config, cyclone_settings and cyclone_log read CYCLONEDDS_URI (rmw_cyclonedds reads
# it too: the nodes take the DDS lease from it) and Cyclone's output with the standard library
# only; every other module named so wraps the binding
STDLIB_ONLY = tuple(f'rog_ros.transport.cyclone_{name}' for name in ('config', 'settings', 'log'))
loaded = sorted(m for m, module in sys.modules.items() if module is not None
                and ('cyclone' in m or m.endswith(('.idl', '.convert')))
                and m not in STDLIB_ONLY)
print('DDS modules:', loaded)
"""


def test_the_rclpy_path_never_imports_the_cyclone_dds_binding(tmp_path):
    # Prepare: a fresh interpreter (this one has the binding loaded), the binding made absent
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [here, os.path.dirname(here), os.environ.get('PYTHONPATH', '')]))
    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE', 'ROG_BUS'):
        env.pop(var, None)
    # Execute: the nodes' modules, then a signed protocol message between two rclpy buses
    done = subprocess.run([sys.executable, '-c', NO_BINDING_SCRIPT], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    # Assert
    assert done.returncode == 0, done.stderr[-3000:]
    assert 'DDS modules: []' in done.stdout
