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
"""Tests of rog_ros.net.links: fluid serialisation, FIFO, outages, loops, loss, shared medium."""

import math

import numpy as np
import pytest

from rog_ros.net.links import FluidLink, SharedMedium
from rog_ros.net.traces import generate, Trace

MB = 125_000  # bytes per Mbit


def _walk_finish(t_s, mbps, end_s, begin, mbit):
    """Independent reference: walk a looping trace segment by segment in plain Python."""
    n, period, k = len(t_s), end_s, 0
    bounds = list(t_s) + [end_s]
    base = math.floor(begin / period) * period
    while base + bounds[k + 1] <= begin:
        k += 1
    pos = begin
    while True:
        seg_end = base + bounds[k + 1]
        can = mbps[k] * (seg_end - pos)
        if can >= mbit and mbps[k] > 0:
            return pos + mbit / mbps[k]
        mbit -= can
        pos = seg_end
        k += 1
        if k == n:
            k, base = 0, base + period


def test_transmit_matches_segment_walk_and_numeric_integral():
    # Prepare: a random looping trace with 20% outage segments
    rng = np.random.default_rng(21)
    t = np.concatenate(([0.0], np.cumsum(rng.uniform(0.05, 1.5, 59))))
    r = np.where(rng.random(60) < 0.2, 0.0, rng.uniform(1.0, 120.0, 60))
    trace = Trace(t, r, t[-1] + 0.7)
    for _ in range(200):
        link = FluidLink(trace, latency_s=0.0)
        begin = rng.uniform(0, 3 * trace.end_s)
        nbytes = int(rng.integers(1, 60 * MB))
        # Execute
        finish = link.transmit(begin, nbytes)
        # Assert: exact against the walk, and bytes = integral of the rate
        assert finish == pytest.approx(_walk_finish(t, r, trace.end_s, begin, nbytes / MB),
                                       abs=1e-9)
        grid = np.arange(begin, finish, 1e-3)
        riemann = float(np.sum(trace.rate_at(grid)) * 1e-3)
        assert riemann == pytest.approx(nbytes / MB, abs=0.15)
        assert link.delivered_mbit(begin, finish) == pytest.approx(nbytes / MB, rel=1e-9)


def test_fifo_serialisation_and_latency():
    link = FluidLink(Trace([0.0], [8.0], 10.0), latency_s=0.01)  # 1 MB/s
    a = link.transmit(0.0, 500_000)
    b = link.transmit(0.0, 500_000)  # queued behind a
    c = link.transmit(5.0, 1_000_000)  # link idle again: starts at 5
    assert a == pytest.approx(0.51) and b == pytest.approx(1.01) and c == pytest.approx(6.01)
    assert link.busy_from == 5.0 and link.busy_until == pytest.approx(6.0)
    assert link.transmit(6.0, 0) == pytest.approx(6.01)  # empty message: latency only
    assert link.sent_bytes == 2_000_000
    with pytest.raises(ValueError):
        link.transmit(0.0, -1)


def test_outages_carry_nothing():
    trace = Trace([0.0], [10.0], 100.0)
    link = FluidLink(trace, latency_s=0.0, outages=[(1.0, 3.0), (2.5, 3.5), (10.0, 11.0)])
    # 20 Mbit from 0: 10 in [0,1), outage until 3.5 (merged), 10 in [3.5, 4.5)
    assert link.transmit(0.0, 20 * MB) == pytest.approx(4.5)
    # start inside an outage: nothing before 10 s? no -- starts at 4.5, crosses [10, 11)
    assert link.transmit(4.5, 60 * MB) == pytest.approx(11.5)
    assert link.rate_at([0.5, 2.0, 3.49, 3.5]).tolist() == [10.0, 0.0, 0.0, 10.0]
    assert link.mean_rate(0.0, 4.0) == pytest.approx(15.0 / 4.0)
    fresh = FluidLink(trace, latency_s=0.0, outages=[(1.0, 3.0)])
    assert fresh.transmit(2.0, 5 * MB) == pytest.approx(3.5)  # waits out the outage


def test_zero_rate_segments_and_loops():
    # 10 Mbit/s on [0,1), 0 on [1,2), looping
    trace = Trace([0.0, 1.0], [10.0, 0.0], 2.0, loop=True)
    link = FluidLink(trace, latency_s=0.0)
    assert link.transmit(0.0, 25 * MB) == pytest.approx(4.5)
    assert link.transmit(1001.5, 5 * MB) == pytest.approx(1002.5)  # waits for the next loop
    assert link.transmit(1000.5, 5 * MB) == pytest.approx(1003.0)  # FIFO behind the last
    held = FluidLink(Trace([0.0, 1.0], [10.0, 0.0], 2.0, loop=False), latency_s=0.0)
    assert held.transmit(0.0, 11 * MB) == math.inf  # never delivered


def test_time_offset_reads_the_trace_later():
    trace = Trace([0.0, 5.0], [10.0, 40.0], 10.0)
    link = FluidLink(trace, latency_s=0.0, time_offset_s=5.0)
    assert link.rate_at(0.0) == 40.0
    assert link.transmit(0.0, 40 * MB) == pytest.approx(1.0)


def test_loss_is_seeded_and_has_the_right_rate():
    trace = Trace([0.0], [100.0], 1.0)
    a, b = FluidLink(trace, loss=0.3, seed=5), FluidLink(trace, loss=0.3, seed=5)
    draws = [a.dropped() for _ in range(20_000)]
    assert draws == [b.dropped() for _ in range(20_000)]
    assert abs(np.mean(draws) - 0.3) < 0.015
    assert not any(FluidLink(trace).dropped() for _ in range(1000))
    with pytest.raises(ValueError):
        FluidLink(trace, loss=1.5)


def test_shared_medium_splits_capacity_among_busy_links():
    medium = SharedMedium(30.0)
    own = Trace([0.0], [100.0], 1000.0)
    a = FluidLink(own, latency_s=0.0, medium=medium)
    b = FluidLink(own, latency_s=0.0, medium=medium)
    slow = FluidLink(Trace([0.0], [5.0], 1000.0), latency_s=0.0, medium=medium)
    assert a.transmit(0.0, 10 * MB) == pytest.approx(1 / 3)  # alone: capacity 30
    assert b.transmit(0.1, 10 * MB) == pytest.approx(0.1 + 2 / 3)  # a busy: 15 each
    assert slow.transmit(0.2, 1 * MB) == pytest.approx(0.4)  # own 5 < 30 / 3
    assert medium.active_at(0.3) == 3 and medium.active_at(5.0) == 0


def test_link_on_a_generated_trace_delivers_the_mean_rate():
    trace = generate('indoors', 600.0, seed=3)
    link = FluidLink(trace, latency_s=0.0)
    t = 0.0
    for _ in range(4000):  # backlogged sender, 1 MB messages
        t = link.transmit(t, 1_000_000)
    assert link.sent_bytes * 8e-6 / t == pytest.approx(trace.mean_rate(0.0, t), rel=1e-9)
