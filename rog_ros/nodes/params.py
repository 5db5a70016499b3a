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
Node parameters: the settings of :mod:`rog_ros.nodes.settings` as each node's parser, and checks.

A node gets the same parameters whether ``rog fleet`` starts it (command line from the fleet
plan), ``ros2 launch`` starts it (flags plus ``--ros-args -p ... --params-file ...``, which
the parser resolves as ROS 2 does) or a user types it.
"""

from __future__ import annotations

from rog_ros.nodes.fleet_key import FleetKeyError, key_source, load_fleet_key
from rog_ros.nodes.settings import DEFAULT_DEADLINE_FLOOR, SettingsParser, split_ros_args

__all__ = ['DEFAULT_DEADLINE_FLOOR', 'check_fleet_args', 'check_key_arg', 'node_parser',
           'policy_spec', 'strip_ros_args']


def node_parser(role: str, prog: str, doc: str) -> SettingsParser:
    """Return the parser of executable ``role`` (flags generated from the settings table)."""
    return SettingsParser(role, prog=prog, description=doc.strip().split('\n')[0])


def strip_ros_args(argv) -> list:
    """Drop ``--ros-args ... [--]`` blocks that ros2 launch / ros2 run append."""
    return split_ros_args(argv)[0]


def check_key_arg(parser, args, rank=None) -> None:
    """
    Reject an unusable fleet key with a one-line usage error (never showing the key).

    ``rank``: the robot the node speaks for (a worker's rank, a netmon's one robot), which
    a robot key must be made for (``robot_keys``); None for the server.
    """
    from rog_ros.protocol.robot_keys import keyring_for
    path = getattr(args, 'fleet_key_file', None)
    try:
        keyring_for(load_fleet_key(path), bool(getattr(args, 'robot_keys', False)), rank,
                    key_source(path))
    except FleetKeyError as err:
        parser.error(str(err))


def policy_spec(args) -> str:
    """Return the policy string of ``make_policy``: ``'rog:4'``, ``'ssp:4'``, ``'bsp'``."""
    from rog_ros.nodes.push_systems import is_push
    sync = args.sync.strip().lower()
    return sync if sync == 'bsp' or is_push(sync) else f'{sync}:{args.staleness}'


def _known_workloads() -> list:
    from rog_ros import workloads
    return workloads.names()


def check_fleet_args(parser, args) -> None:
    """Reject what one value's range cannot express (exit 2); ranges were checked already."""
    rank = getattr(args, 'rank', None)
    if rank is not None and getattr(parser, 'role', '') == 'rog_worker' and \
            not 0 <= rank < args.workers:
        parser.error(f'--rank must be in 0..{args.workers - 1}')
    if getattr(args, 'min_workers', 1) > args.workers:
        parser.error(f'--min-workers {args.min_workers} exceeds --workers {args.workers}')
    if getattr(args, 'sync', None) is not None:
        from rog_ros.nodes.push_systems import check
        try:
            check(vars(args))
        except ValueError as err:
            parser.error(str(err))
    if getattr(args, 'device', None) is not None:
        from rog_ros.nodes.compute_device import resolve_device
        try:
            resolve_device(args.device)
        except ValueError as err:
            parser.error(f'--device {err}')
    options = {}
    if getattr(args, 'workload_options', None) and getattr(args, 'workload', None):
        from rog_ros.workloads.options import from_text
        try:
            options = from_text(args.workload, args.workload_options)
        except ValueError as err:
            parser.error(f'--workload-options: {" ".join(str(err).split())}')
    if getattr(args, 'init_model', None) and \
            getattr(args, 'workload', None) in _known_workloads():
        from rog_ros import workloads
        try:
            workloads.get(args.workload, **options).starting_from(args.init_model)
        except ValueError as err:
            parser.error(f'--init-model: {err}')
    if getattr(args, 'model_out', None):
        from rog_ros.nodes.model_file import model_out_file
        try:
            model_out_file(args.model_out)
        except ValueError as err:
            parser.error(f'--model-out {err}')
    check_key_arg(parser, args, rank if getattr(parser, 'role', '') == 'rog_worker' else None)
