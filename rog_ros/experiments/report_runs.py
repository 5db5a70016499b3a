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
The runs below a folder, read back for ``rog report``: each run's summary, curve and events.

Any folder may be given (one run, a comparison, a folder of many): every ``summary.json``
of a run below it is read, checked (``summary_checks``), and taken with its
``timeseries.csv`` and ``events.csv``; a folder with none is refused with the reason (missing,
not a run's summary, a comparison without its runs, a run still in progress).
"""

from __future__ import annotations

import json
import os

from rog_ros.experiments.membership import read_events
from rog_ros.experiments.summary_checks import check_figures
from rog_ros.metrics import PREVIOUS_RUN_DIR, read_timeseries
from rog_ros.nodes.output_lock import LOCK_FILE, lock_holder


def load_runs(run_dir: str) -> list:
    """
    Return ``[(summary, timeseries rows, events), ...]`` of every run under ``run_dir``.

    A run is a directory holding ``summary.json`` (and ``timeseries.csv``, ``events.csv``), as
    written by ``rog fleet``, ``rog_server``, ``rog sim`` and each run of ``rog compare``;
    ``events`` is [] for runs written before ``events.csv`` existed. The earlier run that a
    run set aside below itself (``previous/``) is not one of them.
    """
    return [run[:3] for run in placed_runs(run_dir)]


def placed_runs(run_dir: str) -> list:
    """Return ``[(summary, timeseries rows, events, folder), ...]``: ``load_runs``, placed."""
    runs = []
    for root, _, files in sorted(os.walk(run_dir)):
        if PREVIOUS_RUN_DIR in os.path.relpath(root, run_dir).split(os.sep):
            continue                     # the run before, set aside below a run
        if 'summary.json' not in files:
            continue
        path = os.path.join(root, 'summary.json')
        with open(path, encoding='utf-8') as fh:
            try:
                summary = json.load(fh)
            except ValueError as err:
                raise ValueError(f'{path}: not a summary ({err})') from None
        if not isinstance(summary, dict) or 'system' not in summary:
            continue        # a comparison's own summary (its runs are below it), or foreign
        check_figures(path, summary)
        series = os.path.join(root, 'timeseries.csv')
        rows = _read_text(read_timeseries, series) if os.path.exists(series) else []
        runs.append((summary, rows, _read_text(read_events, os.path.join(root, 'events.csv')),
                     root))
    return runs


def _read_text(read, path):
    """Return ``read(path)``; a file that is not UTF-8 text is a ValueError naming it."""
    try:
        return read(path)
    except UnicodeDecodeError:
        raise ValueError(f'{path}: not a text file (rog writes {os.path.basename(path)} as '
                         'UTF-8 CSV)') from None


def why_no_runs(run_dir: str) -> str:
    """Say why ``run_dir`` has no run: it is missing, or what its summary.json files are."""
    if not os.path.exists(run_dir):
        return f'{run_dir}: no such directory'
    if not os.path.isdir(run_dir):
        return (f'{run_dir}: not a directory; RUN_DIR is the output directory of rog fleet, '
                'rog sim --out, rog compare or rog_server')
    running = _still_running(run_dir)
    if running:
        return running
    for root, _, files in sorted(os.walk(run_dir)):
        if 'summary.json' not in files or PREVIOUS_RUN_DIR in os.path.relpath(
                root, run_dir).split(os.sep):
            continue
        path = os.path.join(root, 'summary.json')
        try:
            with open(path, encoding='utf-8') as fh:
                doc = json.load(fh)         # load_runs read it already
        except (OSError, ValueError) as err:
            return f'{path}: not a summary ({err})'
        if isinstance(doc, dict) and 'systems' in doc:
            return (f"{path} is a comparison's summary, but none of its runs is below it "
                    '(each run has a summary.json of its own)')
        kind = 'an empty object' if doc == {} else (
            f'a JSON {type(doc).__name__}' if not isinstance(doc, dict) else 'an object without '
            '"system"')
        return (f'{path}: not a run summary ({kind}; the summary.json of a run is an object '
                'naming its "system", as rog fleet, rog sim and rog compare write it)')
    return f'{run_dir}: no summary.json found (not a fleet or simulator run)'


def _still_running(run_dir: str) -> str:
    """
    Say which run below ``run_dir`` is still in progress, and where its progress is ('').

    A run holds its output folder's lock (``output_lock``) until it ends, however it ends,
    and writes ``summary.json`` only then: a folder without one is not a failed run while
    that lock is held.
    """
    for root, _, files in sorted(os.walk(run_dir)):
        if LOCK_FILE not in files:
            continue
        holder = lock_holder(os.path.join(root, LOCK_FILE))
        if holder is None:
            continue
        log = next((p for p in (os.path.join(root, 'logs', 'rog_server.log'),
                                os.path.join(root, 'logs')) if os.path.exists(p)), None)
        return (f'{root}: the run there is still in progress ({holder}); it writes '
                'summary.json when it ends, then rog report can draw it'
                + (f'; its progress so far: {log}' if log else ''))
    return ''
