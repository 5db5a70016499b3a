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
"""The trace-driven simulator: deterministic, complete summaries, real training."""

import json
import os

import pytest
from rog_ros.experiments.compare import compare
from rog_ros.sim.simulator import make_traces, SimConfig, simulate
import torch

SUMMARY_KEYS = {'system', 'staleness', 'workers', 'trace', 'seed', 'iterations', 'sim_time_s',
                'target_accuracy', 'time_to_target_s', 'final_accuracy', 'stall_cost',
                'threshold_triggers', 'compute_time_s', 'comm_time_s', 'stall_time_s',
                'bytes_up', 'bytes_down', 'mean_transfer_s', 'p95_transfer_s'}


def small(system, seed=0, **kw):
    return SimConfig(workload='toy', system=system, workers=3, trace='indoors', seed=seed,
                     iterations=12, compute_time_s=0.2, **kw)


def test_summary_has_every_metric_and_is_deterministic(tmp_path):
    a = simulate(small('rog:2')).write(str(tmp_path / 'a'))
    b = simulate(small('rog:2')).write(str(tmp_path / 'b'))
    assert SUMMARY_KEYS <= set(a)
    assert a == b                                  # same seed, same run
    assert a['iterations'] == 12
    assert 0.0 <= a['final_accuracy'] <= 1.0
    assert a['bytes_up'] > 0 and a['bytes_down'] > 0
    lines = open(tmp_path / 'a' / 'timeseries.csv').read().splitlines()
    assert lines[0].startswith('time_s,iteration') and len(lines) > 3


def test_training_is_real():
    rec = simulate(small('bsp'))
    first, last = rec.rows[0]['accuracy'], rec.rows[-1]['accuracy']
    assert last > first + 0.05                    # the model learned something


def test_unknown_trace_is_a_clear_error():
    with pytest.raises(ValueError, match='unknown trace'):
        make_traces('nowhere', 2, 0)


def test_compare_writes_report_and_plots(tmp_path):
    out = str(tmp_path / 'cmp')
    res = compare('toy', 'indoors', ['bsp', 'rog:2'], 2, [0], out, iterations=6, quiet=True)
    assert [r['system'] for r in res['systems']] == ['bsp', 'rog:2']
    for name in ('summary.json', 'report.md', 'accuracy_vs_time.png',
                 'accuracy_vs_iteration.png', 'time_composition.png', 'triggers.png'):
        assert os.path.getsize(os.path.join(out, name)) > 100
    assert '| bsp |' in open(os.path.join(out, 'report.md')).read()
    # resumable: a second call reuses the runs
    again = compare('toy', 'indoors', ['bsp', 'rog:2'], 2, [0], out, iterations=6, quiet=True)
    assert json.dumps(again['systems']) == json.dumps(res['systems'])


def test_compare_evaluates_as_asked_and_reruns_runs_of_another_resolution(tmp_path):
    out = str(tmp_path / 'cmp')
    first = compare('toy', 'indoors', ['rog:2'], 2, [0], out, iterations=12, quiet=True,
                    sim_options={'evaluations': 4})
    run = os.path.join(out, 'runs', 'rog-2-seed0')
    summary = json.load(open(os.path.join(run, 'summary.json')))
    assert summary['evaluations'] == 4
    rows = open(os.path.join(run, 'timeseries.csv')).read().splitlines()[1:]
    assert len(rows) == 4 + 2             # at the start, every 3 iterations, the final one
    # a finer resolution into the same directory runs again instead of reusing the run
    finer = compare('toy', 'indoors', ['rog:2'], 2, [0], out, iterations=12, quiet=True,
                    sim_options={'evaluations': 12})
    rows = open(os.path.join(run, 'timeseries.csv')).read().splitlines()[1:]
    assert json.load(open(os.path.join(run, 'summary.json')))['evaluations'] == 12
    assert len(rows) == 12 + 2
    assert first['systems'][0]['runs'] == finer['systems'][0]['runs'] == 1


