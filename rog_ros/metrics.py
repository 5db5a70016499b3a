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
RunRecorder: turns engine events into the per-run metrics of specs/rog.md section 11.

Both drivers feed it (the simulator in virtual time, ``rog fleet`` on the wall clock) and both
write the same files: ``summary.json``, ``timeseries.csv`` and ``events.csv`` (who was
suspended, let go, readmitted, given slack, and why: ``rog_ros.protocol.events``; only its
header when nothing happened). Definitions, per worker d:

* compute_d: time spent in forward/backward (and the codec, which runs inside the engines);
* stall_d: time its pull was held by the staleness check (BSP barrier, SSP/RSP threshold);
* comm_d = wall time - compute_d - stall_d: transfers and protocol waiting;
* stall cost = mean_d(stall_d / compute_d); a threshold trigger = one held pull;
* max dip after target (``max_dip_after_target``, see ``dip_after_target``): from the first
  evaluation whose accuracy reaches the target, the largest drop of an evaluation's accuracy
  below the highest accuracy evaluated before it (a fraction: 0.02 = 2 points);
  ``max_dip_after_target_smoothed``: the same over the accuracy smoothed like time to target
  (mean of the last 3 evaluations), which one unlucky evaluation cannot make on its own;
* final accuracy (``final_accuracy``): the last evaluation; ``final_accuracy_tail``: the mean of
  the evaluations in the last quarter of the run's iterations (``tail_accuracy``). Consecutive
  evaluations of one MPCOL run differ by up to 1.6 points (the model moves between them), so a
  comparison of final accuracies within half a point needs the tail mean.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field, fields
import io
import json
import math
import os
from typing import Callable

import numpy as np
from rog_ros.atomic import atomic_write_text as atomic_write
from rog_ros.protocol.events import describe as describe_event


_SAMPLES = ('transfer_s', 'rows_up', 'rows_down', 'late_rows_up', 'late_rows_down',
            'duration_up', 'duration_down', 'round_trips')
"""``RunRecorder`` fields with one sample per transfer (``state`` keeps them as arrays)."""

PREVIOUS_RUN_DIR = 'previous'
"""Sub-directory of a run's output directory holding the run before it (``rog fleet`` run
again into the same ``--out``: ``rog_ros.nodes.run_outputs``); not a run of this one."""

EVENT_COLUMNS = ('time_s', 'robot', 'event', 'value', 'info', 'what')
"""Columns of ``events.csv``: the ``Log``'s name, value and info (JSON), and the sentence."""


