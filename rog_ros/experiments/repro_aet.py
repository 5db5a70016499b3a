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
``rog reproduce aet``: AET-SGD against event-triggered SGD, small scale (spec A4/A5, Table 1).

The paper's MNIST setting with generated 28 x 28 digits in place of MNIST (the stroke glyphs
of :mod:`rog_ros.workloads.glyphs`, 60,000 training and 10,000 test images, normalised with the
set's mean and deviation as MNIST is): 5 peers on a ring, every node sampling mini-batches
uniformly with replacement from the whole training set (iid), the authors' LeNet
(139,784 parameters), K local iterations per node (default 3,000, about 7 minutes on two
loaded cores; the paper's Table 1 uses 10,000), eta0 = 0.01, beta = 0.01, delay checkpoint
d = 1, compute U(0.1, 1) ms per iteration and network U(0.1, 1.5) ms per message in virtual
time, through the same peer engines and driver as ``rog sim``. Reported per system:
communication rounds per node, the best node's and the mean node's final test accuracy, and
the round ratio to AET-SGD.

Event-triggered SGD runs twice (spec A2.7):

* as the paper's text states it: threshold ``alpha_t * v0`` with ``v0 = 0.2 N_p``, mini-batch
  10 (the reference code's default);
* as the authors' code ran it for the paper's tables: the code divides v0 by
  ``n * num_edge`` for MNIST (``--num-edge 2`` in its README, so ``v0 = 0.02 N_p`` on the 5-node
  ring) and the README runs it with mini-batch 1. This is ``etsgd:0.02`` with batch 1; at
  K = 10,000 it fires 1,155 rounds per node here against 1,085 in the paper's Table 1.

The headline (AET-SGD reaches event-triggered SGD's accuracy with >= 20x fewer rounds) is
judged against both, and the report says which holds. It also measures where the run sits
against the stability bound of AET-SGD's additive receive rule: the top Hessian eigenvalue L of
the final AET-SGD model, and ``(1 + deg) * s_R * eta_R * L`` for the last round (a quadratic
with that curvature would overshoot above 2), and runs the rule on quadratics.
"""

from __future__ import annotations

import math
import os
import random
import time

from rog_ros.atomic import atomic_write_text
from rog_ros.children import run_in_processes
from rog_ros.core.rows import RowLayout
from rog_ros.protocol.policies.aet import AetConfig, make_schedule, topology
from rog_ros.sim.runners.aet import build_peers, run_peers
from rog_ros.workloads.glyphs import _strokes, make_images
import torch
from torch import nn
from torch.nn import functional as F

N_PEERS = 5
K_DEFAULT = 3000
"""K per node of ``rog reproduce aet`` (6.5 minutes for one seed on two loaded cores)."""
K_QUICK = 1000
ETA0 = 0.01
BETA = 0.01
AET_BATCH = 16
"""AET-SGD's mini-batch (the reference code forces 16 for the linear schedule)."""
ET_SPEC = {'et_c': 0.2, 'batch': 10}
"""Event-triggered SGD as the paper's text states it (v0 = 0.2 N_p), code's default batch."""
ET_CODE = {'et_c': 0.2 / (N_PEERS * 2), 'batch': 1}
"""As the authors' code ran it: v0 / (n * num_edge) with num_edge 2, README batch 1."""
ROUND_RATIO = 20.0
ACCURACY_GAP = 0.01


class AetLeNet(nn.Sequential):
    """The AET-SGD authors' LeNet for 1 x 28 x 28 inputs: 139,784 parameters (spec A4)."""

    def __init__(self):
        super().__init__(
            nn.Conv2d(1, 20, 5, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(800, 128), nn.ReLU(), nn.Linear(128, 84), nn.ReLU(), nn.Linear(84, 10))


class Digits:
    """Generated 28 x 28 digits (uint8) normalised on the fly with the training set's moments."""

    def __init__(self, n_train: int = 60_000, n_test: int = 10_000, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        templates = _strokes(30, g).reshape(10, 3, 28, 28).amax(1)
        self.x, self.y = make_images(n_train, templates, g)
        self.x_test, self.y_test = make_images(n_test, templates, g)
        pixels = self.x.float() / 255.0
        self.mean, self.std = float(pixels.mean()), float(pixels.std())

    def inputs(self, x: torch.Tensor) -> torch.Tensor:
        return (x.float() / 255.0 - self.mean) / self.std

    def loss(self, model: nn.Module, idx: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy on training samples ``idx``."""
        return F.cross_entropy(model(self.inputs(self.x[idx])), self.y[idx])

    @torch.no_grad()
    def accuracy(self, model: nn.Module) -> float:
        """Test accuracy of ``model`` on the whole test set."""
        correct = 0
        for lo in range(0, len(self.y_test), 2500):
            out = model(self.inputs(self.x_test[lo:lo + 2500]))
            correct += int((out.argmax(-1) == self.y_test[lo:lo + 2500]).sum())
        return correct / len(self.y_test)


def top_hessian_eigenvalue(model: nn.Module, data: Digits, samples: int = 512,
                           iterations: int = 15, seed: int = 0) -> float:
    """Largest Hessian eigenvalue of the training loss at ``model`` (power iteration, HVPs)."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(len(data.y), (samples,), generator=g)
    params = list(model.parameters())
    grads = torch.autograd.grad(data.loss(model, idx), params, create_graph=True)
    v = [torch.randn(p.shape, generator=g) for p in params]
    lam = 0.0
    for _ in range(iterations):
        norm = math.sqrt(sum(float((t * t).sum()) for t in v))
        v = [t / norm for t in v]
        hv = torch.autograd.grad(grads, params, grad_outputs=v, retain_graph=True)
        lam = sum(float((a * b).sum()) for a, b in zip(hv, v))
        v = [t.detach() for t in hv]
    return lam


def run_system(data: Digits, system: str, opts: dict, batch: int, n: int = N_PEERS,
               k: int = K_DEFAULT, eta0: float = ETA0, beta: float = BETA, seed: int = 0,
               hessian: bool = False) -> dict:
    """
    Run one peer system on ``data`` with LeNet; returns rounds, accuracies, messages, times.

    ``opts`` are :class:`AetConfig` fields (``et_c``, ``d``, ...). With ``hessian`` the top
    Hessian eigenvalue of the best node's final model is measured too.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)                      # the reference code's seed
        first = AetLeNet()
    models = [first] + [AetLeNet() for _ in range(n - 1)]
    for m in models[1:]:
        m.load_state_dict(first.state_dict())
    layout = RowLayout([tuple(p.shape) for p in first.parameters()], whole_model=True)
    w0 = layout.flatten([p.detach() for p in first.parameters()])
    cfg = AetConfig(eta0=eta0, beta=beta, **opts)
    engines = build_peers(system, n, w0, k, cfg)
    for m, e in zip(models, engines):
        layout.bind(m, e.w)
    gens = [torch.Generator().manual_seed(seed * 1000 + r) for r in range(n)]

    def grad_fn(rank, w):
        model = models[rank]
        model.zero_grad(set_to_none=False)
        data.loss(model, torch.randint(len(data.y), (batch,), generator=gens[rank])).backward()
        return layout.flatten([p.grad for p in model.parameters()])

    rng_c, rng_n = random.Random(seed * 7 + 1), random.Random(seed * 7 + 2)
    start = time.monotonic()
    res = run_peers(engines, grad_fn, lambda r: rng_c.uniform(1e-4, 1e-3),
                    lambda s, d, nbytes, now: now + rng_n.uniform(1e-4, 1.5e-3))
    accs = [data.accuracy(m) for m in models]
    row = {'system': system, 'opts': dict(opts), 'batch': batch, 'eta0': eta0, 'k': k,
           'seed': seed, 'rounds': sum(e.sent for e in engines) / n,
           'best_accuracy': max(accs), 'mean_accuracy': sum(accs) / n,
           'min_accuracy': min(accs), 'messages': res.messages, 'duration_s': res.end_time,
           'params': layout.n_params}
    if hessian:
        best = models[accs.index(max(accs))]
        row['top_eigenvalue'] = top_hessian_eigenvalue(best, data)
        if system == 'aet':
            sch = make_schedule(system, k, cfg)
            last = int(sch.sizes.argmax())            # the last full round
            row['last_round'] = {'s': int(sch.sizes[last]), 'eta': float(sch.steps[last]),
                                 'deg': len(topology(cfg.topology, n)[0])}
    row['wall_s'] = time.monotonic() - start
    return row


_DATA = {}


def _job(args) -> dict:
    """Process-pool entry: one row (the data are generated once per process)."""
    key, spec = args
    torch.set_num_threads(1)
    if key not in _DATA:
        _DATA.clear()
        _DATA[key] = Digits(*key)
    return run_system(_DATA[key], **spec)


def label(row: dict) -> str:
    if row['system'] == 'aet':
        return f"AET-SGD (s = 10i, d = {row['opts'].get('d', 1)}, B = {row['batch']})"
    c = row['opts']['et_c']
    how = 'paper text' if c == ET_SPEC['et_c'] else "authors' code"
    return f'event-triggered, {how} (v0 = {c:g} N_p, B = {row["batch"]})'


def verdict(aet: dict, et: dict) -> dict:
    """Round ratio ET/AET, best-node accuracy gap AET - ET, and whether the headline holds."""
    ratio = et['rounds'] / aet['rounds']
    gap = aet['best_accuracy'] - et['best_accuracy']
    return {'ratio': ratio, 'gap': gap,
            'holds': bool(ratio >= ROUND_RATIO and gap >= -ACCURACY_GAP)}


def quadratic_drift(eta0: float, top: str, curvature: float = 1.0, k: int = 6000,
                    n: int = N_PEERS, seed: int = 0) -> dict:
    """
    AET-SGD on ``f(w) = curvature * |w|^2 / 2`` (6 dimensions, gradient noise 0.1, w0 = 1).

    Returns the distance of the mean model from the optimum, the spread of the node models and
    the largest ``(1 + deg) * s_r * eta_r * curvature`` of the schedule.
    """
    g = torch.Generator().manual_seed(seed)
    cfg = AetConfig(eta0=eta0, topology=top)
    peers = build_peers('aet', n, torch.ones(6, dtype=torch.float64), k, cfg)

    def grad(rank, w):
        return curvature * w + 0.1 * torch.randn(6, generator=g, dtype=torch.float64)

    run_peers(peers, grad, lambda r: 1e-3, lambda s, d, nbytes, now: now + 5e-4)
    w = torch.stack([p.w for p in peers])
    sch = peers[0].schedule
    deg = len(peers[0].neighbours)
    return {'top': top, 'eta0': eta0, 'mean_error': float(w.mean(0).norm()),
            'spread': float((w - w.mean(0)).norm()),
            'bound': float(((1 + deg) * sch.sizes * sch.steps * curvature).max())}


QUADRATICS = [(0.01, 'ring'), (0.002, 'ring'), (0.01, 'complete'), (0.002, 'complete')]


def reproduce_aet(out: str, quick: bool = False, seeds=(0,), k: int | None = None,
                  jobs: int | None = None, n_train: int | None = None) -> str:
    """Run the comparison, print it and write ``out/report.md``; returns the report path."""
    os.makedirs(out, exist_ok=True)
    k = k or (K_QUICK if quick else K_DEFAULT)
    data_key = (n_train or (6000 if quick else 60_000), 10_000, 0)
    specs = _specs(seeds, k)
    jobs = jobs or min(2, os.cpu_count() or 1)
    start = time.monotonic()
    rows = _run_specs(specs, data_key, jobs)
    wall = time.monotonic() - start
    avg = _averages(rows)
    v_spec, v_code = verdict(avg['aet'], avg['spec']), verdict(avg['aet'], avg['code'])
    lines = ['# rog reproduce aet', '',
             f'AET-SGD vs event-triggered SGD: {N_PEERS}-node ring, K = {k} local iterations per '
             f'node, eta0 = {ETA0:g}, beta = {BETA:g}, d = 1, iid sampling from the whole '
             f'training set; generated 28 x 28 digits ({data_key[0]} training, '
             f'{data_key[1]} test images), LeNet with {rows[0]["params"]:,} parameters; seeds '
             f'{list(seeds)}; virtual time with compute U(0.1, 1) ms per iteration and network '
             f'U(0.1, 1.5) ms per message. Wall time {wall:.0f} s with {jobs} processes.', '']
    lines += _table_lines(rows) + _headline_lines(v_spec, v_code, avg, k)
    lines += _stability_lines(rows) + _quadratic_lines()
    path = os.path.join(out, 'report.md')
    atomic_write_text(path, '\n'.join(lines))
    print(f"  vs paper-text ET: {v_spec['ratio']:.1f}x, {v_spec['gap']:+.4f}: "
          f"{_HOLDS[v_spec['holds']]}; vs authors'-code ET: {v_code['ratio']:.1f}x, "
          f"{v_code['gap']:+.4f}: {_HOLDS[v_code['holds']]} ({wall:.0f} s)")
    return path


_HOLDS = {True: 'holds', False: 'does not hold'}
"""How the report words a verdict on the headline."""


def _specs(seeds, k: int) -> list:
    """Return the runs of each seed: AET-SGD, event-triggered SGD as the text and the code."""
    specs = []
    for seed in seeds:
        specs += [{'system': 'aet', 'opts': {'d': 1}, 'batch': AET_BATCH, 'k': k, 'seed': seed,
                   'hessian': seed == seeds[0]},
                  {'system': 'etsgd', 'opts': {'et_c': ET_SPEC['et_c']},
                   'batch': ET_SPEC['batch'], 'k': k, 'seed': seed},
                  {'system': 'etsgd', 'opts': {'et_c': ET_CODE['et_c']},
                   'batch': ET_CODE['batch'], 'k': k, 'seed': seed}]
    return specs


def _run_specs(specs: list, data_key: tuple, jobs: int) -> list:
    """Run ``specs`` (in ``jobs`` processes), label and print each; their rows, in order."""
    if jobs > 1:
        done = dict(run_in_processes(_job, [((data_key, s),) for s in specs], jobs))
        rows = [done[i] for i in range(len(specs))]
    else:
        rows = [_job((data_key, s)) for s in specs]
    for r in rows:
        r['label'] = label(r)
        print(f"  {r['label']:<50} seed {r['seed']}: {r['rounds']:7.1f} rounds, best accuracy "
              f"{r['best_accuracy']:.4f}, mean {r['mean_accuracy']:.4f} ({r['wall_s']:.0f} s)",
              flush=True)
    return rows


def _averages(rows: list) -> dict:
    """Return the means over seeds of AET-SGD (aet) and event-triggered SGD (spec, code)."""
    def mean(system, c, key):
        sel = [r[key] for r in rows if r['system'] == system
               and (c is None or r['opts'].get('et_c') == c)]
        return sum(sel) / len(sel)

    return {name: {key: mean(s, c, key) for key in ('rounds', 'best_accuracy', 'mean_accuracy')}
            for name, s, c in (('aet', 'aet', None), ('spec', 'etsgd', ET_SPEC['et_c']),
                               ('code', 'etsgd', ET_CODE['et_c']))}


def _table_lines(rows: list) -> list:
    """Return the table of every run, with its rounds against its seed's AET-SGD run."""
    lines = ['| system | eta0 | seed | rounds per node | best-node acc. | mean-node acc. | '
             'rounds / AET-SGD rounds |', '|---|---|---|---|---|---|---|']
    for r in rows:
        aet_rounds = [a['rounds'] for a in rows if a['system'] == 'aet'
                      and a['seed'] == r['seed']][0]
        lines.append(f"| {r['label']} | {r['eta0']:g} | {r['seed']} | {r['rounds']:.1f} | "
                     f"{r['best_accuracy']:.4f} | {r['mean_accuracy']:.4f} | "
                     f"{r['rounds'] / aet_rounds:.1f}x |")
    return lines


def _headline_lines(v_spec: dict, v_code: dict, avg: dict, k: int) -> list:
    """Return the verdicts on the headline, against both event-triggered SGDs, as lines."""
    lines = ['', f'Headline (>= {ROUND_RATIO:g}x fewer rounds, best-node accuracy within '
             f'{ACCURACY_GAP:g}):', '',
             f"* against event-triggered SGD as the paper's text states it (v0 = 0.2 N_p): "
             f"{v_spec['ratio']:.1f}x fewer rounds, accuracy difference {v_spec['gap']:+.4f}: "
             f"**{_HOLDS[v_spec['holds']]}**;",
             f"* against event-triggered SGD as the authors' code ran it for the paper's "
             f"tables (v0 = 0.2 N_p / (n * num_edge) = {ET_CODE['et_c']:g} N_p, mini-batch 1): "
             f"{v_code['ratio']:.1f}x fewer rounds, accuracy difference {v_code['gap']:+.4f}: "
             f"**{_HOLDS[v_code['holds']]}**.", '',
             "The paper's round counts for event-triggered SGD (Table 1: 1,085 at K = 10,000; "
             'Table 2: 4,980 at K = 60,000) come from the second configuration; with the '
             'threshold its text states, event-triggered SGD fires '
             f"{avg['code']['rounds'] / avg['spec']['rounds']:.1f}x less often here and the "
             'ratio stays small.', '']
    if k < K_DEFAULT:
        lines += [f'K = {k} is a smoke run (``--quick``: K = {K_QUICK}, 6,000 training images, '
                  "under 3 minutes); at K = 1,000 the round ratio against the authors' "
                  'threshold was 17.9x. The reproduction is the default K = '
                  f'{K_DEFAULT:,}.', '']
    return lines


def _stability_lines(rows: list) -> list:
    """Return where the AET-SGD run sits against the receive rule's bound (none without L)."""
    aet_row = [r for r in rows if r.get('top_eigenvalue') is not None]
    if not (aet_row and aet_row[0].get('last_round')):
        return []
    r = aet_row[0]
    lr = r['last_round']
    lam = r['top_eigenvalue']
    return ["## Where the run sits against the receive rule's stability bound", '',
            f"Top Hessian eigenvalue of the best AET-SGD node's final loss: L = {lam:.3g}. "
            f"Last full round: s = {lr['s']}, eta = {lr['eta']:.4g}, so "
            f"(1 + deg) * s * eta * L = {(1 + lr['deg']) * lr['s'] * lr['eta'] * lam:.3g} "
            '(a quadratic with this curvature overshoots above 2), but eta * L = '
            f"{lr['eta'] * lam:.3g} per local step: a neighbour's sum that kicks a node "
            'along the top eigenvector decays by (1 - eta L) per local step, within about '
            f"{1 / max(lr['eta'] * lam, 1e-12):.0f} of the node's own steps, far fewer "
            'than s, so the overshoot shows as node-to-node fluctuation (mean vs best node '
            'accuracy), not as divergence.', '']


def _quadratic_lines() -> list:
    """Run the sum rule on the ``QUADRATICS`` and print them; their section of the report."""
    lines = ['## The sum rule on a quadratic', '',
             f'{N_PEERS} peers, f(w) = |w|^2/2 in 6 dimensions (L = 1), gradient noise 0.1, '
             'K = 6000, w0 = 1: distance of the mean model from the optimum, spread of the '
             'node models, and the largest (1 + deg) * s_r * eta_r * L of the schedule.', '',
             '| graph | eta0 | mean error | spread | max (1+deg) s eta L |',
             '|---|---|---|---|---|']
    for eta0, top in QUADRATICS:
        q = quadratic_drift(eta0, top)
        lines.append(f"| {top} | {eta0:g} | {q['mean_error']:.3g} | {q['spread']:.3g} | "
                     f"{q['bound']:.2f} |")
        print(f"  quadratic {top:<8} eta0 {eta0:g}: mean error {q['mean_error']:.3g}, spread "
              f"{q['spread']:.3g}, bound {q['bound']:.2f}")
    return lines + ['', 'On the complete graph every node applies the same set of updates, so '
                    'the models agree, and the common mode converges while (1 + deg) s eta L '
                    '< 2 and overshoots above. On the 5-node ring the disagreement mode with '
                    'eigenvalue 1 - 2 cos(36 deg) = -0.618 of I + A grows by about '
                    'exp(0.618 L sum_t eta_t), slowly for small steps.', '']
