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
Runs say who trains with whom as it changes (``rog_ros.protocol.events``).

A robot suspended, let go as too slow, back in the check, given slack, a quorum lost: each is
one line with the numbers that decided it, in the server's log and in the run's
``events.csv``; metrics (triggers, stalls, pushes) are not.
"""

import csv
import logging
import pathlib
import re

from rog_ros.metrics import RunRecorder
from rog_ros.nodes.reject_notes import RejectNotes
from rog_ros.nodes.server_node import ServerNode
from rog_ros.protocol import events
from rog_ros.protocol.actions import Log
from test_free_stragglers import run, SLOW

PACKAGE = pathlib.Path(events.__file__).resolve().parents[1]   # the engines and the nodes


def test_every_notable_event_is_one_the_engines_emit():
    # a renamed event would otherwise silently drop out of the log (the server node emits
    # one of its own: its restart from a checkpoint)
    emitted = set()
    for path in PACKAGE.rglob('*.py'):
        emitted |= set(re.findall(r"Log\('([a-z_]+)'", path.read_text()))
    assert events.NOTABLE <= emitted, sorted(events.NOTABLE - emitted)


def test_the_sentences_carry_the_numbers_that_decided():
    level, text = events.describe(Log('too_slow_for_slack', 6.66, 1, {
        'fleet_pace_s': 2.63, 'slack': 0, 'clock': 233, 'fleet_clock': 236}))
    assert level == logging.INFO
    assert 'robot 1 runs free' in text and '6.66 s' in text and '2.63 s' in text
    assert 'clock 233' in text and '236' in text
    level, text = events.describe(Log('worker_suspended', 1.0, 3,
                                      {'reason': 'link', 'active': [0, 1, 2]}))
    assert 'robot 3 suspended' in text and 'link' in text and '0, 1, 2' in text
    _, text = events.describe(
        Log('worker_suspended', 1.0, 2, {'reason': 'absent', 'active': []}))
    assert 'not heard from' in text and 'none' in text
    _, text = events.describe(
        Log('straggler_slack', 2.0, 0, {'held_share': 0.456, 'staleness': 6}))
    assert 'slack now 2' in text and 'bound 6' in text and '46%' in text
    level, text = events.describe(Log('quorum_lost', 1.0, -1, {
        'min_workers': 2, 'active': [0], 'hint': 'training waits until enough are back'}))
    assert level == logging.WARNING and '1 robots' in text and '2 needed' in text
    assert '3 iterations short' in events.describe(Log('stopped_after_fleet', 3.0, 1))[1]
    assert 'at its budget' in events.describe(Log('stopped_after_fleet', 0.0, 1))[1]
    # the simulator adds what the robot computed: its clock jumped ahead when it caught up
    text = events.describe(Log('stopped_after_fleet', 1.0, 1,
                               {'computed': 13, 'budget': 100, 'clock': 99}))[1]
    assert text.startswith('robot 1 stopped having computed 13 of its 100 iterations (its '
                           'clock 99: it caught up with the fleet): the fleet finished')


def test_a_push_systems_revival_says_the_dead_run_died_pushing():
    # The push systems' transfers (2f01e00) retire a live run for a late push of a run that
    # died with it on its way, and log worker_revived with the run taken back: the words
    # were Rog's, 'a run that died while rejoining' (push systems never rejoin)
    level, text = events.describe(Log('worker_revived', 1.0, 0,
                                      {'run': 12, 'retired': 11, 'duplicate': False}))
    assert level == logging.WARNING and 'died with a push on its way' in text
    _, text = events.describe(Log('worker_revived', 1.0, 0, {'retired': 11, 'duplicate': False}))
    assert 'died while rejoining' in text


def test_metrics_are_not_logged():
    for name in ('trigger', 'stall_s', 'push_applied', 'pull_done', 'push_done', 'reject',
                 'late_rows_applied', 'urgent_rows'):
        assert events.describe(Log(name, 1.0, 0)) is None
        assert name not in events.NOTABLE


def test_a_robot_let_go_in_a_run_is_in_the_server_log(caplog):
    # the fixture of test_free_stragglers: robot 3's link is too slow for any slack
    harness, *_ = run(True)
    node = ServerNode.__new__(ServerNode)      # only what _on_log uses
    node.recorder, node.t0 = RunRecorder(system='rog:4', n_workers=4), 0.0
    node.log = logging.getLogger('rog_server_test')
    node.reject_notes = RejectNotes()
    with caplog.at_level(logging.INFO, logger='rog_server_test'):
        for t, _, action in harness.stats.logs:
            node._on_log(t, action)
    said = [r.getMessage() for r in caplog.records]
    free = [s for s in said if 'runs free' in s]
    assert len(free) == 1 and free[0].startswith(f'robot {SLOW} ')
    assert any(s.startswith(f'robot {SLOW} suspended') for s in said)
    # one line per event, not per metric: the run applied hundreds of pushes
    n_events = sum(1 for _, _, a in harness.stats.logs if a.name in events.NOTABLE)
    assert len(said) == n_events < 0.05 * len(harness.stats.logs)
    # and the recorder still gets every metric
    assert sum(node.recorder.triggers) == sum(
        1 for _, _, a in harness.stats.logs if a.name == 'trigger' and 0 <= a.worker < 4) > 0


def test_the_run_writes_its_events_next_to_its_summary(tmp_path):
    harness, *_ = run(True)
    rec = RunRecorder(system='rog:4', n_workers=4)
    for t, node, action in harness.stats.logs:
        rec.on_log(t, node, action)
    rec.write(str(tmp_path))
    rows = list(csv.DictReader(open(tmp_path / 'events.csv')))
    expected = [(t, a) for t, _, a in harness.stats.logs if a.name in events.NOTABLE]
    assert len(rows) == len(expected) > 0
    free = [r for r in rows if r['event'] == 'too_slow_for_slack']
    assert [int(r['robot']) for r in free] == [SLOW] and 'runs free' in free[0]['what']
    assert abs(float(free[0]['time_s'])
               - next(t for t, a in expected if a.name == 'too_slow_for_slack')) < 1e-3
    # a run where nothing happened writes the header alone
    quiet = RunRecorder(system='bsp', n_workers=2)
    quiet.write(str(tmp_path / 'quiet'))
    header = open(tmp_path / 'quiet' / 'events.csv').read()
    assert header == 'time_s,robot,event,value,info,what\n'


def test_a_worker_node_says_a_non_finite_gradient(caplog):
    from rog_ros.nodes.worker_node import WorkerNode
    node = WorkerNode.__new__(WorkerNode)
    node.log = logging.getLogger('rog_worker_test')
    node.reject_notes = RejectNotes()
    with caplog.at_level(logging.INFO, logger='rog_worker_test'):
        node._on_log(0.0, Log('nonfinite_gradient', 1.0, 2))
        node._on_log(0.0, Log('pull_applied', 10.0, 2))
    assert [(r.levelno, r.getMessage()[:30]) for r in caplog.records] == [
        (logging.WARNING, 'robot 2 computed a non-finite ')]


def test_a_repeated_join_is_one_event():
    # A worker waiting for its hello repeats its JOIN (and a lossy link may copy it): the
    # server answers each, but events.csv and its log say "joined" once per join
    from protocol_fixtures import build
    from rog_ros.protocol.actions import Send
    _, server, workers, _, _ = build('rog:2', n=2, iters=4)
    joins = [a.msg for a in workers[0]._out(workers[0]._join(0.0)) if isinstance(a, Send)]
    said = []
    for t in (0.0, 2.0, 2.0):                       # the JOIN, a poke, a duplicate
        for msg in joins:
            out = server.on_message(msg, t)
            assert any(isinstance(a, Send) for a in out)     # every copy is answered
            said += [a for a in out if isinstance(a, Log) and a.name == 'join']
    assert len(said) == 1 and said[0].worker == 0


def test_short_holds_and_bounds_are_said_to_two_figures():
    # a toy fleet said "held robot 1 for 0.1 s (outage bound 0.0 s ...)": a bound of 0.0488 s
    log = Log('outage_suspend', 0.1234, 0,
              {'held': 1, 'bound_s': 0.0488, 'clock': 5, 'fleet_clock': 7})
    assert events.describe(log)[1] == ('robot 0 held robot 1 for 0.12 s (outage bound '
                                       '0.049 s; clock 5, fleet at 7)')
    long = Log('outage_suspend', 12.34, 0,
               {'held': 1, 'bound_s': 3.0, 'clock': 5, 'fleet_clock': 7})
    assert 'for 12.3 s (outage bound 3.0 s;' in events.describe(long)[1]


def test_durations_read_the_same_around_a_second_and_never_in_exponents():
    assert [events._seconds(v) for v in (0.0, 0.004, 0.0488, 0.5, 0.949, 0.996, 1.0, 12.34)] == [
        '0 s', 'under 0.01 s', '0.049 s', '0.5 s', '0.95 s', '1.0 s', '1.0 s', '12.3 s']
