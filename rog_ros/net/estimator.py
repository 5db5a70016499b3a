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
Throughput estimators: an EWMA over acknowledged transfers, and a lagged netmon-style oracle.

``ThroughputEstimator`` is what a worker can know without help from the network: the goodput of
its own finished transfers. ``LaggedRateOracle`` is what the artifact's FLOWN scheduler saw: the
link's configured rate, polled about once per second (``read_bandwidth_thread``) and delivered
late (specs/rog.md 7.3). Both are pure: the caller passes sizes, durations and times.
"""

from __future__ import annotations

import math

import numpy as np

from rog_ros.net.traces import Trace


class ThroughputEstimator:
    """
    Exponentially weighted moving average of transfer throughput.

    Parameters
    ----------
    alpha : float, default 0.3
        Weight of the newest sample, in (0, 1]. 0.3 forgets a sample's weight to 3% after ten
        transfers: quick enough for Wi-Fi that changes every ~0.4 s at transfer granularity.

    """

    def __init__(self, alpha: float = 0.3):
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f'alpha must be in (0, 1], got {alpha}')
        self.alpha = float(alpha)
        self._bps = math.nan  # bits per second; nan until the first sample
        self.samples = 0      # number of samples taken

    def update(self, nbytes: int, seconds: float) -> float:
        """Add one acknowledged transfer of ``nbytes`` that took ``seconds``; returns bit/s."""
        if not (nbytes >= 0 and seconds > 0 and math.isfinite(seconds)):
            raise ValueError(f'need nbytes >= 0 and finite seconds > 0, got {nbytes}, {seconds}')
        bps = 8.0 * nbytes / seconds
        self._bps = bps if self.samples == 0 else self.alpha * bps + (1 - self.alpha) * self._bps
        self.samples += 1
        return self._bps

    @property
    def ready(self) -> bool:
        """Tell whether at least one sample was taken."""
        return self.samples > 0

    @property
    def value_bps(self) -> float:
        """Return the estimate in bit/s (nan before the first sample)."""
        return self._bps

    @property
    def value_mbps(self) -> float:
        """Return the estimate in Mbit/s (nan before the first sample)."""
        return self._bps / 1e6


class LaggedRateOracle:
    """
    The trace's rate polled every ``period_s`` and seen ``lag_s`` after the poll.

    At time t the reported value is ``trace.rate_at(k * period_s + time_offset_s)`` with
    ``k = floor((t - lag_s) / period_s)``: the newest poll that is at least ``lag_s`` old
    (clamped to the first poll before that exists).

    Parameters
    ----------
    trace : Trace
    lag_s : float, default 1.0
        Delay from poll to use (a push interval in the artifact).
    period_s : float, default 1.0
        Polling period (the artifact's ``sleep(1)``).
    time_offset_s : float, default 0.0
        As in ``FluidLink``: time t reads the trace at t + time_offset_s.

    """

    def __init__(self, trace: Trace, lag_s: float = 1.0, period_s: float = 1.0,
                 time_offset_s: float = 0.0):
        if not (lag_s >= 0 and period_s > 0):
            raise ValueError(f'need lag_s >= 0 and period_s > 0, got {lag_s}, {period_s}')
        self.trace = trace
        self.lag_s = float(lag_s)
        self.period_s = float(period_s)
        self.time_offset_s = float(time_offset_s)

    def mbps_at(self, t):
        """Return the reported rate in Mbit/s at time(s) ``t`` (vectorised)."""
        k = np.maximum(np.floor((np.asarray(t, dtype=np.float64) - self.lag_s) / self.period_s),
                       0.0)
        return self.trace.rate_at(k * self.period_s + self.time_offset_s)

    def bps_at(self, t):
        """Return the reported rate in bit/s at time(s) ``t``."""
        return self.mbps_at(t) * 1e6
