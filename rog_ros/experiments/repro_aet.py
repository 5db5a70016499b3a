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
``rog reproduce aet``: AET-SGD against event-triggered SGD and local SGD, small scale.

The paper's setting (specs/aetsgd_fleet.md A4/A5, Table 1/2 trend) on a generated
MNIST stand-in (:mod:`rog_ros.experiments.synthetic`): 5 peers on a ring, iid sampling from
the whole training set, mini-batch 16, K local iterations per node, the same diminishing step
``eta0/(1+beta*sqrt(t))`` for every system, delay checkpoint d = 1, compute U(0.1, 1) ms per
iteration and network U(0.1, 1.5) ms per message, all in virtual time through the same peer
engines and driver as ``rog sim``. Reported: communication rounds per node, the best and the
mean node accuracy, messages and virtual duration. Headline: AET-SGD reaches the accuracy of
event-triggered SGD (v0 = 0.2 N_p) with >= 20x fewer communication rounds.
"""

from __future__ import annotations

import os
import random
import time

from rog_ros.core.rows import RowLayout
from rog_ros.experiments.synthetic import make_task
from rog_ros.protocol.policies.aet import AetConfig
from rog_ros.sim.runners.aet import build_peers, run_peers
import torch

SYSTEMS = [('aet', {}), ('etsgd', {'et_c': 0.2}), ('localsgd', {'local_steps': 10})]
ETA0 = 0.002
"""Step of the headline runs (the paper's is 0.01; the sensitivity rows run that too). Small
steps slow the drift described in the report."""
SENSITIVITY = [('aet', {}, 0.01), ('etsgd', {'et_c': 0.2}, 0.01)]


def label(system: str, opts: dict) -> str:
    if system == 'etsgd':
        return f"etsgd (v0={opts['et_c']:g} N_p)"
    if system == 'localsgd':
        return f"localsgd (s={opts['local_steps']})"
    return 'aet (s=10i, d=1)'


def run_system(task, system: str, opts: dict, n: int = 5, k: int = 3000, batch: int = 16,
               eta0: float = 0.05, beta: float = 0.01, seed: int = 0) -> dict:
    """Run one peer system on ``task``; returns rounds, accuracies, messages, duration."""
    models = [task.make_model(seed) for _ in range(n)]
    layout = RowLayout([tuple(p.shape) for p in models[0].parameters()], whole_model=True)
    w0 = layout.flatten([p.detach() for p in models[0].parameters()])
    cfg = AetConfig(eta0=eta0, beta=beta, **opts)
    engines = build_peers(system, n, w0, k, cfg)
    for m, e in zip(models, engines):
        layout.bind(m, e.w)
    gens = [torch.Generator().manual_seed(seed * 1000 + r) for r in range(n)]

    def grad_fn(rank, w):
        model = models[rank]
        model.zero_grad(set_to_none=False)
        idx = torch.randint(len(task.y), (batch,), generator=gens[rank])
        task.loss(model, idx).backward()
        return layout.flatten([p.grad for p in model.parameters()])

    rng_c, rng_n = random.Random(seed * 7 + 1), random.Random(seed * 7 + 2)
    start = time.time()
    res = run_peers(engines, grad_fn, lambda r: rng_c.uniform(1e-4, 1e-3),
                    lambda s, d, nbytes, now: now + rng_n.uniform(1e-4, 1.5e-3))
    accs = [task.accuracy(m) for m in models]
    return {'system': label(system, opts), 'rounds': sum(e.sent for e in engines) / n,
            'best_accuracy': max(accs), 'mean_accuracy': sum(accs) / n,
            'messages': res.messages, 'mbytes': res.bytes / 1e6,
            'duration_s': res.end_time, 'wall_s': time.time() - start,
            'params': layout.n_params}


def quadratic_drift(system: str, opts: dict, eta0: float, k: int = 6000, n: int = 5,
                    seed: int = 0) -> dict:
    """
    Run peers on ``f(w) = |w|^2 / 2`` with gradient noise 0.1 (the sum rule's stability).

    Returns the distance of the mean model from the optimum and the spread of the node models
    after k iterations.
    """
    g = torch.Generator().manual_seed(seed)
    peers = build_peers(system, n, torch.ones(6, dtype=torch.float64), k,
                        AetConfig(eta0=eta0, **opts))
    run_peers(peers, lambda r, w: w + 0.1 * torch.randn(6, generator=g, dtype=torch.float64),
              lambda r: 1e-3, lambda s, d, nbytes, now: now + 5e-4)
    w = torch.stack([p.w for p in peers])
    return {'system': label(system, opts) + (' complete graph' if 'topology' in opts else ''),
            'eta0': eta0, 'mean_error': float(w.mean(0).norm()),
            'spread': float((w - w.mean(0)).norm())}


DRIFT = [('aet', {}, 0.01), ('aet', {}, 0.002), ('aet', {'topology': 'complete'}, 0.01),
         ('localsgd', {'local_steps': 10}, 0.01), ('etsgd', {'et_c': 0.2}, 0.01)]


def reproduce_aet(out: str, quick: bool = False, seeds=(0,), k: int | None = None) -> str:
    """Run the comparison, print it and write ``out/report.md``; returns the report path."""
    os.makedirs(out, exist_ok=True)
    k = k or (3000 if quick else 10_000)
    task = make_task(noise=2.0)
    rows = []
    runs = [(seed, s, o, ETA0) for seed in seeds for s, o in SYSTEMS]
    if not quick:
        runs += [(seeds[0], s, o, eta) for s, o, eta in SENSITIVITY]
    for seed, system, opts, eta0 in runs:
        row = run_system(task, system, opts, k=k, seed=seed, eta0=eta0)
        row.update(seed=seed, eta0=eta0)
        rows.append(row)
        print(f"  {row['system']:<22} eta0 {eta0:g} seed {seed}: {row['rounds']:7.1f} rounds, "
              f"best accuracy {row['best_accuracy']:.4f}, mean {row['mean_accuracy']:.4f} "
              f"({row['wall_s']:.1f} s)", flush=True)
    aet = [r for r in rows if r['system'].startswith('aet') and r['eta0'] == ETA0]
    et = [r for r in rows if r['system'] == 'etsgd (v0=0.2 N_p)' and r['eta0'] == ETA0]
    mean = (lambda rs, key: sum(r[key] for r in rs) / len(rs))
    reduction = mean(et, 'rounds') / mean(aet, 'rounds')
    gap = mean(aet, 'best_accuracy') - mean(et, 'best_accuracy')
    holds = reduction >= 20 and gap >= -0.01
    lines = ['# rog reproduce aet', '',
             f'AET-SGD vs event-triggered SGD and local SGD: 5-node ring, K = {k} iterations '
             f'per node, mini-batch 16, beta = 0.01, d = 1, iid sampling; a '
             f'generated 10-class task ({task.features} features, MLP with '
             f"{rows[0]['params']} parameters); seeds {list(seeds)}; virtual time with "
             'compute U(0.1, 1) ms and network U(0.1, 1.5) ms.', '',
             '| system | eta0 | seed | rounds/node | best node acc. | mean node acc. | '
             'messages | MB sent | duration (virtual s) |',
             '|---|---|---|---|---|---|---|---|---|']
    for r in rows:
        lines.append(f"| {r['system']} | {r['eta0']:g} | {r['seed']} | {r['rounds']:.1f} | "
                     f"{r['best_accuracy']:.4f} | {r['mean_accuracy']:.4f} | {r['messages']} | "
                     f"{r['mbytes']:.2f} | {r['duration_s']:.2f} |")
    lines += ['', f'Round reduction of AET-SGD over event-triggered SGD (v0 = 0.2 N_p): '
              f'**{reduction:.1f}x**; best-node accuracy difference {gap:+.4f} '
              f'(paper, Table 2: 44-120x at equal accuracy).', '',
              f'Headline (>= 20x fewer rounds, accuracy within 0.01): '
              f"**{'holds' if holds else 'does not hold'}** at eta0 = {ETA0:g}.", '',
              "Why AET-SGD and local SGD lag here: a receiver *adds* a neighbour's round "
              'gradient sum to its own progress and nothing ever averages the models. '
              'Linearised around an optimum with Hessian H, node errors evolve as '
              'e <- (I - eta (I + A) x H) e with A the adjacency matrix; on the 5-node ring '
              'I + A has the eigenvalue 1 - 2 cos(36 deg) = -0.618, so the disagreement between '
              'nodes grows instead of shrinking (best and mean node accuracy drift apart), '
              'the faster the larger eta0 and the longer the rounds. The event-triggered '
              'baseline averages neighbour models (consensus term) and stays together. The '
              'paper reports equal accuracy on MNIST with K = 60,000; this small task does not '
              'reproduce it.', '']
    lines += ['## The sum rule on a quadratic', '',
              '5 peers, f(w) = |w|^2/2 in 6 dimensions (curvature 1), gradient noise 0.1, '
              'K = 6000, w0 = 1: |mean model - optimum| and the spread of the node models.', '',
              '| system | eta0 | mean error | spread |', '|---|---|---|---|']
    for system, opts, eta0 in DRIFT:
        r = quadratic_drift(system, opts, eta0)
        lines.append(f"| {r['system']} | {eta0:g} | {r['mean_error']:.3g} | {r['spread']:.3g} |")
        print(f"  quadratic {r['system']:<34} eta0 {eta0:g}: mean error {r['mean_error']:.3g}, "
              f"spread {r['spread']:.3g}")
    lines += ['', 'On the ring the disagreement mode grows (eigenvalue -0.618 of I + A); on the '
              "complete graph every node adds four neighbours' whole-round displacements, so "
              'the common mode overshoots once s * eta0 is large. Event-triggered SGD averages '
              'and converges.', '']
    path = os.path.join(out, 'report.md')
    with open(path, 'w') as f:
        f.write('\n'.join(lines))
    print(f'  reduction {reduction:.1f}x, accuracy difference {gap:+.4f}: '
          f"{'holds' if holds else 'does not hold'}")
    return path
