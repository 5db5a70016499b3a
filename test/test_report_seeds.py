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
"""How a report reads its seeds: sample std, curves with a band, what the waits count."""

import numpy as np
import pytest

from rog_ros.experiments.report_table import table_markdown
from rog_ros.experiments.seed_stats import aggregate

plt = pytest.importorskip('matplotlib.pyplot')


def _row(system, key, values):
    """Return the aggregated row of ``system`` with one seed per value of ``key``."""
    return aggregate([{'system': system, 'seed': k, key: v} for k, v in enumerate(values)])


def _cells(row):
    """Return the cells of ``row``'s line in the Markdown table."""
    return [c.strip() for c in table_markdown([row]).splitlines()[2].strip('|').split('|')]


def _rows(accuracies, times=None, smoothed=None):
    """Return a run's evaluation rows (and ``accuracy_smoothed`` when given)."""
    times = range(len(accuracies)) if times is None else times
    rows = [{'time_s': float(t), 'iteration': 10.0 * k, 'accuracy': a}
            for k, (t, a) in enumerate(zip(times, accuracies))]
    for r, s in zip(rows, smoothed or ()):
        r['accuracy_smoothed'] = s
    return rows


def test_plus_minus_is_the_sample_standard_deviation_over_seeds():
    # Prepare: four seeds 1, 2, 3, 4: sample std 1.291 (n - 1), population std 1.118
    row = _row('bsp', 'final_accuracy', [1.0, 2.0, 3.0, 4.0])
    # Assert
    assert row['final_accuracy_std'] == pytest.approx(np.sqrt(5.0 / 3.0))
    assert _cells(row)[4] == '2.500 ± 1.291'


def test_one_seed_has_no_plus_minus_and_two_equal_seeds_show_zero():
    one = _row('bsp', 'final_accuracy', [0.8])
    assert one['final_accuracy_std'] is None and _cells(one)[4] == '0.800'
    two = _row('bsp', 'final_accuracy', [0.8, 0.8])
    assert two['final_accuracy_std'] == 0.0 and _cells(two)[4] == '0.800 ± 0.000'


def test_the_curve_band_spans_the_seeds_of_the_smoothed_accuracy():
    from rog_ros.experiments.report_curves import curve_band, running_mean
    # Prepare: two seeds; the smoothing is the mean of the last 3 evaluations
    a, b = _rows([0.3, 0.6, 0.9, 0.9]), _rows([0.5, 0.5, 0.8, 0.7])
    assert np.allclose(running_mean([0.3, 0.6, 0.9, 0.9]), [0.3, 0.45, 0.6, 0.8])
    # Execute
    grid, mean, lo, hi = curve_band([a, b], 'time_s')
    # Assert: at each evaluation the band is the lowest and highest seed, the curve their mean
    sa, sb = np.array([0.3, 0.45, 0.6, 0.8]), np.array([0.5, 0.5, 0.6, 2.0 / 3.0])
    assert np.allclose(grid, [0, 1, 2, 3])
    assert np.allclose(lo, np.minimum(sa, sb)) and np.allclose(hi, np.maximum(sa, sb))
    assert np.allclose(mean, (sa + sb) / 2) and np.all((lo <= mean) & (mean <= hi))


def test_a_short_seed_holds_its_last_smoothed_accuracy_between_and_after():
    from rog_ros.experiments.report_curves import curve_band
    short, long = _rows([0.4, 0.6], times=[0, 5]), _rows([0.2, 0.4, 0.6], times=[0, 3, 9])
    grid, mean, lo, hi = curve_band([short, long], 'time_s')
    assert np.allclose(grid, [0, 3, 5, 9])
    assert np.allclose(hi, [0.4, 0.4, 0.5, 0.5]) and np.allclose(lo, [0.2, 0.3, 0.3, 0.4])


def test_the_recorded_smoothing_is_the_one_drawn():
    from rog_ros.experiments.report_curves import curve_band
    run = _rows([0.3, 0.6, 0.9], smoothed=[0.3, 0.4, 0.5])
    grid, mean, lo, hi = curve_band([run], 'time_s')
    assert mean[-1] == pytest.approx(0.5) and np.allclose(lo, hi)