@dataclass
class RunRecorder:
    system: str
    n_workers: int
    staleness: int = 0
    trace: str = ''
    seed: int = 0
    workload: str = ''
    target_accuracy: float | None = None
    compute_s: list = field(default_factory=list)
    stall_s: list = field(default_factory=list)
    iterations: list = field(default_factory=list)
    triggers: list = field(default_factory=list)
    transfer_s: list = field(default_factory=list)
    rows_up: list = field(default_factory=list)     # delivered-row fraction per push
    rows_down: list = field(default_factory=list)   # ... per pull
    late_rows_up: list = field(default_factory=list)  # ... per late push (FLAG_LATE)
    late_rows_down: list = field(default_factory=list)  # ... per late pull (FLAG_LATE)
    duration_up: list = field(default_factory=list)  # push: first chunk to final ack, s
    duration_down: list = field(default_factory=list)  # pull: the same
    round_trips: list = field(default_factory=list)  # transfer.round_trip_sample, s
    bytes_up: int = 0
    bytes_down: int = 0
    rows: list = field(default_factory=list)      # timeseries
    time_to_target_s: float | None = None
    iterations_to_target: float | None = None
    end_time_s: float = 0.0
    extra: dict = field(default_factory=dict)
    events: list = field(default_factory=list)    # (time_s, robot, event, value, info, text)
    traffic: Callable[[], tuple] | None = field(default=None, repr=False, compare=False)
    """``() -> (bytes_up, bytes_down)``: the server engine's own counts, which then stand for
    ``bytes_up``/``bytes_down`` (timeseries and summary). A fleet's server never sees the
    workers' ``push_done``, and the ``bytes`` of a Rog engine's ``push_done``/``pull_done`` are
    those of its rate sample, which may leave the first chunk out."""

    def __post_init__(self):
        n = self.n_workers
        self.compute_s = self.compute_s or [0.0] * n
        self.stall_s = self.stall_s or [0.0] * n
        self.iterations = self.iterations or [0] * n
        self.triggers = self.triggers or [0] * n

    # ------------------------------------------------------------------ events
    def on_compute(self, worker: int, seconds: float) -> None:
        self.compute_s[worker] += seconds
        self.iterations[worker] += 1

    def on_log(self, now: float, node: int, log) -> None:
        """Feed every ``Log`` action of every engine (node = rank, or -1 for the server)."""
        name, w = log.name, log.worker
        said = describe_event(log)
        if said is not None:            # membership and policy events: events.csv
            self.events.append((float(now), int(w), name, float(log.value), dict(log.info),
                                said[1]))
        if name == 'trigger' and 0 <= w < self.n_workers:
            self.triggers[w] += 1
        elif name == 'stall_s' and 0 <= w < self.n_workers:
            self.stall_s[w] += float(log.value)
        elif name in ('push_done', 'pull_done'):
            secs = log.info.get('seconds')
            if secs is not None:
                self.transfer_s.append(float(secs))
            nbytes = int(log.info.get('bytes', 0))
            if name == 'push_done':
                self.bytes_up += nbytes
            else:
                self.bytes_down += nbytes
            total = log.info.get('rows_total')
            if log.info.get('late'):
                (self.late_rows_up if name == 'push_done' else self.late_rows_down).append(
                    float(log.value) / float(total or 1))
                return      # rows sent while computing: not an iteration's push or pull
            if total:
                (self.rows_up if name == 'push_done' else self.rows_down).append(
                    float(log.value) / float(total))
            if log.info.get('round_trip') is not None:
                self.round_trips.append(float(log.info['round_trip']))
            if log.info.get('duration') is not None:
                (self.duration_up if name == 'push_done' else self.duration_down).append(
                    float(log.info['duration']))

    def counters(self) -> dict:
        """Return the cumulative counters an evaluation row carries, as they are now."""
        return {'stall_s': sum(self.stall_s), 'triggers': sum(self.triggers),
                'bytes': sum(self.traffic_bytes())}

    def traffic_bytes(self) -> tuple:
        """Return ``(bytes_up, bytes_down)`` so far: the ``traffic`` source's, if there is one."""
        if self.traffic is None:
            return self.bytes_up, self.bytes_down
        up, down = self.traffic()
        return int(up), int(down)

    def on_eval(self, now: float, iteration: float, metrics: dict,
                counters: dict | None = None) -> None:
        """
        Record an evaluation of the shared model at ``now`` (mean iteration ``iteration``).

        ``counters`` (from ``counters()``) are the ones of the moment the evaluated model was
        taken, for an evaluation that finishes later; default: the counters now.
        """
        row = {'time_s': now, 'iteration': iteration, **{k: float(v) for k, v in
                                                         metrics.items()}}
        row.update(self.counters() if counters is None else counters)
        self.rows.append(row)
        acc = metrics.get('accuracy')
        if acc is not None:
            # time-to-target uses the accuracy smoothed over the last 3 evaluations, so one
            # lucky evaluation does not decide it (specs/rog.md 11)
            recent = [r['accuracy'] for r in self.rows[-3:] if r.get('accuracy') is not None]
            acc = sum(recent) / len(recent)
            row['accuracy_smoothed'] = acc
        if (self.time_to_target_s is None and self.target_accuracy is not None
                and acc is not None and acc >= self.target_accuracy):
            self.time_to_target_s = now
            self.iterations_to_target = iteration

    # ------------------------------------------------------------------ restarts
    def state(self) -> dict:
        """
        Return the record so far in plain types (a fleet server's checkpoint keeps it).

        A server restarted from its checkpoint goes on with the same record, so the run's
        ``timeseries.csv`` and ``events.csv`` start where the run started, not at the crash.
        The per-transfer samples, which grow with every transfer of the run, go as float64
        arrays (a checkpoint stores them as one tensor each, not as pickled floats).
        """
        out = {f.name: _plain(getattr(self, f.name)) for f in fields(self)
               if f.name not in _SAMPLES and f.name != 'traffic'}
        out.update({k: np.asarray(getattr(self, k), dtype=np.float64) for k in _SAMPLES})
        return out

    def load_state(self, state: dict) -> None:
        """
        Go on from ``state`` (``state()`` of a record of the same system and fleet size).

        Raises ValueError, changing nothing, for a record of another run.
        """
        if not isinstance(state, dict):
            raise ValueError('run record: not a dict')
        mine = (self.system, self.n_workers, self.workload)
        theirs = (state.get('system'), state.get('n_workers'), state.get('workload'))
        if theirs != mine:
            raise ValueError(f'run record of {theirs} (system, workers, workload), '
                             f'this run is {mine}')
        per_worker = ('compute_s', 'stall_s', 'iterations', 'triggers')
        if any(len(state.get(k) or ()) != self.n_workers for k in per_worker):
            raise ValueError('run record: per-robot lists of another length')
        names = {f.name for f in fields(self)} - {'traffic'}
        samples = {k: np.asarray(state.get(k, ()), dtype=np.float64).reshape(-1).tolist()
                   for k in _SAMPLES}
        for k, v in _plain({k: v for k, v in state.items() if k not in _SAMPLES}).items():
            if k in names:
                setattr(self, k, v)
        for k, v in samples.items():
            setattr(self, k, v)
        self.events = [tuple(e) for e in self.events]

    # ------------------------------------------------------------------ results
    def summary(self) -> dict:
        n = self.n_workers
        wall = self.end_time_s
        iters = max(1, int(np.mean(self.iterations)))
        compute = float(np.mean(self.compute_s))
        stall = float(np.mean(self.stall_s))
        comm = max(0.0, wall - compute - stall)
        cost = [s / c for s, c in zip(self.stall_s, self.compute_s) if c > 0]
        ts = np.asarray(self.transfer_s) if self.transfer_s else np.zeros(1)
        final = self.rows[-1] if self.rows else {}
        dip, dip_at = dip_after_target([r.get('accuracy') for r in self.rows],
                                       self.target_accuracy)
        smooth_dip = dip_after_target([r.get('accuracy_smoothed') for r in self.rows],
                                      self.target_accuracy)[0]
        up, down = self.traffic_bytes()
        return {
            'system': self.system, 'staleness': self.staleness, 'workers': n,
            'workload': self.workload, 'trace': self.trace, 'seed': self.seed,
            'iterations': iters, 'iterations_per_robot': [int(i) for i in self.iterations],
            'sim_time_s': wall,
            'target_accuracy': self.target_accuracy,
            'time_to_target_s': self.time_to_target_s,
            'iterations_to_target': self.iterations_to_target,
            'final_accuracy': final.get('accuracy'),
            'final_accuracy_tail': tail_accuracy(self.rows),
            'final_loss': final.get('loss'),
            'max_dip_after_target': dip,
            'max_dip_at_iteration': (self.rows[dip_at]['iteration']
                                     if dip_at is not None else None),
            'max_dip_after_target_smoothed': smooth_dip,
            'stall_cost': float(np.mean(cost)) if cost else 0.0,
            'threshold_triggers': int(sum(self.triggers)),
            'compute_time_s': compute, 'comm_time_s': comm, 'stall_time_s': stall,
            's_per_iteration': wall / iters,
            's_per_iteration_to_target': per_iteration_to_target(self.time_to_target_s,
                                                                 self.iterations_to_target),
            'compute_s_per_iteration': compute / iters,
            'comm_s_per_iteration': comm / iters,
            'stall_s_per_iteration': stall / iters,
            'network_to_compute_ratio': (comm + stall) / compute if compute > 0 else None,
            'bytes_up': int(up), 'bytes_down': int(down),
            'mean_transfer_s': float(ts.mean()), 'p95_transfer_s': float(np.percentile(ts, 95)),
            # DESIGN 7: delivered rows / M per transfer (None where the engine reports none)
            'delivered_row_fraction_up': float(np.mean(self.rows_up)) if self.rows_up else None,
            'delivered_row_fraction_down': (float(np.mean(self.rows_down))
                                            if self.rows_down else None),
            'late_pushes': len(self.late_rows_up),
            'late_row_fraction_up': (float(np.mean(self.late_rows_up))
                                     if self.late_rows_up else None),
            'late_pulls': len(self.late_rows_down),
            'late_row_fraction_down': (float(np.mean(self.late_rows_down))
                                       if self.late_rows_down else None),
            'mean_push_s': float(np.mean(self.duration_up)) if self.duration_up else None,
            'mean_pull_s': float(np.mean(self.duration_down)) if self.duration_down else None,
            'median_round_trip_s': (float(np.median(self.round_trips))
                                    if self.round_trips else None),
            **self.extra,
        }

    def write(self, out_dir: str) -> dict:
        """
        Write timeseries.csv, events.csv and then summary.json atomically; return the summary.

        The summary goes last because it is what marks a run finished (reuse, reports): a
        process killed between the files leaves no summary beside another run's curves.
        """
        os.makedirs(out_dir, exist_ok=True)
        summary = self.summary()
        # accuracy always has a column (first of the sorted rest, as the rows put it): a run
        # without evaluations wrote a header `rog report` could not tell from another file's
        first = ['time_s', 'iteration', 'accuracy']
        cols = first + sorted({k for r in self.rows for k in r} - set(first))
        lines = [','.join(cols)]
        for r in self.rows:
            lines.append(','.join(_fmt(r.get(c)) for c in cols))
        atomic_write(os.path.join(out_dir, 'timeseries.csv'), '\n'.join(lines) + '\n')
        buf = io.StringIO()
        rows = csv.writer(buf, lineterminator='\n')
        rows.writerow(EVENT_COLUMNS)
        rows.writerows(
            (f'{t:.3f}', w, name, _fmt(v),
             json.dumps(_jsonable(info), sort_keys=True, default=str), text)
            for t, w, name, v, info, text in self.events)
        atomic_write(os.path.join(out_dir, 'events.csv'), buf.getvalue())
        atomic_write(os.path.join(out_dir, 'summary.json'),
                     json.dumps(_jsonable(summary), indent=2) + '\n')
        return summary


