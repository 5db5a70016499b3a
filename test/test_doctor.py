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
"""``rog doctor``: each check finds what it is for, and a broken check does not stop the rest."""

import json
import os

import pytest
from rog_ros import cli
from rog_ros.nodes import doctor, doctor_checks, doctor_dds, doctor_graph
from rog_ros.nodes.doctor_checks import Finding


def _by_check(found):
    return {f.check: f for f in found}


def test_report_shows_fixes_for_what_is_not_ok_and_a_verdict():
    found = [Finding('python', 'ok', 'Python 3.11', 'never shown'),
             Finding('rmem_max', 'warn', 'small', 'sysctl'),
             Finding('dds', 'fail', 'no round trip', 'fix DDS')]
    text = doctor.format_report(found)
    assert 'never shown' not in text and '-> sysctl' in text and '-> fix DDS' in text
    assert text.splitlines()[-1] == '1 failed, 1 warnings: not ready: fix the failures above'
    ok = doctor.format_report(found[:2]).splitlines()[-1]
    assert ok == '0 failed, 1 warnings: ready (see the warnings above)'


def test_a_check_that_breaks_is_a_failure_and_the_others_still_run():
    def _broken():
        raise RuntimeError('boom')

    found = doctor.diagnose((_broken, doctor_checks.check_python))
    assert [(f.check, f.level) for f in found] == [('broken', 'fail'), ('python', 'ok')]
    assert 'RuntimeError: boom' in found[0].detail


@pytest.mark.parametrize('version, parsed', [
    ('2.13.0+cpu', (2, 13)), ('2.1.0a0+41361538.nv23.06', (2, 1)), ('1.13.1', (1, 13)),
])
def test_torch_versions_of_jetson_wheels_are_read(version, parsed):
    assert doctor_checks._version_tuple(version) == parsed


def test_torch_line_says_where_workers_compute(tmp_path, monkeypatch):
    import torch
    monkeypatch.setattr(doctor_checks, 'TEGRA_RELEASE', str(tmp_path / 'no_tegra'))
    monkeypatch.setattr(torch, '__version__', '2.13.0+cpu')
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'get_device_name', lambda index=0: 'Xavier')
    (found,) = doctor_checks.check_torch()
    assert found.level == 'ok' and 'CUDA: Xavier; workers compute gradients there' in found.detail
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    (found,) = doctor_checks.check_torch()
    assert found.level == 'ok' and 'CPU only' in found.detail


@pytest.mark.parametrize('tegra, version', [
    (True, '2.13.0+cpu'), (False, '2.1.0a0+41361538.nv23.06'),
])
def test_a_jetson_whose_torch_sees_no_gpu_is_a_warning(tmp_path, monkeypatch, tegra, version):
    # "ready" with training on a Jetson's CPU is many times slower than it should be
    import torch
    release = tmp_path / 'nv_tegra_release'
    if tegra:
        release.write_text('# R35 (release), REVISION: 4.1\n')
    monkeypatch.setattr(doctor_checks, 'TEGRA_RELEASE', str(release))
    monkeypatch.setattr(torch, '__version__', version)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    (found,) = doctor_checks.check_torch()
    assert found.level == 'warn'
    assert f'torch {version} sees no GPU on this Jetson' in found.detail
    assert 'training would run on the CPU' in found.detail
    assert "NVIDIA's torch wheel" in found.fix and 'docker run --runtime nvidia' in found.fix
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'get_device_name', lambda index=0: 'Orin')
    assert doctor_checks.check_torch()[0].level == 'ok'


class CycloneDDSLoaderException(Exception):  # noqa: N818 - the binding's own name
    """What the Cyclone DDS binding raises when it cannot load libddsc (an Exception only)."""


def _binding_without_its_library(rclpy: bool):
    """Return an ``import_module`` whose Cyclone DDS binding cannot load its C library."""
    def _import(name):
        if name.startswith('cyclonedds'):
            raise CycloneDDSLoaderException('Failed to load CycloneDDS library from '
                                            '/opt/empty/lib/libddsc.so')
        if name == 'rclpy' and not rclpy:
            raise ImportError('No module named rclpy')
        return object()
    return _import


