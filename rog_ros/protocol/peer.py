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
Peer engines: decentralised training without a server (AET-SGD, event-triggered SGD, local SGD).

Sans-I/O like the server/worker pair (DESIGN 3): a driver calls ``start``, ``on_compute_done``
and ``on_message`` and carries out the returned actions (``StartCompute``, ``Send`` to a
neighbour rank, ``Log``, ``Stopped``). The engine owns the flat model ``w`` (the driver binds
its ``nn.Module`` to it and computes gradients at it), the round bookkeeping and the delay
checkpoint.

* :class:`AetPeer` (spec A2.4/A2.5): rounds of ``s_r`` local steps at the round step
  ``eta_r``; at the end of a round the sum ``U`` of the round's raw gradients goes to every
  neighbour as one ``RowChunk`` (kind GRAD, ``clock`` = round k, identity-coded float32
  payload); a receiver applies ``w -= eta_k * U`` at once and counts ``H[sender] += 1``. No
  forwarding. A node computes only while ``(r-1) - H[e] <= d`` for every neighbour e (the
  SYNCHRONIZE checkpoint); otherwise it waits, and the wait is logged as ``stall_s``. With
  constant round sizes the same engine is the local-SGD baseline.
* :class:`EtPeer` (spec A2.7): the event-triggered baseline. Every iteration an SGD step with
  ``alpha_t`` and a consensus step ``-beta_t * sum_j (xhat_c - xhat_j)``; whenever
  ``||x_c - xhat_c||_1 >= alpha_t * v0`` (v0 = c*N_p) the full model goes to the neighbours
  (``RowChunk`` kind UPDATE).

