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
"""A user's own workload by import path: every process, every node, builds it for itself."""

import json
import os
import re
import subprocess
import sys

import pytest
from rog_ros import checks, cli, workloads

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE = 'rog_user_tasks_for_tests'
TASK = '''
from rog_ros.workloads.toy import make_toy


def make_task(features=8, seed=0):
    """A user's own task (here a small toy: features x 3 weights and 3 biases)."""
    return make_toy(features=features, classes=3, seed=seed)


not_a_builder = 3


def returns_nothing():
    """A builder that forgot its return statement."""


def raises():
    """A builder whose own code fails."""
    raise RuntimeError('no robots today')


def needs_size(size):
    """A builder with an argument that has no default."""
    return make_toy(features=size)


def counts_to_eight():
    """A task whose metric fails on the server's whole evaluation set (not on 8 samples)."""
    task = make_toy(features=4, classes=3)

    def correct(out, y):
        if len(y) > 8:
            raise RuntimeError('cannot count past eight')
        return out.argmax(-1) == y
    task._correct_fn = correct
    return task


def make_counted(features=8, seed=0):
    """The task of make_task, noting in $ROG_TEST_BUILDS which process built it."""
    import os
    import sys
    with open(os.environ['ROG_TEST_BUILDS'], 'a') as log:
        log.write(os.path.basename(sys.argv[0]).split('.')[0] + '\\n')
    return make_toy(features=features, classes=3, seed=seed)
'''


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    (tmp_path / f'{MODULE}.py').write_text(TASK)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_builder_named_by_import_path_is_built_with_its_options(user_folder):
    w = workloads.get(f'{MODULE}:make_task', features=6)
    assert sum(p.numel() for p in w.make_model().parameters()) == 6 * 3 + 3
    assert checks.workload('--workload', f'{MODULE}:make_task') == f'{MODULE}:make_task'
    assert sorted(workloads.builder_parameters(f'{MODULE}:make_task')) == ['features', 'seed']


@pytest.mark.parametrize('name, message', [
    ('no_such_module_here:make', "cannot find module 'no_such_module_here': every node imports"),
    ('no_such_package.tasks:make', "cannot find module 'no_such_package.tasks'"),
    ('my tasks:make', "unknown workload 'my tasks:make'; known: chaos, eacol"),
    ('tasks:', "unknown workload 'tasks:'"),
    # a file path where the module's name goes: its error read "__path__ attribute not found"
    ('my_tasks.py:make', r'\(did you mean my_tasks:make\? a module name, without \.py'),
    ('./robots/my_tasks.py:make', r'\(did you mean robots\.my_tasks:make\?'),
])
def test_a_name_that_finds_no_builder_is_refused_before_anything_runs(user_folder, name,
                                                                      message):
    with pytest.raises(checks.ConfigError, match=message):
        checks.workload('--workload', name)


@pytest.mark.parametrize('attr, message', [('make_nothing', "has no 'make_nothing'"),
                                           ('not_a_builder', 'is not callable')])
def test_a_module_without_the_builder_is_named_when_it_is_built(user_folder, attr, message):
    with pytest.raises(ValueError, match=message):
        workloads.get(f'{MODULE}:{attr}')


@pytest.mark.parametrize('attr, message, cause', [
    ('returns_nothing', 'the builder returned NoneType, not a rog_ros.workloads.Workload '
                        '(docs/workloads.md)', None),
    ('raises', 'the builder failed: RuntimeError: no robots today', RuntimeError),
    ('needs_size', 'the builder failed: TypeError: needs_size() missing 1 required '
                   "positional argument: 'size'", TypeError),
])
def test_a_faulty_builder_is_one_line_naming_it(user_folder, capsys, attr, message, cause):
    name = f'{MODULE}:{attr}'
    with pytest.raises(ValueError) as err:
        workloads.get(name)
    if attr == 'raises':        # the line of the user's code that raised (a TypeError of
        # the call itself has none), in this folder's module or an earlier test's
        line = next(i for i, text in enumerate(TASK.splitlines(), 1) if 'no robots' in text)
        message += f' (at {sys.modules[MODULE].__file__}:{line})'
    assert str(err.value) == f'workload {name}: {message}'
    if cause is None:
        assert err.value.__cause__ is None
    else:
        assert isinstance(err.value.__cause__, cause)
    out = user_folder / 'run'
    assert cli.main(['sim', '--workload', name, '--iterations', '1', '--out', str(out)]) == 2
    assert capsys.readouterr().err.strip() == f'rog sim: workload {name}: {message}'
    assert not out.exists()


@pytest.mark.parametrize('source, message, cause', [
    ('def make(:\n', "cannot import 'rog_user_broken_for_tests' (SyntaxError: invalid syntax",
     SyntaxError),
    ('1 / 0\n', "cannot import 'rog_user_broken_for_tests' (ZeroDivisionError: division "
     'by zero)', ZeroDivisionError),
])
def test_a_module_that_fails_on_import_is_one_line(tmp_path, monkeypatch, capsys, source,
                                                   message, cause):
    (tmp_path / 'rog_user_broken_for_tests.py').write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    name = 'rog_user_broken_for_tests:make'
    with pytest.raises(ValueError, match=re.escape(f'workload {name}: {message}')) as err:
        workloads.get(name)
    assert isinstance(err.value.__cause__, cause)
    assert cli.main(['sim', '--workload', name, '--iterations', '1']) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith(f'rog sim: workload {name}: {message}') and '\n' not in line


