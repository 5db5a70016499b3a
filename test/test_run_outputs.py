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
A new run into an output directory sets the earlier run's results aside (``OUT/previous``).

Until 2026-11-29 a second run into the same ``--out`` replaced the first one's files only at
its end: stopped or crashed before, it left the earlier ``summary.json`` (``completed:
true``), model and curves in place as if they were its own.
"""

import json
import os
from pathlib import Path
import zipfile

import pytest

from rog_ros import cli
from rog_ros.experiments.report_runs import load_runs
from rog_ros.nodes import fleet, rog_server, server_node
from rog_ros.nodes.run_outputs import earlier_results, PREVIOUS, set_aside_earlier_results
from test_nodes_lifecycle import Hub


def _earlier_run(out, completed=True):
    out.mkdir(parents=True, exist_ok=True)
    (out / 'summary.json').write_text(json.dumps({'completed': completed, 'iterations': 30}))
    (out / 'model.pt').write_bytes(b'earlier model')
    (out / 'timeseries.csv').write_text('time_s,iteration,accuracy\n0,0,0.5\n')
    (out / 'accuracy_vs_time.png').write_bytes(b'png')
    (out / 'logs').mkdir(exist_ok=True)
    (out / 'logs' / 'rog_server.log').write_text('earlier log\n')
    (out / 'fleet.key').write_text('key')
    (out / 'notes.txt').write_text("the user's own")


def test_results_move_to_previous_and_everything_else_stays(tmp_path):
    out = tmp_path / 'run'
    _earlier_run(out)
    (out / PREVIOUS).mkdir()
    (out / PREVIOUS / 'summary.json').write_text('{"two runs ago": 1}')
    (out / PREVIOUS / 'events.csv').write_text('two runs ago\n')
    (out / PREVIOUS / 'mine.txt').write_text('a file the user put there')
    # Execute
    moved = set_aside_earlier_results(str(out))
    # Assert
    assert moved == ['summary.json', 'timeseries.csv', 'model.pt', 'accuracy_vs_time.png']
    assert earlier_results(str(out)) == []
    prev = out / PREVIOUS
    # two runs ago: replaced (its events.csv too), the user's file kept
    assert sorted(p.name for p in prev.iterdir()) == sorted(moved + ['mine.txt'])
    assert json.loads((prev / 'summary.json').read_text())['completed'] is True
    assert (prev / 'model.pt').read_bytes() == b'earlier model'
    assert (out / 'logs' / 'rog_server.log').exists() and (out / 'fleet.key').exists()
    assert (out / 'notes.txt').exists()
    assert set_aside_earlier_results(str(out)) == []          # nothing to move: previous stays
    assert (prev / 'model.pt').exists()


def test_a_fleet_s_node_logs_move_with_its_results_and_no_other_file(tmp_path):
    # rog fleet starts its nodes' logs afresh in OUT/logs before its server could move
    # anything: the earlier run's logs (who was suspended, and why) were lost
    out = tmp_path / 'run'
    _earlier_run(out)
    (out / 'logs' / 'rog_worker_0.log').write_text('earlier worker log\n')
    (out / 'logs' / 'notes.log').write_text("the user's own")
    older = out / PREVIOUS / 'logs'
    older.mkdir(parents=True)
    (older / 'rog_worker_7.log').write_text('two runs ago')
    (older / 'mine.log').write_text('a file the user put there')
    # Execute
    moved = set_aside_earlier_results(str(out), logs=str(out / 'logs'))
    # Assert
    assert moved == ['summary.json', 'timeseries.csv', 'model.pt', 'accuracy_vs_time.png',
                     'logs/rog_server.log', 'logs/rog_worker_0.log']
    assert sorted(p.name for p in older.iterdir()) == ['mine.log', 'rog_server.log',
                                                       'rog_worker_0.log']
    assert (older / 'rog_server.log').read_text() == 'earlier log\n'
    assert sorted(p.name for p in (out / 'logs').iterdir()) == ['notes.log']


def test_the_fleet_says_where_the_earlier_run_went_and_when_it_replaced_one(tmp_path):
    from rog_ros.nodes.run_outputs import set_aside_earlier_run
    out = tmp_path / 'run'
    logs = str(out / 'logs')
    assert set_aside_earlier_run(str(out), logs) == ''       # nothing there: nothing to say
    _earlier_run(out)
    said = f'{out} held an earlier run; its results and logs moved to {out / PREVIOUS}'
    # Execute, Assert: a second run; then a third replaces the second one's previous/
    assert set_aside_earlier_run(str(out), logs) == said
    _earlier_run(out)
    assert set_aside_earlier_run(str(out), logs) == said + ' (the older run there is replaced)'
    (out / 'summary.json').write_text('{}')                  # a run that left no logs
    assert set_aside_earlier_run(str(out), logs) == (
        f'{out} held an earlier run; its results moved to {out / PREVIOUS} (the older run '
        'there is replaced)')


def test_previous_holds_one_run_its_older_logs_go_with_its_results(tmp_path):
    # a server node started alone (logs stay where its supervisor put them) replaced the
    # results in previous/ but left the node logs of an older rog fleet run in previous/logs:
    # previous/ then held the results of one run and the logs of another
    out = tmp_path / 'run'
    _earlier_run(out)
    older = out / PREVIOUS / 'logs'
    older.mkdir(parents=True)
    (out / PREVIOUS / 'summary.json').write_text('{"two runs ago": 1}')
    (older / 'rog_server.log').write_text('two runs ago')
    (older / 'rog_worker_3.log').write_text('two runs ago')
    (older / 'mine.log').write_text('a file the user put there')
    # Execute
    moved = set_aside_earlier_results(str(out))
    # Assert: the older run is gone whole, the user's file kept, this run's logs untouched
    assert 'summary.json' in moved and not any(m.startswith('logs/') for m in moved)
    assert sorted(p.name for p in older.iterdir()) == ['mine.log']
    assert (out / 'logs' / 'rog_server.log').read_text() == 'earlier log\n'
    # nothing to set aside: previous/ stays as it is, its logs too
    (older / 'rog_server.log').write_text('kept')
    assert set_aside_earlier_results(str(out)) == []
    assert (older / 'rog_server.log').read_text() == 'kept'


def _worker_set_aside(logs, rank: int, model, init_model=None) -> str:
    """Set worker ``rank``'s earlier logs and model in ``logs`` aside as its fresh rerun does."""
    from rog_ros.nodes.run_outputs import set_aside_unless_worker_resumes
    given = {'init_model': init_model} if init_model else {}
    return set_aside_unless_worker_resumes('rog robot', str(logs), None, rank,
                                           [f'rog_worker_{rank}', f'netmon_{rank}'],
                                           str(model), **given)


