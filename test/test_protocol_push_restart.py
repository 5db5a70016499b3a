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
"""A push-system robot (or server) that restarts is taken back: its stale push is dropped."""

from collections import deque
import dataclasses
import logging

import pytest

from rog_ros.nodes.push_systems import ServerAdapter, STOP_PATIENCE_S, WorkerAdapter
from rog_ros.protocol.actions import Log, Send, StartCompute, Stopped
from rog_ros.protocol.events import describe
from rog_ros.protocol.messages import (
    FLAG_END, KIND_UPDATE, RowChunk, Schedule, SERVER, TransferAck)
from rog_ros.protocol.policies.adacomp import (
    AdaCompConfig, AdaCompServer, AdaCompWorker, push_entries)
from rog_ros.protocol.policies.gsp import GspConfig, GspNode, GspServer
from rog_ros.protocol.push_transfers import END_COPIES, PushTransfers
from rog_ros.protocol.revival import POKE_END_TIMEOUTS, REVIVE_AFTER_POKES
import torch

N = 3000
SYSTEMS = ('adacomp', 'asgd', 'comp-asgd', 'gsp')


def _pair(system, n_workers=2, budget=50):
    """Return a server engine of ``system`` and a function making its worker engines."""
    w0 = torch.linspace(-1.0, 1.0, N)
    if system == 'gsp':
        cfg = GspConfig(assignment=(0,) * n_workers, ssp_threshold=3)
        srv = GspServer(w0, n_workers, cfg, lr=0.1, momentum=0.0, max_pushes=budget)
        return srv, lambda rank: GspNode(rank, w0, [N // 2, N - N // 2], cfg)
    cfg = AdaCompConfig(mode=system, c=1.0 if system == 'asgd' else 0.05, alpha=0.1)
    srv = AdaCompServer(w0, n_workers, cfg, max_updates=budget)
    return srv, lambda rank: AdaCompWorker(rank, w0, [N // 2, N - N // 2], cfg)


def _grad(rank, step):
    """Return a gradient that differs per robot and step (so an applied push shows)."""
    return torch.sin(torch.arange(N, dtype=torch.float32) * (rank + 1) + step) * 0.01


def _push(wk, run, step):
    """Compute at ``wk``'s model and return its push, stamped with run ``run`` (as on the wire)."""
    (send,) = [a for a in wk.on_compute_done(_grad(wk.rank, step), 0.0)
               if isinstance(a, Send)]
    return dataclasses.replace(send.msg, incarnation=run)


def _applied(srv):
    """Return the updates the server applied (AdaComp's i, GSP's pushes)."""
    return srv.i if hasattr(srv, 'i') else srv.total_pushes


def _pulls(actions, rank):
    """Return the dense models among ``actions`` sent to ``rank``."""
    return [a.msg for a in actions if isinstance(a, Send) and a.dest == rank
            and isinstance(a.msg, RowChunk) and a.msg.kind == KIND_UPDATE]


def _cycle(srv, wk, run, step):
    """Push once from ``wk`` and hand it the answer; return the server's actions."""
    out = srv.on_message(_push(wk, run, step), 0.0)
    for model in _pulls(out, wk.rank):
        wk.on_message(model, 0.0)
    return out


def _trained(system):
    """
    Return a one-robot server, its worker maker and run 11 of robot 0 after 3 pushes.

    The restarts of the server or the robot below start from this trained state.
    """
    srv, worker = _pair(system, n_workers=1)
    wk = worker(0)
    for step in range(3):
        _cycle(srv, wk, run=11, step=step)
    return srv, worker, wk


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_restarted_robot_is_taken_back_and_its_stale_push_never_applied(system):
    # Robot 0 trained (the server holds it at a timestamp > 0), crashed and came back: a new
    # process, a new incarnation, clock 0, the starting model. Its first push (timestamp 0)
    # was refused ('pushes timestamp 0, but holds k') for ever and the robot never trained
    # again. Now the server drops that push (computed at a model it never handed that run),
    # says so in a worker_restart log, and sends the current model; the robot's next push is
    # applied. Nothing of the stale push reaches the model, and its earlier run's pushes
    # are refused from then on.
    srv, worker = _pair(system)
    old, other = worker(0), worker(1)
    for step in range(3):
        _cycle(srv, old, run=11, step=step)
        _cycle(srv, other, run=21, step=step)
    late = _push(old, 11, 99)                  # the crashed run's push, still on its way
    applied, model = _applied(srv), srv.model().clone()
    new = worker(0)                            # restarted: clock 0, the starting model
    out = srv.on_message(_push(new, 12, 0), 0.0)
    assert [a.name for a in out if isinstance(a, Log)] == ['worker_restart']
    (restart,) = [a for a in out if isinstance(a, Log)]
    assert restart.worker == 0 and restart.info['dropped_pushes'] == 1
    held = restart.info['expected']
    assert held > 0 and f'timestamp 0 (expected {held}) dropped unapplied' in \
        describe(restart)[1]
    assert _applied(srv) == applied and torch.equal(srv.model(), model)
    assert srv.rejects == 0
    (pull,) = _pulls(out, 0)
    assert torch.equal(torch.frombuffer(bytearray(pull.payload), dtype=torch.float32),
                       model)
    assert isinstance(new.on_message(pull, 0.0)[-1], StartCompute)
    # the robot's next push is computed at the current model and applied, once
    _cycle(srv, new, run=12, step=1)
    assert _applied(srv) == applied + 1 and srv.rejects == 0
    # the crashed run's push, arriving late, and a repeat of the dropped push: refused
    before = srv.model().clone()
    for msg in (late, _push(worker(0), 12, 0)):
        (log,) = srv.on_message(msg, 0.0)
        assert log.name == 'reject'
    assert _applied(srv) == applied + 1 and torch.equal(srv.model(), before)
    _cycle(srv, new, run=12, step=2)
    assert _applied(srv) == applied + 2


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_robot_restarted_before_any_push_was_applied_trains_on_at_once(system):
    # nothing of the earlier run was applied: the new run's first push is what a fresh
    # robot's is (computed at the starting model, timestamp 0) and is applied as one
    srv, worker = _pair(system, n_workers=1)
    lost = worker(0)
    _push(lost, 11, 0)                         # never arrived
    out = _cycle(srv, worker(0), run=12, step=0)
    assert _applied(srv) == 1 and srv.rejects == 0
    assert not [a for a in out if isinstance(a, Log) and a.name == 'worker_restart']


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_restarted_server_takes_its_robots_back(system):
    # A push system's server keeps nothing: restarted, it starts again at the starting
    # model, and a robot of its earlier run pushes at the timestamp it held there. That push
    # is dropped and answered with the new server's model; the robot trains on.
    _, _, wk = _trained(system)
    srv, _ = _pair(system, n_workers=1)        # the server restarted
    out = _cycle(srv, wk, run=11, step=3)
    assert [a.name for a in out if isinstance(a, Log)] == ['worker_restart']
    assert _applied(srv) == 0 and srv.rejects == 0 and len(_pulls(out, 0)) == 1
    _cycle(srv, wk, run=11, step=4)
    assert _applied(srv) == 1 and srv.rejects == 0


@pytest.mark.parametrize('system', SYSTEMS)
def test_without_incarnations_a_push_at_the_wrong_timestamp_is_still_refused(system):
    # the simulator's messages carry no incarnation (0): nothing there is a restart
    srv, worker = _pair(system, n_workers=1)
    wk = worker(0)
    _cycle(srv, wk, run=0, step=0)
    (log,) = srv.on_message(_push(worker(0), 0, 0), 0.0)
    assert log.name == 'reject' and srv.rejects == 1 and _applied(srv) == 1


@pytest.mark.parametrize('system', SYSTEMS)
def test_one_run_check_refuses_and_takes_runs_alike_in_every_push_server(system):
    # AdaComp's and GSP's servers share one check of a push's run and clock (_admit): a
    # new run's malformed first push is refused and makes no run current; the current run's
    # push at another clock is refused in the algorithm's terms; a new run's push at another
    # clock is taken as a restart, dropped and answered.
    srv, worker, wk = _trained(system)
    applied = _applied(srv)
    bad = dataclasses.replace(_push(worker(0), 12, 0), codec=7)
    (log,) = srv.on_message(bad, 0.0)
    assert log.name == 'reject' and 'unknown codec 7' in log.info['error']
    assert srv.runs[0] == 11 and srv.past_runs[0] == [] and _applied(srv) == applied
    (log,) = srv.on_message(_push(worker(0), 11, 0), 0.0)
    words = 'pushes iteration 0, expected 3' if system == 'gsp' else \
        'pushes timestamp 0, but holds 3'
    assert log.name == 'reject' and words in log.info['error'] and srv.rejects == 2
    out = srv.on_message(_push(worker(0), 12, 0), 0.0)
    assert [a.name for a in out if isinstance(a, Log)] == ['worker_restart']
    assert srv.runs[0] == 12 and srv.past_runs[0] == [11] and _applied(srv) == applied
    assert len(_pulls(out, 0)) == 1 and srv.rejoins == 1


def test_a_restarted_gsp_node_held_by_its_group_waits_for_its_release():
    # GSP holds a node's next model while it is more than the SSP threshold ahead of its
    # group: a restart does not let it out early; the new run gets the model on release
    srv, worker = _pair('gsp', n_workers=2)
    fast, slow = worker(0), worker(1)
    for step in range(4):                      # 4 pushes ahead of robot 1: held
        out = _cycle(srv, fast, run=11, step=step)
    assert not _pulls(out, 0) and 0 in srv.groups[0].held
    new = worker(0)
    out = srv.on_message(_push(new, 12, 0), 0.0)
    assert [a.name for a in out if isinstance(a, Log)] == ['worker_restart']
    assert not [a for a in out if isinstance(a, Send)]
    # the log said 'the current model sent', and none was: it follows on release
    assert describe(out[0])[1].endswith('dropped unapplied, the model of its group sent once '
                                        'its SSP bound lets it go')
    out = _cycle(srv, slow, run=21, step=0)    # robot 1 catches up by one: 0 is let go
    (pull,) = _pulls(out, 0)
    new.on_message(pull, 0.0)
    assert new.clock == srv.clock[0] == 4
    before = srv.total_pushes
    _cycle(srv, new, run=12, step=1)
    assert srv.total_pushes == before + 1 and srv.rejects == 0


def _entries(system):
    """Return the entries of ``system``'s sparse pushes in ``_pair``'s fleets (None: dense)."""
    if system in ('asgd', 'gsp'):
        return None
    srv, worker = _pair(system, n_workers=1)
    return push_entries(srv.cfg, worker(0).sizes)


def _push_server(engine, system, n_workers=1, **transfers):
    """Return ``engine`` behind its adapter and transfers, as every fleet here builds it."""
    return ServerAdapter(engine, n_workers, 0.1, PushTransfers(
        SERVER, N, chunk_bytes=4096, sparse_entries=_entries(system), n_workers=n_workers,
        **transfers))


def _robot(worker, system, rank, run):
    """
    Return run ``run`` of robot ``rank`` (engine from ``worker``) with its own transfers.

    Why: the restart tests drive robots as the nodes build them, in a fleet (ranks 0 and 1
    here): their transfers take the server's chunks and acks only.
    """
    return WorkerAdapter(worker(rank), PushTransfers(
        rank, N, chunk_bytes=4096, incarnation=run, sparse_entries=_entries(system),
        n_workers=2))


def _dead_run_push(worker, system):
    """Return the push robot 0's run 11 sent as it died: the late messages tests deliver."""
    dead = _robot(worker, system, 0, 11)
    dead.start(0.0)
    return [a.msg for a in dead.on_compute_done(_grad(0, 0), 0.0) if isinstance(a, Send)]


def _enqueue(q, src, actions):
    """Queue ``actions``' messages, and a computation of ``src``: how both relays hear a node."""
    for a in actions:
        if isinstance(a, Send):
            q.append((a.dest, a.msg))
        elif isinstance(a, StartCompute):
            q.append(('compute', src))


def _relay(srv, robots, restart, crash_at):
    """
    Deliver every message at once until nothing moves (a lossless, instant link).

    ``robots``: rank -> WorkerAdapter, its current run. Once the server has applied
    ``crash_at`` of robot 0's pushes, robot 0 is replaced by ``restart()``, a new run that
    starts again; what was on its way to robot 0 reaches the new run.
    """
    q = deque()

    for wk in robots.values():
        _enqueue(q, wk, wk.start(0.0))
    steps = 0
    while q:
        dest, item = q.popleft()
        if dest == 'compute':
            if robots[item.rank] is item:          # a crashed run computes nothing more
                _enqueue(q, item, item.on_compute_done(_grad(item.rank, steps), 0.0))
                steps += 1
        elif dest == SERVER:
            _enqueue(q, srv, srv.on_message(item, 0.0))
            if crash_at is not None and srv.clock[0] >= crash_at:
                crash_at = None
                robots[0] = restart()
                _enqueue(q, robots[0], robots[0].start(0.0))
        else:
            _enqueue(q, robots[dest], robots[dest].on_message(item, 0.0))


@pytest.mark.parametrize('system', SYSTEMS)
def test_through_the_transfers_a_restarted_robot_trains_again(system):
    # the same through the nodes' adapters and chunked transfers, which see incarnations:
    # AdaComp's and Comp-ASGD's sparse pushes too (before, one message with no
    # incarnation: the server could not tell the restarted robot's first push from a bad
    # one). The dead run's pull under way is dropped, the new run trains to the end.
    srv_engine, _ = _pair(system, budget=24)
    srv = _push_server(srv_engine, system, n_workers=2)
    worker = _pair(system)[1]
    robots = {r: _robot(worker, system, r, 11 + 10 * r) for r in range(2)}
    _relay(srv, robots, lambda: _robot(worker, system, 0, 12), crash_at=3)
    new = robots[0]
    assert new.transfers.incarnation == 12 and new.engine.stopped
    assert srv.worker_restarts == 1 and srv.rejects == 0 and srv.finished
    assert srv.transfers.dropped_pulls == 1 and new.transfers.foreign > 0
    assert srv.clock[0] > 3 + 1 and _applied(srv_engine) == 24
    # every push applied but the stale one, and those answered with the end of training
    assert 24 + 1 <= srv.pushes_received <= 24 + 1 + 2


def _timed_relay(srv, robots, held=(), release_at=0, restart=None, until=600.0,
                 lose_poke=False):
    """
    Deliver every message at once, ticking every node at its next wakeup, until done.

    ``robots``: rank -> WorkerAdapter. ``held``: messages to the server of a run that died
    (its push still on the way), delivered once the server has applied ``release_at``
    updates: late, after the robot's new run was heard. ``restart``: (k, make), the server
    dies once it applied k updates, its acks out and its pull under way lost, as is what
    was on its way to it (a push's second END), and ``make()`` starts again. ``lose_poke``:
    the first END of a robot's first poke is lost. Returns the virtual time it took and the
    last server.
    """
    q, now = deque(), 0.0

    for wk in robots.values():
        _enqueue(q, wk, wk.start(now))
    steps = 0
    while now < until and not srv.finished:
        while q:
            dest, item = q.popleft()
            if dest == 'compute':
                _enqueue(q, item, item.on_compute_done(_grad(item.rank, steps), now))
                steps += 1
            elif dest == SERVER:
                _enqueue(q, srv, srv.on_message(item, now))
                if held and _applied(srv.engine) >= release_at:
                    q.extend((SERVER, m) for m in held)
                    held = []
                if restart is not None and _applied(srv.engine) >= restart[0]:
                    q = deque(x for x in q if x[0] != SERVER and not (
                        isinstance(x[1], RowChunk) and x[1].kind == KIND_UPDATE))
                    srv, restart = restart[1](), None
            else:
                _enqueue(q, robots[dest], robots[dest].on_message(item, now))
        nodes = [srv] + list(robots.values())
        due = [t for t in (n.next_wakeup() for n in nodes) if t is not None]
        if not due:
            break
        now = max(now, min(due))
        for node in nodes:
            pokes = getattr(node.transfers, 'pokes', 0)
            out = node.on_tick(now)
            if lose_poke and node is not srv and node.transfers.pokes > pokes:
                first = next(a for a in out if isinstance(a, Send) and a.msg.flags & FLAG_END)
                out, lose_poke = [a for a in out if a is not first], False
            _enqueue(q, node, out)
    return now, srv


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_dead_runs_push_heard_after_its_successor_does_not_lock_the_live_run_out(system):
    # Robot 0's first run pushed, and died with that push still on the way; its new run
    # pushed and was heard first. Incarnations are random: the dead run's late push looked
    # like a newer restart, was taken as one (dropped, answered), and the live run's
    # pushes were then refused for good (the transfers dropped its chunks as superseded, the
    # engine refused them as an earlier run's): the robot repeated its END until it gave up.
    # Now the live run, which keeps repeating its END, is taken back (worker_revived, as
    # Rog's server takes back a live run it retired by mistake) and trains to the end.
    srv_engine, worker = _pair(system, n_workers=1, budget=12)
    srv = _push_server(srv_engine, system)
    held = _dead_run_push(worker, system)
    assert held and all(m.incarnation == 11 for m in held)
    live = _robot(worker, system, 0, 12)
    took, _ = _timed_relay(srv, {0: live}, held, release_at=2)
    assert srv.finished and live.engine.stopped and _applied(srv_engine) == 12
    assert srv.revivals == 1 and srv.transfers.superseded >= 1
    assert srv.worker_restarts == 1 and srv_engine.rejects == 0 and srv.rejects == 0
    assert took < 60.0                      # about 16 s of END repeats, then trained on


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_revived_run_is_taken_back_by_the_engine_and_nothing_is_applied_twice(system):
    # The engine alone cannot tell a live run from a dead one (random ids): the transfers
    # do, and tell it (revive). The run taken back pushes on as a new run would: applied
    # only at the timestamp the server holds for the robot, once.
    srv, worker = _pair(system, n_workers=1)
    live = worker(0)
    _cycle(srv, live, run=12, step=0)
    late = _push(worker(0), 11, 0)            # a dead run's first push, heard late
    assert [a.name for a in srv.on_message(late, 0.0) if isinstance(a, Log)] == \
        ['worker_restart']
    again = _push(live, 12, 1)                # the live run computed at what it pulled
    (log,) = srv.on_message(again, 0.0)
    assert log.name == 'reject' and _applied(srv) == 1
    srv.revive(0, 12)
    srv.revive(0, 99)                         # a run never known: nothing changes
    out = srv.on_message(again, 0.0)
    assert [a.name for a in out if isinstance(a, Log)] == ['push_done']
    assert _applied(srv) == 2 and srv.runs[0] == 12 and 11 in srv.past_runs[0]
    for model in _pulls(out, 0):
        live.on_message(model, 0.0)
    (log,) = srv.on_message(again, 0.0)       # the same push once more: refused
    assert log.name == 'reject' and _applied(srv) == 2
    (log,) = srv.on_message(late, 0.0)        # and the dead run's, retired again
    assert log.name == 'reject' and _applied(srv) == 2
    _cycle(srv, live, run=12, step=2)
    assert _applied(srv) == 3


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_robot_waiting_for_its_pull_is_taken_back_by_a_restarted_server(system):
    # The server applied robot 0's push (its final ack went out) and died before its pull
    # arrived; it started again with nothing (push systems keep no state). The robot,
    # waiting for that pull, sent nothing more: the new server never heard of it, and it
    # gave up at server_timeout (120 s). Now a robot whose settled push has no answer
    # repeats its END (every 4 END timeouts, as Rog's robots do): the new server, which
    # never had the push, answers with a final ack of nothing, the push goes again whole and
    # is dropped as a run new to that server (worker_restart); the robot trains on.
    def server():
        """Return a server with its transfers (a new run each call)."""
        return _push_server(_pair(system, n_workers=1, budget=8)[0], system)

    wk = _robot(_pair(system, n_workers=1)[1], system, 0, 11)
    first = server()
    took, srv = _timed_relay(first, {0: wk}, restart=(3, server))
    assert srv is not first and _applied(first.engine) == 3
    assert srv.finished and wk.engine.stopped and _applied(srv.engine) == 8
    assert srv.worker_restarts == 1 and srv.rejects == 0 and first.rejects == 0
    assert wk.transfers.pokes == 1 and wk.transfers.resent == 1
    assert 8.0 <= took < 30.0


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_robot_whose_poke_lost_an_end_is_taken_back_by_a_restarted_server_as_soon(system):
    # As above, and the END of the robot's first poke was lost (a lossy link): the new server
    # heard nothing, and the robot idled a poke interval more (8 s) till its next poke, where
    # every transfer's END goes twice (END_COPIES) so that a lost one costs no END timeout.
    # A poke goes END_COPIES times too: the copy reaches the new server, as fast as no loss.
    def server():
        """Return a server with its transfers (a new run each call)."""
        return _push_server(_pair(system, n_workers=1, budget=8)[0], system)

    took = []
    for lose in (False, True):
        wk = _robot(_pair(system, n_workers=1)[1], system, 0, 11)
        t, srv = _timed_relay(server(), {0: wk}, restart=(3, server), lose_poke=lose)
        assert srv.finished and wk.engine.stopped and _applied(srv.engine) == 8
        assert srv.worker_restarts == 1 and srv.rejects == 0
        took.append((t, wk.transfers.pokes))
    assert took[1] == took[0] and took[0][1] == 1 and END_COPIES == 2


@pytest.mark.parametrize('system', SYSTEMS)
def test_two_restarts_in_a_row_lose_one_gradient_each_and_apply_nothing_twice(system):
    # robot 0 restarts, and restarts again before its second run got the model it was sent:
    # each new run's first push is dropped, the last run trains on; the two dead runs'
    # pushes, late, are refused
    srv, worker, first = _trained(system)
    late = _push(first, 11, 3)
    second = _push(worker(0), 12, 0)
    applied = _applied(srv)
    for run, msg in ((12, second), (13, _push(worker(0), 13, 0))):
        out = srv.on_message(msg, 0.0)
        assert [a.name for a in out if isinstance(a, Log)] == ['worker_restart']
        assert len(_pulls(out, 0)) == 1 and srv.runs[0] == run
    assert _applied(srv) == applied and srv.rejoins == 2 and srv.past_runs[0] == [11, 12]
    third = worker(0)
    third.on_message(_pulls(out, 0)[0], 0.0)
    _cycle(srv, third, run=13, step=1)
    assert _applied(srv) == applied + 1
    for msg in (late, second):
        (log,) = srv.on_message(msg, 0.0)
        assert log.name == 'reject'
    assert _applied(srv) == applied + 1 and srv.rejects == 2


def _shared_rank_relay(srv, procs, until):
    """
    Run two processes given one rank against ``srv`` until virtual time ``until``.

    Messages go at once; a computation takes 1 s. Both processes get every message to
    their rank (they read the same topic), as two robots started with one ``rank:=`` do.
    Returns the server's actions with the time of each.
    """
    q, now, seen, steps = [], 0.0, [], 0

    def handle(src, actions):
        """Queue ``actions``' messages, and a computation of ``src`` done 1 s later."""
        for a in actions:
            if isinstance(a, Send):
                q.append((now, a.dest, a.msg))
            elif isinstance(a, StartCompute):
                q.append((now + 1.0, 'compute', src))

    for wk in procs:
        handle(wk, wk.start(now))
    while now < until and not srv.finished:
        due = [t for t in (n.next_wakeup() for n in [srv] + procs) if t is not None]
        first = min([t for t, _, _ in q] + due)
        now = max(now, first)
        ready = [x for x in q if x[0] <= now]
        q = [x for x in q if x[0] > now]
        for _, dest, item in ready:
            if dest == 'compute':
                handle(item, item.on_compute_done(_grad(0, steps), now))
                steps += 1
            elif dest == SERVER:
                out = srv.on_message(item, now)
                seen += [(now, a) for a in out]
                handle(srv, out)
            else:
                for wk in procs:
                    handle(wk, wk.on_message(item, now))
        for node in [srv] + procs:
            out = node.on_tick(now)
            if node is srv:
                seen += [(now, a) for a in out]
            handle(node, out)
    return seen


@pytest.mark.parametrize('system', SYSTEMS)
def test_two_processes_on_one_rank_are_reported_once_as_rog_s_server_does(system):
    # Two robots started with rank 0 (a copied launch line): since the server takes back a
    # replaced run that keeps speaking, each took the other back about every 16 s, and
    # nothing said why. As Rog's server, the push server now says once that two processes
    # run as that robot (duplicate_rank, a warning), from the second take-back on its
    # worker_revived logs say so, and summary.json lists the rank (duplicate_ranks).
    srv_engine, worker = _pair(system, n_workers=1, budget=10_000)
    srv = _push_server(srv_engine, system)
    procs = [_robot(worker, system, 0, run) for run in (11, 12)]
    seen = _shared_rank_relay(srv, procs, until=120.0)
    revived = [(t, a) for t, a in seen if isinstance(a, Log) and a.name == 'worker_revived']
    warned = [(t, a) for t, a in seen if isinstance(a, Log) and a.name == 'duplicate_rank']
    assert len(revived) >= 3 and srv.revivals == len(revived)
    (t_warn, warn), = warned
    assert t_warn == revived[1][0] and sorted(warn.info['runs']) == [11, 12]
    assert srv.duplicate_ranks == {0} and srv.transfers.duplicate_ranks == {0}
    assert [a.info['duplicate'] for _, a in revived] == [False, False] + [True] * (
        len(revived) - 2)
    level, words = describe(warn)
    assert level == logging.WARNING and 'two processes run as robot 0' in words
    assert srv.rejects == 0 and srv_engine.rejects == 0
    # exactly-once: each applied push moved the server on by one, never twice
    assert _applied(srv_engine) == sum(srv.clock) <= srv.pushes_received


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_single_restarted_robot_is_never_taken_for_two_processes(system):
    # a dead run's late push retires the live run once, which is taken back once: no warning
    srv_engine, worker = _pair(system, n_workers=1, budget=12)
    srv = _push_server(srv_engine, system)
    held = _dead_run_push(worker, system)
    live = _robot(worker, system, 0, 12)
    _timed_relay(srv, {0: live}, held, release_at=2)
    assert srv.finished and srv.revivals == 1 and not srv.duplicate_ranks


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_revived_run_whose_push_was_applied_gets_a_model_again(system):
    # The live run's push was applied and acknowledged, its pull under way (one chunk at a
    # time), when a late push of the robot's dead run, never heard before, made that dead run
    # the newest: the pull to the live run was dropped (it answered a run taken for gone).
    # The live run waits for its pull and repeats its END; after 16 s it is taken back
    # (worker_revived), but each END drew the server's cached final ack of the applied push
    # (delivered whole): nothing was sent again, and no pull came. The robot waited until
    # server_timeout. Now it gets a model and trains on, and that push is applied once.
    srv_engine, worker = _pair(system, n_workers=1, budget=6)
    srv = _push_server(srv_engine, system, window=1)
    held = _dead_run_push(worker, system)
    live = _robot(worker, system, 0, 12)
    live.start(0.0)
    q, now, computed = deque((SERVER, a.msg) for a in live.on_compute_done(_grad(0, 0), 0.0)
                             if isinstance(a, Send)), 0.0, 0
    while now < 100.0 and not srv.finished:
        while q:
            dest, msg = q.popleft()
            if dest == SERVER:
                before = _applied(srv_engine)
                out = srv.on_message(msg, now)
                if held and _applied(srv_engine) > before:
                    q.extend((SERVER, m) for m in held)      # the dead run's, late
                    held = []
            else:
                out = live.on_message(msg, now)
                computed += sum(isinstance(a, StartCompute) for a in out)
                for a in out:
                    if isinstance(a, StartCompute):
                        out = out + live.on_compute_done(_grad(0, computed), now)
            q.extend((a.dest, a.msg) for a in out if isinstance(a, Send))
        due = [t for t in (srv.next_wakeup(), live.next_wakeup()) if t is not None]
        if not due:
            break
        now = max(now, min(due))
        q.extend((a.dest, a.msg) for a in srv.on_tick(now) + live.on_tick(now)
                 if isinstance(a, Send))
    assert srv.revivals == 1 and computed >= 1, (now, live.transfers.pokes)
    assert srv.finished and live.engine.stopped and _applied(srv_engine) == 6
    # dropped unapplied: the dead run's push, and the live run's applied push sent again
    assert srv.worker_restarts == 2 and live.transfers.resent == 1
    assert srv_engine.rejects == 0 and srv.rejects == 0 and now < 60.0


def _server_pull(run, clock, at=0.0):
    """Return the chunks (the END twice) of server run ``run``'s pull of a model to robot 0."""
    model = RowChunk(transfer_id=clock, seq=0, sender=SERVER, receiver=0, kind=KIND_UPDATE,
                     clock=clock, flags=FLAG_END, codec=0,
                     payload=torch.full((N,), float(clock)).numpy().tobytes())
    server = PushTransfers(SERVER, N, chunk_bytes=4096, incarnation=run)
    return [a.msg for a in server.outgoing([Send(0, model)], at)]


def _stop(run, target=0):
    """Return server run ``run``'s stop order to robot 0 (``target``: the run of it meant)."""
    return Schedule(worker=0, clock=0, push_deadline_s=-1.0, stop=True, incarnation=run,
                    target_incarnation=target)


def _hear(robot, messages, now):
    """Hand ``robot`` every one of ``messages`` at ``now``; return all it answered."""
    out = []
    for msg in messages:
        out += robot.on_message(msg, now)
    return out


def _robot_that_heard_runs_101_then_202(system):
    """
    Return robot 0 (run 9) that took server run 101's pull, then run 202's, and its answer.

    Run 202 replaced 101 (``peer_runs`` [101, 202]): what 101 sends from then on is a
    replaced run's, late or a zombie's.
    """
    robot = _robot(_pair(system)[1], system, 0, 9)
    robot.start(0.0)
    _hear(robot, _server_pull(101, 1), 1.0)
    answered = _hear(robot, _server_pull(202, 2), 2.0)
    assert robot.transfers.peer_runs[SERVER] == [101, 202]
    return robot, answered


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_replaced_server_runs_late_stop_order_does_not_stop_the_robot(system):
    # the transfers pass a stop order on unchecked and the engine stops on any: a replaced
    # push server run's late stop order (a zombie's, a late copy) stopped the robot while
    # the live run trained on. It is set aside (no reject), as one for an earlier run of
    # the robot from a server run it does not know; the live run's stop order stops it and
    # counts as heard.
    robot, answered = _robot_that_heard_runs_101_then_202(system)
    assert any(isinstance(a, StartCompute) for a in answered)
    assert _hear(robot, [_stop(101), _stop(101, target=9), _stop(303, target=8)], 3.0) == []
    assert not robot.engine.stopped and robot.state == 'computing'
    assert robot.set_aside == 3 and robot.rejects == 0
    assert [type(a) for a in robot.on_message(_stop(202, target=9), 4.0)] == [Stopped]
    assert robot.engine.stopped
    # heard (the give-up timer): both pulls' 5 chunks each, the live run's stop order
    assert robot.server_heard == 5 + 5 + 1


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_stop_order_of_a_server_run_taken_back_stops_the_robot(system):
    # a run retired by mistake that keeps speaking is taken back (the live one again): its
    # stop order stops the robot, the run it displaced is the retired one
    robot, _ = _robot_that_heard_runs_101_then_202(system)
    late = _server_pull(101, 3)
    _hear(robot, late, 3.0)                                  # superseded
    _hear(robot, late[-1:], 30.0)                            # its END again: taken back
    assert robot.transfers.peer_runs[SERVER] == [202, 101] and robot.transfers.revived == 1
    assert _hear(robot, [_stop(202)], 31.0) == [] and not robot.engine.stopped
    assert [type(a) for a in robot.on_message(_stop(101), 32.0)] == [Stopped]
    assert robot.engine.stopped and robot.set_aside == 1 and robot.rejects == 0


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_push_servers_stop_order_names_its_run_and_the_robots(system):
    # the engines build stop orders with no run and the transfers pass them on as they are:
    # a robot could not tell a replaced server run's late stop order from its live run's
    srv_engine, worker = _pair(system, n_workers=1, budget=3)
    srv = _push_server(srv_engine, system, incarnation=101)
    robots = {0: _robot(worker, system, 0, 9)}
    got, take = [], robots[0].on_message
    robots[0].on_message = lambda msg, now: got.append(msg) or take(msg, now)
    _relay(srv, robots, None, crash_at=None)
    stops = [(s.incarnation, s.target_incarnation) for s in got if isinstance(s, Schedule)]
    assert robots[0].engine.stopped and srv.finished and stops == [(101, 9)]


@pytest.mark.parametrize('system', SYSTEMS)
@pytest.mark.parametrize('heard', [(), (202,), (101, 202)])
def test_the_live_servers_stop_order_for_an_earlier_run_of_the_robot_stops_it(system, heard):
    # a push server's stop order ends the whole fleet's training, whichever run of the robot
    # it names: set aside, the robot's new run waited for an answer the finished server,
    # gone, never sent. The live run's (or, while the robot knows none, any run's) stops it;
    # one from a server run it does not know, beside a live one it knows, is set aside.
    robot = _robot(_pair(system)[1], system, 0, 9)
    robot.start(0.0)
    for k, run in enumerate(heard):
        _hear(robot, _server_pull(run, k + 1), 1.0 + k)
    assert robot.transfers.peer_runs.get(SERVER, []) == list(heard)
    if heard:
        assert _hear(robot, [_stop(303, target=8)], 5.0) == [] and robot.set_aside == 1
        assert not robot.engine.stopped
    assert [type(a) for a in robot.on_message(_stop(202, target=8), 6.0)] == [Stopped]
    assert robot.engine.stopped and robot.rejects == 0
    assert robot.set_aside == (1 if heard else 0)


def test_a_gsp_robot_restarted_while_held_stops_on_the_finished_servers_stop_order():
    # robot 0, held by GSP (4 pushes ahead of robot 1), restarts; robot 1's push ends the
    # training and the server sends the held robot its stop, stamped with the run it knows
    # (11): the new run (12), still computing its first gradient, set it aside, and the
    # server, finished (every robot told), left before that run pushed (LEAVE_TIMEOUT_S)
    srv_engine, worker = _pair('gsp', n_workers=2, budget=5)
    srv = _push_server(srv_engine, 'gsp', n_workers=2)
    robots = {0: _robot(worker, 'gsp', 0, 11), 1: _robot(worker, 'gsp', 1, 21)}
    q, later, stops = deque(), [], []
    for wk in robots.values():
        _enqueue(q, wk, wk.start(0.0))
    step = 0
    while q or later:
        if not q:                          # robot 0 is held: it restarts, robot 1 goes on
            assert sorted(srv_engine.groups[0].held) == [0] and srv.clock == [4, 0]
            robots[0] = _robot(worker, 'gsp', 0, 12)
            robots[0].start(0.0)           # (its first computation does not end here)
            q.extend(later)
            later = []
        dest, item = q.popleft()
        if dest == 'compute':
            if item.rank == 1 and robots[0].transfers.incarnation == 11:
                later.append((dest, item))
            elif robots[item.rank] is item:
                _enqueue(q, item, item.on_compute_done(_grad(item.rank, step), 0.0))
                step += 1
        elif dest == SERVER:
            _enqueue(q, srv, srv.on_message(item, 0.0))
        else:
            if isinstance(item, Schedule):
                stops.append((dest, item.target_incarnation))
            _enqueue(q, robots[dest], robots[dest].on_message(item, 0.0))
    assert srv.finished and stops == [(0, 11), (1, 21)]
    assert robots[0].engine.stopped and robots[0].set_aside == 0
    # robot 1 took no model yet: the stop of a run it does not follow, the answer to its
    # push, is set aside until that run answered it alone for 16 s (_stop_held); the
    # repeats every END timeout meanwhile too, the one at 16 s stops it
    assert robots[1].stops_set_aside == 1 and not robots[1].engine.stopped
    for now in range(2, 18, 2):
        for a in srv.on_tick(float(now)):
            if isinstance(a, Send) and a.dest == 1:
                robots[1].on_message(a.msg, float(now))
        assert robots[1].engine.stopped == (now >= 16)
    assert robots[1].stops_set_aside == 8


@pytest.mark.parametrize('system', SYSTEMS)
def test_an_unstamped_stop_order_of_an_older_server_stops_a_robot_that_knows_its_run(system):
    # a server of the revision before stop orders were stamped sends them with no run (0):
    # the robot, which knows the server's run from its pulls, must stop on it all the same
    robot = _robot(_pair(system)[1], system, 0, 9)
    robot.start(0.0)
    _hear(robot, _server_pull(101, 1), 1.0)
    assert [type(a) for a in robot.on_message(_stop(0), 2.0)] == [Stopped]
    assert robot.engine.stopped and robot.set_aside == robot.rejects == 0


def _stops_in(actions):
    """Return the stop orders among ``actions``' sends (why: the tests lose them)."""
    return [a.msg for a in actions if isinstance(a, Send) and isinstance(a.msg, Schedule)
            and a.msg.stop]


def _until_stopped(srv, robot, lose, until=120.0, before_stop=()):
    """
    Run ``srv`` and its one robot on an instant link past the server's end; the times.

    Why: the stop order's path is what is tested, after the server finished (a finished
    server's node still serves while a robot is owed its stop). ``lose(msg, now, first)``
    tells whether a message, either way, is lost (``first``: when the server sent its first
    stop order, None before); ``before_stop``: messages handed to the robot just before the
    first stop order reaches it (lost or not). Each node is ticked at its next wakeup.
    Returns ``(when the robot's engine stopped, or None by until; first)``.
    """
    q, now, steps, first = deque(), 0.0, 0, None
    _enqueue(q, robot, robot.start(now))
    while now < until:
        while q:
            dest, item = q.popleft()
            if dest == 'compute':
                _enqueue(q, item, item.on_compute_done(_grad(item.rank, steps), now))
                steps += 1
                continue
            if dest != SERVER and isinstance(item, Schedule) and before_stop:
                _hear(robot, before_stop, now)
                before_stop = ()
            if lose(item, now, first):
                continue
            if dest == SERVER:
                out = srv.on_message(item, now)
                first = now if first is None and _stops_in(out) else first
                _enqueue(q, srv, out)
            else:
                _enqueue(q, robot, robot.on_message(item, now))
        if robot.engine.stopped:
            return now, first
        due = [t for t in (srv.next_wakeup(), robot.next_wakeup()) if t is not None]
        if not due:
            break
        now = max(now, min(due))
        _enqueue(q, srv, srv.on_tick(now))
        _enqueue(q, robot, robot.on_tick(now))
    return None, first


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_robot_whose_stop_order_was_lost_still_stops_within_an_end_timeout(system):
    # The engine sends each robot one stop order. Lost, the robot waited for a pull and
    # poked (its push's END, answered from the transfers' record: the engine never saw it),
    # nothing told it to stop, the server node left 5 s after its last stop order, and the
    # robot gave up at server_timeout (120 s). The server now repeats the stop every END
    # timeout (2 s) while the robot is owed it (it speaks, and has not said it stopped).
    srv = _push_server(_pair(system, n_workers=1, budget=4)[0], system, incarnation=101)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 9)
    stopped, first = _until_stopped(srv, robot, lambda msg, now, first: (
        isinstance(msg, Schedule) and now == first))
    assert first is not None and stopped == first + 2.0
    assert srv.finished and _applied(srv.engine) == 4 and srv.rejects == robot.rejects == 0
    assert srv.stops_repeated == 1 and srv.stats()['stops_repeated'] == 1
    # owed until it says it stopped (its status, through the node), or is silent a while
    assert srv.stops_owed(stopped) == [0] and srv.linger_s == 20.0
    srv.robot_left(0)
    assert srv.stops_owed(stopped) == []


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_robot_cut_off_as_it_was_stopped_is_stopped_by_its_first_end_after(system):
    # Both ways down for 30 s from the stop order on (an outage): the stop, its repeats,
    # the push's final ack and the robot's END repeats are lost, and the server stops
    # repeating the order once the robot has been silent for linger_s (20 s; a dead robot
    # cannot hold it). The robot's first END that arrives past the outage (a poke would do
    # the same) is answered with the stop at once.
    srv = _push_server(_pair(system, n_workers=1, budget=4)[0], system, incarnation=101)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 9)
    stopped, first = _until_stopped(srv, robot, lambda msg, now, first: (
        first is not None and now < first + 30.0))
    assert first is not None and stopped is not None
    assert first + 30.0 <= stopped <= first + 30.0 + 8.0
    assert _applied(srv.engine) == 4 and srv.rejects == robot.rejects == 0
    # 9 repeats in the 20 s it was owed (every 2 s), the 10th the answer to its END
    assert srv.stops_repeated == 10 and srv.stops_owed(stopped) == [0]


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_waiting_robots_pokes_keep_its_stop_order_coming_past_the_linger(system):
    # every stop order lost for 25 s (the downlink's Schedules; acks pass): the robot,
    # its push acknowledged, pokes every 8 s, and each poke keeps it owed (linger_s, 20 s,
    # from its last word): the first repeat past the loss stops it
    srv = _push_server(_pair(system, n_workers=1, budget=4)[0], system, incarnation=101)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 9)
    stopped, first = _until_stopped(srv, robot, lambda msg, now, first: (
        isinstance(msg, Schedule) and now < first + 25.0))
    assert stopped == first + 26.0 and robot.transfers.pokes == 3
    assert srv.stops_repeated == 13 and _applied(srv.engine) == 4


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_dead_robot_owed_its_stop_order_holds_the_server_a_bounded_time(system):
    # robot 0 dies as it is sent its stop order: nothing of it is heard again; the server
    # repeats the order while it is owed, linger_s (20 s) from the last word, then no more
    srv = _push_server(_pair(system, n_workers=1, budget=4)[0], system, incarnation=101)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 9)
    stopped, first = _until_stopped(srv, robot, lambda msg, now, first: first is not None,
                                    until=200.0)
    assert stopped is None and first is not None and not robot.engine.stopped
    assert srv.stops_owed(first + 19.9) == [0] and srv.stops_owed(first + 20.0) == []
    assert srv.stops_repeated == 9 and srv.next_wakeup() is None


