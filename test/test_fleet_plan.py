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
The fleet plan shared by launch files and `rog fleet`, tested without ROS.

Merging order, validation, the config files, and that every planned command line is accepted
by its node.
"""

import importlib.util
from pathlib import Path

import pytest

from rog_ros.nodes import launching, netmon, rog_server, rog_worker
from rog_ros.nodes import plan as fleet

ROOT = Path(__file__).resolve().parent.parent
PARSERS = {'rog_server': rog_server.build_parser, 'rog_worker': rog_worker.build_parser,
           'netmon': netmon.build_parser}


def test_default_plan_is_server_workers_netmon():
    specs = fleet.plan()
    assert [s.name for s in specs] == ['rog_server', 'rog_worker_0', 'rog_worker_1',
                                       'rog_worker_2', 'netmon']
    assert [s.rank for s in specs if s.role == 'worker'] == [0, 1, 2]
    assert specs[-1].parameters['nodes'] == [0, 1, 2]
    assert 'iterations' not in specs[1].parameters and 'rank' not in specs[0].parameters


@pytest.mark.parametrize('overrides', [{}, {'workers': 5, 'sync': 'ssp', 'trace': 'indoors',
                                            'lr': 0.01, 'epoch': 1234.5,
                                            'state_dir': '/tmp/rog_state',
                                            'checkpoint_every': 3}])
def test_every_planned_command_line_parses_in_its_node(overrides):
    for spec in fleet.plan(overrides=overrides):
        args = PARSERS[spec.executable]().parse_args(spec.argv())
        for key, value in spec.parameters.items():
            if value is None or key == 'nodes':
                continue
            assert getattr(args, key) == value, (spec.name, key)
        assert spec.command()[1:3] == ['-m', spec.module]


def test_parameters_merge_defaults_file_sections_then_overrides():
    file_params = fleet.yaml_parameters({
        '/**': {'ros__parameters': {'workload': 'mpcol', 'staleness': 2, 'workers': 2}},
        'rog_server': {'ros__parameters': {'iterations': 7, 'staleness': 3}},
    })
    specs = fleet.plan(file_params, {'staleness': 9, 'netmon': False})
    server, worker = specs[0].parameters, specs[1].parameters
    assert server['workload'] == worker['workload'] == 'mpcol'
    assert server['iterations'] == 7
    assert server['staleness'] == worker['staleness'] == 9        # override wins
    assert [s.role for s in specs] == ['server', 'worker', 'worker']


def test_unknown_parameter_and_bad_files_are_rejected():
    with pytest.raises(ValueError, match='unknown parameter'):
        fleet.plan(overrides={'stalenes': 3})
    with pytest.raises(ValueError, match='ros__parameters'):
        fleet.yaml_parameters({'rog_server': {'iterations': 3}})
    with pytest.raises(ValueError, match='workers'):
        fleet.plan(overrides={'workers': 0})
    with pytest.raises(ValueError, match='checkpoint_every'):
        fleet.plan(overrides={'checkpoint_every': 0})


@pytest.mark.parametrize('name,workload', [('fleet', 'toy'), ('mpcol', 'mpcol'),
                                           ('eacol', 'eacol')])
def test_config_files_are_ros2_parameter_files(name, workload):
    params = fleet.load_parameter_file(ROOT / 'config' / f'{name}.yaml')
    specs = fleet.plan(params)
    assert set(params) <= {'/**', 'rog_server', 'rog_worker', 'netmon'}
    assert specs[0].parameters['workload'] == workload


def test_launch_overrides_parse_strings():
    got = fleet.launch_overrides({'workload': 'mpcol', 'staleness': '4', 'workers': '',
                                  'config': 'x.yaml', 'trace': ' indoors '})
    assert got == {'workload': 'mpcol', 'staleness': 4, 'trace': 'indoors'}
    with pytest.raises(ValueError, match='integer'):
        fleet.launch_overrides({'workers': 'three'})


@pytest.mark.parametrize('name', ['fleet', 'mpcol', 'eacol'])
def test_launch_files_import_without_ros_and_plan_their_config(name):
    # Prepare
    path = ROOT / 'launch' / f'{name}.launch.py'
    spec = importlib.util.spec_from_file_location(f'launch_{name}', path)
    module = importlib.util.module_from_spec(spec)
    # Execute
    spec.loader.exec_module(module)
    specs = launching.node_specs({'sync': 'ssp', 'workers': '2'}, module.DEFAULT_CONFIG)
    # Assert
    assert Path(module.DEFAULT_CONFIG).name == f'{name}.yaml'
    assert [s.parameters['sync'] for s in specs if s.role != 'netmon'] == ['ssp'] * 3
    if launching.LaunchDescription is None:
        with pytest.raises(RuntimeError, match='rog fleet'):
            module.generate_launch_description()


@pytest.mark.parametrize('namespace, out, expected', [
    ('/rog', '/tmp/runs/a', '/rog/a'),
    ('/lab/rog', 'runs/run-2.b', '/lab/rog/run_2_b'),
    ('/rog', '/tmp/7', '/rog/run_7'),                 # a ROS 2 name starts with no digit
    ('/', '/tmp/x', '/x'),
    ('/rog', 'runs/mpcol--rog 4', '/rog/mpcol_rog_4'),    # rcl refuses __ in a remap rule
])
def test_a_fleet_run_puts_its_nodes_in_a_namespace_of_its_own(namespace, out, expected):
    from rog_ros.nodes import fleet
    from rog_ros.nodes.plan import NodeSpec
    from rog_ros.nodes.ros_names import parse_rule

    assert fleet.run_namespace(namespace, out) == expected
    assert parse_rule(f'__ns:={expected}') == (None, 'ns', expected)   # the nodes take it
    spec = NodeSpec('rog_server', 'rog_server', {'workers': 2}, ros_args=('-r', '__ns:=/x'))
    assert spec.command('py') == ['py', '-m', 'rog_ros.nodes.rog_server', '--workers', '2',
                                  '--ros-args', '-r', '__ns:=/x']
