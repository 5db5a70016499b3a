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
RowLayout: how a model's parameter tensors are cut into rows, and vectorised row access.

Rule (DESIGN section 4, specs/rog.md 2.2): every slice along dim 0 of a tensor with >= 2
dims is a row; a 1-D tensor is one row; optionally any tensor with fewer than
``small_tensor_threshold`` elements is one row (the artifact uses 1000, which gives ConvMLP-M
its published 33,307 rows; the pure rule gives 33,338).

Why a custom flat order: all per-row work (magnitudes, masks, gathers, scatters) must be a
handful of tensor operations, never a Python loop over rows. The flat vector is therefore
ordered by *row length*: all rows of one length are contiguous, so each such group is a dense
``[rows, length]`` matrix and a per-row operation over the whole model is one kernel per group
(ConvMLP-M: 33,307 rows, 15 groups). Tensors stay contiguous, so every parameter is a plain
view into the flat vector (``views``, ``bind``).

SSP/BSP synchronise the whole model as one row (``whole_model=True``). They use the same flat
order and the same *tensor rows* for the codec's reductions, so both granularities compute
bit-identical scales and updates; only the scheduling unit differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

LONG_ROW = 16384
"""Rows at least this long are reduced in blocks of ``ROW_BLOCK`` elements whose sums are then
added in order: torch splits one long reduction across threads differently depending on the
surrounding matrix, which would make the sums depend on the layout. (They were reduced one
row at a time before: a Python call per row, e.g. 4,096 per pass for VGG's first classifier
layer.)"""

ROW_BLOCK = 8192


