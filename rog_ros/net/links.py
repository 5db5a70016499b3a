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
Fluid link models for the simulator: bytes delivered = integral of the trace's rate.

A ``FluidLink`` serialises transmissions FIFO: one starts at ``max(start_s, busy_until)``,
finishes when the integral of the rate since its start reaches its size (found by exact
inversion of the trace's cumulative integral, O(log n) per call), and arrives ``latency_s``
later. Outage intervals (absolute link time) carry no bytes. ``dropped()`` draws, per
transmission, whether the message is lost (it still occupied the link).

``SharedMedium`` models one access point (or the PS radio) whose capacity all links share:
when a transmission starts while ``n - 1`` other links of the medium are busy, it proceeds at
``min(own rate, capacity / n)`` until it ends. The share is fixed at the start (no
re-division when others join or leave), which is exact for equal-sized concurrent pushes and
an approximation otherwise. Call ``transmit`` in nondecreasing start order across links.

``DuplexLink`` turns one ``FluidLink`` into a half-duplex Wi-Fi station with a queue per
direction: both directions share the trace's airtime, but a small message (an acknowledgement)
no longer waits behind everything queued in the *other* direction, as it does when the same
``FluidLink`` serves as both directions.

Everything is pure: no clocks, no sleeping; the simulator owns time. Link time ``t`` reads the
trace at ``t + time_offset_s`` (the artifact started worker k at k/6 of its record).
"""

from __future__ import annotations

import math

import numpy as np

from rog_ros.net.traces import Trace

MBIT_PER_BYTE = 8e-6


class SharedMedium:
    """
    Total capacity shared by the links attached to it.

    Parameters
    ----------
    capacity_mbps : float
        Capacity of the shared radio, Mbit/s (e.g. 95: 4 workers x push+pull of 2.1 MB in
        1.47 s saturate ~91 Mbit/s, specs/rog.md 9.2 item 5).

    """

    def __init__(self, capacity_mbps: float):
        if not capacity_mbps > 0:
            raise ValueError(f'capacity_mbps must be > 0, got {capacity_mbps}')
        self.capacity_mbps = float(capacity_mbps)
        self._links = []

    def attach(self, link: 'FluidLink') -> None:
        """Add ``link`` to the links that share the capacity."""
        if link not in self._links:
            self._links.append(link)

    def active_at(self, t_s: float, exclude=None) -> int:
        """Count attached links (other than ``exclude``) transmitting at ``t_s``."""
        return sum(1 for ln in self._links
                   if ln is not exclude and ln.busy_from <= t_s < ln.busy_until)

    def share_mbps(self, t_s: float, link: 'FluidLink') -> float:
        """Return the rate cap for a transmission of ``link`` that starts at ``t_s``."""
        return self.capacity_mbps / (1 + self.active_at(t_s, exclude=link))


class FluidLink:
    """
    One robot's link: FIFO serialisation over a trace, latency, loss and outages.

    Parameters
    ----------
    trace : Trace
        Capacity over time.
    latency_s : float, default 0.002
        Added to each finish time (propagation plus stack; one Wi-Fi hop).
    loss : float, default 0.0
        Probability that a transmission is lost (drawn by ``dropped()``).
    outages : sequence of (start_s, end_s) or None, default None
        Intervals of link time with no capacity, on top of the trace's own zeros.
    seed : int, default 0
        Seed of the loss RNG.
    time_offset_s : float, default 0.0
        Link time t reads the trace at t + time_offset_s.
    medium : SharedMedium or None, default None
        Shared capacity this link is attached to.

    """

    def __init__(self, trace: Trace, latency_s: float = 0.002, loss: float = 0.0, outages=None,
                 seed: int = 0, time_offset_s: float = 0.0, medium: SharedMedium | None = None):
        if not latency_s >= 0:
            raise ValueError(f'latency_s must be >= 0, got {latency_s}')
        if not 0.0 <= loss <= 1.0:
            raise ValueError(f'loss must be in [0, 1], got {loss}')
        self.trace = trace
        self.latency_s = float(latency_s)
        self.loss = float(loss)
        self.time_offset_s = float(time_offset_s)
        self.medium = medium
        self._rng = np.random.default_rng(seed)
        self._outages = _merge(outages)
        self._clipped = {}  # rate cap -> clipped trace (one per distinct share)
        self._max_mbps = float(np.max(trace.mbps))
        self.busy_from = -math.inf   # start of the current (last) transmission
        self.busy_until = -math.inf  # when the link is free again
        self.sent_bytes = 0          # bytes serialised so far
        if medium is not None:
            medium.attach(self)

    # ------------------------------------------------------------------ capacity queries
    def _in_outage(self, t):
        t = np.asarray(t, dtype=np.float64)
        if self._outages.size == 0:
            return np.zeros(t.shape, dtype=bool)
        k = np.searchsorted(self._outages[:, 0], t, side='right') - 1
        return (k >= 0) & (t < self._outages[np.maximum(k, 0), 1])

    def rate_at(self, t):
        """Return the capacity in Mbit/s at link time(s) ``t`` (vectorised), with outages."""
        rate = np.where(self._in_outage(t), 0.0, self.trace.rate_at(
            np.asarray(t, dtype=np.float64) + self.time_offset_s))
        return rate if rate.ndim else float(rate)

    def delivered_mbit(self, t0: float, t1: float, trace: Trace | None = None) -> float:
        """Return the Mbit the link can carry on ``[t0, t1)`` (integral of the rate)."""
        tr = self.trace if trace is None else trace
        off = self.time_offset_s
        total = tr.cumulative_mbit(t1 + off) - tr.cumulative_mbit(t0 + off)
        if self._outages.size:
            s = np.clip(self._outages[:, 0], t0, t1)
            e = np.clip(self._outages[:, 1], t0, t1)
            total -= float(np.sum(tr.cumulative_mbit(e + off) - tr.cumulative_mbit(s + off)))
        return max(float(total), 0.0)

    def mean_rate(self, t0: float, t1: float) -> float:
        """Return the mean capacity in Mbit/s over ``[t0, t1)`` (point rate if equal)."""
        if t1 <= t0:
            return float(self.rate_at(t0))
        return self.delivered_mbit(t0, t1) / (t1 - t0)

    def finish_time(self, begin_s: float, nbytes: int, trace: Trace | None = None) -> float:
        """When ``nbytes`` that start at ``begin_s`` have crossed the link (no state change)."""
        tr = self.trace if trace is None else trace
        off = self.time_offset_s
        need = nbytes * MBIT_PER_BYTE
        pos = float(begin_s)
        if need <= 0 or pos == math.inf:    # behind a message that never arrives: never
            return pos
        out = self._outages
        k = int(np.searchsorted(out[:, 1], pos, side='right')) if out.size else 0
        while True:
            end = max(pos, float(tr.time_for_mbit(tr.cumulative_mbit(pos + off) + need)) - off)
            if k >= len(out) or out[k, 0] >= end:
                return end
            s, e = out[k]
            if s > pos:  # bytes carried before the outage begins
                need -= float(tr.cumulative_mbit(s + off) - tr.cumulative_mbit(pos + off))
            need = max(need, 0.0)
            pos, k = max(pos, float(e)), k + 1
            if need <= 0:
                return float(s)

    # ----------------------------------------------------------------------- transmission
    def transmit(self, start_s: float, nbytes: int) -> float:
        """
        Serialise ``nbytes`` FIFO from ``start_s``; returns the arrival time in seconds.

        The transmission begins at ``max(start_s, busy_until)`` and the link is busy until
        it finishes; arrival = finish + ``latency_s`` (inf if the link never carries it).
        """
        if nbytes < 0:
            raise ValueError(f'nbytes must be >= 0, got {nbytes}')
        begin = max(float(start_s), self.busy_until)
        trace = None
        if self.medium is not None:
            cap = self.medium.share_mbps(begin, self)
            if cap < self._max_mbps:
                trace = self._clipped.get(cap)
                if trace is None:
                    trace = self._clipped[cap] = self.trace.clipped(cap)
        finish = self.finish_time(begin, nbytes, trace)
        self.busy_from, self.busy_until = begin, finish
        self.sent_bytes += int(nbytes)
        return finish + self.latency_s

    def dropped(self) -> bool:
        """Draw whether the last transmission was lost; call once per transmission."""
        return bool(self.loss > 0 and self._rng.random() < self.loss)


def _merge(outages) -> np.ndarray:
    """Return sorted, disjoint ``(start, end)`` rows from any iterable of intervals."""
    if outages is None:
        return np.zeros((0, 2))
    arr = np.asarray(list(outages), dtype=np.float64).reshape(-1, 2)
    if np.any(arr[:, 1] < arr[:, 0]) or not np.all(np.isfinite(arr[:, 0])):
        raise ValueError('outages must be (start_s, end_s) with end_s >= start_s')
    arr = arr[np.argsort(arr[:, 0], kind='stable')]
    merged = []
    for s, e in arr:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        elif e > s:
            merged.append([s, e])
    return np.asarray(merged, dtype=np.float64).reshape(-1, 2)


class DuplexLink:
    """
    A half-duplex station: uplink and downlink take turns on one link's airtime.

    Each direction serialises its own messages FIFO. A message that starts while the other
    direction still has bytes queued gets half of the capacity until that backlog drains (the
    medium access gives both ends turns), then all of it; the other direction's *later*
    messages lose the airtime it took, so no capacity is created. Messages already scheduled
    keep their arrival times (the simulator has fixed them), which overcommits the link
    slightly while both directions carry long messages at once; the protocols rarely do that
    (a worker pushes, then pulls), but acknowledgements cross every transfer.

    Why it matters: on one FIFO for both directions (the same ``FluidLink`` passed as up and
    down link), the receiver's per-chunk acks queue behind the sender's whole window, arrive
    together, and a throughput estimate taken from their spacing reads tens of times the real
    rate; a deadline-driven sender (Rog's ATP) then sends far more than the deadline allows.

    Parameters
    ----------
    link : FluidLink
        The station's link: trace, outages, latency and loss (no ``SharedMedium``).

    Attributes
    ----------
    up, down
        The two directions, each with ``transmit(start_s, nbytes)``, ``loss`` and
        ``dropped()``, so that they plug into the simulator like any link.

    """

    def __init__(self, link: FluidLink):
        if link.medium is not None:
            raise ValueError('DuplexLink does not model a SharedMedium; use a FluidLink alone')
        self.link = link
        self.busy_until = [-math.inf, -math.inf]   # per direction: when its queue drains
        self.up = _Direction(self, 0)
        self.down = _Direction(self, 1)

    def transmit(self, direction: int, start_s: float, nbytes: int) -> float:
        """Serialise ``nbytes`` in ``direction`` (0 up, 1 down); return the arrival time."""
        if nbytes < 0:
            raise ValueError(f'nbytes must be >= 0, got {nbytes}')
        if direction not in (0, 1):
            raise ValueError(f'direction must be 0 (up) or 1 (down), got {direction}')
        ln, other = self.link, 1 - direction
        begin = max(float(start_s), self.busy_until[direction])
        backlog_until = self.busy_until[other]
        if backlog_until <= begin or nbytes == 0:
            finish = ln.finish_time(begin, nbytes)
        else:
            shared = 0.5 * ln.delivered_mbit(begin, backlog_until) / MBIT_PER_BYTE
            if nbytes <= shared:               # done while sharing: at half the rate
                finish, taken = ln.finish_time(begin, 2 * nbytes), nbytes
            else:                              # half the rate, then all of it
                finish, taken = ln.finish_time(backlog_until, nbytes - shared), shared
            self.busy_until[other] = ln.finish_time(backlog_until, taken)
        self.busy_until[direction] = finish
        ln.sent_bytes += int(nbytes)
        return finish + ln.latency_s


class _Direction:
    """One direction of a ``DuplexLink``, with the link interface the simulator uses."""

    def __init__(self, owner: DuplexLink, direction: int):
        self.owner, self.direction = owner, direction

    @property
    def loss(self) -> float:
        return self.owner.link.loss

    @property
    def busy_until(self) -> float:
        return self.owner.busy_until[self.direction]

    def transmit(self, start_s: float, nbytes: int) -> float:
        """Serialise ``nbytes`` in this direction from ``start_s``; return the arrival time."""
        return self.owner.transmit(self.direction, start_s, nbytes)

    def dropped(self) -> bool:
        """Draw whether the last transmission was lost (the station's loss rate)."""
        return self.owner.link.dropped()
