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
Local training loops: pre-training of starting checkpoints and a reference fleet emulation.

`pretrain` produces the workloads' starting checkpoints (clean data / known obstacle families).
`emulate_fleet` is plain synchronous SGD over n worker partitions with averaged gradients (BSP
without a network): the yardstick that says how many iterations adaptation needs, used to choose
each workload's budget and target accuracy and by the tests. Both are deterministic for a seed.
"""

from __future__ import annotations

import contextlib
import math

from rog_ros.workloads.cache import report_progress
import torch


@contextlib.contextmanager
def single_thread():
    """
    Run torch on one thread inside the block, restoring the previous count after.

    Small models gain little from intra-op threads, and on a busy machine (CI, a simulator
    running beside nodes) two spinning OpenMP threads on two cores made steps ~50x slower in
    our measurements. One thread also makes the checkpoint independent of the core count.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def pretrain(model, inputs, targets, loss_fn, *, steps, batch_size, lr, seed=0,
             transform=None, weight_decay=5e-4):
    """
    Train `model` in place with AdamW and a cosine schedule.

    Returns the mean training loss of the last 10% of steps.

    Parameters
    ----------
    model : nn.Module
        Trained in place (training mode).
    inputs, targets : tensors
        Training pool (inputs stored compactly, converted per batch by `transform`).
    loss_fn : callable
        `loss_fn(output, target) -> scalar`.
    steps, batch_size : int
        Optimiser steps and samples per step; sampling is epoch-wise without replacement.
    lr : float
        Peak learning rate (cosine decay to 0 after a 5% warm-up).
    seed : int
        Seed of the sampling order.
    transform : callable or None
        `transform(inputs[batch]) -> model inputs`; None is the identity.
    weight_decay : float
        AdamW's decoupled weight decay.

    """
    with single_thread():
        return _pretrain(model, inputs, targets, loss_fn, steps, batch_size, lr, seed,
                         transform or (lambda x: x), weight_decay)


def _pretrain(model, inputs, targets, loss_fn, steps, batch_size, lr, seed, transform,
              weight_decay):
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    warmup = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * s / steps)))
    model.train()
    order, pos, tail = torch.randperm(len(targets), generator=g), 0, []
    for step in range(steps):
        if pos + batch_size > len(order):
            order, pos = torch.randperm(len(targets), generator=g), 0
        b = order[pos:pos + batch_size]
        pos += batch_size
        loss = loss_fn(model(transform(inputs[b])), targets[b])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step >= steps - max(1, steps // 10):
            tail.append(loss.item())
        report_progress('pre-training', step + 1, steps)
    return sum(tail) / len(tail)


def emulate_fleet(workload, n_workers=4, iterations=200, seed=0, eval_every=50, lr=None,
                  momentum=None, return_model=False):
    """
    Adapt like a synchronous fleet without a network: averaged worker gradients, Nesterov SGD.

    Returns
    -------
    list of (iteration, evaluate() dict)
        Evaluated at iteration 0, every `eval_every` iterations and at the end; with
        `return_model`, a tuple (that list, the adapted model).

    """
    with single_thread():
        history, model = _emulate_fleet(workload, n_workers, iterations, seed, eval_every, lr,
                                        momentum)
    return (history, model) if return_model else history


def _emulate_fleet(workload, n_workers, iterations, seed, eval_every, lr, momentum):
    model = workload.make_model()
    lr = workload.lr if lr is None else lr
    momentum = workload.momentum if momentum is None else momentum
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, nesterov=momentum > 0)
    streams = [workload.worker_batches(r, n_workers, seed) for r in range(n_workers)]
    history = [(0, workload.evaluate(model))]
    for it in range(1, iterations + 1):
        opt.zero_grad(set_to_none=True)
        for stream in streams:
            (workload.loss(model, next(stream)) / n_workers).backward()
        opt.step()
        if it % eval_every == 0 or it == iterations:
            history.append((it, workload.evaluate(model)))
    return history, model
