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
"""A robot's link read from a ROS 2 bag of its netmon's LinkStats (MCAP or SQLite)."""

import base64
import dataclasses
import os
import sqlite3
import time
import zlib

import numpy as np
import pytest
from rog_ros import file_identity
from rog_ros.net import ros_bag, traces
from rog_ros.net.traces import TraceFormatError
from rog_ros.protocol.messages import LinkStats, RowVersions, Time
from rog_ros.transport.convert import to_sample

TOPIC = '/rog/status/netmon_0/link_stats'
START_NS = 1_767_225_600 * 10 ** 9
# a bag of two robots (netmon_0, netmon_1; _fleet_bag's, ranks 0 and 1, no server) as written
# on 2026-12-06, zlib-compressed, base64: its recording id is in the files converted of it
FIXED_BAG = (
    'eNrtWHtUE1canwCKBFBErCA+roCSWAgkhocRlHdBXkIEESxxkkxgIJmBmQkRtFVRKwUfoFgVrajQCihFrYhUpdbH'
    '0qqlIq71zbpWbVFrfVZdWvdOXoitf+ye7n875yRz7/fd73e/951zP4wPD53ha8/lDEMMjxX8USQtsta/s2RwPHDS'
    'ACMTeXEvifrAGam5/JJ9tw42UDNc13iyckU0o7Q2ruU1+/w2t9X+nifSE8GzD3OQVg4+ovtpFm/MGAT5OoyDbIVL'
    'ZiAXVqXtXXfhqWrT5ZEVsZcOUGPGT6yyRoRuQTf2rU59rNa13In7du0iLGrrfssvkGbkIDLh2u+reibQn7aX37rx'
    'KL2tvGDesr2Z+2t23r94zsWvoSFN+SxTKt5zvunBPtkm94KKWOsh47eutXPfNXStnceIkI8SR276/nFDZ9da2SqP'
    'zG11pfwCXoC8qSiyaf7n08+WpZ78pOfbyslVh8JSRgz3GHLxUNux0drKcY3K1uwobveD+cErWjrmOXY1uswcub33'
    '48dPVu5fWLuguvx57eyrz0tpS3mJ5Ib45mdNxdGTqDMlki4xFhtxcfLyI0mjFiOIRYVV9aEwLb9yNr+nxrFmYrQ7'
    '+VNz9Q9+nStEBQd2Pbl8t7FeqHz4ItCqif9z85XU0vTEbd9veLJgjuwhN+Vk5j3yrfDsS1V7TtYtq+vZO3vX7VE/'
    'XD9OPfvoy0OXM2q+v9JZcDbyppbf/VR1ZGzmNq/P4lPW3zqxe9CXaNWIttGHA7hZHg9cEp8XXey+vmB5XEvXmsxt'
    'gXN5zxd4Jsyp3RuknNp62DFl/mkVKah9NDrx44oGSduNOqKr86ktuSP95FO3ES7Csh99dyb47S3Q5L7YXp5Jb4w6'
    'fXOfx6k7nx1P2Hbs8L4sRWs7J2upVWWrrzzsIXeZ/PIXRxrvl2p/rsshc9b/4nCqpXqLl3d1wDHX7gcrilzmP9Hc'
    'G9m9zsWy5eHOw71bdn6T9SJq5aGea2UUvocnjbi7YWT4xlW3XZZV1z/YxNl82bmRfHhQ9U2qJEDSPV944tYW/L3k'
    'U/62obFt/NLRVMVpCy/O4oRbUZ54jtt67/Qcu4/FNQvOlduAoLeYEB5wdbAUp/eWd7qFcFx9i84t4iw6uoJrPdHL'
    'YfeSDwaPEodsdv/Frb1sVNJS29tXkNs8m1TfEtepo2w55/YvuDAtuB4/e+rSnXUjo3KKzj/NwLVNeFtyNeWw+NGR'
    'YduGLe7aOESyZaCDZIjEtWPay/rvOnjXM84HvtycUyl8vH3O7/Xl306rSU9/Jt20MCEut71zUkfSxPhWpV8k+tUn'
    'Ha2WHUk830ObaeTS2aVpVed7djYOTTofeNspkDsgEpF0B+34qvm9hCUL/RfF8Wwqf0wZNh7crX3kOGZRa904/pKv'
    'T5eUlERX1Z7h5FlUbGxosHZE/MbFFJ92KC4JifYQfRUndhMtFq35VKjYIVGovqO3El6Uww95X9ef3BBY1jXdMWP/'
    'mo73c0f/NkbwNnoiwdMBj/kpavY4cezJZcPxmOa/7XCybUd2+PwmTxRdm7d2uWLsW9xl+1cnqE+Iiarhbseub7Z5'
    'ZzdnlYV3zLA5Jf96P7Q33/lq0OpQxyWp9ueC4yIe3Jhztfh+D5hQPOfq1fRMu6oRjt+tyJ4unjL77K8Jw5eG927x'
    'qLJSOlsU5+ie5UfsfpoWfv9S++d7Oj5aM7r9+C0yKfjtRFHtC2ZxRmmrs52l8J2VrtwpE+0Ddh0VzogltSnRHU1W'
    'I2KwyMwNqqiotK7WohLUJeTaXN7p5PqW6osDksb/Y+aG9UeRpLSDna5ds6cHeSaM7f7nHuTggfm37TxpxzODRxUK'
    'Gs7/uCk/rq337x+WHvWTJha9K645k+J+48DSI7UTkprDqsfmWxLLW1ZnXp0XvHtqb8Uq53UVrdw7L5d6ruywcDjT'
    '2NWbVcfXRNzVdTiPH95VsufXK5+/V+zvJLWx2V51YfxYJ5tZJ9BzZR4/H7e0jjJ2Tg4S8koHXT7ISL5+/xE7H2Nj'
    'nB+9+ZydN5vmxk4bxzVMzXAW/eDetesP99iuP1yZfX84N2PjHmKF9D2WVtYmVYf3NX8fDZ3lE4cTuVIGZWhr4+kA'
    'iZcGIog7IDBGQxLAeypA1WoJ0GWjDCAJDFCknGQ8aZavI6lcgBMMRqlQBQZwGihJnMgCvDytXI3T2ZgSQCGhL4gu'
    '4gu47iAepyiSooFRAUEeRTKkglQLNBhNo1kYLTCrA1Q4plYCFUkZRgIulJ+FUxhQo4WklgEFGEXjUD/em8Gk4dGR'
    '8aGy1MhkaUxiAn8KRKJoBtAkwOG/lirACzCoMoWrGAFXC+0Q+gNakY1pUJkRHe6ZQCoxwGMtxShAoUSuF4A6eQv1'
    'qjHZGKAxCq7mQweRNPaKN5hs6A+cFnAhyV8MCIjDwv3BawSqwbwAJsgSAJ0aJXwB74/eEJiXTwFzzeO5rMdRAsRE'
    'xEHkXKwQIkOPE/AHNKiCgnYS0GeEktTRIBtDldAoL9Z8Vm0d60t2b6DEVSrIgRGiGYoNn3kDGcuH0DOM4aRg2HUw'
    'G4BCTSpyocUYocdSkFpWBDIxCErBnQAvOVEKRIDBNRgElmtxNYMTMjMy7TMTcgDNoJo8uEFMn9egi2kNjI+8kDED'
    'm3zIzJOxZLqfBIUpMBjIPxWg+gRmmoAplGHDBOLlOONDAw2GwlSAmaqiSE1/a0gYVz1FjcK0ycMonIR5qFKTqFEZ'
    'jTyPhU42avBXIVNm5Fm4dxQO1DANAMR8DZ+H62BOw0zUx0FL5BKkjuhDMQr0h0qWSmNYCGWYZgrwfYMkjWcRqFqm'
    'lGtY4/pvqlea1QfTaNUoA2sAI2AlwIjCDNf1qUOQjHEJ9oplJopJqRhCgVIEyrCFTKqM5UQo2SRk6wWmG6UlJGzZ'
    'KaEL/cXeUAkvWMbzMKW5/tS4CjMJwx4ANaEFIJTLNjAdKEDVWoyNBGFQnUWFGQPzjoJqeOmLhaUbk4gCeg6sW/iD'
    'Q2i6YRvYxvSiqAoKZxu6BbQH79OfLROM8mbVhzDGEjZF3KwsheXB/gWLjy1KwPMFwdD9qBayCAZXsK7hm8FZsozG'
    '8iFydHxouLc0OlTk5w94hi4Ge5U+tfls4UN3yAv1G6jUGMawJMAzbWns15DG9+rLPH1XZWOAG2oYtg7IYf2BEQpS'
    'HwIlqaB9aEyhpXCmUKBRgix9w+SxsdV3NxWuZmOkF4WpiGnymEJoEQGPCYMVgRnvGsxg0Cxu8F/8cOOl70jAG1oL'
    '2wAmiWA2KfSKwCGBEiQ7tcrnmA5DDjIWvn3gCeLDBltL+xgOPZmvD5vjMpZIW8IlCiU1DUo5wSHJNkuYwfkkLYPp'
    'xrqAdoc8bwA9AuuhUAKEXACUWB6TDYe+cExhahyV42roRQkQsUwt1X8OOybcEJPAMWB1hmShOEAcOMlfHKCnEXqi'
    'WDRZPNk/QDTZDxLZvKfzUOI/FCrA2J1oWqaG7QmTsaqw6ftfohiMRQtIXMkewvoDAyoFjw4FSRSwSU0ScJEKVdNY'
    'n+ct3ux54f89/z/wvG2Y8UtwkPmb1eKV70POn9wAOOnpVuaPUtNoUBry51cGHkZqkPGawAAwd4AJoMk42vLKdcSr'
    '1wqmK4fBQ01frbYDDQN769c4Vs7Gr97HFq9xbO0cDINY5DXOoFlGDvo6h3vAAen3mDn2r3MsnEz7GFUzLRAd3zD0'
    'Q+OFy78BYI/tlw==')
FIXED_BAG_ID = '9b4f526dbe1ed2a1'


