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
import os
from pathlib import Path
import sys
import zipfile

import dds_domains
from launch_stand_ins import LaunchContext, stand_in_modules
import pytest

from rog_ros.nodes import robot, settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def launch_file(monkeypatch):
    """Load a launch file against stand-in launch modules; return a loader."""
    for name, mod in stand_in_modules().items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.delenv('RMW_IMPLEMENTATION', raising=False)
    monkeypatch.delenv('CYCLONEDDS_URI', raising=False)
    launching = importlib.reload(importlib.import_module('rog_ros.nodes.launching'))

    def load(name, context=None, **values):
        spec = importlib.util.spec_from_file_location(name, ROOT / 'launch' / f'{name}.py')
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        entities = module.generate_launch_description()
        declared = {e.args[0]: e for e in entities if type(e).__name__ == 'DeclareLaunchArgument'}
        opaque = [e for e in entities if type(e).__name__ == 'OpaqueFunction'][0]
        made = opaque.kwargs['function'](values if context is None else context)
        nodes = [e.kwargs for e in made if type(e).__name__ == 'Node']
        env = {e.args[0]: e.args[1] for e in made if type(e).__name__ == 'SetEnvironmentVariable'}
        load.made = made
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
    # Ctrl-C or docker stop: the nodes get time to write before launch's SIGTERM (default 5 s)
    assert [n['sigterm_timeout'] for n in nodes] == ['30', '30']
    assert env['RMW_IMPLEMENTATION'] == 'rmw_cyclonedds_cpp'
    assert env['CYCLONEDDS_URI'].split(',')[0].endswith('config/cyclonedds_wifi.xml')
    # the server at its node's port only: one datagram per announcement, not 32 (Cyclone 0.10)
    assert '<Peer address="10.0.0.10:7510"/>' in env['CYCLONEDDS_URI']
    assert all('additional_env' not in n for n in nodes)          # auto participant indices


def test_robot_launch_server_and_every_setting_is_an_argument(launch_file, monkeypatch):
    monkeypatch.setenv('ROS_DOMAIN_ID', str(_free_domain()))   # its index 50 free on this host
    declared, nodes, _ = launch_file('robot.launch', role='server', workers='2',
                                     eval_every='5', trace='indoors')
    assert [(n['executable'], n['name']) for n in nodes] == [('rog_server', 'rog_server'),
                                                             ('netmon', 'netmon')]
    server = _flags(nodes[0])
    assert server['eval_every'] == '5' and server['trace'] == 'indoors'   # shaped on request
    node_settings = {s.name for s in settings.SETTINGS if set(s.roles) & set(settings.NODES)}
    assert node_settings | {'role', 'rank', 'server_host', 'peers', 'config',
                            'respawn'} == set(declared)
    # the server node takes the participant index whose port the worker robots list
    uri = nodes[0]['additional_env']['CYCLONEDDS_URI']
    assert uri.split(',')[0].endswith('config/cyclonedds_wifi.xml')
    assert uri.endswith(',<Discovery><ParticipantIndex>50</ParticipantIndex></Discovery>')
    assert 'additional_env' not in nodes[1]                        # netmon: any free index


def _free_domain() -> int:
    """Return a domain of this test process (another's server node would hold its index)."""
    return dds_domains.domain(__name__)


def test_robot_launch_server_whose_index_is_taken_keeps_a_free_one(
        launch_file, monkeypatch, capsys):
    """
    Another server node of the domain on the host: this one is launched on a free index.

    Cyclone refused the fixed index (its port bound by the other fleet's server node) and
    the server node never started; now it is launched as before the fixed index, warned.
    """
    import socket
    domain = _free_domain()
    monkeypatch.setenv('ROS_DOMAIN_ID', str(domain))
    holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    holder.bind(('', 7400 + 250 * domain + 10 + 2 * 50))
    try:
        _, nodes, _ = launch_file('robot.launch', role='server', workers='2')
    finally:
        holder.close()
    assert [n['name'] for n in nodes] == ['rog_server', 'netmon']
    assert all('additional_env' not in n for n in nodes)
    warned = capsys.readouterr().err
    assert f'DDS participant index 50 of domain {domain} (UDP port' in warned
    assert 'reach it by multicast only' in warned
    # a worker robot on the same host (a trial on one machine) has no server node to warn of
    holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    holder.bind(('', 7400 + 250 * domain + 10 + 2 * 50))
    try:
        launch_file('robot.launch', role='worker', rank='0', server_host='127.0.0.1')
    finally:
        holder.close()
    assert 'participant index' not in capsys.readouterr().err


@pytest.mark.parametrize('values,message', [
    ({'role': 'robot'}, 'role must be server or worker'),
    ({'role': 'worker', 'rank': '3', 'workers': '3'}, 'rank must be in 0..2'),
    ({'role': 'worker', 'rank': 'one'}, 'is not an integer'),
    ({'role': 'worker', 'workers': '3'}, 'needs rank:=K'),
    ({'role': 'server', 'rank': '1'}, 'takes no rank'),
])
def test_robot_launch_rejects_bad_arguments_in_one_line(launch_file, values, message):
    with pytest.raises(ValueError, match=message):
        launch_file('robot.launch', **values)


def _ros2_launch(monkeypatch, words, extra=None):
    """
    Set the command line of ``ros2 launch WORDS``; return its launch context (stand-in).

    As ros2 launch: the ``name:=value`` words are the context's argv and its launch
    configurations, with ``extra`` entries (an including file's, SetLaunchConfiguration's).
    """
    monkeypatch.setattr(sys, 'argv', ['/opt/ros/humble/bin/ros2', 'launch'] + words)
    given = [w for w in words if ':=' in w]
    configurations = dict(w.split(':=', 1) for w in given)
    configurations.update(extra or {})
    return LaunchContext(configurations, argv=given)


