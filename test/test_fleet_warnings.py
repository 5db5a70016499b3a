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
"""`rog fleet`'s closing line on warnings that only a robot's own log holds."""

import json
import os

import pytest

from rog_ros.nodes.fleet_progress import closing_lines, output_lines, robot_warnings


def _write(path, lines):
    with open(path, 'w') as fh:
        fh.write('\n'.join(lines) + '\n')


def test_names_each_robot_log_with_warnings_its_count_and_first(tmp_path):
    logs = str(tmp_path)
    _write(os.path.join(logs, 'rog_worker_0.log'), [
        '[INFO] [1795950704.876] [rog_worker_0]: active'])
    _write(os.path.join(logs, 'rog_worker_1.log'), [
        '[INFO] [1795950704.876] [rog_worker_1]: active',
        '[WARNING] [1795950705.001] [rog_worker_1]: robot 1 computed a non-finite gradient: '
        'dropped',
        '[WARN] [1795950706.5] [rog_worker_1]: dropped messages {"invalid": 1}',   # rclpy
        '[ERROR] [1795950707.0] [rog_worker_1]: ' + 'x' * 300])
    _write(os.path.join(logs, 'rog_server.log'), [
        '[WARNING] [1795950705.0] [rog_server]: the server restarted'])
    line = robot_warnings(logs, ['rog_worker_0', 'rog_worker_1', 'rog_worker_2', 'netmon'])
    assert line.startswith("warnings in the robots' logs: rog_worker_1 3 (first: robot 1 "
                           'computed a non-finite gradient: dropped)')
    assert 'rog_worker_0' not in line and 'rog_server' not in line   # none; not a robot
    assert line.endswith(f'; logs in {logs}')


def test_no_warnings_or_no_logs_say_nothing(tmp_path):
    logs = str(tmp_path)
    _write(os.path.join(logs, 'rog_worker_0.log'), [
        '[INFO] [1795950704.876] [rog_worker_0]: a WARNING in the text is not a level'])
    assert robot_warnings(logs, ['rog_worker_0', 'rog_worker_1']) == ''
    assert robot_warnings(os.path.join(logs, 'missing'), ['rog_worker_0']) == ''


def test_a_long_first_warning_is_cut(tmp_path):
    logs = str(tmp_path)
    _write(os.path.join(logs, 'netmon.log'), ['[WARNING] [1.0] [netmon]: ' + 'y' * 300])
    line = robot_warnings(logs, ['netmon'])
    assert 'netmon 1 (first: ' + 'y' * 117 + '...)' in line


def test_the_closing_lines_name_the_trained_model_and_warn_when_it_is_missing(tmp_path):
    # a full disk under --out: the run said "done" and only the server's log told that
    # model.pt was never written
    assert [line.split(':')[0] for line in output_lines(str(tmp_path), 'mpcol')] == [
        'WARNING', 'plots and a report (accuracy, time composition, who was out when)']
    assert 'the server could not write it' in output_lines(str(tmp_path), 'mpcol')[0]
    (tmp_path / 'model.pt').write_bytes(b'x')
    first = output_lines(str(tmp_path), 'mpcol')[0]
    assert first.startswith('trained model (a state_dict): ')
    assert f"load_trained('mpcol', '{tmp_path / 'model.pt'}')" in first
    assert first.endswith("model.pt')")          # (no summary: nothing said of robots)


@pytest.mark.parametrize('delivered, missed, said', [
    (3, 0, '; 3 of 3 robots hold it'),
    (2, 1, '; 2 of 3 robots hold it (1 stopped without it: see the warnings)'),
    (0, 0, "model.pt')")])              # final_model off, or a push system
def test_the_model_line_says_how_many_robots_left_with_it(tmp_path, delivered, missed, said):
    (tmp_path / 'model.pt').write_bytes(b'x')
    (tmp_path / 'summary.json').write_text(json.dumps(
        {'final_model_delivered': delivered, 'final_model_missed': missed}))
    assert output_lines(str(tmp_path), 'mpcol')[0].endswith(said)


def test_a_finished_run_closes_with_summary_result_warnings_model_and_report(tmp_path):
    # the same lines for rog fleet and rog robot --role server
    (tmp_path / 'summary.json').write_text('{"final_accuracy": 0.9, "time_to_target_s": 1.5}')
    (tmp_path / 'model.pt').write_bytes(b'x')
    logs = tmp_path / 'logs'
    logs.mkdir()
    (logs / 'rog_server.log').write_text('[WARNING] [1.0] [rog_server]: two processes run\n')
    lines = closing_lines(str(tmp_path), 'toy', str(logs), ['rog_server'])
    assert [x.split(' ')[0] for x in lines] == ['done;', 'time', 'warnings', 'trained',
                                                'plots']
    assert 'final accuracy 0.9000' in lines[1] and 'rog_server 1' in lines[2]
    (logs / 'rog_server.log').write_text('')
    assert len(closing_lines(str(tmp_path), 'toy', str(logs), ['rog_server'])) == 4


