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
State directory: what a fleet's supervisor checks of ``--state-dir`` before any node starts.

Each node loads its own state file when it starts (``durable.StateFile``). One unreadable
worker file used to stop only its worker, after the server and the other robots had
restored, rejoined and rewritten the run's results; checked here first, a damaged file
changes nothing. The check reads the files' zip structure and checksums (``torch.save``
writes a zip archive), so the supervisor stays free of torch.
"""

from __future__ import annotations

import os
import pickle
import re
import struct
import zipfile

from rog_ros import checks
from rog_ros.archives import damage, model_damage  # noqa: F401 - state_dir's, as before
from rog_ros.atomic import remove_write_leftovers
from rog_ros.nodes.output_lock import lock_holder

SERVER_STATE_FILE = 'server.pt'
"""The server's checkpoint in a state directory: the file a server restores its run from."""
STATE_FILE = re.compile(r'(server|worker_[0-9]+)\.pt')
"""Names of the nodes' state files in a state directory."""
JOURNAL_FILE = 'server.journal'
"""A push server's write-ahead journal (``push_journal.JOURNAL_FILE``; torch-free here)."""
_JOURNAL_FRAME = struct.Struct('<2sII')
"""A journal record's frame: magic ``RJ``, body length, CRC (``push_journal._FRAME``)."""


def state_files(state_dir) -> list:
    """Return the names of the nodes' state files in ``state_dir``, sorted ([]: none yet)."""
    try:
        names = os.listdir(state_dir) if state_dir else []
    except OSError:
        return []                       # (no folder yet: a first run)
    return sorted(n for n in names if STATE_FILE.fullmatch(n))


def resumes(state_dir, rank=None) -> bool:
    """
    Tell whether a server given ``state_dir`` restores a run from it (its state is there).

    The server's checkpoint, or a push server's journal with a record (``journal_has_records``).

    Why: only the server's state makes a run go on; the workers write theirs before every
    push, the server every few iterations. A run stopped before the server's first checkpoint
    leaves worker files only (and no journal record of a push server), and its server starts
    afresh and sets the earlier results aside: a supervisor that took any state file for a
    resume kept the logs of a run that was not resumed, and said it was. ``rank`` asks the
    same of worker ``rank`` alone (a worker robot, whose server's checkpoint is on another
    machine): its node restores its own state file, ``worker_<rank>.pt``, whenever that file
    is there.
    """
    if not state_dir:
        return False
    if os.path.isfile(os.path.join(state_dir, _own_file(rank))):
        return True
    return rank is None and journal_has_records(state_dir)


def journal_has_records(state_dir) -> bool:
    """
    Tell whether ``state_dir`` holds a push server's journal with a record after its header.

    Why: a push server killed before its first checkpoint resumes from its journal alone
    (checkpoint 0, ``ServerHooks.restore``), while ``rog fleet`` took the folder for a fresh
    run's: it set the logs and results of the run aside, and never said the same command
    resumes it. Reads the header's frame only (a torn first record, which the server drops
    and starts afresh on, reads as one: its results are set aside by the server itself).
    """
    try:
        with open(os.path.join(state_dir, JOURNAL_FILE), 'rb') as f:
            frame = f.read(_JOURNAL_FRAME.size)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return False
    if len(frame) < _JOURNAL_FRAME.size:
        return False
    magic, n, _ = _JOURNAL_FRAME.unpack(frame)
    return magic == b'RJ' and size > _JOURNAL_FRAME.size + n


def worker_state_file(rank) -> str:
    """Return the name of worker ``rank``'s state file in a state directory (``STATE_FILE``)."""
    return f'worker_{int(rank)}.pt'


def _own_file(rank=None) -> str:
    """Return the state file the server (``rank`` None) or worker ``rank`` restores from."""
    return SERVER_STATE_FILE if rank is None else worker_state_file(rank)


def resuming_line(state_dir, rank=None) -> str:
    """
    Say which saved state a fleet restores from ``state_dir`` ('' when its server would not).

    With ``rank``: the state worker ``rank`` restores ('' when it has none there).
    """
    if not resumes(state_dir, rank):
        return ''
    names = state_files(state_dir) if rank is None else [_own_file(rank)]
    if rank is None and journal_has_records(state_dir):
        names.append(JOURNAL_FILE)
    return f'resuming from the state in {state_dir} ({", ".join(names)})'


