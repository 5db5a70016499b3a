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
GDS's compression controller: warm-up schedule, per-group densities, EMA of group times.

Pure arithmetic of Algorithm 3 lines 13-24 of the GSP paper with spec 002-2.4's resolutions:
densities, not sparsities (D1); the slowest group over all groups (D3); rule A by default
(``min(s * t_slowest / t_p, s_max)``), B and the literal formula as options (D2); epochs 0-2
use the warm-up densities 0.25, 0.0625, 0.015625 (maximum 0.35, 0.1225, 0.042875), later
epochs 0.004 (0.015) (D8); an epoch's EMA sets the next epoch's densities (D7).
"""

from __future__ import annotations

import numpy as np

GDS_RULES = ('A', 'B', 'literal')
WARMUP_BASE = (0.25, 0.0625, 0.015625)       # 1 - 0.25^k for k = 1..3, as densities
WARMUP_MAX = (0.35, 0.1225, 0.042875)        # 1 - 0.35^k
FINAL_BASE, FINAL_MAX = 0.004, 0.015         # 99.6 % and 98.5 % sparsity
EXACT_BASE, EXACT_MAX = 0.25 ** 4, 0.35 ** 4  # 0.00390625, 0.01500625


def warmup_densities(epoch: int, exact: bool = False) -> tuple:
    """Return the (basic, maximum) upload density of an epoch: warm-up in epochs 0-2 (D8)."""
    if epoch < len(WARMUP_BASE):
        return WARMUP_BASE[epoch], WARMUP_MAX[epoch]
    return (EXACT_BASE, EXACT_MAX) if exact else (FINAL_BASE, FINAL_MAX)


def group_densities(times, base: float, top: float, rule: str = 'A') -> list:
    """
    Upload density per group from its smoothed iteration time (Algorithm 3 lines 19-24).

    The slowest group (D3: max over groups) gets ``base``; rule A gives the others
    ``min(base * t_slowest / t_p, top)``, rule B ``1 - min((1 - base) * t_p / t_slowest,
    1 - top)`` and 'literal' ``min(base * t_p / t_slowest, top)``.
    """
    t = np.asarray(list(times), dtype=np.float64)
    slowest = t.max()
    out = []
    for tp in t:
        if tp == slowest or not tp > 0:
            out.append(float(base))
        elif rule == 'A':
            out.append(float(min(base * slowest / tp, top)))
        elif rule == 'B':
            out.append(float(1.0 - min((1.0 - base) * tp / slowest, 1.0 - top)))
        else:
            out.append(float(min(base * tp / slowest, top)))
    return out


class GdsController:
    """
    The per-epoch compression controller (Algorithm 3 lines 13-24, D7).

    ``end_epoch(times)`` takes the epoch's mean iteration time per group (None: no sample),
    updates the EMA ``t~ = beta t~ + (1 - beta) t`` (``t~_0 = t_0``) and returns the densities
    of the next epoch. Epoch 0 uses the warm-up base density for every group.
    """

    def __init__(self, n_groups: int, rule: str = 'A', beta: float = 0.9, exact: bool = False):
        self.n_groups, self.rule, self.beta, self.exact = n_groups, rule, beta, exact
        self.epoch = 0
        self.ema: list = [None] * n_groups
        self.densities = [warmup_densities(0, exact)[0]] * n_groups

    def end_epoch(self, times) -> list:
        for p, t in enumerate(times):
            if t is None:
                continue
            self.ema[p] = t if self.ema[p] is None else self.beta * self.ema[p] + \
                (1.0 - self.beta) * t
        self.epoch += 1
        base, top = warmup_densities(self.epoch, self.exact)
        known = [e for e in self.ema if e is not None]
        fill = max(known) if known else 1.0
        ema = [e if e is not None else fill for e in self.ema]
        self.densities = group_densities(ema, base, top, self.rule)
        return list(self.densities)
