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
"""Node arguments: a "not set" number typed as text, and a --record path checked at start."""

import os

import pytest
from rog_ros.checks import ConfigError
from rog_ros.nodes import plan, settings
import yaml

NONE_NUMBERS = [(role, s) for s in settings.SETTINGS if isinstance(s.none_text, float)
                for role in settings.NODES if role in s.roles]
"""(executable, setting) of every number whose none_text (0.0) means "not set"."""


def _parse(role: str, argv: list):
    """Parse ``argv`` with the parser of node ``role``."""
    return settings.SettingsParser(role, prog=role).parse_args(argv)


def test_every_numeric_none_setting_is_covered():
    names = {s.name for _, s in NONE_NUMBERS}
    assert {'lr', 'epoch', 'absence_timeout', 'duration'} <= names


@pytest.mark.parametrize('role,setting', NONE_NUMBERS, ids=lambda x: getattr(x, 'name', x))
@pytest.mark.parametrize('text', ['0', '0.0', '0e0', ' 0 ', '-0', '.0'])
def test_zero_on_the_command_line_means_not_set_as_in_yaml(role, setting, text, tmp_path):
    # '--lr 0' was a learning rate of 0.0 (the server died), though 'lr: 0.0' is unset
    params = tmp_path / 'p.yaml'
    params.write_text(yaml.safe_dump({'/**': {'ros__parameters': {setting.name: 0.0}}}))
    flag = _parse(role, [setting.flag, text])
    from_file = _parse(role, ['--ros-args', '--params-file', str(params)])
    by_p = _parse(role, ['--ros-args', '-p', f'{setting.name}:={text.strip()}'])
    assert getattr(flag, setting.name) is None
    assert getattr(from_file, setting.name) is None
    assert getattr(by_p, setting.name) is None
    given = 16.5 if setting.name == 'absence_timeout' else 0.5   # (at least two pokes: 16 s)
    assert getattr(_parse(role, [setting.flag, str(given)]), setting.name) == given


def test_rog_fleet_lr_0_gives_the_nodes_no_learning_rate():
    params = plan.resolve(overrides={'lr': '0', 'workload': 'toy'})
    assert params['rog_server']['lr'] is None and params['rog_worker']['lr'] is None
    assert settings.BY_NAME['lr'].parse('0.001') == 0.001


def test_a_quoted_zero_in_a_parameter_file_is_still_not_a_number():
    # ROS 2 refuses a string for a double parameter; so does the strict file check
    with pytest.raises(ConfigError, match=r"lr \(--lr\) must be a number, got '0'"):
        plan.resolve({'/**': {'lr': '0'}})


@pytest.mark.parametrize('role', settings.NODES)
def test_a_record_path_in_a_missing_folder_is_a_usage_error(role, tmp_path, capsys):
    # it was a FileNotFoundError traceback once the node had started
    target = tmp_path / 'nodir' / 'x.mcap'
    with pytest.raises(SystemExit) as exc:
        _parse(role, ['--record', str(target)])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert err[-1].startswith(f'{role}: error: --record {target}: the folder {target.parent} ')
    assert err[-1].endswith('; create it first')   # the words of rog fleet --record
    with pytest.raises(SystemExit):
        _parse(role, ['--ros-args', '-p', f'record:={tmp_path}'])
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        f'{role}: error: --record {tmp_path}: is a directory')
    good = tmp_path / 'x.mcap'
    assert _parse(role, ['--record', str(good)]).record == str(good)
    assert _parse(role, []).record is None
    assert not os.path.exists(good)                # checked, not created


@pytest.mark.parametrize('role', settings.NODES)
def test_a_writable_record_file_in_a_read_only_folder_is_enough(role, tmp_path, monkeypatch):
    # the bag opens the file itself: /dev/null, or a prepared file where the folder is not ours
    from rog_ros import checks
    prepared = tmp_path / 'prepared.mcap'
    prepared.write_bytes(b'')
    access = os.access
    monkeypatch.setattr(checks.os, 'access',
                        lambda path, mode: path != str(tmp_path) and access(path, mode))
    assert _parse(role, ['--record', str(prepared)]).record == str(prepared)
    with pytest.raises(SystemExit):            # a new file there still needs the folder
        _parse(role, ['--record', str(tmp_path / 'new.mcap')])


def test_a_recording_that_cannot_be_opened_at_start_is_a_usage_error(monkeypatch, caplog):
    # Prepare: the folder check passed, the open fails (a permission changed in between)
    from rog_ros.nodes import node_main, rog_worker
    from rog_ros.transport.bus import RecordError

    class Core:
        """A core whose configure opens a recording that cannot be written."""

        def __init__(self, args, requests):
            self.shut = False

        def configure(self):
            raise RecordError('cannot write the recording /x/run.mcap: Permission denied')

        def shutdown(self):
            self.shut = True
    monkeypatch.setenv('ROG_BUS', 'dds')
    # Execute
    with caplog.at_level('ERROR'):
        status = node_main.run_node('rog_worker', rog_worker.__doc__, Core,
                                    ['--workload', 'toy', '--workers', '1', '--bus', 'dds'])
    # Assert: one line and the usage status, no traceback
    assert status == 2
    assert 'cannot write the recording /x/run.mcap: Permission denied' in caplog.text
