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
WorkerEngine: the sans-I/O worker shared by BSP, SSP and Rog.

Loop (specs/rog.md 4.1, Train -> Push -> Pull): compute a gradient, precondition it (DEFSGDM
Nesterov momentum + weight decay), add it to the un-pushed accumulator ``A`` and age every row
(``n[i] += 1``); push rows in ATP order (mandatory prefix, then until the MTA-time deadline);
once the server's final ack says which rows it applied, those rows commit (``e = p - C(p)``,
``A = 0``, ``n = 0``) and the rest stay accumulated; then receive the server's update rows,
apply them to the model, and compute again.

The spec's accumulator ``A`` and error-feedback buffer ``e`` are only ever used as their sum
``p = A + e`` (what the next push sends), so the engine keeps that sum as one ``residual``
buffer: a commit is ``residual -= C(p)`` on the delivered rows, which leaves ``A + e`` exactly
as the spec's two updates do, with one model-sized buffer and one pass instead of three.

If rows the server will insist on (``n[i] > S``: the RSP predicate's own-rows level) were not
delivered, the worker pushes them again at once, before it pulls; otherwise the server would
stall it forever.

The engine owns the flat parameter vector ``w``; bind a module to it with
``layout.bind(module, engine.w)`` so that updates need no copies.
"""

from __future__ import annotations

import math

import numpy as np
from rog_ros.core.atp import Ewma, expected_rows, infinite_mask, priority_order, Smoothed
from rog_ros.core.compress.base import RowCodec
from rog_ros.core.compress.defsgdm import MomentumPreconditioner
from rog_ros.core.mta import mandatory_rows
from rog_ros.core.packing import DEFAULT_CHUNK_BYTES
from rog_ros.core.rows import RowLayout
from rog_ros.protocol.actions import Log, Send, StartCompute, Stopped
from rog_ros.protocol.messages import (
    check_schema, FLAG_REQUEST, ids_from_ranges, KIND_GRAD, KIND_UPDATE, MessageError, RowChunk,
    RowVersions, Schedule, SERVER, TransferAck)
from rog_ros.protocol.policies.base import SyncPolicy
from rog_ros.protocol.transfer import OutgoingTransfer, Receiver
import torch


class WorkerEngine:
    """
    Worker engine.

    Parameters
    ----------
    rank, n_workers : int
        This worker's rank in 0..N-1 and N.
    layout, codec, policy
        As on the server.
    w0 : Tensor
        Flat initial parameters (layout order); the engine keeps its own copy ``w``.
    momentum, nesterov, weight_decay
        DEFSGDM preconditioning (artifact: 0.9, True, 5e-4).
    track_conservation : bool
        Keep float64 running sums of everything computed and delivered, to check the
        conservation invariant in tests (costs two model-sized buffers).

    """

    def __init__(self, rank: int, n_workers: int, layout: RowLayout, codec: RowCodec,
                 policy: SyncPolicy, w0: torch.Tensor, momentum: float = 0.9,
                 nesterov: bool = True, weight_decay: float = 5e-4,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES, window: int = 4,
                 end_timeout_s: float = 2.0, track_conservation: bool = False):
        if layout.whole_model != policy.whole_model:
            raise ValueError(f'policy {policy.name} needs whole_model={policy.whole_model}')
        if not 0 <= rank < n_workers:
            raise ValueError(f'rank {rank} outside 0..{n_workers - 1}')
        self.rank, self.n = rank, n_workers
        self.layout, self.codec, self.policy = layout, codec, policy
        self.chunk_bytes, self.window, self.end_timeout_s = chunk_bytes, window, end_timeout_s
        dtype = w0.dtype
        self.w = w0.detach().clone()
        self.precondition = MomentumPreconditioner(layout.n_params, momentum, nesterov,
                                                   weight_decay, dtype=dtype)
        self.residual = torch.zeros(layout.n_params, dtype=dtype)   # A + e of the spec
        self.withheld = torch.zeros(layout.n_rows, dtype=torch.int32)
        self.vloc = torch.zeros(layout.n_rows, n_workers, dtype=torch.int32)
        self.clock = 0
        self.push_deadline_s = 0.0 if not policy.whole_model else -1.0
        self.compute_sleep_s = 0.0
        self.receiver = Receiver(rank, layout, codec)
        self.push: OutgoingTransfer | None = None
        self._push_p: torch.Tensor | None = None
        self._push_scales: torch.Tensor | None = None
        self._push_per_row = False
        self.pulled_clock = 0           # newest clock whose pull has been applied
        self.pending_versions: dict[int, RowVersions] = {}
        self.state = 'idle'             # idle|computing|pushing|pulling|stopped
        self._last_end: RowChunk | None = None   # END of the last finished push
        self._pull_poke_at: float | None = None  # when to remind the server we wait
        self._grant_poke_at = 0.0                # FLOWN: when to repeat a slot request
        self.next_tid = 0
        self.thr_up = Ewma()
        self.row_nbytes = codec.row_nbytes(layout)
        self.compute_est = Smoothed()    # seconds per computation
        self._compute_started_at = 0.0
        self._d = torch.empty(layout.n_params, dtype=dtype)
        self._scratch = torch.empty(layout.n_params, dtype=dtype)
        self.track = track_conservation
        if self.track:
            self.computed_total = torch.zeros(layout.n_params, dtype=torch.float64)
            self.delivered_total = torch.zeros(layout.n_params, dtype=torch.float64)
        # metrics
        self.bytes_up = 0
        self.bytes_down = 0
        self.rejects = 0
        self.followups = 0

    # ================================================================== public API
    def start(self, now: float) -> list:
        """Begin training: compute the first iteration."""
        if self.state != 'idle':
            return []
        return self._compute(now)

    def _compute(self, now: float) -> list:
        self.state = 'computing'
        self._compute_started_at = now + self.compute_sleep_s
        return [StartCompute(self.clock + 1, self.compute_sleep_s)]

    def on_compute_done(self, grad: torch.Tensor, now: float) -> list:
        """Take a gradient (flat, layout order) for the iteration that StartCompute asked for."""
        if self.state != 'computing':
            raise RuntimeError(f'on_compute_done in state {self.state}')
        if grad.shape != self.w.shape:
            raise ValueError(f'gradient has shape {tuple(grad.shape)}, expected '
                             f'{tuple(self.w.shape)}')
        if not math.isfinite(float(grad.sum())):
            # A diverged step must not poison the fleet: drop it, keep the clock.
            return [Log('nonfinite_gradient', 1.0, self.rank)] + self._compute(now)
        if now > self._compute_started_at:
            self.compute_est.update(now - self._compute_started_at)
        d = self.precondition(grad, self.w, self._d)
        self.residual += d
        if self.track:
            self.computed_total += d
        self.withheld += 1
        self.clock += 1
        if self.policy.scheduler == 'flown':
            return self._request_slot(now)
        return self._start_push(now)

    def _request_slot(self, now: float) -> list:
        """FLOWN: ask the server for a transfer slot; the push starts on its grant."""
        self.state = 'awaiting_grant'
        self._grant_poke_at = now + 4 * self.end_timeout_s
        return [Send(SERVER, RowChunk(transfer_id=self.next_tid + 1, seq=0, sender=self.rank,
                                      receiver=SERVER, kind=KIND_GRAD, clock=self.clock,
                                      flags=FLAG_REQUEST, codec=self.codec.codec_id))]

    def on_message(self, msg, now: float) -> list:
        try:
            check_schema(msg)
            if isinstance(msg, TransferAck):
                return self._on_ack(msg, now)
            if isinstance(msg, RowChunk):
                return self._on_chunk(msg, now)
            if isinstance(msg, Schedule):
                return self._on_schedule(msg, now)
            if isinstance(msg, RowVersions):
                if msg.n_workers != self.n:
                    raise MessageError('RowVersions for a different fleet size')
                self.pending_versions[msg.transfer_id] = msg
                return []
            raise MessageError(f'worker does not accept {type(msg).__name__}')
        except MessageError as err:
            self.rejects += 1
            return [Log('reject', 1.0, self.rank, {'error': str(err)})]

    def on_tick(self, now: float) -> list:
        if self.push is not None:
            return [Send(SERVER, c) for c in self.push.on_tick(now)]
        if self.state == 'awaiting_grant' and now >= self._grant_poke_at:
            return self._request_slot(now)         # request or grant lost: ask again
        if (self.state == 'pulling' and self._pull_poke_at is not None
                and now >= self._pull_poke_at and self._last_end is not None):
            # Waiting long for the pull: the server may have lost our END, or we lost its
            # stop order. Repeating the END is idempotent and makes the server answer again.
            self._pull_poke_at = now + 4 * self.end_timeout_s
            return [Send(SERVER, self._last_end), Log('pull_poke', 1.0, self.rank)]
        return []

    def next_wakeup(self) -> float | None:
        if self.push is not None:
            return self.push.next_wakeup()
        if self.state == 'awaiting_grant':
            return self._grant_poke_at
        return self._pull_poke_at if self.state == 'pulling' else None

    # ================================================================== push
    def _start_push(self, now: float) -> list:
        pol, layout = self.policy, self.layout
        p = self.residual    # not modified until this push commits: no compute meanwhile
        trs = layout.tensor_row_abs_sum(p)
        row_sums = layout.row_abs_sum(p, trs)
        if pol.whole_model:
            order = torch.arange(layout.n_rows)
            k_min = layout.n_rows
        else:
            urgency = self.withheld
            inf = infinite_mask(urgency, pol.staleness, pol.convention)
            n_inf = int(inf.sum())
            if pol.ordering:
                order = priority_order(urgency, row_sums, inf,
                                       use_magnitude=pol.use_magnitude, multiply=True)
            else:
                order = priority_order(urgency, row_sums, inf, use_magnitude=False,
                                       multiply=False)
            k_min = mandatory_rows(layout.n_rows, pol.mta, n_inf)
        if self.push_deadline_s < 0 or pol.whole_model:
            deadline = math.inf
        else:
            floor = pol.deadline_floor * self.compute_est.value
            deadline = now + max(self.push_deadline_s, floor)
        row_mask = None
        if pol.scale_sent_rows and not pol.whole_model and not pol.chunk_scales:
            k_est = expected_rows(order, self.row_nbytes, k_min, deadline - now,
                                  self.thr_up.value_bps)
            row_mask = torch.zeros(layout.n_rows, dtype=torch.bool)
            row_mask[order[:k_est]] = True
        scales = self.codec.scales(layout, p, trs, row_mask)
        rowbytes = self.codec.encode(layout, p, scales)
        self.next_tid += 1
        self.push = OutgoingTransfer(transfer_id=self.next_tid, sender=self.rank,
                                     receiver=SERVER, kind=KIND_GRAD, clock=self.clock,
                                     layout=layout, codec=self.codec, rowbytes=rowbytes,
                                     scales=scales, order=order, n_mandatory=k_min,
                                     deadline=deadline, now=now, window=self.window,
                                     chunk_bytes=self.chunk_bytes,
                                     end_timeout_s=self.end_timeout_s,
                                     rate_bps=self.thr_up.value_bps,
                                     tensor_row_sums=trs if pol.chunk_scales else None)
        self.push.rate_hint_bps = self.thr_up.value_bps
        self._push_p = p
        self._push_scales, self._push_per_row = self.push.commit_scales()
        self.state = 'pushing'
        return [Send(SERVER, c) for c in self.push.pump(now)]

    def _on_ack(self, ack: TransferAck, now: float) -> list:
        if ack.sender != SERVER or ack.receiver != self.rank:
            raise MessageError('ack not addressed to this worker')
        tr = self.push
        if tr is None or ack.transfer_id != tr.transfer_id:
            return []                          # late/duplicate ack of a finished transfer
        if not ack.final:
            return [Send(SERVER, c) for c in tr.on_ack(ack, now)]
        delivered = tr.on_final(ack, now)
        if delivered is None:
            return []
        self._commit_push(delivered)
        self._last_end = tr._end(tr.end_sent_at)
        nbytes, secs = tr.throughput_sample()
        if nbytes:
            self.thr_up.update(nbytes, secs)
        self.bytes_up += tr.bytes_sent
        self.push = None
        out = [Log('push_done', float(delivered.size), self.rank,
                   {'bytes': nbytes, 'seconds': secs, 'clock': self.clock})]
        if bool((self.withheld > self.policy.staleness).any()):
            # The server would stall us on our own rows: push them again right away.
            self.followups += 1
            return out + [Log('followup_push', 1.0, self.rank)] + self._start_push(now)
        self.state = 'pulling'
        self._pull_poke_at = now + 4 * self.end_timeout_s
        return out + self._maybe_compute(now)

    def _commit_push(self, delivered: np.ndarray) -> None:
        """Delivered rows: residual -= C(p) (A = 0, e = p - C(p)), n = 0. Others keep theirs."""
        if delivered.size == 0:
            return
        layout = self.layout
        mask = torch.zeros(layout.n_rows, dtype=torch.bool)
        mask[torch.from_numpy(delivered)] = True
        full = delivered.size == layout.n_rows
        q = self.codec.quantize(layout, self._push_p, self._push_scales, out=self._scratch,
                                row_mask=None if full else mask, per_row=self._push_per_row)
        if self.track:
            self.delivered_total += q
        self.residual.sub_(q)
        self.withheld.masked_fill_(mask, 0)
        self._push_p = None

    # ================================================================== pull
    def _on_schedule(self, msg: Schedule, now: float) -> list:
        if msg.worker != self.rank:
            raise MessageError('schedule for another worker')
        if not math.isfinite(msg.push_deadline_s) or not math.isfinite(msg.compute_sleep_s):
            raise MessageError('non-finite schedule')
        if msg.stop:
            self.state = 'stopped'
            return [Stopped('server says training is over')]
        self.push_deadline_s = float(msg.push_deadline_s)
        self.compute_sleep_s = max(0.0, float(msg.compute_sleep_s))
        if self.state == 'awaiting_grant':
            return self._start_push(now)           # FLOWN: our slot was granted
        return []

    def _on_chunk(self, chunk: RowChunk, now: float) -> list:
        if chunk.kind != KIND_UPDATE or chunk.sender != SERVER or chunk.receiver != self.rank:
            raise MessageError('unexpected chunk for a worker')
        acks, closed = self.receiver.on_chunk(chunk, now)
        out = [Send(SERVER, a) for a in acks]
        if closed is not None:
            out += self._apply_pull(closed, now)
        return out

    def _apply_pull(self, inc, now: float) -> list:
        mask, rowbytes, scales, chunk_ranges = inc.close()
        n_rows = int(mask.sum())
        if n_rows:
            partial = n_rows < self.layout.n_rows
            q = self.codec.decode(self.layout, rowbytes, scales, self._scratch,
                                  row_mask=mask if partial else None,
                                  per_row=inc.per_row_scales)
            self.w -= q
            versions = self.pending_versions.pop(inc.transfer_id, None)
            if versions is not None:
                self._apply_versions(versions, mask)
        self.pending_versions = {k: v for k, v in self.pending_versions.items()
                                 if k > inc.transfer_id}
        self.bytes_down += inc.bytes
        self.pulled_clock = max(self.pulled_clock, inc.clock)
        self._pull_poke_at = now + 4 * self.end_timeout_s
        out = [Send(SERVER, self.receiver.final_ack(inc, chunk_ranges, now)),
               Log('pull_applied', float(n_rows), self.rank)]
        return out + self._maybe_compute(now)

    def _apply_versions(self, msg: RowVersions, mask: torch.Tensor) -> None:
        starts = np.asarray(msg.run_starts, dtype=np.int64)
        lengths = np.asarray(msg.run_lengths, dtype=np.int64)
        if starts.size != lengths.size or msg.versions.size != starts.size * self.n:
            raise MessageError('RowVersions malformed')
        if starts.size == 0:
            return
        rows = ids_from_ranges(np.stack([starts, starts + lengths], 1).reshape(-1))
        if rows.size and (rows.max() >= self.layout.n_rows):
            raise MessageError('RowVersions row out of range')
        vv = np.repeat(np.asarray(msg.versions, np.int32).reshape(-1, self.n), lengths, axis=0)
        rows_t = torch.from_numpy(rows)
        keep = mask[rows_t]
        self.vloc[rows_t[keep]] = torch.from_numpy(vv)[keep]

    def _maybe_compute(self, now: float) -> list:
        if self.state == 'pulling' and self.push is None and self.pulled_clock >= self.clock:
            return self._compute(now)
        return []

    # ================================================================== diagnostics
    def local_staleness(self) -> int:
        """Max over rows and workers of clock - Vloc (the worker-side RSP view)."""
        return int(self.clock - int(self.vloc.min()))

    def conservation_residual(self) -> float:
        """Max |computed - (delivered + A + e)|; in-flight rows still live in A + e."""
        if not self.track:
            raise RuntimeError('construct the engine with track_conservation=True')
        rest = self.delivered_total + self.residual.to(torch.float64)
        return float((self.computed_total - rest).abs().max())
