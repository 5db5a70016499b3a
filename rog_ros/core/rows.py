# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
"""RowLayout: how a model's parameter tensors are cut into rows, and vectorised row access.

Rule (DESIGN section 4, specs/rog.md 2.2): every slice along dim 0 of a tensor with >= 2
dims is a row; a 1-D tensor is one row; optionally any tensor with fewer than
``small_tensor_threshold`` elements is one row (the artifact uses 1000).

Why a custom flat order: all per-row work (magnitudes, masks, gathers, scatters) must be a
handful of tensor operations, never a Python loop over rows. The layout therefore orders the
flat vector by *row length group*: all rows of the same length are contiguous, so each group is
a dense ``[rows, length]`` matrix and a per-row operation over the whole model is one kernel per
group (ConvMLP-M: 33,307 rows but only a few dozen groups). Tensors stay contiguous inside
their group, so each parameter is a plain view into the flat vector (``views``).
"""

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch


@dataclass(frozen=True)
class RowGroup:
    """Rows that share one length: flat[start:start + n_rows*length] viewed as [n_rows, length]."""

    length: int          # elements per row
    row_start: int       # first row id of the group
    n_rows: int          # number of rows
    start: int           # first flat element


class RowLayout:
    """Rows of a list of tensor shapes; row ids and flat offsets in length-grouped order.

    Parameters
    ----------
    shapes : sequence of tuples
        Parameter shapes in the model's own order (``[p.shape for p in model.parameters()]``).
    small_tensor_threshold : int, default 0
        Tensors with fewer elements than this form one row (0 disables; artifact: 1000).
    whole_model : bool, default False
        One row for the whole model (SSP/BSP granularity). Tensors keep their identity (the
        codec's scale blocks are always the model's tensors), only the scheduling unit changes.
    """

    def __init__(self, shapes: Sequence[Sequence[int]], small_tensor_threshold: int = 0,
                 whole_model: bool = False):
        if not shapes:
            raise ValueError('RowLayout needs at least one tensor shape')
        self.shapes = [tuple(int(d) for d in s) for s in shapes]
        self.small_tensor_threshold = int(small_tensor_threshold)
        self.whole_model = bool(whole_model)
        numel = [int(np.prod(s)) if len(s) else 1 for s in self.shapes]
        if min(numel) <= 0:
            raise ValueError('RowLayout: empty tensor shape in %r' % (self.shapes,))
        rows, lengths = [], []
        for s, n in zip(self.shapes, numel):
            if len(s) >= 2 and n >= self.small_tensor_threshold:
                rows.append(s[0])
                lengths.append(n // s[0])
            else:
                rows.append(1)
                lengths.append(n)
        self.n_tensors = len(self.shapes)
        self.tensor_numel = np.asarray(numel, dtype=np.int64)
        if self.whole_model:
            rows, lengths = [1] * self.n_tensors, list(numel)
        self.tensor_rows = np.asarray(rows, dtype=np.int64)
        self.tensor_row_len = np.asarray(lengths, dtype=np.int64)
        # Flat order: by row length, then by model order (stable); whole model: model order.
        if self.whole_model:
            self.tensor_order = np.arange(self.n_tensors)
        else:
            self.tensor_order = np.argsort(self.tensor_row_len, kind='stable')
        t_start = np.zeros(self.n_tensors, dtype=np.int64)
        t_row_start = np.zeros(self.n_tensors, dtype=np.int64)
        pos = rpos = 0
        groups = []
        for t in self.tensor_order:
            length = int(self.tensor_row_len[t])
            if not groups or groups[-1].length != length:
                groups.append(RowGroup(length, rpos, 0, pos))
            g = groups[-1]
            groups[-1] = RowGroup(g.length, g.row_start, g.n_rows + int(rows[t]), g.start)
            t_start[t], t_row_start[t] = pos, rpos
            pos += int(numel[t])
            rpos += int(rows[t])
        self.n_params = pos
        if self.whole_model:
            groups = [RowGroup(pos, 0, 1, 0)]
            rpos = 1
            t_row_start[:] = 0
        self.groups = groups
        self.tensor_start = t_start
        self.tensor_row_start = t_row_start
        self.n_rows = rpos
        # Per-row tables (M entries, cheap): length, owning tensor (-1: spans tensors), start.
        self.row_len = torch.tensor([g.length for g in groups for _ in range(g.n_rows)]
                                    if self.whole_model else np.repeat(
            self.tensor_row_len[self.tensor_order], self.tensor_rows[self.tensor_order]),
            dtype=torch.int64)
        self.row_tensor = (torch.full((1,), -1, dtype=torch.int64) if self.whole_model else
                           torch.from_numpy(np.repeat(self.tensor_order,
                                                      self.tensor_rows[self.tensor_order])))
        self.row_start = torch.cumsum(self.row_len, 0) - self.row_len
        self.group_row_bounds = np.asarray(
            [g.row_start for g in groups] + [self.n_rows], dtype=np.int64)
        # Tensor rows (dim-0 slices) in tensor_order, for layout-independent reductions.
        tr = np.asarray([r for r in (s[0] if len(s) >= 2 and n >= self.small_tensor_threshold
                                     else 1 for s, n in zip(self.shapes, numel))])
        self._tensor_slices = [(int(t_start[t]), int(numel[t]), int(tr[t]))
                               for t in self.tensor_order]
        self._tensor_row_owner = torch.from_numpy(np.repeat(self.tensor_order,
                                                            tr[self.tensor_order]))

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
        """Views of ``flat`` with the original shapes, in model order (no copy)."""
        self._check_flat(flat)
        return [flat[s:s + n].view(shape) for s, n, shape in
                zip(self.tensor_start.tolist(), self.tensor_numel.tolist(), self.shapes)]

    def group_views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """``[n_rows, length]`` matrix views of ``flat``, one per row-length group."""
        self._check_flat(flat)
        return [flat[g.start:g.start + g.n_rows * g.length].view(g.n_rows, g.length)
                for g in self.groups]

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
    def row_abs_sum(self, flat: torch.Tensor) -> torch.Tensor:
        """Sum of |x| over each *tensor row* (dim-0 slice), in tensor_order, shape [R].

        For the per-row layout these are exactly the layout's rows in id order. The sums are
        taken over each tensor's own ``[rows, length]`` view, so a row's sum does not depend on
        where the tensor sits in memory or which layout holds it (torch splits long reductions
        across threads differently inside larger matrices).
        """
        self._check_flat(flat)
        views = [flat[s:s + n].view(r, n // r) for s, n, r in self._tensor_slices]
        return torch.cat([torch.linalg.vector_norm(v, 1, dim=1) for v in views])

    def tensor_abs_mean(self, row_sums: torch.Tensor) -> torch.Tensor:
        """Per-tensor mean |x| (model order, float32) from ``row_abs_sum`` output."""
        sums = torch.zeros(self.n_tensors, dtype=torch.float64)
        sums.index_add_(0, self._tensor_row_owner, row_sums.to(torch.float64))
        return (sums / torch.from_numpy(self.tensor_numel)).to(torch.float32)

    def tensor_sums(self, per_row: torch.Tensor) -> torch.Tensor:
        """Per-tensor sums of a per-row quantity of the per-row layout, shape [T]."""
        out = torch.zeros(self.n_tensors, dtype=per_row.dtype)
        return out.index_add_(0, self.row_tensor, per_row)

    def expand_rows(self, per_row: torch.Tensor) -> list[torch.Tensor]:
        """Per-group ``[n_rows, 1]`` views of a per-row tensor, for broadcasting over rows."""
        return [per_row[g.row_start:g.row_start + g.n_rows].unsqueeze(1) for g in self.groups]

    # ----------------------------------------------------------------- row-set operations
    def where_rows(self, row_mask: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                   out: torch.Tensor) -> torch.Tensor:
        """``out[row] = a[row] if row_mask[row] else b[row]`` for flat vectors (in place ok)."""
        for m, ga, gb, go in zip(self.expand_rows(row_mask), self.group_views(a),
                                 self.group_views(b), self.group_views(out)):
            torch.where(m, ga, gb, out=go)
        return out

    def mask_rows_(self, flat: torch.Tensor, row_mask: torch.Tensor) -> torch.Tensor:
        """Zero every row of ``flat`` whose mask is False (in place)."""
        for m, g in zip(self.expand_rows(row_mask), self.group_views(flat)):
            g.mul_(m)
        return flat

    def gather_rows(self, flat: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Elements of the given rows (ascending ids), concatenated; one op per group touched."""
        parts = []
        for g, lo, hi in self._split_sorted(rows):
            local = rows[lo:hi] - g.row_start
            view = flat[g.start:g.start + g.n_rows * g.length].view(g.n_rows, g.length)
            parts.append(view.index_select(0, local).reshape(-1))
        return torch.cat(parts) if parts else flat.new_zeros(0)

    def scatter_rows_(self, flat: torch.Tensor, rows: torch.Tensor, values: torch.Tensor,
                      add: bool = False) -> torch.Tensor:
        """Write (or add) concatenated row values back to ``flat`` at ascending row ids."""
        pos = 0
        for g, lo, hi in self._split_sorted(rows):
            local = rows[lo:hi] - g.row_start
            n = (hi - lo) * g.length
            view = flat[g.start:g.start + g.n_rows * g.length].view(g.n_rows, g.length)
            src = values[pos:pos + n].view(hi - lo, g.length)
            if add:
                view.index_add_(0, local, src)
            else:
                view.index_copy_(0, local, src)
            pos += n
        if pos != values.numel():
            raise ValueError(f'scatter_rows_: {values.numel()} values for {pos} row elements')
        return flat

    def _split_sorted(self, rows: torch.Tensor):
        """Yield (group, lo, hi): ``rows[lo:hi]`` are the ascending ids inside that group."""
        bounds = np.searchsorted(rows.numpy(), self.group_row_bounds, side='left')
        for k, g in enumerate(self.groups):
            lo, hi = int(bounds[k]), int(bounds[k + 1])
            if hi > lo:
                yield g, lo, hi

    def _check_flat(self, flat: torch.Tensor) -> None:
        if flat.dim() != 1 or flat.numel() != self.n_params:
            raise ValueError(f'expected a flat vector of {self.n_params} elements, '
                             f'got shape {tuple(flat.shape)}')

    def __repr__(self) -> str:
        return (f'RowLayout({self.n_tensors} tensors, {self.n_rows} rows, {self.n_params} '
                f'params, {len(self.groups)} row-length groups)')
