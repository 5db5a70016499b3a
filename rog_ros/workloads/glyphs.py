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
The 'glyphs' workload: generated MNIST-like digits, with AdaComp's CNN or LeNet-5.

Reproducing AdaComp and GSP needs an MNIST-sized image task, and nothing is downloaded here, so
the data is generated: ten classes, each a glyph of three random pen strokes on a 28 x 28 canvas;
a sample is its class glyph shifted by up to 3 pixels, at a random contrast, with a faint stray
stroke and pixel noise (seeded, < 1 s). The models are the papers' own:

* ``model='adacomp'``: the CNN of specs/adacomp_gsp.md 001-4 (conv 3x3x32, pool, conv 3x3x32,
  pool, dense 128, dense 10; exactly 211,690 parameters), truncated-normal(0.1) weights and
  0.1 biases as AdaComp's code, per-image standardisation;
* ``model='lenet5'``: classic LeNet-5 on the canvas padded to 32 x 32 (61,706 parameters).

Workers get IID shares of the pool (AdaComp: "1/n of the training set").
"""

from __future__ import annotations

from rog_ros.workloads.base import seeded, Workload
import torch
from torch import nn

MODELS = ('adacomp', 'lenet5')


class AdaCompCNN(nn.Sequential):
    """AdaComp's MNIST CNN: 211,690 parameters (spec 001-4)."""

    def __init__(self):
        super().__init__(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(7 * 7 * 32, 128), nn.ReLU(), nn.Linear(128, 10))
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, std=0.1, a=-0.2, b=0.2)
                nn.init.constant_(m.bias, 0.1)


class LeNet5(nn.Sequential):
    """LeNet-5 on 32 x 32 inputs: 61,706 parameters (spec 002-3)."""

    def __init__(self):
        super().__init__(
            nn.ZeroPad2d(2), nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def _strokes(count: int, g: torch.Generator, size: int = 28, width: float = 1.1):
    """``count`` anti-aliased line segments between random points, [count, size, size]."""
    a = 5 + (size - 10) * torch.rand(count, 2, generator=g)
    b = 5 + (size - 10) * torch.rand(count, 2, generator=g)
    yy, xx = torch.meshgrid(torch.arange(size, dtype=torch.float32),
                            torch.arange(size, dtype=torch.float32), indexing='ij')
    p = torch.stack([yy, xx], -1).reshape(1, -1, 2)                 # [1, P, 2]
    ab = (b - a).unsqueeze(1)                                         # [count, 1, 2]
    t = (((p - a.unsqueeze(1)) * ab).sum(-1) / (ab * ab).sum(-1).clamp(min=1e-6)).clamp(0, 1)
    nearest = a.unsqueeze(1) + t.unsqueeze(-1) * ab
    dist2 = ((p - nearest) ** 2).sum(-1)
    return torch.exp(-dist2 / (2 * width ** 2)).reshape(count, size, size)


def make_images(n: int, templates: torch.Tensor, g: torch.Generator, shift: int = 3,
                noise: float = 0.25):
    """``n`` samples (uint8 [n, 1, 28, 28], labels) of the class ``templates``."""
    classes = templates.shape[0]
    labels = torch.randint(classes, (n,), generator=g)
    pad = nn.functional.pad(templates, (shift, shift, shift, shift))
    dy = torch.randint(0, 2 * shift + 1, (n,), generator=g)
    dx = torch.randint(0, 2 * shift + 1, (n,), generator=g)
    rows = (dy.view(n, 1, 1) + torch.arange(28).view(1, 28, 1))
    cols = (dx.view(n, 1, 1) + torch.arange(28).view(1, 1, 28))
    img = pad[labels.view(n, 1, 1), rows, cols]
    img = img * (0.6 + 0.6 * torch.rand(n, 1, 1, generator=g))
    stray = _strokes(64, g)
    img = img + 0.5 * stray[torch.randint(64, (n,), generator=g)]
    img = img + noise * torch.randn(img.shape, generator=g)
    return (img.clamp(0, 1) * 255).round().to(torch.uint8).unsqueeze(1), labels


def _standardise(x: torch.Tensor) -> torch.Tensor:
    x = x.float() / 255.0
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    std = x.std(dim=(1, 2, 3), keepdim=True).clamp(min=1.0 / 28)
    return (x - mean) / std


def make_glyphs(model='adacomp', train=12000, eval_samples=2000, batch_size=10, lr=0.1,
                momentum=0.0, compute_time_s=0.01, target_accuracy=0.9, seed=0):
    """
    Build the glyphs workload (< 1 s).

    Parameters
    ----------
    model : str
        'adacomp' (211,690-parameter CNN, default) or 'lenet5'.
    train, eval_samples : int
        Pool and held-out sizes.
    batch_size, lr, momentum : int, float, float
        AdaComp's b = 10 and alpha = 0.1 (plain SGD) by default.
    compute_time_s : float
        Nominal seconds per iteration.
    target_accuracy : float
        Time-to-target threshold.
    seed : int
        Seed of the glyphs, the samples and the model initialisation.

    """
    if model not in MODELS:
        raise ValueError(f'model must be one of {MODELS}, got {model!r}')
    g = torch.Generator().manual_seed(seed)
    templates = _strokes(30, g).reshape(10, 3, 28, 28).amax(1)      # 3 strokes per class
    train_xy = make_images(train, templates, g)
    eval_xy = make_images(eval_samples, templates, g)
    cls = AdaCompCNN if model == 'adacomp' else LeNet5
    split = torch.Generator().manual_seed(seed + 1)
    order = torch.randperm(train, generator=split)

    def partitions(n):
        return list(order.chunk(n)) if n <= train else []

    return Workload(
        'glyphs', lambda: seeded(seed, cls), None, train_xy, partitions, eval_xy,
        batch_size=batch_size, target_accuracy=target_accuracy, compute_time_s=compute_time_s,
        lr=lr, momentum=momentum, transform=_standardise,
        info={'what': 'generated 28x28 stroke glyphs, 10 classes (MNIST stand-in)',
              'model': model})
