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
"""The Rog testbed's replay logs (bw_replay-<rank>.txt) read as traces."""

import pytest
from rog_ros.net import replay_log, traces
from rog_ros.net.traces import TraceFormatError

# the shape of a real log (specs/rog_artifact.md 5.2): start-up output of the interface lookup
# and tc, stamped applied rates 0.54 s apart, and holds announced after a value
LOG = """wnic_name wlx0013ef6f0c49
Error: Cannot delete qdisc with handle of zero.
Error: Invalid handle.
RTNETLINK answers: No such file or directory
2022-06-25 23:59:56,086 0.5
2022-06-25 23:59:56,626 2.0
Stop for 79 seconds
2022-06-26 00:01:16,206 120.25
Stop for 12 seconds
2022-06-26 00:01:28,750 0.0
2022-06-26 00:01:29,290 40.0
Stop for 30 seconds
"""


def test_a_testbed_log_reads_as_the_rates_it_applied(tmp_path):
    path = tmp_path / 'bw_replay-1.txt'
    path.write_text(LOG)
    tr = traces.load_trace(path)
    assert tr.mbps.tolist() == [0.5, 2.0, 120.25, 0.0, 40.0]
    # stamps (over midnight) shifted to start at 0; the 79 s hold is in the next stamp
    assert tr.t_s.tolist() == pytest.approx([0.0, 0.54, 80.12, 92.664, 93.204])
    assert tr.end_s == pytest.approx(93.204 + 30)         # the last rate lasts its announced hold
    assert tr.rate_at(50.0) == 2.0 and tr.rate_at(92.9) == 0.0
    held = (80.12 - 0.54) * 2.0 + 12.544 * 120.25 + 0.54 * 0.0 + 30 * 40.0
    assert tr.total_mbit == pytest.approx(0.54 * 0.5 + held)


def test_without_a_final_hold_the_last_rate_lasts_one_median_step(tmp_path):
    path = tmp_path / 'bw_replay-2.txt'
    path.write_text('2022-06-25 10:00:00,000 5\n2022-06-25 10:00:00,500 6\n'
                    '2022-06-25 10:00:01,000 7\n')
    tr = traces.load_trace(path)
    assert tr.t_s.tolist() == [0.0, 0.5, 1.0] and tr.end_s == pytest.approx(1.5)


@pytest.mark.parametrize('bad, what', [
    ('2022-06-25 10:00:01,000 fast', 'expected "YYYY-MM-DD HH:MM:SS,mmm <Mbit/s>"'),
    ('2022-06-25 10:00:01,000 -3', 'finite rate >= 0'),
    ('2022-06-25 09:00:00,000 3', 'does not increase'),
    ('2022-13-25 10:00:01,000 3', 'expected "YYYY-MM-DD'),
    ('17 3', 'expected "YYYY-MM-DD'),
])
def test_a_damaged_log_names_the_line_and_loads_nothing(tmp_path, bad, what):
    path = tmp_path / 'bw_replay-3.txt'
    path.write_text(f'wnic_name wlan0\n2022-06-25 10:00:00,000 5\nStop for 10 seconds\n{bad}\n')
    with pytest.raises(TraceFormatError, match=f'bw_replay-3.txt:4: .*{what}'):
        traces.load_trace(path)


def test_other_formats_are_not_taken_for_a_log():
    assert replay_log.is_replay_log(['wnic_name wlan0\n', '2022-06-25 10:00:00,000 5\n'])
    assert not replay_log.is_replay_log(['t_seconds,mbps\n', '0,5\n'])
    assert not replay_log.is_replay_log(['# comment 2022-06-25 10:00:00,000 5\n', '0 5\n'])
    assert not replay_log.is_replay_log(['Stop for 10 seconds\n'])


def test_a_log_drives_the_simulator_like_any_trace_file(tmp_path):
    from rog_ros.sim.simulator import make_traces
    path = tmp_path / 'bw_replay-4.txt'
    path.write_text(LOG)
    links = make_traces(str(path), 3, seed=1)
    assert len(links) == 3 and all(tr.mbps.tolist()[2] == 120.25 for tr, _ in links)
    assert all(0.0 <= off < links[0][0].end_s for _, off in links)
