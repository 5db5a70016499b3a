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
"""A push server's checkpoint (``--state-dir``): restored, it goes on where it was saved."""

import types

import pytest
from rog_ros.nodes import durable
from rog_ros.nodes.chaos_hooks import ServerHooks
from rog_ros.nodes.push_systems import ServerAdapter
from rog_ros.protocol.actions import Log, Send
from rog_ros.protocol.messages import Schedule, SERVER, TransferAck
from test_protocol_push_restart import (_applied, _cycle, _grad, _pair, _pulls, _push,
                                        _push_server, _robot, _timed_relay, SYSTEMS)
import torch


def _saved(srv, tmp_path):
    """
    Return ``srv``'s state as a node reads it back from its state file.

    Through ``durable.StateFile``: plain tensors and containers only, loaded with
    ``weights_only=True``, so a state the node cannot write or read fails here.
    """
    f = durable.StateFile(str(tmp_path / 'server.pt'))
    f.save({'engine': srv.state_dict(copy=False)})
    return f.load()['engine']


def _restored(system, sd, n_workers=1, budget=50):
    """Return a new server engine of ``system`` (a restarted node's) restored from ``sd``."""
    srv, _ = _pair(system, n_workers=n_workers, budget=budget)
    srv.load_state_dict(sd)
    return srv


def _logs(actions):
    """Return the names of the logs among ``actions``."""
    return [a.name for a in actions if isinstance(a, Log)]


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_restored_push_server_is_the_one_saved(system, tmp_path):
    # Push servers kept no state: a restarted one began again at the starting model, and
    # the fleet's training was lost. Saved and restored, the server holds the same model,
    # counts, clocks and runs, and takes the next pushes exactly as the saved one does.
    srv, worker = _pair(system, n_workers=2)
    robots = [worker(0), worker(1)]
    for step in range(3):
        for wk in robots:
            _cycle(srv, wk, run=11 + 10 * wk.rank, step=step)
    back = _restored(system, _saved(srv, tmp_path), n_workers=2)
    assert torch.equal(back.model(), srv.model()) and _applied(back) == _applied(srv) == 6
    assert back.stats() == srv.stats() and back.runs == srv.runs == [11, 21]
    for step in (3, 4):           # the same pushes, to both: the same models
        msgs = [_push(wk, 11 + 10 * wk.rank, step) for wk in robots]
        outs = [[s.on_message(m, 0.0) for m in msgs] for s in (srv, back)]
        assert _logs(outs[1][0]) == _logs(outs[0][0]) == ['push_done']
        assert torch.equal(back.model(), srv.model())
        for wk, out in zip(robots, outs[0]):
            wk.on_message(_pulls(out, wk.rank)[0], 0.0)
    assert _applied(back) == _applied(srv) == 10 and back.stats() == srv.stats()


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_push_applied_before_the_checkpoint_and_sent_again_is_applied_once(
        system, tmp_path):
    # The server applied robot 0's push, checkpointed and died before its pull reached the
    # robot, which sends that push again to the restored server (its settled push's END
    # answered by a server that never had the transfer). The push is in the checkpoint:
    # dropped, not applied again, and answered with the current model; the robot goes on.
    srv, worker = _pair(system, n_workers=1)
    wk = worker(0)
    for step in range(3):
        _cycle(srv, wk, run=11, step=step)
    again = _push(wk, 11, 3)
    srv.on_message(again, 0.0)                 # applied; its pull is lost
    applied, model = _applied(srv), srv.model().clone()
    back = _restored(system, _saved(srv, tmp_path))
    out = back.on_message(again, 0.0)
    assert _applied(back) == applied == 4 and torch.equal(back.model(), model)
    assert back.rejects == 0 and _logs(out) == ['push_resent']
    assert back.resent == 1 and back.rejoins == 0
    (pull,) = _pulls(out, 0)
    wk.on_message(pull, 0.0)
    assert torch.equal(wk.w, model)
    _cycle(back, wk, run=11, step=4)           # the next push: applied, once
    assert _applied(back) == 5 and back.rejects == 0


