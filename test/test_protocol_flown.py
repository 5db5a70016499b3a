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
"""FLOWN slot arbitration: laggards first, then estimated bandwidth; K slots at most."""

from protocol_fixtures import build
import pytest
from rog_ros.protocol.messages import LinkStats
from rog_ros.protocol.policies.flown import SlotScheduler
import torch


def test_laggard_first_then_bandwidth():
    s = SlotScheduler(slots=1, staleness=2)
    s.request(0, 'push', 5, now=0.0)
    s.request(1, 'push', 9, now=0.1)
    s.request(2, 'push', 9, now=0.2)
    clocks = [5, 9, 9]                # worker 0 is at the limit (5 <= 9 - 2)
    bw = [1.0, 2.0, 8.0]
    assert [g[:2] for g in s.grant(1.0, clocks, bw)] == [(0, 'push')]
    s.release(0, 'push')
    assert [g[:2] for g in s.grant(1.0, [9, 9, 9], bw)] == [(2, 'push')]   # fastest next
    s.release(2, 'push')
    (w, kind, waited, clock), = s.grant(2.0, [9, 9, 9], bw)
    assert (w, kind, clock) == (1, 'push', 9) and abs(waited - 1.9) < 1e-9


def test_at_most_k_slots_and_no_double_transfer():
    s = SlotScheduler(slots=2, staleness=4)
    for w in range(4):
        s.request(w, 'pull', 1, 0.0)
    assert len(s.grant(0.0, [1] * 4, [1.0] * 4)) == 2
    s.request(0, 'pull', 2, 0.0)      # worker 0's next pull waits for its first one
    s.release(1, 'pull')
    granted = [g[0] for g in s.grant(0.0, [1] * 4, [1.0] * 4)]
    assert 0 not in granted and len(granted) == 1


def test_flown_fleet_uses_link_estimates():
    harness, server, workers, _, _ = build('flown:4', n=4, iters=10, dtype=torch.float64)
    for r, mbps in enumerate([1.0, 50.0, 2.0, 3.0]):
        server.on_message(LinkStats(node=r, interface='wlan0', stamp=0.0, emulated_mbps=mbps),
                          0.0)
    assert server.link_estimate_bps[1] == 50e6
    stats = harness.run()
    assert stats.iterations == [10] * 4
    assert sum(server.triggers) > 0           # slot waits are counted as stalls
    assert all(w.conservation_residual() < 1e-9 for w in workers)


def test_link_reports_do_not_keep_a_silent_worker_present():
    # Worker 2's messages are lost from 0.4 s on while its netmon goes on reporting its link:
    # the report says the machine is up, not that the worker is, so absence still suspends it
    # and the others finish (were it presence, they would wait for worker 2 for ever).
    def silent_2(msg, src, dst, now):
        return [] if 2 in (src, dst) and now >= 0.4 else [0.0]

    harness, server, _, _, _ = build('flown:2', n=3, iters=12, dtype=torch.float64,
                                     fault=silent_2, absence_timeout_s=1.0)
    harness.log_events = True
    for i in range(5, 300):
        harness.at(i * 0.1, lambda: server.on_message(
            LinkStats(node=2, interface='wlan0', stamp=harness.now, emulated_mbps=20.0),
            harness.now))
    harness.run(until=30.0)
    suspended = [(t, a.worker, a.info['reason']) for t, _, a in harness.stats.logs
                 if a.name == 'worker_suspended']
    assert [(w, why) for _, w, why in suspended] == [(2, 'absent')]
    assert suspended[0][0] < 2.5                # absence_timeout_s after its last message
    assert server.link_estimate_bps[2] == 20e6
    assert server.stopped[:2] == [True, True] and not server.stopped[2]


def test_a_late_copy_of_an_earlier_grant_starts_no_push():
    # A grant names the push it answers: a duplicated or delayed grant of the previous push
    # must not start this one without a slot (before, any Schedule did)
    from rog_ros.protocol.messages import Schedule
    harness, server, workers, _, _ = build('flown:2', n=2, iters=4, dtype=torch.float64)
    w = workers[0]
    w.start(0.0)
    w.on_compute_done(torch.zeros_like(w.residual), 0.1)
    assert w.state == 'awaiting_grant' and w.clock == 1

    def grant(clock):
        return w.on_message(Schedule(worker=0, clock=clock, push_deadline_s=-1.0,
                                     incarnation=server.incarnation), 0.2)
    assert grant(0) == [] and w.state == 'awaiting_grant'
    assert grant(1) and w.state == 'pushing'


@pytest.mark.parametrize('seed', [1, 4])
def test_membership_changes_never_serve_a_pull_outside_its_slot(seed):
    # A suspension or readmission served every waiting worker's pull at once, outside
    # FLOWN's slots; the slot's grant then served the same pull again and the worker
    # applied both (its model no longer the server's view of it). Found by a crash sweep
    # with membership; here a short absence timeout suspends and readmits in turn.
    from test_protocol_conservation import check_invariants
    from test_protocol_membership import outage
    harness, server, workers, _, _ = build('flown:2', n=4, iters=12, dtype=torch.float64,
                                           seed=seed, fault=outage(seed % 3, 0.3, 2.5),
                                           absence_timeout_s=0.1)
    harness.log_events = True
    harness.run(until=300)
    assert server.finished
    assert any(a.name == 'worker_readmitted' for _, _, a in harness.stats.logs)
    check_invariants(harness, server, workers)
