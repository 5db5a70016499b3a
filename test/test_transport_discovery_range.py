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
ROS 2's discovery range variables reach the embedded transport as they reach rmw_cyclonedds.

``rmw_cyclonedds_cpp`` puts a Cyclone XML fragment before ``$CYCLONEDDS_URI`` for
``ROS_LOCALHOST_ONLY`` (Humble: the 127.0.0.1 interface) and for
``ROS_AUTOMATIC_DISCOVERY_RANGE`` / ``ROS_STATIC_PEERS`` (Iron and newer, read here from
Jazzy's ``check_create_domain``). The expected fragments below are transcribed from that source
text, not computed by rog_ros; the live tests give a participant exactly that text (as a
ROS 2 node on the same host would have) and ask it to match a DdsBus in a child process that
only has the variable in its environment. One binding difference is spelled out: rmw's Cyclone
0.10 finds Linux's ``lo`` without multicast and discovers by unicast under Humble's fragment,
where Cyclone 0.11+ would multicast on it; a reader on the newer binding is told so.
"""

import os
from pathlib import Path
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip('cyclonedds')
cyclone_config = pytest.importorskip('rog_ros.transport.cyclone_config')
dds_bus = pytest.importorskip('rog_ros.transport.dds_bus')
idl = pytest.importorskip('rog_ros.transport.idl')

ROOT = Path(__file__).resolve().parent.parent
WAIT_S = 10.0

# rmw_cyclonedds humble, check_create_domain: ROS_LOCALHOST_ONLY=1
HUMBLE_LOCALHOST = ('<CycloneDDS><Domain><General><Interfaces>'
                    '<NetworkInterface address="127.0.0.1"/>'
                    '</Interfaces></General></Domain></CycloneDDS>')
# ... and what the Cyclone 0.10 under rmw_cyclonedds makes of it on Linux, whose lo has no
# multicast flag ('selected interface "lo" is not multicast-capable: disabling multicast');
# Cyclone 0.11+ presumes multicast on a loopback interface unless told so
HUMBLE_LOCALHOST_UNICAST = ('<CycloneDDS><Domain><General><Interfaces>'
                            '<NetworkInterface address="127.0.0.1" multicast="false"/>'
                            '</Interfaces></General></Domain></CycloneDDS>')
# rmw_cyclonedds jazzy, check_create_domain: the pieces it concatenates
_OPEN = '<CycloneDDS><Domain>'
_NO_MULTICAST = '<General><AllowMulticast>false</AllowMulticast></General>'
_AUTO_INDEX = ('<Discovery><ParticipantIndex>auto</ParticipantIndex>'
               '<MaxAutoParticipantIndex>32</MaxAutoParticipantIndex>')
_CLOSE = '</Discovery></Domain></CycloneDDS>'
JAZZY_LOCALHOST = (_OPEN + _NO_MULTICAST + _AUTO_INDEX
                   + '<Peers><Peer address="localhost"/></Peers>' + _CLOSE)
JAZZY_SUBNET = _OPEN + _AUTO_INDEX + _CLOSE
# ... and what a participant on Cyclone 0.11+ needs to meet rmw's Cyclone 0.10 in that range
# (it drops discovery packets from an interface it does not use; 0.10 sends them to 127.0.0.1)
JAZZY_LOCALHOST_PINNED = (_OPEN + '<General><Interfaces><NetworkInterface address="127.0.0.1" '
                          'multicast="false"/></Interfaces><AllowMulticast>false</AllowMulticast>'
                          '</General>' + _AUTO_INDEX + '<Peers><Peer address="localhost"/></Peers>'
                          + _CLOSE)
JAZZY_OFF_4242 = (_OPEN + _NO_MULTICAST + '<Discovery><ParticipantIndex>none</ParticipantIndex>'
                  '<Tag>ros_discovery_off_4242</Tag>' + _CLOSE)
UNSET = ('ROS_LOCALHOST_ONLY', 'ROS_AUTOMATIC_DISCOVERY_RANGE', 'ROS_STATIC_PEERS',
         'ROS_DISTRO', 'CYCLONEDDS_URI', 'ROS_DOMAIN_ID')


def _fragment(pid=4242, resolves=None, unicast_loopback=False, **environ):
    """Return the fragment and the warnings of ``environ`` (a dict of variables)."""
    notes = []
    text = cyclone_config.discovery_fragment(environ, pid=pid, warn=notes.append,
                                             resolves=resolves,
                                             unicast_loopback=unicast_loopback)
    return text, notes


@pytest.mark.parametrize('environ, want', (
    ({}, ''),
    ({'ROS_LOCALHOST_ONLY': '0'}, ''),
    ({'ROS_LOCALHOST_ONLY': ''}, ''),
    ({'ROS_LOCALHOST_ONLY': '1'}, HUMBLE_LOCALHOST),
    ({'ROS_LOCALHOST_ONLY': '1', 'ROS_DISTRO': 'humble'}, HUMBLE_LOCALHOST),
    ({'ROS_LOCALHOST_ONLY': '0', 'ROS_DISTRO': 'humble'}, ''),
    ({'ROS_DISTRO': 'humble'}, ''),
    ({'ROS_LOCALHOST_ONLY': '1', 'ROS_DISTRO': 'jazzy'}, JAZZY_LOCALHOST),
    ({'ROS_DISTRO': 'jazzy'}, JAZZY_SUBNET),
    ({'ROS_DISTRO': 'jazzy', 'ROS_LOCALHOST_ONLY': '0'}, JAZZY_SUBNET),
    ({'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST'}, JAZZY_LOCALHOST),
    ({'ROS_AUTOMATIC_DISCOVERY_RANGE': 'SUBNET'}, JAZZY_SUBNET),
    ({'ROS_AUTOMATIC_DISCOVERY_RANGE': 'SYSTEM_DEFAULT'}, ''),
    ({'ROS_AUTOMATIC_DISCOVERY_RANGE': 'OFF'}, JAZZY_OFF_4242),
    ({'ROS_AUTOMATIC_DISCOVERY_RANGE': 'OFF', 'ROS_DISTRO': 'jazzy'}, JAZZY_OFF_4242),
    ({'ROS_STATIC_PEERS': '10.0.0.2;robot3'},
     _OPEN + _AUTO_INDEX + '<Peers><Peer address="10.0.0.2"/><Peer address="robot3"/></Peers>'
     + _CLOSE),
    ({'ROS_STATIC_PEERS': ';10.0.0.2;;robot3;', 'ROS_AUTOMATIC_DISCOVERY_RANGE': 'SUBNET'},
     _OPEN + _AUTO_INDEX + '<Peers><Peer address="10.0.0.2"/><Peer address="robot3"/></Peers>'
     + _CLOSE),
    ({'ROS_STATIC_PEERS': '10.0.0.2', 'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST'},
     _OPEN + _NO_MULTICAST + _AUTO_INDEX
     + '<Peers><Peer address="localhost"/><Peer address="10.0.0.2"/></Peers>' + _CLOSE),
    ({'ROS_STATIC_PEERS': ';', 'ROS_AUTOMATIC_DISCOVERY_RANGE': 'SUBNET'}, JAZZY_SUBNET),
), ids=lambda value: repr(value)[:60])
def test_the_fragment_is_rmw_cyclonedds_text_for_each_setting(environ, want):
    # Execute
    text, notes = _fragment(**environ)
    # Assert: the exact text rmw_cyclonedds builds, and no warning for a valid setting
    assert text == want
    assert notes == []
    if text:
        root = ET.fromstring(text)
        assert root.tag == 'CycloneDDS' and [child.tag for child in root] == ['Domain']


@pytest.mark.parametrize('environ, want, said', (
    # rcl (Jazzy): an unknown range is LOCALHOST ("assuming localhost only"); case matters
    ({'ROS_AUTOMATIC_DISCOVERY_RANGE': 'localhost'}, JAZZY_LOCALHOST,
     "ROS_AUTOMATIC_DISCOVERY_RANGE='localhost'"),
    ({'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LAN'}, JAZZY_LOCALHOST, 'LOCALHOST'),
    # rcl (Jazzy): an enabled ROS_LOCALHOST_ONLY wins and the static peers are dropped
    ({'ROS_LOCALHOST_ONLY': '1', 'ROS_AUTOMATIC_DISCOVERY_RANGE': 'SUBNET',
      'ROS_STATIC_PEERS': '10.0.0.2'}, JAZZY_LOCALHOST, 'ROS_LOCALHOST_ONLY'),
    # rmw_cyclonedds: OFF and SYSTEM_DEFAULT ignore the static peers, with a warning
    ({'ROS_AUTOMATIC_DISCOVERY_RANGE': 'OFF', 'ROS_STATIC_PEERS': '10.0.0.2'},
     JAZZY_OFF_4242, 'ROS_STATIC_PEERS'),
    ({'ROS_AUTOMATIC_DISCOVERY_RANGE': 'SYSTEM_DEFAULT', 'ROS_STATIC_PEERS': '10.0.0.2'},
     '', 'ROS_STATIC_PEERS'),
    # Humble's rmw reads only ROS_LOCALHOST_ONLY (exactly "1")
    ({'ROS_DISTRO': 'humble', 'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST'}, '', 'humble'),
    ({'ROS_LOCALHOST_ONLY': 'true'}, '', "ROS_LOCALHOST_ONLY='true'"),
    ({'ROS_LOCALHOST_ONLY': '1 ', 'ROS_DISTRO': 'humble'}, '', "ROS_LOCALHOST_ONLY='1 '"),
    # Jazzy's rcl compares only the first character
    ({'ROS_LOCALHOST_ONLY': '1 ', 'ROS_DISTRO': 'jazzy'}, JAZZY_LOCALHOST,
     "ROS_LOCALHOST_ONLY='1 '"),
    # rcl skips a peer longer than 255 characters
    ({'ROS_STATIC_PEERS': 'a' * 256 + ';10.0.0.2'},
     _OPEN + _AUTO_INDEX + '<Peers><Peer address="10.0.0.2"/></Peers>' + _CLOSE,
     'longer than 255'),
), ids=lambda value: repr(value)[:60])
def test_a_bad_or_conflicting_value_gives_rmws_choice_and_one_warning_line(environ, want, said):
    # Execute
    text, notes = _fragment(**environ)
    # Assert
    assert text == want
    assert len(notes) == 1 and '\n' not in notes[0]
    assert said in notes[0], notes


def test_a_peer_is_escaped_and_one_that_does_not_resolve_is_left_out_with_a_warning():
    # Execute
    text, notes = _fragment(ROS_STATIC_PEERS='good;bad;a"b&c', resolves=lambda p: p != 'bad')
    # Assert: Cyclone aborts the whole process on a peer it cannot resolve; rmw would too
    assert text == (_OPEN + _AUTO_INDEX + '<Peers><Peer address="good"/>'
                    '<Peer address="a&quot;b&amp;c"/></Peers>' + _CLOSE)
    assert len(notes) == 1 and "'bad'" in notes[0] and '\n' not in notes[0]


def test_a_newer_cyclone_is_told_that_loopback_has_no_multicast_and_nothing_else_changes():
    assert _fragment(ROS_LOCALHOST_ONLY='1', unicast_loopback=True) == (
        HUMBLE_LOCALHOST_UNICAST, [])
    assert _fragment(ROS_LOCALHOST_ONLY='1', ROS_DISTRO='jazzy', unicast_loopback=True) == (
        JAZZY_LOCALHOST, [])
    assert _fragment(ROS_LOCALHOST_ONLY='0', unicast_loopback=True) == ('', [])
    root = ET.fromstring(HUMBLE_LOCALHOST_UNICAST)
    assert root.find('Domain/General/Interfaces/NetworkInterface').attrib == {
        'address': '127.0.0.1', 'multicast': 'false'}


def test_a_newer_cyclone_pins_loopback_for_the_localhost_range_without_static_peers():
    """Pin 127.0.0.1 (unicast) for LOCALHOST alone: Cyclone 11 drops packets from other links."""
    pinned = JAZZY_LOCALHOST_PINNED
    for environ in ({'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST'},
                    {'ROS_LOCALHOST_ONLY': '1', 'ROS_DISTRO': 'jazzy'}):
        assert cyclone_config.discovery_fragment(environ, pid=1, pin_loopback=True) == pinned
        assert cyclone_config.discovery_fragment(environ, pid=1) == JAZZY_LOCALHOST
    # peers on other hosts must stay reachable; the other ranges are not this machine only
    peers = {'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST', 'ROS_STATIC_PEERS': '10.0.0.2'}
    assert 'Interfaces' not in cyclone_config.discovery_fragment(peers, pin_loopback=True)
    for span in ('SUBNET', 'OFF', 'SYSTEM_DEFAULT'):
        assert 'Interfaces' not in cyclone_config.discovery_fragment(
            {'ROS_AUTOMATIC_DISCOVERY_RANGE': span}, pin_loopback=True)
    # a configuration that pins loopback itself (rog fleet's) takes no second pin
    loopback = f'file://{ROOT / "config" / "cyclonedds_loopback.xml"}'
    assert cyclone_config.discovery_config(
        loopback, {'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST'}, pin_loopback=True) == loopback


def test_the_process_environment_and_pid_are_the_defaults(monkeypatch):
    # Prepare
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('ROS_AUTOMATIC_DISCOVERY_RANGE', 'OFF')
    # Execute
    text = cyclone_config.discovery_fragment()
    # Assert
    assert text == JAZZY_OFF_4242.replace('4242', str(os.getpid()))


def test_the_fragment_goes_before_the_users_uri_as_rmw_puts_it():
    # rmw: config = fragment + "," + $CYCLONEDDS_URI; Cyclone lets later sources override
    environ = {'ROS_LOCALHOST_ONLY': '1', 'CYCLONEDDS_URI': 'file:///x/a.xml'}
    assert cyclone_config.discovery_config(None, environ) == HUMBLE_LOCALHOST + ',file:///x/a.xml'
    assert cyclone_config.discovery_config('<Tracing/>', environ) == HUMBLE_LOCALHOST \
        + ',<Tracing/>'
    assert cyclone_config.discovery_config(None, {'ROS_LOCALHOST_ONLY': '1'}) == HUMBLE_LOCALHOST
    assert cyclone_config.discovery_config('file:///x/a.xml', {}) == 'file:///x/a.xml'
    assert cyclone_config.discovery_config(None, {'CYCLONEDDS_URI': 'file:///x/a.xml'}) == \
        'file:///x/a.xml'


def test_humbles_interface_pin_is_left_out_where_the_configuration_pins_loopback(tmp_path):
    # Cyclone refuses an interface selected twice ("lo: the same interface may not be selected
    # twice"), so ROS_LOCALHOST_ONLY=1 with the loopback configuration failed every bus
    loopback = f"file://{cyclone_config.config_path('loopback')}"
    wifi = f"file://{cyclone_config.config_path('wifi')}"
    inline = ('<CycloneDDS><Domain><General><Interfaces><NetworkInterface name="lo"/>'
              '</Interfaces></General></Domain></CycloneDDS>')
    commented = tmp_path / 'c.xml'
    commented.write_text('<CycloneDDS><!-- <NetworkInterface name="lo"/> --></CycloneDDS>')
    humble = {'ROS_LOCALHOST_ONLY': '1'}
    assert cyclone_config.discovery_config(loopback, humble) == loopback
    assert cyclone_config.discovery_config(inline, humble) == inline
    assert cyclone_config.discovery_config(None, dict(humble, CYCLONEDDS_URI=loopback)) == \
        loopback
    assert cyclone_config.discovery_config(wifi, humble) == HUMBLE_LOCALHOST + ',' + wifi
    assert cyclone_config.discovery_config(f'file://{commented}', humble) == \
        HUMBLE_LOCALHOST + f',file://{commented}'
    # a loopback-only configuration decides discovery for Jazzy's ranges too (OFF's tag of one
    # process kept rog fleet's own nodes from ever meeting); others take the fragment first
    for span, fragment in (('LOCALHOST', JAZZY_LOCALHOST), ('OFF', JAZZY_OFF_4242)):
        jazzy = {'ROS_AUTOMATIC_DISCOVERY_RANGE': span}
        assert cyclone_config.discovery_config(loopback, jazzy) == loopback
        assert cyclone_config.discovery_fragment(jazzy, pid=4242) == fragment
    assert cyclone_config.discovery_config(wifi, {'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST'}
                                           ) == JAZZY_LOCALHOST + ',' + wifi


_CHILD = textwrap.dedent("""
    import sys, time
    from rog_ros.protocol import messages as m
    from rog_ros.transport.dds_bus import DdsBus
    domain, namespace, config = int(sys.argv[1]), sys.argv[2], sys.argv[3] or None
    bus = DdsBus(namespace=namespace, domain_id=domain, config=config)
    bus.advertise('status/rog_worker_0/train_status')
    print('ready', flush=True)
    deadline = time.monotonic() + float(sys.argv[4])
    while time.monotonic() < deadline:
        bus.publish('status/rog_worker_0/train_status', m.TrainStatus(node=0, stamp=1.0))
        time.sleep(0.1)
    bus.close()
""")


def _child_env(**variables) -> dict:
    """Return this process's environment without ROS 2 and Cyclone settings, plus ``variables``."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env['PYTHONPATH'] = os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p])
    env.update(variables)
    return env


def _start_child(domain: int, namespace: str, env: dict, config: str = '', live_s=WAIT_S + 3):
    """Start a child process whose DdsBus publishes TrainStatus on ``domain``."""
    return subprocess.Popen(
        [sys.executable, '-c', _CHILD, str(domain), namespace, config, str(live_s)], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _stop(child) -> tuple:
    """End ``child``; return its stdout and stderr."""
    if child.poll() is None:
        child.kill()
    try:
        return child.communicate(timeout=5)
    except subprocess.TimeoutExpired:       # pragma: no cover - a stuck pipe
        return '', ''


_ROS2_READER = textwrap.dedent("""
    import sys, time
    from cyclonedds.domain import Domain, DomainParticipant
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    from rog_ros.transport import dds_bus, idl
    domain, namespace, fragment = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    keep = Domain(domain, fragment)
    participant = DomainParticipant(domain)
    topic = Topic(participant, f'rt{namespace}/status/rog_worker_0/train_status',
                  idl.dds_type('TrainStatus'))
    reader = DataReader(participant, topic, qos=Qos(
        Policy.Reliability.BestEffort, Policy.History.KeepLast(10),
        Policy.DataRepresentation(use_cdrv0_representation=True)))
    deadline = time.monotonic() + float(sys.argv[4])
    while time.monotonic() < deadline and not dds_bus._matched_peers(reader, writer=False):
        time.sleep(0.05)
    print(dds_bus._matched_peers(reader, writer=False))
""")


def matched_by_ros2_reader(fragment: str, domain: int, namespace: str,
                           python: str = sys.executable) -> int:
    """
    Count the writers on the bus's TrainStatus topic that a ROS 2 side configured so matches.

    The ROS 2 side is what rmw_cyclonedds makes of the same environment: a process whose
    domain is created with exactly ``fragment`` (and no ``$CYCLONEDDS_URI``), on ``python``'s
    Cyclone binding (test_py38_compat runs it on binding 0.10, rmw's Cyclone). On this
    process's newer binding the fragment is told what Cyclone 0.10 finds by itself: that
    Linux's ``lo`` has no multicast (Humble), and the loopback interface its peers' discovery
    arrives on (Jazzy's LOCALHOST).
    """
    if python == sys.executable and not idl.LEGACY_BINDING:
        if fragment == HUMBLE_LOCALHOST and dds_bus._unicast_loopback():
            fragment = HUMBLE_LOCALHOST_UNICAST
        if fragment == JAZZY_LOCALHOST:
            fragment = JAZZY_LOCALHOST_PINNED
    proc = subprocess.run([python, '-c', _ROS2_READER, str(domain), namespace, fragment,
                           str(WAIT_S)], capture_output=True, text=True, timeout=WAIT_S + 50,
                          env=_child_env(), cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(proc.stdout.split()[-1])


@pytest.mark.parametrize('variables, fragment, offset', (
    ({'ROS_LOCALHOST_ONLY': '1'}, HUMBLE_LOCALHOST, 0),
    ({'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST'}, JAZZY_LOCALHOST, 1),
), ids=('humble-localhost-only', 'jazzy-localhost'))
def test_a_ros2_participant_with_the_same_setting_matches_the_bus(variables, fragment, offset):
    # Prepare: domains 210..231 are this module's (the other modules' stay below 210)
    domain = 210 + (os.getpid() * 2 + offset) % 22
    namespace = f'/rog_range_{os.getpid()}_{offset}'
    child = _start_child(domain, namespace, _child_env(**variables))
    try:
        # Execute
        matched = matched_by_ros2_reader(fragment, domain, namespace)
    finally:
        out, err = _stop(child)
    # Assert
    assert matched == 1, f'no match within {WAIT_S:g} s; child said: {out}{err[-2000:]}'


def test_a_bad_value_is_one_warning_line_and_the_bus_still_opens():
    # Prepare
    domain = 210 + (os.getpid() * 2 + 2) % 22
    env = _child_env(ROS_AUTOMATIC_DISCOVERY_RANGE='EVERYWHERE')
    # Execute
    child = _start_child(domain, f'/rog_range_{os.getpid()}_bad', env, live_s=0)
    try:
        child.wait(timeout=30)
    finally:
        out, err = _stop(child)
    # Assert
    assert child.returncode == 0 and 'ready' in out, err[-2000:]
    said = [line for line in err.splitlines() if 'ROS_AUTOMATIC_DISCOVERY_RANGE' in line]
    assert len(said) == 1 and 'EVERYWHERE' in said[0], err[-2000:]
    assert 'Traceback' not in err


@pytest.mark.parametrize('variables', (
    {'ROS_LOCALHOST_ONLY': '1'}, {'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST'},
    {'ROS_AUTOMATIC_DISCOVERY_RANGE': 'OFF'}, {'ROS_DISTRO': 'jazzy'},
), ids=lambda value: '-'.join(value.values()))
def test_a_bus_on_the_loopback_configuration_opens_under_each_setting(variables):
    # Prepare
    domain = 210 + (os.getpid() * 2 + 5 + len(str(variables))) % 22
    config = str(cyclone_config.config_path('loopback'))
    # Execute
    child = _start_child(domain, f'/rog_range_{os.getpid()}_l', _child_env(**variables), config,
                         live_s=0)
    try:
        child.wait(timeout=30)
    finally:
        out, err = _stop(child)
    # Assert
    assert child.returncode == 0 and 'ready' in out, err[-2000:]


def test_a_configuration_path_beyond_ascii_opens_with_the_fragment(tmp_path):
    # The binding sends a configuration to Cyclone as ASCII only, so a checkout in a folder
    # named with an accent failed (UnicodeEncodeError); the fragment now travels with the
    # user's $CYCLONEDDS_URI, so that must not fail either
    folder = tmp_path / 'rv é'
    folder.mkdir()
    config = folder / 'cyclonedds_loopback.xml'
    config.write_text(cyclone_config.config_path('loopback').read_text())
    runs = ((_child_env(), str(config)),
            (_child_env(ROS_LOCALHOST_ONLY='1', CYCLONEDDS_URI=f'file://{config}'), ''))
    for i, (env, given) in enumerate(runs):
        domain = 210 + (os.getpid() * 2 + 3 + i) % 22
        child = _start_child(domain, f'/rog_range_{os.getpid()}_u{i}', env, given, live_s=0)
        try:
            child.wait(timeout=30)
        finally:
            out, err = _stop(child)
        assert child.returncode == 0 and 'ready' in out, err[-2000:]


_TURNS = textwrap.dedent("""
    import os, sys
    from rog_ros.transport.dds_bus import DdsBus
    domain, loopback = int(sys.argv[1]), sys.argv[2]
    def fds():
        return len(os.listdir('/proc/self/fd')), len(os.listdir('/proc/self/task'))
    DdsBus(domain_id=domain).close()          # the first one's threads stay: not counted
    before = fds()
    for _ in range(6):
        DdsBus(domain_id=domain).close()
    after = fds()
    DdsBus(domain_id=domain, config=loopback).close()
    print(before, after, flush=True)
""")


def test_buses_opened_in_turn_leak_nothing_and_a_later_configuration_opens():
    """Free a config-less domain with its last bus, fragment or not (kept for ever before)."""
    # Prepare: with ROS 2 Jazzy sourced, every bus takes the SUBNET fragment
    domain = 210 + (os.getpid() * 2 + 3) % 22
    loopback = str(ROOT / 'config' / 'cyclonedds_loopback.xml')
    env = _child_env(ROS_DISTRO='jazzy', ROS_AUTOMATIC_DISCOVERY_RANGE='EVERYWHERE')
    # Execute
    proc = subprocess.run([sys.executable, '-c', _TURNS, str(domain), loopback], env=env,
                          capture_output=True, text=True, timeout=60)
    # Assert: no descriptor or thread left per bus; the configured bus opened (no BusError)
    assert proc.returncode == 0, proc.stderr[-2000:]
    before, after = proc.stdout.strip().split(') (')
    assert before + ')' == '(' + after, proc.stdout
    said = [line for line in proc.stderr.splitlines() if 'EVERYWHERE' in line]
    assert len(said) == 1, proc.stderr[-2000:]          # once per process, not per bus


def test_a_peer_cyclone_would_abort_on_is_left_out():
    """Refuse peers whose port Cyclone rejects (it aborted the whole process, status 134)."""
    for peer in ('127.0.0.1:99999', 'localhost:0', '[::1]:0', '10.0.0.2:abc'):
        assert not cyclone_config.peer_resolves(peer), peer
    for peer in ('127.0.0.1', 'localhost:7410', '[::1]:7410', '[::1]'):
        assert cyclone_config.peer_resolves(peer), peer


def test_ros_localhost_only_is_ignored_after_jazzy():
    """Ignore ROS_LOCALHOST_ONLY where rcl no longer reads it (removed after Jazzy)."""
    environ = {'ROS_DISTRO': 'kilted', 'ROS_LOCALHOST_ONLY': '1',
               'ROS_AUTOMATIC_DISCOVERY_RANGE': 'SUBNET'}
    fragment, said = _fragment(**environ)
    assert fragment == JAZZY_SUBNET
    assert said == ['ROS_LOCALHOST_ONLY is ignored on ROS 2 kilted (removed after Jazzy); '
                    'ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST does what it did']
    assert _fragment(ROS_DISTRO='jazzy', ROS_LOCALHOST_ONLY='1')[0] == JAZZY_LOCALHOST
