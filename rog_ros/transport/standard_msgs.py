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
Standard ROS 2 messages the nodes publish (``diagnostic_msgs/DiagnosticArray``), as dataclasses.

They mirror the ``.msg`` files of ``ros_interfaces/`` field for field, so the embedded
transport publishes them with ROS 2's type names and layout, and ``/diagnostics`` tools
(``rqt_runtime_monitor``, ``ros2 topic echo /diagnostics``, Foxglove) read them. They carry no
authentication fields: diagnostics are for people and tools, no node acts on them.
:func:`from_sample` turns a received DDS sample or rclpy message into them, following the
parsed ``.msg`` definitions (nested types and sequences of nested types); no DDS binding is
imported here (:mod:`rog_ros.transport.convert` builds the DDS samples).
"""

from __future__ import annotations

from dataclasses import dataclass, field
import time
from typing import ClassVar

from rog_ros.protocol.messages import Time
from rog_ros.transport.field_plans import msg_def

OK, WARN, ERROR, STALE = 0, 1, 2, 3
"""DiagnosticStatus levels."""


@dataclass
class Header:
    """``std_msgs/Header``."""

    TYPE: ClassVar[str] = 'std_msgs/Header'
    stamp: Time = field(default_factory=Time)
    frame_id: str = ''


@dataclass
class KeyValue:
    """``diagnostic_msgs/KeyValue``."""

    TYPE: ClassVar[str] = 'diagnostic_msgs/KeyValue'
    key: str = ''
    value: str = ''


@dataclass
class DiagnosticStatus:
    """``diagnostic_msgs/DiagnosticStatus``: one component's level, message and values."""

    TYPE: ClassVar[str] = 'diagnostic_msgs/DiagnosticStatus'
    level: int = OK               # OK, WARN, ERROR or STALE
    name: str = ''                # 'rog_worker_2: link', ...
    message: str = ''
    hardware_id: str = ''
    values: list = field(default_factory=list)   # KeyValue


@dataclass
class DiagnosticArray:
    """``diagnostic_msgs/DiagnosticArray``: what a node publishes on ``/diagnostics``."""

    TYPE: ClassVar[str] = 'diagnostic_msgs/DiagnosticArray'
    header: Header = field(default_factory=Header)
    status: list = field(default_factory=list)   # DiagnosticStatus

    @classmethod
    def now(cls, status) -> 'DiagnosticArray':
        """Return an array of ``status`` stamped with the wall clock."""
        return cls(Header(Time.from_seconds(time.time())), list(status))


CLASSES = {c.TYPE: c for c in (Header, KeyValue, DiagnosticStatus, DiagnosticArray)}
CLASSES['builtin_interfaces/Time'] = Time
"""Dataclass per ``pkg/Type``."""


def is_standard(msg) -> bool:
    """Whether ``msg`` is one of these standard messages (not a signed rog_ros message)."""
    return getattr(msg, 'TYPE', None) in CLASSES


def from_sample(sample, type_name: str):
    """
    Return the dataclass of a DDS sample of ``type_name`` (recursively).

    An rclpy message of the same type converts too: its fields have the same names, and its
    ``byte`` fields are 1-length ``bytes`` where a DDS sample has an int.
    """
    values = {}
    for fdef in msg_def(type_name).fields:
        value = getattr(sample, fdef.name)
        if fdef.nested and fdef.array:
            value = [from_sample(v, fdef.base) for v in value]
        elif fdef.nested:
            value = from_sample(value, fdef.base)
        elif fdef.base == 'byte' and not fdef.array and isinstance(value, (bytes, bytearray)):
            value = value[0]
        values[fdef.name] = value
    return CLASSES[type_name](**values)
