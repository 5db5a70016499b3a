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
DdsBus over the loopback configuration: every message type, reliable bursts, two processes.

Every test uses its own namespace and a domain of its own (``dds_domains``: held, no other test
process draws it), so that test runs of other users on the same machine cannot cross-talk.
Deadlines only bound how long a test may wait for traffic; nothing asserts on timing.
"""

import os
from pathlib import Path
import re
import subprocess
import sys
import textwrap
import time

import dds_domains
import numpy as np
import pytest

from rog_ros.protocol import messages as m

pytest.importorskip('cyclonedds')
dds_bus = pytest.importorskip('rog_ros.transport.dds_bus')
cyclone_config = pytest.importorskip('rog_ros.transport.cyclone_config')
cyclone_settings = pytest.importorskip('rog_ros.transport.cyclone_settings')

ROOT = Path(__file__).resolve().parent.parent
CHUNK_BYTES = 16 * 1024
BURST = 200
WAIT_S = 20.0


def _domain(offset: int) -> int:
    """Return this module's domain ``offset`` (:func:`dds_domains.domain`: see why there)."""
    return dds_domains.domain(f'{__name__}:{offset}')


def _namespace(tag: str) -> str:
    return f'/rog_test_{os.getpid()}_{tag}'


def _chunk(seq: int) -> m.RowChunk:
    return m.RowChunk(transfer_id=5, seq=seq, sender=1, receiver=m.SERVER, kind=m.KIND_GRAD,
                      clock=3, row_ranges=np.array([2 * seq, 2 * seq + 1], dtype=np.uint32),
                      tensor_ids=np.array([seq % 7], dtype=np.uint32),
                      scales=np.array([seq / 8], dtype=np.float32),
                      payload=bytes([seq % 256]) * CHUNK_BYTES)


def _one_of_each():
    return {
        'chunks': _chunk(0),
        'versions': m.RowVersions(transfer_id=5, receiver=1, n_workers=2,
                                  run_starts=np.array([0], dtype=np.uint32),
                                  run_lengths=np.array([4], dtype=np.uint32),
                                  versions=np.array([3, -1], dtype=np.int32)),
        'acks': m.TransferAck(transfer_id=5, sender=m.SERVER, receiver=1, seq=1, final=True,
                              bytes_received=CHUNK_BYTES,
                              chunk_ranges=np.array([0, 1], dtype=np.uint32),
                              receive_time=2.5),
        'schedule': m.Schedule(worker=1, clock=3, push_deadline_s=0.4, compute_sleep_s=0.1,
                               urgent_rows=np.array([0, 2], dtype=np.uint32), stop=False),
        'link_stats': m.LinkStats(node=1, interface='wlan0', stamp=3.0, tx_bytes=10,
                                  rx_bytes=20, tx_mbps=1.5, rx_mbps=2.5, bitrate_mbps=300.0,
                                  signal_dbm=-55.0, emulated_mbps=12.0),
        'train_status': m.TrainStatus(node=1, stamp=3.0, iteration=4, loss=0.5, accuracy=0.25,
                                      state='computing'),
    }


def _wait_matched(bus, topics_, deadline):
    while any(bus.matched(t) == 0 for t in topics_):
        assert time.monotonic() < deadline, f'no match on {topics_}'
        time.sleep(0.01)


def _collect(bus, count, deadline, pred=lambda t, msg: True):
    got = []
    while len(got) < count and time.monotonic() < deadline:
        got += [(t, msg) for t, msg in bus.poll(0.2) if pred(t, msg)]
    return got


def _assert_equal(got, want):
    assert type(got) is type(want)
    for name, value in vars(want).items():
        other = getattr(got, name)
        if isinstance(value, np.ndarray):
            assert other.dtype == value.dtype
            np.testing.assert_array_equal(other, value)
        else:
            assert other == value, name


@pytest.fixture(scope='module')
def buses():
    """Two buses in this process on one loopback-configured domain."""
    config = str(cyclone_config.config_path('loopback'))
    domain = _domain(0)
    a = dds_bus.DdsBus(namespace=_namespace('a'), domain_id=domain, config=config)
    b = dds_bus.DdsBus(namespace=_namespace('a'), domain_id=domain, config=config)
    yield a, b
    a.close()
    b.close()


