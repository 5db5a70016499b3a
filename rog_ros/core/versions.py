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
VersionTable: per-row, per-worker versions and the RSP / SSP / BSP staleness predicate.

``v[i, s]`` is the newest iteration (clock) of worker s whose row-i gradient is included.
Worker r at clock c may start iteration c+1 iff ``c - v[i, s] <= S`` for every row i and
worker s (specs/rog.md 5.1; 'gt' convention). s != r is the same-row-across-workers level,
s == r the rows-within-one-worker level. One row per model reduces this to SSP
(c - min_s c_s <= S) and S = 0 to BSP. The check is one comparison over the M x N table.

Membership (DESIGN section 10): every check takes an optional ``active`` mask ``[N]`` bool; the
columns of workers that are not active (suspended: absent, or their link is dead) are ignored,
so the others keep training. The mask selects columns; the comparison stays one vectorised op.
"""

from __future__ import annotations

import torch


class VersionTable:
    """An ``[M, N]`` int32 table of row versions with vectorised staleness checks."""

    def __init__(self, n_rows: int, n_workers: int):
        if n_rows <= 0 or n_workers <= 0:
            raise ValueError('VersionTable needs at least one row and one worker')
        self.v = torch.zeros(n_rows, n_workers, dtype=torch.int32)

    @property
    def n_rows(self) -> int:
        return self.v.shape[0]

    @property
    def n_workers(self) -> int:
        return self.v.shape[1]

    def stamp(self, worker: int, rows_mask: torch.Tensor, clock: int) -> None:
        """Rows in ``rows_mask`` now include worker's gradients up to ``clock`` (monotone)."""
        col = self.v[:, worker]
        col.copy_(torch.where(rows_mask, torch.clamp(col, min=int(clock)), col))

    def violations(self, clock: int, staleness, active: torch.Tensor | None = None
                   ) -> torch.Tensor:
        """
        Boolean ``[M, N]``: pairs (i, s) with ``clock - v[i, s] > staleness``, s active.

        ``staleness`` is one bound, or one per worker column (``[N]`` int: straggler slack).
        """
        out = self.v < _floor(clock, staleness)
        if active is not None:
            out &= active.unsqueeze(0)
        return out

    def satisfied(self, clock: int, staleness, active: torch.Tensor | None = None
                  ) -> bool:
        """Return True iff a worker at ``clock`` may start its next iteration (RSP predicate)."""
        # per column, the oldest version: O(M x N) reads, no [M, N] temporary (a server
        # checks every waiting worker on every push)
        return columns_satisfy(self.v.amin(dim=0), clock, staleness, active)

    def violating_pairs(self, clock: int, staleness, active: torch.Tensor | None = None
                        ) -> torch.Tensor:
        """``[K, 2]`` (row, worker) pairs that block a worker at ``clock``."""
        return torch.nonzero(self.violations(clock, staleness, active))

    def min_version(self) -> torch.Tensor:
        """Per row, the oldest worker version ``min_s v[i, s]`` (shape [M])."""
        return self.v.min(dim=1).values

    def copy(self) -> 'VersionTable':
        out = VersionTable.__new__(VersionTable)
        out.v = self.v.clone()
        return out


def columns_satisfy(column_min: torch.Tensor, clock: int, staleness,
                    active: torch.Tensor | None = None) -> bool:
    """
    Whether every active column's oldest version is within the bound: the RSP predicate.

    ``column_min``: ``[N]``, the oldest version of each worker column over the rows
    (``v.amin(0)``); ``staleness`` one bound or one per column; ``active`` bool ``[N]``.
    """
    floor = _floor(clock, staleness)
    ok = column_min >= (floor.reshape(-1) if isinstance(floor, torch.Tensor) else floor)
    if active is not None:
        ok |= ~active
    return bool(ok.all())


def _floor(clock: int, staleness):
    """Oldest admissible version: a number, or ``[N]`` per column for per-column bounds."""
    if isinstance(staleness, torch.Tensor):
        return (int(clock) - staleness.to(torch.int32)).unsqueeze(0)
    return int(clock) - int(staleness)
