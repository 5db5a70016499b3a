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
A system's accuracy curve over its seeds, as numbers: what the report's curves draw.

Time to target reads the mean of a run's last 3 evaluations; the curves are drawn from the
same smoothing (and the same evaluation set), so a seed's curve crosses the target where
its time to target says. No matplotlib here: a run whose ``timeseries.csv`` draws no curve
is named with the reason even where the plots cannot be drawn.
"""

from __future__ import annotations

import os

import numpy as np


def periodic_rows(rows: list) -> list:
    """
    Return a run's evaluations of one evaluation set: the rows a curve may join.

    A simulated run evaluates on a prefix of the evaluation set as it goes (``samples``
    1,152 for MPCOL) and its final accuracy on the whole set (2,304): a curve through both
    ended in a step that is the two sets' difference, not the model's. The closing row is
    left out when its ``samples`` differ from the rows before it; the final accuracy stays in
    the tables. Rows without an accuracy are left out too.
    """
    rows = [r for r in rows if r.get('accuracy') is not None]
    if len(rows) > 1 and rows[-1].get('samples') != rows[-2].get('samples'):
        rows = rows[:-1]
    return rows


LOG_AXIS_START_FRACTION = 1e-3
"""Evaluations before this fraction of a plot's time span count as the start's (log axis)."""


def running_mean(values: np.ndarray, window: int = 3) -> np.ndarray:
    """Return the mean of each value and the ``window - 1`` before it (fewer at the start)."""
    values = np.asarray(values, dtype=np.float64)
    sums = np.concatenate(([0.0], np.cumsum(values)))
    end = np.arange(1, values.size + 1)
    start = np.maximum(end - window, 0)
    return (sums[end] - sums[start]) / (end - start)


def _smoothed(run: list) -> np.ndarray:
    """Return a run's accuracy smoothed as time to target read it (``accuracy_smoothed``)."""
    recorded = [r.get('accuracy_smoothed') for r in run]
    if all(v is not None for v in recorded):
        return np.asarray(recorded, dtype=np.float64)
    return running_mean([r['accuracy'] for r in run])


def curve_band(runs: list, xkey: str, log: bool = False, smoothed: bool = True):
    """
    Return ``(grid, mean, low, high)`` of a system's seeds on a common x grid, or Nones.

    ``smoothed``: each seed's accuracy is the mean of its last 3 evaluations, the one that
    time to target and the accuracy at equal time read (``accuracy_smoothed`` as recorded,
    else computed the same way), held from one evaluation to the next as they read it: the
    grid is every seed's evaluation points, and the curve is a step at each (drawn
    ``steps-post``), so a seed's curve reaches the target exactly at its time to target.
    Else the raw evaluations, joined linearly on 200 points. ``low`` and ``high`` are the
    lowest and highest seed at each grid point. The grid runs to the *longest* run: a
    finished run keeps its final accuracy (its model no longer changes), so a system whose
    seeds differ in length is drawn over its whole span instead of being cut at its shortest
    seed. ``log``: the grid starts at the earliest evaluation after the start: the one at 0
    has no place on a log axis, and a fleet's is stamped a few microseconds in (9.6e-6 s),
    which drew six decades of flat line before any training; evaluations within the first
    thousandth of the span count as the start.
    """
    runs = [periodic_rows(run) for run in runs if run]
    curves = [(np.array([r[xkey] for r in run], dtype=np.float64),
               _smoothed(run) if smoothed else np.array([r['accuracy'] for r in run]))
              for run in runs if len(run) > 1]
    if not curves:
        return None, None, None, None
    hi = max(c[0].max() for c in curves)
    lo = 0.0
    if log:
        start = hi * LOG_AXIS_START_FRACTION
        firsts = [x[x > start].min() for x, _ in curves if (x > start).any()]
        if not firsts or min(firsts) >= hi:
            return None, None, None, None
        lo = min(firsts)
    if smoothed:
        grid = np.unique(np.concatenate([x for x, _ in curves]))
        grid = grid[grid >= lo] if log else grid
        at = [np.clip(np.searchsorted(x, grid, side='right') - 1, 0, None) for x, _ in curves]
        ys = np.array([y[i] for (_, y), i in zip(curves, at)])
    else:
        grid = np.geomspace(lo, hi, 200) if log else np.linspace(0.0, hi, 200)
        ys = np.array([np.interp(grid, x, y) for x, y in curves])
    return grid, ys.mean(axis=0), ys.min(axis=0), ys.max(axis=0)


def curve_gap(rows: list, path: str) -> str | None:
    """
    Say why a run's ``rows`` (read from ``path``) draw no accuracy curve; None when they do.

    A missing, empty or cut ``timeseries.csv`` is read (a run stopped by a crash or a kill
    still has its summary and its table row), unlike one that is not a run's timeseries,
    which is refused: the curve that cannot be drawn is named with the reason instead.
    """
    n = len(periodic_rows(rows))
    if n > 1:
        return None
    name = os.path.basename(path)
    if not os.path.exists(path):
        return f'{name} is missing: no evaluations recorded'
    cut = _cut(path)
    if cut is None:
        return f'no evaluation recorded ({name} is empty: the run stopped before its first)'
    if not rows:
        why = f'no evaluation recorded ({name} holds its header only)'
    elif n == 0:
        why = f'no evaluation with an accuracy in {name}'
    else:
        why = f'only one evaluation in {name} (a curve needs two)'
    return why + ('; its last line is cut off (the run was stopped while writing it)'
                  if cut else '')


def _cut(path: str) -> bool | None:
    """Return whether ``path`` ends inside a line; None when it is empty or unreadable."""
    try:
        with open(path, 'rb') as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() == 0:
                return None
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) not in (b'\n', b'\r')
    except OSError:
        return None
