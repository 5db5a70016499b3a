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
"""A recording survives its recorder: small chunks, flushed as it goes; clear open errors."""

import os
from pathlib import Path
import subprocess
import sys

import pytest
from rog_ros.protocol import messages as m

mcap_errors = pytest.importorskip('mcap.exceptions')
mcap_reader = pytest.importorskip('mcap.reader')
bag = pytest.importorskip('rog_ros.transport.bag')

ROOT = Path(__file__).resolve().parent.parent
TOPIC = '/rog/status/rog_worker_0/train_status'

RECORDER = """
import sys, time
from rog_ros.protocol import messages as m
from rog_ros.transport.bag import McapRecorder
path, n, pause, flush_every_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rec = McapRecorder(path, flush_every_s=float(flush_every_s)) if flush_every_s else \\
    McapRecorder(path)
for i in range(n):
    rec.write('%s', m.TrainStatus(node=0, stamp=i * 0.1, iteration=i, loss=0.5,
                                  state='active'), stamp_ns=10 ** 9 + i * 10 ** 8)
    time.sleep(pause)
print('written', flush=True)
time.sleep(60)                                     # killed here, never closed
""" % TOPIC


def _status(i: int):
    """Return the i-th TrainStatus a test records."""
    return m.TrainStatus(node=0, stamp=i * 0.1, iteration=i, loss=0.5, state='active')


def _readable_prefix(path) -> list:
    """Return the iterations an MCAP reader gets from an unfinished file, in streaming mode."""
    got = []
    with open(path, 'rb') as fh:
        reader = mcap_reader.NonSeekingReader(fh)
        try:
            for _, channel, message in reader.iter_messages(log_time_order=False):
                assert channel.topic == TOPIC
                got.append((message.log_time - 10 ** 9) // 10 ** 8)
        except mcap_errors.McapError:
            pass                                   # the cut: an incomplete chunk, no footer
    return got


def _record_and_kill(tmp_path, n: int, pause_s: float, flush_every_s: str) -> list:
    """Record ``n`` statuses in a subprocess, SIGKILL it; return what a reader gets."""
    path = tmp_path / 'killed.mcap'
    proc = subprocess.Popen([sys.executable, '-c', RECORDER, str(path), str(n), str(pause_s),
                             flush_every_s], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout.readline() == 'written\n'
    finally:
        proc.kill()                                # the OOM killer, a power cut
        proc.wait(timeout=20)
        proc.stdout.close()
    return _readable_prefix(path)


def test_a_killed_recorder_leaves_its_chunks_readable(tmp_path):
    # the mcap library's default chunk (1 MiB) was never reached: 0 bytes on disk
    got = _record_and_kill(tmp_path, 1500, 0.0, '')
    assert len(got) >= 1200 and got == list(range(len(got)))
    assert bag.CHUNK_BYTES <= 64 * 1024


def test_a_slow_recording_is_flushed_every_few_seconds(tmp_path):
    # 10 Hz LinkStats filled no chunk in an hour: a killed recorder lost the whole hour
    got = _record_and_kill(tmp_path, 12, 0.1, '0.3')
    assert 9 <= len(got) <= 12 and got == list(range(len(got)))
    assert 1.0 <= bag.FLUSH_EVERY_S <= 10.0


def test_the_flush_follows_the_recorders_clock(tmp_path):
    path = tmp_path / 'slow.mcap'
    now = [0.0]
    rec = bag.McapRecorder(str(path), clock=lambda: now[0])
    for i in range(3):
        rec.write(TOPIC, _status(i), stamp_ns=10 ** 9 + i * 10 ** 8)
        now[0] += bag.FLUSH_EVERY_S / 2
    assert _readable_prefix(path) == [0, 1, 2]     # flushed at the third, FLUSH_EVERY_S on
    rec.write(TOPIC, _status(3), stamp_ns=10 ** 9 + 3 * 10 ** 8)
    assert _readable_prefix(path) == [0, 1, 2]     # buffered until the next flush
    rec.flush()
    assert _readable_prefix(path) == [0, 1, 2, 3]
    rec.close()
    rec.close()                                    # idempotent
    with open(path, 'rb') as fh:                   # closed: a complete file, summary and all
        reader = mcap_reader.make_reader(fh)
        assert reader.get_summary().statistics.message_count == 4
        assert [msg.sequence for _, _, msg in reader.iter_messages()] == [1, 2, 3, 4]
    rec.write(TOPIC, _status(4))                   # after close: dropped, no error
    assert rec.counts == {TOPIC: 4}


def test_a_recording_that_cannot_be_opened_says_so_in_one_line(tmp_path):
    # it was a FileNotFoundError traceback from open() in every node
    target = tmp_path / 'nowhere' / 'x.mcap'
    with pytest.raises(bag.RecordError) as err:
        bag.McapRecorder(str(target))
    assert str(err.value) == f'cannot write the recording {target}: No such file or directory'
    assert isinstance(err.value, OSError) and isinstance(err.value, ValueError)
    assert not os.path.exists(target)


def _rosbags_reads_bare_mcap_files() -> bool:
    """Tell whether this rosbags opens a lone ``.mcap`` file (0.11 on; 0.9.23 is Python 3.8's)."""
    from importlib.metadata import version
    major, minor = (int(p) for p in version('rosbags').split('.')[:2])
    return (major, minor) >= (0, 11)


def test_a_bag_of_many_flushed_chunks_is_a_ros2_bag(tmp_path):
    highlevel = pytest.importorskip('rosbags.highlevel')
    if not _rosbags_reads_bare_mcap_files():
        pytest.skip('rosbags before 0.11 (Python 3.8 gets 0.9.23) opens only bag folders')
    path = tmp_path / 'chunks.mcap'
    now = [0.0]
    rec = bag.McapRecorder(str(path), clock=lambda: now[0])
    for i in range(20):                            # one chunk every other message
        rec.write(TOPIC, _status(i), stamp_ns=10 ** 9 + i * 10 ** 8)
        now[0] += bag.FLUSH_EVERY_S / 2
    rec.close()
    with open(path, 'rb') as fh:
        assert mcap_reader.make_reader(fh).get_summary().statistics.chunk_count == 10
    with highlevel.AnyReader([path]) as reader:
        got = [(c.topic, c.msgtype, reader.deserialize(raw, c.msgtype).iteration)
               for c, _, raw in reader.messages()]
    assert got == [(TOPIC, 'rog_ros/msg/TrainStatus', i) for i in range(20)]