def test_compare_into_a_used_directory_reruns_runs_of_other_settings(tmp_path, capsys):
    """A rerun with another trace, fleet size, budget or start must not reuse old runs."""
    import torch
    from rog_ros.nodes.assembly import load_workload
    from rog_ros.nodes.model_file import save_state_dict
    out = str(tmp_path / 'cmp')
    run = os.path.join(out, 'runs', 'bsp-seed0')

    def trace_of_run():
        return json.load(open(os.path.join(run, 'summary.json')))['trace']
    compare('toy', 'indoors', ['bsp'], 2, [0], out, iterations=6)
    assert 'other settings' not in capsys.readouterr().err
    compare('toy', 'outdoors', ['bsp'], 2, [0], out, iterations=6)
    assert trace_of_run() == 'outdoors'
    assert 'were made with other settings (trace indoors): running them again' in \
        capsys.readouterr().err
    compare('toy', 'outdoors', ['bsp'], 3, [0], out, iterations=6, quiet=True)
    summary = json.load(open(os.path.join(run, 'summary.json')))
    assert summary['workers'] == 3
    compare('toy', 'outdoors', ['bsp'], 3, [0], out, iterations=8, quiet=True)
    assert json.load(open(os.path.join(run, 'summary.json')))['iterations'] == 8
    # another start: the runs begin from the file (its first evaluation), then are reused
    model = load_workload('toy').make_model()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3)
    save_state_dict(tmp_path / 'day1.pt', model)
    opts = {'init_model': str(tmp_path / 'day1.pt')}
    compare('toy', 'outdoors', ['bsp'], 3, [0], out, iterations=8, sim_options=opts)
    start = json.load(open(os.path.join(run, 'summary.json')))['start_model']
    assert start['source'] == str(tmp_path / 'day1.pt')
    assert 'other settings (weights from workload toy' in capsys.readouterr().err
    compare('toy', 'outdoors', ['bsp'], 3, [0], out, iterations=8, sim_options=opts)
    assert 'other settings' not in capsys.readouterr().err       # the same: reused


def test_a_run_whose_robots_computed_less_than_the_budget_is_reused(tmp_path, capsys):
    # a robot out for its link skips ahead when it catches up, so the robots compute fewer
    # iterations than the budget on average: the summary's 'iterations' said 24 for a budget
    # of 30, and every rerun of the comparison ran such a Rog run again
    out = str(tmp_path / 'cmp')
    run = os.path.join(out, 'runs', 'bsp-seed0')
    compare('toy', 'indoors', ['bsp'], 2, [0], out, iterations=6, quiet=True)
    path = os.path.join(run, 'summary.json')
    summary = json.load(open(path))
    assert summary['iteration_budget'] == 6 and summary['iterations_per_robot'] == [6, 6]
    summary.update(iterations=4, iterations_per_robot=[6, 2])     # as Rog's suspended robot
    with open(path, 'w') as f:
        json.dump(summary, f)
    compare('toy', 'indoors', ['bsp'], 2, [0], out, iterations=6)
    assert 'other settings' not in capsys.readouterr().err
    assert json.load(open(path))['iterations'] == 4                # reused, not run again
    compare('toy', 'indoors', ['bsp'], 2, [0], out, iterations=5)
    assert 'other settings (6 iterations)' in capsys.readouterr().err


def test_a_trace_file_is_replayed_at_per_seed_offsets(tmp_path):
    from rog_ros.net import traces
    from rog_ros.sim.simulator import file_offsets
    path = str(tmp_path / 't.csv')
    traces.save_trace(traces.generate('outdoors', 400.0, seed=2), path)
    by_seed = [[off for _, off in make_traces(path, 4, seed)] for seed in range(5)]
    assert by_seed[0] == [off for _, off in make_traces(path, 4, 0)]      # deterministic
    assert len({tuple(round(o, 6) for o in offs) for offs in by_seed}) == 5   # differ by seed
    for offs in by_seed:
        assert all(0.0 <= o < 400.0 for o in offs)
        # each robot in its own quarter of the record (after the seed's phase): consecutive
        # robots are less than two quarters apart, going round the loop
        steps = [(offs[(r + 1) % 4] - offs[r]) % 400.0 for r in range(4)]
        assert all(0.0 < d < 200.0 for d in steps) and sum(steps) == pytest.approx(400.0)
    assert file_offsets(400.0, 4, 3) == file_offsets(400.0, 4, 3)


