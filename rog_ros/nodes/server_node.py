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
ServerNode: the parameter server process (ServerEngine + evaluation + metrics + bus).

Holds no protocol logic: the engine decides what to send, when a pull stalls and when the
fleet stops (``max_iterations``). This class shapes each worker's downlink with its emulated
link, evaluates the consensus model every K iterations (what the workers really hold, never
undelivered rows; on the workload's whole evaluation set, in a thread of its own so that the
protocol is never held by an evaluation: ``BackgroundEvaluator``), collects the workers'
TrainStatus for compute times, and writes the same ``summary.json`` / ``timeseries.csv`` as
the simulator through ``RunRecorder``.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time

from rog_ros.atomic import remove_write_leftovers
from rog_ros.core.slack import slack_summary
from rog_ros.metrics import RunRecorder
from rog_ros.nodes import clocks, lifecycle as lc, push_systems
from rog_ros.nodes.assembly import build_training, epoch_to_monotonic, link_for, shaper_for
from rog_ros.nodes.chaos_hooks import maybe_faulty, ServerHooks, stops_sent
from rog_ros.nodes.connect import (fleet_key, node_reject_counts, open_bus, PeerTimeout,
                                   transfer_limits, wait_matched)
from rog_ros.nodes.diagnostics import DiagnosticsPublisher, server_statuses
from rog_ros.nodes.driver import EngineDriver
from rog_ros.nodes.durable import let_go_in_turn, StateHold
from rog_ros.nodes.model_file import MODEL_FILE, save_state_dict
from rog_ros.nodes.outbox import Outbox
from rog_ros.nodes.params import policy_spec
from rog_ros.nodes.push_journal import JOURNAL_FILE
from rog_ros.nodes.reject_notes import RejectNotes
from rog_ros.nodes.respawn import INCOMPATIBLE_FLEET
from rog_ros.nodes.routing import (link_stats, netmon_names, server_inbox, server_outbox,
                                   train_status, worker_inbox, worker_name)
from rog_ros.nodes.run_outputs import PREVIOUS, set_aside_earlier_results
from rog_ros.nodes.signals import SignalRequests
from rog_ros.nodes.state_dir import SERVER_STATE_FILE, train_again
from rog_ros.protocol.actions import Log
from rog_ros.protocol.events import say as say_event
from rog_ros.protocol.messages import (LinkStats, new_incarnation, SERVER, train_status_problem,
                                       TRAIN_STATUS_SCHEMA, TrainStatus)
from rog_ros.protocol.ps import ServerEngine
from rog_ros.protocol.ps_membership import INCOMPATIBLE_LEASES, IncompatibleWatch
from rog_ros.protocol.revival import POKE_END_TIMEOUTS
import torch

LEAVE_TIMEOUT_S = 5.0   # after the stop orders: how long to wait for the workers to leave
HEAR_LEASES = 2         # a restored server's wait for the robots it told to stop (below)
HEAR_SCALE = 1.0        # that wait's bounds are multiplied by it (tests scale them down)
EVAL_DRAIN_S = 120.0    # at the end: how long to wait for the evaluations still queued
INCOMPATIBLE_SCALE = 1.0   # the bound before a robot of another build is given up, scaled
INCOMPATIBLE_LOOK_S = 0.5  # how often the bus is asked about readers of another build
EVAL_ERRORS_KEPT = 5       # the last evaluation errors summary.json names (and checkpoints)
EVAL_PENDING_MAX = 3       # evaluations pending (a snapshot each) before the loop waits
EVAL_PENDING_WAIT_S = 60.0   # the longest it waits for one (then it goes on, as before)
EVAL_WAIT_SLICE_S = 0.2    # while it waits, how often it looks for a shutdown request


class FleetIncompatible(PeerTimeout):
    """Every robot the server waits for runs an incompatible rog_ros (exit status 4)."""

    exit_status = INCOMPATIBLE_FLEET


def _says_stopped(state: str) -> bool:
    """
    Tell whether a robot's status ``state`` (``lifecycle:engine``) says it stopped or left.

    Why: a push server waits at its end for each robot owed its stop order; one that says
    its engine stopped, or that its node is finalized, needs none.
    """
    life, _, engine = str(state).partition(':')
    return engine == 'stopped' or life == lc.FINALIZED


def _evaluation_errors(saved: dict) -> tuple:
    """
    Return a checkpoint's run record's evaluation errors: count, first, the last few.

    A record from before 2026-12-08 has none (0, None, []). Malformed ones raise
    TypeError or ValueError (``_resume_record`` then drops them alone, with a warning).
    """
    count = int(saved.get('evaluation_errors') or 0)
    first = saved.get('first_evaluation_error')
    last = saved.get('last_evaluation_errors') or []
    if count < 0 or not (first is None or isinstance(first, str)) \
            or not isinstance(last, list) or not all(isinstance(t, str) for t in last):
        raise ValueError('evaluation errors of the wrong kind')
    return count, first, last[-EVAL_ERRORS_KEPT:]


class BackgroundEvaluator:
    """
    Evaluates model snapshots in order, in a thread of its own; the loop collects the results.

    The loop takes a snapshot of the consensus model (a copy: about 1 ms) and goes on serving;
    the thread copies it into the evaluation model and runs ``evaluate``. Only the loop touches
    the bus (results are published by whoever calls ``collect``).

    Parameters
    ----------
    evaluate : callable
        ``evaluate() -> dict`` of the model bound to ``flat``.
    flat : torch.Tensor
        The flat parameters of the evaluation model.
    background : bool
        False: ``submit`` evaluates at once, in the caller's thread (same results).

    """

    def __init__(self, evaluate, flat, background: bool = True):
        self._evaluate, self._flat = evaluate, flat
        self._done = queue.Queue()
        self._todo = queue.Queue()
        self.pending = 0          # submitted, not collected
        self.busy_s = 0.0         # seconds spent evaluating
        self.max_s = 0.0
        self._thread = None
        self._closed = False
        if background:
            self._thread = threading.Thread(target=self._run, name='rog-server-eval',
                                            daemon=True)
            self._thread.start()

    def submit(self, snapshot, info) -> None:
        """Queue ``snapshot`` (flat parameters, not used afterwards by the caller)."""
        self.pending += 1
        if self._thread is None:
            self._done.put(self._one(snapshot, info))
        else:
            self._todo.put((snapshot, info))

    def collect(self, wait_s: float = 0.0, leave: int = 0) -> list:
        """
        ``[(info, metrics or exception)]`` finished so far, in submission order.

        ``wait_s`` > 0: wait up to that long until no more than ``leave`` are pending.
        """
        out, deadline = [], time.monotonic() + wait_s
        while self.pending:
            left = deadline - time.monotonic()
            try:
                item = self._done.get(timeout=left) if left > 0 and self.pending > leave \
                    else self._done.get_nowait()
            except queue.Empty:
                break
            self.pending -= 1
            out.append(item)
        return out

    def close(self, wait_s: float = 30.0) -> None:
        """
        Stop the thread: drop what is still queued, let a running evaluation end.

        Waits up to ``wait_s`` for the thread to end, so that the process never exits with
        an evaluation half-way through torch. Idempotent.
        """
        if self._thread is None:
            return
        self._closed = True
        self._todo.put(None)
        self._thread.join(wait_s)
        self._thread = None
        self.pending = self._done.qsize()      # what was dropped never comes back

    def _run(self) -> None:
        while True:
            item = self._todo.get()
            if item is None or self._closed:
                return
            self._done.put(self._one(*item))

    def _one(self, snapshot, info) -> tuple:
        t = time.perf_counter()
        try:
            self._flat.copy_(snapshot)
            result = self._evaluate()
        except Exception as exc:  # noqa: B902 - reported by the loop, never kills the thread
            result = exc
        spent = time.perf_counter() - t
        self.busy_s += spent
        self.max_s = max(self.max_s, spent)
        return info, result


