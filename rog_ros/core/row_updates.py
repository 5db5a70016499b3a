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
Applying the rows a transfer delivered, in proportion to the rows.

A transfer cut by ATP's deadline delivers a prefix of the rows; a late push or pull (sent
while the robot computes) often a chunk or two. Decoding the whole model to apply them, with
the rows left out decoded to zeros, cost a pass over the model per message: on ConvMLP-M
(16.9 M parameters, 2 loaded cores) decoding and applying 0.7 % of its rows took 61 ms that
way and 5 ms alone, 10 % of them 55 and 14 ms, 30 % 56 and 35 ms, 50 % 61 and 70 ms. Below
``SUBSET_FRACTION`` of the model's elements the rows are decoded and applied alone; above it
the whole-model kernels are cheaper than the gathers. Both paths give the same bits: the
subset path performs the same per-element operations on the delivered rows, and leaves the
others untouched instead of subtracting zero from them.

The sending side uses ``few_rows`` the same way: a late transfer may carry only rows with
something unsent, and when those are few its row sums and bytes are taken on them alone
(``RowLayout.tensor_row_abs_sum_of``, ``RowCodec.encode_rows``), so that a transfer costs in
proportion to the rows it can carry (ConvMLP-M, the difference of two models, its row sums
and its encoding: 58 ms for the whole model, 5 ms for 0.75 % of the rows, 20 ms for 10 %,
64 ms for 30 %; hence one threshold for both sides, a quarter of the parameters).
"""

from __future__ import annotations

from rog_ros.core.compress.base import RowCodec
from rog_ros.core.rows import RowLayout
import torch

SUBSET_FRACTION = 0.25
"""Delivered rows holding less than this fraction of the parameters are applied alone."""


def few_rows(layout: RowLayout, rows: torch.Tensor) -> bool:
    """Whether the rows ``rows`` (ids) are few enough to handle alone (row layouts only)."""
    return (not layout.whole_model
            and layout.rows_numel(rows) < SUBSET_FRACTION * layout.n_params)


def delivered_rows(layout: RowLayout, mask: torch.Tensor) -> torch.Tensor | None:
    """Ascending ids of the delivered rows if few enough to apply alone, else None."""
    if layout.whole_model:
        return None
    rows = torch.nonzero(mask).reshape(-1)
    return rows if few_rows(layout, rows) else None


def decode_delivered(codec: RowCodec, layout: RowLayout, rowbytes: torch.Tensor,
                     scales: torch.Tensor, mask: torch.Tensor, scratch: torch.Tensor,
                     factor: float = 1.0, per_row: bool = False) -> tuple:
    """
    Decode what a transfer delivered (``mask``: bool ``[M]``): ``(rows, values)``.

    ``rows`` None: ``values`` is the whole model, decoded into ``scratch`` with the rows
    outside ``mask`` zero; else ``values`` are the rows ``rows`` only, concatenated.
    """
    rows = delivered_rows(layout, mask)
    if rows is None:
        full = bool(mask.all())
        return None, codec.decode(layout, rowbytes, scales, scratch,
                                  row_mask=None if full else mask, factor=factor,
                                  per_row=per_row)
    return rows, codec.decode_rows(layout, rowbytes, scales, rows, scratch.dtype,
                                   factor=factor, per_row=per_row)


def quantize_delivered(codec: RowCodec, layout: RowLayout, p: torch.Tensor,
                       scales: torch.Tensor, mask: torch.Tensor, scratch: torch.Tensor,
                       per_row: bool = False,
                       tensor_row_sums: torch.Tensor | None = None) -> tuple:
    """C(p) on the delivered rows, as ``decode_delivered`` returns a decoding."""
    rows = delivered_rows(layout, mask)
    if rows is None:
        full = bool(mask.all())
        return None, codec.quantize(layout, p, scales, out=scratch,
                                    row_mask=None if full else mask, per_row=per_row,
                                    tensor_row_sums=tensor_row_sums)
    return rows, codec.quantize_rows(layout, p, scales, rows, per_row=per_row,
                                     tensor_row_sums=tensor_row_sums)


def add_rows_(layout: RowLayout, target: torch.Tensor, rows: torch.Tensor | None,
              values: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """``target += alpha * values`` on ``rows`` (None: the whole model), in place."""
    if rows is None:
        return target.add_(values, alpha=alpha) if alpha != 1.0 else target.add_(values)
    return layout.scatter_rows_(target, rows, values.to(target.dtype), add=True, alpha=alpha)


def sub_rows_(layout: RowLayout, target: torch.Tensor, rows: torch.Tensor | None,
              values: torch.Tensor) -> torch.Tensor:
    """``target -= values`` on ``rows`` (None: the whole model), in place."""
    if rows is None:
        return target.sub_(values)
    return layout.scatter_rows_(target, rows, values.to(target.dtype), add=True, alpha=-1.0)
