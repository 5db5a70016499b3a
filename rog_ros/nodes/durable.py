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
Durable node state: server checkpoints and worker state files (DESIGN section 10).

The engines say *what* their durable state is (``state_dict()`` / ``load_state_dict()``);
this module decides *when* and *how* it reaches the disk:

* ``rog_server --state-dir DIR --checkpoint-every K`` writes ``DIR/server.pt`` every K
  iterations (the slowest worker's clock crossing a multiple of K; a push system's server:
  every K pushes answered in all, ``ServerAdapter.durable_progress``, with a write-ahead
  journal of its engine's inputs between, ``push_journal``), atomically (temp file,
  fsync, rename: :func:`rog_ros.atomic.atomic_write_with`), then tells the engine
  (``checkpoint_confirmed``) so it can tell the workers which of their pushes the checkpoint
  covers. On start, an existing checkpoint is restored: the engine keeps the new incarnation
  it was built with, so workers see a restarted server.
* ``rog_worker --state-dir DIR`` writes ``DIR/worker_<rank>.pt`` when its engine asks
  (``SaveState``: before each push's first END, when a server restart, a resend or a
  confirmed checkpoint changed the pushes it keeps, once after a restart's recovery and once
  when the final model arrives; not after commits and pulls, which a restart redoes; with the
  chaos ledger, also after every computation), and when told to stop, and restores it on
  start.
  For the chaos model (4k parameters) one save costs about a millisecond (``save_ms`` in the
  worker's ledger report); for large models use a fast local disk.

Files hold plain tensors and containers only (NumPy arrays travel as tensors, see
:func:`pack`), loaded with ``weights_only=True``: a state file cannot execute code.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import re
import time

import numpy as np
from rog_ros.archives import damage
from rog_ros.atomic import (atomic_write_with, makedirs_synced, pid_alive,
                            remove_write_leftovers, TEMP_NAME_LENGTH, TEMP_PREFIX)
from rog_ros.nodes.driver import StateWriteError
from rog_ros.nodes.output_lock import hold_lock_file, let_go_of_lock_file, ReadOnlyLockRefused
from rog_ros.nodes.state_dir import lock_file
import torch

FORMAT = 1


class StateError(ValueError):
    """A state file cannot be used (corrupt, other format, other fleet)."""


def add_durable_args(parser: argparse.ArgumentParser, server: bool) -> None:
    """``--state-dir`` (both roles) and ``--checkpoint-every`` (server)."""
    g = parser.add_argument_group('durable state (restart where the node stopped)')
    g.add_argument('--state-dir', default=None,
                   help="directory of this node's state file; restored on start "
                        '(default: none, nothing is saved)')
    if server:
        g.add_argument('--checkpoint-every', type=int, default=10,
                       help='with --state-dir: checkpoint every K iterations (a push '
                            "system's server: every K pushes answered, each one journaled "
                            'before its answer leaves; default 10)')


def check_durable_args(parser, args) -> None:
    """Reject unusable values with a one-line usage error."""
    if getattr(args, 'checkpoint_every', 1) < 1:
        parser.error('--checkpoint-every must be >= 1')
    d = getattr(args, 'state_dir', None)
    if d is not None:
        try:
            makedirs_synced(d)        # (its name durable with the first state saved in it)
        except OSError as err:
            parser.error(f'--state-dir {d}: {err.strerror}')
        if not os.access(d, os.W_OK):
            parser.error(f'--state-dir {d}: not writable')


_HELD = {}
"""
Real paths of the state files' locks this process holds -> ``[descriptor, holds]``.

``holds`` counts the nodes of this process that hold the file (:func:`hold`): the lock is let
go when the last of them lets go (:func:`release`), or when the process ends.
"""


def hold(path, command: str) -> None:
    """
    Hold state file ``path`` for this process until :func:`release`; StateError if another does.

    Two nodes given one state file (two ``ros2 run rog_ros rog_worker`` of one rank on one
    ``--state-dir``, a launch file started twice) wrote their checkpoints over each other's,
    and each restored the other's after a restart. The hold is the output lock's
    (``output_lock.hold_lock_file``): a ``flock`` the kernel drops when the process ends,
    however it ends, so a node killed with SIGKILL never blocks its own restart (``rog fleet
    --respawn``, ``rog robot``), and no process id decides who holds it (a reused one cannot
    make a dead holder look alive); one whose holder has ended is waited for, a while
    (``HOLD_WAIT_S``: a child it forked still holds it), unless no process here has it open
    (a node in another container or on another machine). A lock file that is a symbolic link
    is refused and left as it is.
    The nodes of one fleet share a state directory, each with a file of its own: the hold is
    of the file, not the folder. This process's own hold is no conflict (tests that restart
    nodes in one process): it is counted, and each hold is let go by one :func:`release`.
    """
    lock = lock_file(path)
    key = os.path.realpath(lock)
    if key in _HELD:
        _HELD[key][1] += 1
        return
    deadline = time.monotonic() + HOLD_WAIT_S
    unseen = 0
    while True:
        try:
            makedirs_synced(os.path.dirname(lock))
            fd, holder = hold_lock_file(lock, command)
        except ReadOnlyLockRefused as err:
            raise StateError(f'cannot lock state file {path}: its lock file {lock} is '
                             f'{err.whose}, which this file system cannot flock read-only '
                             f'({err.code}; NFS?); give this node a --state-dir on a local '
                             f'disk, or {err.fix}') from None
        except OSError as err:             # (OutputInUse: a link; says what to do)
            raise StateError(f'cannot lock state file {path}: {err.strerror or err}'
                             f'{_where_to_write(err, lock)}') from None
        if holder is None:
            break
        ended = _ended(holder)
        if ended and not _open_here(lock):   # (a child that let go since: one more try)
            unseen += 1
        if not ended or unseen > 1 or time.monotonic() >= deadline:
            if not ended:
                who = f'another node ({holder})'
            elif unseen > 1:
                who = (f'a node out of sight of this one ({holder}: no such process here; '
                       'in another container, or on another machine sharing this folder)')
            else:
                who = f'a process started by a node that has ended ({holder})'
            raise StateError(f'state file {path} is in use by {who}; stop that one first, or '
                             'give this one another --state-dir (two nodes on one state file '
                             "overwrite each other's checkpoints)")
        time.sleep(0.2)
    _HELD[key] = [fd, 1]


def release(path) -> None:
    """
    Let go of one of this process's holds of state file ``path`` (:func:`hold`'s).

    The last one unlocks it, for every process that shares the lock (the workload's
    DataLoader workers forked with it open), so that another node, or this one configured
    again, takes it at once. A state file not held here is no error.
    """
    key = os.path.realpath(lock_file(path))
    entry = _HELD.get(key)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] <= 0:
        del _HELD[key]
        let_go_of_lock_file(entry[0])


