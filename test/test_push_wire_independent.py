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
A robot written from docs/reference-systems.md alone speaks to the push systems' server.

Its chunks and acks are built here from the document's words (rows of 1024 words, the last
the rest; half-open row ranges; END with the data chunk count; acks stamped with both runs),
not with the project's transfer encoders, so that the document is enough to implement one.
"""

import struct

import numpy as np
import pytest

from rog_ros.nodes.push_systems import ServerAdapter
from rog_ros.protocol.actions import Send
from rog_ros.protocol.messages import (
    FLAG_END, FLAG_FRAGMENT, KIND_GRAD, KIND_UPDATE, RowChunk, SERVER, TransferAck)
from rog_ros.protocol.policies.adacomp import (
    AdaCompConfig, AdaCompServer, AdaCompWorker, push_entries)
from rog_ros.protocol.push_transfers import PushTransfers
import torch

SIZES = (3000, 2000)
"""Two tensors of 5,000 values: a model of 4 dense rows (3 of 1024 values, one of 1928)."""
RUN = 0x5EED
"""The independent robot's incarnation."""


def _rows(n_words):
    """Return each row's (first word, words) per the document: 1024 a row, the last the rest."""
    if n_words < 2048:
        return [(0, n_words)]
    full = n_words // 1024 - 1
    return [(1024 * k, 1024) for k in range(full)] + [(1024 * full, n_words - 1024 * full)]


def _chunk(payload, rows, row, seq, tid, codec, part=None):
    """Return one data chunk of ``row`` (``part``: (byte offset, bytes) of a fragment)."""
    first, words = rows[row]
    body = payload[4 * first:4 * (first + words)]
    tensor = 1 if len(rows) > 1 and row == len(rows) - 1 else 0
    flags, offset = 0, 0
    tids, scales = [tensor], [0.0]
    if part is not None:
        offset, size = part
        body, flags = body[offset:offset + size], FLAG_FRAGMENT
        if offset:
            tids, scales = [], []           # a fragment after its row's first carries none
    return RowChunk(transfer_id=tid, seq=seq, sender=0, receiver=SERVER, kind=KIND_GRAD,
                    clock=0, flags=flags, codec=codec,
                    row_ranges=np.array([row, row + 1], dtype=np.uint32),
                    frag_offset=offset, tensor_ids=np.array(tids, dtype=np.uint32),
                    scales=np.array(scales, dtype=np.float32), payload=body,
                    incarnation=RUN, target_incarnation=0)


