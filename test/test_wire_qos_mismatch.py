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
A peer that cannot match a DdsBus, or carries another type hash, is named in the bus's log.

DDS matches no such pair and says nothing to the user: a ROS 2 node that subscribes to a
best-effort status topic with ROS 2's default (RELIABLE) profile, asks for TRANSIENT_LOCAL, or
publishes row chunks with ``qos_profile_sensor_data`` (BEST_EFFORT) gets no data, and the
fleet's node no data from it (found by an outside ROS 2 client, 2026-12-06: the server only
said ``no peer on up/chunks``). The peer here is a plain participant of this process with the
QoS a ROS 2 node would give; the bus is the one under test. A peer built from other .msg files
matches by type name where it sends no type information (rmw_cyclonedds): its
``typehash=RIHS01_...;`` USER_DATA (Iron and newer) is then the only early sign of it.
"""

import logging
import os
import time

import dds_domains
import pytest

pytest.importorskip('cyclonedds')
dds_bus = pytest.importorskip('rog_ros.transport.dds_bus')
cyclone_config = pytest.importorskip('rog_ros.transport.cyclone_config')

WAIT_S = 10.0
STATUS = 'status/rog_worker_0/train_status'


def _domain(offset: int) -> int:
    """Return this module's domain ``offset`` (:func:`dds_domains.domain`)."""
    return dds_domains.domain(f'{__name__}:{offset}')


def _bus(offset: int):
    """Open a DdsBus on the loopback configuration and this module's domain ``offset``."""
    return dds_bus.DdsBus(namespace=f'/rog_qos_{os.getpid()}_{offset}',
                          domain_id=_domain(offset),
                          config=str(cyclone_config.config_path('loopback')))


def _ros2_qos(reliable: bool, transient_local: bool = False):
    """Return the DDS QoS of a ROS 2 endpoint: reliable or best effort, KEEP_LAST(10)."""
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.util import duration

    return Qos(Policy.Reliability.Reliable(duration(milliseconds=100)) if reliable
               else Policy.Reliability.BestEffort,
               Policy.History.KeepLast(10),
               Policy.Durability.TransientLocal if transient_local
               else Policy.Durability.Volatile,
               Policy.DataRepresentation(use_cdrv0_representation=True))


def _peer(bus, topic: str, msg_type: str, writer: bool, qos):
    """Create the ROS 2 peer's writer or reader on ``topic`` of ``bus``; return its entities."""
    from cyclonedds.domain import DomainParticipant
    from cyclonedds.pub import DataWriter
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    from rog_ros.transport import idl

    participant = DomainParticipant(bus.domain_id)
    dds_topic = Topic(participant, f'rt{bus.namespace}/{topic}', idl.dds_type(msg_type))
    entity = (DataWriter if writer else DataReader)(participant, dds_topic, qos=qos)
    return participant, dds_topic, entity


def _hints(bus, caplog, seconds: float = WAIT_S) -> list:
    """Poll ``bus`` for up to ``seconds`` until it logs a QoS hint; return the hints logged."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        bus.poll(0.05)
        hints = [r.getMessage() for r in caplog.records
                 if r.name == 'rog_ros.dds' and 'QoS' in r.getMessage()]
        if hints:
            return hints
    return []


def _close(bus, peer) -> None:
    """Delete the peer's entities, then close the bus."""
    for entity in reversed(peer):
        entity.__del__()
    bus.close()


def test_a_reliable_subscriber_of_a_status_topic_is_named_with_the_profile_to_use(caplog):
    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    bus = _bus(0)
    bus.advertise(STATUS)
    peer = _peer(bus, STATUS, 'TrainStatus', writer=False, qos=_ros2_qos(reliable=True))
    try:
        hints = _hints(bus, caplog)
        assert len(hints) == 1, hints
        assert f'a reader of {bus.namespace}/{STATUS} asks for QoS' in hints[0]
        assert '(RELIABILITY)' in hints[0] and 'BEST_EFFORT' in hints[0]
        assert 'qos_profile_sensor_data' in hints[0]
        assert bus.matched(STATUS) == 0
        assert _hints(bus, caplog, 1.5) == hints          # once, not at every poll
    finally:
        _close(bus, peer)


