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

import pytest
from rog_ros import cli
from rog_ros.nodes import doctor, doctor_checks, doctor_dds
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


def test_torch_line_says_where_workers_compute(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'get_device_name', lambda index=0: 'Xavier')
    (found,) = doctor_checks.check_torch()
    assert found.level == 'ok' and 'CUDA: Xavier; workers compute gradients there' in found.detail
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    assert 'CPU only' in doctor_checks.check_torch()[0].detail


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


def test_cache_that_cannot_be_written_warns_and_an_empty_one_says_it_will_pretrain(
        tmp_path, monkeypatch):
    blocker = tmp_path / 'file'
    blocker.write_text('not a folder')
    monkeypatch.setenv('ROG_CACHE_DIR', str(blocker))
    (found,) = doctor_checks.check_cache()
    # runs fall back to the temporary folder (configuration.md): not a failure of the robot
    assert found.level == 'warn' and 'ROG_CACHE_DIR' in found.fix
    assert 'temporary folder' in found.detail
    monkeypatch.setenv('ROG_CACHE_DIR', str(tmp_path / 'cache'))
    (found,) = doctor_checks.check_cache()
    assert found.level == 'info' and 'pre-trains' in found.detail
    assert list((tmp_path / 'cache').iterdir()) == []        # the write probe is gone


def test_fleet_key_unusable_fails_and_absent_is_information(tmp_path, monkeypatch):
    monkeypatch.delenv('ROG_FLEET_KEY', raising=False)
    monkeypatch.setenv('ROG_FLEET_KEY_FILE', str(tmp_path / 'missing.key'))
    (found,) = doctor_checks.check_fleet_key()
    assert found.level == 'fail' and 'missing.key' in found.detail
    monkeypatch.delenv('ROG_FLEET_KEY_FILE')
    (found,) = doctor_checks.check_fleet_key()
    assert found.level == 'info'


def test_fleet_key_line_shows_the_fingerprint_the_nodes_log(tmp_path, monkeypatch):
    from rog_ros.nodes.fleet_key import write_key_file
    key = write_key_file(tmp_path / 'fleet.key')
    monkeypatch.delenv('ROG_FLEET_KEY', raising=False)
    monkeypatch.setenv('ROG_FLEET_KEY_FILE', str(tmp_path / 'fleet.key'))
    (found,) = doctor_checks.check_fleet_key()
    assert (found.level, found.detail) == (
        'ok', f'fleet key from $ROG_FLEET_KEY_FILE (fingerprint {key.fingerprint})')


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
    assert doctor_checks.check_netns()[0].level == 'ok'


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