def test_aggregate_reports_median_iqr_and_targets_reached():
    from rog_ros.experiments.seed_stats import aggregate
    from rog_ros.experiments.report_table import table_markdown
    runs = [{'system': 'rog:4', 'seed': k, 'time_to_target_s': t, 'final_accuracy': 0.8}
            for k, t in enumerate([10.0, 20.0, 30.0, 40.0, None])]
    row = aggregate(runs)
    assert row['reached_target'] == '4/5' and row['reached_target_count'] == 4
    assert row['time_to_target_s'] == 25.0                  # mean over the seeds that reached
    assert row['time_to_target_s_median'] == 30.0           # a miss counts as infinitely late
    assert row['time_to_target_s_p25'] == 20.0
    assert row['time_to_target_s_p75'] is None             # falls on the miss
    assert row['final_accuracy_median'] == pytest.approx(0.8)
    line = table_markdown([row]).splitlines()[2]
    assert '30.0 [20.0->]' in line and '4/5' in line


def test_seconds_per_iteration_to_target_is_reported_and_derived_for_old_summaries():
    # The phase that time-to-target measures has its own regime: 12 s over 60 iterations is
    # 0.2 s per iteration whatever the whole run averaged.
    from rog_ros.experiments.seed_stats import aggregate
    from rog_ros.experiments.report_ratios import ratios_markdown
    from rog_ros.experiments.report_table import table_markdown
    from rog_ros.metrics import per_iteration_to_target
    assert per_iteration_to_target(12.0, 60.0) == pytest.approx(0.2)
    assert per_iteration_to_target(None, 60.0) is None
    assert per_iteration_to_target(12.0, None) is None
    new = [{'system': 'rog:4', 'seed': k, 'time_to_target_s': t, 'iterations_to_target': i,
            's_per_iteration_to_target': per_iteration_to_target(t, i), 's_per_iteration': 0.5}
           for k, (t, i) in enumerate([(12.0, 60.0), (30.0, 60.0), (None, None)])]
    # summaries written before the key existed: derived from the two it is made of
    old = [{'system': 'bsp', 'seed': k, 'time_to_target_s': t, 'iterations_to_target': i,
            's_per_iteration': 0.5}
           for k, (t, i) in enumerate([(20.0, 50.0), (40.0, 50.0), (60.0, 50.0)])]
    a, b = aggregate(new), aggregate(old)
    assert a['s_per_iteration_to_target_median'] == pytest.approx(0.35)   # the two reached
    assert b['s_per_iteration_to_target_median'] == pytest.approx(0.8)
    assert b['s_per_iteration_to_target_p25'] == pytest.approx(0.6)
    line = table_markdown([a, b]).splitlines()[3]
    assert '0.800 [0.600-1.000]' in line
    assert 'median s/iteration to target 0.44' in ratios_markdown([a, b])