def test_a_worker_robot_s_previous_replaces_a_model_only_with_a_newer_one(tmp_path):
    """Keep the last model in LOGS/previous when a rerun moves its logs but has no model."""
    # before, a rerun that failed before writing a model (logs only) deleted the model kept in
    # previous/: two reruns after a failure erased the last good model
    logs, previous = tmp_path / 'logs', tmp_path / 'logs' / PREVIOUS
    logs.mkdir()
    (logs / 'rog_worker_1.log').write_text('good run\n')
    (logs / 'rog_worker_0.log').write_text("another robot's\n")
    model = tmp_path / 'robot.pt'
    model.write_bytes(b'good model')
    # Execute: the good run is set aside, then a failed one (a log, no model)
    assert _worker_set_aside(logs, 1, model) == ''
    (logs / 'rog_worker_1.log').write_text('failed run\n')
    assert _worker_set_aside(logs, 1, model) == ''
    # Assert: this rank's log is replaced, its last model stays; another robot's log stays
    assert sorted(p.name for p in previous.iterdir()) == ['rog_worker_1.log',
                                                          'rog_worker_1.model.pt']
    assert (previous / 'rog_worker_1.log').read_text() == 'failed run\n'
    assert (previous / 'rog_worker_1.model.pt').read_bytes() == b'good model'
    assert (logs / 'rog_worker_0.log').exists()
    # Execute: a newer model of the rank replaces it
    model.write_bytes(b'newer model')
    assert _worker_set_aside(logs, 1, model) == ''
    assert (previous / 'rog_worker_1.model.pt').read_bytes() == b'newer model'
    assert not model.exists()


