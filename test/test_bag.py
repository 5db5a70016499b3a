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
ROS 2 MCAP recording: schemas, channels and CDR that an independent decoder reads back.

The fleet-level test (test_fleet_run.py) checks topics and counts of a real run; here one node's
RecordingBus over an in-memory bus, decoded with mcap_ros2 from the stored ros2msg schemas.
"""

import pytest
from rog_ros.nodes.diagnostics import DIAGNOSTICS, rejects_status
from rog_ros.protocol import messages as m
from rog_ros.transport.bus import Bus
from rog_ros.transport.standard_msgs import DiagnosticArray
import yaml

mcap_reader = pytest.importorskip('mcap.reader')
decoder = pytest.importorskip('mcap_ros2.decoder')
bag = pytest.importorskip('rog_ros.transport.bag')


class MemoryBus(Bus):
    """A bus that keeps what is published and hands out what a test queued."""

    def __init__(self):
        super().__init__('/fleet')
        self.sent, self.incoming = [], []

    def publish(self, topic, msg):
        self.sent.append((topic, msg))

    def subscribe(self, topic, callback=None, qos=None):
        pass

    def poll(self, timeout_s=0.0):
        out, self.incoming = self.incoming, []
        return out

    def matched(self, topic):
        return 1

    def close(self):
        pass


def test_recording_bus_writes_decodable_ros2_mcap(tmp_path):
    # Prepare
    path = tmp_path / 'node.mcap'
    inner = MemoryBus()
    bus = bag.RecordingBus(inner, bag.McapRecorder(str(path)))
    status = m.TrainStatus(node=1, stamp=12.5, iteration=7, loss=0.25, state='active')
    sched = m.Schedule(worker=1, clock=7, push_deadline_s=0.5, stop=False)
    inner.incoming = [('/fleet/w1/schedule', sched), ('/fleet/w1/chunks', m.RowChunk(
        transfer_id=1, seq=0, sender=-1, receiver=1, kind=m.KIND_UPDATE, clock=7))]
    # Execute
    bus.publish('status/rog_worker_1/train_status', status)
    bus.publish(DIAGNOSTICS, DiagnosticArray.now([rejects_status('rog_worker_1',
                                                                 {'bad_tag': 2})]))
    assert len(bus.poll()) == 2                          # the node still gets everything
    bus.close()
    # Assert
    with open(path, 'rb') as fh:
        reader = mcap_reader.make_reader(fh, decoder_factories=[decoder.DecoderFactory()])
        got = [(c.topic, s.name, d) for s, c, _, d in reader.iter_decoded_messages()]
        channels = reader.get_summary().channels
    assert [(t, n) for t, n, _ in got] == [
        ('/fleet/status/rog_worker_1/train_status', 'rog_ros/msg/TrainStatus'),
        ('/diagnostics', 'diagnostic_msgs/msg/DiagnosticArray'),
        ('/fleet/w1/schedule', 'rog_ros/msg/Schedule')]        # chunks are not recorded
    st, diag, sc = (d for _, _, d in got)
    assert (st.stamp.sec, st.stamp.nanosec, st.iteration, st.state) == (12, 500000000, 7,
                                                                        'active')
    assert diag.status[0].level == 1 and diag.status[0].name == 'rog_worker_1: rejects'
    assert {kv.key: kv.value for kv in diag.status[0].values} == {'total': '2', 'bad_tag': '2'}
    assert (sc.clock, sc.push_deadline_s) == (7, 0.5)
    for channel in channels.values():
        qos = yaml.safe_load(channel.metadata['offered_qos_profiles'])
        assert qos[0]['reliability'] in (1, 2) and 'depth' in qos[0]


def test_diagnostics_type_hash_is_ros2s():
    typesys = pytest.importorskip('rosbags.typesys')
    from rog_ros.transport import idl
    store = typesys.get_typestore(typesys.Stores.ROS2_HUMBLE)
    for name in ('diagnostic_msgs/DiagnosticArray', 'diagnostic_msgs/DiagnosticStatus',
                 'diagnostic_msgs/KeyValue'):
        pkg, typ = name.split('/')
        assert idl.type_hash(name) == store.hash_rihs01(f'{pkg}/msg/{typ}'), name
