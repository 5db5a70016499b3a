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
rog_worker: the training node every robot runs (WorkerEngine over DDS / ROS 2 topics).

    rog_worker --rank 0 --workers 3 --workload mpcol --sync rog --staleness 4 --trace indoors

Pause training while the robot works: ``kill -USR1 <pid>`` (resume: ``-USR2``); Ctrl-C
leaves cleanly. Exit status 0 when the server ended training or a shutdown was requested.
"""

from __future__ import annotations

import argparse
import sys

from rog_ros.nodes.chaos_hooks import add_chaos_args
from rog_ros.nodes.connect import PeerTimeout
from rog_ros.nodes.durable import add_durable_args, check_durable_args, StateError
from rog_ros.nodes.params import add_fleet_args, add_link_args, check_fleet_args, \
    strip_ros_args
from rog_ros.nodes.signals import SignalRequests
from rog_ros.nodes.worker_node import WorkerNode


def build_parser() -> argparse.ArgumentParser:
    """Build the worker's argument parser."""
    parser = argparse.ArgumentParser(prog='rog_worker', description=__doc__.split('\n')[1])
    parser.add_argument('--rank', type=int, required=True, help='this worker, 0..N-1')
    parser.add_argument('--server-timeout', type=float, default=120.0,
                        help='give up after this long without a message from the server '
                             '(default 120 s)')
    add_fleet_args(parser)
    add_link_args(parser)
    add_durable_args(parser, server=False)
    add_chaos_args(parser)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(strip_ros_args(sys.argv[1:] if argv is None else argv))
    check_fleet_args(parser, args)
    check_durable_args(parser, args)
    if not 0 <= args.rank < args.workers:
        parser.error(f'--rank must be in 0..{args.workers - 1}')
    node = WorkerNode(args, SignalRequests().install())
    try:
        node.configure()
        if node.activate():
            node.spin()
    except KeyboardInterrupt:
        pass
    except StateError as err:
        print(f'rog_worker: {err}', file=sys.stderr)
        return 2
    except (PeerTimeout, TimeoutError) as err:
        print(f'rog_worker: {err}', file=sys.stderr)
        return 1
    finally:
        node.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