Messages are never dropped by the engines' contract (the driver delivers them reliably, in
any order).
"""

from __future__ import annotations

import numpy as np

from rog_ros.protocol.actions import Log, Send, StartCompute, Stopped
from rog_ros.protocol.messages import FLAG_END, KIND_GRAD, KIND_UPDATE, RowChunk
from rog_ros.protocol.policies.aet import AetConfig, et_steps, RoundSchedule
import torch


def _encode(vec: torch.Tensor) -> bytes:
    return vec.detach().to(torch.float32).cpu().numpy().tobytes()


def _decode(payload: bytes, like: torch.Tensor) -> torch.Tensor:
    arr = np.frombuffer(payload, dtype=np.float32)
    if arr.size != like.numel():
        raise ValueError(f'peer message holds {arr.size} values, model has {like.numel()}')
    return torch.from_numpy(arr.copy()).to(like.dtype)


def _chunk(sender: int, receiver: int, kind: int, clock: int, vec: torch.Tensor) -> RowChunk:
    return RowChunk(transfer_id=clock, seq=0, sender=sender, receiver=receiver, kind=kind,
                    clock=clock, flags=FLAG_END, codec=0,
                    row_ranges=np.asarray([0, 1], np.uint32), payload=_encode(vec))


class _PeerBase:
    """Shared plumbing: rank, neighbours, the flat model and message checks."""

    kind = KIND_GRAD

    def __init__(self, rank: int, neighbours, w0: torch.Tensor):
        self.rank = int(rank)
        self.neighbours = sorted(int(e) for e in neighbours)
        if self.rank in self.neighbours:
            raise ValueError(f'peer {rank} cannot be its own neighbour')
        self.w = w0.detach().clone()
        self.iteration = 0          # local SGD steps done
        self.sent = 0               # broadcasts (communication rounds)
        self.received = 0           # messages applied
        self.done = False

    def next_wakeup(self):
        return None

    def on_tick(self, now: float) -> list:
        return []

    def _check(self, msg) -> bool:
        return (isinstance(msg, RowChunk) and msg.kind == self.kind
                and msg.receiver == self.rank and msg.sender in self.neighbours)

    def _broadcast(self, vec: torch.Tensor, clock: int) -> list:
        self.sent += 1
        return [Send(e, _chunk(self.rank, e, self.kind, clock, vec)) for e in self.neighbours]


class AetPeer(_PeerBase):
    """
    One AET-SGD (or constant-round local SGD) compute node.

    Parameters
    ----------
    rank : int
        This node's id.
    neighbours : list of int
        Its neighbours on the undirected peer graph.
    w0 : torch.Tensor
        The initial flat model (identical on every node).
    schedule : RoundSchedule
        Round sizes and steps (identical on every node).
    d : int
        Delay checkpoint in rounds (-1: none).
    receive_step : str
        'sender': apply a received sum with the sender's round step ``eta_k`` (default);
        'current': with this node's current round step.

    """

    kind = KIND_GRAD

    def __init__(self, rank: int, neighbours, w0: torch.Tensor, schedule: RoundSchedule,
                 d: int = 1, receive_step: str = 'sender'):
        super().__init__(rank, neighbours, w0)
        self.schedule = schedule
        self.d = int(d)
        self.receive_step = receive_step
        self.H = {e: 0 for e in self.neighbours}   # rounds received from each neighbour
        self.round = 1                              # current round (1-based)
        self.h = 0                                  # steps done in this round
        self.U = torch.zeros_like(self.w)
        self.waiting_since = None
        self.stalls = 0

    def lag(self) -> int:
        """``max_e (r-1) - H[e]``: how many rounds this node is ahead of its slowest neighbour."""
        if not self.H:
            return 0
        return (self.round - 1) - min(self.H.values())

    def may_compute(self) -> bool:
        """Run the SYNCHRONIZE check: False while more than d rounds ahead of a neighbour."""
        return self.d < 0 or self.lag() <= self.d

    def _next(self, now: float) -> list:
        if self.done:
            return []
        if self.may_compute():
            return [StartCompute(clock=self.iteration)]
        self.waiting_since = now
        self.stalls += 1
        return [Log('trigger', 1.0, worker=self.rank, info={'lag': self.lag()})]

    def start(self, now: float) -> list:
        return self._next(now)

    def on_compute_done(self, grad: torch.Tensor, now: float) -> list:
        if self.done or not self.may_compute():
            raise RuntimeError(f'peer {self.rank}: computed while not allowed to')
        g = grad.to(self.w.dtype)
        self.w.add_(g, alpha=-self.schedule.step(self.round))
        self.U.add_(g)
        self.h += 1
        self.iteration += 1
        actions = []
        if self.h == self.schedule.size(self.round):
            actions += self._broadcast(self.U, self.round)
            self.U.zero_()
            self.h = 0
            if self.round == self.schedule.rounds:
                self.done = True
                return actions + [Stopped('rounds done')]
            self.round += 1
        return actions + self._next(now)

    def on_message(self, msg, now: float) -> list:
        if not self._check(msg):
            return [Log('reject', 1.0, worker=self.rank, info={'reason': 'not a neighbour '
                                                                         'gradient'})]
        k = int(msg.clock) if self.receive_step == 'sender' else self.round
        self.w.add_(_decode(msg.payload, self.w), alpha=-self.schedule.step(k))
        self.H[msg.sender] += 1
        self.received += 1
        if self.waiting_since is not None and self.may_compute():
            stalled = now - self.waiting_since
            self.waiting_since = None
            return [Log('stall_s', stalled, worker=self.rank), StartCompute(self.iteration)]
        return []


class EtPeer(_PeerBase):
    """
    One node of the event-triggered baseline (George & Gurram, as configured in spec A2.7).

    Parameters
    ----------
    rank, neighbours, w0
        As for :class:`AetPeer`.
    iterations : int
        K, local SGD iterations of this node.
    cfg : AetConfig
        ``eta0``, ``et_c``, ``et_eps``, ``et_beta_coef``.

    """

    kind = KIND_UPDATE

    def __init__(self, rank: int, neighbours, w0: torch.Tensor, iterations: int,
                 cfg: AetConfig = AetConfig()):
        super().__init__(rank, neighbours, w0)
        if iterations < 1:
            raise ValueError(f'iterations must be >= 1, got {iterations}')
        self.k = int(iterations)
        self.cfg = cfg
        self.v0 = cfg.et_c * self.w.numel()
        self.own_hat = self.w.clone()                       # last broadcast model
        self.hats = {e: self.w.clone() for e in self.neighbours}
        self.hat_clock = {e: -1 for e in self.neighbours}

    def start(self, now: float) -> list:
        return [StartCompute(clock=0)]

    def on_compute_done(self, grad: torch.Tensor, now: float) -> list:
        if self.done:
            raise RuntimeError(f'peer {self.rank}: computed after finishing')
        alpha, beta = et_steps(self.iteration, self.cfg)
        self.w.add_(grad.to(self.w.dtype), alpha=-alpha)
        if self.hats:
            diff = self.own_hat * len(self.hats) - torch.stack(list(self.hats.values())).sum(0)
            self.w.add_(diff, alpha=-beta)
        actions = []
        if self.iteration == 0 or float((self.w - self.own_hat).abs().sum()) >= alpha * self.v0:
            self.own_hat.copy_(self.w)
            actions += self._broadcast(self.w, self.iteration)
        self.iteration += 1
        if self.iteration >= self.k:
            self.done = True
            return actions + [Stopped('iterations done')]
        return actions + [StartCompute(clock=self.iteration)]

    def on_message(self, msg, now: float) -> list:
        if not self._check(msg):
            return [Log('reject', 1.0, worker=self.rank, info={'reason': 'not a neighbour '
                                                                         'model'})]
        self.received += 1
        if msg.clock > self.hat_clock[msg.sender]:     # reordered: keep the newest model
            self.hat_clock[msg.sender] = int(msg.clock)
            self.hats[msg.sender] = _decode(msg.payload, self.w)
        return []