@pytest.mark.parametrize('system', SYSTEMS)
def test_the_pushes_applied_after_the_checkpoint_are_lost_and_no_more(system, tmp_path):
    # Checkpoint after 3 pushes; 2 more applied, then the server dies. The restored server
    # holds the checkpoint's model (those 2 are lost: at most --checkpoint-every of them);
    # the robot's next push, computed at a model this server never had, is dropped and
    # answered with the restored model, and the robot trains on from there.
    srv, worker = _pair(system, n_workers=1)
    wk = worker(0)
    for step in range(3):
        _cycle(srv, wk, run=11, step=step)
    sd, model = _saved(srv, tmp_path), srv.model().clone()
    for step in (3, 4):
        _cycle(srv, wk, run=11, step=step)
    assert _applied(srv) == 5
    back = _restored(system, sd)
    assert _applied(back) == 3 and torch.equal(back.model(), model)
    out = _cycle(back, wk, run=11, step=5)
    assert _logs(out) == ['worker_restart'] and back.rejects == 0
    assert torch.equal(wk.w, model) and _applied(back) == 3
    _cycle(back, wk, run=11, step=6)
    assert _applied(back) == 4 and back.rejects == 0


class _Node:
    """A durable push server as its node drives it: the hooks, seen as ``_timed_relay``'s."""

    def __init__(self, hooks):
        self.hooks, self.adapter = hooks, hooks.engine
        self.engine = hooks.engine.engine      # (the relay counts the engine's updates)

    def __getattr__(self, name):
        """Forward everything else to the hooks (which forward to the adapter)."""
        return getattr(self.hooks, name)


def _durable_server(system, folder, every, budget):
    """Return a new run of a one-robot push server on state folder ``folder``, restored."""
    adapter = _push_server(_pair(system, n_workers=1, budget=budget)[0], system)
    hooks = ServerHooks(adapter, adapter.engine.model().clone(), state_dir=str(folder),
                        checkpoint_every=every)
    hooks.restore()
    return _Node(hooks)


@pytest.mark.parametrize('system', SYSTEMS)
@pytest.mark.parametrize('every,crash_at,lost', [(2, 5, 0), (4, 6, 1)])
def test_a_restarted_durable_push_server_goes_on_from_its_checkpoint(
        system, tmp_path, every, crash_at, lost):
    # Through the node's hooks, adapter and transfers: --checkpoint-every K counts the pushes
    # applied. The server dies once it applied crash_at pushes (its last pull lost) and
    # starts again on its state folder. Its robot's settled push goes again: applied if it
    # is at the clock the checkpoint holds (K = 2: push 5, applied after checkpoint 4, is
    # applied again, nothing is lost), else dropped (K = 4: pushes 5 and 6 applied after
    # checkpoint 4 are lost, the resent one dropped as a worker_restart). Without a state
    # folder the new server began at the starting model (applied 0 at the restart).
    def server():
        """Return a new run of the server on the state folder."""
        return _durable_server(system, tmp_path, every, budget=10)

    first = server()
    wk = _robot(_pair(system, n_workers=1)[1], system, 0, 11)
    took, srv = _timed_relay(first, {0: wk}, restart=(crash_at, server))
    assert srv is not first and srv.hooks.restored == crash_at // every
    assert srv.finished and wk.engine.stopped and _applied(srv.engine) == 10
    assert srv.worker_restarts == lost and srv.adapter.rejects == first.adapter.rejects == 0
    assert wk.transfers.resent == 1 and took < 30.0
    # the adapter's counts go on from the checkpoint's too (summary.json's pushes_applied)
    assert srv.stats()['pushes_applied'] == 10 and first.stats()['pushes_applied'] == crash_at


@pytest.mark.parametrize('system,other', [('asgd', 'adacomp'), ('gsp', 'gsp')])
def test_a_checkpoint_of_another_fleet_is_refused_and_changes_nothing(
        system, other, tmp_path):
    # another --sync, or another fleet size: one ValueError naming both (the node says
    # which state folder to move away), and the server is left as it was built
    srv, worker = _pair(system, n_workers=2)
    _cycle(srv, worker(0), run=11, step=0)
    sd = _saved(srv, tmp_path)
    fresh, _ = _pair(other, n_workers=1)
    model = fresh.model().clone()
    with pytest.raises(ValueError) as exc:
        fresh.load_state_dict(sd)
    assert '2' in str(exc.value) and '\n' not in str(exc.value)
    assert torch.equal(fresh.model(), model) and _applied(fresh) == 0
    assert fresh.runs == [0] and fresh.resumed == [False]