def _where_to_write(err: OSError, lock: str) -> str:
    """
    Say what to do about a state folder this node may not write ('' for other errors).

    A read-only mount (EROFS: the lock file cannot even be created) or a folder of another
    user (EACCES, EPERM) is no fault of the lock; the node needs a state folder of its own.
    """
    if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return ('; give this node a --state-dir it can write (a local disk), or make '
                f'{os.path.dirname(os.path.abspath(lock))} writable for this user')
    return ''


class StateHold:
    """
    One node's hold on its state file: taken at ``configure``, let go at cleanup and shutdown.

    A managed node that was cleaned up (or shut down) kept its hold until its process ended,
    so neither another node nor the same node configured again elsewhere could take the file
    it no longer used.
    """

    def __init__(self):
        self.path = None

    def take(self, path, command: str) -> None:
        """Hold state file ``path`` (``hold``), letting go of the one held before, if other."""
        path = os.fspath(path)
        if path == self.path:
            return
        self.release()
        hold(path, command)
        self.path = path

    def release(self) -> None:
        """Let go of the state file held (idempotent)."""
        path, self.path = self.path, None
        if path is not None:
            release(path)

    def configuring(self, build, unconfigured, undo=None) -> None:
        """
        Run ``build`` (a node's configure); if it fails, let go of what it took, file last.

        The node stays unconfigured, so another node may take the file (this one takes it
        again when configured again). ``unconfigured()`` tells whether the node still is:
        a configure refused to a configured node keeps that node's own hold. ``undo()``
        lets go of the rest the failed configure took (its bus: a configure that failed after
        opening it left its DDS participant, or its rclpy publishers and subscriptions, open,
        and a configure again opened a second one beside it), before the file is let go.
        """
        try:
            build()
        except BaseException:
            if unconfigured():
                try:
                    if undo is not None:
                        undo()
                finally:
                    self.release()
            raise