def test_a_worker_robot_s_init_model_is_copied_aside_not_moved(tmp_path, monkeypatch):
    """Copy the model that the rerun starts from (--init-model, a file or its folder)."""
    # before, the robot moved it to previous/ before its node started from it: the node
    # then exited with `--init-model: no such file`
    logs, previous = tmp_path / 'logs', tmp_path / 'logs' / PREVIOUS
    model = tmp_path / 'models' / 'model.pt'
    model.parent.mkdir()
    model.write_bytes(b'last model')
    # Execute: the same file named otherwise (relative to here), then its folder
    monkeypatch.chdir(tmp_path)
    assert _worker_set_aside(logs, 0, model, init_model='models/model.pt') == ''
    assert model.read_bytes() == b'last model'
    assert (previous / 'rog_worker_0.model.pt').read_bytes() == b'last model'
    model.write_bytes(b'next model')
    assert _worker_set_aside(logs, 0, model, init_model=str(model.parent)) == ''
    # Assert: both times, the model stays for the node and a copy is in previous/
    assert model.read_bytes() == b'next model'
    assert (previous / 'rog_worker_0.model.pt').read_bytes() == b'next model'
    assert sorted(p.name for p in previous.iterdir()) == ['rog_worker_0.model.pt']


def test_worker_robots_sharing_logs_keep_each_their_own_model_aside(tmp_path):
    """Keep each rank's model in a shared LOGS/previous, though both files are model.pt."""
    # before, previous/ kept a model under its bare file name: rank 1's rerun replaced rank
    # 0's model.pt there
    logs, previous = tmp_path / 'logs', tmp_path / 'logs' / PREVIOUS
    for rank in (0, 1):
        (tmp_path / f'r{rank}').mkdir()
        (tmp_path / f'r{rank}' / 'model.pt').write_bytes(f'model {rank}'.encode())
    # Execute
    for rank in (0, 1):
        assert _worker_set_aside(logs, rank, tmp_path / f'r{rank}' / 'model.pt') == ''
    # Assert
    assert sorted(p.name for p in previous.iterdir()) == ['rog_worker_0.model.pt',
                                                          'rog_worker_1.model.pt']
    assert [(previous / f'rog_worker_{rank}.model.pt').read_bytes() for rank in (0, 1)] == [
        b'model 0', b'model 1']


def _fleet_starts(monkeypatch) -> list:
    """
    Run ``rog fleet`` without processes; return what each start of its nodes found.

    Each entry is ``(resuming, node logs in its log folder then)``: the decision to set the
    earlier run aside is made before the nodes' logs start.
    """
    seen = []

    class Started:
        """Stand-in for the fleet's supervisor: nodes that all exit 0 and write nothing."""

        def __init__(self, specs, log_dir, env_of, prefix_of):
            self.specs, self.log_dir = specs, log_dir

        def start(self, resuming=None):
            """Record what the nodes would start with."""
            seen.append((resuming, sorted(os.listdir(self.log_dir))
                         if os.path.isdir(self.log_dir) else []))

        def stop(self, hurry=None):
            """Stop nothing."""
            return []

        def codes(self):
            """Say every node exited 0."""
            return {s.name: 0 for s in self.specs}
    monkeypatch.setattr('rog_ros.nodes.prepare_workload.prepare',
                        lambda workload, options=None: '')
    monkeypatch.setattr(fleet, 'Supervisor', Started)
    monkeypatch.setattr(fleet, '_watch', lambda *args: ([], ''))
    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE'):
        monkeypatch.delenv(var, raising=False)
    return seen


@pytest.mark.parametrize('saved, resuming', [
    (['worker_0.pt', 'worker_1.pt'], ''),
    (['server.pt', 'worker_0.pt'], 'resuming from the state in {state} (server.pt, worker_0.pt)'),
])
def test_a_fleet_resumes_only_from_its_server_s_checkpoint(tmp_path, monkeypatch, capsys,
                                                           saved, resuming):
    # a fleet stopped before its server's first checkpoint (every 10 iterations) left the
    # workers' files only: rog fleet said it resumed and moved nothing, while its server
    # restored nothing and moved the results without their logs
    seen = _fleet_starts(monkeypatch)
    out, state = tmp_path / 'run', tmp_path / 'state'
    _earlier_run(out)
    state.mkdir()
    for name in saved:          # (a zip archive, as torch.save writes: the fleet checks them)
        with zipfile.ZipFile(state / name, 'w') as archive:
            archive.writestr('data.pkl', b'saved')
    resuming = resuming.format(state=state)
    # Execute
    cli.main(['fleet', '--out', str(out), '--quiet', '--workers', '2',
              '--state-dir', str(state)])
    # Assert
    err = capsys.readouterr().err
    if resuming:
        assert seen == [(resuming, ['rog_server.log'])] and not (out / PREVIOUS).exists()
        assert f'rog fleet: {resuming}; the logs go on\n' in err
    else:
        assert seen == [('', [])] and 'resuming' not in err
        assert (out / PREVIOUS / 'logs' / 'rog_server.log').read_text() == 'earlier log\n'
        assert (f'rog fleet: {out} held an earlier run; its results and logs moved to '
                f'{out / PREVIOUS}\n') in err
    assert Path(state, saved[0]).exists()


