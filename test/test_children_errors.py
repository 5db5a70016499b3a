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
The pool's errors reach the user as what they are, and its mistakes leave nothing open.

A call's process that died came out of ``rog reproduce aet|fleet`` and ``rog bench faults`` as
a traceback; a call's exception, or its result, that could not be unpickled came out as the
unpickling TypeError; no calls still started a process, ``jobs`` of 0 was taken for 1, and a
process that failed to start left its pipe open.
"""

import multiprocessing
import os
import subprocess
import sys

import pytest
from rog_ros import cli
from rog_ros.children import ProcessDied, run_in_processes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SIGKILL_TEXT = 'its process was killed by signal 9 (SIGKILL, as the out-of-memory killer does)'


class TwoArgsError(Exception):
    """An exception that pickles but cannot be unpickled: ``args`` holds one value of two."""

    def __init__(self, what, why):
        """Keep ``what`` and ``why``, passing one text on to ``Exception``."""
        super().__init__(f'{what} failed: {why}')
        self.what, self.why = what, why


def raise_two_args(what):
    """Raise a TwoArgsError about ``what`` (a call run in a pool process)."""
    raise TwoArgsError(what, 'the map is empty')


def test_an_exception_that_cannot_be_unpickled_is_raised_as_what_it_was():
    # the parent raised "TypeError: __init__() missing 1 required positional argument"
    with pytest.raises(RuntimeError, match='call 0: TwoArgsError: mpcol failed: the map is '
                                           'empty') as caught:
        list(run_in_processes(raise_two_args, [('mpcol',)], 1))
    assert 'raise_two_args' in str(caught.value.__cause__)     # the worker's traceback


class TwoArgsResult:
    """A result that pickles but cannot be unpickled: it reduces to one argument of two."""

    def __init__(self, what, score):
        """Keep ``what`` and ``score``."""
        self.what, self.score = what, score

    def __reduce__(self):
        """Reduce to the class and one argument, as a careless ``__reduce__`` would."""
        return (TwoArgsResult, (self.what,))


def return_two_args(what):
    """Return a TwoArgsResult about ``what``, a plain text for ``mpcol`` (a pool call)."""
    return what if what == 'mpcol' else TwoArgsResult(what, 0.85)


def test_a_result_that_cannot_be_unpickled_is_raised_naming_its_call():
    # the parent raised the bare unpickling TypeError, naming neither the call nor its result
    with pytest.raises(RuntimeError, match=r'call 1: its result could not be received: '
                                           r'TypeError: .*score'):
        list(run_in_processes(return_two_args, [('mpcol',), ('eacol',)], 1))


@pytest.fixture
def no_process_starts(monkeypatch):
    """Fail the test if the pool starts a process."""
    def start(process):
        """Refuse to start ``process``."""
        raise AssertionError('a process was started')
    monkeypatch.setattr(multiprocessing.get_context('spawn').Process, 'start', start)


def test_no_calls_start_no_process(no_process_starts):
    assert list(run_in_processes(abs, [], 4)) == []
    assert list(run_in_processes(abs, (), 1)) == []


@pytest.mark.parametrize('jobs', (0, -2, 1.5, '2', None, True))
def test_jobs_that_are_not_a_whole_number_of_at_least_one_are_refused(no_process_starts, jobs):
    # `jobs` of 0 or less was taken for 1, where multiprocessing.Pool raised ValueError
    with pytest.raises(ValueError, match=f'jobs must be a whole number >= 1, got {jobs!r}'):
        run_in_processes(abs, [(-1,), (2,)], jobs)


def test_a_process_that_fails_to_start_leaves_no_pipe_open(monkeypatch):
    spawn = multiprocessing.get_context('spawn')
    real_pipe, real_start = spawn.Pipe, spawn.Process.start
    pipes, started = [], []

    def pipe(*args, **kwargs):
        """Make a pipe as the context does, and note both of its ends."""
        ends = real_pipe(*args, **kwargs)
        pipes.extend(ends)
        return ends

    def start(process):
        """Start the first process; fail the second, as a fork that ran out of memory."""
        if started:
            raise OSError(12, 'Cannot allocate memory')
        started.append(process)
        real_start(process)
    monkeypatch.setattr(spawn, 'Pipe', pipe)
    monkeypatch.setattr(spawn.Process, 'start', start)
    with pytest.raises(OSError, match='Cannot allocate memory'):
        list(run_in_processes(abs, [(-1,), (-2,)], 2))
    assert len(pipes) == 4 and len(started) == 1
    assert [end.closed for end in pipes] == [True] * 4        # the started one's too
    with pytest.raises(ValueError, match='process object is closed'):     # it was ended
        started[0].is_alive()


def _process_died(*args, **kwargs):
    """Stand in for a runner whose pool lost a call to the out-of-memory killer."""
    raise ProcessDied(SIGKILL_TEXT)


@pytest.mark.parametrize('argv, runner, said', (
    (['reproduce', 'aet', '--quick'], 'aet', 'rog reproduce aet'),
    (['reproduce', 'fleet', '--quick'], 'fleet', 'rog reproduce fleet'),
    (['bench', 'faults', '--seeds', '0,1', '--jobs', '2'], None, 'rog bench faults')))
def test_a_run_whose_process_died_is_one_line_and_status_1(tmp_path, monkeypatch, capsys,
                                                           argv, runner, said):
    # the ProcessDied of run_in_processes (no on_death there) came out as a traceback
    from rog_ros.experiments import reproduce
    if runner is None:
        monkeypatch.setattr('rog_ros.experiments.bench_faults.bench_faults', _process_died)
    else:
        monkeypatch.setitem(reproduce.REPRODUCTIONS, runner, _process_died)
        argv = argv + ['--out', str(tmp_path / 'out')]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err == f'{said}: a run failed: {SIGKILL_TEXT}\n', err


def test_the_cli_does_not_import_the_process_pool_until_a_command_needs_it():
    """Import ``rog_ros.cli`` in a fresh interpreter: neither children nor multiprocessing."""
    code = ('import sys\n'
            'before = "multiprocessing" in sys.modules\n'
            'import rog_ros.cli\n'
            'print("rog_ros.children" in sys.modules, "multiprocessing" in sys.modules, before)\n')
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, stdout=subprocess.PIPE,
                         text=True, timeout=60, check=True).stdout.split()
    assert out[0] == 'False', out                  # rog_ros.children
    if out[2] == 'False':                          # multiprocessing not there before rog_ros
        assert out[1] == 'False', out


def test_a_process_that_dies_half_way_through_its_result_counts_as_dead():
    # recv raised OSError('got end of file during message'), taken since e9b6753 for a result
    # that could not be unpickled: the pool then ended every call instead of counting one death
    import struct
    from multiprocessing.connection import Connection
    from rog_ros.children import _Worker
    read_fd, write_fd = os.pipe()
    os.write(write_fd, struct.pack('!i', 1000) + b'x' * 10)     # a header for 1000 bytes, 10
    os.close(write_fd)
    worker = _Worker(None, Connection(read_fd, writable=False))
    worker.call = 7
    assert worker.receive() is None                            # as a death: its call is lost
    worker.conn.close()
