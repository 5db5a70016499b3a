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
"""Atomic file writes: the old file or the new one, never a torn one, and no temp left over."""

import os

import pytest
from rog_ros import atomic


def test_write_replaces_the_file_and_leaves_nothing_else(tmp_path):
    path = tmp_path / 'summary.json'
    path.write_text('old')
    atomic.atomic_write_text(path, 'new \u00e9')
    assert path.read_text(encoding='utf-8') == 'new \u00e9'
    assert os.listdir(tmp_path) == ['summary.json']


def test_a_write_that_fails_keeps_the_old_file_and_removes_its_temp(tmp_path, monkeypatch):
    path = tmp_path / 'summary.json'
    path.write_text('old')

    def _fail(fd):
        raise OSError(28, 'No space left on device')

    monkeypatch.setattr(atomic.os, 'fsync', _fail)
    with pytest.raises(OSError, match='No space left') as failed:
        atomic.atomic_write_bytes(path, b'new')
    assert path.read_text() == 'old' and os.listdir(tmp_path) == ['summary.json']
    # the error names the file asked for (a write on a descriptor names none)
    assert failed.value.errno == 28 and failed.value.filename == str(path)


def test_a_figure_is_saved_whole_or_not_at_all(tmp_path, monkeypatch):
    plt = pytest.importorskip('matplotlib.pyplot')
    fig = plt.figure(figsize=(2, 2))
    path = tmp_path / 'plot.png'
    atomic.atomic_save_figure(fig, path, dpi=50)
    assert path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    before = path.read_bytes()

    def _fail(fd):
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(atomic.os, 'fsync', _fail)
    with pytest.raises(OSError) as failed:
        atomic.atomic_save_figure(fig, path, dpi=80)
    plt.close(fig)
    assert failed.value.filename == str(path) and path.read_bytes() == before
    assert os.listdir(tmp_path) == ['plot.png']


def test_a_missing_folder_is_named_by_the_path_asked_for(tmp_path):
    path = tmp_path / 'no' / 'such' / 'trace.csv'
    with pytest.raises(FileNotFoundError) as info:
        atomic.atomic_write_text(path, 'x')
    assert info.value.filename == str(path) and '.tmp-' not in str(info.value)


def _mode(path) -> int:
    return os.stat(path).st_mode & 0o777


def test_a_written_file_gets_the_mode_open_would_give_it(tmp_path):
    """Results and traces honour the umask (not mkstemp's 0600); a secret can ask for 0600."""
    old = os.umask(0o022)
    try:
        atomic.atomic_write_text(tmp_path / 'summary.json', '{}')
        atomic.atomic_write_bytes(tmp_path / 'secret', b'x', mode=0o600)
        os.umask(0o077)
        atomic.atomic_write_text(tmp_path / 'private.csv', 'x')
    finally:
        os.umask(old)
    assert _mode(tmp_path / 'summary.json') == 0o644
    assert _mode(tmp_path / 'secret') == 0o600
    assert _mode(tmp_path / 'private.csv') == 0o600


def test_trace_files_are_readable_and_the_fleet_key_stays_private(tmp_path, monkeypatch):
    import argparse
    from rog_ros import cli
    from rog_ros.nodes import fleet
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv('ROG_FLEET_KEY_FILE', raising=False)
    monkeypatch.delenv('ROG_FLEET_KEY', raising=False)
    old = os.umask(0o022)
    try:
        assert cli.main(['trace', 'gen', 'clean', '--duration', '5', '--out', 'g.csv']) == 0
        assert cli.main(['trace', 'convert', 'g.csv', '--out', 'c.csv']) == 0
        fleet.fleet_key_env(argparse.Namespace(fleet_key_file=None), str(tmp_path / 'run'))
    finally:
        os.umask(old)
    assert _mode(tmp_path / 'g.csv') == 0o644 and _mode(tmp_path / 'c.csv') == 0o644
    assert _mode(tmp_path / 'run' / 'fleet.key') == 0o600


