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
Top-k gradient sparsifiers: AdaComp (per tensor), Comp-ASGD (global), GDS (with residual).

specs/adacomp_gsp.md 001-2.5, 001-2.4 and 002-2.4. Three shapes of one idea:

* :func:`select_per_tensor`: AdaComp's SELECT_GRAD, the ``k_l = max(1, floor(c |T_l|))``
  largest entries of every tensor, nothing kept back (no residual);
* :func:`select_global`: Comp-ASGD's selection, the top ``max(1, floor(c |Theta|))`` entries of
  the whole flattened model, no residual;
* :class:`ResidualTopK`: GDS, a local residual that every gradient is added to, of which the
  ``m = max(1, ceil(d |g|))`` largest entries are uploaded and cleared (exact top-k, or DGC's
  1 % sampled threshold).

A sparse update travels as int32 flat indices followed by fp32 values (:func:`encode`), so one
selected entry costs 8 bytes against 4 for a dense fp32 entry; the tensor ids of the message
header play the role of the papers' shape constant C_0.
"""

from __future__ import annotations

import math

import numpy as np
import torch

TOPK_CODEC_ID = 2
"""RowChunk.codec of a sparse (index, value) payload; 0 (Identity) is a dense fp32 payload."""

SCOPES = ('per_tensor', 'global')


def per_tensor_k(sizes, c: float) -> np.ndarray:
    """
    Return the entries AdaComp keeps per tensor: ``max(1, floor(c * size))`` (spec A2).

    The CNN of 211,690 parameters at c = 0.01 keeps [2, 1, 92, 1, 2007, 1, 12, 1] = 2,117.
    """
    if not 0.0 < c <= 1.0:
        raise ValueError(f'compression ratio c must be in (0, 1], got {c}')
    sizes = np.asarray(list(sizes), dtype=np.int64)
    # 1e-9 absorbs binary rounding such as 0.1 * 70 = 7.000000000000001 or 2.9999999999999996
    k = np.floor(sizes * float(c) + 1e-9).astype(np.int64)
    return np.minimum(np.maximum(k, 1), sizes)


def global_k(n: int, c: float) -> int:
    """Return the entries Comp-ASGD keeps of the whole model: ``max(1, floor(c * n))``."""
    return int(per_tensor_k([n], c)[0])


def density_m(n: int, density: float) -> int:
    """Return the GDS upload count ``m = max(1, ceil(density * n))`` (spec D4), at most n."""
    if not 0.0 < density <= 1.0:
        raise ValueError(f'upload density must be in (0, 1], got {density}')
    return int(min(n, max(1, math.ceil(density * n - 1e-9))))


def offsets_of(sizes) -> np.ndarray:
    """Start offset of every tensor in the flat vector."""
    sizes = np.asarray(list(sizes), dtype=np.int64)
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)


def select_per_tensor(g: torch.Tensor, sizes, c: float):
    """
    Select the top-c entries by |g| of every tensor: (indices int64 ascending, values).

    ``g`` is the flat gradient in model order and ``sizes`` the element count of each tensor.
    One ``topk`` per tensor (a handful per model), never a loop over entries.
    """
    ks = per_tensor_k(sizes, c)
    parts = []
    for off, size, k in zip(offsets_of(sizes), np.asarray(list(sizes)), ks):
        seg = g[int(off):int(off) + int(size)]
        if k >= size:
            parts.append(torch.arange(int(off), int(off) + int(size)))
        else:
            parts.append(torch.topk(seg.abs(), int(k), sorted=False).indices + int(off))
    idx = torch.sort(torch.cat(parts)).values
    return idx, g[idx].clone()


def select_global(g: torch.Tensor, k: int):
    """Select the k largest |g| of the whole vector: (indices int64 ascending, values)."""
    n = g.numel()
    if k >= n:
        idx = torch.arange(n)
    else:
        idx = torch.sort(torch.topk(g.abs(), int(k), sorted=False).indices).values
    return idx, g[idx].clone()


def select_sampled(r: torch.Tensor, m: int, sample_ratio: float, generator: torch.Generator):
    """
    DGC-style selection (spec D5): a threshold from a ~1 % sample, exact top-m if it overshoots.

    The threshold is the top-(m x sample fraction) magnitude of a uniform sample; entries with
    ``|r| >= thr`` are taken, and if they exceed m by more than 20 % an exact top-m runs on
    that subset only. The count is therefore m or within the sampling error below it.
    """
    n = r.numel()
    mag = r.abs()
    s = max(1, min(n, int(round(n * sample_ratio))))
    if s >= n or m >= n:
        return select_global(r, m)
    sample = mag[torch.randint(n, (s,), generator=generator)]
    k_s = max(1, min(s, int(round(m * s / n))))
    thr = torch.topk(sample, k_s, sorted=True).values[-1]
    cand = torch.nonzero(mag >= thr).reshape(-1)
    if cand.numel() == 0:
        return select_global(r, m)
    if cand.numel() > 1.2 * m:
        cand = cand[torch.topk(mag[cand], m, sorted=False).indices]
    idx = torch.sort(cand).values
    return idx, r[idx].clone()


class ResidualTopK:
    """
    GDS's worker-side sparsifier with local residual (Algorithm 3 lines 7-11).

    ``step(grad, density)`` adds the gradient to the residual r, uploads the
    ``m = max(1, ceil(density |g|))`` largest entries of r and clears them in r, so that
    ``uploaded + r_new == r_old + grad`` exactly (the selected entries are moved, not
    recomputed). With density 1 everything is uploaded and r stays 0 (GDS = GSP).

    Parameters
    ----------
    n : int
        Gradient size |g|.
    sizes : list of int, optional
        Tensor sizes, for ``scope='per_tensor'`` (DGC's per-layer selection, an option).
    scope : str
        'global' (the paper's Algorithm 3, one vector; default) or 'per_tensor'.
    sampled : bool
        False: exact top-m (default); True: threshold from a ``sample_ratio`` sample (D5).
    sample_ratio : float
        Fraction of entries sampled for the threshold (paper: 0.01).
    seed : int
        Seed of the sampling generator.

    """

    def __init__(self, n: int, sizes=None, scope: str = 'global', sampled: bool = False,
                 sample_ratio: float = 0.01, seed: int = 0, dtype=torch.float32):
        if scope not in SCOPES:
            raise ValueError(f'scope must be one of {SCOPES}, got {scope!r}')
        if scope == 'per_tensor' and sizes is None:
            raise ValueError("scope='per_tensor' needs the tensor sizes")
        if not 0.0 < sample_ratio <= 1.0:
            raise ValueError(f'sample_ratio must be in (0, 1], got {sample_ratio}')
        self.n, self.sizes, self.scope = int(n), sizes, scope
        self.sampled, self.sample_ratio = bool(sampled), float(sample_ratio)
        self.residual = torch.zeros(self.n, dtype=dtype)
        self.generator = torch.Generator().manual_seed(int(seed))

    def step(self, grad: torch.Tensor, density: float):
        """Add ``grad``; return (indices int64 ascending, values) of the upload."""
        r = self.residual
        r.add_(grad.reshape(-1))
        if density >= 1.0:
            idx = torch.arange(self.n)
        elif self.scope == 'per_tensor':
            idx, _ = select_per_tensor_m(r, self.sizes, density)
        elif self.sampled:
            idx, _ = select_sampled(r, density_m(self.n, density), self.sample_ratio,
                                    self.generator)
        else:
            idx, _ = select_global(r, density_m(self.n, density))
        vals = r[idx].clone()
        r[idx] = 0.0
        return idx, vals


def select_per_tensor_m(g: torch.Tensor, sizes, density: float):
    """Per-tensor selection with GDS's count rule ``max(1, ceil(density * size))``."""
    parts = []
    for off, size in zip(offsets_of(sizes), np.asarray(list(sizes))):
        m = density_m(int(size), density)
        seg = g[int(off):int(off) + int(size)]
        if m >= size:
            parts.append(torch.arange(int(off), int(off) + int(size)))
        else:
            parts.append(torch.topk(seg.abs(), m, sorted=False).indices + int(off))
    idx = torch.sort(torch.cat(parts)).values
    return idx, g[idx].clone()


def encode(idx: torch.Tensor, vals: torch.Tensor) -> bytes:
    """Sparse payload: int32 indices, then fp32 values (8 bytes per entry)."""
    return (idx.to(torch.int32).numpy().tobytes()
            + vals.to(torch.float32).numpy().tobytes())


def decode(payload: bytes, n: int):
    """
    Inverse of :func:`encode`, validated: (indices int64, values float32).

    Raises ValueError (and allocates nothing model-sized) for a length that is not a multiple
    of 8, indices outside [0, n), repeated indices or non-finite values.
    """
    if len(payload) % 8:
        raise ValueError(f'sparse payload of {len(payload)} bytes is not a whole number of '
                         '(int32, fp32) entries')
    m = len(payload) // 8
    if m > n:
        raise ValueError(f'sparse payload has {m} entries for a model of {n}')
    idx = np.frombuffer(payload, dtype=np.int32, count=m)
    vals = np.frombuffer(payload, dtype=np.float32, count=m, offset=4 * m)
    if m and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f'sparse index outside [0, {n})')
    if m and np.unique(idx).size != m:
        raise ValueError('repeated sparse index')
    if not np.isfinite(vals).all():
        raise ValueError('non-finite value in sparse payload')
    return torch.from_numpy(idx.astype(np.int64)), torch.from_numpy(vals.copy())


def encode_dense(vec: torch.Tensor) -> bytes:
    """Dense fp32 payload of a flat vector."""
    return vec.detach().to(torch.float32).contiguous().numpy().tobytes()


def decode_dense(payload: bytes, n: int) -> torch.Tensor:
    """Inverse of :func:`encode_dense`, validated (size and finiteness)."""
    if len(payload) != 4 * n:
        raise ValueError(f'dense payload of {len(payload)} bytes, expected {4 * n}')
    arr = np.frombuffer(payload, dtype=np.float32)
    if not np.isfinite(arr).all():
        raise ValueError('non-finite value in dense payload')
    return torch.from_numpy(arr.copy())
