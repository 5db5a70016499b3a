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
"""A push-system fleet takes a restarted robot back: the nodes, over an in-memory bus."""

import time

import pytest
from rog_ros.nodes import rog_server, rog_worker, server_node, worker_node
from test_nodes_lifecycle import in_memory_fleet, server_and_workers
import torch

ITERATIONS = 12


def _spin(nodes, until, limit_s=120.0):
    """Spin ``nodes`` until ``until()`` holds or all are idle; wall clock bounds it."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and not until():
        busy = [node.spin_once() for node in nodes]
        if not any(busy):
            return


def _serve_until_told(server, workers, limit_s=30.0):
    """
    Serve with finished ``server`` as its ``finish`` does, until every robot stopped and left.

    Each robot spins until it stops, then leaves (``shutdown``: its status says it stopped),
    as a robot's process does. Why: over the in-memory bus a robot hears only while the
    test spins it, and a finished server's node sends the stop orders again only in
    ``finish``, which spins no robot: a robot that takes its order from a repeat
    (``WorkerAdapter._stop_held``), or one stopped that never said so, held
    ``finish`` for the whole linger (20 s, ``ServerAdapter.stops_owed``), not the seconds
    a fleet of processes takes. Wall clock bounds it.
    """
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and not (
            all(w.bus is None for w in workers)
            and not server.engine.stops_owed(server.driver.clock())):
        server.driver.step(0.02)
        for w in workers:
            if w.bus is not None and w.engine.engine.stopped:
                w.shutdown()                  # told to stop: it leaves
            elif w.bus is not None:
                w.spin_once()


def _kill(hub, srv, nodes):
    """
    Kill server node ``srv`` as SIGKILL would: it says nothing more and frees its state.

    Why: the restart tests start a new server on the same state folder and namespace.
    """
    hub.buses.remove(srv.bus)
    srv.bus.publish = srv.bus.close = lambda *a, **k: None
    srv.state_hold.release()
    nodes.remove(srv)


def _durable_fleet(tmp_path, monkeypatch, sync, namespace, every, extra=()):
    """
    Return (hub, server, robots, server arguments) of 2 robots over an in-memory bus.

    The server keeps its state in ``tmp_path/state``, a checkpoint every ``every`` pushes,
    and waits 3 s at most for robots at start (a restored one must not wait for more). A
    restored server's wait for the robots it told to stop is scaled down 20 times (0.5 s
    while none of them is matched, 1 s at most: ``server_node.HEAR_SCALE``).
    """
    hub = in_memory_fleet(monkeypatch)
    monkeypatch.setattr(server_node, 'HEAR_SCALE', 0.05, raising=False)
    args = ['--sync', sync]
    server_args = args + ['--iterations', str(ITERATIONS), '--state-dir',
                          str(tmp_path / 'state'), '--checkpoint-every', str(every),
                          '--startup-timeout', '3', *extra]
    srv, workers = server_and_workers(tmp_path, namespace, 2, server_args, args)
    return hub, srv, workers, server_args


def _events(node):
    """Return the (event, robot) of ``node``'s events.csv so far (why: each exactly once)."""
    return [(e[2], e[1]) for e in node.recorder.events]


def _restarted_server(tmp_path, namespace, server_args):
    """Return a server node of 2 robots started again on ``server_args``, configured."""
    back = server_node.ServerNode(rog_server.build_parser().parse_args(
        ['--workload', 'toy', '--workers', '2', '--namespace', namespace, '--out',
         str(tmp_path)] + server_args))
    back.configure()
    return back


