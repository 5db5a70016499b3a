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
Node hooks: durable state, the chaos ledger and fault injection around a node's engine and bus.

Nothing here changes the protocol: :class:`WorkerHooks` / :class:`ServerHooks` stand between
the :class:`~rog_ros.nodes.driver.EngineDriver` and the engine (every call is forwarded
unchanged) and

* save the engine's durable state when :mod:`rog_ros.nodes.durable` says so, restore it on
  start (server: under the new incarnation the engine was built with);
* with ``--chaos-ledger DIR`` (hidden; ``$ROG_CHAOS_LEDGER``), write the independent ledger of
  :mod:`rog_ros.nodes.chaos_ledger` from what they observe of the engine's buffers around each
  call: the worker's residual (what entered with a computation, what left with a commit), the
  server's reference model (what each push applied). The state is saved *before* the ledger
  lines of an event are appended and carries them, so after a crash the ledger is never ahead
  of the state, and a restarted worker re-appends what the crash cut off.

:class:`FaultyBus` (hidden ``--chaos-faults loss=P,dup=P,reorder=P,seed=S``;
``$ROG_CHAOS_FAULTS``) drops, duplicates and reorders the node's outgoing chunks and acks:
seeded, counted, for `rog chaos`'s loss-dup-reorder scenario.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

from rog_ros.atomic import atomic_write_text
from rog_ros.nodes import chaos_ledger as lg
from rog_ros.nodes import clocks, durable
from rog_ros.nodes.state_dir import SERVER_STATE_FILE, worker_state_file
from rog_ros.protocol.actions import Log, SaveState, Stopped
from rog_ros.protocol.messages import RowChunk
import torch

LEDGER_ENV = 'ROG_CHAOS_LEDGER'
FAULTS_ENV = 'ROG_CHAOS_FAULTS'
FAULT_TYPES = ('RowChunk', 'TransferAck')
EVENTS = ('server_restart', 'resend_after_server_restart', 'recover_push', 'recovered_push',
          'undurable_overflow', 'join')
"""Worker engine Logs copied into the ledger (diagnostics of restarts)."""


def add_chaos_args(parser: argparse.ArgumentParser) -> None:
    """Add the hidden options of `rog chaos` (defaults from the environment)."""
    parser.add_argument('--chaos-ledger', default=os.environ.get(LEDGER_ENV) or None,
                        help=argparse.SUPPRESS)
    parser.add_argument('--chaos-faults', default=os.environ.get(FAULTS_ENV) or None,
                        help=argparse.SUPPRESS)


def parse_faults(spec: str) -> dict:
    """``'loss=0.05,dup=0.05,reorder=0.1,seed=3'`` -> dict; ValueError names a bad item."""
    out = {'loss': 0.0, 'dup': 0.0, 'reorder': 0.0, 'seed': 0}
    for item in [s.strip() for s in (spec or '').split(',') if s.strip()]:
        key, _, value = item.partition('=')
        if key not in out:
            raise ValueError(f'--chaos-faults: unknown item {key!r} (loss, dup, reorder, seed)')
        try:
            out[key] = int(value) if key == 'seed' else float(value)
        except ValueError:
            raise ValueError(f'--chaos-faults: {item!r} is not a number') from None
        if key != 'seed' and not 0.0 <= out[key] < 1.0:
            raise ValueError(f'--chaos-faults: {key} must be in [0, 1)')
    return out


