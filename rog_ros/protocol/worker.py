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

One class, one module per concept: this module runs the loop (compute, push, pull) and
admits messages; ``worker_overlap.py`` holds what a worker does while it computes or
transfers (late rows, late pulls, compute ahead), ``worker_rejoin.py`` its durable state
and the rejoin after a restart of either side.

Faults (DESIGN section 10, docs/faults.md):

* Every message it sends carries its ``incarnation`` (random 64-bit, chosen by the driver) and,
  on directed messages, the server's incarnation as last seen (``target_incarnation``). It
  drops directed messages meant for another incarnation of itself, and messages of a server
  incarnation that was superseded.
* Before computing, it checks the worker-side RSP predicate on the per-row versions it received
  (``vloc``, DESIGN section 4); when a lost downlink left mandatory rows stale it waits (with a
  ``rsp_wait`` Log) for the server's repair downlink. A downlink END whose RowVersions has not
  arrived is not accepted (the server repeats both).
* ``state_dict`` / ``load_state_dict``: durable state. A worker restored under a new
  incarnation first re-sends the END of its in-flight push under its old incarnation and
  commits what the server's answer lists, then rejoins: JOIN, push, and a lossless snapshot
  pull (``FLAG_SNAPSHOT``) that makes its model exactly the server's view of it.
* Exactly-once across a server crash: the decoded pushes delivered after the server's last
  confirmed checkpoint (``Schedule.checkpoint_transfer``) are kept (encoded); when the server's
  incarnation changes they go back into the residual and are pushed again.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from rog_ros.core.atp import Ewma, expected_rows, infinite_mask, priority_order, Smoothed
from rog_ros.core.compress.base import RowCodec
from rog_ros.core.compress.defsgdm import MomentumPreconditioner
from rog_ros.core.compress.identity import Identity
from rog_ros.core.encoding_cache import EncodingCache, rows_written
from rog_ros.core.mta import mandatory_rows
from rog_ros.core.packing import DEFAULT_CHUNK_BYTES
from rog_ros.core.row_updates import (add_rows_, decode_delivered, few_rows, quantize_delivered,
                                      sub_rows_)
from rog_ros.core.rows import RowLayout
from rog_ros.core.versions import columns_satisfy
from rog_ros.protocol.actions import Log, SaveState, Send, StartCompute, Stopped
from rog_ros.protocol.messages import (
    check_schema, check_versions, FLAG_END, FLAG_FINAL, FLAG_FREE, FLAG_LATE, FLAG_REQUEST,
    FLAG_SNAPSHOT, FleetSizeError, ids_from_ranges, KIND_GRAD, KIND_UPDATE, MAX_CLOCK,
    MessageError, new_incarnation, RowChunk, RowVersions, Schedule, SCHEMA_VERSION, SERVER,
    stamp_incarnations, TransferAck, validate_ranges)
from rog_ros.protocol.policies.base import SyncPolicy
from rog_ros.protocol.revival import POKE_END_TIMEOUTS, RevivalWatch
from rog_ros.protocol.transfer import (
    BOUND_END_S, fragment_bytes_checked, lease_seconds, OutgoingTransfer, PeerLink, Receiver,
    snapshot_layout, WHC_FRAGMENT_BYTES)
from rog_ros.protocol.worker_overlap import OverlapMixin
from rog_ros.protocol.worker_rejoin import RejoinMixin
import torch


VERSIONS_AHEAD = 8
"""A RowVersions is kept only for an open downlink transfer or one at most this many ids past
the newest closed one (the server numbers a worker's downlinks 1, 2, ...)."""

NONFINITE_LIMIT = 5
"""Non-finite gradients in a row at which a worker gives up: training diverged. One is dropped
and computed again (a bad batch); the same model failing this often will not recover, and a
worker that went on would compute for ever without a step (``rog fleet --lr 1e12`` did)."""

MAX_COMPUTE_SLEEP_S = 60.0
"""Most idle time a Schedule may ask for before a computation (compute equalisation idles a
fast robot for a fraction of an iteration; a larger value only parks a robot)."""


