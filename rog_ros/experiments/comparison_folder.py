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
Where a comparison's files are: its meta in ``DIR/summary.json``, each run in ``DIR/runs``.

``rog compare`` writes this layout, and ``rog report`` reads it (a folder, or any folder
below, that holds a comparison); both name the folders the same way from here.
"""

from __future__ import annotations

import json
import os

META_KEYS = ('workload', 'trace', 'workers', 'seeds', 'systems')
"""What a comparison's ``summary.json`` meta must hold for its report to be written again."""


def run_dir(out: str, label: str, seed: int) -> str:
    """Return the folder of one run of a comparison: ``DIR/runs/rog-4-seed0``."""
    return os.path.join(out, 'runs', f'{label.replace(":", "-")}-seed{seed}')


def comparison_meta(out: str) -> dict | None:
    """Return the meta of the comparison in folder ``out``, or None if it holds none."""
    try:
        with open(os.path.join(out, 'summary.json')) as f:
            meta = json.load(f).get('meta')
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(meta, dict) or any(k not in meta for k in META_KEYS):
        return None
    return meta
