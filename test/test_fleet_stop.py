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
"""Stopping a fleet is bounded: SIGINT, then SIGTERM, then SIGKILL, whatever a node does."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

from rog_ros.nodes import fleet as cli_fleet
from rog_ros.nodes import supervisor
from rog_ros.nodes.fleet_progress import Progress
from rog_ros.nodes.plan import NodeSpec
from rog_ros.nodes.stop_requests import StopRequests

# The stub sets its dispositions itself: a test run started in the background by a shell
# without job control inherits SIGINT ignored, and "node0 stops on SIGINT" must not depend on
# how pytest was launched.
STUBBORN = ('import signal, sys, time\n'
            'signal.signal(signal.SIGINT, signal.default_int_handler)\n'
            'signal.signal(signal.SIGTERM, signal.SIG_DFL)\n'
            'ignore = sys.argv[1].split(",") if sys.argv[1] else []\n'
            'for name in ignore:\n'
            '    signal.signal(getattr(signal, name), signal.SIG_IGN)\n'
            'print("ready", flush=True)\n'
            'while True:\n'
            '    sum(i * i for i in range(10000))   # busy, like a node computing\n')


class _Spec(NodeSpec):

    def command(self, python=sys.executable):
        return [python, '-c', STUBBORN, self.parameters['ignore']]


def _supervisor(tmp_path, ignores):
    specs = [_Spec(f'node{k}', 'rog_worker', {'ignore': ign}) for k, ign in enumerate(ignores)]
    sup = supervisor.Supervisor(specs, str(tmp_path / 'logs'), lambda s: dict(os.environ))
    sup.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(
            'ready' in sup.tail(name) for name in sup.procs):
        time.sleep(0.05)
    return sup


def test_stop_escalates_and_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(supervisor, 'STOP_GRACE_S', 1.0)
    monkeypatch.setattr(supervisor, 'TERM_GRACE_S', 1.0)
    monkeypatch.setattr(supervisor, 'KILL_WAIT_S', 2.0)
    # node0 stops on SIGINT; node1 ignores SIGINT; node2 ignores SIGINT and SIGTERM
    sup = _supervisor(tmp_path, ['', 'SIGINT', 'SIGINT,SIGTERM'])
    t0 = time.monotonic()
    sent = sup.stop()
    took = time.monotonic() - t0
    assert all(code is not None for code in sup.codes().values())
    assert sent == [('SIGINT', ['node0', 'node1', 'node2']), ('SIGTERM', ['node1', 'node2']),
                    ('SIGKILL', ['node2'])]
    assert sup.codes()['node2'] == -signal.SIGKILL
    assert took < 1.0 + 1.0 + 2.0 + 0.5


def test_second_ctrl_c_skips_the_grace_periods(tmp_path, monkeypatch):
    monkeypatch.setattr(supervisor, 'STOP_GRACE_S', 30.0)
    monkeypatch.setattr(supervisor, 'TERM_GRACE_S', 30.0)
    sup = _supervisor(tmp_path, ['SIGINT,SIGTERM'])
    presses = iter([False, True])          # the user presses Ctrl-C again during the wait
    t0 = time.monotonic()
    sup.stop(hurry=lambda: next(presses, True))
    assert time.monotonic() - t0 < 5.0
    assert sup.codes()['node0'] == -signal.SIGKILL


def test_stop_requests_raise_nothing():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    stop = StopRequests().install()
    try:
        # to this thread: handled before pthread_kill returns (os.kill to the process and a
        # 0.05 s sleep raced under load: another thread could take it, handled later)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
        assert stop.count == 2
    finally:
        stop.restore()
    # restored to what was there, whatever that was (ignored, when started in the background)
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_interrupted_run_gets_a_summary_from_what_exists(tmp_path):
    progress = Progress(2, 50)
    path = cli_fleet._summary_from_what_exists(str(tmp_path), progress, 2, 50)
    summary = json.loads(open(path).read())
    assert summary['completed'] is False and summary['iterations'] == 0
    assert 'interrupted' in summary['error']
    # a summary the server wrote is kept, and marked
    (tmp_path / 'summary.json').write_text(json.dumps({'completed': False, 'iterations': 7}))
    summary = json.loads(open(cli_fleet._summary_from_what_exists(
        str(tmp_path), progress, 2, 50)).read())
    assert summary['iterations'] == 7 and 'interrupted' in summary['error']


FLEET_THAT_IS_KILLED = """
import os, sys, time
from rog_ros.nodes.plan import NodeSpec
from rog_ros.nodes.supervisor import Supervisor


class Spec(NodeSpec):
    def command(self, python=sys.executable):
        return [python, '-c', 'import time\\nwhile True: time.sleep(0.1)']


sup = Supervisor([Spec('node0', 'rog_worker', {}), Spec('node1', 'rog_worker', {})],
                 sys.argv[1], lambda s: dict(os.environ))
sup.start()
print(*[p.pid for p in sup.procs.values()], flush=True)
time.sleep(60)
"""


def _running(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_nodes_of_a_fleet_killed_with_sigkill_stop_too(tmp_path):
    # rog fleet killed -9 (the OOM killer, a CI timeout) must not leave its nodes training
    runner = subprocess.Popen([sys.executable, '-c', FLEET_THAT_IS_KILLED, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    nodes = [int(p) for p in runner.stdout.readline().split()]
    assert len(nodes) == 2 and all(_running(p) for p in nodes)
    runner.kill()
    runner.wait(timeout=30)
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and any(_running(p) for p in nodes):
        time.sleep(0.05)
    alive = [p for p in nodes if _running(p)]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert alive == [], 'node processes outlived rog fleet killed with SIGKILL'
