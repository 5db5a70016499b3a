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
One ``ros_discovery_info`` entry read from its CDR bytes, in either GID layout (no DDS needed).

``rmw_dds_common/Gid`` is 24 bytes up to Humble and 16 from Iron on, under one DDS type name:
a reader typed for one layout misreads the other's samples where DDS hands them over (a
writer without type information, as rmw_cyclonedds before Iron). :func:`parse_entry` reads
either, the layout being the one whose parse uses up the sample exactly: ``rog doctor``'s
graph check and a bus's look for another node of its name (``discovery_info.Namesakes``).
"""

from __future__ import annotations

import struct

LAYOUTS = (16, 24)
"""Bytes of an ``rmw_dds_common/Gid``: Iron and newer, then Foxy to Humble."""


ENCODINGS = {
    0x0000: ('CDR_BE', 1, False), 0x0001: ('CDR_LE', 1, False),
    0x0006: ('CDR2_BE', 2, False), 0x0007: ('CDR2_LE', 2, False),
    0x0008: ('D_CDR2_BE', 2, True), 0x0009: ('D_CDR2_LE', 2, True),
}
"""Encapsulation identifier -> (name, XCDR version, structs delimited) of the encodings read.

XCDR1 (``CDR_*``) is what rmw_cyclonedds and this package's bus write; a writer offering
XCDR2 writes ``CDR2_*`` for final types (rmw_dds_common's are) and ``D_CDR2_*`` for
appendable ones (a DHEADER before every struct). The parameter-list encodings of mutable
types (``PL_CDR*``) are not read. Odd identifiers are little-endian."""


def _entry(body: bytes, size: int, little: bool, version: int = 1, delimited: bool = False):
    """
    Return ``(gid, [(namespace, name)])`` if ``body`` is one entry of ``size`` exactly.

    ``version`` 2 (XCDR2) puts a DHEADER (the byte count that follows) before every sequence
    of structs (``Gid[]``, ``NodeEntitiesInfo[]``), ``delimited`` (``D_CDR2``) one before
    every struct too; each must count exactly what its member reads, which is how a sample of
    the other GID layout is told apart. Nothing here is wider than 4 bytes, so XCDR2's
    4-byte cap on alignment changes nothing.
    """
    order = '<' if little else '>'
    pos = 0

    def u32():
        nonlocal pos
        pos += -pos % 4
        if pos + 4 > len(body):
            raise ValueError('short')
        (value,) = struct.unpack_from(order + 'I', body, pos)
        pos += 4
        return value

    def take(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(body):
            raise ValueError('short')
        pos += n
        return body[pos - n:pos]

    def string() -> str:
        n = u32()
        if not 1 <= n <= 257:
            raise ValueError('string bound')
        text = take(n)
        if text[-1:] != b'\0':
            raise ValueError('no terminator')
        return text[:-1].decode('utf-8')

    def counted(read, header: bool):
        """Return ``read()``, checking the DHEADER before it when ``header`` says there is one."""
        if not header:
            return read()
        n = u32()
        end = pos + n
        if end > len(body):
            raise ValueError('short')
        out = read()
        if pos != end:
            raise ValueError('delimited size')
        return out

    def gid() -> bytes:
        return counted(lambda: take(size), delimited)

    def gids() -> None:
        """Skip a ``Gid[]`` (one slice, unless each Gid has its own DHEADER)."""
        count = u32()
        if count > len(body):
            raise ValueError('count')
        if not delimited:
            take(count * size)
            return
        for _ in range(count):       # each reads 4 + size bytes or fails: len(body) bounds it
            gid()

    def node():
        ns, name = string(), string()
        for _side in range(2):
            counted(gids, version == 2)
        return ns, name

    def nodes():
        count = u32()
        if count > len(body):
            raise ValueError('count')
        return [counted(node, delimited) for _ in range(count)]

    def entry():
        return gid(), counted(nodes, version == 2)

    try:
        found, names = counted(entry, delimited)
    except (ValueError, UnicodeDecodeError, struct.error):
        return None
    rest = body[pos:]
    return (found, names) if len(rest) < 4 and not rest.strip(b'\0') else None


def parse_entry(data: bytes):
    """
    Return ``(gid size, participant GUID, [(namespace, name)])`` of a serialised sample, or None.

    ``data`` is one ``ParticipantEntitiesInfo`` with its encapsulation header, in one of
    :data:`ENCODINGS` (XCDR1 or XCDR2: an entry written in XCDR2 was skipped as no entry); the
    GID size is the one of the two layouts that reads it exactly (None: neither does).
    """
    if len(data) < 4 or (data[0] << 8 | data[1]) not in ENCODINGS:
        return None
    _, version, delimited = ENCODINGS[data[0] << 8 | data[1]]
    little, body = data[1] % 2 == 1, bytes(data[4:])
    read = [(size, _entry(body, size, little, version, delimited)) for size in LAYOUTS]
    fits = [(size, found) for size, found in read if found is not None]
    if len(fits) != 1:
        return None
    size, (gid, nodes) = fits[0]
    if size == 24 and gid[16:] != bytes(8):    # rmw pads the GUID with zeros
        return None
    return size, gid[:16], nodes
