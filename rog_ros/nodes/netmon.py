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

    netmon --interface wlan0 --nodes 2 --record-trace trace.csv

Reports interface counters, the Wi-Fi bitrate/signal (``iw``) and, under emulation, the
emulated rate, for the ranks in ``--nodes`` (none given: every worker 0..N-1, as ``rog fleet``
on one machine runs it; ``-1``: this robot alone). ``--record-trace`` writes ``t_seconds,mbps``
on exit (its folder is checked at start) with a summary in the log; replay it with
``--trace``. The default source, the measured throughput, is only the traffic the robot moves:
load the link (iperf3) while recording, or an idle link records as an outage.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

from rog_ros import checks
from rog_ros.net.traces import save_trace
from rog_ros.nodes.connect import fleet_key, open_bus
from rog_ros.nodes.diagnostics import DiagnosticsPublisher, link_statuses, status_prefix
from rog_ros.nodes.monitor import NetMonitor, record_summary
from rog_ros.nodes.node_main import ros_path, setup_logging
from rog_ros.nodes.params import check_key_arg, node_parser
from rog_ros.nodes.routing import link_stats
from rog_ros.nodes.signals import SignalRequests


def build_parser():
    """Build the monitor's argument parser (flags from the settings table)."""
    return node_parser('netmon', 'netmon', __doc__)


def main(argv=None) -> int:
    """Run netmon until shut down (or ``--duration``); the exit status."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    log = setup_logging(args.node_name)
    try:
        nodes = [int(n) for n in (args.nodes or '').split(',') if n.strip()]
    except ValueError:
        parser.error(f'--nodes {args.nodes!r}: expected comma-separated ranks')
    # with robot keys, a netmon on robot K (reporting for K alone) holds K's key only
    robot = nodes[0] if len(nodes) == 1 and nodes[0] >= 0 else None
    check_key_arg(parser, args, robot)
    # Alone, netmon reports for its own robot (-1): reported as every worker's, one machine's
    # counters would reach a FLOWN server as every link's. A fleet on one machine (rog fleet,
    # fleet.launch.py) gives it every worker's rank (plan.py).
    nodes = nodes or [-1]
    if args.record_trace:
        try:       # written at exit: a bad path must cost one line now, not the record then
            checks.output_file('--record-trace', args.record_trace)
        except checks.ConfigError as err:
            log.error(str(err))
            return 2
    requests, node, executor = SignalRequests().install(), None, None
    if args.bus != 'none' and ros_path(parser, args, lifecycle=False):   # node netmon_<rank>
        from rog_ros.nodes import ros_node
        requests, node, executor = ros_node.plain_node(
            'netmon', args, sys.argv[1:] if argv is None else argv)
    bus = monitor = None
    status = 0
    try:
        if args.bus != 'none':
            bus = open_bus(args.bus, args.namespace, fleet_key(args, rank=robot), args.record,
                           node, executor, node_name=args.node_name,
                           node_namespace=args.node_namespace)
            bus.advertise(link_stats(args.status_name))   # not a remapped name: the server's
        monitor = NetMonitor(bus, args.interface, nodes, args, args.record_source, log)
        last = []
        name = status_prefix(args, 'netmon')
        diagnostics = DiagnosticsPublisher(bus, lambda now: link_statuses(name, last),
                                           args.diagnostics_hz)
        if node is not None:      # ros2 param set /rog/netmon_<rank> diagnostics_hz ...
            ros_node.follow_runtime_settings(node, args, lambda: diagnostics)
        period, start = 1.0 / args.rate_hz, time.monotonic()
        nxt = start
        while not requests.shutdown_requested:
            if args.duration is not None and time.monotonic() - start >= args.duration:
                break
            last[:] = monitor.sample()
            diagnostics.maybe_publish()
            if executor is not None:
                executor.spin_once(timeout_sec=0.0)   # parameter services (ros2 param)
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))
    except KeyboardInterrupt:
        pass
    except ValueError as err:
        log.error(str(err))
        status = 2
    finally:
        try:
            if bus is not None:
                bus.close()
        finally:
            if node is not None:
                ros_node.close_node(node, executor)
    if args.record_trace and monitor is not None:
        status = max(status, save_record(monitor, args.record_trace, log))
    return status


def save_record(monitor: NetMonitor, path: str, log) -> int:
    """
    Write the recorded trace to ``path`` and log its summary; the exit status (0, or 1).

    A path that cannot be written at the end (its folder removed, a disk full) costs an error
    line, not the samples: they go to a file in the temporary folder, which the line names.
    """
    trace = monitor.trace()
    if trace is None:
        log.warning('too few samples to record a trace')
        return 0
    summary, warnings = record_summary(trace, monitor.source)
    try:
        save_trace(trace, path)
    except OSError as err:
        name = os.path.basename(path.rstrip(os.sep)) or 'link.csv'
        spare = os.path.join(tempfile.gettempdir(), f'netmon-{os.getpid()}-{name}')
        try:
            save_trace(trace, spare)
        except OSError as again:
            log.error(f'could not write the recorded trace to {path} ({err.strerror or err}) '
                      f'nor to {spare} ({again.strerror or again}); {summary}')
            return 1
        log.error(f'could not write the recorded trace to {path} ({err.strerror or err}); '
                  f'saved it to {spare} instead')
        path = spare
        status = 1
    else:
        status = 0
    log.info(f'recorded {path}: {summary}')
    for line in warnings:
        log.warning(f'{path}: {line}')
    return status


if __name__ == '__main__':
    sys.exit(main())
