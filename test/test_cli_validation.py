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
"""Bad options are refused up front: one line naming the option, exit 2, nothing started."""

import argparse
import os
import subprocess
import sys

import pytest
from rog_ros import cli, cli_sim
from rog_ros.experiments import compare as compare_mod
from rog_ros.nodes import fleet as cli_fleet
from rog_ros.nodes import plan as fleet
from rog_ros.sim import simulator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def nothing_starts(monkeypatch):
    """Fail the test if a run, a process pool or a node process would start."""
    def forbidden(*args, **kwargs):
        raise AssertionError('started work although the options were bad')
    monkeypatch.setattr(subprocess, 'Popen', forbidden)
    monkeypatch.setattr(compare_mod, 'run_in_processes', forbidden)
    monkeypatch.setattr('rog_ros.experiments.bench_faults.bench_faults', forbidden)
    monkeypatch.setattr(compare_mod, '_run_one', forbidden)
    monkeypatch.setattr(compare_mod, 'compare', forbidden)
    monkeypatch.setattr(simulator, 'simulate', forbidden)
    monkeypatch.setattr(cli_fleet.Supervisor, 'start', forbidden)
    monkeypatch.setattr('rog_ros.experiments.toy.run_toy', forbidden)
    monkeypatch.setattr('rog_ros.experiments.reproduce.reproduce', forbidden)


CASES = [
    (['sim', '--workers', '-3'], '--workers'),
    (['sim', '--iterations', '-1'], '--iterations'),
    (['sim', '--staleness', '-1'], '--staleness'),
    (['sim', '--seed', '-1'], '--seed'),
    (['sim', '--workload', 'nope'], '--workload'),
    (['sim', '--trace', 'missing.csv'], '--trace'),
    (['sim', '--sync', 'foo'], '--sync'),
    (['sim', '--toy', '--systems', 'bsp,zzz:4'], '--systems'),
    (['sim', '--toy', '--systems', ','], '--systems'),
    (['sim', '--systems', 'bsp,rog:4'], '--systems'),      # not --toy: would run rog silently
    (['compare', '--workers', '-3', '--out', 'x'], '--workers'),
    (['compare', '--iterations', '0', '--out', 'x'], '--iterations'),
    (['compare', '--seeds', '0,x', '--out', 'x'], '--seeds'),
    (['compare', '--seeds', '-1', '--out', 'x'], '--seeds'),
    (['compare', '--seeds', '0,1,0', '--out', 'x'], '--seeds lists 0 more than once'),
    (['compare', '--systems', 'rog:4,bsp,rog:4', '--out', 'x'],
     '--systems lists rog:4 more than once'),
    (['reproduce', '--seeds', '2,2', '--out', 'x'], '--seeds lists 2 more than once'),
    # ran (each part of) mpcol's set twice into one folder
    (['reproduce', '--workloads', 'mpcol,mpcol', '--out', 'x'],
     '--workloads lists mpcol more than once'),
    (['compare', '--systems', 'rog:4,unknown', '--out', 'x'], '--systems'),
    (['compare', '--systems', 'ssp:-2', '--out', 'x'], '--systems'),
    (['compare', '--jobs', '0', '--out', 'x'], '--jobs'),
    (['compare', '--evaluations', '0', '--out', 'x'], '--evaluations'),
    (['sim', '--evaluations', '-2'], '--evaluations'),
    (['sim', '--toy', '--evaluations', '10'], '--evaluations'),
    (['compare', '--workload', 'nope', '--out', 'x'], '--workload'),
    (['compare', '--trace', 'missing.csv', '--out', 'x'], '--trace'),
    (['compare', '--workload', 'toy', '--init-model', 'missing.pt', '--out', 'x'],
     '--init-model'),
    (['reproduce', '--workloads', 'mpcol,bad', '--out', 'x'], '--workloads'),
    (['reproduce', '--workers', '0', '--out', 'x'], '--workers'),
    (['reproduce', '--seeds', 'a', '--out', 'x'], '--seeds'),
    (['reproduce', '--iterations', '-5', '--out', 'x'], '--iterations'),
    (['reproduce', 'adacomp', '--workers', '8', '--workloads', 'eacol', '--out', 'x'],
     '--workloads, --workers: rog reproduce adacomp runs'),
    (['reproduce', 'aet', '--no-eacol-m', '--out', 'x'], '--no-eacol-m: rog reproduce aet'),
    (['fleet', '--trace', 'missing.csv'], '--trace'),
    (['fleet', '--workers', '-3'], '--workers'),
    (['fleet', '--workers', '3', '--min-workers', '4'], '--min-workers'),
    (['fleet', '--workload', 'nope'], '--workload'),
    (['fleet', '--staleness', '-1'], '--staleness'),
    (['fleet', '--sync', 'foo'], '--sync'),
    (['fleet', '--sync', 'adasgd'], '--sync'),
    (['fleet', '--sync', 'aet'], '--sync'),
    (['fleet', '--sync', 'gsp+gds'], '--sync'),
    (['fleet', '--sync', 'asgd', '--min-workers', '2'], '--min-workers'),
    (['fleet', '--sync', 'gsp', '--absence-timeout', '20'], '--absence-timeout'),
    (['fleet', '--absence-timeout', '5'], '--absence-timeout) 5: a worker waiting for its pull'),
    (['robot', '--role', 'server', '--absence-timeout', '15.9'],
     'absence_timeout (--absence-timeout) 15.9: '),
    (['fleet', '--iterations', '0'], '--iterations'),
    (['fleet', '--eval-every', '0'], '--eval-every'),
    (['fleet', '--lr', '-0.1'], '--lr'),
    (['fleet', '--lr', 'nan'], '--lr'),
    (['fleet', '--trace-scale', '0'], '--trace-scale'),
    # every node started, then refused its trace (rates not finite): now one line, up front
    (['fleet', '--trace', 'indoors', '--trace-scale', '1e308'],
     'trace_scale (--trace-scale) must be in [1e-06, 1000000], got 1e+308'),
    (['fleet', '--deadline-floor', '11'], '--deadline-floor'),
    (['fleet', '--timeout', '-1'], '--timeout'),
    (['fleet', '--domain-id', '999'], '--domain-id'),
    (['fleet', '--config', 'missing.yaml'], 'missing.yaml'),
    (['fleet', '--namespace', 'fleet2'], '--namespace'),          # relative: a traceback once
    (['fleet', '--namespace', '/lab//fleet'], '--namespace'),
    (['fleet', '--namespace', '//rog'], '--namespace'),           # DDS rt//rog/...: never met
    (['fleet', '--sync', 'bsp', '--staleness', '4'], '--staleness does not apply to --sync bsp'),
    (['fleet', '--sync', 'adacomp', '--staleness', '2'], '--staleness does not apply'),
    (['robot', '--role', 'server', '--sync', 'bsp', '--staleness', '4'],
     '--staleness does not apply to --sync bsp'),
    (['robot', '--role', 'server', '--model-out', 'm.pt'], '--model-out applies to --role worker'),
    (['fleet', '--namespace', '/lab/2nd'], '--namespace'),
    (['fleet', '--namespace', '/lab-a'], '--namespace'),
    (['fleet', '--namespace', '/_lab'], '--namespace'),           # the transport's rule
    (['fleet', '--namespace', '/lab__a'], '--namespace'),
    # 0 s was in range: every node of the fleet started and failed at once ('no peer ...
    # after 0 s'), a worker robot stopped the first time it waited for a pull
    (['fleet', '--startup-timeout', '0'], 'startup_timeout (--startup-timeout) 0: 0 gives up'),
    (['robot', '--role', 'server', '--startup-timeout', '0.0'], '--startup-timeout) 0: 0 gives'),
    (['robot', '--role', 'worker', '--rank', '0', '--server-timeout', '0'],
     'server_timeout (--server-timeout) 0: 0 gives up at once'),
]


