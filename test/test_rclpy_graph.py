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
What RclpyBus tells of rclpy's graph, and the server's use of it, on the rclpy stand-ins.

``RclpyBus.participants`` / ``foreign_readers`` / ``foreign_writers`` answer from
``get_publishers_info_by_topic`` / ``get_subscriptions_info_by_topic`` what ``DdsBus`` answers
from DDS discovery: the GUID prefixes of the participants of this build and of another (another
type name, or on Iron and newer another type hash). Without them a server under ROS 2 waited
for a robot of an older rog_ros until ``startup_timeout`` and counted a tool that only reads a
robot's downlink (``ros2 topic echo``) as the robot. The stand-ins model Humble (no hash) and
Jazzy (hash); the endpoints of other processes are ``Ros.add_remote``'s.
"""

import signal
import time

import pytest
from rog_ros.nodes import rog_server, server_node
from rog_ros.nodes.routing import server_inbox, worker_inbox
from rog_ros.transport.topics import resolve, topic_type
import ros_doubles

OLD = bytes(range(0xa0, 0xac))          # the old robot's participant (GUID prefix)
OLD_PREFIX = 'a0a1a2a3:a4a5a6a7:a8a9aaab'  # as DdsBus writes it (Cyclone's logs' form)
TOOL = bytes(range(0xc0, 0xcc))
TOOL_PREFIX = 'c0c1c2c3:c4c5c6c7:c8c9cacb'
OTHER_HASH = 'RIHS01_' + 'ab' * 32


def _hung(signum, frame):
    raise RuntimeError('no progress in 60 s')


def _install(monkeypatch, distro):
    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE', 'ROG_BUS'):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr('rog_ros.nodes.driver.IDLE_POLL_S', 0.0)
    return ros_doubles.install(monkeypatch, deadline_s=30.0, distro=distro)


@pytest.fixture(params=['humble', 'jazzy'])
def ros(request, monkeypatch):
    previous = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(60)
    yield _install(monkeypatch, request.param)
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
    ros_doubles.uninstall(monkeypatch)


@pytest.fixture
def jazzy(monkeypatch):
    yield _install(monkeypatch, 'jazzy')
    ros_doubles.uninstall(monkeypatch)


def _type(topic):
    name = topic_type(topic)
    return name.replace('/', '/msg/') if '/' in name else f'rog_ros/msg/{name}'


def _kind(topic, renamed, chunks_only):
    """Return (type, hash) of ``topic``'s endpoint of another build (see _old_robot)."""
    if chunks_only and not topic.endswith('/chunks'):
        return _type(topic), 'ours'              # (a message that kept its hash)
    return (_type(topic) + 'V1', 'ours') if renamed else (_type(topic), OTHER_HASH)


def _old_robot(ros, namespace, rank, renamed=False, tool=False, chunks_only=False):
    """
    Put a robot of another build on the graph: it reads robot ``rank``'s downlink, writes up.

    Its types keep their names and differ in their hash, or (``renamed``) in their names;
    with ``tool``, it only reads (an older ``ros2 topic echo`` of that downlink); with
    ``chunks_only``, only ``RowChunk`` differs (a build that changed that message alone).
    """
    def kind(topic):
        return _kind(topic, renamed, chunks_only)
    for t in worker_inbox(rank):
        ros.add_remote(OLD, f'rog_worker_{rank}', resolve(t, namespace), False, *kind(t))
    if not tool:
        for t in server_inbox():
            ros.add_remote(OLD, f'rog_worker_{rank}', resolve(t, namespace), True, *kind(t))


def _bus(name, namespace='/g'):
    from rog_ros.transport.rclpy_bus import RclpyBus
    return RclpyBus(namespace=namespace, node_name=name)


def test_the_graph_gives_participants_and_other_builds_as_discovery_does(ros):
    srv = _bus('rog_server')
    srv.advertise('w0/chunks')
    srv.subscribe('up/chunks')
    robot = _bus('rog_worker_0')               # this build, a process of its own
    robot.subscribe('w0/chunks')
    robot.advertise('up/chunks')
    mine = robot._node.prefix.hex()
    mine = ':'.join(mine[i:i + 8] for i in range(0, 24, 8))
    _old_robot(ros, '/g', 0)                   # another build: same names, another hash
    ros.add_remote(TOOL, 'echo', '/g/w0/chunks', False, 'rog_ros/msg/RowChunkV1')  # renamed
    ros.add_remote(OLD, 'x', '/g/up/chunks', True, 'rog_ros/msg/RowChunk', None)  # no hash
    readers = srv.participants('w0/chunks', writer=False)
    writers = srv.participants('up/chunks', writer=True)
    if ros.distro == 'humble':                 # no hash: only the renamed type tells
        assert readers == {mine, OLD_PREFIX} and srv.foreign_readers('w0/chunks') == \
            [TOOL_PREFIX]
        assert srv.foreign_writers('up/chunks') == []
        assert writers == {mine, OLD_PREFIX}
    else:
        assert readers == {mine}
        assert srv.foreign_readers('w0/chunks') == sorted([OLD_PREFIX, TOOL_PREFIX])
        assert srv.foreign_writers('up/chunks') == [OLD_PREFIX]
        assert writers == {mine, OLD_PREFIX}   # (its hash-less writer is taken as it comes)
    # its own participant is not listed (a server reads up/chunks, writes w0/chunks)
    assert srv.participants('up/chunks', writer=False) == set()
    assert srv.participants('w0/chunks', writer=True) == set()
    said = [m for _, _, m in ros.logs if 'gives no type hash' in m]
    assert len(said) == (1 if ros.distro == 'humble' else 0), said
    assert (srv.no_hash_said is not None) == (ros.distro == 'humble')


