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
FLEET's server side: AdaSGD, its baselines, the controller, and sans-I/O server/worker engines.

Spec: specs/aetsgd_fleet.md B2.3-B2.4 and B6. AdaSGD applies each (stale) gradient with
``theta -= gamma * min(1, Lambda(tau) / sim) * G`` where

* ``Lambda(tau) = exp(-beta*tau)`` with ``beta = ln(tau_thres/2 + 1) / (tau_thres/2)``, so it
  meets DynSGD's ``1/(tau+1)`` at ``tau_thres/2``; ``tau_thres`` is the s-th percentile
  (default 99.7) of the staleness seen so far; DynSGD's dampening is used while fewer than
  ``bootstrap`` staleness values exist;
* ``sim`` is the Bhattacharyya coefficient between the gradient's label distribution and the
  distribution of all labels used so far (1 before any update).

Baselines: ``dynsgd`` (``1/(tau+1)``), ``fedavg-async`` (weight 1, staleness-unaware) and
``ssgd`` (weight 1, no staleness; in the simulator that is ``bsp``). Options from the reference
code: ``cap_tau`` (exponent uses ``min(tau, tau_thres+1)``) and ``boost_only_outliers``
(similarity boosting only for ``tau > 1.5*(tau_thres+1)``).

The controller drops requests whose mini-batch size is below the q_size-th percentile of past
sizes, or whose similarity is at or above the (100-q_sim)-th percentile of past similarities
(the most similar, as the paper's text says; ``sim_direction='least'`` is the code's reading).

