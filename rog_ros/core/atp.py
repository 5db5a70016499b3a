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
ATP (adaptive transmission protocol): urgency, priority order and the MTA-time deadline.

specs/rog.md 5.2-5.6. Urgency is how close a row is to triggering the staleness threshold:
uplink, the number of iterations the worker has withheld the row (``n[i]``); downlink, the
destination's clock minus the oldest version already sent to it. A row one step from
triggering has infinite urgency and is mandatory. Gradient rows are ordered by urgency x
sum|row| (paper 5.2), parameter rows by urgency alone (magnitude breaks ties). Everything is a
few sorts over M rows; nothing loops over rows in Python.
"""

from __future__ import annotations

import math

import numpy as np
from rog_ros.core.sync_constants import CONVENTIONS
import torch


def infinite_mask(urgency: torch.Tensor, staleness: int, convention: str = 'gt'
                  ) -> torch.Tensor:
    """Rows one step from triggering: ``u >= S`` ('gt', the default) or ``u >= S-1`` ('ge')."""
    if convention not in CONVENTIONS:
        raise ValueError(f'unknown staleness convention {convention!r}; use {CONVENTIONS}')
    limit = int(staleness) if convention == 'gt' else int(staleness) - 1
    return urgency >= limit


def priority_order(urgency: torch.Tensor, magnitude: torch.Tensor, infinite: torch.Tensor,
                   use_magnitude: bool = True, multiply: bool = True,
                   candidates: torch.Tensor | None = None) -> torch.Tensor:
    """
    Row ids in transmission order (most important first), deterministic.

    Order: infinite rows first (larger urgency, then larger magnitude); then finite rows by
    priority, descending, where priority = urgency x magnitude if ``multiply`` (gradient rows)
    or urgency with magnitude as tie-break (parameter rows); remaining ties by row id.

    Parameters
    ----------
    urgency, magnitude : Tensor [M]
        Per-row urgency (int) and sum |row| (float).
    infinite : Tensor [M] bool
        From ``infinite_mask``.
    use_magnitude : bool, default True
        False drops the gradient magnitude (ablation 'no gradient magnitude').
    multiply : bool, default True
        True: priority = urgency x magnitude (uplink); False: urgency, ties by magnitude.
    candidates : Tensor [K] long, optional
        Only these rows (ascending ids) take part, e.g. rows with new data on the downlink.

    """
    if candidates is not None:
        urgency, magnitude, infinite = urgency[candidates], magnitude[candidates], \
            infinite[candidates]
    u = urgency.to(torch.float64).numpy()
    mag = magnitude.to(torch.float64).numpy() if use_magnitude else np.zeros_like(u)
    prio = u * mag if (multiply and use_magnitude) else u
    inf_key = np.where(infinite.numpy(), u + 1.0, 0.0)
    # lexsort: last key is primary, ties fall through to earlier keys, then to row id.
    order = torch.from_numpy(np.lexsort((-mag, -prio, -inf_key)))
    return order if candidates is None else candidates[order]


def mta_time(mandatory_bytes: torch.Tensor, throughput_bps: torch.Tensor) -> float:
    """
    MTA time: how long the slowest link needs for its mandatory prefix (seconds).

    Non-stragglers keep sending for this long, so all links finish together (spec 5.6).
    ``throughput_bps`` entries <= 0 (unknown) are ignored; returns 0 when none is known.
    """
    known = throughput_bps > 0
    if not bool(known.any()):
        return 0.0
    t = mandatory_bytes[known].to(torch.float64) * 8.0 / throughput_bps[known].to(torch.float64)
    return float(t.max())


def expected_rows(order: torch.Tensor, row_nbytes: torch.Tensor, k_min: int, budget_s: float,
                  rate_bps: float) -> int:
    """
    Estimate how many leading rows of ``order`` a transfer will carry.

    The mandatory prefix, or more if the rest fits into ``budget_s`` at ``rate_bps``; all
    rows when the rate is unknown or there is no deadline.
    """
    n = int(order.numel())
    if rate_bps <= 0 or not math.isfinite(budget_s):
        return n
    fit = int(torch.searchsorted(torch.cumsum(row_nbytes[order], 0),
                                 torch.tensor(budget_s * rate_bps / 8.0), right=True))
    return max(min(k_min, n), min(fit, n))


class Ewma:
    """
    Throughput estimate from acknowledged bytes over time (EWMA of per-transfer rates).

    ``alpha`` weighs the newest sample; 0.5 follows Wi-Fi swings within two transfers while
    smoothing single outliers. ``value_bps`` is 0 until the first sample (unknown).
    """

    def __init__(self, alpha: float = 0.5):
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f'alpha must be in (0, 1], got {alpha}')
        self.alpha = float(alpha)
        self.value_bps = 0.0
        self.samples = 0

    def update(self, nbytes: float, seconds: float) -> float:
        if nbytes <= 0 or seconds <= 0:
            return self.value_bps
        rate = 8.0 * nbytes / seconds
        self.value_bps = rate if self.samples == 0 else (
            self.alpha * rate + (1.0 - self.alpha) * self.value_bps)
        self.samples += 1
        return self.value_bps


class Smoothed:
    """EWMA of a plain value (e.g. seconds per computation); ``value`` is 0 until observed."""

    def __init__(self, alpha: float = 0.3):
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f'alpha must be in (0, 1], got {alpha}')
        self.alpha = float(alpha)
        self.value = 0.0
        self.samples = 0

    def update(self, x: float) -> float:
        """Fold in one observation and return the smoothed value."""
        self.value = x if self.samples == 0 else self.alpha * x + (1 - self.alpha) * self.value
        self.samples += 1
        return self.value
