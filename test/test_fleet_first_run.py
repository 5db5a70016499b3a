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
What a new user meets first in ``rog fleet``: its flags, its errors, its lines.

Before these tests, ``--sync rog:4`` (how ``rog sim``, ``rog compare`` and the README write a
system) was refused with a list of choices that offered ``aet``, which the fleet then refused
too; a missing ``--config`` file said ``[Errno 2] ...``; the last progress line came out twice;
the done line gave a time to target without the target, and ``time to target 0.0 s
(iteration 0)`` for a starting model already above it; and ``Mb/s w0 8.55/95.3`` was
explained nowhere a user looks. A second run into the same ``--out`` lost the first run's
logs (test_run_outputs.py tests the move; the last test here runs it).
"""

import errno
import io
import json
import os
from pathlib import Path
import subprocess
import sys
import types

import pytest

from rog_ros.checks import ConfigError
from rog_ros.nodes import fleet, rog_server, settings
from rog_ros.nodes.fleet_progress import Progress, result_line
from rog_ros.nodes.plan import load_parameter_file, plan
from rog_ros.protocol.messages import SERVER, TrainStatus

ROOT = Path(__file__).resolve().parent.parent


def _training(specs) -> list:
    """Return ``(sync, staleness)`` of every training node: they must agree."""
    return sorted({(s.parameters['sync'], s.parameters['staleness'])
                   for s in specs if s.role != 'netmon'})


# ---------------------------------------------------------------- A: --sync name:S
@pytest.mark.parametrize('spec,sync,staleness', [
    ('rog:4', 'rog', 4), ('ssp:02', 'ssp', 2), ('flown:0', 'flown', 0), ('ROG: 6', 'rog', 6)])
def test_a_sync_written_with_its_threshold_sets_the_staleness(spec, sync, staleness):
    assert _training(plan(None, {'sync': spec, 'workers': 2})) == [(sync, staleness)]
    # the same threshold given twice is one threshold
    assert _training(plan(None, {'sync': spec, 'staleness': staleness, 'workers': 2})) == [
        (sync, staleness)]


def test_bsp_0_is_bsp_as_rog_sim_reads_it():
    specs = plan(None, {'sync': 'bsp:0', 'workers': 2})
    assert {s.parameters['sync'] for s in specs if s.role != 'netmon'} == {'bsp'}


def test_every_source_of_parameters_reads_name_s():
    # a parameter file's section, a node's flags, its -p values, the launch arguments
    file_specs = plan({'/**': {'sync': 'ssp:3'}}, {'workers': 2})
    assert _training(file_specs) == [('ssp', 3)]
    # later wins, as for any setting: the command line's rog:5 over the file's staleness
    assert _training(plan({'/**': {'sync': 'rog', 'staleness': 8}},
                          {'sync': 'rog:5', 'workers': 2})) == [('rog', 5)]
    args = rog_server.build_parser().parse_args(['--sync', 'rog:6', '--bus', 'dds'])
    assert (args.sync, args.staleness) == ('rog', 6)
    args = rog_server.build_parser().parse_args(['--ros-args', '-p', 'sync:=flown:2'])
    assert (args.sync, args.staleness) == ('flown', 2)
    assert settings.launch_overrides({'sync': 'ssp:7', 'staleness': ''}) == {
        'sync': 'ssp', 'staleness': 7}


@pytest.mark.parametrize('overrides,message', [
    ({'sync': 'rog:4', 'staleness': 2}, '--staleness 2 conflicts with the threshold in --sync '
                                        'rog:4; give the threshold once (--sync rog:S, or '
                                        '--sync rog --staleness S)'),
    ({'sync': 'gsp:3'}, 'sync (--sync) gsp:3: gsp has no staleness threshold S in a fleet'),
    ({'sync': 'adacomp:2'}, 'adacomp has no staleness threshold S in a fleet'),
    ({'sync': 'bsp:3'}, 'bsp has no staleness threshold (it is ssp:0)'),
    ({'sync': 'aet:2'}, 'sync (--sync) aet:2: runs in the simulator only (rog sim, rog '
                        'compare): it has no server'),
    ({'sync': 'rog:'}, "no staleness after ':' in 'rog:'"),
    ({'sync': 'rog:x'}, "bad staleness in 'rog:x'"),
    ({'sync': 'rog:2000'}, 'the staleness threshold S must be in [0, 1000], got 2000'),
    ({'sync': 'rog:4#no-outage'}, '#tags are rog sim and rog compare options'),
])
def test_a_bad_name_s_is_one_line_naming_what_is_wrong(overrides, message):
    with pytest.raises(ConfigError) as exc:
        plan(None, overrides)
    assert message in str(exc.value) and '\n' not in str(exc.value)


def test_a_conflict_inside_a_parameter_file_section_names_the_section():
    with pytest.raises(ConfigError, match=r'parameter file /\*\*: staleness 2 conflicts with '
                                          r'the threshold in sync ssp:3'):
        plan({'/**': {'sync': 'ssp:3', 'staleness': 2}}, {})


def test_the_choices_offered_are_the_systems_a_fleet_runs():
    with pytest.raises(ConfigError) as exc:
        plan(None, {'sync': 'asgdd'})
    assert str(exc.value) == ('sync (--sync) must be one of rog, ssp, bsp, flown, adacomp, '
                              "asgd, comp-asgd, gsp, got 'asgdd'")
    # the systems it refuses keep their reason (not "must be one of")
    for name in ('aet', 'gsp+gds', 'adasgd'):
        with pytest.raises(ConfigError) as exc:
            plan(None, {'sync': name})
        assert str(exc.value).startswith(f'sync (--sync) {name}: runs in the simulator only')


def test_rog_fleet_refuses_a_conflicting_threshold_before_anything_starts(tmp_path, capsys):
    code = fleet.main(['--sync', 'rog:4', '--staleness', '2', '--out', str(tmp_path / 'o')])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ['rog fleet: --staleness 2 conflicts with the threshold in '
                                 '--sync rog:4; give the threshold once (--sync rog:S, or '
                                 '--sync rog --staleness S)']
    assert not (tmp_path / 'o').exists()


# ---------------------------------------------------------------- C: --config in words
def test_a_config_that_cannot_be_read_is_a_sentence(tmp_path, capsys):
    missing = tmp_path / 'nope.yaml'
    with pytest.raises(ConfigError, match=f'^--config {missing}: no such file$'):
        load_parameter_file(str(missing), '--config')
    assert fleet.main(['--config', str(missing), '--out', str(tmp_path / 'o')]) == 2
    assert capsys.readouterr().err == f'rog fleet: --config {missing}: no such file\n'
    assert fleet.main(['--config', str(tmp_path), '--out', str(tmp_path / 'o')]) == 2
    assert capsys.readouterr().err == (f'rog fleet: --config {tmp_path}: a directory, not a '
                                       'file\n')
    with pytest.raises(SystemExit) as exc:           # a node's --params-file alike
        rog_server.build_parser().parse_args(['--ros-args', '--params-file', str(missing)])
    assert exc.value.code == 2
    assert f'error: --params-file {missing}: no such file' in capsys.readouterr().err


def test_other_reasons_a_file_cannot_be_read_are_words_too():
    denied = PermissionError(errno.EACCES, 'Permission denied')
    assert str(settings.unreadable('--config', 'f.yaml', denied)) == (
        '--config f.yaml: no permission to read it')
    broken = OSError(errno.EIO, 'Input/output error')
    assert str(settings.unreadable('--config', 'f.yaml', broken)) == (
        '--config f.yaml: cannot be read (input/output error)')


# ---------------------------------------------------------------- D: the fleet's lines
def _status(iteration, accuracy):
    """Return a server TrainStatus as the progress display reads it."""
    return TrainStatus(node=SERVER, stamp=1.0, iteration=iteration, accuracy=accuracy)


def test_the_last_progress_line_is_written_once():
    stream = io.StringIO()           # not a terminal: one line per show
    progress = Progress(2, 100, stream=stream)
    progress.on_status(_status(100, 0.85))
    progress.show()                  # the periodic line happens to see the end
    progress.show(force=True)        # the fleet's closing one
    assert len(stream.getvalue().splitlines()) == 1, stream.getvalue()
    progress.on_status(_status(100, 0.86))       # a later evaluation: a new line says it
    progress.show(force=True)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and 'it 100/100 acc 0.860' in lines[1]


class _Terminal(io.StringIO):
    """A stream that says it is a terminal, as a shell's stderr is."""

    def isatty(self):
        """Say yes, so that the progress line is redrawn in place with a carriage return."""
        return True


