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
"""The accuracy-dip metric, the server's background evaluations and the fleet's result line."""

import json
import logging
import threading
import time

import pytest
from rog_ros.metrics import dip_after_target, RunRecorder
from rog_ros.nodes.fleet_progress import result_line
from rog_ros.nodes.server_node import BackgroundEvaluator
import torch


def test_a_planted_dip_after_the_target_is_caught():
    # target 0.80 first reached at index 2; peak 0.85 at 4; planted dip to 0.81 at 6
    acc = [0.60, 0.75, 0.80, 0.82, 0.85, 0.84, 0.81, 0.84, 0.86]
    dip, at = dip_after_target(acc, 0.80)
    assert dip == pytest.approx(0.04) and at == 6
    assert dip_after_target(acc, 0.80)[0] == pytest.approx(0.04)


def test_drops_before_the_target_do_not_count():
    acc = [0.60, 0.79, 0.50, 0.78, 0.81, 0.82, 0.815]
    dip, at = dip_after_target(acc, 0.80)
    assert dip == pytest.approx(0.005) and at == 6


def test_a_rising_series_has_no_dip_and_an_unreached_target_has_no_value():
    assert dip_after_target([0.7, 0.8, 0.85, 0.9], 0.8) == (0.0, 1)
    assert dip_after_target([0.7, 0.75], 0.8) == (None, None)
    assert dip_after_target([0.9, 0.1], None) == (None, None)
    assert dip_after_target([], 0.5) == (None, None)


def test_missing_accuracies_are_skipped_and_the_index_is_the_series_one():
    acc = [0.6, None, 0.9, float('nan'), 0.85, None, 0.7, 0.95]
    dip, at = dip_after_target(acc, 0.8)
    assert dip == pytest.approx(0.2) and at == 6


def test_the_dip_is_measured_from_the_running_peak_not_the_first_value():
    # two dips: 0.90 -> 0.87 (3 points) and later 0.93 -> 0.92 (1 point)
    acc = [0.80, 0.90, 0.87, 0.93, 0.92]
    assert dip_after_target(acc, 0.80)[0] == pytest.approx(0.03)


def test_the_summary_carries_the_dip_of_its_evaluations(tmp_path):
    rec = RunRecorder(system='rog:4', n_workers=2, target_accuracy=0.8)
    for i, a in enumerate([0.5, 0.81, 0.84, 0.79, 0.83]):
        rec.on_eval(float(i), 10.0 * i, {'accuracy': a, 'loss': 1.0 - a},
                    counters={'stall_s': 0.5 * i, 'triggers': i, 'bytes': 100 * i})
    summary = rec.write(str(tmp_path))
    assert summary['max_dip_after_target'] == pytest.approx(0.05)
    assert summary['max_dip_at_iteration'] == 30.0
    # smoothed (mean of the last 3): 0.5, 0.655, 0.7167, 0.8133, 0.82 -> target at index 3
    assert summary['max_dip_after_target_smoothed'] == pytest.approx(0.0)
    on_disk = json.loads((tmp_path / 'summary.json').read_text())
    assert on_disk['max_dip_after_target'] == pytest.approx(0.05)
    assert [r['stall_s'] for r in rec.rows] == [0.0, 0.5, 1.0, 1.5, 2.0]  # given counters
    line = result_line(str(tmp_path / 'summary.json'))
    assert 'max dip after target 5.00 points (iteration 30; smoothed over 3 ' in line
    assert line.startswith('time to target 3.0 s (target accuracy 0.8000, reached at '
                           'iteration 30), final accuracy 0.8300')
    assert 'trained for ' in line
    on_disk['iterations_to_target'] = 60.33333
    (tmp_path / 'summary.json').write_text(json.dumps(on_disk))
    assert 'reached at iteration 60.3)' in result_line(str(tmp_path / 'summary.json'))
    missed = dict(on_disk, time_to_target_s=None, iterations_to_target=None, sim_time_s=12.0,
                  max_dip_after_target=None)
    (tmp_path / 'summary.json').write_text(json.dumps(missed))
    assert result_line(str(tmp_path / 'summary.json')) == (
        'target accuracy 0.8000 not reached, final accuracy 0.8300 (time to target reads the '
        'mean of the last 3 evaluations, still below it at the end: run more iterations), '
        'trained for 12.0 s')
    (tmp_path / 'summary.json').write_text(json.dumps(dict(missed, final_accuracy=0.79)))
    assert result_line(str(tmp_path / 'summary.json')) == (
        'target accuracy 0.8000 not reached, final accuracy 0.7900, trained for 12.0 s')
    (tmp_path / 'summary.json').write_text(json.dumps(on_disk))
    assert result_line(str(tmp_path / 'missing.json')) == ''
    assert 'suspension' not in line and 'rejected' not in line     # none in this run
    on_disk.update(outage_suspensions=3, rejects=1, slack_raises=0, slack_final=[0, 0])
    (tmp_path / 'summary.json').write_text(json.dumps(on_disk))
    line = result_line(str(tmp_path / 'summary.json'))
    events = tmp_path / 'events.csv'
    assert line.endswith('; 3 suspensions of a robot for its link (outage-aware RSP)'
                         f' (when and why: {events}); 1 message rejected (rejects_by_reason)')
    on_disk.update(slack_raises=2, slack_final=[0, 4])
    (tmp_path / 'summary.json').write_text(json.dumps(on_disk))
    assert '; 2 straggler slack raises for a slow link (slack per robot at the end: [0, 4])' \
        in result_line(str(tmp_path / 'summary.json'))


