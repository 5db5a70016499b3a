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
The report's PNG plots: accuracy curves, time composition, waits, times to target per seed.

Drawn with matplotlib on its Agg backend, which is optional: where it does not import, the
tables are still written and the report says why its plots are missing
(``PlotsUnavailable``, ``plots_or_why``). Colours and order are those of every report
(``report_systems``); the curves are the numbers of ``report_curves``.
"""

from __future__ import annotations

import os

import numpy as np
from rog_ros.atomic import atomic_save_figure
from rog_ros.experiments.report_curves import curve_band, periodic_rows
from rog_ros.experiments.report_systems import system_colors
from rog_ros.experiments.report_table import WAITS_LABEL


class PlotsUnavailable(Exception):
    """matplotlib does not import here: the report is written without its plots."""


def _one_line(err: BaseException, limit: int = 160) -> str:
    """Return ``err``'s message on one line, cut to ``limit`` characters."""
    text = ' '.join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[:limit - 3] + '...'


def _pyplot():
    """Return matplotlib's pyplot on the Agg backend; PlotsUnavailable says why it cannot."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise PlotsUnavailable(
            f'matplotlib cannot be imported ({_one_line(err)}); to draw them: pip install '
            'matplotlib (or apt install python3-matplotlib), then rog report again') from None
    except Exception as err:      # an install that is there but broken: say so, no traceback
        raise PlotsUnavailable(
            f'importing matplotlib failed ({type(err).__name__}: {_one_line(err)}); repair it: '
            'pip install --force-reinstall matplotlib (or apt install --reinstall '
            'python3-matplotlib), then rog report again') from None
    return plt


def plots_or_why(say, draw, *args):
    """
    Return ``(draw(*args), '')``, or ``([], reason)`` when matplotlib does not import.

    The tables need no matplotlib (``rog doctor``: "write tables without plots"); without
    it the report is still written and says why its plots are missing; ``say`` is told once.
    """
    try:
        return draw(*args), ''
    except PlotsUnavailable as err:
        if say is not None:
            say(f'plots skipped: {err}')
        return [], str(err)


def plots_markdown(plots: list, skipped: str = '', gaps=()) -> list:
    """Return the report lines of its plots, why they were skipped, and runs without curves."""
    lines = []
    if skipped:
        lines += [f'Plots skipped: {skipped}.', '']
    if gaps:
        lines += ['No accuracy curve from:'] + [f'- {run}: {why}' for run, why in gaps] + ['']
    return lines + [f'![{name}]({os.path.basename(p)})' for name, p in plots]


def plot_title(context: str, seeds: int, what: str = '') -> str:
    """Return a plot's title: ``'mpcol on outdoors, mean of 2 seeds'`` (``what``: 'mean of')."""
    n = f'{seeds} seed' + ('' if seeds == 1 else 's')
    said = f'{what} {n}' if what else n
    return f'{context}, {said}' if context else said


def _seed_count(table: list[dict]) -> int:
    """Return the most runs of one system in ``table`` (its seeds)."""
    return max([int(r.get('runs') or 0) for r in table] or [0])


def _system_ticks(ax, labels: list) -> None:
    """Put the system names under their bars, slanted when they are long or many."""
    ax.set_xticks(range(len(labels)))
    slant = len(labels) > 1 and (max(len(x) for x in labels) > 6 or len(labels) > 6)
    ax.set_xticklabels(labels, rotation=35 if slant else 0, ha='right' if slant else 'center',
                       rotation_mode='anchor' if slant else 'default')


def _bar_width(n: int) -> float:
    """Return a bar plot's width in inches for ``n`` systems."""
    return max(6.4, 0.75 * n + 2.0)