def test_one_graph_query_a_side_and_topic_until_the_next_poll(ros, monkeypatch):
    # The server asks foreign_readers then participants of one downlink, several robots a
    # 20 ms step: each rclpy query expands and remaps the name, scans rmw's graph cache and
    # builds a TopicEndpointInfo and QoSProfile per endpoint. One query serves until a poll.
    # The window is widened while the calls are counted, so a loaded machine that stalls
    # this process for 20 ms cannot expire it between two of them.
    from rog_ros.transport import rclpy_bus
    window = rclpy_bus.GRAPH_CACHE_S
    monkeypatch.setattr(rclpy_bus, 'GRAPH_CACHE_S', 3600.0)
    srv = _bus('rog_server')
    srv.subscribe('up/chunks')
    _old_robot(ros, '/g', 0)
    before = ros.graph_queries
    for _ in range(5):
        srv.participants('w0/chunks', writer=False)
        srv.foreign_readers('w0/chunks')
        srv.participants('up/chunks', writer=True)
        srv.foreign_writers('up/chunks')
    assert ros.graph_queries - before == 2
    srv.poll(0.0)
    gone = [e for e in ros.remote if not e.writer]
    for e in gone:
        e.gone = True                            # the old robot closed its readers
    assert srv.foreign_readers('w0/chunks') == [] and ros.graph_queries - before == 3
    for e in gone:
        e.gone = False
    monkeypatch.setattr(rclpy_bus, 'GRAPH_CACHE_S', window)
    time.sleep(window * 1.5)                    # (no poll: wait_matched only sleeps)
    assert srv.foreign_readers('w0/chunks') == ([] if ros.distro == 'humble' else [OLD_PREFIX])
    assert ros.graph_queries - before == 4


def _server(tmp_path, namespace, n, *extra):
    args = rog_server.build_parser().parse_args(
        ['--workload', 'toy', '--workers', str(n), '--namespace', namespace, '--bus', 'rclpy',
         '--out', str(tmp_path), *extra])
    srv = server_node.ServerNode(args)
    srv.configure()
    return srv


@pytest.mark.parametrize('renamed', [False, True])
def test_a_fleet_of_old_robots_fails_at_once_with_its_own_exit_status_rclpy(
        ros, tmp_path, monkeypatch, caplog, renamed):
    # Under ROS 2 the server (RclpyBus) could not tell a robot of an older rog_ros: DDS
    # matches by type name (rmw_cyclonedds checks no more), so one whose types keep their
    # names was matched and taken as there, and a renamed one waited for until
    # startup_timeout (3 s here), exit 1. It gives it up after 3 leases (0.3 s here) and,
    # its only robot, waits for a robot of its build until startup_timeout (the old one may
    # be another fleet's), then exits 4 (until 2026-12-07 after the 3 leases). On Humble
    # only a renamed type tells: one that keeps its names is matched and taken as there, as
    # before.
    monkeypatch.setattr(server_node, 'INCOMPATIBLE_SCALE', 0.01, raising=False)
    srv = _server(tmp_path, '/inc', 1, '--startup-timeout', '3')
    assert type(srv.bus).__name__ == 'RclpyBus'
    _old_robot(ros, '/inc', 0, renamed=renamed)
    told = renamed or ros.distro != 'humble'
    if not told:
        try:
            start = time.monotonic()
            srv.activate()
            assert time.monotonic() - start < 2.5
            assert srv.bus.matched('w0/chunks') == 1 and srv.bus.matched('up/chunks') == 1
            assert srv.incompatible.given_up == set()
        finally:
            srv.shutdown()
        return
    try:
        start = time.monotonic()
        with pytest.raises(server_node.PeerTimeout) as err:
            srv.activate()
        took = time.monotonic() - start
    finally:
        srv.shutdown()
    assert isinstance(err.value, server_node.FleetIncompatible), err.value
    assert 2.95 < took < 5.0, took               # the 3 s startup_timeout, not 3 leases
    assert srv.incompatible.given_up == {0} and 'incompatible rog_ros' in str(err.value)
    assert str(err.value).startswith('no robot of this build after startup_timeout 3 s: ')
    (line,) = [r.getMessage() for r in caplog.records if OLD_PREFIX in r.getMessage()]
    assert 'robot 0 runs an incompatible rog_ros' in line     # (names its participant)


