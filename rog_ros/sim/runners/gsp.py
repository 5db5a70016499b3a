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
Simulation runner of ``gsp``, ``gsp+gds`` and ``asp`` (engines: policies/gsp.py).

System specs: ``gsp`` and ``gsp+gds`` (``:T`` sets the SSP threshold inside groups, default 3),
``asp`` (no argument: every node is a group of its own, so there is no threshold, and its
summary's ``staleness`` is null); the dense BSP and SSP baselines of the GSP paper run on the
same engine as ``gsp`` with the override ``{'baseline': 'bsp'}`` or ``{'baseline': 'ssp'}``
(``rog reproduce gsp`` does this; plain ``bsp``/``ssp:S`` are Rog's engine with its
compression). Any field of :class:`~rog_ros.protocol.policies.gsp.GspConfig` can be
overridden, plus ``speed_factors`` (per-node compute-time multipliers, cycled over the nodes,
e.g. ``[1, 1.5, 2, 4]``). A field with a number, a boolean or a word can also be set by a
``#field=value`` tag of the spec (``gsp#dis_thr=0.5``, ``gsp#gds=true``, ``gsp#baseline=ssp``;
explicit overrides win).

Learning rate and momentum are the workload's (momentum at the global server, G5). The budget
is the per-worker iteration budget times the number of nodes, counted in pushes.
"""

from __future__ import annotations

from dataclasses import fields, replace
import math

from rog_ros.metrics import RunRecorder
from rog_ros.protocol.policies.gsp import baseline, GspConfig, GspNode, GspServer
from rog_ros.sim import systems
from rog_ros.sim.runners._common import (
    field_kinds, final_eval, make_harness, ModelBench, parse_arg, with_tags, workload_of)
import torch

_FIELDS = {f.name for f in fields(GspConfig)}
TAG_KINDS = {**field_kinds(GspConfig), 'baseline': 'str'}
"""The options a ``#field=value`` tag sets, with their types (not the tuple ``assignment``)."""


def is_asp(system: str, overrides: dict) -> bool:
    """Say whether a spec plus overrides runs ASP: every node its own group, no threshold."""
    chosen = with_tags(system, overrides, TAG_KINDS).get('baseline')
    return chosen == 'asp' or (not chosen and parse_arg(system)[0] == 'asp')


def config_for(system: str, overrides: dict, n: int) -> GspConfig:
    """Build the GspConfig of a spec ('gsp', 'gsp+gds:3', 'asp', tags) plus overrides."""
    name, arg = parse_arg(system)
    overrides = with_tags(system, overrides, TAG_KINDS)
    opts = {k: v for k, v in overrides.items() if k not in ('speed_factors', 'baseline')}
    unknown = sorted(set(opts) - _FIELDS)
    if unknown:
        raise ValueError(f'{name}: unknown options {unknown}; known: {sorted(_FIELDS)}')
    if name == 'asp' or overrides.get('baseline'):
        cfg = baseline(overrides.get('baseline') or 'asp', n)
    else:
        cfg = GspConfig(gds=name == 'gsp+gds')
    if arg and name == 'asp':
        raise ValueError(f'asp takes no argument, got {system.split("#")[0]!r} (every node is '
                         'a group of its own: there is no staleness threshold)')
    if arg:
        try:
            threshold = int(arg)
        except ValueError:
            raise ValueError(f'bad SSP threshold in {system!r}: {arg!r}') from None
        if threshold < 0:
            raise ValueError(f'the SSP threshold in {system!r} must be >= 0, got {threshold}')
        cfg = replace(cfg, ssp_threshold=threshold)
    if 'assignment' in opts and opts['assignment'] is not None:
        opts['assignment'] = tuple(int(a) for a in opts['assignment'])
    return replace(cfg, **opts)


def check_spec(system: str) -> None:
    """Raise ValueError, in one line, if ``system`` (argument, tags) cannot run."""
    config_for(system, {}, 1)


def run(cfg, progress=None) -> RunRecorder:
    """Simulate one GSP-family run: the entry point of ``rog sim`` and ``rog compare``."""
    wl, n, iterations = workload_of(cfg)
    overrides = dict(cfg.policy_overrides)
    gcfg = config_for(cfg.system, overrides, n)
    speed = [float(f) for f in overrides.get('speed_factors') or [1.0]]
    if any(not f > 0 for f in speed):
        raise ValueError('speed_factors must be positive')
    factors = [speed[r % len(speed)] for r in range(n)]
    torch.manual_seed(cfg.seed)
    bench = ModelBench(wl, n, cfg.seed)
    lr = cfg.lr if cfg.lr is not None else wl.lr
    momentum = cfg.momentum if cfg.momentum is not None else wl.momentum
    pool = sum(len(p) for p in wl.partition(n))
    server = GspServer(bench.w0, n, gcfg, lr=lr, momentum=momentum,
                       max_pushes=iterations * n, batch_size=wl.batch_size,
                       epoch_samples=pool)
    nodes = [GspNode(r, bench.w0, bench.sizes, gcfg, seed=cfg.seed) for r in range(n)]
    compute = cfg.compute_time_s or wl.compute_time_s
    label = cfg.label or cfg.system
    threshold = None if is_asp(cfg.system, overrides) else gcfg.ssp_threshold
    recorder = RunRecorder(system=label, n_workers=n, staleness=threshold,
                           trace=cfg.trace, seed=cfg.seed, workload=wl.users_code or wl.name,
                           target_accuracy=wl.target_accuracy)
    recorder.extra['data_fingerprint'] = wl.data_fingerprint()   # (compare reuse)
    harness = make_harness(cfg, server, nodes, lambda r, w, clock: bench.grad(r, w),
                           [compute * f for f in factors], recorder,
                           lambda max_samples: bench.evaluate(server.model(), max_samples),
                           iterations, progress)
    harness.run(until=cfg.time_budget_s or math.inf)
    server.diverged = server.diverged or any(nd.diverged for nd in nodes)
    if not server.finished and not server.diverged and cfg.time_budget_s is None:
        raise RuntimeError(f'{label}: the run stalled after {server.total_pushes} of '
                           f'{server.max_pushes} pushes (no event left)')
    final_eval(harness, cfg)
    recorder.extra.update(server.stats())
    recorder.extra.update({'params': int(bench.w0.numel()), 'gds': gcfg.gds,
                           'gds_rule': gcfg.gds_rule, 'lr': lr, 'momentum': momentum,
                           'speed_factors': factors, 'duplex': cfg.duplex})
    return recorder


systems.register('gsp', run, 'GSP: density-peak groups of similar speed, SSP (3) inside a '
                 'group, asynchronous global server (gsp:T for another threshold)')
systems.register('gsp+gds', run, 'GSP+GDS: GSP with residual top-k uploads at group-specific '
                 'densities (0.4-1.5 %)')
systems.register('asp', run, 'ASP: fully asynchronous dense parameter server (GSP engine)')
