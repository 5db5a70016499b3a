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
A ``.msg`` ``char`` hashes as ROS 2 hashes it: as ``uint8`` (FieldType 3), not CHAR (13).

rosidl turns a ``.msg`` into IDL before the type description is made, and its adapter
(``rosidl_adapter.msg.MSG_TYPE_TO_IDL``) writes ``char`` as ``uint8``; FIELD_TYPE_CHAR is only
reached from an IDL ``char``, which no ``.msg`` produces. ``rosbags`` hashes ``char`` as CHAR,
so it cannot be the reference here: the hashes below were computed by rosidl itself (the
jazzy branch's rosidl_adapter, rosidl_parser and rosidl_generator_type_description, run on the
``.msg`` texts given here).
"""

import pytest

from rog_ros.transport import msgdef, typehash

UINT8 = 3
UINT8_ARRAY = UINT8 + 48
UINT8_BOUNDED_SEQUENCE = UINT8 + 96
UINT8_UNBOUNDED_SEQUENCE = UINT8 + 144


def _description(name: str, text: str) -> dict:
    """Return the type description rog_ros makes of message ``name`` written as ``text``."""
    return typehash.type_description(name, {name: msgdef.parse_msg(text, name)})


def _hash(name: str, text: str) -> str:
    """Return the RIHS01 hash rog_ros gives message ``name`` written as ``text``."""
    return typehash.rihs01(name, {name: msgdef.parse_msg(text, name)})


@pytest.mark.parametrize('name, text, want', (
    # std_msgs/msg/Char as shipped (its comment does not count)
    ('std_msgs/Char', '# This was originally provided as an example message.\nchar data\n',
     'RIHS01_3ad2d04dd29ba19d04b16659afa3ccaedd691914b02a64e82e252f2fa6a586a9'),
    ('std_msgs/CharSeqs', 'char[] a\nchar[3] b\nchar[<=4] c\n',
     'RIHS01_57d5a00087a7a5b7409729f9d85f407611e6c53edd27840afa067a453470897d'),
    ('std_msgs/UInt8Seqs', 'uint8[] a\nuint8[3] b\nuint8[<=4] c\n',
     'RIHS01_5429004e5ae36416dcafdffdd682d6236ed949974e742a4437dfdbe2d1d00cc3'),
))
def test_the_hash_is_rosidls(name, text, want):
    assert _hash(name, text) == want


def test_char_and_its_arrays_and_sequences_are_uint8_type_ids():
    # Execute
    fields = _description('rog_ros/T', 'char c\nchar[] u\nchar[3] a\nchar[<=4] b\n')[
        'type_description']['fields']
    # Assert
    assert [f['type']['type_id'] for f in fields] == [
        UINT8, UINT8_UNBOUNDED_SEQUENCE, UINT8_ARRAY, UINT8_BOUNDED_SEQUENCE]
    assert [f['type']['capacity'] for f in fields] == [0, 0, 3, 4]


def test_a_char_message_describes_exactly_as_its_uint8_twin():
    char = _description('rog_ros/T', 'char c\nchar[] u\nchar[3] a\nchar[<=4] b\n')
    uint8 = _description('rog_ros/T', 'uint8 c\nuint8[] u\nuint8[3] a\nuint8[<=4] b\n')
    assert char == uint8


def test_byte_stays_its_own_type():
    # rosidl: byte -> IDL octet -> FIELD_TYPE_BYTE (16), unlike char
    fields = _description('rog_ros/T', 'byte b\n')['type_description']['fields']
    assert fields[0]['type']['type_id'] == 16
