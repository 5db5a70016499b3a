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
The 'toy' workload: multinomial logistic regression on synthetic Gaussian data, instant.

For protocol and simulator tests that need a real model whose accuracy responds to training but
cannot afford seconds of set-up: a linear model (features x classes, a handful of rows), pool
and evaluation set drawn from class-dependent Gaussians. The starting model is the untrained
seeded linear layer, so accuracy starts near chance and rises within tens of iterations.
"""

from __future__ import annotations

from rog_ros.workloads.base import seeded, Workload
from rog_ros.workloads.options import integer, number
from rog_ros.workloads.partition import label_shards
import torch
from torch import nn

MAX_VALUES = 10 ** 9
"""Most feature values of pool and evaluation set together (4 GB of float32)."""


def _gaussian_classes(n, centres, noise, g):
    labels = torch.randint(len(centres), (n,), generator=g)
    x = centres[labels] + noise * torch.randn(n, centres.shape[1], generator=g)
    return x, labels


def make_toy(features=16, classes=4, pool=4096, eval_samples=1024, noise=1.0, batch_size=32,
             seed=0, compute_time_s=0.05, target_accuracy=0.8):
    """
    Build the toy workload (all options are plain numbers; < 10 ms).

    Every option is range-checked first (ValueError, one line): torch's own errors for a
    negative size or a number beyond 64 bits are tracebacks from deep inside.

    Parameters
    ----------
    features, classes : int
        Input dimension and number of classes (the model has `classes` rows + a bias row).
    pool, eval_samples : int
        Adaptation pool size (split label-sorted over workers) and held-out set size.
    noise : float
        Gaussian noise around the class centres; 1.0 caps accuracy near 0.95.
    seed : int
        Seed of data and model initialisation.
    compute_time_s : float
        Nominal seconds per iteration (a toy: anything small).
    batch_size : int
        Samples per worker and iteration.
    target_accuracy : float
        Reached by synchronous SGD with the default lr in ~10 iterations of 4 workers.

    """
    _check_toy(features, classes, pool, eval_samples, noise, batch_size, seed, compute_time_s,
               target_accuracy)
    g = torch.Generator().manual_seed(seed)
    centres = 1.5 * torch.randn(classes, features, generator=g) / features ** 0.5 * 2
    train = _gaussian_classes(pool, centres, noise, g)
    evaluation = _gaussian_classes(eval_samples, centres, noise, g)
    init = torch.Generator().manual_seed(seed + 1)
    state = {'weight': 0.01 * torch.randn(classes, features, generator=init),
             'bias': torch.zeros(classes)}
    return Workload(
        'toy', lambda: seeded(seed, lambda: nn.Linear(features, classes)), state, train,
        lambda n: label_shards(train[1], n), evaluation, batch_size=batch_size,
        target_accuracy=target_accuracy, compute_time_s=compute_time_s, lr=0.1, momentum=0.9,
        info={'what': 'logistic regression on synthetic Gaussian classes',
              'features': features, 'classes': classes})


def _check_toy(features, classes, pool, eval_samples, noise, batch_size, seed, compute_time_s,
               target_accuracy):
    """Refuse an option of `make_toy` out of its range, before any tensor is made."""
    integer('toy', 'features', features, 1, 1_000_000)
    integer('toy', 'classes', classes, 2, 100_000)
    integer('toy', 'pool', pool, 1, MAX_VALUES)
    integer('toy', 'eval_samples', eval_samples, 1, MAX_VALUES)
    if (pool + eval_samples) * features > MAX_VALUES:
        raise ValueError(f'toy: (pool + eval_samples) x features = ({pool} + {eval_samples}) x '
                         f'{features} values, more than {MAX_VALUES} (4 GB); give fewer')
    number('toy', 'noise', noise, 0)
    integer('toy', 'batch_size', batch_size, 1, 1_000_000)
    integer('toy', 'seed', seed, 0, 2 ** 32 - 1)
    number('toy', 'compute_time_s', compute_time_s, 0, above=True)
    number('toy', 'target_accuracy', target_accuracy, 0, 1)