def test_matched_leaves_out_the_endpoints_of_another_build(ros):
    # rmw_cyclonedds matches a reader of another build whose types keep their names (by
    # type name only), and rcl's count_publishers counts every writer of the topic: both
    # were in matched(), so the server's wait_matched took an old robot for one of this
    # build (its downlink reader; its uplink writer toward the one-per-robot minimum).
    srv = _bus('rog_server')
    srv.advertise('w0/chunks')
    srv.subscribe('up/chunks')
    _old_robot(ros, '/g', 0)                                    # same names, another hash
    ros.add_remote(TOOL, 'echo', '/g/up/chunks', True, 'rog_ros/msg/RowChunkV1')  # renamed
    assert srv._publishers['/g/w0/chunks'].get_subscription_count() == 1   # DDS matches it
    assert srv._node.count_publishers('/g/up/chunks') == 2
    hashed = 1 if ros.distro == 'humble' else 0                 # (Humble cannot tell)
    assert srv.matched('w0/chunks') == hashed
    assert srv.matched('up/chunks') == hashed
    robot = _bus('rog_worker_0')                                # this build
    robot.subscribe('w0/chunks')
    robot.advertise('up/chunks')
    srv.poll(0.0)
    assert srv.matched('w0/chunks') == 1 + hashed
    assert srv.matched('up/chunks') == 1 + hashed
    # an rmw that does not match the old robot's reader: the robot is not taken away
    pub = srv._publishers['/g/w0/chunks']
    pub.get_subscription_count = lambda: 1
    srv.poll(0.0)
    assert srv.matched('w0/chunks') == 1


def test_an_old_tool_reading_a_late_robots_downlink_does_not_give_it_up_rclpy(
        jazzy, tmp_path, monkeypatch):
    # An older workspace's `ros2 topic echo /rog/w0/chunks` (another hash, only a reader)
    # while robot 0 boots: only a participant that writes the uplink too is the old robot.
    monkeypatch.setattr(server_node, 'INCOMPATIBLE_SCALE', 0.01, raising=False)
    srv = _server(tmp_path, '/inc4', 1, '--startup-timeout', '1.5')
    _old_robot(jazzy, '/inc4', 0, tool=True)
    try:
        start = time.monotonic()
        with pytest.raises(server_node.PeerTimeout) as err:
            srv.activate()
        took = time.monotonic() - start
    finally:
        srv.shutdown()
    assert not isinstance(err.value, server_node.FleetIncompatible), err.value
    assert 1.4 < took < 6.0 and srv.incompatible.given_up == set(), took


def test_a_tool_reading_a_downlink_is_not_the_robot_rclpy(ros, tmp_path):
    # `ros2 topic echo /rog/w0/chunks` of this build matches the server's writer as robot 0
    # would: counted as the robot, it held a restored server the whole patience (20 s). A
    # robot is a participant that reads its downlink and writes the uplink.
    srv = _server(tmp_path, '/echo', 2)
    try:
        for t in worker_inbox(0):
            ros.add_remote(TOOL, 'echo', resolve(t, '/echo'), False, _type(t))
        assert srv.bus.matched('w0/chunks') == 1          # matched, as the robot would be
        assert not srv._robot_there(0) and not srv._robot_there(1)
        robot = bytes(range(0x30, 0x3c))
        for t in worker_inbox(1):
            ros.add_remote(robot, 'rog_worker_1', resolve(t, '/echo'), False, _type(t))
        for t in server_inbox():
            ros.add_remote(robot, 'rog_worker_1', resolve(t, '/echo'), True, _type(t))
        srv.bus.poll(0.0)
        writers = srv._uplink_writers(other_builds=False)
        assert writers == {'30313233:34353637:38393a3b'}
        assert srv._robot_there(1, writers) and not srv._robot_there(0, writers)
    finally:
        srv.shutdown()


def test_an_rmw_whose_gids_name_no_participant_counts_matched_endpoints(ros, tmp_path):
    # rmw_zenoh_cpp's GID is a hash of the endpoint's key expression: a robot's reader and
    # writer have unrelated GIDs, so read as participants no robot was ever there (a
    # restored server stopped waiting for the robots told to stop). Such a bus reads no
    # graph: matched endpoints count, as before.
    ros.rmw = 'rmw_zenoh_cpp'
    srv = _server(tmp_path, '/z', 2)
    try:
        for t in worker_inbox(1):
            ros.add_remote(bytes(range(0x40, 0x4c)), 'rog_worker_1', resolve(t, '/z'), False,
                           _type(t))
        for t in server_inbox():
            ros.add_remote(bytes(range(0x50, 0x5c)), 'rog_worker_1', resolve(t, '/z'), True,
                           _type(t))
        srv.bus.poll(0.0)
        assert srv.bus.participants('w1/chunks', writer=False) is None
        assert srv._robot_there(1) and not srv._robot_there(0)
        assert srv.bus.matched('w1/chunks') == 1
        said = [m for _, _, m in ros.logs if 'do not name a DDS participant' in m]
        assert len(said) == 1 and said[0].startswith('rmw_zenoh_cpp: '), said
    finally:
        srv.shutdown()


