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
A robot whose link is too slow for any slack runs free (``SyncPolicy.free_stragglers``).

Slack lets a robot on a slow link carry fewer rows per iteration; when even the largest slack
leaves it ``TOO_SLOW`` times slower than the fleet, it falls a bound behind whatever the bound
and holds the others at its pace. It is then suspended for its link and runs free: nobody
waits for it, it keeps pushing, the server tells it so on every chunk of its pulls
(``FLAG_FREE``), and it is readmitted only once its link could keep the pace. A robot that
slack can help is not freed; conservation of gradient mass and the others' checks hold.
"""

from protocol_fixtures import build, random_faults
import pytest
from rog_ros.protocol.messages import FLAG_FREE, RowChunk
from rog_ros.protocol.policies import make_policy
from rog_ros.protocol.ps_slack import TOO_SLOW, TOO_SLOW_BACK
from rog_ros.sim.harness import LinkSpec
from test_outage_rsp import logs
from test_protocol_conservation import check_invariants
from test_protocol_overlap import watch_gradients
import torch

SLOW = 3
TOO_SLOW_BPS = 0.3e6       # at the largest slack still about 1.6x the fleet's time per iteration
SLACK_HELPS_BPS = 0.5e6    # slow, but within reach of slack


def run(on, bw=TOO_SLOW_BPS, fault=None, seed=0, recover_at=None, on_harness=None):
    pol = make_policy(f'rog:4#free_stragglers={int(on)}')
    harness, server, workers, loss_fn, _ = build(
        'rog:4', policy=pol, bandwidths=(2e6, 2e6, 2e6, bw), compute=(0.05,) * 4, iters=60,
        dtype=torch.float64, fault=fault, seed=seed)
    harness.log_events = True
    if recover_at is not None:      # its link becomes as fast as the others' then
        def recover():
            harness.up[SLOW] = harness.down[SLOW] = LinkSpec(0.001, 2e6)
        harness.at(recover_at, recover)
    if on_harness is not None:
        on_harness(harness)
    stats = harness.run(until=5000)
    assert server.finished and stats.error is None
    return harness, server, workers, float(loss_fn(server.consensus_model()))


def test_a_robot_too_slow_for_any_slack_runs_free_and_the_others_stop_waiting():
    flags = []      # (robot in the check, chunk says FLAG_FREE) per chunk sent to it

    def spy(harness):
        send = harness._send

        def spying(src, dst, msg):
            if dst == SLOW and isinstance(msg, RowChunk):
                flags.append((bool(harness.server.active[SLOW]), bool(msg.flags & FLAG_FREE)))
            return send(src, dst, msg)
        harness._send = spying
        watch_gradients(harness, 4)         # the others' checks hold while it runs free
    harness, server, workers, loss = run(True, on_harness=spy)
    off_harness, off, _, off_loss = run(False)
    freed = logs(harness.stats, 'too_slow_for_slack')
    assert [a.worker for _, a in freed] == [SLOW]               # only the slow link's robot
    pace = freed[0][1]
    assert pace.value >= TOO_SLOW * pace.info['fleet_pace_s']
    assert not logs(harness.stats, 'worker_readmitted')          # its link stayed too slow
    # it kept pushing while out, and the others stopped waiting for it
    t_out = freed[0][0]
    assert len([t for t, a in logs(harness.stats, 'push_applied')
                if a.worker == SLOW and t > t_out]) >= 10
    assert sum(server.stall_time) < 0.5 * sum(off.stall_time)
    assert harness.now < 0.85 * off_harness.now and loss < off_loss
    # its pulls said so while it was out (the one under way when it went out did not), and
    # no chunk said so while it was in
    assert sum(f for _, f in flags) > 0.5 * sum(not active for active, _ in flags)
    assert not any(f and active for active, f in flags)
    assert workers[SLOW]._runs_free() and not any(w._runs_free() for w in workers[:SLOW])
    check_invariants(harness, server, workers)      # gradient mass, exactly once


def test_a_robot_slack_can_help_is_not_freed_and_off_is_the_ablation():
    harness, server, _, loss = run(True, bw=SLACK_HELPS_BPS)
    _, off, _, off_loss = run(False, bw=SLACK_HELPS_BPS)
    assert not logs(harness.stats, 'too_slow_for_slack')
    assert server.stall_time == off.stall_time and loss == off_loss     # nothing changed
    off_harness, off, _, _ = run(False)
    assert not logs(off_harness.stats, 'too_slow_for_slack') and not off._too_slow
    # Rog's default (measured, docs/scheduling.md), and never for the baselines
    assert make_policy('rog:4').free_stragglers and make_policy('rog:20').free_stragglers
    assert not make_policy('rog:4#free_stragglers=0').free_stragglers
    assert not any(make_policy(p).free_stragglers for p in ('ssp:4', 'bsp', 'flown:4'))


def test_it_returns_once_its_link_keeps_the_pace():
    harness, server, workers, _ = run(True, recover_at=2.5)
    (t_out, _), = logs(harness.stats, 'too_slow_for_slack')
    back = [t for t, a in logs(harness.stats, 'worker_readmitted') if a.worker == SLOW]
    assert t_out < 2.5 and back and min(back) > 2.5       # not before its link recovered
    assert bool(server.active.all()) and not server._too_slow
    check_invariants(harness, server, workers)


@pytest.mark.parametrize('seed', [1, 3, 4])
def test_lost_repeated_and_late_messages_lose_nothing_while_it_runs_free(seed):
    # (seeds on which it was freed: lost messages cost every robot timeouts, and on some
    # seeds its link no longer stands out)
    harness, server, workers, _ = run(True, fault=random_faults(seed), seed=seed,
                                      on_harness=lambda h: watch_gradients(h, 4))
    assert logs(harness.stats, 'too_slow_for_slack')
    check_invariants(harness, server, workers)


def test_the_readmission_needs_a_pace_the_fleet_can_keep():
    asked = []

    def ask(harness):
        def look():
            server = harness.server
            asked.append(server._keeps_pace(SLOW))
            thr_up, thr_down = server.thr_up[SLOW].value_bps, server.thr_down[SLOW].value_bps
            server.thr_up[SLOW].value_bps = server.thr_down[SLOW].value_bps = 2e6
            asked.append(server._keeps_pace(SLOW))      # as if its link were the others'
            server.thr_up[SLOW].value_bps, server.thr_down[SLOW].value_bps = thr_up, thr_down
        harness.at(3.0, look)
    harness, server, _, _ = run(True, on_harness=ask)
    assert SLOW in server._too_slow and TOO_SLOW_BACK < TOO_SLOW      # hysteresis
    assert asked == [False, True]
    # silent while out (a crash): membership keeps it out from then on, not its old link
    assert server._runs_free(SLOW)
    server.suspend(SLOW, harness.now, 'absent')
    assert SLOW not in server._too_slow and not server._runs_free(SLOW)
