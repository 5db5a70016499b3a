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
"""Tests of rog_ros.net.shaper: long-run rate, bursts, debt and outages."""

import math

import numpy as np
import pytest

from rog_ros.net.shaper import TokenBucketShaper
from rog_ros.net.traces import generate, Trace


def test_backlogged_sender_gets_the_trace_mean_within_2pct():
    # Prepare: 10 min of indoors (seed 3), 1 MiB messages, bucket of one message
    trace = generate('indoors', 600.0, seed=3)
    shaper = TokenBucketShaper(trace, burst_bytes=1 << 20)
    now, sent = 0.0, 0
    # Execute: send back to back for two loops, sleeping what the shaper says
    while now < 2 * trace.end_s:
        now += shaper.delay_for(1 << 20, now)
        sent += 1 << 20
    # Assert: bytes / time = mean capacity (the first burst is the only surplus)
    rate_mbps = sent * 8e-6 / now
    assert abs(rate_mbps / trace.mean_rate(0.0, now) - 1.0) < 0.02
    assert abs(rate_mbps / trace.mean_mbps - 1.0) < 0.02


def test_burst_then_rate_and_debt():
    shaper = TokenBucketShaper(Trace([0.0], [8.0], 100.0), burst_bytes=500_000)  # 1 MB/s
    assert shaper.delay_for(500_000, 0.0) == 0.0  # full bucket: burst goes at once
    assert shaper.delay_for(250_000, 0.0) == pytest.approx(0.25)
    assert shaper.delay_for(2_000_000, 0.25) == pytest.approx(0.5)  # needs a full bucket
    # 2 MB left the bucket 1.5 MB in debt at 0.75 s: 250 kB more wait 1.75 s
    assert shaper.delay_for(250_000, 0.75) == pytest.approx(1.75)
    assert shaper.tokens_at(100.0) == 500_000  # capped
    assert shaper.delay_for(1000, 50.0) == 0.0


def test_fifo_and_outage():
    trace = Trace([0.0, 1.0], [8.0, 0.0], 2.0, loop=False)
    shaper = TokenBucketShaper(trace, burst_bytes=100_000)
    assert shaper.delay_for(100_000, 0.0) == 0.0
    assert shaper.delay_for(100_000, 0.0) == pytest.approx(0.1)
    assert shaper.delay_for(1, 0.05) == pytest.approx(0.05 + 1e-6)  # never overtakes
    # a message above the burst leaves on a full bucket (0.2 s) and runs 9.9 MB into debt,
    # which the 0.8 s of capacity before the outage cannot repay
    assert shaper.delay_for(10_000_000, 0.2) == pytest.approx(1e-6)
    assert shaper.delay_for(1, 0.3) == math.inf


def _outage_then_back():
    """Return 1 MB/s for 1 s, an outage of 1 s, then 1 MB/s (not looping)."""
    return Trace([0.0, 1.0, 2.0], [8.0, 0.0, 8.0], 3.0, loop=False)


def test_nothing_leaves_in_an_outage_on_a_full_bucket():
    # Prepare: an idle bucket, full (100 kB) when the outage starts
    shaper = TokenBucketShaper(_outage_then_back(), burst_bytes=100_000)
    # Execute: 1 kB asked for 0.2 s into the outage
    delay = shaper.delay_for(1000, 1.2)
    # Assert: it waits for the link and for 1 kB earned after it (1 ms at 1 MB/s)
    assert delay == pytest.approx(0.8 + 0.001)
    assert shaper.tokens_at(1.5) <= 0.0
    # a trace that does not loop reads its first rate before 0: there an outage too
    early = TokenBucketShaper(Trace([0.0, 1.0], [0.0, 8.0], 2.0, loop=False), 100_000,
                              time_offset_s=-1.0)
    assert early.delay_for(1000, 0.0) == pytest.approx(2.001)


def test_credit_earned_before_an_outage_is_gone_after_it():
    # Prepare: a full bucket before the outage; 100 kB asked as the link comes back
    shaper = TokenBucketShaper(_outage_then_back(), burst_bytes=100_000)
    assert shaper.tokens_at(0.9) == 100_000
    assert shaper.tokens_at(2.0) == 0.0
    # Execute / Assert: the first message waits for a bucket earned after the outage
    assert shaper.delay_for(100_000, 2.0) == pytest.approx(0.1)


def test_partial_credit_before_an_outage_is_lost_and_debt_is_kept():
    # Prepare: the full bucket spent at 0.95 s, 50 kB earned by the outage
    shaper = TokenBucketShaper(_outage_then_back(), burst_bytes=100_000)
    assert shaper.delay_for(100_000, 0.95) == 0.0
    # Execute / Assert: the next 100 kB need 0.1 s after the outage, not 0.05 s
    assert shaper.delay_for(100_000, 0.95) == pytest.approx(1.15)
    # a debt is not repaid by an outage: 1.2 MB at 0 s leave 0.1 MB owed at 1 s, repaid by
    # 2.1 s; 1 kB more then goes at 2.101 s
    debtor = TokenBucketShaper(_outage_then_back(), burst_bytes=100_000)
    assert debtor.delay_for(1_200_000, 0.0) == 0.0
    assert debtor.delay_for(1000, 0.5) == pytest.approx(2.101 - 0.5)


