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
ServerEngine: the sans-I/O parameter server shared by BSP, SSP and Rog (variant A).

State (specs/rog.md 2.3, 4.3-4.4): the reference model ``w_srv = w0 - sum of all applied
updates``; the row version table ``v``; per worker the versions already delivered
(``sent[r]``, derived from per-row change stamps in O(N x M): ``core/delivered.py``); and
per worker r what the spec keeps as the aggregated update not yet delivered to r (``G[r]``)
plus the downlink error-feedback buffer (``E[r]``).

Flow per worker: its push transfer closes (END) -> rows are decoded, scaled by lr/N and applied
to ``w_srv`` (so they enter every ``G[s]``) -> the worker's pull waits until the RSP predicate
holds (a *stall*, counted as a threshold trigger) -> a downlink transfer of ``G[r] + E[r]`` in
ATP order -> on the worker's final ack, the delivered rows' decoded values ``C(p)`` leave
``G[r] + E[r]`` (the spec's ``G[r] -= snapshot``, ``E[r] = p - C(p)``, in one step; updates
that arrived meanwhile stay).

How it is stored: ``G[r]`` and ``E[r]`` are only ever used as their sum, and that sum is exactly
``model[r] - w_srv``, where ``model[r]`` is worker r's model: ``w0`` minus every ``C(p)``
delivered to r. The engine keeps ``model[r]`` (the *mirror*) instead of ``G`` and ``E``: an
uplink update then touches one vector (``w_srv``) instead of N, a downlink commit subtracts the
same decoded values the worker subtracts (so the mirror is bit-identical to the worker's
model), and the server holds N + 1 model-sized buffers instead of 2N + 1.
``worker_model(r)`` therefore evaluates what the workers really hold, never rows they have not
received (artifact mistake 7.3.2).

Faults (DESIGN section 10, docs/faults.md):

* Incarnations. Every message carries its sender's run id. The server tracks each worker's
  current incarnation; a new one resets the server's per-worker transfer state (open uplink and
  downlink dropped without commit) and the worker rejoins: its next pull is a *snapshot*, the
  server's model ``w_srv`` sent losslessly (``FLAG_SNAPSHOT``, raw floats), which replaces the
  worker's rows; the server sets ``mirror[r]`` to exactly what was delivered (repeating the
  undelivered rows until all arrived), with the version table. Messages of a superseded
  incarnation are dropped and counted, except an END, answered from the closed-transfer cache
  (kept per sender and incarnation) or with a final ack listing no chunks (never applied).
  Uplink traffic addressed to an earlier run of the server is not applied; an END or JOIN of it
  is answered with a Schedule, which tells the worker the server restarted.
* Downlink repair. A RowVersions precedes every END (retransmissions too). After a downlink's
  final ack, if the rows the worker now holds still violate its RSP check (mandatory rows were
  lost), a repair downlink starts at once.
* Membership. A worker silent for ``absence_timeout_s`` is suspended from the staleness rules
  (its version column is ignored; ``suspend``/``readmit``); it rejoins the check once its rows
  are within the bound. Pulls are served only while ``min_workers`` workers are active.
* Checkpoints. ``state_dict``/``load_state_dict``; ``checkpoint_confirmed(state_id)`` once the
  driver made a state durable; every Schedule then reports, as ``checkpoint_transfer``, the
  newest push of that worker the confirmed checkpoint includes.
* Bounds: clocks within ``max_iterations`` + slack, at most two open transfers per sender,
  chunk sizes and row ranges within the model, all checked before anything is allocated.
