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
"""The unacknowledged-chunk window grows with the measured link rate (docs/scheduling.md)."""

import math
from pathlib import Path

import pytest

from rog_ros.core.compress import Identity, ScaledSign
from rog_ros.core.rows import RowLayout
from rog_ros.protocol.transfer import BOUND_END_S, MAX_WINDOW, MAX_WINDOW_BYTES, \
    OutgoingTransfer, window_for_rate
import torch

ROOT = Path(__file__).resolve().parents[1]


def test_window_holds_20_ms_at_the_measured_rate():
    assert window_for_rate(4, 0.0, 16384) == 4                 # no estimate yet: as configured
    assert window_for_rate(4, 10e6, 16384) == 4                # slow link: 4 chunks suffice
    assert window_for_rate(4, 150e6, 16384) == math.ceil(150e6 * 0.02 / (8 * 16384)) == 23
    assert window_for_rate(4, 1e12, 16384) == MAX_WINDOW
    assert window_for_rate(8, 20e6, 16384) == 8                # never below the configured one


def test_a_window_never_holds_more_than_half_the_writer_history_mark():
    # --window 1024 (the setting's top) of 16 KiB chunks kept 16 MiB unacknowledged: past
    # Cyclone's 8 MiB mark, a write to a robot whose link died held the server's loop
    import re
    from rog_ros.transport.dds_bus import WRITER_WATERMARKS
    mark = int(re.search(r'<WhcHigh>(\d+)MB</WhcHigh>', WRITER_WATERMARKS).group(1)) << 20
    assert MAX_WINDOW_BYTES <= mark // 2
    for window, rate, chunk in [(1024, 0.0, 16384), (1024, 1e12, 16384), (300, 50e6, 65000),
                                (1024, 1e12, 256), (64, 1e12, 65000)]:
        w = window_for_rate(window, rate, chunk)
        assert 1 <= w and w * chunk <= MAX_WINDOW_BYTES, (window, chunk, w)
    assert window_for_rate(1024, 0.0, 16384) == 256          # was 1024
    assert window_for_rate(1024, 0.0, 256) == 1024           # small chunks: as configured
    assert window_for_rate(4, 1e12, 65000) == MAX_WINDOW     # the defaults' reach unchanged


def _big_transfer(window, chunk_bytes, rate_bps, rows=9216, **extra):
    """
    Return a transfer of a whole model of 4 KiB rows (38 MB with ``rows`` 9216) and its bytes.

    A model larger than the DDS writer-history mark, as a rejoin or final model of a large
    workload is (docs/workloads.md, Large models).
    """
    layout, codec = RowLayout([(rows, 1024)]), Identity(torch.float32)
    rowbytes = codec.encode(layout, torch.arange(layout.n_params, dtype=torch.float32), None)
    tr = OutgoingTransfer(transfer_id=1, sender=-1, receiver=0, kind=2, clock=1, layout=layout,
                          codec=codec, rowbytes=rowbytes, scales=torch.zeros(1),
                          order=torch.arange(layout.n_rows), n_mandatory=layout.n_rows,
                          deadline=0.0, now=0.0, window=window, chunk_bytes=chunk_bytes,
                          rate_bps=rate_bps, **extra)
    return tr, layout, codec, rowbytes


def _silent(window, chunk_bytes, rate_bps, seconds=60.0, **extra):
    """
    Return (payload bytes sent, END time, the transfer) to a robot that never answers.

    What the sending DDS writer holds for that robot until its link or lease comes back
    (docs/workloads.md, Large models), ticked every 50 ms for ``seconds``.
    """
    tr = _big_transfer(window, chunk_bytes, rate_bps, **extra)[0]
    sent, end_at = sum(len(c.payload) for c in tr.pump(0.0)), None
    for step in range(1, int(round(seconds / 0.05)) + 1):
        out = tr.on_tick(step * 0.05)
        sent += sum(len(c.payload) for c in out)
        if end_at is None and any(c.flags & 1 for c in out):
            end_at = round(step * 0.05, 2)
    return sent, end_at, tr


@pytest.mark.parametrize('window, chunk_bytes, rate_bps, end_at', [
    (1024, 16384, 0.0, 10.0),     # 4 MiB windows: passed the 8 MiB mark at 4 s
    (256, 16384, 0.0, 10.0),
    (4, 65000, 1e9, 10.0),        # 39 chunks of 15 rows (61,440 B): at 6 s
    (64, 65000, 0.0, 10.0),
    (4, 16384, 1e9, 10.0),        # defaults grown to 64 chunks on a fast link: at 16 s
    (4, 16384, 0.0, None),        # 64 KiB per 2 s: 1.9 MiB in 60 s, as before
    (1024, 1000, 1e12, 10.0),     # fragments of rows, 1 MB windows
    (1, 65000, 0.0, None),
])
def test_a_robot_whose_link_died_is_never_sent_more_than_the_bound(
        window, chunk_bytes, rate_bps, end_at):
    # Released window slots sent a further window every end_timeout_s (2 s) without acks: a
    # 38 MB model passed Cyclone's 8 MiB writer mark within the 10 s lease, and the next
    # write to that robot held the server's loop. Now nothing goes past MAX_WINDOW_BYTES
    # unacknowledged; a DDS lease (BOUND_END_S) without an ack at the bound sends END (the
    # rest counts as lost)
    sent, at, tr = _silent(window, chunk_bytes, rate_bps)
    assert sent <= MAX_WINDOW_BYTES, sent         # 32 to 38 MB before but for 64 KiB windows
    assert at == end_at and tr.bytes_past_ack() == sent


def test_the_docs_state_the_bound_on_what_a_silent_robot_is_sent():
    # docs/workloads.md (Large models) and docs/faults.md said a silent robot passed the
    # mark 4, 6 and 16 s into an outage
    doc = ' '.join((ROOT / 'docs' / 'workloads.md').read_text().split())
    large = doc[doc.index('### Large models'):doc.index('Measured on 2026-12-06')]
    faults = ' '.join((ROOT / 'docs' / 'faults.md').read_text().split())
    for text in (large, faults):
        assert 'pass the mark 4 s' not in text and '16 s once a fast link grew' not in text
        assert 'never more than 4 MiB past its last acknowledged chunk' in text
    assert 'test_a_robot_whose_link_died_is_never_sent_more_than_the_bound' in large


def test_a_transfer_at_the_bound_resumes_on_acks_and_delivers_each_chunk_once():
    # A robot whose link is down for 3 s mid-transfer of an 8 MiB model: the first 4 MiB
    # window waits in the writer, release at 2 s sends nothing more, and the acks that
    # arrive when the link is back move it on to END; every chunk arrives exactly once
    from rog_ros.protocol.messages import ranges_from_sorted, TransferAck
    from rog_ros.protocol.transfer import IncomingTransfer
    import numpy as np
    tr, layout, codec, rowbytes = _big_transfer(1024, 16384, 0.0, rows=2048)
    n = len(tr.plan)
    link = tr.pump(0.0)
    assert len(link) == 256
    assert tr.on_tick(2.0) == [] and tr.released == 256     # slots released, no new window
    assert tr.bytes_past_ack() == MAX_WINDOW_BYTES
    assert tr.next_wakeup() == BOUND_END_S and tr.on_tick(3.0) == []
    inc = IncomingTransfer(transfer_id=1, sender=-1, kind=2, clock=1, layout=layout,
                           codec=codec, now=3.0)
    seen, ends, most = [], 0, 0
    while link:
        c = link.pop(0)
        if c.flags & 1:
            ends += 1
            continue
        assert inc.on_chunk(c, 3.0)                           # never a duplicate
        seen.append(c.seq)
        link += tr.on_ack(TransferAck(transfer_id=1, sender=0, receiver=-1, seq=c.seq), 3.0)
        most = max(most, tr.bytes_past_ack())
    assert sorted(seen) == seen == list(range(n)) and n == 512 and ends == 1
    assert most <= MAX_WINDOW_BYTES
    mask, buf, _, ranges = inc.close()
    final = TransferAck(transfer_id=1, sender=0, receiver=-1, seq=n, final=True,
                        chunk_ranges=ranges)
    delivered = tr.on_final(final, 3.5)
    assert np.array_equal(delivered, np.arange(layout.n_rows)) and bool(mask.all())
    assert torch.equal(buf, rowbytes)
    assert tr.on_final(final, 3.6) is None and tr.on_tick(10.0) == []   # finished once
    assert np.array_equal(ranges, ranges_from_sorted(np.arange(n)))


def test_a_transfer_whose_acks_never_come_ends_with_what_arrived():
    # DDS drops what its writer held when the robot's lease expires: no ack of those chunks
    # ever comes. At the bound the transfer sends END a lease after its last ack and the final
    # ack decides (the rows never sent are not delivered), as for chunks lost on the way
    from rog_ros.protocol.messages import ranges_from_sorted, TransferAck
    import numpy as np
    tr = _big_transfer(1024, 16384, 0.0, rows=2048)[0]
    assert len(tr.pump(0.0)) == 256 and tr.on_tick(2.0) == []
    assert tr.on_tick(4.0) == [] and tr.next_wakeup() == BOUND_END_S
    end = tr.on_tick(BOUND_END_S)
    assert len(end) == 1 and end[0].flags & 1 and end[0].seq == 256
    assert [c.seq for c in tr.on_tick(12.0)] == [256]           # END repeated, nothing else
    final = TransferAck(transfer_id=1, sender=0, receiver=-1, seq=100, final=True,
                        chunk_ranges=ranges_from_sorted(np.arange(100)))
    assert np.array_equal(tr.on_final(final, 13.0), np.arange(400))   # 4 rows a chunk
    assert tr.next_wakeup() is None


def test_a_fast_transfer_keeps_more_chunks_in_flight():
    layout = RowLayout([(600, 512)])
    codec = ScaledSign()
    p = torch.randn(layout.n_params)
    sc = codec.scales(layout, p)

    def start(rate):
        return OutgoingTransfer(transfer_id=1, sender=0, receiver=-1, kind=1, clock=1,
                                layout=layout, codec=codec, rowbytes=codec.encode(layout, p, sc),
                                scales=sc, order=torch.arange(layout.n_rows),
                                n_mandatory=layout.n_rows, deadline=math.inf, now=0.0,
                                chunk_bytes=1024, rate_bps=rate)
    assert len(start(0.0).pump(0.0)) == 4
    assert len(start(8e6).pump(0.0)) == math.ceil(8e6 * 0.02 / 8192) == 20


