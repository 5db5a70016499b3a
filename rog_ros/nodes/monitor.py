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
NetMonitor: what one robot's network link does, published as LinkStats at a fixed rate.

Counters come from /proc/net/dev, Wi-Fi bitrate and signal from ``iw`` (polled once a second:
it forks), and under emulation the rate the emulator enforces now (the same trace and epoch
as the nodes' token buckets). Optionally it records a trace ``t_seconds,mbps`` that
``load_trace`` replays: the measured throughput, the Wi-Fi bitrate or the emulated rate.
"""

from __future__ import annotations

import time

from rog_ros.net.traces import save_trace, Trace
from rog_ros.nodes import linkprobe
from rog_ros.nodes.emulated_link import link_for
from rog_ros.nodes.routing import link_stats
from rog_ros.protocol.messages import LinkStats

IW_PERIOD_S = 1.0
RECORD_SOURCES = ('throughput', 'bitrate', 'emulated')


class NetMonitor:
    """
    Sample one interface and publish a LinkStats per reported node.

    Parameters
    ----------
    bus : Bus or None
        Where LinkStats go (None: measure and record only).
    interface : str
        Interface name, or ``'auto'`` (Wi-Fi if present, else the busiest).
    nodes : list of int
        Robots this monitor reports for (one robot: its rank; ``rog fleet`` on one machine:
        every worker, each with its own emulated rate).
    args : argparse.Namespace
        ``trace``, ``trace_scale``, ``epoch``, ``workers``, ``seed``.

    """

    def __init__(self, bus, interface: str, nodes, args, record_source: str = 'throughput'):
        if record_source not in RECORD_SOURCES:
            raise ValueError(f'record source must be one of {RECORD_SOURCES}')
        counters = linkprobe.read_counters()
        self.interface = linkprobe.default_interface(counters) if interface == 'auto' \
            else interface
        if self.interface not in counters:
            raise ValueError(f'interface {self.interface!r} not found; have {sorted(counters)}')
        self.bus, self.nodes, self.source = bus, list(nodes), record_source
        self.links = {n: link_for(args.trace, n, args.workers, args.seed, args.trace_scale)
                      for n in self.nodes if n >= 0}
        self.epoch = time.time() if args.epoch is None else float(args.epoch)
        self.meter = linkprobe.RateMeter()
        self._iw_due, self._iw = -float('inf'), (-1.0, 0.0)   # next iw read (a deadline)
        self.samples = []            # (t since epoch, mbps) for --record-trace
        self.published = 0
        self.topic = link_stats(getattr(args, 'node_name', 'netmon'))

    def sample(self) -> list:
        """Read the link once; publish and return the LinkStats messages."""
        mono, t = time.monotonic(), time.time() - self.epoch
        rx, tx = linkprobe.read_counters().get(self.interface, (0, 0))
        rx_mbps, tx_mbps = self.meter.update(mono, rx, tx)
        if mono >= self._iw_due:
            self._iw_due, self._iw = mono + IW_PERIOD_S, linkprobe.iw_link(self.interface)
        bitrate, signal = self._iw
        out = []
        for node in self.nodes:
            link = self.links.get(node)
            emulated = link.rate_mbps(t) if link is not None else -1.0
            out.append(LinkStats(node=node, interface=self.interface, stamp=time.time(),
                                 tx_bytes=tx, rx_bytes=rx, tx_mbps=tx_mbps, rx_mbps=rx_mbps,
                                 bitrate_mbps=bitrate, signal_dbm=signal,
                                 emulated_mbps=emulated))
        if out:
            first = out[0]
            value = {'throughput': max(first.tx_mbps, first.rx_mbps),
                     'bitrate': first.bitrate_mbps, 'emulated': first.emulated_mbps}[self.source]
            self.samples.append((t, max(0.0, value)))
        if self.bus is not None:
            for msg in out:
                self.bus.publish(self.topic, msg)
                self.published += 1
        return out

    def save(self, path: str) -> Trace | None:
        """Write the recorded samples as a trace file (None if fewer than two samples)."""
        pts = self.samples[1:]       # the first reading has no rate yet
        if len(pts) < 2:
            return None
        trace = Trace.from_samples([p[0] for p in pts], [p[1] for p in pts])
        save_trace(trace, path)
        return trace
