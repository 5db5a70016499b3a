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
"""FLEET: AdaSGD dampening and boosting, controller, I-Prof and MAUI (specs B6 invariants)."""

import math

import numpy as np
import pytest
from rog_ros.core.iprof import bound_from_slope, IProf, Maui, ols_fit, pa_update
from rog_ros.protocol.policies.fleet import (AdaSgdConfig, AdaSgdServer, beta_for,
                                             bhattacharyya, Controller, exp_dampening,
                                             inverse_dampening, label_counts)
from rog_ros.sim import systems
from rog_ros.sim.simulator import SimConfig, simulate
import torch


def test_beta_calibration_meets_dynsgd_at_half_threshold():
    beta = beta_for(12)
    assert beta == pytest.approx(0.324318, abs=1e-6)
    assert float(exp_dampening(6, beta)) == pytest.approx(0.142857, abs=1e-6)
    assert float(exp_dampening(0, beta)) == 1.0
    assert float(exp_dampening(12, beta)) == pytest.approx(0.02041, abs=1e-5)
    assert beta_for(24) == pytest.approx(0.21375, abs=1e-5)
    for thres in (2, 7.5, 24, 100):
        half = thres / 2
        assert float(exp_dampening(half, beta_for(thres))) == pytest.approx(
            float(inverse_dampening(half)), rel=1e-12)
    lam = exp_dampening(np.arange(50), beta)
    assert np.all(np.diff(lam) < 0)


def test_weight_bounds_and_similarity_boost():
    srv = AdaSgdServer(torch.zeros(3), 4, AdaSgdConfig(bootstrap=1))
    srv.staleness = [12] * 10                      # tau_thres = 12
    srv.global_counts[:] = [10, 10, 10, 10]
    same = srv.weight(6, [5, 5, 5, 5])
    assert same == pytest.approx(1 / 7)            # sim = 1: the weight is Lambda
    for counts in ([1, 2, 0, 0], [0, 0, 0, 9], [3, 1, 1, 0]):
        w = srv.weight(6, counts)
        assert 1 / 7 - 1e-12 <= w <= 1.0
    assert srv.weight(6, [0, 0, 0, 9]) == pytest.approx(min(1, (1 / 7) / 0.5))
    assert srv.weight(0, [0, 0, 0, 9]) == 1.0


def test_bhattacharyya_values():
    p = [1 / 3, 2 / 3, 0, 0]
    assert bhattacharyya(p, p) == pytest.approx(1.0)
    assert bhattacharyya([1, 0], [0, 1]) == 0.0
    assert bhattacharyya(p, [0.25] * 4) == pytest.approx(math.sqrt(1 / 12) + math.sqrt(2 / 12))
    assert bhattacharyya(p, [0.25] * 4) == pytest.approx(0.6969, abs=1e-4)
    assert bhattacharyya([3, 1, 0, 2], [1, 1, 1, 1]) == bhattacharyya([1, 1, 1, 1], [3, 1, 0, 2])
    with pytest.raises(ValueError):
        bhattacharyya([1, 2], [1, 2, 3])


def test_no_staleness_no_boost_is_plain_sgd_bitwise():
    torch.manual_seed(0)
    w0 = torch.randn(20)
    grads = [torch.randn(20) for _ in range(30)]
    srv = AdaSgdServer(w0, 4, AdaSgdConfig(lr=0.05, bootstrap=0))
    param = torch.nn.Parameter(w0.clone())
    opt = torch.optim.SGD([param], lr=0.05)
    for g in grads:
        srv.push(g, srv.t, [1, 1, 1, 1])           # tau = 0, identical labels: sim = 1
        param.grad = g.clone()
        opt.step()
    assert torch.equal(srv.w, param.detach())
    avg = AdaSgdServer(w0, 4, AdaSgdConfig(dampening='fedavg-async', lr=0.05))
    for g in grads:
        avg.push(g, avg.t)
    assert torch.equal(avg.w, srv.w)