def test_stall_warning_timer_advances_at_its_own_wakeup_time():
    # A stall that began at t0: the warning is due at t0 + 30 as next_wakeup computes it.
    # With now - t0 >= 30 in on_tick, float rounding (here 29.999999999999996) kept the
    # timer due at the same instant forever: the simulator spun on one tick (a livelock).
    from protocol_fixtures import build
    _, server, _, _, _ = build('rog:4')
    t0 = 30.650080539197066                 # a stall seen in an outages run
    server.stall_since[1] = t0
    due = server.next_wakeup()
    assert due == t0 + server.stall_warn_s and due - t0 < server.stall_warn_s
    server.on_tick(due)
    assert server.next_wakeup() > due


def _transfer(layout, codec, p, n_mandatory, deadline, rate=0.0, window=4):
    sc = codec.scales(layout, p)
    return OutgoingTransfer(transfer_id=1, sender=0, receiver=-1, kind=1, clock=1,
                            layout=layout, codec=codec, rowbytes=codec.encode(layout, p, sc),
                            scales=sc, order=torch.arange(layout.n_rows),
                            n_mandatory=n_mandatory, deadline=deadline, now=0.0,
                            chunk_bytes=1024, rate_bps=rate, window=window)


def test_round_trip_sample_removes_one_chunk_transmission():
    from rog_ros.protocol.messages import TransferAck
    layout = RowLayout([(600, 512)])
    codec = ScaledSign()
    p = torch.randn(layout.n_params)
    # Link: 10 ms round trip, 4 ms to transmit one chunk; the first four go at t = 0.
    tr = _transfer(layout, codec, p, layout.n_rows, math.inf)
    assert len(tr.pump(0.0)) == 4 and tr.round_trip_sample() is None
    tr.on_ack(TransferAck(transfer_id=1, sender=-1, receiver=0, seq=0), 0.014)
    assert tr.round_trip_sample() is None                     # one ack says nothing yet
    tr.on_ack(TransferAck(transfer_id=1, sender=-1, receiver=0, seq=1), 0.018)
    assert tr.round_trip_sample() == pytest.approx(0.010)
    # A transfer that opened with one chunk cannot tell transmission from round trip.
    one = _transfer(layout, codec, p, layout.n_rows, math.inf, window=1)
    assert len(one.pump(0.0)) == 1
    one.on_ack(TransferAck(transfer_id=1, sender=-1, receiver=0, seq=0), 0.014)
    one.on_ack(TransferAck(transfer_id=1, sender=-1, receiver=0, seq=1), 0.028)
    assert one.round_trip_sample() is None


def test_policy_floor_is_the_larger_of_compute_and_round_trip_floors():
    from rog_ros.protocol.policies import make_policy
    pol = make_policy('rog:4', deadline_floor=0.5, rtt_floor=4.0)
    assert pol.floor_s(0.1, 0.010) == pytest.approx(0.05)      # compute-bound
    assert pol.floor_s(0.1, 0.030) == pytest.approx(0.12)      # latency-bound link
    assert make_policy('rog:4', deadline_floor=0.0, rtt_floor=0.0).floor_s(5.0, 1.0) == 0.0
    with pytest.raises(ValueError, match='rtt_floor'):
        make_policy('rog:4', rtt_floor=-1.0)


def _through_outage(outage_s, mbps=5.0, window=256, chunk_bytes=16384, rows=2048, **extra):
    """
    Return (chunks sent, chunks in the plan) of an 8 MiB transfer whose link dies for a while.

    A FIFO link of ``mbps`` that carries nothing during [1 s, 1 s + ``outage_s``): each
    chunk is acknowledged when it is through, as a robot that kept its DDS lease does once
    its link is back. Ticked every 10 ms until END.
    """
    from rog_ros.protocol.messages import TransferAck
    tr = _big_transfer(window, chunk_bytes, 0.0, rows=rows, **extra)[0]
    down, up = 1.0, 1.0 + outage_s
    busy, acks, t = 0.0, [], 0.0

    def send(chunks, now):
        """Queue ``chunks`` on the link and note when each one's ack comes back."""
        nonlocal busy
        for c in chunks:
            if c.flags & 1:
                continue
            start = max(now, busy)
            if down <= start < up or start < down < start + len(c.payload) * 8e-6 / mbps:
                start = max(start, up)
            busy = start + len(c.payload) * 8e-6 / mbps
            acks.append((busy + 0.005, c.seq))
    send(tr.pump(0.0), 0.0)
    while tr.end_sent_at is None and t < 120.0:
        t = round(t + 0.01, 2)
        while acks and acks[0][0] <= t:
            send(tr.on_ack(TransferAck(transfer_id=1, sender=0, receiver=-1,
                                       seq=acks.pop(0)[1]), t), t)
        wake = tr.next_wakeup()
        if wake is not None and t >= wake:
            send(tr.on_tick(t), t)
    return tr.next_seq, len(tr.plan)


@pytest.mark.parametrize('outage_s', [2.5, 4.5, 6.0, 8.0])
def test_a_robot_back_within_its_lease_gets_the_whole_transfer(outage_s):
    # END at the bound came one end_timeout_s (2 s) after the window slots were released:
    # with 4 MiB windows any outage of 4 s or more (the fault sweeps have up to 6 s, DDS
    # keeps a robot 10 s) ended the transfer, 294 of 512 chunks sent at 5 Mbit/s, though
    # the bound alone keeps the writer under its mark and the acks resume with the link
    assert _through_outage(outage_s) == (512, 512)


def test_a_robot_silent_past_its_lease_gets_end_after_it():
    # DDS drops what its writer held when the robot's lease (10 s by default) expires: no
    # ack would ever come, so END goes once the lease could have ended, with 4 MiB sent
    sent, at, tr = _silent(256, 16384, 0.0, seconds=30.0)
    assert sent == MAX_WINDOW_BYTES and at == BOUND_END_S == 10.0


def _wire(chunks):
    """
    Return the bytes ``chunks`` take in the DDS writer's count, with a 16-byte auth tag.

    ``transfer.wire_bytes``, checked against the serializer itself below
    (``test_what_two_transfers_put_in_the_writer_is_counted_as_cyclone_counts_it``).
    """
    from rog_ros.protocol.transfer import wire_bytes
    return sum(wire_bytes(c) for c in chunks)


def _on_one_peer(window=256, chunk_bytes=16384, rows=2048, lease_s=None, fragment_bytes=None):
    """
    Return two transfers of an 8 MiB model to one robot, sharing what was written to it.

    Transfer 1 as a downlink dropped uncommitted (a JOIN, a restart) leaves it in the
    server's writer of that robot's chunks; transfer 2 is the next one, behind it. The
    robot's ``PeerLink`` counts with ``fragment_bytes`` (None: its default).
    """
    from rog_ros.protocol.transfer import PeerLink
    peer = PeerLink() if fragment_bytes is None else PeerLink(fragment_bytes=fragment_bytes)
    out = []
    for tid in (1, 2):
        tr, layout, codec, rowbytes = _big_transfer(window, chunk_bytes, 0.0, rows=rows)
        extra = {} if lease_s is None else {'lease_s': lease_s}
        tr = OutgoingTransfer(transfer_id=tid, sender=-1, receiver=0, kind=2, clock=1,
                              layout=layout, codec=codec, rowbytes=rowbytes,
                              scales=torch.zeros(1), order=torch.arange(layout.n_rows),
                              n_mandatory=layout.n_rows, deadline=0.0, now=0.0,
                              window=window, chunk_bytes=chunk_bytes, peer=peer, **extra)
        out.append(tr)
    return peer, out


@pytest.mark.parametrize('window, chunk_bytes', [(256, 16384), (1024, 16384), (1024, 4096),
                                                 (64, 65000)])
def test_two_transfers_to_a_silent_robot_stay_under_the_writer_mark_on_the_wire(
        window, chunk_bytes):
    # Each transfer kept 4 MiB of payload past its last ack, the bound counting no headers:
    # two of them to one silent robot (a downlink dropped uncommitted while its chunks waited
    # in the writer, and the next one) put 8 MiB + 56 KiB on the wire with --window 256,
    # past Cyclone's 8 MiB mark. Now every chunk to one robot counts, as it goes on the wire
    import re
    from rog_ros.transport.dds_bus import WRITER_WATERMARKS
    mark = int(re.search(r'<WhcHigh>(\d+)MB</WhcHigh>', WRITER_WATERMARKS).group(1)) << 20
    peer, (first, second) = _on_one_peer(window, chunk_bytes)
    sent, ends = first.pump(0.0) + second.pump(0.5), {}
    for step in range(1, 601):                     # 30 s without an ack, ticked every 50 ms
        for tr in (first, second):
            out = tr.on_tick(step * 0.05)
            sent += out
            if any(c.flags & 1 for c in out):
                ends.setdefault(tr.transfer_id, round(step * 0.05, 2))
    data = [c for c in sent if not c.flags & 1]
    assert _wire(sent) <= mark, _wire(sent) - mark
    assert _wire(sent) == peer.unacked()
    assert sum(len(c.payload) for c in data if c.transfer_id == 1) <= MAX_WINDOW_BYTES
    # the second transfer gets what is left under the mark, less room for ENDs (less with
    # small chunks: a 4 KiB one takes 4,672 bytes of the writer's count, 14 % more)
    first_bytes = _wire([c for c in sent if c.transfer_id == 1])
    assert sum(len(c.payload) for c in data if c.transfer_id == 2) >= \
        0.85 * (mark - (64 << 10) - first_bytes)
    assert ends == {1: BOUND_END_S, 2: BOUND_END_S}       # a lease after the start


