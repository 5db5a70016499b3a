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

The measured throughput is the traffic this robot moved, not what its link could carry: an
idle link records as an outage, so the link must be loaded (iperf3) while it records. A
source that is not there (no ``iw`` or no Wi-Fi for ``bitrate``, no ``--trace`` for
``emulated``) is refused when the monitor starts, and a moment without a bitrate (not
associated) is left out of the record, never written as 0. The record's time axis is the
monotonic clock: a wall clock that NTP steps back would make its times go backwards.
"""

from __future__ import annotations

import logging
import shutil
import time

import numpy as np
from rog_ros.net.traces import NEAR_ZERO_MBPS, save_trace, Trace
from rog_ros.nodes import linkprobe
from rog_ros.nodes.emulated_link import epoch_to_monotonic, link_for
from rog_ros.nodes.routing import link_stats
from rog_ros.protocol.messages import LinkStats, new_incarnation

IW_PERIOD_S = 1.0
RECORD_SOURCES = ('throughput', 'bitrate', 'emulated')
IDLE_SHARE = 0.5
"""A recording with at least this share of its time below ``NEAR_ZERO_MBPS`` is mostly idle."""


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
    record_source : str
        What the recorded trace holds (``RECORD_SOURCES``); ValueError when it is unavailable.
    log : logging.Logger, optional
        Where the one warning about samples left out of the record goes.

    """

    def __init__(self, bus, interface: str, nodes, args, record_source: str = 'throughput',
                 log=None):
        if record_source not in RECORD_SOURCES:
            raise ValueError(f'record source must be one of {RECORD_SOURCES}')
        counters = linkprobe.read_counters()
        self.interface = linkprobe.default_interface(counters) if interface == 'auto' \
            else interface
        if self.interface not in counters:
            raise ValueError(f'interface {self.interface!r} not found; have {sorted(counters)}')
        self.bus, self.nodes, self.source = bus, list(nodes), record_source
        self.incarnation = new_incarnation()     # this run of netmon, on every LinkStats
        self.log = log if log is not None else logging.getLogger('netmon')
        self.links = {n: link_for(args.trace, n, args.workers, args.seed, args.trace_scale)
                      for n in self.nodes if n >= 0}
        self._check_source()
        # the emulators' trace time 0 on the monotonic clock, read once (as the nodes' own
        # links do): a wall clock that NTP steps later moves neither
        self.epoch_mono = epoch_to_monotonic(args.epoch)
        self.meter = linkprobe.RateMeter()
        self._iw_due, self._iw = -float('inf'), (-1.0, 0.0)   # next iw read (a deadline)
        self.start_mono = time.monotonic()   # the record's time 0 (a clock NTP cannot step)
        self.samples = []            # (monotonic s since start_mono, mbps) for --record-trace
        self.left_out = 0            # samples whose source had no value (no bitrate)
        self._metered = False        # the counters were read once: throughput has a rate
        self.published = 0
        # the netmon's own name (netmon_<rank>), which the server subscribes to, whatever
        # -r __node:= calls the node in the ROS 2 graph
        self.topic = link_stats(getattr(args, 'status_name', None) or
                                getattr(args, 'node_name', 'netmon'))

    def _check_source(self) -> None:
        """Refuse a record source that this interface or these settings cannot give."""
        if self.source == 'emulated' and not any(self.links.values()):
            raise ValueError('--record-source emulated records the rate that --trace enforces, '
                             'but no reported node has one: give --trace (a preset or a file) '
                             'and worker ranks in --nodes, or record --record-source '
                             'throughput')
        if self.source == 'bitrate':
            if shutil.which('iw') is None:
                raise ValueError('--record-source bitrate reads the Wi-Fi bitrate with iw, '
                                 'which is not installed (apt install iw); or record '
                                 '--record-source throughput')
            if not linkprobe.is_wireless(self.interface):
                raise ValueError(f'--record-source bitrate needs a Wi-Fi interface; '
                                 f'{self.interface} is not one (pick it with --interface, or '
                                 'record --record-source throughput)')

    def sample(self) -> list:
        """Read the link once; publish and return the LinkStats messages."""
        mono = time.monotonic()
        t = mono - self.epoch_mono                 # t: the emulators' trace time
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
                                 incarnation=self.incarnation,
                                 tx_bytes=tx, rx_bytes=rx, tx_mbps=tx_mbps, rx_mbps=rx_mbps,
                                 bitrate_mbps=bitrate, signal_dbm=signal,
                                 emulated_mbps=emulated))
        first = next((m.emulated_mbps for m in out if m.emulated_mbps >= 0), -1.0)
        self._record(mono - self.start_mono, {'throughput': max(tx_mbps, rx_mbps),
                                              'bitrate': bitrate, 'emulated': first})
        self._metered = True
        if self.bus is not None:
            for msg in out:
                self.bus.publish(self.topic, msg)
                self.published += 1
        return out

    def _record(self, t: float, values: dict) -> None:
        """Keep the recorded source's value at ``t``; a missing one is left out, not 0."""
        if self.source == 'throughput' and not self._metered:
            return                       # the first counter reading has no rate yet
        value = values[self.source]
        if not value >= 0:
            self.left_out += 1
            if self.left_out == 1:
                self.log.warning(f'iw reports no {self.source} for {self.interface} now (not '
                                 'associated?); samples without one are left out of the '
                                 'recorded trace')
            return
        if self.samples and t <= self.samples[-1][0]:
            return
        self.samples.append((t, float(value)))

    def trace(self) -> Trace | None:
        """Return the recorded samples as a Trace; None if there are fewer than two."""
        if len(self.samples) < 2:
            return None
        return Trace.from_samples([p[0] for p in self.samples], [p[1] for p in self.samples])

    def save(self, path: str) -> Trace | None:
        """Write the recorded trace to ``path`` atomically; None (nothing written) if too few."""
        trace = self.trace()
        if trace is not None:
            save_trace(trace, path)
        return trace


