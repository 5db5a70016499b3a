# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
"""RowCodec: the interface every row codec implements.

A codec turns a flat vector ``p`` (layout order) into per-tensor ``scales`` and *row-aligned*
bytes: each row occupies ``row_nbytes[i]`` bytes starting at ``row_byte_offset[i]``, rows in id
order, so any set of rows can be cut out and sent without re-encoding. ``quantize`` gives the
values the receiver will decode, which error feedback needs (e = p - C(p)).
"""

import torch

from rog_ros.core.rows import RowLayout


class RowCodec:
    codec_id: int = -1
    name: str = ''
    lossy: bool = True

    def row_nbytes(self, layout: RowLayout) -> torch.Tensor:
        """Encoded bytes of every row, int64 [M]."""
        raise NotImplementedError

    def scales(self, layout: RowLayout, p: torch.Tensor) -> torch.Tensor:
        """Per-tensor scales, float32 [T] in model order (empty if the codec has none)."""
        raise NotImplementedError

    def encode(self, layout: RowLayout, p: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        """Row-aligned encoding of all rows, uint8 flat (rows in id order)."""
        raise NotImplementedError

    def quantize(self, layout: RowLayout, p: torch.Tensor, scales: torch.Tensor,
                 out: torch.Tensor | None = None) -> torch.Tensor:
        """C(p): the values a receiver decodes from ``encode(p)`` (flat, layout order)."""
        raise NotImplementedError

    def decode(self, layout: RowLayout, rowbytes: torch.Tensor, scales: torch.Tensor,
               out: torch.Tensor) -> torch.Tensor:
        """Decode row-aligned bytes of all rows into ``out`` (flat, layout order)."""
        raise NotImplementedError

    def row_byte_offset(self, layout: RowLayout) -> torch.Tensor:
        nb = self.row_nbytes(layout)
        return torch.cumsum(nb, 0) - nb
