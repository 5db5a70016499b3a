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
"""``rog report RUN_DIR``: plots and a Markdown summary of a simulator or fleet run."""

import json

import pytest

from rog_ros import cli

pytest.importorskip('matplotlib')


def _fleet_run(path, system, seed, accuracy, trace='indoors'):
    path.mkdir(parents=True)
    (path / 'summary.json').write_text(json.dumps({
        'system': system, 'seed': seed, 'workers': 2, 'workload': 'toy', 'trace': trace,
        'target_accuracy': 0.8, 'final_accuracy': accuracy, 'time_to_target_s': 2.0,
        's_per_iteration': 0.1, 'driver': 'fleet', 'completed': True, 'bus': 'DdsBus',
        'authenticated': True, 'rejects_by_reason': {'bad_tag': 0, 'replay': 3}}))
    (path / 'timeseries.csv').write_text(
        'time_s,iteration,accuracy\n0.0,0,0.3\n1.0,10,0.7\n2.0,20,%s\n' % accuracy)


def test_report_of_a_simulator_run(tmp_path, capsys):
    # Prepare: a real (tiny) simulator run
    out = tmp_path / 'sim'
    assert cli.main(['sim', '--workload', 'toy', '--workers', '2', '--iterations', '10',
                     '--trace', 'indoors', '--out', str(out)]) == 0
    capsys.readouterr()
    # Execute
    assert cli.main(['report', str(out)]) == 0
    # Assert
    text = (out / 'report.md').read_text()
    assert capsys.readouterr().out.strip() == str(out / 'report.md')
    assert 'simulated (virtual) time' in text and '| rog:4 |' in text
    for png in ('accuracy_vs_time', 'accuracy_vs_time_log', 'accuracy_vs_iteration',
                'time_composition', 'triggers'):
        assert (out / f'{png}.png').stat().st_size > 1000
        assert f'({png}.png)' in text


def test_report_of_fleet_runs_averages_seeds_and_lists_rejects(tmp_path):
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.9)
    _fleet_run(tmp_path / 'b', 'rog:4', 1, 0.8)
    _fleet_run(tmp_path / 'c', 'ssp:4', 0, 0.7)
    assert cli.main(['report', str(tmp_path)]) == 0
    text = (tmp_path / 'report.md').read_text()
    assert '3 run(s)' in text and 'wall-clock time of a real fleet' in text
    assert '| rog:4 | 2.0 [2.0-2.0] | 2.0 ± 0.0 | 2/2 | 0.850 ± 0.071 |' in text
    assert "rejected {'replay': 3}" in text and '- rog:4 / ssp:4:' in text


def test_runs_of_other_settings_are_not_averaged_together(tmp_path, capsys):
    # a folder of runs (`rog report runs/`): two traces must not share a row or a ratio
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.9)
    _fleet_run(tmp_path / 'b', 'rog:4', 0, 0.6, trace='outdoors')
    _fleet_run(tmp_path / 'c', 'ssp:4', 0, 0.7, trace='outdoors')
    assert cli.main(['report', str(tmp_path)]) == 0
    text = (tmp_path / 'report.md').read_text()
    assert text.startswith('# rog report: runs of 2 settings')
    assert '| rog:4 (indoors) | 2.0 [2.0-2.0] | 2.0 | 1/1 | 0.900 |' in text
    assert '| rog:4 (outdoors) | 2.0 [2.0-2.0] | 2.0 | 1/1 | 0.600 |' in text
    assert '## Ratios' not in text
    err = capsys.readouterr().err
    assert err.strip().endswith('differ in trace: one row per system and setting, no ratios '
                                'between them')


def test_a_folder_of_simulated_and_fleet_runs_says_which_clock_each_row_has(tmp_path):
    # the header said "Times are wall-clock time of a real fleet" beside a simulated row, and
    # the fleet section listed the simulated run with bus None
    _fleet_run(tmp_path / 'fleet', 'rog:4', 0, 0.9)
    sim = tmp_path / 'sim'
    _fleet_run(sim, 'rog:4', 0, 0.8)
    summary = json.loads((sim / 'summary.json').read_text())
    del summary['driver'], summary['bus'], summary['authenticated']
    (sim / 'summary.json').write_text(json.dumps(summary))
    assert cli.main(['report', str(tmp_path)]) == 0
    text = (tmp_path / 'report.md').read_text()
    assert ('Times are simulated (virtual) time for the simulated rows and wall-clock time '
            'for the fleet rows, which do not compare.') in text
    assert 'wall-clock time of a real fleet' not in text
    fleet_lines = [line for line in text.splitlines() if line.startswith('- rog:4 seed 0:')]
    assert fleet_lines == ['- rog:4 seed 0: completed True, bus DdsBus, authenticated True, '
                           "rejected {'replay': 3}"]


