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
AdaComp and its baselines ASGD and Comp-ASGD as a sans-I/O server/worker engine pair.

specs/adacomp_gsp.md, paper 001 (Hardy, Le Merrer, Sericola, NCA 2017). Asynchronous parameter
server: a worker computes a gradient at the model it pulled (timestamp j), keeps the top-c
entries of every tensor (AdaComp), of the whole model (Comp-ASGD) or all of them (ASGD), waits
an emulated random push delay and pushes ``(j, indices, values)``. The server applies it as
update i with

* AdaComp (Algorithm 2, Eqs. 3-5): per coordinate k, ``sigma_k`` = number of updates applied
  since the pull that touched k, step ``alpha / max(1, sigma_k)``;
* ASGD and Comp-ASGD (spec 2.3, 2.4): one ``sigma = i - j`` per update, step
  ``alpha / max(1, sigma)`` on the transmitted coordinates;

and answers with the dense model and its timestamp i + 1 (the worker pulls right after its
push). ``sigma_k`` is exact (option (b) of spec 001-6): a cumulative touch counter and, per
worker, its snapshot at pull time, so ``sigma_k = C[k] - C_pull[w][k]`` in O(c |Theta|) per
update. After each push a worker crashes (fail-stop) with probability ``crash_p``.

Messages: the push is a ``RowChunk`` (KIND_GRAD, ``clock`` = j, codec TOPK_CODEC_ID with int32
indices + fp32 values, or codec 0 with a dense fp32 gradient for ASGD); the pull reply is a
``RowChunk`` (KIND_UPDATE, ``clock`` = i + 1, dense fp32 model); the end of training is a
``Schedule`` with ``stop``. Each message is one transfer (FLAG_END, no chunking): the
simulator charges its wire size to the link (a fleet's ``push_transfers`` chunks the dense
messages and the sparse pushes on the wire and hands the engines the same messages).
"""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np
from rog_ros.core.compress import topk
from rog_ros.protocol.actions import Log, Send, Stopped
from rog_ros.protocol.messages import (
    FLAG_END, KIND_GRAD, KIND_UPDATE, MessageError, RowChunk, Schedule, SERVER)
from rog_ros.protocol.policies.async_ps import PushServer, PushWorker
import torch

MODES = ('adacomp', 'asgd', 'comp-asgd')


@dataclass(frozen=True)
class AdaCompConfig:
    """The knobs of one AdaComp-family run (defaults: spec 001-3)."""

    mode: str = 'adacomp'        # 'adacomp' | 'asgd' | 'comp-asgd'
    c: float = 0.01              # kept fraction per tensor (AdaComp) or of the model (Comp-ASGD)
    alpha: float = 0.1           # base learning rate (A1: [code]'s 0.1; not in the paper)
    push_delay_mean_s: float = 0.0   # emulated random wait before each push (exponential mean;
    #                                  the paper gives no distribution), times the class factor
    crash_p: float = 0.0         # fail-stop probability after each push (A5: 0.0004 gives
    #                              ~100 of 200 crashed by I = 250,000; the paper says 0.004)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f'mode must be one of {MODES}, got {self.mode!r}')
        if not 0.0 < self.c <= 1.0:
            raise ValueError(f'compression ratio c must be in (0, 1], got {self.c}')
        if not (math.isfinite(self.alpha) and self.alpha > 0):
            raise ValueError(f'alpha must be positive and finite, got {self.alpha}')
        if not (self.push_delay_mean_s >= 0 and math.isfinite(self.push_delay_mean_s)):
            raise ValueError('push_delay_mean_s must be >= 0')
        if not 0.0 <= self.crash_p < 1.0:
            raise ValueError(f'crash_p must be in [0, 1), got {self.crash_p}')


DEFAULT_C = 0.01
"""Kept fraction of ``adacomp`` and ``comp-asgd`` when the spec names none."""
SPEC_OPTIONS = ('alpha', 'push_delay_mean_s', 'crash_p', 'heterogeneity', 'c')
"""Options a run may set beside the spec (``SimConfig.policy_overrides``)."""


def config_for(system: str, overrides: dict, lr: float, momentum: float) -> AdaCompConfig:
    """
    Build the AdaCompConfig of a system spec such as ``'adacomp:0.1'`` plus overrides.

    One place for ``rog sim`` and ``rog fleet``: ``alpha`` defaults to ``lr / (1 - momentum)``,
    the momentum-free equivalent of the workload's step (AdaComp has no momentum).
    """
    name, _, arg = system.split('#')[0].partition(':')
    name, arg = name.strip().lower(), arg.strip()
    unknown = sorted(set(overrides) - set(SPEC_OPTIONS))
    if unknown:
        raise ValueError(f'{name}: unknown options {unknown}; known: {list(SPEC_OPTIONS)}')
    c = 1.0 if name == 'asgd' else DEFAULT_C
    if arg:
        if name == 'asgd':
            raise ValueError('asgd takes no argument (it sends every entry)')
        try:
            c = float(arg)
        except ValueError:
            raise ValueError(f'bad compression ratio in {system!r}: {arg!r}') from None
    c = float(overrides.get('c', c))
    alpha = overrides.get('alpha')
    if alpha is None:
        alpha = lr / max(1e-6, 1.0 - momentum)
    return AdaCompConfig(mode=name, c=c, alpha=float(alpha),
                         push_delay_mean_s=float(overrides.get('push_delay_mean_s', 0.0)),
                         crash_p=float(overrides.get('crash_p', 0.0)))


def push_entries(config: AdaCompConfig, sizes) -> int | None:
    """
    Return the entries every sparse push of ``config`` carries; None: pushes are dense (ASGD).

    The same on every node of a fleet (mode, c and the model's tensor sizes are), so that
    the server's transfers know the size of a sparse push before its first chunk arrives.
    """
    if config.mode == 'asgd':
        return None
    sizes = [int(s) for s in sizes]
    if config.mode == 'adacomp':
        return int(topk.per_tensor_k(sizes, config.c).sum())
    return min(topk.global_k(sum(sizes), config.c), sum(sizes))


def staleness_lr(alpha: float, sigma: torch.Tensor) -> torch.Tensor:
    """
    ``alpha / sigma`` where sigma >= 2, else alpha (Eq. 5; spec A3 for the baselines), fp32.

    Computed in float64 and rounded once, identically for the per-coordinate and the
    per-update staleness, so that AdaComp with c = 1 equals ASGD bit for bit.
    """
    return (alpha / sigma.clamp(min=1).to(torch.float64)).to(torch.float32)


def heterogeneity_factors(n: int, fractions=(0.3, 0.4, 0.3), rates=(100, 10, 1)) -> list:
    """
    Per-worker slow-down factors of the heterogeneity model (spec 001-2.8).

    Classes fast/medium/slow take ``fractions`` of the workers (rounded, ranks in order) and
    push at ``rates`` relative to each other: factor = max(rates) / rate, i.e. 1, 10, 100.
    """
    if len(fractions) != len(rates) or abs(sum(fractions) - 1.0) > 1e-9:
        raise ValueError('fractions must sum to 1 and match rates')
    counts = [int(round(f * n)) for f in fractions]
    counts[-1] = n - sum(counts[:-1])
    top = max(rates)
    out = []
    for cnt, rate in zip(counts, rates):
        out += [top / rate] * cnt
    return out


class AdaCompServer(PushServer):
    """
    The parameter server of AdaComp, ASGD or Comp-ASGD.

    Parameters
    ----------
    w0 : Tensor
        Flat initial model Theta(0).
    n_workers : int
        Number of workers.
    config : AdaCompConfig
        Mode, alpha (c is the workers' business).
    max_updates : int
        I: training ends once this many updates were applied.

    """

    CLOCK_REFUSED = 'worker {w} pushes timestamp {clock}, but holds {expected}'

    def __init__(self, w0: torch.Tensor, n_workers: int, config: AdaCompConfig,
                 max_updates: int):
        if n_workers < 1 or max_updates < 1:
            raise ValueError('need at least one worker and one update')
        self.cfg = config
        self.n = int(n_workers)
        self.theta = w0.detach().to(torch.float32).clone()
        self.n_params = self.theta.numel()
        self.max_updates = int(max_updates)
        self.i = 0                                   # updates applied so far
        self.pulled = [0] * self.n                   # timestamp j each worker holds
        per_coordinate = config.mode == 'adacomp'
        self.touch = torch.zeros(self.n_params, dtype=torch.int32) if per_coordinate else None
        self.touch_at_pull = (torch.zeros(self.n, self.n_params, dtype=torch.int32)
                              if per_coordinate else None)
        self.stopped = [False] * self.n
        self._init_runs(self.n)
        self.diverged = False           # Theta became non-finite: training stops
        # metrics
        self.bytes_up = 0
        self.bytes_down = 0
        self.rejects = 0
        self.sigma_sum = 0.0            # of sigma(i) = i - j, per update
        self.sigma_k_sum = 0.0          # of sigma_k over transmitted coordinates
        self.sigma_k_count = 0
        self.entries = 0                # transmitted coordinates
        self.applied_bytes = 0          # wire bytes of the pushes applied (not the late ones)

    def model(self) -> torch.Tensor:
        """Return the current Theta(i) (a view; copy before changing)."""
        return self.theta

    def _on_push(self, msg: RowChunk, now: float) -> list:
        w = msg.sender
        if not 0 <= w < self.n or msg.receiver != SERVER:
            raise MessageError(f'push from unknown worker {w}')
        j = int(msg.clock)
        (idx, vals), dropped = self._admit(w, msg, self.pulled[w])
        nbytes = msg.wire_size()
        self.bytes_up += nbytes
        if dropped:
            return self._rejoin(w, j, nbytes)
        out = [Log('push_done', float(idx.numel()), w, {'bytes': nbytes})]
        if self.stopped[w]:
            return out + [Send(w, Schedule(worker=w, clock=self.i, push_deadline_s=-1.0,
                                           stop=True))]
        sigma_global = self.i - j
        if self.touch is not None:
            sigma = (self.touch[idx] - self.touch_at_pull[w][idx]).to(torch.int64)
            self.sigma_k_sum += float(sigma.sum())
            self.sigma_k_count += int(sigma.numel())
        else:
            sigma = torch.full((idx.numel(),), sigma_global, dtype=torch.int64)
        self.theta[idx] -= staleness_lr(self.cfg.alpha, sigma) * vals
        if self.touch is not None:
            self.touch[idx] += 1
        self.i += 1
        if not bool(torch.isfinite(self.theta[idx]).all()):
            self.diverged = True
        self.sigma_sum += sigma_global
        self.entries += int(idx.numel())
        self.applied_bytes += nbytes
        if self.i >= self.max_updates or self.diverged:
            self.stopped = [True] * self.n
            return out + [Send(w, Schedule(worker=w, clock=self.i, push_deadline_s=-1.0,
                                           stop=True)),
                          Log('diverged' if self.diverged else 'training_done', float(self.i))]
        return out + [Send(w, self._pull(w))]

    _COUNTERS = ('bytes_up', 'bytes_down', 'rejects', 'sigma_sum', 'sigma_k_sum',
                 'sigma_k_count', 'entries', 'applied_bytes', 'resent')
    """The figures a checkpoint keeps besides the model and timestamps (``stats`` reads them)."""

    def state_dict(self, copy: bool = True) -> dict:
        """
        Return what a restarted server needs to go on as this one (a node's checkpoint).

        Theta, the update count i, each worker's timestamp j (a push is applied only at the
        one its worker holds: a push applied before the checkpoint and sent again after a
        restart is never applied twice), AdaComp's touch counters, the runs taken, the stop
        flags and the figures of ``stats``. ``copy=False``: the engine's own tensors, for a
        caller that serialises them at once (no model-sized copies).
        """
        take = (lambda t: t.clone()) if copy else (lambda t: t)
        sd = {'mode': self.cfg.mode, 'n': self.n, 'n_params': self.n_params,
              'theta': take(self.theta), 'i': int(self.i), 'pulled': list(self.pulled),
              'stopped': list(self.stopped), 'diverged': bool(self.diverged),
              'runs': self._runs_state(),
              'counters': {k: getattr(self, k) for k in self._COUNTERS}}
        if self.touch is not None:
            sd['touch'] = take(self.touch)
            sd['touch_at_pull'] = take(self.touch_at_pull)
        return sd

    def load_state_dict(self, sd: dict) -> None:
        """
        Go on from ``state_dict``'s state (ValueError, nothing changed, if of another fleet).

        Each worker's first push after it is admitted as a new run's (``PushServer._admit``):
        the pushes applied after the checkpoint are lost, and a worker that holds a later
        timestamp than the restored one is answered with the current model.
        """
        system = self._system_of(sd)
        if system != self.cfg.mode or (int(sd['n']), int(sd['n_params'])) != (self.n,
                                                                              self.n_params):
            raise ValueError(f"checkpoint of {system} with {sd.get('n', '?')} workers and "
                             f"{sd.get('n_params', '?')} parameters; this server runs "
                             f'{self.cfg.mode} with {self.n} and {self.n_params}')
        if len(sd['pulled']) != self.n or len(sd['stopped']) != self.n:
            raise ValueError('checkpoint with another number of workers')
        self._load_runs_state(sd['runs'])
        self.theta.copy_(sd['theta'])
        if self.touch is not None:
            self.touch.copy_(sd['touch'])
            self.touch_at_pull.copy_(sd['touch_at_pull'])
        self.i = int(sd['i'])
        self.pulled = [int(j) for j in sd['pulled']]
        self.stopped = [bool(b) for b in sd['stopped']]
        self.diverged = bool(sd['diverged'])
        for k in self._COUNTERS:
            setattr(self, k, type(getattr(self, k))(sd['counters'][k]))

    def _decode(self, msg: RowChunk) -> tuple:
        """Return a push's ``(indices, values)``: a sparse top-k one's, or all of a dense one."""
        if msg.codec == topk.TOPK_CODEC_ID:
            return topk.decode(msg.payload, self.n_params)
        if msg.codec == 0:
            return torch.arange(self.n_params), topk.decode_dense(msg.payload, self.n_params)
        raise MessageError(f'unknown codec {msg.codec}')

    def _pull(self, w: int) -> RowChunk:
        """Return worker ``w``'s pull of the current model, noting it holds timestamp i."""
        self.pulled[w] = self.i
        if self.touch_at_pull is not None:
            self.touch_at_pull[w].copy_(self.touch)
        reply = RowChunk(transfer_id=self.i, seq=0, sender=SERVER, receiver=w,
                         kind=KIND_UPDATE, clock=self.i, flags=FLAG_END, codec=0,
                         payload=topk.encode_dense(self.theta))
        self.bytes_down += reply.wire_size()
        return reply

    def _rejoin(self, w: int, j: int, nbytes: int) -> list:
        """
        Drop the push of a run of ``w`` new to us at timestamp ``j`` and send the current model.

        Such a push is a restarted robot's first (timestamp 0, computed at the model it
        started from) or, after a server restart, one computed at a model of the earlier
        server. Not applied, not even with the staleness step alpha / sigma, though sigma is
        defined for timestamp 0 (``i``, or per coordinate the touches since): Algorithm 1
        (spec 001-2.5) pulls before every computation, and this run computed at a model the
        server never handed it (a robot's start model is only checked by a warning; after a
        server restart the timestamp names another server's model), and the paper's crash
        model is fail-stop, with no way back to weigh. One gradient per restart is lost;
        the robot computes next at the current model, and its staleness is exact from there.
        ``pulled[w]`` never goes down, and a push is applied only at the timestamp ``w``
        holds, after which it holds a later one: no push is applied twice, across restarts
        too. Counted in ``rejoins`` and the ``worker_restart`` log.
        """
        out = [self._rejoin_log(w, j, self.pulled[w], nbytes)]
        if self.stopped[w]:
            return out + [Send(w, Schedule(worker=w, clock=self.i, push_deadline_s=-1.0,
                                           stop=True))]
        return out + [Send(w, self._pull(w))]

    def stats(self) -> dict:
        """Staleness and traffic figures for the run summary."""
        return {'updates': self.i,
                'mean_staleness': self.sigma_sum / max(self.i, 1),
                'mean_coordinate_staleness': (self.sigma_k_sum / self.sigma_k_count
                                              if self.sigma_k_count else None),
                'entries_per_update': self.entries / max(self.i, 1),
                'ingress_bytes_per_update': self.applied_bytes / max(self.i, 1),
                # the paper's traffic: pickled Python floats, ~9 B per value (+ 9 B per index
                # of a sparse update), spec 001-5
                'pickle_like_bytes_per_update': (9 if self.cfg.mode == 'asgd' else 18)
                * self.entries / max(self.i, 1),
                'server_rejects': self.rejects, 'diverged': self.diverged}


class AdaCompWorker(PushWorker):
    """
    An AdaComp-family worker: compute at the pulled model, select, wait, push, pull.

    Parameters
    ----------
    rank : int
        This worker.
    w0 : Tensor
        Flat initial model (timestamp 0); ``self.w`` always holds the pulled model, in place
        (the driver binds the model's parameters to it).
    sizes : list of int
        Element count of every parameter tensor, in model order.
    config : AdaCompConfig
        Mode, c, push delay and crash probability.
    slowdown : float
        Heterogeneity factor applied to the push-delay mean (1 = fast class).
    seed : int
        Seed of this worker's delay and crash draws.

    """

    def __init__(self, rank: int, w0: torch.Tensor, sizes, config: AdaCompConfig,
                 slowdown: float = 1.0, seed: int = 0):
        self.rank = int(rank)
        self.cfg = config
        self.sizes = [int(s) for s in sizes]
        self.w = w0.detach().to(torch.float32).clone()
        self.n_params = self.w.numel()
        if sum(self.sizes) != self.n_params:
            raise ValueError('tensor sizes do not add up to the model size')
        self.j = 0
        self.slowdown = float(slowdown)
        self.rng = np.random.default_rng([int(seed), self.rank])
        self.pending: tuple | None = None     # (due time, message)
        self.crashed = False
        self.stopped = False
        self.diverged = False
        self.pushes = 0
        self._sent_at = 0.0

    def next_wakeup(self):
        return self.pending[0] if self.pending is not None else None

    def _push(self, g: torch.Tensor, now: float) -> list:
        mode, c = self.cfg.mode, self.cfg.c
        if mode == 'asgd':
            payload, codec = topk.encode_dense(g), 0
        else:
            if mode == 'adacomp':
                idx, vals = topk.select_per_tensor(g, self.sizes, c)
            else:
                idx, vals = topk.select_global(g, topk.global_k(self.n_params, c))
            payload, codec = topk.encode(idx, vals), topk.TOPK_CODEC_ID
        msg = RowChunk(transfer_id=self.pushes + 1, seq=0, sender=self.rank, receiver=SERVER,
                       kind=KIND_GRAD, clock=self.j, flags=FLAG_END, codec=codec,
                       payload=payload)
        delay = 0.0
        if self.cfg.push_delay_mean_s > 0:
            delay = float(self.rng.exponential(self.cfg.push_delay_mean_s * self.slowdown))
        self.pending = (now + delay, msg)
        return self.on_tick(now) if delay == 0.0 else []

    def on_tick(self, now: float) -> list:
        if self.pending is None or now < self.pending[0]:
            return []
        msg = self.pending[1]
        self.pending = None
        self.pushes += 1
        self._sent_at = now
        out = [Send(SERVER, msg)]
        if self.cfg.crash_p > 0 and self.rng.random() < self.cfg.crash_p:
            self.crashed = self.stopped = True
            out += [Log('crash', 1.0, self.rank, {'pushes': self.pushes}),
                    Stopped('crashed (fail-stop after a push)')]
        return out

    def _pulled(self, msg: RowChunk) -> int:
        self.j = int(msg.clock)
        return self.pushes
