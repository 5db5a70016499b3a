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
An embedded node is in the ROS 2 graph: its ``ros_discovery_info`` entry, read as ROS 2 reads it.

``ros2 node list`` and the node column of ``ros2 topic info -v`` come from the
``rmw_dds_common/msg/ParticipantEntitiesInfo`` samples on DDS topic ``ros_discovery_info``
(reliable, transient-local, keep-last 1), where the embedded nodes published nothing. Here a
late-joining observer of this process reads what a DdsBus publishes there, decodes it with
``rosbags`` from the ``.msg`` text of ros2/rmw_dds_common (not with rog_ros's types), and
compares every GID with the DDS GUIDs of the bus's endpoints as DDS discovery reports them.
"""

import os
import time

import dds_domains
import pytest

pytest.importorskip('cyclonedds')
rosbags_typesys = pytest.importorskip('rosbags.typesys')
dds_bus = pytest.importorskip('rog_ros.transport.dds_bus')
cyclone_config = pytest.importorskip('rog_ros.transport.cyclone_config')

WAIT_S = 10.0
STATUS = 'status/rog_worker_0/train_status'
GID_MSG = {16: 'char[16] data\n',     # Iron, Jazzy, Rolling (rmw_dds_common >= 2.0)
           24: 'char[24] data\n'}     # Foxy, Galactic, Humble
NODE_MSG = ('string<=256 node_namespace\nstring<=256 node_name\nGid[] reader_gid_seq\n'
            'Gid[] writer_gid_seq\n')
PARTICIPANT_MSG = 'Gid gid\nNodeEntitiesInfo[] node_entities_info_seq\n'
INFO = 'rmw_dds_common/msg/ParticipantEntitiesInfo'


def _domain(offset: int) -> int:
    """Return this module's domain ``offset`` (:func:`dds_domains.domain`)."""
    return dds_domains.domain(f'{__name__}:{offset}')


def _bus(offset: int, **kwargs):
    """Open a DdsBus on the loopback configuration and this module's domain ``offset``."""
    return dds_bus.DdsBus(namespace=f'/rog_graph_{os.getpid()}_{offset}',
                          domain_id=_domain(offset),
                          config=str(cyclone_config.config_path('loopback')), **kwargs)


def _rosbags_store(size: int):
    """Return a rosbags type store of rmw_dds_common's messages with ``size``-byte GIDs."""
    store = rosbags_typesys.get_typestore(rosbags_typesys.Stores.EMPTY)
    types = {}
    for name, text in (('Gid', GID_MSG[size]), ('NodeEntitiesInfo', NODE_MSG),
                       ('ParticipantEntitiesInfo', PARTICIPANT_MSG)):
        types.update(rosbags_typesys.get_types_from_msg(text, f'rmw_dds_common/msg/{name}'))
    store.register(types)
    return store


class Observer:
    """A ROS 2-like participant that joins after the bus: graph reader and DDS discovery."""

    def __init__(self, domain_id: int, size: int):
        from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication, \
            BuiltinTopicDcpsSubscription
        from cyclonedds.domain import DomainParticipant
        from cyclonedds.qos import Policy, Qos
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic
        from cyclonedds.util import duration

        from rog_ros.transport import idl, msgdef

        defs = {f'rmw_dds_common/{name}': msgdef.parse_msg(text, f'rmw_dds_common/{name}')
                for name, text in (('Gid', GID_MSG[size]), ('NodeEntitiesInfo', NODE_MSG),
                                   ('ParticipantEntitiesInfo', PARTICIPANT_MSG))}
        info_type = idl.build_types(defs)['rmw_dds_common/ParticipantEntitiesInfo']
        self.store = _rosbags_store(size)
        self.participant = DomainParticipant(domain_id)
        self.topic = Topic(self.participant, 'ros_discovery_info', info_type)
        qos = Qos(Policy.Reliability.Reliable(duration(seconds=1)), Policy.History.KeepAll,
                  Policy.Durability.TransientLocal,
                  Policy.DataRepresentation(use_cdrv0_representation=True))
        self.reader = DataReader(self.participant, self.topic, qos=qos)
        self.endpoints = {side: BuiltinDataReader(self.participant, builtin)
                          for side, builtin in (('writer', BuiltinTopicDcpsPublication),
                                                ('reader', BuiltinTopicDcpsSubscription))}
        self.seen = {'writer': {}, 'reader': {}}     # side -> {GUID: DCPS sample}
        self.infos = []

    def poll(self) -> None:
        """Take the graph samples (decoded by rosbags) and the endpoints DDS discovered."""
        for data, info in dds_bus._raw_take(self.reader._ref):
            if info.valid_data:
                self.infos.append(self.store.deserialize_cdr(bytes(data), INFO))
        for side, reader in self.endpoints.items():
            for sample in reader.take(N=256):
                if sample.topic_name is not None:    # None: an endpoint that went away
                    self.seen[side][sample.key.bytes] = sample

    def entry_of(self, participant: bytes):
        """Return the newest graph sample whose GID starts with ``participant``, or None."""
        mine = [i for i in self.infos if bytes(i.gid.data[:16]) == participant]
        return mine[-1] if mine else None

    def endpoints_of(self, participant: bytes, side: str) -> dict:
        """
        Return ``{GUID: DCPS sample}`` of ``participant``'s ``side`` endpoints.

        Leaves out its readers of DDS's built-in topics (``DCPSPublication`` ...): Cyclone
        shows them to the participants of its own process only, and rmw lists none either;
        and its ``ros_discovery_info`` reader (the bus reads the graph for a while after it
        starts): a participant's, as rmw's graph reader is, no node's.
        """
        return {key: s for key, s in self.seen[side].items()
                if s.participant_key.bytes == participant and
                not s.topic_name.startswith('DCPS') and
                not (side == 'reader' and s.topic_name == 'ros_discovery_info')}

    def close(self) -> None:
        """Delete the observer's entities."""
        for entity in list(self.endpoints.values()) + [self.reader, self.topic,
                                                       self.participant]:
            entity.__del__()


def _wait(observer, done) -> None:
    """Poll ``observer`` until ``done()`` or WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and not done():
        observer.poll()
        time.sleep(0.05)
    observer.poll()


def _status():
    """Return a TrainStatus to publish."""
    from rog_ros.protocol import messages

    return messages.TrainStatus(node=0, stamp=1.0)


def _bus_participant(observer, bus) -> bytes:
    """Return the participant GUID of ``bus``'s data writer as DDS discovery reports it."""
    topic = f'rt{bus.namespace}/{STATUS}'
    _wait(observer, lambda: any(s.topic_name == topic
                                for s in observer.seen['writer'].values()))
    ours = [s for s in observer.seen['writer'].values() if s.topic_name == topic]
    assert len(ours) == 1, ours
    return ours[0].participant_key.bytes


def _gids(seq, size: int) -> set:
    """Return the GIDs of a rosbags Gid sequence as GUIDs, checking their zero padding."""
    out = set()
    for gid in seq:
        data = bytes(gid.data)
        assert len(data) == size and data[16:] == bytes(size - 16), data
        out.add(data[:16])
    return out


def _check_entry(observer, participant: bytes, size: int, node: str, namespace: str):
    """Assert the entry names ``namespace``/``node`` and every endpoint by GUID; return it."""
    entry = observer.entry_of(participant)
    assert entry is not None, 'no ros_discovery_info sample of the bus'
    assert bytes(entry.gid.data) == participant.ljust(size, b'\0')
    assert [(n.node_namespace, n.node_name) for n in entry.node_entities_info_seq] == \
        [(namespace, node)]
    writers = {k for k, s in observer.endpoints_of(participant, 'writer').items()
               if s.topic_name != 'ros_discovery_info'}
    readers = set(observer.endpoints_of(participant, 'reader'))
    info = entry.node_entities_info_seq[0]
    assert _gids(info.writer_gid_seq, size) == writers and writers
    assert _gids(info.reader_gid_seq, size) == readers
    return info


def test_a_late_ros2_tool_reads_the_node_and_its_endpoint_gids():
    # Prepare: a bus with a writer and a reader, before any observer exists
    bus = _bus(0)
    bus.subscribe('w0/chunks')
    bus.publish(STATUS, _status())
    observer = Observer(bus.domain_id, 16)
    try:
        # Execute: the observer joins late (transient-local) and then the bus grows a reader
        participant = _bus_participant(observer, bus)
        _wait(observer, lambda: observer.entry_of(participant) is not None and
              len(observer.endpoints_of(participant, 'reader')) == 1)
        first = _check_entry(observer, participant, 16, 'rog_bus', bus.namespace)
        bus.subscribe('w0/acks')
        _wait(observer, lambda: len(observer.entry_of(participant).node_entities_info_seq[0]
                                    .reader_gid_seq) == 2 and
              len(observer.endpoints_of(participant, 'reader')) == 2)
        # Assert: one writer, one then two readers, each named by its DDS GUID
        assert len(first.writer_gid_seq) == 1 and len(first.reader_gid_seq) == 1
        assert len(_check_entry(observer, participant, 16, 'rog_bus', bus.namespace)
                   .reader_gid_seq) == 2
    finally:
        observer.close()
        bus.close()


def test_the_entry_is_written_with_rmw_cyclonedds_qos():
    from cyclonedds.qos import Policy

    bus = _bus(1)
    observer = Observer(bus.domain_id, 16)
    try:
        _wait(observer, lambda: observer.infos)
        bus.publish(STATUS, _status())
        participant = _bus_participant(observer, bus)
        graph = [s for s in observer.endpoints_of(participant, 'writer').values()
                 if s.topic_name == 'ros_discovery_info']
        assert len(graph) == 1
        assert graph[0].type_name == 'rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_'
        qos = graph[0].qos
        assert qos[Policy.Durability] == Policy.Durability.TransientLocal
        assert qos[Policy.History] == Policy.History.KeepLast(1)
        assert isinstance(qos[Policy.Reliability], Policy.Reliability.Reliable)
        assert bytes(qos[Policy.Userdata].data).startswith(b'typehash=RIHS01_')
    finally:
        observer.close()
        bus.close()


def test_on_humble_gids_are_24_bytes_and_the_node_is_the_one_of_open_bus(monkeypatch):
    from rog_ros.nodes.connect import open_bus

    monkeypatch.setenv('ROS_DISTRO', 'humble')
    monkeypatch.setenv('ROS_DOMAIN_ID', str(_domain(2)))
    monkeypatch.setenv('CYCLONEDDS_URI', str(cyclone_config.config_path('loopback')))
    bus = open_bus('dds', f'/rog_graph_{os.getpid()}_2', node_name='rog_worker_3')
    bus.subscribe('w3/chunks')
    bus.publish(STATUS, _status())
    observer = Observer(bus.domain_id, 24)
    try:
        participant = _bus_participant(observer, bus)
        _wait(observer, lambda: observer.entry_of(participant) is not None and
              observer.endpoints_of(participant, 'reader'))
        _check_entry(observer, participant, 24, 'rog_worker_3', bus.namespace)
    finally:
        observer.close()
        bus.close()


def test_the_entry_carries_the_namespace_and_name_of_the_ros_args(monkeypatch):
    # Prepare: worker 3's settings as ros2 run/launch_ros pass them, its bus as the node opens it
    from rog_ros.nodes import rog_worker
    from rog_ros.nodes.connect import open_bus

    monkeypatch.setenv('ROS_DOMAIN_ID', str(_domain(5)))
    monkeypatch.setenv('CYCLONEDDS_URI', str(cyclone_config.config_path('loopback')))
    a = rog_worker.build_parser().parse_args([
        '--rank', '3', '--workers', '4', '--namespace', f'/rog_graph_{os.getpid()}_5',
        '--ros-args', '-r', '__ns:=/robot1', '-r', '__node:=arm'])
    # Execute
    bus = open_bus('dds', a.namespace, node_name=a.node_name, node_namespace=a.node_namespace)
    bus.publish(STATUS, _status())
    observer = Observer(bus.domain_id, 16)
    try:
        participant = _bus_participant(observer, bus)
        _wait(observer, lambda: observer.entry_of(participant) is not None)
        # Assert: ros2 node list says /robot1/arm; the topics stay under the fleet namespace
        _check_entry(observer, participant, 16, 'arm', '/robot1')
    finally:
        observer.close()
        bus.close()


@pytest.mark.parametrize('namespaces', [('a', 'b'), ('a', 'a')])
def test_two_fleets_on_one_domain_have_no_node_name_in_common(namespaces):
    # Prepare: the status buses of two rog fleets on one domain (as --domain-id 7 twice),
    # under two fleet namespaces or one, each with the node namespace of its run
    from rog_ros.nodes import fleet

    config = str(cyclone_config.config_path('loopback'))
    spaces = [f'/rog_graph_{os.getpid()}_{k}' for k in namespaces]
    runs = [fleet.run_namespace(ns, f'/tmp/runs/{out}') for ns, out in zip(spaces, ('x', 'y'))]
    buses = [fleet._status_bus(ns, _domain(6), config, node_namespace=run)
             for ns, run in zip(spaces, runs)]
    observer = Observer(_domain(6), 16)
    try:
        for bus in buses:
            bus.publish(STATUS, _status())
        # Execute: read the entries of both participants as ros2 node list would
        wanted = {bus._participant.guid.bytes for bus in buses}

        def names():
            """Return {participant: its nodes} of the newest entries of the two buses."""
            return {bytes(i.gid.data[:16]): [(n.node_namespace, n.node_name)
                                             for n in i.node_entities_info_seq]
                    for i in observer.infos if bytes(i.gid.data[:16]) in wanted}
        _wait(observer, lambda: len(names()) == 2)
        # Assert: /<fleet namespace>/<run>/rog_fleet each, not /rog_fleet twice
        assert sorted(names().values()) == [[(f'{ns}/{out}', 'rog_fleet')]
                                            for ns, out in zip(spaces, 'xy')]
    finally:
        observer.close()
        for bus in buses:
            bus.close()


def test_rog_discovery_info_0_publishes_no_entry(monkeypatch):
    monkeypatch.setenv('ROG_DISCOVERY_INFO', '0')
    bus = _bus(3)
    bus.publish(STATUS, _status())
    observer = Observer(bus.domain_id, 16)
    try:
        participant = _bus_participant(observer, bus)
        time.sleep(0.5)
        observer.poll()
        assert observer.entry_of(participant) is None
        assert [s.topic_name for s in observer.endpoints_of(participant, 'writer').values()] \
            == [f'rt{bus.namespace}/{STATUS}']
    finally:
        observer.close()
        bus.close()


def test_a_name_ros2_would_refuse_is_said_once_and_the_bus_works(caplog):
    import logging

    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    bus = _bus(4, node_name='rog-worker')
    try:
        bus.publish(STATUS, _status())
        lines = [r.getMessage() for r in caplog.records if 'ros_discovery_info' in
                 r.getMessage()]
        assert len(lines) == 1 and "'rog-worker'" in lines[0], lines
        assert 'not a valid ROS 2 node name' in lines[0]
    finally:
        bus.close()


@pytest.mark.parametrize('name, namespace', [('rog_worker\n', '/'), ('rog_worker', '/\n'),
                                             ('rog_worker', '/fleet\n')])
def test_a_name_with_a_line_end_is_refused_as_ros2_would(caplog, name, namespace):
    # (re's $ matches before a last line end: such a name was published as valid)
    import logging

    from rog_ros.transport import discovery_info

    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    assert discovery_info.open_info(None, name, namespace) is None      # before any DDS call
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and 'not a valid ROS 2 node name' in lines[0], lines


@pytest.mark.parametrize('size', (16, 24))
def test_the_entry_is_the_bytes_rosbags_writes_for_the_same_message(size):
    import numpy as np

    from rog_ros.transport import discovery_info

    # Prepare: one entry as the bus builds it, and the same one built by rosbags
    info, node, gid_type = discovery_info.message_types(size)[:3]
    gid = bytes(range(1, 17)).ljust(size, b'\0')
    ours = info(gid=gid_type(data=list(gid)), node_entities_info_seq=[node(
        node_namespace='/', node_name='rog_worker_3',
        reader_gid_seq=[gid_type(data=list(gid))] * 2, writer_gid_seq=[])])
    store = _rosbags_store(size)
    types = {name: store.types[f'rmw_dds_common/msg/{name}']
             for name in ('Gid', 'NodeEntitiesInfo', 'ParticipantEntitiesInfo')}
    theirs_gid = types['Gid'](data=np.frombuffer(gid, dtype=np.uint8))
    theirs = types['ParticipantEntitiesInfo'](gid=theirs_gid, node_entities_info_seq=[
        types['NodeEntitiesInfo'](node_namespace='/', node_name='rog_worker_3',
                                  reader_gid_seq=[theirs_gid] * 2, writer_gid_seq=[])])
    # Execute / Assert: the same CDR bytes, header included
    assert bytes(ours.serialize()) == bytes(store.serialize_cdr(theirs, INFO))