def test_every_message_type_crosses_the_bus(buses):
    # Prepare
    a, b = buses
    msgs = _one_of_each()
    for topic in msgs:
        b.subscribe(topic)
        a.advertise(topic)
    deadline = time.monotonic() + WAIT_S
    _wait_matched(a, list(msgs), deadline)
    # Execute
    for topic, msg in msgs.items():
        a.publish(topic, msg)
    got = dict(_collect(b, len(msgs), deadline))
    # Assert
    assert sorted(got) == sorted(b.namespace + '/' + t for t in msgs)
    for topic, msg in msgs.items():
        _assert_equal(got[b.namespace + '/' + topic], msg)
    assert b.rejects == 0


def test_reliable_burst_arrives_once_and_in_order_with_callback(buses):
    # Prepare
    a, b = buses
    received = []
    b.subscribe('up/chunks', callback=received.append)
    a.advertise('up/chunks')
    deadline = time.monotonic() + WAIT_S
    _wait_matched(a, ['up/chunks'], deadline)
    # Execute
    for seq in range(BURST):
        a.publish('up/chunks', _chunk(seq))
    while len(received) < BURST and time.monotonic() < deadline:
        assert b.poll(0.2) == []  # callback subscriptions are not returned
    time.sleep(0.2)
    b.poll(0.0)
    # Assert
    assert [c.seq for c in received] == list(range(BURST))
    assert all(c.payload == bytes([c.seq % 256]) * CHUNK_BYTES for c in received)


def test_bus_does_not_receive_its_own_publications(buses):
    # Prepare
    a, b = buses
    a.subscribe('own/train_status')
    b.subscribe('own/train_status')
    deadline = time.monotonic() + WAIT_S
    a.advertise('own/train_status')
    _wait_matched(a, ['own/train_status'], deadline)
    # Execute
    a.publish('own/train_status', m.TrainStatus(node=7, stamp=1.0))
    got_b = _collect(b, 1, deadline)
    got_a = a.poll(0.3)
    # Assert
    assert [msg.node for _, msg in got_b] == [7]
    assert got_a == []


def _settings_cyclone_took(uri: str, log, domain: int) -> dict:
    """
    Create domain ``domain`` from ``uri`` with Cyclone's configuration trace; return its settings.

    Cyclone logs each setting it runs with (``config: Domain/Discovery/SPDPInterval/#text: 2 s
    {1}``), 0.10 and 11 alike: what it took from the sources in order, not what a file says,
    and a source it refuses fails the domain.
    """
    from cyclonedds.domain import Domain
    tracing = ('<CycloneDDS><Domain Id="any"><Tracing><Category>config</Category>'
               f'<OutputFile>{log}</OutputFile></Tracing></Domain></CycloneDDS>')
    handle = Domain(domain, ','.join((uri, tracing)))
    del handle
    setting = re.compile(r'config: (\S+): (.*?) \{')
    found = (setting.search(line) for line in Path(log).read_text().splitlines())
    return dict(match.groups() for match in found if match)


def _no_discovery_variables(monkeypatch) -> None:
    """Unset the variables that add to a domain's configuration: the bus's own default alone."""
    for name in ('CYCLONEDDS_URI', 'ROS_LOCALHOST_ONLY', 'ROS_AUTOMATIC_DISCOVERY_RANGE',
                 'ROS_STATIC_PEERS', 'ROS_DISTRO'):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize('kind,interval',
                         [('embedded', '2 s'), ('loopback', '2 s'), ('wifi', '4 s')])
def test_every_configuration_announces_the_participant_often(kind, interval, tmp_path,
                                                             monkeypatch):
    """
    Cyclone runs with a 2 s SPDPInterval under the bus's own default and loopback, 4 s on wifi.

    A robot silent past its 10 s lease is dropped by its peers and heard again only at an
    announcement of one side: 8 s apart with Cyclone's default, and Cyclone 11 pings a dropped
    peer every 30 s (a freeze of 21 s: 19 s more, docs/faults.md). Before, 30 s (0.10) or
    ``default`` (11). On Wi-Fi each announcement costs airtime, with Cyclone 0.10 then 32
    unicasts to the server's host from every worker robot (its ``server_host`` peer, listed
    without a port): 2 s spent 64% of the air of 32 robots, 4 s 32% (after a 21 s link outage
    heard in 0.1-1.4 s, as with 2 s); listed at the server node's port, 14.5% and 7.2%.
    """
    _no_discovery_variables(monkeypatch)
    if kind == 'embedded':   # what a bus creates its first participant under, no variable set
        uri = dds_bus._configure_domain(_domain(60), None)
    else:                    # what ROS 2 nodes get (rmw_cyclonedds reads only the variable)
        uri = cyclone_config.cyclone_uri(kind)
    took = _settings_cyclone_took(uri, tmp_path / 'cyclone.log', _domain(61))
    assert took['Domain/Discovery/SPDPInterval/#text'] == interval
    assert took['Domain/Discovery/LeaseDuration/#text'] == '10 s'   # the interval is below it