@pytest.mark.parametrize('name', ['mpcol', 'eacol', 'fleet', 'robot'])
def test_a_misspelt_launch_argument_is_refused_with_the_closest_one(launch_file, monkeypatch,
                                                                    name):
    # ros2 launch ignores an argument no launch file declares: stalenes:=3 ran with the
    # default staleness of 4, without a word
    words = ['rog_ros', f'{name}.launch.py', 'workers:=2', 'stalenes:=3']
    if name == 'robot':
        words += ['role:=server']
    for form in (words, [str(ROOT / 'launch' / f'{name}.launch.py')] + words[2:]):
        context = _ros2_launch(monkeypatch, form)
        with pytest.raises(ValueError) as err:
            launch_file(f'{name}.launch', context)
        assert '\n' not in str(err.value)
        assert str(err.value).startswith(f'{name}.launch.py has no launch argument stalenes:=3 '
                                         '(did you mean staleness?); ')
        assert f'ros2 launch rog_ros {name}.launch.py --show-args' in str(err.value)
    # spelt right, it runs as given
    context = _ros2_launch(monkeypatch, [w.replace('stalenes', 'staleness') for w in words])
    _, nodes, _ = launch_file(f'{name}.launch', context)
    assert {_flags(n)['staleness'] for n in nodes if 'staleness' in _flags(n)} == {'3'}


def test_a_robot_argument_given_to_a_fleet_launch_file_names_robot_launch(launch_file,
                                                                          monkeypatch):
    context = _ros2_launch(monkeypatch, ['rog_ros', 'fleet.launch.py', 'role:=server',
                                         'nodez:=1', 'xyz:=2'])
    with pytest.raises(ValueError) as err:
        launch_file('fleet.launch', context)
    assert str(err.value).startswith(
        'fleet.launch.py has no launch argument role:=server (an argument of robot.launch.py, '
        'one robot of a fleet), nodez:=1 (did you mean nodes?), xyz:=2; ')


def test_arguments_of_a_launch_file_that_includes_ours_are_left_to_it(launch_file, monkeypatch):
    # ros2 launch my_robot bringup.launch.py use_sim:=true, which includes fleet.launch.py:
    # the command line's arguments, and what bringup sets, are bringup's, not typos of ours
    context = _ros2_launch(monkeypatch, ['my_robot', 'bringup.launch.py', 'use_sim:=true'],
                           extra={'workers': '2', 'map_name': 'lab'})
    _, nodes, _ = launch_file('fleet.launch', context)
    assert [n['name'] for n in nodes] == ['rog_server', 'rog_worker_0', 'rog_worker_1',
                                          'netmon']
    # a launch file of another package with our file's name is not ours either
    context = _ros2_launch(monkeypatch, ['my_robot', 'fleet.launch.py', 'use_sim:=true'])
    assert launch_file('fleet.launch', context)[1]


def _including(tmp_path, included, readable=True):
    """
    Build a launch file's description that includes ``included``; return (its path, it).

    As a launch file of ours that includes another would be: the fleet description of
    ``generate`` (the file's ``__file__`` given) with an IncludeLaunchDescription added.
    ``readable``: whether the include can be read before launch (else its path needs a
    launch configuration, and launch cannot list its arguments).
    """
    from launch.actions import IncludeLaunchDescription
    from launch_stand_ins import LaunchDescriptionSource
    from rog_ros.nodes import launching
    path = tmp_path / 'bringup.launch.py'
    path.write_text('# a launch file of ours that includes another\n')
    description = launching.generate(launching.config_file('fleet.yaml'), str(path))
    inner = None
    if readable:
        spec = importlib.util.spec_from_file_location('inc', ROOT / 'launch' / f'{included}.py')
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        inner = module.generate_launch_description()
    description.append(IncludeLaunchDescription(LaunchDescriptionSource(inner)))
    return path, description


def test_an_argument_that_only_an_included_launch_file_declares_is_taken(launch_file, tmp_path,
                                                                         monkeypatch):
    # ros2 launch passes the command line's arguments to the files a launch file includes
    # too: a launch file that includes robot.launch.py takes its role:= (it was refused)
    path, description = _including(tmp_path, 'robot.launch')
    opaque = [e for e in description if type(e).__name__ == 'OpaqueFunction'][0]
    context = _ros2_launch(monkeypatch, [str(path), 'workers:=2', 'role:=server'])
    made = opaque.kwargs['function'](context)
    assert [e.kwargs['name'] for e in made if type(e).__name__ == 'Node'] == [
        'rog_server', 'rog_worker_0', 'rog_worker_1', 'netmon']
    # a typo is still refused, named with the closest of all those declared
    context = _ros2_launch(monkeypatch, [str(path), 'workers:=2', 'rol:=server'])
    with pytest.raises(ValueError, match=r'^bringup.launch.py has no launch argument '
                                         r'rol:=server \(did you mean role\?\); '):
        opaque.kwargs['function'](context)


def test_an_include_that_cannot_be_read_before_launch_refuses_nothing(launch_file, tmp_path,
                                                                      monkeypatch):
    # its path needs a launch configuration: the arguments it declares are unknown
    path, description = _including(tmp_path, 'robot.launch', readable=False)
    opaque = [e for e in description if type(e).__name__ == 'OpaqueFunction'][0]
    context = _ros2_launch(monkeypatch, [str(path), 'workers:=2', 'camera:=front'])
    assert len([e for e in opaque.kwargs['function'](context)
                if type(e).__name__ == 'Node']) == 4


def test_the_arguments_of_every_include_read_anew_at_each_look_are_taken(
        launch_file, tmp_path, monkeypatch):
    # launch loads an included file again at each look (new objects every time): the walk
    # took an object of a later include for one it had seen, at the address of one freed
    # since, and refused camera:= and lidar:=, which their files declare
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
    from launch_stand_ins import LaunchDescriptionSource
    path, description = _including(tmp_path, 'robot.launch')
    loads = []

    def _file(name):
        """Return a loader of a launch file that declares ``name``, counting its loads."""
        def _load():
            """Make the file's description anew, as launch's file sources do."""
            loads.append(name)
            return LaunchDescription([DeclareLaunchArgument(name)])
        return _load
    for name in ('camera', 'lidar', 'gps'):
        description.append(IncludeLaunchDescription(LaunchDescriptionSource(_file(name))))
    opaque = [e for e in description if type(e).__name__ == 'OpaqueFunction'][0]
    context = _ros2_launch(monkeypatch, [str(path), 'workers:=2', 'role:=server',
                                         'camera:=front', 'lidar:=top', 'gps:=on'])
    made = opaque.kwargs['function'](context)
    assert len([e for e in made if type(e).__name__ == 'Node']) == 4
    assert sorted(loads) == ['camera', 'gps', 'lidar']      # each file read once
    context = _ros2_launch(monkeypatch, [str(path), 'workers:=2', 'camra:=front'])
    with pytest.raises(ValueError, match=r'camra:=front \(did you mean camera\?\)'):
        opaque.kwargs['function'](context)


