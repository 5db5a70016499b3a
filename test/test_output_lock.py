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
"""One run at a time in an output directory; a dead run's lock goes with it."""

import contextlib
import os
import signal
import subprocess
import sys

import pytest
from rog_ros import cli
from rog_ros.nodes.output_lock import LOCK_FILE, OutputInUse, OutputLock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _forbidden(*args, **kwargs):
    raise AssertionError('a second run into a held directory started something')


def test_a_second_fleet_into_a_held_directory_stops_before_writing_anything(
        tmp_path, capsys, monkeypatch):
    out = tmp_path / 'fleet'
    first = OutputLock.take(str(out), 'rog fleet')           # the run already going on
    (out / 'summary.json').write_text('{"completed": false}')
    (out / 'fleet.key').write_text('the first fleet key')
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(subprocess, 'Popen', _forbidden)     # no workload child, no node
    try:
        assert cli.main(['fleet', '--workload', 'toy', '--workers', '2', '--iterations', '5',
                         '--out', str(out)]) == 2
    finally:
        first.release()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f'rog fleet: {out} is in use by another run (rog fleet, pid '
                             f'{os.getpid()}, since ')
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before   # nothing moved or new


def test_a_second_server_robot_into_a_held_directory_starts_nothing(
        tmp_path, capsys, monkeypatch):
    out = tmp_path / 'server'
    first = OutputLock.take(str(out), 'rog robot --role server')
    monkeypatch.setattr(subprocess, 'Popen', _forbidden)
    try:
        assert cli.main(['robot', '--role', 'server', '--workload', 'toy', '--out',
                         str(out)]) == 2
    finally:
        first.release()
    err = capsys.readouterr().err.strip()
    assert err.startswith(f'rog robot: {out} is in use by another run (rog robot --role '
                          f'server, pid {os.getpid()}') and '\n' not in err
    assert [p.name for p in out.iterdir()] == [LOCK_FILE]                # no logs either


def test_the_lock_goes_with_its_process_however_it_ends(tmp_path):
    out = str(tmp_path / 'run')
    holder = subprocess.Popen(
        [sys.executable, '-c', 'import sys, time\n'
         'from rog_ros.nodes.output_lock import OutputLock\n'
         'lock = OutputLock.take(sys.argv[1], "rog fleet")\n'
         'print("held", flush=True)\n'
         'time.sleep(60)\n', out],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'held'
        held = f'in use by another run .rog fleet, pid {holder.pid}, since'
        with pytest.raises(OutputInUse, match=held):
            OutputLock.take(out, 'rog fleet')
    finally:
        holder.send_signal(signal.SIGKILL)      # no clean-up of its own: the kernel's only
        holder.wait(10)
        holder.stdout.close()
    mine = OutputLock.take(out, 'rog fleet')
    assert open(os.path.join(out, LOCK_FILE)).read().startswith(f'rog fleet, pid {os.getpid()}')
    mine.release()
    mine.release()                                   # idempotent
    OutputLock.take(out, 'rog fleet').release()     # and the next run gets in


@pytest.mark.parametrize('command', [
    ['compare', '--workload', 'toy'],
    ['reproduce', 'adacomp'],
    ['sim', '--workload', 'toy', '--sync', 'bsp'],
])
def test_a_second_simulator_run_into_a_held_directory_runs_nothing(
        tmp_path, capsys, monkeypatch, command):
    from rog_ros.experiments import compare, reproduce
    from rog_ros.sim import simulator
    monkeypatch.setattr(compare, 'compare', _forbidden)
    monkeypatch.setitem(reproduce.REPRODUCTIONS, 'adacomp', _forbidden)
    monkeypatch.setattr(simulator, 'simulate', _forbidden)
    out = tmp_path / 'cmp'
    first = OutputLock.take(str(out), 'rog compare')
    (out / 'summary.json').write_text('{"systems": []}')
    try:
        assert cli.main(command + ['--out', str(out)]) == 2
    finally:
        first.release()
    err = capsys.readouterr().err.strip()
    assert err.startswith(f'rog {command[0]}: {out} is in use by another run (rog compare, '
                          f'pid {os.getpid()}') and '\n' not in err
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE, 'summary.json']


def test_a_run_refused_once_started_leaves_no_folder_it_made(tmp_path, capsys, monkeypatch):
    from rog_ros.sim import simulator

    def bad_trace(cfg, progress=None):
        raise ValueError('trace file: no rows')
    monkeypatch.setattr(simulator, 'simulate', bad_trace)
    out = tmp_path / 'new' / 'sim'
    assert cli.main(['sim', '--workload', 'toy', '--sync', 'bsp', '--out', str(out)]) == 2
    assert 'rog sim: trace file: no rows' in capsys.readouterr().err
    assert not (tmp_path / 'new').exists()          # nor the parent it made on the way
    kept = tmp_path / 'kept'              # a folder the user had stays, with what it held
    kept.mkdir()
    (kept / 'notes.txt').write_text('mine')
    assert cli.main(['sim', '--workload', 'toy', '--sync', 'bsp', '--out', str(kept)]) == 2
    assert (kept / 'notes.txt').read_text() == 'mine'


def test_a_run_taking_the_lock_as_an_empty_run_lets_go_holds_it_alone(tmp_path, monkeypatch):
    # A run that wrote nothing removes its folder and lock file as it lets go. A second run
    # had opened that lock file and got its flock once the first let go: it held a file no
    # longer there, in a folder removed under it, and a third run made a new lock file and
    # held it too: two runs in one folder.
    import fcntl
    from rog_ros.nodes import output_lock
    out = str(tmp_path / 'new' / 'run')
    first = output_lock.held_output(out, 'rog sim')
    first.__enter__()
    ends = []

    def flock_once_the_first_has_ended(fd, operation):
        """Let the first run end (its lock goes) just before the second's flock."""
        if not ends:
            ends.append(True)       # (first: the first's release unlocks through here too)
            first.__exit__(None, None, None)
        return fcntl.flock(fd, operation)

    monkeypatch.setattr(output_lock, 'fcntl', type(
        'Fcntl', (), {'flock': staticmethod(flock_once_the_first_has_ended),
                      'LOCK_EX': fcntl.LOCK_EX, 'LOCK_NB': fcntl.LOCK_NB,
                      'LOCK_SH': fcntl.LOCK_SH, 'LOCK_UN': fcntl.LOCK_UN}))
    second = OutputLock.take(out, 'rog compare')
    assert ends
    monkeypatch.undo()
    try:
        assert os.path.isfile(os.path.join(out, LOCK_FILE))
        with pytest.raises(OutputInUse, match='rog compare, pid'):
            OutputLock.take(out, 'rog fleet').release()
    finally:
        second.release()
    OutputLock.take(out, 'rog fleet').release()     # once it is let go, the next one gets in


def test_a_run_starting_as_an_empty_run_removes_the_folder_gets_it_anew(tmp_path, monkeypatch):
    # The second run made (found) the folder; the first, which wrote nothing, removed it
    # with its lock file as it let go, just before the second opened the lock file there.
    from rog_ros.nodes import output_lock
    out = str(tmp_path / 'new' / 'run')
    first = output_lock.held_output(out, 'rog sim')
    first.__enter__()
    opened, ends = output_lock._open_lock_file, []

    def open_once_the_first_has_ended(path):
        """Let the first run end (its folder goes) just before the second opens the file."""
        if not ends:
            ends.append(True)       # (first: the first's release unlocks through here too)
            first.__exit__(None, None, None)
        return opened(path)

    monkeypatch.setattr(output_lock, '_open_lock_file', open_once_the_first_has_ended)
    second = OutputLock.take(out, 'rog compare')
    monkeypatch.undo()
    try:
        assert ends and os.path.isfile(os.path.join(out, LOCK_FILE))
        with pytest.raises(OutputInUse, match='rog compare, pid'):
            OutputLock.take(out, 'rog fleet').release()
    finally:
        second.release()


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_left_alone(tmp_path, capsys):
    # (another user's link, in a folder they can write to: its target was overwritten)
    out = tmp_path / 'run'
    out.mkdir()
    victim = tmp_path / 'notes.txt'
    victim.write_text('mine')
    os.symlink(victim, out / LOCK_FILE)
    with pytest.raises(OutputInUse, match='symbolic link'):
        OutputLock.take(str(out), 'rog fleet')
    assert victim.read_text() == 'mine'
    assert cli.main(['sim', '--workload', 'toy', '--sync', 'bsp', '--out', str(out)]) == 2
    assert 'is a symbolic link or not a plain file' in capsys.readouterr().err
    assert victim.read_text() == 'mine'
    os.unlink(out / LOCK_FILE)
    OutputLock.take(str(out), 'rog fleet').release()