@pytest.mark.parametrize('sync', ['adacomp', 'asgd', 'comp-asgd', 'gsp'])
def test_a_robot_restarted_mid_run_trains_to_the_end(tmp_path, monkeypatch, sync):
    # Robot 0 is killed while it computes, once the server applied 3 of its pushes (its
    # bus gone, nothing on its way to or from it) and starts again as a new process:
    # new incarnation, clock 0, the starting model. Before, the server refused its first
    # push for ever ('worker 0 pushes timestamp 0, but holds k') and the run ended only
    # at robot 1's budget. Now its stale push is dropped, it gets the current model and
    # trains on: every update of the budget is applied.
    hub = in_memory_fleet(monkeypatch)
    args = ['--sync', sync]
    srv, workers = server_and_workers(tmp_path, '/pr', 2,
                                      args + ['--iterations', str(ITERATIONS)], args)
    nodes = [srv] + workers
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        _spin(nodes, lambda: srv.engine.clock[0] >= 3)
        old = workers[0]
        old.requests.request('deactivate')        # computes no more: the model it pulls
        _spin(nodes, lambda: (0 not in srv.engine.transfers.sending   # is acknowledged,
                              and not old.engine.transfers.sending))  # nothing is on its way
        assert srv.engine.clock[0] >= 3 and 0 not in srv.engine.transfers.sending
        applied = srv.engine.clock[0]
        hub.buses.remove(old.bus)         # killed while computing: it says nothing more
        old.bus.publish = old.bus.close = lambda *a, **k: None
        nodes.remove(old)
        new = worker_node.WorkerNode(rog_worker.build_parser().parse_args(
            ['--workload', 'toy', '--workers', '2', '--namespace', '/pr', '--rank', '0']
            + args))
        workers.append(new)
        new.configure()
        assert new.activate()
        nodes.append(new)
        _spin(nodes, lambda: srv.engine.finished)
        _serve_until_told(srv, [n for n in nodes if n is not srv])
        summary = srv.finish()
    finally:
        for node in workers + [srv]:
            node.shutdown()
    assert new.engine.clock >= 2 and new.engine.engine.stopped
    assert srv.engine.clock[0] >= applied + 2 and summary['pushes_applied'] == ITERATIONS * 2
    assert summary['worker_restarts'] == 1 and summary['duplicate_ranks'] == []
    assert srv.engine.transfers.rejects == 0 and srv.engine.engine.rejects == 0


@pytest.mark.parametrize('sync', ['asgd', 'gsp'])
def test_a_durable_push_server_restarted_mid_run_goes_on_from_its_checkpoint(
        tmp_path, monkeypatch, sync):
    # rog_server --state-dir with a push system (refused before: a crashed server lost the
    # fleet's training). It checkpoints every 4 pushes applied and journals each push
    # between; killed once it applied 9 or more (its bus gone) and started again on its
    # state folder, it restores its last checkpoint and replays its journal: every push it
    # applied is back (before the journal: those after the checkpoint were lost), the
    # robots' settled pushes go again (their pokes) and the run ends at the budget.
    hub, srv, workers, server_args = _durable_fleet(tmp_path, monkeypatch, sync, '/pd', 4)
    nodes = [srv] + workers
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        _spin(nodes, lambda: sum(srv.engine.clock) >= 9)
        killed_at = sum(srv.engine.clock)
        assert srv.hooks.checkpoint_id == killed_at // 4
        live = (srv.recorder.bytes_up, len(srv.recorder.transfer_s), _events(srv))
        _kill(hub, srv, nodes)                # killed: it says nothing more
        back = _restarted_server(tmp_path, '/pd', server_args)
        restored = sum(back.engine.clock)
        assert back.hooks.restored == killed_at // 4 and restored == killed_at
        assert back.engine.replayed == killed_at % 4
        assert back.activate()
        # the run record goes on with every event of the dead server's, once: those of the
        # message the checkpoint was taken for were missing (its run record is taken before
        # the node records them), e.g. its push_done's bytes and transfer time
        assert (back.recorder.bytes_up, len(back.recorder.transfer_s),
                [e for e in _events(back) if e[0] != 'server_restored']) == live
        nodes.insert(0, back)
        _spin(nodes, lambda: back.engine.finished)
        _serve_until_told(back, workers)
        summary = back.finish()
    finally:
        for node in nodes + ([srv] if srv not in nodes else []):
            node.shutdown()
    assert summary['pushes_applied'] == ITERATIONS * 2 and back.engine.finished
    assert back.engine.transfers.rejects == 0 and back.engine.engine.rejects == 0
    assert all(w.engine.engine.stopped for w in workers)
    # nothing lost, nothing dropped: a push the dead server answered (its answer lost) and
    # sent again is push_resent, not a worker_restart (before the journal: up to 2 dropped)
    assert summary['worker_restarts'] == 0


@pytest.mark.parametrize('sync', ['asgd', 'gsp'])
def test_a_push_server_killed_after_its_last_stop_order_writes_the_results(
        tmp_path, monkeypatch, sync):
    # Every stop order is checkpointed before it leaves, and the last one said the run had
    # finished: a server killed after it, before its results, came back saying the run had
    # already finished, wrote no summary.json nor model.pt, and rog fleet refused to start
    # on the state folder (finished_run). The restored server waits for no robot (all were
    # told to stop), writes the results, then its checkpoint says finished.
    summary, finished = _killed_after_the_last_stop_order(tmp_path, monkeypatch, sync, '/pf')
    assert summary['pushes_applied'] == ITERATIONS * 2
    assert (tmp_path / 'summary.json').exists() and (tmp_path / 'model.pt').exists()
    assert finished is not None


