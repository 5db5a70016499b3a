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
Child processes die with the process that started them.

``rog fleet`` starts the node processes, and ``rog compare`` and the reproduction runners start
pools that each run a simulation for minutes. Ctrl-C reaches the whole process group, but a
parent stopped with SIGTERM or SIGKILL (``kill``, a CI timeout, a job scheduler) left them
running as orphans, each holding a core (and a fleet's nodes their DDS traffic) for the rest of
its run. ``die_with_parent`` is what the pools' initializer and the fleet's ``preexec_fn``
(``dies_with_this_process``) call: on Linux the kernel sends the process SIGTERM when its
parent exits (``PR_SET_PDEATHSIG``); elsewhere it does nothing. A leaf module: the nodes and
the experiments both use it.

``run_in_processes`` is the pool the experiments share. Ctrl-C must end it at once, and with
``ProcessPoolExecutor`` it did not: each worker reported the interrupt as the result of the
call it was running and took the next one from the queue, and leaving the executor's
``with`` block waited for every queued call, so an interrupted ``rog compare`` ran to its end.
"""

from __future__ import annotations

import ctypes
import functools
import multiprocessing
import os
import signal
import sys
import threading
from typing import Callable, Iterator, Sequence, Tuple

PR_SET_PDEATHSIG = 1
PR_GET_PDEATHSIG = 2


def die_with_parent(parent_pid: int | None = None) -> None:
    """
    Ask the kernel for SIGTERM when this process's parent exits (Linux; a no-op elsewhere).

    ``parent_pid``: the parent's pid, taken by the parent before it started us. If our parent
    is another process by now, it died before we asked: go at once. Without it nothing is
    checked. (Taking a parent of pid 1 for a dead one stopped every node of a fleet whose
    ``rog fleet`` or ``rog robot`` was a container's command, which runs as pid 1.)
    """
    if not sys.platform.startswith('linux'):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return                       # no prctl here: orphans stay possible, nothing breaks
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)                  # the parent died before we asked: go now


def dies_with_this_process():
    """Return a ``preexec_fn`` that makes a child die with the process calling this."""
    return functools.partial(die_with_parent, os.getpid())


def death_signal() -> int:
    """Return the signal this process gets when its parent exits (0: none, or not Linux)."""
    if not sys.platform.startswith('linux'):
        return 0
    sig = ctypes.c_int(0)
    ctypes.CDLL(None, use_errno=True).prctl(PR_GET_PDEATHSIG, ctypes.byref(sig), 0, 0, 0)
    return int(sig.value)


def run_in_processes(fn: Callable, calls: Sequence[tuple],
                     jobs: int) -> Iterator[Tuple[int, object]]:
    """
    Yield ``(i, fn(*calls[i]))`` as the calls finish, in ``jobs`` spawned processes.

    ``fn`` must be a module-level function (it is pickled). The workers ignore SIGINT and die
    with their parent; the parent's KeyboardInterrupt, or an exception from a call, ends every
    worker at once and is raised here. Spawned, not forked: the parent may hold threads and
    DDS participants that a fork would copy half-way.
    """
    pool = _pool_born_ignoring_sigint(jobs)
    try:
        tasks = [(fn, i, tuple(c)) for i, c in enumerate(calls)]
        for i, result in pool.imap_unordered(_indexed_call, tasks, chunksize=1):
            yield i, result
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _pool_born_ignoring_sigint(jobs: int):
    """
    Start the pool with SIGINT ignored in this process for the moment of the spawn.

    An ignored signal stays ignored across ``exec``, so the pool processes ignore Ctrl-C from
    their first instruction; set only in their initializer, a Ctrl-C while one still imported
    printed its traceback (seen on a loaded machine).
    """
    main = threading.current_thread() is threading.main_thread()   # (signals: main only)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        return multiprocessing.get_context('spawn').Pool(jobs, initializer=_pool_worker_started,
                                                         initargs=(os.getpid(),))
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)


def _pool_worker_started(parent_pid: int) -> None:
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C is the parent's to handle


def _indexed_call(task):
    fn, i, args = task
    return i, fn(*args)
