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
``rog doctor``: is this machine ready to train with a fleet, and if not, what to change.

A new robot, a fresh container or a colleague's laptop fails in a handful of known ways:
the wrong torch (or none), no Cyclone DDS binding, DDS that cannot reach itself (multicast
off, a ``CYCLONEDDS_URI`` pointing at a missing file, a peer that does not resolve), a kernel
receive buffer below what the Wi-Fi configuration asks, clocks not synchronised between
robots, a busy machine, a Jetson whose torch does not see its GPU, a ``ROG_BUS`` the nodes
refuse. Each shows up deep in a run as a stall or a traceback; here each is one line with its
fix (the knobs of docs/troubleshooting.md), before anything starts.

This module runs the checks (``doctor_checks``: the machine; ``doctor_dds``: DDS round trips in
a child process; ``doctor_graph``: node names used twice and the other GID layout among the
ROS 2 participants of ``$ROS_DOMAIN_ID``) and prints them; a check that breaks reports itself
as failed and the rest still run. Exit status 1 when a check failed.
"""

from __future__ import annotations

from dataclasses import asdict
import json
import sys

from rog_ros.nodes.doctor_checks import (check_cache, check_clock, check_cyclonedds,
                                         check_environment, check_fleet_key, check_machine,
                                         check_netns, check_package, check_plots, check_python,
                                         check_rmem, check_torch, Finding)
from rog_ros.nodes.doctor_dds import check_dds
from rog_ros.nodes.doctor_graph import check_graph

LEVELS = ('ok', 'info', 'warn', 'fail')

CHECKS = (check_python, check_package, check_torch, check_cyclonedds, check_dds, check_graph,
          check_environment, check_rmem, check_netns, check_cache, check_plots, check_machine,
          check_clock, check_fleet_key)


def diagnose(checks=None) -> list:
    """Run ``checks`` (default ``CHECKS``); one that raises becomes a failed finding."""
    found = []
    for check in CHECKS if checks is None else checks:
        try:
            found.extend(check())
        except Exception as exc:  # noqa: B902 - the report must go on past a broken check
            found.append(Finding(check.__name__.replace('check_', '').strip('_'), 'fail',
                                 f'the check itself failed: {type(exc).__name__}: {exc}'))
    return found


def format_report(found) -> str:
    """Return the findings as aligned lines, fixes indented under them, and a verdict."""
    width = max((len(f.check) for f in found), default=0)
    lines = []
    for f in found:
        lines.append(f'[{f.level:>4}] {f.check:<{width}}  {f.detail}')
        if f.fix and f.level != 'ok':
            lines.append(f'{"":7} {"":<{width}}  -> {f.fix}')
    counts = {level: sum(f.level == level for f in found) for level in LEVELS}
    verdict = ('not ready: fix the failures above' if counts['fail']
               else 'ready' + (' (see the warnings above)' if counts['warn'] else ''))
    lines.append(f'{counts["fail"]} failed, {counts["warn"]} warnings: {verdict}')
    return '\n'.join(lines)


def add_parser(sub) -> None:
    """Register ``rog doctor``."""
    p = sub.add_parser('doctor', allow_abbrev=False,
                       help='check that this machine can run a fleet, with fixes',
                       description='Check Python, torch (on a Jetson: with the GPU), '
                                   'Cyclone DDS (a real round trip), the ROS 2 graph on '
                                   'ROS_DOMAIN_ID (node names used twice, the other GID '
                                   'layout), ROS 2 settings and '
                                   'ROG_BUS, kernel buffers, the cache, CPU and memory, '
                                   'clocks and the fleet key; print one line per check and '
                                   'its fix. Exit status 1 when a check failed.')
    p.add_argument('--json', action='store_true', help='print the findings as JSON')
    p.set_defaults(func=run)


def run(args) -> int:
    """Print the report; 1 when any check failed."""
    if not args.json:
        print('rog doctor: checking this machine (a DDS round trip takes a few seconds)',
              file=sys.stderr)
    found = diagnose()
    if args.json:
        print(json.dumps([asdict(f) for f in found], indent=1))
    else:
        print(format_report(found))
    return 1 if any(f.level == 'fail' for f in found) else 0
