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
"""Outage-aware RSP (issue 10, DESIGN section 4): a dead link is suspended, not waited for."""

import collections
import copy

import numpy as np
from protocol_fixtures import build
import pytest
from rog_ros.net.links import FluidLink
from rog_ros.net.traces import Trace
from rog_ros.protocol.messages import FLAG_END
from rog_ros.protocol.policies import make_policy
from test_protocol_conservation import check_invariants
import torch

BW = 1e6                  # bits/s of the fixture's first link
DIP = (0.5, 5.5)          # worker 2's link is near zero (1 kbit/s) in this window


def dipping_link(t0, t1, low_mbps=0.001):
    trace = Trace(t_s=np.array([0.0, t0, t1]), mbps=np.array([BW / 1e6, low_mbps, BW / 1e6]),
                  end_s=10_000.0, loop=False)
    return FluidLink(trace, latency_s=0.001)


def logs(stats, name):
    return [(t, a) for t, node, a in stats.logs if a.name == name]


def run(spec='rog:2', dip=DIP, iters=100, watch=None, **policy):
    pol = make_policy(spec, **policy)
    harness, server, workers, _, _ = build(spec, n=3, iters=iters, dtype=torch.float64,
                                           bandwidths=(BW, BW, BW), policy=pol)
    if dip:
        harness.up[2], harness.down[2] = dipping_link(*dip), dipping_link(*dip)
    harness.log_events = True
    if watch is not None:
        watch(server)
    harness.run(until=400)
    done = {a.worker: t for t, a in logs(harness.stats, 'worker_done')}
    return harness, server, workers, done


def staleness_watch(seen):
    """Every pull served to an active worker satisfies RSP over the active workers' columns."""
    def install(server):
        real = server._start_downlink

        def checked(r, c, now, late_deadline=None):
            # (a late pull answers no pull: RSP does not gate it)
            if server.active[r] and server.unsynced[r] is None and late_deadline is None:
                act = server.active
                stale = c - int(server.versions.v[:, act].min())
                seen.append(stale)
                assert stale <= server.policy.staleness, (r, c, stale)
            return real(r, c, now, late_deadline)
        server._start_downlink = checked
    return install


def test_dead_link_is_suspended_within_the_bound_and_readmitted():
    seen = []
    harness, server, workers, done = run(watch=staleness_watch(seen))
    assert server.finished and bool(server.active.all())
    sus = logs(harness.stats, 'outage_suspend')
    assert sus and all(a.worker == 2 for _, a in sus)
    t_sus, first = sus[0]
    # suspended within the bound (outage_bound x the fleet's iteration time) of the stall
    # it caused, and well before the link comes back
    assert first.value <= first.info['bound_s'] * 1.01 + 0.05
    assert DIP[0] < t_sus < DIP[0] + 5.0
    assert first.info['bound_s'] < 2.0
    # re-admitted once the link is back and its rows are within the bound
    back = [t for t, a in logs(harness.stats, 'worker_readmitted') if a.worker == 2]
    assert back and min(back) > DIP[1]
    # RSP held for every active worker at every pull (and the hook saw pulls)
    assert len(seen) > 40 and max(seen) <= server.policy.staleness
    # no message is lost here, so no pull ever needs a repair: a catch-up clock the server's
    # versions cannot serve yet would repair for ever (empty downlinks, one after another)
    assert server.repairs == 0


def test_the_others_keep_their_healthy_pace():
    _, _, _, healthy = run(dip=False)
    _, server, _, dipped = run()
    _, _, _, held = run(outage_aware=False)
    for r in (0, 1):
        # the healthy workers finish close to their healthy time ...
        assert dipped[r] <= 1.5 * healthy[r] + 1.0, (dipped, healthy)
        # ... while without the switch they wait for the dead link
        assert held[r] >= DIP[1] - 1.0, held
    assert server.outage_suspensions >= 1