def test_the_smoothed_dip_ignores_one_bad_evaluation_but_not_a_lasting_drop():
    rec = RunRecorder(system='rog:4', n_workers=1, target_accuracy=0.8)
    for i, a in enumerate([0.5, 0.85, 0.85, 0.85, 0.79, 0.85, 0.85]):   # one bad evaluation
        rec.on_eval(float(i), float(i), {'accuracy': a})
    s = rec.summary()
    assert s['max_dip_after_target'] == pytest.approx(0.06)
    assert s['max_dip_after_target_smoothed'] == pytest.approx(0.02)
    rec = RunRecorder(system='rog:4', n_workers=1, target_accuracy=0.8)
    for i, a in enumerate([0.5, 0.85, 0.85, 0.85, 0.80, 0.80, 0.80]):   # a lasting drop
        rec.on_eval(float(i), float(i), {'accuracy': a})
    assert rec.summary()['max_dip_after_target_smoothed'] == pytest.approx(0.05)


@pytest.mark.parametrize('background', [True, False])
def test_background_evaluations_come_back_in_order_with_their_snapshot(background):
    flat = torch.zeros(3)
    release = threading.Event()

    def evaluate():
        release.wait(5.0)
        if float(flat[0]) == 2.0:
            raise RuntimeError('planted')
        return {'accuracy': float(flat.sum())}

    ev = BackgroundEvaluator(evaluate, flat, background=background)
    if not background:
        release.set()
    for i in range(4):
        snap = torch.full((3,), float(i))
        ev.submit(snap, i)
    if background:
        assert ev.collect() == [] and ev.pending == 4    # nothing blocks the caller
        release.set()
    got = ev.collect(wait_s=5.0)
    assert [i for i, _ in got] == [0, 1, 2, 3] and ev.pending == 0
    assert [m['accuracy'] for i, m in got if i != 2] == [0.0, 3.0, 9.0]
    assert isinstance(got[2][1], RuntimeError)
    assert ev.busy_s >= ev.max_s > 0.0
    ev.close()


def test_collect_waits_only_as_long_as_it_is_told():
    ev = BackgroundEvaluator(lambda: time.sleep(1.0) or {}, torch.zeros(1))
    ev.submit(torch.zeros(1), 'slow')
    t = time.monotonic()
    assert ev.collect(wait_s=0.05) == []
    assert time.monotonic() - t < 0.5 and ev.pending == 1
    assert [i for i, _ in ev.collect(wait_s=5.0)] == ['slow']
    ev.close()