def test_report_of_an_empty_directory_is_a_one_line_error(tmp_path, capsys):
    assert cli.main(['report', str(tmp_path)]) == 2
    assert 'no summary.json' in capsys.readouterr().err


def test_times_per_seed_are_drawn_with_misses_and_aligned_with_the_seeds(tmp_path):
    # Prepare: two systems, one seed of one never reached the target, one run failed
    from rog_ros.experiments.report_plots import write_plots
    from rog_ros.experiments.seed_stats import aggregate
    runs = {'bsp': [12.0, None, 75.0], 'rog:4': [9.0, 9.3, 16.0]}
    table = [aggregate([{'system': name, 'seed': k, 'time_to_target_s': t}
                        for k, t in enumerate(times)]
                       + [{'system': name, 'seed': 9, 'error': 'event budget'}])
             for name, times in runs.items()]
    # Execute
    made = dict(write_plots(str(tmp_path), table, {}, 0.8))
    # Assert: per finished seed, in seed order; the plot is drawn
    assert [r['time_to_target_s_per_seed'] for r in table] == [[12.0, None, 75.0],
                                                               [9.0, 9.3, 16.0]]
    assert table[0]['finished_seeds'] == [0, 1, 2]
    assert (tmp_path / 'time_to_target.png').stat().st_size > 1000
    assert made['time to target per seed'].endswith('time_to_target.png')


def test_no_time_plot_when_no_seed_reached_the_target(tmp_path):
    from rog_ros.experiments.report_plots import write_plots
    from rog_ros.experiments.seed_stats import aggregate
    table = [aggregate([{'system': 'bsp', 'seed': 0, 'time_to_target_s': None}])]
    assert 'time to target per seed' not in dict(write_plots(str(tmp_path), table, {}))
    assert not (tmp_path / 'time_to_target.png').exists()


def test_report_of_a_comparison_directory_reads_its_runs(tmp_path):
    # the comparison's own summary.json (meta and per-system statistics) is not a run: it
    # used to end in a KeyError traceback
    (tmp_path / 'summary.json').write_text(json.dumps({'meta': {}, 'systems': []}))
    _fleet_run(tmp_path / 'runs' / 'rog-4-seed0', 'rog:4', 0, 0.9)
    assert cli.main(['report', str(tmp_path)]) == 0
    assert '1 run(s)' in (tmp_path / 'report.md').read_text()


