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
What a worker does while it computes or transfers: late rows, late pulls, compute ahead.

A sequential worker's link is idle while it computes, and its computer while it transfers.
Late pushes send the rows the last push withheld during the computation
(``SyncPolicy.late_rows``); late pulls are the server's changed rows received meanwhile and
applied when the computation ends (``late_pulls``); computing ahead starts the next gradient
while a push and its pull run, when the model already satisfies RSP for it (``overlap``).
Each keeps the pushes, commits and exactly-once of the sequential worker.

``OverlapMixin`` is one part of ``WorkerEngine`` (``worker.py``) and works on its state.
"""

from __future__ import annotations

import math

from rog_ros.protocol.actions import Log, Send, StartCompute
from rog_ros.protocol.messages import (
    FLAG_LATE, FLAG_SNAPSHOT, RowChunk, RowVersions, SERVER, TransferAck)
import torch


class OverlapMixin:
    """Late pushes, late pulls and gradients computed ahead of a ``WorkerEngine``."""

    def _start_late_push(self, now: float) -> list:
        """
        Send, while the next gradient is computed, the rows the last push withheld.

        A sequential worker's uplink is idle while it computes. Rows withheld by ATP are
        what holds the other workers' staleness checks (their versions of our rows age
        until we send them), so sending them now, in priority order and for as long as the
        computation is expected to last (less one round trip for the final ack), lets the
        others run further ahead without costing this worker's iteration any link time
        (``SyncPolicy.late_rows``). The push carries our current clock and ``FLAG_LATE``:
        the server stamps the rows and asks for no pull.
        """
        pol = self.policy
        if (not pol.late_rows or pol.whole_model or pol.scheduler == 'flown' or pol.overlap
                or self.push is not None or self._rejoin or self.state != 'computing'
                or self.push_deadline_s < 0):
            return []
        rate, compute = self.thr_up.value_bps, self.compute_est.value
        deadline = self._compute_started_at + compute - self.rtt_up.value
        if rate <= 0 or compute <= 0 or (deadline - now) * rate / 8.0 < self.chunk_bytes:
            return []                   # not one chunk's worth of idle link: not worth a push
        if not bool((self.withheld > 0).any()):
            return []
        return [Log('late_push', 1.0, self.rank, {'clock': self.clock})] + \
            self._start_push(now, late_deadline=deadline)

    def _hold_gradient(self, grad: torch.Tensor, now: float) -> list:
        """
        Keep a gradient computed while a late push still runs, and wind that push up.

        The push encodes the residual as it was when it started and commits from it, so
        the gradient enters the residual after its final ack (``_on_ack``).
        """
        if self._held_grad is None:
            self._held_grad = torch.empty_like(self.w)
        self._held_grad.copy_(grad)
        self._grad_held = True
        tr = self.push
        tr.deadline = min(tr.deadline, now)     # no more optional chunks: END now
        return [Send(SERVER, c) for c in tr.on_tick(now)]

    def _apply_late_pulls(self) -> None:
        """Subtract the late pulls that arrived during the computation (``late_pulls``)."""
        if self._late_q_pending:
            self.w -= self._late_q
            self._late_q.zero_()
            self._late_q_pending = False

    def receives_while_computing(self, msg) -> bool:
        """
        Whether ``msg`` may reach this engine while a computation reads the model.

        A node that computes on a thread of its own delivers these at once and holds back
        every other message until the gradient was handed over: acknowledgements (of a late
        push), and a late pull's chunks and versions, which change the model only when the
        computation is over.
        """
        return (isinstance(msg, (TransferAck, RowVersions))
                or (isinstance(msg, RowChunk) and bool(msg.flags & FLAG_LATE)
                    and not msg.flags & FLAG_SNAPSHOT))    # (a snapshot writes the model)

    def _maybe_compute_ahead(self, now: float) -> list:
        """
        Compute the next gradient while this push and its pull run (``SyncPolicy.overlap``).

        The next iteration may start now if the model as it is already satisfies RSP for it
        (the same predicate the worker checks after the pull): the gradient is then within
        the staleness bound, it only lacks the pull of the iteration just pushed. It is held
        (not preconditioned, not in the residual, not in the durable state) until that pull
        is applied and then taken exactly as a gradient computed at that moment would be; so
        pushes, commits and exactly-once are those of the sequential worker. A worker whose
        link is the bottleneck then iterates at max(compute, transfers) instead of their sum.
        """
        if (not self.policy.overlap or self._ahead is not None or self.state != 'pushing'
                or self.policy.scheduler == 'flown' or self._rejoin
                or (self.max_iterations is not None and self.clock >= self.max_iterations)
                or not self.rsp_ok()):
            return []
        self._ahead = 'running'
        self._compute_started_at = now + self.compute_sleep_s
        return [StartCompute(self.clock + 1, self.compute_sleep_s, overlapped=True)]

    def _on_ahead_done(self, grad: torch.Tensor, now: float) -> list:
        """Hold a gradient computed ahead for its turn (or drop a discarded one)."""
        if self._ahead == 'discard':
            self._ahead = None               # whatever it holds: its model was superseded
            return self._maybe_compute(now)  # (the computation that waited for it starts)
        self._check_gradient(grad)
        if now > self._compute_started_at:
            self.compute_est.update(now - self._compute_started_at)
        if not math.isfinite(float(grad.sum())):
            self._ahead = None
            return self._nonfinite(now) or \
                [Log('nonfinite_gradient', 1.0, self.rank)] + self._maybe_compute(now)
        self.nonfinite_in_a_row = 0
        if self._ahead_grad is None:
            self._ahead_grad = torch.empty_like(self.w)
        self._ahead_grad.copy_(grad)
        self._ahead = 'ready'
        return self._maybe_compute(now)

    def _drop_ahead(self) -> None:
        """Forget a gradient computed ahead (its model was superseded by a rejoin)."""
        if self._ahead == 'running':
            self._ahead = 'discard'       # its completion is then ignored
        elif self._ahead == 'ready':
            self._ahead = None
