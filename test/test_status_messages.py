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
"""Status messages say which run of a node sent them, and their cumulative times only grow."""

import pytest
from rog_ros.nodes import worker_node
from rog_ros.protocol.messages import TrainStatus
from test_nodes_lifecycle import in_memory_fleet, server_and_worker

pytest.importorskip('torch')


class _Published:
    """A bus that keeps what is published on it."""

    def __init__(self):
        self.sent = []

    def publish(self, topic, msg):
        """Keep ``msg``."""
        self.sent.append(msg)


def test_the_statuses_carry_their_senders_incarnation(tmp_path, monkeypatch):
    # every TrainStatus said incarnation 0, although the .msg makes it the sender's run id,
    # and the server resends its model to a robot that started apart once per (rank,
    # incarnation): a restarted robot on other weights was never sent it again
    in_memory_fleet(monkeypatch)
    srv, wrk = server_and_worker(tmp_path / 'out', '/status_inc', ['--iterations', '3'])
    try:
        assert srv.activate() and wrk.activate()
        for _ in range(200):
            wrk.spin_once()
            srv.spin_once()
            if 0 in srv.status:
                break
        heard = srv.status[0]
        srv.bus, kept = _Published(), srv.bus
        srv._publish_eval({'accuracy': 0.5, 'loss': 1.0})
        own = srv.bus.sent[-1]
        srv.bus = kept
    finally:
        wrk.shutdown()
        srv.shutdown()
    assert heard.incarnation == wrk.engine.incarnation != 0
    assert isinstance(own, TrainStatus) and own.incarnation == srv.engine.incarnation != 0


def test_comm_time_never_goes_down_while_a_computation_is_under_way(tmp_path, monkeypatch):
    # a status sent mid-computation counted the computation as communication (0.81 s),
    # and the next one, after it, took it back (0.65 s): comm_s is cumulative (.msg)
    in_memory_fleet(monkeypatch)
    srv, wrk = server_and_worker(tmp_path / 'out', '/status_comm')
    assert srv.activate() and wrk.activate()
    now = [0.0]
    monkeypatch.setattr(worker_node.time, 'monotonic', lambda: now[0])
    wrk.bus, kept = _Published(), wrk.bus
    wrk.started_at = 100.0
    said = []

    def status_at(t):
        """Publish a status at ``t`` s; note its comm_s."""
        now[0] = t
        wrk._publish_status()
        said.append(wrk.bus.sent[-1].comm_s)
    try:
        wrk.compute_s = 4.0
        status_at(110.0)                       # 10 s in: 4 s computed, 6 s of the rest
        wrk._computing_since = 110.0           # a computation from then on
        status_at(113.0)
        wrk.compute_s, wrk._computing_since = 8.0, None     # it ended 14 s in
        status_at(114.0)
        status_at(116.0)
    finally:
        wrk.bus = kept
        wrk.shutdown()
        srv.shutdown()
    assert said == [6.0, 6.0, 6.0, 8.0]
