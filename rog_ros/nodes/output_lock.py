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
One run at a time in an output directory.

Why: the README's fleet command is meant to be run again, and a second ``rog fleet --out
runs/fleet`` started while the first was still running (another terminal, a script) wrote a
fresh ``fleet.key`` over the first fleet's (a node of the first fleet that restarted read the
new key and could no longer talk to its fleet), had its server set the first run's results
aside as an earlier run's, and then both servers wrote ``summary.json`` and ``model.pt`` in
turn: the last writer won and nothing said so. The second run now stops before it writes
anything and names the run that holds the directory.

The lock is an advisory ``flock`` on ``OUT/.rog.lock``, which the kernel drops when the
holding process ends, however it ends: a crashed or killed run never leaves its directory
locked, and there is no stale lock to clean up. The file stays (an empty-looking dot file).
Where ``flock`` fails (NFS without a lock manager) or locks on one machine only (an NFS mount
with ``nolock``), a file made ``O_EXCL`` beside it holds the folder (:func:`hold_by_file`).

A folder inside a held one is refused too: ``rog compare --out rp/toy-indoors`` started while
``rog reproduce --out rp`` ran mixed its runs into the reproduction's, which reads and writes
that folder. The same process's own hold on an outer folder is no conflict (reproduce holds
its folder and runs its comparisons in folders inside it).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import hashlib
import os
import socket
import stat
import sys
import time

from rog_ros.atomic import boot_id as _boot_id, mount_index
from rog_ros.atomic import flock_is_local as _flock_is_local
from rog_ros.atomic import pid_alive, read_mounts as _mounts, remove_write_leftovers

try:
    import fcntl
except ImportError:           # pragma: no cover - not a POSIX system: runs go unlocked
    fcntl = None

LOCK_FILE = '.rog.lock'
"""Name of the lock file inside the output directory."""

_HELD_HERE = set()
"""Real paths of the folders this process holds (a flock of its own is no conflict for it)."""


class OutputInUse(OSError):
    """The output directory is held by another run, or cannot be held (the message says)."""


class ReadOnlyLockRefused(OutputInUse):
    """
    A lock file open read-only that this file system will not ``flock``.

    Some NFS mounts emulate ``flock`` with POSIX locks, whose exclusive kind needs a
    descriptor open for writing (``EBADF``), or have no lock manager at all (``ENOLCK``): such
    a hold was no lock at all, and nothing said so. ``path`` is the lock file, ``code`` the
    errno's name; ``whose`` says why it was open read-only (:func:`read_only_why`: another
    user's, this user's own without write permission or on a read-only export, or on a
    read-only mount) and ``fix``
    what to do besides a folder on a local disk: the message says both in one line.
    """

    def __init__(self, path: str, code: str, why=None):
        self.path, self.code = path, code
        self.whose, self.fix = why or ("another user's", 'have its owner remove it')
        super().__init__(f'cannot lock {path}: the lock file is {self.whose}, which this '
                         f'file system cannot flock read-only ({code}; NFS?); use a folder '
                         f'on a local disk, or {self.fix}')


def read_only_why(fd: int) -> tuple:
    """
    Return ``(whose, fix)``: why lock file ``fd`` could only be opened read-only, and the fix.

    A read-only mount (``statvfs``'s ``ST_RDONLY``), another owner (``st_uid`` not this
    process's effective user), this user's own file without its write permission, or one
    with it that the file server still would not open for writing (a read-only export): the
    refusal called each of them another user's file.
    """
    try:
        on_read_only = bool(os.fstatvfs(fd).f_flag & getattr(os, 'ST_RDONLY', 1))
        st = os.fstat(fd)
    except (OSError, AttributeError):       # (no statvfs: not a POSIX system)
        return "another user's", 'have its owner remove it'
    if on_read_only:
        return ('on a read-only mount', 'mount it read-write (nothing can be written there '
                'either)')
    if st.st_uid != os.geteuid():
        return f"another user's (uid {st.st_uid})", 'have its owner remove it'
    if st.st_mode & stat.S_IWUSR:           # (the server refused: not the file's mode)
        return ("this user's own, which this machine may not write though its mode allows it "
                '(a read-only NFS export?)', 'have the folder exported read-write')
    return ("this user's own, without write permission",
            'give it back its write permission (chmod u+w), or remove it')


class OutputLock:
    """Hold an output directory for this process until ``release`` (or the process ends)."""

    def __init__(self, fd: int | None, path: str):
        """Keep the locked file descriptor (None: unlocked) and the lock file's path."""
        self.fd, self.path = fd, path
        self.removed_leftovers = 0
        # the key is kept, not recomputed at release: a relative path names another folder
        # once the process has changed its working directory
        self._key = _folder_key(os.path.dirname(path))
        if fd is not None:
            _HELD_HERE.add(self._key)

    @classmethod
    def take(cls, out: str, command: str) -> 'OutputLock':
        """
        Lock ``out`` (created if missing) for ``command``; raise ``OutputInUse`` if held.

        A file system without ``flock`` support is held by file instead (:func:`hold_by_file`:
        ``OutputInUse`` names the holder, with its host). A folder inside one that another run
        holds is refused as well (``OutputInUse`` naming that run), before anything is made.
        Once held, the temporary files that a run killed while it wrote a result there
        (``model.pt``, ``summary.json``) left in ``out`` are removed, those no live process
        writes (:func:`rog_ros.atomic.remove_write_leftovers`); ``removed_leftovers`` says how
        many.
        """
        _refuse_inside_held(out)
        _refuse_holding_held(out)
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, LOCK_FILE)
        fd, holder = hold_lock_file(path, command)
        if holder is not None:
            raise _in_use(out, holder)
        lock = cls(fd, path)
        lock.removed_leftovers = remove_write_leftovers(out)
        return lock

    def release(self) -> None:
        """
        Let the directory go (idempotent).

        Unlocked, not only closed: a process forked while it was held (a DataLoader worker,
        a child with the descriptor) would keep the folder locked until it ended.
        """
        if self.fd is not None:
            _HELD_HERE.discard(self._key)
            fd, self.fd = self.fd, None
            let_go_of_lock_file(fd)


