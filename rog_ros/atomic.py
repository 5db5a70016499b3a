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
Atomic file writes: a crash never leaves a half-written result, trace or report.

Write to a temporary file in the same directory, fsync, then rename over the target. The
file gets the mode a plain ``open(path, 'w')`` would give it (0666 less the umask: 0644
usually), not the temporary file's 0600; a caller writing a secret passes ``mode=0o600``.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import shutil
import socket
import stat
import tempfile
import time

TEMP_PREFIX = '.tmp-'
"""Temporary files of writes before ``WRITE_TEMP_PREFIX``: this + random characters + the
target's name, never locked (a killed write's can only be told by its one owner, by name)."""
WRITE_TEMP_PREFIX = '.tmp-rog-'
"""Temporary files of :func:`atomic_write_with`: this + random characters + the target's name,
``flock``ed while written: :func:`remove_write_leftovers` removes those a killed write left."""
TEMP_NAME_LENGTH = 8
"""How many random characters ``tempfile.mkstemp`` puts in a name (CPython 3.8 to 3.13)."""
PID_TEMP_PREFIX = WRITE_TEMP_PREFIX + 'pid-'
"""Temporary files of :func:`atomic_write_with` where ``flock`` fails (NFS without a lock
manager): this + the writer's pid + ``-`` + :func:`_host_tag` (its host and pid namespace)
+ ``-`` + random characters + the target's name. Unlockable, they are told a killed write's
by the pid."""
_PID_TEMP = re.compile(r'\.tmp-rog-pid-([0-9]+)-([0-9a-f]{8})-([a-z0-9_]{%d})(.+)'
                       % TEMP_NAME_LENGTH, re.DOTALL)


def atomic_write_text(path, text: str, mode: int | None = None) -> None:
    """Replace the file at ``path`` with ``text`` atomically (temp file, fsync, rename)."""
    atomic_write_bytes(path, text.encode('utf-8'), mode)


def atomic_write_bytes(path, data: bytes, mode: int | None = None) -> None:
    """
    Replace the file at ``path`` with ``data`` atomically (temp file, fsync, rename).

    ``mode``: the file's permission bits; None (default) honours the umask as ``open`` does.
    """
    atomic_write_with(path, lambda f: f.write(data), mode)


def atomic_write_with(path, write, mode: int | None = None) -> None:
    """
    Replace the file at ``path`` with what ``write(f)`` writes to ``f``, atomically.

    For data too large to hold twice: a state file or model written by ``torch.save``
    straight into the temporary file (the bytes of a 38 MB model's server checkpoint were
    first built in memory, one more copy of the state at every save). ``f`` is a binary file
    whose first failed write's OSError is the one raised, whatever ``write`` made of it
    (torch turns it into a RuntimeError without the errno); ``f.written`` counts the bytes
    written. ``mode`` as :func:`atomic_write_bytes`.
    """
    path = os.fspath(path)
    if _special(path):
        # /dev/null, /dev/stdout, a FIFO: written to, never renamed over (run as root, a
        # rename replaced the system's /dev/null with a regular file holding the output)
        try:
            with open(path, 'wb') as f:
                _write_through(write, f)
        except OSError as exc:
            raise _naming(exc, path) from None
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = _locked_temp(directory, os.path.basename(path))
    except OSError as exc:  # name the file the caller asked for, not the temp file
        raise _naming(exc, path, always=True) from None
    f = os.fdopen(fd, 'wb')
    try:
        os.fchmod(f.fileno(), 0o666 & ~_umask() if mode is None else mode)
        _write_through(write, f)
        f.flush()
        os.fsync(f.fileno())
        os.replace(tmp, path)       # (still locked: closed, it could be taken for a leftover)
    except BaseException as exc:
        try:
            if os.path.exists(tmp):
                os.unlink(tmp)
        except OSError:     # (a file system gone read-only: the write's own error is said,
            pass            # and the file, let go below, is a leftover a later run removes)
        try:
            f.close()   # (a full disk fails its flush again: the first error is the one said)
        except OSError:
            pass
        if isinstance(exc, OSError):    # (the rename's names the temporary file first)
            raise _naming(exc, path, always=exc.filename == tmp) from None
        raise
    try:
        f.close()
    except OSError as exc:
        raise _naming(exc, path) from None
    fsync_dir(directory)  # the rename itself (a power cut must not bring the old file back)


