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
"""iperf reports (iperf3 JSON and text, iperf2 text and CSV) read as rate traces."""

import json

import pytest
from rog_ros.net import iperf, traces
from rog_ros.net.traces import TraceFormatError


def _interval(a, b, mbps, omitted=False, sender=True):
    total = {'start': a, 'end': b, 'seconds': b - a, 'bytes': int(mbps * 1e6 * (b - a) / 8),
             'bits_per_second': mbps * 1e6, 'omitted': omitted, 'sender': sender}
    return {'streams': [dict(total, socket=5)], 'sum': total}


def _report(intervals, protocol='TCP', **extra):
    test = {'protocol': protocol, 'num_streams': 1}
    doc = {'start': {'version': 'iperf 3.9', 'test_start': test},
           'intervals': intervals, 'end': {}}
    doc.update(extra)
    return doc


def _load(tmp_path, text, name='link.json'):
    path = tmp_path / name
    path.write_text(text)
    return traces.load_trace(path)


def test_json_report_intervals_become_segments_and_warm_up_is_left_out(tmp_path):
    # -O 1: one omitted second of slow start, then three 0.5 s intervals counted from 0 again
    doc = _report([_interval(0, 1, 5.0, omitted=True), _interval(0, 0.5, 40.0),
                   _interval(0.5, 1.0, 62.5), _interval(1.0, 1.5, 0.0),
                   _interval(1.5, 1.5, 0.0)])          # iperf's empty last interval
    tr = _load(tmp_path, json.dumps(doc, indent='\t'))
    assert tr.t_s.tolist() == [0.0, 0.5, 1.0] and tr.mbps.tolist() == [40.0, 62.5, 0.0]
    assert tr.end_s == 1.5
    assert tr.total_mbit == pytest.approx(0.5 * (40.0 + 62.5))


def test_appended_json_reports_and_a_json_stream_play_one_after_the_other(tmp_path):
    one = _report([_interval(0, 1, 10.0), _interval(1, 2, 20.0)])
    two = _report([_interval(0, 1, 30.0)])
    tr = _load(tmp_path, json.dumps(one) + '\n' + json.dumps(two, indent=2) + '\n')
    assert tr.t_s.tolist() == [0.0, 1.0, 2.0] and tr.mbps.tolist() == [10.0, 20.0, 30.0]
    assert tr.end_s == 3.0
    events = [{'event': 'start', 'data': one['start']},
              {'event': 'interval', 'data': _interval(0, 0.5, 7.0)},
              {'event': 'interval', 'data': _interval(0.5, 1.0, 9.0)},
              {'event': 'end', 'data': {}}]
    tr = _load(tmp_path, ''.join(json.dumps(e) + '\n' for e in events), 'stream.json')
    assert tr.mbps.tolist() == [7.0, 9.0] and tr.end_s == 1.0


@pytest.mark.parametrize('doc, what', [
    (_report([], error='unable to connect to server: Connection refused'),
     'iperf3 reported an error: unable to connect to server'),
    (_report([]), 'without intervals'),
    ({'hello': 1}, 'not an iperf3 -J report'),
    (_report([_interval(0, 1, 5.0), _interval(0.5, 1.5, 5.0)]),
     'run 1, interval 1: starts at 0.5 s, before the previous interval ends'),
    (_report([{'sum': {'start': 0, 'end': 1}}]), 'no start, end and bits_per_second'),
    (_report([_interval(0, 1, 10.0)], protocol='UDP'), 'report of a UDP client'),
])
def test_json_reports_that_are_not_a_link_record_are_refused(tmp_path, doc, what):
    path = tmp_path / 'bad.json'
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match=f'bad.json: .*{what}'):
        traces.load_trace(path)


def test_udp_measured_where_it_arrives_loads(tmp_path):
    doc = _report([_interval(0, 1, 8.0, sender=False)], protocol='UDP')
    assert _load(tmp_path, json.dumps(doc)).mbps.tolist() == [8.0]


IPERF3_TEXT = """Connecting to host 192.168.1.10, port 5201
[  5] local 192.168.1.23 port 50122 connected to 192.168.1.10 port 5201
[ ID] Interval           Transfer     Bitrate         Retr  Cwnd
[  5]   0.00-1.00   sec  5.62 MBytes  47.1 Mbits/sec    0    215 KBytes       (omitted)
[  5]   0.00-0.50   sec  2.50 MBytes  41.9 Mbits/sec    0    215 KBytes
[  5]   0.50-1.00   sec  3.75 MBytes  62.9 Mbits/sec    3    180 KBytes
[  5]   1.00-1.50   sec   512 KBytes  839 Kbits/sec    0    180 KBytes
[  5]   1.50-2.00   sec  0.00 Bytes  0.00 bits/sec    1   1.41 KBytes
- - - - - - - - - - - - - - - - - - - - - - - - -
[ ID] Interval           Transfer     Bitrate         Retr
[  5]   0.00-2.00   sec  6.76 MBytes  28.4 Mbits/sec    4             sender
[  5]   0.00-2.05   sec  6.50 MBytes  26.6 Mbits/sec                  receiver

iperf Done.
"""