def refuse_held(out: str) -> None:
    """
    Raise ``OutputInUse`` where ``OutputLock.take`` would, making nothing (no folder, no file).

    For a run with a slow check to make before it takes ``out`` (``rog fleet`` builds its
    workload, which checks the workload options): another run's hold is said at once, and a
    refusal of the check leaves no ``out`` behind. ``take`` still decides: another run may
    take ``out`` in between.
    """
    _refuse_inside_held(out)
    _refuse_holding_held(out)
    holder = lock_holder(os.path.join(out, LOCK_FILE))
    if holder is not None:
        raise _in_use(out, holder)


def _in_use(out: str, holder: str) -> OutputInUse:
    """
    Return the refusal of ``out``, which another run (``holder``'s line) holds.

    A hold that names no run (:class:`_NoRun`: empty, unreadable) was said to be 'in use by
    another run' with the words to remove it in brackets, and 'wait until that one ends'
    of a run that may not exist: it is said as it is, with what to do.
    """
    if isinstance(holder, _NoRun):
        return OutputInUse(f'{out} cannot be taken: {holder}')
    return OutputInUse(f'{out} is in use by another run ({holder}); give this one another '
                       '--out, or wait until that one ends')


class _NoRun(str):
    """A refusal's words for a hold that names no run (empty, unreadable, not of rog_ros)."""


def hold_lock_file(path: str, command: str):
    """
    Take the ``flock`` of lock file ``path`` for ``command``: ``(fd, None)`` or ``(None, who)``.

    On success the file says who holds it (``command``, pid, since when) and the open ``fd``
    is the hold (closing it lets go). When another process holds it: ``(None, its line)``.
    A file system without ``flock`` support (ENOLCK, EOPNOTSUPP) is held by a file made
    ``O_EXCL`` instead (:func:`hold_by_file`), and so is one whose ``flock`` is local to
    this machine (:func:`flock_is_local`) besides its flock: it gave an unlocked hold, and two
    runs wrote into one folder without a word. Where the flock is not local (a local disk,
    NFS with a lock manager), a ``.held`` there that is not stale (:func:`held_file_holder`)
    is refused all the same, naming its run: no run whose flock works makes one, so a client
    of a share of this folder (an NFS or SMB export, sshfs) that could not flock made it, and
    a run here went beside that client's (only ``rog fleet``'s first check read it); a stale
    one is left as it is. A free folder costs one ``open`` more (ENOENT). A lock file open
    read-only (another user's, or this user's own without write permission, or on a
    read-only mount) that it will not lock raises ``ReadOnlyLockRefused`` (some NFS mounts:
    a writable file of our own there would be locked).

    No POSIX-lock (``fcntl.lockf``) fallback for a file system that refuses ``flock``: Linux's
    NFS client makes ``flock`` a POSIX lock over the lock manager (lockd/NLM, NFSv4's own
    locks) already, so where ``flock`` fails there (``ENOLCK``: no lock manager) ``lockf``
    fails the same way, and a ``nolock`` mount locks both locally. A POSIX lock would also
    be let go when this process closes any descriptor of the file (reading its holder line)
    and is not held by the processes it forks. One function for every
    lock of the package (an output directory, a robot's node log, a node's state file).

    A run that lets go of a folder it leaves empty removes the lock file (and the folder)
    while it still holds it: a flock got on that file afterwards is a hold on nothing, so it
    is let go and taken again on the file now at ``path`` (its folder made again, as it is
    when the folder went before the file could be opened).
    """
    for attempt in range(_RETAKES):
        try:
            fd, writable = _open_lock_file(path)
        except FileNotFoundError:
            if attempt == _RETAKES - 1:
                raise
            # (its folder removed, with the file, by a run that let go of it empty)
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            continue
        if fcntl is None:
            os.close(fd)
            return None, None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = ' '.join(_holder(fd).split())
            why = None if writable else read_only_why(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return None, holder
            if not writable:      # (another user's file on NFS, or a read-only one)
                raise ReadOnlyLockRefused(path, errno.errorcode.get(exc.errno, str(exc)),
                                          why) from None
            # no flock here (NFS without a lock manager: ENOLCK; some FUSE: EOPNOTSUPP):
            # held by a file made O_EXCL instead, never unlocked without a word
            return hold_by_file(path, command,
                                f'no flock: {errno.errorcode.get(exc.errno, exc)}')
        # (the last try holds what it got: a file system whose file numbers do not match
        # between stat and fstat runs locked as it did before, not refused)
        if not writable and attempt < _RETAKES - 1 and _removed(fd, path):
            os.close(fd)              # another user's lock file, free: ours in its place
            continue
        if attempt == _RETAKES - 1 or _still_there(fd, path):
            break
        os.close(fd)                  # removed by the run that held it: take the new one
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if writable and flock_is_local(path):     # (an NFS mount with nolock: see hold_by_file)
        st = os.fstat(fd)
        _FLOCKED.add((st.st_dev, st.st_ino))
        try:
            held, holder = hold_by_file(path, command, _LOCAL_FLOCK_WHY)
        except BaseException:     # (its file not made: the flock let go, not kept for ever)
            let_go_of_lock_file(fd)
            raise
        finally:
            _FLOCKED.discard((st.st_dev, st.st_ino))
        if holder is not None:
            let_go_of_lock_file(fd)
            return None, holder
        _FILE_HOLDS[fd] = _FILE_HOLDS.pop(held)
        os.close(held)
    else:     # (flock seen by every run of this kernel: a .held was made through a share)
        holder = held_file_holder(path)
        if holder is not None:
            let_go_of_lock_file(fd)
            return None, holder
    if not writable:      # (another user's, in a folder we cannot change: held unnamed)
        return fd, None
    try:      # the holder line only names us to a second command: the lock holds without
        os.ftruncate(fd, 0)
        os.write(fd, f'{command}, pid {os.getpid()}, since '
                     f'{time.strftime("%Y-%m-%d %H:%M:%S")}\n'.encode())
    except OSError:   # (a full disk: the run's own writes then say so, naming their files)
        pass
    return fd, None


def let_go_of_lock_file(fd) -> None:
    """
    Unlock and close ``fd``, a hold of :func:`hold_lock_file` (None: an unlocked one).

    Unlocked first: closing alone lets go only where no process forked since has it open
    (a workload's DataLoader workers keep it until they end).
    """
    if fd is None:
        return
    held = _FILE_HOLDS.pop(fd, None)
    if held is not None:
        _remove_held_file(*held)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError:
        pass
    finally:
        os.close(fd)


def _open_lock_file(path: str) -> tuple:
    """
    Open (create) the lock file ``path``: ``(fd, writable)``; refuse one that is no plain file.

    Its holder writes its line into it: a lock file that was a symbolic link (another user's,
    in a folder they can write to) had the file it points to truncated and overwritten. One
    this user may not write (left by a run as another user: root in a container, then the
    robot's user) is opened for reading, which a flock needs no more than: before, it stopped
    every later run of this user in that folder ('Permission denied').
    """
    writable = True
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EACCES):
            raise
        fd, writable = None, False
        if exc.errno == errno.EACCES:
            try:
                fd = os.open(path, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK)   # (a FIFO)
            except OSError:
                raise exc from None
    if fd is not None and stat.S_ISREG(os.fstat(fd).st_mode):
        return fd, writable
    if fd is not None:
        os.close(fd)
    raise OutputInUse(f'{path} is a symbolic link or not a plain file, not a lock file of '
                      'rog_ros; nothing was written to it: remove it (or give another '
                      'folder) and run again')