def _messages(node, rates, incarnation=7):
    """Return LinkStats of ``node`` 0.1 s apart with tx ``rates`` (rx half of it)."""
    out = []
    for k, rate in enumerate(rates):
        ns = START_NS + k * 10 ** 8
        out.append(LinkStats(node=node, interface='wlan0', stamp=Time(ns // 10 ** 9, ns % 10 ** 9),
                             tx_mbps=rate, rx_mbps=rate / 2, incarnation=incarnation))
    return out


def _mcap(path, messages, topic=TOPIC):
    """Record ``messages`` on ``topic`` into the MCAP file ``path`` as rog fleet --record does."""
    bag = pytest.importorskip('rog_ros.transport.bag')
    pytest.importorskip('mcap.writer')
    recorder = bag.McapRecorder(str(path))
    for msg in messages:
        recorder.write(topic, msg, stamp_ns=msg.stamp.sec * 10 ** 9 + msg.stamp.nanosec)
    recorder.close()
    return path


def _db3(path, messages, type_name='rog_ros/msg/LinkStats'):
    """Write ``messages`` into a rosbag2 SQLite file ``path`` (the tables ros2 bag writes)."""
    con = sqlite3.connect(str(path))
    con.execute('CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT '
                'NULL, serialization_format TEXT NOT NULL, offered_qos_profiles TEXT NOT NULL)')
    con.execute('CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL, '
                'timestamp INTEGER NOT NULL, data BLOB NOT NULL)')
    con.execute('INSERT INTO topics VALUES (1, ?, ?, ?, ?)', (TOPIC, type_name, 'cdr', ''))
    for k, msg in enumerate(messages):
        con.execute('INSERT INTO messages(topic_id, timestamp, data) VALUES (1, ?, ?)',
                    (START_NS + k, bytes(to_sample(msg).serialize())))
    con.commit()
    con.close()
    return path


def _refusal(path, **kw) -> str:
    """Return the one-line message with which ``load_trace`` refuses ``path``."""
    with pytest.raises(TraceFormatError) as err:
        traces.load_trace(path, **kw)
    message = str(err.value)
    assert '\n' not in message
    return message


def test_the_cdr_of_a_linkstats_reads_field_by_field():
    msg = _messages(3, [0.0, 12.5])[1]
    node, stamp_ns, rate, incarnation = ros_bag.link_stats(bytes(to_sample(msg).serialize()))
    assert (node, stamp_ns, rate, incarnation) == (3, START_NS + 10 ** 8, 12.5, 7)


@pytest.mark.parametrize('write', [_mcap, _db3], ids=['mcap', 'db3'])
def test_a_bag_of_one_robots_linkstats_reads_as_its_throughput(tmp_path, write):
    # refused before (the MCAP as not a text file, the .db3 with its header as a table)
    path = write(tmp_path / 'run.bag', _messages(0, [0.0, 10, 20, 30, 40]))
    trace = traces.load_trace(path)
    # netmon's first message measured nothing and is left out; rates are max(tx, rx)
    assert trace.mbps.tolist() == [10.0, 20.0, 30.0, 40.0]
    assert trace.t_s.tolist() == pytest.approx([0.0, 0.1, 0.2, 0.3], abs=1e-12)
    assert trace.mean_mbps == pytest.approx(25.0)
    assert trace.duration_s == pytest.approx(0.4)
    assert traces.trace_file_format(path) in ('MCAP bag', 'SQLite bag')


def test_a_bag_of_several_robots_is_refused_unless_told_which(tmp_path):
    path = _mcap(tmp_path / 'fleet.mcap', _messages(0, [0.0, 10, 20]) + _messages(1, [0, 5, 5]))
    message = _refusal(path)
    assert message.startswith(f'{path}: a ROS 2 bag with the links of 2 robots '
                              '(netmon_0:0 (rank 0), netmon_0:1 (rank 1))')
    assert f'pick one robot with --trace {path}#NAME' in message
    assert traces.load_trace(path, node=1).mbps.tolist() == [5.0, 5.0]
    assert traces.load_trace(path, node='netmon_0:1').mbps.tolist() == [5.0, 5.0]
    assert message_end(_refusal(path, node=2)) == ('no robot 2 in the bag; its robots: '
                                                   'netmon_0:0 (rank 0), netmon_0:1 (rank 1)')


def message_end(message: str) -> str:
    """Return a refusal without the path it starts with."""
    return message.split(': ', 1)[1]


def test_a_bag_without_linkstats_or_of_another_version_is_refused_saying_why(tmp_path):
    path = _db3(tmp_path / 'status.db3', _messages(0, [1, 2, 3]), 'rog_ros/msg/TrainStatus')
    assert f'without a LinkStats (its topics: {TOPIC})' in _refusal(path)
    old = _messages(0, [1, 2, 3])
    for msg in old:
        msg.schema_version = 1
    path = _db3(tmp_path / 'old.db3', old)
    assert 'do not read (schema_version 1, not ' in _refusal(path)


def test_a_ros2_bag_folder_is_refused_naming_its_file(tmp_path):
    folder = tmp_path / 'run'
    folder.mkdir()
    (folder / 'metadata.yaml').write_text('rosbag2_bagfile_information:\n')
    _db3(folder / 'run_0.db3', _messages(0, [0.0, 10, 20]))
    message = _refusal(folder)
    assert message == f'{folder} is the folder of a ROS 2 bag; give its file, {folder}/run_0.db3'


def test_the_folder_of_a_killed_recorder_is_refused_naming_its_file(tmp_path):
    # ros2 bag record (Humble) writes metadata.yaml when it stops: a recorder killed left a
    # folder without it, refused as "a directory, not a trace file"
    folder = tmp_path / 'run'
    folder.mkdir()
    _mcap(folder / 'run_0.mcap', _messages(0, [0.0, 10, 20]))
    (folder / 'notes.mcap').write_text('not a bag\n')
    message = _refusal(folder)
    assert message == f'{folder} is the folder of a ROS 2 bag; give its file, {folder}/run_0.mcap'
    (folder / 'run_0.mcap').unlink()
    assert _refusal(folder) == f'{folder} is a directory, not a trace file'


def test_a_db3_bag_is_read_for_its_linkstats_only(tmp_path):
    # every message of every topic was fetched into memory: the row chunks of a fleet's
    # ros2 bag record -a too
    path = _db3(tmp_path / 'all.db3', _messages(0, [0.0, 10, 20]))
    con = sqlite3.connect(str(path))
    con.execute('INSERT INTO topics VALUES (2, ?, ?, ?, ?)',
                ('/rog/up/chunks', 'rog_ros/msg/RowChunk', 'cdr', ''))
    con.executemany('INSERT INTO messages(topic_id, timestamp, data) VALUES (2, ?, ?)',
                    [(START_NS + k, bytes(1000)) for k in range(50)])
    con.commit()
    con.close()
    topics = set()
    read = list(ros_bag._sqlite_messages(path, topics))
    assert [(topic, type_name) for topic, type_name, _ in read] == [
        (TOPIC, 'rog_ros/msg/LinkStats')] * 3
    assert topics == {TOPIC, '/rog/up/chunks'}
    assert traces.load_trace(path).mbps.tolist() == [10.0, 20.0]


def test_rog_trace_convert_writes_one_robot_of_a_fleet_bag(tmp_path, capsys):
    from rog_ros.net import cli_trace
    path = _mcap(tmp_path / 'fleet.mcap', _messages(0, [0.0, 10, 20]) + _messages(1, [0, 5, 5]))
    out = tmp_path / 'link1.csv'
    assert cli_trace.main(['convert', str(path), '--node', '1', '--out', str(out)]) == 0
    assert 'read as MCAP bag, robot 1' in capsys.readouterr().out
    assert traces.load_trace(out).mbps.tolist() == [5.0, 5.0]
    csv = tmp_path / 'link.csv'
    csv.write_text('0,1\n1,2\n')
    assert cli_trace.main(['convert', str(csv), '--node', '1', '--out', str(out)]) == 2
    assert 'not a ROS 2 bag' in capsys.readouterr().err


def test_a_text_record_ending_in_nul_bytes_after_a_power_cut_reads(tmp_path, capsys):
    # ext4 after a power cut: the file's length was kept, its last block never written
    path = tmp_path / 'link.csv'
    path.write_bytes(b'time_s,mbps\n0,10\n0.5,20\n1,30\n1.5,40\n2,' + b'\0' * 4096)
    trace = traces.load_trace(path)
    assert trace.mean_mbps == pytest.approx(25.0) and trace.duration_s == pytest.approx(2.0)
    err = capsys.readouterr().err
    assert f'{path}: ends in 4096 NUL bytes' in err and 'is cut short' in err
    path.write_bytes(b'time_s,mbps\n0,10\n\0\0\n0.5,20\n')
    assert _refusal(path).startswith(f'{path}: not a text file (a NUL byte at line 3)')


def test_a_bag_in_a_compression_this_machine_cannot_read_says_what_to_install(
        tmp_path, monkeypatch):
    # it was reported as a bag that ends early, and then as one without a LinkStats
    reader = pytest.importorskip('mcap.reader')
    from mcap.exceptions import UnsupportedCompressionError
    path = _mcap(tmp_path / 'run.mcap', _messages(0, [0.0, 10, 20]))

    def unsupported(self, *args, **kwargs):
        """Fail as the mcap reader does on lz4 chunks without the lz4 package."""
        raise UnsupportedCompressionError('lz4')
        yield

    monkeypatch.setattr(reader.NonSeekingReader, 'iter_messages', unsupported)
    message = _refusal(path)
    assert message.startswith(f'{path}: unsupported compression type lz4; install the package')


def _chunk_spans(data: bytes) -> list:
    """Return ``(start, end)`` of each Chunk record's compressed records in MCAP ``data``."""
    spans, pos = [], len(ros_bag.MCAP_MAGIC)
    while pos + 9 <= len(data):
        opcode, length = data[pos], int.from_bytes(data[pos + 1:pos + 9], 'little')
        if opcode == 0x06:                    # Chunk: times, sizes, crc, compression, records
            at = pos + 9 + 8 + 8 + 8 + 4
            at += 4 + int.from_bytes(data[at:at + 4], 'little') + 8
            spans.append((at, pos + 9 + length))
        pos += 9 + length
    return spans


def test_a_bag_cut_short_or_damaged_reads_its_chunks_before_that(tmp_path, capsys):
    # a bag cut anywhere was read as holding no message (the reader sorted it all first), and
    # a damaged zstd chunk raised zstandard.ZstdError, a traceback
    whole = _mcap(tmp_path / 'whole.mcap', _messages(0, [float(k % 50) for k in range(20000)]))
    data = whole.read_bytes()
    spans = _chunk_spans(data)
    assert len(spans) > 4
    cut = _write_bytes(tmp_path / 'cut.mcap', data[:spans[3][0] + 20])      # in the 4th
    damaged = bytearray(data)
    start, end = spans[3]
    damaged[start:end] = bytes(end - start)
    damaged = _write_bytes(tmp_path / 'damaged.mcap', bytes(damaged))
    rates = traces.load_trace(whole).mbps.tolist()
    for path in (cut, damaged):
        trace = traces.load_trace(path)          # the messages of the first three chunks
        assert len(rates) * 2 // len(spans) < trace.mbps.size < len(rates) * 4 // len(spans)
        assert trace.mbps.tolist() == rates[:trace.mbps.size]
        assert f'{path}: the bag ends early or is damaged there' in capsys.readouterr().err


def _write_bytes(path, data: bytes):
    """Write ``data`` to ``path`` and return it."""
    path.write_bytes(data)
    return path


@pytest.mark.parametrize('write', [_mcap, _db3], ids=['mcap', 'db3'])
def test_a_bag_given_as_bytes_is_read_from_them_not_from_its_file(tmp_path, write):
    # the simulator's cache hashes a file's bytes and parses the same bytes
    path = write(tmp_path / 'run.bag', _messages(0, [0.0, 10, 20]))
    data = path.read_bytes()
    write(tmp_path / 'other.bag', _messages(0, [0.0, 3, 3, 3])).replace(path)
    assert traces.load_trace(path, data=data).mbps.tolist() == [10.0, 20.0]
    assert traces.load_trace(path).mbps.tolist() == [3.0, 3.0, 3.0]


def _run(node, rates, start_s, incarnation):
    """Return ``_messages`` of one netmon run that starts ``start_s`` after ``START_NS``."""
    out = _messages(node, rates, incarnation)
    for msg in out:
        ns = msg.stamp.sec * 10 ** 9 + msg.stamp.nanosec + int(start_s * 1e9)
        msg.stamp = Time(ns // 10 ** 9, ns % 10 ** 9)
    return out


@pytest.mark.parametrize('write', [_mcap, _db3], ids=['mcap', 'db3'])
def test_a_bag_of_two_netmon_runs_warns_of_the_gap_between_them_as_tables_do(
        tmp_path, capsys, write):
    # the rate of the first run's end was held across the minute between the runs, silently
    runs = _run(0, [0.0, 10, 20, 30, 40], 0.0, 7) + _run(0, [0.0, 5, 5, 5], 60.0, 8)
    path = write(tmp_path / 'two_runs.bag', runs)
    trace = traces.load_trace(path)
    assert trace.mbps.tolist() == [10.0, 20.0, 30.0, 40.0, 5.0, 5.0, 5.0]
    err = ' '.join(capsys.readouterr().err.split())
    assert err.count('warning:') == 1
    assert f'{path}: no sample for 59.7 s after t=0.3 s' in err
    assert 'the rate before it, 40 Mbit/s, is held through it' in err
    assert 'rog trace convert' in err
    traces.load_trace(write(tmp_path / 'one_run.bag', _run(0, [0.0, 10, 20, 30, 40], 0.0, 7)))
    assert capsys.readouterr().err == ''


@pytest.mark.parametrize('write', [_mcap, _db3], ids=['mcap', 'db3'])
def test_rog_trace_convert_writes_each_robot_of_a_fleet_bag_and_the_trace_list(
        tmp_path, capsys, write):
    # a bag of a fleet was refused, and the user ran rog trace convert --node K per robot
    from rog_ros.net import cli_trace, trace_spec
    from rog_ros.sim.simulator import make_traces
    path = write(tmp_path / 'fleet.bag', _messages(0, [0.0, 10, 20]) + _messages(2, [0, 5, 5])
                 + _messages(1, [0, 7, 8, 9]))
    folder = tmp_path / 'links'
    assert cli_trace.main(['convert', str(path), '--out', f'{folder}/']) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [str(folder / f'fleet_node{k}.csv') for k in (0, 1, 2)]
    assert lines[1].startswith(f'wrote {names[1]}: {path} read as ')
    assert ', robot netmon_0:1 (rank 1), 3 segments' in lines[1]
    assert lines[-1] == f'--trace {",".join(names)}'
    spec = lines[-1].split(' ', 1)[1]
    assert trace_spec.sources(spec) == names
    rates = [trace.mbps.tolist() for trace, _ in make_traces(spec, 3, 0)]
    assert rates == [[10.0, 20.0], [7.0, 8.0, 9.0], [5.0, 5.0]]
    assert cli_trace.main(['convert', str(path), '--out', str(folder), '--scale', '2']) == 0
    assert traces.load_trace(names[2]).mbps.tolist() == [10.0, 10.0]


def test_rog_trace_convert_into_a_folder_refuses_what_it_cannot_write(tmp_path, capsys):
    from rog_ros.net import cli_trace
    few = _mcap(tmp_path / 'few.mcap', _messages(0, [0.0, 10, 20]) + _messages(1, [0, 5]))
    assert cli_trace.main(['convert', str(few), '--out', f'{tmp_path}/links/']) == 2
    err = capsys.readouterr().err
    assert err == (f'rog trace: {few}: robot netmon_0:1 has 1 LinkStats with a measured rate; '
                   'a trace '
                   'needs two or more (netmon publishes ten a second)\n')
    assert not (tmp_path / 'links').exists()
    path = _mcap(tmp_path / 'fleet.mcap', _messages(0, [0.0, 10, 20]) + _messages(1, [0, 5, 5]))
    assert cli_trace.main(['convert', str(path), '--out', f'{tmp_path}/a,b/']) == 2
    assert 'cannot be in a --trace list' in capsys.readouterr().err
    csv = tmp_path / 'link.csv'
    csv.write_text('0,1\n1,2\n')
    assert cli_trace.main(['convert', str(csv), '--out', str(tmp_path)]) == 2
    assert 'is a directory; name a file in it' in capsys.readouterr().err


@pytest.mark.parametrize('write', [_mcap, _db3], ids=['mcap', 'db3'])
def test_a_robot_clock_stepped_back_mid_recording_loses_no_sample(tmp_path, write):
    # NTP stepped the robot's clock back an hour: every LinkStats of the next hour was left
    # out as a repeat (its stamp did not increase), so the trace lost that hour of samples
    messages = _messages(0, [0.0, 10, 20, 30, 40, 50])
    for msg in messages[3:]:
        msg.stamp = Time(msg.stamp.sec - 3600, msg.stamp.nanosec)
    messages.insert(4, dataclasses.replace(messages[3]))      # one recorded twice
    path = write(tmp_path / 'run.bag', messages)
    # Execute
    trace = traces.load_trace(path)
    # Assert: the samples go on one period after the last; the repeat is still left out
    assert trace.mbps.tolist() == [10.0, 20.0, 30.0, 40.0, 50.0]
    assert trace.t_s.tolist() == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4], abs=1e-9)


