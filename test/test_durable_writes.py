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
Files a robot keeps reach the disk whole: synced, and their names synced with their folders.

A power cut right after ``rog security key`` or ``rog security keystore`` said they were done
could leave an empty key or certificate, or none: nothing of the keystore was synced, and a
key file was created under its name before it was filled (a crash midway left it empty, and
'File exists' refused the retry).
"""

import os
import stat

import pytest

from rog_ros import atomic
from rog_ros.nodes import fleet_key


class _Syncs:
    """Record what each ``os.fsync`` synced: (device, inode, folder?, ``watch`` existed?)."""

    def __init__(self, monkeypatch, watch=None):
        """Wrap ``os.fsync``; ``watch``: a path whose existence is noted at every sync."""
        self.calls, self.watch = [], watch
        real = os.fsync

        def fsync(fd):
            """Note what ``fd`` is, then sync it."""
            st = os.fstat(fd)
            there = self.watch is not None and os.path.lexists(self.watch)
            self.calls.append((st.st_dev, st.st_ino, stat.S_ISDIR(st.st_mode), there))
            return real(fd)
        monkeypatch.setattr(os, 'fsync', fsync)

    def synced(self, path) -> bool:
        """Tell whether the file or folder at ``path`` was synced."""
        st = os.lstat(path)
        return any(c[:2] == (st.st_dev, st.st_ino) for c in self.calls)


def test_a_key_file_gets_its_name_only_once_its_key_is_on_the_disk(tmp_path, monkeypatch):
    """Sync the key before it has its name, then its folder; mode 0600 from the start."""
    # Arrange
    path = tmp_path / 'fleet.key'
    syncs = _Syncs(monkeypatch, watch=str(path))
    # Execute
    key = fleet_key.write_key_file(str(path))
    # Assert
    st = os.stat(path)
    data_syncs = [c for c in syncs.calls if c[:2] == (st.st_dev, st.st_ino)]
    assert data_syncs and not any(c[3] for c in data_syncs)    # named only once synced
    assert syncs.synced(tmp_path)                               # and the name synced
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert fleet_key.read_key_file(str(path)).fingerprint == key.fingerprint
    assert sorted(os.listdir(tmp_path)) == ['fleet.key']       # no temporary file left


def test_a_key_file_is_still_created_only_where_none_is(tmp_path):
    """Refuse an existing file (left as it was), as O_EXCL did; a link too."""
    # Arrange
    (tmp_path / 'fleet.key').write_text('mine\n')
    os.symlink(str(tmp_path / 'elsewhere'), str(tmp_path / 'link.key'))
    # Execute, Assert
    for name in ('fleet.key', 'link.key'):
        with pytest.raises(FileExistsError) as refused:
            fleet_key.write_key_file(str(tmp_path / name))
        assert refused.value.filename == str(tmp_path / name)
    assert (tmp_path / 'fleet.key').read_text() == 'mine\n'
    assert not (tmp_path / 'elsewhere').exists()
    assert sorted(os.listdir(tmp_path)) == ['fleet.key', 'link.key']


def test_a_key_file_cut_short_leaves_no_file_behind(tmp_path, monkeypatch):
    """A write that fails (a full disk) leaves nothing: a retry does not meet 'File exists'."""
    # Arrange
    def full(fd):
        """Fail as a full disk does."""
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(os, 'fsync', full)
    # Execute
    with pytest.raises(OSError) as refused:
        fleet_key.write_key_file(str(tmp_path / 'fleet.key'))
    # Assert
    assert refused.value.filename == str(tmp_path / 'fleet.key')
    assert os.listdir(tmp_path) == []


def _unnamed_files_here(folder) -> bool:
    """Tell whether ``folder``'s file system makes unnamed files (``O_TMPFILE``)."""
    try:
        os.close(os.open(str(folder), getattr(os, 'O_TMPFILE', 0) | os.O_WRONLY, 0o600))
    except (OSError, ValueError):
        return False
    return hasattr(os, 'O_TMPFILE') and os.path.isdir('/proc/self/fd')


def test_a_key_being_written_has_no_other_name_a_sigkill_could_leave(tmp_path, monkeypatch):
    """Hold the key in an unnamed file until it is linked: a kill leaves no copy behind."""
    # Arrange
    if not _unnamed_files_here(tmp_path):
        pytest.skip('no O_TMPFILE on this file system')
    seen = []
    real = os.fsync

    def fsync(fd):
        """Note the folder's names at each sync (the key's own before it is named)."""
        seen.append(sorted(os.listdir(str(tmp_path))))
        return real(fd)
    monkeypatch.setattr(os, 'fsync', fsync)
    # Execute
    fleet_key.write_key_file(str(tmp_path / 'fleet.key'))
    # Assert: before, '.tmp-XXXXXXXXfleet.key' (0600, the key) was there at the first sync
    assert seen[0] == []
    assert os.listdir(str(tmp_path)) == ['fleet.key']