def test_a_gsp_node_held_at_the_checkpoint_stays_held_until_its_group_lets_it_go(tmp_path):
    # robot 0 is 4 pushes ahead of robot 1 (SSP threshold 3): its model is held. Checkpoint,
    # restart: its push sent again is in the checkpoint (dropped, not applied twice) and it
    # is still held (no model for it: the restore does not let it out early); robot 1's
    # next push lets it go, and it trains on from the restored iteration
    srv, worker = _pair('gsp', n_workers=2)
    fast, slow = worker(0), worker(1)
    for step in range(4):
        again = _push(fast, 11, step)
        out = srv.on_message(again, 0.0)
        for model in _pulls(out, 0):
            fast.on_message(model, 0.0)
    assert not _pulls(out, 0) and 0 in srv.groups[0].held and srv.clock == [4, 0]
    back = _restored('gsp', _saved(srv, tmp_path), n_workers=2)
    assert 0 in back.groups[0].held and back.clock == [4, 0]
    out = back.on_message(again, 0.0)
    assert _logs(out) == ['push_resent'] and not _pulls(out, 0)
    assert back.total_pushes == 4 and torch.equal(back.model(), srv.model())
    out = _cycle(back, slow, run=21, step=0)
    (pull,) = _pulls(out, 0)
    fast.on_message(pull, 0.0)
    assert fast.clock == back.clock[0] == 4 and back.total_pushes == 5
    _cycle(back, fast, run=11, step=4)
    assert back.total_pushes == 6 and back.clock == [5, 1] and back.rejects == 0


def test_a_push_robot_given_a_state_folder_says_it_keeps_none_by_design(tmp_path, capsys):
    # rog fleet --state-dir gives every node the folder: each push robot said its engine
    # 'cannot save its state', as if something were wrong; it keeps none by design
    from rog_ros.nodes.chaos_hooks import WorkerHooks
    robot = _robot(_pair('asgd', n_workers=1)[1], 'asgd', 0, 11)
    hooks = WorkerHooks(robot, 0, state_dir=str(tmp_path))
    err = capsys.readouterr().err.strip()
    assert hooks.state is None and err.count('\n') == 0
    assert err == ("rog_worker 0: --state-dir ignored: a push system's robot keeps no state "
                   "(the server's checkpoints are kept; a robot started again comes back as a "
                   'new run)')


@pytest.mark.parametrize('system', SYSTEMS)
def test_with_a_checkpoint_every_push_a_server_crash_loses_no_gradient(system, tmp_path):
    # --checkpoint-every 1: every push applied is on disk before its answer leaves (the
    # hooks checkpoint before the node sends the engine's actions). The server dies after
    # its fifth push applied (its pull lost) and starts again on its state folder: the
    # robot's push sent again is in the checkpoint (push_resent: not applied twice, not
    # counted as a restart) and the run ends with the very model of a run without the
    # crash: the sum of the pushes applied is the sum of the pushes computed.
    def server(folder):
        """Return a new run of the server on ``folder``, a checkpoint every push."""
        folder.mkdir(exist_ok=True)          # (the node's check_durable_args makes it)
        return _durable_server(system, folder, 1, budget=10)

    wk = _robot(_pair(system, n_workers=1)[1], system, 0, 11)
    _, calm = _timed_relay(server(tmp_path / 'calm'), {0: wk})
    wk = _robot(_pair(system, n_workers=1)[1], system, 0, 11)
    first = server(tmp_path / 'crash')
    _, back = _timed_relay(first, {0: wk}, restart=(5, lambda: server(tmp_path / 'crash')))
    assert back is not first and back.hooks.restored == 5 and back.finished
    assert _applied(back.engine) == _applied(calm.engine) == 10
    assert torch.equal(back.engine.model(), calm.engine.model())
    stats = back.stats()
    assert stats['pushes_resent'] == 1 and stats['worker_restarts'] == 0
    assert stats['pushes_applied'] == 10 and back.adapter.rejects == 0


class _Through:
    """Transfers that hand every message on whole: the engine-level messages of these tests."""

    incarnation, rejects = 7, 0

    def __init__(self):
        """Know no peer run (why: ``ServerAdapter._stamp`` reads them)."""
        self.peer_runs = {}

    def on_message(self, msg, now):
        """Return ``msg`` for the engine, no acks (why: nothing is chunked here)."""
        return msg, []

    def outgoing(self, actions, now):
        """Return the engine's actions as they are (why: nothing is chunked here)."""
        return actions

    def take_revived(self):
        """Return no run taken back (why: no transfers to tell one)."""
        return []


