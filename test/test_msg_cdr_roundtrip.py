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
"""CDR of our DDS types against an independent implementation (rosbags reading msg/)."""

from pathlib import Path

import numpy as np
import pytest

from rog_ros.protocol import messages as m

rosbags_typesys = pytest.importorskip('rosbags.typesys')
idl = pytest.importorskip('rog_ros.transport.idl')
convert = pytest.importorskip('rog_ros.transport.convert')
field_plans = pytest.importorskip('rog_ros.transport.field_plans')
msgdef = pytest.importorskip('rog_ros.transport.msgdef')
typehash = pytest.importorskip('rog_ros.transport.typehash')


def _sample_messages():
    """Return one non-trivial instance per message type (every field away from its default)."""
    return [
        m.RowChunk(transfer_id=2**40 + 7, seq=3, sender=2, receiver=m.SERVER, kind=m.KIND_GRAD,
                   clock=41, flags=m.FLAG_FRAGMENT, codec=2,
                   row_ranges=np.array([0, 3, 10, 4000000000], dtype=np.uint32),
                   frag_offset=65536, tensor_ids=np.array([1, 7], dtype=np.uint32),
                   scales=np.array([0.125, -3.5e-5], dtype=np.float32),
                   payload=bytes(range(256)) * 3 + b'\x00\xff', auth_tag=b'\x01\x02\x03'),
        m.RowVersions(transfer_id=9, receiver=1, n_workers=3,
                      run_starts=np.array([0, 17], dtype=np.uint32),
                      run_lengths=np.array([5, 1], dtype=np.uint32),
                      versions=np.array([4, -1, 3, 2, 2, 2], dtype=np.int32)),
        m.TransferAck(transfer_id=9, sender=m.SERVER, receiver=1, seq=12, final=True,
                      bytes_received=123456789012,
                      chunk_ranges=np.array([0, 5, 6, 12], dtype=np.uint32),
                      receive_time=1234.5678),
        m.Schedule(worker=3, clock=77, push_deadline_s=0.731, compute_sleep_s=0.05,
                   urgent_rows=np.array([5, 9], dtype=np.uint32), stop=True),
        m.LinkStats(node=2, interface='wlan0', stamp=17.25, tx_bytes=10**12, rx_bytes=5,
                    tx_mbps=54.5, rx_mbps=1.25, bitrate_mbps=866.7, signal_dbm=-61.0,
                    emulated_mbps=12.0),
        m.TrainStatus(node=m.SERVER, stamp=99.5, iteration=1000, loss=0.693, accuracy=0.5,
                      stall_s=1.5, compute_s=200.25, comm_s=30.0, bytes_up=2**33, bytes_down=7,
                      triggers=4, state='stalled'),
    ]


@pytest.fixture(scope='module')
def typestore():
    """Return a rosbags type store holding the types parsed from msg/ by rosbags itself."""
    store = rosbags_typesys.get_typestore(rosbags_typesys.Stores.EMPTY)
    types = dict(rosbags_typesys.get_types_from_msg('int32 sec\nuint32 nanosec\n',
                                                    'builtin_interfaces/msg/Time'))
    for path in sorted(msgdef.msg_dir().glob('*.msg')):
        types.update(rosbags_typesys.get_types_from_msg(
            path.read_text(encoding='utf-8'), f'rog_ros/msg/{path.stem}'))
    store.register(types)
    return store


def _to_rosbags(store, msg):
    """Build the rosbags message of a dataclass, field by field, without our converters."""
    cls = store.types[f'rog_ros/msg/{msg.TYPE}']
    renames = field_plans.FIELD_RENAMES.get(msg.TYPE, {})
    values = {}
    for name, value in vars(msg).items():
        if isinstance(value, bytes):
            value = np.frombuffer(value, dtype=np.uint8)
        elif isinstance(value, m.Time):
            value = store.types['builtin_interfaces/msg/Time'](sec=value.sec,
                                                               nanosec=value.nanosec)
        values[renames.get(name, name)] = value
    return cls(**values)


def _assert_same(got, want):
    assert type(got) is type(want)
    for name, value in vars(want).items():
        other = getattr(got, name)
        if isinstance(value, np.ndarray):
            assert other.dtype == value.dtype, name
            np.testing.assert_array_equal(other, value, err_msg=name)
        elif isinstance(value, float) and np.isnan(value):
            assert np.isnan(other), name
        else:
            assert type(other) is type(value) and other == value, name


def _strip_padding(data: bytes) -> bytes:
    """Drop trailing zero padding to a 4/8-byte boundary (implementations differ there)."""
    data = bytes(data)
    end = len(data)
    while end > 4 and (end - 4) % 8 and data[end - 1] == 0:
        end -= 1
    return data[:end]


@pytest.mark.parametrize('msg', _sample_messages(), ids=lambda msg: msg.TYPE)
def test_cyclone_bytes_equal_rosbags_bytes(typestore, msg):
    # Prepare
    sample = convert.to_sample(msg)
    # Execute
    ours = sample.serialize()
    theirs = bytes(typestore.serialize_cdr(_to_rosbags(typestore, msg),
                                           f'rog_ros/msg/{msg.TYPE}', little_endian=True))
    # Assert
    assert ours[:4] == b'\x00\x01\x00\x00'  # CDR_LE, plain XCDR1, as rmw_cyclonedds writes
    assert _strip_padding(ours) == _strip_padding(theirs)


