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
``rog fleet`` given the ``--state-dir`` of a run that had finished says so and starts nothing.

It started every node; each found the run finished and ended, while the fleet showed a
progress line that never moved (``it 0/20 acc -``, for the 10-15 s the nodes took to load)
and then ``done`` with the earlier run's results, as if it had made them (with another
``--out``: no summary, exit status 1). The server's checkpoint now says whether its run had
finished and where it wrote its results, and the fleet reads that without torch.
"""

import argparse
import json
import subprocess
import sys

import pytest
from rog_ros.nodes import chaos_hooks, fleet, state_dir


def _finished_state(tmp_path, out=None):
    """Run a small fleet in virtual time to its end with a server checkpoint in tmp_path/state."""
    from protocol_fixtures import build
    harness, server, _, _, _ = build('rog:4', n=2, iters=8, final_model=True)
    record = (lambda: {'out': out}) if out else None
    (tmp_path / 'state').mkdir()
    hooks = chaos_hooks.ServerHooks(server, server.w_srv.clone(), str(tmp_path / 'state'),
                                    checkpoint_every=100, run_record=record)
    harness.server = hooks
    harness.run(until=60.0)
    assert server.finished and hooks.checkpoint_id >= 1
    return hooks


def _fleet_args(argv):
    """Parse ``rog fleet ARGV`` as rog does."""
    parser = argparse.ArgumentParser(prog='rog', allow_abbrev=False)
    fleet.add_parser(parser.add_subparsers(dest='command', required=True))
    return parser.parse_args(['fleet'] + argv)


def test_the_checkpoint_of_a_finished_run_is_read_without_torch(tmp_path, monkeypatch):
    """Tell a finished run's checkpoint from one that goes on, torch not importable."""
    # Arrange
    hooks = _finished_state(tmp_path, out='/robots/run1')
    monkeypatch.setitem(sys.modules, 'torch', None)      # (import torch: ImportError)
    # Execute
    owed = state_dir.finished_run(str(tmp_path / 'state'))   # the stop orders' checkpoint
    monkeypatch.undo()
    assert hooks.checkpoint_results_written()
    monkeypatch.setitem(sys.modules, 'torch', None)
    done = state_dir.finished_run(str(tmp_path / 'state'))
    # Assert
    assert owed is None                   # its results are not written yet: a server goes on
    assert done == {'checkpoint': hooks.checkpoint_id, 'out': '/robots/run1'}
    assert state_dir.finished_run(str(tmp_path / 'none')) is None
    assert state_dir.finished_run('') is None


def test_a_checkpoint_of_an_older_format_leaves_it_to_the_nodes(tmp_path):
    """Read None from a checkpoint without the flag (or not one at all): the nodes decide."""
    # Arrange
    hooks = _finished_state(tmp_path)
    del_flag = hooks.state.save
    hooks.state.save = lambda obj: del_flag({k: v for k, v in obj.items() if k != 'finished'})
    hooks.checkpoint_results_written()
    old = state_dir.finished_run(str(tmp_path / 'state'))
    (tmp_path / 'junk').mkdir()
    (tmp_path / 'junk' / 'server.pt').write_bytes(b'not a zip archive')
    # Execute
    junk = state_dir.finished_run(str(tmp_path / 'junk'))
    # Assert
    assert old is None and junk is None


@pytest.mark.parametrize('same_out', (True, False), ids=('same --out', 'another --out'))
def test_rog_fleet_on_a_finished_run_says_so_and_starts_nothing(same_out, tmp_path,
                                                                monkeypatch, capsys):
    """Say the run had finished and where its results are; exit 0 with no process started."""
    # Arrange
    first = tmp_path / 'first'
    first.mkdir()
    summary = {'driver': 'fleet', 'completed': True, 'final_accuracy': 0.93,
               'iterations': 8, 'workers': 2}
    (first / 'summary.json').write_text(json.dumps(summary))
    hooks = _finished_state(tmp_path, out=str(first))
    assert hooks.checkpoint_results_written()
    out = first if same_out else tmp_path / 'again'

    def forbidden(*args, **kwargs):
        """Fail: nothing is to be started."""
        raise AssertionError('a process was started')
    monkeypatch.setattr(subprocess, 'Popen', forbidden)
    monkeypatch.setattr(subprocess, 'run', forbidden)
    args = _fleet_args(['--workers', '2', '--iterations', '8', '--state-dir',
                        str(tmp_path / 'state'), '--out', str(out)])
    # Execute
    code = fleet.run(args)
    said = capsys.readouterr()
    lines = said.out.splitlines()
    # Assert
    assert code == 0, said
    assert lines[0] == (f'rog fleet: the run in {tmp_path / "state"} had already finished '
                        f'(checkpoint {hooks.checkpoint_id}): nothing to resume, so no robot '
                        'was started and nothing was written')
    assert lines[1] == f'rog fleet: its results are in {first}: {first / "summary.json"}'
    assert 'final accuracy 0.9300' in said.out
    assert lines[-1].endswith(f'move {tmp_path / "state"} away or give another --state-dir')
    assert 'it 0/' not in said.err and 'progress' not in said.err
    assert same_out or not out.exists()
    assert sorted(p.name for p in first.iterdir()) == ['summary.json']   # no key, no logs


def test_rog_robot_server_on_a_finished_run_says_so_as_rog_fleet_does(
        tmp_path, monkeypatch, capsys):
    """Say what rog fleet says (no node started) and exit 0 before any node starts."""
    # Arrange
    from rog_ros import cli
    from rog_ros.nodes import robot
    first = tmp_path / 'first'
    first.mkdir()
    (first / 'summary.json').write_text(json.dumps(
        {'driver': 'fleet', 'completed': True, 'final_accuracy': 0.93, 'iterations': 8,
         'workers': 2}))
    hooks = _finished_state(tmp_path, out=str(first))
    assert hooks.checkpoint_results_written()

    def forbidden(*args, **kwargs):
        """Fail: nothing is to be started."""
        raise AssertionError('a process was started')
    monkeypatch.setattr(subprocess, 'Popen', forbidden)
    monkeypatch.setattr(subprocess, 'run', forbidden)
    state = str(tmp_path / 'state')
    args = cli.build_parser().parse_args(['robot', '--role', 'server', '--workers', '2',
                                          '--iterations', '8', '--state-dir', state,
                                          '--out', str(first)])
    # Execute
    code = robot.run(args)
    said = capsys.readouterr()
    fleet_said = fleet.run(_fleet_args(['--workers', '2', '--iterations', '8', '--state-dir',
                                        state, '--out', str(first)]))
    fleet_lines = capsys.readouterr().out.splitlines()
    lines = said.out.splitlines()
    # Assert
    assert code == 0 and fleet_said == 0, said
    assert lines[0] == (f'rog robot: the run in {state} had already finished (checkpoint '
                        f'{hooks.checkpoint_id}): nothing to resume, so no node was started '
                        'and nothing was written')
    assert [line.replace('rog robot: ', 'rog fleet: ', 1) for line in lines[1:]] == \
        fleet_lines[1:]                                     # results, how to train again
    assert lines[-1] == f'rog robot: {state_dir.train_again(state)}'
    assert 'started' not in said.err
    assert sorted(p.name for p in first.iterdir()) == ['summary.json']   # no lock, no logs
