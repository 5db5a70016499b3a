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
Simulation runner of FLEET's AdaSGD and its asynchronous baselines on the shared harness.

``adasgd``, ``dynsgd`` and ``fedavg-async`` (SSGD is ``bsp``) run as one
:class:`~rog_ros.protocol.policies.fleet.FleetServerEngine` and N
:class:`~rog_ros.protocol.policies.fleet.FleetWorkerEngine` in the same
:class:`~rog_ros.sim.harness.Harness` as ``simulate`` uses, over the same per-robot
trace-driven ``DuplexLink`` stations, workloads and ``RunRecorder``. Each worker loops
request -> model + mini-batch size -> compute -> gradient (with the batch's label counts), so
staleness arises from the real compute and transfer times. The server stops after
``iterations x workers`` model updates (K = 1), the same number of gradients as the
synchronous systems apply.

The names take no argument (``dynsgd:2`` is refused). Defaults and options
(``SimConfig.policy_overrides``, or ``#field=value`` tags of the spec such as
``adasgd#q_size=10``, keys of :class:`~rog_ros.protocol.policies.fleet.AdaSgdConfig`; explicit
overrides win): the learning rate defaults to the
workload's (``SimConfig.lr`` overrides); the mini-batch size is the workload's, because the
simulator's device profile has no device features for I-Prof to learn from (``rog reproduce
fleet`` exercises I-Prof on a simulated device fleet); the controller's thresholds start at 0,
the paper's starting point (``q_size``/``q_sim`` enable pruning).
"""

from __future__ import annotations

import dataclasses
import math

from rog_ros.core.rows import RowLayout
from rog_ros.metrics import RunRecorder
from rog_ros.protocol.policies.fleet import (AdaSgdConfig, AdaSgdServer, Controller,
                                             FleetServerEngine, FleetWorkerEngine,
                                             label_counts)
from rog_ros.sim import systems
from rog_ros.sim.runners._common import (
    field_kinds, final_eval, make_harness, parse_arg, with_tags, workload_of)
import torch

NAMES = {'adasgd': 'adasgd', 'dynsgd': 'dynsgd', 'fedavg-async': 'fedavg-async'}
TAG_KINDS = field_kinds(AdaSgdConfig, leave_out=('dampening',))
"""The options a ``#field=value`` tag sets, with their types (the name sets the dampening)."""


def classes_of(wl) -> int:
    """Return the number of classes of a workload's targets (one-hot width, or max index + 1)."""
    y = getattr(wl, '_eval_y', None)
    if y is None:                   # a workload without the built-in tensors: ask a batch
        y = next(wl.worker_batches(0, 1, 0))[1]
    return int(y.shape[-1]) if y.dim() > 1 else int(y.max()) + 1


def parse_system(spec: str, overrides: dict) -> tuple:
    """``'adasgd'`` (+ tags, overrides) -> (options, dampening); bad ones raise ValueError."""
    name, arg = parse_arg(spec)
    if arg:
        raise ValueError(f'{name} takes no argument, got {spec.split("#")[0]!r} (its options '
                         f'are tags, e.g. {name}#lr=0.01)')
    opts = with_tags(spec, overrides, TAG_KINDS)
    fields = {f.name for f in dataclasses.fields(AdaSgdConfig)} - {'dampening'}
    bad = sorted(set(opts) - fields)
    if bad:
        raise ValueError(f'{name}: unknown option(s) {bad}; known: {sorted(fields)}')
    return opts, NAMES[name]


def check_spec(spec: str) -> None:
    """Raise ValueError, in one line, if ``spec`` (argument, tags) cannot run."""
    opts, dampening = parse_system(spec, {})
    AdaSgdConfig(dampening=dampening, **opts)


def run(cfg, progress=None) -> RunRecorder:
    """``rog sim`` runner of adasgd / dynsgd / fedavg-async (see the module docstring)."""
    opts, dampening = parse_system(cfg.system, cfg.policy_overrides)
    wl, n, iterations = workload_of(cfg)
    opts.setdefault('lr', cfg.lr if cfg.lr is not None else wl.lr)
    acfg = AdaSgdConfig(dampening=dampening, **opts)
    classes = classes_of(wl)
    models = [wl.make_model() for _ in range(n)]
    layout = RowLayout([tuple(p.shape) for p in models[0].parameters()], whole_model=True)
    w0 = layout.flatten([p.detach() for p in models[0].parameters()])
    core = AdaSgdServer(w0, classes, acfg)
    server = FleetServerEngine(core, max_updates=iterations * n,
                               controller=Controller(acfg.q_size, acfg.q_sim,
                                                     acfg.sim_direction, acfg.history),
                               batch_size=wl.batch_size)
    parts = wl.partition(n)
    engines = []
    train_y = getattr(wl, '_train_y', None)
    for r in range(n):
        counts = None if train_y is None else label_counts(train_y[parts[r]], classes)
        engines.append(FleetWorkerEngine(r, w0, device_model='sim', data_counts=counts,
                                         data_size=len(parts[r]),
                                         retry_s=wl.compute_time_s))
    for m, e in zip(models, engines):
        layout.bind(m, e.w)
        m.train()
    batches = [wl.worker_batches(r, n, cfg.seed) for r in range(n)]
    compute = cfg.compute_time_s or wl.compute_time_s

    def grad_fn(rank, w, clock):
        model = models[rank]
        model.zero_grad(set_to_none=False)
        batch = next(batches[rank])
        wl.loss(model, batch).backward()
        grad = layout.flatten([p.grad if p.grad is not None else torch.zeros_like(p)
                               for p in model.parameters()])
        return grad, label_counts(batch[1], classes), compute

    eval_model = wl.make_model()
    eval_flat = torch.empty_like(w0)
    layout.bind(eval_model, eval_flat)

    def evaluate(max_samples):
        eval_flat.copy_(core.w)
        return wl.evaluate(eval_model, max_samples=max_samples)

    recorder = RunRecorder(system=cfg.label or cfg.system.split('#')[0], n_workers=n,
                           staleness=0, trace=cfg.trace, seed=cfg.seed,
                           workload=wl.users_code or wl.name,
                           target_accuracy=wl.target_accuracy)
    recorder.extra['data_fingerprint'] = wl.data_fingerprint()   # (compare reuse)
    harness = make_harness(cfg, server, engines, grad_fn, compute, recorder, evaluate,
                           iterations, progress)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        harness.run(until=cfg.time_budget_s or math.inf)
    final_eval(harness, cfg)
    taus = core.staleness or [0]
    recorder.extra.update({
        'params': layout.n_params, 'message_bytes': 4 * layout.n_params,
        'model_updates': core.t, 'mean_staleness': sum(taus) / len(taus),
        'max_staleness': max(taus),
        'mean_weight': sum(core.weights) / max(1, len(core.weights)),
        'server_rejects': server.rejects, 'lr': acfg.lr, 'duplex': cfg.duplex})
    return recorder


systems.register('adasgd', run, "FLEET's AdaSGD: asynchronous, exp(-beta*tau) dampening with "
                 'similarity boosting')
systems.register('dynsgd', run, 'DynSGD baseline: asynchronous, 1/(tau+1) dampening')
systems.register('fedavg-async', run, 'staleness-unaware asynchronous SGD (weight 1)')