def record_summary(trace: Trace, source: str = 'throughput') -> tuple:
    """
    Return ``(summary, warnings)`` of a recorded trace: one line, then lines to warn with.

    The summary gives the mean and median (time-weighted) and the share of the time at 0; a
    warning says that the recording is mostly idle (``IDLE_SHARE`` of the time below
    ``NEAR_ZERO_MBPS``), above all of the measured throughput, which is only the robot's own
    traffic, and that a record at 0 throughout cannot be replayed at all.
    """
    dur = np.diff(np.append(trace.t_s, trace.end_s))
    order = np.argsort(trace.mbps, kind='stable')
    half = np.searchsorted(np.cumsum(dur[order]), 0.5 * trace.end_s, side='left')
    median = float(trace.mbps[order][min(half, len(order) - 1)])
    zero = float(dur[trace.mbps == 0].sum() / trace.end_s)
    idle = float(dur[trace.mbps < NEAR_ZERO_MBPS].sum() / trace.end_s)
    summary = (f'{len(trace)} samples over {trace.duration_s:.1f} s ({source}): mean '
               f'{trace.mean_mbps:.3g} Mbit/s, median {median:.3g} Mbit/s, {zero:.0%} of the '
               'time at 0')
    warnings = []
    if idle >= IDLE_SHARE:
        what = ('the throughput is the traffic this robot moved, not what its link could '
                'carry: load the link while recording (e.g. iperf3 -c SERVER -t 600 on the '
                'robot), or the idle time replays as an outage' if source == 'throughput'
                else 'the link was down or unshaped much of the time')
        warnings.append(f'the recording is mostly idle: {idle:.0%} of the time below '
                        f'{NEAR_ZERO_MBPS:g} Mbit/s; {what}')
    if not np.any(trace.mbps > 0):
        warnings.append('every sample is 0 Mbit/s: --trace and rog sim refuse this trace')
    return summary, warnings
