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
The server counts its workers by their uplink writers, not by readers on their downlinks.

Any reader matches the server's writer on ``w0/chunks``: a ``ros2 topic echo`` or ``ros2 bag
record`` of a worker's downlink, started before the fleet, made the server start without that
worker, and one still running at the end held the server for the whole leave bound. Only
workers write to the uplink, one writer per process and topic, so those are counted.

The DDS tests run the server node on a real DdsBus over the loopback configuration, in a
domain of their own (``dds_domains``) and a namespace of their own; the workers and the tool are
buses with a worker's endpoints and a reader's. Deadlines bound waits for discovery; the
asserted outcomes are logical (raised, returned), with one generous bound on the end wait.
"""

import os
import time
from types import SimpleNamespace

import dds_domains
import pytest

from rog_ros.nodes import rog_server, server_node
from rog_ros.nodes.connect import PeerTimeout, wait_matched
from rog_ros.nodes.lifecycle import ACTIVE
from rog_ros.nodes.routing import server_inbox, server_outbox, worker_inbox, worker_outbox
from test_nodes_lifecycle import in_memory_fleet, server_and_workers

WAIT_S = 20.0


def _bus_opener(monkeypatch, tag: str):
    """
    Make the server node open a DdsBus in a private loopback domain; return an opener for more.

    Private: the domain is this process's for ``tag`` (``dds_domains``: held, no other test
    process draws it) and the namespace comes from the process id and ``tag``, so other test
    runs on the machine never add endpoints to the counts under test.
    """
    pytest.importorskip('cyclonedds')
    dds_bus = pytest.importorskip('rog_ros.transport.dds_bus')
    cyclone_config = pytest.importorskip('rog_ros.transport.cyclone_config')
    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE'):
        monkeypatch.delenv(var, raising=False)
    config = str(cyclone_config.config_path('loopback'))
    domain = dds_domains.domain(f'{__name__}:{tag}')
    namespace = f'/rog_test_{os.getpid()}_{tag}'

    def open_dds(*_args, **_kw):
        return dds_bus.DdsBus(namespace=namespace, domain_id=domain, config=config)

    monkeypatch.setattr(server_node, 'open_bus', open_dds)
    return namespace, open_dds


def _server(out, namespace: str, workers: int):
    """Return a configured toy server of ``workers`` (evaluating in this thread: no timing)."""
    args = rog_server.build_parser().parse_args([
        '--workload', 'toy', '--workers', str(workers), '--namespace', namespace,
        '--iterations', '10', '--out', str(out), '--startup-timeout', str(WAIT_S)])
    srv = server_node.ServerNode(args, background_eval=False)
    srv.configure()
    return srv


def _worker_endpoints(bus, rank: int):
    """Give ``bus`` worker ``rank``'s endpoints, as WorkerNode.configure creates them."""
    for topic in worker_inbox(rank):
        bus.subscribe(topic)
    for topic in worker_outbox():
        bus.advertise(topic)
    return bus