def _discovery_ports(uri: str, log, domain: int) -> tuple:
    """
    Create domain ``domain`` from ``uri``; return the ports Cyclone announces to, and its own.

    The configuration trace lists each unicast peer with every port it will send an
    announcement to (``add_peer_addresses: add udp/10.0.0.10:7410, :7412, ...`` on 0.10,
    ``add_peer_address: add udp/10.0.0.10:7410 ... :7474`` on 11, which names the first and
    the last) and the participant's own discovery port (``uc ports: disc 7510``).
    """
    from cyclonedds.domain import Domain
    tracing = ('<CycloneDDS><Domain Id="any"><Tracing><Category>config</Category>'
               f'<OutputFile>{log}</OutputFile></Tracing></Domain></CycloneDDS>')
    handle = Domain(domain, ','.join((uri, tracing)))
    del handle
    text = Path(log).read_text()
    peer = [line for line in text.splitlines() if 'add_peer_address' in line and '10.0.0.' in line]
    assert len(peer) <= 1, peer
    ports = [int(p) for p in re.findall(r':(\d+)', peer[0].split(' add ', 1)[1])] if peer else []
    own = re.search(r'uc ports: disc (\d+)', text)
    return ports, int(own.group(1)) if own else None


def test_a_worker_robot_announces_itself_to_the_one_port_of_the_server_node(tmp_path):
    """
    A worker robot lists its ``server_host`` with the port the server node takes: one datagram.

    Listed without a port, Cyclone 0.10 sent each announcement to 32 ports of the server's host
    (one per participant index it might have, 33 on 11), each a frame on the air from every
    worker robot: 32 robots, a 4 s interval, 32% of the airtime. Both versions take the port.
    """
    from rog_ros.nodes import robot
    domain = _domain(64)
    environ = {'ROS_DOMAIN_ID': str(domain)}
    worker_uri = robot.robot_environment(environ, '10.0.0.10')['CYCLONEDDS_URI']
    server_env = dict(environ, **robot.robot_environment(environ))
    server_uri = robot.server_node_environment(server_env)['CYCLONEDDS_URI']
    port = 7400 + 250 * domain + 10 + 2 * cyclone_config.SERVER_PARTICIPANT_INDEX
    assert _discovery_ports(worker_uri, tmp_path / 'worker.log', domain)[0] == [port]
    assert _discovery_ports(server_uri, tmp_path / 'server.log', domain) == ([], port)


def _announced_ports(uri: str, log, domain: int) -> dict:
    """
    Create domain ``domain`` from ``uri``; return ``{host: ports}`` it announces itself to.

    Every ``add_peer_address`` line of the configuration trace: 0.10 names each port, 11 the
    first and the last (``:7410 ... :7474``, a participant gain of 2 apart).
    """
    from cyclonedds.domain import Domain
    tracing = ('<CycloneDDS><Domain Id="any"><Tracing><Category>config</Category>'
               f'<OutputFile>{log}</OutputFile></Tracing></Domain></CycloneDDS>')
    handle = Domain(domain, ','.join((uri, tracing)))
    del handle
    out = {}
    for line in Path(log).read_text().splitlines():
        found = re.search(r'add_peer_address(?:es)?: add udp/([^ ]+?):(\d+)(.*)', line)
        if found is None:
            continue
        host, first, rest = found.group(1), int(found.group(2)), found.group(3)
        more = [int(p) for p in re.findall(r':(\d+)', rest.split('(', 1)[0])]
        ports = list(range(first, more[-1] + 1, 2)) if '...' in rest else [first] + more
        out.setdefault(host, []).extend(ports)
    return out


def test_a_peer_that_is_the_server_host_costs_one_datagram_not_every_index(tmp_path):
    """
    A worker robot given every robot as ``peers`` and the server as ``server_host``: one port.

    Listed in ``peers`` too (every robot on every robot, an access point that drops
    multicast), the server's host was also listed without a port: 33 datagrams more per
    announcement on 11.0.1 (32 on 0.10), 34 to the server's host in all. Another robot keeps
    every port: its participants take the first free index (docs/faults.md).
    """
    from rog_ros.nodes import robot
    domain = _domain(66)
    environ = {'ROS_DOMAIN_ID': str(domain)}
    uri = robot.robot_environment(environ, '10.0.0.10', ['10.0.0.10', '10.0.0.11'])[
        'CYCLONEDDS_URI']
    ports = _announced_ports(uri, tmp_path / 'worker.log', domain)
    port = 7400 + 250 * domain + 10 + 2 * cyclone_config.SERVER_PARTICIPANT_INDEX
    assert ports['10.0.0.10'] == [port]
    assert len(ports['10.0.0.11']) in (32, 33)   # 0.10, 11: indices 0-31, 0-32


