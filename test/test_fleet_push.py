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
Acceptance: ``rog fleet`` runs AdaComp, its ASGD baseline and GSP as processes over DDS.

Server + 3 workers, separate processes, embedded DDS on loopback, links shaped by the indoors
trace, toy workload (a few seconds). Asserts the exit status, the number of pushes the server
applied, that training helped, and AdaComp's sparse pushes against ASGD's dense ones; plus
the systems and combinations ``rog fleet`` refuses, one line each.
"""

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest
from rog_ros.checks import ConfigError
from rog_ros.nodes.plan import plan

ITERATIONS = 40
WORKERS = 3
ROOT = Path(__file__).resolve().parent.parent


def _fleet(out: Path, sync: str) -> list:
    return [sys.executable, '-m', 'rog_ros.nodes.fleet', '--workload', 'toy', '--sync', sync,
            '--workers', str(WORKERS), '--trace', 'indoors', '--iterations', str(ITERATIONS),
            '--out', str(out), '--quiet', '--no-netmon',
            '--namespace', f'/rog_push_{os.getpid()}_{out.name}']


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """``{sync: (exit status, summary, accuracy column, stderr)}`` of one fleet run each."""
    pytest.importorskip('cyclonedds')
    out = {}
    for sync in ('adacomp', 'asgd', 'gsp'):
        path = tmp_path_factory.mktemp(f'push_{sync}')
        proc = subprocess.run(_fleet(path, sync), capture_output=True, text=True, timeout=120,
                              cwd=ROOT)
        summary, accuracy = {}, []
        if proc.returncode == 0:
            summary = json.loads((path / 'summary.json').read_text())
            rows = (path / 'timeseries.csv').read_text().splitlines()
            col = rows[0].split(',').index('accuracy')
            accuracy = [float(r.split(',')[col]) for r in rows[1:]]
        out[sync] = (proc.returncode, summary, accuracy, proc.stderr)
    return out


@pytest.mark.parametrize('sync', ['adacomp', 'asgd', 'gsp'])
def test_push_fleet_completes_with_every_push_applied(runs, sync):
    code, s, accuracy, stderr = runs[sync]
    assert code == 0, stderr[-3000:]
    assert s['system'] == sync and s['completed'] is True and s['driver'] == 'fleet'
    assert s['worker_status_received'] == [0, 1, 2]
    # the budget is I = iterations x workers updates at the server, as in ``rog sim``
    assert s['pushes_applied'] == ITERATIONS * WORKERS
    assert s.get('updates', s['pushes_applied']) == s['pushes_applied']      # AdaComp's count
    # a worker's push after the last update is answered by a stop order, not applied; a worker
    # whose stop order arrives while it computes never pushes again (seen on a loaded machine)
    assert s['pushes_applied'] <= s['pushes_received'] <= ITERATIONS * WORKERS + WORKERS
    assert s['iterations'] == ITERATIONS
    assert s['rejects'] == 0 and s['server_rejects'] == 0 and s['diverged'] is False
    assert len(accuracy) == s['evaluations'] >= 2
    assert s['final_accuracy'] > accuracy[0] + 0.2, accuracy     # training helped
    print(f'{sync}: accuracy {accuracy[0]:.3f} -> {s["final_accuracy"]:.3f}, '
          f'{s["bytes_per_push"]:.0f} B per push')


def test_adacomp_pushes_far_fewer_bytes_than_asgd(runs):
    for sync in runs:
        assert runs[sync][0] == 0, runs[sync][3][-3000:]
    ada, asgd = runs['adacomp'][1], runs['asgd'][1]
    assert runs['gsp'][1]['bytes_per_push'] == asgd['bytes_per_push']     # GSP pushes dense
    # the toy model is tiny (a 48-byte header per push weighs); MPCOL's ratio is ~50x
    assert ada['bytes_per_push'] * 3 < asgd['bytes_per_push']
    assert ada['entries_per_update'] < asgd['entries_per_update'] / 10
    # pulls are the dense model in both
    assert ada['bytes_per_pull'] == pytest.approx(asgd['bytes_per_pull'], rel=0.05)


@pytest.mark.parametrize('overrides,message', [
    ({'sync': 'adasgd'}, 'runs in the simulator only'),
    ({'sync': 'aet'}, 'no server'),
    ({'sync': 'gsp+gds'}, 'UploadDensity'),
    ({'sync': 'comp-asgd', 'min_workers': 2}, 'min_workers (--min-workers)'),
    ({'sync': 'gsp', 'absence_timeout': 20.0}, 'absence_timeout (--absence-timeout): gsp'),
])
def test_the_plan_refuses_what_a_fleet_cannot_run(overrides, message):
    with pytest.raises(ConfigError) as exc:
        plan(None, overrides)
    assert message in str(exc.value) and '\n' not in str(exc.value)


@pytest.mark.parametrize('sync', ['adacomp', 'asgd', 'comp-asgd', 'gsp'])
def test_the_plan_accepts_the_push_systems(sync):
    specs = plan(None, {'sync': sync, 'workers': 2})
    assert [s.parameters['sync'] for s in specs if s.role != 'netmon'] == [sync] * 3


@pytest.mark.parametrize('sync', ['adacomp', 'gsp'])
def test_the_plan_gives_a_push_server_its_state_folder(sync, tmp_path):
    # push servers keep durable state now (checkpoints of their engines): the plan refused it
    specs = plan(None, {'sync': sync, 'workers': 2, 'state_dir': str(tmp_path)})
    (server,) = [s for s in specs if s.role == 'server']
    assert server.parameters['state_dir'] == str(tmp_path)


def test_a_node_started_alone_refuses_a_simulator_only_system(capsys):
    from rog_ros.nodes import rog_server
    with pytest.raises(SystemExit) as exc:
        rog_server.main(['--sync', 'adasgd', '--bus', 'dds'])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and 'runs in the simulator only' in err[-1]
