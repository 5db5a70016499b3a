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
Registry of systems that bring their own engines: AdaComp, GSP, AET-SGD, FLEET and kin.

BSP, SSP, FLOWN and Rog are policies of the shared ServerEngine/WorkerEngine pair and need no
entry here. A system whose protocol differs in structure (per-coordinate staleness, group
servers, peers without a server) registers a *runner*: ``runner(cfg, progress) ->
RunRecorder``, with ``cfg`` the :class:`rog_ros.sim.simulator.SimConfig` of the run. The runner
drives that system's sans-I/O engines over the same traces, links, workloads and metrics as
``simulate``, so ``rog sim`` and ``rog compare`` treat every system alike.

Runners live one module per system family in :mod:`rog_ros.sim.runners` and call
:func:`register` at import; they are discovered on first lookup, so adding a system touches no
shared file.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, Dict, Optional

_RUNNERS: Dict[str, Callable] = {}
_DESCRIPTIONS: Dict[str, str] = {}
_discovered = False


def register(name: str, runner: Callable, description: str = '') -> None:
    """Make ``name`` (lower case, e.g. ``'adacomp'``) runnable by ``rog sim``/``rog compare``."""
    key = name.strip().lower()
    if not key or ':' in key:
        raise ValueError(f'system name must be non-empty and without ":", got {name!r}')
    _RUNNERS[key] = runner
    _DESCRIPTIONS[key] = description


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    from rog_ros.sim import runners
    for info in pkgutil.iter_modules(runners.__path__):
        importlib.import_module(f'{runners.__name__}.{info.name}')


def lookup(spec: str) -> Optional[Callable]:
    """Return the runner for a system spec (``'name'`` or ``'name:arg'``), or None."""
    _discover()
    return _RUNNERS.get(spec.split('#')[0].partition(':')[0].strip().lower())


def names() -> Dict[str, str]:
    """Return the registered system names with their one-line descriptions."""
    _discover()
    return dict(sorted(_DESCRIPTIONS.items()))