def _rows_on_a_terminal(workers, monkeypatch, columns=80) -> list:
    """Show a fleet's live line on a ``columns``-wide terminal; return each redrawn row."""
    monkeypatch.setenv('COLUMNS', str(columns))
    stream = _Terminal()
    progress = Progress(workers, 100, stream=stream)
    progress.on_status(_status(46, 0.812))
    for rank in range(workers):
        progress.on_link(types.SimpleNamespace(node=rank, emulated_mbps=95.3))
    progress.show(force=True)
    return stream.getvalue().split('\r')[1:]


def test_the_live_line_fits_an_80_column_terminal(monkeypatch):
    # the README's fleet (3 robots) drew a 120-column row: on 80 columns it wrapped, and each
    # carriage return redrew only the last of its two rows, leaving one stale row per update
    (row,) = _rows_on_a_terminal(3, monkeypatch)
    assert len(row) <= 79 and row.rstrip().endswith('s')
    assert 'it 46/100 acc 0.812' in row and 'w0 0/95.3 w1 0/95.3 w2 0/95.3 | ' in row
    # twelve robots: the rates that do not fit end in '...', the seconds stay
    (row,) = _rows_on_a_terminal(12, monkeypatch)
    assert len(row) <= 79 and 'w0 0/95.3 ' in row and '... | ' in row
    assert row.rstrip().endswith('s')
    # a wide terminal shows it whole, with the bar
    (row,) = _rows_on_a_terminal(3, monkeypatch, columns=200)
    assert row.startswith('[#########...........] it 46/100') and len(row) == 199