@pytest.mark.parametrize('rclpy, level', [(False, 'fail'), (True, 'warn')])
def test_binding_without_its_c_library_is_unusable_with_the_cyclonedds_home_fix(
        monkeypatch, rclpy, level):
    # a source build with CYCLONEDDS_HOME at a prefix without libddsc (docs/troubleshooting.md,
    # Jetson): one row with its fix, not "the check itself failed"; under ROS 2 a warning
    import types
    monkeypatch.setenv('CYCLONEDDS_HOME', '/opt/empty')
    monkeypatch.setattr(doctor_checks, 'importlib',
                        types.SimpleNamespace(import_module=_binding_without_its_library(rclpy)))
    found = doctor.diagnose((doctor_checks.check_cyclonedds,))
    assert [(f.check, f.level) for f in found] == [('cyclonedds', level)]
    assert 'cannot load its C library' in found[0].detail
    assert 'CYCLONEDDS_HOME=/opt/empty' in found[0].detail
    assert 'set CYCLONEDDS_HOME to the prefix whose lib/ holds libddsc.so' in found[0].fix


def test_the_bindings_own_loader_exception_means_unusable():
    assert doctor_checks.binding_unusable(ImportError('no cyclonedds'))
    assert doctor_checks.binding_unusable(CycloneDDSLoaderException('no libddsc'))
    assert not doctor_checks.binding_unusable(RuntimeError('a real bug'))
    try:
        from cyclonedds.internal import CycloneDDSLoaderException as real
    except ImportError:
        return
    assert doctor_checks.binding_unusable(real('no libddsc'))


NO_TORCH = """
import json, sys
sys.modules['torch'] = None        # import torch raises ImportError, as without torch
from rog_ros.nodes import doctor, doctor_checks
found = doctor.diagnose((doctor_checks.check_torch, doctor_checks.check_cache))
print(json.dumps([(f.check, f.level, f.detail) for f in found]))
"""


