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
``rog chaos --scenario freeze`` without a fleet: what it sends, and how it judges the freeze.

A fake fleet on a fake clock stands in for the processes: the victim pushes except while it is
stopped (SIGSTOP to SIGCONT), and the others push throughout. The scenario must thaw the victim
whatever happens during the freeze, time its recovery from SIGCONT, and fail a freeze that did
not hold the victim, one after which it never pushed, one whose others were held, and (with
membership) one the server did not suspend it in. test_chaos_fleet.py runs real fleets.
"""

import json
import math
import signal
import threading
import types

import pytest
from rog_ros.experiments import (chaos_fleet, chaos_freeze, chaos_ledger_folder,
                                 chaos_link_outage, chaos_push)
from rog_ros.experiments.chaos_fleet import ChaosConfig
from rog_ros.experiments.chaos_fleet_scenario import VICTIM
from rog_ros.nodes import chaos_hooks

PERIOD_S = 0.5
"""Seconds between two pushes of a robot of the fake fleet."""
THAW_S = 2.0
"""Seconds the fake victim takes after SIGCONT to push again."""


class _Clock:
    """A ``time`` module whose clocks move only when slept on (why: no 21 s waits in a test)."""

    def __init__(self):
        """Start at 1000 s."""
        self.mono = 1000.0

    def monotonic(self) -> float:
        """Return the monotonic clock."""
        return self.mono

    def time(self) -> float:
        """Return the wall clock: the monotonic one, shifted to a 2026 date."""
        return 1.79e9 + self.mono

    def sleep(self, seconds: float) -> None:
        """Advance the clock instead of sleeping."""
        self.mono += max(seconds, 1e-3)


class _FakeWatch:
    """
    A ``PushWatch`` of ``_FakeFleet``: what it holds that ``WatchUnion`` reads.

    ``since``: it sees the pushes from then on (a watch started at the thaw); ``blind``: it
    misses the victim's after SIGCONT (its peers dropped the stopped participant at its lease).
    """

    def __init__(self, fleet, since=0.0, blind=False):
        """Watch ``fleet`` (why: its pushes are computed from the fake clock)."""
        self.fleet, self.since, self.blind = fleet, since, blind
        self.workers, self._lock = fleet.cfg.workers, threading.Lock()
        self.stops, self.closed = set(), 0
        self.transfers, self.acked, self.pulls, self.pulled = {}, set(), {}, set()

    @property
    def pushes(self):
        """Return ``(rank, run, clock) -> first seen`` of the pushes this watch saw by now."""
        cont = self.fleet.sent[1][2] if len(self.fleet.sent) > 1 else None
        return {(r, 1, k): t for r in range(self.workers)
                for k, t in enumerate(self.fleet.first_times(r)) if t >= self.since
                and not (self.blind and r == VICTIM and cont is not None and t > cont)}

    count = chaos_push.PushWatch.count          # (the real reads of what it holds)
    first_times = chaos_push.PushWatch.first_times

    def close(self):
        """Count the calls (why: the scenario must close every watch it started)."""
        self.closed += 1


class _FakeFleet:
    """
    A push fleet on ``_Clock``: what ``freeze`` and its check read of a real ``Fleet``.

    Every attribute the scenario reads of the real one (``push``, ``cfg``, ``codes``,
    ``freeze``, ``signal``, ``watch``, ``specs``, ``dir``, ``domain``, ``namespace``);
    ``fail_at``: a node exits 1 from then on. Its watch misses the victim once it thawed, as a
    real one did.
    """

    def __init__(self, clock, workers=3, fail_at=None, thaw_s=THAW_S):
        """Start the fleet at the clock's time (why: its pushes are computed from it)."""
        self.clock, self.t0, self.fail_at, self.thaw_s = clock, clock.mono, fail_at, thaw_s
        self.cfg = ChaosConfig(workers=workers, sync='asgd', iterations=16)
        self.push, self.dir, self.sent, self.domain, self.namespace = True, '', [], 7, '/x'
        self.specs = {'rog_server': types.SimpleNamespace(parameters={'sync': 'asgd'})}
        self.watch = _FakeWatch(self, blind=True)

    def signal(self, name, sig):
        """Note the signal and when (why: the test checks the freeze's bounds)."""
        self.sent.append((name, sig, self.clock.mono))

    def thaw_guard(self, name):
        """Return an unarmed guard (why: the real one is a process, started before the freeze)."""
        self.guard = types.SimpleNamespace(seconds=None, killed=0, wait=lambda: 0,
                                           stdin=types.SimpleNamespace(close=lambda: None))

        def kill():
            """Count the kills (why: the scenario must end its guard once it thawed)."""
            self.guard.killed += 1
        self.guard.kill = kill
        return self.guard

    def freeze(self, name, seconds, guard):
        """Arm ``guard``, then send SIGSTOP as ``signal`` does; return the guard."""
        assert guard is self.guard and guard.seconds is None and not self.sent
        guard.seconds = seconds
        self.signal(name, signal.SIGSTOP)
        return guard

    def codes(self):
        """Return every node running, or one failed once past ``fail_at``."""
        failed = self.fail_at is not None and self.clock.mono >= self.fail_at
        return {'rog_server': None, 'rog_worker_0': 1 if failed else None}

    def first_times(self, rank):
        """Return the pushes of ``rank`` so far: one per period, none while stopped."""
        times, t = [], self.t0 + PERIOD_S
        stops = [t for n, s, t in self.sent if s == signal.SIGSTOP]
        conts = [t for n, s, t in self.sent if s == signal.SIGCONT]
        while t <= self.clock.mono:
            frozen = rank == VICTIM and stops and t > stops[0] and (
                not conts or t < conts[0] + self.thaw_s)
            if not frozen:
                times.append(t)
            t += PERIOD_S
        return times


