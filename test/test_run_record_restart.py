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
A fleet server's run record survives its restart from a checkpoint.

The record (evaluations, events, per-robot counters) rides in the server's checkpoint, goes
through the state file's plain-types loader, and a restored record writes exactly the files
the original would have; a record of another run is refused and changes nothing. The whole
path with a killed server process is the chaos scenario ``server-restart``
(test_chaos_fleet.py), which checks that ``timeseries.csv`` starts at iteration 0.
"""

import math
import os

import numpy as np
from protocol_fixtures import build
import pytest
from rog_ros.metrics import RunRecorder
from rog_ros.nodes import chaos_hooks, durable
from rog_ros.protocol.actions import Log


def _recorder(**kw) -> RunRecorder:
    args = {'system': 'rog:4', 'n_workers': 3, 'staleness': 4, 'trace': 'indoors', 'seed': 2,
            'workload': 'mpcol', 'target_accuracy': 0.5}
    args.update(kw)
    return RunRecorder(**args)


def _feed(rec: RunRecorder) -> None:
    rec.on_log(0.5, -1, Log('trigger', 1.0, 1, {'clock': 3}))
    rec.on_log(0.9, -1, Log('stall_s', 0.4, 1))
    # NumPy numbers in an event's info, as engines may put there
    rec.on_log(1.2, -1, Log('worker_suspended', 1.0, 2,
                            {'reason': 'link', 'active': [np.int64(0), np.int64(1)]}))
    rec.on_eval(0.0, 0.0, {'accuracy': 0.31, 'loss': float('nan')})
    rec.on_eval(2.0, 5.0, {'accuracy': 0.72, 'loss': 1.1})
    rec.on_compute(0, 0.25)
    # one sample per transfer (kept as an array in the state)
    rec.on_log(1.5, -1, Log('pull_done', 120.0, 1, {'seconds': 0.3, 'bytes': 4096,
                                                    'rows_total': 200, 'duration_s': 0.31}))


def _comparable(state: dict) -> dict:
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in state.items()}


def _files(rec: RunRecorder, out) -> dict:
    rec.write(str(out))
    return {n: (out / n).read_bytes() for n in ('summary.json', 'timeseries.csv', 'events.csv')}


def test_a_record_restored_from_a_state_file_writes_the_same_files(tmp_path):
    # Prepare
    rec = _recorder()
    _feed(rec)
    f = durable.StateFile(str(tmp_path / 'server.pt'))
    # Execute: through the checkpoint's own loader (plain types only)
    f.save({'run_record': rec.state()})
    back = _recorder()
    back.load_state(f.load()['run_record'])
    # Assert
    assert back.time_to_target_s == 2.0 and back.iterations_to_target == 5.0
    assert math.isnan(back.rows[0]['loss'])
    assert back.events[0][2] == 'worker_suspended' and back.events[0][4]['active'] == [0, 1]
    assert back.transfer_s == [0.3] and rec.state()['transfer_s'].dtype == np.float64
    assert _files(back, tmp_path / 'b') == _files(rec, tmp_path / 'a')


def test_a_restored_record_goes_on_recording(tmp_path):
    rec = _recorder()
    _feed(rec)
    back = _recorder()
    back.load_state(rec.state())
    for r in (rec, back):
        r.on_eval(4.0, 9.0, {'accuracy': 0.7})
        r.on_log(4.5, -1, Log('worker_readmitted', 1.0, 2, {'active': [0, 1, 2]}))
    assert [row['iteration'] for row in back.rows] == [0.0, 5.0, 9.0]
    assert [e[2] for e in back.events] == ['worker_suspended', 'worker_readmitted']
    assert back.triggers == [0, 1, 0] and back.stall_s == pytest.approx([0.0, 0.4, 0.0])
    assert _files(back, tmp_path / 'b') == _files(rec, tmp_path / 'a')


@pytest.mark.parametrize('other', [{'n_workers': 4}, {'system': 'ssp:4'},
                                   {'workload': 'eacol'}])
def test_a_record_of_another_run_is_refused_and_changes_nothing(other):
    theirs = _recorder(**other)
    _feed(theirs)
    mine = _recorder()
    mine.on_eval(0.0, 0.0, {'accuracy': 0.2})
    before = _comparable(mine.state())
    with pytest.raises(ValueError, match='run record'):
        mine.load_state(theirs.state())
    assert _comparable(mine.state()) == before


def test_a_record_with_damaged_per_robot_lists_is_refused():
    rec = _recorder()
    state = rec.state()
    state['stall_s'] = [0.0]
    with pytest.raises(ValueError, match='per-robot'):
        _recorder().load_state(state)


def test_server_checkpoints_carry_the_run_record_to_the_restored_server(tmp_path):
    # Prepare: a small fleet trained a few iterations, its server checkpointed with a record
    harness, server, *_ = build('rog:2', n=2, iters=6)
    harness.run(until=1.0)
    assert min(server.clock) >= 2
    record = {'record': {'rows': [{'time_s': 0.0, 'iteration': 0.0}]}, 'elapsed_s': 3.5}
    hooks = chaos_hooks.ServerHooks(server, server.w_srv, state_dir=str(tmp_path),
                                    checkpoint_every=1000, run_record=lambda: record)
    hooks.checkpoint()
    # Execute: a new server process restores it
    fresh = harness.new_server()
    again = chaos_hooks.ServerHooks(fresh, server.w_srv, state_dir=str(tmp_path))
    restored_id = again.restore()
    # Assert
    assert restored_id == 1 and again.restored_record == record
    assert list(fresh.clock) == list(server.clock)
    assert os.listdir(tmp_path) == ['server.pt']


def test_a_checkpoint_without_a_record_restores_the_engine_alone(tmp_path):
    harness, server, *_ = build('rog:2', n=2, iters=6)
    harness.run(until=1.0)
    chaos_hooks.ServerHooks(server, server.w_srv, state_dir=str(tmp_path)).checkpoint()
    again = chaos_hooks.ServerHooks(harness.new_server(), server.w_srv, state_dir=str(tmp_path))
    assert again.restore() == 1 and again.restored_record is None


def test_a_server_restored_from_a_finished_run_leaves_its_results_alone(tmp_path, caplog):
    # A robot rebooted after training (containers restart): the server restores a checkpoint
    # whose workers were all told to stop. It must say so and keep the run's files, not
    # replace them with a restart's record (checked by hand with rog_server on a finished
    # run's state directory: summary.json byte-identical, exit 0).
    import logging
    from types import SimpleNamespace
    from rog_ros.nodes import lifecycle as lc
    from rog_ros.nodes.server_node import ServerNode
    node = ServerNode.__new__(ServerNode)          # only what activate/finish use here
    node.args = SimpleNamespace(state_dir=str(tmp_path / 'state'), out=str(tmp_path / 'out'))
    node.hooks = SimpleNamespace(restored=7)
    node.life = lc.Lifecycle()
    node.life.trigger('configure')
    node.log = logging.getLogger('rog_server_finished_test')
    node._finished_before = True
    with caplog.at_level(logging.WARNING, logger='rog_server_finished_test'):
        assert node.activate() is True
    said = ' '.join(r.getMessage() for r in caplog.records)
    assert 'had already finished (checkpoint 7): nothing to resume' in said  # as rog fleet
    assert said.endswith(f'to train again, move {node.args.state_dir} away or give another '
                         '--state-dir')
    assert node.finish() == {}
    assert not (tmp_path / 'out').exists()


def test_the_server_checkpoints_every_stop_order_before_it_leaves(tmp_path):
    # A worker told to stop never speaks again: a server restored from a checkpoint older
    # than the order waited for it for ever (the crash sweep with membership: a server
    # killed 1 ms after a worker's stop order). The hooks stand in for the engine here, as
    # in the node, so whatever the engine asks to send, it sends after the checkpoint.
    harness, server, *_ = build('rog:2', n=3, iters=6)
    hooks = chaos_hooks.ServerHooks(server, server.w_srv, state_dir=str(tmp_path),
                                    checkpoint_every=1000)     # no clock-based checkpoint
    held = []
    write = hooks.checkpoint

    def checkpoint():
        write()
        held.append(list(server.stopped))
    hooks.checkpoint = checkpoint
    harness.server = hooks
    harness.run(until=60.0)
    assert server.finished
    # one checkpoint each time the set of stopped workers grew, the last with all three
    assert held and held[-1] == [True, True, True]
    assert all(sum(a) < sum(b) for a, b in zip(held, held[1:]))
    fresh = harness.new_server()
    chaos_hooks.ServerHooks(fresh, server.w_srv, state_dir=str(tmp_path)).restore()
    assert fresh.finished


@pytest.mark.parametrize('model_written', [True, False])
def test_the_finished_checkpoint_follows_the_written_results(model_written):
    # taken before the results, a server dying while it wrote them (or a full disk under
    # --out) left a state that said finished and results that never could be written
    from types import SimpleNamespace
    from rog_ros.nodes.server_node import ServerNode
    order = []
    node = ServerNode.__new__(ServerNode)          # only what finish uses here
    node._finished_before = False
    node.engine = SimpleNamespace(finished=False)   # (no robots to wait for)
    node._collect = lambda wait_s: order.append('collect')
    node.evaluator = SimpleNamespace(close=lambda: order.append('close'))
    node._save_model = lambda: order.append('model') or model_written
    node._write = lambda end: order.append('summary') or {'completed': True}
    node.hooks = SimpleNamespace(checkpoint_results_written=lambda: order.append('checkpoint'))
    node.args = SimpleNamespace(workers=2)
    # (a last look for robots of another build first: one heard since is taken back)
    node._look_for_incompatible = lambda ranks, now=None: order.append(('look', list(ranks)))
    assert node.finish() == {'completed': True}
    assert order == [('look', [0, 1]), 'collect', 'close', 'model', 'summary'] + (
        ['checkpoint'] if model_written else [])


def _record_events(rec: RunRecorder) -> list:
    """Return ``rec``'s events.csv rows without their time (why: the restore's clock)."""
    return [(e[1], e[2], e[3]) for e in rec.events]


def _tally(rec: RunRecorder) -> tuple:
    """Return what the server's logs count in ``rec``: events, triggers, stalls, transfers."""
    return (_record_events(rec), list(rec.triggers), [round(s, 9) for s in rec.stall_s],
            len(rec.transfer_s), rec.bytes_down, len(rec.rows_down))


