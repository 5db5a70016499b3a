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
Workload registry: `get(name, **options) -> Workload`, `register(name, factory)`, `names()`.

A name of the form `package.module:function` is a user's builder, imported on first use by
every process that asks for it (a fleet's nodes cannot see a `register` call in the user's
own script).

Built-ins (factories import their modules lazily, so importing this package stays cheap):

* 'mpcol': route-planning policy adapting to a new working space (`mpcol.make_mpcol`);
* 'eacol': image classifier adapting to fog (`eacol.make_eacol`);
* 'glyphs': generated MNIST-like digits with AdaComp's CNN or LeNet-5 (`glyphs.make_glyphs`);
* 'toy': logistic regression on synthetic data, instant, for protocol tests (`toy.make_toy`);
* 'chaos': a wider toy (128 features, 32 classes: 33 rows, 4k parameters, several chunks per
  transfer) for `rog chaos`'s real-fleet fault scenarios.

A user's own task (any `nn.Module` + tensors + metric) is a `Workload` built by a factory and
registered under a new name; see docs/workloads.md.

``Workload`` (torch) is imported on first use: checking a workload's name (fleet settings, in
a robot's supervisor and launch process) needs the registry, not torch.
"""

from __future__ import annotations

import importlib
import inspect
import json

from rog_ros.workloads.equalise import balance_batch_sizes, suggest_sleep

_FACTORIES = {}
# Built workloads by (name, options): a simulator comparing 4 systems x 5 seeds asks for the
# same workload 20 times; rendering and corrupting its data again each time costs seconds.
# Workloads are read-only after construction, so sharing one object between runs is safe.
_BUILT = {}
_BUILT_MAX = 8


def register(name, factory):
    """
    Register `factory(**options) -> Workload` under `name` (replacing an earlier one).

    Parameters
    ----------
    name : str
        Registry key used by `get`, launch files and the CLI (`workload:=name`).
    factory : callable
        Builds the workload from keyword options; must be deterministic for given options.

    """
    if not isinstance(name, str) or not name:
        raise ValueError('workload name must be a non-empty string')
    if not callable(factory):
        raise TypeError(f'factory for {name!r} is not callable')
    _FACTORIES[name] = factory
    for key in [k for k in _BUILT if k[0] == name]:
        del _BUILT[key]


def get(name, fresh=False, **options):
    """
    Return the workload registered as `name`, built with `options`.

    Parameters
    ----------
    name : str
        A name from `names()`, or a user's builder as ``package.module:function``.
    fresh : bool
        Build a new object even if this process built one with the same options already;
        default False (the factory's result is remembered for the 8 latest option sets).
    **options
        Passed to the factory (see its docstring, e.g. `mpcol.make_mpcol`).

    Raises
    ------
    ValueError
        One line for every way the name finds no workload: unknown, a module that cannot be
        imported, a user's builder that raises (its error is the ``__cause__``) or returns
        something other than a `Workload`.

    """
    factory = _factory(name)
    key = (name, json.dumps(options, sort_keys=True, default=str))
    if fresh or key not in _BUILT:
        built = _build(name, factory, options)
        if len(_BUILT) >= _BUILT_MAX:
            del _BUILT[next(iter(_BUILT))]
        _BUILT[key] = built
    return _BUILT[key]


def _build(name, factory, options):
    """
    Call ``factory(**options)`` and check that it gave a `Workload`.

    A user's builder (``module:function``) is code this package knows nothing of: whatever
    it raises becomes one ValueError line naming it and the line of the user's code it came
    from (the commands print ValueError, not a traceback). The built-in builders' own errors
    are one line already and pass unchanged. A workload the package does not ship is tried
    once on a few samples (`self_check`), so that a wrong label or a model that does not fit
    its data is said now, not as a traceback mid-run or as a fleet with no evaluations.
    """
    from rog_ros.workloads.base import Workload
    from rog_ros.workloads.self_check import check_workload
    from rog_ros.workloads.users_code import where
    if is_import_path(name) and name not in _FACTORIES:
        try:
            built = factory(**options)
        except Exception as err:
            raise ValueError(f'workload {name}: the builder failed: {type(err).__name__}: '
                             f'{_one_line(err)}{where(err)}') from err
    else:
        built = factory(**options)
    if not isinstance(built, Workload):
        raise ValueError(f'workload {name}: the builder returned {type(built).__name__}, not a '
                         'rog_ros.workloads.Workload (docs/workloads.md)')
    if not hasattr(factory, 'builder'):         # not one of ours (they set it, see below)
        check_workload(name, built)
        built.users_code = name
    return built


def _one_line(err) -> str:
    """Return the message of ``err`` on one line (a KeyError's without its quotes)."""
    text = err.args[0] if isinstance(err, KeyError) and len(err.args) == 1 else err
    return ' '.join(str(text).split()) or '(no message)'


def names():
    """List the registered workload names, sorted."""
    return sorted(_FACTORIES)


def is_import_path(name) -> bool:
    """Tell whether ``name`` has the form ``package.module:function`` (a user's builder)."""
    module, colon, attr = str(name).partition(':')
    return bool(colon) and attr.isidentifier() and all(
        part.isidentifier() for part in module.split('.'))


def import_path_problem(name):
    """
    Say why the builder ``package.module:function`` cannot be found, or None if it can.

    Cheap: the module is looked up, not imported (a robot's supervisor checks its settings
    without torch), so a missing function is found when the workload is built.
    """
    import importlib.util
    module = name.partition(':')[0]
    _cwd_importable()
    try:
        found = importlib.util.find_spec(module) is not None
    except Exception as err:      # a parent package missing, broken, or raising on import
        return f'cannot find module {module!r} ({type(err).__name__}: {_one_line(err)})'
    if not found:
        return (f'cannot find module {module!r}: every node imports it, so install its '
                'package, or start the nodes in the folder that holds it (or name that folder '
                'in PYTHONPATH)')
    return None


def _cwd_importable() -> None:
    """
    Let a user's module in the working directory be imported, as ``python -m`` would.

    The ``rog`` command's own path starts at its script's folder, not the working directory,
    while the nodes it starts (``python -m``) see the working directory first: without this
    the same name would be found by the nodes and refused by the command that starts them.
    Appended, so that it never shadows an installed package.
    """
    import os
    import sys
    cwd = os.getcwd()
    if cwd not in sys.path and '' not in sys.path:
        sys.path.append(cwd)


def _factory(name):
    """
    Return the factory of ``name``: a registered one, or a user's builder by import path.

    Why an import path: a fleet's nodes are separate processes (on separate robots), so a
    ``register`` call in the user's own script never reaches them; ``my_tasks:make_task``
    names the builder every node can import for itself (``rog fleet --workload
    my_tasks:make_task``, ``workload:=my_tasks:make_task`` under ROS 2).
    """
    if name in _FACTORIES:
        return _FACTORIES[name]
    if not is_import_path(name):
        raise ValueError(f'unknown workload {name!r}; registered: {", ".join(names())}, or '
                         "your own builder as 'package.module:function'")
    module, _, attr = name.partition(':')
    _cwd_importable()
    try:
        imported = importlib.import_module(module)
    except Exception as err:      # ImportError, or whatever the module's own code raises
        raise ValueError(f'workload {name}: cannot import {module!r} ({type(err).__name__}: '
                         f'{_one_line(err)})') from err
    factory = getattr(imported, attr, None)
    if factory is None and not hasattr(imported, attr):
        raise ValueError(f'workload {name}: module {module!r} has no {attr!r}')
    if not callable(factory):
        raise ValueError(f'workload {name}: {attr!r} is not callable')
    return factory


def builder_parameters(name):
    """
    Return the keyword options the builder of workload `name` takes, or None if any.

    The built-in factories import their builder on call (``builder`` names it), so their
    options are read from the builder's signature; a user's factory from its own. None means
    the factory takes ``**options`` and says no more (every name is passed through).
    """
    factory = _factory(name)
    target = getattr(factory, 'builder', None) or factory
    if isinstance(target, str):
        module, _, attr = target.partition(':')
        target = getattr(importlib.import_module(module), attr)
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):     # no signature to read (a builtin): pass every name
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    return {k: p for k, p in params.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _mpcol(**options):
    from rog_ros.workloads.mpcol import make_mpcol
    return make_mpcol(**options)


def _eacol(**options):
    from rog_ros.workloads.eacol import make_eacol
    return make_eacol(**options)


def _glyphs(**options):
    from rog_ros.workloads.glyphs import make_glyphs
    return make_glyphs(**options)


def _toy(**options):
    from rog_ros.workloads.toy import make_toy
    return make_toy(**options)


def _chaos(**options):
    from rog_ros.workloads.toy import make_toy
    return make_toy(**dict({'features': 128, 'classes': 32, 'compute_time_s': 0.01}, **options))


def _glyphs_lenet5(**options):
    return _glyphs(**{'model': 'lenet5', 'batch_size': 32, 'lr': 0.1, 'momentum': 0.0,
                      'compute_time_s': 0.05, 'target_accuracy': 0.8, **options})


_mpcol.builder = 'rog_ros.workloads.mpcol:make_mpcol'
_eacol.builder = 'rog_ros.workloads.eacol:make_eacol'
_glyphs.builder = _glyphs_lenet5.builder = 'rog_ros.workloads.glyphs:make_glyphs'
_toy.builder = _chaos.builder = 'rog_ros.workloads.toy:make_toy'
register('mpcol', _mpcol)
register('eacol', _eacol)
register('toy', _toy)
register('glyphs', _glyphs)
register('glyphs-lenet5', _glyphs_lenet5)
register('chaos', _chaos)


def __getattr__(name):
    """Import ``Workload`` when it is first asked for (PEP 562): it needs torch."""
    if name == 'Workload':
        from rog_ros.workloads.base import Workload
        return Workload
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


__all__ = ['Workload', 'balance_batch_sizes', 'get', 'names', 'register', 'suggest_sleep']
