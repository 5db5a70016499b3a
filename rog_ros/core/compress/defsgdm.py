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
Worker-side DEFSGDM preconditioning: Nesterov momentum and weight decay (specs/rog.md 6.4).

The learning rate is *not* applied here: the server multiplies by lr/N when it aggregates,
so a changed learning rate needs no re-scaling of the workers' accumulators.
"""

from __future__ import annotations

import torch


class MomentumPreconditioner:
    """
    d = g + mu*m (Nesterov) or m (heavy ball), with m = mu*m + g, plus decoupled decay.

    Parameters
    ----------
    momentum : float, default 0.9
        The artifact's value; 0 disables momentum (d = g).
    nesterov : bool, default True
        Nesterov look-ahead, as in the artifact.
    weight_decay : float, default 5e-4
        Added as ``w * weight_decay / (1 - momentum)`` after momentum, as the artifact does, so
        that the decay's steady-state effect equals plain SGD's.

    """

    def __init__(self, n_params: int, momentum: float = 0.9, nesterov: bool = True,
                 weight_decay: float = 5e-4, dtype=torch.float32):
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f'momentum must be in [0, 1), got {momentum}')
        if weight_decay < 0:
            raise ValueError(f'weight_decay must be >= 0, got {weight_decay}')
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)
        self.weight_decay = float(weight_decay)
        self.buf = torch.zeros(n_params, dtype=dtype) if momentum > 0 else None

    def set_momentum(self, momentum: float, weight_decay: float, like: torch.Tensor) -> None:
        """
        Change momentum and decay between two gradients (a momentum schedule).

        The buffer is kept; one is created (zeros ``like``) when momentum starts from 0.
        """
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f'momentum must be in [0, 1), got {momentum}')
        if weight_decay < 0:
            raise ValueError(f'weight_decay must be >= 0, got {weight_decay}')
        if self.buf is None and momentum > 0:
            self.buf = torch.zeros_like(like)
        self.momentum, self.weight_decay = float(momentum), float(weight_decay)

    def load_buffer(self, buf: torch.Tensor | None, like: torch.Tensor) -> None:
        """Restore a saved momentum buffer (None: none was saved; a missing one is created)."""
        if buf is None:
            return
        if self.buf is None:
            self.buf = torch.zeros_like(like)
        self.buf.copy_(buf)

    def __call__(self, g: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Write the preconditioned direction for gradient ``g`` at weights ``w`` into out."""
        if self.buf is None:
            out.copy_(g)
        else:
            self.buf.mul_(self.momentum).add_(g)
            if self.nesterov:
                torch.add(g, self.buf, alpha=self.momentum, out=out)
            else:
                out.copy_(self.buf)
        if self.weight_decay:
            out.add_(w, alpha=self.weight_decay / (1.0 - self.momentum))
        return out
