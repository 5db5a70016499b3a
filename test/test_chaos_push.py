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
``rog chaos`` for the push systems, without a fleet: which scenarios run, and the verdict.

The push systems keep no durable server state: a server kill is refused in one line before
anything starts, ``--scenario all`` leaves it out, and their rows are judged by the pushes
seen on the wire against what the server's summary says it applied and dropped
(``chaos_push.push_verdict``). test_chaos_fleet.py runs their fleets.
"""

import json
import types

import chaos_fakes
import pytest
from rog_ros import cli
from rog_ros.experiments import (chaos, chaos_fleet, chaos_link_outage, chaos_push,
                                 chaos_scenarios)
from rog_ros.nodes import settings
from rog_ros.protocol.messages import RowChunk


class _Watch:
    """Stand in for ``PushWatch``: the pushes ``(rank, run, clock)`` seen, the stop orders."""

    def __init__(self, pushes, stops):
        """Keep what a watch of a finished fleet would hold (why: no DDS in this module)."""
        self.pushes = {p: 0.0 for p in pushes}
        self.stops = set(stops)

    def confirmed(self):
        """Return the pushes, all acknowledged (why: as ``PushWatch.confirmed``)."""
        return set(self.pushes)


def _summary(tmp_path, applied, dropped, received=None, refused=0, resent=None):
    """
    Write the server's summary.json of a push fleet (why: the verdict reads it).

    ``received`` (default applied + dropped): the pushes its engine was handed; ``resent``
    (None: not said, as before a restored server could say it): those a restored server had
    answered before its checkpoint.
    """
    received = applied + dropped if received is None else received
    summary = {'pushes_applied': applied, 'worker_restarts': dropped,
               'pushes_received': received, 'pushes_refused': refused}
    if resent is not None:
        summary['pushes_resent'] = resent
    (tmp_path / 'summary.json').write_text(json.dumps(summary))


def _pushes(per_rank, runs=None):
    """Return ``per_rank[r]`` pushes of each rank, clocks 0.. (rank 1 in ``runs`` runs)."""
    out = []
    for r, k in enumerate(per_rank):
        for c in range(k):
            out.append((r, 1 + (runs or {}).get((r, c), 0), c))
    return out


def test_a_clean_push_run_is_ok_with_every_number_in_the_row(tmp_path):
    # 2 robots, budget 2 x 10: 20 applied; the robot that did not end training pushed once
    # more and was answered with its stop order
    _summary(tmp_path, 20, 0, received=21)
    res = {}
    problems = chaos_push.push_verdict(res, _Watch(_pushes([11, 10]), {0, 1}), str(tmp_path),
                                       workers=2, iterations=10)
    assert problems == []
    assert res['lost'] == 0 and res['duplicated'] == 0
    assert res['pushes'] == {'seen': 21, 'received': 21, 'refused': 0, 'applied': 20,
                             'dropped': 0, 'resent': 0, 'budget': 20, 'stopped': [0, 1],
                             'kills': 0}
    # GSP stops a robot held for its group at the end: no push after training, none unapplied
    _summary(tmp_path, 20, 0)
    problems = chaos_push.push_verdict(res, _Watch(_pushes([10, 10]), {0, 1}), str(tmp_path),
                                       workers=2, iterations=10)
    assert problems == [] and res['lost'] == 0 and res['duplicated'] == 0


def test_a_push_applied_twice_is_duplicated(tmp_path):
    # the server stops at its budget, so a push applied twice leaves applied == budget: robot
    # 0's 10 pushes made 11 applications (one handed to its engine twice), robot 1's 9 applied
    # and its last answered with its stop order. The verdict read 20 applied <= 20 seen: ok
    _summary(tmp_path, 20, 0, received=21)
    res = {}
    problems = chaos_push.push_verdict(res, _Watch(_pushes([10, 10]), {0, 1}), str(tmp_path),
                                       workers=2, iterations=10)
    assert res['duplicated'] == 1 and res['lost'] == 0
    assert len(problems) == 1 and 'applied twice' in problems[0], problems
    # handed twice and refused the second time (a push of a clock gone): taken once, ok
    _summary(tmp_path, 20, 0, received=22, refused=1)
    problems = chaos_push.push_verdict(res, _Watch(_pushes([11, 10]), {0, 1}), str(tmp_path),
                                       workers=2, iterations=10)
    assert problems == [] and res['duplicated'] == 0
    # applied more than its engine was handed, over the budget too
    _summary(tmp_path, 21, 1, received=21)
    problems = chaos_push.push_verdict(res, _Watch(_pushes([11, 10]), {0, 1}), str(tmp_path),
                                       workers=2, iterations=10)
    assert res['duplicated'] == 1
    assert any('applied twice' in p for p in problems)
    assert any('budget is 20' in p for p in problems)


def test_a_push_sent_again_to_a_restored_server_is_no_duplicate(tmp_path):
    # server-restart of a push system: the server applied robot 0's push, checkpointed it
    # and died before its answer left; the robot sent it again to the restored server,
    # which took it (pushes_received counts it in both server runs: the checkpoint's and
    # the new one's) and answered without applying it (pushes_resent). The verdict read 22
    # taken against 21 distinct pushes: 'a push was applied twice'
    _summary(tmp_path, 20, 0, received=22, resent=1)
    res = {}
    problems = chaos_push.push_verdict(res, _Watch(_pushes([11, 10]), {0, 1}), str(tmp_path),
                                       workers=2, iterations=10)
    assert problems == [] and res['duplicated'] == 0 and res['lost'] == 0
    assert res['pushes']['resent'] == 1
    # a push applied twice all the same (one taken more than sent and resent): still caught
    _summary(tmp_path, 20, 0, received=23, resent=1)
    problems = chaos_push.push_verdict(res, _Watch(_pushes([11, 10]), {0, 1}), str(tmp_path),
                                       workers=2, iterations=10)
    assert res['duplicated'] == 1 and any('applied twice' in p for p in problems)


def test_the_push_in_flight_at_a_kill_is_lost_once_and_only_within_the_kills(tmp_path):
    # robot 1 killed mid-push: its in-flight push (run 1, clock 5) never applied; its new run
    # (run 2) pushed at clock 0 first (dropped, worker_restart), then on
    pushes = _pushes([11, 6]) + [(1, 2, c) for c in range(6)]
    _summary(tmp_path, 20, 1, received=22)
    res = {}
    problems = chaos_push.push_verdict(res, _Watch(pushes, {0, 1}), str(tmp_path), workers=2,
                                       iterations=10, kills=1)
    assert problems == [] and res['lost'] == 1 and res['duplicated'] == 0
    res = {}
    problems = chaos_push.push_verdict(res, _Watch(pushes, {0, 1}), str(tmp_path), workers=2,
                                       iterations=10, kills=0)
    assert res['lost'] == 1 and any('neither applied nor dropped' in p for p in problems)


def test_a_robot_never_told_to_stop_and_a_missing_summary_are_problems(tmp_path):
    res = {}
    problems = chaos_push.push_verdict(res, _Watch(_pushes([11, 10]), {0}), str(tmp_path),
                                       workers=2, iterations=10)
    assert problems and 'no summary.json' in problems[0]
    _summary(tmp_path, 20, 0, received=21)
    problems = chaos_push.push_verdict(res, _Watch(_pushes([11, 10]), {0}), str(tmp_path),
                                       workers=2, iterations=10)
    assert problems == ['no stop order seen for robots [1]']
    # a server that does not say what its engine was handed: no verdict of duplicates
    (tmp_path / 'summary.json').write_text(json.dumps({'pushes_applied': 20,
                                                       'pushes_received': 21}))
    problems = chaos_push.push_verdict(res, _Watch(_pushes([11, 10]), {0, 1}), str(tmp_path),
                                       workers=2, iterations=10)
    assert 'pushes_refused' in problems[0], problems


def test_the_rejects_of_a_push_fleet_add_the_server_s_and_each_worker_s_last_line(tmp_path):
    (tmp_path / 'summary.json').write_text(json.dumps(
        {'rejects_by_reason': {'bad_tag': 3, 'unauthenticated': 0}}))
    logs = tmp_path / 'logs'
    logs.mkdir()
    (logs / 'rog_worker_0.log').write_text(
        "[WARNING] [1.0] [rog_worker_0]: dropped messages {'bad_tag': 1}\n"
        "[WARNING] [2.0] [rog_worker_0]: dropped messages {'bad_tag': 2, 'unauthenticated': 4}\n")
    (logs / 'rog_worker_1.log').write_text('[INFO] [1.0] [rog_worker_1]: active\n')
    assert chaos_push.push_rejects(str(tmp_path)) == {'bad_tag': 5, 'unauthenticated': 4}


@pytest.mark.parametrize('sync', chaos_fleet.PUSH_CHAOS_SYSTEMS)
def test_a_push_systems_server_restart_runs_with_the_default_k_and_its_journal(
        sync, tmp_path, monkeypatch):
    # server-restart was refused for the push systems (they kept no server state): their
    # server now checkpoints (--state-dir) and journals every push between checkpoints, so
    # its restart is exactly-once for every K: the scenario gives the fleet's server its
    # state folder and the fleet's default K (10), not the whole checkpoint before every
    # answer it needed before the journal (K = 1)
    ran = []

    def record(names, cfg, progress=None, rows=None):
        """Note the scenarios asked for (why: no fleet starts here)."""
        ran.append(list(names))
        return []
    monkeypatch.setattr(chaos, 'run_scenarios', record)
    assert cli.main(['chaos', '--out', str(tmp_path / 'out'), '--sync', sync,
                     '--scenario', 'server-restart']) == 0
    assert ran == [['server-restart']]
    assert chaos_scenarios.PUSH_CHECKPOINT_EVERY == 10 == settings.defaults()['checkpoint_every']
    trace = str(tmp_path / 'trace.csv')
    chaos_fleet.write_trace(trace, 2, chaos_fleet.RATE_MBPS)
    cfg = chaos_fleet.ChaosConfig(out=str(tmp_path), sync=sync, workers=2)
    state = str(tmp_path / 'state')
    fleet = chaos_fleet.Fleet(cfg, str(tmp_path), trace, server_extra={
        'state_dir': state, 'checkpoint_every': chaos_scenarios.PUSH_CHECKPOINT_EVERY})
    server = fleet.specs['rog_server'].parameters
    assert server['state_dir'] == state and server['checkpoint_every'] == 10
    assert not any(spec.parameters.get('state_dir') for name, spec in fleet.specs.items()
                   if name != 'rog_server')


@pytest.mark.parametrize('sync', chaos_fleet.CHAOS_SYSTEMS)
def test_all_runs_every_scenario_a_system_can_run(sync, tmp_path, monkeypatch):
    ran = []

    def record(names, cfg, progress=None, rows=None):
        """Note the scenarios asked for and the system (why: no fleet starts here)."""
        ran.append((list(names), cfg.sync))
        return []
    monkeypatch.setattr(chaos, 'run_scenarios', record)
    assert cli.main(['chaos', '--out', str(tmp_path / 'out'), '--sync', sync]) == 0
    every = list(chaos_scenarios.SCENARIOS)
    assert ran == [(every, sync)]
    # every system: a frozen robot has no state to lose, and a push server's kill restores
    # its checkpoint of every push (left out for them before)
    assert 'freeze' in every and 'server-restart' in every and 'link-outage' in every


def test_a_link_outage_for_a_push_system_runs_on_a_budget_for_its_pace(tmp_path, monkeypatch):
    ran = []

    def record(names, cfg, progress=None, rows=None):
        """Note the scenarios asked for (why: no fleet starts here)."""
        ran.append(list(names))
        return []
    monkeypatch.setattr(chaos, 'run_scenarios', record)
    assert cli.main(['chaos', '--out', str(tmp_path / 'out'), '--sync', 'gsp', '--scenario',
                     'flood,link-outage']) == 0
    assert ran == [['flood', 'link-outage']]
    # per robot (the fleet's: that times the robots): 10, and the others' pushes at 0.7 a
    # second through the outage, not Rog's 80 + 30 per second (a 90 s outage: 2,780 a robot)
    plan = chaos_link_outage.outage_iterations
    assert plan(chaos_fleet.ChaosConfig(sync='asgd', outage_s=90.0)) == 10 + 42
    assert plan(chaos_fleet.ChaosConfig(sync='gsp', outage_s=6.0, iterations=16)) == 16
    assert plan(chaos_fleet.ChaosConfig(sync='rog', outage_s=90.0)) == 80 + 30 * 90


class _Clock:
    """A ``time`` module whose clock moves only when slept on (why: no real outage here)."""

    def __init__(self):
        """Start at 1000 s."""
        self.mono = 1000.0

    def monotonic(self):
        """Return the clock."""
        return self.mono

    def sleep(self, seconds):
        """Advance the clock instead of sleeping."""
        self.mono += max(seconds, 1e-3)


@pytest.mark.parametrize('other_period_s, ok', [(1.0, True), (5.0, False)])
def test_a_push_link_outage_needs_the_others_pushing_through_it(monkeypatch, other_period_s,
                                                                ok):
    # a push system holds nobody for the victim: each other robot must push at least twice
    # inside a 6 s outage; the victim none inside it and again after it
    clock = _Clock()
    for module in (chaos_fleet, chaos_link_outage):
        monkeypatch.setattr(module, 'time', clock)
    start, outage = 8.0, 6.0
    epoch = clock.mono
    victim = [epoch + t for t in (2.0, 4.0, 6.0, 7.0, start + outage + 1.5)]
    other = [epoch + 1.0 + other_period_s * k for k in range(int(20 / other_period_s))]

    def first_times(rank):
        """Return the pushes of ``rank`` seen by now."""
        times = victim if rank == chaos_scenarios.VICTIM else other
        return [t for t in times if t <= clock.mono]
    fleet = types.SimpleNamespace(
        push=True, epoch_mono=epoch, codes=lambda: {},
        watch=types.SimpleNamespace(first_times=first_times),
        specs={'rog_server': types.SimpleNamespace(parameters={'sync': 'asgd'})})
    monkeypatch.setattr(chaos_link_outage, 'fleet_scenario', chaos_fakes.run_on(fleet))
    cfg = chaos_fleet.ChaosConfig(workers=3, sync='asgd', outage_s=outage)
    res = chaos_link_outage._link_outage_from(cfg, {'start_s': start, 'iterations': 16}, {})
    assert res['victim_iterations'] == {'before': 4, 'during': 0, 'after': 1}
    assert abs(res['recover_s'] - 1.5) < 1e-6
    n = 5 if ok else 1
    assert res['others_during_outage'] == {0: n, 2: n}
    assert res['problems'] == ([] if ok else [
        'workers [0, 2] pushed only {0: 1, 2: 1} times during the outage (at least 2 each)'])


def test_a_push_fleet_has_no_state_no_ledger_and_no_quorum(tmp_path):
    # the nodes refuse min_workers > 1 for a push system, and its engines hold no residual
    # for the ledger: with them, every push scenario's fleet was refused (its scenarios need
    # no state_dir: the one that kills the server is left out)
    from rog_ros.nodes import push_systems
    trace = str(tmp_path / 'trace.csv')
    chaos_fleet.write_trace(trace, 2, chaos_fleet.RATE_MBPS)
    cfg = chaos_fleet.ChaosConfig(out=str(tmp_path), sync='adacomp', workers=2)
    fleet = chaos_fleet.Fleet(cfg, str(tmp_path), trace)
    assert fleet.push
    for spec in fleet.specs.values():
        assert not spec.parameters.get('state_dir') and not spec.parameters.get('chaos_ledger')
    server = fleet.specs['rog_server'].parameters
    push_systems.check(server)          # what the server refuses before it starts
    rog = chaos_fleet.Fleet(chaos_fleet.ChaosConfig(out=str(tmp_path), workers=2),
                            str(tmp_path), trace)
    assert not rog.push and rog.specs['rog_server'].parameters['state_dir']


def test_a_forged_push_the_server_never_acknowledged_is_not_counted():
    # the flood publishes plausible unauthenticated pushes of real robots on the uplink: the
    # watch counted them, and a clean flood run read 7 pushes lost
    from rog_ros.protocol.messages import KIND_GRAD, SERVER, TransferAck
    watch = chaos_push.PushWatch.__new__(chaos_push.PushWatch)
    watch.workers, watch.pushes, watch.transfers, watch.acked = 2, {}, {}, set()
    watch.pulls, watch.pulled, watch.stops = {}, set(), set()
    watch._lock = chaos_push.threading.Lock()
    real = RowChunk(transfer_id=3, seq=0, sender=1, receiver=SERVER, kind=KIND_GRAD, clock=7,
                    incarnation=55)
    forged = RowChunk(transfer_id=9, seq=0, sender=0, receiver=SERVER, kind=KIND_GRAD,
                      clock=4, flags=1)
    # and an unauthenticated ack of that forgery (the flood forges acks too): no run, as it
    forged_ack = TransferAck(transfer_id=9, sender=SERVER, receiver=0, seq=0, final=True)
    for msg in (real, forged, forged_ack, TransferAck(transfer_id=3, sender=SERVER, receiver=1,
                                                      seq=0, target_incarnation=55)):
        watch._note(msg, 1.0)
    assert len(watch.pushes) == 1 and watch.confirmed() == {(1, 55, 7)}
    # what the scenarios wait on and time by: robot 1's push, none of robot 0's forgery
    assert (watch.count(1), watch.count(0)) == (1, 0) and watch.first_times(1) == [1.0]


class _Engine:
    """A push server engine that applies a push at clock 0 once and refuses anything else."""

    def __init__(self):
        """Start with nothing applied (why: the adapter counts what the engine did)."""
        self.i, self.rejects = 0, 0

    def on_message(self, msg, now):
        """Apply the first push at clock 0, count every other message refused (as MessageError)."""
        if isinstance(msg, RowChunk) and msg.clock == 0 and self.i == 0:
            self.i += 1
        else:
            self.rejects += 1
        return []

    def stats(self):
        """Return no figures of its own (why: only the adapter's are checked)."""
        return {}


class _Transfers:
    """Hand every message through whole (why: the adapter's counts, not the chunking)."""

    rejects = 0

    def on_message(self, msg, now):
        """Return the message, no acks."""
        return msg, []

    def take_revived(self):
        """Return no runs taken back."""
        return []

    def outgoing(self, actions, now):
        """Return the engine's actions as they are."""
        return actions


def test_the_server_counts_the_pushes_its_engine_refused_apart_from_other_messages():
    # the verdict tells a push taken from one refused (a timestamp gone): the engine's
    # rejects count any message, a flood's forged statuses too, which read as pushes lost
    from rog_ros.nodes.push_systems import ServerAdapter
    from rog_ros.protocol.messages import KIND_GRAD, SERVER, TransferAck
    srv = ServerAdapter(_Engine(), 2, 0.1, transfers=_Transfers())
    push = RowChunk(transfer_id=1, seq=0, sender=0, receiver=SERVER, kind=KIND_GRAD, clock=0,
                    incarnation=5)
    for msg in (push, push, TransferAck(transfer_id=1, sender=0, receiver=SERVER, seq=0)):
        srv.on_message(msg, 1.0)
    stats = srv.stats()
    assert srv.engine.rejects == 2
    assert (stats['pushes_received'], stats['pushes_refused'], stats['pushes_applied']) == (
        2, 1, 1)


def _bare_watch(transfers, acked, stops):
    """
    Return a ``PushWatch`` holding ``transfers`` and ``acked`` without joining DDS.

    Why: ``WatchUnion`` reads what each real watch holds (its lock, its maps), not a stand-in's.
    """
    import threading
    watch = object.__new__(chaos_push.PushWatch)
    watch.workers, watch._lock, watch.stops = 2, threading.Lock(), set(stops)
    watch.transfers = dict(transfers)
    watch.pushes = {(r, run, clock): 1.0 + clock for (r, run, _), clock in transfers.items()}
    watch.acked, watch.pulls, watch.pulled = set(acked), {}, set()
    return watch


def test_a_union_of_watches_counts_a_push_both_saw_once_and_still_finds_one_applied_twice(
        tmp_path):
    # robot 0: 10 pushes, all seen by the first watch; robot 1: 4 before the freeze (first
    # watch) and 6 after it, of which the first watch saw 2 again (found again late) and the
    # new one all 6, one of them acked only where the first watch heard it
    first = {(0, 1, 100 + c): c for c in range(10)}
    first.update({(1, 1, 100 + c): c for c in range(4)})
    first.update({(1, 1, 100 + c): c for c in (8, 9)})
    second = {(1, 1, 100 + c): c for c in range(4, 10)}
    acked_first = set(first) | {(1, 1, 104)}
    acked_second = set(second) - {(1, 1, 104)}
    union = chaos_push.WatchUnion([_bare_watch(first, acked_first, {0}),
                                   _bare_watch(second, acked_second, {1})])
    assert len(union.confirmed()) == 20 and union.stops == {0, 1}
    assert (union.count(0), union.count(1)) == (10, 10)
    assert union.first_times(1) == [1.0 + c for c in range(10)]
    _summary(tmp_path, 20, 0)
    res = {}
    assert chaos_push.push_verdict(res, union, str(tmp_path), workers=2, iterations=10) == []
    assert res['pushes']['seen'] == 20 and res['duplicated'] == 0 and res['lost'] == 0
    # one of robot 1's pushes both watches saw applied twice: still one too many
    _summary(tmp_path, 20, 0, received=21)
    problems = chaos_push.push_verdict(res, union, str(tmp_path), workers=2, iterations=10)
    assert res['duplicated'] == 1 and any('applied twice' in p for p in problems), problems
    # the first watch alone misses robot 1's last 4 pushes after the freeze: those would be
    # taken for pushes applied twice
    _summary(tmp_path, 20, 0)
    alone = _bare_watch(first, acked_first, {0, 1})
    chaos_push.push_verdict(res, alone, str(tmp_path), workers=2, iterations=10)
    assert res['duplicated'] == 4
