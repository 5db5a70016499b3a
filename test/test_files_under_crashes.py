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
"""Files on disk under crashes: no temporary file a killed write left stays, renames synced."""

import os
import signal
import stat
import subprocess
import sys

import pytest
from rog_ros.nodes import run_outputs, state_dir
from rog_ros.nodes.model_file import save_state_dict
from test_output_lock import _WRITER
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# _WRITER (test_output_lock): writes half a file, says so, waits for a line or a SIGKILL


def _start(script: str, *args: str) -> subprocess.Popen:
    """Start ``script`` and wait until it says it is halfway (its first line)."""
    proc = subprocess.Popen([sys.executable, '-c', script] + list(args), cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() in ('writing', 'copying')
    return proc


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc`` and reap it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    proc.stdout.close()
    proc.stdin.close()


def _temporaries(folder, name: str) -> list:
    """Return the names of the atomic writes' temporary files of ``name`` in ``folder``."""
    return sorted(n for n in os.listdir(str(folder))
                  if n.startswith('.tmp-rog-') and n.endswith(name))


def test_a_state_dir_check_removes_a_killed_journal_write_but_not_a_live_save(tmp_path):
    # Arrange: a server killed while it emptied its journal at a checkpoint (a node removes
    # its own state file's temporaries, nothing removed the journal's), a live save of a
    # worker's state going on now, and a user's file of a like name
    state = tmp_path / 'state'
    state.mkdir()
    (state / '.tmp-notes.txt').write_text('a user file')
    (state / '.tmp-rog-notes.txt').write_text('a user file too')     # (no random part)
    for round_ in range(3):          # (a crash loop: one more each time)
        _kill(_start(_WRITER, str(state / 'server.journal')))
    assert len(_temporaries(state, 'server.journal')) == 3
    live = _start(_WRITER, str(state / 'worker_0.pt'))
    try:
        writing = _temporaries(state, 'worker_0.pt')
        assert len(writing) == 1
        # Act: the next fleet checks its --state-dir
        assert state_dir.check_state_dir('--state-dir', str(state)) == str(state)
        # Assert: the dead writes' files gone; the live one's, and the user's, kept
        assert sorted(os.listdir(str(state))) == sorted(
            ['.tmp-notes.txt', '.tmp-rog-notes.txt'] + writing)
        live.stdin.write('go on\n')
        live.stdin.flush()
        assert live.wait(30) == 0
    finally:
        _kill(live)
    assert (state / 'worker_0.pt').stat().st_size == 2 * 65536
    assert sorted(os.listdir(str(state))) == ['.tmp-notes.txt', '.tmp-rog-notes.txt',
                                              'worker_0.pt']


def test_a_model_save_removes_what_a_save_killed_midway_left_beside_it(tmp_path):
    # Arrange: a worker robot killed while it saved its --model-out (no output folder lock
    # cleans that folder), and another file's temporary of a live write beside it
    folder = tmp_path / 'robot'
    folder.mkdir()
    _kill(_start(_WRITER, str(folder / 'rog_robot_model.pt')))
    live = _start(_WRITER, str(folder / 'rog_robot_model.pt'))
    other = None
    try:
        other = _start(_WRITER, str(folder / 'notes.bin'))
        _kill(other)
        assert len(_temporaries(folder, 'rog_robot_model.pt')) == 2
        # Act
        size = save_state_dict(str(folder / 'rog_robot_model.pt'), torch.nn.Linear(3, 2))
        # Assert: the killed save's file gone; the live one's kept; another name's kept
        left = _temporaries(folder, 'rog_robot_model.pt')
        assert len(left) == 1
        assert len(_temporaries(folder, 'notes.bin')) == 1
        assert (folder / 'rog_robot_model.pt').stat().st_size == size
    finally:
        _kill(live)


_CROSS_DEVICE_MOVE = (
    'import errno, os, shutil, sys\n'
    'shutil._USE_CP_SENDFILE = False\n'       # (the copy goes through copyfileobj)
    'model, logs = sys.argv[1], sys.argv[2]\n'
    'real_replace = os.replace\n'
    'def replace(src, dst, **kw):\n'
    '    """Refuse to rename the model: --model-out on another file system than --logs."""\n'
    '    if os.path.abspath(src) == os.path.abspath(model):\n'
    '        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), src, None, dst)\n'
    '    return real_replace(src, dst, **kw)\n'
    'os.replace = replace\n'
    'def copyfileobj(fsrc, fdst, length=0):\n'
    '    """Copy half, say so, then wait for a SIGKILL."""\n'
    '    fdst.write(fsrc.read(65536))\n'
    '    fdst.flush()\n'
    '    print("copying", flush=True)\n'
    '    sys.stdin.readline()\n'
    'shutil.copyfileobj = copyfileobj\n'
    'from rog_ros.nodes.run_outputs import set_aside_node_logs\n'
    "set_aside_node_logs(logs, ['rog_worker_0'], model, 'rog_worker_0.model.pt')\n")


def test_a_model_moved_across_file_systems_when_killed_leaves_no_half_model_aside(tmp_path):
    # Arrange: a worker robot's earlier model on another file system than its --logs; a
    # rerun killed while it moved it to LOGS/previous (shutil.move copied straight into
    # previous/rog_worker_0.model.pt: half a model there, taken for the last good one)
    logs, models = tmp_path / 'logs', tmp_path / 'models'
    logs.mkdir()
    models.mkdir()
    model = models / 'rog_robot_model.pt'
    whole = bytes(range(256)) * 1024
    model.write_bytes(whole)
    (logs / 'rog_worker_0.log').write_text('earlier run\n')
    # Act
    _kill(_start(_CROSS_DEVICE_MOVE, str(model), str(logs)))
    # Assert: the model still whole where it was; no model of that name aside, only a
    # temporary file, which the next move removes
    previous = logs / run_outputs.PREVIOUS
    assert model.read_bytes() == whole
    assert not (previous / 'rog_worker_0.model.pt').exists()
    assert len(_temporaries(previous, 'rog_worker_0.model.pt')) == 1
    moved = run_outputs.set_aside_node_logs(str(logs), ['rog_worker_0'], str(model),
                                            'rog_worker_0.model.pt')
    assert moved == [str(model)]
    assert (previous / 'rog_worker_0.model.pt').read_bytes() == whole
    assert sorted(os.listdir(str(previous))) == ['rog_worker_0.log', 'rog_worker_0.model.pt']


def test_a_kept_model_is_copied_whole_and_an_earlier_part_file_goes(tmp_path):
    # A model the run starts from is copied aside; the copy2 to NAME.part a kill left stays
    # no more, and the copy is the model's bytes, not half of them
    logs = tmp_path / 'logs'
    previous = logs / run_outputs.PREVIOUS
    previous.mkdir(parents=True)
    (previous / 'rog_worker_0.model.pt.part').write_bytes(b'half')
    model = tmp_path / 'rog_robot_model.pt'
    model.write_bytes(b'm' * 100000)
    moved = run_outputs.set_aside_node_logs(str(logs), ['rog_worker_0'], str(model),
                                            'rog_worker_0.model.pt', keep_model=True)
    assert moved == [str(model)] and model.read_bytes() == b'm' * 100000
    assert os.listdir(str(previous)) == ['rog_worker_0.model.pt']
    assert (previous / 'rog_worker_0.model.pt').read_bytes() == b'm' * 100000
    assert os.path.getmtime(str(previous / 'rog_worker_0.model.pt')) == os.path.getmtime(
        str(model))


@pytest.mark.parametrize('with_logs', [False, True])
def test_setting_an_earlier_run_aside_syncs_the_folders_of_its_renames(
        tmp_path, monkeypatch, with_logs):
    # A rename is durable once its folders are synced (ext4, power cut): set_aside renamed
    # the earlier run's results and logs into previous/ and synced no folder
    synced = []
    monkeypatch.setattr(run_outputs, 'fsync_dir', lambda folder: synced.append(str(folder)))
    out, logs = tmp_path / 'out', tmp_path / 'out' / 'logs'
    logs.mkdir(parents=True)
    (out / 'summary.json').write_text('{}')
    (logs / 'rog_server.log').write_text('earlier\n')
    moved = run_outputs.set_aside_earlier_results(str(out), str(logs) if with_logs else None)
    previous = out / run_outputs.PREVIOUS
    assert moved == ['summary.json'] + (['logs/rog_server.log'] if with_logs else [])
    want = [str(previous), str(out)] + ([str(previous / 'logs'), str(logs)] if with_logs
                                        else [])
    assert synced == want


def test_setting_a_worker_s_logs_aside_syncs_the_folders_of_its_renames(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(run_outputs, 'fsync_dir', lambda folder: synced.append(str(folder)))
    logs, models = tmp_path / 'logs', tmp_path / 'models'
    logs.mkdir()
    models.mkdir()
    (logs / 'rog_worker_0.log').write_text('earlier\n')
    (models / 'rog_robot_model.pt').write_bytes(b'm')
    run_outputs.set_aside_node_logs(str(logs), ['rog_worker_0'],
                                    str(models / 'rog_robot_model.pt'), 'rog_worker_0.model.pt')
    previous = str(logs / run_outputs.PREVIOUS)
    assert synced == [previous, str(logs), previous, str(models)]


_WRITER_WITHOUT_FLOCK = ('import errno, fcntl, os\n'
                         'def flock(fd, op):\n'
                         '    raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))\n'
                         'fcntl.flock = flock\n' + _WRITER)


def _no_flock(fd, operation):
    """Fail as ``flock`` does on NFS without a lock manager."""
    import errno
    raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))


