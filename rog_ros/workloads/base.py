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
The Workload object: model, starting checkpoint, worker data, loss and metric in one place.

The simulator and the nodes only ever talk to this interface, so any supervised task (a user's
own `nn.Module` + tensors + metric, see docs/workloads.md) is trained by every synchronisation
system the same way as the built-in MPCOL and EACOL:

* `name`, `target_accuracy`, `compute_time_s`, `batch_size`, `lr`, `momentum`
* `make_model()`: a fresh copy of the pre-trained starting model (identical for every call)
* `worker_batches(rank, n_workers, seed)`: endless adaptation batches of one worker's partition
* `loss(model, batch)`: scalar training loss
* `evaluate(model)`: {'accuracy', 'loss'} on the held-out adaptation-domain set (fast)
* `describe()`: what it is, sizes, accuracy before adaptation
"""

from __future__ import annotations

import copy

from rog_ros.workloads.users_code import run_users_code
import torch
from torch.nn import functional as F


def seeded(seed, build):
    """
    Call `build()` with torch's global generator seeded, leaving the caller's state untouched.

    `nn.init` only draws from the global generator; forking it keeps model construction
    deterministic for a seed without disturbing the random streams of the caller (simulator,
    tests) that happen to share the process.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def cross_entropy(output, target):
    """Mean cross-entropy of logits against class indices."""
    return F.cross_entropy(output, target)


def argmax_correct(output, target):
    """Per-sample bool: the top-1 class equals the label."""
    return output.argmax(-1) == target


def checkpoint_source(workload: str) -> str:
    """Say that a run starts from ``workload``'s own pre-trained checkpoint (no file)."""
    return f"workload {workload}'s pre-trained checkpoint"


