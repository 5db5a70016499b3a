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
"""Records in the layouts of public datasets and tools: read right, or refused in one line."""

import gzip
import json

import numpy as np
import pytest
from rog_ros.net import columns, traces
from rog_ros.net.traces import TraceFormatError


def _write(tmp_path, text, name='link.csv'):
    """Write ``text`` to ``tmp_path / name`` and return the path."""
    path = tmp_path / name
    path.write_text(text)
    return path


def _refusal(path) -> str:
    """Return the one-line message with which ``load_trace`` refuses ``path``."""
    with pytest.raises(TraceFormatError) as err:
        traces.load_trace(path)
    message = str(err.value)
    assert '\n' not in message
    return message


@pytest.mark.parametrize('header', [
    '"Interval start","All Packets"',      # Wireshark's I/O graph saved as CSV
    'frame.time_epoch,frame.len',          # tshark -T fields -e frame.time_epoch -e frame.len
    'Time,Length', 'time_s,pkts', 'time,size', 'time_s,rssi', 'time,snr_db', 'time,mcs',
])
def test_a_second_column_that_is_no_rate_is_refused_not_read_as_mbit_per_s(tmp_path, header):
    # each was read as Mbit/s: 1,514-byte frames made a 1.5 Gbit/s link with only a warning
    path = _write(tmp_path, f'{header}\n0.5,1514\n1.0,66\n1.5,1514\n2.0,1514\n')
    message = _refusal(path)
    assert message.startswith(f'{path}:1: column ')
    assert 'not a rate' in message


def test_a_column_named_like_a_link_is_still_read(tmp_path):
    path = _write(tmp_path, 'time,Durchsatz\n0,5\n1,6\n')
    assert traces.load_trace(path).mbps.tolist() == [5.0, 6.0]


def test_a_gap_in_the_samples_is_warned_about(tmp_path, capsys):
    rows = [f'{k * 0.5},{10 + k % 3}' for k in range(20)]
    rows += [f'{300 + k * 0.5},{10 + k % 3}' for k in range(20)]
    path = _write(tmp_path, 'time_s,mbps\n' + '\n'.join(rows) + '\n', 'gap.csv')
    tr = traces.load_trace(path)
    assert tr.duration_s == pytest.approx(310.0)
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'gap.csv' in err
    assert 'no sample for 290.5 s after t=9.5 s' in err
    path = _write(tmp_path, 'time_s,mbps\n' + '\n'.join(rows[:20]) + '\n', 'even.csv')
    traces.load_trace(path)
    assert capsys.readouterr().err == ''


def test_a_bare_byte_counter_is_not_told_to_be_divided_into_mbit_per_s(tmp_path):
    # /sys/class/net/wlan0/statistics/rx_bytes logged with its time: the old advice (divide
    # the column by 1e6) made a rising counter a rate without a word
    rows = ''.join(f'{1576495386 + k} {8123456789 + k * 2_500_000}\n' for k in range(10))
    message = _refusal(_write(tmp_path, rows, 'counter.txt'))
    assert 'never decreases' in message and 'rx_bytes' in message
    assert 'divide the second column' not in message


def test_an_interface_byte_counter_is_read_as_the_rate_between_rows(tmp_path):
    text = 'timestamp,rx_bytes\n100,8000000000\n101,8002500000\n103,8002500000\n104,8003750000\n'
    tr = traces.load_trace(_write(tmp_path, text))
    assert tr.t_s.tolist() == [0.0, 1.0, 3.0]
    assert tr.mbps.tolist() == pytest.approx([20.0, 0.0, 10.0])
    assert tr.end_s == pytest.approx(4.0)


def test_a_byte_counter_that_goes_down_is_refused_naming_the_line(tmp_path):
    path = _write(tmp_path, 'time_s,tx_bytes\n0,5000\n1,9000\n2,100\n3,900\n')
    message = _refusal(path)
    assert message.startswith(f'{path}:4: ') and 'tx_bytes' in message and 'reset' in message