def test_a_bucket_that_no_gap_between_outages_can_fill_never_sends():
    # Prepare: a loop of 0.05 s at 1 MB/s (50 kB) and 0.05 s of outage; empty at 0.06 s
    trace = Trace([0.0, 0.05], [8.0, 0.0], 0.1)
    shaper = TokenBucketShaper(trace, burst_bytes=100_000, start_s=0.06)
    assert shaper.tokens_at(0.06) == 0.0
    # Execute / Assert: 40 kB go within a gap (0.14 s), 100 kB never do
    assert shaper.delay_for(40_000, 0.06) == pytest.approx(0.08)
    assert shaper.delay_for(100_000, 0.14) == math.inf


def test_backlogged_sender_never_sends_in_an_outage_nor_more_than_each_gap_supplies():
    # Prepare: the outages preset (one robot out at a time), a 64 KiB bucket, offset clock
    trace = generate('outages', 600.0, seed=1002, robot=2, fleet=4)
    zero = trace.mbps <= 0
    assert zero.any() and not zero.all()
    ends = np.append(trace.t_s[1:], trace.end_s)
    starts = trace.t_s[zero & ~np.concatenate(([False], zero[:-1]))]
    stops = ends[zero & ~np.concatenate((zero[1:], [False]))]
    shaper = TokenBucketShaper(trace, burst_bytes=65_536, start_s=5.0, time_offset_s=-5.0)
    sizes = np.random.default_rng(0).integers(1000, 65_536, size=5000)
    # Execute: back to back, sleeping what the shaper says
    now, times = 5.0, []
    for n in sizes.tolist():
        now += shaper.delay_for(n, now)
        times.append(now - 5.0)                    # trace time
    times = np.asarray(times)
    assert starts.size == 2 and times[-1] > stops[-1]   # both outages passed
    # Assert: no send strictly inside an outage
    inside = (times[:, None] > starts[None, :]) & (times[:, None] < stops[None, :])
    assert not inside.any()
    # and the bytes of each stretch between outages are at most what the trace supplies in it
    bounds = np.concatenate(([0.0], stops))
    gap_end = np.concatenate((starts[starts > 0], [np.inf]))[:bounds.size]
    gap = np.searchsorted(bounds, times, side='right') - 1
    sent = np.bincount(gap, weights=sizes, minlength=bounds.size)
    supplied = (trace.cumulative_mbit(np.minimum(gap_end, times[-1]))
                - trace.cumulative_mbit(bounds)) * 125_000.0
    assert np.all(sent <= supplied + 1e-6 * 65_536 + 65_536 * (bounds == 0.0))


def test_an_outage_across_a_looping_trace_s_end_is_one():
    # Prepare: a loop of 1 s of outage, 1 s at 1 MB/s and 1 s of outage: 2 s of outage from
    # 2 s to 4 s, across the wrap at 3 s
    trace = Trace([0.0, 1.0, 2.0], [0.0, 8.0, 0.0], 3.0)
    shaper = TokenBucketShaper(trace, burst_bytes=100_000)
    # Execute / Assert: even an empty message waits for the link to come back at 4 s, not
    # for the wrap (3 s, still out)
    assert shaper.delay_for(0, 2.5) == pytest.approx(1.5)
    assert shaper.delay_for(1000, 4.0) == pytest.approx(0.001)
    # a trace of rate 0 only never sends, not even nothing, and not at its period's end
    dead = TokenBucketShaper(Trace([0.0], [0.0], 10.0), burst_bytes=100)
    assert dead.delay_for(0, 9.0) == math.inf
    assert dead.tokens_at(25.0) == 0.0


def test_a_message_no_gap_can_carry_is_found_without_a_search_through_every_gap(monkeypatch):
    # Prepare: 10000 outages a period, each gap 0.5 s at 0.5 Mbit/s (31.25 kB); the bucket
    # spent. A message of 64 KiB waits forever: a stuck link whose every later message asks
    # again, so the answer must not cost a search through the trace
    n = 10_000
    t = np.arange(2 * n) * 0.5
    for loop, rates in ((True, np.tile([0.5, 0.0], n)),
                        (False, np.append(np.tile([0.5, 0.0], n - 1), [0.5, 0.0]))):
        shaper = TokenBucketShaper(Trace(t, rates, n * 1.0, loop=loop), burst_bytes=65_536)
        assert shaper.delay_for(65_536, 0.0) == 0.0
        calls = []
        inverse = Trace.time_for_mbit
        monkeypatch.setattr(Trace, 'time_for_mbit', lambda self, m: calls.append(m) or
                            inverse(self, m))
        # Execute / Assert: inf at once, a few inverse lookups, not one per gap
        for _ in range(3):
            assert shaper.delay_for(65_536, 0.1) == math.inf
        assert len(calls) <= 3 * 3, len(calls)
        monkeypatch.undo()
        # 30 kB fit in a gap: they go 0.48 s into the first, earned from the empty bucket at 0
        assert shaper.delay_for(30_000, 0.1) == pytest.approx(0.48 - 0.1)
