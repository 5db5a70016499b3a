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
MTA (minimum transmission amount): the fraction of rows a sender must push per iteration.

Paper (specs/rog.md 5.4): with staleness threshold S and rows left out at random, a row survives
S-1 transfers with probability (1-P)^(S-1); requiring that to be below P gives Table 1. The
printed rule triggers at staleness S while our RSP predicate triggers at S+1, hence the shifted
variant (1-P)^S = P; a deterministic round-robin needs only 1/(S+1). All are offered, because
the choice trades bandwidth against threshold triggers and the paper is inconsistent about it.
"""

from __future__ import annotations

import math

PAPER_TABLE = {2: 0.5, 3: 0.38, 4: 0.32, 5: 0.28, 6: 0.25, 7: 0.22, 8: 0.2}
"""Table 1 of the paper: roots of (1-P)^(S-1) = P rounded to two decimals."""

RULES = ('paper_table', 'exact_root_printed', 'exact_root_shifted', 'round_robin')
MAX_EXACT_S = 40


def _root(exponent: int) -> float:
    """Root in (0, 1) of (1-P)^exponent = P by bisection (monotone: LHS falls, RHS rises)."""
    if exponent <= 0:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if (1.0 - mid) ** exponent > mid:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def mta(staleness: int, rule: str = 'paper_table', mta_at_one: float = 0.5) -> float:
    """
    Minimum fraction of rows to transmit per transfer for threshold ``staleness``.

    Parameters
    ----------
    staleness : int
        Threshold S >= 0. MTA(0) = 1 for every rule (BSP sends everything).
    rule : str, default 'paper_table'
        'paper_table' (Table 1 for S = 2..8, printed exact root otherwise),
        'exact_root_printed' ((1-P)^(S-1) = P), 'exact_root_shifted' ((1-P)^S = P),
        'round_robin' (1/(S+1)).
    mta_at_one : float, default 0.5
        MTA(1) for the printed rules, whose equation has no root below 1 there: the paper's
        text says 0.5, the artifact uses 1.0.

    """
    if rule not in RULES:
        raise ValueError(f'unknown MTA rule {rule!r}; choose one of {RULES}')
    s = int(staleness)
    if s < 0:
        raise ValueError(f'staleness must be >= 0, got {staleness}')
    if s == 0:
        return 1.0
    if rule == 'round_robin':
        return 1.0 / (s + 1)
    if rule == 'exact_root_shifted':
        return _root(s)
    if s == 1:
        return float(mta_at_one)
    if rule == 'paper_table' and s in PAPER_TABLE:
        return PAPER_TABLE[s]
    if s > MAX_EXACT_S:
        # The root keeps falling like ~ln(S)/S; clamp at the last tabulated exact value so a
        # huge S never turns into "send nothing".
        return _root(MAX_EXACT_S - 1)
    return _root(s - 1)


def mandatory_rows(n_rows: int, mta_fraction: float, n_infinite: int) -> int:
    """Mandatory prefix length: max(ceil(MTA * M), #infinite-urgency rows), at most M."""
    k = max(int(math.ceil(mta_fraction * n_rows - 1e-9)), int(n_infinite))
    return min(k, int(n_rows))


def row_budget(q: float, mta_fraction: float, n_rows: int) -> int:
    """
    Return the q x MTA row budget (specs/rog.md 5.5).

    q = own throughput / slowest throughput.
    """
    if q < 1.0:
        q = 1.0
    return min(int(n_rows), int(math.ceil(q * mta_fraction * n_rows - 1e-9)))
