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
The trained model a fleet run leaves behind: ``OUT/model.pt``, a plain PyTorch state_dict.

Robots fine-tune a model in order to use it, so a run's product is the model as well as its
metrics. When the run ends, the server writes the consensus model (the mean of what the
workers hold, the model every evaluation measured) next to ``summary.json``: atomically, and
as a plain ``state_dict`` of tensors, which ``torch.load(path, weights_only=True)`` reads
without running code from the file. ``load_trained`` puts it into the workload's own module.

torch is imported where a model is written or read: ``rog``'s help and argument errors pass
through this module (via ``nodes.run_outputs``), and torch takes seconds to import on a robot.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rog_ros.archives import model_damage
from rog_ros.atomic import atomic_write_with, makedirs_synced, remove_write_leftovers

if TYPE_CHECKING:                            # pragma: no cover - annotations only
    import torch

MODEL_FILE = 'model.pt'


def save_state_dict(path, module: torch.nn.Module) -> int:
    """
    Write ``module``'s state_dict (detached CPU copies) to ``path`` atomically; its bytes.

    The temporary files that earlier saves to ``path`` killed midway left beside it are
    removed first (those no live process writes).
    """
    from rog_ros.nodes.durable import checksums_written
    import torch
    state = {name: t.detach().to('cpu', copy=True) for name, t in module.state_dict().items()}
    written = []

    def _write(f):
        """Serialise into the temporary file itself: no copy of the model's bytes in memory."""
        with checksums_written():  # (read back, they are checked: archives.model_damage)
            torch.save(state, f)
        written.append(f.written)
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    makedirs_synced(folder)
    # a worker's --model-out folder is no output folder whose lock removes these: a robot
    # killed while it saved left one as large as the model beside it, for ever
    remove_write_leftovers(folder, os.path.basename(os.fspath(path)))
    atomic_write_with(path, _write)
    return written[0]


def model_out_file(path) -> str:
    """
    Return the file a robot's model goes to (setting ``model_out``), checked before training.

    A directory (existing, or named with a trailing separator) gets ``model.pt`` inside.
    Raises ValueError (one line) when it could not be written at the end, so that a robot
    does not train for an hour and lose its model; creates nothing.
    """
    path = os.fspath(path)
    if os.path.isdir(path) or path.endswith(os.sep):
        path = os.path.join(path, MODEL_FILE)
    probe = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(probe):        # the nearest existing folder must let us in
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise ValueError(f'{path}: {probe} is a file, not a folder')
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f'{path}: no permission to write in {probe}')
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise ValueError(f'{path}: the file exists and is not writable')
    return path


def load_trained(workload: str, path, **options) -> torch.nn.Module:
    """
    Return the workload's model with the weights of a run's ``model.pt``, in eval mode.

    ``options``: the builder options the run trained with (its ``workload_options``, in its
    summary.json), which may shape the model (toy's ``features``).

    A file whose archive fails its checksums is refused (ValueError, one line): torch.load
    alone loads one with a flipped bit as valid (``archives.model_damage``).

    >>> model = load_trained('mpcol', 'runs/fleet/model.pt')   # doctest: +SKIP
    >>> model = load_trained('my_tasks:make', 'run/model.pt', data_dir='/data')  # doctest: +SKIP
    """
    from rog_ros import workloads          # (the registry: nodes.assembly imports us)
    import torch
    model = workloads.get(workload, **options).make_model()
    why = model_damage(os.fspath(path))
    if why:
        raise ValueError(f'{os.fspath(path)} is damaged ({why}); use another copy of it')
    state = torch.load(os.fspath(path), map_location='cpu', weights_only=True)
    model.load_state_dict(state)
    return model.eval()
