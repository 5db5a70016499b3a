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
Simulation runner of the peer systems: ``aet`` (AET-SGD), ``etsgd`` and ``localsgd``.

:func:`run_peers` is the peer driver: a discrete-event loop in virtual time over sans-I/O peer
engines (:mod:`rog_ros.protocol.peer`), with compute events and message deliveries. It takes
the network as a function ``transmit(src, dst, nbytes, now) -> arrival``, so the same loop runs
on trace-driven Wi-Fi links (``rog sim``/``rog compare``) and on the paper's random delays
(``rog reproduce aet``).

Network model in ``rog sim``: each peer is one Wi-Fi station with its own bandwidth trace and a
half-duplex ``DuplexLink`` exactly as a worker in :func:`rog_ros.sim.simulator.simulate`
(one link per peer station, not per peer pair: robots reach each other through the access
point). A message from a to b is a unicast that occupies a's uplink and b's downlink; the
access point relays it pipelined, so it arrives when the later of the two finishes. A node
sends one unicast per neighbour.

Names on the command line: ``aet`` or ``aet:D`` (delay checkpoint D rounds, default 1),
``localsgd`` or ``localsgd:S`` (S local steps per round, default 10), ``etsgd`` or ``etsgd:C``
(threshold coefficient, v0 = C*N_p, default 0.2). Further knobs of
:class:`rog_ros.protocol.policies.aet.AetConfig` (a, b, eta0, beta, topology, ...) come
through ``SimConfig.policy_overrides``, or as ``#field=value`` tags of the spec
(``aet#topology=complete#eta0=0.05``; explicit overrides win); ``batch_size`` overrides the
workload's. The step ``eta0`` defaults to the workload's learning rate (MPCOL: 0.01, the
paper's value); updates are plain SGD (no momentum), as in the paper.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math

from rog_ros.core.rows import RowLayout
from rog_ros.metrics import RunRecorder
from rog_ros.net import links
from rog_ros.protocol.actions import Log, Send, StartCompute, Stopped
from rog_ros.protocol.peer import AetPeer, EtPeer
from rog_ros.protocol.policies.aet import AetConfig, make_schedule, topology
from rog_ros.sim import systems
from rog_ros.sim.runners._common import (
    field_kinds, parse_arg, refuse_workload_options, with_tags)
import torch

TAG_KINDS = {**field_kinds(AetConfig), 'batch_size': 'int'}
"""The options a ``#field=value`` tag sets, with their types."""


class PeerRun:
    """What :func:`run_peers` observed: per-node iterations, stalls, messages and the end."""

    def __init__(self, n: int):
        self.iterations = [0] * n
        self.stall_s = [0.0] * n
        self.messages = 0
        self.bytes = 0
        self.end_time = 0.0
        self.events = 0


def run_peers(engines, grad_fn, compute_s, transmit, recorder=None, eval_fn=None,
              eval_every_iterations=None, until=math.inf, on_event=None) -> PeerRun:
    """
    Drive peer engines in virtual time until every node stopped and every message arrived.

    Parameters
    ----------
    engines : list
        Peer engines (``start``, ``on_compute_done``, ``on_message``), index = rank.
    grad_fn : callable
        ``grad_fn(rank, w) -> flat gradient`` at the node's model ``w``.
    compute_s : callable
        ``compute_s(rank) -> seconds`` of the next local iteration.
    transmit : callable
        ``transmit(src, dst, nbytes, now) -> arrival time`` (reliable delivery).
    recorder : RunRecorder, optional
        Fed compute, stall/trigger logs and bytes (up = sent, down = received).
    eval_fn : callable, optional
        ``eval_fn(now, mean_iteration)``, called every ``eval_every_iterations``.
    eval_every_iterations : float, optional
        Evaluation period in mean local iterations per node.
    until : float
        Stop at this virtual time.
    on_event : callable, optional
        ``on_event(kind, rank, now)`` after each event (invariant checks in tests).

    """
    n = len(engines)
    run = PeerRun(n)
    queue: list = []
    seq = itertools.count()
    stopped = [False] * n
    now = 0.0
    next_eval = [0.0]

    def handle(rank, actions):
        for a in actions:
            if isinstance(a, StartCompute):
                heapq.heappush(queue, (now + compute_s(rank), next(seq), 'compute', rank, None))
            elif isinstance(a, Send):
                nbytes = a.msg.wire_size()
                arrival = transmit(rank, a.dest, nbytes, now)
                run.messages += 1
                run.bytes += nbytes
                if recorder is not None:
                    recorder.bytes_up += nbytes
                    recorder.transfer_s.append(arrival - now)
                heapq.heappush(queue, (arrival, next(seq), 'deliver', a.dest, a.msg))
            elif isinstance(a, Log):
                if a.name == 'stall_s':
                    run.stall_s[rank] += float(a.value)
                if recorder is not None:
                    recorder.on_log(now, rank, a)
            elif isinstance(a, Stopped):
                stopped[rank] = True

    for r, e in enumerate(engines):
        handle(r, e.start(now))
    if eval_fn is not None and eval_every_iterations:
        eval_fn(now, 0.0)
        next_eval[0] = eval_every_iterations
    while queue:
        t, _, kind, rank, msg = heapq.heappop(queue)
        if t > until:
            break
        now = t
        run.events += 1
        if kind == 'compute':
            grad = grad_fn(rank, engines[rank].w)
            run.iterations[rank] += 1
            if recorder is not None:
                recorder.on_compute(rank, compute_s(rank))
            handle(rank, engines[rank].on_compute_done(grad, now))
            mean_it = sum(run.iterations) / n
            if eval_fn is not None and eval_every_iterations and mean_it >= next_eval[0]:
                eval_fn(now, mean_it)
                next_eval[0] = mean_it + eval_every_iterations
        else:
            if recorder is not None:
                recorder.bytes_down += msg.wire_size()
            handle(rank, engines[rank].on_message(msg, now))
        if on_event is not None:
            on_event(kind, rank, now)
    else:
        if not all(stopped):
            raise RuntimeError('peer run deadlocked: nothing in flight, nodes '
                               f'{[r for r in range(n) if not stopped[r]]} not finished')
    run.end_time = now
    return run


def parse_system(spec: str, overrides: dict):
    """``'aet:2'`` -> ('aet', {'d': 2}), with tags and overrides; unknown options raise."""
    name, arg = parse_arg(spec)
    opts = with_tags(spec, overrides, TAG_KINDS)
    opts.pop('batch_size', None)
    fields = {f.name for f in dataclasses.fields(AetConfig)}
    bad = sorted(set(opts) - fields)
    if bad:
        raise ValueError(f'{name}: unknown option(s) {bad}; known: {sorted(fields)}')
    if arg:
        key = {'aet': 'd', 'localsgd': 'local_steps', 'etsgd': 'et_c'}[name]
        try:
            opts[key] = float(arg) if key == 'et_c' else int(arg)
        except ValueError:
            raise ValueError(f'bad argument in {spec!r}: {arg!r}') from None
    return name, opts


def batch_size_of(spec: str, overrides: dict):
    """Return the mini-batch size a spec's tags or ``overrides`` set (None: the workload's)."""
    bs = with_tags(spec, overrides, TAG_KINDS).get('batch_size')
    if bs is not None and (isinstance(bs, bool) or not isinstance(bs, int) or bs < 1):
        raise ValueError(f'batch_size must be an integer >= 1, got {bs!r}')
    return bs


def check_spec(spec: str) -> None:
    """Raise ValueError, in one line, if ``spec`` (argument, tags) cannot run."""
    _, opts = parse_system(spec, {})
    opts.setdefault('eta0', 0.01)                   # the run's default: the workload's step
    AetConfig(**opts)
    batch_size_of(spec, {})


def build_peers(name: str, n: int, w0: torch.Tensor, iterations: int, cfg: AetConfig):
    """Build the n engines of one peer system on ``cfg.topology``."""
    nbrs = topology(cfg.topology, n)
    if name == 'etsgd':
        return [EtPeer(r, nbrs[r], w0, iterations, cfg) for r in range(n)]
    schedule = make_schedule(name, iterations, cfg)
    return [AetPeer(r, nbrs[r], w0, schedule, cfg.d, cfg.receive_step) for r in range(n)]


def station_transmit(up, down):
    """``transmit`` over per-station links: a's uplink and b's downlink, relayed pipelined."""
    def transmit(src, dst, nbytes, now):
        return max(up[src].transmit(now, nbytes), down[dst].transmit(now, nbytes))
    return transmit


def run(cfg, progress=None) -> RunRecorder:
    """``rog sim`` runner of aet / etsgd / localsgd (see the module docstring)."""
    from rog_ros.sim.simulator import config_workload, DEFAULT_ITERATIONS, make_traces
    name, opts = parse_system(cfg.system, cfg.policy_overrides)
    bs = batch_size_of(cfg.system, cfg.policy_overrides)
    refuse_workload_options(cfg)
    wl = config_workload(cfg, options=False)
    n = cfg.workers
    if n < 1:
        raise ValueError('need at least one worker')
    opts.setdefault('eta0', cfg.lr if cfg.lr is not None else wl.lr)
    acfg = AetConfig(**opts)
    iterations = cfg.iterations or getattr(wl, 'adaptation_iterations', DEFAULT_ITERATIONS)
    models = [wl.make_model() for _ in range(n)]
    layout = RowLayout([tuple(p.shape) for p in models[0].parameters()], whole_model=True)
    w0 = layout.flatten([p.detach() for p in models[0].parameters()])
    engines = build_peers(name, n, w0, iterations, acfg)
    for m, e in zip(models, engines):
        layout.bind(m, e.w)
        m.train()
    batches = [wl.worker_batches(r, n, cfg.seed, batch_size=bs) for r in range(n)]

    def grad_fn(rank, w):
        model = models[rank]
        model.zero_grad(set_to_none=False)
        wl.loss(model, next(batches[rank])).backward()
        return layout.flatten([p.grad if p.grad is not None else torch.zeros_like(p)
                               for p in model.parameters()])

    stations = [links.DuplexLink(links.FluidLink(tr, latency_s=cfg.latency_s,
                                                 seed=cfg.seed + r, time_offset_s=off))
                for r, (tr, off) in enumerate(make_traces(cfg.trace, n, cfg.seed))]
    if cfg.duplex == 'shared':
        up, down = [s.up for s in stations], [s.down for s in stations]
    else:
        up = down = [s.link for s in stations]
    compute = cfg.compute_time_s or wl.compute_time_s
    recorder = RunRecorder(system=cfg.label or cfg.system.split('#')[0], n_workers=n,
                           staleness=max(acfg.d, 0) if name != 'etsgd' else 0,
                           trace=cfg.trace, seed=cfg.seed, workload=wl.users_code or wl.name,
                           target_accuracy=wl.target_accuracy)
    recorder.extra['data_fingerprint'] = wl.data_fingerprint()   # (compare reuse)

    def evaluate(max_samples):
        accs = [wl.evaluate(m, max_samples=max_samples) for m in models]
        mean = {k: sum(a[k] for a in accs) / n for k in ('accuracy', 'loss')}
        mean['best_accuracy'] = max(a['accuracy'] for a in accs)
        return mean

    def eval_fn(now, mean_it):
        out = evaluate(cfg.eval_samples)
        recorder.on_eval(now, mean_it, out)
        if progress is not None:
            progress(now, mean_it, out)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        res = run_peers(engines, grad_fn, lambda r: compute, station_transmit(up, down),
                        recorder=recorder, eval_fn=eval_fn,
                        eval_every_iterations=max(1.0, iterations / max(cfg.evaluations, 1)),
                        until=cfg.time_budget_s or math.inf)
    final = evaluate(cfg.final_eval_samples)
    recorder.on_eval(res.end_time, sum(res.iterations) / n, final)
    recorder.end_time_s = res.end_time
    recorder.extra.update({
        'params': layout.n_params, 'message_bytes': 4 * layout.n_params,
        'communication_rounds': sum(e.sent for e in engines) / n,
        'messages': res.messages, 'topology': acfg.topology, 'peers': n,
        'best_final_accuracy': final['best_accuracy'], 'duplex': cfg.duplex,
        'eta0': acfg.eta0, 'delay_checkpoint': acfg.d if name != 'etsgd' else None})
    return recorder


systems.register('aet', run, 'AET-SGD: peers on a ring, rounds of 10*i local steps, '
                 'delay checkpoint d (aet:D)')
systems.register('localsgd', run, 'local SGD baseline: peers, constant rounds (localsgd:S)')
systems.register('etsgd', run, 'event-triggered SGD baseline: peers send the model when '
                 '|x - xhat|_1 >= eta_t*v0 (etsgd:C, v0 = C*N_p)')
