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
Warn of a gap in a real record: a step between two samples far longer than the record's own.

A logger that stopped (often because the link did), a ``sar`` restarted, a bag of several
netmon runs: the trace holds one rate through the time nothing was recorded, which can be an
outage that the replay turns into a good link. Every reader of a format with timestamps (tables,
bags, drive logs, ``sar`` reports, iperf reports, the testbed's replay logs) warns through
``warn_gaps``, with its format's advice. Formats without gaps by construction (Mahimahi, whose
missing delivery opportunities are the link's zeros, and tshark's intervals) need none.
"""

from __future__ import annotations

import numpy as np
from rog_ros.net.notices import warn

GAP_STEPS = 10.0
"""A step between two samples longer than this many median steps is a gap in the record (the
logger stopped, often because the link did, or a bag holds several netmon runs): its rate is
held through the gap, which ``warn_gaps`` warns about."""


def warn_gaps(path, times, rates, advice: str, explained=None) -> None:
    """
    Warn once when a step between samples exceeds ``GAP_STEPS`` median steps (a gap).

    ``times``: the samples' start times (s); ``rates``: their rates, the one held through a
    step; ``advice``: what to do about it, in the format's terms. ``explained``: per step, the
    seconds the record itself says it held its rate (the testbed's ``Stop for N seconds``),
    which are no gap; None: none.
    """
    if len(times) < 3:
        return
    t = np.asarray(times, dtype=np.float64)
    step = np.diff(t)
    if explained is not None:
        step = np.maximum(step - np.asarray(explained, dtype=np.float64)[:step.size], 0.0)
    median = float(np.median(step))
    if not median > 0.0:
        return
    gaps = np.flatnonzero(step > GAP_STEPS * median)
    if not gaps.size:
        return
    k = int(gaps[np.argmax(step[gaps])])
    more = f' ({gaps.size} such gaps; this is the longest)' if gaps.size > 1 else ''
    held = '' if explained is None or not explained[k] else ' (beyond the hold it logged)'
    warn(f'{path}: no sample for {step[k]:.6g} s{held} after t={t[k] - t[0]:.6g} s, '
         f'{step[k] / median:.3g} times the median step of {median:.6g} s{more}: the '
         f'rate before it, {rates[k]:.6g} Mbit/s, is held through it; {advice}')