@pytest.mark.parametrize('argv,option', CASES, ids=[' '.join(c[0]) for c in CASES])
def test_bad_option_is_one_line_exit_2_and_starts_nothing(argv, option, nothing_starts,
                                                          capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f'rog {argv[0]}: ') and option in lines[0]
    assert 'Traceback' not in captured.err
    assert not os.listdir(tmp_path)                # no output directory, no logs


@pytest.mark.parametrize('argv, said', [
    (['--threads', '100000'], '--threads must be <= 1024, got 100000'),   # SIGSEGV in torch
    (['--staleness', '1001'], '--staleness must be <= 1000, got 1001'),   # the engines' bound
])
def test_bench_overhead_bounds_threads_and_staleness(argv, said, capsys, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError('the benchmark started although the options were bad')
    monkeypatch.setattr('rog_ros.experiments.bench.bench_overhead', forbidden)
    assert cli.main(['bench', 'overhead'] + argv) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f'rog bench overhead: {said}']


BAD_FILES = {
    'chunk_bytes: 10': 'chunk_bytes',
    'window: 0': 'window',
    'rate_hz: 0': 'rate_hz',
    'seed: -1': 'seed',
    'workers: "3"': 'workers',
    'startup_timeout: -1': 'startup_timeout',
    'burst_bytes: 0': 'burst_bytes',
    'trace: missing.csv': 'trace',
    'absence_timeout: 8.0': 'absence_timeout (--absence-timeout) 8: ',
    'startup_timeout: 0.0': 'startup_timeout (--startup-timeout) 0: 0 gives up at once',
}


