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
"""The push systems' dense messages travel as windowed chunk transfers (push_transfers.py)."""

import argparse
import dataclasses

import numpy as np
import pytest

from rog_ros.nodes import settings
from rog_ros.nodes.push_systems import _transfers, ServerAdapter, WorkerAdapter
from rog_ros.protocol.actions import Log, Send, StartCompute
from rog_ros.protocol.messages import (
    FLAG_END, KIND_GRAD, KIND_UPDATE, ranges_from_sorted, RowChunk, SERVER, TransferAck)
from rog_ros.protocol.policies.adacomp import (
    AdaCompConfig, AdaCompServer, AdaCompWorker, push_entries)
from rog_ros.protocol.policies.async_ps import KEEP_RUNS
from rog_ros.protocol.policies.gsp import GspConfig, GspNode, GspServer
from rog_ros.protocol.push_transfers import (
    dense_layout, END_COPIES, HELD_RUNS, PUSH_CHUNK_BYTES, PUSH_ROW_ELEMENTS, PUSH_WINDOW,
    PushTransfers, RETIRE_LEASES, RunRevived, SPARSE_WIRE_CODEC)
from rog_ros.protocol.transfer import (
    BOUND_END_S, MAX_WINDOW_BYTES, PEER_MAX_WIRE_BYTES, wire_bytes)
import torch

LARGE = 9_463_818
"""Parameters of docs/workloads.md's large model (37.9 MB fp32, past the 8 MiB mark)."""


@pytest.mark.parametrize('n', [1, 999, 2047, 2048, 3071, 10_000, LARGE])
def test_dense_rows_lie_in_vector_order(n):
    layout = dense_layout(n)
    lengths = layout.row_len.numpy()
    assert int(lengths.sum()) == layout.n_params == n
    # every row but the last holds PUSH_ROW_ELEMENTS values and the last the rest, so the
    # rows' bytes in row id order are the vector's bytes
    if n >= 2 * PUSH_ROW_ELEMENTS:
        assert (lengths[:-1] == PUSH_ROW_ELEMENTS).all()
        assert PUSH_ROW_ELEMENTS <= lengths[-1] < 2 * PUSH_ROW_ELEMENTS
    else:
        assert layout.n_rows == 1


def _server(n_params, n_workers=1, window=None):
    """Return a Comp-ASGD server adapter (``window`` None: defaults; else 16 KiB chunks)."""
    w0 = torch.linspace(-1.0, 1.0, n_params)
    cfg = AdaCompConfig(mode='comp-asgd', c=1e-4)    # small pushes: the model is the test
    engine = AdaCompServer(w0, n_workers, cfg, max_updates=100)
    if window is None:
        return ServerAdapter(engine, n_workers, 0.1), w0, cfg
    return ServerAdapter(engine, n_workers, 0.1, PushTransfers(
        SERVER, n_params, window=window, chunk_bytes=16 * 1024)), w0, cfg


def _first_push(n_params, cfg, worker=0):
    """Return worker ``worker``'s first (sparse, one-message) push of a constant gradient."""
    wk = AdaCompWorker(worker, torch.zeros(n_params), [n_params], cfg)
    (send,) = wk.on_compute_done(torch.full((n_params,), 0.01), 0.0)
    return send.msg


def _chunks(actions, dest):
    """Return the RowChunks of ``actions`` sent to ``dest``."""
    return [a.msg for a in actions
            if isinstance(a, Send) and a.dest == dest and isinstance(a.msg, RowChunk)]


@pytest.mark.parametrize('window', [None, 1024])
def test_a_model_past_the_mark_to_a_silent_robot_never_passes_the_bound(window):
    # Before, the pull answering a push was one RowChunk of 37.9 MB: one DDS message past
    # the transport's 8 MiB writer mark, which blocks the server's loop while the robot's
    # link is down. Now: 16 KiB chunks (--window 1024) or the push defaults' 65000 bytes,
    # never more than MAX_WINDOW_BYTES of them past the last ack, END a lease after the
    # last ack, and nothing more.
    srv, w0, cfg = _server(LARGE, window=window)
    cap = PUSH_CHUNK_BYTES if window is None else 16 * 1024
    sent = _chunks(srv.on_message(_first_push(LARGE, cfg), 0.0), 0)
    assert sent and max(len(c.payload) for c in sent) <= cap
    now, end_at = 0.0, None
    while now < 60.0:
        due = srv.next_wakeup()
        assert due is not None and due > now - 1e-9
        now = due
        sent += _chunks(srv.on_tick(now), 0)
        unacked = sum(len(c.payload) for c in sent)       # the robot acknowledges nothing
        assert unacked <= MAX_WINDOW_BYTES, (now, unacked)
        assert srv.transfers.bytes_past_ack(0) == unacked
        if end_at is None and any(c.flags & FLAG_END for c in sent):
            end_at = now
    assert max(len(c.payload) for c in sent) <= cap and end_at == BOUND_END_S
    if window is None:       # 64 chunks of 15 rows at once, 4 more after 2 s without acks
        assert sum(len(c.payload) for c in sent) == 68 * 15 * 4 * PUSH_ROW_ELEMENTS
    else:
        assert sum(len(c.payload) for c in sent) == MAX_WINDOW_BYTES