def test_iperf3_text_keeps_the_intervals_and_drops_warm_up_and_summary(tmp_path):
    tr = _load(tmp_path, IPERF3_TEXT, 'link.txt')
    assert tr.t_s.tolist() == [0.0, 0.5, 1.0, 1.5]
    assert tr.mbps.tolist() == pytest.approx([41.9, 62.9, 0.839, 0.0])
    assert tr.end_s == 2.0


def test_iperf3_text_with_timestamps_reads_the_same(tmp_path):
    stamped = ''.join(f'Sun Nov 29 08:00:{k:02d} 2026 {line}\n'
                      for k, line in enumerate(IPERF3_TEXT.splitlines()))
    tr = _load(tmp_path, stamped, 'stamped.txt')
    assert tr.mbps.tolist() == pytest.approx([41.9, 62.9, 0.839, 0.0]) and tr.end_s == 2.0


def test_parallel_streams_use_the_sum_and_bidir_the_first_direction(tmp_path):
    text = ''.join(f'[  {s}]   {a:.2f}-{a + 1:.2f}   sec  1.00 MBytes  {r} Mbits/sec\n'
                   f'[  {s + 2}]   {a:.2f}-{a + 1:.2f}   sec  1.00 MBytes  {r} Mbits/sec\n'
                   f'[SUM]   {a:.2f}-{a + 1:.2f}   sec  2.00 MBytes  {2 * r} Mbits/sec\n'
                   for s, a, r in ((5, 0.0, 10.0), (5, 1.0, 15.0)))
    assert _load(tmp_path, text, 'p2.txt').mbps.tolist() == [20.0, 30.0]
    no_sum = '\n'.join(line for line in text.splitlines() if 'SUM' not in line)
    with pytest.raises(TraceFormatError, match=r'2 iperf streams \(5, 7\) and no \[SUM\]'):
        _load(tmp_path, no_sum, 'p2.txt')
    bidir = ('[  5][TX-C]   0.00-1.00   sec  5.00 MBytes  41.9 Mbits/sec    0    215 KBytes\n'
             '[  7][RX-C]   0.00-1.00   sec  1.00 MBytes  8.39 Mbits/sec\n'
             '[  5][TX-C]   1.00-2.00   sec  6.00 MBytes  50.3 Mbits/sec    0    215 KBytes\n'
             '[  7][RX-C]   1.00-2.00   sec  1.00 MBytes  8.39 Mbits/sec\n')
    assert _load(tmp_path, bidir, 'bidir.txt').mbps.tolist() == [41.9, 50.3]


IPERF2_TEXT = """------------------------------------------------------------
Client connecting to 10.0.0.1, TCP port 5001
------------------------------------------------------------
[  3] local 10.0.0.2 port 40000 connected with 10.0.0.1 port 5001
[ ID] Interval       Transfer     Bandwidth
[  3]  0.0- 1.0 sec  11.2 MBytes  94.1 Mbits/sec
[  3]  1.0- 2.0 sec  5.00 MBytes  41.9 Mbits/sec
[  3]  2.0- 3.0 sec   640 KBytes  5.24 Mbits/sec
[  3]  0.0- 3.0 sec  16.8 MBytes  47.0 Mbits/sec
"""


def test_iperf2_text_skips_the_whole_run_line_and_appended_runs_follow(tmp_path):
    tr = _load(tmp_path, IPERF2_TEXT, 'iperf2.txt')
    assert tr.t_s.tolist() == [0.0, 1.0, 2.0] and tr.mbps.tolist() == [94.1, 41.9, 5.24]
    assert tr.end_s == 3.0
    tr = _load(tmp_path, IPERF2_TEXT + IPERF2_TEXT.replace('94.1', '12.5'), 'iperf2.txt')
    assert tr.t_s.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and tr.end_s == 6.0
    assert tr.mbps.tolist() == [94.1, 41.9, 5.24, 12.5, 41.9, 5.24]
    in_bytes = IPERF2_TEXT.replace('94.1 Mbits/sec', '11.8 MBytes/sec')   # iperf -f M
    assert _load(tmp_path, in_bytes, 'iperf2.txt').mbps[0] == pytest.approx(94.4)