def test_accuracy_at_equal_time_reads_every_system_when_the_first_run_ended():
    # Two systems, two seeds: per seed the equal time is the earliest last periodic
    # evaluation; the final evaluation (last row, whole set) is never read.
    from rog_ros.experiments.seed_stats import add_equal_time_accuracy
    from rog_ros.experiments.seed_stats import aggregate
    from rog_ros.experiments.report_table import table_markdown

    def run(times, accs, final=0.99):
        rows = [{'time_s': t, 'accuracy': a, 'accuracy_smoothed': a}
                for t, a in zip(times, accs)]
        return rows + [{'time_s': times[-1] + 0.5, 'accuracy': final,
                        'accuracy_smoothed': final}]

    timeseries = {('fast', 0): run([0, 10, 20], [0.5, 0.7, 0.8]),
                  ('slow', 0): run([0, 15, 30, 60], [0.5, 0.6, 0.65, 0.9]),
                  ('fast', 1): run([0, 10, 40], [0.5, 0.7, 0.85]),
                  ('slow', 1): run([0, 35, 50], [0.5, 0.75, 0.9]),
                  ('fast', 2): run([0, 5], [0.5, 0.6])}     # alone on seed 2
    results = {label: [{'system': label, 'seed': seed} for seed in (0, 1, 2)]
               for label in ('fast', 'slow')}
    results['slow'][2]['error'] = 'RuntimeError: deadlock'   # seed 2: failed, no curves
    add_equal_time_accuracy(results, timeseries)
    fast, slow = results['fast'], results['slow']
    assert fast[0]['equal_time_s'] == slow[0]['equal_time_s'] == 20.0
    assert fast[0]['accuracy_at_equal_time'] == pytest.approx(0.8)
    assert slow[0]['accuracy_at_equal_time'] == pytest.approx(0.6)    # its 15 s evaluation
    assert fast[1]['equal_time_s'] == 40.0           # the fast system's final row (40.5) not
    assert slow[1]['accuracy_at_equal_time'] == pytest.approx(0.75)
    assert 'accuracy_at_equal_time' not in fast[2] and 'equal_time_s' not in slow[2]
    assert 'equal_time_s' not in fast[2]               # nothing to compare it with
    row = aggregate(fast)
    assert row['accuracy_at_equal_time'] == pytest.approx(0.825)       # mean of seeds 0, 1
    assert '0.825 ± 0.035' in table_markdown([row]).splitlines()[2]
    alone = {'fast': [{'system': 'fast', 'seed': 0}]}      # one system: nothing to compare
    add_equal_time_accuracy(alone, timeseries)
    assert 'accuracy_at_equal_time' not in alone['fast'][0]


def test_the_toy_compares_protocols_and_bsp_converges_on_it():
    # with momentum 0.9 BSP's loss rose from 40 to 400 iterations on the toy (1-bit codec)
    from rog_ros.experiments.toy import run_toy
    short, long = run_toy('bsp', iterations=20), run_toy('bsp', iterations=120)
    assert 0 < long.excess < 0.5 * short.excess
    assert long.loss - long.excess == pytest.approx(short.loss - short.excess)   # one optimum


def test_the_toy_runs_on_one_torch_thread_and_gives_the_callers_back(monkeypatch):
    # with a thread per core the toy's small tensors spun against a busy machine's other
    # load: rog sim --toy --systems bsp took 20-43 s instead of 3 s on 2 cores
    from rog_ros.experiments import toy
    seen, run = [], toy.Harness.run

    def counted(harness):
        """Run the harness, noting torch's thread count in it."""
        seen.append(torch.get_num_threads())
        return run(harness)

    monkeypatch.setattr(toy.Harness, 'run', counted)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        toy.run_toy('bsp', iterations=2)
        assert seen == [1]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)


def _finished_run(d, **summary):
    """Write the summary of a finished toy run (clean trace, 2 robots, 2 evaluations) in d."""
    summary = {'trace': 'clean', 'workers': 2, 'evaluations': 2, 'workload_options': {},
               **summary}
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'summary.json'), 'w') as f:
        json.dump(summary, f)


def _toy_of_7_iterations():
    """Build the toy workload with a budget of its own, as an EACOL surrogate has."""
    from rog_ros.workloads.toy import make_toy
    wl = make_toy()
    wl.adaptation_iterations = 7
    return wl


def test_default_budget_reuses_only_runs_of_the_workloads_own(tmp_path, monkeypatch):
    # a run made with --iterations 20 was reused by a later default-budget comparison
    from rog_ros import workloads
    from rog_ros.experiments.compare import _other_settings
    from rog_ros.sim.simulator import DEFAULT_ITERATIONS
    d = str(tmp_path / 'run')
    cfg = SimConfig(workload='toy', system='bsp', trace='clean', workers=2, evaluations=2)
    _finished_run(d, iteration_budget=20)
    assert _other_settings(d, cfg, None) == '20 iterations'
    _finished_run(d, iteration_budget=DEFAULT_ITERATIONS)
    assert _other_settings(d, cfg, None) is None
    # a workload's own budget is the one a default run gets
    monkeypatch.setitem(workloads._FACTORIES, 'toy-7', _toy_of_7_iterations)
    monkeypatch.setattr(workloads, '_BUILT', {})
    short = SimConfig(workload='toy-7', system='bsp', trace='clean', workers=2, evaluations=2)
    assert _other_settings(d, short, None) == f'{DEFAULT_ITERATIONS} iterations'
    _finished_run(d, iteration_budget=7)
    assert _other_settings(d, short, None) is None


