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
Push systems in a fleet: AdaComp, ASGD, Comp-ASGD and GSP engines behind the node drivers.

The reference systems whose engines share the push shell of
:mod:`rog_ros.protocol.policies.async_ps` speak the fleet's wire messages (``RowChunk``
KIND_GRAD pushes, ``RowChunk`` KIND_UPDATE dense models, ``Schedule`` with ``stop``), so
``rog fleet --sync adacomp`` runs them as real processes: this module builds their engines
from the node parameters, exactly as the simulator's runners build them, and wraps each one
in an adapter that offers what ServerNode and WorkerNode read of Rog's engines (per-worker
clocks, byte counts, ``finished``, a consensus model). The adapters hold no protocol logic:
they forward every call and count what passes. Between engine and bus, each adapter's
:class:`rog_ros.protocol.push_transfers.PushTransfers` sends the engine's dense messages
(models, ASGD's and GSP's gradients) and AdaComp's and Comp-ASGD's sparse pushes as Rog's
windowed chunk transfers stamped with the node's run, and hands the engine the whole message
its peer sent; the counts are of the engines' messages. The transfers wait
``connect.transfer_lease_s()`` at their 4 MiB bound (the DDS lease of ``CYCLONEDDS_URI``,
10 s at least); a robot's restart reaches the server's engine as a push of a new run, which
takes it back (``ServerAdapter.worker_restarts``).

Refused up front (one line, exit 2): the systems whose messages are not on the wire
(``gsp+gds``: UploadDensity; ``adasgd``: FLEET's task dataclasses), the peer system ``aet``,
and Rog-only features with a push system (``absence_timeout``, ``min_workers`` > 1).
``state_dir`` keeps the server's state (``ServerAdapter.state_dict``: a checkpoint every
``checkpoint_every`` pushes answered, and between checkpoints a write-ahead journal of the
engine's inputs, ``push_journal``: restored and replayed on start, so no push answered is
lost whatever ``checkpoint_every``); its robots keep none (a restarted
robot comes back as a new run, as without it). ``staleness``, ``deadline_floor`` and
``outage_aware`` do not apply to push systems; ``window`` and ``chunk_bytes`` shape their
dense messages' transfers when set to other than their defaults (else 64 chunks of 65000
bytes: ``PUSH_WINDOW``, ``PUSH_CHUNK_BYTES``).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING

from rog_ros.checks import ConfigError
from rog_ros.nodes import clocks as node_clocks, settings
from rog_ros.nodes.sync_names import PUSH_SYSTEMS, SIM_ONLY, sim_only_reason, SYNC_CHOICES
from rog_ros.protocol.actions import Log, Send
from rog_ros.protocol.messages import FLAG_END, KIND_GRAD, RowChunk, Schedule, SERVER
from rog_ros.protocol.revival import POKE_END_TIMEOUTS, RevivalWatch, REVIVE_AFTER_POKES

if TYPE_CHECKING:       # pragma: no cover - annotations only (``check`` runs without torch)
    from rog_ros.core.rows import RowLayout
    from rog_ros.protocol.push_transfers import PushTransfers
    import torch


DONE_PATIENCE_S = 60.0
"""
Longest a push server waits for a robot whose budget is done and whose stop order it never sent.

Such a robot is one the engine would answer with its stop order (``engine.stopped``), but
that has not spoken since (a message, or a status of its live run: ``robot_alive``): a
server restored from a checkpoint older than the stop order the dead server sent it (it took
it and left), or a robot that died before the budget was reached. Silent this long (since
its last word, or since first waited for unheard), it is given up
(``ServerAdapter.stops_missed``), as Rog's server gives up a robot owed its final model
(``ps_final.FINAL_PATIENCE_S``, ``final_model_missed``) or one out and silent once the fleet
finished (``worker_let_go``): the server waited for it for ever.
"""

STATUS_PATIENCE_S = 600.0
"""
Longest a push server waits, past its last message, for a robot of ``DONE_PATIENCE_S``.

Why: a robot's status (every 0.5 s) counts as its word while it computes past the budget
(``ServerAdapter.robot_alive``: a slow Jetson, a big model), but the node publishes it from
its spin loop while the computation runs on its own thread: a computation that never ends
(a hung GPU, a deadlocked data loader) said the robot was alive for ever, the robot never
gave up (it gives up only while it waits), and the server, which gave such a robot up after
``DONE_PATIENCE_S`` before, waited for it for good. Statuses alone hold it this long from
its last message (ten minutes: a computation of one iteration longer than that is taken
for hung), then it is given up as one silent.

Why ten minutes (a judgement, weighed against measurements): one iteration takes 2.18 s on a
Jetson Xavier NX (the workloads' device profile) and 5 s for the 37.9 MB model on the 2-core
test machine (docs/reference-systems.md): over 100 times the slowest measured, room for a
slower device or a bigger model. Given up too early, a slow robot's push finds the server
gone and it exits failed after ``server_timeout`` (120 s); waiting longer only delays the
results of a run whose robot hung. It also bounds how long such statuses keep a replaced
server run replaced (``PushTransfers.served_by_replacing``).
"""

STOP_PATIENCE_S = 60.0
"""
Longest a finished push server waits at its end for robots owed their stop (ServerNode).

A robot is owed it while it has not shown that it stopped (its status) and has spoken
within ``ServerAdapter.linger_s`` (``RETIRE_LEASES`` x max(lease, poke interval), 20 s by
default) of its stop order or its last message: a robot whose stop order was lost pokes,
and each poke is answered with the stop again. Past this bound the server leaves whoever
still speaks (a link that carries the robot's messages and never the server's).

Stated against the robot's hold of another run's stop (``WorkerAdapter._stop_held``, two poke
intervals: 16 s): a robot that follows another run (this one restored after the run it
followed died) sets this run's stop aside and pokes every poke interval (8 s) while it holds
it, so it stays owed, and obeys 16-18 s after the later of the first stop it heard and its
followed run's last word, 24 s at most (the next poke's answer): the server waits that long,
not this bound (measured: robot 0 of the restored push fleets of ``test_server_restart_end``
left 24.0 s after the restart and the server ended within 0.1 s, before and after 2026-12-08's
change to the hold). A robot that follows a live other run (this one a zombie) never obeys:
such a server waits this bound unless it learns it was replaced first
(``PushTransfers.replaced_by``).
"""

STOPPING_KEPT = 16
"""
Server runs a push robot remembers as having ordered it to stop (``WorkerAdapter._stopping``).

Why a bound: stop orders are not refused by run (``Schedule``), so any number of runs could
name one; a robot hears two or three server runs in practice (a restart, a zombie). A run
silent for two poke intervals (``REVIVE_AFTER_POKES`` x ``POKE_END_TIMEOUTS`` END timeouts,
16 s: no stop order and no answer to us) is forgotten (``WorkerAdapter._note_stop``): a server
that means its stop repeats it every END timeout while we are owed it (2 s), and a zombie that
learnt it was replaced, or died, orders nothing more. Kept for ever until 2026-12-08, an
earlier run's stop made ``_stop_held`` obey any other run's for the rest of the robot run.
"""


def is_push(sync) -> bool:
    """Tell whether ``sync`` names a push system."""
    return str(sync).strip().lower() in PUSH_SYSTEMS


def check(params: dict) -> None:
    """
    Refuse what a fleet cannot run, before anything starts (ConfigError, one line).

    ``params``: the server's resolved parameters (``sync``, ``state_dir``, ...).
    """
    sync = str(params.get('sync', 'rog')).strip().lower()
    if sync in SIM_ONLY:
        raise ConfigError(f'sync (--sync) {sync}: {sim_only_reason(sync)}')
    if sync not in PUSH_SYSTEMS:
        return
    if params.get('absence_timeout'):
        raise ConfigError(f'absence_timeout (--absence-timeout): {sync} has no membership or '
                          'staleness rules to suspend a worker from')
    if int(params.get('min_workers') or 1) > 1:
        raise ConfigError(f'min_workers (--min-workers): {sync} has no quorum (its server '
                          'answers every push)')


class NoPolicy:
    """What a node reads of a policy, for push systems: no staleness threshold."""

    name = 'push'
    staleness = None


def layout(shapes) -> RowLayout:
    """Return the flat whole-model layout of the push engines (model order, as ``rog sim``)."""
    from rog_ros.core.rows import RowLayout
    return RowLayout([tuple(s) for s in shapes], whole_model=True)


def _adacomp_config(args, workload):
    """Return the AdaComp configuration ``rog sim`` builds; ``--lr`` replaces the workload's."""
    from rog_ros.protocol.policies.adacomp import config_for
    return config_for(args.sync, {}, float(args.lr or workload.lr), workload.momentum)


def server_engine(args, tr, lease_s: float | None = None, fragment_bytes: int | None = None):
    """
    Return the server engine of push system ``args.sync``, wrapped (:class:`ServerAdapter`).

    ``lease_s``: the transfer lease the node gives its engines (``connect.transfer_lease_s``:
    the DDS ``LeaseDuration`` of ``CYCLONEDDS_URI``, 10 s at least), after which a transfer
    at its bound sends its END, as Rog's engines take it; None: 10 s. ``fragment_bytes``:
    the DDS fragment size each peer's writer counts with (``connect.transfer_fragment_bytes``);
    None: 1 KiB.
    """
    sync = args.sync.strip().lower()
    n, wl = int(args.workers), tr.workload
    if sync == 'gsp':
        from rog_ros.protocol.policies.gsp import GspConfig, GspServer
        pool = sum(len(p) for p in wl.partition(n))
        engine = GspServer(tr.w0, n, GspConfig(), lr=tr.lr, momentum=wl.momentum,
                           max_pushes=args.iterations * n, batch_size=wl.batch_size,
                           epoch_samples=pool)
        return _journaled(args, ServerAdapter(engine, n, tr.lr,
                                              _transfers(args, SERVER, engine.model(), lease_s,
                                                         fragment_bytes=fragment_bytes)))
    from rog_ros.protocol.policies.adacomp import AdaCompServer, push_entries
    cfg = _adacomp_config(args, wl)
    engine = AdaCompServer(tr.w0, n, cfg, max_updates=args.iterations * n)
    sizes = [int(p.numel()) for p in tr.model.parameters()]
    return _journaled(args, ServerAdapter(engine, n, cfg.alpha,
                                          _transfers(args, SERVER, engine.model(), lease_s,
                                                     push_entries(cfg, sizes), fragment_bytes)))


