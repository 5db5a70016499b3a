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
DeliveredVersions: what versions of each row each worker holds, in O(N x M) state.

The parameter server must know, per worker r, row i and contributing worker s, the version
``sent[r, i, s]`` of row i it delivered to r (r's ``vloc``). Stored densely that is an
N x M x N table (1.3 GB for 100 workers on ConvMLP-M). Here it is derived instead:

* Server events: every applied push is one event ``k`` (a counter). The version table's
  column entries keep a short history: ``depth`` slots of (value, event it took effect), newest
  first, shifted only for the rows a push changes (cost in proportion to the rows it carries).
* Per worker and row, ``at[r, i]``: the event of the version snapshot its last delivery of row
  i carried (-1: nothing delivered, all versions 0). Then ``sent[r, i, s] = v[i, s]`` as of
  event ``at[r, i]``, looked up in the history.
* Exceptions, exact: a delivery under partial membership leaves the suspended workers' columns
  unchanged, and a push may shift out a history slot some worker's row still refers to. Such
  rows of such workers are materialised (``irregular``) into a per-worker ``[M, N]`` table,
  allocated on first use and dropped when every row is regular again.

The result is bit-identical to the dense table (the engine's decisions do not change); state is
``depth x M x N`` history (int32 values and events: 32 bytes per entry at the default depth 4)
plus ``N x M`` stamps, plus one ``M x N`` table per worker with irregular rows. Events are
int32: one per applied push, 2**31 of them.
"""

from __future__ import annotations

import torch


class DeliveredVersions:
    """
    Per-worker delivered row versions (``sent[r]``, an ``[M, N]`` view) without N x M x N state.

    Parameters
    ----------
    n_rows, n_workers : int
        M and N.
    depth : int
        History slots per version-table entry (>= 2). Deeper: fewer materialised rows.
    v0 : Tensor or None
        The version table now (``[M, N]``, e.g. restored from a checkpoint); None: zeros.

    """

    def __init__(self, n_rows: int, n_workers: int, depth: int = 4,
                 v0: torch.Tensor | None = None):
        if depth < 2:
            raise ValueError(f'history depth must be >= 2, got {depth}')
        self.m, self.n, self.depth = int(n_rows), int(n_workers), int(depth)
        self.event = 0
        # [N, D, M]: one contiguous [D, M] history per contributing worker (a push shifts one)
        self.hist_val = torch.zeros(n_workers, depth, n_rows, dtype=torch.int32)
        self.hist_at = torch.zeros(n_workers, depth, n_rows, dtype=torch.int32)
        v0 = (torch.zeros(n_rows, n_workers, dtype=torch.int32) if v0 is None
              else v0.to(torch.int32))
        self.hist_val[:] = v0.t().unsqueeze(1)
        # per row: event of its last change (-1: all zero, never changed) and min version
        self.row_at = torch.where(v0.max(dim=1).values > 0, 0, -1).to(torch.int32)
        self.row_min = v0.min(dim=1).values.clone()
        self.dl_min = torch.zeros(n_workers, n_rows, dtype=torch.int32)   # min_s sent[r, i, s]
        self.at = torch.full((n_workers, n_rows), -1, dtype=torch.int32)
        self.irregular = torch.zeros(n_workers, n_rows, dtype=torch.bool)
        self.tables: dict = {}                  # worker -> [M, N] int32 (irregular rows)
        self.pins: dict = {}                    # key -> event (open downlinks' snapshots)
        self.pin_min: dict = {}                 # key -> row minima of that snapshot
        self.pinned: dict = {}                  # key -> [M, N] materialised snapshot
        self.materialised_rows = 0              # metric: rows copied out of the history

    # ------------------------------------------------------------------ history
    def lookup(self, k: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Return ``v[i, :]`` as of event ``k[j]`` for rows ``rows[j]`` (None: all); -1 gives 0."""
        hv = self.hist_val if rows is None else self.hist_val[:, :, rows]   # [N, D, R]
        ha = self.hist_at if rows is None else self.hist_at[:, :, rows]
        kk = k.reshape(1, -1)
        out = hv[:, self.depth - 1].clone()
        for d in range(self.depth - 2, -1, -1):
            out = torch.where(ha[:, d] <= kk, hv[:, d], out)
        return torch.where(kk < 0, torch.zeros_like(out), out).t().contiguous()

    def snapshot(self, event: int) -> torch.Tensor:
        """Return the whole version table as of ``event`` (``[M, N]``)."""
        return self.lookup(torch.full((self.m,), int(event), dtype=torch.int32))

    def stamp(self, v: torch.Tensor, worker: int, rows: torch.Tensor, clock: int) -> None:
        """
        Apply a push: ``v[rows, worker] = max(v, clock)`` as one new event (rows: indices).

        ``v`` is the engine's version table (updated in place). Only the changed rows' history
        shifts; references that would lose their slot are materialised first.
        """
        self.event += 1
        if rows.numel() == 0:
            return
        old = v[rows, worker]
        new = torch.clamp(old, min=int(clock))
        ch = rows[new > old]
        if ch.numel() == 0:
            return
        hv, ha = self.hist_val[worker], self.hist_at[worker]      # [D, M] views
        self._protect(ch, ha[self.depth - 2, ch])                 # lookups below this fail
        vals = new[new > old]
        if ch.numel() == self.m:       # a whole-model push: shift by slicing
            hv[1:] = hv[:-1].clone()
            ha[1:] = ha[:-1].clone()
            hv[0] = vals
            ha[0] = self.event
        else:
            hv[1:, ch] = hv[:-1, ch]
            ha[1:, ch] = ha[:-1, ch]
            hv[0, ch] = vals
            ha[0, ch] = self.event
        v[ch, worker] = vals
        self.row_at[ch] = self.event
        self.row_min[ch] = v[ch].min(dim=1).values

    def _protect(self, rows: torch.Tensor, lost_before: torch.Tensor) -> None:
        """Materialise every reference to a history slot about to be shifted out."""
        full = rows.numel() == self.m
        at = self.at if full else self.at[:, rows]                     # [N, R]
        irr = self.irregular if full else self.irregular[:, rows]
        need = (at >= 0) & (at < lost_before.unsqueeze(0)) & ~irr
        for r in torch.nonzero(need.any(dim=1)).reshape(-1).tolist():
            rr = rows[need[r]]
            table = self._table(r)
            table[rr] = self.lookup(self.at[r, rr], rr)
            self.irregular[r, rr] = True
            self.materialised_rows += int(rr.numel())
        for key, k in list(self.pins.items()):
            if bool((lost_before > k).any()):
                self.pinned[key] = self.snapshot(k)
                del self.pins[key]

    def _table(self, r: int) -> torch.Tensor:
        t = self.tables.get(r)
        if t is None:
            t = self.tables[r] = torch.zeros(self.m, self.n, dtype=torch.int32)
        return t

    # ------------------------------------------------------------------ open downlinks
    def pin(self, key) -> int:
        """Remember the version table of now for an open transfer ``key``; return the event."""
        self.pins[key] = self.event
        self.pin_min[key] = self.row_min.clone()
        self.pinned.pop(key, None)
        return self.event

    def pinned_snapshot(self, key, event: int) -> torch.Tensor:
        """Return the version table ``pin(key)`` remembered (``[M, N]``)."""
        t = self.pinned.get(key)
        return t if t is not None else self.snapshot(event)

    def pinned_rows(self, key, event: int, rows: torch.Tensor, v: torch.Tensor
                    ) -> torch.Tensor:
        """``pinned_snapshot(key, event)[rows]`` (``v``: the current table), O(rows x N)."""
        t = self.pinned.get(key)
        if t is not None:
            return t[rows]
        out = v[rows]
        changed = torch.nonzero(self.row_at[rows] > int(event)).reshape(-1)
        if changed.numel():
            k = torch.full((changed.numel(),), int(event), dtype=torch.int32)
            out[changed] = self.lookup(k, rows[changed])
        return out

    def unpin(self, key) -> None:
        self.pins.pop(key, None)
        self.pin_min.pop(key, None)
        self.pinned.pop(key, None)

    # ------------------------------------------------------------------ per worker
    def sent(self, r: int) -> torch.Tensor:
        """Return ``sent[r]``: per row and contributing worker, the version r holds ``[M, N]``."""
        out = self.lookup(self.at[r])
        t = self.tables.get(r)
        if t is not None:
            out = torch.where(self.irregular[r].unsqueeze(1), t, out)
        return out

    def sent_rows(self, r: int, rows: torch.Tensor) -> torch.Tensor:
        """``sent(r)[rows]`` (``rows``: indices), in O(rows x N)."""
        out = self.lookup(self.at[r, rows], rows)
        t = self.tables.get(r)
        if t is not None:
            out = torch.where(self.irregular[r, rows].unsqueeze(1), t[rows], out)
        return out

    def reset(self, r: int) -> None:
        """Worker r holds nothing known (all versions 0)."""
        self.at[r] = -1
        self.dl_min[r] = 0
        self.irregular[r] = False
        self.tables.pop(r, None)

    def commit(self, r: int, rows: torch.Tensor, key, event: int, active: torch.Tensor,
               v_snap: torch.Tensor | None = None) -> None:
        """
        Rows ``rows`` (bool ``[M]``) were delivered to r with the versions ``pin(key)`` took.

        Columns of workers not in ``active`` keep what r had. ``v_snap``: that table, if the
        caller holds it (else it is looked up).
        """
        if key in self.pins and bool(active.all()):
            self.at[r, rows] = int(event)
            self.dl_min[r, rows] = self.pin_min[key][rows]
            self.irregular[r, rows] = False
            if r in self.tables and not bool(self.irregular[r].any()):
                del self.tables[r]
            return
        if v_snap is None:
            v_snap = self.pinned_snapshot(key, event)
        idx = torch.nonzero(rows).reshape(-1)
        cur = self.sent_rows(r, idx)
        table = self._table(r)
        table[idx] = torch.where(active.unsqueeze(0), v_snap[idx], cur)
        self.dl_min[r, idx] = table[idx].min(dim=1).values
        self.irregular[r, idx] = True

    def new_and_oldest(self, r: int, v: torch.Tensor) -> tuple:
        """
        With every worker active: rows with versions r lacks, and ``min_s sent[r, i, s]``.

        Equal to ``(v > sent(r)).any(1)`` and ``sent(r).min(1)``, in O(M) plus the irregular
        rows (``v`` is the engine's current version table).
        """
        new = self.row_at > self.at[r]
        t = self.tables.get(r)
        if t is not None:
            irr = torch.nonzero(self.irregular[r]).reshape(-1)
            new[irr] = (v[irr] > t[irr]).any(dim=1)
        return new, self.dl_min[r].clone()

    def nbytes(self) -> int:
        """Bytes of the per-row state (history, stamps, materialised tables)."""
        ts = [self.hist_val, self.hist_at, self.at, self.irregular, self.row_at, self.row_min,
              self.dl_min] + list(self.tables.values()) + list(self.pin_min.values())
        ts += list(self.pinned.values())
        return int(sum(t.numel() * t.element_size() for t in ts))