def _locked_temp(directory: str, name: str) -> tuple:
    """
    Make the temporary file of a write of ``name`` in ``directory`` and lock it: ``(fd, path)``.

    The ``flock`` tells a live write's temporary file from one a SIGKILL left (the kernel
    drops the lock with the process): :func:`remove_write_leftovers` removes only unlocked
    ones. One removed between ``mkstemp`` and the lock is made again. A file system without
    ``flock`` gives a file named by this process instead (``PID_TEMP_PREFIX``): a cleaner
    cannot lock it either, and tells a killed write's by its pid being gone. So does one
    whose ``flock`` locks on this machine alone (:func:`flock_is_local`: NFS ``nolock``),
    where a cleaner of another machine gets the lock of a live write.
    """
    import fcntl
    if flock_is_local(os.path.join(directory, name)):     # (see FOREIGN_TEMP_STALE_S)
        return _pid_temp(directory, name)
    for _ in range(NAMED_TRIES):
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=WRITE_TEMP_PREFIX, suffix=name)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:             # (no flock here: a name that says whose it is)
                _discard(fd, tmp)
                return _pid_temp(directory, name)
            try:
                if os.stat(tmp).st_ino == os.fstat(fd).st_ino:
                    return fd, tmp
            except FileNotFoundError:
                pass
        except BaseException:           # (a stat that fails, Ctrl-C in the wait: the file
            _discard(fd, tmp)           # and its descriptor stayed, until the process ended)
            raise
        os.close(fd)                    # (removed by a cleaner before it was locked)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)


def _pid_temp(directory: str, name: str) -> tuple:
    """Make a write's temporary file named by this process (``PID_TEMP_PREFIX``): (fd, path)."""
    return tempfile.mkstemp(dir=directory, suffix=name, prefix=(
        f'{PID_TEMP_PREFIX}{os.getpid()}-{_host_tag()}-'))


def _host_tag() -> str:
    """
    Return 8 hex digits of this machine's name, pid namespace and boot: where a pid names one.

    Two containers that share the host's network share its name, but each numbers its
    processes on its own: a cleaner in one took a live writer of the other for a killed one
    (its pid names no process there) and removed the file it was writing. Machines made
    from one system image (robots whose SD cards were cloned) share the name too, and the
    host's pid namespace: the boot's id (random at each boot) tells them apart. An earlier
    boot's files are another tag's, removed by age (``FOREIGN_TEMP_STALE_S``).
    """
    try:
        space = os.readlink('/proc/self/ns/pid')
    except OSError:
        space = '-'
    try:
        boot = boot_id()
    except OSError:
        boot = '-'
    return hashlib.sha1(f'{socket.gethostname()} {space} {boot}'.encode(
        errors='replace')).hexdigest()[:8]


def boot_id() -> str:
    """Return this boot's id (``/proc/sys/kernel/random/boot_id``); OSError without it."""
    with open('/proc/sys/kernel/random/boot_id', encoding='ascii') as fh:
        return fh.read().strip()


# File systems whose flock locks on the machine that takes it only, and the mount options that
# make it so (None: always, whatever the options): see flock_is_local for the evidence.
LOCAL_FLOCK_MOUNTS = {
    'cifs': {'nobrl'}, 'smb3': {'nobrl'},
    'gfs2': {'localflocks'}, 'ocfs2': {'localflocks'},
    'lustre': {'localflock'}, 'afs': {'flock=local'},
    '9p': None, 'virtiofs': None,
    'fuse.sshfs': None, 'fuse.rclone': None, 'fuse.s3fs': None, 'fuse.gcsfuse': None,
    'fuse': None,       # (no subtype, none in its source either: taken for a network one)
}