def test_a_key_is_written_whole_where_there_are_no_unnamed_files(tmp_path, monkeypatch):
    """Fall back to a locked temporary file beside the key, removed once it is linked."""
    # Arrange
    monkeypatch.delattr(os, 'O_TMPFILE', raising=False)
    # Execute
    key = fleet_key.write_key_file(str(tmp_path / 'fleet.key'))
    # Assert
    assert fleet_key.read_key_file(str(tmp_path / 'fleet.key')).fingerprint == key.fingerprint
    assert stat.S_IMODE(os.stat(tmp_path / 'fleet.key').st_mode) == 0o600
    assert os.listdir(str(tmp_path)) == ['fleet.key']


def test_key_temporaries_a_killed_run_left_are_removed_by_the_next(tmp_path, capsys):
    """Remove the 0600 copies a SIGKILL left; keep one being written and others' files."""
    # Arrange: what a SIGKILL midway left (this version's name, and the earlier one's)
    import fcntl
    from rog_ros import cli
    secret = fleet_key.generate_key_text() + '\n'
    left = ['.tmp-new-k1l2m3n4fleet.key', '.tmp-new-a1b2c3d4robot1.key',
            '.tmp-abcd1234fleet.key']
    kept = ['.tmp-abcd1234summary.json',        # a result being written: not a key's
            '.tmp-new-busy0000robot2.key']      # a key being written by a live process
    for name in left + kept:
        (tmp_path / name).write_text(secret)
        os.chmod(str(tmp_path / name), 0o600)
    busy = os.open(str(tmp_path / kept[1]), os.O_RDONLY)
    fcntl.flock(busy, fcntl.LOCK_EX)
    # Execute
    try:
        status = cli.main(['security', 'key', str(tmp_path / 'fleet.key')])
    finally:
        os.close(busy)
    # Assert
    err = capsys.readouterr().err
    assert status == 0
    assert f'removed 3 temporary key file(s) that an interrupted run left in {tmp_path}' in err
    assert sorted(os.listdir(str(tmp_path))) == sorted(kept + ['fleet.key'])


def test_a_users_own_files_named_like_key_temporaries_are_kept(tmp_path):
    """Remove only what a key write leaves: mkstemp's name, mode 0600, a key's size."""
    # Arrange: a user's files that start with .tmp-new- (all were removed before)
    own = {'.tmp-new-notes.txt': 0o600,             # not 8 random characters then a name
           '.tmp-new-x': 0o600,                     # no name after them
           '.tmp-new-abcd1234plan.md': 0o644,       # not a key's mode
           '.tmp-new-abcd1234backup.tar': 0o600}    # larger than any key
    for name, mode in own.items():
        (tmp_path / name).write_text('x' * (10_000 if name.endswith('.tar') else 10))
        os.chmod(str(tmp_path / name), mode)
    (tmp_path / '.tmp-new-k1l2m3n4fleet.key').write_text(fleet_key.generate_key_text())
    os.chmod(str(tmp_path / '.tmp-new-k1l2m3n4fleet.key'), 0o600)
    # Execute
    removed = atomic.remove_new_file_leftovers(str(tmp_path), 'fleet.key')
    # Assert
    assert removed == 1
    assert sorted(os.listdir(str(tmp_path))) == sorted(own)


@pytest.mark.parametrize('refusal', ['EOPNOTSUPP', 'EISDIR', 'EINVAL'])
def test_a_file_system_refusing_unnamed_files_gets_the_named_way(
        tmp_path, monkeypatch, refusal):
    """Fall back where O_TMPFILE is refused as old kernels and some file systems do."""
    # Arrange
    import errno
    real = os.open

    def refusing(path, flags, *args, **kwargs):
        """Refuse an O_TMPFILE open as such a file system does."""
        if flags & getattr(os, 'O_TMPFILE', 0) == getattr(os, 'O_TMPFILE', -1):
            raise OSError(getattr(errno, refusal), os.strerror(getattr(errno, refusal)))
        return real(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, 'open', refusing)
    old = os.umask(0o277)
    # Execute
    try:
        key = fleet_key.write_key_file(str(tmp_path / 'fleet.key'))
    finally:
        os.umask(old)
    # Assert
    assert fleet_key.read_key_file(str(tmp_path / 'fleet.key')).fingerprint == key.fingerprint
    assert stat.S_IMODE(os.stat(tmp_path / 'fleet.key').st_mode) == 0o600
    assert os.listdir(str(tmp_path)) == ['fleet.key']


