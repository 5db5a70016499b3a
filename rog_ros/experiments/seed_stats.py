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
Statistics over seeds: what ``rog compare`` and ``rog report`` say of several runs.

Per key of a run's ``summary.json``: mean and sample standard deviation (n - 1) over the
seeds that have a value, median and interquartile range counting a never-reached target as
infinitely late, how many seeds reached the target, and per seed what outage-aware RSP did.
"""

from __future__ import annotations

import math

import numpy as np

from rog_ros.metrics import accuracy_at_time, last_periodic_time, per_iteration_to_target

KEYS = ('time_to_target_s', 'iterations_to_target', 'final_accuracy', 'final_accuracy_tail',
        'accuracy_at_equal_time', 'equal_time_s',
        's_per_iteration', 's_per_iteration_to_target',
        'compute_s_per_iteration', 'comm_s_per_iteration', 'stall_s_per_iteration',
        'stall_cost', 'threshold_triggers', 'bytes_up', 'bytes_down', 'sim_time_s',
        'network_to_compute_ratio', 'mean_transfer_s', 'p95_transfer_s')


MEMBERSHIP_KEYS = ('outage_suspensions', 'too_slow_suspensions', 'slack_raises')
"""Per-seed counts of robots suspended for their link (of them let go as too slow for any
slack) and of straggler-slack raises: what outage-aware RSP did in each run."""


TO_TARGET = ('time_to_target_s', 'iterations_to_target')


def _quantile(vals: np.ndarray, q: float) -> float | None:
    """Linear-interpolated quantile; None where it is not finite (a never-reached target)."""
    if vals.size == 0:
        return None
    with np.errstate(invalid='ignore'):
        v = float(np.percentile(vals, q))
    return v if np.isfinite(v) else None


def aggregate(summaries: list[dict]) -> dict:
    """
    Statistics over seeds: mean, std, median and quartiles of every key, and targets reached.

    Means and standard deviations are over the seeds that have a value (for the time to
    target: the seeds that reached it). The standard deviation is the sample one (ddof 1,
    n - 1), as ``±`` over seeds is read; None with fewer than two values (one seed has no
    spread to estimate, and 0 would claim one). Medians and quartiles count a never-reached
    target as infinitely late, so they are honest about misses: ``None`` when the quantile
    falls on one.
    A key that no run recorded (and not for a missed target) gets no quartiles: missing.

    A run whose summary carries an ``error`` (it did not finish: event budget, deadlock) is
    counted under ``failed`` and listed under ``errors``, never in a statistic (``reached``
    counts it among the runs that did not reach the target).
    """
    failed = [s for s in summaries if s.get('error')]
    out = {'system': summaries[0]['system'], 'seeds': [s.get('seed') for s in summaries],
           'runs': len(summaries), 'failed': len(failed),
           'errors': [_failure(s) for s in failed]}
    summaries = [_with_derived(s) for s in summaries if not s.get('error')]
    for k in MEMBERSHIP_KEYS:     # per seed, not averaged: "robot let go on seeds 0 and 3"
        out[k] = [int(s.get(k) or 0) for s in summaries]
    out['finished_seeds'] = [s.get('seed') for s in summaries]
    # per finished seed, in that order (None: never reached): what the strip plot draws
    out['time_to_target_s_per_seed'] = [s.get('time_to_target_s') for s in summaries]
    for k in KEYS:
        vals = [s.get(k) for s in summaries]
        good = [float(v) for v in vals if v is not None]
        out[k] = float(np.mean(good)) if good else None
        out[k + '_std'] = float(np.std(good, ddof=1)) if len(good) > 1 else None
        arr = np.asarray([math.inf if v is None else float(v) for v in vals]
                         if k in TO_TARGET else good, dtype=np.float64)
        if k == 'time_to_target_s':
            out['reached_target'] = f'{len(good)}/{out["runs"]}'
            out['reached_target_count'] = len(good)
        if not arr.size and not _missed_every_target(k, summaries):
            # No run recorded it (a fleet run has no s_per_iteration_to_target): leaving
            # the quartiles out makes the report show it as missing, while None would read
            # as a target never reached ('>')
            continue
        out[k + '_median'] = _quantile(arr, 50)
        out[k + '_p25'] = _quantile(arr, 25)
        out[k + '_p75'] = _quantile(arr, 75)
    return out


def _failure(summary: dict) -> dict:
    """Return a failed run's entry: its seed, its error and how far it got where recorded."""
    out = {'seed': summary.get('seed'), 'error': str(summary['error'])}
    for key, name in (('iterations', 'iterations'),
                      ('iterations_per_robot', 'iterations_per_robot'),
                      ('iteration_budget', 'budget'), ('sim_time_s', 'time_s')):
        if summary.get(key) is not None:
            out[name] = summary[key]
    return out


def _missed_every_target(key: str, summaries: list[dict]) -> bool:
    """Tell whether ``key`` has no value because no run reached the target, or none finished."""
    return key in TO_TARGET + ('s_per_iteration_to_target',) and all(
        s.get('time_to_target_s') is None for s in summaries)


def _with_derived(summary: dict) -> dict:
    """Fill in what a summary of an older revision lacks and its other keys determine."""
    if 's_per_iteration_to_target' in summary:
        return summary
    return {**summary, 's_per_iteration_to_target': per_iteration_to_target(
        summary.get('time_to_target_s'), summary.get('iterations_to_target'))}


def add_equal_time_accuracy(results: dict, timeseries: dict) -> None:
    """
    Give each run of ``results`` its accuracy at the seed's equal time (in place).

    Runs of one iteration budget end at different times; the final accuracies compare the
    systems at equal work. This compares them at equal time, the question of a fleet that
    adapts while the fog lasts: per seed, the time of the earliest last periodic evaluation
    over the systems (``equal_time_s``), and each system's smoothed accuracy then
    (``accuracy_at_equal_time``, ``accuracy_at_time``). ``timeseries`` maps (label, seed) to
    a finished run's rows; failed runs have none and take no part. A comparison of one system,
    or a seed on which only one system finished, says nothing here and gets nothing.
    """
    if len(results) < 2:
        return
    ends: dict[int, list] = {}
    for (label, seed), rows in timeseries.items():
        end = last_periodic_time(rows)
        if end is not None:
            ends.setdefault(seed, []).append(end)
    # a seed where fewer than two systems finished compares nothing
    ends = {seed: min(e) for seed, e in ends.items() if len(e) >= 2}
    for label, summaries in results.items():
        for summary in summaries:
            rows = timeseries.get((label, summary.get('seed')))
            t = ends.get(summary.get('seed'))
            if rows is None or t is None:
                continue
            summary['equal_time_s'] = t
            summary['accuracy_at_equal_time'] = accuracy_at_time(rows, t)
