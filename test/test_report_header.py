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
"""What a report says of its target, budget, seeds and ratios, and how its plots read."""

import json

import pytest

from rog_ros import cli
from rog_ros.experiments.report_ratios import ratios_markdown
from rog_ros.experiments.seed_stats import aggregate

plt = pytest.importorskip('matplotlib.pyplot')


def _run(path, system, seed, time_to_target=2.0, budget=100):
    """Write one simulated run's summary.json and timeseries.csv into ``path``."""
    path.mkdir(parents=True)
    (path / 'summary.json').write_text(json.dumps({
        'system': system, 'seed': seed, 'workers': 2, 'workload': 'toy', 'trace': 'indoors',
        'target_accuracy': 0.8347, 'final_accuracy': 0.85, 'time_to_target_s': time_to_target,
        's_per_iteration': 0.1, 'iteration_budget': budget}))
    (path / 'timeseries.csv').write_text(
        'time_s,iteration,accuracy\n0.0,0,0.3\n1.0,10,0.7\n2.0,20,0.85\n')


def _comparison(path, seeds, times=None):
    """Write a comparison folder of rog:4 and bsp over ``seeds`` by hand."""
    path.mkdir()
    (path / 'summary.json').write_text(json.dumps({'meta': {
        'workload': 'toy', 'trace': 'indoors', 'workers': 2, 'seeds': list(seeds),
        'systems': ['rog:4', 'bsp']}, 'systems': []}))
    for seed in seeds:
        _run(path / 'runs' / f'rog-4-seed{seed}', 'rog:4', seed, (times or {}).get('rog:4', 2.0))
        _run(path / 'runs' / f'bsp-seed{seed}', 'bsp', seed, 3.0)


def _header(path):
    """Return the report's lines up to its table."""
    lines = (path / 'report.md').read_text().splitlines()
    return '\n'.join(lines[:next(i for i, x in enumerate(lines) if x.startswith('| system'))])


def _table(system, times):
    """Return the aggregated row of ``system`` with one seed per time to target."""
    return aggregate([{'system': system, 'seed': k, 'time_to_target_s': t, 's_per_iteration': 1}
                      for k, t in enumerate(times)])


def test_a_comparison_report_states_its_target_and_iteration_budget(tmp_path):
    # the target was only in summary.json, and a 100-iteration comparison read like the default
    _comparison(tmp_path / 'cmp', [0, 1])
    assert cli.main(['report', str(tmp_path / 'cmp')]) == 0
    head = _header(tmp_path / 'cmp')
    assert 'seeds [0, 1], 100 iterations per run.' in head
    assert 'Target accuracy 0.8347: the workload' in head
    assert 'the sample standard deviation over the seeds, ddof 1' in head


def test_a_report_of_runs_states_its_target_and_iteration_budget(tmp_path):
    _run(tmp_path / 'a', 'rog:4', 0)
    _run(tmp_path / 'b', 'bsp', 0, budget=200)
    assert cli.main(['report', str(tmp_path)]) == 0
    head = _header(tmp_path)
    assert 'Iteration budgets 100, 200 (they differ between runs).' in head
    assert 'Target accuracy 0.8347: the workload' in head


@pytest.mark.parametrize('seeds, said', [
    ([0], 'One seed per system: each median [IQR] bracket is that single run'),
    ([0, 1], 'Medians and interquartile ranges of 2 seeds are indicative only'),
    ([0, 1, 2, 3, 4], None)])
def test_few_seeds_are_said_to_be_indicative_under_the_table(tmp_path, seeds, said):
    _comparison(tmp_path / 'cmp', seeds)
    assert cli.main(['report', str(tmp_path / 'cmp')]) == 0
    lines = (tmp_path / 'cmp' / 'report.md').read_text().splitlines()
    end = max(i for i, x in enumerate(lines) if x.startswith('| bsp') or x.startswith('| rog'))
    if said is None:
        assert 'indicative' not in '\n'.join(lines) and 'One seed' not in '\n'.join(lines)
    else:
        assert lines[end + 1] == '' and lines[end + 2].startswith(said)


def test_seeds_note_counts_the_runs_of_each_row():
    from rog_ros.experiments.report_table import seeds_note
    assert seeds_note([_table('bsp', [1.0, 2.0]), _table('rog:4', [1.0, 2.0, 3.0])]).startswith(
        'Medians and interquartile ranges of 2-3 seeds are indicative only')