def test_a_key_is_written_whole_without_proc(tmp_path, monkeypatch):
    """Take the named way where /proc is not mounted (no /proc/self/fd to link by)."""
    real, asked = os.path.isdir, []

    def isdir(path):
        """Tell that /proc/self/fd is missing, as in a chroot without /proc."""
        asked.append(path)
        return False if str(path).startswith('/proc') else real(path)
    monkeypatch.setattr(os.path, 'isdir', isdir)
    key = fleet_key.write_key_file(str(tmp_path / 'fleet.key'))
    assert '/proc/self/fd' in asked
    assert fleet_key.read_key_file(str(tmp_path / 'fleet.key')).fingerprint == key.fingerprint
    assert stat.S_IMODE(os.stat(tmp_path / 'fleet.key').st_mode) == 0o600
    assert os.listdir(str(tmp_path)) == ['fleet.key']


def test_an_unnamed_key_is_0600_whatever_the_umask(tmp_path):
    """Give the linked key mode 0600 under umask 0o277 (O_TMPFILE alone gave 0400)."""
    old = os.umask(0o277)
    try:
        fleet_key.write_key_file(str(tmp_path / 'fleet.key'))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / 'fleet.key').st_mode) == 0o600


def test_a_key_file_made_meanwhile_is_never_replaced(tmp_path, monkeypatch):
    """Refuse (File exists) when another process names the key file just before the link."""
    # Arrange: the other process's key appears between the check and the link
    real = os.link
    theirs = tmp_path / 'fleet.key'

    def racing(*args, **kwargs):
        """Let the other process write its key first."""
        if not theirs.exists():
            theirs.write_text('theirs\n')
        return real(*args, **kwargs)
    monkeypatch.setattr(os, 'link', racing)
    # Execute
    with pytest.raises(FileExistsError):
        fleet_key.write_key_file(str(theirs))
    # Assert
    assert theirs.read_text() == 'theirs\n'
    assert os.listdir(str(tmp_path)) == ['fleet.key']


def test_a_temporary_removed_before_it_was_locked_is_made_again(tmp_path, monkeypatch):
    """Write the key anyway when another run's clean-up took the fresh temporary file."""
    # Arrange: the other run removes it between mkstemp and the lock, once
    import fcntl
    monkeypatch.delattr(os, 'O_TMPFILE', raising=False)
    real, taken = fcntl.flock, []

    def flock(fd, operation):
        """Remove the temporary file first, as a clean-up racing this write does."""
        if not taken:
            taken.extend(n for n in os.listdir(str(tmp_path)) if n.startswith('.tmp-new-'))
            os.unlink(str(tmp_path / taken[0]))
        return real(fd, operation)
    monkeypatch.setattr(fcntl, 'flock', flock)
    # Execute
    key = fleet_key.write_key_file(str(tmp_path / 'fleet.key'))
    # Assert: before, 'No such file or directory' for fleet.key
    assert len(taken) == 1
    assert fleet_key.read_key_file(str(tmp_path / 'fleet.key')).fingerprint == key.fingerprint
    assert os.listdir(str(tmp_path)) == ['fleet.key']


def test_every_keystore_file_and_folder_is_synced(tmp_path, monkeypatch):
    """Sync every key, certificate and signed file, every folder, and the keystore's name."""
    # Arrange
    pytest.importorskip('cryptography.x509')
    from rog_ros.nodes import keystore
    syncs = _Syncs(monkeypatch)
    root = tmp_path / 'keystore'
    # Execute
    keystore.create_keystore(root, namespace='/ks', per_rank=1)
    # Assert
    unsynced = []
    for folder, _, files in os.walk(str(root)):
        for path in [folder] + [os.path.join(folder, f) for f in files]:
            if not os.path.islink(path) and not syncs.synced(path):
                unsynced.append(os.path.relpath(path, str(root)))
    assert unsynced == []
    assert syncs.synced(tmp_path)          # the keystore's own name (renamed into place)


def test_a_state_dir_and_a_models_folder_made_for_them_are_synced_in_their_parents(
        tmp_path, monkeypatch):
    """Sync each folder made (--state-dir, model_out's) where its name is: its parent."""
    # Arrange
    import argparse
    import torch
    from rog_ros.nodes import durable
    from rog_ros.nodes.model_file import save_state_dict
    syncs = _Syncs(monkeypatch)
    parser = argparse.ArgumentParser()
    # Execute
    durable.check_durable_args(parser, argparse.Namespace(
        state_dir=str(tmp_path / 'robot' / 'state'), checkpoint_every=10))
    save_state_dict(tmp_path / 'out' / 'run' / 'model.pt', torch.nn.Linear(2, 2))
    # Assert
    for folder in (tmp_path, tmp_path / 'robot', tmp_path / 'out', tmp_path / 'out' / 'run'):
        assert syncs.synced(folder), folder
