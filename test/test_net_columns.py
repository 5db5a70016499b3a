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
"""Rate records kept as headed tables: the header picks the columns and names their units."""

import pytest
from rog_ros.net import columns, traces
from rog_ros.net.traces import TraceFormatError


def _load(tmp_path, text, name='link.csv'):
    path = tmp_path / name
    path.write_text(text)
    return traces.load_trace(path)


@pytest.mark.parametrize('name, mbit_per_unit', [
    ('mbps', 1.0), ('Mbps', 1.0), ('rate (Mbit/s)', 1.0), ('bw [Mb/s]', 1.0),
    ('throughput_kbps', 1e-3), ('kbit/s', 1e-3), ('Kbits/sec', 1e-3), ('bps', 1e-6),
    ('bits/s', 1e-6), ('Gbps', 1e3), ('MBps', 8.0), ('bw_MB/s', 8.0), ('kB/s', 8e-3),
    ('KiB/s', 8 * 1024 / 1e6), ('bytes/s', 8e-6), ('throughputMbps', 1.0), ('MBPS', 1.0),
    # units written out, as logging scripts and spreadsheets name them
    ('throughput_kbytes_per_s', 8e-3), ('KB per sec', 8e-3), ('Mbits per second', 1.0),
    ('rate (Mbit per s)', 1.0), ('bytes_per_s', 8e-6), ('megabit/second', 1.0),
    ('Kbit_per_sec', 1e-3), ('kb per sec', 1e-3), ('kilobytes per second', 8e-3),
    ('MiB_per_s', 8 * 1024 ** 2 / 1e6),
])
def test_units_named_in_a_header_convert_to_mbit_per_s(name, mbit_per_unit):
    assert columns.rate_factor(name) == pytest.approx(mbit_per_unit)


@pytest.mark.parametrize('name', ['t_seconds', 'bandwidth', 'rssi_dbm', 'timestamps', 'bytes'])
def test_names_without_a_rate_unit_have_no_factor(name):
    assert columns.rate_factor(name) is None


def test_a_kbps_column_is_not_read_as_mbit_per_s(tmp_path):
    # 5,000 kbit/s is 5 Mbit/s: under the plausibility bound, so before the header was read
    # this record gave its robot a 5 Gbit/s link without a word
    tr = _load(tmp_path, 'time_ms,throughput_kbps\n0,5000\n250,1200\n500,0\n750,8000\n')
    assert tr.t_s.tolist() == [0.0, 0.25, 0.5, 0.75]
    assert tr.mbps.tolist() == [5.0, 1.2, 0.0, 8.0]
    tr = _load(tmp_path, 't_seconds,mbps\n0,5\n0.5,6\n')      # our own header: unchanged
    assert tr.mbps.tolist() == [5.0, 6.0]
    tr = _load(tmp_path, 'time_s,iperf3_kbps_ch36\n0,5000\n0.5,6000\n')   # digits in names
    assert tr.mbps.tolist() == [5.0, 6.0]


def test_a_logging_scripts_table_gives_the_link_column_in_seconds(tmp_path):
    text = ('timestamp;rssi_dbm;tx_bitrate_mbps;throughput_kbps\n'
            '2026-11-29T08:00:00.000Z;-61;144.4;35500\n'
            '2026-11-29T08:00:00.500Z;-70;65.0;4200\n'
            '2026-11-29T08:00:01.25Z;-58;173.3;81250\n')
    tr = _load(tmp_path, text)
    assert tr.t_s.tolist() == [0.0, 0.5, 1.25] and tr.mbps.tolist() == [35.5, 4.2, 81.25]
    tabbed = ('"time (s)"\t"signal"\t"goodput (MB/s)"\n'
              '100.0\t-60\t2.5\n100.5\t-62\t0.5\n')
    assert _load(tmp_path, tabbed, 'tab.tsv').mbps.tolist() == [20.0, 4.0]
    european = 'Zeit (s);Durchsatz (Mbit/s)\n0;35,5\n0,5;4,25\n'      # a German spreadsheet
    tr = _load(tmp_path, european, 'de.csv')
    assert tr.t_s.tolist() == [0.0, 0.5] and tr.mbps.tolist() == [35.5, 4.25]


