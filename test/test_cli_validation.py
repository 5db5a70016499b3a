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
"""Bad options are refused up front: one line naming the option, exit 2, nothing started."""

import os
import subprocess
import sys

import pytest
from rog_ros import cli
from rog_ros.experiments import compare as compare_mod
from rog_ros.nodes import fleet as cli_fleet
from rog_ros.nodes import plan as fleet
from rog_ros.sim import simulator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def nothing_starts(monkeypatch):
    """Fail the test if a run, a process pool or a node process would start."""
    def forbidden(*args, **kwargs):
        raise AssertionError('started work although the options were bad')
    monkeypatch.setattr(subprocess, 'Popen', forbidden)
    monkeypatch.setattr(compare_mod, 'run_in_processes', forbidden)
    monkeypatch.setattr('rog_ros.experiments.bench_faults.bench_faults', forbidden)
    monkeypatch.setattr(compare_mod, '_run_one', forbidden)
    monkeypatch.setattr(compare_mod, 'compare', forbidden)
    monkeypatch.setattr(simulator, 'simulate', forbidden)
    monkeypatch.setattr(cli_fleet.Supervisor, 'start', forbidden)
    monkeypatch.setattr('rog_ros.experiments.toy.run_toy', forbidden)
    monkeypatch.setattr('rog_ros.experiments.reproduce.reproduce', forbidden)


CASES = [
    (['sim', '--workers', '-3'], '--workers'),
    (['sim', '--iterations', '-1'], '--iterations'),
    (['sim', '--staleness', '-1'], '--staleness'),
    (['sim', '--seed', '-1'], '--seed'),
    (['sim', '--workload', 'nope'], '--workload'),
    (['sim', '--trace', 'missing.csv'], '--trace'),
    (['sim', '--sync', 'foo'], '--sync'),
    (['sim', '--toy', '--systems', 'bsp,zzz:4'], '--systems'),
    (['sim', '--toy', '--systems', ','], '--systems'),
    (['sim', '--systems', 'bsp,rog:4'], '--systems'),      # not --toy: would run rog silently
    (['sim', '--system', 'adacomp'], '--systems'),         # argparse's prefix of --systems
    (['compare', '--workers', '-3', '--out', 'x'], '--workers'),
    (['compare', '--iterations', '0', '--out', 'x'], '--iterations'),
    (['compare', '--seeds', '0,x', '--out', 'x'], '--seeds'),
    (['compare', '--seeds', '-1', '--out', 'x'], '--seeds'),
    (['compare', '--systems', 'rog:4,unknown', '--out', 'x'], '--systems'),
    (['compare', '--systems', 'ssp:-2', '--out', 'x'], '--systems'),
    (['compare', '--jobs', '0', '--out', 'x'], '--jobs'),
    (['compare', '--evaluations', '0', '--out', 'x'], '--evaluations'),
    (['sim', '--evaluations', '-2'], '--evaluations'),
    (['sim', '--toy', '--evaluations', '10'], '--evaluations'),
    (['compare', '--workload', 'nope', '--out', 'x'], '--workload'),
    (['compare', '--trace', 'missing.csv', '--out', 'x'], '--trace'),
    (['compare', '--workload', 'toy', '--init-model', 'missing.pt', '--out', 'x'],
     '--init-model'),
    (['reproduce', '--workloads', 'mpcol,bad', '--out', 'x'], '--workloads'),
    (['reproduce', '--workers', '0', '--out', 'x'], '--workers'),
    (['reproduce', '--seeds', 'a', '--out', 'x'], '--seeds'),
    (['reproduce', '--iterations', '-5', '--out', 'x'], '--iterations'),
    (['fleet', '--trace', 'missing.csv'], '--trace'),
    (['fleet', '--workers', '-3'], '--workers'),
    (['fleet', '--workers', '3', '--min-workers', '4'], '--min-workers'),
    (['fleet', '--workload', 'nope'], '--workload'),
    (['fleet', '--staleness', '-1'], '--staleness'),
    (['fleet', '--sync', 'foo'], '--sync'),
    (['fleet', '--sync', 'adasgd'], '--sync'),
    (['fleet', '--sync', 'aet'], '--sync'),
    (['fleet', '--sync', 'gsp+gds'], '--sync'),
    (['fleet', '--sync', 'adacomp', '--state-dir', 'st'], '--state-dir'),
    (['fleet', '--sync', 'asgd', '--min-workers', '2'], '--min-workers'),
    (['fleet', '--sync', 'gsp', '--absence-timeout', '5'], '--absence-timeout'),
    (['fleet', '--iterations', '0'], '--iterations'),
    (['fleet', '--eval-every', '0'], '--eval-every'),
    (['fleet', '--lr', '-0.1'], '--lr'),
    (['fleet', '--lr', 'nan'], '--lr'),
    (['fleet', '--trace-scale', '0'], '--trace-scale'),
    (['fleet', '--deadline-floor', '11'], '--deadline-floor'),
    (['fleet', '--timeout', '-1'], '--timeout'),
    (['fleet', '--domain-id', '999'], '--domain-id'),
    (['fleet', '--config', 'missing.yaml'], 'missing.yaml'),
    (['fleet', '--namespace', 'fleet2'], '--namespace'),          # relative: a traceback once
    (['fleet', '--namespace', '/lab//fleet'], '--namespace'),
    (['fleet', '--namespace', '/lab/2nd'], '--namespace'),
    (['fleet', '--namespace', '/lab-a'], '--namespace'),
    (['fleet', '--namespace', '/_lab'], '--namespace'),           # the transport's rule
    (['fleet', '--namespace', '/lab__a'], '--namespace'),
]