def _hooked(system, folder, engine, every=1):
    """Return ``engine`` (two robots) behind its adapter and durable hooks, restored."""
    hooks = ServerHooks(ServerAdapter(engine, 2, 0.1, _Through()), engine.model().clone(),
                        state_dir=str(folder), checkpoint_every=every)
    hooks.restore()
    return hooks


@pytest.mark.parametrize('system', SYSTEMS)
def test_with_a_checkpoint_every_push_a_robot_restarted_before_the_crash_loses_no_more(
        system, tmp_path):
    # K = 1 checkpointed after each push applied only: a restarted robot's first push,
    # dropped, moved its timestamp on (AdaComp's pull) with no checkpoint, and a server
    # crash then restored the earlier run and timestamp: the robot's next push, at the
    # timestamp it was handed, was dropped too (a second gradient lost). Each push answered
    # is checkpointed now; the restored server applies it.
    srv = _hooked(system, tmp_path, _pair(system, n_workers=2)[0])
    worker = _pair(system, n_workers=2)[1]
    robots = {0: worker(0), 1: worker(1)}
    for step in range(2):
        for rank in (1, 0, 1):
            _cycle(srv, robots[rank], run=11 + 10 * rank, step=step)
    new = worker(0)                            # robot 0 restarted: its first push dropped
    out = srv.on_message(_push(new, 12, 0), 0.0)
    assert _logs(out) == ['worker_restart']
    new.on_message(_pulls(out, 0)[0], 0.0)
    applied = _applied(srv.engine.engine)
    back = _hooked(system, tmp_path, _pair(system, n_workers=2)[0])   # the server crashed
    assert back.restored == srv.checkpoint_id and _applied(back.engine.engine) == applied
    out = _cycle(back, new, run=12, step=1)
    assert _logs(out) == ['push_done'] and _applied(back.engine.engine) == applied + 1
    assert back.engine.stats()['worker_restarts'] == 1


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_restored_server_answers_a_stopped_robots_end_with_its_stop_order(system):
    # The checkpoint before a stop order keeps stop_sent, not the order itself: the first
    # END the restored server heard from a robot told to stop (its push's, a poke) was
    # answered with the order again, a copy of none, and raised TypeError in on_message.
    # The order is rebuilt at the clock it went with; it goes again, and at the next tick.
    engine, worker = _pair(system, n_workers=2, budget=1)
    srv = _push_server(engine, system, n_workers=2)
    robot = _robot(worker, system, 0, 11)
    robot.start(0.0)
    chunks = [a.msg for a in robot.on_compute_done(_grad(0, 0), 0.0) if isinstance(a, Send)]
    out = [a for m in chunks for a in srv.on_message(m, 0.0)]
    (stop,) = _stops(out)
    assert srv.stop_sent == [True, False]
    back = _push_server(_pair(system, n_workers=2, budget=1)[0], system, n_workers=2)
    back.load_state_dict(srv.state_dict())
    again = _stops(back.on_message(chunks[-1], 1.0))
    assert [(s.worker, s.clock, s.target_incarnation) for s in again] == [(0, stop.clock, 11)]
    assert len(_stops(back.on_tick(1.0 + back.transfers.end_timeout_s))) == 1
    assert back.stops_repeated == 2 and back.stop_sent == [True, False]


def _stops(actions):
    """Return the stop orders among ``actions`` (why: what a stopped robot is answered)."""
    return [a.msg for a in actions if isinstance(a, Send) and isinstance(a.msg, Schedule)
            and a.msg.stop]


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_checkpoint_of_another_system_is_refused_naming_it(system, tmp_path):
    # GSP's checkpoint read by AdaComp's server (and AdaComp's, or Rog's, by GSP's) was
    # refused naming only a key it lacked ("('mode')", "('clock')"): one line naming the
    # system that wrote it and this server's, nothing changed
    others = [s for s in SYSTEMS if s != system]
    rog = {'version': 1, 'n_workers': 2, 'w_srv': torch.zeros(3)}
    for other, sd in [(s, _saved(_pair(s, n_workers=2)[0], tmp_path)) for s in others] + [
            ('rog, ssp, bsp or flown', rog)]:
        srv = _pair(system, n_workers=2)[0]
        model = srv.model().clone()
        with pytest.raises(ValueError) as exc:
            srv.load_state_dict(sd)
        text = str(exc.value)
        assert text.startswith(f'checkpoint of {other} with ') and '\n' not in text
        assert f'this server runs {system} with 2 and ' in text
        assert torch.equal(srv.model(), model) and srv.resumed == [False, False]