def test_label_bookkeeping_and_staleness():
    srv = AdaSgdServer(torch.zeros(2), 3, AdaSgdConfig(k=2, lr=0.1))
    used = 0
    for i in range(10):
        counts = [i % 3, 1, 2]
        used += sum(counts)
        srv.push(torch.ones(2), max(0, srv.t - (i % 4)), counts)
    assert srv.t == 5 and srv.global_counts.sum() == used
    with pytest.raises(ValueError):
        srv.push(torch.ones(2), srv.t + 1)
    assert list(label_counts(torch.tensor([0, 2, 2, 1]), 3)) == [1, 1, 2]
    onehot = torch.tensor([[True, False], [False, True], [False, True]])
    assert list(label_counts(onehot, 2)) == [1, 2]


def test_bootstrap_uses_dynsgd_then_switches():
    srv = AdaSgdServer(torch.zeros(1), 2, AdaSgdConfig(bootstrap=5, similarity=False))
    assert srv.weight(3) == 0.25
    srv.staleness = [4, 4, 4, 4, 4]
    assert srv.weight(3) == pytest.approx(math.exp(-beta_for(4) * 3))


def test_percentile_pruning_rates():
    rng = np.random.default_rng(0)
    ctl = Controller(q_size=30.0)
    sizes = rng.normal(100, 33, 4000).clip(1).astype(int)
    admitted = [ctl.admit(int(s), 1.0) for s in sizes]
    assert 1 - np.mean(admitted[500:]) == pytest.approx(0.30, abs=0.03)
    ctl = Controller(q_sim=17.0)
    sims = rng.uniform(0.2, 1.0, 4000)
    dropped = [s for s in sims if not ctl.admit(100, float(s))]
    assert len(dropped) / len(sims) == pytest.approx(0.17, abs=0.03)
    assert np.mean(dropped) > np.mean(sims)        # the most similar go


def test_pa_step_lands_on_the_epsilon_band():
    rng = np.random.default_rng(1)
    for _ in range(50):
        theta, x = rng.normal(size=5), rng.normal(size=5)
        target = float(x @ theta + rng.normal() * 3)
        eps = 0.1
        new = pa_update(theta, x, target, eps)
        if abs(x @ theta - target) <= eps:
            assert np.array_equal(new, theta)
        else:
            assert abs(float(x @ new) - target) == pytest.approx(eps, abs=1e-12)
    inside = pa_update([1.0, 0.0], [1.0, 1.0], 1.05, 0.1)
    assert list(inside) == [1.0, 0.0]


def test_ols_cold_start_and_bound():
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 1, size=(40, 3))
    truth = np.array([0.5, -1.0, 2.0, 0.25])
    y = np.c_[x, np.ones(40)] @ truth
    assert np.allclose(ols_fit(np.c_[x, np.ones(40)], y), truth)
    assert bound_from_slope(3.0, 0.01, 10_000) == 300
    assert bound_from_slope(3.0, 10.0, 10_000) == 1
    prof = IProf(t_slo=3.0, eps_time=0.0)
    prof.fit_offline('time', x, y)
    assert prof.predict_alpha('time', x[0], 'any') == pytest.approx(y[0])
    # a device model twice as slow as the cold start predicts: PA moves it to the truth
    for _ in range(30):
        prof.update('time', x[3], 'slow', cost=2 * y[3] * 50, batch=50)
    assert prof.predict_alpha('time', x[3], 'slow') == pytest.approx(2 * y[3], rel=1e-6)
    with pytest.raises(ValueError):
        prof.update('time', x[0], 'slow', cost=1.0, batch=0)


def test_maui_global_line():
    m = Maui(slo=3.0)
    m.fit([10, 20, 40], [0.2 + 0.01 * n for n in (10, 20, 40)])
    assert m.predict_bound() == 280