def flock_is_local(path: str, mounts=None) -> bool:
    """
    Tell whether ``flock`` on ``path`` locks on this machine only (a shared file system).

    There a run on another machine takes the same folder, and a cleaner there locks a file
    this machine's write holds locked. Read from ``/proc/mounts`` (or ``mounts``, as
    :func:`read_mounts` gives them; an entry without its source is judged without it), the
    mount holding ``path``'s folder (its longest mount point); False where that cannot be
    read, and for any other file system (ext4, xfs, btrfs, tmpfs, overlay: one kernel sees
    every lock). Each entry, and what it rests on:

    - ``nfs*`` with ``nolock`` or ``local_lock=all|flock``: nfs(5) (such locks exclude only
      other applications on the same client). Without them the client sends flock to the
      server (NLM or NFSv4 locks): shared.
    - ``cifs``/``smb3`` with ``nobrl``: mount.cifs(8), no byte-range lock requests are sent to
      the server (flock is sent as one). Without it: shared.
    - ``fuse.sshfs``, ``fuse.rclone``, ``fuse.s3fs``, ``fuse.gcsfuse``: Linux's FUSE client
      forwards flock only to a daemon whose init reply sets ``FUSE_FLOCK_LOCKS``
      (``fc->no_flock`` otherwise, and ``fuse_file_flock`` then takes the lock in this kernel:
      commits 37fb3a30b462 and 24114504c4d5); libfuse sets it only for a daemon that defines a
      flock operation ("if this method is not implemented, the kernel will still allow file
      locking to work locally", fuse.h). SFTP (v3, what sshfs speaks) has no lock request
      and sshfs defines no flock; the object stores behind rclone, s3fs and gcsfuse (S3, GCS
      and the like) have no lock to forward one to. Other FUSE types are left out (a daemon
      may implement flock, as glusterfs's does; a local one such as ``fuse-overlayfs`` shares
      one kernel).
    - plain ``fuse`` (no subtype): judged by its source. The kernel shows no subtype where
      libfuse's mount with one failed (a kernel without subtypes: libfuse mounts again as
      ``fuse`` with the source ``SUBTYPE#FSNAME``, lib/mount.c), for the fstab form
      ``sshfs#user@host:/path`` that older sshfs documents (mount.fuse), and for daemons that
      mount without libfuse and set no subtype (Go and Rust FUSE libraries). A source
      ``NAME#...`` is judged as ``fuse.NAME`` (``sshfs#...``: local; ``glusterfs#...``: not).
      Sources that name a network mount: ``[user@]host:path`` (sshfs's fsname is the remote
      it was given), ``remote:path`` (rclone's), the daemon's name (``s3fs``, s3fs's default),
      a bucket's name (gcsfuse): local. Any other source (a path, the word ``fuse``) is taken
      as local too, the safe side: a FUSE daemon that does not ask for ``FUSE_FLOCK_LOCKS``
      (libfuse's without a flock operation; the Go and Rust libraries unless told) has its
      flock kept in this kernel, so one serving another machine's files locks here only.
      Taken for a file system one kernel sees when it is not, a cleaner of another machine
      removes a live write (its rename fails) and two machines write one output folder;
      taken for a shared one when it is local, it only costs time (a write's temporary is
      named by its pid, a random-named leftover is kept ``FOREIGN_TEMP_STALE_S``, the output
      lock is held by a ``.held`` file as well).
    - ``9p``: 9P2000.L sends flock to the server as TLOCK after taking it in this kernel
      (``v9fs_file_flock_dotl``; older dialects keep it local), and QEMU's 9p server (virtfs,
      the usual one) answers every TLOCK with success without locking ("all locks are
      handled by the client side lock code path", ``hw/9pfs/9p.c``): this guest only.
    - ``virtiofs``: a FUSE daemon on the host; QEMU's virtiofsd forwards flock only when
      started with ``-o flock`` (default ``no_flock``, its manual), the Rust virtiofsd only
      with remote locks enabled (off by default). The mount table cannot tell: local.
    - ``gfs2``/``ocfs2`` with ``localflocks``, ``lustre`` with ``localflock``, ``afs`` with
      ``flock=local``: their cluster-wide flock turned off (ocfs2.txt: "disables cluster
      aware flock"; Lustre's default ``flock`` is coherent across its clients; kAFS's
      ``flock=local``: no reference is made to the server, commit 6c6c1d63c243). Without
      them: shared. (``ceph`` sends flock to its metadata server, ``ceph_flock``: shared.)
    """
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    rows = read_mounts() if mounts is None else list(mounts)
    found = mount_index(folder, rows)
    if found is None:
        return False
    _, fstype, opts, *source = rows[found]
    opts, source = set(opts.split(',')), source[0] if source else ''
    if fstype == 'fuse':
        fstype = _fuse_source_type(source)
    if fstype.startswith('nfs'):
        return bool({'nolock', 'local_lock=all', 'local_lock=flock'} & opts)
    if fstype not in LOCAL_FLOCK_MOUNTS:
        return False
    needed = LOCAL_FLOCK_MOUNTS[fstype]
    return needed is None or bool(needed & opts)


def mount_index(path: str, rows: list) -> int | None:
    """
    Return the index in ``rows`` of the mount holding real path ``path`` (None: none).

    ``rows`` as :func:`read_mounts` gives them: the longest mount point that is ``path`` or
    a folder above it (a mount over a mount's folder wins, as the kernel resolves it).
    """
    best, found = '', None
    for index, row in enumerate(rows):
        mount = row[0]
        inside = path == mount or path.startswith(mount.rstrip('/') + '/')
        if inside and len(mount) >= len(best):
            best, found = mount, index
    return found


def _fuse_source_type(source: str) -> str:
    """
    Return the type to judge a plain ``fuse`` mount of ``source`` as (see flock_is_local).

    ``NAME#FSNAME`` (libfuse on a kernel without subtypes, fstab's ``sshfs#...``), NAME a
    program's name: ``fuse.NAME``; any other source: ``fuse``. A ``#`` in a remote's path
    (``robot@nas:runs#2``, rclone's ``gdrive:runs#1``) makes no NAME of what is before it.
    """
    name, hashed, _ = source.partition('#')
    return 'fuse.' + name if hashed and _FUSE_PROGRAM.fullmatch(name) else 'fuse'


