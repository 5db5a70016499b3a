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
Real DDS traffic across a kernel outage (``rog fleet --netns``'s links).

A publisher in a worker's namespace sends numbered row chunks, paced, over the embedded Cyclone
Bus (RELIABLE, KEEP_ALL: the ``chunks`` topics) to a subscriber in the server's namespace,
through the veth pair that :class:`~rog_ros.net.netns.RateFollower` shapes from a trace with
a 3 s outage. Nothing sent while the link was closed may arrive before the follower reopens
it (judged by send time: a loaded machine may delay a subscriber, never speed a chunk up),
delivery must resume soon after it, and afterwards every chunk must have been delivered
exactly once, in order. Needs root,
iproute2 and a kernel with sch_tbf and sch_htb; skipped, saying which is missing, otherwise.
"""

import json
import os
import subprocess
import sys
import time

import dds_domains
import numpy as np
import pytest

from rog_ros.net import netns
from rog_ros.net.traces import Trace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEFORE_S, OUTAGE_S = 1.5, 3.0   # the trace: 20 Mbit/s, then 3 s of outage, then 20 Mbit/s
RATE_MBPS = 20.0
PERIOD_S = 0.02                 # a chunk every 20 ms (1 KiB: 0.4 Mbit/s, far below the rate)
SEND_S = 9.0                    # the publisher's sending time after the subscriber matched
LAG_BOUND_S = 1.0               # the follower applies the trace's changes within this
RESUME_BOUND_S = 1.0            # delivery resumes at most this long after the link reopened
REPAIR_BOUND_S = 2.0            # every chunk sent in the outage is delivered by then

CHILD = r"""
import json, struct, sys, time
import numpy as np
from rog_ros.protocol import messages as m
from rog_ros.transport.dds_bus import DdsBus
role, ns_topic, result = sys.argv[1], sys.argv[2], sys.argv[3]
bus = DdsBus(namespace=ns_topic, node_name='rog_outage_' + role)
stamp = struct.Struct('<dI')
try:
    if role == 'pub':
        bus.advertise('outage/chunks')
        deadline = time.monotonic() + 30.0
        while bus.matched('outage/chunks') == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        start = nxt = time.monotonic()
        seq, held = 0, 0.0
        while time.monotonic() - start < float(sys.argv[4]):
            t0 = time.monotonic()
            bus.publish('outage/chunks', m.RowChunk(
                transfer_id=1, seq=seq, sender=0, receiver=m.SERVER, kind=m.KIND_GRAD, clock=0,
                flags=0, row_ranges=np.array([0, 1], dtype=np.uint32),
                payload=stamp.pack(t0, seq) + bytes(1012)))
            held = max(held, time.monotonic() - t0)
            seq += 1
            nxt += float(sys.argv[5])
            time.sleep(max(0.0, nxt - time.monotonic()))
        bus.publish('outage/chunks', m.RowChunk(
            transfer_id=1, seq=seq, sender=0, receiver=m.SERVER, kind=m.KIND_GRAD, clock=0,
            flags=m.FLAG_END, row_ranges=np.array([0, 1], dtype=np.uint32), payload=b''))
        acked = bus._writers['/rog_outage/outage/chunks'].wait_for_acks(20 * 10 ** 9)
        json.dump({'sent': seq, 'held_max_s': held, 'acked': bool(acked)}, open(result, 'w'))
    else:
        bus.subscribe('outage/chunks')
        got, done = [], False
        deadline = time.monotonic() + 60.0
        while not done and time.monotonic() < deadline:
            for _, msg in bus.poll(0.05):
                now = time.monotonic()
                if msg.flags & m.FLAG_END:
                    done = True
                    got.append((int(msg.seq), now, -1.0, -1))
                    continue
                sent, inner = stamp.unpack_from(msg.payload)
                got.append((int(msg.seq), now, sent, inner))
                if len(got) == 1:
                    print('first', flush=True)
        json.dump({'got': got, 'complete': done}, open(result, 'w'))
finally:
    bus.close()
"""


def _reason():
    return netns.unavailable_reason() or netns.shaping_unavailable_reason()


class _TraceLink:

    def __init__(self, trace):
        self.trace = trace

    def rate_mbps(self, t):
        return float(self.trace.rate_at(t))


def test_dds_delivers_nothing_in_a_kernel_outage_and_everything_once_after_it(tmp_path):
    reason = _reason()
    if reason is not None:
        pytest.skip(f'--netns {reason}')
    # Prepare: one worker's pair, shaped at 20 Mbit/s; publisher (worker) and subscriber
    # (server) processes on the embedded Cyclone Bus, each bound to its veth end
    trace = Trace(np.array([0.0, BEFORE_S, BEFORE_S + OUTAGE_S]),
                  np.array([RATE_MBPS, 0.0, RATE_MBPS]), 600.0)
    dom = dds_domains.domain('test_netns_outage_dds')
    env = dict(os.environ, ROS_DOMAIN_ID=str(dom), ROG_BUS='dds', PYTHONPATH=ROOT)
    with netns.NetnsFleet(1) as fleet:
        link = fleet.links[0]
        fleet.set_rate(0, RATE_MBPS)
        applied = []            # (Mbit/s, monotonic time the follower's change began, ended)
        real_set_rate = fleet.set_rate

        def set_rate(rank, mbps, *args, **kwargs):
            began = time.monotonic()
            real_set_rate(rank, mbps, *args, **kwargs)
            applied.append((float(mbps), began, time.monotonic()))
        fleet.set_rate = set_rate
        procs = {}
        try:
            for role, ns, me, peer in (('sub', link.server_ns, link.server_ip, link.worker_ip),
                                       ('pub', link.worker_ns, link.worker_ip, link.server_ip)):
                procs[role] = subprocess.Popen(
                    fleet.exec_prefix(ns) + [sys.executable, '-c', CHILD, role, '/rog_outage',
                                             str(tmp_path / f'{role}.json'), str(SEND_S),
                                             str(PERIOD_S)],
                    env=dict(env, CYCLONEDDS_URI=netns.cyclone_xml([me], [peer])),
                    stdout=subprocess.PIPE if role == 'sub' else None, text=True)
            # the trace starts once chunks flow (discovery done), so its outage falls mid-send
            assert procs['sub'].stdout.readline().strip() == 'first'
            follower = netns.RateFollower(fleet, {0: _TraceLink(trace)}, time.time(),
                                          period_s=0.02).start()
            try:
                rc = {role: proc.wait(timeout=90) for role, proc in procs.items()}
            finally:
                follower.stop()
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        assert follower.error is None, follower.failure()
        kick_errors = fleet.kick_errors
    assert rc == {'sub': 0, 'pub': 0}, rc
    sub = json.loads((tmp_path / 'sub.json').read_text())
    pub = json.loads((tmp_path / 'pub.json').read_text())
    got = np.array(sub['got'], dtype=np.float64).reshape(-1, 4)
    seq, arrived, sent = got[:-1, 0], got[:-1, 1], got[:-1, 2]
    out_from = follower.origin + BEFORE_S             # the outage on the monotonic clock
    out_to = out_from + OUTAGE_S
    in_outage = (sent >= out_from) & (sent < out_to)
    # the follower closed the link once, then reopened it, each within LAG_BOUND_S
    assert [mbps for mbps, _, _ in applied] == [0.0, RATE_MBPS], applied
    (_, _, closed), (_, reopening, reopened) = applied
    assert 0.0 <= closed - out_from <= LAG_BOUND_S and 0.0 <= reopening - out_to, applied
    assert reopened - out_to <= LAG_BOUND_S, applied
    held = (sent >= closed) & (sent < reopening)      # sent while the link was surely closed
    # Assert: the outage fell mid-send, with chunks on both sides of it
    assert sub['complete'] and kick_errors == 0
    assert (sent < out_from).sum() >= 10 and held.sum() >= 100, (out_from, sent[:3], applied)
    assert (sent >= out_to + 1.0).sum() >= 10
    # nothing sent while the link was closed arrived before it reopened. By send time, not by
    # arrival in a window: a subscriber descheduled on a loaded machine takes a chunk sent
    # before the outage late, and a follower late by a tc call closes the link late, neither
    # of which is a delivery through a closed link (the trace's times bound the lags above)
    early = held & (arrived < reopening)
    assert not early.any(), (sent[early] - closed, arrived[early] - closed)
    # delivery resumes within RESUME_BOUND_S of the reopening; what was sent in the outage
    # is all delivered within REPAIR_BOUND_S
    resumed = arrived[arrived >= reopening].min() - reopened
    repaired = arrived[in_outage].max() - reopened
    print(f'closed {closed - out_from:.3f} s after the outage began, reopened '
          f'{reopened - out_to:.3f} s after it ended; resumed {resumed:.3f} s, outage chunks '
          f'all delivered {repaired:.3f} s after the reopening; publish held at most '
          f'{pub["held_max_s"]:.3f} s')
    assert resumed <= RESUME_BOUND_S, resumed
    assert repaired <= REPAIR_BOUND_S, repaired
    # the layer's invariants: every chunk published delivered exactly once, in order, none lost
    assert pub['acked'] and pub['sent'] == len(seq) and got[-1, 0] == pub['sent']
    assert np.array_equal(seq, np.arange(pub['sent'])), np.flatnonzero(
        seq != np.arange(len(seq)))[:5]
    assert np.array_equal(got[:-1, 3], seq)           # the payload is the chunk's own
    assert np.all(np.diff(arrived) >= 0)
