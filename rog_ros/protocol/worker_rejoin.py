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
Restarts on either side of a worker: its durable state, rejoin, exactly-once resend.

``state_dict`` / ``load_state_dict``: a worker restored under a new incarnation first
re-sends the END of its in-flight push under its old incarnation and commits what the
server's answer lists (``_recover_send``), then rejoins: JOIN, push, and a lossless snapshot
pull. When the server's incarnation changes (``_server_restart``), the decoded pushes
delivered after its last confirmed checkpoint go back into the residual and are pushed again
(``_readd_undurable``); those the checkpoint covers are dropped (``_prune_undurable``).

``RejoinMixin`` is one part of ``WorkerEngine`` (``worker.py``) and works on its state.
"""

from __future__ import annotations

import numpy as np
from rog_ros.protocol.actions import Log, Send
from rog_ros.protocol.messages import (
    FLAG_FINAL, FLAG_JOIN, KIND_GRAD, RowChunk, Schedule, SERVER, TransferAck)
from rog_ros.protocol.ps_final import final_model_id
from rog_ros.protocol.revival import POKE_END_TIMEOUTS
from rog_ros.protocol.transfer import OutgoingTransfer
import torch


class RejoinMixin:
    """Durable state and the rejoin of a ``WorkerEngine`` after a restart (either side)."""

    def _server_restart(self, msg, inc: int, now: float) -> list | None:
        """Handle a new server incarnation: drop what its predecessor left open, rejoin."""
        self.retired_servers = (self.retired_servers + [self.server_incarnation])[-8:]
        self.server_incarnation = inc
        # the previous run's reader stays matched for a lease: our writer keeps our chunks
        self.peer.hold(now + self.lease_s)
        tr = self.push
        if tr is not None and tr.end_sent_at is None:
            # Never closed there: nothing of it was applied. Its rows stay in the residual.
            self.push, self._push_p, self._push_scales = None, None, None
            self._push_sums = (None, -1, None)
        elif tr is not None:
            # Its END went out: the checkpoint may include it. Ask the new run (it answers
            # from the checkpoint's closed transfers, or with nothing applied), then rejoin.
            tr.end_sent_at = now - tr.end_timeout_s
        self.receiver.reset()
        self.snap_receiver.reset()
        self.pending_versions.clear()
        self.versions_parts.clear()
        self._parts_runs.clear()
        self.newest_pull_tid = 0
        self._snap_missing = None
        self._snap_versions = None
        self._await_hello = None
        self._rejoin = self._server_restarted = True
        self._drop_ahead()
        self._dirty = True
        out = [Log('server_restart', 1.0, self.rank)]
        if self.push is not None:
            out += [Send(SERVER, c) for c in self.push.on_tick(now)]
        elif self.state in ('pushing', 'pulling', 'awaiting_grant', 'recovering',
                            'rejoin_wait'):
            out += self._join(now)
        if isinstance(msg, Schedule):
            return out + self._on_schedule(msg, now)
        if isinstance(msg, TransferAck):
            return out + self._on_ack(msg, now)     # the new run's answer about our push
        return out

    def _join(self, now: float) -> list:
        """
        Say hello to the server; its Schedule answers start the rejoin push.

        Plus one JOIN per earlier run of ours whose pushes we keep, naming that run in
        ``tensor_ids`` as ``[low 32 bits, high 32 bits]``: its answer (addressed to that run)
        says which of that run's pushes the server's durable checkpoint holds; the server
        changes nothing for it.
        """
        self._rejoin = True
        self.state = 'rejoin_wait'
        self._join_poke_at = now + POKE_END_TIMEOUTS * self.end_timeout_s
        if self._await_hello is None:
            self._await_hello = {self.incarnation} | self._past_incarnations()
        out = []
        # Holding the final model, every JOIN says so, and which (the first one the server
        # hears of a new run of ours restarts us there): a server that owes it us counts it
        # delivered if it is its own, our acknowledgement having maybe died with our earlier
        # run, and else sends us its own (a restored server's other final model).
        flags = FLAG_JOIN | (FLAG_FINAL if self.holds_final else 0)
        held = self._held_final_id() if self.holds_final else b''
        for inc in sorted(self._await_hello):
            ask = (np.zeros(0, np.uint32) if inc == self.incarnation else
                   np.array([inc & 0xFFFFFFFF, inc >> 32], dtype=np.uint32))
            out.append(Send(SERVER, RowChunk(transfer_id=self.next_tid, seq=0, sender=self.rank,
                                             receiver=SERVER, kind=KIND_GRAD, clock=self.clock,
                                             flags=flags, codec=self.codec.codec_id,
                                             tensor_ids=ask, payload=held)))
        return out

    def _held_final_id(self) -> bytes:
        """
        Return ``final_model_id`` of the model we hold, computed once until rows change it.

        Of ``w`` as it is: a final model taken whole, or (``final_mixed``) part of two,
        whose id no server's final model has, so that one is sent again.
        """
        if self._final_id is None:
            self._final_id = final_model_id(self.w)
        return self._final_id

    def _rejoin_push(self, now: float) -> list:
        """Answered: (server restarted: resend what its checkpoint lacks), push, then pull."""
        out = []
        self._rejoin = False
        self._await_hello = None
        if self._fresh:
            self._fresh = False
            if not self._server_restarted:
                return self._compute(now)
        if self._server_restarted:
            self._server_restarted = False
            out += self._readd_undurable()
            # Its versions are the checkpoint's: refresh every row of ours at once.
            self.withheld.clamp_(min=self.policy.staleness + 1)
        if self.policy.scheduler == 'flown':
            return out + self._request_slot(now)
        return out + self._start_push(now)

    def _readd_undurable(self) -> list:
        """Pushes the restored server never saw go back into the residual."""
        if not self.undurable:
            return []
        total = torch.zeros_like(self.residual)
        for _, tid, rowbytes, scales, rows, per_row in self.undurable:
            total += self._decode_rows(rowbytes, scales, rows, per_row)
        self.residual += total
        if self.track:
            self.delivered_total -= total.to(torch.float64)
        n = len(self.undurable)
        self.undurable = []
        self._dirty = True
        return [Log('resend_after_server_restart', float(n), self.rank)]

    def _decode_rows(self, rowbytes, scales, rows: np.ndarray,
                     per_row: bool = False) -> torch.Tensor:
        mask = torch.zeros(self.layout.n_rows, dtype=torch.bool)
        mask[torch.from_numpy(rows)] = True
        full = rows.size == self.layout.n_rows
        return self.codec.decode(self.layout, rowbytes, scales, self._scratch,
                                 row_mask=None if full else mask, per_row=per_row)

    def _maybe_rejoin_push(self, now: float) -> list:
        if self.state == 'rejoin_wait' and not self._await_hello:
            return self._rejoin_push(now)
        return []

    def _prune_undurable(self, checkpoint_transfer: int, incarnation: int) -> None:
        """Pushes of run ``incarnation`` up to ``checkpoint_transfer`` are durable."""
        if incarnation == self.incarnation and checkpoint_transfer > self.checkpoint_transfer:
            self.checkpoint_transfer = checkpoint_transfer
        keep = [u for u in self.undurable
                if u[0] != incarnation or u[1] > checkpoint_transfer]
        if len(keep) != len(self.undurable):
            self.undurable = keep
            self._dirty = True

    def state_dict(self, copy: bool = True) -> dict:
        """
        Everything a restarted worker needs (tensors are copies).

        With ``copy`` False, the model, residual and momentum are the engine's own tensors,
        for a caller that serialises them at once on the engine's thread (the nodes: the
        copies were 3 model sizes more at each of a robot's saves, once per push).

        Save it atomically when the engine emits ``SaveState``. The in-flight push is included
        only once its END was sent (before that, the server can apply none of it).
        """
        sd = {
            'version': 1, 'rank': self.rank, 'n_workers': self.n,
            'codec': self.codec.codec_id,
            'incarnation': self.incarnation, 'server_incarnation': self.server_incarnation,
            # (the model as it is once late pulls held for the computation are applied:
            # the version table already counts them)
            'w': (self.w - self._late_q if self._late_q_pending
                  else self.w.clone() if copy else self.w),
            'residual': self.residual.clone() if copy else self.residual,
            'momentum': (None if self.precondition.buf is None
                         else self.precondition.buf.clone() if copy
                         else self.precondition.buf),
            'withheld': self.withheld.clone(), 'vloc': self.vloc.clone(),
            'active': self.active.clone(),
            'clock': self.clock, 'pulled_clock': self.pulled_clock, 'next_tid': self.next_tid,
            'push_deadline_s': self.push_deadline_s, 'compute_sleep_s': self.compute_sleep_s,
            'checkpoint_transfer': self.checkpoint_transfer,
            'readd_pending': self._server_restarted,   # a server restart not yet resent
            'holds_final': self.holds_final,     # the fleet's final model: w is that model
            'final_mixed': self.final_mixed,     # ... not whole: part of another's rows
            'undurable': [(i, t, b.clone(), sc.clone(), torch.from_numpy(rows.copy()), pr)
                          for i, t, b, sc, rows, pr in self.undurable],
            'push': None,
        }
        tr = self.push
        rec = self._recover
        if tr is not None and tr.end_sent_at is not None and not tr.finished:
            # (the run it speaks for: ours, or the earlier run whose push a restored engine
            # recovers; saved as ours, a crash during that recovery made the next run ask
            # about a push the server never saw, and push its gradient a second time)
            sd['push'] = {'transfer_id': tr.transfer_id,
                          'incarnation': int(tr.incarnation or self.incarnation),
                          'clock': tr.clock, 'scales': self._push_scales.clone(),
                          'per_row': bool(self._push_per_row),
                          'order': torch.from_numpy(tr.order.copy()),
                          'n_mandatory': tr.n_mandatory_arg, 'next_seq': tr.next_seq,
                          'chunk_bytes': self.chunk_bytes, 'flags': tr.flags}
        elif rec is not None:
            sd['push'] = dict(rec)
        if self.track:
            sd['computed_total'] = self.computed_total.clone()
            sd['delivered_total'] = self.delivered_total.clone()
        return sd

    def load_state_dict(self, sd: dict) -> None:
        """
        Restore a saved state into this fresh engine (built with a NEW incarnation).

        ``start()`` then re-sends the END of the saved in-flight push under its old incarnation
        and commits what the server's answer lists, and rejoins (JOIN, push, snapshot pull).
        """
        if self.state != 'idle':
            raise RuntimeError('load_state_dict needs a fresh engine')
        if sd.get('version') != 1 or sd['rank'] != self.rank or sd['n_workers'] != self.n:
            raise ValueError('worker state of another rank, fleet size or format')
        if int(sd['incarnation']) == self.incarnation:
            raise ValueError('a restored worker needs a new incarnation')
        if any(sd[k] is not None and sd[k].shape != self.w.shape
               for k in ('w', 'residual', 'momentum')):
            raise ValueError('worker state of another model')
        saved_codec = int(sd.get('codec', 1))       # states before codec 2 did not say
        if saved_codec != self.codec.codec_id and (sd['undurable'] or sd['push'] is not None):
            raise ValueError(f'worker state holds pushes encoded with codec {saved_codec}, '
                             f'this engine uses codec {self.codec.codec_id}: they cannot be '
                             'decoded (finish the run with the old version or start afresh)')
        self.w.copy_(sd['w'])
        self.residual.copy_(sd['residual'])
        # (created if a release gave momentum to a worker that started compensated to 0)
        self.precondition.load_buffer(sd['momentum'], like=self.w)
        self.withheld.copy_(sd['withheld'])
        self.vloc.copy_(sd['vloc'])
        self.active.copy_(sd['active'])
        self.clock, self.pulled_clock = int(sd['clock']), int(sd['pulled_clock'])
        self.next_tid = int(sd['next_tid'])
        self.push_deadline_s = float(sd['push_deadline_s'])
        self.compute_sleep_s = float(sd['compute_sleep_s'])
        self.server_incarnation = int(sd['server_incarnation'])
        self.checkpoint_transfer = -1      # (reported for our new run from now on)
        self._server_restarted = bool(sd.get('readd_pending', False))
        # A robot restarted after the final model came computes no more, as before its crash
        # (a non-final pull, from a server restored from before the end, sets it back), and
        # its node says its model is the fleet's. States saved before this key say False,
        # which is safe: such a robot rejoins as every restored one does, computes nothing
        # before the server answers its JOIN, and a server that had sent it the final model
        # has stopped it and answers the JOIN with the stop order; only its node's words
        # differ ("this robot's own model" for what is the final model).
        self.holds_final = bool(sd.get('holds_final', False))
        self.final_mixed = bool(sd.get('final_mixed', False))
        # (a state saved before per-row scales has 5-tuples: per-tensor scales)
        self.undurable = [(u[0], u[1], u[2].clone(), u[3].clone(),
                           np.asarray(u[4]).astype(np.int64), bool(u[5]) if len(u) > 5 else False)
                          for u in sd['undurable']]
        if self.track and 'computed_total' in sd:
            self.computed_total.copy_(sd['computed_total'])
            self.delivered_total.copy_(sd['delivered_total'])
        self._recover = dict(sd['push']) if sd['push'] is not None else None
        self._rejoin = True
        self._fresh = False

    def keep_whole_final(self, w: torch.Tensor) -> int:
        """
        Take back ``w``, the last whole final model, for rows of another final model.

        For a stopped robot (``final_mixed``) whose saved state holds the final model it took
        whole: a restored server's second final model came only in part. Return how many
        rows of it were still owed (0 once a server restart forgot which).
        """
        if w.shape != self.w.shape:
            raise ValueError('saved final model of another model')
        owed = 0 if self._snap_missing is None else int(self._snap_missing.sum())
        self.w.copy_(w)
        self._final_id = None
        self.final_mixed = False
        return owed

    def _recover_send(self, now: float) -> list:
        """Rebuild the saved in-flight push and ask the server (old incarnation) about it."""
        rec = self._recover
        scales, per_row = rec['scales'], bool(rec.get('per_row', False))
        # per-row (chunk) scales are what the server decoded with; the transfer itself only
        # re-sends END, its per-tensor scales are then recomputed from the same residual
        t_scales = self.codec.scales(self.layout, self.residual) if per_row else scales
        rowbytes = self.codec.encode(self.layout, self.residual, t_scales)
        tr = OutgoingTransfer(transfer_id=rec['transfer_id'], sender=self.rank,
                              receiver=SERVER, kind=KIND_GRAD, clock=rec['clock'],
                              layout=self.layout, codec=self.codec, rowbytes=rowbytes,
                              scales=t_scales, order=rec['order'],
                              n_mandatory=rec['n_mandatory'], deadline=now, now=now,
                              window=self.window, chunk_bytes=rec['chunk_bytes'],
                              end_timeout_s=self.end_timeout_s, flags=rec.get('flags', 0),
                              peer=self.peer, lease_s=self.lease_s)
        if per_row:
            tr.row_scales = scales.numpy().astype(np.float32)
        tr.next_seq = int(rec['next_seq'])
        tr.saved = True
        tr.incarnation = int(rec['incarnation'])     # its END speaks for the old run
        self.push, self._push_p = tr, self.residual
        self._push_sums = (None, -1, None)     # (a restored push: its commit sums afresh)
        self._push_scales, self._push_per_row = tr.commit_scales()
        end = tr._end(now)
        return [Send(SERVER, end), Log('recover_push', 1.0, self.rank,
                                       {'transfer_id': tr.transfer_id})]