_FUSE_PROGRAM = re.compile(r'[A-Za-z0-9_.+-]+')
"""A FUSE daemon's program name, as libfuse puts it before ``#`` in a plain fuse's source."""


def read_mounts(path: str = '/proc/mounts') -> list:
    r"""
    Return ``[(mount point, type, options, source), ...]`` from ``/proc/mounts`` ([]: none).

    The kernel writes a space, tab, newline and backslash in a field as an octal escape
    (``\040``, ``\011``, ``\012``, ``\134``: ``mangle`` in fs/proc_namespace.c); every
    three-digit one is decoded, to the bytes it stands for, and the fields to ``str`` as
    :func:`os.fsdecode` gives a path (before, only ``\040``: a mount point with a tab or
    backslash matched no path in it, and a file there was judged on the mount above).
    """
    try:
        with open(path, 'rb') as fh:
            rows = [line.rstrip(b'\n').split(b' ') for line in fh]
    except OSError:
        return []
    return [(_unescape(row[1]), _unescape(row[2]), _unescape(row[3]), _unescape(row[0]))
            for row in rows if len(row) >= 4]


_OCTAL_ESCAPE = re.compile(rb'\\([0-7]{3})')


def _unescape(field: bytes) -> str:
    r"""Decode a mount table field: each ``\NNN`` octal escape to its byte, then as a path."""
    return os.fsdecode(_OCTAL_ESCAPE.sub(lambda m: bytes((int(m.group(1), 8) & 0xff,)), field))


def _discard(fd: int, tmp: str) -> None:
    """Close ``fd`` and remove ``tmp``, a write's temporary file that will not be used."""
    os.close(fd)
    try:
        os.unlink(tmp)
    except OSError:
        pass                            # (gone already, or a leftover a cleaner removes)


class _Sink:
    """
    A binary file that keeps its first failed write's OSError (see atomic_write_with).

    ``written`` counts the bytes written, for callers that report a size: a FIFO has no
    ``tell``.
    """

    def __init__(self, f):
        self._f = f
        self.error = None
        self.written = 0

    def write(self, data):
        """Write ``data`` to the file; remember an OSError before raising it, for the caller."""
        try:
            n = self._f.write(data)
            self.written += memoryview(data).nbytes
            return n
        except OSError as exc:
            if self.error is None:
                self.error = exc
            raise

    def __getattr__(self, name):
        """Give the file's other methods (flush, seek, tell) as they are."""
        return getattr(self._f, name)


def _write_through(write, f) -> None:
    """Call ``write`` on ``f``; raise the file's own OSError if a write of it failed."""
    sink = _Sink(f)
    try:
        write(sink)
    except Exception:  # noqa: B902 - whatever the writer made of a failed write
        if sink.error is not None:
            raise sink.error from None
        raise


