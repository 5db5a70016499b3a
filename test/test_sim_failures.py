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
"""A simulated run that cannot finish fails loudly: error in summary, exit code, compare."""

import json
import os

from protocol_fixtures import build
from rog_ros import cli
from rog_ros.experiments import compare as compare_mod
from rog_ros.experiments.compare import compare
from rog_ros.experiments.seed_stats import aggregate
from rog_ros.sim.simulator import SimConfig, simulate


def _zero_trace(tmp_path):
    # (an all-zero trace is refused when it is loaded; one bit per hour never delivers)
    path = str(tmp_path / 'dead.csv')
    with open(path, 'w') as fh:
        fh.write('t_seconds,mbps\n0,1e-9\n10,1e-9\n')
    return path


def test_event_budget_is_an_error():
    rec = simulate(SimConfig(workload='toy', system='rog:2', workers=2, trace='indoors',
                             iterations=20, compute_time_s=0.2, evaluations=1, max_events=300))
    summary = rec.summary()
    assert 'event budget of 300 events' in summary['error']
    assert summary['iterations'] < 20


def test_finished_run_has_no_error():
    rec = simulate(SimConfig(workload='toy', system='rog:2', workers=2, trace='indoors',
                             iterations=4, compute_time_s=0.2, evaluations=1))
    assert 'error' not in rec.summary()


def test_nothing_pending_while_unfinished_is_an_error():
    # every message is lost and no timer is armed: the queue runs dry mid-run
    harness, _, _, _, _ = build('bsp', n=2, fault=lambda msg, src, dst, now: [],
                                end_timeout_s=float('inf'), track=False)
    stats = harness.run()
    assert stats.error is not None and 'deadlock' in stats.error


def test_time_budget_is_not_an_error():
    harness, _, _, _, _ = build('bsp', n=2, track=False)
    stats = harness.run(until=0.2)
    assert stats.error is None


def test_rog_sim_exits_nonzero_with_one_line(tmp_path, capsys):
    out = str(tmp_path / 'run')
    rc = cli.main(['sim', '--workload', 'toy', '--trace', _zero_trace(tmp_path), '--workers',
                   '2', '--iterations', '3', '--out', out])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert err[-1].startswith('rog sim: run failed: no message delivered')
    with open(os.path.join(out, 'summary.json')) as fh:
        assert 'no message delivered' in json.load(fh)['error']


def test_rog_sim_toy_failure_is_loud(monkeypatch, capsys):
    from rog_ros.experiments import toy

    def broken(system, **kw):
        raise RuntimeError(f'{system} did not finish: planted')
    monkeypatch.setattr(toy, 'run_toy', broken)
    assert cli.main(['sim', '--toy', '--systems', 'bsp']) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        'rog sim: run failed: bsp did not finish: planted')


def test_aggregate_excludes_and_counts_failed_runs():
    ok = {'system': 'rog:4', 'seed': 0, 'time_to_target_s': 10.0, 'final_accuracy': 0.8}
    bad = {'system': 'rog:4', 'seed': 1, 'time_to_target_s': 1.0, 'final_accuracy': 0.1,
           'error': 'event budget spent'}
    row = aggregate([ok, bad])
    assert row['failed'] == 1 and row['runs'] == 2
    assert row['final_accuracy'] == 0.8 and row['time_to_target_s'] == 10.0
    assert row['reached_target'] == '1/2'
    assert row['errors'] == [{'seed': 1, 'error': 'event budget spent'}]


def test_compare_marks_a_failed_run(tmp_path, monkeypatch, capsys):
    real = compare_mod._run_one

    def run_one(cfg, out_dir):      # plant a truncated run: seed 1 of rog:2
        if cfg.system == 'rog:2' and cfg.seed == 1:
            cfg.max_events = 20
        return real(cfg, out_dir)
    monkeypatch.setattr(compare_mod, '_run_one', run_one)
    out = str(tmp_path / 'cmp')
    res = compare('toy', 'indoors', ['bsp', 'rog:2'], 2, [0, 1], out, iterations=6,
                  quiet=True, jobs_parallel=1)
    rows = {r['system']: r for r in res['systems']}
    assert rows['bsp']['failed'] == 0 and rows['rog:2']['failed'] == 1
    with open(os.path.join(compare_mod.run_dir(out, 'rog:2', 0), 'summary.json')) as fh:
        good = json.load(fh)
    assert rows['rog:2']['sim_time_s'] == good['sim_time_s']   # the mean of the good run only
    report = open(os.path.join(out, 'report.md')).read()
    assert 'Failed runs' in report and 'rog:2 seed 1: FAILED: event budget' in report
    # the CLI says so in its exit code; the failed run is run again (still failing here)
    rc = cli.main(['compare', '--workload', 'toy', '--trace', 'indoors', '--systems',
                   'bsp,rog:2', '--workers', '2', '--seeds', '0,1', '--iterations', '6',
                   '--jobs', '1', '--out', out])
    assert rc == 1
    assert 'rog compare: 1 of 4 runs failed' in capsys.readouterr().err


def test_compare_survives_a_run_that_raises(tmp_path, monkeypatch):
    real = compare_mod.simulate

    def simulate_or_raise(cfg, progress=None):
        if cfg.seed == 1:
            raise RuntimeError('planted crash')
        return real(cfg, progress)
    monkeypatch.setattr(compare_mod, 'simulate', simulate_or_raise)
    res = compare('toy', 'indoors', ['bsp'], 2, [0, 1], str(tmp_path / 'c'), iterations=4,
                  quiet=True, jobs_parallel=1)
    row = res['systems'][0]
    assert row['failed'] == 1 and row['runs'] == 2
    assert row['errors'] == [{'seed': 1, 'error': 'RuntimeError: planted crash'}]
    assert row['final_accuracy'] is not None           # from the run that finished