def test_a_robot_back_after_the_bound_gets_the_whole_model_again():
    # the END at the bound ends a transfer with rows never sent: the robot's final ack says
    # which chunks arrived; the model goes again, whole, as a new transfer, and the robot
    # holds exactly the server's model once all of it arrived
    n = 3 * (MAX_WINDOW_BYTES // 4)       # 12 MiB of values
    srv, w0, cfg = _server(n, window=1024)
    wk = WorkerAdapter(AdaCompWorker(0, torch.zeros(n), [n], cfg),
                       PushTransfers(0, n, window=1024))
    push = _first_push(n, cfg)
    lost = _chunks(srv.on_message(push, 0.0), 0)
    lost += _chunks(srv.on_tick(BOUND_END_S), 0)         # silent: END at the bound
    assert lost[-1].flags & FLAG_END and sum(len(c.payload) for c in lost) == MAX_WINDOW_BYTES
    assert srv.transfers.resent == 0
    # the robot is back: it got the first two chunks and the END only
    q = [(0, c) for c in lost[:2] + lost[-1:]]
    got_model, now = False, BOUND_END_S
    while q:
        dest, msg = q.pop(0)
        if dest == 0:
            out = wk.on_message(msg, now)
            got_model = got_model or any(isinstance(a, StartCompute) for a in out)
            q += [(SERVER, a.msg) for a in out if isinstance(a, Send)]
        else:
            q += [(a.dest, a.msg) for a in srv.on_message(msg, now) if isinstance(a, Send)]
    assert srv.transfers.resent == 1 and got_model
    assert torch.equal(wk.w, srv.engine.model())
    assert srv.transfers.sending == {} and srv.rejects == 0 and wk.rejects == 0


@pytest.mark.parametrize('system', ['asgd', 'gsp'])
def test_a_fleet_over_chunks_ends_where_one_over_whole_messages_does(system):
    # the same pushes and pulls, through the adapters and their transfers, leave the server
    # with the model the engines alone reach (bit for bit), the counts of one message each
    n, steps = 5000, 4

    def engines():
        """Return a fresh server and worker engine pair of ``system``."""
        w0 = torch.linspace(-1.0, 1.0, n)
        if system == 'gsp':
            cfg = GspConfig(assignment=(0,))     # (profiling needs time to pass)
            return (GspServer(w0, 1, cfg, lr=0.1, momentum=0.5, max_pushes=steps),
                    GspNode(0, w0, [n], cfg))
        cfg = AdaCompConfig(mode='asgd', c=1.0)
        return AdaCompServer(w0, 1, cfg, max_updates=steps), AdaCompWorker(0, w0, [n], cfg)

    def run(srv, wk, deliver_to_server, deliver_to_worker, compute):
        """Pass every message at once until nothing is left (a lossless, instant link)."""
        q = [(SERVER, a) for a in wk.start(0.0)]
        while q:
            dest, a = q.pop(0)
            if isinstance(a, StartCompute):
                grad = torch.sin(wk.w * 3.0) * 0.01
                q += [(SERVER, x) for x in compute(grad)]
            elif isinstance(a, Send):
                if dest == SERVER or a.dest == SERVER:
                    q += [(0, x) for x in deliver_to_server(a.msg)]
                else:
                    q += [(SERVER, x) for x in deliver_to_worker(a.msg)]

    bare_srv, bare_wk = engines()
    run(bare_srv, bare_wk, lambda m: bare_srv.on_message(m, 0.0),
        lambda m: bare_wk.on_message(m, 0.0), lambda g: bare_wk.on_compute_done(g, 0.0))
    es, ew = engines()
    srv, wk = ServerAdapter(es, 1, 0.1), WorkerAdapter(ew)
    seen = []

    def to_server(m):
        """Deliver ``m`` to the server, remembering what travelled."""
        seen.append(m)
        return srv.on_message(m, 0.0)

    run(srv, wk, to_server, lambda m: wk.on_message(m, 0.0),
        lambda g: wk.on_compute_done(g, 0.0))
    assert torch.equal(es.model(), bare_srv.model()) and not torch.equal(es.model(),
                                                                         torch.linspace(
                                                                             -1.0, 1.0, n))
    assert wk.engine.stopped and srv.pushes_received == steps
    assert srv.bytes_up == steps * (64 + 4 * n)     # counted as the engines' messages
    grads = [m for m in seen if isinstance(m, RowChunk) and m.kind == KIND_GRAD]
    assert len(grads) > steps and max(len(m.payload) for m in grads) <= PUSH_CHUNK_BYTES
    assert any(isinstance(m, TransferAck) for m in seen)
    assert srv.rejects == 0 and wk.rejects == 0


def test_a_chunk_for_another_node_is_refused_and_nothing_changes():
    n = 5000
    srv, w0, cfg = _server(n)
    bad = RowChunk(transfer_id=1, seq=0, sender=0, receiver=3, kind=KIND_UPDATE, clock=0,
                   codec=0, payload=b'\0' * 16)
    assert srv.on_message(bad, 0.0)[0].name == 'reject'
    assert srv.rejects == 1 and srv.transfers.receiver.open == {}
    assert torch.equal(srv.engine.model(), w0)


def test_the_push_transfers_count_their_writers_with_the_fragment_size_given():
    # Rog's engines took the DDS FragmentSize (af04f62, 40586d0), the push systems' transfers
    # built PeerLink() with 1 KiB fragments whatever Cyclone was told: with 600-byte ones a
    # pull of a model past the mark counted 17 fragments of every 16 KiB chunk, not 28
    w0 = torch.linspace(-1.0, 1.0, LARGE)
    cfg = AdaCompConfig(mode='comp-asgd', c=1e-4)

    def first_pull(**extra):
        """Return the server's transfers and the chunks of its first pull to robot 0."""
        srv = ServerAdapter(AdaCompServer(w0, 1, cfg, max_updates=100), 1, 0.1,
                            PushTransfers(SERVER, LARGE, **extra))
        return srv.transfers, _chunks(srv.on_message(_first_push(LARGE, cfg), 0.0), 0)
    tr, sent = first_pull(fragment_bytes=600)
    assert len(sent) > 1 and tr.peers[0].fragment_bytes == 600
    assert tr.wire_past_ack(0) == sum(wire_bytes(c, 600) for c in sent)
    default, same = first_pull()
    assert default.peers[0].fragment_bytes == 1024
    assert default.wire_past_ack(0) == sum(wire_bytes(c) for c in same) < tr.wire_past_ack(0)
    assert _transfers(_fleet_args(), 0, w0, fragment_bytes=600).fragment_bytes == 600
    assert _transfers(_fleet_args(), 0, w0).fragment_bytes == 1024
    with pytest.raises(ValueError, match='General/FragmentSize'):
        PushTransfers(SERVER, LARGE, fragment_bytes=70000)


def _fleet_args(**given):
    """Return node settings as a fleet passes them: the defaults, ``given`` over them."""
    return argparse.Namespace(**{**settings.defaults(), **given})


@pytest.mark.parametrize('given, window, chunk_bytes', [
    ({}, PUSH_WINDOW, PUSH_CHUNK_BYTES),
    ({'chunk_bytes': 8192}, PUSH_WINDOW, 8192),
    ({'window': 8}, 8, PUSH_CHUNK_BYTES),
    ({'window': 8, 'chunk_bytes': 65000}, 8, 65000)])
def test_a_fleet_model_goes_in_few_large_chunks_unless_set(given, window, chunk_bytes):
    # At Rog's defaults (4 chunks of 16 KiB) a 37.9 MB model was 2312 DDS messages each way
    # with a window of 64 KiB until a transfer measured the link: asgd's iteration took 18.1 s
    # against 6.4 s as one message. The push defaults: 65000-byte chunks, 64 of them (4 MiB)
    # unacknowledged from the first transfer on; a window or chunk size the user set stays.
    args = _fleet_args(sync='asgd', **given)
    tr = _transfers(args, SERVER, torch.zeros(LARGE))
    assert (tr.window, tr.chunk_bytes) == (window, chunk_bytes)
    if given:
        return
    wk = PushTransfers(0, LARGE)
    model = RowChunk(transfer_id=1, seq=0, sender=SERVER, receiver=0, kind=KIND_UPDATE,
                     clock=1, flags=FLAG_END, codec=0, payload=bytes(4 * LARGE))
    first = _chunks(tr.outgoing([Send(0, model)], 0.0), 0)
    assert len(first) == PUSH_WINDOW == 64 and sum(len(c.payload) for c in first) == \
        64 * 15 * 4 * PUSH_ROW_ELEMENTS <= MAX_WINDOW_BYTES
    q, messages, whole = list(first), 0, None
    while q:                     # a lossless instant link: every chunk and ack arrives
        messages += 1
        got, acks = wk.on_message(q.pop(0), 0.0)
        whole = whole or got
        for a in acks:
            q += _chunks(tr.on_message(a.msg, 0.0)[1], 0)
    assert whole is not None and bytes(whole.payload) == bytes(model.payload)
    assert messages == 617 + 2     # data chunks and END twice: 2312 with 16 KiB chunks


@pytest.mark.parametrize('system', ['asgd', 'comp-asgd'])
def test_a_whole_dense_message_of_an_older_revision_is_refused_with_its_cause(system):
    # A peer from before the chunked transfers sends a model or a dense gradient as one
    # RowChunk: END and the payload at once, schema_version unchanged. Taken as the END of
    # an empty transfer it was dropped without a word (and answered with a final ack);
    # now it is a reject that names the cause, nothing is answered and nothing changes.
    n = 5000
    cfg = AdaCompConfig(mode=system, c=1e-3)
    srv = ServerAdapter(AdaCompServer(torch.zeros(n), 1, cfg, max_updates=10), 1, 0.1)
    old_push = RowChunk(transfer_id=1, seq=0, sender=0, receiver=SERVER, kind=KIND_GRAD,
                        clock=0, flags=FLAG_END, codec=0, payload=bytes(4 * n))
    (log,) = srv.on_message(old_push, 0.0)
    assert log.name == 'reject' and 'same revision' in log.info['error']
    assert srv.rejects == 1 and srv.pushes_received == 0 and srv.engine.i == 0
    wk = WorkerAdapter(AdaCompWorker(0, torch.zeros(n), [n], cfg))
    old_model = RowChunk(transfer_id=1, seq=0, sender=SERVER, receiver=0, kind=KIND_UPDATE,
                         clock=1, flags=FLAG_END, codec=0, payload=bytes(4 * n))
    (log,) = wk.on_message(old_model, 0.0)
    assert log.name == 'reject' and 'same revision' in log.info['error']
    assert wk.rejects == 1 and wk.engine.j == 0 and wk.transfers.receiver.closed == {}


def test_a_robot_restarted_mid_push_leaves_no_open_transfer_behind():
    # ASGD robot 0 dies twice half-way through a dense push and starts again (a new
    # incarnation each time). Its earlier runs' transfers never end: each held a
    # model-sized buffer for good, and the third run's push was refused for good (at most
    # two open transfers per sender). The third run's push is applied, nothing is left open.
    n = 24 * PUSH_ROW_ELEMENTS       # 6 chunks of 16 KiB
    cfg = AdaCompConfig(mode='asgd', c=1.0)
    srv = ServerAdapter(AdaCompServer(torch.zeros(n), 1, cfg, max_updates=10), 1, 0.1,
                        PushTransfers(SERVER, n, chunk_bytes=16 * 1024))
    for run in range(3):
        wk = WorkerAdapter(AdaCompWorker(0, torch.zeros(n), [n], cfg),
                           PushTransfers(0, n, chunk_bytes=16 * 1024, incarnation=run + 1))
        sent = _chunks(wk.on_compute_done(torch.full((n,), 0.5), 0.0), SERVER)
        if run < 2:                  # the first half arrives, then the robot is gone
            for c in sent[:3]:
                srv.on_message(c, 0.0)
            assert len(srv.transfers.receiver.open) == 1
    q = list(sent)
    while q:
        for a in srv.on_message(q.pop(0), 0.0):
            if isinstance(a, Send) and a.dest == 0 and isinstance(a.msg, TransferAck):
                q += _chunks(wk.on_message(a.msg, 0.0), SERVER)
    assert srv.rejects == 0 and srv.pushes_received == 1 and srv.engine.i == 1
    assert torch.equal(srv.engine.model(), torch.full((n,), -0.05))
    assert srv.transfers.receiver.open == {}


def test_an_ack_for_an_earlier_run_of_the_sender_is_not_taken():
    # Transfer ids start at 1 in every run of a robot: the server's final ack of run 1's
    # first push, arriving once run 2 has sent its own first push, ended run 2's transfer
    # as delivered (all chunks) though the server had none of it: the push was lost, the
    # robot waited for a pull that never came. It is ignored; run 2's own acks end it, and
    # the server applies the push once.
    n = 24 * PUSH_ROW_ELEMENTS       # 6 chunks of 16 KiB
    cfg = AdaCompConfig(mode='asgd', c=1.0)
    srv = ServerAdapter(AdaCompServer(torch.zeros(n), 1, cfg, max_updates=10), 1, 0.1,
                        PushTransfers(SERVER, n, chunk_bytes=16 * 1024))
    wk = WorkerAdapter(AdaCompWorker(0, torch.zeros(n), [n], cfg),
                       PushTransfers(0, n, chunk_bytes=16 * 1024, incarnation=2))
    sent = _chunks(wk.on_compute_done(torch.full((n,), 0.5), 0.0), SERVER)
    assert len(sent) == 8 and sent[-1].flags & sent[-2].flags & FLAG_END   # END twice
    stale = TransferAck(transfer_id=1, sender=SERVER, receiver=0, seq=6, final=True,
                        chunk_ranges=ranges_from_sorted(np.arange(6)),
                        incarnation=srv.transfers.incarnation, target_incarnation=1)
    assert wk.on_message(stale, 0.0) == [] and SERVER in wk.transfers.sending
    _deliver(srv, wk, list(sent), 0.0)
    assert wk.transfers.sending == {} and wk.transfers.resent == 0
    assert srv.pushes_received == 1 and srv.engine.i == 1 and srv.rejects == 0


@pytest.mark.parametrize('me, dest, kind', [(SERVER, 0, KIND_UPDATE), (0, SERVER, KIND_GRAD)])
def test_a_transfer_at_the_bound_waits_the_configured_lease_before_its_end(me, dest, kind):
    # The Rog nodes pass the LeaseDuration of CYCLONEDDS_URI to their transfers (a robot back
    # within it is still matched, its writer kept our chunks); the push systems' transfers
    # ended at the 10 s default whatever the lease. A pull to a silent robot, or a robot's
    # dense push to a silent server, now sends its END a 30 s lease after the last ack.
    tr = _transfers(_fleet_args(sync='asgd'), me, torch.zeros(LARGE), lease_s=30.0)
    assert tr.lease_s == 30.0
    assert _transfers(_fleet_args(sync='asgd'), me, torch.zeros(LARGE)).lease_s == BOUND_END_S
    dense = RowChunk(transfer_id=1, seq=0, sender=me, receiver=dest, kind=kind, clock=1,
                     flags=FLAG_END, codec=0, payload=bytes(4 * LARGE))
    sent = _chunks(tr.outgoing([Send(dest, dense)], 0.0), dest)
    now, end_at = 0.0, None
    while end_at is None and now < 120.0:
        now = tr.next_wakeup()
        sent += _chunks(tr.on_tick(now), dest)
        if sent[-1].flags & FLAG_END:
            end_at = now
    assert end_at == 30.0
    assert sum(len(c.payload) for c in sent[:-1]) <= MAX_WINDOW_BYTES


def test_a_lease_that_is_not_a_positive_number_is_refused_in_one_line():
    # a lease of 0 or NaN would send END at once, or never
    for bad in (0.0, -1.0, float('nan'), float('inf')):
        with pytest.raises(ValueError, match='lease_s must be positive and finite'):
            PushTransfers(SERVER, 4096, lease_s=bad)


def test_every_transfer_to_a_robot_shares_one_ledger_of_its_writer():
    # The chunks of every transfer to a robot queue in one reliable in-order DDS writer:
    # a pull ended at the bound with rows missing is sent again whole behind what the old
    # one left there. Counted on the wire (headers and tags, ENDs too) as the chunks go and
    # the robot's acks cover them, what the writer may hold never passes the peer bound,
    # and PushTransfers keeps that count for the robot in one PeerLink across transfers.
    srv, w0, cfg = _server(LARGE)
    wk = PushTransfers(0, LARGE)
    written, at, covered, worst = 0, {}, 0, 0

    def sent(actions):
        """Count the chunks of ``actions`` to robot 0 as they go on its writer."""
        nonlocal written, worst
        chunks = _chunks(actions, 0)
        for c in chunks:
            written += wire_bytes(c)
            at[(c.transfer_id, 'end' if c.flags & FLAG_END else c.seq)] = written
        worst = max(worst, written - covered)
        assert srv.transfers.wire_past_ack(0) == written - covered
        return chunks

    def silent_until(until):
        """Tick the server while the robot answers nothing; return what it sent."""
        out, now = [], 0.0
        while True:
            due = srv.next_wakeup()
            if due is None or due > until:
                return out
            now = due
            out += sent(srv.on_tick(now))

    first = sent(srv.on_message(_first_push(LARGE, cfg), 0.0))
    first += silent_until(BOUND_END_S)
    assert first[-1].flags & FLAG_END
    # back: only the END got through (DDS dropped the rest with the lease); the final ack
    # covers everything written before that END, and the pull goes again, whole
    _, acks = wk.on_message(first[-1], BOUND_END_S)
    (final,) = [a.msg for a in acks]
    covered = at[(final.transfer_id, 'end')]
    again = sent(srv.on_message(final, BOUND_END_S))
    assert srv.transfers.resent == 1 and again[0].transfer_id == first[0].transfer_id + 1
    again += silent_until(2 * BOUND_END_S)
    assert again[-1].flags & FLAG_END
    assert set(srv.transfers.peers) == {0} and srv.transfers.wire_past_ack(0) == written - covered
    # what the writer may still hold is the second transfer alone, its payload at the bound
    assert worst <= PEER_MAX_WIRE_BYTES
    assert written - covered == sum(wire_bytes(c) for c in again)
    assert sum(len(c.payload) for c in again) <= MAX_WINDOW_BYTES
    # an answer to a repeated END of the first transfer moves nothing and sends nothing
    assert srv.on_message(final, 2 * BOUND_END_S) == []
    assert srv.transfers.wire_past_ack(0) == written - covered


def _relay(src, dst, msg, dest, chunks=None):
    """
    Send ``msg`` from ``src`` to ``dest`` (``dst``) over a lossless instant link.

    Return the messages ``dst`` hands its engine, and every chunk that went (``chunks``
    appended to, if given): what the engine gets must be what the peer's engine sent.
    """
    q = [a.msg for a in src.outgoing([Send(dest, msg)], 0.0) if isinstance(a, Send)]
    whole, budget = [], 100_000     # (a transfer sent again forever fails, not hangs)
    while q:
        budget -= 1
        assert budget > 0, 'the transfer never ends'
        chunk = q.pop(0)
        if chunks is not None:
            chunks.append(chunk)
        got, acks = dst.on_message(chunk, 0.0)
        if got is not None:
            whole.append(got)
        for a in acks:
            if isinstance(a, Send):
                q += [x.msg for x in src.on_message(a.msg, 0.0)[1] if isinstance(x, Send)]
    return whole


def _odd_values(n):
    """Return ``n`` fp32 values with NaNs of several payloads, infinities, -0.0 and denormals."""
    v = np.linspace(-3.0, 3.0, n, dtype=np.float32)
    bits = v.view(np.uint32)
    special = np.array([0x7FC00001, 0xFFC12345, 0x7F800001, 0x7F800000, 0xFF800000,
                        0x80000000, 0x00000001, 0x80000001], dtype=np.uint32)
    k = min(n, special.size)
    bits[np.linspace(0, n - 1, k).astype(np.int64)] = special[:k]
    return v


@pytest.mark.parametrize('n', [1, 7, 1023, 1024, 1025, 2047, 2048, 2049, 70_001])
@pytest.mark.parametrize('chunk_bytes', [None, 256])
def test_the_engine_gets_the_very_bytes_the_peer_sent_nan_and_minus_zero_too(n, chunk_bytes):
    # Refused per chunk as Rog's float rows are, a non-finite value was never acknowledged:
    # the transfer ended with its rows missing and went again, whole, at once, forever (333
    # times in 2000 messages). The engines judge the message (one reject), as they did when
    # it was one message; the transport hands over its bytes as they are, fragments too.
    src = PushTransfers(SERVER, n, chunk_bytes=chunk_bytes)
    dst = PushTransfers(0, n, chunk_bytes=chunk_bytes)
    payload = _odd_values(n).tobytes()
    model = RowChunk(transfer_id=4, seq=0, sender=SERVER, receiver=0, kind=KIND_UPDATE,
                     clock=4, flags=FLAG_END, codec=0, payload=payload)
    chunks = []
    (whole,) = _relay(src, dst, model, 0, chunks)
    assert bytes(whole.payload) == payload
    assert (whole.kind, whole.clock, whole.codec, whole.sender, whole.receiver) == \
        (KIND_UPDATE, 4, 0, SERVER, 0)
    assert whole.wire_size() == model.wire_size()
    assert src.resent == 0 and dst.rejects == 0 and src.sending == {}
    data = [c for c in chunks if isinstance(c, RowChunk) and not c.flags & FLAG_END]
    assert max(len(c.payload) for c in data) <= (chunk_bytes or PUSH_CHUNK_BYTES)


def test_a_non_finite_model_is_refused_once_by_the_engine_and_not_sent_again():
    # as when the model was one message: the robot's engine refuses it (one reject) and
    # waits; the server's transfer is over (every chunk arrived), nothing goes again
    n = 70_001
    cfg = AdaCompConfig(mode='asgd', c=1.0)
    srv = PushTransfers(SERVER, n)
    wk = WorkerAdapter(AdaCompWorker(0, torch.zeros(n), [n], cfg), PushTransfers(0, n))
    bad = RowChunk(transfer_id=1, seq=0, sender=SERVER, receiver=0, kind=KIND_UPDATE,
                   clock=1, flags=FLAG_END, codec=0, payload=_odd_values(n).tobytes())
    q = [a.msg for a in srv.outgoing([Send(0, bad)], 0.0)]
    logs = []
    while q and len(logs) < 10:
        out = wk.on_message(q.pop(0), 0.0)
        logs += [a for a in out if not isinstance(a, Send)]
        for a in out:
            if isinstance(a, Send):
                q += [x.msg for x in srv.on_message(a.msg, 0.0)[1] if isinstance(x, Send)]
    assert [(a.name, a.info['error']) for a in logs] == \
        [('reject', 'non-finite value in dense payload')]
    assert wk.rejects == 1 and wk.engine.j == 0 and torch.equal(wk.w, torch.zeros(n))
    assert srv.resent == 0 and srv.sending == {}


def _model(n, clock, sender=SERVER, receiver=0, kind=KIND_UPDATE):
    """Return a dense message of ``n`` distinct values for ``clock`` (each one its own)."""
    v = np.arange(n, dtype=np.float32) + np.float32(clock) * np.float32(n)
    return RowChunk(transfer_id=clock, seq=0, sender=sender, receiver=receiver, kind=kind,
                    clock=clock, flags=FLAG_END, codec=0, payload=v.tobytes())


def test_a_transfer_replayed_after_its_answer_was_forgotten_is_never_handed_over_again():
    # the receiver remembers the final answers of a sender's last 8 transfers; a replay of
    # an older one (chunks, END) after ten more closed is late, not a new message
    n = 5000
    src, dst = PushTransfers(SERVER, n, chunk_bytes=4096), PushTransfers(0, n, chunk_bytes=4096)
    first = []
    assert len(_relay(src, dst, _model(n, 1), 0, first)) == 1
    for clock in range(2, 12):
        assert len(_relay(src, dst, _model(n, clock), 0)) == 1
    assert dst.receiver.cached_answer(SERVER, src.incarnation, 1) is None
    for chunk in first:
        if isinstance(chunk, RowChunk):
            assert dst.on_message(chunk, 20.0) == (None, [])
    assert dst.receiver.open == {} and dst.rejects == 0


def test_a_late_final_ack_of_a_transfer_sent_again_ends_nothing_and_one_message_arrives():
    # the pull ended at the bound with rows missing and goes again as transfer 2; the
    # robot's final ack of transfer 1 comes once more (duplicated), and so does transfer
    # 1's END: transfer 2 goes on, the robot answers the END from its record, and it gets
    # the model once, the very bytes, never a mix of the two transfers' rows
    n = 3 * (MAX_WINDOW_BYTES // 4)
    srv, wk = PushTransfers(SERVER, n, window=1024), PushTransfers(0, n, window=1024)
    model = _model(n, 3)
    lost = _chunks(srv.outgoing([Send(0, model)], 0.0), 0)
    while not lost[-1].flags & FLAG_END:         # the robot is silent: END at the bound
        lost += _chunks(srv.on_tick(srv.next_wakeup()), 0)
    end1 = lost[-1]
    got, acks = wk.on_message(lost[0], BOUND_END_S)
    got, acks = wk.on_message(end1, BOUND_END_S)
    assert got is None
    (final1,) = [a.msg for a in acks if a.msg.final]
    q = _chunks(srv.on_message(final1, BOUND_END_S)[1], 0)
    assert srv.resent == 1 and q[0].transfer_id == 2
    assert srv.on_message(final1, BOUND_END_S)[1] == []        # the duplicate: nothing
    assert srv.sending[0].transfer.transfer_id == 2
    whole = []
    _, again = wk.on_message(end1, BOUND_END_S)                 # a repeated END of 1
    assert [(a.msg.transfer_id, a.msg.final) for a in again] == [(1, True)]
    while q:
        got, acks = wk.on_message(q.pop(0), BOUND_END_S)
        whole += [got] if got is not None else []
        for a in acks:
            q += _chunks(srv.on_message(a.msg, BOUND_END_S)[1], 0)
    assert len(whole) == 1 and bytes(whole[0].payload) == bytes(model.payload)
    assert srv.sending == {} and srv.resent == 1 and wk.rejects == 0


def test_a_push_and_a_pull_crossing_each_other_both_arrive_once():
    # a robot's dense push to the server and the server's pull to that robot at once, their
    # chunks and acks interleaved on the two directions: both transfers are id 1 of their
    # sender, and each side takes only its own acks
    n = 70_001
    srv, wk = PushTransfers(SERVER, n), PushTransfers(0, n)
    pull = _model(n, 5)
    push = _model(n, 6, sender=0, receiver=SERVER, kind=KIND_GRAD)
    to_wk = _chunks(srv.outgoing([Send(0, pull)], 0.0), 0)
    to_srv = [a.msg for a in wk.outgoing([Send(SERVER, push)], 0.0)]
    got = {SERVER: [], 0: []}
    while to_wk or to_srv:
        for node, q in ((wk, to_wk), (srv, to_srv)):
            if q:
                whole, acks = node.on_message(q.pop(0), 0.0)
                if whole is not None:
                    got[node.me].append(whole)
                for a in acks:       # the ack reaches its sender, whose answer goes back
                    peer = srv if node is wk else wk
                    _, more = peer.on_message(a.msg, 0.0)
                    q += [x.msg for x in more if isinstance(x, Send)]
    assert [bytes(m.payload) for m in got[0]] == [bytes(pull.payload)]
    assert [bytes(m.payload) for m in got[SERVER]] == [bytes(push.payload)]
    assert [m.kind for m in got[SERVER]] == [KIND_GRAD] and got[0][0].kind == KIND_UPDATE
    assert srv.sending == {} and wk.sending == {} and srv.rejects == wk.rejects == 0


def test_a_pull_due_while_the_last_one_awaits_its_final_ack_waits_and_goes_next():
    # the robot took pull 1 and pushed again before its final ack reached the server: the
    # server's pull 2 waits behind transfer 1 (one message queued, the only one a robot can
    # cause: it pushes once per model), then goes as transfer 2, and the robot gets each once
    n = 70_001
    srv, w0, cfg = _server(n)
    wk = WorkerAdapter(AdaCompWorker(0, torch.zeros(n), [n], cfg), PushTransfers(0, n))
    q = _chunks(srv.on_message(_first_push(n, cfg), 0.0), 0)
    held, models = [], []
    while q:
        out = wk.on_message(q.pop(0), 0.0)
        for a in out:
            if isinstance(a, Send) and isinstance(a.msg, TransferAck) and a.msg.final:
                held.append(a.msg)               # the final ack is slow
            elif isinstance(a, Send):
                q += _chunks(srv.on_message(a.msg, 0.0), 0)
            elif isinstance(a, StartCompute):
                models.append(wk.engine.j)
                push = wk.on_compute_done(torch.full((n,), 0.01), 0.0)
                assert _chunks(srv.on_message(push[0].msg, 0.0), 0) == []   # pull 2 waits
    assert models == [1] and len(srv.transfers.waiting[0]) == 1
    q = _chunks(srv.on_message(held.pop(), 0.0), 0)
    assert q and {c.transfer_id for c in q} == {2} and srv.transfers.waiting[0] == []
    while q:
        for a in wk.on_message(q.pop(0), 0.0):
            if isinstance(a, Send):
                q += _chunks(srv.on_message(a.msg, 0.0), 0)
            elif isinstance(a, StartCompute):
                models.append(wk.engine.j)
    assert models == [1, 2] and torch.equal(wk.w, srv.engine.model())
    assert srv.transfers.sending == {} and srv.rejects == 0 and wk.rejects == 0


def test_a_restarted_robot_s_acks_free_nothing_its_crashed_run_holds_until_its_lease_ends():
    # As with Rog's engines (PeerLink.hold): a robot that crashed and came back within its
    # lease keeps its old reader matched until that lease ends, and the server's writer keeps
    # for it everything written since its last ack. PushTransfers took the new run's acks
    # as freeing it: the pull sent again after the END went on, and the writer held both
    # transfers for the dead run, past the 8 MiB mark (where the server's loop blocks).
    from rog_ros.protocol.transfer import WRITER_MARK_BYTES
    n = 2_000_000                    # 8 MB model: 124 chunks of 65000 bytes
    srv = PushTransfers(SERVER, n, lease_s=10.0)
    written, at = 0, {}

    def sent(actions):
        """Count the chunks of ``actions`` to robot 0 as they go on its writer."""
        nonlocal written
        chunks = _chunks(actions, 0)
        for c in chunks:
            written += wire_bytes(c)
            at[(c.transfer_id, 'end' if c.flags & FLAG_END else c.seq)] = written
        return chunks

    first = sent(srv.outgoing([Send(0, _model(n, 1))], 0.0))
    for k in range(10):              # run 111 takes the first 10 chunks, then crashes
        ack = TransferAck(transfer_id=1, sender=0, receiver=SERVER, seq=k, incarnation=111,
                          target_incarnation=srv.incarnation)
        first += sent(srv.on_message(ack, 0.5)[1])
    old_reader_acked = at[(1, 9)]
    now = 0.5
    while not first[-1].flags & FLAG_END:      # silent: END a lease after the last ack
        now = srv.next_wakeup()
        first += sent(srv.on_tick(now))
    assert now == 10.5
    run = PushTransfers(0, n, incarnation=222)    # the robot's new run gets that END only:
    assert run.on_message(first[-1], now) == (None, []) and run.foreign == 1   # not its pull
    # its first word (a chunk of its first push) ends the pull to the dead run, and the
    # server's engine answers that push with a pull of its own, to run 222
    push = RowChunk(transfer_id=1, seq=0, sender=0, receiver=SERVER, kind=KIND_GRAD, clock=0,
                    flags=FLAG_END, codec=0, payload=bytes(4 * n))
    srv.on_message(_chunks(run.outgoing([Send(SERVER, push)], now), SERVER)[0], now)
    assert srv.dropped_pulls == 1 and 0 not in srv.sending
    q, t = [], now
    for c in sent(srv.outgoing([Send(0, _model(n, 2))], t)):
        assert c.target_incarnation == 222
        q += [x.msg for x in run.on_message(c, t)[1]]
    worst = written - old_reader_acked
    while q and t < now + 10.0:      # run 222 acks all it gets, within the old run's lease
        t += 0.01
        for a in srv.on_message(q.pop(0), t)[1]:
            for c in sent([a]):
                q += [x.msg for x in run.on_message(c, t)[1]]
        worst = max(worst, written - old_reader_acked)
    assert srv.resent == 0 and run.foreign == 1
    assert worst <= PEER_MAX_WIRE_BYTES < WRITER_MARK_BYTES, worst - WRITER_MARK_BYTES
    # once the old run's lease is over its room is free and the pull goes on
    due = srv.next_wakeup()
    assert due == pytest.approx(now + 10.0)     # a lease after run 222 first spoke
    assert sent(srv.on_tick(due)) and 0 in srv.sending


def _sparse_robot(mode, run, sizes):
    """Return an AdaComp-family robot whose transfers carry its sparse pushes, and its k."""
    cfg = AdaCompConfig(mode=mode, c=0.01)
    entries = push_entries(cfg, sizes)
    n = sum(sizes)
    return WorkerAdapter(AdaCompWorker(0, torch.zeros(n), sizes, cfg),
                         PushTransfers(0, n, incarnation=run, sparse_entries=entries)), cfg


@pytest.mark.parametrize('mode', ['adacomp', 'comp-asgd'])
def test_a_sparse_push_goes_in_chunks_within_the_bound_and_arrives_as_sent(mode):
    # AdaComp's and Comp-ASGD's sparse pushes went as one message with no incarnation:
    # 0.76 MB for docs/workloads.md's 37.9 MB model at c = 0.01 (one message past the 8 MiB
    # writer mark, where the robot's loop blocks, from ~105 M parameters on). They now go
    # as the dense ones do, in chunks of at most 65000 bytes stamped with the robot's run,
    # and the server's engine gets the very message, as the simulator's engines exchange it.
    sizes = [LARGE // 2, LARGE - LARGE // 2]
    wk, cfg = _sparse_robot(mode, 5, sizes)
    g = torch.sin(torch.arange(LARGE, dtype=torch.float32) * 0.37)
    (ref,) = AdaCompWorker(0, torch.zeros(LARGE), sizes, cfg).on_compute_done(g, 0.0)
    assert len(ref.msg.payload) == 8 * 94_638       # the engine's one message: 757,104 B
    sent = _chunks(wk.on_compute_done(g, 0.0), SERVER)
    data = [c for c in sent if not c.flags & FLAG_END]
    assert len(data) == 13 and sent[-1].flags & FLAG_END      # 757,104 B / (15 x 4 KiB)
    assert max(len(c.payload) for c in data) <= PUSH_CHUNK_BYTES
    assert sum(len(c.payload) for c in data) == len(ref.msg.payload) <= MAX_WINDOW_BYTES
    assert {(c.codec, c.incarnation) for c in sent} == {(SPARSE_WIRE_CODEC, 5)}
    srv = ServerAdapter(AdaCompServer(torch.zeros(LARGE), 1, cfg, max_updates=10), 1, 0.1,
                        PushTransfers(SERVER, LARGE,
                                      sparse_entries=push_entries(cfg, sizes)))
    bare = AdaCompServer(torch.zeros(LARGE), 1, cfg, max_updates=10)
    bare.on_message(ref.msg, 0.0)
    _deliver(srv, wk, list(sent), 0.0)
    assert srv.engine.i == 1 and torch.equal(srv.engine.model(), bare.model())
    assert srv.bytes_up == ref.msg.wire_size() and srv.rejects == 0
    assert wk.transfers.sending == {} and srv.transfers.peer_runs[0] == [5]


def test_a_robot_restarted_mid_sparse_push_is_seen_by_the_server_s_ledger():
    # before, a sparse push carried no incarnation: a robot that crashed before its first
    # ack and came back was the same robot to the server, whose writer still held a lease's
    # worth for the dead run. Now its new run's first chunk holds that peer's ledger a lease
    # and drops the dead run's half-received push.
    n = 2_000_000
    sizes = [n // 2, n - n // 2]
    old, cfg = _sparse_robot('adacomp', 5, sizes)
    srv = ServerAdapter(AdaCompServer(torch.zeros(n), 1, cfg, max_updates=10), 1, 0.1,
                        PushTransfers(SERVER, n, sparse_entries=push_entries(cfg, sizes)))
    g = torch.cos(torch.arange(n, dtype=torch.float32))
    for c in _chunks(old.on_compute_done(g, 0.0), SERVER)[:2]:     # then it crashed
        srv.on_message(c, 1.0)
    sparse = srv.transfers.forms[SPARSE_WIRE_CODEC].receiver
    assert [k[:2] for k in sparse.open] == [(0, 5)]
    new, _ = _sparse_robot('adacomp', 6, sizes)
    first = _chunks(new.on_compute_done(g, 2.0), SERVER)
    srv.on_message(first[0], 2.0)
    assert srv.transfers.peer_runs[0] == [5, 6]
    assert srv.transfers.peers[0].hold_until == 2.0 + BOUND_END_S
    assert [k[:2] for k in sparse.open] == [(0, 6)]
    for c in first[1:]:
        srv.on_message(c, 2.0)
    assert srv.engine.i == 1 and srv.rejects == 0        # nothing of run 5's was applied


def test_sparse_entries_out_of_range_are_refused_in_one_line():
    with pytest.raises(ValueError, match=r'sparse_entries must be in \[1, 100\]'):
        PushTransfers(SERVER, 100, sparse_entries=101)


def _asgd_server(n):
    """Return an ASGD config and a 16 KiB-chunk server: the replaced-run tests' one scene."""
    cfg = AdaCompConfig(mode='asgd', c=1.0)
    return cfg, ServerAdapter(AdaCompServer(torch.zeros(n), 1, cfg, max_updates=10), 1, 0.1,
                              PushTransfers(SERVER, n, chunk_bytes=16 * 1024))


def _run_push(n, cfg, run):
    """Return run ``run``'s first push (chunks, END) and adapter; runs differ in ``run`` only."""
    wk = WorkerAdapter(AdaCompWorker(0, torch.zeros(n), [n], cfg),
                       PushTransfers(0, n, chunk_bytes=16 * 1024, incarnation=run))
    chunks = _chunks(wk.on_compute_done(torch.full((n,), 0.5), 0.0), SERVER)
    tr = wk.transfers.sending[SERVER].transfer
    end = RowChunk(transfer_id=tr.transfer_id, seq=tr.next_seq, sender=0,
                   receiver=SERVER, kind=KIND_GRAD, clock=tr.clock, flags=FLAG_END,
                   codec=0, incarnation=run)
    return chunks, end, wk


def _deliver(srv, wk, q, now):
    """Hand ``srv`` the chunks ``q`` and ``wk`` its acks at ``now``, as a lossless link would."""
    while q:
        for a in srv.on_message(q.pop(0), now):
            if isinstance(a, Send) and isinstance(a.msg, TransferAck):
                q += _chunks(wk.on_message(a.msg, now), SERVER)


def _replaced_run():
    """
    Return robot 0's run 5 replaced by run 6, each run's first chunk heard at 0 s.

    Every replaced-run test starts from this scene: (config, server, run 5's chunks and END,
    run 6's chunks, run 6's adapter).
    """
    n = 24 * PUSH_ROW_ELEMENTS       # 6 chunks of 16 KiB
    cfg, srv = _asgd_server(n)
    old, old_end, _ = _run_push(n, cfg, 5)
    new, _, wk = _run_push(n, cfg, 6)
    srv.on_message(old[0], 0.0)
    srv.on_message(new[0], 0.0)
    return cfg, srv, old, old_end, new, wk


def _assert_run_6_arrives_once(srv, wk, new, now):
    """Deliver the rest of run 6's push at ``now``; check it went once, whole, and applied."""
    _deliver(srv, wk, new[1:], now)
    assert wk.transfers.resent == 0 and srv.pushes_received == 1 and srv.engine.i == 1


def test_a_late_chunk_of_a_replaced_run_leaves_the_new_run_s_push_alone():
    # Run 5 of robot 0 crashed with chunks of its push still on the way; run 6 began its
    # own. A chunk of run 5 arriving after run 6's first made run 5 the sender's current
    # run again and dropped run 6's transfer under way, which ended with rows missing and
    # went again, whole. Such a chunk is dropped (superseded); run 6's push arrives once.
    _, srv, old, _, new, wk = _replaced_run()
    assert srv.on_message(old[1], 0.0) == [] and srv.transfers.superseded == 1
    _assert_run_6_arrives_once(srv, wk, new, 0.0)
    assert srv.rejects == 0


def test_a_dead_run_s_late_chunks_never_take_it_back():
    # A replaced run that keeps speaking is taken back (it was the live one: a dead run's
    # late chunk had replaced it). A dead run's late chunks come within a network delay:
    # a burst of them, over seconds, stays superseded and the new run's push goes through.
    _, srv, old, _, new, wk = _replaced_run()
    for k, chunk in enumerate(old[1:] * 2):       # repeated, over 9 s
        assert srv.on_message(chunk, 1.0 + k) == []
    assert srv.transfers.superseded == 2 * (len(old) - 1) and srv.revivals == 0
    _assert_run_6_arrives_once(srv, wk, new, 10.0)
    assert srv.rejects == 0 and srv.transfers.peer_runs[0] == [5, 6]


def _asgd_push_scene():
    """
    Return an ASGD server, its one robot and the robot's first push as chunks.

    Why: the poke tests need a push on its way to a server whose pull is slow to arrive.
    """
    n = 24 * PUSH_ROW_ELEMENTS
    cfg = AdaCompConfig(mode='asgd', c=1.0)
    srv = ServerAdapter(AdaCompServer(torch.zeros(n), 1, cfg, max_updates=10), 1, 0.1,
                        PushTransfers(SERVER, n, chunk_bytes=16 * 1024))
    wk = WorkerAdapter(AdaCompWorker(0, torch.zeros(n), [n], cfg),
                       PushTransfers(0, n, chunk_bytes=16 * 1024, incarnation=5))
    return srv, wk, _chunks(wk.on_compute_done(torch.full((n,), 0.5), 0.0), SERVER)


def _poke_four_times(srv, wk, q) -> tuple:
    """
    Deliver ``q`` and the robot's acks, hold the server's pull back, and let it poke 4 times.

    Return the held pull and the time of the last poke: the pull is still on its way.
    """
    pull, now = [], 0.0
    for _ in range(4):
        while q:
            for a in srv.on_message(q.pop(0), now):
                if isinstance(a, Send) and isinstance(a.msg, TransferAck):
                    q += _chunks(wk.on_message(a.msg, now), SERVER)
                elif isinstance(a, Send):
                    pull.append(a.msg)                # still on its way
        now = wk.next_wakeup()
        q += _chunks(wk.on_tick(now), SERVER)
    return pull, now


def test_a_robot_waiting_for_its_pull_pokes_a_live_server_harmlessly():
    # A robot whose push was acknowledged repeats its END while no answer comes (a server
    # that restarted never had it). The server that took the push answers each with its
    # final ack again: nothing is sent again, nothing applied twice, nothing refused; the
    # pull, once it arrives, ends the pokes.
    srv, wk, q = _asgd_push_scene()
    pull, now = _poke_four_times(srv, wk, q)
    assert wk.transfers.pokes == 4 and now == pytest.approx(4 * 4 * 2.0)
    assert wk.transfers.resent == 0 and srv.pushes_received == 1 and srv.engine.i == 1
    assert srv.rejects == 0 and wk.rejects == 0
    for chunk in pull:
        for a in wk.on_message(chunk, now):
            if isinstance(a, Send) and isinstance(a.msg, TransferAck):
                srv.on_message(a.msg, now)
    assert wk.engine.j == 1 and not wk.transfers.settled
    assert wk.next_wakeup() is None


def test_a_push_fleet_s_bytes_are_its_engines_messages_not_the_chunks_on_the_wire():
    # summary.json's bytes_up/bytes_down of a push fleet (docs/outputs.md): the wire size of
    # each gradient message its server's engine was handed (whole, once) and of each message
    # the engine sent; the chunks that carry them, their copies, the robot's pokes and the
    # acks are not counted (Rog's engine leaves them out too: it counts delivered rows)
    srv, wk, q = _asgd_push_scene()
    q = [c for c in q for _ in range(2)]            # a link that duplicates every chunk
    wire_up = sum(c.wire_size() for c in q)
    pull, _ = _poke_four_times(srv, wk, q)
    n = srv.engine.model().numel()
    cfg = AdaCompConfig(mode='asgd', c=1.0)
    (push,) = AdaCompWorker(0, torch.zeros(n), [n], cfg).on_compute_done(
        torch.full((n,), 0.5), 0.0)
    bare = AdaCompServer(torch.zeros(n), 1, cfg, max_updates=10)
    answer = [a.msg for a in bare.on_message(push.msg, 0.0) if isinstance(a, Send)]
    assert wk.transfers.pokes == 4 and srv.pushes_received == 1
    assert srv.bytes_up == push.msg.wire_size() < wire_up
    assert srv.bytes_down == sum(msg.wire_size() for msg in answer) > 0
    assert srv.bytes_down != sum(c.wire_size() for c in pull)


def test_a_robot_s_repeated_end_is_counted_in_its_writer_s_ledger_until_acknowledged():
    # A robot waiting for its pull repeats its push's END every 8 s (a poke). Each one is
    # written to its writer as any END, but the ledger of that writer (PeerLink: the wire
    # bytes not yet covered by an ack) left it out, as Rog's repeated ENDs are not: a silent
    # server's writer held more than the ledger said. Each poke is counted now, and the
    # server's final ack in answer covers them all. Each poke goes END_COPIES times, each
    # copy counted.
    n = 24 * PUSH_ROW_ELEMENTS
    cfg, srv = _asgd_server(n)
    chunks, _, wk = _run_push(n, cfg, 5)
    _deliver(srv, wk, chunks, 0.0)
    link = wk.transfers.peers[SERVER]
    assert wk.transfers.settled and wk.transfers.wire_past_ack(SERVER) == 0
    sent, pokes = link.sent, []
    for k in range(3):                             # the server is silent: no answer
        pokes += _chunks(wk.on_tick(wk.next_wakeup()), SERVER)
        assert len(pokes) == (k + 1) * END_COPIES and pokes[-1].flags & FLAG_END
        each = wire_bytes(pokes[-1], link.fragment_bytes)
        assert link.sent - sent == wk.transfers.wire_past_ack(SERVER) == \
            (k + 1) * END_COPIES * each
    assert wk.transfers.pokes == 3 and 100 < each < 400 and END_COPIES == 2
    _deliver(srv, wk, pokes[-1:], 30.0)            # it answers the last: a final ack
    assert wk.transfers.wire_past_ack(SERVER) == 0
    assert link.sent - sent == 3 * END_COPIES * each
    assert srv.pushes_received == 1 and srv.rejects == 0 and wk.rejects == 0


def _malformed(chunk, end, how):
    """Return a chunk of ``chunk``'s run that the server refuses, made ``how``."""
    if how == 'receiver':
        return dataclasses.replace(chunk, receiver=1)
    if how == 'kind':
        return dataclasses.replace(chunk, kind=KIND_UPDATE)
    if how == 'clock':
        return dataclasses.replace(chunk, clock=-1)
    if how == 'size':
        return dataclasses.replace(chunk, payload=chunk.payload + bytes(4))
    if how == 'rows':
        return dataclasses.replace(chunk, row_ranges=[10_000, 10_001])
    if how == 'sender':
        return dataclasses.replace(chunk, sender=-2)
    return dataclasses.replace(end, payload=bytes(4))        # an END with a payload


BAD_CHUNKS = ('receiver', 'kind', 'clock', 'size', 'rows', 'sender', 'end payload')


@pytest.mark.parametrize('how', BAD_CHUNKS)
@pytest.mark.parametrize('sender_run', ['replaced', 'new'])
def test_a_malformed_chunk_of_another_run_revives_or_replaces_nothing(how, sender_run):
    # Run 5 of robot 0 was replaced by run 6. Its chunks were counted towards taking it
    # back (more than 2 over 16 s) before they were checked: malformed ones (another
    # receiver, kind, clock, size, rows, an END with a payload) revived run 5 and locked
    # run 6 out. One of a run never heard (7) made it the current one before it was checked:
    # run 6's open transfer dropped, its later chunks superseded. Now they are refused
    # first (a reject each), and run 6's push arrives once.
    cfg, srv, old, old_end, new, wk = _replaced_run()
    if sender_run == 'new':
        other, other_end, _ = _run_push(24 * PUSH_ROW_ELEMENTS, cfg, 7)
        bad = [_malformed(other[1], other_end, how)] * 3
    else:
        bad = [_malformed(old[1], old_end, how)] * 21
    for k, chunk in enumerate(bad):          # over 20 s: a live run's pokes would revive
        got, out = srv.transfers.on_message(chunk, 1.0 + k)
        assert got is None and [a.name for a in out] == ['reject']
    assert srv.transfers.rejects == len(bad) and srv.revivals == 0
    assert srv.transfers.superseded == 0 and srv.transfers.peer_runs[0] == [5, 6]
    _assert_run_6_arrives_once(srv, wk, new, 30.0)
    assert srv.engine.rejects == 0 and srv.transfers.peer_runs[0] == [5, 6]
    # well-formed chunks of run 5 still count: a live run 5 is taken back
    for k in range(3):
        srv.transfers.on_message(old_end, 31.0 + 8.0 * k)
    assert srv.revivals == 1 and srv.transfers.peer_runs[0] == [6, 5]


def test_a_robot_restarting_twice_quickly_is_never_taken_for_two_processes():
    # duplicate_rank says two live processes share a rank when a revival undoes the one
    # before it. One robot restarting twice within seconds, its runs heard out of order (the
    # second run's END before the first's late one), is revived once and never reported;
    # the runs it left behind keep nothing but one count of late chunks.
    t = PushTransfers(SERVER, 5000)

    def end(run, tid, now):
        """Hand the server run ``run``'s END of transfer ``tid``; return the logs' names."""
        m = RowChunk(transfer_id=tid, seq=0, sender=0, receiver=SERVER, kind=KIND_GRAD,
                     clock=0, flags=FLAG_END, codec=0, incarnation=run)
        return [a.name for a in t.on_message(m, now)[1] if isinstance(a, Log)]

    logs = end(1, 1, 0.0) + end(3, 1, 1.0) + end(2, 1, 1.5)    # run 2 died, heard late
    for k in range(6):
        logs += end(3, 2 + k, 2.0 + 8 * k)                     # run 3 keeps speaking
    logs += end(4, 1, 60.0) + end(3, 9, 60.5)                  # a restart again, reordered
    for k in range(6):
        logs += end(4, 2 + k, 61.0 + 8 * k)
    assert logs == ['worker_revived'] and t.revived == 1 and t.superseded == 3
    assert t.duplicate_ranks == set() and t.peer_runs[0][-1] == 4
    assert len(t.revival._seen) == 1


def test_a_run_the_transfers_take_back_is_handed_over_as_a_record_once():
    # The server's engine learns of a revival from the transfers' RunRevived records, not
    # from the worker_revived log (the operator's): robot 0's run 2 died with a push on its
    # way, heard after run 3; run 3 keeps repeating its END and is taken back, once.
    t = PushTransfers(SERVER, 5000)
    for run, tid, now in [(1, 1, 0.0), (3, 1, 1.0), (2, 1, 1.5)] + [
            (3, 2 + k, 2.0 + 8 * k) for k in range(3)]:
        t.on_message(RowChunk(transfer_id=tid, seq=0, sender=0, receiver=SERVER,
                              kind=KIND_GRAD, clock=0, flags=FLAG_END, codec=0,
                              incarnation=run), now)
    assert t.revived == 1 and t.take_revived() == [RunRevived(worker=0, run=3, retired=2)]
    assert t.take_revived() == []


class _RevivingTransfers:
    """Transfers that took runs back and log nothing of it: the adapter must ask them."""

    rejects = 0

    def __init__(self, revived):
        """Hold ``revived`` (RunRevived records) for the adapter's next message."""
        self.revived = revived

    def on_message(self, msg, now):
        """Return no message for the engine and no action (no worker_revived log)."""
        return None, []

    def take_revived(self):
        """Return the records held, once."""
        taken, self.revived = self.revived, []
        return taken


def test_the_server_adapter_revives_in_its_engine_what_the_transfers_hand_over():
    # ServerAdapter found revivals by scanning the transfers' actions for a Log named
    # 'worker_revived': renamed or dropped, the engine kept refusing the live run's pushes
    # for good. It takes the transfers' records now, whatever they log; a rank outside
    # the fleet changes nothing.
    cfg = AdaCompConfig(mode='asgd', c=1.0)
    engine = AdaCompServer(torch.zeros(64), 2, cfg, max_updates=10)
    for w in range(2):
        engine._take_run(w, 5)
        engine._take_run(w, 6)
    srv = ServerAdapter(engine, 2, 0.1, _RevivingTransfers(
        [RunRevived(worker=1, run=5, retired=6), RunRevived(worker=2, run=5, retired=6)]))
    ack = TransferAck(transfer_id=1, sender=1, receiver=SERVER, seq=0)
    assert srv.on_message(ack, 1.0) == []
    assert engine.past_runs == [[5], []] and engine.runs == [6, 6]


def test_the_final_ack_of_nothing_a_poke_draws_covers_the_pokes_in_the_ledger():
    # A poke is counted in the robot's ledger (PeerLink) until an ack covers it. A server
    # that no longer has the push's answer (a run taken back forgot it) answers a poke with
    # a final ack of nothing: the push goes again whole. That ack covers the pokes too (the
    # server read them), but the resend left it out of the ledger: the pokes stayed counted
    # past the ack, on top of the pushed-again chunks, until one of those was acknowledged.
    n = 24 * PUSH_ROW_ELEMENTS
    cfg, srv = _asgd_server(n)
    chunks, _, wk = _run_push(n, cfg, 5)
    _deliver(srv, wk, chunks, 0.0)
    assert wk.transfers.settled and wk.transfers.wire_past_ack(SERVER) == 0
    assert srv.transfers.forms[0].receiver.forget_closed(0, 5) == 1
    link = wk.transfers.peers[SERVER]
    pokes = []
    for _ in range(2):                             # the first poke is lost
        pokes += _chunks(wk.on_tick(wk.next_wakeup()), SERVER)
    now = wk.next_wakeup() - 1.0
    (ack,) = [a.msg for a in srv.on_message(pokes[-1], now) if isinstance(a, Send)]
    assert ack.final and ack.bytes_received == 0
    again = _chunks(wk.on_message(ack, now), SERVER)
    assert wk.transfers.resent == 1 and not wk.transfers.settled
    assert len(again) == 8 and again[-1].flags & again[-2].flags & FLAG_END  # END twice
    assert link.last_ack_time == now
    assert wk.transfers.wire_past_ack(SERVER) == sum(
        wire_bytes(c, link.fragment_bytes) for c in again)


def test_a_late_chunk_of_the_oldest_run_the_engine_remembers_is_superseded():
    # The server's engine remembers KEEP_RUNS runs of a robot before its current one; the
    # transfers remembered KEEP_RUNS runs the current one among them. After 9 restarts a
    # late chunk of the oldest run the engine remembers (its 2nd) was new to the transfers:
    # taken as a new run's, it made that run the current one (the pull under way to the
    # live run dropped) and the live run's chunks were superseded until it was taken back.
    # Both remember the same runs now: it is dropped as superseded and nothing changes.
    n = 24 * PUSH_ROW_ELEMENTS
    cfg, srv = _asgd_server(n)
    srv.engine.max_updates = 100
    late = None
    for run in range(1, KEEP_RUNS + 3):            # runs 1 to 10: 9 restarts
        chunks, _, wk = _run_push(n, cfg, run)
        late = chunks[1] if run == 2 else late
        _deliver(srv, wk, chunks, float(run))
    t, engine = srv.transfers, srv.engine
    assert engine.runs[0] == KEEP_RUNS + 2 and engine.past_runs[0][0] == 2
    assert t.peer_runs[0] == engine.past_runs[0] + [engine.runs[0]]
    pulls, superseded = t.dropped_pulls, t.superseded
    assert srv.on_message(late, 20.0) == [] and t.superseded == superseded + 1
    assert t.peer_runs[0][-1] == KEEP_RUNS + 2 and t.dropped_pulls == pulls
    assert srv.revivals == 0 and srv.rejects == 0


def _lossy_run(drop_every, limit_s=600.0, max_messages=20_000):
    """
    Run an ASGD server and one robot to the end; every ``drop_every``-th data chunk is lost.

    Why: ``rog chaos``'s loss-dup-reorder scenario drops 5 % of the chunks; this is the same
    link, deterministic and in virtual time (acks are instant and never lost, so only the
    data chunks' losses matter), for ``limit_s`` virtual seconds and ``max_messages``
    deliveries at most (a message sent again at once, for ever, takes no time). Return
    (server, robot, virtual seconds it took).
    """
    n, steps = 5000, 6
    w0 = torch.linspace(-1.0, 1.0, n)
    cfg = AdaCompConfig(mode='asgd', c=1.0)
    srv = ServerAdapter(AdaCompServer(w0, 1, cfg, max_updates=steps), 1, 0.1,
                        PushTransfers(SERVER, n, window=4, chunk_bytes=512))
    wk = WorkerAdapter(AdaCompWorker(0, w0, [n], cfg), PushTransfers(0, n, window=4,
                                                                     chunk_bytes=512))
    nodes = {SERVER: srv, 0: wk}
    sent, now = [0], 0.0

    def acts(node, actions, q):
        """Queue what ``node`` sends (a data chunk lost now and then) and compute at once."""
        for a in actions:
            if isinstance(a, StartCompute):
                q.append((node, None))
            elif isinstance(a, Send):
                if isinstance(a.msg, RowChunk) and not a.msg.flags & FLAG_END:
                    sent[0] += 1
                    if sent[0] % drop_every == 0:
                        continue
                q.append((a.dest, a.msg))
    q, delivered = [], 0
    acts(0, wk.start(now), q)
    while now < limit_s and not (wk.engine.stopped and srv.finished):
        while q and delivered < max_messages:
            delivered += 1
            dest, msg = q.pop(0)
            if msg is None:
                acts(dest, wk.on_compute_done(torch.sin(wk.w * 3.0) * 0.01, now), q)
            else:
                acts(dest, nodes[dest].on_message(msg, now), q)
        due = [t for t in (srv.next_wakeup(), wk.next_wakeup()) if t is not None]
        if not due or delivered >= max_messages:
            break
        now = max(now, min(due))
        for node in (SERVER, 0):
            acts(node, nodes[node].on_tick(now), q)
    return srv, wk, now


def test_a_message_that_lost_a_chunk_in_every_transfer_still_arrives_whole():
    # Every transfer of a push or a pull (40 chunks here) lost a chunk somewhere, and
    # a message that ended with rows missing went again whole: it lost a chunk again, for
    # ever. rog chaos's loss-dup-reorder (5 % of the chunks, 63 chunks to a pull) stalled
    # every push system's fleet after a few pushes. Sent again, only the rows that were
    # missing go, and the receiver adds them to those it has: each message arrives whole.
    clean_srv, clean_wk, _ = _lossy_run(drop_every=10 ** 9)
    srv, wk, took = _lossy_run(drop_every=20)      # (a row: 8 chunks)
    assert clean_srv.finished and clean_wk.engine.stopped
    assert srv.finished and wk.engine.stopped, (srv.clock, took)
    assert srv.clock == clean_srv.clock == [6]
    # the same pushes applied in the same order: the very model of the lossless run
    assert torch.equal(srv.engine.model(), clean_srv.engine.model())
    assert torch.equal(wk.w, clean_wk.w)
    assert srv.transfers.resent + wk.transfers.resent > 0


def _exchange(src, dst, q, now, lose=(), whole=None):
    """
    Carry ``q`` (chunks of ``src`` for ``dst``) and every answer both ways until none is left.

    Why: the tests below lose chosen chunks (``lose``: ``(transfer id, seq)``) and count the
    messages ``dst`` hands its engine (appended to ``whole``). Return ``whole``.
    """
    whole = [] if whole is None else whole
    budget = 100_000
    while q:
        budget -= 1
        assert budget > 0, 'the transfer never ends'
        chunk = q.pop(0)
        if (chunk.transfer_id, chunk.seq) in lose and not chunk.flags & FLAG_END:
            continue
        got, acks = dst.on_message(chunk, now)
        if got is not None:
            whole.append(got)
        for a in acks:
            if isinstance(a, Send):
                q += _chunks(src.on_message(a.msg, now)[1], dst.me)
    return whole


def test_a_poke_after_a_push_that_arrived_in_two_transfers_sends_nothing_again():
    # A push lost a chunk, and its missing rows went in a second transfer: the server has
    # it. The robot, waiting for the pull, pokes; the server answers from its record with
    # the final ack of the second transfer, whose bytes (the missing rows only) are fewer
    # than the push's. Taken for a server that never had the push, it went again whole and
    # the server handed its engine the same push twice.
    n = 5000
    wk = PushTransfers(0, n, chunk_bytes=4096)
    srv = PushTransfers(SERVER, n, chunk_bytes=4096)
    push = _model(n, 3, sender=0, receiver=SERVER, kind=KIND_GRAD)
    q = _chunks(wk.outgoing([Send(SERVER, push)], 0.0), SERVER)
    whole = _exchange(wk, srv, q, 0.0, lose={(1, 1)})
    assert wk.resent == 1 and len(whole) == 1
    assert bytes(whole[0].payload) == bytes(push.payload) and SERVER in wk.settled
    for _ in range(3):
        now = wk.next_wakeup()
        q = _chunks(wk.on_tick(now), SERVER)
        assert len(q) == END_COPIES and all(c.flags & FLAG_END for c in q)
        _exchange(wk, srv, q, now, whole=whole)
    assert wk.pokes == 3 and wk.resent == 1 and len(whole) == 1
    assert wk.sending == {} and srv.rejects == 0


def test_acks_from_ranks_we_never_sent_to_leave_no_state_behind():
    # An ack names its sender's rank and run: one from a rank we never sent a transfer to
    # (a forgery, garbage) was noted as that peer's run, two runs of it made a writer
    # ledger, and a flood of ranks and runs grew both without bound. Nothing is noted for
    # them; a peer we send to still has its acks and its new run heard.
    n = 5000
    srv = PushTransfers(SERVER, n, chunk_bytes=4096, incarnation=11)
    q = _chunks(srv.outgoing([Send(0, _model(n, 1))], 0.0), 0)
    for rank in range(1, 200):
        for run in (1, 2):
            ack = TransferAck(transfer_id=1, sender=rank, receiver=SERVER, seq=0,
                              incarnation=run, target_incarnation=11)
            assert srv.on_message(ack, 1.0) == (None, [])
    assert set(srv.peer_runs) <= {0} and set(srv.peers) == {0}
    assert len(_exchange(srv, PushTransfers(0, n, chunk_bytes=4096, incarnation=7), q,
                         1.0)) == 1
    assert srv.sending == {} and srv.peer_runs[0] == [7]


def test_a_robot_poking_after_a_push_that_lost_a_chunk_is_never_refused_as_invalid():
    # rog chaos --sync gsp --scenario loss-dup-reorder counted 'invalid' rejects: a push
    # that lost a chunk arrived in two transfers, the robot waited for its model (GSP
    # holds a robot at its group's bound), poked, the server's record of the second transfer
    # drew the push again whole, and the engine refused it as a push at a clock it had
    # passed. The same here with an ASGD server whose pull is still on its way.
    srv, wk, q = _asgd_push_scene()
    lost = q.pop(1)
    assert lost.transfer_id == 1 and not lost.flags & FLAG_END
    _poke_four_times(srv, wk, q)
    assert srv.rejects == 0 and wk.rejects == 0
    assert wk.transfers.pokes >= 3 and wk.transfers.resent == 1
    assert srv.pushes_received == 1 and srv.engine.i == 1


def test_a_push_whose_missing_rows_reach_a_restarted_server_goes_on_with_the_rest():
    # A push lost a chunk; its missing rows go in a second transfer, and the server's run
    # that had the others restarts before it: the new run answers that transfer with only
    # those rows. Its rows from the first run are not held there, so the push starts over
    # for that run with every row it lacks (the message's other rows), and the new run
    # takes the very push once, from its two transfers.
    n = 5000
    wk = PushTransfers(0, n, chunk_bytes=4096, incarnation=5)
    old = PushTransfers(SERVER, n, chunk_bytes=4096, incarnation=21)
    push = _model(n, 3, sender=0, receiver=SERVER, kind=KIND_GRAD)
    rows = dense_layout(n).n_rows
    q = _chunks(wk.outgoing([Send(SERVER, push)], 0.0), SERVER)
    second = []
    for chunk in q:                                   # the first run, one chunk lost
        if chunk.seq == 1 and not chunk.flags & FLAG_END:
            continue
        for a in old.on_message(chunk, 0.0)[1]:
            second += _chunks(wk.on_message(a.msg, 0.0)[1], SERVER)
    sending = wk.sending[SERVER]
    assert wk.resent == 1 and sending.got_by == 21
    lacked = int((~sending.got).sum())
    assert 0 < lacked < rows and sending.transfer.order.size == lacked
    new = PushTransfers(SERVER, n, chunk_bytes=4096, incarnation=22)
    whole = _exchange(wk, new, second, 1.0)
    assert wk.resent == 2 and len(whole) == 1
    assert bytes(whole[0].payload) == bytes(push.payload)
    assert wk.next_tid[SERVER] == 3 and wk.sending == {} and SERVER in wk.settled
    assert new.partial == {} and new.rejects == 0


@pytest.mark.parametrize('second_loses_a_chunk', [False, True])
def test_a_model_after_a_dropped_pull_is_never_mixed_with_the_rows_held_of_it(
        second_loses_a_chunk):
    # The server's pull to a robot lost a chunk, and the robot kept the rows that came;
    # before their rest went, a new run of that robot spoke and the pull was dropped. The
    # run comes back (it was the live one) and gets another model of the same clock (GSP's
    # Ready carries the robot's iteration, and its group's model moved on). Arrived whole,
    # the robot took the held rows of the first model in its stead; losing a chunk too, its
    # transfer was completed with them (the same run, kind and clock): the engine got a mix
    # of the two. A transfer continues a held message only as the next transfer of its
    # run, and the server skips an id after a pull it drops: the second model arrives as sent.
    n = 5000
    srv = PushTransfers(SERVER, n, chunk_bytes=4096, incarnation=3)
    wk = PushTransfers(0, n, chunk_bytes=4096, incarnation=5)
    first, second = _model(n, 4), _model(n, 9)
    second = dataclasses.replace(first, payload=second.payload)
    for chunk in _chunks(srv.outgoing([Send(0, first)], 0.0), 0):
        if chunk.seq != 1 or chunk.flags & FLAG_END:
            assert wk.on_message(chunk, 0.0)[0] is None          # its acks: lost
    assert list(wk.partial) == [(SERVER, 3)]
    assert srv._heard(0, 5, 0.0) == [] and srv.dropped_pulls == 0
    assert srv._heard(0, 6, 0.0) == [] and srv.dropped_pulls == 1 and srv.sending == {}
    srv._revive(0, 5, 0.5)                                # run 5 is the live one
    assert srv.peer_runs[0][-1] == 5
    q = _chunks(srv.outgoing([Send(0, second)], 1.0), 0)
    tid = q[0].transfer_id
    lose = {(tid, 2)} if second_loses_a_chunk else set()
    whole = _exchange(srv, wk, q, 1.0, lose=lose)
    assert len(whole) == 1 and bytes(whole[0].payload) == bytes(second.payload)
    assert wk.partial == {} and srv.resent == int(second_loses_a_chunk)
    assert srv.sending == {} and srv.dropped_pulls == 1 and tid == 3          # id 2 skipped


def _lossy_push(src, dst, push, now, lose_seq=1):
    """
    Send ``push`` from robot ``src`` to server ``dst`` at ``now``, its chunk ``lose_seq`` lost.

    Why: the held-rows tests need a push the server holds in part. Return the first chunks of
    the transfer of its missing rows, held back (still on their way).
    """
    resend = []
    for chunk in _chunks(src.outgoing([Send(SERVER, push)], now), SERVER):
        if chunk.seq == lose_seq and not chunk.flags & FLAG_END:
            continue
        got, acks = dst.on_message(chunk, now)
        assert got is None
        for a in acks:
            resend += _chunks(src.on_message(a.msg, now)[1], SERVER)
    assert src.resent == 1 and resend
    return resend


def _speak_until_revived(src, dst, q, start):
    """
    Deliver ``q`` (chunks of a retired run of ``src``) from ``start`` on, the first one thrice.

    Why: a retired run's chunks are dropped until it has kept speaking for two poke intervals
    (16 s); a live process repeats itself, so its first chunk comes again at 10 s and 20 s
    and takes it back. Return the messages ``dst`` hands its engine.
    """
    first = q[0]
    for k in (0, 1):
        assert dst.on_message(first, start + 10.0 * k) == (None, [])
    return _exchange(src, dst, q, start + 20.0)


def test_two_runs_of_one_rank_that_each_lost_a_chunk_both_arrive_whole():
    # Two live processes of robot 0 (runs 5 and 6, a rank given twice) each pushed, and each
    # push lost a chunk: the server held the rows of one message per rank, so run 6's
    # transfer dropped the rows it held of run 5's, and each later one the other's. Only the
    # missing rows go again, so neither push was ever whole, and each robot, every row
    # acknowledged, took its push as delivered. Rows are held per run: both arrive whole.
    n = 5000
    srv = PushTransfers(SERVER, n, chunk_bytes=4096, incarnation=21)
    a = PushTransfers(0, n, chunk_bytes=4096, incarnation=5)
    b = PushTransfers(0, n, chunk_bytes=4096, incarnation=6)
    push_a = _model(n, 3, sender=0, receiver=SERVER, kind=KIND_GRAD)
    push_b = dataclasses.replace(push_a, payload=_model(n, 8).payload)
    resend_a = _lossy_push(a, srv, push_a, 0.0)
    resend_b = _lossy_push(b, srv, push_b, 0.0)
    assert srv.peer_runs[0] == [5, 6] and len(srv.partial) == 2
    whole = _speak_until_revived(a, srv, resend_a, 1.0)       # run 5 is live: taken back
    whole += _speak_until_revived(b, srv, resend_b, 30.0)     # and so is run 6
    assert [bytes(m.payload) for m in whole] == [bytes(push_a.payload), bytes(push_b.payload)]
    assert srv.revived == 2 and srv.duplicate_ranks == {0}
    assert a.resent == b.resent == 1 and a.sending == b.sending == {}
    assert srv.partial == {} and srv.rejects == 0


def test_a_restarting_robot_leaves_the_rows_of_its_last_two_runs_held_at_most():
    # Rows of an unfinished message are held per run of its sender; each holding is a
    # model-sized buffer, so a robot that restarts mid-push again and again keeps those of
    # its last two runs heard (HELD_RUNS), not one per run it ever had.
    n = 5000
    srv = PushTransfers(SERVER, n, chunk_bytes=4096, incarnation=21)
    push = _model(n, 3, sender=0, receiver=SERVER, kind=KIND_GRAD)
    for run in (5, 6, 7, 8):
        _lossy_push(PushTransfers(0, n, chunk_bytes=4096, incarnation=run), srv, push, run)
    assert sorted(srv.partial) == [(0, 7), (0, 8)] and srv.peer_runs[0] == [5, 6, 7, 8]
    assert HELD_RUNS == 2 and srv.rejects == 0
    # the runs whose rows went are noted (their rest draws no row), one integer each, for
    # the last FREED_NOTES runs whose rows went (past the KEEP_RUNS + 1 remembered too),
    # however many restarts
    from rog_ros.protocol.push_transfers import FREED_NOTES
    assert srv.freed == {(0, 5): 1, (0, 6): 1}
    for run in range(9, 9 + 2 * FREED_NOTES):
        _lossy_push(PushTransfers(0, n, chunk_bytes=4096, incarnation=run), srv, push, run)
    runs = srv.peer_runs[0]
    assert len(runs) == KEEP_RUNS + 1 and len(srv.partial) == HELD_RUNS
    pruned = list(range(5, 9 + 2 * FREED_NOTES))[:-HELD_RUNS]
    assert sorted(srv.freed) == [(0, r) for r in pruned[-FREED_NOTES:]]


def _held_bytes(srv):
    """Return the bytes of the rows ``srv`` holds of unfinished messages (model-sized each)."""
    return sum(int(held[3].nbytes) for held in srv.partial.values())


def _two_runs_each_losing_a_chunk(n=5000):
    """
    Return ``(server, run 5, run 6, their pushes, their rests held back)`` of robot 0.

    Why: the retirement tests need a server that holds part of a push of each of two runs
    of one robot (run 5 replaced by run 6), each push's rest still on its way.
    """
    srv = PushTransfers(SERVER, n, chunk_bytes=4096, incarnation=21, n_workers=1)
    a = PushTransfers(0, n, chunk_bytes=4096, incarnation=5, n_workers=1)
    b = PushTransfers(0, n, chunk_bytes=4096, incarnation=6, n_workers=1)
    push_a = _model(n, 3, sender=0, receiver=SERVER, kind=KIND_GRAD)
    push_b = dataclasses.replace(push_a, payload=_model(n, 8).payload)
    resend_a = _lossy_push(a, srv, push_a, 0.0)
    resend_b = _lossy_push(b, srv, push_b, 1.0)
    return srv, a, b, (push_a, push_b), (resend_a, resend_b)


@pytest.mark.parametrize('old_speaks', [False, True])
def test_a_robot_restarted_once_leaves_no_buffer_of_its_dead_run_after_its_silence(
        old_speaks):
    # Robot 0's run 5 pushed, lost a chunk and died; its run 6 pushed and lost one too. The
    # server held run 5's rows until two newer runs of robot 0 were heard: after one restart
    # they stayed for good (37.9 MB a robot for the large model). A replaced run silent for
    # RETIRE_LEASES leases since the new run spoke is freed; one that keeps speaking (a
    # second live process of that rank) keeps its rows and, taken back, completes its push.
    n = 5000
    srv, a, b, (push_a, push_b), (resend_a, resend_b) = _two_runs_each_losing_a_chunk(n)
    assert srv.on_message(resend_b[0], 1.0)[0] is None       # run 6's rest under way
    model = 4 * n
    assert _held_bytes(srv) == 2 * model and sorted(srv.partial) == [(0, 5), (0, 6)]
    retire_s = RETIRE_LEASES * BOUND_END_S                     # 20 s (its poke every 8 s)
    assert srv.next_wakeup() == 1.0 + retire_s
    if old_speaks:
        for t in (12.0, 24.0):                                  # run 5 repeats itself
            assert srv.on_message(resend_a[0], t) == (None, [])
    srv.on_tick(1.0 + retire_s)
    if not old_speaks:
        assert sorted(srv.partial) == [(0, 6)] and _held_bytes(srv) == model
        assert {k[:2] for k in srv.receiver.open} == {(0, 6)} and srv.retired == 1
        assert _exchange(b, srv, resend_b[1:], 22.0)[0].payload == push_b.payload
        assert srv.partial == {} and srv.rejects == 0
        return
    assert sorted(srv.partial) == [(0, 5), (0, 6)] and _held_bytes(srv) == 2 * model
    whole = _exchange(a, srv, resend_a, 32.0)                   # taken back: it completes
    assert [m.payload for m in whole] == [push_a.payload] and srv.revived == 1
    assert srv.retired == 0 and srv.rejects == 0


def _forged_chunks(n, rank):
    """
    Return robot ``rank``'s push to the server as chunks (its first data chunk, its END).

    Why: a fleet with no key takes any rank's chunks; one from a rank past the fleet's is
    a forgery (or a robot given another --workers) and must open nothing.
    """
    forger = PushTransfers(rank, n, chunk_bytes=4096, incarnation=99)
    push = _model(n, 3, sender=rank, receiver=SERVER, kind=KIND_GRAD)
    chunks = _chunks(forger.outgoing([Send(SERVER, push)], 0.0), SERVER)
    return [chunks[0], chunks[-1]]


@pytest.mark.parametrize('rank', [3, 7, 10 ** 6])
def test_a_chunk_from_a_rank_outside_the_fleet_is_refused_before_any_buffer_opens(rank):
    # Without a fleet key, every forged chunk of a rank unknown to the server opened a
    # model-sized receive buffer (two per rank, a million ranks' worth), its END closed one
    # with rows missing, held, and its ack went back. The transfers know the fleet's size:
    # such a chunk, or an ack, is refused in one line naming the fix, and nothing is kept.
    n = 5000
    srv = PushTransfers(SERVER, n, chunk_bytes=4096, incarnation=21, n_workers=3)
    for chunk in _forged_chunks(n, rank):
        got, out = srv.on_message(chunk, 0.0)
        assert got is None and [a.name for a in out] == ['reject']
        assert out[0].info['error'] == (
            f'chunk from rank {rank}, outside this fleet of 3 robots (ranks 0..2): give every '
            f'node the same --workers')
    ack = TransferAck(transfer_id=1, sender=rank, receiver=SERVER, seq=0, incarnation=99,
                      target_incarnation=21)
    (log,) = srv.on_message(ack, 0.0)[1]
    assert log.name == 'reject' and log.info['error'].startswith(f'ack from rank {rank},')
    assert srv.rejects == 3 and srv.receiver.open == {} and srv.partial == {}
    assert srv.peer_runs == {} and srv.peers == {} and srv.receiver.closed == {}
    # the fleet's own ranks, and the server to a robot, still go through
    for chunk in _forged_chunks(n, 2):
        assert [a.msg.__class__ for a in srv.on_message(chunk, 0.0)[1]] == [TransferAck]
    robot = PushTransfers(0, n, chunk_bytes=4096, n_workers=3)
    assert len(_relay(PushTransfers(SERVER, n, chunk_bytes=4096), robot, _model(n, 1), 0)) == 1


@pytest.mark.parametrize('bad', [0, -1, 2.5, '3', True])
def test_a_fleet_size_that_is_not_a_count_of_robots_is_refused_in_one_line(bad):
    # the bound is a count of ranks: anything else would let every rank through, or none
    with pytest.raises(ValueError, match=r'^n_workers must be a whole number of robots'):
        PushTransfers(SERVER, 5000, n_workers=bad)


def test_a_fleet_size_counted_by_numpy_is_a_count_of_robots():
    # a whole number from numpy (a fleet size read from an array) was refused as not one:
    # 'must be a whole number of robots ... got np.int64(3)'; it is taken, as a plain int
    transfers = PushTransfers(SERVER, 5000, n_workers=np.int64(3))
    assert transfers.n_workers == 3 and type(transfers.n_workers) is int


def test_the_nodes_transfers_take_chunks_from_the_fleet_s_ranks_only():
    # the nodes give their transfers the fleet's --workers; a server adapter built with
    # its own transfers bounds them by its fleet too
    assert _transfers(_fleet_args(workers=4), 0, torch.zeros(5000)).n_workers == 4
    assert _server(5000, n_workers=2)[0].transfers.n_workers == 2


@pytest.mark.parametrize('lost', ['end', 'final ack'])
def test_a_transfer_whose_end_or_final_ack_is_lost_ends_without_waiting_for_a_timeout(lost):
    # A transfer ends when its END arrives and its final ack comes back; one of them lost,
    # it waited end_timeout_s (2 s) for END to go again. Each message that lost a chunk
    # takes one transfer more, so under rog chaos's 5 % losses those waits doubled a push
    # fleet's time. END goes twice: a lost one (or the answer to it) costs nothing, and
    # both are in the writer's ledger until the final ack covers them.
    n = 5000
    wk = PushTransfers(0, n, chunk_bytes=4096)
    srv = PushTransfers(SERVER, n, chunk_bytes=4096)
    push = _model(n, 3, sender=0, receiver=SERVER, kind=KIND_GRAD)
    q = _chunks(wk.outgoing([Send(SERVER, push)], 0.0), SERVER)
    ends = [c for c in q if c.flags & FLAG_END]
    assert END_COPIES == 2 and len(ends) == 2 and ends[0] is not ends[1]
    link = wk.peers[SERVER]
    assert link.sent == sum(wire_bytes(c, link.fragment_bytes) for c in q)
    if lost == 'end':
        q.remove(ends[0])
    whole, finals = [], 0
    for chunk in q:
        got, acks = srv.on_message(chunk, 0.0)
        whole += [got] if got is not None else []
        for a in acks:
            if a.msg.final:
                finals += 1
                if lost == 'final ack' and finals == 1:
                    continue
            assert _chunks(wk.on_message(a.msg, 0.0)[1], SERVER) == []
    assert len(whole) == 1 and bytes(whole[0].payload) == bytes(push.payload)
    assert wk.sending == {} and SERVER in wk.settled and wk.resent == 0
    assert wk.wire_past_ack(SERVER) == 0 and srv.rejects == 0


def test_a_robot_takes_chunks_and_acks_from_its_server_only():
    # A robot's inbox is written by the server alone; a chunk there from another robot's
    # rank (a forgery: no fleet key) passed the fleet bound, opened a model-sized receive
    # buffer (two per rank, its END held one more) and, whole, was handed to the engine,
    # which took it as its model: a robot of an 8-robot fleet could be made to hold 28 such
    # buffers, 1 GB of the large model. The server's address on the uplink is forged too.
    n = 5000
    robot = PushTransfers(0, n, chunk_bytes=4096, incarnation=5, n_workers=3)
    forger = PushTransfers(1, n, chunk_bytes=4096, incarnation=99)
    chunks = _chunks(forger.outgoing([Send(0, _model(n, 2, sender=1))], 0.0), 0)
    assert len(chunks) > 2
    for chunk in chunks:
        got, out = robot.on_message(chunk, 0.0)
        assert got is None and [getattr(a, 'name', None) for a in out] == ['reject']
        assert out[0].info['error'] == (
            'chunk from rank 1 to robot 0: a robot takes chunks and acks from its server only '
            '(a forgery: give the fleet a key, --fleet-key-file)')
    ack = TransferAck(transfer_id=1, sender=2, receiver=0, seq=0, incarnation=7,
                      target_incarnation=5)
    (log,) = robot.on_message(ack, 0.0)[1]
    assert log.name == 'reject' and log.info['error'].startswith('ack from rank 2 to robot 0:')
    assert robot.rejects == len(chunks) + 1 and robot.receiver.open == {}
    assert robot.partial == {} and robot.peer_runs == {} and robot.receiver.closed == {}
    srv = PushTransfers(SERVER, n, chunk_bytes=4096, incarnation=21, n_workers=3)
    fake = PushTransfers(SERVER, n, chunk_bytes=4096, incarnation=98)
    push = _model(n, 3, sender=SERVER, receiver=SERVER, kind=KIND_GRAD)
    (first,) = _chunks(fake.outgoing([Send(SERVER, push)], 0.0), SERVER)[:1]
    got, out = srv.on_message(first, 0.0)
    assert got is None and [getattr(a, 'name', None) for a in out] == ['reject']
    assert out[0].info['error'].startswith('chunk from the server to the server:')
    assert srv.receiver.open == {} and srv.peer_runs == {}
    # the server's pull still reaches the robot whole
    assert len(_relay(PushTransfers(SERVER, n, chunk_bytes=4096), robot, _model(n, 1), 0)) == 1


def test_a_push_in_three_transfers_whose_robot_run_is_taken_back_arrives_whole():
    # A push lost a chunk, and so did the transfer of its missing rows, whose final acks were
    # lost as well: the robot repeats that transfer's END. Meanwhile a late chunk of another
    # run of the robot retired its run, which keeps repeating the END and is taken back: its
    # transfers' answers are forgotten (_revive), so the END closes that transfer again, with
    # no rows. Taken as a transfer that is not the next of the held message, it dropped the
    # rows held of both transfers, while the robot, told the first transfer's rows arrived,
    # sent the others only: the server never had the push whole, the robot took it as
    # delivered and waited for its pull for good. A transfer closed again keeps them.
    n = 5000
    wk = PushTransfers(0, n, chunk_bytes=4096, incarnation=5, n_workers=1)
    srv = PushTransfers(SERVER, n, chunk_bytes=4096, incarnation=21, n_workers=1)
    push = _model(n, 3, sender=0, receiver=SERVER, kind=KIND_GRAD)
    rest = _lossy_push(wk, srv, push, 0.0)                     # transfer 1: chunk 1 lost
    assert {c.transfer_id for c in rest} == {2} and srv.partial
    for chunk in rest + _chunks(wk.on_tick(0.0), SERVER):     # transfer 2: chunk 0 lost,
        if chunk.seq == 0 and not chunk.flags & FLAG_END:      # its final acks too
            continue
        for a in srv.on_message(chunk, 0.1)[1]:
            if not a.msg.final:
                assert _chunks(wk.on_message(a.msg, 0.1)[1], SERVER) == []
    assert wk.sending[SERVER].transfer.transfer_id == 2 and srv.partial
    other = PushTransfers(0, n, chunk_bytes=4096, incarnation=6)     # a late chunk of run 6
    late = _chunks(other.outgoing([Send(SERVER, push)], 0.2), SERVER)[0]
    srv.on_message(late, 0.2)
    assert srv.peer_runs[0] == [5, 6]
    whole, now = [], 0.2
    while wk.sending or not whole:
        now = wk.next_wakeup()
        assert now < 60.0, 'the push never arrives'
        whole = _exchange(wk, srv, _chunks(wk.on_tick(now), SERVER), now, whole=whole)
    assert srv.revived == 1 and len(whole) == 1
    assert bytes(whole[0].payload) == bytes(push.payload)
    assert srv.partial == {} and SERVER in wk.settled and srv.rejects == 0


def test_an_older_transfer_closed_again_leaves_the_rows_held_of_a_later_one():
    # As above, a run taken back had its transfers' answers forgotten; an END copy of its
    # first transfer, late, closes that transfer again with no rows. It dropped the rows
    # held of the push's second transfer, whose final ack then went on: the third carried
    # the rows the robot was told were missing, and the server never had the push whole.
    n = 5000
    wk = PushTransfers(0, n, chunk_bytes=4096, incarnation=5, n_workers=1)
    srv = PushTransfers(SERVER, n, chunk_bytes=4096, incarnation=21, n_workers=1)
    push = _model(n, 3, sender=0, receiver=SERVER, kind=KIND_GRAD)
    first = [c for c in _chunks(PushTransfers(0, n, chunk_bytes=4096, incarnation=5).outgoing(
        [Send(SERVER, push)], 0.0), SERVER) if c.flags & FLAG_END][-1]    # as run 5 sends it
    rest = _lossy_push(wk, srv, push, 0.0)                     # transfer 1: chunk 1 lost
    finals = []
    for chunk in rest + _chunks(wk.on_tick(0.0), SERVER):     # transfer 2: chunk 0 lost
        if chunk.seq == 0 and not chunk.flags & FLAG_END:
            continue
        for a in srv.on_message(chunk, 0.1)[1]:
            (finals if a.msg.final else []).append(a.msg)
    held = int(srv.partial[(0, 5)][2].sum())
    assert srv.partial[(0, 5)][1] == 2 and finals
    assert srv.receiver.forget_closed(0, 5) == 2               # the run taken back
    assert srv.on_message(first, 0.2)[0] is None               # transfer 1's END, late
    assert srv.partial[(0, 5)][1] == 2 and int(srv.partial[(0, 5)][2].sum()) == held
    q = _chunks(wk.on_message(finals[0], 0.3)[1], SERVER)
    whole = _exchange(wk, srv, q, 0.3)
    assert len(whole) == 1 and bytes(whole[0].payload) == bytes(push.payload)
    assert srv.partial == {} and SERVER in wk.settled and wk.resent == 2


def test_a_retired_run_taken_back_later_gets_its_whole_push_delivered():
    # Robot 0's run 5 (a second live process of that rank, its link down) lost a chunk of its
    # push and fell silent past RETIRE_LEASES after run 6 spoke: the server freed the rows it
    # held of that push. Its link back, it sent the rest (the rows missing only, the next
    # transfer id) and, taken back, the server held those alone and answered them all
    # arrived: the robot took its push as delivered and waited for a pull that never came
    # (the push lost). Nothing held for a retired run's rest, the push goes again whole.
    srv, a, b, (push_a, push_b), (resend_a, resend_b) = _two_runs_each_losing_a_chunk()
    assert _exchange(b, srv, resend_b, 1.0)[0].payload == push_b.payload
    srv.on_tick(1.0 + RETIRE_LEASES * BOUND_END_S)
    assert srv.retired == 1 and srv.partial == {}
    whole = _speak_until_revived(a, srv, resend_a, 30.0)
    assert [m.payload for m in whole] == [push_a.payload] and srv.partial == {}
    assert srv.revived == 1 and a.resent == 2 and a.settled and srv.rejects == 0


def test_three_live_runs_of_one_rank_that_each_lost_a_chunk_all_arrive_whole():
    # Three live processes of robot 0 (runs 5, 6, 7: a robot restarted twice while its old
    # processes still send) each pushed, and each push lost a chunk. The server held the
    # rows of its last two runs heard only (HELD_RUNS): run 5's were dropped without a word,
    # and its rest (the missing rows only) was held alone and answered as arrived. Run 5,
    # every row acknowledged, took its push as delivered: the server never had it whole
    # (and each revival dropped another run's rows the same way). A run whose held rows were
    # dropped is answered with no row for its rest: it sends its push again whole.
    n = 5000
    srv = PushTransfers(SERVER, n, chunk_bytes=4096, incarnation=21, n_workers=1)
    runs = [PushTransfers(0, n, chunk_bytes=4096, incarnation=r, n_workers=1)
            for r in (5, 6, 7)]
    pushes = [_model(n, 3, sender=0, receiver=SERVER, kind=KIND_GRAD)]
    pushes += [dataclasses.replace(pushes[0], payload=_model(n, c).payload) for c in (8, 9)]
    rests = [_lossy_push(run, srv, push, 0.0) for run, push in zip(runs, pushes)]
    assert srv.peer_runs[0] == [5, 6, 7] and len(srv.partial) <= HELD_RUNS
    whole = []
    for k, (run, rest) in enumerate(zip(runs, rests)):
        whole += _speak_until_revived(run, srv, rest, 1.0 + 30.0 * k)
    assert sorted(bytes(m.payload) for m in whole) == sorted(bytes(p.payload) for p in pushes)
    assert srv.revived == 3 and srv.partial == {} and srv.rejects == 0
    assert all(run.sending == {} and SERVER in run.settled for run in runs)
    assert len(srv.partial) <= HELD_RUNS


def test_a_run_past_the_runs_remembered_whose_rows_were_pruned_still_sends_its_push_whole():
    # Robot 0's run 5 pushed and lost a chunk; nine more runs of rank 0 pushed (a respawn
    # loop while run 5's process lives on), and run 5's held rows were pruned (HELD_RUNS)
    # with a note (freed) kept only while run 5 was among the KEEP_RUNS + 1 runs remembered.
    # Past them the note went: run 5's rest was held alone and answered as arrived, run 5
    # took its push as delivered and the server never had it (0 whole). The notes of runs
    # past those remembered are kept too (FREED_NOTES a sender, one integer each): its rest
    # draws a final ack of no row and the push goes again whole.
    from rog_ros.protocol.push_transfers import FREED_NOTES
    n = 5000
    srv = PushTransfers(SERVER, n, chunk_bytes=4096, incarnation=21)
    push = _model(n, 3, sender=0, receiver=SERVER, kind=KIND_GRAD)
    a = PushTransfers(0, n, chunk_bytes=4096, incarnation=5)
    rest = _lossy_push(a, srv, push, 0.0)
    for run in range(6, 6 + KEEP_RUNS + 1):
        _lossy_push(PushTransfers(0, n, chunk_bytes=4096, incarnation=run), srv, push, 1.0)
    assert 5 not in srv.peer_runs[0] and (0, 5) in srv.freed
    whole = _exchange(a, srv, list(rest), 30.0)
    assert [bytes(m.payload) for m in whole] == [bytes(push.payload)]
    assert a.resent == 2 and a.sending == {} and srv.rejects == 0
    # bounded: one integer a run, FREED_NOTES of them a sender, whatever the restarts
    for run in range(100, 100 + 2 * FREED_NOTES):
        _lossy_push(PushTransfers(0, n, chunk_bytes=4096, incarnation=run), srv, push, 40.0)
    assert len(srv.freed) <= FREED_NOTES and len(srv.partial) == HELD_RUNS