@pytest.mark.parametrize('words', [
    # ros2 launch --launch-prefix P adds launch-prefix:=P (and launch-prefix-filter:=F) to the
    # launch arguments (ros2launch.api.launch_a_launch_file, Humble on)
    ['--launch-prefix', 'xterm -e gdb --args', '--launch-prefix-filter', 'rog_worker',
     'rog_ros', 'NAME', 'workers:=2', 'launch-prefix:=xterm -e gdb --args',
     'launch-prefix-filter:=rog_worker'],
    # launch configurations that launch and launch_ros read themselves, undeclared
    ['rog_ros', 'NAME', 'workers:=2', 'launch-prefix:=nice -n 5', 'emulate_tty:=false',
     'ros_namespace:=/lab'],
])
@pytest.mark.parametrize('name', ['fleet', 'robot'])
def test_launch_arguments_that_ros2_launch_itself_takes_are_not_refused(launch_file,
                                                                        monkeypatch, words,
                                                                        name):
    words = [f'{name}.launch.py' if w == 'NAME' else w for w in words]
    if name == 'robot':
        words += ['role:=server']
    context = _ros2_launch(monkeypatch, words)
    _, nodes, _ = launch_file(f'{name}.launch', context)
    assert nodes
    # a typo next to them is still refused, and only the typo is named
    context = _ros2_launch(monkeypatch, words + ['stalenes:=3'])
    with pytest.raises(ValueError, match=f'^{name}.launch.py has no launch argument '
                                         r'stalenes:=3 \(did you mean staleness\?\); '):
        launch_file(f'{name}.launch', context)


def test_a_value_with_colon_equals_and_an_argument_given_twice_are_taken(launch_file,
                                                                         monkeypatch):
    # as ros2 launch reads them: name up to the first ':=', and the last of two wins
    context = _ros2_launch(monkeypatch, ['rog_ros', 'fleet.launch.py', 'staleness:=2',
                                         'out:=/tmp/a:=b', 'staleness:=3'])
    _, nodes, _ = launch_file('fleet.launch', context)
    server = _flags([n for n in nodes if n['name'] == 'rog_server'][0])
    assert (server['staleness'], server['out']) == ('3', '/tmp/a:=b')
    # an unknown name is named once, with its value up to the end
    context = _ros2_launch(monkeypatch, ['rog_ros', 'fleet.launch.py', 'outt:=x:=y',
                                         'outt:=z'])
    with pytest.raises(ValueError, match=r'^fleet.launch.py has no launch argument outt:=z '
                                         r'\(did you mean out\?\); '):
        launch_file('fleet.launch', context)


def test_user_environment_wins_and_peers_join_it(monkeypatch):
    user = {'RMW_IMPLEMENTATION': 'rmw_fastrtps_cpp', 'CYCLONEDDS_URI': 'file:///mine.xml'}
    assert robot.robot_environment(user) == {}
    # server_host and peers were dropped when the user (or the image) set CYCLONEDDS_URI
    assert robot.robot_environment(user, '10.0.0.1') == {
        'CYCLONEDDS_URI': 'file:///mine.xml,<Discovery><Peers><Peer address="10.0.0.1:7510"/>'
                          '</Peers></Discovery>'}


