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
The report's table of systems and the sentences that say how to read it.

One row per system with the columns of the artifact's outdoors-case0 table (time to
target, final accuracy, seconds per iteration split into compute / communication / stall,
stall cost, waits and bytes), each cell a mean ± sample std or a median [IQR] over seeds;
and the lines around it that a reader needs to trust it: what ``±`` and ``>`` mean, the
target and the iteration budget, how far few seeds carry, and how far each failed run got.
``rog compare``, ``rog report`` and ``rog reproduce`` write the same table.
"""

from __future__ import annotations

from rog_ros.experiments.summary_checks import expected_number


def _f(v, fmt='{:.2f}'):
    """Return ``v`` formatted with ``fmt``, or '-' when it is None."""
    return '-' if v is None else fmt.format(v)


def _pm(row, key, fmt='{:.2f}'):
    """Return ``mean ± sample std`` of ``key``; the mean alone where one seed has a value."""
    v = row.get(key)
    if v is None:
        return '-'
    sd = row.get(key + '_std')
    return fmt.format(v) + ('' if sd is None else f' ± {fmt.format(sd)}')


def _med(row, key, fmt='{:.2f}'):
    """``median [p25-p75]``; '>' marks a quartile that falls on a never-reached target."""
    if key + '_median' not in row:
        return '-'
    parts = [row.get(key + q) for q in ('_median', '_p25', '_p75')]
    m, lo, hi = ('>' if v is None else fmt.format(v) for v in parts)
    return f'{m} [{lo}-{hi}]'


STD_SENTENCE = ('`±`: the sample standard deviation over the seeds (ddof 1, n - 1); no `±` '
                'where one seed has a value.')
"""What the tables' ``±`` is, said in every report."""


WAITS_LABEL = 'waits (threshold triggers)'
"""The name of the ``threshold_triggers`` column and plot: what they count is a wait."""


WAITS_SENTENCE = (
    'Waits (threshold triggers): the times a robot was made to wait, each counted once however '
    'long it lasted, summed over the robots of a run (mean over seeds). Under BSP, SSP and Rog '
    'a wait is a pull that the staleness check (or a missing quorum) held: under BSP every '
    'robot but the last to reach each barrier, (iterations - 1) x (workers - 1) in a run, not '
    'one per pull (the last push of a robot is answered by a stop); under FLOWN, a push or a '
    'pull that waited for its slot; under GSP, AET-SGD and local SGD, a robot their own '
    'staleness rule held; systems without such a rule (asgd, adacomp, etsgd) count none.')
"""What the ``threshold_triggers`` column and plot count (``rog_ros.metrics``: every
``trigger`` log; ``ps_downlink._try_serve``, ``ps._dispatch_slots``, ``gsp``, ``peer``)."""


def table_markdown(table: list[dict]) -> str:
    """Return the Markdown table of ``table``'s rows (``aggregate``), one row per system."""
    head = ('| system | time to target s, median [IQR] | mean ± std | reached | final acc | '
            'final acc, last quarter | acc at equal time | s/iter | s/iter to target | compute | '
            f'comm | stall | stall cost | {WAITS_LABEL} | MB up+down | '
            '(comm+stall)/compute | failed |')
    sep = '|' + '---|' * 17
    lines = [head, sep]
    for r in table:
        mb = None
        if r.get('bytes_up') is not None:
            mb = (r['bytes_up'] + (r.get('bytes_down') or 0)) / 1e6
        lines.append('| ' + ' | '.join([
            r['system'], _med(r, 'time_to_target_s', '{:.1f}'),
            _pm(r, 'time_to_target_s', '{:.1f}'), r.get('reached_target', '-'),
            _pm(r, 'final_accuracy', '{:.3f}'), _pm(r, 'final_accuracy_tail', '{:.3f}'),
            _pm(r, 'accuracy_at_equal_time', '{:.3f}'),
            _pm(r, 's_per_iteration', '{:.3f}'),
            _med(r, 's_per_iteration_to_target', '{:.3f}'),
            _f(r.get('compute_s_per_iteration'), '{:.3f}'),
            _f(r.get('comm_s_per_iteration'), '{:.3f}'),
            _f(r.get('stall_s_per_iteration'), '{:.3f}'),
            _f(r.get('stall_cost'), '{:.2f}'), _f(r.get('threshold_triggers'), '{:.0f}'),
            _f(mb, '{:.1f}'), _f(r.get('network_to_compute_ratio'), '{:.1f}'),
            f"{r.get('failed', 0)}/{r.get('runs', '-')}"]) + ' |')
    return '\n'.join(lines)


TERMINAL_COLUMNS = (
    ('system', lambda r: r['system']),
    ('time to target s [IQR]', lambda r: _med(r, 'time_to_target_s', '{:.1f}')),
    ('reached', lambda r: str(r.get('reached_target', '-'))),
    ('final acc', lambda r: _f(r.get('final_accuracy'), '{:.3f}')),
    ('equal-time acc', lambda r: _f(r.get('accuracy_at_equal_time'), '{:.3f}')),
    ('s/iter', lambda r: _f(r.get('s_per_iteration'), '{:.3f}')),
    ('stall s/iter', lambda r: _f(r.get('stall_s_per_iteration'), '{:.3f}')),
)
"""
The columns `rog compare` prints, medians and means over the seeds: the ones a comparison is
read by (the spreads, bytes, waits and failures: report.md; failures also on stderr).
"""


