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
rog_server: the parameter-server node (ServerEngine over DDS / ROS 2 topics).

    rog_server --workers 3 --workload mpcol --sync rog --staleness 4 --iterations 200 --out run/

Evaluates the consensus model every ``--eval-every`` iterations, stops the fleet after
``--iterations`` and writes ``summary.json`` and ``timeseries.csv`` to ``--out``. Ctrl-C
writes what was measured so far. Exit status 0 when training completed or was interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys

from rog_ros.nodes.chaos_hooks import add_chaos_args
from rog_ros.nodes.connect import PeerTimeout
from rog_ros.nodes.durable import add_durable_args, check_durable_args, StateError
from rog_ros.nodes.params import add_fleet_args, add_link_args, check_fleet_args, \
    strip_ros_args
from rog_ros.nodes.server_node import ServerNode
from rog_ros.nodes.signals import SignalRequests


def build_parser() -> argparse.ArgumentParser:
    """Build the server's argument parser."""
    parser = argparse.ArgumentParser(prog='rog_server', description=__doc__.split('\n')[1])
    parser.add_argument('--iterations', type=int, default=100,
                        help='stop the fleet once every worker pushed this many (default 100)')
    parser.add_argument('--eval-every', type=int, default=10,
                        help='evaluate the consensus model every K iterations (default 10)')
    parser.add_argument('--out', default='rog_run',
                        help='directory for summary.json and timeseries.csv (default rog_run)')
    add_fleet_args(parser)
    add_link_args(parser)
    add_durable_args(parser, server=True)
    add_chaos_args(parser)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(strip_ros_args(sys.argv[1:] if argv is None else argv))
    check_fleet_args(parser, args)
    check_durable_args(parser, args)
    if args.iterations < 1 or args.eval_every < 1:
        parser.error('--iterations and --eval-every must be >= 1')
    node = ServerNode(args, SignalRequests().install())
    try:
        node.configure()
        if node.activate():
            node.spin()
            summary = node.finish()
            print(json.dumps({k: summary.get(k) for k in (
                'system', 'iterations', 'final_accuracy', 'threshold_triggers', 'stall_cost',
                'sim_time_s')}), flush=True)
    except KeyboardInterrupt:
        pass
    except StateError as err:
        print(f'rog_server: {err}', file=sys.stderr)
        return 2
    except PeerTimeout as err:
        print(f'rog_server: {err}', file=sys.stderr)
        return 1
    finally:
        node.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