def test_without_torch_only_the_torch_check_fails(tmp_path):
    # the cache check needs no torch: one failed row (with its fix), not a second one
    import os
    import subprocess
    import sys
    env = dict(os.environ, ROG_CACHE_DIR=str(tmp_path / 'cache'))
    done = subprocess.run([sys.executable, '-c', NO_TORCH], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [(check, level) for check, level, _ in rows] == [('torch', 'fail'), ('cache', 'info')]
    assert rows[0][2].startswith('cannot import torch')


@pytest.mark.parametrize('value, level', [
    ('ddS', 'fail'), ('', 'fail'), ('none', 'fail'), ('dds', 'ok'), ('auto', 'ok'),
])
def test_rog_bus_that_the_nodes_refuse_fails(monkeypatch, value, level):
    # every node would stop at start with "unknown bus kind": not "ready"
    monkeypatch.setenv('ROG_BUS', value)
    found = _by_check(doctor_checks.check_environment())['ROG_BUS']
    assert found.level == level
    if level == 'fail':
        assert f'unknown bus kind {value!r}' in found.detail
        assert found.fix == 'unset ROG_BUS, or one of auto, dds, rclpy (exactly, lower case)'
    monkeypatch.delenv('ROG_BUS')
    assert 'ROG_BUS' not in _by_check(doctor_checks.check_environment())


def test_rog_bus_rclpy_without_rclpy_fails(monkeypatch):
    from rog_ros.transport import choose
    monkeypatch.setenv('ROG_BUS', 'rclpy')
    monkeypatch.setattr(choose, 'rclpy_available', lambda: False)
    found = _by_check(doctor_checks.check_environment())['ROG_BUS']
    assert found.level == 'fail'
    assert 'stop at start with "ROG_BUS=rclpy: rclpy or the built rog_ros messages do not ' \
        'import"' in found.detail
    _ros_2(monkeypatch, lifecycle=True)                          # Humble or newer
    assert _by_check(doctor_checks.check_environment())['ROG_BUS'].level == 'ok'


def _ros_2(monkeypatch, lifecycle: bool) -> None:
    """Make this Python look like a sourced ROS 2, with or without ``rclpy.lifecycle``."""
    import types
    from rog_ros.nodes import ros_node
    from rog_ros.transport import choose
    monkeypatch.setattr(choose, 'rclpy_available', lambda: True)
    monkeypatch.setattr(ros_node, 'rclpy', types.ModuleType('rclpy'))
    monkeypatch.setattr(ros_node, 'TransitionCallbackReturn', object if lifecycle else None)


def test_rog_bus_rclpy_on_a_ros_2_without_lifecycle_fails_as_the_nodes_do(monkeypatch):
    # Foxy and Galactic: ROG_BUS=rclpy was "ok" while rog_server and rog_worker stopped at
    # start with a usage error (node_main.ros_path)
    from rog_ros.nodes import ros_node
    monkeypatch.setenv('ROG_BUS', 'rclpy')
    _ros_2(monkeypatch, lifecycle=False)
    found = _by_check(doctor_checks.check_environment())['ROG_BUS']
    assert found.level == 'fail'
    assert found.detail.startswith(f'ROG_BUS=rclpy, but {ros_node.missing_ros()}; ')
    assert 'no rclpy.lifecycle (ROS 2 Foxy or Galactic)' in found.detail
    assert 'ROG_BUS=dds' in found.fix


def test_the_doctors_rog_bus_values_are_those_make_bus_accepts(monkeypatch):
    # the buses are stand-ins: only which kinds make_bus takes is checked
    import sys
    import types
    from rog_ros.transport import choose
    for module, cls in (('dds_bus', 'DdsBus'), ('rclpy_bus', 'RclpyBus')):
        fake = types.ModuleType(f'rog_ros.transport.{module}')
        setattr(fake, cls, lambda namespace, _cls=cls, **kwargs: _cls)
        monkeypatch.setitem(sys.modules, f'rog_ros.transport.{module}', fake)
    made = []
    for kind in doctor_checks.ROG_BUS_KINDS:
        monkeypatch.setenv('ROG_BUS', kind)
        made.append(choose.make_bus())
    assert made == ['RclpyBus', 'DdsBus', 'RclpyBus']
    for kind in ('ddS', '', 'none', 'DDS'):
        monkeypatch.setenv('ROG_BUS', kind)
        with pytest.raises(ValueError, match='unknown bus kind'):
            choose.make_bus()


def test_environment_refuses_a_domain_id_outside_ros_range(monkeypatch):
    monkeypatch.setenv('ROS_DOMAIN_ID', '300')
    assert _by_check(doctor_checks.check_environment())['ROS_DOMAIN_ID'].level == 'fail'
    monkeypatch.setenv('ROS_DOMAIN_ID', '42')
    assert _by_check(doctor_checks.check_environment())['ROS_DOMAIN_ID'].level == 'ok'


@pytest.mark.parametrize('value, level', [('212992', 'warn'), ('8388608', 'ok')])
def test_receive_buffer_below_the_wifi_configuration_is_a_warning(tmp_path, monkeypatch, value,
                                                                  level):
    path = tmp_path / 'rmem_max'
    path.write_text(value + '\n')
    monkeypatch.setattr(doctor_checks, 'RMEM_PATH', str(path))
    (found,) = doctor_checks.check_rmem()
    assert found.level == level and value in found.detail
    assert ('sysctl -w net.core.rmem_max=8388608' in found.fix) == (level == 'warn')


def test_cache_that_cannot_be_written_warns_and_an_empty_one_says_what_the_first_run_does(
        tmp_path, monkeypatch):
    from rog_ros.workloads import cache
    monkeypatch.setattr(cache.tempfile, 'gettempdir', lambda: str(tmp_path / 'tmp'))
    blocker = tmp_path / 'file'
    blocker.write_text('not a folder')
    monkeypatch.setenv('ROG_CACHE_DIR', str(blocker))
    (found,) = doctor_checks.check_cache()
    # runs fall back to the temporary folder (configuration.md): not a failure of the robot
    assert found.level == 'warn' and 'ROG_CACHE_DIR' in found.fix
    assert 'temporary folder instead' in found.detail
    assert str(tmp_path / 'tmp' / f'rog_ros_cache_{os.getuid()}') in found.detail
    # a fallback that others may write is not used: every run pre-trains, and it says so
    (tmp_path / 'tmp' / f'rog_ros_cache_{os.getuid()}').mkdir(parents=True, mode=0o777)
    (tmp_path / 'tmp' / f'rog_ros_cache_{os.getuid()}').chmod(0o777)
    (found,) = doctor_checks.check_cache()
    assert found.level == 'warn' and 'every run prepares its workload again' in found.detail
    monkeypatch.setenv('ROG_CACHE_DIR', str(tmp_path / 'cache'))
    (found,) = doctor_checks.check_cache()
    assert found.level == 'info' and 'takes the shipped pre-trained start' in found.detail
    assert list((tmp_path / 'cache').iterdir()) == []        # the write probe is gone


@pytest.mark.parametrize('which, returncode, stderr', [
    (None, 0, ''),
    ('/usr/bin/timedatectl', 1, 'System has not been booted with systemd as init system (PID '
                                "1). Can't operate.\nFailed to connect to bus: Host is down"),
])
def test_a_clock_that_cannot_be_checked_says_so(monkeypatch, which, returncode, stderr):
    # a container without systemd: a line saying so, not a silently missing one
    import subprocess
    monkeypatch.setattr(doctor_checks.shutil, 'which', lambda name: which)
    monkeypatch.setattr(doctor_checks.subprocess, 'run', lambda *a, **k: (
        subprocess.CompletedProcess(a[0], returncode, stdout='', stderr=stderr)))
    (found,) = doctor_checks.check_clock()
    assert (found.check, found.level) == ('clock', 'info')
    assert found.detail.startswith('clock synchronisation could not be checked here (')
    if which is None:
        assert 'no timedatectl here' in found.detail
    else:
        assert 'System has not been booted with systemd' in found.detail
        assert 'Host is down' not in found.detail
    assert found.fix.startswith('on the host: timedatectl show -p NTPSynchronized --value')


def test_fleet_key_unusable_fails_and_absent_is_information(tmp_path, monkeypatch):
    monkeypatch.delenv('ROG_FLEET_KEY', raising=False)
    monkeypatch.setenv('ROG_FLEET_KEY_FILE', str(tmp_path / 'missing.key'))
    (found,) = doctor_checks.check_fleet_key()
    assert found.level == 'fail' and 'missing.key' in found.detail
    monkeypatch.delenv('ROG_FLEET_KEY_FILE')
    (found,) = doctor_checks.check_fleet_key()
    assert found.level == 'info'
    # rog fleet makes a key per run (it said: messages are not authenticated, and the run
    # then recorded authenticated: true)
    assert 'rog fleet makes one per run' in found.detail


def test_fleet_key_line_shows_the_fingerprint_the_nodes_log(tmp_path, monkeypatch):
    from rog_ros.nodes.fleet_key import write_key_file
    key = write_key_file(tmp_path / 'fleet.key')
    monkeypatch.delenv('ROG_FLEET_KEY', raising=False)
    monkeypatch.setenv('ROG_FLEET_KEY_FILE', str(tmp_path / 'fleet.key'))
    (found,) = doctor_checks.check_fleet_key()
    assert (found.level, found.detail) == (
        'ok', f'fleet key from $ROG_FLEET_KEY_FILE (fingerprint {key.fingerprint})')


def test_a_robot_key_says_whose_it_is_and_what_the_robot_needs(tmp_path, monkeypatch):
    from rog_ros.nodes.fleet_key import write_key_file
    from rog_ros.protocol.robot_keys import robot_key_text
    fleet = write_key_file(tmp_path / 'fleet.key')
    robot = write_key_file(tmp_path / 'robot3.key', robot_key_text(fleet, 3))
    monkeypatch.delenv('ROG_FLEET_KEY', raising=False)
    monkeypatch.setenv('ROG_FLEET_KEY_FILE', str(tmp_path / 'robot3.key'))
    (found,) = doctor_checks.check_fleet_key()
    assert (found.level, found.detail) == (
        'ok', f"robot 3's key from $ROG_FLEET_KEY_FILE (fingerprint {robot.fingerprint}, made "
              f'from fleet key {fleet.fingerprint}): give this robot --rank 3 and every node '
              '--robot-keys true')


def _binding_series() -> tuple:
    from importlib.metadata import version
    return tuple(int(part) for part in version('cyclonedds').split('.')[:2])


def test_dds_round_trips_and_a_configuration_that_aborts_cyclone(monkeypatch):
    pytest.importorskip('cyclonedds')
    monkeypatch.delenv('CYCLONEDDS_URI', raising=False)
    found = _by_check(doctor_dds.check_dds())
    assert found['dds (rog fleet)'].level == 'ok', found['dds (rog fleet)'].detail
    assert found['dds (rog robot)'].level == 'ok', found['dds (rog robot)'].detail
    monkeypatch.setenv('CYCLONEDDS_URI', '<Discovery><Peers><Peer address="no.such.host.'
                                         'invalid"/></Peers></Discovery>')
    found = _by_check(doctor_dds.check_dds())
    assert found['dds (rog fleet)'].level == 'ok'     # rog fleet passes its own file
    bad = found['dds (CYCLONEDDS_URI)']
    if _binding_series() < (11,):
        # the C library of the 0.10 binding (Python 3.8, ROS 2 Humble) skips a peer it
        # cannot resolve and runs; from 11 on it aborts the process, which the doctor names
        assert bad.level == 'ok', bad.detail
    else:
        assert bad.level == 'fail' and 'signal 6' in bad.detail and 'every <Peer>' in bad.fix
    monkeypatch.setenv('CYCLONEDDS_URI', 'file:///no/such/cyclonedds.xml')
    bad = _by_check(doctor_dds.check_dds())['dds (CYCLONEDDS_URI)']
    assert bad.level == 'fail' and '/no/such/cyclonedds.xml' in bad.detail


def test_rog_doctor_json_lists_every_check_and_exits_1_on_a_failure(monkeypatch, capsys):
    checks = (doctor_checks.check_python, doctor_checks.check_environment)
    monkeypatch.setattr(doctor, 'CHECKS', checks)
    monkeypatch.setenv('ROS_DOMAIN_ID', '42')
    monkeypatch.delenv('ROG_BUS', raising=False)
    assert cli.main(['doctor', '--json']) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r['check'] for r in rows] == ['python', 'ROS_DOMAIN_ID', 'ros2']
    monkeypatch.setenv('ROS_DOMAIN_ID', 'x')
    assert cli.main(['doctor']) == 1
    assert 'not ready' in capsys.readouterr().out