class _Reviving(_Through):
    """Transfers that take back run 11 of robot 0 on the next message, yielding nothing."""

    def __init__(self):
        """Hold one revival back (why: the transfers report one as a chunk of it comes)."""
        super().__init__()
        self.revive = False

    def on_message(self, msg, now):
        """Yield nothing while a revival is due (why: the chunk is no whole push yet)."""
        return (None, []) if self.revive else (msg, [])

    def take_revived(self):
        """Return run 11 of robot 0 once (why: as ``PushTransfers.take_revived`` does)."""
        out = [types.SimpleNamespace(worker=0, run=11)] if self.revive else []
        self.revive = False
        return out


def _revived_then(system, folder, crash, every=1):
    """
    Take back robot 0's run 11 retired by its restart, crash or not; the run's next push.

    Return that push's log names and the rejects of the server that took it (why: a crash
    must not change what the run's push meets; ``every``: the hooks' K).
    """
    folder.mkdir()
    engine = _pair(system, n_workers=2)[0]
    through = _Reviving()
    srv = ServerHooks(ServerAdapter(engine, 2, 0.1, through), engine.model().clone(),
                      state_dir=str(folder), checkpoint_every=every)
    srv.restore()
    worker = _pair(system, n_workers=2)[1]
    robots = {0: worker(0), 1: worker(1)}
    for rank in (0, 1):
        _cycle(srv, robots[rank], run=11 + 10 * rank, step=0)
    srv.on_message(_push(worker(0), 12, 0), 0.0)      # run 12 of robot 0: 11 retired
    through.revive = True
    assert srv.on_message(_push(worker(0), 11, 0), 0.0) == []   # (a chunk: 11 taken back)
    assert srv.engine.runs_taken_back == 1
    if crash:       # right after the revival, before any push was answered
        srv = _hooked(system, folder, _pair(system, n_workers=2)[0], every)
    out = _cycle(srv, robots[0], run=11, step=1)
    return _logs(out), srv.engine.rejects


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_run_taken_back_stays_taken_back_after_a_crash(system, tmp_path):
    # PushServer.revive changed the retired runs with no checkpoint: with K = 1 a crash right
    # after it restored the run as retired, and the restored transfers (no state kept) never
    # took it back again: its pushes were refused for good. A revival is checkpointed now.
    expected = _revived_then(system, tmp_path / 'a', crash=False)
    assert expected[1] == 0
    assert _revived_then(system, tmp_path / 'b', crash=True) == expected


@pytest.mark.parametrize('system', SYSTEMS)
@pytest.mark.parametrize('every', [2, 3])
def test_a_run_taken_back_is_checkpointed_at_once_whatever_k(system, every, tmp_path):
    # The revival counted as one push answered (durable_progress): with K > 1 it was
    # checkpointed only when the count reached the next multiple of K, and a crash before
    # restored the run as retired, its pushes refused for good (not at most K pushes lost,
    # as K promises). A revival is checkpointed at once, like a stop order.
    expected = _revived_then(system, tmp_path / 'a', crash=False, every=every)
    assert expected[1] == 0
    assert _revived_then(system, tmp_path / 'b', crash=True, every=every) == expected


@pytest.mark.parametrize('system', SYSTEMS)
def test_stops_repeated_survive_a_restore(system):
    # summary.json's stops_repeated counted from 0 after a restore (not checkpointed); a
    # checkpoint from before the key still loads (0)
    engine, worker = _pair(system, n_workers=2, budget=1)
    srv = _push_server(engine, system, n_workers=2)
    srv.stops_repeated = 3
    sd = srv.state_dict()
    back = _push_server(_pair(system, n_workers=2, budget=1)[0], system, n_workers=2)
    back.load_state_dict(sd)
    assert back.stops_repeated == 3 and back.stats()['stops_repeated'] == 3
    del sd['counts']['stops_repeated']
    older = _push_server(_pair(system, n_workers=2, budget=1)[0], system, n_workers=2)
    older.load_state_dict(sd)
    assert older.stops_repeated == 0


