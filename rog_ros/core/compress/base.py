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
RowCodec: the interface every row codec implements.

A codec turns a flat vector ``p`` (layout order) into per-tensor ``scales`` and *row-aligned*
bytes: each row occupies ``row_nbytes[i]`` bytes starting at ``row_byte_offset[i]``, rows in id
order, so any set of rows can be cut out and sent without re-encoding. ``quantize`` gives the
values the receiver will decode, which error feedback needs (e = p - C(p)).
"""

from __future__ import annotations

from rog_ros.core.rows import RowLayout
import torch


class RowCodec:
    codec_id: int = -1
    name: str = ''
    lossy: bool = True
    encodes_rows_alone: bool = False
    """Whether ``encode_rows`` encodes a row from that row alone (no per-tensor scale)."""

    def row_nbytes(self, layout: RowLayout) -> torch.Tensor:
        """Return the encoded bytes of every row, int64 [M]."""
        raise NotImplementedError

    def scales(self, layout: RowLayout, p: torch.Tensor, tensor_row_sums=None,
               row_mask=None) -> torch.Tensor:
        """Per-tensor scales, float32 [T] in model order (empty if the codec has none)."""
        raise NotImplementedError

    def group_scales(self, layout: RowLayout, tensor_row_sums: torch.Tensor,
                     group: torch.Tensor) -> torch.Tensor | None:
        """
        Per-row scales, float32 [M], one per (group, tensor): e.g. one per chunk and tensor.

        ``group`` (int64 [M]) says which transfer unit carries each row. None if the codec has
        no scales (then the per-tensor ``scales`` travel).
        """
        return None

    def encode(self, layout: RowLayout, p: torch.Tensor, scales: torch.Tensor,
               tensor_row_sums: torch.Tensor | None = None) -> torch.Tensor:
        """
        Row-aligned encoding of all rows, uint8 flat (rows in id order).

        ``tensor_row_sums``: ``layout.tensor_row_abs_sum(p)`` if the caller has it already
        (a codec that needs it then skips a pass over the model).
        """
        raise NotImplementedError

    def quantize(self, layout: RowLayout, p: torch.Tensor, scales: torch.Tensor,
                 out: torch.Tensor | None = None, row_mask: torch.Tensor | None = None,
                 per_row: bool = False, tensor_row_sums: torch.Tensor | None = None
                 ) -> torch.Tensor:
        """
        C(p): the values a receiver decodes from ``encode(p)`` (flat, layout order).

        ``scales`` are per tensor [T], or per row [M] with ``per_row`` (``group_scales``).
        ``tensor_row_sums``: as for ``encode`` (a codec that needs them skips a pass).

        With ``row_mask`` (bool [M]) rows outside the mask come out as zeros, at no extra
        cost: the mask is folded into the per-row scale, so committing a row subset costs the
        same as committing the whole model.
        """
        raise NotImplementedError

    def decode(self, layout: RowLayout, rowbytes: torch.Tensor, scales: torch.Tensor,
               out: torch.Tensor, row_mask: torch.Tensor | None = None,
               factor: float = 1.0, per_row: bool = False) -> torch.Tensor:
        """
        Decode row-aligned bytes of all rows into ``out``, times ``factor``.

        ``scales`` are per tensor [T], or per row [M] with ``per_row``.

        Rows outside ``row_mask`` (e.g. not delivered) decode to zeros whatever their bytes.
        """
        raise NotImplementedError

    def encode_rows(self, layout: RowLayout, p: torch.Tensor, rows: torch.Tensor,
                    tensor_row_sums: torch.Tensor,
                    out: torch.Tensor | None = None) -> torch.Tensor:
        """
        Encode the rows ``rows`` only, into a row-aligned buffer of every row.

        The other rows' bytes are zeros, or with ``out`` (such a buffer, written in place and
        returned) what it held: a transfer that may carry only ``rows`` (a late transfer's
        candidates) cuts its chunks from these bytes; an ``EncodingCache`` refreshes the
        changed rows of an earlier encoding. ``tensor_row_sums`` need to be right on
        ``rows`` only (``layout.tensor_row_abs_sum_of``). Only for codecs with
        ``encodes_rows_alone``: bytes of ``rows`` equal to ``encode``'s.
        """
        raise NotImplementedError

    def decode_rows(self, layout: RowLayout, rowbytes: torch.Tensor, scales: torch.Tensor,
                    rows: torch.Tensor, dtype: torch.dtype, factor: float = 1.0,
                    per_row: bool = False) -> torch.Tensor:
        """
        Decode the rows ``rows`` only: the values ``decode`` gives them, concatenated.

        ``rows``: ascending row ids of a row layout (``layout.gather_rows`` order). A late
        transfer carries a chunk or two of a model of tens of thousands of rows; decoding
        the whole model to apply them cost a pass over it per message. Bit-identical to
        ``decode`` on those rows (the same per-element operations).
        """
        raise NotImplementedError

    def quantize_rows(self, layout: RowLayout, p: torch.Tensor, scales: torch.Tensor,
                      rows: torch.Tensor, per_row: bool = False,
                      tensor_row_sums: torch.Tensor | None = None) -> torch.Tensor:
        """
        Quantize the rows ``rows`` only: ``quantize(p)`` there, concatenated.

        ``tensor_row_sums``: ``layout.tensor_row_abs_sum(p)`` if the caller has it (the
        row-scaled codec needs it and otherwise takes a pass over the model for it).
        """
        raise NotImplementedError

    def row_byte_offset(self, layout: RowLayout) -> torch.Tensor:
        nb = self.row_nbytes(layout)
        return torch.cumsum(nb, 0) - nb