def test_without_flock_a_killed_write_s_temporary_is_told_by_its_pid_and_removed(
        tmp_path, monkeypatch):
    # Arrange: a file system without flock (the temporary files were unlockable, so no
    # cleaner could tell a killed write's from a live one's, and kept them all for ever):
    # three saves of worker_0.pt killed in a crash loop, one going on now
    import fcntl
    from rog_ros import atomic
    for round_ in range(3):
        _kill(_start(_WRITER_WITHOUT_FLOCK, str(tmp_path / 'worker_0.pt')))
    left = _temporaries(tmp_path, 'worker_0.pt')
    assert len(left) == 3 and all(n.startswith(atomic.PID_TEMP_PREFIX) for n in left)
    live = _start(_WRITER_WITHOUT_FLOCK, str(tmp_path / 'worker_0.pt'))
    try:
        writing = sorted(set(_temporaries(tmp_path, 'worker_0.pt')) - set(left))
        assert len(writing) == 1 and writing[0].startswith(
            f'{atomic.PID_TEMP_PREFIX}{live.pid}-')
        (tmp_path / f'{atomic.PID_TEMP_PREFIX}1-00000000-abcdefghworker_0.pt').write_text(
            'another host')                               # (its pid says nothing here)
        monkeypatch.setattr(fcntl, 'flock', _no_flock)
        # Act
        removed = atomic.remove_write_leftovers(str(tmp_path), 'worker_0.pt')
        # Assert: the killed ones gone, the live one and another host's kept
        assert removed == 3
        assert sorted(os.listdir(str(tmp_path))) == sorted(
            writing + [f'{atomic.PID_TEMP_PREFIX}1-00000000-abcdefghworker_0.pt'])
        live.stdin.write('go on\n')
        live.stdin.flush()
        assert live.wait(30) == 0
    finally:
        _kill(live)
    assert (tmp_path / 'worker_0.pt').stat().st_size == 2 * 65536
    # ... and a write here, without flock, leaves nothing beside its file
    atomic.atomic_write_bytes(str(tmp_path / 'summary.json'), b'{}')
    assert sorted(os.listdir(str(tmp_path))) == sorted(
        ['summary.json', 'worker_0.pt', f'{atomic.PID_TEMP_PREFIX}1-00000000-abcdefghworker_0.pt'])


