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
Choose the bus: ``RclpyBus`` where ROS 2 and the built interfaces import, else ``DdsBus``.

Apart from ``bus`` (the interface both implement) so that the interface module does not import
its own implementations: the nodes ask for a bus here, and each bus module only knows ``bus``.
"""

from __future__ import annotations

import os

from rog_ros.transport.bus import Bus, BusError
from rog_ros.transport.topics import DEFAULT_NAMESPACE

BUS_KINDS = ('auto', 'dds', 'rclpy')
"""What ``make_bus`` and ``$ROG_BUS`` accept."""


def rclpy_available() -> bool:
    """Whether rclpy and the generated ``rog_ros.msg`` interfaces import."""
    try:
        from rog_ros.transport import rclpy_bus  # noqa: F401
    except ImportError:
        return False
    return True


def make_bus(kind: str = 'auto', namespace: str = DEFAULT_NAMESPACE, **kwargs) -> Bus:
    """
    Create a bus: ``kind`` is ``'auto'``, ``'dds'`` or ``'rclpy'``.

    ``'auto'`` (or ``$ROG_BUS``) picks ``RclpyBus`` when rclpy and the generated interfaces
    import, else ``DdsBus``. ``kwargs`` go to the chosen class.
    """
    if kind == 'auto':
        kind = os.environ.get('ROG_BUS', 'auto')
    if kind == 'auto':
        kind = 'rclpy' if rclpy_available() else 'dds'
    if kind == 'rclpy':
        try:
            from rog_ros.transport.rclpy_bus import RclpyBus
        except ImportError as exc:
            raise BusError(f'RclpyBus unavailable ({exc}); source a ROS 2 install with the '
                           f'rog_ros package built, or use kind="dds"') from exc
        return RclpyBus(namespace=namespace, **kwargs)
    if kind == 'dds':
        from rog_ros.transport.dds_bus import DdsBus
        return DdsBus(namespace=namespace, **kwargs)
    raise ValueError(f'unknown bus kind {kind!r}; use auto, dds or rclpy')