def test_robot_launch_adds_its_peers_to_the_users_cyclone_uri(launch_file, monkeypatch):
    monkeypatch.setenv('CYCLONEDDS_URI', 'file:///etc/rog/cyclonedds.xml')
    _, _, env = launch_file('robot.launch', role='worker', rank='0', workers='2',
                            server_host='10.0.0.10', peers='10.0.0.11')
    assert env['CYCLONEDDS_URI'] == (
        'file:///etc/rog/cyclonedds.xml,<Discovery><Peers><Peer address="10.0.0.11"/>'
        '<Peer address="10.0.0.10:7510"/></Peers></Discovery>')


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
    (['--role', 'server', '--namespace', 'dupx'], 'namespace (--namespace)'),
    (['--role', 'server', '--server-timeout', '5'], '--server-timeout applies to --role worker'),
    (['--role', 'worker', '--rank', '0', '--server-timeout', '-1'], 'server_timeout'),
    (['--role', 'worker', '--rank', '0', '--netmon', 'false', '--interface', 'wlan0'],
     'with --netmon false no netmon runs'),
    (['--role', 'server', '--config', 'nope.yaml'], 'rog robot: --config nope.yaml: no such file'),
])
def test_rog_robot_refuses_bad_options_in_one_line(argv, message, capsys, monkeypatch, tmp_path):
    from rog_ros import cli
    monkeypatch.chdir(tmp_path)
    assert cli.main(['robot'] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith('rog robot: ') and message in err[0]
    assert not list(tmp_path.iterdir())                     # nothing started, no logs


@pytest.mark.parametrize('argv, said', [
    # before: started as if they were not there (only the server robot reads them)
    (['--role', 'worker', '--rank', '0', '--iterations', '500'],
     '--iterations applies to the server robot; no node of a worker robot reads it'),
    (['--role', 'worker', '--rank', '0', '--out', 'runs/x'], '--out applies to the server'),
    (['--role', 'worker', '--rank', '1', '--min-workers', '2'], '--min-workers applies to'),
    (['--role', 'server', '--device', 'cpu'],
     '--device applies to worker robots; no node of a server robot reads it: leave it out'),
])
def test_rog_robot_refuses_a_flag_no_node_of_its_role_reads(argv, said, capsys, monkeypatch,
                                                            tmp_path):
    from rog_ros import cli

    def no_process(*args, **kwargs):
        raise AssertionError('a node started although the flag was not for this robot')
    monkeypatch.setattr('subprocess.Popen', no_process)
    monkeypatch.chdir(tmp_path)
    assert cli.main(['robot'] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f'rog robot: {said}'), err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize('argv, said', [
    (['--server-host', '127.0.0.1:99999'], "--server-host '127.0.0.1:99999': not an address"),
    (['--peers', '127.0.0.1,localhost:0'], "--peers 'localhost:0': not an address DDS can use"),
    (['--peers', 'no-such-host.invalid'], "--peers 'no-such-host.invalid': not an address"),
])
def test_rog_robot_refuses_a_peer_address_dds_would_abort_on(argv, said, capsys, monkeypatch,
                                                             tmp_path):
    # before: a port over 65535 passed; both nodes died of SIGABRT (status 250, 9 lines)
    from rog_ros import cli

    def no_process(*args, **kwargs):
        raise AssertionError('a node started although the address was bad')
    monkeypatch.setattr('subprocess.Popen', no_process)
    monkeypatch.chdir(tmp_path)
    assert cli.main(['robot', '--role', 'worker', '--rank', '0'] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f'rog robot: {said}'), err
    assert not list(tmp_path.iterdir())


class Exited:
    """Stand-in for launch's ProcessExited event."""

    def __init__(self, returncode):
        self.returncode = returncode


def _handler(entity):
    """Return the on_exit callable and target Node of a RegisterEventHandler stand-in."""
    on_process_exit = entity.args[0]
    return on_process_exit.kwargs['on_exit'], on_process_exit.kwargs['target_action']


def test_robot_launch_respawns_a_crashed_training_node_a_bounded_number_of_times(
        launch_file, tmp_path):
    # Prepare: a worker robot with two restarts and a state directory
    _, nodes, _ = launch_file('robot.launch', role='worker', rank='1', workers='2',
                              respawn='2', state_dir=str(tmp_path))
    made = launch_file.made
    handlers = [e for e in made if type(e).__name__ == 'RegisterEventHandler']
    assert len(handlers) == 1                                   # the worker, not netmon
    on_exit, target = _handler(handlers[0])
    assert target.kwargs['name'] == 'rog_worker_1'
    # Execute / Assert: a finished, stopped or misconfigured node stays down
    for code in (0, 2, -2, -15, 130, 143):
        assert on_exit(Exited(code), None) is None, code
    # an out-of-memory kill restarts it after the delay, with a handler of its own
    log, timer = on_exit(Exited(-9), None)
    assert 'killed by SIGKILL' in log.kwargs['msg'] and '1 more' in log.kwargs['msg']
    assert timer.kwargs['period'] > 0
    again, watch = timer.kwargs['actions']
    assert again.kwargs == target.kwargs and again is not target
    on_exit_again, target_again = _handler(watch)
    assert target_again is again
    log, _ = on_exit_again(Exited(1), None)                     # an exception: the last one
    assert 'status 1' in log.kwargs['msg'] and '0 more' in log.kwargs['msg']
    (last,) = on_exit_again(Exited(-11), None)                  # the limit is spent
    assert type(last).__name__ == 'LogInfo' and 'used up' in last.kwargs['msg']


def test_robot_launch_without_respawn_registers_no_handler(launch_file):
    launch_file('robot.launch', role='server', workers='2')
    assert not [e for e in launch_file.made if type(e).__name__ == 'RegisterEventHandler']


@pytest.mark.parametrize('values,message', [
    ({'role': 'server', 'workers': '2', 'respawn': '3'}, 'start the run over'),
    ({'role': 'worker', 'rank': '0', 'workers': '2', 'respawn': '1'}, 'lose the gradients'),
    ({'role': 'worker', 'rank': '0', 'workers': '2', 'respawn': 'yes'}, 'number of restarts'),
    ({'role': 'worker', 'rank': '0', 'workers': '2', 'respawn': '-1'}, 'respawn must be in'),
])
def test_respawn_without_a_state_dir_or_with_a_bad_count_is_refused(launch_file, values,
                                                                    message):
    with pytest.raises(ValueError, match=message):
        launch_file('robot.launch', **values)


class FakeSupervisor:
    """Exit codes of successive runs of the training node, and the restarts asked for."""

    def __init__(self, codes):
        self.runs, self.restarts = list(codes), 0

    def codes(self):
        return {'rog_worker_0': self.runs[0]}

    def restart(self, name):
        assert name == 'rog_worker_0'
        self.runs.pop(0)
        self.restarts += 1


@pytest.mark.parametrize('codes,limit,restarts,status', [
    ([-9, -11, 0], 3, 2, 0),        # two crashes, then it finishes
    ([-9, -9, -9, -9], 2, 2, -9),   # the limit is spent: the crash is the status
    ([1, 0], 0, 0, 1),              # respawn off
    ([2], 5, 0, 2),                 # bad settings: restarting cannot help
    ([3], 5, 0, 3),                 # training diverged: restarted, it would diverge again
    ([0], 5, 0, 0),
    ([129], 5, 0, 129),             # hung up (its session ended): stopped, not crashed
    ([-1], 5, 0, -1),
])
def test_rog_robot_restarts_only_crashes_and_at_most_respawn_times(codes, limit, restarts,
                                                                   status, capsys):
    sup = FakeSupervisor(codes)
    assert robot.watch(sup, 'rog_worker_0', limit, sleep=lambda s: None) == status
    assert sup.restarts == restarts
    assert capsys.readouterr().err.count('restarting it from its state') == restarts


def test_rog_robot_refuses_respawn_without_state_dir(capsys, monkeypatch, tmp_path):
    from rog_ros import cli
    monkeypatch.chdir(tmp_path)
    assert cli.main(['robot', '--role', 'server', '--respawn', '2']) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'respawn needs state_dir' in err[0]
    assert not list(tmp_path.iterdir())


def _stand_in_supervisors(monkeypatch, tmp_path) -> list:
    """
    Run ``rog robot`` without processes, in ``tmp_path``; return what each start found.

    Each start appends ``(node specs, resuming, node logs in its log folder then)`` and every
    node exits 0 at once: the earlier run must be set aside before the logs start afresh.
    """
    from rog_ros.nodes import supervisor
    seen = []

    class Started:
        """Stand-in supervisor whose nodes all exit 0 at once."""

        def __init__(self, specs, logs, env):
            self.specs, self.logs = list(specs), Path(logs)

        def start(self, resuming=None):
            """Record the nodes, the resume, and the logs already there."""
            seen.append((self.specs, resuming, sorted(p.name for p in self.logs.glob('*.log'))))

        def codes(self):
            """Say every node exited 0."""
            return {s.name: 0 for s in self.specs}

        def stop(self):
            """Stop nothing."""
    monkeypatch.setattr(supervisor, 'Supervisor', Started)
    monkeypatch.chdir(tmp_path)
    return seen


@pytest.fixture
def started_robots(monkeypatch, tmp_path):
    """Run ``rog robot`` without processes, in ``tmp_path``; return what each start found."""
    return _stand_in_supervisors(monkeypatch, tmp_path)


def test_rog_robot_worker_leaves_its_model_in_a_file(started_robots, tmp_path, capsys,
                                                     monkeypatch):
    """./rog_robot_model.pt unless told; a folder given with a trailing / gets model.pt."""
    from rog_ros import cli
    from rog_ros.nodes import supervisor
    from rog_ros.nodes.model_file import model_out_file
    worker = ['robot', '--role', 'worker', '--rank', '1', '--workers', '2']
    assert cli.main(worker) == 0
    assert cli.main(worker + ['--model-out', 'models' + os.sep]) == 0
    assert [specs[0].parameters['model_out'] for specs, _, _ in started_robots] == [
        str(tmp_path / 'rog_robot_model.pt'), str(tmp_path / 'models') + os.sep]

    class Writing(supervisor.Supervisor):
        """Stand-in supervisor whose worker node writes its model, as when training ends."""

        def start(self, resuming=None):
            """Start, and write the model where the worker node was told to."""
            super().start(resuming)
            path = Path(model_out_file(self.specs[0].parameters['model_out']))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b'x')
    monkeypatch.setattr(supervisor, 'Supervisor', Writing)
    assert cli.main(worker + ['--model-out', 'models' + os.sep]) == 0
    assert f"this robot's model: {tmp_path / 'models' / 'model.pt'}" in capsys.readouterr().err