def test_a_reference_systems_default_budget_is_recorded(monkeypatch):
    # the runners record no budget: without --iterations, reuse could only guess it
    from rog_ros import workloads
    from rog_ros.metrics import RunRecorder
    from rog_ros.sim import systems

    def runner(cfg, progress=None):
        """Stand in for a reference system's runner: a run that records no budget."""
        return RunRecorder(system=cfg.system, n_workers=cfg.workers)
    monkeypatch.setattr(systems, 'lookup', lambda spec: runner)
    monkeypatch.setitem(workloads._FACTORIES, 'toy-7', _toy_of_7_iterations)
    monkeypatch.setattr(workloads, '_BUILT', {})
    rec = simulate(SimConfig(workload='toy-7', system='adacomp', workers=2))
    assert rec.extra['iteration_budget'] == 7
    rec = simulate(SimConfig(workload='toy-7', system='adacomp', workers=2, iterations=5))
    assert rec.extra['iteration_budget'] == 5


def test_compare_reuses_runs_of_an_alias_workload(tmp_path):
    # chaos builds a workload named toy: its runs recorded toy's checkpoint as their start and
    # were never reused; a toy run must still not pass for a chaos run
    from rog_ros import workloads
    from rog_ros.experiments.compare import _other_settings
    assert workloads.get('chaos').name == 'toy'
    cfg = SimConfig(workload='chaos', system='bsp', trace='clean', workers=2, iterations=3,
                    evaluations=2, eval_samples=64)
    chaos = str(tmp_path / 'chaos')
    summary = simulate(cfg).write(chaos)
    assert _other_settings(chaos, cfg, None) is None
    assert summary['start_model']['source'] == "workload chaos's pre-trained checkpoint"
    # a summary from before, which named the builder's workload: reused, it is the same start
    summary['start_model']['source'] = "workload toy's pre-trained checkpoint"
    _finished_run(chaos, **summary)
    assert _other_settings(chaos, cfg, None) is None
    # a toy run records the same words, but another start
    toy = str(tmp_path / 'toy')
    simulate(SimConfig(workload='toy', system='bsp', trace='clean', workers=2, iterations=3,
                       evaluations=2, eval_samples=64)).write(toy)
    assert _other_settings(toy, cfg, None) == (
        "weights from workload toy's pre-trained checkpoint, other data (its data_fingerprint "
        'differs)')


def _constant_trace(path, mbps):
    """Write a trace file of ``mbps`` Mbit/s for 100 s at ``path``."""
    with open(path, 'w') as f:
        f.write(''.join(f'{t},{mbps}\n' for t in range(0, 101, 10)))


def test_compare_reruns_runs_of_a_trace_file_rewritten_under_its_name(tmp_path, capsys):
    # the summary recorded only the trace's name: a file rewritten from 50 to 0.05 Mbit/s
    # gave the same table
    out, trace = str(tmp_path / 'cmp'), str(tmp_path / 'tt.csv')
    path = os.path.join(out, 'runs', 'bsp-seed0', 'summary.json')
    _constant_trace(trace, 50)
    compare('toy', trace, ['bsp'], 2, [0], out, iterations=6, quiet=True, jobs_parallel=1,
            sim_options={'evaluations': 2})
    fast = json.load(open(path))
    assert len(fast['trace_digest']) == 12
    _constant_trace(trace, 0.05)
    compare('toy', trace, ['bsp'], 2, [0], out, iterations=6, sim_options={'evaluations': 2})
    assert (f'were made with other settings (trace {trace} as it was before its file '
            'changed): running them again') in capsys.readouterr().err
    slow = json.load(open(path))
    assert slow['trace_digest'] != fast['trace_digest']
    assert slow['sim_time_s'] > 2 * fast['sim_time_s']          # run again on the slow link
    # a run from before digests were recorded is reused as before; a preset records none
    del slow['trace_digest']
    with open(path, 'w') as f:
        json.dump(slow, f)
    compare('toy', trace, ['bsp'], 2, [0], out, iterations=6, sim_options={'evaluations': 2})
    assert 'other settings' not in capsys.readouterr().err
    assert 'trace_digest' not in json.load(open(path))
    assert 'trace_digest' not in simulate(small('bsp')).summary()


