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
"""Membership (issue 9, DESIGN section 10): absence suspends a worker; quorum; re-admission."""

from protocol_fixtures import build
from rog_ros.protocol.messages import SERVER
from rog_ros.protocol.policies import make_policy
from test_protocol_conservation import check_invariants
import torch

# These tests are about absence and quorum: outage-aware RSP (test_outage_rsp.py) off.
ABSENCE_ONLY = make_policy('rog:2', outage_aware=False)


def outage(worker, t0, t1):
    """Every message to or from ``worker`` between t0 and t1 is lost."""
    def fault(msg, src, dst, now):
        if worker in (src, dst) and t0 <= now < t1:
            return []
        return [0.0]
    return fault


def logs(stats, name):
    return [(t, node, a) for t, node, a in stats.logs if a.name == name]


def test_absent_worker_is_suspended_and_the_others_keep_training():
    harness, server, workers, _, _ = build('rog:2', n=3, iters=12, dtype=torch.float64,
                                           fault=outage(2, 0.4, 40.0), absence_timeout_s=1.0,
                                           policy=ABSENCE_ONLY)
    harness.log_events = True
    harness.run(until=39.0)
    # Without suspension worker 2's stale column would hold the others at clock ~S+2.
    assert server.stopped[:2] == [True, True] and not server.stopped[2]
    assert server.active.tolist() == [True, True, False]
    sus = logs(harness.stats, 'worker_suspended')
    assert len(sus) == 1 and sus[0][2].worker == 2 and sus[0][2].info['reason'] == 'absent'
    assert 1.0 <= sus[0][0] <= 2.5            # absence_timeout_s after its last message
    # It comes back with the same incarnation: catches up, is re-admitted, finishes.
    harness.run(until=400)
    assert server.finished and bool(server.active.all())
    assert len(logs(harness.stats, 'worker_readmitted')) == 1
    check_invariants(harness, server, workers)


def test_without_absence_timeout_the_fleet_waits():
    # The same outage with membership off: the others cannot get ahead (the old behaviour).
    harness, server, workers, _, _ = build('rog:2', n=3, iters=12, dtype=torch.float64,
                                           fault=outage(2, 0.4, 40.0), policy=ABSENCE_ONLY)
    harness.run(until=39.0)
    assert not any(server.stopped) and max(server.clock) <= 2 + 3 + 1


def test_quorum_holds_training_until_enough_workers_are_active():
    harness, server, workers, _, _ = build('rog:2', n=3, iters=12, dtype=torch.float64,
                                           fault=outage(2, 0.4, 20.0), absence_timeout_s=1.0,
                                           min_workers=3, policy=ABSENCE_ONLY)
    harness.log_events = True
    harness.run(until=19.0)
    assert not any(server.stopped) and not server.active[2]
    assert len(logs(harness.stats, 'quorum_lost')) == 1
    ahead = max(server.clock[:2])
    harness.run(until=400)
    assert ahead <= 2 + 3 + 1 and server.finished
    check_invariants(harness, server, workers)


def test_suspend_api_lets_a_slow_link_not_hold_the_fleet():
    # The outage-aware RSP of issue 10 calls suspend() for a worker whose link is dead.
    harness, server, workers, _, _ = build('rog:2', n=3, iters=10, dtype=torch.float64,
                                           fault=outage(1, 0.3, 30.0))
    harness.at(0.5, lambda: harness._handle(SERVER, server.suspend(1, harness.now, 'link')))
    harness.run(until=29.0)
    assert server.stopped == [True, False, True]
    assert server.suspended_reason == {1: 'link'}
    harness.at(harness.now, lambda: harness._handle(SERVER, server.readmit(1, harness.now)))
    harness.run(until=400)
    assert server.finished
    check_invariants(harness, server, workers)