def test_late_pushes_are_weighted_and_the_ledger_keeps_conservation():
    harness, server, workers, _ = run()
    weighted = [a for _, a in logs(harness.stats, 'push_applied') +
                logs(harness.stats, 'late_rows_applied') if 'weight' in a.info]
    assert weighted and server.weighted_pushes == len(weighted)
    assert all(a.worker == 2 and 0.0 < a.info['weight'] < 1.0 for a in weighted)
    assert server.discarded is not None and float(server.discarded.abs().sum()) > 0
    check_invariants(harness, server, workers)      # w0 - w_srv = lr/N sum delivered - ledger
    # the ledger is what makes it hold: without it the server's model would not add up
    applied = sum(w.delivered_total for w in workers) * (server.lr / server.n)
    assert not torch.allclose(server.w_srv, -applied, atol=1e-10, rtol=0)


@pytest.mark.parametrize('spec', ['ssp:2', 'bsp'])
def test_switch_is_off_for_the_baselines(spec):
    assert not make_policy(spec).outage_aware and make_policy('rog:4').outage_aware
    assert not make_policy('rog:4#no-outage').outage_aware


def test_weight_is_one_within_the_bound_and_decays_beyond():
    harness, server, workers, _ = run(dip=False, iters=3)
    server.suspended_reason[1] = 'link'
    server.active[1] = False
    server.clock[0] = 20
    s = server.policy.staleness
    assert server.late_weight(0, 5) == 1.0                  # active: never weighted
    assert server.late_weight(1, 20 - s) == 1.0             # within S of the fleet
    assert server.late_weight(1, 20 - s - 1) == pytest.approx(0.5)
    assert server.late_weight(1, 20 - s - 9) == pytest.approx(0.1)


@pytest.mark.parametrize('free', [False, True])
def test_while_a_robot_is_out_the_others_pushes_are_the_mean_over_those_that_count(free):
    harness, server, workers, _ = run(async_when_out=free)
    # (late rows count too: pushes of rows withheld, sent during the next computation)
    applied = logs(harness.stats, 'push_applied') + logs(harness.stats, 'late_rows_applied')
    rescaled = [(t, a) for t, a in applied if 'outage_scale' in a.info]
    assert rescaled and server.rescaled_pushes == len(rescaled)
    # only the healthy workers, at N / (N - 1) = 3/2, and only while worker 2 was out;
    # running free (async_when_out) it counts out by the pushes it no longer makes: on a
    # dead link, nearly all of them the longer it stays silent
    scales = [a.info['outage_scale'] for _, a in rescaled]
    assert all(a.worker in (0, 1) for _, a in rescaled)
    if free:
        assert all(1.0 < x <= 1.5 + 1e-9 for x in scales) and max(scales) > 1.48
        assert min(scales) < 1.45
    else:
        assert all(x == pytest.approx(1.5) for x in scales)
    t_out = min(t for t, a in logs(harness.stats, 'outage_suspend'))
    t_back = max(t for t, a in logs(harness.stats, 'worker_readmitted') if a.worker == 2)
    assert all(t_out <= t <= t_back for t, _ in rescaled)
    assert any(t > t_back and a.worker in (0, 1) and 'outage_scale' not in a.info
               for t, a in applied)
    # the signed ledger keeps conservation: w0 - w_srv = lr/N x delivered - discarded
    check_invariants(harness, server, workers)


def test_the_rescale_counts_only_dead_links_and_has_a_switch():
    harness, server, _, _ = run(dip=False, iters=3)
    server.active[2], server.suspended_reason[2] = False, 'link'
    assert server.outage_scale(0) == pytest.approx(1.5)
    assert server.outage_scale(2) == 1.0            # the suspended robot: late_weight only
    server.active[1], server.suspended_reason[1] = False, 'absent'
    assert server.outage_scale(0) == pytest.approx(1.5)   # a silent robot is membership
    _, off, _, _ = run(outage_rescale=False)
    assert off.outage_suspensions and off.rescaled_pushes == 0
    assert not make_policy('rog:4#outage_rescale=0').outage_rescale