def test_rog_robot_gives_its_own_nodes_the_robots_settings(started_robots, monkeypatch):
    # a robot that leaves coverage for minutes, or whose Wi-Fi is not the interface netmon
    # picks: before, only a --config file could say so
    from rog_ros import cli
    from rog_ros.nodes import linkprobe
    monkeypatch.setattr(linkprobe, 'read_counters', lambda: {'wlan1': (0, 0), 'lo': (0, 0)})

    def parameters():
        return {s.executable: s.parameters for s in started_robots[-1][0]}
    assert cli.main(['robot', '--role', 'worker', '--rank', '1', '--workers', '2',
                     '--server-timeout', '600', '--interface', 'wlan1']) == 0
    seen = parameters()
    assert seen['rog_worker']['server_timeout'] == 600.0
    assert seen['netmon']['interface'] == 'wlan1'
    assert 'interface' not in seen['rog_worker'] and 'server_timeout' not in seen['netmon']
    assert cli.main(['robot', '--role', 'worker', '--rank', '1', '--workers', '2']) == 0
    seen = parameters()
    assert seen['rog_worker']['server_timeout'] == 120.0 and seen['netmon']['interface'] == 'auto'


def _earlier_server_run(out: Path, logs: Path = None) -> None:
    """Leave what a finished server robot run leaves in ``out``: results, logs, a note."""
    logs = logs or out / 'logs'
    logs.mkdir(parents=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / 'summary.json').write_text('{"completed": true}')
    (out / 'model.pt').write_bytes(b'earlier model')
    (logs / 'rog_server.log').write_text('earlier server log\n')
    (logs / 'netmon.log').write_text('earlier netmon log\n')
    (out / 'notes.txt').write_text("the user's own")


def _starts(seen) -> list:
    """Return ``(resuming, logs found)`` of each start: what the set-aside tests compare."""
    return [(resuming, found) for _, resuming, found in seen]


def test_a_rerun_of_the_server_robot_keeps_the_earlier_run_s_logs(started_robots, tmp_path,
                                                                  capsys):
    # before, the server robot's supervisor started OUT/logs afresh and only the server node
    # moved the results: the earlier run's logs were lost, as they were in rog fleet
    from rog_ros import cli
    out = tmp_path / 'run'
    _earlier_server_run(out)
    # Execute
    assert cli.main(['robot', '--role', 'server', '--workers', '2', '--out', 'run']) == 0
    # Assert: moved before the nodes started, said in rog fleet's words
    assert _starts(started_robots) == [('', [])]
    previous = out / 'previous'
    assert (previous / 'logs' / 'rog_server.log').read_text() == 'earlier server log\n'
    assert sorted(p.name for p in (previous / 'logs').iterdir()) == ['netmon.log',
                                                                     'rog_server.log']
    assert (previous / 'summary.json').exists() and (out / 'notes.txt').exists()
    assert (f'rog robot: {out} held an earlier run; its results and logs moved to '
            f'{previous}\n') in capsys.readouterr().err


def test_a_server_robot_moves_its_own_logs_from_its_logs_folder_only(started_robots, tmp_path,
                                                                     capsys):
    # before, the server robot moved every node log in OUT/logs, whatever its --logs: the
    # earlier run's logs in --logs were overwritten, and a worker robot's live log on the
    # same machine, pointed at OUT/logs, was moved from under it
    from rog_ros import cli
    out, logs = tmp_path / 'run', tmp_path / 'mylogs'
    _earlier_server_run(out, logs)
    (logs / 'rog_worker_1.log').write_text('a worker robot writes here\n')
    (out / 'logs').mkdir()
    with open(out / 'logs' / 'rog_worker_0.log', 'a') as live:   # a worker robot's, running
        live.write('before\n')
        (out / 'logs' / 'netmon_0.log').write_text("its netmon's\n")
        # Execute
        assert cli.main(['robot', '--role', 'server', '--workers', '2', '--out', 'run',
                         '--logs', 'mylogs']) == 0
        live.write('after\n')
    # Assert: this robot's logs moved from --logs before its nodes started; nothing else
    assert _starts(started_robots) == [('', ['rog_worker_1.log'])]
    previous = out / 'previous' / 'logs'
    assert sorted(p.name for p in previous.iterdir()) == ['netmon.log', 'rog_server.log']
    assert (previous / 'rog_server.log').read_text() == 'earlier server log\n'
    assert (out / 'logs' / 'rog_worker_0.log').read_text() == 'before\nafter\n'
    assert sorted(p.name for p in (out / 'logs').iterdir()) == ['netmon_0.log',
                                                                'rog_worker_0.log']
    assert (f'rog robot: {out} held an earlier run; its results and logs moved to '
            f'{out / "previous"}\n') in capsys.readouterr().err


