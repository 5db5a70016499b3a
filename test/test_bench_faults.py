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
``rog bench faults`` and the sweep checks behind it.

Runs that keep the invariants pass; runs that break one (tampered with after the fact) are
reported, and the command fails with a replay line.
"""

import json

import pytest
from rog_ros import cli
from rog_ros.experiments import bench_faults
from rog_ros.experiments.bench_faults import parse_seeds
from rog_ros.sim.fault_fleet import quadratic_fleet
from rog_ros.sim.fault_sweep import (random_crash_run, random_membership_run, run_problems,
                                     sweep_case)
import torch


@pytest.mark.parametrize('text, seeds', [
    ('0-4', [0, 1, 2, 3, 4]), ('3,7', [3, 7]), ('0-2,10,3', [0, 1, 2, 3, 10]), ('5', [5])])
def test_seeds_read_as_ranges_and_lists(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize('text', ['', 'x', '4-2', '-1', '1-x', '0-100000'])
def test_malformed_seeds_are_refused(text):
    with pytest.raises(ValueError, match='seeds'):
        parse_seeds(text)


@pytest.mark.parametrize('text, said', [
    ('-1', "--seeds: '-1': seeds are non-negative"),         # was: 'is not a number'
    ('5-2', "--seeds: '5-2' ends below its start; write the range low-high (2-5)"),
])
def test_a_negative_seed_and_a_reversed_range_are_said_as_such(text, said):
    with pytest.raises(ValueError) as err:
        parse_seeds(text)
    assert str(err.value).startswith(said)


def test_seeds_given_many_times_over_are_refused_in_bounded_memory():
    # the seeds were kept in a list of every range given, deduplicated at each range once
    # past 100,000: 0-99999 given 30 times held 3,000,000 ints (quadratic time: 80 took 20 s);
    # a repeat is refused now, at the first one
    import tracemalloc
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as err:
            parse_seeds(','.join(['0-99999'] * 30))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(err.value) == '--seeds lists 0 more than once; list each once'
    assert peak < 40 * 2 ** 20, peak


@pytest.mark.parametrize('text, again', [
    ('0-2,1', 1), ('1,0-2', 1), ('3,3', 3), ('0-9,5-20', 5), ('5-20,0-9', 5),
    (','.join(map(str, range(5000))) + ',4999', 4999)])
def test_a_seed_listed_twice_is_refused_as_rog_compare_refuses_it(text, again):
    # 0-2,1 ran seeds 0, 1, 2 quietly: fewer runs than the list said (rog compare refuses)
    with pytest.raises(ValueError) as err:
        parse_seeds(text)
    assert str(err.value) == f'--seeds lists {again} more than once; list each once'


def test_too_many_seeds_in_all_are_refused_in_a_short_line():
    text = ','.join(f'{k * 1000}-{k * 1000 + 999}' for k in range(101))
    with pytest.raises(ValueError) as err:
        parse_seeds(text)
    assert 'is more than 100,000 seeds' in str(err.value) and len(str(err.value)) < 120


def test_a_membership_case_with_crashes_keeps_every_invariant():
    # rog:4 69 hung until 2026-12-02 (docs/faults.md); the final model is on, as in fleets
    case = sweep_case('membership', 'rog:4', 69)
    assert case['problems'] == []
    assert case['worker_crashes'] >= 1 and case['workers'] >= 3
    assert case['held_final_model'] + case['final_model_missed'] == case['workers']


def test_a_crash_case_keeps_every_invariant():
    case = sweep_case('crash', 'flown:2', 4)          # level 1: a hard draw
    assert case['problems'] == [] and case['worker_crashes'] >= 1


def test_the_checks_see_a_doubled_push_and_a_worker_apart():
    harness = random_crash_run('rog:2', 1)
    assert run_problems('crash', harness) == []
    server = harness.server
    server.w_srv -= 0.01 * server.lr          # as if one push had been applied twice
    problems = run_problems('crash', harness)
    assert any('exactly-once' in p for p in problems), problems
    harness = random_membership_run('ssp:2', 2)
    assert run_problems('membership', harness) == []
    harness.workers[0].w[3] += 1.0
    problems = run_problems('membership', harness)
    assert any('worker 0 holds another model' in p for p in problems), problems


def test_a_run_that_did_not_end_is_broken():
    harness, server, _, _, _ = quadratic_fleet('bsp', n=3, iters=10, dtype=torch.float64)
    harness.run(until=0.3)
    assert not server.finished
    assert run_problems('membership', harness) == [
        'did not finish: the server never ended the run']
    harness.stats.error = 'no message delivered from t=0.3 s'
    assert run_problems('crash', harness) == [
        'did not finish: no message delivered from t=0.3 s']


def test_a_final_model_that_differs_is_reported():
    harness = random_crash_run('rog:4', 3, final_model=True)
    holders = [r for r, w in enumerate(harness.workers) if w.holds_final]
    assert holders and run_problems('crash', harness) == []
    w = harness.workers[holders[0]]
    w.w = w.w + torch.full_like(w.w, 1e-3)
    assert any(f'worker {holders[0]} holds another' in p
               for p in run_problems('crash', harness))


def test_the_command_prints_json_and_passes(capsys):
    rc = cli.main(['bench', 'faults', '--kind', 'membership', '--systems', 'rog:2,flown:2',
                   '--seeds', '0-1', '--jobs', '1'])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out['passed'] and out['runs'] == 4 and out['broken'] == 0
    assert out['seeds'] == '0-1' and out['per_system']['flown:2']['runs'] == 2
    assert out['per_kind']['membership']['worker_crashes'] > 0


def test_a_broken_run_fails_the_command_with_its_replay(capsys, monkeypatch):
    real = bench_faults.sweep_case

    def one_broken(kind, spec, seed, final_model):
        case = real(kind, spec, seed, final_model)
        if seed == 1:
            case['problems'] = ['uplink not exactly-once: (planted)']
        return case
    monkeypatch.setattr(bench_faults, 'sweep_case', one_broken)
    rc = cli.main(['bench', 'faults', '--kind', 'crash', '--systems', 'bsp', '--seeds', '0,1',
                   '--jobs', '1', '--final-model', 'off'])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert rc == 1 and not out['passed'] and out['broken'] == 1
    assert out['broken_runs'][0]['replay'] == ('rog bench faults --kind crash --systems bsp '
                                               '--seeds 1 --final-model off')
    assert 'rog bench faults: 1 of 2 runs broke an invariant' in captured.err


@pytest.mark.parametrize('argv, why', [
    (['--systems', 'adacomp'], 'unknown sync system'),
    (['--seeds', '9-3'], 'seeds'),
    (['--jobs', '0'], '--jobs'),
    (['--systems', ' , '], '--systems')])
def test_bad_arguments_exit_2_with_one_line(argv, why, capsys):
    assert cli.main(['bench', 'faults', *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert why in err and len(err.splitlines()) == 1


def test_ctrl_c_ends_a_command_with_one_line_and_130(capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(bench_faults, 'bench_faults', interrupted)
    assert cli.main(['bench', 'faults', '--seeds', '0']) == 130
    err = capsys.readouterr().err.strip()
    assert err == 'rog bench faults: interrupted'


def test_the_sweep_time_is_measured_on_the_monotonic_clock(capsys, monkeypatch):
    # NTP stepped the clock an hour back during a sweep: it printed wall_s -3600
    import time
    real = time.time
    steps = iter([0.0])

    def stepped():
        """Return the wall clock, an hour back from its second reading on."""
        return real() - 3600.0 * (next(steps, 1.0))

    monkeypatch.setattr(time, 'time', stepped)
    rc = cli.main(['bench', 'faults', '--kind', 'crash', '--systems', 'rog:2', '--seeds', '0',
                   '--jobs', '1'])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and 0.0 <= out['wall_s'] < 600.0
