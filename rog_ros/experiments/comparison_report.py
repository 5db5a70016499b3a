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

from rog_ros.experiments.comparison_folder import comparison_meta, run_dir
from rog_ros.experiments.report import write_report
from rog_ros.experiments.report_curves import curve_gap
from rog_ros.experiments.report_systems import system_order
from rog_ros.experiments.report_table import budget_phrase, iteration_budgets
from rog_ros.experiments.seed_stats import add_equal_time_accuracy, aggregate
from rog_ros.metrics import atomic_write, read_timeseries


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