def _stray_ack(run, target):
    """Return a final ack of server run ``run`` to robot 0's run ``target`` (transfer 1)."""
    return TransferAck(transfer_id=1, sender=SERVER, receiver=0, seq=1, final=True,
                       incarnation=run, target_incarnation=target)


def _stop_after_stray_ack(system, target):
    """
    Run server run 101 and robot 0 (run 9) to the end, a stray ack reaching the robot late.

    The ack (of dead server run 202, to robot run ``target``) comes just before the stop
    order. Return (server, robot, the time it stopped or None, the first stop's time).
    """
    srv = _push_server(_pair(system, n_workers=1, budget=4)[0], system, incarnation=101)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 9)
    stopped, first = _until_stopped(srv, robot, lambda msg, now, first: False,
                                    before_stop=[_stray_ack(202, target)])
    return srv, robot, stopped, first


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_dead_server_runs_late_ack_to_an_earlier_robot_run_retires_nothing(system):
    # A dead server run's late ack (run 202, to an earlier run of the robot, 8) reaches the
    # robot after the live run (101) was heard. The transfers noted its run before they
    # saw it was not for this run of the robot: a run never heard, it became the newest
    # and retired the live run, whose acks never take it back, and the robot set the live
    # run's stop order aside (taken only once it had kept coming 16 s). Not noted now:
    # the live run stays the live one and its first stop order stops the robot.
    srv, robot, stopped, first = _stop_after_stray_ack(system, target=8)
    assert robot.transfers.peer_runs[SERVER] == [101]
    assert first is not None and stopped == first and srv.stops_repeated == 0
    assert robot.set_aside == 0 and robot.rejects == 0 and _applied(srv.engine) == 4


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_robot_that_retired_its_live_server_run_by_mistake_stops_on_its_stop(system):
    # A dead server run's late ack (run 202, to this run of the robot: it answered a chunk
    # of it, then died) reaches the robot after the live run (101) was heard: a run never
    # heard, it became the newest, and the live run was retired. Its acks never take it
    # back (only chunks do, and a finished server sends none), so the robot set its stop
    # order aside for good, poked until server_timeout and gave up. A retired run's stop
    # order that keeps coming (the live server repeats it while the robot pokes, and the
    # newest run answers none of the pokes) was taken as the live run's after 16 s. The
    # retired run is the one the robot follows (it took its models) and it answered the
    # robot's latest push (_answers_us): its first stop order stops the robot.
    srv, robot, stopped, first = _stop_after_stray_ack(system, target=9)
    assert robot.transfers.peer_runs[SERVER] == [101, 202]     # the live run retired
    assert robot.following == 101
    assert stopped is not None and stopped == first
    assert robot.set_aside == 0 and robot.rejects == 0 and _applied(srv.engine) == 4


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_replaced_server_runs_late_stop_copies_are_set_aside_still(system):
    # the late copies of a replaced run's stop order come within a network delay: however
    # many, they do not stop the robot while the live run trains on
    robot, _ = _robot_that_heard_runs_101_then_202(system)
    assert _hear(robot, [_stop(101, target=9)] * 5, 3.0) == []
    assert _hear(robot, [_stop(101, target=9)] * 5, 3.5) == []
    assert not robot.engine.stopped and robot.set_aside == 10