def test_without_flock_a_temporary_of_another_pid_namespace_of_this_host_is_kept(
        tmp_path, monkeypatch):
    # A writer in another container with the host's network (the host's name, its own pids):
    # its pid names no process here, and its live write's temporary file was removed
    from rog_ros import atomic
    proc = subprocess.Popen([sys.executable, '-c', 'pass'])
    proc.wait(30)
    real = os.readlink

    def other_space(path, *args, **kwargs):
        """Read the pid namespace as another container's."""
        return 'pid:[1]' if path == '/proc/self/ns/pid' else real(path, *args, **kwargs)
    monkeypatch.setattr(os, 'readlink', other_space)
    theirs = f'{atomic.PID_TEMP_PREFIX}{proc.pid}-{atomic._host_tag()}-abcdefghworker_0.pt'
    monkeypatch.setattr(os, 'readlink', real)
    ours = f'{atomic.PID_TEMP_PREFIX}{proc.pid}-{atomic._host_tag()}-abcdefghworker_0.pt'
    assert theirs != ours
    for name in (theirs, ours):
        (tmp_path / name).write_bytes(b'x' * 100)
    assert atomic.remove_write_leftovers(tmp_path, 'worker_0.pt') == 1
    assert os.listdir(str(tmp_path)) == [theirs]