class FaultyBus:
    """
    A bus whose outgoing chunks and acks are dropped, duplicated or held back (reordered).

    A held message leaves after the next one (or at the next poll), so it arrives out of
    order. Every other call goes to the wrapped bus unchanged.
    """

    def __init__(self, inner, loss=0.0, dup=0.0, reorder=0.0, seed=0, salt=0):
        self.inner = inner
        self.loss, self.dup, self.reorder = loss, dup, reorder
        self.rng = random.Random(1_000_003 * seed + salt)
        self.held = []
        self.injected = {'dropped': 0, 'duplicated': 0, 'reordered': 0}

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def publish(self, topic: str, msg) -> None:
        if msg.TYPE not in FAULT_TYPES:
            self.inner.publish(topic, msg)
            return
        if self.rng.random() < self.loss:
            self.injected['dropped'] += 1
            return
        if self.rng.random() < self.reorder:
            self.injected['reordered'] += 1
            self.held.append((topic, msg))
            return
        self.inner.publish(topic, msg)
        if self.rng.random() < self.dup:
            self.injected['duplicated'] += 1
            self.inner.publish(topic, msg)
        self._release()

    def _release(self) -> None:
        held, self.held = self.held, []
        for topic, msg in held:
            self.inner.publish(topic, msg)

    def poll(self, timeout_s: float = 0.0) -> list:
        self._release()
        return self.inner.poll(timeout_s)

    def close(self) -> None:
        self.held = []
        self.inner.close()


def maybe_faulty(bus, args, salt: int = 0):
    """Wrap ``bus`` in a FaultyBus when ``--chaos-faults`` asks for faults."""
    spec = getattr(args, 'chaos_faults', None)
    if not spec:
        return bus
    f = parse_faults(spec)
    return FaultyBus(bus, f['loss'], f['dup'], f['reorder'], f['seed'], salt)


def _first_line(err) -> str:
    """Return the first line of an error's text, cut to 160 characters (for a one-line error)."""
    return (str(err).strip().splitlines() or [''])[0][:160]


def _reject_reason(log: Log) -> str:
    info = log.info or {}
    reason = info.get('reason')
    if reason:
        return str(reason)
    return 'engine_error' if info.get('where') == 'engine' else 'invalid'


class _Ledger:
    """Append-only ledger file; lines of one event wait in ``pending`` until flushed."""

    def __init__(self, path: str, run: int):
        self.path, self.run = path, run
        self.seq = 0
        self.pending = []
        self._fh = open(path, 'a', encoding='utf-8')

    def add(self, kind: str, **fields) -> None:
        # t: the wall clock, to read beside the logs; mono: CLOCK_MONOTONIC (one clock for
        # every process of a host, and no NTP step), what a scenario times windows with
        self.pending.append(lg.line(kind, run=self.run, seq=self.seq,
                                    t=round(time.time(), 4), mono=round(time.monotonic(), 4),
                                    **fields))
        self.seq += 1

    def flush(self) -> None:
        if self.pending:
            self._fh.write(''.join(self.pending))
            self._fh.flush()
            self.pending = []

    def close(self) -> None:
        self.flush()
        self._fh.close()


class _Hooks:
    """Forward every engine call; subclasses observe around the ones that matter."""

    def __init__(self, engine):
        self.engine = engine
        self.rejects = {}

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def close_replaced(self) -> None:
        """
        Close the ledger file of hooks a configure again replaced, without a final report.

        Why: a configure after a cleanup builds new hooks, whose ledger appends to the same
        file and whose shutdown writes the rank's one final report (the state the node ends
        in; a later run's records follow in the file, keyed by their own run). A report of
        the replaced run would be overwritten by it, or, were the later run killed, be read
        as its end. Left to the garbage collector, the file stayed open until it ran, then
        was closed with a ResourceWarning.
        """
        ledger, self.ledger = getattr(self, 'ledger', None), None
        if ledger is not None:
            ledger.close()

    def _count_rejects(self, actions) -> None:
        for a in actions:
            if isinstance(a, Log) and a.name == 'reject':
                reason = _reject_reason(a)
                self.rejects[reason] = self.rejects.get(reason, 0) + 1


def _no_worker_state(engine) -> str:
    """
    Say why a worker keeps no state: a push system's robot keeps none, by design.

    ``rog fleet --sync asgd --state-dir DIR`` gives every node the folder; its server keeps
    its checkpoints there, and each robot said only that its engine could not save its
    state, as if something were wrong.
    """
    if getattr(getattr(engine, 'policy', None), 'name', None) == 'push':
        return ("a push system's robot keeps no state (the server's checkpoints are kept; a "
                'robot started again comes back as a new run)')
    return 'this engine cannot save its state'


