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
"""msg/*.msg against messages.py: parsing, field mapping, constants, type names, RIHS01."""

import dataclasses
import re

import pytest

from rog_ros.protocol import messages as m

msgdef = pytest.importorskip('rog_ros.transport.msgdef')
typehash = pytest.importorskip('rog_ros.transport.typehash')
idl = pytest.importorskip('rog_ros.transport.idl')
field_plans = pytest.importorskip('rog_ros.transport.field_plans')

TYPES = ('RowChunk', 'RowVersions', 'TransferAck', 'Schedule', 'LinkStats', 'TrainStatus')


def test_every_message_has_a_msg_file_and_nothing_else():
    names = sorted(p.stem for p in msgdef.msg_dir().glob('*.msg'))
    assert names == sorted(TYPES)


@pytest.mark.parametrize('name', TYPES)
def test_schema_version_is_the_first_field(name):
    fields = field_plans.msg_def(name).fields
    assert fields[0].name == 'schema_version' and fields[0].base == 'uint16'
    assert fields[0].array == ''


@pytest.mark.parametrize('name', TYPES)
def test_fields_mirror_the_dataclass_one_to_one(name):
    # Prepare
    cls = field_plans.MESSAGE_CLASSES[name]
    renames = field_plans.FIELD_RENAMES.get(name, {})
    # Execute
    wanted = {renames.get(f.name, f.name) for f in dataclasses.fields(cls)}
    have = {f.name for f in field_plans.msg_def(name).fields}
    # Assert
    assert have == wanted


def test_field_types_follow_the_mapping_rules():
    chunk = {f.name: f for f in field_plans.msg_def('RowChunk').fields}
    assert (chunk['payload'].base, chunk['payload'].array) == ('uint8', 'sequence')
    assert (chunk['row_ranges'].base, chunk['row_ranges'].array) == ('uint32', 'sequence')
    assert (chunk['scales'].base, chunk['scales'].array) == ('float32', 'sequence')
    assert chunk['transfer_id'].base == 'int64'
    versions = {f.name: f for f in field_plans.msg_def('RowVersions').fields}
    assert versions['versions'].base == 'int32'
    ack = {f.name: f for f in field_plans.msg_def('TransferAck').fields}
    assert ack['final'].base == 'bool' and ack['receive_time'].base == 'float64'
    assert {f.name: f for f in field_plans.msg_def('LinkStats').fields}['interface_name'].base == \
        'string'


def test_constants_equal_messages_py():
    consts = {c.name: c.value for c in field_plans.msg_def('RowChunk').constants}
    assert consts == {'SERVER': m.SERVER, 'KIND_GRAD': m.KIND_GRAD,
                      'KIND_UPDATE': m.KIND_UPDATE, 'FLAG_END': m.FLAG_END,
                      'FLAG_FRAGMENT': m.FLAG_FRAGMENT,
                      'FLAG_REQUEST': m.FLAG_REQUEST, 'FLAG_SNAPSHOT': m.FLAG_SNAPSHOT,
                      'FLAG_JOIN': m.FLAG_JOIN, 'FLAG_LATE': m.FLAG_LATE,
                      'FLAG_FREE': m.FLAG_FREE, 'FLAG_FINAL': m.FLAG_FINAL}


def test_parser_handles_the_msg_grammar():
    # Prepare
    text = '\n'.join([
        '# comment line',
        'int32 A_CONST=-3  # trailing comment',
        "string GREETING='hi # not a comment'",
        'uint8[4] fixed',
        'float64[<=8] bounded',
        'string<=10 name',
        'Other nested  # same package',
        'std_msgs/msg/Header header',
        'int64 with_default 5',
    ])
    # Execute
    parsed = msgdef.parse_msg(text, 'pkg/Thing')
    # Assert
    fields = {f.name: f for f in parsed.fields}
    assert [c.value for c in parsed.constants] == [-3, 'hi # not a comment']
    assert (fields['fixed'].array, fields['fixed'].bound) == ('array', 4)
    assert (fields['bounded'].array, fields['bounded'].bound) == ('sequence', 8)
    assert fields['name'].str_bound == 10
    assert fields['nested'].base == 'pkg/Other'
    assert fields['header'].base == 'std_msgs/Header'
    assert fields['with_default'].base == 'int64'


@pytest.mark.parametrize('line', ['int64 BadName', 'int64 x__y', 'float32[<=] x', 'bogus',
                                  'int64 a\nint64 a', 'foo/Bar X=1'])
def test_parser_rejects_malformed_lines(line):
    with pytest.raises(msgdef.MsgParseError):
        msgdef.parse_msg(line, 'pkg/Bad')


@pytest.mark.parametrize('name', TYPES)
def test_dds_type_names_follow_rmw_cyclonedds(name):
    cls = idl.dds_type(name)
    assert cls.__idl_typename__ == f'rog_ros.msg.dds_.{name}_'
    assert cls.__idl__.idl_transformed_typename == f'rog_ros::msg::dds_::{name}_'
    assert idl.dds_type_name(name) == f'rog_ros::msg::dds_::{name}_'
    assert cls.__idl_annotations__.get('extensibility') == 'final'
    assert cls.__idl__.keyless


@pytest.mark.parametrize('name', TYPES)
def test_rihs01_format_and_user_data(name):
    value = idl.type_hash(name)
    assert re.fullmatch(r'RIHS01_[0-9a-f]{64}', value)
    assert idl.user_data(name) == f'typehash={value};'.encode('ascii')


def test_rihs01_equals_rosbags():
    typesys = pytest.importorskip('rosbags.typesys')
    store = typesys.get_typestore(typesys.Stores.EMPTY)
    for path in msgdef.msg_dir().glob('*.msg'):
        store.register(typesys.get_types_from_msg(path.read_text(), f'rog_ros/msg/{path.stem}'))
    for name in TYPES:
        assert idl.type_hash(name) == store.hash_rihs01(f'rog_ros/msg/{name}'), name


def test_rihs01_changes_with_layout_not_with_comments():
    # Prepare
    base = msgdef.parse_msg('uint16 schema_version\nint64 a\n', 'pkg/T')
    commented = msgdef.parse_msg('# doc\nuint16 schema_version  # v\nint64 a\nint64 K=1\n',
                                 'pkg/T')
    widened = msgdef.parse_msg('uint16 schema_version\nint32 a\n', 'pkg/T')
    # Execute
    hashes = [typehash.rihs01('pkg/T', {'pkg/T': d}) for d in (base, commented, widened)]
    # Assert
    assert hashes[0] == hashes[1] != hashes[2]
