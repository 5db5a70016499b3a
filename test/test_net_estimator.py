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
"""Tests of rog_ros.net.estimator: EWMA convergence and the lagged netmon oracle."""

import math

import pytest

from rog_ros.net.estimator import LaggedRateOracle, ThroughputEstimator
from rog_ros.net.traces import Trace


def test_ewma_starts_at_first_sample_and_converges_geometrically():
    est = ThroughputEstimator(alpha=0.3)
    assert not est.ready and math.isnan(est.value_bps)
    est.update(1_250_000, 1.0)  # 10 Mbit/s
    assert est.ready and est.value_mbps == pytest.approx(10.0)
    for k in range(1, 21):  # the link steps to 50 Mbit/s
        est.update(6_250_000, 1.0)
        assert est.value_mbps == pytest.approx(50.0 - 40.0 * 0.7 ** k)
    assert abs(est.value_mbps - 50.0) < 0.05  # 40 * 0.7**20 = 0.032
    assert est.value_bps == pytest.approx(est.value_mbps * 1e6)


def test_ewma_rejects_bad_samples():
    with pytest.raises(ValueError):
        ThroughputEstimator(alpha=0.0)
    est = ThroughputEstimator()
    for nbytes, secs in [(10, 0.0), (10, -1.0), (-1, 1.0), (10, math.inf)]:
        with pytest.raises(ValueError):
            est.update(nbytes, secs)
    assert not est.ready


def test_lagged_oracle_polls_once_per_period_and_reports_late():
    trace = Trace([0.0, 2.5, 5.0], [10.0, 20.0, 30.0], 8.0, loop=False)
    oracle = LaggedRateOracle(trace, lag_s=1.0, period_s=1.0)
    times = [0.0, 1.9, 2.0, 3.4, 3.5, 4.0, 6.0, 6.1]
    # poll at floor(t - 1): 0,0,1,2,2,3,5,5 -> trace at those polls
    assert oracle.mbps_at(times).tolist() == [10.0, 10.0, 10.0, 10.0, 10.0, 20.0, 30.0, 30.0]
    assert oracle.bps_at(6.0) == pytest.approx(30e6)
    shifted = LaggedRateOracle(trace, lag_s=0.0, time_offset_s=5.0)
    assert shifted.mbps_at(0.5) == 30.0
