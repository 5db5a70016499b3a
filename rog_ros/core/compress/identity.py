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
Identity codec: rows travel as raw little-endian floats (no error feedback needed).

Used for equivalence tests (BSP + Identity = synchronous SGD) and for debugging; the element
type follows the engine's dtype so that float64 test runs stay exact.
"""

from __future__ import annotations

from rog_ros.core.compress.base import RowCodec
import torch


class Identity(RowCodec):
    codec_id = 0
    name = 'identity'
    lossy = False

    def __init__(self, dtype: torch.dtype = torch.float32):
        self.dtype = dtype
        self.itemsize = torch.empty(0, dtype=dtype).element_size()

    def row_nbytes(self, layout):
        return layout.row_len * self.itemsize

    def scales(self, layout, p, tensor_row_sums=None, row_mask=None):
        return torch.zeros(layout.n_tensors, dtype=torch.float32)

    def encode(self, layout, p, scales, tensor_row_sums=None):
        # a copy: callers encode from scratch buffers they reuse while the bytes are in flight
        # (the server's downlink p; an alias made the mirror of a worker drift from its model)
        return p.detach().to(self.dtype, copy=True).contiguous().view(torch.uint8)

    def quantize(self, layout, p, scales, out=None, row_mask=None, per_row=False,
                 tensor_row_sums=None):
        out = p.clone() if out is None else out.copy_(p)
        return _masked(layout, out, row_mask)

    def decode(self, layout, rowbytes, scales, out, row_mask=None, factor=1.0, per_row=False):
        out.copy_(rowbytes.view(self.dtype))
        if factor != 1.0:
            out.mul_(factor)
        return _masked(layout, out, row_mask)

    def decode_rows(self, layout, rowbytes, scales, rows, dtype, factor=1.0, per_row=False):
        out = layout.gather_rows(rowbytes.view(self.dtype), rows).to(dtype)
        return out.mul_(factor) if factor != 1.0 else out

    def quantize_rows(self, layout, p, scales, rows, per_row=False, tensor_row_sums=None):
        return layout.gather_rows(p, rows)


def _masked(layout, out: torch.Tensor, row_mask: torch.Tensor | None) -> torch.Tensor:
    """Zero the rows outside ``row_mask`` (whatever they hold, NaN included)."""
    if row_mask is None:
        return out
    if layout.whole_model:
        return out if bool(row_mask[0]) else out.zero_()
    return layout.mask_rows_(out, row_mask)