def test_the_accuracy_plot_crosses_the_target_where_time_to_target_says():
    # Prepare: raw evaluations reach 0.9 at 10 s, but their 3-evaluation mean (what time to
    # target reads) reaches the target 0.8 only at 30 s: the curve must not cross earlier
    from rog_ros.experiments.report_plots import accuracy_figure, BAND_LABEL
    runs = [_rows([0.5, 0.9, 0.9, 0.9], times=[0, 10, 20, 30]),
            _rows([0.5, 0.8, 0.9, 0.9], times=[0, 10, 20, 30])]
    # Execute
    fig = accuracy_figure(plt, {'bsp': runs}, 'time_s', target=0.8)
    # Assert
    ax = fig.axes[0]
    curve, target = ax.lines
    xs, ys = curve.get_xdata(), curve.get_ydata()
    assert np.allclose(xs, [0, 10, 20, 30]) and curve.get_drawstyle() == 'steps-post'
    assert np.all(ys[xs < 30.0] < 0.8) and ys[-1] == pytest.approx((0.9 + 2.6 / 3) / 2)
    assert list(target.get_ydata()) == [0.8, 0.8] and target.get_linestyle() == '--'
    band = [c for c in ax.collections if c.get_label() == BAND_LABEL]
    assert len(band) == 1
    ys_band = band[0].get_paths()[0].vertices[:, 1]
    assert ys_band.min() == pytest.approx(0.5) and ys_band.max() == pytest.approx(0.9)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ['bsp', 'target 0.8', 'band: min-max over seeds']
    assert 'last 3 evaluations' in ax.get_ylabel()
    plt.close(fig)


def _waits(monkeypatch, system, iterations=8, workers=4):
    """Simulate ``system`` on toy; return its recorder and its triggers and pulls served."""
    from rog_ros import metrics
    from rog_ros.sim.simulator import SimConfig, simulate
    seen = []
    real = metrics.RunRecorder.on_log

    def on_log(recorder, now, node, log):
        """Note each trigger's info and each pull served, then record as before."""
        if log.name in ('trigger', 'pull_done'):
            seen.append((log.name, log.worker, dict(log.info)))
        return real(recorder, now, node, log)
    monkeypatch.setattr(metrics.RunRecorder, 'on_log', on_log)
    rec = simulate(SimConfig(workload='toy', system=system, workers=workers, trace='indoors',
                             iterations=iterations, evaluations=2))
    monkeypatch.setattr(metrics.RunRecorder, 'on_log', real)
    return rec, seen


def test_the_waits_are_what_the_report_says_they_count(tmp_path, monkeypatch):
    """Check the waits sentence against simulations: BSP's barriers and FLOWN's slots."""
    # the report said 'held pulls', and that under BSP every pull waits at the barrier: the
    # last robot to reach a barrier is not held, and FLOWN counts its slot waits, pushes too
    from rog_ros.experiments.report import report_run
    from rog_ros.experiments.report_table import WAITS_LABEL, WAITS_SENTENCE
    # Execute: BSP and FLOWN, 4 robots, 8 iterations each
    bsp, bsp_logs = _waits(monkeypatch, 'bsp')
    flown, flown_logs = _waits(monkeypatch, 'flown:2')
    # Assert: BSP holds 3 of the 4 pulls of each of its 7 barriers (the 8th push gets a stop)
    pulls = sum(1 for name, _, _ in bsp_logs if name == 'pull_done')
    held = [(w, info['clock']) for name, w, info in bsp_logs if name == 'trigger']
    assert pulls == 7 * 4 and len(held) == len(set(held)) == 7 * 3
    assert sorted({c for _, c in held}) == list(range(1, 8))
    assert all(sum(1 for _, c in held if c == k) == 3 for k in range(1, 8))
    assert bsp.summary()['threshold_triggers'] == len(held) == pulls * 3 // 4
    # ... FLOWN counts the pushes and the pulls that waited for their slot
    slots = [info.get('slot') for name, _, info in flown_logs if name == 'trigger']
    assert set(slots) == {'push', 'pull'}
    assert flown.summary()['threshold_triggers'] == len(slots)
    # ... and the report says so, in its column, its plot and its sentence
    for name, rec in (('bsp', bsp), ('flown', flown)):
        rec.write(str(tmp_path / name))
    plt.close('all')
    monkeypatch.setattr(plt, 'close', lambda *args: None)       # keep the figures to read
    text = open(report_run(str(tmp_path))).read()
    figs = [plt.figure(n) for n in plt.get_fignums()]
    monkeypatch.undo()
    plt.close('all')
    lines = [x for x in text.splitlines() if x.startswith('| ')]
    head = [c.strip() for c in lines[0].strip('|').split('|')]
    cells = {c[0]: c for c in ([p.strip() for p in x.strip('|').split('|')] for x in lines[1:])}
    column = head.index(WAITS_LABEL)
    assert cells['bsp'][column] == '21'
    assert cells['flown:2'][column] == str(len(slots))
    assert WAITS_LABEL == 'waits (threshold triggers)'
    assert any(f.axes[0].get_ylabel().startswith(WAITS_LABEL) for f in figs)
    assert f'![{WAITS_LABEL}](triggers.png)' in text
    assert WAITS_SENTENCE in text
    assert ('under BSP every robot but the last to reach each barrier, (iterations - 1) x '
            '(workers - 1) in a run, not one per pull') in WAITS_SENTENCE
    assert 'under FLOWN, a push or a pull that waited for its slot' in WAITS_SENTENCE
    assert 'held pulls' not in text and 'every pull waits' not in text
