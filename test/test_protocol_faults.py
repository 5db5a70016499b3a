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
"""Issue 9 defects 4, 5 and 7: closed-transfer caches, RowVersions validation, input bounds."""

import dataclasses

import numpy as np
from protocol_fixtures import build
import pytest
from rog_ros.core.compress import RowScaledSign
from rog_ros.protocol.messages import (
    FLAG_END, ids_from_ranges, KIND_GRAD, MessageError, RowChunk, RowVersions, SERVER,
    TransferAck)
from test_protocol_conservation import check_invariants
import torch

ROW = RowScaledSign.codec_id    # the default codec (the fixtures' 'row')


def end_chunk(sender, tid, clock=1, inc=0, seq=0):
    """Return the END of a transfer (``seq``: how many data chunks its sender sent)."""
    return RowChunk(transfer_id=tid, seq=seq, sender=sender, receiver=SERVER, kind=KIND_GRAD,
                    clock=clock, flags=FLAG_END, codec=ROW, incarnation=inc)


def row_chunk(layout, tid=1, seq=0, row=0, clock=1, sender=0, payload=None, codec=None):
    codec = ROW if codec is None else codec
    n = int((layout.row_len[row] + 7) // 8) + 4 if codec == ROW else int(layout.row_len[row]) * 8
    return RowChunk(transfer_id=tid, seq=seq, sender=sender, receiver=SERVER, kind=KIND_GRAD,
                    clock=clock, codec=codec, row_ranges=np.array([row, row + 1], np.uint32),
                    tensor_ids=np.array([int(layout.row_tensor[row])], np.uint32),
                    scales=np.array([0.5], np.float32),
                    payload=bytes(n) if payload is None else payload)


def server_state(server):
    return (server.mirror.clone(), server.w_srv.clone(), server.versions.v.clone())


def assert_unchanged(before, server):
    for a, b in zip(before, server_state(server)):
        assert torch.equal(a, b)


# ---------------------------------------------------------------- defect 4
def test_closed_cache_is_pruned_per_sender():
    # Worker 0 (slow) closes transfer 1 and loses our final ack; worker 1 (fast) closes many.
    _, server, _, _, _ = build('rog:4', n=2)
    rx = server.receiver
    _, inc = rx.on_chunk(end_chunk(0, 1), 0.0)
    first = rx.final_ack(inc, np.zeros(0, np.uint32), 0.0)
    for tid in range(1, 400):
        _, inc = rx.on_chunk(end_chunk(1, tid, clock=1 + tid % 9), 0.0)
        rx.final_ack(inc, np.zeros(0, np.uint32), 0.0)
    # Worker 0 repeats its END: it must get the very same answer, not silence.
    acks, closed = rx.on_chunk(end_chunk(0, 1), 1.0)
    assert closed is None and acks == [first]
    assert sum(len(v) for v in rx.closed.values()) <= 2 * rx.keep_closed   # still bounded


# ---------------------------------------------------------------- defect 5
def test_ids_from_ranges_checks_before_allocating():
    with pytest.raises(MessageError):
        ids_from_ranges(np.array([0, 2 ** 32 - 1], np.uint32), limit=100)
    with pytest.raises(MessageError):
        ids_from_ranges(np.array([0, 50, 10, 60], np.uint32), limit=100)   # overlapping
    assert ids_from_ranges(np.array([2, 4, 7, 8], np.uint32), limit=100).tolist() == [2, 3, 7]


def test_malformed_row_versions_change_nothing():
    # A RowVersions whose row runs leave the model passed the shallow check, then raised after
    # the rows were applied and the transfer closed: the worker applied them twice.
    state = {'done': 0}

    def fault(msg, src, dst, now):
        if isinstance(msg, RowVersions) and state['done'] < 3 and len(msg.run_starts):
            state['done'] += 1
            bad = dataclasses.replace(msg, run_lengths=msg.run_lengths.copy())
            bad.run_lengths[-1] = 10 ** 6
            return [('replace', bad)]
        return [0.0]

    harness, server, workers, _, _ = build('rog:4', n=2, iters=6, dtype=torch.float64)
    orig = harness._send

    def send(src, dst, msg):
        out = fault(msg, src, dst, harness.now)
        if out and isinstance(out[0], tuple):
            msg = out[0][1]
        orig(src, dst, msg)
    harness._send = send
    stats = harness.run(until=200)
    assert state['done'] == 3
    assert stats.iterations == [6, 6]
    assert sum(w.rejects for w in workers) >= 3
    check_invariants(harness, server, workers)


def test_pending_versions_keep_no_forged_future_transfer():
    _, _, workers, _, _ = build('rog:4', n=2)
    w = workers[0]
    for tid in (10 ** 9, 10 ** 9 + 1, 5000):
        w.on_message(RowVersions(transfer_id=tid, receiver=0, n_workers=2), 0.0)
    assert len(w.pending_versions) == 0 and w.rejects == 3


# ---------------------------------------------------------------- defect 7
@pytest.mark.parametrize('clock', [10 ** 6, 2 ** 31 + 5, -3])
def test_forged_clock_is_rejected(clock):
    _, server, _, _, layout = build('rog:4', n=2, iters=20)
    before = server_state(server)
    out = server.on_message(row_chunk(layout, clock=clock), 0.0)
    out += server.on_message(end_chunk(0, 1, clock=clock), 0.0)
    assert server.rejects >= 1
    assert not any(isinstance(getattr(a, 'msg', None), TransferAck) and a.msg.final
                   and len(a.msg.chunk_ranges) for a in out)
    assert_unchanged(before, server)
    assert int(server.versions.v.max()) == 0 and server.clock == [0, 0]


def test_concurrent_transfers_per_sender_are_bounded():
    _, server, _, _, layout = build('rog:4', n=2, iters=20)
    for tid in range(1, 6):
        server.on_message(row_chunk(layout, tid=tid), 0.0)
    assert server.rejects == 3
    assert len(server.receiver.open) == 2


def test_identity_rows_are_checked_before_they_are_written():
    _, server, _, _, layout = build('rog:4', n=2, codec='identity', dtype=torch.float64)
    good = np.zeros(int(layout.row_len[1]), np.float64)
    bad = good.copy()
    bad[2] = np.nan
    server.on_message(row_chunk(layout, seq=0, row=0, codec=0), 0.0)
    server.on_message(row_chunk(layout, seq=1, row=1, codec=0, payload=bad.tobytes()), 0.0)
    assert server.rejects == 1
    server.on_message(end_chunk(0, 1, seq=2), 0.0)      # (the sender sent chunks 0 and 1)
    assert bool(torch.isfinite(server.w_srv).all())
    assert int(server.versions.v[1, 0]) == 0 and int(server.versions.v[0, 0]) == 1


def test_oversized_chunk_is_rejected():
    _, server, _, _, layout = build('rog:4', n=2)
    big = row_chunk(layout, payload=bytes(10 ** 7))
    server.on_message(big, 0.0)
    many = row_chunk(layout)
    many.row_ranges = np.arange(0, 4 * layout.n_rows, dtype=np.uint32)
    server.on_message(many, 0.0)
    assert server.rejects == 2 and not server.receiver.open


def test_nonfinite_row_from_fragments_is_not_applied_nor_acknowledged():
    from rog_ros.protocol.messages import FLAG_FRAGMENT
    _, server, _, _, layout = build('rog:4', n=2, codec='identity', dtype=torch.float64)
    row = 17
    half = int(layout.row_len[row]) * 8 // 2
    vals = np.zeros(2 * half // 8)
    vals[-1] = np.inf
    raw = vals.tobytes()
    for seq, off in ((0, 0), (1, half)):
        chunk = row_chunk(layout, seq=seq, row=row, codec=0, payload=raw[off:off + half])
        chunk.flags, chunk.frag_offset = FLAG_FRAGMENT, off
        if off:
            chunk.tensor_ids, chunk.scales = np.zeros(0, np.uint32), np.zeros(0, np.float32)
        server.on_message(chunk, 0.0)
    assert server.rejects == 0
    out = server.on_message(end_chunk(0, 1), 0.0)
    final = [a.msg for a in out if isinstance(getattr(a, 'msg', None), TransferAck)]
    assert len(final) == 1 and len(final[0].chunk_ranges) == 0
    assert bool(torch.isfinite(server.w_srv).all()) and int(server.versions.v[row, 0]) == 0
