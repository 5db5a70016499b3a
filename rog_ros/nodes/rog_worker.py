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

Pause training while the robot works: ``ros2 lifecycle set /rog/rog_worker_0 deactivate`` under
ROS 2, ``kill -USR1 <pid>`` otherwise (resume: ``activate`` / ``-USR2``); Ctrl-C leaves
cleanly. Exit status 0 when the server ended training or a shutdown was requested.
"""

from __future__ import annotations

import sys

from rog_ros.nodes.chaos_hooks import add_chaos_args
from rog_ros.nodes.durable import check_durable_args, StateError
from rog_ros.nodes.node_main import run_node
from rog_ros.nodes.params import node_parser
from rog_ros.nodes.worker_node import FleetMismatch, WorkerNode


def build_parser():
    """Build the rog_worker's argument parser (flags from the settings table)."""
    return node_parser('rog_worker', 'rog_worker', __doc__)


def _extend(parser):
    """Hidden `rog chaos` hooks (not settings); check the durable-state directory."""
    add_chaos_args(parser)
    return check_durable_args


def main(argv=None) -> int:
    """Run the node (see :func:`rog_ros.nodes.node_main.run_node`)."""
    return run_node('rog_worker', __doc__, WorkerNode, argv, extend=_extend,
                    usage_errors=(StateError, FleetMismatch))


if __name__ == '__main__':
    sys.exit(main())