class WorkerHooks(_Hooks):
    """
    Durable state and ledger around a WorkerEngine.

    Parameters
    ----------
    engine : WorkerEngine
    rank : int
    state_dir, ledger_dir : str or None
        Where ``worker_<rank>.pt`` and ``worker_<rank>.jsonl`` / ``.final.json`` live.

    """

    def __init__(self, engine, rank: int, state_dir=None, ledger_dir=None):
        super().__init__(engine)
        self.rank = rank
        self.run = random.getrandbits(62)
        # the node's own counters, saved with the engine's state (its compute time: a
        # resumed run's summary covers the whole run, not the time since the restart)
        self.node_state = dict
        self.restored_node_state = {}
        self.state = None
        if state_dir and durable.supported(engine):
            self.state = durable.StateFile(os.path.join(state_dir, worker_state_file(rank)))
        elif state_dir:
            print(f'rog_worker {rank}: --state-dir ignored: {_no_worker_state(engine)}',
                  file=sys.stderr, flush=True)
        self.ledger_dir = ledger_dir
        self.ledger = None
        if ledger_dir:
            os.makedirs(ledger_dir, exist_ok=True)
            self.ledger = _Ledger(os.path.join(ledger_dir, f'worker_{rank}.jsonl'), self.run)
            self.proj = lg.projections(engine.residual.numel())
        self.restored = False
        self._read = None       # the state file as finished_before read it, for restore
        # rows of another final model owed when the stop took back the last whole one
        self.kept_final: int | None = None

    # ------------------------------------------------------------------ restart
    def restore(self) -> bool:
        """Load the saved state, if any, and re-append the ledger lines it carries."""
        if self.state is None or not self.state.exists():
            return False
        obj, self._read = self._read or self.state.load(), None
        self.restored_node_state = dict(obj.get('node') or {})
        try:
            self.engine.load_state_dict(obj['engine'])
        except (KeyError, ValueError, TypeError, RuntimeError) as err:
            # (RuntimeError: torch's shape mismatch, e.g. a state of another --sync)
            raise durable.StateError(f'state file {self.state.path} does not fit this worker '
                                     f'({_first_line(err)}); the state of a run with other '
                                     'settings (another --sync, model or fleet size) needs a '
                                     '--state-dir of its own, or move this one away to '
                                     'start afresh') from None
        tail = list(obj.get('ledger_tail', []))
        if self.ledger is not None and tail:
            self.ledger.pending = tail + self.ledger.pending   # the reader drops repeats
            self.ledger.flush()
        self.restored = True
        return True

    def finished_before(self) -> bool:
        """
        Tell whether the saved state is of a robot the server had told to stop (run over).

        Such a robot, started again, would wait for a server that has nothing more to say
        (its own restored run is finished too) until the fleet killed it as failed. A state
        that cannot be read is not finished here: ``restore`` says what is wrong with it.
        """
        if self.state is None or not self.state.exists():
            return False
        try:
            self._read = self._read or self.state.load()    # restore takes it: read once
        except durable.StateError:
            return False
        return bool((self._read.get('node') or {}).get('finished'))

    # ------------------------------------------------------------------ engine calls
    def start(self, now: float) -> list:
        return self._observe(lambda: self.engine.start(now))

    def on_compute_done(self, grad, now: float) -> list:
        return self._observe(lambda: self.engine.on_compute_done(grad, now), computed=True)

    def on_message(self, msg, now: float) -> list:
        return self._observe(lambda: self.engine.on_message(msg, now))

    def on_tick(self, now: float) -> list:
        return self._observe(lambda: self.engine.on_tick(now))

    def _observe(self, call, computed: bool = False) -> list:
        e = self.engine
        before = e.residual.clone() if self.ledger is not None else None
        push = getattr(e, 'push', None)
        key = ((getattr(push, 'incarnation', 0) or getattr(e, 'incarnation', 0),
                push.transfer_id) if push is not None else (0, -1))
        actions = call()
        self._count_rejects(actions)
        # a gradient held while a late push finished is taken by a tick: a computation too
        computed = computed or any(isinstance(a, Log) and a.name == 'held_gradient_taken'
                                   for a in actions)
        event = False
        if before is not None and not torch.equal(before, e.residual):
            event = True
            diff = e.residual.double() - before.double()      # exact: both are fp32
            if computed:
                self.ledger.add('computed', clock=int(e.clock), proj=lg.project(diff, self.proj))
            elif any(isinstance(a, Log) and a.name == 'push_done' for a in actions):
                self.ledger.add('commit', incarnation=int(key[0]), tid=int(key[1]),
                                proj=lg.project(-diff, self.proj))
            else:
                self.ledger.add('uncommit', proj=lg.project(diff, self.proj))
        if self.ledger is not None:
            for a in actions:
                if isinstance(a, Log) and a.name in EVENTS:
                    self.ledger.add('event', name=a.name, value=float(a.value))
                    event = True
        # What the engine asks for (before each push's first END, DESIGN section 10): not at
        # every END (each retransmission every 2 s wrote the whole state again) nor after
        # every commit (a restart commits those rows again from the saved END), with a 37.9 MB
        # model 114 MB fsynced twice an iteration. The chaos ledger saves at each of its events.
        asked = any(isinstance(a, SaveState) for a in actions)
        # told to stop: a node started again on this state has nothing to resume
        finished = any(isinstance(a, Stopped) and not a.failed for a in actions)
        if self.state is not None and (event or asked or finished):
            node = dict(self.node_state(), finished=True) if finished else self.node_state()
            whole = self._whole_final() if getattr(e, 'final_mixed', False) else None
            if whole is not None and finished:
                self.kept_final = e.keep_whole_final(whole)   # stopped: model_out is that
            # (saved at once, here: the engine's own tensors, no model-sized copies)
            engine = e.state_dict(copy=False)
            if whole is not None and not finished:
                engine.update(w=whole, final_mixed=False)     # the saved one stays whole
            self.state.save({'engine': engine, 'node': node,
                             'ledger_tail': list(self.ledger.pending) if self.ledger else []})
        if self.ledger is not None:
            self.ledger.flush()
        return actions

    def _whole_final(self):
        """
        Return the final model the state file holds whole, or None.

        Asked only while the engine's model is part of two final models (``final_mixed``,
        rare: a server restored from before the end sends another one): read from the file
        then, not kept, so no robot holds a second model-sized buffer.
        """
        if not self.state.exists():
            return None
        try:
            saved = self.state.load()['engine']
        except (durable.StateError, KeyError, TypeError):
            return None
        w = saved.get('w')
        if (not saved.get('holds_final') or saved.get('final_mixed')
                or not isinstance(w, torch.Tensor) or w.shape != self.engine.w.shape):
            return None
        return w

    # ------------------------------------------------------------------ stop
    def close(self, node_rejects=None, injected=None) -> None:
        """Write the final report (what the residual still holds) and close the ledger."""
        if self.ledger is None:
            return
        e = self.engine
        push = getattr(e, 'push', None)
        inflight = (lg.push_key(self.rank, getattr(push, 'incarnation', 0)
                                or getattr(e, 'incarnation', 0), push.transfer_id)
                    if push is not None else None)
        rejects = dict(node_rejects or {})
        for k, v in self.rejects.items():
            rejects.setdefault(k, v)
        report = {'rank': self.rank, 'run': self.run, 'clock': int(e.clock),
                  'held': lg.project(e.residual, self.proj).tolist(), 'inflight': inflight,
                  'residual_max': float(e.residual.abs().max()), 'restored': self.restored,
                  'rejects': rejects, 'injected': dict(injected or {}),
                  'state': self.state.stats() if self.state is not None else None}
        self.ledger.close()
        self.ledger = None
        atomic_write_text(os.path.join(self.ledger_dir, f'worker_{self.rank}.final.json'),
                          json.dumps(report, indent=1))


