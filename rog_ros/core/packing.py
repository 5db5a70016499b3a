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
Chunk planning: cut an ordered list of encoded rows into payloads of at most ``cap`` bytes.

Rows keep their priority order across chunks (so stopping at a deadline sends a priority
prefix); inside a chunk they are sorted by id so that ids compress into ranges. A row larger
than a chunk is fragmented into consecutive chunks and counts as delivered only when all of its
fragments arrive (specs/rog.md 5.7). Planning loops over chunks (about bytes/cap of them), never
over rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_CHUNK_BYTES = 16 * 1024


@dataclass(frozen=True)
class ChunkPlan:
    """
    Chunk k holds ranks ``[rank_lo[k], rank_hi[k])`` of the ordered rows.

    A fragment chunk holds one row (``rank_hi = rank_lo + 1``) and the byte range
    ``[frag_offset[k], frag_offset[k] + frag_len[k])`` of it; whole-row chunks have
    ``frag_len = -1``.
    """

    rank_lo: np.ndarray
    rank_hi: np.ndarray
    frag_offset: np.ndarray
    frag_len: np.ndarray
    nbytes: np.ndarray          # payload bytes of each chunk

    def __len__(self) -> int:
        return int(self.rank_lo.size)

    def chunks_covering(self, n_ranks: int) -> int:
        """
        Return the number of leading chunks needed so that ranks [0, n_ranks) are all sent.

        That is every chunk that starts below ``n_ranks`` (all fragments of a large row
        included).
        """
        if n_ranks <= 0:
            return 0
        return int(np.searchsorted(self.rank_lo, n_ranks, side='left'))


def plan_chunks(row_nbytes_ordered: np.ndarray, cap: int = DEFAULT_CHUNK_BYTES,
                boundary: int = 0) -> ChunkPlan:
    """
    Greedy packing of rows (already in transmission order) into chunks of <= cap bytes.

    ``boundary`` (e.g. the mandatory prefix length) starts a new chunk at that rank, so the
    mandatory chunks carry exactly the mandatory rows and no optional ones.
    """
    if cap <= 0:
        raise ValueError(f'chunk payload cap must be positive, got {cap}')
    nb = np.asarray(row_nbytes_ordered, dtype=np.int64)
    if 0 < boundary < nb.size:
        head, tail = plan_chunks(nb[:boundary], cap), plan_chunks(nb[boundary:], cap)
        return ChunkPlan(*(np.concatenate([a, b + (boundary if name.startswith('rank') else 0)])
                           for name, a, b in zip(
                               ('rank_lo', 'rank_hi', 'frag_offset', 'frag_len', 'nbytes'),
                               (head.rank_lo, head.rank_hi, head.frag_offset, head.frag_len,
                                head.nbytes),
                               (tail.rank_lo, tail.rank_hi, tail.frag_offset, tail.frag_len,
                                tail.nbytes))))
    cum = np.concatenate(([0], np.cumsum(nb)))
    lo_l, hi_l, off_l, len_l, bytes_l = [], [], [], [], []
    a, n = 0, nb.size
    while a < n:
        if nb[a] > cap:
            size = int(nb[a])
            for off in range(0, size, cap):
                ln = min(cap, size - off)
                lo_l.append(a), hi_l.append(a + 1), off_l.append(off), len_l.append(ln)
                bytes_l.append(ln)
            a += 1
            continue
        b = int(np.searchsorted(cum, cum[a] + cap, side='right')) - 1
        b = max(b, a + 1)
        lo_l.append(a), hi_l.append(b), off_l.append(0), len_l.append(-1)
        bytes_l.append(int(cum[b] - cum[a]))
        a = b
    return ChunkPlan(np.asarray(lo_l, np.int64), np.asarray(hi_l, np.int64),
                     np.asarray(off_l, np.int64), np.asarray(len_l, np.int64),
                     np.asarray(bytes_l, np.int64))
