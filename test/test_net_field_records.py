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
"""Records as loggers leave them in the field: cut short, out of order, compressed."""

import gzip

import pytest
from rog_ros.net import traces
from rog_ros.net.traces import TraceFormatError

ROWS = 'time_s,mbps\n0,10\n0.5,20\n1,30\n1.5,40\n'
"""Four rows of 0.5 s: mean 25 Mbit/s over 2 s."""


def _write(tmp_path, data, name='link.csv'):
    """Write ``data`` (text or bytes) to ``tmp_path / name`` and return the path."""
    path = tmp_path / name
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    return path


def _refusal(path) -> str:
    """Return the one-line message with which ``load_trace`` refuses ``path``."""
    with pytest.raises(TraceFormatError) as err:
        traces.load_trace(path)
    message = str(err.value)
    assert '\n' not in message
    return message


def _assert_rows(trace) -> None:
    """Assert that ``trace`` is ROWS: mean 25 Mbit/s, 2 s, 0.5 s steps."""
    assert trace.mean_mbps == pytest.approx(25.0)
    assert trace.duration_s == pytest.approx(2.0)
    assert trace.dt_s == pytest.approx(0.5)


@pytest.mark.parametrize('text, cut', [
    (ROWS + '2,', "'2,'"),                          # killed between the comma and the rate
    (ROWS + '2', "'2'"),                            # killed inside the time
    ('time_s,rssi,mbps\n0,-40,10\n0.5,-41,20\n1,-40,30\n1.5,-42,40\n2,-4', "'2,-4'"),  # wider
    (ROWS.replace('\n', '\r\n') + '2,', "'2,'"),    # CRLF line ends, as on Windows
])
def test_a_last_line_cut_short_by_a_killed_logger_is_left_out_with_a_warning(
        tmp_path, capsys, text, cut):
    # refused before: the whole record failed on the half line its logger left at the end
    path = _write(tmp_path, text)
    _assert_rows(traces.load_trace(path))
    err = capsys.readouterr().err
    assert err.count('\n') == 1
    assert f'{path}:6: its last line, {cut}, is cut short' in err and 'left out' in err


def test_a_short_line_that_is_not_the_last_or_ends_its_line_is_still_refused(tmp_path):
    message = _refusal(_write(tmp_path, ROWS + '2,\n'))
    assert message.startswith(f'{tmp_path / "link.csv"}:6: expected two numbers')
    message = _refusal(_write(tmp_path, ROWS.replace('0.5,20', '0.5,') + '2,50'))
    assert message.startswith(f'{tmp_path / "link.csv"}:3: expected two numbers')


def test_a_whole_last_line_without_a_line_end_is_read(tmp_path, capsys):
    path = _write(tmp_path, ROWS.rstrip('\n'))
    _assert_rows(traces.load_trace(path))
    assert capsys.readouterr().err == ''


