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
``rog bench transport``: what the DDS transport delivers (JSON).

Three numbers, each measured between two separate processes (publisher, subscriber) on real
Cyclone DDS with the RowChunk type and RELIABLE QoS the protocol uses:

* ``loopback_goodput_MBps``: RowChunk payload MB/s over loopback, sender saturating;
* ``netns_goodput_fraction``: payload goodput over a veth pair between two network namespaces
  whose kernel shaping (``rog fleet --netns``'s: an ``htb`` class under a ``tbf`` gate)
  follows a trace, divided by the trace's mean rate over the same window (target >= 0.9; the
  rest is RTPS/UDP/IP/Ethernet headers). Skipped, with the reason, when not root, iproute2
  is missing or the kernel lacks sch_tbf or sch_htb;
* ``latency_p95_ms``: 95th percentile of a chunk's delivery latency (publish call to the
  subscriber's take) with a paced sender on loopback, i.e. without queueing behind a backlog.

The publisher stamps ``time.monotonic()`` into the first 8 payload bytes; CLOCK_MONOTONIC is
one clock for every process and namespace on a machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

CHUNK_BYTES = 16 * 1024
TOPIC = 'bench/chunks'
_STAMP = struct.Struct('<d')
WARMUP_S = 0.5          # goodput_bps drops the first half second (bucket burst, first RTTs)
LATENCY_WARMUP = 10     # paced chunks whose latency is dropped (discovery, first allocations)
# Twice the goodput warm-up: a shorter run timed the warm-up burst alone, and its paced
# latency run (as long, 5 ms apart) kept a few samples or none (NaN percentiles).
MIN_DURATION_S = 2 * WARMUP_S


def check_duration(duration_s: float) -> float:
    """Return ``duration_s``, or raise ConfigError (one line) below ``MIN_DURATION_S``."""
    from rog_ros import checks
    duration_s = checks.number('--duration', duration_s, hi=3600.0, positive=True)
    if duration_s < MIN_DURATION_S:
        raise checks.ConfigError(
            f'--duration must be >= {MIN_DURATION_S:g} s (the goodput skips a {WARMUP_S:g} s '
            f'warm-up and the latency needs enough paced chunks), got {duration_s:g}')
    return duration_s


def _chunk(seq: int, end: bool = False):
    from rog_ros.protocol import messages as m
    payload = _STAMP.pack(time.monotonic()) + bytes(CHUNK_BYTES - _STAMP.size)
    return m.RowChunk(transfer_id=1, seq=seq, sender=0, receiver=m.SERVER, kind=m.KIND_GRAD,
                      clock=0, flags=m.FLAG_END if end else 0,
                      row_ranges=np.array([0, 1], dtype=np.uint32),
                      payload=b'' if end else payload)


def _bus(namespace: str, node_name: str):
    from rog_ros.transport.dds_bus import DdsBus
    return DdsBus(namespace=namespace, node_name=node_name)


def publish(namespace: str, duration_s: float, interval_s: float, timeout_s: float) -> int:
    """Run the publisher process: wait for the subscriber, send for ``duration_s``, then END."""
    bus = _bus(namespace, 'rog_bench_publisher')
    try:
        bus.advertise(TOPIC)
        deadline = time.monotonic() + timeout_s
        while bus.matched(TOPIC) == 0:
            if time.monotonic() > deadline:
                print('bench publisher: no subscriber', file=sys.stderr)
                return 1
            time.sleep(0.01)
        time.sleep(0.2)
        seq, start = 0, time.monotonic()
        nxt = start
        while time.monotonic() - start < duration_s:
            bus.publish(TOPIC, _chunk(seq))
            seq += 1
            if interval_s > 0:
                nxt += interval_s
                time.sleep(max(0.0, nxt - time.monotonic()))
        bus.publish(TOPIC, _chunk(seq, end=True))
        time.sleep(0.5)   # let reliable retransmissions of the tail complete
    finally:
        bus.close()
    return 0


def subscribe(namespace: str, timeout_s: float) -> dict:
    """Run the subscriber process: receive until END; arrival times, sizes and latencies."""
    from rog_ros.protocol.messages import FLAG_END
    bus = _bus(namespace, 'rog_bench_subscriber')
    arrivals, sizes, latency = [], [], []
    try:
        bus.subscribe(TOPIC)
        deadline = time.monotonic() + timeout_s
        done = False
        while not done and time.monotonic() < deadline:
            for _, msg in bus.poll(0.2):
                now = time.monotonic()
                if msg.flags & FLAG_END:
                    done = True
                    break
                arrivals.append(now)
                sizes.append(len(msg.payload))
                latency.append(now - _STAMP.unpack_from(msg.payload)[0])
    finally:
        bus.close()
    return {'arrivals': arrivals, 'sizes': sizes, 'latency': latency, 'complete': done}


