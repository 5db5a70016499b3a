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
"""``rog report`` of a folder of runs: the order, the equal-time column, one comparison."""

import json
import os

import pytest

from rog_ros import cli

pytest.importorskip('matplotlib')

SYSTEMS = ('rog:4', 'bsp', 'ssp:4')
"""The systems of the hand-made comparisons, in the order their --systems named them."""


def _run(path, system, seed, end, target=0.8):
    """Write a simulated run whose periodic evaluations end at ``end`` s (then its final)."""
    path.mkdir(parents=True)
    (path / 'summary.json').write_text(json.dumps({
        'system': system, 'seed': seed, 'workers': 2, 'workload': 'toy', 'trace': 'indoors',
        'target_accuracy': target, 'final_accuracy': 0.85, 'time_to_target_s': 2.0,
        's_per_iteration': 0.1, 'iteration_budget': 100}))
    step = end / 4.0
    rows = [f'{k * step},{k * 10},{0.5 + 0.1 * k},{0.5 + 0.05 * k},64' for k in range(5)]
    (path / 'timeseries.csv').write_text(
        'time_s,iteration,accuracy,accuracy_smoothed,samples\n' + '\n'.join(rows)
        + f'\n{end + 1.0},40,0.95,0.95,128\n')


def _comparison(path, seeds=(0, 1), systems=SYSTEMS):
    """Write a comparison folder of ``systems`` over ``seeds`` by hand."""
    path.mkdir(parents=True)
    (path / 'summary.json').write_text(json.dumps({'meta': {
        'workload': 'toy', 'trace': 'indoors', 'workers': 2, 'seeds': list(seeds),
        'systems': list(systems)}, 'systems': []}))
    for seed in seeds:
        for k, system in enumerate(systems):
            _run(path / 'runs' / f'{system.replace(":", "-")}-seed{seed}', system, seed,
                 8.0 + 5.0 * k + seed)


def _table(path):
    """Return ``{system: cells}`` of the report's table in ``path``, in the table's order."""
    lines = [x for x in (path / 'report.md').read_text().splitlines()
             if x.startswith('| ') and not x.startswith('| system')]
    return {c[0]: c[1:] for c in ([p.strip() for p in x.strip('|').split('|')] for x in lines)}


def test_systems_come_in_one_order_bsp_ssp_flown_rog_by_threshold_then_others():
    from rog_ros.experiments.report_systems import system_order
    names = ['rog:20', 'aet', 'flown:4', 'bsp', 'ssp:20', 'rog:4', 'ssp:4', 'localsgd',
             'rog:4 (outdoors)', 'rog:4#no-ordering']
    assert system_order(names) == ['bsp', 'ssp:4', 'ssp:20', 'flown:4', 'rog:4',
                                   'rog:4 (outdoors)', 'rog:20', 'aet', 'localsgd',
                                   'rog:4#no-ordering']


def test_runs_of_a_comparison_read_like_the_comparison(tmp_path):
    # rog report DIR/runs left 'acc at equal time' empty and ordered rog:4 before ssp:4
    _comparison(tmp_path / 'cmp')
    # Execute
    assert cli.main(['report', str(tmp_path / 'cmp')]) == 0
    assert cli.main(['report', str(tmp_path / 'cmp' / 'runs')]) == 0
    # Assert: one order, and the same accuracy at equal time, in both reports
    compared, runs = _table(tmp_path / 'cmp'), _table(tmp_path / 'cmp' / 'runs')
    assert list(compared) == list(runs) == ['bsp', 'ssp:4', 'rog:4']
    equal_time = [runs[s][5] for s in runs]
    assert equal_time == [compared[s][5] for s in compared]
    # per seed the equal time is rog:4's last periodic evaluation (8 s, 9 s): bsp reads its
    # third evaluation (6.5 s, 7 s: smoothed 0.6), ssp:4 its second (4.5 s, 4.75 s: 0.55)
    assert equal_time == ['0.600 ± 0.000', '0.550 ± 0.000', '0.700 ± 0.000']


