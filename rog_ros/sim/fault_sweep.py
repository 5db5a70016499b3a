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
Random fault sweeps and the invariants every run of them must keep.

Two sweeps, each run drawn from its seed (docs/faults.md):

- **crash**: message loss, duplication and reordering, workers killed and restored from the
  state they last saved, the server killed and restored from its last confirmed checkpoint;
  ``level`` 0-2 draws more of each.
- **membership**: the same crashes plus what a fleet adds: absence timeouts shorter than a
  waiting worker's poke interval, link outages of up to 6 s, and server crashes at any time
  before the end, with a checkpoint before each stop order as the server node takes.

A run passes when it ends, every uplink was applied exactly once (the server's model is
the sum of the delivered pushes, less what outage-aware RSP discarded on purpose), every
worker holds the model the server holds for it (unless it is owed a rejoin snapshot that
the end made moot), gradient mass is conserved, no rank was taken twice, and a worker that
got the fleet's final model holds it bit for bit. ``problems`` lists what broke, in words;
the tests assert the list is empty and ``rog bench faults`` counts it.
"""

from __future__ import annotations

import random

from rog_ros.protocol.messages import SERVER
from rog_ros.protocol.ps_final import FINAL_PATIENCE_S
from rog_ros.sim.fault_fleet import (checkpoint_at_the_final_model,
                                     checkpoint_before_stop_orders, checkpoint_every,
                                     crash_server_once, quadratic_fleet, random_faults,
                                     schedule_server_crashes, schedule_worker_crashes)
import torch

SYSTEMS = ('rog:2', 'rog:4', 'ssp:2', 'bsp', 'flown:2')
"""The systems a sweep runs by default: every synchronisation rule of the engines."""

KINDS = ('crash', 'membership')

_TOL = 1e-10      # float64 ledgers: what is exact stays within this


def random_crash_run(spec, seed, level=0, final_model=False):
    """
    Build and run one case of the crash sweep; return the harness, run to its end.

    Fleet size, iterations, fault rate, worker crashes and server crashes with checkpoints
    are drawn from the seed; ``level`` 1 (hard) and 2 (extreme) draw more of each. The
    crashes that happened are in ``harness.worker_crashes`` and ``harness.server_crashes``.
    """
    rng = random.Random(seed * 7919)
    n = rng.choice([[2, 3, 4], [3, 4, 5], [2, 3, 4, 5]][level])
    iters = rng.choice([[6, 8, 10], [10, 14], [8, 12, 16]][level])
    p = rng.choice([[0.0, 0.03, 0.05, 0.08], [0.05, 0.1, 0.15], [0.15, 0.2]][level])
    harness, _, _, _, _ = quadratic_fleet(
        spec, n=n, iters=iters, dtype=torch.float64, seed=seed, save_states=True,
        bandwidths=(1e6, 0.5e6, 2e6, 0.3e6, 0.8e6), compute=(0.05, 0.07, 0.11, 0.06, 0.09),
        fault=random_faults(seed, p_drop=p, p_dup=p, p_late=p) if p else None,
        final_model=final_model)
    harness.worker_crashes = schedule_worker_crashes(
        harness, rng, rng.choice([[0, 2, 4, 6], [4, 8, 10], [8, 12]][level]),
        [2.0, 3.0, 3.0][level], (0.02, 0.5))
    harness.server_crashes = []
    if rng.random() < [0.6, 0.6, 0.8][level]:
        checkpoint_every(harness, rng.choice([0.1, 0.25, 0.5]))
        checkpoint_at_the_final_model(harness)
        harness.server_crashes = schedule_server_crashes(
            harness, rng, rng.choice([[1, 2, 3], [1, 2, 3], [2, 3, 4]][level]),
            [1.5, 1.5, 2.5][level])
    harness.run(until=600)
    _let_the_server_give_up(harness)
    return harness


def random_membership_run(spec, seed, final_model=False):
    """Build and run one case of the membership sweep; return the harness, run to its end."""
    rng = random.Random(seed * 7919 + 13)
    n, iters = rng.choice([3, 4, 5]), rng.choice([10, 12, 16])
    p, absence = rng.choice([0.0, 0.05, 0.1]), rng.choice([0.5, 1.0, 2.0])
    faults = random_faults(seed, p_drop=p, p_dup=p, p_late=p) if p else None
    outages = []
    for _ in range(rng.choice([0, 1, 2, 3])):
        t0 = rng.uniform(0.1, 4.0)
        outages.append((rng.randrange(n), t0, t0 + rng.uniform(0.5, 6.0)))

    def fault(msg, src, dst, now):
        if any(w in (src, dst) and t0 <= now < t1 for w, t0, t1 in outages):
            return []
        return [0.0] if faults is None else faults(msg, src, dst, now)
    harness, _, _, _, _ = quadratic_fleet(
        spec, n=n, iters=iters, dtype=torch.float64, seed=seed, save_states=True,
        absence_timeout_s=absence, bandwidths=(1e6, 0.5e6, 2e6, 0.3e6, 0.8e6),
        compute=(0.05, 0.07, 0.11, 0.06, 0.09), fault=fault, final_model=final_model)
    harness.worker_crashes = schedule_worker_crashes(harness, rng, rng.choice([2, 4, 8]), 4.0,
                                                     (0.02, 4.0))
    harness.server_crashes = []
    if rng.random() < 0.6:
        checkpoint_every(harness, rng.choice([0.1, 0.25, 0.5]))
        checkpoint_before_stop_orders(harness)
        checkpoint_at_the_final_model(harness)
        for t in sorted(rng.uniform(0.1, 6.0) for _ in range(rng.choice([1, 2, 3]))):
            harness.at(t, lambda down=rng.uniform(0.02, 0.3):
                       crash_server_once(harness, down, harness.server_crashes))
    harness.run(until=900)
    _let_the_server_give_up(harness)
    return harness


def _let_the_server_give_up(harness) -> None:
    """
    Let the final model's patience pass once every worker has stopped.

    The harness ends when the workers do; a server that still waits for the final model's
    ack of a robot that left (one it restored from a checkpoint cannot know) gives up after
    ``FINAL_PATIENCE_S`` of real time, which a fleet lets pass and a harness must.
    """
    server = harness.server
    if (SERVER not in harness.dead and not server.finished and all(harness.stopped)
            and getattr(server, '_owed_final', None)):
        harness._handle(SERVER, server.on_tick(harness.now + FINAL_PATIENCE_S + 1))


def conservation_problems(harness, server=None, workers=None) -> list:
    """
    List what a finished run broke of exactly-once and conservation (empty: nothing).

    Delivers what is still in flight first (faults off). Every worker must hold exactly the
    server's mirror of it, and the server's model must be the sum of every delivered push
    (the harness starts from zero) less what outage-aware RSP discarded of late pushes.
    """
    server = server or harness.server
    workers = workers if workers is not None else harness.workers
    problems = _residual_problems(workers)
    harness.fault = None
    harness.quiesce()
    for r, w in enumerate(workers):
        if not torch.allclose(w.w, server.worker_model(r), atol=_TOL, rtol=0):
            problems.append(f'worker {r} holds another model than the server holds for it')
    return problems + _residual_problems(workers) + _uplink_problems(server, workers)


def membership_problems(harness) -> list:
    """
    List what a finished membership run broke (empty: nothing).

    As ``conservation_problems``, except that a worker the server still owes a rejoin
    snapshot may hold its own model: one that rejoined after the fleet had finished is
    stopped without it (docs/faults.md).
    """
    server = harness.server
    problems = _residual_problems(harness.workers)
    harness.fault = None
    harness.quiesce()
    owed = {r for r in range(server.n) if server.unsynced[r] is not None}
    for r, w in enumerate(harness.workers):
        if r not in owed and not torch.allclose(w.w, server.worker_model(r), atol=_TOL,
                                                rtol=0):
            problems.append(f'worker {r} holds another model than the server holds for it')
    return problems + _uplink_problems(server, harness.workers)


def _residual_problems(workers) -> list:
    return [f'worker {r}: gradient mass not conserved (residual {w.conservation_residual():.3g})'
            for r, w in enumerate(workers) if w.conservation_residual() >= 1e-9]


def _uplink_problems(server, workers) -> list:
    applied = sum(w.delivered_total for w in workers) * (server.lr / server.n)
    if server.discarded is not None:
        applied = applied - server.discarded
    if torch.allclose(server.w_srv, -applied, atol=_TOL, rtol=0):
        return []
    return ['uplink not exactly-once: the server model is not the sum of the delivered pushes '
            f'(off by {float((server.w_srv + applied).abs().max()):.3g})']


def run_problems(kind: str, harness) -> list:
    """List every invariant a run of sweep ``kind`` broke, in words (empty: none)."""
    server = harness.server
    if not server.finished:
        return [f'did not finish: {harness.stats.error or "the server never ended the run"}']
    if kind == 'crash':
        problems = conservation_problems(harness)
    else:
        problems = membership_problems(harness)
    if server.duplicate_ranks:
        problems.append(f'ranks taken twice: {sorted(server.duplicate_ranks)}')
    for r, w in enumerate(harness.workers):
        if w.holds_final and not torch.equal(w.w, server.final_values):
            problems.append(f'worker {r} holds another final model than the server sent')
    # (one that never stops polls on until its node's limit; the harness ran to its end)
    problems += [f'worker {r} never stopped' for r, done in enumerate(harness.stopped)
                 if not done]
    return problems


def sweep_case(kind: str, spec: str, seed: int, final_model: bool = True) -> dict:
    """
    Run one case of a sweep and say how it went (a plain dict: it crosses processes).

    A run that raises counts as broken, with the exception in its problems: the engines
    must not raise on anything a fleet can do to them.
    """
    if kind not in KINDS:
        raise ValueError(f'unknown sweep {kind!r}; choose one of {", ".join(KINDS)}')
    case = {'kind': kind, 'system': spec, 'seed': seed, 'problems': [], 'workers': 0,
            'held_final_model': 0, 'final_model_missed': 0, 'worker_crashes': 0,
            'server_crashes': 0}
    try:
        if kind == 'crash':
            harness = random_crash_run(spec, seed, seed % 3, final_model=final_model)
        else:
            harness = random_membership_run(spec, seed, final_model=final_model)
        case['problems'] = run_problems(kind, harness)    # (delivers what is in flight)
        server = harness.server
        case.update(workers=server.n, held_final_model=sum(w.holds_final
                                                           for w in harness.workers),
                    final_model_missed=server.final_missed,
                    worker_crashes=len(harness.worker_crashes),
                    server_crashes=len(harness.server_crashes))
    except Exception as err:  # noqa: B902 (a raising engine is what the sweep looks for)
        case['problems'] = [f'raised {type(err).__name__}: {err}']
    return case
