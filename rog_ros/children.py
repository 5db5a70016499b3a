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
``multiprocessing.Pool`` then lost the call of a process that died (the out-of-memory killer's
SIGKILL) for good: ``rog compare`` waited forever, and Ctrl-C blocked in ``Pool.terminate()``.
So each worker here is a spawned process with a pipe of its own: the parent knows which call
each one runs and sees a death at once (the process's sentinel), fails that call only, and
ends every worker itself without waiting on any.
"""

from __future__ import annotations

import collections
import ctypes
import functools
import multiprocessing
from multiprocessing import connection
import numbers
import os
import pickle
import signal
import sys
import threading
import time
import traceback
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


class ProcessDied(RuntimeError):
    """A call's process ended before the call returned (a signal, e.g. the OOM killer's)."""


def run_in_processes(fn: Callable, calls: Sequence[tuple], jobs: int,
                     on_death: Callable[[int, ProcessDied], object] | None = None
                     ) -> Iterator[Tuple[int, object]]:
    """
    Return an iterator of ``(i, fn(*calls[i]))`` as the calls finish, in ``jobs`` processes.

    ``fn`` must be a module-level function (it is pickled). The workers ignore SIGINT and die
    with their parent; the parent's KeyboardInterrupt, or an exception from a call, ends every
    worker at once and is raised here. Spawned, not forked: the parent may hold threads and
    DDS participants that a fork would copy half-way. A call whose process dies (the
    out-of-memory killer's SIGKILL) raises ``ProcessDied`` here as an exception would; with
    ``on_death``, ``(i, on_death(i, err))`` is yielded instead, computed here, and the other
    calls go on, a fresh process taking the dead one's place.

    No calls start no process (whatever ``jobs``). Otherwise ``jobs`` must be a whole number
    of at least 1: anything else raises ValueError here, before any process starts
    (``multiprocessing.Pool`` refused it too; taking it for 1 hid the caller's mistake).
    """
    pending = collections.deque(enumerate(calls))
    if not pending:
        return iter(())
    if isinstance(jobs, bool) or not isinstance(jobs, numbers.Integral) or jobs < 1:
        raise ValueError(f'run_in_processes: jobs must be a whole number >= 1, got {jobs!r}')
    return _run(fn, pending, min(int(jobs), len(pending)), on_death)


def _run(fn: Callable, pending: collections.deque, jobs: int,
         on_death: Callable[[int, ProcessDied], object] | None
         ) -> Iterator[Tuple[int, object]]:
    """Yield ``(i, fn(*args))`` for the ``(i, args)`` of ``pending`` (``run_in_processes``)."""
    workers = []
    try:
        workers += _workers_born_ignoring_sigint(jobs)
        for w in workers:
            w.take(fn, pending)
        while any(w.call is not None for w in workers):
            busy = [w for w in workers if w.call is not None]
            ready = set(connection.wait([w.conn for w in busy]
                                        + [w.process.sentinel for w in busy]))
            for w in busy:
                if w.conn not in ready and w.process.sentinel not in ready:
                    continue
                i, message = w.call, w.receive()
                if message is None:              # it died: only its own call is lost
                    err = ProcessDied(w.how_it_ended())
                    workers.remove(w)
                    w.close()
                    if on_death is None:
                        raise err
                    yield i, on_death(i, err)
                    if pending:
                        workers += _workers_born_ignoring_sigint(1)
                        workers[-1].take(fn, pending)
                    continue
                if message[0] == 'raised':
                    raise _with_its_traceback(*message[1:])
                yield i, message[1]
                w.take(fn, pending)
        for w in workers:
            w.process.join()                     # each was told that nothing is left
    except BaseException:
        _end_all(workers)
        raise
    finally:
        for w in workers:
            w.close()


class _Worker:
    """One spawned process that runs the calls sent over its pipe, one at a time."""

    def __init__(self, process, conn):
        """Hold ``process`` and the parent's end ``conn`` of its pipe; no call yet."""
        self.process, self.conn, self.call = process, conn, None

    def take(self, fn: Callable, pending: collections.deque) -> None:
        """Send it the next pending call, or tell it that none is left (it then exits)."""
        self.call, task = None, None
        if pending:
            i, args = pending.popleft()
            self.call, task = i, (fn, i, tuple(args))
        try:
            self.conn.send(task)
        except (BrokenPipeError, ConnectionResetError):
            pass      # it died meanwhile: its sentinel tells, and its call counts as lost

    def receive(self):
        """
        Return its message about the call, or None when it died without one.

        A result that pickles but cannot be unpickled here (a class whose ``__init__`` takes
        other arguments than it passes on) comes back as the call's error, naming it: the
        unpickling TypeError alone named neither the call nor its result.
        """
        if not self.conn.poll():
            return None
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            return None     # (OSError: it died half-way through sending, e.g. the OOM killer)
        except Exception as err:  # noqa: B902 - whatever a result's own unpickling raises
            return ('raised', RuntimeError(f'call {self.call}: its result could not be '
                                           f'received: {type(err).__name__}: {err}'),
                    traceback.format_exc())

    def how_it_ended(self) -> str:
        """Say, in one line, how the process ended (waiting briefly for its exit status)."""
        self.process.join(5.0)
        code = self.process.exitcode
        if code is None:
            return 'its process closed its pipe and went silent'
        if code >= 0:
            return f'its process exited with status {code} before the call returned'
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = 'unknown signal'
        oom = ', as the out-of-memory killer does' if -code == signal.SIGKILL else ''
        return f'its process was killed by signal {-code} ({name}{oom})'

    def close(self) -> None:
        """Close the parent's end of the pipe and release the process object."""
        self.conn.close()
        if self.process.exitcode is not None:
            self.process.close()


def _end_all(workers) -> None:
    """
    End every worker at once: SIGTERM, then SIGKILL for those still there after a second.

    Nothing here waits on a worker without a deadline, so that Ctrl-C and SIGTERM stop the
    parent promptly whatever state a worker is in.
    """
    for w in workers:
        if w.process.exitcode is None:
            w.process.terminate()
    deadline = time.monotonic() + 1.0
    for w in workers:
        w.process.join(max(0.0, deadline - time.monotonic()))
        if w.process.exitcode is None:
            w.process.kill()
            w.process.join(5.0)


def _workers_born_ignoring_sigint(n: int) -> list:
    """
    Start ``n`` workers with SIGINT ignored in this process for the moment of the spawn.

    An ignored signal stays ignored across ``exec``, so the workers ignore Ctrl-C from their
    first instruction; set only once they run, a Ctrl-C while one still imported printed its
    traceback (seen on a loaded machine). (A Ctrl-C within the milliseconds of the spawn itself
    is lost: the disposition is the whole process's.)
    """
    context = multiprocessing.get_context('spawn')
    main = threading.current_thread() is threading.main_thread()   # (signals: main only)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    workers = []
    try:
        for _ in range(n):
            conn, child_conn = context.Pipe()
            try:
                process = context.Process(target=_worker_main, args=(child_conn, os.getpid()),
                                          daemon=True)
                process.start()
            except BaseException:
                conn.close()         # (a start that failed left both ends open)
                raise
            finally:
                child_conn.close()   # the worker's end: it is closed when the worker ends
            workers.append(_Worker(process, conn))
    except BaseException:
        _end_all(workers)
        for w in workers:
            w.close()
        raise
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
    return workers


def _worker_main(conn, parent_pid: int) -> None:
    """Run the calls received over ``conn`` until told that none is left (in a worker)."""
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C is the parent's to handle
    while True:
        try:
            task = conn.recv()
        except (EOFError, ConnectionResetError):
            return                                   # the parent is gone
        if task is None:
            return
        fn, i, args = task
        try:
            message = ('done', fn(*args))
        except Exception as err:  # noqa: B902 - any call's exception is the parent's to raise
            message = ('raised', _sendable(i, err), traceback.format_exc())
        try:
            conn.send(message)
        except Exception as err:  # noqa: B902 - e.g. a result that cannot be pickled
            conn.send(('raised', RuntimeError(f'call {i}: {type(err).__name__}: {err}'),
                       traceback.format_exc()))


def _sendable(i: int, err: Exception) -> Exception:
    """
    Return ``err`` if it survives a pickle round trip, else a RuntimeError that names it.

    An exception that pickles but cannot be unpickled (its ``__init__`` takes other arguments
    than those it passes on to ``Exception``) raised the unpickling TypeError in the parent,
    in place of the call's own error.
    """
    try:
        pickle.loads(pickle.dumps(err))
    except Exception as why:  # noqa: B902 - whatever a class's own pickling raises
        return RuntimeError(f'call {i}: {type(err).__name__}: {err} (the exception could not '
                            f'be sent back as it is: {type(why).__name__}: {why})')
    return err


class _CallTraceback(Exception):
    """The traceback of a call's exception in its process, shown as that exception's cause."""

    def __str__(self) -> str:
        """Return the traceback text."""
        return f'\n"""\n{self.args[0]}"""'


def _with_its_traceback(err: BaseException, text: str) -> BaseException:
    """Return ``err`` with its traceback from the worker as its cause."""
    err.__cause__ = _CallTraceback(text)
    return err