@pytest.mark.parametrize('sync', ['asgd', 'comp-asgd'])
def test_a_push_server_restored_after_a_stop_order_waits_only_for_the_robots_training(
        tmp_path, monkeypatch, sync):
    # Every stop order is checkpointed before it leaves. Killed after the first (robot r
    # told to stop, and gone), the restored server waited at activate for every robot's
    # endpoints: r's never came, it gave up at startup_timeout, and the robot still
    # training waited for it in vain. It waits for that robot only, and the run ends.
    hub, srv, workers, server_args = _durable_fleet(tmp_path, monkeypatch, sync, '/ps', 1)
    nodes, back = [srv] + workers, None
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        _spin(nodes, lambda: any(srv.engine.stop_sent))
        assert srv.engine.stop_sent.count(True) == 1
        told = srv.engine.stop_sent.index(True)
        _kill(hub, srv, nodes)                # killed after its first stop order
        gone = workers[told]
        _spin([gone], lambda: gone.engine.engine.stopped)
        assert gone.engine.engine.stopped
        nodes.remove(gone)
        gone.shutdown()                       # told to stop: it left
        back = _restarted_server(tmp_path, '/ps', server_args)
        assert back.engine.stop_sent[told] and not back.engine.finished
        assert back.activate()
        nodes.insert(0, back)
        # (the restored run, new to the robot still training, answers its last push with its
        # stop: set aside, as a zombie's would be, until the run answered that push alone
        # for 16 s, WorkerAdapter._stop_held; the robot takes a repeat then, while the
        # server serves on)
        _spin(nodes, lambda: back.engine.finished)
        _serve_until_told(back, workers)
        summary = back.finish()
    finally:
        for node in nodes + [n for n in (srv, back) if n is not None and n not in nodes]:
            node.shutdown()
    assert summary['pushes_applied'] == ITERATIONS * 2 and back.engine.finished
    assert all(w.engine.engine.stopped for w in workers)


@pytest.mark.parametrize('sync', ['rog', 'bsp'])
def test_a_rog_server_killed_after_its_last_stop_order_writes_the_results(
        tmp_path, monkeypatch, sync):
    # Rog's engines' last checkpoint was the final model's (before it went out): a server
    # killed after the robots took it and left, before its results, came back owing them
    # the model, waited at activate for robots gone (PeerTimeout after startup_timeout),
    # wrote no summary.json nor model.pt, and its state folder stayed unfinished. Each stop
    # order (it leaves with the model's acknowledgement) is now checkpointed before it
    # leaves; the restored server waits for no robot, writes the results, then its
    # checkpoint says finished.
    summary, finished = _killed_after_the_last_stop_order(tmp_path, monkeypatch, sync, '/rf',
                                                          robots_leave=True)
    assert summary['final_model_delivered'] == 2 and summary['final_model_missed'] == 0
    assert (tmp_path / 'summary.json').exists() and (tmp_path / 'model.pt').exists()
    assert finished is not None


def _killed_after_the_last_stop_order(tmp_path, monkeypatch, sync, namespace,
                                      robots_leave=False):
    """
    Run 2 robots to the end, kill the server before its results, restore it and finish.

    With ``robots_leave`` the robots take their stop orders and leave before the server is
    started again. Return the restored server's summary and what ``finished_run`` says of
    the state folder after it.
    """
    from rog_ros.nodes.state_dir import finished_run
    hub, srv, workers, server_args = _durable_fleet(tmp_path, monkeypatch, sync, namespace, 1)
    state = str(tmp_path / 'state')
    nodes, back = [srv] + workers, None
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        _spin(nodes, lambda: srv.engine.finished)
        assert srv.engine.finished and finished_run(state) is None
        _kill(hub, srv, nodes)                # killed before its results
        if robots_leave:
            _spin(nodes, lambda: all(w.engine.state == 'stopped' for w in workers))
            for w in workers:                 # the robots left, each with its stop order
                assert w.engine.state == 'stopped'
                w.shutdown()
                nodes.remove(w)
        back = _restarted_server(tmp_path, namespace, server_args)
        assert back.hooks.restored is not None and back.engine.finished
        assert back.activate()                # waits for no robot: all were told to stop
        summary = back.finish()
    finally:
        for node in nodes + [n for n in (srv, back) if n is not None and n not in nodes]:
            node.shutdown()
    return summary, finished_run(state)


