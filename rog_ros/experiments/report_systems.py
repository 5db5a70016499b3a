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
How every report shows its systems: in which order, and in which colour.

A reader compares reports side by side (``rog compare``, ``rog report``, ``rog reproduce``):
BSP, SSP, FLOWN and Rog come in that order in every table, plot and legend, and each
system keeps its colour from one report to the next (a threshold as a shade of its
family's), so a curve is recognised without reading its legend.
"""

from __future__ import annotations

import math
import zlib


FAMILY_COLORS = {'bsp': '#1f77b4', 'ssp': '#ff7f0e', 'flown': '#2ca02c', 'rog': '#d62728'}
"""The colour of each main family (tab10's first four), the same in every report."""


CANONICAL_THRESHOLD = 4
"""The threshold drawn in its family's own colour; other thresholds get shades of it."""


SHADED_THRESHOLDS = (5, 6, 7, 8, 10, 12, 16, 20, 30, 40)
"""Thresholds above 4 that get darker shades step by step (``rog reproduce``'s, and more)."""


OTHER_COLORS = ('#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf',
                '#c5b0d5', '#c49c94', '#f7b6d2', '#c7c7c7', '#dbdb8d', '#9edae5')
"""tab10's last six and their tab20 light shades: the colours of every other system."""


def _family_threshold(name: str):
    """Return ``(family, threshold or None)`` of a main system's name, else None."""
    family, _, rest = name.partition(':')
    if family not in FAMILY_COLORS:
        return None
    if family == 'bsp':
        return (family, None) if not rest else None
    return (family, int(rest)) if rest.isdigit() and int(rest) > 0 else None


FAMILY_ORDER = ('bsp', 'ssp', 'flown', 'rog')
"""The order of the main families in every table, plot and legend; other systems follow."""


def system_order(names) -> list:
    """
    Return ``names`` in the reports' order: BSP, SSP, FLOWN, Rog (each by threshold), others.

    Other systems (ablations, reference systems) keep the order they come in (a comparison's
    ``--systems``, the folders of ``rog report``). A name that carries its setting after the
    system (``rog:4 (outdoors)``, ``setting_labels``) is placed by its system, and one system
    at several settings keeps the order of its settings.
    """
    def key(item):
        """Return the sort key of ``(position, name)``."""
        at, name = item
        main = _family_threshold(name.split(' (')[0])
        if main is None:
            return (len(FAMILY_ORDER), 0, at)
        return (FAMILY_ORDER.index(main[0]), main[1] or 0, at)
    return [name for _, name in sorted(enumerate(names), key=key)]


def _shade(color: str, amount: float) -> str:
    """Return ``color`` blended towards white (amount < 0) or black (amount > 0)."""
    rgb = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    to = 255 if amount < 0 else 0
    mixed = [round(c + (to - c) * min(abs(amount), 1.0)) for c in rgb]
    return '#' + ''.join(f'{c:02x}' for c in mixed)


def system_color(name: str) -> str:
    """
    Return the colour of system ``name``, the same in every report.

    bsp, ssp:S, flown:S and rog:S have their family's colour (threshold 4 exactly, other
    thresholds a lighter shade below 4 and a darker one above); any other name (an ablation,
    a reference system) a colour of ``OTHER_COLORS`` picked by a checksum of the name.
    """
    main = _family_threshold(name)
    if main is None:
        return OTHER_COLORS[zlib.crc32(name.encode('utf-8')) % len(OTHER_COLORS)]
    family, threshold = main
    base = FAMILY_COLORS[family]
    if threshold is None or threshold == CANONICAL_THRESHOLD:
        return base
    if threshold < CANONICAL_THRESHOLD:
        return _shade(base, -0.2 * (CANONICAL_THRESHOLD - threshold))
    if threshold in SHADED_THRESHOLDS:
        return _shade(base, 0.06 * (SHADED_THRESHOLDS.index(threshold) + 1))
    return _shade(base, min(0.65, 0.1 * math.log2(threshold / CANONICAL_THRESHOLD) + 0.03))


def system_colors(names) -> dict:
    """
    Return ``{name: colour}`` for the systems of one plot: ``system_color``, told apart.

    Two other systems whose checksums pick the same colour would read as one; the later of
    them (in name order) takes the next free colour. Main systems never move.
    """
    colors = {n: system_color(n) for n in names}
    taken = {c for n, c in colors.items() if _family_threshold(n) is not None}
    for n in sorted(n for n in colors if _family_threshold(n) is None):
        at = OTHER_COLORS.index(colors[n])
        for k in range(len(OTHER_COLORS)):
            pick = OTHER_COLORS[(at + k) % len(OTHER_COLORS)]
            if pick not in taken:
                colors[n] = pick
                break
        taken.add(colors[n])
    return colors