def _journaled(args, adapter: ServerAdapter) -> ServerAdapter:
    """
    Give ``adapter`` its write-ahead journal in ``args.state_dir`` (none without one).

    Why: with the journal every push answered is on disk before its answer leaves, at the
    push's own bytes, whatever ``--checkpoint-every`` (``push_journal``).
    """
    folder = getattr(args, 'state_dir', None)
    if folder:
        adapter.journal_in(folder)
    return adapter


def _transfers(args, me: int, w, lease_s: float | None = None,
               sparse_entries: int | None = None,
               fragment_bytes: int | None = None) -> PushTransfers:
    """
    Return the chunked transfers of node ``me``: the push defaults, or what the user set.

    ``window`` and ``chunk_bytes`` at the settings' defaults (Rog's: 4 chunks of 16 KiB) give
    the push systems' own (``PUSH_WINDOW`` chunks of ``PUSH_CHUNK_BYTES``): with Rog's, a
    37.9 MB model's iteration took three times as long as one message did. ``lease_s`` (None:
    ``BOUND_END_S``) is the transfer lease, the wait at the 4 MiB bound before END;
    ``sparse_entries`` the entries of the fleet's sparse pushes (None: it pushes dense);
    ``fragment_bytes`` the DDS fragment size the writers count with (None: 1 KiB). Chunks
    and acks of ranks past ``args.workers`` are refused before a buffer opens for them (a
    robot's: any but the server's).
    """
    default = settings.defaults()
    given = {} if lease_s is None else {'lease_s': lease_s}
    if fragment_bytes is not None:
        given['fragment_bytes'] = fragment_bytes
    return _default_transfers(
        me, w, window=None if args.window == default['window'] else args.window,
        chunk_bytes=None if args.chunk_bytes == default['chunk_bytes'] else args.chunk_bytes,
        sparse_entries=sparse_entries, n_workers=int(args.workers), **given)


def worker_engine(args, tr, rank: int, lease_s: float | None = None,
                  fragment_bytes: int | None = None):
    """
    Return worker ``rank``'s engine of push system ``args.sync`` (:class:`WorkerAdapter`).

    ``lease_s`` and ``fragment_bytes``: as :func:`server_engine` takes them (None: 10 s and
    1 KiB).
    """
    sync = args.sync.strip().lower()
    sizes = [int(p.numel()) for p in tr.model.parameters()]
    if sync == 'gsp':
        from rog_ros.protocol.policies.gsp import GspConfig, GspNode
        engine = GspNode(rank, tr.w0, sizes, GspConfig(), seed=args.seed)
        return WorkerAdapter(engine, _transfers(args, rank, engine.w, lease_s,
                                                fragment_bytes=fragment_bytes))
    from rog_ros.protocol.policies.adacomp import AdaCompWorker, push_entries
    cfg = _adacomp_config(args, tr.workload)
    engine = AdaCompWorker(rank, tr.w0, sizes, cfg, seed=args.seed)
    return WorkerAdapter(engine, _transfers(args, rank, engine.w, lease_s,
                                            push_entries(cfg, sizes), fragment_bytes))


def _wire(msg) -> int:
    size = getattr(msg, 'wire_size', None)
    return int(size()) if size is not None else 0