def test_netns_without_root_is_information_not_a_failure(monkeypatch):
    from rog_ros.net import netns
    monkeypatch.setattr(netns, 'unavailable_reason', lambda: 'needs root (...)')
    (found,) = doctor_checks.check_netns()
    assert found.level == 'info' and '--netns needs root' in found.detail
    monkeypatch.setattr(netns, 'unavailable_reason', lambda: None)
    monkeypatch.setattr(netns, 'shaping_unavailable_reason', lambda: None)
    assert doctor_checks.check_netns()[0].level == 'ok'


def test_netns_on_a_kernel_without_the_qdiscs_is_not_reported_available(monkeypatch):
    # check_netns said 'ok' with root and iproute2 alone, on a kernel where rog fleet --netns
    # then failed at its first tc (no sch_tbf or sch_htb): the qdiscs are tried now
    from rog_ros.net import netns
    monkeypatch.setattr(netns, 'unavailable_reason', lambda: None)
    tried = []

    def lacking(lines=None):
        tried.append(lines)
        return 'this kernel lacks a qdisc it needs (sch_tbf, sch_htb): ... unknown.'
    monkeypatch.setattr(netns, 'shaping_unavailable_reason', lacking)
    # Execute / Assert: no qdisc -> information, saying which; tried with the fleet's lines
    (found,) = doctor_checks.check_netns()
    assert found.level == 'info' and 'cannot shape here' in found.detail
    assert 'sch_htb' in found.detail and tried == [None]

    def broken(lines=None):
        raise netns.NetnsError('ip netns add rgprobe1 failed: Operation not permitted')
    monkeypatch.setattr(netns, 'shaping_unavailable_reason', broken)
    (found,) = doctor_checks.check_netns()
    assert found.level == 'warn' and 'Operation not permitted' in found.detail, found


