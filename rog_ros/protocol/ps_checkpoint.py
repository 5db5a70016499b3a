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
Checkpoints of the parameter server and what they promise the workers (DESIGN section 10).

``state_dict`` copies the durable state; once the driver made it durable,
``checkpoint_confirmed`` makes every Schedule report the newest push of each worker the
state holds, so workers drop only what a restarted server will not need again. A restored
server (``load_state_dict``, new incarnation) applies a worker's pushes only from its rejoin.

``CheckpointMixin`` is one part of ``ServerEngine`` (``ps.py``) and works on its state.
"""

from __future__ import annotations

import numpy as np
from rog_ros.core.delivered import DeliveredVersions
from rog_ros.protocol.messages import TransferAck
import torch


class CheckpointMixin:
    """Durable state, its confirmation and restore for a ``ServerEngine``."""

    def _init_checkpoints(self, n_workers: int) -> None:
        # per worker {incarnation: newest applied push transfer id}
        self.applied_push: list[dict] = [{} for _ in range(n_workers)]
        self._states: dict[int, list] = {}         # state_id -> applied_push at that time
        self._next_state_id = 1
        self.confirmed_push: list[dict] = [{} for _ in range(n_workers)]
        # After a restore, only pushes a worker sent after its JOIN (ids above the JOIN's) are
        # applied: it re-added before them what the checkpoint lacks, and what the lost run
        # applied of its older pushes would otherwise leave gaps below checkpoint_transfer.
        self.restored = False
        self.join_tid: list[dict] = [{} for _ in range(n_workers)]

    def _checkpoint_for(self, r: int, inc: int = 0) -> int:
        """Newest push of run ``inc`` of r (default: its current run) a durable state holds."""
        return self.confirmed_push[r].get(inc or self.worker_inc[r], -1)

    def state_dict(self, copy: bool = True) -> dict:
        """
        Return the server's durable state (copies).

        With ``copy`` False, the model, the mirrors, the ledger and the final model are the
        engine's own tensors, for a caller that serialises them at once on the engine's thread
        (the nodes: the copies were 2 + N model sizes more at each checkpoint, 3 + N at the
        run's end).

        Model, mirrors, versions, clocks, incarnations, closed-transfer answers, each
        worker's newest applied push, outage-aware RSP's ledger (``discarded``), and the
        final model with the workers still owed it (``ps_final``).

        Write it atomically (temp file, fsync, rename), then call
        ``checkpoint_confirmed(state['state_id'])``: from then on Schedules tell workers which
        of their pushes it covers, and they drop what they kept for resending.
        """
        sid = self._next_state_id
        self._next_state_id += 1
        self._states[sid] = [dict(d) for d in self.applied_push]
        for old in sorted(self._states)[:-8]:
            del self._states[old]
        closed = {key: {tid: _ack_fields(a) for tid, a in book.items()}
                  for key, book in self.receiver.closed.items()}
        return {
            'version': 1, 'state_id': sid, 'n_workers': self.n,
            'w_srv': self.w_srv.clone() if copy else self.w_srv,
            'mirror': self.mirror.clone() if copy else self.mirror,
            'versions': self.versions.v.clone(),
            'clock': list(self.clock), 'stopped': list(self.stopped),
            'worker_inc': list(self.worker_inc), 'retired': [list(x) for x in self.retired],
            'applied_push': [dict(d) for d in self.applied_push],
            'next_tid': list(self.next_tid),
            'active': self.active.clone(), 'suspended_reason': dict(self.suspended_reason),
            'thr_up': [e.value_bps for e in self.thr_up],
            'thr_down': [e.value_bps for e in self.thr_down],
            'closed': closed, 'newest_closed': dict(self.receiver.newest_closed),
            'triggers': list(self.triggers), 'stall_time': list(self.stall_time),
            'bytes_up': self.bytes_up, 'bytes_down': self.bytes_down,
            # outage-aware RSP's ledger of late pushes discarded on purpose (conservation)
            'discarded': (None if self.discarded is None
                          else self.discarded.clone() if copy else self.discarded),
            'weighted_pushes': self.weighted_pushes,
            'rescaled_pushes': self.rescaled_pushes,
            'outage_suspensions': self.outage_suspensions,
            # (counts a restored server goes on with: its summary covers the whole run)
            'too_slow_suspensions': getattr(self, 'too_slow_suspensions', 0),
            'late_pushes': self.late_pushes, 'late_rows': self.late_rows,
            'late_pulls': self.late_pulls, 'late_pull_rows': self.late_pull_rows,
            # the end of a run (ps_final): the model sent, and to whom it is still owed
            # (never changed once taken: shared by the nodes' saves as by every robot's send)
            'final_values': (None if self.final_values is None
                             else self.final_values.clone() if copy else self.final_values),
            'owed_final': dict(self._owed_final), 'missed_final': dict(self._missed_final),
            'final_delivered': self.final_delivered, 'final_missed': self.final_missed,
            'let_go': self.let_go,
        }

    def checkpoint_confirmed(self, state_id: int) -> None:
        """Record that the driver made state ``state_id`` durable (fsync + rename)."""
        pushes = self._states.pop(int(state_id), None)
        if pushes is None:
            raise ValueError(f'unknown or already confirmed state id {state_id}')
        for old in [k for k in self._states if k < state_id]:
            del self._states[old]
        self.confirmed_push = pushes

    def load_state_dict(self, sd: dict) -> None:
        """
        Restore a checkpoint into this fresh engine (built with a NEW incarnation).

        Every worker then rejoins: the first message of its run tells it the server
        restarted; it resends the pushes this checkpoint lacks and pulls a snapshot.
        """
        if sd.get('version') != 1 or sd['n_workers'] != self.n:
            raise ValueError('server state of another format or fleet size')
        if sd['w_srv'].shape != self.w_srv.shape or any(
                sd.get(k) is not None and sd[k].shape != self.w_srv.shape
                for k in ('discarded', 'final_values')):
            raise ValueError('server state of another model')
        self.w_srv.copy_(sd['w_srv'])
        self.mirror.copy_(sd['mirror'])
        self.versions.v.copy_(sd['versions'])
        self.delivered = DeliveredVersions(self.layout.n_rows, self.n, self.delivered.depth,
                                           self.versions.v)
        self.clock, self.stopped = list(sd['clock']), list(sd['stopped'])
        self.worker_inc = list(sd['worker_inc'])
        self.retired = [list(x) for x in sd['retired']]
        self.applied_push = [dict(d) for d in sd['applied_push']]
        self.confirmed_push = [dict(d) for d in self.applied_push]   # durable: we loaded it
        self.restored = True
        self._absence_unarmed = True     # absence deadlines are not checkpointed: set anew
        self.join_tid = [{} for _ in range(self.n)]
        self.next_tid = list(sd['next_tid'])
        self.active.copy_(sd['active'])
        self.suspended_reason = dict(sd['suspended_reason'])
        for e, v in zip(self.thr_up, sd['thr_up']):
            e.value_bps = v
        for e, v in zip(self.thr_down, sd['thr_down']):
            e.value_bps = v
        for (s, inc), book in sd['closed'].items():
            for tid, fields in sorted(book.items()):
                ack = TransferAck(**dict(fields, chunk_ranges=np.asarray(
                    fields['chunk_ranges'], dtype=np.uint32)))
                self.receiver.record(s, inc, tid, ack)
        self.receiver.newest_closed.update(sd['newest_closed'])
        self.triggers, self.stall_time = list(sd['triggers']), list(sd['stall_time'])
        self.bytes_up, self.bytes_down = sd['bytes_up'], sd['bytes_down']
        # (absent from checkpoints written before the ledger was kept in them)
        ledger = sd.get('discarded')
        self.discarded = None if ledger is None else ledger.to(torch.float64).clone()
        self.weighted_pushes = int(sd.get('weighted_pushes', 0))
        self.rescaled_pushes = int(sd.get('rescaled_pushes', 0))
        self.outage_suspensions = int(sd.get('outage_suspensions', 0))
        for name in ('too_slow_suspensions', 'late_pushes', 'late_rows', 'late_pulls',
                     'late_pull_rows'):
            setattr(self, name, int(sd.get(name, 0)))    # (0: a checkpoint from before)
        # a restart during the end sends the same final model to those still owed it
        final = sd.get('final_values')
        self.final_values = None if final is None else final.clone()
        self._owed_final = {int(r): int(c) for r, c in sd.get('owed_final', {}).items()}
        self._missed_final = {int(r): int(c) for r, c in sd.get('missed_final', {}).items()}
        self.final_delivered = int(sd.get('final_delivered', 0))
        self.final_missed = int(sd.get('final_missed', 0))
        self.let_go = int(sd.get('let_go', 0))
        # What each worker holds now is unknown: every pull starts with a snapshot.
        for r in range(self.n):
            self._new_snapshot_epoch(r)


def _ack_fields(ack: TransferAck) -> dict:
    """Return a TransferAck as plain fields (for checkpoints)."""
    return {'transfer_id': ack.transfer_id, 'sender': ack.sender, 'receiver': ack.receiver,
            'seq': ack.seq, 'final': ack.final, 'bytes_received': ack.bytes_received,
            'chunk_ranges': [int(x) for x in ack.chunk_ranges],   # plain types: torch.load
            'receive_time': ack.receive_time, 'target_incarnation': ack.target_incarnation}
