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
A run's starting weights from a file: go on adapting where an earlier run stopped.

Robots adapt as their surroundings change (fog this week, a new building the next). A run that
starts from the workload's pre-trained checkpoint throws away what the last run learned; one
started from that run's ``model.pt`` (setting ``init_model``) goes on from it. The server and
every worker apply each other's updates to their own copies of the model, so all of them must
start from the same weights: a file is checked against the workload's model before anything
starts (one line naming what does not fit), and each node names the weights it starts from by a
fingerprint, equal on every machine for equal weights, so robots can be compared at a glance.
"""

from __future__ import annotations

import hashlib
import os
import re

from rog_ros.archives import model_damage
import torch

RUN_MODEL_FILE = 'model.pt'
"""The trained model a fleet run leaves in its output directory (``nodes.model_file``)."""

NESTED_KEYS = ('state_dict', 'model_state_dict')
"""Training checkpoints that keep the state_dict under one of these keys are read too."""

FINGERPRINT_CHARS = 12
HOW_TO_SAVE = 'save one with torch.save(model.state_dict(), path)'


def resolve_path(path) -> str:
    """Return the file ``path`` names (absolute): a file, or a run directory with ``model.pt``."""
    text = os.fspath(path)
    if os.path.isdir(text):
        inner = os.path.join(text, RUN_MODEL_FILE)
        if not os.path.isfile(inner):
            raise ValueError(f'{text} is a directory without {RUN_MODEL_FILE} (a finished '
                             "fleet run's output holds one)")
        return os.path.abspath(inner)
    if not os.path.isfile(text):
        raise ValueError(f'no such file: {text}')
    return os.path.abspath(text)


def read_state(path) -> dict:
    """
    Read a state_dict (parameter name -> tensor) from ``path``, checked, on the CPU.

    ``torch.load(..., weights_only=True)``: a file cannot run code on the robot. Refused with
    one line: a file whose archive fails its checksums (``archives.model_damage``: one
    rog_ros wrote always has them; a user's file without them is read as before), a file
    that is not a state_dict (a whole pickled module, another format), names
    that are not strings, values that are not tensors, and NaN or infinite weights (a diverged
    run's model would spread them to every robot).
    """
    file = resolve_path(path)
    why = model_damage(file)
    if why:
        raise ValueError(f'{file} is damaged ({why}); start from another copy of it')
    try:
        loaded = torch.load(file, map_location='cpu', weights_only=True)
    except Exception as err:     # torch raises pickle, zip and runtime errors alike
        raise ValueError(_unreadable(file, err)) from None
    if isinstance(loaded, dict) and not _all_tensors(loaded):
        nested = [k for k in NESTED_KEYS if isinstance(loaded.get(k), dict)]
        if nested:
            loaded = loaded[nested[0]]
    if not isinstance(loaded, dict) or not loaded or not _all_tensors(loaded):
        what = type(loaded).__name__ if not isinstance(loaded, dict) else \
            'a dict that is not a name -> tensor mapping' if loaded else 'an empty dict'
        raise ValueError(f'{file} holds {what}, not a state_dict; {HOW_TO_SAVE}')
    bad = [name for name, t in loaded.items()
           if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        raise ValueError(f'{file} holds NaN or infinite values in {_some(bad)} (a diverged '
                         'run?); start from an earlier model')
    return loaded


def check_fits(state: dict, model: torch.nn.Module, what: str = 'the model') -> None:
    """Raise ValueError naming every name or shape of ``state`` that ``model`` does not have."""
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    extra = [k for k in state if k not in own]
    shapes = [f'{k} is {_shape(state[k])} in the file, {_shape(own[k])} in {what}'
              for k in own if k in state and tuple(state[k].shape) != tuple(own[k].shape)]
    wrong_kind = [k for k in own if k in state and own[k].is_floating_point()
                  and not state[k].is_floating_point()]
    problems = []
    if missing:
        problems.append(f'missing {_some(missing)}')
    if extra:
        problems.append(f'not in {what}: {_some(extra)}')
    if shapes:
        problems.append('; '.join(shapes[:3]) + (f' (+{len(shapes) - 3} more)'
                                                 if len(shapes) > 3 else ''))
    if wrong_kind:
        problems.append(f'integer values for the weights {_some(wrong_kind)}')
    if problems:
        raise ValueError(f'does not fit {what}: ' + '; '.join(problems) +
                         ' (a model of another workload or size?)')


def fingerprint(model_or_state) -> str:
    """
    Return a short hash of a model's weights: names, dtypes, shapes and every byte.

    Equal weights give equal fingerprints on every machine and torch version; one changed
    weight gives another. Costs one pass over the model (2 MB: a few milliseconds).
    """
    state = (model_or_state.state_dict() if isinstance(model_or_state, torch.nn.Module)
             else model_or_state)
    h = hashlib.sha256()
    for name, t in state.items():
        t = t.detach().cpu().contiguous()
        h.update(f'{name}|{t.dtype}|{tuple(t.shape)}|'.encode())
        if t.dtype == torch.bfloat16:
            t = t.float()          # numpy has no bfloat16
        h.update(t.reshape(-1).numpy())   # the buffer itself: no model-sized bytes copy
    return h.hexdigest()[:FINGERPRINT_CHARS]


def _unreadable(file: str, err: Exception) -> str:
    """Say why ``torch.load(file, weights_only=True)`` failed, in one line."""
    # torch >= 2.1 names the refused global ('GLOBAL x.y'), torch 2.0 (JetPack 5's) its class
    found = re.search(r'(?:GLOBAL|Unsupported class) ([\w.]+)', str(err))
    if found:
        return (f'{file} holds Python objects, not only tensors (a whole pickled model? '
                f'a safe load refuses {found.group(1)}); {HOW_TO_SAVE}')
    return f'{file} is not a file torch.load reads ({type(err).__name__}); {HOW_TO_SAVE}'


def _all_tensors(d: dict) -> bool:
    return all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in d.items())


def _shape(t: torch.Tensor) -> str:
    return 'x'.join(str(s) for s in t.shape) or 'a scalar'


def _some(names: list, k: int = 4) -> str:
    more = f' (+{len(names) - k} more)' if len(names) > k else ''
    return ', '.join(names[:k]) + more