def test_ros2_without_built_interfaces_is_a_warning(monkeypatch):
    import sys
    import types
    monkeypatch.setitem(sys.modules, 'rclpy', types.ModuleType('rclpy'))
    monkeypatch.setenv('RMW_IMPLEMENTATION', 'rmw_cyclonedds_cpp')
    from rog_ros.transport import choose
    monkeypatch.setattr(choose, 'rclpy_available', lambda: False)
    found = _by_check(doctor_checks.check_environment())
    assert found['ros2'].level == 'ok'
    built = found['ros2 interfaces']
    assert built.level == 'warn' and 'colcon build' in built.fix


def test_sros2_asked_for_without_ros2_is_a_warning(monkeypatch):
    monkeypatch.setattr(doctor_checks, '_rclpy_available', lambda: False)
    monkeypatch.setenv('ROS_SECURITY_ENABLE', 'true')
    found = {f.check: f for f in doctor_checks.check_environment()}
    assert found['ROS_SECURITY_ENABLE'].level == 'warn'
    assert 'no DDS Security' in found['ROS_SECURITY_ENABLE'].detail
    monkeypatch.delenv('ROS_SECURITY_ENABLE')
    assert 'ROS_SECURITY_ENABLE' not in {f.check for f in doctor_checks.check_environment()}