def write_plots(out: str, table: list[dict], series: dict, target=None,
                clock: str = 'simulated time (s)', context: str = '') -> list:
    """
    Draw the report's plots into ``out``; ``[(name, path)]``. ``clock``: the time axis.

    ``context``: what the titles name before the seed count (``'mpcol on outdoors'``).
    Raises PlotsUnavailable (its one-line reason) when matplotlib does not import.
    """
    plt = _pyplot()
    made = []
    seeds = _seed_count(table)
    colors = system_colors(list(series) + [r['system'] for r in table])
    for xkey, name, log in (('time_s', 'accuracy_vs_time', False),
                            ('time_s', 'accuracy_vs_time_log', True),
                            ('iteration', 'accuracy_vs_iteration', False)):
        fig = accuracy_figure(plt, series, xkey, log, target, colors)
        if fig is None:        # no run with evaluations (every run failed): no empty plot
            continue
        ax = fig.axes[0]
        ax.set_xlabel((clock + (', log scale' if log else ''))
                      if xkey == 'time_s' else 'iteration (mean over workers)')
        band = any(c.get_label() == BAND_LABEL for c in ax.collections)
        ax.set_title(plot_title(context, seeds, 'mean of') + (f'; {BAND_LABEL}' if band else ''),
                     fontsize=10)
        p = os.path.join(out, name + '.png')
        fig.tight_layout()
        atomic_save_figure(fig, p, dpi=110)
        plt.close(fig)
        made.append((name, p))
    labels = [r['system'] for r in table]
    fig, ax = plt.subplots(figsize=(_bar_width(len(labels)), 4.0))
    bottom = np.zeros(len(labels))
    for key, color in (('compute_s_per_iteration', '#4c72b0'), ('comm_s_per_iteration',
                                                                '#dd8452'),
                       ('stall_s_per_iteration', '#c44e52')):
        vals = np.array([r.get(key) or 0.0 for r in table])
        ax.bar(range(len(labels)), vals, bottom=bottom, color=color,
               label=key.replace('_s_per_iteration', ''))
        bottom += vals
    _system_ticks(ax, labels)
    ax.set_ylabel('seconds per iteration (mean over seeds)')
    ax.set_title(plot_title(context, seeds, 'mean of'), fontsize=10)
    ax.legend(fontsize=8)
    p = os.path.join(out, 'time_composition.png')
    fig.tight_layout()
    atomic_save_figure(fig, p, dpi=110)
    plt.close(fig)
    made.append(('time composition', p))
    fig, ax = plt.subplots(figsize=(_bar_width(len(labels)), 3.6))
    ax.bar(range(len(labels)), [r.get('threshold_triggers') or 0 for r in table],
           color=[colors[x] for x in labels])
    _system_ticks(ax, labels)
    ax.set_ylabel(f'{WAITS_LABEL}\nper run, mean over seeds', fontsize=9)
    ax.set_title(plot_title(context, seeds, 'mean of') + '; BSP: all robots but the last at '
                 'each barrier', fontsize=9)
    p = os.path.join(out, 'triggers.png')
    fig.tight_layout()
    atomic_save_figure(fig, p, dpi=110)
    plt.close(fig)
    made.append((WAITS_LABEL, p))
    p = _plot_times_per_seed(plt, out, table, context)
    if p is not None:
        made.append(('time to target per seed', p))
    return made


BAND_LABEL = 'band: min-max over seeds'
"""The legend entry of the shaded band around each system's mean accuracy curve."""


CURVE_LABEL = 'accuracy, mean of the last 3 evaluations\n(what time to target reads)'
"""The y label of the accuracy curves: the smoothing that time to target reads."""


def accuracy_figure(plt, series: dict, xkey: str, log: bool = False, target=None,
                    colors=None):
    """
    Return the figure of accuracy against ``xkey`` per system (``series``), or None.

    Each system's curve is the mean over its seeds of the accuracy smoothed as time to target
    reads it (the mean of the last 3 evaluations, held until the next one: ``curve_band``),
    so a seed's curve crosses the target where its time to target says; a shaded band spans
    the lowest and the highest seed (``BAND_LABEL``, drawn where a system has two seeds or
    more), and a dashed line marks the target. None when no system has a curve (every run
    failed).
    """
    from matplotlib.patches import Patch
    colors = colors or system_colors(list(series))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    banded = False
    for label, runs in series.items():
        xs, ys, lo, hi = curve_band(runs, xkey, log)
        if xs is None:
            continue
        ax.plot(xs, ys, label=label, color=colors[label], zorder=3, drawstyle='steps-post')
        if len([r for r in runs if len(periodic_rows(r)) > 1]) > 1:
            ax.fill_between(xs, lo, hi, color=colors[label], alpha=0.18, lw=0, step='post',
                            label=BAND_LABEL, zorder=2)
            banded = True
    if not ax.lines:
        plt.close(fig)
        return None
    if log:
        # the race to the target is over in the first tenth of a run; the rest is the
        # plateau where final accuracies are compared: a log axis shows both
        ax.set_xscale('log')
    ax.set_ylabel(CURVE_LABEL, fontsize=9)
    ax.grid(alpha=0.3)
    if target:
        ax.axhline(target, color='black', ls='--', lw=1.2, zorder=4,
                   label=f'target {target:.4g}')
    handles = list(ax.lines)
    if banded:
        handles.append(Patch(color='#888888', alpha=0.35, label=BAND_LABEL))
    ax.legend(handles=handles, fontsize=8)
    return fig


