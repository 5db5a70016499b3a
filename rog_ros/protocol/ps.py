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

One class, one module per concept: this module admits messages (incarnations), applies
pushes and hands out FLOWN's slots; the other parts are mixins working on the same state:
``ps_downlink.py`` (the pull path: staleness check, stalls, downlinks, acks),
``ps_membership.py`` (suspension, readmission, quorum), ``ps_outage.py`` (outage-aware RSP),
``ps_slack.py`` (straggler slack, the too-slow rule) and ``ps_checkpoint.py``.

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
* Downlink repair. A RowVersions precedes every END (retransmissions too, within the bound of
  the robot's versions writer: ``transfer.VersionsLink``). After a downlink's final ack, if
  the rows the worker now holds still violate its RSP check (mandatory rows were lost), a
  repair downlink starts at once.
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

from rog_ros.core.atp import Ewma, Smoothed
from rog_ros.core.compress.base import RowCodec
from rog_ros.core.compress.identity import Identity
from rog_ros.core.delivered import DeliveredVersions
from rog_ros.core.encoding_cache import EncodingCache, rows_written
from rog_ros.core.packing import DEFAULT_CHUNK_BYTES
from rog_ros.core.row_updates import add_rows_, decode_delivered, sub_rows_
from rog_ros.core.rows import RowLayout
from rog_ros.core.versions import VersionTable
from rog_ros.protocol.actions import Log, Send
from rog_ros.protocol.messages import (
    check_schema, FLAG_END, FLAG_JOIN, FLAG_LATE, FLAG_REQUEST, KIND_GRAD, LinkStats,
    MAX_CLOCK, MessageError, new_incarnation, RowChunk, Schedule, SERVER, stamp_incarnations,
    TransferAck)
from rog_ros.protocol.policies.base import SyncPolicy
from rog_ros.protocol.policies.flown import SlotScheduler
from rog_ros.protocol.ps_checkpoint import CheckpointMixin
from rog_ros.protocol.ps_downlink import DownlinkMixin, OpenDownlink
from rog_ros.protocol.ps_final import FinalModelMixin
from rog_ros.protocol.ps_membership import MembershipMixin
from rog_ros.protocol.ps_outage import OutageAwareMixin
from rog_ros.protocol.ps_slack import SlackMixin
from rog_ros.protocol.revival import DuplicateRanks, POKE_END_TIMEOUTS, RevivalWatch
from rog_ros.protocol.transfer import (
    BOUND_END_S, check_chunk, fragment_bytes_checked, lease_seconds, PeerLink, Receiver,
    snapshot_layout, VersionsLink, WHC_FRAGMENT_BYTES)
import torch


def _carries_rows(msg) -> bool:
    """Tell whether ``msg`` is a data chunk (rows a push brings), not a control chunk or an ack."""
    return isinstance(msg, RowChunk) and not msg.flags & (FLAG_END | FLAG_JOIN | FLAG_REQUEST)


class ServerEngine(MembershipMixin, OutageAwareMixin, SlackMixin, CheckpointMixin,
                   DownlinkMixin, FinalModelMixin):
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
        Suspend a worker from the staleness rules after this long without a chunk, ack or JOIN
        from it (None: never). Its netmon's LinkStats do not count: they go on after the
        worker crashed.
    min_workers : int
        Quorum: pulls are served only while at least this many workers are active.
    clock_slack : int
        Clocks above ``max_iterations + clock_slack`` are rejected (bounds).
    track_conservation : bool
        Keep outage-aware RSP's ledger ``discarded`` (float64, model-sized): what weighted
        pushes left out or added, for the conservation check of tests. Off, a weighted push
        costs no model-sized float64 pass (13% of an EACOL ConvMLP-M simulation with a
        robot out).
    final_model : bool
        Hold each worker's stop order until the whole fleet is done and send it the final
        model first, the consensus as the fleet finished (``ps_final``): every robot leaves
        with the trained model. Off, a worker stops at its last pull with its own model (the
        simulator: runs end where they did).
    let_go_silent : bool or None
        Let a worker go once the others finished when it is out for its link and silent for
        ``ps_final.FINAL_PATIENCE_S`` (frozen, powered off, a dead radio), so that the run
        ends; None: as ``final_model``. The server node turns it on whatever ``final_model``
        says; the simulator leaves it off (its runs end where they did).
    lease_s : float
        The robots' DDS lease: a downlink at the 4 MiB bound waits that long after the
        robot's last ack before its END (``transfer.BOUND_END_S`` by default).
    fragment_bytes : int
        The DDS ``FragmentSize`` that the writer of each robot's chunks counts with
        (``transfer.PeerLink``; ``WHC_FRAGMENT_BYTES`` by default): the server node passes
        a smaller one its Cyclone configuration sets (``connect.transfer_fragment_bytes``).

    """

    def __init__(self, layout: RowLayout, codec: RowCodec, policy: SyncPolicy, n_workers: int,
                 w0: torch.Tensor, lr: float, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 window: int = 4, max_iterations: int | None = None,
                 stall_warn_s: float = 30.0, end_timeout_s: float = 2.0,
                 incarnation: int | None = None, absence_timeout_s: float | None = None,
                 min_workers: int = 1, clock_slack: int = 16,
                 track_conservation: bool = False, final_model: bool = False,
                 let_go_silent: bool | None = None, lease_s: float = BOUND_END_S,
                 fragment_bytes: int = WHC_FRAGMENT_BYTES):
        lease_s = lease_seconds(lease_s)
        fragment_bytes = fragment_bytes_checked(fragment_bytes)
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
        self.lease_s = lease_s     # the robots' DDS lease: END at the 4 MiB bound
        # what the server's writer of each robot's chunks holds, all transfers together
        self.peers = [PeerLink(fragment_bytes=fragment_bytes) for _ in range(n_workers)]
        # ... and of its RowVersions, which go again before every repeated END
        self.version_links = [VersionsLink(fragment_bytes=fragment_bytes)
                              for _ in range(n_workers)]
        dtype = w0.dtype
        self.w_srv = w0.detach().clone()
        self.mirror = self.w_srv.unsqueeze(0).repeat(n_workers, 1)   # each worker's model
        self.versions = VersionTable(layout.n_rows, n_workers)
        self.delivered = DeliveredVersions(layout.n_rows, n_workers)   # sent[r] = vloc of r
        self.clock = [0] * n_workers
        self.max_clock = (MAX_CLOCK if max_iterations is None
                          else min(MAX_CLOCK, int(max_iterations) + int(clock_slack)))
        self.receiver = Receiver(SERVER, layout, codec, max_clock=self.max_clock)
        self.downlinks: list[OpenDownlink | None] = [None] * n_workers
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
        # each worker's last downlink encoding of mirror[r] - w_srv: its next one re-encodes
        # the rows changed since (a late pull after a late push: those rows)
        # (their held rows: one [N, M] matrix, so that a push marks its rows for all at once)
        use = EncodingCache.applies(layout, codec)
        self._encodings_valid = torch.zeros(n_workers if use else 0, layout.n_rows,
                                            dtype=torch.bool)
        self._encodings = [EncodingCache(layout.n_rows, self._encodings_valid[r])
                           for r in range(n_workers)] if use else []
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
        self.pull_repeats = 0         # pulls served again to a worker that still waited
        self.repairs = 0              # downlinks repeated for lost mandatory rows
        self.revivals = 0             # retired worker runs taken back (protocol.revival)
        # incarnations (DESIGN section 10)
        self.incarnation = (int(incarnation) if incarnation is not None
                            else new_incarnation())
        self.worker_inc = [0] * n_workers          # 0 = not heard yet
        self.retired: list[list[int]] = [[] for _ in range(n_workers)]
        self._retired_pokes = RevivalWatch()   # (worker, retired run) -> its pokes since
        self._duplicates = DuplicateRanks()      # two live processes of one rank (revival)
        self.duplicate_ranks: set = self._duplicates.ranks   # ranks they were seen to share
        self.unsynced: list[torch.Tensor | None] = [None] * n_workers   # rejoin snapshot owes
        self._resync_owed: set = set()   # workers whose next pull is a snapshot (resync)
        self._last_join: list[tuple | None] = [None] * n_workers
        self.snap_codec = Identity(dtype)
        self.snap_layout = snapshot_layout(layout)
        self.snap_v: list[torch.Tensor | None] = [None] * n_workers   # epoch's versions
        self.snap_event = [0] * n_workers                              # ... their event
        self._init_membership(n_workers, absence_timeout_s, min_workers)
        self._init_checkpoints(n_workers)
        self._init_outage(n_workers, track_conservation)
        self._init_slack(n_workers)
        self._init_final(final_model, let_go_silent)
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
            if isinstance(msg, LinkStats):
                return self._out(pre + self._on_link_stats(msg))
            if _carries_rows(msg):
                # Its rows are checked once, where they are taken (the receiver), or first
                # if they will be dropped unread; it counts as heard only once they passed. (Taking
                # rows and hearing the robot commute: the actions stay in the order of a
                # message heard first.)
                self._check_unread(msg)
                taken = self._on_chunk(msg, now)
                return self._out(pre + self._presence(msg.sender, now) + taken)
            self._validate(msg)
            pre += self._presence(msg.sender, now)
            if isinstance(msg, RowChunk):
                return self._out(pre + self._on_chunk(msg, now))
            return self._out(pre + self._on_ack(msg, now))
        except MessageError as err:
            self.rejects += 1
            return [Log('reject', 1.0, getattr(msg, 'sender', -1), {'error': str(err)})]

    def on_tick(self, now: float) -> list:
        out = []
        for r, dl in enumerate(self.downlinks):
            if dl is not None:
                out += self._sends(r, dl, dl.transfer.on_tick(now), now)
        for r, t0 in self.stall_since.items():
            # (issue 9 defect 1) a stored deadline, the very value next_wakeup returns
            if now >= self.stall_warned.get(r, t0 + self.stall_warn_s):
                self.stall_warned[r] = now + self.stall_warn_s
                out.append(self._stall_diagnostic(r, now))
        # membership: fires when now >= the stored deadline (the value next_wakeup returned)
        self._arm_absence(now)
        for r in self._absence_watch():
            if now >= self.absent_at[r]:
                out += self.suspend(r, now, 'absent')
        out += self._outage_check(now)
        out += self._final_tick(now)
        return self._out(out)

    def next_wakeup(self) -> float | None:
        times = [dl.transfer.next_wakeup() for dl in self.downlinks if dl is not None]
        times += [self.stall_warned.get(r, t0 + self.stall_warn_s)
                  for r, t0 in self.stall_since.items()]
        times += [self.absent_at[r] for r in self._absence_watch()]
        times.append(self._absence_arm_deadline())
        times.append(self._outage_deadline())
        times.append(self._final_deadline())
        times = [t for t in times if t is not None]
        return min(times) if times else None

    def worker_model(self, r: int) -> torch.Tensor:
        """Exactly what worker r holds once its acks are in (w_srv + G[r] + E[r]); a copy."""
        return self.mirror[r].clone()

    def consensus_model(self, out: torch.Tensor | None = None) -> torch.Tensor:
        """
        Mean of the workers' models (the model to evaluate and checkpoint); into ``out``.

        Once the final model was taken (``final_model``, the fleet is done), exactly that
        model, the one every robot is sent (a mean of N equal models may differ from each in
        the last bit).
        """
        if self.final_values is not None:
            v = self.final_values
            return v.clone() if out is None else out.copy_(v)
        return self.mirror.mean(0) if out is None else torch.mean(self.mirror, 0, out=out)

    @property
    def finished(self) -> bool:
        return all(self.stopped) and not self._owed_final

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
        Incarnation bookkeeping for a message from a worker (its presence: ``_presence``).

        Returns ``(actions, go_on)``: go_on False when the actions answer ``msg`` instead.
        """
        if isinstance(msg, LinkStats):
            # netmon's report says the robot's machine is up, not that its worker is: it
            # neither proves presence nor readmits (a crashed worker's netmon goes on)
            return [], True
        r = getattr(msg, 'sender', None)
        if r is None or not 0 <= r < self.n:
            raise MessageError(f'message from unknown worker {r}')
        inc, known = int(msg.incarnation), self.worker_inc[r]
        out = []
        if known and inc != known:
            # a malformed message must not reset anything, nor count as a retired run's
            # poke: three of a dead run's, refused one by one, proved it alive, and its one
            # late well-formed JOIN then retired the live run
            self._precheck(msg)
            revived = inc in self.retired[r] and self._retired_run_alive(r, inc, msg, now)
            # (a revived run that repeats the END of a push we closed waits for its pull)
            waits = revived and msg.flags & FLAG_END and \
                msg.transfer_id <= self.receiver.newest_closed.get((r, inc), -1)
            if inc in self.retired[r] and not revived:
                self.superseded += 1
                if isinstance(msg, RowChunk) and msg.flags & FLAG_END:
                    return [Send(r, self._answer_end(r, inc, msg, now))], False
                if isinstance(msg, RowChunk) and msg.flags & FLAG_JOIN:
                    # a restarted worker asks which pushes of that run our checkpoint holds
                    return [Send(r, self._hello(r, inc))], False
                return [Log('superseded', 1.0, r, {'from': 'old worker run'})], False
            if int(msg.target_incarnation) not in (0, self.incarnation):
                self.superseded += 1   # a new run of r cannot know an old run of ours
                out = [Log('superseded', 1.0, r, {'from': 'unverified worker run'})]
                if isinstance(msg, RowChunk) and msg.flags & (FLAG_END | FLAG_JOIN |
                                                              FLAG_REQUEST):
                    hello = self._hello(r, inc)       # who we are; change nothing
                    # (but no stop order to a robot given up that our final model awaits)
                    hello.stop = hello.stop and not self._owes_final_again(r, msg)
                    out.append(Send(r, hello))
                return out, False
            self.retired[r] = ([x for x in self.retired[r] if x != inc] + [known])[-8:]
            self._retired_pokes.keep(lambda k: k[0] != r or k[1] in self.retired[r])
            self.worker_inc[r] = inc
            out += self._reset_worker(r, now, msg)
            if revived:
                self.revivals += 1
                said = r in self.duplicate_ranks
                out.append(Log('worker_revived', 1.0, r, {'retired': known, 'duplicate': said}))
                out += self._duplicates.revived(r, inc, known)
                if waits:
                    out += self._resume_pull(r, int(msg.clock), now)
            if not int(msg.target_incarnation):
                # It never heard of any server run: a fresh start with nothing to resend (a
                # restored worker knows a server run and JOINs before its pushes count).
                self._joined(r, inc, -1)
        elif not known:
            self._precheck(msg)
            self.worker_inc[r] = inc
            if not int(msg.target_incarnation):
                self._joined(r, inc, -1)
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
        return out, True

    def _presence(self, r: int, now: float) -> list:
        """
        Count a valid message of worker r's live run as hearing it (membership, RowVersions).

        Only once the message passed every check: a run that sends nothing but malformed
        messages (a damaged radio, a fuzzer, a robot of another revision) is as absent as a
        silent one, and its garbage neither readmits it nor resets its versions' lease count.
        """
        # (back after a lease: a new reader? admitted only: a malformed message is no sign)
        self.version_links[r].heard(now, self.lease_s, self.last_heard[r])
        return self._heard(r, now)

    def _check_unread(self, chunk: RowChunk) -> None:
        """
        Check the rows of a data chunk that will be dropped unread, before anything counts it.

        A late copy of a push we closed, a duplicate of a chunk we hold, one of a push never
        to be applied (before its run's rejoin, after its robot's stop) is dropped without a
        look: garbage numbered so (a damaged radio's flipped transfer id lands mostly below
        the newest push closed) kept a robot present. Checked before ``_on_chunk``: a refused
        one must not move ``late_chunks``, ``duplicate_chunks`` or ``superseded``. A chunk
        the receiver takes is checked there (each chunk once).
        """
        receiver, s = self.receiver, chunk.sender
        if (receiver.drops_unread(chunk)
                or self._before_rejoin(s, chunk)
                or (self.stopped[s] and self._new_push_after_stop(s, chunk))):
            check_chunk(chunk, receiver.layout, receiver.codec, receiver.row_nbytes)

    def _before_rejoin(self, s: int, chunk: RowChunk) -> bool:
        """Tell whether a restored server's ``chunk`` of s was sent before its run's rejoin."""
        if not self.restored:
            return False
        joined = self.join_tid[s].get(chunk.incarnation)
        return joined is None or chunk.transfer_id <= joined

    def _validate(self, msg) -> None:
        """
        Refuse (``MessageError``) a control chunk or an ack the handlers would refuse.

        Before it counts as hearing its sender (``_presence``). Such messages carry no rows,
        so this costs nothing model-sized: the stateless checks (``_precheck``), and an END's
        clock against its open transfer's (the receiver refuses an END of another clock).
        """
        self._precheck(msg)
        if isinstance(msg, RowChunk) and msg.flags & FLAG_END and \
                not msg.flags & (FLAG_JOIN | FLAG_REQUEST):
            self.receiver.check_end(msg)

    def _retired_run_alive(self, r: int, inc: int, msg, now: float) -> bool:
        """
        Tell whether retired run ``inc`` of worker r is the live one (then it is taken back).

        Only the run's own pokes count (``protocol.revival``): a retired run that lives
        JOINs again if it was still rejoining, repeats its last END while it waits for a
        pull, pushes again when its rows are too old (each push answered as never applied),
        or repeats its slot request (FLOWN). What follows the revival is the poke's: a JOIN
        rejoins, an END of an open push completes it, an END of a push we closed asks for the
        pull it waits for (``_resume_pull``), a request asks for a slot.
        """
        if not (isinstance(msg, RowChunk) and msg.flags & (FLAG_JOIN | FLAG_END | FLAG_REQUEST)):
            return False
        return self._retired_pokes.alive((r, inc), now, self.end_timeout_s)

    def _resume_pull(self, r: int, clock: int, now: float) -> list:
        """
        Serve the pull a revived run waits for: it repeats the END of its push at ``clock``.

        Its push was applied or answered as never applied (both closed); either way it
        waits, at that clock, for the pull that follows, as after an empty push. We hold
        nothing of what it has (``_reset_worker``), so that pull is a snapshot.
        """
        if self.stopped[r]:
            return []                # the END's own answer repeats the stop order
        self.clock[r] = max(self.clock[r], clock)
        self.pending[r] = max(self.pending.get(r, 0), clock)
        if self.slots is not None:
            self.slots.request(r, 'pull', clock, now)
            return self._dispatch_slots(now)
        return self._try_serve(r, now)

    def _joined(self, r: int, inc: int, transfer_id: int) -> None:
        """
        Note the newest push run ``inc`` of worker r had sent when it joined this run.

        The book keeps the runs the engine knows of r (its live one and the retired ones):
        one entry per run that ever spoke grew it without bound (20,000 acks, 20,001 entries).
        """
        book = self.join_tid[r]
        book[inc] = transfer_id
        keep = {self.worker_inc[r], *self.retired[r]}
        for old in [k for k in book if k not in keep]:
            del book[old]

    def _precheck(self, msg) -> None:
        """Stateless validation of a message from an unknown incarnation (before a reset)."""
        if isinstance(msg, RowChunk):
            if msg.kind != KIND_GRAD or msg.receiver != SERVER:
                raise MessageError(f'unexpected chunk kind={msg.kind}')
            if not 0 <= msg.clock <= self.max_clock:
                raise MessageError(f'clock {msg.clock} outside [0, {self.max_clock}]')
            if not msg.flags & (FLAG_END | FLAG_JOIN | FLAG_REQUEST):
                check_chunk(msg, self.layout, self.codec, self.receiver.row_nbytes)
            if msg.flags & FLAG_REQUEST and self.slots is None:
                # (refused later too: here, before a new run of its sender retires the old)
                raise MessageError('transfer-slot request, but this server schedules no slots')
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
                        stop=self.stopped[r] and r not in self._owed_final,
                        target_incarnation=inc,
                        checkpoint_transfer=self._checkpoint_for(r, inc))

    def _reset_worker(self, r: int, now: float, msg=None) -> list:
        """Start afresh for a new incarnation of worker r (``msg``: its first message)."""
        dropped = self.receiver.drop_open(r)
        dl, self.downlinks[r] = self.downlinks[r], None
        # its previous run's reader stays matched for a lease: the writer keeps its chunks
        self.peers[r].hold(now + self.lease_s)
        self.version_links[r].hold(now + self.lease_s)     # (and its versions)
        self.pending.pop(r, None)
        out = self._end_stall(r, now)
        self._holds_unknown(r)
        if r in self._owed_final:
            out += self._owed_restarted(r, msg)     # (it may say it holds the model)
        elif r in self._missed_final:
            out += self._missed_restarted(r, msg)   # (given up: it may hold another)
        self._pull_done_at[r] = None
        if self.slots is not None:
            self.slots.release(r, 'push')
            self.slots.release(r, 'pull')
            self.slots.queue = [q for q in self.slots.queue if q.worker != r]
        return out + [Log('worker_restart', 1.0, r, {'dropped_uplinks': dropped,
                                                     'dropped_downlink': dl is not None})]

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
            self._joined(s, chunk.incarnation, max(
                self.join_tid[s].get(chunk.incarnation, -1), chunk.transfer_id))
            # A (re)joining worker holds a model we do not know: its next pull is a snapshot.
            join = (chunk.incarnation, chunk.transfer_id, chunk.clock)
            out = [Send(s, self._hello(s, 0, chunk.transfer_id))]
            if self._last_join[s] != join and not self.stopped[s]:
                self._last_join[s] = join
                if self.downlinks[s] is None or not self.downlinks[s].snapshot:
                    self.downlinks[s] = None          # dropped uncommitted
                    self._holds_unknown(s)
                out.append(Log('join', 1.0, s))   # once per join: repeats are pokes, copies
            return out
        if chunk.flags & FLAG_REQUEST:
            if self.slots is None:
                raise MessageError('transfer-slot request, but this server schedules no slots')
            if self.stopped[s]:
                return self._answer_stopped(s)
            if chunk.transfer_id <= self.receiver.newest_closed.get((s, chunk.incarnation), -1):
                return []                          # a late copy: we closed that push already
            # (not by clock: a worker that rejoins a restored server asks for a slot to push
            # again at the clock the checkpoint holds, and would wait for ever)
            if (s, 'push') in self.slots.active:   # our grant was lost: repeat it
                return [Send(s, Schedule(worker=s, clock=int(chunk.clock),
                                         push_deadline_s=-1.0))]
            self.slots.request(s, 'push', int(chunk.clock), now)
            return self._dispatch_slots(now)
        if self._before_rejoin(s, chunk):
            # sent before its rejoin: never applied by this run (answered, if an END)
            self.superseded += 1
            if chunk.flags & FLAG_END:
                return [Send(s, self._answer_end(s, chunk.incarnation, chunk, now))]
            return [Log('superseded', 1.0, s, {'from': 'before its rejoin'})]
        if self.stopped[s] and self._new_push_after_stop(s, chunk):
            # A push of a worker we stopped (its budget done, or let go): applied, it changed
            # the model after that worker's end, and after the fleet's end the final model
            # the robots hold. (A repeated END of a push we applied gets its final ack.) Its
            # END gets the empty "never applied" ack too once the final model is taken: a
            # run restarted holding it re-sends that END under its old incarnation and
            # rejoins only once it is answered (before, the ack would start its next push).
            if not chunk.flags & FLAG_END:
                return []
            if self.final_values is None:
                return self._answer_stopped(s)
            return [Send(s, self._answer_end(s, chunk.incarnation, chunk, now))] + \
                self._answer_stopped(s)
        acks, closed = self.receiver.on_chunk(chunk, now)
        out = [Send(s, a) for a in acks]
        if closed is not None:
            if math.isfinite(chunk.rate_bps) and chunk.rate_bps > 0:
                self.thr_up[s].value_bps = float(chunk.rate_bps)   # the worker's own estimate
                self.thr_up[s].samples += 1
            out += self._apply_push(closed, now)
        elif chunk.flags & FLAG_END and self.stopped[s]:
            out += self._answer_stopped(s)     # the stop order may have been lost
        elif chunk.flags & FLAG_END and s in self.stall_since and s in self.pending:
            out += self._ask_own_rows(s, self.pending[s])   # a held worker's poke: ask again
        elif chunk.flags & FLAG_END and self._waits_after_its_pull(s, chunk, now):
            self.pull_repeats += 1
            out.append(Log('pull_repeated', 1.0, s, {'clock': int(chunk.clock)}))
            out += self._resume_pull(s, int(chunk.clock), now)
        return out

    def _new_push_after_stop(self, s: int, chunk: RowChunk) -> bool:
        """
        Tell whether ``chunk`` of stopped worker s belongs to a push it began after its stop.

        Not: a copy of a push we closed (its final ack is repeated), and, until the fleet
        finished, a push open before the stop or late rows of an earlier push.
        """
        inc, tid = chunk.incarnation, chunk.transfer_id
        if self.receiver.cached_answer(s, inc, tid) is not None:
            return False
        if self.finished:
            return True
        return not chunk.flags & FLAG_LATE and (s, inc, tid) not in self.receiver.open

    def _waits_after_its_pull(self, s: int, end: RowChunk, now: float) -> bool:
        """
        Tell whether worker s still waits although we served the pull of its newest push.

        It repeats that push's END (its pull poke, every 4 end timeouts) only while it waits
        for a pull or for rows its own check still lacks; once served, it computes and pokes
        no more. If a poke comes a poke interval after we saw that pull through, and we hold
        neither a pull nor a transfer for it, its check and ours disagree (twice so far, each
        a defect of its own: a pull closed without its versions, rules taken from a late
        pull), and it would wait for ever: serve that pull again, with the current rules and
        whatever rows its check needs (not under FLOWN's slots: FLOWN's workers never wait).
        """
        done = self._pull_done_at[s]
        return (self.slots is None and done is not None and not self.stopped[s]
                and s not in self.pending and self.downlinks[s] is None
                and int(end.clock) == self.clock[s]
                and now - done >= POKE_END_TIMEOUTS * self.end_timeout_s)

    def _apply_push(self, inc, now: float) -> list:
        s = inc.sender
        mask, rowbytes, scales, chunk_ranges = inc.close()
        n_rows = int(mask.sum())
        late = self.late_weight(s, inc.clock)
        weight = late * self.outage_scale(s, now)
        self.last_push_weight = weight      # (observers such as the chaos ledger read it)
        if n_rows:
            rows, delta = decode_delivered(self.codec, self.layout, rowbytes, scales, mask,
                                           self._scratch, factor=self.lr / self.n,
                                           per_row=inc.per_row_scales)
            if weight != 1.0:
                # A late push of a suspended worker: the weighted part is applied, the rest is
                # discarded on purpose; an active one's while others are out (outage_scale):
                # more is applied. The ledger keeps the difference, signed (conservation:
                # w0 - w_srv = lr/N x sum of delivered pushes - discarded).
                if self.track_conservation:
                    if self.discarded is None:
                        self.discarded = torch.zeros(self.layout.n_params,
                                                     dtype=torch.float64)
                    # (mixed dtypes in place: no float64 copy of the push)
                    add_rows_(self.layout, self.discarded, rows, delta, alpha=1.0 - weight)
                delta.mul_(weight)
                if late < 1.0:
                    self.weighted_pushes += 1
                else:
                    self.rescaled_pushes += 1
            with rows_written(self._encodings, (self.mirror, self.w_srv), lambda i: None):
                sub_rows_(self.layout, self.w_srv, rows, delta)  # enters every G[s] (variant A)
                self._encodings_valid.masked_fill_(mask, False)   # (every worker's cache)
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
            self._note_push_period(s, now - last)
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
            out += self._sends(s, dl, dl.transfer.on_tick(now), now)
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
        """Take netmon's view of a robot's link (FLOWN's bandwidth estimate)."""
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
        for w, kind, waited, asked_at in self.slots.grant(now, self.clock, bandwidth):
            if waited > 0:
                self.triggers[w] += 1
                self.stall_time[w] += waited
                out += [Log('trigger', 1.0, w, {'slot': kind}), Log('stall_s', waited, w)]
            if kind == 'push':   # the grant names the push it answers (a late copy is known)
                out.append(Send(w, Schedule(worker=w, clock=asked_at,
                                            push_deadline_s=-1.0)))
                continue
            c = self.pending.pop(w, self.clock[w])
            if self.max_iterations is not None and c >= self.max_iterations:
                self.slots.release(w, 'pull')
                self.stopped[w] = True
                self._forget_encoding(w)
                out += self._stop_order(w, c) + [Log('worker_done', float(c), w)]
                out += self._start_final(now)
                out += self._dispatch_slots(now)
                continue
            out += self._start_downlink(w, c, now)
        return out