def test_a_transient_local_subscriber_is_named_for_durability(caplog):
    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    bus = _bus(1)
    bus.advertise(STATUS)
    peer = _peer(bus, STATUS, 'TrainStatus', writer=False,
                 qos=_ros2_qos(reliable=False, transient_local=True))
    try:
        hints = _hints(bus, caplog)
        assert len(hints) == 1 and '(DURABILITY)' in hints[0], hints
    finally:
        _close(bus, peer)


def test_a_best_effort_publisher_of_row_chunks_is_named_while_waiting_for_peers(caplog):
    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    bus = _bus(2)
    bus.subscribe('up/chunks')
    peer = _peer(bus, 'up/chunks', 'RowChunk', writer=True, qos=_ros2_qos(reliable=False))
    try:
        deadline = time.monotonic() + WAIT_S     # a node waiting for its peers calls matched()
        while time.monotonic() < deadline and not caplog.records:
            assert bus.matched('up/chunks') == 0
            time.sleep(0.05)
        hints = [r.getMessage() for r in caplog.records]
        assert len(hints) == 1, hints
        assert f'a writer on {bus.namespace}/up/chunks offers QoS' in hints[0]
        assert '(RELIABILITY)' in hints[0] and 'RELIABLE, VOLATILE' in hints[0]
        assert "rclpy's default profile" in hints[0]
    finally:
        _close(bus, peer)


def test_ros2_default_and_sensor_profiles_that_match_say_nothing(caplog):
    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    bus = _bus(3)
    bus.advertise(STATUS)
    bus.subscribe('up/chunks')
    status_reader = _peer(bus, STATUS, 'TrainStatus', writer=False,
                          qos=_ros2_qos(reliable=False))
    chunk_writer = _peer(bus, 'up/chunks', 'RowChunk', writer=True,
                         qos=_ros2_qos(reliable=True))
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not (bus.matched(STATUS) and
                                                   bus.matched('up/chunks')):
            bus.poll(0.05)
        assert bus.matched(STATUS) == 1 and bus.matched('up/chunks') == 1
        assert _hints(bus, caplog, 1.5) == []
    finally:
        _close(bus, chunk_writer)
        for entity in reversed(status_reader):
            entity.__del__()


def _writer_with_user_data(bus, topic: str, msg_type: str, user_data: bytes):
    """Create a ROS 2 writer on ``topic`` of ``bus`` whose USER_DATA is ``user_data``."""
    from cyclonedds.qos import Policy, Qos

    qos = _ros2_qos(reliable=True)
    policies = list(qos) + ([Policy.Userdata(data=user_data)] if user_data else [])
    return _peer(bus, topic, msg_type, writer=True, qos=Qos(*policies))


def test_a_peer_of_another_msg_build_is_named_by_its_type_hash(caplog):
    from rog_ros.transport import idl

    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    bus = _bus(4)
    bus.subscribe('up/chunks')
    other = 'RIHS01_' + '0' * 64                      # a RowChunk.msg of another version
    peer = _writer_with_user_data(bus, 'up/chunks', 'RowChunk', f'typehash={other};'.encode())
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not caplog.records:
            bus.poll(0.05)
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1, lines                       # and no QoS hint: it matches
        assert f'a writer on {bus.namespace}/up/chunks has type hash {other}' in lines[0]
        assert idl.type_hash('RowChunk') in lines[0] and 'other .msg files' in lines[0]
        bus.poll(1.5)
        assert len(caplog.records) == 1                      # once
    finally:
        _close(bus, peer)


@pytest.mark.parametrize('user_data, offset', [(b'', 5), (b'typehash=%s;', 6)])
def test_peers_of_this_build_or_without_a_hash_say_nothing(caplog, user_data, offset):
    from rog_ros.transport import idl

    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    bus = _bus(offset)
    bus.subscribe('up/chunks')
    data = user_data.replace(b'%s', idl.type_hash('RowChunk').encode())   # b'': Humble
    peer = _writer_with_user_data(bus, 'up/chunks', 'RowChunk', data)
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not bus.matched('up/chunks'):
            bus.poll(0.05)
        assert bus.matched('up/chunks') == 1
        bus.poll(1.5)
        assert [r.getMessage() for r in caplog.records] == []
    finally:
        _close(bus, peer)