def test_compare_reruns_runs_whose_robots_started_their_files_elsewhere(tmp_path, capsys):
    # robots of one recording replay in step since 2026-12-06: a run made before, with the
    # same file bytes, placed them apart and was reused as if it were the same run
    out, trace = str(tmp_path / 'cmp'), str(tmp_path / 'tt.csv')
    path = os.path.join(out, 'runs', 'bsp-seed0', 'summary.json')
    _constant_trace(trace, 50)
    compare('toy', trace, ['bsp'], 2, [0], out, iterations=6, quiet=True, jobs_parallel=1,
            sim_options={'evaluations': 2})
    first = json.load(open(path))
    assert len(first['trace_offsets_s']) == 2
    moved = dict(first, trace_offsets_s=[o + 7.0 for o in first['trace_offsets_s']])
    with open(path, 'w') as f:
        json.dump(moved, f)
    compare('toy', trace, ['bsp'], 2, [0], out, iterations=6, sim_options={'evaluations': 2})
    assert 'replayed from other offsets' in capsys.readouterr().err
    assert json.load(open(path))['trace_offsets_s'] == first['trace_offsets_s']
    # the same offsets, or a run from before they were recorded: reused
    compare('toy', trace, ['bsp'], 2, [0], out, iterations=6, sim_options={'evaluations': 2})
    assert 'other settings' not in capsys.readouterr().err
    older = json.load(open(path))
    del older['trace_offsets_s']
    with open(path, 'w') as f:
        json.dump(older, f)
    compare('toy', trace, ['bsp'], 2, [0], out, iterations=6, sim_options={'evaluations': 2})
    assert 'other settings' not in capsys.readouterr().err


def test_compare_reuses_runs_of_a_trace_file_gone_since(tmp_path):
    # a comparison whose trace file was removed reused its runs (nothing to tell them apart
    # by); the offsets check added for in-step replay raised "unknown trace" instead
    out, trace = str(tmp_path / 'cmp'), str(tmp_path / 'tt.csv')
    _constant_trace(trace, 50)
    compare('toy', trace, ['bsp'], 2, [0], out, iterations=6, quiet=True, jobs_parallel=1,
            sim_options={'evaluations': 2})
    path = os.path.join(out, 'runs', 'bsp-seed0', 'summary.json')
    first = json.load(open(path))
    assert first['trace_offsets_s']
    os.remove(trace)
    compare('toy', trace, ['bsp'], 2, [0], out, iterations=6, quiet=True, jobs_parallel=1,
            sim_options={'evaluations': 2})
    assert json.load(open(path)) == first


def _write_builder(folder, module: str, seed: int):
    """Write a user's workload builder ``module:build``: the toy, built with ``seed``."""
    (folder / f'{module}.py').write_text(
        'from rog_ros.workloads.toy import make_toy\n\n\n'
        f'def build():\n    return make_toy(seed={seed})\n')


def test_a_run_of_a_builder_that_changed_is_not_reused(tmp_path, monkeypatch):
    # a --workload module:function whose builder changed recorded the same source text, and
    # its run was reused without its starting model's fingerprint being compared
    import sys
    from rog_ros import workloads
    from rog_ros.experiments.compare import _other_settings
    module = 'rog_test_changed_builder'
    monkeypatch.syspath_prepend(str(tmp_path))
    _write_builder(tmp_path, module, 0)
    cfg = SimConfig(workload=f'{module}:build', system='bsp', trace='clean', workers=2,
                    iterations=3, evaluations=2, eval_samples=64)
    d = str(tmp_path / 'run')
    try:
        simulate(cfg).write(d)
        assert _other_settings(d, cfg, None) is None
        _write_builder(tmp_path, module, 7)            # the user edits the builder
        sys.modules.pop(module)
        monkeypatch.setattr(workloads, '_BUILT', {})   # a new rog compare: built afresh
        assert _other_settings(d, cfg, None) == (
            f"weights from workload {module}:build's pre-trained checkpoint, other data (its "
            'data_fingerprint differs)')
    finally:
        sys.modules.pop(module, None)


