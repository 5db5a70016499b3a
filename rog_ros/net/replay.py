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
Replay a bandwidth record the way the Rog authors' testbed did (specs/rog_artifact.md 5.1).

The testbed did not play its records back as recorded. Worker rank k started at k/6 of the
record, scaled every rate by 0.7, and after each record step drew ``randint(1, 20)`` from
Python's ``random`` seeded with k + 2: above 10 (probability 1/2) it held the current rate for
another ``randint(10, 90)`` seconds. Those holds fill 98% of the replayed time, so the regime
the paper's outdoor results were measured in (long stretches at one rate: the ``outdoors``
preset) is a property of the replay, not of the record. :func:`replay` turns any record (a
:class:`~rog_ros.net.traces.Trace`, e.g. a real measurement read by ``load_trace``) into that
regime, draw for draw, so a real record can be compared both ways: raw (``--trace
record.txt``) and replayed (``rog trace replay record.txt --out replayed.csv``).

The draws use Python's Mersenne Twister in the artifact's order, one record step at a time: a
loop over record steps (thousands per hour of record), not over model rows.
"""

from __future__ import annotations

import random

import numpy as np
from rog_ros.net.traces import Trace, TraceFormatError

ARTIFACT_SCALE = 0.7
"""Every worker's replayed rate: the record's times 0.7 (the script's ``worker`` mode)."""

HOLD_DRAW_ABOVE = 10
"""A step is held when ``randint(1, 20)`` exceeds this (probability 1/2)."""

HOLD_RANGE_S = (10, 90)
"""Length of a hold: ``randint(10, 90)`` seconds."""

MAX_REPLAY_STEPS = 10_000_000
"""Most segments one replay may have: a long ``duration_s`` over a short record without holds
would otherwise loop for hours and fill the memory before anything is written."""


def replay(record: Trace, rank: int = 0, scale: float = ARTIFACT_SCALE, holds: bool = True,
           hold_range_s: tuple = HOLD_RANGE_S, duration_s: float | None = None,
           seed: int | None = None) -> Trace:
    """
    Return the rates robot ``rank`` saw when the testbed replayed ``record``.

    Parameters
    ----------
    record : Trace
        The record; its segments are the record's steps (the last one ends at ``end_s``).
    rank : int, default 0
        Worker rank k >= 0: the replay starts at step ``int(len(record) / 6 * k)`` (wrapping
        for k >= 6, which the five-robot testbed never reached) and draws with seed k + 2.
    scale : float, default 0.7
        Rate multiplier (1.0 replays the record's own rates).
    holds : bool, default True
        False: no random holds, only the start offset and the scale.
    hold_range_s : (int, int), default (10, 90)
        Bounds of a hold's length in whole seconds, both included.
    duration_s : float, optional
        Replay at least this long (passes through the record, the draws continuing);
        default one pass.
    seed : int, optional
        The draws' seed instead of rank + 2 (other samples of the same procedure).

    Returns
    -------
    Trace
        Looping, one segment per record step (its step plus its hold), ``resolution_s`` the
        record's.

    Raises
    ------
    TraceFormatError
        A record of fewer than 3 steps (the testbed wrapped two steps before the end).
    ValueError
        A negative rank, a scale that is not positive and finite, bad hold bounds, or a
        ``duration_s`` that needs more than ``MAX_REPLAY_STEPS`` segments.

    """
    n = len(record)
    if n < 3:
        raise TraceFormatError(f'a replay needs a record of at least 3 steps, got {n}')
    if rank < 0:
        raise ValueError(f'rank must be >= 0, got {rank}')
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f'scale must be positive and finite, got {scale}')
    lo, hi = (int(v) for v in hold_range_s)
    if not 0 < lo <= hi:
        raise ValueError(f'hold bounds must satisfy 0 < min <= max, got {hold_range_s}')
    if duration_s is not None and not duration_s > 0:
        raise ValueError(f'duration_s must be > 0, got {duration_s}')
    steps = np.diff(np.append(record.t_s, record.end_s))
    usable = n - 2                               # indices 0 .. n-3: the script wrapped there
    start = int(n / 6 * rank) % usable
    too_long = ValueError(f'duration_s={duration_s} needs more than {MAX_REPLAY_STEPS} '
                          f'segments of this {record.duration_s:g} s record')
    pass_s = float(steps[:usable].sum())         # a pass without holds: holds only lengthen it
    if not holds and duration_s is not None and duration_s / pass_s * usable > MAX_REPLAY_STEPS:
        raise too_long
    rng = random.Random(rank + 2 if seed is None else seed)
    order, held = [], []
    total, target = 0.0, duration_s
    while True:
        if len(order) + usable > MAX_REPLAY_STEPS:
            raise too_long
        for k in range(usable):
            idx = (start + k) % usable
            hold = 0
            if rng.randint(1, 20) > HOLD_DRAW_ABOVE:
                hold = rng.randint(lo, hi)
            order.append(idx)
            held.append(hold if holds else 0)
            total += steps[idx] + held[-1]
        if target is None or total >= target:
            break
    idx = np.asarray(order)
    length = steps[idx] + np.asarray(held, dtype=np.float64)
    t = np.concatenate(([0.0], np.cumsum(length)[:-1]))
    return Trace(t, record.mbps[idx] * scale, float(length.sum()), True, record.resolution_s)