@pytest.mark.parametrize('spec', ['rog:2', 'bsp', 'ssp:2', 'flown'])
def test_a_server_restored_from_a_checkpoint_records_the_logs_of_its_message_once(
        tmp_path, spec):
    # The hooks checkpoint after the engine's call, before the node records that call's
    # logs, so each checkpoint's run record lacks them: a server restored from it missed
    # the trigger, stall, pull_done, worker_done, ... of the message it was taken for
    # (events.csv, the per-robot counters, the transfer figures). The checkpoint keeps
    # them (restored_logs), and the restored record plus them equals the live record right
    # after that message was recorded: each once. Every checkpoint of the run is restored,
    # the progress ones (every push) and the stop orders'.
    from rog_ros.protocol.messages import SERVER
    harness, server, *_ = build(spec, n=3, iters=6, final_model=True)
    live = _recorder(system=spec, n_workers=3)
    (tmp_path / 'state').mkdir()
    hooks = chaos_hooks.ServerHooks(server, server.w_srv, state_dir=str(tmp_path / 'state'),
                                    checkpoint_every=1, run_record=live.state)
    harness.server = hooks
    taken, handle = [], harness._handle

    def recording(node, actions):
        """Record the server's logs as the node does, after the call; note checkpoints."""
        if node == SERVER:
            for a in actions:
                if isinstance(a, Log):
                    live.on_log(harness.now, SERVER, a)
        handle(node, actions)
        if node == SERVER and hooks.checkpoint_id != taken_id[0]:
            taken.append(((tmp_path / 'state' / 'server.pt').read_bytes(), _tally(live)))
            taken_id[0] = hooks.checkpoint_id
    taken_id = [0]
    harness._handle = recording
    harness.run(until=60.0)
    assert server.finished and len(taken) >= 6
    assert any(t[1][1] != taken[i - 1][1][1] for i, t in enumerate(taken) if i)  # triggers
    for i, (state, want) in enumerate(taken):
        (tmp_path / 'again').mkdir(exist_ok=True)
        (tmp_path / 'again' / 'server.pt').write_bytes(state)
        again = chaos_hooks.ServerHooks(harness.new_server(), server.w_srv,
                                        state_dir=str(tmp_path / 'again'))
        assert again.restore() is not None
        back = _recorder(system=spec, n_workers=3)
        back.load_state(again.restored_record)
        for at, log in again.restored_logs:
            back.on_log(at, SERVER, log)
        assert _tally(back) == want, f'checkpoint {i + 1} of {len(taken)}'