def let_go_in_turn(log, steps) -> None:
    """
    Close every ``(what, thing)`` of ``steps`` in turn (None: not taken); a failure is logged.

    For a node letting go of what it took (a failed configure, a cleanup), in reverse order
    of taking: a close that fails must not keep the next one from running.
    """
    for what, thing in steps:
        if thing is None:
            continue
        try:
            thing.close()
        except Exception as exc:  # noqa: B902 - logged; the rest is let go all the same
            log.warning(f'could not close {what} cleanly: {type(exc).__name__}: {exc}')


HOLD_WAIT_S = 10.0
"""
How long a node waits for a state file whose holder has ended (seconds).

A process the holder forked (a workload's DataLoader workers) keeps its flock until it
notices that its parent died and exits, within a few seconds: a node restarted after a
SIGKILL (``--respawn``) waits for it instead of stopping. A holder that still runs (or whose
process id another process now has) is refused at once.
"""


def _open_here(lock: str) -> bool:
    """
    Tell whether another process of this one's pid namespace has ``lock`` open.

    Whose holder has ended: a process it forked (waited for), or a node in another container
    or on another machine (its process id names none here; refused at once, not after
    ``HOLD_WAIT_S``). Processes of another user cannot be looked at (not counted). True
    where it cannot be told (no ``/proc``): waited for, as before.
    """
    try:
        st, ns = os.stat(lock), os.readlink('/proc/self/ns/pid')
        pids = os.listdir('/proc')
    except OSError:
        return True
    me = str(os.getpid())
    for pid in pids:
        if not pid.isdigit() or pid == me:
            continue
        try:
            if os.readlink(f'/proc/{pid}/ns/pid') != ns:
                continue                  # (its pids are not ours: a holder line's neither)
            fds = os.listdir(f'/proc/{pid}/fd')
        except OSError:
            continue
        for fd in fds:
            try:
                found = os.stat(f'/proc/{pid}/fd/{fd}')
            except OSError:
                continue
            if (found.st_dev, found.st_ino) == (st.st_dev, st.st_ino):
                return True
    return False


def _ended(holder: str) -> bool:
    """Tell whether the process named in a lock's ``holder`` line has ended."""
    found = re.search(r', pid ([0-9]+),', holder)
    if not found:
        return False
    return not pid_alive(int(found.group(1)))


def supported(engine) -> bool:
    """Tell whether ``engine`` can save and restore its state."""
    return callable(getattr(engine, 'state_dict', None)) and \
        callable(getattr(engine, 'load_state_dict', None))