def test_a_device_or_fifo_is_written_to_not_replaced(tmp_path):
    # `--out /dev/null` run as root: the rename put a regular file in place of /dev/null
    import stat
    fifo = tmp_path / 'pipe'
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)      # a reader, so a writer can open
    try:
        atomic.atomic_write_bytes(fifo, b'time_s,mbps\n0,5\n')
        assert os.read(reader, 100) == b'time_s,mbps\n0,5\n'
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['pipe']     # no temporary left


def test_a_write_whose_temporary_file_a_cleaner_took_before_its_lock_makes_another(
        tmp_path, monkeypatch):
    """A cleaner finds the new temporary file unlocked (as a killed write's) and removes it."""
    made = []
    mkstemp = atomic.tempfile.mkstemp

    def _taken_at_first(*args, **kwargs):
        """Make the file, and remove it the first time, between mkstemp and the lock."""
        fd, tmp = mkstemp(*args, **kwargs)
        made.append(os.path.basename(tmp))
        if len(made) == 1:
            assert atomic.remove_write_leftovers(str(tmp_path)) == 1
        return fd, tmp

    monkeypatch.setattr(atomic.tempfile, 'mkstemp', _taken_at_first)
    atomic.atomic_write_bytes(tmp_path / 'model.pt', b'weights')
    assert len(made) == 2 and all(n.startswith('.tmp-rog-') for n in made)
    assert (tmp_path / 'model.pt').read_bytes() == b'weights'
    assert os.listdir(tmp_path) == ['model.pt']


def test_only_the_named_files_leftovers_are_removed_where_a_name_is_given(tmp_path):
    for name in ('.tmp-rog-abcd1234worker_0.pt', '.tmp-rog-abcd1234worker_10.pt',
                 '.tmp-rog-notes.txt', '.tmp-abcd1234model.pt'):
        (tmp_path / name).write_bytes(b'x')
    assert atomic.remove_write_leftovers(tmp_path, 'worker_0.pt') == 1
    assert sorted(os.listdir(tmp_path)) == [
        '.tmp-abcd1234model.pt', '.tmp-rog-abcd1234worker_10.pt', '.tmp-rog-notes.txt']


def test_a_full_disk_at_the_flush_is_said_once_naming_the_file(tmp_path, monkeypatch):
    """The close after a failed flush fails again: the error said still names the file."""
    import errno
    import io

    class _FullDisk(io.FileIO):
        """A file on a full disk: every write fails."""

        def write(self, data):
            """Fail as a full disk does."""
            raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(atomic.os, 'fdopen', lambda fd, mode: io.BufferedWriter(
        _FullDisk(fd, 'w')))
    path = tmp_path / 'model.pt'
    with pytest.raises(OSError) as failed:
        atomic.atomic_write_bytes(path, b'x' * 100)       # (buffered: fails at the flush)
    assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(path)
    assert os.listdir(tmp_path) == []


def test_a_temporary_file_that_cannot_be_removed_leaves_the_write_error_said_and_is_let_go(
        tmp_path, monkeypatch):
    """A disk gone read-only fails the sync, then the removal: the first error is said."""
    import errno
    unlink = os.unlink

    def _read_only(path, *args, **kwargs):
        """Refuse to remove a temporary file, as a read-only file system does."""
        if os.path.basename(path).startswith(atomic.WRITE_TEMP_PREFIX):
            raise OSError(errno.EROFS, 'Read-only file system', path)
        return unlink(path, *args, **kwargs)

    def _io_error(fd):
        """Fail as a disk that went away does."""
        raise OSError(errno.EIO, 'Input/output error')
    monkeypatch.setattr(atomic.os, 'unlink', _read_only)
    monkeypatch.setattr(atomic.os, 'fsync', _io_error)
    path = tmp_path / 'model.pt'
    with pytest.raises(OSError) as failed:
        atomic.atomic_write_bytes(path, b'x' * 100)
    # Assert: the sync's error, naming the file asked for (the removal's named the temporary)
    assert failed.value.errno == errno.EIO and failed.value.filename == str(path)
    monkeypatch.undo()
    # ... and the temporary file was let go: the next run's cleaner removes it
    assert atomic.remove_write_leftovers(tmp_path) == 1 and os.listdir(tmp_path) == []