def _gnettrack(rows) -> str:
    """Return a G-NetTrack Pro / Raca et al. drive log with ``rows`` of (stamp, DL, UL)."""
    head = ('Timestamp,Longitude,Latitude,Speed,Operatorname,CellID,NetworkMode,RSRP,RSRQ,SNR,'
            'CQI,RSSI,DL_bitrate,UL_bitrate,State,PINGAVG,PINGMIN,PINGMAX,PINGSTDEV,PINGLOSS,'
            'CELLHEX,NODEHEX,LACHEX,RAWCELLID,NRxRSRP,NRxRSRQ\n')
    return head + ''.join(f'{t},-8.469,51.896,12,A,2,5G,-92,-11,7.0,11,-69,{dl},{ul},D,-,-,-,-,'
                          '-,-,-,-,-,-85,-12\n' for t, dl, ul in rows)


def test_a_gnettrack_drive_log_reads_its_download_rate_in_kbit_per_s(tmp_path):
    # the Raca et al. 4G/5G datasets: DL_bitrate in kbit/s, times as 2019.12.16_11.23.06
    rows = [('2019.12.16_11.23.06', 45000, 800), ('2019.12.16_11.23.07', 3000, 120),
            ('2019.12.16_11.23.09', 0, 0)]
    tr = traces.load_trace(_write(tmp_path, _gnettrack(rows)))
    assert tr.t_s.tolist() == [0.0, 1.0, 3.0]
    assert tr.mbps.tolist() == [45.0, 3.0, 0.0]
    two = 'Timestamp,DL_bitrate\n2019.12.16_11.23.06,4134\n2019.12.16_11.23.07,5120\n'
    assert traces.load_trace(_write(tmp_path, two, 'cut.csv')).mbps.tolist() == [4.134, 5.12]


@pytest.mark.parametrize('stamp', ['29.03.2026 00:59:50', '12/31/2026 11:59:50 PM', '00:59:50',
                                   'Mon Dec 16 11:23:06 2019'])
def test_a_time_that_is_not_a_number_nor_iso_8601_is_named_in_the_refusal(tmp_path, stamp):
    path = _write(tmp_path, f'timestamp;throughput_mbps\n{stamp};5\n')
    message = _refusal(path)
    assert message.startswith(f'{path}:2: time {stamp!r} ')
    assert 'ISO 8601' in message


def test_a_gzip_compressed_record_reads(tmp_path, capsys):
    path = tmp_path / 'link.csv.gz'
    path.write_bytes(gzip.compress(b'time_ms,throughput_kbps\n0,5000\n500,6000\n'))
    tr = traces.load_trace(path)
    assert tr.t_s.tolist() == [0.0, 0.5] and tr.mbps.tolist() == [5.0, 6.0]
    assert traces.trace_file_format(path) == 'CSV columns'
    # cut in its trailer: the text is whole, read with a warning (test_net_field_records)
    path.write_bytes(gzip.compress(b'time_ms,throughput_kbps\n0,5000\n500,6000\n')[:-9])
    assert traces.load_trace(path).mbps.tolist() == [5.0, 6.0]
    assert f'{path}: its gzip stream is cut short' in capsys.readouterr().err
    path.write_bytes(gzip.compress(b'time_ms,throughput_kbps\n0,5000\n500,6000\n')[:10])
    message = _refusal(path)
    assert message.startswith(f'{path}: ') and 'gzip' in message


def test_a_day_of_samples_at_10_hz_reads_in_seconds(tmp_path):
    t = np.arange(864_000) / 10.0
    body = '\n'.join(f'{a:.1f},{50 + (k % 7)}' for k, a in enumerate(t.tolist()))
    tr = traces.load_trace(_write(tmp_path, 'time_s,mbps\n' + body + '\n'))
    assert tr.duration_s == pytest.approx(86_400.0) and len(tr) == 864_000


def test_the_holds_of_a_saved_trace_are_not_warned_about_as_gaps(tmp_path, capsys):
    path = tmp_path / 'outdoors.csv'
    traces.save_trace(traces.generate('outdoors', 600, seed=1), path)
    traces.load_trace(path)
    assert capsys.readouterr().err == ''