def test_the_bus_keeps_pinging_a_dropped_peer_on_cyclone_11_only(tmp_path, monkeypatch):
    """
    Cyclone 11 runs the bus's default with both locator prune delays ``inf``; 0.10 with none.

    Without multicast Cyclone 11 forgot a peer 60 s after dropping it at its lease: after an
    80 s link outage the two never met again; and it stopped pinging a configured peer that
    did not answer within 30 s: a robot listing only the server never met a server started
    40 s after it (docs/faults.md). Cyclone 0.10 keeps its peers and refuses the elements (the
    domain would fail), so its buses do not get them.
    """
    from rog_ros.transport import idl
    _no_discovery_variables(monkeypatch)
    uri = dds_bus._configure_domain(_domain(62), None)
    took = _settings_cyclone_took(uri, tmp_path / 'cyclone.log', _domain(63))
    assert took['Domain/Discovery/SPDPInterval/#text'] == '2 s'
    if idl.LEGACY_BINDING:
        assert 'LocatorPruneDelay' not in uri
    else:
        assert took['Domain/Discovery/DiscoveredLocatorPruneDelay/#text'] == 'inf'
        assert took['Domain/Discovery/InitialLocatorPruneDelay/#text'] == 'inf'


def test_wrong_type_and_closed_bus_are_refused():
    bus = dds_bus.DdsBus(namespace=_namespace('c'), domain_id=_domain(2))
    with pytest.raises(ValueError):
        bus.publish('chunks', m.TrainStatus(node=0, stamp=0.0))
    bus.close()
    bus.close()  # idempotent
    with pytest.raises(dds_bus.BusError):
        bus.publish('train_status', m.TrainStatus(node=0, stamp=0.0))


_PUBLISHER = textwrap.dedent("""
    import sys, time
    import numpy as np
    from rog_ros.protocol import messages as m
    from rog_ros.transport.dds_bus import DdsBus
    domain, namespace, config, burst, size = sys.argv[1:6]
    bus = DdsBus(namespace=namespace, domain_id=int(domain), config=config)
    bus.subscribe('acks')
    bus.advertise('chunks')
    deadline = time.monotonic() + 20
    while bus.matched('chunks') == 0 or bus.matched('acks') == 0:
        if time.monotonic() > deadline:
            sys.exit(3)
        time.sleep(0.01)
    for seq in range(int(burst)):
        bus.publish('chunks', m.RowChunk(
            transfer_id=9, seq=seq, sender=0, receiver=m.SERVER, kind=m.KIND_GRAD, clock=1,
            row_ranges=np.array([seq, seq + 1], dtype=np.uint32),
            payload=bytes([seq % 251]) * int(size)))
    while time.monotonic() < deadline:  # stay until the receiver acknowledges everything
        for _, ack in bus.poll(0.2):
            if ack.final and ack.seq == int(burst):
                bus.close()
                sys.exit(0)
    sys.exit(4)
""")


def burst_from_child(python: str) -> tuple:
    """
    Receive the ``BURST`` chunks a child process publishes and acknowledge them.

    ``python`` runs the child (another interpreter and binding in test_py38_compat.py).
    Returns the chunks received, in order, and the child's exit code.
    """
    config = str(cyclone_config.config_path('loopback'))
    domain, namespace = _domain(1), _namespace('p')
    bus = dds_bus.DdsBus(namespace=namespace, domain_id=domain, config=config)
    bus.subscribe('chunks')
    bus.advertise('acks')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]))
    child = subprocess.Popen(
        [python, '-c', _PUBLISHER, str(domain), namespace, config, str(BURST),
         str(CHUNK_BYTES)], env=env)
    try:
        deadline = time.monotonic() + WAIT_S
        got = [msg for _, msg in _collect(bus, BURST, deadline)]
        time.sleep(0.2)
        got += [msg for _, msg in bus.poll(0.0)]
        bus.publish('acks', m.TransferAck(transfer_id=9, sender=m.SERVER, receiver=0,
                                          seq=len(got), final=True))
        rc = child.wait(timeout=WAIT_S)
    finally:
        if child.poll() is None:
            child.kill()
            rc = child.wait()
        bus.close()
    return got, rc