class WorkerEngine(OverlapMixin, RejoinMixin):
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
    incarnation : int or None
        This run's id (random 64-bit, non-zero); None draws one. A restarted worker must use a
        new one.
    save_state_actions : bool
        Emit ``SaveState`` before every push END, and when a server restart, a resend or a
        confirmed checkpoint changed what the worker keeps (drivers that persist the worker's
        state for restarts), once after a restart recovered its push and once when the
        final model arrives; not after commits and pulls, which a restart redoes.
    keep_undurable : bool
        Keep the delivered pushes not yet covered by a confirmed server checkpoint (encoded,
        ~1/32 of the model each with the sign codec) to resend them after a server restart.
        Needed for exactly-once across server crashes; enable it when the server checkpoints.
    max_undurable : int
        At most this many such pushes are kept; beyond, the oldest is dropped and counted in
        ``undurable_dropped`` (a server crash could then lose it).
    max_clock : int
        Largest clock accepted in RowVersions (bounds, DESIGN section 10).
    join_on_start : bool
        Say JOIN before the first computation, also on a fresh start. Drivers that restart
        nodes should set it: a worker that lost its state then gets the model of a server
        that was restored from a checkpoint, and none of its pushes can be mistaken, by a
        restored server, for a delayed message of an earlier run.
    lease_s : float
        The server's DDS lease: a push at the 4 MiB bound waits that long after the server's
        last ack before its END (``transfer.BOUND_END_S`` by default).
    fragment_bytes : int
        The DDS ``FragmentSize`` that the writer of this robot's pushes counts with
        (``transfer.PeerLink``; ``WHC_FRAGMENT_BYTES`` by default): the worker node passes a
        smaller one its Cyclone configuration sets (``connect.transfer_fragment_bytes``).

    """

    def __init__(self, rank: int, n_workers: int, layout: RowLayout, codec: RowCodec,
                 policy: SyncPolicy, w0: torch.Tensor, momentum: float = 0.9,
                 nesterov: bool = True, weight_decay: float = 5e-4,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES, window: int = 4,
                 end_timeout_s: float = 2.0, track_conservation: bool = False,
                 incarnation: int | None = None, save_state_actions: bool = False,
                 keep_undurable: bool = False, max_undurable: int = 64,
                 max_clock: int = MAX_CLOCK, join_on_start: bool = False,
                 max_iterations: int | None = None, lease_s: float = BOUND_END_S,
                 fragment_bytes: int = WHC_FRAGMENT_BYTES):
        if layout.whole_model != policy.whole_model:
            raise ValueError(f'policy {policy.name} needs whole_model={policy.whole_model}')
        if not 0 <= rank < n_workers:
            raise ValueError(f'rank {rank} outside 0..{n_workers - 1}')
        if incarnation is not None and not 0 < int(incarnation) < 2 ** 64:
            raise ValueError(f'incarnation must be in [1, 2**64), got {incarnation}')
        self.rank, self.n = rank, n_workers
        self.layout, self.codec, self.policy = layout, codec, policy
        lease_s = lease_seconds(lease_s)
        fragment_bytes = fragment_bytes_checked(fragment_bytes)
        self.chunk_bytes, self.window, self.end_timeout_s = chunk_bytes, window, end_timeout_s
        self.lease_s = lease_s     # the server's DDS lease: END at the 4 MiB bound
        # what the writer of our pushes holds, counted as Cyclone counts it
        self.peer = PeerLink(fragment_bytes=fragment_bytes)
        self.incarnation = int(incarnation) if incarnation is not None else new_incarnation()
        self.save_state_actions = bool(save_state_actions)
        self.keep_undurable = bool(keep_undurable)
        self.max_undurable = int(max_undurable)
        self.max_clock = int(max_clock)
        dtype = w0.dtype
        self.w = w0.detach().clone()
        # the run's iteration budget, when known: the momentum compensation is released over
        # its middle (SyncPolicy.momentum_at); None keeps it compensated
        self.max_iterations = None if max_iterations is None else int(max_iterations)
        self._momentum_nominal, self._weight_decay = float(momentum), float(weight_decay)
        self.momentum = policy.momentum_at(momentum, n_workers, 1, self.max_iterations)
        self.precondition = MomentumPreconditioner(layout.n_params, self.momentum, nesterov,
                                                   self._decay(self.momentum), dtype=dtype)
        self.residual = torch.zeros(layout.n_params, dtype=dtype)   # A + e of the spec
        self.withheld = torch.zeros(layout.n_rows, dtype=torch.int32)
        self.vloc = torch.zeros(layout.n_rows, n_workers, dtype=torch.int32)
        self.active = torch.ones(n_workers, dtype=torch.bool)   # server's RSP membership
        # straggler slack per worker (``RowVersions.staleness_slack``, core/slack.py): extra
        # staleness the server tolerates in each column; ours also widens our own check and
        # lowers the MTA of our pushes
        self.slack = torch.zeros(n_workers, dtype=torch.int32)
        self.clock = 0
        self.push_deadline_s = 0.0 if not policy.whole_model else -1.0
        self.compute_sleep_s = 0.0
        self.receiver = Receiver(rank, layout, codec, max_clock=max_clock)
        self.snap_codec = Identity(dtype)
        self.snap_layout = snapshot_layout(layout)    # tensor rows, even for whole-model
        self.snap_receiver = Receiver(rank, self.snap_layout, self.snap_codec,
                                      max_clock=max_clock)
        self._snap_missing: torch.Tensor | None = None   # rows a rejoin snapshot still owes
        self._snap_versions: RowVersions | None = None
        self.push: OutgoingTransfer | None = None
        self._ahead: str | None = None   # compute ahead: None|running|ready|discard
        self._ahead_grad: torch.Tensor | None = None
        self._held_grad: torch.Tensor | None = None   # computed while a late push ran
        self._grad_held = False
        self._push_p: torch.Tensor | None = None
        self._push_sums: tuple = (None, -1, None)     # (tensor, its _version, its row sums)
        self._push_scales: torch.Tensor | None = None
        self._push_per_row = False
        # the last push's encoding of the residual: a late push sends rows it withheld,
        # unchanged since, and a follow-up push differs in the rows delivered
        self._encodings = ([EncodingCache(layout.n_rows)]
                           if EncodingCache.applies(layout, codec) else [])
        self.pulled_clock = 0           # newest clock whose pull has been applied
        self.pending_versions: dict[int, RowVersions] = {}
        self.versions_parts: dict[int, dict] = {}   # transfer id -> {part: RowVersions}
        self._parts_runs: dict[int, int] = {}       # transfer id -> runs its parts hold
        self.newest_pull_tid = 0        # newest downlink transfer closed (this server run)
        # idle|computing|pushing|pulling|stopped|awaiting_grant|recovering|rejoin_wait
        self.state = 'idle'
        self._last_end: RowChunk | None = None   # END of the last finished push
        self._pull_poke_at: float | None = None  # when to remind the server we wait
        self._grant_poke_at = 0.0                # FLOWN: when to repeat a slot request
        self._join_poke_at = 0.0                 # rejoin: when to repeat the JOIN
        self.next_tid = 0
        self.thr_up = Ewma()
        self.row_nbytes = codec.row_nbytes(layout)
        self.compute_est = Smoothed()    # seconds per computation
        self.rtt_up = Smoothed()         # round trip of the uplink (transfer.round_trip_sample)
        self._compute_started_at = 0.0
        self._d = torch.empty(layout.n_params, dtype=dtype)
        self._scratch = torch.empty(layout.n_params, dtype=dtype)
        # rows of late pulls (FLAG_LATE updates) that arrived while a computation read the
        # model: subtracted from it when that computation is over (allocated on first use)
        self._late_q: torch.Tensor | None = None
        self._late_q_pending = False
        # incarnations
        self.server_incarnation = 0              # 0 = not heard yet
        self.retired_servers: list[int] = []     # superseded server incarnations
        self._retired_server_msgs = RevivalWatch()   # retired server run -> its messages
        self._recover: dict | None = None        # restored in-flight push of an old run
        self._rejoin = bool(join_on_start)       # next Schedule starts the rejoin push
        self._fresh = bool(join_on_start)        # ... or, on a fresh start, the computation
        self._server_restarted = False           # ... and re-adds the undurable pushes
        self._rsp_waiting = False
        self._told_free = False         # the last pull said: not held to the bound (FLAG_FREE)
        self.holds_final = False        # we hold the fleet's final model (FLAG_FINAL): done
        # ... and ``w`` is not that model whole: rows of another final model (a server
        # restored from before the end took it anew) replaced some of its rows, the rest owed
        self.final_mixed = False
        self._final_id: bytes | None = None    # final_model_id(w) while holds_final (JOIN)
        self._dirty = False
        # exactly-once across server restarts: [(tid, rowbytes, scales, delivered rows)]
        # (incarnation, tid, rowbytes, scales, rows, per_row): scales as committed
        self.undurable: list[tuple] = []
        self._await_hello: set | None = None   # runs of ours a rejoin still asks about
        self._held_end: RowChunk | None = None   # a downlink END that came before its versions
        self.checkpoint_transfer = -1
        self.track = track_conservation
        if self.track:
            self.computed_total = torch.zeros(layout.n_params, dtype=torch.float64)
            self.delivered_total = torch.zeros(layout.n_params, dtype=torch.float64)
        # metrics
        self.bytes_up = 0
        self.bytes_down = 0
        self.rejects = 0
        self.superseded = 0             # messages of an old server run or meant for an old us
        self.server_heard = 0           # messages of the live server run taken (liveness)
        self.followups = 0
        self.rsp_waits = 0
        self.nonfinite_in_a_row = 0
        self.undurable_dropped = 0

    def _decay(self, mu: float) -> float:
        """
        Return the weight decay for worker momentum ``mu``.

        It is added as wd / (1 - mu) after momentum, so its strength stays the nominal one's.
        """
        nominal = self._momentum_nominal
        return self._weight_decay * (1.0 - mu) / (1.0 - nominal) if nominal < 1 else 0.0

    def _set_momentum(self, clock: int) -> None:
        """Set the momentum for the gradient of iteration ``clock`` (a release in progress)."""
        mu = self.policy.momentum_at(self._momentum_nominal, self.n, clock, self.max_iterations)
        if mu != self.momentum:
            self.precondition.set_momentum(mu, self._decay(mu), like=self.w)
            self.momentum = mu

    # ================================================================== public API
    def start(self, now: float) -> list:
        """Begin training: compute the first iteration (restored: recover, then rejoin)."""
        if self.state != 'idle':
            return []
        if self._recover is not None:
            self.state = 'recovering'
            return self._out(self._recover_send(now))
        if self._rejoin:
            return self._out(self._join(now))
        return self._out(self._compute(now))

    def _compute(self, now: float) -> list:
        self._apply_late_pulls()
        self.state = 'computing'
        self._compute_started_at = now + self.compute_sleep_s
        return [StartCompute(self.clock + 1, self.compute_sleep_s)] + self._start_late_push(now)

    def on_compute_done(self, grad: torch.Tensor, now: float) -> list:
        """Take a gradient (flat, layout order) for the iteration that StartCompute asked for."""
        if self._ahead in ('running', 'discard'):
            return self._out(self._on_ahead_done(grad, now))
        if self.state == 'stopped':
            # the server ended our training while this gradient was computed (a stop order
            # after the fleet finished, or a late one): it was never ours to push or count
            return []
        if self.state != 'computing':
            raise RuntimeError(f'on_compute_done in state {self.state}')
        self._check_gradient(grad)
        if not math.isfinite(float(grad.sum())):
            # A diverged step must not poison the fleet: drop it, keep the clock.
            # (stamped: the computation it starts again may start a late push)
            return self._out(self._nonfinite(now) or
                             [Log('nonfinite_gradient', 1.0, self.rank)] + self._compute(now))
        self.nonfinite_in_a_row = 0
        if now > self._compute_started_at:
            self.compute_est.update(now - self._compute_started_at)
        if self.push is not None and self.push.flags & FLAG_LATE:
            return self._out(self._hold_gradient(grad, now))
        return self._out(self._take_gradient(grad, now))

    def _nonfinite(self, now: float) -> list:
        """Count a non-finite gradient; at ``NONFINITE_LIMIT`` in a row, stop: diverged."""
        self.nonfinite_in_a_row += 1
        if self.nonfinite_in_a_row < NONFINITE_LIMIT:
            return []
        self.state = 'stopped'
        return [Log('diverged', float(self.nonfinite_in_a_row), self.rank,
                    {'clock': self.clock}),
                Stopped(f'training diverged: {self.nonfinite_in_a_row} non-finite gradients '
                        f'in a row at iteration {self.clock}; lower the learning rate',
                        failed=True)]

    def _check_gradient(self, grad: torch.Tensor) -> None:
        if grad.shape != self.w.shape:
            raise ValueError(f'gradient has shape {tuple(grad.shape)}, expected '
                             f'{tuple(self.w.shape)}')

    def _take_gradient(self, grad: torch.Tensor, now: float) -> list:
        """Precondition ``grad`` into the residual as iteration ``clock + 1`` and push it."""
        self._set_momentum(self.clock + 1)
        d = self.precondition(grad, self.w, self._d)
        self.residual += d
        if self.track:
            self.computed_total += d
        self._apply_late_pulls()        # the model the gradient was computed on is done with
        self.withheld += 1
        self.clock += 1
        if self._rejoin:
            return self._join(now)       # the server restarted meanwhile
        if self.policy.scheduler == 'flown':
            return self._request_slot(now)
        return self._start_push(now) + self._maybe_compute_ahead(now)

    def _request_slot(self, now: float) -> list:
        """FLOWN: ask the server for a transfer slot; the push starts on its grant."""
        self.state = 'awaiting_grant'
        self._grant_poke_at = now + POKE_END_TIMEOUTS * self.end_timeout_s
        return [Send(SERVER, RowChunk(transfer_id=self.next_tid + 1, seq=0, sender=self.rank,
                                      receiver=SERVER, kind=KIND_GRAD, clock=self.clock,
                                      flags=FLAG_REQUEST, codec=self.codec.codec_id))]

    def on_message(self, msg, now: float) -> list:
        # the first server message names the server run; a rejected one must not (it would
        # make the real server's first message look like a server restart)
        unknown_server = self.server_incarnation == 0
        try:
            check_schema(msg)
            out = self._admit(msg, now)
            if out is None:
                out = self._handle(msg, now)
            if int(msg.incarnation) == self.server_incarnation:
                # a sign of the live server run's life (the node's give-up timer): a retired
                # run's message is one only once it is taken back, an unknown run's once it
                # is adopted (a dead run that kept talking kept a robot waiting for ever)
                self.server_heard += 1
            return self._out(out)
        except MessageError as err:
            self.rejects += 1
            if unknown_server:
                self.server_incarnation = 0
            info = {'error': str(err)}
            if isinstance(err, FleetSizeError):
                info['fleet_size'] = err.theirs     # a setting, not a damaged message
            return [Log('reject', 1.0, self.rank, info)]

    def _handle(self, msg, now: float) -> list:
        """Return the answer to an admitted message: one handler per type, the rest refused."""
        if isinstance(msg, TransferAck):
            return self._on_ack(msg, now)
        if isinstance(msg, RowChunk):
            return self._on_chunk(msg, now)
        if isinstance(msg, Schedule):
            return self._on_schedule(msg, now)
        if isinstance(msg, RowVersions):
            return self._on_versions(msg, now)
        raise MessageError(f'worker does not accept {type(msg).__name__}')

    def on_tick(self, now: float) -> list:
        if self._grad_held and self.push is None and self.state == 'computing':
            self._grad_held = False
            return self._out([Log('held_gradient_taken', 1.0, self.rank)] +
                             self._take_gradient(self._held_grad, now))
        if self.push is not None:
            return self._out([Send(SERVER, c) for c in self.push.on_tick(now)])
        if self.state == 'awaiting_grant' and now >= self._grant_poke_at:
            return self._out(self._request_slot(now))   # request or grant lost: ask again
        if self.state == 'rejoin_wait' and now >= self._join_poke_at:
            return self._out(self._join(now))
        if (self.state == 'pulling' and self._pull_poke_at is not None
                and now >= self._pull_poke_at and self._last_end is not None):
            # Waiting long for the pull: the server may have lost our END, or we lost its
            # stop order. Repeating the END is idempotent and makes the server answer again.
            self._pull_poke_at = now + POKE_END_TIMEOUTS * self.end_timeout_s
            return self._out([Send(SERVER, self._last_end), Log('pull_poke', 1.0, self.rank)])
        return []

    def next_wakeup(self) -> float | None:
        if self._grad_held and self.push is None and self.state == 'computing':
            return self._compute_started_at     # a held gradient is due: at once (past)
        if self.push is not None:
            return self.push.next_wakeup()
        if self.state == 'awaiting_grant':
            return self._grant_poke_at
        if self.state == 'rejoin_wait':
            return self._join_poke_at
        return self._pull_poke_at if self.state == 'pulling' else None

    # ================================================================== incarnations
    def _out(self, actions: list) -> list:
        """Stamp incarnations on every message sent; SaveState first when state changed."""
        for a in actions:
            if isinstance(a, Send):
                m = a.msg
                stamp_incarnations(m, self.incarnation, self.server_incarnation)
                if (self.push is not None and isinstance(m, RowChunk) and m.flags & FLAG_END
                        and m.transfer_id == self.push.transfer_id
                        and not getattr(self.push, 'saved', False)):
                    self.push.saved = True
                    self._dirty = True
        if self._dirty and self.save_state_actions:
            self._dirty = False
            return [SaveState('commit')] + actions
        self._dirty = False
        return actions

    def _admit(self, msg, now: float) -> list | None:
        """Incarnation checks: None to go on with ``msg``, or the actions that replace it."""
        inc = int(msg.incarnation)
        target = int(getattr(msg, 'target_incarnation', 0))
        revived = []
        if inc in self.retired_servers:
            # a malformed message of a retired run must count for nothing: two of a dead
            # server run's (a schedule for another robot, an ack to one) and its one late
            # well-formed message made it this robot's server again
            try:
                self._precheck(msg)
            except FleetSizeError:
                # a run of another fleet size is never our server again, and not the live
                # run's setting to stop for (the node stops on fleet_size): superseded
                self.superseded += 1
                return [Log('superseded', 1.0, self.rank, {'from': 'old server run'})]
            if not self._retired_server_alive(inc, now):
                self.superseded += 1
                return [Log('superseded', 1.0, self.rank, {'from': 'old server run'})]
            self.retired_servers = [x for x in self.retired_servers if x != inc]
            revived = [Log('server_revived', 1.0, self.rank)]
        past = self._past_incarnations()
        if target and target != self.incarnation:
            rec = self._recover
            ok = ((rec is not None and target == rec['incarnation']
                   and isinstance(msg, TransferAck))
                  or (target in past and isinstance(msg, Schedule)))   # hello for a past run
            if not ok:
                self.superseded += 1
                return [Log('superseded', 1.0, self.rank, {'to': 'old worker run'})]
        if self.server_incarnation == 0 or inc == self.server_incarnation:
            self.server_incarnation = self.server_incarnation or inc
            return None
        if target != self.incarnation and target not in past:
            # A new server run knows whom it talks to (from its checkpoint or our JOIN); a
            # message that does not is not allowed to make us drop our in-flight state.
            self.superseded += 1
            return [Log('superseded', 1.0, self.rank, {'from': 'unverified server run'})]
        if not revived:            # (a revived run's message was checked above)
            self._precheck(msg)
        return revived + self._server_restart(msg, inc, now)

    def _retired_server_alive(self, inc: int, now: float) -> bool:
        """
        Tell whether retired server run ``inc`` is the live one (then it is taken back).

        Server runs are not ordered: a late message of a server run that died can make us
        take it for a newer run and retire the live one, whose answers we would then refuse
        for ever. Any message of the retired run counts (``protocol.revival``): the live
        one answers every poke.
        """
        self._retired_server_msgs.keep(lambda k: k in self.retired_servers)
        return self._retired_server_msgs.alive(inc, now, self.end_timeout_s)

    def _past_incarnations(self) -> set:
        """Earlier runs of this worker whose pushes we still keep (or still recover)."""
        out = {u[0] for u in self.undurable}
        if self._recover is not None:
            out.add(int(self._recover['incarnation']))
        out.discard(self.incarnation)
        return out

    def _precheck(self, msg) -> None:
        """
        Stateless validation of a message from a new server run (before acting on it).

        Everything its handler would refuse without state: a message of a new or a retired
        server run that passed here and was refused only after it had retired the live run
        (``_server_restart``) or counted towards a retired run's revival made a robot drop
        its in-flight state for garbage (an update chunk of another codec, a schedule that
        sleeps for a day).
        """
        if isinstance(msg, Schedule):
            self._check_schedule(msg)
        elif isinstance(msg, TransferAck):
            if msg.sender != SERVER or msg.receiver != self.rank:
                raise MessageError('ack not addressed to this worker')
        elif isinstance(msg, RowChunk):
            if (msg.kind != KIND_UPDATE or msg.sender != SERVER
                    or msg.receiver != self.rank):
                raise MessageError('unexpected chunk for a worker')
            # its clock, and a data chunk's codec, sizes, rows and scales (only a new or a
            # retired run's message is checked twice: the live run's are checked once)
            (self.snap_receiver if msg.flags & FLAG_SNAPSHOT else self.receiver
             ).check_first(msg)
        elif isinstance(msg, RowVersions):
            if msg.receiver != self.rank:
                raise MessageError('RowVersions for another worker')
            check_versions(msg, self.layout.n_rows, self.n, self.max_clock)

    # ================================================================== push
    def _start_push(self, now: float, late_deadline: float | None = None) -> list:
        pol, layout = self.policy, self.layout
        late = late_deadline is not None
        p = self.residual    # not modified until this push commits: no compute meanwhile
        # a late push carries only rows with something unsent, none of them mandatory; when
        # they are few, their row sums and bytes are taken on them alone (the same bits)
        cand = torch.nonzero(self.withheld > 0).reshape(-1) if late else None
        cache = self._encodings[0] if self._encodings else None
        fresh = None if cache is None else cache.stale_rows(layout, self.codec, (p,), cand)
        alone = cand is not None and self.codec.encodes_rows_alone and few_rows(layout, cand)
        if fresh is not None:      # the rows that changed since the last push's encoding
            rowbytes, trs = cache.encode(layout, self.codec, p, fresh)
        elif alone:
            trs = layout.tensor_row_abs_sum_of(p, cand)
        else:
            trs = layout.tensor_row_abs_sum(p)
        row_sums = layout.row_abs_sum(p, trs)
        if pol.whole_model:
            order = torch.arange(layout.n_rows)
            k_min = layout.n_rows
        else:
            urgency = self.withheld
            own = int(self.slack[self.rank])
            inf = infinite_mask(urgency, pol.staleness + own, pol.convention)
            n_inf = int(inf.sum())
            if pol.ordering:
                order = priority_order(urgency, row_sums, inf, candidates=cand,
                                       use_magnitude=pol.use_magnitude, multiply=True)
            else:
                order = priority_order(urgency, row_sums, inf, use_magnitude=False,
                                       multiply=False, candidates=cand)
            k_min = 0 if late else mandatory_rows(layout.n_rows, pol.mta_for(own), n_inf)
        if late:
            deadline = late_deadline
        elif self.push_deadline_s < 0 or pol.whole_model:
            deadline = math.inf
        else:
            floor = pol.floor_s(self.compute_est.value, self.rtt_up.value)
            deadline = now + max(self.push_deadline_s, floor)
        row_mask = None
        if pol.scale_sent_rows and not pol.whole_model and not pol.chunk_scales:
            k_est = expected_rows(order, self.row_nbytes, k_min, deadline - now,
                                  self.thr_up.value_bps)
            row_mask = torch.zeros(layout.n_rows, dtype=torch.bool)
            row_mask[order[:k_est]] = True
        scales = self.codec.scales(layout, p, trs, row_mask)
        if fresh is None:
            rowbytes = (self.codec.encode_rows(layout, p, cand, trs) if alone
                        else self.codec.encode(layout, p, scales, trs))
            if cache is not None:
                cache.store(rowbytes, trs, (p,), cand if alone else None)
        self.next_tid += 1
        self.push = self._outgoing(self.next_tid, self.clock, rowbytes, scales, order, k_min,
                                   deadline, now,
                                   tensor_row_sums=trs if pol.chunk_scales else None,
                                   flags=FLAG_LATE if late else 0)
        self._push_p, self._push_sums = p, (p, p._version, trs)
        self._push_scales, self._push_per_row = self.push.commit_scales()
        if not late:
            self.state = 'pushing'
        return [Send(SERVER, c) for c in self.push.pump(now)]

    def _outgoing(self, tid, clock, rowbytes, scales, order, k_min, deadline, now,
                  tensor_row_sums=None, flags=0):
        tr = OutgoingTransfer(transfer_id=tid, sender=self.rank, receiver=SERVER,
                              kind=KIND_GRAD, clock=clock, layout=self.layout,
                              codec=self.codec, rowbytes=rowbytes, scales=scales, order=order,
                              n_mandatory=k_min, deadline=deadline, now=now,
                              window=self.window, chunk_bytes=self.chunk_bytes,
                              end_timeout_s=self.end_timeout_s, rate_bps=self.thr_up.value_bps,
                              tensor_row_sums=tensor_row_sums, flags=flags, peer=self.peer,
                              lease_s=self.lease_s)
        tr.rate_hint_bps = self.thr_up.value_bps
        return tr

    def _on_ack(self, ack: TransferAck, now: float) -> list:
        if ack.sender != SERVER or ack.receiver != self.rank:
            raise MessageError('ack not addressed to this worker')
        tr = self.push
        if tr is None or ack.transfer_id != tr.transfer_id:
            self.peer.on_ack(ack, now)         # (it frees the writer all the same)
            return []                          # late/duplicate ack of a finished transfer
        if self.state == 'recovering' and (not ack.final or
                                           ack.target_incarnation != self._recover[
                                               'incarnation']):
            return []
        if not ack.final:
            return [Send(SERVER, c) for c in tr.on_ack(ack, now)]
        delivered = tr.on_final(ack, now)
        if delivered is None:
            return []
        self._commit_push(delivered, tr)
        self._last_end = tr._end(tr.end_sent_at)
        late = bool(tr.flags & FLAG_LATE)
        nbytes, secs = tr.throughput_sample()
        if nbytes and not late:
            # (a late push is cut to the computation, often a chunk or two: its sample would
            # be mostly round trip and make the next push's pacing stop early)
            self.thr_up.update(nbytes, secs)
        rtt = tr.round_trip_sample()
        if rtt is not None:
            self.rtt_up.update(rtt)
        self.bytes_up += tr.bytes_sent
        self.push = None
        out = [Log('push_done', float(delivered.size), self.rank,
                   {'bytes': nbytes, 'seconds': secs, 'clock': self.clock,
                    'rows_total': self.layout.n_rows, 'duration': now - tr.start_time,
                    'round_trip': rtt, 'late': late})]
        if late and self.state == 'computing':
            # A gradient that waited for this commit is taken by the next tick (at once): a
            # call of its own, so a driver's ledger sees the commit and the computation apart.
            return out
        if self.state == 'recovering' or self._rejoin:
            # Saved once per restart: a run that dies before its own first END would make the
            # next one re-send this END of a dead run again, which the server takes back
            # (revived, sent a snapshot) after three of them over two poke intervals.
            self._recover = None
            self._last_end = None
            self._dirty = True
            return out + [Log('recovered_push', float(delivered.size), self.rank)] + \
                self._join(now)
        if bool((self.withheld > self.policy.staleness + int(self.slack[self.rank])).any()) \
                and not self._final_coming():
            # The server would stall us on our own rows: push them again right away (not
            # once the final model comes: it applies no push of ours, and answers each at
            # once as never applied, a push a round trip until we hold the model).
            self.followups += 1
            return out + [Log('followup_push', 1.0, self.rank)] + self._start_push(now)
        self.state = 'pulling'
        self._pull_poke_at = now + POKE_END_TIMEOUTS * self.end_timeout_s
        return out + self._maybe_compute(now)

    def _final_coming(self) -> bool:
        """Tell whether we hold the fleet's final model, or rows of it are under way."""
        return self.holds_final or any(bool(t.flags & FLAG_FINAL)
                                       for t in self.snap_receiver.open.values())

    def _commit_push(self, delivered: np.ndarray, tr: OutgoingTransfer) -> None:
        """
        Delivered rows: residual -= C(p) (A = 0, e = p - C(p)), n = 0. Others keep theirs.

        No ``SaveState`` for it: the state saved before the push's END already holds all a
        restart needs to commit exactly these rows again (its END re-sent under the old
        incarnation is answered from the server's closed transfers, or "nothing applied" by
        a server restored from before it). A save here wrote the robot's whole state once
        more per iteration (3 model sizes, fsynced: 114 MB with a 37.9 MB model).
        """
        if delivered.size == 0:
            self._push_p, self._push_sums = None, (None, -1, None)
            return
        layout = self.layout
        mask = torch.zeros(layout.n_rows, dtype=torch.bool)
        mask[torch.from_numpy(delivered)] = True
        p = self._push_p
        # the push's row sums, while p is the tensor they were taken of, unchanged since
        # (torch counts every in-place change of a tensor in ``_version``)
        of, version, trs = self._push_sums
        if of is not p or version != p._version:
            trs = None
        rows, q = quantize_delivered(self.codec, layout, p, self._push_scales, mask,
                                     self._scratch, per_row=self._push_per_row,
                                     tensor_row_sums=trs)
        if self.track:
            add_rows_(layout, self.delivered_total, rows, q)
        with rows_written(self._encodings, (self.residual,), lambda i: mask):
            sub_rows_(layout, self.residual, rows, q)
        self.withheld.masked_fill_(mask, 0)
        self._push_p, self._push_sums = None, (None, -1, None)
        if not self.keep_undurable:
            return
        # Keep it (encoded) until a confirmed server checkpoint covers it.
        # (with the scales and per_row flag just committed: a re-add decodes the same values)
        self.undurable.append((int(tr.incarnation or self.incarnation), tr.transfer_id,
                               torch.from_numpy(tr.rowbytes.copy()),
                               self._push_scales.clone(), delivered.copy(),
                               bool(self._push_per_row)))
        if len(self.undurable) > self.max_undurable:
            self.undurable.pop(0)       # exactly-once across a server crash is now lost
            self.undurable_dropped += 1

    # ================================================================== pull
    def _check_schedule(self, msg: Schedule) -> None:
        """
        Refuse (``MessageError``) a schedule for another robot, non-finite, or out of bounds.

        Stateless, so one check serves a new server run's schedule (``_precheck``, before it
        retires the live run) and the live run's (``_on_schedule``).
        """
        if msg.worker != self.rank:
            raise MessageError('schedule for another worker')
        if not math.isfinite(msg.push_deadline_s) or not math.isfinite(msg.compute_sleep_s):
            raise MessageError('non-finite schedule')
        if msg.compute_sleep_s > MAX_COMPUTE_SLEEP_S:
            # (equalising compute times idles a fast robot for a fraction of an iteration;
            # a day of sleep parked the robot for good)
            raise MessageError(f'compute sleep of {msg.compute_sleep_s:g} s, above '
                               f'{MAX_COMPUTE_SLEEP_S:g} s')
        if len(msg.urgent_rows):
            validate_ranges(np.asarray(msg.urgent_rows, dtype=np.int64), self.layout.n_rows,
                            'urgent rows')

    def _on_schedule(self, msg: Schedule, now: float) -> list:
        self._check_schedule(msg)
        about = int(msg.target_incarnation) or self.incarnation
        self._prune_undurable(int(msg.checkpoint_transfer), about)
        if about != self.incarnation:
            # the answer about an earlier run of ours: only what its checkpoint holds
            if self._await_hello is not None:
                self._await_hello.discard(about)
            return self._maybe_rejoin_push(now)
        if msg.stop:
            # rows of late pulls deferred for a computation that will now never be taken:
            # the model ends as the server holds it (a node delivers no Schedule mid-compute)
            self._apply_late_pulls()
            self.state = 'stopped'
            return [Stopped('server says training is over')]
        self.push_deadline_s = float(msg.push_deadline_s)
        self.compute_sleep_s = max(0.0, float(msg.compute_sleep_s))
        if self.state == 'rejoin_wait':
            if self._await_hello is not None and msg.clock == -1 - self.next_tid:
                self._await_hello.discard(self.incarnation)   # the answer to our JOIN
            return self._maybe_rejoin_push(now)
        if self.state == 'awaiting_grant':       # FLOWN: our slot was granted, unless this
            if msg.clock != self.clock:            # is a late copy of an earlier push's grant
                return []
            return self._start_push(now)
        if len(msg.urgent_rows) and msg.clock == self.clock:
            return self._push_urgent_rows(msg.urgent_rows, now)
        return []

    def _push_urgent_rows(self, ranges, now: float) -> list:
        """
        Push again the rows of ours that the server holds our pull on (``urgent_rows``).

        The server has them too old for our clock: our own count of withheld iterations can
        be lower than the server's view after a restart from a saved state. Only a push of
        those rows frees the pull, so they become mandatory and a follow-up push starts at
        once (if none is under way).
        """
        if self.state != 'pulling' or self.push is not None:
            return []
        rows = torch.from_numpy(ids_from_ranges(ranges, self.layout.n_rows))
        self.withheld[rows] = torch.clamp(self.withheld[rows], min=self.policy.staleness + 1)
        self.followups += 1
        return [Log('urgent_rows', float(rows.numel()), self.rank)] + self._start_push(now)

    def _on_versions(self, msg: RowVersions, now: float) -> list:
        if msg.receiver != self.rank:
            raise MessageError('RowVersions for another worker')
        check_versions(msg, self.layout.n_rows, self.n, self.max_clock)
        tid = int(msg.transfer_id)
        if tid <= self.newest_pull_tid:
            return []                   # repeated with a retransmitted END: already applied
        is_open = any(k[2] == tid for k in self.receiver.open) or \
            any(k[2] == tid for k in self.snap_receiver.open)
        if not (is_open or tid <= self.newest_pull_tid + VERSIONS_AHEAD):
            raise MessageError(f'RowVersions for transfer {tid}, which is not expected')
        out = []
        if msg.parts:
            # one part of versions past the server's part bound: acknowledged (the server
            # writes the next ones as parts arrive), acted on once all of them are here
            out = [Send(SERVER, TransferAck(transfer_id=tid, sender=self.rank, receiver=SERVER,
                                            seq=-1 - int(msg.part), final=False,
                                            receive_time=now))]
            msg = self._versions_from_parts(msg)
            if msg is None:
                return out
        self.pending_versions[tid] = msg
        while len(self.pending_versions) > 2:
            del self.pending_versions[min(self.pending_versions)]
        held, self._held_end = self._held_end, None
        if held is not None and held.transfer_id == tid:
            return out + self._on_chunk(held, now)    # its END came first: close it now
        return out

    def _versions_from_parts(self, msg: RowVersions) -> RowVersions | None:
        """
        Keep a part of a transfer's versions; return them whole once every part is here.

        Whole: the parts' runs in part order, as the one copy the server split (its slack
        and membership are in every part). The set is checked whole as a copy is (runs
        ascending across parts); parts of another split of the same transfer (another
        ``parts``) are refused. Parts of the two newest transfers only, as for copies.

        What is held is bounded by one copy: a part carries at least one run
        (``split_versions``) and the parts of a transfer at most ``n_rows`` runs together
        (their runs are disjoint rows), so more parts than rows, an empty part, or a part
        that takes the runs held past the rows is refused. Without this a server that sent
        65,535 parts of ``n_rows`` runs each kept the robot holding as many runs, and each
        part copied the parts held before it (quadratic). Nothing changes on a refusal.
        """
        tid, count, k = int(msg.transfer_id), int(msg.parts), int(msg.part)
        n_rows, runs = self.layout.n_rows, len(msg.run_starts)
        have = self.versions_parts.get(tid, {})
        if have and int(next(iter(have.values())).parts) != count:
            raise MessageError(f'RowVersions part {k} of {count}, transfer {tid} '
                               f'came in {next(iter(have.values())).parts}')
        if count > n_rows or runs == 0:
            raise MessageError(f'RowVersions part {k} of {count} with {runs} runs: a part '
                               f'holds a run, the parts at most one per row ({n_rows})')
        held = self._parts_runs.get(tid, 0) + runs - (len(have[k].run_starts) if k in have
                                                      else 0)
        if held > n_rows:
            raise MessageError(f'RowVersions part {k} of {count}: {held} runs held for '
                               f'transfer {tid}, more than its {n_rows} rows')
        if len(have) + (k not in have) < count:
            self.versions_parts[tid] = have
            have[k] = msg
            self._parts_runs[tid] = held
            while len(self.versions_parts) > 2:
                old = min(self.versions_parts)
                del self.versions_parts[old]
                self._parts_runs.pop(old, None)
            return None
        parts = [msg if j == k else have[j] for j in range(count)]
        whole = dataclasses.replace(
            parts[0], part=0, parts=0, schema_version=SCHEMA_VERSION,
            run_starts=np.concatenate([p.run_starts for p in parts]),
            run_lengths=np.concatenate([p.run_lengths for p in parts]),
            versions=np.concatenate([p.versions for p in parts]))
        check_versions(whole, n_rows, self.n, self.max_clock)   # (raises first)
        self.versions_parts.pop(tid, None)
        self._parts_runs.pop(tid, None)
        return whole

    def _on_chunk(self, chunk: RowChunk, now: float) -> list:
        if chunk.kind != KIND_UPDATE or chunk.sender != SERVER or chunk.receiver != self.rank:
            raise MessageError('unexpected chunk for a worker')
        rx = self.snap_receiver if chunk.flags & FLAG_SNAPSHOT else self.receiver
        self._check_update_while_computing(chunk)
        if (chunk.flags & FLAG_END and chunk.transfer_id not in self.pending_versions
                and chunk.transfer_id > self.newest_pull_tid
                and rx.cached_answer(SERVER, chunk.incarnation, chunk.transfer_id) is None):
            # Its versions have not come yet (topics are not ordered with each other on DDS):
            # hold the END until they come; the server sends them before every END. Also when
            # no row came: the versions of a pull that delivers none still say who is
            # suspended, and a worker that closed it without them kept checking the rows of
            # robots the server no longer counted, and waited for ever (no repair follows a
            # pull the server saw through). Tell the server its END came (an ack of the END,
            # not final: past the data chunks, it moves nothing there): it writes a lost copy
            # again only to a robot it reaches (VersionsLink: since its last ack), and a
            # reader that lost two copies in a row, acking nothing, waited for ever.
            self._held_end = chunk
            return [Send(SERVER, TransferAck(
                transfer_id=chunk.transfer_id, sender=self.rank, receiver=SERVER,
                seq=int(chunk.seq), final=False, receive_time=now)),
                Log('end_without_versions', 1.0, self.rank)]
        acks, closed = rx.on_chunk(chunk, now)
        out = [Send(SERVER, a) for a in acks]
        if closed is not None:
            out += self._apply_pull(closed, now)
        return out

    def _check_update_while_computing(self, chunk: RowChunk) -> None:
        """
        Refuse an update from a clock this worker has not reached while it computes.

        While a worker computes, the server sends it late pulls (``FLAG_LATE``, at the clock
        of the pull they follow) and, when a suspension or readmission changed the staleness
        rules under a pull it had closed, repairs of that pull: never an update from a newer
        clock. One would move the clock the computation's gradient is pushed at (the
        catch-up of outage-aware RSP): it comes from a forged message or a broken server. A
        late pull from a newer clock is refused in any state (it is never a catch-up).
        A snapshot (a rejoin's lossless pull) is refused while the worker computes: it writes
        the model instead of adding to it, so it cannot wait in the late queue, and a rejoin
        sends it before the first computation (a node holds one back until the computation is
        over, ``receives_while_computing``); one that reaches a computing engine is forged or
        a broken server's. Otherwise snapshots keep their own rules (their clock is the fleet's).
        """
        if chunk.flags & FLAG_SNAPSHOT:
            if self.state == 'computing':
                raise MessageError('snapshot while computing (a rejoin sends it before)')
            return
        if chunk.clock <= self.clock:
            return
        if chunk.flags & FLAG_LATE or self.state == 'computing':
            raise MessageError(f'update of clock {chunk.clock} ahead of ours ({self.clock}) '
                               + ('in a late pull' if chunk.flags & FLAG_LATE
                                  else 'while computing'))

    def _apply_pull(self, inc, now: float) -> list:
        mask, rowbytes, scales, chunk_ranges = inc.close()
        n_rows = int(mask.sum())
        snapshot = bool(inc.flags & FLAG_SNAPSHOT)
        final = []
        if not inc.flags & FLAG_FINAL:
            self.holds_final = False     # a server restored from before the end: train on
            self.final_mixed = False
        late = bool(inc.flags & FLAG_LATE) and not snapshot
        versions = self.pending_versions.pop(inc.transfer_id, None)
        changed = False         # rows of a final snapshot changed the final model we hold
        if n_rows:
            self._final_id = None       # (w changes: the id of the final model we hold)
            if snapshot:
                vals = self.snap_codec.decode(self.snap_layout, rowbytes, scales, self._scratch)
                if self.holds_final and not self.final_mixed:
                    # Another final model: a server restored from its checkpoint at the final
                    # model sends the same one, bit for bit (then ours stays whole); one
                    # restored from an older checkpoint, another (vals is the scratch buffer)
                    if n_rows < self.snap_layout.n_rows:
                        self.snap_layout.where_rows(mask, vals, self.w, out=vals)
                    changed = not torch.equal(vals, self.w)
                    self.w.copy_(vals)
                elif n_rows < self.snap_layout.n_rows:
                    self.snap_layout.where_rows(mask, vals, self.w, out=self.w)
                else:
                    self.w.copy_(vals)
            else:
                rows, q = decode_delivered(self.codec, self.layout, rowbytes, scales, mask,
                                           self._scratch, per_row=inc.per_row_scales)
                if self.state == 'computing':
                    # a computation reads the model: these rows wait for its end (a late
                    # pull; or a repair, when a suspension changed the rules under a pull)
                    if self._late_q is None:
                        self._late_q = torch.zeros_like(self.w)
                    add_rows_(self.layout, self._late_q, rows, q)
                    self._late_q_pending = True
                else:
                    sub_rows_(self.layout, self.w, rows, q)
        if snapshot:
            self._snap_versions = versions or self._snap_versions
        else:
            if versions is not None:
                self._apply_versions(versions, mask, rules=not late)
            if not late:
                self._told_free = bool(inc.flags & FLAG_FREE)
            # outage-aware RSP: a worker catching up is moved to the fleet's clock.
            # Its rows age by the jump, so the next push carries every row that is now stale
            # (infinite urgency) and its versions come back within the bound; not while it
            # runs free (the server's FLAG_FREE): then its pushes stay ATP-sized, and it comes
            # back once it has kept the fleet's pace for S iterations.
            jump = int(inc.clock) - self.clock
            if jump > 0 and not late:       # (a late pull is never a catch-up)
                if not self._runs_free():
                    self.withheld += jump
                self.clock = int(inc.clock)
        self.pending_versions = {k: v for k, v in self.pending_versions.items()
                                 if k > inc.transfer_id}
        self.versions_parts = {k: v for k, v in self.versions_parts.items()
                               if k > inc.transfer_id}
        self._parts_runs = {k: v for k, v in self._parts_runs.items() if k > inc.transfer_id}
        self.newest_pull_tid = max(self.newest_pull_tid, int(inc.transfer_id))
        if snapshot:
            if self._snap_missing is None:
                self._snap_missing = torch.ones(self.snap_layout.n_rows, dtype=torch.bool)
            self._snap_missing &= ~mask
            # (a robot that held a final model holds part of another: not a whole model)
            self.final_mixed = self.final_mixed or changed
            if not bool(self._snap_missing.any()):
                # Every row arrived: adopt the rejoin's version table (all rows).
                self._snap_missing = None
                self.final_mixed = False
                if self._snap_versions is not None:
                    self._apply_versions(self._snap_versions,
                                         torch.ones(self.layout.n_rows, dtype=torch.bool))
                self._snap_versions = None
                self.clock = max(self.clock, int(inc.clock))
                if inc.flags & FLAG_FINAL and not self.holds_final:
                    # the fleet is done: compute no more, wait for the stop order
                    self.holds_final = True
                    final = [Log('final_model', float(self.snap_layout.n_rows), self.rank)]
                if inc.flags & FLAG_FINAL:
                    # saved: a worker restarted after the fleet's end is stopped at its JOIN,
                    # with no snapshot, and keeps the model of its last save. Again for a
                    # restored server's final model, which may differ (taken anew from a
                    # checkpoint older than the first): its model.pt is that one
                    self._dirty = True
        # (no SaveState otherwise: a restarted worker rejoins, and its first pull is a
        # snapshot that replaces the model and the version table; the clock comes with it)
        self.bytes_down += inc.bytes
        if late:        # rows ahead of the next pull: not a pull of its own
            return [Send(SERVER, self.receiver.final_ack(inc, chunk_ranges, now)),
                    Log('late_pull_applied', float(n_rows), self.rank,
                        {'deferred': self._late_q_pending})]
        self.pulled_clock = max(self.pulled_clock, inc.clock)
        self._pull_poke_at = now + POKE_END_TIMEOUTS * self.end_timeout_s
        out = [Send(SERVER, self.receiver.final_ack(inc, chunk_ranges, now)
                    if not snapshot else self.snap_receiver.final_ack(inc, chunk_ranges, now)),
               Log('pull_applied', float(n_rows), self.rank, {'snapshot': snapshot})]
        return out + final + self._maybe_compute(now)

    def _apply_versions(self, msg: RowVersions, mask: torch.Tensor, rules: bool = True) -> None:
        """
        Versions of the delivered rows into ``vloc`` (validated on arrival: cannot fail).

        ``rules``: also take the pull's rules, who is suspended and the slack; not from a late
        pull (``FLAG_LATE``, between pulls): the server checked our side of the last pull
        with that pull's rules, and a worker still waiting to compute (its follow-up push
        under way) that took a later readmission from a late pull checked the rows of a
        robot that pull had not counted, and waited for ever.
        """
        if rules:
            # the slack the server's check of this pull used comes with its versions: both
            # checks decide on the same numbers, whatever was lost or changed meanwhile
            self.slack = (torch.from_numpy(np.asarray(msg.staleness_slack, np.int32).copy())
                          if len(msg.staleness_slack)
                          else torch.zeros(self.n, dtype=torch.int32))
        starts = np.asarray(msg.run_starts, dtype=np.int64)
        lengths = np.asarray(msg.run_lengths, dtype=np.int64)
        if starts.size == 0:
            return
        rows = ids_from_ranges(np.stack([starts, starts + lengths], 1).reshape(-1),
                               self.layout.n_rows)
        runs = np.asarray(msg.versions, np.int32).reshape(-1, self.n)
        # -1: the worker is suspended from the staleness rules (not a version)
        if rules:
            self.active = torch.from_numpy(runs[0] >= 0)
        vv = torch.from_numpy(np.repeat(runs, lengths, axis=0))
        rows_t = torch.from_numpy(rows)
        keep = mask[rows_t]
        old = self.vloc[rows_t[keep]]
        new = vv[keep]
        self.vloc[rows_t[keep]] = torch.where(new >= 0, new, old)

    def rsp_ok(self) -> bool:
        """Worker-side RSP (DESIGN 4): ``clock - vloc[i][s] <= S`` for active workers s."""
        if self.policy.scheduler == 'flown':
            return True                 # FLOWN never waits (server-arbitrated slots)
        if self._runs_free():
            return True                 # suspended for its link: nobody waits, nor does it
        bounds = self._bounds() if bool(self.slack.any()) else self.policy.staleness
        return columns_satisfy(self.vloc.amin(dim=0), self.clock, bounds, self.active)

    def _runs_free(self) -> bool:
        """
        Whether we are suspended and not held to the bound (the server's ``FLAG_FREE``).

        The server decides (``SyncPolicy.async_when_out``, ``free_stragglers``) and says so
        on every chunk of a pull to a worker it does not hold: it then serves the MTA prefix
        and repairs nothing, so our check would wait for ever. We follow the flag of the
        pull applied last, while our column is marked suspended (-1): the settings of the
        worker and the server cannot disagree, whatever the nodes were started with.
        """
        return self._told_free and not bool(self.active[self.rank])

    def _bounds(self) -> torch.Tensor:
        """Per-column staleness bounds of our check: S + max(slack[s], our slack)."""
        return self.policy.staleness + torch.clamp(self.slack, min=int(self.slack[self.rank]))

    def _maybe_compute(self, now: float) -> list:
        if self.holds_final:
            return []          # the fleet finished: we hold its model and wait to be stopped
        if (self.state == 'pulling' and self.push is None and self.pulled_clock >= self.clock
                and self._snap_missing is None):
            if not self.rsp_ok():
                if not self._rsp_waiting:
                    self._rsp_waiting = True
                    self.rsp_waits += 1
                    bad = self.vloc < (self.clock - self._bounds()).unsqueeze(0)
                    bad[:, ~self.active] = False
                    return [Log('rsp_wait', float(int(bad.any(1).sum())), self.rank, {
                        'clock': self.clock,
                        'waiting_for_workers': torch.nonzero(bad.any(0)).reshape(-1).tolist(),
                        'hint': 'mandatory downlink rows were lost; the server repeats them'})]
                return []
            self._rsp_waiting = False
            if self._ahead == 'ready':
                self._ahead = None
                return self._take_gradient(self._ahead_grad, now)
            if self._ahead == 'running':
                self._ahead = None              # it is now the computation we wait for
                self.state = 'computing'
                return []
            if self._ahead == 'discard':
                # One computation in flight at a time (a driver holds one): the next starts
                # when the discarded one reports back (``_on_ahead_done``).
                return []
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
