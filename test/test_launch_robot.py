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
robot.launch.py and fleet.launch.py inspected as data, without ROS 2.

Stand-in ``launch`` / ``launch_ros`` modules record what the launch files build; the test
checks the node set per role, that every setting is a launch argument, that links are not
shaped unless trace:= is given, and the RMW / Cyclone environment defaults.
"""

import importlib
import importlib.util
from pathlib import Path
import sys
import types

import pytest

from rog_ros.nodes import robot, settings

ROOT = Path(__file__).resolve().parent.parent


class Recorded:
    """What a stand-in launch action was built with."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class LaunchConfiguration:
    """Stand-in: the value of a launch argument in a context."""

    def __init__(self, name):
        self.name = name

    def perform(self, context):
        return context.get(self.name, '')


@pytest.fixture
def launch_file(monkeypatch):
    """Load a launch file against stand-in launch modules; return a loader."""
    launch = types.ModuleType('launch')
    launch.LaunchDescription = lambda entities: list(entities)
    actions = types.ModuleType('launch.actions')
    for name in ('DeclareLaunchArgument', 'OpaqueFunction', 'SetEnvironmentVariable'):
        setattr(actions, name, type(name, (Recorded,), {}))
    subs = types.ModuleType('launch.substitutions')
    subs.LaunchConfiguration = LaunchConfiguration
    launch_ros = types.ModuleType('launch_ros')
    ros_actions = types.ModuleType('launch_ros.actions')
    ros_actions.Node = type('Node', (Recorded,), {})
    for name, mod in (('launch', launch), ('launch.actions', actions),
                      ('launch.substitutions', subs), ('launch_ros', launch_ros),
                      ('launch_ros.actions', ros_actions)):
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.delenv('RMW_IMPLEMENTATION', raising=False)
    monkeypatch.delenv('CYCLONEDDS_URI', raising=False)
    launching = importlib.reload(importlib.import_module('rog_ros.nodes.launching'))

    def load(name, **values):
        spec = importlib.util.spec_from_file_location(name, ROOT / 'launch' / f'{name}.py')
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        entities = module.generate_launch_description()
        declared = {e.args[0]: e for e in entities if type(e).__name__ == 'DeclareLaunchArgument'}
        opaque = [e for e in entities if type(e).__name__ == 'OpaqueFunction'][0]
        made = opaque.kwargs['function'](values)
        nodes = [e.kwargs for e in made if type(e).__name__ == 'Node']
        env = {e.args[0]: e.args[1] for e in made if type(e).__name__ == 'SetEnvironmentVariable'}
        return declared, nodes, env

    yield load
    monkeypatch.undo()
    importlib.reload(launching)


def _flags(node):
    argv = node['arguments']
    return {argv[i][2:].replace('-', '_'): argv[i + 1] for i in range(0, len(argv), 2)}


def test_robot_launch_worker_runs_its_worker_and_netmon(launch_file):
    declared, nodes, env = launch_file('robot.launch', role='worker', rank='2', workers='3',
                                       server_host='10.0.0.10')
    assert [(n['executable'], n['name']) for n in nodes] == [('rog_worker', 'rog_worker_2'),
                                                             ('netmon', 'netmon_2')]
    worker, mon = (_flags(n) for n in nodes)
    assert worker['rank'] == '2' and worker['workers'] == '3' and mon['nodes'] == '2'
    assert worker['trace'] == 'none'                        # real links: no shaping
    assert env['RMW_IMPLEMENTATION'] == 'rmw_cyclonedds_cpp'
    assert env['CYCLONEDDS_URI'].split(',')[0].endswith('config/cyclonedds_wifi.xml')
    assert '<Peer address="10.0.0.10"/>' in env['CYCLONEDDS_URI']


def test_robot_launch_server_and_every_setting_is_an_argument(launch_file):
    declared, nodes, _ = launch_file('robot.launch', role='server', workers='2',
                                     eval_every='5', trace='indoors')
    assert [(n['executable'], n['name']) for n in nodes] == [('rog_server', 'rog_server'),
                                                             ('netmon', 'netmon')]
    server = _flags(nodes[0])
    assert server['eval_every'] == '5' and server['trace'] == 'indoors'   # shaped on request
    node_settings = {s.name for s in settings.SETTINGS if set(s.roles) & set(settings.NODES)}
    assert node_settings | {'role', 'rank', 'server_host', 'peers', 'config'} == set(declared)


@pytest.mark.parametrize('values,message', [
    ({'role': 'robot'}, 'role must be server or worker'),
    ({'role': 'worker', 'rank': '3', 'workers': '3'}, 'rank must be in 0..2'),
    ({'role': 'worker', 'rank': 'one'}, 'is not an integer'),
])
def test_robot_launch_rejects_bad_arguments_in_one_line(launch_file, values, message):
    with pytest.raises(ValueError, match=message):
        launch_file('robot.launch', **values)


def test_user_environment_wins(monkeypatch):
    env = robot.robot_environment({'RMW_IMPLEMENTATION': 'rmw_fastrtps_cpp',
                                   'CYCLONEDDS_URI': 'file:///mine.xml'}, '10.0.0.1')
    assert env == {}


@pytest.mark.parametrize('name', ['mpcol', 'eacol'])
def test_demo_configs_do_not_shape_unless_trace_is_given(launch_file, name):
    _, nodes, env = launch_file(f'{name}.launch', workers='2')
    assert {_flags(n)['trace'] for n in nodes} == {'none'}
    assert [n['name'] for n in nodes] == ['rog_server', 'rog_worker_0', 'rog_worker_1',
                                          'netmon']
    _, nodes, _ = launch_file(f'{name}.launch', workers='2', trace='indoors')
    assert {_flags(n)['trace'] for n in nodes} == {'indoors'}
    assert env['RMW_IMPLEMENTATION'] == 'rmw_cyclonedds_cpp'


def test_robot_plan_matches_the_fleet_plan_per_robot():
    from rog_ros.nodes import plan as fleet
    whole = {s.name: s.parameters for s in fleet.plan(overrides={'workers': 2})}
    assert robot.robot_plan('server', 0, None, {'workers': 2})[0].parameters == \
        whole['rog_server']
    assert robot.robot_plan('worker', 1, None, {'workers': 2})[0].parameters == \
        whole['rog_worker_1']


@pytest.mark.parametrize('argv,message', [
    (['--role', 'worker', '--rank', '5', '--workers', '2'], 'rank must be in 0..1'),
    (['--role', 'server', '--trace', 'missing.csv'], 'trace (--trace)'),
    (['--role', 'server', '--staleness', 'x'], 'staleness (--staleness)'),
])
def test_rog_robot_refuses_bad_options_in_one_line(argv, message, capsys, monkeypatch, tmp_path):
    from rog_ros import cli
    monkeypatch.chdir(tmp_path)
    assert cli.main(['robot'] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith('rog robot: ') and message in err[0]
    assert not list(tmp_path.iterdir())                     # nothing started, no logs