def _old_server(ros, namespace, rank, renamed=False, tool=False, chunks_only=False):
    """
    Put a server of another build on the graph: it reads the uplink, writes ``rank``'s downlink.

    As :func:`_old_robot`, the other way round; with ``tool``, it only reads the uplink (an
    older ``ros2 topic echo /rog/up/chunks``).
    """
    def kind(topic):
        return _kind(topic, renamed, chunks_only)
    for t in server_inbox():
        ros.add_remote(OLD, 'rog_server', resolve(t, namespace), False, *kind(t))
    if not tool:
        for t in worker_inbox(rank):
            ros.add_remote(OLD, 'rog_server', resolve(t, namespace), True, *kind(t))


def _worker(tmp_path, namespace, *extra):
    from rog_ros.nodes import rog_worker, worker_node
    args = rog_worker.build_parser().parse_args(
        ['--workload', 'toy', '--workers', '1', '--rank', '0', '--namespace', namespace,
         '--bus', 'rclpy', *extra])
    node = worker_node.WorkerNode(args)
    node.configure()
    return node


@pytest.mark.parametrize('renamed', [False, True])
def test_a_robot_facing_a_server_of_another_build_exits_4_rclpy(
        ros, tmp_path, monkeypatch, caplog, renamed):
    # A robot of this build whose server runs another rog_ros waited until startup_timeout
    # (3 s here) with `no peer on ...`, exit 1, and under respawn was started again and
    # again. It tells the server's endpoints are another build's (a renamed type, or on
    # Jazzy another hash; Humble only tells a renamed one), says so after 3 leases (0.3 s
    # here) and waits for a server of its own build until startup_timeout (that server
    # may be late: the other one may be another fleet's), then ends with one line naming
    # both builds and exit 4 (not respawned). Before, it exited after the 3 leases.
    from rog_ros.nodes import respawn, worker_node
    from rog_ros.nodes.ros_node import failure_status

    monkeypatch.setattr(worker_node, 'INCOMPATIBLE_SCALE', 0.01, raising=False)
    robot = _worker(tmp_path, '/srv', '--startup-timeout', '3')
    assert type(robot.bus).__name__ == 'RclpyBus'
    _old_server(ros, '/srv', 0, renamed=renamed)
    told = renamed or ros.distro != 'humble'
    try:
        start = time.monotonic()
        if not told:                 # Humble, same names: matched, taken as this build's
            assert robot.activate() and time.monotonic() - start < 2.5
            return
        with pytest.raises(worker_node.PeerTimeout) as err:
            robot.activate()
        took = time.monotonic() - start
    finally:
        robot.shutdown()
    assert isinstance(err.value, worker_node.ServerIncompatible), err.value
    assert 2.95 < took < 5.0, took                # the 3 s startup_timeout, not 3 leases
    assert failure_status(err.value) == 4 and not respawn.crashed(4)
    text = str(err.value)
    assert '\n' not in text and OLD_PREFIX in text and 'another rog_ros build' in text
    assert text.startswith('no server of this build after startup_timeout 3 s: ')
    from rog_ros.transport.idl import type_hash
    assert type_hash('RowChunk') in text and 'upgrade the server or this robot' in text
    theirs = 'rog_ros/msg/RowChunkV1' if renamed else OTHER_HASH    # (the other build's)
    assert f'its types: up/chunks {theirs}, w0/chunks {theirs}' in text, text
    said = [r.getMessage() for r in caplog.records if 'the only server heard' in r.getMessage()]
    assert len(said) == 1 and 'waits for a server of its build until startup_timeout' in said[0]


def test_an_old_tool_reading_the_uplink_does_not_end_a_robots_wait_rclpy(
        jazzy, tmp_path, monkeypatch):
    # An older workspace's `ros2 topic echo /rog/up/chunks` (another hash, only a reader)
    # while the server boots: only a participant that writes the downlink too is the server.
    from rog_ros.nodes import worker_node

    monkeypatch.setattr(worker_node, 'INCOMPATIBLE_SCALE', 0.01, raising=False)
    robot = _worker(tmp_path, '/srv2', '--startup-timeout', '1.5')
    _old_server(jazzy, '/srv2', 0, tool=True)
    try:
        start = time.monotonic()
        with pytest.raises(worker_node.PeerTimeout) as err:
            robot.activate()
        took = time.monotonic() - start
    finally:
        robot.shutdown()
    assert not isinstance(err.value, worker_node.ServerIncompatible), err.value
    assert 1.4 < took < 6.0 and 'no peer on' in str(err.value), took


def test_a_type_hash_of_another_hash_version_tells_no_build_rclpy(jazzy):
    # A type hash of a version this build does not compute (RIHS02 ...) says nothing of the
    # peer's .msg files, as version 0 (none sent) does not: compared with this build's
    # RIHS01 it differed, so a robot of this build was named another build's and left out
    # of participants() (and of matched()). Only a hash of this build's version tells.
    srv = _bus('rog_server')
    srv.advertise('w0/chunks')
    jazzy.add_remote(OLD, 'rog_worker_0', '/g/w0/chunks', False, 'rog_ros/msg/RowChunk',
                     'RIHS02_' + 'cd' * 32)
    jazzy.add_remote(TOOL, 'echo', '/g/w0/chunks', False, 'rog_ros/msg/RowChunk', OTHER_HASH)
    assert srv.participants('w0/chunks', writer=False) == {OLD_PREFIX}
    assert srv.foreign_readers('w0/chunks') == [TOOL_PREFIX]