@pytest.mark.parametrize('little_endian', [True, False], ids=['le', 'be'])
@pytest.mark.parametrize('msg', _sample_messages(), ids=lambda msg: msg.TYPE)
def test_rosbags_bytes_decode_with_cyclone(typestore, msg, little_endian):
    # Prepare
    raw = bytes(typestore.serialize_cdr(_to_rosbags(typestore, msg),
                                        f'rog_ros/msg/{msg.TYPE}', little_endian=little_endian))
    # Execute
    got = convert.from_sample(idl.dds_type(msg.TYPE).deserialize(raw))
    # Assert
    _assert_same(got, msg)


@pytest.mark.parametrize('msg', _sample_messages(), ids=lambda msg: msg.TYPE)
def test_cyclone_bytes_decode_with_rosbags(typestore, msg):
    # Prepare
    raw = convert.to_sample(msg).serialize()
    # Execute
    decoded = typestore.deserialize_cdr(raw, f'rog_ros/msg/{msg.TYPE}')
    # Assert
    want = _to_rosbags(typestore, msg)
    for name in field_plans.FIELD_PLANS[msg.TYPE]:
        got_value, want_value = getattr(decoded, name[1]), getattr(want, name[1])
        if isinstance(want_value, np.ndarray):
            assert got_value.dtype == want_value.dtype, name
            np.testing.assert_array_equal(got_value, want_value)
        else:
            assert got_value == want_value, name


def test_sample_fields_are_bytes_and_arrays_not_lists():
    # Prepare
    chunk = _sample_messages()[0]
    # Execute
    sample = type(convert.to_sample(chunk)).deserialize(convert.to_sample(chunk).serialize())
    # Assert
    assert idl.FAST_SEQUENCES
    assert type(sample.payload) is bytes and sample.payload == chunk.payload
    assert isinstance(sample.row_ranges, np.ndarray) and sample.row_ranges.dtype == np.uint32
    assert isinstance(sample.scales, np.ndarray) and sample.scales.dtype == np.float32


def test_nan_and_empty_defaults_survive():
    # Prepare
    status = m.TrainStatus(node=0, stamp=0.0)  # loss/accuracy NaN, empty state
    chunk = m.RowChunk(transfer_id=1, seq=0, sender=0, receiver=m.SERVER, kind=m.KIND_GRAD,
                       clock=0)  # every sequence empty
    # Execute / Assert
    for msg in (status, chunk):
        raw = convert.to_sample(msg).serialize()
        _assert_same(convert.from_sample(idl.dds_type(msg.TYPE).deserialize(raw)), msg)


def test_truncated_sample_is_rejected_not_misread():
    # Prepare
    raw = convert.to_sample(_sample_messages()[0]).serialize()
    # Execute / Assert: a short payload raises instead of yielding a partial message
    with pytest.raises(Exception):
        idl.dds_type('RowChunk').deserialize(raw[:-40])


def test_well_known_nested_types_match_ros(tmp_path):
    """Time/Header used by a message: layout and hash equal those of ROS 2 (rosbags)."""
    # Prepare
    text = 'std_msgs/Header header\nbuiltin_interfaces/Time[] stamps\nfloat32 value\n'
    (tmp_path / 'Stamped.msg').write_text(text)
    defs = msgdef.load_msg_defs(tmp_path)
    types = idl.build_types(defs)
    store = rosbags_typesys.get_typestore(rosbags_typesys.Stores.ROS2_HUMBLE)
    store.register(rosbags_typesys.get_types_from_msg(text, 'rog_ros/msg/Stamped'))
    time_cls = store.types['builtin_interfaces/msg/Time']
    header = store.types['std_msgs/msg/Header'](stamp=time_cls(sec=5, nanosec=7),
                                                frame_id='map')
    theirs = store.types['rog_ros/msg/Stamped'](
        header=header, stamps=[time_cls(sec=1, nanosec=2)], value=1.5)
    time_ = types['builtin_interfaces/Time']
    ours = types['rog_ros/Stamped'](
        header=types['std_msgs/Header'](stamp=time_(sec=5, nanosec=7), frame_id='map'),
        stamps=[time_(sec=1, nanosec=2)], value=1.5)
    # Execute
    ours_raw = ours.serialize()
    theirs_raw = bytes(store.serialize_cdr(theirs, 'rog_ros/msg/Stamped'))
    # Assert
    assert _strip_padding(ours_raw) == _strip_padding(theirs_raw)
    assert idl.dds_type_name('std_msgs/Header') == 'std_msgs::msg::dds_::Header_'
    assert types['std_msgs/Header'].__idl__.idl_transformed_typename == \
        'std_msgs::msg::dds_::Header_'
    for name in ('builtin_interfaces/Time', 'std_msgs/Header', 'rog_ros/Stamped'):
        ros_name = name.replace('/', '/msg/')
        assert typehash.rihs01(name, defs) == store.hash_rihs01(ros_name), name


def test_msg_dir_is_the_source_tree_msg_folder():
    source = Path(__file__).resolve().parent.parent
    if source not in Path(msgdef.__file__).resolve().parents:
        pytest.skip('rog_ros is imported from an install (colcon test), not this source tree')
    assert msgdef.msg_dir() == source / 'msg'
