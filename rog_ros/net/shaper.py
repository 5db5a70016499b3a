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
so a message larger than the burst leaves the bucket in debt that later accrual repays. An idle
sender can send a burst at once. Decisions are FIFO: a message never leaves before the
previous one.

An outage (a stretch of rate 0) empties the bucket: nothing leaves while the rate is 0, and
tokens earned before it are gone after it (a link that came back has no saved-up airtime), so
the first message after an outage waits for tokens earned after it. Debt stays: an outage
repays nothing. A backlogged sender therefore gets the integral of the trace less at most one
bucket per outage.

Pure: the caller passes the time and sleeps for the returned delay; no clocks here.
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from rog_ros.net.traces import Trace

BYTES_PER_MBIT = 125_000.0


class TokenBucketShaper:
    """
    Token bucket driven by ``trace``.

    Parameters
    ----------
    trace : Trace
        Fill rate over time (Mbit/s); a stretch of rate 0 (an outage) empties the bucket.
    burst_bytes : int
        Bucket size; also the tokens at time ``start_s``. One 64 KiB chunk is a sensible value:
        smaller makes every chunk wait, larger lets bursts exceed the trace.
    start_s : float, default 0.0
        Time at which the bucket is full (empty when the trace is in an outage then).
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
        self._starts, self._ends = _outages(trace)
        # rate 0 only: one outage for all time, which does not repeat
        self._loop = trace.loop and not (self._ends and self._ends[-1] == math.inf)
        self._most = _most_after(trace, self._starts, self._ends, self._loop)
        self._t = float(start_s)            # time of the last decision
        self._tokens = self.burst_bytes     # tokens at self._t (negative: debt)
        if self._outage_at(self._t + self.time_offset_s) is not None:
            self._tokens = 0.0

    def _accrued(self, t0: float, t1: float) -> float:
        """Return the bytes the trace supplies from trace time ``t0`` to ``t1``."""
        return (self.trace.cumulative_mbit(t1)
                - self.trace.cumulative_mbit(t0)) * BYTES_PER_MBIT

    def _last_outage(self, tt: float):
        """Return ``(start, end)`` (trace time) of the last outage starting by ``tt``, or None."""
        starts = self._starts
        if not starts:
            return None
        if not self._loop:
            k = bisect.bisect_right(starts, tt) - 1
            return (starts[k], self._ends[k]) if k >= 0 else None
        n = math.floor(tt / self.trace.end_s)
        k = bisect.bisect_right(starts, tt - n * self.trace.end_s) - 1 + n * len(starts)
        out = self._periodic(k)
        return out if out[0] <= tt else self._periodic(k - 1)    # rounding of tt - n * end

    def _outage_at(self, tt: float):
        """Return ``(start, end)`` of the outage trace time ``tt`` is in (rate 0), or None."""
        last = self._last_outage(tt)
        return last if last is not None and last[1] > tt else None

    def _next_outage_start(self, tt: float) -> float:
        """Return the trace time of the first outage start after ``tt`` (inf: none)."""
        starts = self._starts
        if not starts:
            return math.inf
        if not self._loop:
            k = bisect.bisect_right(starts, tt)
            return starts[k] if k < len(starts) else math.inf
        n = math.floor(tt / self.trace.end_s)
        k = bisect.bisect_right(starts, tt - n * self.trace.end_s) + n * len(starts)
        out = self._periodic(k)[0]
        return out if out > tt else self._periodic(k + 1)[0]   # rounding of tt - n * end

    def _periodic(self, k: int) -> tuple:
        """Return ``(start, end)`` of a looping trace's outage ``k``, counted from trace time 0."""
        n, j = divmod(k, len(self._starts))
        return self._starts[j] + n * self.trace.end_s, self._ends[j] + n * self.trace.end_s

    def _tokens_trace(self, tt: float) -> float:
        """Return the tokens at trace time ``tt`` (>= the last decision's), no change."""
        a, tokens = self._t + self.time_offset_s, self._tokens
        tt = max(tt, a)
        last = self._last_outage(tt)
        if last is not None and last[1] > a:         # an outage since: its credit is gone
            start = max(last[0], a)
            tokens = min(0.0, tokens + self._accrued(a, start))
            a = start
        return min(self.burst_bytes, tokens + self._accrued(a, tt))

    def tokens_at(self, now_s: float) -> float:
        """Tokens the bucket will hold at ``now_s`` (>= the last decision time), no change."""
        return self._tokens_trace(max(float(now_s), self._t) + self.time_offset_s)

    def delay_for(self, nbytes: int, now_s: float) -> float:
        """
        Seconds to wait from ``now_s`` before sending ``nbytes``; reserves the tokens.

        Never inside an outage, and on tokens earned since the last outage. Returns inf when
        the trace never supplies enough tokens (a permanent outage, or no stretch between
        outages that earns them).
        """
        if nbytes < 0:
            raise ValueError(f'nbytes must be >= 0, got {nbytes}')
        off = self.time_offset_s
        begin = max(float(now_s), self._t)
        cur = begin + off                             # trace time
        tokens = self._tokens_trace(cur)
        need = min(float(nbytes), self.burst_bytes)
        resets = 0
        while True:
            outage = self._outage_at(cur)
            if outage is not None:                    # nothing leaves before it ends
                if not math.isfinite(outage[1]):
                    return math.inf
                cur = outage[1]
            if tokens >= need:
                send = cur
                break
            target = self.trace.cumulative_mbit(cur) + (need - tokens) / BYTES_PER_MBIT
            send = max(cur, float(self.trace.time_for_mbit(target)))
            if not math.isfinite(send):
                return math.inf
            start = self._next_outage_start(cur)
            if start >= send:                         # earned before the next outage
                tokens = need
                break
            most = self._most[0 if self._loop else bisect.bisect_left(self._starts, start)]
            if need > most * (1.0 + 1e-9):            # no gap from then on earns them
                return math.inf
            resets += 1
            if resets > len(self._starts) + 2:        # (rounding) no gap of a period did
                return math.inf
            if tokens < 0:                            # debt: outages repay nothing, lose nothing
                repaid = self.trace.cumulative_mbit(cur) - tokens / BYTES_PER_MBIT
                cur, tokens = max(cur, float(self.trace.time_for_mbit(repaid))), 0.0
                if not math.isfinite(cur):
                    return math.inf
            else:                                     # the outage takes what was earned
                cur, tokens = start, 0.0
        send_s = max(begin, send - off)
        self._t, self._tokens = send_s, tokens - float(nbytes)
        return send_s - float(now_s)