@pytest.mark.parametrize('text, line, what', [
    ('time,up_mbps,down_mbps\n0,1,2\n', 1, "candidates: 'up_mbps', 'down_mbps'"),
    ('time,rssi,channel\n0,1,2\n', 1, 'candidates: none'),
    ('time_s,bytes\n0,1000\n', 1, "column 'bytes' holds a count, not a rate"),
    # a unit per second that is not bits or bytes was read as Mbit/s without a word
    ('time_s,packets_per_s\n0,1000\n', 1, "'packets_per_s' names a rate in a unit this reader"),
    ('t;frames/s\n0;30\n', 1, "'frames/s' names a rate in a unit"),
    ('time_s;rssi;throughput_mbps\n0;-60;5\n1;-61\n', 3, 'expected 3 numbers as the header'),
    ('time_s,mbps\n0,5\n0.5,fast\n', 3, "expected two numbers as the header .* 'mbps'"),
    ('timestamp,mbps\n2026-13-45T00:00:00,5\n', 2, 'is neither a number nor an ISO'),
    ('35.5\n4.2\n', 1, 'one number per line has no time: .*awk'),     # a logger's rates only
    ('time_s,mbps\n0,5\n7\n', 3, "as the header .* says, .*got '7'$"),   # no hint: a short row
])
def test_tables_that_leave_the_link_open_are_refused_naming_the_line(tmp_path, text, line,
                                                                     what):
    path = tmp_path / 'bad.csv'
    path.write_text(text)
    with pytest.raises(TraceFormatError, match=f'bad.csv:{line}: .*{what}'):
        traces.load_trace(path)


