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
Simulation runner of ``adacomp``, ``asgd`` and ``comp-asgd`` (engines: policies/adacomp.py).

System specs: ``adacomp`` (c = 0.01), ``adacomp:0.1`` (another c), ``comp-asgd[:c]``,
``asgd``. Options through ``SimConfig.policy_overrides``, or as ``#field=value`` tags of the
spec (``adacomp#alpha=0.05#heterogeneity=true``; explicit overrides win): ``alpha``
(default: the workload's lr / (1 - momentum), the momentum-free equivalent step; 0.1 for
MPCOL, as AdaComp's code),
``push_delay_mean_s`` (default 0), ``crash_p`` (default 0), ``heterogeneity`` (True: classes
30/40/30 % pushing at rates 100:10:1, via compute time and push delay), ``c``.

The budget ``I`` of updates at the server is the per-worker iteration budget times the number
of workers, so the mean iterations per worker match the other systems of a comparison.
"""

from __future__ import annotations

import math

from rog_ros.metrics import RunRecorder
from rog_ros.protocol.policies import adacomp
from rog_ros.protocol.policies.adacomp import (
    AdaCompConfig, AdaCompServer, AdaCompWorker, heterogeneity_factors)
from rog_ros.sim import systems
from rog_ros.sim.runners._common import (
    final_eval, make_harness, ModelBench, with_tags, workload_of)
import torch

TAG_KINDS = {'alpha': 'float', 'push_delay_mean_s': 'float', 'crash_p': 'float',
             'heterogeneity': 'bool', 'c': 'float'}
"""The options a ``#field=value`` tag sets (``adacomp.SPEC_OPTIONS``), with their types."""


def options(system: str, overrides: dict) -> dict:
    """Return a run's options: ``overrides`` over those the spec's tags set."""
    return with_tags(system, overrides, TAG_KINDS)


def config_for(system: str, overrides: dict, wl) -> AdaCompConfig:
    """Build the AdaCompConfig of a system spec plus overrides, from workload ``wl``'s step."""
    return adacomp.config_for(system, options(system, overrides), wl.lr, wl.momentum)


def check_spec(system: str) -> None:
    """Raise ValueError, in one line, if ``system`` (argument, tags) cannot run."""
    adacomp.config_for(system, options(system, {}), 0.01, 0.0)   # any positive step


def run(cfg, progress=None) -> RunRecorder:
    """Simulate one AdaComp-family run: the entry point of ``rog sim`` and ``rog compare``."""
    wl, n, iterations = workload_of(cfg)
    opts = options(cfg.system, cfg.policy_overrides)
    acfg = adacomp.config_for(cfg.system, opts, wl.lr, wl.momentum)
    torch.manual_seed(cfg.seed)
    bench = ModelBench(wl, n, cfg.seed)
    server = AdaCompServer(bench.w0, n, acfg, max_updates=iterations * n)
    factors = [1.0] * n if not opts.get('heterogeneity') else heterogeneity_factors(n)
    workers = [AdaCompWorker(r, bench.w0, bench.sizes, acfg, slowdown=factors[r],
                             seed=cfg.seed) for r in range(n)]
    compute = cfg.compute_time_s or wl.compute_time_s
    label = cfg.label or cfg.system
    recorder = RunRecorder(system=label, n_workers=n, staleness=0, trace=cfg.trace,
                           seed=cfg.seed,
                           workload=wl.users_code or wl.name, target_accuracy=wl.target_accuracy)
    recorder.extra['data_fingerprint'] = wl.data_fingerprint()   # (compare reuse)
    harness = make_harness(cfg, server, workers, lambda r, w, clock: bench.grad(r, w),
                           [compute * f for f in factors], recorder,
                           lambda max_samples: bench.evaluate(server.model(), max_samples),
                           iterations, progress)
    harness.run(until=cfg.time_budget_s or math.inf)
    server.diverged = server.diverged or any(w.diverged for w in workers)
    if (server.i < server.max_updates and not server.diverged and cfg.time_budget_s is None
            and not all(w.crashed for w in workers)):
        raise RuntimeError(f'{label}: the run stalled after {server.i} of '
                           f'{server.max_updates} updates (no event left)')
    final_eval(harness, cfg)
    recorder.extra.update(server.stats())
    recorder.extra.update({
        'params': int(bench.w0.numel()), 'mode': acfg.mode, 'c': acfg.c, 'alpha': acfg.alpha,
        'crashed_workers': sum(1 for w in workers if w.crashed),
        'dense_update_bytes': 4 * int(bench.w0.numel()),
        'duplex': cfg.duplex})
    return recorder


systems.register('adacomp', run, 'AdaComp: per-tensor top-c pushes, per-coordinate staleness '
                 'learning rate (adacomp:c, default c = 0.01)')
systems.register('comp-asgd', run, 'Comp-ASGD: global top-c pushes, alpha/staleness per update '
                 '(comp-asgd:c)')
systems.register('asgd', run, 'ASGD: dense asynchronous pushes, alpha/staleness per update')
