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
"""A user's workload is tried on a few samples when built; its mistakes are one line."""

import json
import re
import sys

import pytest
from rog_ros import cli, workloads
from rog_ros.nodes import fleet_progress
from rog_ros.workloads import self_check
import torch

MODULE = 'rog_user_checked_tasks_for_tests'
TASKS = """
import torch
from rog_ros.workloads import Workload


def _task(train_y=None, eval_y=None, eval_n=40, **kw):
    g = torch.Generator().manual_seed(0)
    x, ex = torch.randn(60, 6, generator=g), torch.randn(eval_n, 6, generator=g)
    y = torch.arange(60) % 3 if train_y is None else train_y
    ey = torch.arange(eval_n) % 3 if eval_y is None else eval_y
    return Workload('mine', lambda: torch.nn.Linear(6, 3), None, (x, y),
                    lambda n: list(torch.arange(60).chunk(n)), (ex, ey), batch_size=6,
                    target_accuracy=0.5, compute_time_s=0.01, **kw)


def good():
    return _task()


def eval_labels_too_high():
    return _task(eval_y=torch.arange(40) % 5)


def a_negative_training_label():
    y = torch.arange(60) % 3
    y[7] = -1
    return _task(train_y=y)


def no_evaluation_set():
    return _task(eval_n=0)


def a_loss_per_sample():
    return _task(loss_fn=lambda out, y: torch.nn.functional.cross_entropy(
        out, y, reduction='none'))


def a_nan_loss():
    return _task(loss_fn=lambda out, y: out.sum() * float('nan'))


def a_model_for_other_inputs():
    task = _task()
    task._model_fn = lambda: torch.nn.Linear(7, 3)
    return task


def a_metric_that_fails_on_large_sets():
    def correct(out, y):
        if len(y) > 8:
            raise RuntimeError('my metric cannot count past eight')
        return out.argmax(-1) == y
    return _task(correct_fn=correct)


def a_builder_that_fails():
    return [1, 2][5]
"""


def _line_of(source: str, text: str) -> int:
    """Return the 1-based line of ``source`` that holds ``text``."""
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """Write the tasks module into a folder on sys.path; yield its file."""
    path = tmp_path / f'{MODULE}.py'
    path.write_text(TASKS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)   # this test's file, not the last
    monkeypatch.setattr(workloads, '_BUILT', {})
    yield path
    sys.modules.pop(MODULE, None)


@pytest.mark.parametrize('builder, message', [
    ('eval_labels_too_high', '16 evaluation label(s) outside 0..2 (the model has 3 outputs; '
                             'labels span 0..4)'),
    ('a_negative_training_label', '1 training label(s) outside 0..2 (the model has 3 '
                                  'outputs; labels span -1..2)'),
    ('no_evaluation_set', 'its evaluation set is empty'),
    ('a_loss_per_sample', 'its loss must be a scalar tensor (got (8,))'),
    ('a_nan_loss', 'the loss of its start model is nan on a few training samples'),
    ('a_model_for_other_inputs', 'running its start model on a few held-out samples failed: '
                                 'RuntimeError: mat1 and mat2 shapes cannot be multiplied'),
])
def test_a_users_workload_that_cannot_train_is_refused_when_built(user_module, capsys,
                                                                  builder, message):
    name = f'{MODULE}:{builder}'
    with pytest.raises(ValueError) as err:
        workloads.get(name)
    assert str(err.value).startswith(f'workload {name}: {message}')
    out = user_module.parent / 'run'
    assert cli.main(['sim', '--workload', name, '--iterations', '2', '--out', str(out)]) == 2
    said = capsys.readouterr().err.strip()
    assert said.startswith(f'rog sim: workload {name}: {message}') and '\n' not in said
    assert not out.exists()


def test_a_builder_that_raises_names_the_users_line(user_module):
    with pytest.raises(ValueError) as err:
        workloads.get(f'{MODULE}:a_builder_that_fails')
    line = _line_of(TASKS, 'return [1, 2][5]')
    assert str(err.value).endswith(
        f'the builder failed: IndexError: list index out of range (at {user_module}:{line})')