def fsync_dir(directory) -> None:
    """
    Make the entries of ``directory`` durable (files created, renamed or removed in it).

    A file's own fsync does not write its name: after a power cut a new file could be
    missing, or a rename undone. Best effort: a file system that cannot sync a folder (some
    network and FUSE ones) is left as it is.
    """
    try:
        dfd = os.open(os.fspath(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def makedirs_synced(path) -> None:
    """
    Make folder ``path`` and its missing parents (as ``os.makedirs(exist_ok=True)``), synced.

    Each folder made is synced in its parent: a file synced in a new folder is not durable
    while the folder's own name is not (after a power cut, a first checkpoint could be gone
    with the ``--state-dir`` made for it, and the run start afresh).
    """
    path = os.path.abspath(os.fspath(path))
    missing, folder = [], path
    while not os.path.lexists(folder) and os.path.dirname(folder) != folder:
        missing.append(folder)
        folder = os.path.dirname(folder)
    os.makedirs(path, exist_ok=True)          # (its errors as they were)
    for folder in reversed(missing):
        fsync_dir(os.path.dirname(folder))


NEW_TEMP_PREFIX = '.tmp-new-'
"""Named temporaries of :func:`create_new_bytes` (keys): ``NEW_TEMP_PREFIX`` + random + name.
Distinct from ``TEMP_PREFIX``: a later call removes those no process still writes."""


def create_new_bytes(path, data: bytes, mode: int = 0o600) -> int:
    """
    Create the file ``path``, which must not exist, holding ``data``: whole or not at all.

    For files made once and never replaced (a fleet key): FileExistsError when ``path``
    exists, as ``O_EXCL`` gives. The data goes to a file without a name in the same folder
    (``O_TMPFILE``, ``mode`` from the start: a key is never readable by others), is synced,
    and is then linked to ``path`` and the folder synced: a power cut or SIGKILL midway
    leaves no file at ``path``, and no copy of the data under another name. Where the file
    system has no ``O_TMPFILE`` (or no /proc to link it by), a temporary file beside it
    (``NEW_TEMP_PREFIX``, locked while it is written) takes its place, and is linked, or
    renamed where there are no hard links. A SIGKILL there left a 0600 copy of the key
    beside the target; each call removes such leftovers of earlier ones in the folder (those
    no live process holds) and returns how many.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.lexists(path):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
    removed = remove_new_file_leftovers(directory, os.path.basename(path))
    try:
        if not _create_unnamed(path, directory, data, mode):
            _create_named(path, directory, data, mode)
    except OSError as exc:            # (named by the target: not the temporary file)
        raise _naming(exc, path, always=True) from None
    fsync_dir(directory)
    return removed


def _create_unnamed(path: str, directory: str, data: bytes, mode: int) -> bool:
    """
    Write ``data`` to an unnamed file in ``directory`` and link it to ``path``.

    Return False, having made nothing, where ``O_TMPFILE`` or /proc is missing.
    """
    flag = getattr(os, 'O_TMPFILE', None)
    proc = '/proc/self/fd'
    if flag is None or not os.path.isdir(proc):
        return False
    try:
        fd = os.open(directory, flag | os.O_WRONLY, mode)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOTSUP):
            return False        # (a file system or kernel without O_TMPFILE)
        raise
    dfd = None
    try:
        os.fchmod(fd, mode)
        _write_all(fd, data)
        os.fsync(fd)
        # linkat(AT_SYMLINK_FOLLOW) of /proc/self/fd/N needs no privilege; os.link takes it
        # only with a dir_fd given (a plain link(2) refused the /proc link: EXDEV)
        dfd = os.open(directory, os.O_RDONLY | getattr(os, 'O_DIRECTORY', 0))
        try:
            os.link(f'{proc}/{fd}', os.path.basename(path), dst_dir_fd=dfd,
                    follow_symlinks=True)
        except OSError as exc:
            if exc.errno == errno.EEXIST or os.path.lexists(path):
                raise
            return False        # (no hard links here: the named way renames instead)
    finally:
        os.close(fd)            # (never linked, the unnamed file goes with its descriptor)
        if dfd is not None:
            os.close(dfd)
    return True


NAMED_TRIES = 5
"""Temporary files :func:`_create_named` makes before it gives up (each removed unlocked)."""


def _create_named(path: str, directory: str, data: bytes, mode: int) -> None:
    """Write ``data`` to a locked temporary file beside ``path``, then link or rename it."""
    for _ in range(NAMED_TRIES):
        if _create_named_once(path, directory, data, mode):
            return
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def _create_named_once(path: str, directory: str, data: bytes, mode: int) -> bool:
    """
    Do :func:`_create_named` once; return False when the temporary file was taken away.

    Another call's :func:`remove_new_file_leftovers` may remove it between ``mkstemp`` and
    the lock (it was then refused: 'No such file or directory' for the key file).
    """
    import fcntl
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=NEW_TEMP_PREFIX,
                               suffix=os.path.basename(path))
    ours = True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)      # (not a leftover: see remove_new_file_leftovers)
        try:
            ours = os.stat(tmp).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            ours = False
        if not ours:
            return False                    # (removed before it was locked: try again)
        os.fchmod(fd, mode)
        _write_all(fd, data)
        os.fsync(fd)
        try:
            os.link(tmp, path)
        except OSError as exc:
            if exc.errno == errno.EEXIST or os.path.lexists(path):
                raise
            os.rename(tmp, path)      # (no hard links here: FAT, some FUSE file systems)
    finally:
        os.close(fd)
        if ours and os.path.lexists(tmp):
            os.unlink(tmp)
    return True


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


MAX_KEY_BYTES = 4096
"""Largest file :func:`remove_new_file_leftovers` takes for a key's temporary (a key: 65)."""
_TEMP_CHARACTERS = frozenset('abcdefghijklmnopqrstuvwxyz0123456789_')


def _random_named(entry: str, prefix: str) -> bool:
    """Tell whether ``entry`` is ``prefix`` + ``mkstemp``'s random characters + a name."""
    middle = entry[len(prefix):len(prefix) + TEMP_NAME_LENGTH]
    return (entry.startswith(prefix) and len(entry) > len(prefix) + TEMP_NAME_LENGTH
            and len(middle) == TEMP_NAME_LENGTH and set(middle) <= _TEMP_CHARACTERS)


def remove_new_file_leftovers(directory, name: str = '') -> int:
    """
    Remove the temporaries a killed :func:`create_new_bytes` left in ``directory``.

    Each is a regular file of this user, mode 0600 and at most ``MAX_KEY_BYTES``, named
    ``NEW_TEMP_PREFIX`` + ``TEMP_NAME_LENGTH`` random characters + a name, or, left
    by versions before it, ``TEMP_PREFIX`` + random + ``name`` (the file being made now);
    one that a live process holds locked (a call writing it now) is kept. Return how many
    were removed.
    """
    def _key_named(entry: str) -> bool:
        """Tell whether ``entry`` is named as a key's temporary file."""
        return _random_named(entry, NEW_TEMP_PREFIX) or bool(
            name and _random_named(entry, TEMP_PREFIX) and entry.endswith(name)
            and len(entry) == len(TEMP_PREFIX) + TEMP_NAME_LENGTH + len(name))

    def _key_sized(st) -> bool:
        """Tell whether a file of status ``st`` may be a key's: 0600 and small."""
        # (a user's own .tmp-new-notes.txt, 0644, was removed as well)
        return stat.S_IMODE(st.st_mode) == 0o600 and st.st_size <= MAX_KEY_BYTES
    return _remove_unlocked(directory, _key_named, _key_sized)


def remove_write_leftovers(directory, name: str = '') -> int:
    """
    Remove the temporary files that killed :func:`atomic_write_with` calls left in ``directory``.

    A SIGKILL of a run while it saved ``model.pt`` (or any result) left a
    ``.tmp-rog-XXXXXXXXmodel.pt`` in the user's folder, as large as the model, and nothing
    ever removed it. Each removed is a regular file of this user named ``WRITE_TEMP_PREFIX``
    + ``TEMP_NAME_LENGTH`` random characters + a name (``name`` only, where given) that no
    process holds locked: a write going on now (any process) holds its temporary file's
    ``flock`` until the rename, and is kept, as is a file that cannot be locked (a file
    system without ``flock``). There a write names its temporary file by its pid and host
    (``PID_TEMP_PREFIX``): one of this host, pid namespace and boot whose process is gone is
    removed. So does a write where ``flock`` locks on each machine alone (an NFS mount with
    ``nolock``: :func:`flock_is_local`), whose lock a cleaner of another machine does not
    see; there a temporary that this machine cannot tell a killed write's (random-named, or
    of another host or boot) is removed once untouched for ``FOREIGN_TEMP_STALE_S``.
    Return how many were removed.
    """
    def _write_named(entry: str) -> bool:
        """Tell whether ``entry`` is named as a temporary file of an atomic write (of ``name``)."""
        return _random_named(entry, WRITE_TEMP_PREFIX) and not entry.startswith(
            PID_TEMP_PREFIX) and (
            not name or len(entry) == len(WRITE_TEMP_PREFIX) + TEMP_NAME_LENGTH + len(name)
            and entry.endswith(name))
    return _remove_unlocked(directory, _write_named, lambda st: True,
                            UNLOCKABLE_EMPTY_STALE_S) + _remove_dead_pids(directory, name)


UNLOCKABLE_EMPTY_STALE_S = 60.0
"""
An empty write temporary that cannot be locked (no flock) this old is a killed write's.

Without ``flock`` a write makes its random-named temporary file only to try the lock on it,
and removes it at once (then writes a file named by its pid): a write killed in between left
it, empty, and no cleaner could lock it, so none removed it, ever. One with data, or younger,
is kept (another machine's live write, which can lock it there).
"""


FOREIGN_TEMP_STALE_S = 3600.0
"""
A write temporary that no check of this machine can tell a killed write's, untouched this
long by both this machine's clock and the file system's, is a killed write's.

Such are another host's or boot's ``PID_TEMP_PREFIX`` files (its pid names no process
here: a robot cloned from this one's SD card has its name and pid namespace, and a cleaner
there removed this machine's live write), and, where ``flock`` locks on each machine alone
(NFS ``nolock``), a random-named one (its writer's lock is not seen here). A live write
changes its file's modification time with each write of its data, and between its last
data and its rename only syncs: an hour without a byte written is a generous bound over
the file server's write-back and the client's attribute cache (seconds to a minute). A
write stalled longer (a hung file server) finds its file gone and fails, naming it; the
target keeps its previous version.
"""


def _remove_dead_pids(directory, name: str) -> int:
    """
    Remove the ``PID_TEMP_PREFIX`` files (of ``name``) whose writer is gone.

    Those of this host, pid namespace and boot (:func:`_host_tag`) whose pid is no live
    process; those of another once ``FOREIGN_TEMP_STALE_S`` old.
    """
    try:
        names = os.listdir(os.fspath(directory))
    except OSError:
        return 0
    host, removed, clock = _host_tag(), 0, []
    for entry in names:
        found = _PID_TEMP.fullmatch(entry)
        if not found or (name and found.group(4) != name):
            continue
        ours = found.group(2) == host
        if ours and pid_alive(int(found.group(1))):
            continue
        path = os.path.join(os.fspath(directory), entry)
        try:
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
                continue
            if not ours and not _old(st, FOREIGN_TEMP_STALE_S, directory, clock):
                continue
            os.unlink(path)
            removed += 1
        except OSError:
            continue
    return removed


def pid_alive(pid: int) -> bool:
    """Tell whether process ``pid`` is alive here (one of another user, or pid 0, counts)."""
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:             # (EPERM: alive, another user's)
        return True
    return True


def _remove_unlocked(directory, named, fits, empty_stale_s=None) -> int:
    """
    Remove the files of ``directory`` that ``named(entry)`` and ``fits(st)`` take, unlocked.

    Only regular files of this user are looked at, and one is removed only while this call
    holds its ``flock`` (taken without waiting: one a live process holds is being written)
    and the name still gives the same file. Where there is no ``flock`` (ENOLCK,
    EOPNOTSUPP), an empty file older than ``empty_stale_s`` (given) by this machine's clock
    and the file system's is removed all the same. Where ``flock`` locks on this machine
    alone (:func:`flock_is_local`) the lock says nothing of another machine's write: a file
    is removed only once ``FOREIGN_TEMP_STALE_S`` old as well (before, a cleaner removed
    another machine's live write, and its rename failed).
    Return how many were removed.
    """
    import fcntl
    try:
        names = os.listdir(os.fspath(directory))
    except OSError:
        return 0
    removed, clock, local = 0, [], []
    for entry in names:
        if not named(entry):
            continue
        path = os.path.join(os.fspath(directory), entry)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or not fits(st):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:              # (being written now, or no flock here)
                if not _stale_unlockable(exc, st, empty_stale_s, directory, clock):
                    continue
            if not local:
                local.append(flock_is_local(os.path.join(os.fspath(directory), entry)))
            if local[0] and not _old(st, FOREIGN_TEMP_STALE_S, directory, clock):
                continue                        # (another machine's live write, maybe)
            if os.lstat(path).st_ino == st.st_ino:
                os.unlink(path)
                removed += 1
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


_NO_FLOCK = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP)
"""What ``flock`` raises on a file system without it (not: a lock it cannot take now)."""


def _stale_unlockable(exc: OSError, st, empty_stale_s, directory, clock: list) -> bool:
    """
    Tell whether a file ``st`` that ``flock`` refused (``exc``) is empty and stale.

    Only a file system without ``flock`` (``_NO_FLOCK``) says nothing of the file: EBADF
    (an NFS mount that locks exclusively only a file open for writing, as a cleaner's is
    not) is said for a live write's locked file too, and that was taken for a killed one.
    Its age counts by this machine's clock and by the file system's (``clock``: filled
    once, :func:`_file_system_now`): a machine whose clock is ahead took another machine's
    write, its data not yet flushed, for a minute old.
    """
    if empty_stale_s is None or exc.errno not in _NO_FLOCK or st.st_size != 0:
        return False
    return _old(st, empty_stale_s, directory, clock)


def _old(st, bound: float, directory, clock: list) -> bool:
    """
    Tell whether a file of ``directory`` (status ``st``) is ``bound`` s old by both clocks.

    This machine's, and the file system's (``clock``: filled once, :func:`_file_system_now`).
    """
    if time.time() - st.st_mtime < bound:
        return False
    if not clock:
        clock.append(_file_system_now(directory))
    return clock[0] - st.st_mtime >= bound


def _file_system_now(directory) -> float:
    """
    Return the time of ``directory``'s file system now (an NFS server's clock).

    The modification time of a file made there for it, and removed again (one a kill leaves
    is an empty write temporary, taken as such a minute on). Minus infinity where none can
    be made: nothing is then old enough to remove.
    """
    try:
        fd, probe = tempfile.mkstemp(dir=os.fspath(directory), prefix=WRITE_TEMP_PREFIX,
                                     suffix='.clock')
    except OSError:
        return float('-inf')
    try:
        return os.fstat(fd).st_mtime
    except OSError:
        return float('-inf')
    finally:
        _discard(fd, probe)


def _special(path: str) -> bool:
    """Tell whether ``path`` is an existing file that is neither regular nor a directory."""
    try:
        kind = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(kind) or stat.S_ISDIR(kind))


