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
A frozen robot must not stay stopped when ``rog chaos`` itself dies during the freeze.

``freeze``'s ``finally`` sends SIGCONT on every path of this process (a failure, Ctrl-C, the
CLI's SIGTERM), but not when the process is killed outright (SIGKILL, the OOM killer, or
pytest under ``timeout``, which has no SIGTERM handler): the nodes then get their parent-death
SIGTERM, which a stopped process never acts on, and the victim stayed stopped for good. This
module starts processes (a real ``sleep`` as the victim, and a scenario process it kills).
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

SCENARIO = textwrap.dedent("""
    import subprocess, sys, time, types
    from rog_ros.children import dies_with_this_process
    from rog_ros.experiments import chaos_fleet, chaos_freeze
    chaos_freeze.FREEZE_S = float(sys.argv[1])
    victim = subprocess.Popen(['sleep', '300'], start_new_session=True,
                              preexec_fn=dies_with_this_process())
    fleet = object.__new__(chaos_fleet.Fleet)
    fleet.sup = types.SimpleNamespace(procs={'rog_worker_1': victim}, codes=lambda: {})
    fleet.cfg = chaos_fleet.ChaosConfig(workers=2, sync='asgd', iterations=10)
    fleet.push = True
    t0 = time.monotonic()
    fleet.watch = types.SimpleNamespace(count=lambda r: int(1000 * (time.monotonic() - t0)))

    def scenario(name, cfg, inject, **kw):
        print(victim.pid, flush=True)
        inject(fleet)
    chaos_freeze.fleet_scenario = scenario
    chaos_freeze.freeze(fleet.cfg)
""")
"""The freeze on a fake push fleet whose victim is a real process (a ``sleep``)."""


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The clone this test runs from (why: the scenario process must import the same code)."""


def _state(pid: int) -> str:
    """Return the state letter of ``pid`` ('' once gone; why: 'T' is stopped, 'Z' ended)."""
    try:
        with open(f'/proc/{pid}/stat', encoding='ascii') as fh:
            return fh.read().rsplit(')', 1)[1].split()[0]
    except (OSError, IndexError):
        return ''


def _wait_state(pid: int, ok, timeout_s: float) -> str:
    """Wait until ``ok(state of pid)``; return the last state (why: bounded waits only)."""
    deadline = time.monotonic() + timeout_s
    state = _state(pid)
    while not ok(state) and time.monotonic() < deadline:
        time.sleep(0.01)
        state = _state(pid)
    return state


def test_a_victim_frozen_by_a_killed_scenario_is_thawed_and_ends(tmp_path):
    freeze_s = 2.0
    proc = subprocess.Popen([sys.executable, '-c', SCENARIO, str(freeze_s)],
                            stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=REPO))
    pid = None
    try:
        pid = int(proc.stdout.readline())
        assert _wait_state(pid, lambda s: s == 'T', 10.0) == 'T'
        proc.kill()         # the scenario dies inside the freeze, before its SIGCONT
        proc.wait(10)
        # thawed soon after the freeze was to end, it acts on its parent-death SIGTERM
        left = _wait_state(pid, lambda s: s in ('', 'Z'), freeze_s + 15.0)
        assert left in ('', 'Z'), f'the victim is left in state {left!r}'
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if pid is not None and _state(pid) not in ('', 'Z'):
            os.kill(pid, signal.SIGKILL)


def test_the_guard_is_armed_before_the_victim_is_stopped_and_no_process_starts_then(
        monkeypatch):
    # the freeze must land in the push the victim just began, and starting a process takes
    # milliseconds (12 ms here, far more at load 8): the guard is started before and armed by
    # a pipe write; armed first, SIGSTOP after, so no instant leaves the victim stopped with
    # no guard (SIGSTOP first, then the guard's start: a CI at load 8 killed the scenario
    # between the two, and the victim stayed stopped)
    import types
    from rog_ros.experiments import chaos_fleet
    victim = subprocess.Popen(['sleep', '60'], start_new_session=True)
    fleet = object.__new__(chaos_fleet.Fleet)
    fleet.sup = types.SimpleNamespace(procs={'rog_worker_1': victim})
    guard = fleet.thaw_guard('rog_worker_1')
    calls, popen, killpg, pipe = [], subprocess.Popen, os.killpg, guard.stdin

    def spy_popen(*args, **kw):
        """Note a process start (why: none may come between the trigger and the SIGSTOP)."""
        calls.append('process')
        return popen(*args, **kw)

    def spy_killpg(pgid, sig):
        """Note the signal (why: the order is what is tested)."""
        calls.append(signal.Signals(sig).name)
        killpg(pgid, sig)

    def spy_write(data):
        """Note the guard's arming (why: the order is what is tested)."""
        calls.append('armed')
        return pipe.write(data)
    monkeypatch.setattr(chaos_fleet.subprocess, 'Popen', spy_popen)
    monkeypatch.setattr(chaos_fleet.os, 'killpg', spy_killpg)
    guard.stdin = types.SimpleNamespace(write=spy_write, flush=pipe.flush)
    try:
        assert fleet.freeze('rog_worker_1', 30.0, guard) is guard
        assert calls == ['armed', 'SIGSTOP']
        assert _wait_state(victim.pid, lambda s: s == 'T', 10.0) == 'T'
    finally:
        guard.kill()
        guard.wait(10)
        pipe.close()
        victim.kill()
        victim.wait(10)


def test_a_guard_never_armed_exits_when_its_scenario_closes_its_pipe():
    # a scenario that ends (or dies) before its freeze was due leaves no guard behind
    import types
    from rog_ros.experiments import chaos_fleet
    victim = subprocess.Popen(['sleep', '60'], start_new_session=True)
    fleet = object.__new__(chaos_fleet.Fleet)
    fleet.sup = types.SimpleNamespace(procs={'rog_worker_1': victim})
    guard = fleet.thaw_guard('rog_worker_1')
    try:
        guard.stdin.close()
        assert guard.wait(20) == 0
        assert _state(victim.pid) not in ('T', '', 'Z')
    finally:
        if guard.poll() is None:
            guard.kill()
        victim.kill()
        victim.wait(10)