LINEAR_TIME_SPAN = 5.0
"""Times to target spanning less than this factor are drawn on a linear axis, else log."""


def times_figure(plt, table: list[dict], context: str = ''):
    """
    Return the figure of every seed's time to target per system and its median, or None.

    Medians hide how far apart seeds land (MPCOL ``outdoors``: BSP from 13 to 76 s): one dot
    per seed, a bar at the median, and a cross in a band of its own above the plot for a
    seed that never reached the target. A log axis (plain numbers on its ticks) where the
    times span more than ``LINEAR_TIME_SPAN``, else a linear one. None when no system has
    per-seed times.
    """
    from matplotlib.lines import Line2D
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter
    rows = [r for r in table if r.get('time_to_target_s_per_seed')]
    reached = [t for r in rows for t in r['time_to_target_s_per_seed'] if t is not None]
    if not reached:
        return None
    any_missed = any(t is None for r in rows for t in r['time_to_target_s_per_seed'])
    colors = system_colors([r['system'] for r in rows])
    if any_missed:
        fig, (band, ax) = plt.subplots(
            2, 1, sharex=True, figsize=(_bar_width(len(rows)), 4.2),
            gridspec_kw={'height_ratios': [1, 6], 'hspace': 0.05})
    else:
        fig, ax = plt.subplots(figsize=(_bar_width(len(rows)), 3.8))
        band = None
    for i, r in enumerate(rows):
        times = r['time_to_target_s_per_seed']
        jitter = np.linspace(-0.12, 0.12, len(times)) if len(times) > 1 else [0.0]
        ax.scatter([i + j for j, t in zip(jitter, times) if t is not None],
                   [t for t in times if t is not None], s=22, color=colors[r['system']],
                   zorder=3)
        missed = [i + j for j, t in zip(jitter, times) if t is None]
        if missed:
            band.scatter(missed, [0.5] * len(missed), marker='x', color='#c44e52', zorder=3)
        if r.get('time_to_target_s_median') is not None:
            ax.hlines(r['time_to_target_s_median'], i - 0.25, i + 0.25, color='black', lw=2)
    if band is not None:
        band.set_ylim(0, 1)
        band.set_yticks([0.5])
        band.set_yticklabels(['not reached'])
        band.tick_params(axis='x', length=0)
        band.set_facecolor('#f3f3f3')
    (band or ax).set_title(plot_title(context, _seed_count(rows)), fontsize=10)
    if max(reached) / max(min(reached), 1e-12) >= LINEAR_TIME_SPAN:
        ax.set_yscale('log')
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_formatter(NullFormatter())
    else:
        ax.set_ylim(0, max(reached) * 1.1)
    plain = ScalarFormatter()
    plain.set_scientific(False)
    ax.yaxis.set_major_formatter(plain)
    _system_ticks(ax, [r['system'] for r in rows])
    ax.set_ylabel('time to target (s), per seed')
    ax.grid(alpha=0.3, axis='y', which='both')
    handles = [Line2D([], [], ls='', marker='o', color='#555555', label='one seed'),
               Line2D([], [], color='black', lw=2, label='median over seeds')]
    if any_missed:
        handles.append(Line2D([], [], ls='', marker='x', color='#c44e52',
                              label='seed never reached the target'))
    ax.legend(handles=handles, fontsize=8, loc='best')
    if band is None:
        fig.tight_layout()
    return fig


def _plot_times_per_seed(plt, out: str, table: list[dict], context: str = ''):
    """Draw ``times_figure`` into ``time_to_target.png``; its path, or None when none."""
    fig = times_figure(plt, table, context)
    if fig is None:
        return None
    p = os.path.join(out, 'time_to_target.png')
    atomic_save_figure(fig, p, dpi=110, bbox_inches='tight')
    plt.close(fig)
    return p