def test_a_temporary_file_that_cannot_be_checked_after_its_lock_is_not_left_open(
        tmp_path, monkeypatch):
    """A stat of the new temporary file that fails (ESTALE on NFS) left it, and its fd."""
    import errno
    stat_of = os.stat

    def _stale(path, *args, **kwargs):
        """Fail on a write's temporary file, as a stale NFS handle does."""
        if os.path.basename(os.fspath(path)).startswith(atomic.WRITE_TEMP_PREFIX):
            raise OSError(errno.ESTALE, 'Stale file handle', path)
        return stat_of(path, *args, **kwargs)
    before = len(os.listdir('/proc/self/fd'))
    monkeypatch.setattr(atomic.os, 'stat', _stale)
    path = tmp_path / 'model.pt'
    with pytest.raises(OSError) as failed:
        atomic.atomic_write_bytes(path, b'x')
    monkeypatch.undo()
    assert failed.value.errno == errno.ESTALE and failed.value.filename == str(path)
    assert os.listdir(tmp_path) == [] and len(os.listdir('/proc/self/fd')) == before


def test_a_rename_over_a_folder_is_refused_naming_the_file_asked_for(tmp_path):
    """The rename's error named the temporary file first: '.tmp-rog-x2k9model.pt' -> ..."""
    path = tmp_path / 'model.pt'
    path.mkdir()
    (path / 'kept').write_text('a file of the folder')
    with pytest.raises(IsADirectoryError) as failed:
        atomic.atomic_write_bytes(path, b'x')
    assert failed.value.filename == str(path) and '.tmp-' not in str(failed.value)
    assert os.listdir(tmp_path) == ['model.pt'] and os.listdir(path) == ['kept']


_KILLED = 77
"""Exit status of a write killed by :func:`_write_killed_at`."""


def _write_killed_at(step: int, path: str) -> None:
    """
    Replace ``path`` atomically (in a forked process), killed before its ``step``-th disk call.

    Killed as SIGKILL kills (``os._exit``: no ``finally``, no clean-up); halfway through its
    data is one of the steps. Exits 0 if the write made fewer calls (it ended whole), 1 if
    it raised.
    """
    calls = [0]

    def step_done():
        calls[0] += 1
        if calls[0] == step:
            os._exit(_KILLED)

    def killed_before(real):
        def call(*args, **kwargs):
            step_done()
            return real(*args, **kwargs)
        return call

    def write(f):
        f.write(b'n' * 4096)
        f.flush()
        step_done()                     # (half of the data written)
        f.write(b'n' * 4096)
    try:
        for name in ('open', 'fchmod', 'fsync', 'replace', 'rename', 'unlink', 'close'):
            setattr(os, name, killed_before(getattr(os, name)))
        atomic.atomic_write_with(path, write)
    except BaseException:   # (a write that failed did not end whole: not the sweep's end)
        os._exit(1)
    os._exit(0)