def test_a_gzip_record_cut_short_reads_up_to_the_cut_with_a_warning(tmp_path, capsys):
    # a logger piping into gzip that was stopped leaves no end-of-stream: refused before
    head = ''.join(f'{k * 0.5},{10 * (k % 4 + 1)}\n' for k in range(400))
    tail = ''.join(f'{k * 0.5},{10 * (k % 4 + 1)}\n' for k in range(400, 800))
    whole = gzip.compress(tail.encode())
    path = _write(tmp_path, gzip.compress(('time_s,mbps\n' + head).encode())
                  + whole[:len(whole) // 2], 'link.csv.gz')
    trace = traces.load_trace(path)
    rows = len(trace)
    assert 400 < rows < 800
    assert trace.t_s.tolist() == [k * 0.5 for k in range(rows)]
    assert trace.mbps.tolist() == [10.0 * (k % 4 + 1) for k in range(rows)]
    err = capsys.readouterr().err
    assert f'{path}: its gzip stream is cut short' in err


@pytest.mark.parametrize('cut', [10, 12, 'corrupt'])
def test_a_gzip_record_that_does_not_decompress_is_refused_in_one_line(tmp_path, cut):
    data = gzip.compress(''.join(f'{k},{k % 7}\n' for k in range(4000)).encode(), mtime=0)
    # cut in its header, or after a few letters; or corrupt: a zlib.error, a crash before
    data = data[:20] + b'\xff' * 50 + data[70:] if cut == 'corrupt' else data[:cut]
    path = _write(tmp_path, data, 'link.csv.gz')
    message = _refusal(path)
    assert message.startswith(f'{path}: starts as a gzip file but does not decompress (')
    assert message.endswith('check the download, or gunzip it')


@pytest.mark.parametrize('rows', [
    '0,10\n1,20\n3,30\n2,40\n4,50\n',
    '2026-03-01T10:00:00Z,10\n2026-03-01T10:00:01Z,20\n2026-03-01T10:00:03Z,30\n'
    '2026-03-01T10:00:02Z,30\n',
], ids=['seconds', 'iso'])
def test_times_that_go_back_are_refused_saying_what_to_do(tmp_path, rows):
    # the refusal named the line and said only "does not increase"
    path = _write(tmp_path, 'time,mbps\n' + rows)
    message = _refusal(path)
    assert message.startswith(f'{path}:5: time ') and 'does not increase' in message
    assert message.endswith('the rows are out of order (sort them by time) or the clock was set '
                            'back (cut the file there into two records)')


GNETTRACK = ('Timestamp,Longitude,Latitude,Speed,Operatorname,CellID,NetworkMode,RSRP,RSRQ,SNR,'
             'CQI,RSSI,DL_bitrate,UL_bitrate,State,PINGAVG,PINGMIN,PINGMAX,PINGSTDEV,PINGLOSS,'
             'CELLHEX,NODEHEX,LACHEX,RAWCELLID,NRxRSRP,NRxRSRQ\n')
"""The header of G-NetTrack Pro's drive logs in the Raca et al. 5G dataset."""


def test_rows_that_share_a_second_of_a_drive_log_are_one_sample_of_their_mean(
        tmp_path, capsys):
    # G-NetTrack Pro stamps whole seconds and now and then writes two rows in one: the whole
    # log was refused ("time ... does not increase") on its first such pair
    stamps = ['07.00.00', '07.00.01', '07.00.01', '07.00.03', '07.00.04', '07.00.04', '07.00.04']
    rates = [10000, 20000, 40000, 30000, 30000, 60000, 0]         # kbit/s
    path = _write(tmp_path, GNETTRACK + ''.join(
        f'2019.11.28_{s},-8.38,51.93,0,B,12,5G,-100,-10,8.0,10,-,{r},0,D,-,-,-,-,-,C,A,B,1,-100,'
        '-1\n' for s, r in zip(stamps, rates)))
    trace = traces.load_trace(path)
    assert trace.t_s.tolist() == [0.0, 1.0, 3.0, 4.0]
    assert trace.mbps.tolist() == pytest.approx([10.0, 30.0, 30.0, 30.0])
    assert trace.duration_s == pytest.approx(5.0)
    assert trace.mean_mbps == pytest.approx((10 + 2 * 30 + 30 + 30) / 5.0)
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and f'{path}:4: 3 rows with the time of the row before' in err


def test_a_row_merged_into_the_one_before_has_its_decimal_comma_checked(tmp_path):
    # the first comma of a column was looked up among the samples by the number read so far:
    # in a merged row, the next sample's line, or past the last (IndexError, a traceback)
    trace = traces.load_trace(_write(tmp_path, 'time_s;mbps\n0;1\n1;2\n1;2,5\n'))
    assert trace.mbps.tolist() == [1.0, 2.25]
    path = _write(tmp_path, 'time_s,mbps\n0,1\n1,2\n1,"2,345"\n2,3\n', 'excel.csv')
    assert _refusal(path).startswith(f"{path}:4: '2,345' in a comma-separated file, quoted")


def test_a_counter_read_twice_in_one_second_keeps_its_later_reading(tmp_path):
    path = _write(tmp_path, 'time_s,rx_bytes\n0,0\n1,1250000\n1,2500000\n2,3750000\n')
    trace = traces.load_trace(path)
    assert trace.mbps.tolist() == pytest.approx([20.0, 10.0])   # every byte, none twice


IOSTAT = """
=================================================================
| IO Statistics                                                 |
|                                                               |
| Duration: 3.5 secs                                            |
| Interval: 1 secs                                              |
|                                                               |
| Col 1: Frames and bytes                                       |
|---------------------------------------------------------------|
|          |1                 |                                 |
| Interval | Frames |  Bytes  |                                 |
|-------------------------------|                               |
| 0 <> 1   |    100 | 1250000 |
| 1 <> 2   |    200 | 2500000 |
| 2 <> 3   |    300 | 3750000 |
| 3 <> Dur |    400 | 2500000 |
=================================================================
"""
"""``tshark -q -z io,stat,1`` of a 3.5 s capture: 10, 20, 30 Mbit/s, then 40 for half a second."""


@pytest.mark.parametrize('text', [
    IOSTAT,
    IOSTAT.replace('\n', '\r\n'),
    IOSTAT.replace('| Interval |', '| Time     |').replace('| 0 <> 1   |', '| 10:00:00 |')
    .replace('| 1 <> 2   |', '| 10:00:01 |').replace('| 2 <> 3   |', '| 10:00:02 |')
    .replace('| 3 <> Dur |', '| 10:00:03 |'),                            # tshark -t a
], ids=['relative', 'crlf', 'clock'])
def test_a_tshark_io_stat_table_reads_as_the_rate_of_its_bytes(tmp_path, text):
    # refused before: "cannot tell the rate column among ['=====...']"
    path = _write(tmp_path, text, 'iostat.txt')
    trace = traces.load_trace(path)
    assert trace.t_s.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert trace.mbps.tolist() == pytest.approx([10.0, 20.0, 30.0, 40.0])
    assert trace.duration_s == pytest.approx(3.5)
    assert trace.mean_mbps == pytest.approx(80.0 / 3.5)
    assert traces.trace_file_format(path) == 'tshark io,stat table'


def test_an_older_tsharks_table_with_its_interval_size_reads(tmp_path):
    rows = ''.join(f'| {k / 2:.1f} <> {k / 2 + 0.5:.1f} |     10 | {625000 * (1 + k % 2):7d} |\n'
                   for k in range(4))
    text = ('=' * 40 + '\n| IO Statistics                        |\n| Interval size: 0.5 secs'
            '              |\n| Col 1: Frames and bytes              |\n|            |1       |\n'
            '| Interval   | Frames |  Bytes  |\n|--------------------------------|\n' + rows)
    trace = traces.load_trace(_write(tmp_path, text, 'iostat.txt'))
    assert trace.mbps.tolist() == pytest.approx([10.0, 20.0, 10.0, 20.0])
    assert trace.duration_s == pytest.approx(2.0) and trace.dt_s == pytest.approx(0.5)


@pytest.mark.parametrize('labels, what', [
    ('| Interval | Frames |  Bytes  | Frames |  Bytes  |', 'several columns of bytes'),
    ('| Interval | FRAMES |', 'no column of bytes'),
])
def test_a_tshark_table_without_one_column_of_bytes_is_refused_saying_how(
        tmp_path, labels, what):
    path = _write(tmp_path, IOSTAT.replace('| Interval | Frames |  Bytes  |', labels))
    message = _refusal(path)
    assert message.startswith(f'{path}:11: a tshark io,stat table with {what}')
    assert message.endswith('tshark -r CAPTURE -q -z io,stat,0.5 (or with one filter: -z '
                            'io,stat,0.5,tcp)')


def test_a_quoted_number_with_a_comma_and_three_digits_is_refused_as_ambiguous(tmp_path):
    # Excel's "1,234" kbit/s (a thousands separator) was read as 1.234 kbit/s: every rate a
    # thousand times too slow, without a word
    path = _write(tmp_path, 'time_s,throughput_kbps\n0,"1,234"\n1,"2,500"\n2,"12,000"\n3,"900"\n')
    message = _refusal(path)
    assert message.startswith(f"{path}:2: '1,234' in a comma-separated file, quoted: a "
                              'thousands separator')
    assert message.endswith('write the numbers without thousands separators, with a decimal '
                            'point')
    path = _write(tmp_path, 'time_s,throughput_kbps\n0,"1,234,000"\n1,"2,500,000"\n')
    assert _refusal(path).endswith("'1,234,000' has thousands separators: write the numbers "
                                   'without them, with a decimal point')


@pytest.mark.parametrize('text', [
    'time_s,mbps\n"0,5","35,2"\n"1,0","40,0"\n"1,5","20,1"\n',   # quoted decimal commas
    'time_s;mbps\n0,5;35,2\n1,0;40,0\n1,5;20,1\n',                # semicolons: commas decimal
])
def test_decimal_commas_that_cannot_be_thousands_still_read(tmp_path, text):
    trace = traces.load_trace(_write(tmp_path, text))
    assert trace.mbps.tolist() == pytest.approx([35.2, 40.0, 20.1])
    assert trace.mean_mbps == pytest.approx((35.2 + 40.0 + 20.1) / 3)


def test_a_semicolon_file_with_three_decimals_after_a_comma_reads_as_decimals(tmp_path):
    trace = traces.load_trace(_write(tmp_path, 'time_s;mbps\n0;1,234\n1;2,500\n'))
    assert trace.mbps.tolist() == pytest.approx([1.234, 2.5])


@pytest.mark.parametrize('first', ['Station 00:11:22:33:44:55 (on wlan0)',
                                   'Connected to 00:11:22:33:44:55 (on wlan0)'])
def test_the_output_of_iw_is_refused_saying_how_to_record_the_link(tmp_path, first):
    # refused before as a table: "cannot tell the rate column among ['Station', ...]"
    path = _write(tmp_path, f'{first}\n\trx bytes:\t123456\n\ttx bitrate:\t144.4 MBit/s MCS 15\n',
                  'iw.txt')
    message = _refusal(path)
    assert message.startswith(f'{path}:1: the output of iw (station dump or link)')
    assert 'record the link over time with netmon: --record-source bitrate' in message


MM_LOG_HEAD = ('# mahimahi mm-link (downlink) [/traces/TMobile-LTE-driving.down] > down.log\n'
               '# command line: mm-link up down --downlink-log=down.log\n# queue: infinite\n'
               '# init timestamp: 1516828812345\n# base timestamp: 1000\n')
"""The header ``mm-link --downlink-log`` writes (Pantheon keeps such logs of its runs)."""


def test_an_mm_link_log_reads_as_the_rate_of_its_delivery_opportunities(tmp_path):
    # refused before: "expected two numbers ..., got '1000 # 1500'"
    events = [f'{1000 + 10 * k} # 1500' for k in range(100)]        # 1.2 Mbit/s for 1 s
    events += [f'{2000 + 5 * k} # 1500' for k in range(200)]        # 2.4 Mbit/s for 1 s
    events[5:5] = ['1040 + 1448', '1045 - 1448 5']                   # what the run sent
    path = _write(tmp_path, MM_LOG_HEAD + '\n'.join(events + ['3000 + 100']) + '\n', 'down.log')
    trace = traces.load_trace(path)
    assert trace.duration_s == pytest.approx(2.0) and trace.dt_s == pytest.approx(0.1)
    assert trace.mbps.tolist() == pytest.approx([1.2] * 10 + [2.4] * 10)
    assert trace.mean_mbps == pytest.approx(1.8)
    assert traces.trace_file_format(path) == 'mm-link log'


def test_an_mm_link_log_without_delivery_opportunities_is_refused(tmp_path):
    path = _write(tmp_path, MM_LOG_HEAD + '1000 + 1448\n1500 - 1448 3\n', 'down.log')
    assert _refusal(path) == (f'{path}: an mm-link log without a delivery opportunity (a line '
                              '"ms # bytes"): it holds what was sent, not what the link could '
                              'carry')
    path = _write(tmp_path, MM_LOG_HEAD + '1000 # 1500\n1065 - 1448 9\n', 'short.log')
    assert _refusal(path).startswith(f'{path}: an mm-link log whose events span 65 ms from its '
                                     'base timestamp: too short to replay')
    path = _write(tmp_path, MM_LOG_HEAD + '1000 # 1500\n1500 x 3\n', 'bad.log')
    assert _refusal(path).startswith(f'{path}:7: read as an mm-link log (it has a "# base')


def test_an_mm_link_log_whose_base_timestamp_is_no_number_is_refused_naming_its_line(
        tmp_path):
    # refused before as "invalid literal for int() with base 10: ' abc'", naming no file
    path = _write(tmp_path, MM_LOG_HEAD.replace('base timestamp: 1000', 'base timestamp: abc')
                  + '1000 # 1500\n3000 # 1500\n', 'down.log')
    assert _refusal(path).startswith(f'{path}:5: an mm-link log whose base timestamp is not a '
                                     "whole number of ms ('abc')")


@pytest.mark.parametrize('old, new, lineno', [
    ('Interval: 1 secs', 'Interval: 1.0.0 secs', 6),
    ('Duration: 3.5 secs', 'Duration: 3..5 secs', 5),
    ('| 3 <> Dur |', '| 3 <> 3.. |', 16),
])
def test_a_tshark_table_with_seconds_that_are_no_number_is_refused_naming_its_line(
        tmp_path, old, new, lineno):
    # refused before as "could not convert string to float", naming no file
    assert old in IOSTAT
    path = _write(tmp_path, IOSTAT.replace(old, new))
    assert _refusal(path).startswith(f'{path}:{lineno}: a tshark io,stat table with ')


def test_a_growing_rate_column_of_a_wide_table_is_named_in_the_refusal(tmp_path):
    # the advice said "the second column never decreases" of a table whose second column is
    # a signal level
    path = _write(tmp_path, 'time_s,rssi_dbm,throughput\n0,-40,1000000\n1,-41,2500000\n'
                            '2,-40,4000000\n')
    message = _refusal(path)
    assert "column 'throughput' never decreases (1000000 to 4000000)" in message
    path = _write(tmp_path, '0,1000000\n1,2500000\n2,4000000\n', 'bare.csv')
    assert 'the second column never decreases' in _refusal(path)