def test_reliable_burst_between_two_processes():
    # Execute
    got, rc = burst_from_child(sys.executable)
    # Assert
    assert [c.seq for c in got] == list(range(BURST))
    assert all(c.payload == bytes([c.seq % 251]) * CHUNK_BYTES for c in got)
    assert rc == 0


def test_matched_count_asks_again_when_a_peer_matches_mid_count():
    """The binding's IndexError (a peer matched between its count and its copy) is not fatal."""
    answers = [IndexError('invalid index'), IndexError('invalid index'), [11, 12, 13]]

    def flaky():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert dds_bus._matched_count(flaky) == 3
    assert answers == []


def test_matched_count_reports_none_matched_when_discovery_never_settles():
    calls = []

    def always_racing():
        calls.append(1)
        raise IndexError('invalid index')

    assert dds_bus._matched_count(always_racing) == 0
    assert len(calls) == dds_bus._MATCH_RETRIES


@pytest.mark.parametrize('ports', [
    '<Ports><Base>9000</Base><DomainGain>100</DomainGain><ParticipantGain>4</ParticipantGain>'
    '<UnicastMetaOffset>20</UnicastMetaOffset></Ports>',
    '<ExternalDomainId>7</ExternalDomainId>'], ids=['ports', 'external_domain_id'])
def test_the_server_node_port_follows_the_users_port_mapping(ports, tmp_path):
    """
    A user's ``Discovery/Ports`` (the same file on every robot) moves the server node's port.

    The worker robot listed the server at ``7400 + 250 d + 10 + 2 * 50`` whatever the robots'
    configuration mapped ports to: with ``Base`` 9000 the server node listened at 9220 and the
    worker announced itself to 7510 only, so without multicast the two never met.
    """
    from rog_ros.nodes import robot
    domain = _domain(64)
    user = {'ROS_DOMAIN_ID': str(domain), 'CYCLONEDDS_URI': (
        f'<CycloneDDS><Domain Id="any"><Discovery>{ports}</Discovery></Domain></CycloneDDS>')}
    worker_uri = robot.robot_environment(user, '10.0.0.10')['CYCLONEDDS_URI']
    server_uri = robot.server_node_environment(user)['CYCLONEDDS_URI']
    listed = _discovery_ports(worker_uri, tmp_path / 'worker.log', domain)[0]
    own = _discovery_ports(server_uri, tmp_path / 'server.log', domain)[1]
    assert own is not None and listed == [own]


@pytest.mark.parametrize('how', ['variable', 'config'])
def test_a_taken_server_index_says_so_in_one_line(how, monkeypatch):
    """
    A server node whose fixed participant index is taken on its host fails, saying why.

    The worker robots list the server node at one port, so the server node takes a fixed
    index (50); a second one of the domain on the host (a server robot still running) cannot
    get it. Cyclone 11.0.1 said only ``DDS_RETCODE_ERROR Non specific error`` (0.10.5 logged
    ``failed to create unicast sockets``). Once the port is free the same bus opens.
    """
    import socket
    from rog_ros.nodes import robot
    from rog_ros.transport.bus import BusError
    _no_discovery_variables(monkeypatch)
    domain = _domain(72 if how == 'variable' else 73)
    monkeypatch.setenv('ROS_DOMAIN_ID', str(domain))
    uri = robot.server_node_environment(dict(os.environ, **robot.robot_environment(
        os.environ)))['CYCLONEDDS_URI']
    port = cyclone_settings.discovery_port(domain, cyclone_config.SERVER_PARTICIPANT_INDEX)
    if how == 'variable':
        monkeypatch.setenv('CYCLONEDDS_URI', uri)
    kwargs = {'config': uri} if how == 'config' else {}
    holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    holder.bind(('', port))               # the other server node's discovery port
    try:
        with pytest.raises(BusError) as caught:
            dds_bus.DdsBus(namespace=_namespace('idx'), domain_id=domain, **kwargs)
    finally:
        holder.close()
    assert str(caught.value) == (
        f'DDS participant index 50 of domain {domain} (UDP port {port}) is taken on this '
        'host: another process of the domain runs with it (a second server node? the server '
        'node takes index 50); stop it first, or run this fleet on another ROS_DOMAIN_ID')
    bus = dds_bus.DdsBus(namespace=_namespace('idx'), domain_id=domain, **kwargs)
    bus.close()