NEEDS_CYCLONE = [pytest.param(doctor_dds.check_dds, id='dds'),
                 pytest.param(doctor_graph.check_graph, id='ros graph')]
"""The checks that need the Cyclone DDS binding (doctor_checks.cyclone_unusable)."""


@pytest.mark.parametrize('check', NEEDS_CYCLONE)
def test_the_dds_checks_are_silent_when_the_binding_cannot_load_its_library(
        monkeypatch, check):
    # Prepare: the binding's own loader error, as a source build without libddsc raises it
    class CycloneDDSLoaderException(Exception):
        """Stand-in of the binding's exception (matched by name)."""

    def import_module(name):
        raise CycloneDDSLoaderException('Failed to load CycloneDDS library')
    monkeypatch.setattr(doctor_checks.importlib, 'import_module', import_module)
    # Execute / Assert: one row says it (the cyclonedds check), this one adds nothing
    assert check() == []


@pytest.mark.parametrize('check', NEEDS_CYCLONE)
def test_the_dds_checks_let_other_errors_through(monkeypatch, check):
    def import_module(name):
        raise RuntimeError('a bug')
    monkeypatch.setattr(doctor_checks.importlib, 'import_module', import_module)
    with pytest.raises(RuntimeError):
        check()


def _machine(root, cgroup: str, files: dict) -> str:
    """Write a machine's /proc and /sys files under ``root`` (64 GB available); its path."""
    (root / 'proc' / 'self').mkdir(parents=True)
    (root / 'proc' / 'meminfo').write_text(f'MemTotal: {80 * 1024 ** 2} kB\n'
                                           f'MemAvailable: {64 * 1024 ** 2} kB\n')
    (root / 'proc' / 'self' / 'cgroup').write_text(cgroup)
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return str(root)


def test_the_memory_available_is_a_container_s_limit_not_the_host_s(tmp_path):
    # Setup: a 64 GB host's MemAvailable; a container limited to 4 GB (cgroup v2, its own
    # namespace) using 1.5 GB, 0.5 GB of it page cache the kernel can drop
    gib = 1024 ** 3
    v2 = _machine(tmp_path / 'v2', '0::/\n', {
        'sys/fs/cgroup/memory.max': f'{4 * gib}\n',
        'sys/fs/cgroup/memory.current': f'{3 * gib // 2}\n',
        'sys/fs/cgroup/memory.stat': f'anon 1\ninactive_file {gib // 2}\n'})
    # a v1 hierarchy whose limit (2 GB) is set on the parent of this process's cgroup
    v1 = _machine(tmp_path / 'v1', '5:devices:/\n4:memory:/ci/job7\n', {
        'sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712\n',
        'sys/fs/cgroup/memory/memory.usage_in_bytes': f'{9 * gib}\n',
        'sys/fs/cgroup/memory/ci/memory.limit_in_bytes': f'{2 * gib}\n',
        'sys/fs/cgroup/memory/ci/memory.usage_in_bytes': f'{gib}\n',
        'sys/fs/cgroup/memory/ci/job7/memory.limit_in_bytes': '9223372036854771712\n',
        'sys/fs/cgroup/memory/ci/job7/memory.usage_in_bytes': f'{gib}\n'})
    unlimited = _machine(tmp_path / 'host', '0::/user.slice\n', {
        'sys/fs/cgroup/user.slice/memory.max': 'max\n',
        'sys/fs/cgroup/user.slice/memory.current': f'{gib}\n'})
    # Execute, Assert: the room the limits leave (3 GB, 1 GB), else MemAvailable; the host's
    # 64 GB said a fleet of 150 robots fits where the container's killer ends it at 4 GB
    assert doctor_checks.mem_available_gb(v2) == 3.0
    assert doctor_checks.mem_available_gb(v1) == 1.0
    assert doctor_checks.mem_available_gb(unlimited) == 64.0