@pytest.mark.parametrize('sync', ['adacomp', 'asgd', 'gsp'])
def test_a_push_server_restored_from_before_stop_orders_its_robots_took_finishes(
        tmp_path, monkeypatch, sync):
    # The state folder as it was at the first stop order (the budget done: every robot's),
    # put back after both robots took their orders and left, and the server killed before
    # its results. The restored server waited at activate for the robot whose order the
    # checkpoint lacks (PeerTimeout after startup_timeout: exit 1, no results). It waits
    # for no robot (each one's budget is done), gives up the silent one after
    # DONE_PATIENCE_S (scaled here to 0.5 s: stops_missed 1), writes the results, and its
    # state folder says the run finished.
    import shutil
    from rog_ros.nodes import push_systems
    from rog_ros.nodes.state_dir import finished_run
    monkeypatch.setattr(push_systems, 'DONE_PATIENCE_S', 0.5, raising=False)
    hub, srv, workers, server_args = _durable_fleet(tmp_path, monkeypatch, sync, '/po', 1)
    state, older = tmp_path / 'state', tmp_path / 'older'
    nodes, back = [srv] + workers, None
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        _spin(nodes, lambda: any(srv.engine.stop_sent))
        assert srv.engine.stop_sent.count(True) == 1
        shutil.copytree(state, older, ignore=shutil.ignore_patterns('*.lock'))
        _spin(nodes, lambda: srv.engine.finished)
        _kill(hub, srv, nodes)                # killed before its results
        _spin(nodes, lambda: all(w.engine.state == 'stopped' for w in workers))
        for w in workers:                     # the robots left, each with its stop order
            assert w.engine.state == 'stopped'
            w.shutdown()
            nodes.remove(w)
        for f in older.iterdir():             # the older checkpoint (and journal) put back
            shutil.copy(f, state / f.name)
        back = _restarted_server(tmp_path, '/po', server_args)
        assert back.engine.stop_sent.count(True) == 1 and not back.engine.finished
        assert back.activate()                # waits for no robot: every budget is done
        nodes = [back]
        _spin(nodes, lambda: False, limit_s=20.0)
        assert back.engine.finished
        summary = back.finish()
    finally:
        for node in nodes + [n for n in (srv, back) if n is not None and n not in nodes]:
            node.shutdown()
    assert summary['stops_missed'] == 1 and summary['completed']
    assert summary['pushes_applied'] == ITERATIONS * 2
    assert (tmp_path / 'summary.json').exists() and (tmp_path / 'model.pt').exists()
    assert finished_run(str(state)) is not None


def test_a_push_server_restored_from_its_journal_alone_records_the_replayed_pushes(
        tmp_path, monkeypatch):
    # Killed before its first checkpoint (K = 100): the journal alone is replayed. The
    # start was taken for a new run (restored None), and the replayed pushes' logs were
    # dropped: the run record (events.csv, the bytes pushed) began empty at the restart.
    # It is a resume from checkpoint 0, and the replayed pushes are recorded. Its run's
    # clock and record started again at the restart until 2026-12-07 (no run record: the
    # journal's header holds one now).
    hub, srv, workers, server_args = _durable_fleet(tmp_path, monkeypatch, 'asgd', '/pj', 100)
    nodes, back = [srv] + workers, None
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        _spin(nodes, lambda: sum(srv.engine.clock) >= 3)
        assert srv.hooks.state.saves == 0
        pushed, t0 = srv.recorder.bytes_up, srv.t0
        time.sleep(1.5)                       # (the run's clock: 1.5 s more before the kill)
        _kill(hub, srv, nodes)
        back = _restarted_server(tmp_path, '/pj', server_args)
        assert back.hooks.restored == 0 and back.engine.replayed >= 3
        assert back.activate()
        assert back.recorder.bytes_up == pushed > 0 and back.engine.replayed_logs == []
        # the run goes on (the journal's header holds the run record at its first record):
        # its clock from the dead server's start, not the restart (t0 1.5 s later before),
        # its record continued and the restore in events.csv, as a checkpoint's restore
        assert abs(back.t0 - t0) < 0.5, (back.t0, t0)
        assert [e[2] for e in back.recorder.events].count('server_restored') == 1
        nodes.insert(0, back)
        _spin(nodes, lambda: back.engine.finished)
        _serve_until_told(back, workers)
        summary = back.finish()
    finally:
        for node in nodes + [n for n in (srv, back) if n is not None and n not in nodes]:
            node.shutdown()
    assert summary['pushes_applied'] == ITERATIONS * 2 and back.engine.finished
    assert all(w.engine.engine.stopped for w in workers)
    # timeseries.csv: one run, its times from the dead server's start, in order, past the kill
    times = [float(r['time_s']) for r in back.recorder.rows]
    assert times == sorted(times) and times[-1] >= 1.5, times
    events = [float(e[0]) for e in back.recorder.events]
    assert events == sorted(events), events