class ServerNode:
    """
    The server: ``configure()``, ``activate()``, ``spin()``, ``finish()``, ``shutdown()``.

    Parameters
    ----------
    args : argparse.Namespace
        Fleet, link and server options (see ``rog_ros.nodes.rog_server``).
    requests : SignalRequests, optional
        Where lifecycle requests come from.

    """

    def __init__(self, args, requests=None, background_eval: bool = True):
        self.args = args
        self.background_eval = background_eval
        self.requests = requests or SignalRequests()
        self.life = lc.Lifecycle()
        self.bus = None
        self.state_hold = StateHold()  # the state file's: from configure to cleanup/shutdown
        self.ros_node = None         # set by rog_ros.nodes.ros_node under ROS 2
        self.ros_executor = None     # and the executor of that node, which the bus spins
        self.reject_notes = RejectNotes()  # why a message was dropped, once per kind
        self.log = logging.getLogger(getattr(args, 'node_name', 'rog_server'))
        self.status = {}             # worker rank -> newest TrainStatus
        self.bad_statuses = 0        # TrainStatus dropped for numbers out of range
        self.status_notes = RejectNotes(limit=4)   # apart: they must not use up the others'
        self._resynced = {}          # rank -> its run (incarnation) we sent our model to
        # this process's id on its statuses where the engine has none (the push systems')
        self.run_id = new_incarnation()
        self.t0 = None
        self.evaluations = 0
        # evaluations that raised (a user's workload, a full memory): counted and the first
        # one kept for summary.json, where `rog fleet` reads them (a fleet whose every
        # evaluation failed said "done" with status 0, the error only in this node's log)
        self.evaluation_errors, self.first_evaluation_error = 0, None
        self.last_evaluation_errors = []   # the last EVAL_ERRORS_KEPT, oldest first
        self._resumed = None         # (seconds into the run, seconds away) after a restore
        self._evaluator_stuck = False  # waited EVAL_PENDING_WAIT_S in vain (_keep_up)
        self._finished_before = False  # restored a run that had finished: write nothing
        self._told_before = set()    # restored: robots told to stop before the crash
        self._activated_at = None    # (monotonic) when activate returned
        self._robots_due = None      # (monotonic) startup_timeout from activate's start
        self._let_go_robots = set()  # robots of another build a push engine no more waits for
        self._unheard_given_up = set()   # robots given up before the engine took a message
        self._next_eval = 0.0
        self._last_evaluated = None  # the consensus model the last evaluation was given
        self.last_metrics = {}

    def reject_counts(self) -> dict:
        """Return ``{reason: count}`` of every message this node dropped (see connect)."""
        counts = node_reject_counts(self)
        counts['invalid_status'] = self.bad_statuses     # (0 too: summary.json's keys)
        return counts

    # ------------------------------------------------------------------ lifecycle
    def configure(self) -> None:
        """Build engine, evaluation model, recorder, bus and downlink shapers."""
        # (a failure lets go of what it took, the state file last: StateHold.configuring;
        # the hooks of a cleaned-up run are not its own: their ledger reports at shutdown)
        kept = getattr(self, 'hooks', None)
        self.state_hold.configuring(
            self._configure, lambda: self.life.state == lc.UNCONFIGURED,
            undo=lambda: self._let_go(failed=getattr(self, 'hooks', None) is not kept))

    def _configure(self) -> None:
        """Build engine, evaluation model, recorder, bus and downlink shapers."""
        a = self.args
        if getattr(a, 'state_dir', None):   # one node per state file, held before anything
            self.state_hold.take(os.path.join(a.state_dir, SERVER_STATE_FILE),
                                 'rog_server')   # (refused: no bus to close)
            # the journal's temporaries (rewritten at every checkpoint): a server killed while
            # it emptied it left one, and only rog fleet's start removed them, not a robot's
            remove_write_leftovers(a.state_dir, JOURNAL_FILE)
        tr = build_training(a)
        self.training = tr
        limits = transfer_limits()       # (CYCLONEDDS_URI read once: its lease and fragment)
        if push_systems.is_push(a.sync):      # AdaComp, GSP: their own engines, same wire
            self.engine = push_systems.server_engine(
                a, tr, **limits)
        else:
            self.engine = ServerEngine(
                tr.layout, tr.codec, tr.policy, a.workers, tr.w0, lr=tr.lr,
                chunk_bytes=a.chunk_bytes, window=a.window, max_iterations=a.iterations,
                absence_timeout_s=getattr(a, 'absence_timeout', None) or None,
                min_workers=getattr(a, 'min_workers', 1),
                final_model=getattr(a, 'final_model', True), let_go_silent=True,
                **limits)
        self.eval_w = tr.w0.clone()
        tr.layout.bind(tr.model, self.eval_w)
        self.evaluator = BackgroundEvaluator(lambda: tr.workload.evaluate(tr.model), self.eval_w,
                                             self.background_eval)
        self.eval_loop_s = 0.0     # time the loop spent on evaluations (snapshots, results)
        self.eval_samples = None   # evaluation samples per evaluation (the whole set)
        self.recorder = RunRecorder(
            system=policy_spec(a), n_workers=a.workers, staleness=tr.policy.staleness or 0,
            trace=a.trace, seed=a.seed, workload=a.workload,
            target_accuracy=tr.workload.target_accuracy)
        # the engine's byte counts: the uplink's push_done is logged in the worker processes
        self.recorder.traffic = lambda: (self.engine.bytes_up, self.engine.bytes_down)
        self.recorder.extra['start_model'] = {'source': tr.start, 'fingerprint': tr.fingerprint}
        self.log.info(tr.start_line())
        epoch = epoch_to_monotonic(a.epoch)
        links = {r: link_for(a.trace, r, a.workers, a.seed, a.trace_scale)
                 for r in range(a.workers)}
        self.outbox = Outbox({r: shaper_for(link, epoch, a.burst_bytes)
                              for r, link in links.items() if link is not None})
        self.bus = open_bus(a.bus, a.namespace, fleet_key(a, self.log),
                            getattr(a, 'record', None), self.ros_node, self.ros_executor,
                            node_name=getattr(a, 'node_name', None),
                            node_namespace=getattr(a, 'node_namespace', None))
        self.bus = maybe_faulty(self.bus, a, salt=1000)   # (kept first: closed if refused)
        replaced = getattr(self, 'hooks', None)       # (a cleaned-up run's: its ledger closed)
        self.hooks = ServerHooks(self.engine, tr.w0, getattr(a, 'state_dir', None),
                                 getattr(a, 'chaos_ledger', None),
                                 getattr(a, 'checkpoint_every', 10),
                                 run_record=self._run_record)
        if replaced is not None:
            replaced.close_replaced()
        self.hooks.restore()
        self._finished_before = self.hooks.restored is not None and self.hooks.run_done()
        if self.hooks.restored is None:     # a new run: OUT's results are an earlier run's
            self._set_aside_earlier_results()
        if not self._finished_before:
            self._resume_record(self.hooks.restored_record)
        if self.hooks.restored is not None and not self._finished_before:
            self._told_before = {r for r, told in enumerate(stops_sent(self.engine)) if told}
        for topic in server_inbox():
            self.bus.subscribe(topic)
        for r in range(a.workers):
            self.bus.subscribe(train_status(worker_name(r)), callback=self._on_status)
        if getattr(self.engine, 'slots', None) is not None:
            # FLOWN grants a free slot to the robot with the highest estimated bandwidth:
            # netmon's report of its link (a fleet's one netmon, or each robot's netmon_K)
            for name in netmon_names(a.workers):
                self.bus.subscribe(link_stats(name), callback=self._on_link_stats)
        self.status_topic = train_status('rog_server')
        for topic in server_outbox(a.workers) + [self.status_topic]:
            self.bus.advertise(topic)
        self.incompatible = IncompatibleWatch(
            a.workers, INCOMPATIBLE_LEASES * limits['lease_s'] * INCOMPATIBLE_SCALE)
        self._next_incompatible_look = 0.0
        self.diagnostics = DiagnosticsPublisher(self.bus, lambda now: server_statuses(self, now),
                                                getattr(a, 'diagnostics_hz', 1.0))
        self.driver = EngineDriver(self.bus, self.hooks, self.outbox, on_log=self._on_log)
        self.life.trigger('configure')

    def _set_aside_earlier_results(self) -> None:
        try:
            moved = set_aside_earlier_results(self.args.out)
        except OSError as exc:
            raise RuntimeError(f'{self.args.out} holds the results of an earlier run, which '
                               f'could not be moved to {PREVIOUS}/: {exc}') from exc
        if moved:
            self.log.info(f'{self.args.out} held the results of an earlier run; moved to '
                          f'{os.path.join(self.args.out, PREVIOUS)} ({", ".join(moved)})')

    def activate(self) -> bool:
        """
        Wait until every worker's endpoints are matched; evaluate the starting model.

        A worker is counted by its writers on the uplink, one per worker process and topic
        (only workers write there), not by readers on its downlink: any reader matches those,
        so a ``ros2 topic echo /rog/w0/chunks`` started first would pass for worker 0. The
        downlink readers are still waited for, so that the first sends reach each worker.
        """
        if self._finished_before:
            a = self.args
            self.log.warning(f'the run in {a.state_dir} had already finished (checkpoint '
                             f'{self.hooks.restored}): nothing to resume; its results stay as '
                             f'written in {a.out}; {train_again(a.state_dir)}')
            self.life.trigger('activate')
            return True
        # (a push engine lets robots given up as another build's go then: _let_go_given_up)
        self._robots_due = time.monotonic() + self.args.startup_timeout
        if not self._wait_for_robots(self._robots_to_wait_for()):
            return False
        self.life.trigger('activate')
        self._activated_at = time.monotonic()
        self.t0 = time.monotonic() - (self._resumed[0] if self._resumed else 0.0)
        self._record_replayed()
        if self._resumed:
            info = {'checkpoint': self.hooks.restored, 'evaluations': self.evaluations}
            self._on_log(time.monotonic(), Log('server_restored', self._resumed[1], SERVER, info))
        if self.hooks.restored is not None and getattr(self.hooks, 'state', None) is not None:
            # the record taken up (server_restored, the logs a restore owes it) into a
            # checkpoint at once: a second crash before the next restored the first's
            # checkpoint or journal header again, and lost this restore's server_restored
            self.hooks.checkpoint()
        owed = self._owed_evaluations()
        if owed is not None:            # (a restored push server with a journal)
            self._evaluate_owed(owed)
        else:
            self._evaluate()
        return True

    def _owed_evaluations(self):
        """
        Return the evaluations a restored push server owes rows of (None: not such a server).

        A push server with a journal restores the state at the crash and knows each
        evaluation submitted whose row was not journaled (``ServerAdapter.owed_evaluations``:
        killed while it ran), with the model it measured.
        """
        if self.hooks.restored is None or getattr(self.engine, 'journal', None) is None:
            return None
        owed = getattr(self.engine, 'owed_evaluations', None)
        return None if owed is None else list(owed)

    def _evaluate_owed(self, owed: list) -> None:
        """
        Evaluate the owed evaluations for their rows; schedule the next from the last point.

        Exactly once: every evaluation point of the run (its start, each ``--eval-every``
        crossed, ``finish``) has one row in ``timeseries.csv``, whichever process computed
        it, of the model it was submitted with and at its time and iteration, never two.
        A point the server was killed in (submitted, no row journaled) is evaluated now,
        its model the snapshot the checkpoint kept or the journal's replay rebuilt; a point
        crossed but never submitted (killed before) is evaluated at the first turn, of the
        state restored (the crash came right after the push that crossed it). Until
        2026-12-08 the restored server evaluated its own model at activate instead: the
        point's row was missing, or measured a later model at another time and iteration.
        The next point follows the last submitted (``last_submitted``), whose evaluation
        may have failed (an error, no row): taken from the rows alone, such a point was
        evaluated again at the first turn, of a later model.
        """
        every = max(1, self.args.eval_every)
        for info, model in owed:
            self.evaluator.submit(model, (float(info['time_s']), float(info['iteration']),
                                          dict(info.get('counters') or {})))
            self._last_evaluated = model
        points = [float(r['iteration']) for r in self.recorder.rows]
        points += [float(info['iteration']) for info, _ in owed]
        last = getattr(self.engine, 'last_submitted', None)
        if last is not None:            # (a failed evaluation's point has no row: not again)
            points.append(float(last))
        if not points:                  # (none submitted: the start's, of the model as built)
            self._evaluate()
            return
        self._next_eval = (int(max(points)) // every + 1) * every
        if not owed and self._evaluated_before():
            # (the model that row measured: finish evaluates the model it leaves unless it
            # is this one, and gave a server restored at the end a second row of it)
            self._last_evaluated = self.engine.consensus_model()

    def _evaluated_before(self) -> bool:
        """
        Tell whether the restored model's evaluation is in the run record already.

        A push server restored from its journal holds the state at the crash; where the last
        row journaled measured that state (no push applied since: a push server's rows carry
        the mean of the pushes applied), activate's evaluation gave the run a second row of
        one model. Rog's engines are not compared (the consensus moves between rows of one
        mean iteration, and a checkpoint's state is older than the crash).
        """
        rows = self.recorder.rows
        return (self.hooks.restored is not None and bool(rows)
                and getattr(self.engine, 'journal', None) is not None
                and hasattr(self.engine, 'journal_evaluation')
                and float(rows[-1]['iteration']) == self._mean_iteration())

    def _record_replayed(self) -> None:
        """
        Record the logs a restore owes the run record (``events.csv``, the counters).

        Why: the checkpoint's run record holds the events before it, but not the logs of
        the call it was taken in (the node records them after the call: the hooks'
        ``restored_logs``, a push server's first ``replayed_logs``); those of a push
        server's inputs journaled after it were replayed into the engine, their logs
        dropped. Each is recorded once: the next checkpoint's run record holds them. Their
        times are the crashed process's monotonic clock (this one's, within one boot; moved
        onto this one across a reboot by the checkpoint's stamp or, journal alone, its header's),
        kept within the run's span.
        """
        logs = list(getattr(self.hooks, 'restored_logs', None) or ()) + \
            list(getattr(self.engine, 'replayed_logs', None) or ())
        now = time.monotonic()
        for at, log in logs:
            self.recorder.on_log(min(max(at - self.t0, 0.0), now - self.t0), SERVER, log)
        if hasattr(self.engine, 'replayed_logs'):
            self.engine.replayed_logs = []
        self.hooks.restored_logs = []
        # the rows of the evaluations journaled after the checkpoint (a push server's), each
        # once: the checkpoint's run record holds those before it, the journal those after
        for row in getattr(self.engine, 'replayed_evaluations', None) or ():
            self._record_evaluation(row)
        if hasattr(self.engine, 'replayed_evaluations'):
            self.engine.replayed_evaluations = []

    def _wait_for_robots(self, ranks: list) -> bool:
        """
        Wait until robots ``ranks`` are matched; give up those of another build (False: shutdown).

        A robot of an older rog_ros whose message types differ reads its downlink with
        another type hash: Cyclone does not match it where both sides send type information
        (DdsBus), and matches it by type name where it sends none (rmw_cyclonedds), the bus's
        ``matched`` then leaving it out; the server waited for it until ``startup_timeout``
        and failed the whole fleet. Such a robot, with only readers of
        another build on its downlink for ``IncompatibleWatch.bound_s`` (3 leases), is named
        (``worker_incompatible``), taken as absent, and no more waited for. When every robot
        waited for is, the server says so and waits on for a robot of its own build until
        ``startup_timeout`` (those heard may be another fleet's, of another build, on this
        namespace and ROS_DOMAIN_ID, while this fleet's robots still boot): one heard then
        (``IncompatibleWatch`` takes it back) is waited for as any; none,
        :class:`FleetIncompatible` (exit status 4): no robot can train. Until 2026-12-07 the
        server failed so after the 3 leases, refusing its own late robots for good.
        """
        deadline = time.monotonic() + self.args.startup_timeout
        given_up, said = self.incompatible.given_up, False      # (the watch's set, kept)
        while ranks:
            live = [r for r in ranks if r not in given_up]
            if not live and not said:
                said = True
                self.log.warning(
                    f'every robot this server waits for ({", ".join(map(str, ranks))}) runs an '
                    'incompatible rog_ros so far (only readers of another message build on '
                    'its downlink: robots of another fleet on this namespace and ROS_DOMAIN_ID, '
                    'or of an older rog_ros); this server waits for robots of its build until '
                    f'startup_timeout, {self.args.startup_timeout:.3g} s from its start, then, '
                    'if still only robots of another build are heard, exits (status 4)')
            gave_up = []

            def keep_waiting(live=live, gave_up=gave_up):
                """Go on unless a shutdown is requested, or a robot given up or taken back."""
                gave_up += [r for r in self._look_for_incompatible(ranks) if r in live]
                if self.requests.shutdown_requested or gave_up:
                    return False
                return bool(live) or all(r in given_up for r in ranks)

            waiting = live or ranks          # (every robot given up: one taken back ends it)
            left = max(deadline - time.monotonic(), 0.0)
            try:
                waited = wait_matched(self.bus, [t for r in waiting for t in worker_inbox(r)],
                                      left, keep_waiting=keep_waiting,
                                      minimum=dict.fromkeys(server_inbox(), len(waiting)))
            except PeerTimeout as err:
                # (the message says the last wait's seconds: a robot given up, or taken back,
                # started another wait with what was left of startup_timeout)
                startup = self.args.startup_timeout
                text = str(err).replace(f' after {left:.0f} s:', f' after {startup:.0f} s:', 1)
                if self._restored_and_none_heard():
                    raise PeerTimeout(self._restored_timeout(text)) from err
                if not given_up:
                    raise PeerTimeout(text) from err
                if all(r in given_up for r in ranks):
                    raise FleetIncompatible(
                        f'no robot of this build after startup_timeout {startup:.3g} s: every '
                        f'robot this server waits for ({", ".join(map(str, ranks))}) runs an '
                        'incompatible rog_ros (its downlink readers are of another message '
                        'build): no robot can train; upgrade the robots to this version') \
                        from err
                given = ', '.join(map(str, sorted(given_up)))
                raise PeerTimeout(f'{text} (given up as running an incompatible rog_ros: '
                                  f'robots {given})') from err
            if waited >= 0:
                return True
            if self.requests.shutdown_requested:
                return False
        return True

    def _restored_and_none_heard(self) -> bool:
        """
        Tell whether this server was restored from a checkpoint and no robot is there.

        A robot given up as of an incompatible build was there (its writers are another
        build's, not counted below): the timeout names it (upgrade), not robots that left.
        """
        if getattr(self.hooks, 'restored', None) is None or self._finished_before or \
                self.incompatible.given_up:
            return False
        writers = self._uplink_writers(other_builds=False)
        return not any(self._robot_there(r, writers) for r in range(self.args.workers))

    def _restored_timeout(self, text: str) -> str:
        """
        Return the startup timeout ``text`` of a restored server that heard no robot.

        Why: a state folder older than the robots' budget (a copy put back: no crash leaves
        one, the checkpoint and journal hold every stop order sent) restores a run whose
        robots may have finished it and left; the server waited for them and gave up with
        the hint of a fleet that cannot see itself (namespace, ROS_DOMAIN_ID, discovery),
        which sent the user after a network that was fine.
        """
        a = self.args
        head, _, hint = text.partition(': is the other side')
        where = f'this server was restored from checkpoint {self.hooks.restored} of {a.state_dir}'
        short = self._short_of_the_end()
        if short is not None and hint:
            # (the checkpoint's robots mid-run, none told to stop: robots cannot finish a run
            # without its server, so they wait for this one, out of its sight)
            return (f'{head}: {where} and no robot was heard, though its checkpoint has the '
                    f'robots it waits for {short}, none told to stop: they cannot have '
                    'finished the run since (only a newer state of it, moved away for this '
                    f'one, could say so), so they are likely out of reach: is the other side'
                    f'{hint} Start or reach the robots and run this command again: it resumes '
                    'the run')
        return (f'{head}: {where} and no robot was heard: its robots may have finished the '
                'run and left (a state folder older than their budget, such as a copy put '
                'back; no crash leaves one). If they did, the results of the run are those '
                f'its last server wrote in {a.out} (summary.json, model.pt); '
                f'{train_again(a.state_dir)}. If its robots are still to come, start them '
                f'(namespace {a.namespace}, the same ROS_DOMAIN_ID) and run this command '
                'again: it resumes the run')

    def _short_of_the_end(self):
        """
        Say how far the restored robots waited for were from the budget (None: near its end).

        What the checkpoint knows: each robot's iterations (a push server's: its pushes
        applied) against ``--iterations``, and the stop orders sent. Near the end means a
        robot told to stop, or one waited for within ``--checkpoint-every`` iterations of
        the budget (what a crash may lose past the checkpoint); there a state folder put
        back after the robots finished is the likely story. None also when there is no
        budget or no engine to ask.
        """
        e, budget = getattr(self, 'engine', None), getattr(self.args, 'iterations', None)
        clock = getattr(e, 'clock', None)
        if e is None or budget is None or clock is None or any(stops_sent(e)):
            return None
        waiting = [r for r in self._robots_to_wait_for() if r < len(clock)]
        left = [int(budget) - int(clock[r]) for r in waiting]
        every = max(int(getattr(self.args, 'checkpoint_every', 1) or 1), 1)
        if not left or min(left) <= every:
            return None
        done = sorted(int(clock[r]) for r in waiting)
        at = f'{done[0]}' if done[0] == done[-1] else f'{done[0]} to {done[-1]}'
        return f'at iteration {at} of {int(budget)}'

    def _look_for_incompatible(self, ranks, now=None) -> list:
        """
        Tell the engines what the bus sees of ``ranks``' downlink readers; the ranks given up.

        At most every ``INCOMPATIBLE_LOOK_S``. A robot given up (``IncompatibleWatch``) is
        logged with its participant's GUID prefix, counted in ``events.csv`` and summary.json
        (``workers_incompatible``), and suspended as absent (``MembershipMixin.suspend``):
        heard again after an upgrade, the absence rules readmit it. A push engine, which has no
        absence rules, lets it go (:meth:`_let_go_given_up`).

        A robot told to stop (``stops_sent``) and not given up is not given up after: this
        fleet's robot that trained beside another fleet's robot of its rank and left was
        (``workers_incompatible``, to be upgraded) 3 leases after it left.

        Only a participant of another build that reads the downlink and writes the uplink
        (of any build) is taken as the robot, where the bus can tell (``_uplink_writers``):
        an older ``ros2 topic echo`` of a robot's downlink, with the robot itself late or out
        of reach, gave that robot up, and a one-robot fleet exited 4 (not respawned).
        """
        now = time.monotonic() if now is None else now
        if now < self._next_incompatible_look:
            return []
        self._next_incompatible_look = now + INCOMPATIBLE_LOOK_S
        foreign_readers = getattr(self.bus, 'foreign_readers', None)
        if foreign_readers is None:
            return []
        out, writers, told = [], False, stops_sent(self.engine)
        for r in ranks:
            foreign = {p for t in worker_inbox(r) for p in foreign_readers(t)}
            if foreign:
                if writers is False:
                    writers = self._uplink_writers()     # (once a look, when needed)
                if writers is not None:
                    foreign &= writers                   # robots, not tools that only read
            foreign = sorted(foreign)
            was = r in self.incompatible.given_up
            # (a robot told to stop is done: a participant of another build on its downlink
            # once it left is another fleet's robot of that rank, not this one, which trained)
            done = not was and r < len(told) and told[r]
            # (asked only then: an upgraded robot's old reader may be gone already)
            matched = (bool(foreign) or was) and (
                done or self._robot_there(r) or self._heard_since(r))
            let_go = getattr(self.engine, 'let_go_robot', None)      # (the push systems)
            for log in self.incompatible.observe(r, now, foreign, matched):
                out.append(r)
                self._on_log(now, log)
                if r not in self.hooks.heard:
                    self._unheard_given_up.add(r)
                suspend = getattr(self.engine, 'suspend', None)   # (Rog's engines)
                if suspend is not None:
                    clock = self.driver.clock()
                    self.driver.handle(suspend(r, clock, 'absent'), clock)
            if r not in self.incompatible.given_up:
                self._unheard_given_up.discard(r)
            if was and r in self._let_go_robots and r not in self.incompatible.given_up:
                self._let_go_robots.discard(r)
                let_go(r, go=False)      # matched again (upgraded): waited for at the end
        self._let_go_given_up(now)
        return out

    def _heard_since(self, rank: int) -> bool:
        """
        Tell whether robot ``rank``, given up before any message of it, was heard since.

        The engine took a message of it (``ServerHooks.heard``): a robot of this build speaks
        for that rank, as a reader of this build on its downlink would say. A push robot of
        this fleet that came after another fleet's robot of its rank was given up, and was
        told to stop at once (the fleet's budget spent), left within the half second between
        two looks: summary.json listed it in ``workers_incompatible``, to be upgraded.
        """
        return rank in self._unheard_given_up and rank in self.hooks.heard

    def _let_go_given_up(self, now: float) -> None:
        """
        Let a push engine go of the robots given up as another build's, once it may.

        A push engine has no absence rules: it waits at its end for every robot's stop order,
        and one of another build never gets it (``ServerAdapter.let_go_robot``). It is let
        go once ``startup_timeout`` from the server's start (``activate``) has passed (at
        once for a node never activated), not when it is given up: the robot heard may be
        another fleet's of that rank, on this namespace and ROS_DOMAIN_ID, while this fleet's
        own still boots, and this server would have waited for that one until then. Let go
        at once, a short run ended before that robot came, which then missed the whole run
        (Rog's engines wait for an absent robot at the end: ``ps_final.FINAL_PATIENCE_S``).
        """
        let_go = getattr(self.engine, 'let_go_robot', None)
        if let_go is None or (self._robots_due is not None and now < self._robots_due):
            return
        for r in sorted(self.incompatible.given_up - self._let_go_robots):
            self._let_go_robots.add(r)
            let_go(r)                # (else it waited at the end for a stop never sent)

    def _uplink_writers(self, other_builds: bool = True):
        """
        Return the participants writing the uplink (None: the bus cannot tell).

        Of this build and, with ``other_builds``, of another (``Bus.foreign_writers``).
        Of this build only: none of the participant's uplink writers is another build's. A
        process is built from one set of .msg files, and one of another build whose other
        messages kept their hash writes those as this build does (a build that changed
        ``RowChunk`` alone writes ``up/acks`` as this one): counted as of this build, an
        old robot was never given up (the server waited ``startup_timeout``, exit 1).
        """
        participants = getattr(self.bus, 'participants', None)
        foreign_writers = getattr(self.bus, 'foreign_writers', None)
        if participants is None or (other_builds and foreign_writers is None):
            return None
        writers, others = set(), set()
        for topic in server_inbox():
            theirs = participants(topic, writer=True)
            if theirs is None:
                return None
            writers |= theirs
            others |= set(foreign_writers(topic) if foreign_writers is not None else ())
        return writers | others if other_builds else writers - others

    def _robot_there(self, rank: int, writers=False) -> bool:
        """
        Tell whether robot ``rank`` is there: a participant reads its downlink, writes uplink.

        Where the bus can tell (``Bus.participants``); else a matched reader on its downlink.
        A tool that only reads a robot's downlink (``ros2 topic echo /rog/w0/chunks``, a
        recorder) matches the server's writer as the robot does: counted as the robot, it
        held a restored server ``hear_bounds_s``'s patience (20 s) at the end of a run.
        ``writers``: this build's ``_uplink_writers``, when the caller asks for several
        robots at once (False: asked here).
        """
        participants = getattr(self.bus, 'participants', None)
        readers = None if participants is None else [
            participants(t, writer=False) for t in worker_inbox(rank)]
        if writers is False and readers is not None:
            writers = self._uplink_writers(other_builds=False)
        if readers is None or writers is None or any(p is None for p in readers):
            return any(self.bus.matched(t) for t in worker_inbox(rank))
        # (a participant with a reader of another build there is of that build: its readers
        # of the messages that kept their hash are not this build's robot)
        foreign_readers = getattr(self.bus, 'foreign_readers', None)
        others = set() if foreign_readers is None else {
            p for t in worker_inbox(rank) for p in foreign_readers(t)}
        return any((p - others) & writers for p in readers)

    def _robots_to_wait_for(self) -> list:
        """
        Return the ranks whose endpoints ``activate`` waits for: all, but a restored run's.

        A server restored from a checkpoint taken before a stop order left (every stop
        order is) waited for every robot, and a robot told to stop had left: the server
        gave up at ``startup_timeout`` and the robots still training waited for it in vain
        (Rog's engines too, whose orders leave with the final model). It waits for the
        robots not told to stop (none: it writes the results and leaves, answering any
        robot that speaks with its stop order).

        Nor for a Rog robot done and owed its final model (``ServerEngine.stopped``, its
        order not sent: a checkpoint older than the stop orders, such as the final model's):
        one that took the model and left held the server at activate until
        ``startup_timeout`` (exit 1, no results). The engine sends the model it owes at
        once, again while unacknowledged, and gives up a robot gone after
        ``ps_final.FINAL_PATIENCE_S`` (60 s, ``final_model_missed``); one still there gets it.
        """
        if self.hooks.restored is None:
            return list(range(self.args.workers))
        done = stops_sent(self.engine)
        stopped = getattr(self.engine, 'stopped', None)     # (Rog's: owed the model too)
        if stopped is not None:
            done = [bool(a) or bool(b) for a, b in zip(done or stopped, stopped)]
        return [r for r in range(self.args.workers) if r >= len(done) or not done[r]]

    def spin(self) -> None:
        """Serve until every worker has been told to stop, or a shutdown is requested."""
        while self.spin_once():
            pass

    def spin_once(self) -> bool:
        """
        One turn: apply lifecycle requests, then serve; False when the loop should end.

        ``inactive`` (paused) keeps serving the protocol, so no worker times out, but skips
        the evaluations.
        """
        if self.engine.finished:
            return False
        for transition in self.requests.take():
            self.life.request(transition)
        if self.life.finished:
            return False
        self.driver.step()
        self._look_for_incompatible(range(self.args.workers))
        self.diagnostics.maybe_publish()
        if self.life.training and self._mean_iteration() >= self._next_eval:
            self._evaluate()
        if self.evaluator.pending:
            self._collect()
        return True

    def finish(self) -> dict:
        """Evaluate a last time, let the workers leave, write the metrics; the summary."""
        if self._finished_before:
            return {}          # (a rewrite would replace the run's results with a restart's)
        end = time.monotonic()
        # (a robot given up as another build's and heard since, within the last look's half
        # second: a push robot of this fleet come after the budget was spent, sent its stop
        # order at once; summary.json named it as of another build, to be upgraded)
        self._next_incompatible_look = 0.0
        self._look_for_incompatible(range(self.args.workers), now=end)
        if self.engine.finished:
            self._hear_the_robots_told_to_stop()
            self._wait_for_workers_to_leave()
            # After the workers left: the acks of late pulls that arrive while they leave
            # still change the consensus, and the run's last evaluation must be of the model
            # it leaves in model.pt (measured: 0.8390 in the file against 0.8381 evaluated).
            last = self._last_evaluated
            if last is None or not torch.equal(last, self.engine.consensus_model()):
                self._evaluate(now=end)
        self._collect(wait_s=EVAL_DRAIN_S if self.engine.finished else LEAVE_TIMEOUT_S)
        self.evaluator.close()
        saved = self._save_model()
        summary = self._write(end)
        if saved:      # (results on disk: a server started again on this state leaves them)
            self.hooks.checkpoint_results_written()
        return summary

    def hear_bounds_s(self) -> tuple:
        """
        Return (discovery, patience) seconds of ``_hear_the_robots_told_to_stop``.

        Discovery: the transfer lease (``CYCLONEDDS_URI``'s, 10 s at least), within which a
        new participant matches a robot still there (SPDP every 2 to 4 s in our configs).
        Patience: ``HEAR_LEASES`` leases, or poke intervals if longer (20 s by default), in
        which a robot matched and waiting pokes at least once (every 4 END timeouts, 8 s).
        """
        e = self.engine
        end_s = getattr(e, 'end_timeout_s', None) or getattr(
            getattr(e, 'transfers', None), 'end_timeout_s', 2.0)
        lease = transfer_limits()['lease_s']
        patience = HEAR_LEASES * max(lease, POKE_END_TIMEOUTS * float(end_s))
        return lease * HEAR_SCALE, patience * HEAR_SCALE

    def _hear_the_robots_told_to_stop(self) -> None:
        """
        Serve until each robot told to stop before the crash stopped or left (a restored server).

        Why: its checkpoint (taken before each stop order leaves) cannot tell a robot that
        took its order and left from one whose order the crash lost, which waits for it,
        poking. The restored server waited for none and left ``LEAVE_TIMEOUT_S`` after its
        start, before that robot was matched or had poked (every 8 s): the robot waited
        for its own ``server_timeout`` (120 s) and gave up. It now serves until each such
        robot says it stopped (its status), or was heard (its poke is answered with the stop
        order: ``ServerAdapter._after_stop``, ``ServerEngine._answer_stopped``) and has no
        reader on its downlink any more (it left), for the patience of ``hear_bounds_s`` at
        most (20 s by default) from its start; after the discovery bound (10 s) as soon as
        none of them is matched on its downlink (gone). A robot heard and still there is
        waited for: the answer to its poke may be lost again (Rog's engines send it once a
        poke), and ``_wait_for_workers_to_leave`` serves ``LEAVE_TIMEOUT_S`` (5 s) only, less
        than its next poke (8 s).
        """
        if not self._told_before or self._activated_at is None:
            return
        discovery, patience = self.hear_bounds_s()
        start = self._activated_at
        while True:
            now = time.monotonic()
            waiting = self._told_before                  # (statuses take robots out)
            if (not waiting or now >= start + patience
                    or self.requests.shutdown_requested):
                break
            writers = self._uplink_writers(other_builds=False)   # (once a step)
            there = {r for r in waiting if self._robot_there(r, writers)}
            if not there and (now >= start + discovery or waiting <= self.hooks.heard):
                break
            self.driver.step(0.02)
        if waiting:
            self.log.info(f'robots {sorted(waiting)} told to stop before this server restarted '
                          f'did not say they stopped in {time.monotonic() - start:.0f} s: '
                          f'taken as gone')

    def _wait_for_workers_to_leave(self) -> None:
        """
        Serve until no worker writes to the uplink any more, for up to ``LEAVE_TIMEOUT_S``.

        The stopped workers may still ack the last transfers; they leave by closing their
        bus. Their uplink writers are the count, as at the start: a tool still reading a
        worker's downlink (``ros2 topic echo /rog/w0/chunks``) would otherwise hold the
        server here for the whole bound although every worker has left.

        A push system's server serves on past that bound while a robot is owed its stop
        order (``ServerAdapter.stops_owed``: it has not said it stopped and still speaks),
        for up to ``push_systems.STOP_PATIENCE_S``: each robot is sent its stop order once,
        and one whose stop was lost waited ``server_timeout`` (120 s) for a server gone,
        then gave up. The server answers its pokes with the stop order again.
        """
        start = time.monotonic()
        deadline = start + LEAVE_TIMEOUT_S
        owed = getattr(self.engine, 'stops_owed', None)       # (push systems only)
        uplink = server_inbox()
        while any(self.bus.matched(t) for t in uplink):
            now = time.monotonic()
            if now >= deadline and (owed is None or now >= start + push_systems.STOP_PATIENCE_S
                                    or not owed(self.driver.clock())):
                break
            self.driver.step(0.02)

    def _save_model(self) -> bool:
        """Write the trained model to ``OUT/model.pt``; True if it was written."""
        try:
            self.eval_w.copy_(self.engine.consensus_model())   # the model's parameters
            size = save_state_dict(os.path.join(self.args.out, MODEL_FILE), self.training.model)
        except (OSError, RuntimeError) as exc:   # the metrics are still worth writing
            self.log.warning(f'could not write the trained model: {exc}')
            return False
        self.recorder.extra['model_file'] = MODEL_FILE
        self.log.info(f'trained model: {os.path.join(self.args.out, MODEL_FILE)} '
                      f'({size / 1e6:.1f} MB)')
        return True

    def cleanup(self) -> None:
        """Lifecycle ``cleanup`` (inactive -> unconfigured): release the bus and the engine."""
        self.life.trigger('cleanup')
        self._let_go()
        self.state_hold.release()      # (configure takes it again)

    def _let_go(self, failed: bool = False) -> None:
        """
        Let go of what configure took, the state file aside, in reverse order (idempotent).

        ``failed``: of a configure that failed after making its hooks, whose chaos ledger is
        closed too (a cleaned-up run's hooks, kept by a configure again that failed before
        making its own, keep their ledger for shutdown's final report).

        A cleanup's, and a failed configure's: one that failed after opening the bus (a
        corrupt checkpoint, an earlier run's results that cannot be moved) left it open, with
        the evaluation thread, and the configure asked again opened a second participant
        (or set of rclpy endpoints) beside it.
        """
        hooks, bus = getattr(self, 'hooks', None), self.bus
        evaluator = getattr(self, 'evaluator', None)
        self.bus, self.engine = None, None
        ledger = getattr(hooks, 'ledger', None) if failed else None
        if ledger is not None:     # (a cleaned-up node's: its final report, at shutdown)
            hooks.ledger = None       # (shutdown writes no final report of an unrun engine)
        let_go_in_turn(self.log, [('the chaos ledger', ledger), ('the bus', bus),
                                  ('the evaluation thread', evaluator)])

    def shutdown(self) -> None:
        """
        Release the bus and the state file. Idempotent.

        Both are let go though the chaos ledger's final report fails (its error is raised
        after): the bus stayed open and the state file held, until the process ended.
        """
        self.life.request('shutdown')
        try:
            if getattr(self, 'evaluator', None) is not None:
                self.evaluator.close()
            if getattr(self, 'hooks', None) is not None:
                self.hooks.close(self.reject_counts(), getattr(self.bus, 'injected', None))
        finally:
            bus, self.bus = self.bus, None
            try:
                if bus is not None:
                    bus.close()
            finally:
                self.state_hold.release()

    # ------------------------------------------------------------------ metrics
    def _run_record(self) -> dict:
        """Return what a checkpoint keeps of the run's record (``ServerHooks``)."""
        out = getattr(self.args, 'out', None)
        return {'record': self.recorder.state(), **clocks.mono_stamp(),
                'elapsed_s': time.monotonic() - self.t0 if self.t0 is not None else 0.0,
                'evaluations': self.evaluations,
                # (evaluations that raised: no timeseries row, so not in ``record``; until
                # 2026-12-08 a restored run's summary.json lost those before the checkpoint)
                'evaluation_errors': self.evaluation_errors,
                'first_evaluation_error': self.first_evaluation_error,
                'last_evaluation_errors': list(self.last_evaluation_errors),
                'out': os.path.abspath(out) if out else None}   # (read by rog fleet)

    def _resume_record(self, saved) -> None:
        """
        Go on with the run record of the checkpoint this server restored (if it has one).

        The run's clock goes on from the checkpoint's time plus the time the server was away
        (``clocks.seconds_since``: the boot clock within one boot, the wall clock across a
        reboot unless it stepped), so a crash costs the run its downtime, as it would a user.
        A Rog, BSP, SSP or FLOWN server's evaluations between the checkpoint and the crash are
        lost with the model they saw; a push server's are journaled with the inputs that
        made that model (``_collect``) and recorded at activate (``_record_replayed``).
        """
        if saved is None:
            return
        try:
            elapsed, evaluations = float(saved['elapsed_s']), int(saved['evaluations'])
            away, how = clocks.seconds_since(saved)
            self.recorder.load_state(saved['record'])
        except (KeyError, TypeError, ValueError) as err:
            self.log.warning(f"the checkpoint's run record is not used ({err}): "
                             'timeseries.csv and events.csv start at this restart')
            return
        if away is None:
            self.log.warning(f"the time this server was away is unknown ({how}); the run's "
                             'clock goes on from its checkpoint, without the downtime')
            away = 0.0
        self.evaluations = evaluations
        try:
            # (malformed, they alone are dropped: the rows and events are the run's record)
            (self.evaluation_errors, self.first_evaluation_error,
             self.last_evaluation_errors) = _evaluation_errors(saved)
        except (TypeError, ValueError) as err:
            self.log.warning(f"the checkpoint's count of failed evaluations is not used "
                             f'({err}): summary.json counts those since this restart only')
        self._resumed = (elapsed + away, away)

    def _progress_iteration(self) -> int:
        """
        Return the fleet's iteration for the live line: the slowest robot's in the check.

        A robot out (its link, absent, let go when frozen for good) stays where it stopped:
        with it counted, ``rog fleet``'s line stood still while the others trained on and
        closed at "it 254/3000" on a run that had ended. The minimum of all while none counts.
        """
        e = self.engine
        active = getattr(e, 'active', None)
        counted = [int(c) for r, c in enumerate(e.clock) if active is None or bool(active[r])]
        return min(counted or [int(c) for c in e.clock])

    def _mean_iteration(self) -> float:
        return sum(self.engine.clock) / len(self.engine.clock)

    def _evaluate(self, now=None) -> None:
        """Snapshot the consensus model now; the evaluator evaluates it (``_collect``)."""
        t = time.perf_counter()
        self._keep_up()
        now = time.monotonic() if now is None else now
        iteration = self._mean_iteration()
        self._last_evaluated = self.engine.consensus_model()    # a new tensor each time
        info = (now - self.t0, iteration, self.recorder.counters())
        submitted = getattr(self.engine, 'journal_submitted', None)
        if submitted is not None:      # (a push server's: its row owed until journaled)
            submitted({'time_s': info[0], 'iteration': info[1], 'counters': info[2]},
                      self._last_evaluated)
        self.evaluator.submit(self._last_evaluated, info)
        every = max(1, self.args.eval_every)
        self._next_eval = (int(iteration) // every + 1) * every
        self.eval_loop_s += time.perf_counter() - t

    def _keep_up(self) -> None:
        """
        Wait for the oldest evaluations while ``EVAL_PENDING_MAX`` are pending.

        Why: an evaluator slower than ``--eval-every``'s interval (a loaded machine) queued
        without bound, each evaluation with a model snapshot in memory, and each of a push
        server's checkpoints saved every one queued (``owed_evaluations``): memory and
        checkpoint time grew with the run. Now the loop waits as a foreground evaluation
        would, taking its snapshot after (the same model: no push is applied meanwhile);
        a run whose evaluator keeps up never waits, its evaluation points unchanged. An
        evaluation that does not end within ``EVAL_PENDING_WAIT_S`` (a hung workload) is
        not waited for again until one ends: the loop serves on, queueing as before. A
        shutdown request (Ctrl-C) ends the wait within ``EVAL_WAIT_SLICE_S``, left for the
        loop to apply: waited through, ``rog fleet``'s SIGTERM 10 s later insisted
        (``signals.INSIST_AFTER_S``) and the server left without its summary and model.
        """
        if self.evaluator.pending < EVAL_PENDING_MAX or self._evaluator_stuck:
            return
        deadline = time.monotonic() + EVAL_PENDING_WAIT_S
        while self.evaluator.pending >= EVAL_PENDING_MAX:
            left = deadline - time.monotonic()
            if self.requests.shutdown_requested:
                return
            if left <= 0:
                break
            self._collect(wait_s=min(left, EVAL_WAIT_SLICE_S), leave=EVAL_PENDING_MAX - 1)
        if self.evaluator.pending >= EVAL_PENDING_MAX:
            self._evaluator_stuck = True
            self.log.warning(f'no evaluation ended in {EVAL_PENDING_WAIT_S:g} s, '
                             f'{self.evaluator.pending} pending: the server serves on and '
                             'queues the next evaluations until one ends')

    def _collect(self, wait_s: float = 0.0, leave: int = 0) -> None:
        """
        Record and publish the evaluations that are done (in order).

        A push server with a journal journals each row first (``journal_evaluation``): the
        journal restores the state past the checkpoint that row measured, and the row, in
        the run record only until the next checkpoint, was lost with a crash. A Rog, BSP,
        SSP or FLOWN server restores its checkpoint alone: the rows after it measured a
        state the restore loses too (the run trains those iterations again and evaluates
        them anew), so its checkpoint's rows are the run's, each once.
        """
        journal = getattr(self.engine, 'journal_evaluation', None)
        for (since_t0, iteration, counters), metrics in self.evaluator.collect(wait_s, leave):
            t = time.perf_counter()
            self._evaluator_stuck = False
            if isinstance(metrics, Exception):
                text = ' '.join(f'{type(metrics).__name__}: {metrics}'.split())
                self.log.error(f'evaluation at iteration {iteration:g} failed: {metrics!r}')
                row = {'time_s': since_t0, 'iteration': iteration, 'error': text[:300]}
            else:
                row = {'time_s': since_t0, 'iteration': iteration, 'counters': counters,
                       'samples': metrics.get('samples'),
                       'metrics': {k: float(v) for k, v in metrics.items()
                                   if k in ('accuracy', 'loss')}}
            if journal is not None:
                journal(row)                  # (on disk before the run record has it)
            self._record_evaluation(row, publish=True)
            self.eval_loop_s += time.perf_counter() - t

    def _record_evaluation(self, row: dict, publish: bool = False) -> None:
        """Record one evaluation's ``row`` (``_collect``'s, or a journal's at a restore)."""
        if row.get('error') is not None:
            self.evaluation_errors += 1
            text = f'at iteration {row["iteration"]:g}: {row["error"]}'
            if self.first_evaluation_error is None:
                self.first_evaluation_error = text
            self.last_evaluation_errors = (self.last_evaluation_errors + [text])[
                -EVAL_ERRORS_KEPT:]
            return
        if row.get('samples') is not None:
            self.eval_samples = row['samples']
        metrics = dict(row['metrics'])
        self.recorder.on_eval(row['time_s'], row['iteration'], metrics, dict(row['counters']))
        self.last_metrics = metrics
        self.evaluations += 1
        if publish:
            self._publish_eval(metrics)

    def _publish_eval(self, metrics: dict) -> None:
        e = self.engine
        if self.bus is not None:
            self.bus.publish(self.status_topic, TrainStatus(
                node=SERVER, stamp=time.time(), iteration=self._progress_iteration(),
                loss=metrics.get('loss', float('nan')),
                accuracy=metrics.get('accuracy', float('nan')), stall_s=sum(e.stall_time),
                bytes_up=e.bytes_up, bytes_down=e.bytes_down, triggers=sum(e.triggers),
                state=self.life.state, start_model=self.training.fingerprint,
                incarnation=getattr(e, 'incarnation', None) or self.run_id))

    def _on_log(self, now: float, log) -> None:
        self.recorder.on_log(now - (self.t0 or now), SERVER, log)
        say_event(self.log, log)
        self.reject_notes.on_log(log, self.log)

    def _status_bound(self) -> int | None:
        """
        Return the highest iteration a worker's status may say (None: no budget, no bound).

        The engine's own clock bound (the budget and its slack) where it has one; a push
        system (AdaComp, GSP) caps the fleet's pushes at the budget times the workers, which
        one fast worker may nearly all make.
        """
        bound = getattr(self.engine, 'max_clock', None)
        if bound is not None:
            return int(bound)
        budget = self.args.iterations
        return None if budget is None else int(budget) * int(self.args.workers) + 16

    def _on_status(self, msg: TrainStatus) -> None:
        if 0 <= msg.node < self.args.workers:
            problem = train_status_problem(msg, self._status_bound())
            if problem is not None:       # it would go into summary.json: dropped, said once
                self.bad_statuses += 1
                self.status_notes.on_log(Log('reject', 1.0, msg.node, {
                    'error': f'a TrainStatus with {problem}'}), self.log)
                return
            self.status[msg.node] = msg
            left = getattr(self.engine, 'robot_left', None)       # (push systems only)
            if left is not None and _says_stopped(msg.state):
                left(msg.node)
            alive = getattr(self.engine, 'robot_alive', None)     # (push systems only)
            if alive is not None and not _says_stopped(msg.state):
                alive(msg.node, int(msg.incarnation), self.driver.clock())
            if _says_stopped(msg.state):           # (a restored server waits for it no more)
                self._told_before.discard(msg.node)
            if msg.start_model and msg.start_model != self.training.fingerprint and \
                    msg.schema_version == TRAIN_STATUS_SCHEMA:
                self._started_apart(msg)

    def _started_apart(self, msg: TrainStatus) -> None:
        """
        Send our model to a worker that started from other weights (once per run of it).

        It would otherwise add every update to its own copy and train apart all run long.
        The engines of the reference push systems cannot send a model: they only say so.
        """
        known = getattr(self.engine, 'worker_inc', None)
        if known is not None and int(msg.incarnation) != int(known[msg.node]):
            # not the run whose messages the engine takes (yet): a status of an older run, or
            # one no run of that robot sent, would make us send whole models on its word
            return
        if self._resynced.get(msg.node) == msg.incarnation:
            return
        self._resynced[msg.node] = msg.incarnation        # (one entry per robot)
        info = {'fingerprint': msg.start_model, 'server': self.training.fingerprint}
        self.recorder.extra.setdefault('started_apart', {})[str(msg.node)] = msg.start_model
        resync = getattr(self.engine, 'resync', None)
        actions = (resync(msg.node, info) if resync is not None
                   else [Log('start_mismatch', 1.0, msg.node, {**info, 'resync': 'unsupported'})])
        self.driver.handle(actions, self.driver.clock())

    def _on_link_stats(self, msg: LinkStats) -> None:
        """Hand a worker robot's link report to FLOWN's scheduler (the server's own: not)."""
        if 0 <= msg.node < self.args.workers:
            now = self.driver.clock()
            actions = self.driver.deliver(msg, now)   # (none today: no publishing in a poll)
            if actions:
                self.driver.handle(actions, now)

    def _write(self, end: float) -> dict:
        rec, e = self.recorder, self.engine
        rec.end_time_s = end - (self.t0 or end)
        for r in range(self.args.workers):
            st = self.status.get(r)
            rec.compute_s[r] = st.compute_s if st is not None else 0.0
            rec.iterations[r] = max(st.iteration if st is not None else 0, e.clock[r])
        rec.extra.update({
            'driver': 'fleet',
            'bus': type(getattr(self.bus, 'inner', self.bus)).__name__ if self.bus else '',
            'authenticated': hasattr(self.bus, 'verifier'),
            'completed': bool(e.finished), 'iteration_budget': self.args.iterations,
            'evaluations': self.evaluations,
            'evaluation_errors': self.evaluation_errors,
            **({'evaluation_error': self.first_evaluation_error,
                'evaluation_errors_last': list(self.last_evaluation_errors)}
               if self.first_evaluation_error else {}),
            'eval_samples': self.eval_samples,
            'eval_busy_s': self.evaluator.busy_s, 'eval_max_s': self.evaluator.max_s,
            'eval_loop_s': self.eval_loop_s, 'eval_in_background': self.background_eval,
            'rejects': e.rejects + (self.bus.rejects if self.bus else 0)
            + self.driver.engine_errors + self.bad_statuses,
            'rejects_by_reason': self.reject_counts(),
            'trace_scale': self.args.trace_scale, 'stall_s_per_worker': list(e.stall_time),
            'triggers_per_worker': list(e.triggers),
            'outage_suspensions': e.outage_suspensions, 'weighted_pushes': e.weighted_pushes,
            'too_slow_suspensions': getattr(e, 'too_slow_suspensions', 0),
            **slack_summary(getattr(e, 'slack', None)),   # push systems have none
            'rescaled_pushes': e.rescaled_pushes,
            'late_pushes': e.late_pushes, 'late_rows': e.late_rows,
            'late_pulls': e.late_pulls, 'late_pull_rows': e.late_pull_rows,
            # fault handling (docs/faults.md): messages of replaced runs, served again, revived
            'superseded': getattr(e, 'superseded', 0), 'repairs': getattr(e, 'repairs', 0),
            'pull_repeats': getattr(e, 'pull_repeats', 0),
            'worker_revivals': getattr(e, 'revivals', 0),
            'duplicate_ranks': sorted(getattr(e, 'duplicate_ranks', ())),
            'worker_status_received': sorted(self.status),
            # robots that left holding model.pt's model, and those stopped without it
            'final_model_delivered': getattr(e, 'final_delivered', 0),
            'final_model_missed': getattr(e, 'final_missed', 0),
            # robots out and silent when the others had finished, stopped so the run could end
            'workers_let_go': getattr(e, 'let_go', 0),
            # robots given up as running an incompatible rog_ros (another message build)
            'workers_incompatible': sorted(self.incompatible.given_up),
            # when the results were written (this host's wall clock, not the file's time,
            # which a network file system stamps with its own clock): rog fleet --netns
            # judges a tc failing at the end by it (fleet.results_complete_at)
            'results_written_at': time.time(),
            # (only when given, as rog sim's: a report keeps runs apart that record other
            # settings, and fleets made before this recorded none)
            **({'workload_options': dict(self.training.options)}
               if getattr(self.training, 'options', None) else {}),
        })
        if hasattr(e, 'stats'):     # a push system's own figures (bytes per push, staleness)
            rec.extra.update(e.stats())
        if getattr(e, 'slots', None) is not None:   # FLOWN: the links its last grants saw
            rec.extra['flown_link_mbps'] = [est / 1e6 if est > 0 else None
                                            for est in e.link_estimate_bps]
        if not e.finished:      # written from what exists, but not a finished run (DESIGN 8)
            rec.extra['error'] = 'interrupted: training did not complete'
        return rec.write(self.args.out)
