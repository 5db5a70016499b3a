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
"""The public HSDPA and 4G/LTE drive logs read as rate traces, every byte where it was logged."""

import pytest
from rog_ros.cli import main
from rog_ros.net import mobile_log, traces
from rog_ros.net.traces import TraceFormatError

# unix_s clock_ms latitude longitude bytes elapsed_ms (the HSDPA logs' columns)
HSDPA = """1289406399 549692 59.851754 10.781356 31999 1000
1289406400 550692 59.851780 10.781400 125000 1000
1289406401 551700 59.851802 10.781455 0 1008
1289406402 552692 59.851833 10.781499 250000 1000
"""
# unix_ms latitude longitude bytes elapsed_ms (the 4G/LTE logs' columns)
LTE = """1453121398962 51.0360959 3.7354552 2500000 1000
1453121399962 51.0361010 3.7354600 1250000 1000
1453121401962 51.0361100 3.7354700 5000000 2000
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_hsdpa_rates_are_the_bytes_of_each_line_over_its_interval(tmp_path):
    tr = traces.load_trace(_write(tmp_path, 'report_bus_0001.log', HSDPA))
    assert tr.t_s.tolist() == pytest.approx([0.0, 1.0, 2.0, 3.008])
    # 31,999 B in 1 s; 125 kB in 1 s; nothing; 250 kB between the clock's 551.700 and 552.692
    # (the clock decides where a line logs 8 ms more than the clock shows)
    assert tr.mbps.tolist() == pytest.approx([0.255992, 1.0, 0.0, 2.0 / 0.992])
    assert tr.end_s == pytest.approx(4.0)
    assert tr.total_mbit == pytest.approx((31999 + 125000 + 250000) * 8 / 1e6)


def test_lte_clock_is_unix_milliseconds_and_no_byte_is_gained_or_lost(tmp_path):
    tr = traces.load_trace(_write(tmp_path, 'report_bicycle_0001.log', LTE))
    assert tr.t_s.tolist() == pytest.approx([0.0, 1.0, 2.0])
    assert tr.mbps.tolist() == pytest.approx([20.0, 10.0, 20.0])
    assert tr.end_s == pytest.approx(4.0)
    assert tr.total_mbit == pytest.approx((2500000 + 1250000 + 5000000) * 8 / 1e6)


def test_the_format_is_named_and_convert_writes_the_same_trace(tmp_path, capsys):
    src = _write(tmp_path, 'drive.log', LTE)
    assert traces.trace_file_format(src) == '4G/LTE log'
    assert traces.trace_file_format(_write(tmp_path, 'bus.log', HSDPA)) == 'HSDPA log'
    out = tmp_path / 'drive.csv'
    assert main(['trace', 'convert', str(src), '--out', str(out)]) == 0
    assert '4G/LTE log' in capsys.readouterr().out
    back = traces.load_trace(out)
    assert back.mbps.tolist() == pytest.approx([20.0, 10.0, 20.0])
    assert back.end_s == pytest.approx(4.0)


@pytest.mark.parametrize('text, line, what', [
    (HSDPA.replace('125000 1000', '125000'), 2, 'not a line of the HSDPA log'),
    (HSDPA.replace('59.851802', 'north'), 3, 'not a line of the HSDPA log'),
    (HSDPA.replace('551700', '550000'), 3, 'clock does not increase'),
    (LTE.replace(' 1250000 ', ' -1250000 '), 2, 'not a line of the 4G/LTE log'),
    (LTE.replace('5000000 2000', '5000000 2000 7'), 3, 'not a line of the 4G/LTE log'),
    (LTE.replace('2500000 1000', '2500000 0'), 1, r'elapsed_ms > 0'),
    (LTE.replace(' 1250000 ', ' inf '), 2, 'not a line of the 4G/LTE log'),
])
def test_a_damaged_log_names_the_line_and_reads_nothing(tmp_path, text, line, what):
    path = _write(tmp_path, 'bad.log', text)
    with pytest.raises(TraceFormatError, match=f'bad.log:{line}: .*{what}'):
        traces.load_trace(path)


def test_other_formats_are_not_taken_for_a_drive_log():
    assert mobile_log.is_mobile_log(['\n', HSDPA.splitlines()[0]])
    assert mobile_log.is_mobile_log([LTE.splitlines()[0]])
    assert not mobile_log.is_mobile_log(['0,5\n', '1,6\n'])
    assert not mobile_log.is_mobile_log(['0 5\n'])
    assert not mobile_log.is_mobile_log(['t_seconds,mbps\n'])
    assert not mobile_log.is_mobile_log(['17\n'])
    assert not mobile_log.is_mobile_log([])
    # six numbers whose first is not a Unix time in seconds; five whose first is not one in ms
    assert not mobile_log.is_mobile_log(['0 549692 59.85 10.78 31999 1000\n'])
    assert not mobile_log.is_mobile_log(['1289406399 59.85 10.78 31999 1000\n'])
    # the first line decides: a header above drive-log lines is a table's, not a log's
    assert not mobile_log.is_mobile_log(['unix_ms lat lon bytes ms\n', LTE.splitlines()[0]])
    # 'inf' and 'nan' parse as numbers but count nothing (they raised OverflowError once)
    assert not mobile_log.is_mobile_log(['1453121398962 51.03 3.73 inf 1000\n'])
    assert not mobile_log.is_mobile_log(['1453121398962 51.03 3.73 2500000 inf\n'])
    assert not mobile_log.is_mobile_log(['1453121398962 nan 3.73 2500000 1000\n'])
    # a latitude off the globe, a fractional byte count
    assert not mobile_log.is_mobile_log(['1453121398962 151.03 3.73 2500000 1000\n'])
    assert not mobile_log.is_mobile_log(['1453121398962 51.03 3.73 2500000.5 1000\n'])


def test_a_headerless_six_column_table_is_still_refused_with_the_accepted_formats(tmp_path):
    path = _write(tmp_path, 'six.txt', '0 1 2 3 4 5\n1 2 3 4 5 6\n')
    with pytest.raises(TraceFormatError, match='six.txt:1: expected two numbers'):
        traces.load_trace(path)