@contextlib.contextmanager
def held_by_another_process(out: str, command: str):
    """Hold ``out`` for ``command`` in another process for the block; yield that process."""
    holder = subprocess.Popen(
        [sys.executable, '-c', 'import sys, time\n'
         'from rog_ros.nodes.output_lock import OutputLock\n'
         'lock = OutputLock.take(sys.argv[1], sys.argv[2])\n'
         'print("held", flush=True)\n'
         'time.sleep(60)\n', out, command],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'held'
        yield holder
    finally:
        holder.send_signal(signal.SIGKILL)      # no clean-up of its own: the kernel's only
        holder.wait(10)
        holder.stdout.close()


def test_a_run_into_a_folder_inside_a_held_one_runs_nothing(tmp_path, capsys, monkeypatch):
    # rog compare --out rp3/toy-indoors ran while rog reproduce --out rp3 did, and mixed its
    # runs into the reproduction's report
    from rog_ros.experiments import compare
    monkeypatch.setattr(compare, 'compare', _forbidden)
    outer = tmp_path / 'rp3'
    inner = outer / 'toy-indoors'
    with held_by_another_process(str(outer), 'rog reproduce rog') as holder:
        line = (outer / LOCK_FILE).read_text()
        assert cli.main(['compare', '--workload', 'toy', '--out', str(inner)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f'rog compare: {inner} is inside {outer}, which is in use by '
                              f'another run (rog reproduce rog, pid {holder.pid}, since ')
        assert err.endswith('); give this one an --out outside it, or wait until that one '
                            'ends') and '\n' not in err
        assert not inner.exists()                          # nothing made inside
        assert (outer / LOCK_FILE).read_text() == line     # the holder's line left as it was
        with pytest.raises(OutputInUse, match='is inside'):
            OutputLock.take(str(inner / 'runs' / 'deeper'), 'rog sim')
    OutputLock.take(str(inner), 'rog compare').release()    # its run ended: free again


def test_an_outer_folder_this_process_holds_is_no_conflict(tmp_path):
    # rog reproduce holds its folder and runs its comparisons in folders inside it
    from rog_ros.nodes.output_lock import held_output
    outer = tmp_path / 'rp3'
    with held_output(str(outer), 'rog reproduce rog'):
        with held_output(str(outer / 'toy-indoors'), 'rog compare') as inner:
            assert inner.fd is not None
            assert (outer / 'toy-indoors' / LOCK_FILE).read_text().startswith(
                f'rog compare, pid {os.getpid()}')
        with pytest.raises(OutputInUse, match='in use by another run .rog reproduce rog'):
            OutputLock.take(str(outer), 'rog compare')     # the folder itself stays held


def test_a_run_into_a_folder_that_holds_a_held_one_runs_nothing(tmp_path, capsys,
                                                                monkeypatch):
    # rog reproduce --out rp3 started while rog compare --out rp3/toy-indoors ran: it was
    # refused only when it reached that comparison, after its other work
    from rog_ros.experiments import compare
    monkeypatch.setattr(compare, 'compare', _forbidden)
    outer = tmp_path / 'rp3'
    inner = outer / 'toy-indoors'
    with held_by_another_process(str(inner), 'rog compare') as holder:
        assert cli.main(['compare', '--workload', 'toy', '--out', str(outer)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f'rog compare: {outer} holds {inner}, which is in use by '
                              f'another run (rog compare, pid {holder.pid}, since ')
        assert '\n' not in err
        assert sorted(os.listdir(outer)) == ['toy-indoors']     # nothing made beside it
    OutputLock.take(str(outer), 'rog compare').release()    # its run ended: free again


def test_an_inner_folder_this_process_holds_is_no_conflict(tmp_path):
    """Take an outer folder while this same process holds one inside it."""
    from rog_ros.nodes.output_lock import held_output
    inner = tmp_path / 'rp3' / 'toy-indoors'
    with held_output(str(inner), 'rog compare'):
        with held_output(str(tmp_path / 'rp3'), 'rog reproduce rog') as outer:
            assert outer.fd is not None


def test_a_release_after_a_change_of_folder_lets_the_right_folder_go(tmp_path, monkeypatch):
    """Release the folder the lock was taken on, not the one its relative path names now."""
    from rog_ros.nodes import output_lock
    (tmp_path / 'a').mkdir()
    (tmp_path / 'b').mkdir()
    monkeypatch.chdir(tmp_path / 'a')
    lock = OutputLock.take('run', 'rog sim')
    key = os.path.realpath(str(tmp_path / 'a' / 'run'))
    assert key in output_lock._HELD_HERE
    monkeypatch.chdir(tmp_path / 'b')
    lock.release()
    assert key not in output_lock._HELD_HERE


def test_a_folder_that_holds_a_held_one_beside_a_wide_one_is_refused(tmp_path):
    """Refuse ``rp`` whose ``toy-indoors`` is held, beside a folder of more than the cap."""
    from rog_ros.nodes import output_lock
    outer = tmp_path / 'rp'
    wide = outer / 'data'
    wide.mkdir(parents=True)
    for i in range(output_lock._NESTED_FOLDERS + 100):     # a walk into it first hit the cap
        os.mkdir(str(wide / str(i)))
    inner = outer / 'toy-indoors'
    with held_by_another_process(str(inner), 'rog compare'):
        assert output_lock.held_within(str(outer))[0] == os.path.realpath(str(inner))
        with pytest.raises(OutputInUse, match='which is in use by another run .rog compare'):
            OutputLock.take(str(outer), 'rog reproduce rog')
    OutputLock.take(str(outer), 'rog reproduce rog').release()    # its run ended: free again


def test_a_fleet_whose_out_is_taken_while_it_builds_its_workload_says_it_in_one_line(
        tmp_path, capsys, monkeypatch):
    # rog fleet says another run's hold before it builds its workload (refuse_held), and takes
    # --out only once that is built: a run that took --out in between is still said, not
    # written over
    from rog_ros.nodes import fleet
    out = tmp_path / 'fleet'
    taken = []

    def build_while_another_run_starts(server):
        """Build nothing; meanwhile another run takes ``out``."""
        taken.append(OutputLock.take(str(out), 'rog compare'))
        (out / 'summary.json').write_text('{"theirs": true}')

    monkeypatch.setattr(fleet, '_prepare', build_while_another_run_starts)
    monkeypatch.setattr(subprocess, 'Popen', _forbidden)
    try:
        assert cli.main(['fleet', '--workload', 'toy', '--workers', '2', '--iterations', '5',
                         '--out', str(out)]) == 2
    finally:
        for lock in taken:
            lock.release()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f'rog fleet: {out} is in use by another run (rog compare, pid {os.getpid()}'), err
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE, 'summary.json']
    assert (out / 'summary.json').read_text() == '{"theirs": true}'


TRY_LOCK = ('import fcntl, sys\n'
            "fd = open(sys.argv[1], 'r')\n"
            'try:\n'
            '    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n'
            'except OSError:\n'
            "    print('refused')\n"
            'else:\n'
            "    print('taken')\n")


def _another_process_takes(path: str) -> bool:
    """Tell whether another process can flock ``path`` now (and let it go)."""
    done = subprocess.run([sys.executable, '-c', TRY_LOCK, path], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip() == 'taken'


@pytest.mark.parametrize('kind', ['out', 'log'])
def test_a_released_lock_is_free_though_a_child_with_its_descriptor_still_runs(tmp_path, kind):
    """Unlock at release: a child forked with the lock open (a DataLoader worker) keeps none."""
    # Arrange: the lock held, then a child that inherited its descriptor
    from rog_ros.nodes.run_outputs import NodeLogLock
    if kind == 'out':
        lock, path = OutputLock.take(str(tmp_path / 'run'), 'rog fleet'), str(
            tmp_path / 'run' / LOCK_FILE)
    else:
        lock = NodeLogLock.take(str(tmp_path / 'logs'), 'rog_worker_0', 'rog robot')
        path = str(tmp_path / 'logs' / '.rog_worker_0.lock')
    child = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'],
                             stdin=subprocess.PIPE, pass_fds=(lock.fd,))
    try:
        held = _another_process_takes(path)
        # Execute
        lock.release()
        taken = _another_process_takes(path)
    finally:
        child.stdin.close()
        child.wait(10)
    # Assert
    assert (held, taken) == (False, True)


class _Statvfs:
    """Stand in for ``os.statvfs_result``: only its flags."""

    def __init__(self, flags):
        self.f_flag = flags


@pytest.mark.parametrize('case, said', [
    ('mount', 'the lock file is on a read-only mount, which this file system cannot flock '
              'read-only (ENOLCK; NFS?); use a folder on a local disk, or mount it read-write'),
    ('own', "the lock file is this user's own, without write permission, which this file "
            'system cannot flock read-only (ENOLCK; NFS?); use a folder on a local disk, or '
            'give it back its write permission (chmod u+w), or remove it'),
    ('other', "the lock file is another user's (uid "),
    ('export', "the lock file is this user's own, which this machine may not write though "
               'its mode allows it (a read-only NFS export?), which this file system cannot '
               'flock read-only (ENOLCK; NFS?); use a folder on a local disk, or have the '
               'folder exported read-write'),
])
def test_a_read_only_lock_file_nfs_will_not_lock_is_said_as_it_is(
        tmp_path, monkeypatch, case, said):
    """Say read-only mount, this user's own file or another user's: not always another's."""
    import errno
    import fcntl
    from rog_ros.nodes import output_lock
    # Arrange: a lock file open read-only, on a file system that refuses its flock
    path = tmp_path / LOCK_FILE
    path.write_text('rog fleet, pid 1, since 2026-01-01 00:00:00\n')
    path.chmod(0o644 if case == 'export' else 0o444)  # (an export's: writable, as it says)

    def read_only(name):
        """Open the lock file as a user who may not write it would."""
        return os.open(name, os.O_RDONLY), False

    def no_lock(fd, op):
        """Refuse every flock, as an NFS mount without a lock manager."""
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(output_lock, '_open_lock_file', read_only)
    monkeypatch.setattr(fcntl, 'flock', no_lock)
    real_statvfs, owner = os.fstatvfs, path.stat().st_uid
    flags = os.ST_RDONLY if case == 'mount' else 0
    monkeypatch.setattr(os, 'fstatvfs', lambda fd: _Statvfs(real_statvfs(fd).f_flag | flags))
    monkeypatch.setattr(os, 'geteuid', lambda: owner + (1 if case == 'other' else 0))
    # Execute
    with pytest.raises(output_lock.ReadOnlyLockRefused) as refused:
        output_lock.hold_lock_file(str(path), 'rog fleet')
    # Assert
    text = str(refused.value)
    assert '\n' not in text
    assert text.startswith(f'cannot lock {path}: {said}'), text
    assert (case == 'other') == ('another user' in text)


_WRITER = ('import sys\n'
           'from rog_ros.atomic import atomic_write_with\n'
           'def write(f):\n'
           '    """Write half a model, say so, then wait for a line (or a SIGKILL)."""\n'
           '    f.write(b"x" * 65536)\n'
           '    f.flush()\n'
           '    print("writing", flush=True)\n'
           '    sys.stdin.readline()\n'
           '    f.write(b"y" * 65536)\n'
           'atomic_write_with(sys.argv[1], write)\n')


def _writer(path: str) -> subprocess.Popen:
    """Start a process that saves ``path`` atomically and stops halfway until told to go on."""
    proc = subprocess.Popen([sys.executable, '-c', _WRITER, path], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == 'writing'
    return proc


def test_a_run_removes_what_a_run_killed_while_it_saved_left_but_not_a_live_write(tmp_path):
    # Arrange: a run SIGKILLed while it saved model.pt (its temporary file stayed in the
    # user's folder, nothing removed it), a live process writing summary.json there now
    out = tmp_path / 'fleet'
    out.mkdir()
    (out / '.tmp-notes123.txt').write_text('a user file')     # not one of ours: kept
    killed = _writer(str(out / 'model.pt'))
    killed.send_signal(signal.SIGKILL)
    killed.wait(10)
    killed.stdout.close()
    killed.stdin.close()
    left = [n for n in os.listdir(str(out)) if n.endswith('model.pt')]
    assert len(left) == 1 and left[0].startswith('.tmp-rog-')
    assert os.path.getsize(str(out / left[0])) == 65536
    live = _writer(str(out / 'summary.json'))
    try:
        writing = [n for n in os.listdir(str(out)) if n.endswith('summary.json')]
        # Act: the next run takes the folder
        lock = OutputLock.take(str(out), 'rog fleet')
        lock.release()
        # Assert: the dead write's file is gone, the live one's kept and then renamed whole
        assert lock.removed_leftovers == 1
        assert sorted(os.listdir(str(out))) == sorted(
            [LOCK_FILE, '.tmp-notes123.txt'] + writing)
        live.stdin.write('go on\n')
        live.stdin.close()
        assert live.wait(30) == 0
    finally:
        if live.poll() is None:
            live.kill()
            live.wait(10)
        live.stdout.close()
    assert (out / 'summary.json').read_bytes() == b'x' * 65536 + b'y' * 65536
    assert sorted(os.listdir(str(out))) == [LOCK_FILE, '.tmp-notes123.txt', 'summary.json']


def _no_flock(code):
    """Return a ``fcntl.flock`` that fails as a file system without locks does."""
    import errno

    def flock(fd, operation):
        raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)))
    return flock


@pytest.mark.parametrize('code', ['ENOLCK', 'EOPNOTSUPP'])
def test_without_flock_a_second_run_is_refused_in_one_line_not_let_in(
        tmp_path, monkeypatch, code):
    # Arrange: a file system whose flock fails (NFS with no lock manager, some FUSE): every
    # run was given an unlocked hold, and two runs wrote into one folder without a word
    import errno
    import fcntl
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock(code))
    out = str(tmp_path / 'fleet')
    first = OutputLock.take(out, 'rog fleet')
    try:
        held = os.path.join(out, LOCK_FILE + output_lock.HELD_SUFFIX)
        assert first.fd is not None and os.path.isfile(held)
        # Act
        with pytest.raises(OutputInUse) as refused:
            OutputLock.take(out, 'rog sim')
        # Assert: one line naming the holder and why the lock is a file
        text = str(refused.value)
        assert '\n' not in text
        said = errno.errorcode[getattr(errno, code)]  # (EOPNOTSUPP: ENOTSUP on Linux)
        assert f'rog fleet, pid {os.getpid()} on ' in text and f'no flock: {said}' in text
        assert output_lock.lock_holder(os.path.join(out, LOCK_FILE)).startswith('rog fleet')
        with pytest.raises(OutputInUse, match='is in use by another run'):
            output_lock.refuse_held(out)
    finally:
        first.release()
    assert not os.path.exists(held)           # let go: the next run gets in
    OutputLock.take(out, 'rog sim').release()
    assert sorted(os.listdir(out)) == [LOCK_FILE]