def test_thousands_separators_beside_decimal_commas_read_or_are_refused(tmp_path):
    # a German spreadsheet's "#.##0,0": 1.234,5 kbit/s is 1234.5 kbit/s
    path = _write(tmp_path, 'Zeit (s);Durchsatz (kbit/s)\n0;1.234,5\n1;987,5\n2;12.000,0\n')
    assert traces.load_trace(path).mbps.tolist() == pytest.approx([1.2345, 0.9875, 12.0])
    # "#.##0": 1.234 beside 987,5 was read as 1.234 kbit/s, a thousand times too slow
    path = _write(tmp_path, 'Zeit (s);Durchsatz (kbit/s)\n0;1.234\n1;987,5\n', 'mixed.csv')
    message = _refusal(path)
    assert message.startswith(f'{path}:2: ') and "'1.234'" in message and 'thousands' in message


def test_a_long_step_in_a_time_column_without_a_unit_is_warned_about(tmp_path, capsys):
    # a logger's elapsed milliseconds in a bare column: 500 ms steps read as 500 s
    path = _write(tmp_path, ''.join(f'{k * 500},{20 + k % 3}\n' for k in range(8)), 'ms.csv')
    assert traces.load_trace(path).duration_s == pytest.approx(4000.0)
    err = capsys.readouterr().err
    assert 'ms.csv' in err and 'read as seconds' in err and 'time_ms' in err
    path = _write(tmp_path, 'time_s,mbps\n' + ''.join(f'{k * 500},{20 + k % 3}\n'
                                                      for k in range(8)), 'named.csv')
    traces.load_trace(path)
    assert capsys.readouterr().err == ''


_IPERF3_UDP_CLIENT = """Connecting to host 10.0.0.1, port 5201
[  5] local 10.0.0.2 port 41234 connected to 10.0.0.1 port 5201
[ ID] Interval           Transfer     Bitrate         Total Datagrams
[  5]   0.00-1.00   sec   129 KBytes  1.05 Mbits/sec  91
[  5]   1.00-2.00   sec   127 KBytes  1.04 Mbits/sec  90
- - - - - - - - - - - - - - - - - - - - - - - - -
[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams
[  5]   0.00-2.00   sec   256 KBytes  1.05 Mbits/sec  0.000 ms  0/181 (0%)  sender
[  5]   0.00-2.04   sec   256 KBytes  1.03 Mbits/sec  0.123 ms  0/181 (0%)  receiver
"""
_IPERF2_UDP_CLIENT = """------------------------------------------------------------
Client connecting to 10.0.0.1, UDP port 5001
Sending 1470 byte datagrams, IPG target: 11215.21 us (kalman adjust)
UDP buffer size:  208 KByte (default)
------------------------------------------------------------
[  3] local 10.0.0.2 port 41234 connected with 10.0.0.1 port 5001
[ ID] Interval       Transfer     Bandwidth
[  3]  0.0- 1.0 sec   129 KBytes  1.06 Mbits/sec
[  3]  1.0- 2.0 sec   128 KBytes  1.05 Mbits/sec
[  3]  0.0- 2.0 sec   257 KBytes  1.05 Mbits/sec
[  3] Sent 179 datagrams
[  3] Server Report:
[  3]  0.0- 2.0 sec   257 KBytes  1.05 Mbits/sec   0.012 ms    0/  179 (0%)
"""


@pytest.mark.parametrize('text, line', [(_IPERF3_UDP_CLIENT, 3), (_IPERF2_UDP_CLIENT, 2)])
def test_the_text_of_a_udp_client_is_refused_as_its_json_is(tmp_path, text, line):
    # its intervals are the rate it sent (-b, 1 Mbit/s by default): a constant 1.05 Mbit/s
    # link was replayed without a word
    path = _write(tmp_path, text, 'udp.txt')
    message = _refusal(path)
    assert message.startswith(f'{path}:{line}: ') and 'UDP client' in message
    assert 'server side' in message


