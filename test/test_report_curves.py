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
"""The accuracy-vs-time curve of a system spans its longest seed; finished seeds hold."""

import numpy as np
import pytest
from rog_ros.experiments.report_curves import curve_band, periodic_rows


def _mean_curve(runs: list, xkey: str, log: bool = False):
    """Return ``(grid, mean)`` of the raw evaluations over seeds, as ``curve_band`` draws."""
    return curve_band(runs, xkey, log, smoothed=False)[:2]


def test_mean_curve_spans_the_longest_run_and_holds_finished_ones():
    short = [{'time_s': 0.0, 'accuracy': 0.5}, {'time_s': 10.0, 'accuracy': 0.7}]
    long = [{'time_s': 0.0, 'accuracy': 0.5}, {'time_s': 40.0, 'accuracy': 0.9}]
    xs, ys = _mean_curve([short, long], 'time_s')
    assert xs[-1] == pytest.approx(40.0)
    assert ys[-1] == pytest.approx((0.7 + 0.9) / 2)        # the short run holds 0.7
    mid = int(np.searchsorted(xs, 20.0))
    assert ys[mid] == pytest.approx((0.7 + 0.5 + 0.4 * xs[mid] / 40.0) / 2, abs=1e-9)


def test_the_closing_evaluation_on_another_set_is_not_joined_to_the_curve():
    # a simulated run evaluates on half the set as it goes and its final accuracy on all of
    # it: the curve ended in a drop that was the sets' difference (0.834 -> 0.819 on BSP)
    run = [{'time_s': 0.0, 'iteration': 0, 'accuracy': 0.80, 'samples': 1152},
           {'time_s': 5.0, 'iteration': 15, 'accuracy': 0.834, 'samples': 1152},
           {'time_s': 9.0, 'iteration': 30, 'accuracy': 0.819, 'samples': 2304}]
    xs, ys = _mean_curve([run], 'time_s')
    assert xs[-1] == pytest.approx(5.0) and ys[-1] == pytest.approx(0.834)
    assert periodic_rows(run) == run[:2]
    same_set = [dict(r, samples=2304) for r in run]            # a fleet: the whole set each time
    assert periodic_rows(same_set) == same_set
    assert periodic_rows(run[2:]) == run[2:]                   # one row: nothing to join
    assert periodic_rows([{'time_s': 0.0, 'loss': 1.0}] + run[:1]) == run[:1]


def test_the_log_axis_starts_at_the_first_evaluation_after_the_start():
    # a fleet stamps its starting evaluation 9.6e-6 s in: the log plot began there and drew
    # six decades of flat line before the first training evaluation at 0.5 s
    run = [{'time_s': 9.6e-6, 'iteration': 0, 'accuracy': 0.30},
           {'time_s': 0.5, 'iteration': 5, 'accuracy': 0.60},
           {'time_s': 12.0, 'iteration': 100, 'accuracy': 0.85}]
    xs, ys = _mean_curve([run], 'time_s', log=True)
    assert xs[0] == pytest.approx(0.5) and xs[-1] == pytest.approx(12.0)
    assert ys[0] == pytest.approx(0.60)
    simulated = [dict(run[0], time_s=0.0)] + run[1:]       # the simulator's start is at 0
    assert _mean_curve([simulated], 'time_s', log=True)[0][0] == pytest.approx(0.5)