def test_without_flock_a_run_that_writes_nothing_leaves_no_folder(tmp_path, monkeypatch):
    import fcntl
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    out = tmp_path / 'new' / 'run'
    with output_lock.held_output(str(out), 'rog sim'):
        assert (out / (LOCK_FILE + output_lock.HELD_SUFFIX)).is_file()
    assert os.listdir(str(tmp_path)) == []


_HOLD_WITHOUT_FLOCK = ('import errno, fcntl, os, sys\n'
                       'def flock(fd, op):\n'
                       '    raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))\n'
                       'fcntl.flock = flock\n'
                       'from rog_ros.nodes.output_lock import OutputLock\n'
                       "OutputLock.take(sys.argv[1], 'rog fleet')\n"
                       "print('held', flush=True)\n"
                       'sys.stdin.readline()\n')


def test_without_flock_the_hold_of_a_killed_run_is_taken_not_left_for_ever(
        tmp_path, monkeypatch):
    # Arrange: a run holding its folder by file, SIGKILLed (its .held file stays)
    import fcntl
    from rog_ros.nodes import output_lock
    out = str(tmp_path / 'fleet')
    proc = subprocess.Popen([sys.executable, '-c', _HOLD_WITHOUT_FLOCK, out], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == 'held'
        monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
        with pytest.raises(OutputInUse, match=f'rog fleet, pid {proc.pid} on '):
            OutputLock.take(out, 'rog sim')             # alive: refused
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
        proc.stdin.close()
    held = os.path.join(out, LOCK_FILE + output_lock.HELD_SUFFIX)
    assert os.path.isfile(held)
    # Act
    lock = OutputLock.take(out, 'rog sim')
    # Assert: taken, the file now this run's; nothing else left beside it
    try:
        with open(held) as fh:
            assert fh.read().split('\n')[0].split(' ')[1] == str(os.getpid())
        assert sorted(os.listdir(out)) == [LOCK_FILE, LOCK_FILE + output_lock.HELD_SUFFIX]
    finally:
        lock.release()


def test_without_flock_a_hold_of_another_machine_says_how_to_free_it(tmp_path, monkeypatch):
    import fcntl
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    out = tmp_path / 'fleet'
    out.mkdir()
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    held.write_text('robot-7 1\nrog fleet, pid 1 on robot-7, since 2026-01-01 00:00:00\n')
    with pytest.raises(OutputInUse) as refused:
        OutputLock.take(str(out), 'rog sim')
    text = str(refused.value)
    assert '\n' not in text
    assert 'rog fleet, pid 1 on robot-7' in text and f'remove {held}' in text
    assert held.read_text().startswith('robot-7 1\n')     # not removed: cannot be told stale


def test_a_nolock_nfs_mount_is_held_by_file_as_well(tmp_path, monkeypatch):
    # Arrange: an NFS mount with nolock: flock works, on this machine only; a run on another
    # machine (its flock here: always granted) took the same folder
    import fcntl
    from rog_ros.nodes import output_lock
    out = str(tmp_path / 'fleet')
    monkeypatch.setattr(output_lock, '_mounts', lambda: [
        ('/', 'ext4', 'rw,relatime'),
        (str(tmp_path), 'nfs', 'rw,vers=3,nolock,local_lock=all')])
    assert output_lock.flock_is_local(os.path.join(out, LOCK_FILE))
    first = OutputLock.take(out, 'rog fleet')
    try:
        assert first.fd is not None
        assert os.path.isfile(os.path.join(out, LOCK_FILE + output_lock.HELD_SUFFIX))
        monkeypatch.setattr(fcntl, 'flock', lambda fd, operation: None)    # another machine
        # Act / Assert
        with pytest.raises(OutputInUse, match='flock is local to each machine'):
            OutputLock.take(out, 'rog sim')
    finally:
        monkeypatch.setattr(fcntl, 'flock', fcntl.flock)
        first.release()
    assert sorted(os.listdir(out)) == [LOCK_FILE]


@pytest.mark.parametrize('fstype, options, local', [
    ('nfs4', 'rw,vers=4.2,local_lock=none', False), ('nfs', 'rw,nolock', True),
    ('nfs4', 'rw,local_lock=flock', True), ('cifs', 'rw,nobrl', True),
    ('ext4', 'rw,nolock', False), ('fuse.sshfs', 'rw,user_id=0,group_id=0', True),
    ('9p', 'rw,trans=virtio', True), ('virtiofs', 'rw', True), ('xfs', 'rw', False),
    ('overlay', 'rw,lowerdir=/l', False), ('cifs', 'rw,vers=3.0', False)])
def test_which_mounts_lock_on_this_machine_only(tmp_path, monkeypatch, fstype, options, local):
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(output_lock, '_mounts', lambda: [
        ('/', 'ext4', 'rw'), (str(tmp_path / 'x'), 'tmpfs', 'rw'),
        (str(tmp_path), fstype, options)])
    assert output_lock.flock_is_local(str(tmp_path / 'out' / LOCK_FILE)) is local
    assert not output_lock.flock_is_local(str(tmp_path / 'x' / LOCK_FILE))


def test_an_sshfs_mount_shown_as_plain_fuse_is_held_by_file_as_well(tmp_path, monkeypatch):
    # older sshfs (and libfuse on a kernel without subtypes) shows type fuse, its source
    # sshfs#user@host:/path: taken for a local file system, a run on another machine (its
    # flock granted there) took the same folder; and its mount point has a tab (\011)
    import fcntl
    from rog_ros import atomic
    from rog_ros.nodes import output_lock
    folder = tmp_path / 'robot\truns'
    out = str(folder / 'fleet')
    table = tmp_path / 'mounts'
    point = str(folder).replace('\t', '\\011')
    table.write_text('/dev/sda1 / ext4 rw 0 0\n'
                     f'sshfs#robot@nas:/runs {point} fuse '
                     'rw,nosuid,nodev,relatime,user_id=0,group_id=0 0 0\n')
    monkeypatch.setattr(output_lock, '_mounts', lambda: atomic.read_mounts(str(table)))
    assert output_lock.flock_is_local(os.path.join(out, LOCK_FILE))
    first = OutputLock.take(out, 'rog fleet')
    real_flock = fcntl.flock
    try:
        assert os.path.isfile(os.path.join(out, LOCK_FILE + output_lock.HELD_SUFFIX))
        monkeypatch.setattr(fcntl, 'flock', lambda fd, operation: None)    # another machine
        with pytest.raises(OutputInUse, match='flock is local to each machine'):
            OutputLock.take(out, 'rog sim')
    finally:
        monkeypatch.setattr(fcntl, 'flock', real_flock)     # (fcntl.flock: the stand-in)
        first.release()
    assert sorted(os.listdir(out)) == [LOCK_FILE]


def test_without_flock_a_hold_whose_pid_a_later_process_reuses_is_taken(tmp_path, monkeypatch):
    # A killed run's hold names a pid that a later process has (pids wrap, or a reboot): that
    # process started at another time than the one that made the file, so the hold is stale
    import fcntl
    import socket
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    out = tmp_path / 'fleet'
    out.mkdir()
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    now = output_lock._started(os.getpid())
    assert now != '-' and ':' in now
    held.write_text(f'{socket.gethostname()} {os.getppid()} {now}9\nrog fleet, pid '
                    f'{os.getppid()}\n')
    lock = OutputLock.take(str(out), 'rog sim')
    try:
        assert held.read_text().split('\n')[0] == (
            f'{socket.gethostname()} {os.getpid()} {now} {output_lock.pid_space()} '
            f'{output_lock.machine_tag()}')
    finally:
        lock.release()
    # ... and one whose process is the one that made it is held
    held.write_text(f'{socket.gethostname()} {os.getppid()} '
                    f'{output_lock._started(os.getppid())}\nrog fleet, pid {os.getppid()}\n')
    with pytest.raises(OutputInUse, match=f'rog fleet, pid {os.getppid()}'):
        OutputLock.take(str(out), 'rog sim')


def _dead_pid() -> int:
    """Return the pid of a process that has ended (and been waited for)."""
    proc = subprocess.Popen([sys.executable, '-c', 'pass'])
    proc.wait(30)
    return proc.pid


def test_without_flock_a_hold_of_another_container_of_this_host_is_not_taken(
        tmp_path, monkeypatch):
    # Arrange: a run in another pid namespace of this machine (a container with the host's
    # network: the host's name) holds the folder; its pid names no process here. It was taken
    # as a killed run's, removed, and two runs wrote into one folder
    import fcntl
    import socket
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    monkeypatch.setattr(output_lock, 'machine_tag', lambda: 'a1b2c3d4')
    out = tmp_path / 'fleet'
    out.mkdir()
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    boot = output_lock._started(os.getpid()).partition(':')[0]
    assert output_lock.pid_space().startswith('pid:[')
    pid = _dead_pid()
    content = (f'{socket.gethostname()} {pid} {boot}:12345 pid:[1]\nrog fleet, pid {pid} on '
               f'{socket.gethostname()}, since 2026-01-01 00:00:00\n')
    held.write_text(content)
    # Act / Assert: refused in one line that says how to free it; the file stays
    with pytest.raises(OutputInUse) as refused:
        OutputLock.take(str(out), 'rog sim')
    text = str(refused.value)
    assert '\n' not in text and f'rog fleet, pid {pid}' in text
    assert 'another pid namespace' in text and f'remove {held}' in text
    assert held.read_text() == content
    # ... but one made so before this boot of this machine is stale (every process of that
    # boot has ended)
    held.write_text(content.replace(f'{boot}:', 'another-boot:', 1).replace(
        ' pid:[1]\n', f' pid:[1] {output_lock.machine_tag()}\n', 1))
    lock = OutputLock.take(str(out), 'rog sim')
    try:
        assert held.read_text().split('\n')[0] == (
            f'{socket.gethostname()} {os.getpid()} {output_lock._started(os.getpid())} '
            f'{output_lock.pid_space()} {output_lock.machine_tag()}')
    finally:
        lock.release()
    assert not held.exists()


@pytest.mark.parametrize('flock', ['ENOLCK', 'nolock'])
@pytest.mark.parametrize('hardware_b', ['b2b2b2b2', '-'])
def test_a_hold_of_a_clone_of_this_machine_with_the_same_host_name_is_not_taken(
        tmp_path, monkeypatch, flock, hardware_b):
    # Arrange: robots A and B made from one SD card image share the host name and the host's
    # pid namespace (the same inode on every machine). A holds a shared folder by file (no
    # flock, or NFS nolock: A's flock is not seen on B). B judged A's hold by its pid: no
    # process of that pid on B, or one that started at another time, so it took the hold
    # for a killed run's, removed it, and both robots held the folder
    import fcntl
    import socket
    from rog_ros.nodes import output_lock
    out = str(tmp_path / 'fleet')
    held = os.path.join(out, LOCK_FILE + output_lock.HELD_SUFFIX)
    if flock == 'ENOLCK':       # (an NFS mount without a lock manager)
        monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    monkeypatch.setattr(output_lock, '_mounts', lambda: [
        ('/', 'ext4', 'rw'), (os.path.realpath(str(tmp_path)), 'nfs',
                              'rw,vers=3' + (',nolock' if flock == 'nolock' else ''))])
    monkeypatch.setattr(output_lock, '_boot_id', lambda: 'boot-of-robot-a')
    monkeypatch.setattr(output_lock, 'machine_tag', lambda: 'a1a1a1a1')
    first = OutputLock.take(out, 'rog fleet')
    try:
        mine = open(held).read()
        assert mine.split('\n')[0].split(' ')[2].startswith('boot-of-robot-a:')
        # Act: robot B (its own boot; its own hardware, or none it can read) takes it
        monkeypatch.setattr(output_lock, '_boot_id', lambda: 'boot-of-robot-b')
        monkeypatch.setattr(output_lock, 'machine_tag', lambda: hardware_b)
        if flock == 'nolock':
            monkeypatch.setattr(fcntl, 'flock', lambda fd, operation: None)  # B's own flock
        with pytest.raises(OutputInUse) as refused:
            OutputLock.take(out, 'rog sim')
        # Assert: refused in one line naming A's run and how to free it; A's hold stays
        text = str(refused.value)
        assert '\n' not in text and f'rog fleet, pid {os.getpid()} on {socket.gethostname()}' \
            in text and f'if that run has ended, remove {held}' in text
        assert ('another machine named' if hardware_b != '-' else 'cannot be told apart') \
            in text
        assert open(held).read() == mine
    finally:
        monkeypatch.undo()
        first.release()
    assert sorted(os.listdir(out)) == [LOCK_FILE]


def test_a_hold_of_another_boot_is_this_machine_s_only_with_hardware_in_common(monkeypatch):
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(output_lock, '_boot_id', lambda: 'boot-2')
    monkeypatch.setattr(output_lock, 'machine_tag', lambda: '0a0a0a0a,1b1b1b1b')
    host = 'robot'
    assert output_lock._other_machine(host, 'boot-2:100', '9f9f9f9f') is None   # this boot
    assert output_lock._other_machine(host, '-', '9f9f9f9f') is None            # says none
    assert output_lock._other_machine(host, 'boot-1:100', '0a0a0a0a,1b1b1b1b') is None
    assert 'another machine named robot' in output_lock._other_machine(
        host, 'boot-1:100', '2c2c2c2c')
    assert 'cannot be told apart' in output_lock._other_machine(host, 'boot-1:100', '')
    assert 'cannot be told apart' in output_lock._other_machine(host, 'boot-1:100', '-')
    monkeypatch.setattr(output_lock, 'machine_tag', lambda: '-')
    assert 'cannot be told apart' in output_lock._other_machine(
        host, 'boot-1:100', '0a0a0a0a,1b1b1b1b')


@pytest.mark.parametrize('then, now', [
    ('5e5e5e5e,0a0a0a0a', '0a0a0a0a'),            # made on the host; now in Docker, where
    ('0a0a0a0a', '5e5e5e5e,0a0a0a0a'),            # /sys/firmware (the serial) is masked
    ('0a0a0a0a,1b1b1b1b', '0a0a0a0a,2c2c2c2c'),   # a USB adapter swapped, a Wi-Fi address
    ('0a0a0a0a', '0a0a0a0a,1b1b1b1b')])           # set by NetworkManager at one boot only
def test_a_hold_of_another_boot_naming_any_of_this_machine_s_hardware_is_its_own(
        monkeypatch, then, now):
    # A Jetson's hold made by `rog` on the host names its serial number and its factory MAC;
    # its Docker container (host network, as docker/ runs it) cannot read the serial
    # (Docker masks /sys/firmware), and a device added, gone or given an address by
    # NetworkManager changes the set too. After a reboot the robot refused its own hold as
    # 'another machine named robot' and waited for a human. A clone shares no hardware
    # part (its serial and factory addresses are its own): refused as before
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(output_lock, '_boot_id', lambda: 'boot-2')
    monkeypatch.setattr(output_lock, 'machine_tag', lambda: now)
    assert output_lock._other_machine('robot', 'boot-1:100', then) is None
    assert 'another machine named robot' in output_lock._other_machine(
        'robot', 'boot-1:100', '7d7d7d7d,8e8e8e8e')


def _earlier_boot_scene(tmp_path, monkeypatch, disk, machine):
    """
    Plant a hold of this host made in an earlier boot, on ``disk``; return ``(out, held)``.

    ``disk``: 'ext4', 'overlay over ext4' (its upper layer on an ext4 mount), 'hidden
    overlay' (its upper layer not seen: a container's root), 'nfs' (nolock), or another
    type. ``machine``: the hold's hardware ('' for an older release's 4-field line, '-' for
    a container that read none). The mount table and boot ids are injected; '/' is NFS, so
    only the rows written here make a disk local.
    """
    import socket
    from rog_ros.nodes import output_lock
    top = os.path.realpath(str(tmp_path))
    rows = [('/', 'nfs4', 'rw,vers=4.2')]
    if disk == 'ext4':
        rows.append((top, 'ext4', 'rw,relatime'))
    elif disk in ('overlay over ext4', 'hidden overlay'):
        upper = os.path.join(top, 'disk', 'upper')
        os.makedirs(upper)
        rows.append((os.path.join(top, 'disk'), 'ext4', 'rw'))
        if disk == 'hidden overlay':
            upper = '/var/lib/docker/overlay2/0123abcd/diff'
        rows.append((top, 'overlay', f'rw,lowerdir=/l,upperdir={upper},workdir=/w'))
    elif disk == 'nfs':
        rows.append((top, 'nfs', 'rw,vers=3,nolock'))
    else:
        rows.append((top, disk, 'rw'))
    monkeypatch.setattr(output_lock, '_mounts', lambda: rows)
    monkeypatch.setattr(output_lock, '_boot_id', lambda: 'boot-now')
    monkeypatch.setattr(output_lock, 'machine_tag', lambda: 'a1a1a1a1')
    out = os.path.join(top, 'fleet')
    os.makedirs(out)
    held = os.path.join(out, LOCK_FILE + output_lock.HELD_SUFFIX)
    first = f'{socket.gethostname()} 4242 boot-then:100 pid:[4026531836]'
    with open(held, 'w') as fh:
        fh.write(f'{first} {machine}'.rstrip() + '\nrog fleet, pid 4242, since then\n')
    return out, held


@pytest.mark.parametrize('disk, machine, flock', [
    ('ext4', '', 'flock'),                    # an older release's hold
    ('ext4', '', 'ENOLCK'),                   # (met by a run that holds by file)
    ('ext4', '-', 'flock'),                   # a container that read no hardware
    ('overlay over ext4', '-', 'flock'),
    ('overlay over ext4', '', 'ENOLCK')])
def test_an_earlier_boot_s_hold_naming_no_hardware_on_a_local_disk_is_refused(
        tmp_path, monkeypatch, capsys, disk, machine, flock):
    # A hold of this host name made in another boot that names no hardware, on a disk only
    # this machine's kernel writes. No run makes a .held there (its flock works): a client
    # of a share of this folder (NFS, SMB, sshfs) of the same host name made it, live or
    # not (cloned robots, a container that reads no hardware). It is refused, never taken
    # over as an earlier boot's (b4178d3 did, and let a second run in beside a live one)
    import fcntl
    from rog_ros.nodes.output_lock import refuse_held
    out, held = _earlier_boot_scene(tmp_path, monkeypatch, disk, machine)
    text = open(held).read()
    if flock == 'ENOLCK':
        monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    with pytest.raises(OutputInUse) as first:
        refuse_held(out)
    said = str(first.value)
    assert '\n' not in said and 'rog fleet, pid 4242' in said
    assert 'cannot be told apart' in said and f'if that run has ended, remove {held}' in said
    with pytest.raises(OutputInUse) as taking:
        OutputLock.take(out, 'rog sim')
    assert str(taking.value) == said            # (the words rog fleet's first check says)
    assert open(held).read() == text and 'took over' not in capsys.readouterr().err
    assert sorted(os.listdir(out)) == sorted([LOCK_FILE, os.path.basename(held)])


@pytest.mark.parametrize('disk, machine', [
    ('nfs', ''), ('nfs', '-'), ('nfs', '2c2c2c2c'),   # shared: another machine of that name
    ('hidden overlay', ''),                 # a container's root: its upper layer not seen
    # a disk only this kernel writes, but a hold naming hardware none of which is this
    # machine's: no run makes a .held on a local disk (flock works there), so it was made
    # through a share of this machine (NFS, SMB, sshfs) by a clone of the same host name
    ('ext4', '2c2c2c2c'), ('overlay over ext4', '2c2c2c2c'),
    ('fuse.mergerfs', '-'), ('9p', ''), ('virtiofs', '-')])
def test_an_earlier_boot_s_hold_elsewhere_is_refused_as_before(
        tmp_path, monkeypatch, capsys, disk, machine):
    from rog_ros.nodes.output_lock import refuse_held
    out, held = _earlier_boot_scene(tmp_path, monkeypatch, disk, machine)
    text = open(held).read()
    with pytest.raises(OutputInUse) as refused:
        refuse_held(out)
    said = str(refused.value)
    assert '\n' not in said and 'rog fleet, pid 4242' in said
    assert ('another machine named' if machine not in ('', '-') else 'cannot be told apart') \
        in said and f'if that run has ended, remove {held}' in said
    # (held by file where the flock is local to each machine; elsewhere, a local disk too,
    # the flock is not all: a .held a client made through a share is read as well)
    with pytest.raises(OutputInUse) as taking:
        OutputLock.take(out, 'rog sim')
    assert str(taking.value) == said
    assert open(held).read() == text and 'took over' not in capsys.readouterr().err


def test_a_hold_of_this_boot_or_another_host_on_a_local_disk_is_judged_as_before(
        tmp_path, monkeypatch, capsys):
    # On a local disk a .held is a client's, made through a share of this folder: a live
    # process of this boot holds; another pid namespace of this boot cannot be told stale;
    # another host's hold (written through a server of this machine: NFS, SFTP) is refused.
    # rog fleet's first check refused each; take() (every other command) let them in
    import socket
    from rog_ros.nodes import output_lock
    from rog_ros.nodes.output_lock import refuse_held
    from rog_ros.atomic import boot_id
    real_boot = boot_id()
    out, held = _earlier_boot_scene(tmp_path, monkeypatch, 'ext4', '')
    monkeypatch.setattr(output_lock, '_boot_id', lambda: real_boot)
    host = socket.gethostname()
    for first, words in [
            (f'{host} {os.getppid()} {output_lock._started(os.getppid())} '
             f'{output_lock.pid_space()} a1a1a1a1', 'rog fleet, pid 4242'),
            (f'{host} 4242 {real_boot}:100 pid:[1] -', 'another pid namespace'),
            ('robot-b 4242 boot-then:100 pid:[1] -', 'if that run on robot-b has ended')]:
        with open(held, 'w') as fh:
            fh.write(f'{first}\nrog fleet, pid 4242, since then\n')
        with pytest.raises(OutputInUse, match=words) as checked:
            refuse_held(out)
        with pytest.raises(OutputInUse) as taking:  # (take reads it too: a client's hold)
            OutputLock.take(out, 'rog sim')
        assert str(taking.value) == str(checked.value)
        assert open(held).read().startswith(first)
    assert 'took over' not in capsys.readouterr().err


def _client_hold_scene(tmp_path, monkeypatch, text):
    """Plant ``.held`` holding ``text`` in a folder on ext4 (injected); ``(out, held)``."""
    from rog_ros.nodes import output_lock
    top = os.path.realpath(str(tmp_path))
    monkeypatch.setattr(output_lock, '_mounts', lambda: [('/', 'ext4', 'rw,relatime')])
    out = os.path.join(top, 'fleet')
    os.makedirs(out)
    held = os.path.join(out, LOCK_FILE + output_lock.HELD_SUFFIX)
    if text is not None:
        with open(held, 'w') as fh:
            fh.write(text)
    return out, held


_CLIENT_LINE = 'rog fleet, pid 4242 on robot-b, since then, held by file (no flock: ENOLCK)'


@pytest.mark.parametrize('case, words', [
    ('another host', 'if that run on robot-b has ended, remove'),
    ('a clone', 'made on another machine named'),
    ('young empty', 'is empty: a run is making it now'),
    ('symbolic link', 'is a symbolic link, not a hold of rog_ros'),
    ('folder', 'is not a plain file, not a hold of rog_ros'),
    ('not a hold', 'if no run uses that folder, remove')])
def test_on_a_local_disk_take_refuses_a_live_hold_a_client_made_through_a_share(
        tmp_path, monkeypatch, capsys, case, words):
    # Arrange: the folder is on this machine's ext4 (its flock works, so no run here makes
    # a .held) and a client of a share of it (an NFS export mounted nolock, sshfs) holds
    # it by file. Only rog fleet's first check (refuse_held) read that file: take(), which
    # every other command (rog robot, rog sim --out, compare, reproduce) goes through, took
    # the flock and ran beside the client's run
    import socket
    from rog_ros.nodes import output_lock
    from rog_ros.nodes.output_lock import refuse_held
    monkeypatch.setattr(output_lock, '_boot_id', lambda: 'boot-now')
    monkeypatch.setattr(output_lock, 'machine_tag', lambda: 'a1a1a1a1')
    text = {'another host': f'robot-b 4242 boot-b:100 pid:[1] 2c2c2c2c\n{_CLIENT_LINE}\n',
            'a clone': f'{socket.gethostname()} 4242 boot-b:100 pid:[1] 2c2c2c2c\n'
                       f'{_CLIENT_LINE}\n',
            'young empty': '',
            'not a hold': 'whatever\n'}.get(case)
    out, held = _client_hold_scene(tmp_path, monkeypatch, text)
    if case == 'symbolic link':
        os.symlink('/nonexistent', held)
    elif case == 'folder':
        os.mkdir(held)
    # Act / Assert: take() refuses it in the words of rog fleet's first check, holds
    # nothing (a second take refuses the same way), and leaves the file as it was
    with pytest.raises(OutputInUse) as checked:
        refuse_held(out)
    for _ in range(2):
        with pytest.raises(OutputInUse) as taking:
            OutputLock.take(out, 'rog sim')
        assert str(taking.value) == str(checked.value)
    said = str(checked.value)
    assert '\n' not in said and words in said
    assert output_lock.lock_holder(os.path.join(out, LOCK_FILE)) is not None
    if text is not None:
        assert open(held).read() == text
    assert os.path.lexists(held) and 'took over' not in capsys.readouterr().err


def test_on_a_local_disk_every_holder_of_a_lock_file_refuses_a_client_s_live_hold(
        tmp_path, monkeypatch):
    # rog sim --out / compare / reproduce (cli_options.held), rog robot's node logs, a
    # node's state file: all go through hold_lock_file
    from rog_ros.cli_options import held as held_out
    from rog_ros.nodes import durable, output_lock
    from rog_ros.nodes.run_outputs import NodeLogLock
    from rog_ros.nodes.state_dir import lock_file
    text = f'robot-b 4242 boot-b:100 pid:[1] 2c2c2c2c\n{_CLIENT_LINE}\n'
    out, held = _client_hold_scene(tmp_path, monkeypatch, text)
    with pytest.raises(OutputInUse, match='if that run on robot-b has ended'):
        with held_out(out, 'rog sim'):
            pass
    logs = os.path.join(out, 'logs')
    os.makedirs(logs)
    with open(os.path.join(logs, '.rog_worker_0.lock.held'), 'w') as fh:
        fh.write(text)
    with pytest.raises(OSError, match='rog_worker_0.log is being written by another run '
                                      r'\(rog fleet, pid 4242 on robot-b'):
        NodeLogLock.take(logs, 'rog_worker_0', 'rog robot')
    state = os.path.join(out, 'state', 'worker_0.pt')
    os.makedirs(os.path.dirname(state))
    with open(lock_file(state) + output_lock.HELD_SUFFIX, 'w') as fh:
        fh.write(text)
    with pytest.raises(durable.StateError, match='in use by .*rog fleet, pid 4242 on robot-b'):
        durable.hold(state, 'rog robot')
    assert open(held).read() == text


def test_on_a_local_disk_a_stale_hold_is_left_and_a_free_folder_is_taken(
        tmp_path, monkeypatch):
    # A stale .held (this host, this boot and pid namespace, its pid gone; or empty and
    # older than 60 s) is judged as before: take() holds the folder and leaves the file
    import socket
    import time
    from rog_ros.nodes import output_lock
    from rog_ros.nodes.output_lock import refuse_held
    dead = subprocess.Popen([sys.executable, '-c', 'pass'])
    dead.wait(30)
    maker = (f'{socket.gethostname()} {dead.pid} {output_lock._started(os.getpid())} '
             f'{output_lock.pid_space()} {output_lock.machine_tag()}')
    for text in (f'{maker}\nrog fleet, pid {dead.pid}, since then\n', ''):
        out, held = _client_hold_scene(tmp_path / str(len(text)), monkeypatch, text)
        if not text:
            old = time.time() - output_lock.EMPTY_HOLD_STALE_S - 5
            os.utime(held, (old, old))
        refuse_held(out)
        lock = OutputLock.take(out, 'rog sim')
        try:
            assert output_lock.lock_holder(os.path.join(out, LOCK_FILE)) is not None
        finally:
            lock.release()
        assert open(held).read() == text
    out, held = _client_hold_scene(tmp_path / 'free', monkeypatch, None)
    OutputLock.take(out, 'rog sim').release()
    assert os.listdir(out) == [] or os.listdir(out) == [LOCK_FILE]


def _container_hold_scene(tmp_path, monkeypatch, fstype, host, why):
    """Plant a hold of this boot made in another pid namespace, on ``fstype``: ``(out, held)``."""
    import socket
    from rog_ros.atomic import boot_id
    from rog_ros.nodes import output_lock
    top = os.path.realpath(str(tmp_path))
    rows = [('/', 'ext4', 'rw'), (top, fstype, 'rw')]
    monkeypatch.setattr(output_lock, '_mounts', lambda: rows)
    out = os.path.join(top, 'fleet')
    os.makedirs(out)
    open(os.path.join(out, LOCK_FILE), 'w').close()     # (as the killed run left it)
    held = os.path.join(out, LOCK_FILE + output_lock.HELD_SUFFIX)
    with open(held, 'w') as fh:
        fh.write(f'{host or socket.gethostname()} 4242 {boot_id()}:100 pid:[4026530001] - '
                 f'\nrog fleet, pid 4242 on x, since then, held by file ({why})\n')
    return out, held


@pytest.mark.parametrize('host', ['', 'container-7'])
def test_on_virtiofs_a_killed_hold_of_another_container_is_taken_once_its_flock_is_free(
        tmp_path, monkeypatch, capsys, host):
    # Arrange: a run in another container of this VM (another pid namespace; its own host
    # name, or the VM's) held a virtiofs folder and was killed. Its pid names nothing here:
    # a container started again was refused until a human removed the file. Its maker took
    # the flock of .rog.lock first, in this kernel (this boot's id), and held it until its
    # file was gone: the flock free proves it ended
    import socket
    from rog_ros.nodes.output_lock import refuse_held
    out, held = _container_hold_scene(tmp_path, monkeypatch, 'virtiofs', host,
                                      'flock is local to each machine')
    # Act / Assert: free for rog fleet's first check; taken over in one line
    refuse_held(out)
    lock = OutputLock.take(out, 'rog sim')
    try:
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f'rog_ros: took over {held} (rog fleet, '
                                                   'pid 4242 on x')
        assert ('host name container-7' if host else 'pid namespace pid:[4026530001]') \
            in err[0] and 'no longer holds' in err[0]
        assert open(held).read().startswith(f'{socket.gethostname()} {os.getpid()} ')
    finally:
        lock.release()
    assert sorted(os.listdir(out)) == [LOCK_FILE]