def test_a_run_on_data_that_changed_on_disk_is_not_reused(tmp_path, monkeypatch):
    # a user's builder reading its files: same options, same start model, other data; the
    # comparison reused the runs of the old data (a 4-class set after it became 2-class)
    import sys
    import numpy as np
    from rog_ros import workloads
    from rog_ros.experiments.compare import _other_settings
    module = 'rog_test_builder_reading_files'
    data = tmp_path / 'labels.npy'
    (tmp_path / f'{module}.py').write_text(
        'import numpy as np\nimport torch\nfrom rog_ros.workloads.toy import make_toy\n\n\n'
        'def build():\n    task = make_toy(classes=4)\n'
        f'    labels = torch.from_numpy(np.load({str(data)!r}))\n'
        '    task._train_y = labels[:len(task._train_y)]\n    return task\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    np.save(data, np.arange(4096) % 4)
    cfg = SimConfig(workload=f'{module}:build', system='bsp', trace='clean', workers=2,
                    iterations=3, evaluations=2, eval_samples=64)
    d = str(tmp_path / 'run')
    try:
        simulate(cfg).write(d)
        with open(os.path.join(d, 'summary.json')) as fh:
            recorded = json.load(fh)['data_fingerprint']
        assert len(recorded) == 16
        assert _other_settings(d, cfg, None) is None
        np.save(data, np.arange(4096) % 2)            # the user's files change
        monkeypatch.setattr(workloads, '_BUILT', {})     # a new rog compare: built afresh
        assert _other_settings(d, cfg, None) == (
            'other data (its data_fingerprint differs)')
        np.save(data, np.arange(4096) % 4)            # and back: the same data again
        monkeypatch.setattr(workloads, '_BUILT', {})
        assert _other_settings(d, cfg, None) is None
    finally:
        sys.modules.pop(module, None)


def test_compare_reuses_runs_from_a_reordered_or_float64_model_file(tmp_path, capsys):
    # the reuse check hashed the file while the run recorded the loaded model: a file with
    # its keys in another order or float64 weights was never reused
    import torch
    from rog_ros.experiments.compare import _run_one
    from rog_ros.workloads.toy import make_toy
    state = make_toy().make_model().state_dict()
    assert list(state) == ['weight', 'bias']
    files = {'reordered': {k: state[k] + 0.1 for k in reversed(list(state))},
             'float64': {k: (v + 0.2).double() for k, v in state.items()}}
    for name, weights in files.items():
        model = str(tmp_path / f'{name}.pt')
        torch.save(weights, model)
        out = str(tmp_path / name)
        paths = []
        for system in ('bsp', 'adacomp'):          # an engine run and a reference runner's
            run = os.path.join(out, 'runs', f'{system}-seed0')
            _run_one(SimConfig(workload='toy', system=system, workers=2, trace='clean',
                               iterations=3, evaluations=2, label=system,
                               init_model=model), run)       # as rog compare writes it
            paths.append(os.path.join(run, 'summary.json'))
        starts = [json.load(open(p))['start_model'] for p in paths]
        assert starts[0] == starts[1] and starts[0]['source'] == model
        before = [os.stat(p).st_mtime_ns for p in paths]
        compare('toy', 'clean', ['bsp', 'adacomp'], 2, [0], out, iterations=3,
                jobs_parallel=1, sim_options={'init_model': model, 'evaluations': 2})
        assert 'other settings' not in capsys.readouterr().err, name
        assert [os.stat(p).st_mtime_ns for p in paths] == before, name     # reused
