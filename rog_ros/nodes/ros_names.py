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
ROS 2 node names: the ``-r __node:=`` / ``-r __ns:=`` remap rules, applied as rcl applies them.

A node's place in the ROS 2 graph is its fully qualified name, namespace plus name. Both come
from the node's code and may be replaced at start by remap rules after ``--ros-args`` (what
``ros2 run ... --ros-args -r __ns:=/robot1`` and launch_ros's ``Node(namespace=..., name=...)``
or ``PushRosNamespace`` pass), exactly as rcl does (``rcl/src/rcl/arguments.c``, ``remap.c``,
``node.c``):

* ``__node:=NAME`` (or its alias ``__name:=``) renames the node; ``__ns:=/NS`` moves it. The
  namespace must be fully qualified: rcl refuses ``__ns:=robot1`` (``Namespace not remapped to
  a fully qualified name``) and ``rclpy.init`` fails, so it is a usage error here too.
* A rule may start with a node name, ``rog_worker_0:__ns:=/arm``: it applies only to that
  node. A name rule matches the node's own name, a namespace rule the name after renaming.
* The first matching rule wins (``-r __ns:=/a -r __ns:=/b`` is ``/a``).
* rcl reads no environment variable for the namespace: ``ROS_NAMESPACE`` is ROS 1's (a
  feature request for ROS 2, ros2/ros2#1259, is open), so it is ignored here as well.

The nodes' own default namespace is their fleet namespace (``namespace``, ``/rog``): two fleets
on one DDS domain, under two fleet namespaces, have no node name in common (``/rog/rog_server``
and ``/lab2/rog_server``). The remap rules move a node in the graph only: its topics are the
fleet's, absolute names under the fleet namespace, so robots started in different ROS
namespaces (``/robot1``, ``/robot2``) still talk to each other.
"""

from __future__ import annotations

import re

from rog_ros.transport.topics import qualified  # noqa: F401 - ros_names' as before

NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
"""A valid node name (rmw_validate_node_name: letters, digits and _, not starting with a digit)."""
NAMESPACE = re.compile(r'/|(/[A-Za-z_][A-Za-z0-9_]*)+')
"""A valid fully qualified namespace (rmw_validate_namespace), ``/`` included."""
NODE_RULES = ('__node', '__name')
NS_RULE = '__ns'


def parse_rule(rule: str):
    """
    Parse a remap rule (``-r``'s value); return ``(node or None, kind, replacement)`` or None.

    ``kind`` is ``'node'`` or ``'ns'``; None for a rule that renames a topic or service
    (rclpy applies those, the node has nothing to do). Raises ValueError, in one line, for a
    node or namespace rule rcl would refuse.
    """
    if ':=' not in rule:
        raise ValueError(f'--ros-args -r {rule!r}: expected name:=value')
    left, value = rule.split(':=', 1)
    node = None
    if ':' in left:
        node, left = left.split(':', 1)
        if left not in NODE_RULES + (NS_RULE,):
            return None
        if not NAME.fullmatch(node):
            raise ValueError(f'--ros-args -r {rule}: {node!r} before the colon is not a node '
                             'name (letters, digits and _, not starting with a digit)')
    if left in NODE_RULES:
        if not NAME.fullmatch(value):
            raise ValueError(f'--ros-args -r {rule}: {value!r} is not a valid node name '
                             '(letters, digits and _, not starting with a digit)')
        _refuse_double_underscore(rule, value)
        return node, 'node', value
    if left == NS_RULE:
        if not NAMESPACE.fullmatch(value):
            hint = '/' + '/'.join(p for p in value.split('/') if p)
            hint = hint if hint != '/' and NAMESPACE.fullmatch(hint) else '/robot1'
            raise ValueError(f'--ros-args -r {rule}: a namespace must be fully qualified '
                             f'(/ then names of letters, digits and _, no / at the end), e.g. '
                             f'{NS_RULE}:={hint}')
        _refuse_double_underscore(rule, value)
        return node, 'ns', value
    return None


def _refuse_double_underscore(rule: str, value: str) -> None:
    """
    Refuse a replacement with ``__`` in a name, as rcl's remap rules do.

    rcl's lexer ends a name at the second ``_`` of a row (``__`` starts ``__ns``/``__node``),
    so ``-r __ns:=/robot__1`` is no valid rule and ``rclpy.init`` fails on it.
    """
    if '__' in value:
        fixed = re.sub(r'__+', '_', value)
        raise ValueError(f'--ros-args -r {rule}: rcl takes no name with two _ in a row in a '
                         f'remap rule (rclpy.init refuses it); e.g. {fixed}')


def _first(rules, kind: str, name: str):
    """Return the replacement of the first ``kind`` rule that applies to node ``name``."""
    for node, k, value in rules:
        if k == kind and node in (None, name):
            return value
    return None


def node_name(rules, name: str) -> str:
    """Return node ``name`` after the remap ``rules`` (:func:`parse_rule` results)."""
    return _first(rules, 'node', name) or name


def node_namespace(rules, name: str, default: str) -> str:
    """
    Return the namespace of node ``name`` (its name after renaming) after the remap ``rules``.

    ``default``: the namespace its code gives (the fleet namespace); ``/``-prefixed as rcl
    does with a relative one, without a trailing ``/``.
    """
    ns = _first(rules, 'ns', name) or default or '/'
    ns = ns if ns.startswith('/') else '/' + ns
    return ns.rstrip('/') or '/'