@pytest.mark.parametrize('flock', ['flock', 'ENOLCK', 'nolock'])
def test_a_write_killed_at_any_step_leaves_the_old_or_new_file_and_nothing_a_cleaner_keeps(
        tmp_path, monkeypatch, flock):
    # A write killed before each of its disk calls (and halfway through its data), with and
    # without flock, and on an NFS mount with nolock (flock local to each machine): the file
    # is the old one or the new one whole, and the next cleaning (everything aged past the
    # bounds, as a later run finds it) leaves nothing else. Without flock
    # a kill between the first temporary file (made to try flock on it) and its removal left
    # an empty .tmp-rog-XXXXXXXXNAME that no cleaner could lock, so none removed it, ever
    import errno
    import fcntl
    import time
    if flock == 'ENOLCK':
        def no_flock(fd, operation):
            raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
        monkeypatch.setattr(fcntl, 'flock', no_flock)
    if flock == 'nolock':
        monkeypatch.setattr(atomic, 'read_mounts', _nolock_at(tmp_path))
    killed_at = []
    for step in range(1, 100):
        folder = tmp_path / f'step{step}'
        folder.mkdir()
        target = folder / 'model.pt'
        target.write_bytes(b'o' * 100)
        pid = os.fork()
        if pid == 0:
            _write_killed_at(step, str(target))
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status), status
        if os.WEXITSTATUS(status) == 0:
            break
        assert os.WEXITSTATUS(status) == _KILLED
        killed_at.append(step)
        then = time.time() - max(3600, atomic.FOREIGN_TEMP_STALE_S + 60)
        for name in os.listdir(str(folder)):
            os.utime(str(folder / name), (then, then))
        # Act: a later run cleans the folder
        atomic.remove_write_leftovers(str(folder))
        # Assert
        assert os.listdir(str(folder)) == ['model.pt'], (flock, step, os.listdir(str(folder)))
        assert target.read_bytes() in (b'o' * 100, b'n' * 8192), (flock, step)
    assert len(killed_at) >= 5 and os.WEXITSTATUS(status) == 0
    assert target.read_bytes() == b'n' * 8192


def test_without_flock_only_an_empty_old_unlockable_temporary_is_taken_for_a_leftover(
        tmp_path, monkeypatch):
    # Without flock a random-named temporary file is only ever the first try at a lock,
    # removed at once: an empty one past the bound is a killed write's. A young one, or one
    # with data (another machine's live write that can lock it there), is kept
    import errno
    import fcntl
    import time

    def no_flock(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
    monkeypatch.setattr(fcntl, 'flock', no_flock)
    old = time.time() - atomic.UNLOCKABLE_EMPTY_STALE_S - 5
    made = {}
    for name, data, when in (('.tmp-rog-abcdefghmodel.pt', b'', old),
                             ('.tmp-rog-bcdefghimodel.pt', b'', time.time()),
                             ('.tmp-rog-cdefghijmodel.pt', b'x', old)):
        path = tmp_path / name
        path.write_bytes(data)
        os.utime(str(path), (when, when))
        made[name] = path
    assert atomic.remove_write_leftovers(str(tmp_path)) == 1
    assert sorted(os.listdir(str(tmp_path))) == ['.tmp-rog-bcdefghimodel.pt',
                                                 '.tmp-rog-cdefghijmodel.pt']


def test_a_live_write_that_an_nfs_cleaner_cannot_lock_read_only_is_kept(tmp_path, monkeypatch):
    # Some NFS mounts lock exclusively only a file open for writing: a cleaner (read-only)
    # gets EBADF for a live write's locked temporary, as it would without flock, and took an
    # empty one (its data not yet flushed) past the bound for a killed write's. Kept now;
    # only ENOLCK / EOPNOTSUPP (no flock at all) say nothing of the file
    import errno
    import fcntl
    import time

    def read_only_refused(fd, operation):
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))
    monkeypatch.setattr(fcntl, 'flock', read_only_refused)
    live = tmp_path / '.tmp-rog-abcdefghmodel.pt'
    live.write_bytes(b'')
    old = time.time() - atomic.UNLOCKABLE_EMPTY_STALE_S - 5
    os.utime(str(live), (old, old))
    assert atomic.remove_write_leftovers(str(tmp_path)) == 0
    assert os.listdir(str(tmp_path)) == [live.name]