@pytest.mark.parametrize('argv,option', CASES, ids=[' '.join(c[0]) for c in CASES])
def test_bad_option_is_one_line_exit_2_and_starts_nothing(argv, option, nothing_starts,
                                                          capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f'rog {argv[0]}: ') and option in lines[0]
    assert 'Traceback' not in captured.err
    assert not os.listdir(tmp_path)                # no output directory, no logs


BAD_FILES = {
    'chunk_bytes: 10': 'chunk_bytes',
    'window: 0': 'window',
    'rate_hz: 0': 'rate_hz',
    'seed: -1': 'seed',
    'workers: "3"': 'workers',
    'startup_timeout: -1': 'startup_timeout',
    'burst_bytes: 0': 'burst_bytes',
    'trace: missing.csv': 'trace',
}


@pytest.mark.parametrize('line', sorted(BAD_FILES))
def test_bad_parameter_file_key_is_named(line, nothing_starts, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / 'bad.yaml'
    cfg.write_text(f'/**:\n  ros__parameters:\n    {line}\n')
    assert cli.main(['fleet', '--config', str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and BAD_FILES[line] in err[0]
    assert os.listdir(tmp_path) == ['bad.yaml']


def test_broken_yaml_is_one_line(nothing_starts, capsys, tmp_path):
    cfg = tmp_path / 'broken.yaml'
    cfg.write_text('rog_server: [\n')
    assert cli.main(['fleet', '--config', str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'not valid YAML' in err[0] and 'broken.yaml' in err[0]


def test_the_plan_itself_validates_every_node(tmp_path):
    # the ros2 launch path plans through the same function
    with pytest.raises(ValueError, match=r'trace \(--trace\)'):
        fleet.plan(overrides={'trace': str(tmp_path / 'missing.csv')})
    with pytest.raises(ValueError, match='rate_hz'):
        fleet.plan({'netmon': {'rate_hz': 0}})
    with pytest.raises(ValueError, match='bus'):
        fleet.plan({'/**': {'bus': 'carrier_pigeon'}})
    with pytest.raises(ValueError, match='nodes'):
        fleet.plan({'netmon': {'nodes': [0, 7]}})
    assert len(fleet.plan(overrides={'trace': 'indoors'})) == 5    # good options still plan


def test_good_trace_file_passes_and_bad_format_is_named(tmp_path):
    good = tmp_path / 'good.csv'
    good.write_text('t_seconds,mbps\n0,5\n1,6\n')
    assert fleet.plan(overrides={'trace': str(good)})
    bad = tmp_path / 'bad.csv'
    bad.write_text('t_seconds,mbps\n0,five\n')
    with pytest.raises(ValueError, match='trace'):
        fleet.plan(overrides={'trace': str(bad)})


def test_fleet_refusal_as_a_new_user_sees_it(tmp_path):
    """A real process: one line on stderr, exit 2, no node log directory."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, '-m', 'rog_ros.cli', 'fleet', '--trace',
                           'missing.csv', '--out', str(tmp_path / 'run')],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "rog fleet: trace (--trace): 'missing.csv' is neither a preset (clean, "
        'dynamic_obstacles, indoors, outages, outdoors, outdoors_raw, through_wall) nor an '
        'existing file']
    assert not (tmp_path / 'run').exists()


@pytest.mark.parametrize('good', ['/rog', '/lab/fleet_2', '/x_1', '/A1'])
def test_absolute_ros_namespaces_pass(good):
    from rog_ros import checks
    assert checks.namespace('namespace', good) == good


def test_an_interrupted_compare_says_which_runs_it_keeps(tmp_path, capsys, monkeypatch):
    def two_runs_then_ctrl_c(*args, **kwargs):
        for name in ('rog-4-seed0', 'bsp-seed0'):
            (tmp_path / 'runs' / name).mkdir(parents=True)
            (tmp_path / 'runs' / name / 'summary.json').write_text('{"system": "x"}')
        (tmp_path / 'runs' / 'ssp-4-seed0').mkdir()       # started, not finished
        (tmp_path / 'summary.json').write_text('{"systems": []}')    # a comparison's own
        raise KeyboardInterrupt
    monkeypatch.setattr(compare_mod, 'compare', two_runs_then_ctrl_c)
    assert cli.main(['compare', '--workload', 'toy', '--out', str(tmp_path)]) == 130
    assert capsys.readouterr().err.strip().endswith(
        f'rog compare: interrupted; 2 finished run(s) in {tmp_path} are kept, and the same '
        'command reuses them')