Messages: FLEET's task protocol needs three messages that msg/ does not have (a task request
with label counts and device features, a task answer with the mini-batch size, a result with
label counts and measured cost). They are plain dataclasses here, each wrapping a ``RowChunk``
for the model or gradient, so that the simulator charges their real size; ``rog fleet`` would
need them in msg/ (see the module's report).
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math
from typing import Optional

import numpy as np

from rog_ros.protocol.actions import Log, Send, StartCompute, Stopped
from rog_ros.protocol.messages import FLAG_END, KIND_GRAD, KIND_UPDATE, RowChunk, SERVER
import torch

DAMPENINGS = ('adasgd', 'dynsgd', 'fedavg-async', 'ssgd')
SIM_DIRECTIONS = ('most', 'least')


def beta_for(tau_thres: float) -> float:
    """``beta`` with ``exp(-beta*tau_thres/2) == 1/(tau_thres/2 + 1)`` (limit 1 at 0)."""
    half = float(tau_thres) / 2.0
    if half <= 0.0:
        return 1.0
    return math.log(half + 1.0) / half


def exp_dampening(tau, beta: float):
    """Return AdaSGD's ``Lambda(tau) = exp(-beta*tau)`` (scalar or array)."""
    return np.exp(-beta * np.asarray(tau, np.float64))


def inverse_dampening(tau):
    """Return DynSGD's ``1/(tau+1)``."""
    return 1.0 / (np.asarray(tau, np.float64) + 1.0)


def bhattacharyya(p, q) -> float:
    """``BC(p, q) = sum_j sqrt(p_j q_j)`` of two count or probability vectors (normalised)."""
    p = np.asarray(p, np.float64)
    q = np.asarray(q, np.float64)
    if p.shape != q.shape:
        raise ValueError(f'label distributions differ in length: {p.shape} vs {q.shape}')
    if (p < 0).any() or (q < 0).any():
        raise ValueError('label counts must be >= 0')
    sp, sq = p.sum(), q.sum()
    if sp == 0 or sq == 0:
        return 1.0
    return float(min(1.0, np.sqrt((p / sp) * (q / sq)).sum()))


def label_counts(targets: torch.Tensor, classes: int) -> np.ndarray:
    """Count the classes of a batch's targets (class indices, or one-hot/scores: argmax)."""
    t = targets
    if t.dim() > 1:
        t = t.float().argmax(-1)
    return np.bincount(t.long().cpu().numpy().ravel(), minlength=classes)[:classes]


@dataclass
class AdaSgdConfig:
    """
    Knobs of the AdaSGD server and its baselines (defaults: the paper's, spec B3).

    Parameters
    ----------
    dampening : str
        'adasgd', 'dynsgd', 'fedavg-async' or 'ssgd'.
    lr : float
        Learning rate gamma.
    k : int
        Gradients per model update (paper: 1); the update sums their weighted gradients.
    s_percentile : float
        Expected non-stragglers s% (99.7: tau_thres = mu + 3 sigma for a Gaussian).
    bootstrap : int
        Staleness values needed before AdaSGD leaves DynSGD's dampening.
    similarity : bool
        Similarity boosting on (AdaSGD only).
    cap_tau, boost_only_outliers : bool
        The reference code's variants (see module docstring).
    q_size, q_sim : float
        Controller percentiles in [0, 100); 0 disables (the paper's starting point).
    sim_direction : str
        'most' drops the most similar (text), 'least' the least similar (code).
    history : int
        Staleness / controller history window.

    """

    dampening: str = 'adasgd'
    lr: float = 5e-4
    k: int = 1
    s_percentile: float = 99.7
    bootstrap: int = 50
    similarity: bool = True
    cap_tau: bool = False
    boost_only_outliers: bool = False
    q_size: float = 0.0
    q_sim: float = 0.0
    sim_direction: str = 'most'
    history: int = 5000

    def __post_init__(self):
        if self.dampening not in DAMPENINGS:
            raise ValueError(f'dampening must be one of {DAMPENINGS}, got {self.dampening!r}')
        if self.sim_direction not in SIM_DIRECTIONS:
            raise ValueError(f'sim_direction must be one of {SIM_DIRECTIONS}')
        if not 0 < self.s_percentile <= 100:
            raise ValueError(f's_percentile must be in (0, 100], got {self.s_percentile}')
        if not (0 <= self.q_size < 100 and 0 <= self.q_sim < 100):
            raise ValueError('controller percentiles must be in [0, 100)')
        if self.k < 1 or self.lr <= 0 or self.bootstrap < 0 or self.history < 1:
            raise ValueError('need k >= 1, lr > 0, bootstrap >= 0, history >= 1')


class Controller:
    """FLEET's controller: percentile thresholds on mini-batch size and similarity."""

    def __init__(self, q_size: float = 0.0, q_sim: float = 0.0, direction: str = 'most',
                 history: int = 5000):
        self.q_size, self.q_sim, self.direction = float(q_size), float(q_sim), direction
        self.history = int(history)
        self.sizes: list = []
        self.sims: list = []
        self.rejected = 0

    def admit(self, size: int, sim: float) -> bool:
        """Judge a request against the past ones, then remember it; True = accept."""
        ok = True
        if self.q_size > 0 and self.sizes:
            ok = size >= np.percentile(self.sizes, self.q_size)
        if ok and self.q_sim > 0 and self.sims:
            if self.direction == 'most':
                ok = sim < np.percentile(self.sims, 100.0 - self.q_sim)
            else:
                ok = sim >= np.percentile(self.sims, self.q_sim)
        self.sizes = (self.sizes + [size])[-self.history:]
        self.sims = (self.sims + [sim])[-self.history:]
        self.rejected += not ok
        return ok


class AdaSgdServer:
    """
    The model, clock and update rule of AdaSGD (and baselines), without any I/O.

    ``weight(tau, counts)`` gives a gradient's factor; ``push(grad, t_i, counts)`` records its
    staleness, weights it and applies the update once ``k`` gradients are pending.
    """

    def __init__(self, w0: torch.Tensor, classes: int, cfg: AdaSgdConfig = AdaSgdConfig()):
        self.cfg = cfg
        self.w = w0.detach().clone()
        self.t = 0
        self.classes = int(classes)
        self.global_counts = np.zeros(self.classes, np.int64)
        self._window_counts = np.zeros(self.classes, np.int64)
        self.staleness: list = []
        self._pending: Optional[torch.Tensor] = None
        self._n_pending = 0
        self.weights: list = []
        self.applied_samples = 0

    def tau_thres(self) -> float:
        return float(np.percentile(self.staleness, self.cfg.s_percentile))

    def similarity(self, counts) -> float:
        """Bhattacharyya similarity to the labels used so far (1 before any update)."""
        if counts is None or not self.global_counts.any():
            return 1.0
        return bhattacharyya(counts, self.global_counts)

    def weight(self, tau: int, counts=None) -> float:
        """Return the factor of a gradient with staleness tau (and label counts, for AdaSGD)."""
        d = self.cfg.dampening
        if d in ('fedavg-async', 'ssgd'):
            return 1.0
        if d == 'dynsgd' or len(self.staleness) < max(self.cfg.bootstrap, 1):
            return float(inverse_dampening(tau))
        thres = self.tau_thres()
        beta = beta_for(thres)
        exponent = min(tau, thres + 1.0) if self.cfg.cap_tau else tau
        lam = float(exp_dampening(exponent, beta))
        if not self.cfg.similarity:
            return lam
        if self.cfg.boost_only_outliers and tau <= 1.5 * (thres + 1.0):
            return lam
        sim = self.similarity(counts)
        return min(1.0, lam / sim) if sim > 0 else 1.0

    def push(self, grad: torch.Tensor, t_i: int, counts=None) -> dict:
        """Apply (or queue, for k > 1) one gradient computed on model version ``t_i``."""
        tau = self.t - int(t_i)
        if tau < 0:
            raise ValueError(f'gradient from the future: t_i={t_i} > t={self.t}')
        if self.cfg.dampening == 'ssgd':
            tau = 0
        w = self.weight(tau, counts)
        self.staleness = (self.staleness + [tau])[-self.cfg.history:]
        self.weights.append(w)
        g = grad.to(self.w.dtype) * w
        self._pending = g if self._pending is None else self._pending + g
        self._n_pending += 1
        if counts is not None:
            self._window_counts += np.asarray(counts, np.int64)
            self.applied_samples += int(np.sum(counts))
        updated = False
        if self._n_pending >= self.cfg.k:
            self.w.add_(self._pending, alpha=-self.cfg.lr)
            self.global_counts += self._window_counts
            self._window_counts[:] = 0
            self._pending, self._n_pending = None, 0
            self.t += 1
            updated = True
        return {'tau': tau, 'weight': w, 'updated': updated}


# ---------------------------------------------------------------------- messages and engines
@dataclass
class TaskRequest:
    """Worker -> server: ask for a learning task (FLEET step 1)."""

    worker: int
    device_model: str = ''
    features: tuple = ()
    label_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    data_size: int = 0

    def wire_size(self) -> int:
        return 48 + len(self.device_model) + 8 * len(self.features) + 8 * len(self.label_counts)


@dataclass
class TaskAnswer:
    """Server -> worker: the model (version ``clock``) and mini-batch size, or a rejection."""

    worker: int
    clock: int
    batch_size: int
    accepted: bool
    model: Optional[RowChunk] = None

    def wire_size(self) -> int:
        return 32 + (self.model.wire_size() if self.model is not None else 0)


@dataclass
class TaskResult:
    """Worker -> server: the gradient on model ``clock``, label counts and measured cost."""

    worker: int
    clock: int
    batch_size: int
    gradient: RowChunk
    label_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cost_s: float = 0.0

    def wire_size(self) -> int:
        return 40 + self.gradient.wire_size() + 8 * len(self.label_counts)


def _vector_chunk(sender, receiver, kind, clock, vec: torch.Tensor) -> RowChunk:
    return RowChunk(transfer_id=clock, seq=0, sender=sender, receiver=receiver, kind=kind,
                    clock=clock, flags=FLAG_END, codec=0,
                    row_ranges=np.asarray([0, 1], np.uint32),
                    payload=vec.detach().to(torch.float32).cpu().numpy().tobytes())


def _vector(chunk: RowChunk, like: torch.Tensor) -> torch.Tensor:
    arr = np.frombuffer(chunk.payload, dtype=np.float32)
    if arr.size != like.numel():
        raise ValueError(f'message holds {arr.size} values, model has {like.numel()}')
    return torch.from_numpy(arr.copy()).to(like.dtype)


class FleetServerEngine:
    """
    Sans-I/O FLEET server: controller + bound on requests, AdaSGD on results.

    ``bound_fn(request) -> mini-batch size`` is I-Prof's answer (default: a fixed size);
    the size is capped by the worker's local data size. Training stops after
    ``max_updates`` model updates: every later message is answered with a rejection marked
    final (``TaskAnswer.batch_size == 0``) and the engine logs ``Stopped``.
    """

    def __init__(self, server: AdaSgdServer, max_updates: int, bound_fn=None,
                 controller: Optional[Controller] = None, batch_size: int = 100):
        self.core = server
        self.max_updates = int(max_updates)
        self.bound_fn = bound_fn or (lambda req: batch_size)
        self.controller = controller or Controller()
        self.finished = False
        self.rejects = 0

    def start(self, now: float) -> list:
        return []

    def next_wakeup(self):
        return None

    def on_tick(self, now: float) -> list:
        return []

    def on_message(self, msg, now: float) -> list:
        core = self.core
        if isinstance(msg, TaskResult):
            if self.finished:
                return []
            info = core.push(_vector(msg.gradient, core.w), msg.clock, msg.label_counts)
            out = [Log('staleness', float(info['tau']), worker=msg.worker,
                       info={'weight': info['weight']}),
                   Log('push_done', 1.0, worker=msg.worker,
                       info={'bytes': msg.wire_size()})]
            if core.t >= self.max_updates and not self.finished:
                self.finished = True
                out.append(Stopped('updates done'))
            return out
        if isinstance(msg, TaskRequest):
            if self.finished:
                return [Send(msg.worker, TaskAnswer(msg.worker, core.t, 0, False))]
            size = int(self.bound_fn(msg))
            if msg.data_size > 0:
                size = min(size, int(msg.data_size))
            sim = core.similarity(msg.label_counts if len(msg.label_counts) else None)
            if not self.controller.admit(size, sim):
                self.rejects += 1
                return [Send(msg.worker, TaskAnswer(msg.worker, core.t, size, False)),
                        Log('reject', 1.0, worker=msg.worker, info={'sim': sim})]
            model = _vector_chunk(SERVER, msg.worker, KIND_UPDATE, core.t, core.w)
            answer = TaskAnswer(msg.worker, core.t, size, True, model)
            return [Send(msg.worker, answer),
                    Log('pull_done', 1.0, worker=msg.worker,
                        info={'bytes': answer.wire_size()})]
        return [Log('reject', 1.0, info={'reason': f'unexpected {type(msg).__name__}'})]


class FleetWorkerEngine:
    """
    Sans-I/O FLEET worker: request, compute one task on the received model, return, repeat.

    A rejected request is retried after ``retry_s``; a final answer (batch size 0) stops it.
    The driver computes the gradient at ``w`` on ``batch_size`` samples and calls
    ``on_compute_done(grad, now, counts, cost_s)`` (or passes the three as one tuple, which is
    what a ``grad_fn`` of :class:`rog_ros.sim.harness.Harness` can return).
    """

    def __init__(self, rank: int, w0: torch.Tensor, device_model: str = '', features=(),
                 data_counts=None, data_size: int = 0, retry_s: float = 1.0):
        self.rank = int(rank)
        self.w = w0.detach().clone()
        self.device_model, self.features = device_model, tuple(features)
        self.data_counts = (np.zeros(0, np.int64) if data_counts is None
                            else np.asarray(data_counts, np.int64))
        self.data_size = int(data_size)
        self.retry_s = float(retry_s)
        self.clock = 0
        self.batch_size = 0
        self._wake = None
        self.stopped = False

    def _request(self) -> list:
        return [Send(SERVER, TaskRequest(self.rank, self.device_model, self.features,
                                         self.data_counts, self.data_size))]

    def start(self, now: float) -> list:
        return self._request()

    def next_wakeup(self):
        return self._wake

    def on_tick(self, now: float) -> list:
        if self._wake is None or now < self._wake or self.stopped:
            return []
        self._wake = None
        return self._request()

    def on_message(self, msg, now: float) -> list:
        if not isinstance(msg, TaskAnswer) or msg.worker != self.rank or self.stopped:
            return []
        if not msg.accepted:
            if msg.batch_size == 0:
                self.stopped = True
                return [Stopped('server finished')]
            self._wake = now + self.retry_s
            return []
        self.w.copy_(_vector(msg.model, self.w))
        self.clock, self.batch_size = msg.clock, msg.batch_size
        return [StartCompute(clock=msg.clock)]

    def on_compute_done(self, grad, now: float, counts=None, cost_s: float = 0.0) -> list:
        """Return the result; ``grad`` may be a ``(grad, counts, cost_s)`` tuple."""
        if isinstance(grad, tuple):
            grad, counts, cost_s = grad
        counts = np.zeros(0, np.int64) if counts is None else np.asarray(counts, np.int64)
        result = TaskResult(self.rank, self.clock, self.batch_size,
                            _vector_chunk(self.rank, SERVER, KIND_GRAD, self.clock, grad),
                            counts, cost_s)
        return [Send(SERVER, result)] + self._request()