def test_the_gap_advice_for_one_robot_of_a_fleet_bag_names_that_robot(tmp_path, capsys):
    # the advice, "rog trace convert BAG --out link.csv", is refused for a bag of several
    # robots (which one?): it must name the robot whose link has the gap
    from rog_ros.net import cli_trace
    path = _mcap(tmp_path / 'fleet.mcap', _messages(0, [0.0, 10, 20, 30]) +
                 _run(1, [0.0, 10, 20, 30, 40], 0.0, 7) + _run(1, [0.0, 5, 5, 5], 60.0, 8))
    assert cli_trace.main(['convert', str(path), '--out', f'{tmp_path}/links/']) == 0
    err = ' '.join(capsys.readouterr().err.split())
    assert err.count('no sample for') == 1 and f'{path} (robot netmon_0:1): no sample for' in err
    assert 'rog trace convert BAG#netmon_0:1 --out link.csv' in err, err
    assert err.count('warning:') == 2 and f'{path}#netmon_0:0: its samples end 60 s before' in err
    out = tmp_path / 'link1.csv'
    assert cli_trace.main(['convert', str(path), '--node', '1', '--out', str(out)]) == 0
    err = ' '.join(capsys.readouterr().err.split())        # (the advice followed)
    assert f'{path}: no sample for' in err and 'BAG#1 --out link.csv' in err, err


def test_a_fleet_bag_with_a_comma_in_its_name_gives_a_trace_list_that_reads(tmp_path, capsys):
    # the files were named after the bag, comma and all, so the --trace list printed split
    # each robot's file in two
    import os
    from rog_ros.net import cli_trace, trace_spec
    path = _mcap(tmp_path / 'day 1,lab.mcap', _messages(0, [0.0, 10, 20]) +
                 _messages(1, [0, 5, 5]))
    assert cli_trace.main(['convert', str(path), '--out', f'{tmp_path}/links/']) == 0
    spec = capsys.readouterr().out.splitlines()[-1].split(' ', 1)[1]
    entries = trace_spec.sources(spec)
    assert len(entries) == 2 and all(map(os.path.isfile, entries)), entries


def _robots_bag(path, robots: dict, db3: bool = False):
    """Write a bag of several robots' netmons: ``{netmon name: messages}``, one topic each."""
    if db3:
        con = sqlite3.connect(str(path))
        con.execute('CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT '
                    'NOT NULL, serialization_format TEXT NOT NULL, offered_qos_profiles TEXT '
                    'NOT NULL)')
        con.execute('CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL, '
                    'timestamp INTEGER NOT NULL, data BLOB NOT NULL)')
        for k, (name, messages) in enumerate(robots.items()):
            con.execute('INSERT INTO topics VALUES (?, ?, ?, ?, ?)',
                        (k + 1, f'/rog/status/{name}/link_stats', 'rog_ros/msg/LinkStats',
                         'cdr', ''))
            for j, msg in enumerate(messages):
                con.execute('INSERT INTO messages(topic_id, timestamp, data) VALUES (?, ?, ?)',
                            (k + 1, START_NS + j, bytes(to_sample(msg).serialize())))
        con.commit()
        con.close()
        return path
    bag = pytest.importorskip('rog_ros.transport.bag')
    pytest.importorskip('mcap.writer')
    recorder = bag.McapRecorder(str(path))
    for name, messages in robots.items():
        for msg in messages:
            recorder.write(f'/rog/status/{name}/link_stats', msg,
                           stamp_ns=msg.stamp.sec * 10 ** 9 + msg.stamp.nanosec)
    recorder.close()
    return path


def _emulated(messages, rates):
    """Return ``messages`` with ``emulated_mbps`` set to ``rates``."""
    return [dataclasses.replace(m, emulated_mbps=r) for m, r in zip(messages, rates)]


def _fleet_bag(path, db3=False, ranks=(0, 1, 2), server=True):
    """Write a bag of worker robots ``ranks`` (netmon_K, rate 10 (K + 1)) and the server's."""
    robots = {f'netmon_{k}': _emulated(_messages(k, [0.0] + [10.0 * (k + 1)] * 3),
                                       [-1.0] + [k + 0.5] * 3) for k in ranks}
    if server:
        robots['netmon'] = _messages(-1, [0.0, 99, 99, 99])
    return _robots_bag(path, robots, db3)


@pytest.mark.parametrize('db3', [False, True], ids=['mcap', 'db3'])
def test_a_bag_of_several_robots_gives_robot_r_rank_r_in_every_consumer(tmp_path, capsys, db3):
    # --trace BAG was refused by rog sim / compare / fleet (convert it first, and its list gave
    # robot r the r-th node of the bag); now every consumer resolves it alike: robot r follows
    # the bag's robot of rank r, and says so once
    from rog_ros import checks
    from rog_ros.net import cli_trace, trace_spec
    from rog_ros.nodes.emulated_link import link_for
    from rog_ros.sim.simulator import make_traces, trace_offsets
    path = str(_fleet_bag(tmp_path / ('fleet.db3' if db3 else 'fleet.mcap'), db3))
    assert ros_bag.robots(path) == [('netmon', -1), ('netmon_0', 0), ('netmon_1', 1),
                                    ('netmon_2', 2)]
    want = [[10.0] * 3, [20.0] * 3, [30.0] * 3, [10.0] * 3]        # 4 robots: rank r mod 3
    sim = [trace.mbps.tolist() for trace, _ in make_traces(path, 4, 0)]
    nodes = [link_for(path, r, 4).trace.mbps.tolist() for r in range(4)]
    assert sim == want and nodes == want
    assert len(trace_offsets(path, 4, 0)) == 4
    assert [trace_spec.entry_for(path, r) for r in range(2)] == [f'{path}#netmon_0',
                                                                 f'{path}#netmon_1']
    assert checks.trace('--trace', path) == path
    err = ' '.join(capsys.readouterr().err.split())
    assert err.count('note:') == 1, err
    assert ('robot r follows the bag robot of rank r mod 3 (netmon_0, netmon_1, netmon_2); '
            "netmon (rank -1, the server's) is no worker's link") in err
    assert cli_trace.main(['stats', path]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f'trace {path}: a ROS 2 bag of 4 robots\n  netmon: {path}#netmon\n')
    assert '     netmon    netmon_0    netmon_1    netmon_2\n' in out


@pytest.mark.parametrize('db3', [False, True], ids=['mcap', 'db3'])
def test_one_robot_of_a_bag_is_picked_by_name_the_same_everywhere(tmp_path, capsys, db3):
    from rog_ros import checks
    from rog_ros.net import cli_trace
    from rog_ros.nodes.emulated_link import link_for
    from rog_ros.sim.simulator import make_traces
    path = str(_fleet_bag(tmp_path / ('fleet.db3' if db3 else 'fleet.mcap'), db3))
    one = f'{path}#netmon_1'
    assert [t.mbps.tolist() for t, _ in make_traces(one, 2, 0)] == [[20.0] * 3] * 2
    assert link_for(one, 0, 2).trace.mbps.tolist() == [20.0] * 3
    assert link_for(f'{path}#1', 0, 2).trace.mbps.tolist() == [20.0] * 3      # by its rank
    assert checks.trace('--trace', f'{path}#netmon,{one}') == f'{path}#netmon,{one}'
    assert cli_trace.main(['stats', one, '--json']) == 0
    assert '"mean": 20.0' in capsys.readouterr().out
    want = (f'{path}: no robot netmon_7 in the bag; its robots: netmon (rank -1), netmon_0 '
            '(rank 0), netmon_1 (rank 1), netmon_2 (rank 2)')
    for consumer in (lambda s: make_traces(s, 2, 0), lambda s: link_for(s, 0, 2),
                     lambda s: checks.trace('--trace', s)):
        with pytest.raises(ValueError) as err:
            consumer(f'{path}#netmon_7')
        assert str(err.value).endswith(want), err.value
    assert cli_trace.main(['plot', f'{path}#netmon_7', '--out', str(tmp_path / 'p.png')]) == 2
    assert capsys.readouterr().err == f'rog trace: {want}\n'


def test_a_bag_that_misses_a_rank_is_refused_not_shifted(tmp_path, capsys):
    # robots 0 and 2 recorded, robot 1's netmon was off: robot 1 took robot 2's link (and
    # robot 2 robot 0's) without a word
    from rog_ros import checks
    from rog_ros.net import cli_trace
    from rog_ros.nodes.emulated_link import link_for
    from rog_ros.sim.simulator import make_traces
    path = str(_fleet_bag(tmp_path / 'fleet.mcap', ranks=(0, 2), server=False))
    want = (f'{path}: no link of rank 1 in the bag (netmon_0 (rank 0), netmon_2 (rank 2)), so '
            'robot 1 has none and robot r cannot follow rank r; give each robot its own with a '
            f'--trace list, {path}#netmon_0,{path}#netmon_2,...')
    for consumer in (lambda s: make_traces(s, 3, 0), lambda s: link_for(s, 0, 3),
                     lambda s: checks.trace('--trace', s)):
        with pytest.raises(ValueError) as err:
            consumer(path)
        assert str(err.value).endswith(want), err.value
    spec = f'{path}#netmon_0,{path}#netmon_2'
    assert [t.mbps.tolist() for t, _ in make_traces(spec, 2, 0)] == [[10.0] * 3, [30.0] * 3]
    assert cli_trace.main(['convert', path, '--out', f'{tmp_path}/links/']) == 0
    out, err = capsys.readouterr()
    assert not any(line.startswith('--trace') for line in out.splitlines()), out
    assert 'no link of rank 1 in the bag' in err and 'no --trace list printed' in err


def test_robots_without_ranks_follow_in_name_order_and_say_so(tmp_path, capsys):
    # netmons started alone on each robot (rank -1), named by hand
    from rog_ros.sim.simulator import make_traces
    path = str(_robots_bag(tmp_path / 'alone.mcap', {
        'netmon_b10': _messages(-1, [0.0, 3, 3]), 'netmon_b2': _messages(-1, [0.0, 2, 2]),
        'netmon_a': _messages(-1, [0.0, 1, 1])}))
    rates = [t.mbps.tolist() for t, _ in make_traces(path, 4, 0)]
    assert rates == [[1.0] * 2, [2.0] * 2, [3.0] * 2, [1.0] * 2]
    err = ' '.join(capsys.readouterr().err.split())
    assert ('robot r follows the r-th by name, mod 3: netmon_a, netmon_b2, netmon_b10') in err


