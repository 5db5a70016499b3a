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
The last encoding of a vector that changes a few rows at a time, kept to encode it again.

Late transfers (rows sent while a robot computes) start transfers between the iterations'
own: a worker's late push sends the rows its last push withheld, whose residual has not
changed since that push encoded them; a server's late pull sends a computing worker the rows
changed since its pull, most of them unchanged since they were encoded for it. Encoding the
whole model again for each (row sums, sign bits: two passes over 16.9 M parameters on
ConvMLP-M) made a late transfer cost as much as an iteration's push, whatever it carried.

``EncodingCache`` keeps the last encoding (row-aligned bytes and tensor-row sums), which of
its rows still hold, and the tensors it was taken of. A write to those tensors marks the rows
it changed (``rows_written``); any other write, or a tensor replaced, is seen in torch's
version counters and drops the whole cache. The next encoding takes afresh only the rows
that changed among those it needs, when they are few (``few_rows``); a row's bytes and sum
depend on that row alone (``RowCodec.encodes_rows_alone``), so the result is the same bits
as a whole encoding.

Cached buffers are never written: a refreshed encoding is a copy, so a transfer that still
holds the previous one keeps its bytes.
"""

from __future__ import annotations

import contextlib
import weakref

from rog_ros.core.compress.base import RowCodec
from rog_ros.core.row_updates import few_rows
from rog_ros.core.rows import RowLayout
import torch


class EncodingCache:
    """One vector's last row encoding and the rows of it that still hold."""

    def __init__(self, n_rows: int, valid: torch.Tensor | None = None):
        """
        Keep no encoding yet.

        ``valid``: bool ``[n_rows]`` to keep the held rows in (a row of a matrix shared by many
        caches, which one write can then mark for all); by default the cache's own.
        """
        self.rowbytes: torch.Tensor | None = None
        self.trs: torch.Tensor | None = None
        self.valid = torch.zeros(n_rows, dtype=torch.bool) if valid is None else valid
        self._stamp: tuple = ()
        self.hits = 0                   # encodings served from the cache (some rows afresh)
        self.rows_refreshed = 0         # rows encoded afresh by those

    @staticmethod
    def applies(layout: RowLayout, codec: RowCodec) -> bool:
        """Whether rows of ``codec`` on ``layout`` can be encoded apart (else keep none)."""
        return bool(codec.encodes_rows_alone) and not layout.whole_model

    # ------------------------------------------------------------------ bookkeeping
    @staticmethod
    def _stamp_of(sources) -> tuple:
        return tuple((weakref.ref(t), t._version) for t in sources)

    def _current(self, sources) -> bool:
        return (len(self._stamp) == len(sources)
                and all(ref() is t and version == t._version
                        for (ref, version), t in zip(self._stamp, sources)))

    def clear(self) -> None:
        """Forget the encoding."""
        self.rowbytes = self.trs = None
        self.valid.zero_()
        self._stamp = ()

    def before_write(self, sources) -> None:
        """Drop the cache if its sources changed since it last looked (an unmarked write)."""
        if self.rowbytes is not None and not self._current(sources):
            self.clear()

    def after_write(self, rows: torch.Tensor | None, sources) -> None:
        """Mark ``rows`` (bool mask; None: none) changed by the write since ``before_write``."""
        if self.rowbytes is None:
            return
        if rows is not None:
            self.valid.masked_fill_(rows, False)
        self._stamp = self._stamp_of(sources)

    def store(self, rowbytes: torch.Tensor, trs: torch.Tensor, sources,
              rows: torch.Tensor | None = None) -> None:
        """Keep an encoding of ``sources`` that holds on ``rows`` (ids; None: every row)."""
        self.rowbytes, self.trs = rowbytes, trs
        if rows is None:
            self.valid.fill_(True)
        else:
            self.valid.zero_()
            self.valid[rows] = True
        self._stamp = self._stamp_of(sources)

    # ------------------------------------------------------------------ encoding
    def stale_rows(self, layout: RowLayout, codec: RowCodec, sources,
                   need: torch.Tensor | None) -> torch.Tensor | None:
        """
        Ids of the rows of ``need`` (ascending ids; None: all) to encode afresh, or None.

        None: the cache cannot serve (none kept, a write it was not told of, a codec whose
        rows depend on each other, or too many rows changed): encode as without it.
        """
        if (self.rowbytes is None or not self.applies(layout, codec)
                or not self._current(sources)):
            return None
        stale = ~self.valid
        ids = torch.nonzero(stale).reshape(-1) if need is None else need[stale[need]]
        return ids if few_rows(layout, ids) else None

    def encode(self, layout: RowLayout, codec: RowCodec, p: torch.Tensor,
               rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """
        ``(rowbytes, tensor_row_sums)``: the cached ones with ``rows`` taken afresh from ``p``.

        ``rows`` as ``stale_rows`` returned them; ``p`` must hold the current values on them
        (elsewhere it is not read). The result holds on every row the cache held and ``rows``.
        """
        self.hits += 1
        if rows.numel() == 0:
            return self.rowbytes, self.trs
        self.rows_refreshed += int(rows.numel())
        trs = self.trs.clone()
        trs[rows] = layout.tensor_row_abs_sum_of(p, rows)[rows]
        rowbytes = codec.encode_rows(layout, p, rows, trs, out=self.rowbytes.clone())
        self.rowbytes, self.trs = rowbytes, trs
        self.valid[rows] = True
        return rowbytes, trs


@contextlib.contextmanager
def rows_written(caches, sources, rows_of):
    """
    Mark what a write to ``sources`` changes in each cache of ``caches``.

    ``rows_of(i)``: the rows (bool mask) the write changes for cache ``i``, or None. A write
    that raises leaves the caches' stamps behind, so their next use drops them.
    """
    for cache in caches:
        cache.before_write(sources)
    yield
    for i, cache in enumerate(caches):
        cache.after_write(rows_of(i), sources)