def test_the_live_line_fits_a_very_narrow_terminal(monkeypatch):
    # a 12-column terminal (a split pane): a floor of 20 columns wrapped every update
    (row,) = _rows_on_a_terminal(3, monkeypatch, columns=12)
    assert len(row) == 11 and row == 'it 46/100 a'


def _summary(tmp_path, **keys) -> str:
    """Write a fleet summary that reached its target and return its path."""
    summary = {'target_accuracy': 0.8347, 'time_to_target_s': 7.8, 'iterations_to_target': 60.0,
               'final_accuracy': 0.8433, 'max_dip_after_target': 0.0069,
               'max_dip_at_iteration': 90.0, 'max_dip_after_target_smoothed': 0.0012,
               'sim_time_s': 13.7, 'start_model': {'source': 'runs/fleet/model.pt'}}
    summary.update(keys)
    path = tmp_path / 'summary.json'
    path.write_text(json.dumps(summary))
    return str(path)


def test_the_done_line_names_the_target_it_reached(tmp_path):
    assert result_line(_summary(tmp_path)) == (
        'time to target 7.8 s (target accuracy 0.8347, reached at iteration 60), final '
        'accuracy 0.8433, max dip after target 0.69 points (iteration 90; smoothed over 3 '
        'evaluations 0.12), trained for 13.7 s')


def test_the_done_line_counts_robots_let_go_and_says_where_to_read(tmp_path):
    # a robot frozen for good was let go so that the run ended: the line said nothing of it
    line = result_line(_summary(tmp_path, workers_let_go=1, outage_suspensions=1))
    assert line.endswith('; 1 suspension of a robot for its link (outage-aware RSP); 1 robot '
                         'let go before the budget, silent for good once the others had '
                         f'finished (when and why: {tmp_path / "events.csv"})')
    assert 'let go' not in result_line(_summary(tmp_path, workers_let_go=0))


