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
Node parameters: the command-line options every node shares, and ROS 2 argument stripping.

A node gets the same parameters whether ``rog fleet`` starts it (command line from the fleet
plan), ``ros2 launch`` starts it (the plan's command line plus ``--ros-args ...``, which we
strip) or a user types it. The names match ``config/*.yaml`` keys with ``-`` for ``_``.
"""

from __future__ import annotations

import argparse

from rog_ros.nodes.fleet_key import FleetKeyError, KEY_ENV, KEY_FILE_ENV, load_fleet_key
from rog_ros.transport.topics import DEFAULT_NAMESPACE

DEFAULT_DEADLINE_FLOOR = 3.0
"""Real fleets: rog sends optional rows for at least 3 compute times (the simulator's policy
default is 1). At 1, 100-iteration MPCOL fleets on the indoors trace dipped 10-25 accuracy
points late in the run: rows that miss short deadlines pile up in the error-feedback residual,
which feeds back through momentum; at 3, 3 of 3 runs per MTA rule were stable."""


def strip_ros_args(argv) -> list:
    """Drop ``--ros-args ... [--]`` blocks that ros2 launch / ros2 run append."""
    out, skipping = [], False
    for arg in argv:
        if arg == '--ros-args':
            skipping = True
        elif skipping and arg == '--':
            skipping = False
        elif not skipping:
            out.append(arg)
    return out


def add_fleet_args(parser: argparse.ArgumentParser) -> None:
    """Options that every node of one fleet must agree on."""
    g = parser.add_argument_group('fleet (identical on every node)')
    g.add_argument('--workload', default='toy',
                   help='workload name: toy, mpcol, eacol, ... (default toy)')
    g.add_argument('--sync', default='rog', help='rog, ssp or bsp (default rog)')
    g.add_argument('--staleness', type=int, default=4, help='threshold S (default 4)')
    g.add_argument('--workers', type=int, default=3, help='number of workers N (default 3)')
    g.add_argument('--seed', type=int, default=0, help='data order / trace seed (default 0)')
    g.add_argument('--lr', type=float, default=None,
                   help="learning rate (default: the workload's)")
    g.add_argument('--chunk-bytes', type=int, default=16384,
                   help='row chunk payload cap in bytes (default 16384)')
    g.add_argument('--window', type=int, default=4,
                   help='unacknowledged chunks per transfer (default 4)')
    g.add_argument('--deadline-floor', type=float, default=DEFAULT_DEADLINE_FLOOR,
                   help='rog: keep sending optional rows for at least this many compute times '
                        f'(default {DEFAULT_DEADLINE_FLOOR:g})')
    g.add_argument('--namespace', default=DEFAULT_NAMESPACE,
                   help=f'topic namespace (default {DEFAULT_NAMESPACE})')
    g.add_argument('--bus', default='auto', choices=('auto', 'dds', 'rclpy'),
                   help='transport: rclpy when ROS 2 is sourced, else DDS (default auto)')
    g.add_argument('--startup-timeout', type=float, default=60.0,
                   help='seconds to wait for the peers to appear (default 60)')
    add_key_arg(g)


def add_key_arg(parser) -> None:
    """Add the ``--fleet-key-file`` option (message authentication, docs/security.md)."""
    parser.add_argument('--fleet-key-file', default=None,
                        help=f'fleet key file (mode 0600) that signs and verifies every '
                             f'message; default ${KEY_FILE_ENV}, else ${KEY_ENV}, else none '
                             f'(unauthenticated)')


def check_key_arg(parser, args) -> None:
    """Reject an unusable fleet key with a one-line usage error (never showing the key)."""
    try:
        load_fleet_key(getattr(args, 'fleet_key_file', None))
    except FleetKeyError as err:
        parser.error(str(err))


def add_link_args(parser: argparse.ArgumentParser) -> None:
    """Application-level link emulation options (workers and server)."""
    g = parser.add_argument_group('link emulation (application level, no root)')
    g.add_argument('--trace', default='none',
                   help='bandwidth trace per worker link: a preset (indoors, outdoors, ...), '
                        'a CSV file t_seconds,mbps, or none (default none: unshaped)')
    g.add_argument('--trace-scale', type=float, default=1.0,
                   help='multiply trace rates (default 1.0)')
    g.add_argument('--epoch', type=float, default=None,
                   help='wall-clock time (time.time()) at which every trace starts; the '
                        'fleet passes one value to all nodes (default: node start)')
    g.add_argument('--burst-bytes', type=int, default=65536,
                   help='token bucket size (default 65536)')


def policy_spec(args) -> str:
    """Return the policy string of ``make_policy``: ``'rog:4'``, ``'ssp:4'``, ``'bsp'``."""
    sync = args.sync.strip().lower()
    return sync if sync == 'bsp' else f'{sync}:{args.staleness}'


def check_fleet_args(parser, args) -> None:
    """Reject impossible values with argparse's usage error (exit 2)."""
    if args.workers < 1:
        parser.error('--workers must be >= 1')
    if args.staleness < 0:
        parser.error('--staleness must be >= 0')
    if args.chunk_bytes < 256 or args.window < 1:
        parser.error('--chunk-bytes must be >= 256 and --window >= 1')
    if not 0.0 <= args.deadline_floor <= 10.0:
        parser.error('--deadline-floor must be in [0, 10]')
    if args.lr is not None and not args.lr > 0:
        parser.error('--lr must be > 0')
    if getattr(args, 'trace_scale', 1.0) <= 0:
        parser.error('--trace-scale must be > 0')
    check_key_arg(parser, args)
