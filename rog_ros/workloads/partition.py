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
Non-IID partitions of a data set over workers: label-sorted shards, Dirichlet, Pachinko, groups.

Robots see different parts of the world, so their data is never IID; how skewed it is decides how
much stale or partial synchronisation hurts. Offered skews:

* `label_shards`: sort by label, cut into equal contiguous shards (the artifact: worker k of 4
  gets CIFAR-100 labels 25k..25k+24). The most extreme split.
* `dirichlet_split`: per class, worker shares drawn from Dirichlet(alpha) (common FL benchmark).
* `pachinko_clients`: TFF's Pachinko Allocation of Fed-CIFAR100 (coarse labels ~ Dirichlet(0.1)
  per client, fine labels within a coarse label ~ Dirichlet(10)), then whole clients per worker.
* `group_split`: whole groups (e.g. maps a robot explored, Fed-CIFAR100 clients) per worker.

All return a list of int64 index tensors, one per worker, disjoint; all are deterministic for a
seed (a `torch.Generator`, never global state).
"""

from __future__ import annotations

import torch


def label_shards(labels, n_workers):
    """Sort indices by label (stable), cut them into `n_workers` near-equal contiguous shards."""
    order = torch.sort(torch.as_tensor(labels), stable=True).indices
    return list(torch.tensor_split(order, n_workers))


def dirichlet_split(labels, n_workers, alpha=0.5, seed=0):
    """
    Per class, split its samples over workers in Dirichlet(alpha) proportions.

    Small alpha (0.1) gives each worker a few dominant classes; large alpha (100) is near IID.
    """
    labels = torch.as_tensor(labels)
    g = torch.Generator().manual_seed(seed)
    classes = torch.unique(labels)
    # torch.distributions takes no generator, so Dirichlet draws come from _dirichlet.
    shares = _dirichlet(alpha, (len(classes), n_workers), g)
    parts = [[] for _ in range(n_workers)]
    for c, share in zip(classes.tolist(), shares):
        idx = torch.nonzero(labels == c).flatten()
        idx = idx[torch.randperm(len(idx), generator=g)]
        cuts = torch.round(torch.cumsum(share, 0) * len(idx)).long().tolist()
        for w, piece in enumerate(torch.tensor_split(idx, cuts[:-1])):
            parts[w].append(piece)
    return [torch.sort(torch.cat(p)).values for p in parts]


def group_split(groups, n_workers):
    """Give each worker whole groups (contiguous in sorted id order); ids < 0 are left out."""
    groups = torch.as_tensor(groups)
    ids = torch.unique(groups[groups >= 0])
    parts = []
    for chunk in torch.tensor_split(ids, n_workers):
        parts.append(torch.nonzero(torch.isin(groups, chunk)).flatten())
    return parts


def pachinko_clients(labels, coarse_of_fine, n_clients, per_client, alpha=0.1, beta=10.0,
                     seed=0):
    """
    Client id per sample under Pachinko allocation (TFF Fed-CIFAR100's construction).

    Parameters
    ----------
    labels : int tensor (N,)
        Fine labels.
    coarse_of_fine : int tensor (n_fine,)
        Coarse (super-class) label of every fine label.
    n_clients, per_client : int
        Clients and samples per client; `n_clients * per_client <= N`.
    alpha, beta : float
        Dirichlet concentrations over coarse labels per client (0.1) and over fine labels within
        a coarse label per client (10), as in TFF.
    seed : int
        Seed of the allocation.

    Returns
    -------
    int64 tensor (N,)
        Client of each sample, -1 for samples left unassigned.

    """
    labels = torch.as_tensor(labels).long()
    coarse_of_fine = torch.as_tensor(coarse_of_fine).long()
    g = torch.Generator().manual_seed(seed)
    n_fine, n_coarse = len(coarse_of_fine), int(coarse_of_fine.max()) + 1
    pools = [torch.nonzero(labels == f).flatten() for f in range(n_fine)]
    pools = [p[torch.randperm(len(p), generator=g)] for p in pools]
    taken = torch.zeros(n_fine, dtype=torch.long)
    available = torch.tensor([len(p) for p in pools])
    client = torch.full_like(labels, -1)
    # Fine-within-coarse shares: Dirichlet(beta) over the fine labels of each coarse label.
    fine_w = _dirichlet(beta, (n_clients, n_fine), g)
    for k in range(n_clients):
        coarse_p = _dirichlet(alpha, (1, n_coarse), g)[0]
        per_coarse = torch.zeros(n_coarse, dtype=torch.float64).index_add(
            0, coarse_of_fine, fine_w[k])
        within = fine_w[k] / per_coarse[coarse_of_fine]
        need = per_client
        while need > 0:
            p = coarse_p[coarse_of_fine] * within * (available > 0)
            if p.sum() <= 0:
                p = (available > 0).double()
            counts = torch.multinomial(p / p.sum(), need, replacement=True, generator=g)
            counts = torch.bincount(counts, minlength=n_fine).clamp(max=available)
            for f in torch.nonzero(counts).flatten().tolist():
                c = int(counts[f])
                client[pools[f][taken[f]:taken[f] + c]] = k
            taken += counts
            available -= counts
            need -= int(counts.sum())
    return client


def _dirichlet(alpha, shape, generator):
    """Dirichlet(alpha) rows drawn from `generator` (Gamma via Marsaglia-Tsang, float64)."""
    a = float(alpha)
    boost = a < 1.0
    d = (a + 1.0 if boost else a) - 1.0 / 3.0
    c = 1.0 / (9.0 * d) ** 0.5
    out = torch.empty(shape, dtype=torch.float64)
    todo = torch.ones(shape, dtype=torch.bool)
    while todo.any():
        x = torch.randn(shape, generator=generator, dtype=torch.float64)
        u = torch.rand(shape, generator=generator, dtype=torch.float64)
        v = (1 + c * x) ** 3
        ok = (v > 0) & (torch.log(u.clamp_min(1e-300)) < 0.5 * x * x + d - d * v
                        + d * torch.log(v.clamp_min(1e-300)))
        new = ok & todo
        out[new] = (d * v)[new]
        todo &= ~new
    if boost:
        u = torch.rand(shape, generator=generator, dtype=torch.float64)
        out = out * u ** (1.0 / a)
    out = out.clamp_min(1e-300)
    return out / out.sum(-1, keepdim=True)
