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
Two nodes of one fully qualified name on one DDS domain: each says so once, while it runs.

Two robot fleets started on one domain and one namespace have nodes of one name: ROS 2 tools
mix them up and their traffic mixes, and only ``rog doctor`` said so. An embedded bus reads
the ``ros_discovery_info`` entries (what the doctor's ros graph check reads) for as long as it
runs, from its once-a-second peer check, and warns in one line.
"""

import logging
import os
import time

import dds_domains
import pytest

pytest.importorskip('cyclonedds')
dds_bus = pytest.importorskip('rog_ros.transport.dds_bus')
discovery_info = pytest.importorskip('rog_ros.transport.discovery_info')
raw_take = pytest.importorskip('rog_ros.transport.raw_take')
cyclone_config = pytest.importorskip('rog_ros.transport.cyclone_config')

WAIT_S = 10.0


def _domain() -> int:
    """Return this module's DDS domain (:func:`dds_domains.domain`)."""
    return dds_domains.domain(__name__)


def _bus(namespace: str, name: str):
    """Open a DdsBus named ``name`` in ``namespace`` on the loopback configuration."""
    return dds_bus.DdsBus(namespace=namespace, domain_id=_domain(),
                          config=str(cyclone_config.config_path('loopback')), node_name=name)


def _said(caplog) -> list:
    """Return the warnings of the embedded transport that name another node of one name."""
    return [r.getMessage() for r in caplog.records
            if r.name == 'rog_ros.dds' and 'already announces a node named' in r.getMessage()]


def _poll(buses, seconds: float, until=lambda: False) -> None:
    """Poll ``buses`` for ``seconds``, or until ``until()``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and not until():
        for bus in buses:
            bus.poll(0.05)


def test_a_second_node_of_one_name_on_one_domain_is_said_once_in_one_line(caplog):
    """Warn once, naming the node, the domain and what to set, without ROS 2."""
    # Arrange: a node of a fleet, then the same node of a second fleet of that namespace
    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    namespace = f'/twins_{os.getpid()}'
    first = _bus(namespace, 'rog_worker_0')
    started = time.monotonic()
    second = _bus(namespace, 'rog_worker_0')
    took = time.monotonic() - started
    try:
        # Execute
        _poll([first, second], WAIT_S, until=lambda: getattr(second, '_namesakes', None) is None)
        _poll([first, second], 2.5)       # (more checks: nothing said again)
    finally:
        second.close()
        first.close()
    # Assert
    said = _said(caplog)
    assert 1 <= len(said) <= 2, said  # (the first node may see the second one in its look)
    line = said[-1]
    assert '\n' not in line
    assert (f'another participant on DDS domain {_domain()} already announces a node named '
            f'{namespace}/rog_worker_0') in line
    assert 'namespace:=, --namespace' in line and 'ROS_DOMAIN_ID' in line
    assert took < 1.0                 # (nothing waits for the look at start)


def test_nodes_of_other_names_are_not_said_and_the_look_ends(caplog, monkeypatch):
    """Say nothing for another name or namespace; delete the reader after the look."""
    # Arrange
    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    monkeypatch.setattr(discovery_info, 'LOOK_S', 1.5)
    namespace = f'/others_{os.getpid()}'
    buses = [_bus(namespace, 'rog_worker_0'), _bus(namespace, 'rog_worker_1'),
             _bus(namespace + '_b', 'rog_worker_0')]
    try:
        # Execute
        _poll(buses, WAIT_S, until=lambda: all(b._namesakes is None for b in buses))
        looking = [b._namesakes is not None for b in buses]
    finally:
        for bus in buses:
            bus.close()
    # Assert
    assert _said(caplog) == []
    assert looking == [False, False, False]


def _failing_take():
    """Fail as a take of a sample the binding cannot read."""
    raise ValueError('cannot deserialize')


def _return_code_take() -> int:
    """Answer a DDS return code (DDS_RETCODE_ERROR), as ddspy_take does, not samples."""
    return -1


@pytest.mark.parametrize('take', [_failing_take, _return_code_take])
def test_a_look_that_fails_ends_the_look_not_the_node(take):
    """End the look on a take that raises or answers a return code; poll goes on."""
    # Arrange
    bus = _bus(f'/failing_{os.getpid()}', 'rog_worker_0')
    bus._namesakes._take = take
    try:
        # Execute
        got = bus.poll(0.0)
        looking = bus._namesakes is not None
    finally:
        bus.close()
    # Assert
    assert got == [] and not looking


ONE_NODE = ('import sys, time\n'
            'from rog_ros.transport import cyclone_config, dds_bus\n'
            'bus = dds_bus.DdsBus(namespace=sys.argv[1], domain_id=int(sys.argv[2]), '
            "config=str(cyclone_config.config_path('loopback')), node_name='rog_worker_0')\n"
            "print('up', flush=True)\n"
            'time.sleep(120)\n')


def test_a_node_started_again_after_a_crash_says_nothing_of_its_dead_self(caplog):
    """Say nothing of the killed node's entry: its participant lingers, its entry comes not."""
    # Arrange: the node, killed (no clean-up: its participant lingers until its lease ends)
    import signal
    import subprocess
    import sys
    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    namespace = f'/respawned_{os.getpid()}'
    dead = subprocess.Popen([sys.executable, '-c', ONE_NODE, namespace, str(_domain())],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert dead.stdout.readline().strip() == 'up'
        time.sleep(1.0)                  # (its entry out on the domain)
    finally:
        dead.send_signal(signal.SIGKILL)
        dead.wait(10)
        dead.stdout.close()
    # Execute: started again at once, with the same name
    again = _bus(namespace, 'rog_worker_0')
    try:
        _poll([again], WAIT_S, until=lambda: again._namesakes is None)
    finally:
        again.close()
    # Assert
    assert _said(caplog) == []


def test_the_node_already_running_warns_of_a_namesake_started_long_after_it(caplog):
    """Warn in the earlier node too: it looks for its whole life, not its first seconds."""
    # Arrange: a node running for longer than the look used to last (5 s)
    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    namespace = f'/later_{os.getpid()}'
    first = _bus(namespace, 'rog_worker_0')
    second = None
    try:
        _poll([first], 6.0)
        # Execute: the same node of a second fleet, started now
        second = _bus(namespace, 'rog_worker_0')
        _poll([first, second], WAIT_S, until=lambda: first._namesakes is None)
        first_said = first._namesakes is None and bool(_said(caplog))
    finally:
        if second is not None:
            second.close()
        first.close()
    # Assert
    assert first_said


def test_a_namesake_in_the_other_gid_layout_is_warned_of(caplog, monkeypatch):
    """Read a 24-byte-GID entry (rmw_cyclonedds up to Humble, matched by name) as well."""
    from types import SimpleNamespace
    from test_doctor_graph import _sample
    # Arrange: a Humble node of this name whose entry DDS hands to this 16-byte bus
    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    monkeypatch.setenv('ROS_DISTRO', 'jazzy')
    namespace = f'/humble_{os.getpid()}'
    bus = _bus(namespace, 'rog_worker_0')
    real, handed = raw_take.take_serialised, []

    def take(ref, *rest):
        """Hand the Humble entry over once, with what the namesakes reader really got."""
        got = list(real(ref, *rest))
        if bus._namesakes is not None and ref is bus._namesakes._reader._ref and not handed:
            handed.append(True)
            got.append((_sample(24, [(namespace, 'rog_worker_0')]),
                        SimpleNamespace(valid_data=True)))
        return got
    monkeypatch.setattr(raw_take, 'take_serialised', take)
    try:
        # Execute
        _poll([bus], 3.0, until=lambda: bus._namesakes is None)
    finally:
        bus.close()
    # Assert
    said = _said(caplog)
    assert len(said) == 1 and f'a node named {namespace}/rog_worker_0' in said[0]


def _xcdr2_writer(participant, namespace: str, name: str):
    """
    Return a ``ros_discovery_info`` writer offering XCDR2 only, its entry naming one node.

    As an XTypes rmw would write it: rmw_cyclonedds and rmw_fastrtps of Humble offer XCDR1.
    """
    from cyclonedds.pub import DataWriter
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.topic import Topic
    info, node, gid, type_hash = discovery_info.message_types(16)
    qos = Qos(*[p for p in discovery_info.writer_qos(type_hash)
                if not isinstance(p, Policy.DataRepresentation)],
              Policy.DataRepresentation(use_xcdrv2_representation=True))
    topic = Topic(participant, discovery_info.TOPIC, info)
    writer = DataWriter(participant, topic, qos=qos)
    g = gid(data=list(participant.guid.bytes))
    writer.write(info(gid=g, node_entities_info_seq=[node(
        node_namespace=namespace, node_name=name, reader_gid_seq=[], writer_gid_seq=[g])]))
    return writer, topic


def test_an_entry_written_in_xcdr2_is_read_and_the_bus_still_writes_xcdr1(caplog):
    """Warn of a namesake whose writer offers XCDR2 only; the bus's own entry stays XCDR1."""
    # The readers offered XCDR1 alone: DDS matched no writer offering XCDR2 only, so its
    # node went unseen (by this look and rog doctor) though parse_entry reads XCDR2
    from cyclonedds.domain import DomainParticipant
    from rog_ros.transport.graph_entry import parse_entry
    # Arrange: a node of this name, then an XCDR2-only writer announcing it too
    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    namespace = f'/xcdr2_{os.getpid()}'
    bus = _bus(namespace, 'rog_worker_0')
    participant = DomainParticipant(_domain())
    theirs, ours = participant.guid.bytes, bus._graph.gid[:16]
    entities = list(_xcdr2_writer(participant, namespace, 'rog_worker_0'))
    entities.insert(0, discovery_info.open_reader(participant, 16))
    encodings = {}
    try:
        # Execute
        _poll([bus], WAIT_S, until=lambda: bus._namesakes is None)
        end = time.monotonic() + WAIT_S
        while time.monotonic() < end and len(encodings) < 2:
            for data, info in raw_take.take_serialised(entities[0]._ref):
                parsed = parse_entry(bytes(data)) if info.valid_data else None
                if parsed is not None:
                    encodings[parsed[1]] = bytes(data[:2])
            time.sleep(0.05)
    finally:
        bus.close()
        for entity in entities + [participant]:
            entity.__del__()
    # Assert
    said = _said(caplog)
    assert len(said) == 1 and f'a node named {namespace}/rog_worker_0' in said[0], said
    assert encodings == {theirs: b'\0\7', ours: b'\0\1'}        # (XCDR2 LE, XCDR1 LE)