class ServerAdapter:
    """
    A push server engine as ServerNode drives it: counts pushes, bytes and stop orders.

    ``clock[r]`` is the number of worker r's pushes the engine applied (its update count
    grew); ``finished`` once every worker was told to stop. ``transfers`` (None: built for
    the engine's model, default window and chunks, no sparse pushes, ranks below
    ``n_workers`` only) carries the dense messages chunked, and the sparse pushes of the size
    it was given. ``worker_restarts`` counts the pushes the engine dropped from a run of a
    robot new to it at a timestamp it did not hold (a robot restarted, or this server did;
    ``worker_restart`` logs).
    ``pushes_refused`` counts the pushes handed to the engine that it refused (a timestamp
    gone, a run past): the engine's ``rejects`` count any message, and ``rog chaos`` tells a
    push taken from one refused (``chaos_push.push_verdict``).

    A stop order is one message, sent once by the engine: lost (an outage), its robot
    waited for a pull, poking a server that had left, and gave up at ``server_timeout``
    (120 s). Each robot's stop is kept (``_stops``)
    and sent again, stamped anew, as the answer to each END (a push's, a poke) of the
    robot's live run after it, and every ``end_timeout_s`` while the robot is owed it
    (``stops_owed``): until it shows that it stopped (``robot_left``, its status) or has
    been silent for ``linger_s``. Counted in ``stops_repeated``; O(1) a message, O(robots)
    a tick.
    """

    policy = NoPolicy()

    def __init__(self, engine, n_workers: int, lr: float, transfers: PushTransfers = None):
        self.engine = engine
        self.transfers = transfers if transfers is not None else _default_transfers(
            SERVER, engine.model(), n_workers=int(n_workers))
        self.n = int(n_workers)
        self.lr = float(lr)
        self.clock = [0] * self.n
        self.stop_sent = [False] * self.n
        self.bytes_up = 0
        self.bytes_down = 0
        self.pushes_received = 0
        self.pushes_refused = 0        # of those, the engine refused (a clock gone, a run past)
        self.inputs_refused = 0        # messages the engine refused (K counts them too)
        self.replayed_logs = []        # (now, Log) of the journal's inputs replayed
        self.replayed_evaluations = []  # rows the journal kept (``journal_evaluation``)
        # evaluations handed to the node's evaluator, their rows not journaled yet: (info,
        # the model), the model the snapshot the evaluator has (``journal_submitted``)
        self.owed_evaluations = []
        # the iteration of the last evaluation submitted, failed or not (None: none known):
        # a restored node's next point follows it (``ServerNode._evaluate_owed``)
        self.last_submitted = None
        self.stall_time = [0.0] * self.n
        self.triggers = [0] * self.n
        self.outage_suspensions = 0
        self.weighted_pushes = 0
        self.rescaled_pushes = 0
        self.late_pushes = 0
        self.late_rows = 0
        self.late_pulls = 0
        self.late_pull_rows = 0
        self.worker_restarts = 0
        self.stops_repeated = 0                 # stop orders sent again (``_stop_again``)
        self.runs_taken_back = 0                # runs the engine took back (``_take``)
        self._stops = [None] * self.n           # each robot's stop order, as first sent
        self._stop_due = [None] * self.n        # when it goes again while owed (None: not)
        self._spoke = [0.0] * self.n            # its live run's last word, or its stop sent
        self._left = [False] * self.n           # it showed that it stopped (its status)
        self.confirmed_pushes = 0      # pushes answered as of the last checkpoint on disk
        self.results_written = False   # the node wrote the run's results (``run_done``)
        self.journal = None            # the write-ahead journal (``attach_journal``)
        self.journal_epoch = 0         # the checkpoint the journal's records follow
        self.replayed = 0              # journal records replayed at the restore
        self.journal_records_dropped = 0   # torn at restores (``PushJournal.read``)
        # the journal was replayed with no checkpoint beside it: a resume (``ServerHooks``)
        self.replayed_without_checkpoint = False
        self.defer_journal = False     # hold records for the hooks (``_journal``)
        self._unwritten = []           # records held: (op, now, pieces)
        self.gone = [False] * self.n   # given up: budget done, silent (``_give_up_silent``)
        self._heard = [None] * self.n  # each robot's last word taken (driver clock, live)
        self._first_looked = {}        # robot -> first tick it waited unheard (``_silent_since``)
        self._status_at = [None] * self.n   # its live run's last status (``robot_alive``)
        self._others = set()           # robots of another rog_ros build (``let_go_robot``)
        self._last_logs = []           # (now, Log) of the last call's answer (``_unrecorded``)

    @property
    def rejects(self) -> int:
        return self.engine.rejects + self.transfers.rejects

    @property
    def finished(self) -> bool:
        """
        Return whether every robot was told to stop, or given up (``_give_up_silent``).

        Why the second: a robot whose budget is done and that never speaks again (it took
        the stop order of a server whose checkpoint was older, and left) held the server for
        ever, and a restored server gave up at ``startup_timeout`` with no results.
        """
        return all(s or g or r in self._others
                   for r, (s, g) in enumerate(zip(self.stop_sent, self.gone)))

    def let_go_robot(self, rank: int, go: bool = True) -> None:
        """
        Stop waiting at the end for robot ``rank`` (``go``), or wait for it again (not ``go``).

        Why: a robot of another rog_ros build is never matched on its downlink, so its stop
        order never reaches it (nor is its budget ever done), and ``finished`` waited for it
        for ever while the others had ended. The server node lets it go once it gives it up
        (``IncompatibleWatch``) and takes it back when it is matched again (upgraded). Not
        checkpointed: a restored server's watch gives it up again.
        """
        (self._others.add if go else self._others.discard)(int(rank))

    @property
    def stops_missed(self) -> int:
        """Return the robots given up with their stop order not sent (``DONE_PATIENCE_S``)."""
        return sum(g and not s for s, g in zip(self.stop_sent, self.gone))

    def _budget_done(self) -> list:
        """
        Return, per robot, whether its budget is done: the engine answers it with its stop.

        AdaComp's engines say so per robot (``stopped``, every robot's at the budget). GSP's
        marks a robot stopped only as its order leaves, and answers every robot with the stop
        once ``finished`` (the budget done): read alone, a GSP server restored from before a
        robot's order waited for it at activate (PeerTimeout after ``startup_timeout``) and,
        started, for ever.
        """
        done = getattr(self.engine, 'stopped', None) or [False] * self.n
        over = bool(getattr(self.engine, 'finished', False))
        return [over or bool(d) for d in done]

    def _waiting_done(self) -> list:
        """Return the robots whose budget is done, their stop order neither sent nor given up."""
        done = self._budget_done()
        return [r for r in range(self.n)
                if done[r] and not self.stop_sent[r] and not self.gone[r]]

    def _give_up_silent(self, now: float) -> list:
        """
        Give up each robot of ``_waiting_done`` silent for ``DONE_PATIENCE_S``; its logs.

        Silent since its last word taken (``_heard``: a chunk, an ack or a whole message,
        none refused nor of a run replaced; ``on_message``), or, never heard by this process
        (a restored server; the replayed journal's times are another process's clock), since
        the first tick it waited (``_first_looked``), as ``ps_final._gone_for_good`` counts:
        from this process's first tick, a robot slow to its first word was given up the
        moment the others reached the budget. A robot that speaks first is answered by the
        engine with its stop order, as before. O(robots) a tick, while any waits.
        """
        out = []
        for r in self._waiting_done():
            since = self._silent_since(r)
            if since is None:
                self._first_looked[r] = now
            elif now >= since + DONE_PATIENCE_S:
                self.gone[r] = True
                out.append(Log('stop_missed', float(DONE_PATIENCE_S), r))
        return out

    def _silent_since(self, r: int):
        """
        Return when robot ``r`` was last heard, or first waited unheard (None: neither).

        Heard: a message, or its live run's status (``robot_alive``) within
        ``STATUS_PATIENCE_S`` of that message (or of the first wait): statuses alone hold a
        robot whose computation hung that long, not for ever.
        """
        heard = self._heard[r]
        since = heard if heard is not None else self._first_looked.get(r)
        alive = self._status_at[r]
        if since is None or alive is None:
            return since
        return max(since, min(alive, since + STATUS_PATIENCE_S - DONE_PATIENCE_S))

    def _give_up_due(self):
        """Return when the next robot of ``_waiting_done`` is given up (None: none waits)."""
        times = [self._silent_since(r) for r in self._waiting_done()]
        if not times:
            return None
        if any(t is None for t in times):
            return 0.0                          # (the next tick starts its silence)
        return min(times) + DONE_PATIENCE_S

    def consensus_model(self) -> torch.Tensor:
        """Return a copy of the server's model (what the next pull hands out)."""
        return self.engine.model().clone()

    def next_wakeup(self):
        return _earliest(self.engine.next_wakeup(), self.transfers.next_wakeup(),
                         self._give_up_due(), *self._stop_due)

    def on_tick(self, now: float) -> list:
        out = self.transfers.outgoing(
            self._no_stop_if_replaced(self._count(self.engine.on_tick(now), now)), now)
        return self._unrecorded((out + self.transfers.on_tick(now) + self._stops_due(now)
                                 + self._give_up_silent(now)), now)

    def _unrecorded(self, actions: list, now: float) -> list:
        """
        Keep the logs of ``actions`` until the next call (``state_dict``); return ``actions``.

        Why: the durable hooks checkpoint after the call, before the node records its
        answer's logs, so the checkpoint's run record lacks them: a server restored from it
        had no ``push_done``, ``stop_missed``, ... of the message it was taken for in
        ``events.csv``. The checkpoint keeps them (``unrecorded_logs``) and the restore hands
        them to the node with the journal's (``replayed_logs``), so each is there once.
        """
        self._last_logs = [(float(now), a) for a in actions if isinstance(a, Log)]
        return actions

    @property
    def linger_s(self) -> float:
        """
        Return how long a robot silent since its stop order (or its last word) is owed it.

        Why: a robot whose stop was lost speaks at least once in that (its poke every poke
        interval, its END a lease after its last ack), as a replaced run that lives does
        (``RETIRE_LEASES``): two leases, or two poke intervals if longer (20 s by default).
        """
        from rog_ros.protocol.push_transfers import RETIRE_LEASES     # (torch: not for check)
        t = self.transfers
        return RETIRE_LEASES * max(t.lease_s, POKE_END_TIMEOUTS * t.end_timeout_s)

    @property
    def _replaced(self) -> bool:
        """Tell whether another server run serves our robots (``PushTransfers.replaced_by``)."""
        return bool(getattr(self.transfers, 'replaced_by', 0))

    def _no_stop_if_replaced(self, actions: list) -> list:
        """
        Return ``actions`` without their stop orders once another server run serves our robots.

        Why: a replaced run alive after all (a zombie, finished) answered each push with its
        engine's stop order: a robot's run new since (a restart) knows no server run to set
        it aside for, and stopped while the live run trained on. O(actions).
        """
        if not self._replaced:
            return actions
        return [a for a in actions if not (isinstance(a, Send) and isinstance(a.msg, Schedule)
                                           and a.msg.stop)]

    def stops_owed(self, now: float) -> list:
        """
        Return the robots still owed their stop order at ``now``, in rank order.

        Why: the engines send each robot one stop order, and the server node left 5 s after
        the last (``LEAVE_TIMEOUT_S``): a robot whose stop was lost waited ``server_timeout``
        for a server gone. A robot is owed it from its stop order on until it shows that it
        stopped (``robot_left``), or while its live run spoke within ``linger_s`` (a robot
        that lost it pokes every poke interval; one silent that long has left, or its link
        is down: a dead robot cannot hold the server). None once another server run serves
        the robots (``PushTransfers.replaced_by``: a zombie's stops are set aside; it leaves).
        """
        if not any(self.stop_sent) or self._replaced:
            return []          # replaced: the robots follow another server run (a zombie)
        linger = self.linger_s
        return [r for r in range(self.n) if self.stop_sent[r] and not self._left[r]
                and now < self._spoke[r] + linger]

    def robot_alive(self, rank: int, incarnation: int, now: float) -> None:
        """
        Note that robot ``rank``'s run ``incarnation`` said it is alive (its status) at ``now``.

        Why: a robot whose budget is done and whose stop order was not sent is given up
        silent ``DONE_PATIENCE_S`` (``_give_up_silent``), counted by its messages to us: one
        computing longer (a slow Jetson, a big model) sends none until its push, yet its
        status comes every 0.5 s, and it was given up while it computed, the server gone
        when its push came. A status counts as its word when it is of the robot's live run
        (the transfers' latest; any while none is known, as a restored server); the node
        passes none that says the robot stopped. Up to ``STATUS_PATIENCE_S`` past its last
        message (``_silent_since``): a hung computation's statuses come for ever. A replaced
        run takes it as word of the run that replaced it too, when the robot's last word was
        an ack to that run (``PushTransfers.served_by_replacing``: a GSP robot it holds). O(1).
        """
        if not 0 <= rank < self.n:
            return
        runs = self.transfers.peer_runs.get(rank)
        if runs and int(incarnation) != runs[-1]:
            return
        self._status_at[rank] = now
        served = getattr(self.transfers, 'served_by_replacing', None)
        if served is not None:    # (a robot computing on the model of the run replacing us)
            served(rank, now, STATUS_PATIENCE_S)

    def robot_left(self, rank: int) -> None:
        """
        Note that robot ``rank`` showed that it stopped (its status): owed nothing more.

        Why: the node leaves once no robot is owed its stop (``stops_owed``); a robot that
        says it stopped needs no more. A message of its live run after this owes it again.
        """
        if 0 <= rank < self.n and self.stop_sent[rank]:
            self._left[rank] = True

    def _stops_due(self, now: float) -> list:
        """
        Send the stop order again to each robot owed it whose repeat is due; the sends.

        Why: a stop order lost with no poke of its robot heard since (a robot's poke comes
        every poke interval, 8 s) would leave it waiting; repeated every ``end_timeout_s``
        (2 s), as an END is, while the robot is owed it. O(robots) a tick.
        """
        if not any(d is not None for d in self._stop_due):
            return []
        out = []
        owed = set(self.stops_owed(now))
        for r, due in enumerate(self._stop_due):
            if due is None or now < due:
                continue
            if r in owed:
                out.append(self._stop_again(r, now))
                self._stop_due[r] = now + self.transfers.end_timeout_s
            else:
                self._stop_due[r] = None
        return out

    def _stop_again(self, r: int, now: float) -> Send:
        """
        Return robot ``r``'s stop order once more, stamped anew (its latest run); counted.

        A copy of the order as the engine built it: the bus may stamp each message it sends.
        The count is checkpointed, so journaled too (a restore replays it exactly).
        """
        self.stops_repeated += 1
        if self.journal is not None:
            from rog_ros.nodes.push_journal import OP_STOP_AGAIN, value_pieces
            self._journal(OP_STOP_AGAIN, now, value_pieces(int(r)))
        msg = dataclasses.replace(self._stops[r])
        self._stamp(r, msg)
        return Send(r, msg)

    def _applied(self) -> int:
        e = self.engine
        return int(e.i) if hasattr(e, 'i') else int(e.total_pushes)

    @property
    def revivals(self) -> int:
        """Return the robots' runs taken back after a dead run's late push replaced them."""
        return self.transfers.revived

    @property
    def duplicate_ranks(self) -> set:
        """Return the robots two live processes were seen to share (``duplicate_rank``)."""
        return {r for r in self.transfers.duplicate_ranks if 0 <= r < self.n}

    def on_message(self, msg, now: float) -> list:
        """
        Take one message from the bus: the transfers', then the engine's answer to it.

        A robot's END (a push's, a poke) after its stop order was sent is answered with the
        stop again, unless a stop went to it within an END timeout (``_after_stop``).
        """
        refused, superseded = self.rejects, getattr(self.transfers, 'superseded', 0)
        out = self._take(msg, now)
        r = getattr(msg, 'sender', -1)
        if (isinstance(r, int) and 0 <= r < self.n and self.rejects == refused
                and getattr(self.transfers, 'superseded', 0) == superseded):
            # Why any word (``_give_up_silent``): a robot whose push or pull crosses a slow
            # link speaks in chunks and acks for minutes before a whole message reaches the
            # engine; counted by whole messages only, it was given up mid-transfer and the
            # server left before its push came.
            self._heard[r] = now
        return self._unrecorded(out + self._after_stop(msg, now, refused), now)

    def _after_stop(self, msg, now: float, refused: int) -> list:
        """
        Answer a stopped robot's END with its stop order again; note that its live run spoke.

        Why: a robot whose stop order was lost waits for a pull and pokes (its push's END,
        answered from the transfers' record: the engine never saw it), so nothing told it
        to stop; a server run that finished left, and the robot gave up after
        ``server_timeout``. Only a message of the robot's live run (the transfers' latest
        heard) taken without a reject; any such message keeps it owed (``stops_owed``) and
        its repeat due. At most one answer an END timeout (the END copies of the push the
        engine answered with the stop draw none). Nothing is applied: the engine sees the
        message as before. O(1).
        """
        r = getattr(msg, 'sender', -1)
        if (not 0 <= r < self.n or not self.stop_sent[r] or self.rejects != refused
                or self._replaced):
            return []
        runs = self.transfers.peer_runs.get(r)
        if getattr(msg, 'incarnation', 0) != (runs[-1] if runs else 0):
            return []
        self._spoke[r] = now
        self._left[r] = False
        due, again = self._stop_due[r], now + self.transfers.end_timeout_s
        if not (isinstance(msg, RowChunk) and msg.flags & FLAG_END):
            if due is None:
                self._stop_due[r] = again
            return []
        if due is not None and now < due:
            return []         # a stop went within an END timeout (the engine's, a repeat)
        self._stop_due[r] = again
        return [self._stop_again(r, now)]

    def _take(self, msg, now: float) -> list:
        """Return the transfers' answer to ``msg`` and, for a message they yield, the engine's."""
        msg, acks = self.transfers.on_message(msg, now)
        for rev in self.transfers.take_revived():   # taken back by the transfers: the engine too
            self._revive(rev.worker, rev.run, now)
        if msg is None:
            return acks
        return acks + self.transfers.outgoing(
            self._no_stop_if_replaced(self._engine_input(msg, now)), now)

    def _revive(self, w: int, run: int, now: float, journal: bool = True) -> None:
        """
        Have the engine take back run ``run`` of robot ``w``; journal it if it did.

        Why journaled: a run taken back and lost with a crash is restored as retired, and
        its pushes were refused for good (``durable_progress``).
        """
        if 0 <= w < self.n and self.engine.revive(w, run):
            self.runs_taken_back += 1   # (checkpointed: ``durable_progress``)
            if journal and self.journal is not None:
                from rog_ros.nodes.push_journal import OP_REVIVE, value_pieces
                self._journal(OP_REVIVE, now, value_pieces([int(w), int(run)]))

    def _engine_input(self, msg, now: float, journal: bool = True) -> list:
        """
        Hand the engine one message the transfers yielded; return its counted actions.

        The one path of a message to the engine, live and replayed from the journal
        (``journal=False``): the journal's record is appended (and fsynced) before the
        answer is returned, or held for the hooks, who write it or a checkpoint holding it
        before the answer leaves (``_journal``), so a push answered is on disk whatever
        ``--checkpoint-every``.
        """
        before = self._applied()
        push = isinstance(msg, RowChunk) and msg.kind == KIND_GRAD
        refused = self.engine.rejects
        if push:
            self.bytes_up += _wire(msg)
            self.pushes_received += 1
        actions = self.engine.on_message(msg, now)
        if self.engine.rejects > refused:
            self.inputs_refused += 1
            if push:
                self.pushes_refused += 1
        sender = getattr(msg, 'sender', -1)
        if 0 <= sender < self.n:
            self.clock[sender] += self._applied() - before
        actions = self._count(actions, now)
        if journal and self.journal is not None:
            from rog_ros.nodes.push_journal import encode_message, OP_MESSAGE
            self._journal(OP_MESSAGE, now, encode_message(msg))
        return actions

    def _journal(self, op: int, now: float, pieces: list) -> None:
        """
        Journal one engine input: at once, or held until ``write_journal`` (``defer_journal``).

        Why held: the durable hooks (``ServerHooks``) decide after the input whether to write
        a checkpoint before its answer leaves; if they do, the checkpoint holds the input
        and its record would be a second write of the same push (with ``--checkpoint-every
        1``, every push was written twice: its record, then the whole state). The hooks call
        ``write_journal`` before the answer leaves when they did not checkpoint;
        ``checkpoint_confirmed`` drops what the checkpoint holds.
        """
        if self.defer_journal:
            self._unwritten.append((op, now, pieces))
        else:
            self.journal.append(op, now, pieces)

    def journal_evaluation(self, row: dict) -> None:
        """
        Journal an evaluation row the node is about to record (none without a journal).

        Why: the journal restores the model state past the last checkpoint, and the rows
        of the evaluations of that state lived in the node's run record only (in memory
        until the next checkpoint): a server restored from checkpoint + journal lost them
        from ``timeseries.csv``. Written at once, fsynced (one record an evaluation); the
        next checkpoint holds it (its run record) and empties the journal, so a restore
        records each row once (``replayed_evaluations``).
        """
        if self.journal is not None:
            self.journal.append_evaluation(float(row.get('time_s', 0.0)), row)
            self._settled(row)

    def journal_submitted(self, info: dict, model) -> None:
        """
        Note an evaluation the node hands its evaluator, its row owed until journaled.

        ``info``: its row's ``time_s``, ``iteration`` and ``counters``; ``model``: the
        snapshot the evaluator evaluates (kept, not copied: nothing changes it). Why: a
        server killed while the evaluation ran left no row of that evaluation point, and the
        restored server evaluated its own model at activate (another model, another time).
        Until its row is journaled (``journal_evaluation``) the evaluation is owed: a
        checkpoint keeps it with its model (``state_dict``), the journal says where it was
        submitted (``OP_EVAL_SUBMITTED``: the replayed engine holds its model there), and a
        restored node evaluates each owed one for its row (``ServerNode.activate``): every
        evaluation point has one row, whichever process computed it. None without a journal.
        """
        if self.journal is not None:
            self.journal.append_submitted(info)
            self.owed_evaluations.append((dict(info), model))
            self.last_submitted = float(info['iteration'])

    def _settled(self, row: dict) -> None:
        """Take the evaluation of ``row`` (its time and iteration) off the owed ones."""
        key = (float(row.get('time_s', 0.0)), float(row.get('iteration', 0.0)))
        self.owed_evaluations = [
            (info, m) for info, m in self.owed_evaluations
            if (float(info['time_s']), float(info['iteration'])) != key]

    def write_journal(self) -> None:
        """Append the inputs held since the last call (``_journal``), one fsync for all."""
        held, self._unwritten = self._unwritten, []
        if held and self.journal is not None:
            self.journal.append_all(held)

    def _count(self, actions, now: float) -> list:
        """Count what the engine's ``actions`` send and log; keep each stop order sent."""
        for a in actions:
            if isinstance(a, Send):
                self.bytes_down += _wire(a.msg)
                if isinstance(a.msg, Schedule):
                    self._stamp(a.dest, a.msg)
                    if a.msg.stop and 0 <= a.dest < self.n:
                        self.stop_sent[a.dest] = True
                        self._stops[a.dest] = dataclasses.replace(
                            a.msg, incarnation=0, target_incarnation=0)
                        self._spoke[a.dest] = now
                        self._stop_due[a.dest] = now + self.transfers.end_timeout_s
            elif isinstance(a, Log) and a.name == 'stall_s' and 0 <= a.worker < self.n:
                self.stall_time[a.worker] += float(a.value)
            elif isinstance(a, Log) and a.name == 'trigger' and 0 <= a.worker < self.n:
                self.triggers[a.worker] += 1
            elif isinstance(a, Log) and a.name == 'worker_restart':
                self.worker_restarts += 1
        return actions

    def _stamp(self, dest: int, msg: Schedule) -> None:
        """
        Stamp ``msg`` (a Schedule: in practice a stop order) with our run and ``dest``'s.

        ``dest``'s run is the latest the transfers heard of it. The engines build their
        Schedules with no run, and the transfers pass them on as they are: a robot could not
        tell a replaced server run's late stop order from its live run's
        (``WorkerAdapter._retired``), and stopped while the live run trained on.
        """
        if not msg.incarnation:
            msg.incarnation = self.transfers.incarnation
        runs = self.transfers.peer_runs.get(dest)
        if runs and not msg.target_incarnation:
            msg.target_incarnation = runs[-1]

    _COUNTS = ('bytes_up', 'bytes_down', 'pushes_received', 'pushes_refused',
               'worker_restarts')
    """The adapter's own counts a checkpoint keeps (``summary.json``'s, via ``stats``)."""

    _LATER_COUNTS = ('stops_repeated', 'runs_taken_back', 'inputs_refused',
                     'journal_records_dropped')
    """Counts kept since (0 when an older checkpoint lacks them): ``stops_repeated`` counted
    from 0 again after a restore, so ``summary.json`` missed the repeats before it."""

    @property
    def stopped(self) -> list:
        """
        Return which robots are done: told to stop, or whose budget is done (``_budget_done``).

        The durable hooks (``chaos_hooks.ServerHooks``) checkpoint before a stop order
        leaves (they read ``stop_sent``): a robot told to stop never speaks again, and a
        server restored from before the order would wait for it. The server node waits at
        its start only for the robots not done (``ServerNode._robots_to_wait_for``): one whose
        budget is done and whose order the checkpoint does not hold (older than it) may have
        left; the engine answers it with the stop if it speaks, and it is given up after
        ``DONE_PATIENCE_S`` if not (``stops_missed``).
        """
        return [bool(s) or d for s, d in zip(self.stop_sent, self._budget_done())]

    @property
    def durable_progress(self) -> int:
        """
        Return the pushes answered: ``--checkpoint-every K`` counts them for push systems.

        Rog's servers checkpoint when the slowest worker's clock crosses a multiple of K; a
        push server has no common clock (each robot pushes at its own pace, and a robot that
        left stops its count), so K counts the pushes it applied, whoever pushed them, and
        those it answered unapplied (a restarted robot's first, one sent again after a
        restore): their answer moves the robot's timestamp on too (AdaComp's pull), and with
        K = 1 a crash right after one lost the robot's next push (a timestamp the restored
        server never handed out: dropped). A run taken back (``runs_taken_back``, ``_take``)
        counts too: with K = 1 a crash after it, before any push was answered, restored the run as
        retired, and the restored transfers (which keep no state) never took it back again,
        so its pushes were refused for good. A message the engine refused counts too
        (``inputs_refused``): it is journaled (the counts it changed are the checkpoint's),
        and uncounted, refused messages grew the journal past K records without bound (a
        push's bytes each), and the restore's replay with it.
        """
        return (sum(self.clock) + self.worker_restarts + int(getattr(self.engine, 'resent', 0))
                + self.runs_taken_back + self.inputs_refused)

    @property
    def run_done(self) -> bool:
        """
        Return whether the run is over for good: every robot told to stop, results written.

        ``finished`` (every stop order sent) is checkpointed before the last order leaves,
        before the node writes the results: a server restored from that checkpoint said
        the run had finished, wrote no ``summary.json`` nor ``model.pt``, and ``rog fleet``
        refused to start on the state folder. ``ServerHooks`` writes this as the
        checkpoint's ``finished``.
        """
        return self.finished and self.results_written

    def state_dict(self, copy: bool = True) -> dict:
        """
        Return the push server's checkpoint: its engine's state and the adapter's counts.

        The transfers' state is not kept (but ``replaced_acked``, below): a restored server
        is a new run of the server (a new incarnation), and its robots go on with it as with
        any restarted server (their settled push's END repeated; the answer makes them send
        it again). What decides
        whether a push sent again is applied is the engine's per-robot clock (a push is
        applied only at the clock its robot holds, which moves on when it is applied).
        ``state_id``: the number of pushes answered (``durable_progress``).
        ``journal_epoch``: the checkpoint's number, which the journal started once it is on
        disk (``checkpoint_confirmed``) names; ``replay``: the engine's in-process flags its
        journal's inputs met (``engine.replay_state``). ``replaced_acked``: each robot's
        last word, an ack to another server run, and when (``PushTransfers.replaced_acked``):
        a replaced run restored proves the replacement anew from its robots' acks (its
        ``replaced_by`` is not kept: restored after the replacing run died, it would leave
        ``LEAVE_TIMEOUT_S`` after its end, before its robots' pokes showed that run gone),
        but a robot that acked that run before the restore and computes since acks nothing
        more. Only the acks before the checkpoint: acks are not journaled, and a finished run
        checkpoints only as it sends a robot its first stop order (or its results).
        ``clock_stamp``: the boot, wall clock and monotonic clock the checkpoint was taken at
        (``clocks.mono_stamp``), for the monotonic times it keeps (``replaced_acked``'s,
        ``unrecorded_logs``'): ``load_state_dict`` puts them on its own clock.
        """
        return {'engine': self.engine.state_dict(copy=copy), 'state_id': self.durable_progress,
                'clock': list(self.clock), 'stop_sent': list(self.stop_sent),
                'stall_time': list(self.stall_time), 'triggers': list(self.triggers),
                'counts': {k: int(getattr(self, k))
                           for k in self._COUNTS + self._LATER_COUNTS},
                'stop_clocks': [-1 if s is None else int(s.clock) for s in self._stops],
                'gone': list(self.gone),
                # (a zombie's robots' last acks to the run replacing it: served_by_replacing)
                'replaced_acked': [[int(r), int(run), float(at)] for r, (run, at) in sorted(
                    getattr(self.transfers, 'replaced_acked', {}).items())],
                'clock_stamp': node_clocks.mono_stamp(),
                'results_written': bool(self.results_written),
                'journal_epoch': self.journal_epoch + 1, 'replay': self.engine.replay_state(),
                # (each with the snapshot its evaluator has: a model each, while they run)
                'owed_evaluations': [[info, m] for info, m in self.owed_evaluations],
                'last_submitted': self.last_submitted,
                # (written results: the node recorded them before it wrote them)
                'unrecorded_logs': [] if self.results_written else [
                    [now, log.name, float(log.value), int(log.worker),
                     json.dumps(log.info, default=str)] for now, log in self._last_logs]}

    def load_state_dict(self, sd: dict) -> None:
        """
        Go on from ``state_dict``'s checkpoint (ValueError if of another fleet).

        Each robot told to stop gets its stop order back (``_stops``, rebuilt at the clock
        it went with): the first END such a robot sent the restored server was answered with
        the order again (``_after_stop``), and the copy of none raised TypeError there.

        The adapter's own keys are read first: a checkpoint missing one (or with one of
        another size) raised after the engine was loaded, leaving a half-restored server.

        Monotonic times (``clock_stamp``, ``clocks.mono_shift``): kept within one boot;
        across a reboot (or a boot unknown) moved to this clock by the time away, so each is
        as old as it was at the checkpoint plus the time away. A reboot restarts the
        monotonic clock: unmoved, a robot's ack 300 s before the checkpoint could be taken
        as seconds old by ``served_by_replacing``. Where the time away is unknown (the wall
        clock stepped), ``replaced_acked``'s acks are taken as old (dropped: an ack of
        unknown age must not hold the run that replaced us as alive) and
        ``unrecorded_logs``' times are moved by no time away, as the run's clock then goes
        on from the checkpoint without the downtime (``ServerNode._resume_record``): each
        keeps its place in the run's record. A checkpoint without a stamp (older) keeps its
        times, as before.
        """
        if len(sd['clock']) != self.n or len(sd['stop_sent']) != self.n:
            raise ValueError(f"checkpoint of {len(sd['clock'])} robots, this fleet has {self.n}")
        clock = [int(c) for c in sd['clock']]
        stop_sent = [bool(b) for b in sd['stop_sent']]
        stall_time = [float(t) for t in sd['stall_time']]
        triggers = [int(t) for t in sd['triggers']]
        counts = {k: int(sd['counts'][k]) for k in self._COUNTS}
        counts.update({k: int(sd['counts'].get(k, 0)) for k in self._LATER_COUNTS})
        clocks = [int(c) for c in sd.get('stop_clocks') or [0] * self.n]
        gone = [bool(g) for g in sd.get('gone') or [False] * self.n]   # (older: none)
        acked = _replaced_acked(sd.get('replaced_acked') or [], self.n)     # (older: none)
        stamp = sd.get('clock_stamp')          # (older: none, its times kept as they are)
        shift, _ = (0.0, '') if stamp is None else node_clocks.mono_shift(stamp)
        acked = {} if shift is None else {r: (run, at + shift) for r, (run, at) in acked.items()}
        log_shift = shift       # (the logs': the run's clock goes on without the downtime)
        if shift is None:
            log_shift, _ = node_clocks.mono_shift(stamp, stepped_away=0.0)
        unrecorded = [(float(now) + log_shift,
                       Log(str(name), float(value), int(worker), json.loads(info)))
                      for now, name, value, worker, info in sd.get('unrecorded_logs') or ()]
        owed = [(dict(info), m) for info, m in sd.get('owed_evaluations') or ()]
        if len(stall_time) != self.n or len(triggers) != self.n or len(clocks) != self.n \
                or len(gone) != self.n:
            raise ValueError(f'checkpoint of {self.n} robots with per-robot lists of other '
                             'sizes: not a push server checkpoint of this fleet')
        epoch = int(sd.get('journal_epoch', 0))    # (0: a checkpoint from before the journal)
        j = self.journal
        if j is not None and j.epoch > epoch:
            from rog_ros.nodes.push_journal import JournalError
            raise JournalError(f'journal {j.path} follows checkpoint {j.epoch}, newer than '
                               f'the checkpoint {epoch} beside it (put back?)')
        self.engine.load_state_dict(sd['engine'])
        self.clock, self.stop_sent, self.gone = clock, stop_sent, gone
        if hasattr(self.transfers, 'replaced_acked'):
            self.transfers.replaced_acked = acked
        self.stall_time, self.triggers = stall_time, triggers
        for k, v in counts.items():
            setattr(self, k, v)
        if j is not None and j.epoch == epoch:
            # (the torn records cut off this journal, by this restore and by earlier ones a
            # second crash came after before a checkpoint: each on disk once, ``OP_RESTORED``)
            self.journal_records_dropped += j.dropped_total
        # (a checkpoint from before the flag: its finished run's results were written)
        self.results_written = bool(sd.get('results_written', all(self.stop_sent)))
        self._stops = [Schedule(worker=r, clock=max(c, 0), push_deadline_s=-1.0,
                                stop=True) if sent else None
                       for r, (sent, c) in enumerate(zip(self.stop_sent, clocks))]
        self.journal_epoch = epoch
        self.owed_evaluations = owed
        last = sd.get('last_submitted')         # (older: none)
        self.last_submitted = None if last is None else float(last)
        # the logs of the message the checkpoint was taken for (``_unrecorded``), first
        self.replayed_logs = unrecorded + self.replayed_logs
        if j is not None:
            if j.epoch != epoch:
                j.reset(epoch)   # (a crash after the checkpoint's rename: its records are in it)
            self._replay(sd.get('replay'), log_shift)

    def journal_in(self, folder) -> None:
        """
        Keep the journal in state folder ``folder``, beside its checkpoint (``server.pt``).

        Why here: the node and the tests that stand for it give a push server its journal
        the one way (``attach_journal`` with the folder's file names).
        """
        import os
        from rog_ros.nodes.push_journal import JOURNAL_FILE
        from rog_ros.nodes.state_dir import SERVER_STATE_FILE
        self.attach_journal(os.path.join(folder, JOURNAL_FILE),
                            os.path.isfile(os.path.join(folder, SERVER_STATE_FILE)))

    def attach_journal(self, path, checkpoint_on_disk: bool) -> None:
        """
        Keep a write-ahead journal of the engine's inputs at ``path`` (``push_journal``).

        The journal is read and checked here, before anything is restored (a bad one or
        another fleet's: ``JournalError`` naming it, nothing changed). With no checkpoint
        on disk (a crash before the first), its records follow the engine as built: they
        are replayed now; else ``load_state_dict`` replays those following the checkpoint.
        None found and no checkpoint: a fresh run, nothing to replay (the file is written at
        the first append, so a refused start leaves the folder as it was). Records replayed
        with no checkpoint (a crash before the first) make the start a resume of that run
        (``replayed_without_checkpoint``: ``ServerHooks.restore`` says checkpoint 0), not a
        new run whose node set the results aside. Their logs (``replayed_logs``) are moved
        onto this process's monotonic clock by the stamp of the run record the journal's
        header keeps (``clocks.mono_shift``, as ``load_state_dict`` moves a checkpoint's;
        until 2026-12-08 they kept the old boot's times after a reboot); a damaged stamp:
        ``JournalError`` in one line, nothing changed.
        """
        import sys
        from rog_ros.nodes.push_journal import JournalError, PushJournal
        j = PushJournal(path, self._fleet())
        j.read()
        if j.dropped:       # (said once: the next read finds the file cut there)
            print(f'rog_server: {j.dropped}', file=sys.stderr, flush=True)
        self.journal_records_dropped = j.dropped_total
        if not checkpoint_on_disk and j.epoch != 0:
            j.close()
            raise JournalError(f'journal {j.path} follows checkpoint {j.epoch}, and there is '
                               'no checkpoint beside it; put server.pt back, or move the whole '
                               'state directory away to start afresh')
        shift = 0.0     # (the logs' times: the header's run record is stamped at its first)
        record = j.header.get('run_record') if not checkpoint_on_disk and j.records else None
        if isinstance(record, dict) and 'mono_s' in record:
            try:
                shift, _ = node_clocks.mono_shift(record, stepped_away=0.0)
            except ValueError as err:
                j.close()
                raise JournalError(f"journal {j.path}: its run record's {err}; move the whole "
                                   'state directory away to start afresh') from None
        self.journal = j
        if not checkpoint_on_disk and j.records:
            self._replay(None, shift)
            self.replayed_without_checkpoint = True

    def _fleet(self) -> dict:
        """Return what names this server's fleet in its journal (system, robots, parameters)."""
        e = self.engine
        system = getattr(getattr(e, 'cfg', None), 'mode', None) or type(e).__name__
        return {'system': str(system), 'robots': self.n, 'params': int(e.model().numel())}

    def _replay(self, state, log_shift: float = 0.0) -> None:
        """
        Replay the journal's inputs through the engine (the live path, ``_engine_input``).

        ``state``: the checkpoint's ``replay`` (the engine's flags its inputs met; None: the
        engine as built). The answers are dropped (sent before the crash, or lost with it:
        the robot sends its push again, ``push_resent``); the stop repeats' timers, in the
        crashed process's clock, are left as a restore leaves them.

        The engine's logs of the replayed inputs are kept, with their times, in
        ``replayed_logs``: the server node records them (``events.csv``, the transfer
        figures), which missed the events between the checkpoint and the crash. Those of
        the records before the first ``OP_RESTORED`` (written by the checkpoint's process,
        on its clock) are moved by ``log_shift``, as the checkpoint's own logs are
        (``load_state_dict``; with no checkpoint, by the journal header's stamp:
        ``attach_journal``); the engine gets each record at its written time. The
        evaluation rows journaled (``journal_evaluation``) go to ``replayed_evaluations``
        for the node to record (``timeseries.csv``); they are no input (not counted). An
        evaluation submitted (``OP_EVAL_SUBMITTED``) whose row is not journaled after it is
        owed (``owed_evaluations``), with the replayed engine's model at its record.

        Ends with an ``OP_RESTORED`` record: the records this run appends after it met a
        restored engine (every robot's next push unsure, GSP's last push times forgotten),
        not the checkpoint's flags; a second crash before the next checkpoint replays them
        so (``end_replay`` at the record), or they were replayed as the first run's.
        """
        from rog_ros.nodes.push_journal import (OP_EVAL_SUBMITTED, OP_EVALUATION, OP_MESSAGE,
                                                OP_RESTORED, OP_REVIVE)
        timers = (list(self._spoke), list(self._stop_due), list(self._left))
        if state is not None:
            self.engine.begin_replay(state)
        n = 0
        for op, now, value in self.journal.inputs():
            if op == OP_MESSAGE:
                self.replayed_logs += [(now + log_shift, a) for a in
                                       self._engine_input(value, now, journal=False)
                                       if isinstance(a, Log)]
            elif op == OP_REVIVE:
                self._revive(value[0], value[1], now, journal=False)
            elif op == OP_EVALUATION:
                self.replayed_evaluations.append(dict(value))
                self._settled(value)
                continue
            elif op == OP_EVAL_SUBMITTED:      # (the replayed engine holds what it measured)
                self.owed_evaluations.append((dict(value), self.consensus_model()))
                self.last_submitted = float(value['iteration'])
                continue
            elif op == OP_RESTORED:
                log_shift = 0.0     # (a later process's clock: its stamp is not kept)
                self.engine.end_replay()
                self._spoke, self._stop_due, self._left = (list(t) for t in timers)
                continue
            else:
                self.stops_repeated += 1
            n += 1
        self.engine.end_replay()
        self._spoke, self._stop_due, self._left = timers
        self.replayed = n
        self.journal.append_restored()     # (with the torn records this read cut, if any)

    def checkpoint_confirmed(self, state_id: int) -> None:
        """
        Take note that the checkpoint of ``state_id`` pushes answered is on disk.

        Nothing is told to the robots: a push server answers every push with a pull, and
        its robots do not keep pushes for a restarted server to apply again. Without a
        journal the pushes applied after the last checkpoint are lost with a crash (at most
        ``--checkpoint-every`` of them); with one (``attach_journal``) it now starts empty,
        its records being in the checkpoint.
        """
        self.confirmed_pushes = int(state_id)
        self.journal_epoch += 1            # (``state_dict``'s ``journal_epoch``: on disk now)
        self._unwritten = []               # (their inputs are in the checkpoint)
        if self.journal is not None:
            self.journal.reset(self.journal_epoch)

    def stats(self) -> dict:
        """Return the engine's own figures plus the bytes per push seen on the wire."""
        out = dict(self.engine.stats())
        out.update({'pushes_received': self.pushes_received,
                    'pushes_refused': self.pushes_refused,
                    'pushes_applied': sum(self.clock),
                    'bytes_per_push': self.bytes_up / max(self.pushes_received, 1),
                    'bytes_per_pull': self.bytes_down / max(self.pushes_received, 1),
                    'worker_restarts': self.worker_restarts,
                    'stops_repeated': self.stops_repeated,
                    'replaced_by': int(getattr(self.transfers, 'replaced_by', 0)),
                    'stops_missed': self.stops_missed,
                    'journal_records_dropped': self.journal_records_dropped,
                    'pushes_resent': int(getattr(self.engine, 'resent', 0))})
        return out


