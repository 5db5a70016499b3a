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
Scaled sign: the DEFSGDM compressor (1 bit per element, one fp32 scale per block).

C(v)_b = mean|v_b| * sign(v_b) for every block b (Zheng et al., NeurIPS 2019; specs/rog.md 6).
A block is a parameter tensor (whole-model transfers, as in the artifact) or, for row transfers,
the rows of one tensor that one chunk carries (``group_scales``): ATP sends the largest rows
first, and a scale taken over the whole tensor would under-scale the rows that go and pile the
difference into the error-feedback residual. Each row is padded to whole bytes so that any row
set can be cut out of one encoding (ConvMLP-M: 2.13 MB for 16.9 M parameters, ceil(n/8) plus
0.8% row padding).

Bit conventions: bit k of a byte (LSB first) is element k of that byte's group of 8, and a set
bit means *negative* (the IEEE sign bit, so C(v) = copysign(scale, v) exactly, -0.0 included).
Packing is numpy's ``signbit`` and ``packbits`` on the CPU (elsewhere: the byte holding each
sign bit, eight of them viewed as one int64 and multiplied by a constant that gathers their top
bits into one byte); unpacking is a 256-entry lookup table. No float64 or per-element index
temporaries.
"""

from __future__ import annotations

import sys

import numpy as np
from rog_ros.core.compress.base import RowCodec
from rog_ros.core.rows import RowLayout
import torch

_MSB = 0x8080808080808080 - (1 << 64)   # the top bit of every byte, as a signed int64
_MOVE = 0x0002040810204081   # ((w & _MSB) * this) >> 56 == sum_k (top bit of byte k) << k
_LUT = torch.tensor([[-1.0 if (i >> k) & 1 else 1.0 for k in range(8)] for i in range(256)],
                    dtype=torch.float32)


_NUMPY_FLOATS = (torch.float16, torch.float32, torch.float64)


def pack_signbits(x: torch.Tensor) -> torch.Tensor:
    """
    Sign bits of a float ``[n, L]`` matrix as uint8 ``[n, ceil(L/8)]`` (zero padded).

    On the CPU numpy does it (``signbit`` then ``packbits``, which pads each row to whole
    bytes): 3-5x faster than the torch passes below, which remain for other devices and
    dtypes numpy lacks (bfloat16). Same bits either way (tested).
    """
    if x.device.type == 'cpu' and x.dtype in _NUMPY_FLOATS:
        bits = np.signbit(x.detach().numpy())
        return torch.from_numpy(np.packbits(bits, axis=1, bitorder='little'))
    return _pack_signbits_torch(x)


def _pack_signbits_torch(x: torch.Tensor) -> torch.Tensor:
    """
    ``pack_signbits`` in torch alone.

    The sign is the top bit of each element's last byte (little-endian), so the bytes are
    taken as they are, one in every element_size: no comparison pass and no bool temporary
    (``torch.signbit`` took twice as long on ConvMLP-M).
    """
    n, length = x.shape
    nb = (length + 7) // 8
    if sys.byteorder == 'little':
        size = x.element_size()
        top = x.contiguous().view(torch.uint8).view(n, length, size)[:, :, size - 1]
    else:
        top = torch.signbit(x).view(torch.uint8) << 7
    if length % 8:
        padded = torch.zeros(n, nb * 8, dtype=torch.uint8, device=x.device)
        padded[:, :length] = top
        top = padded
    words = top.contiguous().view(n * nb, 8).view(torch.int64).view(n, nb)
    return (((words & _MSB) * _MOVE) >> 56).to(torch.uint8)


def unpack_signs(packed: torch.Tensor, length: int) -> torch.Tensor:
    """uint8 ``[n, nb]`` -> float32 ``[n, length]`` of +1/-1."""
    n, nb = packed.shape
    return _LUT.index_select(0, packed.reshape(-1).to(torch.int32)).view(n, nb * 8)[:, :length]


def unpack_signs_into(packed: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """
    Write the +1/-1 signs of uint8 ``[n, nb]`` into float ``[n, L]`` ``out``, L <= 8*nb.

    When every row is a whole number of bytes the lookup writes straight into ``out``: no
    model-sized temporary, which on a 17 M-parameter model is most of the decoding time.
    """
    n, length = out.shape
    if length % 8 == 0 and out.dtype == _LUT.dtype and out.is_contiguous():
        return torch.index_select(_LUT, 0, packed.reshape(-1).to(torch.int32),
                                  out=out.view(n * (length // 8), 8)).view(n, length)
    return out.copy_(unpack_signs(packed, length))


def unpack_scaled_into(packed: torch.Tensor, scale: torch.Tensor,
                       out: torch.Tensor) -> torch.Tensor:
    """
    Write ``sign * scale`` of uint8 ``[n, nb]`` into float ``[n, L]`` ``out``.

    ``scale`` broadcasts over ``out`` (``[n, 1]``: one per row). Rows of whole bytes are
    unpacked in place and scaled there; other rows are scaled on their way out of the lookup's
    padded result instead of being copied first (one pass fewer). ``+-1 * scale`` either way,
    so the same bits.
    """
    n, length = out.shape
    if length % 8 == 0 and out.dtype == _LUT.dtype and out.is_contiguous():
        return unpack_signs_into(packed, out).mul_(scale)
    return torch.mul(unpack_signs(packed, length), scale, out=out)


def _row_scale(layout: RowLayout, scales: torch.Tensor, dtype: torch.dtype,
               row_mask: torch.Tensor | None, factor: float,
               per_row: bool = False) -> torch.Tensor | None:
    """
    Per-tensor-row scale ``[n_tensor_rows]``, times ``factor``, zero outside ``row_mask``.

    ``scales`` are per tensor, or with ``per_row`` per scheduling row (row layouts only, whose
    rows are the tensor rows). Returns None when the mask selects nothing of a whole-model
    layout (all zeros).
    """
    if per_row:
        if layout.whole_model or scales.numel() != layout.n_rows:
            raise ValueError(f'per-row scales need a row layout and {layout.n_rows} values, '
                             f'got {scales.numel()}')
        row_scale = scales.to(dtype=dtype, copy=True)
    else:
        row_scale = scales.to(dtype)[layout.tensor_row_owner]
    if factor != 1.0:
        row_scale.mul_(factor)
    if row_mask is None:
        return row_scale
    if layout.whole_model:
        return row_scale if bool(row_mask[0]) else None
    # where, not multiply: a missing tensor's scale may be NaN, and NaN * 0 is NaN.
    return torch.where(row_mask, row_scale, torch.zeros((), dtype=dtype))


def _need_rows(layout: RowLayout) -> None:
    if layout.whole_model:
        raise ValueError('row-subset decoding needs a row layout (one row is the whole model)')


def quantize_gathered(layout: RowLayout, p: torch.Tensor, rows: torch.Tensor,
                      row_scale: torch.Tensor) -> torch.Tensor:
    """``copysign(row_scale[row], p[row])`` of the rows ``rows``, concatenated."""
    parts = []
    for g, lo, hi in layout.split_sorted(rows):
        view = p[g.start:g.start + g.n_rows * g.length].view(g.n_rows, g.length)
        gp = view.index_select(0, rows[lo:hi] - g.row_start)
        parts.append(torch.copysign(row_scale[rows[lo:hi]].unsqueeze(1), gp).reshape(-1))
    return torch.cat(parts) if parts else p.new_zeros(0)


class ScaledSign(RowCodec):
    codec_id = 1
    name = 'scaled_sign'
    lossy = True

    def row_nbytes(self, layout: RowLayout) -> torch.Tensor:
        return (layout.row_len + 7) // 8

    def scales(self, layout, p, tensor_row_sums=None, row_mask=None):
        """
        Per-tensor mean |p|, over the rows in ``row_mask`` if given.

        A row-partial transfer scales each tensor by the rows it will carry: rows left out
        (often the largest accumulations, or the smallest) must not set the magnitude of the
        rows that go.
        """
        if tensor_row_sums is None:
            tensor_row_sums = layout.tensor_row_abs_sum(p)
        return layout.tensor_abs_mean(tensor_row_sums, row_mask)

    def group_scales(self, layout, tensor_row_sums, group):
        """
        Mean |p| over the rows of each (group, tensor), as a per-row float32 [M].

        Computed as ``tensor_abs_mean`` computes a tensor's (float64 sums in row order over
        float64 element counts), so a group holding all of a tensor's rows gets exactly the
        per-tensor scale.
        """
        if layout.whole_model:
            raise ValueError('group scales need a row layout')
        key = (group.to(torch.int64) * layout.n_tensors + layout.row_tensor).numpy()
        # bincount adds in row order, in float64, like tensor_abs_mean's index_add_
        sums = np.bincount(key, tensor_row_sums.to(torch.float64).numpy())
        count = np.bincount(key, layout.row_len.numpy().astype(np.float64))
        return torch.from_numpy((sums[key] / count[key]).astype(np.float32))

    def encode(self, layout, p, scales, tensor_row_sums=None):
        return torch.cat([pack_signbits(g).reshape(-1) for g in layout.group_views(p)])

    def quantize(self, layout, p, scales, out=None, row_mask=None, per_row=False,
                 tensor_row_sums=None):
        if out is None:
            out = torch.empty_like(p)
        groups = layout.tensor_groups
        row_scale = _row_scale(layout, scales, p.dtype, row_mask, 1.0, per_row)
        if row_scale is None:
            return out.zero_()
        for gp, go, s in zip(layout.group_views(p, groups), layout.group_views(out, groups),
                             layout.expand_rows(row_scale, groups)):
            torch.copysign(s, gp, out=go)
        return out

    def decode(self, layout, rowbytes, scales, out, row_mask=None, factor=1.0, per_row=False):
        groups = layout.tensor_groups
        row_scale = _row_scale(layout, scales, out.dtype, row_mask, factor, per_row)
        if row_scale is None:
            return out.zero_()
        if layout.whole_model:
            n = layout.n_params
            whole = n // 8 * 8
            unpack_signs_into(rowbytes[:whole // 8].view(1, -1), out[:whole].view(1, whole))
            if whole < n:
                unpack_signs_into(rowbytes[whole // 8:whole // 8 + 1].view(1, 1),
                                  out[whole:].view(1, n - whole))
            for go, s in zip(layout.group_views(out, groups),
                             layout.expand_rows(row_scale, groups)):
                go.mul_(s)
            return out
        pos = 0
        for g, go, s in zip(groups, layout.group_views(out, groups),
                            layout.expand_rows(row_scale, groups)):
            nb = (g.length + 7) // 8
            unpack_scaled_into(rowbytes[pos:pos + g.n_rows * nb].view(g.n_rows, nb), s, go)
            pos += g.n_rows * nb
        return out

    def decode_rows(self, layout, rowbytes, scales, rows, dtype, factor=1.0, per_row=False):
        _need_rows(layout)
        row_scale = _row_scale(layout, scales, dtype, None, factor, per_row)
        widths = [(g.length + 7) // 8 for g in layout.groups]
        parts = []
        for g, lo, hi, block in layout.row_byte_blocks(rowbytes, widths, rows):
            vals = torch.empty(hi - lo, g.length, dtype=dtype)
            unpack_scaled_into(block, row_scale[rows[lo:hi]].unsqueeze(1), vals)
            parts.append(vals.reshape(-1))
        return torch.cat(parts) if parts else torch.zeros(0, dtype=dtype)

    def quantize_rows(self, layout, p, scales, rows, per_row=False, tensor_row_sums=None):
        _need_rows(layout)
        row_scale = _row_scale(layout, scales, p.dtype, None, 1.0, per_row)
        return quantize_gathered(layout, p, rows, row_scale)

    # ------------------------------------------------------------ single-tensor convenience
    @staticmethod
    def pack_tensor(x: torch.Tensor) -> bytes:
        """One block: 4-byte fp32 scale + ceil(n/8) sign bytes (the classic DEFSGDM message)."""
        flat = x.detach().reshape(1, -1).to(torch.float32)
        scale = torch.linalg.vector_norm(flat, 1) / flat.numel()
        head = scale.reshape(1).to(torch.float32).view(torch.uint8)
        return bytes(torch.cat([head, pack_signbits(flat).reshape(-1)]).numpy())

    @staticmethod
    def unpack_tensor(data: bytes, n: int) -> torch.Tensor:
        """Inverse of ``pack_tensor`` for a block of ``n`` values."""
        buf = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        if buf.numel() != 4 + (n + 7) // 8:
            raise ValueError(f'scaled-sign block of {buf.numel()} bytes does not hold {n} values')
        scale = float(buf[:4].view(torch.float32))
        return unpack_signs(buf[4:].view(1, -1), n).reshape(-1) * scale
