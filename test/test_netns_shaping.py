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
Kernel link emulation (``--netns``): namespaces, veth pairs and tbf that follow a trace.

The shaping tests create their own namespaces (unique random prefix), never touch the host's
interfaces and delete everything afterwards. They need root and iproute2 (``ip``, ``tc``;
Debian: ``apt-get install iproute2``), the shaping ones a kernel with sch_tbf and sch_htb, and
skip, saying which is missing, otherwise.
"""

import os
import subprocess
import threading
import time
import types

import numpy as np
import pytest

from rog_ros import cli
from rog_ros.net import netns
from rog_ros.net.traces import Trace
from rog_ros.nodes import fleet as cli_fleet   # (at import: its progress line's stderr)

REASON = netns.unavailable_reason()
needs_root = pytest.mark.skipif(REASON is not None, reason=f'--netns {REASON}')


@pytest.fixture(scope='module')
def shaping():
    """Skip, saying why, on a kernel without the qdiscs a fleet shapes with."""
    reason = netns.shaping_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


needs_shaping = pytest.mark.usefixtures('shaping')


def _ip(*args) -> str:
    return subprocess.run(['ip', *args], capture_output=True, text=True, check=True).stdout


def test_names_fit_linux_limits_and_are_unique():
    a, b = netns.NetnsFleet(12), netns.NetnsFleet(12)
    names = [x for link in a.links for x in (link.server_if, link.worker_if, link.worker_ns)]
    assert max(len(n) for n in names) <= 15
    assert len(set(names)) == len(names)
    assert a.prefix != b.prefix
    with pytest.raises(ValueError):
        netns.NetnsFleet(0)
    with pytest.raises(ValueError):
        netns.NetnsFleet(2, prefix='bad-prefix!')


def test_cyclone_config_keeps_datagrams_below_the_mtu():
    xml = netns.cyclone_xml(['10.231.0.2'], ['10.231.0.1'], mtu=1500)
    assert '<NetworkInterface address="10.231.0.2"' in xml
    assert '<Peer address="10.231.0.1"/>' in xml
    assert '<MaxMessageSize>1472B</MaxMessageSize>' in xml
    assert '<AllowMulticast>false</AllowMulticast>' in xml


@needs_root
@needs_shaping
def test_namespaces_are_created_inside_and_deleted_afterwards():
    host_links_before = _ip('-o', 'link', 'show')
    with netns.NetnsFleet(2) as fleet:
        listed = _ip('netns', 'list')
        assert fleet.server_ns in listed and fleet.worker_ns(1) in listed
        # the veth ends live only inside the namespaces
        assert fleet.links[0].server_if in _ip('-n', fleet.server_ns, '-o', 'link')
        assert fleet.links[0].worker_if not in _ip('-o', 'link', 'show')
        fleet.set_rate(1, 12.5)
        shown = subprocess.run(['tc', '-n', fleet.worker_ns(1), 'class', 'show', 'dev',
                                fleet.links[1].worker_if], capture_output=True, text=True,
                               check=True).stdout
        assert 'tbf 1:1' in shown and 'htb 2:1' in shown
        assert '12500Kbit' in shown.replace('12.5Mbit', '12500Kbit')
        assert fleet.rates[(1, 'up')] == fleet.rates[(1, 'down')] == 12.5
    listed = _ip('netns', 'list')
    assert fleet.server_ns not in listed and fleet.worker_ns(1) not in listed
    assert _ip('-o', 'link', 'show').count('\n') == host_links_before.count('\n')


@needs_root
@needs_shaping
def test_dds_goodput_follows_the_trace_within_ten_percent():
    # Prepare: 30 Mbit/s for 2 s, then 12 Mbit/s for 2 s, looping
    from rog_ros.experiments.bench_transport import bench_netns
    trace = Trace(np.array([0.0, 2.0]), np.array([30.0, 12.0]), 4.0)
    # Execute: RowChunks over DDS between two processes in two namespaces
    res = bench_netns(trace=trace, duration_s=5.0)
    # Assert: goodput / trace rate over the same window
    assert res['netns_complete']
    assert res['netns_rate_updates'] >= 2                      # the follower changed the rate
    assert 12.0 < res['netns_configured_mbps'] < 30.0
    assert 0.9 <= res['netns_goodput_fraction'] <= 1.1, res


def test_goodput_is_timed_from_the_sends_not_from_a_drained_backlog():
    # a subscriber that fell behind read 60 chunks of 1 MB, sent over 1 s, in 5 ms: timed on
    # arrivals alone that was 9,415 MB/s
    from rog_ros.experiments.bench_transport import goodput_bps
    sent = np.linspace(0.0, 1.0, 61)
    arrivals = np.linspace(1.0, 1.005, 61)
    sizes = np.full(61, 1e6)
    bps, t0, t1 = goodput_bps(arrivals, sizes, arrivals - sent, warmup_s=0.0)
    assert bps / 8e6 == pytest.approx(61 / 1.005, rel=1e-9)
    assert (t0, t1) == (0.0, 1.005)
    warm, t0, _ = goodput_bps(arrivals, sizes, arrivals - sent, warmup_s=0.5)
    assert t0 == pytest.approx(0.5) and warm / 8e6 == pytest.approx(31 / 0.505)
    # arrivals only (no latencies): the old reading, kept for callers without send times
    assert goodput_bps(sent, sizes, warmup_s=0.0)[0] / 8e6 == pytest.approx(61.0)


@needs_root
def test_a_pair_with_multicast_and_its_worker_end_set_down_and_up():
    """
    ``multicast=True`` turns multicast on at both ends; ``set_link`` takes the worker's end down.

    The rediscovery measurement (``--outage link``) made its own pair with these two steps, a
    copy of this class; it now runs on it: a Wi-Fi MTU, multicast for the shipped ``wifi``.
    """
    with netns.NetnsFleet(1, mtu=1500, multicast=True) as fleet:
        link = fleet.links[0]
        for ns, dev in ((fleet.server_ns, link.server_if), (link.worker_ns, link.worker_if)):
            shown = _ip('-n', ns, '-o', 'link', 'show', 'dev', dev)
            assert 'MULTICAST' in shown and 'mtu 1500' in shown and ',UP' in shown
        fleet.set_link(0, up=False)
        assert ',UP' not in _ip('-n', link.worker_ns, '-o', 'link', 'show', 'dev', link.worker_if)
        fleet.set_link(0, up=True)
        assert ',UP' in _ip('-n', link.worker_ns, '-o', 'link', 'show', 'dev', link.worker_if)


def test_a_rate_changes_the_htb_class_and_an_outage_closes_the_gate(monkeypatch):
    # a rate change was a tc qdisc replace of tbf, which refills its bucket (a backlogged
    # sender got 11.4 kB more per change), and an outage a one-frame bucket, which let that
    # frame out as it began; now a change keeps the htb class's tokens and an outage's gate
    # holds no frame
    ran, kicked = [], []
    monkeypatch.setattr(netns, '_run', lambda cmd, stdin=None: ran.append((cmd, stdin)) or '')
    fleet = netns.NetnsFleet(1, mtu=9000)
    monkeypatch.setattr(fleet, 'kick', lambda ns, peer: kicked.append((ns, peer)),
                        raising=False)
    # Execute: 10 Mbit/s, 12 Mbit/s, an outage, 0.5 Mbit/s; then an outage first on rank 0 up
    for mbps in (10.0, 12.0, 0.0, 0.5):
        fleet.set_rate(0, mbps)
    # Assert: one tc process per end and change, both ends alike
    assert len(ran) == 8 and all(c[:3] == ['tc', '-n', c[2]] and c[3:] == ['-batch', '-']
                                 for c, _ in ran)
    batches = [[line.split() for line in stdin.splitlines()] for _, stdin in ran]
    up, down = fleet.links[0].worker_if, fleet.links[0].server_if
    assert [[[down if w == up else w for w in line] for line in batches[i]] == batches[i + 1]
            for i in (0, 2, 4, 6)] == [True] * 4
    first, at12, outage, at05 = batches[0], batches[2], batches[4], batches[6]
    # made once: an open tbf gate over an htb class over a bfifo of 200 ms of the rate
    dev = f'dev {up} '
    assert [' '.join(line).replace(dev, '').split(' ')[:6] for line in first] == [
        ['qdisc', 'replace', 'root', 'handle', '1:', 'tbf'],
        ['qdisc', 'replace', 'parent', '1:1', 'handle', '2:'],
        ['class', 'replace', 'parent', '2:', 'classid', '2:1'],
        ['qdisc', 'replace', 'parent', '2:1', 'handle', '3:']]
    opts = [dict(zip(line[-8::2], line[-7::2])) for line in first]
    assert opts[0]['rate'] == netns.GATE_OPEN_RATE and int(opts[0]['burst']) >= 4 * 9014
    assert opts[2]['rate'] == '10000kbit' and int(opts[2]['burst']) == 2 * 9014
    assert first[3][-2:] == ['limit', str(250_000)]
    # a rate: the class changed (its tokens kept), nothing else (the queue within 2x)
    assert at12 == [['class', 'change', 'dev', fleet.links[0].worker_if, 'parent', '2:',
                     'classid', '2:1', 'htb'] + netns.class_args(12.0, 9000)]
    assert netns.class_args(12.0, 9000)[:2] == ['rate', '12000kbit']
    # an outage: the gate only, a bucket no frame fits
    assert len(outage) == 1 and outage[0][:8] == ['qdisc', 'change', 'dev',
                                                  fleet.links[0].worker_if, 'root', 'handle',
                                                  '1:', 'tbf']
    gate = dict(zip(outage[0][8::2], outage[0][9::2]))
    assert gate['rate'] == '361bit' and gate['burst'] == '1'
    # after it: the class, the queue (20x smaller), then the gate opened
    assert [line[:2] for line in at05] == [['class', 'change'], ['qdisc', 'change'],
                                           ['qdisc', 'change']]
    assert at05[0][-8:-6] == ['rate', '500kbit'] and at05[1][-2:] == ['limit', str(4 * 18028)]
    assert at05[2][-6:-4] == ['rate', netns.GATE_OPEN_RATE]
    assert fleet.rates[(0, 'up')] == fleet.rates[(0, 'down')] == 0.5
    assert fleet.limits[(0, 'up')] == 4 * 18028
    assert len(kicked) == 8                                      # every change wakes the qdisc
    assert {ns for ns, _ in kicked} == {fleet.server_ns, fleet.worker_ns(0)}
    # an outage first: everything made, then the gate closed
    lines = netns.shaping_lines('x', 0.0, 1500)
    assert len(lines) == 5 and lines[-1][-6:] == ['rate', '61bit', 'burst', '1',
                                                  'limit', str(4 * 1514)]
    assert netns.shaping_lines('x', 0.0, 1500, (False, 6056)) == []     # still out
    # the closed gate's time stays within tc's 274 s for every MTU a fleet takes
    for mtu in (1280, 1500, 9000, 65535):
        assert (mtu + 14) * 8 / netns.outage_rate_bits(mtu) <= 200.0
        assert int(netns.gate_args(True, mtu)[3]) >= mtu + 14 > netns.GATE_CLOSED_BURST
    assert netns.configured_mbps(0.0) == 0.0 and netns.configured_mbps(-1.0) == 0.0


def test_a_kick_after_or_during_delete_leaves_no_socket_open(monkeypatch):
    # a follower not yet stopped (its join times out after 2 s) kicked while delete() ran:
    # delete() iterated the sockets as a kick added one (RuntimeError: no namespace deleted),
    # and a kick after it opened a socket that nothing closed, which kept its namespace
    opened = []

    class _Sock:

        def __init__(self, ns):
            self.ns, self.closed, self.sent = ns, False, 0
            opened.append(self)

        def sendto(self, data, addr):
            assert not self.closed and addr[1] == netns.DISCARD_PORT
            self.sent += 1

        def close(self):
            self.closed = True

    monkeypatch.setattr(netns, '_run', lambda cmd, stdin=None: '')
    monkeypatch.setattr(netns, 'check_available', lambda: None)
    monkeypatch.setattr(netns, '_socket_in', _Sock)
    fleet = netns.NetnsFleet(2).create()
    # Execute: kicks, delete, a kick after it
    fleet.set_rate(0, 5.0)
    fleet.set_rate(1, 0.0)
    assert len(opened) == 3 and all(s.sent for s in opened)     # one per namespace
    fleet.delete()
    fleet.set_rate(0, 7.0)
    # Assert: every socket closed, none opened after delete (the kick counted as not sent)
    assert len(opened) == 3 and all(s.closed for s in opened)
    assert fleet.kick_errors == 2 and fleet._kickers == {}
    # a kick racing delete() from another thread: delete completes, nothing left open
    fleet = netns.NetnsFleet(50).create()
    stop = threading.Event()

    def follower():
        while not stop.is_set():
            for link in fleet.links:
                fleet.kick(link.worker_ns, link.server_ip)

    thread = threading.Thread(target=follower)
    thread.start()
    try:
        deadline = time.monotonic() + 30          # (a loaded machine starts it late)
        while len(opened) < 13 and time.monotonic() < deadline:
            time.sleep(0.001)
        fleet.delete()
    finally:
        stop.set()
        thread.join()
    assert len(opened) >= 13 and all(s.closed for s in opened)


@needs_root
@needs_shaping
def test_a_kick_leaves_from_a_fixed_port_below_any_dds_port():
    # its source port was an ephemeral one (32768-60999), where DDS's ports of a domain from
    # 102 on lie (7400 + 250 * domain + ...): taken first, it moved a participant's port
    with netns.NetnsFleet(1) as fleet:
        fleet.set_rate(0, 5.0)
        socks = dict(fleet._kickers)
        assert set(socks) == {fleet.server_ns, fleet.worker_ns(0)}
        ports = {s.getsockname()[1] for s in socks.values()}
        assert len(ports) == 1 and max(ports) < 1024 and netns.DISCARD_PORT < 1024, ports
        assert fleet.kick_errors == 0
    assert all(s.fileno() == -1 for s in socks.values())         # closed by delete()


_UDP = r"""
import json, socket, struct, sys, time
if sys.argv[1] == 'recv':
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, 33, 32 << 20)     # SO_RCVBUFFORCE (root): no drops
    s.setsockopt(socket.SOL_SOCKET, 35, 1)            # SO_TIMESTAMPNS: the kernel's arrival
    s.bind(('0.0.0.0', 5555))
    s.settimeout(0.2)
    shift = time.time() - time.monotonic()
    print('ready', flush=True)
    end, out = time.monotonic() + float(sys.argv[2]), []

    def take():
        data, anc, _, _ = s.recvmsg(65536, 64)
        at = time.monotonic()
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == 35:
                sec, nsec = struct.unpack('qq', raw[:16])
                at = sec + nsec * 1e-9 - shift
        out.append((at, len(data)))
    while time.monotonic() < end:
        try:
            take()
        except socket.timeout:
            pass
    s.setblocking(False)
    try:
        while True:
            take()
    except BlockingIOError:
        pass
    print(json.dumps(out), flush=True)
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    end, data = time.monotonic() + float(sys.argv[3]), b'x' * int(sys.argv[4])
    while time.monotonic() < end:
        try:
            s.sendto(data, (sys.argv[2], 5555))
        except OSError:
            time.sleep(0.001)
