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
Pre-trained starting weights shipped with rog_ros, so that every machine starts alike.

Why: pre-training runs a thousand optimiser steps, and another CPU (other vector kernels)
or another torch release rounds each of them differently. The same code gave MPCOL starts
61% apart in norm and 3.5 points apart in accuracy under torch 2.0.1 and 2.13, and another
target and other times after it on an Intel machine than on an AMD one. A fleet adapts one
shared model, and a comparison between machines should compare protocols, not roundings of
a pre-training. So the workloads' default configurations start from weights made once and
shipped in ``pretrained/`` (``python -m rog_ros.workloads.shipped mpcol`` or ``eacol`` makes
them again); any other configuration (other workload options) is pre-trained on first use,
as before.

Each file is checked against ``pretrained/SHA256SUMS`` before it is loaded (weights only): a
damaged or unlisted file is pre-trained instead, with one line on stderr.
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path
import platform
import sys
import warnings

from rog_ros import file_identity

SHIPPED_DIR = Path(__file__).resolve().parent / 'pretrained'
SHIPPED_WORKLOADS = {'mpcol': 'mpcol', 'eacol': 'eacol'}
"""The workloads whose default start is shipped: name -> module with ``pretrain_default``."""
SUMS_FILE = 'SHA256SUMS'


def file_name(name: str, key: str) -> str:
    """Return the file name of workload ``name``'s shipped start for cache key ``key``."""
    return f'{name}-{key}.pt'


def _recorded_sums(folder: Path) -> dict:
    """Return ``{file name: sha256}`` of ``folder``'s ``SHA256SUMS`` (empty if it has none)."""
    try:
        text = (folder / SUMS_FILE).read_text(encoding='ascii')
    except (OSError, UnicodeDecodeError):
        return {}
    sums = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            sums[parts[1].lstrip('*')] = parts[0].lower()
    return sums


def shipped_start(name: str, key: str, folder: Path = SHIPPED_DIR) -> dict | None:
    """
    Return the shipped start of workload ``name`` for cache key ``key``, or None.

    The dict holds ``state`` (the model's state_dict), ``pretrain_loss`` and ``made_with``
    (torch, Python, CPU and date of the machine that pre-trained it). None where no file is
    shipped for this key (other options: pre-train here), or where the file does not match
    its recorded SHA-256 or cannot be read (said in one line, then pre-trained here).
    """
    path = folder / file_name(name, key)
    if not path.exists():
        return None
    recorded = _recorded_sums(folder).get(path.name)
    try:
        actual = file_identity.sha256_hex(path)
    except OSError as err:
        return _unusable(path, f'cannot be read ({err.strerror or err})')
    if recorded != actual:
        return _unusable(path, 'does not match its SHA-256 in ' + SUMS_FILE if recorded
                         else 'is not listed in ' + SUMS_FILE)
    import torch
    try:
        with warnings.catch_warnings():     # torch 2.0's own loader warns of its internals
            warnings.filterwarnings('ignore', message='TypedStorage is deprecated')
            start = torch.load(path, map_location='cpu', weights_only=True)
    except Exception as err:  # noqa: B902 - any unreadable file is pre-trained instead
        return _unusable(path, f'cannot be loaded ({type(err).__name__})')
    if not isinstance(start, dict) or not isinstance(start.get('state'), dict):
        return _unusable(path, 'holds no state_dict')
    return start


def start_for(name: str, options: dict, code_version: str) -> dict | None:
    """Return ``shipped_start`` for the cache key of ``options`` under ``code_version``."""
    from rog_ros.workloads.cache import cache_key
    return shipped_start(name, cache_key(name, options, code_version))


def origin(start: dict) -> str:
    """Say where a shipped start was made: ``shipped (torch 2.13.0+cpu, AMD EPYC)``."""
    made = start.get('made_with') or {}
    return f"shipped (torch {made.get('torch', '?')}, {made.get('cpu', '?')})"


def _unusable(path: Path, why: str) -> None:
    """Say in one line that a shipped start is not used, and why; return None."""
    print(f'rog_ros: the shipped pre-trained start {path} {why}: pre-training here instead',
          file=sys.stderr, flush=True)
    return None


def made_with() -> dict:
    """Describe this machine for a shipped file: torch, Python, CPU and the date."""
    import torch
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo', encoding='utf-8') as f:
            cpu = next((ln.split(':', 1)[1].strip() for ln in f
                        if ln.startswith('model name')), cpu)
    except OSError:
        pass
    return {'torch': str(torch.__version__), 'python': platform.python_version(), 'cpu': cpu,
            'date': datetime.date.today().isoformat()}


def write_shipped(name: str, key: str, state: dict, pretrain_loss: float,
                  folder: Path = SHIPPED_DIR) -> Path:
    """Write a shipped start for ``name`` and ``key`` and record its SHA-256; its path."""
    from rog_ros.workloads.cache import atomic_save
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name(name, key)
    atomic_save({'state': state, 'pretrain_loss': float(pretrain_loss),
                 'made_with': made_with()}, path)
    sums = _recorded_sums(folder)
    sums[path.name] = file_identity.sha256_hex(path)
    lines = ''.join(f'{digest}  {fname}\n' for fname, digest in sorted(sums.items()))
    (folder / SUMS_FILE).write_text(lines, encoding='ascii')
    return path


def main(argv=None) -> int:
    """Pre-train a workload's default configuration here and ship its weights."""
    parser = argparse.ArgumentParser(
        prog='python -m rog_ros.workloads.shipped', allow_abbrev=False,
        description='Pre-train the default configuration of a workload on this machine and '
                    'write its weights into rog_ros/workloads/pretrained/ with their SHA-256 '
                    '(for maintainers: after a change of its data or pre-training code, with '
                    "the workload's CODE_VERSION raised). Every machine then starts from "
                    'these weights.')
    parser.add_argument('workload', choices=sorted(SHIPPED_WORKLOADS), help='the workload')
    args = parser.parse_args(argv)
    import importlib
    module = importlib.import_module(f'rog_ros.workloads.{SHIPPED_WORKLOADS[args.workload]}')
    key, state, loss = module.pretrain_default()
    path = write_shipped(args.workload, key, state, loss)
    print(f'{path}: {path.stat().st_size / 1e6:.1f} MB, pre-training loss {loss:.4f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