def test_a_ratio_line_carries_both_reach_counts():
    line = ratios_markdown([_table('rog:4', [1.0, 2.0]), _table('bsp', [4.0, 6.0, 8.0, None])])
    assert line == ('- rog:4 / bsp: median time to target 0.21 (2/2 and 3/4 seeds reached), '
                    'mean time to target 0.25, s/iteration 1.00')
    line = ratios_markdown([_table('rog:4', [1.0, 2.0]), _table('bsp', [4.0, 6.0, None])])
    assert line.startswith('- rog:4 / bsp: median time to target - (that of bsp falls on a '
                           'seed that missed it; 2/2 and 2/3 seeds reached), mean time to '
                           'target 0.30, s/iteration 1.00')


def test_a_side_that_never_reached_the_target_is_said_so_not_dropped():
    line = ratios_markdown([_table('rog:4', [None, None, None]), _table('bsp', [4.0, 6.0])])
    assert line == ('- rog:4 / bsp: rog:4 did not reach the target (0/3), s/iteration 1.00')


def test_the_target_line_of_the_accuracy_plots_has_a_legend_entry_and_titles_say_the_mean(
        tmp_path, monkeypatch):
    from rog_ros.experiments.report_plots import write_plots
    plt.close('all')
    monkeypatch.setattr(plt, 'close', lambda *args: None)       # keep the figures to read
    rows = [{'time_s': t, 'iteration': t * 10, 'accuracy': 0.5 + t / 10} for t in range(4)]
    write_plots(str(tmp_path), [_table('bsp', [2.0])], {'bsp': [rows]}, 0.8347,
                context='toy on indoors')
    figs = [plt.figure(n) for n in plt.get_fignums()]
    monkeypatch.undo()
    accuracy = [f for f in figs if f.axes[0].get_ylabel().startswith('accuracy')]
    assert len(accuracy) == 3
    for fig in accuracy:
        ax = fig.axes[0]
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ['bsp', 'target 0.8347']
        assert ax.get_title() == 'toy on indoors, mean of 1 seed'
    plt.close('all')


def _times(table):
    """Return ``times_figure`` of ``table`` and its time axes (the last one)."""
    from rog_ros.experiments.report_plots import times_figure
    fig = times_figure(plt, table, 'toy on indoors')
    return fig, fig.axes[-1]


def test_times_to_target_read_plainly_on_a_linear_axis_when_close():
    from matplotlib.ticker import ScalarFormatter
    fig, ax = _times([_table('bsp', [20.0, 25.0]), _table('rog:4', [15.0, 18.0])])
    assert ax.get_yscale() == 'linear' and len(fig.axes) == 1
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ['one seed', 'median over seeds']
    assert isinstance(ax.yaxis.get_major_formatter(), ScalarFormatter)
    plt.close(fig)


def test_misses_go_to_a_band_of_their_own_and_long_names_are_slanted():
    from matplotlib.ticker import ScalarFormatter
    fig, ax = _times([_table('bsp', [13.0, 76.0]), _table('rog:4-no-ordering', [9.0, None]),
                      _table('rog:4-paper-deadline', [10.0, 12.0])])
    band = fig.axes[0]
    assert ax.get_yscale() == 'log' and len(fig.axes) == 2
    assert [t.get_text() for t in band.get_yticklabels()] == ['not reached']
    assert band.get_title() == 'toy on indoors, 2 seeds'
    formatter = ax.yaxis.get_major_formatter()
    assert isinstance(formatter, ScalarFormatter)
    fig.canvas.draw()
    shown = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert any('50' in t for t in shown) and not any('^' in t or 'times' in t for t in shown)
    assert 'seed never reached the target' in [t.get_text() for t in
                                               ax.get_legend().get_texts()]
    ticks = ax.get_xticklabels()
    assert all(t.get_rotation() == 35 and t.get_ha() == 'right' for t in ticks)
    plt.close(fig)


def test_each_system_keeps_its_colour_in_every_report():
    from rog_ros.experiments.report_systems import system_color, system_colors
    assert system_color('flown:4') == '#2ca02c' and system_color('bsp') == '#1f77b4'
    assert system_color('rog:4') == '#d62728' and system_color('ssp:4') == '#ff7f0e'
    thresholds = [system_color(f'rog:{s}') for s in (1, 2, 3, 4, 5, 6, 7, 8, 20, 30, 40)]
    assert len(set(thresholds)) == len(thresholds)
    assert system_color('rog:4-no-ordering') == system_color('rog:4-no-ordering')
    names = ['rog:4', 'rog:4-no-ordering', 'rog:4-no-magnitude', 'rog:4-no-mta-time',
             'rog:4-paper-deadline', 'aet', 'localsgd']
    colors = system_colors(names)
    assert len(set(colors.values())) == len(names) and colors['rog:4'] == '#d62728'
    assert system_colors(['flown:4', 'bsp']) == {'flown:4': '#2ca02c', 'bsp': '#1f77b4'}
