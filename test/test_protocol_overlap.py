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
Computing the next gradient while a push and its pull run (``SyncPolicy.overlap``).

A gradient computed ahead must be one RSP admits (the model it is taken on satisfies the
staleness bound of its iteration), must be taken exactly once and only after the pull of the
iteration before it, and must change nothing of the exactly-once accounting (it is not in the
residual or the durable state until taken). It must also buy time where the link is slow.
"""

import random

from protocol_fixtures import at_compute_start, build, random_faults
import pytest
from rog_ros.protocol.actions import StartCompute
from rog_ros.protocol.policies import make_policy
from rog_ros.sim.fault_fleet import checkpoint_every, schedule_server_crashes
from test_protocol_conservation import check_invariants
import torch


def watch_gradients(harness, staleness):
    """Record every computation's RSP margin, checked when it starts (``at_compute_start``)."""
    seen = []

    def admitted(rank, clock):
        eng = harness.workers[rank]
        active = eng.active
        # per column: S, plus the straggler slack the server granted (at most slack_max)
        bound = eng._bounds()
        assert int(bound.max()) <= staleness + eng.policy.slack_max
        lags = clock - 1 - eng.vloc.min(dim=0).values
        lag = int(lags[active].max()) if bool(active.any()) else 0
        seen.append((rank, clock, lag, eng.state))
        assert clock == eng.clock + 1          # it computes the iteration after the last taken
        # (a worker suspended for its link runs free: no bound holds it, async_when_out)
        assert eng._runs_free() or bool((lags <= bound)[active].all()), \
            f'worker {rank} computes {clock} {lag} iterations stale (bounds {bound.tolist()})'
    at_compute_start(harness, admitted)
    return seen


@pytest.mark.parametrize('spec', ['rog:2', 'rog:4', 'ssp:2'])
@pytest.mark.parametrize('seed', [0, 1])
def test_overlap_keeps_exactly_once_and_the_staleness_bound_under_faults(spec, seed):
    pol = make_policy(spec + '#overlap=1')
    harness, server, workers, _, _ = build(spec, n=3, iters=12, dtype=torch.float64,
                                           fault=random_faults(seed), seed=seed, policy=pol)
    seen = watch_gradients(harness, pol.staleness)
    harness.run(until=300)
    assert server.finished
    ahead = [s for s in seen if s[3] != 'computing']
    assert ahead, 'no gradient was computed ahead'
    check_invariants(harness, server, workers)
    # every taken iteration was computed once (the last one ahead may be left untaken)
    for r, w in enumerate(workers):
        clocks = [c for rank, c, _, _ in seen if rank == r]
        assert len(clocks) == len(set(clocks)) or server.outage_suspensions


def test_overlap_is_faster_where_the_link_is_the_bottleneck():
    # compute and transfers of about the same length: sequential pays their sum, overlapped
    # about their maximum (the links here move ~0.1 s of bytes per push and pull)
    kw = {'n': 3, 'iters': 20, 'dtype': torch.float64, 'seed': 3, 'compute': (0.1, 0.1, 0.1),
          'bandwidths': (0.12e6, 0.12e6, 0.12e6), 'latency': 0.005}
    times, losses = {}, {}
    for overlap in (False, True):
        # (late rows off in both: computing ahead leaves the link no idle time for them)
        pol = make_policy(f'rog:4#overlap={int(overlap)}#late_rows=0')
        harness, server, workers, loss_fn, _ = build('rog:4', policy=pol, **kw)
        stats = harness.run(until=300)
        assert server.finished and stats.error is None
        times[overlap] = stats.end_time
        losses[overlap] = float(loss_fn(server.consensus_model()))
        check_invariants(harness, server, workers)
    assert times[True] < 0.85 * times[False], times     # measured 0.76
    # the extra iteration of staleness is within the bound: it still optimises as well
    assert losses[True] < 1.5 * losses[False], losses


def test_bsp_and_flown_never_compute_ahead():
    # S = 0 admits no model without the last pull; FLOWN's slots are the server's to give
    for spec in ('bsp', 'flown:2'):
        pol = make_policy(spec + '#overlap=1')
        harness, server, workers, _, _ = build(spec, n=3, iters=6, dtype=torch.float64,
                                               policy=pol)
        seen = watch_gradients(harness, max(pol.staleness, 0) if spec == 'bsp' else 99)
        harness.run(until=300)
        assert server.finished
        assert all(s[3] == 'computing' for s in seen), spec