@pytest.mark.parametrize('line', sorted(BAD_FILES))
def test_bad_parameter_file_key_is_named(line, nothing_starts, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / 'bad.yaml'
    cfg.write_text(f'/**:\n  ros__parameters:\n    {line}\n')
    assert cli.main(['fleet', '--config', str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and BAD_FILES[line] in err[0]
    assert os.listdir(tmp_path) == ['bad.yaml']


def test_broken_yaml_is_one_line(nothing_starts, capsys, tmp_path):
    cfg = tmp_path / 'broken.yaml'
    cfg.write_text('rog_server: [\n')
    assert cli.main(['fleet', '--config', str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'not valid YAML' in err[0] and 'broken.yaml' in err[0]


@pytest.mark.parametrize('content, what', [
    (bytes(range(128, 256)), 'not a text file in UTF-8'),          # a binary file given by mistake
    (b'workers:\n  x: 1\n', "'workers' needs a ros__parameters mapping"),
])
def test_a_parameter_file_that_is_not_one_is_named_in_one_line(nothing_starts, capsys,
                                                               tmp_path, content, what):
    cfg = tmp_path / 'params.bin'
    cfg.write_bytes(content)
    for command in (['fleet'], ['robot', '--role', 'server']):
        assert cli.main(command + ['--config', str(cfg)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f'rog {command[0]}: parameter file {cfg}: {what}' + (
            ' (a ROS 2 parameter YAML file is expected)' if 'UTF-8' in what else '')]


def test_the_plan_itself_validates_every_node(tmp_path):
    # the ros2 launch path plans through the same function
    with pytest.raises(ValueError, match=r'trace \(--trace\)'):
        fleet.plan(overrides={'trace': str(tmp_path / 'missing.csv')})
    with pytest.raises(ValueError, match='rate_hz'):
        fleet.plan({'netmon': {'rate_hz': 0}})
    with pytest.raises(ValueError, match='bus'):
        fleet.plan({'/**': {'bus': 'carrier_pigeon'}})
    with pytest.raises(ValueError, match='nodes'):
        fleet.plan({'netmon': {'nodes': [0, 7]}})
    assert len(fleet.plan(overrides={'trace': 'indoors'})) == 5    # good options still plan


def test_good_trace_file_passes_and_bad_format_is_named(tmp_path):
    good = tmp_path / 'good.csv'
    good.write_text('t_seconds,mbps\n0,5\n1,6\n')
    assert fleet.plan(overrides={'trace': str(good)})
    bad = tmp_path / 'bad.csv'
    bad.write_text('t_seconds,mbps\n0,five\n')
    with pytest.raises(ValueError, match='trace'):
        fleet.plan(overrides={'trace': str(bad)})


def test_fleet_refusal_as_a_new_user_sees_it(tmp_path):
    """A real process: one line on stderr, exit 2, no node log directory."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, '-m', 'rog_ros.cli', 'fleet', '--trace',
                           'missing.csv', '--out', str(tmp_path / 'run')],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "rog fleet: trace (--trace): 'missing.csv' is neither a preset (clean, "
        'dynamic_obstacles, indoors, outages, outdoors, outdoors_raw, through_wall) nor an '
        'existing file']
    assert not (tmp_path / 'run').exists()


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    """``rog ... | head``: exit as if by SIGPIPE (141), no traceback, no 'Broken pipe' line."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, '-m', 'rog_ros.cli', 'trace', 'stats', 'outdoors'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=tmp_path)
    proc.stdout.close()               # before the first line: every write meets a closed pipe
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(120) == 141, err
    assert err == ''


@pytest.mark.parametrize('errno_', [28, 30])
def test_a_full_or_read_only_disk_is_one_line_naming_the_file(errno_, tmp_path, capsys,
                                                              monkeypatch):
    # rog sim on a full disk ended in a 40-line traceback whose error named no file
    from rog_ros import atomic, cli

    def _fail(fd):
        raise OSError(errno_, os.strerror(errno_))
    monkeypatch.setattr(atomic.os, 'fsync', _fail)
    out = tmp_path / 'run'
    status = cli.main(['sim', '--workload', 'toy', '--workers', '2', '--iterations', '5',
                       '--out', str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and 'Traceback' not in '\n'.join(err)
    assert err[-1].startswith(f'rog sim: cannot write: {out}{os.sep}')
    assert err[-1].endswith(f'{os.strerror(errno_)}; free some space or choose another '
                            'output folder')
    assert not (out / 'summary.json').exists()


def test_other_os_errors_are_not_hidden(monkeypatch):
    from rog_ros import cli

    def _fail(args):
        raise OSError(5, 'Input/output error')
    parser = cli.build_parser()
    args = parser.parse_args(['sim', '--workload', 'toy'])
    monkeypatch.setattr(cli, 'build_parser', lambda: parser)
    monkeypatch.setattr(parser, 'parse_known_args', lambda argv: (args, []))
    monkeypatch.setattr(args, 'func', _fail)
    with pytest.raises(OSError, match='Input/output'):
        cli.main(['sim'])


@pytest.mark.parametrize('good', ['/rog', '/lab/fleet_2', '/x_1', '/A1'])
def test_absolute_ros_namespaces_pass(good):
    from rog_ros import checks
    assert checks.namespace('namespace', good) == good


def test_an_interrupted_compare_says_which_runs_it_keeps(tmp_path, capsys, monkeypatch):
    def two_runs_then_ctrl_c(*args, **kwargs):
        for name in ('rog-4-seed0', 'bsp-seed0'):
            (tmp_path / 'runs' / name).mkdir(parents=True)
            (tmp_path / 'runs' / name / 'summary.json').write_text('{"system": "x"}')
        (tmp_path / 'runs' / 'ssp-4-seed0').mkdir()       # started, not finished
        (tmp_path / 'summary.json').write_text('{"systems": []}')    # a comparison's own
        raise KeyboardInterrupt
    monkeypatch.setattr(compare_mod, 'compare', two_runs_then_ctrl_c)
    assert cli.main(['compare', '--workload', 'toy', '--out', str(tmp_path)]) == 130
    assert capsys.readouterr().err.strip().endswith(
        f'rog compare: interrupted; 2 finished run(s) in {tmp_path} are kept, and the same '
        'command reuses them')


def test_a_compare_whose_runs_missed_the_target_says_what_its_marks_mean(tmp_path, capsys,
                                                                         monkeypatch):
    # Setup: 30 iterations, where no MPCOL run reaches the target: every time cell is '>'
    rows = [{'system': s, 'runs': 1, 'failed': 0, 'reached_target': '0/1',
             'reached_target_count': 0} for s in ('bsp', 'rog:4')]
    rows[1].update(reached_target='1/1', reached_target_count=1)
    result = {'meta': {'target_accuracy': 0.8347, 'iteration_budget': 30}, 'systems': rows}
    monkeypatch.setattr(compare_mod, 'compare', lambda *args, **kwargs: result)
    # Execute
    status = cli.main(['compare', '--workload', 'toy', '--out', str(tmp_path)])
    # Assert: one line names the runs, the target, the budget and the option to change
    assert status == 0
    assert capsys.readouterr().err.strip() == (
        'rog compare: 1 of 2 runs did not reach the target accuracy 0.8347 within 30 '
        "iterations ('>' in the table: a time past the run's end); more --iterations give "
        'them the time')
    rows[0].update(reached_target='1/1', reached_target_count=1)
    cli.main(['compare', '--workload', 'toy', '--out', str(tmp_path)])
    assert 'did not reach' not in capsys.readouterr().err


def test_a_compare_prints_its_main_columns_aligned_and_names_the_full_report(
        tmp_path, capsys, monkeypatch):
    # Setup: two systems with the cells of an aggregate; the report's 17-column Markdown
    # table (about 250 characters a row) was printed as it was, wrapped by every terminal
    rows = [{'system': s, 'runs': 5, 'failed': 0, 'reached_target': '5/5',
             'reached_target_count': 5, 'time_to_target_s_median': t,
             'time_to_target_s_p25': t - 1, 'time_to_target_s_p75': t + 2,
             'final_accuracy': a, 'final_accuracy_std': 0.002, 's_per_iteration': 1.25,
             'stall_s_per_iteration': 0.5, 'bytes_up': 2e6, 'bytes_down': 3e6}
            for s, t, a in (('bsp', 27.1, 0.861), ('rog:4', 9.3, 0.855))]
    result = {'meta': {'target_accuracy': 0.8347, 'iteration_budget': 300}, 'systems': rows}
    monkeypatch.setattr(compare_mod, 'compare', lambda *args, **kwargs: result)
    # Execute
    assert cli.main(['compare', '--workload', 'toy', '--out', str(tmp_path)]) == 0
    # Assert: a header and one line per system, columns aligned, under 90 characters
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split('  ')[0] == 'system' and 'time to target s [IQR]' in lines[0]
    assert lines[1].startswith('bsp ') and '27.1 [26.1-29.1]' in lines[1]
    assert lines[2].startswith('rog:4 ') and ' 0.855 ' in lines[2]
    assert lines[1].index('5/5') == lines[2].index('5/5')
    assert max(len(line) for line in lines[:3]) < 90
    assert lines[-1] == f'report (every column, plots): {tmp_path}/report.md'


# ----------------------------------------------------------------- robustness of every command
MORE_CASES = [
    (['sim', '--sync', 'rog:'], '--sync'),                          # was taken as rog:4
    (['sim', '--toy', '--systems', 'rog:'], '--systems'),
    (['compare', '--systems', 'bsp,rog:', '--out', 'c1'], '--systems'),
    (['sim', '--sync', 'rog:8', '--staleness', '2'], '--staleness 2 conflicts'),
    (['sim', '--sync', 'bsp', '--staleness', '7'], '--staleness does not apply'),
    (['sim', '--sync', 'adacomp', '--staleness', '7'], '--staleness does not apply'),
    (['sim', '--toy', '--out', 'x'], '--out does not apply to --toy'),
    (['sim', '--toy', '--trace', 'indoors'], '--trace does not apply to --toy'),
    (['sim', '--toy', '--workload', 'toy', '--sync', 'bsp'], '--workload, --sync do not apply'),
    (['sim', '--toy', '--model', 'convmlp-s'], '--model does not apply'),
    (['sim', '--toy', '--real-compute'], '--real-compute does not apply'),
    (['sim', '--toy', '--staleness', '3'], '--staleness does not apply'),
    (['sim', '--real-compute'], '--real-compute applies to a --model'),
    (['compare', '--real-compute', '--out', 'x'], '--real-compute applies to a --model'),
    (['sim', '--toy', '--systems', 'bsp,adacomp'], 'adacomp has engines of its own'),
    (['sim', '--toy', '--systems', 'rog:4,gsp'], 'bsp, ssp:S, rog:S and flown:S'),
    (['chaos', '--scenario', 'all,flood'], 'cannot be combined'),
    (['robot', '--role', 'worker'], '--rank'),                      # was rank 0, silently
    (['robot', '--role', 'server', '--rank', '1'], '--rank applies to --role worker'),
    (['robot', '--role', 'worker', '--rank', '0', '--peers', ',,'], '--peers'),
    (['robot', '--role', 'worker', '--rank', '0', '--peers', '10.0.0.1,,x'], '--peers'),
    (['robot', '--role', 'worker', '--rank', '0', '--server-host', ''], '--server-host'),
    (['robot', '--role', 'worker', '--rank', '0', '--server-host', ' '], '--server-host'),
    # integers past what torch and numpy take: an OverflowError traceback, or every run of a
    # comparison failing one by one (bounds as rog fleet's settings table has them)
    (['sim', '--staleness', '99999999999999999999'],
     '--staleness must be <= 1000, got 99999999999999999999'),
    (['sim', '--sync', 'rog:99999999999999999999'],
     "--sync: the staleness threshold S of 'rog:99999999999999999999' must be in [0, 1000], "
     'got 99999999999999999999'),
    (['sim', '--sync', 'rog', '--staleness', '1001'], '--staleness must be <= 1000, got 1001'),
    (['sim', '--seed', '99999999999999999999'],
     '--seed must be <= 2147483647, got 99999999999999999999'),
    (['sim', '--seed', '2147483648'], '--seed must be <= 2147483647, got 2147483648'),
    (['sim', '--iterations', '99999999999999999999'],
     '--iterations must be in [1, 1000000], got 99999999999999999999'),
    (['sim', '--toy', '--iterations', '1000001'],
     '--iterations must be in [1, 1000000], got 1000001'),
    (['sim', '--toy', '--systems', 'bsp,ssp:1001'],
     "--systems: the staleness threshold S of 'ssp:1001' must be in [0, 1000], got 1001"),
    (['compare', '--seeds', '0,99999999999999999999', '--out', 'x'],
     '--seeds must be <= 2147483647, got 99999999999999999999'),
    (['compare', '--systems', 'bsp,flown:5000#no-outage', '--out', 'x'],
     "--systems: the staleness threshold S of 'flown:5000#no-outage' must be in [0, 1000], "
     'got 5000'),
    (['compare', '--iterations', '1000001', '--out', 'x'],
     '--iterations must be in [1, 1000000], got 1000001'),
    # said as rog bench faults --jobs and --iterations say theirs: the whole range
    (['compare', '--jobs', '1025', '--out', 'x'], '--jobs must be in [1, 1024], got 1025'),
    (['compare', '--evaluations', str(10 ** 12), '--out', 'x'],
     '--evaluations must be in [1, 100000], got 1000000000000'),
    (['sim', '--toy', '--evaluations', '100001'], '--evaluations must be in [1, 100000]'),
    (['reproduce', '--seeds', '99999999999999999999', '--out', 'x'],
     '--seeds must be <= 2147483647, got 99999999999999999999'),
    (['reproduce', 'adacomp', '--seeds', '2147483648', '--out', 'x'],
     '--seeds must be <= 2147483647, got 2147483648'),
    (['reproduce', '--iterations', '1000001', '--out', 'x'],
     '--iterations must be in [1, 1000000], got 1000001'),
    # one system under two spellings: the same runs twice, reported as two systems
    (['compare', '--systems', 'rog:4,rog,rog:04', '--out', 'x'],
     '--systems lists rog:4 and rog, two spellings of rog:4; list it once'),
    (['compare', '--systems', 'bsp,SSP:2#no-outage,ssp: 2 #no-outage', '--out', 'x'],
     '--systems lists SSP:2#no-outage and ssp: 2 #no-outage, two spellings of '
     'ssp:2#no-outage; list it once'),
    (['compare', '--systems', 'gsp:3,GSP:3', '--out', 'x'],
     '--systems lists gsp:3 and GSP:3, two spellings of gsp:3; list it once'),
    (['sim', '--toy', '--systems', 'bsp,rog,rog:4'],
     '--systems lists rog and rog:4, two spellings of rog:4; list it once'),
]


@pytest.fixture
def nothing_runs(nothing_starts, monkeypatch):
    """Also fail on a benchmark, a chaos scenario, a generated trace or a replay."""
    def forbidden(*args, **kwargs):
        raise AssertionError('started work although the options were bad')
    for target in ('rog_ros.experiments.bench.bench_codec',
                   'rog_ros.experiments.bench_server.bench_server',
                   'rog_ros.experiments.bench_faults.bench_faults',
                   'rog_ros.experiments.bench.bench_overhead',
                   'rog_ros.experiments.bench_transport.bench_transport',
                   'rog_ros.experiments.chaos.run_scenarios',
                   'rog_ros.net.traces.generate', 'rog_ros.net.cli_trace.replay',
                   'rog_ros.nodes.keystore.create_keystore'):
        monkeypatch.setattr(target, forbidden)


def _one_line(capsys, prefix: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), captured.err
    assert 'Traceback' not in captured.err
    return lines[0]


@pytest.mark.parametrize('argv,text', MORE_CASES, ids=[' '.join(c[0]) for c in MORE_CASES])
def test_options_a_command_would_ignore_or_misread_are_refused(argv, text, nothing_runs,
                                                               capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    assert text in _one_line(capsys, f'rog {argv[0]}: ')
    assert not os.listdir(tmp_path)


SUB_CASES = [
    (['bench', 'faults', '--systems', 'rog:4,rog:'], '--systems'),
    (['bench', 'codec', '--params', '100', '--repeats', '0'], '--repeats must be >= 1'),
    (['bench', 'codec', '--params', '100', '--repeats', '-1'], '--repeats must be >= 1'),
    (['bench', 'codec', '--params', '1000000000000'], '--params must be <= 500000000'),
    (['bench', 'transport', '--duration', 'nan'], '--duration must be finite'),
    (['bench', 'transport', '--duration', 'inf'], '--duration must be finite'),
    (['bench', 'transport', '--duration', '-1'], '--duration must be > 0'),
    (['bench', 'transport', '--duration', '0.01'], '--duration must be >= 1 s'),
    (['bench', 'overhead', '--iterations', '0'], '--iterations must be >= 1'),
    (['bench', 'overhead', '--repeats', '0'], '--repeats must be >= 1'),
    (['bench', 'overhead', '--workers', '0'], '--workers must be >= 1'),
    (['bench', 'overhead', '--threads', '0'], '--threads must be >= 1'),
    # absurd counts: hours of work or a memory blow-up, now one line with the range
    (['bench', 'codec', '--params', '100', '--repeats', str(10 ** 12)],
     '--repeats must be in [1, 10000], got 1000000000000'),
    (['bench', 'overhead', '--repeats', str(10 ** 12)], '--repeats must be in [1, 10000]'),
    (['bench', 'overhead', '--iterations', str(10 ** 12)], '--iterations must be in [1, 10000]'),
    (['bench', 'server', '--iterations', str(10 ** 12)], '--iterations must be in [1, 10000]'),
    (['bench', 'server', '--iterations', '0'], '--iterations must be >= 1'),
    (['bench', 'server', '--workers', '4096'], '--workers must be in [1, 1024]'),
    (['bench', 'server', '--staleness', str(10 ** 12)], '--staleness must be <= 1000'),   # hung
    (['bench', 'server', '--row-params', str(10 ** 12)],     # asked torch for 132 PB: traceback
     '--row-params must be in [1, 65536]'),
    (['bench', 'server', '--row-params', '60000'], 'lower --workers or --row-params'),
    (['bench', 'faults', '--jobs', str(10 ** 12)], '--jobs must be in [1, 1024]'),
    (['bench', 'faults', '--jobs', '0'], '--jobs must be >= 1'),
    (['bench', 'faults', '--seeds', '0-99999,100000-199999'], 'is more than 100,000 seeds'),
    (['bench', 'faults', '--seeds', str(2 ** 31)], 'seeds go up to 2147483647'),   # 'broken'
    # a system given twice was run once, silently (rog compare refuses it)
    (['bench', 'faults', '--systems', 'bsp,rog:4,bsp'], '--systems lists bsp more than once'),
    (['bench', 'faults', '--systems', 'rog,rog:4'], 'rog and rog:4, two spellings of rog:4'),
    (['security', 'keystore', 'ks', '--per-rank', '100000'], '--per-rank must be <= 1000'),
    (['security', 'keystore', 'ks', '--per-rank', '-1'], '--per-rank must be >= 0'),
    (['security', 'keystore', 'ks', '--days', '0'], '--days must be >= 1'),
    (['security', 'keystore', 'ks', '--days', '10000000'], '--days must be <='),
    (['security', 'keystore', 'ks', '--domain-id', '300'], '--domain-id must be <= 232'),
]


@pytest.mark.parametrize('argv,text', SUB_CASES, ids=[' '.join(c[0]) for c in SUB_CASES])
def test_bad_subcommand_option_is_one_line_exit_2(argv, text, nothing_runs, capsys, tmp_path,
                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    assert text in _one_line(capsys, f'rog {argv[0]} {argv[1]}: ')
    assert not os.listdir(tmp_path)


def test_the_keystore_itself_names_the_flags(tmp_path):
    from rog_ros.nodes import keystore
    with pytest.raises(keystore.KeystoreError, match='--per-rank'):
        keystore.create_keystore(tmp_path / 'ks', per_rank=100000)
    with pytest.raises(keystore.KeystoreError, match='--days'):
        keystore.create_keystore(tmp_path / 'ks', days=0)
    assert not os.listdir(tmp_path)


OUT_CASES = [
    ['sim', '--workload', 'toy', '--iterations', '2', '--workers', '2', '--out', '{out}'],
    ['compare', '--workload', 'toy', '--out', '{out}'],
    ['reproduce', '--out', '{out}'],
    ['chaos', '--scenario', 'flood', '--out', '{out}'],
    ['fleet', '--out', '{out}'],
    ['robot', '--role', 'worker', '--rank', '0', '--logs', '{out}'],
    ['robot', '--role', 'server', '--out', '{out}'],
]


@pytest.mark.parametrize('where', ['the file', 'under the file'])
@pytest.mark.parametrize('argv', OUT_CASES, ids=[' '.join(c[:2]) for c in OUT_CASES])
def test_an_output_directory_that_cannot_be_made_is_refused_up_front(argv, where, nothing_runs,
                                                                     capsys, tmp_path,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'somefile.csv').write_text('x')
    out = 'somefile.csv' if where == 'the file' else os.path.join('somefile.csv', 'sub')
    argv = [a.format(out=out) for a in argv]
    assert cli.main(argv) == 2
    option = argv[argv.index(out) - 1]
    line = _one_line(capsys, f'rog {argv[0]}: ')
    assert f'{option} {out}: ' in line and 'not a directory' in line
    assert os.listdir(tmp_path) == ['somefile.csv']


@pytest.mark.skipif(not os.path.isdir('/proc/self'), reason='needs Linux /proc')
def test_an_output_directory_on_a_virtual_file_system_is_refused(nothing_runs, capsys,
                                                                 tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(['sim', '--workload', 'toy', '--out', '/proc/rog_x']) == 2
    assert 'cannot create or write' in _one_line(capsys, 'rog sim: --out /proc/rog_x: ')
    assert not os.path.exists('/proc/rog_x')


def test_the_output_probe_leaves_nothing_behind(tmp_path):
    from rog_ros import checks
    deep = tmp_path / 'a' / 'b' / 'c'
    assert checks.output_dir('--out', str(deep)) == str(deep)
    assert not os.listdir(tmp_path)                  # created to try, removed again
    (tmp_path / 'kept').mkdir()
    checks.output_dir('--out', str(tmp_path / 'kept'))
    assert os.listdir(tmp_path) == ['kept'] and not os.listdir(tmp_path / 'kept')
    with pytest.raises(checks.ConfigError, match='--out'):
        checks.output_dir('--out', '')


def test_bounds_and_spellings_that_are_fine_pass(tmp_path):
    """Check that the edges of each range, and systems that differ in meaning, are taken."""
    from rog_ros import checks
    for spec in ('rog:1000', 'ssp:0', 'flown:1000#no-outage', 'bsp', 'gsp:99999999999'):
        assert checks.system('--systems', spec) == spec
    assert checks.int_list('--seeds', '0,2147483647', 0, 2 ** 31 - 1) == [0, 2147483647]
    # bsp is not ssp:0 (whole-model transfers), a tag changes the run, and a reference
    # system's argument is read by its runner, so only its spelling is compared
    specs = ['bsp', 'ssp:0', 'rog', 'rog#no-outage', 'rog:5', 'gsp', 'gsp:3', 'adacomp:0.1',
             'adacomp:0.10']
    assert checks.distinct('--systems', specs, checks.system_key) == specs
    assert [checks.system_key(s) for s in ('rog', 'ROG: 04 ', 'rog:4#', 'rog#a # b')] == [
        'rog:4', 'rog:4', 'rog:4', 'rog:4#a#b']
    args = cli.build_parser().parse_args(['sim', '--workload', 'toy', '--trace', 'clean',
                                          '--seed', '2147483647', '--staleness', '1000',
                                          '--iterations', '1000000'])
    cli_sim._check_sim(args)


@pytest.mark.parametrize('argv, target', [
    (['sim', '--workload', 'toy', '--trace', 'clean'], 'rog_ros.sim.simulator.simulate'),
    (['sim', '--workload', 'toy', '--trace', 'clean', '--workload-option', 'size=8'],
     'rog_ros.workloads.options.check'),
    (['sim', '--workload', 'toy', '--trace', 'clean', '--init-model', 'm.pt'],
     'rog_ros.sim.simulator.config_workload'),
    (['compare', '--workload', 'toy', '--out', 'out'], 'rog_ros.experiments.compare.compare'),
    (['compare', '--workload', 'toy', '--out', 'out', '--workload-option', 'size=8'],
     'rog_ros.workloads.options.check'),
    (['reproduce', 'adacomp', '--out', 'out'], 'rog_ros.experiments.reproduce.REPRODUCTIONS'),
])
def test_a_key_error_of_a_workload_is_one_line_without_quotes(argv, target, capsys, tmp_path,
                                                              monkeypatch):
    """A plug-in's KeyError: its message on one line, exit 2 (was quoted, or a traceback)."""
    from rog_ros.experiments import reproduce

    def missing(*args, **kwargs):
        """Fail as a workload registry that knows no such workload."""
        raise KeyError('workload nope: not registered (registered: mpcol, toy)')
    monkeypatch.chdir(tmp_path)
    if target.endswith('REPRODUCTIONS'):
        monkeypatch.setitem(reproduce.REPRODUCTIONS, 'adacomp', missing)
    else:
        monkeypatch.setattr(target, missing)
    assert cli.main(argv) == 2
    option = '--workload-option: ' if '--workload-option' in argv else (
        '--init-model: ' if '--init-model' in argv else '')
    assert capsys.readouterr().err.strip().splitlines() == [
        f'rog {argv[0]}: {option}workload nope: not registered (registered: mpcol, toy)']
    assert not os.listdir(tmp_path)                # a folder it made is removed again


def test_an_empty_staleness_is_refused_by_the_policy_parser():
    from rog_ros.protocol.policies import make_policy
    for spec in ('rog:', 'ssp: ', 'flown:#no-outage'):
        with pytest.raises(ValueError, match="after ':'"):
            make_policy(spec)
    assert make_policy('rog:4').staleness == 4 and make_policy('rog').staleness == 4


class _Reached(Exception):
    pass


@pytest.mark.parametrize('argv,system', [
    (['--sync', 'rog', '--staleness', '8'], 'rog:8'),
    (['--sync', 'rog:8', '--staleness', '8'], 'rog:8'),     # the same threshold twice: fine
    (['--sync', 'rog:8'], 'rog:8'),
    (['--sync', 'bsp'], 'bsp'),
    ([], 'rog:4'),
])
def test_a_staleness_that_fits_the_sync_still_runs(argv, system, monkeypatch, tmp_path):
    seen = []

    def simulate(cfg, progress=None):
        seen.append(cfg.system)
        raise _Reached()
    monkeypatch.setattr(simulator, 'simulate', simulate)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(_Reached):
        cli.main(['sim', '--workload', 'toy', '--trace', 'clean'] + argv)
    assert seen == [system]


def test_the_toy_still_runs_its_default_systems(monkeypatch, capsys):
    seen = []

    class Result:

        def row(self):
            return ['x'] * 9

    def run_toy(system, **kwargs):
        seen.append(system)
        return Result()
    monkeypatch.setattr('rog_ros.experiments.toy.run_toy', run_toy)
    assert cli.main(['sim', '--toy', '--iterations', '2', '--workers', '2']) == 0
    assert seen == cli_sim.TOY_SYSTEMS.split(',')


TRACE_CASES = [
    (['gen', 'indoors', '--out', 'g.csv', '--duration', 'inf'], '--duration must be finite'),
    (['gen', 'indoors', '--out', 'g.csv', '--duration', 'nan'], '--duration must be finite'),
    (['gen', 'indoors', '--out', 'g.csv', '--duration', '-5'], '--duration must be > 0'),
    (['gen', 'clean', '--out', 'g.csv', '--duration', '1e7'], '1e+08 samples; at most'),
    (['gen', 'clean', '--out', 'g.csv', '--dt', '1e-9'], '3e+11 samples; at most'),
    (['gen', 'clean', '--out', 'g.csv', '--dt', '0'], '--dt must be > 0'),
    (['gen', 'clean', '--out', 'g.csv', '--dt', '1000'], '--dt 1000 exceeds --duration 300'),
    (['stats', 'indoors', '--duration', 'inf'], '--duration must be finite'),
    (['stats', 'indoors', '--duration', '1e9'], 'samples of 0.1 s; at most'),
    # stats and plot have no --dt: their messages must not tell the user to change one
    (['stats', 'indoors', '--duration', '0.01'], '--duration 0.01 is shorter than one sample'),
    (['plot', 'indoors', '--out', 'p.png', '--duration', '0.01'], 'give at least 0.1'),
    (['stats', 'indoors', '--duration', '1e12'], 'at most 200,000 s)'),
    (['plot', 'indoors', '--out', 'p.png', '--duration', 'inf'], '--duration must be finite'),
]


@pytest.mark.parametrize('argv,text', TRACE_CASES, ids=[' '.join(c[0]) for c in TRACE_CASES])
def test_trace_durations_must_be_finite_and_bounded(argv, text, nothing_runs, capsys,
                                                    tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(['trace'] + argv) == 2
    line = _one_line(capsys, 'rog trace: ')
    assert text in line
    if argv[0] in ('stats', 'plot'):
        assert '--dt' not in line
    assert not os.listdir(tmp_path)


def _record(tmp_path, end='3.0'):
    path = tmp_path / 'rec.csv'
    path.write_text(f'# rog_ros trace: end_s={end} loop=1\nt_seconds,mbps\n0,5\n1,6\n2,7\n')
    return path


@pytest.mark.parametrize('duration,text', [
    ('inf', '--duration must be finite'), ('nan', '--duration must be finite'),
    ('-1', '--duration must be > 0'), ('1e9', 'replayed segments of this record; at most'),
])
def test_trace_replay_refuses_an_endless_duration(duration, text, nothing_runs, capsys,
                                                  tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _record(tmp_path)
    assert cli.main(['trace', 'replay', 'rec.csv', '--out', 'r.csv', '--duration',
                     duration]) == 2
    assert text in _one_line(capsys, 'rog trace: ')
    assert os.listdir(tmp_path) == ['rec.csv']


@pytest.mark.parametrize('end,text', [
    ('inf', 'end_s=inf must be finite'), ('nan', 'must be finite'),
    ('abc', "not a number (end_s='abc'"),
])
def test_a_hand_edited_trace_end_is_named_with_its_file(end, text, capsys, tmp_path,
                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    _record(tmp_path, end)
    assert cli.main(['trace', 'stats', 'rec.csv']) == 2
    line = _one_line(capsys, 'rog trace: rec.csv: ')
    assert text in line


SIGTERM_SCRIPT = r"""
import os, sys, time
from rog_ros import cli
from rog_ros.children import run_in_processes
from rog_ros.experiments import compare


def pool_then_wait(workload, trace, systems, workers, seeds, out, **kwargs):
    os.makedirs(os.path.join(out, 'runs'))
    for i, _ in run_in_processes(time.sleep, [(0,), (60,), (60,)], 2):
        print('pool running', file=sys.stderr, flush=True)


compare.compare = pool_then_wait
sys.exit(cli.main(['compare', '--workload', 'toy', '--out', sys.argv[1]]))
"""


@pytest.mark.parametrize('signame, status, said', [
    ('SIGTERM', 143, 'terminated (SIGTERM)'), ('SIGHUP', 129, 'hung up (SIGHUP)')])
def test_sigterm_stops_compare_like_ctrl_c(tmp_path, signame, status, said):
    """SIGTERM (or a hang-up) ends the pool cleanly: no leaked semaphores, no empty folder."""
    import signal
    import time
    out = tmp_path / 'cmp'
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    proc = subprocess.Popen([sys.executable, '-c', SIGTERM_SCRIPT, str(out)], cwd=tmp_path,
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()             # the pool is up and its workers sleep
        assert 'pool running' in first, first
        time.sleep(0.5)
        proc.send_signal(getattr(signal, signame))
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == status, err
    assert f'rog compare: {said}' in err
    assert 'leaked' not in err and 'Traceback' not in err, err
    assert not out.exists()


def test_a_tagged_sync_without_a_threshold_takes_the_staleness():
    from rog_ros.cli_sim import _system_spec
    from rog_ros.protocol.policies import make_policy
    assert _system_spec('rog#late_rows=0', 7) == 'rog:7#late_rows=0'
    pol = make_policy(_system_spec('rog#late_rows=0', 7))
    assert pol.staleness == 7 and not pol.late_rows
    assert _system_spec('rog:3#late_rows=0', 7) == 'rog:3#late_rows=0'
    assert _system_spec('bsp', 7) == 'bsp' and _system_spec('adacomp', 7) == 'adacomp'


def test_an_interrupted_reproduce_leaves_no_empty_folders_it_made(tmp_path, monkeypatch, capsys):
    from rog_ros.experiments import reproduce

    def interrupted(out, **kwargs):
        os.makedirs(os.path.join(out, 'runs', 'seed0'))
        raise KeyboardInterrupt
    monkeypatch.setitem(reproduce.REPRODUCTIONS, 'adacomp', interrupted)
    out = tmp_path / 'new'
    assert cli.main(['reproduce', 'adacomp', '--out', str(out)]) == 130
    assert not out.exists()
    assert 'rog reproduce: interrupted' in capsys.readouterr().err
    kept = tmp_path / 'kept'          # a folder the user had: left as it was
    kept.mkdir()
    assert cli.main(['reproduce', 'adacomp', '--out', str(kept)]) == 130
    assert kept.is_dir()


def test_the_key_path_printed_for_the_robots_pastes_into_a_shell(
        tmp_path, capsys, monkeypatch):
    import shlex
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'fleet keys').mkdir()
    assert cli.main(['security', 'key', 'fleet keys/lab key']) == 0
    line = capsys.readouterr().out
    pasted = shlex.split(line.split('give every node ', 1)[1])
    # the printed command names the file whole and absolute, as a robot's shell would read it
    assert pasted[:2] == ['--fleet-key-file', str(tmp_path / 'fleet keys' / 'lab key')]
    assert pasted[3] == f'ROG_FLEET_KEY_FILE={tmp_path / "fleet keys" / "lab key"}'


@pytest.mark.parametrize('argv, line', [
    (['sim', '--bogus'], 'rog sim: unrecognized arguments: --bogus; see rog sim --help'),
    (['doctor', 'extra'], 'rog doctor: unrecognized arguments: extra; see rog doctor --help'),
    (['trace', 'gen', 'outdoors', 'indoors', '--out', 'g.csv'],
     'rog trace gen: unrecognized arguments: indoors; see rog trace gen --help'),
    (['fleet', '--workrs', '3', '--out', 'f'],     # argparse printed 18 lines of usage first
     'rog fleet: unrecognized arguments: --workrs 3 (did you mean --workers?); see rog fleet '
     '--help'),
    (['sim', '--iteratons=5'],
     'rog sim: unrecognized arguments: --iteratons=5 (did you mean --iterations?); see rog sim '
     '--help'),
    (['bench', 'overhead', '--nope'],
     'rog bench overhead: unrecognized arguments: --nope; see rog bench overhead --help'),
])
def test_an_unknown_argument_is_one_line_naming_the_subcommand(argv, line, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    assert capsys.readouterr().err == line + '\n'


def test_an_unknown_command_is_one_line_with_the_commands():
    """Run ``rog simm`` in a process: one line naming the choices, status 2."""
    done = subprocess.run([sys.executable, '-m', 'rog_ros.cli', 'simm'], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ''
    assert done.stderr.count('\n') == 1, done.stderr
    assert done.stderr.startswith("rog: argument COMMAND: invalid choice: 'simm' (choose from ")
    assert done.stderr.endswith('; see rog --help\n')


@pytest.mark.parametrize('text, what', [
    # a misspelt section was ignored without a word, its settings with it
    ('rog_wroker:\n  ros__parameters:\n    workers: 3\n',
     "parameter file section 'rog_wroker': rog fleet, rog robot and the launch files apply "
     'the sections /**, '),
    ('rog_worker_0:\n  ros__parameters:\n    trace: missing.csv\n',
     "section 'rog_worker_0': rog fleet, rog robot and the launch files apply"),
    # (a traceback before)
    ('1:\n  ros__parameters:\n    workers: 3\n', 'section 1 is not a node name'),
    ('/**:\n  ros__parameters:\n    seed: [1, 2]\n',
     'seed (--seed) in the parameter file is a list, [1, 2]; it takes one value'),
    # read as its Python text, the list was "not KEY=VALUE" (ROS 2 refuses it as well)
    ("/**:\n  ros__parameters:\n    workload_options: ['hidden=64', 'x=1']\n",
     "workload_options (--workload-options): a list (['hidden=64', 'x=1']) where one string "
     "is expected; write the items in one string: 'hidden=64;x=1'"),
    ('/**:\n  ros__parameters:\n    trace: [indoors, outdoors]\n',
     "write the items in one string: 'indoors,outdoors'"),
    # PyYAML keeps the last of two equal keys: this ran a fleet of 5 robots, not 3
    ('/**:\n  ros__parameters:\n    workers: 3\n    workers: 5\n',
     "line 4: not valid YAML ('workers' is given twice in one section)"),
    # netmon writes it when it ends: a whole drive's record was lost on a bad path
    ('netmon:\n  ros__parameters:\n    record_trace: .\n',
     'record_trace (--record-trace) .: is a'),
])
def test_a_parameter_file_section_or_value_that_would_not_apply_is_refused(
        nothing_starts, capsys, tmp_path, text, what):
    cfg = tmp_path / 'fleet.yaml'
    cfg.write_text(text)
    for command in (['fleet'], ['robot', '--role', 'server']):
        assert cli.main(command + ['--config', str(cfg)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and what in err[0], err


def test_a_list_for_a_text_setting_on_a_node_says_how_to_write_it(capsys):
    from rog_ros.nodes import netmon
    with pytest.raises(SystemExit) as stop:
        netmon.main(['--ros-args', '-p', 'nodes:=[0,1]'])
    assert stop.value.code == 2
    assert ('nodes (--nodes): a list ([0, 1]) where one string is expected; write the items '
            "in one string: '0,1'") in capsys.readouterr().err


def test_a_node_reading_a_broken_params_file_says_so_in_one_line(tmp_path, capsys):
    from rog_ros.nodes import rog_worker
    cfg = tmp_path / 'tabs.yaml'
    cfg.write_text('/**:\n  ros__parameters:\n\tworkers: 3\n')          # a tab: not YAML
    with pytest.raises(SystemExit) as stop:
        rog_worker.main(['--rank', '0', '--ros-args', '--params-file', str(cfg)])
    assert stop.value.code == 2
    assert (f'rog_worker: error: parameter file {cfg} line 3: not valid YAML'
            in capsys.readouterr().err)


@pytest.mark.parametrize('env, extra, what', [
    ({'ROS_DOMAIN_ID': 'abc'}, [], "ROS_DOMAIN_ID='abc' is not a number"),
    ({'ROS_DOMAIN_ID': '300'}, [], 'ROS_DOMAIN_ID=300 outside 0..232'),
    ({'CYCLONEDDS_URI': 'file:///no/such/cyclone.xml'}, [],
     'CYCLONEDDS_URI names file:///no/such/cyclone.xml, which is not a file'),
    ({}, ['--fleet-key-file', 'no-such.key'], 'cannot read fleet key file'),
    ({}, ['--record', '.'], '--record .: is a directory'),
    ({}, ['--record', 'no/such/dir/run.mcap'], 'the folder'),
])
def test_a_robot_checks_what_its_nodes_would_trip_over_before_starting_them(
        nothing_starts, capsys, tmp_path, monkeypatch, env, extra, what):
    # each used to start the nodes, which then ended in a usage message or a traceback
    # (and --respawn restarted them to fail again)
    monkeypatch.chdir(tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv('ROG_FLEET_KEY_FILE', raising=False)
    monkeypatch.delenv('ROG_FLEET_KEY', raising=False)
    assert cli.main(['robot', '--role', 'worker', '--rank', '0', '--logs', 'logs'] + extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith('rog robot: ') and what in err[0], err
    assert os.listdir(tmp_path) == []


def test_settings_a_fleet_must_share_may_not_differ_between_its_nodes(nothing_starts, capsys,
                                                                      tmp_path):
    cfg = tmp_path / 'split.yaml'
    cfg.write_text('rog_worker:\n  ros__parameters:\n    sync: bsp\n')
    assert cli.main(['fleet', '--config', str(cfg), '--out', str(tmp_path / 'run')]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("rog fleet: sync (--sync) differs between the nodes (rog_server 'rog', "
                   "rog_worker 'bsp'); every node of a fleet needs the same value: set it "
                   'under /** or on the command line')


def test_a_bad_or_damaged_state_dir_starts_no_node(nothing_starts, capsys, tmp_path):
    # before, every node started, printed its usage and exited 1 (a file), or the server and
    # the other robots restored, rejoined and rewrote the run's results before the robot
    # with the damaged file stopped
    import zipfile
    a_file = tmp_path / 'summary.json'
    a_file.write_text('{}')
    out = tmp_path / 'out'
    assert cli.main(['fleet', '--out', str(out), '--state-dir', str(a_file)]) == 2
    assert '--state-dir' in capsys.readouterr().err and not out.exists()
    state = tmp_path / 'state'
    state.mkdir()
    with zipfile.ZipFile(state / 'server.pt', 'w') as z:
        z.writestr('archive/data.pkl', b'x' * 1000)
    good = (state / 'server.pt').read_bytes()
    (state / 'worker_1.pt').write_bytes(good[:100])            # cut short by a crash
    assert cli.main(['fleet', '--out', str(out), '--state-dir', str(state)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'state file worker_1.pt is unreadable' in err[0]
    assert 'move the state directory away' in err[0] and not out.exists()
    assert (state / 'server.pt').read_bytes() == good


def test_a_saves_leftover_from_a_crash_is_removed_when_the_node_starts(tmp_path):
    from rog_ros.nodes import durable
    (tmp_path / '.tmp-abcd1234worker_0.pt').write_bytes(b'x' * 100)   # killed mid-save
    (tmp_path / '.tmp-abcd1234worker_10.pt').write_bytes(b'x')         # another node's
    (tmp_path / '.tmp-rog-abcd1234worker_0.pt').write_bytes(b'x' * 100)   # today's name
    (tmp_path / '.tmp-rog-abcd1234worker_10.pt').write_bytes(b'x')
    (tmp_path / 'worker_0.pt').write_bytes(b'state')
    f = durable.StateFile(str(tmp_path / 'worker_0.pt'))
    assert f.removed_leftovers == 2
    assert sorted(os.listdir(tmp_path)) == ['.tmp-abcd1234worker_10.pt',
                                            '.tmp-rog-abcd1234worker_10.pt', 'worker_0.pt']


@pytest.mark.parametrize('command', ['sim', 'compare', 'reproduce'])
def test_simulated_runs_help_gives_the_iterations_range_it_enforces(command, capsys):
    # as rog chaos and rog bench: --iterations above 1000000 was refused, unsaid in --help
    with pytest.raises(SystemExit):
        cli.main([command, '--help'])
    text = ' '.join(capsys.readouterr().out.split())
    assert 'iterations per worker, 1 to 1000000' in text, text
    if command != 'reproduce':
        assert 'evaluations of the shared model over each run, 1 to 100000' in text, text
    if command == 'compare':
        assert 'runs in parallel, 1 to 1024' in text, text


@pytest.mark.parametrize('command, said', [
    (['bench', 'overhead'], ['workers, 1 to 1024', 'threshold S, 0 to 1000']),
    (['bench', 'server'], ['threshold S, 0 to 1000', '1 to 1024, default 64']),
])
def test_bench_help_gives_the_ranges_it_enforces(command, said, capsys):
    # --staleness was refused above 1000 and overhead's --workers above 1024, unsaid in --help
    with pytest.raises(SystemExit):
        cli.main(command + ['--help'])
    text = ' '.join(capsys.readouterr().out.split())
    assert all(s in text for s in said), text
    assert cli.main(command + ['--staleness', '1001']) == 2
    assert '--staleness must be <= 1000' in capsys.readouterr().err


@pytest.mark.parametrize('name', ['iterations', 'eval_every', 'checkpoint_every'])
def test_a_fleet_s_counts_are_bounded_on_every_path(name, nothing_starts, capsys, tmp_path,
                                                    monkeypatch):
    # 10**15 iterations was taken: the fleet trained until it was stopped (rog chaos and rog
    # bench bound theirs); the bound holds for a flag, a parameter file, a ROS parameter and a
    # launch argument alike, and --help and docs/configuration.md say the range
    from rog_ros.nodes import rog_server, settings
    monkeypatch.chdir(tmp_path)
    flag, huge, said = '--' + name.replace('_', '-'), str(10 ** 15), 'must be in [1, 1000000]'
    assert cli.main(['fleet', flag, huge]) == 2
    assert said in _one_line(capsys, 'rog fleet: ')
    cfg = tmp_path / 'big.yaml'
    cfg.write_text(f'/**:\n  ros__parameters:\n    {name}: {huge}\n')
    assert cli.main(['fleet', '--config', str(cfg)]) == 2
    assert said in _one_line(capsys, 'rog fleet: ')
    assert os.listdir(tmp_path) == ['big.yaml']
    with pytest.raises(SystemExit):
        rog_server.build_parser().parse_args(['--ros-args', '-p', f'{name}:={huge}'])
    assert said in capsys.readouterr().err
    with pytest.raises(ValueError, match=said.replace('[', r'\[')):
        fleet.launch_overrides({name: huge})
    from rog_ros.nodes import robot
    for command in (cli_fleet, robot):        # rog fleet and rog robot --help
        parser = command.add_parser(argparse.ArgumentParser().add_subparsers())
        help_text = ' '.join(parser.format_help().split())
        assert 'Range [1, 1000000].' in help_text.split(f'{flag} INT ', 1)[1].split(' --')[0]
    reference = settings.configuration_reference()
    assert f'| `{name}` | int | `{settings.BY_NAME[name].default}` | [1, 1000000] |' in reference


def test_bench_faults_and_compare_refuse_a_repeated_seed_in_the_same_line(nothing_starts,
                                                                          capsys, tmp_path,
                                                                          monkeypatch):
    # rog bench faults merged 0-2,1 into 0,1,2 quietly while rog compare refused 0,1,1
    monkeypatch.chdir(tmp_path)
    assert cli.main(['compare', '--seeds', '0,1,1', '--out', 'x']) == 2
    compare_line = _one_line(capsys, 'rog compare: ')
    for seeds in ('0,1,1', '0-2,1'):
        assert cli.main(['bench', 'faults', '--seeds', seeds]) == 2
        line = _one_line(capsys, 'rog bench faults: ')
        assert line.split(': ', 1)[1] == compare_line.split(': ', 1)[1] == (
            '--seeds lists 1 more than once; list each once')
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize('epoch', ['1e308', '1e20'])
def test_an_epoch_past_any_wall_time_is_refused_on_every_path(epoch, capsys):
    # epoch:=1e308 was taken: every link's trace time became -1e308 + t, one float for the
    # whole run, and the emulated link froze at one rate without a word
    from rog_ros.nodes import netmon, rog_server, rog_worker, settings
    said = 'epoch (--epoch) must be in [0, 10000000000]'
    for node in (rog_server, rog_worker, netmon):
        for argv in (['--epoch', epoch], ['--ros-args', '-p', f'epoch:={epoch}']):
            with pytest.raises(SystemExit):
                node.build_parser().parse_args(argv)
            assert said in capsys.readouterr().err
    with pytest.raises(ValueError) as err:
        fleet.launch_overrides({'epoch': epoch})
    assert said in str(err.value)
    assert '| `epoch` | float | not set (`0.0`) | [0, 10000000000] |' in (
        settings.configuration_reference())
    # a wall time, this year's or one far ahead, is taken
    assert fleet.launch_overrides({'epoch': '4102444800'}) == {'epoch': 4102444800.0}