def test_an_empty_unlockable_temporary_is_old_only_by_both_clocks(tmp_path, monkeypatch):
    # A cleaner whose clock is a few minutes ahead of the file server's took another
    # machine's write made just now (empty: its data still in its buffer) for a killed
    # write's and removed it, failing that write. The file system's clock says it is new:
    # kept, and nothing else left; once old by both, removed
    import errno
    import fcntl
    import time

    def no_flock(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
    monkeypatch.setattr(fcntl, 'flock', no_flock)
    live = tmp_path / '.tmp-rog-abcdefghmodel.pt'
    live.write_bytes(b'')
    real_time = time.time
    monkeypatch.setattr(time, 'time', lambda: real_time() + 300)
    assert atomic.remove_write_leftovers(str(tmp_path)) == 0
    assert os.listdir(str(tmp_path)) == [live.name]
    old = real_time() - atomic.UNLOCKABLE_EMPTY_STALE_S - 5
    os.utime(str(live), (old, old))
    assert atomic.remove_write_leftovers(str(tmp_path)) == 1
    assert os.listdir(str(tmp_path)) == []


def _nolock_at(folder, fstype='nfs', options='rw,vers=3,nolock,local_lock=all'):
    """Return a ``read_mounts`` stand-in: ``folder`` is an NFS mount with ``nolock``."""
    return lambda: [('/', 'ext4', 'rw,relatime'), (str(folder), fstype, options)]


# (type, options as /proc/mounts shows them, flock local to this machine)
MOUNTS = [
    # local file systems: one kernel sees every lock (whatever options)
    ('ext4', 'rw,relatime,nolock', False), ('xfs', 'rw,noatime,attr2,inode64', False),
    ('btrfs', 'rw,relatime,ssd,space_cache=v2,subvol=/@', False),
    ('tmpfs', 'rw,nosuid,nodev,size=8g', False),
    ('overlay', 'rw,relatime,lowerdir=/l,upperdir=/u,workdir=/w', False),
    ('fuseblk', 'rw,relatime,user_id=0,group_id=0', False),
    ('fuse.fuse-overlayfs', 'rw,nodev,relatime,user_id=0,group_id=0', False),
    # NFS: the client forwards flock unless nolock / local_lock
    ('nfs', 'rw,vers=3,nolock,local_lock=all', True), ('nfs4', 'rw,local_lock=flock', True),
    ('nfs4', 'rw,vers=4.2,local_lock=none', False), ('nfs', 'rw,vers=3,local_lock=none', False),
    # CIFS/SMB: byte-range locks (flock among them) sent unless nobrl
    ('cifs', 'rw,vers=3.1.1,nobrl', True), ('smb3', 'rw,vers=3.0,nobrl', True),
    ('cifs', 'rw,vers=3.1.1,cache=strict', False),
    # FUSE network mounts whose daemons answer no flock: the kernel keeps it
    ('fuse.sshfs', 'rw,nosuid,nodev,relatime,user_id=1000,group_id=1000', True),
    ('fuse.rclone', 'rw,nosuid,nodev,relatime,user_id=1000,group_id=1000', True),
    ('fuse.s3fs', 'rw,nosuid,nodev,relatime,user_id=0,group_id=0', True),
    ('fuse.gcsfuse', 'rw,nosuid,nodev,relatime,user_id=0,group_id=0', True),
    ('fuse.glusterfs', 'rw,relatime,user_id=0,group_id=0,allow_other', False),
    # 9p (QEMU's server grants every lock), virtiofs (flock forwarded only if asked)
    ('9p', 'rw,sync,dirsync,relatime,access=client,trans=virtio', True),
    ('9p', 'rw,relatime,aname=drvfs;path=C:\\,trans=fd', True),
    ('virtiofs', 'rw,relatime', True),
    # cluster file systems: shared unless their flock is made local
    ('ceph', 'rw,relatime,name=admin,acl', False),
    ('gfs2', 'rw,relatime,localflocks', True), ('gfs2', 'rw,relatime', False),
    ('ocfs2', 'rw,relatime,localflocks,coherency=full', True), ('ocfs2', 'rw,relatime', False),
    ('lustre', 'rw,localflock,lazystatfs', True), ('lustre', 'rw,flock,lazystatfs', False),
    ('afs', 'rw,relatime,flock=local', True), ('afs', 'rw,relatime,flock=openafs', False),
]


@pytest.mark.parametrize('fstype, options, local', MOUNTS)
def test_which_file_systems_lock_on_this_machine_only(tmp_path, fstype, options, local):
    # a folder inside the mount takes its answer; one in a nested local mount or outside, not
    mounts = [('/', 'ext4', 'rw,relatime'), (str(tmp_path), fstype, options),
              (str(tmp_path / 'scratch'), 'tmpfs', 'rw')]
    assert atomic.flock_is_local(str(tmp_path / 'out' / 'model.pt'), mounts) is local
    assert atomic.flock_is_local(str(tmp_path / 'model.pt'), mounts) is local
    assert not atomic.flock_is_local(str(tmp_path / 'scratch' / 'model.pt'), mounts)
    assert not atomic.flock_is_local(str(tmp_path) + '-other/model.pt', mounts)


# (source, type as /proc/mounts shows it, flock local to this machine)
FUSE_SOURCES = [
    # libfuse on a kernel without subtypes, or fstab's form: SUBTYPE#FSNAME, judged as that type
    ('sshfs#robot@nas:/srv/runs', 'fuse', True), ('rclone#gdrive:runs', 'fuse', True),
    ('s3fs#bucket', 'fuse', True), ('glusterfs#nas:/runs', 'fuse', False),
    ('fuse-overlayfs#/l', 'fuse', False),
    # sshfs's and rclone's own fsname (the remote), a daemon's name, a bucket: network
    ('robot@nas:/srv/runs', 'fuse', True), ('nas:/srv/runs', 'fuse', True),
    ('gdrive:runs', 'fuse', True), ('s3fs', 'fuse', True), ('my-bucket', 'fuse', True),
    # a '#' in the remote's path is no SUBTYPE# (before: judged as fuse.robot@nas:runs, unknown)
    ('robot@nas:runs#2', 'fuse', True), ('gdrive:runs#1', 'fuse', True),
    ('nas:my runs#2', 'fuse', True),
    # an unrecognised source: taken for a network mount (the safe side, flock_is_local says why)
    ('/home/robot/.secret', 'fuse', True), ('fuse', 'fuse', True),
    # the subtype decides where there is one; a block device's FUSE mount is local
    ('robot@nas:/srv/runs', 'fuse.glusterfs', False), ('nas:/x', 'fuse.sshfs', True),
    ('/dev/sdb1', 'fuseblk', False),
]


@pytest.mark.parametrize('source, fstype, local', FUSE_SOURCES)
def test_a_fuse_mount_without_subtype_is_judged_by_its_source(tmp_path, source, fstype, local):
    # FUSE network mounts shown as plain fuse (older sshfs: sshfs#user@host:/path; daemons
    # that set no subtype) were taken for local file systems: flock judged to reach every run
    mounts = [('/', 'ext4', 'rw,relatime', '/dev/sda1'),
              (str(tmp_path), fstype, 'rw,nosuid,nodev,relatime,user_id=0,group_id=0', source)]
    assert atomic.flock_is_local(str(tmp_path / 'out' / 'model.pt'), mounts) is local
    assert not atomic.flock_is_local(str(tmp_path) + '-other/model.pt', mounts)


def test_mount_points_with_any_escaped_character_are_matched(tmp_path, monkeypatch):
    # the kernel writes space, tab, newline and backslash as \040 \011 \012 \134 in
    # /proc/mounts; only \040 was decoded, so a mount point with a tab or a backslash matched
    # no path, and a file there was judged on the mount above it (here: a local ext4)
    import builtins
    names = ['with space', 'with\ttab', 'with\\backslash', 'with\nnewline', 'all \t\\\n4']
    escaped = {' ': '\\040', '\t': '\\011', '\n': '\\012', '\\': '\\134'}
    rows = ['/dev/sda1 / ext4 rw,relatime 0 0']
    for name in names:
        (tmp_path / name).mkdir()
        point = ''.join(escaped.get(c, c) for c in str(tmp_path / name))
        source = ''.join(escaped.get(c, c) for c in f'nas:/export/{name}')
        rows.append(f'{source} {point} nfs rw,vers=3,nolock,local_lock=all 0 0')
    table = tmp_path / 'mounts'
    table.write_text('\n'.join(rows) + '\n')
    real_open = builtins.open
    monkeypatch.setattr(atomic, 'open', lambda path, *args, **kwargs: real_open(
        str(table) if path == '/proc/mounts' else path, *args, **kwargs), raising=False)
    mounts = atomic.read_mounts()
    assert [m[0] for m in mounts] == ['/'] + [str(tmp_path / name) for name in names], mounts
    assert [m[1:3] for m in mounts[1:]] == [('nfs', 'rw,vers=3,nolock,local_lock=all')] * 5
    for name in names:
        assert atomic.flock_is_local(str(tmp_path / name / 'model.pt')), name
    assert not atomic.flock_is_local(str(tmp_path / 'model.pt'))
    assert [m[3] for m in mounts] == ['/dev/sda1'] + [f'nas:/export/{n}' for n in names]
    # a byte that is no UTF-8 (a Latin-1 name) comes back as the path os.fsdecode gives it
    table.write_bytes(b'/dev/sdb1 /media/caf\\351\\040x vfat rw 0 0\n')
    assert atomic.read_mounts() == [(os.fsdecode(b'/media/caf\xe9 x'), 'vfat', 'rw',
                                     '/dev/sdb1')]


def _dead_pid() -> int:
    """Return the pid of a process that has ended (and been waited for)."""
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, '-c', 'pass'])
    proc.wait(30)
    return proc.pid