def test_a_folder_of_two_comparisons_is_refused_naming_them(tmp_path, capsys):
    """Refuse two comparisons of one setting: each row would average them as seeds."""
    _comparison(tmp_path / 'a')
    _comparison(tmp_path / 'b', seeds=(0,))
    assert cli.main(['report', str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and not (tmp_path / 'report.md').exists()
    a, b = tmp_path / 'a', tmp_path / 'b'
    assert (f'{tmp_path} holds runs of one system and setting from different groups, which '
            f"would be averaged as seeds of one another (rows 'bsp', 'ssp:4', 'rog:4' from the "
            f'comparison in {a} and the comparison in {b}): point rog report at one comparison '
            f'(rog report {a})') in err


def test_a_comparison_beside_a_loose_run_of_its_setting_is_refused(tmp_path, capsys):
    """Refuse a loose run that would be averaged into a comparison's row as a seed."""
    _comparison(tmp_path / 'a')
    _run(tmp_path / 'sim', 'rog:4', 0, 8.0)
    assert cli.main(['report', str(tmp_path)]) == 2
    assert (f"(row 'rog:4' from the comparison in {tmp_path / 'a'} and 1 run(s) outside any "
            'comparison)') in capsys.readouterr().err


def test_a_comparison_beside_a_fleet_of_another_size_reports_in_rows_of_their_own(
        tmp_path, capsys):
    """Report the README's runs/ (runs/cmp and runs/fleet): one row per system and size."""
    # rog report runs refused this folder (rc 2), which the README's commands make
    out = tmp_path / 'runs'
    assert cli.main(['compare', '--workload', 'toy', '--trace', 'indoors', '--systems',
                     'bsp,rog:4', '--seeds', '0', '--iterations', '30', '--workers', '4',
                     '--out', str(out / 'cmp')]) == 0
    assert cli.main(['sim', '--workload', 'toy', '--sync', 'rog', '--staleness', '4',
                     '--workers', '3', '--trace', 'indoors', '--iterations', '30', '--out',
                     str(out / 'fleet')]) == 0
    capsys.readouterr()
    # Execute
    assert cli.main(['report', str(out)]) == 0
    # Assert: three rows, each of one setting's single run
    table = _table(out)
    assert list(table) == ['bsp (4 workers)', 'rog:4 (4 workers)', 'rog:4 (3 workers)']
    assert [cells[-1] for cells in table.values()] == ['0/1', '0/1', '0/1']
    assert 'differ in workers' in capsys.readouterr().err


def test_two_comparisons_of_one_setting_without_a_common_system_draw_no_ratios(
        tmp_path, capsys):
    """Keep each row whole but compare nothing across comparisons made apart."""
    # rog report runs/ drew 'rog:4 vs bsp' and an equal-time column from bsp of one
    # comparison (seeds 0, 1) and rog:4 of another (seed 0 only, maybe another budget)
    _comparison(tmp_path / 'a', systems=('bsp',))
    _comparison(tmp_path / 'b', seeds=(0,), systems=('rog:4',))
    _run(tmp_path / 'loose', 'flown:4', 0, 8.0)
    capsys.readouterr()
    # Execute
    assert cli.main(['report', str(tmp_path)]) == 0
    # Assert: both rows, no ratios, no equal-time accuracy, and the reason said twice
    table = _table(tmp_path)
    assert list(table) == ['bsp', 'flown:4', 'rog:4']
    assert [cells[5] for cells in table.values()] == ['-', '-', '-']
    report = (tmp_path / 'report.md').read_text()
    assert '## Ratios' not in report and ' vs ' not in report
    groups = (f'the comparisons in {tmp_path / "a"} and {tmp_path / "b"} and 1 run(s) '
              'outside any comparison')
    assert f'The rows come from {groups}, made apart' in report
    assert f'the runs in {tmp_path} are of {groups}: one row per system, no ratios' in (
        capsys.readouterr().err)


def test_one_comparison_with_loose_runs_of_its_own_folder_keeps_its_ratios(tmp_path):
    """Draw ratios as before where every run is of one comparison (``DIR/runs``)."""
    _comparison(tmp_path / 'cmp', systems=('bsp', 'rog:4'))
    assert cli.main(['report', str(tmp_path / 'cmp' / 'runs')]) == 0
    report = (tmp_path / 'cmp' / 'runs' / 'report.md').read_text()
    assert '## Ratios' in report and 'made apart' not in report


def test_a_trailing_slash_still_finds_the_comparison_at_the_top(tmp_path):
    """Name the groups of ``DIR/`` as those of ``DIR``: its own runs are its comparison's."""
    # 'DIR/' made 'DIR//' the prefix of the comparison in DIR: its runs looked loose
    from rog_ros.experiments.report import report_run
    a = tmp_path / 'a'
    _comparison(a)
    _comparison(a / 'b', seeds=(0,))
    said = []
    for given in (str(a), str(a) + os.sep):
        with pytest.raises(ValueError) as err:
            report_run(given)
        said.append(str(err.value))
    assert said[0] == said[1]
    assert said[0].startswith(f'{a} holds runs of one system and setting from different groups')
    assert f"'rog:4' from the comparison in {a} and the comparison in {a / 'b'})" in said[0]
    assert 'outside any comparison' not in said[0] and '//' not in said[0]


def test_a_folder_above_one_comparison_says_where_its_report_is(tmp_path, capsys):
    _comparison(tmp_path / 'a')
    assert cli.main(['report', str(tmp_path)]) == 0
    assert f'its own report (ratios, equal-time accuracy): rog report {tmp_path / "a"}' in (
        capsys.readouterr().err)


def test_runs_towards_other_targets_do_not_share_a_row(tmp_path, capsys):
    _run(tmp_path / 'a', 'rog:4', 0, 8.0, target=0.8)
    _run(tmp_path / 'b', 'rog:4', 1, 8.0, target=0.9)
    assert cli.main(['report', str(tmp_path)]) == 0
    assert list(_table(tmp_path)) == ['rog:4 (target 0.8)', 'rog:4 (target 0.9)']
    assert 'differ in target_accuracy' in capsys.readouterr().err


def test_runs_of_one_seed_made_with_other_budgets_are_both_kept_and_said(tmp_path, capsys):
    """Keep two runs of one seed with other budgets (not one run made twice); say so."""
    # Prepare: `rog sim --iterations 5 --out Y/short`, `--iterations 40 --out Y/long`
    _run(tmp_path / 'short', 'bsp', 0, 8.0)
    _run(tmp_path / 'long', 'bsp', 0, 8.0)
    for name, budget, accuracy in (('short', 5, 0.70), ('long', 40, 0.80)):
        summary = json.loads((tmp_path / name / 'summary.json').read_text())
        (tmp_path / name / 'summary.json').write_text(
            json.dumps(dict(summary, iteration_budget=budget, final_accuracy=accuracy)))
    # Execute
    assert cli.main(['report', str(tmp_path)]) == 0
    # Assert: both runs in the row (not one dropped as a rerun), and one line says why
    assert _table(tmp_path)['bsp'][3] == f'0.750 ± {0.10 / 2 ** 0.5:.3f}'
    said = [line for line in capsys.readouterr().err.splitlines() if 'seed 0' in line]
    assert said == [f'rog report: bsp seed 0 was run with other settings in {tmp_path} '
                    f'({tmp_path / "long"}, {tmp_path / "short"} differ in iteration_budget): '
                    'averaged in one row as if they were seeds; give each setting its own '
                    'folder to report it alone']


@pytest.mark.parametrize('newest', ['a', 'b'])
def test_two_runs_of_one_system_and_seed_count_once_the_newest(tmp_path, capsys, newest):
    """Count a system's seed run twice once, the run whose summary was written last."""
    # two `rog sim --out X/a`, `--out X/b` with the default seed were averaged as two seeds
    _run(tmp_path / 'a', 'bsp', 0, 8.0)
    _run(tmp_path / 'b', 'bsp', 0, 8.0)
    _run(tmp_path / 'c', 'bsp', 1, 8.0)
    for name, accuracy in (('a', 0.70), ('b', 0.80), ('c', 0.90)):
        summary = json.loads((tmp_path / name / 'summary.json').read_text())
        (tmp_path / name / 'summary.json').write_text(
            json.dumps(dict(summary, final_accuracy=accuracy)))
    older = 'b' if newest == 'a' else 'a'
    os.utime(tmp_path / older / 'summary.json', (1_000_000, 1_000_000))
    os.utime(tmp_path / newest / 'summary.json', (2_000_000, 2_000_000))
    # Execute
    assert cli.main(['report', str(tmp_path)]) == 0
    # Assert: seeds 0 (the newest run) and 1, each once; one line names both runs
    cells = _table(tmp_path)['bsp']
    kept = {'a': 0.70, 'b': 0.80}[newest]
    assert cells[3] == f'{(kept + 0.90) / 2:.3f} ± {abs(0.90 - kept) / 2 ** 0.5:.3f}'
    assert cells[-1] == '0/2'
    said = [line for line in capsys.readouterr().err.splitlines() if 'seed 0' in line]
    assert said == [f'rog report: bsp seed 0 was run 2 times in {tmp_path} ({tmp_path / "a"}, '
                    f'{tmp_path / "b"}): counted once, as the newest ({tmp_path / newest}, by '
                    'when its summary.json was written); give each run its own --seed to '
                    'average them as seeds']
    assert '3 run(s)' not in (tmp_path / 'report.md').read_text()
    assert '2 run(s)' in (tmp_path / 'report.md').read_text()
