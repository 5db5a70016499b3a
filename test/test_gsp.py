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
"""GSP and GDS: the invariants of specs/adacomp_gsp.md 002-6."""

from __future__ import annotations

import numpy as np
import pytest
from rog_ros.core.compress import topk
from rog_ros.core.grouping import density_peaks
from rog_ros.protocol.actions import Send
from rog_ros.protocol.messages import RowChunk
from rog_ros.protocol.policies.gsp import (
    baseline, GdsController, group_densities, GspConfig, GspNode, GspServer, UploadDensity,
    warmup_densities)
from rog_ros.sim.simulator import SimConfig, simulate
from rog_ros.workloads.glyphs import LeNet5
import torch

SPEEDS = [1.00, 1.01, 0.99, 1.02, 2.0, 2.05, 1.95, 4.0, 4.1, 3.9, 4.05]


def _partition(labels):
    return sorted(sorted(np.flatnonzero(labels == g).tolist()) for g in set(labels.tolist()))


def test_spec_example_speeds_form_three_groups():
    g = density_peaks(SPEEDS, 0.1)
    assert g.optimal_p == 3 and len(g.centres) == 3
    assert _partition(g.labels) == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9, 10]]
    assert sum(len(m) for m in g.groups) == len(SPEEDS)          # sum k_p = N
    densest = int(np.lexsort((np.arange(11), SPEEDS, -g.rho))[0])
    assert densest in g.centres.tolist()
    for k in range(11):                      # non-centres share their nearest denser's group
        if k in g.centres.tolist():
            continue
        denser = [j for j in range(11) if (g.rho[j], -SPEEDS[j]) > (g.rho[k], -SPEEDS[k])]
        nearest = min(denser, key=lambda j: (abs(SPEEDS[j] - SPEEDS[k]), j))
        assert g.labels[k] == g.labels[nearest]


def test_grouping_is_permutation_invariant_and_degenerate_case_has_one_group():
    perm = np.random.default_rng(0).permutation(len(SPEEDS))
    g = density_peaks(np.asarray(SPEEDS)[perm], 0.1)
    back = np.empty_like(g.labels)
    back[perm] = g.labels
    assert _partition(back) == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9, 10]]
    assert density_peaks([1.0] * 5, 0.1).labels.tolist() == [0] * 5
    assert len(density_peaks(SPEEDS, 0.1, n_groups=2).centres) == 2
    assert len(density_peaks(SPEEDS, 0.1, n_groups=5).centres) == 5


def test_gds_residual_conserves_mass_and_selects_m():
    gen = torch.Generator().manual_seed(0)
    sparsifier = topk.ResidualTopK(1000)
    total_raw = torch.zeros(1000, dtype=torch.float64)
    total_up = torch.zeros(1000, dtype=torch.float64)
    for step in range(20):
        g = torch.randn(1000, generator=gen)
        r_old = sparsifier.residual.clone()
        idx, vals = sparsifier.step(g, 0.004)
        assert idx.numel() == topk.density_m(1000, 0.004) == 4
        up = torch.zeros(1000)
        up[idx] = vals
        assert torch.equal(up + sparsifier.residual, r_old + g)   # exact: entries are moved
        total_raw += g.double()
        total_up += up.double()
    assert torch.allclose(total_up + sparsifier.residual.double(), total_raw, atol=1e-5)
    dense = topk.ResidualTopK(50)
    idx, vals = dense.step(torch.ones(50), 1.0)
    assert idx.numel() == 50 and float(dense.residual.abs().sum()) == 0.0
    sampled = topk.ResidualTopK(100_000, sampled=True, seed=1)
    idx, _ = sampled.step(torch.randn(100_000, generator=gen), 0.01)
    assert 800 <= idx.numel() <= 1200


def test_controller_rules_warmup_and_ema():
    assert [warmup_densities(e)[0] for e in range(4)] == [0.25, 0.0625, 0.015625, 0.004]
    assert [warmup_densities(e)[1] for e in range(4)] == pytest.approx(
        [0.35, 0.1225, 0.042875, 0.015])
    times = [4.0, 2.0, 1.0, 3.9]
    a = group_densities(times, 0.004, 0.015, 'A')
    assert a[0] == 0.004 and all(0.004 <= d <= 0.015 for d in a)
    assert a == pytest.approx([0.004, 0.008, 0.015, 0.004 * 4 / 3.9])
    b = group_densities(times, 0.004, 0.015, 'B')
    assert b[0] == pytest.approx(0.004) and b[2] == pytest.approx(1 - 0.996 / 4)
    lit = group_densities(times, 0.004, 0.015, 'literal')
    assert lit[0] == 0.004 and lit[2] == pytest.approx(0.001)
    ctl = GdsController(2, beta=0.5)
    assert ctl.densities == [0.25, 0.25]
    ctl.end_epoch([2.0, 1.0])
    assert ctl.ema == [2.0, 1.0] and ctl.densities == [0.0625, 0.1225]
    ctl.end_epoch([4.0, 1.0])
    assert ctl.ema == [3.0, 1.0] and ctl.densities == [0.015625, 0.042875]
    ctl.end_epoch([3.0, 3.0])
    assert ctl.ema == [3.0, 2.0] and ctl.densities == pytest.approx([0.004, 0.006])


def test_gcr_with_constant_density():
    n = 100_000
    for d, expected in ((0.004, 125.0), (0.015, 33.3)):
        m = topk.density_m(n, d)
        assert 4 * n / (8 * m) == pytest.approx(expected, rel=0.01)


