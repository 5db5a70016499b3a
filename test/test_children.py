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
"""Child processes die with their parent: the runners' pools (no orphaned simulations)."""

from concurrent.futures import ProcessPoolExecutor
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest
from rog_ros.children import death_signal, die_with_parent

linux = pytest.mark.skipif(not sys.platform.startswith('linux'), reason='PR_SET_PDEATHSIG')


@linux
def test_a_pool_process_asks_for_sigterm_when_its_parent_exits():
    ctx = multiprocessing.get_context('spawn')
    with ProcessPoolExecutor(1, mp_context=ctx, initializer=die_with_parent) as pool:
        assert pool.submit(death_signal).result() == int(signal.SIGTERM)
    with ProcessPoolExecutor(1, mp_context=ctx) as pool:     # what it was without
        assert pool.submit(death_signal).result() == 0


CHILD_OF_A_KILLED_RUNNER = """
import multiprocessing, sys, time
from concurrent.futures import ProcessPoolExecutor
from rog_ros.children import die_with_parent
if __name__ == '__main__':
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('spawn'),
                               initializer=die_with_parent)
    pool.submit(time.sleep, 60)
    time.sleep(1.0)
    print(*[p.pid for p in pool._processes.values()], flush=True)
    time.sleep(60)
"""


def _alive(pid):
    """Whether ``pid`` runs (a zombie nobody reaped yet does not)."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (FileNotFoundError, ProcessLookupError):
        return False


@linux
def test_the_simulations_of_a_runner_stopped_with_sigterm_stop_too(tmp_path):
    script = tmp_path / 'runner.py'
    script.write_text(CHILD_OF_A_KILLED_RUNNER)
    runner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    child = int(runner.stdout.readline().split()[0])
    assert _alive(child)
    runner.send_signal(signal.SIGTERM)                   # what `kill` or a CI timeout sends
    runner.wait(timeout=30)
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        if not _alive(child):
            return                                       # gone with its parent
        time.sleep(0.05)
    os.kill(child, signal.SIGKILL)
    pytest.fail('the pool process outlived the runner killed with SIGTERM')
