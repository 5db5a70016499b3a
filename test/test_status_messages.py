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
Status messages: who sent them, times that only grow, numbers that can be progress.

They say which run of a node sent them, their cumulative times only grow, and ones whose
numbers cannot be a node's progress are dropped before they reach a run's record.
"""

import io
import logging
import math

import pytest
from rog_ros.nodes import worker_node
from rog_ros.nodes.fleet_progress import Progress
from rog_ros.protocol.messages import SERVER, train_status_problem, TrainStatus
from test_nodes_lifecycle import in_memory_fleet, server_and_worker

torch = pytest.importorskip('torch')


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


def _status(**fields):
    """Return a plausible worker 0 status, ``fields`` changed."""
    base = {'node': 0, 'stamp': 1.0, 'iteration': 3, 'loss': 0.5, 'accuracy': 0.8,
            'stall_s': 0.1, 'compute_s': 1.0, 'comm_s': 0.2, 'bytes_up': 10, 'bytes_down': 20,
            'triggers': 1}
    base.update(fields)
    return TrainStatus(**base)


@pytest.mark.parametrize('field, value, said', [
    ('iteration', -1, 'iteration -1 outside [0, 100]'),
    ('iteration', 101, 'iteration 101 outside [0, 100]'),
    ('iteration', 10 ** 9, 'iteration 1000000000 outside'),
    ('accuracy', 7.0, 'accuracy 7.0 outside [0, 1]'),
    ('accuracy', -0.01, 'accuracy -0.01 outside'),
    ('accuracy', math.inf, 'accuracy inf'),
    ('stall_s', -1.0, 'stall_s -1.0 is not a duration'),
    ('compute_s', math.nan, 'compute_s nan'),
    ('comm_s', math.inf, 'comm_s inf'),
    ('bytes_up', -5, 'bytes_up -5 below 0'),
    ('bytes_down', -1, 'bytes_down -1'),
    ('triggers', -2, 'triggers -2'),
])
def test_a_status_whose_numbers_cannot_be_progress_is_named(field, value, said):
    assert train_status_problem(_status(), 100) is None
    problem = train_status_problem(_status(**{field: value}), 100)
    assert problem is not None and problem.startswith(said)


def test_a_status_with_nothing_measured_yet_or_at_the_limits_is_progress():
    assert train_status_problem(TrainStatus(node=0, stamp=1.0)) is None    # NaN loss, accuracy
    assert train_status_problem(_status(iteration=100, accuracy=1.0, loss=-3.0), 100) is None
    assert train_status_problem(_status(iteration=10 ** 9, accuracy=0.0)) is None   # no bound
    for loss in (math.inf, -math.inf, -3.0):      # a diverging run's loss is still progress
        assert train_status_problem(_status(loss=loss), 100) is None


@pytest.mark.parametrize('sync', ['rog', 'adacomp'])
def test_the_server_drops_a_status_out_of_range_counts_it_and_says_so_once(
        sync, tmp_path, monkeypatch, caplog):
    # a worker's iteration and compute time go into summary.json: a status with iteration
    # 10^9 made the run's record say the robot trained 10^9 iterations
    in_memory_fleet(monkeypatch)
    srv, wrk = server_and_worker(tmp_path / 'out', '/status_range',
                                 ['--iterations', '3', '--sync', sync], ['--sync', sync])
    try:
        with caplog.at_level(logging.WARNING):
            srv._on_status(_status(iteration=10 ** 9, compute_s=500.0))
            srv._on_status(_status(iteration=2 * 10 ** 9))
            srv._on_status(_status(accuracy=7.0))
        assert 0 not in srv.status
        srv._on_status(_status(iteration=2, compute_s=1.5))
        assert srv.status[0].iteration == 2
        assert not srv.reject_notes.kinds     # the engine's rejects keep their own notes
        counts = srv.reject_counts()
        summary = srv._write(srv.t0 or 0.0)
    finally:
        wrk.shutdown()
        srv.shutdown()
    assert counts['invalid_status'] == 3
    said = [r.getMessage() for r in caplog.records if 'TrainStatus' in r.getMessage()]
    assert len(said) == 2 and 'robot 0' in said[0] and 'iteration 1000000000' in said[0]
    assert summary['iterations_per_robot'] == [2]
    assert summary['rejects_by_reason']['invalid_status'] == 3


def test_the_summary_has_every_reject_reason_the_docs_name_zero_or_not(tmp_path, monkeypatch):
    """Write every reason of rejects_by_reason, 0 when none, as docs/outputs.md lists them."""
    # Arrange: a fleet without a fleet key (its bus has no authentication reasons of its own)
    import os
    import re
    in_memory_fleet(monkeypatch)
    srv, wrk = server_and_worker(tmp_path / 'out', '/reject_keys', ['--iterations', '3'], [])
    try:
        # Execute
        summary = srv._write(srv.t0 or 0.0)
    finally:
        wrk.shutdown()
        srv.shutdown()
    docs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'docs',
                        'outputs.md')
    with open(docs, encoding='utf-8') as fh:
        row = next(line for line in fh if line.startswith('| `rejects`, `rejects_by_reason`'))
    # Assert
    keys = ['undecodable', 'unauthenticated', 'bad_tag', 'replay', 'too_old', 'malformed',
            'invalid', 'engine_error', 'invalid_status']
    assert summary['rejects_by_reason'] == dict.fromkeys(keys, 0)
    assert re.findall(r'always the keys (.*?)[:;]', row) == [', '.join(f'`{k}`' for k in keys)]


def test_the_progress_line_shows_no_status_out_of_range():
    shown = Progress(1, 10, stream=io.StringIO())
    shown.on_status(_status(node=SERVER, iteration=4, accuracy=0.75))
    shown.on_status(_status(node=SERVER, iteration=5, accuracy=7.0))
    shown.on_status(_status(node=SERVER, iteration=10 ** 9, accuracy=0.8))
    assert ' it 4/10 acc 0.750 ' in shown.line()
    shown.on_status(_status(node=SERVER, iteration=10, accuracy=0.1, loss=math.inf))
    assert ' it 10/10 acc 0.100 ' in shown.line()


def test_the_servers_status_counts_the_robots_in_the_check(tmp_path, monkeypatch):
    # the live line showed the slowest robot of all: one frozen for good held it at its
    # last iteration while the others trained on, and the finished run closed on
    # "it 254/3000"
    in_memory_fleet(monkeypatch)
    srv, wrk = server_and_worker(tmp_path / 'out', '/status_it', ['--iterations', '3'])
    published = _Published()
    srv.bus, kept = published, srv.bus
    try:
        e = srv.engine
        e.clock = [3000, 254, 2990]
        e.active = torch.tensor([True, False, True])
        srv._publish_eval({'accuracy': 0.5, 'loss': 1.0})
        e.active = torch.tensor([False, False, False])
        srv._publish_eval({'accuracy': 0.5, 'loss': 1.0})
    finally:
        srv.bus = kept
        wrk.shutdown()
        srv.shutdown()
    assert [m.iteration for m in published.sent] == [2990, 254]
