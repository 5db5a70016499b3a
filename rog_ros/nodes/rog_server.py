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

import sys

from rog_ros.nodes.node_main import run_node
from rog_ros.nodes.params import node_parser
from rog_ros.nodes.server_node import ServerNode


def build_parser():
    """Build the rog_server's argument parser (flags from the settings table)."""
    return node_parser('rog_server', 'rog_server', __doc__)


def main(argv=None) -> int:
    """Run the node (see :func:`rog_ros.nodes.node_main.run_node`)."""
    return run_node('rog_server', __doc__, ServerNode, argv)


if __name__ == '__main__':
    sys.exit(main())