def _zombie_stops(robot, start, until, each=None):
    """
    Hand ``robot`` a finished zombie server run's (101) stop order every END timeout.

    Why: a replaced server run alive after all repeats its stop while the robot speaks;
    ``each(now)``, if given, runs the live side at every tick (the robot's pokes and the
    live run's answers). Returns when the robot's engine stopped, or None by ``until``.
    """
    now = start
    while now < until:
        _hear(robot, [_stop(101, target=9)], now)
        if robot.engine.stopped:
            return now
        if each is not None:
            each(now)
        now += 2.0
    return None


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_zombie_server_runs_repeated_stop_does_not_stop_a_computing_robot(system):
    # A replaced server run alive after all (101: a second process, its link back, its
    # training finished) repeats its stop order every END timeout. Taken once it kept
    # coming 16 s (1e2c604: the live run retired by mistake), it stopped the robot, which
    # computes for the live run (202) a long iteration, while that run trained on.
    robot, _ = _robot_that_heard_runs_101_then_202(system)
    assert _zombie_stops(robot, 3.0, 40.0) is None
    assert not robot.engine.stopped and robot.set_aside == 19 and robot.rejects == 0
    assert [type(a) for a in robot.on_message(_stop(202, target=9), 41.0)] == [Stopped]


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_zombie_server_runs_repeated_stop_does_not_stop_a_robot_the_live_run_holds(system):
    # The robot pushed to the live run (202), which holds its pull back (GSP holds a robot
    # ahead of its group; here its pull is lost): the robot pokes every poke interval, and
    # the live run answers each poke (the final ack, from its record). A zombie's (101)
    # stop order repeated meanwhile is not the live run's: set aside, however long.
    srv = _push_server(_pair(system, n_workers=1)[0], system, incarnation=202)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 9)
    robot.start(0.0)
    _hear(robot, _server_pull(101, 1), 1.0)

    def relay(out, now):
        """Hand the server the robot's sends and the robot the server's acks (pulls lost)."""
        for a in [a for a in out if isinstance(a, Send) and a.dest == SERVER]:
            answers = srv.on_message(a.msg, now)
            _hear(robot, [b.msg for b in answers if isinstance(b, Send)
                          and not isinstance(b.msg, RowChunk)], now)

    relay(robot.on_compute_done(_grad(0, 0), 2.0), 2.0)
    assert robot.transfers.peer_runs[SERVER] == [101, 202] and SERVER in robot.transfers.settled
    assert _zombie_stops(robot, 3.0, 60.0, lambda now: (
        relay(robot.on_tick(now), now), srv.on_tick(now))) is None
    assert not robot.engine.stopped and robot.set_aside == 29 and robot.rejects == 0
    assert robot.transfers.pokes >= 7
    assert [type(a) for a in robot.on_message(_stop(202, target=9), 61.0)] == [Stopped]


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_zombie_server_runs_repeated_stop_does_not_stop_a_robot_whose_live_run_fell_silent(
        system):
    # The robot follows server run 202 (it took its model), which replaced 101, pushed to it
    # and was answered (the push's final ack); then 202 fell silent (its link down, or dead:
    # the robot's give-up timer is for that). A zombie (101: a second server process, its
    # training finished) repeats its stop order every END timeout: once 202 had answered
    # none of the robot's pokes for 16 s, the robot stopped on the zombie's order, a run it
    # no longer follows. As a Rog robot, it obeys the run it follows: set aside, however long.
    srv = _push_server(_pair(system, n_workers=1)[0], system, incarnation=202)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 9)
    robot.start(0.0)
    _hear(robot, _server_pull(101, 1), 1.0)
    _hear(robot, _server_pull(202, 2), 2.0)                 # the run it follows: its model
    for a in robot.on_compute_done(_grad(0, 0), 3.0):
        if isinstance(a, Send) and a.dest == SERVER:
            _hear(robot, [b.msg for b in srv.on_message(a.msg, 3.0) if isinstance(b, Send)
                          and isinstance(b.msg, TransferAck)], 3.0)   # 202's pull: lost
    assert robot.transfers.peer_runs[SERVER] == [101, 202] and SERVER in robot.transfers.settled
    assert _zombie_stops(robot, 5.0, 80.0, lambda now: robot.on_tick(now)) is None
    assert not robot.engine.stopped and robot.set_aside == 38 and robot.rejects == 0
    assert robot.transfers.pokes >= 8
    assert [type(a) for a in robot.on_message(_stop(202, target=9), 81.0)] == [Stopped]


