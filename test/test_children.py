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
Child processes die with their parent, and Ctrl-C ends a pool of runs at once.

The runners' pools (``run_in_processes``) must leave no orphaned simulations behind a
parent stopped with SIGTERM, and must not go on with the queue after Ctrl-C.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from rog_ros.children import death_signal, run_in_processes

linux = pytest.mark.skipif(not sys.platform.startswith('linux'), reason='PR_SET_PDEATHSIG')


@linux
def test_a_pool_process_asks_for_sigterm_when_its_parent_exits():
    assert list(run_in_processes(death_signal, [()], 1)) == [(0, int(signal.SIGTERM))]


def test_results_come_back_with_their_call_s_index():
    calls = [(3,), (0,), (2,), (1,)]
    done = dict(run_in_processes(abs, calls, 2))
    assert done == {0: 3, 1: 0, 2: 2, 3: 1}


def test_an_exception_in_a_call_is_raised_in_the_parent():
    with pytest.raises(ValueError, match='invalid literal'):
        list(run_in_processes(int, [('1',), ('x',)], 2))


CHILD_OF_A_KILLED_RUNNER = """
import os, sys, time
from rog_ros.children import run_in_processes
if __name__ == '__main__':
    for _ in run_in_processes(os.system, [('echo $$; sleep 60',)], 1):
        pass
"""


@linux
def test_the_simulations_of_a_runner_stopped_with_sigterm_stop_too(tmp_path):
    script = tmp_path / 'runner.py'
    script.write_text(CHILD_OF_A_KILLED_RUNNER)
    runner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    shell = int(runner.stdout.readline().split()[0])     # the pool process's own child
    child = _parent_of(shell)
    assert _alive(child)
    runner.send_signal(signal.SIGTERM)                   # what `kill` or a CI timeout sends
    runner.wait(timeout=30)
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        if not _alive(child):
            os.kill(shell, signal.SIGKILL)
            return                                       # gone with its parent
        time.sleep(0.05)
    os.kill(child, signal.SIGKILL)
    pytest.fail('the pool process outlived the runner killed with SIGTERM')


# The runner sets SIGINT's disposition itself, as an interactive shell's child has it: a test
# run started in the background by a shell without job control inherits SIGINT ignored (the
# stop this test checks then never comes, and all eight calls run).
INTERRUPTED_RUNNER = """
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


def task(i):
    say('running', i)
    time.sleep(2.0)
    return i


if __name__ == '__main__':
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for i, _ in run_in_processes(task, [(i,) for i in range(8)], 2):
            say('finished', i)
    except KeyboardInterrupt:
        say('interrupted')
"""


@linux
def test_ctrl_c_ends_the_pool_without_running_the_queue(tmp_path):
    # Ctrl-C reaches the whole process group; before, each pool process took the interrupt
    # for its call's result and went on with the queue, and the parent waited for all of it
    script = tmp_path / 'runner.py'
    script.write_text(INTERRUPTED_RUNNER)
    runner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert runner.stdout.readline().startswith('running')   # the pool is up, calls running
    t0 = time.monotonic()
    os.killpg(runner.pid, signal.SIGINT)
    out, err = runner.communicate(timeout=30)
    assert 'interrupted' in out and time.monotonic() - t0 < 5.0, (out, err)
    assert out.count('finished') < 8
    assert 'Traceback' not in err, err                  # the pool processes ignore it
    # ... also while they import (before their first call): a loaded machine's race, made certain
    assert 'importing: SIGINT ignored' in err and 'ARMED' not in err, err


def _parent_of(pid):
    with open(f'/proc/{pid}/stat') as f:
        return int(f.read().rsplit(')', 1)[1].split()[1])


def _alive(pid):
    """Whether ``pid`` runs (a zombie nobody reaped yet does not)."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (FileNotFoundError, ProcessLookupError):
        return False


_AS_PID_1 = """
import os, subprocess, sys
from rog_ros.children import dies_with_this_process, run_in_processes, death_signal
assert os.getpid() == 1, os.getpid()
node = subprocess.run([sys.executable, '-c', 'print(7)'], capture_output=True, text=True,
                      preexec_fn=dies_with_this_process())
pool = list(run_in_processes(death_signal, [()], 1))
print(node.returncode, node.stdout.strip(), pool[0][1])
"""


def _can_be_pid_1() -> bool:
    if not sys.platform.startswith('linux') or not shutil.which('unshare'):
        return False
    probe = subprocess.run(['unshare', '-fp', '--mount-proc', 'true'], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _can_be_pid_1(), reason='needs unshare of a pid namespace (root)')
def test_children_of_a_process_running_as_pid_1_run():
    # `docker run IMAGE rog fleet ...` makes rog pid 1: its nodes took that parent for a
    # dead one (getppid() == 1) and exited at once with status 1
    proc = subprocess.run(['unshare', '-fp', '--mount-proc', sys.executable, '-c', _AS_PID_1],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ['0', '7', str(int(signal.SIGTERM))]


@linux
def test_a_child_whose_parent_died_before_it_asked_goes_at_once():
    code = ('from rog_ros.children import die_with_parent\n'
            'die_with_parent(parent_pid=-5)\n'     # not our parent: it is gone
            'print("still here")\n')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stdout == ''
    code = ('import os\nfrom rog_ros.children import die_with_parent\n'
            'die_with_parent(parent_pid=os.getppid())\nprint("still here")\n')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == 'still here'


class _Printer:
    """A node stand-in whose process prints one line."""

    name = 'rog_server'

    def command(self, python):
        return [python, '-c', 'print("run output")']


def test_a_resumed_run_keeps_the_logs_of_the_run_it_resumes(tmp_path):
    # a fleet started again on its --state-dir overwrote every node log, so the crashed
    # run's server log, which told what happened before the crash, was gone
    from rog_ros.nodes.supervisor import Supervisor
    sup = Supervisor([_Printer()], str(tmp_path), lambda spec: dict(os.environ))
    log = tmp_path / 'rog_server.log'
    for resuming in (None, None, 'resuming from the state in st (server.pt)'):
        sup.start(resuming)
        sup.procs['rog_server'].wait(timeout=60)
    text = log.read_text()
    assert text.count('run output') == 2           # the fresh start overwrote, resuming not
    assert ': started again, resuming from the state in st (server.pt) ---' in text
