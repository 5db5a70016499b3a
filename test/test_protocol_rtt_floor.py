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
ATP's round-trip floor: cut transfers on bandwidth-bound links, not on latency-bound ones.

With homogeneous links every worker is the straggler, so the paper's MTA-time deadline lets
each send only its mandatory prefix. On a link whose transfers cost round trips rather than
bytes (DDS between loaded processes) that saves almost nothing and withholds most rows; the
round-trip floor keeps those transfers whole and leaves slow links to the paper's rule.
"""

import pytest
from rog_ros.sim.simulator import SimConfig, simulate


def _run(tmp_path, mbps, latency_s, rtt_floor):
    trace = tmp_path / f'const{mbps}.csv'
    trace.write_text('t_seconds,mbps\n' + ''.join(f'{t},{mbps}\n' for t in range(0, 601, 5)))
    s = simulate(SimConfig(workload='chaos', system='rog:4', workers=4, trace=str(trace),
                           iterations=25, seed=0, latency_s=latency_s, chunk_bytes=256,
                           compute_time_s=0.1, evaluations=2,
                           # (late rows off: the floor is about what a push itself carries)
                           policy_overrides={'deadline_floor': 0.0, 'late_rows': False,
                                             'rtt_floor': rtt_floor})).summary()
    assert s.get('error') is None, s['error']
    return s


def test_latency_bound_links_send_whole_transfers_only_with_the_round_trip_floor(tmp_path):
    # 100 Mbit/s, 20 ms one way: a whole transfer's bytes take ~1 ms, its round trips 40 ms
    paper = _run(tmp_path, 100.0, 0.020, rtt_floor=0.0)
    floor = _run(tmp_path, 100.0, 0.020, rtt_floor=2.0)
    assert floor['median_round_trip_s'] == pytest.approx(0.040, rel=0.15)
    assert paper['delivered_row_fraction_up'] < 0.5          # the prefix and little more
    # every row once the round trip is measured (the first transfers have no estimate yet)
    assert floor['delivered_row_fraction_up'] > 0.85
    assert floor['delivered_row_fraction_down'] > 0.85
    # ... and it costs the iteration nothing measurable: the round trips are paid either way
    assert floor['s_per_iteration'] < 1.02 * paper['s_per_iteration']


def test_bandwidth_bound_links_still_cut_to_the_deadline(tmp_path):
    # 0.2 Mbit/s, 1 ms one way: the bytes take ~26 ms, two round trips (acks included) ~28 ms
    floor = _run(tmp_path, 0.2, 0.001, rtt_floor=2.0)
    whole = _run(tmp_path, 0.2, 0.001, rtt_floor=100.0)
    assert floor['delivered_row_fraction_up'] < 0.5
    assert whole['delivered_row_fraction_up'] > 0.85
    assert floor['s_per_iteration'] < 0.9 * whole['s_per_iteration']
