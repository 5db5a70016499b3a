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
Workload options for fleets and nodes: the setting ``workload_options`` (``KEY=VALUE;...``).

``rog sim`` took ``--workload-option KEY=VALUE``; ``rog fleet``, ``rog robot`` and the nodes
took none, so a fleet could not be given its data path or a model size. Tested: the pairs as
the setting reads them, ``--workload-option`` joined on every parser that takes the setting,
one-line refusals before anything starts (an unknown key, a value of the wrong kind, a
malformed pair, nodes that disagree), and a real two-robot fleet of the toy workload with 5
features (this module starts processes: the check's child and the fleet).
"""

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest
from rog_ros import checks, cli
from rog_ros.nodes import fleet_progress, params, plan, prepare_workload, rog_server, \
    rog_worker, settings
from rog_ros.workloads import options

ROOT = Path(__file__).resolve().parent.parent
RUN_TIMEOUT_S = 300


def test_the_setting_reads_semicolon_separated_pairs():
    """Read pairs split at semicolons, a comma kept in its value, each value as rog sim does."""
    # Execute
    pairs = options.split_text(' size=48 ;hidden=512,256;; ')
    toy = options.from_text('toy', 'features=5;noise=0.5')
    mpcol = options.from_text('mpcol', 'size=48;hidden=512,256')
    # Assert
    assert pairs == ['size=48', 'hidden=512,256']
    assert toy == {'features': 5, 'noise': 0.5}
    assert mpcol == {'size': 48, 'hidden': [512, 256]}
    assert options.split_text(None) == [] and options.from_text('toy', '') == {}
    assert settings.BY_NAME['workload_options'].parse('') is None       # none_text: not set
    assert settings.BY_NAME['workload_options'].roles == settings.BY_NAME['workload'].roles
    assert 'workload_options' in plan.AGREED


def _fleet_args(argv: list):
    """Parse ``rog`` command-line arguments as the rog CLI does."""
    return cli.build_parser().parse_args(argv)


@pytest.mark.parametrize('command', [['fleet'], ['robot', '--role', 'server']])
def test_repeated_workload_option_flags_join_on_rog_fleet_and_rog_robot(command):
    """Join every --workload-option (and --workload-options) into one text, in order."""
    # Execute
    joined = _fleet_args(command + ['--workload-option', 'features=5',
                                    '--workload-option', 'classes=3'])
    mixed = _fleet_args(command + ['--workload-options', 'features=5;noise=0.5',
                                   '--workload-option', 'classes=3'])
    none = _fleet_args(command)
    # Assert
    assert joined.workload_options == 'features=5;classes=3'
    assert mixed.workload_options == 'features=5;noise=0.5;classes=3'
    assert none.workload_options is None


@pytest.mark.parametrize('build', [rog_server.build_parser, rog_worker.build_parser])
def test_nodes_take_both_flags_and_the_ros_parameter(build):
    """Take the flags on a node's own command line, and -p workload_options:=... above them."""
    # Prepare
    parser = build()
    flags = {o for a in parser._actions for o in a.option_strings}
    # Execute
    joined = parser.parse_args(['--workload-option', 'features=5', '--workload-option',
                                'classes=3'])
    ros = parser.parse_args(['--workload-option', 'features=5', '--ros-args', '-p',
                             'workload_options:=features=7;classes=3'])
    # Assert
    assert {'--workload-options', '--workload-option'} <= flags     # each by its full name
    assert joined.workload_options == 'features=5;classes=3'
    assert ros.workload_options == 'features=7;classes=3'
    assert parser.parse_args([]).workload_options is None


@pytest.mark.parametrize('text, said', [
    ('feature=5', "toy takes no option 'feature'; it takes batch_size, classes"),
    ('features=many', "features='many': expected an integer (default 16)"),
    ('features', "'features' is not KEY=VALUE"),
    ('features=5;features=6', 'features is given twice'),
])
def test_a_fleet_with_bad_options_is_refused_in_one_line(text, said):
    """Refuse an unknown key, a wrong kind, a malformed pair or a repeated key before a start."""
    # Execute
    with pytest.raises(checks.ConfigError) as err:
        plan.plan(None, {'workload': 'toy', 'workload_options': text})
    # Assert
    message = str(err.value)
    assert message.startswith('workload_options (--workload-options)'), message
    assert said in message and '\n' not in message


def test_nodes_that_disagree_on_the_options_are_refused():
    """Refuse a parameter file whose server section gives options the workers lack."""
    # Prepare
    file_params = {'rog_server': {'workload_options': 'features=5'},
                   'rog_worker': {'workload_options': 'features=6'}}
    # Execute
    with pytest.raises(checks.ConfigError) as err:
        plan.plan(file_params, {'workload': 'toy'})
    # Assert
    assert 'workload_options (--workload-options) differs between the nodes' in str(err.value)
    assert plan.plan({'/**': {'workload_options': 'features=5'}}, {})[0].parameters[
        'workload_options'] == 'features=5'


def test_a_node_refuses_an_option_its_workload_does_not_take(capsys):
    """Exit 2 with one usage line when a node is started by hand with an unknown key."""
    # Prepare
    parser = rog_worker.build_parser()
    args = parser.parse_args(['--workload-option', 'feature=5'])
    # Execute
    with pytest.raises(SystemExit) as exc:
        params.check_fleet_args(parser, args)
    # Assert
    assert exc.value.code == 2
    assert "--workload-options: toy takes no option 'feature'" in capsys.readouterr().err


def test_the_child_checks_and_builds_with_the_options(capsys):
    """Run the check and the build of the fleet's child (its main) with a workload_options."""
    # Execute
    refused = prepare_workload.main(['toy', '--workload-options', 'feature=5', '--options-only'])
    said = capsys.readouterr().out
    built = prepare_workload.main(['toy', '--workload-options', 'features=5'])
    malformed = prepare_workload.main(['toy', '--options-only'])
    # Assert
    assert refused == 2 and "toy takes no option 'feature'" in said
    assert built == 0 and malformed == 2


@pytest.mark.parametrize('load, given, threads',
                         [(2.5, {}, '1'), (1.2, {}, None),
                          (2.5, {'OMP_NUM_THREADS': '2'}, '2'),
                          (2.5, {'MKL_NUM_THREADS': '2'}, None),
                          (2.5, {'OMP_NUM_THREADS': '4,2'}, '4,2'),
                          (2.5, {'OMP_NUM_THREADS': '', 'MKL_NUM_THREADS': '3'}, '')],
                         ids=('busy', 'idle', 'user-set', 'user-set-mkl', 'user-set-nested',
                              'user-set-mkl-omp-empty'))
def test_the_preparing_child_takes_one_thread_on_a_busy_machine(load, given, threads,
                                                                monkeypatch):
    """Give the child one OpenMP thread where the load fills the cores (12-50 s -> 3.8 s)."""
    # Arrange: 2 cores, the user's thread settings ``given``; what the child is started
    # with is recorded, not run
    monkeypatch.setattr(os, 'cpu_count', lambda: 2)
    monkeypatch.setattr(os, 'getloadavg', lambda: (load, load, load))
    for name in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
        monkeypatch.delenv(name, raising=False)
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    seen = []

    def run(cmd, **kwargs):
        """Record the child's environment; it succeeds."""
        seen.append(kwargs['env'])
        return subprocess.CompletedProcess(cmd, 0, stdout='')
    monkeypatch.setattr(subprocess, 'run', run)
    # Execute
    assert prepare_workload.prepare('toy') is None
    # Assert: a count the user set reaches the child as it was, and no other beside it
    assert seen[0].get('OMP_NUM_THREADS') == threads
    assert {k: seen[0].get(k) for k in given} == given


@pytest.mark.parametrize('given', [{'MKL_NUM_THREADS': ''}, {'OMP_NUM_THREADS': ''},
                                   {'OMP_NUM_THREADS': 'x'}, {'MKL_NUM_THREADS': '0'},
                                   {'OMP_NUM_THREADS': ' ', 'MKL_NUM_THREADS': 'four'}],
                         ids=('mkl-empty', 'omp-empty', 'omp-invalid', 'mkl-zero', 'both'))
def test_a_thread_variable_that_gives_no_count_still_gets_one_thread(given, monkeypatch):
    """An empty or invalid count is ignored by torch (a thread per core): no user's choice."""
    # Arrange: 2 busy cores; torch 2.13 measured here: MKL_NUM_THREADS='' alone -> 2 threads,
    # with OMP_NUM_THREADS=1 beside it -> 1; OMP_NUM_THREADS='' -> 2 (libgomp: invalid)
    monkeypatch.setattr(os, 'cpu_count', lambda: 2)
    monkeypatch.setattr(os, 'getloadavg', lambda: (2.5, 2.5, 2.5))
    env = dict(os.environ)
    for name in prepare_workload.USER_THREAD_SETTINGS:
        env.pop(name, None)
    env.update(given)
    # Execute
    child = prepare_workload.busy_machine_threads(env)
    # Assert: one thread; an MKL_NUM_THREADS left as it was (OMP_NUM_THREADS=1 decides)
    assert child['OMP_NUM_THREADS'] == '1'
    assert child.get('MKL_NUM_THREADS') == given.get('MKL_NUM_THREADS')


def _children(monkeypatch, build_says=None) -> list:
    """Record the arguments of every prepare_workload child; a build answers ``build_says``."""
    started = []

    def child(args):
        """Stand for a child: record it; its options check passes."""
        started.append(list(args))
        return None if args[-1:] == ['--options-only'] else build_says
    monkeypatch.setattr(prepare_workload, '_in_child', child)
    return started


def test_rog_fleet_checks_the_options_in_the_child_that_builds_the_workload(
        tmp_path, monkeypatch, capsys):
    """Start one child for the options and the build (a child of its own took 2 s more)."""
    # Arrange
    started = _children(monkeypatch, build_says='stopped here')
    # Execute
    code = cli.main(['fleet', '--workload', 'toy', '--workload-option', 'features=5',
                     '--out', str(tmp_path / 'run')])
    # Assert
    assert code == 2 and 'rog fleet: stopped here' in capsys.readouterr().err
    assert started == [['toy', '--workload-options', 'features=5']]


def test_init_model_checks_the_options_in_its_own_child(monkeypatch, tmp_path):
    """Check the options of a run with init_model in its child (rog robot, the launch files)."""
    # Arrange
    started = _children(monkeypatch)
    (tmp_path / 'start.pt').write_bytes(b'')
    # Execute
    plan.plan(None, {'workload': 'toy', 'workload_options': 'features=5',
                     'init_model': str(tmp_path / 'start.pt')})
    # Assert
    assert started == [['toy', '--init-model', str(tmp_path / 'start.pt'),
                        '--workload-options', 'features=5']]


@pytest.mark.parametrize('init_model', (False, True), ids=('prepared', 'init_model'))
def test_a_fleet_with_a_bad_option_says_it_in_one_line_before_any_node(
        init_model, tmp_path, monkeypatch, capsys):
    """Refuse an unknown key in the child that builds (or checks init_model), no node started."""
    # Arrange
    from rog_ros.nodes import output_lock, supervisor

    def forbidden(*args, **kwargs):
        """Fail: no node is to start."""
        raise AssertionError('a node was started')
    monkeypatch.setattr(supervisor.Supervisor, 'start', forbidden)
    taken = []
    take = output_lock.OutputLock.take

    def recorded(cls, out, command):
        """Take the lock of ``out`` as OutputLock.take does, and record it."""
        taken.append(out)
        return take.__func__(cls, out, command)
    monkeypatch.setattr(output_lock.OutputLock, 'take', classmethod(recorded))
    extra = ['--init-model', str(tmp_path / 'start.pt')] if init_model else []
    (tmp_path / 'start.pt').write_bytes(b'')
    # Execute
    code = cli.main(['fleet', '--workload', 'toy', '--workload-option', 'feature=5',
                     '--out', str(tmp_path / 'run')] + extra)
    err = capsys.readouterr().err.strip().splitlines()
    # Assert
    assert code == 2
    assert len(err) == 1 and err[0].startswith(
        "rog fleet: workload_options (--workload-options): toy takes no option 'feature'; "
        'it takes'), err
    assert not (tmp_path / 'run').exists() and taken == []    # never made, not even the lock


def test_the_closing_line_loads_the_model_with_the_options(tmp_path):
    """Name the options in the load_trained hint, given or read from summary.json."""
    # Prepare
    (tmp_path / 'model.pt').write_bytes(b'')
    (tmp_path / 'summary.json').write_text(json.dumps({'workload_options': {'features': 5}}))
    model = str(tmp_path / 'model.pt')
    # Execute
    given = fleet_progress.output_lines(str(tmp_path), 'my_tasks:make', {'data_dir': '/data'})
    recorded = fleet_progress.output_lines(str(tmp_path), 'toy')
    # Assert
    assert f"load_trained('my_tasks:make', {model!r}, data_dir='/data')" in given[0]
    assert f"load_trained('toy', {model!r}, features=5)" in recorded[0]


def test_a_fleet_trains_the_workload_with_its_options(tmp_path):
    """Run a real two-robot toy fleet with features=5: its summary, model and closing line."""
    # Prepare
    pytest.importorskip('cyclonedds')
    import torch
    from rog_ros.nodes.model_file import load_trained
    out = tmp_path / 'run'
    command = [sys.executable, '-m', 'rog_ros.cli', 'fleet', '--workload', 'toy',
               '--workload-option', 'features=5', '--workers', '2', '--iterations', '6',
               '--namespace', f'/rog_test_{os.getpid()}_options', '--out', str(out), '--quiet']
    # Execute
    proc = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                          cwd=ROOT)
    # Assert
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['workload_options'] == {'features': 5}
    state = torch.load(str(out / 'model.pt'), map_location='cpu', weights_only=True)
    assert {k: tuple(v.shape) for k, v in state.items()} == {'weight': (4, 5), 'bias': (4,)}
    assert sum(p.numel() for p in load_trained('toy', out / 'model.pt', features=5)
               .parameters()) == 4 * 5 + 4
    assert f"load_trained('toy', {str(out / 'model.pt')!r}, features=5)" in proc.stdout