def _run_freeze(monkeypatch, fleet):
    """Run the freeze scenario's inject and check on ``fleet`` (why: as fleet_scenario does)."""
    for module in (chaos_fleet, chaos_freeze, chaos_ledger_folder):
        monkeypatch.setattr(module, 'time', fleet.clock)

    def watch(domain, namespace, workers, node_name):
        """Start a watch of the fleet at the thaw (why: a new one is matched with the victim)."""
        assert (domain, namespace, workers) == (fleet.domain, fleet.namespace, fleet.cfg.workers)
        assert node_name != 'rog_chaos_push_watch'      # (the first watch's: one name each)
        return _FakeWatch(fleet, since=fleet.clock.mono)
    monkeypatch.setattr(chaos_freeze, 'PushWatch', watch)

    def scenario(name, cfg, inject, extra_check=None, iterations=None, server_extra=None):
        """Stand in for fleet_scenario: note the budget and settings, inject, check."""
        recover, detail = inject(fleet)
        res = {'recover_s': recover, 'detail': detail, 'iterations': iterations,
               'server_extra': server_extra}
        res['problems'] = extra_check(res, fleet)
        return res
    monkeypatch.setattr(chaos_freeze, 'fleet_scenario', scenario)
    return chaos_freeze.freeze(fleet.cfg)


def test_the_victim_is_stopped_for_the_freeze_and_thawed_and_its_recovery_timed(monkeypatch):
    clock = _Clock()
    fleet = _FakeFleet(clock)
    res = _run_freeze(monkeypatch, fleet)
    assert res['detail'] == '' and res['problems'] == []
    (stop_name, stop, t_stop), (cont_name, cont, t_cont) = fleet.sent
    assert (stop_name, stop, cont_name, cont) == ('rog_worker_1', signal.SIGSTOP,
                                                  'rog_worker_1', signal.SIGCONT)
    assert chaos_freeze.FREEZE_S <= t_cont - t_stop < chaos_freeze.FREEZE_S + 0.2
    # its guard (should this process die) was set for the freeze, and ended after the thaw
    assert (fleet.guard.seconds, fleet.guard.killed) == (chaos_freeze.FREEZE_S, 1)
    # past the server's absence timeout (16 s, the shortest sound one) by a few seconds
    assert chaos_freeze.FREEZE_S > chaos_freeze.FREEZE_ABSENCE_S == 16.0
    # frozen on a push of its, a quarter into a push fleet's budget: the rest lasts while the
    # 2 others push through the freeze and the thaw (31 s) at 0.7 a second, and 5 each after
    assert res['iterations'] == math.ceil(4 / 3 * (2 / 3 * 0.7 * 31 + 5)) == 26
    # the first watch missed the thawed victim; the one started at SIGCONT saw it
    union = fleet.watch
    assert isinstance(union, chaos_push.WatchUnion) and len(union.watches) == 2
    assert union.watches[0].count(VICTIM) == 7 < union.count(VICTIM)
    assert res['server_extra'] == {}        # a push server has no absence_timeout
    assert res['victim_iterations']['before'] == 7 and res['victim_iterations']['during'] == 0
    assert res['victim_iterations']['after'] > 0
    assert abs(res['recover_s'] - THAW_S) <= PERIOD_S
    n = res['others_during_freeze']
    assert sorted(n) == [0, 2] and all(abs(k - (t_cont - t_stop) / PERIOD_S) <= 1
                                       for k in n.values())


