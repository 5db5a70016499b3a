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
Where a worker computes its gradients: the CPU, or a GPU (a Jetson's, through NVIDIA's torch).

Why: the robots carry a GPU (Xavier NX: 384 CUDA cores) that sat idle while every forward and
backward pass ran on the ARM cores. The engine keeps the model as one flat CPU vector (rows,
codec, transfers work on it); on a GPU the model's parameters are views of a device copy of
that vector, refreshed before each computation, and the gradient comes back flat: one
model-sized copy each way per iteration (2.1 MB for ConvMLP-M; the Xavier's CPU and GPU share
their memory). On the CPU the model's parameters are views of the engine's vector itself, as
before (no copy).
"""

from __future__ import annotations

import torch


def resolve_device(spec: str) -> torch.device:
    """
    Return the device of a ``device`` setting; ValueError when it names one torch cannot use.

    ``auto`` never fails: a robot whose torch has no CUDA (a CPU wheel that replaced
    NVIDIA's, a container started without the NVIDIA runtime) trains on its CPU.
    """
    text = str(spec).strip().lower()
    if text == 'auto':
        return torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    try:
        device = torch.device(text)
    except RuntimeError:
        raise ValueError(f'{spec!r} is not a device (auto, cpu, cuda or cuda:N)') from None
    if device.type not in ('cpu', 'cuda'):
        raise ValueError(f'{spec!r} is not a device (auto, cpu, cuda or cuda:N)')
    if device.type == 'cuda':
        if not torch.cuda.is_available():
            raise ValueError(f'{spec!r}: torch {torch.__version__} sees no CUDA device (a CPU '
                             'build, or a container started without --runtime nvidia); use '
                             'auto or cpu')
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f'{spec!r}: torch sees {torch.cuda.device_count()} CUDA '
                             'device(s)')
    return device


def to_device(batch, device: torch.device):
    """Return ``batch`` with every tensor in it (tuples, lists, dicts) on ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (list, tuple)):
        moved = [to_device(item, device) for item in batch]
        return type(batch)(*moved) if hasattr(batch, '_fields') else type(batch)(moved)
    if isinstance(batch, dict):
        return {key: to_device(value, device) for key, value in batch.items()}
    return batch


class DeviceGradients:
    """
    A model bound to a flat parameter vector, computing flat gradients on a device.

    Parameters
    ----------
    model : torch.nn.Module
        The workload's model; its parameters become views of the flat vector (or of its
        device copy).
    layout : rog_ros.core.rows.RowLayout
        Flat order of the parameters.
    flat : Tensor
        The engine's flat CPU parameter vector: the model every computation uses.
    device : torch.device
        Where to compute.
    copy : bool or None
        Compute on a device copy of ``flat`` (None: on every device but the CPU). The tests
        force it on the CPU, where it must give the bound path's gradients bit for bit.

    """

    def __init__(self, model, layout, flat: torch.Tensor, device: torch.device, copy=None):
        self.model, self.layout, self.flat, self.device = model, layout, flat, device
        self.copy = device.type != 'cpu' if copy is None else bool(copy)
        if self.copy:
            model.to(device)        # buffers too (batch-norm statistics stay on the device)
            self.work = torch.empty(flat.shape, dtype=flat.dtype, device=device)
        else:
            self.work = flat
        layout.bind(model, self.work)
        self.params = list(model.parameters())

    def compute(self, loss_of, batch) -> tuple:
        """
        Run ``loss_of(model, batch)`` and its backward pass at the engine's current model.

        Returns ``(flat CPU gradient, loss)``; a parameter without a gradient contributes
        zeros.
        """
        if self.copy:
            self.work.copy_(self.flat)
            batch = to_device(batch, self.device)
        for p in self.params:
            p.grad = None
        loss = loss_of(self.model, batch)
        loss.backward()
        grad = self.layout.flatten([p.grad if p.grad is not None else torch.zeros_like(p)
                                    for p in self.params])
        if self.copy:
            grad = grad.to('cpu')
        return grad, float(loss.detach())