def test_the_ledger_and_counters_survive_a_checkpoint():
    harness, server, workers, _ = run()
    assert server.discarded is not None and server.weighted_pushes
    state = copy.deepcopy(server.state_dict())      # what the driver writes to disk
    fresh = harness.new_server()
    fresh.load_state_dict(state)
    assert fresh.discarded is not None and torch.equal(fresh.discarded, server.discarded)
    assert fresh.discarded.data_ptr() != server.discarded.data_ptr()
    assert (fresh.weighted_pushes, fresh.rescaled_pushes, fresh.outage_suspensions) == \
        (server.weighted_pushes, server.rescaled_pushes, server.outage_suspensions)
    assert server.rescaled_pushes
    # the restored server's books still add up: w0 - w_srv = lr/N x delivered - ledger
    harness.server = fresh
    check_invariants(harness, fresh, workers)


def test_a_checkpoint_without_a_ledger_restores_none():
    harness, server, _, _ = run(dip=False, iters=5)
    state = server.state_dict()
    assert server.discarded is None and state['discarded'] is None
    del state['discarded']                           # written before the ledger existed
    fresh = harness.new_server()
    fresh.load_state_dict(state)
    assert fresh.discarded is None and fresh.weighted_pushes == 0


def flapping_link(period_s=1.2, low_s=0.9, start_s=0.5, end_s=10.0):
    """Return a link near zero for ``low_s`` of every ``period_s`` (slow, never quite dead)."""
    t = [0.0]
    mbps = [BW / 1e6]
    for t0 in np.arange(start_s, end_s, period_s):
        t += [t0, t0 + low_s]
        mbps += [0.001, BW / 1e6]
    trace = Trace(t_s=np.array(t), mbps=np.array(mbps), end_s=10_000.0, loop=False)
    return FluidLink(trace, latency_s=0.001)


def run_flapping(**policy):
    pol = make_policy('rog:2', **policy)
    harness, server, workers, _, _ = build('rog:2', n=3, iters=200, dtype=torch.float64,
                                           bandwidths=(BW, BW, BW), policy=pol)
    harness.up[2], harness.down[2] = flapping_link(), flapping_link()
    harness.log_events = True
    harness.run(until=400)
    return harness, server, workers


def test_a_link_that_stays_poor_is_held_out_longer_after_each_flap():
    harness, server, workers = run_flapping(readmit_backoff=True)
    _, plain, _ = run_flapping(readmit_backoff=False)
    assert server.finished and plain.finished
    sus = [(t, a) for t, a in logs(harness.stats, 'outage_suspend')]
    back = [t for t, a in logs(harness.stats, 'worker_readmitted')]
    assert all(a.worker == 2 for _, a in sus)
    # without the backoff the poor link flaps in and out; with it, fewer suspensions ...
    assert plain.outage_suspensions >= 4
    assert server.outage_suspensions < plain.outage_suspensions
    # ... and each flap keeps it out at least twice as long as the one before it (the hold)
    stays = [b - t for (t, _), b in zip(sus, back)]
    quick = [k for k in range(1, len(sus)) if sus[k][0] - back[k - 1] <
             4.0 * sus[k][1].info['bound_s']]
    for k in quick:
        assert stays[k] >= 2.0 * sus[k][1].info['bound_s'] - 1e-9, (k, stays)
    # once the link is good for good it is readmitted: the hold is bounded
    assert bool(server.active.all())
    check_invariants(harness, server, workers)
    assert make_policy('rog:4').readmit_backoff
    assert not make_policy('rog:4#readmit_backoff=0').readmit_backoff