class Workload:
    """
    A supervised adaptation task on tensors, ready for fleet training.

    Parameters
    ----------
    name : str
        Registry name, e.g. 'eacol'.
    model_fn : callable
        `model_fn() -> nn.Module`, architecture only; the weights come from `initial_state`.
    initial_state : dict or None
        State dict of the pre-trained starting checkpoint; None keeps `model_fn`'s weights (then
        `model_fn` itself must be deterministic).
    train : tuple (inputs, targets)
        The adaptation pool that workers draw batches from; stored compactly (e.g. uint8) and
        turned into model inputs by `transform`.
    partitions : callable
        `partitions(n_workers) -> list of index tensors`, the non-IID split of the pool.
    evaluation : tuple (inputs, targets)
        Held-out adaptation-domain samples for `evaluate`; keep it small enough for < 1 s.
    batch_size : int
        Samples per worker and iteration (before compute equalisation).
    target_accuracy : float
        The accuracy every synchronisation system must reach (time-to-target metric).
    compute_time_s : float
        Device profile: seconds per iteration on a Jetson Xavier NX.
    lr, momentum : float
        Suggested optimiser settings for adaptation (the simulator's default DEFSGDM/SGD).
    transform : callable
        `transform(inputs) -> model inputs` for a batch (e.g. uint8 -> normalised float).
    loss_fn, correct_fn : callable
        `loss_fn(output, target) -> scalar`, `correct_fn(output, target) -> bool per sample`.
    info : dict
        Extra facts for `describe()` (what it is, accuracy before adaptation, ...).

    """

    def __init__(self, name, model_fn, initial_state, train, partitions, evaluation, *,
                 batch_size, target_accuracy, compute_time_s, lr=0.05, momentum=0.9,
                 transform=None, loss_fn=cross_entropy, correct_fn=argmax_correct, info=None):
        if not 0.0 <= target_accuracy <= 1.0:
            raise ValueError(f'target accuracy must be in [0, 1], got {target_accuracy}')
        if batch_size < 1 or compute_time_s <= 0:
            raise ValueError('batch_size must be >= 1 and compute_time_s > 0')
        self.name = name
        self.target_accuracy = float(target_accuracy)  # same for every synchronisation system
        self.compute_time_s = float(compute_time_s)  # Jetson Xavier NX seconds per iteration
        self.batch_size = int(batch_size)  # per worker, before compute equalisation
        self.lr = float(lr)  # suggested adaptation learning rate
        self.momentum = float(momentum)  # suggested (Nesterov) momentum
        self._model_fn = model_fn
        self._initial_state = initial_state
        self._train_x, self._train_y = train
        self._partitions = partitions
        self._partition_cache = {}
        self._eval_x, self._eval_y = evaluation
        self._transform = transform or (lambda x: x)
        self._loss_fn = loss_fn
        self._correct_fn = correct_fn
        self._info = dict(info or {})
        # set by the registry, to the name it was asked by (``my_tasks:make_task``), for a
        # builder the package does not ship: the errors its code raises mid-run become one
        # line naming that and the user's line (`_said`); runs record that name
        self.users_code = ''

    def make_model(self):
        """Build a fresh model holding the pre-trained starting weights, in training mode."""
        model = self._model_fn()
        if self._initial_state is not None:
            model.load_state_dict(self._initial_state)
        return model.train()

    def starting_from(self, path):
        """
        Return this workload starting from the weights in ``path`` instead of its checkpoint.

        ``path``: a state_dict file or a fleet run's output directory (its ``model.pt``),
        checked by ``start_model`` (ValueError naming what does not fit). Data, partitions,
        target and settings stay this workload's: the copy shares them.
        """
        from rog_ros.workloads import start_model
        state = start_model.read_state(path)
        start_model.check_fits(state, seeded(0, self._model_fn), f"workload {self.name}'s model")
        other = copy.copy(self)
        other._initial_state = state
        other._info = {**self._info, 'start_model': start_model.resolve_path(path)}
        return other

    def describe_start(self, name: str | None = None) -> str:
        """
        Say where the starting weights come from: a file, or the pre-trained checkpoint.

        ``name``: the registry name the workload was asked for, when it is not this workload's
        own (an alias: 'chaos' builds a workload named 'toy'); default ``self.name``.
        """
        source = self._info.get('start_model')
        if not source and self.users_code and self._initial_state is None:
            # (a user's builder without a checkpoint: "pre-trained" was not true of it)
            return (f"workload {name or self.users_code}'s model as its builder makes it (no "
                    'pre-trained checkpoint)')
        return source if source else checkpoint_source(name or self.name)

    def data_fingerprint(self):
        """
        Return a short hash of the training pool and the evaluation set (None if not arrays).

        Why: a comparison reuses a stored run when its settings, options and start are
        equal, and a user's builder reading files from disk gives other data under the same
        options. Hashing both sets costs about 40 ms for EACOL's 28 MB (once per object:
        workloads are read-only after construction).
        """
        if not hasattr(self, '_data_fingerprint'):
            import hashlib
            import numpy as np
            digest = hashlib.sha256()
            for part in (self._train_x, self._train_y, self._eval_x, self._eval_y):
                array = part.detach().cpu().numpy() if torch.is_tensor(part) else part
                if not isinstance(array, np.ndarray) or array.dtype == object:
                    self._data_fingerprint = None
                    break
                digest.update(f'{array.dtype.str}{array.shape};'.encode())
                digest.update(memoryview(np.ascontiguousarray(array)).cast('B'))
            else:
                self._data_fingerprint = digest.hexdigest()[:16]
        return self._data_fingerprint

    def partition(self, n_workers):
        """Index tensors of the adaptation pool, one per worker (cached per fleet size)."""
        if n_workers not in self._partition_cache:
            parts = self._partitions(n_workers)
            if len(parts) != n_workers or any(len(p) == 0 for p in parts):
                raise ValueError(f'{self.name}: cannot split the pool over {n_workers} workers')
            self._partition_cache[n_workers] = parts
        return self._partition_cache[n_workers]

    def worker_batches(self, rank, n_workers, seed, batch_size=None):
        """
        Endless iterator of (inputs, targets) batches from worker `rank`'s partition.

        Epochs are reshuffled with a generator seeded by (seed, rank), so every worker of a run
        sees a different, reproducible order. `batch_size` overrides the default (compute
        equalisation by dynamic batching).
        """
        if not 0 <= rank < n_workers:
            raise ValueError(f'rank {rank} outside 0..{n_workers - 1}')
        idx = self.partition(n_workers)[rank]
        size = int(batch_size or self.batch_size)
        g = torch.Generator().manual_seed(int(seed) * 1_000_003 + rank)
        while True:
            if len(idx) < size:
                picks = [idx[torch.randint(len(idx), (size,), generator=g)]]
            else:
                order = idx[torch.randperm(len(idx), generator=g)]
                picks = order[:len(order) - len(order) % size].split(size)
            for b in picks:
                yield self._transform(self._train_x[b]), self._train_y[b]

    def loss(self, model, batch):
        """Scalar training loss of `model` on one (inputs, targets) batch."""
        inputs, targets = batch
        if self.users_code:
            return self._said('the training loss',
                              lambda: self._loss_fn(model(inputs), targets))
        return self._loss_fn(model(inputs), targets)

    def _said(self, what, call):
        """
        Return ``call()``; what it raises becomes one ValueError line naming the user's code.

        A user's loss or metric that fails on a batch the start-up check did not try (a
        label it never saw, a size it did not expect) ended ``rog sim`` in a traceback into
        torch; the line of the user's file that raised is what they need.
        """
        return run_users_code(self.users_code or self.name, what, call)

    @torch.no_grad()
    def evaluate(self, model, chunk=2048, max_samples=None):
        """
        {'accuracy', 'loss', 'samples'} of `model` on the held-out adaptation-domain set.

        The model is put in eval mode and returned to its previous mode afterwards.
        `max_samples` evaluates on an evenly strided subset of that size (the simulator's
        frequent evaluations; strided, so sets stored in class or map order stay balanced).
        """
        if self.users_code:
            return self._said('evaluating the model', lambda: self._evaluate(
                model, chunk, max_samples))
        return self._evaluate(model, chunk, max_samples)

    def _evaluate(self, model, chunk, max_samples):
        """Evaluate as `evaluate` says (its body; that one says the errors of a user's code)."""
        was_training = model.training
        model.eval()
        eval_x, eval_y = self._eval_x, self._eval_y
        if max_samples is not None and int(max_samples) < len(eval_y):
            pick = torch.linspace(0, len(eval_y) - 1, int(max_samples)).long()
            eval_x, eval_y = eval_x[pick], eval_y[pick]
        try:
            loss_sum, correct, n = 0.0, 0, len(eval_y)
            for s in range(0, n, chunk):
                out = model(self._transform(eval_x[s:s + chunk]))
                y = eval_y[s:s + chunk]
                loss_sum += float(self._loss_fn(out, y)) * len(y)
                correct += int(self._correct_fn(out, y).sum())
        finally:
            model.train(was_training)
        return {'accuracy': correct / n, 'loss': loss_sum / n, 'samples': n}

    def describe(self):
        """Describe the workload: sizes, settings and the accuracy before adaptation."""
        model = self.make_model()
        params = list(model.parameters())
        n_params = sum(p.numel() for p in params)
        return {
            'name': self.name,
            'parameters': n_params,
            'parameter_tensors': len(params),
            'rows': _synchronised_rows(params),
            'tensor_rows': sum(p.shape[0] if p.dim() >= 2 else 1 for p in params),
            'gradient_mb_fp32': n_params * 4 / 1e6,
            'adaptation_samples': len(self._train_y),
            'evaluation_samples': len(self._eval_y),
            'batch_size': self.batch_size,
            'target_accuracy': self.target_accuracy,
            'compute_time_s': self.compute_time_s,
            'lr': self.lr,
            'momentum': self.momentum,
            **self._info,
        }


def _synchronised_rows(params) -> int:
    """
    Return how many rows Rog synchronises for these parameters (its policies' layout).

    A tensor below ``small_tensor_threshold`` elements is one row, so this is fewer than the
    tensors' rows (``tensor_rows``), which ``describe`` gave as ``rows`` before: a number no
    transfer, report or log of a run ever showed.
    """
    from rog_ros.core.rows import RowLayout
    from rog_ros.protocol.policies.base import SyncPolicy
    return RowLayout([tuple(p.shape) for p in params],
                     small_tensor_threshold=SyncPolicy.small_tensor_threshold).n_rows