def train_again(state_dir) -> str:
    """
    Say how to train again on the state of a finished run (``rog fleet``, ``rog robot``, nodes).

    One wording for every command and node that finds the run in ``state_dir`` finished.
    """
    return f'to train again, move {state_dir} away or give another --state-dir'


class _Stand:
    """What a torch object of a state file's pickle is read as: nothing (never run)."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass


class _WithoutTorch(pickle.Unpickler):
    """
    Unpickle the ``data.pkl`` of a ``torch.save`` archive into its plain containers.

    Every class or function the pickle names (torch's tensor rebuilders and storages) is read
    as :class:`_Stand`, a dictionary subclass as a dict, and no code of the file runs; the
    tensors' data (the archive's other entries) is not read.
    """

    def find_class(self, module, name):
        return dict if (module, name) == ('collections', 'OrderedDict') else _Stand

    def persistent_load(self, pid):
        return None


def finished_run(state_dir) -> dict | None:
    """
    Return ``{'checkpoint': N, 'out': DIR or None}`` when ``state_dir`` holds a finished run.

    Read from the server's checkpoint, without torch (the supervisor holds none): so ``rog
    fleet`` given the state of a run that had finished says so and starts nothing. None when
    there is no checkpoint, it is unreadable, or it is of a run that goes on (or was written
    before checkpoints said whether their run had finished: the nodes then say it).
    """
    if not resumes(state_dir):
        return None
    try:
        with zipfile.ZipFile(os.path.join(state_dir, SERVER_STATE_FILE)) as archive:
            name = next(n for n in archive.namelist() if n.endswith('/data.pkl'))
            with archive.open(name) as fh:
                obj = _WithoutTorch(fh).load()
    except Exception:  # noqa: B902 - any checkpoint not read here: its server decides
        return None
    if not isinstance(obj, dict) or obj.get('finished') is not True:
        return None
    record = obj.get('run_record')
    out = record.get('out') if isinstance(record, dict) else None
    return {'checkpoint': obj.get('id'), 'out': out if isinstance(out, str) else None}


def lock_file(path) -> str:
    """Return the lock file of state file ``path``: ``.<name>.lock`` beside it (durable.hold)."""
    path = os.path.abspath(os.fspath(path))
    return os.path.join(os.path.dirname(path), f'.{os.path.basename(path)}.lock')


def held_state_files(state_dir: str) -> list:
    """Return ``[(file name, holder line), ...]`` for state files a running node holds."""
    try:
        names = os.listdir(state_dir) if state_dir else []
    except OSError:
        return []
    held = []
    for name in sorted(names):
        if name.startswith('.') and name.endswith('.lock') and STATE_FILE.fullmatch(name[1:-5]):
            holder = lock_holder(os.path.join(state_dir, name))
            if holder is not None:
                held.append((name[1:-5], holder))
    return held


def unreadable_state_files(state_dir: str) -> list:
    """Return ``[(file name, reason), ...]`` for state files in ``state_dir`` that are damaged."""
    bad = []
    for name in state_files(state_dir):
        why = damage(os.path.join(state_dir, name))
        if why:
            bad.append((name, why))
    return bad


def check_state_dir(name: str, state_dir: str) -> str:
    """
    Return ``state_dir`` if the nodes can keep and restore their state there; else raise.

    ConfigError (one line) for a place that cannot be a writable directory, a directory
    holding a damaged state file, or one whose state files running nodes hold (another
    fleet's: its nodes would have stopped ours one by one). The temporary files of saves a
    crash cut short are removed (:func:`rog_ros.atomic.remove_write_leftovers`: those no live
    process writes): a node removes its own state file's, but nothing removed those of the
    server's journal (``server.journal``, rewritten at every checkpoint), so a server killed
    again and again while it emptied its journal left one more each time.
    """
    checks.output_dir(name, state_dir)
    held = held_state_files(state_dir)
    if held:
        file, holder = held[0]
        raise checks.ConfigError(
            f'{name} {state_dir}: state file {file} is in use by another node ({holder}); '
            'give this run another --state-dir, or wait until that one ends')
    remove_write_leftovers(state_dir)     # (killed saves' temporaries: no live write's)
    bad = unreadable_state_files(state_dir)
    if bad:
        file, why = bad[0]
        more = f' (and {len(bad) - 1} more)' if len(bad) > 1 else ''
        raise checks.ConfigError(
            f'{name} {state_dir}: state file {file} is unreadable ({why}){more}; move the '
            'state directory away to start the run afresh (the others alone would resume '
            'without what this one held)')
    return state_dir