_CACHE_WRITER = ('import sys\n'
                 'import torch\n'
                 'def save(obj, f):\n'
                 '    """Write half an entry, say so, then wait for a line (or a SIGKILL)."""\n'
                 '    f.write(b"x" * 65536)\n'
                 '    f.flush()\n'
                 '    print("writing", flush=True)\n'
                 '    sys.stdin.readline()\n'
                 '    f.write(b"y" * 65536)\n'
                 'torch.save = save\n'
                 'from rog_ros.workloads import cache\n'
                 'cache.atomic_save({}, sys.argv[1])\n')


def test_the_workload_cache_removes_what_a_killed_build_left_but_not_a_live_one_s(
        tmp_path, monkeypatch):
    # Arrange: a cache shared by processes: one killed while it saved an entry (its
    # temporary, as large as the entry, stayed for ever), another saving an entry now, and
    # a temporary of the entry built now that a version before this one left
    from rog_ros.workloads import cache
    folder = tmp_path / 'cache'
    folder.mkdir()
    monkeypatch.setenv(cache.CACHE_ENV, str(folder))
    entry = f'toy-{cache.cache_key("toy", {}, "1")}.pt'
    other = f'toy-{cache.cache_key("toy", {"n": 2}, "1")}.pt'
    _kill(_start(_CACHE_WRITER, str(folder / entry)))
    killed = sorted(os.listdir(str(folder)))
    assert len(killed) == 1
    (folder / f'.{entry}.abcd_123.tmp').write_bytes(b'half')      # (an earlier version's)
    (folder / f'.{other}.abcd_123.tmp').write_bytes(b'half')      # (another entry's: kept)
    live = _start(_CACHE_WRITER, str(folder / other))
    try:
        writing = sorted(set(os.listdir(str(folder))) - set(killed)
                         - {f'.{entry}.abcd_123.tmp', f'.{other}.abcd_123.tmp'})
        assert len(writing) == 1
        # Act: the next use of the cache builds the entry
        got = cache.load_or_build('toy', {}, '1', build=lambda: {'v': 7})
        # Assert: built and saved; the killed write's file and the old temporary of this
        # entry gone; the live write's, and the other entry's old one, kept
        assert got == {'v': 7}
        assert sorted(os.listdir(str(folder))) == sorted(
            [entry, f'.{entry}.lock', f'.{other}.abcd_123.tmp'] + writing)
        assert stat.S_IMODE((folder / entry).stat().st_mode) == 0o644
        live.stdin.write('go on\n')
        live.stdin.flush()
        assert live.wait(30) == 0
    finally:
        _kill(live)
    assert (folder / other).stat().st_size == 2 * 65536
    assert cache.load_or_build('toy', {}, '1', build=lambda: {'v': 8}) == {'v': 7}