def per_iteration_to_target(time_to_target_s, iterations_to_target) -> float | None:
    """
    Return the seconds per iteration up to the target (None where it was not reached).

    The phase that time-to-target measures can be in another regime than the whole run
    (``s_per_iteration``): outdoor holds last tens of seconds, so the first iterations may all
    fall in a good one. Next to the compute time it says whether the times compare networks
    or computations.
    """
    if time_to_target_s is None or not iterations_to_target:
        return None
    return float(time_to_target_s) / float(iterations_to_target)


def tail_accuracy(rows, fraction: float = 0.25) -> float | None:
    """
    Mean accuracy of the evaluations in the last ``fraction`` of the run's iterations.

    ``rows`` are evaluation rows in time order (``iteration``, ``accuracy``); the last one
    closes the window, which reaches back to ``(1 - fraction)`` times its iteration. A run's
    final model is one sample of where its optimiser oscillates; this mean is the level it
    settled at, and it is what two systems' final accuracies should be compared on.
    """
    evals = [(float(r['iteration']), float(r['accuracy'])) for r in rows
             if r.get('accuracy') is not None and math.isfinite(float(r['accuracy']))]
    if not evals:
        return None
    start = (1.0 - fraction) * evals[-1][0]
    return float(np.mean([a for it, a in evals if it >= start]))


