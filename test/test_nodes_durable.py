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
Durable node state files and the chaos fault layer, without processes.

State files round-trip the engines' state (tensors, NumPy arrays of every dtype the engines
use, tuple keys), refuse corrupt files with one line and leave no temporary files. The fault
layer parses its spec strictly and injects
seeded, counted faults.
"""

import os

import numpy as np
import pytest
from rog_ros.nodes import chaos_hooks, durable
import torch


def test_state_file_round_trips_engine_like_state(tmp_path):
    f = durable.StateFile(str(tmp_path / 'worker_0.pt'))
    obj = {'undurable': [(3, torch.arange(4, dtype=torch.uint8), np.arange(5, dtype=np.uint32),
                          np.array([2 ** 63 + 5], dtype=np.uint64))],
           'closed': {(0, 2 ** 64 - 1): {7: {
               'chunk_ranges': np.array([0, 4], np.uint32), 'final': True,
               'receive_time': 1.5}}},
           'versions': np.array([-1, 2], np.int32), 'mask': np.array([True, False]),
           'push': None}
    f.save(obj)
    got = f.load()
    assert got['undurable'][0][2].dtype == np.uint32
    assert got['undurable'][0][3].tolist() == [2 ** 63 + 5]
    assert got['closed'][(0, 2 ** 64 - 1)][7]['chunk_ranges'].tolist() == [0, 4]
    assert got['versions'].dtype == np.int32 and got['mask'].dtype == np.bool_
    assert torch.equal(got['undurable'][0][1], torch.arange(4, dtype=torch.uint8))
    assert sorted(os.listdir(tmp_path)) == ['worker_0.pt']       # no temporary file left
    assert f.stats()['saves'] == 1


def test_a_corrupt_state_file_is_refused_in_one_line(tmp_path):
    path = tmp_path / 'server.pt'
    path.write_bytes(b'\x80\x02not a checkpoint')
    with pytest.raises(ValueError, match='unreadable') as err:
        durable.StateFile(str(path)).load()
    assert '\n' not in str(err.value)


def test_a_state_file_with_a_flipped_bit_in_a_tensor_is_refused(tmp_path):
    # torch.load does not check the archive's checksums: the run went on from wrong numbers
    f = durable.StateFile(str(tmp_path / 'worker_0.pt'))
    values = torch.arange(1000, dtype=torch.float32)
    f.save({'engine': {'residual': values}})
    data = bytearray((tmp_path / 'worker_0.pt').read_bytes())
    at = data.find(values.numpy().tobytes()[:64])
    assert at > 0
    data[at + 400] ^= 0x01              # one bit of element 100
    (tmp_path / 'worker_0.pt').write_bytes(bytes(data))
    with pytest.raises(ValueError, match='unreadable .*fails its checksum') as err:
        f.load()
    assert '\n' not in str(err.value)


def test_a_state_file_of_an_unknown_compression_is_refused_in_one_line(tmp_path):
    # (zipfile raises NotImplementedError for it, not BadZipFile)
    f = durable.StateFile(str(tmp_path / 'worker_0.pt'))
    f.save({'engine': {'residual': torch.zeros(8)}})
    data = bytearray((tmp_path / 'worker_0.pt').read_bytes())
    entry = data.find(b'PK\x01\x02')             # the first central directory entry
    data[entry + 10:entry + 12] = (99).to_bytes(2, 'little')     # its compression method
    (tmp_path / 'worker_0.pt').write_bytes(bytes(data))
    with pytest.raises(ValueError, match='unreadable .NotImplementedError') as err:
        f.load()
    assert '\n' not in str(err.value)


def test_a_state_file_has_checksums_even_where_torch_was_told_to_leave_them_out(tmp_path):
    # (load checks them: without them every state file of the node would be refused)
    if not hasattr(torch.serialization, 'set_crc32_options'):
        pytest.skip('torch < 2.5 always writes them')
    was = torch.serialization.get_crc32_options()
    torch.serialization.set_crc32_options(False)
    try:
        f = durable.StateFile(str(tmp_path / 'worker_0.pt'))
        f.save({'engine': {'residual': torch.arange(8.0)}})
        assert torch.serialization.get_crc32_options() is False     # (left as it was set)
    finally:
        torch.serialization.set_crc32_options(was)
    assert torch.equal(f.load()['engine']['residual'], torch.arange(8.0))


def test_fault_spec_is_parsed_strictly():
    assert chaos_hooks.parse_faults('loss=0.1,dup=0.2,seed=3') == {
        'loss': 0.1, 'dup': 0.2, 'reorder': 0.0, 'seed': 3}
    for bad in ('lost=0.1', 'loss=x', 'dup=1.5'):
        with pytest.raises(ValueError, match='--chaos-faults'):
            chaos_hooks.parse_faults(bad)


class _Bus:

    def __init__(self):
        self.sent = []

    def publish(self, topic, msg):
        self.sent.append(getattr(msg, 'transfer_id', None))

    def poll(self, timeout_s=0.0):
        return []


def test_faulty_bus_drops_duplicates_and_reorders_only_chunks_and_acks():
    from rog_ros.protocol.messages import RowChunk, Schedule
    inner = _Bus()
    bus = chaos_hooks.FaultyBus(inner, loss=0.2, dup=0.2, reorder=0.2, seed=1)
    for i in range(500):
        bus.publish('up/chunks', RowChunk(transfer_id=i, seq=0, sender=0, receiver=-1, kind=0,
                                          clock=1))
    bus.poll()
    f = bus.injected
    assert f['dropped'] > 50 and f['duplicated'] > 30 and f['reordered'] > 30
    assert len(inner.sent) == 500 - f['dropped'] + f['duplicated']
    assert inner.sent != sorted(inner.sent)                   # some arrive out of order
    n = len(inner.sent)
    bus.publish('w0/schedule', Schedule(worker=0, clock=1, push_deadline_s=0.0))
    assert len(inner.sent) == n + 1                           # other types pass untouched


def test_a_state_that_cannot_be_written_stops_the_node_instead_of_dropping_a_message(tmp_path):
    # a full disk under --state-dir: the OSError of the save was caught as bad input, the
    # message and the engine's answer dropped, and the worker waited out its server timeout
    from rog_ros.nodes.driver import EngineDriver, StateWriteError
    (tmp_path / 'state').write_text('a file where the state directory should be')
    f = durable.StateFile(str(tmp_path / 'state' / 'worker_0.pt'))
    with pytest.raises(StateWriteError, match=r'cannot save this node\'s state to .*worker_0.pt'
                                              r': .*the same command resumes from it'):
        f.save({'clock': 3})

    class SavingEngine:
        rejects = 0

        def on_message(self, msg, now):
            f.save({'clock': 4})

    driver = EngineDriver.__new__(EngineDriver)
    driver.engine, driver.engine_errors = SavingEngine(), 0
    with pytest.raises(StateWriteError):
        driver.deliver(object(), 0.0)
    assert driver.engine_errors == 0


def test_a_checkpoint_of_other_settings_is_refused_in_one_line(tmp_path):
    # resuming a rog run's --state-dir with --sync ssp: torch's shape mismatch was a traceback
    from protocol_fixtures import build
    _, rog, _, _, _ = build('rog:4', n=2)
    _, ssp, _, _, _ = build('ssp:4', n=2)
    saved = chaos_hooks.ServerHooks(rog, rog.w_srv.clone(), str(tmp_path))
    saved.checkpoint()
    hooks = chaos_hooks.ServerHooks(ssp, ssp.w_srv.clone(), str(tmp_path))
    with pytest.raises(durable.StateError, match='does not fit this fleet .*; the state of a '
                                                 'run with other settings') as err:
        hooks.restore()
    assert '\n' not in str(err.value)


def test_a_checkpoint_says_finished_once_the_results_are_written(tmp_path):
    # the checkpoint taken with the stop orders still owes the final models, and no later
    # one was written: a server started again on the state of a finished run took it for
    # unfinished, waited for robots that had left and rewrote the run's results. A finished
    # checkpoint taken before the results were written would have lost them for good (a
    # server dying while it writes them), so it is taken after (ServerNode.finish)
    from protocol_fixtures import build

    def restored_finished():
        _, fresh, _, _, _ = build('rog:4', n=2, iters=8, final_model=True)
        back = chaos_hooks.ServerHooks(fresh, fresh.w_srv.clone(), str(tmp_path))
        back.restore()
        # (since 2026-12-07 every stop order is checkpointed before it leaves, so the
        # restored engine may be finished: the run is over once its results are written)
        return back.run_done()
    harness, server, _, _, _ = build('rog:4', n=2, iters=8, final_model=True)
    hooks = chaos_hooks.ServerHooks(server, server.w_srv.clone(), str(tmp_path),
                                    checkpoint_every=100)
    harness.server = hooks
    harness.run(until=60.0)
    assert server.finished and hooks.checkpoint_id >= 1
    assert not restored_finished()            # dies now: restored, it writes the results
    assert hooks.checkpoint_results_written()
    assert restored_finished()                # results written: a restart leaves them alone
    _, unfinished, _, _, _ = build('rog:4', n=2, iters=8, final_model=True)
    assert not chaos_hooks.ServerHooks(unfinished, unfinished.w_srv.clone(),
                                       str(tmp_path / 'other')).checkpoint_results_written()


def test_a_resumed_run_keeps_its_counts(tmp_path):
    # a fleet resumed from its state counted compute time and late transfers from the
    # restart on (compute 2.3 s where the run had computed 5.5, late pushes 0)
    from protocol_fixtures import build
    harness, server, workers, _, _ = build('rog:4', n=2, iters=12, save_states=True)
    saver = chaos_hooks.WorkerHooks(workers[0], 0, str(tmp_path))
    saver.node_state = lambda: {'compute_s': 12.5}
    harness.workers[0] = saver
    sh = chaos_hooks.ServerHooks(server, server.w_srv.clone(), str(tmp_path))
    harness.server = sh
    harness.run(until=60.0)
    sh.checkpoint()
    counts = {k: getattr(server, k) for k in ('late_pushes', 'late_rows', 'late_pulls',
                                              'late_pull_rows', 'too_slow_suspensions')}
    assert counts['late_pushes'] + counts['late_pulls'] > 0
    _, fresh, fresh_workers, _, _ = build('rog:4', n=2, iters=12, save_states=True, seed=1)
    chaos_hooks.ServerHooks(fresh, fresh.w_srv.clone(), str(tmp_path)).restore()
    assert {k: getattr(fresh, k) for k in counts} == counts
    again = chaos_hooks.WorkerHooks(fresh_workers[0], 0, str(tmp_path))
    # (the run went to its end: the robot was told to stop, which its state says too)
    assert again.restore() and again.restored_node_state == {'compute_s': 12.5, 'finished': True}


def test_a_resuming_worker_reads_its_state_file_once(tmp_path, monkeypatch):
    # activate asks whether the robot had finished, then restores: two loads of a file the
    # size of the model on every resumed start
    from protocol_fixtures import build
    harness, _, workers, _, _ = build('rog:4', n=2, iters=4, save_states=True)
    saver = chaos_hooks.WorkerHooks(workers[0], 0, str(tmp_path))
    harness.workers[0] = saver
    harness.run(until=0.5)                  # mid-run: pushes saved, not yet told to stop
    _, _, fresh_workers, _, _ = build('rog:4', n=2, iters=4, save_states=True, seed=1)
    again = chaos_hooks.WorkerHooks(fresh_workers[0], 0, str(tmp_path))
    loads = []
    real_load = again.state.load
    monkeypatch.setattr(again.state, 'load', lambda: loads.append(1) or real_load())
    assert not again.finished_before()
    assert again.restore() and torch.equal(fresh_workers[0].residual, workers[0].residual)
    assert len(loads) == 1


def test_a_state_is_saved_without_a_copy_of_its_bytes_in_memory(tmp_path):
    # torch.save went into a BytesIO first: one more copy of the state at every save (a
    # server checkpoint of a 38 MB model with 2 robots is 151 MB: +284 MB of peak RSS)
    import tracemalloc
    f = durable.StateFile(str(tmp_path / 'server.pt'))
    state = {'w_srv': torch.ones(1 << 20), 'mirror': torch.ones(2, 1 << 20)}   # 12 MiB
    tracemalloc.start()
    try:
        f.save(state)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert os.path.getsize(f.path) > 12 << 20
    assert peak < 2 << 20                      # was > 12 MiB
    back = f.load()
    assert torch.equal(back['mirror'], state['mirror']) and os.listdir(tmp_path) == ['server.pt']


def test_a_full_disk_during_a_streamed_save_is_the_state_write_error(tmp_path, monkeypatch):
    # torch turns the file's OSError into a RuntimeError without the errno; the node must
    # still stop with the one line that says to free space (guard of the streamed save)
    import errno
    from rog_ros import atomic
    from rog_ros.nodes.driver import StateWriteError
    real_fdopen = atomic.os.fdopen

    class _Full:
        """Stand for a file on a full disk: every write fails with ENOSPC."""

        def __init__(self, f):
            self.f = f

        def write(self, data):
            """Fail as a full disk does."""
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name):
            """Give the real file's other methods."""
            return getattr(self.f, name)

        def __enter__(self):
            """Enter as the real file does."""
            return self

        def __exit__(self, *exc):
            """Close the real file."""
            self.f.close()

    monkeypatch.setattr(atomic.os, 'fdopen', lambda fd, mode: _Full(real_fdopen(fd, mode)))
    f = durable.StateFile(str(tmp_path / 'server.pt'))
    with pytest.raises(StateWriteError, match=r'server.pt: No space left on device; free '):
        f.save({'w_srv': torch.ones(1000)})
    assert os.listdir(tmp_path) == []