class WorkerAdapter:
    """A push worker engine as WorkerNode drives it: counts pushes and bytes (chunked)."""

    policy = NoPolicy()

    def __init__(self, engine, transfers: PushTransfers = None):
        self.engine = engine
        self.transfers = transfers if transfers is not None else _default_transfers(
            engine.rank, engine.w)
        self.rank = engine.rank
        self.clock = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self.own_rejects = 0
        self.server_heard = 0          # messages of the live server run taken (liveness)
        self.set_aside = 0             # schedules of a retired server run, or for an old us
        self._stops_heard = RevivalWatch()   # retired server runs' stop orders that recur
        self.following = 0             # the server run whose model we took last (we follow it)
        self.stops_set_aside = 0       # stop orders of a server run we do not follow (a zombie's)
        self._said = {}                # server run -> when it last answered us (chunk, ack)
        self._stopping = {}            # server run -> (when it first, when it last ordered a stop)
        self._pushed_at = None         # when our latest push went (None: none yet)

    @property
    def rejects(self) -> int:
        """Return the messages refused: the engine's rejects and the transfers' own."""
        return self.own_rejects + self.transfers.rejects

    @property
    def incarnation(self) -> int:
        """
        Return this robot run's id, the one its chunks and acks carry (its transfers').

        Why: its status (``TrainStatus.incarnation``) said the node's own id, which no
        message to the server carries: the server could not tell its live run's status
        (``ServerAdapter.robot_alive``) from a stale process's.
        """
        return self.transfers.incarnation

    @property
    def superseded(self) -> int:
        """
        Return the messages set aside, not refused: of a replaced server run, or for an old us.

        The robot's give-up line says a robot that heard only those heard them (its timer
        counts only ``server_heard``), not that it heard nothing from the server.
        """
        t = self.transfers
        return t.superseded + t.foreign + self.set_aside

    @property
    def w(self) -> torch.Tensor:
        return self.engine.w

    @property
    def pulled_clock(self) -> int:
        return self.clock

    @property
    def state(self) -> str:
        if self.engine.stopped:
            return 'stopped'
        return 'pushing' if getattr(self.engine, 'pending', None) is not None else 'computing'

    def local_staleness(self) -> int:
        return 0

    def start(self, now: float) -> list:
        return self.transfers.outgoing(self._count(self.engine.start(now), now), now)

    def next_wakeup(self):
        return _earliest(self.engine.next_wakeup(), self.transfers.next_wakeup())

    def on_tick(self, now: float) -> list:
        out = self.transfers.outgoing(self._count(self.engine.on_tick(now), now), now)
        return out + self.transfers.on_tick(now)

    def on_compute_done(self, grad, now: float) -> list:
        out = self._count(self.engine.on_compute_done(grad, now), now)
        return self.transfers.outgoing(out, now)

    def on_message(self, msg, now: float) -> list:
        """
        Take one message from the bus; count it in ``server_heard`` if the live server run's.

        The node's give-up timer (``server_timeout``, ``EngineDriver``) counts only messages
        of the server run the transfers hold live, taken (nothing refused): a replaced run's
        late chunks, set aside as superseded, reset it, so a robot whose live server fell
        silent waited as long as a dead run's copies came. A retired run counts again from
        the message that takes it back, a new run once heard; a message naming no run (0:
        the stop order of a server of a revision before they were stamped) only while no run
        is known, as Rog's robot counts them.
        """
        t = self.transfers
        refused = (t.rejects, self.own_rejects)
        inc = getattr(msg, 'incarnation', 0)
        sender = getattr(msg, 'sender', SERVER)
        out = self._take(msg, now)
        runs = t.peer_runs.get(SERVER)
        taken = sender == SERVER and (t.rejects, self.own_rejects) == refused
        if taken and inc == (runs[-1] if runs else 0):
            self.server_heard += 1
        if (taken and inc and not isinstance(msg, Schedule)
                and getattr(msg, 'target_incarnation', 0) in (0, t.incarnation)):
            self._note_said(int(inc), runs or [], now)
        return out

    def _note_said(self, run: int, runs: list, now: float) -> None:
        """
        Note that server run ``run`` answered this run of ours at ``now`` (``_not_followed``).

        A chunk or an ack: what a live run sends us (a model, the answer to a push or a
        poke). Not a stop order: a zombie repeats its own every END timeout.

        Kept for the server runs the transfers remember and the one we follow only: O(1)
        (``KEEP_RUNS`` + 2 at most). A run that ordered a stop and was silent since for two
        poke intervals is forgotten first (``_note_stop``): a zombie whose link was down
        answers (an ack) before it repeats its stop, and that ack kept its first stop order,
        so ``_stop_held`` obeyed its next one at once.
        """
        if self._silent(run, now):
            del self._stopping[run]
        self._said[run] = now
        for old in [r for r in self._said if r not in runs and r != self.following
                    and r != run]:
            del self._said[old]

    def _take(self, msg, now: float) -> list:
        """
        Return the answer to ``msg``: the transfers' and, for a message they yield, the engine's.

        A ``Schedule`` (a stop order: the transfers pass it on unchecked) of a server run the
        transfers retired, or one addressed to an earlier run of this robot by a server run
        that is not the live one we know, is set aside (``set_aside``), not handed over: the
        engine stops on any stop order, so a replaced server run's late one stopped the robot
        while the live run trained on. A retired run taken back (it kept speaking) is the
        live one again: its stop order stops the robot, as does a retired run's stop order
        that keeps coming (``_retired``).
        """
        if isinstance(msg, Schedule) and getattr(msg, 'stop', False):
            self._note_stop(int(getattr(msg, 'incarnation', 0)), now)
        held = self._stop_held(msg, now)
        if isinstance(msg, Schedule) and (self._not_followed(msg, now)
                                          or self._retired(msg, now) or held):
            self.set_aside += 1
            runs = self.transfers.peer_runs.get(SERVER) or []
            inc = getattr(msg, 'incarnation', 0)
            if getattr(msg, 'stop', False) and inc and (held or inc in runs[:-1]
                                                        or self._not_followed(msg, now)):
                self.stops_set_aside += 1
            return []
        revived = self.transfers.revived
        msg, acks = self.transfers.on_message(msg, now)
        if self.transfers.revived != revived and self.transfers.peer_runs.get(SERVER):
            # a server run taken back (it kept speaking): the live one, the run we follow
            self.following = int(self.transfers.peer_runs[SERVER][-1])
        if msg is None:
            return acks
        if isinstance(msg, RowChunk) and msg.incarnation:
            self.following = int(msg.incarnation)     # a model of it: the run we follow
        self.bytes_down += _wire(msg)
        return acks + self.transfers.outgoing(
            self._count(self.engine.on_message(msg, now), now), now)

    def _not_followed(self, msg, now: float) -> bool:
        """
        Tell whether ``msg`` is a stop order of a server run we do not follow, ours still live.

        Why: a replaced server run alive after all (a zombie, finished) that has not yet
        heard ``REPLACED_AFTER_END_TIMEOUTS`` of our acks to the live run answers any push
        with its stop order, stamped for our run: a robot restarted since heard both runs
        (both ack its push) and stopped on whichever it heard first (the newest), while the
        live run trained on. A robot obeys a stop order only from the run it follows: the
        one whose model it took last (``following``; a run taken back is followed again).
        Another run's is set aside while the run we follow is live: it answered our latest
        push (``_answers_us``: a zombie's stop comes after the END of the push, whose chunks
        the live run acked already), and, while we wait for the push's answer, it answered
        within two poke intervals (``REVIVE_AFTER_POKES``; it answers each poke). A run that
        did not answer our latest push is not followed (a restarted server that took over
        from a dead one: its stop, the answer to that push, stops us at once). Following
        none yet (a new run of ours), a stop is set aside while another run answered us
        within that span and did not order a stop itself (``_stopping``): two finished
        runs that both answered a new run's pokes (a zombie and the live run, finished)
        each kept the other's stop set aside, and the robot never stopped while both
        servers owed it its stop. Else ``_retired``'s rules. O(``KEEP_RUNS``).
        """
        inc = int(getattr(msg, 'incarnation', 0))
        if not inc or not getattr(msg, 'stop', False) or inc == self.following:
            return False
        t = self.transfers
        span = self._span()
        if self.following:
            said = self._said.get(self.following)
            return (self._answers_us(self.following)
                    and (SERVER not in t.settled or now - said < span))
        return any(r != inc and r not in self._stopping and now - when < span
                   for r, when in self._said.items())

    def _stop_held(self, msg, now: float) -> bool:
        """
        Tell whether ``msg`` is a stop of a run we do not follow, not yet shown to be live.

        Why: a replaced server run alive after all (a zombie, finished) that is new to this
        run of ours acks our push, answers it with its stop order and repeats that every END
        timeout (``ServerAdapter._stops_due``); when those came before the live run's first
        word (its link slower), nothing told the live run from the zombie yet (no other run
        had answered us: ``_not_followed``), and the robot stopped while the live run trained
        on: on the zombie's first stop until 2026-12-07, on its second (2 s later, the live
        run's messages more than 2 s behind) until 2026-12-08 (``_first_stop_held``, which
        set aside the first only).

        Two rules, either holds the stop (``stops_set_aside``); the span of both is two poke
        intervals (``REVIVE_AFTER_POKES`` x ``POKE_END_TIMEOUTS`` END timeouts, 16 s):

        * Following a run (``following``: we took its model) that answered us (a chunk, an
          ack: ``_said``) within the span, whatever other runs ordered: it is live, and
          another run's stop is not ours to obey. Until 2026-12-08 this held only while
          every run that had ordered a stop was that run and ``_stopping`` forgot none: two
          zombies (or a zombie and a run finished earlier) that had each ordered a stop, and
          the next one that came while we waited for the live run's answer to our push (its
          link slower; ``_not_followed`` only once it answered, ``_retired`` never the newest
          run) stopped the robot while the live run trained on. Bounded: the followed run's
          own stop is obeyed at once (not held); dead (a restored server took over), it
          answers nothing and the rule ends 16 s after its last word.
        * Else, a stop of a run that answered this run of ours (acked a push of it, ``_said``:
          the zombie's way) is set aside until that run has answered our latest push alone
          for the span: since the later of its first stop order (``_stopping``, kept for this
          run of ours) and that push, and no other run answered us within it. By then the live
          run has answered (it answers each of our pokes, every poke interval while we wait)
          and the rules of ``_not_followed`` and ``_retired`` judge. Not only one that answered
          our latest push (until 2026-12-08): a zombie's repeat that crossed our next push
          came before any answer to it. Not held once another run ordered us to stop within
          the span (``_note_stop`` forgets runs silent longer): two finished runs, whichever is
          live is finished; the robot stops on the second run's order, as before. One with no
          answer of ours before it (a robot restarted while held, its new run computing its
          first gradient; a robot that heard no server) is judged as before.

        Bounded for a server that means it (a live or restored server past its end answering
        our push with its stop alone; its first copy lost): it repeats its stop every END
        timeout while we are owed it and answers each poke with it, so the robot stops 16-18 s
        after the later of the first stop order it heard and the followed run's last word,
        24 s at most if repeats are lost (the next poke's answer). A zombie whose stops come
        more than 16 s ahead of every word of the live run still stops the robot. Never held:
        a stop of the run we follow, or one naming no run (a server of a revision before
        stops were stamped). O(``STOPPING_KEPT`` + ``KEEP_RUNS``).
        """
        inc = int(getattr(msg, 'incarnation', 0))
        if not (isinstance(msg, Schedule) and getattr(msg, 'stop', False) and inc
                and inc != self.following):
            return False
        span = self._span()
        said = self._said.get(self.following)
        if self.following and said is not None and now - said < span:
            return True
        if not (inc in self._stopping and all(r == inc for r in self._stopping)):
            return False
        if self._pushed_at is None or inc not in self._said:
            return False
        alone_since = max(self._stopping[inc][0], self._pushed_at)
        return now - alone_since < span or any(
            r != inc and now - when < span for r, when in self._said.items())

    def _note_stop(self, run: int, now: float) -> None:
        """
        Note that server run ``run`` ordered us to stop (``_not_followed``), first at ``now``.

        Why: a run that ordered a stop is not one that trains on (a push server's stop ends
        the fleet's training), so its answers are no reason to set another run's stop aside.
        The time kept is its first order's (``_stop_held`` counts from it) and its latest's.
        A run silent for two poke intervals (no stop order, no answer to us: ``_said``) is
        forgotten (``STOPPING_KEPT``): remembered for ever, an earlier finished run or a
        zombie long gone kept ``_stop_held`` from holding any later run's stop. At most
        ``STOPPING_KEPT`` runs, the one noted least recently dropped first: O(``STOPPING_KEPT``).
        """
        for old in [r for r in self._stopping if self._silent(r, now)]:
            del self._stopping[old]
        if not run:
            return
        self._stopping[run] = (self._stopping.pop(run, (now, now))[0], now)
        if len(self._stopping) > STOPPING_KEPT:
            del self._stopping[next(iter(self._stopping))]

    def _span(self) -> float:
        """Return two poke intervals, s (``REVIVE_AFTER_POKES`` x ``POKE_END_TIMEOUTS`` ENDs)."""
        return REVIVE_AFTER_POKES * POKE_END_TIMEOUTS * self.transfers.end_timeout_s

    def _silent(self, run: int, now: float) -> bool:
        """
        Tell whether server run ``run`` ordered us to stop and said nothing for two poke intervals.

        Nothing: no stop order (``_stopping``) and no answer to us (``_said``). Such a run is
        forgotten, its own as any other's (``_note_stop``, ``_note_said``): its next stop order
        is a first one. O(1).
        """
        if run not in self._stopping:
            return False
        last = self._stopping[run][1]
        span = self._span()
        return now - max(last, self._said.get(run, last)) >= span

    def _retired(self, msg, now: float) -> bool:
        """
        Tell whether ``msg`` is of a server run replaced since, or of a stranger for an old us.

        A push server's stop order ends the whole fleet's training (the engines stop every
        robot at once, at the budget), not one run of a robot: the live server run's (or,
        while we know none, any run's) stop addressed to an earlier run of ours ends ours
        too. Set aside, it left this run waiting: a robot restarted while its server held
        it (GSP) got its earlier run's stop, and the server, told it had stopped every
        robot, left (``LEAVE_TIMEOUT_S``) before this run's first push drew another.
        A server run we do not know, when we know a live one, is not ours to stop for.
        O(1): the transfers keep at most ``KEEP_RUNS`` + 1 runs of the server. A run not
        among them (0: none named; a new run) is not refused here otherwise.

        A retired run's stop order that keeps coming (``revival.RevivalWatch``: more than
        two over two poke intervals) is the live run's, retired by mistake: a message of a
        server run we never heard (a dead run's late ack or chunk, heard after the live
        run's) made it the newest, and the live run, whose acks never take it back (only
        its chunks do, and a finished server sends none), had its stop set aside for good.
        The live push server repeats a stop order every END timeout while its robot pokes
        (``ServerAdapter._stops_due``); a replaced run's late copies all come within a
        network delay, and are still set aside. A replaced run alive after all (a zombie: a
        second server process, finished, whose link came back) repeats its stop as long: it
        is taken for the live run only while we wait for the answer to our push and the
        newest run has been silent as long (``_newest_silent``); the live newest answers
        each of our pokes, a dead one nothing. Never while the newest run is the one we
        follow (``following``: we took its model): its silence is its link's or its death,
        and a zombie's order is not ours to obey for it (``_newest_silent``).
        """
        t = self.transfers
        inc = getattr(msg, 'incarnation', 0)
        runs = t.peer_runs.get(SERVER) or []
        if bool(inc) and inc in runs[:-1]:
            if getattr(msg, 'stop', False) and self._answers_us(inc):
                return False
            watch = self._stops_heard
            watch.keep(lambda key: key in runs[:-1])
            return not (getattr(msg, 'stop', False)
                        and watch.alive(inc, now, t.end_timeout_s)
                        and self._newest_silent(runs[-1], now))
        target = getattr(msg, 'target_incarnation', 0)
        return bool(target) and target != t.incarnation and bool(runs) and inc != runs[-1]

    def _answers_us(self, run: int) -> bool:
        """
        Tell whether ``run`` is the run we follow and answered our latest push (or we made none).

        Why: the transfers' newest server run is the one first heard last, and a robot
        restarted while a replaced run still lives (a zombie) hears both ack its push in
        either order: the zombie's acks made it the newest, and the stop order of the run
        whose model the robot took, retired so, was set aside. A followed run that did not
        answer our latest push (another did) is not followed any more: ``_retired``'s rules.
        """
        said = self._said.get(run)
        return (run == self.following and said is not None
                and (self._pushed_at is None or said >= self._pushed_at))

    def _newest_silent(self, newest: int, now: float) -> bool:
        """
        Tell whether we wait for our push's answer and server run ``newest`` said nothing since.

        Why: a retired run's stop order that keeps coming is the live run's only when the
        run that retired it is dead. A zombie (a replaced server process alive after all,
        finished) repeats its stop every END timeout while we train with the live run: taken,
        it stopped us as the live run trained on. The live newest run answers each of our
        pokes (every poke interval while we wait: the final ack of our push, from its record);
        silent for two of them (``REVIVE_AFTER_POKES``, the span the stops must recur for,
        room for a lost one) it is dead. While we compute we poke nothing and it need not
        speak: a stop that recurs then is not taken. O(1).

        Nor when ``newest`` is the run we follow (its model the last we took): a run retired
        by mistake was replaced by one heard from a stray message only (a dead run's late
        ack), which never served us. Taken then, a zombie's order stopped a robot whose live
        run had been silent 16 s (its link down) while it trained on. As a Rog robot obeys
        the server run it follows (``server_incarnation``; a retired run's messages are set
        aside unless it is taken back), the robot obeys the run it follows, and gives up on it
        at ``server_timeout`` if dead.
        """
        t = self.transfers
        if SERVER not in t.settled or newest == self.following:
            return False
        heard = t.run_heard.get((SERVER, newest))
        span = self._span()
        return heard is None or now - heard >= span

    def _count(self, actions, now: float | None = None) -> list:
        for a in actions:
            if isinstance(a, Send):
                self.bytes_up += _wire(a.msg)
                if a.dest == SERVER:
                    self.clock += 1
                    self._pushed_at = now
            elif isinstance(a, Log) and a.name == 'reject':
                self.own_rejects += 1
        return actions