@pytest.mark.parametrize('fstype, options', [
    ('nfs', 'rw,vers=3,nolock,local_lock=all'), ('fuse.sshfs', 'rw,user_id=0,group_id=0'),
    ('9p', 'rw,access=client,trans=virtio'), ('virtiofs', 'rw,relatime')])
def test_on_a_nolock_mount_a_cleaner_keeps_another_machine_s_live_write(
        tmp_path, monkeypatch, fstype, options):
    # Arrange: an NFS mount with nolock (an sshfs, 9p or virtiofs one: the same):
    # flock locks on each machine alone, so a write on
    # another machine holds its temporary's lock there, and this cleaner's flock is granted.
    # The cleaner took it for a killed write's and removed it (the write's rename failed)
    import time
    monkeypatch.setattr(atomic, 'read_mounts', _nolock_at(tmp_path, fstype, options))
    assert atomic.flock_is_local(str(tmp_path / 'out' / 'model.pt'))
    out = tmp_path / 'out'
    out.mkdir()
    theirs = {'.tmp-rog-abcdefghmodel.pt': b'm' * 4096, '.tmp-rog-bcdefghisummary.json': b''}
    for name, data in theirs.items():
        (out / name).write_bytes(data)
    # Act / Assert: young (written within the bound): kept, with their data
    assert atomic.remove_write_leftovers(str(out)) == 0
    assert {n: (out / n).read_bytes() for n in os.listdir(str(out))} == theirs
    # ... written to within the bound by this machine's clock only: kept
    real_time = time.time
    monkeypatch.setattr(time, 'time', lambda: real_time() + atomic.FOREIGN_TEMP_STALE_S + 60)
    assert atomic.remove_write_leftovers(str(out)) == 0
    assert sorted(os.listdir(str(out))) == sorted(theirs)
    monkeypatch.setattr(time, 'time', real_time)
    # ... untouched past the bound by both clocks: a killed write's, removed
    old = real_time() - atomic.FOREIGN_TEMP_STALE_S - 60
    os.utime(str(out / '.tmp-rog-abcdefghmodel.pt'), (old, old))
    assert atomic.remove_write_leftovers(str(out)) == 1
    assert os.listdir(str(out)) == ['.tmp-rog-bcdefghisummary.json']