def _ack_to_run(run, tid):
    """Return robot 0's (run 9) ack of chunk 0 of server run ``run``'s transfer ``tid``."""
    return TransferAck(transfer_id=tid, sender=0, receiver=SERVER, seq=0, incarnation=9,
                       target_incarnation=run)


@pytest.mark.parametrize('system', SYSTEMS)
@pytest.mark.parametrize('newer', ['live', 'late burst'])
def test_a_replaced_server_run_stops_repeating_its_stop_once_a_newer_run_serves_the_fleet(
        system, newer):
    # Server run 101 finished and told robot 0 to stop; every stop order is lost on the way,
    # and the robot pokes. Server run 202 took over (101 was taken for dead): the robot
    # follows 202 (its acks name it) and sets 101's stops aside. 101, a zombie, repeated its
    # stop every END timeout while the robot spoke, and its node served on for
    # STOP_PATIENCE_S (60 s). Acks of our robots to another server run that keep coming (over
    # REPLACED_AFTER_END_TIMEOUTS END timeouts) say we were replaced: no robot is owed a
    # stop any more, none goes again, and the node leaves. A dead run's late acks, all at
    # once, say nothing of the kind.
    srv = _push_server(_pair(system, n_workers=1, budget=4)[0], system, incarnation=101)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 9)
    stopped, first = _until_stopped(srv, robot, lambda msg, now, first: (
        isinstance(msg, Schedule) and first is not None), until=10.0)
    assert stopped is None and srv.finished and srv.stops_owed(10.0) == [0]
    sent, now, acks = [], 10.0, 0
    while now < 40.0:
        if newer == 'live' or now == 10.0:
            for _ in range(3):
                acks += 1
                said = srv.on_message(_ack_to_run(202, acks), now)
                assert [a for a in said if not isinstance(a, Log)] == []   # (said once)
        sent += _stops_in(srv.on_tick(now))
        for a in robot.on_tick(now):             # its pokes keep it owed, answered or not
            if isinstance(a, Send) and a.dest == SERVER:
                sent += _stops_in(srv.on_message(a.msg, now))
        now += 1.0
    assert not robot.engine.stopped and robot.transfers.pokes >= 4
    if newer == 'live':
        # (no wakeup: no robot spoke since its last ack to 202, at 39 s; _replaced_gone)
        assert len(sent) <= 2 and srv.stops_owed(now) == [] and srv.next_wakeup() is None
        assert srv.transfers.replaced_by == 202
        return
    assert len(sent) >= 14 and srv.stops_owed(now) == [0] and srv.transfers.replaced_by == 0


def _finished_server_owing_robot_0_its_stop(system):
    """Return server run 101, finished, whose stop orders to robot 0 (run 9) were all lost."""
    srv = _push_server(_pair(system, n_workers=1, budget=4)[0], system, incarnation=101)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 9)
    stopped, _ = _until_stopped(srv, robot, lambda msg, now, first: (
        isinstance(msg, Schedule) and first is not None), until=10.0)
    assert stopped is None and srv.finished and srv.stops_owed(10.0) == [0]
    assert srv.transfers.peer_runs[0][-1] == 9
    return srv


