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
Who was in the staleness check when (``rog_ros.experiments.membership``, ``rog report``).

The stretches a robot spent out are read back from a run's ``events.csv`` with their reason;
``rog report`` draws them and lists the events, and draws nothing for a run without any.
"""

import json

import pytest
from rog_ros import cli
from rog_ros.experiments.membership import read_events, spans
from rog_ros.metrics import RunRecorder
from test_free_stragglers import run, SLOW

pytest.importorskip('matplotlib')


def _recorded(tmp_path, harness, system='rog:4'):
    """Write a harness run's logs as a run directory (summary, timeseries, events)."""
    rec = RunRecorder(system=system, n_workers=4, seed=0)
    for t, node, action in harness.stats.logs:
        rec.on_log(t, node, action)
    rec.end_time_s = harness.now
    rec.on_eval(0.0, 0.0, {'accuracy': 0.1}, {})
    rec.on_eval(harness.now, 60.0, {'accuracy': 0.5}, {})
    rec.write(str(tmp_path))
    return tmp_path


def test_the_stretches_out_come_back_from_events_csv_with_their_reason(tmp_path):
    # the fixture of test_free_stragglers: robot 3's link is too slow for any slack
    harness, server, *_ = run(True)
    out = _recorded(tmp_path / 'run', harness)
    events = read_events(str(out / 'events.csv'))
    got = spans(events, harness.now)
    assert [(r, kind) for r, _, _, kind in got] == [(SLOW, 'too_slow')]
    (r, t0, t1, _), = got
    freed = [t for t, _, a in harness.stats.logs if a.name == 'too_slow_for_slack']
    # never readmitted: out until it stopped with the fleet (or the run's end)
    stops = [t for t, _, a in harness.stats.logs
             if a.name == 'stopped_after_fleet' and a.worker == SLOW]
    assert abs(t0 - freed[0]) < 1e-3
    assert abs(t1 - (stops[0] if stops else harness.now)) < 1e-3
    assert json.loads(json.dumps(events[0]['info']))['reason'] == 'link'


def test_a_readmission_or_a_stop_closes_a_stretch_and_reasons_are_kept():
    ev = [
        {'time_s': 1.0, 'robot': 0, 'event': 'worker_suspended', 'info': {'reason': 'link'}},
        {'time_s': 2.0, 'robot': 1, 'event': 'worker_suspended', 'info': {'reason': 'absent'}},
        {'time_s': 3.0, 'robot': 0, 'event': 'worker_readmitted', 'info': {}},
        {'time_s': 4.0, 'robot': 0, 'event': 'worker_suspended', 'info': {'reason': 'link'}},
        {'time_s': 4.0, 'robot': 0, 'event': 'too_slow_for_slack', 'info': {}},
        {'time_s': 6.0, 'robot': 0, 'event': 'stopped_after_fleet', 'info': {}},
    ]
    assert spans(ev, 10.0) == [(0, 1.0, 3.0, 'link'), (0, 4.0, 6.0, 'too_slow'),
                               (1, 2.0, 10.0, 'absent')]
    assert spans([], 10.0) == []


def test_rog_report_draws_the_timeline_and_lists_the_events(tmp_path, capsys):
    harness, *_ = run(True)
    out = _recorded(tmp_path / 'freed', harness)
    assert cli.main(['report', str(out)]) == 0
    text = (out / 'report.md').read_text()
    assert (out / 'membership.png').stat().st_size > 1000
    assert '(membership.png)' in text and '## Events' in text
    assert f'robot {SLOW} runs free' in text and 'too_slow_for_slack 1' in text
    # a run in which nobody was suspended: no timeline, no events section
    quiet, *_ = run(True, bw=0.5e6)
    q = _recorded(tmp_path / 'quiet', quiet)
    capsys.readouterr()
    assert cli.main(['report', str(q)]) == 0
    text = (q / 'report.md').read_text()
    assert not (q / 'membership.png').exists() and 'membership' not in text


def test_the_report_lists_the_events_of_six_runs_at_most():
    from rog_ros.experiments.membership import events_markdown, MAX_EVENT_LINES, MAX_TIMELINES
    many = [{'event': 'straggler_slack', 'time_s': float(t), 'what': f'slack {t}'}
            for t in range(MAX_EVENT_LINES + 3)]
    runs = [({'system': 'rog:4', 'seed': s}, [], many) for s in range(MAX_TIMELINES + 2)]
    lines = events_markdown(runs + [({'system': 'bsp', 'seed': 0}, [], [])])
    assert sum(line.startswith('- rog:4 seed') for line in lines) == MAX_TIMELINES
    assert '  - ... 3 more in events.csv' in lines
    assert '- ... 2 more runs with events (their events.csv)' in lines
    assert events_markdown([({'system': 'bsp', 'seed': 0}, [], [])]) == []


def test_the_comparison_says_on_which_seeds_robots_were_out():
    from rog_ros.experiments.seed_stats import aggregate
    from rog_ros.experiments.membership import membership_markdown
    rog = [{'system': 'rog:4', 'seed': s, 'time_to_target_s': 9.0,
            'outage_suspensions': n, 'too_slow_suspensions': k, 'slack_raises': 1}
           for s, n, k in ((0, 1, 0), (1, 0, 0), (2, 3, 2))]
    rog.append({'system': 'rog:4', 'seed': 3, 'error': 'deadlock', 'outage_suspensions': 9})
    bsp = [{'system': 'bsp', 'seed': s, 'time_to_target_s': 20.0} for s in range(3)]
    row = aggregate(rog)
    assert row['outage_suspensions'] == [1, 0, 3] and row['too_slow_suspensions'] == [0, 0, 2]
    assert row['finished_seeds'] == [0, 1, 2]           # the failed run counts in no column
    text = membership_markdown([row, aggregate(bsp)])
    assert '| rog:4 | 2/3 | 1, 0, 3 | 0, 0, 2 | 1, 1, 1 | 0, 1, 2 |' in text
    assert '| bsp |' not in text and 'events.csv' in text
    assert membership_markdown([aggregate(bsp)]) == ''


@pytest.mark.parametrize('damage, said', [
    ('time_s,robot,event\nabc,1,worker_suspended\n', 'line 2'),
    ('foo,bar\n1,2\n', 'no column time_s, robot, event'),
])
def test_a_damaged_events_csv_is_named_and_nothing_is_written(tmp_path, capsys, damage, said):
    harness, *_ = run(True)
    out = _recorded(tmp_path / 'run', harness)
    (out / 'events.csv').write_text(damage)
    before = sorted(p.name for p in out.iterdir())
    assert cli.main(['report', str(out)]) == 2
    err = capsys.readouterr().err
    assert str(out / 'events.csv') in err and said in err
    assert sorted(p.name for p in out.iterdir()) == before       # no report, no plot