def _periodic(rows) -> list:
    """Return a simulated run's periodic evaluations (the last row, the final one, left out)."""
    return [r for r in rows[:-1] if r.get('time_s') is not None]


def accuracy_at_time(rows, t: float) -> float | None:
    """
    Smoothed accuracy of the last periodic evaluation at or before time ``t``.

    ``rows`` are a simulated run's evaluation rows in time order (``time_s``,
    ``accuracy_smoothed``); the last one is the final evaluation, made after the run on the
    whole set, and is left out so that every system is read on the same evaluations. The
    smoothing is the one time to target reads (mean of the last 3 evaluations). None where
    no periodic evaluation is that early.
    """
    before = [r for r in _periodic(rows)
              if r.get('accuracy_smoothed') is not None and float(r['time_s']) <= t]
    return float(before[-1]['accuracy_smoothed']) if before else None


def last_periodic_time(rows) -> float | None:
    """Time of a run's last periodic evaluation (its final one left out), or None."""
    times = [float(r['time_s']) for r in _periodic(rows)]
    return max(times) if times else None


def dip_after_target(accuracy, target) -> tuple:
    """
    Largest accuracy dip after the target is first reached, and where it bottoms out.

    From the first evaluation whose accuracy is at or above ``target``, a dip at evaluation j
    is the highest accuracy of the evaluations from there up to j, minus the accuracy of j; the
    result is the largest one (0.0 when accuracy never falls after reaching the target). Raw
    evaluations, not smoothed: one bad evaluation counts.

    Parameters
    ----------
    accuracy : sequence of float or None
        Accuracy of each evaluation in time order; None (no accuracy) entries are skipped.
    target : float or None
        Target accuracy.

    Returns
    -------
    tuple
        ``(dip, index)``: the dip as a fraction (0.02 = 2 points) and the index in
        ``accuracy`` of the evaluation where it is largest (the first one on ties), or
        ``(None, None)`` when there is no target or no evaluation reaches it.

    """
    if target is None:
        return None, None
    index = np.asarray([i for i, a in enumerate(accuracy) if a is not None and math.isfinite(a)],
                       dtype=np.int64)
    acc = np.asarray([accuracy[i] for i in index], dtype=np.float64)
    reached = np.flatnonzero(acc >= target)
    if reached.size == 0:
        return None, None
    after = acc[reached[0]:]
    drops = np.maximum.accumulate(after) - after
    worst = int(np.argmax(drops))
    return float(drops[worst]), int(index[reached[0] + worst])