def goodput_bps(arrivals, sizes, latency=None, warmup_s: float = WARMUP_S) -> tuple:
    """
    Return (bits/s, t0, t1) of the payload sent after ``warmup_s``.

    t0 is when the first kept message was sent (its arrival minus its ``latency``), t1 the
    last arrival. The warm-up absorbs the token bucket's initial burst and DDS's first
    round trips. The window starts at a send time, not at an arrival: a subscriber that
    falls behind (a loaded machine) drains its backlog in a burst of arrivals, and a window
    of arrival times alone shrank to milliseconds (9,415 MB/s reported for 60 MB sent in a
    second). Without latencies, arrivals stand in for the send times.
    """
    t = np.asarray(arrivals, dtype=np.float64)
    if t.size < 3:
        return 0.0, 0.0, 0.0
    sent = t - np.asarray(latency, dtype=np.float64) if latency is not None else t
    keep = sent >= sent.min() + warmup_s
    if keep.sum() < 3:
        keep[:] = True
    t0, t1 = float(sent[keep].min()), float(t[keep].max())
    bits = 8.0 * float(np.asarray(sizes, dtype=np.float64)[keep].sum())
    return (bits / (t1 - t0) if t1 > t0 else 0.0), t0, t1


def _start(cmd: list, env: dict):
    """Start one side of the bench, out of reach of the terminal's Ctrl-C."""
    from rog_ros.children import dies_with_this_process
    # Its own session: Ctrl-C (and a hang-up) went to the whole process group, and each side
    # died printing a KeyboardInterrupt traceback; the parent is the one to stop them (_stop),
    # and if it is killed outright the kernel stops them (PR_SET_PDEATHSIG).
    return subprocess.Popen(cmd, env=env, start_new_session=True,
                            preexec_fn=dies_with_this_process())


@contextlib.contextmanager
def _sigint_deferred():
    """
    Hold a Ctrl-C back until the block ends, then act on it as the handler before would.

    A Ctrl-C while ``subprocess.Popen`` waits for its child's ``exec`` raised inside Popen:
    the child ran on with no Popen object to stop it, and outlived the bench, reaped by no
    one (seen on a loaded CI machine). Held back, it is raised once the child is in the list
    that ``_stop`` ends. (A handler, not a blocked signal mask: any other thread of the
    process would take a signal that the main thread blocks.)
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(frame))
    try:
        yield
    finally:
        # (None: a handler set outside Python, which cannot be put back: the default then)
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
        if caught and callable(previous):
            previous(signal.SIGINT, caught[0])       # Python's: KeyboardInterrupt
        elif caught and previous != signal.SIG_IGN:   # SIG_DFL, or a handler set in C (None)
            os.kill(os.getpid(), signal.SIGINT)


def _stop(procs, grace_s: float = 2.0) -> None:
    """Terminate the processes still running and reap them all (SIGKILL after ``grace_s``)."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _pair(env_pub: dict, env_sub: dict, prefix_pub: list, prefix_sub: list, duration_s: float,
          interval_s: float) -> dict:
    """Run subscriber and publisher as two processes; the subscriber's measurements."""
    ns = f'/rog_bench_{os.getpid()}'
    timeout = duration_s + 30.0
    with tempfile.NamedTemporaryFile('r', suffix='.json') as out:
        base = [sys.executable, '-m', 'rog_ros.experiments.bench_transport', '--namespace', ns]
        procs = []
        try:
            with _sigint_deferred():
                procs.append(_start(prefix_sub + base + [
                    '--role', 'sub', '--timeout', str(timeout), '--result', out.name],
                    env_sub))
            with _sigint_deferred():
                procs.append(_start(prefix_pub + base + [
                    '--role', 'pub', '--duration', str(duration_s), '--interval',
                    str(interval_s), '--timeout', str(timeout)], env_pub))
            sub, pub = procs
            rc_pub = pub.wait(timeout=timeout + 10)
            rc_sub = sub.wait(timeout=timeout + 10)
        finally:
            _stop(procs)    # on Ctrl-C too: cli.main then says 'interrupted' in one line
        if rc_pub or rc_sub:
            raise RuntimeError(f'bench processes failed (publisher {rc_pub}, subscriber {rc_sub})')
        return json.load(open(out.name))


def _env(uri: str, domain: int) -> dict:
    """Return the environment of a bench process: DDS config, domain, this source tree."""
    env = dict(os.environ, CYCLONEDDS_URI=uri, ROS_DOMAIN_ID=str(domain), ROG_BUS='dds')
    env['PYTHONPATH'] = os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), env.get('PYTHONPATH', '')] if p)
    return env