@pytest.mark.parametrize('system', SYSTEMS)
@pytest.mark.parametrize('stale', [5, 'heard before'])
def test_a_stale_process_answering_another_server_run_leaves_the_live_server_serving(
        system, stale):
    # The live server run (101) finished and owes robot 0 (run 9) its stop. An old process
    # of rank 0 (run 5: a robot restarted while its old one still runs) answers the pulls of
    # another server process (202, a zombie that still trains): its acks name 202. Counted as
    # robot 0's, they made 101 take itself for replaced (3 acks over 4 s), owe no stop, and
    # leave: the live robot 0, its stop lost, waited server_timeout and exited 1. Only the
    # acks of the run the server takes as robot 0's live one count.
    srv = _finished_server_owing_robot_0_its_stop(system)
    if stale == 'heard before':            # the server knew run 5, then run 9 replaced it
        runs = srv.transfers.peer_runs[0]
        runs.insert(len(runs) - 1, 5)
    for k, now in enumerate(range(10, 40)):
        assert srv.on_message(TransferAck(transfer_id=k + 1, sender=0, receiver=SERVER, seq=0,
                                          incarnation=5, target_incarnation=202),
                              float(now)) == []
    # (its robot silent here: owed while it spoke within the linger, 20 s)
    assert srv.transfers.replaced_by == 0 and srv.stops_owed(11.0) == [0]
    assert srv.stats()['replaced_by'] == 0


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_server_run_that_finds_itself_replaced_says_so_once(system):
    # The helper of bb96b75 left a server that took itself for replaced silent: it stopped
    # repeating its stop orders and left with nothing in its log, events.csv or summary.json
    # to say why. It now logs server_replaced once (a warning) and writes replaced_by.
    srv = _finished_server_owing_robot_0_its_stop(system)
    logs = []
    for k, now in enumerate(range(10, 30)):
        logs += [a for a in srv.on_message(_ack_to_run(202, k + 1), float(now))
                 if isinstance(a, Log)]
    assert [(a.name, a.worker, a.info['run'], a.info['acks']) for a in logs] == [
        ('server_replaced', SERVER, 202, 5)]
    level, text = describe(logs[0])
    assert level == logging.WARNING and 'replaced by server run 202' in text
    assert 'sends no stop order' in text and '5 acks over 4.0 s' in text
    assert srv.stats()['replaced_by'] == 202 and srv.stops_owed(11.0) == []


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_server_run_that_knows_it_was_replaced_stops_no_robot_run_new_to_it(system):
    # A zombie (101, finished) that knew it was replaced (its robots answer 202) repeated
    # no stop order, but its engine still answered each push with one: robot 0 restarted
    # (run 10, new to every server run) pushed, and 101's stop, of a server run it had no
    # reason to set aside, stopped it while 202 trained on. A replaced run sends no stop.
    srv = _finished_server_owing_robot_0_its_stop(system)
    for k, now in enumerate(range(10, 15)):
        srv.on_message(_ack_to_run(202, k + 1), float(now))
    assert srv.transfers.replaced_by == 202
    fresh = _robot(_pair(system, n_workers=1)[1], system, 0, 10)
    fresh.start(20.0)
    answers = []
    for a in fresh.on_compute_done(_grad(0, 0), 21.0):
        if isinstance(a, Send) and a.dest == SERVER:
            answers += [b for b in srv.on_message(a.msg, 21.0) if isinstance(b, Send)]
    assert srv.transfers.peer_runs[0][-1] == 10 and srv.pushes_received >= 1
    assert _stops_in(answers) == [] and _stops_in(srv.on_tick(22.0)) == []
    _hear(fresh, [b.msg for b in answers], 21.0)
    assert not fresh.engine.stopped and fresh.rejects == 0


def _live_server_202(system):
    """Return server run 202, live (its budget far off), that has served no robot yet."""
    return _push_server(_pair(system, n_workers=1, budget=50)[0], system, incarnation=202)


@pytest.mark.parametrize('system', SYSTEMS)
@pytest.mark.parametrize('first', ['live', 'zombie'])
def test_a_zombie_not_yet_replaced_stops_no_fresh_robot_the_live_run_answers(system, first):
    # Server run 101, finished, has not yet heard 4 s of our robots' acks to run 202 (the
    # live one): it does not know it was replaced, and its engine answers any push with its
    # stop order. Robot 0 restarted (run 10, new to both) pushes; both runs ack its chunks,
    # 202 answers with a pull, 101 with its stop, in either order. A robot obeys a stop
    # only from the server run it follows: the one whose model it took (202), or, none
    # taken yet, while another run heard spoke within two poke intervals, none. It stopped
    # on 101's order before (whichever run it heard first was the newest) while 202 trained.
    zombie = _finished_server_owing_robot_0_its_stop(system)
    live = _live_server_202(system)
    fresh = _robot(_pair(system, n_workers=1)[1], system, 0, 10)
    fresh.start(20.0)
    answers = {101: [], 202: []}
    for a in fresh.on_compute_done(_grad(0, 0), 21.0):
        if isinstance(a, Send) and a.dest == SERVER:
            for run, srv in ((101, zombie), (202, live)):
                answers[run] += [b.msg for b in srv.on_message(a.msg, 21.0)
                                 if isinstance(b, Send)]
    assert len([m for m in answers[101] if isinstance(m, Schedule) and m.stop]) == 1
    acks = {run: [m for m in said if isinstance(m, TransferAck)] for run, said in answers.items()}
    rest = {run: [m for m in said if not isinstance(m, TransferAck)]
            for run, said in answers.items()}
    order = (202, 101) if first == 'live' else (101, 202)
    out = []
    for run in order:                   # (each run's acks of the push before its answer)
        out += _hear(fresh, acks[run] + (rest[run] if first == 'live' else []), 21.5)
    if first == 'zombie':               # both runs ack the push, then 101's stop comes
        out += _hear(fresh, rest[101] + rest[202], 21.5)
    assert not fresh.engine.stopped and fresh.following == 202
    assert fresh.stops_set_aside == 1 and fresh.rejects == 0
    assert any(isinstance(a, StartCompute) for a in out)
    # the run it follows stops it at once
    assert [type(a) for a in fresh.on_message(_stop(202, target=10), 23.0)] == [Stopped]


@pytest.mark.parametrize('system', SYSTEMS)
@pytest.mark.parametrize('took', ['no model', "202's model"])
def test_a_zombies_ack_and_stop_ahead_of_the_live_runs_first_ack_stop_no_robot(system, took):
    # Server run 101 (finished, a zombie not yet replaced, new to robot 0's run 10) acks
    # the robot's push and answers it with its stop, all of it before the live run 202's
    # first ack of that push: a robot that had heard no other run had nothing to tell 202
    # from 101, and one that took 202's model had no answer of 202 to its latest push (101,
    # heard last, the newest); both stopped on 101's order while 202 trained on. The first
    # stop order of a run the robot does not follow is set aside: 202's acks and pull come
    # meanwhile, 101's next stops (every END timeout) are set aside as any zombie's, and
    # the robot trains on with 202.
    zombie = _finished_server_owing_robot_0_its_stop(system)
    live = _live_server_202(system)
    fresh = _robot(_pair(system, n_workers=1)[1], system, 0, 10)
    fresh.start(20.0)
    if took != 'no model':
        _hear(fresh, _server_pull(202, 7), 20.5)
        assert fresh.following == 202
    answers = {101: [], 202: []}
    for a in fresh.on_compute_done(_grad(0, 0), 21.0):
        if isinstance(a, Send) and a.dest == SERVER:
            for run, srv in ((101, zombie), (202, live)):
                answers[run] += [b.msg for b in srv.on_message(a.msg, 21.0)
                                 if isinstance(b, Send)]
    assert len(_stops_in([Send(0, m) for m in answers[101]])) == 1
    assert _hear(fresh, answers[101], 21.2) == [] and not fresh.engine.stopped
    assert fresh.stops_set_aside == 1 and fresh.transfers.peer_runs[SERVER][-1] == 101
    out = _hear(fresh, answers[202], 21.5)
    # (a robot that took 202's model sets 202's pull aside here: 101, heard last, is the
    # newest run, and 202 is taken back once it keeps speaking, revival.RevivalWatch)
    assert fresh.following == 202
    assert any(isinstance(a, StartCompute) for a in out) == (took == 'no model')
    for now in (23.0, 25.0, 27.0):              # 101 repeats its stop every END timeout
        assert _hear(fresh, _stops_in(zombie.on_tick(now)), now) == []
    assert not fresh.engine.stopped and fresh.stops_set_aside == 4 and fresh.rejects == 0
    # the run it follows stops it at once
    assert [type(a) for a in fresh.on_message(_stop(202, target=10), 28.0)] == [Stopped]


def _zombie_ahead_of_a_slow_live_run(system, took, first, delay, until=60.0, noted=()):
    """
    Run robot 0's new run (10) beside zombie 101 (finished) and live run 202, until ``until``.

    Why: a zombie repeats its stop every END timeout while the robot speaks; the live run's
    messages may come ``delay`` s behind (its link). The robot pushes at 21 s and pokes;
    101 answers at once, 202 ``delay`` s later (``first`` 'live': 202 at once, 101 0.5 s
    later). ``took``: whether the robot took 202's model before its push. Returns
    ``(when the robot stopped or None, robot, zombie)``.
    """
    zombie = _finished_server_owing_robot_0_its_stop(system)
    live = _live_server_202(system)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 10)
    robot.start(20.0)
    for run in noted:                   # (runs that ordered it to stop at 1 s, silent since)
        robot._note_stop(run, 1.0)
    if took != 'no model':
        _hear(robot, _server_pull(202, 7), 20.5)
        assert robot.following == 202
    lag = {101: delay if first == 'live' else 0.0, 202: 0.0 if first == 'live' else delay}
    due = []                                     # (when, message) for the robot

    def relay(actions, now):
        """Hand each server the robot's sends; queue their answers by their lag."""
        for a in actions:
            if isinstance(a, Send) and a.dest == SERVER:
                for run, srv in ((101, zombie), (202, live)):
                    due.extend((now + lag[run], b.msg) for b in srv.on_message(a.msg, now)
                               if isinstance(b, Send) and b.dest == 0)

    relay(robot.on_compute_done(_grad(0, 0), 21.0), 21.0)
    now = 21.0
    while now < until:
        for run, srv in ((101, zombie), (202, live)):
            due.extend((now + lag[run], a.msg) for a in srv.on_tick(now)
                       if isinstance(a, Send) and a.dest == 0)
        ready = sorted((m for m in due if m[0] <= now), key=lambda m: m[0])
        due = [m for m in due if m[0] > now]
        for _, msg in ready:
            out = robot.on_message(msg, now)
            if robot.engine.stopped:
                return now, robot, zombie
            relay([a for a in out if isinstance(a, Send)], now)
        now += 0.5
        relay(robot.on_tick(now), now)
    return None, robot, zombie


@pytest.mark.parametrize('system', SYSTEMS)
@pytest.mark.parametrize('took', ['no model', "202's model"])
@pytest.mark.parametrize('first', ['zombie', 'live'])
def test_a_zombies_repeated_stops_ahead_of_a_slow_live_run_stop_no_robot(system, took, first):
    # Zombie 101 (finished, not yet replaced, new to robot 0's run 10) acks the robot's push
    # and answers it with its stop, and repeats it every END timeout (2 s); the live run
    # 202's messages come 5 s behind. _first_stop_held set aside only the zombie's first
    # stop: its second, at 23 s, still ahead of every word of 202, stopped the robot while
    # 202 trained on. A stop of a run the robot does not follow is obeyed only once that
    # run has answered the robot's latest push alone for two poke intervals (16 s).
    stopped, robot, zombie = _zombie_ahead_of_a_slow_live_run(system, took, first, 5.0)
    assert stopped is None and not robot.engine.stopped and robot.rejects == 0
    # (the zombie repeats while the robot speaks: 9 or more repeats, 5 or more set aside)
    assert robot.following == 202 and zombie.stops_repeated >= 9
    assert robot.stops_set_aside >= 5 and robot.stops_set_aside == robot.set_aside
    # the run it follows stops it at once
    assert [type(a) for a in robot.on_message(_stop(202, target=10), 61.0)] == [Stopped]


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_run_that_ordered_a_stop_long_ago_is_forgotten(system):
    # Robot 0's run 10 was ordered to stop by server run 77 at 1 s (a zombie since told it
    # was replaced, or one that died), silent since. WorkerAdapter._stopping never forgot a
    # run: 77 kept _stop_held from holding zombie 101's stops ahead of the slower live run
    # (every run that ordered a stop had to be 101), and 101's first stop stopped the robot
    # at 21 s while 202 trained on. A run silent (no stop, no answer) for two poke intervals
    # (16 s) is forgotten.
    stopped, robot, _ = _zombie_ahead_of_a_slow_live_run(
        system, 'no model', 'zombie', 5.0, noted=(77,))
    assert stopped is None and not robot.engine.stopped and robot.rejects == 0
    assert robot.following == 202 and 77 not in robot._stopping and 101 in robot._stopping


