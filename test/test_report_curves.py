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
from rog_ros.experiments.report import _mean_curve


def test_mean_curve_spans_the_longest_run_and_holds_finished_ones():
    short = [{'time_s': 0.0, 'accuracy': 0.5}, {'time_s': 10.0, 'accuracy': 0.7}]
    long = [{'time_s': 0.0, 'accuracy': 0.5}, {'time_s': 40.0, 'accuracy': 0.9}]
    xs, ys = _mean_curve([short, long], 'time_s')
    assert xs[-1] == pytest.approx(40.0)
    assert ys[-1] == pytest.approx((0.7 + 0.9) / 2)        # the short run holds 0.7
    mid = int(np.searchsorted(xs, 20.0))
    assert ys[mid] == pytest.approx((0.7 + 0.5 + 0.4 * xs[mid] / 40.0) / 2, abs=1e-9)