def bench_loopback(duration_s: float = 3.0, domain: int | None = None) -> dict:
    """Saturated goodput and paced latency over loopback DDS."""
    from rog_ros.transport.cyclone_config import config_path, file_uri
    domain = domain if domain is not None else 1 + (os.getpid() * 13) % 200
    env = _env(file_uri(config_path('loopback')), domain)
    sat = _pair(env, env, [], [], duration_s, 0.0)
    bps, t0, t1 = goodput_bps(sat['arrivals'], sat['sizes'], sat['latency'])
    paced = _pair(env, env, [], [], min(duration_s, 2.0), 0.005)
    lat = np.asarray(paced['latency'][LATENCY_WARMUP:], dtype=np.float64)
    out = {'loopback_goodput_MBps': bps / 8e6 if t1 > t0 else None,
           'loopback_chunks': len(sat['sizes']),
           'latency_p50_ms': _percentile_ms(lat, 50), 'latency_p95_ms': _percentile_ms(lat, 95),
           'latency_samples': int(lat.size), 'chunk_bytes': CHUNK_BYTES}
    if out['loopback_goodput_MBps'] is None or out['latency_p95_ms'] is None:
        out['loopback_note'] = (f'too few chunks for a statistic (null); run --duration '
                                f'{MIN_DURATION_S:g} s or longer')
    return out


def _percentile_ms(seconds, q: float):
    """Return the ``q``-th percentile of ``seconds`` in ms; None (JSON null) under 2 samples."""
    if len(seconds) < 2:
        return None     # one sample is no distribution, none gave NaN (invalid JSON)
    return float(np.percentile(seconds, q) * 1e3)


def bench_netns(trace=None, duration_s: float = 4.0, domain: int | None = None) -> dict:
    """
    Measure goodput through a kernel-shaped veth pair whose rate follows ``trace``.

    Default trace: 40 Mbit/s for 2 s, then 15 Mbit/s. The result is also given as a fraction
    of the trace's mean rate over the measured window.
    """
    from rog_ros.net import netns
    from rog_ros.net.traces import Trace
    reason = netns.unavailable_reason()
    if reason is None:
        reason = netns.shaping_unavailable_reason()
    if reason is not None:
        return {'netns_skipped': reason}
    if trace is None:
        trace = Trace(np.array([0.0, 2.0]), np.array([40.0, 15.0]), 4.0, loop=True)
    domain = domain if domain is not None else 1 + (os.getpid() * 17) % 200

    class _Link:

        def rate_mbps(self, t):
            return float(trace.rate_at(t))

    with netns.NetnsFleet(1) as fleet:
        link = fleet.links[0]
        env_w = _env(netns.cyclone_xml([link.worker_ip], [link.server_ip]), domain)
        env_s = _env(netns.cyclone_xml([link.server_ip], [link.worker_ip]), domain)
        epoch = time.time()
        follower = netns.RateFollower(fleet, {0: _Link()}, epoch).start()   # rog fleet's
        try:
            res = _pair(env_w, env_s, fleet.exec_prefix(link.worker_ns),
                        fleet.exec_prefix(link.server_ns), duration_s, 0.0)
        finally:
            follower.stop()
    bps, t0, t1 = goodput_bps(res['arrivals'], res['sizes'], res['latency'])
    # arrival times are monotonic; map the window onto the trace's clock (wall since epoch)
    shift = time.time() - time.monotonic() - epoch
    want_mbit = trace.cumulative_mbit(t1 + shift) - trace.cumulative_mbit(t0 + shift)
    # no window (fewer than 3 chunks): null, not NaN, which JSON does not allow
    configured = want_mbit / (t1 - t0) if t1 > t0 else None
    out = {'netns_goodput_mbps': bps / 1e6 if t1 > t0 else None,
           'netns_configured_mbps': configured,
           'netns_goodput_fraction': bps / 1e6 / configured if configured else None,
           'netns_rate_updates': follower.updates, 'netns_complete': res['complete']}
    if out['netns_goodput_fraction'] is None:
        out['netns_note'] = 'too few chunks through the shaped link for a goodput (null)'
    return out


def bench_transport(duration_s: float = 3.0, netns_duration_s: float = 4.0) -> dict:
    """All transport numbers in one JSON-able dict (see the module docstring)."""
    out = {'benchmark': 'transport'}
    out.update(bench_loopback(duration_s))
    out.update(bench_netns(duration_s=netns_duration_s))
    return out


def _main(argv=None) -> int:
    """Entry point of the publisher / subscriber processes (internal)."""
    p = argparse.ArgumentParser(description='internal: one side of rog bench transport',
                                allow_abbrev=False)
    p.add_argument('--role', choices=('pub', 'sub'), required=True)
    p.add_argument('--namespace', required=True)
    p.add_argument('--duration', type=float, default=3.0)
    p.add_argument('--interval', type=float, default=0.0)
    p.add_argument('--timeout', type=float, default=60.0)
    p.add_argument('--result', default=None)
    a = p.parse_args(argv)
    try:
        if a.role == 'pub':
            return publish(a.namespace, a.duration, a.interval, a.timeout)
        res = subscribe(a.namespace, a.timeout)
    except KeyboardInterrupt:
        return 130      # a SIGINT sent to this process itself: the parent reports the stop
    with open(a.result, 'w') as fh:
        json.dump(res, fh)
    return 0 if res['complete'] else 1


if __name__ == '__main__':
    sys.exit(_main())