def test_registered_and_run_in_simulator():
    assert {'adasgd', 'dynsgd', 'fedavg-async'} <= set(systems.names())
    res = {}
    for s in ('adasgd', 'dynsgd'):
        res[s] = simulate(SimConfig(workload='toy', system=s, workers=3, trace='indoors',
                                    iterations=30, evaluations=4)).summary()
    for sm in res.values():
        assert sm['model_updates'] == 90 and sm['final_accuracy'] > 0.5
        assert sm['bytes_up'] > 0 and sm['bytes_down'] > 0
    assert res['adasgd']['mean_weight'] >= res['dynsgd']['mean_weight']
    with pytest.raises(ValueError):
        simulate(SimConfig(workload='toy', system='adasgd', policy_overrides={'bogus': 1}))


def test_iprof_deviation_several_times_smaller_than_maui():
    from rog_ros.experiments.repro_fleet import run_iprof
    res = run_iprof(seed=0)
    assert res['tasks'] == 280
    assert res['ratio'] > 2.5
    errs = res['iprof_error_by_request']
    assert errs[-1] < errs[0] / 2                  # it learns each device model


def test_cli_reproduce_names():
    from rog_ros.cli import build_parser
    args = build_parser().parse_args(['reproduce', 'fleet', '--out', 'x'])
    assert args.what == 'fleet'
    assert build_parser().parse_args(['reproduce', '--out', 'x']).what == 'rog'


def _row(system, seed, updates, diverged=False, dist='D2'):
    return {'system': system, 'seed': seed, 'dist': dist, 'updates_to_target': updates,
            'diverged': diverged}


def test_adasgd_verdict_counts_misses_as_the_cap_and_checks_every_seed():
    from rog_ros.experiments.repro_fleet import adasgd_verdict
    rows = [_row('adasgd', 0, 800), _row('adasgd', 1, 900),
            _row('dynsgd', 0, 1200), _row('dynsgd', 1, None),
            _row('fedavg-async', 0, None, diverged=True), _row('fedavg-async', 1, 1000),
            _row('ssgd', 0, 200), _row('ssgd', 1, 240)]
    v = adasgd_verdict(rows, 'D2', 2000)
    assert (v['ada_reached'], v['dyn_reached']) == (2, 1)
    assert v['ada_mean'] == 850 and v['dyn_mean'] == 1600      # the miss counts as the cap
    assert v['ada_wins'] == 2 and v['faster'] and v['fed_bad'] == 2 and v['holds']
    rows[5] = _row('fedavg-async', 1, 600)                       # FedAvg ahead on one seed
    assert not adasgd_verdict(rows, 'D2', 2000)['holds']
    rows[5] = _row('fedavg-async', 1, None)
    rows[2] = _row('dynsgd', 0, 500)                             # DynSGD faster in the mean
    v = adasgd_verdict(rows, 'D2', 2000)
    assert v['dyn_mean'] == 1250 and v['ada_mean'] == 850 and v['faster']
    rows[3] = _row('dynsgd', 1, 600)
    v = adasgd_verdict(rows, 'D2', 2000)
    assert v['dyn_mean'] == 550 and not v['faster'] and not v['holds'] and v['ada_wins'] == 0


def test_fleet_cnn_on_glyphs_and_run_stops_at_target():
    from rog_ros.experiments.repro_fleet import glyph_task, MojoCnn, run_adasgd
    assert sum(p.numel() for p in MojoCnn().parameters()) == 21530
    task = glyph_task(train=600, test=200)
    assert task.x.shape == (600, 1, 28, 28)
    assert 0.0 <= float(task.x.min()) <= float(task.x.max()) <= 1.0
    res = run_adasgd(task, 'adasgd', 'D2', updates=60, users=10, target=0.0,
                     stop_at_target=True)
    assert res['updates_to_target'] == 20 and res['updates_run'] == 20
    res = run_adasgd(task, 'dynsgd', 'D2', updates=40, users=10, target=1.01)
    assert res['updates_to_target'] is None and res['updates_run'] == 40