def test_a_start_already_at_the_target_is_said_so(tmp_path):
    # rog fleet --init-model runs/fleet: the starting model's evaluation is at the target
    line = result_line(_summary(tmp_path, time_to_target_s=7e-06, iterations_to_target=0.0,
                                max_dip_at_iteration=10.0))
    assert line.startswith('the starting model (runs/fleet/model.pt) was already at the '
                           'target accuracy 0.8347, final accuracy 0.8433, max dip since the '
                           'start 0.69 points (iteration 10; ')
    assert 'time to target' not in line
    line = result_line(_summary(tmp_path, time_to_target_s=7e-06, iterations_to_target=0.0,
                                max_dip_after_target=0.0, max_dip_at_iteration=0.0,
                                max_dip_after_target_smoothed=0.0))
    assert 'final accuracy 0.8433, no dip since the start, trained for' in line
    assert 'iteration 0' not in line


def test_the_progress_line_s_rates_are_explained_once_in_words():
    from rog_ros.nodes.fleet_progress import legend
    with_trace, without = legend(True), legend(False)
    assert 'Mb/s wK A/B: robot K moves A Mbit/s' in with_trace and '--trace' in with_trace
    assert 'Mb/s wK A: robot K moves A Mbit/s' in without and 'A/B' not in without


# ---------------------------------------------------------------- a real fleet, twice
def _fleet(out: Path, *args: str) -> subprocess.CompletedProcess:
    """Run a small toy fleet into ``out``; return the finished process."""
    return subprocess.run(
        [sys.executable, '-m', 'rog_ros.nodes.fleet', '--workload', 'toy', '--workers', '2',
         '--iterations', '10', '--out', str(out),
         '--namespace', f'/rog_test_{os.getpid()}_first_run', *args],
        capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_a_second_fleet_keeps_the_first_one_s_logs_and_reads_name_s(tmp_path):
    pytest.importorskip('cyclonedds')
    out = tmp_path / 'run'
    first = _fleet(out, '--sync', 'rog:3')
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads((out / 'summary.json').read_text())['system'] == 'rog:3'
    first_log = (out / 'logs' / 'rog_server.log').read_text()
    # Execute
    second = _fleet(out)
    # Assert: the first run's node logs moved with its results; this run's are its own
    assert second.returncode == 0, second.stderr[-3000:]
    assert (f'rog fleet: {out} held an earlier run; its results and logs moved to '
            f'{out / "previous"}\n') in second.stderr
    assert (out / 'previous' / 'logs' / 'rog_server.log').read_text() == first_log
    assert sorted(p.name for p in (out / 'previous' / 'logs').iterdir()) == [
        'netmon.log', 'rog_server.log', 'rog_worker_0.log', 'rog_worker_1.log']
    assert (out / 'logs' / 'rog_server.log').read_text() != first_log
    assert 'rog fleet: progress: it = iterations done' in first.stderr    # the legend, once


def test_a_node_sigkilled_before_any_stop_is_said_not_to_be_rog_fleets(tmp_path, capsys):
    # Setup: a worker of 14 nodes SIGKILLed while the fleet trained (the watch saw it first,
    # so rog fleet had sent nothing yet); its log ends at 'active', nothing says why
    server = types.SimpleNamespace(name='rog_server',
                                   parameters={'state_dir': None, 'workload': 'mpcol'})
    specs = [server] + [types.SimpleNamespace(name=f'rog_worker_{r}') for r in range(12)]
    specs.append(types.SimpleNamespace(name='netmon'))
    sup = types.SimpleNamespace(log_dir=str(tmp_path), log_path=lambda name: f'{name}.log',
                                tail=lambda name: '[INFO] active')
    # Execute
    status = fleet._outcome(str(tmp_path), server, specs, sup, {'rog_worker_1': -9},
                            ['rog_worker_1'], '', 'fleet key K')
    # Assert: it names the usual sender and the fix, where it said 'killed by SIGKILL' and
    # pointed at rog doctor, which checks neither
    err = capsys.readouterr().err
    assert status == 1
    assert ('rog_worker_1 was killed by SIGKILL (not by rog fleet: the out-of-memory killer '
            'sends it') in err
    assert '14 nodes run here: fewer --workers need less memory' in err
    # one that rog fleet's own stop had to SIGKILL is not said to be someone else's doing
    fleet._outcome(str(tmp_path), server, specs, sup, {'rog_worker_1': -9}, ['rog_worker_1'],
                   '', 'fleet key K', killed={'rog_worker_1'})
    assert 'not by rog fleet' not in capsys.readouterr().err


class _Started(Exception):
    """Raised where the fleet would announce its nodes: what it said before is the test's."""


def test_a_fleet_too_big_for_the_memory_is_warned_about_before_it_starts(tmp_path, capsys,
                                                                         monkeypatch):
    # Setup: 20.7 GB available (this machine, beside other work); stop where the nodes start
    from rog_ros.nodes import doctor_checks
    monkeypatch.setattr(doctor_checks, 'mem_available_gb', lambda: 20.7)

    def started(*args, **kwargs):
        """Stand in for the announcement that comes just before the nodes start."""
        raise _Started

    monkeypatch.setattr(fleet, '_announce', started)
    # Execute: --workers admits up to 1024; 70 robots and a server at 0.35 GB each are 25 GB
    with pytest.raises(_Started):
        fleet.main(['--workload', 'toy', '--workers', '70', '--no-netmon',
                    '--out', str(tmp_path / 'run')])
    # Assert: one line says it, with the number of robots that fit; a fleet that fits, none
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        'rog fleet: warning: 71 training processes (the server and 70 robots) need 24.85 GB or '
        'more, 0.35 GB each, and 20.7 GB is available: the out-of-memory killer may end some '
        'mid-run; --workers 58 or fewer fit')
    with pytest.raises(_Started):
        fleet.main(['--workload', 'toy', '--workers', '3', '--no-netmon',
                    '--out', str(tmp_path / 'run3')])
    assert 'warning' not in capsys.readouterr().err