def test_lenet5_has_61706_parameters():
    assert sum(p.numel() for p in LeNet5().parameters()) == 61706


def _drive(cfg, n, pushes, order, lr=0.1):
    """Push gradients of 0.5|w - t_r|^2 in a fixed node order; return the server."""
    w0 = torch.zeros(6)
    server = GspServer(w0, n, cfg, lr=lr, momentum=0.0, max_pushes=pushes)
    nodes = [GspNode(r, w0, [6], cfg) for r in range(n)]
    targets = [torch.full((6,), float(r + 1)) for r in range(n)]
    ready = {r: True for r in range(n)}
    max_gap = 0
    for r in order:
        if not ready[r] or server.finished:
            continue
        push = nodes[r].on_compute_done(nodes[r].w - targets[r], 0.0)[0].msg
        ready[r] = False
        for a in server.on_message(push, 0.0):
            if isinstance(a, Send) and isinstance(a.msg, (RowChunk, UploadDensity)):
                nodes[a.dest].on_message(a.msg, 0.0)
                if isinstance(a.msg, RowChunk):
                    ready[a.dest] = True
        for grp in server.groups:
            c = list(grp.clocks.values())
            max_gap = max(max_gap, max(c) - min(c) - 1)   # the pusher may be 1 over, held
    return server, max_gap


def test_gsp_reduces_to_bsp_and_asp():
    n = 4
    order = [0, 1, 2, 3] * 5
    bsp, _ = _drive(baseline('bsp', n), n, 20, order)
    w = torch.zeros(6)
    mean_t = torch.full((6,), 2.5)
    for _ in range(5):
        w = w - 0.1 * ((w - mean_t) * 4 / 4)
    assert torch.allclose(bsp.omega, w, atol=1e-6)
    assert bsp.global_steps == 5
    order = np.random.default_rng(0).integers(n, size=200).tolist()
    asp, _ = _drive(baseline('asp', n), n, 40, order)
    w = torch.zeros(6)
    held = [torch.zeros(6) for _ in range(n)]
    for r in order[:40]:                     # ASP: apply on arrival, reply the latest model
        w = w - 0.1 * (held[r] - torch.full((6,), float(r + 1)))
        held[r] = w.clone()
    assert asp.global_steps == 40
    assert torch.allclose(asp.omega, w, atol=1e-6)


def test_ssp_bound_and_forward_count():
    cfg = GspConfig(assignment=(0, 0, 0, 1, 1), ssp_threshold=3)
    order = [0] * 30 + [1, 2] * 10 + [3, 4] * 10 + [0, 1, 2] * 10
    server, max_gap = _drive(cfg, 5, 60, order)
    assert max_gap <= 3
    for grp in server.groups:
        assert grp.forwards == grp.pushes // len(grp.members)


def test_gds_with_density_one_equals_gsp():
    order = np.random.default_rng(1).integers(4, size=80).tolist()
    a, _ = _drive(GspConfig(assignment=(0, 0, 1, 1)), 4, 40, order)
    w0 = torch.zeros(6)
    # density 1 at every node: the residual stays 0 and the trajectory is GSP's
    cfg1 = GspConfig(assignment=(0, 0, 1, 1), gds=True, beta=0.0)
    server = GspServer(w0, 4, cfg1, lr=0.1, momentum=0.0, max_pushes=40)
    server.controller.densities = [1.0, 1.0]
    server.controller.end_epoch = lambda times: [1.0, 1.0]
    nodes = [GspNode(r, w0, [6], cfg1) for r in range(4)]
    for nd in nodes:
        nd.density = 1.0
    targets = [torch.full((6,), float(r + 1)) for r in range(4)]
    ready = {r: True for r in range(4)}
    for r in order:
        if not ready[r] or server.finished:
            continue
        ready[r] = False
        for act in server.on_message(nodes[r].on_compute_done(nodes[r].w - targets[r], 0.0)[0]
                                     .msg, 0.0):
            if isinstance(act, Send) and isinstance(act.msg, RowChunk):
                nodes[act.dest].on_message(act.msg, 0.0)
                ready[act.dest] = True
        assert all(float(nd.residual.residual.abs().sum()) == 0.0 for nd in nodes)
    assert torch.allclose(server.omega, a.omega, atol=1e-6)


def test_simulated_gsp_groups_heterogeneous_workers_and_compresses():
    res = simulate(SimConfig(workload='toy', system='gsp+gds', workers=6, trace='clean',
                             iterations=60, compute_time_s=0.05,
                             policy_overrides={'speed_factors': [1, 1, 4], 'epoch_samples': 64}))
    s = res.summary()
    assert sorted(sorted(g) for g in s['groups']) == [[0, 1, 3, 4], [2, 5]]
    assert s['epochs'] >= 4 and s['final_densities'][1] == pytest.approx(0.004)
    assert s['gcr_after_warmup'] > 5 and s['server_rejects'] == 0


@pytest.mark.parametrize('system', ['gsp', 'adacomp:1'])
def test_divergence_ends_the_run_loudly(system):
    res = simulate(SimConfig(workload='toy', system=system, workers=3, trace='clean',
                             iterations=20, lr=1e38, policy_overrides=(
                                 {'alpha': 1e38} if system.startswith('ada') else {})))
    s = res.summary()
    assert s['diverged'] is True and s['iterations'] < 20
