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
"""Topic naming, topic -> type/QoS mapping, bus selection and Cyclone configuration files."""

import pytest

from rog_ros.transport import topics
from rog_ros.transport.bus import BusError
from rog_ros.transport.choose import make_bus, rclpy_available


@pytest.mark.parametrize('topic, namespace, ros, dds', [
    ('chunks', '/rog', '/rog/chunks', 'rt/rog/chunks'),
    ('/rog/chunks', '/other', '/rog/chunks', 'rt/rog/chunks'),
    ('w3/down/chunks', '/rog/', '/rog/w3/down/chunks', 'rt/rog/w3/down/chunks'),
    ('link_stats', '/fleet_a', '/fleet_a/link_stats', 'rt/fleet_a/link_stats'),
])
def test_ros_topic_to_dds_topic(topic, namespace, ros, dds):
    assert topics.resolve(topic, namespace) == ros
    assert topics.dds_topic_name(ros) == dds


@pytest.mark.parametrize('bad', ['', '/rog/', 'rog//chunks', '/rog/2chunks', '/rog/a__b',
                                 '/rog/chunks-x'])
def test_invalid_topic_names_are_refused(bad):
    with pytest.raises(ValueError):
        topics.resolve(bad)


def test_last_segment_selects_type_and_default_qos():
    assert topics.topic_type('/rog/up/chunks') == 'RowChunk'
    assert topics.topic_type('acks') == 'TransferAck'
    reliable = ('chunks', 'versions', 'acks', 'schedule')
    for name in reliable:
        assert topics.topic_qos(name) == topics.RELIABLE
    for name in ('link_stats', 'train_status'):
        assert topics.topic_qos(name) == topics.BEST_EFFORT
    assert topics.RELIABLE.depth == 0 and topics.RELIABLE.reliable  # keep-all
    assert topics.BEST_EFFORT.depth == 10 and not topics.BEST_EFFORT.reliable
    assert topics.topic_qos('chunks', 'best_effort') == topics.BEST_EFFORT
    with pytest.raises(ValueError):
        topics.topic_type('/rog/unknown')
    with pytest.raises(ValueError):
        topics.topic_qos('chunks', 'fast')
    with pytest.raises(ValueError, match=r"unknown topic '/rog/unknown': its last segment"):
        topics.topic_qos('/rog/unknown')     # was a bare KeyError


def test_every_message_type_has_a_default_topic():
    assert set(topics.DEFAULT_TOPIC) == {'RowChunk', 'RowVersions', 'TransferAck',
                                         'Schedule', 'LinkStats', 'TrainStatus',
                                         'diagnostic_msgs/DiagnosticArray'}
    assert topics.topic_type('/diagnostics') == 'diagnostic_msgs/DiagnosticArray'
    assert topics.topic_qos('/diagnostics') == topics.SYSTEM_DEFAULT   # what rqt subscribes


def test_make_bus_falls_back_to_dds_without_rclpy(monkeypatch):
    pytest.importorskip('cyclonedds')
    if rclpy_available():
        pytest.skip('rclpy and rog_ros.msg are available here: auto picks RclpyBus')
    monkeypatch.delenv('ROG_BUS', raising=False)
    with make_bus('auto', namespace='/rog_make_bus_test', domain_id=231) as bus:
        assert type(bus).__name__ == 'DdsBus'
    with pytest.raises(BusError, match='RclpyBus unavailable'):
        make_bus('rclpy')
    with pytest.raises(ValueError):
        make_bus('zmq')


def test_cyclone_uri_and_peer_validation(tmp_path):
    cyclone_config = pytest.importorskip('rog_ros.transport.cyclone_config')
    for kind in cyclone_config.CONFIGS:
        assert cyclone_config.config_path(kind).is_file()
    uri = cyclone_config.cyclone_uri('wifi', peers=['127.0.0.1', '10.0.0.2'])
    assert uri.startswith('file://') and uri.endswith(
        '<Discovery><Peers><Peer address="127.0.0.1"/><Peer address="10.0.0.2"/></Peers>'
        '</Discovery>')
    with pytest.raises(ValueError, match='does not resolve'):
        cyclone_config.cyclone_uri('wifi', peers=['no-such-host.invalid'])
    # the check rog robot makes before it starts nodes: a missing file is named, and a file
    # in a folder with a space is found as Cyclone reads it, written as it is; percent-encoded
    # (Path.as_uri) it is not there for Cyclone, which does not decode it
    spaced = tmp_path / 'my robots' / 'cyclone.xml'
    spaced.parent.mkdir()
    spaced.write_text('<CycloneDDS/>')
    assert cyclone_config.uri_problem(f'file://{spaced},<Discovery/>') is None
    assert 'is not a file' in cyclone_config.uri_problem(spaced.as_uri() + ',<Discovery/>')
    assert 'is not a file' in cyclone_config.uri_problem(f'file://{tmp_path}/none.xml')
    # Cyclone takes a port after a peer's address; only the host is resolved (it was refused)
    uri = cyclone_config.cyclone_uri('wifi', peers=['127.0.0.1:7410', '[::1]:7412'])
    assert uri.endswith('<Peer address="127.0.0.1:7410"/><Peer address="[::1]:7412"/></Peers>'
                        '</Discovery>')
    with pytest.raises(ValueError, match="'no-such-host.invalid:7410' does not resolve"):
        cyclone_config.cyclone_uri('wifi', peers=['no-such-host.invalid:7410'])
    with pytest.raises(ValueError):
        cyclone_config.config_path('ethernet')


def test_wifi_config_keeps_datagrams_below_the_mtu():
    import xml.etree.ElementTree as ET
    cyclone_config = pytest.importorskip('rog_ros.transport.cyclone_config')
    ns = {'c': 'https://cdds.io/config'}
    root = ET.parse(cyclone_config.config_path('wifi')).getroot()
    general = root.find('c:Domain/c:General', ns)
    for tag in ('MaxMessageSize', 'MaxRexmitMessageSize'):
        assert int(general.find(f'c:{tag}', ns).text.rstrip('B')) <= 1472  # 1500 - IP - UDP
    assert root.find('c:Domain/c:Internal/c:SocketReceiveBufferSize', ns) is not None
    assert root.find('c:Domain/c:Discovery/c:Peers', ns) is not None
    # rmw_cyclonedds reads only this file: the embedded bus's writer-history mark, so that a
    # robot dying mid-transfer does not hold the server's loop (docs/faults.md)
    marks = root.find('c:Domain/c:Internal/c:Watermarks', ns)
    assert {tag: marks.find(f'c:{tag}', ns).text for tag in (
        'WhcHighInit', 'WhcHigh', 'WhcAdaptive')} == {
        'WhcHighInit': '8MB', 'WhcHigh': '8MB', 'WhcAdaptive': 'false'}
