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
``rog fleet --record FILE`` keeps an earlier recording at FILE under a numbered name.

It truncated FILE: resuming a fleet with the same command (``--state-dir``) lost the
recording of the run before. Refusing would break that command; the earlier file is moved
aside and one line says where.
"""

import argparse
import os

import pytest
from rog_ros.nodes import fleet

pytest.importorskip('mcap.writer')


def _record(path) -> object:
    """Open ``rog fleet``'s recorder of ``--record path`` and close it again."""
    recorder = fleet._recorder(argparse.Namespace(record=str(path), netns=False))
    if recorder:
        recorder.close()
    return recorder


def test_an_earlier_recording_is_moved_to_the_next_numbered_name(tmp_path, capsys):
    # Arrange
    path = tmp_path / 'run.mcap'
    path.write_bytes(b'first run')
    # Execute
    assert _record(path)
    first = capsys.readouterr().err
    path.write_bytes(b'second run')        # (the first rerun's own, as a test stands it)
    assert _record(path)
    second = capsys.readouterr().err
    # Assert: before, each run truncated run.mcap
    assert first == f'rog fleet: --record {path}: kept the earlier recording as ' \
                    f'{tmp_path / "run.1.mcap"}\n'
    assert second.endswith(f'kept the earlier recording as {tmp_path / "run.2.mcap"}\n')
    assert (tmp_path / 'run.1.mcap').read_bytes() == b'first run'
    assert (tmp_path / 'run.2.mcap').read_bytes() == b'second run'
    assert path.stat().st_size > 0         # this run's recording
    assert sorted(os.listdir(tmp_path)) == ['run.1.mcap', 'run.2.mcap', 'run.mcap']


@pytest.mark.parametrize('name, kept', [('bag', 'bag.1'), ('run.1.mcap', 'run.1.1.mcap')])
def test_a_name_without_extension_or_numbered_already_gets_one(name, kept, tmp_path,
                                                               capsys):
    (tmp_path / name).write_bytes(b'earlier')
    assert _record(tmp_path / name)
    assert capsys.readouterr().err.endswith(f'as {tmp_path / kept}\n')
    assert (tmp_path / kept).read_bytes() == b'earlier'


def test_an_empty_file_or_none_is_simply_written(tmp_path, capsys):
    (tmp_path / 'empty.mcap').write_bytes(b'')
    assert _record(tmp_path / 'empty.mcap') and _record(tmp_path / 'new.mcap')
    assert capsys.readouterr().err == ''
    assert sorted(os.listdir(tmp_path)) == ['empty.mcap', 'new.mcap']


def test_no_free_name_is_one_line_and_the_earlier_recording_stays(tmp_path, capsys,
                                                                  monkeypatch):
    # Arrange
    monkeypatch.setattr(fleet, 'MAX_KEPT_RECORDINGS', 2)
    for name in ('run.mcap', 'run.1.mcap', 'run.2.mcap'):
        (tmp_path / name).write_bytes(name.encode())
    # Execute
    assert _record(tmp_path / 'run.mcap') is False
    # Assert
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'Traceback' not in err
    assert err.startswith(f'rog fleet: --record {tmp_path / "run.mcap"}: the earlier '
                          f'recording there cannot be kept: {tmp_path / "run.1.mcap"} to ')
    assert (tmp_path / 'run.mcap').read_bytes() == b'run.mcap'


def test_a_record_file_that_is_a_link_keeps_recording_where_it_points(tmp_path, capsys):
    # Arrange: run.mcap links to a recording on another disk (as a user puts a big file)
    disk = tmp_path / 'disk'
    disk.mkdir()
    (disk / 'run.mcap').write_bytes(b'first run')
    link = tmp_path / 'run.mcap'
    link.symlink_to(disk / 'run.mcap')
    # Execute
    assert _record(link)
    # Assert: before, the link was moved to run.1.mcap and run.mcap became a plain file here
    assert link.is_symlink()
    assert (disk / 'run.1.mcap').read_bytes() == b'first run'
    assert (disk / 'run.mcap').stat().st_size > 0      # this run's recording, on that disk
    assert sorted(os.listdir(tmp_path)) == ['disk', 'run.mcap']
    assert str(disk / 'run.1.mcap') in capsys.readouterr().err


class _Bus:
    """Stand in for a node's bus: closed or not."""

    closed = False

    def close(self):
        """Note that the bus was closed."""
        self.closed = True


def test_a_nodes_record_keeps_an_earlier_recording_as_rog_fleet_does(
        tmp_path, capsys, monkeypatch):
    # Arrange: a node's (and rog robot's) --record run.mcap, run again
    from rog_ros.nodes import connect
    monkeypatch.setattr(connect, 'make_bus', lambda *args, **kwargs: _Bus())
    path = tmp_path / 'run.mcap'
    path.write_bytes(b'first run')
    # Execute
    bus = connect.open_bus('dds', '/rog', record=str(path))
    bus.recorder.close()
    # Assert: before, the node truncated run.mcap
    assert (tmp_path / 'run.1.mcap').read_bytes() == b'first run'
    assert path.stat().st_size > 0
    assert capsys.readouterr().err == (f'--record {path}: kept the earlier recording as '
                                       f'{tmp_path / "run.1.mcap"}\n')


def test_a_node_with_no_free_numbered_name_is_refused_in_one_line(tmp_path, monkeypatch):
    # Arrange
    from rog_ros import atomic
    from rog_ros.nodes import connect
    from rog_ros.transport.bus import RecordError
    inner = _Bus()
    monkeypatch.setattr(connect, 'make_bus', lambda *args, **kwargs: inner)
    real = atomic.keep_earlier_file
    monkeypatch.setattr(atomic, 'keep_earlier_file',
                        lambda path, most=2, what='file': real(path, 2, what))
    for name in ('run.mcap', 'run.1.mcap', 'run.2.mcap'):
        (tmp_path / name).write_bytes(name.encode())
    # Execute
    with pytest.raises(RecordError) as err:
        connect.open_bus('dds', '/rog', record=str(tmp_path / 'run.mcap'))
    # Assert
    assert str(err.value).startswith(f'--record {tmp_path / "run.mcap"}: the earlier recording '
                                     'there cannot be kept')
    assert inner.closed and (tmp_path / 'run.mcap').read_bytes() == b'run.mcap'


def test_an_earlier_recording_that_cannot_be_moved_is_refused_in_plain_words(
        tmp_path, capsys, monkeypatch):
    # Arrange: a prepared recording file, writable, in a folder that is not (as for a user)
    import errno

    def refused(*args, **kwargs):
        """Refuse a new name in the folder, as a read-only folder does."""
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(tmp_path))
    (tmp_path / 'run.mcap').write_bytes(b'earlier')
    monkeypatch.setattr(os, 'link', refused)
    # Execute
    assert _record(tmp_path / 'run.mcap') is False
    # Assert: kept as it was, and the line says why (was '[Errno 13] Permission denied: ...')
    err = capsys.readouterr().err
    assert err.count('\n') == 1, err
    assert err.startswith(f'rog fleet: --record {tmp_path / "run.mcap"}: the earlier recording '
                          f'there cannot be kept as {tmp_path / "run.1.mcap"} (Permission '
                          'denied); move it away or give another file')
    assert (tmp_path / 'run.mcap').read_bytes() == b'earlier'
