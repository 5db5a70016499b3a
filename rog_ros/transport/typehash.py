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
RIHS01 type hashes (REP-2011) of parsed messages, as ROS 2 Iron and newer compute them.

``rmw_cyclonedds`` on Iron+ puts ``typehash=RIHS01_<64 hex>;`` into the USER_DATA of every
reader and writer; ROS 2 tools use it to tell types with the same name apart. The hash is the
SHA-256 of a JSON rendering of the type description (field names and type ids, nested types
sorted by name; no constants, defaults or comments), so it is computed here from the ``.msg``
definitions without a ROS install and checked against ``rosbags`` in the tests.
"""

from __future__ import annotations

from hashlib import sha256
import json

_TYPE_IDS = {
    'int8': 2, 'uint8': 3, 'int16': 4, 'uint16': 5, 'int32': 6, 'uint32': 7, 'int64': 8,
    'uint64': 9, 'float32': 10, 'float64': 11, 'char': 3, 'bool': 15, 'byte': 16,
    'string': 17,
}
"""
``type_description_interfaces/FieldType`` ids of the ``.msg`` primitive types.

``char`` is UINT8 (3), not CHAR (13): rosidl turns a ``.msg`` into IDL first and writes
``char`` as ``uint8`` there (``rosidl_adapter.msg.MSG_TYPE_TO_IDL``), so only an ``.idl``
``char`` is CHAR. ``byte`` is IDL ``octet``, BYTE (16).
"""
_NESTED_TYPE = 1
_BOUNDED_STRING = 21
_ARRAY_OFFSET = 48
_BOUNDED_SEQUENCE_OFFSET = 96
_UNBOUNDED_SEQUENCE_OFFSET = 144


def _field_type(fdef) -> dict:
    if fdef.nested:
        tid = _NESTED_TYPE
    elif fdef.base == 'string' and fdef.str_bound:
        tid = _BOUNDED_STRING
    else:
        tid = _TYPE_IDS[fdef.base]
    capacity = 0
    if fdef.array == 'array':
        tid += _ARRAY_OFFSET
        capacity = fdef.bound
    elif fdef.array == 'sequence' and fdef.bound:
        tid += _BOUNDED_SEQUENCE_OFFSET
        capacity = fdef.bound
    elif fdef.array == 'sequence':
        tid += _UNBOUNDED_SEQUENCE_OFFSET
    return {
        'type_id': tid,
        'capacity': capacity,
        'string_capacity': fdef.str_bound,
        'nested_type_name': _ros_name(fdef.base) if fdef.nested else '',
    }


def _ros_name(name: str) -> str:
    """``pkg/Type`` -> ``pkg/msg/Type`` (the name used in type descriptions)."""
    pkg, typ = name.split('/')
    return f'{pkg}/msg/{typ}'


def type_description(name: str, defs: dict) -> dict:
    """Return the hashable type description of message ``name`` (``pkg/Type``)."""
    structs = {}

    def visit(typ):
        if typ in structs:
            return
        msgdef = defs[typ]
        fields = [{'name': f.name, 'type': _field_type(f)} for f in msgdef.fields]
        if not fields:  # rosidl gives an empty message one placeholder member
            fields = [{'name': 'structure_needs_at_least_one_member',
                       'type': {'type_id': _TYPE_IDS['uint8'], 'capacity': 0,
                                'string_capacity': 0, 'nested_type_name': ''}}]
        structs[typ] = {'type_name': _ros_name(typ), 'fields': fields}
        for fdef in msgdef.fields:
            if fdef.nested:
                visit(fdef.base)

    visit(name)
    referenced = [structs[t] for t in sorted(structs, key=_ros_name) if t != name]
    return {'type_description': structs[name], 'referenced_type_descriptions': referenced}


def rihs01(name: str, defs: dict) -> str:
    """Return ``RIHS01_<sha256 hex>`` of message ``name`` (``pkg/Type``) given all ``defs``."""
    text = json.dumps(type_description(name, defs), separators=(', ', ': '), sort_keys=False)
    return 'RIHS01_' + sha256(text.encode('utf-8')).hexdigest()