def test_a_metric_that_fails_mid_run_is_one_line_naming_the_users_line(
        user_module, capsys):
    name = f'{MODULE}:a_metric_that_fails_on_large_sets'
    task = workloads.get(name)              # eight samples at the start: they pass
    assert task.users_code == name
    line = _line_of(TASKS, "raise RuntimeError('my metric cannot count past eight')")
    with pytest.raises(ValueError, match=re.escape(
            f'workload {name}: evaluating the model failed: RuntimeError: my metric cannot '
            f'count past eight (at {user_module}:{line})')):
        task.evaluate(task.make_model())
    assert task.evaluate(task.make_model(), max_samples=8)['samples'] == 8
    assert cli.main(['sim', '--workload', name, '--iterations', '2',
                     '--out', str(user_module.parent / 'run')]) == 2
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert said == (f'rog sim: workload {name}: evaluating the model failed: RuntimeError: '
                    f'my metric cannot count past eight (at {user_module}:{line})')


def test_a_good_users_workload_trains_and_its_runs_name_it_as_asked(user_module):
    name = f'{MODULE}:good'
    out = user_module.parent / 'run'
    assert cli.main(['sim', '--workload', name, '--iterations', '4', '--evaluations', '2',
                     '--out', str(out)]) == 0
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['workload'] == name
    assert summary['start_model']['source'] == (
        f"workload {name}'s model as its builder makes it (no pre-trained checkpoint)")


def test_the_check_leaves_the_callers_random_stream_alone(user_module):
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    workloads.get(f'{MODULE}:good', fresh=True)
    assert torch.equal(torch.rand(3), expected)


def test_the_shipped_workloads_are_not_checked(monkeypatch):
    def refuse(name, workload):
        raise AssertionError(f'{name} was checked')
    monkeypatch.setattr(self_check, 'check_workload', refuse)
    task = workloads.get('toy', fresh=True, features=5)
    assert task.users_code == '' and task.describe_start() == (
        "workload toy's pre-trained checkpoint")


def test_where_skips_torch_and_this_package_to_the_users_frame(tmp_path):
    source = 'import torch\n\n\ndef f():\n    return torch.zeros(2) @ torch.zeros(3)\n'
    path = tmp_path / 'rog_user_where_for_tests.py'
    path.write_text(source)
    namespace = {}
    exec(compile(source, str(path), 'exec'), namespace)
    with pytest.raises(RuntimeError) as err:
        namespace['f']()
    assert self_check.where(err.value) == f' (at {path}:5)'
    assert self_check.where(RuntimeError('never raised')) == ''


def test_a_fleet_whose_every_evaluation_failed_says_so(tmp_path):
    path = tmp_path / 'summary.json'
    path.write_text(json.dumps({'evaluations': 0, 'evaluation_errors': 3, 'sim_time_s': 2.0,
                                'evaluation_error': 'at iteration 0: ZeroDivisionError: x'}))
    line = fleet_progress.result_line(str(path))
    assert line.startswith('no evaluation succeeded (3 failed, the first at iteration 0: '
                           'ZeroDivisionError: x)')
    assert fleet_progress.every_evaluation_failed(str(path))
    path.write_text(json.dumps({'evaluations': 5, 'evaluation_errors': 1, 'sim_time_s': 2.0,
                                'final_accuracy': 0.9, 'target_accuracy': 0.5,
                                'time_to_target_s': 1.0, 'iterations_to_target': 3,
                                'max_dip_after_target': 0.0,
                                'evaluation_error': 'at iteration 4: OSError: y'}))
    line = fleet_progress.result_line(str(path))
    assert '(1 evaluation failed, the first at iteration 4: OSError: y)' in line
    assert not fleet_progress.every_evaluation_failed(str(path))
    path.write_text(json.dumps({'evaluations': 0, 'evaluation_errors': 0}))
    assert not fleet_progress.every_evaluation_failed(str(path))
