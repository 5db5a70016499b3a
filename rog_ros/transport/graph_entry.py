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


def _entry(body: bytes, size: int, little: bool):
    """Return ``(gid, [(namespace, name)])`` if ``body`` is one entry of ``size`` exactly."""
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

    try:
        gid = take(size)
        nodes = []
        for _ in range(u32()):
            ns, name = string(), string()
            for _side in range(2):
                count = u32()
                if count > len(body):
                    raise ValueError('count')
                take(count * size)
            nodes.append((ns, name))
    except (ValueError, UnicodeDecodeError, struct.error):
        return None
    rest = body[pos:]
    return (gid, nodes) if len(rest) < 4 and not rest.strip(b'\0') else None


def parse_entry(data: bytes):
    """
    Return ``(gid size, participant GUID, [(namespace, name)])`` of a serialised sample, or None.

    ``data`` is one ``ParticipantEntitiesInfo`` in CDR with its encapsulation header; the GID
    size is the one of the two layouts that reads it exactly (None: neither does).
    """
    if len(data) < 4 or data[0] != 0 or data[1] not in (0, 1):
        return None
    little, body = data[1] == 1, bytes(data[4:])
    read = [(size, _entry(body, size, little)) for size in LAYOUTS]
    fits = [(size, found) for size, found in read if found is not None]
    if len(fits) != 1:
        return None
    size, (gid, nodes) = fits[0]
    if size == 24 and gid[16:] != bytes(8):    # rmw pads the GUID with zeros
        return None
    return size, gid[:16], nodes
