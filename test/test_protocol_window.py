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
from rog_ros.protocol.transfer import MAX_WINDOW, MAX_WINDOW_BYTES, OutgoingTransfer, \
    window_for_rate
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


def _silent_past_mark(window, chunk_bytes, rate_bps, mark=8 << 20):
    """
    Return when a whole-model transfer to a robot that never answers has sent over ``mark``.

    What the server's DDS writer to that robot holds until its link or lease comes back
    (docs/workloads.md, Large models): a 37.7 MB model of 4 KiB rows, no ack ever.
    """
    layout, codec = RowLayout([(9216, 1024)]), Identity(torch.float32)
    p = torch.ones(layout.n_params)
    tr = OutgoingTransfer(transfer_id=1, sender=-1, receiver=0, kind=2, clock=1, layout=layout,
                          codec=codec, rowbytes=codec.encode(layout, p, None),
                          scales=torch.zeros(1), order=torch.arange(layout.n_rows),
                          n_mandatory=layout.n_rows, deadline=0.0, now=0.0, window=window,
                          chunk_bytes=chunk_bytes, rate_bps=rate_bps)
    sent = sum(len(c.payload) for c in tr.pump(0.0))
    for step in range(1, 601):
        sent += sum(len(c.payload) for c in tr.on_tick(step * 0.05))
        if sent > mark:
            return round(step * 0.05, 2)
    return None


def test_a_robot_whose_link_died_is_sent_past_the_mark_by_a_large_model():
    # The 4 MiB cap bounds what a live robot has unacknowledged, not what a silent one is
    # sent: the rest of the transfer goes one window per end_timeout_s (2 s). The docs said
    # "no model size makes a write wait on a robot whose link is down"; with a 38 MB model
    # the writer to that robot passes Cyclone's 8 MiB mark within its 10 s lease
    assert _silent_past_mark(1024, 16384, 0.0) == 4.0      # 4 MiB windows: the third
    assert _silent_past_mark(4, 65000, 1e9) == 6.0         # 39 chunks of 60 KiB: the fourth
    assert _silent_past_mark(4, 16384, 1e9) == 16.0        # defaults, grown to 64: the ninth
    assert _silent_past_mark(4, 16384, 0.0) is None        # 64 KiB per 2 s: none in 30 s
    doc = ' '.join((ROOT / 'docs' / 'workloads.md').read_text().split())
    large = doc[doc.index('### Large models'):doc.index('Measured on 2026-12-06')]
    assert 'no model size makes a write wait' not in large
    for said in ('pass the mark 4 s into the outage', '--chunk-bytes 65000` 6 s into it',
                 'pass it after 16 s'):
        assert said in large, said
    faults = ' '.join((ROOT / 'docs' / 'faults.md').read_text().split())
    assert 'about 4 minutes (2 s per 64 KiB window)' not in faults    # not on a fast link
    assert '16 s once a fast link grew the window to 64 chunks' in faults


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