def test_the_nodes_save_the_engines_own_model_sized_tensors_not_copies(tmp_path, monkeypatch):
    # state_dict() cloned the model, mirrors, residual and momentum just to serialise them
    # at once: 2 + N model sizes more per server checkpoint, 3 per robot save (twice an
    # iteration); measured with a 37.9 MB model, 126 MB more peak RSS on each robot
    from protocol_fixtures import build
    from rog_ros.protocol.actions import SaveState
    _, server, workers, _, _ = build('rog:4', n=2)
    saved = []
    monkeypatch.setattr(durable.StateFile, 'save', lambda self, obj: saved.append(obj))
    chaos_hooks.ServerHooks(server, server.w_srv.clone(), str(tmp_path)).checkpoint()
    sd = saved[-1]['engine']
    assert sd['w_srv'].data_ptr() == server.w_srv.data_ptr()
    assert sd['mirror'].data_ptr() == server.mirror.data_ptr()
    w = workers[0]
    hooks = chaos_hooks.WorkerHooks(w, 0, str(tmp_path))
    hooks._observe(lambda: [SaveState()])
    sd = saved[-1]['engine']
    assert sd['residual'].data_ptr() == w.residual.data_ptr()
    assert sd['w'].data_ptr() == w.w.data_ptr() or w._late_q_pending
    # a caller that keeps the state (tests, the fault sweeps) still gets copies
    assert server.state_dict()['w_srv'].data_ptr() != server.w_srv.data_ptr()
    assert w.state_dict()['residual'].data_ptr() != w.residual.data_ptr()
    assert torch.equal(w.state_dict(copy=False)['w'], w.state_dict()['w'])