@pytest.mark.parametrize('seed', range(3))
def test_overlap_across_server_restarts_keeps_exactly_once(seed):
    # A gradient computed ahead of a server restart is dropped (its model is superseded by
    # the rejoin snapshot); nothing it carried was in the residual, so nothing is lost.
    pol = make_policy('rog:2#overlap=1')
    harness, _, _, _, _ = build('rog:2', n=3, iters=10, dtype=torch.float64, seed=seed,
                                policy=pol)
    most = count_computations_in_flight(harness)
    checkpoint_every(harness, 0.2)
    crashes = schedule_server_crashes(harness, random.Random(seed), 3, 0.9)
    harness.run(until=2000)
    server = harness.server
    assert len(crashes) >= 2 and server.finished
    assert most == [1, 1, 1]
    check_invariants(harness, server, harness.workers)


def count_computations_in_flight(harness):
    """Track, per worker, the most computations the engine had asked for at once."""
    n = len(harness.workers)
    in_flight, most = [0] * n, [0] * n
    push = harness._push

    def counting_push(t, kind, *payload):
        if kind == 'compute':
            r = payload[0]
            in_flight[r] += 1
            most[r] = max(most[r], in_flight[r])
        push(t, kind, *payload)
    harness._push = counting_push
    for r, w in enumerate(harness.workers):
        def done(grad, now, inner=w.on_compute_done, r=r):
            in_flight[r] -= 1
            return inner(grad, now)
        w.on_compute_done = done
    return most


def test_a_gradient_dropped_while_computing_is_waited_for_not_doubled():
    # A driver holds one pending computation per worker (the node's EngineDriver keeps one
    # compute_at): after a drop the engine waits for the dropped computation to report back
    # and only then asks for the next one, and the run still ends exactly-once.
    pol = make_policy('rog:4#overlap=1')
    harness, server, workers, _, _ = build('rog:4', n=2, iters=8, dtype=torch.float64,
                                           policy=pol, compute=(0.2, 0.2),
                                           bandwidths=(0.2e6, 0.2e6))
    most = count_computations_in_flight(harness)
    w = workers[0]
    dropped = 0
    t = 0.0
    while not server.finished and t < 60.0:
        t += 0.01
        harness.run(until=t)
        if w._ahead == 'running' and w.state == 'pushing' and dropped < 3:
            w._drop_ahead()                   # what a server restart does to it
            dropped += 1
    assert dropped == 3 and server.finished
    assert most == [1, 1]
    check_invariants(harness, server, workers)


def test_a_dropped_gradient_computed_ahead_changes_nothing():
    pol = make_policy('rog:4#overlap=1')
    harness, server, workers, _, _ = build('rog:4', n=2, iters=5, dtype=torch.float64,
                                           policy=pol, compute=(0.1, 0.1),
                                           bandwidths=(0.05e6, 0.05e6))
    w = workers[0]
    actions = w.start(0.0)
    assert [type(a) for a in actions] == [StartCompute]
    out = w.on_compute_done(torch.ones_like(w.w), 0.1)
    ahead = [a for a in out if isinstance(a, StartCompute)]
    assert len(ahead) == 1 and ahead[0].overlapped and ahead[0].clock == 2
    clock, residual = w.clock, w.residual.clone()
    with pytest.raises(ValueError):
        w.on_compute_done(torch.ones(3, dtype=w.w.dtype), 0.15)
    assert w._ahead == 'running'                 # a bad gradient changed nothing
    w._drop_ahead()                              # e.g. the server restarted meanwhile
    assert w.on_compute_done(torch.ones_like(w.w), 0.2) == []
    assert w.clock == clock and torch.equal(w.residual, residual) and w._ahead is None


def test_overlap_is_off_by_default_and_taggable():
    # measured trade (docs/scheduling.md): faster iterations, more of them to the target
    for spec in ('rog:4', 'ssp:4', 'bsp', 'flown:4'):
        assert make_policy(spec).overlap is False
    assert make_policy('rog:4#overlap=1').overlap is True