def test_the_text_of_a_udp_server_still_reads(tmp_path):
    text = ('[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total '
            'Datagrams\n'
            '[  5]   0.00-1.00   sec   120 KBytes   983 Kbits/sec  0.010 ms  0/85 (0%)\n'
            '[  5]   1.00-2.00   sec   125 KBytes  1.02 Mbits/sec  0.011 ms  0/88 (0%)\n')
    tr = traces.load_trace(_write(tmp_path, text, 'udp.txt'))
    assert tr.mbps.tolist() == pytest.approx([0.983, 1.02])


def test_times_that_are_a_spreadsheets_day_serials_are_warned_about(tmp_path, capsys):
    # Excel's date cells saved as numbers: days since 1899, one row per second read as steps
    # of 12 us, so the record lasted 0.7 ms and looped through its rates without a word
    rows = ''.join(f'{45234.5 + k / 86400:.8f};{20 + k % 3}\n' for k in range(60))
    path = _write(tmp_path, 'Datum;Durchsatz (Mbit/s)\n' + rows, 'excel.csv')
    assert traces.load_trace(path).duration_s < 1e-3
    err = capsys.readouterr().err
    assert 'excel.csv' in err and 'read as seconds' in err and 'days' in err


@pytest.mark.parametrize('name, mbit_per_unit', [
    ('bytes_sec', 8e-6), ('bits_sec', 1e-6), ('kbytes_sec', 8e-3), ('Mbits_second', 1.0),
    ('bytes_sec_interval', 8e-6),
])
def test_a_unit_joined_to_sec_by_an_underscore_converts(name, mbit_per_unit):
    # FCC Measuring Broadband America's bytes_sec was read as Mbit/s; the advice to divide it
    # by 1e6 (bit/s) then left it 8 times too slow
    assert columns.rate_factor(name) == pytest.approx(mbit_per_unit)


def test_a_column_of_the_fcc_broadband_data_cut_to_two_reads_in_mbit_per_s(tmp_path):
    text = 'dtime,bytes_sec\n2020-01-01 00:03:52,2500000\n2020-01-01 01:03:52,1250000\n'
    tr = traces.load_trace(_write(tmp_path, text))
    assert tr.t_s.tolist() == [0.0, 3600.0] and tr.mbps.tolist() == pytest.approx([20.0, 10.0])


@pytest.mark.parametrize('name', ['bits_sent', 'rx_bytes', 'bytes_seen'])
def test_words_that_only_start_like_sec_are_no_unit(name):
    assert columns.rate_factor(name) is None


_IW_LOG = """Mon Dec 16 11:23:06 UTC 2019
Station aa:bb:cc:dd:ee:ff (on wlan0)
\ttx bitrate:\t866.7 MBit/s VHT-MCS 9 80MHz short GI VHT-NSS 2
"""
_IFSTAT = """  Time           wlan0
HH:MM:SS   KB/s in  KB/s out
11:23:00   1250.00     12.00
"""
_VNSTAT = """ Monitoring wlan0...    (press CTRL-C to stop)

   rx:    12.34 Mbit/s  1234 p/s          tx:   456 kbit/s   321 p/s
"""


@pytest.mark.parametrize('text, line', [(_IW_LOG, 1), (_IFSTAT, 2), (_VNSTAT, 1)])
def test_a_tool_output_no_reader_knows_is_refused_naming_the_formats_read(tmp_path, text,
                                                                          line):
    path = _write(tmp_path, text, 'tool.log')
    message = _refusal(path)
    assert message.startswith(f'{path}:{line}: ')
    assert 'no trace format this reader knows' in message and 'iperf3 -J' in message


def test_a_bad_row_after_samples_does_not_list_the_formats(tmp_path):
    message = _refusal(_write(tmp_path, 'time_s,mbps\n0,5\n1,6\n2,x\n'))
    assert 'no trace format' not in message