def _zombie_back_ahead_of_the_live_run(system, zombie_back, live_back, until=90.0):
    """
    Run robot 0's new run (10) beside zombie 101 (finished) and live run 202, both links flapping.

    The robot pushes at 21 s; 101 hears it, acks it and answers with its stop, then its link
    is down from 22 s to ``zombie_back``; 202's link is down from before the push to
    ``live_back``. Each hears the robot's pokes and repeats its own while its link is up.
    Return (when the robot stopped or None, the robot).
    """
    zombie = _finished_server_owing_robot_0_its_stop(system)
    live = _live_server_202(system)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 10)
    robot.start(20.0)
    servers = ((101, zombie), (202, live))
    due, computing = [], []

    def up(run, now):
        return now < 22.0 or now >= zombie_back if run == 101 else now >= live_back

    def relay(actions, now):
        """Hand each server whose link is up the robot's sends; queue their answers."""
        for a in actions:
            if isinstance(a, StartCompute):
                computing.append(now + 0.5)
            if isinstance(a, Send) and a.dest == SERVER:
                for run, srv in servers:
                    if up(run, now):
                        due.extend(b.msg for b in srv.on_message(a.msg, now)
                                   if isinstance(b, Send) and b.dest == 0)

    relay(robot.on_compute_done(_grad(0, 0), 21.0), 21.0)
    now, pushes = 21.0, 1
    while now < until:
        for run, srv in servers:
            out = [a.msg for a in srv.on_tick(now) if isinstance(a, Send) and a.dest == 0]
            if up(run, now):
                due.extend(out)
        ready, due = due, []
        for msg in ready:
            out = robot.on_message(msg, now)
            if robot.engine.stopped:
                return now, robot
            relay(out, now)
        for t in [t for t in computing if t <= now]:
            computing.remove(t)
            pushes += 1
            relay(robot.on_compute_done(_grad(0, pushes), now), now)
        now += 0.5
        relay(robot.on_tick(now), now)
    return None, robot


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_zombies_stop_after_its_link_was_down_is_held_as_a_first_one(system):
    # Zombie 101 answered robot 0's push (21 s) with its stop, held; both links then went
    # down, 101's until 45 s, the live run 202's until 50 s. _note_stop forgot runs silent
    # 16 s except the one it noted: 101's return kept its first stop (21 s), so _stop_held
    # counted its 16 s from then and its stop at 45 s stopped the robot, which 202 served
    # 5 s later. A run silent 16 s is forgotten, and its next stop held as a first one.
    stopped, robot = _zombie_back_ahead_of_the_live_run(system, 45.0, 50.0)
    assert stopped is None and not robot.engine.stopped and robot.rejects == 0
    assert robot.following == 202 and robot.stops_set_aside >= 3
    first, last = robot._stopping[101]
    assert 45.0 <= first < 46.0 and last >= 50.0


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_zombie_ahead_of_the_live_run_by_more_than_two_poke_intervals_stops_the_robot(system):
    # The bound of that rule: the live run's messages 20 s behind the zombie's (its link
    # down that long), the zombie's stop, alone for 16 s, is obeyed: 16 s after its first.
    stopped, robot, _ = _zombie_ahead_of_a_slow_live_run(system, 'no model', 'zombie', 20.0)
    assert stopped == 37.0 and robot.following == 0


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_zombies_stop_crossing_the_robots_next_push_stops_no_robot(system):
    # Robot 0's run 10 took 202's model, then heard zombie 101 (finished, not yet replaced:
    # 101 the newest run), which acked its push at 21 s and answered with its stop, set
    # aside; it computes on 202's next model and pushes again at 22.9 s. 101's repeat (due
    # at 23 s) left before that push reached it: it comes before any answer to the push, so
    # no rule held it (_stop_held only a run that answered the latest push; _not_followed
    # only once 202 answered it; _retired never the newest run) and it stopped the robot
    # while 202 trained on. A run that answered this run of ours is held as one that
    # answered its latest push.
    zombie = _finished_server_owing_robot_0_its_stop(system)
    live = _live_server_202(system)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 10)

    def relay(actions, now, to=(101, 202)):
        """Hand the servers ``to`` the robot's sends; return their answers to it by run."""
        out = {101: [], 202: []}
        for a in actions:
            if isinstance(a, Send) and a.dest == SERVER:
                for run, srv in ((101, zombie), (202, live)):
                    if run in to:
                        out[run] += [b.msg for b in srv.on_message(a.msg, now)
                                     if isinstance(b, Send) and b.dest == 0]
        return out

    robot.start(20.0)
    relay(_hear(robot, _server_pull(202, 7), 20.5), 20.5)
    answers = relay(robot.on_compute_done(_grad(0, 0), 21.0), 21.0)
    relay(_hear(robot, answers[101], 21.2), 21.2)           # 101's ack and stop first
    relay(_hear(robot, answers[202], 21.5), 21.5)
    relay(_hear(robot, _server_pull(202, 8, 22.0), 22.0), 22.0)
    assert robot.following == 202 and robot.transfers.peer_runs[SERVER] == [202, 101]
    assert robot.stops_set_aside == 1 and not robot.engine.stopped
    assert zombie.transfers.replaced_by == 0 and zombie.stops_owed(23.0) == [0]
    push = robot.on_compute_done(_grad(0, 1), 22.9)         # (on its way to the servers)
    repeat = _stops_in(zombie.on_tick(23.0))
    assert len(repeat) == 1
    assert _hear(robot, repeat, 23.05) == [] and not robot.engine.stopped
    assert robot.stops_set_aside == 2 and robot.rejects == 0
    answers = relay(push, 23.1)
    _hear(robot, answers[101] + answers[202], 23.2)
    assert not robot.engine.stopped
    # the run it follows stops it at once
    assert [type(a) for a in robot.on_message(_stop(202, target=10), 24.0)] == [Stopped]


@pytest.mark.parametrize('system', SYSTEMS)
@pytest.mark.parametrize('lost', [False, True])
def test_a_fresh_robot_stops_on_a_server_run_that_answers_it_only_with_its_stop(system, lost):
    # The legitimate side of that rule: server run 101 finished (restored after its end,
    # or the live run past the budget) and robot 0's new run (10) pushes to it: 101 acks
    # the push and answers with its stop, and no other run speaks. Its stop orders are set
    # aside until 101 answered the push alone for two poke intervals (16 s: a zombie's
    # stops ahead of a slower live run are not obeyed before); its repeat then (every END
    # timeout) stops the robot, 16 s after the first (2 s until 2026-12-08). Its first
    # copy lost (``lost``), 16 s after the repeat that came first.
    srv = _finished_server_owing_robot_0_its_stop(system)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 10)
    robot.start(20.0)
    first_lost, stopped, now = lost, None, 21.0
    out = robot.on_compute_done(_grad(0, 0), now)
    while now < 60.0 and stopped is None:
        answers = [b.msg for a in out if isinstance(a, Send) and a.dest == SERVER
                   for b in srv.on_message(a.msg, now) if isinstance(b, Send)]
        answers += [b.msg for b in srv.on_tick(now) if isinstance(b, Send)]
        if lost and _stops_in([Send(0, m) for m in answers]):
            answers = [m for m in answers if not (isinstance(m, Schedule) and m.stop)]
            lost = False
        if any(isinstance(c, Stopped) for c in _hear(robot, answers, now)):
            stopped = now
        now += 1.0
        out = robot.on_tick(now)
    assert stopped == (39.0 if first_lost else 37.0) and robot.rejects == 0
    assert robot.stops_set_aside == 8


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_fresh_robot_that_heard_two_runs_and_took_no_model_waits_for_the_live_ones(system):
    # Robot run 10 heard server runs 202 and then 101 (their acks of its push: 101 the
    # newest) and took no model yet: 101's stop order, while 202 spoke within two poke
    # intervals (16 s), is set aside. 202 silent that long while the robot waits for its
    # push's answer (dead), and 101's stops alone as long (16 s from its first, 22 s):
    # 101, the only run that speaks, is obeyed, as a lone server is.
    zombie = _finished_server_owing_robot_0_its_stop(system)
    live = _live_server_202(system)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 10)
    robot.start(20.0)
    acks = {101: [], 202: []}
    for a in robot.on_compute_done(_grad(0, 0), 21.0):
        if isinstance(a, Send) and a.dest == SERVER:
            for run, srv in ((101, zombie), (202, live)):
                acks[run] += [b.msg for b in srv.on_message(a.msg, 21.0)
                              if isinstance(b, Send) and isinstance(b.msg, TransferAck)]
    _hear(robot, acks[202] + acks[101], 21.0)
    assert robot.transfers.peer_runs[SERVER] == [202, 101] and robot.following == 0
    assert SERVER in robot.transfers.settled
    assert _hear(robot, [_stop(101, target=10)], 22.0) == [] and not robot.engine.stopped
    assert _hear(robot, [_stop(101, target=10)], 36.0) == [] and not robot.engine.stopped
    assert _hear(robot, [_stop(101, target=10)], 37.5) == [] and not robot.engine.stopped
    assert robot.stops_set_aside == 3
    assert [type(a) for a in robot.on_message(_stop(101, target=10), 38.0)] == [Stopped]


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_followed_run_that_acked_the_push_and_fell_silent_yields_to_the_new_run(system):
    # Robot 0 follows 202, which acked its push and died before its answer; a restarted
    # server (303) acks the robot's pokes and answers with its stop: set aside while 202
    # may be live (it answered within two poke intervals, 16 s), then obeyed.
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 9)
    robot.start(0.0)
    _hear(robot, _server_pull(202, 1), 1.0)
    live = _live_server_202(system)
    for a in robot.on_compute_done(_grad(0, 0), 2.0):
        if isinstance(a, Send) and a.dest == SERVER:
            _hear(robot, [b.msg for b in live.on_message(a.msg, 2.0) if isinstance(b, Send)
                          and isinstance(b.msg, TransferAck)], 2.0)       # then 202 died
    assert SERVER in robot.transfers.settled and robot.following == 202
    robot.transfers.peer_runs[SERVER].append(303)         # (303's acks of the pokes)
    assert _hear(robot, [_stop(303, target=9)], 10.0) == [] and robot.stops_set_aside == 1
    assert [type(a) for a in robot.on_message(_stop(303, target=9), 18.0)] == [Stopped]


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_robot_stops_on_a_restarted_servers_stop_if_the_run_it_followed_answered_no_push(
        system):
    # The other side of the rule: robot 0 (run 9) follows server run 202 (its model), which
    # dies; a restarted server (303, finished: restored past the budget) acks its push and
    # answers with its stop. 202 answered none of that push: not followed any more, and
    # 303's stop stops the robot once 303 answered that push alone for 16 s.
    srv = _finished_server_owing_robot_0_its_stop(system)
    srv.transfers.incarnation = 303
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 9)
    robot.start(0.0)
    _hear(robot, _server_pull(202, 1), 1.0)
    assert robot.following == 202
    stopped, now = None, 2.0
    out = robot.on_compute_done(_grad(0, 0), now)
    while now < 40.0 and stopped is None:
        for a in out:
            if isinstance(a, Send) and a.dest == SERVER:
                if any(isinstance(b, Stopped)
                       for b in _hear(robot, [b.msg for b in srv.on_message(a.msg, now)
                                              if isinstance(b, Send)], now)):
                    stopped = now
        for b in srv.on_tick(now):
            if isinstance(b, Send) and any(isinstance(c, Stopped)
                                           for c in robot.on_message(b.msg, now)):
                stopped = now
        now += 1.0
        out = robot.on_tick(now)
    assert robot.transfers.peer_runs[SERVER][-1] == 303
    # (its first stop order reaches the robot at 12 s here, the answer to its push: set
    # aside, as a zombie's would be, until 303 answered that push alone for 16 s
    # (_stop_held); its repeat at 28 s stops it: 14 s until 2026-12-08)
    assert stopped == 28.0, (robot.set_aside, robot.stops_set_aside)
    assert robot.set_aside == 8 and robot.stops_set_aside == 8
    assert robot.rejects == 0


def _two_zombies_and_a_live_run(system, live_stops_at=None, live_dies_at=None, until=90.0):
    """
    Run robot 0 (run 10, new to all) with live server run 202 and zombies 101 and 303.

    Both zombies are finished and owe robot 0 its stop: each acks the robot's pushes,
    answers them with its stop and repeats it every END timeout (2 s), and never hears the
    robot's acks to 202 (which would tell it it was replaced). Their links come back at
    30 s (they hear and say nothing before): the robot, which took 202's model at its first
    push (21 s), hears 101 and 303 after it (303 the newest run). 303's messages come 1 s
    after 101's (their stops alternate, one a second), 202's 1.2 s after 101's (its link
    slower). The robot computes each model it is given (0.5 s) and pushes again. From
    ``live_stops_at`` 202 answers each push with its stop only and repeats it every 2 s (its
    budget reached); from ``live_dies_at`` it says nothing, and server run 404 restored from
    202's checkpoint past its end (finished, owing the robot its stop) answers, 0.5 s late.
    Return (when the robot stopped or None, the robot, its pushes).
    """
    zombie_a = _finished_server_owing_robot_0_its_stop(system)
    zombie_b = _finished_server_owing_robot_0_its_stop(system)
    zombie_b.transfers.incarnation = 303
    restored = _finished_server_owing_robot_0_its_stop(system)
    restored.transfers.incarnation = 404
    live = _live_server_202(system)
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 10)
    robot.start(20.0)
    lag = {202: 1.2, 101: 0.0, 303: 1.0, 404: 0.5}
    servers = ((101, zombie_a), (303, zombie_b), (202, live), (404, restored))
    due, computing, pushes, last_live_stop = [], [], [0], [None]
    dies = until if live_dies_at is None else live_dies_at

    def speaks(run, now):
        return {101: now >= 30.0, 303: now >= 30.0, 202: now < dies, 404: now >= dies}[run]

    def live_stops(now):
        return live_stops_at is not None and now >= live_stops_at

    def relay(actions, now):
        """Hand each server the robot's sends; queue their answers by their lag."""
        for a in actions:
            if isinstance(a, StartCompute):
                computing.append(now + 0.5)
            if not (isinstance(a, Send) and a.dest == SERVER):
                continue
            for run, srv in servers:
                if run == 202 and live_stops(now):
                    if getattr(a.msg, 'flags', 0) & FLAG_END:
                        due.append((now + lag[run], _stop(202, target=10)))
                        last_live_stop[0] = now
                elif speaks(run, now) and (
                        run == 202 or getattr(a.msg, 'target_incarnation', 0) != 202):
                    due.extend((now + lag[run], b.msg) for b in srv.on_message(a.msg, now)
                               if isinstance(b, Send) and b.dest == 0)

    pushes[0] += 1
    relay(robot.on_compute_done(_grad(0, 0), 21.0), 21.0)
    now = 21.0
    while now < until:
        for run, srv in servers:
            if run == 202 and live_stops(now):
                if last_live_stop[0] is None or now - last_live_stop[0] >= 2.0:
                    due.append((now + lag[run], _stop(202, target=10)))
                    last_live_stop[0] = now
            elif speaks(run, now):
                due.extend((now + lag[run], a.msg) for a in srv.on_tick(now)
                           if isinstance(a, Send) and a.dest == 0)
        ready = sorted((m for m in due if m[0] <= now), key=lambda m: m[0])
        due = [m for m in due if m[0] > now]
        for _, msg in ready:
            out = robot.on_message(msg, now)
            if robot.engine.stopped:
                return now, robot, pushes[0]
            relay(out, now)
        for t in [t for t in computing if t <= now]:
            computing.remove(t)
            pushes[0] += 1
            relay(robot.on_compute_done(_grad(0, pushes[0]), now), now)
        now += 0.5
        relay(robot.on_tick(now), now)
    return None, robot, pushes[0]


