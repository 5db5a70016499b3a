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
What a ``--trace`` value names: a preset, a file, or one of either per robot.

Real records are per link: the Rog testbed logged one per worker, and robots that stand in
different places have links with different statistics (in the logs of one of its runs one
worker's median rate was 3 Mbit/s and another's 61). One record replayed at per-robot offsets
gives every robot the same statistics; a comma-separated list ``a.txt,b.txt,c.txt`` gives
robot r the entry r mod k, so a fleet can be replayed on the links it had. Presets may be
listed too (``indoors,through_wall``: one robot behind a wall). A file whose name contains a
comma is read as one file when it exists.

The simulator (``make_traces``) and the nodes (``link_for``) both resolve a robot's entry here
and then apply their own offset rule to a file, so a list means the same in both.
"""

from __future__ import annotations

import os

SEPARATOR = ','


def sources(spec) -> list:
    """
    Return the entries of a ``--trace`` value: ``[spec]``, or the list's entries in order.

    Raises ``ValueError`` for an empty entry (``a.txt,,b.txt``, a trailing comma): skipping it
    would shift every later robot onto another robot's link.
    """
    spec = str(spec)
    if SEPARATOR not in spec or os.path.exists(spec):
        return [spec]
    parts = [p.strip() for p in spec.split(SEPARATOR)]
    if not all(parts):
        raise ValueError(f'trace list {spec!r} has an empty entry (robot r takes entry r mod '
                         f'the number of entries, so none may be left out)')
    return parts


def source_for(spec, rank: int) -> str:
    """Return the entry robot ``rank`` follows: entry ``rank`` mod the number of entries."""
    if rank < 0:
        raise ValueError(f'rank must be >= 0, got {rank}')
    entries = sources(spec)
    return entries[rank % len(entries)]