def test_a_server_of_another_build_seen_in_the_downlink_wait_still_exits_4_rclpy(
        jazzy, tmp_path, monkeypatch):
    # A tool of this build reading the uplink (ros2 bag record) beside a server of another
    # build: the uplink has a reader of this build, so the robot's wait goes on to the
    # downlink's, where ServerIncompatible was caught as that wait's own PeerTimeout (a
    # warning blaming a smaller fleet), the watch had given the server up and never said so
    # again, and the robot ended with the plain `no peer on ...` at startup_timeout: exit 1,
    # respawned again and again. It ends with exit 4 as in the uplink's wait (at
    # startup_timeout: it waits as long for a server of its own build).
    from rog_ros.nodes import respawn, worker_node
    from rog_ros.nodes.ros_node import failure_status

    monkeypatch.setattr(worker_node, 'INCOMPATIBLE_SCALE', 0.01)
    robot = _worker(tmp_path, '/srv3', '--startup-timeout', '3')
    _old_server(jazzy, '/srv3', 0)
    for t in server_inbox():                     # this build's recorder of the uplink
        jazzy.add_remote(TOOL, 'rosbag2_recorder', resolve(t, '/srv3'), False, _type(t))
    try:
        start = time.monotonic()
        with pytest.raises(worker_node.PeerTimeout) as err:
            robot.activate()
        took = time.monotonic() - start
    finally:
        robot.shutdown()
    assert isinstance(err.value, worker_node.ServerIncompatible), err.value
    assert 2.95 < took < 5.0, took               # at the 3 s startup_timeout
    assert failure_status(err.value) == 4 and not respawn.crashed(4)
    assert OLD_PREFIX in str(err.value)


OWN = bytes(range(0xe0, 0xec))           # a server of this build (another process)


def _own_server(ros, namespace, rank):
    """Put a server of this build on the graph: it reads the uplink, writes ``rank``'s downlink."""
    return ([ros.add_remote(OWN, 'rog_server', resolve(t, namespace), False, _type(t))
             for t in server_inbox()] +
            [ros.add_remote(OWN, 'rog_server', resolve(t, namespace), True, _type(t))
             for t in worker_inbox(rank)])


def _then(robot, after_s, act):
    """Call ``act()`` once, at the robot's first look for its peers ``after_s`` from now."""
    start, starting, done = time.monotonic(), robot._starting, []

    def look():
        if not done and time.monotonic() - start >= after_s:
            done.append(act())
        return starting()
    robot._starting = look
    return done


def _said(caplog) -> list:
    return [r.getMessage() for r in caplog.records if 'the only server heard' in r.getMessage()]


def test_a_robot_waits_for_its_own_late_server_beside_another_builds_rclpy(
        jazzy, tmp_path, monkeypatch, caplog):
    # A second fleet of another build shares the namespace and domain: its server is heard
    # first, this robot's own comes 1 s later. The robot refused its own late server: it
    # exited 4 once the other one had been heard alone for 3 leases (0.3 s here). It says
    # so then, waits for its own until startup_timeout (3 s), and starts with it.
    from rog_ros.nodes import worker_node

    monkeypatch.setattr(worker_node, 'INCOMPATIBLE_SCALE', 0.01)
    robot = _worker(tmp_path, '/late', '--startup-timeout', '3')
    _old_server(jazzy, '/late', 0)
    came = _then(robot, 1.0, lambda: _own_server(jazzy, '/late', 0))
    try:
        start = time.monotonic()
        assert robot.activate()
        took = time.monotonic() - start
    finally:
        robot.shutdown()
    assert came and 1.0 <= took < 2.5, took
    (line,) = _said(caplog)                      # said once, while only the other was heard
    assert OLD_PREFIX in line and OTHER_HASH in line and 'until startup_timeout' in line


def test_a_robot_with_its_own_server_never_refuses_for_another_builds_rclpy(
        jazzy, tmp_path, monkeypatch, caplog):
    # The other order: its own server first, then another build's server (another fleet's)
    # comes beside it. The robot starts at once, never says the other server is the only
    # one, and at server_timeout (its own server silent here) ends as any robot whose server
    # is silent (exit 1), not as one that only another build serves (exit 4).
    from rog_ros.nodes import worker_node
    from rog_ros.nodes.ros_node import failure_status

    monkeypatch.setattr(worker_node, 'INCOMPATIBLE_SCALE', 0.01)
    robot = _worker(tmp_path, '/both', '--startup-timeout', '3', '--server-timeout', '1')
    _own_server(jazzy, '/both', 0)
    try:
        start = time.monotonic()
        assert robot.activate() and time.monotonic() - start < 1.0
        _old_server(jazzy, '/both', 0)
        with pytest.raises((worker_node.PeerTimeout, TimeoutError)) as err:
            while robot.spin_once():
                time.sleep(0.005)
    finally:
        robot.shutdown()
    assert not isinstance(err.value, worker_node.ServerIncompatible), err.value
    assert failure_status(err.value) == 1 and 'no message from the server' in str(err.value)
    assert _said(caplog) == []