def test_a_table_refused_for_its_header_does_not_list_the_formats(tmp_path):
    message = _refusal(_write(tmp_path, 'time,All Packets\n0,5\n1,6\n'))
    assert 'not a rate' in message and 'no trace format' not in message


def _lumos5g(rows) -> str:
    """Return a Lumos5G CSV whose ``rows`` are (run_num, seq_num, Throughput in Mbit/s)."""
    head = ('run_num,seq_num,abstractSignalStr,latitude,longitude,movingSpeed,compassDirection,'
            'nrStatus,lte_rssi,lte_rsrp,lte_rsrq,lte_rssnr,nr_ssRsrp,nr_ssRsrq,nr_ssSinr,'
            'Throughput,mobility_mode,trajectory_direction,tower_id\n')
    return head + ''.join(f'{run},{seq},2,44.975,-93.258,1.2,180,CONNECTED,-61,-94,-11,12,-85,'
                          f'-11,15,{mbps},walking,CW,16\n' for run, seq, mbps in rows)


def test_a_lumos5g_csv_reads_one_sample_per_second_and_plays_its_runs_in_turn(tmp_path):
    # it was refused: no column named like a time, and the first, run_num, repeats
    rows = [(1, 1, 880.5), (1, 2, 912.0), (1, 3, 15.2), (2, 1, 0.0), (2, 2, 1200.0)]
    tr = traces.load_trace(_write(tmp_path, _lumos5g(rows), 'Lumos5G-v1.0.csv'))
    assert tr.t_s.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0] and tr.end_s == 5.0
    assert tr.mbps.tolist() == [880.5, 912.0, 15.2, 0.0, 1200.0]


def test_a_lumos5g_run_whose_samples_go_back_is_refused_naming_the_line(tmp_path):
    path = _write(tmp_path, _lumos5g([(1, 1, 10.0), (1, 3, 11.0), (1, 2, 12.0)]))
    assert _refusal(path).startswith(f'{path}:4: time ')


def test_a_lumos5g_run_that_comes_back_after_another_is_refused(tmp_path):
    # rows of two runs interleaved would have played as one made-up run
    path = _write(tmp_path, _lumos5g([(1, 1, 10.0), (2, 1, 11.0), (1, 2, 12.0)]))
    message = _refusal(path)
    assert message.startswith(f'{path}:4: run_num 1 again') and 'sort' in message


def test_the_sums_of_iperf_2_1_parallel_streams_are_the_link(tmp_path):
    # iperf 2.1 writes [SUM-2]: the sums were skipped and the streams refused, with the advice
    # to run with -P that the run already had
    text = ('[  1] 0.00-1.00 sec  5.00 MBytes  41.9 Mbits/sec\n'
            '[  2] 0.00-1.00 sec  6.00 MBytes  50.3 Mbits/sec\n'
            '[SUM-2] 0.00-1.00 sec  11.0 MBytes  92.2 Mbits/sec\n'
            '[  1] 1.00-2.00 sec  4.00 MBytes  33.6 Mbits/sec\n'
            '[  2] 1.00-2.00 sec  4.00 MBytes  33.6 Mbits/sec\n'
            '[SUM-2] 1.00-2.00 sec  8.00 MBytes  67.1 Mbits/sec\n')
    assert traces.load_trace(_write(tmp_path, text, 'p2.txt')).mbps.tolist() == [92.2, 67.1]


def test_the_sums_of_iperf2_csv_parallel_streams_are_the_link(tmp_path):
    # iperf -y C -P 2: the sum of the streams is the line with transfer id -1
    rows = [('3', '0.0-1.0', 5e6), ('4', '0.0-1.0', 6e6), ('-1', '0.0-1.0', 11e6),
            ('3', '1.0-2.0', 4e6), ('4', '1.0-2.0', 4e6), ('-1', '1.0-2.0', 8e6)]
    text = ''.join(f'20191216112306,10.0.0.2,53012,10.0.0.1,5001,{i},{span},1000,{bps:.0f}\n'
                   for i, span, bps in rows)
    assert traces.load_trace(_write(tmp_path, text, 'p2.csv')).mbps.tolist() == [11.0, 8.0]