def test_a_checkpoint_with_damaged_unrecorded_logs_is_refused_in_one_line(tmp_path):
    harness, server, *_ = build('rog:2', n=2, iters=6)
    harness.run(until=1.0)
    hooks = chaos_hooks.ServerHooks(server, server.w_srv, state_dir=str(tmp_path),
                                    run_record=lambda: {'elapsed_s': 1.0})
    hooks._unrecorded = [(0.5, Log('trigger', 1.0, 1, {'clock': np.int64(3)}))]
    hooks.checkpoint()
    f = durable.StateFile(str(tmp_path / 'server.pt'))
    obj = f.load()
    assert obj['unrecorded_logs'] == [[0.5, 'trigger', 1.0, 1, '{"clock": 3}']]
    obj['unrecorded_logs'] = [[0.5, 'trigger', 'one', 1, '{}']]
    f.save(obj)
    fresh = harness.new_server()
    clock = list(fresh.clock)
    again = chaos_hooks.ServerHooks(fresh, server.w_srv, state_dir=str(tmp_path))
    with pytest.raises(durable.StateError, match='unrecorded logs are damaged') as err:
        again.restore()
    assert '\n' not in str(err.value) and list(fresh.clock) == clock
    assert again.restored is None and again.restored_logs == []


def test_a_run_record_whose_evaluation_errors_are_malformed_keeps_its_rows(caplog):
    # The checkpoint's evaluation errors (2026-12-08) are its least part: malformed, they
    # alone are dropped with a warning. Until then they dropped the whole record, and the
    # restored run's timeseries.csv and events.csv started at the restart
    import logging
    from rog_ros.nodes import clocks
    from rog_ros.nodes.server_node import ServerNode
    rec = _recorder()
    _feed(rec)
    node = ServerNode.__new__(ServerNode)
    node.recorder, node.log = _recorder(), logging.getLogger('rog_server_errors_test')
    node.evaluations, node._resumed = 0, None
    node.evaluation_errors, node.first_evaluation_error, node.last_evaluation_errors = \
        0, None, []
    saved = {'record': rec.state(), **clocks.stamp(), 'elapsed_s': 3.0, 'evaluations': 2,
             'evaluation_errors': 2, 'first_evaluation_error': 'at iteration 4: E: x',
             'last_evaluation_errors': 'at iteration 4: E: x'}      # (a string, not a list)
    with caplog.at_level(logging.WARNING, logger='rog_server_errors_test'):
        node._resume_record(saved)
    said = ' '.join(r.getMessage() for r in caplog.records)
    assert 'count of failed evaluations is not used' in said
    assert 'run record is not used' not in said
    assert [r['iteration'] for r in node.recorder.rows] == [0.0, 5.0]
    assert node.evaluations == 2 and node._resumed is not None and node._resumed[0] >= 3.0
    assert (node.evaluation_errors, node.first_evaluation_error,
            node.last_evaluation_errors) == (0, None, [])
    saved['last_evaluation_errors'] = ['at iteration 4: E: x']
    node._resume_record(saved)
    assert (node.evaluation_errors, node.last_evaluation_errors) == (2, ['at iteration 4: E: x'])