@pytest.mark.parametrize('db3', [False, True], ids=['mcap', 'db3'])
def test_a_bags_emulated_rate_is_a_trace_source_on_request(tmp_path, capsys, db3):
    # a bag of an emulated fleet held the rate each link was given, but only the measured
    # rate (this machine's loopback interface) could be read
    from rog_ros import checks
    from rog_ros.net import cli_trace
    from rog_ros.nodes.emulated_link import link_for
    from rog_ros.sim.simulator import make_traces
    path = str(_fleet_bag(tmp_path / ('fleet.db3' if db3 else 'fleet.mcap'), db3))
    emulated = f'{path}#emulated'
    assert [t.mbps.tolist() for t, _ in make_traces(emulated, 3, 0)] == [
        [0.5] * 3, [1.5] * 3, [2.5] * 3]
    assert link_for(f'{path}#netmon_2#emulated', 0, 3).trace.mbps.tolist() == [2.5] * 3
    assert traces.load_trace(path, node='netmon_1', field='emulated').mbps.tolist() == [1.5] * 3
    assert checks.trace('--trace', emulated) == emulated
    out = tmp_path / 'one.csv'
    assert cli_trace.main(['convert', f'{path}#netmon_0#emulated', '--out', str(out)]) == 0
    assert 'robot netmon_0, emulated_mbps' in capsys.readouterr().out
    assert traces.load_trace(str(out)).mbps.tolist() == [0.5] * 3
    with pytest.raises(ValueError) as err:       # the server's netmon emulates no link
        make_traces(f'{path}#netmon#emulated', 1, 0)
    assert str(err.value) == (f'{path}: robot netmon has no emulated_mbps in its LinkStats '
                              '(every one -1: its link was not emulated: netmon reports the '
                              'rate that --trace enforces on a worker rank); drop "#emulated" '
                              'to read the measured rate')
    csv = tmp_path / 'link.csv'
    csv.write_text('0,1\n1,2\n')
    with pytest.raises(ValueError) as err:
        make_traces(f'{csv}#emulated', 1, 0)
    assert str(err.value) == (f'{csv}: not a ROS 2 bag; a rate (emulated) is picked only from '
                              "a bag of netmon's LinkStats")
    for bad, why in ((f'{path}#emulated#bitrate', 'names two rates, emulated and bitrate'),
                     (f'{path}#netmon_0#netmon_1', 'names two robots, netmon_0 and netmon_1'),
                     (f'{path}#', 'an empty tag'), ('outdoors#emulated', 'a preset takes no')):
        with pytest.raises(ValueError) as err:
            make_traces(bad, 1, 0)
        assert why in str(err.value)


def test_a_bag_of_several_robots_is_parsed_once_per_run(tmp_path, monkeypatch):
    # the run listed its robots, then read each robot's link: one parse of the whole bag each
    # (an hour of three robots' LinkStats: 2 s a parse)
    from rog_ros.sim.simulator import make_traces, trace_offsets
    path = str(_fleet_bag(tmp_path / 'fleet.mcap'))
    parses = []
    real = ros_bag._collect

    def counting(*args, **kw):
        """Count a parse of a bag's messages."""
        parses.append(args[0])
        return real(*args, **kw)

    monkeypatch.setattr(ros_bag, '_collect', counting)
    _cold_caches(monkeypatch)       # (another test parsed the same bytes: one cache by them)
    make_traces(path, 3, 0)
    trace_offsets(path, 3, 0)
    assert traces.load_trace(path, node='netmon_2', field='emulated').mbps.tolist() == [2.5] * 3
    assert parses == [path]


@pytest.mark.parametrize('db3', [False, True], ids=['mcap', 'db3'])
def test_a_bag_read_by_path_is_parsed_once_by_the_checks_and_the_nodes(
        tmp_path, monkeypatch, db3):
    # the checks and each node's link_for read the bag by its path: a SQLite bag (rosbag2's
    # default storage up to Humble) was parsed again by each of them, 11 times here
    from rog_ros import checks
    from rog_ros.nodes.emulated_link import link_for
    path = str(_fleet_bag(tmp_path / ('fleet.db3' if db3 else 'fleet.mcap'), db3))
    parses = []
    real = ros_bag._collect

    def counting(*args, **kw):
        """Count a parse of a bag's messages."""
        parses.append(args[0])
        return real(*args, **kw)

    monkeypatch.setattr(ros_bag, '_collect', counting)
    _cold_caches(monkeypatch)       # (another test parsed the same bytes: one cache by them)
    checks.trace('trace', path)
    links = [link_for(path, rank, 3) for rank in range(3)]
    assert parses == [path] and all(links)
    if db3:                 # a bag rewritten under its name is read anew
        con = sqlite3.connect(path)
        con.execute('DELETE FROM messages WHERE id = (SELECT MAX(id) FROM messages)')
        con.commit()
        con.close()
        link_for(path, 0, 3)
        assert parses == [path, path]