def test_a_damaged_summary_is_named_in_one_line(tmp_path, capsys):
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.9)
    (tmp_path / 'a' / 'summary.json').write_text('{"system": "rog:4", ')
    assert cli.main(['report', str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'summary.json: not a summary' in err[0]
    assert not (tmp_path / 'report.md').exists()


def test_a_damaged_timeseries_is_named_with_its_line_and_a_cut_one_is_read(tmp_path, capsys):
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.9)
    series = tmp_path / 'a' / 'timeseries.csv'
    series.write_text('time_s,iteration,accuracy\n0.0,0,0.3\n1.0,10,O.7\n')
    assert cli.main(['report', str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "timeseries.csv:3: 'O.7' is not a number" in err[0]
    series.write_text('time_s,iteration,accuracy\n0.0,0,0.3\n1.0,10')   # cut by a crash
    assert cli.main(['report', str(tmp_path)]) == 0


def test_events_without_sentences_are_listed_by_name(tmp_path):
    # an events.csv written by another tool may lack the 'what' column: the report names the
    # event instead of failing on it
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.9)
    (tmp_path / 'a' / 'events.csv').write_text(
        'time_s,robot,event,value,info\n1.5,1,worker_suspended,1,"{""reason"": ""link""}"\n')
    assert cli.main(['report', str(tmp_path)]) == 0
    assert '  - 1.5 s: worker_suspended' in (tmp_path / 'report.md').read_text()


def test_report_of_an_interrupted_run_says_why_and_how_far_it_got(tmp_path):
    # the table said "failed 1/1" and nothing else: not the reason, not how far it got
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.81)
    summary = json.loads((tmp_path / 'a' / 'summary.json').read_text())
    summary.update(completed=False, error='interrupted: training did not complete',
                   iterations=21, iteration_budget=100, sim_time_s=7.2049)
    (tmp_path / 'a' / 'summary.json').write_text(json.dumps(summary))
    assert cli.main(['report', str(tmp_path / 'a')]) == 0
    text = (tmp_path / 'a' / 'report.md').read_text()
    assert ('## Failed runs (excluded from the means)\n\n- rog:4 seed 0: FAILED: interrupted: '
            'training did not complete (it stopped after a mean of 21 of 100 iterations in '
            '7.2 s)\n') in text
    summary.update(iterations_per_robot=[40, 40, 11])      # the robots' own counts
    (tmp_path / 'a' / 'summary.json').write_text(json.dumps(summary))
    assert cli.main(['report', str(tmp_path / 'a')]) == 0
    assert ('(it stopped after 11 to 40 (by robot) of 100 iterations in 7.2 s)'
            in (tmp_path / 'a' / 'report.md').read_text())


def test_report_of_a_fleet_run_says_what_fault_handling_did(tmp_path):
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.9)
    summary = json.loads((tmp_path / 'a' / 'summary.json').read_text())
    summary.update(superseded=7, repairs=0, pull_repeats=1, worker_revivals=4,
                   duplicate_ranks=[1], model_file='model.pt', started_apart={'2': 'd28364e5fdd5'},
                   start_model={'source': '/runs/day1/model.pt', 'fingerprint': 'c6df0af05f8a'},
                   final_model_delivered=2, final_model_missed=1, workers_let_go=1)
    (tmp_path / 'a' / 'summary.json').write_text(json.dumps(summary))
    _fleet_run(tmp_path / 'b', 'rog:4', 1, 0.8)      # nothing happened: nothing said
    assert cli.main(['report', str(tmp_path)]) == 0
    lines = (tmp_path / 'report.md').read_text().splitlines()
    a = next(x for x in lines if x.startswith('- rog:4 seed 0:'))
    b = next(x for x in lines if x.startswith('- rog:4 seed 1:'))
    assert ('7 messages of replaced runs, 1 pulls served again, 4 runs taken back, '
            '1 robots let go silent before the budget, **two processes ran as robot 1** '
            '(give every robot its own rank), '
            '**robots that started from other weights '
            '(events.csv: start_mismatch): 2 (d28364e5fdd5)**') in a
    assert 'repaired' not in a and a.endswith(
        '; started from /runs/day1/model.pt (c6df0af05f8a); trained model `model.pt` (held by '
        '2 of 3 robots; **1 stopped without it**, events.csv: final_model_missed)')
    assert b.endswith("rejected {'replay': 3}")