_NOFOLLOW = getattr(os, 'O_NOFOLLOW', 0)
_RETAKES = 10
"""How often a lock file removed under a new holder is taken again before giving up."""

HELD_SUFFIX = '.held'
"""Where ``flock`` does not lock (:func:`hold_by_file`): ``LOCK.held``, made ``O_EXCL``."""

_FILE_HOLDS = {}
"""``{fd: (path, st_dev, st_ino)}``: the ``.held`` file each hold of this process made."""


def hold_by_file(path: str, command: str, why: str):
    """
    Hold lock file ``path`` by making ``path.held`` ``O_EXCL``: ``(fd, None)`` or ``(None, who)``.

    Why: on a file system where ``flock`` fails (NFS without a lock manager: ENOLCK; some
    FUSE ones: EOPNOTSUPP) every run was given an unlocked hold, and two runs wrote into one
    folder without a word; on an NFS mount with ``nolock`` (``local_lock=all``) the flock
    holds on this machine only. There the hold is a file made with ``O_EXCL`` (atomic on
    NFSv3 and later) that names its host, pid, the process's start (:func:`_started`), pid
    namespace and machine (:func:`machine_tag`); it is removed when the hold is let go. One
    left by a run that was killed is stale when its host is this machine, its namespace this
    process's (or its boot an earlier one of this machine), and its pid no live process, or
    one that started at another time (a reused pid): it is removed and taken. One of another
    machine (one of the same name too: another boot that is not this machine's), or of
    another container of this one, cannot be told stale from here: the refusal says so, and
    to remove the file once that run has ended. One exception, taken over with a line on
    stderr: on virtiofs, another container's hold of this boot whose flock is free
    (:func:`_ended_by_flock`). ``why``: the flock's errno name, said in the holder's line.
    """
    held = path + HELD_SUFFIX
    line = (f'{command}, pid {os.getpid()} on {socket.gethostname()}, since '
            f'{time.strftime("%Y-%m-%d %H:%M:%S")}, held by file ({why})')
    text = f'{_maker()}\n{line}\n'
    for _ in range(_RETAKES):
        try:
            fd = _make_hold(held, text)
        except FileExistsError:
            holder = held_file_holder(path, remove_stale=True)
            if holder is not None:
                return None, holder
            continue                    # (a stale one removed: made again)
        except OSError as exc:
            raise OutputInUse(f'cannot lock {path}: this file system has no working flock '
                              f'({why}), and {held} cannot be made ({exc.strerror or exc}); '
                              'use a folder on a local disk') from None
        if fd is None:
            continue                    # (taken over while it was written: made again)
        st = os.fstat(fd)
        _FILE_HOLDS[fd] = (held, st.st_dev, st.st_ino)
        _remove_take_over_leftovers(held)
        return fd, None
    raise OutputInUse(f'cannot lock {path}: {held} was made and removed again '
                      f'{_RETAKES} times; run again')


NEW_INFIX = '.new-'
"""``HELD + this + HOST-PID-RANDOM``: a hold's file, written before it is linked as ``HELD``."""
_GONE_INFIX = '.gone-'
"""``HELD + this + HOST-PID``: a hold set aside by the run letting go of it, then removed."""


def _own_name(prefix: str) -> str:
    """
    Return ``prefix`` + this host, pid and 8 random hex digits: a name no other run makes.

    A pid names a process of one pid namespace only: two containers with the host's
    network (its name) number their processes each from 1, and machines of one image often
    share a name. Under ``HOST-PID`` alone, a run removed another's file of that name as its
    own leftover (the other's line then linked as this run's hold).
    """
    return f'{prefix}{socket.gethostname()}-{os.getpid()}-{os.urandom(4).hex()}'


EMPTY_HOLD_STALE_S = 60.0
"""
An empty ``.held`` (or take-over) file this old is a killed run's, taken over.

A run writes its line before its file appears under its name (:func:`_make_hold`), so a
file of this package is empty only where the file system has no hard links (made
``O_EXCL``, then written: microseconds apart unless the run is stopped), after a power cut
that lost its data, or when its maker was killed in between. Its age is its modification
time against both this machine's clock and the file system's (a file made in the same
folder): a clock that is off delays the take-over, never hastens it.
"""


def _make_hold(held: str, text: str) -> int | None:
    """
    Make the ``.held`` file ``held`` holding ``text``; return it open (FileExistsError: held).

    Why: made ``O_EXCL`` and then written, a run killed in between left it empty, and an
    empty file names no process to tell it stale by: every later run was refused until the
    user removed it. ``text`` is now written (and synced) into a file of this process's own
    name first, which is then linked as ``held`` (``link`` never replaces a file, NFS
    included): ``held`` never appears empty. Where there are no hard links it is made
    ``O_EXCL`` and written as before, and then checked to be still there: an empty file
    older than ``EMPTY_HOLD_STALE_S`` is taken over (:func:`_take_over`), and a run stalled
    that long between the two finds its file gone and makes it again (None: try again; so
    does a run whose own file a cleaner took, empty, for a killed run's).
    A file that cannot be written (a full disk) is no hold: OSError, nothing left.
    """
    data = text.encode()
    mine = _own_name(f'{held}{NEW_INFIX}')
    fd = os.open(mine, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
    try:
        _write_all_fd(fd, data)
        os.fsync(fd)
        os.link(mine, held)
    except OSError as exc:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(mine)
        if isinstance(exc, FileNotFoundError):
            return None                 # (removed by a cleaner while empty: made again)
        if isinstance(exc, FileExistsError) or exc.errno not in _NO_LINKS:
            raise
        return _make_hold_unlinked(held, data)
    with contextlib.suppress(OSError):
        os.unlink(mine)
    return fd


_NO_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK)
"""What ``link`` raises on a file system without hard links."""