def test_clock_times_an_hour_apart_are_not_suspected_of_being_milliseconds(tmp_path, capsys):
    # FCC Measuring Broadband America: one test an hour, dtime a clock time
    text = 'dtime,bytes_sec\n' + ''.join(f'2020-01-01 {h:02d}:03:52,2500000\n' for h in range(4))
    assert traces.load_trace(_write(tmp_path, text)).duration_s == pytest.approx(4 * 3600.0)
    assert capsys.readouterr().err == ''


def test_the_gigabit_rates_of_a_lumos5g_csv_are_not_thought_kbit_per_s(tmp_path, capsys):
    rows = [(1, k, 1500.0 + k) for k in range(1, 6)]
    traces.load_trace(_write(tmp_path, _lumos5g(rows)))
    assert capsys.readouterr().err == ''


def test_a_speedtest_cli_csv_reads_its_download_rate_in_bit_per_s(tmp_path):
    # speedtest-cli --csv in a cron loop, with its --csv-header; a sponsor's name may hold a comma
    text = ('Server ID,Sponsor,Server Name,Timestamp,Distance,Ping,Download,Upload,Share,'
            'IP Address\n'
            '21541,"Telenet, BVBA",Ghent,2019-12-16T11:23:06.123456Z,12.3,14.2,93245678.12,'
            '9245678.5,,10.0.0.2\n'
            '21541,"Telenet, BVBA",Ghent,2019-12-16T11:28:06.123456Z,12.3,15.0,41000000.0,'
            '8000000.0,,10.0.0.2\n')
    tr = traces.load_trace(_write(tmp_path, text, 'speedtest.csv'))
    assert tr.t_s.tolist() == [0.0, 300.0]
    assert tr.mbps.tolist() == pytest.approx([93.24567812, 41.0])


def test_a_quoted_field_holding_the_separator_stays_one_field(tmp_path):
    text = 'time_s,place,throughput_mbps\n0,"hall, east",5\n1,"yard",6\n'
    assert traces.load_trace(_write(tmp_path, text)).mbps.tolist() == [5.0, 6.0]


def test_python_loggings_comma_before_the_milliseconds_is_read_in_a_comma_csv(tmp_path):
    text = ('time,throughput_mbps\n2026-03-29 00:59:50,000,20.5\n'
            '2026-03-29 00:59:50,500,21.5\n2026-03-29 00:59:51,250,22.5\n')
    tr = traces.load_trace(_write(tmp_path, text))
    assert tr.t_s.tolist() == [0.0, 0.5, 1.25] and tr.mbps.tolist() == [20.5, 21.5, 22.5]


def _old_udp_report(start: dict) -> str:
    """Return an iperf3 -u -J report of an older version: no "sender" in its sums."""
    sums = [{'start': k, 'end': k + 1, 'seconds': 1, 'bytes': 131072,
             'bits_per_second': 1048576} for k in range(3)]
    start = dict(start, test_start=dict({'protocol': 'UDP', 'num_streams': 1},
                                        **start.get('test_start', {})))
    return json.dumps({'start': start, 'intervals': [{'streams': [s], 'sum': s} for s in sums],
                       'end': {}})


def test_an_old_udp_clients_json_without_sender_flags_is_refused(tmp_path):
    # older iperf3 versions wrote no "sender" in interval sums: the client's -b rate was read
    client = {'connecting_to': {'host': '10.0.0.1', 'port': 5201}}
    message = _refusal(_write(tmp_path, _old_udp_report(client), 'old.json'))
    assert 'report of a UDP client' in message
    reverse = dict(client, test_start={'reverse': 1})                 # the client received
    server = {'accepted_connection': {'host': '10.0.0.2', 'port': 41234}}
    for start in (reverse, server):
        tr = traces.load_trace(_write(tmp_path, _old_udp_report(start), 'ok.json'))
        assert tr.mbps.tolist() == pytest.approx([1.048576] * 3)