def test_a_restarted_robot_keeps_its_readmission_hold():
    """A robot that restarts (a new incarnation) is on the same link: its hold stands."""
    _, server, _, _, _ = build('rog:4', n=3, policy=make_policy('rog:4'))
    bound = 1.0
    server.suspend(2, 0.0, 'link')
    server.readmit(2, 1.0)
    server._hold_out(2, 2.0, bound)          # suspended again 1 s after its readmission
    server.suspend(2, 2.0, 'link')
    assert server._hold_until[2] == 2.0 + 2 * bound
    server._reset_worker(2, 2.5)             # what a message of a new run of robot 2 does
    assert server._hold_until[2] == 2.0 + 2 * bound and server._flaps[2] == 1
    assert server._maybe_readmit(2, 3.0) == [] and not bool(server.active[2])
    assert server._maybe_readmit(2, 4.0) and bool(server.active[2])   # its rows are fresh


@pytest.mark.parametrize('backoff', [True, False])
def test_a_late_push_after_a_catch_up_is_not_an_iteration(backoff):
    # A worker that caught up is at the clock of that pull, ahead of its newest push at the
    # server: its late push there was taken for a new iteration, and the pull it was served
    # reached it while it computed (refused now: an update from a newer clock).
    harness, server, workers = run_flapping(readmit_backoff=backoff)
    assert server.outage_suspensions >= 4
    sent = collections.Counter(a.worker for _, a in logs(harness.stats, 'push_done')
                               if a.info.get('late'))
    applied = collections.Counter(a.worker for _, a in logs(harness.stats, 'late_rows_applied'))
    assert sent[2] >= 5 and sent == applied
    assert [w.rejects for w in workers] == [0, 0, 0] and server.rejects == 0


def test_a_robot_still_out_when_the_fleet_finishes_stops_instead_of_training_alone():
    # worker 2's link is dead from 0.5 s to 60 s; the others finish 100 iterations in ~9 s
    harness, server, workers, done = run(dip=(0.5, 60.0))
    finished = max(done[0], done[1])
    applied_after = [t for t, a in logs(harness.stats, 'push_applied')
                     if a.worker == 2 and t > finished]
    stops = logs(harness.stats, 'stopped_after_fleet')
    # it stops at its first pull after the fleet finished, short of its own budget, and its
    # pushes in flight then are all it adds (before: it trained on alone to clock 100)
    assert [a.worker for _, a in stops] == [2] and server.clock[2] < 100
    assert stops[0][1].value == 100 - server.clock[2]
    assert len(applied_after) <= 2 and done[2] == pytest.approx(stops[0][0])
    assert server.finished and not bool(server.active[2])
    check_invariants(harness, server, workers)


def test_a_robot_stopped_after_the_fleet_says_what_it_computed_and_its_clock():
    # the sentence said 'with its clock 1 iterations short of its budget' while the summary
    # said the robot computed 13 of 100: its clock had jumped ahead when it caught up
    from rog_ros.protocol import events
    harness, server, _, _ = run(dip=(0.5, 60.0))
    (_, stop), = logs(harness.stats, 'stopped_after_fleet')
    computed = harness.stats.iterations[2]
    assert stop.info == {'computed': computed, 'budget': 100, 'clock': server.clock[2]}
    assert computed < server.clock[2]
    text = events.describe(stop)[1]
    assert text.startswith(f'robot 2 stopped having computed {computed} of its 100 '
                           f'iterations (its clock {server.clock[2]}: it caught up with the '
                           'fleet)')
    assert 'short of its budget' not in text


def test_a_start_up_period_does_not_set_the_fleets_pace():
    # The first push period holds a robot's start-up (first whole-model pull, the fleet
    # forming): seeded with it, the pace and so the outage bound stayed ~10x too long for a
    # dozen pushes, and a robot dead from the start held the others through a 6 s outage
    _, server, _, _, _ = build('rog:2', n=3, iters=10, dtype=torch.float64,
                               bandwidths=(BW, BW, BW), policy=make_policy('rog:2'))
    server._note_push_period(0, 2.0)
    for _ in range(3):
        server._note_push_period(0, 0.1)
    assert server.iter_est[0].value == pytest.approx(0.1)
    # a first period within 4x of the second is a pace, not a start-up: it is kept
    server._note_push_period(1, 0.3)
    server._note_push_period(1, 0.1)
    assert server.iter_est[1].value == pytest.approx(0.7 * 0.3 + 0.3 * 0.1)
    # and a long period later (a hold, an outage) counts as 4x the pace, no restart
    server._note_push_period(0, 60.0)
    assert server.iter_est[0].value == pytest.approx(0.7 * 0.1 + 0.3 * 0.4)


