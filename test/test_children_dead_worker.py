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
A pool process that dies (the out-of-memory killer's SIGKILL) fails its call, not the pool.

``multiprocessing.Pool`` lost the dead process's call for good: ``rog compare`` waited
forever at 3/4 runs, and Ctrl-C or SIGTERM then blocked in ``Pool.terminate()``. Each check
runs in its own process, so that a hang is a timeout, not a stuck test run.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
linux = pytest.mark.skipif(not sys.platform.startswith('linux'), reason='signals, /proc')

# call 2 kills its own process as the out-of-memory killer would; the others return 10 * x
KILLED_CALL = """
import json, os, signal, sys, time
from rog_ros.children import ProcessDied, run_in_processes


def task(x):
    if x == 2:
        time.sleep(0.3)                    # (the others are under way meanwhile)
        os.kill(os.getpid(), signal.SIGKILL)
    return 10 * x


def failed(i, err):
    assert isinstance(err, ProcessDied)
    return 'failed: ' + str(err)


if __name__ == '__main__':
    if sys.argv[1] == 'on_death':
        done = dict(run_in_processes(task, [(x,) for x in range(5)], 2, on_death=failed))
        print(json.dumps(done, sort_keys=True), flush=True)
    else:
        try:
            for i, _ in run_in_processes(task, [(x,) for x in range(5)], 2):
                pass
        except ProcessDied as err:
            print('raised:', err, flush=True)
"""

# call 0's process dies; Ctrl-C then must still end the pool, whose other calls run long
INTERRUPTED_AFTER_A_DEATH = """
import os, signal, sys, time
from rog_ros.children import run_in_processes


def say(*words):
    # one write per line (PYTHONUNBUFFERED=1 made print write each word apart, and the lines
    # of the processes that share the pipe were interleaved mid-line: CI at 4a84271)
    os.write(1, (' '.join(map(str, words)) + '\\n').encode())


# each pool process imports this file (spawn's set-up runs it as __mp_main__) before its
# first call: Ctrl-C must be ignored there already, or a process still importing when
# it comes prints a KeyboardInterrupt traceback (a loaded machine, Python 3.8 at 196dd02:
# this file armed SIGINT at its top, so every pool process armed it again)
if __name__ == '__mp_main__':
    os.write(2, ('importing: SIGINT %s\\n' % ('ignored' if signal.getsignal(signal.SIGINT)
                                            == signal.SIG_IGN else 'ARMED')).encode())


def task(x):
    if x == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    say('running', x)
    time.sleep(60)
    return x


if __name__ == '__main__':
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for i, r in run_in_processes(task, [(x,) for x in range(4)], 2,
                                     on_death=lambda i, err: str(err)):
            say('finished', i, r)
    except KeyboardInterrupt:
        say('interrupted')
"""

SIGKILL_TEXT = 'its process was killed by signal 9 (SIGKILL, as the out-of-memory killer does)'


def _run(tmp_path, script, *args, timeout=60):
    """Run ``script`` with ``args`` in its own session; return (status, stdout, stderr, s)."""
    path = tmp_path / 'runner.py'
    path.write_text(script)
    env = dict(os.environ, PYTHONPATH=ROOT)
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(path), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)       # the runner and its pool processes
        proc.communicate()
        pytest.fail(f'still running after {timeout} s: the pool lost the dead call')
    return proc.returncode, out, err, time.monotonic() - t0


@linux
def test_a_call_whose_process_is_killed_fails_and_the_others_go_on(tmp_path):
    status, out, err, _ = _run(tmp_path, KILLED_CALL, 'on_death', timeout=30)
    assert status == 0, err
    assert json.loads(out) == {'0': 0, '1': 10, '2': 'failed: ' + SIGKILL_TEXT,
                               '3': 30, '4': 40}
    assert 'Traceback' not in err, err


@linux
def test_without_on_death_a_killed_process_is_raised_as_a_call_s_error(tmp_path):
    status, out, err, _ = _run(tmp_path, KILLED_CALL, 'raise', timeout=30)
    assert (status, out) == (0, f'raised: {SIGKILL_TEXT}\n'), err


@linux
def test_ctrl_c_after_a_pool_process_died_ends_the_pool_at_once(tmp_path):
    path = tmp_path / 'runner.py'
    path.write_text(INTERRUPTED_AFTER_A_DEATH)
    env = dict(os.environ, PYTHONPATH=ROOT)
    runner = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env,
                              start_new_session=True)
    # a runner that hangs is killed, so that the reads below end (with '') instead of waiting
    watchdog = threading.Timer(30.0, os.killpg, (runner.pid, signal.SIGKILL))
    watchdog.start()
    try:
        # the death is reported, and a fresh process took call 2 (the other one runs call 1)
        lines = {runner.stdout.readline() for _ in range(3)}
        assert lines == {f'finished 0 {SIGKILL_TEXT}\n', 'running 1\n', 'running 2\n'}, lines
        t0 = time.monotonic()
        os.killpg(runner.pid, signal.SIGINT)
        out, err = runner.communicate(timeout=20)
    finally:
        watchdog.cancel()
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.communicate()
    assert out == 'interrupted\n' and time.monotonic() - t0 < 5.0, (out, err)
    assert 'Traceback' not in err, err
    # every pool process ignored Ctrl-C while it imported (the first and the one after the death)
    assert err.count('importing: SIGINT ignored') >= 2 and 'ARMED' not in err, err


# the simulation of bsp seed 1 kills its process; set at import, so the pool processes have it
COMPARE_WITH_A_KILLED_RUN = """
import os, signal, sys
from rog_ros import cli
from rog_ros.experiments import compare

real_simulate = compare.simulate


def simulate(cfg, progress=None):
    if cfg.system == 'bsp' and cfg.seed == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return real_simulate(cfg, progress)


compare.simulate = simulate
if __name__ == '__main__':
    sys.exit(cli.main(['compare', '--workload', 'toy', '--trace', 'indoors', '--systems',
                       'bsp', '--workers', '2', '--seeds', '0,1', '--iterations', '2',
                       '--jobs', '2', '--out', sys.argv[1]]))
"""


@linux
def test_compare_reports_a_run_whose_process_was_killed_as_failed(tmp_path):
    out = tmp_path / 'cmp'
    status, _, err, _ = _run(tmp_path, COMPARE_WITH_A_KILLED_RUN, str(out), timeout=60)
    assert status == 1, err
    assert 'rog compare: 1 of 2 runs failed' in err, err
    report = (out / 'report.md').read_text()
    assert f'bsp seed 1: FAILED: ProcessDied: {SIGKILL_TEXT}' in report
