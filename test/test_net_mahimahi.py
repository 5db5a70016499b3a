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
"""Mahimahi packet-delivery traces read as rate traces."""

import pytest
from rog_ros.net import mahimahi, traces
from rog_ros.net.traces import TraceFormatError


def test_one_packet_per_millisecond_is_12_mbit_per_s(tmp_path):
    path = tmp_path / '12mbps'
    path.write_text('1\n')                  # mm-link's own example of a fixed 12 Mbit/s link
    tr = traces.load_trace(path)
    assert tr.mbps.tolist() == [12.0] and tr.end_s == pytest.approx(0.001)


def test_rates_follow_the_packets_and_no_byte_is_gained_or_lost(tmp_path):
    # 4 packets per ms for 0.5 s (48 Mbit/s), then 1 per ms (12), then nothing for 0.3 s
    stamps = [ms for ms in range(500) for _ in range(4)] + list(range(500, 1000)) + [1300]
    path = tmp_path / 'wifi.mahi'
    path.write_text('\n'.join(map(str, stamps)) + '\n')
    tr = traces.load_trace(path)
    assert tr.end_s == pytest.approx(1.3)
    assert tr.rate_at(0.25) == pytest.approx(48.0) and tr.rate_at(0.75) == pytest.approx(12.0)
    assert tr.rate_at(1.1) == 0.0
    assert tr.total_mbit == pytest.approx(len(stamps) * 1500 * 8 / 1e6)
    assert tr.t_s[1] == pytest.approx(mahimahi.BIN_S)


@pytest.mark.parametrize('text, line, what', [
    ('0\n1\n2 3\n', 3, 'one integer'),
    ('0\n1\n1.5\n', 3, 'one integer'),
])
def test_a_damaged_trace_names_the_line(tmp_path, text, line, what):
    path = tmp_path / 'bad.mahi'
    path.write_text(text)
    with pytest.raises(TraceFormatError, match=f'bad.mahi:{line}: .*{what}'):
        traces.load_trace(path)


def test_two_column_files_are_not_taken_for_mahimahi():
    assert mahimahi.is_mahimahi(['# up\n', '\n', '17\n'])
    assert not mahimahi.is_mahimahi(['0,5\n'])
    assert not mahimahi.is_mahimahi(['35.5\n'])
    assert not mahimahi.is_mahimahi(['t_seconds,mbps\n', '0,5\n'])


def test_constant_rate_files_repeat_one_timestamp(tmp_path):
    path = tmp_path / '24mbps'
    path.write_text('1\n1\n')             # two packets per ms, mm-link's constant-rate idiom
    assert traces.load_trace(path).mbps.tolist() == [24.0]


@pytest.mark.parametrize('text, where, why', [
    ('0\n', '', 'last timestamp (the period mm-link loops) is 0 ms'),
    ('0\n0\n0\n', '', 'is 0 ms'),
    ('12\n15\n20\n25\n', '', 'spanning 25 ms: too short for a Mahimahi trace (a recording '
     'spans at least 1000 ms'),
    ('50\n48\n52\n', ':2', '48 follows 50: not a Mahimahi trace'),
    ('0\n5\n4\n', ':3', '4 follows 5'),
])
def test_integer_lists_mm_link_would_not_play_are_refused(tmp_path, text, where, why):
    path = tmp_path / 'rates.txt'
    path.write_text(text)
    with pytest.raises(TraceFormatError) as err:
        traces.load_trace(path)
    message = str(err.value)
    assert f'rates.txt{where}: one integer per line' in message and why in message
    assert 'not a recognised trace format (accepted: CSV' in message and 'Mahimahi' in message
    assert 'timestamp 48 ms goes back' not in message and '\n' not in message


def test_a_one_second_recording_is_long_enough(tmp_path):
    path = tmp_path / 'short.mahi'
    path.write_text('\n'.join(map(str, range(0, mahimahi.MIN_RECORD_MS + 1))) + '\n')
    tr = traces.load_trace(path)
    assert tr.end_s == pytest.approx(1.0) and len(tr) == 10


@pytest.mark.parametrize('text, why', [
    # epoch milliseconds: binning from 0 to them allocated 127 GiB (numpy _ArrayMemoryError)
    ('1700000000000\n1700000000005\n1700000001500\n',
     'epoch.mahi: its first timestamp 1700000000000 is 19,676 days: the stamps look like clock '
     'times (ms since 1970), but Mahimahi stamps are milliseconds from the start of the '
     'recording (at most 86400000 ms, 24 h): subtract the first stamp from every line'),
    ('0\n100000000000\n', 'epoch.mahi: its timestamps span 100000000000 ms (2.78e+04 h); a '
     'Mahimahi recording read here lasts at most 86400000 ms (24 h): cut it into shorter files'),
])
def test_stamps_no_recording_has_are_refused_before_binning(tmp_path, text, why):
    """Refuse clock-time stamps and day-long spans with one line, allocating nothing."""
    path = tmp_path / 'epoch.mahi'
    path.write_text(text)
    with pytest.raises(TraceFormatError) as err:
        traces.load_trace(path)
    assert str(err.value) == f'{tmp_path}/{why}'
    ok = tmp_path / 'day.mahi'                # a whole day is still a recording
    ok.write_text(f'0\n{mahimahi.MAX_RECORD_MS}\n')
    assert traces.load_trace(ok).end_s == 86400.0


def test_a_digit_that_is_not_ascii_names_the_file_and_line(tmp_path):
    """Name the line of a superscript two, which str.isdigit takes and int() refuses."""
    path = tmp_path / 'sup.mahi'
    path.write_text('5\n1200\n\u00b2\n', encoding='utf-8')
    with pytest.raises(TraceFormatError) as err:
        traces.load_trace(path)
    assert str(err.value).startswith(f'{path}:3: read as a Mahimahi trace')
    assert "got '\u00b2'" in str(err.value)
    assert not mahimahi.is_mahimahi(['\u00b2\n'])