def silent_robot_run(spec, start_s):
    """Run ``spec`` with robot 2's link dead from ``start_s`` for 30 s; return what 2 got."""
    harness, server, _, _, _ = build(spec, n=3, iters=100, dtype=torch.float64,
                                     bandwidths=(BW, BW, BW), policy=make_policy(spec),
                                     chunk_bytes=64)   # the first pull: several windows
    dead = (start_s, start_s + 30.0)
    harness.up[2], harness.down[2] = (dipping_link(*dead, low_mbps=1e-12),
                                      dipping_link(*dead, low_mbps=1e-12))
    sent, heard = [], []
    send, on_message = harness._send, server.on_message

    def recording_send(src, dst, msg):
        """Note what goes to robot 2, then send it."""
        if dst == 2:
            sent.append((harness.now, msg))
        return send(src, dst, msg)

    def recording_on_message(msg, now):
        """Note when the server hears from robot 2, then let it handle the message."""
        if getattr(msg, 'sender', None) == 2:
            heard.append(now)
        return on_message(msg, now)
    harness._send, server.on_message = recording_send, recording_on_message
    harness.run(until=400)
    assert server.finished
    silent = (dead[0] + 0.05, dead[1])
    assert not [t for t in heard if silent[0] <= t < silent[1]]   # the link was dead
    assert [t for t in heard if t >= dead[1]]                     # and came back
    return server, sent, silent


@pytest.mark.parametrize('spec', ['rog:2', 'flown:2'])
def test_a_silent_robot_gets_no_new_transfer_only_the_rest_of_one(spec):
    # On DDS a dead link is a reader that stops acknowledging: the server's reliable writer to
    # that robot keeps all it writes, and its write() blocks the server's one loop (and so
    # every robot) once that passes Cyclone's writer-history high watermark (WhcHigh, 500 kB
    # by default) until the link comes back or the robot's lease ends. What bounds it: the
    # engines start no transfer to a robot that is silent, and a transfer in flight sends its
    # remaining windows (one per end_timeout_s without acks) and then its END once per
    # end_timeout_s; nothing else (measured with rog fleet --netns, docs/faults.md)
    in_flight = 0
    for start_s in (0.126, 0.13, 0.134, 0.138):     # while the first pull is on its way
        server, sent, silent = silent_robot_run(spec, start_s)
        before = {m.transfer_id for t, m in sent if t < silent[0] and hasattr(m, 'transfer_id')}
        during = [m for t, m in sent if silent[0] <= t < silent[1]]
        chunks = [m for m in during if type(m).__name__ == 'RowChunk']
        assert {m.transfer_id for m in chunks} <= before, 'a transfer started to a silent robot'
        ends = [m for m in chunks if m.flags & FLAG_END]
        data = [(m.transfer_id, m.seq) for m in chunks if not m.flags & FLAG_END]
        assert len(data) == len(set(data)), 'a data chunk was sent twice to a silent robot'
        span = silent[1] - silent[0]
        assert len(ends) <= len({m.transfer_id for m in chunks}) * (
            span / server.end_timeout_s + 1)
        others = [m for m in during if type(m).__name__ not in ('RowChunk', 'RowVersions')]
        assert len(others) <= 2, others
        in_flight += len(chunks) > len(ends)
    assert in_flight, 'no run had a transfer in flight as the link died: move the starts'