def _umask() -> int:
    """
    Return the process's umask without changing it.

    ``os.umask`` can only be read by setting it; for that moment another thread would create
    its files with the wrong mode. Linux shows it in /proc/self/status; elsewhere set and
    restore it.
    """
    try:
        with open('/proc/self/status', encoding='ascii') as fh:
            for line in fh:
                if line.startswith('Umask:'):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _naming(exc: OSError, path, always: bool = False) -> OSError:
    """
    Return ``exc`` as the same error about ``path``, or ``exc`` itself when it names a file.

    A full disk fails a write or a flush on a descriptor, and the error names no file; a
    temporary file's name (``always``) is not the one the caller asked for either.
    """
    if exc.errno is None or (exc.filename is not None and not always):
        return exc
    return type(exc)(exc.errno, exc.strerror, path)


def atomic_save_figure(fig, path, **savefig_kwargs) -> None:
    """
    Save a matplotlib figure to ``path`` atomically (its format from the file's extension).

    ``savefig`` writes the file as it draws it: a full disk left a truncated PNG beside the
    report, with an error that named no file. The image is drawn in memory first.
    """
    image = io.BytesIO()
    fmt = os.path.splitext(os.fspath(path))[1].lstrip('.').lower() or 'png'
    fig.savefig(image, format=fmt, **savefig_kwargs)
    atomic_write_bytes(path, image.getvalue())