def _most_after(trace: Trace, starts: list, ends: list, loop: bool) -> list:
    """
    Return, per outage ``k``, the most bytes one stretch between outages after it supplies.

    A looping trace's stretches repeat: one number, the most of any. Of a trace that does not
    loop, the most of the stretches after outage ``k`` (inf after a last outage that ends). A
    message needing more never leaves: found at once, not by a search through every stretch.
    """
    if not starts:
        return []
    if loop:
        nxt = np.append(starts[1:], starts[0] + trace.end_s)
    else:
        nxt = np.asarray(starts[1:] + [math.inf])
    stop = np.asarray(ends)
    inner = np.isfinite(nxt) & np.isfinite(stop)
    most = np.zeros(len(starts))
    most[inner] = (trace.cumulative_mbit(nxt[inner])
                   - trace.cumulative_mbit(stop[inner])) * BYTES_PER_MBIT
    if not loop:
        most[-1] = math.inf if math.isfinite(ends[-1]) else 0.0
        return np.maximum.accumulate(most[::-1])[::-1].tolist()
    return [float(most.max())]


def _outages(trace: Trace) -> tuple:
    """
    Return the starts and ends of ``trace``'s outages in one period, as lists.

    Adjacent segments of rate 0 are one outage; of a trace that does not loop, the last one
    ends at inf and the first one starts at -inf (``rate_at`` reads the first rate before 0).
    A looping trace's outage across its end is one, the last, ending after the next period's
    start (a link is not back for an instant at the wrap). A trace of rate 0 only is one
    outage from -inf to inf, looping or not.
    """
    zero = trace.mbps <= 0.0
    if not zero.any():
        return [], []
    if zero.all():
        return [-math.inf], [math.inf]
    seg_ends = np.append(trace.t_s[1:], trace.end_s)
    first = zero & ~np.concatenate(([False], zero[:-1]))
    last = zero & ~np.concatenate((zero[1:], [False]))
    starts, ends = trace.t_s[first].tolist(), seg_ends[last].tolist()
    if trace.loop and zero[0] and zero[-1]:
        starts, ends = starts[1:], ends[1:-1] + [ends[-1] + ends[0]]
    if not trace.loop and zero[-1]:
        ends[-1] = math.inf
    if not trace.loop and zero[0]:
        starts[0] = -math.inf
    return starts, ends