@pytest.mark.parametrize('fstype, why, live', [
    ('virtiofs', 'flock is local to each machine', True),    # its maker holds the flock
    ('9p', 'flock is local to each machine', False),     # two 9p mounts: flocks never meet
    ('virtiofs', 'no flock: ENOLCK', False),             # made without a flock: no proof
    ('nfs', 'flock is local to each machine', False)])
def test_a_hold_of_another_container_is_refused_unless_its_flock_proves_it_ended(
        tmp_path, monkeypatch, capsys, fstype, why, live):
    from rog_ros.nodes.output_lock import refuse_held
    out, held = _container_hold_scene(tmp_path, monkeypatch, fstype, '', why)
    text = open(held).read()
    holder = None
    if live:                                # (the other container's run, alive)
        holder = subprocess.Popen(
            [sys.executable, '-c', 'import fcntl, os, sys; fd = os.open(sys.argv[1], '
             'os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); print("ready", '
             'flush=True); sys.stdin.read()', os.path.join(out, LOCK_FILE)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == 'ready'
    try:
        with pytest.raises(OutputInUse, match='another pid namespace'):
            refuse_held(out)
        if not live and fstype != 'nfs':    # (flock local: held by file, refused by it)
            with pytest.raises(OutputInUse, match='another pid namespace'):
                OutputLock.take(out, 'rog sim')
        if live:                            # (the probe left the live holder's flock held)
            import fcntl
            fd = os.open(os.path.join(out, LOCK_FILE), os.O_RDONLY)
            try:
                with pytest.raises(BlockingIOError):
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            finally:
                os.close(fd)
    finally:
        if holder is not None:
            holder.stdin.close()
            holder.wait(30)
    assert open(held).read() == text and 'took over' not in capsys.readouterr().err


def test_the_machine_tag_names_hardware_network_devices_and_the_serial_number(
        tmp_path, monkeypatch):
    # Of /sys/class/net, only devices that are hardware (a device link) with their factory
    # address (addr_assign_type 0): a bridge, veth or a randomised address say nothing
    from rog_ros.nodes import output_lock
    real_exists, real_listdir, real_small = os.path.exists, os.listdir, output_lock._read_small
    files = {'/sys/class/net/eth0/addr_assign_type': '0',
             '/sys/class/net/eth0/address': '48:b0:2d:01:02:03',
             '/sys/class/net/wlan0/addr_assign_type': '3',
             '/sys/class/net/wlan0/address': '5a:11:22:33:44:55',
             '/sys/class/net/docker0/addr_assign_type': '0',
             '/sys/class/net/docker0/address': '02:42:00:00:00:01'}
    devices = {'/sys/class/net/eth0/device', '/sys/class/net/wlan0/device'}
    monkeypatch.setattr(output_lock, '_read_small', lambda path: files.get(path, ''))
    monkeypatch.setattr(os, 'listdir', lambda path: (
        ['docker0', 'eth0', 'lo', 'wlan0'] if path == '/sys/class/net' else real_listdir(path)))
    monkeypatch.setattr(os.path, 'exists', lambda path: path in devices or (
        not path.startswith('/sys/') and real_exists(path)))
    one = output_lock.machine_tag()
    assert len(one) == 8 and int(one, 16) >= 0
    files['/sys/class/net/wlan0/address'] = '5a:99:99:99:99:99'     # random: no part
    files['/sys/class/net/docker0/address'] = '02:42:00:00:00:02'   # no device: no part
    assert output_lock.machine_tag() == one
    files['/sys/firmware/devicetree/base/serial-number'] = '1422919047520'
    two = output_lock.machine_tag()
    assert len(two.split(',')) == 2 and one in two.split(',')
    files['/sys/class/net/eth0/address'] = '48:b0:2d:01:02:04'     # a clone: its own MAC
    assert output_lock.machine_tag() != two
    files.clear()
    assert output_lock.machine_tag() == '-'
    monkeypatch.setattr(output_lock, '_read_small', real_small)


def test_without_flock_a_hold_file_a_run_was_killed_making_says_how_to_free_it(
        tmp_path, monkeypatch):
    # A run killed between making its .held file and writing it (or on a full disk) leaves it
    # empty: every later run was refused naming no run, and saying nothing of what to do
    import fcntl
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    out = tmp_path / 'fleet'
    out.mkdir()
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    held.write_bytes(b'')
    with pytest.raises(OutputInUse) as refused:
        OutputLock.take(str(out), 'rog sim')
    text = str(refused.value)
    assert '\n' not in text and f'remove {held} now if no run uses that folder' in text
    assert held.read_bytes() == b''


def test_without_flock_the_hold_of_a_run_that_ended_but_is_not_reaped_is_taken(
        tmp_path, monkeypatch):
    # A holder that has ended but that its parent has not waited for yet (a zombie: a node
    # rog fleet killed, not reaped yet) let go of a flock at once; its .held file was held
    import fcntl
    import socket
    import time
    from rog_ros.nodes import output_lock
    out = tmp_path / 'fleet'
    out.mkdir()
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    proc = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.readline()'],
                            stdin=subprocess.PIPE)
    try:
        started = output_lock._started(proc.pid)
        assert started != '-' and not started.endswith(output_lock._ENDED)
        held.write_text(f'{socket.gethostname()} {proc.pid} {started} '
                        f'{output_lock.pid_space()}\nrog fleet, pid {proc.pid}\n')
        monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
        with pytest.raises(OutputInUse, match=f'rog fleet, pid {proc.pid}'):
            OutputLock.take(str(out), 'rog sim')         # alive: held
        proc.stdin.close()                                 # it ends, not waited for
        deadline = time.monotonic() + 30
        while not output_lock._started(proc.pid).endswith(output_lock._ENDED):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # Act
        lock = OutputLock.take(str(out), 'rog sim')
        # Assert
        try:
            assert held.read_text().split(' ')[1] == str(os.getpid())
        finally:
            lock.release()
    finally:
        proc.wait(30)


def test_a_nolock_mount_whose_hold_file_cannot_be_made_lets_go_of_its_flock(
        tmp_path, monkeypatch):
    # Arrange: an NFS mount with nolock (flock local) where the .held file cannot be made
    # once (a full disk): the refusal kept the flock it had got, and this process (a node
    # configured again) then found its own folder held by itself until it ended
    import errno
    from rog_ros.nodes import output_lock
    out = str(tmp_path / 'fleet')
    monkeypatch.setattr(output_lock, '_mounts', lambda: [
        ('/', 'ext4', 'rw'), (str(tmp_path), 'nfs', 'rw,vers=3,nolock')])
    real_open = os.open

    def full(path, flags, *args, **kwargs):
        """Fail to make a .held file, as a full disk does."""
        if output_lock.HELD_SUFFIX in os.path.basename(str(path)) and flags & os.O_CREAT:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, 'open', full)
    with pytest.raises(OutputInUse, match='cannot be made'):
        OutputLock.take(out, 'rog fleet')
    monkeypatch.setattr(os, 'open', real_open)
    # Act: the disk has room again
    lock = OutputLock.take(out, 'rog fleet')
    # Assert: taken, by file as well
    try:
        assert lock.fd is not None
        assert os.path.isfile(os.path.join(out, LOCK_FILE + output_lock.HELD_SUFFIX))
    finally:
        lock.release()
    assert sorted(os.listdir(out)) == [LOCK_FILE]