@pytest.mark.parametrize('system', SYSTEMS)
@pytest.mark.parametrize('key', ['stall_time', 'triggers', 'counts'])
def test_a_push_checkpoint_missing_an_adapter_key_changes_nothing(system, key):
    # ServerAdapter.load_state_dict loaded the engine first, then raised on its own missing
    # key: a half-restored server (the engine's model and runs, the adapter's fresh counts)
    engine, worker = _pair(system, n_workers=2)
    srv = _push_server(engine, system, n_workers=2)
    robot = worker(0)
    for step in range(2):
        out = srv.on_message(_push(robot, 11, step), 0.0)
        for model in _pulls(out, 0):
            robot.on_message(model, 0.0)
    sd = srv.state_dict()
    del sd[key]
    back = _push_server(_pair(system, n_workers=2)[0], system, n_workers=2)
    model = back.engine.model().clone()
    with pytest.raises(KeyError):
        back.load_state_dict(sd)
    assert torch.equal(back.engine.model(), model) and back.engine.resumed == [False, False]
    assert _applied(back.engine) == 0


class _TimedThrough(_Through):
    """``_Through`` with the transfers' timeouts (why: the stop orders' repeats read them)."""

    end_timeout_s, lease_s = 2.0, 10.0

    def next_wakeup(self):
        """Return no deadline of their own (why: nothing is chunked here)."""
        return None

    def on_tick(self, now):
        """Return nothing to send (why: nothing is chunked here)."""
        return []


def _timed(folder, engine):
    """Return ``engine`` (two robots) behind its adapter (timed) and hooks (K = 1), restored."""
    hooks = ServerHooks(ServerAdapter(engine, 2, 0.1, _TimedThrough()),
                        engine.model().clone(), state_dir=str(folder), checkpoint_every=1)
    hooks.restore()
    return hooks


@pytest.mark.parametrize('system', SYSTEMS)
@pytest.mark.parametrize('speaks', [False, True])
def test_a_server_restored_from_before_a_stop_order_gives_up_the_robot_gone(
        system, speaks, tmp_path):
    # The budget is reached at robot 0's push (every robot's budget is done, engine.stopped)
    # and robot 1 is told to stop at its next push; the server is then restored from the
    # checkpoint before robot 1's order (older than it: robot 1 took its order and left).
    # The restored server waited at its start for robot 1 (PeerTimeout, no results) and,
    # started, for ever (finished: every order sent). Robot 1 is done (``stopped``): not
    # waited for at the start; silent for DONE_PATIENCE_S it is given up (stops_missed 1,
    # log stop_missed), the run finishes and its results' checkpoint says so. One that
    # speaks first is answered with its stop order, and nothing is missed.
    from rog_ros.nodes.push_systems import DONE_PATIENCE_S
    engine, worker = _pair(system, n_workers=2, budget=1)
    srv = _timed(tmp_path, engine)
    robots = [worker(0), worker(1)]
    assert _stops(srv.on_message(_push(robots[0], 11, 0), 0.0))
    older = (tmp_path / 'server.pt').read_bytes()
    assert _stops(srv.on_message(_push(robots[1], 12, 0), 1.0)) and srv.engine.finished
    (tmp_path / 'server.pt').write_bytes(older)          # restored from before robot 1's
    back = _timed(tmp_path, _pair(system, n_workers=2, budget=1)[0])
    a = back.engine
    assert a.stop_sent == [True, False] and a.stopped == [True, True] and not a.finished
    assert back.next_wakeup() == 0.0
    assert back.on_tick(100.0) == [] and not a.finished
    assert back.next_wakeup() == 100.0 + DONE_PATIENCE_S
    if speaks:
        assert _stops(back.on_message(_push(worker(1), 62, 0), 130.0))
        assert a.finished and a.stops_missed == 0 and a.stop_sent == [True, True]
        return
    assert back.on_tick(100.0 + DONE_PATIENCE_S - 0.5) == [] and not a.finished
    out = back.on_tick(100.0 + DONE_PATIENCE_S)
    assert [(g.name, g.worker) for g in out if isinstance(g, Log)] == [('stop_missed', 1)]
    from rog_ros.protocol.events import describe       # (events.csv names it)
    assert 'robot 1 was given up' in describe(out[-1])[1]
    assert a.finished and a.stops_missed == 1 and a.stats()['stops_missed'] == 1
    assert back.next_wakeup() is None or back.next_wakeup() > 100.0 + DONE_PATIENCE_S
    assert back.checkpoint_results_written()
    again = _timed(tmp_path, _pair(system, n_workers=2, budget=1)[0])
    assert again.run_done() and again.engine.stops_missed == 1 and again.engine.finished