@pytest.mark.parametrize('system', SYSTEMS)
def test_two_zombies_alternating_stops_stop_no_robot_the_live_run_answers(system):
    # Two zombies (101, 303: finished server processes that do not know they were
    # replaced) answer robot 0's pushes with their stops and repeat them every 2 s,
    # alternating, while the live run 202 (its link slower) answers each push. _stop_held
    # held a stop only while every run that had ordered one was that run, and _stopping
    # never forgot a run: 303's first stop, which came after 101's while the robot waited
    # for 202's answer, stopped it at 32 s while 202 trained on. A stop of a run the robot
    # does not follow is set aside while the run it follows answered within two poke
    # intervals (16 s), whatever other runs ordered.
    stopped, robot, pushes = _two_zombies_and_a_live_run(system, until=80.0)
    assert stopped is None and not robot.engine.stopped and robot.rejects == 0
    # (one push every 2.9 s: 202's answer 1.2 s late each way, 0.5 s to compute)
    assert robot.following == 202 and pushes >= 20 and robot.stops_set_aside >= 40
    assert sorted(robot._stopping) == [101, 303]


@pytest.mark.parametrize('system', SYSTEMS)
def test_two_zombies_alternating_stops_leave_the_live_runs_stop_obeyed(system):
    # The legitimate side: 202's budget reached at 50 s, it answers the push then in
    # flight with its stop: the run the robot follows, obeyed as it comes (1.2 s late).
    stopped, robot, _ = _two_zombies_and_a_live_run(system, live_stops_at=50.0)
    assert stopped is not None and 51.0 <= stopped <= 52.0 and robot.rejects == 0


@pytest.mark.parametrize('system', SYSTEMS)
def test_two_zombies_leave_a_restored_servers_stop_obeyed_once_the_live_run_died(system):
    # 202 dies at 50 s; a server restored from its checkpoint past its end (run 404)
    # answers the robot's pokes with its stop. Held while 202 may be live (it answered
    # within two poke intervals), then obeyed: 16 s after 202's last answer, 18 s at most
    # (the next repeat).
    stopped, robot, _ = _two_zombies_and_a_live_run(system, live_dies_at=50.0)
    assert robot.transfers.peer_runs[SERVER][-1] == 404 and robot.following == 202
    last = robot._said[202]
    assert 48.0 <= last <= 51.2 and last + 16.0 <= stopped <= last + 18.0, (last, stopped)


def test_a_finished_servers_stop_patience_outlasts_a_robots_hold_of_its_stop():
    # A robot that follows another server run holds a finished run's stop for two poke
    # intervals (16 s) after the later of its first stop and its followed run's last
    # word, and obeys at the next repeat or poke's answer: 24 s at most. It pokes every
    # poke interval while it holds, so the server keeps it owed (linger_s) and must wait
    # for it at its end: STOP_PATIENCE_S (60 s) is that wait's bound, above the hold's.
    srv = _finished_server_owing_robot_0_its_stop('asgd')
    end = srv.transfers.end_timeout_s
    hold = REVIVE_AFTER_POKES * POKE_END_TIMEOUTS * end
    poke = POKE_END_TIMEOUTS * end
    assert (hold, poke) == (16.0, 8.0) and srv.linger_s > poke
    assert STOP_PATIENCE_S > hold + poke


def _replaced_by_202(system):
    """Return finished server run 101 (robot 0 owed its stop) replaced by run 202 at 14 s."""
    srv = _finished_server_owing_robot_0_its_stop(system)
    for k, now in enumerate(range(10, 15)):
        srv.on_message(_ack_to_run(202, k + 1), float(now))
    assert srv.transfers.replaced_by == 202
    return srv


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_replaced_server_run_follows_a_newer_run_that_serves_the_fleet(system):
    # replaced_by never moved once set: robot 0's acks to a third server run (303, started
    # after 202 died) left 101 naming 202. Proved as 202 was (over 4 s), it names 303.
    srv = _replaced_by_202(system)
    logs = []
    for k, now in enumerate(range(15, 22)):
        logs += srv.on_message(_ack_to_run(303, k + 10), float(now))
    assert srv.transfers.replaced_by == 303 and srv.stats()['replaced_by'] == 303
    assert [(a.name, a.info['run']) for a in logs] == [('server_replaced', 303)]


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_replaced_server_run_serves_again_once_the_run_that_replaced_it_is_gone(system):
    # replaced_by never reset: the run that replaced 101 (202) died, no robot acked it any
    # more, and 101 (the live one again) owed no robot its stop and sent none for good.
    # Unacked two leases (20 s, RETIRE_LEASES) while our robots speak to us (robot 0 pokes
    # from 15 s), it is taken for gone: 101 serves again (its stop owed and repeated), and
    # says so once.
    srv = _replaced_by_202(system)
    assert srv.transfers.next_wakeup() is None      # (no robot spoke since its last ack)
    srv.on_message(_ack_to_run(101, 98), 15.0)      # robot 0 speaks to us (202 is dead)
    assert srv.transfers.next_wakeup() == 15.0 + 20.0
    logs, sent = [], []
    for now in range(15, 35):
        assert srv.transfers.replaced_by == 202
        logs += [a for a in srv.on_tick(float(now)) if isinstance(a, Log)]
    for now in range(35, 40):
        out = srv.on_tick(float(now))
        logs += [a for a in out if isinstance(a, Log)]
        sent += _stops_in(out)
    assert srv.transfers.replaced_by == 0 and srv.stats()['replaced_by'] == 0
    assert [(a.name, a.info['run']) for a in logs] == [('server_not_replaced', 202)]
    level, text = describe(logs[0])
    assert level == logging.WARNING and 'server run 202' in text
    # robot 0 pokes (its live run): owed its stop again, answered with it
    poke = _ack_to_run(101, 99)
    srv.on_message(poke, 40.0)
    assert srv.stops_owed(40.0) == [0]


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_replaced_server_run_stays_replaced_while_the_live_run_holds_a_robot_30_s(system):
    # Server run 101 (finished, a zombie: robot 0's stop owed) was replaced by 202 (both
    # robots' acks to it until 14 s). 202 (GSP) then holds robot 0, too far ahead of robot
    # 1, which computes 30 s (a slow Jetson) on 202's model: robot 0 pokes every 8 s, acks
    # nothing; robot 1 says nothing but its status. 101 took 202 for gone 20 s after robot
    # 0's first poke (server_not_replaced at 35 s), served again and sent its stop orders
    # while 202 trained on. A robot whose last word was an ack to 202 and whose status
    # still comes computes on 202's model: 101 stays replaced. Once robot 1 pushes too and
    # both only poke (202 died), 20 s of that end it as before.
    engine, worker = _pair(system, n_workers=2, budget=1)
    srv = _push_server(engine, system, n_workers=2, incarnation=101)
    srv.transfers.peer_runs[1] = [21]
    robot = _robot(worker, system, 0, 9)
    robot.start(0.0)
    answers = [b for a in robot.on_compute_done(_grad(0, 0), 0.0)
               if isinstance(a, Send) and a.dest == SERVER for b in srv.on_message(a.msg, 0.0)]
    assert _stops_in(answers) and srv.stop_sent[0] and srv.stops_owed(1.0) == [0]   # (lost)
    for r in (0, 1):         # (101 sent both robots models before: their writer ledgers)
        srv.transfers._peer(r)
    for k, now in enumerate(range(10, 15)):
        srv.on_message(_ack_to_run(202, k + 1), float(now))
        srv.on_message(dataclasses.replace(_ack_to_run(202, k + 1), sender=1, incarnation=21),
                       float(now))
    assert srv.transfers.replaced_by == 202
    logs, sent, poke = [], [], 50
    for now in range(15, 46):
        if now % 8 == 7:                                   # robot 0, held, pokes
            poke += 1
            sent += _stops_in(srv.on_message(_ack_to_run(101, poke), float(now)))
        srv.robot_alive(1, 21, float(now))               # robot 1 computes (its status)
        srv.robot_alive(0, 9, float(now))                # (robot 0's: it waits, it poked)
        out = srv.on_tick(float(now))
        logs += [a for a in out if isinstance(a, Log)]
        sent += _stops_in(out)
    assert srv.transfers.replaced_by == 202 and srv.stats()['replaced_by'] == 202
    assert logs == [] and sent == [] and srv.stops_owed(45.0) == []
    # robot 1 pushes (a word to us, no ack to 202); both only poke from now on: 202 is gone
    srv.on_message(dataclasses.replace(_ack_to_run(101, 90), sender=1, incarnation=21), 46.0)
    for now in range(46, 70):
        if now % 8 == 7:
            poke += 1
            srv.on_message(_ack_to_run(101, poke), float(now))
        srv.robot_alive(1, 21, float(now))
        logs += [a for a in srv.on_tick(float(now)) if isinstance(a, Log)]
    assert [(a.name, a.info['run']) for a in logs] == [('server_not_replaced', 202)]
    assert srv.transfers.replaced_by == 0
    # (a hung computation's statuses: test_a_hung_robots_statuses_hold_a_replaced_run_only_...)


def _replaced_by_202_robot_0_owed(system, robot_1_acks):
    """
    Return server run 101 (finished, robot 0's stop owed), replaced by 202 at 14 s.

    Robot 0 (run 9) acks 202 every second from 10 s to 14 s, robot 1 (run 21) at the
    seconds of ``robot_1_acks`` only (its model's acks: it computes on it since).
    """
    engine, worker = _pair(system, n_workers=2, budget=1)
    srv = _push_server(engine, system, n_workers=2, incarnation=101)
    srv.transfers.peer_runs[1] = [21]
    robot = _robot(worker, system, 0, 9)
    robot.start(0.0)
    answers = [b for a in robot.on_compute_done(_grad(0, 0), 0.0)
               if isinstance(a, Send) and a.dest == SERVER for b in srv.on_message(a.msg, 0.0)]
    assert _stops_in(answers) and srv.stop_sent[0]
    for r in (0, 1):
        srv.transfers._peer(r)
    for k, now in enumerate(range(10, 15)):
        if now in robot_1_acks:
            srv.on_message(dataclasses.replace(_ack_to_run(202, k + 1), sender=1,
                                               incarnation=21), float(now))
        srv.on_message(_ack_to_run(202, k + 1), float(now))
    assert srv.transfers.replaced_by == 202
    return srv


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_robot_that_acked_the_live_run_before_it_replaced_us_holds_it_too(system):
    # As above, but robot 1 (the GSP group's slowest) acked 202's model at 10 s only, and
    # 101 took itself for replaced at 14 s on robot 0's acks: robot 1's acks, counted
    # before, were not its last word to 101 as served_by_replacing knew it, so 101 took
    # 202 for gone 20 s after robot 0's first poke (35 s) and sent its stops again.
    srv = _replaced_by_202_robot_0_owed(system, robot_1_acks=(10,))
    logs, sent, poke = [], [], 50
    for now in range(15, 46):
        if now % 8 == 7:                                   # robot 0, held, pokes
            poke += 1
            sent += _stops_in(srv.on_message(_ack_to_run(101, poke), float(now)))
        srv.robot_alive(1, 21, float(now))               # robot 1 computes (its status)
        out = srv.on_tick(float(now))
        logs += [a for a in out if isinstance(a, Log)]
        sent += _stops_in(out)
    assert srv.transfers.replaced_by == 202 and logs == [] and sent == []


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_restored_replaced_run_keeps_the_acks_its_robots_gave_the_live_run_before(system):
    # As above (robot 1 acked 202's model at 10 s, then computes), but 101 is checkpointed
    # at 15 s and restored (run 303: the transfers' state is not kept, so it proves the
    # replacement anew from robot 0's acks to 202, 16-20 s). replaced_acked was not in the
    # checkpoint: robot 1's ack was forgotten, and 20 s after robot 0's first poke (23 s)
    # the restored run took 202 for gone (server_not_replaced at 43 s) and sent its stops.
    srv = _replaced_by_202_robot_0_owed(system, robot_1_acks=(10,))
    sd = srv.state_dict()
    assert sd['replaced_acked'] == [[0, 202, 14.0], [1, 202, 10.0]]
    old = {k: v for k, v in sd.items() if k != 'replaced_acked'}   # (an older checkpoint)
    restored = _push_server(_pair(system, n_workers=2, budget=1)[0], system, n_workers=2,
                            incarnation=303)
    restored.load_state_dict(old)
    assert restored.transfers.replaced_acked == {}
    for bad in ([[0, 202]], [[0, 202, 'x']], 5):
        restored = _push_server(_pair(system, n_workers=2, budget=1)[0], system, n_workers=2,
                                incarnation=303)
        with pytest.raises(ValueError, match='replaced_acked'):
            restored.load_state_dict(dict(sd, replaced_acked=bad))
        assert restored.transfers.replaced_acked == {} and not any(restored.stop_sent)
    restored = _push_server(_pair(system, n_workers=2, budget=1)[0], system, n_workers=2,
                            incarnation=303)
    restored.load_state_dict(sd)
    assert restored.transfers.replaced_acked == {0: (202, 14.0), 1: (202, 10.0)}
    assert restored.transfers.replaced_by == 0 and restored.stop_sent[0]
    restored.transfers.peer_runs.update({0: [9], 1: [21]})     # (its robots heard again)
    for r in (0, 1):
        restored.transfers._peer(r)
    for k, now in enumerate(range(16, 21)):
        restored.on_message(_ack_to_run(202, k + 1), float(now))
    assert restored.transfers.replaced_by == 202
    # (an ack later than now, a clock of another boot, is not counted)
    assert not restored.transfers.served_by_replacing(1, 9.0, 600.0)
    logs, sent, poke = [], [], 50
    for now in range(21, 60):
        if now % 8 == 7:                                   # robot 0, held, pokes
            poke += 1
            sent += _stops_in(restored.on_message(_ack_to_run(303, poke), float(now)))
        restored.robot_alive(1, 21, float(now))          # robot 1 computes (its status)
        out = restored.on_tick(float(now))
        logs += [a for a in out if isinstance(a, Log)]
        sent += _stops_in(out)
    assert restored.transfers.replaced_by == 202 and logs == [] and sent == []


