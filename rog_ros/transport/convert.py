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
Converters between protocol dataclasses (``rog_ros.protocol.messages``) and DDS samples.

``to_sample(msg)`` gives the IDL sample of :mod:`rog_ros.transport.idl` for a dataclass and
``from_sample(sample)`` the dataclass for a received sample. NumPy arrays keep their dtype
(``uint32[]`` <-> ``np.uint32`` ...), payloads stay ``bytes``. The mapping is checked at import
time: a field of a dataclass without a ``.msg`` counterpart (or the reverse) is layout drift
between ``messages.py`` and ``msg/`` and raises ``ImportError`` here rather than corrupting
data on the wire (:mod:`rog_ros.transport.field_plans`, shared with the ROS 2 transport).
Standard messages (:mod:`rog_ros.transport.standard_msgs`) convert generically, following
their parsed ``.msg`` definitions (nested types and sequences of nested types).
"""

from __future__ import annotations

import numpy as np

from rog_ros.protocol import messages
from rog_ros.transport import idl, standard_msgs
from rog_ros.transport.field_plans import FIELD_PLANS, MESSAGE_CLASSES, msg_def, TIME

_TYPE_OF_SAMPLE = {idl.dds_type(name): name for name in MESSAGE_CLASSES}
_STANDARD_OF_SAMPLE = {idl.dds_type(name): name for name in standard_msgs.CLASSES}
_TIME_SAMPLE = idl.dds_type(TIME)
_SCALAR = {'str': str, 'bool': bool, 'float': float, 'int': int}


def to_sample(msg):
    """Return the DDS sample of a protocol (or standard ROS 2) dataclass instance."""
    type_name = msg.TYPE
    if type_name not in FIELD_PLANS:
        return _standard_to_sample(msg, type_name)
    values = {}
    for dname, mname, kind, dtype in FIELD_PLANS[type_name]:
        value = getattr(msg, dname)
        if kind == 'bytes':
            values[mname] = bytes(value)
        elif kind == 'array':
            arr = np.ascontiguousarray(value, dtype=dtype).reshape(-1)
            values[mname] = arr if idl.FAST_SEQUENCES else arr.tolist()
        elif kind == 'time':
            stamp = messages.as_time(value)
            values[mname] = _TIME_SAMPLE(sec=int(stamp.sec), nanosec=int(stamp.nanosec))
        else:
            values[mname] = _SCALAR[kind](value)
    return idl.dds_type(type_name)(**values)


def from_sample(sample):
    """Return the protocol (or standard ROS 2) dataclass instance of a DDS sample."""
    standard = _STANDARD_OF_SAMPLE.get(type(sample))
    if standard is not None:
        return standard_msgs.from_sample(sample, standard)
    type_name = sample_type(sample)
    values = {}
    for dname, mname, kind, dtype in FIELD_PLANS[type_name]:
        value = getattr(sample, mname)
        if kind == 'bytes':
            values[dname] = value if isinstance(value, bytes) else bytes(value)
        elif kind == 'array':
            values[dname] = np.asarray(value, dtype=dtype)
        elif kind == 'time':
            values[dname] = messages.Time(int(value.sec), int(value.nanosec))
        else:
            values[dname] = _SCALAR[kind](value)
    return MESSAGE_CLASSES[type_name](**values)


def _standard_to_sample(msg, type_name: str):
    """Return the DDS sample of a dataclass of :mod:`standard_msgs` (recursively)."""
    values = {}
    for fdef in msg_def(type_name).fields:
        value = getattr(msg, fdef.name)
        if fdef.nested and fdef.array:
            value = [_standard_to_sample(v, fdef.base) for v in value]
        elif fdef.nested:
            value = _standard_to_sample(value, fdef.base)
        elif fdef.base in ('int8', 'uint8', 'byte', 'int16', 'uint16', 'int32', 'uint32',
                           'int64', 'uint64'):
            value = int(value)
        values[fdef.name] = value
    return idl.dds_type(type_name)(**values)


class DecodeError(ValueError):
    """Received bytes are not a valid sample of the expected type (dropped and counted)."""


def decode(data_type, data: bytes):
    """
    Return the protocol dataclass of CDR ``data`` (with encapsulation header) of ``data_type``.

    The receive boundary of the embedded transport: whatever is wrong with the bytes
    (truncation, absurd lengths, bad UTF-8, wrong type) raises :class:`DecodeError` and
    nothing else, so a malformed sample can never end a node's loop.
    """
    if len(data) < 4:
        # (the binding decodes no bytes at all as a message of zeros; any real sample has
        # at least its 4-byte encapsulation header)
        raise DecodeError(f'undecodable {getattr(data_type, "__name__", data_type)}: '
                          f'{len(data)} bytes, shorter than a CDR header')
    try:
        return from_sample(data_type.deserialize(data))
    except Exception as exc:  # noqa: B902 - any malformed input becomes one error type
        raise DecodeError(f'undecodable {getattr(data_type, "__name__", data_type)}: '
                          f'{type(exc).__name__}: {exc}'[:300]) from None


def sample_type(sample) -> str:
    """Return the message type name (``'RowChunk'`` ...) of a DDS sample."""
    try:
        return _TYPE_OF_SAMPLE[type(sample)]
    except KeyError:
        raise TypeError(f'not a rog_ros message sample: {type(sample).__name__}') from None