class StateFile:
    """One atomically replaced state file; ``saves``/``save_s`` measure what it costs."""

    def __init__(self, path: str):
        self.path = path
        self.saves = 0
        self.save_s = 0.0
        self.max_save_s = 0.0
        self.removed_leftovers = self._remove_leftovers()

    def _remove_leftovers(self) -> int:
        """
        Remove the temporary files of saves that a crash cut short; return how many.

        A save writes a temporary file next to the state and renames it over the state; a
        node killed in between left one the size of the state behind (11 MB for an MPCOL
        worker), and a robot restarted by --respawn again and again filled its disk. Only
        this file's own temporaries are removed: one node owns one state file. Those of
        versions before ``WRITE_TEMP_PREFIX`` by name alone; today's unless locked (a save
        going on in another process: :func:`rog_ros.atomic.remove_write_leftovers`).
        """
        folder = os.path.dirname(os.path.abspath(self.path))
        mine = os.path.basename(self.path)
        removed = remove_write_leftovers(folder, mine)
        try:
            names = os.listdir(folder)
        except OSError:
            return 0                  # (no folder yet: nothing was left)
        for name in names:
            if (name.startswith(TEMP_PREFIX) and name.endswith(mine)
                    and len(name) == len(TEMP_PREFIX) + TEMP_NAME_LENGTH + len(mine)):
                try:
                    os.unlink(os.path.join(folder, name))
                    removed += 1
                except OSError:
                    pass
        return removed

    def exists(self) -> bool:
        return os.path.isfile(self.path)

    def save(self, obj: dict) -> None:
        """Serialise ``obj`` (tensors, numbers, strings, containers) and replace the file."""
        t0 = time.perf_counter()
        packed = pack(dict(obj, format=FORMAT))

        def _write(f):
            """Serialise into the temporary file itself: no copy of the state in memory."""
            with checksums_written():
                torch.save(packed, f)
        try:
            atomic_write_with(self.path, _write)
        except OSError as err:
            raise StateWriteError(
                f"cannot save this node's state to {self.path}: {err.strerror or err}; free "
                'space there or give another --state-dir (the last saved state is kept, and '
                'the same command resumes from it)') from err
        dt = time.perf_counter() - t0
        self.saves += 1
        self.save_s += dt
        self.max_save_s = max(self.max_save_s, dt)

    def load(self) -> dict:
        """
        Read the file; ValueError with a one-line reason when it is unusable.

        The archive's checksums are checked first (``archives.damage``): ``torch.load``
        alone took a state file with a flipped bit in a tensor as valid.
        """
        why = damage(self.path)
        try:
            if why:
                raise StateError(why)
            obj = torch.load(self.path, map_location='cpu', weights_only=True)
        except Exception as err:  # noqa: B902 - any corruption: one clear line
            first = (str(err).strip().splitlines() or [''])[0][:120]
            kind = '' if isinstance(err, StateError) else f'{type(err).__name__}: '
            raise StateError(f'state file {self.path} is unreadable ({kind}'
                             f'{first}); move the whole state directory '
                             f'{os.path.dirname(os.path.abspath(self.path))} away to start the '
                             'run afresh (without this file alone, the run would go on with '
                             "the others' state and lose what this one held)") from None
        if not isinstance(obj, dict) or obj.get('format') != FORMAT:
            raise StateError(f'state file {self.path} has an unknown format')
        return unpack(obj)

    def stats(self) -> dict:
        """Save count and cost in milliseconds."""
        return {'saves': self.saves,
                'save_ms_mean': 1e3 * self.save_s / self.saves if self.saves else 0.0,
                'save_ms_max': 1e3 * self.max_save_s}


@contextlib.contextmanager
def checksums_written():
    """
    Have ``torch.save`` write its archive's checksums for the block, whatever was set.

    For every file rog_ros writes with torch (state files, ``model.pt``, ``model_out``).
    ``load`` refuses a state file whose checksums do not match (``archives.damage``); a
    workload's code that turned them off (``torch.serialization.set_crc32_options``, torch
    >= 2.5) would have made every state file of the node unreadable to it.
    """
    get = getattr(torch.serialization, 'get_crc32_options', None)
    was = get() if get is not None else True
    if not was:
        torch.serialization.set_crc32_options(True)
    try:
        yield
    finally:
        if not was:
            torch.serialization.set_crc32_options(False)


_ND = '__ndarray__'


def pack(obj):
    """Replace NumPy arrays (anywhere in dicts, lists, tuples) by tagged tensors."""
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        if a.dtype.kind in 'iu':
            t = torch.from_numpy(a.view(np.int64) if a.dtype.itemsize == 8
                                 else a.astype(np.int64))
        elif a.dtype.kind == 'f':
            t = torch.from_numpy(a.astype(np.float64))
        elif a.dtype.kind == 'b':
            t = torch.from_numpy(a.copy())
        else:
            raise TypeError(f'cannot save a NumPy array of dtype {a.dtype}')
        return {_ND: t, 'dtype': a.dtype.str}
    if isinstance(obj, dict):
        return {k: pack(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [pack(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(pack(v) for v in obj)
    return obj


def unpack(obj):
    """Inverse of :func:`pack`."""
    if isinstance(obj, dict):
        if _ND in obj and set(obj) == {_ND, 'dtype'}:
            dtype = np.dtype(obj['dtype'])
            a = obj[_ND].numpy()
            if dtype.kind in 'iu' and dtype.itemsize == 8:
                return a.view(dtype).copy()
            return a.astype(dtype)
        return {k: unpack(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [unpack(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(unpack(v) for v in obj)
    return obj