def _state(folder: Path, *names: str) -> None:
    """Leave the state files ``names`` in ``folder`` (zip archives, as ``torch.save`` writes)."""
    folder.mkdir()
    for name in names:
        with zipfile.ZipFile(folder / name, 'w') as archive:
            archive.writestr('data.pkl', b'saved')


def test_a_server_robot_resuming_from_its_state_moves_nothing(started_robots, tmp_path,
                                                              capsys):
    from rog_ros import cli
    out, state = tmp_path / 'run', tmp_path / 'state'
    _earlier_server_run(out)
    _state(state, 'server.pt')
    # Execute
    assert cli.main(['robot', '--role', 'server', '--workers', '2', '--out', 'run',
                     '--state-dir', 'state']) == 0
    # Assert: the run it resumes keeps its results, and its logs go on
    resuming = 'resuming from the state in state (server.pt)'
    assert _starts(started_robots) == [(resuming, ['netmon.log', 'rog_server.log'])]
    assert not (out / 'previous').exists()
    assert f'rog robot: {resuming}; the logs go on' in capsys.readouterr().err


def test_a_server_robot_with_its_workers_state_alone_starts_afresh(started_robots, tmp_path,
                                                                   capsys):
    # a run stopped before the server's first checkpoint leaves the workers' files only; the
    # server then restores nothing and starts a new run: the supervisor said "resuming" and
    # kept the earlier run's logs, which the new run's logs went on after
    from rog_ros import cli
    out, state = tmp_path / 'run', tmp_path / 'state'
    _earlier_server_run(out)
    _state(state, 'worker_0.pt', 'worker_1.pt')
    # Execute
    assert cli.main(['robot', '--role', 'server', '--workers', '2', '--out', 'run',
                     '--state-dir', 'state']) == 0
    # Assert: set aside as any fresh run
    assert _starts(started_robots) == [('', [])]
    assert (out / 'previous' / 'logs' / 'rog_server.log').exists()
    err = capsys.readouterr().err
    assert 'resuming' not in err and f'rog robot: {out} held an earlier run' in err


def _earlier_worker_run(logs: Path, rank: int) -> None:
    """Leave what a worker robot of ``rank`` leaves in ``logs``, beside another's and a note."""
    logs.mkdir()
    (logs / f'rog_worker_{rank}.log').write_text('earlier worker log\n')
    (logs / f'netmon_{rank}.log').write_text('earlier netmon log\n')
    (logs / 'rog_worker_7.log').write_text("another robot's\n")
    (logs / 'notes.txt').write_text('mine\n')


def test_a_rerun_of_a_worker_robot_keeps_the_earlier_run_s_logs(started_robots, tmp_path,
                                                                capsys):
    """Move a worker robot's earlier logs to LOGS/previous, its rank's only, in one line."""
    # before, the worker robot's supervisor started ./rog_robot_logs afresh: the log of the
    # run that went wrong was overwritten by the rerun meant to look into it
    from rog_ros import cli
    logs = tmp_path / 'rog_robot_logs'
    _earlier_worker_run(logs, 1)
    worker = ['robot', '--role', 'worker', '--rank', '1', '--workers', '2']
    # Execute
    assert cli.main(worker) == 0
    # Assert: this rank's logs moved before its nodes started, said in one line
    assert _starts(started_robots) == [('', ['rog_worker_7.log'])]
    previous = logs / 'previous'
    assert sorted(p.name for p in previous.iterdir()) == ['netmon_1.log', 'rog_worker_1.log']
    assert (previous / 'rog_worker_1.log').read_text() == 'earlier worker log\n'
    assert sorted(p.name for p in logs.iterdir() if p.is_file()) == [
        '.rog_worker_1.lock', 'notes.txt', 'rog_worker_7.log']
    said = [line for line in capsys.readouterr().err.splitlines() if 'earlier' in line]
    assert said == [f"rog robot: {logs} held an earlier run's logs (netmon_1.log, "
                    f'rog_worker_1.log); moved to {previous}']
    # Execute: a third run replaces the older logs in previous, netmon's too (none now)
    (logs / 'rog_worker_1.log').write_text('second worker log\n')
    assert cli.main(worker + ['--netmon', 'false']) == 0
    assert sorted(p.name for p in previous.iterdir()) == ['rog_worker_1.log']
    assert (previous / 'rog_worker_1.log').read_text() == 'second worker log\n'
    assert '(the older ones there are replaced)' in capsys.readouterr().err


def test_a_worker_robot_resuming_from_its_state_keeps_its_logs_going(started_robots, tmp_path,
                                                                     capsys):
    """Move nothing when the worker restores its own state file: its logs go on."""
    from rog_ros import cli
    logs, state = tmp_path / 'rog_robot_logs', tmp_path / 'state'
    _earlier_worker_run(logs, 1)
    _state(state, 'worker_0.pt', 'worker_1.pt', 'server.pt')
    worker = ['robot', '--role', 'worker', '--workers', '2', '--state-dir', 'state']
    # Execute
    assert cli.main(worker + ['--rank', '1']) == 0
    # Assert: its node restores worker_1.pt; the logs of the run it resumes go on
    resuming = 'resuming from the state in state (worker_1.pt)'
    assert _starts(started_robots) == [
        (resuming, ['netmon_1.log', 'rog_worker_1.log', 'rog_worker_7.log'])]
    assert not (logs / 'previous').exists()
    assert f'rog robot: {resuming}; the logs go on' in capsys.readouterr().err
    (state / 'worker_1.pt').unlink()                  # its own file gone: a fresh start
    assert cli.main(worker + ['--rank', '1']) == 0
    assert _starts(started_robots)[1] == ('', ['rog_worker_7.log'])


