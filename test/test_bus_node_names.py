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
Every bus that rog_ros creates names the ROS 2 node it announces, each a name of its own.

An embedded DdsBus publishes a node on ``ros_discovery_info`` named by its ``node_name``
(default ``rog_bus``), so buses made without one show in ``ros2 node list`` as several nodes
of the same name, which ROS 2 warns about. Read from the source with ``ast``: every call of
``DdsBus``, ``make_bus`` or ``open_bus`` in rog_ros/ passes ``node_name`` (or forwards its
own keywords with ``**``), and the names written out are valid ROS 2 node names, none used twice.
"""

import ast
from pathlib import Path

from rog_ros.transport.discovery_info import _NODE_NAME

PACKAGE = Path(__file__).resolve().parent.parent / 'rog_ros'
BUS_MAKERS = ('DdsBus', 'make_bus', 'open_bus')


def _bus_calls():
    """Yield ``(where, call)`` for each call of a bus maker in rog_ros/."""
    for path in sorted(PACKAGE.rglob('*.py')):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, 'attr', None)
            if name in BUS_MAKERS:
                yield f'{path.relative_to(PACKAGE.parent)}:{node.lineno}', node


def test_the_scan_finds_the_bus_makers():
    """Check that the scan sees the known construction sites (so it cannot pass vacuously)."""
    where = [w.split(':')[0] for w, _ in _bus_calls()]
    for module in ('rog_ros/nodes/doctor_dds.py', 'rog_ros/nodes/fleet.py',
                   'rog_ros/experiments/bench_transport.py',
                   'rog_ros/experiments/chaos_flood.py', 'rog_ros/nodes/connect.py'):
        assert module in where


def test_every_bus_is_given_a_node_name():
    """Check that each call passes ``node_name`` or forwards its caller's keywords."""
    unnamed = [where for where, call in _bus_calls()
               if not any(k.arg in ('node_name', None) for k in call.keywords)]
    assert unnamed == [], f'buses that would all be the node rog_bus: {unnamed}'


def test_the_names_written_out_are_valid_and_distinct():
    """Check that each literal ``node_name`` is a valid ROS 2 node name used at one site only."""
    names = {}
    for where, call in _bus_calls():
        for k in call.keywords:
            if k.arg == 'node_name' and isinstance(k.value, ast.Constant):
                names.setdefault(k.value.value, []).append(where)
    assert names, 'no literal node names found'
    for name, sites in names.items():
        assert _NODE_NAME.fullmatch(name), f'{name!r} ({sites}) is not a ROS 2 node name'
        assert len(sites) == 1, f'{name!r} is used at {sites}'


def test_a_node_named_by_its_settings_is_given_its_namespace_too():
    """Check that a node passing a computed ``node_name`` passes ``node_namespace`` with it."""
    computed = [where for where, call in _bus_calls() if where.startswith('rog_ros/nodes/') and
                any(k.arg == 'node_name' and not isinstance(k.value, ast.Constant)
                    for k in call.keywords)]
    assert computed, 'the nodes (worker, server, netmon) name their buses from their settings'
    without = [where for where, call in _bus_calls() if where in computed and
               not any(k.arg in ('node_namespace', None) for k in call.keywords)]
    assert without == [], f'-r __ns:= and the fleet namespace do not reach: {without}'
