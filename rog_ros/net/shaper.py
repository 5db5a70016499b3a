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
Application-level token bucket whose fill rate follows a trace (``rog fleet`` shaping).

Tokens are bytes. They accrue at the trace's rate, capped at ``burst_bytes``. A message of n
bytes may leave once the bucket holds ``min(n, burst_bytes)`` tokens; it then takes n tokens,
so a message larger than the burst leaves the bucket in debt that later accrual repays. A
backlogged sender therefore gets exactly the integral of the trace, and an idle one can send a
burst at once. Decisions are FIFO: a message never leaves before the previous one.

Pure: the caller passes the time and sleeps for the returned delay; no clocks here.
"""

from __future__ import annotations

import math

from rog_ros.net.traces import Trace

BYTES_PER_MBIT = 125_000.0


class TokenBucketShaper:
    """
    Token bucket driven by ``trace``.

    Parameters
    ----------
    trace : Trace
        Fill rate over time (Mbit/s).
    burst_bytes : int
        Bucket size; also the tokens at time ``start_s``. One 64 KiB chunk is a sensible value:
        smaller makes every chunk wait, larger lets bursts exceed the trace.
    start_s : float, default 0.0
        Time at which the bucket is full.
    time_offset_s : float, default 0.0
        Time t reads the trace at t + time_offset_s.

    """

    def __init__(self, trace: Trace, burst_bytes: int, start_s: float = 0.0,
                 time_offset_s: float = 0.0):
        if not burst_bytes > 0:
            raise ValueError(f'burst_bytes must be > 0, got {burst_bytes}')
        self.trace = trace
        self.burst_bytes = float(burst_bytes)
        self.time_offset_s = float(time_offset_s)
        self._t = float(start_s)            # time of the last decision
        self._tokens = self.burst_bytes     # tokens at self._t (negative: debt)

    def _accrued(self, t0: float, t1: float) -> float:
        off = self.time_offset_s
        return (self.trace.cumulative_mbit(t1 + off)
                - self.trace.cumulative_mbit(t0 + off)) * BYTES_PER_MBIT

    def tokens_at(self, now_s: float) -> float:
        """Tokens the bucket will hold at ``now_s`` (>= the last decision time), no change."""
        now = max(float(now_s), self._t)
        return min(self.burst_bytes, self._tokens + self._accrued(self._t, now))

    def delay_for(self, nbytes: int, now_s: float) -> float:
        """
        Seconds to wait from ``now_s`` before sending ``nbytes``; reserves the tokens.

        Returns inf when the trace never supplies enough tokens (a permanent outage).
        """
        if nbytes < 0:
            raise ValueError(f'nbytes must be >= 0, got {nbytes}')
        begin = max(float(now_s), self._t)
        tokens = self.tokens_at(begin)
        need = min(float(nbytes), self.burst_bytes)
        send = begin
        if tokens < need:
            off = self.time_offset_s
            target = self.trace.cumulative_mbit(begin + off) + (need - tokens) / BYTES_PER_MBIT
            send = max(begin, float(self.trace.time_for_mbit(target)) - off)
            if not math.isfinite(send):
                return math.inf
            tokens = need
        self._t, self._tokens = send, tokens - float(nbytes)
        return send - float(now_s)