@pytest.mark.parametrize('keyed', [False, True])
def test_a_server_replaced_mid_run_by_another_build_ends_the_robot_with_exit_4_rclpy(
        jazzy, tmp_path, monkeypatch, caplog, keyed):
    # The server upgraded and restarted while its robots run the old rog_ros: its endpoints
    # go, a server of another build's come. A robot told another build only at its start:
    # mid-run it waited server_timeout and ended with `no message from the server` (exit 1;
    # under respawn started again, to wait startup_timeout out). It says so after 3 leases,
    # waits server_timeout for a server of its build, then ends with one line naming both
    # builds and exit 4 (not respawned). With a fleet key the bus is an AuthBus, which
    # hands the other build's types over as it hands its participants.
    from rog_ros.nodes import respawn, worker_node
    from rog_ros.nodes.fleet_key import write_key_file
    from rog_ros.nodes.ros_node import failure_status
    from rog_ros.transport.idl import type_hash

    monkeypatch.setattr(worker_node, 'INCOMPATIBLE_SCALE', 0.01)
    if keyed:
        write_key_file(tmp_path / 'fleet.key')
        monkeypatch.setenv('ROG_FLEET_KEY_FILE', str(tmp_path / 'fleet.key'))
    robot = _worker(tmp_path, '/mid', '--startup-timeout', '3', '--server-timeout', '1.5')
    assert type(robot.bus).__name__ == ('AuthBus' if keyed else 'RclpyBus')
    own = _own_server(jazzy, '/mid', 0)
    try:
        assert robot.activate()
        for end in own:
            end.gone = True
        _old_server(jazzy, '/mid', 0)
        start = time.monotonic()
        with pytest.raises((worker_node.PeerTimeout, TimeoutError)) as err:
            while robot.spin_once():
                time.sleep(0.005)
        took = time.monotonic() - start
    finally:
        robot.shutdown()
    assert isinstance(err.value, worker_node.ServerIncompatible), err.value
    assert failure_status(err.value) == 4 and not respawn.crashed(4)
    assert took < 1.5 + 1.0, took                # server_timeout, from its last progress
    text = str(err.value)
    assert text.startswith('worker 0: no message from its server for server_timeout 1.5 s: '
                           'the only server heard runs another rog_ros build'), text
    assert '\n' not in text and OLD_PREFIX in text and OTHER_HASH in text
    assert type_hash('RowChunk') in text and 'upgrade the server or this robot' in text
    (line,) = _said(caplog)
    assert 'until server_timeout, 1.5 s after the last message of its server' in line


MATCHED_CASES = [
    # (side, the middleware's count, the known endpoints, another build seen there, expected)
    # no endpoint of another build seen: the middleware's count (one matched before the
    # graph / discovery listed it is not taken away)
    ('reader', 2, ['this'], False, 2),
    ('writer', 2, ['this'], False, 2),
    # one of another build matched by name: at most this build's
    ('reader', 2, ['this', 'other'], True, 1),
    ('writer', 2, ['this', 'other'], True, 1),
    # the middleware did not match it (or not yet a peer of this build): its count
    ('reader', 1, ['this', 'other'], True, 1),
    ('writer', 0, ['this', 'other'], True, 0),
    ('reader', 1, ['other'], True, 0),
    ('writer', 1, ['other'], True, 0),
    # another build seen once (gone since): at most the known ones of this build still
    ('reader', 2, ['this'], True, 1),
    ('writer', 2, ['this'], True, 1),
    # the bus cannot tell (no discovery readers; an rmw whose GIDs name no participant)
    ('reader', 2, None, True, 2),
    ('writer', 2, None, True, 2),
]


def _dds_matched(monkeypatch, side, count, known, seen):
    """Return DdsBus.matched on ``side``'s topic, its discovery and DDS count as given."""
    from rog_ros.transport import dds_bus

    bus = dds_bus.DdsBus.__new__(dds_bus.DdsBus)   # (no participant: the rule alone)
    bus.namespace, bus._closed = '/g', False
    topic = 'w0/chunks' if side == 'reader' else 'up/chunks'
    bus._writers = {'/g/w0/chunks': object()} if side == 'reader' else {}
    bus._readers = {'/g/up/chunks': (object(),)} if side == 'writer' else {}
    bus._discovery = {} if known is None else {side: None}
    bus._endpoints = {(side, '/g/' + topic): {
        i: ('p%d' % i, None if k == 'this' else 'RIHS01_' + '3' * 64)
        for i, k in enumerate(known or ())}}
    bus._foreign_types = {'/g/' + topic: {(side, 'RIHS01_' + '3' * 64)}} if seen else {}
    bus._take_discovery = lambda: None
    bus._check_qos = lambda ros_topic: None
    monkeypatch.setattr(dds_bus, '_matched_peers', lambda entity, writer: count)
    return bus.matched(topic)