def test_without_flock_a_killed_run_s_hold_that_cannot_be_removed_says_so(
        tmp_path, monkeypatch):
    # A killed run's .held file that this user may not remove (another user's, in a sticky
    # folder as /tmp): it was taken as removed, made again and again, and the refusal said
    # only 'made and removed again 10 times; run again', which never helps
    import errno
    import fcntl
    import socket
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    out = tmp_path / 'fleet'
    out.mkdir()
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    pid = _dead_pid()
    held.write_text(f'{socket.gethostname()} {pid} - {output_lock.pid_space()}\n'
                    f'rog fleet, pid {pid}\n')

    def sticky(src, dst):
        """Refuse to move another user's file, as a sticky folder does."""
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))
    monkeypatch.setattr(os, 'rename', sticky)
    with pytest.raises(OutputInUse) as refused:
        OutputLock.take(str(out), 'rog sim')
    text = str(refused.value)
    assert '\n' not in text and f'rog fleet, pid {pid}' in text
    assert f'that run has ended, but {held} cannot be removed' in text
    assert 'have its owner remove it' in text and held.is_file()


def _take_by_file(out, name, events, results, pause_alive=False, pause_link=False):
    """
    Hold ``out`` by file as run ``name`` (in a forked process); report whether it got it.

    ``pause_alive``: the first liveness check says 'reached-alive' and waits for ``go-alive``
    (a run that has read the stale hold and is about to judge it); ``pause_link``: the first
    ``os.link`` of a take-over file says 'reached-link' and waits for ``go-link``. The
    process stays alive, still holding what it got, until ``done``.
    """
    import fcntl
    from rog_ros.nodes import output_lock
    fcntl.flock = _no_flock('ENOLCK')
    if pause_alive:
        alive, calls = output_lock._alive, []

        def paused_alive(*args):
            """Judge the hold only once told to."""
            if not calls:
                calls.append(1)
                events['reached-alive'].set()
                events['go-alive'].wait(20)
            return alive(*args)
        output_lock._alive = paused_alive
    if pause_link:
        link, links = os.link, []

        def paused_link(*args, **kwargs):
            """Link a take-over file only once told to (its own hold's at once)."""
            if not links and output_lock.TAKE_OVER_INFIX in str(args[1]):
                links.append(1)
                events['reached-link'].set()
                events['go-link'].wait(20)
            return link(*args, **kwargs)
        os.link = paused_link
    try:
        fd, _ = output_lock.hold_by_file(os.path.join(out, LOCK_FILE), name, 'ENOLCK')
    except OutputInUse:
        fd = None
    results.put((name, fd is not None))
    events['done'].wait(30)


