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
Who was in the staleness check when: a run's membership timeline from its ``events.csv``.

Outage-aware RSP suspends robots whose link cannot keep the pace, lets one that is too slow
for any slack run free, and gives slow links straggler slack; a run's accuracy curve only
makes sense next to that. Read as rows of ``events.csv`` (``rog_ros.metrics``) the story
takes a while to put together; drawn as one bar per robot, shaded while it was out and
coloured by why, it does not. ``rog report`` draws it for every run that had such events,
and lists them; a report's table says per system on how many seeds a robot was let go
(``membership_markdown``), which a median or a mean does not.
"""

from __future__ import annotations

import csv
import json
import os

from rog_ros.atomic import atomic_save_figure

KINDS = {              # why a robot was out: colour and legend
    'link': ('#dd8452', 'out: link outage'),
    'too_slow': ('#c44e52', 'out: too slow, ran free'),
    'absent': ('#8c8c8c', 'out: not heard from'),
}


SLACK_COLOUR = '#4c72b0'


def read_events(path: str) -> list:
    """
    Rows of an ``events.csv`` as dicts (time_s float, robot int, info dict); [] if absent.

    A damaged file raises ValueError naming it and the line, before a report writes anything.
    An ``info`` cell that is not a JSON object reads as {} (it only refines the reason).
    """
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding='utf-8', newline='') as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in ('time_s', 'robot', 'event') if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f'{path}: not an events.csv (no column {", ".join(missing)})')
        for row in reader:
            try:
                t, robot = float(row['time_s']), int(row['robot'])
            except (TypeError, ValueError) as err:
                raise ValueError(f'{path}, line {reader.line_num}: {err}') from None
            try:
                info = json.loads(row.get('info') or '{}')
            except ValueError:
                info = {}
            out.append({**row, 'time_s': t, 'robot': robot,
                        'info': info if isinstance(info, dict) else {}})
    return out


def spans(events: list, end_s: float) -> list:
    """
    Return ``(robot, start_s, end_s, kind)`` for each stretch a robot spent out of the check.

    A suspension opens a stretch; a readmission, or the robot's stop when the fleet finished
    while it was out, closes it (a stretch still open at the end closes at ``end_s``). Its
    kind is the suspension's reason, ``too_slow`` when the server let it go as too slow for
    any slack at the same instant (that event follows the suspension).
    """
    open_at, out = {}, []
    for i, e in enumerate(events):
        r, t, name = e['robot'], e['time_s'], e['event']
        if name == 'worker_suspended':
            kind = e['info'].get('reason', 'link')
            later = events[i + 1:i + 4]
            if any(x['event'] == 'too_slow_for_slack' and x['robot'] == r
                   and abs(x['time_s'] - t) < 1e-6 for x in later):
                kind = 'too_slow'
            if r in open_at:                    # re-suspended while out: the reason changed
                s0, k0 = open_at.pop(r)
                out.append((r, s0, t, k0))
            open_at[r] = (t, kind if kind in KINDS else 'link')
        elif name in ('worker_readmitted', 'stopped_after_fleet') and r in open_at:
            s0, k0 = open_at.pop(r)
            out.append((r, s0, t, k0))
    for r, (s0, k0) in sorted(open_at.items()):
        out.append((r, s0, max(end_s, s0), k0))
    return sorted(out, key=lambda s: (s[0], s[1]))


def plot_membership(path: str, runs: list, clock: str = 'time (s)',
                    limit: int = 6) -> str | None:
    """
    Draw each run's timeline (``runs``: ``(title, n_workers, end_s, events)``) into ``path``.

    One panel per run, one bar per robot: shaded while it was out of the check (coloured by
    why), a triangle where its straggler slack changed; the first ``limit`` runs that had a
    suspension or a slack change (a compare directory holds dozens). Returns ``path``, or
    None (and writes nothing) when none had.
    """
    runs = [r for r in runs if any(e['event'] in ('worker_suspended', 'straggler_slack')
                                   for e in r[3])][:limit]
    if not runs:
        return None
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    fig, axes = plt.subplots(len(runs), 1, figsize=(7.0, 0.9 + 0.45 * sum(
        max(1, r[1]) for r in runs)), squeeze=False)
    for ax, (title, n, end_s, events) in zip(axes[:, 0], runs):
        for r, t0, t1, kind in spans(events, end_s):
            ax.broken_barh([(t0, max(t1 - t0, end_s * 2e-3))], (r - 0.35, 0.7),
                           facecolors=KINDS[kind][0])
        slack = [(e['time_s'], e['robot']) for e in events if e['event'] == 'straggler_slack']
        if slack:
            ax.plot([t for t, _ in slack], [r for _, r in slack], '^', color=SLACK_COLOUR, ms=4)
        ax.set_yticks(range(n))
        ax.set_yticklabels([f'robot {r}' for r in range(n)])
        ax.set_ylim(-0.6, n - 0.4)
        ax.set_xlim(0, max(end_s, 1e-9))
        ax.set_title(title, fontsize=9)
        ax.grid(axis='x', alpha=0.3)
    axes[-1, 0].set_xlabel(clock)
    handles = [Patch(color=c, label=lab) for c, lab in KINDS.values()]
    handles.append(Line2D([], [], marker='^', ls='', color=SLACK_COLOUR, label='slack changed'))
    fig.legend(handles=handles, loc='upper right', fontsize=7, ncol=4)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    atomic_save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def membership_markdown(table: list[dict]) -> str:
    """
    Per system whose robots were ever suspended or given slack: the counts, seed by seed.

    A median time or a mean accuracy does not say that a robot was let go on two seeds of
    five; these counts do, and each run's ``events.csv`` says when and why (``rog report``
    draws it). Empty when no system had any (BSP, SSP, FLOWN, a run on clean links).
    """
    rows = []
    for r in table:
        out = r.get('outage_suspensions') or []
        slow = r.get('too_slow_suspensions') or []
        slack = r.get('slack_raises') or []
        if not any(out) and not any(slack):
            continue
        seeds = r.get('finished_seeds') or []
        hit = sum(1 for v in out if v)
        rows.append(f'| {r["system"]} | {hit}/{len(out)} | {", ".join(map(str, out))} | '
                    f'{", ".join(map(str, slow))} | {", ".join(map(str, slack))} | '
                    f'{", ".join(map(str, seeds))} |')
    if not rows:
        return ''
    head = ('| system | seeds with a suspension | suspensions for the link, per seed | of them '
            'too slow, ran free | straggler slack raises | seeds |\n|---|---|---|---|---|---|')
    return '\n'.join([head] + rows) + ("\n\nWhen and why: each run's `events.csv`; "
                                       '`rog report DIR/runs` draws them (`membership.png`).')


MAX_TIMELINES = 6        # membership panels in one report (a compare directory has dozens)


MAX_EVENT_LINES = 12     # sentences per run in report.md (events.csv has them all)


def events_markdown(runs: list) -> list:
    """Report lines: per run with events (the first six), their counts and first sentences."""
    lines, with_events = [], [r for r in runs if r[2]]
    for summary, _, events in with_events[:MAX_TIMELINES]:
        counts = {}
        for e in events:
            counts[e['event']] = counts.get(e['event'], 0) + 1
        lines.append(f'- {summary.get("system")} seed {summary.get("seed")}: '
                     + ', '.join(f'{k} {v}' for k, v in sorted(counts.items())))
        lines += [f'  - {e["time_s"]:.1f} s: {e.get("what") or e["event"]}'
                  for e in events[:MAX_EVENT_LINES]]
        if len(events) > MAX_EVENT_LINES:
            lines.append(f'  - ... {len(events) - MAX_EVENT_LINES} more in events.csv')
    if len(with_events) > MAX_TIMELINES:
        lines.append(f'- ... {len(with_events) - MAX_TIMELINES} more runs with events '
                     '(their events.csv)')
    if not lines:
        return []
    title = '## Events (who was suspended, let go, readmitted, given slack; restarts)'
    return [title, ''] + lines + ['']
