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
Diagnostics: what each node reports on ``/diagnostics`` (diagnostic_msgs/DiagnosticArray).

One status per concern, named ``<node>: <concern>`` so ``rqt_runtime_monitor`` groups them.
``<node>`` is the node's own name as it runs, after ``-r __node:=`` (``args.node_name``,
:func:`status_prefix`), as ROS 2's ``diagnostic_updater`` prefixes its statuses with
``node.get_name()``: the worker, the server and netmon alike.


* ``training``: lifecycle state, iteration, staleness headroom (how many iterations the node
  may still run ahead before the staleness bound stalls it) and, while stalled, the cause;
* ``link``: the emulated rate and bytes moved (netmon adds the measured interface rate);
* ``rejects``: messages dropped, by reason (undecodable, authentication, invalid, engine).

The builders read node state only; :class:`DiagnosticsPublisher` rate-limits and publishes.
Published on the embedded transport too, so ``ros2 topic echo /diagnostics`` works either way.
"""

from __future__ import annotations

import socket
import time

from rog_ros.transport.standard_msgs import DiagnosticArray, DiagnosticStatus, ERROR, \
    KeyValue, OK, WARN

DIAGNOSTICS = '/diagnostics'
"""Absolute: the ROS 2 convention, outside the fleet namespace."""
HOST = socket.gethostname()


def status_prefix(args, default: str) -> str:
    """
    Return the node name a node's statuses start with: ``args.node_name``, else ``default``.

    ``args.node_name`` is the name the node runs under (``-r __node:=`` applied,
    ``rog_ros.nodes.ros_names``); ``default``, its code's name, serves args built without it.
    """
    return getattr(args, 'node_name', None) or default


def _kv(**values) -> list:
    return [KeyValue(k, f'{v:.6g}' if isinstance(v, float) else str(v))
            for k, v in values.items()]


def rejects_status(name: str, counts: dict) -> DiagnosticStatus:
    """Return the ``rejects`` status: WARN when anything was dropped."""
    total = sum(int(v) for v in counts.values())
    return DiagnosticStatus(WARN if total else OK, f'{name}: rejects',
                            f'{total} messages dropped' if total else 'no message dropped',
                            HOST, _kv(total=total, **{k: int(v) for k, v in counts.items()}))


def worker_statuses(node, now: float) -> list:
    """Return the statuses of a WorkerNode (``now``: its monotonic clock)."""
    name = status_prefix(getattr(node, 'args', None), f'rog_worker_{node.rank}')
    e = node.engine
    out = []
    if e is not None:
        staleness = e.policy.staleness
        local = e.local_staleness()
        headroom = staleness - local if staleness is not None else -1
        last = node.driver.last_receive if getattr(node, 'driver', None) else None
        silent = now - last if last is not None else 0.0
        timeout = float(getattr(node.args, 'server_timeout', 0.0) or 0.0)
        level, message = OK, e.state
        if not node.life.training:
            level, message = WARN, f'paused ({node.life.state})'
        elif e.state == 'pulling' and silent > 1.0:
            level, message = WARN, (f"stalled {silent:.1f} s: waiting for the server's pull "
                                    '(staleness bound or slow downlink)')
        if timeout and silent > 0.5 * timeout:
            level, message = ERROR, f'no message from the server for {silent:.0f} s'
        out.append(DiagnosticStatus(level, f'{name}: training', message, HOST, _kv(
            lifecycle=node.life.state, engine_state=e.state, iteration=e.clock,
            pulled_iteration=e.pulled_clock, staleness_threshold=staleness,
            staleness_headroom=headroom, local_staleness=local,
            seconds_since_server=silent, server_timeout_s=timeout,
            compute_s=float(node.compute_s), loss=float(node.loss))))
        shaper = node.outbox.shapers.get(-1) if hasattr(node.outbox, 'shapers') else None
        rate = float(shaper.trace.rate_at(now + shaper.time_offset_s)) if shaper else -1.0
        level = WARN if shaper is not None and rate <= 0.0 else OK
        out.append(DiagnosticStatus(
            level, f'{name}: link', ('emulated' if shaper else 'real') + (
                ', down (0 Mbit/s)' if level == WARN else ''), HOST,
            _kv(bytes_up=e.bytes_up, bytes_down=e.bytes_down, emulated_mbps=rate,
                trace=getattr(node.args, 'trace', 'none'))))
    out.append(rejects_status(name, node.reject_counts()))
    return out


def server_statuses(node, now: float) -> list:
    """Return the statuses of a ServerNode."""
    name = status_prefix(getattr(node, 'args', None), 'rog_server')
    e = getattr(node, 'engine', None)
    out = []
    if e is not None:
        staleness = e.policy.staleness
        spread = max(e.clock) - min(e.clock)
        stalled = sorted(getattr(e, 'stall_since', {}))
        level, message = OK, 'serving'
        cause = ''
        if stalled:
            slowest = min(range(len(e.clock)), key=lambda r: e.clock[r])
            cause = (f'workers {stalled} wait for the staleness bound; slowest is worker '
                     f'{slowest} at iteration {e.clock[slowest]}')
            level, message = WARN, cause
        out.append(DiagnosticStatus(level, f'{name}: training', message, HOST, _kv(
            lifecycle=node.life.state, min_iteration=min(e.clock), max_iteration=max(e.clock),
            staleness_threshold=staleness,
            staleness_headroom=(staleness - spread) if staleness is not None else -1,
            stalled_workers=','.join(str(r) for r in stalled), stall_cause=cause,
            stall_s_total=float(sum(e.stall_time)), triggers=int(sum(e.triggers)),
            bytes_up=e.bytes_up, bytes_down=e.bytes_down,
            accuracy=float(node.last_metrics.get('accuracy', float('nan'))))))
    out.append(rejects_status(name, node.reject_counts()))
    return out


def link_statuses(name: str, stats) -> list:
    """Return one ``link`` status per LinkStats sample of netmon."""
    out = []
    for s in stats:
        level = OK if s.tx_mbps + s.rx_mbps > 0 or s.emulated_mbps != 0 else WARN
        out.append(DiagnosticStatus(level, f'{name}: link {s.interface} (worker {s.node})',
                                    'traffic' if level == OK else 'idle or down', HOST, _kv(
                                        tx_mbps=s.tx_mbps, rx_mbps=s.rx_mbps,
                                        bitrate_mbps=s.bitrate_mbps, signal_dbm=s.signal_dbm,
                                        emulated_mbps=s.emulated_mbps)))
    return out


class DiagnosticsPublisher:
    """
    Publish ``build(now)`` on ``/diagnostics`` at most ``rate_hz`` times per second.

    Parameters
    ----------
    bus : Bus or None
        None or ``rate_hz <= 0`` disables publishing.
    build : callable
        ``build(now) -> [DiagnosticStatus, ...]``.
    rate_hz : float
        Publication rate (the ``diagnostics_hz`` setting).

    """

    def __init__(self, bus, build, rate_hz: float = 1.0, clock=time.monotonic):
        self.bus, self.build, self.clock = bus, build, clock
        self.period = None
        self.next_at = 0.0
        self.published = 0
        self.set_rate(rate_hz)

    def set_rate(self, rate_hz: float) -> None:
        """Publish at ``rate_hz`` from now on (0: stop); ``ros2 param set ... diagnostics_hz``."""
        self.period = 1.0 / rate_hz if rate_hz and rate_hz > 0 else None
        if self.period is not None:
            self.next_at = min(self.next_at, self.clock() + self.period)
            if self.bus is not None:
                self.bus.advertise(DIAGNOSTICS)     # (again: advertise is idempotent)

    def maybe_publish(self, now: float = None) -> bool:
        """Publish when due; tell whether it did."""
        now = self.clock() if now is None else now
        if self.bus is None or self.period is None or now < self.next_at:
            return False
        self.next_at = now + self.period
        self.bus.publish(DIAGNOSTICS, DiagnosticArray.now(self.build(now)))
        self.published += 1
        return True