def test_a_checkpoint_after_the_final_model_saves_it_without_a_copy(tmp_path, monkeypatch):
    # the checkpoints of the run's end (stop orders, results written) still cloned the final
    # model: one model size more at the server's peak with --state-dir (38 MB here)
    from protocol_fixtures import build
    _, server, _, _, _ = build('rog:4', n=2)
    server.final_values = server.mirror.mean(0)
    saved = []
    monkeypatch.setattr(durable.StateFile, 'save', lambda self, obj: saved.append(obj))
    chaos_hooks.ServerHooks(server, server.w_srv.clone(), str(tmp_path)).checkpoint()
    assert saved[-1]['engine']['final_values'].data_ptr() == server.final_values.data_ptr()
    assert server.state_dict()['final_values'].data_ptr() != server.final_values.data_ptr()


def test_a_robot_saves_its_state_once_per_push_not_per_commit_pull_or_retransmission(
        tmp_path, monkeypatch):
    # A robot saved its whole state (model, residual, momentum: 114 MB fsynced with a 37.9 MB
    # model) before each END, at each END retransmission, after each commit and each pull:
    # 3.3 s per iteration against 0.97 without --state-dir. A restart redoes a commit (the
    # saved push's END is re-sent and answered) and a pull (its rejoin's snapshot), so once
    # per push is enough; the restart tests check that nothing is lost or doubled.
    from protocol_fixtures import build
    from rog_ros.protocol.messages import FLAG_END, RowChunk, SERVER, TransferAck
    from rog_ros.sim.fault_fleet import random_faults
    harness, server, workers, _, layout = build(
        'rog:4', n=2, iters=12, save_states=True, track=False,
        fault=random_faults(3, p_drop=0.3, p_dup=0.0, p_late=0.0, only=TransferAck))
    harness.workers = [chaos_hooks.WorkerHooks(w, r, str(tmp_path))
                       for r, w in enumerate(workers)]
    saves, ends, pushes = [], [0], set()
    monkeypatch.setattr(durable.StateFile, 'save', lambda self, obj: saves.append(
        sum(t.numel() * t.element_size() for t in obj['engine'].values()
            if isinstance(t, torch.Tensor) and t.numel() == layout.n_params)))
    send = harness._send

    def sending(src, dst, msg):
        """Count the robots' push ENDs, each retransmission too, and the pushes they close."""
        if src != SERVER and isinstance(msg, RowChunk) and msg.flags & FLAG_END:
            ends[0] += 1
            pushes.add((src, int(msg.incarnation), msg.transfer_id))
        send(src, dst, msg)
    harness._send = sending
    harness.start()
    harness.run(until=600)
    assert server.finished
    model = layout.n_params * 4
    iterations = sum(w.clock for w in workers)
    assert ends[0] > len(pushes)               # ENDs were retransmitted (acks were lost)
    assert len(saves) == len(pushes) + 2       # one per push, and one as each robot stops
    assert max(saves) == 3 * model             # model, residual, momentum
    # (before: 5.9 saves per iteration here, 17.6 model sizes)
    assert sum(saves) / iterations <= 3 * model * len(pushes) / iterations + 0.5 * model
    assert len(saves) / iterations < 2.5
