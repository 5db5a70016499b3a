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
The Markdown report of runs, ``report.md`` with its plots, laid out section by section.

Two reports share their parts: a comparison's (``write_report``: ``rog compare``,
``rog reproduce``, and ``rog report`` of a comparison's folder, via ``comparison_report``)
and that of any folder of runs (``report_run``: ``rog report`` of a fleet, a simulation, a
folder of many). Only the layout and its wording live here; each part is a module of its
own: the runs read back (``report_runs``) and grouped into rows (``report_groups``), the
table and its notes (``report_table``), the paper's ratios (``report_ratios``), the plots
(``report_plots`` drawing ``report_curves`` in the colours of ``report_systems``), and
who was out of the staleness check (``membership``).
"""

from __future__ import annotations

import os

from rog_ros.atomic import atomic_write_text
from rog_ros.experiments.membership import events_markdown, MAX_TIMELINES, membership_markdown, \
    plot_membership
from rog_ros.experiments.report_curves import curve_gap
from rog_ros.experiments.report_groups import groups_phrase, newest_per_seed, one_comparison, \
    run_setting, setting_labels
from rog_ros.experiments.report_plots import plots_markdown, plots_or_why, write_plots
from rog_ros.experiments.report_ratios import ratios_markdown
from rog_ros.experiments.report_runs import placed_runs, why_no_runs
from rog_ros.experiments.report_systems import system_order
from rog_ros.experiments.report_table import budget_phrase, failures_markdown, marks_legend, \
    seeds_note, STD_SENTENCE, table_markdown, target_sentence, WAITS_SENTENCE
from rog_ros.experiments.seed_stats import add_equal_time_accuracy, aggregate


def write_report(out: str, meta: dict, table: list[dict], series: dict, title=None,
                 gaps=(), say=None, budget: str = '') -> str:
    """
    Write report.md and the plots; returns the report path.

    ``gaps``: ``(run, reason)`` of each run that draws no accuracy curve (``curve_gap``).
    ``budget``: the runs' iteration budget (``budget_phrase``). Without a working matplotlib
    the report is written without plots, says why, and ``say(line)`` is told.
    """
    context = f'{meta["workload"]} on {meta["trace"]}'
    plots, skipped = plots_or_why(say, write_plots, out, table, series,
                                  meta.get('target_accuracy'), 'simulated time (s)', context)
    target = target_sentence([meta.get('target_accuracy')])
    lines = [f'# {title or "rog compare"}: {meta["workload"]} on {meta["trace"]}', '',
             f'{meta["workers"]} workers, seeds {meta["seeds"]}'
             + (f', {budget}' if budget else '') + '. ' + (target + ' ' if target else '')
             + 'Time to target: median and '
             'interquartile range over all seeds (a seed that never reached the target counts '
             'as infinitely late; ">" marks such a quartile), then mean ± std (the sample '
             'standard deviation over the seeds, ddof 1; no ± where one seed has a value) over '
             'the seeds that reached it, and how many did; other columns: means (± sample std) '
             'over seeds. Final '
             'accuracy: the last evaluation, and the mean of the evaluations in the last '
             "quarter of the run's iterations (where the optimiser settled; one evaluation "
             'moves by up to 1.6 points between neighbours): the systems at equal work. '
             'Accuracy at equal time: the systems at equal time instead, per seed when the '
             "first system's run ended (its last periodic evaluation), each system's smoothed "
             'accuracy then (the 3-evaluation mean time to target reads). '
             f"Simulated (virtual) time; compute charged from the workload's device profile. "
             f'{WAITS_SENTENCE}', '', table_markdown(table), '']
    note = seeds_note(table)
    if note:
        lines += [note, '']
    failures = failures_markdown(table)
    if failures:
        lines += ['## Failed runs (excluded from the means)', '', failures, '']
    membership = membership_markdown(table)
    if membership:
        lines += ['## Robots out of the staleness check', '', membership, '']
    lines += ['## Ratios', '', ratios_markdown(table) or '-', '', '## Plots', '']
    lines += plots_markdown(plots, skipped, gaps)
    lines += ['', '`(comm+stall)/compute` tells the regime: the paper studies networks where '
              'it is well above 1 (the artifact measured 12.6 s against 1.1 s under BSP).',
              '`s/iter to target` (median [IQR] over the seeds that reached it) is the regime '
              'of the phase the times measure: where a synchronous system iterates in less '
              'than twice the compute time up to the target, no system that computes and '
              'communicates in turn can take half of its time (docs/scheduling.md, "The '
              'compute-bound floor").', '']
    path = os.path.join(out, 'report.md')
    atomic_write_text(path, '\n'.join(lines))
    return path


def _fault_handling(summary: dict) -> str:
    """Return what fault handling did in a fleet run (docs/faults.md), its start and model."""
    said = [f'{summary[k]} {name}' for k, name in (
        ('superseded', 'messages of replaced runs'), ('repairs', 'repaired pulls'),
        ('pull_repeats', 'pulls served again'), ('worker_revivals', 'runs taken back'),
        ('workers_let_go', 'robots let go silent before the budget'))
        if isinstance(summary.get(k), int) and summary[k] > 0]
    dup = summary.get('duplicate_ranks')
    if dup:
        said.append(f'**two processes ran as robot {", ".join(map(str, dup))}** (give every '
                    'robot its own rank)')
    apart = summary.get('started_apart')
    if apart:
        said.append('**robots that started from other weights (events.csv: start_mismatch): '
                    + ', '.join(f'{r} ({fp})' for r, fp in sorted(apart.items())) + '**')
    start = summary.get('start_model') or {}
    model = summary.get('model_file')
    got, missed = summary.get('final_model_delivered'), summary.get('final_model_missed')
    held = ''
    if model and isinstance(got, int) and isinstance(missed, int) and got + missed:
        held = f' (held by {got} of {got + missed} robots' + (
            f'; **{missed} stopped without it**, events.csv: final_model_missed)'
            if missed else ')')
    return (('; ' + ', '.join(said) if said else '')
            + (f'; started from {start.get("source")} ({start.get("fingerprint")})'
               if start.get('source') else '')
            + (f'; trained model `{model}`{held}' if model else ''))


def report_run(run_dir: str, say=None) -> str:
    """
    Write ``report.md`` and the plots of any fleet or simulator run directory; its path.

    Runs of the same system and setting (seeds) are averaged, rows in ``system_order``, and
    compared at equal time as in a comparison (``add_equal_time_accuracy``) when the folder
    holds one setting; ``say(line)`` is told when the folder mixes settings, and when runs
    repeat a system's seed (the newest counts, ``newest_per_seed``). Raises
    ValueError when ``run_dir`` is missing, holds no run's ``summary.json`` (naming a
    ``summary.json`` that is not a run's), or when runs of different comparisons (or of one
    and runs outside it) would share a row (``one_comparison``).
    """
    if not os.path.isdir(run_dir):
        raise ValueError(why_no_runs(run_dir))
    placed = placed_runs(run_dir)
    if not placed:
        raise ValueError(why_no_runs(run_dir))
    row_name, varying = setting_labels([run[0] for run in placed])
    owners = one_comparison(run_dir, placed, row_name, say)
    # Rows of one setting from different groups (two comparisons of one setting, each with
    # its own systems): each row is whole, but ratios and equal-time accuracy between rows
    # of different groups would compare runs made apart (other seeds, budgets, revisions).
    apart = not varying and len(owners) > 1
    placed = newest_per_seed(run_dir, placed, row_name, say)
    runs = [run[:3] for run in placed]
    by_system = {}
    for summary, rows, _ in runs:
        by_system.setdefault(row_name(summary), []).append((summary, rows))
    by_system = {name: by_system[name] for name in system_order(by_system)}
    if not varying and not apart:
        # as in a comparison's report: each system at the seed's equal time
        add_equal_time_accuracy(
            {name: [s for s, _ in items] for name, items in by_system.items()},
            {(name, s.get('seed')): rows for name, items in by_system.items()
             for s, rows in items if not s.get('error')})
    table = [dict(aggregate([s for s, _ in items]), system=label)
             for label, items in by_system.items()]
    if varying and say is not None:
        say(f'the runs in {run_dir} differ in {", ".join(varying)}: one row per system and '
            'setting, no ratios between them')
    if apart and say is not None:
        say(f'the runs in {run_dir} are of {groups_phrase(owners)}: one row per system, no '
            'ratios or equal-time accuracy between rows made apart; rog report of one '
            'comparison compares its systems')
    series = {name: [rows for _, rows in items] for name, items in by_system.items()}
    first = runs[0][0]
    fleets = [s.get('driver') == 'fleet' for s, _, _ in runs]
    fleet, mixed = any(fleets), any(fleets) and not all(fleets)
    axis = ('time (s): simulated for simulated runs, wall-clock for fleets' if mixed else
            'wall-clock time (s)' if fleet else 'simulated time (s)')
    context = ('runs of several settings' if varying else
               f'{first.get("workload", "?")} on {first.get("trace", "?")}')
    plots, skipped = plots_or_why(say, write_plots, run_dir, table, series,
                                  first.get('target_accuracy'), axis, context)
    summaries = [s for s, _, _ in runs]
    target = target_sentence([s.get('target_accuracy') for s in summaries])
    budget = budget_phrase(summaries)
    said = ((f' {budget[0].upper()}{budget[1:]}.' if budget else '')
            + (f' {target}' if target else '')
            + f' {STD_SENTENCE} {WAITS_SENTENCE}')
    clock = ('simulated (virtual) time for the simulated rows and wall-clock time for the '
             'fleet rows, which do not compare' if mixed else
             'wall-clock time of a real fleet (nodes over DDS)' if fleet else
             "simulated (virtual) time; compute charged from the workload's device profile")
    if varying:
        lines = [f'# rog report: runs of {len(set(map(run_setting, (s for s, _, _ in runs))))} '
                 'settings', '',
                 f'{len(runs)} run(s) in `{run_dir}`, made with different '
                 f'{", ".join(varying)}: each row is one system at one setting, and no ratios '
                 'are drawn between them. To compare like with like, point `rog report` at '
                 f"one run or one comparison's folder. Times are {clock}.{said}", '',
                 table_markdown(table), '']
    else:
        made_apart = (f' The rows come from {groups_phrase(owners)}, made apart (their '
                      'seeds, budgets and revisions need not match): no ratios or equal-time '
                      'accuracy are drawn between them; `rog report` of one comparison '
                      'compares its systems.' if apart else '')
        lines = [f'# rog report: {first.get("workload", "?")} on {first.get("trace", "?")}',
                 '', f'{len(runs)} run(s) in `{run_dir}`, {first.get("workers", "?")} '
                 f'workers; times are {clock}.{said}{made_apart}', '', table_markdown(table),
                 '']
    legend = marks_legend(table)
    if legend:
        lines += [legend, '']
    note = seeds_note(table)
    if note:
        lines += [note, '']
    failures = failures_markdown(table)
    if failures:
        lines += ['## Failed runs (excluded from the means)', '', failures, '']
    ratios = '' if varying or apart else ratios_markdown(table)
    if ratios:
        lines += ['## Ratios', '', ratios, '']
    membership = membership_markdown(table)
    if membership:
        lines += ['## Robots out of the staleness check', '', membership, '']
    if fleet:
        lines += ['## Fleet', '']
        for summary, _, _ in (run for run, is_fleet in zip(runs, fleets) if is_fleet):
            rejects = {k: v for k, v in (summary.get('rejects_by_reason') or {}).items() if v}
            lines.append(f'- {summary.get("system")} seed {summary.get("seed")}: completed '
                         f'{summary.get("completed")}, bus {summary.get("bus")}, '
                         f'authenticated {summary.get("authenticated")}, '
                         f'rejected {rejects or "none"}' + _fault_handling(summary))
        lines.append('')
    timeline = None if skipped else plot_membership(      # (it draws with matplotlib too)
        os.path.join(run_dir, 'membership.png'),
        [(f'{m.get("system")} seed {m.get("seed")}', int(m.get('workers') or 0) or
          1 + max([e['robot'] for e in ev] or [0]), float(m.get('sim_time_s') or 0.0), ev)
         for m, _, ev in runs],
        axis, MAX_TIMELINES)
    if timeline:
        plots.append(('who was in the staleness check', timeline))
    lines += events_markdown(runs)
    gaps = []
    for summary, rows, _, root in placed:
        path = os.path.join(root, 'timeseries.csv')
        why = curve_gap(rows, path)
        if why:
            gaps.append((f'{row_name(summary)} seed {summary.get("seed")} (`{path}`)', why))
    lines += ['## Plots', ''] + plots_markdown(plots, skipped, gaps)
    path = os.path.join(run_dir, 'report.md')
    atomic_write_text(path, '\n'.join(lines) + '\n')
    return path