def _progress(engine) -> int:
    """
    Return what ``--checkpoint-every K`` counts on ``engine``: Rog's slowest clock, or pushes.

    A push server (``push_systems.ServerAdapter.durable_progress``) has no common clock: K
    counts the pushes it answered in all.
    """
    pushes = getattr(engine, 'durable_progress', None)
    return int(pushes) if pushes is not None else min(engine.clock)


def stops_sent(engine) -> list:
    """
    Return, per robot, whether ``engine`` sent its stop order (checkpointed before it leaves).

    A push server's ``stop_sent``; Rog's engines' ``stop_orders_sent`` (a robot owed its
    final model is stopped, its order leaves with the model's acknowledgement).
    """
    sent = getattr(engine, 'stop_sent', None)
    if sent is None:
        sent = engine.stop_orders_sent() if hasattr(engine, 'stop_orders_sent') else []
    return [bool(x) for x in sent]


def _plain_log(now: float, log: Log) -> list:
    """Return ``log`` taken at ``now`` in a checkpoint's plain types (``_logs_from``)."""
    return [float(now), str(log.name), float(log.value), int(log.worker),
            json.dumps(log.info, default=_plain_value)]


def _plain_value(obj):
    """Return NumPy's and torch's numbers and arrays as Python's (``json.dumps``)."""
    tolist = getattr(obj, 'tolist', None)
    return tolist() if callable(tolist) else str(obj)