def _replaced_acked(rows, n: int) -> dict:
    """
    Return a checkpoint's ``replaced_acked`` rows as ``PushTransfers.replaced_acked``.

    Why kept: a replaced server run restored from its checkpoint proves the replacement anew
    (its transfers' state is not kept), but a robot that acked the replacing run before the
    restore and computes since acks nothing more: forgotten, its statuses held nothing, and
    20 s of a held robot's pokes made the restored run take the live run for gone
    (``PushTransfers.served_by_replacing``). ValueError naming the key if malformed.
    """
    try:
        out = {int(r): (int(run), float(at)) for r, run, at in rows}
    except (TypeError, ValueError) as err:
        raise ValueError(f'checkpoint replaced_acked {rows!r:.80}: not [robot, run, when] '
                         f'rows ({err})') from None
    if any(not 0 <= r < n for r in out):
        raise ValueError(f'checkpoint replaced_acked names robots outside this fleet of {n}')
    return out


def _default_transfers(me: int, w, **options) -> PushTransfers:
    """
    Return the chunked transfers of node ``me`` for model ``w`` (``options``: PushTransfers').

    (Named ``options``: ``settings`` is this module's import of ``rog_ros.nodes.settings``.)
    """
    from rog_ros.protocol.push_transfers import PushTransfers      # (torch: not for check)
    return PushTransfers(me, int(w.numel()), **options)


def _earliest(*times):
    """Return the earliest of ``times`` that are not None (None if all are)."""
    due = [t for t in times if t is not None]
    return min(due) if due else None


__all__ = ['PUSH_SYSTEMS', 'SIM_ONLY', 'SYNC_CHOICES', 'ServerAdapter', 'WorkerAdapter',
           'check', 'is_push', 'layout', 'server_engine', 'worker_engine']