def _long_rows_abs_sum(rows: torch.Tensor) -> torch.Tensor:
    """Sum of |x| of each row of ``[n, L]`` ``rows``, L >= LONG_ROW: blocks, then in order."""
    n, length = rows.shape
    whole = length // ROW_BLOCK * ROW_BLOCK
    blocks = torch.linalg.vector_norm(rows[:, :whole].view(n, whole // ROW_BLOCK, ROW_BLOCK),
                                      1, dim=2)
    total = blocks[:, 0].clone()
    for k in range(1, blocks.shape[1]):        # (a few blocks per row: L / 8192)
        total += blocks[:, k]
    if whole < length:
        total += torch.linalg.vector_norm(rows[:, whole:], 1, dim=1)
    return total


@dataclass(frozen=True)
class RowGroup:
    """Rows of one length: ``flat[start:start + n_rows*length]`` viewed as [n_rows, length]."""

    length: int          # elements per row
    row_start: int       # first row id of the group
    n_rows: int          # number of rows
    start: int           # first flat element


class RowLayout:
    """
    Rows of a list of tensor shapes; row ids and flat offsets in length-grouped order.

    Parameters
    ----------
    shapes : sequence of tuples
        Parameter shapes in the model's own order (``[p.shape for p in model.parameters()]``).
    small_tensor_threshold : int, default 0
        Tensors with fewer elements than this form one row (0 disables; artifact: 1000).
    whole_model : bool, default False
        One scheduling row for the whole model (SSP/BSP granularity).

    """

    def __init__(self, shapes: Sequence[Sequence[int]], small_tensor_threshold: int = 0,
                 whole_model: bool = False):
        if not shapes:
            raise ValueError('RowLayout needs at least one tensor shape')
        self.shapes = [tuple(int(d) for d in s) for s in shapes]
        self.small_tensor_threshold = int(small_tensor_threshold)
        self.whole_model = bool(whole_model)
        numel = np.asarray([int(np.prod(s)) if len(s) else 1 for s in self.shapes], np.int64)
        if numel.min() <= 0:
            raise ValueError('RowLayout: empty tensor shape in %r' % (self.shapes,))
        split = np.asarray([len(s) >= 2 and n >= self.small_tensor_threshold
                            for s, n in zip(self.shapes, numel)])
        rows = np.where(split, [s[0] if len(s) >= 2 else 1 for s in self.shapes], 1)
        self.n_tensors = len(self.shapes)
        self.tensor_numel = numel
        self.tensor_rows = rows.astype(np.int64)
        self.tensor_row_len = numel // self.tensor_rows
        # Flat order: by row length, then model order (stable).
        self.tensor_order = np.argsort(self.tensor_row_len, kind='stable')
        counts_sorted = self.tensor_rows[self.tensor_order]
        numel_sorted = numel[self.tensor_order]
        self.tensor_start = np.zeros(self.n_tensors, np.int64)
        self.tensor_start[self.tensor_order] = np.cumsum(numel_sorted) - numel_sorted
        self.n_params = int(numel.sum())
        # Tensor rows ("canonical rows"), grouped by length: what the codec reduces over.
        lengths_sorted = self.tensor_row_len[self.tensor_order]
        self.tensor_groups: list[RowGroup] = []
        rpos = pos = 0
        for length, count in zip(lengths_sorted.tolist(), counts_sorted.tolist()):
            g = self.tensor_groups[-1] if self.tensor_groups else None
            if g is not None and g.length == length:
                self.tensor_groups[-1] = RowGroup(length, g.row_start, g.n_rows + count,
                                                  g.start)
            else:
                self.tensor_groups.append(RowGroup(length, rpos, count, pos))
            rpos += count
            pos += count * length
        self.n_tensor_rows = rpos
        self.tensor_row_owner = torch.from_numpy(np.repeat(self.tensor_order, counts_sorted))
        # Scheduling rows.
        if self.whole_model:
            self.groups = [RowGroup(self.n_params, 0, 1, 0)]
            self.row_tensor = torch.full((1,), -1, dtype=torch.int64)
        else:
            self.groups = self.tensor_groups
            self.row_tensor = self.tensor_row_owner
        self.n_rows = sum(g.n_rows for g in self.groups)
        self.row_len = torch.from_numpy(np.repeat([g.length for g in self.groups],
                                                  [g.n_rows for g in self.groups]))
        self.row_start = torch.cumsum(self.row_len, 0) - self.row_len
        self.group_row_bounds = np.asarray(
            [g.row_start for g in self.groups] + [self.n_rows], dtype=np.int64)

    # ----------------------------------------------------------------- flat <-> tensors
    def flatten(self, tensors: Sequence[torch.Tensor], out: torch.Tensor | None = None
                ) -> torch.Tensor:
        """Concatenate tensors (model order) into one flat vector in layout order (one copy)."""
        if len(tensors) != self.n_tensors:
            raise ValueError(f'expected {self.n_tensors} tensors, got {len(tensors)}')
        parts = [tensors[t].reshape(-1) for t in self.tensor_order]
        if out is None:
            return torch.cat(parts)
        return torch.cat(parts, out=out)

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Return views of ``flat`` with the original shapes, in model order (no copy)."""
        self._check_flat(flat)
        return [flat[s:s + n].view(shape) for s, n, shape in
                zip(self.tensor_start.tolist(), self.tensor_numel.tolist(), self.shapes)]

    def group_views(self, flat: torch.Tensor, groups=None) -> list[torch.Tensor]:
        """``[n_rows, length]`` matrix views of ``flat``, one per row-length group."""
        self._check_flat(flat)
        return [flat[g.start:g.start + g.n_rows * g.length].view(g.n_rows, g.length)
                for g in (groups if groups is not None else self.groups)]

    def bind(self, module: torch.nn.Module, flat: torch.Tensor) -> None:
        """Make ``module``'s parameters views of ``flat``: updates to ``flat`` are the model."""
        params = list(module.parameters())
        if [tuple(p.shape) for p in params] != self.shapes:
            raise ValueError('module parameters do not match this RowLayout')
        with torch.no_grad():
            flat.copy_(self.flatten([p.detach() for p in params]))
        for p, v in zip(params, self.views(flat)):
            p.data = v

    # ----------------------------------------------------------------- per-row reductions
    def tensor_row_abs_sum(self, flat: torch.Tensor) -> torch.Tensor:
        """
        Sum of |x| over every tensor row (dim-0 slice), shape [n_tensor_rows].

        Identical bits whichever granularity holds the data (see LONG_ROW).
        """
        out = []
        for g in self.group_views(flat, self.tensor_groups):
            if g.shape[1] < LONG_ROW:
                out.append(torch.linalg.vector_norm(g, 1, dim=1))
            else:
                out.append(_long_rows_abs_sum(g))
        return torch.cat(out)

    def tensor_row_abs_sum_of(self, flat: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """
        ``tensor_row_abs_sum(flat)`` on the rows ``rows`` (ascending ids), zero elsewhere.

        Row layouts only (their rows are the tensor rows). Same bits as the whole pass: a
        row's sum does not depend on the rows reduced beside it.
        """
        if self.whole_model:
            raise ValueError('row sums of a row subset need a row layout')
        out = torch.zeros(self.n_tensor_rows, dtype=flat.dtype)
        for g, lo, hi in self.split_sorted(rows):
            view = flat[g.start:g.start + g.n_rows * g.length].view(g.n_rows, g.length)
            sub = view.index_select(0, rows[lo:hi] - g.row_start)
            out[rows[lo:hi]] = (torch.linalg.vector_norm(sub, 1, dim=1) if g.length < LONG_ROW
                                else _long_rows_abs_sum(sub))
        return out

    def row_abs_sum(self, flat: torch.Tensor, tensor_row_sums: torch.Tensor | None = None
                    ) -> torch.Tensor:
        """Sum of |x| over each scheduling row, shape [M]."""
        sums = self.tensor_row_abs_sum(flat) if tensor_row_sums is None else tensor_row_sums
        return sums.sum().reshape(1) if self.whole_model else sums

    def tensor_abs_mean(self, tensor_row_sums: torch.Tensor,
                        row_mask: torch.Tensor | None = None) -> torch.Tensor:
        """
        Per-tensor mean |x| (model order, float32) from ``tensor_row_abs_sum``.

        With ``row_mask`` (per-row layouts only) the mean is taken over the masked rows of
        each tensor, e.g. the rows a transfer is expected to carry; a tensor with no masked
        row keeps its whole-tensor mean.
        """
        sums = torch.zeros(self.n_tensors, dtype=torch.float64)
        sums.index_add_(0, self.tensor_row_owner, tensor_row_sums.to(torch.float64))
        mean = sums / torch.from_numpy(self.tensor_numel)
        if row_mask is not None and not self.whole_model and not bool(row_mask.all()):
            m = row_mask.to(torch.float64)
            part = torch.zeros(self.n_tensors, dtype=torch.float64).index_add_(
                0, self.tensor_row_owner, tensor_row_sums.to(torch.float64) * m)
            count = torch.zeros(self.n_tensors, dtype=torch.float64).index_add_(
                0, self.tensor_row_owner, self.row_len.to(torch.float64) * m)
            mean = torch.where(count > 0, part / count.clamp(min=1.0), mean)
        return mean.to(torch.float32)

    def expand_rows(self, per_row: torch.Tensor, groups=None) -> list[torch.Tensor]:
        """Per-group ``[n_rows, 1]`` views of a per-row tensor, for broadcasting over rows."""
        return [per_row[g.row_start:g.row_start + g.n_rows].unsqueeze(1)
                for g in (groups if groups is not None else self.groups)]

    # ----------------------------------------------------------------- row-set operations
    def where_rows(self, row_mask: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                   out: torch.Tensor) -> torch.Tensor:
        """``out[row] = a[row] if row_mask[row] else b[row]`` for flat vectors (in place ok)."""
        for m, ga, gb, go in zip(self.expand_rows(row_mask), self.group_views(a),
                                 self.group_views(b), self.group_views(out)):
            torch.where(m, ga, gb, out=go)
        return out

    def mask_rows_(self, flat: torch.Tensor, row_mask: torch.Tensor) -> torch.Tensor:
        """
        Zero every row of ``flat`` whose mask is False (in place).

        Filled, not multiplied by the mask: a row left out holds whatever its incomplete
        transfer put there, and NaN times 0 is NaN (one NaN fragment of a row that never
        completed made the server's model NaN).
        """
        for m, g in zip(self.expand_rows(row_mask), self.group_views(flat)):
            g.masked_fill_(~m, 0.0)
        return flat

    def gather_rows(self, flat: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Elements of the given rows (ascending ids), concatenated; one op per group touched."""
        parts = []
        for g, lo, hi in self.split_sorted(rows):
            view = flat[g.start:g.start + g.n_rows * g.length].view(g.n_rows, g.length)
            parts.append(view.index_select(0, rows[lo:hi] - g.row_start).reshape(-1))
        return torch.cat(parts) if parts else flat.new_zeros(0)

    def scatter_rows_(self, flat: torch.Tensor, rows: torch.Tensor, values: torch.Tensor,
                      add: bool = False, alpha: float = 1.0) -> torch.Tensor:
        """
        Write (or add, times ``alpha``) concatenated row values to ``flat`` at ascending ids.

        ``add`` with ``alpha=-1`` subtracts, to the bit as ``flat -= q`` does on those rows
        (``a + (-b)`` is ``a - b`` in IEEE arithmetic).
        """
        pos = 0
        for g, lo, hi in self.split_sorted(rows):
            local = rows[lo:hi] - g.row_start
            n = (hi - lo) * g.length
            view = flat[g.start:g.start + g.n_rows * g.length].view(g.n_rows, g.length)
            src = values[pos:pos + n].view(hi - lo, g.length)
            if add:
                view.index_add_(0, local, src, alpha=alpha)
            else:
                view.index_copy_(0, local, src)
            pos += n
        if pos != values.numel():
            raise ValueError(f'scatter_rows_: {values.numel()} values for {pos} row elements')
        return flat

    def rows_numel(self, rows: torch.Tensor) -> int:
        """Count the elements of the rows ``rows`` (ids)."""
        return int(self.row_len[rows].sum()) if rows.numel() else 0

    def row_byte_blocks(self, rowbytes: torch.Tensor, widths, rows: torch.Tensor):
        """
        Yield ``(group, lo, hi, block)``: the bytes of ``rows[lo:hi]`` as ``[hi - lo, width]``.

        ``rowbytes`` is a row-aligned encoding of every row (rows in id order, each row of a
        group ``widths[k]`` bytes); ``rows`` ascending ids. One gather per group touched.
        """
        starts = np.cumsum([0] + [g.n_rows * int(w) for g, w in zip(self.groups, widths)])
        if int(starts[-1]) != rowbytes.numel():
            raise ValueError(f'{rowbytes.numel()} encoded bytes for rows of {int(starts[-1])}')
        for k, g, lo, hi in self.split_sorted(rows, with_index=True):
            width = int(widths[k])
            whole = rowbytes[int(starts[k]):int(starts[k + 1])].view(g.n_rows, width)
            yield g, lo, hi, whole.index_select(0, rows[lo:hi] - g.row_start)

    def split_sorted(self, rows: torch.Tensor, with_index: bool = False):
        """
        Yield (group, lo, hi): ``rows[lo:hi]`` are the ascending ids inside that group.

        ``with_index``: (k, group, lo, hi), k the group's index in ``groups``.
        """
        bounds = np.searchsorted(rows.numpy(), self.group_row_bounds, side='left')
        for k, g in enumerate(self.groups):
            lo, hi = int(bounds[k]), int(bounds[k + 1])
            if hi > lo:
                yield (k, g, lo, hi) if with_index else (g, lo, hi)

    def _check_flat(self, flat: torch.Tensor) -> None:
        if flat.dim() != 1 or flat.numel() != self.n_params:
            raise ValueError(f'expected a flat vector of {self.n_params} elements, '
                             f'got shape {tuple(flat.shape)}')

    def __repr__(self) -> str:
        return (f'RowLayout({self.n_tensors} tensors, {self.n_rows} rows, {self.n_params} '
                f'params, {len(self.groups)} row-length groups'
                f'{", whole model" if self.whole_model else ""})')