def test_a_rerun_of_a_worker_robot_sets_its_earlier_model_aside_with_its_logs(
        started_robots, tmp_path, capsys):
    """Move the earlier model to LOGS/previous with the logs, as the server's model.pt moves."""
    # before, ./rog_robot_model.pt stayed: a rerun that ended before writing its own left the
    # earlier run's model where `this robot's model` points, and a finished one replaced it
    from rog_ros import cli
    logs, previous = tmp_path / 'rog_robot_logs', tmp_path / 'rog_robot_logs' / 'previous'
    _earlier_worker_run(logs, 1)
    (tmp_path / 'rog_robot_model.pt').write_bytes(b'earlier model')
    worker = ['robot', '--role', 'worker', '--rank', '1', '--workers', '2']
    # Execute
    assert cli.main(worker) == 0
    # Assert: the model went with the logs as its rank's, said in the same line
    assert sorted(p.name for p in previous.iterdir()) == [
        'netmon_1.log', 'rog_worker_1.log', 'rog_worker_1.model.pt']
    assert (previous / 'rog_worker_1.model.pt').read_bytes() == b'earlier model'
    assert not (tmp_path / 'rog_robot_model.pt').exists()
    said = [line for line in capsys.readouterr().err.splitlines() if 'earlier' in line]
    assert said == [f"rog robot: {logs} held an earlier run's logs (netmon_1.log, "
                    f'rog_worker_1.log), moved to {previous}, and '
                    f"{tmp_path / 'rog_robot_model.pt'} its model, moved to {previous} as "
                    'rog_worker_1.model.pt']
    # Execute: a model alone (a folder's model.pt) replaces the older model of the rank only
    (tmp_path / 'models').mkdir()
    (tmp_path / 'models' / 'model.pt').write_bytes(b'second model')
    assert cli.main(worker + ['--model-out', 'models' + os.sep]) == 0
    assert sorted(p.name for p in previous.iterdir()) == [
        'netmon_1.log', 'rog_worker_1.log', 'rog_worker_1.model.pt']
    assert (previous / 'rog_worker_1.model.pt').read_bytes() == b'second model'
    assert not (tmp_path / 'models' / 'model.pt').exists()
    assert [line for line in capsys.readouterr().err.splitlines() if 'earlier' in line] == [
        f"rog robot: {tmp_path / 'models' / 'model.pt'} is an earlier run's model; moved to "
        f'{previous} as rog_worker_1.model.pt (the older ones there are replaced)']


def _toy_model(path: Path) -> None:
    """Write a state_dict that fits workload toy to ``path`` (a worker's earlier model)."""
    from rog_ros.nodes.assembly import load_workload
    from rog_ros.nodes.model_file import save_state_dict
    save_state_dict(path, load_workload('toy').make_model())


def test_a_worker_robot_s_failed_rerun_keeps_the_last_model_aside(started_robots, tmp_path):
    """Keep the last model in LOGS/previous when reruns leave logs but no model."""
    # before, the second rerun after a run that wrote no model deleted the model kept in
    # previous/ (rog_robot_model.pt there) while it moved that run's logs
    from rog_ros import cli
    logs, previous = tmp_path / 'rog_robot_logs', tmp_path / 'rog_robot_logs' / 'previous'
    _earlier_worker_run(logs, 0)
    (tmp_path / 'rog_robot_model.pt').write_bytes(b'good model')
    worker = ['robot', '--role', 'worker', '--rank', '0', '--workers', '2']
    # Execute: a rerun sets the good run aside; it fails, leaving a log; another rerun
    assert cli.main(worker) == 0
    (logs / 'rog_worker_0.log').write_text('failed run\n')
    assert cli.main(worker) == 0
    # Assert
    assert sorted(p.name for p in previous.iterdir()) == ['rog_worker_0.log',
                                                          'rog_worker_0.model.pt']
    assert (previous / 'rog_worker_0.log').read_text() == 'failed run\n'
    assert (previous / 'rog_worker_0.model.pt').read_bytes() == b'good model'


def test_a_worker_robot_goes_on_from_its_own_model(started_robots, tmp_path, capsys):
    """Copy the model aside, not move it, when the rerun's --init-model is that file."""
    # before, the model went to previous/ before the node started from it, and the worker
    # exited with `--init-model: no such file: ./rog_robot_model.pt`
    from rog_ros import cli
    model, previous = tmp_path / 'rog_robot_model.pt', tmp_path / 'rog_robot_logs' / 'previous'
    _toy_model(model)
    earlier = model.read_bytes()
    worker = ['robot', '--role', 'worker', '--rank', '0', '--workers', '2', '--workload', 'toy',
              '--init-model', './rog_robot_model.pt']
    # Execute
    assert cli.main(worker) == 0
    # Assert: the node finds its model; a copy is in previous/, said so
    assert started_robots[0][0][0].parameters['init_model'] == './rog_robot_model.pt'
    assert model.read_bytes() == earlier
    assert (previous / 'rog_worker_0.model.pt').read_bytes() == earlier
    assert [line for line in capsys.readouterr().err.splitlines() if 'earlier' in line] == [
        f"rog robot: {model} is an earlier run's model; copied to {previous} as "
        'rog_worker_0.model.pt (this run starts from it)']


def test_worker_robots_sharing_logs_keep_each_their_model_aside(started_robots, tmp_path):
    """Keep both ranks' models in a shared LOGS/previous though both are named model.pt."""
    # before, previous/ kept them as model.pt: rank 1's rerun replaced rank 0's model
    from rog_ros import cli
    previous = tmp_path / 'rog_robot_logs' / 'previous'
    for rank in (0, 1):
        (tmp_path / f'r{rank}').mkdir()
        (tmp_path / f'r{rank}' / 'model.pt').write_bytes(f'model {rank}'.encode())
    # Execute
    for rank in (0, 1):
        assert cli.main(['robot', '--role', 'worker', '--rank', str(rank), '--workers', '2',
                         '--model-out', f'r{rank}' + os.sep]) == 0
    # Assert
    assert sorted(p.name for p in previous.iterdir()) == ['rog_worker_0.model.pt',
                                                          'rog_worker_1.model.pt']
    assert [(previous / f'rog_worker_{rank}.model.pt').read_bytes() for rank in (0, 1)] == [
        b'model 0', b'model 1']


