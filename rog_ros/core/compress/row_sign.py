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
Row-scaled sign: DEFSGDM's 1-bit compressor with one fp32 scale per tensor row (dim-0 slice).

dist-EF-blockSGDM (specs/rog.md 6.3) sends ``mean|v_b| * sign(v_b)`` per block ``b``; the
artifact's block is a whole tensor (``ScaledSign``). Here the block is a *tensor row*, the
unit Rog schedules: with one scale per tensor, every element of a tensor moves by the same
magnitude each step, so the rows whose gradient is small (the classes a robot does not see, the
channels a batch barely touches) are pushed as hard as the large ones and error feedback undoes
it over later steps. Measured on EACOL (synchronous, 4 workers, 80 iterations, seed 0), the
per-tensor block reaches the target after ~45 iterations with a 10-point dip on the way, the
per-row block after ~20, as uncompressed SGD does (docs/scheduling.md).

Each tensor row is encoded as its fp32 scale (little-endian) followed by its sign bits, so the
scale travels inside the row's own bytes: any row set can still be cut out of one encoding,
ATP's byte accounting includes the scales, and whole-model layouts (BSP, SSP, FLOWN) get the
same per-row blocks inside their single scheduling row. Cost: 4 bytes per tensor row (ConvMLP-M
+6.5%, the MPCOL policy +3.2%). The chunk's per-tensor ``scales`` are 1.0 (a factor on top of
the embedded ones), so the message layout is unchanged; only the codec id differs.
"""

from __future__ import annotations

import functools

import numpy as np
from rog_ros.core.compress.base import RowCodec
from rog_ros.core.compress.scaled_sign import (_need_rows, _row_scale, pack_signbits,
                                               quantize_gathered, unpack_scaled_into)
from rog_ros.core.rows import RowLayout
import torch

SCALE_BYTES = 4


def _tensor_row_lengths(layout: RowLayout) -> np.ndarray:
    return np.repeat([g.length for g in layout.tensor_groups],
                     [g.n_rows for g in layout.tensor_groups]).astype(np.int64)


def tensor_row_means(layout: RowLayout, p: torch.Tensor, tensor_row_sums=None) -> torch.Tensor:
    """Return mean |p| of every tensor row, float32 [n_tensor_rows] (the embedded scales)."""
    sums = (layout.tensor_row_abs_sum(p) if tensor_row_sums is None
            else tensor_row_sums).to(torch.float64)
    return (sums / torch.from_numpy(_tensor_row_lengths(layout))).to(torch.float32)


@functools.lru_cache(maxsize=16)
def _scale_byte_index(geometry: tuple) -> torch.Tensor:
    """
    Offsets of every tensor row's 4 scale bytes in a whole encoding, int64 [4 x rows].

    ``geometry``: (row length, rows) of each tensor group. One gather then reads every
    scale (it was a slice, a copy and a view per group, on every decode).
    """
    lengths = np.repeat([length for length, _ in geometry], [n for _, n in geometry])
    widths = SCALE_BYTES + (lengths.astype(np.int64) + 7) // 8
    starts = np.cumsum(widths) - widths
    return torch.from_numpy((starts[:, None] + np.arange(SCALE_BYTES)).reshape(-1))


class RowScaledSign(RowCodec):
    codec_id = 2
    name = 'row_sign'
    lossy = True
    encodes_rows_alone = True

    def row_nbytes(self, layout: RowLayout) -> torch.Tensor:
        per = torch.from_numpy(SCALE_BYTES + (_tensor_row_lengths(layout) + 7) // 8)
        return per.sum().reshape(1) if layout.whole_model else per

    def scales(self, layout, p, tensor_row_sums=None, row_mask=None):
        """All 1.0: the magnitudes travel inside the rows (see the module docstring)."""
        return torch.ones(layout.n_tensors, dtype=torch.float32)

    def encode(self, layout, p, scales, tensor_row_sums=None):
        means = tensor_row_means(layout, p, tensor_row_sums)
        parts = []
        for g, view in zip(layout.tensor_groups, layout.group_views(p, layout.tensor_groups)):
            head = means[g.row_start:g.row_start + g.n_rows].contiguous().view(torch.uint8)
            parts.append(torch.cat([head.view(g.n_rows, SCALE_BYTES), pack_signbits(view)],
                                   dim=1).reshape(-1))
        return torch.cat(parts)

    def encode_rows(self, layout, p, rows, tensor_row_sums, out=None):
        _need_rows(layout)
        means = tensor_row_means(layout, p, tensor_row_sums)
        widths = [SCALE_BYTES + (g.length + 7) // 8 for g in layout.groups]
        starts = np.cumsum([0] + [g.n_rows * w for g, w in zip(layout.groups, widths)])
        if out is None:
            out = torch.zeros(int(starts[-1]), dtype=torch.uint8)
        elif out.dtype != torch.uint8 or out.shape != (int(starts[-1]),):
            raise ValueError(f'out must be uint8 [{int(starts[-1])}], got {out.dtype} '
                             f'{tuple(out.shape)}')
        for k, g, lo, hi in layout.split_sorted(rows, with_index=True):
            local = rows[lo:hi] - g.row_start
            view = p[g.start:g.start + g.n_rows * g.length].view(g.n_rows, g.length)
            head = means[rows[lo:hi]].contiguous().view(torch.uint8).view(hi - lo, SCALE_BYTES)
            block = torch.cat([head, pack_signbits(view.index_select(0, local))], dim=1)
            out[int(starts[k]):int(starts[k + 1])].view(g.n_rows, widths[k]).index_copy_(
                0, local, block)
        return out

    def _scales_of(self, layout, external: torch.Tensor, embedded: torch.Tensor):
        # external is 0 outside the row mask; those rows' bytes may be anything (NaN included)
        zero = torch.zeros((), dtype=external.dtype)
        return torch.where(external != 0, external * embedded, zero)

    def quantize(self, layout, p, scales, out=None, row_mask=None, per_row=False,
                 tensor_row_sums=None):
        if out is None:
            out = torch.empty_like(p)
        ext = _row_scale(layout, scales, p.dtype, row_mask, 1.0, per_row)
        if ext is None:
            return out.zero_()
        s = self._scales_of(layout, ext, tensor_row_means(layout, p, tensor_row_sums).to(p.dtype))
        groups = layout.tensor_groups
        for gp, go, sg in zip(layout.group_views(p, groups), layout.group_views(out, groups),
                              layout.expand_rows(s, groups)):
            torch.copysign(sg, gp, out=go)
        return out

    def quantize_rows(self, layout, p, scales, rows, per_row=False, tensor_row_sums=None):
        _need_rows(layout)
        ext = _row_scale(layout, scales, p.dtype, None, 1.0, per_row)
        s = self._scales_of(layout, ext, tensor_row_means(layout, p, tensor_row_sums).to(p.dtype))
        return quantize_gathered(layout, p, rows, s)

    def decode_rows(self, layout, rowbytes, scales, rows, dtype, factor=1.0, per_row=False):
        _need_rows(layout)
        ext = _row_scale(layout, scales, dtype, None, factor, per_row)
        widths = [SCALE_BYTES + (g.length + 7) // 8 for g in layout.groups]
        parts = []
        for g, lo, hi, block in layout.row_byte_blocks(rowbytes, widths, rows):
            embedded = block[:, :SCALE_BYTES].reshape(-1).clone().view(torch.float32)
            s = self._scales_of(layout, ext[rows[lo:hi]], embedded.to(dtype))
            vals = torch.empty(hi - lo, g.length, dtype=dtype)
            unpack_scaled_into(block[:, SCALE_BYTES:].contiguous(), s.unsqueeze(1), vals)
            parts.append(vals.reshape(-1))
        return torch.cat(parts) if parts else torch.zeros(0, dtype=dtype)

    def embedded_scales(self, layout, rowbytes: torch.Tensor) -> torch.Tensor:
        """Return the fp32 scale of every tensor row, read from row-aligned bytes of all rows."""
        geometry = tuple((g.length, g.n_rows) for g in layout.tensor_groups)
        return rowbytes.index_select(0, _scale_byte_index(geometry)).view(torch.float32)

    def bad_rows(self, layout, rowbytes: torch.Tensor) -> torch.Tensor:
        """Scheduling rows whose embedded scale is not finite or negative, bool [M]."""
        s = self.embedded_scales(layout, rowbytes)
        bad = ~torch.isfinite(s) | (s < 0)
        return bad.any().reshape(1) if layout.whole_model else bad

    def chunk_rows_ok(self, layout, rows: np.ndarray, payload: np.ndarray,
                      row_nbytes: np.ndarray) -> bool:
        """Whether every embedded scale of a whole-row payload is finite and >= 0."""
        if layout.whole_model:
            return not bool(self.bad_rows(layout, torch.from_numpy(payload.copy())).any())
        nb = row_nbytes[rows]
        starts = np.cumsum(nb) - nb             # row layouts: one tensor row per row
        idx = starts[:, None] + np.arange(SCALE_BYTES)
        s = np.ascontiguousarray(payload[idx]).view('<f4').reshape(-1)
        return bool(np.all(np.isfinite(s)) and np.all(s >= 0))

    def decode(self, layout, rowbytes, scales, out, row_mask=None, factor=1.0, per_row=False):
        ext = _row_scale(layout, scales, out.dtype, row_mask, factor, per_row)
        if ext is None:
            return out.zero_()
        s = self._scales_of(layout, ext, self.embedded_scales(layout, rowbytes).to(out.dtype))
        pos = 0
        groups = layout.tensor_groups
        for g, go, sg in zip(groups, layout.group_views(out, groups),
                             layout.expand_rows(s, groups)):
            nb = (g.length + 7) // 8
            block = rowbytes[pos:pos + g.n_rows * (SCALE_BYTES + nb)].view(
                g.n_rows, SCALE_BYTES + nb)
            unpack_scaled_into(block[:, SCALE_BYTES:].contiguous(), sg, go)
            pos += g.n_rows * (SCALE_BYTES + nb)
        return out
