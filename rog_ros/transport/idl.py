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
Cyclone DDS IDL types built from ``msg/*.msg`` at import time, named as ROS 2 names them.

Every message ``rog_ros/Type`` becomes a keyless ``@final`` struct whose DDS type name is
``rog_ros::msg::dds_::Type_`` (Python binding typename ``rog_ros.msg.dds_.Type_``), which is
what ``rmw_cyclonedds`` registers for the same ``.msg``; samples are plain CDR (XCDR1,
encapsulation ``CDR_LE``), with no optional or appendable members, so a ROS 2 node sees them as
ordinary ROS 2 messages. Nested ``builtin_interfaces/Time`` / ``std_msgs/Header`` map to
``builtin_interfaces::msg::dds_::Time_`` / ``std_msgs::msg::dds_::Header_``.

Field mapping (Python side of a sample):

* ``uint8[]`` / ``byte[]`` -> ``bytes`` (the stock binding would give a list of ints);
* other numeric ``T[]`` -> 1-D NumPy arrays of the matching dtype, (de)serialised with one
  ``tobytes`` / ``frombuffer`` instead of a per-element struct call;
* scalars -> ``int`` / ``float`` / ``bool`` / ``str``.

The fast paths replace the member machines of the binding's serialiser (which the binding
does not expose publicly). Wire bytes are unchanged (the tests compare them with an
independent CDR implementation); if a binding version lacks the expected internals the stock
machines stay, ``FAST_SEQUENCES`` is False and samples carry lists (the converters accept both).
"""

from __future__ import annotations

from cyclonedds.idl import IdlStruct, make_idl_struct
from cyclonedds.idl import types as t
import numpy as np

from rog_ros.transport.field_plans import BYTE_TYPES, full_name as _full, MSG_DEFS
from rog_ros.transport.field_plans import NUMPY_DTYPES, TYPE_HASHES

try:  # private API of the binding: see the module docstring
    from cyclonedds.idl._machinery import PlainCdrV2SequenceOfPrimitiveMachine
    from cyclonedds.idl._support import Endianness
except ImportError:  # pragma: no cover - other binding versions
    PlainCdrV2SequenceOfPrimitiveMachine = None
    Endianness = None

_IDL_PRIMITIVES = {
    # ``byte`` is an octet; bindings 0.10 have no name for it, and it travels as a uint8
    'bool': bool, 'byte': getattr(t, 'byte', t.uint8), 'char': t.uint8, 'int8': t.int8,
    'uint8': t.uint8,
    'int16': t.int16, 'uint16': t.uint16, 'int32': t.int32, 'uint32': t.uint32,
    'int64': t.int64, 'uint64': t.uint64, 'float32': t.float32, 'float64': t.float64,
}


class _BytesSequenceMachine(PlainCdrV2SequenceOfPrimitiveMachine or object):
    """``sequence<uint8>`` <-> ``bytes``: uint32 length, then the raw bytes (same wire)."""

    def serialize(self, buffer, value, serialize_kind=None, key_enabled=None):
        value = bytes(value)
        if self.max_length is not None and len(value) > self.max_length:
            raise ValueError(f'{len(value)} bytes exceed the bound {self.max_length}')
        buffer.align(4)
        buffer.write('I', 4, len(value))
        buffer.write_bytes(value)

    def deserialize(self, buffer, deserialize_kind=None, key_enabled=None):
        buffer.align(4)
        length = buffer.read('I', 4)
        data = buffer.read_bytes(length)
        if len(data) != length:
            raise ValueError(f'truncated sample: {length} bytes announced, {len(data)} present')
        return data

    def default_initialize(self):
        return b''


class _NumpySequenceMachine(PlainCdrV2SequenceOfPrimitiveMachine or object):
    """``sequence<number>`` <-> 1-D NumPy array: uint32 count, alignment, raw elements."""

    def __init__(self, idl_type, dtype, max_length=None):
        super().__init__(idl_type, max_length=max_length)
        self.dtype = np.dtype(dtype)

    def _wire_dtype(self, buffer):
        order = '<' if buffer.endianness == Endianness.Little else '>'
        return self.dtype.newbyteorder(order)

    def serialize(self, buffer, value, serialize_kind=None, key_enabled=None):
        arr = np.asarray(value, dtype=self.dtype)
        if arr.ndim != 1:
            arr = arr.reshape(-1)
        if self.max_length is not None and arr.size > self.max_length:
            raise ValueError(f'{arr.size} elements exceed the bound {self.max_length}')
        buffer.align(4)
        buffer.write('I', 4, arr.size)
        if arr.size:
            buffer.align(self.alignment)
            buffer.write_bytes(arr.astype(self._wire_dtype(buffer), copy=False).tobytes())

    def deserialize(self, buffer, deserialize_kind=None, key_enabled=None):
        buffer.align(4)
        count = buffer.read('I', 4)
        if not count:
            return np.zeros(0, dtype=self.dtype)
        buffer.align(self.alignment)
        data = buffer.read_bytes(count * self.dtype.itemsize)
        if len(data) != count * self.dtype.itemsize:
            raise ValueError(f'truncated sample: {count} elements announced')
        return np.frombuffer(data, dtype=self._wire_dtype(buffer)).astype(self.dtype)

    def default_initialize(self):
        return np.zeros(0, dtype=self.dtype)


FAST_SEQUENCES = PlainCdrV2SequenceOfPrimitiveMachine is not None
"""True when sequence fields are ``bytes`` / NumPy arrays in samples (else lists)."""


def dds_type_name(name: str) -> str:
    """``pkg/Type`` (or ``Type`` of rog_ros) -> DDS type name ``pkg::msg::dds_::Type_``."""
    pkg, typ = _full(name).split('/')
    return f'{pkg}::msg::dds_::{typ}_'


def _element_type(fdef, structs):
    if fdef.nested:
        return structs[fdef.base]
    if fdef.base == 'string':
        return t.bounded_str[fdef.str_bound] if fdef.str_bound else str
    return _IDL_PRIMITIVES[fdef.base]


def _field_type(fdef, structs):
    elem = _element_type(fdef, structs)
    if fdef.array == 'array':
        return t.array[elem, fdef.bound]
    if fdef.array == 'sequence':
        return t.sequence[elem, fdef.bound] if fdef.bound else t.sequence[elem]
    return elem


def _fast_machine(fdef):
    if not FAST_SEQUENCES or fdef.array != 'sequence' or fdef.nested:
        return None
    max_length = fdef.bound or None
    if fdef.base in BYTE_TYPES:
        return _BytesSequenceMachine(_IDL_PRIMITIVES[fdef.base], max_length=max_length)
    if fdef.base in NUMPY_DTYPES and fdef.base != 'bool':
        return _NumpySequenceMachine(_IDL_PRIMITIVES[fdef.base], NUMPY_DTYPES[fdef.base],
                                     max_length=max_length)
    return None


def _struct_machines(idl) -> tuple:
    """Return the struct's XCDR1 and XCDR2 serialisers (XCDR1's is ``v0_machine`` in 0.10)."""
    xcdr1 = getattr(idl, 'v1_machine', None) or getattr(idl, 'v0_machine')
    return xcdr1, idl.v2_machine


def _install_fast_machines(cls, msgdef) -> None:
    idl = cls.__idl__
    idl.populate()
    for fdef in msgdef.fields:
        machine = _fast_machine(fdef)
        if machine is None:
            continue
        for struct_machine in _struct_machines(idl):
            members = struct_machine.members_machines
            if not isinstance(members.get(fdef.name), PlainCdrV2SequenceOfPrimitiveMachine):
                raise RuntimeError(f'unexpected cyclonedds serialiser for {msgdef.name}.'
                                   f'{fdef.name}: {type(members.get(fdef.name)).__name__}')
            members[fdef.name] = machine


LEGACY_BINDING = not hasattr(t, 'byte')
"""True under the Cyclone DDS binding series 0.10 (Python 3.8; ROS 2 Humble's C library)."""


def _no_type_information() -> None:
    """
    Leave a 0.10 binding's topic without XTypes type information.

    Why: a 0.10 process that receives the type objects of a newer binding's node fails on them
    (``ddsi_xt_type_init_impl with invalid type object``, then a crash): a Jetson robot on
    Python 3.8 died at the first contact with a server on Python 3.11. Without type information
    of its own it never asks for them and matches by type name, as ``rmw_cyclonedds`` nodes of
    ROS 2 do (they publish none either); the wire bytes are the same.
    """


def build_types(defs: dict) -> dict:
    """Build one IDL struct class per message of ``defs``; returns ``{'pkg/Type': class}``."""
    structs = {}

    def build(name):
        if name in structs:
            return structs[name]
        msgdef = defs[name]
        for fdef in msgdef.fields:
            if fdef.nested:
                build(fdef.base)
        fields = {f.name: _field_type(f, structs) for f in msgdef.fields}
        if not fields:  # rosidl gives an empty message one placeholder member
            fields = {'structure_needs_at_least_one_member': t.uint8}
        pkg, typ = name.split('/')
        cls = make_idl_struct(f'{typ}_', f'{pkg}.msg.dds_.{typ}_', fields)
        cls.__idl_annotations__['extensibility'] = 'final'
        _install_fast_machines(cls, msgdef)
        if LEGACY_BINDING:
            cls.__idl__.fill_type_data = _no_type_information
        structs[name] = cls
        return cls

    for name in defs:
        build(name)
    return structs


DDS_TYPES = build_types(MSG_DEFS)
"""IDL struct class per message, ``{'pkg/Type': class}``."""


def dds_type(name: str) -> type:
    """Return the IDL struct class of ``Type`` / ``pkg/Type``."""
    try:
        return DDS_TYPES[_full(name)]
    except KeyError:
        raise KeyError(f'no message {name!r}; known: {sorted(DDS_TYPES)}') from None


def type_hash(name: str) -> str:
    """Return the RIHS01 hash string of ``Type`` / ``pkg/Type``."""
    return TYPE_HASHES[_full(name)]


def user_data(name: str) -> bytes:
    """Return the endpoint USER_DATA that ``rmw_cyclonedds`` (Iron+) sends for this type."""
    return f'typehash={type_hash(name)};'.encode('ascii')


def is_sample(obj) -> bool:
    """Whether ``obj`` is a sample of one of the built types."""
    return isinstance(obj, IdlStruct) and type(obj) in DDS_TYPES.values()
