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
On-disk cache of pre-trained starting checkpoints, keyed by workload options + code version.

Pre-training takes tens of seconds; every simulator run, node start and test would otherwise
repeat it. Entries are written atomically (temp file in the same folder, fsync, rename, fsync of
the folder), so a crash or two processes building the same entry never leave a torn file: a
reader sees either no entry or a complete one; the temporary file of a build killed while it
saved is removed when an entry is next built (its own, at its next use; a live build's, in
another process, is kept: it holds its file's lock). Location: `$ROG_CACHE_DIR`, default
`~/.cache/rog_ros`; where that folder cannot be made or written (a container user's home, a
read-only volume), entries are read from it still and written to (and then read from) a folder
of this user's under the system's temporary one. Entries are unpickled, so a folder or an
entry that someone else could have written (another user's, or writable by everyone: a
``$HOME`` of ``/tmp``) is not read; the private temporary folder is used instead. No torch at
import (``rog doctor`` checks the
cache without it): torch is imported where an entry is saved or loaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
import re
import stat
import sys
import tempfile
import time

from rog_ros.atomic import atomic_write_with, remove_write_leftovers

CACHE_ENV = 'ROG_CACHE_DIR'


_building: list = []     # names of the entries being built now (innermost last)

PROGRESS_STEPS = 5       # progress lines per stage of a build: every 20 %


def report_progress(stage: str, done: int, total: int) -> None:
    """
    Say how far a first-use build has come: ``stage`` is ``done`` of ``total`` steps.

    One line at every fifth of the way (stderr); silent outside a build, so the workloads'
    training code can call it always. Pre-training is most of a minute or more of a fresh
    machine's first run, which otherwise shows one line and then nothing.
    """
    if not _building or total <= 0 or not 0 < done <= total:
        return
    if PROGRESS_STEPS * done // total > PROGRESS_STEPS * (done - 1) // total:
        print(f'rog_ros: preparing {_building[-1]}: {stage} {100 * done // total} %',
              file=sys.stderr, flush=True)


def cache_dir():
    """Return the cache folder: `$ROG_CACHE_DIR`, else `~/.cache/rog_ros` (created on demand)."""
    path = Path(os.environ.get(CACHE_ENV) or Path.home() / '.cache' / 'rog_ros')
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir_name() -> str:
    """Return the cache folder's path as `cache_dir` uses it, without making it."""
    return os.environ.get(CACHE_ENV) or str(Path.home() / '.cache' / 'rog_ros')


def fallback_dir() -> Path:
    """Return the folder used where the cache folder cannot be written (not made here)."""
    user = os.getuid() if hasattr(os, 'getuid') else 0
    return Path(tempfile.gettempdir()) / f'rog_ros_cache_{user}'


def _usable_cache_dir():
    """
    Return `cache_dir()`, or a folder under the system's temporary one if it cannot be made.

    A robot's container often runs as a user whose home cannot be written: the workload is
    then cached in the temporary folder (the nodes of one machine share it) with one warning,
    instead of a traceback before training. None when neither can be made: build uncached.
    """
    try:
        folder = cache_dir()
    except OSError as err:
        return _fallback_for(cache_dir_name(), err.strerror or type(err).__name__)
    if not _trusted(folder):
        return _fallback_for(str(folder), 'another user owns it or everyone may write it: '
                                          'its entries would be unpickled')
    return folder


def _fallback_for(where: str, reason: str):
    """Warn that ``where`` cannot be used (``reason``); return `fallback_dir()` or None."""
    fallback = _private_fallback(create=True)
    print(f'rog_ros: cannot use the cache folder {where} ({reason}); '
          + (f'caching in {fallback} instead' if fallback else 'building without a cache')
          + f' (set {CACHE_ENV} to a writable folder)', file=sys.stderr, flush=True)
    return fallback


def _private_fallback(create: bool):
    """
    Return `fallback_dir()` if it is ours alone, else None; ``create`` makes it first.

    Without ``create`` a folder that does not exist is None too: that is a lookup only.
    """
    user = os.getuid() if hasattr(os, 'getuid') else 0
    fallback = fallback_dir()
    try:
        if create:
            fallback.mkdir(mode=0o700, parents=True, exist_ok=True)
        return fallback if _private(fallback, user) else None
    except OSError:
        return None


def fallback_private() -> bool:
    """Tell whether `fallback_dir()` exists and is this user's alone (else it is not used)."""
    return _private_fallback(create=False) is not None


def _write_error(folder: Path):
    """
    Return why no entry can be written in ``folder`` (a probe file), or None when one can.

    A folder that exists but is read-only (a root-owned ``~/.cache/rog_ros`` from a container
    volume, a read-only mount) would otherwise make every run pre-train again.
    """
    try:
        fd, probe = tempfile.mkstemp(prefix='.probe-', suffix='.tmp', dir=folder)
    except OSError as err:
        return err.strerror or type(err).__name__
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def _trusted(path: Path, follow: bool = True) -> bool:
    """
    Tell whether ``path`` can only have been written by this user or root.

    Owned by one of them, not writable by everyone, and (``follow=False``, for entries) not a
    symbolic link. Entries are unpickled: a file another local user planted, in a folder of
    theirs or one everyone may write, would run their code here.
    """
    if not hasattr(os, 'getuid'):
        return True
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return False
    if not follow and stat.S_ISLNK(st.st_mode):
        return False
    return st.st_uid in (os.getuid(), 0) and not st.st_mode & 0o002


def _private(folder, user) -> bool:
    """
    Whether ``folder`` is ours and only ours to write.

    Cached files are unpickled (``weights_only=False``): in a folder of the shared temporary
    one that another user made or may write, a planted file would run code here.
    """
    st = os.lstat(folder)        # a symbolic link could be pointed elsewhere after the check
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return False
    if hasattr(os, 'getuid') and st.st_uid != user:
        return False
    return not st.st_mode & 0o022


def cache_key(name, options, code_version):
    """Hash a workload name, its JSON-able options and code version to a 16-hex-digit key."""
    text = json.dumps({'name': name, 'options': options, 'code': code_version},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def atomic_save(obj, path):
    """
    `torch.save` to `path` so that the file appears complete or not at all (mode 0644).

    Through :func:`rog_ros.atomic.atomic_write_with`: its temporary file is locked while it
    is written, so that one a killed build left (as large as the entry) is told from a live
    build's and removed by the next build (`remove_cache_leftovers`). Before,
    ``.ENTRY.XXXXXXXX.tmp`` files of killed builds stayed in the cache for ever.
    """
    import torch
    atomic_write_with(path, lambda f: torch.save(obj, f), mode=0o644)


_OLD_TEMP = re.compile(r'\.(.+)\.[a-z0-9_]{8}\.tmp', re.DOTALL)
"""Temporaries of `atomic_save` before 2026-12-07: ``.ENTRY.`` + mkstemp's 8 + ``.tmp``."""


def remove_cache_leftovers(folder, entry: str = '') -> int:
    """
    Remove the temporaries killed entry writes left in cache ``folder``; return how many.

    Those of `atomic_save` that no live process writes (a build going on in another process
    holds its temporary's lock: kept). With ``entry`` (called while its build lock is held,
    `_build_lock`), also that entry's temporaries of versions before 2026-12-07, which were
    not locked: one is written only under the entry's build lock, or by a process that found
    no lock there. Never raises (a read-only cache removes nothing).
    """
    removed = 0
    with contextlib.suppress(OSError):
        removed += remove_write_leftovers(folder)
    if not entry:
        return removed
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            found = _OLD_TEMP.fullmatch(name)
            path = os.path.join(folder, name)
            if found and found.group(1) == entry and os.path.isfile(path) and _trusted(
                    Path(path), follow=False):
                with contextlib.suppress(OSError):
                    os.unlink(path)
                    removed += 1
    return removed


def load_or_build(name, options, code_version, build):
    """
    Return the cached object for (name, options, code_version), calling `build()` on a miss.

    Parameters
    ----------
    name : str
        Workload name; part of the file name so the cache folder stays readable.
    options : dict
        Every option that changes the result (JSON-able); part of the key.
    code_version : str
        Bumped by a workload whenever its data or training code changes results.
    build : callable
        `build() -> obj`, any object `torch.save` can store (tensors, dicts, numbers).

    """
    folder = _usable_cache_dir()
    if folder is None:
        return build()
    entry = f'{name}-{cache_key(name, options, code_version)}.pt'
    cached = _load_entry(folder / entry)    # a read-only folder still serves its entries
    if cached is None and folder != fallback_dir():
        reason = _write_error(folder)
        if reason is not None:      # written to, and found next time in, the fallback
            folder = _fallback_for(str(folder), reason)
            if folder is None:
                return build()
        cached = _load_spare(entry)
    if cached is not None:
        return cached[0]
    path = folder / entry
    remove_cache_leftovers(folder)
    with _build_lock(path) as locked:
        # another process may have built it while we waited (here, or in the fallback)
        cached = _load_entry(path) or _load_spare(entry)
        if cached is not None:
            return cached[0]
        if locked:
            remove_cache_leftovers(folder, entry)
        return _build_and_save(name, path, build)


def _load_spare(entry: str):
    """Return ``(obj,)`` for ``entry`` in the fallback folder if that is ours alone, else None."""
    spare = _private_fallback(create=False)
    return None if spare is None else _load_entry(spare / entry)


def _load_entry(path: Path):
    """Return ``(obj,)`` for a readable entry, else None (a corrupt one is removed)."""
    if not path.exists():
        return None
    if not _trusted(path, follow=False):
        print(f'rog_ros: not reading the cached {path.name}: it is not yours (or everyone may '
              'write it); building it again', file=sys.stderr, flush=True)
        return None
    import torch
    try:
        return (torch.load(path, map_location='cpu', weights_only=False),)
    except Exception:  # noqa: BLE001 - a corrupt entry is rebuilt, never fatal
        with contextlib.suppress(OSError):  # gone already, or a read-only folder's
            path.unlink()
        return None


@contextlib.contextmanager
def _build_lock(path: Path):
    """
    Hold an exclusive lock on ``.<entry>.lock`` (hidden, empty) while one entry is built.

    Processes that start together on a fresh machine (a fleet's nodes, parallel tests, a
    compare's pool) would otherwise each pre-train the same entry: the first builds it, the
    others wait and load it. No lock where the folder refuses one (POSIX `flock` only): then
    each builds, and atomic writes keep the entry whole as before. Yield whether the lock is
    held.
    """
    try:
        import fcntl
        handle = open(path.with_name(f'.{path.name}.lock'), 'a')
    except (ImportError, OSError):
        yield False
        return
    locked = True
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f'rog_ros: another process is preparing {path.name}; waiting for it ...',
                  file=sys.stderr, flush=True)
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            except OSError:
                locked = False
        except OSError:
            locked = False
        yield locked
    finally:
        handle.close()      # closing releases the lock


def _build_and_save(name: str, path: Path, build):
    """Build an entry with progress lines and save it atomically; return it."""
    # tens of seconds with no other output: say what happens, once per entry and machine
    print(f'rog_ros: preparing {name} on first use (its data and pre-trained start; cached '
          f'in {path.parent}, later runs skip this) ...', file=sys.stderr, flush=True)
    started = time.perf_counter()
    _building.append(name)
    try:
        obj = build()
    finally:
        _building.pop()
    _save_somewhere(name, obj, path)
    print(f'rog_ros: {name} ready in {time.perf_counter() - started:.0f} s', file=sys.stderr,
          flush=True)
    return obj


def _save_somewhere(name: str, obj, path: Path) -> None:
    """
    Save ``obj`` at ``path``, else in `fallback_dir()`, where `load_or_build` looks next time.

    A write that fails in a folder that took the probe file (a full disk, a root-squashed
    network home) is tried once more in the fallback; where that fails too, the entry is used
    uncached and the next run prepares it again.
    """
    try:
        atomic_save(obj, path)
        return
    except OSError as err:         # a full disk or a read-only folder
        reason = err.strerror or str(err)
    spare = None if path.parent == fallback_dir() else _private_fallback(create=True)
    if spare is not None:
        try:
            atomic_save(obj, spare / path.name)
        except OSError:
            pass
        else:
            print(f'rog_ros: could not cache {name} in {path.parent} ({reason}); cached in '
                  f'{spare} instead (set {CACHE_ENV} to a writable folder)', file=sys.stderr,
                  flush=True)
            return
    print(f'rog_ros: could not cache {name} in {path.parent} ({reason}); the next run '
          'prepares it again', file=sys.stderr, flush=True)