def test_on_a_nolock_mount_a_write_names_its_temporary_by_host_and_pid(tmp_path, monkeypatch):
    # On an NFS mount with nolock a write's lock tells another machine nothing: its
    # temporary is named by its pid, host, pid namespace and boot, as without flock. A
    # cleaner of a clone of this machine (same name and namespace, another boot) keeps it
    # mid-write; the write ends whole, and nothing is left
    monkeypatch.setattr(atomic, 'read_mounts', _nolock_at(tmp_path))
    target = tmp_path / 'model.pt'
    target.write_bytes(b'old')
    seen = []

    def write(f):
        f.write(b'n' * 4096)
        f.flush()
        seen.extend(os.listdir(str(tmp_path)))
        with monkeypatch.context() as clone:
            clone.setattr(atomic, 'boot_id', lambda: 'a-clone-s-boot')
            seen.append(atomic.remove_write_leftovers(str(tmp_path)))
        f.write(b'n' * 4096)
    atomic.atomic_write_with(str(target), write)
    temp = [n for n in seen[:-1] if n != 'model.pt']
    assert len(temp) == 1 and temp[0].startswith(
        f'{atomic.PID_TEMP_PREFIX}{os.getpid()}-{atomic._host_tag()}-'), seen
    assert seen[-1] == 0
    assert os.listdir(str(tmp_path)) == ['model.pt'] and target.read_bytes() == b'n' * 8192