_COPY_KILLED = ('import shutil, sys\n'
                'shutil._USE_CP_SENDFILE = False\n'       # (the copy goes through copyfileobj)
                'def copyfileobj(fsrc, fdst, length=0):\n'
                '    """Copy a little, say so, then wait for a SIGKILL."""\n'
                '    fdst.write(fsrc.read(100))\n'
                '    fdst.flush()\n'
                '    print("copying", flush=True)\n'
                '    sys.stdin.readline()\n'
                'shutil.copyfileobj = copyfileobj\n'
                'from rog_ros.experiments import compare\n'
                'compare._copy_run(sys.argv[1], sys.argv[2])\n')


def test_a_comparison_removes_what_killed_writes_and_copies_left_but_not_a_live_write(
        tmp_path, monkeypatch):
    # Arrange: a finished toy comparison; then, killed while they wrote, a report write in
    # its folder and a run file's write in its run's folder (a reproduction killed: its
    # comparisons' folders are never an output folder a lock cleans), a live write beside,
    # and a copy of its run into another comparison killed midway
    from rog_ros.experiments.compare import compare
    from rog_ros.experiments.comparison_folder import run_dir
    monkeypatch.setenv('ROG_CACHE_DIR', os.environ.get('ROG_CACHE_DIR', str(tmp_path / 'c')))
    toy = {'iterations': 3, 'jobs_parallel': 1, 'sim_options': {'evaluations': 2}}
    a, b = str(tmp_path / 'a'), str(tmp_path / 'b')
    compare('toy', 'clean', ['rog:4'], 2, [0], a, quiet=True, **toy)
    run = run_dir(a, 'rog:4', 0)
    finished = sorted(os.listdir(a)), sorted(os.listdir(run))
    _kill(_start(_WRITER, os.path.join(a, 'report.md')))
    _kill(_start(_WRITER, os.path.join(run, 'timeseries.csv')))
    os.makedirs(run_dir(b, 'rog:4', 0))
    _kill(_start(_COPY_KILLED, run, run_dir(b, 'rog:4', 0)))
    # the copy's leftover is a locked temporary of an atomic write, not a '.NAME.part', and
    # of a run file: the killed write's temporary in the run copied was not copied
    copied = os.listdir(run_dir(b, 'rog:4', 0))
    assert len(copied) == 1 and copied[0].startswith('.tmp-rog-'), copied
    assert copied[0].count('.tmp-') == 1 and copied[0][17:] in finished[1], copied
    part = os.path.join(run, '.events.csv.part')     # (a copy's before 2026-12-07)
    with open(part, 'wb') as fh:
        fh.write(b'half')
    os.utime(part, (1, 1))
    live = _start(_WRITER, os.path.join(a, 'notes.bin'))
    try:
        writing = _temporaries(a, 'notes.bin')
        assert len(writing) == 1
        # Act: the comparison again (its run reused), and the other one (its run copied)
        compare('toy', 'clean', ['rog:4'], 2, [0], a, quiet=True, **toy)
        compare('toy', 'clean', ['rog:4'], 2, [0], b, quiet=True, reuse_from=[a], **toy)
        # Assert: the killed writes' files gone, the live one's kept; the copy whole
        assert sorted(os.listdir(a)) == sorted(finished[0] + writing)
        assert sorted(os.listdir(run)) == finished[1]
        assert sorted(os.listdir(run_dir(b, 'rog:4', 0))) == finished[1]
    finally:
        _kill(live)
