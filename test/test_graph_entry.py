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
``ros_discovery_info`` entries in XCDR2 are read as in XCDR1: ``CDR2_*`` and ``D_CDR2_*``.

``parse_entry`` took encapsulations 0x0000/0x0001 only, so an entry an XTypes writer sent in
XCDR2 was no entry (its node unseen by ``rog doctor`` and the namesake look). The samples
here are built by this module's own encoder, from the rules of XTypes 1.3 section 7.4.3.5
(a DHEADER before each sequence of structs; before each struct too in ``D_CDR2``), and by the
Cyclone DDS Python binding's own XCDR2 serialiser.
"""

from dataclasses import dataclass
import random
import struct

import pytest
from rog_ros.transport import graph_entry
from rog_ros.transport.graph_entry import parse_entry

GUID = bytes(range(1, 17))
NODES = [('/rog', 'rog_server'), ('/r1', 'arm_controller_node')]


class _Writer:
    """An XCDR writer of just what ParticipantEntitiesInfo needs (alignment 4 at most)."""

    def __init__(self, little: bool):
        """Start an empty body (offsets count from after the encapsulation header)."""
        self.order, self.out = '<' if little else '>', bytearray()

    def u32(self, value: int) -> None:
        """Write a uint32 at the next multiple of 4, as CDR aligns it."""
        self.out += bytes(-len(self.out) % 4)
        self.out += struct.pack(self.order + 'I', value)

    def string(self, text: str) -> None:
        """Write a string: its length with the terminator, its bytes, the terminator."""
        raw = text.encode('utf-8') + b'\0'
        self.u32(len(raw))
        self.out += raw

    def delimited(self, write) -> None:
        """Write ``write()``'s bytes after a DHEADER counting them (patched in afterwards)."""
        self.u32(0)
        at = len(self.out)
        write()
        self.out[at - 4:at] = struct.pack(self.order + 'I', len(self.out) - at)


def _xcdr2(size: int, nodes, little: bool = True, appendable: bool = False,
           gids: int = 2) -> bytes:
    """
    Return an XCDR2 ParticipantEntitiesInfo of ``size``-byte GIDs naming ``nodes``.

    ``appendable``: ``D_CDR2``, a DHEADER before every struct; else ``CDR2`` (final types):
    only the sequences of structs have one.
    """
    w = _Writer(little)
    gid = GUID.ljust(size, b'\0')

    def struct_(write):
        """Write a struct: delimited when appendable."""
        if appendable:
            w.delimited(write)
        else:
            write()

    def one_gid():
        """Write one Gid (an octet array: no DHEADER of its own)."""
        struct_(lambda: w.out.extend(gid))

    def gid_seq(count):
        """Write a Gid[] of ``count``: a sequence of structs, so a DHEADER first."""
        def body():
            """Write the count and the Gids."""
            w.u32(count)
            for _ in range(count):
                one_gid()
        w.delimited(body)

    def node(ns, name):
        """Write one NodeEntitiesInfo."""
        def body():
            """Write its names and its two Gid sequences."""
            w.string(ns)
            w.string(name)
            gid_seq(gids)
            gid_seq(gids + 1)
        struct_(body)

    def entry():
        """Write the ParticipantEntitiesInfo: its Gid and its NodeEntitiesInfo[]."""
        one_gid()

        def seq():
            """Write the count and the nodes."""
            w.u32(len(nodes))
            for ns, name in nodes:
                node(ns, name)
        w.delimited(seq)

    struct_(entry)
    ident = (0x0008 if appendable else 0x0006) + (1 if little else 0)
    return struct.pack('>HH', ident, 0) + bytes(w.out)


