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
Which runs below a ``rog report`` folder make one table row, and which may not share one.

Runs are averaged as seeds only when they are alike: one system at one setting (workload,
trace, fleet size, driver, target), from one comparison or none, each seed once. A folder
that mixes settings gets one row per system and setting; runs of one setting from different
comparisons are refused rather than averaged as seeds of one another; a seed run twice is
counted once, as its newest run.
"""

from __future__ import annotations

import json
import os

from rog_ros.experiments.comparison_folder import comparison_meta
from rog_ros.experiments.report_systems import system_order
from rog_ros.metrics import PREVIOUS_RUN_DIR


SETTINGS = ('workload', 'trace', 'workers', 'driver', 'target_accuracy')
"""What makes runs comparable: one workload, on one trace, with one fleet size, one driver,
towards one target (times to different targets do not average)."""


def run_setting(summary: dict) -> tuple:
    """Return the values of ``SETTINGS`` of a run, as its row names show them."""
    return tuple(_setting_value(summary, k) for k in SETTINGS)


def _setting_value(summary: dict, key: str) -> str:
    """Return one setting of a run as a row name shows it (``4 workers``, ``target 0.8``)."""
    if key == 'driver':                  # only real fleets name theirs
        return str(summary.get('driver') or 'simulated')
    if key == 'target_accuracy':
        target = summary.get(key)
        return 'no target' if target is None else f'target {float(target):.4g}'
    value = str(summary.get(key, '?'))
    return f'{value} workers' if key == 'workers' else value


def setting_labels(summaries: list):
    """
    Return ``(name_of(summary), varying)``: a row name per run and the settings that differ.

    Runs of one setting keep their system as the name. A folder holding runs of several
    (``rog report runs/``, a fleet run beside a simulated one) would otherwise average a fleet
    of 3 with a simulation of 4 on another trace into one row; there each name carries the
    settings that differ (``rog:4 (outdoors, 4 workers)``).
    """
    settings = {run_setting(s) for s in summaries}
    varying = [k for i, k in enumerate(SETTINGS) if len({st[i] for st in settings}) > 1]

    def name_of(summary: dict) -> str:
        """Return the row name of a run: its system, with the settings that differ."""
        system = str(summary.get('system', '?'))
        if not varying:
            return system
        return f'{system} ({", ".join(_setting_value(summary, k) for k in varying)})'
    return name_of, varying


def _comparisons_below(run_dir: str) -> list:
    """
    Return the folders at or below ``run_dir`` that hold a comparison (``comparison_meta``).

    A summary that cannot be read is no comparison here: ``placed_runs`` names it.
    """
    return [root for root, _, files in sorted(os.walk(run_dir))
            if 'summary.json' in files
            and PREVIOUS_RUN_DIR not in os.path.relpath(root, run_dir).split(os.sep)
            and comparison_meta(root) is not None]


def _group_name(owner, loose: int) -> str:
    """Return how a refusal names a group of runs: its comparison, or the loose runs."""
    if owner is None:
        return f'{loose} run(s) outside any comparison'
    return f'the comparison in {owner}'


def one_comparison(run_dir: str, placed: list, row_name, say=None) -> dict:
    """
    Refuse a folder where runs of different groups would be averaged in one table row.

    ``rog report /tmp`` gathered every run below ``/tmp`` into one table: two comparisons of
    one setting averaged as seeds of one another. Each run belongs to the deepest comparison
    folder above it (``DIR`` of ``DIR/runs/rog-4-seed0``), or to none (a loose run); a row
    (``row_name``, which carries the settings that differ) fed by the runs of more than one
    such group is a ValueError naming the row, its groups and the command for one. Groups
    whose runs land in rows of their own (``runs/cmp`` beside a fleet of another size in
    ``runs/fleet``) share the report, one row per system and setting. ``say(line)`` is told
    when the runs are those of one comparison below ``run_dir`` (its own report is
    ``rog report`` of that folder). Returns the groups: ``{owner: [run folders]}``, the
    owner a comparison's folder or None for the loose runs.
    """
    run_dir = os.path.normpath(run_dir)
    roots = sorted((os.path.normpath(r) for r in _comparisons_below(run_dir)), key=len,
                   reverse=True)
    owners, rows = {}, {}
    for run in placed:
        folder = os.path.normpath(run[3])
        owner = next((r for r in roots if folder == r or folder.startswith(r + os.sep)), None)
        owners.setdefault(owner, []).append(folder)
        rows.setdefault(row_name(run[0]), {}).setdefault(owner, []).append(folder)
    shared = {}                          # the groups that feed one row: the rows they feed
    for row in system_order(rows):
        groups = rows[row]
        if len(groups) > 1:
            key = tuple((o, len(groups[o]) if o is None else 0) for o in sorted(
                groups, key=lambda o: (o is None, o or '')))
            shared.setdefault(key, []).append(row)
    if shared:
        said = '; '.join(
            ('row ' if len(names) == 1 else 'rows ') + ', '.join(map(repr, names)) + ' from '
            + ' and '.join(_group_name(owner, n) for owner, n in key)
            for key, names in shared.items())
        first = min(o for key in shared for o, _ in key if o is not None)
        raise ValueError(
            f'{run_dir} holds runs of one system and setting from different groups, which '
            f'would be averaged as seeds of one another ({said}): point rog report at one '
            f'comparison (rog report {first}) or at one run folder')
    found = sorted(o for o in owners if o is not None)
    if len(owners) == 1 and found and found[0] != run_dir and say is not None:
        say(f'the runs in {run_dir} are those of the comparison in {found[0]}; its own '
            f'report (ratios, equal-time accuracy): rog report {found[0]}')
    return owners


def groups_phrase(owners: dict) -> str:
    """Name the groups of a folder's runs: ``the comparisons in A and B and 2 loose runs``."""
    found = sorted(o for o in owners if o is not None)
    parts = ([('the comparison in ' if len(found) == 1 else 'the comparisons in ')
              + ' and '.join(found)] if found else [])
    if None in owners:
        parts.append(f'{len(owners[None])} run(s) outside any comparison')
    return ' and '.join(parts)