def test_without_flock_runs_racing_a_killed_run_s_hold_let_one_in(tmp_path):
    # Three runs race the .held file of a killed run. C reads it (stale) and is held up
    # before it acts; B takes it over (its own .held made); C goes on: before, it moved B's
    # live .held aside to check it, and D, started in that moment, found no .held and made
    # its own; C could not put B's back, removed it, and B and D both held the folder.
    import multiprocessing
    import socket
    from rog_ros.nodes import output_lock
    ctx = multiprocessing.get_context('fork')
    out = tmp_path / 'fleet'
    out.mkdir()
    pid = _dead_pid()
    (out / (LOCK_FILE + output_lock.HELD_SUFFIX)).write_text(
        f'{socket.gethostname()} {pid} - {output_lock.pid_space()}\nrog fleet, pid {pid}\n')
    events = {k: ctx.Event() for k in ('reached-alive', 'go-alive', 'reached-link', 'go-link',
                                       'done')}
    results = ctx.Queue()
    procs = []

    def start(name, **pauses):
        """Start run ``name`` racing for the folder."""
        proc = ctx.Process(target=_take_by_file, args=(str(out), name, events, results),
                           kwargs=pauses)
        proc.start()
        procs.append(proc)
    got = {}
    try:
        start('C', pause_alive=True, pause_link=True)
        assert events['reached-alive'].wait(20)           # C has read the stale hold
        start('B')
        name, held = results.get(timeout=20)
        got[name] = held
        assert got == {'B': True}                         # B took the killed run's hold
        events['go-alive'].set()                          # C goes on with what it read
        events['reached-link'].wait(5)                    # (C putting a hold back, if it does)
        start('D')
        name, held = results.get(timeout=20)
        got[name] = held
        events['go-link'].set()
        name, held = results.get(timeout=20)
        got[name] = held
        # Assert: one run holds the folder (B), the others were refused; the .held is B's
        assert got == {'B': True, 'C': False, 'D': False}
        first = (out / (LOCK_FILE + output_lock.HELD_SUFFIX)).read_text().split('\n')[0]
        assert first.split(' ')[1] == str(procs[1].pid)
    finally:
        events['done'].set()
        for proc in procs:
            proc.join(30)


def _race_by_file(out, start, results, done):
    """Hold ``out`` by file (no flock) once ``start`` is set; report whether it got it."""
    import fcntl
    from rog_ros.nodes import output_lock
    fcntl.flock = _no_flock('ENOLCK')
    start.wait(20)
    try:
        fd, _ = output_lock.hold_by_file(os.path.join(out, LOCK_FILE), 'rog sim', 'ENOLCK')
    except OutputInUse:
        fd = None
    results.put(fd is not None)
    done.wait(30)


def test_without_flock_many_runs_racing_a_killed_run_s_hold_let_exactly_one_in(tmp_path):
    # Eight runs started at once on a killed run's .held file, five times: one holds it
    import multiprocessing
    import socket
    from rog_ros.nodes import output_lock
    ctx = multiprocessing.get_context('fork')
    pid = _dead_pid()
    for round_ in range(5):
        out = tmp_path / f'fleet{round_}'
        out.mkdir()
        (out / (LOCK_FILE + output_lock.HELD_SUFFIX)).write_text(
            f'{socket.gethostname()} {pid} - {output_lock.pid_space()}\nrog fleet, pid {pid}\n')
        start, done, results = ctx.Event(), ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_race_by_file, args=(str(out), start, results, done))
                 for _ in range(8)]
        try:
            for proc in procs:
                proc.start()
            start.set()
            got = [results.get(timeout=30) for _ in procs]
        finally:
            done.set()
            for proc in procs:
                proc.join(30)
        assert sum(got) == 1, f'round {round_}: {sum(got)} runs hold the folder'
        assert sorted(os.listdir(out)) == [LOCK_FILE + output_lock.HELD_SUFFIX]


def test_without_flock_a_hold_taken_removes_what_killed_take_overs_left(tmp_path, monkeypatch):
    # Take-overs of a killed run's .held killed midway leave their .held.over- files (each
    # naming its maker); the run that holds the folder next removes those of a process gone
    import fcntl
    import socket
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    out = tmp_path / 'fleet'
    out.mkdir()
    held = LOCK_FILE + output_lock.HELD_SUFFIX
    pid = _dead_pid()
    dead = f'{socket.gethostname()} {pid} - {output_lock.pid_space()}\ntaking over, pid {pid}\n'
    alive = (f'{socket.gethostname()} {os.getppid()} - {output_lock.pid_space()}\n'
             f'taking over, pid {os.getppid()}\n')
    (out / f'{held}.over-0123456789abcdef').write_text(dead)
    (out / f'{held}.over-0123456789abcdef.gone-{socket.gethostname()}-{pid}').write_text(dead)
    (out / f'{held}.over-fedcba9876543210').write_text(alive)        # (a live process's)
    (out / f'{held}.notes').write_text('a user file')
    lock = OutputLock.take(str(out), 'rog sim')
    try:
        assert sorted(os.listdir(str(out))) == sorted(
            [LOCK_FILE, held, f'{held}.over-fedcba9876543210', f'{held}.notes'])
    finally:
        lock.release()


def test_without_flock_a_take_over_writes_through_no_symbolic_link(tmp_path, monkeypatch):
    # The file a take-over writes its line into before it links it (HELD.over-DIGEST.HOST-PID)
    # has a name anyone can tell from the stale file's text; a symbolic link put there (in a
    # folder others may write to) had the file it points to truncated and overwritten
    import fcntl
    import hashlib
    import socket
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    out = tmp_path / 'fleet'
    out.mkdir()
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    pid = _dead_pid()
    text = f'{socket.gethostname()} {pid} - {output_lock.pid_space()}\nrog fleet, pid {pid}\n'
    held.write_text(text)
    digest = hashlib.sha1(text.encode()).hexdigest()[:16]
    mine = out / (f'{held.name}{output_lock.TAKE_OVER_INFIX}{digest}.'
                  f'{socket.gethostname()}-{os.getpid()}')
    victim = tmp_path / 'victim.txt'
    victim.write_text('precious\n')
    mine.symlink_to(victim)
    lock = OutputLock.take(str(out), 'rog sim')
    try:
        # Assert: the file the link named is untouched; the killed run's hold taken over
        assert victim.read_text() == 'precious\n'
        assert held.read_text().split(' ')[1] == str(os.getpid())
        # (the planted link is another's file, kept: the take-over's own file has random
        # digits in its name, so no name told from the stale text is ever written through)
        assert sorted(os.listdir(str(out))) == sorted([LOCK_FILE, held.name, mine.name])
        assert mine.is_symlink()
    finally:
        lock.release()


