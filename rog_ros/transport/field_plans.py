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
The messages' parsed ``.msg`` definitions and how each field maps to a Python value.

Both transports read the same fields: the embedded one builds Cyclone DDS types from them
(:mod:`rog_ros.transport.idl`, :mod:`rog_ros.transport.convert`) and the ROS 2 one fills
rosidl-generated messages (:mod:`rog_ros.transport.rclpy_bus`). This module holds what they
share and imports no DDS binding, so a robot on ROS 2 never loads the Cyclone DDS Python
binding (and its own copy of the DDS library) beside ``rmw_cyclonedds``'s.

The mapping is checked at import time: a field of a dataclass without a ``.msg`` counterpart
(or the reverse) is layout drift between ``messages.py`` and ``msg/`` and raises
``ImportError`` here rather than corrupting data on the wire.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rog_ros.protocol import messages
from rog_ros.transport.msgdef import load_msg_defs
from rog_ros.transport.typehash import rihs01

NUMPY_DTYPES = {
    'bool': np.bool_, 'int8': np.int8, 'int16': np.int16, 'uint16': np.uint16,
    'int32': np.int32, 'uint32': np.uint32, 'int64': np.int64, 'uint64': np.uint64,
    'float32': np.float32, 'float64': np.float64,
}
"""NumPy dtype of the elements of a numeric sequence field, by ``.msg`` element type."""
BYTE_TYPES = ('uint8', 'byte', 'char')
"""Element types whose sequences are carried as Python ``bytes``."""

MSG_DEFS = load_msg_defs(standard=True)
"""All parsed messages, ``{'pkg/Type': MsgDef}`` (ours and the well-known ones they use)."""


def full_name(name: str) -> str:
    """Return ``pkg/Type`` for ``Type`` (a rog_ros message) or ``pkg/Type``."""
    return name if '/' in name else f'rog_ros/{name}'


def msg_def(name: str):
    """Return the parsed :class:`~rog_ros.transport.msgdef.MsgDef` of ``Type`` / ``pkg/Type``."""
    try:
        return MSG_DEFS[full_name(name)]
    except KeyError:
        raise KeyError(f'no message {name!r}; known: {sorted(MSG_DEFS)}') from None


TYPE_HASHES = {name: rihs01(name, MSG_DEFS) for name in MSG_DEFS}
"""This build's RIHS01 hash per message, ``{'pkg/Type': 'RIHS01_<hex>'}``.

Here, not in ``idl``: the rclpy bus and the worker's start-up check compare peers' hashes
with it and must not load the Cyclone binding that ``idl`` imports."""


MESSAGE_CLASSES = {
    cls.TYPE: cls for cls in (messages.RowChunk, messages.RowVersions, messages.TransferAck,
                              messages.Schedule, messages.LinkStats, messages.TrainStatus)
}
"""Protocol dataclass per message type name."""

TIME = 'builtin_interfaces/Time'
"""The one nested type of our messages (stamps); it maps to ``messages.Time``."""

FIELD_RENAMES = {
    'LinkStats': {'interface': 'interface_name'},
}
"""Dataclass field -> ``.msg`` field where the names differ (``interface`` is an IDL keyword)."""


def _plan(type_name: str) -> tuple:
    """Return ``((dataclass_field, msg_field, kind, dtype), ...)`` for one message type."""
    cls = MESSAGE_CLASSES[type_name]
    msgdef = msg_def(type_name)
    renames = FIELD_RENAMES.get(type_name, {})
    by_msg = {f.name: f for f in msgdef.fields}
    plan = []
    for dfield in dataclasses.fields(cls):
        mname = renames.get(dfield.name, dfield.name)
        fdef = by_msg.pop(mname, None)
        if fdef is None:
            raise ImportError(f'{type_name}.{dfield.name} has no field {mname!r} in '
                              f'{type_name}.msg: messages.py and msg/ disagree')
        if fdef.base == TIME and not fdef.array:
            kind, dtype = 'time', None
        elif fdef.nested or fdef.array == 'array':
            raise ImportError(f'{type_name}.{mname}: nested/fixed-array fields need a converter')
        elif fdef.array == 'sequence' and fdef.base in BYTE_TYPES:
            kind, dtype = 'bytes', None
        elif fdef.array == 'sequence':
            kind, dtype = 'array', NUMPY_DTYPES[fdef.base]
        elif fdef.base == 'string':
            kind, dtype = 'str', None
        elif fdef.base == 'bool':
            kind, dtype = 'bool', None
        elif fdef.base.startswith('float'):
            kind, dtype = 'float', None
        else:
            kind, dtype = 'int', None
        plan.append((dfield.name, mname, kind, dtype))
    if by_msg:
        raise ImportError(f'{type_name}.msg fields {sorted(by_msg)} are missing in the '
                          f'dataclass: messages.py and msg/ disagree')
    return tuple(plan)


FIELD_PLANS = {name: _plan(name) for name in MESSAGE_CLASSES}
"""Per message type: ``((dataclass_field, msg_field, kind, dtype), ...)`` in wire order of the
dataclass; kind is 'bytes', 'array' (NumPy ``dtype``), 'str', 'bool', 'float', 'int' or
'time' (``messages.Time`` <-> ``builtin_interfaces/Time``)."""