def test_a_large_bag_read_by_path_is_not_held_in_memory(tmp_path):
    # a bag recorded with ros2 bag record -a holds the fleet's row chunks, gigabytes: the
    # cache's hash read the whole file into memory before a parse (68 MB for 64 MB here)
    import os
    import tracemalloc
    writer = pytest.importorskip('mcap.writer')
    path = tmp_path / 'all.mcap'
    with open(path, 'wb') as fh:
        bag = writer.Writer(fh)
        bag.start()
        stats = bag.register_channel(TOPIC, 'cdr', bag.register_schema(
            ros_bag.LINK_STATS_TYPE, 'ros2msg', b''))
        rows = bag.register_channel('/rog/w0/chunks', 'cdr', bag.register_schema(
            'rog_ros/msg/RowChunk', 'ros2msg', b''))
        for msg in _messages(0, [0.0] + [10.0] * 5):
            ns = msg.stamp.sec * 10 ** 9 + msg.stamp.nanosec
            bag.add_message(stats, ns, bytes(to_sample(msg).serialize()), ns)
        blob = os.urandom(1 << 20)
        for k in range(32):
            bag.add_message(rows, ns + k, blob, ns + k)
        bag.finish()
    tracemalloc.start()
    try:
        assert ros_bag.robots(path) == [('netmon_0', 0)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < os.path.getsize(path) / 4, peak


def test_convert_writes_each_emulated_link_leaving_out_the_server(tmp_path, capsys):
    # the server's netmon emulates no link (emulated_mbps -1), and its refusal stopped the
    # conversion of every worker's
    from rog_ros.net import cli_trace
    path = str(_fleet_bag(tmp_path / 'fleet.mcap'))
    assert cli_trace.main(['convert', f'{path}#emulated', '--out', f'{tmp_path}/links/']) == 0
    out, err = capsys.readouterr()
    names = [str(tmp_path / 'links' / f'fleet_node{k}.csv') for k in range(3)]
    assert out.splitlines()[-1] == f'--trace {",".join(names)}'
    assert 'read as MCAP bag, emulated_mbps, robot netmon_1 (rank 1)' in out
    rates = [traces.load_trace(n).mbps.tolist() for n in names]
    assert rates == [[0.5] * 3, [1.5] * 3, [2.5] * 3]
    assert 'robot netmon left out: no emulated_mbps in its LinkStats (every one -1)' in err


def _outage_bag(path, db3=False):
    """Write a bag of netmon_0 (0-60 s) and netmon_1 (5-60 s), both down at 20-30 s."""
    def rates(start_s):
        """Return the 0.1 s rates from ``start_s`` to 60 s: 50 Mbit/s, 0 from 20 s to 30 s."""
        steps = range(int(round(start_s * 10)), 600)
        return [0.0 if 200 <= k < 300 else 50.0 for k in steps]
    return _robots_bag(path, {'netmon_0': _run(0, rates(0.0), 0.0, 1),
                              'netmon_1': _run(1, rates(5.0), 5.0, 2)}, db3)


def _down(rate_at, period) -> list:
    """Return at which of 0.5 s steps over two periods ``rate_at`` is 0 (an outage)."""
    return [k for k in range(int(4 * period)) if rate_at(k * 0.5) == 0]


@pytest.mark.parametrize('db3', [False, True], ids=['mcap', 'db3'])
def test_robots_of_one_bag_replay_in_step_on_its_clock_in_the_simulator_and_the_nodes(
        tmp_path, capsys, db3):
    # robots recorded together lost their links together (an outage at 20-30 s of the bag's
    # clock); each was replayed from its own offset (the nodes at rank/N of its period, the
    # simulator at seeded offsets) and from its own first sample (netmon_1 started 5 s
    # later), so their outages fell apart. Now both are on the bag's clock at one offset
    from rog_ros.nodes.emulated_link import link_for
    from rog_ros.sim.simulator import file_offsets, make_traces, trace_offsets
    path = str(_outage_bag(tmp_path / ('run.db3' if db3 else 'run.mcap'), db3))
    for seed in (0, 1, 2):
        sim = make_traces(path, 2, seed)
        (a, off_a), (b, off_b) = sim
        assert off_a == off_b == trace_offsets(path, 2, seed)[1]
        down = [_down(lambda t, tr=tr, off=off: tr.rate_at(t + off), a.end_s)
                for tr, off in sim]
        assert down[0] == down[1] and 38 <= len(down[0]) <= 42, down     # 2 periods x 10 s
        assert off_a == file_offsets(a.end_s, 2, seed)[0]
    nodes = [link_for(path, r, 2) for r in range(2)]
    assert nodes[0].offset_s == nodes[1].offset_s == 0.0
    down = [_down(link.rate_mbps, a.end_s) for link in nodes]
    assert down[0] == down[1] and down[0][:20] == list(range(40, 60))   # at 19.9-29.9 s
    for link, (trace, _) in zip(nodes, sim):        # the simulator's links, the nodes'
        assert link.trace.t_s.tolist() == trace.t_s.tolist()
        assert link.trace.mbps.tolist() == trace.mbps.tolist()
        assert link.trace.end_s == trace.end_s == pytest.approx(59.9)   # (0.1 s: not read)
    assert nodes[1].trace.t_s[1] == pytest.approx(5.0)   # netmon_1 holds its first rate to 5 s
    err = ' '.join(capsys.readouterr().err.split())
    assert (f'warning: {path}#netmon_1: its first sample is 5 s after the first of the robots '
            'recorded with it (its netmon started later): its first rate is held for that '
            'time, so that it replays in step with them') in err
    # the robots named one by one are the same recording; one robot's link for every robot,
    # unrelated files and presets keep one offset per robot
    listed = f'{path}#netmon_0,{path}#netmon_1'
    assert [link_for(listed, r, 2).offset_s for r in range(2)] == [0.0, 0.0]
    one = f'{path}#netmon_0'
    assert [link_for(one, r, 2).offset_s for r in range(2)] == [0.0, pytest.approx(29.95)]
    assert trace_offsets(one, 2, 1) == file_offsets(make_traces(one, 1, 0)[0][0].end_s, 2, 1)


def test_the_files_convert_writes_of_a_bag_replay_in_step_as_the_bag_does(tmp_path, capsys):
    # rog trace convert BAG --out DIR/ printed a --trace list of one file per robot, each
    # from its own first sample and replayed at its own offset as unrelated files; now the
    # files are on the bag's clock and carry its id, and the list replays as the bag does
    from rog_ros.net import cli_trace
    from rog_ros.nodes.emulated_link import link_for
    from rog_ros.sim.simulator import make_traces
    path = str(_outage_bag(tmp_path / 'run.mcap'))
    assert cli_trace.main(['convert', path, '--out', str(tmp_path / 'links') + '/']) == 0
    listed = capsys.readouterr().out.strip().splitlines()[-1].split()[-1]
    assert listed == f'{tmp_path}/links/run_node0.csv,{tmp_path}/links/run_node1.csv'
    for seed in (0, 3):
        sim, bag = make_traces(listed, 2, seed), make_traces(path, 2, seed)
        assert sim[0][1] == sim[1][1] == bag[0][1]
        for (trace, _), (want, _) in zip(sim, bag):
            assert trace.t_s.tolist() == pytest.approx(want.t_s.tolist())
            assert trace.mbps.tolist() == want.mbps.tolist()
        down = [_down(lambda t, tr=tr, off=off: tr.rate_at(t + off), sim[0][0].end_s)
                for tr, off in sim]
        assert down[0] == down[1] and down[0]
    nodes = [link_for(listed, r, 2) for r in range(2)]
    assert [link.offset_s for link in nodes] == [0.0, 0.0]
    assert _down(nodes[0].rate_mbps, 60)[:20] == _down(nodes[1].rate_mbps, 60)[:20]
    # a file of another recording (or none) in the list is unrelated: its own offset
    mixed = f'{tmp_path}/links/run_node0.csv,{tmp_path}/other.csv'
    traces.save_trace(traces.load_trace(f'{tmp_path}/links/run_node1.csv'),
                      f'{tmp_path}/other.csv')
    assert [link_for(mixed, r, 2).offset_s for r in range(2)] == [0.0, pytest.approx(29.95)]


def test_the_files_convert_writes_of_a_bag_replay_in_step_gzip_compressed_too(tmp_path):
    # load_trace reads a gzip-compressed file; its recording id was read from the compressed
    # bytes (none found), so the gzipped list of a bag's robots replayed each robot at its
    # own offset, their outages apart, without a word
    import gzip
    from rog_ros.net import cli_trace
    from rog_ros.nodes.emulated_link import link_for
    from rog_ros.sim.simulator import make_traces
    path = str(_outage_bag(tmp_path / 'run.mcap'))
    assert cli_trace.main(['convert', path, '--out', str(tmp_path / 'links') + '/']) == 0
    listed = []
    for name in ('run_node0.csv', 'run_node1.csv'):
        with open(tmp_path / 'links' / name, 'rb') as fh:
            (tmp_path / f'{name}.gz').write_bytes(gzip.compress(fh.read()))
        listed.append(str(tmp_path / f'{name}.gz'))
        assert traces.recording_of(listed[-1]) == traces.recording_of(tmp_path / 'links' / name)
    listed = ','.join(listed)
    assert [link_for(listed, r, 2).offset_s for r in range(2)] == [0.0, 0.0]
    sim = make_traces(listed, 2, 1)
    assert sim[0][1] == sim[1][1] == make_traces(path, 2, 1)[0][1]


def test_convert_of_a_sqlite_bag_of_several_robots_parses_it_once_more_not_once_per_robot(
        tmp_path, monkeypatch):
    # the in-step replay read each robot's first stamp with the bag's bytes not given: a
    # SQLite bag (not cached without them) was parsed again for every robot, 5 parses for 3
    from rog_ros.net import cli_trace
    robots = {f'netmon_{i}': _run(i, [50.0] * 20, i * 1.0, i + 1) for i in range(3)}
    path = str(_robots_bag(tmp_path / 'run.db3', robots, db3=True))
    parsed, parse = [], ros_bag._parse

    def counting(*args):
        """Count the parses of the bag."""
        parsed.append(args[0])
        return parse(*args)
    monkeypatch.setattr(ros_bag, '_parse', counting)
    assert cli_trace.main(['convert', path, '--out', str(tmp_path / 'links') + '/']) == 0
    assert len(parsed) <= 3, parsed


def _three_robots_bag(path):
    """
    Write a bag of netmon_0 (0-40 s), netmon_1 (5-60 s), netmon_2 (10-50 s), down at 20-30.

    Their emulated_mbps is 5 Mbit/s, netmon_0's not known (-1) for its first 3 s.
    """
    def rates(start_s, stop_s):
        """Return the 0.1 s rates from ``start_s`` to ``stop_s``: 50 Mbit/s, 0 at 20-30 s."""
        steps = range(int(round(start_s * 10)), int(round(stop_s * 10)))
        return [0.0 if 200 <= k < 300 else 50.0 + k % 7 for k in steps]

    def run(node, start_s, stop_s, unknown=0):
        """Return netmon_``node``'s messages, emulated_mbps -1 for the first ``unknown``."""
        out = _run(node, rates(start_s, stop_s), start_s, node + 1)
        return _emulated(out, [-1.0] * unknown + [5.0] * (len(out) - unknown))
    return _robots_bag(path, {'netmon_0': run(0, 0.0, 40.0, 30), 'netmon_1': run(1, 5.0, 60.0),
                              'netmon_2': run(2, 10.0, 50.0)})


def _same(got, want):
    """Assert that two lists of ``(trace, offset_s)`` are equal, number for number."""
    assert len(got) == len(want)
    for (trace, offset), (other, other_offset) in zip(got, want):
        assert trace.t_s.tolist() == other.t_s.tolist()
        assert trace.mbps.tolist() == other.mbps.tolist()
        assert (trace.end_s, trace.loop, offset) == (other.end_s, other.loop, other_offset)


def test_any_robots_of_a_bag_and_of_its_converted_list_replay_alike_on_the_whole_clock(
        tmp_path, capsys):
    # a bag used by fewer robots than it holds took time 0 and its period from the robots
    # used (netmon_1 and netmon_2: time 0 at 5 s), its converted list from all of them (0 s),
    # so the two replayed different links; both are now on the whole recording's clock
    from rog_ros.net import cli_trace
    from rog_ros.nodes.emulated_link import link_for
    from rog_ros.sim.simulator import make_traces
    path = str(_three_robots_bag(tmp_path / 'run.mcap'))
    assert cli_trace.main(['convert', path, '--out', f'{tmp_path}/links/']) == 0
    assert cli_trace.main(['convert', f'{path}#netmon_2', '--out', f'{tmp_path}/two.csv']) == 0
    capsys.readouterr()
    csv = {k: f'{tmp_path}/links/run_node{k}.csv' for k in range(3)}
    for ranks in ((0, 1, 2), (1, 2), (0, 2), (2,), (1,)):
        bag = ','.join(f'{path}#netmon_{k}' for k in ranks)
        files = ','.join(csv[k] for k in ranks)
        for n, seed in ((len(ranks), 0), (3, 1), (4, 2)):
            _same(make_traces(files, n, seed), make_traces(bag, n, seed))
        for r in range(3):
            mine, want = link_for(files, r, 3), link_for(bag, r, 3)
            _same([(mine.trace, mine.offset_s)], [(want.trace, want.offset_s)])
    one = traces.load_trace(f'{tmp_path}/two.csv')
    _same([(one, 0.0)], [(traces.load_trace(csv[2]), 0.0)])
    assert traces.recording_of(f'{tmp_path}/two.csv') == traces.recording_of(csv[0])
    # the clock is the bag's: time 0 at its earliest first sample (netmon_0's, 0.1 s), one
    # period to its latest end (netmon_1's, 60 s), the outage at 20-30 s for every robot
    (a, off), (b, _) = make_traces(f'{path}#netmon_1,{path}#netmon_2', 2, 0)
    assert a.end_s == b.end_s == pytest.approx(59.9)
    assert (a.t_s[1], b.t_s[1]) == (pytest.approx(5.0), pytest.approx(10.0))
    for trace in (a, b):
        assert trace.rate_at(19.85) > 0 and trace.rate_at(19.95) == 0 == trace.rate_at(29.85)
        assert trace.rate_at(29.95) > 0


def test_a_robot_named_like_a_rate_is_picked_by_robot_or_rank_and_the_errors_say_so(
        tmp_path, capsys):
    # BAG#emulated reads the rate emulated_mbps: a netmon node named emulated could not be
    # picked by name, the refusal did not say how, and a bag of it given to rog sim broke
    # (robot 0 resolved to BAG#emulated#emulated, "two rates")
    from rog_ros.net import cli_trace
    from rog_ros.sim.simulator import make_traces
    path = str(_robots_bag(tmp_path / 'run.mcap', {
        'emulated': _emulated(_messages(0, [0.0] + [10.0] * 3), [-1.0] + [0.5] * 3),
        'netmon_1': _emulated(_messages(1, [0.0] + [20.0] * 3), [-1.0] + [1.5] * 3)}))
    for entry in (f'{path}#0', f'{path}#robot=emulated', f'{path}#robot=emulated#throughput'):
        assert traces.load_entry(entry).mbps.tolist() == [10.0] * 3
    assert traces.load_entry(f'{path}#robot=emulated#emulated').mbps.tolist() == [0.5] * 3
    capsys.readouterr()
    assert cli_trace.main(['convert', f'{path}#emulated', '--out', f'{tmp_path}/x.csv']) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and not (tmp_path / 'x.csv').exists()
    assert (f'emulated is a rate, so the robot named emulated is {path}#robot=emulated'
            in err)
    assert [t.mbps.tolist() for t, _ in make_traces(path, 2, 0)] == [[10.0] * 3, [20.0] * 3]
    assert [t.mbps.tolist() for t, _ in make_traces(f'{path}#emulated', 2, 0)] == [
        [0.5] * 3, [1.5] * 3]
    err = ' '.join(capsys.readouterr().err.split())
    assert (f'note: {path}#emulated reads the rate emulated_mbps (throughput, emulated, bitrate '
            f"are rates); the bag's robot named emulated is {path}#robot=emulated") in err
    with pytest.raises(ValueError, match=f'a robot named emulated is {path}#robot=emulated'):
        make_traces(f'{path}#emulated#bitrate', 1, 0)


def test_a_converted_file_converted_again_keeps_its_recording(tmp_path, capsys):
    # rog trace convert of a file that rog trace convert BAG --out DIR/ wrote dropped its
    # recording= id: the list of the files converted again replayed unrelated, out of step
    from rog_ros.net import cli_trace, trace_spec
    from rog_ros.sim.simulator import make_traces
    path = str(_three_robots_bag(tmp_path / 'run.mcap'))
    assert cli_trace.main(['convert', path, '--out', f'{tmp_path}/links/']) == 0
    again = []
    for k, scale in ((0, '1'), (1, '0.5')):
        again.append(f'{tmp_path}/again{k}.csv')
        assert cli_trace.main(['convert', f'{tmp_path}/links/run_node{k}.csv', '--scale', scale,
                               '--out', again[-1]]) == 0
        assert trace_spec.recording_of(again[-1]) == trace_spec.recording_of(
            f'{tmp_path}/links/run_node{k}.csv') is not None
    (a, off_a), (b, off_b) = make_traces(','.join(again), 2, 3)
    (want_a, want_off), (want_b, _) = make_traces(f'{path}#netmon_0,{path}#netmon_1', 2, 3)
    assert off_a == off_b == want_off
    assert (a.t_s.tolist(), a.mbps.tolist()) == (want_a.t_s.tolist(), want_a.mbps.tolist())
    assert (b.t_s.tolist(), b.end_s) == (want_b.t_s.tolist(), want_b.end_s)
    assert b.mbps.tolist() == (want_b.mbps * 0.5).tolist()
    other = tmp_path / 'other.csv'
    other.write_text('0,1\n1,2\n')
    assert cli_trace.main(['convert', str(other), '--out', f'{tmp_path}/other2.csv']) == 0
    assert trace_spec.recording_of(f'{tmp_path}/other2.csv') is None


def test_conversions_of_one_bag_at_other_rates_share_its_clock_and_id_and_mix_in_step(
        tmp_path, capsys):
    # two conversions of one bag (measured and #emulated, or another --scale) carried one id
    # on different clocks (the emulated one's time 0 at the first emulated_mbps, 2.9 s later),
    # so a list mixing their files was replayed "in step", 2.9 s apart. Every conversion of a
    # bag is now on its one clock: files of any two mix as the bag's entries do
    from rog_ros.net import cli_trace, trace_spec
    from rog_ros.sim.simulator import make_traces
    path = str(_three_robots_bag(tmp_path / 'run.mcap'))
    assert cli_trace.main(['convert', path, '--out', f'{tmp_path}/a/']) == 0
    assert cli_trace.main(['convert', f'{path}#emulated', '--out', f'{tmp_path}/b/']) == 0
    assert cli_trace.main(['convert', path, '--scale', '0.5', '--out', f'{tmp_path}/c/']) == 0
    ids = {trace_spec.recording_of(f'{tmp_path}/{d}/run_node{k}.csv')
           for d in 'abc' for k in range(3)}
    assert len(ids) == 1 and None not in ids
    mixed = f'{tmp_path}/b/run_node0.csv,{tmp_path}/a/run_node1.csv,{tmp_path}/c/run_node2.csv'
    bag = f'{path}#netmon_0#emulated,{path}#netmon_1,{path}#netmon_2'
    for seed in (0, 1):
        got, want = make_traces(mixed, 3, seed), make_traces(bag, 3, seed)
        assert [off for _, off in got] == [off for _, off in want] == [want[0][1]] * 3
        for (trace, _), (other, _) in zip(got, want):
            assert (trace.t_s.tolist(), trace.end_s) == (other.t_s.tolist(), other.end_s)
        assert got[0][0].mbps.tolist() == want[0][0].mbps.tolist()
        assert got[2][0].mbps.tolist() == (want[2][0].mbps * 0.5).tolist()
    emulated = traces.load_trace(f'{tmp_path}/b/run_node0.csv')
    assert emulated.t_s[1] == pytest.approx(2.9) and emulated.end_s == pytest.approx(59.9)


def test_bad_bags_and_tags_are_refused_in_one_line_and_nothing_is_written(tmp_path, capsys):
    # a byte flipped in a LinkStats of an uncompressed chunk was read as its rate, silently;
    # an empty file named .mcap was "no samples", a bag damaged before its first LinkStats a
    # warning and a refusal that said it held no message, and BAG#robot= looked for a robot
    # named robot=
    from rog_ros.net import cli_trace
    writer = pytest.importorskip('mcap.writer')
    path = _three_robots_bag(tmp_path / 'run.mcap')
    data = path.read_bytes()
    with open(tmp_path / 'plain.mcap', 'wb') as fh:        # (uncompressed: bytes to flip)
        bag = writer.Writer(fh, compression=writer.CompressionType.NONE)
        bag.start()
        stats = bag.register_channel(TOPIC, 'cdr', bag.register_schema(
            ros_bag.LINK_STATS_TYPE, 'ros2msg', b''))
        for msg in _messages(0, [0.0] + [10.0] * 5):
            ns = msg.stamp.sec * 10 ** 9 + msg.stamp.nanosec
            bag.add_message(stats, ns, bytes(to_sample(msg).serialize()), ns)
        bag.finish()
    damaged = bytearray((tmp_path / 'plain.mcap').read_bytes())
    at = bytes(damaged).find(bytes(to_sample(_messages(0, [0.0, 10.0])[1]).serialize()))
    assert at > 0 and traces.load_trace(tmp_path / 'plain.mcap').mbps.tolist() == [10.0] * 5
    damaged[at + 38] ^= 0x10          # (its stamp's nanosec, 0.1 s more: read so, silently)
    (tmp_path / 'damaged.mcap').write_bytes(bytes(damaged))
    (tmp_path / 'empty.mcap').write_bytes(b'')
    (tmp_path / 'renamed.db3').write_text('0,1\n1,2\n')
    (tmp_path / 'head.mcap').write_bytes(data[:len(ros_bag.MCAP_MAGIC) + 3])
    for entry, why in (
            (tmp_path / 'damaged.mcap', 'a ROS 2 bag that ends early or is damaged before its '
                                        'first LinkStats (CRCValidationError'),
            (tmp_path / 'head.mcap', 'a ROS 2 bag that ends early or is damaged before its '
                                     'first LinkStats ('),
            (tmp_path / 'empty.mcap', 'named like a ROS 2 bag but empty (0 bytes'),
            (tmp_path / 'renamed.db3', 'named like a ROS 2 bag but not one'),
            (f'{path}#robot=', 'robot= names no robot; write'),
            (f'{tmp_path}/renamed.db3#netmon_0', 'named like a ROS 2 bag but not one')):
        for out in (f'{tmp_path}/out/', f'{tmp_path}/out.csv'):
            assert cli_trace.main(['convert', str(entry), '--out', out]) == 2
            err = capsys.readouterr().err
            assert len(err.splitlines()) == 1 and why in err, err
            assert not os.path.exists(out)


def test_a_bag_whose_name_holds_a_hash_or_that_is_gzipped(tmp_path, capsys):
    # a bag named run#1.mcap was read alone, but each of its robots' entries split at the
    # first '#' (robots run and 1.mcap#netmon_0: "names two robots"), so rog trace stats, sim
    # and convert of it failed; a gzipped bag was refused as "not a text file"
    import gzip
    from rog_ros.net import cli_trace, trace_spec
    from rog_ros.sim.simulator import make_traces
    path = str(_three_robots_bag(tmp_path / 'run#1.mcap'))
    assert trace_spec.parse(f'{path}#netmon_1#emulated') == (path, 'netmon_1', 'emulated')
    assert trace_spec.parse(f'{tmp_path}/other#netmon_1') == (f'{tmp_path}/other', 'netmon_1',
                                                              None)
    assert len(make_traces(path, 3, 0)) == 3
    assert cli_trace.main(['stats', path]) == 0
    assert cli_trace.main(['convert', path, '--out', f'{tmp_path}/links/']) == 0
    want = traces.load_entry(f'{path}#netmon_1')
    got = traces.load_trace(f'{tmp_path}/links/run#1_node1.csv')
    assert (got.t_s.tolist(), got.mbps.tolist()) == (want.t_s.tolist(), want.mbps.tolist())
    capsys.readouterr()
    (tmp_path / 'run.mcap.gz').write_bytes(gzip.compress((tmp_path / 'run#1.mcap').read_bytes()))
    assert cli_trace.main(['stats', f'{tmp_path}/run.mcap.gz']) == 2
    err = capsys.readouterr().err
    assert err == (f'rog trace: {tmp_path}/run.mcap.gz: a gzip-compressed MCAP bag, which is '
                   f'read uncompressed only: gunzip it (gunzip -k {tmp_path}/run.mcap.gz) and '
                   'give the bag\n')


def test_a_rate_read_with_gaps_ends_with_the_recordings_clock_and_replays_in_step(
        tmp_path, capsys):
    # netmon_1's emulated_mbps known at one sample of three (-1 between): its median step,
    # 0.3 s, put its link's end 0.2 s past the recording's, so its period was longer than
    # netmon_0's, and the two robots of one recording started at different offsets
    from rog_ros.sim.simulator import make_traces

    def run(node, start_s, stop_s, every):
        """Return netmon_``node``'s messages, emulated_mbps known at one of ``every``."""
        out = _run(node, [50.0 + k % 7 for k in range(int(start_s * 10), int(stop_s * 10))],
                   start_s, node + 1)
        return _emulated(out, [5.0 if k % every == 0 else -1.0 for k in range(len(out))])
    path = str(_robots_bag(tmp_path / 'run.mcap', {'netmon_0': run(0, 0.0, 40.0, 1),
                                                   'netmon_1': run(1, 5.0, 60.0, 3)}))
    bag = f'{path}#netmon_0#emulated,{path}#netmon_1#emulated'
    for seed in (0, 1):
        (a, off_a), (b, off_b) = make_traces(bag, 2, seed)
        assert off_a == off_b and a.end_s == b.end_s == traces.load_entry(
            f'{path}#netmon_1').end_s
    capsys.readouterr()


def test_robots_of_one_bag_named_by_two_paths_replay_in_step(tmp_path, capsys):
    # the robots of a bag were grouped by the path as written: run.mcap#netmon_0 and
    # ./run.mcap#netmon_1 (or a link to it) were two recordings, at two offsets
    from rog_ros.nodes.emulated_link import link_for
    from rog_ros.sim.simulator import make_traces
    path = _three_robots_bag(tmp_path / 'run.mcap')
    os.symlink(path, tmp_path / 'link.mcap')
    want = make_traces(f'{path}#netmon_0,{path}#netmon_1,{path}#netmon_2', 3, 1)
    mixed = f'{path}#netmon_0,{tmp_path}/./run.mcap#netmon_1,{tmp_path}/link.mcap#netmon_2'
    _same(make_traces(mixed, 3, 1), want)
    one = ','.join(f'{path}#netmon_{k}' for k in range(1, 3))
    two = f'{path}#netmon_1,{tmp_path}/link.mcap#netmon_2'
    assert [link_for(two, r, 2).offset_s for r in range(2)] == [
        link_for(one, r, 2).offset_s for r in range(2)] == [0.0, 0.0]
    capsys.readouterr()


def _large_bag(path, robots: int, megabytes: int = 32):
    """Write an MCAP bag of ``robots`` netmons' LinkStats and ``megabytes`` of row chunks."""
    writer = pytest.importorskip('mcap.writer')
    with open(path, 'wb') as fh:
        bag = writer.Writer(fh)
        bag.start()
        schema = bag.register_schema(ros_bag.LINK_STATS_TYPE, 'ros2msg', b'')
        rows = bag.register_channel('/rog/w0/chunks', 'cdr', bag.register_schema(
            'rog_ros/msg/RowChunk', 'ros2msg', b''))
        for k in range(robots):
            stats = bag.register_channel(f'/rog/status/netmon_{k}/link_stats', 'cdr', schema)
            for msg in _run(k, [0.0] + [10.0] * 5, k, 1):
                ns = msg.stamp.sec * 10 ** 9 + msg.stamp.nanosec
                bag.add_message(stats, ns, bytes(to_sample(msg).serialize()), ns)
        blob = os.urandom(1 << 20)
        for k in range(megabytes):
            bag.add_message(rows, ns + k, blob, ns + k)
        bag.finish()
    return path


def test_convert_of_a_large_bag_of_several_robots_does_not_hold_it_in_memory(tmp_path, capsys):
    # rog trace convert BAG#NAME (and BAG --out DIR/) read a bag of several robots whole into
    # memory to put a robot on its clock and hash its id: 64 MB held for a bag of 64 MB
    import tracemalloc
    from rog_ros.net import cli_trace, trace_spec
    path = _large_bag(tmp_path / 'all.mcap', 2)
    outs = (f'{tmp_path}/one.csv', f'{tmp_path}/links/')
    for entry, out in ((f'{path}#netmon_1', outs[0]), (str(path), outs[1])):
        tracemalloc.start()
        try:
            assert cli_trace.main(['convert', entry, '--out', out]) == 0
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < os.path.getsize(path) / 4, (entry, peak)
    one, both = traces.load_trace(outs[0]), traces.load_trace(f'{outs[1]}all_node1.csv')
    assert (one.t_s.tolist(), one.end_s) == (both.t_s.tolist(), both.end_s)
    assert one.t_s[1] == pytest.approx(1.0)
    assert trace_spec.recording_of(outs[0]) == trace_spec.recording_of(
        f'{outs[1]}all_node0.csv') is not None
    capsys.readouterr()


def test_the_nodes_do_not_hold_a_large_bag_in_memory(tmp_path, capsys):
    # link_for read a bag whole into memory (a worker's node: gigabytes of a ros2 bag record
    # -a), for a bag of one robot too, which 768e180 read in blocks
    import tracemalloc
    from rog_ros.nodes.emulated_link import link_for
    for robots in (1, 2):
        path = _large_bag(tmp_path / f'all{robots}.mcap', robots)
        tracemalloc.start()
        try:
            links = [link_for(str(path), r, robots) for r in range(robots)]
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < os.path.getsize(path) / 4, (robots, peak)
        assert [set(link.trace.mbps.tolist()) for link in links] == [{10.0}] * robots
    capsys.readouterr()


def test_the_recording_clock_is_exact_to_the_ns(tmp_path, capsys):
    # the clock was subtracted in float seconds since the epoch (1.77e9 s: steps of 0.24 us),
    # so the robot that starts first and ends last replayed a period 95 ns longer than its own
    # link, and a robot that started 5.0537 s later had its samples shifted by up to 0.2 us
    from rog_ros.sim.simulator import make_traces
    path = str(_robots_bag(tmp_path / 'run.mcap', {
        'netmon_0': _run(0, [0.0] + [10.0 + k % 3 for k in range(599)], 0.0, 1),
        'netmon_1': _run(1, [0.0] + [20.0] * 99, 5.0537, 2)}))
    links = ros_bag.read_bag_links(path)
    (first, _), (later, _) = make_traces(f'{path}#netmon_0,{path}#netmon_1', 2, 0)
    assert first.end_s == later.end_s == links['netmon_0'][2]
    assert first.t_s.tolist() == links['netmon_0'][0]
    lead = 5053700000 * 1e-9
    assert later.t_s.tolist() == [0.0] + [t + lead for t in links['netmon_1'][0]]
    capsys.readouterr()


def test_chunk_crcs_catch_a_damaged_zstd_chunk_and_a_crc_of_zero_is_not_checked(
        tmp_path, capsys):
    # a chunk's CRC is of its uncompressed records (MCAP spec), so a byte flipped in a zstd
    # chunk that still decompresses is caught, never read as garbled rates; a CRC of 0 means
    # "not computed" (the spec; rosbag2's writer with noChunkCRC) and is read unchecked
    whole = _mcap(tmp_path / 'whole.mcap', _messages(0, [float(k % 50) for k in range(2000)]))
    data = whole.read_bytes()
    (_, first_end), (start, end) = _chunk_spans(data)[:2]       # (compressed: zstd)
    rates = traces.load_trace(whole).mbps.tolist()
    for off in range(0, min(end - start, 700), 7):
        damaged = bytearray(data)
        damaged[start + off] ^= 0x04
        path = _write_bytes(tmp_path / f'damaged{off}.mcap', bytes(damaged))
        read = traces.load_trace(path).mbps.tolist()        # (the first chunk's rates)
        assert len(read) < len(rates) and read == rates[:len(read)], off
        assert f'{path}: the bag ends early or is damaged there' in capsys.readouterr().err
    unchecked = bytearray(data)
    at = first_end         # (the first chunk's message indexes, then the second chunk)
    while data[at] != 0x06:
        at += 9 + int.from_bytes(data[at + 1:at + 9], 'little')
    at += 1 + 8 + 8 + 8 + 8                    # its uncompressed_crc
    assert unchecked[at:at + 4] != bytes(4)
    unchecked[at:at + 4] = bytes(4)
    path = _write_bytes(tmp_path / 'unchecked.mcap', bytes(unchecked))
    assert traces.load_trace(path).mbps.tolist() == rates
    assert 'damaged' not in capsys.readouterr().err


def test_a_sqlite_bag_of_a_killed_recorder_replays_its_wal_in_the_simulator_too(
        tmp_path, capsys):
    # a recorder killed before it closed its SQLite bag left its messages in the bag's -wal:
    # rog trace stats / convert read them (by path), rog sim read the bag's bytes alone and
    # refused it as "a ROS 2 bag without a LinkStats", so the bag and its converted list
    # could not replay alike
    import shutil
    from rog_ros.net import cli_trace
    from rog_ros.sim.simulator import make_traces
    live = tmp_path / 'live.db3'
    con = _live_db3(live, 2, 51)
    try:
        bag = tmp_path / 'killed.db3'          # (copied while the recorder holds it open)
        shutil.copy(live, bag)
        shutil.copy(f'{live}-wal', f'{bag}-wal')
    finally:
        con.close()
    assert cli_trace.main(['convert', str(bag), '--out', f'{tmp_path}/links/']) == 0
    files = f'{tmp_path}/links/killed_node0.csv,{tmp_path}/links/killed_node1.csv'
    _same(make_traces(str(bag), 2, 1), make_traces(files, 2, 1))
    capsys.readouterr()


def test_a_list_mixing_a_bags_robots_and_its_converted_files_replays_in_step(
        tmp_path, capsys):
    # run.mcap#netmon_0 with links/run_node1.csv (netmon_1 converted) were two recordings,
    # at two offsets (15.7 and 42.2 s, seed 1), though the file replays as netmon_1 does
    from rog_ros.net import cli_trace
    from rog_ros.nodes.emulated_link import link_for
    from rog_ros.sim.simulator import make_traces
    path = str(_three_robots_bag(tmp_path / 'run.mcap'))
    assert cli_trace.main(['convert', path, '--out', f'{tmp_path}/links/']) == 0
    bag = f'{path}#netmon_0,{path}#netmon_1'
    mixed = f'{path}#netmon_0,{tmp_path}/links/run_node1.csv'
    for seed in (0, 1):
        _same(make_traces(mixed, 2, seed), make_traces(bag, 2, seed))
    assert [link_for(mixed, r, 2).offset_s for r in range(2)] == [0.0, 0.0]
    capsys.readouterr()


def _live_db3(path, robots: int, samples: int):
    """Return a connection to a SQLite bag ``path`` whose messages stay in its -wal."""
    con = sqlite3.connect(str(path))
    con.execute('PRAGMA journal_mode=WAL')
    con.execute('PRAGMA wal_autocheckpoint=0')
    con.execute('CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT '
                'NOT NULL, serialization_format TEXT NOT NULL, offered_qos_profiles TEXT '
                'NOT NULL)')
    con.execute('CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL, '
                'timestamp INTEGER NOT NULL, data BLOB NOT NULL)')
    con.commit()
    con.execute('PRAGMA wal_checkpoint(TRUNCATE)')
    for k in range(robots):
        con.execute('INSERT INTO topics VALUES (?, ?, ?, ?, ?)',
                    (k + 1, f'/rog/status/netmon_{k}/link_stats', 'rog_ros/msg/LinkStats',
                     'cdr', ''))
    _add_samples(con, robots, 0, samples)
    return con


def _add_samples(con, robots: int, first: int, samples: int):
    """Record LinkStats ``first`` to ``first + samples - 1`` of each robot (0.1 s apart)."""
    for k in range(robots):
        messages = _run(k, [0.0] + [10.0 + k] * (first + samples), 0, 1)
        for j in range(first, first + samples):
            con.execute('INSERT INTO messages(topic_id, timestamp, data) VALUES (?, ?, ?)',
                        (k + 1, START_NS + j, bytes(to_sample(messages[j]).serialize())))
    con.commit()


def test_a_sqlite_bag_whose_wal_alone_grew_is_read_anew_by_the_simulator(tmp_path, capsys):
    # the simulator's trace cache (and rog compare's trace_digest) keyed a SQLite bag by its
    # main file alone: a recorder that went on writing into the -wal gave the old links again
    # in one process, and rog compare reused runs of the shorter bag
    from rog_ros.sim.simulator import make_traces, trace_digest
    bag = tmp_path / 'live.db3'
    con = _live_db3(bag, 2, 20)
    try:
        main = bag.read_bytes()
        before = make_traces(str(bag), 2, 1)
        digest = trace_digest(str(bag))
        _add_samples(con, 2, 20, 30)
        assert bag.read_bytes() == main         # (the messages went into the -wal alone)
        after = make_traces(str(bag), 2, 1)
        assert [t.end_s for t, _ in after] > [t.end_s for t, _ in before]
        assert [len(t) for t, _ in after] == [len(t) for t, _ in make_traces(
            f'{bag}#netmon_0,{bag}#netmon_1', 2, 1)]
        assert trace_digest(str(bag)) != digest
    finally:
        con.close()
    capsys.readouterr()


def test_the_recording_id_of_a_bag_is_the_one_its_converted_files_carry(tmp_path, capsys):
    # the id is in every file rog trace convert wrote: hashing a bag once per process must
    # not change it, or a list of files converted before and the bag no longer replay in step
    from rog_ros.net import cli_trace, trace_spec
    path = _write_bytes(tmp_path / 'run.mcap', zlib.decompress(base64.b64decode(FIXED_BAG)))
    assert ros_bag.recording_id(str(path)) == FIXED_BAG_ID
    assert ros_bag.recording_id(str(path)) == FIXED_BAG_ID         # (hashed before)
    assert cli_trace.main(['convert', str(path), '--out', f'{tmp_path}/links/']) == 0
    assert trace_spec.recording_of(f'{tmp_path}/links/run_node1.csv') == FIXED_BAG_ID
    capsys.readouterr()


class _Counted:
    """A file opened by ``ros_bag`` whose bytes read are added to a tally."""

    def __init__(self, fh, tally: list):
        """Wrap the open file ``fh``."""
        self._fh, self._tally = fh, tally

    def read(self, *args):
        """Read as the file does, and count the bytes."""
        data = self._fh.read(*args)
        self._tally[0] += len(data)
        return data

    def __getattr__(self, name):
        """Return the file's own attribute ``name``."""
        return getattr(self._fh, name)

    def __enter__(self):
        """Enter as the file does."""
        return self

    def __exit__(self, *exc):
        """Close the file."""
        self._fh.close()


def test_a_bag_is_hashed_once_a_process_not_once_per_rank_and_id(tmp_path, capsys, monkeypatch):
    # link_for resolved the bag once per rank (each rank's list of every rank's entry: n * n
    # hashes of the bag for a server's n links) and recording_id hashed it after robots()
    # did: seconds for a bag of gigabytes (ros2 bag record -a), for each rank
    from rog_ros.nodes.emulated_link import link_for
    path = str(_large_bag(tmp_path / 'all.mcap', 3, megabytes=4))
    _an_hour_later(monkeypatch)         # (a bag written just now is hashed at each call)
    read = [0]
    monkeypatch.setattr(ros_bag, 'open', lambda *a, **kw: _Counted(open(*a, **kw), read),
                        raising=False)
    links = [link_for(path, r, 3) for r in range(3)]
    assert [set(link.trace.mbps.tolist()) for link in links] == [{10.0}] * 3
    size = os.path.getsize(path)
    assert read[0] < 2.1 * size, read[0] / size         # hashed once, parsed once
    read[0] = 0
    assert ros_bag.recording_id(path) is not None
    assert read[0] < 1024, read[0]      # (its first bytes: bag_kind)
    capsys.readouterr()


def _an_hour_later(monkeypatch):
    """Take files' identities an hour after now: the files a test wrote are old, not racy."""
    monkeypatch.setattr(file_identity, 'now_ns', lambda: time.time_ns() + 3600 * 10 ** 9)


class _WithoutChangeTime:
    """An ``os.stat`` result of a filesystem that keeps no change time (FAT): its mtime."""

    def __init__(self, st):
        """Wrap the stat result ``st``."""
        self._st = st

    def __getattr__(self, name):
        """Return the stat's own field ``name``, the modification time as the change time."""
        return getattr(self._st, 'st_mtime_ns' if name == 'st_ctime_ns' else name)


def test_a_bag_rewritten_within_a_tick_of_its_filesystems_clock_is_read_again(
        tmp_path, capsys, monkeypatch):
    # a bag's hash was kept by its stat: a bag rewritten with as many bytes within one tick of
    # its filesystem's clock (2 s on FAT, which keeps no change time) kept it, and its old
    # links were replayed and its old digest said that a run of it could be reused. A stat
    # taken within file_identity.RACY_NS of the file's times keys no cache now (git's racily
    # clean rule). The tick is os.utime here, the change time emulated as FAT's
    from rog_ros.sim import simulator
    stat = os.stat
    monkeypatch.setattr(os, 'stat', lambda *a, **kw: _WithoutChangeTime(stat(*a, **kw)))
    path = _mcap(tmp_path / 'run.mcap', _messages(0, [0.0, 10, 20]))
    assert traces.load_trace(path).mbps.tolist() == [10.0, 20.0]
    digest = simulator.trace_digest(str(path))
    new = _mcap(tmp_path / 'new.mcap', _messages(0, [0.0, 20, 10])).read_bytes()
    mtime = os.stat(path).st_mtime_ns
    assert len(new) == os.path.getsize(path)
    with open(path, 'r+b') as fh:           # (in place: the same inode)
        fh.write(new)
    os.utime(path, ns=(mtime, mtime))
    assert traces.load_trace(path).mbps.tolist() == [20.0, 10.0]
    assert simulator.trace_digest(str(path)) != digest
    capsys.readouterr()


def test_a_young_bag_is_hashed_at_each_call_and_an_old_one_once(tmp_path, monkeypatch):
    # (a bag of 67 MB took a second to hash: only one written in the last RACY_NS is hashed
    # again, until it is old)
    path = str(_large_bag(tmp_path / 'all.mcap', 3, megabytes=4))
    _assert_hashed_while_young(path, os.stat(path).st_ctime_ns, monkeypatch)


def _assert_hashed_while_young(path, written_ns, monkeypatch):
    """Assert that 3 digests of the bag read it 3 times while young, once when old."""
    size, read = os.path.getsize(path), [0]
    monkeypatch.setattr(ros_bag, 'open', lambda *a, **kw: _Counted(open(*a, **kw), read),
                        raising=False)
    for late_ns, hashed in ((file_identity.RACY_NS // 2, 3), (file_identity.RACY_NS, 1)):
        monkeypatch.setattr(file_identity, 'now_ns', lambda late_ns=late_ns: written_ns + late_ns)
        read[0] = 0
        assert len({ros_bag.file_digest(path) for _ in range(3)}) == 1
        assert hashed * size <= read[0] < hashed * size + 4096, (read[0] / size, hashed)


def test_a_bag_whose_mtime_is_ahead_of_the_clock_is_hashed_once_when_its_ctime_is_old(
        tmp_path, monkeypatch):
    # a bag copied with cp -p (rsync -a) from a robot whose clock ran an hour ahead has its
    # mtime in the future: it counted as young until this machine's clock passed it, and was
    # hashed at each lookup (each run rog compare checks) long after the copy. The copy set
    # its change time, which any later write sets again: that one says whether it is young
    path = str(_large_bag(tmp_path / 'all.mcap', 3, megabytes=4))
    ahead = time.time_ns() + 3600 * 10 ** 9
    os.utime(path, ns=(ahead, ahead))
    copied = os.stat(path).st_ctime_ns
    _assert_hashed_while_young(path, copied, monkeypatch)
    found = file_identity.identity(path)
    assert file_identity.racy(found._replace(ctime_ns=ahead), copied + file_identity.RACY_NS)
    assert file_identity.racy(found._replace(mtime_ns=copied), copied + 1)


def test_one_robot_named_by_rank_and_by_name_is_one_link(tmp_path, capsys):
    # run.mcap#0,run.mcap#netmon_0 counted as two links of one recording: both robots replayed
    # robot 0's link in step, from one offset, where run.mcap#netmon_0 twice (and a.csv twice)
    # gives each robot its own offset
    from rog_ros.nodes.emulated_link import link_for
    from rog_ros.sim.simulator import trace_offsets
    path = str(_three_robots_bag(tmp_path / 'run.mcap'))
    twice = f'{path}#netmon_0,{path}#netmon_0'
    for spec in (f'{path}#0,{path}#netmon_0', f'{path}#netmon_0,{path}#robot=0'):
        for seed in (0, 1):
            assert trace_offsets(spec, 2, seed) == trace_offsets(twice, 2, seed)
        assert [link_for(spec, r, 2).offset_s for r in range(2)] == [
            link_for(twice, r, 2).offset_s for r in range(2)]
    offsets = trace_offsets(twice, 2, 1)
    assert offsets[0] != offsets[1]
    # with another robot of the bag: robot 1 replays robot 0's link as the next copy of the
    # recording, and robot 2 (netmon_1, by rank) in step with robot 0
    assert _leaders(f'{path}#0,{path}#netmon_0,{path}#1', 3) == [0, 1, 0]
    capsys.readouterr()


def _leaders(spec: str, n: int) -> list:
    """Return ``trace_spec.recordings`` of the first ``n`` robots of ``spec``."""
    from rog_ros.net import trace_spec
    return trace_spec.recordings([trace_spec.entry_for(spec, r) for r in range(n)])


def test_a_bag_robot_and_the_file_converted_of_it_are_one_link(tmp_path, capsys):
    # run.mcap#netmon_1,links/run_node1.csv counted as two links of one recording: both
    # robots replayed netmon_1's link in step from one offset, where run.mcap#netmon_1 twice
    # gives each robot its own offset; the files now name their robot (and rate)
    from rog_ros.net import cli_trace, trace_spec
    from rog_ros.nodes.emulated_link import link_for
    from rog_ros.sim.simulator import trace_offsets
    path = str(_three_robots_bag(tmp_path / 'run.mcap'))
    assert cli_trace.main(['convert', path, '--out', f'{tmp_path}/links/']) == 0
    assert cli_trace.main(['convert', f'{path}#1', '--out', f'{tmp_path}/one.csv']) == 0
    assert cli_trace.main(['convert', f'{tmp_path}/one.csv', '--out', f'{tmp_path}/again.csv',
                           '--scale', '2']) == 0
    assert cli_trace.main(['convert', f'{path}#netmon_1#emulated', '--out',
                           f'{tmp_path}/emulated.csv']) == 0
    converted = f'{tmp_path}/links/run_node1.csv'
    for file in (converted, f'{tmp_path}/one.csv', f'{tmp_path}/again.csv'):
        assert trace_spec.link_of(file) == ('netmon_1', 'throughput')
    assert trace_spec.link_of(f'{tmp_path}/emulated.csv') == ('netmon_1', 'emulated')
    twice = f'{path}#netmon_1,{path}#netmon_1'
    for spec in (f'{path}#netmon_1,{converted}', f'{converted},{tmp_path}/again.csv'):
        for seed in (0, 1):
            assert trace_offsets(spec, 2, seed) == trace_offsets(twice, 2, seed)
        assert [link_for(spec, r, 2).offset_s for r in range(2)] == [
            link_for(twice, r, 2).offset_s for r in range(2)]
    assert _leaders(f'{path}#netmon_1,{converted},{tmp_path}/links/run_node0.csv', 3) == [
        0, 1, 0]
    assert _leaders(f'{path}#netmon_1#emulated,{tmp_path}/emulated.csv,{path}#0', 3) == [
        0, 1, 0]
    capsys.readouterr()


def test_one_robots_link_at_two_rates_or_scales_is_one_link_whatever_else_is_listed(
        tmp_path, capsys):
    # BAG#netmon_1,BAG#netmon_1#emulated gave each robot its own offset (one robot's link
    # twice), but with BAG#0 added robots 0 and 1 replayed in step from one offset (the rate
    # made them two links of the recording once it held two robots): a third robot changed
    # how the first two replayed. A robot's link at any rate or --scale is one link now
    from rog_ros.net import cli_trace
    from rog_ros.nodes.emulated_link import link_for
    from rog_ros.sim.simulator import trace_offsets
    path = str(_three_robots_bag(tmp_path / 'run.mcap'))
    one, fast, emulated = (f'{tmp_path}/{name}.csv' for name in ('one', 'fast', 'emulated'))
    assert cli_trace.main(['convert', f'{path}#netmon_1', '--out', one]) == 0
    assert cli_trace.main(['convert', one, '--out', fast, '--scale', '2']) == 0
    assert cli_trace.main(['convert', f'{path}#netmon_1#emulated', '--out', emulated]) == 0
    for first, second in ((f'{path}#netmon_1', f'{path}#netmon_1#emulated'), (one, fast),
                          (one, emulated), (f'{path}#netmon_1#emulated', fast)):
        assert _leaders(f'{first},{second}', 2) == [0, 1]
        assert _leaders(f'{first},{second},{path}#0', 3) == [0, 1, 0]
        assert _leaders(f'{path}#0,{first},{second}', 3) == [0, 0, 2]
    spec = f'{path}#netmon_1,{path}#netmon_1#emulated,{path}#0'
    for seed in (0, 1):
        offsets = trace_offsets(spec, 3, seed)
        assert offsets[0] == offsets[2] != offsets[1]
    nodes = [link_for(spec, r, 3).offset_s for r in range(3)]
    assert nodes[0] == nodes[2] != nodes[1]
    capsys.readouterr()


def test_the_simulator_reads_a_bag_once_a_call_not_once_per_robot_and_link(
        tmp_path, capsys, monkeypatch):
    # make_traces read a bag of 3 robots 6 times a call (each robot's entry resolved from the
    # bag's bytes, then each robot's link): seconds a run for a bag of gigabytes
    from rog_ros.sim.simulator import make_traces, trace_offsets
    path = str(_large_bag(tmp_path / 'all.mcap', 3, megabytes=4))
    _an_hour_later(monkeypatch)         # (a bag written just now is hashed at each call)
    want = make_traces(path, 3, 1)
    read = [0]
    monkeypatch.setattr(ros_bag, 'open', lambda *a, **kw: _Counted(open(*a, **kw), read),
                        raising=False)
    size = os.path.getsize(path)
    for call in (lambda: make_traces(path, 3, 1), lambda: trace_offsets(path, 3, 1)):
        read[0] = 0
        got = call()
        assert read[0] < 1.1 * size, read[0] / size
    _same(make_traces(path, 3, 1), want)
    assert got == [offset for _, offset in want]
    capsys.readouterr()


@pytest.mark.parametrize('call', ['make_traces', 'trace_offsets', 'trace_digest'])
def test_the_simulator_does_not_hold_a_bag_in_memory(tmp_path, capsys, call):
    # make_traces, trace_offsets and rog compare's trace_digest read a bag's whole bytes for
    # its key on every call (gigabytes for a ros2 bag record -a bag); it is hashed and parsed
    # in blocks now, to the same digest and links
    import tracemalloc
    from rog_ros.sim import simulator
    path = str(_large_bag(tmp_path / 'all.mcap', 3, megabytes=16))
    size = os.path.getsize(path)
    run = {'make_traces': lambda: simulator.make_traces(path, 3, 1),
           'trace_offsets': lambda: simulator.trace_offsets(path, 3, 1),
           'trace_digest': lambda: simulator.trace_digest(path)}[call]
    tracemalloc.start()
    try:
        got = run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < size / 3, peak / size       # (an MCAP chunk, a block hashed)
    data = ros_bag.file_bytes(path)
    assert ros_bag.file_digest(path) == ros_bag.data_digest(data)
    if call == 'trace_digest':      # (the digest of today's files: of the bag's bytes)
        import hashlib
        assert got == hashlib.sha256(hashlib.sha256(data).digest()).hexdigest()[:12]
    elif call == 'trace_offsets':
        assert got == [offset for _, offset in simulator.make_traces(path, 3, 1)]
    else:       # (the links of the bag's bytes, as they were read)
        for r, (trace, _) in enumerate(got):
            want = traces.load_entry(f'{path}#netmon_{r}', loop=True, data=data)
            assert (trace.t_s.tolist(), trace.mbps.tolist(), trace.end_s) == (
                want.t_s.tolist(), want.mbps.tolist(), want.end_s)
    capsys.readouterr()


def test_a_bag_rewritten_while_the_simulator_parses_it_is_not_kept_under_its_old_hash(
        tmp_path, capsys, monkeypatch):
    # a bag is hashed, then parsed from its file: one rewritten in between must not leave its
    # new links cached under the old bytes' hash (the old bytes back under the name replayed
    # the new links)
    from rog_ros.sim import simulator
    path = tmp_path / 'run.mcap'
    old = _three_robots_bag(tmp_path / 'old.mcap').read_bytes()
    new = _large_bag(tmp_path / 'new.mcap', 3, megabytes=0).read_bytes()
    want = {data: simulator.make_traces(str(_write_bytes(tmp_path / f'{k}.mcap', data)), 3, 1)
            for k, data in enumerate((old, new))}
    _write_bytes(path, old)
    hashed = ros_bag.file_digest

    def rewritten(name):
        """Hash the bag, then rewrite it with the other bag's bytes (a recorder writing)."""
        digest = hashed(name)
        monkeypatch.setattr(ros_bag, 'file_digest', hashed)
        _write_bytes(path, new)
        return digest

    monkeypatch.setattr(ros_bag, 'file_digest', rewritten)
    _same(simulator.make_traces(str(path), 3, 1), want[new])
    _write_bytes(path, old)
    _same(simulator.make_traces(str(path), 3, 1), want[old])
    capsys.readouterr()


def test_one_bag_named_by_two_paths_is_parsed_once(tmp_path, monkeypatch):
    # the parse cache was keyed by the path and the bytes: a bag named through a link (or a
    # copy) was parsed again, seconds for an hour of a fleet's LinkStats
    path = _three_robots_bag(tmp_path / 'run.mcap')
    os.symlink(path, tmp_path / 'link.mcap')
    _cold_caches(monkeypatch)
    parse, parsed = ros_bag._parse, []
    monkeypatch.setattr(ros_bag, '_parse', lambda *a: parsed.append(a[0]) or parse(*a))
    named = ros_bag.robots(str(path))
    assert ros_bag.robots(str(tmp_path / 'link.mcap')) == named
    assert ros_bag.robots(str(path), data=path.read_bytes()) == named
    assert parsed == [str(path)]


def _cold_caches(monkeypatch):
    """Give ``ros_bag`` empty caches of parsed bags (another test's of the same bytes)."""
    monkeypatch.setattr(ros_bag, '_CACHE', type(ros_bag._CACHE)())
    monkeypatch.setattr(ros_bag, '_CLOCKS', {})


def test_a_bag_rewritten_while_it_is_parsed_is_not_kept_under_its_old_hash(
        tmp_path, monkeypatch):
    # a bag read by path is hashed, then parsed from its file: one rewritten in between kept
    # its new robots under the old bytes' hash (the old bytes back under the name: the new
    # robots)
    path = tmp_path / 'run.mcap'
    old = _three_robots_bag(tmp_path / 'old.mcap').read_bytes()
    new = _large_bag(tmp_path / 'new.mcap', 2, megabytes=0).read_bytes()
    _write_bytes(path, old)
    _cold_caches(monkeypatch)
    hashed = ros_bag._file_digest

    def rewritten(*args):
        """Hash the bag, then rewrite it with the other bag's bytes (a recorder writing)."""
        digest = hashed(*args)
        monkeypatch.setattr(ros_bag, '_file_digest', hashed)
        _write_bytes(path, new)
        return digest

    monkeypatch.setattr(ros_bag, '_file_digest', rewritten)
    assert [name for name, _ in ros_bag.robots(str(path))] == ['netmon_0', 'netmon_1']
    _write_bytes(path, old)
    assert [name for name, _ in ros_bag.robots(str(path))] == [
        'netmon_0', 'netmon_1', 'netmon_2']


def test_a_sqlite_bag_checkpointed_between_its_file_and_its_wal_is_read_again(
        tmp_path, monkeypatch):
    # file_bytes read the bag file, then its -wal: a checkpoint in between (the recorder's
    # SQLite moves the -wal's messages into the file and empties the -wal) gave the file
    # before and the -wal after, a bag without those messages
    bag = tmp_path / 'live.db3'
    con = _live_db3(bag, 2, 20)
    try:
        checkpointed = []

        def opening(name, *args, **kw):
            """Open ``name``; before the first -wal, checkpoint the bag (as a recorder may)."""
            if str(name).endswith('-wal') and not checkpointed:
                checkpointed.append(con.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchone())
            return open(name, *args, **kw)

        monkeypatch.setattr(ros_bag, 'open', opening, raising=False)
        data = ros_bag.file_bytes(str(bag))
        assert checkpointed == [(0, 0, 0)] and os.path.getsize(f'{bag}-wal') == 0
        monkeypatch.undo()
        assert [len(ros_bag.read_bag(str(bag), node=r, data=data)[0]) for r in range(2)] == [
            19, 19]
    finally:
        con.close()


def test_a_bag_removed_while_the_simulator_parsed_it_is_said_to_be_missing(
        tmp_path, monkeypatch):
    # the check that a bag parsed from its file is still the bag hashed said of a removed bag
    # that it is no ROS 2 bag (MCAP or SQLite)
    from rog_ros.sim import simulator
    path = _three_robots_bag(tmp_path / 'run.mcap')
    with pytest.raises(ros_bag.BagError, match='not a ROS 2 bag'):
        ros_bag.file_digest(str(_write_bytes(tmp_path / 'link.csv', b't,mbps\n0,1\n')))
    load = traces.load_entry

    def removed(*args, **kw):
        """Parse the bag, then remove it."""
        trace = load(*args, **kw)
        if path.exists():
            path.unlink()
        return trace

    monkeypatch.setattr(traces, 'load_entry', removed)
    with pytest.raises(FileNotFoundError, match=f'no such file: {path}'):
        simulator.trace_file(f'{path}#netmon_1')


def test_a_sqlite_bags_wal_is_hashed_without_a_copy_of_it(tmp_path):
    # data_digest joined b'\0-wal\0' and the -wal's bytes: a copy of a -wal of megabytes (a
    # recorder killed before a checkpoint), for the same digest
    import hashlib
    import tracemalloc
    data, wal = ros_bag.SQLITE_MAGIC + bytes(100), os.urandom(8 << 20)
    tracemalloc.start()
    try:
        digest = ros_bag.data_digest(data, wal)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(wal) / 4, peak / len(wal)
    assert digest == hashlib.sha256(data + b'\0-wal\0' + wal).digest()


def test_a_bag_with_row_versions_in_parts_reads_its_linkstats(tmp_path):
    # RowVersions past 2 MiB go in parts of schema version 4 (whole copies stay 3): a bag
    # of the fleet's topics holds them, and only its LinkStats are read (by their own
    # schema version), so the parts neither refuse the bag nor count as bad LinkStats
    bag = pytest.importorskip('rog_ros.transport.bag')
    pytest.importorskip('mcap.writer')
    path = tmp_path / 'fleet.mcap'
    recorder = bag.McapRecorder(str(path))
    for k, msg in enumerate(_messages(0, [0.0, 10, 20])):
        recorder.write(TOPIC, msg, stamp_ns=msg.stamp.sec * 10 ** 9 + msg.stamp.nanosec)
        part = RowVersions(transfer_id=3, receiver=0, n_workers=2, part=k, parts=3,
                           schema_version=4, run_starts=np.array([k], np.uint32),
                           run_lengths=np.ones(1, np.uint32),
                           versions=np.array([1, 2], np.int32))
        recorder.write('/rog/w0/versions', part, stamp_ns=START_NS + k * 10 ** 8 + 1)
    recorder.close()
    cut = []
    held = [(topic, type_name, data[4:6]) for topic, type_name, data
            in ros_bag._mcap_messages(str(path), cut) if topic.endswith('versions')]
    assert held == [('/rog/w0/versions', 'rog_ros/msg/RowVersions', b'\x04\x00')] * 3
    assert traces.load_trace(path).mbps.tolist() == [10.0, 20.0]