def test_a_fleet_knows_when_it_resumes_from_its_state(tmp_path):
    # only the server's checkpoint makes a run go on: the workers' files alone resumed nothing
    from rog_ros.nodes.state_dir import resuming_line
    assert resuming_line(None) == '' and resuming_line(str(tmp_path / 'none')) == ''
    (tmp_path / 'notes.txt').write_text('not a state file')
    assert resuming_line(str(tmp_path)) == ''
    (tmp_path / 'worker_0.pt').write_bytes(b'x')
    assert resuming_line(str(tmp_path)) == ''
    (tmp_path / 'server.pt').write_bytes(b'x')
    assert resuming_line(str(tmp_path)) == (f'resuming from the state in {tmp_path} '
                                            '(server.pt, worker_0.pt)')


def test_a_completed_run_is_not_offered_a_resume(tmp_path):
    from rog_ros.nodes.fleet import _completed
    assert not _completed(str(tmp_path))
    (tmp_path / 'summary.json').write_text(json.dumps({'completed': False, 'error': 'x'}))
    assert not _completed(str(tmp_path))
    (tmp_path / 'summary.json').write_text(json.dumps({'completed': True}))
    assert _completed(str(tmp_path))
    (tmp_path / 'summary.json').write_text('[1, 2]')           # not a run's summary
    assert not _completed(str(tmp_path))


def test_a_run_that_completed_though_a_frozen_robot_was_killed_still_gives_its_result(tmp_path):
    # a robot frozen for good is let go and the run completes, but its process never exits:
    # rog fleet killed it and printed only the failure, not the run's result or its model
    from rog_ros.nodes.fleet import _completed_anyway
    (tmp_path / 'model.pt').write_bytes(b'x')
    logs = tmp_path / 'logs'
    logs.mkdir()
    args = ('toy', str(logs), ['rog_worker_1'])
    (tmp_path / 'summary.json').write_text(json.dumps(
        {'completed': False, 'error': 'interrupted', 'final_accuracy': 0.9}))
    assert _completed_anyway(str(tmp_path), ['rog_worker_1'], *args) == []
    (tmp_path / 'summary.json').write_text(json.dumps(
        {'completed': True, 'final_accuracy': 0.9, 'time_to_target_s': 1.5}))
    assert _completed_anyway(str(tmp_path), [], *args) == []
    lines = _completed_anyway(str(tmp_path), ['rog_worker_1'], *args)
    assert [x.split(' ')[0] for x in lines] == ['done;', 'time', 'trained', 'plots', 'the']
    assert 'final accuracy 0.9000' in lines[1]
    assert lines[-1] == ('the run completed; rog fleet exits with status 1 because '
                         'rog_worker_1 failed (above)')


def test_a_dropped_message_is_quoted_with_its_hint(tmp_path):
    """Quote the first bad_tag drop with its hint whole (the bus hinted from the second on)."""
    # Arrange: the server's bus drops four messages tagged with another fleet key
    import logging
    from types import SimpleNamespace
    from rog_ros.protocol import auth
    from rog_ros.protocol import messages as m
    from rog_ros.transport.auth_bus import AuthBus
    key = auth.FleetKey(b'the fleet key of thirty-two bytes')
    other = auth.Signer(auth.FleetKey(b'another fleet key of 32 bytes...'))
    received = [('up/link', other.sign(m.LinkStats(node=1, interface='x', stamp=1.0)))
                for _ in range(4)]
    said = []
    log = logging.getLogger('rog_fleet_warnings_test')
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    log.addHandler(handler)
    try:
        AuthBus(SimpleNamespace(namespace='/w', rejects=0, poll=lambda timeout_s: received),
                key, logger=log).poll()
    finally:
        log.removeHandler(handler)
    _write(os.path.join(str(tmp_path), 'rog_server.log'),
           ['[INFO] [1.0] [rog_server]: active']
           + [f'[WARNING] [2.0] [rog_ros.auth]: {text}' for text in said])
    _write(os.path.join(str(tmp_path), 'rog_worker_0.log'), [   # one drop: nothing better
        '[WARNING] [2.0] [rog_ros.auth]: ' + said[0]])
    # Execute
    line = robot_warnings(str(tmp_path), ['rog_server', 'rog_worker_0'])
    # Assert
    assert len(said) == 3 and all('so far); a different fleet key?' in s for s in said), said
    assert 120 < len(said[0]) <= 400
    assert f'rog_server 3 (first: {said[0]}); ' in line
    assert f'rog_worker_0 1 (first: {said[0]});' in line