@pytest.mark.parametrize('content, message', [
    (None, 'missing: no such directory'),
    ('{}', 'missing/summary.json: not a run summary (an empty object'),
    ('[1, 2]', 'missing/summary.json: not a run summary (a JSON list'),
])
def test_a_missing_directory_and_a_summary_that_is_not_a_run_are_told_apart(
        tmp_path, capsys, content, message):
    run_dir = tmp_path / 'missing'
    if content is not None:
        run_dir.mkdir()
        (run_dir / 'summary.json').write_text(content)
    assert cli.main(['report', str(run_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f'rog report: {tmp_path}/{message}')


def test_a_binary_timeseries_is_named(tmp_path, capsys):
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.9)
    (tmp_path / 'a' / 'timeseries.csv').write_bytes(bytes(range(128, 256)))
    assert cli.main(['report', str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == (f'rog report: {tmp_path}/a/timeseries.csv: not a text '
                                        'file (rog writes timeseries.csv as UTF-8 CSV)')
    assert not (tmp_path / 'report.md').exists()


@pytest.mark.parametrize('text', ['garbage,,,\n', 'step,acc\n0,0.5\n'])
def test_a_timeseries_of_other_columns_is_named_not_drawn_empty(tmp_path, capsys, text):
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.9)
    (tmp_path / 'a' / 'timeseries.csv').write_text(text)
    assert cli.main(['report', str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"rog report: {tmp_path}/a/timeseries.csv:1: not a run's timeseries")
    assert not (tmp_path / 'report.md').exists()
    (tmp_path / 'a' / 'timeseries.csv').write_text('')     # a run cut before its first line
    assert cli.main(['report', str(tmp_path)]) == 0


@pytest.mark.parametrize('key, value', [('final_accuracy', 'high'), ('time_to_target_s', [2]),
                                        ('outage_suspensions', True)])
def test_a_summary_figure_that_is_not_a_number_is_named_with_its_key(tmp_path, capsys, key,
                                                                     value):
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.9)
    path = tmp_path / 'a' / 'summary.json'
    path.write_text(json.dumps(dict(json.loads(path.read_text()), **{key: value})))
    assert cli.main(['report', str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f'rog report: {path}: {key} is {value!r}, not a number (a summary.json '
                   'edited by hand, or not written by rog?)']
    assert not (tmp_path / 'report.md').exists()


def test_report_of_a_comparison_folder_writes_the_comparison_report_again(tmp_path, capsys):
    # rog report on a rog compare folder replaced the comparison's report with the generic
    # one of its runs: the header that explains the columns was gone, and the accuracy at
    # equal time read '-' on every row
    out = tmp_path / 'cmp'
    assert cli.main(['compare', '--workload', 'toy', '--systems', 'bsp,rog:4', '--seeds',
                     '0,1', '--iterations', '10', '--trace', 'indoors', '--jobs', '1',
                     '--out', str(out)]) == 0
    written = (out / 'report.md').read_text()
    assert 'Accuracy at equal time' in written
    equal_time = [r['accuracy_at_equal_time'] for r in
                  json.loads((out / 'summary.json').read_text())['systems']]
    assert all(isinstance(a, float) for a in equal_time)
    (out / 'report.md').unlink()
    capsys.readouterr()
    assert cli.main(['report', str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out / 'report.md')
    assert (out / 'report.md').read_text() == written
    assert [r['accuracy_at_equal_time'] for r in
            json.loads((out / 'summary.json').read_text())['systems']] == equal_time
    (out / 'runs' / 'bsp-seed1' / 'timeseries.csv').unlink()
    assert cli.main(['report', str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'a run of the comparison is missing' in err[0]


def test_no_empty_accuracy_plot_when_every_run_failed(tmp_path):
    # every run failed (a zero-rate trace): empty axes were drawn and embedded in report.md
    from rog_ros.experiments.report_plots import write_plots
    from rog_ros.experiments.seed_stats import aggregate
    table = [aggregate([{'system': 'bsp', 'seed': 0, 'error': 'no progress'}])]
    names = [name for name, _ in write_plots(str(tmp_path), table, {'bsp': []})]
    assert not any(name.startswith('accuracy') for name in names)
    assert not list(tmp_path.glob('accuracy*.png'))


def test_a_run_still_in_progress_is_said_so_not_taken_for_a_failed_one(tmp_path, capsys):
    # rog report on the --out of a running fleet said 'no summary.json found', which reads as
    # a run that failed; the fleet holds its folder's lock until it ends
    from rog_ros.nodes.output_lock import OutputLock
    out = tmp_path / 'fleet'
    lock = OutputLock.take(str(out), 'rog fleet')
    try:
        (out / 'logs').mkdir()
        (out / 'logs' / 'rog_server.log').write_text('iteration 3\n')
        for run_dir in (out, tmp_path):          # the run's folder, and a folder above it
            assert cli.main(['report', str(run_dir)]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and err[0].startswith(
                f'rog report: {out}: the run there is still in progress (rog fleet, pid ')
            assert err[0].endswith(f'its progress so far: {out}/logs/rog_server.log')
            assert not (run_dir / 'report.md').exists()
    finally:
        lock.release()
    assert cli.main(['report', str(out)]) == 2          # ended without a summary: as before
    assert 'no summary.json found' in capsys.readouterr().err


@pytest.mark.parametrize('key, text, expected', [
    ('workers', '1e400', 'inf, not an integer from 1 to 1024'),
    ('workers', '"many"', "'many', not an integer from 1 to 1024"),
    ('workers', '0', '0, not an integer from 1 to 1024'),
    ('final_accuracy', 'NaN', 'nan, not a finite number'),
    ('sim_time_s', '1' + '0' * 400, '1' + '0' * 56 + '..., not a finite number'),
    ('target_accuracy', '"0.8"', "'0.8', not a number"),
    ('slack_raises', '-1', '-1, not an integer >= 0'),
    ('outage_suspensions', '1e400', 'inf, not an integer >= 0'),
    ('rejects_by_reason', '[3]', '[3], not a JSON object'),
    ('start_model', '"model.pt"', "'model.pt', not a JSON object"),
    ('duplicate_ranks', '1', '1, not a JSON list'),
])
def test_a_summary_field_of_the_wrong_kind_is_named_with_what_was_expected(
        tmp_path, capsys, key, text, expected):
    # "workers": 1e400 (inf to json) ended in an OverflowError traceback, "many" in a line
    # that named neither the file nor the field
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.9)
    _fleet_run(tmp_path / 'b', 'rog:4', 1, 0.8)
    path = tmp_path / 'b' / 'summary.json'
    doc = json.loads(path.read_text())
    doc[key] = '@'
    path.write_text(json.dumps(doc).replace('"@"', text))
    assert cli.main(['report', str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f'rog report: {path}: {key} is {expected} (a summary.json edited by hand, '
                   'or not written by rog?)']
    assert not (tmp_path / 'report.md').exists()


def _fake_matplotlib(monkeypatch, tmp_path, line):
    """Make ``import matplotlib`` run ``line`` (a missing or broken install) in this test."""
    import sys
    package = tmp_path / 'fake' / 'matplotlib'
    package.mkdir(parents=True)
    (package / '__init__.py').write_text(line + '\n')
    for name in [n for n in sys.modules if n == 'matplotlib' or n.startswith('matplotlib.')]:
        monkeypatch.delitem(sys.modules, name)        # put back after the test
    monkeypatch.syspath_prepend(str(tmp_path / 'fake'))


@pytest.mark.parametrize('line, reason', [
    ("raise ImportError('No module named matplotlib')",
     'matplotlib cannot be imported (No module named matplotlib); to draw them: pip install '
     'matplotlib (or apt install python3-matplotlib), then rog report again'),
    ("raise RuntimeError('libfreetype.so.6:\\n cannot open')",
     'importing matplotlib failed (RuntimeError: libfreetype.so.6: cannot open); repair it: '
     'pip install --force-reinstall matplotlib (or apt install --reinstall '
     'python3-matplotlib), then rog report again'),
])
def test_without_matplotlib_the_report_is_written_and_says_why(
        tmp_path, capsys, monkeypatch, line, reason):
    # the plots were drawn before report.md: no matplotlib was an ImportError traceback,
    # exit 1, and no report at all (rog doctor promises tables without plots)
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.9)
    _fake_matplotlib(monkeypatch, tmp_path, line)
    assert cli.main(['report', str(tmp_path / 'a')]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(tmp_path / 'a' / 'report.md')
    assert err.splitlines() == [f'rog report: plots skipped: {reason}']
    text = (tmp_path / 'a' / 'report.md').read_text()
    assert f'Plots skipped: {reason}.' in text and '| rog:4 |' in text and '![' not in text
    assert not list((tmp_path / 'a').glob('*.png'))


def _comparison(path, cut_series):
    """Write a comparison folder of two runs by hand; the second one's timeseries.csv is cut."""
    path.mkdir()
    (path / 'summary.json').write_text(json.dumps({'meta': {
        'workload': 'toy', 'trace': 'indoors', 'workers': 2, 'seeds': [0],
        'systems': ['rog:4', 'bsp']}, 'systems': []}))
    _fleet_run(path / 'runs' / 'rog-4-seed0', 'rog:4', 0, 0.9)
    _fleet_run(path / 'runs' / 'bsp-seed0', 'bsp', 0, 0.8)
    (path / 'runs' / 'bsp-seed0' / 'timeseries.csv').write_text(cut_series)


def test_without_matplotlib_a_comparison_report_is_written_too(tmp_path, capsys, monkeypatch):
    _comparison(tmp_path / 'cmp', 'time_s,iteration,accuracy\n0.0,0,0.3\n1.0,1,0.5\n')
    _fake_matplotlib(monkeypatch, tmp_path, "raise ImportError('No module named matplotlib')")
    assert cli.main(['report', str(tmp_path / 'cmp')]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith('rog report: plots skipped: matplotlib cannot')
    text = (tmp_path / 'cmp' / 'report.md').read_text()
    assert 'Plots skipped: matplotlib cannot be imported' in text and '![' not in text


CUT = '; its last line is cut off (the run was stopped while writing it)'


@pytest.mark.parametrize('series, why', [
    (None, 'timeseries.csv is missing: no evaluations recorded'),
    ('', 'no evaluation recorded (timeseries.csv is empty: the run stopped before its first)'),
    ('time_s,iteration,accuracy\n', 'no evaluation recorded (timeseries.csv holds its header '
     'only)'),
    ('time_s,iteration,accuracy\n0.0,0,0.3\n1.0,10', 'only one evaluation in timeseries.csv '
     '(a curve needs two)' + CUT),
    ('time_s,iteration,accuracy\n0.0,0,0.3\n', 'only one evaluation in timeseries.csv (a '
     'curve needs two)'),
    ('time_s,iteration,accuracy\n0.0,0,', 'no evaluation with an accuracy in timeseries.csv'
     + CUT),
])
def test_a_run_without_a_curve_is_named_with_why(tmp_path, capsys, series, why):
    # a missing, empty or cut timeseries.csv is read (exit 0) and its run drew no accuracy
    # curve, with nothing in report.md saying so
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.9)
    _fleet_run(tmp_path / 'b', 'rog:4', 1, 0.8)
    path = tmp_path / 'b' / 'timeseries.csv'
    if series is None:
        path.unlink()
    else:
        path.write_text(series)
    assert cli.main(['report', str(tmp_path)]) == 0
    assert capsys.readouterr().err == ''
    lines = (tmp_path / 'report.md').read_text().splitlines()
    at = lines.index('No accuracy curve from:')
    assert lines[at + 1:at + 3] == [f'- rog:4 seed 1 (`{path}`): {why}', '']
    assert (tmp_path / 'accuracy_vs_time.png').exists()        # seed 0 still draws one


def test_a_whole_run_says_nothing_about_missing_curves(tmp_path):
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.9)
    assert cli.main(['report', str(tmp_path)]) == 0
    assert 'No accuracy curve' not in (tmp_path / 'report.md').read_text()


def test_a_comparison_report_names_a_run_without_a_curve(tmp_path, capsys):
    _comparison(tmp_path / 'cmp', 'time_s,iteration,accuracy\n0.0,0,0.3\n1.0,1')
    assert cli.main(['report', str(tmp_path / 'cmp')]) == 0
    assert capsys.readouterr().err == ''
    text = (tmp_path / 'cmp' / 'report.md').read_text()
    assert ('No accuracy curve from:\n- bsp seed 0 (`runs/bsp-seed0/timeseries.csv`): only one '
            'evaluation in timeseries.csv (a curve needs two)' + CUT + '\n') in text


def test_the_marks_of_a_missed_target_are_explained_where_they_are_shown(tmp_path):
    # '> [>->]' in rog report's table was explained nowhere in its report.md
    legend = ('`>` in a median [interquartile range] column: that quantile falls on a run that '
              'never reached the target (counted as infinitely late).')
    _fleet_run(tmp_path / 'a', 'rog:4', 0, 0.9)
    summary = tmp_path / 'a' / 'summary.json'
    summary.write_text(json.dumps(dict(json.loads(summary.read_text()),
                                       s_per_iteration_to_target=0.1)))
    assert cli.main(['report', str(tmp_path)]) == 0
    assert '>' not in (tmp_path / 'report.md').read_text()       # no mark: no legend
    summary.write_text(json.dumps(dict(json.loads(summary.read_text()), time_to_target_s=None,
                                       s_per_iteration_to_target=None)))
    assert cli.main(['report', str(tmp_path)]) == 0
    lines = (tmp_path / 'report.md').read_text().splitlines()
    row = next(i for i, x in enumerate(lines) if x.startswith('| rog:4 |'))
    assert lines[row].startswith('| rog:4 | > [>->] |')
    assert lines[row + 1:row + 3] == ['', legend]