def test_a_push_server_restored_from_before_the_budget_its_robots_finished_gives_up_at_start(
        tmp_path, monkeypatch):
    # The state folder as it was before the budget was done, put back after the robots
    # finished theirs and left (the journal makes this no crash's outcome: the checkpoint
    # and the journal hold every stop order sent). The restored engine cannot tell robots
    # that finished from robots still training that are slow to come back (a long outage,
    # a restart): no budget is done in it, so DONE_PATIENCE_S, which only spares the wait
    # for a stop order the engine would send anyway, does not apply. Giving them up would
    # end the run short of its budget, with the put-back model, as completed. The server
    # waits at its start for every robot and gives up at startup_timeout (PeerTimeout: exit
    # 1, no results written, the state folder left unfinished: the same command resumes
    # once the robots are started again).
    import shutil
    from rog_ros.nodes.connect import PeerTimeout
    from rog_ros.nodes.state_dir import finished_run
    hub, srv, workers, server_args = _durable_fleet(tmp_path, monkeypatch, 'asgd', '/pb', 1)
    state, older = tmp_path / 'state', tmp_path / 'older'
    nodes, back = [srv] + workers, None
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        _spin(nodes, lambda: sum(srv.engine.clock) >= 4)
        assert not any(srv.engine.stopped)
        shutil.copytree(state, older, ignore=shutil.ignore_patterns('*.lock'))
        _spin(nodes, lambda: srv.engine.finished)
        _kill(hub, srv, nodes)
        _spin(nodes, lambda: all(w.engine.state == 'stopped' for w in workers))
        for w in workers:
            assert w.engine.state == 'stopped'
            w.shutdown()
            nodes.remove(w)
        for f in older.iterdir():
            shutil.copy(f, state / f.name)
        back = _restarted_server(tmp_path, '/pb', server_args)
        assert not any(back.engine.stopped) and sum(back.engine.clock) < 2 * ITERATIONS
        t = time.monotonic()
        with pytest.raises(PeerTimeout) as err:
            back.activate()
        assert 2.5 < time.monotonic() - t < 10.0        # (startup_timeout: 3 s)
        # in one line, what its checkpoint makes likely: its robots mid-run (2 of 12 pushes
        # each), none told to stop, so not finished unless a newer state was moved away for
        # this one (as here): the network hint first, the put-back folder named
        # (test_server_restart_end: a checkpoint near the end says they may have finished)
        said = str(err.value)
        assert said.startswith('no peer on w0/chunks') and ' after 3 s: ' in said
        assert '\n' not in said
        assert (f'restored from checkpoint {back.hooks.restored} of {state} and no robot was '
                'heard, though its checkpoint has the robots it waits for at iteration') in said
        assert ('none told to stop: they cannot have finished the run since (only a newer '
                'state of it, moved away for this one, could say so)') in said
        assert 'is the other side running with the same namespace (/pb)' in said
    finally:
        for node in nodes + [n for n in (srv, back) if n is not None and n not in nodes]:
            node.shutdown()
    assert not (tmp_path / 'summary.json').exists()
    assert finished_run(str(state)) is None


@pytest.mark.parametrize('sync, every, at_its_row', [
    ('asgd', 4, False), ('gsp', 4, False), ('adacomp', 100, False), ('rog', 4, False),
    ('bsp', 4, False), ('asgd', 4, True), ('adacomp', 100, True)])
