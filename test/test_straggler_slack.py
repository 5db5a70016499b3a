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
Straggler slack (core/slack.py): a robot on a slow, not dead, link gets extra staleness.

The controller raises a robot's slack only while it holds the others a large share of their
time and only for a link (not a computer) that trails the fleet; every check (server, the
worker's own, the computation it admits) then tolerates ``S + slack`` in that column and never
more; the robot pushes the smaller MTA of ``S + slack``; both sides of a pull decide with the
same numbers because the slack travels in the pull's RowVersions.
"""

import numpy as np
from protocol_fixtures import at_compute_start, build, random_faults
import pytest
from rog_ros.core.mta import mta
from rog_ros.core.slack import StragglerSlack
from rog_ros.core.versions import VersionTable
from rog_ros.protocol.messages import check_versions, MAX_SLACK, MessageError, RowVersions
from rog_ros.protocol.policies import make_policy
from test_protocol_conservation import check_invariants
import torch

SLOW = 3
# too slow for any slack: free_stragglers (Rog's default) would let it go, so the slack tests
# turn it off (test_free_stragglers.py tests that rule on this link)
SLOW_LINK = {'bandwidths': (2e6, 2e6, 2e6, 0.3e6), 'compute': (0.05,) * 4, 'iters': 60,
             'dtype': torch.float64}


# ---------------------------------------------------------------- the controller alone
def test_slack_rises_by_step_once_per_window_up_to_its_cap():
    sl = StragglerSlack(3, threshold=0.3, max_slack=5, step=2)
    window, now = 1.0, 0.0
    changes = []
    for _ in range(12):
        now += 0.5
        sl.held([2], 0.4, now, window)        # robot 2 holds the others 0.4 s of every 0.5 s
        changes += sl.update(now, window, 2, [0, 1, 2])
    assert [c[:2] for c in changes] == [(2, 2), (2, 4), (2, 5)]
    assert sl.slack.tolist() == [0, 0, 5] and sl.raises == 3
    times = []
    for _ in range(40):                       # it stops holding anyone: slack falls by one,
        now += 0.5                            # at most once per two windows
        if sl.update(now, window, 2, [0, 1, 2]):
            times.append(now)
    assert sl.slack.tolist() == [0, 0, 0] and len(times) == 5
    assert min(b - a for a, b in zip(times, times[1:])) >= 2 * window


def test_slack_stays_zero_below_the_threshold_or_without_leave_to_rise():
    sl = StragglerSlack(3, threshold=0.3)
    now = 0.0
    for _ in range(20):
        now += 0.5
        sl.held([1], 0.2, now, 1.0)           # 0.2 s of 0.5 s over two others: 20%
        sl.held([2], 0.45, now, 1.0)          # 45%, but not link-bound
        assert not sl.update(now, 1.0, 2, [0, 1, 2], may_raise={0, 1})
    assert sl.share(2, now, 1.0, 2) > 0.3 and sl.share(1, now, 1.0, 2) < 0.3
    assert not sl.granted


def test_bounds_widen_the_straggler_column_and_every_column_of_the_straggler():
    sl = StragglerSlack(4)
    sl.slack[3] = 6
    assert sl.bounds(4, 0).tolist() == [4, 4, 4, 10]
    assert sl.bounds(4, 3).tolist() == [10, 10, 10, 10]


@pytest.mark.parametrize('kw', [{'threshold': 0.0}, {'threshold': 1.0}, {'max_slack': -1},
                                {'step': 0}])
def test_bad_controller_settings_are_refused(kw):
    with pytest.raises(ValueError):
        StragglerSlack(4, **kw)


def test_version_table_checks_each_column_against_its_own_bound():
    vt = VersionTable(3, 2)
    vt.v[:, 0] = 8
    vt.v[:, 1] = torch.tensor([8, 3, 8], dtype=torch.int32)
    assert not vt.satisfied(10, 4)                        # column 1 is 7 stale at row 1
    assert vt.satisfied(10, torch.tensor([4, 7]))         # ... within S + 3
    assert not vt.satisfied(10, torch.tensor([4, 6]))
    assert vt.violating_pairs(10, torch.tensor([4, 6])).tolist() == [[1, 1]]
    active = torch.tensor([True, False])
    assert vt.satisfied(10, torch.tensor([4, 6]), active)  # a suspended column never holds


# ---------------------------------------------------------------- the wire
def test_row_versions_carry_a_valid_slack_or_are_refused():
    ok = RowVersions(transfer_id=1, receiver=0, n_workers=3,
                     staleness_slack=np.array([0, 0, 4], np.uint16))
    check_versions(ok, n_rows=10, n_workers=3)
    for bad in (np.array([0, 4], np.uint16), np.array([0, 0, MAX_SLACK + 1], np.uint16)):
        with pytest.raises(MessageError):
            check_versions(RowVersions(transfer_id=1, receiver=0, n_workers=3,
                                       staleness_slack=bad), n_rows=10, n_workers=3)


# ---------------------------------------------------------------- the engines
def _watch(harness, policy):
    """Record, per computation as it starts, each column's staleness and the bounds then."""
    seen = []

    def started(rank, clock):
        eng = harness.workers[rank]
        lags = clock - 1 - eng.vloc.min(dim=0).values
        seen.append((rank, lags.clone(), eng._bounds().clone(), eng.active.clone()))
    at_compute_start(harness, started)
    return seen


def _run(on, fault=None, seed=0, **kw):
    pol = make_policy(f'rog:4#straggler_slack={int(on)}#free_stragglers=0')
    harness, server, workers, loss_fn, layout = build('rog:4', policy=pol, fault=fault,
                                                      seed=seed, **{**SLOW_LINK, **kw})
    harness.log_events = True
    seen = _watch(harness, pol)
    stats = harness.run(until=2000)
    assert server.finished and stats.error is None
    return harness, server, workers, layout, stats, seen


@pytest.mark.parametrize('seed', [0, 1])
def test_a_slow_link_gets_slack_and_no_check_ever_admits_more(seed):
    harness, server, workers, layout, stats, seen = _run(True, seed=seed)
    raised = [node for _, node, a in stats.logs if a.name == 'straggler_slack' and a.value > 0]
    assert server.slack.raises >= 1
    assert {a.worker for _, _, a in stats.logs
            if a.name == 'straggler_slack'} == {SLOW}          # only the slow link's robot
    assert raised and all(n == -1 for n in raised)           # decided by the server
    s = server.policy.staleness
    wide = 0
    for rank, lags, bounds, active in seen:
        assert bool((lags <= bounds)[active].all())          # never beyond S + slack ...
        assert int(bounds.max()) <= s + server.policy.slack_max
        wide += int(bool((lags > s)[active].any()))          # ... and it was used
    assert wide > 0
    check_invariants(harness, server, workers)


def test_the_robot_with_slack_pushes_the_smaller_mta_of_its_wider_bound():
    harness, server, workers, layout, stats, seen = _run(True)
    pushes = [(a.value, a.info) for _, node, a in stats.logs
              if a.name == 'push_done' and node == SLOW]
    fractions = [v / layout.n_rows for v, _ in pushes]
    assert min(fractions) < mta(4, 'exact_root_shifted') - 1e-3
    assert min(fractions) >= mta(4 + server.policy.slack_max, 'exact_root_shifted') - 1e-3


def test_slack_is_faster_on_a_slow_link_and_off_is_the_ablation():
    on = _run(True)[0].now
    harness, server, *_ = _run(False)
    assert server.slack is None
    assert on < harness.now


def test_a_slow_computer_gets_no_slack():
    harness, server, workers, layout, stats, seen = _run(
        True, bandwidths=(2e6,) * 4, compute=(0.05, 0.05, 0.05, 0.25))
    assert any(a.name == 'trigger' for _, _, a in stats.logs)     # it does hold the others
    assert server.slack.raises == 0


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_lost_and_repeated_messages_leave_both_checks_agreeing(seed):
    # the worker decides with the slack of the versions it applied, the server with the same
    # downlink's bounds: a lost Schedule or RowVersions can stall neither for good
    harness, server, workers, layout, stats, seen = _run(True, fault=random_faults(seed),
                                                         seed=seed)
    assert server.slack.raises >= 1
    # a robot suspended for its link runs free (async_when_out): no bound holds it
    held = [(lags, bounds, active) for rank, lags, bounds, active in seen if active[rank]]
    assert len(held) > len(seen) // 2
    for lags, bounds, active in held:
        assert bool((lags <= bounds)[active].all())
    check_invariants(harness, server, workers)


# ------------------------------------------------- slack and outage suspension together
def _suspended_straggler(slack):
    """Return a server whose robot 3 (slack ``slack``) is suspended for its link, fleet at 10."""
    pol = make_policy('rog:4#straggler_slack=1#free_stragglers=0')
    server = build('rog:4', policy=pol, **SLOW_LINK)[1]
    server.clock = [10, 10, 10, 3]
    server.versions.v[:] = 10
    server.suspend(SLOW, 0.0, 'link')
    server.slack.slack[SLOW] = slack
    return server


@pytest.mark.parametrize('slack', [0, 2, 5])
def test_a_suspended_straggler_returns_at_the_bound_its_column_is_checked_against(slack):
    s = make_policy('rog:4').staleness
    for lag, back in ((s + slack, True), (s + slack + 1, False)):
        server = _suspended_straggler(slack)
        server.versions.v[:, SLOW] = 10 - lag
        server._maybe_readmit(SLOW, 1.0)
        assert bool(server.active[SLOW]) is back, (slack, lag)


@pytest.mark.parametrize('slack', [0, 3])
def test_a_suspended_stragglers_late_push_is_weighted_beyond_its_own_bound(slack):
    server = _suspended_straggler(slack)
    s = server.policy.staleness
    assert server.late_weight(SLOW, 10 - s - slack) == 1.0        # within S + slack: in full
    assert server.late_weight(SLOW, 10 - s - slack - 3) == pytest.approx(1 / 4)
    server.readmit(SLOW, 1.0)
    assert server.late_weight(SLOW, 0) == 1.0                      # active: never weighted


@pytest.mark.parametrize('slack', [0, 3])
def test_a_straggler_catching_up_goes_on_from_the_fleets_clock_less_its_slack(slack):
    server = _suspended_straggler(slack)
    started = []
    server._start_downlink = lambda r, c, now, late_deadline=None: started.append((r, c)) or []
    server.pending[SLOW] = 3
    server._try_serve(SLOW, 1.0)
    assert started == [(SLOW, 10 - slack)]    # skips 7 - slack iterations, not 7


def test_no_slack_rises_while_a_robot_is_suspended_for_its_link():
    # slack quickens the fleet; a robot out for its link returns only once its link keeps
    # the fleet's pace, so raising the pace then kept robots out (EACOL seeds 8 and 9)
    from test_outage_rsp import dipping_link
    pol = make_policy('rog:4#straggler_slack=1#free_stragglers=0')
    harness, server, workers, _, _ = build('rog:4', policy=pol, **SLOW_LINK)
    harness.up[0], harness.down[0] = dipping_link(2.0, 8.0), dipping_link(2.0, 8.0)
    harness.log_events = True
    stats = harness.run(until=2000)
    assert server.finished and stats.error is None
    out, slack, raised_while_out, suspensions = set(), {}, [], 0
    for t, _, a in stats.logs:
        if a.name == 'worker_suspended' and a.info.get('reason') == 'link':
            out.add(a.worker)
            suspensions += 1
        elif a.name == 'worker_readmitted':
            out.discard(a.worker)
        elif a.name == 'straggler_slack':
            if out and a.value > slack.get(a.worker, 0):
                raised_while_out.append((t, a.worker, a.value, sorted(out)))
            slack[a.worker] = a.value
    assert suspensions >= 1                 # the dip did suspend robot 0 ...
    assert raised_while_out == []           # ... and meanwhile nobody's slack rose
    check_invariants(harness, server, workers)


def test_the_fleet_summary_reports_the_slack_and_push_systems_have_none():
    from rog_ros.core.slack import slack_summary
    sl = StragglerSlack(3)
    sl.slack[2], sl.raises = 4, 2
    assert slack_summary(sl) == {'slack_raises': 2, 'slack_final': [0, 0, 4]}
    assert slack_summary(None) == {}