"""


def _backlogged_sender(monkeypatch, trace, seconds):
    """
    Run a UDP sender as fast as its socket lets it through a link that follows ``trace``.

    Return the follower's changes ``(begun, done, mbps)``, when each uplink change's tc
    returned, and the frames' kernel arrival stamps and sizes. Skips on a kernel without the
    qdiscs (:func:`netns.shaping_unavailable_reason`).
    """
    import json
    import sys
    reason = netns.shaping_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)

    class _Link:

        def rate_mbps(self, t):
            return float(trace.rate_at(t))

    with netns.NetnsFleet(1) as fleet:
        changes, set_rate, run, uplink_set = [], fleet.set_rate, netns._run, []
        link = fleet.links[0]

        def timed_run(cmd, stdin=None):  # when the uplink has its new rate
            out = run(cmd, stdin)
            if cmd[:3] == ['tc', '-n', link.worker_ns]:
                uplink_set.append(time.monotonic())
            return out
        monkeypatch.setattr(netns, '_run', timed_run)

        def timed(rank, mbps, direction='both'):
            begin = time.monotonic()
            set_rate(rank, mbps, direction)
            changes.append((begin, time.monotonic(), mbps))
        fleet.set_rate = timed
        recv = subprocess.Popen(fleet.exec_prefix(fleet.server_ns)
                                + [sys.executable, '-c', _UDP, 'recv', str(seconds + 1.5)],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert recv.stdout.readline().strip() == 'ready'
            follower = netns.RateFollower(fleet, {0: _Link()}, time.time() + 0.5,
                                          period_s=0.01).start()
            send = subprocess.Popen(fleet.exec_prefix(link.worker_ns)
                                    + [sys.executable, '-c', _UDP, 'send', link.server_ip,
                                       str(seconds + 0.5), str(fleet.mtu - 28)])
            got = json.loads(recv.stdout.readline())
            send.wait(timeout=30)
            follower.stop()
        finally:
            recv.kill()
            recv.wait()
        assert fleet.kick_errors == 0
    t = np.array([g[0] for g in got])
    n = np.array([g[1] for g in got], dtype=float)
    return changes, uplink_set, t, n


@needs_root
def test_a_backlogged_sender_gets_the_trace_through_outages_as_the_user_space_shaper(
        monkeypatch):
    # Prepare: 20 Mbit/s, an outage, 8 Mbit/s, an outage, 20 Mbit/s (1.5, 1, 1.5, 1, 1 s).
    # Before: tbf kept the timer it had set at the outage's 8 kbit/s (a frame in 9 s) and sent
    # nothing for the 8 Mbit/s stretch and the first 1 s of the last: 3.8 of 7.75 MB; and let
    # 27-45 kB out as each outage began; then one frame (its one-frame bucket, refilled by the
    # change) just after its tc returned. Load-proof: each stretch is measured between the
    # follower's actual changes (tc late on a loaded machine) by the kernel's arrival stamps
    # (a receiver scheduled late does not move them), with lower bounds well below the rate
    from rog_ros.net.shaper import TokenBucketShaper
    trace = Trace(np.array([0.0, 1.5, 2.5, 4.0, 5.0]), np.array([20.0, 0.0, 8.0, 0.0, 20.0]),
                  6.0, loop=False)
    # Execute: a UDP sender in the worker's namespace as fast as its socket lets it
    changes, uplink_set, t, n = _backlogged_sender(monkeypatch, trace, 6.0)

    def between(a, b):
        return float(n[(t >= a) & (t < b)].sum())

    assert [c[2] for c in changes] == [20.0, 0.0, 8.0, 0.0, 20.0], changes
    # stretch i: from its change done to the next one begun (the last: 0.9 s of it)
    spans = [(changes[i][1], changes[i + 1][0] if i < 4 else changes[4][1] + 0.9)
             for i in range(5)]
    frame, wire = netns.DEFAULT_MTU - 28, netns.DEFAULT_MTU + 14
    # Assert: an outage lets out nothing once the uplink's tc returned (the kernel stamps a
    # frame as the veth passes it on), and before that what the rate before it sent until then
    # and a frame in flight (before: its one-frame bucket after tc, 3-5 frames before that)
    assert len(uplink_set) == 5
    for i in (1, 3):
        a, b = changes[i][0], changes[i + 1][0]
        before = changes[i - 1][2] * 125_000 * (uplink_set[i] - a)
        assert between(uplink_set[i], b) == 0, (i, between(uplink_set[i], b))
        assert between(a, b) <= before * 1.02 + frame, (i, between(a, b), before)
    # no stretch gets more than its rate and a bucket (two frames), a frame in flight
    for (a, b), mbps in zip(spans, (20.0, 0.0, 8.0, 0.0, 20.0)):
        assert between(a, b) <= mbps * 125_000 * (b - a) * 1.02 + 3 * wire, (a, b, mbps)
    # each stretch after an outage gets its rate (it got nothing before); the lower bounds
    # leave 30% to a sender scheduled late on a loaded machine
    for i in (2, 4):
        (a, b), rate = spans[i], changes[i][2] * 125_000
        assert between(a, b) >= 0.7 * rate * (b - a), (i, between(a, b), rate * (b - a))
    # the user-space shaper (its bucket 64 KiB) gives that trace its bytes, as tbf does here
    shaper, now, shaped = TokenBucketShaper(trace, 65536), 0.0, 0.0
    while True:
        wait = shaper.delay_for(frame, now)
        if now + wait >= 6.0:
            break
        now, shaped = now + wait, shaped + frame
    assert shaped == pytest.approx(trace.cumulative_mbit(6.0) * 125_000, rel=0.02)


@needs_root
def test_a_backlogged_sender_gets_no_bucket_more_than_the_trace_per_rate_change(monkeypatch):
    # Prepare: 10 Mbit/s, then 12 and 10 Mbit/s in turn every 0.1 s for 3.9 s (as the presets
    # change). Before: every change was a tc qdisc replace of tbf, which refills its bucket
    # (two 9000-byte frames): measured 11.4 kB more than the trace per change, 8.2% in all
    times = [0.0] + [0.5 + 0.1 * j for j in range(39)]
    rates = [10.0] + [12.0 if j % 2 == 0 else 10.0 for j in range(39)]
    trace = Trace(np.array(times), np.array(rates), times[-1] + 0.5, loop=False)
    # Execute
    changes, uplink_set, t, n = _backlogged_sender(monkeypatch, trace, times[-1] + 0.5)
    # Assert: from the second change's uplink set to the last's, the bytes received against
    # the rates as the uplink had them (a late follower moves both alike)
    assert len(changes) == len(uplink_set) >= 20, changes
    assert [c[2] for c in changes] == [rates[0]] + [
        c for c, p in zip(rates[1:], rates) if c != p][:len(changes) - 1]
    got = float(n[(t >= uplink_set[1]) & (t < uplink_set[-1])].sum())
    want = sum(changes[i][2] * 125_000 * (uplink_set[i + 1] - uplink_set[i])
               for i in range(1, len(changes) - 1))
    wire = netns.DEFAULT_MTU + 14
    extra_per_change = (got - want) / (len(changes) - 2)
    print(f'{len(changes) - 2} changes: {got:.0f} bytes, trace {want:.0f}, '
          f'{extra_per_change:.0f} per change')
    assert got <= 1.02 * want + 2 * wire, (got, want, extra_per_change)
    assert got >= 0.8 * want, (got, want)       # (a sender scheduled late on a loaded machine)


def test_the_follower_applies_every_stretch_of_a_fast_trace_soon_after_it_begins():
    # the follower woke period_s (0.1 s) after its last apply ended: with a trace that changes
    # every 0.1 s (the fading presets) it set each rate 0-100 ms late, and as each round's tc
    # calls (here 10 ms) pushed the next round later, a stretch was at times never applied
    rates = np.arange(1.0, 26.0)
    trace = Trace(np.arange(25) * 0.1, rates, 2.5, loop=False)

    class _Link:

        def rate_mbps(self, t):
            return float(trace.rate_at(t))

    class _Fleet:

        def __init__(self):
            self.rates, self.set = {}, []

        def set_rate(self, rank, mbps, direction='both'):
            self.set.append((follower.trace_time(), mbps))
            self.rates[(rank, 'up')] = netns.configured_mbps(mbps)
            time.sleep(0.01)                      # tc, both ends

    fleet = _Fleet()
    # Execute: 2.3 s of the trace, started 5 ms into a stretch (the default period: 20 ms)
    follower = netns.RateFollower(fleet, {0: _Link()}, time.time() - 0.005)
    assert follower.period_s == 0.02
    assert netns.RateFollower(fleet, dict.fromkeys(range(100)), 0.0).period_s == 0.15
    follower.start()
    time.sleep(2.3)
    follower.stop()
    # Assert: every stretch applied, in order, soon after it began (a loaded machine wakes a
    # thread late now and then: the median)
    applied = [m for _, m in fleet.set]
    assert applied == list(rates[:len(applied)]) and len(applied) >= 22, applied
    lags = np.array([t - 0.1 * (m - 1) for t, m in fleet.set[1:]])
    assert np.median(lags) <= 0.03 and lags.min() >= 0, np.round(lags, 3)


def test_a_failed_setup_command_is_one_line_naming_a_missing_qdisc(tmp_path, monkeypatch):
    # tc -batch says two lines ('Error: Specified qdisc kind is unknown.' and 'Command failed
    # -:1'), which came as a two-line error that named no module
    fake = tmp_path / 'tc'
    fake.write_text('#!/bin/sh\ncat >/dev/null\necho "Error: Specified qdisc kind is unknown." >&2'
                    '\necho "Command failed -:1" >&2\nexit 1\n')
    fake.chmod(0o755)
    monkeypatch.setenv('PATH', f'{tmp_path}:/usr/bin:/bin')
    # Execute
    with pytest.raises(netns.NetnsError) as err:
        netns._run(['tc', '-n', 'x', '-batch', '-'], 'qdisc replace dev lo root tbf\n')
    # Assert
    assert '\n' not in str(err.value)
    assert str(err.value).endswith('failed: Error: Specified qdisc kind is unknown.; Command '
                                   'failed -:1 (this kernel lacks sch_tbf or sch_htb: modprobe '
                                   'sch_tbf sch_htb)'), str(err.value)
    with pytest.raises(netns.NetnsError, match=r'^false failed: $'):
        netns._run(['false'])


def test_the_qdisc_probe_leaves_no_kernel_warning_on_lo(monkeypatch):
    # the probe set its open gate up for a 1500-byte MTU on lo, whose MTU is 65536: tbf's
    # burst (65536) was below lo's 65550-byte frames, and the kernel logged 'sch_tbf: burst
    # 65536 is lower than device lo mtu (65550) !' at every probe (rog doctor, each test run)
    ran = []
    monkeypatch.setattr(netns, 'check_available', lambda: None)
    monkeypatch.setattr(netns, '_run', lambda cmd, stdin=None: ran.append((cmd, stdin)) or '')
    monkeypatch.setattr(subprocess, 'run', lambda *a, **k: ran.append((a[0], None)))
    # Execute
    assert netns.shaping_unavailable_reason() is None
    # Assert: the gate's bucket holds lo's largest frame (MTU 65536 + 14 bytes of header)
    (tc, stdin), = [r for r in ran if r[0][0] == 'tc']
    gate = stdin.splitlines()[0].split()
    assert gate[:6] == ['qdisc', 'replace', 'dev', 'lo', 'root', 'handle'] and 'tbf' in gate
    assert int(gate[gate.index('burst') + 1]) >= 65536 + 14, gate
    assert [r[0][:3] for r in ran] == [['ip', 'netns', 'add'], tc[:3], ['ip', 'netns', 'del']]


def test_a_change_up_from_a_slow_rate_makes_the_class_again(monkeypatch):
    # htb counts tokens in time: a class that sent a 9014-byte frame at 0.01 Mbit/s owed 7.2 s
    # and kept owing it at 20 Mbit/s (class change keeps tokens): the link sent nothing for
    # the 2 s after such a change; now a change up from a rate whose frame takes over 0.1 s
    # remakes the class (full tokens), unless an outage since has repaid that time
    ran, clock = [], [1000.0]
    monkeypatch.setattr(netns, '_run', lambda cmd, stdin=None: ran.append(stdin) or '')
    monkeypatch.setattr(netns, 'time', types.SimpleNamespace(monotonic=lambda: clock[0]))
    fleet = netns.NetnsFleet(1, mtu=9000)
    monkeypatch.setattr(fleet, 'kick', lambda ns, peer: None, raising=False)

    def kinds(mbps, direction='up'):
        ran.clear()
        fleet.set_rate(0, mbps, direction)
        return [' '.join(line.split()[:2]) for line in ran[0].splitlines()] if ran else []
    # Execute / Assert: made at 0.5 Mbit/s (a frame: 0.144 s), then up to 20: remade
    assert kinds(0.5) == ['qdisc replace'] * 2 + ['class replace', 'qdisc replace']
    assert 'direct_qlen 0' in ran[0]            # (between del and add: dropped, not unshaped)
    assert kinds(20.0) == ['class del', 'class add', 'qdisc add']
    assert netns.frame_seconds(0.5) == pytest.approx(0.144224)
    # up from 1 Mbit/s (0.072 s a frame), or down: the class changed, its tokens kept
    assert kinds(1.0) == ['class change', 'qdisc change']
    assert kinds(20.0) == ['class change', 'qdisc change']
    assert kinds(0.5) == ['class change', 'qdisc change']
    # an outage that left over 0.1 s of the slow frame: remade after it; a longer one: kept
    assert kinds(0.0) == ['qdisc change'] and kinds(0.0) == []
    clock[0] += 0.03
    assert kinds(20.0) == ['class del', 'class add', 'qdisc add', 'qdisc change']
    kinds(0.5)
    kinds(0.0)
    clock[0] += 0.05
    assert kinds(20.0) == ['class change', 'qdisc change', 'qdisc change']
    # the pure function: an old 2-tuple state is a class that owes nothing
    assert netns.shaping_lines('x', 20.0, 9000, (True, 250_000))[0][:2] == ['class', 'change']
    assert netns.frame_seconds(1e-6) == netns.HTB_MAX_DEBT_S


@needs_root
def test_a_link_back_from_a_slow_rate_sends_at_once(monkeypatch):
    # Prepare: 0.01 Mbit/s for 2 s (a 9014-byte frame: 7.2 s), then 20 Mbit/s for 2 s.
    # Before: the htb class, 7.2 s in debt after its third frame, sent nothing for the 2 s
    trace = Trace(np.array([0.0, 2.0]), np.array([0.01, 20.0]), 4.0, loop=False)
    # Execute
    changes, uplink_set, t, n = _backlogged_sender(monkeypatch, trace, 4.0)
    # Assert: frames within 0.1 s of the uplink's change, the trace's rate over 1.5 s after it
    assert len(uplink_set) == 2, changes
    after = t[t >= uplink_set[1]]
    assert len(after) and after.min() - uplink_set[1] < 0.1, after[:3] - uplink_set[1]
    got = float(n[(t >= uplink_set[1]) & (t < uplink_set[1] + 1.5)].sum())
    assert got >= 0.8 * 20 * 125_000 * 1.5, got


def _fake_tc(tmp_path, monkeypatch) -> tuple:
    """
    Put a fake ``tc`` first on PATH: it logs each batch; a flag file makes it fail.

    ``fail_add`` (a file): the next batch with a ``class add`` fails at it (the delete before
    it went through), once; ``fail_all``: every batch fails while the file exists.
    """
    log, fail_add, fail_all = tmp_path / 'batches', tmp_path / 'fail_add', tmp_path / 'fail_all'
    fake = tmp_path / 'tc'
    fake.write_text(
        '#!/bin/sh\nbatch=$(cat)\nprintf "%s\\n=====\\n" "$batch" >> ' + str(log) + '\n'
        'if [ -e ' + str(fail_all) + ' ]; then echo "Error: Exclusivity flag on." >&2; '
        'echo "Command failed -:1" >&2; exit 1; fi\n'
        'if [ -e ' + str(fail_add) + ' ] && echo "$batch" | grep -q "^class add"; then\n'
        '  rm ' + str(fail_add) + '; echo "RTNETLINK answers: Invalid argument" >&2\n'
        '  echo "Command failed -:2" >&2; exit 1\nfi\n')
    fake.chmod(0o755)
    monkeypatch.setenv('PATH', f'{tmp_path}:/usr/bin:/bin:/usr/sbin:/sbin')

    def batches():
        return [b.strip('\n').split('\n') for b in log.read_text().split('=====\n')[:-1]]
    return batches, fail_add, fail_all


def _text(lines) -> list:
    return [' '.join(line) for line in lines]


def test_a_batch_that_fails_part_way_makes_the_end_again(tmp_path, monkeypatch):
    # a change up from a slow rate is class del + class add + qdisc add in one batch: when the
    # add failed (the delete went through), the end's record still had the class, set_rate
    # raised and the follower stopped, and the next change would have failed on the missing
    # class. Now the end is made again from scratch and the follower goes on
    batches, fail_add, fail_all = _fake_tc(tmp_path, monkeypatch)
    fleet = netns.NetnsFleet(1, mtu=9000)
    up = fleet.links[0].worker_if
    fleet.set_rate(0, 0.01, 'up')
    fail_add.touch()
    # Execute: up to 20 Mbit/s (its class remade), the add refused; then 25 Mbit/s
    fleet.set_rate(0, 20.0, 'up')
    fleet.set_rate(0, 25.0, 'up')
    # Assert: the failed batch, then the end made again at 20 Mbit/s, then a plain change
    got = batches()
    assert len(got) == 4, got
    assert [line.split()[:2] for line in got[1]] == [
        ['class', 'del'], ['class', 'add'], ['qdisc', 'add']]
    assert got[2] == _text(netns.rebuild_lines(up, 20.0, 9000))
    assert got[2][0].split()[:8] == ['qdisc', 'replace', 'dev', up, 'root', 'handle',
                                     netns.REBUILD_HANDLE, 'tbf']
    assert got[2][1:] == _text(netns.shaping_lines(up, 20.0, 9000))      # as a new end
    assert got[3] == _text([['class', 'change', 'dev', up, 'parent', '2:', 'classid', '2:1',
                             'htb'] + netns.class_args(25.0, 9000)])
    assert fleet.rebuilds == [((0, 'up'), fleet.rebuilds[0][1])]
    assert 'Invalid argument; Command failed -:2' in fleet.rebuilds[0][1]
    assert fleet.rates[(0, 'up')] == 25.0 and fleet.limits[(0, 'up')] == 500_000   # (within 2x)
    # an outage remade: the gate closed again at the end; then back at 5 Mbit/s
    fleet.set_rate(0, 0.0, 'up')
    fail_all.touch()
    with pytest.raises(netns.NetnsError) as err:
        fleet.set_rate(0, 5.0, 'up')
    # a rebuild that fails too: one line, which end, both errors; the end's record dropped
    assert '\n' not in str(err.value)
    assert str(err.value).startswith(f'worker 0 uplink ({up}): tc -n {fleet.worker_ns(0)} '
                                     '-batch - failed: Error: Exclusivity flag on.')
    assert str(err.value).endswith('making it again failed the same way'), str(err.value)
    assert (0, 'up') not in fleet.rates and (0, 'up') not in fleet.limits
    fail_all.unlink()
    fleet.set_rate(0, 5.0, 'up')                 # the next change makes it from scratch
    assert batches()[-1] == _text(netns.shaping_lines(up, 5.0, 9000))
    assert len(fleet.rebuilds) == 1 and fleet.rates[(0, 'up')] == 5.0
    assert netns.rebuild_lines('x', 0.0, 1500)[-1][-6:] == [
        'rate', '61bit', 'burst', '1', 'limit', str(4 * 1514)]


@needs_root
@needs_shaping
def test_an_end_whose_class_went_missing_is_made_again_in_the_kernel():
    # the kernel side of a batch that failed after its class del: the next change (class
    # change, or del + add) failed on the missing class at every later change. Now the end
    # is made again: the tree replaced by a closed gate, then made as new (htb has no change
    # operation, so the new tree's handles must be free)
    with netns.NetnsFleet(1) as fleet:
        link = fleet.links[0]

        def shown():
            return _ip_tc(link.worker_ns, 'qdisc', link.worker_if) + _ip_tc(
                link.worker_ns, 'class', link.worker_if)
        fleet.set_rate(0, 0.01, 'up')
        subprocess.run(['tc', '-n', link.worker_ns, 'class', 'del', 'dev', link.worker_if,
                        'classid', '2:1'], check=True, timeout=30)
        # Execute: up to 20 Mbit/s, an outage, 5 Mbit/s
        fleet.set_rate(0, 20.0, 'up')
        at20 = shown()
        fleet.set_rate(0, 0.0, 'up')
        fleet.set_rate(0, 5.0, 'up')
        at5 = shown()
    # Assert: one rebuild; the kernel holds the gate, htb, class at the rate and its queue
    assert len(fleet.rebuilds) == 1 and 'No such file' in fleet.rebuilds[0][1], fleet.rebuilds
    for text, rate, limit in ((at20, '20Mbit', 500000), (at5, '5Mbit', 125000)):
        assert 'qdisc tbf 1: root' in text and 'rate 10Gbit' in text, text
        assert 'qdisc htb 2: parent 1:1' in text and 'direct_qlen 0' in text, text
        assert f'qdisc bfifo 3: parent 2:1 limit {limit}b' in text, text
        assert f'class htb 2:1 root leaf 3: prio 0 rate {rate}' in text, text
        assert ' 4: ' not in text, text


def _ip_tc(ns, what, dev) -> str:
    return subprocess.run(['tc', '-n', ns, what, 'show', 'dev', dev], capture_output=True,
                          text=True, check=True, timeout=30).stdout


class _StepLink:
    """A trace of 1, 2, 3, ... Mbit/s, a step every 0.05 s."""

    def rate_mbps(self, t):
        return 1.0 + max(0, int(t / 0.05))


def test_a_follower_whose_tc_fails_says_which_link_and_from_when():
    # the follower stored a failed tc in .error and stopped; rog fleet never read it, so the
    # run went on with every link frozen at its last rate and results that looked valid
    class _Fleet:

        def __init__(self):
            self.rates, self.calls = {}, 0

        def set_rate(self, rank, mbps, direction='both'):
            self.calls += 1
            if self.calls == 4:
                raise netns.NetnsError('worker 1 downlink (rgd1): tc -n rgs -batch - failed: '
                                       'RTNETLINK answers: No buffer space available')
            self.rates[(rank, 'up')] = netns.configured_mbps(mbps)

    fleet = _Fleet()
    follower = netns.RateFollower(fleet, {1: _StepLink()}, time.time(), period_s=0.01)
    assert follower.failure() is None
    # Execute
    follower.start()
    deadline = time.monotonic() + 10.0
    while follower.error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    line = follower.failure()
    t_failed = follower.trace_time()
    follower.stop()
    # Assert: one line naming the link, what tc said, when in the trace and on the clock
    assert line is not None and '\n' not in line, line
    assert fleet.calls == 4 and follower.updates == 3
    assert 'worker 1 downlink (rgd1)' in line and 'No buffer space available' in line, line
    said_t = float(line.split(' s into the trace')[0].split()[-1])
    assert 0.1 <= said_t <= t_failed + 0.05, (line, t_failed)      # (to 0.1 s)
    assert ' UTC): worker 1' in line, line
    assert line.endswith('every link kept its last rate from then on'), line
    # a tc failing once the follower is told to stop (the namespaces going away): not a failure
    quiet = _Fleet()
    quiet.calls = -100
    stopping = netns.RateFollower(quiet, {0: _StepLink()}, time.time(), period_s=0.01)

    def late(rank, mbps, direction='both'):
        stopping._stop.wait(5.0)
        raise netns.NetnsError('tc -n gone failed: Cannot open network namespace')
    stopping.start()
    quiet.set_rate = late
    time.sleep(0.1)
    stopping.stop()
    assert stopping.failure() is None and stopping.error is None


def test_rog_fleet_ends_a_run_whose_links_stopped_following_and_marks_its_summary(tmp_path):
    # the run went on (links frozen) and its summary looked like any other: rog compare took it
    import argparse
    import json

    from rog_ros.nodes import fleet as cli_fleet

    class _Sup:

        def codes(self):
            return {'rog_server': None, 'rog_worker_0': None}

    said = []

    def check():
        said.append(1)
        return 'broken link' if len(said) >= 3 else None
    args = argparse.Namespace(timeout=60.0, quiet=True)
    # Execute: the watch ends on the check's line; the server's summary marked
    t0 = time.monotonic()
    assert cli_fleet._watch(_Sup(), None, None, args, 1, None, [check]) == ([], 'broken link')
    assert time.monotonic() - t0 < 5.0 and len(said) == 3
    assert cli_fleet._broken([lambda: None, lambda: 'a', lambda: 'b']) == 'a'
    (tmp_path / 'summary.json').write_text(json.dumps(
        {'completed': False, 'iterations': 17, 'error': 'interrupted: training did not '
         'complete'}))
    path = cli_fleet._summary_from_what_exists(str(tmp_path), None, 1, 50, error='broken link')
    summary = json.loads(open(path).read())
    # Assert: what was measured kept, the reason first, not a result for the comparisons
    assert summary['iterations'] == 17 and summary['trace_followed'] is False
    assert summary['error'] == ('broken link (then: interrupted: training did not '
                                'complete)')


def test_rog_fleet_says_how_many_link_ends_were_made_again(capsys):
    # a rebuild drops what the end held: said once the run ends, with the first cause
    from rog_ros.nodes import fleet as cli_fleet
    fleet = types.SimpleNamespace(rebuilds=[])
    cli_fleet._say_rebuilds(fleet)
    assert capsys.readouterr().err == ''
    fleet.rebuilds = [((2, 'down'), 'tc -n x -batch - failed: boom'), ((0, 'up'), 'other')]
    cli_fleet._say_rebuilds(fleet)
    assert capsys.readouterr().err == (
        'rog fleet: --netns: 2 link end(s) made again after a tc batch failed, their queued '
        'frames dropped (first: worker 2 downlink: tc -n x -batch - failed: boom)\n')


@pytest.mark.parametrize('broken', [False, True])
def test_rog_fleet_netns_records_the_trace_its_kernel_followed(tmp_path, monkeypatch, capsys,
                                                               broken):
    # the nodes run with trace none under --netns (the kernel shapes, they must not emulate it
    # too), so the server's summary said "trace": "none": rog compare and rog report took the
    # run for one on unshaped links. And a run whose links stopped following ended with the
    # generic `rog doctor` hint after the line that said the cause (a tc that failed)
    import dataclasses
    import json

    out = tmp_path / 'run'
    line = ('--netns: the links stopped following their traces 4.0 s into the trace '
            '(22:00:00 UTC): worker 0 uplink (rgw0): tc failed: boom; every link kept its '
            'last rate from then on')
    given = {}

    def setup(specs, envs, prefixes, cleanup, base_env, checks=None):
        checks.append(lambda: line if broken else None)
        placed = []
        for spec in specs:
            given[spec.name] = spec.parameters.get('trace')
            if spec.role in ('server', 'worker'):
                spec = dataclasses.replace(spec, parameters=dict(spec.parameters, trace='none'))
            placed.append(spec)
        return placed

    class _Sup:
        """The nodes: the server writes the summary of what it ran (trace none) when stopped."""

        def __init__(self, specs, log_dir, env_of, prefix_of):
            self.specs, self.log_dir, self.done = specs, log_dir, not broken
            self.trace = {s.name: s.parameters.get('trace') for s in specs}

        def start(self, resuming=None):
            if not broken:
                self._write(True)

        def _write(self, completed):
            out.mkdir(exist_ok=True)
            (out / 'summary.json').write_text(json.dumps(
                {'driver': 'fleet', 'trace': self.trace['rog_server'], 'completed': completed,
                 'iterations': 7, **({} if completed else {'error': 'interrupted'}),
                 'results_written_at': time.time()}))     # (as a server's: this run's)

        def stop(self, hurry=None):
            if not self.done:
                self.done = True
                self._write(False)
            return [('SIGINT', [s.name for s in self.specs])] if broken else []

        def codes(self):
            return {s.name: (0 if self.done else None) for s in self.specs}

        def log_path(self, name):
            return os.path.join(self.log_dir, name + '.log')

        def tail(self, name):
            return ''
    monkeypatch.setattr('rog_ros.nodes.prepare_workload.prepare',
                        lambda workload, options=None: '')
    monkeypatch.setattr(cli_fleet, '_netns_setup', setup)
    monkeypatch.setattr(cli_fleet, 'Supervisor', _Sup)
    if not broken:
        monkeypatch.setattr(cli_fleet, '_watch', lambda *args: ([], ''))
    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE'):
        monkeypatch.delenv(var, raising=False)
    # Execute
    status = cli.main(['fleet', '--out', str(out), '--quiet', '--workers', '1', '--netns',
                       '--trace', 'indoors', '--iterations', '20'])
    # Assert: the nodes emulated nothing; the summary names the trace the kernel followed
    err = capsys.readouterr().err
    assert given['rog_server'] == 'indoors', given
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['trace'] == 'indoors' and summary['iterations'] == 7, summary
    assert summary['trace_followed'] is (not broken), summary
    assert status == (1 if broken else 0), err
    if broken:
        assert summary['error'] == f'{line} (then: interrupted)', summary
        assert f'rog fleet: {line}\n' in err and 'rog doctor' not in err, err


def test_a_follower_stopped_by_any_error_says_so():
    # only a NetnsError was caught: any other error (a trace that raised) ended the follower's
    # thread with a traceback on stderr and failure() None, so rog fleet went on with every
    # link frozen at its last rate, the silent freeze a failed tc was
    class _Broken:
        calls = 0

        def rate_mbps(self, t):
            self.calls += 1
            if self.calls > 2:          # (start() applies once, where a failure is set-up's)
                raise KeyError('no\nrate')
            return 1.0

    fleet = types.SimpleNamespace(rates={}, set_rate=lambda *a, **k: None)
    follower = netns.RateFollower(fleet, {0: _Broken()}, time.time(), period_s=0.01).start()
    deadline = time.monotonic() + 10.0
    while follower.error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    follower.stop()
    line = follower.failure()
    assert line is not None and '\n' not in line, line
    assert "UTC): KeyError: 'no\\nrate'; every link kept its last rate" in line, line


_REAL_FLEET = netns.NetnsFleet


class _ScriptedFleet:
    """A NetnsFleet double whose ``set_rate`` fails once ``fail`` is set (no root, no tc)."""

    made = []

    def __init__(self, n, prefix=None, mtu=netns.DEFAULT_MTU, multicast=False, say=None):
        self.links = _REAL_FLEET(n).links
        self.server_ns, self.rates, self.rebuilds = 'rgs', {}, []
        self.live_kick_errors, self.fail = 3, threading.Event()
        _ScriptedFleet.made.append(self)

    def create(self):
        return self

    def delete(self):
        pass

    def set_rate(self, rank, mbps, direction='both'):
        if self.fail.is_set():
            raise netns.NetnsError('worker 0 uplink (rgu0): tc -n rgw0 -batch - failed: boom')
        self.rates[(rank, 'up')] = netns.configured_mbps(mbps)

    def server_addresses(self):
        return [link.server_ip for link in self.links]

    def exec_prefix(self, ns):
        return []


def _wait_for(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert predicate()


EARLIER_S = 3 * 3600.0      # an earlier run's summary left in OUT: written 3 h before


@pytest.mark.parametrize('when', ['after_results', 'before_results', 'before_results_skewed',
                                  'rerun_after_results', 'rerun_before_results'])
def test_a_tc_failing_after_the_results_are_complete_leaves_the_run_standing(
        tmp_path, monkeypatch, capsys, when):
    # a tc that failed while the workers exited, after the server had written the finished
    # run's summary and model, ended the run as broken: status 1, trace_followed false, its
    # completed summary marked with the error. The rule: a failure breaks the run unless the
    # server's final summary.json was written before it (then: a warning, the run stands)
    import json

    # rerun_*: OUT holds an earlier run's complete summary (a run taken up again from an older
    # checkpoint that does not record that its run finished): a tc failing before this run's
    # server wrote its own was taken as hours after the results (the run stood, status 0)
    out = tmp_path / 'run'
    _ScriptedFleet.made = []
    trace_period = []
    if when.startswith('rerun'):
        out.mkdir()
        earlier = time.time() - EARLIER_S
        (out / 'summary.json').write_text(json.dumps(
            {'driver': 'fleet', 'trace': 'indoors', 'trace_followed': True, 'completed': True,
             'iterations': 20, 'results_written_at': earlier}))
        os.utime(out / 'summary.json', (earlier, earlier))
        monkeypatch.setattr(cli_fleet, 'set_aside_unless_resuming',
                            lambda *args, **kwargs: 'resuming from its checkpoint')

    class _Sup:
        """Server done at the first look, then the links fail; workers exit a bit later."""

        def __init__(self, specs, log_dir, env_of, prefix_of):
            self.specs, self.log_dir, self.looks, self.stopped = specs, log_dir, 0, False

        def start(self, resuming=None):
            pass

        def _write(self, completed):
            out.mkdir(exist_ok=True)
            path, now = out / 'summary.json', time.time()
            path.write_text(json.dumps(
                {'driver': 'fleet', 'trace': 'none', 'completed': completed, 'iterations': 7,
                 'results_written_at': now,
                 **({} if completed else {'error': 'interrupted'})}))
            if when == 'before_results_skewed':     # out on a file server 1 s behind (or
                os.utime(path, (now - 1.0, now - 1.0))  # one that stamps whole seconds)

        def codes(self):
            self.looks += 1
            fleet = _ScriptedFleet.made[0]
            if when == 'rerun_before_results':     # the tc fails mid-run, noticed while
                if self.looks == 1:                 # OUT holds the earlier run's summary only
                    fleet.fail.set()
                    _wait_for(lambda: trace_period and trace_period[0].error is not None)
                elif self.looks == 2 and not self.stopped:  # (the old rule let the run go
                    self._write(True)                       # on to write this)
                server = 0 if self.looks >= 2 else None
                workers = 0 if self.looks >= 4 or self.stopped else None
                return {s.name: (server if s.name == 'rog_server' else workers)
                        for s in self.specs}
            if self.looks == 1:
                if when.endswith('after_results'):  # results written, then the tc fails
                    self._write(True)
                    time.sleep(0.2)     # (a failure is dated from its round's start: one
                    fleet.fail.set()    # that began before the write and stalled is before)
                    _wait_for(lambda: trace_period and trace_period[0].error is not None)
                else:       # the tc fails in the last moments of training (the file's time
                    # may say it was written before: the server's own clock says not)
                    fleet.fail.set()
                    _wait_for(lambda: trace_period and trace_period[0].error is not None)
                    time.sleep(0.05)
                    self._write(True)
            server = 0 if self.looks >= 1 else None
            workers = 0 if self.looks >= 4 or self.stopped else None
            return {s.name: (server if s.name == 'rog_server' else workers)
                    for s in self.specs}

        def stop(self, hurry=None):
            self.stopped = True
            return []

        def log_path(self, name):
            return os.path.join(self.log_dir, name + '.log')

        def tail(self, name):
            return ''

    real_follower = netns.RateFollower

    def follower(*args, **kwargs):
        made = real_follower(*args, **kwargs)
        trace_period.append(made)
        return made
    monkeypatch.setattr(netns, 'NetnsFleet', _ScriptedFleet)
    monkeypatch.setattr(netns, 'RateFollower', follower)
    monkeypatch.setattr('rog_ros.nodes.prepare_workload.prepare',
                        lambda workload, options=None: '')
    monkeypatch.setattr(cli_fleet, 'Supervisor', _Sup)
    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE'):
        monkeypatch.delenv(var, raising=False)
    # Execute
    status = cli.main(['fleet', '--out', str(out), '--quiet', '--workers', '1', '--netns',
                       '--trace', 'indoors', '--iterations', '20', '--no-netmon'])
    # Assert
    err = capsys.readouterr().err
    assert (out / 'summary.json').exists(), (status, err)
    summary = json.loads((out / 'summary.json').read_text())
    follower_line = trace_period[0].failure()
    assert follower_line is not None and summary['trace'] == 'indoors'
    if when.endswith('after_results'):  # the run stands: followed to the results' end
        assert status == 0, err
        assert summary['trace_followed'] is True and 'error' not in summary, summary
        assert 0.15 <= summary['trace_stopped_after_end_s'] < 5.0, summary
        assert f'rog fleet: warning: {follower_line} (' in err, err
        assert "after the run's results were complete, summary.json written: the run stands)" \
            in err, err
    else:                           # a failure before the results: the run is broken
        assert status == 1, err
        assert 'trace_stopped_after_end_s' not in summary and 'warning' not in err, err
        assert f'rog fleet: {follower_line}\n' in err, err
    if when == 'rerun_before_results':      # (the summary is the earlier run's: not ours,
        # left as it was: the error said on stderr only, not written into it)
        assert summary['results_written_at'] < time.time() - EARLIER_S + 60, summary
        assert 'netns_kick_errors' not in summary and 'error' not in summary, summary
        assert summary['trace_followed'] is True, summary
        assert "is an earlier run's (written " in err, err
    elif not when.endswith('after_results'):
        assert summary['trace_followed'] is False, summary
        assert summary['error'].startswith(follower_line), summary
    else:
        assert summary['netns_kick_errors'] == 3, summary      # the fleet's live kick errors


def test_the_results_are_complete_once_the_final_summary_is_written(tmp_path):
    import json
    assert cli_fleet.results_complete_at(str(tmp_path)) is None
    path = tmp_path / 'summary.json'
    for body in ('{', '[]', '{"completed": false}',
                 '{"completed": true, "error": "interrupted"}'):
        path.write_text(body)
        assert cli_fleet.results_complete_at(str(tmp_path)) is None, body
    before = time.time()
    path.write_text(json.dumps({'completed': True}))
    written = cli_fleet.results_complete_at(str(tmp_path))
    assert written == os.stat(path).st_mtime and before - 0.05 <= written <= time.time()
    # the server's own stamp, not the file's time: a network file system's clock 30 s behind
    # (or whole seconds) made a failure before the write look after it
    path.write_text(json.dumps({'completed': True, 'results_written_at': before + 0.25}))
    os.utime(path, (before - 30.0, before - 30.0))
    assert cli_fleet.results_complete_at(str(tmp_path)) == before + 0.25
    for bad in ('"soon"', 'null', 'true', 'NaN'):
        path.write_text('{"completed": true, "results_written_at": %s}' % bad)
        assert cli_fleet.results_complete_at(str(tmp_path)) is None, bad


def test_only_a_summary_this_run_wrote_counts_as_its_results(tmp_path):
    # since: when the fleet started. An earlier run's summary (stamped before, or by a server
    # from before results_written_at) is neither this run's results nor its own to write to
    import json
    since = time.time()
    path = tmp_path / 'summary.json'
    assert not cli_fleet.written_since(str(tmp_path), since)
    for stamp, ours in ((since - EARLIER_S, False), (since - 0.001, False), (since, True),
                        (since + 0.25, True)):
        path.write_text(json.dumps({'completed': True, 'results_written_at': stamp}))
        assert cli_fleet.written_since(str(tmp_path), since) is ours, stamp
        assert cli_fleet.results_complete_at(str(tmp_path), since) == (stamp if ours else None)
        assert cli_fleet.results_complete_at(str(tmp_path)) == stamp       # (no since: any)
    path.write_text(json.dumps({'completed': False, 'results_written_at': since + 1}))
    assert cli_fleet.written_since(str(tmp_path), since)          # this run's, not complete
    assert cli_fleet.results_complete_at(str(tmp_path), since) is None
    path.write_text(json.dumps({'completed': True}))    # an older server's: the file is new
    assert os.stat(path).st_mtime >= since - 0.05
    assert not cli_fleet.written_since(str(tmp_path), since - 1.0)
    assert cli_fleet.results_complete_at(str(tmp_path), since - 1.0) is None
    for bad in ('"soon"', 'null', 'true', 'NaN'):
        path.write_text('{"completed": true, "results_written_at": %s}' % bad)
        assert not cli_fleet.written_since(str(tmp_path), since - 1.0), bad


@pytest.mark.parametrize('tc_fails, rerun', [
    (False, True), (True, True), (True, False), (True, 'garbage')])
def test_a_rerun_writes_no_netns_keys_into_an_earlier_run_s_summary(
        tmp_path, monkeypatch, capsys, tc_fails, rerun):
    # a run taken up again (an older checkpoint that does not record that its run finished)
    # whose server wrote no summary of its own: rog fleet wrote its netns_kick_errors (and,
    # with a tc failing at the end, a trace_stopped_after_end_s of hours) into the earlier
    # run's complete summary, and its own trace over the earlier run's (another one: the
    # earlier run's results said to have followed a trace they never saw). Only a summary
    # stamped since the fleet started takes them, or one rog fleet made for this run (no
    # rerun: the server wrote none, the links failed): that one keeps its trace and counts
    import json
    out = tmp_path / 'run'
    out.mkdir()
    earlier = time.time() - EARLIER_S
    before = {'driver': 'fleet', 'trace': 'outages', 'trace_followed': True, 'completed': True,
              'iterations': 20, 'results_written_at': earlier}
    if rerun:       # (garbage: a file that is no summary, replaced by the one rog fleet makes)
        (out / 'summary.json').write_text('{"comp' if rerun == 'garbage' else json.dumps(before))
    _ScriptedFleet.made = []
    followers = []

    class _Sup:
        """Server exits 0 at once, writing nothing; workers exit at the third look."""

        def __init__(self, specs, log_dir, env_of, prefix_of):
            self.specs, self.log_dir, self.looks = specs, log_dir, 0

        def start(self, resuming=None):
            assert resuming == 'resuming from its checkpoint'

        def codes(self):
            self.looks += 1
            if self.looks == 2 and tc_fails:     # the links fail as the workers exit
                _ScriptedFleet.made[0].fail.set()
                _wait_for(lambda: followers[0].error is not None)
            workers = 0 if self.looks >= 3 else None
            return {s.name: (0 if s.name == 'rog_server' else workers) for s in self.specs}

        def stop(self, hurry=None):
            return []

        def log_path(self, name):
            return os.path.join(self.log_dir, name + '.log')

        def tail(self, name):
            return ''

    real_follower = netns.RateFollower

    def follower(*args, **kwargs):
        followers.append(real_follower(*args, **kwargs))
        return followers[-1]
    monkeypatch.setattr(netns, 'NetnsFleet', _ScriptedFleet)
    monkeypatch.setattr(netns, 'RateFollower', follower)
    monkeypatch.setattr('rog_ros.nodes.prepare_workload.prepare',
                        lambda workload, options=None: '')
    monkeypatch.setattr(cli_fleet, 'Supervisor', _Sup)
    monkeypatch.setattr(cli_fleet, 'set_aside_unless_resuming',
                        lambda *args, **kwargs: 'resuming from its checkpoint')
    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE'):
        monkeypatch.delenv(var, raising=False)
    # Execute
    status = cli.main(['fleet', '--out', str(out), '--quiet', '--workers', '1', '--netns',
                       '--trace', 'indoors', '--iterations', '20', '--no-netmon'])
    # Assert
    err = capsys.readouterr().err
    summary = json.loads((out / 'summary.json').read_text())
    if rerun is not True:   # the summary rog fleet made for this run: its trace, its counts
        assert status == 1, err
        assert summary['trace'] == 'indoors' and summary['trace_followed'] is False, summary
        assert summary['netns_kick_errors'] == 3 and 'results_written_at' not in summary, \
            summary
        return
    assert 'netns_kick_errors' not in summary and 'trace_stopped_after_end_s' not in summary, \
        (status, summary, err)
    assert summary['results_written_at'] == earlier and summary['completed'] is True, summary
    assert summary['trace'] == 'outages', summary       # (not relabelled with this run's)
    assert summary == before, summary       # the earlier run's summary as it was
    if not tc_fails:
        assert status == 0, err
    else:       # no results of this run were complete: the failure breaks it, said as such
        assert status == 1, err
        line = followers[0].failure()
        assert line is not None and f'rog fleet: {line}\n' in err and 'warning' not in err, err


@pytest.mark.parametrize('ends', ['links_fail', 'links_fail_server_crashes', 'ctrl_c',
                                  'ctrl_c_no_netns', 'ctrl_c_netns_no_trace'])
def test_a_rerun_that_ends_before_its_server_writes_leaves_the_earlier_summary_as_it_was(
        tmp_path, monkeypatch, capsys, ends):
    # OUT holds an earlier run's complete summary; this run (taken up again) breaks before its
    # server wrote any: rog fleet wrote this run's error and trace_followed false into the
    # earlier run's summary (its complete results then left out by rog compare and the
    # reports, beside its own model), and on Ctrl-C rewrote it. No run writes into a summary
    # it did not start: the file stays byte for byte, stderr says the error and why
    import json
    import signal
    import threading
    out = tmp_path / 'run'
    out.mkdir()
    earlier = time.time() - EARLIER_S
    before = json.dumps({'driver': 'fleet', 'trace': 'outages', 'trace_followed': True,
                         'completed': True, 'iterations': 20, 'final_accuracy': 0.9,
                         'results_written_at': earlier})
    (out / 'summary.json').write_text(before)
    _ScriptedFleet.made = []
    followers = []

    class _Sup:
        """Training goes on until the links fail (or Ctrl-C); the server writes nothing."""

        def __init__(self, specs, log_dir, env_of, prefix_of):
            self.specs, self.log_dir, self.looks, self.stopped = specs, log_dir, 0, False

        def start(self, resuming=None):
            assert resuming == 'resuming from its checkpoint'

        def codes(self):
            self.looks += 1
            if self.looks == 2 and ends.startswith('ctrl_c'):
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            elif self.looks == 2:
                _ScriptedFleet.made[0].fail.set()
                _wait_for(lambda: followers[0].error is not None)
            crashed = ends == 'links_fail_server_crashes' and self.looks >= 2
            worker = -2 if self.stopped else None
            server = 1 if crashed else worker
            return {s.name: (server if s.name == 'rog_server' else worker) for s in self.specs}

        def stop(self, hurry=None):
            self.stopped = True
            return [('SIGINT', [s.name for s in self.specs])]

        def log_path(self, name):
            return os.path.join(self.log_dir, name + '.log')

        def tail(self, name):
            return ''

    real_follower = netns.RateFollower

    def follower(*args, **kwargs):
        followers.append(real_follower(*args, **kwargs))
        return followers[-1]
    monkeypatch.setattr(netns, 'NetnsFleet', _ScriptedFleet)
    monkeypatch.setattr(netns, 'RateFollower', follower)
    monkeypatch.setattr('rog_ros.nodes.prepare_workload.prepare',
                        lambda workload, options=None: '')
    monkeypatch.setattr(cli_fleet, 'Supervisor', _Sup)
    monkeypatch.setattr(cli_fleet, 'set_aside_unless_resuming',
                        lambda *args, **kwargs: 'resuming from its checkpoint')
    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE'):
        monkeypatch.delenv(var, raising=False)
    # Execute
    # (a plain rog fleet, or --netns without a trace, has no link follower: before, a Ctrl-C
    # of such a rerun still rewrote the earlier run's summary)
    shaping = {'ctrl_c_no_netns': ['--trace', 'indoors'],
               'ctrl_c_netns_no_trace': ['--netns', '--trace', 'none']}.get(
                   ends, ['--netns', '--trace', 'indoors'])
    status = cli.main(['fleet', '--out', str(out), '--quiet', '--workers', '1', *shaping,
                       '--iterations', '20', '--no-netmon'])
    # Assert: the earlier run's summary as it was, and no other one made beside it
    captured = capsys.readouterr()
    err = captured.err
    assert (out / 'summary.json').read_text() == before, err
    assert [n for n in os.listdir(str(out)) if 'summary' in n] == ['summary.json'], err
    left = f"rog fleet: {out / 'summary.json'} is an earlier run's (written "
    assert err.count(left) == 1, err
    assert "this run's error is not written into one it did not start" in err, err
    assert 'the run completed' not in captured.out + err, captured
    if ends.startswith('ctrl_c'):
        assert status == 130, err
        assert 'summary none of this run (above)' in err, err
    else:           # this run broke: the line that says why, then that it left the summary
        assert status == 1, err
        line = followers[0].failure()
        assert line is not None and f'rog fleet: {line}\n{left}' in err, err


def test_a_follower_failure_is_dated_from_the_round_that_failed():
    # failed_at's wall time was taken once the round's tc calls (a rebuild) had returned, so a
    # round that began before the server wrote its results and failed after it was dated after
    # it: rog fleet took the run's results as complete before the links stopped following
    began = []

    class _Slow:
        rates = {}

        def set_rate(self, rank, mbps, direction='both'):
            if not began:                   # (start() applies once: set-up's)
                began.append(None)
                return
            began.append(time.time())
            time.sleep(0.3)                 # a tc batch, a rebuild, a loaded machine
            raise netns.NetnsError('worker 0 uplink: tc failed: boom')

    class _Changing:

        def rate_mbps(self, t):
            return 1.0 + (time.monotonic() * 100) % 7

    follower = netns.RateFollower(_Slow(), {0: _Changing()}, time.time(), period_s=0.01)
    follower.start()
    deadline = time.monotonic() + 10.0
    while follower.error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    follower.stop()
    assert follower.error is not None and len(began) == 2, began
    assert follower.failed_at[1] <= began[1] + 0.01, (follower.failed_at, began)


def test_a_kick_that_fails_while_live_is_said_once_and_counted(monkeypatch):
    # kick errors were only counted (kick_errors, read by no one): a kick that could not be
    # sent while the namespaces were live (a full socket buffer) left a rate change waiting
    # for the end's next frame, and nothing said so, nor did summary.json count it
    said = []

    class _Sock:

        def __init__(self, ns):
            self.full = False

        def sendto(self, data, addr):
            if self.full:
                raise BlockingIOError(11, 'Resource temporarily unavailable')

        def close(self):
            pass

    monkeypatch.setattr(netns, '_run', lambda cmd, stdin=None: '')
    monkeypatch.setattr(netns, 'check_available', lambda: None)
    monkeypatch.setattr(netns, '_socket_in', _Sock)
    fleet = netns.NetnsFleet(1, prefix='rgk', say=said.append).create()
    fleet.set_rate(0, 5.0)
    assert said == [] and fleet.kick_errors == fleet.live_kick_errors == 0
    # Execute: every kick from the worker's end fails (its buffer full), three changes
    fleet._kickers['rgkw0'].full = True
    for mbps in (6.0, 0.0, 7.0):
        fleet.set_rate(0, mbps)
    fleet.delete()
    fleet.set_rate(0, 8.0)          # after delete: counted, not live, not said
    # Assert: one line, the first cause; live failures counted apart from the closing ones
    assert fleet.live_kick_errors == 3 and fleet.kick_errors == 5, fleet.kick_errors
    assert len(said) == 1 and '\n' not in said[0], said
    assert said[0].startswith('--netns: a kick (the empty datagram that makes a link end '
                              'apply a rate change at once) could not be sent from rgkw0 to '
                              '10.231.0.1: BlockingIOError: [Errno 11] Resource temporarily '
                              'unavailable; that change may take effect only when'), said
    assert 'netns_kick_errors in summary.json' in said[0]
    assert fleet.kick_error.startswith('from rgkw0 to 10.231.0.1: BlockingIOError')
    # the default: a warning on the rog_ros.netns logger
    logged = []
    monkeypatch.setattr(netns.LOG, 'warning', logged.append)
    quiet = netns.NetnsFleet(1, prefix='rgq').create()
    quiet.set_rate(0, 1.0)
    quiet._kickers['rgqw0'].full = True
    quiet.set_rate(0, 2.0)
    quiet.delete()
    assert len(logged) == 1 and logged[0].startswith('--netns: a kick'), logged