def test_a_bus_that_only_publishes_names_the_reader_too(caplog):
    from rog_ros.protocol import messages as m

    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    bus = _bus(7)                                   # netmon: publishes, never polls
    topic = 'status/netmon_0/link_stats'
    bus.advertise(topic)
    peer = _peer(bus, topic, 'LinkStats', writer=False, qos=_ros2_qos(reliable=True))
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not caplog.records:
            bus.publish(topic, m.LinkStats(node=0, interface='wlan0', stamp=0.0))
            time.sleep(0.1)
        hints = [r.getMessage() for r in caplog.records]
        assert len(hints) == 1 and f'a reader of {bus.namespace}/{topic}' in hints[0], hints
    finally:
        _close(bus, peer)


def _status():
    """Return a TrainStatus to publish."""
    from rog_ros.protocol import messages

    return messages.TrainStatus(node=0, stamp=1.0)


def _failure_lines(caplog) -> list:
    """Return the bus's log lines about a failed discovery reader."""
    return [r.getMessage() for r in caplog.records
            if r.name == 'rog_ros.dds' and 'discovery reader failed' in r.getMessage()]


def test_a_failing_discovery_reader_is_said_once_and_publish_goes_on(caplog):
    from cyclonedds.internal import DDS

    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    bus = _bus(5)
    try:
        # Prepare: the built-in publication reader fails under the bus (its entity is gone)
        DDS._dll_handle.dds_delete(bus._discovery['writer']._ref)
        # Execute: publish runs the once-a-second peer check; then poll and matched do too
        bus.publish(STATUS, _status())
        time.sleep(1.1)
        bus.publish(STATUS, _status())
        bus.poll(0.05)
        assert bus.matched(STATUS) == 0
        # Assert: one clear line, and the node carries on
        lines = _failure_lines(caplog)
        assert len(lines) == 1, lines
        assert 'BAD_PARAMETER' in lines[0] and 'carries on' in lines[0]
    finally:
        bus.close()


def test_discovery_readers_that_cannot_be_created_leave_a_working_bus(caplog, monkeypatch):
    from cyclonedds.core import DDSException

    def refuse(*_args):
        """Fail as Cyclone does when it cannot create an entity."""
        raise DDSException(-1, 'injected')

    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    monkeypatch.setattr(dds_bus, 'BuiltinDataReader', refuse)
    bus = _bus(6)
    try:
        bus.publish(STATUS, _status())
        bus.poll(0.05)
        lines = _failure_lines(caplog)
        assert len(lines) == 1 and 'injected' in lines[0], lines
    finally:
        bus.close()


def _reader_with_user_data(bus, topic: str, msg_type: str, user_data: bytes):
    """Create a ROS 2 reader on ``topic`` of ``bus`` whose USER_DATA is ``user_data``."""
    from cyclonedds.qos import Policy, Qos

    policies = list(_ros2_qos(reliable=True)) + [Policy.Userdata(data=user_data)]
    return _peer(bus, topic, msg_type, writer=False, qos=Qos(*policies))


