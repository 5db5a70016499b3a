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