@pytest.mark.parametrize('extra, prefix', [
    (['--workload-option', 'a=1'], 'rog sim: --workload-option: '), ([], 'rog sim: ')])
def test_a_missing_builder_is_one_line_with_options_or_without(user_folder, capsys,
                                                               extra, prefix):
    name = f'{MODULE}:nothere'
    assert cli.main(['sim', '--workload', name, *extra]) == 2
    assert capsys.readouterr().err.strip() == (
        f"{prefix}workload {name}: module '{MODULE}' has no 'nothere'")


def test_an_unknown_name_is_a_value_error():
    with pytest.raises(ValueError, match="^unknown workload 'nope'; registered: chaos, eacol"):
        workloads.get('nope')


def test_the_simulator_runs_a_users_workload_with_options(user_folder, capsys):
    out = user_folder / 'run'
    assert cli.main(['sim', '--workload', f'{MODULE}:make_task', '--sync', 'rog:2',
                     '--workers', '2', '--iterations', '3', '--evaluations', '2',
                     '--workload-option', 'features=5', '--out', str(out)]) == 0
    summary = json.loads((out / 'summary.json').read_text())
    # (the summary names the workload as it was asked for, as a fleet's does)
    assert summary['workload'] == f'{MODULE}:make_task' and summary['params'] == 5 * 3 + 3
    assert cli.main(['sim', '--workload', f'{MODULE}:make_task', '--workload-option',
                     'classes=4']) == 2          # not an option of the user's builder
    assert "takes no option 'classes'; it takes features, seed" in capsys.readouterr().err


def test_a_node_process_started_in_the_users_folder_builds_it(user_folder):
    # what every node of a fleet does first (rog fleet, rog robot and the ROS 2 launch files
    # start the same module): the user's folder is the working directory, nothing else
    env = dict(os.environ, PYTHONPATH=ROOT)
    for name, status, said in ((f'{MODULE}:make_task', 0, ''),
                               (f'{MODULE}:make_nothing', 2, "has no 'make_nothing'")):
        proc = subprocess.run([sys.executable, '-m', 'rog_ros.nodes.prepare_workload', name],
                              cwd=user_folder, env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == status, proc.stdout + proc.stderr
        assert said in proc.stdout


def test_a_fleet_whose_every_evaluation_failed_ends_with_status_1_saying_so(user_folder):
    # it said "done" with status 0 and no accuracy; the error was in the server's log only
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = user_folder / 'run'
    proc = subprocess.run([sys.executable, '-m', 'rog_ros.cli', 'fleet', '--workload',
                           f'{MODULE}:counts_to_eight', '--workers', '2', '--iterations', '6',
                           '--out', str(out), '--quiet'],
                          cwd=user_folder, env=env, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['evaluations'] == 0 and summary['evaluation_errors'] >= 1
    assert 'RuntimeError: cannot count past eight (at ' in summary['evaluation_error']
    assert 'no evaluation succeeded' in proc.stdout
    assert 'every evaluation failed' in proc.stderr
    assert (out / 'timeseries.csv').read_text() == 'time_s,iteration,accuracy\n'
    assert cli.main(['report', str(out)]) == 0     # (it refused the header it got before)


@pytest.mark.parametrize('start', ('the checkpoint', 'an init model'))
def test_a_fleet_of_three_builds_a_users_workload_once_per_process_and_once_before(
        start, user_folder):
    """Count the builds of a 3-worker fleet: each node's, and one check before any starts."""
    # Arrange: with --init-model, the plan's check of the weights built the workload in a
    # child, and then the fleet's preparation built it again with the same options (6)
    builds = user_folder / 'builds.txt'
    env = dict(os.environ, PYTHONPATH=ROOT, ROG_TEST_BUILDS=str(builds))
    extra = []
    if start == 'an init model':
        import torch
        weights = user_folder / 'start.pt'
        torch.save(workloads.get(f'{MODULE}:make_task').make_model().state_dict(), weights)
        extra = ['--init-model', str(weights)]
    # Execute
    proc = subprocess.run([sys.executable, '-m', 'rog_ros.cli', 'fleet', '--workload',
                           f'{MODULE}:make_counted', '--workers', '3', '--iterations', '4',
                           '--out', str(user_folder / 'run'), '--quiet', *extra],
                          cwd=user_folder, env=env, capture_output=True, text=True,
                          timeout=240)
    # Assert
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(builds.read_text().split()) == [
        'prepare_workload', 'rog_server', 'rog_worker', 'rog_worker', 'rog_worker']


def test_the_rog_command_finds_a_module_in_its_working_directory(tmp_path, monkeypatch):
    # the console script's path starts at its own folder; the nodes it starts (python -m)
    # see the working directory: both must take the same name
    (tmp_path / 'rog_user_tasks_in_cwd.py').write_text(TASK)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, 'path', [p for p in sys.path if p not in ('', str(tmp_path))])
    name = 'rog_user_tasks_in_cwd:make_task'
    assert checks.workload('--workload', name) == name
    assert sum(p.numel() for p in workloads.get(name).make_model().parameters()) == 8 * 3 + 3