def _set_clocks(monkeypatch, boot, wall, mono, up=5.0):
    """Make ``clocks`` read boot id ``boot``, wall ``wall``, monotonic ``mono``, boot ``up``."""
    from rog_ros.nodes import clocks
    monkeypatch.setattr(clocks, 'boot_id', lambda: boot)
    monkeypatch.setattr(clocks, '_wall', lambda: wall)
    monkeypatch.setattr(clocks, '_monotonic', lambda: mono)
    monkeypatch.setattr(clocks, 'boot_clock', lambda: up)


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_replaced_runs_acks_restored_after_a_reboot_are_as_old_as_they_were_plus_the_time_away(
        system, monkeypatch):
    # 101 (replaced by 202: robot 0's last ack 14 s, robot 1's 10 s) is checkpointed 300 s
    # after robot 0's ack (monotonic 314 s), and the server's robot reboots: restored 10 s
    # later by the wall clock, at 20 s of the new boot's monotonic clock. Kept as they were,
    # the acks were 6 s and 10 s old there (served_by_replacing counted robot 1's within
    # 300 s); now 310 s and 314 s old. Within one boot they are kept as they are.
    t = 1.7e9
    _set_clocks(monkeypatch, 'boot-a', t, 314.0)
    srv = _replaced_by_202_robot_0_owed(system, robot_1_acks=(10,))
    sd = dict(srv.state_dict(), unrecorded_logs=[[14.0, 'stall_s', 1.0, 0, '{}']])
    assert sd['clock_stamp']['boot_id'] == 'boot-a' and sd['clock_stamp']['mono_s'] == 314.0

    def restore(state, boot, wall, mono, up=5.0):
        _set_clocks(monkeypatch, boot, wall, mono, up)
        out = _push_server(_pair(system, n_workers=2, budget=1)[0], system, n_workers=2,
                           incarnation=303)
        out.load_state_dict(state)
        return out

    # Execute / Assert: one boot (13 s later by its clock): the times as they were
    same = restore(sd, 'boot-a', t + 13.0, 327.0)
    assert same.transfers.replaced_acked == {0: (202, 14.0), 1: (202, 10.0)}
    assert same.replayed_logs[0][0] == 14.0
    # another boot, 10 s later: 310 s and 314 s old, at 20 s of the new clock
    rebooted = restore(sd, 'boot-b', t + 10.0, 20.0)
    assert rebooted.transfers.replaced_acked == {0: (202, -290.0), 1: (202, -294.0)}
    assert rebooted.replayed_logs[0][0] == -290.0 and rebooted.stop_sent[0]
    for r in (0, 1):
        rebooted.transfers._peer(r)
    rebooted.transfers.peer_runs.update({0: [9], 1: [21]})
    for k, now in enumerate(range(16, 21)):     # (robot 0's acks: 202 proved anew)
        rebooted.on_message(_ack_to_run(202, k + 1), float(now))
    assert rebooted.transfers.replaced_by == 202
    served = rebooted.transfers.served_by_replacing
    assert not served(1, 20.0, 300.0) and served(1, 20.0, 600.0)    # (314 s old)
    # the new boot 60 s old: the wall clock's 10 s cannot be (the checkpoint came before it)
    late = restore(sd, 'boot-b', t + 10.0, 20.0, up=60.0)
    assert late.transfers.replaced_acked == {0: (202, -340.0), 1: (202, -344.0)}
    # a boot id unread at the checkpoint: the wall clock's 10 s, no floor
    unknown = restore(dict(sd, clock_stamp=dict(sd['clock_stamp'], boot_id='')),
                      'boot-b', t + 10.0, 20.0, up=60.0)
    assert unknown.transfers.replaced_acked == {0: (202, -290.0), 1: (202, -294.0)}
    # the wall clock stepped back (or a day on): the acks' ages unknown, taken as old; the
    # log moved by no time away (-294 s: 300 s before the restore at 20 s), as the run's
    # clock goes on from the checkpoint then (``ServerNode._resume_record``): its place
    # in the run record is kept (not 14 s of another boot's clock, clamped into the run)
    for step in (-3600.0, 2 * 86400.0):
        stepped = restore(sd, 'boot-b', t + step, 20.0)
        assert stepped.transfers.replaced_acked == {}
        assert stepped.replayed_logs[0][0] == -280.0 and stepped.stop_sent[0]
    # an older checkpoint (no stamp): as before, the times as they are
    older = restore({k: v for k, v in sd.items() if k != 'clock_stamp'}, 'boot-b', t, 20.0)
    assert older.transfers.replaced_acked == {0: (202, 14.0), 1: (202, 10.0)}
    # a stamp that is not one: ValueError naming it, nothing restored
    for bad in ('another boot', 5, None, 'b' * 65):
        with pytest.raises(ValueError, match='boot_id'):
            restore(dict(sd, clock_stamp=dict(sd['clock_stamp'], boot_id=bad)),
                    'boot-b', t, 20.0)
    for bad in ({}, dict(sd['clock_stamp'], mono_s='x'),
                dict(sd['clock_stamp'], wall_time=float('nan'))):
        _set_clocks(monkeypatch, 'boot-b', t, 20.0)
        fresh = _push_server(_pair(system, n_workers=2, budget=1)[0], system, n_workers=2,
                             incarnation=303)
        with pytest.raises(ValueError, match='clock stamp'):
            fresh.load_state_dict(dict(sd, clock_stamp=bad))
        assert fresh.transfers.replaced_acked == {} and not any(fresh.stop_sent)
        assert fresh.replayed_logs == [] and fresh.clock == [0, 0]


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_hung_robots_statuses_hold_a_replaced_run_only_status_patience_past_its_ack(system):
    # Robot 1's computation hung after its last ack to 202 (14 s): its statuses come for
    # ever, robot 0 pokes. 101 stays replaced STATUS_PATIENCE_S past that ack, no longer:
    # then 20 s of robot 0's pokes unanswered by acks to 202 end it (server_not_replaced;
    # robot 1 is given up then too, stop_missed, as any robot silent that long).
    from rog_ros.nodes.push_systems import STATUS_PATIENCE_S
    srv = _replaced_by_202_robot_0_owed(system, robot_1_acks=range(10, 15))
    logs, poke, now = [], 50, 15
    while now < 14 + STATUS_PATIENCE_S + 60 and not logs:
        if now % 8 == 7:
            poke += 1
            srv.on_message(_ack_to_run(101, poke), float(now))
        srv.robot_alive(1, 21, float(now))
        logs += [(now, a) for a in srv.on_tick(float(now))
                 if isinstance(a, Log) and a.name == 'server_not_replaced']
        now += 1
    assert [a.info['run'] for _, a in logs] == [202]
    assert 14 + STATUS_PATIENCE_S < logs[0][0] <= 14 + STATUS_PATIENCE_S + 20 + 8
    assert srv.transfers.replaced_by == 0


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_slow_robot_whose_status_still_comes_is_not_given_up(system):
    # Robot 0's push reaches the budget (every robot's is done); robot 1 (run 21, a slow
    # Jetson, a big model) computes 200 s more before its push draws its stop. Silent on
    # the bus but for its status (every 0.5 s), it was given up DONE_PATIENCE_S after its
    # last word (stop_missed): the server took its statuses for nothing. A status of the
    # robot's live run (not one that says it stopped: the node asks) counts as its word;
    # one of another run does not, and a robot whose statuses stop is given up as before.
    from rog_ros.nodes.push_systems import DONE_PATIENCE_S
    from test_push_durable import _TimedThrough
    engine, worker = _pair(system, n_workers=2, budget=1)
    srv = ServerAdapter(engine, 2, 0.1, _TimedThrough())
    srv.transfers.peer_runs[1] = [21]
    assert srv.on_tick(0.0) == []
    assert _stops_in(srv.on_message(_push(worker(0), 11, 0), 0.0))
    assert srv.stop_sent == [True, False] and not srv.finished
    logs = []
    for k in range(41):
        now = 5.0 * k
        srv.robot_alive(1, 21, now)
        srv.robot_alive(1, 5, now + 1.0)           # (an old process of rank 1: not it)
        logs += [a for a in srv.on_tick(now + 1.0) if isinstance(a, Log)]
    assert logs == [] and not srv.finished and srv.stops_missed == 0
    srv.robot_alive(0, 11, 200.0)                  # (robot 0 was told: nothing changes)
    srv.robot_alive(7, 21, 200.0)                  # (no such robot: nothing)
    assert srv.on_tick(200.0 + DONE_PATIENCE_S - 0.5) == []
    out = srv.on_tick(200.0 + DONE_PATIENCE_S)
    assert [(a.name, a.worker) for a in out if isinstance(a, Log)] == [('stop_missed', 1)]
    assert srv.finished and srv.stops_missed == 1


@pytest.mark.parametrize('system', SYSTEMS)
@pytest.mark.parametrize('first', [101, 202])
def test_a_fresh_robot_answered_by_two_finished_server_runs_stops(system, first):
    # Server runs 101 (a zombie) and 202 (the live one) both finished and both answer robot
    # 0's new run (10, no model taken yet): each acks its push and its pokes and orders it
    # to stop. A new run sets a stop aside while another run answered it within two poke
    # intervals: each run's answers kept the other's stop set aside, and the robot never
    # stopped (180 stops set aside in 180 s, both servers owing it its stop) until the
    # servers left. A run that ordered a stop itself does not train on: the robot stops at
    # the latest on the second stop order it hears.
    runs = {101: _finished_server_owing_robot_0_its_stop(system),
            202: _finished_server_owing_robot_0_its_stop(system)}
    runs[202].transfers.incarnation = 202
    order = [runs[first], runs[303 - first]]
    robot = _robot(_pair(system, n_workers=1)[1], system, 0, 10)
    robot.start(20.0)
    now, stopped = 21.0, None
    out = robot.on_compute_done(_grad(0, 0), now)
    while now < 80.0 and stopped is None:
        answers = []
        for a in out:
            if isinstance(a, Send) and a.dest == SERVER:
                answers += [b.msg for srv in order for b in srv.on_message(a.msg, now)
                            if isinstance(b, Send)]
        answers += [b.msg for srv in order for b in srv.on_tick(now) if isinstance(b, Send)]
        if any(isinstance(c, Stopped) for c in _hear(robot, answers, now)):
            stopped = now
        now += 1.0
        out = robot.on_tick(now)
    assert robot.following == 0 and sorted(robot.transfers.peer_runs[SERVER]) == [101, 202]
    assert stopped == 21.0 and robot.stops_set_aside == 1 and robot.rejects == 0


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_robot_whose_computation_hung_is_given_up_though_its_status_still_comes(system):
    # Robot 1 (run 21) computes past the budget and its computation never ends (a hung GPU,
    # a deadlocked data loader): its node still publishes its status every 0.5 s from its
    # spin loop, and the robot never gives up (it does only while it waits). Each status
    # counted as its word for ever: the server never gave it up and never finished (it
    # gave it up 60 s after its last message before statuses counted). Statuses alone hold
    # it STATUS_PATIENCE_S past its last message (here none: its first tick waiting, 5 s).
    from rog_ros.nodes.push_systems import STATUS_PATIENCE_S
    from test_push_durable import _TimedThrough
    engine, worker = _pair(system, n_workers=2, budget=1)
    srv = ServerAdapter(engine, 2, 0.1, _TimedThrough())
    srv.transfers.peer_runs[1] = [21]
    assert srv.on_tick(0.0) == []
    assert _stops_in(srv.on_message(_push(worker(0), 11, 0), 0.0))
    logs, now = [], 0.0
    while now < 2 * STATUS_PATIENCE_S and not srv.finished:
        now += 5.0
        srv.robot_alive(1, 21, now)
        logs += [(a.name, a.worker, now) for a in srv.on_tick(now) if isinstance(a, Log)]
    assert logs == [('stop_missed', 1, 5.0 + STATUS_PATIENCE_S)] and srv.stops_missed == 1
    assert srv.finished and srv.gone == [False, True]


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_replaced_server_run_takes_a_fleet_that_computes_long_for_no_sign_of_its_end(system):
    # Server run 101 (finished, a zombie) was replaced by 202 (acks to it until 14 s). Every
    # robot then computes 30 s (slow robots, a big model): none acks 202 meanwhile, nor
    # says anything to us. 101 took 202 for gone 20 s after the last ack, served again and
    # answered the next push with its stop order, until 3 acks over 4 s proved 202 anew: a
    # robot restarted then (a new run, following none) that heard 101's answer first
    # stopped while 202 trained on. Counted from a robot's first word since the last ack,
    # the silence of a computing fleet is none: the push at 44 s (202's pull acked at 45 s)
    # leaves 101 replaced, and no stop order goes.
    srv = _replaced_by_202(system)
    logs = []
    for now in range(15, 44):
        logs += [a for a in srv.on_tick(float(now)) if isinstance(a, Log)]
    assert srv.transfers.replaced_by == 202 and logs == []
    fresh = _robot(_pair(system, n_workers=1)[1], system, 0, 10)
    fresh.start(43.0)
    out = []
    for a in fresh.on_compute_done(_grad(0, 0), 44.0):
        if isinstance(a, Send) and a.dest == SERVER:
            out += srv.on_message(a.msg, 44.0)
    assert _stops_in(out) == [] and srv.transfers.replaced_by == 202
    srv.on_message(dataclasses.replace(_ack_to_run(202, 40), incarnation=10), 45.0)
    assert srv.transfers.next_wakeup() is None and srv.stops_owed(45.0) == []
