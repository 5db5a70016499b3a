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
"""A worker started for another fleet size stops at once, saying so, instead of waiting."""

import logging
import time
from types import SimpleNamespace

from protocol_fixtures import build
import pytest
from rog_ros.nodes import worker_node
from rog_ros.nodes.connect import PeerTimeout
from rog_ros.nodes.reject_notes import RejectNotes
from rog_ros.nodes.worker_node import FleetMismatch, WorkerNode
from rog_ros.protocol.actions import Log
from rog_ros.protocol.messages import RowVersions


def test_the_engine_tells_another_fleet_size_from_a_damaged_message():
    _, _, workers, _, _ = build('rog:4', n=2)
    w = workers[0]
    out = w.on_message(RowVersions(transfer_id=1, receiver=0, n_workers=3), 0.0)
    assert [(a.name, a.info.get('fleet_size')) for a in out if isinstance(a, Log)] == [
        ('reject', 3)]
    assert w.rejects == 1
    out = w.on_message(RowVersions(transfer_id=10 ** 9, receiver=0, n_workers=2), 0.0)
    assert [a.info.get('fleet_size') for a in out if isinstance(a, Log)] == [None]


def test_a_worker_node_told_of_another_fleet_size_stops_with_a_usage_error(caplog):
    # what a robot started with --workers 3 met in a fleet of 2: before, it dropped every
    # message of the server and waited until its server_timeout, which blamed the link
    node = WorkerNode.__new__(WorkerNode)          # only what _on_log and spin_once use
    node.log = logging.getLogger('rog_worker_size_test')
    node.reject_notes = RejectNotes(sender='the server')
    node._misconfigured, node.rank, node._finished_before = 0, 0, False
    node.args = SimpleNamespace(workers=3)
    node.driver = SimpleNamespace(stopped=False)
    with caplog.at_level(logging.INFO, logger='rog_worker_size_test'):
        node._on_log(0.0, Log('reject', 1.0, 0, {
            'error': 'RowVersions for 2 workers, the fleet has 3', 'fleet_size': 2}))
    assert [r.getMessage() for r in caplog.records] == [
        'dropped a message (from the server, first of its kind): RowVersions for 2 workers, '
        'the fleet has 3']
    with pytest.raises(FleetMismatch, match='worker 0: started with workers=3, but the server '
                                            'runs a fleet of 2; give every robot'):
        node.spin_once()


class UplinkOnlyBus:
    """A bus on which the server's readers are matched and its writers for us appear late."""

    namespace = '/rog'

    def __init__(self, downlink_after_s):
        self.start = time.monotonic()
        self.downlink_after_s = downlink_after_s

    def matched(self, topic):
        if topic.startswith('up/'):
            return 1
        return int(time.monotonic() - self.start >= self.downlink_after_s)


def waiting_node(bus, startup_timeout):
    """Return a WorkerNode with only what its start-up wait uses: rank 4 of a fleet of 5."""
    node = WorkerNode.__new__(WorkerNode)
    node.log = logging.getLogger('rog_worker_downlink_test')
    node.bus, node.rank = bus, 4
    node.args = SimpleNamespace(workers=5, startup_timeout=startup_timeout)
    node.requests = SimpleNamespace(shutdown_requested=False)
    return node


def test_a_rank_outside_the_servers_fleet_is_named_while_waiting(caplog, monkeypatch):
    # the server reads the uplink but writes to no worker 4: its fleet is smaller. Before,
    # the worker said only "no peer ... can DDS discovery reach it?" after the whole timeout
    monkeypatch.setattr(worker_node, 'DOWNLINK_GRACE_S', 0.1)
    node = waiting_node(UplinkOnlyBus(downlink_after_s=1e9), startup_timeout=0.4)
    with caplog.at_level(logging.WARNING, logger='rog_worker_downlink_test'):
        with pytest.raises(PeerTimeout, match=r'no peer on w4/chunks.*after 0 s: the uplink .* '
                                              r'has a reader.*smaller than workers=5, it has no '
                                              r'worker 4; give every robot'):
            node._wait_for_downlink(0.0)
    assert [r.getMessage()[:30] for r in caplog.records] == ['no writer on w4/chunks, w4/ack']


def test_a_late_downlink_is_waited_for_after_the_warning(caplog, monkeypatch):
    monkeypatch.setattr(worker_node, 'DOWNLINK_GRACE_S', 0.05)
    node = waiting_node(UplinkOnlyBus(downlink_after_s=0.2), startup_timeout=5.0)
    with caplog.at_level(logging.WARNING, logger='rog_worker_downlink_test'):
        assert node._wait_for_downlink(0.0) >= 0
    assert len(caplog.records) == 1
    caplog.clear()
    node = waiting_node(UplinkOnlyBus(downlink_after_s=0.0), startup_timeout=5.0)
    with caplog.at_level(logging.WARNING, logger='rog_worker_downlink_test'):
        assert node._wait_for_downlink(0.0) >= 0
    assert caplog.records == []            # the usual start: no word about fleet sizes
