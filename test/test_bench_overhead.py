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
"""``rog bench overhead`` reports rog's default and row granularity alone, against ssp."""

from rog_ros.experiments import bench


def test_overhead_reports_late_transfers_apart_from_row_granularity(monkeypatch):
    per_iteration = {'rog:4': 0.50, 'ssp:4': 0.30, 'rog:4#late_rows=0#late_pulls=0': 0.31}
    seen = []

    def protocol_seconds(spec, shapes, n_workers, iterations, bw):
        seen.append(spec)
        return {'seconds_per_iteration': per_iteration[spec],
                'cpu_seconds_per_iteration': per_iteration[spec]}
    monkeypatch.setattr(bench, 'protocol_seconds', protocol_seconds)
    monkeypatch.setattr(bench, 'model_shapes', lambda name: ([(4, 4)], None))
    monkeypatch.setattr(bench, 'compute_seconds', lambda module: (0.2, 0.2))
    res = bench.bench_overhead(repeats=1)
    assert sorted(seen) == sorted(per_iteration)          # each system once per repeat
    assert abs(res['ratio'] - 1.0) < 1e-9                 # (0.50 - 0.30) / 0.2
    assert abs(res['ratio_rows'] - 0.05) < 1e-9           # (0.31 - 0.30) / 0.2
    assert abs(res['late_transfers_s'] - 0.19) < 1e-9
    assert res['rog_rows_s'] == 0.31