def keep_earlier_file(path, most: int = 10_000, what: str = 'file') -> str | None:
    """
    Move a non-empty file at ``path`` to its first free numbered name; return that name.

    For outputs a rerun of the same command writes again (``--record run.mcap``): the earlier
    one goes to ``run.1.mcap`` (``run.2.mcap`` if taken, ... up to ``most``) instead of being
    truncated. None, and nothing moved, when ``path`` is no file or an empty one. The move is
    a hard link then an unlink (a name made there meanwhile is never replaced; a crash
    between leaves both names), a rename where there are no hard links, and the folder is
    synced. A symbolic link is kept and followed: the file it names is moved beside itself,
    so the next write goes through the link to where the user put it. OSError naming
    ``what`` when no name is free.
    """
    path = os.fspath(path)
    if os.path.islink(path):
        path = os.path.realpath(path)
    try:
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            return None
    except OSError:
        return None                  # (none there)
    stem, ext = os.path.splitext(path)
    for number in range(1, most + 1):
        kept = f'{stem}.{number}{ext}'
        if os.path.lexists(kept):
            continue
        try:
            os.link(path, kept)      # (no race with a file made there meanwhile)
            os.unlink(path)
        except FileExistsError:
            continue
        except OSError as err:
            if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise _not_kept(err, what, kept) from None
            try:
                os.rename(path, kept)    # (no hard links here)
            except OSError as again:
                raise _not_kept(again, what, kept) from None
        fsync_dir(os.path.dirname(os.path.abspath(path)))
        return kept
    raise OSError(f'the earlier {what} there cannot be kept: {stem}.1{ext} to '
                  f'{stem}.{most}{ext} all exist; move or remove some')


