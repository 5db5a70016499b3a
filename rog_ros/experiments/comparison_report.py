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
The report of a comparison: its runs read back from ``DIR/runs``, aggregated and written.

``rog compare`` writes it when its runs are done, and ``rog report DIR`` writes it again
from the same files (after a plot or a column changed, or runs were copied in): one code
path, so both give the same ``report.md``, ``summary.json`` and plots. Reading the runs needs
no simulator (and no torch).
"""

from __future__ import annotations

import json
import os

from rog_ros.experiments.report import budget_phrase, curve_gap, iteration_budgets, \
    system_order, write_report
from rog_ros.experiments.seed_stats import aggregate
from rog_ros.metrics import accuracy_at_time, atomic_write, last_periodic_time, read_timeseries

META_KEYS = ('workload', 'trace', 'workers', 'seeds', 'systems')
"""What a comparison's ``summary.json`` meta must hold for its report to be written again."""


def run_dir(out: str, label: str, seed: int) -> str:
    """Return the folder of one run of a comparison: ``DIR/runs/rog-4-seed0``."""
    return os.path.join(out, 'runs', f'{label.replace(":", "-")}-seed{seed}')


def write_comparison(out: str, meta: dict, say=None) -> list:
    """
    Read every (system, seed) run of ``meta`` under ``out``, write the report; the table.

    ``meta`` names the systems (their labels) and seeds; each run's ``summary.json`` must be
    there (a failed run's says why, and it is counted as failed). ``meta`` gets the target
    accuracy; ``DIR/summary.json`` (meta and per-system aggregates), ``report.md`` and the
    plots are written (without plots, saying why, and ``say(line)`` told, when matplotlib
    does not import). The systems are tabled and drawn in ``system_order``, as
    ``rog report DIR/runs`` has them.
    """
    results: dict = {}
    series: dict = {}
    timeseries: dict = {}
    gaps = []
    for label in system_order(meta['systems']):
        for seed in meta['seeds']:
            d = run_dir(out, label, seed)
            with open(os.path.join(d, 'summary.json')) as f:
                results.setdefault(label, []).append(json.load(f))
            if results[label][-1].get('error'):
                continue            # a failed run draws no curve (it did not finish)
            path = os.path.join(d, 'timeseries.csv')
            rows = read_timeseries(path)
            why = curve_gap(rows, path)
            if why:             # an empty or cut timeseries is read: say why no curve
                gaps.append((f'{label} seed {seed} (`{os.path.relpath(path, out)}`)', why))
            series.setdefault(label, []).append(rows)
            timeseries[(label, seed)] = rows
    add_equal_time_accuracy(results, timeseries)
    table = [aggregate(v) for v in results.values()]
    meta['target_accuracy'] = next(iter(results.values()))[0].get('target_accuracy')
    finished = [s for runs in results.values() for s in runs if not s.get('error')]
    budgets = iteration_budgets(finished)      # the most common one (--iterations, or default)
    meta['iteration_budget'] = max(set(budgets), key=budgets.count) if budgets else None
    atomic_write(os.path.join(out, 'summary.json'),
                 json.dumps({'meta': meta, 'systems': table}, indent=2) + '\n')
    write_report(out, meta, table, series, title=meta.get('title'), gaps=gaps, say=say,
                 budget=budget_phrase(finished))
    return table


def comparison_meta(out: str) -> dict | None:
    """Return the meta of the comparison in folder ``out``, or None if it holds none."""
    try:
        with open(os.path.join(out, 'summary.json')) as f:
            meta = json.load(f).get('meta')
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(meta, dict) or any(k not in meta for k in META_KEYS):
        return None
    return meta


def report_comparison(out: str, say=None) -> str:
    """
    Write the report of the comparison in ``out`` again from its runs; the report's path.

    Raises ValueError (one line) for a folder that holds no comparison, or one whose run is
    missing its ``summary.json`` or ``timeseries.csv``. ``say(line)``: as ``write_comparison``.
    """
    meta = comparison_meta(out)
    if meta is None:
        raise ValueError(f'{out} holds no comparison (no summary.json with the meta that '
                         'rog compare writes)')
    try:
        write_comparison(out, meta, say)
    except OSError as err:
        raise ValueError(f'{out}: a run of the comparison is missing or unreadable: '
                         f'{err.filename or err}') from err
    return os.path.join(out, 'report.md')


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
