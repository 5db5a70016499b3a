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
netmon: publishes LinkStats of this robot's network link (10 Hz), optionally records a trace.

    netmon --interface wlan0 --nodes 2 --record trace.csv

Reports interface counters, the Wi-Fi bitrate/signal (``iw``) and, under emulation, the
emulated rate. ``--record`` writes ``t_seconds,mbps`` on exit; replay it with ``--trace``.
"""

from __future__ import annotations

import argparse
import sys
import time

from rog_ros.nodes.connect import fleet_key, open_bus
from rog_ros.nodes.monitor import NetMonitor, RECORD_SOURCES
from rog_ros.nodes.params import add_key_arg, check_key_arg, strip_ros_args
from rog_ros.nodes.routing import LINK_STATS
from rog_ros.nodes.signals import SignalRequests
from rog_ros.transport.topics import DEFAULT_NAMESPACE


def build_parser() -> argparse.ArgumentParser:
    """Build the monitor's argument parser."""
    p = argparse.ArgumentParser(prog='netmon', description=__doc__.split('\n')[1])
    p.add_argument('--interface', default='auto', help='interface (default: Wi-Fi, else busiest)')
    p.add_argument('--nodes', default='-1',
                   help='comma-separated robot ranks to report for (default -1: this robot)')
    p.add_argument('--rate-hz', type=float, default=10.0, help='samples per second (default 10)')
    p.add_argument('--record', default=None, help='write a trace CSV here on exit')
    p.add_argument('--record-source', default='throughput', choices=RECORD_SOURCES,
                   help='what the recorded trace holds (default throughput)')
    p.add_argument('--duration', type=float, default=None, help='exit after this many seconds')
    p.add_argument('--namespace', default=DEFAULT_NAMESPACE, help='topic namespace')
    p.add_argument('--bus', default='auto', choices=('auto', 'dds', 'rclpy', 'none'),
                   help="transport; 'none' only measures/records (default auto)")
    p.add_argument('--trace', default='none', help='emulated links: preset or file')
    p.add_argument('--trace-scale', type=float, default=1.0, help='trace rate multiplier')
    p.add_argument('--epoch', type=float, default=None, help='wall time the traces start')
    p.add_argument('--workers', type=int, default=1, help='fleet size (trace offsets)')
    p.add_argument('--seed', type=int, default=0, help='trace seed')
    add_key_arg(p)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(strip_ros_args(sys.argv[1:] if argv is None else argv))
    if not args.rate_hz > 0:
        parser.error('--rate-hz must be > 0')
    check_key_arg(parser, args)
    nodes = [int(n) for n in args.nodes.split(',') if n.strip()]
    requests = SignalRequests().install()
    bus = None if args.bus == 'none' else open_bus(args.bus, args.namespace, fleet_key(args))
    monitor = None
    try:
        if bus is not None:
            bus.advertise(LINK_STATS)
        monitor = NetMonitor(bus, args.interface, nodes, args, args.record_source)
        period, start = 1.0 / args.rate_hz, time.monotonic()
        nxt = start
        while not requests.shutdown_requested:
            if args.duration is not None and time.monotonic() - start >= args.duration:
                break
            monitor.sample()
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))
    except KeyboardInterrupt:
        pass
    except ValueError as err:
        print(f'netmon: {err}', file=sys.stderr)
        return 2
    finally:
        if bus is not None:
            bus.close()
    if args.record and monitor is not None:
        trace = monitor.save(args.record)
        print(f'netmon: recorded {len(monitor.samples)} samples to {args.record}' if trace
              else 'netmon: too few samples to record a trace', file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