def test_the_memory_warning_names_no_fleet_that_does_not_fit():
    # 0.5 GB available: a server and one robot need 0.7 GB, so '--workers 1 or fewer fit'
    # was untrue; 0.75 GB holds them
    assert fleet.memory_warning(4, 0.5).endswith(
        'even --workers 1 needs 0.7 GB: close other programs')
    assert fleet.memory_warning(4, 0.75).endswith('; --workers 1 or fewer fit')
    assert fleet.memory_warning(2, 0.75) == ''


def test_the_memory_warning_says_the_need_it_names_the_fit_by():
    # 0.5 GB available, a server and one robot: the line said they 'need 1 GB or more' and,
    # at its end, that 'even --workers 1 needs 0.7 GB' (the need rounded to whole GB), and
    # '1 robots'
    assert fleet.memory_warning(2, 0.5) == (
        'warning: 2 training processes (the server and 1 robot) need 0.7 GB or more, 0.35 GB '
        'each, and 0.5 GB is available: the out-of-memory killer may end some mid-run; even '
        '--workers 1 needs 0.7 GB: close other programs')
    assert ' need 1.05 GB or more,' in fleet.memory_warning(3, 0.9)


def test_rog_fleet_s_nodes_say_nothing_of_the_namespace_it_placed_them_in(
        tmp_path, monkeypatch):
    # Setup: record each node's command and environment where the supervisor would start them
    started = {}

    def supervisor(specs, log_dir, env, prefix):
        """Record what each node would be started with, then stop where the nodes start."""
        started.update({s.name: (s.argv() + ['--ros-args', *s.ros_args], env(s))
                        for s in specs})
        raise _Started

    monkeypatch.setattr(fleet, 'Supervisor', supervisor)
    # Execute
    with pytest.raises(_Started):
        fleet.main(['--workload', 'toy', '--workers', '2', '--no-netmon',
                    '--out', str(tmp_path / 'run')])
    argv, env = started['rog_server']
    for key in (settings.FLEET_PLACED_ENV, 'ROS_DOMAIN_ID'):
        monkeypatch.setenv(key, env[key])
    args = rog_server.build_parser().parse_args(argv)
    # Assert: placed at /rog/run, which rog fleet chose (no warning in every node's log), while
    # a user's -r __ns:=/rog/lab1 still is warned about (two such fleets are one)
    assert args.node_namespace == '/rog/run' and args.namespace_note is None
    assert {e[settings.FLEET_PLACED_ENV] for _, e in started.values()} == {'/rog/run'}
    moved = rog_server.build_parser().parse_args(argv[:-1] + ['__ns:=/rog/lab1'])
    assert moved.namespace_note.endswith('-p namespace:=/rog/lab1')