class _Acking(_TimedThrough):
    """``_TimedThrough`` taking the robots' acks (why: a pull's acks never reach the engine)."""

    def on_message(self, msg, now):
        """Return nothing for the engine for an ack, else ``msg`` whole."""
        if isinstance(msg, TransferAck):
            return None, []
        return msg, []


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_robot_still_speaking_when_the_budget_is_done_is_not_given_up(system, tmp_path):
    # Robot 0's push reaches the budget (every robot's); robot 1 is told to stop at its next
    # push, which crosses a slow link: meanwhile it speaks only in acks and chunks, which the
    # transfers take (here: acks of a pull). Its silence was counted from the whole messages
    # the engine took: it was given up DONE_PATIENCE_S after the server's start while it
    # spoke, the run finished and the server left before its push came. And GSP's server,
    # which marks a robot stopped only as its order leaves, counted robot 1 as not done at
    # all (a restore from before its order waited for it at activate, PeerTimeout). Each
    # word counts now: robot 1 is waited for while it speaks and told to stop at its push.
    from rog_ros.nodes.push_systems import DONE_PATIENCE_S
    engine, worker = _pair(system, n_workers=2, budget=1)
    srv = ServerHooks(ServerAdapter(engine, 2, 0.1, _Acking()), engine.model().clone(),
                      state_dir=str(tmp_path), checkpoint_every=1)
    srv.restore()
    a = srv.engine
    assert srv.on_tick(0.0) == []
    assert _stops(srv.on_message(_push(worker(0), 11, 0), 0.0))
    assert a.stop_sent == [True, False] and a.stopped == [True, True] and not a.finished

    def ack(at):
        """Hand the server robot 1's ack of a chunk at ``at`` (why: it speaks, unfinished)."""
        return srv.on_message(TransferAck(transfer_id=1, sender=1, receiver=SERVER, seq=0,
                                          incarnation=12), at)

    ack(DONE_PATIENCE_S - 10.0)
    assert [g for g in srv.on_tick(DONE_PATIENCE_S + 10.0) if isinstance(g, Log)] == []
    assert not a.finished and a.stops_missed == 0
    assert srv.next_wakeup() == 2 * DONE_PATIENCE_S - 10.0
    ack(2 * DONE_PATIENCE_S - 20.0)
    assert srv.on_tick(2 * DONE_PATIENCE_S) == [] and not a.finished
    assert _stops(srv.on_message(_push(worker(1), 12, 0), 2 * DONE_PATIENCE_S + 5.0))
    assert a.finished and a.stops_missed == 0 and a.stop_sent == [True, True]


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_robot_not_heard_yet_gets_its_patience_from_when_the_budget_is_done(
        system, tmp_path):
    # Robot 1 has said nothing yet (a slow first computation) when robot 0's push reaches
    # the budget 100 s into the run. Its silence was counted from the server's first tick:
    # it was given up at once. As ps_final._gone_for_good counts a robot never heard, its
    # silence starts when it is first waited for: given up DONE_PATIENCE_S later, not before.
    from rog_ros.nodes.push_systems import DONE_PATIENCE_S
    engine, worker = _pair(system, n_workers=2, budget=1)
    srv = _timed(tmp_path, engine)
    a = srv.engine
    assert srv.on_tick(0.0) == [] and srv.next_wakeup() is None
    assert _stops(srv.on_message(_push(worker(0), 11, 0), 100.0))
    assert a._give_up_due() == 0.0                       # (looked at, at the next tick)
    assert srv.on_tick(100.0) == [] and not a.finished
    assert a._give_up_due() == 100.0 + DONE_PATIENCE_S
    assert srv.on_tick(100.0 + DONE_PATIENCE_S - 0.5) == [] and not a.finished
    out = srv.on_tick(100.0 + DONE_PATIENCE_S)
    assert [(g.name, g.worker) for g in out if isinstance(g, Log)] == [('stop_missed', 1)]
    assert a.finished and a.stops_missed == 1