"""

from __future__ import annotations

import math
import random

import numpy as np
from rog_ros.core.atp import (
    Ewma, expected_rows, infinite_mask, mta_time, priority_order, Smoothed)
from rog_ros.core.compress.base import RowCodec
from rog_ros.core.compress.identity import Identity
from rog_ros.core.delivered import DeliveredVersions
from rog_ros.core.mta import mandatory_rows, row_budget
from rog_ros.core.packing import DEFAULT_CHUNK_BYTES
from rog_ros.core.rows import RowLayout
from rog_ros.core.slack import StragglerSlack
from rog_ros.core.versions import VersionTable
from rog_ros.protocol.actions import Log, Send
from rog_ros.protocol.messages import (
    check_schema, FLAG_END, FLAG_FREE, FLAG_JOIN, FLAG_LATE, FLAG_REQUEST, FLAG_SNAPSHOT,
    KIND_GRAD, KIND_UPDATE, LinkStats, MAX_CLOCK, MessageError, ranges_from_sorted, RowChunk,
    RowVersions, Schedule, SERVER, stamp_incarnations, TransferAck)
from rog_ros.protocol.policies.base import SyncPolicy
from rog_ros.protocol.policies.flown import SlotScheduler
from rog_ros.protocol.transfer import (
    check_chunk, OutgoingTransfer, Receiver, snapshot_layout)
import torch

TOO_SLOW = 1.5
"""A robot whose time per iteration at the largest slack is this many times the fleet's
median runs free instead of holding the others (``SyncPolicy.free_stragglers``)."""
TOO_SLOW_BACK = 1.2
"""... and is readmitted once it needs less than this many times (hysteresis)."""

# Readmission backoff (``SyncPolicy.readmit_backoff``): a suspension within FLAP_WINDOW
# outage bounds of the worker's readmission is a flap; the k-th flap in a row keeps it out
# for 2**k bounds (at most 2**FLAP_MAX_DOUBLINGS) before it may be readmitted.
FLAP_WINDOW = 4.0
FLAP_MAX_DOUBLINGS = 5


class _Downlink:
    """An open downlink transfer to one worker and the snapshots it must commit."""

    def __init__(self, transfer: OutgoingTransfer, rowbytes: torch.Tensor,
                 scales: torch.Tensor, v_snap: torch.Tensor | None, active: torch.Tensor,
                 snapshot: bool = False, event: int = 0):
        self.transfer, self.rowbytes, self.v_snap = transfer, rowbytes, v_snap
        # what the worker decodes with: per chunk and tensor if the transfer has chunk
        # scales (never for lossless snapshots), else ``scales`` per tensor
        self.scales, self.per_row = transfer.commit_scales()
        self.event = event            # server event of the versions it carries (v_snap None)
        self.active = active          # membership the worker's RSP check will use
        self.bounds = None            # ... and its per-column bounds (straggler slack), or
        #                               None: the policy's S in every column
        self.slack = np.zeros(0, np.uint16)   # the slack its RowVersions carries (empty: none)
        self.snapshot = snapshot      # rows replace the worker's (rejoin), lossless
        self.versions: RowVersions | None = None


class ServerEngine:
    """
    Parameter-server engine.

    Parameters
    ----------
    layout : RowLayout
        Row layout of the shared model (``whole_model`` must match the policy).
    codec : RowCodec
        The codec the workers use (same instance type on both sides).
    policy : SyncPolicy
        bsp / ssp:S / rog:S and their knobs.
    n_workers : int
        N; every worker's update is scaled by lr/N.
    w0 : Tensor
        Flat initial parameters (layout order): the pre-trained model all workers start from.
    lr : float
        Learning rate, applied once, here (specs/rog.md E11).
    chunk_bytes, window : int
        Chunk payload cap and unacknowledged-chunk window of downlink transfers.
    max_iterations : int or None
        Stop the workers once all of them have pushed this many iterations.
    stall_warn_s : float
        A stall longer than this is reported with the rows and workers it waits for.
    incarnation : int or None
        This run's id (random non-zero 64-bit); None draws one. A restarted server (restored
        with ``load_state_dict``) must use a new one.
    absence_timeout_s : float or None
        Suspend a worker from the staleness rules after this long without a chunk, ack, JOIN or
        LinkStats from it (None: never).
    min_workers : int
        Quorum: pulls are served only while at least this many workers are active.
    clock_slack : int
        Clocks above ``max_iterations + clock_slack`` are rejected (bounds).

    """

    def __init__(self, layout: RowLayout, codec: RowCodec, policy: SyncPolicy, n_workers: int,
                 w0: torch.Tensor, lr: float, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 window: int = 4, max_iterations: int | None = None,
                 stall_warn_s: float = 30.0, end_timeout_s: float = 2.0,
                 incarnation: int | None = None, absence_timeout_s: float | None = None,
                 min_workers: int = 1, clock_slack: int = 16):
        if layout.whole_model != policy.whole_model:
            raise ValueError(f'policy {policy.name} needs whole_model={policy.whole_model}')
        if n_workers < 1:
            raise ValueError('need at least one worker')
        if not math.isfinite(lr) or lr <= 0:
            raise ValueError(f'learning rate must be positive and finite, got {lr}')
        if not 1 <= int(min_workers) <= n_workers:
            raise ValueError(f'min_workers must be in 1..{n_workers}, got {min_workers}')
        if absence_timeout_s is not None and not absence_timeout_s > 0:
            raise ValueError(f'absence_timeout_s must be positive, got {absence_timeout_s}')
        if incarnation is not None and not 0 < int(incarnation) < 2 ** 64:
            raise ValueError(f'incarnation must be in [1, 2**64), got {incarnation}')
        self.layout, self.codec, self.policy = layout, codec, policy
        self.n = n_workers
        self.lr = float(lr)
        self.chunk_bytes, self.window = int(chunk_bytes), int(window)
        self.max_iterations = max_iterations
        self.stall_warn_s = float(stall_warn_s)
        self.end_timeout_s = float(end_timeout_s)
        dtype = w0.dtype
        self.w_srv = w0.detach().clone()
        self.mirror = self.w_srv.unsqueeze(0).repeat(n_workers, 1)   # each worker's model
        self.versions = VersionTable(layout.n_rows, n_workers)
        self.delivered = DeliveredVersions(layout.n_rows, n_workers)   # sent[r] = vloc of r
        self.clock = [0] * n_workers
        self.max_clock = (MAX_CLOCK if max_iterations is None
                          else min(MAX_CLOCK, int(max_iterations) + int(clock_slack)))
        self.receiver = Receiver(SERVER, layout, codec, max_clock=self.max_clock)
        self.downlinks: list[_Downlink | None] = [None] * n_workers
        self.pending: dict[int, int] = {}          # worker -> clock waiting for its pull
        self.stall_since: dict[int, float] = {}
        self.stall_warned: dict[int, float] = {}
        self.next_tid = [0] * n_workers
        self.thr_up = [Ewma() for _ in range(n_workers)]
        self.thr_down = [Ewma() for _ in range(n_workers)]
        self.row_nbytes = codec.row_nbytes(layout)
        self.total_row_bytes = int(self.row_nbytes.sum())
        self.stopped = [False] * n_workers
        self._scratch = torch.empty(layout.n_params, dtype=dtype)
        self._p = torch.empty(layout.n_params, dtype=dtype)      # G[r] + E[r] of a downlink
        self.slots = (SlotScheduler(policy.slots, policy.staleness)
                      if policy.scheduler == 'flown' else None)
        self.link_estimate_bps = [0.0] * n_workers   # netmon's view (LinkStats), for FLOWN
        self.compute_est = [Smoothed() for _ in range(n_workers)]   # seconds per computation
        self.rtt_down = [Smoothed() for _ in range(n_workers)]      # downlink round trips
        self._pull_done_at: list[float | None] = [None] * n_workers
        # metrics
        self.triggers = [0] * n_workers
        self.stall_time = [0.0] * n_workers
        self.bytes_up = 0
        self.bytes_down = 0
        self.rejects = 0
        self.superseded = 0           # messages of a superseded worker incarnation
        self.repairs = 0              # downlinks repeated for lost mandatory rows
        # incarnations (DESIGN section 10)
        self.incarnation = (int(incarnation) if incarnation is not None
                            else random.SystemRandom().getrandbits(64) or 1)
        self.worker_inc = [0] * n_workers          # 0 = not heard yet
        self.retired: list[list[int]] = [[] for _ in range(n_workers)]
        self.unsynced: list[torch.Tensor | None] = [None] * n_workers   # rejoin snapshot owes
        self._last_join: list[tuple | None] = [None] * n_workers
        self.snap_codec = Identity(dtype)
        self.snap_layout = snapshot_layout(layout)
        self.snap_v: list[torch.Tensor | None] = [None] * n_workers   # epoch's versions
        self.snap_event = [0] * n_workers                              # ... their event
        # membership
        self.absence_timeout_s = absence_timeout_s
        self.min_workers = int(min_workers)
        self.active = torch.ones(n_workers, dtype=torch.bool)
        self.suspended_reason: dict[int, str] = {}
        self.absent_at: list[float | None] = [None] * n_workers   # absence deadlines
        # checkpoints: newest applied push (incarnation, transfer id) per worker
        # checkpoints: per worker {incarnation: newest applied push transfer id}
        self.applied_push: list[dict] = [{} for _ in range(n_workers)]
        self._states: dict[int, list] = {}         # state_id -> applied_push at that time
        self._next_state_id = 1
        self.confirmed_push: list[dict] = [{} for _ in range(n_workers)]
        # After a restore, only pushes a worker sent after its JOIN (ids above the JOIN's) are
        # applied: it re-added before them what the checkpoint lacks, and what the lost run
        # applied of its older pushes would otherwise leave gaps below checkpoint_transfer.
        self.restored = False
        self.join_tid: list[dict] = [{} for _ in range(n_workers)]
        # outage-aware RSP (DESIGN section 4): fleet iteration time, late-push ledger
        self.iter_est = [Smoothed() for _ in range(n_workers)]   # seconds between pushes
        self._last_push_at: list[float | None] = [None] * n_workers
        self.last_push_weight = 1.0   # factor of the push applied last (late_weight x
        #                               outage_scale)
        # float64 [P]: (1 - weight) x lr/N x push, signed (a rescaled push adds mass)
        self.discarded: torch.Tensor | None = None
        self.outage_suspensions = 0
        self.too_slow_suspensions = 0     # ... of them for a link too slow for any slack
        # straggler slack (core/slack.py): extra staleness for robots that hold the others
        self.slack = (StragglerSlack(n_workers, max_slack=policy.slack_max)
                      if policy.straggler_slack and not policy.whole_model
                      and policy.staleness > 0 and self.slots is None else None)
        self._blockers: dict[int, list] = {}       # stalled worker -> robots holding it
        self._slack_looked_at = -math.inf          # last controller pass (throttled)
        self._outage_from: dict[int, float] = {}   # stalled worker -> watch restarted at
        self._readmitted_at: dict[int, float] = {}  # readmission backoff: when, how many
        self._flaps: dict[int, int] = {}            # quick re-suspensions in a row, and the
        self._hold_until: dict[int, float] = {}     # earliest readmission that follows
        self._too_slow: set[int] = set()   # out for a link too slow for any slack: runs free
        self._free_due: list = []           # ... found by the slack controller, not yet out
        self.weighted_pushes = 0
        self.rescaled_pushes = 0      # active pushes applied at lr/(N - k) (outage_scale)
        self.late_pushes = 0          # FLAG_LATE pushes applied (rows sent while computing)
        self.late_rows = 0            # ... and the rows they delivered
        self.late_pulls = 0           # FLAG_LATE downlinks completed (rows sent while the
        self.late_pull_rows = 0       # worker computes) and the rows they delivered
        self._late_pull_until = [0.0] * n_workers   # expected end of each one's computation
        self._late_pull_clock = [0] * n_workers     # ... and the clock of the pull before it

    # ================================================================== public API
    def on_message(self, msg, now: float) -> list:
        try:
            check_schema(msg)
            if not isinstance(msg, (RowChunk, TransferAck, LinkStats)):
                raise MessageError(f'server does not accept {type(msg).__name__}')
            pre, go_on = self._admit(msg, now)
            if not go_on:
                return self._out(pre)
            if isinstance(msg, RowChunk):
                return self._out(pre + self._on_chunk(msg, now))
            if isinstance(msg, TransferAck):
                return self._out(pre + self._on_ack(msg, now))
            return self._out(pre + self._on_link_stats(msg))
        except MessageError as err:
            self.rejects += 1
            return [Log('reject', 1.0, getattr(msg, 'sender', -1), {'error': str(err)})]

    def on_tick(self, now: float) -> list:
        out = []
        for r, dl in enumerate(self.downlinks):
            if dl is not None:
                out += self._sends(r, dl, dl.transfer.on_tick(now))
        for r, t0 in self.stall_since.items():
            # (issue 9 defect 1) a stored deadline, the very value next_wakeup returns
            if now >= self.stall_warned.get(r, t0 + self.stall_warn_s):
                self.stall_warned[r] = now + self.stall_warn_s
                out.append(self._stall_diagnostic(r, now))
        # membership: fires when now >= the stored deadline (the value next_wakeup returned)
        for r in self._absence_watch():
            if now >= self.absent_at[r]:
                out += self.suspend(r, now, 'absent')
        out += self._outage_check(now)
        return self._out(out)

    def next_wakeup(self) -> float | None:
        times = [dl.transfer.next_wakeup() for dl in self.downlinks if dl is not None]
        times += [self.stall_warned.get(r, t0 + self.stall_warn_s)
                  for r, t0 in self.stall_since.items()]
        times += [self.absent_at[r] for r in self._absence_watch()]
        times.append(self._outage_deadline())
        times = [t for t in times if t is not None]
        return min(times) if times else None

    def worker_model(self, r: int) -> torch.Tensor:
        """Exactly what worker r holds once its acks are in (w_srv + G[r] + E[r]); a copy."""
        return self.mirror[r].clone()

    def consensus_model(self) -> torch.Tensor:
        """Mean of the workers' models (the model to evaluate and checkpoint)."""
        return self.mirror.mean(0)

    @property
    def finished(self) -> bool:
        return all(self.stopped)

    # ================================================================== incarnations
    def _out(self, actions: list) -> list:
        """Stamp our incarnation, the receiver's, and the durable checkpoint on every send."""
        for a in actions:
            if isinstance(a, Send):
                m = a.msg
                stamp_incarnations(m, self.incarnation,
                                   self.worker_inc[a.dest] if 0 <= a.dest < self.n else None)
                if isinstance(m, Schedule) and m.checkpoint_transfer == -1:
                    m.checkpoint_transfer = self._checkpoint_for(m.worker,
                                                                 m.target_incarnation)
        return actions

    def _admit(self, msg, now: float) -> tuple[list, bool]:
        """
        Incarnation and presence bookkeeping for a message from a worker.

        Returns ``(actions, go_on)``: go_on False when the actions answer ``msg`` instead.
        """
        if isinstance(msg, LinkStats):
            if 0 <= msg.node < self.n:
                return self._heard(msg.node, now), True
            return [], True
        r = getattr(msg, 'sender', None)
        if r is None or not 0 <= r < self.n:
            raise MessageError(f'message from unknown worker {r}')
        inc, known = int(msg.incarnation), self.worker_inc[r]
        out = []
        if known and inc != known:
            if inc in self.retired[r]:
                self.superseded += 1
                if isinstance(msg, RowChunk) and msg.flags & FLAG_END:
                    return [Send(r, self._answer_end(r, inc, msg, now))], False
                if isinstance(msg, RowChunk) and msg.flags & FLAG_JOIN:
                    # a restarted worker asks which pushes of that run our checkpoint holds
                    return [Send(r, self._hello(r, inc))], False
                return [Log('superseded', 1.0, r, {'from': 'old worker run'})], False
            self._precheck(msg)        # a malformed message must not reset anything
            if int(msg.target_incarnation) not in (0, self.incarnation):
                self.superseded += 1   # a new run of r cannot know an old run of ours
                out = [Log('superseded', 1.0, r, {'from': 'unverified worker run'})]
                if isinstance(msg, RowChunk) and msg.flags & (FLAG_END | FLAG_JOIN):
                    out.append(Send(r, self._hello(r, inc)))   # who we are; change nothing
                return out, False
            self.retired[r] = (self.retired[r] + [known])[-8:]
            self.worker_inc[r] = inc
            out += self._reset_worker(r, now)
            if not int(msg.target_incarnation):
                # It never heard of any server run: a fresh start with nothing to resend (a
                # restored worker knows a server run and JOINs before its pushes count).
                self.join_tid[r][inc] = -1
        elif not known:
            self._precheck(msg)
            self.worker_inc[r] = inc
            if not int(msg.target_incarnation):
                self.join_tid[r][inc] = -1
        target = int(msg.target_incarnation)
        if target and target != self.incarnation:
            # Addressed to an earlier run of this server: apply nothing, tell it we restarted.
            self.superseded += 1
            if isinstance(msg, RowChunk) and msg.flags & FLAG_END:
                return out + [Send(r, self._answer_end(r, inc, msg, now)),
                              Send(r, self._hello(r))], False
            if isinstance(msg, RowChunk) and msg.flags & (FLAG_JOIN | FLAG_REQUEST):
                return out + [Send(r, self._hello(r))], False
            return out + [Log('superseded', 1.0, r, {'to': 'old server run'})], False
        return out + self._heard(r, now), True

    def _precheck(self, msg) -> None:
        """Stateless validation of a message from an unknown incarnation (before a reset)."""
        if isinstance(msg, RowChunk):
            if msg.kind != KIND_GRAD or msg.receiver != SERVER:
                raise MessageError(f'unexpected chunk kind={msg.kind}')
            if not 0 <= msg.clock <= self.max_clock:
                raise MessageError(f'clock {msg.clock} outside [0, {self.max_clock}]')
            if not msg.flags & (FLAG_END | FLAG_JOIN | FLAG_REQUEST):
                check_chunk(msg, self.layout, self.codec, self.receiver.row_nbytes)
        elif isinstance(msg, TransferAck) and msg.receiver != SERVER:
            raise MessageError('ack not addressed to the server')

    def _answer_end(self, r: int, inc: int, msg: RowChunk, now: float) -> TransferAck:
        """Answer an END we will not apply (or applied already): cached, or empty."""
        ack = self.receiver.cached_answer(r, inc, msg.transfer_id)
        if ack is None:       # never closed: nothing was applied, and nothing ever will be
            ack = TransferAck(transfer_id=msg.transfer_id, sender=SERVER, receiver=r, seq=0,
                              final=True, receive_time=now, incarnation=self.incarnation,
                              target_incarnation=inc)
            self.receiver.record(r, inc, msg.transfer_id, ack)
        return ack

    def _hello(self, r: int, inc: int = 0, join_tid: int | None = None) -> Schedule:
        """
        Tell r who we are (no state change): the durable checkpoint and the push deadline.

        With ``inc``, addressed to that run of r and reporting that run's pushes. The answer
        to a JOIN carries ``clock = -1 - (the JOIN's transfer id)``: only that answer lets the
        worker go on with its rejoin push.
        """
        clock = self.clock[r] if join_tid is None else -1 - int(join_tid)
        return Schedule(worker=r, clock=clock,
                        push_deadline_s=self._push_deadline(r, self.clock[r]),
                        stop=self.stopped[r], target_incarnation=inc,
                        checkpoint_transfer=self._checkpoint_for(r, inc))

    def _reset_worker(self, r: int, now: float) -> list:
        """Start afresh for a new incarnation of worker r (transfers dropped uncommitted)."""
        dropped = self.receiver.drop_open(r)
        dl, self.downlinks[r] = self.downlinks[r], None
        self.pending.pop(r, None)
        out = self._end_stall(r, now)
        self.delivered.reset(r)           # what it holds is unknown: the snapshot says all
        self.delivered.unpin(('dl', r))
        self._new_snapshot_epoch(r)
        self._pull_done_at[r] = None
        if self.slots is not None:
            self.slots.release(r, 'push')
            self.slots.release(r, 'pull')
            self.slots.queue = [q for q in self.slots.queue if q.worker != r]
        return out + [Log('worker_restart', 1.0, r, {'dropped_uplinks': dropped,
                                                     'dropped_downlink': dl is not None})]

    # ================================================================== membership
    def _heard(self, r: int, now: float) -> list:
        if self.absence_timeout_s is not None:
            self.absent_at[r] = now + self.absence_timeout_s
        if not self.active[r] and self.suspended_reason.get(r) in ('absent', 'link'):
            return self._maybe_readmit(r, now)
        return []

    def _absence_watch(self) -> list:
        """Workers whose silence counts: active, not done, not held by us (a pull stall)."""
        return [r for r, t in enumerate(self.absent_at)
                if t is not None and self.active[r] and not self.stopped[r]
                and r not in self.pending]

    def active_workers(self) -> list:
        """Ranks that count in the staleness rules now."""
        return torch.nonzero(self.active).reshape(-1).tolist()

    def suspend(self, worker: int, now: float, reason: str) -> list:
        """
        Suspend ``worker`` from the staleness rules (absent, or its link is dead).

        The others' RSP/SSP checks ignore its version column from now on; its own pushes are
        still applied and its pulls served. It is re-admitted by ``readmit`` or, for
        ``reason='absent'``, automatically once it is heard again and its rows are within the
        staleness bound of the active workers. Returns the actions (stalls that clear now).
        """
        if not 0 <= worker < self.n:
            raise ValueError(f'no worker {worker}')
        if reason != 'link':
            # silent or crashed: membership, not its link, keeps it out now (also when it was
            # already out as too slow: its readmission must not wait for the pace of a link
            # measured before it went silent)
            self._too_slow.discard(worker)
        if not self.active[worker]:
            self.suspended_reason[worker] = reason
            return []
        self.active[worker] = False
        self.suspended_reason[worker] = reason
        out = [Log('worker_suspended', 1.0, worker,
                   {'reason': reason, 'active': self.active_workers()})]
        if not self._quorum():
            out.append(Log('quorum_lost', float(int(self.active.sum())), -1,
                           {'min_workers': self.min_workers, 'active': self.active_workers(),
                            'hint': 'training waits until enough workers are back'}))
        for r in sorted(self.pending):
            out += self._try_serve(r, now)
        return self._out(out)

    def readmit(self, worker: int, now: float) -> list:
        """Count ``worker`` in the staleness rules again (it must not block the others)."""
        if not 0 <= worker < self.n:
            raise ValueError(f'no worker {worker}')
        if self.active[worker]:
            return []
        self.active[worker] = True
        self.suspended_reason.pop(worker, None)
        self._too_slow.discard(worker)
        self._readmitted_at[worker] = now
        out = [Log('worker_readmitted', 1.0, worker, {'active': self.active_workers()})]
        for r in sorted(self.pending):
            out += self._try_serve(r, now)
        return self._out(out)

    def _maybe_readmit(self, r: int, now: float) -> list:
        """
        Readmit r once its rows are within the bound of every active worker's clock.

        The bound is the one its column is checked against once it is back: ``S`` plus its
        straggler slack (a robot with slack that had to be within S to return would stay out
        while it kept the very pace the others' checks admit).
        """
        if self.active[r] or now < self._hold_until.get(r, -math.inf):
            return []
        if self.suspended_reason.get(r) == 'link' and self._fleet_finished():
            return []                 # it stops at its next pull (``_fleet_finished``)
        clocks = [self.clock[a] for a in self.active_workers() if not self.stopped[a]]
        # its own clock counts too: readmitted with rows stale by its own clock, it would
        # hold itself (the rows-within-one-worker level)
        bound = max(clocks + [self.clock[r]]) - self.policy.staleness - self._own_slack(r)
        if int(self.versions.v[:, r].min()) >= bound:
            if r in self._too_slow and not self._keeps_pace(r):
                return []             # its rows are fresh, its link is still too slow
            return self.readmit(r, now)
        return []

    # ================================================================== outage-aware RSP
    def _fleet_finished(self) -> bool:
        """
        Tell whether every worker that counts has trained its budget.

        Then the run's model is final, and a robot still suspended for its link stops at its
        next pull instead of training on: alone (readmitted against no one) it would move the
        shared model toward its own data for as long as its slow link takes to finish its
        budget (EACOL on a real testbed log: two robots out from iteration 5 went on for
        214 s after the others finished, and the final accuracy fell from 0.448 to 0.351).
        A robot suspended as absent (crashed, silent) is membership's: it comes back, is
        readmitted and finishes, as before.
        """
        act = self.active_workers()
        return self.max_iterations is not None and bool(act) and all(self.stopped[a] for a in act)

    def _fleet_clock(self) -> int:
        """Newest clock among the active workers still training (the fleet's clock)."""
        clocks = [self.clock[a] for a in self.active_workers() if not self.stopped[a]]
        return max(clocks) if clocks else max(self.clock)

    def late_weight(self, worker: int, clock: int) -> float:
        """
        Weight of a push of ``worker`` made at ``clock`` (outage-aware RSP, DESIGN section 4).

        ``tau = fleet clock - clock`` is its staleness. Within its bound ``S + slack`` (what
        RSP admits anyway; slack 0 unless it has straggler slack) the weight is 1; beyond it
        ``1 / (1 + tau - S - slack)`` (cf. FLEET's Lambda(tau)): a robot back from a 60 s
        outage adds its stale gradients at a fraction, not in full. Only pushes of workers
        suspended for a dead link are weighted; the rest of such a push is discarded on purpose
        and recorded in ``discarded`` (the conservation ledger).
        """
        if (not self.policy.outage_aware or self.active[worker]
                or self.suspended_reason.get(worker) != 'link'):
            return 1.0
        excess = (self._fleet_clock() - int(clock) - self.policy.staleness
                  - self._own_slack(worker))
        return 1.0 if excess <= 0 else 1.0 / (1.0 + excess)

    def _runs_free(self, r: int) -> bool:
        """
        Tell whether worker r, suspended for its link, is not held to the staleness bound.

        Every robot out for its link with ``SyncPolicy.async_when_out``; with
        ``free_stragglers``, a robot out because its link is too slow for any slack
        (``_too_slow_for_slack``). The worker learns it from the pulls (``FLAG_FREE``).

        Nobody waits for a robot out for its link, and it need not wait for anything either
        (``SyncPolicy.async_when_out``). Held to its own check, each catch-up to the fleet's
        clock made every row it holds and every row it owns stale at once: its pulls and its
        pushes carried the whole model, so on a slow link each iteration took several times
        longer, and its pushes, made further behind the fleet, were weighted down further
        (EACOL on per-robot testbed logs: robot 0 at 5.9 Mbit/s pushed every 22 s at weights
        0.07-0.33, 7 pushes' worth in a run the others did 80 in). Free, its pulls carry the
        MTA prefix of its priority order (its stalest rows first, then by magnitude) and its
        pushes what ATP sends. It returns (``_maybe_readmit``) once every row of its column
        is within its bound of the fleet's clock, that is once its link has kept the
        fleet's pace for about S iterations.
        """
        return (not bool(self.active[r]) and self.suspended_reason.get(r) == 'link'
                and (self.policy.async_when_out or r in self._too_slow))

    def _free_share(self, r: int, now: float | None, t_it: float) -> float:
        """
        Share of a fleet iteration's pushes that worker r, running free, still makes.

        Its push period (the smoothed one, or the time since its last push if longer: a
        dead link pushes nothing) against the fleet's iteration time ``t_it``, at most 1; 0
        for a robot not running free, or without a time to measure against.
        """
        if now is None or not self._runs_free(r):
            return 0.0
        last = self._last_push_at[r]
        if t_it <= 0 or last is None:
            return 0.0
        period = max(self.iter_est[r].value, now - last)
        return min(1.0, t_it / period) if period > 0 else 1.0

    def outage_scale(self, worker: int, now: float | None = None) -> float:
        """
        Factor on an active ``worker``'s push while others are suspended for a dead link.

        Every push is applied at lr/N, so with k of N robots out the fleet's step per
        iteration shrinks to (N - k)/N of the synchronous one, for as long as the outage
        lasts (on MPCOL ``outdoors`` a robot can be out for most of a run). N / (N - k) makes
        it the mean over the robots that count, as synchronous SGD with backup workers
        averages the gradients that arrived (Chen et al., 2016). The suspended robots' own
        late pushes keep their ``late_weight`` at lr/N. Workers suspended as absent (crashed,
        silent) are not counted out: that is membership, not a link outage. A robot running
        free (``async_when_out``) still pushes: it counts out only by the share of the
        fleet's pushes it no longer makes (``_free_share``, from its push period at ``now``),
        or the others' step would be raised for gradients that still arrive (EACOL on
        per-robot testbed logs: three robots out but pushing, the fourth's pushes applied at
        4 x, its label shards dominated the model).
        """
        if (not self.policy.outage_aware or not self.policy.outage_rescale
                or not self.active[worker]):
            return 1.0
        out_for_link = [r for r, why in self.suspended_reason.items()   # O(suspended)
                        if why == 'link' and not self.active[r]]
        if not out_for_link:
            return 1.0
        t_it = (self.iteration_time() if self.policy.async_when_out or self._too_slow
                else 0.0)   # (sorts N)
        out = sum(1.0 - self._free_share(r, now, t_it) for r in out_for_link)
        return self.n / (self.n - out) if 0 < out < self.n else 1.0

    def _out_for_link(self) -> int:
        """Robots suspended now because their link could not keep the fleet's pace."""
        return sum(1 for r, why in self.suspended_reason.items()     # O(suspended), not O(N)
                   if why == 'link' and not self.active[r])

    def iteration_time(self) -> float:
        """Return the fleet's iteration time: median push period of active workers."""
        vals = sorted(self.iter_est[a].value for a in self.active_workers()
                      if self.iter_est[a].samples and not self.stopped[a])
        return vals[len(vals) // 2] if vals else 0.0

    def _outage_deadline(self) -> float | None:
        """When the oldest stall outlasts the outage bound (None: no outage watch)."""
        if not self.policy.outage_aware or not self.stall_since or self.slots is not None:
            return None
        t_it = self.iteration_time()
        if t_it <= 0:
            return None
        return min(self._watch_start(r) for r in self.stall_since) + \
            self.policy.outage_bound * t_it

    def _watch_start(self, r: int) -> float:
        return max(self.stall_since[r], self._outage_from.get(r, -math.inf))

    def _outage_check(self, now: float) -> list:
        """
        Suspend the workers that have held a stalled worker longer than the outage bound.

        The bound is ``outage_bound`` x the fleet's iteration time (measured, per worker, from
        its push period). A worker whose rows block an active worker's pull that long has a
        link that cannot deliver its mandatory rows in time (a dead or near-dead link, or a
        pull to it that does not get through): it is suspended (reason ``link``) through the
        same path as absence, keeps computing and pushing, and is re-admitted once its rows
        are within the bound again.
        """
        deadline = self._outage_deadline()
        if deadline is None or now < deadline:
            return []
        bound = self.policy.outage_bound * self.iteration_time()
        out = []
        self._outage_from = {r: t for r, t in self._outage_from.items() if r in self.stall_since}
        for r in sorted(self.stall_since):
            if r not in self.stall_since:
                continue                   # a suspension just now served it
            t0 = self._watch_start(r)
            if now < t0 + bound:           # the very sum next_wakeup returned (no livelock)
                continue
            self._outage_from[r] = now     # looked at now: next look one bound later
            if not self.active[r] or r not in self.pending:
                continue
            pairs = self.versions.violating_pairs(self.pending[r], self._bounds(r),
                                                  self.active)
            for s in sorted(set(pairs[:, 1].tolist())):
                if s == r or not self.active[s] or self.stopped[s]:
                    continue
                if int(self.active.sum()) <= self.min_workers:
                    break
                self.outage_suspensions += 1
                self._hold_out(s, now, bound)
                out += self.suspend(s, now, 'link')
                out.append(Log('outage_suspend', now - t0, s, {
                    'held': r, 'bound_s': bound, 'clock': self.clock[s],
                    'fleet_clock': self._fleet_clock()}))
        return out

    # ================================================================== straggler slack
    def _bounds(self, r: int):
        """Staleness bound of r's check: S, or per column ``[N]`` while a robot has slack."""
        if self.slack is None or not self.slack.granted:
            return self.policy.staleness
        return self.slack.bounds(self.policy.staleness, r)

    def _own_slack(self, r: int) -> int:
        return 0 if self.slack is None else int(self.slack.slack[r])

    def _slack_window(self) -> float:
        """Return the controller's window: ``outage_bound`` fleet iterations (0 unmeasured)."""
        return self.policy.outage_bound * self.iteration_time()

    def _holding(self, r: int, c: int) -> list:
        """Active robots (other than r) whose rows hold r's pull at clock c."""
        held = self.versions.v < (c - self._bounds_tensor(r)).to(torch.int32).unsqueeze(0)
        held &= self.active.unsqueeze(0)
        held[:, r] = False
        return torch.nonzero(held.any(dim=0)).reshape(-1).tolist()

    def _bounds_tensor(self, r: int) -> torch.Tensor:
        b = self._bounds(r)
        return b if isinstance(b, torch.Tensor) else torch.full((self.n,), int(b))

    def _update_slack(self, now: float) -> list:
        """
        Raise the slack of robots that held the others too long, lower it once they stop.

        At most once per tenth of the controller's window: a pass is O(N), and per pull it
        would make the server's cost per worker-iteration grow with the fleet. No slack rises
        while a robot is suspended for its link: slack quickens the fleet, and a suspended
        robot returns only once its link keeps the fleet's pace, so a faster fleet keeps it
        out (measured on EACOL, docs/scheduling.md: two or three of four robots out for a
        third to a half of a run, their label shards learned less).
        """
        if self.slack is None:
            return []
        window = self._slack_window()
        if window <= 0 or now - self._slack_looked_at < window / 10:
            return []
        self._slack_looked_at = now
        running = [a for a in self.active_workers() if not self.stopped[a]]
        # while a robot is out for its link nobody has leave to rise: slack may only fall
        held = [] if self._out_for_link() else [
            a for a in running
            if self.slack.share(a, now, window, len(running) - 1) > self.slack.threshold]
        link_bound = self._link_bound(running) if held else set()
        self._free_due = self._too_slow_for_slack(held, link_bound, running)
        if self._free_due:
            return []               # suspended by the caller, once its pull is served
        out = []
        for s, e, share in self.slack.update(now, window, len(running) - 1, running,
                                             link_bound):
            out.append(Log('straggler_slack', float(e), s, {
                'held_share': round(share, 3), 'staleness': self.policy.staleness + e}))
        return out

    def _link_time(self, a: int, slack: int) -> float | None:
        """Seconds a's link needs for the MTA rows of ``slack``, up and down (None: unknown)."""
        up, down = self.thr_up[a].value_bps, self.thr_down[a].value_bps
        if up <= 0 or down <= 0 or not self.compute_est[a].samples:
            return None
        bits = 8.0 * self.total_row_bytes * self.policy.mta_for(slack)
        return bits / up + bits / down

    def _pace(self, a: int, slack: int) -> float | None:
        """Seconds robot a needs per iteration at ``slack``: compute, MTA rows up and down."""
        link = self._link_time(a, slack)
        return None if link is None else self.compute_est[a].value + link

    def _too_slow_for_slack(self, held: list, link_bound: set, running: list) -> list:
        """
        Robots whose link cannot keep the fleet's pace at any slack: ``(robot, pace, fleet)``.

        Slack helps a robot whose link is slow for a while: with a wider bound it carries
        fewer rows per iteration and catches up. A robot whose link needs, at the largest
        slack, ``TOO_SLOW`` times the fleet's median time per iteration or more (compute
        plus the mandatory rows up and down, at the measured throughputs) falls a bound
        behind whatever the bound, and then holds every other robot at its pace (EACOL on
        per-robot testbed logs: one robot at 1.4-3 Mbit/s iterated every 7 s against the
        others' 2.5 and held them 46-58% of their time while its slack rose to 8). Such a
        robot is suspended for its link and runs free (``_free_too_slow``). Only robots that
        do hold the others (``held``) and are slow for their link (``link_bound``) qualify,
        and only under outage-aware RSP (without it nobody is suspended for a link).
        """
        pol = self.policy
        if not (pol.free_stragglers and pol.outage_aware) or len(running) < 3 or not held:
            return []
        fleet = self._fleet_pace(running)
        if fleet is None:
            return []
        due = []
        for s in held:
            pace = self._pace_at_most_slack(s) if s in link_bound else None
            if pace is not None and pace >= TOO_SLOW * fleet:
                due.append((s, pace, fleet))
        return due

    def _pace_at_most_slack(self, s: int) -> float | None:
        """
        Seconds per iteration robot s would need at the largest slack.

        Its measured push period, scaled by what the largest slack saves in the model of
        ``_pace``: the model counts only the mandatory rows, while a push and a pull carry
        what their deadlines allow, and the measured period counts it all (a robot the model
        put at 3.4 s iterated every 7).
        """
        now_pace, most = self._pace(s, self._own_slack(s)), self._pace(s, self.policy.slack_max)
        if now_pace is None or most is None or not self.iter_est[s].samples:
            return most
        return max(most, self.iter_est[s].value * most / now_pace)

    def _keeps_pace(self, r: int) -> bool:
        """
        Tell whether robot r, out as too slow for any slack, could now keep the fleet's pace.

        Its rows keep within its bound of the fleet's clock whenever it has just pushed them,
        so that alone would readmit it at once and let it hold the others again; its link
        must also carry the mandatory rows of the largest slack, up and down at the measured
        throughputs, with its computation, in less than ``TOO_SLOW_BACK`` times the fleet's
        time (``_pace``). Not its measured push period, as when it was let go: running free,
        that stays long after its link recovered (a pull of the MTA prefix, a push of what
        ATP sends), and a robot judged by it stayed out twice as long on EACOL ``outdoors``
        (146-492 s on seed 3) and cost 1-3 points more (docs/scheduling.md).
        """
        fleet = self._fleet_pace([a for a in self.active_workers() if not self.stopped[a]])
        pace = self._pace(r, self.policy.slack_max)
        return fleet is None or pace is None or pace < TOO_SLOW_BACK * fleet

    def _fleet_pace(self, running: list) -> float | None:
        """Median of ``_pace`` over the ``running`` robots at their slack (None: unmeasured)."""
        paces = sorted(p for p in (self._pace(a, self._own_slack(a)) for a in running)
                       if p is not None)
        return paces[len(paces) // 2] if len(paces) >= 2 else None

    def _free_too_slow(self, now: float) -> list:
        """
        Suspend the robots ``_too_slow_for_slack`` found; they run free (``_runs_free``).

        Nobody waits for such a robot and it pushes at its own pace; it returns once its
        rows keep within its bound and its link could keep the pace (``_keeps_pace``). The
        readmission backoff applies as for any link suspension, and at least two robots
        stay in the check.
        """
        due, self._free_due = self._free_due, []
        out = []
        for s, pace, fleet in due:
            if not self.active[s] or int(self.active.sum()) <= max(self.min_workers, 2):
                continue
            self.outage_suspensions += 1
            self.too_slow_suspensions += 1
            self._hold_out(s, now, self.policy.outage_bound * self.iteration_time())
            self._too_slow.add(s)
            out += self.suspend(s, now, 'link')
            out.append(Log('too_slow_for_slack', pace, s, {
                'fleet_pace_s': round(fleet, 3), 'slack': self._own_slack(s),
                'clock': self.clock[s], 'fleet_clock': self._fleet_clock()}))
        return out

    def _link_bound(self, running: list) -> set:
        """
        Robots that trail the fleet because of their link, not their computer.

        Slack lowers the bytes a robot must move per iteration; it does nothing for a slow
        computer but let the others run further ahead of it. A robot qualifies when the time
        its link needs for an iteration's mandatory rows (up and down, at the measured
        throughputs) exceeds the fleet's median by more than its computation time exceeds
        the median computation time.
        """
        if len(running) < 2:
            return set()
        link, comp = {}, {}
        for a in running:
            t = self._link_time(a, 0)
            if t is None:
                continue
            link[a] = t
            comp[a] = self.compute_est[a].value
        if len(link) < 2:
            return set()
        mid_link = sorted(link.values())[len(link) // 2]
        mid_comp = sorted(comp.values())[len(comp) // 2]
        return {a for a in link if link[a] - mid_link > max(0.0, comp[a] - mid_comp)}

    def _set_bounds(self, r: int, dl: _Downlink) -> None:
        """
        Fix the slack a downlink's RowVersions carries and the bounds its check uses.

        The worker checks with the slack of the versions it applied, the server with the
        bounds of the same downlink: both sides decide on the same numbers even when the
        slack changes meanwhile.
        """
        if self.slack is None or not self.slack.granted:
            return
        dl.slack = self.slack.slack.numpy().astype(np.uint16)
        dl.bounds = self.slack.bounds(self.policy.staleness, r)

    def _hold_out(self, s: int, now: float, bound: float) -> None:
        """
        Readmission backoff: a worker suspended again soon after its readmission stays out longer.

        Readmitted as soon as its rows are fresh, a robot whose link stays poor (slow, not
        dead) holds the fleet for another ``bound`` and is suspended again, in turn, for as
        long as its link stays poor: each flap costs the fleet a bound of stall. A flap (a
        suspension within ``FLAP_WINDOW`` bounds of its readmission) doubles the time it must
        stay out before it may be readmitted (route-flap damping); a suspension after a
        longer stay in starts over. Soft state: a restarted server forgets it; a restarted
        robot does not make it forget (``_reset_worker`` keeps it: the link is the same one).
        """
        if not self.policy.readmit_backoff:
            return
        t_r = self._readmitted_at.get(s)
        flap = t_r is not None and now - t_r < FLAP_WINDOW * bound
        k = self._flaps.get(s, 0) + 1 if flap else 0
        self._flaps[s] = k
        if k:
            self._hold_until[s] = now + bound * 2 ** min(k, FLAP_MAX_DOUBLINGS)

    def _quorum(self) -> bool:
        return int(self.active.sum()) >= self.min_workers

    # ================================================================== checkpoints
    def _checkpoint_for(self, r: int, inc: int = 0) -> int:
        """Newest push of run ``inc`` of r (default: its current run) a durable state holds."""
        return self.confirmed_push[r].get(inc or self.worker_inc[r], -1)

    def state_dict(self) -> dict:
        """
        Return the server's durable state (copies).

        Model, mirrors, versions, clocks, incarnations, closed-transfer answers, each
        worker's newest applied push, and outage-aware RSP's ledger (``discarded``).

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
            'w_srv': self.w_srv.clone(), 'mirror': self.mirror.clone(),
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
            'discarded': None if self.discarded is None else self.discarded.clone(),
            'weighted_pushes': self.weighted_pushes,
            'rescaled_pushes': self.rescaled_pushes,
            'outage_suspensions': self.outage_suspensions,
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
        if sd['w_srv'].shape != self.w_srv.shape or (
                sd.get('discarded') is not None and sd['discarded'].shape != self.w_srv.shape):
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
        # What each worker holds now is unknown: every pull starts with a snapshot.
        for r in range(self.n):
            self._new_snapshot_epoch(r)

    # ================================================================== uplink
    def _on_chunk(self, chunk: RowChunk, now: float) -> list:
        s = chunk.sender
        if chunk.kind != KIND_GRAD or chunk.receiver != SERVER or not 0 <= s < self.n:
            raise MessageError(f'unexpected chunk kind={chunk.kind} from {s}')
        if chunk.flags & FLAG_JOIN and len(chunk.tensor_ids) == 2:
            # which pushes of an earlier run of this worker does our checkpoint hold?
            lo, hi = (int(x) for x in chunk.tensor_ids)
            return [Send(s, self._hello(s, lo | hi << 32))]
        if chunk.flags & FLAG_JOIN:
            book = self.join_tid[s]
            book[chunk.incarnation] = max(book.get(chunk.incarnation, -1), chunk.transfer_id)
            # A (re)joining worker holds a model we do not know: its next pull is a snapshot.
            join = (chunk.incarnation, chunk.transfer_id, chunk.clock)
            if self._last_join[s] != join and not self.stopped[s]:
                self._last_join[s] = join
                if self.downlinks[s] is None or not self.downlinks[s].snapshot:
                    self.downlinks[s] = None          # dropped uncommitted
                    self.delivered.reset(s)
                    self.delivered.unpin(('dl', s))
                    self._new_snapshot_epoch(s)
            return [Send(s, self._hello(s, 0, chunk.transfer_id)), Log('join', 1.0, s)]
        if chunk.flags & FLAG_REQUEST:
            if self.slots is None:
                raise MessageError('transfer-slot request, but this server schedules no slots')
            if self.stopped[s]:
                return [Send(s, Schedule(worker=s, clock=self.clock[s], push_deadline_s=-1.0,
                                         stop=True))]
            if int(chunk.clock) <= self.clock[s]:
                return []                          # a stale duplicate of an old request
            if (s, 'push') in self.slots.active:   # our grant was lost: repeat it
                return [Send(s, Schedule(worker=s, clock=self.clock[s], push_deadline_s=-1.0))]
            self.slots.request(s, 'push', int(chunk.clock), now)
            return self._dispatch_slots(now)
        if self.restored:
            joined = self.join_tid[s].get(chunk.incarnation)
            if joined is None or chunk.transfer_id <= joined:
                # sent before its rejoin: never applied by this run (answered, if an END)
                self.superseded += 1
                if chunk.flags & FLAG_END:
                    return [Send(s, self._answer_end(s, chunk.incarnation, chunk, now))]
                return [Log('superseded', 1.0, s, {'from': 'before its rejoin'})]
        acks, closed = self.receiver.on_chunk(chunk, now)
        out = [Send(s, a) for a in acks]
        if closed is not None:
            if math.isfinite(chunk.rate_bps) and chunk.rate_bps > 0:
                self.thr_up[s].value_bps = float(chunk.rate_bps)   # the worker's own estimate
                self.thr_up[s].samples += 1
            out += self._apply_push(closed, now)
        elif chunk.flags & FLAG_END and self.stopped[s]:
            out.append(Send(s, Schedule(worker=s, clock=self.clock[s], push_deadline_s=-1.0,
                                        stop=True)))     # the stop order may have been lost
        elif chunk.flags & FLAG_END and s in self.stall_since and s in self.pending:
            out += self._ask_own_rows(s, self.pending[s])   # a held worker's poke: ask again
        return out

    def _apply_push(self, inc, now: float) -> list:
        s = inc.sender
        mask, rowbytes, scales, chunk_ranges = inc.close()
        n_rows = int(mask.sum())
        late = self.late_weight(s, inc.clock)
        weight = late * self.outage_scale(s, now)
        self.last_push_weight = weight      # (observers such as the chaos ledger read it)
        if n_rows:
            partial = n_rows < self.layout.n_rows
            delta = self.codec.decode(self.layout, rowbytes, scales, self._scratch,
                                      row_mask=mask if partial else None,
                                      factor=self.lr / self.n, per_row=inc.per_row_scales)
            if weight != 1.0:
                # A late push of a suspended worker: the weighted part is applied, the rest is
                # discarded on purpose; an active one's while others are out (outage_scale):
                # more is applied. The ledger keeps the difference, signed (conservation:
                # w0 - w_srv = lr/N x sum of delivered pushes - discarded).
                if self.discarded is None:
                    self.discarded = torch.zeros(self.layout.n_params, dtype=torch.float64)
                self.discarded.add_(delta.double(), alpha=1.0 - weight)
                delta.mul_(weight)
                if late < 1.0:
                    self.weighted_pushes += 1
                else:
                    self.rescaled_pushes += 1
            self.w_srv -= delta        # enters every G[s], the sender's included (variant A)
            # stamps only the pushed rows (and their change history)
            self.delivered.stamp(self.versions.v, s, torch.nonzero(mask).reshape(-1), inc.clock)
        if n_rows:     # (an empty push changes nothing: it must not count as coverage)
            book = self.applied_push[s]
            book.pop(inc.incarnation, None)         # newest incarnation last
            book[inc.incarnation] = inc.transfer_id
            while len(book) > 8:
                del book[next(iter(book))]
        self.bytes_up += inc.bytes
        info = {'clock': inc.clock, 'bytes': inc.bytes}
        if late < 1.0:
            info['weight'] = late
        if weight != late:
            info['outage_scale'] = weight / late
        if inc.flags & FLAG_LATE:
            # never a new iteration, also when its clock is ahead of the sender's newest push
            # here: a worker that caught up (outage-aware RSP) is at the clock of that pull
            return self._apply_late_rows(inc, n_rows, chunk_ranges, info, now)
        self.clock[s] = max(self.clock[s], inc.clock)
        last, self._last_push_at[s] = self._last_push_at[s], now
        if last is not None and now > last:
            est = self.iter_est[s]
            # a push after a long hold (an outage) must not inflate the fleet's pace
            est.update(min(now - last, 4 * est.value) if est.samples else now - last)
        if self._pull_done_at[s] is not None and inc.first_time > self._pull_done_at[s]:
            # from our update's final ack to the worker's next push: its computation
            self.compute_est[s].update(inc.first_time - self._pull_done_at[s])
            self._pull_done_at[s] = None
        out = [Send(s, self.receiver.final_ack(inc, chunk_ranges, now)),
               Log('push_applied', float(n_rows), s, info)]
        self.pending[s] = max(self.pending.get(s, 0), inc.clock)
        dl = self.downlinks[s]
        if dl is not None and dl.transfer.flags & FLAG_LATE:
            # its computation is over: wind the late pull up (END now), its pull follows
            dl.transfer.deadline = min(dl.transfer.deadline, now)
            out += self._sends(s, dl, dl.transfer.on_tick(now))
        if not self.active[s] and self.suspended_reason.get(s) in ('absent', 'link'):
            out += self._maybe_readmit(s, now)
        if self.slots is not None:
            self.slots.release(s, 'push')
            self.slots.request(s, 'pull', inc.clock, now)
            return out + self._dispatch_slots(now)
        for r in sorted(self.pending):
            out += self._try_serve(r, now)
        return out

    def _apply_late_rows(self, inc, n_rows: int, chunk_ranges, info: dict, now: float) -> list:
        """
        Finish a late push (``FLAG_LATE``): rows of an iteration already pushed.

        They were applied and stamped like any push's (``_apply_push``), but they are not a
        new iteration of the sender: no pull for it, no sample of its pace or its compute
        time. Newer versions of its rows may free the pulls of workers waiting for them.
        """
        s = inc.sender
        self.late_pushes += 1
        self.late_rows += n_rows
        out = [Send(s, self.receiver.final_ack(inc, chunk_ranges, now)),
               Log('late_rows_applied', float(n_rows), s, info)]
        if self.slots is not None:
            return out
        for r in sorted(self.pending):
            out += self._try_serve(r, now)
        if self.policy.late_pulls and now < self._late_pull_until[s]:
            out += self._start_late_pull(s, self._late_pull_clock[s], now)
        return out

    # ================================================================== FLOWN slots
    def _on_link_stats(self, msg: LinkStats) -> list:
        """Take netmon's view of a robot's link (FLOWN's bandwidth; presence)."""
        if not 0 <= msg.node < self.n:
            raise MessageError(f'LinkStats from unknown node {msg.node}')
        for value in (msg.emulated_mbps, msg.bitrate_mbps, msg.tx_mbps):
            if math.isfinite(value) and value >= 0:
                self.link_estimate_bps[msg.node] = value * 1e6
                break
        return []

    def _dispatch_slots(self, now: float) -> list:
        bandwidth = [est if est > 0 else thr.value_bps
                     for est, thr in zip(self.link_estimate_bps, self.thr_up)]
        out = []
        for w, kind, waited in self.slots.grant(now, self.clock, bandwidth):
            if waited > 0:
                self.triggers[w] += 1
                self.stall_time[w] += waited
                out += [Log('trigger', 1.0, w, {'slot': kind}), Log('stall_s', waited, w)]
            if kind == 'push':
                out.append(Send(w, Schedule(worker=w, clock=self.clock[w],
                                            push_deadline_s=-1.0)))
                continue
            c = self.pending.pop(w, self.clock[w])
            if self.max_iterations is not None and c >= self.max_iterations:
                self.slots.release(w, 'pull')
                self.stopped[w] = True
                out += [Send(w, Schedule(worker=w, clock=c, push_deadline_s=-1.0, stop=True)),
                        Log('worker_done', float(c), w)]
                out += self._dispatch_slots(now)
                continue
            out += self._start_downlink(w, c, now)
        return out

    # ================================================================== pull / downlink
    def _try_serve(self, r: int, now: float) -> list:
        if r not in self.pending or self.downlinks[r] is not None:
            return []
        c = self.pending[r]
        out_after_fleet = (not self.active[r] and self.suspended_reason.get(r) == 'link'
                           and self._fleet_finished())
        if self.max_iterations is not None and (c >= self.max_iterations or out_after_fleet):
            del self.pending[r]
            self.stopped[r] = True
            self._end_stall(r, now)
            out = [Send(r, Schedule(worker=r, clock=c, push_deadline_s=-1.0, stop=True)),
                   Log('worker_done', float(c), r)]
            if out_after_fleet:
                out.append(Log('stopped_after_fleet', float(self.max_iterations - c), r))
            elif self._fleet_finished():
                # the last worker that counted is done: robots out for their link and
                # waiting for a pull stop now (the others at their next pull)
                for q in [q for q in self.pending
                          if not self.active[q] and self.suspended_reason.get(q) == 'link']:
                    out += self._try_serve(q, now)
            return out
        # A suspended worker catching up is served without quorum: it must get back in.
        quorum = self._quorum() or not self.active[r]
        if not quorum or not self.versions.satisfied(c, self._bounds(r), self.active):
            if r not in self.stall_since:
                self.stall_since[r] = now
                self.triggers[r] += 1
                if self.slack is not None and quorum:
                    self._blockers[r] = self._holding(r, c)
                info = {'clock': c}
                if not quorum:
                    info['quorum'] = f'{int(self.active.sum())} of {self.min_workers} active'
                return [Log('trigger', 1.0, r, info)] + self._ask_own_rows(r, c)
            return []
        out = self._end_stall(r, now) + self._update_slack(now)
        del self.pending[r]
        if not self.active[r] and self.suspended_reason.get(r) == 'link':
            # Catching up after an outage: the worker goes on from the fleet's clock. Its
            # rows age by the jump, so its next pushes carry every row older than S and
            # bring its versions within the bound of the fleet's clock: it is readmitted
            # (``_maybe_readmit``) as soon as its link keeps the fleet's pace. (From the
            # fleet's clock minus S, its rows trailed the fleet by more than S for good: a
            # robot whose link had recovered stayed suspended, its pushes weighted down,
            # until the others finished.) A robot with straggler slack may trail the fleet
            # by its slack: it goes on from there and skips that many fewer iterations.
            ahead = self._fleet_clock() - self._own_slack(r)
            # ... but no further than the versions held here allow: a pull at clock c needs
            # every active worker's rows at c - S or newer, and the fleet's newest clock may
            # be a push whose own pull still waits for them (a repair loop otherwise)
            act = self.active
            if bool(act.any()):
                ahead = min(ahead, int(self.versions.v[:, act].min()) + self.policy.staleness)
            if self.max_iterations is not None:
                ahead = min(ahead, int(self.max_iterations) - 1)
            c = max(c, ahead)
        out += self._start_downlink(r, c, now)
        return out + self._free_too_slow(now) if self._free_due else out

    def _end_stall(self, r: int, now: float) -> list:
        t0 = self.stall_since.pop(r, None)
        self.stall_warned.pop(r, None)
        blockers = self._blockers.pop(r, None)
        if t0 is None:
            return []
        if blockers:
            self.slack.held(blockers, now - t0, now, self._slack_window())
        self.stall_time[r] += now - t0
        return [Log('stall_s', now - t0, r)]

    def _ask_own_rows(self, r: int, c: int) -> list:
        """
        Ask worker r for its rows that hold its own pull (``Schedule.urgent_rows``).

        Its pull at clock c needs every row's version of r at c - S or newer. A worker keeps
        its rows within that bound by its own count of withheld iterations, which can fall
        behind ours after it restarts from a saved state: then nothing else would ever send
        those rows and the pull would wait for ever (seen as a fleet whose restarted robot
        stays at one clock). Rows other workers owe are not asked for: their own pulls and
        pushes bring them.
        """
        if self.policy.whole_model or not self.active[r]:
            return []
        own = self.versions.v[:, r] < c - self.policy.staleness - self._own_slack(r)
        if not bool(own.any()):
            return []
        rows = torch.nonzero(own).reshape(-1).numpy()
        return [Send(r, Schedule(worker=r, clock=c, push_deadline_s=self._push_deadline(r, c),
                                 urgent_rows=ranges_from_sorted(rows).astype(np.uint32))),
                Log('urgent_rows', float(rows.size), r, {'clock': c})]

    def _start_downlink(self, r: int, c: int, now: float,
                        late_deadline: float | None = None) -> list:
        late = late_deadline is not None
        if self.absence_timeout_s is not None and not late:
            self.absent_at[r] = now + self.absence_timeout_s   # its silence counts again
        if self.unsynced[r] is not None:
            return [] if late else self._start_snapshot(r, max(c, self.clock[r]), now)
        pol, layout = self.policy, self.layout
        v = self.versions.v
        act = self.active.clone()
        bounds = None if late else self._bounds(r)
        per_column = isinstance(bounds, torch.Tensor)
        every = bool(act.all()) and not per_column
        if every:     # O(M): per-row change stamps against r's delivery stamps
            new_data, oldest = self.delivered.new_and_oldest(r, v)
        else:
            sent_r = self.delivered.sent(r)[:, act]
            new_data = (v[:, act] > sent_r).any(dim=1)
            if per_column:    # a column with slack ages slower: urgency against its bound
                sent_r = sent_r + (bounds[act] - pol.staleness).unsqueeze(0)
            oldest = (sent_r.min(dim=1).values if sent_r.shape[1]
                      else torch.full((layout.n_rows,), c, dtype=torch.int32))
        candidates = torch.nonzero(new_data).reshape(-1)
        if late and candidates.numel() == 0:
            return []                               # nothing changed since its pull
        p = torch.sub(self.mirror[r], self.w_srv, out=self._p)     # G[r] + E[r]
        trs = layout.tensor_row_abs_sum(p)
        row_sums = layout.row_abs_sum(p, trs)
        if pol.whole_model or not pol.ordering:
            order = candidates
            n_inf = 0
            if not pol.whole_model and self.slots is None:
                # rows the worker's RSP check needs come first (downlink repair)
                must = new_data & (oldest < c - pol.staleness)
                n_inf = int(must.sum())
                if n_inf:
                    order = torch.cat([torch.nonzero(must).reshape(-1),
                                       torch.nonzero(new_data & ~must).reshape(-1)])
        else:
            urgency = c - oldest
            inf = infinite_mask(urgency, pol.staleness, pol.convention)
            order = priority_order(urgency, row_sums, inf, use_magnitude=pol.use_magnitude,
                                   multiply=False, candidates=candidates)
            n_inf = int((inf & new_data).sum())
        if self._runs_free(r):
            n_inf = 0          # the MTA prefix of its order (stalest rows first) is enough
        k_min = min(mandatory_rows(layout.n_rows, pol.mta_for(self._own_slack(r)), n_inf),
                    int(order.numel()))
        deadline = self._downlink_deadline(r, k_min, order, now)
        if late:                       # optional rows only, for as long as it computes
            k_min, deadline = 0, late_deadline
        if pol.balance == 'budget' and not pol.whole_model and not late:
            k_min = max(k_min, min(int(order.numel()), self._budget_rows(self.thr_down, r)))
        row_mask = None
        if pol.scale_sent_rows and not pol.whole_model and not pol.chunk_scales:
            budget = deadline - now if pol.balance == 'deadline' else 0.0
            k_est = expected_rows(order, self.row_nbytes, k_min, budget,
                                  self.thr_down[r].value_bps)
            row_mask = torch.zeros(layout.n_rows, dtype=torch.bool)
            row_mask[order[:k_est]] = True
        scales = self.codec.scales(layout, p, trs, row_mask)
        rowbytes = self.codec.encode(layout, p, scales)
        self.next_tid[r] += 1
        tr = OutgoingTransfer(transfer_id=self.next_tid[r], sender=SERVER, receiver=r,
                              kind=KIND_UPDATE, clock=c, layout=layout, codec=self.codec,
                              rowbytes=rowbytes, scales=scales, order=order,
                              n_mandatory=k_min, deadline=deadline, now=now,
                              window=self.window, chunk_bytes=self.chunk_bytes,
                              end_timeout_s=self.end_timeout_s,
                              rate_bps=self.thr_down[r].value_bps,
                              tensor_row_sums=trs if pol.chunk_scales else None,
                              flags=((FLAG_LATE if late else 0)
                                     | (FLAG_FREE if self._runs_free(r) else 0)))
        self.downlinks[r] = _Downlink(tr, rowbytes, scales, None, act,
                                      event=self.delivered.pin(('dl', r)))
        self._set_bounds(r, self.downlinks[r])
        out = [] if late else [Send(r, Schedule(worker=r, clock=c,
                                                push_deadline_s=self._push_deadline(r, c)))]
        return out + self._sends(r, self.downlinks[r], tr.pump(now))

    def _start_late_pull(self, r: int, c: int, now: float) -> list:
        """
        Send worker r, while it computes, rows that changed since its pull (``late_pulls``).

        A sequential worker's link is idle while it computes, and its next pull must carry
        every row the others changed meanwhile. Rows sent now, in priority order, none
        mandatory, until the computation is expected to end (less one round trip for the
        final ack), shorten that pull. The worker applies them when its computation ends
        (``WorkerEngine._apply_pull``); they carry ``FLAG_LATE`` and the clock of its pull,
        and answer nothing: no Schedule, no pace or compute sample, no repair. Started again
        when one ends with time left, so rows changed by pushes that arrive meanwhile follow.
        """
        pol = self.policy
        if (not pol.late_pulls or pol.whole_model or self.slots is not None or pol.overlap
                or self.downlinks[r] is not None or r in self.pending or self.stopped[r]
                or not self.active[r] or self.unsynced[r] is not None):
            return []
        rate = self.thr_down[r].value_bps
        deadline = self._late_pull_until[r] - self.rtt_down[r].value
        if rate <= 0 or (deadline - now) * rate / 8.0 < self.chunk_bytes:
            return []                   # not one chunk's worth of idle link
        return self._start_downlink(r, c, now, late_deadline=deadline)

    def _new_snapshot_epoch(self, r: int) -> None:
        self.unsynced[r] = torch.ones(self.snap_layout.n_rows, dtype=torch.bool)
        self.snap_v[r] = None
        self.delivered.unpin(('snap', r))

    def _start_snapshot(self, r: int, c: int, now: float) -> list:
        """
        Rejoin pull: the rows of ``w_srv`` worker r still lacks, lossless (``FLAG_SNAPSHOT``).

        They replace the worker's rows; on the final ack ``mirror[r]`` takes exactly the
        delivered values (so the worker holds exactly the server's view of it), and the rows
        still missing go out in the next snapshot before the worker may compute. Snapshots
        always use tensor rows (``snapshot_layout``), also for whole-model policies, so that a
        lost chunk costs one row, not the whole model. Every snapshot of one rejoin carries the
        version table taken at its first transfer, for every row (the oldest the rows may be);
        both sides adopt it when the last row arrived.
        """
        layout = self.snap_layout
        rows = torch.nonzero(self.unsynced[r]).reshape(-1)
        if self.snap_v[r] is None:
            self.snap_v[r] = self.versions.v.clone()
            self.snap_event[r] = self.delivered.pin(('snap', r))
        values = self.w_srv.clone()
        rowbytes = self.snap_codec.encode(layout, values, None)
        scales = torch.zeros(layout.n_tensors, dtype=torch.float32)
        self.next_tid[r] += 1
        tr = OutgoingTransfer(transfer_id=self.next_tid[r], sender=SERVER, receiver=r,
                              kind=KIND_UPDATE, clock=c, layout=layout, codec=self.snap_codec,
                              rowbytes=rowbytes, scales=scales, order=rows,
                              n_mandatory=int(rows.numel()), deadline=now, now=now,
                              window=self.window, chunk_bytes=self.chunk_bytes,
                              end_timeout_s=self.end_timeout_s,
                              rate_bps=self.thr_down[r].value_bps, flags=FLAG_SNAPSHOT)
        dl = _Downlink(tr, rowbytes, scales, self.snap_v[r], self.active.clone(),
                       snapshot=True)
        dl.values = values
        self._set_bounds(r, dl)
        self.downlinks[r] = dl
        sched = Schedule(worker=r, clock=c, push_deadline_s=self._push_deadline(r, c))
        return [Send(r, sched), Log('snapshot', float(rows.numel()), r)] + \
            self._sends(r, dl, tr.pump(now))

    def _sends(self, r: int, dl: _Downlink, chunks: list) -> list:
        """
        Build the sends for downlink chunks.

        The transfer's RowVersions goes right before its END, and again before every
        retransmitted END: a worker does not accept an END whose versions it lacks.
        """
        out = []
        for ch in chunks:
            if ch.flags & FLAG_END:
                if dl.versions is None:
                    rows = (np.arange(self.layout.n_rows) if dl.snapshot
                            else dl.transfer.sent_rows())
                    v_rows = None
                    if dl.v_snap is None and rows.size:    # only the rows it carries
                        v_rows = self.delivered.pinned_rows(
                            ('dl', r), dl.event, torch.from_numpy(rows), self.versions.v)
                    dl.versions = encode_versions(
                        dl.transfer.transfer_id, r,
                        self._v_snap(r, dl) if v_rows is None else None, rows, dl.active,
                        v_rows=v_rows)
                    dl.versions.staleness_slack = dl.slack
                out.append(Send(r, dl.versions))
            out.append(Send(r, ch))
        return out

    def _downlink_deadline(self, r, k_min, order, now) -> float:
        if self.policy.balance != 'deadline' or self.policy.whole_model:
            return now
        mand = self._mandatory_vector(k_min, own=r)
        thr = self._paced(r, self.thr_down)
        floor = self.policy.floor_s(self.compute_est[r].value, self.rtt_down[r].value)
        return now + max(mta_time(mand, thr), floor)

    def _push_deadline(self, r: int, c: int) -> float:
        """
        MTA time for worker r's next push, the one of clock c + 1 (negative: send everything).

        A worker's last push goes whole: rows it withholds then would never be sent, and the
        fleet's final model would miss up to S iterations of its low-priority rows.
        """
        pol = self.policy
        if self.max_iterations is not None and c + 1 >= self.max_iterations:
            return -1.0
        if pol.whole_model or pol.balance == 'none':
            return 0.0 if not pol.whole_model else -1.0
        if pol.balance == 'budget':
            return 0.0
        k_min = mandatory_rows(self.layout.n_rows, pol.mta, 0)
        return mta_time(self._mandatory_vector(k_min), self._paced(r, self.thr_up))

    def _mandatory_vector(self, k_min: int, own: int | None = None) -> torch.Tensor:
        """
        Return the mandatory bytes per worker that the MTA time is computed from.

        ``k_min`` rows each, less, for a robot with straggler slack, the rows its smaller
        MTA(S + slack) spares (the MTA time, which the others fill with optional rows, shrinks
        with it). ``own``: the worker whose ``k_min`` this is, already counted with its slack.
        """
        rows = torch.full((self.n,), float(k_min), dtype=torch.float64)
        if self.slack is not None and self.slack.granted:
            n_rows, pol = self.layout.n_rows, self.policy
            base = mandatory_rows(n_rows, pol.mta, 0)
            for s, e in enumerate(self.slack.slack.tolist()):     # O(N), not O(rows)
                if e and s != own:
                    rows[s] -= base - mandatory_rows(n_rows, pol.mta_for(e), 0)
        return rows.clamp_(min=0) * (self.total_row_bytes / max(self.layout.n_rows, 1))

    def _paced(self, r: int, estimators) -> torch.Tensor:
        """
        Throughputs that set the MTA time for worker r (0 = ignored).

        With outage-aware RSP a worker suspended for its link no longer sets the pace of the
        others (it does its own).
        """
        thr = torch.tensor([e.value_bps for e in estimators], dtype=torch.float64)
        if self.policy.outage_aware and not bool(self.active.all()):
            keep = self.active.clone()
            keep[r] = True
            thr[~keep] = 0.0
        return thr

    def _budget_rows(self, estimators, r: int) -> int:
        vals = [e.value_bps for e in estimators if e.value_bps > 0]
        if not vals or estimators[r].value_bps <= 0:
            return 0
        q = estimators[r].value_bps / min(vals)
        return row_budget(q, self.policy.mta, self.layout.n_rows)

    def _on_ack(self, ack: TransferAck, now: float) -> list:
        r = ack.sender
        if not 0 <= r < self.n or ack.receiver != SERVER:
            raise MessageError(f'ack from unknown worker {r}')
        dl = self.downlinks[r]
        if dl is None or ack.transfer_id != dl.transfer.transfer_id:
            return []                                  # late or duplicate: nothing to do
        if not ack.final:
            return self._sends(r, dl, dl.transfer.on_ack(ack, now))
        delivered = dl.transfer.on_final(ack, now)
        if delivered is None:
            return []
        self._commit_downlink(r, dl, delivered)
        if dl.transfer.flags & FLAG_LATE:
            return self._late_pull_done(r, dl, delivered, now)
        nbytes, secs = dl.transfer.throughput_sample()
        self.bytes_down += dl.transfer.bytes_sent
        if nbytes:
            self.thr_down[r].update(nbytes, secs)
        rtt = dl.transfer.round_trip_sample()
        if rtt is not None:
            self.rtt_down[r].update(rtt)
        self.downlinks[r] = None
        c = dl.transfer.clock
        if dl.snapshot and self.unsynced[r] is not None:
            return [Log('snapshot_partial', float(delivered.size), r)] + \
                self._start_snapshot(r, c, now)
        if (self.slots is None and not dl.transfer.flags & FLAG_FREE
                and not self._worker_rsp_ok(r, c, dl.active, dl.bounds)):
            # Mandatory rows were lost on the way: the worker waits for them. Whether it
            # checks is what this pull told it (FLAG_FREE), not whether it runs free now: a
            # robot let go while its pull was under way checks that pull, and without a
            # repair it waited for ever (free_stragglers under message loss, 3 robots).
            self.repairs += 1
            return [Log('downlink_repair', float(delivered.size), r, {'clock': c})] + \
                self._start_downlink(r, c, now)
        self._pull_done_at[r] = now
        out = [Log('pull_done', float(delivered.size), r,
                   {'bytes': nbytes, 'seconds': secs, 'rows_total': self.layout.n_rows,
                    'duration': now - dl.transfer.start_time, 'round_trip': rtt})]
        if self.slots is not None:
            self.slots.release(r, 'pull')
            return out + self._dispatch_slots(now)
        out += self._try_serve(r, now)
        if self.policy.late_pulls and self.downlinks[r] is None:
            self._late_pull_until[r] = now + self.compute_est[r].value
            self._late_pull_clock[r] = c
            if not (self.policy.late_rows and self._withholds(r)):
                out += self._start_late_pull(r, c, now)
            # else its late push goes first (one transfer at a time on a half-duplex
            # station, and that one frees the others); the late pull follows it
        return out

    def _withholds(self, r: int) -> bool:
        """Whether worker r's last push withheld rows (its late push will send them)."""
        return bool((self.versions.v[:, r] < self.clock[r]).any())

    def _late_pull_done(self, r: int, dl: _Downlink, delivered: np.ndarray,
                        now: float) -> list:
        """
        Finish a late pull: committed like a pull, but not one (see ``_start_late_pull``).

        Its throughput is not sampled: a late pull is often a chunk or two, mostly round
        trip, as a late push is.
        """
        self.bytes_down += dl.transfer.bytes_sent
        self.downlinks[r] = None
        self.late_pulls += 1
        self.late_pull_rows += int(delivered.size)
        out = [Log('pull_done', float(delivered.size), r,
                   {'bytes': dl.transfer.bytes_sent, 'rows_total': self.layout.n_rows,
                    'duration': now - dl.transfer.start_time, 'late': True})]
        if r in self.pending:
            return out + self._try_serve(r, now)    # it pushed meanwhile: its pull is due
        return out + self._start_late_pull(r, dl.transfer.clock, now)

    def _worker_rsp_ok(self, r: int, c: int, active: torch.Tensor,
                       bounds: torch.Tensor | None = None) -> bool:
        """Check the worker-side RSP on what r holds (``sent[r]`` = its ``vloc``)."""
        if bounds is not None:           # per column: the bounds its RowVersions carried
            floor = (c - bounds).to(torch.int32).unsqueeze(0)
            return bool((self.delivered.sent(r) >= floor)[:, active].all())
        if bool(active.all()):
            return bool(self.delivered.dl_min[r].min() >= c - self.policy.staleness)
        return bool((self.delivered.sent(r)[:, active] >= c - self.policy.staleness).all())

    def _commit_downlink(self, r: int, dl: _Downlink, delivered: np.ndarray) -> None:
        """Delivered rows: G[r] + E[r] -= C(p), i.e. mirror[r] -= C(p); sent[r] = versions."""
        if delivered.size == 0:
            if not dl.snapshot:
                self.delivered.unpin(('dl', r))
            return
        layout = self.snap_layout if dl.snapshot else self.layout
        mask = torch.zeros(layout.n_rows, dtype=torch.bool)
        mask[torch.from_numpy(delivered)] = True
        full = delivered.size == layout.n_rows
        if dl.snapshot:
            # the worker's rows are now exactly the values sent
            if full:
                self.mirror[r].copy_(dl.values)
            else:
                layout.where_rows(mask, dl.values, self.mirror[r], out=self.mirror[r])
            self.unsynced[r] &= ~mask
            if not bool(self.unsynced[r].any()):
                self.unsynced[r] = None
                every = torch.ones(self.layout.n_rows, dtype=torch.bool)
                self.delivered.commit(r, every, ('snap', r), self.snap_event[r], dl.active,
                                      v_snap=dl.v_snap)
                self.delivered.unpin(('snap', r))
                self.snap_v[r] = None
            return
        else:
            q = self.codec.decode(layout, dl.rowbytes, dl.scales, self._scratch,
                                  row_mask=None if full else mask, per_row=dl.per_row)
            self.mirror[r].sub_(q)    # the very values the worker subtracted from its model
        # Suspended workers' columns travel as -1: the worker keeps its old versions there.
        self.delivered.commit(r, mask, ('dl', r), dl.event, dl.active)
        self.delivered.unpin(('dl', r))

    def _v_snap(self, r: int, dl: _Downlink) -> torch.Tensor:
        """Return the version table a downlink carries (``[M, N]``)."""
        if dl.v_snap is not None:
            return dl.v_snap
        return self.delivered.pinned_snapshot(('dl', r), dl.event)

    def _stall_diagnostic(self, r: int, now: float) -> Log:
        c = self.pending.get(r, self.clock[r])
        pairs = self.versions.violating_pairs(c, self._bounds(r), self.active)
        waiting_for = sorted(set(pairs[:, 1].tolist()))
        return Log('stall_diagnostic', now - self.stall_since[r], r, {
            'clock': c, 'violating_rows': int(pairs[:, 0].unique().numel()),
            'waiting_for_workers': waiting_for,
            'worker_clocks': list(self.clock),
            'active_workers': self.active_workers(), 'min_workers': self.min_workers,
            'hint': 'a worker is far behind or its link is down; check its LinkStats, or '
                    'raise the staleness threshold'})


def _ack_fields(ack: TransferAck) -> dict:
    """Return a TransferAck as plain fields (for checkpoints)."""
    return {'transfer_id': ack.transfer_id, 'sender': ack.sender, 'receiver': ack.receiver,
            'seq': ack.seq, 'final': ack.final, 'bytes_received': ack.bytes_received,
            'chunk_ranges': [int(x) for x in ack.chunk_ranges],   # plain types: torch.load
            'receive_time': ack.receive_time, 'target_incarnation': ack.target_incarnation}


def encode_versions(transfer_id: int, receiver: int, v: torch.Tensor | None, rows: np.ndarray,
                    active: torch.Tensor | None = None,
                    v_rows: torch.Tensor | None = None) -> RowVersions:
    """
    Run-length encode the version vectors of ascending ``rows`` (vectorised).

    Workers not in ``active`` (suspended from the staleness rules) get version -1 in every
    run: the worker's RSP check ignores them, and keeps its old versions for them. Without
    rows, one run for row 0 (not delivered, so not applied) still carries that membership.

    A run breaks only where the version vector changes, and spans the row ids in between that
    the transfer does not carry: the worker applies versions to delivered rows only, so those
    are ignored. ``v_rows``: ``v[rows]`` already gathered (then ``v`` may be None). A partial
    transfer skips rows all over the model; breaking runs at every gap
    cost a straggler's pull ~140 runs (3.5 kB, 3 % of the model) where ~25 suffice.
    """
    n = (v if v_rows is None else v_rows).shape[1]
    if rows.size == 0:
        if active is None or bool(active.all()):
            return RowVersions(transfer_id=transfer_id, receiver=receiver, n_workers=n)
        rows = np.zeros(1, dtype=np.int64)
    vv = (v[torch.from_numpy(rows)] if v_rows is None else v_rows).numpy()
    if active is not None and not bool(active.all()):
        vv = vv.copy()
        vv[:, ~active.numpy()] = -1
    new_run = np.ones(rows.size, dtype=bool)
    new_run[1:] = np.any(vv[1:] != vv[:-1], axis=1)
    starts = np.flatnonzero(new_run)
    ends = np.append(rows[starts[1:]], rows[-1] + 1)
    return RowVersions(transfer_id=transfer_id, receiver=receiver, n_workers=n,
                       run_starts=rows[starts].astype(np.uint32),
                       run_lengths=(ends - rows[starts]).astype(np.uint32),
                       versions=vv[starts].reshape(-1).astype(np.int32))