def _server(tmp_path, hub, monkeypatch, *extra):
    monkeypatch.setattr(server_node, 'open_bus', hub.bus)
    args = ['--workload', 'toy', '--workers', '1', '--namespace', '/ro', '--iterations',
            '10000', '--out', str(tmp_path / 'run'), *extra]
    return server_node.ServerNode(rog_server.build_parser().parse_args(args))


@pytest.fixture
def no_fleet_key(monkeypatch):
    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE'):
        monkeypatch.delenv(var, raising=False)


def test_a_new_server_run_sets_the_earlier_results_aside(tmp_path, monkeypatch, no_fleet_key):
    _earlier_run(tmp_path / 'run')
    srv = _server(tmp_path, Hub(), monkeypatch)
    # Execute
    srv.configure()
    srv.shutdown()
    # Assert: OUT holds no result of the earlier run; previous/ holds them
    out = tmp_path / 'run'
    assert earlier_results(str(out)) == []
    assert json.loads((out / PREVIOUS / 'summary.json').read_text())['iterations'] == 30


def test_a_server_restored_from_its_checkpoint_keeps_its_run_results(
        tmp_path, monkeypatch, no_fleet_key):
    from rog_ros.nodes.state_dir import resumes
    # Prepare: a durable run that wrote a checkpoint and its interrupted summary
    (tmp_path / 'state').mkdir()
    state = ['--state-dir', str(tmp_path / 'state'), '--checkpoint-every', '1']
    first = _server(tmp_path, Hub(), monkeypatch, *state)
    first.configure()
    assert not resumes(str(tmp_path / 'state'))
    first.hooks.checkpoint()
    assert resumes(str(tmp_path / 'state'))   # the supervisors decide from the server's file
    first.requests.request('shutdown')
    first.finish()
    out = tmp_path / 'run'
    assert (out / 'summary.json').exists()
    # Execute: the same run restarts (a respawned server)
    again = _server(tmp_path, Hub(), monkeypatch, *state)
    again.configure()
    again.shutdown()
    # Assert
    assert again.hooks.restored is not None
    assert (out / 'summary.json').exists() and not (out / PREVIOUS).exists()


def test_report_reads_the_run_not_the_one_it_set_aside(tmp_path):
    out = tmp_path / 'run'
    _earlier_run(out)
    summary = json.loads((out / 'summary.json').read_text())
    (out / 'summary.json').write_text(json.dumps(dict(summary, system='rog:4', seed=1)))
    set_aside_earlier_results(str(out))
    (out / 'summary.json').write_text(json.dumps({'system': 'rog:4', 'seed': 2}))
    # Execute
    runs = load_runs(str(out))
    # Assert: one run, this one (rog report runs/fleet/previous still reads the earlier one)
    assert [r[0]['seed'] for r in runs] == [2]
    assert [r[0]['seed'] for r in load_runs(str(out / PREVIOUS))] == [1]


def test_every_file_rog_report_writes_for_a_run_is_a_result_file(tmp_path):
    # RESULT_FILES names rog report's outputs (nodes cannot import the report): a new plot
    # that is not set aside would stay in OUT beside the next run's results
    pytest.importorskip('matplotlib')
    from rog_ros import cli
    from rog_ros.nodes.output_lock import LOCK_FILE
    from rog_ros.nodes.run_outputs import RESULT_FILES
    out = tmp_path / 'sim'
    assert cli.main(['sim', '--workload', 'toy', '--workers', '2', '--iterations', '10',
                     '--trace', 'indoors', '--out', str(out)]) == 0
    (out / 'events.csv').write_text('time_s,robot,event,value,info,what\n'
                                    '0.5,1,suspend,1,{},robot 1 suspended\n')
    before = {p.name for p in out.iterdir()}
    assert cli.main(['report', str(out)]) == 0
    written = {p.name for p in out.iterdir()} - before
    assert 'report.md' in written and len(written) >= 5
    assert written <= set(RESULT_FILES), written - set(RESULT_FILES)
    # (the lock file is the directory's, held by whichever run is in it: never set aside)
    assert before - {LOCK_FILE} <= set(RESULT_FILES), before - set(RESULT_FILES)
