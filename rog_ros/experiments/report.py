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
from typing import NamedTuple

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
    lines += _paragraph(seeds_note(table))
    lines += _section('Failed runs (excluded from the means)', failures_markdown(table))
    lines += _section('Robots out of the staleness check', membership_markdown(table))
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
    folder = _folder_rows(run_dir, say)
    _say_what_does_not_compare(folder, say)
    clock = _Clock([s.get('driver') == 'fleet' for s, _, _ in folder.runs])
    first = folder.runs[0][0]
    context = ('runs of several settings' if folder.varying else
               f'{first.get("workload", "?")} on {first.get("trace", "?")}')
    series = {name: [rows for _, rows in items] for name, items in folder.by_system.items()}
    plots, skipped = plots_or_why(say, write_plots, run_dir, folder.table, series,
                                  first.get('target_accuracy'), clock.axis, context)
    lines = _folder_heading(folder, clock) + _folder_notes(folder)
    if clock.fleet:
        lines += _fleet_section(run for run, is_fleet in zip(folder.runs, clock.fleets)
                                if is_fleet)
    timeline = None if skipped else _membership_timeline(folder, clock.axis)
    if timeline:
        plots.append(('who was in the staleness check', timeline))
    lines += events_markdown(folder.runs)
    lines += ['## Plots', ''] + plots_markdown(plots, skipped, _curve_gaps(folder))
    path = os.path.join(run_dir, 'report.md')
    atomic_write_text(path, '\n'.join(lines) + '\n')
    return path


class _Folder(NamedTuple):
    """A folder's runs read back and grouped into the rows of its report (``_folder_rows``)."""

    run_dir: str
    placed: list        # (summary, rows, events, root) of each run that counts (newest per seed)
    row_name: object    # summary -> its row's label (``setting_labels``)
    varying: list       # the settings that differ between the runs (none: one setting)
    owners: dict        # the comparisons (and loose runs) the rows come from
    apart: bool         # rows of one setting from different groups: not compared
    by_system: dict     # row label -> [(summary, rows), ...], in ``system_order``
    table: list         # one aggregated row per label

    @property
    def runs(self) -> list:
        """Return ``(summary, rows, events)`` of each run."""
        return [run[:3] for run in self.placed]


def _folder_rows(run_dir: str, say) -> _Folder:
    """
    Read the runs below ``run_dir`` and group them into rows, one per system and setting.

    Seeds of a row are averaged; with one setting and one group the rows are also compared at
    the seed's equal time, as in a comparison's report. ValueError as ``report_run`` says.
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
    by_system = {}
    for summary, rows, _, _ in placed:
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
    return _Folder(run_dir, placed, row_name, varying, owners, apart, by_system, table)


def _say_what_does_not_compare(folder: _Folder, say) -> None:
    """Tell ``say`` why rows of the folder are not compared: other settings, other groups."""
    if say is None:
        return
    if folder.varying:
        say(f'the runs in {folder.run_dir} differ in {", ".join(folder.varying)}: one row per '
            'system and setting, no ratios between them')
    if folder.apart:
        say(f'the runs in {folder.run_dir} are of {groups_phrase(folder.owners)}: one row per '
            'system, no ratios or equal-time accuracy between rows made apart; rog report of '
            'one comparison compares its systems')


class _Clock:
    """Which clock a folder's times are on: simulated, a fleet's wall clock, or both (mixed)."""

    def __init__(self, fleets: list):
        """Take, per run, whether it is a fleet's; word the plots' axis and the report's clock."""
        self.fleets = fleets
        self.fleet = any(fleets)
        self.mixed = self.fleet and not all(fleets)   # times that do not compare
        self.axis = ('time (s): simulated for simulated runs, wall-clock for fleets'
                     if self.mixed else
                     'wall-clock time (s)' if self.fleet else 'simulated time (s)')
        self.words = ('simulated (virtual) time for the simulated rows and wall-clock time '
                      'for the fleet rows, which do not compare' if self.mixed else
                      'wall-clock time of a real fleet (nodes over DDS)' if self.fleet else
                      "simulated (virtual) time; compute charged from the workload's device "
                      'profile')