def table_terminal(table: list[dict]) -> str:
    """
    Return the main columns of ``table``'s rows as aligned plain text, for a terminal.

    The report's Markdown table has 17 columns, about 250 characters a row: printed as it
    was, a terminal wrapped every row into unreadable lines (a new user's first comparison).
    The cells are the report's, so the two never disagree.
    """
    rows = [[str(cell(r)) for _, cell in TERMINAL_COLUMNS] for r in table]
    head = [name for name, _ in TERMINAL_COLUMNS]
    widths = [max(len(x) for x in column) for column in zip(head, *rows)]
    lines = []
    for row in [head] + rows:
        cells = [c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths))]
        lines.append('  '.join(cells).rstrip())
    return '\n'.join(lines)


def failures_markdown(table: list[dict]) -> str:
    """One line per failed run (excluded from every mean), how far it got; empty when none."""
    return '\n'.join(f"- {r['system']} seed {e['seed']}: FAILED: {e['error']}{_how_far(e)}"
                     for r in table for e in r.get('errors', ()))


def _how_far(error: dict) -> str:
    """Say how far a failed run got (its robots' iterations, of its budget, time); '' unknown."""
    per_robot = [int(i) for i in error.get('iterations_per_robot') or ()
                 if expected_number(i) is None]
    it, budget, t = error.get('iterations'), error.get('budget'), error.get('time_s')
    if per_robot:
        lo, hi = min(per_robot), max(per_robot)
        done = f'{lo}' if lo == hi else f'{lo} to {hi} (by robot)'
    elif expected_number(it) is None:
        done = f'a mean of {int(it)}'      # (a summary's iterations: the robots' mean)
    else:
        return ''
    of = f' of {int(budget)}' if expected_number(budget) is None else ''
    when = f' in {float(t):.1f} s' if expected_number(t) is None else ''
    return f' (it stopped after {done}{of} iterations{when})'


MEDIAN_KEYS = ('time_to_target_s', 's_per_iteration_to_target')
"""The columns shown as ``median [p25-p75]`` (``_med``), where ``>`` marks a missed target."""


def marks_legend(table: list[dict]) -> str:
    """Return the line that explains the table's ``>`` marks; '' when it shows none."""
    marked = any(r.get(key + q) is None for r in table for key in MEDIAN_KEYS
                 if key + '_median' in r for q in ('_median', '_p25', '_p75'))
    if not marked:
        return ''
    return ('`>` in a median [interquartile range] column: that quantile falls on a run that '
            'never reached the target (counted as infinitely late).')


INDICATIVE_BELOW = 5
"""Fewer seeds than this: medians and interquartile ranges are said to be indicative only."""


def seeds_note(table: list[dict]) -> str:
    """Return the line under the table that says how far few seeds carry; '' from five on."""
    counts = [int(r.get('runs') or 0) for r in table]
    if not counts or max(counts) >= INDICATIVE_BELOW:
        return ''
    if max(counts) <= 1:
        return ('One seed per system: each median [IQR] bracket is that single run, not a '
                'spread, there is no ± and every ratio compares single runs.')
    n = str(max(counts)) if min(counts) == max(counts) else f'{min(counts)}-{max(counts)}'
    return (f'Medians and interquartile ranges of {n} seeds are indicative only (fewer than '
            f'{INDICATIVE_BELOW} seeds: one more seed can move them past a neighbour).')


def target_sentence(targets) -> str:
    """
    Return the report's sentence on the target accuracy of its runs; '' when none has one.

    The workload sets the target, the same for every system (mpcol and eacol: the accuracy
    before adaptation plus a set fraction of the way to the pre-trained domain's).
    """
    found = sorted({float(t) for t in targets if t is not None})
    if not found:
        return ''
    what = ("the workload's accuracy on its held-out evaluation set that every system must "
            'reach, the same for all (mpcol, eacol: the accuracy before adaptation plus a set '
            "fraction of the way to the pre-trained domain's); time to target is the first "
            'time the mean of the last 3 evaluations reached it.')
    if len(found) == 1:
        return f'Target accuracy {found[0]:.4g}: {what}'
    return ('Target accuracies ' + ', '.join(f'{t:.4g}' for t in found) + ' (they differ '
            f'between the workloads of the runs): {what}')


def iteration_budgets(summaries) -> list:
    """Return the ``iteration_budget`` of each run summary that records a whole number."""
    return [int(s['iteration_budget']) for s in summaries
            if isinstance(s.get('iteration_budget'), (int, float))
            and not isinstance(s.get('iteration_budget'), bool)]


def budget_phrase(summaries) -> str:
    """Return ``'200 iterations per run'`` from the runs' ``iteration_budget``; '' if unknown."""
    found = sorted(set(iteration_budgets(summaries)))
    if not found:
        return ''
    if len(found) == 1:
        return f'{found[0]} iterations per run'
    return f'iteration budgets {", ".join(map(str, found))} (they differ between runs)'