def _fmt(v) -> str:
    if v is None:
        return ''
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ''
    return str(v)


def _plain(obj):
    """Copy ``obj``: lists for tuples, Python numbers for NumPy's; non-finite floats kept."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        return obj.item()
    return obj


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    return obj


def read_timeseries(path: str) -> list[dict]:
    """
    Load a timeseries.csv written by ``RunRecorder.write``; empty or missing cells are None.

    A cell that is not a number raises ``ValueError`` naming the file and line (a file cut
    short by a crash ends in missing cells, which read as None).
    """
    rows = []
    with open(path, encoding='utf-8', newline='') as f:
        reader = csv.DictReader(f)
        names = reader.fieldnames     # None: an empty file (a run cut short before a line)
        if names is not None and not {'time_s', 'accuracy'} <= set(names):
            raise ValueError(f"{path}:1: not a run's timeseries (its header names "
                             f'{", ".join(repr(n) for n in names[:4] if n) or "nothing"}; rog '
                             'writes time_s, iteration, accuracy, ...)')
        for row in reader:
            cells = {}
            for k, v in row.items():
                if k is None:
                    continue            # surplus cells of a damaged line (DictReader's restkey)
                try:
                    cells[k] = float(v) if v not in ('', None) else None
                except ValueError:
                    raise ValueError(f'{path}:{reader.line_num}: {v!r} is not a number') from None
            rows.append(cells)
    return rows
