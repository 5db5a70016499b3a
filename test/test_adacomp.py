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
"""AdaComp, ASGD and Comp-ASGD: the invariants of specs/adacomp_gsp.md 001-6."""

from __future__ import annotations

import numpy as np
import pytest
from rog_ros.core.compress import topk
from rog_ros.protocol.actions import Send, Stopped
from rog_ros.protocol.messages import FLAG_END, KIND_GRAD, RowChunk, SERVER
from rog_ros.protocol.policies.adacomp import (
    AdaCompConfig, AdaCompServer, AdaCompWorker, heterogeneity_factors, staleness_lr)
from rog_ros.sim.simulator import SimConfig, simulate
from rog_ros.workloads.glyphs import AdaCompCNN
import torch

CNN_SIZES = [288, 32, 9216, 32, 200704, 128, 1280, 10]


def test_cnn_has_211690_parameters_and_per_tensor_k_totals_2117():
    sizes = [p.numel() for p in AdaCompCNN().parameters()]
    assert sizes == CNN_SIZES and sum(sizes) == 211690
    assert topk.per_tensor_k(sizes, 0.01).tolist() == [2, 1, 92, 1, 2007, 1, 12, 1]
    assert topk.per_tensor_k(sizes, 0.01).sum() == 2117
    assert topk.per_tensor_k(sizes, 0.1).sum() == 21166
    assert topk.per_tensor_k(sizes, 0.001).sum() == 215


def test_selection_keeps_exactly_k_largest_of_every_tensor():
    g = torch.randn(sum(CNN_SIZES), generator=torch.Generator().manual_seed(1))
    idx, vals = topk.select_per_tensor(g, CNN_SIZES, 0.01)
    assert idx.numel() == 2117 and torch.equal(vals, g[idx])
    offsets = topk.offsets_of(CNN_SIZES)
    for off, size, k in zip(offsets, CNN_SIZES, topk.per_tensor_k(CNN_SIZES, 0.01)):
        inside = (idx >= off) & (idx < off + size)
        assert int(inside.sum()) == k
        sent = torch.zeros(size, dtype=torch.bool)
        sent[idx[inside] - int(off)] = True
        seg = g[int(off):int(off) + size].abs()
        if k < size:
            assert seg[sent].min() >= seg[~sent].max()
    gi, gv = topk.select_global(g, topk.global_k(g.numel(), 0.01))
    assert gi.numel() == 2116 and g.abs()[gi].min() >= g.abs().kthvalue(g.numel() - 2116).values


def test_sparse_payload_roundtrip_and_bad_input_rejected():
    idx = torch.tensor([0, 5, 9])
    vals = torch.tensor([1.0, -2.0, 3.5])
    i2, v2 = topk.decode(topk.encode(idx, vals), 10)
    assert torch.equal(i2, idx) and torch.equal(v2, vals)
    for bad in (topk.encode(torch.tensor([10]), torch.tensor([1.0])),
                topk.encode(torch.tensor([1, 1]), torch.tensor([1.0, 2.0])),
                topk.encode(torch.tensor([1]), torch.tensor([float('nan')])), b'abc'):
        with pytest.raises(ValueError):
            topk.decode(bad, 10)


def test_learning_rate_rule():
    lr = staleness_lr(0.1, torch.tensor([0, 1, 2, 5]))
    assert lr.tolist() == pytest.approx([0.1, 0.1, 0.05, 0.02])


def _push(rank, j, idx, vals):
    return RowChunk(transfer_id=1, seq=0, sender=rank, receiver=SERVER, kind=KIND_GRAD,
                    clock=j, flags=FLAG_END, codec=topk.TOPK_CODEC_ID,
                    payload=topk.encode(idx, vals))


def _brute_sigma(history, j, i, idx):
    return [sum(1 for u in range(j, i) if k in history[u]) for k in idx]


def test_coordinate_staleness_equals_brute_force_eq3():
    rng = np.random.default_rng(3)
    n_params, n = 40, 5
    server = AdaCompServer(torch.zeros(n_params), n, AdaCompConfig(), max_updates=10_000)
    history = []
    for step in range(200):
        w = int(rng.integers(n))
        j = server.pulled[w]
        idx = torch.from_numpy(np.sort(rng.choice(n_params, size=int(rng.integers(1, 8)),
                                                  replace=False)))
        expected = _brute_sigma(history, j, server.i, idx.tolist())
        touch_before = server.touch.clone()
        got = (server.touch[idx] - server.touch_at_pull[w][idx]).tolist()
        assert got == expected
        if j == server.i:
            assert got == [0] * len(got)     # the [code] pitfall: i = j gives sigma = 0
        before = server.theta.clone()
        server.on_message(_push(w, j, idx, torch.ones(idx.numel())), 0.0)
        untouched = torch.ones(n_params, dtype=torch.bool)
        untouched[idx] = False
        assert torch.equal(server.theta[untouched], before[untouched])
        assert torch.equal(server.touch[untouched], touch_before[untouched])
        history.append(set(idx.tolist()))