def test_a_worker_robot_resuming_from_its_state_keeps_its_model(started_robots, tmp_path):
    """Move no model when the worker restores its own state file: its run goes on."""
    from rog_ros import cli
    _state(tmp_path / 'state', 'worker_1.pt')
    (tmp_path / 'rog_robot_model.pt').write_bytes(b'model of the run it resumes')
    worker = ['robot', '--role', 'worker', '--rank', '1', '--workers', '2']
    # Execute
    assert cli.main(worker + ['--state-dir', 'state']) == 0
    # Assert: nothing moved
    assert (tmp_path / 'rog_robot_model.pt').read_bytes() == b'model of the run it resumes'
    assert not (tmp_path / 'rog_robot_logs' / 'previous').exists()


def test_a_worker_robot_moves_no_log_another_robot_of_its_rank_writes(
        started_robots, tmp_path, capsys):
    """Refuse a second worker robot of a rank on one --logs, moving nothing, in one line."""
    # the lock a running worker robot of rank 1 holds on its log: a second one (another
    # terminal) moved its live log to previous/ and then wrote over it. The refusal said to
    # give it another --logs, also to a second robot started with a copied --rank
    from rog_ros import cli
    from rog_ros.nodes.run_outputs import NodeLogLock
    logs = tmp_path / 'rog_robot_logs'
    _earlier_worker_run(logs, 1)
    running = NodeLogLock.take(str(logs), 'rog_worker_1', 'rog robot --role worker --rank 1')
    worker = ['robot', '--role', 'worker', '--workers', '2']
    try:
        # Execute
        assert cli.main(worker + ['--rank', '1']) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert cli.main(worker + ['--rank', '0']) == 0    # another rank: its own log
    finally:
        running.release()
    # Assert: refused in one line, nothing started or moved; rank 0 had nothing to move
    assert len(err) == 1 and err[0].startswith(
        f'rog robot: {logs}/rog_worker_1.log is being written by another run (rog robot '
        f'--role worker --rank 1, pid {os.getpid()}, since ')
    assert err[0].endswith('if this is another robot, give it a rank of its own (--rank: '
                           '0..workers-1, each once; two robots of rank 1 would keep '
                           'replacing each other)'), err
    assert _starts(started_robots) == [('', ['netmon_1.log', 'rog_worker_1.log',
                                             'rog_worker_7.log'])]
    assert not (logs / 'previous').exists()
    assert cli.main(worker + ['--rank', '1']) == 0     # let go: the rerun goes ahead
    assert (logs / 'previous' / 'rog_worker_1.log').exists()


@pytest.mark.parametrize('signum, status, said', [
    (15, 143, 'terminated (SIGTERM)'), (1, 129, 'hung up (SIGHUP)')])
def test_rog_robot_stopped_by_sigterm_says_so_and_exits_143(started_robots, monkeypatch,
                                                            capsys, signum, status, said):
    from rog_ros import cli
    from rog_ros.nodes import robot

    def terminated(*args):
        raise cli.Terminated(signum)
    monkeypatch.setattr(robot, 'watch', terminated)
    assert cli.main(['robot', '--role', 'worker', '--rank', '0', '--workers', '2']) == status
    err = capsys.readouterr().err
    assert f'rog robot: {said}; stopped rog_worker_0, netmon_0' in err
    assert 'exited with' not in err


_LAUNCH_WITHOUT_TORCH = """
import importlib.util, sys, types

class Recorded:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

def action(attr):
    if attr.startswith('__'):
        raise AttributeError(attr)
    return type(attr, (Recorded,), {})

def standin(name):
    mod = types.ModuleType(name)
    mod.__getattr__ = action
    sys.modules[name] = mod
    return mod

for name in ('launch', 'launch.actions', 'launch.event_handlers', 'launch.substitutions',
             'launch_ros', 'launch_ros.actions'):
    standin(name)
sys.modules['launch'].LaunchDescription = list

class LaunchConfiguration(Recorded):
    def perform(self, context):
        return context.get(self.args[0], '')

sys.modules['launch.substitutions'].LaunchConfiguration = LaunchConfiguration
made = []
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location('launch_file', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    opaque = [e for e in module.generate_launch_description()
              if type(e).__name__ == 'OpaqueFunction'][0]
    values = {'role': 'worker', 'rank': '1', 'workers': '3'} if 'robot' in path else {}
    made += opaque.kwargs['function'](values)
nodes = [e.kwargs['executable'] for e in made if type(e).__name__ == 'Node']
print(len(nodes), nodes[:2], 'torch' in sys.modules)
"""


def test_launch_processes_do_not_import_torch():
    """A launch process lives as long as the nodes it started and trains nothing."""
    import subprocess
    files = [str(ROOT / 'launch' / f'{name}.launch.py')
             for name in ('robot', 'fleet', 'mpcol', 'eacol')]
    out = subprocess.run([sys.executable, '-c', _LAUNCH_WITHOUT_TORCH] + files,
                         capture_output=True, text=True, check=True, cwd=str(ROOT)).stdout
    # a worker robot's 2 nodes, then 3 fleets of a server, 3 or 4 workers and netmon
    assert out.strip() == "18 ['rog_worker', 'netmon'] False", out


def test_a_launch_config_with_a_section_it_would_not_apply_is_refused(tmp_path):
    # config:= of the launch files goes through the same plan as rog fleet/robot --config: a
    # node-name section was ignored there without a word
    from rog_ros.nodes import launching
    cfg = tmp_path / 'robots.yaml'
    cfg.write_text('rog_worker_1:\n  ros__parameters:\n    trace: outdoors\n')
    for specs in (lambda: launching.node_specs({'config': str(cfg)}, ''),
                  lambda: launching.robot_node_specs({'config': str(cfg), 'role': 'worker',
                                                      'rank': '1'}, '')):
        with pytest.raises(ValueError, match="section 'rog_worker_1': rog fleet, rog robot "
                                             'and the launch files apply'):
            specs()