def _until(check, seconds: float = WAIT_S):
    """Return ``check()`` once true, or its last value after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(0.05)


def test_readers_of_another_build_and_of_this_one_are_told_by_participant():
    # The server gives up a robot whose downlink only a reader of another build reads, and
    # counts as a robot only a participant that reads its downlink and writes the uplink:
    # the bus names the participants (GUID prefixes) on each side, those of another build
    # apart, and forgets an endpoint once it is deleted.
    from rog_ros.transport import idl

    bus = _bus(8)
    bus.advertise('w0/chunks')
    bus.subscribe('up/chunks')
    other = f'typehash=RIHS01_{"0" * 64};'.encode()
    ours = f'typehash={idl.type_hash("RowChunk")};'.encode()
    old = _reader_with_user_data(bus, 'w0/chunks', 'RowChunk', other)
    echo = _reader_with_user_data(bus, 'w0/chunks', 'RowChunk', ours)
    robot = _writer_with_user_data(bus, 'up/chunks', 'RowChunk', ours)
    old_up = _writer_with_user_data(bus, 'up/chunks', 'RowChunk', other)
    try:
        old_up_prefix = dds_bus._guid_prefix(old_up[0].guid)
        assert _until(lambda: bus.foreign_writers('up/chunks')) == [old_up_prefix]
        assert bus.foreign_writers('w0/chunks') == []
        old_prefix = dds_bus._guid_prefix(old[0].guid)
        assert len(old_prefix) == 26 and old_prefix.count(':') == 2
        assert _until(lambda: bus.foreign_readers('w0/chunks')) == [old_prefix]
        readers = _until(lambda: bus.participants('w0/chunks', writer=False))
        assert readers == {dds_bus._guid_prefix(echo[0].guid)}
        writers = _until(lambda: bus.participants('up/chunks', writer=True))
        assert writers == {dds_bus._guid_prefix(robot[0].guid)} and not readers & writers
        assert bus.foreign_readers('w1/chunks') == [] and bus.foreign_readers('up/chunks') == []
        for entity in reversed(old):
            entity.__del__()
        assert _until(lambda: not bus.foreign_readers('w0/chunks'))
    finally:
        for entity in reversed(echo + old_up):
            entity.__del__()
        _close(bus, robot)


def test_a_reader_of_another_row_chunk_is_not_matched_and_named_by_participant():
    # An older rog_ros whose RowChunk has other members: Cyclone 11 compares the types and
    # never matches its reader (TYPE_CONSISTENCY), so only the bus's discovery data can name
    # it for the server, which gives the robot up (test_server_foreign_readers).
    from dataclasses import dataclass

    from cyclonedds.domain import DomainParticipant
    from cyclonedds.idl import IdlStruct
    import cyclonedds.idl.types as types
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    from rog_ros.transport import idl

    if idl.LEGACY_BINDING:
        pytest.skip('the binding 0.10 sends no type information: DDS matches by name')

    @dataclass
    class OldRowChunk(IdlStruct, typename=idl.dds_type_name('RowChunk')):
        """A RowChunk of another rog_ros: other members under the same type name."""

        schema_version: types.uint8
        rows: types.int64

    bus = _bus(9)
    bus.advertise('w0/chunks')
    participant = DomainParticipant(bus.domain_id)
    topic = Topic(participant, f'rt{bus.namespace}/w0/chunks', OldRowChunk)
    qos = Qos(*(list(_ros2_qos(reliable=True)) +
                [Policy.Userdata(data=f'typehash=RIHS01_{"1" * 64};'.encode())]))
    reader = DataReader(participant, topic, qos=qos)
    try:
        prefix = dds_bus._guid_prefix(participant.guid)
        assert _until(lambda: bus.foreign_readers('w0/chunks')) == [prefix]
        bus.poll(1.0)
        assert bus.matched('w0/chunks') == 0
        assert bus.participants('w0/chunks', writer=False) == set()
    finally:
        _close(bus, (participant, topic, reader))


def test_endpoints_are_not_named_once_the_discovery_readers_failed(caplog):
    # A discovery reader that fails is deleted and the bus goes on without (above); the
    # endpoints it had reported were kept, no longer updated: a reader of another build
    # that left stayed in foreign_readers for good, and the server gave up the robot
    # whose downlink it had read whenever that robot was out of reach for 3 leases.
    from cyclonedds.core import DDSException

    def refuse(*_args, **_kwargs):
        """Fail as a broken discovery reader does."""
        raise DDSException(-1, 'injected')

    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    bus = _bus(10)
    bus.advertise('w0/chunks')
    old = _reader_with_user_data(bus, 'w0/chunks', 'RowChunk',
                                 f'typehash=RIHS01_{"2" * 64};'.encode())
    try:
        prefix = dds_bus._guid_prefix(old[0].guid)
        assert _until(lambda: bus.foreign_readers('w0/chunks')) == [prefix]
        for reader in bus._discovery.values():
            reader.take = refuse
        assert bus.foreign_readers('w0/chunks') == []
        assert bus.participants('w0/chunks', writer=False) is None
        assert len(_failure_lines(caplog)) == 1
    finally:
        _close(bus, old)


def test_matched_counts_no_endpoint_of_another_build_that_dds_matched():
    # A ROS 2 node on rmw_cyclonedds gives Cyclone no type information, so Cyclone matches
    # it by type name alone: an endpoint of another build whose types keep their names (here:
    # the same type, another USER_DATA typehash, which DDS matches as it would such a node)
    # was in matched(), so a server took an old robot for a robot of this build at its start,
    # and a robot an old server for its server. matched() counts at most the endpoints of
    # this build once discovery saw one of another build there.
    from rog_ros.transport import idl

    bus = _bus(11)
    bus.advertise('w0/chunks')
    bus.subscribe('up/chunks')
    other = f'typehash=RIHS01_{"3" * 64};'.encode()
    ours = f'typehash={idl.type_hash("RowChunk")};'.encode()
    old = _reader_with_user_data(bus, 'w0/chunks', 'RowChunk', other)
    old_up = _writer_with_user_data(bus, 'up/chunks', 'RowChunk', other)
    peers, robot = (), ()
    try:
        assert _until(lambda: bus.foreign_readers('w0/chunks') and
                      bus.foreign_writers('up/chunks'))
        bus.poll(0.5)
        # DDS matched both (no type information tells them apart) ...
        assert dds_bus._matched_peers(bus._writers[f'{bus.namespace}/w0/chunks'], True) == 1
        assert dds_bus._matched_peers(bus._readers[f'{bus.namespace}/up/chunks'][0],
                                      False) == 1
        # ... the bus counts neither
        assert bus.matched('w0/chunks') == 0 and bus.matched('up/chunks') == 0
        robot = _reader_with_user_data(bus, 'w0/chunks', 'RowChunk', ours)
        peers = _writer_with_user_data(bus, 'up/chunks', 'RowChunk', b'')   # no hash: Humble
        assert _until(lambda: bus.matched('w0/chunks') == 1 and bus.matched('up/chunks') == 1)
        bus.poll(0.5)
        assert bus.matched('w0/chunks') == 1 and bus.matched('up/chunks') == 1
    finally:
        for entity in reversed(old + old_up + robot):
            entity.__del__()
        _close(bus, peers)


def _old_server(domain_id: int, namespace: str, rank: int, tool: bool = False):
    """
    Return the entities of a server of another build on ``domain_id``: one participant.

    It reads the uplink and writes robot ``rank``'s downlink with another USER_DATA typehash
    and this build's types, which DDS matches as it matches a ROS 2 node on rmw_cyclonedds
    (no type information); with ``tool``, it only reads the uplink.
    """
    from cyclonedds.domain import DomainParticipant
    from cyclonedds.pub import DataWriter
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    from rog_ros.nodes.routing import server_inbox, worker_inbox
    from rog_ros.transport import idl
    from rog_ros.transport.topics import topic_type

    participant = DomainParticipant(domain_id)
    entities = [participant]
    qos = Qos(*(list(_ros2_qos(reliable=True)) +
                [Policy.Userdata(data=f'typehash=RIHS01_{"4" * 64};'.encode())]))
    for topics, make in ((server_inbox(), DataReader),
                         ([] if tool else worker_inbox(rank), DataWriter)):
        for t in topics:
            topic = Topic(participant, f'rt{namespace}/{t}', idl.dds_type(topic_type(t)))
            entities += [topic, make(participant, topic, qos=qos)]
    return entities


@pytest.mark.parametrize('tool', [False, True])
def test_a_robot_facing_a_server_of_another_build_exits_4(tmp_path, monkeypatch, tool):
    # A robot of this build whose server runs another rog_ros waited until startup_timeout
    # with `no peer on ...` (exit 1; respawned again and again). Over DdsBus it now names the
    # server's participant and both builds and exits 4 at startup_timeout (it waits as long
    # for a server of its own build, which may be late: the other may be another fleet's;
    # until 2026-12-07 it exited after 3 leases, 0.3 s here); an older `ros2 topic echo` of
    # the uplink (a tool: it writes no downlink) is not taken for the server.
    from rog_ros.nodes import respawn, rog_worker, worker_node
    from rog_ros.nodes.ros_node import failure_status

    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE', 'ROG_BUS'):
        monkeypatch.delenv(var, raising=False)
    domain = _domain(12 + tool)
    monkeypatch.setenv('ROS_DOMAIN_ID', str(domain))
    monkeypatch.setenv('CYCLONEDDS_URI', str(cyclone_config.config_path('loopback')))
    monkeypatch.setattr(worker_node, 'INCOMPATIBLE_SCALE', 0.01, raising=False)
    namespace = f'/rog_srv_{os.getpid()}_{int(tool)}'
    timeout = 4.0
    args = rog_worker.build_parser().parse_args(
        ['--workload', 'toy', '--workers', '1', '--rank', '0', '--namespace', namespace,
         '--bus', 'dds', '--startup-timeout', str(timeout)])
    robot = worker_node.WorkerNode(args)
    robot.configure()
    old = _old_server(domain, namespace, 0, tool=tool)
    prefix = dds_bus._guid_prefix(old[0].guid)
    try:
        assert type(robot.bus).__name__ == 'DdsBus' and robot.bus.domain_id == domain
        start = time.monotonic()
        with pytest.raises(worker_node.PeerTimeout) as err:
            robot.activate()
        took = time.monotonic() - start
    finally:
        for entity in reversed(old):
            entity.__del__()
        robot.shutdown()
    text = str(err.value)
    if tool:
        assert not isinstance(err.value, worker_node.ServerIncompatible), text
        assert took > timeout - 0.1 and 'no peer on' in text and failure_status(err.value) == 1
        return
    assert isinstance(err.value, worker_node.ServerIncompatible), text
    assert timeout - 0.1 < took < timeout + 2.0, took      # at startup_timeout
    assert failure_status(err.value) == 4 and not respawn.crashed(4)
    assert prefix in text and '\n' not in text
    assert f'its types: up/chunks RIHS01_{"4" * 64}, w0/chunks RIHS01_{"4" * 64}' in text
    assert 'upgrade the server or this robot' in text


def test_the_build_is_told_by_type_name_and_user_data_not_by_type_information():
    # What DdsBus compares: the DDS type name, then the USER_DATA typehash (Iron and newer),
    # never the XTypes type information, which a ROS 2 node on rmw_cyclonedds does not send
    # (Cyclone matches it by type name alone). The samples below are built as discovery
    # gives them, with no type information (type_id None), as such a node's are.
    import uuid

    from cyclonedds.builtin import DcpsEndpoint
    from cyclonedds.qos import Policy, Qos

    from rog_ros.transport import idl

    ours_name, ours = idl.dds_type_name('RowChunk'), idl.type_hash('RowChunk')
    other = 'RIHS01_' + '5' * 64
    renamed = 'rog_ros::msg::dds_::RowChunkV1_'

    def qos(text):
        return Qos(Policy.Userdata(data=text.encode())) if text is not None else Qos()

    decide = dds_bus._other_build
    assert decide('/rog/w0/chunks', ours_name, qos(f'typehash={other};')) == other
    assert decide('/rog/w0/chunks', ours_name, qos(f'typehash={ours};')) is None
    assert decide('/rog/w0/chunks', ours_name, qos(None)) is None           # Humble
    assert decide('/rog/w0/chunks', ours_name, qos('enclave=/;')) is None
    assert decide('/rog/w0/chunks', renamed, qos(None)) == renamed          # Humble, renamed
    assert decide('/rog/w0/chunks', renamed, qos(f'typehash={ours};')) == renamed
    assert decide('/rog/w0/nonesuch', renamed, qos(f'typehash={other};')) is None

    bus = _bus(14)
    try:
        bus.advertise('w0/chunks')
        old_participant, tool_participant = uuid.uuid4(), uuid.uuid4()

        def endpoint(participant, type_name, text):
            return DcpsEndpoint(key=uuid.uuid4(), participant_key=participant,
                                participant_instance_handle=0,
                                topic_name=f'rt{bus.namespace}/w0/chunks',
                                type_name=type_name, qos=qos(text), type_id=None)

        bus._note_endpoint('reader', endpoint(old_participant, ours_name,
                                              f'typehash={other};'))
        bus._note_endpoint('reader', endpoint(tool_participant, renamed, None))
        humble = uuid.uuid4()
        bus._note_endpoint('reader', endpoint(humble, ours_name, None))
        assert bus.foreign_readers('w0/chunks') == sorted(
            dds_bus._guid_prefix(p) for p in (old_participant, tool_participant))
        assert bus.participants('w0/chunks', writer=False) == {dds_bus._guid_prefix(humble)}
    finally:
        bus.close()


def test_a_reader_of_a_renamed_type_without_a_hash_is_named_by_participant():
    # A Humble robot of another build whose RowChunk was renamed (no typehash in USER_DATA):
    # DDS does not match it (another type name) and it was not named: a server waited for
    # it until startup_timeout. Its type name tells it.
    from dataclasses import dataclass

    from cyclonedds.domain import DomainParticipant
    from cyclonedds.idl import IdlStruct
    import cyclonedds.idl.types as types
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    @dataclass
    class RowChunkV1(IdlStruct, typename='rog_ros::msg::dds_::RowChunkV1_'):
        """A RowChunk of another rog_ros, renamed."""

        schema_version: types.uint8

    bus = _bus(15)
    bus.advertise('w0/chunks')
    participant = DomainParticipant(bus.domain_id)
    topic = Topic(participant, f'rt{bus.namespace}/w0/chunks', RowChunkV1)
    reader = DataReader(participant, topic, qos=_ros2_qos(reliable=True))
    try:
        prefix = dds_bus._guid_prefix(participant.guid)
        assert _until(lambda: bus.foreign_readers('w0/chunks')) == [prefix]
        assert bus.matched('w0/chunks') == 0
        assert bus.participants('w0/chunks', writer=False) == set()
    finally:
        _close(bus, (participant, topic, reader))


@pytest.mark.parametrize('user_data', ['typehash=;', 'typehash=RIHS02_' + '6' * 64 + ';',
                                       'typehash=rihs01;'])
def test_a_user_data_hash_that_cannot_be_compared_tells_no_build(user_data):
    # A `typehash=` with no value, or one of a hash version this build does not compute
    # (RIHS02 ...), says nothing of the peer's build, as no hash does (Humble). Compared
    # with this build's RIHS01 it differed, so a peer of this build was taken for one of
    # another: left out of matched() and participants(), its server given up by a robot
    # (exit 4, not respawned), its robot by the server.
    from cyclonedds.qos import Policy, Qos

    from rog_ros.transport import idl

    ours_name = idl.dds_type_name('RowChunk')
    qos = Qos(Policy.Userdata(data=user_data.encode()))
    assert dds_bus._other_build('/rog/w0/chunks', ours_name, qos) is None
    other = 'RIHS01_' + '7' * 64                           # a hash it can compare still tells
    assert dds_bus._other_build('/rog/w0/chunks', ours_name, Qos(
        Policy.Userdata(data=f'typehash={other};'.encode()))) == other


def test_a_server_replaced_mid_run_by_another_build_ends_the_robot_with_exit_4(
        tmp_path, monkeypatch, caplog):
    # Over real DDS: the robot starts with a server of this build (a DdsBus with the
    # server's endpoints), which then leaves, and a server of another build comes (the
    # server upgraded and restarted while the robot runs the old rog_ros). The robot looked
    # for another build only at its start: it ended with `no message from the server`
    # (exit 1, respawned). It waits server_timeout (2 s) for a server of its build, then
    # names the other one and both builds in one line, exit 4.
    from rog_ros.nodes import respawn, rog_worker, worker_node
    from rog_ros.nodes.routing import server_inbox, worker_inbox
    from rog_ros.nodes.ros_node import failure_status

    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE', 'ROG_BUS'):
        monkeypatch.delenv(var, raising=False)
    domain = _domain(16)
    monkeypatch.setenv('ROS_DOMAIN_ID', str(domain))
    monkeypatch.setenv('CYCLONEDDS_URI', str(cyclone_config.config_path('loopback')))
    monkeypatch.setattr(worker_node, 'INCOMPATIBLE_SCALE', 0.01)
    namespace = f'/rog_mid_{os.getpid()}'
    args = rog_worker.build_parser().parse_args(
        ['--workload', 'toy', '--workers', '1', '--rank', '0', '--namespace', namespace,
         '--bus', 'dds', '--startup-timeout', '10', '--server-timeout', '2'])
    robot = worker_node.WorkerNode(args)
    robot.configure()
    own = dds_bus.DdsBus(namespace=namespace, domain_id=domain)   # (the robot's config)
    old = []
    try:
        for t in server_inbox():
            own.subscribe(t)
        for t in worker_inbox(0):
            own.advertise(t)
        assert robot.activate()
        own.close()
        old = _old_server(domain, namespace, 0)
        prefix = dds_bus._guid_prefix(old[0].guid)
        start = time.monotonic()
        with pytest.raises((worker_node.PeerTimeout, TimeoutError)) as err:
            while robot.spin_once():
                time.sleep(0.005)
        took = time.monotonic() - start
    finally:
        own.close()
        for entity in reversed(old):
            entity.__del__()
        robot.shutdown()
    text = str(err.value)
    assert isinstance(err.value, worker_node.ServerIncompatible), text
    assert failure_status(err.value) == 4 and not respawn.crashed(4)
    assert took < 2.0 + 2.0, took
    assert text.startswith('worker 0: no message from its server for server_timeout 2 s: '
                           'the only server heard runs another rog_ros build'), text
    assert prefix in text and f'RIHS01_{"4" * 64}' in text and '\n' not in text