def test_a_restored_server_keeps_each_evaluation_of_the_state_it_restored_once(
        tmp_path, monkeypatch, sync, every, at_its_row):
    # Evaluations every iteration; killed with rows recorded after its last checkpoint
    # (adacomp with K = 100: none, its journal alone). The journal restores the model state
    # those rows measured, but the rows lived in the run record only (the checkpoint's, or
    # the journal header's): timeseries.csv lost them. Each row is journaled before it is
    # recorded; the restore records those after the checkpoint, each once, and the run's
    # rows go on after them. A Rog or BSP server (no journal) restores its checkpoint's
    # state and rows: those after it measured a state lost with them (the run trains those
    # iterations again and evaluates them anew), none twice. Killed with its last row of
    # the state it died with (at_its_row: no push applied since), a push server restored
    # evaluated that state again at activate: a second row of one model
    hub, srv, workers, server_args = _durable_fleet(tmp_path, monkeypatch, sync, '/pe', every,
                                                    ['--eval-every', '1'])
    nodes, back, at_checkpoint = [srv] + workers, None, [0]
    save = srv.hooks.checkpoint

    def noting():
        """Note the rows the checkpoint's run record holds, then checkpoint."""
        at_checkpoint[0] = len(srv.recorder.rows)
        save()

    srv.hooks.checkpoint = noting
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        _spin(nodes, lambda: sum(srv.engine.clock) >= 9 and
              len(srv.recorder.rows) >= at_checkpoint[0] + 2)
        assert not srv.engine.finished
        if at_its_row:                       # (its model evaluated, its row recorded: killed)
            srv._evaluate()
            srv._collect(wait_s=30.0)
            assert srv.recorder.rows[-1]['iteration'] == srv._mean_iteration()
        live = [dict(r) for r in srv.recorder.rows]
        assert len(live) >= at_checkpoint[0] + 2 and srv.evaluations == len(live)
        _kill(hub, srv, nodes)
        if sync in ('rog', 'bsp'):
            live = live[:at_checkpoint[0]]             # (the checkpoint's rows)
        back = _restarted_server(tmp_path, '/pe', server_args)
        assert (back.hooks.restored == 0) == (every == 100)
        assert back.activate()
        assert back.recorder.rows == live and back.evaluations == len(live)
        assert getattr(back.engine, 'replayed_evaluations', []) == []
        nodes.insert(0, back)
        _spin(nodes, lambda: False)
        summary = back.finish()
    finally:
        for node in nodes + [n for n in (srv, back) if n is not None and n not in nodes]:
            node.shutdown()
    rows = back.recorder.rows
    assert rows[:len(live)] == live                      # (every row before the kill, once)
    times = [r['time_s'] for r in rows]
    assert times == sorted(times) and len(set(times)) == len(times), times
    if at_its_row:
        assert rows[len(live)]['iteration'] > live[-1]['iteration']    # (not evaluated again)
    assert summary['evaluations'] == len(rows) > len(live) and summary['completed']


@pytest.mark.parametrize('sync', ['asgd', 'gsp'])
def test_a_push_server_killed_after_its_last_evaluation_does_not_evaluate_that_model_again(
        tmp_path, monkeypatch, sync):
    # Killed in finish after the run's last evaluation (its row journaled), before its
    # results: the restored server's activate keeps that row and does not evaluate the model
    # again (_evaluated_before), but finish, which evaluates unless the model it leaves was
    # the last evaluated, found none evaluated in this process and gave the run a second row
    # of the same model (the second crash window of one fix)
    hub, srv, workers, server_args = _durable_fleet(tmp_path, monkeypatch, sync, '/pv', 1,
                                                    ['--eval-every', '1'])
    nodes, back = [srv] + workers, None
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        _spin(nodes, lambda: srv.engine.finished)
        assert srv.engine.finished
        srv._collect(wait_s=30.0)
        srv._evaluate()                       # finish's last evaluation, its row journaled
        srv._collect(wait_s=30.0)
        live = [dict(r) for r in srv.recorder.rows]
        assert live[-1]['iteration'] == srv._mean_iteration() == ITERATIONS
        _kill(hub, srv, nodes)                # killed before its results
        back = _restarted_server(tmp_path, '/pv', server_args)
        assert back.hooks.restored is not None and back.engine.finished
        assert back.activate()
        assert back.recorder.rows == live
        summary = back.finish()
    finally:
        for node in nodes + [n for n in (srv, back) if n is not None and n not in nodes]:
            node.shutdown()
    assert back.recorder.rows == live, back.recorder.rows[len(live):]
    assert summary['evaluations'] == len(live) and summary['completed']
    assert (tmp_path / 'summary.json').exists() and (tmp_path / 'model.pt').exists()