def test_iperf2_csv_output_is_read_in_bit_per_s(tmp_path):
    text = ('20261129080000,10.0.0.2,40000,10.0.0.1,5001,3,0.0-1.0,11796480,94371840\n'
            '20261129080001,10.0.0.2,40000,10.0.0.1,5001,3,1.0-2.0,5242880,41943040\n'
            '20261129080002,10.0.0.2,40000,10.0.0.1,5001,3,0.0-2.0,17039360,68157440\n')
    tr = _load(tmp_path, text, 'iperf2.csv')
    assert tr.mbps.tolist() == [94.37184, 41.94304] and tr.end_s == 2.0


def test_plain_traces_are_not_taken_for_iperf():
    assert not iperf.is_iperf(['t_seconds,mbps\n', '0,5\n', '0.5,6\n'])
    assert not iperf.is_iperf(['10.0  35.5\n'])
    assert iperf.is_iperf(['\n', '  {"start": {}}'])
    assert iperf.is_iperf(IPERF3_TEXT.splitlines(True))


def test_an_interrupted_json_report_keeps_its_intervals_with_one_warning(tmp_path, capsys):
    doc = _report([_interval(0, 1, 10.0), _interval(1, 2, 20.0)],
                  error='interrupt - the client has terminated')
    tr = _load(tmp_path, json.dumps(doc), 'cut.json')
    assert tr.mbps.tolist() == [10.0, 20.0] and tr.end_s == 2.0
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and err.startswith('warning: ')
    assert 'cut.json: iperf3 run 1 was interrupted (interrupt - the client has terminated)' in err
    assert 'using the 2 intervals it measured' in err
    events = [{'event': 'start', 'data': doc['start']},
              {'event': 'interval', 'data': _interval(0, 0.5, 7.0)},
              {'event': 'error', 'data': 'interrupt - the server has terminated'}]
    tr = _load(tmp_path, ''.join(json.dumps(e) + '\n' for e in events), 'cut-stream.json')
    assert tr.mbps.tolist() == [7.0] and 'was interrupted' in capsys.readouterr().err


@pytest.mark.parametrize('doc, what', [
    (_report([], error='interrupt - the client has terminated'),
     'iperf3 reported an error: interrupt'),
    (_report([_interval(0, 1, 10.0)], error='control socket has closed unexpectedly'),
     'iperf3 reported an error: control socket'),
])
def test_other_errors_and_interrupts_before_any_interval_are_refused(tmp_path, doc, what):
    path = tmp_path / 'bad.json'
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match=f'bad.json: {what}'):
        traces.load_trace(path)


def test_iperf3_error_lines_in_text_output_are_reported(tmp_path, capsys):
    path = tmp_path / 'err.txt'
    path.write_text('iperf3: error - unable to connect to server: Connection refused\n')
    with pytest.raises(TraceFormatError) as err:
        traces.load_trace(path)
    assert str(err.value).endswith('err.txt:1: iperf3 reported an error: unable to connect to '
                                   'server: Connection refused')
    cut = IPERF3_TEXT.split('- - -')[0] + 'iperf3: interrupt - the client has terminated\n'
    tr = _load(tmp_path, cut, 'cut.txt')
    assert tr.mbps.tolist() == pytest.approx([41.9, 62.9, 0.839, 0.0])
    assert 'cut.txt:9: iperf3 was interrupted' in capsys.readouterr().err


def test_a_report_faster_than_wifi_gets_iperf_advice(tmp_path):
    path = tmp_path / 'lo.json'
    path.write_text(json.dumps(_report([_interval(0, 1, 40_000.0)])))
    with pytest.raises(TraceFormatError) as err:
        traces.load_trace(path)
    assert 'iperf measured a faster path than Wi-Fi (the loopback interface' in str(err.value)
    assert 'second column' not in str(err.value)


@pytest.mark.parametrize('text, what', [
    ('{"intervals": [5]}', 'run 1, interval 0 is a number where iperf3 writes an object'),
    ('{"intervals": 5}', 'run 1: "intervals" is a number where iperf3 writes a list of objects'),
    ('{"intervals": [{"sum": [1, 2]}]}',
     'run 1, interval 0: "sum" is a list where iperf3 writes an object'),
    ('{"event": "interval", "data": [1]}',
     '"data" of event "interval" is a list where iperf3 writes an object'),
    ('{"intervals": [], "start": {"test_start": "TCP"}}',
     'run 1: "test_start" is a string where iperf3 writes an object'),
    ('{"error": "interrupt - the client has terminated", "intervals": [true]}',
     'run 1, interval 0 is a boolean where iperf3 writes an object'),
])
def test_json_of_the_wrong_shape_is_refused_in_one_line(tmp_path, text, what):
    """Refuse JSON whose parts have the wrong types, naming the part (was a traceback)."""
    with pytest.raises(TraceFormatError) as err:
        _load(tmp_path, text)
    message = str(err.value)
    assert message == f'{tmp_path}/link.json: {what}: not an iperf3 -J report'
