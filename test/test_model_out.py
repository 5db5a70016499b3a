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
"""Where a robot writes its trained model (``model_out``): checked before it trains."""

import os

import pytest
from rog_ros.nodes.model_file import model_out_file
from rog_ros.nodes.params import check_fleet_args, node_parser
from rog_ros.nodes.robot import ROBOT_MODEL, robot_plan


def test_a_folder_gets_model_pt_inside_and_nothing_is_created(tmp_path):
    assert model_out_file(tmp_path) == os.path.join(str(tmp_path), 'model.pt')
    later = str(tmp_path / 'not' / 'yet') + os.sep
    assert model_out_file(later) == os.path.join(later, 'model.pt')
    assert model_out_file(tmp_path / 'robot.pt') == str(tmp_path / 'robot.pt')
    assert not (tmp_path / 'not').exists()                # checked, not created


def test_a_path_under_a_file_is_refused_in_one_line(tmp_path):
    (tmp_path / 'notes.txt').write_text('x')
    with pytest.raises(ValueError, match='notes.txt is a file, not a folder'):
        model_out_file(tmp_path / 'notes.txt' / 'model.pt')


def test_the_worker_node_refuses_it_at_its_command_line(tmp_path, capsys):
    (tmp_path / 'notes.txt').write_text('x')
    parser = node_parser('rog_worker', 'rog_worker', '')
    args = parser.parse_args(['--workload', 'toy', '--model-out',
                              str(tmp_path / 'notes.txt' / 'm.pt')])
    with pytest.raises(SystemExit) as stop:
        check_fleet_args(parser, args)
    assert stop.value.code == 2
    assert '--model-out' in capsys.readouterr().err


def test_the_setting_is_the_workers_alone():
    assert 'model_out' in node_parser('rog_worker', 'rog_worker', '').parse_args(
        ['--model-out', 'm.pt']).__dict__
    with pytest.raises(SystemExit):
        node_parser('rog_server', 'rog_server', '').parse_args(['--model-out', 'm.pt'])
    # a worker robot's plan leaves it to rog robot (default ./rog_robot_model.pt)
    spec = robot_plan('worker', 1, overrides={'workers': 2})[0]
    assert not spec.parameters.get('model_out') and ROBOT_MODEL == 'rog_robot_model.pt'


def test_a_launch_refuses_it_before_anything_starts(tmp_path):
    # robot.launch.py and rog robot plan through robot_plan -> validate
    from rog_ros.checks import ConfigError
    (tmp_path / 'notes.txt').write_text('x')
    with pytest.raises(ConfigError, match=r'model_out \(--model-out\): .*is a file, not a folder'):
        robot_plan('worker', 0, overrides={'workers': 2,
                                           'model_out': str(tmp_path / 'notes.txt' / 'm.pt')})
    spec = robot_plan('worker', 0, overrides={'workers': 2, 'model_out': str(tmp_path / 'r.pt')})
    assert spec[0].parameters['model_out'] == str(tmp_path / 'r.pt')