@pytest.mark.parametrize('sync, every', [('asgd', 4), ('gsp', 4), ('adacomp', 100)])
def test_an_evaluation_running_when_a_push_server_dies_gets_one_row_of_its_model(
        tmp_path, monkeypatch, sync, every):
    # Killed while evaluations ran (submitted, their rows never collected: the hook stops
    # _collect), pushes applied after them. The restored server evaluated its own model at
    # activate: those points had no row, and one row measured a later model at another time
    # and iteration. Each submission is journaled (OP_EVAL_SUBMITTED) and kept by the
    # checkpoints with its snapshot until its row is journaled (adacomp with K = 100: the
    # journal alone, its replay rebuilding the model): the restored server evaluates the
    # same models for the same rows, and every evaluation point has one row, never two
    hub, srv, workers, server_args = _durable_fleet(tmp_path, monkeypatch, sync, '/pr', every,
                                                    ['--eval-every', '2'])
    nodes, back, sent = [srv] + workers, None, []
    submit = srv.evaluator.submit

    def noting(model, info):
        """Note each snapshot handed to the evaluator, then hand it on."""
        sent.append((model.clone(), info))
        submit(model, info)

    srv.evaluator.submit = noting
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        _spin(nodes, lambda: sum(srv.engine.clock) >= 6)
        srv._collect(wait_s=30.0)
        collected = len(sent)
        srv._collect = lambda wait_s=0.0: None        # (killed while these run)
        _spin(nodes, lambda: len(sent) >= collected + 2 and
              srv._mean_iteration() > sent[-1][1][1])
        assert not srv.engine.finished
        live = [dict(r) for r in srv.recorder.rows]
        assert len(live) == collected
        ran = srv.evaluator.collect(wait_s=30.0)     # (what the run without a crash recorded)
        assert [info for info, _ in ran] == [info for _, info in sent[collected:]]
        _kill(hub, srv, nodes)
        back = _restarted_server(tmp_path, '/pr', server_args)
        assert (back.hooks.restored == 0) == (every == 100)
        owed = list(getattr(back.engine, 'owed_evaluations', None) or ())
        assert back.activate()
        nodes.insert(0, back)
        _spin(nodes, lambda: False)
        _serve_until_told(back, workers)     # (robots leave as processes do)
        summary = back.finish()
    finally:
        for node in nodes + [n for n in (srv, back) if n is not None and n not in nodes]:
            node.shutdown()
    rows = back.recorder.rows
    assert rows[:len(live)] == live
    # (zip stops at the shorter: each owed point restored and given its row, not vacuous)
    assert len(owed) == len(ran) == 2 and len(rows) >= len(live) + len(ran)
    for row, ((since, it, counters), metrics) in zip(rows[len(live):], ran):
        assert (row['time_s'], row['iteration']) == (since, it)
        assert {k: row[k] for k in counters} == counters
        for k in ('accuracy', 'loss'):
            assert row[k] == pytest.approx(float(metrics[k]), rel=1e-6, abs=1e-9)
    times = [r['time_s'] for r in rows]
    assert times == sorted(times) and len(set(times)) == len(times), times
    points = [int(r['iteration']) // 2 for r in rows[:-1]]   # (the last: finish's)
    assert len(set(points)) == len(points), [r['iteration'] for r in rows]
    assert len(owed) == len(ran)              # (restored owed: the very models they were given)
    for (info, model), (snap, (since, it, counters)) in zip(owed, sent[collected:]):
        assert info == {'time_s': since, 'iteration': it, 'counters': counters}
        assert torch.equal(model, snap)
    assert back.engine.owed_evaluations == []
    assert summary['evaluations'] == len(rows) and summary['completed']


@pytest.mark.parametrize('sync, every', [('asgd', 4), ('adacomp', 100)])
def test_a_failed_evaluation_is_not_evaluated_again_by_the_restored_push_server(
        tmp_path, monkeypatch, sync, every):
    # The evaluation at iteration 2 fails (its error row journaled, no timeseries row), the
    # server is killed before the point at 4. The restored server took the next point from
    # the last timeseries row (0) and evaluated the point at 2 again at its first turn, of
    # a later model: the point had an error and a row. It goes on from the last point
    # submitted (the adapter keeps it: checkpoint and OP_EVAL_SUBMITTED), failed or not
    hub, srv, workers, server_args = _durable_fleet(tmp_path, monkeypatch, sync, '/pe', every,
                                                    ['--eval-every', '2'])
    nodes, back, calls = [srv] + workers, None, []
    evaluate = srv.evaluator._evaluate

    def failing():
        """Evaluate the start's model; fail every later evaluation."""
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError('evaluation failed')
        return evaluate()

    srv.evaluator._evaluate = failing
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        _spin(nodes, lambda: sum(srv.engine.clock) >= 5)
        srv._collect(wait_s=30.0)
        assert len(calls) == 2 and srv.evaluation_errors == 1 and srv._next_eval == 4
        assert 2.0 <= srv._mean_iteration() < 4.0 and not srv.engine.finished
        live = [dict(r) for r in srv.recorder.rows]
        assert [r['iteration'] for r in live] == [0.0]
        _kill(hub, srv, nodes)
        back = _restarted_server(tmp_path, '/pe', server_args)
        assert (back.hooks.restored == 0) == (every == 100)
        assert back.activate()
        assert back._next_eval == 4
        nodes.insert(0, back)
        _spin(nodes, lambda: False)
        _serve_until_told(back, workers)     # (robots leave as processes do)
        summary = back.finish()
    finally:
        for node in nodes + [n for n in (srv, back) if n is not None and n not in nodes]:
            node.shutdown()
    rows = back.recorder.rows
    assert rows[:1] == live
    points = [int(r['iteration']) // 2 for r in rows]
    assert 1 not in points and len(set(points)) == len(points), points
    assert summary['completed']


def test_a_restored_push_server_reports_the_evaluation_errors_before_its_checkpoint(
        tmp_path, monkeypatch):
    # Two evaluations fail, then a checkpoint (its journal emptied: the error rows are in no
    # journal any more), then the server is killed. The checkpoint's run record kept no
    # evaluation errors: the restored run's summary.json said 0 errors and named none, where
    # the run without a crash said 2. It keeps the count, the first and the last few
    hub, srv, workers, server_args = _durable_fleet(tmp_path, monkeypatch, 'asgd', '/pf', 1000,
                                                    ['--eval-every', '2'])
    nodes, back, calls = [srv] + workers, None, []
    evaluate = srv.evaluator._evaluate

    def failing():
        """Evaluate the start's model; fail the next two evaluations."""
        calls.append(1)
        if len(calls) in (2, 3):
            raise RuntimeError(f'evaluation {len(calls)} failed')
        return evaluate()

    srv.evaluator._evaluate = failing
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        _spin(nodes, lambda: sum(srv.engine.clock) >= 9)
        srv._collect(wait_s=30.0)
        assert len(calls) == 3 and srv.evaluation_errors == 2 and not srv.engine.finished
        live = (srv.first_evaluation_error, list(srv.last_evaluation_errors))
        assert 'evaluation 2 failed' in live[0] and len(live[1]) == 2
        assert 'evaluation 3 failed' in live[1][1]
        srv.hooks.checkpoint()
        _kill(hub, srv, nodes)
        back = _restarted_server(tmp_path, '/pf', server_args)
        assert back.hooks.restored is not None and back.evaluation_errors == 2
        assert back.activate()
        nodes.insert(0, back)
        _spin(nodes, lambda: False)
        _serve_until_told(back, workers)     # (robots leave as processes do)
        summary = back.finish()
    finally:
        for node in nodes + [n for n in (srv, back) if n is not None and n not in nodes]:
            node.shutdown()
    assert summary['completed'] and len(calls) == 3
    assert summary['evaluation_errors'] == 2
    assert (summary['evaluation_error'], summary['evaluation_errors_last']) == live


def test_a_run_record_keeps_the_last_few_evaluation_errors_and_reads_older_ones():
    node = server_node.ServerNode.__new__(server_node.ServerNode)
    node.evaluation_errors, node.first_evaluation_error, node.last_evaluation_errors = 0, None, []
    kept = server_node.EVAL_ERRORS_KEPT
    for i in range(kept + 3):
        node._record_evaluation({'time_s': float(i), 'iteration': float(i), 'error': f'e{i}'})
    assert node.evaluation_errors == kept + 3
    assert node.first_evaluation_error == 'at iteration 0: e0'
    assert node.last_evaluation_errors == [f'at iteration {i}: e{i}' for i in range(3, kept + 3)]
    saved = {'evaluation_errors': node.evaluation_errors,
             'first_evaluation_error': node.first_evaluation_error,
             'last_evaluation_errors': node.last_evaluation_errors}
    assert server_node._evaluation_errors(saved) == (kept + 3, 'at iteration 0: e0',
                                                     node.last_evaluation_errors)
    assert server_node._evaluation_errors({'elapsed_s': 1.0}) == (0, None, [])   # (older)
    for bad in ({'evaluation_errors': -1}, {'last_evaluation_errors': 'e'},
                {'first_evaluation_error': 3}, {'last_evaluation_errors': [1]}):
        with pytest.raises((TypeError, ValueError)):
            server_node._evaluation_errors(bad)
