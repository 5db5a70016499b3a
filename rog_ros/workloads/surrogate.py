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
Surrogate compute for simulating big models: a small real model carrying a big model's ballast.

Simulating EACOL with the paper's ConvMLP-M (16.9 M parameters) on a CPU costs ~2 s per
forward/backward of a 32-image batch, ~14 s per evaluation and ~40 min of pre-training:
hours per comparison. What the network-bound regime needs from the model is the size and row
structure of its messages and a real learning signal, not its arithmetic. ``Ballasted`` wraps
a small model that really trains (``convmlp-cpu``, 0.29 M parameters) and adds *ballast*
parameters with the big model's shapes (ConvMLP-M: 226 tensors, 33,307 rows at the artifact's
1000-element threshold), so every message has the big model's bytes and rows (2.16 MB instead
of 2.12 MB: the small model's rows come on top).

The ballast does not enter the forward pass. Its gradient is the small model's real gradient,
tiled over the ballast (``fill_surrogate_grads``, called by the simulator after each backward
pass): real magnitudes and real dynamics, so ATP's magnitude ordering mixes ballast rows and
real rows as it would mix the big model's rows, and the real rows are withheld as often as the
rest. What the surrogate does not capture: withholding a ballast row costs no accuracy, so the
accuracy cost of partial transfers is felt only through the real rows; compute time is the
device profile's (virtual), as for every simulated workload. The fleet nodes always run the real
model.
"""

from __future__ import annotations

import torch
from torch import nn

_SHAPES: dict = {}


def model_shapes(size: str, num_classes: int) -> list:
    """Parameter shapes of ``convmlp(size, num_classes)`` (built once per process)."""
    key = (size, num_classes)
    if key not in _SHAPES:
        from rog_ros.workloads.convmlp import convmlp
        _SHAPES[key] = [tuple(p.shape) for p in convmlp(size, num_classes=num_classes,
                                                        seed=0).parameters()]
    return _SHAPES[key]


class Ballasted(nn.Module):
    """
    ``inner`` plus zero-initialised ballast parameters of the given shapes.

    Parameters
    ----------
    inner : nn.Module
        The model that computes the output and really learns.
    shapes : list of tuple
        Shapes of the ballast parameters (e.g. ``model_shapes('m', 20)``).

    """

    def __init__(self, inner: nn.Module, shapes):
        super().__init__()
        self.inner = inner
        self.ballast = nn.ParameterList([nn.Parameter(torch.zeros(s)) for s in shapes])
        self.n_ballast = sum(p.numel() for p in self.ballast)

    def forward(self, x):
        return self.inner(x)

    @torch.no_grad()
    def fill_surrogate_grads(self) -> None:
        """Set the ballast's gradient to the inner model's gradient, tiled (one pass)."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p)
                 for p in self.inner.parameters()]
        real = torch.cat([g.reshape(-1) for g in grads])
        n = real.numel()
        if n == 0 or self.n_ballast == 0:
            return
        if getattr(self, '_gbuf', None) is None:
            self._gbuf = torch.empty(self.n_ballast, dtype=real.dtype)
            pos = 0
            for p in self.ballast:
                p.grad = self._gbuf[pos:pos + p.numel()].view_as(p)
                pos += p.numel()
        whole = self.n_ballast // n * n
        self._gbuf[:whole].view(-1, n).copy_(real.expand(self.n_ballast // n, n))
        self._gbuf[whole:].copy_(real[:self.n_ballast - whole])