def _not_kept(err: OSError, what: str, kept: str) -> OSError:
    """Return the one-line error of an earlier file that cannot be moved to ``kept``."""
    return OSError(f'the earlier {what} there cannot be kept as {kept} '
                   f'({err.strerror or err}); move it away or give another file')


def copy_whole(src: str, dst: str) -> None:
    """
    Copy file ``src`` to ``dst`` whole or not at all (``atomic_write_with``), times kept.

    ``shutil.copy2`` to ``dst.part`` then a rename left the ``.part`` (a model's size) when
    killed midway, and synced neither the copy nor its folder. Leftovers of either kind that
    earlier copies to ``dst`` left are removed first (those no live process writes).
    """
    folder, name = os.path.split(os.path.abspath(dst))
    remove_write_leftovers(folder, name)
    if os.path.isfile(dst + '.part'):       # (the name versions before this one used)
        os.unlink(dst + '.part')
    with open(src, 'rb') as source:
        atomic_write_with(dst, lambda f: shutil.copyfileobj(source, f, 1 << 20))
    shutil.copystat(src, dst)


def move_whole(src: str, dst: str) -> None:
    """
    Move file ``src`` to ``dst``: a rename, or where they are on two file systems a whole copy.

    ``shutil.move`` across file systems copies into ``dst`` itself: a robot killed midway
    left half a model under the model's own name in ``previous/``, taken for the last good
    one. The copy is :func:`copy_whole`; ``src`` is removed once it is on disk.
    """
    try:
        os.replace(src, dst)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        copy_whole(src, dst)
        os.unlink(src)
        fsync_dir(os.path.dirname(os.path.abspath(src)))
