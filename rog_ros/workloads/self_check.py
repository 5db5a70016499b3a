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
A user's workload tried once on a few samples when it is built, before anything runs.

Why: a builder is the user's code, and its mistakes surfaced late and badly. Labels out of
range ended ``rog sim`` in a torch traceback; a fleet whose every evaluation raised trained to
the end and said "done" with exit status 0 (the error only in the server's log). Here the
start model is built, evaluated on a few held-out samples and given one loss on a few training
samples; every label of a classification pool is checked against the model's outputs. Each
failure is one ``ValueError`` line naming the workload, what failed and where in the user's
code. Cost: one forward pass of at most 8 samples each way, and a min/max over the labels.

The built-in workloads are tested by the test suite and skip this (their results stay
byte-identical: nothing here draws from a random generator the runs use).
"""

from __future__ import annotations

import math

from rog_ros.workloads.base import cross_entropy, seeded
from rog_ros.workloads.users_code import run_users_code, where  # noqa: F401
import torch
from torch.nn import functional as F

SAMPLES = 8
"""Samples of each set the start model is tried on (a forward pass, cheap for any model)."""


def check_workload(name: str, workload) -> None:
    """
    Try ``workload`` (built by ``name``'s builder) once; raise ValueError on what fails.

    Checks, in order: both sample sets are non-empty and have as many labels as inputs; the
    start model builds; it evaluates on a few held-out samples; its loss on a few training
    samples is a finite scalar; the labels of both sets are classes its outputs have (when
    the loss is the cross-entropy and labels are integers).
    """
    seeded(0, lambda: _check(name, workload))


def _check(name: str, wl) -> None:
    """Run the checks of `check_workload` (under a forked, seeded generator)."""
    for what, (x, y) in (('training pool', (wl._train_x, wl._train_y)),
                         ('evaluation set', (wl._eval_x, wl._eval_y))):
        if len(y) == 0:
            raise ValueError(f'workload {name}: its {what} is empty')
        if len(x) != len(y):
            raise ValueError(f'workload {name}: its {what} has {len(x)} inputs and {len(y)} '
                             'labels')
    model = run_users_code(name, 'building its start model', wl.make_model)
    inputs, targets = _few(wl, wl._eval_x, wl._eval_y)[0]
    outputs = run_users_code(name, 'running its start model on a few held-out samples',
                             lambda: _outputs(model, inputs))
    if wl._loss_fn in (cross_entropy, F.cross_entropy) and outputs.dim() >= 2:
        classes = int(outputs.shape[-1])
        for what, y in (('training', wl._train_y), ('evaluation', wl._eval_y)):
            _check_labels(name, what, y, classes)
    run_users_code(name, 'evaluating its start model on a few held-out samples',
                   lambda: (wl._loss_fn(outputs, targets), wl._correct_fn(outputs, targets)))
    loss = run_users_code(name, 'the loss of its start model on a few training samples',
                          lambda: wl.loss(model, _few(wl, wl._train_x, wl._train_y)[0]))
    if not torch.is_tensor(loss) or loss.dim() != 0:
        shape = tuple(loss.shape) if torch.is_tensor(loss) else type(loss).__name__
        raise ValueError(f'workload {name}: its loss must be a scalar tensor (got {shape})')
    value = float(loss.detach())
    if not math.isfinite(value):
        raise ValueError(f'workload {name}: the loss of its start model is {value} on a '
                         'few training samples (inputs or labels with NaN, or a model that '
                         'overflows)')


def _few(wl, x, y):
    """Return a list with one batch of at most `SAMPLES` evenly strided samples, transformed."""
    pick = torch.linspace(0, len(y) - 1, min(SAMPLES, len(y))).long()
    return [(wl._transform(x[pick]), y[pick])]


def _outputs(model, inputs):
    """Return the model's outputs on ``inputs`` in eval mode, without gradients."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return model(inputs)
    finally:
        model.train(was_training)


def _check_labels(name, what, y, classes) -> None:
    """Raise ValueError if integer labels ``y`` are not all in ``0 .. classes - 1``."""
    if not torch.is_tensor(y) or y.dtype.is_floating_point or y.dtype == torch.bool:
        return          # soft labels or another loss's targets: nothing to check here
    low, high = int(y.min()), int(y.max())
    if low < 0 or high >= classes:
        bad = int(((y < 0) | (y >= classes)).sum())
        raise ValueError(f'workload {name}: {bad} {what} label(s) outside 0..{classes - 1} '
                         f'(the model has {classes} outputs; labels span {low}..{high})')