def _logs_from(saved, path: str) -> list:
    """
    Return the ``(now, Log)`` of a checkpoint's ``unrecorded_logs`` (none: older checkpoints).

    Raises ``durable.StateError`` in one line for a damaged list, changing nothing.
    """
    try:
        return [(float(now), Log(str(name), float(value), int(worker), json.loads(info)))
                for now, name, value, worker, info in saved or ()]
    except (TypeError, ValueError) as err:
        raise durable.StateError(f'checkpoint {path}: its unrecorded logs are damaged '
                                 f'({_first_line(err)}); move the state folder away to start '
                                 'afresh') from None


def _on_this_clock(logs: list, record, path: str) -> list:
    """
    Return a checkpoint's unrecorded ``logs`` with their times on this monotonic clock.

    Why: they are the saving process's monotonic times; after a reboot that clock started
    again, and the node placed them anywhere in the run (clamped into its span). The run
    record's stamp (``clocks.mono_stamp``) moves them (``clocks.mono_shift``): kept within
    one boot, by the time away across one; where that is unknown (a stepped wall clock)
    by none, as the run's clock then goes on from the checkpoint without the downtime
    (each log keeps its place in the record). Kept as they are where the record has no
    ``mono_s`` (older checkpoints). A damaged stamp: ``durable.StateError`` in one line,
    nothing changed.
    """
    if not logs or not isinstance(record, dict) or 'mono_s' not in record:
        return logs
    try:
        shift, _ = clocks.mono_shift(record, stepped_away=0.0)
    except ValueError as err:
        raise durable.StateError(f'checkpoint {path}: {_first_line(err)}; move the state '
                                 'folder away to start afresh') from None
    return [(now + shift, log) for now, log in logs]