def _until(condition, what: str) -> None:
    """Wait for discovery to reach ``condition``: a bound on a wait, never on the outcome."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f'discovery never reached: {what}'
        time.sleep(0.02)


def test_a_reader_on_an_absent_workers_downlink_does_not_start_the_server(tmp_path,
                                                                          monkeypatch):
    """Wait for worker 0's uplink writers: a tool's readers on its downlink prove nothing."""
    # Prepare: a fleet of 2; worker 1 runs, worker 0 does not, but a tool reads its downlink
    # (`ros2 bag record -e '/rog/w0/.*'`): every server topic has a match
    namespace, open_dds = _bus_opener(monkeypatch, 'start')
    srv = _server(tmp_path, namespace, workers=2)
    peers = []
    try:
        peers.append(_worker_endpoints(open_dds(), 1))
        tool = open_dds()
        peers.append(tool)
        for topic in worker_inbox(0):
            tool.subscribe(topic)
        _until(lambda: all(srv.bus.matched(t) for t in server_outbox(2) + server_inbox()),
               'a match on every server topic (what the start-up wait asked before)')
        srv.args.startup_timeout = 1.0
        # Execute / Assert: the server does not take the tool for worker 0
        with pytest.raises(PeerTimeout, match=r'too few peers on up/chunks \(1 of 2\), '
                                              r'up/acks \(1 of 2\) after 1 s'):
            srv.activate()
        assert srv.life.state != ACTIVE
        # Execute / Assert: once worker 0 is there, the server starts
        peers.append(_worker_endpoints(open_dds(), 0))
        srv.args.startup_timeout = WAIT_S
        assert srv.activate() and srv.life.state == ACTIVE
        assert srv.bus.matched('up/chunks') == 2     # one writer per worker process
    finally:
        for bus in peers:
            bus.close()
        srv.shutdown()


def test_a_reader_left_on_a_downlink_does_not_hold_the_servers_end(tmp_path, monkeypatch):
    """End the leave wait when the workers' uplink writers are gone, whoever still reads."""
    # Prepare: a fleet of 1 started; a tool reads w0/chunks (`ros2 topic echo`) and stays. A
    # leave bound far above the end's own time: a loaded machine cannot pass for the wait
    monkeypatch.setattr(server_node, 'LEAVE_TIMEOUT_S', 60.0)
    namespace, open_dds = _bus_opener(monkeypatch, 'end')
    srv = _server(tmp_path, namespace, workers=1)
    tool = open_dds()
    worker = _worker_endpoints(open_dds(), 0)
    try:
        tool.subscribe('w0/chunks')
        assert srv.activate()
        # the worker leaves; the tool does not
        worker.close()
        _until(lambda: not any(srv.bus.matched(t) for t in server_inbox()),
               "the worker's uplink writers gone")
        _until(lambda: srv.bus.matched('w0/chunks') == 1, "the tool's reader matched")
        monkeypatch.setattr(type(srv.engine), 'finished', True)   # every worker was stopped
        # Execute
        start = time.monotonic()
        summary = srv.finish()
        took = time.monotonic() - start
    finally:
        worker.close()                          # (idempotent: a failed test leaves none open)
        tool.close()
        srv.shutdown()
    # Assert: no wait for the tool to go (the whole LEAVE_TIMEOUT_S), the run written as done
    assert took < 30, f'finish took {took:.1f} s: it waited for the reader on w0/chunks'
    assert summary['completed'] is True


def test_the_in_memory_server_waits_for_a_worker_a_reader_stands_in_for(tmp_path, monkeypatch):
    """The same start-up as over DDS, on the Hub: its ``matched`` counts endpoints as DDS."""
    hub = in_memory_fleet(monkeypatch)
    srv, workers = server_and_workers(tmp_path, '/presence', 2,
                                      ['--startup-timeout', '0.2'])
    workers[0].shutdown()                       # worker 0 is not there; a tool reads its topics
    tool = hub.bus('auto', '/presence')
    for topic in worker_inbox(0):
        tool.subscribe(topic)
    try:
        with pytest.raises(PeerTimeout, match=r'up/chunks \(1 of 2\)'):
            srv.activate()
    finally:
        tool.close()
        workers[1].shutdown()
        srv.shutdown()


def test_wait_matched_names_each_short_topic_with_the_peers_it_saw():
    """The timeout says what is missing: a topic with no peer, and one short of its count."""
    counts = {'w0/chunks': 0, 'w1/chunks': 1, 'up/chunks': 1, 'up/acks': 2}
    bus = SimpleNamespace(namespace='/rog', matched=counts.get)
    with pytest.raises(PeerTimeout) as raised:
        wait_matched(bus, ['w0/chunks', 'w1/chunks'], 0.0,
                     minimum={'up/chunks': 2, 'up/acks': 2})
    assert str(raised.value).startswith(
        'no peer on w0/chunks; too few peers on up/chunks (1 of 2) after 0 s: is the other '
        'side running with the same namespace (/rog)')
    counts.update({'w0/chunks': 1, 'up/chunks': 2})
    assert wait_matched(bus, ['w0/chunks', 'w1/chunks'], 0.0,
                        minimum={'up/chunks': 2, 'up/acks': 2}) >= 0.0