def _run_engines(mode, c, n=3, updates=30, seed=0):
    """Drive a server and workers in a fixed random event order; return Theta after each."""
    shapes = [6, 4]
    torch.manual_seed(0)
    w0 = torch.randn(10)
    cfg = AdaCompConfig(mode=mode, c=c)
    server = AdaCompServer(w0, n, cfg, max_updates=updates)
    workers = [AdaCompWorker(r, w0, shapes, cfg, seed=seed) for r in range(n)]
    target = torch.linspace(-1, 1, 10)
    rng = np.random.default_rng(seed)
    trajectory = []
    outbox = {}
    for r, wk in enumerate(workers):
        outbox[r] = wk.on_compute_done(wk.w - target, 0.0)[0].msg
    while server.i < updates:
        r = int(rng.integers(n))
        acts = server.on_message(outbox[r], 0.0)
        trajectory.append(server.theta.clone())
        replies = [a.msg for a in acts if isinstance(a, Send)]
        workers[r].on_message(replies[0], 0.0)
        if server.i < updates:
            outbox[r] = workers[r].on_compute_done(workers[r].w - target, 0.0)[0].msg
    return trajectory


def test_adacomp_with_c1_equals_staleness_divided_asgd_bit_for_bit():
    ada = _run_engines('adacomp', 1.0)
    asgd = _run_engines('asgd', 1.0)
    assert len(ada) == len(asgd) == 30
    for a, b in zip(ada, asgd):
        assert torch.equal(a, b)
    comp = _run_engines('adacomp', 0.2)
    assert not torch.equal(comp[-1], asgd[-1])       # the test can tell the modes apart


def test_single_worker_is_plain_sgd():
    torch.manual_seed(0)
    w0 = torch.randn(10)
    target = torch.randn(10)
    cfg = AdaCompConfig(mode='adacomp', c=1.0, alpha=0.1)
    server = AdaCompServer(w0, 1, cfg, max_updates=20)
    worker = AdaCompWorker(0, w0, [10], cfg)
    ref = w0.clone()
    for _ in range(19):
        acts = server.on_message(worker.on_compute_done(worker.w - target, 0.0)[0].msg, 0.0)
        assert server.sigma_k_sum == 0
        ref -= torch.tensor(0.1, dtype=torch.float32) * (ref - target)
        worker.on_message(acts[-1].msg, 0.0)
        assert torch.equal(worker.w, ref)


def test_mean_staleness_follows_littles_law():
    # n workers, one outstanding computation each, pull right after push: E[i - j] = n - 1
    res = simulate(SimConfig(workload='toy', system='asgd', workers=6, trace='clean',
                             iterations=40, compute_time_s=0.05,
                             policy_overrides={'push_delay_mean_s': 0.05}))
    assert res.extra['mean_staleness'] == pytest.approx(5.0, abs=0.6)


def test_bytes_per_update_and_crashes():
    res = simulate(SimConfig(workload='toy', system='adacomp:0.1', workers=4, trace='clean',
                             iterations=10, compute_time_s=0.05))
    s = res.summary()
    # toy model: 16x4 weight + 4 bias -> k = 6 + 1 entries per update, 8 bytes each + header
    assert s['entries_per_update'] == 7
    assert s['ingress_bytes_per_update'] == 7 * 8 + 64
    assert s['updates'] == 40
    crash = AdaCompConfig(crash_p=0.004)
    w = AdaCompWorker(0, torch.zeros(4), [4], crash)
    stops = 0
    for k in range(250_00):
        w.stopped = False
        w.pending = (0.0, None)
        if any(isinstance(a, Stopped) for a in w.on_tick(0.0)):
            stops += 1
    assert stops == pytest.approx(25_000 * 0.004, rel=0.25)


def test_heterogeneity_classes():
    f = heterogeneity_factors(200)
    assert f.count(1.0) == 60 and f.count(10.0) == 80 and f.count(100.0) == 60
    share = np.array([60 * 100, 80 * 10, 60 * 1]) / (60 * 100 + 80 * 10 + 60)
    assert share.round(3).tolist() == [0.875, 0.117, 0.009]     # spec 001-2.8


def test_bad_push_changes_nothing():
    server = AdaCompServer(torch.zeros(10), 2, AdaCompConfig(), max_updates=10)
    before = server.theta.clone()
    acts = server.on_message(_push(0, 3, torch.tensor([1]), torch.ones(1)), 0.0)   # wrong j
    acts += server.on_message(_push(5, 0, torch.tensor([1]), torch.ones(1)), 0.0)  # no worker
    assert [a.name for a in acts] == ['reject', 'reject'] and server.rejects == 2
    assert torch.equal(server.theta, before) and server.i == 0


def test_reproduction_claims_use_the_mean_of_per_seed_best_accuracies():
    from rog_ros.experiments.reproduce_refs import adacomp_claims
    c = adacomp_claims([0.93, 0.95], [0.92, 0.955], [0.97, 0.98], 49.8)
    assert c['claim1'] and c['claim2'] and c['ada_seeds'] == 2 and c['comp_seeds'] == 1
    assert c['asgd'] == pytest.approx(0.94) and c['comp'] == pytest.approx(0.9375)
    assert not adacomp_claims([0.93, 0.95], [0.92, 0.96], [0.97, 0.98], 49.8)['claim2']  # tie
    c = adacomp_claims([0.93, 0.95], [0.92, 0.97], [0.97, 0.98], 49.8)
    assert not c['claim2']                         # Comp-ASGD ahead in the mean
    assert not adacomp_claims([0.93], [0.92], [0.97], 20.0)['claim1']   # too few bytes saved
    assert not adacomp_claims([0.93], [0.92], [0.90], 49.8)['claim1']
    with pytest.raises(ValueError):
        adacomp_claims([0.9], [], [0.9], 49.8)