def test_a_node_failing_during_the_freeze_still_thaws_the_victim(monkeypatch):
    clock = _Clock()
    fleet = _FakeFleet(clock, fail_at=clock.mono + 10.0)
    res = _run_freeze(monkeypatch, fleet)
    assert res['detail'] == 'a node failed while the victim was frozen'
    assert [s for _, s, _ in fleet.sent] == [signal.SIGSTOP, signal.SIGCONT]
    assert fleet.guard.killed == 1
    assert res['recover_s'] is None


def test_a_victim_that_never_pushes_after_the_thaw_fails(monkeypatch):
    clock = _Clock()
    fleet = _FakeFleet(clock, thaw_s=1e9)
    res = _run_freeze(monkeypatch, fleet)
    assert res['detail'] == f'worker {VICTIM} did not push again after SIGCONT'
    assert f'worker {VICTIM} computed nothing after SIGCONT' in res['problems']
    assert [s for _, s, _ in fleet.sent] == [signal.SIGSTOP, signal.SIGCONT]


STOP, CONT = 110.0, 131.0
"""When the victim of the ledger tests was stopped and thawed."""
WALL = 1000.0
"""The ledger tests' wall clock less their monotonic one."""
SERVER_START = 100.0
"""When the server of the ledger tests became active (monotonic): events.csv's time 0."""


def _ledger_fleet(tmp_path, monkeypatch, victim_at, others_at, suspended=True, sync='rog',
                  suspended_s=16.4, readmitted_s=2.1, active=True, victim_clocks=None):
    """
    Return a Rog fleet stand-in whose ledgers hold ``computed`` records at the given times.

    Written as the nodes write them (``chaos_hooks._Ledger``, on a fake clock), with an
    ``events.csv`` that has the server suspend the victim ``suspended_s`` after ``STOP`` and
    readmit it ``readmitted_s`` after ``CONT`` (None: never), or not suspend it, and a server
    log whose ``active`` line says when events.csv's clock started (unless not ``active``).
    Each ``computed`` record's clock is its count from 0, or the victim's ``victim_clocks``.
    """
    clock = _Clock()
    monkeypatch.setattr(chaos_hooks, 'time', clock)
    ledger_dir = tmp_path / 'ledger'
    ledger_dir.mkdir()
    cfg = ChaosConfig(workers=3, sync=sync)
    for r in range(cfg.workers):
        ledger = chaos_hooks._Ledger(str(ledger_dir / f'worker_{r}.jsonl'), 1)
        for n, t in enumerate(victim_at if r == VICTIM else others_at):
            clock.mono = t
            ledger.add('computed', clock=victim_clocks[n] if r == VICTIM and victim_clocks
                       else n)
        ledger.close()
    rows = ['time_s,robot,event,value,info,what', '0.1,0,join,1.0,{},robot 0 joined']
    if suspended:
        at = STOP + suspended_s - SERVER_START
        rows.append(f'{at},1,worker_suspended,1.0,"{{""reason"": ""absent""}}",robot 1 suspended')
        if readmitted_s is not None:
            rows.append(f'{CONT + readmitted_s - SERVER_START},1,worker_readmitted,1.0,{{}},back')
    (tmp_path / 'events.csv').write_text('\n'.join(rows) + '\n')
    (tmp_path / 'logs').mkdir()
    (tmp_path / 'logs' / 'rog_server.log').write_text(
        '[INFO] [1099.990] [rog_server]: fleet key e30d66b4d484\n'
        + (f'[INFO] [{SERVER_START + WALL:.3f}] [rog_server]: active\n' if active else '')
        + "[INFO] [1200.000] [rog_server]: robot 2 holds the fleet's final model\n")
    staleness = 0 if sync == 'bsp' else 4
    return types.SimpleNamespace(
        push=False, cfg=cfg, dir=str(tmp_path), ledger_dir=str(ledger_dir),
        specs={'rog_server': types.SimpleNamespace(
            parameters={'staleness': staleness, 'sync': sync})})


