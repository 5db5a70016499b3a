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
A robot suspended for its link may run free (``SyncPolicy.async_when_out``, off by default).

Nobody waits for it, and it no longer waits for the rows its own check would need: its
pulls carry the MTA prefix of its priority order and a catch-up does not age its rows, so on
a slow (not dead) link it pushes more often, smaller, closer to the fleet's clock and so at a
higher weight. The others' checks, conservation of gradient mass and its readmission once
its link is back must hold as before.
"""

from protocol_fixtures import build, random_faults
import pytest
from rog_ros.protocol.policies import make_policy
from test_outage_rsp import BW, dipping_link, logs, staleness_watch
from test_protocol_conservation import check_invariants
from test_protocol_overlap import watch_gradients
import torch

SLOW = (0.5, 8.0)           # worker 2's link runs at 1/20 of the others' in this window
LOW_MBPS = BW / 1e6 / 20


def run_slow(on, watch=None, fault=None, seed=0, on_harness=None):
    # on: the switch alone (free_stragglers off, so a robot runs free only through it);
    # None: Rog's defaults (free_stragglers may let the slow robot go)
    pol = (make_policy('rog:2') if on is None
           else make_policy('rog:2', async_when_out=on, free_stragglers=False))
    harness, server, workers, _, _ = build('rog:2', n=3, iters=150, dtype=torch.float64,
                                           bandwidths=(BW, BW, BW), policy=pol, fault=fault,
                                           seed=seed)
    harness.up[2] = dipping_link(*SLOW, low_mbps=LOW_MBPS)
    harness.down[2] = dipping_link(*SLOW, low_mbps=LOW_MBPS)
    harness.log_events = True
    if watch is not None:
        watch(server)
    if on_harness is not None:
        on_harness(harness)
    harness.run(until=400)
    assert server.finished and harness.stats.error is None
    pushes = [a for t, a in logs(harness.stats, 'push_applied')
              if a.worker == 2 and SLOW[0] < t < SLOW[1]]
    back = [t for t, a in logs(harness.stats, 'worker_readmitted') if a.worker == 2]
    return harness, server, workers, pushes, back


def test_a_robot_out_on_a_slow_link_contributes_more_and_the_rules_hold():
    seen = []
    harness, server, workers, free, back = run_slow(True, watch=staleness_watch(seen))
    _, _, _, held, back_held = run_slow(False)
    assert server.outage_suspensions >= 1
    # it pushes more often, fewer rows a push, and closer to the fleet's clock
    assert len(free) >= 1.3 * len(held)
    assert (sum(a.value for a in free) / len(free)
            < 0.9 * sum(a.value for a in held) / len(held))
    weight = sum(a.info.get('weight', 1.0) for a in free)
    assert weight >= 1.5 * sum(a.info.get('weight', 1.0) for a in held)
    # the others' checks hold, and it returns once its link is back, as soon as before
    assert len(seen) > 40 and max(seen) <= server.policy.staleness
    assert back and SLOW[1] < min(back) < SLOW[1] + 1.0
    assert min(back) <= min(back_held) + 0.5
    assert bool(server.active.all())
    check_invariants(harness, server, workers)      # gradient mass: applied + ledger


@pytest.mark.parametrize('on', [True, False, None])
@pytest.mark.parametrize('seed', [1, 2, 4, 6])
def test_lost_repeated_and_late_messages_lose_nothing_while_a_robot_is_out(on, seed):
    # no repair for a robot running free: rows lost on its downlink stay stale there, and
    # the server's mirror of its model must record exactly what arrived; held to the bound,
    # every computation is admitted by it (seeds where readmissions and lower slack arrive
    # while a worker computes: the watch checks each computation when it starts); with
    # Rog's defaults (on=None) free_stragglers may let the slow robot go while its pull is
    # under way: the server must still repair what that pull lost (seed 2 hung before)
    free_steps, watched = [], []

    def install(harness):
        watched.append(watch_gradients(harness, 2))
        inner = harness.grad_fn

        def grad_fn(rank, w, clock):
            free_steps.append(harness.workers[rank]._runs_free())
            return inner(rank, w, clock)
        harness.grad_fn = grad_fn
    harness, server, workers, _, back = run_slow(on, fault=random_faults(seed), seed=seed,
                                                 on_harness=install)
    assert len(watched[0]) >= 2 * 150 and server.outage_suspensions >= 1
    if on is not None:
        assert sum(free_steps) >= 1 if on else not any(free_steps)  # it did run free, or not
    # it came back once its link did (lost and late messages may suspend it again for a
    # moment, and the fleet may stop while it is out: stop-after-fleet)
    assert bool(server.active.all()) or (back and max(back) > SLOW[1])
    check_invariants(harness, server, workers)      # gradient mass, exactly once


def test_only_a_robot_out_for_its_link_runs_free_and_the_switch_turns_it_off():
    _, server, workers, _, _ = run_slow(True)
    assert not any(server._runs_free(r) for r in range(3))      # all back at the end
    server.active[2], server.suspended_reason[2] = False, 'link'
    assert server._runs_free(2) and not server._runs_free(0)
    server.suspended_reason[2] = 'absent'         # silent or crashed: membership, not a link
    assert not server._runs_free(2)
    workers[2].active[2] = False                   # its column travelled as -1 ...
    assert not workers[2]._runs_free()             # ... but the server did not say so
    workers[2]._told_free = True                   # its last pull carried FLAG_FREE
    assert workers[2]._runs_free() and not workers[0]._runs_free()
    workers[2].active[2] = True                    # back in: held again
    assert not workers[2]._runs_free()
    _, off, off_workers, _, _ = run_slow(False)
    off.active[2], off.suspended_reason[2] = False, 'link'
    off_workers[2].active[2] = False
    assert not off._runs_free(2) and not off_workers[2]._runs_free()
    assert make_policy('rog:4#async_when_out=1').async_when_out
    assert not make_policy('rog:4').async_when_out           # measured, not the default


@pytest.mark.parametrize('spec', ['ssp:4', 'bsp', 'flown:4'])
def test_the_baselines_never_run_free(spec):
    assert not make_policy(spec).async_when_out


def test_the_worker_follows_the_server_whatever_it_was_started_with():
    # the server decides who runs free and says so on its pulls (FLAG_FREE): a worker
    # started with the switch off still runs free for a server with it on (it would
    # otherwise wait for rows the server no longer repairs), and the reverse holds
    def mismatch(harness):
        for w in harness.workers:
            w.policy = make_policy('rog:2', async_when_out=not w.policy.async_when_out)
    for on in (True, False):
        free_steps = []

        def install(harness):
            mismatch(harness)
            inner = harness.grad_fn

            def grad_fn(rank, w, clock):
                free_steps.append(harness.workers[rank]._runs_free())
                return inner(rank, w, clock)
            harness.grad_fn = grad_fn
        harness, server, workers, _, back = run_slow(on, on_harness=install)
        assert workers[2].policy.async_when_out != on
        assert (sum(free_steps) >= 1) == on and back       # as the server said; it came back
        check_invariants(harness, server, workers)
