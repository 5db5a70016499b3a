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
GSP's density-peak grouping of workers by speed (Eqs. 4-6 and Algorithm 1, spec 002-2.1).

Pure arithmetic on a vector of per-worker speeds (any 1-D metric; GSP uses iteration times
relative to the fastest worker). With ``d = |x_n - x_j|``:

* local density ``rho_n = #{j != n : d_nj < dis_thr}`` (Eqs. 4-5, self excluded);
* ``s_n`` = distance to the nearest denser worker (Eq. 6), the densest worker taking the largest
  distance to anyone; "denser" breaks ties in rho by the speed, then the index, so the result
  does not depend on the order workers are listed in;
* P = #{n : s_n > mean(s)} (the mean computed once, after all s; spec's loop fix), at least 1;
* centres: the P workers with s above the mean (a requested count G < P: the top G by
  rho * s; G > P: those plus the densest remaining), the densest worker always among them;
* every other worker, in decreasing density, joins the group of its nearest denser worker.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Grouping:
    """Result of :func:`density_peaks`."""

    labels: np.ndarray      # group id of every worker (0 = group of the densest centre)
    centres: np.ndarray     # worker index of each group's centre, by group id
    rho: np.ndarray         # local densities (Eq. 4)
    s: np.ndarray           # distances to a denser worker (Eq. 6)
    optimal_p: int          # P of Algorithm 1 (before any requested count)

    @property
    def groups(self) -> list:
        """Member lists, by group id."""
        return [np.flatnonzero(self.labels == g).tolist() for g in range(len(self.centres))]


def density_peaks(speeds, dis_thr: float, n_groups: int | None = None) -> Grouping:
    """
    Group workers by speed with density-peak clustering.

    Parameters
    ----------
    speeds : sequence of float
        One speed measure per worker (e.g. relative iteration time).
    dis_thr : float
        Neighbourhood radius of the local density (not given by the paper).
    n_groups : int, optional
        Requested number of groups; None takes Algorithm 1's P.

    """
    x = np.asarray(list(speeds), dtype=np.float64)
    n = x.size
    if n < 1:
        raise ValueError('need at least one worker to group')
    if not np.isfinite(x).all():
        raise ValueError('speeds must be finite')
    if not dis_thr > 0:
        raise ValueError(f'dis_thr must be positive, got {dis_thr}')
    if n_groups is not None and not 1 <= n_groups <= n:
        raise ValueError(f'requested groups must be in [1, {n}], got {n_groups}')
    d = np.abs(x[:, None] - x[None, :])
    rho = (d < dis_thr).sum(axis=1) - 1                        # self excluded
    order = np.lexsort((np.arange(n), x, -rho))                # densest first
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    denser = rank[None, :] < rank[:, None]                     # [n, j]: j is denser than n
    s = np.where(denser, d, np.inf).min(axis=1)
    top = order[0]
    s[top] = d[top].max()
    p = int((s > s.mean()).sum())
    above = s > s.mean()
    if n_groups is None or n_groups == p:
        is_centre = above.copy()
    elif n_groups < p:
        gamma_order = np.lexsort((rank, -(rho * s)))
        is_centre = np.zeros(n, dtype=bool)
        is_centre[gamma_order[:n_groups]] = True
    else:
        is_centre = above.copy()
        for k in order:
            if is_centre.sum() >= n_groups:
                break
            is_centre[k] = True
    is_centre[top] = True
    if n_groups is not None:
        while is_centre.sum() > n_groups:                      # keep the densest ones
            drop = [k for k in order[::-1] if is_centre[k] and k != top][0]
            is_centre[drop] = False
    labels = np.full(n, -1, dtype=np.int64)
    centres = []
    for k in order:
        if is_centre[k]:
            labels[k] = len(centres)
            centres.append(int(k))
        else:
            cand = np.flatnonzero(denser[k])
            nearest = cand[np.lexsort((rank[cand], d[k, cand]))[0]]
            labels[k] = labels[nearest]
    return Grouping(labels=labels, centres=np.asarray(centres, dtype=np.int64), rho=rho,
                    s=s, optimal_p=max(1, p))