@pytest.mark.parametrize('scale', [1, 1000, 1_000_000, 1_000_000_000])
def test_epoch_clock_times_in_s_ms_us_or_ns_all_read_as_seconds(tmp_path, scale):
    start = 1_795_939_200          # 2026-11-29 in seconds since 1970
    stamps = ([start + 0.5 * k for k in range(4)] if scale == 1
              else [start * scale + k * scale // 2 for k in range(4)])     # integers, as logged
    tr = _load(tmp_path, ''.join(f'{t},{10 + k}\n' for k, t in enumerate(stamps)))
    assert tr.t_s.tolist() == pytest.approx([0.0, 0.5, 1.0, 1.5], abs=1e-6)
    assert tr.mbps.tolist() == [10, 11, 12, 13]


def test_a_file_saved_with_a_byte_order_mark_reads(tmp_path):
    path = tmp_path / 'excel.csv'          # Excel's "CSV UTF-8" starts with U+FEFF
    path.write_bytes('\ufefftime_s,throughput_kbps\r\n0,5000\r\n0.5,6000\r\n'.encode('utf-8'))
    assert traces.load_trace(path).mbps.tolist() == [5.0, 6.0]
    path.write_bytes('\ufeff0,5\n0.5,6\n'.encode('utf-8'))
    assert traces.load_trace(path).mbps.tolist() == [5.0, 6.0]


def test_a_header_with_no_time_column_says_which_column_was_read_as_time(tmp_path):
    # a 5G drive record that numbers runs and samples but names no time column
    text = 'run_num,seq_num,rsrp_dbm,Throughput\n1,0,-80,310.5\n1,1,-81,290.2\n'
    path = tmp_path / 'lumos.csv'
    path.write_text(text)
    guess = r"lumos.csv:3: time 1.0 does not increase .*the first, 'run_num', was read as"
    with pytest.raises(TraceFormatError, match=guess):
        traces.load_trace(path)
    path.write_text('t_s,Throughput\n1,310.5\n0,290.2\n')     # a named time: no guess to name
    with pytest.raises(TraceFormatError) as err:
        traces.load_trace(path)
    assert 'does not increase' in str(err.value) and 'was read as seconds' not in str(err.value)


@pytest.mark.parametrize('header, seconds_per_unit', [
    ('time_min', 60.0), ('elapsed (minutes)', 60.0), ('time_h', 3600.0), ('hours', 3600.0),
    ('time_ms', 1e-3), ('time_s', 1.0),
])
def test_a_time_column_in_minutes_or_hours_reads_as_seconds(tmp_path, header,
                                                            seconds_per_unit):
    # a drive logged per minute was read as per second: a 3-minute record lasted 3 s
    tr = _load(tmp_path, f'{header},mbps\n0,1\n1,2\n2,3\n')
    assert tr.t_s.tolist() == pytest.approx([0.0, seconds_per_unit, 2 * seconds_per_unit])


def test_a_rate_written_out_in_kbytes_per_second_is_not_read_as_mbit_per_s(tmp_path):
    tr = _load(tmp_path, 'time_s,throughput_kbytes_per_s\n0,3000\n1,5000\n2,4000\n')
    assert tr.mbps.tolist() == pytest.approx([24.0, 40.0, 32.0])


def test_a_tab_separated_file_with_decimal_commas_reads(tmp_path):
    # a spreadsheet in a decimal-comma locale saved as "Text (tab-delimited)"
    tr = _load(tmp_path, 't\tmbps\n0\t10,5\n1\t11,25\n', 'tab.tsv')
    assert tr.mbps.tolist() == [10.5, 11.25]


@pytest.mark.parametrize('first', ['sep=;', '"sep=;"', 'SEP=;'])
def test_excels_separator_line_is_passed_over(tmp_path, first):
    tr = _load(tmp_path, f'{first}\ntime_s;throughput_kbps\n0;10500\n1;12000\n')
    assert tr.t_s.tolist() == [0.0, 1.0] and tr.mbps.tolist() == [10.5, 12.0]


@pytest.mark.parametrize('header, seconds_per_unit', [
    # each was read as seconds: 1,000 ms of record lasted 1,000 s
    ('timeMs', 1e-3), ('elapsedMs', 1e-3), ('msecs', 1e-3), ('time_msecs', 1e-3),
    ('time_millisecond', 1e-3), ('time (millisec)', 1e-3), ('time_nsec', 1e-9),
    ('time_usecs', 1e-6), ('timestamp_microsecond', 1e-6), ('time_\u00b5s', 1e-6),
    ('time_\u03bcs', 1e-6), ('TimeUs', 1e-6), ('time_seconds', 1.0),
    # a unit with a capital inside stays one word (split, mS was m, s: seconds)
    ('time_mS', 1e-3), ('Time (mS)', 1e-3), ('Time(uS)', 1e-6), ('elapsed_uSec', 1e-6),
    ('TimeMS', 1e-3),
])
def test_time_units_in_camel_case_plural_or_micro_sign_convert(tmp_path, header,
                                                               seconds_per_unit):
    tr = _load(tmp_path, f'{header},throughputKbps\n0,5000\n500,4000\n1000,3000\n')
    assert tr.t_s.tolist() == pytest.approx([0.0, 500 * seconds_per_unit,
                                             1000 * seconds_per_unit])
    assert tr.end_s == pytest.approx(1500 * seconds_per_unit)
    assert tr.mbps.tolist() == [5.0, 4.0, 3.0]


def test_the_reported_camel_case_record_lasts_one_and_a_half_seconds(tmp_path):
    tr = _load(tmp_path, 'timeMs,throughputKbps\n0,5000\n500,4000\n1000,3000\n')
    assert traces.stats(tr)['duration_s'] == pytest.approx(1.5)


@pytest.mark.parametrize('header, word', [
    ('time_ps', 'ps'), ('time_ksec', 'ksec'), ('time_milisec', 'milisec'),
    ('elapsed_decisecond', 'decisecond'), ('timeCs', 'cs'),
])
def test_a_time_unit_this_reader_does_not_know_is_refused_not_read_as_seconds(
        tmp_path, header, word):
    path = tmp_path / 'unit.csv'
    path.write_text(f'{header},mbps\n0,5\n1,6\n')
    with pytest.raises(TraceFormatError) as err:
        traces.load_trace(path)
    message = str(err.value)
    assert message.startswith(f'{path}:1: time column {header!r}: {word!r} looks like a unit')
    assert '\n' not in message


@pytest.mark.parametrize('header', ['time_utc', 'timestamp', 'Zeit (s)', 't_seconds', 'time'])
def test_time_headers_without_a_unit_or_with_seconds_still_read_as_seconds(tmp_path, header):
    assert _load(tmp_path, f'{header},mbps\n0,5\n2,6\n').t_s.tolist() == [0.0, 2.0]


def test_bare_columns_above_a_gigabit_warn_that_they_are_read_as_mbit_per_s(tmp_path, capsys):
    # a slow link logged in kbit/s (3-8 Mbit/s) read as a 5 Gbit/s link without a word
    tr = _load(tmp_path, '0,3000\n1,5000\n2,8000\n', 'kbit.csv')
    assert tr.mbps.tolist() == [3000.0, 5000.0, 8000.0]        # not refused: a fast link may be
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and err.startswith('warning: ')
    assert 'kbit.csv: the rates have no unit and are read as Mbit/s, median 5000' in err
    assert 'name the unit in a header line such as "time_s,kbps"' in err
    tr = _load(tmp_path, 'time,throughput\n0,3000\n1,5000\n', 'noun.csv')   # no unit named
    assert 'noun.csv: the rates have no unit' in capsys.readouterr().err
    # a unit in the header, or a median of a Wi-Fi link: no warning
    assert _load(tmp_path, 'time_s,mbps\n0,3000\n1,5000\n', 'named.csv').mean_mbps == 4000.0
    assert _load(tmp_path, '0,300\n1,500\n2,800\n', 'wifi.csv').mean_mbps == pytest.approx(
        1600 / 3)
    assert _load(tmp_path, 'time_s,kbps\n0,3000\n1,5000\n', 'kbps.csv').mbps.tolist() == [
        3.0, 5.0]
    assert capsys.readouterr().err == ''