def _rclpy_matched(ros, side, count, known, seen):
    """Return RclpyBus.matched on ``side``'s topic, its graph and rmw count as given."""
    if known is None:
        ros.rmw = 'rmw_zenoh_cpp'                # (its GIDs name no participant)
    bus = _bus('rog_server', '/m')
    topic = 'w0/chunks' if side == 'reader' else 'up/chunks'
    if side == 'reader':
        bus.advertise(topic)
    else:
        bus.subscribe(topic)
    ends = [ros.add_remote(bytes([0x30 + i]) * 12, f'peer_{i}', '/m/' + topic,
                           side == 'writer', _type(topic), 'ours' if k == 'this' else OTHER_HASH)
            for i, k in enumerate(known or ())]
    if seen and 'other' not in (known or ['other']):      # seen once, gone since
        gone = ros.add_remote(bytes([0x4f]) * 12, 'old', '/m/' + topic, side == 'writer',
                              _type(topic), OTHER_HASH)
        bus.matched(topic)
        gone.gone = True
        bus.poll(0.0)
    if side == 'reader':
        bus._publishers['/m/' + topic].get_subscription_count = lambda: count
    else:
        bus._node.count_publishers = lambda t: count
    try:
        return bus.matched(topic)
    finally:
        del ends
        bus.close()


@pytest.mark.parametrize('case', MATCHED_CASES, ids=lambda c: f'{c[0]}-{c[1]}-{c[2]}-{c[3]}')
def test_both_buses_cap_matched_by_one_rule(jazzy, monkeypatch, case):
    # DdsBus capped matched() at the endpoints of this build only once discovery had seen
    # one of another build on that side of the topic; RclpyBus capped its readers whenever
    # the graph could be read (a peer matched before the graph listed it was not counted:
    # the first two cases gave 1) and subtracted its writers of another build. Both follow
    # bus.matched_of_this_build now, on the same cases.
    side, count, known, seen, expected = case
    assert _dds_matched(monkeypatch, side, count, known, seen) == expected
    assert _rclpy_matched(jazzy, side, count, known, seen) == expected


def test_a_robot_whose_server_is_out_of_reach_beside_another_fleets_is_not_refused_rclpy(
        jazzy, tmp_path, monkeypatch, caplog):
    # Another fleet's server of another build is heard beside this robot's own server (the
    # same namespace and domain), then the robot's own server goes out of reach (a Wi-Fi
    # outage, a server restarting) for server_timeout. The robot took the other fleet's
    # server for its own replaced by another build and ended with exit 4 (not respawned):
    # its own server, back a moment later, had lost the robot for good. A server of another
    # build heard beside its own is another fleet's: the robot ends as any robot whose
    # server is silent (exit 1, respawned), and never says it is served by another build.
    from rog_ros.nodes import respawn, worker_node
    from rog_ros.nodes.ros_node import failure_status

    monkeypatch.setattr(worker_node, 'INCOMPATIBLE_SCALE', 0.01)
    robot = _worker(tmp_path, '/away', '--startup-timeout', '3', '--server-timeout', '1.5')
    own = _own_server(jazzy, '/away', 0)
    _old_server(jazzy, '/away', 0)
    try:
        assert robot.activate()
        deadline = time.monotonic() + 1.1            # (beside it 3 leases: 0.3 s here)
        while time.monotonic() < deadline:
            assert robot.spin_once()
            time.sleep(0.005)
        for end in own:
            end.gone = True                          # out of reach
        with pytest.raises((worker_node.PeerTimeout, TimeoutError)) as err:
            while robot.spin_once():
                time.sleep(0.005)
    finally:
        robot.shutdown()
    assert not isinstance(err.value, worker_node.ServerIncompatible), err.value
    assert failure_status(err.value) == 1 and respawn.crashed(1)
    assert 'no message from the server' in str(err.value)
    assert _said(caplog) == []


def test_a_server_replaced_while_the_old_ones_participant_lingers_is_still_refused_rclpy(
        jazzy, tmp_path, monkeypatch, caplog):
    # A server killed and restarted at once with another build: the killed one's
    # participant lingers until its lease ends, so the new one is heard beside it for a
    # moment. That is no second fleet (heard beside it for less than 3 leases, 0.3 s here):
    # the robot still ends with exit 4 at server_timeout, naming the new server.
    from rog_ros.nodes import worker_node
    from rog_ros.nodes.ros_node import failure_status

    monkeypatch.setattr(worker_node, 'INCOMPATIBLE_SCALE', 0.01)
    robot = _worker(tmp_path, '/kill', '--startup-timeout', '3', '--server-timeout', '1.5')
    own = _own_server(jazzy, '/kill', 0)
    try:
        assert robot.activate()
        _old_server(jazzy, '/kill', 0)
        robot._next_server_look = 0.0
        assert robot.spin_once()                      # one look with both there
        assert robot._beside_own                       # (heard beside its own)
        for end in own:
            end.gone = True                           # its lease ended
        with pytest.raises((worker_node.PeerTimeout, TimeoutError)) as err:
            while robot.spin_once():
                time.sleep(0.005)
    finally:
        robot.shutdown()
    assert isinstance(err.value, worker_node.ServerIncompatible), err.value
    assert failure_status(err.value) == 4 and OLD_PREFIX in str(err.value)