def _make_hold_unlinked(held: str, data: bytes) -> int | None:
    """Make ``held`` ``O_EXCL`` and write ``data`` (no hard links): :func:`_make_hold`."""
    fd = os.open(held, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
    st = os.fstat(fd)
    try:
        _write_all_fd(fd, data)
        os.fsync(fd)
    except OSError:
        os.close(fd)
        _remove_held_file(held, st.st_dev, st.st_ino)
        raise
    if _still_there(fd, held):
        return fd
    os.close(fd)                        # (taken over as a killed run's while stalled)
    return None


def held_file_holder(path: str, remove_stale: bool = False) -> str | None:
    """
    Return the holder line of lock file ``path``'s ``.held`` file; None when there is none.

    A stale one (this host's, of a pid that is no live process) is None, and removed when
    ``remove_stale``. One whose content cannot be read yet (a run making it now, or one killed
    before it wrote it) is held, and so is one made since this boot in another pid namespace
    of this host (a container with the host's network has its name, and pids that name
    nothing here): their lines say to remove the file once that run has ended.
    """
    held = path + HELD_SUFFIX
    text = _read_hold(held)
    if text is None:
        return None
    line, holder = _judge_hold(held, text)
    if holder is not None:
        return holder
    if remove_stale:
        return _take_over(held, text, line)
    return None


def _read_hold(held: str) -> str | None:
    """
    Return the text of the ``.held`` file ``held``; None if there is none.

    One that is there but cannot be read (a symbolic link, a folder, another user's without
    read permission) is a line saying so, under no host and pid: it is held, never taken
    for free (before, it was: its ``O_EXCL`` hold then failed ten times and the refusal said
    only to run again) nor for an empty file a killed run left.
    """
    try:                                # (non-blocking: a FIFO there waited for a writer)
        fd = os.open(held, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _unreadable(held, exc)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return _unreadable(held, OSError(errno.EISDIR, os.strerror(errno.EISDIR)))
        return os.read(fd, 1000).decode(errors='replace')
    except OSError as exc:
        return _unreadable(held, exc)
    finally:
        os.close(fd)


def _unreadable(held: str, exc: OSError) -> str:
    """Return the text standing for ``held``, which cannot be read (``exc``)."""
    if exc.errno == errno.ELOOP:
        return f'-\n{held} is a symbolic link, not a hold of rog_ros\n'
    if exc.errno == errno.EISDIR:
        return f'-\n{held} is not a plain file, not a hold of rog_ros\n'
    return f'-\n{held} cannot be read ({exc.strerror or exc})\n'


_BLANK = ' \t\r\n\0'
"""What an empty hold may hold (a power cut can leave its length with zeros)."""


def _empty_hold_refusal(held: str) -> str | None:
    """
    Return the refusal's words for ``held``, an empty hold; None if it is old enough to take.

    Its age by this machine's clock: :func:`_take_over` checks it again by the file
    system's once it holds the take-over file.
    """
    try:
        made = os.lstat(held).st_mtime
    except OSError:
        return None                     # (gone meanwhile: read afresh)
    left = EMPTY_HOLD_STALE_S - (time.time() - made)
    if left <= 0:
        return None
    return _young(held, made, left)


def _young(held: str, made: float, left: float) -> str:
    """Return the refusal of the empty hold ``held``, made at ``made``, ``left`` s to go."""
    when = time.strftime('%H:%M:%S', time.localtime(made))
    return _NoRun(f'{held} is empty: a run is making it now, or was killed making it (made '
                  f'{when}); it is taken over once it is {EMPTY_HOLD_STALE_S:.0f} s old: run '
                  f'again in {max(1, int(left + 1))} s, or remove {held} now if no run uses '
                  'that folder')


def _judge_hold(held: str, text: str) -> tuple:
    """
    Return ``(line, holder)`` of a ``.held`` (or take-over) file ``held`` holding ``text``.

    ``line`` is its maker's line; ``holder`` the refusal's words, None when it is stale
    (made on this host, in this pid namespace, by a process that is gone).
    """
    if not text.strip(_BLANK):      # (made, not written: a run killed meanwhile, or now)
        return '', _empty_hold_refusal(held)
    first, _, rest = text.partition('\n')
    host, pid, started, space, machine = (first.split(' ') + [''] * 5)[:5]
    line = ' '.join(rest.split()) or f'a run that has not said which, in {held}'
    if not pid.isdigit():       # (not a hold this package wrote, or one that cannot be read)
        return line, _NoRun(f'{line}; if no run uses that folder, remove {held}')
    if host != socket.gethostname():
        if _ended_by_flock(held, started, rest):
            return line, None           # (a container of this kernel, its own host name)
        return line, f'{line}; if that run on {host} has ended, remove {held}'
    other = _other_machine(host, started, machine)
    if other is not None:
        return line, f'{line}; {other}: if that run has ended, remove {held}'
    if _other_space(started, space) and not _ended_by_flock(held, started, rest):
        return line, (f'{line}; made in another pid namespace (container) of {host}: if '
                      f'that run has ended, remove {held}')
    if _other_space(started, space):
        return line, None               # (its flock let go: :func:`_ended_by_flock`)
    if _alive(int(pid), started):
        return line, line
    return line, None


_LOCAL_FLOCK_WHY = 'flock is local to each machine'
"""What a hold made holding its lock file's flock says it was held by file for."""

_FLOCKED = set()
"""``(st_dev, st_ino)`` of the lock files whose flock this process holds while it holds by file."""


def _ended_by_flock(held: str, started: str, rest: str) -> bool:
    """
    Tell whether ``held``, of this boot, was made by a run that no longer holds its flock.

    Why: on a ``virtiofs`` mount (flock local to the VM's kernel, :func:`flock_is_local`)
    a killed run's hold was refused for a run in a container started again (another pid
    namespace, or host name), whose pids name nothing here, until removed by hand. Its
    maker said it held by file beside its flock (``rest`` names ``_LOCAL_FLOCK_WHY``) and
    took that flock first, in this kernel (its boot id is this boot's: containers share it,
    other kernels' are random), and held it until its file was gone: where that flock is
    now free (or this process's), its maker has ended (or let go), whatever its namespace.
    A killed run's forked processes that still hold it keep the hold, as its flock does.
    virtiofs only: a kernel mounts one share once (every mount of a tag is one superblock,
    so every run's flock meets on one inode); two ``9p`` mounts of one share are two, whose
    flocks never meet. Not for take-over files, where flock fails or the lock file is gone
    (nothing proves it: a run letting go removes it first).
    """
    if not held.endswith(HELD_SUFFIX) or f'held by file ({_LOCAL_FLOCK_WHY})' not in rest:
        return False
    try:
        if started.partition(':')[0] != _boot_id():
            return False
    except OSError:
        return False
    lock = held[:-len(HELD_SUFFIX)]
    rows = list(_mounts())
    found = mount_index(os.path.realpath(os.path.dirname(os.path.abspath(lock))), rows)
    if fcntl is None or found is None or rows[found][1] != 'virtiofs':
        return False
    try:
        st = os.stat(lock)
        if (st.st_dev, st.st_ino) in _FLOCKED:
            return True                 # (this process holds it: its maker does not)
        fd = os.open(lock, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


TAKE_OVER_INFIX = '.over-'
"""A stale ``.held`` file is removed only by the run that made ``HELD + this + its digest``."""

_TAKE_OVER_DEPTH = 3
"""Take-over files of killed take-overs taken over in turn, at most this deep."""

_TAKE_OVER_WAITS = 200
"""Times (10 ms apart) a run waits for a live run's take-over of the same stale file."""


def _take_over(held: str, text: str, line: str, depth: int = 0) -> str | None:
    """
    Remove the stale file ``held`` if it still holds ``text``, one run at a time.

    Why: runs racing for a killed run's ``.held`` file each read it, found it stale, and
    removed what was there by then: B removed it and made its own, C then moved B's fresh
    one aside, found the same inode number (the file system gave B's file the freed one)
    and removed it, and made its own; B and C both held the folder. Now the run that
    removes it first makes ``held.over-DIGEST`` (``DIGEST`` of ``text``, which names a
    process that is gone: no later file holds the same text) by ``link`` of a file that
    already names it, so it is never seen empty; holding that, it reads ``held`` again and
    removes it only if it still holds ``text`` (no other run removes a file holding it
    meanwhile). Another run's take-over file is waited for while that run lives; one a
    killed run left is taken over the same way. Return None (removed, or taken over by
    another run: read it again), or the refusal's words (``line``: the stale file's).
    """
    digest = hashlib.sha1(text.encode(errors='replace')).hexdigest()[:16]
    guard = f'{held}{TAKE_OVER_INFIX}{digest}'
    busy = _make_take_over_file(guard, held, depth)
    if busy is not None:
        return busy or None             # ('': another run took it over: read afresh)
    empty = not text.strip(_BLANK)
    try:
        try:
            before = os.lstat(held)
        except OSError:
            return None
        if _read_hold(held) != text:
            return None                 # (taken over already: another run's now, or none)
        if empty:
            young = _young_by_file_clock(held, guard, before)
            if young is not None:
                return young
        aside = f'{guard}.gone-{socket.gethostname()}-{os.getpid()}'
        try:
            os.rename(held, aside)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if empty:                   # (no run named: none said to have ended, or to hold)
                return _NoRun(f'{held} is empty, left by a run killed making it, and cannot '
                              f'be removed ({exc.strerror or exc}): have its owner remove it')
            return (f'{line}; that run has ended, but {held} cannot be removed '
                    f'({exc.strerror or exc}): have its owner remove it')
        try:
            if empty and not _still_empty(aside, before):
                _put_back(aside, held)  # (its live maker wrote its line meanwhile: held)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(aside)
        if not empty:
            _say_taken_over(held, text, line)
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(guard)


def _young_by_file_clock(held: str, guard: str, before) -> str | None:
    """
    Return the refusal of empty ``held`` (``lstat`` as ``before``) if young by the file system.

    ``guard`` was written just now: its modification time is the file system's clock now
    (an NFS server's), which made ``held``'s: a client clock ahead of it hastens nothing.
    """
    try:
        now = os.lstat(guard).st_mtime
    except OSError:
        return None
    left = EMPTY_HOLD_STALE_S - (now - before.st_mtime)
    return _young(held, before.st_mtime, left) if left > 0 else None


def _still_empty(aside: str, before) -> bool:
    """Tell whether ``aside`` is still the empty file ``before`` (its maker wrote nothing)."""
    try:
        st = os.lstat(aside)
    except OSError:
        return True
    same = (st.st_dev, st.st_ino) == (before.st_dev, before.st_ino)
    if not same or st.st_size == 0:
        return same
    text = _read_hold(aside)
    return text is not None and not text.strip(_BLANK)


def _put_back(aside: str, held: str) -> None:
    """
    Put ``aside`` back as ``held`` unless a file is there (``link``; no hard links: rename).

    A run that made ``held`` while ``aside`` was set aside (microseconds) holds the folder
    beside ``aside``'s maker, which had checked its file before: the put-back is dropped,
    or, without hard links (the check and the rename two steps), replaces that run's file
    (one that checks its file after, :func:`_make_hold_unlinked`, makes it again and is
    refused). The window opens only after a maker stalled past ``EMPTY_HOLD_STALE_S``
    between making its file and writing it, which only happens where there are no hard
    links (or with an older release's live maker).
    """
    try:
        os.link(aside, held)
        return
    except FileExistsError:
        return
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            return
    if not os.path.lexists(held):
        with contextlib.suppress(OSError):
            os.rename(aside, held)


def _make_take_over_file(guard: str, held: str, depth: int) -> str | None:
    """
    Make take-over file ``guard`` of ``held``, naming this process: None once made.

    Written in a file of this process's own name first and linked (``link`` never
    replaces a file, NFS included; where there are no hard links it is made ``O_EXCL``).
    A live run's is waited for (``_TAKE_OVER_WAITS`` tries; made once it is gone): its
    refusal's words if it stays; a killed run's is taken over (:func:`_take_over`) and made
    again, and where that take-over is refused, so is this one (at once: before, each try
    here waited all of that one's tries, minutes).
    """
    me = f'{_maker()}\ntaking over {held}, pid {os.getpid()}\n'
    mine = _own_name(f'{guard}.')
    holder = ''
    try:
        for _ in range(_TAKE_OVER_WAITS):
            try:
                _link_new(mine, guard, me)
                return None
            except FileExistsError:
                pass
            text = _read_hold(guard)
            if text is None:
                continue                # (let go meanwhile: try again)
            line, holder = _judge_hold(guard, text)
            if holder is None and depth < _TAKE_OVER_DEPTH:     # (a killed run's take-over)
                refused = _take_over(guard, text, line, depth + 1)
                if refused is not None:     # (its own waits are over: not each of ours)
                    return refused
                continue
            time.sleep(0.01)            # (a live run taking it over now)
        return holder or f'{guard} stays; if no run uses that folder, remove it'
    except OSError as exc:
        return (f'cannot take over the hold of a run that has ended: {guard} cannot be made '
                f'({exc.strerror or exc}); remove {held} if no run uses that folder')
    finally:
        with contextlib.suppress(OSError):
            os.unlink(mine)


def _remove_take_over_leftovers(held: str) -> None:
    """
    Remove the files take-overs of ``held`` left when killed midway, now that it is ours.

    Their take-over files, the files they linked them from and the stale files they set
    aside (``held.over-*``) each name a process: those of a process gone are removed. One
    of a stale file that is gone (this run's ``held`` is in its place) guards nothing.
    So are those of holds killed while made (``held.new-*``: written, not yet linked as
    ``held``, or linked, not yet removed) or let go (``held.gone-*``: set aside, not yet
    removed): before, they stayed for ever, and kept an empty folder from being removed.
    An empty one is removed once ``EMPTY_HOLD_STALE_S`` old.
    """
    folder, name = os.path.split(held)
    try:
        names = os.listdir(folder or '.')
    except OSError:
        return
    kinds = tuple(name + infix for infix in (TAKE_OVER_INFIX, NEW_INFIX, _GONE_INFIX))
    for entry in names:
        if not entry.startswith(kinds):
            continue
        path = os.path.join(folder, entry)
        text = _read_hold(path)
        if text is not None and _judge_hold(path, text)[1] is None:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _link_new(mine: str, path: str, text: str) -> None:
    """
    Make ``path`` hold ``text`` (via ``mine``, linked); FileExistsError if it exists.

    ``mine`` is made afresh (``O_EXCL``, never through a symbolic link): a link put at a
    name told from the stale file's text had the file it points to overwritten (now the
    name has random digits too: :func:`_own_name`).
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(mine)                 # (this call's own, of its previous try)
    fd = os.open(mine, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
    try:
        _write_all_fd(fd, text.encode())
    finally:
        os.close(fd)
    try:
        os.link(mine, path)
        return
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644)
    try:                                # (no hard links here: O_EXCL, then its words)
        _write_all_fd(fd, text.encode())
    finally:
        os.close(fd)


def _write_all_fd(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _alive(pid: int, started: str = '') -> bool:
    """
    Tell whether process ``pid`` of this machine is alive (one of another user counts).

    ``started``: its :func:`_started` when it made the file ('' or '-': unknown); a live
    process that started otherwise is another one with the same pid (after a reboot, or
    pids wrapped around), and the holder is gone.
    """
    if not pid_alive(pid):
        return False
    now = _started(pid)
    if now.endswith(_ENDED):    # (a zombie: ended, its flock would be let go already)
        return False
    return started in ('', '-') or now == '-' or now == started


def _maker() -> str:
    """Return the first line of a hold this process makes: host, pid, start, space, machine."""
    return (f'{socket.gethostname()} {os.getpid()} {_started(os.getpid())} {pid_space()} '
            f'{machine_tag()}')


def _other_machine(host: str, started: str, machine: str) -> str | None:
    """
    Return words saying a hold of host name ``host`` may be another machine's; None if not.

    Why: robots made from one system image (a cloned SD card) share the host name, and the
    host's pid namespace; a hold one of them made was judged by its pid on the other (no
    such process there, or one that started at another time) and taken as a killed run's,
    and both held the folder. ``started`` (its maker's :func:`_started`) names its boot: one
    of this boot is this machine's (boot ids are random). One of another boot is an earlier
    boot of this machine only where it names a piece of this machine's hardware (``machine``,
    its maker's :func:`machine_tag`: a clone's serial number and factory addresses are all
    its own). Any piece, not all: the same machine reads more or fewer of them at another
    time (a hold made on a Jetson's host names its serial number, which Docker masks from
    its containers; a USB adapter added or gone; a Wi-Fi address set by NetworkManager),
    and all of them refused its own hold after a restart, for a human to remove (left: a
    USB adapter moved from a robot to its clone makes the clone take the robot's hold). Where
    either side cannot say, it cannot be told from another machine's and is held. One that
    says no boot (no /proc there) is judged as before.
    """
    boot, colon, _ = started.partition(':')
    if not colon or not boot:
        return None
    try:
        if boot == _boot_id():
            return None
    except OSError:
        return None                     # (this machine cannot say: judged as before)
    ours = machine_tag()
    if machine in ('', '-') or ours == '-':
        return (f'made on {host} in another boot, by another machine of that name (made '
                'from one system image?) or by this one before a restart, which cannot be '
                'told apart here')
    if set(machine.split(',')) & set(ours.split(',')):
        return None                     # (this machine before a restart: ended)
    return (f'made on another machine named {host} (hardware {machine}, this one {ours}: '
            'made from one system image?)')


def _why_flock_let_go(held: str, text: str) -> str | None:
    """Return why ``held`` of another container of this kernel is taken (None: not so)."""
    first, _, rest = text.partition('\n')
    host, _, started, space = (first.split(' ') + [''] * 4)[:4]
    if host == socket.gethostname() and not _other_space(started, space):
        return None
    if not _ended_by_flock(held, started, rest):
        return None
    who = f'host name {host}' if host != socket.gethostname() else f'pid namespace {space}'
    return (f'made in this boot by a run of another container ({who}) that no longer holds '
            f"{held[:-len(HELD_SUFFIX)]}'s flock, which every run of this kernel takes first")


def _say_taken_over(held: str, text: str, line: str) -> None:
    """Say on stderr in one line that ``held`` (``line``'s) was taken over, and why."""
    why = _why_flock_let_go(held, text)
    if why is not None:
        print(f'rog_ros: took over {held} ({line}): {why}', file=sys.stderr, flush=True)


def machine_tag() -> str:
    """
    Return this machine's hardware, as 8 hex digits a part joined by ',' ('-': none found).

    Its parts: the device tree's serial number (a Jetson's or Raspberry Pi's chip) and the
    factory addresses (``addr_assign_type`` 0) of its network devices that are hardware (a
    ``device`` link: no bridge, veth or dummy). They differ between machines made from one
    system image, whose host name and ``/etc/machine-id`` are the same, and stay across a
    restart; a part added or gone (a USB network adapter) leaves the others
    (:func:`_other_machine` asks for one in common). None in a container without the host's
    network and device tree.
    """
    parts = []
    for path in ('/sys/firmware/devicetree/base/serial-number',
                 '/proc/device-tree/serial-number'):
        serial = _read_small(path)
        if serial:
            parts.append(f'serial {serial}')
            break
    net = '/sys/class/net'
    try:
        devices = os.listdir(net)
    except OSError:
        devices = []
    for device in devices:
        base = os.path.join(net, device)
        if (not os.path.exists(os.path.join(base, 'device'))
                or _read_small(os.path.join(base, 'addr_assign_type')) != '0'):
            continue
        address = _read_small(os.path.join(base, 'address'))
        if address.strip('0:'):
            parts.append(f'mac {address}')
    digests = sorted({hashlib.sha1(part.encode()).hexdigest()[:8] for part in parts})
    return ','.join(digests) or '-'


def _read_small(path: str) -> str:
    """Return the text of the small file ``path``, stripped ('' where it cannot be read)."""
    try:
        with open(path, 'rb') as fh:
            return fh.read(256).decode('ascii', errors='replace').strip(' \t\r\n\0')
    except OSError:
        return ''


_ENDED = ':ended'
"""What :func:`_started` adds for a process that has ended but is not yet waited for."""


def _started(pid: int) -> str:
    """
    Return when process ``pid`` started, as ``BOOT_ID:TICKS`` ('-' where there is no /proc).

    ``/proc/PID/stat``'s start time (clock ticks since boot) with the boot's id: one
    process's whole life, told from any later process of the same pid without clocks.
    A process that has ended, not yet waited for by its parent (a zombie: a node that
    ``rog fleet`` killed and has not reaped yet), has ``_ENDED`` added.
    """
    try:
        boot = _boot_id()
        with open(f'/proc/{int(pid)}/stat', encoding='ascii', errors='replace') as fh:
            fields = fh.read().rpartition(')')[2].split()
        return f'{boot}:{int(fields[19])}' + (_ENDED if fields[0] in ('Z', 'X') else '')
    except (OSError, ValueError, IndexError):
        return '-'


def pid_space() -> str:
    """
    Return this process's pid namespace (as ``pid:[INODE]``; '-' where there is no /proc).

    A pid names a process of one namespace: two containers that share the host's network
    (and so its name) number their processes each on their own.
    """
    try:
        return os.readlink('/proc/self/ns/pid')
    except OSError:
        return '-'


def _other_space(started: str, space: str) -> bool:
    """
    Tell whether a ``.held`` file of this host was made in another pid namespace, this boot.

    ``started`` and ``space``: its maker's :func:`_started` and :func:`pid_space`. Its pid
    names no process here, or another one: it cannot be told stale. One made before this
    boot is (every process of that boot has ended), as is one that does not say.
    """
    here = pid_space()
    if space in ('', '-') or here == '-' or space == here:
        return False
    try:
        return started.partition(':')[0] == _boot_id()
    except OSError:
        return True


def _remove_held_file(held: str, dev: int, ino: int) -> OSError | None:
    """
    Remove the ``.held`` file ``held`` if it is still the file ``(dev, ino)``.

    It is first renamed to a name of this process alone and checked there: one that another
    run made in its place meanwhile is put back (``link``, which never replaces one).
    Return the error of a file that is there but cannot be removed (EPERM, EACCES: another
    user's in a sticky folder), else None.
    """
    aside = f'{held}{_GONE_INFIX}{socket.gethostname()}-{os.getpid()}'
    try:
        os.rename(held, aside)
    except FileNotFoundError:
        return None                     # (gone already)
    except OSError as exc:
        return exc
    try:
        st = os.lstat(aside)
        if (st.st_dev, st.st_ino) != (dev, ino):
            with contextlib.suppress(OSError):
                os.link(aside, held)    # another run's hold: back where it was
    finally:
        with contextlib.suppress(OSError):
            os.unlink(aside)
    return None


def flock_is_local(path: str) -> bool:
    """
    Tell whether ``flock`` on ``path`` locks on this machine only (a shared file system).

    There a run on another machine takes the same folder: NFS with ``nolock`` or
    ``local_lock=all|flock``, CIFS with ``nobrl``, sshfs and other FUSE network mounts (one
    shown as plain ``fuse`` judged by its source: ``sshfs#user@host:/path``), 9p, virtiofs,
    cluster file systems with their flock made local (the list and what each entry rests on:
    :func:`rog_ros.atomic.flock_is_local`). Read from ``/proc/mounts``, every octal escape
    decoded (a mount point with a tab or backslash: :func:`rog_ros.atomic.read_mounts`);
    False where that cannot be read.
    """
    return _flock_is_local(path, _mounts())


def _removed(fd: int, path: str) -> bool:
    """
    Remove lock file ``path`` if it is still the file open (and held) as ``fd``; True if so.

    For another user's lock file that this process holds (so no run does): removed, it is
    made again as this user's, with this run's line. A folder that does not let us remove
    it (sticky, as /tmp) keeps it: held all the same.
    """
    if not _still_there(fd, path):
        return False
    try:
        os.unlink(path)
    except OSError:
        return False
    return True


def _still_there(fd: int, path: str) -> bool:
    """Tell whether ``path`` still names the file open as ``fd`` (not removed or replaced)."""
    try:
        here, held = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)


def lock_holder(path: str) -> str | None:
    """Return the holder line of the run that holds the lock file ``path``; None when free."""
    if fcntl is None:
        return None
    by_file = held_file_holder(path)
    if by_file is not None:
        return by_file
    try:          # (non-blocking: a FIFO there waited for a writer, and the run hung)
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None           # (no lock file: taking it refuses it, naming it)
        try:
            # a shared lock, dropped at once: only a run started in that same instant is
            # refused, and the holder's line in the file is left as it is
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return None
            return ' '.join(_holder(fd).split())
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _refuse_inside_held(out: str) -> None:
    """Raise ``OutputInUse`` if a folder above ``out`` is held by another process's run."""
    folder = _folder_key(out)
    while True:
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent
        if folder in _HELD_HERE:
            continue          # this process's own run: it writes into its own folders
        holder = lock_holder(os.path.join(folder, LOCK_FILE))
        if isinstance(holder, _NoRun):
            raise OutputInUse(f'{out} is inside {folder}, which cannot be taken: {holder}')
        if holder is not None:
            raise OutputInUse(
                f'{out} is inside {folder}, which is in use by another run ({holder}); give '
                'this one an --out outside it, or wait until that one ends')


NESTED_DEPTH = 3
"""How many folder levels below an output folder are searched for a run that holds one."""

_NESTED_FOLDERS = 2000
"""At most this many folders are searched (``--out ~`` must not walk a whole home)."""


def held_within(folder: str, depth: int = NESTED_DEPTH) -> tuple | None:
    """
    Return ``(path, holder)`` of a folder at or below ``folder`` held by another process.

    None when there is none (this process's own holds do not count). The search goes
    ``depth`` levels down and stops after ``_NESTED_FOLDERS`` folders: run folders nest
    one or two levels (a comparison inside a reproduction, a fleet inside a chaos
    scenario), and a folder that is no run folder must not cost a walk of everything in it.
    """
    top = _folder_key(folder)
    if not os.path.isdir(top):
        return None
    queue = collections.deque([(top, 0)])     # breadth first: the shallow folders first
    seen = 0
    while queue:
        root, level = queue.popleft()
        seen += 1
        if seen > _NESTED_FOLDERS:
            return None
        room = _NESTED_FOLDERS - seen if level < depth else 0    # none queued past the cap
        found = _held_here(root, queue, level + 1, room)
        if found is not None:
            return found
    return None


def _held_here(root: str, queue, level: int, room: int) -> tuple | None:
    """
    Return ``(root, holder)`` if ``root`` is held by another process, else None.

    Scan ``root`` once: its lock file is looked for by name (no list of its files is made),
    and its folders (not links to folders) go on ``queue`` at ``level`` while it has fewer
    than ``room`` entries (those past the cap would never be searched). A folder that
    cannot be read is skipped.
    """
    locked = False
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.name == LOCK_FILE:
                    locked = True
                elif len(queue) < room:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            queue.append((entry.path, level))
                    except OSError:
                        pass
    except OSError:
        return None
    if locked and root not in _HELD_HERE:
        holder = lock_holder(os.path.join(root, LOCK_FILE))
        if holder is not None:
            return root, holder
    return None


def _refuse_holding_held(out: str) -> None:
    """
    Raise ``OutputInUse`` if a folder inside ``out`` is held by another process's run.

    The opposite nesting of ``_refuse_inside_held``: ``rog reproduce --out rp`` started
    while ``rog compare --out rp/toy-indoors`` runs would write into that comparison's
    folder (and fail there, after its other work) instead of being refused up front.
    """
    found = held_within(out)
    if found is not None and found[0] != _folder_key(out):   # out itself: flock says so
        if isinstance(found[1], _NoRun):
            raise OutputInUse(f'{out} holds {found[0]}, which cannot be taken: {found[1]}')
        raise OutputInUse(
            f'{out} holds {found[0]}, which is in use by another run ({found[1]}); give '
            'this one another --out, or wait until that one ends')


def _folder_key(path: str) -> str:
    """Return the real absolute path of ``path`` (one folder reached by two names is one)."""
    return os.path.realpath(os.path.abspath(path))


@contextlib.contextmanager
def held_output(out: str, command: str):
    """
    Hold ``out`` for the ``with`` block (``OutputLock.take``); raise ``OutputInUse`` if held.

    A directory this call created is removed again on the way out if the block left nothing
    in it but empty folders (a run refused for bad input, or stopped by Ctrl-C before it
    wrote a result): bad input changes nothing on disk. Folders that hold files stay.
    """
    made = _first_missing(os.path.abspath(out))
    lock = OutputLock.take(out, command)
    try:
        yield lock
    finally:
        try:
            if made is not None:      # (still held: a run taking it now sees the file go)
                _remove_if_empty(os.path.abspath(out), made)
        finally:
            lock.release()


def _first_missing(path: str) -> str | None:
    """Return the outermost folder of ``path`` that does not exist yet, or None."""
    missing = None
    while not os.path.exists(path):
        missing, parent = path, os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing


def _remove_if_empty(out: str, made: str) -> None:
    """
    Remove what a run that wrote nothing leaves of ``out``.

    That is the empty folders below it, ``out`` itself if only its lock file is left, and
    then its empty parents up to ``made`` (the outermost one this run created).
    """
    for root, _, _ in os.walk(out, topdown=False):
        if root != out:
            with contextlib.suppress(OSError):
                os.rmdir(root)
    with contextlib.suppress(OSError):
        left = set(os.listdir(out))
        if LOCK_FILE not in left or not left <= {LOCK_FILE, LOCK_FILE + HELD_SUFFIX}:
            return
        for name in sorted(left):       # (the O_EXCL hold last: held until then)
            os.unlink(os.path.join(out, name))
        path = out
        while True:
            os.rmdir(path)            # OSError (not empty) ends the climb
            if path == made:
                break
            path = os.path.dirname(path)


def _holder(fd: int) -> str:
    """Return the holder's line from the lock file, or words saying it is unknown."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 400).decode(errors='replace').strip()
    except OSError:
        text = ''
    return text or 'a process that has not said which'
