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
from types import SimpleNamespace

from protocol_fixtures import build
import pytest
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
    node._misconfigured, node.rank = 0, 0
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