@pytest.mark.parametrize('window, chunk_bytes', [(256, 16384), (1024, 4096), (1024, 1024)])
def test_what_two_transfers_put_in_the_writer_is_counted_as_cyclone_counts_it(
        window, chunk_bytes):
    # The ledger counted wire_size and the tag; Cyclone counts each sample's CDR (76 to 83
    # bytes more) and 80 bytes per fragment (dds_whc.c, whcn_size): with Wi-Fi's 1280-byte
    # fragments two transfers to a silent robot put 8,890,880 bytes in its count with 16 KiB
    # chunks, 9,118,000 with 4 KiB, 9,520,936 with 1 KiB, past the 8,388,608 mark
    # (measured with a suspended reader: the 478th 16 KiB chunk blocked, 477 counting
    # 8,395,200 there)
    pytest.importorskip('cyclonedds')
    import dataclasses
    import re
    from rog_ros.protocol.transfer import WRITER_MARK_BYTES
    from rog_ros.transport.convert import to_sample
    wifi = (ROOT / 'config' / 'cyclonedds_wifi.xml').read_text()
    fragment = int(re.search(r'<FragmentSize>(\d+)B</FragmentSize>', wifi).group(1))
    peer, (first, second) = _on_one_peer(window, chunk_bytes)
    sent = first.pump(0.0) + second.pump(0.5)
    for step in range(1, 401):                     # 20 s without an ack, ticked every 50 ms
        sent += first.on_tick(step * 0.05) + second.on_tick(step * 0.05)
    held = 0
    for c in sent:
        cdr = len(to_sample(dataclasses.replace(c, auth_tag=bytes(16))).serialize())
        held += cdr + -(-cdr // fragment) * 80
    assert held <= WRITER_MARK_BYTES, held - WRITER_MARK_BYTES
    assert held <= peer.unacked() <= WRITER_MARK_BYTES and second.next_seq > 0


def _cyclone_count(chunks, fragment_bytes):
    """
    Return what ``chunks`` take in Cyclone's writer-history count with ``fragment_bytes``.

    Each sample's CDR as the binding serializes it (16-byte auth tag) plus 80 bytes per
    fragment (``dds_whc.c``, ``whcn_size``), independent of ``transfer.wire_bytes``.
    """
    import dataclasses
    from rog_ros.transport.convert import to_sample
    held = 0
    for c in chunks:
        cdr = len(to_sample(dataclasses.replace(c, auth_tag=bytes(16))).serialize())
        held += cdr + -(-cdr // fragment_bytes) * 80
    return held


def _two_silent(fragment_bytes, window, chunk_bytes):
    """Return the chunks two transfers send a silent robot in 20 s, and the robot's ledger."""
    peer, (first, second) = _on_one_peer(window, chunk_bytes, fragment_bytes=fragment_bytes)
    sent = first.pump(0.0) + second.pump(0.5)
    for step in range(1, 401):                     # 20 s without an ack, ticked every 50 ms
        sent += first.on_tick(step * 0.05) + second.on_tick(step * 0.05)
    return sent, peer


@pytest.mark.parametrize('window, chunk_bytes', [(256, 16384), (1024, 4096), (64, 65000)])
def test_a_smaller_fragment_size_is_counted_as_cyclone_counts_it(window, chunk_bytes):
    # Every chunk was counted with 1 KiB fragments: with a FragmentSize of 600 B (a user's
    # configuration for a small MTU; rog fleet --netns stays above 1 KiB) Cyclone counts 28
    # fragments of 80 bytes in a 16 KiB chunk, the ledger 17, and two transfers to a silent
    # robot put 8,726,080 bytes in the writer's count with 16 KiB chunks (8,751,152 with
    # 4 KiB, 8,734,880 with 65000-byte ones) while the ledger said 8,317,760: past the
    # 8,388,608 mark, the server's loop blocked there. The ledger now counts with the
    # fragment size its engine was given
    pytest.importorskip('cyclonedds')
    from rog_ros.protocol.transfer import PeerLink, wire_bytes, WRITER_MARK_BYTES
    sent, _ = _two_silent(None, window, chunk_bytes)              # 1 KiB, as before
    assert _cyclone_count(sent, 600) > WRITER_MARK_BYTES         # what went wrong
    sent, peer = _two_silent(600, window, chunk_bytes)
    assert peer.fragment_bytes == 600 and _cyclone_count(sent, 600) == peer.unacked()
    assert peer.unacked() <= WRITER_MARK_BYTES
    assert _cyclone_count(sent, 1024) == sum(wire_bytes(c) for c in sent)   # the default
    chunk = next(c for c in sent if len(c.payload) >= 1024)
    assert wire_bytes(chunk, 600) > wire_bytes(chunk) == PeerLink().wire_bytes(chunk)
    assert PeerLink(fragment_bytes=600).wire_bytes(chunk) == wire_bytes(chunk, 600)
    cdr = _cyclone_count([chunk], 65535) - 80                    # one fragment
    assert wire_bytes(chunk, 600) == cdr + -(-cdr // 600) * 80


@pytest.mark.parametrize('fragment', [64, 100, 159, 160, 161, 512, 576, 600, 1000, 1023, 1024,
                                      1025, 1280, 1344, 4096, 60000, 65535])
def test_the_writer_bound_holds_on_cyclones_count_at_every_fragment_size(fragment):
    # What the server node counts with (the smaller of FragmentSize and 1 KiB) keeps what two
    # transfers to a silent robot put in Cyclone's count (80 bytes per fragment of the
    # configured size) under the 8 MiB mark, to the byte at 1 KiB and below, and every chunk
    # is counted right where its CDR ends just before, on or just after a fragment boundary
    # (below 64 B the ENDs outgrow their 64 KiB of room: 160 bytes of CDR, 3 fragments at 64)
    pytest.importorskip('cyclonedds')
    import dataclasses
    from rog_ros.nodes.connect import transfer_fragment_bytes
    from rog_ros.protocol.transfer import PeerLink, wire_bytes, WRITER_MARK_BYTES
    from rog_ros.transport.convert import to_sample
    counted = transfer_fragment_bytes(
        f'<General><FragmentSize>{fragment}B</FragmentSize></General>')
    assert counted == min(fragment, 1024)
    for window, chunk_bytes in ((256, 16384), (1024, 4096), (64, 65000)):
        sent, peer = _two_silent(counted, window, chunk_bytes)
        held = _cyclone_count(sent, fragment)
        assert held <= peer.unacked() <= WRITER_MARK_BYTES, (window, chunk_bytes, held)
        assert held == peer.unacked() or fragment > 1024
    template = next(c for c in sent if not c.flags & 1)
    template = dataclasses.replace(template, auth_tag=bytes(16))

    def cdr_of(n):
        """Return the template chunk with an ``n``-byte payload, and its CDR size."""
        chunk = dataclasses.replace(template, payload=bytes(n))
        return chunk, len(to_sample(chunk).serialize())
    extra = cdr_of(0)[1]                               # the CDR besides the payload
    for k in [k for k in range(1, 5) if k * fragment > extra + 8][:3]:
        sizes = set()
        for n in range(k * fragment - extra - 8, k * fragment - extra + 9):
            chunk, cdr = cdr_of(n)
            sizes.add(cdr)
            cyclone = cdr + -(-cdr // fragment) * 80
            assert wire_bytes(chunk, fragment) == cyclone, (k, n)
            assert PeerLink(fragment_bytes=counted).wire_bytes(chunk) >= cyclone, (k, n)
        assert min(sizes) <= k * fragment < max(sizes), (k, sorted(sizes))


def test_the_server_engine_counts_with_the_fragment_size_it_is_given():
    # the fragment size is the engine's parameter, not a global, as the lease is; a bad one
    # is refused with one line naming FragmentSize
    from rog_ros.core.compress import RowScaledSign
    from rog_ros.protocol.policies import make_policy
    from rog_ros.protocol.ps import ServerEngine
    from rog_ros.protocol.transfer import PeerLink, wire_bytes, WHC_FRAGMENT_BYTES
    layout, codec, pol = RowLayout([(2048, 1024)]), RowScaledSign(), make_policy('rog:4')
    w0 = torch.zeros(layout.n_params)

    def first_chunks(**extra):
        """Return robot 1's ledger and the chunks of a snapshot started to it."""
        server = ServerEngine(layout, codec, pol, 2, w0, lr=0.1, window=256, **extra)
        server._holds_unknown(1)
        return server.peers[1], _chunks_of(server._start_snapshot(1, 0, 0.0))
    peer, sent = first_chunks(fragment_bytes=600)
    assert peer.fragment_bytes == 600 and peer.unacked() == sum(wire_bytes(c, 600) for c in sent)
    default, same = first_chunks()
    assert default.fragment_bytes == WHC_FRAGMENT_BYTES == 1024
    assert default.unacked() == sum(wire_bytes(c) for c in same) < peer.unacked()
    for bad in (0, -600, 65536, 600.0, '600', None, True):
        said = set()
        for make in (lambda: ServerEngine(layout, codec, pol, 2, w0, lr=0.1,
                                          fragment_bytes=bad),
                     lambda: PeerLink(fragment_bytes=bad)):
            with pytest.raises(ValueError) as err:
                make()
            said.add(str(err.value))
        assert said == {'fragment_bytes must be a whole number of bytes in 1..65535 (the DDS '
                        f'General/FragmentSize), got {bad!r}'}, (bad, said)


def test_the_worker_engine_counts_its_pushes_with_the_fragment_size_it_is_given():
    # the server's ledger took FragmentSize (af04f62), the robot's did not: a robot's
    # pushes into its one writer were counted in 1 KiB fragments whatever Cyclone was told,
    # so with 600-byte fragments its 8 MiB of pushes passed the mark on Cyclone's count
    from rog_ros.core.compress import RowScaledSign
    from rog_ros.protocol.policies import make_policy
    from rog_ros.protocol.transfer import wire_bytes
    from rog_ros.protocol.worker import WorkerEngine
    layout, codec, pol = RowLayout([(2048, 1024)]), RowScaledSign(), make_policy('rog:4')
    w0 = torch.zeros(layout.n_params)

    def first_chunks(**extra):
        """Return the worker's ledger and the chunks of a push of every row."""
        worker = WorkerEngine(0, 2, layout, codec, pol, w0, window=256, **extra)
        push = worker._outgoing(1, 0, codec.encode(layout, w0, torch.ones(layout.n_tensors)),
                                torch.ones(layout.n_tensors), torch.arange(layout.n_rows),
                                layout.n_rows, math.inf, 0.0)
        return worker.peer, push.pump(0.0)
    peer, sent = first_chunks(fragment_bytes=600)
    assert len(sent) > 1 and peer.fragment_bytes == 600
    assert peer.unacked() == sum(wire_bytes(c, 600) for c in sent)
    default, same = first_chunks()
    assert default.unacked() == sum(wire_bytes(c) for c in same) < peer.unacked()
    with pytest.raises(ValueError, match='General/FragmentSize'):
        WorkerEngine(0, 2, layout, codec, pol, w0, fragment_bytes=0)


@pytest.mark.parametrize('lease_s, outage_s', [(30.0, 20.0), (60.0, 45.0)])
def test_the_end_at_the_bound_follows_a_longer_lease(lease_s, outage_s):
    # END at the bound went 10 s (Cyclone's default lease) after the last ack whatever the
    # lease: with a LeaseDuration of 30 or 60 s (lossy Wi-Fi) a robot back after 20 or 45 s
    # was still matched, its chunks kept, yet its transfer was cut at 10 s
    assert _through_outage(outage_s, lease_s=lease_s) == (512, 512)
    sent, at, _ = _silent(256, 16384, 0.0, seconds=lease_s + 5, lease_s=lease_s)
    assert sent == MAX_WINDOW_BYTES and at == lease_s
    assert _silent(256, 16384, 0.0, seconds=20.0, lease_s=5.0)[1] == 5.0   # a shorter one


def test_the_engines_take_the_lease_and_give_it_to_their_transfers():
    # the lease is the engines' parameter, not a global: what a node configured (docs/faults.md)
    from rog_ros.core.compress import RowScaledSign
    from rog_ros.protocol.policies import make_policy
    from rog_ros.protocol.ps import ServerEngine
    from rog_ros.protocol.worker import WorkerEngine
    layout, codec, pol = RowLayout([(64, 32)]), RowScaledSign(), make_policy('rog:4')
    w0 = torch.zeros(layout.n_params)
    server = ServerEngine(layout, codec, pol, 2, w0, lr=0.1, lease_s=30.0)
    server._holds_unknown(1)
    server._start_snapshot(1, 0, 0.0)
    tr = server.downlinks[1].transfer
    assert tr.lease_s == 30.0 and tr.peer is server.peers[1] and tr.next_wakeup() is not None
    worker = WorkerEngine(0, 2, layout, codec, pol, w0, lease_s=45.0)
    push = worker._outgoing(1, 0, codec.encode(layout, w0, torch.ones(layout.n_tensors)),
                            torch.ones(layout.n_tensors), torch.arange(64), 64, 1.0, 0.0)
    assert push.lease_s == 45.0 and push.peer is worker.peer
    assert ServerEngine(layout, codec, pol, 2, w0, lr=0.1).lease_s == BOUND_END_S
    for bad in (0.0, -1.0, float('inf'), float('nan')):
        with pytest.raises(ValueError, match='lease_s must be positive and finite'):
            ServerEngine(layout, codec, pol, 2, w0, lr=0.1, lease_s=bad)
        with pytest.raises(ValueError, match='LeaseDuration'):
            WorkerEngine(0, 2, layout, codec, pol, w0, lease_s=bad)


def test_every_engine_refuses_a_bad_lease_with_one_and_the_same_line():
    # ServerEngine, WorkerEngine, PushTransfers and OutgoingTransfer each had a copy of the
    # check, OutgoingTransfer's worded otherwise, and a lease that is no number failed in
    # math.isfinite with a TypeError naming no setting
    from rog_ros.core.compress import RowScaledSign
    from rog_ros.protocol.messages import SERVER
    from rog_ros.protocol.policies import make_policy
    from rog_ros.protocol.ps import ServerEngine
    from rog_ros.protocol.push_transfers import PushTransfers
    from rog_ros.protocol.transfer import OutgoingTransfer
    from rog_ros.protocol.worker import WorkerEngine
    layout, codec, pol = RowLayout([(64, 32)]), RowScaledSign(), make_policy('rog:4')
    w0 = torch.zeros(layout.n_params)
    rowbytes = codec.encode(layout, w0, torch.ones(layout.n_tensors))
    makers = {
        'server': lambda bad: ServerEngine(layout, codec, pol, 2, w0, lr=0.1, lease_s=bad),
        'worker': lambda bad: WorkerEngine(0, 2, layout, codec, pol, w0, lease_s=bad),
        'push': lambda bad: PushTransfers(SERVER, 4096, lease_s=bad),
        'transfer': lambda bad: OutgoingTransfer(
            transfer_id=1, sender=0, receiver=SERVER, kind=0, clock=0, layout=layout,
            codec=codec, rowbytes=rowbytes, scales=torch.ones(layout.n_tensors),
            order=torch.arange(layout.n_rows), n_mandatory=layout.n_rows, deadline=1.0,
            now=0.0, lease_s=bad)}
    for bad in (0.0, -1.0, float('inf'), float('nan'), '30', None, True):
        said = set()
        for name, make in makers.items():
            with pytest.raises(ValueError) as err:
                make(bad)
            said.add(str(err.value))
        assert said == {f'lease_s must be positive and finite (the DDS LeaseDuration in '
                        f'seconds), got {bad!r}'}, (bad, said)
    for good in (30, 12.5):
        assert {make(good).lease_s for make in makers.values()} == {float(good)}


def test_a_transfer_behind_another_on_a_slow_live_link_waits_for_it():
    # A downlink dropped uncommitted left 4 MiB in the writer of a robot on a 2 Mbit/s link
    # (16.8 s to drain); the next one, --window 256, queued behind it had no ack of its own
    # for 10 s and sent END at the bound, though the robot acked the first one all along.
    # Any ack from the robot shows it is alive and the writer drains towards our chunks
    from rog_ros.protocol.messages import TransferAck
    peer, (first, second) = _on_one_peer()
    busy, acks, t = 0.0, [], 0.0

    def send(chunks, now):
        """Queue ``chunks`` on a 2 Mbit/s FIFO link; note when each one's ack comes back."""
        nonlocal busy
        for c in chunks:
            busy = max(now, busy) + len(c.payload) * 8 / 2e6
            if not c.flags & 1:
                acks.append((busy + 0.005, c.transfer_id, c.seq))
    send(first.pump(0.0), 0.0)             # dropped at once: the engine ticks it no more
    send(second.pump(0.1), 0.1)
    while second.end_sent_at is None and t < 120.0:
        t = round(t + 0.01, 2)
        while acks and acks[0][0] <= t:
            _, tid, seq = acks.pop(0)
            ack = TransferAck(transfer_id=tid, sender=0, receiver=-1, seq=seq)
            if tid == 1:                   # the server: it frees the writer, pumps the open one
                if peer.on_ack(ack, t):
                    send(second.pump(t), t)
            else:
                send(second.on_ack(ack, t), t)
        wake = second.next_wakeup()
        if wake is not None and t >= wake:
            send(second.on_tick(t), t)
    assert second.next_seq == len(second.plan) == 512     # was 256 (4 MiB), END at 10 s
    assert second.end_sent_at > 30.0 and peer.last_ack_time > BOUND_END_S


def test_the_nodes_read_the_lease_their_cyclone_configuration_sets(tmp_path, monkeypatch):
    # the nodes give the engines the LeaseDuration of CYCLONEDDS_URI (the last source wins,
    # as in Cyclone), never less than Cyclone's default 10 s
    from rog_ros.transport.cyclone_settings import lease_duration_s
    lease = '<CycloneDDS><Domain><Discovery><LeaseDuration>{}</LeaseDuration></Discovery>' \
        '</Domain></CycloneDDS>'
    path = tmp_path / 'wifi.xml'
    path.write_text(lease.format('1 min'))
    assert lease_duration_s(f'file://{path}') == 60.0
    assert lease_duration_s(f'file://{path},{lease.format("30s")}') == 30.0
    assert lease_duration_s(f'{lease.format("2500 ms")}, {path}') == 60.0
    for unset in ('', '<CycloneDDS/>', str(tmp_path / 'missing.xml'), lease.format('inf'),
                  lease.format('10 parsecs'), lease.format('0 s')):
        assert lease_duration_s(unset) is None, unset
    monkeypatch.setenv('CYCLONEDDS_URI', lease.format('45 s'))
    assert lease_duration_s() == 45.0
    # what the server and worker nodes give their engines: that lease, at least BOUND_END_S
    from rog_ros.nodes.connect import transfer_lease_s
    assert transfer_lease_s() == 45.0
    monkeypatch.setenv('CYCLONEDDS_URI', lease.format('2500 ms'))
    assert transfer_lease_s() == BOUND_END_S
    monkeypatch.delenv('CYCLONEDDS_URI')
    assert transfer_lease_s() == BOUND_END_S


def test_the_lease_is_read_as_cyclone_reads_it(tmp_path, monkeypatch):
    # A commented-out LeaseDuration counted, as did one in the Domain of another id (Cyclone
    # skips both); one in lower case was missed (Cyclone's element names take any case), and
    # one without a unit read as seconds, where Cyclone reads milliseconds
    from rog_ros.transport.cyclone_settings import lease_duration_s
    lease = '<CycloneDDS><Domain{}><Discovery><LeaseDuration>{}</LeaseDuration></Discovery>' \
        '</Domain></CycloneDDS>'
    monkeypatch.delenv('ROS_DOMAIN_ID', raising=False)
    assert lease_duration_s('<CycloneDDS><!-- ' + lease.format('', '60 s') + ' --></CycloneDDS>'
                            ) is None
    both = lease.format(' Id="any"', '30 s') + lease.format(' Id="7"', '60 s')
    assert lease_duration_s(both) == 30.0
    assert lease_duration_s(lease.format('', '30 s').lower()) == 30.0
    assert lease_duration_s(lease.format(' id="0"', '30000')) == 30.0
    path = tmp_path / 'dds.xml'
    path.write_text(lease.format('', '1 min') + '\n<!-- <LeaseDuration>2 min</LeaseDuration> -->')
    assert lease_duration_s(str(path)) == 60.0
    monkeypatch.setenv('ROS_DOMAIN_ID', '7')
    assert lease_duration_s(both) == 60.0
    monkeypatch.setenv('ROS_DOMAIN_ID', 'seven')          # a bad one fails no node here
    assert lease_duration_s(both) == 60.0
    assert lease_duration_s(str(tmp_path)) is None        # a folder: Cyclone's own error


def test_the_lease_is_read_with_the_environment_references_cyclone_expands(monkeypatch):
    # Cyclone expands ${VAR}, ${VAR:-default}, ${VAR:+alt} and ${VAR:?error} in every value
    # (ddsi_config.c, proc_update_cfgelem: ddsrt_expand_envvars); the nodes read the text as
    # it stood: <LeaseDuration>${LEASE:-20s}</LeaseDuration> was no duration, and the
    # transfers at the bound ended at 10 s where DDS kept the robot matched for 20
    from rog_ros.nodes.connect import transfer_lease_s
    from rog_ros.transport.cyclone_settings import lease_duration_s
    lease = '<CycloneDDS><Domain{}><Discovery><LeaseDuration>{}</LeaseDuration></Discovery>' \
        '</Domain></CycloneDDS>'
    for name in ('LEASE', 'EMPTY', 'ROS_DOMAIN_ID'):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('EMPTY', '')
    assert lease_duration_s(lease.format('', '${LEASE:-20s}')) == 20.0
    assert transfer_lease_s(lease.format('', '${LEASE:-20s}')) == 20.0        # was 10
    assert lease_duration_s(lease.format('', ' ${EMPTY:-${LEASE:-25 s}} ')) == 25.0
    monkeypatch.setenv('LEASE', '45 s')
    assert lease_duration_s(lease.format('', '${LEASE:-20s}')) == 45.0
    assert lease_duration_s(lease.format('', '${LEASE}')) == 45.0
    assert lease_duration_s(lease.format('', '${LEASE:+30 s}')) == 30.0
    monkeypatch.setenv('ROS_DOMAIN_ID', '7')                # the Domain's Id is expanded too
    assert lease_duration_s(lease.format(' Id="${DOMAIN:-7}"', '${LEASE}')) == 45.0
    assert lease_duration_s(lease.format(' Id="${DOMAIN:-3}"', '${LEASE}')) is None
    assert lease_duration_s(lease.format('', '${CYCLONEDDS_DOMAIN_ID}0 s')) == 70.0
    # what Cyclone refuses, or reads as no duration, is no lease here (10 s at the bound)
    for bad in ('${NOT_SET}', '${EMPTY:?set it}', '${LEASE', '${LEASE:=20s}', '$LEASE',
                '${NOT_SET:+30 s}'):
        assert lease_duration_s(lease.format('', bad)) is None, bad
        assert transfer_lease_s(lease.format('', bad)) == BOUND_END_S, bad
    from rog_ros.transport.cyclone_settings import expand_env
    env = {'A': 'x}y', 'B': ''}
    assert expand_env('${A}-${B:-${C:-{z}}}-$A-${B:+no}', 3, env) == 'x}y-{z}-$A-'
    assert expand_env('${C:-a\\}b}', 3, env) == 'a\\}b'   # Cyclone keeps the backslash
    assert expand_env('${C:-' * 20 + '1' + '}' * 20, 3, env) is None     # 20 deep: refused
    assert expand_env('${C:-' * 19 + '1' + '}' * 19, 3, env) == '1'


def test_the_nodes_read_the_fragment_size_their_cyclone_configuration_sets(
        tmp_path, monkeypatch):
    # The ledger counted 1 KiB fragments whatever General/FragmentSize said: the nodes now
    # read it as Cyclone does (memory-size units, the last source, references expanded) and
    # give their engines the smaller of it and 1 KiB
    from rog_ros.nodes.connect import transfer_fragment_bytes
    from rog_ros.protocol.transfer import WHC_FRAGMENT_BYTES
    from rog_ros.transport.cyclone_config import config_path
    from rog_ros.transport.cyclone_settings import fragment_size_bytes
    frag = '<CycloneDDS><Domain{}><General><FragmentSize>{}</FragmentSize></General>' \
        '</Domain></CycloneDDS>'
    for name in ('FRAG', 'ROS_DOMAIN_ID'):
        monkeypatch.delenv(name, raising=False)
    for text, size in (('600B', 600), ('600 B', 600), (' 600 ', 600), ('1 KiB', 1024),
                       ('1kB', 1024), ('0.5 KiB', 512), ('1.25KiB', 1280), ('6e2 B', 600),
                       ('${FRAG:-700B}', 700), ('64 KiB', None), ('0 B', None),
                       ('600 b', None), ('600 bytes', None), ('-600 B', None), ('', None),
                       ('${FRAG}', None), ('$FRAG', None)):
        assert fragment_size_bytes(frag.format('', text)) == size, text
    path = tmp_path / 'dds.xml'
    path.write_text(frag.format('', '800B'))
    assert fragment_size_bytes(f'file://{path},{frag.format("", "600B")}') == 600
    assert fragment_size_bytes(f'{frag.format("", "600B")},{path}') == 800
    both = frag.format(' Id="any"', '900B') + frag.format(' Id="7"', '600B')
    assert fragment_size_bytes(both) == 900
    monkeypatch.setenv('ROS_DOMAIN_ID', '7')
    assert fragment_size_bytes(both) == 600
    assert fragment_size_bytes(f'file://{config_path("wifi")}') == 1280
    assert fragment_size_bytes(f'file://{config_path("loopback")}') == 60000
    # what the server node gives its engine: that size, never more than 1 KiB
    monkeypatch.setenv('CYCLONEDDS_URI', frag.format('', '${FRAG:-600B}'))
    assert transfer_fragment_bytes() == 600
    monkeypatch.setenv('FRAG', '512 B')
    assert transfer_fragment_bytes() == 512
    for uri in (f'file://{config_path("wifi")}', f'file://{config_path("loopback")}',
                frag.format('', 'none'), str(tmp_path)):
        monkeypatch.setenv('CYCLONEDDS_URI', uri)
        assert transfer_fragment_bytes() == WHC_FRAGMENT_BYTES == 1024, uri
    monkeypatch.delenv('CYCLONEDDS_URI')
    assert transfer_fragment_bytes() == WHC_FRAGMENT_BYTES


def test_a_node_takes_its_lease_and_fragment_size_from_one_read_of_its_configuration(
        tmp_path, monkeypatch):
    # a node asked for the lease and for the fragment size, and CYCLONEDDS_URI (its files
    # opened, its tags walked) was read once for each: transfer_limits reads it once
    from rog_ros.nodes.connect import transfer_fragment_bytes, transfer_lease_s, \
        transfer_limits
    from rog_ros.protocol.transfer import WHC_FRAGMENT_BYTES
    from rog_ros.transport import cyclone_settings
    monkeypatch.delenv('ROS_DOMAIN_ID', raising=False)
    path = tmp_path / 'dds.xml'
    path.write_text('<CycloneDDS><Domain><General><FragmentSize>600B</FragmentSize></General>'
                    '<Discovery><LeaseDuration>30 s</LeaseDuration></Discovery></Domain>'
                    '</CycloneDDS>')
    reads = []
    sources = cyclone_settings._uri_sources
    monkeypatch.setattr(cyclone_settings, '_uri_sources',
                        lambda uri: reads.append(uri) or sources(uri))
    for uri, limits in ((f'file://{path}', {'lease_s': 30.0, 'fragment_bytes': 600}),
                        ('', {'lease_s': BOUND_END_S, 'fragment_bytes': WHC_FRAGMENT_BYTES})):
        monkeypatch.setenv('CYCLONEDDS_URI', uri)
        del reads[:]
        assert transfer_limits() == limits and len(reads) == 1
        assert cyclone_settings.read_settings() == (limits['lease_s'] if uri else None,
                                                    limits['fragment_bytes'] if uri else None)
        assert transfer_lease_s() == limits['lease_s']
        assert transfer_fragment_bytes() == limits['fragment_bytes']
        assert transfer_limits(f'file://{path}') == {'lease_s': 30.0, 'fragment_bytes': 600}


def test_the_reader_and_the_engines_take_the_same_largest_fragment_size():
    # The largest FragmentSize is written twice: the reader (transport, no torch) and the
    # engines' check (protocol, which imports no transport); a size one takes and the other
    # refuses would stop a node at start, or count with a size Cyclone never used
    from rog_ros.protocol import transfer
    from rog_ros.transport import cyclone_settings
    assert cyclone_settings.MAX_FRAGMENT_BYTES == transfer.MAX_FRAGMENT_BYTES == (1 << 16) - 1
    assert transfer.fragment_bytes_checked(cyclone_settings.MAX_FRAGMENT_BYTES) == 65535
    with pytest.raises(ValueError, match='FragmentSize'):
        transfer.fragment_bytes_checked(cyclone_settings.MAX_FRAGMENT_BYTES + 1)


def test_a_fragment_size_is_read_with_the_numbers_glibc_scanf_takes():
    # Cyclone reads a memory size that is no whole number and unit with sscanf's %lf, and
    # glibc's takes C99 hexadecimal and an exponent marker without digits: Cyclone 11.0.1's
    # config trace says 600 B for FragmentSize 0x258, 0x1.2cp9, 600e and 0x258p (512 B for
    # 0x.8p10 B), where the reader found no size and the server counted 1 KiB fragments,
    # 80 bytes short per 600 bytes past 1 KiB of every chunk; 0x, 0x B and -0x258 it refuses
    from rog_ros.transport.cyclone_settings import fragment_size_bytes
    frag = '<CycloneDDS><Domain><General><FragmentSize>{}</FragmentSize></General>' \
        '</Domain></CycloneDDS>'
    for text, size in (('0x258', 600), ('0X258 B', 600), ('+0x258', 600), ('0x1.2cp9', 600),
                       ('0x.8p10 B', 512), ('0x0.4p1 KiB', 512), ('0x258p', 600),
                       ('0x258p+ B', 600), ('600e', 600), ('600e B', 600), ('600E-', 600),
                       ('.5e KiB', 512), ('6e2 B', 600), ('0x', None), ('0x B', None),
                       ('-0x258', None), ('0xg', None), ('600 e', None), ('1e999', None)):
        assert fragment_size_bytes(frag.format(text)) == size, text


def test_a_lease_is_read_with_the_number_rules_cyclone_reads_a_fragment_size_with(
        monkeypatch):
    # Cyclone reads a duration with the routine it reads a memory size with (ddsi_config.c
    # uf_int64_unit, the duration units, LeaseDuration between 0 and 1 hr, milliseconds
    # when no unit is given), and the lease had a looser parser of its own: Cyclone 11.0.1's
    # config trace says 10 min for 0x258 s, 600 ms for 600e ms, 2 s for 0X1P1 s and 1 ns
    # for 0.0000000005 s, and refuses 2 hr, 3600.0000001 s and a value that ends in white
    # space after its unit (10 s , as an environment reference gives it), where the lease
    # here was none, none, none, 5e-10 s, 7200 s, 3600.0000001 s and 10 s
    from rog_ros.transport.cyclone_settings import lease_duration_s
    lease = '<CycloneDDS><Domain><Discovery><LeaseDuration>{}</LeaseDuration></Discovery>' \
        '</Domain></CycloneDDS>'
    monkeypatch.delenv('ROS_DOMAIN_ID', raising=False)
    for text, seconds in (('0x258 s', 600.0), ('600e ms', 0.6), ('0X1P1 s', 2.0),
                          ('0x.8p1 s', 1.0), ('0.0000000005 s', 1e-9), ('1 hr', 3600.0),
                          ('3600000000000.4 ns', 3600.0), ('600e+ ms', 0.6),
                          ('1.5', 0.0015), ('100', 0.1), ('10  s', 10.0),
                          ('2 hr', None), ('3600.0000001 s', None), ('-1 s', None),
                          ('0x s', None), ('0x.p s', None), ('1e400 s', None),
                          ('0 xyz', None), ('10\ts', None), ('inf', None), ('INF', None),
                          ('nan s', None), ('99999999999999999999 ns', None)):
        assert lease_duration_s(lease.format(text)) == seconds, text
    # 0 is a lease Cyclone takes (0x. s and 0.0000000004 s round to it): no lease here, as 0 s
    for text in ('0', '-0 s', '0x. s', '0x.', '0.0000000004 s', '1.5e-7 ms'):
        assert lease_duration_s(lease.format(text)) is None, text
    for text, seconds in ((' 10 s', 10.0), ('\f10 s', 10.0), ('10 s ', None),
                          ('10 s\f', None), ('10 s\xa0', None)):
        monkeypatch.setenv('LEASE', text)                  # no XML trimming after expansion
        assert lease_duration_s(lease.format('${LEASE}')) == seconds, repr(text)


def test_the_lease_and_the_fragment_size_are_read_with_one_number_reader():
    # one reader for both, the unit table passed in: the number rules of glibc's sscanf, a
    # unit after spaces, a value without one in the default unit (0 in none), the bounds
    from rog_ros.transport import cyclone_settings as cc
    read, ns, sizes = cc._number_with_unit, cc._DURATION_UNITS, cc._MEMSIZE_UNITS
    hour = 3600 * 10 ** 9
    for text, value in (('10 s', 10 * 10 ** 9), ('0x258 s', 600 * 10 ** 9), ('250', 250000000),
                        ('0', 0), ('0x.', 0), ('0x. s', 0), ('-0 s', 0), ('1 hr', hour),
                        ('0.0000000005 s', 1), ('0.0000000004 s', 0), ('1 day', None),
                        ('0x.p', None), ('0x', None), ('0 B', None), ('', None), (' ', None)):
        assert read(text, ns, 10 ** 6, 0, hour) == value, text
    for text, value in (('0x. B', 0), ('1.25KiB', 1280), ('600', 600), ('64 KiB', None),
                        ('600 s', None), ('-0x258', None)):
        assert read(text, sizes, 1, 0, 65535) == value, text
    assert read('5', ns, 0, 0, hour) is None               # no default unit: one is required
    assert read('0', ns, 0, 0, hour) == 0

    # a whole number of over 4300 digits: Python's int() raised a ValueError out of the
    # node's start, where glibc's %lld reads any length (Cyclone 11.0.1's config trace: 10 s
    # for 4400 zeros then 10 s, 601 B for 4400 zeros then 600.5 B; refused: 4400 ones)
    from rog_ros.transport.cyclone_settings import fragment_size_bytes, lease_duration_s
    zeros, ones = '0' * 4400, '1' * 4400
    lease = '<Discovery><LeaseDuration>{}</LeaseDuration></Discovery>'
    assert lease_duration_s(lease.format(f'{zeros}10 s')) == 10.0
    assert lease_duration_s(lease.format(f'{zeros}10')) == 0.01
    assert fragment_size_bytes(f'<General><FragmentSize>{zeros}600.5 B</FragmentSize>'
                               '</General>') == 601
    for text in (f'{ones} s', f'-{ones} s', f'+{ones}', f'{ones} xyz', f'{zeros}{ones} ns'):
        assert read(text, ns, 10 ** 6, 0, hour) is None, text[-8:]
    assert read(f'{zeros}1 B', sizes, 1, 0, 65535) == 1
    assert read(f'-{zeros} s', ns, 10 ** 6, 0, hour) == 0


def test_a_domain_id_is_compared_as_the_number_cyclone_reads(monkeypatch):
    # Cyclone reads a Domain's Id with sscanf's %u, so Id="07" and Id="+7" are domain 7 (its
    # config trace applies their FragmentSize to domain 7); the reader compared the text with
    # '7' and skipped them: their lease and fragment size were none here
    from rog_ros.transport.cyclone_settings import fragment_size_bytes, lease_duration_s
    xml = '<CycloneDDS><Domain Id="{}"><General><FragmentSize>600B</FragmentSize></General>' \
        '<Discovery><LeaseDuration>30 s</LeaseDuration></Discovery></Domain></CycloneDDS>'
    monkeypatch.setenv('ROS_DOMAIN_ID', '7')
    for wanted in ('7', '07', '+7', '007', '${NOT_SET:-07}', 'any', 'ANY'):
        assert fragment_size_bytes(xml.format(wanted)) == 600, wanted
        assert lease_duration_s(xml.format(wanted)) == 30.0, wanted
    for other in ('8', '70', '-7', '7x', '0x7', ''):
        assert fragment_size_bytes(xml.format(other)) is None, other
        assert lease_duration_s(xml.format(other)) is None, other


def test_a_domain_id_is_read_as_cyclone_s_percent_u_and_one_it_refuses_sets_nothing(
        monkeypatch):
    # A Domain Id went through int(): 4301 digits raised a ValueError out of every node's
    # configure, where Cyclone 11.0.1 reads 4400 zeros then 7 as domain 7 (glibc's %u,
    # strtoul: saturated past 2**64 - 1, the low 32 bits kept). An Id it refuses refuses the
    # whole configuration ('-1' and past 2**64 are 2**32 - 1; 'default', '7 ', ' any',
    # '0x7', a reference it cannot expand): the reader skipped the Domain, or took it, and
    # kept the settings of the source before it; none now, as for any value Cyclone refuses
    from rog_ros.transport.cyclone_settings import read_settings
    first = '<Domain Id="any"><General><FragmentSize>700B</FragmentSize></General>' \
        '<Discovery><LeaseDuration>20 s</LeaseDuration></Discovery></Domain>'
    xml = first + ',<Domain Id={}><General><FragmentSize>600B</FragmentSize></General>' \
        '<Discovery><LeaseDuration>30 s</LeaseDuration></Discovery></Domain>'
    monkeypatch.setenv('ROS_DOMAIN_ID', '7')
    zeros, ones = '0' * 4400, '1' * 4400
    for ours in (zeros + '7', ' 7', '\t07', '-4294967289', '4294967303', "'07'", 'any',
                 '-18446744073709551609', '&#55;', '${CYCLONEDDS_DOMAIN_ID}'):
        quoted = ours if ours.startswith("'") else f'"{ours}"'
        assert tuple(read_settings(xml.format(quoted))) == (30.0, 600), ours[-12:]
    for other in (zeros + '8', '-2', '4294967294', '-18446744073709551615'):
        assert tuple(read_settings(xml.format(f'"{other}"'))) == (20.0, 700), other[-12:]
    for refused in (ones, '-' + ones, '-1', '4294967295', '18446744073709551616',
                    '-18446744073709551616', 'default', '', '7 ', ' any', '0x7', '+-7',
                    '${NOT_SET:?x}', '&bad;'):
        assert tuple(read_settings(xml.format(f'"{refused}"'))) == (None, None), refused[-12:]


def _check_second_sources(cases, tmp_path, monkeypatch):
    """
    Assert what the reader takes from each case's source, inline and in a file.

    The one check of the case tables of Cyclone's config traces (:func:`_placed_settings_cases`
    and the two after it), so the three tests read their sources alike: each is a second
    source after one that sets 20 s and 700 B; ``'refused'``: no settings, ``'taken'``: 30 s
    and 700 B, ``'ignored'``: 20 s and 700 B, ``'fragment'``: 20 s and 900 B, ``'both'``:
    30 s and 900 B.
    """
    from rog_ros.transport.cyclone_settings import read_settings
    first = '<Domain Id="any"><General><FragmentSize>700B</FragmentSize></General>' \
        '<Discovery><LeaseDuration>20 s</LeaseDuration></Discovery></Domain>'
    monkeypatch.delenv('ROS_DOMAIN_ID', raising=False)
    want = {'refused': (None, None), 'taken': (30.0, 700), 'ignored': (20.0, 700),
            'fragment': (20.0, 900), 'both': (30.0, 900)}
    path = tmp_path / 'dds.xml'
    for source, inline, in_file in cases:
        assert tuple(read_settings(f'{first},{source}')) == want[inline], source
        path.write_text(source)
        assert tuple(read_settings(f'{first},file://{path}')) == want[in_file], source


def _placed_settings_cases():
    """
    Return ``(source, inline, in a file)`` for the test below: what Cyclone 11.0.1 takes.

    And 0.10.5 alike (0.10.x's ``Channels`` is in no build of it).

    Each a second source after one that sets (20 s, 700 B): ``'refused'`` (no settings),
    ``'taken'`` (30 s, 700 B) or ``'ignored'`` (20 s, 700 B), as its config trace showed.
    """
    lease = '<Discovery><LeaseDuration>30 s</LeaseDuration></Discovery>'
    return [
        (f'<CycloneDDS><Foo>{lease}</Foo></CycloneDDS>', 'refused', 'refused'),
        (f'<CycloneDDS><Domain><Domain/>{lease}</Domain></CycloneDDS>', 'refused', 'refused'),
        (f'<CycloneDDS><Domain>{lease}<Foo/></Domain></CycloneDDS>', 'refused', 'refused'),
        ('<CycloneDDS><Domain><Discovery><Foo/><LeaseDuration>30 s</LeaseDuration></Discovery>'
         '</Domain></CycloneDDS>', 'refused', 'refused'),
        ('<CycloneDDS><Domain><General><LeaseDuration>30 s</LeaseDuration></General></Domain>'
         '</CycloneDDS>', 'refused', 'refused'),
        (f'<CycloneDDS><Domain><Channels/>{lease}</Domain></CycloneDDS>', 'refused', 'refused'),
        (f'<CycloneDDS><D>{lease}</D></CycloneDDS>', 'refused', 'refused'),
        (f'<CycloneDDS><Domain foo="1">{lease}</Domain></CycloneDDS>', 'refused', 'refused'),
        ('<CycloneDDS><Domain><Discovery><LeaseDuration foo="1">30 s</LeaseDuration>'
         '</Discovery></Domain></CycloneDDS>', 'refused', 'refused'),
        (f'<Foo>{lease}</Foo>', 'refused', 'refused'),
        ('<LeaseDuration>30 s</LeaseDuration>', 'refused', 'refused'),
        (f'<Domain>{lease}</Domain>', 'taken', 'refused'),
        (f'<Domain Id="any">{lease}</Domain>', 'taken', 'refused'),
        (lease, 'taken', 'refused'),
        ('<Domain Id="5"/>', 'ignored', 'refused'),
        ('<CycloneDDS><Domain><Disc><LeaseDuration>30 s</LeaseDuration></Disc></Domain>'
         '</CycloneDDS>', 'taken', 'refused'),
        ('<CycloneDDS><Domain><Discovery><Lease>30 s</Lease></Discovery></Domain>'
         '</CycloneDDS>', 'taken', 'refused'),
        (f'<CycloneDDS><Domain i="any">{lease}</Domain></CycloneDDS>', 'taken', 'refused'),
        (f'<CycloneDDS><InternalX/>{lease}</CycloneDDS>', 'taken', 'refused'),
        (f'<CycloneDDS><Domain Id="5"><Foo/><Domain/></Domain><Domain>{lease}</Domain>'
         '</CycloneDDS>', 'taken', 'taken'),
        (f'<CycloneDDS><Domain Id="5" foo="1"/><Domain>{lease}</Domain></CycloneDDS>', 'taken',
         'taken'),
        (f'<CycloneDDS><Domain foo="1" Id="5"/><Domain>{lease}</Domain></CycloneDDS>',
         'refused', 'refused'),
        (f'<CycloneDDS><DDSI2E>{lease}</DDSI2E></CycloneDDS>', 'taken', 'taken'),
        (f'<CycloneDDS>{lease}</CycloneDDS>', 'taken', 'taken'),
        (f'<CycloneDDS xmlns:xsi="x"><domain><Partitioning/><Threads/><Unsupported/>{lease}'
         '</domain></CycloneDDS>', 'taken', 'taken'),
    ]


def test_an_element_or_attribute_cyclone_does_not_know_refuses_the_configuration(
        tmp_path, monkeypatch):
    # Cyclone 11.0.1 refuses the whole configuration for an element or attribute it does not
    # know (ddsi_config.c, find_cfgelem_by_name: "Foo: unknown element", a Domain in a
    # Domain, a LeaseDuration in General), and a file whose top element is not CycloneDDS
    # (only inline XML gets an implicit CycloneDDS and Domain around it, and only inline XML
    # takes a unique prefix of a name: <Disc>, <Lease>). The reader took the settings of
    # all of these wherever they stood (it matched names, not places); now it reads them as
    # Cyclone does, on the way to Discovery/LeaseDuration and General/FragmentSize
    _check_second_sources(_placed_settings_cases(), tmp_path, monkeypatch)


def _names_one_cyclone_knows_cases():
    """
    Return ``(source, inline, in a file)`` that a Cyclone the robots may run takes.

    As :func:`_placed_settings_cases`. The 0.10.5 wheel (the robots' Python 3.8; ROS 2
    Humble's ``rmw_cyclonedds`` is 0.10.x) took what the 11.0.1 wheel refuses: ``TCP``, and
    the prefixes ``<A>`` (only ``AllowMulticast`` in 0.10.x's ``General``, ``AddrsetCosts``
    too in 11.0.x) and ``<S>`` (only ``Sizing`` without ``SSL``, ``SharedMemory`` and
    ``Security``); 11.0.1 took ``InitialLocatorPruneDelay``, ``<Di>`` and ``AddrsetCosts``,
    both ``<DD>`` (``DDSI2E``). Both wheels refuse ``Security``, ``SSL``, ``DDSSecurity`` and
    0.10.5 ``SharedMemory``: build options they lack (``ENABLE_SECURITY``, ``ENABLE_SSL``,
    ``ENABLE_SHM``), which a Cyclone built with them takes.
    """
    lease = '<Discovery><LeaseDuration>30 s</LeaseDuration></Discovery>'
    frag = '<FragmentSize>900 B</FragmentSize>'
    return [
        (f'<CycloneDDS><Domain><TCP/>{lease}</Domain></CycloneDDS>', 'taken', 'taken'),
        (f'<CycloneDDS><TCP/><Domain>{lease}</Domain></CycloneDDS>', 'taken', 'taken'),
        (f'<CycloneDDS><Domain><General><A/>{frag}</General></Domain></CycloneDDS>', 'fragment',
         'refused'),
        (f'<CycloneDDS><Domain><S/>{lease}</Domain></CycloneDDS>', 'taken', 'refused'),
        (f'<CycloneDDS><S/><Domain>{lease}</Domain></CycloneDDS>', 'taken', 'refused'),
        (f'<CycloneDDS><Domain><Security/><SSL/><SharedMemory/>{lease}</Domain></CycloneDDS>',
         'taken', 'taken'),
        (f'<CycloneDDS><DDSSecurity/><SSL/><Domain>{lease}</Domain></CycloneDDS>', 'taken',
         'taken'),
        ('<CycloneDDS><Domain><Discovery><InitialLocatorPruneDelay/><Di/>'
         '<EnableTopicDiscoveryEndpoints/><LeaseDuration>30 s</LeaseDuration></Discovery>'
         f'<General><AddrsetCosts/>{frag}</General></Domain></CycloneDDS>', 'both', 'refused'),
        (f'<CycloneDDS><DD>{lease}</DD></CycloneDDS>', 'taken', 'refused'),
    ]


def test_a_name_that_cyclone_0_10_knows_and_11_0_1_does_not_refuses_nothing(
        tmp_path, monkeypatch):
    # The robots (Jetson, Python 3.8: cyclonedds 0.10.5) and ROS 2 Humble's rmw_cyclonedds
    # run Cyclone 0.10.x, which knows TCP in Domain where the 11.0.1 wheel does not, and
    # takes inline <A> as AllowMulticast (11.0.1: ambiguous with AddrsetCosts); a build may
    # know Security, SSL or SharedMemory. The reader took 11.0.1's names only, so it counted
    # a configuration these Cyclones run with as refused and dropped its lease and fragment
    # size; it refuses now only what no build of 0.10.x or 11.0.x takes (every case run
    # through both wheels' Cyclone)
    _check_second_sources(_names_one_cyclone_knows_cases(), tmp_path, monkeypatch)


def _domain_id_element_cases():
    """
    Return ``(source, inline, in a file)`` with a ``Domain/Id`` element, as Cyclone read them.

    As :func:`_placed_settings_cases`; 0.10.5 and 11.0.1 read every one alike.
    """
    lease = '<Discovery><LeaseDuration>30 s</LeaseDuration></Discovery>'
    return [(f'<CycloneDDS><Domain><Id>{x}</Id>{lease}</Domain></CycloneDDS>', want, want)
            for x, want in (('5', 'ignored'), (' 5 ', 'ignored'), ('&#53;', 'ignored'),
                            ('${NOPE:-5}', 'ignored'), ('<![CDATA[5]]>', 'ignored'),
                            ('0', 'taken'), ('any', 'taken'), ('', 'taken'),
                            ('abc', 'refused'), ('-1', 'refused'))] + [
        (f'<CycloneDDS><Domain><Id>5</Id><Id>0</Id>{lease}</Domain></CycloneDDS>', 'ignored',
         'ignored'),
        (f'<CycloneDDS><Domain><Id>0</Id><Id>5</Id>{lease}</Domain></CycloneDDS>', 'refused',
         'refused'),
        (f'<CycloneDDS><Domain>{lease}<Id>5</Id></Domain></CycloneDDS>', 'refused', 'refused'),
        (f'<CycloneDDS><Domain Id="any"><Id>5</Id>{lease}</Domain></CycloneDDS>', 'refused',
         'refused'),
        ('<CycloneDDS><Domain><General><Interfaces><NetworkInterface address="127.0.0.1"/>'
         f'</Interfaces></General><Id>5</Id>{lease}</Domain></CycloneDDS>', 'refused', 'refused'),
        ('<CycloneDDS><Domain><Discovery><LeaseDuration> </LeaseDuration></Discovery><Id>5</Id>'
         f'{lease}</Domain></CycloneDDS>', 'ignored', 'ignored'),
        (f'<CycloneDDS xmlns="x"><Domain><Id>5</Id>{lease}</Domain></CycloneDDS>', 'ignored',
         'ignored'),
        (f'<CycloneDDS><Domain><Id>5</Id>{lease}</Domain><Domain>{lease}</Domain></CycloneDDS>',
         'taken', 'taken'),
        (f'<CycloneDDS><Domain><Id>5</Id></Domain>{lease}</CycloneDDS>', 'taken', 'taken'),
        (f'<CycloneDDS><DDSI2E><Id>5</Id>{lease}</DDSI2E></CycloneDDS>', 'ignored', 'ignored'),
        (f'<Domain><Id>5</Id>{lease}</Domain>', 'ignored', 'refused'),
    ]


def test_a_domain_id_element_applies_as_cyclone_applies_it(tmp_path, monkeypatch):
    # Cyclone 0.10.x and 11.0.x take <Domain><Id>5</Id> (moved to the Id attribute) as the
    # Domain's id: its settings are not for domain 0. An Id of another domain after any
    # data of the source since the last element in CycloneDDS (an attribute, a non-blank
    # text) refuses the configuration (uf_domainId: "not the first data in this source for
    # incompatible domain id"), as an Id it cannot read does. The reader looked only at the
    # Id attribute and took the settings of all of these (every case run through both
    # wheels' Cyclone)
    _check_second_sources(_domain_id_element_cases(), tmp_path, monkeypatch)


def test_a_tag_of_long_attribute_garbage_is_read_in_linear_time():
    # The attribute scan of a6ec735 tried a name from every character of a run without
    # white space or '=' and each try ran to the run's end: quadratic, 20 kB took 10 s and
    # 30 kB 24 s, for a node starting with such a CYCLONEDDS_URI. A name now starts after
    # white space or a quote: milliseconds (at most 5 s here, on a busy machine). Tracing
    # is not judged (the lease stands); an unknown attribute of Domain refuses
    import time
    from rog_ros.transport.cyclone_settings import read_settings
    lease = '<Discovery><LeaseDuration>3 s</LeaseDuration></Discovery>'
    junk = 'a' * 30000
    started = time.monotonic()
    got = read_settings(f'<CycloneDDS><Domain>{lease}</Domain><Tracing {junk}/></CycloneDDS>')
    assert time.monotonic() - started < 5.0
    assert tuple(got) == (3.0, None)
    assert tuple(read_settings(f'<CycloneDDS><Domain Id="any" {junk}="1">{lease}</Domain>'
                               '</CycloneDDS>')) == (None, None)


def test_a_setting_is_read_with_the_character_references_and_cdata_cyclone_reads(
        monkeypatch):
    # Cyclone's XML parser decodes &#54; and &#x36; in element text and takes a CDATA
    # section as it stands; the reader replaced only the five named entities and kept the
    # CDATA markup, so FragmentSize &#54;00B or <![CDATA[600B]]> (600 B in Cyclone 11.0.1's
    # config trace) was no size here. An entity Cyclone does not know (&foo;) it refuses
    from rog_ros.transport.cyclone_settings import fragment_size_bytes, lease_duration_s
    frag = '<CycloneDDS><Domain{}><General><FragmentSize>{}</FragmentSize></General>' \
        '</Domain></CycloneDDS>'
    monkeypatch.delenv('X', raising=False)
    monkeypatch.setenv('ROS_DOMAIN_ID', '7')
    for text, size in (('&#54;00B', 600), ('&#x36;00B', 600), ('<![CDATA[600B]]>', 600),
                       ('<![CDATA[${X:-700B}]]>', 700), (' <![CDATA[ 800B ]]> ', 800),
                       ('&#54;<![CDATA[00]]>&#66;', 600), ('&#54;00', 600),
                       ('600&foo;B', None), ('6<![CDATA[&amp;]]>', None), ('600B&', None),
                       ('&#x110000;00B', None), ('6&amp;00B', None)):
        assert fragment_size_bytes(frag.format('', text)) == size, text
    assert fragment_size_bytes(frag.format(' Id="&#55;"', '600B')) == 600
    assert fragment_size_bytes(frag.format(' Id="&#56;"', '600B')) is None
    assert lease_duration_s('<Discovery><LeaseDuration><![CDATA[20 s]]></LeaseDuration>'
                            '</Discovery>') == 20.0


def test_a_blank_setting_leaves_the_value_an_earlier_one_set(monkeypatch):
    # Cyclone's XML parser gives no value to an element whose text is empty once references
    # are decoded, comments left out and white space trimmed (xmlparser.c parse_element
    # calls no elem_data): the value an earlier source or element set stands (Cyclone
    # 11.0.1's config trace: 30 s and 600 B), where the reader took the blank as unset and
    # the nodes waited 10 s at the bound and counted 1 KiB fragments
    from rog_ros.transport.cyclone_settings import read_settings
    first = '<Discovery><LeaseDuration>30 s</LeaseDuration></Discovery>' \
        '<General><FragmentSize>600B</FragmentSize></General>'
    blank = '<Discovery><LeaseDuration>{0}</LeaseDuration></Discovery>' \
        '<General><FragmentSize>{0}</FragmentSize></General>'
    monkeypatch.delenv('ROS_DOMAIN_ID', raising=False)
    monkeypatch.setenv('EMPTY', '')
    for text in ('', ' ', '\n\t', '<!-- 20 s -->', '&#32;', '<![CDATA[ ]]>',
                 ' <!-- x --> <![CDATA[]]> &#10;'):
        assert read_settings(f'{first},{blank.format(text)}') == (30.0, 600), repr(text)
        assert read_settings(first + blank.format(text)) == (30.0, 600), repr(text)
        assert read_settings(blank.format(text)) == (None, None), repr(text)
    # a value that is not blank wins as before, also one Cyclone refuses (the configuration)
    assert read_settings(f'{first},{blank.format("20 s")}').lease_s == 20.0
    for refused in ('\f', '${EMPTY}', '&bad;'):
        assert read_settings(f'{first},{blank.format(refused)}') == (None, None), refused


def _chunks_of(actions):
    """Return the RowChunks among an engine's actions (what goes into the chunk writer)."""
    from rog_ros.protocol.messages import RowChunk
    return [a.msg for a in actions if isinstance(getattr(a, 'msg', None), RowChunk)]


def test_the_server_counts_a_dropped_downlink_and_its_acks_for_the_next_one():
    # The server keeps one downlink per robot, but one dropped uncommitted (a restart, a JOIN)
    # leaves its chunks in the writer: the next one is bounded with them, and their acks,
    # which the engine ignored, free the writer for it and show the robot is alive
    from rog_ros.core.compress import RowScaledSign
    from rog_ros.protocol.messages import SERVER, TransferAck
    from rog_ros.protocol.policies import make_policy
    from rog_ros.protocol.ps import ServerEngine
    from rog_ros.protocol.transfer import WRITER_MARK_BYTES
    layout = RowLayout([(2048, 1024)])              # 8 MiB lossless snapshots
    server = ServerEngine(layout, RowScaledSign(), make_policy('rog:4'), 2,
                          torch.zeros(layout.n_params), lr=0.1, window=256, chunk_bytes=16384)

    def snapshot(now):
        """Start a snapshot to robot 1; return its transfer and the chunks it sent."""
        server._holds_unknown(1)
        sends = server._start_snapshot(1, 0, now)
        return server.downlinks[1].transfer, _chunks_of(sends)
    first, sent = snapshot(0.0)
    server.downlinks[1] = None                       # dropped uncommitted
    second, more = snapshot(0.5)
    assert _wire(sent + more) <= WRITER_MARK_BYTES and second.at_bound()
    ack = TransferAck(transfer_id=first.transfer_id, sender=1, receiver=SERVER, seq=9)
    freed = _chunks_of(server._on_ack(ack, 12.0))
    assert freed and all(c.transfer_id == second.transfer_id for c in freed)
    assert second.on_tick(14.0) == [] and second.at_bound()    # the writer is full again
    assert second.next_wakeup() == 12.0 + BOUND_END_S             # END a lease after the ack
    assert second.on_tick(21.9) == [] and second.end_sent_at is None
    assert [c.flags & 1 for c in second.on_tick(22.0)] == [1]


def _ack_from(server, r, inc, tid, seq, final=False):
    """Return robot r's ack of chunk ``seq`` of transfer ``tid``, from its run ``inc``."""
    from rog_ros.protocol.messages import SERVER, TransferAck
    return TransferAck(transfer_id=tid, sender=r, receiver=SERVER, seq=seq, final=final,
                       incarnation=inc, target_incarnation=server.incarnation)


def test_a_restarted_robot_s_acks_free_nothing_its_crashed_run_holds_until_its_lease_ends():
    # Cyclone drops a sample once every matched reader acknowledged it and never counts a
    # reader as unresponsive: a robot that crashed and came back within its lease has its old
    # reader matched too, until that lease ends, and the writer keeps for it everything
    # written since its last ack. The new run's acks freed the old run's 4 MiB in the ledger,
    # and the next snapshot went on to 12 MiB in the writer, past the mark
    from rog_ros.core.compress import RowScaledSign
    from rog_ros.protocol.policies import make_policy
    from rog_ros.protocol.ps import ServerEngine
    from rog_ros.protocol.transfer import WRITER_MARK_BYTES
    layout = RowLayout([(2048, 1024)])              # 8 MiB lossless snapshots
    server = ServerEngine(layout, RowScaledSign(), make_policy('rog:4'), 2,
                          torch.zeros(layout.n_params), lr=0.1, window=256, chunk_bytes=16384,
                          lease_s=10.0)
    server.on_message(_ack_from(server, 1, 111, 999, 0), 0.0)        # robot 1's run 111
    server._holds_unknown(1)
    sent = _chunks_of(server._start_snapshot(1, 0, 0.0))        # that run crashes: no ack
    first = server.downlinks[1].transfer
    server.on_message(_ack_from(server, 1, 222, 998, 0), 2.0)       # its new run speaks
    assert server.worker_inc[1] == 222 and server.downlinks[1] is None
    server._holds_unknown(1)
    sent += _chunks_of(server._start_snapshot(1, 0, 2.0))
    second = server.downlinks[1].transfer
    t, acked = 2.0, 0
    while acked < second.next_seq:                   # the new run acks each chunk it gets
        t += 0.01
        sent += _chunks_of(server.on_message(
            _ack_from(server, 1, 222, second.transfer_id, acked), t))
        acked += 1
    assert t < 12.0 and first.next_seq > 0
    assert _wire(sent) <= WRITER_MARK_BYTES, _wire(sent) - WRITER_MARK_BYTES   # 12 MiB before
    assert second.at_bound() and server.next_wakeup() == 12.0   # the old run's lease ends
    more = _chunks_of(server.on_tick(12.0))
    assert more and all(c.transfer_id == second.transfer_id for c in more)
    assert second.end_sent_at is None


def test_the_worker_holds_what_a_crashed_server_run_was_sent_for_a_lease():
    # the same on the robot: a server that crashed and came back within its lease keeps its
    # old reader of the robot's pushes matched; the new run's acks free nothing before then
    from rog_ros.protocol.messages import SERVER, TransferAck
    from rog_ros.protocol.policies import make_policy
    from rog_ros.protocol.transfer import WRITER_MARK_BYTES
    from rog_ros.protocol.worker import WorkerEngine
    layout, codec = RowLayout([(2048, 1024)]), Identity()        # 8 MiB pushes
    w0 = torch.zeros(layout.n_params)
    worker = WorkerEngine(0, 2, layout, codec, make_policy('rog:4'), w0, window=256,
                          chunk_bytes=16384, lease_s=30.0)

    def push(tid, now):
        """Start push ``tid`` of the whole model at ``now``; return it and what it sent."""
        tr = worker._outgoing(tid, 0, codec.encode(layout, w0, torch.ones(layout.n_tensors)),
                              torch.ones(layout.n_tensors), torch.arange(layout.n_rows),
                              layout.n_rows, math.inf, now)
        return tr, tr.pump(now)
    first, sent = push(1, 0.0)                       # to the run that crashes: no ack
    worker._server_restart(object(), 7, 1.0)
    second, more = push(2, 1.0)
    sent += more
    t, acked = 1.0, 0
    while acked < second.next_seq:                   # the new run acks each chunk it gets
        t += 0.01
        ack = TransferAck(transfer_id=2, sender=SERVER, receiver=0, seq=acked)
        sent += second.on_ack(ack, t)
        acked += 1
    assert t < 31.0 and first.next_seq > 0
    assert _wire(sent) <= WRITER_MARK_BYTES, _wire(sent) - WRITER_MARK_BYTES
    assert second.at_bound() and second.next_wakeup() == 31.0   # the old run's lease ends
    assert second.on_tick(31.0) and second.end_sent_at is None


def test_a_lost_chunk_and_its_repair_move_the_ledger_only_forwards():
    # DDS delivers in order: an ack of chunk 4 means chunks 2 and 3 left the writer too
    # (delivered, or dropped with a reader whose lease ended), so lost chunks free their room
    # like the rest; their rows go again in a repair, a transfer of its own written after.
    # Late, duplicate, unsent, bogus and premature final acks move nothing
    from rog_ros.protocol.messages import TransferAck
    from rog_ros.protocol.transfer import PeerLink
    peer = PeerLink()
    first, layout, codec, rowbytes = _big_transfer(4, 16384, 0.0, rows=64, peer=peer)

    def ack(tid, seq, final=False):
        """Return whether robot 0's ack of ``seq`` of transfer ``tid`` moved the ledger."""
        return peer.on_ack(TransferAck(transfer_id=tid, sender=0, receiver=-1, seq=seq,
                                       final=final), 0.2)
    sent = first.pump(0.0)
    for k in (0, 1):
        sent += first.on_ack(TransferAck(transfer_id=1, sender=0, receiver=-1, seq=k), 0.1)
    assert first.next_seq == 6 and peer.unacked() == _wire(sent[2:])
    assert ack(1, 4) and peer.unacked() == _wire(sent[5:])          # 2 and 3 lost
    assert not ack(1, 2) and not ack(1, 4)                          # late, duplicate
    assert not ack(1, 9) and not ack(1, 5000) and not ack(1, -1)    # unsent, bogus
    assert not ack(1, 0, final=True) and not ack(77, 0)             # no END yet, unknown
    assert peer.unacked() == _wire(sent[5:])
    end = first._end(0.3)
    repair = OutgoingTransfer(transfer_id=2, sender=-1, receiver=0, kind=2, clock=1,
                              layout=layout, codec=codec, rowbytes=rowbytes,
                              scales=torch.zeros(1), order=torch.arange(8, 16), n_mandatory=8,
                              deadline=math.inf, now=0.4, window=4, chunk_bytes=16384,
                              peer=peer)
    again = repair.pump(0.4)                         # its two chunks and its END
    assert [c.seq for c in again] == [0, 1, 2] and again[0].payload == sent[2].payload
    assert peer.unacked() == _wire(sent[5:] + [end] + again)
    assert ack(1, 0, final=True) and peer.unacked() == _wire(again)   # up to its END
    assert ack(2, 0) and peer.unacked() == _wire(again[1:])
    assert not ack(1, 5) and not ack(1, 0, final=True)              # behind what is acked
    assert ack(2, 1) and ack(2, 0, final=True) and peer.unacked() == 0
