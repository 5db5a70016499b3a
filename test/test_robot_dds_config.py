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
A robot's DDS configuration as Cyclone reads it, and what ``rog robot`` checks and reports.

``CYCLONEDDS_URI`` paths are not percent-decoded by Cyclone; its own reason for refusing a
configuration is quoted (not only the traceback's last lines); ``--server-host``/``--peers``
join a user's ``CYCLONEDDS_URI``; a helper node that ends is reported; ``--model-out`` and
``--interface`` are checked before any node starts.
"""

import os
from pathlib import Path
import re

import dds_domains
import pytest

from rog_ros import cli
from rog_ros.nodes import doctor_dds, launching, linkprobe, robot, supervisor
from rog_ros.nodes.plan import NodeSpec
from rog_ros.transport import cyclone_config, cyclone_log, cyclone_settings

PEER = '<Discovery><Peers><Peer address="10.0.0.10"/></Peers></Discovery>'
SERVER_PEER = '<Discovery><Peers><Peer address="10.0.0.10:7510"/></Peers></Discovery>'
CYCLONE_LINE = '1796350379.965415 [231]     python: wlan0: does not match an available interface.'
TRACEBACK = ['Traceback (most recent call last):',
             '  File "/x/rog_ros/transport/dds_bus.py", line 127, in __init__',
             '    self._participant = DomainParticipant(self.domain_id, qos=qos)',
             'cyclonedds.core.DDSException: [DDS_RETCODE_ERROR] Non specific error.']


@pytest.fixture
def spaced_config(tmp_path, monkeypatch):
    """Return a copy of the loopback file in a folder with a space and an accent; use it."""
    shipped = cyclone_config.config_path('loopback')
    path = tmp_path / 'rv space é' / 'config' / 'cyclonedds_loopback.xml'
    path.parent.mkdir(parents=True)
    path.write_text(shipped.read_text())
    monkeypatch.setattr(cyclone_config, 'config_path', lambda kind: path)
    return path


def test_cyclone_gets_the_path_as_it_is_not_percent_encoded(spaced_config):
    # Path.as_uri() wrote file:///.../rv%20space%20%C3%A9/..., which Cyclone cannot open
    assert cyclone_config.cyclone_uri('wifi') == f'file://{spaced_config}'
    assert cyclone_config.cyclone_uri('wifi', ['10.0.0.10']) == f'file://{spaced_config},{PEER}'
    assert cyclone_config.uri_problem(cyclone_config.cyclone_uri('wifi', ['10.0.0.10'])) is None


def test_uri_problem_checks_each_file_exactly_as_cyclone_opens_it(spaced_config, tmp_path):
    encoded = spaced_config.as_uri()
    assert '%20' in encoded
    assert cyclone_config.uri_problem(encoded) == (
        f'CYCLONEDDS_URI names {encoded}, which is not a file (Cyclone does not decode '
        '%-escapes: write the path as it is); fix the path or unset CYCLONEDDS_URI')
    # a bare path is a file source too (it was skipped), leading blanks are skipped by Cyclone
    assert cyclone_config.uri_problem(f' {spaced_config},<Discovery/>') is None
    assert cyclone_config.uri_problem(f'{tmp_path}/none.xml') == (
        f'CYCLONEDDS_URI names {tmp_path}/none.xml, which is not a file; fix the path or unset '
        'CYCLONEDDS_URI')
    assert 'which is a directory;' in cyclone_config.uri_problem(f'file://{tmp_path}')
    assert '(the name ends in white space)' in cyclone_config.uri_problem(
        f'file://{spaced_config} ')
    assert cyclone_config.uri_files(f'<X/>, file://{spaced_config},/a b.xml,,') == [
        str(spaced_config), '/a b.xml']


@pytest.mark.parametrize('uri, files', [
    # commas inside inline XML are the XML's (a Tracing category list), not source separators
    ('<CycloneDDS><Domain><Tracing><Category>config,discovery</Category></Tracing></Domain>'
     '</CycloneDDS>', []),
    ('<Tracing><Category>a,b</Category></Tracing>,file:///z.xml', ['/z.xml']),
    ('/x.xml,<!-- a, b --><General><Interfaces/></General>, /y.xml', ['/x.xml', '/y.xml']),
    ('<Peer address="10.0.0.1"/>,/q.xml', ['/q.xml']),
    ('<CycloneDDS><Domain>,/never/closed.xml', []),     # Cyclone says what is wrong
])
def test_inline_xml_with_commas_is_one_source(uri, files):
    assert cyclone_config.uri_files(uri) == files
    if not files:
        assert cyclone_config.uri_problem(uri) is None


def test_doctor_round_trips_with_the_uris_the_nodes_get(monkeypatch):
    pytest.importorskip('cyclonedds')
    seen = []

    def child(uri, label, fix):
        seen.append((label, uri))
        return doctor_dds.Finding(label, 'ok', '')
    monkeypatch.setattr(doctor_dds, '_round_trip_child', child)
    monkeypatch.delenv('CYCLONEDDS_URI', raising=False)
    doctor_dds.check_dds()
    wifi = robot.robot_environment({})['CYCLONEDDS_URI']
    assert seen == [('dds (rog fleet)', 'file://' + str(cyclone_config.config_path('loopback'))),
                    ('dds (rog robot)', wifi)]
    assert wifi == 'file://' + str(cyclone_config.config_path('wifi'))


@pytest.mark.parametrize('uri, said', [
    ('{tmp}', 'which is a directory'),                  # os.path.exists let it through
    ('{tmp}/none.xml', '{tmp}/none.xml, which is not a file'),     # a bare path was skipped
])
def test_doctor_refuses_a_uri_file_as_rog_robot_does(monkeypatch, tmp_path, uri, said):
    pytest.importorskip('cyclonedds')
    monkeypatch.setattr(doctor_dds, '_round_trip_child',
                        lambda uri, label, fix: doctor_dds.Finding(label, 'ok', 'round trip'))
    monkeypatch.setenv('CYCLONEDDS_URI', uri.format(tmp=tmp_path))
    found = {f.check: f for f in doctor_dds.check_dds()}['dds (CYCLONEDDS_URI)']
    assert found.level == 'fail' and said.format(tmp=tmp_path) in found.detail, found


def test_doctor_quotes_cyclones_own_reason(tmp_path, spaced_config):
    pytest.importorskip('cyclonedds')
    bad = doctor_dds._round_trip_child(
        '<Domain><General><Interfaces><NetworkInterface name="rogtest9"/></Interfaces>'
        '</General></Domain>', 'dds (CYCLONEDDS_URI)', 'fix')
    assert bad.level == 'fail'
    assert bad.detail == ('DDS round trip ended with status 1: Cyclone DDS said: rogtest9: does '
                          'not match an available interface.')
    encoded = doctor_dds._round_trip_child(spaced_config.as_uri(), 'dds', 'fix')
    assert encoded.detail == ("DDS round trip ended with status 1: Cyclone DDS said: can't "
                              f'open configuration file {spaced_config.as_uri()}')
    # the same file, given as the nodes now get it, works
    good = doctor_dds._round_trip_child(f'file://{spaced_config}', 'dds', 'fix')
    assert good.level == 'ok', good.detail


def test_cyclone_said_finds_the_lines_before_the_traceback():
    log = ['[INFO] [1.0] [rog_worker_0]: starting', CYCLONE_LINE] + TRACEBACK
    assert cyclone_log.cyclone_said('\n'.join(log)) == [
        'wlan0: does not match an available interface.']
    assert cyclone_log.cyclone_said('\n'.join(log), whole=True) == [CYCLONE_LINE]
    chained = log + ['', 'During handling of the above exception, another exception occurred:',
                     ''] + TRACEBACK
    assert cyclone_log.cyclone_said('\n'.join(chained)) == [
        'wlan0: does not match an available interface.']
    aborted = '1.5 [0] python: no.such.host.invalid: unknown address\n'
    assert cyclone_log.cyclone_said(aborted) == ['no.such.host.invalid: unknown address']
    # a Cyclone line far above an unrelated traceback is not its reason
    assert cyclone_log.cyclone_said('\n'.join([CYCLONE_LINE] + ['x'] * 20 + TRACEBACK)) == []


def test_a_node_log_tail_quotes_cyclones_reason_cut_off_above_it(tmp_path):
    log = (['[INFO] [1.0] [rog_worker_0]: starting', CYCLONE_LINE] + TRACEBACK[:1]
           + [f'  frame {i}' for i in range(20)] + TRACEBACK[1:])
    (tmp_path / 'rog_worker_0.log').write_text('\n'.join(log) + '\n')
    sup = supervisor.Supervisor([], str(tmp_path), lambda spec: {})
    tail = sup.tail('rog_worker_0', lines=5).splitlines()
    assert tail == [CYCLONE_LINE, '...'] + log[-5:]
    assert sup.tail('rog_worker_0', lines=40).splitlines() == log      # shown once only


def test_peers_join_the_users_cyclone_configuration():
    user = {'RMW_IMPLEMENTATION': 'rmw_cyclonedds_cpp', 'CYCLONEDDS_URI': 'file:///etc/my.xml'}
    assert robot.robot_environment(user, '10.0.0.10') == {
        'CYCLONEDDS_URI': f'file:///etc/my.xml,{SERVER_PEER}'}
    assert robot.robot_environment(user) == {}
    assert launching.launch_environment({'server_host': '', 'peers': '10.0.0.10'}, user) == {
        'CYCLONEDDS_URI': f'file:///etc/my.xml,{PEER}'}
    with pytest.raises(ValueError, match='does not resolve'):
        robot.robot_environment(user, 'no-such-host.invalid')


def test_a_peer_naming_the_server_host_is_listed_once_at_the_server_node_s_port():
    user = {'RMW_IMPLEMENTATION': 'rmw_cyclonedds_cpp', 'CYCLONEDDS_URI': 'file:///etc/my.xml',
            'ROS_DOMAIN_ID': '0'}

    def peers(server_host, given):
        uri = robot.robot_environment(user, server_host, given)['CYCLONEDDS_URI']
        return re.findall(r'<Peer address="([^"]+)"/>', uri)

    # every robot on every robot: the server's host once, at the server node's port
    assert peers('10.0.0.10', ['10.0.0.10', '10.0.0.11']) == ['10.0.0.11', '10.0.0.10:7510']
    assert peers('10.0.0.10:7410', ['10.0.0.10']) == ['10.0.0.10:7410']   # its port as given
    assert peers('::1', ['[::1]', '::1', '127.0.0.1']) == ['127.0.0.1', '[::1]:7510']
    # a port the user gave for the server's host (another participant there) is kept
    assert peers('10.0.0.10', ['10.0.0.10:7412']) == ['10.0.0.10:7412', '10.0.0.10:7510']
    # without server_host nothing says which host is the server: every port, as before
    assert peers('', ['10.0.0.10', '10.0.0.11']) == ['10.0.0.10', '10.0.0.11']


class Helpers:
    """A supervisor whose training node runs ``polls`` polls; netmon_0 ends at the first."""

    def __init__(self, tmp_path, polls=3):
        self.polls, self.log_dir = polls, str(tmp_path)
        (tmp_path / 'netmon_0.log').write_text(
            "[ERROR] [1.0] [netmon_0]: interface 'wlan9' not found; have ['eth0', 'lo']\n")

    def codes(self):
        self.polls -= 1
        return {'rog_worker_0': None if self.polls > 0 else 0, 'netmon_0': 1}

    def log_path(self, name):
        return os.path.join(self.log_dir, f'{name}.log')

    def tail(self, name):
        return Path(self.log_path(name)).read_text()


def test_rog_robot_reports_a_helper_node_that_ends_and_trains_on(tmp_path, capsys):
    assert robot.watch(Helpers(tmp_path), 'rog_worker_0', sleep=lambda s: None) == 0
    assert capsys.readouterr().err == (
        f'rog robot: netmon_0 exited with status 1; the training goes on without it; last '
        f'lines of its log ({tmp_path}/netmon_0.log):\n'
        "[ERROR] [1.0] [netmon_0]: interface 'wlan9' not found; have ['eth0', 'lo']\n\n")


@pytest.fixture
def no_nodes(monkeypatch, tmp_path):
    """Run ``rog robot`` in ``tmp_path`` with a supervisor that records its starts."""
    started = []

    class Started:
        """Every node exits 0 at once."""

        def __init__(self, specs, logs, env):
            self.names = [s.name for s in specs]

        def start(self, resuming=None):
            started.append(self.names)

        def codes(self):
            return {name: 0 for name in self.names}

        def stop(self):
            pass
    monkeypatch.setattr(supervisor, 'Supervisor', Started)
    monkeypatch.setattr(linkprobe, 'read_counters', lambda: {'eth0': (0, 0), 'lo': (0, 0)})
    monkeypatch.chdir(tmp_path)
    return started


WORKER = ['robot', '--role', 'worker', '--rank', '0', '--workers', '2']


def test_rog_robot_refuses_an_interface_this_machine_lacks(no_nodes, capsys):
    assert cli.main(WORKER + ['--interface', 'wlan9']) == 2
    assert capsys.readouterr().err == (
        "rog robot: interface (--interface) 'wlan9': this machine has no such network "
        'interface (it has eth0, lo); give one of them, or auto\n')
    assert no_nodes == [] and os.listdir('.') == []
    assert cli.main(WORKER + ['--interface', 'eth0']) == 0
    assert no_nodes == [['rog_worker_0', 'netmon_0']]


def test_rog_robot_refuses_a_model_out_it_cannot_write_before_starting(no_nodes, capsys,
                                                                       tmp_path):
    (tmp_path / 'notes.txt').write_text('x')
    assert cli.main(WORKER + ['--model-out', 'notes.txt/m.pt']) == 2
    assert capsys.readouterr().err == (
        f'rog robot: --model-out notes.txt/m.pt: {tmp_path}/notes.txt is a file, not a '
        'folder\n')
    assert no_nodes == [] and os.listdir('.') == ['notes.txt']


def test_rog_robot_checks_the_model_out_of_its_default(no_nodes, capsys, monkeypatch):
    monkeypatch.setattr(robot, 'ROBOT_MODEL', os.path.join('notes.txt', 'm.pt'))
    Path('notes.txt').write_text('x')
    assert cli.main(WORKER) == 2
    assert "rog robot: the robot's model (--model-out) notes.txt/m.pt: " in \
        capsys.readouterr().err


def test_a_stopped_rog_robot_names_the_warnings_in_its_logs(monkeypatch, tmp_path, capsys):
    """Name the server's bad_tag warnings when it is stopped, as a finished run does."""
    # a server that drops its robots' every message waits for them until it is stopped,
    # and its console said only 'terminated'
    logs = tmp_path / 'logs'

    class Waiting:
        """A server that logged its drops and waits until it is stopped."""

        def __init__(self, specs, log_dir, env):
            self.log_dir = log_dir

        def start(self, resuming=None):
            os.makedirs(self.log_dir, exist_ok=True)
            Path(self.log_dir, 'rog_server.log').write_text(
                '[INFO] [1.0] [rog_server]: active\n'
                '[WARNING] [2.0] [rog_ros.auth]: dropped RowChunk on /rog/up/chunks claiming '
                'sender 0: bad_tag (2 bad_tag so far)\n')

        def stop(self):
            pass

    def stopped(*args):
        """Stop the robot as SIGTERM does."""
        stop = KeyboardInterrupt()
        stop.exit_status = 143
        raise stop
    monkeypatch.setattr(supervisor, 'Supervisor', Waiting)
    monkeypatch.setattr(robot, 'watch', stopped)
    monkeypatch.chdir(tmp_path)
    assert cli.main(['robot', '--role', 'server', '--workers', '2', '--netmon', 'false',
                     '--logs', str(logs)]) == 143
    err = capsys.readouterr().err.splitlines()
    assert err[-2].startswith('rog robot: terminated (SIGTERM); stopped rog_server'), err
    assert err[-1] == (
        "rog robot: warnings in the robots' logs: rog_server 1 (first: dropped RowChunk on "
        '/rog/up/chunks claiming sender 0: bad_tag (2 bad_tag so far)); logs in '
        f'{logs}'), err


def test_check_interface_skips_auto_and_robots_without_netmon():
    worker = NodeSpec('rog_worker_0', 'rog_worker', {}, 'worker', 0)
    robot._check_interface([worker])
    robot._check_interface([worker, NodeSpec('netmon_0', 'netmon', {'interface': 'auto'},
                                             'netmon', 0)])


def test_the_server_is_listed_at_its_node_port_in_the_robots_domain():
    """
    ``server_host`` gets the server node's discovery port of ``$ROS_DOMAIN_ID``'s domain.

    Without one Cyclone announced to 32 ports of the host (0.10; 33 on 11). An address that
    names a port is kept; an IPv6 literal gets brackets, as Cyclone reads ``[v6]:port``.
    """
    peer = cyclone_settings.server_peer
    assert cyclone_settings.discovery_port(3, cyclone_config.SERVER_PARTICIPANT_INDEX) == 8260
    assert [peer(h, 3) for h in ('10.0.0.10', ' srv.local ', 'fe80::1', '[fe80::1]')] == [
        '10.0.0.10:8260', 'srv.local:8260', '[fe80::1]:8260', '[fe80::1]:8260']
    assert [peer(h, 3) for h in ('10.0.0.10:7410', '[fe80::1]:7410')] == [
        '10.0.0.10:7410', '[fe80::1]:7410']
    user = {'CYCLONEDDS_URI': 'file:///etc/my.xml', 'ROS_DOMAIN_ID': '3'}
    assert robot.robot_environment(user, '10.0.0.10')['CYCLONEDDS_URI'].endswith(
        '<Peer address="10.0.0.10:8260"/></Peers></Discovery>')
    assert robot.server_node_environment(user) == {'CYCLONEDDS_URI': (
        'file:///etc/my.xml,<Discovery><ParticipantIndex>50</ParticipantIndex></Discovery>')}


def _ipv6_works() -> bool:
    import socket
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock:
            sock.bind(('::1', 0))
    except OSError:
        return False
    return True


def _index_uri(general: str) -> str:
    return ('<CycloneDDS><Domain Id="any"><General>%s</General><Discovery><ParticipantIndex>'
            '50</ParticipantIndex></Discovery></Domain></CycloneDDS>' % general)


@pytest.mark.skipif(not _ipv6_works(), reason='no IPv6 on this host')
@pytest.mark.parametrize('general', ['<Transport>udp6</Transport>', '<Transport>UDP6</Transport>',
                                     '<UseIPv6>true</UseIPv6>'])
def test_an_ipv6_server_index_port_held_by_an_ipv6_socket_is_taken(general):
    """
    With Cyclone on IPv6 (``Transport`` ``udp6``), the port check binds IPv6, as Cyclone does.

    It bound IPv4 only: a port an IPv6-only socket held (another server node on ``udp6``)
    was free to it, and Cyclone's own IPv6 bind then failed (``DDS_RETCODE_ERROR``).
    """
    import socket
    domain = dds_domains.domain(f'{__name__}:11-57')
    uri = _index_uri(general)
    port = cyclone_settings.discovery_port(domain, cyclone_config.SERVER_PARTICIPANT_INDEX)
    holder = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    holder.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    holder.bind(('::', port))                    # another server node, on IPv6
    try:
        assert cyclone_settings.index_port_taken(uri, domain) == (50, domain, port)
        # an IPv4 configuration binds IPv4, which an IPv6-only socket leaves free (as Cyclone)
        assert cyclone_settings.index_port_taken(_index_uri(''), domain) is None
        assert cyclone_settings.index_port_taken(
            _index_uri('<Transport>udp</Transport>'), domain) is None
    finally:
        holder.close()
    assert cyclone_settings.index_port_taken(uri, domain) is None


@pytest.mark.skipif(not _ipv6_works(), reason='no IPv6 on this host')
def test_an_ipv6_server_index_port_held_by_an_ipv4_socket_is_taken_on_a_dual_stack_host():
    """Cyclone's IPv6 socket is dual-stack (it sets no ``IPV6_V6ONLY``): IPv4 holders count."""
    import socket
    if Path('/proc/sys/net/ipv6/bindv6only').read_text().strip() != '0':
        pytest.skip('IPv6 sockets are IPv6-only on this host')
    domain = dds_domains.domain(f'{__name__}:13-31')
    port = cyclone_settings.discovery_port(domain, cyclone_config.SERVER_PARTICIPANT_INDEX)
    holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    holder.bind(('', port))
    try:
        assert cyclone_settings.index_port_taken(
            _index_uri('<Transport>udp6</Transport>'), domain) == (50, domain, port)
        # transports without a UDP discovery port: no answer (Cyclone says what it finds)
        assert cyclone_settings.index_port_taken(
            _index_uri('<Transport>tcp</Transport>'), domain) is None
    finally:
        holder.close()


def test_an_ipv6_server_on_a_host_without_ipv6_is_no_answer_not_a_crash(monkeypatch):
    """A host with IPv6 off refuses the socket itself (EAFNOSUPPORT): no answer, no crash."""
    import errno
    import socket
    real = socket.socket

    def no_ipv6(family=socket.AF_INET, *args, **kwargs):
        if family == socket.AF_INET6:
            raise OSError(errno.EAFNOSUPPORT, 'Address family not supported by protocol')
        return real(family, *args, **kwargs)

    monkeypatch.setattr(socket, 'socket', no_ipv6)
    uri = _index_uri('<Transport>udp6</Transport>')
    assert cyclone_settings.index_port_taken(uri, 0) is None
    assert cyclone_settings.taken_index(uri, 0) is None
    # the server node keeps its fixed index (Cyclone says what it finds), warned of nothing
    warned = []
    env = robot.server_node_environment({'CYCLONEDDS_URI': uri, 'ROS_DOMAIN_ID': '0'},
                                        warn=warned.append)
    assert 'ParticipantIndex' in env['CYCLONEDDS_URI'] and warned == []


def test_a_server_node_whose_index_is_taken_keeps_a_free_one_and_says_so():
    """
    Another server node of the domain on the host: this one starts on a free index, warned.

    Two fleets on one domain under two namespaces may share a host (architecture.md); the
    second server robot's node was refused by Cyclone (the index's port bound), so it never
    started (11.0.1 said only ``DDS_RETCODE_ERROR``). Now it keeps the first free index, as
    every server node did before the fixed one, and the warning says what that costs.
    """
    import socket
    domain = dds_domains.domain(f'{__name__}:7-91')
    env = {'CYCLONEDDS_URI': 'file:///etc/my.xml', 'ROS_DOMAIN_ID': str(domain)}
    port = cyclone_settings.discovery_port(domain, cyclone_config.SERVER_PARTICIPANT_INDEX)
    said = []
    holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    holder.bind(('', port))                       # the first fleet's server node
    try:
        assert robot.server_node_environment(env, said.append) == {}
    finally:
        holder.close()
    assert len(said) == 1 and said[0].startswith(
        f'DDS participant index 50 of domain {domain} (UDP port {port}) is taken on this host')
    assert 'reach it by multicast only' in said[0]
    assert robot.server_node_environment(env, said.append) == {'CYCLONEDDS_URI': (
        'file:///etc/my.xml,<Discovery><ParticipantIndex>50</ParticipantIndex></Discovery>')}
    assert len(said) == 1


@pytest.mark.parametrize('host', ['10.0.0.10:', 'srv:abc'])
def test_a_server_host_that_is_no_address_is_refused_as_written(host):
    """
    A ``--server-host`` with a colon that is no IPv6 literal is refused naming what was given.

    It was bracketed as if IPv6 and given the server node's port first, so the error named
    ``'[10.0.0.10:]:7510'``, an address the user never wrote.
    """
    with pytest.raises(ValueError, match=re.escape(f"DDS peer '{host}' does not resolve")):
        robot.robot_environment({}, host)
    assert cyclone_settings.server_peer('fe80::1%eth0', 0) == '[fe80::1%eth0]:7510'


def test_rog_robot_gives_the_index_to_its_server_node_only_and_warns_a_server_only(
        monkeypatch, tmp_path, capsys):
    """
    Only a server robot probes the server node's index; its netmon keeps a free one.

    Every ``rog robot`` probed it, so a worker robot on the server robot's host (one machine
    for a trial, one domain) warned that "the server node takes the first free index".
    """
    import socket
    envs = {}

    class Started:
        """Record each node's ``CYCLONEDDS_URI``; every node exits 0 at once."""

        def __init__(self, specs, logs, env_for):
            self.names = [s.name for s in specs]
            envs.update({s.name: env_for(s).get('CYCLONEDDS_URI', '') for s in specs})

        def start(self, resuming=None):
            pass

        def codes(self):
            return {name: 0 for name in self.names}

        def stop(self, *args, **kwargs):
            return []
    monkeypatch.setattr(supervisor, 'Supervisor', Started)
    monkeypatch.setattr(linkprobe, 'read_counters', lambda: {'eth0': (0, 0), 'lo': (0, 0)})
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv('CYCLONEDDS_URI', raising=False)
    domain = dds_domains.domain(f'{__name__}:7-95')
    monkeypatch.setenv('ROS_DOMAIN_ID', str(domain))
    index = '<Discovery><ParticipantIndex>50</ParticipantIndex></Discovery>'
    server = ['robot', '--role', 'server', '--workers', '2', '--logs', 'slogs']
    assert cli.main(server) == 0
    assert envs['rog_server'].endswith(',' + index) and index not in envs['netmon']
    capsys.readouterr()
    holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    holder.bind(('', cyclone_settings.discovery_port(domain, 50)))   # the server robot's node
    try:
        assert cli.main(WORKER + ['--server-host', '127.0.0.1', '--logs', 'wlogs']) == 0
        assert 'participant index' not in capsys.readouterr().err
        assert cli.main(server + ['--out', 'second']) == 0
        assert 'DDS participant index 50 of domain' in capsys.readouterr().err
        assert index not in envs['rog_server']
    finally:
        holder.close()
