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
The ratios the paper reports: each Rog system's statistics over each other system's.

Rog's claim is a ratio (its time to target over SSP's and BSP's); a ratio of times says
nothing of the seeds that never reached the target, so each line carries how many seeds of
each side reached it, and a side that never did is said so (``rog:4 did not reach the target
(0/3)``) instead of dropped.
"""

from __future__ import annotations


TIME_RATIOS = (('time_to_target_s_median', 'median time to target'),
               ('time_to_target_s', 'mean time to target'),
               ('s_per_iteration_to_target_median', 'median s/iteration to target'))
"""The ratios of the phase up to the target: each line says how many seeds reached it."""


OTHER_RATIOS = (('s_per_iteration', 's/iteration'), ('stall_s_per_iteration', 'stall/iteration'))


def _reached(row: dict):
    """Return ``(seeds that reached the target, runs)`` of a table row."""
    runs = row.get('runs') or 0
    return int(row.get('reached_target_count') or 0), int(runs)


def _time_ratios(a: str, ra: dict, b: str, rb: dict) -> list:
    """Return the time-to-target parts of the line ``a / b``, with both reach counts."""
    (na, ta), (nb, tb) = _reached(ra), _reached(rb)
    missed = [f'{name} did not reach the target (0/{runs})'
              for name, n, runs in ((a, na, ta), (b, nb, tb)) if not n]
    if missed:
        return missed
    parts, counts = [], f'{na}/{ta} and {nb}/{tb} seeds reached'
    for key, name in TIME_RATIOS:
        x, y = ra.get(key), rb.get(key)
        if x is not None and y:
            parts.append(f'{name} {x / y:.2f}')
        elif key.endswith('_median') and key in ra and key in rb and None in (x, y):
            who = ' and '.join(n for n, v in ((a, x), (b, y)) if v is None)
            parts.append(f'{name} - (that of {who} falls on a seed that missed it; {counts})')
            counts = ''
    if parts and counts:
        parts[0] += f' ({counts})'
    return parts


def ratios_markdown(table: list[dict]) -> str:
    """
    Return one line per Rog system and other system: the ratios of their statistics.

    The ratios of times to the target carry how many seeds of each side reached it; a side
    that never reached it is said so (``rog:4 did not reach the target (0/3)``), not dropped.
    """
    rows = {r['system']: r for r in table}
    out = []
    for a in [s for s in rows if s.startswith('rog')]:
        for b in [s for s in rows if not s.startswith('rog')]:
            parts = _time_ratios(a, rows[a], b, rows[b])
            for key, name in OTHER_RATIOS:
                x, y = rows[a].get(key), rows[b].get(key)
                if x is not None and y:
                    parts.append(f'{name} {x / y:.2f}')
            if parts:
                out.append(f'- {a} / {b}: ' + ', '.join(parts))
    return '\n'.join(out)