def test_without_flock_a_take_over_that_cannot_go_on_is_refused_without_waiting_on(
        tmp_path, monkeypatch):
    # A killed take-over's file (stale), whose own take-over was killed before it wrote its
    # line (empty: made O_EXCL where there are no hard links): each of the 200 tries on the
    # first waited the 200 tries on the second (about 400 s), then refused all the same
    import fcntl
    import hashlib
    import socket
    import time
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    monkeypatch.setattr(output_lock, '_TAKE_OVER_WAITS', 40)
    waits = []

    class Clock:
        """The module ``time`` to output_lock, its sleeps counted, not slept."""

        sleep = staticmethod(waits.append)

        def __getattr__(self, name):
            """Give the rest of ``time``."""
            return getattr(time, name)
    monkeypatch.setattr(output_lock, 'time', Clock())
    out = tmp_path / 'fleet'
    out.mkdir()
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    pid = _dead_pid()
    text = f'{socket.gethostname()} {pid} - {output_lock.pid_space()}\nrog fleet, pid {pid}\n'
    held.write_text(text)
    guard = out / f'{held.name}{output_lock.TAKE_OVER_INFIX}' \
                  f'{hashlib.sha1(text.encode()).hexdigest()[:16]}'
    taker = (f'{socket.gethostname()} {pid} - {output_lock.pid_space()}\n'
             f'taking over {held}, pid {pid}\n')
    guard.write_text(taker)
    inner = out / f'{guard.name}{output_lock.TAKE_OVER_INFIX}' \
                  f'{hashlib.sha1(taker.encode()).hexdigest()[:16]}'
    inner.write_text('')
    with pytest.raises(OutputInUse) as refused:
        OutputLock.take(str(out), 'rog sim')
    # Assert: refused after one wait of 40 tries, naming the file to remove; nothing removed
    assert len(waits) <= 40, len(waits)
    text = str(refused.value)
    assert '\n' not in text and f'remove {inner}' in text
    assert held.is_file() and guard.is_file() and inner.is_file()


def _empty_hold(out, age_s: float):
    """Make ``out``'s ``.held`` file empty (a run killed making it), ``age_s`` seconds old."""
    import time
    from rog_ros.nodes import output_lock
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    held.write_bytes(b'')
    then = time.time() - age_s
    os.utime(str(held), (then, then))
    return held


def test_without_flock_an_empty_hold_file_past_its_bound_is_taken_over(tmp_path, monkeypatch):
    # A run killed between making its .held file and writing its holder line left it empty:
    # every later run on that folder was refused until the user removed it by hand
    import fcntl
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    out = tmp_path / 'fleet'
    out.mkdir()
    held = _empty_hold(out, output_lock.EMPTY_HOLD_STALE_S + 5)
    # Act
    lock = OutputLock.take(str(out), 'rog sim')
    # Assert: taken over, the file now names this run; let go, nothing left beside the lock
    try:
        assert held.read_text().split('\n')[0].split(' ')[1] == str(os.getpid())
        assert sorted(os.listdir(str(out))) == [LOCK_FILE, held.name]
    finally:
        lock.release()
    assert sorted(os.listdir(str(out))) == [LOCK_FILE]


def test_without_flock_a_young_empty_hold_file_is_refused_saying_when_it_is_taken(
        tmp_path, monkeypatch):
    # An empty .held file younger than the bound may be a live run's that has not written
    # its line yet (where there are no hard links): refused in one line naming the folder,
    # the file, when it is taken over, and what to do; nothing removed
    import fcntl
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    out = tmp_path / 'fleet'
    out.mkdir()
    held = _empty_hold(out, 1)
    with pytest.raises(OutputInUse) as refused:
        OutputLock.take(str(out), 'rog sim')
    text = str(refused.value)
    assert '\n' not in text and text.startswith(f'{out} cannot be taken: {held} is')
    assert f'{held} is empty' in text
    assert f'taken over once it is {output_lock.EMPTY_HOLD_STALE_S:.0f} s old' in text
    assert f'remove {held}' in text and text.count(str(held)) == 2
    assert held.read_bytes() == b''


def test_without_flock_many_runs_racing_an_empty_stale_hold_let_exactly_one_in(tmp_path):
    # Eight runs started at once on an empty .held file past the bound, four times: one holds
    import multiprocessing
    from rog_ros.nodes import output_lock
    ctx = multiprocessing.get_context('fork')
    for round_ in range(4):
        out = tmp_path / f'fleet{round_}'
        out.mkdir()
        _empty_hold(out, output_lock.EMPTY_HOLD_STALE_S + 5)
        start, done, results = ctx.Event(), ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_race_by_file, args=(str(out), start, results, done))
                 for _ in range(8)]
        try:
            for proc in procs:
                proc.start()
            start.set()
            got = [results.get(timeout=30) for _ in procs]
        finally:
            done.set()
            for proc in procs:
                proc.join(30)
        assert sum(got) == 1, f'round {round_}: {sum(got)} runs hold the folder'
        assert sorted(os.listdir(out)) == [LOCK_FILE + output_lock.HELD_SUFFIX]


def _fd_path(fd: int) -> str:
    """Return the path open as ``fd`` ('' if unknown)."""
    try:
        return os.readlink(f'/proc/self/fd/{fd}')
    except OSError:
        return ''


def _hold_without_links(out, name, events, results, role):
    """
    Hold ``out`` by file as run ``name`` where there are no hard links (forked process).

    ``role`` 'creator': its first write into the ``.held`` file says 'reached-write' and
    waits for 'go-write' (a live run stalled between making the file and writing its line);
    'taker': its first rename of the ``.held`` file says 'reached-rename' and waits for
    'go-rename' (a take-over that has judged the empty file stale, about to set it aside).
    """
    import errno
    import fcntl
    from rog_ros.nodes import output_lock
    fcntl.flock = _no_flock('ENOLCK')

    def no_link(*args, **kwargs):
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))
    os.link = no_link
    write, rename, paused = os.write, os.rename, []
    held = os.path.join(out, LOCK_FILE + output_lock.HELD_SUFFIX)

    def paused_write(fd, data):
        """Write into the .held file only once told to."""
        if role == 'creator' and not paused and _fd_path(fd) == held:
            paused.append(1)
            events['reached-write'].set()
            events['go-write'].wait(20)
        return write(fd, data)

    def paused_rename(src, dst):
        """Set the .held file aside only once told to."""
        if role == 'taker' and not paused and str(src) == held:
            paused.append(1)
            events['reached-rename'].set()
            events['go-rename'].wait(20)
        return rename(src, dst)
    os.write, os.rename = paused_write, paused_rename
    try:
        fd, _ = output_lock.hold_by_file(os.path.join(out, LOCK_FILE), name, 'ENOLCK')
    except OutputInUse:
        fd = None
    results.put((name, fd is not None, os.getpid()))
    events['done'].wait(30)


@pytest.mark.parametrize('order', ['creator-writes-first', 'taker-sets-aside-first'])
def test_without_flock_a_live_run_stalled_making_its_hold_is_not_taken_from_it(
        tmp_path, order):
    # Where there are no hard links a .held file is made O_EXCL, then written: a live run
    # stalled between the two past the bound (stopped, swapped out) has an empty file that a
    # second run takes over. Whichever acts first, exactly one of the two holds the folder
    # and the .held file there names it
    import multiprocessing
    import time
    from rog_ros.nodes import output_lock
    ctx = multiprocessing.get_context('fork')
    out = tmp_path / 'fleet'
    out.mkdir()
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    events = {k: ctx.Event() for k in ('reached-write', 'go-write', 'reached-rename',
                                       'go-rename', 'done')}
    results = ctx.Queue()
    procs = []

    def start(name):
        """Start run ``name``."""
        proc = ctx.Process(target=_hold_without_links,
                           args=(str(out), name, events, results, name))
        proc.start()
        procs.append(proc)
    got = {}
    try:
        start('creator')
        assert events['reached-write'].wait(20)         # its empty file made, not written
        assert held.read_bytes() == b''
        then = time.time() - output_lock.EMPTY_HOLD_STALE_S - 5
        os.utime(str(held), (then, then))               # (stalled past the bound)
        start('taker')
        assert events['reached-rename'].wait(20)        # judged stale, about to set it aside
        if order == 'creator-writes-first':
            events['go-write'].set()
            name, holds, pid = results.get(timeout=20)
            got[name] = (holds, pid)
            events['go-rename'].set()
        else:
            events['go-rename'].set()
            name, holds, pid = results.get(timeout=20)
            got[name] = (holds, pid)
            events['go-write'].set()
        name, holds, pid = results.get(timeout=20)
        got[name] = (holds, pid)
        # Assert
        holders = [pid for holds, pid in got.values() if holds]
        assert len(holders) == 1, got
        assert held.read_text().split('\n')[0].split(' ')[1] == str(holders[0])
        winner = 'creator' if order == 'creator-writes-first' else 'taker'
        assert got[winner][0], got
    finally:
        events['go-write'].set()
        events['go-rename'].set()
        events['done'].set()
        for proc in procs:
            proc.join(30)


_KILLED = 77
"""Exit status of a run killed by :func:`_run_killed_at`."""

_DISK_STEPS = ('open', 'write', 'fsync', 'ftruncate', 'link', 'rename', 'unlink', 'mkdir',
               'rmdir')
"""The calls a run's hold makes on disk: a kill before each one leaves each state."""


def _run_killed_at(step: int, scenario: str, out: str) -> None:
    """
    Hold and let go of ``out`` (in a forked process), killed before its ``step``-th disk call.

    Killed as SIGKILL kills: ``os._exit``, no ``finally`` run, no file closed by Python.
    Exits 0 if the run made fewer calls (it held and let go whole), 1 if it raised, else
    ``_KILLED``.
    """
    from rog_ros.nodes import output_lock
    calls = [0]

    def killed_before(real):
        def call(*args, **kwargs):
            calls[0] += 1
            if calls[0] == step:
                os._exit(_KILLED)
            return real(*args, **kwargs)
        return call
    try:
        for name in _DISK_STEPS:
            setattr(os, name, killed_before(getattr(os, name)))
        if scenario in ('flock', 'by-file-empty-run', 'nolock'):
            with output_lock.held_output(out, 'rog fleet'):
                pass
        else:
            OutputLock.take(out, 'rog fleet').release()
    except BaseException:   # (refused or failed: not a whole run, not the sweep's end)
        os._exit(1)
    os._exit(0)


def _prepare(scenario: str, out, dead: int) -> None:
    """Make ``out`` as ``scenario`` starts from (a killed run's hold to take over, or none)."""
    import socket
    from rog_ros.nodes import output_lock
    if scenario in ('flock', 'by-file', 'by-file-empty-run', 'nolock'):
        return
    out.mkdir()
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    if scenario == 'over-stale':
        held.write_text(f'{socket.gethostname()} {dead} - {output_lock.pid_space()}\n'
                        f'rog fleet, pid {dead}\n')
    else:
        _empty_hold(out, output_lock.EMPTY_HOLD_STALE_S + 5)


@pytest.mark.parametrize('scenario', ['flock', 'by-file', 'by-file-empty-run', 'nolock',
                                      'over-stale', 'over-empty'])