OTHER_ROBOT = bytes(range(0xb0, 0xbc))   # a robot of another build (another participant)
OTHER_ROBOT_PREFIX = 'b0b1b2b3:b4b5b6b7:b8b9babb'


@pytest.mark.parametrize('with_robots', [True, False])
def test_a_server_of_another_build_come_with_its_robots_while_its_own_is_away_rclpy(
        jazzy, tmp_path, monkeypatch, caplog, with_robots):
    # This robot's own server goes out of reach mid-run; a server of another build is heard
    # only after that, never beside its own, so nothing tells it from its own server
    # replaced (the other's messages cannot be read, its GUID prefix is random). Before,
    # the robot always took it for the replacement: exit 4 at server_timeout, not
    # respawned, and its own server, back later, had lost it for good. With robots of that
    # build writing the uplink beside it, a fleet of that build is there: the robot ends as
    # for a silent server (exit 1, respawned; restarted, it refuses a replacement at its
    # start), saying so. A server of another build alone (the replacement) still gets 4.
    from rog_ros.nodes import respawn, worker_node
    from rog_ros.nodes.ros_node import failure_status

    monkeypatch.setattr(worker_node, 'INCOMPATIBLE_SCALE', 0.01)
    ns = '/fleet2' if with_robots else '/fleet1'
    robot = _worker(tmp_path, ns, '--startup-timeout', '3', '--server-timeout', '1.5')
    own = _own_server(jazzy, ns, 0)
    try:
        assert robot.activate()
        for end in own:
            end.gone = True                           # out of reach
        _old_server(jazzy, ns, 0)
        if with_robots:                               # the other fleet's robot 0
            for t in worker_inbox(0):
                jazzy.add_remote(OTHER_ROBOT, 'rog_worker_0', resolve(t, ns), False,
                                 _type(t), OTHER_HASH)
            for t in server_inbox():
                jazzy.add_remote(OTHER_ROBOT, 'rog_worker_0', resolve(t, ns), True,
                                 _type(t), OTHER_HASH)
        with pytest.raises((worker_node.PeerTimeout, TimeoutError)) as err:
            while robot.spin_once():
                time.sleep(0.005)
    finally:
        robot.shutdown()
    text = str(err.value)
    assert '\n' not in text and OLD_PREFIX in text, text
    if not with_robots:
        assert isinstance(err.value, worker_node.ServerIncompatible), err.value
        assert failure_status(err.value) == 4
        return
    assert not isinstance(err.value, worker_node.ServerIncompatible), err.value
    assert failure_status(err.value) == 1 and respawn.crashed(1)
    assert text.startswith('worker 0: no message from the server for 2 s'), text
    assert OTHER_ROBOT_PREFIX in text and "most likely another fleet's" in text, text
    assert 'the restarted robot refuses it at its start, exit status 4' in text, text
    (line,) = _said(caplog)
    assert 'exits as for a silent server (status 1' in line, line


def test_a_build_that_changed_one_message_is_still_another_build_rclpy(
        jazzy, tmp_path, monkeypatch):
    # A build that changed RowChunk alone: its robot reads w0/acks, schedule, versions and
    # writes up/acks with this build's hashes. Its participant counted as a robot of this
    # build there (_robot_there), so it was never given up: the server waited
    # startup_timeout and exited 1 (its fleet never started), not 4. Likewise such a server
    # passed for a server of this build at a robot's start (_server_there): never refused,
    # exit 1, respawned again and again. A participant with an endpoint of another build
    # is of that build.
    from rog_ros.nodes import worker_node

    monkeypatch.setattr(server_node, 'INCOMPATIBLE_SCALE', 0.01, raising=False)
    monkeypatch.setattr(worker_node, 'INCOMPATIBLE_SCALE', 0.01)
    srv = _server(tmp_path / 'srv', '/one', 1, '--startup-timeout', '2')
    _old_robot(jazzy, '/one', 0, chunks_only=True)
    try:
        with pytest.raises(server_node.PeerTimeout) as err:
            srv.activate()
    finally:
        srv.shutdown()
    assert isinstance(err.value, server_node.FleetIncompatible), err.value
    assert srv.incompatible.given_up == {0}
    robot = _worker(tmp_path, '/two', '--startup-timeout', '2')
    _old_server(jazzy, '/two', 0, chunks_only=True)
    try:
        with pytest.raises(worker_node.PeerTimeout) as err:
            robot.activate()
    finally:
        robot.shutdown()
    assert isinstance(err.value, worker_node.ServerIncompatible), err.value
    assert OLD_PREFIX in str(err.value) and 'up/chunks ' + OTHER_HASH in str(err.value)