def test_a_checkpoints_unrecorded_logs_restored_after_a_reboot_keep_their_age(
        tmp_path, monkeypatch):
    # A Rog server's checkpoint at monotonic 314 s holds a log of 14 s (300 s before it);
    # its robot reboots and restores it 10 s later by the wall clock, at 20 s of the new
    # boot's clock: the log is put at -290 s (310 s before now), not at 14 s of an unrelated
    # clock (after the restore: the node placed it at the run's end). One boot: as it was.
    from rog_ros.nodes import clocks
    t = 1.7e9

    def set_clocks(boot, wall, mono):
        monkeypatch.setattr(clocks, 'boot_id', lambda: boot)
        monkeypatch.setattr(clocks, '_wall', lambda: wall)
        monkeypatch.setattr(clocks, '_monotonic', lambda: mono)
        monkeypatch.setattr(clocks, 'boot_clock', lambda: 5.0)

    harness, server, *_ = build('rog:2', n=2, iters=6)
    harness.run(until=1.0)
    set_clocks('boot-a', t, 314.0)
    hooks = chaos_hooks.ServerHooks(server, server.w_srv, state_dir=str(tmp_path),
                                    run_record=lambda: dict(clocks.mono_stamp(), elapsed_s=1.0))
    hooks._unrecorded = [(14.0, Log('trigger', 1.0, 1, {'clock': 3}))]
    hooks.checkpoint()

    def restored_at(boot, wall, mono):
        set_clocks(boot, wall, mono)
        again = chaos_hooks.ServerHooks(harness.new_server(), server.w_srv,
                                        state_dir=str(tmp_path))
        again.restore()
        return [at for at, _ in again.restored_logs]

    # Execute / Assert
    assert restored_at('boot-a', t + 10.0, 324.0) == [14.0]
    assert restored_at('boot-b', t + 10.0, 20.0) == [-290.0]
    # the wall clock stepped: the time away unknown, the run's clock goes on from the
    # checkpoint without it (``ServerNode._resume_record``), so the log is moved by none:
    # 300 s before the restore at 20 s, its place in the run record kept
    assert restored_at('boot-b', t - 3600.0, 20.0) == [-280.0]
    f = durable.StateFile(str(tmp_path / 'server.pt'))
    obj = f.load()
    obj['run_record']['boot_id'] = 'not a boot id'
    f.save(obj)
    fresh = harness.new_server()
    clock = list(fresh.clock)
    again = chaos_hooks.ServerHooks(fresh, server.w_srv, state_dir=str(tmp_path))
    with pytest.raises(durable.StateError, match='boot_id') as err:
        again.restore()
    assert '\n' not in str(err.value) and list(fresh.clock) == clock
    assert again.restored is None and again.restored_logs == []
