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
"""Malformed or foreign messages are rejected, counted, and change nothing."""

import dataclasses

import numpy as np
from protocol_fixtures import build
import pytest
from rog_ros.core.compress import RowScaledSign
from rog_ros.protocol.actions import Log
from rog_ros.protocol.messages import (
    FLAG_FRAGMENT, KIND_GRAD, RowChunk, Schedule, SERVER, TransferAck)
import torch


def state(server):
    """Everything a rejected message must leave alone: model, versions and protocol state."""
    rcv = server.receiver
    return (server.mirror.clone(), server.w_srv.clone(), server.versions.v.clone(),
            torch.tensor(server.clock), torch.tensor(server.next_tid),
            sorted(server.pending.items()), sorted(rcv.open), sorted(rcv.closed),
            sorted(rcv.newest_closed.items()), [d is None for d in server.downlinks],
            server.bytes_up)


def assert_same(before, after):
    for a, b in zip(before, after):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b)
        else:
            assert a == b


def good_chunk(layout):
    # one real row of the default codec's size (row sign: 4 scale bytes + ceil(len/8))
    n = 4 + int((layout.row_len[0] + 7) // 8)
    # a known incarnation: the chunk after the first one reaches the open transfer (a message
    # of a worker run the server never heard of is pre-checked, statelessly, before that)
    return RowChunk(transfer_id=1, seq=0, sender=0, receiver=SERVER, kind=KIND_GRAD, clock=1,
                    codec=RowScaledSign.codec_id, row_ranges=np.array([0, 1], np.uint32),
                    incarnation=7,
                    tensor_ids=np.array([int(layout.row_tensor[0])], np.uint32),
                    scales=np.array([0.5], np.float32), payload=bytes(n))


BAD = {
    'schema': {'schema_version': 99},
    'codec': {'codec': 0},
    'row out of range': {'row_ranges': np.array([0, 10**6], np.uint32)},
    'reversed range': {'row_ranges': np.array([5, 2], np.uint32)},
    'short payload': {'payload': b'\x00'},
    'nan scale': {'scales': np.array([np.nan], np.float32)},
    'bad tensor id': {'tensor_ids': np.array([9999], np.uint32)},
    'fragment of two rows': {'flags': FLAG_FRAGMENT, 'row_ranges': np.array([0, 2], np.uint32)},
    'unknown sender': {'sender': 17},
    'wrong kind': {'kind': 1},
}


@pytest.mark.parametrize('case', sorted(BAD))
def test_bad_chunk_is_rejected_and_changes_nothing(case):
    _, server, _, _, layout = build('rog:4', n=2)
    before = state(server)
    msg = dataclasses.replace(good_chunk(layout), **BAD[case])
    actions = server.on_message(msg, 0.0)
    assert server.rejects == 1
    assert [a.name for a in actions if isinstance(a, Log)] == ['reject']
    assert not [a for a in actions if not isinstance(a, Log)]    # no ack, nothing sent
    assert server.receiver.open == {}                            # no transfer opened
    assert_same(before, state(server))


@pytest.mark.parametrize('case', sorted(BAD))
def test_bad_chunk_in_an_open_transfer_changes_nothing(case):
    # A good chunk opens transfer 1; a bad one for the same transfer must not touch it.
    _, server, _, _, layout = build('rog:4', n=2)
    server.on_message(good_chunk(layout), 0.0)
    (key,) = server.receiver.open          # (sender, incarnation, transfer id)
    assert (key[0], key[-1]) == (0, 1)
    inc = server.receiver.open[key]
    held = (inc.buf.copy(), inc.have.copy(), set(inc.seqs), inc.bytes, inc.scales.copy())
    before = state(server)
    msg = dataclasses.replace(good_chunk(layout), seq=1, **BAD[case])
    actions = server.on_message(msg, 0.0)
    assert server.rejects == 1
    assert not [a for a in actions if not isinstance(a, Log)]
    assert_same(before, state(server))
    if key in server.receiver.open:     # (a foreign sender's chunk never reaches it)
        inc = server.receiver.open[key]
        assert np.array_equal(inc.buf, held[0]) and np.array_equal(inc.have, held[1])
        assert inc.seqs == held[2] and inc.bytes == held[3]
        assert np.array_equal(inc.scales, held[4], equal_nan=True)


def test_validation_check_catches_a_planted_bug(monkeypatch):
    # Planted bug: the receiver records a chunk's rows before it validates them.
    from rog_ros.protocol import transfer
    real = transfer.IncomingTransfer.on_chunk

    def early(self, chunk, now):
        self.seqs.add(int(chunk.seq))
        return real(self, chunk, now)
    monkeypatch.setattr(transfer.IncomingTransfer, 'on_chunk', early)
    with pytest.raises(AssertionError):
        test_bad_chunk_in_an_open_transfer_changes_nothing('short payload')
    monkeypatch.undo()

    # Planted bug: a bad first chunk leaves its new transfer open (a model-sized buffer): the
    # receiver registers the transfer before the chunk is validated.
    real_rcv = transfer.Receiver.on_chunk

    def opening(self, chunk, now):
        key = (chunk.sender, chunk.incarnation, chunk.transfer_id)
        if key not in self.open:
            self.open[key] = transfer.IncomingTransfer(
                transfer_id=chunk.transfer_id, sender=chunk.sender, kind=chunk.kind,
                clock=chunk.clock, layout=self.layout, codec=self.codec, now=now,
                incarnation=chunk.incarnation)
        return real_rcv(self, chunk, now)
    monkeypatch.setattr(transfer.Receiver, 'on_chunk', opening)
    _, server, _, _, layout = build('rog:4', n=2)
    # the server hears of worker 0's run first (a stray ack), so the chunk reaches the receiver
    server.on_message(TransferAck(transfer_id=1, sender=0, receiver=SERVER, seq=0,
                                  final=False, incarnation=7), 0.0)
    assert server.rejects == 0
    server.on_message(dataclasses.replace(good_chunk(layout), **BAD['short payload']), 0.0)
    assert server.rejects == 1 and server.receiver.open     # what the check looks for


def test_good_chunk_is_accepted():
    _, server, _, _, layout = build('rog:4', n=2)
    actions = server.on_message(good_chunk(layout), 0.0)
    assert server.rejects == 0
    assert any(getattr(a, 'msg', None) is not None and isinstance(a.msg, TransferAck)
               for a in actions)


def test_worker_rejects_foreign_and_nonfinite_messages():
    _, _, workers, _, _ = build('rog:4', n=2)
    w = workers[0]
    w.on_message(Schedule(worker=1, clock=0, push_deadline_s=1.0), 0.0)
    w.on_message(Schedule(worker=0, clock=0, push_deadline_s=float('nan')), 0.0)
    w.on_message(TransferAck(transfer_id=1, sender=5, receiver=0, seq=0), 0.0)
    assert w.rejects == 3
    assert w.push_deadline_s == 0.0


def test_nonfinite_gradient_is_dropped():
    _, _, workers, _, _ = build('rog:4', n=2)
    w = workers[0]
    w.start(0.0)
    grad = torch.zeros_like(w.w)
    grad[3] = float('inf')
    actions = w.on_compute_done(grad, 0.1)
    assert w.clock == 0 and float(w.residual.abs().sum()) == 0.0
    assert any(isinstance(a, Log) and a.name == 'nonfinite_gradient' for a in actions)


def test_a_nonfinite_gradient_is_invisible_to_the_server():
    # Dropped and computed again: nothing reaches the server, nothing is lost or doubled.
    from test_protocol_conservation import check_invariants
    harness, server, workers, _, _ = build('rog:2', n=2, iters=8, dtype=torch.float64)
    harness.log_events = True
    inner, calls = harness.grad_fn, {'n': 0}

    def grad_fn(rank, w, clock):
        g = inner(rank, w, clock)
        if rank == 0:
            calls['n'] += 1
            if calls['n'] in (3, 4, 6):
                g = g.clone()
                g[5] = float('nan')
        return g
    harness.grad_fn = grad_fn
    stats = harness.run(until=200)
    names = [a.name for _, _, a in harness.stats.logs]
    assert server.finished and [w.clock for w in workers] == [8, 8]
    assert stats.iterations == [8 + 3, 8]              # (computations: 3 computed again)
    assert names.count('nonfinite_gradient') == 3 and 'worker_restart' not in names
    check_invariants(harness, server, workers)


def test_what_the_computation_after_a_nonfinite_gradient_sends_is_stamped():
    # Computed again, the iteration may start a late push (late rows; in a fleet when the
    # last one ended before the computation did). Its messages went out without the worker's
    # incarnation, and the server took them for a restarted worker: a reset and a snapshot
    # pull per non-finite gradient (`robot 0 restarted` in a fleet run with --lr 1e12).
    from rog_ros.protocol.actions import Send
    from rog_ros.protocol.messages import FLAG_LATE
    _, server, workers, _, _ = build('rog:4', n=2)
    w = workers[0]
    w.start(0.0)
    w.server_incarnation = server.incarnation
    late = RowChunk(transfer_id=1, seq=0, sender=0, receiver=SERVER, kind=KIND_GRAD, clock=0,
                    flags=FLAG_LATE, codec=w.codec.codec_id)
    w._start_late_push = lambda now: [Send(SERVER, late)]     # (as when one is due)
    grad = torch.zeros_like(w.w)
    grad[3] = float('nan')
    sends = [a for a in w.on_compute_done(grad, 0.1) if isinstance(a, Send)]
    assert sends and all(a.msg.incarnation == w.incarnation for a in sends)
    assert all(a.msg.target_incarnation == server.incarnation for a in sends)


def test_a_worker_whose_gradients_stay_nonfinite_stops_as_diverged():
    from rog_ros.protocol.actions import Stopped
    from rog_ros.protocol.worker import NONFINITE_LIMIT
    _, _, workers, _, _ = build('rog:4', n=2)
    w = workers[0]
    w.start(0.0)
    bad = torch.full_like(w.w, float('inf'))
    for k in range(NONFINITE_LIMIT - 1):       # a bad batch or four: computed again
        actions = w.on_compute_done(bad, 0.1 * k)
        assert w.state == 'computing' and not any(isinstance(a, Stopped) for a in actions)
    w.on_compute_done(torch.zeros_like(w.w), 1.0)   # a finite one: the count starts over
    assert w.nonfinite_in_a_row == 0 and w.clock == 1
    w2 = workers[1]
    w2.start(0.0)
    for k in range(NONFINITE_LIMIT):
        actions = w2.on_compute_done(bad, 0.1 * k)
    stopped = [a for a in actions if isinstance(a, Stopped)]
    assert len(stopped) == 1 and stopped[0].failed and 'diverged' in stopped[0].reason
    assert [a.name for a in actions if isinstance(a, Log)] == ['diverged']
    assert w2.state == 'stopped' and w2.clock == 0 and float(w2.residual.abs().sum()) == 0.0
    assert w2.on_compute_done(bad, 9.0) == []       # a computation that was still running


def test_nonfinite_identity_payload_in_an_open_transfer_changes_nothing():
    _, server, _, _, layout = build('rog:4', n=2, codec='identity')
    n = int(layout.row_len[0])
    good = RowChunk(transfer_id=1, seq=0, sender=0, receiver=SERVER, kind=KIND_GRAD, clock=1,
                    codec=server.codec.codec_id, row_ranges=np.array([0, 1], np.uint32),
                    payload=np.zeros(n, np.float32).tobytes(), incarnation=7)
    server.on_message(good, 0.0)
    assert server.rejects == 0
    (key,) = server.receiver.open          # (sender, incarnation, transfer id)
    inc = server.receiver.open[key]
    have, buf = inc.have.copy(), inc.buf.copy()
    bad = dataclasses.replace(good, seq=1, row_ranges=np.array([1, 2], np.uint32),
                              payload=np.full(int(layout.row_len[1]), np.nan,
                                              np.float32).tobytes())
    server.on_message(bad, 0.0)
    assert server.rejects == 1
    assert np.array_equal(inc.have, have) and np.array_equal(inc.buf, buf)


def test_urgent_rows_make_a_pulling_worker_push_them_and_bad_ranges_change_nothing():
    _, _, workers, _, layout = build('rog:4', n=2)
    w = workers[0]
    w.state, w.clock = 'pulling', 7
    before, rejects = w.withheld.clone(), w.rejects
    for bad in ([5, 3], [0, layout.n_rows + 1], [1]):          # descending, past the end, odd
        out = w.on_message(Schedule(worker=0, clock=7, push_deadline_s=0.5,
                                    urgent_rows=np.asarray(bad, np.uint32)), 1.0)
        assert [a.name for a in out] == ['reject']
        assert torch.equal(w.withheld, before) and w.push is None
        assert w.push_deadline_s == 0.0                            # the schedule changed nothing
    assert w.rejects == rejects + 3
    out = w.on_message(Schedule(worker=0, clock=7, push_deadline_s=0.0,
                                urgent_rows=np.asarray([2, 4], np.uint32)), 1.0)
    assert any(isinstance(a, Log) and a.name == 'urgent_rows' for a in out)
    assert w.push is not None and w.state == 'pushing'
    sent = set(w.push.order[:w.push.n_mandatory_rows].tolist())
    assert {2, 3} <= sent                                          # now mandatory