def _folder_heading(folder: _Folder, clock: _Clock) -> list:
    """
    Return the report's title, its opening paragraph and the table, as lines.

    A folder of several settings says that its rows do not compare; one of rows made apart
    (several groups of one setting) says so after the usual opening.
    """
    runs = folder.runs
    summaries = [s for s, _, _ in runs]
    target = target_sentence([s.get('target_accuracy') for s in summaries])
    budget = budget_phrase(summaries)
    said = ((f' {budget[0].upper()}{budget[1:]}.' if budget else '')
            + (f' {target}' if target else '')
            + f' {STD_SENTENCE} {WAITS_SENTENCE}')
    table = table_markdown(folder.table)
    if folder.varying:
        return [f'# rog report: runs of {len(set(map(run_setting, summaries)))} settings', '',
                f'{len(runs)} run(s) in `{folder.run_dir}`, made with different '
                f'{", ".join(folder.varying)}: each row is one system at one setting, and no '
                'ratios are drawn between them. To compare like with like, point `rog report` '
                f"at one run or one comparison's folder. Times are {clock.words}.{said}", '',
                table, '']
    made_apart = (f' The rows come from {groups_phrase(folder.owners)}, made apart (their '
                  'seeds, budgets and revisions need not match): no ratios or equal-time '
                  'accuracy are drawn between them; `rog report` of one comparison '
                  'compares its systems.' if folder.apart else '')
    first = summaries[0]
    return [f'# rog report: {first.get("workload", "?")} on {first.get("trace", "?")}', '',
            f'{len(runs)} run(s) in `{folder.run_dir}`, {first.get("workers", "?")} workers; '
            f'times are {clock.words}.{said}{made_apart}', '', table, '']


def _folder_notes(folder: _Folder) -> list:
    """
    Return the lines under the table: its marks, few seeds, failures, ratios, membership.

    Ratios only between rows that compare (one setting, one group).
    """
    table = folder.table
    lines = _paragraph(marks_legend(table)) + _paragraph(seeds_note(table))
    lines += _section('Failed runs (excluded from the means)', failures_markdown(table))
    if not folder.varying and not folder.apart:
        lines += _section('Ratios', ratios_markdown(table))
    return lines + _section('Robots out of the staleness check', membership_markdown(table))


def _paragraph(text: str) -> list:
    """Return ``text`` as report lines followed by a blank one; none for no text."""
    return [text, ''] if text else []


def _section(title: str, body: str) -> list:
    """Return a ``## title`` section holding ``body``; none when there is no body."""
    return ['## ' + title, '', body, ''] if body else []


def _fleet_section(fleet_runs) -> list:
    """Return the ``## Fleet`` section: per fleet run, how it ended and what went wrong."""
    lines = ['## Fleet', '']
    for summary, _, _ in fleet_runs:
        rejects = {k: v for k, v in (summary.get('rejects_by_reason') or {}).items() if v}
        lines.append(f'- {summary.get("system")} seed {summary.get("seed")}: completed '
                     f'{summary.get("completed")}, bus {summary.get("bus")}, '
                     f'authenticated {summary.get("authenticated")}, '
                     f'rejected {rejects or "none"}' + _fault_handling(summary))
    return lines + ['']


def _membership_timeline(folder: _Folder, axis: str):
    """Draw who was in the staleness check, per run (``membership.png``); its path or None."""
    return plot_membership(
        os.path.join(folder.run_dir, 'membership.png'),
        [(f'{m.get("system")} seed {m.get("seed")}', int(m.get('workers') or 0) or
          1 + max([e['robot'] for e in ev] or [0]), float(m.get('sim_time_s') or 0.0), ev)
         for m, _, ev in folder.runs],
        axis, MAX_TIMELINES)


def _curve_gaps(folder: _Folder) -> list:
    """Return ``(run, reason)`` of each run that draws no accuracy curve (``curve_gap``)."""
    gaps = []
    for summary, rows, _, root in folder.placed:
        path = os.path.join(root, 'timeseries.csv')
        why = curve_gap(rows, path)
        if why:
            gaps.append((f'{folder.row_name(summary)} seed {summary.get("seed")} (`{path}`)',
                         why))
    return gaps