def _push(payload, codec, tid=1):
    """Return a push's chunks per the document: a row a chunk, the last row in two fragments."""
    rows = _rows(len(payload) // 4)
    chunks = [_chunk(payload, rows, r, r, tid, codec) for r in range(len(rows) - 1)]
    last = 4 * rows[-1][1]
    half = last // 2
    chunks += [_chunk(payload, rows, len(rows) - 1, len(chunks), tid, codec, (0, half)),
               _chunk(payload, rows, len(rows) - 1, len(chunks) + 1, tid, codec,
                      (half, last - half))]
    end = RowChunk(transfer_id=tid, seq=len(chunks), sender=0, receiver=SERVER,
                   kind=KIND_GRAD, clock=0, flags=FLAG_END, codec=codec, incarnation=RUN)
    return chunks, end


def _sent(actions, kind):
    """Return the messages of type ``kind`` that ``actions`` send to robot 0."""
    return [a.msg for a in actions if isinstance(a, Send) and a.dest == 0
            and isinstance(a.msg, kind)]


def _decode_pull(chunks, n_values, server_run):
    """Return the model a pull's data chunks carry, read per the document, and its acks."""
    rows = _rows(n_values)
    buf = bytearray(4 * n_values)
    acks = []
    for ch in chunks:
        assert ch.codec == 0 and ch.kind == KIND_UPDATE and ch.sender == SERVER
        assert ch.receiver == 0 and ch.incarnation == server_run
        assert ch.target_incarnation == RUN and ch.flags in (0, FLAG_FRAGMENT)
        pairs = np.asarray(ch.row_ranges, dtype=np.int64).reshape(-1, 2)
        assert (pairs[:, 0] < pairs[:, 1]).all() and (np.diff(pairs.ravel()) >= 0).all()
        ids = [r for lo, hi in pairs for r in range(lo, hi)]
        want = sorted({1 if len(rows) > 1 and r == len(rows) - 1 else 0 for r in ids})
        if ch.flags & FLAG_FRAGMENT:
            assert len(ids) == 1
            start = 4 * rows[ids[0]][0] + ch.frag_offset
            want = want if ch.frag_offset == 0 else []
        else:
            start = 4 * rows[ids[0]][0]
            assert len(ch.payload) == sum(4 * rows[r][1] for r in ids)
        assert list(ch.tensor_ids) == want and list(ch.scales) == [0.0] * len(want)
        buf[start:start + len(ch.payload)] = ch.payload
        acks.append(TransferAck(transfer_id=ch.transfer_id, sender=0, receiver=SERVER,
                                seq=ch.seq, final=False, bytes_received=len(ch.payload),
                                incarnation=RUN, target_incarnation=server_run))
    return np.array(struct.unpack(f'<{n_values}f', bytes(buf)), dtype=np.float32), acks


@pytest.mark.parametrize('mode', ['adacomp', 'comp-asgd', 'asgd'])
def test_a_robot_built_from_the_document_alone_trains_with_the_server(mode):
    # A sparse push (codec 3 chunks of its codec 2 words) or a dense one (codec 0), cut per
    # the document, is taken by the server, acknowledged per chunk and at its END as the
    # document says, and applied as the engine's one message is; the pull that answers it
    # reads back, per the document, as the server's model.
    cfg = AdaCompConfig(mode=mode, c=0.3)
    n = sum(SIZES)
    g = torch.sin(torch.arange(n, dtype=torch.float32) * 0.37)
    (ref,) = AdaCompWorker(0, torch.zeros(n), list(SIZES), cfg).on_compute_done(g, 0.0)
    payload = bytes(ref.msg.payload)
    codec = 0 if mode == 'asgd' else 3
    assert len(payload) == (4 * n if mode == 'asgd' else 8 * push_entries(cfg, SIZES))
    w0 = torch.linspace(-1.0, 1.0, n)
    srv = ServerAdapter(AdaCompServer(w0.clone(), 1, cfg, max_updates=10), 1, 0.1,
                        PushTransfers(SERVER, n, chunk_bytes=4096, n_workers=1,
                                      sparse_entries=push_entries(cfg, SIZES)))
    bare = AdaCompServer(w0.clone(), 1, cfg, max_updates=10)
    bare.on_message(ref.msg, 0.0)
    chunks, end = _push(payload, codec)
    acks, pull = [], []
    for ch in chunks:
        out = srv.on_message(ch, 0.0)
        acks += _sent(out, TransferAck)
        pull += _sent(out, RowChunk)
    assert [(a.final, a.seq, a.bytes_received, a.incarnation, a.target_incarnation)
            for a in acks] == [(False, c.seq, len(c.payload), srv.transfers.incarnation, RUN)
                               for c in chunks]
    out = srv.on_message(end, 0.0)
    (final,) = _sent(out, TransferAck)
    assert final.final and final.seq == len(chunks) and final.bytes_received == len(payload)
    assert list(final.chunk_ranges) == [0, len(chunks)] and final.target_incarnation == RUN
    assert srv.engine.i == 1 and srv.rejects == 0
    assert torch.equal(srv.engine.model(), bare.model())
    # the END again: the same final ack, nothing handed over twice
    assert _sent(srv.on_message(end, 1.0), TransferAck) == [final] and srv.engine.i == 1
    pull += _sent(out, RowChunk)
    data = [c for c in pull if not c.flags & FLAG_END]
    pend, copy = [c for c in pull if c.flags & FLAG_END]     # END twice: a lost one waits not
    assert (copy.transfer_id, copy.seq, copy.flags) == (pend.transfer_id, pend.seq, pend.flags)
    assert len(data) > 2 and [c.seq for c in data] == list(range(len(data)))
    assert max(len(c.payload) for c in data) <= 4096 and {c.transfer_id for c in pull} == {1}
    assert pend.seq == len(data) and not len(pend.payload) and not len(pend.row_ranges)
    model, packs = _decode_pull(data, n, srv.transfers.incarnation)
    assert np.array_equal(model, srv.engine.model().numpy())
    for ack in packs:
        srv.on_message(ack, 1.0)
    srv.on_message(TransferAck(transfer_id=1, sender=0, receiver=SERVER, seq=len(data),
                               final=True, bytes_received=4 * n,
                               chunk_ranges=np.array([0, len(data)], dtype=np.uint32),
                               incarnation=RUN, target_incarnation=srv.transfers.incarnation),
                   1.0)
    assert srv.transfers.sending == {} and srv.transfers.rejects == 0
