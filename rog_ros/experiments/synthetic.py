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
A generated MNIST stand-in for the small reproductions of AET-SGD and FLEET (no download).

Ten Gaussian classes in 20 dimensions seen through a fixed random non-linear warp, a small
MLP to learn them, and the paper's data splits: iid sampling from the whole set (AET-SGD) and
McMahan's label-sorted shards, two per user (FLEET).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class Task:
    """Train/test tensors and the model factory of one generated task."""

    x: torch.Tensor
    y: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    classes: int
    features: int

    def make_model(self, seed: int = 0, hidden: int = 64) -> nn.Module:
        """Return the MLP ``features -> hidden -> classes``, seeded."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return nn.Sequential(nn.Linear(self.features, hidden), nn.ReLU(),
                                 nn.Linear(hidden, self.classes))

    @torch.no_grad()
    def accuracy(self, model: nn.Module) -> float:
        """Return the test accuracy of ``model``."""
        return float((model(self.x_test).argmax(-1) == self.y_test).float().mean())

    def loss(self, model: nn.Module, idx: torch.Tensor) -> torch.Tensor:
        """Return the mean cross-entropy on training samples ``idx``."""
        return F.cross_entropy(model(self.x[idx]), self.y[idx])

    def shards(self, users: int, per_user: int = 2, seed: int = 0) -> list:
        """Split label-sorted training indices into shards, ``per_user`` per user."""
        order = torch.argsort(self.y * len(self.y) + torch.arange(len(self.y)))
        pieces = order.chunk(users * per_user)
        g = torch.Generator().manual_seed(seed)
        perm = torch.randperm(len(pieces), generator=g)
        return [torch.cat([pieces[int(perm[u * per_user + j])] for j in range(per_user)])
                for u in range(users)]


def make_task(n_train: int = 12000, n_test: int = 2000, features: int = 20, classes: int = 10,
              noise: float = 1.0, seed: int = 0) -> Task:
    """Generate the task (deterministic for a seed, < 50 ms)."""
    g = torch.Generator().manual_seed(seed)
    centres = 1.6 * torch.randn(classes, features, generator=g)
    warp = torch.randn(features, features, generator=g) / features ** 0.5

    def draw(n):
        y = torch.randint(classes, (n,), generator=g)
        z = centres[y] + noise * torch.randn(n, features, generator=g)
        return torch.tanh(z @ warp) + 0.5 * z / features ** 0.5, y

    x, y = draw(n_train)
    x_test, y_test = draw(n_test)
    mean, std = x.mean(0), x.std(0) + 1e-6
    return Task((x - mean) / std, y, (x_test - mean) / std, y_test, classes, features)
