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
A DDS client that knows only msg/*.msg and the ROS 2 conventions talks to a DdsBus.

What a ROS 2 node (rmw_cyclonedds) or any DDS tool sees of our traffic: the discovery data of
a writer (DDS topic ``rt/<ns>/...``, type ``rog_ros::msg::dds_::T_``, the profile's QoS, the
``typehash=RIHS01_`` user data) and samples in plain CDR that a type written by hand from the
.msg file reads and writes. None of rog_ros's transport code is used on the client side: the
types below are transcribed from msg/TrainStatus.msg, msg/RowChunk.msg and msg/RowVersions.msg
(also as it was before versions went in parts), with builtin_interfaces/Time as ROS 2 defines
it.
"""

from dataclasses import dataclass
import os
import time
from types import SimpleNamespace

import dds_domains
import numpy as np
import pytest

from rog_ros.protocol import messages as m

pytest.importorskip('cyclonedds')
dds_bus = pytest.importorskip('rog_ros.transport.dds_bus')
cyclone_config = pytest.importorskip('rog_ros.transport.cyclone_config')

WAIT_S = 20.0


def _client():
    """Return the hand-written types and QoS of the client, and the DDS entities it uses."""
    from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication
    from cyclonedds.core import Policy, Qos
    from cyclonedds.domain import DomainParticipant
    from cyclonedds.idl import IdlStruct
    import cyclonedds.idl.annotations as annotate
    from cyclonedds.idl.types import float32, float64, int32, int64, sequence, uint16, \
        uint32, uint64, uint8
    from cyclonedds.pub import DataWriter
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    from cyclonedds.util import duration

    @dataclass
    @annotate.final
    class Time(IdlStruct, typename='builtin_interfaces::msg::dds_::Time_'):
        sec: int32
        nanosec: uint32

    @dataclass
    @annotate.final
    class TrainStatus(IdlStruct, typename='rog_ros::msg::dds_::TrainStatus_'):
        schema_version: uint16
        node: int64
        stamp: Time
        iteration: int64
        loss: float64
        accuracy: float64
        stall_s: float64
        compute_s: float64
        comm_s: float64
        bytes_up: int64
        bytes_down: int64
        triggers: int64
        state: str
        start_model: str
        incarnation: uint64
        auth_seq: uint64
        auth_tag: sequence[uint8]

    @dataclass
    @annotate.final
    class RowChunk(IdlStruct, typename='rog_ros::msg::dds_::RowChunk_'):
        schema_version: uint16
        transfer_id: int64
        seq: int64
        sender: int64
        receiver: int64
        kind: int64
        clock: int64
        flags: int64
        codec: int64
        row_ranges: sequence[uint32]
        frag_offset: int64
        tensor_ids: sequence[uint32]
        scales: sequence[float32]
        payload: sequence[uint8]
        rate_bps: float64
        incarnation: uint64
        target_incarnation: uint64
        auth_seq: uint64
        auth_tag: sequence[uint8]

    @dataclass
    @annotate.final
    class RowVersions(IdlStruct, typename='rog_ros::msg::dds_::RowVersions_'):
        schema_version: uint16
        part: uint16
        parts: uint16
        transfer_id: int64
        receiver: int64
        n_workers: int64
        run_starts: sequence[uint32]
        run_lengths: sequence[uint32]
        versions: sequence[int32]
        staleness_slack: sequence[uint16]
        incarnation: uint64
        target_incarnation: uint64
        auth_seq: uint64
        auth_tag: sequence[uint8]

    @dataclass
    @annotate.final
    class RowVersions3(IdlStruct, typename='rog_ros::msg::dds_::RowVersions_'):
        # msg/RowVersions.msg before parts (schema version 3): a robot of that release
        schema_version: uint16
        transfer_id: int64
        receiver: int64
        n_workers: int64
        run_starts: sequence[uint32]
        run_lengths: sequence[uint32]
        versions: sequence[int32]
        staleness_slack: sequence[uint16]
        incarnation: uint64
        target_incarnation: uint64
        auth_seq: uint64
        auth_tag: sequence[uint8]

    # the ROS 2 profiles as a ROS 2 node asks for them (plain CDR, as rmw_cyclonedds sends)
    plain_cdr = Policy.DataRepresentation(use_cdrv0_representation=True)
    return SimpleNamespace(
        Time=Time, TrainStatus=TrainStatus, RowChunk=RowChunk, RowVersions=RowVersions,
        RowVersions3=RowVersions3, Policy=Policy,
        best_effort=Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(10),
                        Policy.Durability.Volatile, plain_cdr),
        reliable=Qos(Policy.Reliability.Reliable(max_blocking_time=duration(seconds=1)),
                     Policy.History.KeepAll, Policy.Durability.Volatile, plain_cdr),
        BuiltinDataReader=BuiltinDataReader, publications=BuiltinTopicDcpsPublication,
        DomainParticipant=DomainParticipant, DataReader=DataReader, DataWriter=DataWriter,
        Topic=Topic)


@pytest.fixture(scope='module')
def fleet_side():
    """Open a DdsBus on its own domain and namespace, and a plain participant beside it."""
    domain = dds_domains.domain(__name__)
    namespace = f'/rogwire{os.getpid()}'
    bus = dds_bus.DdsBus(namespace=namespace, domain_id=domain,
                         config=str(cyclone_config.config_path('loopback')))
    client = _client()
    yield bus, client, client.DomainParticipant(domain), namespace
    bus.close()


def _wait(predicate, what):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.05)
    pytest.fail(f'within {WAIT_S:g} s: {what}')


def test_discovery_shows_ros2_names_qos_and_type_hash(fleet_side):
    bus, c, participant, ns = fleet_side
    bus.advertise('status/rog_worker_0/train_status')
    bus.advertise('up/chunks')
    reader = c.BuiltinDataReader(participant, c.publications)
    seen = {}

    def _collect():
        for sample in reader.take(64):
            seen[sample.topic_name] = sample
        return all(t in seen for t in (f'rt{ns}/status/rog_worker_0/train_status',
                                       f'rt{ns}/up/chunks'))

    _wait(_collect, "the bus's writers in the discovery data")
    status = seen[f'rt{ns}/status/rog_worker_0/train_status']
    chunks = seen[f'rt{ns}/up/chunks']
    assert status.type_name == 'rog_ros::msg::dds_::TrainStatus_'
    assert chunks.type_name == 'rog_ros::msg::dds_::RowChunk_'
    policy = c.Policy
    assert status.qos[policy.Reliability] == policy.Reliability.BestEffort
    assert repr(chunks.qos[policy.Reliability]).startswith('Policy.Reliability.Reliable(')
    assert status.qos[policy.History] == policy.History.KeepLast(10)
    assert chunks.qos[policy.History] == policy.History.KeepAll
    for sample in (status, chunks):
        data = sample.qos[policy.Userdata].data
        assert data.startswith(b'typehash=RIHS01_') and data.endswith(b';')
        assert len(data) == len(b'typehash=RIHS01_;') + 64      # sha256 in hex


def test_a_hand_written_reader_receives_train_status(fleet_side):
    bus, c, participant, ns = fleet_side
    topic = c.Topic(participant, f'rt{ns}/status/rog_worker_1/train_status', c.TrainStatus)
    reader = c.DataReader(participant, topic, qos=c.best_effort)
    sent = m.TrainStatus(node=1, stamp=12.25, iteration=37, loss=0.5, accuracy=0.8125,
                         stall_s=1.5, compute_s=3.0, comm_s=0.75, bytes_up=10 ** 9,
                         bytes_down=42, triggers=3, state='training', start_model='92bcacacc3b9',
                         incarnation=2 ** 40 + 1)
    bus.advertise('status/rog_worker_1/train_status')

    def _take():
        bus.publish('status/rog_worker_1/train_status', sent)
        return reader.take(8)

    got = _wait(_take, 'a TrainStatus sample in the hand-written reader')[0]
    assert got.schema_version == m.TRAIN_STATUS_SCHEMA and got.node == 1
    assert (got.stamp.sec, got.stamp.nanosec) == (12, 250_000_000)
    assert (got.iteration, got.loss, got.accuracy, got.stall_s) == (37, 0.5, 0.8125, 1.5)
    assert (got.bytes_up, got.bytes_down, got.triggers) == (10 ** 9, 42, 3)
    assert got.state == 'training' and got.incarnation == 2 ** 40 + 1
    assert got.start_model == '92bcacacc3b9'


def test_a_hand_written_writer_sends_a_row_chunk_the_bus_decodes(fleet_side):
    bus, c, participant, ns = fleet_side
    bus.subscribe('up/chunks')
    topic = c.Topic(participant, f'rt{ns}/up/chunks', c.RowChunk)
    writer = c.DataWriter(participant, topic, qos=c.reliable)
    _wait(lambda: bus.matched('up/chunks') >= 1 or None, 'the bus to match the writer')
    payload = bytes(range(256)) * 5
    writer.write(c.RowChunk(
        schema_version=m.SCHEMA_VERSION, transfer_id=2 ** 40 + 9, seq=4, sender=2,
        receiver=-1, kind=0, clock=17, flags=3, codec=2, row_ranges=[0, 3, 10, 4_000_000_000],
        frag_offset=65536, tensor_ids=[1, 7], scales=[0.125, -3.5e-5], payload=list(payload),
        rate_bps=2.5e7, incarnation=5, target_incarnation=0, auth_seq=0, auth_tag=[]))
    got = _wait(lambda: [msg for _, msg in bus.poll(0.1)], 'the chunk at the bus')[0]
    assert isinstance(got, m.RowChunk) and bus.rejects == 0
    assert (got.transfer_id, got.seq, got.sender, got.receiver) == (2 ** 40 + 9, 4, 2, -1)
    assert (got.clock, got.flags, got.codec, got.frag_offset) == (17, 3, 2, 65536)
    np.testing.assert_array_equal(got.row_ranges, np.array([0, 3, 10, 4_000_000_000],
                                                           dtype=np.uint32))
    np.testing.assert_array_equal(got.tensor_ids, np.array([1, 7], dtype=np.uint32))
    np.testing.assert_array_equal(got.scales, np.array([0.125, -3.5e-5], dtype=np.float32))
    assert got.payload == payload and got.rate_bps == 2.5e7 and got.incarnation == 5


def _whole_and_part():
    """Return a whole RowVersions copy and a part (1 of 3) of the same values."""
    whole = m.RowVersions(transfer_id=2 ** 33 + 5, receiver=0, n_workers=2,
                          run_starts=np.array([0, 9, 30], np.uint32),
                          run_lengths=np.array([9, 21, 4], np.uint32),
                          versions=np.array([3, -1, 4, -1, 7, 2], np.int32),
                          staleness_slack=np.array([0, 5], np.uint16), incarnation=11)
    return whole, m.RowVersions(**dict(vars(whole), part=1, parts=3,
                                       schema_version=m.VERSIONS_PARTS_SCHEMA))


def test_a_hand_written_reader_reads_whole_versions_and_parts(fleet_side):
    bus, c, _, ns = fleet_side
    participant = c.DomainParticipant(dds_domains.domain(__name__))   # (fleet_side's)
    topic = c.Topic(participant, f'rt{ns}/w0/versions', c.RowVersions)
    reader = c.DataReader(participant, topic, qos=c.reliable)
    bus.advertise('w0/versions')
    _wait(lambda: bus.matched('w0/versions') >= 1 or None, 'the bus to match the reader')
    whole, part = _whole_and_part()
    bus.publish('w0/versions', whole)
    bus.publish('w0/versions', part)
    got = []
    _wait(lambda: got.extend(reader.take(8)) or len(got) >= 2, 'both RowVersions at the client')
    for sample, sent in zip(got, (whole, part)):
        assert (sample.schema_version, sample.part, sample.parts) == (
            sent.schema_version, sent.part, sent.parts)
        assert (sample.transfer_id, sample.receiver, sample.n_workers) == (2 ** 33 + 5, 0, 2)
        assert list(sample.run_starts) == [0, 9, 30] and list(sample.run_lengths) == [9, 21, 4]
        assert list(sample.versions) == [3, -1, 4, -1, 7, 2]
        assert list(sample.staleness_slack) == [0, 5] and sample.incarnation == 11
    assert [x.schema_version for x in got] == [3, 4]


def test_a_reader_of_the_layout_before_parts_is_told_apart(fleet_side, caplog):
    # A robot of the release before parts: DDS with type information does not match its
    # reader (other members), and the bus says so in one line naming the fix. Where no type
    # information travels (Cyclone 0.10 on Python 3.8: the bus matches it by the type's
    # name, and this test waited for a warning that never came), it reads our bytes as its
    # layout: part and parts fill the padding
    # after schema_version, so a whole copy is its message byte for byte, and a part reads
    # with schema version 4, which its check refuses in one line
    from rog_ros.transport import convert, idl
    bus, c, _, ns = fleet_side
    participant = c.DomainParticipant(dds_domains.domain(__name__))   # (fleet_side's)
    topic = c.Topic(participant, f'rt{ns}/w1/versions', c.RowVersions3)
    reader = c.DataReader(participant, topic, qos=c.reliable)   # (kept: matched, or not)
    bus.advertise('w1/versions')
    whole, part = _whole_and_part()
    if idl.LEGACY_BINDING:
        # Cyclone 0.10 (Python 3.8, a Jetson's) sends no type information: DDS matches the
        # old reader by its type's name, and it reads what we write as its own layout
        _wait(lambda: bus.matched('w1/versions') >= 1 or None, 'the old reader matched by name')
        bus.publish('w1/versions', whole)
        bus.publish('w1/versions', part)
        got = []
        _wait(lambda: got.extend(reader.take(8)) or len(got) >= 2, 'both at the old reader')
        assert [(x.schema_version, x.transfer_id, list(x.versions)) for x in got] == [
            (v, 2 ** 33 + 5, [3, -1, 4, -1, 7, 2]) for v in (3, 4)]
    else:
        _wait(lambda: bus.matched('w1/versions') == 0 and 'has a RowVersions of other members'
              in caplog.text and 'run the same rog_ros on every robot' in caplog.text or None,
              "the bus's warning about the old reader (it looks when asked who matched)")
        assert reader.take(8) == []
    cdr = convert.to_sample(whole).serialize(use_version_2=False)
    old = c.RowVersions3(
        schema_version=3, transfer_id=2 ** 33 + 5, receiver=0, n_workers=2,
        run_starts=[0, 9, 30], run_lengths=[9, 21, 4], versions=[3, -1, 4, -1, 7, 2],
        staleness_slack=[0, 5], incarnation=11, target_incarnation=0, auth_seq=0, auth_tag=[])
    assert cdr == old.serialize(use_version_2=False)
    read = c.RowVersions3.deserialize(convert.to_sample(part).serialize(use_version_2=False))
    assert read.schema_version == 4 and list(read.versions) == [3, -1, 4, -1, 7, 2]
    with pytest.raises(m.MessageError, match='schema_version 4, this build speaks 3'):
        m.check_schema(m.RowVersions(transfer_id=1, receiver=0, n_workers=2, schema_version=4))
