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
A file's identity by its stat, and when that identity may key a cache (the racily clean rule).

A cache keyed by a file's stat (path, inode, size, modification and change times) instead of
its bytes saves hashing a file of gigabytes (a ROS 2 bag, a data set) at every lookup. But a
filesystem stamps times in ticks (a jiffy, 1 to 4 ms, on Linux's local filesystems; 1 s or
2 s on FAT, HFS+ and some NFS servers): a file rewritten with as many bytes within the tick
of the write before keeps its identity, and a cache would go on serving what the file held
before. git calls such an entry racily clean and checks its content instead. So here: an
identity whose times are not older than the moment it was taken (``now_ns``, taken before
the file was read) by more than ``RACY_NS`` may be shared by the next version of the file;
it keys no cache, and the file is read again at the next lookup, until it is old. A file
written long ago (the common case) stays cached.

The change time counts with the modification time: a write sets both, but ``os.utime`` (a
copy with ``cp -p``, ``touch -d``) sets the modification time back, never the change time.
A clock of the file's server ahead of this machine's makes files look young (read again,
cost only); one behind by more than ``RACY_NS`` is not covered. A modification time more
than ``RACY_NS`` ahead of now is no write's (a bag copied with ``cp -p`` or ``rsync -a`` from
a robot whose clock ran ahead, ``touch -d``): only the change time, which the copy set and
any later write sets again, says whether such a file is young, else it was read again at
every lookup until this machine's clock passed it (a bag of gigabytes for each run that
``rog compare`` checks; a data set's SHA-256 in EACOL's key, then a key without it: a second
pre-training). Where the change time is the modification time (FAT), it stays young; where
it is the creation time (Windows), a server's clock more than ``RACY_NS`` ahead is not
covered, as one behind is not.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import NamedTuple

RACY_NS = 3 * 10 ** 9
"""A file younger than this when its identity was taken is racily clean: the 2 s ticks of
FAT's times with a second to spare."""


class Identity(NamedTuple):
    """What says that a file is the file it was: its stat (``identity``)."""

    path: str       # its real path (a link's target)
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int


def now_ns() -> int:
    """Return the time (ns since the epoch) an identity is taken at, for ``racy``."""
    return time.time_ns()


def identity(path) -> Identity:
    """Return the ``Identity`` of the file ``path``; raises ``OSError`` as ``os.stat`` does."""
    st = os.stat(path)
    return Identity(os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
                    st.st_ctime_ns)


def racy(found, taken_ns: int) -> bool:
    """
    Return whether an identity taken at ``taken_ns`` (``now_ns``) may not key a cache.

    ``found``: an ``Identity``, or several (None for a file that was missing: a file made
    later changes the key). True when a file's modification or change time is within
    ``RACY_NS`` of ``taken_ns``, or its change time after it: a rewrite of the same size in
    the same tick of the filesystem's clock would keep the identity. A modification time more
    than ``RACY_NS`` after ``taken_ns`` was set (``cp -p``), not written: the change time says.
    """
    if found is None:
        return False
    if not isinstance(found, Identity):
        return any(racy(one, taken_ns) for one in found)
    return (found.ctime_ns > taken_ns - RACY_NS
            or taken_ns - RACY_NS < found.mtime_ns <= taken_ns + RACY_NS)


def sha256_hex(path) -> str:
    """Return the SHA-256 of the file ``path`` in hex, read in 1 MB blocks (data sets, starts)."""
    digest = hashlib.sha256()
    with open(path, 'rb') as fh:
        for block in iter(lambda: fh.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()