def test_a_cleaner_keeps_the_pid_named_temporary_of_a_clone_that_shares_this_host_s_name(
        tmp_path, monkeypatch):
    # Arrange: two robots made from one SD card image share the host name and the host's pid
    # namespace (its inode is the same on every machine); without flock (or with nolock) a
    # write is named by pid and a tag of host and namespace only, so a cleaner on one took
    # the other's live write for one of its own dead pids and removed it
    import errno
    import fcntl
    import time

    def no_flock(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
    monkeypatch.setattr(fcntl, 'flock', no_flock)
    pid = _dead_pid()
    monkeypatch.setattr(atomic, 'boot_id', lambda: 'boot-of-robot-a')
    theirs = tmp_path / f'{atomic.PID_TEMP_PREFIX}{pid}-{atomic._host_tag()}-abcdefghmodel.pt'
    theirs.write_bytes(b'm' * 4096)
    # Act: robot B (same name, another boot) cleans the shared folder
    monkeypatch.setattr(atomic, 'boot_id', lambda: 'boot-of-robot-b')
    removed = atomic.remove_write_leftovers(str(tmp_path))
    # Assert: kept (its pid names a process of robot A)
    assert removed == 0 and os.listdir(str(tmp_path)) == [theirs.name]
    # ... and removed by robot B once untouched past the bound by both clocks
    old = time.time() - atomic.FOREIGN_TEMP_STALE_S - 60
    os.utime(str(theirs), (old, old))
    assert atomic.remove_write_leftovers(str(tmp_path)) == 1
    # ... a young one of robot A's own dead pid is removed by robot A at once
    monkeypatch.setattr(atomic, 'boot_id', lambda: 'boot-of-robot-a')
    theirs.write_bytes(b'm' * 4096)
    assert atomic.remove_write_leftovers(str(tmp_path)) == 1
    assert os.listdir(str(tmp_path)) == []