def test_a_run_killed_at_any_step_of_its_hold_leaves_a_folder_the_next_run_takes(
        tmp_path, monkeypatch, scenario):
    # A run killed at each step of taking, taking over and letting go of its folder (before
    # each disk call: open, write, fsync, link, rename, unlink, mkdir, rmdir; a run that
    # writes nothing removes its folder; a nolock NFS mount holds by flock and file): the next run
    # takes the folder without the user (an empty hold past the bound; everything aged an
    # hour, as a later run finds it), holds it alone, and lets go of it leaving only the lock
    # file: nothing of the killed run stays. Before, a kill between making the .held file and
    # writing it refused every later run, and one while it was let go left .held.gone- for ever
    import shutil
    import time
    from rog_ros.nodes import output_lock
    if scenario == 'nolock':
        monkeypatch.setattr(output_lock, '_mounts', lambda: [
            ('/', 'ext4', 'rw'), (str(tmp_path), 'nfs', 'rw,vers=3,nolock')])
    elif scenario != 'flock':
        import fcntl
        monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    dead = _dead_pid()
    killed_at = []
    for step in range(1, 200):
        out = tmp_path / f'step{step}'
        _prepare(scenario, out, dead)
        pid = os.fork()
        if pid == 0:
            _run_killed_at(step, scenario, str(out))
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status), status
        if os.WEXITSTATUS(status) == 0:
            break                               # (a run of step - 1 calls: all swept)
        assert os.WEXITSTATUS(status) == _KILLED
        killed_at.append(step)
        then = time.time() - 3600
        for name in os.listdir(str(out)) if out.is_dir() else []:
            os.utime(str(out / name), (then, then), follow_symlinks=False)
        # Act: the next run
        try:
            lock = OutputLock.take(str(out), 'rog sim')
        except OutputInUse as exc:
            raise AssertionError(f'{scenario}: killed before disk call {step}, the next run '
                                 f'was refused: {exc} (left: {sorted(os.listdir(out))})')
        try:
            if scenario != 'flock':
                held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
                assert held.read_text().split(' ')[1] == str(os.getpid()), step
        finally:
            lock.release()
        assert sorted(os.listdir(str(out))) == [LOCK_FILE], (scenario, step)
        shutil.rmtree(str(out))
    assert len(killed_at) >= 5 and killed_at == list(range(1, len(killed_at) + 1))
    assert os.WEXITSTATUS(status) == 0          # (swept to the end)


def test_without_flock_a_hold_file_that_cannot_be_read_is_refused_naming_it(
        tmp_path, monkeypatch):
    # A .held that is a symbolic link (or a folder) could not be read: taken as no hold, its
    # O_EXCL hold then failed ten times and the refusal said only 'run again'
    import fcntl
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    for kind in ('link', 'folder'):
        out = tmp_path / kind
        out.mkdir()
        held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
        if kind == 'link':
            held.symlink_to(tmp_path / 'elsewhere')
        else:
            held.mkdir()
        with pytest.raises(OutputInUse) as refused:
            OutputLock.take(str(out), 'rog sim')
        text = str(refused.value)
        assert '\n' not in text and text.startswith(f'{out} cannot be taken: {held} is')
        assert f'{held} is a symbolic link' in text if kind == 'link' else (
            f'{held} is not a plain file' in text)
        assert f'if no run uses that folder, remove {held}' in text
        assert 'times; run again' not in text
        assert os.path.lexists(str(held))


def test_without_flock_a_hold_whose_line_cannot_be_written_is_no_hold(tmp_path, monkeypatch):
    # On a full disk the .held file was made and its line not written: the run held the
    # folder with an empty file, which a later run takes over as a killed run's
    import errno
    import fcntl
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    out = tmp_path / 'fleet'
    real_write = os.write

    def full(fd, data):
        """Refuse to write a hold, as a full disk does."""
        if output_lock.HELD_SUFFIX in _fd_path(fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)
    monkeypatch.setattr(os, 'write', full)
    with pytest.raises(OutputInUse) as refused:
        OutputLock.take(str(out), 'rog fleet')
    monkeypatch.setattr(os, 'write', real_write)
    text = str(refused.value)
    assert '\n' not in text and 'cannot be made' in text and 'No space left' in text
    assert sorted(os.listdir(str(out))) == [LOCK_FILE]


def test_a_folder_beside_a_hold_that_names_no_run_is_refused_as_it_is(tmp_path, monkeypatch):
    # An empty (young) hold in a folder above or below the one asked for names no run: the
    # refusals said 'in use by another run (...)' and to wait until that run ends
    import fcntl
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    outer = tmp_path / 'rp'
    outer.mkdir()
    (outer / LOCK_FILE).write_bytes(b'')
    held = _empty_hold(outer, 1)
    for out, said in ((outer / 'inner', f'{outer / "inner"} is inside {outer}, which '),
                      (tmp_path, f'{tmp_path} holds {outer}, which ')):
        with pytest.raises(OutputInUse) as refused:
            OutputLock.take(str(out), 'rog compare')
        text = str(refused.value)
        assert '\n' not in text and text.startswith(f'{said}cannot be taken: {held} is empty')
        assert f'remove {held} now' in text and 'another run' not in text


def test_without_flock_a_hold_appears_under_its_name_only_once_written(tmp_path, monkeypatch):
    # A run stopped while it makes its hold (here: just before the link) has no .held file
    # yet, so no empty one: its line is written and synced in a file of its own name first.
    # A second run meanwhile holds the folder; the first is then refused naming it
    import fcntl
    import multiprocessing
    import socket
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    ctx = multiprocessing.get_context('fork')
    out = tmp_path / 'fleet'
    out.mkdir()
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    events = {k: ctx.Event() for k in ('reached-link', 'go-link', 'done')}
    results = ctx.Queue()
    first = ctx.Process(target=_hold_paused_at_link, args=(str(out), events, results))
    first.start()
    try:
        assert events['reached-link'].wait(20)
        assert not held.exists()
        mine, = out.glob(f'{held.name}{output_lock.NEW_INFIX}{socket.gethostname()}-'
                         f'{first.pid}-*')
        assert mine.read_text().split('\n')[0].split(' ')[:2] == [socket.gethostname(),
                                                                  str(first.pid)]
        second = OutputLock.take(str(out), 'rog sim')
        try:
            events['go-link'].set()
            assert results.get(timeout=20) is False             # the first: refused
            assert held.read_text().split(' ')[1] == str(os.getpid())
        finally:
            second.release()
    finally:
        events['go-link'].set()
        events['done'].set()
        first.join(30)
    assert sorted(os.listdir(str(out))) == [LOCK_FILE]


def _hold_paused_at_link(out, events, results):
    """Hold ``out`` by file (forked), stopped before its first ``os.link`` until told."""
    import fcntl
    fcntl.flock = _no_flock('ENOLCK')
    link = os.link

    def paused_link(*args, **kwargs):
        events['reached-link'].set()
        events['go-link'].wait(20)
        os.link = link
        return link(*args, **kwargs)
    os.link = paused_link
    try:
        lock = OutputLock.take(out, 'rog fleet')
    except OutputInUse:
        lock = None
    results.put(lock is not None)
    events['done'].wait(30)


def test_without_flock_another_containers_hold_being_made_under_this_pid_is_not_removed(
        tmp_path, monkeypatch):
    # Two containers with the host's network (its name) number their processes each from 1:
    # a run made its hold in HELD.new-HOST-PID after removing whatever had that name, there
    # another container's run's written line about to be linked (that run's link then failed,
    # or linked this run's file as its own). Each run's file now has a name of its own
    import fcntl
    import socket
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    out = tmp_path / 'fleet'
    out.mkdir()
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    theirs = out / f'{held.name}{output_lock.NEW_INFIX}{socket.gethostname()}-{os.getpid()}'
    boot = output_lock._boot_id()
    text = (f'{socket.gethostname()} {os.getpid()} {boot}:1 pid:[1]\n'
            f'rog fleet, pid {os.getpid()} in another container\n')
    theirs.write_text(text)
    lock = OutputLock.take(str(out), 'rog sim')
    try:
        assert held.read_text().split('\n')[0].split(' ')[1] == str(os.getpid())
        assert theirs.read_text() == text
    finally:
        lock.release()
    assert sorted(os.listdir(str(out))) == sorted([LOCK_FILE, theirs.name])
    assert theirs.read_text() == text


def test_without_flock_a_hold_whose_own_file_a_cleaner_took_is_made_again(
        tmp_path, monkeypatch):
    # A holder's cleaner removes an empty HELD.new- file it takes for a killed run's (a clock
    # ahead of the file server's): the run making it then failed its link with 'cannot be
    # made (No such file or directory); use a folder on a local disk'. It makes it again
    import fcntl
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    out = tmp_path / 'fleet'
    real_link, taken = os.link, []

    def cleaned_first(src, dst, *args, **kwargs):
        """Remove the hold's own file just before its first link, as such a cleaner does."""
        if not taken and output_lock.NEW_INFIX in os.path.basename(str(src)):
            taken.append(src)
            os.unlink(src)
        return real_link(src, dst, *args, **kwargs)
    monkeypatch.setattr(os, 'link', cleaned_first)
    lock = OutputLock.take(str(out), 'rog sim')
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    try:
        assert taken and held.read_text().split(' ')[1] == str(os.getpid())
    finally:
        lock.release()
    assert sorted(os.listdir(str(out))) == [LOCK_FILE]


class _Hung(Exception):
    """A run still waiting after its time (no OSError: the code under test catches those)."""


def test_without_flock_a_hold_file_that_is_a_fifo_is_refused_not_waited_on(
        tmp_path, monkeypatch):
    # A .held that is a FIFO was opened for reading, which waits for a writer: the run hung
    import fcntl
    import signal
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    out = tmp_path / 'fleet'
    out.mkdir()
    held = out / (LOCK_FILE + output_lock.HELD_SUFFIX)
    os.mkfifo(str(held))

    def hung(signum, frame):
        raise _Hung('the run waited on the FIFO')
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        with pytest.raises(OutputInUse) as refused:
            OutputLock.take(str(out), 'rog sim')
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    text = str(refused.value)
    assert '\n' not in text and f'{held} is not a plain file' in text
    assert f'if no run uses that folder, remove {held}' in text


def test_a_lock_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    # A .rog.lock that is a FIFO was opened for reading to ask who holds it, which waits for
    # a writer: a run into that folder, or into any folder up to three levels above it, hung
    import signal
    out = tmp_path / 'fleet'
    out.mkdir()
    lock_file = out / LOCK_FILE
    os.mkfifo(str(lock_file))

    def hung(signum, frame):
        raise _Hung('the run waited on the FIFO')
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        with pytest.raises(OutputInUse) as refused:
            OutputLock.take(str(out), 'rog sim')
        outer = OutputLock.take(str(tmp_path), 'rog compare')     # (a folder above it)
        outer.release()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    text = str(refused.value)
    assert '\n' not in text and f'{lock_file} is a symbolic link or not a plain file' in text
    assert sorted(os.listdir(str(out))) == [LOCK_FILE]


def test_without_flock_an_empty_stale_hold_that_cannot_be_removed_is_said_as_it_is(
        tmp_path, monkeypatch):
    # An empty hold past the bound that cannot be set aside (another user's, in a sticky
    # folder) was refused as 'in use by another run (HELD (empty); that run has ended, ...);
    # ... wait until that one ends': a run that is named nowhere, said to hold and to have ended
    import errno
    import fcntl
    from rog_ros.nodes import output_lock
    monkeypatch.setattr(fcntl, 'flock', _no_flock('ENOLCK'))
    out = tmp_path / 'fleet'
    out.mkdir()
    held = _empty_hold(out, output_lock.EMPTY_HOLD_STALE_S + 5)
    real_rename = os.rename

    def sticky(src, dst, *args, **kwargs):
        """Refuse to move the hold, as a sticky folder does another user's file."""
        if str(src) == str(held):
            raise OSError(errno.EPERM, os.strerror(errno.EPERM))
        return real_rename(src, dst, *args, **kwargs)
    monkeypatch.setattr(os, 'rename', sticky)
    with pytest.raises(OutputInUse) as refused:
        OutputLock.take(str(out), 'rog sim')
    text = str(refused.value)
    assert '\n' not in text and text.startswith(f'{out} cannot be taken: {held} is empty')
    assert 'Operation not permitted' in text and 'have its owner remove it' in text
    assert 'another run' not in text and 'has ended' not in text
    assert held.read_bytes() == b''