def test_a_freeze_the_others_trained_through_and_the_server_suspended_is_ok(
        tmp_path, monkeypatch):
    fleet = _ledger_fleet(tmp_path, monkeypatch, victim_at=[100 + i for i in range(11)]
                          + [135.0, 136.0], others_at=[100 + 0.5 * i for i in range(80)])
    res = {}
    assert chaos_freeze.freeze_problems(res, fleet, STOP, CONT, WALL) == []
    assert res['victim_iterations'] == {'before': 11, 'during': 0, 'after': 2}
    assert res['others_during_freeze'] == {0: 41, 2: 41}
    assert res['victim_suspended'] == 'absent'
    assert (res['suspended_after_s'], res['readmitted_after_s']) == (16.4, 2.1)


def test_a_suspension_a_loaded_server_logged_late_is_ok(tmp_path, monkeypatch):
    # a server loop step late on a loaded machine (load 5-10 on 2 cores), its 'active' line
    # logged after its clock started: 17.8 s after SIGSTOP failed a 16 + 1 s bound
    fleet = _ledger_fleet(tmp_path, monkeypatch, victim_at=[100 + i for i in range(11)]
                          + [135.0, 136.0], others_at=[100 + 0.5 * i for i in range(80)],
                          suspended_s=17.8)
    res = {}
    assert chaos_freeze.freeze_problems(res, fleet, STOP, CONT, WALL) == []
    assert res['suspended_after_s'] == 17.8
    assert chaos_freeze.SUSPEND_SLACK_S < chaos_freeze.FREEZE_S - chaos_freeze.FREEZE_ABSENCE_S
    assert chaos_link_outage.iteration_times(fleet, VICTIM)[-1] == 136.0


@pytest.mark.parametrize('sync, held', [('rog', 5), ('bsp', 1)])
def test_others_held_by_the_frozen_victim_fail_the_freeze(tmp_path, monkeypatch, sync, held):
    # a member that counts lets the others run S + 1 iterations past its last push (BSP: 1)
    fleet = _ledger_fleet(tmp_path, monkeypatch, victim_at=[100, 101, 132],
                          others_at=[100 + i for i in range(11)]
                          + [STOP + 0.5 * (k + 1) for k in range(held)], sync=sync)
    res = {}
    problems = chaos_freeze.freeze_problems(res, fleet, STOP, CONT, WALL)
    assert res['others_during_freeze'] == {0: held, 2: held}
    assert len(problems) == 1 and f'at most {held} would be held' in problems[0], problems


def test_a_victim_computing_while_stopped_or_never_suspended_fails(tmp_path, monkeypatch):
    fleet = _ledger_fleet(tmp_path, monkeypatch, victim_at=[100, 120, 140],
                          others_at=[100 + 0.5 * i for i in range(80)], suspended=False)
    res = {}
    problems = chaos_freeze.freeze_problems(res, fleet, STOP, CONT, WALL)
    assert res['victim_iterations'] == {'before': 1, 'during': 1, 'after': 1}
    assert res['victim_suspended'] is None
    assert problems == [
        f'worker {VICTIM} computed 1 iterations while stopped: the freeze did not hold it',
        f'the server did not suspend worker {VICTIM} while it was frozen (21 s, absence '
        'timeout 16 s)']


@pytest.mark.parametrize('sync, unheld_s', [('rog', 21), ('ssp', 5), ('bsp', 5), ('flown', 5)])
def test_a_freeze_sets_the_absence_timeout_and_a_budget_that_outlasts_it(
        monkeypatch, sync, unheld_s):
    got = {}

    def scenario(name, cfg, inject, extra_check=None, iterations=None, server_extra=None):
        """Note what the fleet would be started with (why: no processes here)."""
        got.update(name=name, iterations=iterations, server_extra=server_extra)
        return {}
    monkeypatch.setattr(chaos_freeze, 'fleet_scenario', scenario)
    chaos_freeze.freeze(ChaosConfig(sync=sync, iterations=30))
    # the others, at up to 20 iterations a second once it is suspended (rog: at once, for
    # its link; the others after the absence timeout), must still train when it thaws:
    # 80 + 30 per second they train without it and of the thaw
    assert got == {'name': 'freeze', 'iterations': 80 + 30 * (unheld_s + 10),
                   'server_extra': {'absence_timeout': 16.0}}
    assert json.dumps(got)      # (plain numbers: the row carries them)
    chaos_freeze.freeze(ChaosConfig(sync=sync, iterations=5000))
    assert got['iterations'] == 5000        # a larger --iterations is kept