def _binding_sample(size: int, nodes, appendable: bool) -> bytes:
    """
    Return the binding's XCDR2 serialisation of an entry (final: the bus's own types).

    The appendable variant is declared here with the binding's annotation, the same fields
    and type names as :func:`rog_ros.transport.discovery_info.message_types`.
    """
    pytest.importorskip('cyclonedds')
    from cyclonedds.idl import IdlStruct
    from cyclonedds.idl.annotations import appendable as appendable_
    from cyclonedds.idl.types import array, bounded_str, sequence, uint8
    if not appendable:
        from rog_ros.transport.discovery_info import message_types
        info, node, gid = message_types(size)[:3]
    else:
        @dataclass
        @appendable_
        class Gid(IdlStruct, typename='rmw_dds_common::msg::dds_::Gid_'):
            data: array[uint8, size]

        @dataclass
        @appendable_
        class Node(IdlStruct, typename='rmw_dds_common::msg::dds_::NodeEntitiesInfo_'):
            node_namespace: bounded_str[256]
            node_name: bounded_str[256]
            reader_gid_seq: sequence[Gid]
            writer_gid_seq: sequence[Gid]

        @dataclass
        @appendable_
        class Info(IdlStruct, typename='rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_'):
            gid: Gid
            node_entities_info_seq: sequence[Node]
        info, node, gid = Info, Node, Gid
    g = gid(data=list(GUID.ljust(size, b'\0')))
    sample = info(gid=g, node_entities_info_seq=[
        node(node_namespace=ns, node_name=name, reader_gid_seq=[g] * 2,
             writer_gid_seq=[g] * 3) for ns, name in nodes])
    return bytes(sample.serialize(use_version_2=True))


@pytest.mark.parametrize('size', (16, 24))
@pytest.mark.parametrize('little', (True, False))
@pytest.mark.parametrize('appendable', (False, True))
@pytest.mark.parametrize('nodes', [[], [('/', 'a')], NODES])
def test_an_xcdr2_entry_is_read_in_its_layout(size, little, appendable, nodes):
    """Read each XCDR2 encoding, both byte orders and both GID layouts, as XCDR1 is read."""
    data = _xcdr2(size, nodes, little, appendable)
    assert data[:2] == struct.pack('>H', (8 if appendable else 6) + little)
    assert parse_entry(data) == (size, GUID, nodes)


@pytest.mark.parametrize('size', (16, 24))
@pytest.mark.parametrize('appendable', (False, True))
def test_the_bindings_own_xcdr2_serialisation_is_read(size, appendable):
    """Read what Cyclone DDS's Python binding writes in XCDR2 (0x0007 final, 0x0009 appendable)."""
    data = _binding_sample(size, NODES, appendable)
    assert data[:2] == (b'\0\x09' if appendable else b'\0\x07')
    assert data == _xcdr2(size, NODES, True, appendable, gids=2)
    assert parse_entry(data) == (size, GUID, NODES)


@pytest.mark.parametrize('appendable', (False, True))
def test_a_dheader_that_miscounts_is_no_entry(appendable):
    """Refuse an entry whose first sequence (or struct) DHEADER is off by 4 either way."""
    data = bytearray(_xcdr2(16, NODES, True, appendable))
    at = 4 if appendable else 4 + 16            # the top DHEADER, else the nodes' sequence's
    (count,) = struct.unpack_from('<I', data, at)
    for wrong in (count - 4, count + 4):
        struct.pack_into('<I', data, at, wrong)
        assert parse_entry(bytes(data)) is None


def test_mutable_and_unknown_encapsulations_are_no_entry():
    """Return None for PL_CDR, PL_CDR2, XML and unknown identifiers, whatever follows."""
    body = _xcdr2(16, NODES)[4:]
    for ident in (0x0002, 0x0003, 0x0004, 0x000a, 0x000b, 0x0100, 0xffff):
        assert ident not in getattr(graph_entry, 'ENCODINGS', ())
        assert parse_entry(struct.pack('>HH', ident, 0) + body) is None


def test_mutated_entries_of_every_encoding_never_raise():
    """Feed flipped, cut and spliced bytes of every encoding: an entry or None, no exception."""
    rng = random.Random(7)
    seeds = [_xcdr2(size, NODES, little, appendable) for size in (16, 24)
             for little in (True, False) for appendable in (False, True)]
    seeds += [b'\0\1\0\0' + s[4:] for s in seeds[:1]]
    read = 0
    for _ in range(3000):
        data = bytearray(rng.choice(seeds))
        for _flip in range(rng.randint(1, 4)):
            at = rng.randrange(len(data))
            data[at] = rng.choice((0, 255, rng.randrange(256), data[at] ^ (1 << rng.randrange(8))))
        if rng.random() < 0.3:
            data = data[:rng.randrange(len(data) + 1)]
        parsed = parse_entry(bytes(data))
        if parsed is not None:
            size, guid, nodes = parsed
            assert size in (16, 24) and len(guid) == 16 and isinstance(nodes, list)
            read += 1
    assert read > 0