def test_close_drops_the_queue_lets_the_running_evaluation_end_and_joins():
    started, release = threading.Event(), threading.Event()

    def evaluate():
        started.set()
        release.wait(5.0)
        return {'accuracy': 1.0}

    ev = BackgroundEvaluator(evaluate, torch.zeros(1))
    thread = ev._thread
    for i in range(3):
        ev.submit(torch.zeros(1), i)
    assert started.wait(5.0)
    threading.Timer(0.2, release.set).start()
    ev.close(wait_s=5.0)
    assert not thread.is_alive()
    assert ev.pending == 1 and [i for i, _ in ev.collect()] == [0]   # two were dropped
    ev.submit(torch.zeros(1), 'after')                  # closed: evaluates in the caller
    assert [i for i, _ in ev.collect()] == ['after'] and ev.pending == 0


def test_delivered_row_fractions_and_transfer_durations_per_direction():
    from rog_ros.protocol.actions import Log
    rec = RunRecorder(system='rog:4', n_workers=2)
    rec.on_log(0.0, 0, Log('push_done', 25.0, 0, {'bytes': 10, 'seconds': 0.1,
                                                  'rows_total': 100, 'duration': 0.2}))
    rec.on_log(0.0, 1, Log('push_done', 75.0, 1, {'bytes': 30, 'seconds': 0.1,
                                                  'rows_total': 100, 'duration': 0.4}))
    rec.on_log(0.0, -1, Log('pull_done', 100.0, 0, {'bytes': 40, 'seconds': 0.1,
                                                    'rows_total': 100, 'duration': 0.1}))
    rec.on_log(0.0, -1, Log('push_done', 5.0, 0, {'bytes': 1, 'seconds': 0.1}))  # no total
    s = rec.summary()
    assert s['delivered_row_fraction_up'] == pytest.approx(0.5)
    assert s['delivered_row_fraction_down'] == pytest.approx(1.0)
    assert s['mean_push_s'] == pytest.approx(0.3) and s['mean_pull_s'] == pytest.approx(0.1)
    assert s['bytes_up'] == 41 and s['bytes_down'] == 40
    empty = RunRecorder(system='bsp', n_workers=1).summary()
    assert empty['delivered_row_fraction_up'] is None and empty['mean_pull_s'] is None


def test_a_traffic_source_stands_for_the_logged_bytes_and_stays_out_of_the_state():
    """The server engine's counts are the row's ``bytes`` and the summary's traffic."""
    from rog_ros.protocol.actions import Log
    counts = [700, 300]
    rec = RunRecorder(system='rog:4', n_workers=1, traffic=lambda: tuple(counts))
    rec.on_log(0.0, -1, Log('pull_done', 1.0, 0, {'bytes': 40, 'seconds': 0.1}))
    rec.on_eval(1.0, 1.0, {'accuracy': 0.5})
    counts[0] += 24
    s = rec.summary()
    assert rec.rows[-1]['bytes'] == 1000
    assert (s['bytes_up'], s['bytes_down']) == (724, 300)
    assert 'traffic' not in rec.state()


def test_tail_accuracy_is_the_mean_of_the_last_quarter_and_in_the_summary():
    from rog_ros.metrics import tail_accuracy
    rows = [{'iteration': it, 'accuracy': a} for it, a in
            [(0, 0.5), (50, 0.8), (70, 0.99), (80, 0.9), (100, 0.7)]]
    assert tail_accuracy(rows) == pytest.approx(0.8)          # iterations 75..100
    assert tail_accuracy(rows, fraction=0.5) == pytest.approx((0.8 + 0.99 + 0.9 + 0.7) / 4)
    assert tail_accuracy([]) is None
    assert tail_accuracy(rows + [{'iteration': 101, 'accuracy': None}]) == pytest.approx(0.8)
    rec = RunRecorder(system='bsp', n_workers=1)
    for r in rows:
        rec.on_eval(float(r['iteration']), r['iteration'], {'accuracy': r['accuracy']})
    s = rec.summary()
    assert s['final_accuracy'] == 0.7 and s['final_accuracy_tail'] == pytest.approx(0.8)