@pytest.mark.parametrize('suspended_s, readmitted_s, wrong', [
    (19.3, 2.1, 'suspended worker 1 19.3 s after it froze, past the absence timeout (16 s'),
    (-3.0, 2.1, 'did not suspend worker 1 while it was frozen'),     # before: another's
    (16.4, None, 'did not readmit worker 1 after SIGCONT'),
    (16.4, 10.6, 'readmitted worker 1 10.6 s after SIGCONT, past 10 s after it could be (0.0'),
    (16.4, -2.0, 'readmitted worker 1 2.0 s before SIGCONT, while it was frozen')])
def test_a_suspension_or_readmission_out_of_its_bound_fails(
        tmp_path, monkeypatch, suspended_s, readmitted_s, wrong):
    # untimed, any suspension at any time passed: one 19.3 s after the freeze began, one
    # before it, a victim never readmitted (the others done before SIGCONT: it could be at once)
    fleet = _ledger_fleet(tmp_path, monkeypatch, victim_at=[100, 101, 135],
                          others_at=[100 + 0.25 * i for i in range(80)],
                          suspended_s=suspended_s, readmitted_s=readmitted_s)
    res = {}
    problems = chaos_freeze.freeze_problems(res, fleet, STOP, CONT, WALL)
    assert len(problems) == 1 and wrong in problems[0], problems
    if suspended_s > 0:
        assert res['suspended_after_s'] == suspended_s
        assert res['readmitted_after_s'] == readmitted_s


def test_a_suspension_the_server_log_does_not_place_fails(tmp_path, monkeypatch):
    fleet = _ledger_fleet(tmp_path, monkeypatch, victim_at=[100, 101, 135],
                          others_at=[100 + 0.5 * i for i in range(80)], active=False)
    res = {}
    problems = chaos_freeze.freeze_problems(res, fleet, STOP, CONT, WALL)
    assert res['victim_suspended'] == 'absent' and res['suspended_after_s'] is None
    assert len(problems) == 1 and 'cannot tell when the server suspended' in problems[0]


def test_a_victim_behind_may_be_readmitted_when_it_caught_up_or_the_others_are_done():
    # Prepare: SIGCONT at 10; the others 10 iterations ahead at the victim's pace until 20
    victim = [0.0, 1.0] + [10.5 + 0.1 * k for k in range(200)]
    ahead = [0.1 * k for k in range(201)]                  # 0..20 s, 201 iterations
    # Execute / Assert: it never comes within 5 of them while they train: when they are done
    assert chaos_freeze.readmissible_at(victim, {0: ahead}, 10.0, 5) == pytest.approx(20.0)
    # one that catches up (twice their pace) may be back once it is within 5 of them
    fast = [0.0, 1.0] + [10.05 + 0.05 * k for k in range(400)]
    due = chaos_freeze.readmissible_at(fast, {0: ahead, 2: ahead}, 10.0, 5)
    assert 10.0 < due < 20.0
    n_v, n_o = sum(t <= due for t in fast), sum(t <= due for t in ahead)
    assert n_v >= n_o - 5 and sum(t < due for t in fast) < sum(t < due for t in ahead) - 5
    # no others (one robot): at once
    assert chaos_freeze.readmissible_at(victim, {}, 10.0, 5) == 10.0


@pytest.mark.parametrize('readmitted_s, wrong', [(2.1, None), (30.0, 'past 10 s after it could')])
def test_a_rog_victim_that_pulled_the_fleets_clock_is_due_at_once(
        tmp_path, monkeypatch, readmitted_s, wrong):
    # a Rog robot thawed far behind pulls the newest model and its clock (measured: 253
    # before the freeze, 538 at its first iteration 2.1 s after SIGCONT, readmitted at 2.2 s);
    # by the count of its iterations it was due only when the others were done (45 s), so a
    # readmission 30 s after SIGCONT passed
    victim_at = [100.0 + i for i in range(11)] + [CONT + 2.0 + 0.25 * k for k in range(40)]
    clocks = list(range(11)) + [int((CONT + 2.0 - 100) / 0.25) + k for k in range(40)]
    fleet = _ledger_fleet(tmp_path, monkeypatch, victim_at=victim_at,
                          others_at=[100 + 0.25 * i for i in range(240)],
                          readmitted_s=readmitted_s, victim_clocks=clocks)
    res = {}
    problems = chaos_freeze.freeze_problems(res, fleet, STOP, CONT, WALL)
    assert res['readmissible_after_s'] == 2.0
    if wrong is None:
        assert problems == [] and res['readmitted_after_s'] == 2.1
    else:
        assert len(problems) == 1 and wrong in problems[0], problems