def _written(folder: str) -> float:
    """Return when a run's ``summary.json`` was last written (its mtime; 0 if unreadable)."""
    try:
        return os.path.getmtime(os.path.join(folder, 'summary.json'))
    except OSError:
        return 0.0


RUN_CONFIGURATION_KEYS = ('run_config', 'iteration_budget', 'evaluations', 'eval_samples',
                          'start_model', 'workload_options', 'duplex', 'trace_scale', 'bus')
"""What a run's summary records of how it was made, beyond ``SETTINGS``: two runs of one
system and seed are the same run made twice only when these are equal too."""


def _run_configuration(summary: dict) -> str:
    """Return the ``RUN_CONFIGURATION_KEYS`` of a run as one comparable string."""
    return json.dumps({k: summary.get(k) for k in RUN_CONFIGURATION_KEYS}, sort_keys=True,
                      default=str)


def newest_per_seed(run_dir: str, placed: list, row_name, say=None) -> list:
    """
    Keep one run of each system, seed and setting, the newest; say which, one line per clash.

    Why: ``rog sim --out X/a`` and ``--out X/b`` with the default seed are the same seed run
    twice, and ``rog report X`` averaged them as two seeds (n = 2, a ``±`` from nothing but
    rerunning). Only runs made alike (``RUN_CONFIGURATION_KEYS``) are one run made twice: runs
    of one seed with another budget or start stay, averaged, with one line saying so. The
    run kept is the one whose ``summary.json`` was written last (a summary holds no time of
    its own; the later folder name on a tie): a rerun is what its user looks at. The others
    are left out of the whole report (table, curves, lists), not removed. Runs keep their
    ``placed_runs`` order; ``say(line)`` names the system, the seed and the folders.
    """
    groups, made_as = {}, {}
    for run in placed:
        summary = run[0]
        seed_key = (str(summary.get('system', '?')), str(summary.get('seed')),
                    run_setting(summary))
        config = _run_configuration(summary)
        groups.setdefault(seed_key + (config,), []).append(run)
        made_as.setdefault(seed_key, {}).setdefault(config, []).append(run)
    for configs in made_as.values():
        if len(configs) > 1 and say is not None:
            runs = [run for group in configs.values() for run in group]
            differ = sorted({k for run in runs for k in RUN_CONFIGURATION_KEYS
                             if run[0].get(k) != runs[0][0].get(k)})
            say(f'{row_name(runs[0][0])} seed {runs[0][0].get("seed")} was run with other '
                f'settings in {run_dir} ({", ".join(sorted(run[3] for run in runs))} differ in '
                f'{", ".join(differ)}): averaged in one row as if they were seeds; give each '
                'setting its own folder to report it alone')
    left_out = set()
    for runs in groups.values():
        if len(runs) < 2:
            continue
        newest = max(runs, key=lambda run: (_written(run[3]), run[3]))
        left_out.update(run[3] for run in runs if run is not newest)
        if say is not None:
            summary = newest[0]
            say(f'{row_name(summary)} seed {summary.get("seed")} was run {len(runs)} times '
                f'in {run_dir} ({", ".join(run[3] for run in runs)}): counted once, as the '
                f'newest ({newest[3]}, by when its summary.json was written); give each run '
                'its own --seed to average them as seeds')
    return [run for run in placed if run[3] not in left_out]