def _server_evaluating(evaluate):
    """Return a server node with only what ``_evaluate`` and ``_collect`` use (why: fast)."""
    from types import SimpleNamespace
    from rog_ros.nodes.server_node import ServerNode
    from rog_ros.nodes.signals import SignalRequests
    node = ServerNode.__new__(ServerNode)
    node.args, node.bus, node.t0, node.eval_loop_s = SimpleNamespace(eval_every=1), None, 0.0, 0.0
    node.engine = SimpleNamespace(clock=[4, 4], consensus_model=lambda: torch.zeros(2))
    node.recorder = SimpleNamespace(counters=lambda: {}, on_eval=lambda *row: None)
    node.evaluations, node.eval_samples, node._evaluator_stuck = 0, None, False
    node.log = logging.getLogger('rog_server_pending_test')
    node.evaluator = BackgroundEvaluator(evaluate, torch.zeros(2))
    node.requests = SignalRequests()
    return node


def test_the_server_waits_for_its_evaluator_when_it_falls_behind(monkeypatch, caplog):
    # An evaluator slower than --eval-every's interval (a loaded machine) queued without
    # bound, a model snapshot each (and a push server's checkpoints saved each one queued).
    # Now at EVAL_PENDING_MAX pending the loop waits for the oldest; it never waits while the
    # evaluator keeps up; an evaluation that does not end is waited for once, not each time
    from rog_ros.nodes import server_node
    monkeypatch.setattr(server_node, 'EVAL_PENDING_WAIT_S', 1.0, raising=False)
    ended = threading.Semaphore(0)
    node = _server_evaluating(lambda: ended.acquire(timeout=30.0) and {'accuracy': 1.0})
    most = 3
    assert getattr(server_node, 'EVAL_PENDING_MAX', most) == most
    t = time.monotonic()
    for _ in range(most):
        node._evaluate()
    assert time.monotonic() - t < 0.5 and node.evaluator.pending == most
    threading.Timer(0.3, ended.release).start()    # (one evaluation ends, the others wait)
    t = time.monotonic()
    node._evaluate()
    assert time.monotonic() - t >= 0.25
    assert node.evaluator.pending == most and node.evaluations == 1
    with caplog.at_level(logging.WARNING, logger='rog_server_pending_test'):
        t = time.monotonic()
        node._evaluate()                            # (none ends: waited for once)
        assert time.monotonic() - t >= 0.9 and node.evaluator.pending == most + 1
        t = time.monotonic()
        node._evaluate()
        assert time.monotonic() - t < 0.5 and node.evaluator.pending == most + 2
    assert 'no evaluation ended in 1 s, 3 pending' in caplog.text
    for _ in range(most + 2):
        ended.release()
    node._collect(wait_s=10.0)
    assert node.evaluations == most + 3 and not node._evaluator_stuck
    node.evaluator.close()


def test_a_shutdown_ends_the_servers_wait_for_its_evaluator(monkeypatch, caplog):
    # The wait for an evaluator 3 behind applied no lifecycle request: Ctrl-C under rog fleet
    # (SIGINT) waited until the evaluation running ended, up to EVAL_PENDING_WAIT_S (60 s),
    # and rog fleet's SIGTERM 10 s later insisted (KeyboardInterrupt): the server left
    # without its summary and model. Now a shutdown request ends the wait within a slice
    from rog_ros.nodes import server_node
    monkeypatch.setattr(server_node, 'EVAL_PENDING_WAIT_S', 5.0, raising=False)
    ended = threading.Semaphore(0)
    node = _server_evaluating(lambda: ended.acquire(timeout=30.0) and {'accuracy': 1.0})
    for _ in range(3):
        node._evaluate()
    assert node.evaluator.pending == 3
    threading.Timer(0.3, node.requests.request, ('shutdown',)).start()
    with caplog.at_level(logging.WARNING, logger='rog_server_pending_test'):
        t = time.monotonic()
        node._evaluate()
        waited = time.monotonic() - t
    assert 0.25 <= waited < 2.0, waited
    assert node.evaluator.pending == 4 and not node._evaluator_stuck   # (no hung evaluator)
    assert 'no evaluation ended' not in caplog.text
    assert node.requests.take() == ['shutdown']        # (left for the loop to apply)
    for _ in range(4):
        ended.release()
    node._collect(wait_s=10.0)
    assert node.evaluations == 4
    node.evaluator.close()