class ServerHooks(_Hooks):
    """
    Checkpoints and ledger around a ServerEngine.

    Parameters
    ----------
    engine : ServerEngine
    w0 : Tensor
        The fleet's starting model (the ledger reports ``(w0 - w_srv) N / lr``).
    state_dir, ledger_dir : str or None
    checkpoint_every : int
        Checkpoint when the slowest worker's clock reaches the next multiple of this (a push
        system's server: the pushes it answered in all, ``_progress``), and whenever a worker
        was told to stop, before the order is sent.
    run_record : callable or None
        Returns the node's run record (plain types) to keep in every checkpoint; a restore
        leaves it in ``restored_record`` for the node to go on from.

    """

    def __init__(self, engine, w0, state_dir=None, ledger_dir=None, checkpoint_every=10,
                 run_record=None):
        super().__init__(engine)
        self.run_record = run_record
        self.restored_record = None
        self.w0 = w0.detach().clone()
        self.scale = engine.n / engine.lr
        self.every = int(checkpoint_every)
        self.state = None
        if state_dir and durable.supported(engine):
            self.state = durable.StateFile(os.path.join(state_dir, SERVER_STATE_FILE))
        elif state_dir:
            print('rog_server: --state-dir ignored: this engine cannot save its state',
                  file=sys.stderr, flush=True)
        self.checkpoint_id = 0
        self.next_at = self.every
        self.stopped_seen = 0     # workers told to stop, as of the last checkpoint
        self.missed_seen = 0      # robots given up without the final model, as of it
        self.final_seen = False   # the fleet's final model taken, as of the last checkpoint
        self.revived_seen = 0     # push runs taken back (``runs_taken_back``), as of it
        # a push server's journal records torn at this start, in no checkpoint yet (``_observe``)
        self.dropped_unsaved = bool(getattr(getattr(engine, 'journal', None),
                                            'dropped_records', 0))
        self.ledger_dir = ledger_dir
        self.ledger = None
        if ledger_dir:
            os.makedirs(ledger_dir, exist_ok=True)
            path = os.path.join(ledger_dir, 'server.jsonl')
            self._restarted = os.path.exists(path) and os.path.getsize(path) > 0
            self.ledger = _Ledger(path, random.getrandbits(62))
            self.proj = lg.projections(engine.w_srv.numel())
        self.restored = None
        # the logs of the call a checkpoint is taken in (``_observe``), which the node records
        # after it; a restore hands those of its checkpoint to the node (``restored_logs``).
        # A push server's adapter keeps its own (``ServerAdapter._unrecorded``).
        self.keeps_logs = not hasattr(engine, 'replayed_logs')
        self._unrecorded = []
        self.restored_logs = []        # (now, Log) of the checkpoint's call, not in its record
        self.results_written = False   # the node wrote the run's results (``run_done``)
        self.heard = set()             # robots whose message the engine took (``on_message``)
        if self.state is not None and hasattr(engine, 'defer_journal'):
            # a push server's journal records wait for the checkpoint decision (``_observe``)
            engine.defer_journal = True
            journal = getattr(engine, 'journal', None)
            if journal is not None and run_record is not None:
                # a fresh run's journal header keeps the run record at its first record: a
                # crash before the first checkpoint resumes the run's clock and CSVs from it
                journal.header_extra = lambda: {'run_record': run_record()}

    def run_done(self) -> bool:
        """
        Return whether the run is over for good: every stop order sent and results written.

        Every stop order is checkpointed before it leaves, before the node writes the
        results: a server restored from that checkpoint said the run had finished, wrote no
        ``summary.json`` nor ``model.pt``, and ``rog fleet`` refused its state folder. This
        is the checkpoint's ``finished`` (a push server keeps its own flag,
        ``push_systems.ServerAdapter.run_done``).
        """
        done = getattr(self.engine, 'run_done', None)
        if done is not None:
            return bool(done)
        return bool(getattr(self.engine, 'finished', False)) and self.results_written

    def restore(self):
        """
        Load the checkpoint, if any; return its id (None: started fresh).

        A push server's journal replayed with no checkpoint beside it (the server crashed
        before its first: ``ServerAdapter.replayed_without_checkpoint``) is a resume of that
        run too, checkpoint 0: it was taken for a new run, whose node set the earlier
        results aside and started its run record and clock again. Its run record is the one
        the journal's header kept at its first record (``PushJournal.header_extra``).
        """
        if self.state is None or not self.state.exists():
            if self.state is not None and getattr(self.engine, 'replayed_without_checkpoint',
                                                  False):
                self.restored_record = self.engine.journal.header.get('run_record')
                return self._took_up(0)
            if self.ledger is not None and self._restarted:
                self.ledger.add('restore', id=None)   # a fresh start after a crash
                self.ledger.flush()
            return None
        obj = self.state.load()
        logs = _logs_from(obj.get('unrecorded_logs'), self.state.path)   # (first: one line)
        logs = _on_this_clock(logs, obj.get('run_record'), self.state.path)
        try:
            self.engine.load_state_dict(obj['engine'])
        except (KeyError, ValueError, TypeError, RuntimeError) as err:
            # (RuntimeError: torch's shape mismatch, e.g. a checkpoint of another --sync)
            raise durable.StateError(f'checkpoint {self.state.path} does not fit this fleet '
                                     f'({_first_line(err)}); the state of a run with other '
                                     'settings (another --sync, model or fleet size) needs a '
                                     '--state-dir of its own, or move this one away to '
                                     'start afresh') from None
        self.restored_record = obj.get('run_record')
        self.restored_logs = logs
        # (a checkpoint from before the key: its finished run's results were written)
        self.results_written = bool(obj.get('results_written', obj.get('finished', False)))
        return self._took_up(int(obj.get('id', 0)))

    def _took_up(self, checkpoint_id: int) -> int:
        """Go on from the engine as restored, checkpoint ``checkpoint_id``; return it."""
        self.checkpoint_id = checkpoint_id
        self.next_at = (_progress(self.engine) // self.every + 1) * self.every
        self.stopped_seen = sum(stops_sent(self.engine))
        self.missed_seen = int(getattr(self.engine, 'final_missed', 0))
        self.final_seen = getattr(self.engine, 'final_values', None) is not None
        self.revived_seen = int(getattr(self.engine, 'runs_taken_back', 0))
        if self.ledger is not None:
            self.ledger.add('restore', id=self.checkpoint_id)
            self.ledger.flush()
        self.restored = self.checkpoint_id
        return self.checkpoint_id

    def checkpoint(self) -> None:
        """Write a checkpoint now, then confirm it to the engine."""
        self.checkpoint_id += 1
        if self.ledger is not None:   # the marker first: applied records after it are not in
            self.ledger.add('checkpoint', id=self.checkpoint_id)
            self.ledger.flush()
        sd = self.engine.state_dict(copy=False)     # (saved at once, below: no copies)
        # 'finished': for rog fleet, which reads it without torch (state_dir.finished_run)
        obj = {'engine': sd, 'id': self.checkpoint_id, 'finished': self.run_done(),
               'results_written': self.results_written}
        if self.run_record is not None:
            obj['run_record'] = self.run_record()
            if self.keeps_logs and not self.results_written:
                # (written results: the node recorded every log before it wrote them)
                obj['unrecorded_logs'] = [_plain_log(now, log) for now, log in self._unrecorded]
        self.state.save(obj)
        self.dropped_unsaved = False
        self.engine.checkpoint_confirmed(sd['state_id'])

    def on_message(self, msg, now: float) -> list:
        """
        Hand ``msg`` to the engine; note its sender in ``heard`` if the engine took it.

        Why: a restored server whose robots were all told to stop cannot tell a robot that
        left from one whose stop order the crash lost; the node serves until each was heard
        (its poke is answered with the stop order) and left, or the patience ran out. Only
        a message the engine took: not one refused (``rejects``), nor one set aside
        (``superseded``: a retired run's, or a new run's that names another server run),
        which is answered with no stop order.
        """
        e = self.engine
        before = (e.rejects, getattr(e, 'superseded', 0))
        actions = self._observe(lambda: e.on_message(msg, now), msg, now)
        sender = getattr(msg, 'sender', -1)
        if isinstance(sender, int) and sender >= 0 and \
                (e.rejects, getattr(e, 'superseded', 0)) == before:
            self.heard.add(sender)
        return actions

    def on_tick(self, now: float) -> list:
        return self._observe(lambda: self.engine.on_tick(now), None, now)

    def _observe(self, call, msg, now: float) -> list:
        e = self.engine
        watch = self.ledger is not None and isinstance(msg, RowChunk)
        before = e.w_srv.clone() if watch else None
        actions = call()
        # A checkpoint taken below holds the node's run record as it was before this call:
        # the node records this call's logs after it returns. Kept in the checkpoint, a
        # restore from it records them (until 2026-12-07 a Rog, BSP, SSP or FLOWN server
        # restored from it missed them: that push's trigger and stall, a stop order's
        # worker_done, the final model's final_model, ...).
        self._unrecorded = [(float(now), a) for a in actions if isinstance(a, Log)]
        self._count_rejects(actions)
        if watch and not torch.equal(before, e.w_srv):
            diff = (before.double() - e.w_srv.double()) * self.scale
            # a late push of a worker suspended for its link is applied at a weight < 1 on
            # purpose, the others' meanwhile at N / (N - k) (outage-aware RSP); the ledger
            # compares it with weight x committed
            self.ledger.add('applied', rank=int(msg.sender), incarnation=int(msg.incarnation),
                            tid=int(msg.transfer_id), proj=lg.project(diff, self.proj),
                            weight=float(getattr(e, 'last_push_weight', 1.0)))
            self.ledger.flush()
        # Also before a stop order leaves: a worker told to stop never speaks again, so a
        # server restored from an older checkpoint would wait for it for ever. And before the
        # fleet's final model goes out: a server restored from before it took it takes
        # another (the mean of older mirrors: the final model is deferred, e.g. until a robot
        # is suspended as absent, and the acks meanwhile change it), and robots that left
        # with the first would hold another model than model.pt. And after a push run taken
        # back: restored as retired, its pushes were refused for good (not K pushes lost).
        # And after a restore that dropped torn journal records: the restore cut them off the
        # file, so a crash before the next checkpoint lost their count (summary.json's
        # ``journal_records_dropped``), which only a checkpoint keeps. And when a robot given
        # up without its final model is taken back (``final_missed`` down: a robot restarted
        # holding a final model, ``ps_final._missed_restarted``), counted delivered at once or
        # owed the model again (one fewer told to stop, then one more as its stop order
        # leaves): its count of told robots back at the checkpoint's, that stop order left
        # unsaved until 2026-12-08, and a server restored after it counted the robot missed,
        # or, restored before, stopped it again without the model.
        stopped = sum(stops_sent(e))
        missed = int(getattr(e, 'final_missed', 0))
        final = getattr(e, 'final_values', None) is not None
        revived = int(getattr(e, 'runs_taken_back', 0))
        if self.state is not None and (_progress(e) >= self.next_at or
                                       stopped > self.stopped_seen or
                                       missed < self.missed_seen or
                                       final > self.final_seen or
                                       revived > self.revived_seen or
                                       self.dropped_unsaved):
            self.next_at = (_progress(e) // self.every + 1) * self.every
            self.stopped_seen = stopped
            self.missed_seen = missed
            self.final_seen = final
            self.revived_seen = revived
            self.checkpoint()
        self._unrecorded = []
        # A push server's journal: the records of the inputs just taken, unless the checkpoint
        # holds them (one write a push with K = 1, not a record and a checkpoint); before the
        # answer leaves either way.
        write = getattr(e, 'write_journal', None)
        if write is not None:
            write()
        return actions

    def checkpoint_results_written(self) -> bool:
        """
        Checkpoint a finished run once its results are written; True if it did.

        The stop orders' checkpoint still owes the final models, so a server started again
        on it took a finished run for unfinished, waited for robots that had left and
        rewrote the run's results. This one says finished, and a server started on it leaves
        the results alone. It is taken only after ``summary.json`` and ``model.pt`` were
        written: a server that dies before (or could not write them) is restored from the
        stop orders' checkpoint and writes them then.
        """
        if self.state is None or not getattr(self.engine, 'finished', False):
            return False
        self.results_written = True
        if hasattr(self.engine, 'results_written'):     # (a push server's: ``run_done``)
            self.engine.results_written = True
        self.checkpoint()
        return True

    def close(self, node_rejects=None, injected=None) -> None:
        """Write the final report (everything applied, in the workers' units)."""
        if self.ledger is None:
            return
        e = self.engine
        rejects = dict(node_rejects or {})
        for k, v in self.rejects.items():
            rejects.setdefault(k, v)
        report = {'applied': lg.project((self.w0.double() - e.w_srv.double()) * self.scale,
                                        self.proj).tolist(),
                  'n_params': int(e.w_srv.numel()), 'scale': self.scale,
                  'weight_max': max(float(self.w0.abs().max()), float(e.w_srv.abs().max())),
                  'clock': list(e.clock), 'finished': bool(e.finished),
                  'restored_from': self.restored, 'checkpoints': self.checkpoint_id,
                  'rejects': rejects, 'injected': dict(injected or {}),
                  'state': self.state.stats() if self.state is not None else None}
        self.ledger.close()
        self.ledger = None
        atomic_write_text(os.path.join(self.ledger_dir, 'server.final.json'),
                          json.dumps(report, indent=1))
