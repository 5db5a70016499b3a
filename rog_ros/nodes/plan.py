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
The fleet plan: which nodes a fleet runs and with which parameters (pure, no ROS, no I/O).

``ros2 launch rog_ros fleet.launch.py`` and ``rog fleet`` both start exactly the nodes this
module plans, so a fleet behaves the same with and without ROS 2. Parameters merge in this
order, later wins:

1. built-in defaults (:data:`DEFAULTS`);
2. a ROS 2 parameter file (``config/fleet.yaml``): the ``/**`` section for every node, then
   the ``rog_server`` / ``rog_worker`` / ``netmon`` sections;
3. overrides (launch arguments, ``rog fleet`` options).

A node receives its parameters as command-line options (``eval_every`` -> ``--eval-every``),
the one interface that works for ``ros2 launch``, ``ros2 run`` and plain processes alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import sys

from rog_ros import checks
from rog_ros.nodes import settings
from rog_ros.nodes.routing import netmon_name

ROLE_KEYS = {exe: tuple(s.name for s in settings.for_role(exe)
                        if s.name not in ('rank', 'record', 'fleet_key_file'))
             for exe in settings.NODES}
"""Executable -> parameters the plan passes it (from the settings table; the fleet hands the
key over in the environment and records the bag itself)."""
DEFAULTS = settings.defaults()
AGREED = ('workload', 'workload_options', 'sync', 'staleness', 'init_model', 'seed', 'lr',
          'chunk_bytes', 'namespace', 'bus', 'robot_keys')
"""Settings every node of one fleet must share (a server and workers that disagree on them
train different things or never meet); ``workers`` is checked on its own."""
ALL_NODES = '/**'


@dataclass(frozen=True)
class NodeSpec:
    """One process of the fleet."""

    name: str                       # unique node name: rog_server, rog_worker_0, netmon
    executable: str                 # rog_server | rog_worker | netmon (console script)
    parameters: dict = field(default_factory=dict)   # key -> value (None: not passed)
    role: str = ''                  # 'server', 'worker', 'netmon'
    rank: int = -1                  # worker rank, -1 otherwise
    ros_args: tuple = ()            # after --ros-args in command() (rog fleet: -r __ns:=)

    @property
    def module(self) -> str:
        """Return the Python module whose ``main()`` runs the node."""
        return f'rog_ros.nodes.{self.executable}'

    def argv(self) -> list:
        """Return the node's command-line options (``None`` values are left out)."""
        out = []
        for key, value in self.parameters.items():
            if value is None:
                continue
            if isinstance(value, (list, tuple)):
                value = ','.join(str(v) for v in value)
            out += ['--' + key.replace('_', '-'), str(value)]
        return out

    def command(self, python: str = sys.executable) -> list:
        """Return a command line that runs the node without ROS 2."""
        ros = ['--ros-args', *self.ros_args] if self.ros_args else []
        return [python, '-m', self.module] + self.argv() + ros


def yaml_parameters(doc: dict, where: str = 'parameter file') -> dict:
    """Return ``{node_name: {key: value}}`` from a ROS 2 parameter file's parsed YAML."""
    return settings.file_sections(doc, where)


def load_parameter_file(path, label: str = 'parameter file') -> dict:
    """
    Read a ROS 2 parameter YAML file (see :func:`yaml_parameters`).

    ``label`` names the file in the error of a file that cannot be opened (``--config``:
    how the user gave it), a sentence instead of Python's ``[Errno 2] ...``.
    """
    import yaml
    with settings.open_parameter_file(path, label) as fh:
        try:
            doc = settings.load_yaml_document(fh)
        except UnicodeDecodeError:
            raise checks.ConfigError(f'parameter file {path}: not a text file in UTF-8 (a '
                                     'ROS 2 parameter YAML file is expected)') from None
        except yaml.YAMLError as err:
            mark = getattr(err, 'problem_mark', None)
            where = f' line {mark.line + 1}' if mark is not None else ''
            raise checks.ConfigError(f'parameter file {path}{where}: not valid YAML '
                                     f'({getattr(err, "problem", None) or "syntax"})') from None
    if doc is not None and not isinstance(doc, dict):
        raise checks.ConfigError(f'parameter file {path}: expected a mapping of node names')
    return yaml_parameters(doc, f'parameter file {path}')


def resolve(file_params=None, overrides=None) -> dict:
    """
    Return per-executable parameters after merging defaults, file sections and overrides.

    Returns ``{'rog_server': {...}, 'rog_worker': {...}, 'netmon': {...}}`` with every
    accepted key, typed and range-checked by the settings table; unknown keys and bad values
    raise ConfigError (a ValueError) naming the key (a typo must not be silently ignored).
    """
    file_params = {section: settings.split_sync_spec(params, f'parameter file {section}')
                   for section, params in _without_rclpy_parameters(file_params or {}).items()}
    overrides = settings.split_sync_spec({k: v for k, v in (overrides or {}).items()
                                          if v is not None})
    known = set(DEFAULTS)
    taken = [ALL_NODES] + list(ROLE_KEYS)
    for section in file_params:
        if section not in taken:     # a typo, or a node's own section: never applied here
            raise checks.ConfigError(
                f'parameter file section {section!r}: rog fleet, rog robot and the launch '
                f'files apply the sections {", ".join(taken)} only (a setting for one robot '
                'goes on its own command line or in a file of its own); node-name sections '
                'apply to nodes started with --ros-args --params-file')
    for section, params in list(file_params.items()) + [('overrides', overrides)]:
        unknown = sorted(set(params) - known)
        if unknown:
            raise checks.ConfigError(f'unknown parameter(s) {unknown} in {section}; known: '
                                     f'{sorted(known)}')
    for params in file_params.values():     # a file's values must have the declared type
        for key, value in params.items():
            listed = isinstance(value, (list, tuple))
            if listed and key == 'nodes':
                continue        # netmon's ranks: the list rog fleet itself writes for it
            if listed and settings.BY_NAME[key].kind is not str:
                raise checks.ConfigError(f'{_opt(key)} in the parameter file is a list, '
                                         f'{value!r}; it takes one value')
            # (a list for a text setting: the setting says how to write it as one text)
            settings.BY_NAME[key].parse(value, strict=True)
    resolved = {}
    for exe, keys in ROLE_KEYS.items():
        merged = dict(DEFAULTS)
        merged.update(file_params.get(ALL_NODES, {}))
        merged.update(file_params.get(exe, {}))
        merged.update(overrides)
        for key, value in merged.items():
            if not isinstance(value, (list, tuple)):
                merged[key] = settings.BY_NAME[key].parse(value)
        resolved[exe] = dict({k: merged[k] for k in keys}, netmon=merged['netmon'])
    return resolved


def _without_rclpy_parameters(file_params: dict) -> dict:
    """Drop rclpy's own parameters (``use_sim_time: false``) from a file's sections."""
    try:
        return {section: {k: v for k, v in params.items()
                          if not settings.rclpy_parameter(k, v, f'parameter file {section}')}
                for section, params in file_params.items()}
    except ValueError as err:
        raise checks.ConfigError(str(err)) from None


def _opt(key: str) -> str:
    return f"{key} (--{key.replace('_', '-')})"


def _check_nodes(name, value, n):
    if isinstance(value, str):
        try:
            value = [int(v) for v in value.split(',') if v.strip()]
        except ValueError:
            raise checks.ConfigError(f'{name} must be comma-separated node ranks, got '
                                     f'{value!r}') from None
    if not isinstance(value, (list, tuple)):
        raise checks.ConfigError(f'{name} must be a list of node ranks, got {value!r}')
    for v in value:
        checks.integer(name, v, -1, n - 1)


_CHECKS = {
    'workload': lambda k, v, n: checks.workload(k, v),
    'trace': lambda k, v, n: checks.trace(k, v, allow_none=True),
    'nodes': lambda k, v, n: v is None or _check_nodes(k, v, n),
    'namespace': lambda k, v, n: checks.namespace(k, v),
    'out': lambda k, v, n: checks.text(k, v),
    'interface': lambda k, v, n: checks.text(k, v),
    'device': lambda k, v, n: _check_device(k, v),
    'model_out': lambda k, v, n: v is None or _check_model_out(k, v),
    # written when netmon ends: a path it cannot write lost a whole drive's record
    'record_trace': lambda k, v, n: v in (None, '') or checks.output_file(k, v),
}
"""What a declared type and range cannot say (a known workload, an existing trace file, ranks
below N, non-empty names): parameter -> check(name, value, n_workers), ConfigError naming the
key. Types, ranges and choices come from :mod:`rog_ros.nodes.settings` while resolving."""


def _check_model_out(key: str, value) -> None:
    from rog_ros.nodes.model_file import model_out_file
    try:
        model_out_file(value)
    except ValueError as err:
        raise checks.ConfigError(f'{key}: {err}') from None


def _check_device(key: str, value) -> None:
    if str(value).strip().lower() in ('auto', 'cpu'):
        return        # always usable: only a CUDA device needs torch to be checked
    from rog_ros.nodes.compute_device import resolve_device
    try:
        resolve_device(value)
    except ValueError as err:
        raise checks.ConfigError(f'{key}: {err}') from None


def _check_init_model(workload: str, path: str, seen: dict, options: str = None) -> None:
    """Check that ``path`` holds weights that fit ``workload``'s model (once per pair)."""
    if seen.get('init_model fits') == (path, workload, options):
        return
    from rog_ros.nodes.prepare_workload import check_start, OPTIONS
    # (a child: this process may run for the whole run); it checks the options first
    why = check_start(workload, path, options)
    if why:
        raise checks.ConfigError(why if why.startswith(f'{OPTIONS}: ')
                                 else f"{_opt('init_model')}: {why}")
    seen['init_model fits'] = (path, workload, options)


def _check_workload_options(workload: str, text, seen: dict) -> None:
    """
    Check ``workload_options`` against the builder of ``workload`` (once per pair).

    A malformed pair, a key given twice, a key the builder does not take or a value of the
    wrong kind: one ConfigError line naming the setting, before any node starts.
    """
    if not text or seen.get('workload_options fit') == (workload, text):
        return
    from rog_ros.nodes.prepare_workload import check_options, OPTIONS
    why = check_options(workload, text)    # (a child: reading the builder imports torch)
    if why:
        raise checks.ConfigError(why if why.startswith(f'{OPTIONS}: ') else f'{OPTIONS}: {why}')
    seen['workload_options fit'] = (workload, text)


def validate(params: dict, built_later: bool = False) -> None:
    """
    Check every resolved parameter of every executable before anything starts.

    Raises ConfigError (a ValueError) with one line naming the key and option, e.g.
    ``trace (--trace): 'missing.csv' is neither a preset (...) nor an existing file``.
    ``built_later``: the caller builds the workload before any node starts, in a child that
    checks ``workload_options`` first, in the same words (``rog fleet``: ``prepare``); they
    are not checked here then, in a child of their own (torch and the user's module loaded
    once more, about 2 s). Nor are they where ``init_model`` is given: its check's child
    checks them first.
    """
    n = params['rog_server']['workers']
    checks.integer(_opt('workers'), n, 1, 1024)
    seen = {}
    for exe in ROLE_KEYS:
        for key, value in params[exe].items():
            if seen.get(key, object()) == (value,):
                continue                  # the same value, checked for another node
            if key in _CHECKS:
                _CHECKS[key](_opt(key), value, n)
            seen[key] = (value,)
    for exe in ROLE_KEYS:
        if 'workload' in params[exe] and not built_later and not params[exe].get('init_model'):
            _check_workload_options(params[exe]['workload'],
                                    params[exe].get('workload_options'), seen)
    for exe in ROLE_KEYS:
        if params[exe].get('init_model'):
            _check_init_model(params[exe]['workload'], params[exe]['init_model'], seen,
                              params[exe].get('workload_options'))
    for exe in ROLE_KEYS:
        if params[exe].get('workers', n) != n:
            raise checks.ConfigError('every node of a fleet needs the same number of workers')
    for key in AGREED:     # a parameter file's executable sections may set them apart
        values = {exe: params[exe][key] for exe in ROLE_KEYS if key in params[exe]}
        if len(set(map(repr, values.values()))) > 1:
            said = ', '.join(f'{exe} {value!r}' for exe, value in values.items())
            raise checks.ConfigError(f'{_opt(key)} differs between the nodes ({said}); every '
                                     'node of a fleet needs the same value: set it under /** '
                                     'or on the command line')
    srv = params['rog_server']
    if int(srv.get('min_workers', 1)) > n:
        raise checks.ConfigError(f"{_opt('min_workers')}: the quorum {srv['min_workers']} "
                                 f'exceeds the {n} workers of the fleet')
    from rog_ros.nodes import push_systems
    push_systems.check(srv)
    if push_systems.is_push(srv['sync']):
        return
    from rog_ros.nodes.params import policy_spec
    try:
        from rog_ros.protocol.policies import make_policy
        make_policy(policy_spec(_Args(srv)))
    except ValueError as err:
        raise checks.ConfigError(f"{_opt('sync')}/{_opt('staleness')}: {err}") from None


def check_given_staleness(sync: str, staleness) -> None:
    """
    Refuse a ``--staleness`` the user gave for a system without a threshold.

    BSP and the push systems have none: the flag was dropped without a word (the summary said
    ``staleness 0``), as ``rog sim`` already refuses it.
    """
    from rog_ros.nodes import push_systems
    name = str(sync).strip().lower()
    if staleness is not None and (name == 'bsp' or push_systems.is_push(name)):
        raise checks.ConfigError(f'--staleness does not apply to --sync {sync} (it has no '
                                 'staleness threshold); leave --staleness out')


class _Args:
    """Attribute view of a parameter dict (what the nodes' argparse namespace offers)."""

    def __init__(self, params: dict):
        self.__dict__.update(params)


def plan(file_params=None, overrides=None, built_later: bool = False) -> list:
    """
    Return the fleet's NodeSpecs: server, workers 0..N-1, then netmon (if enabled).

    ``built_later``: see :func:`validate` (``rog fleet`` builds the workload before its
    nodes start, and that checks the workload options).
    """
    params = resolve(file_params, overrides)
    validate(params, built_later)
    srv = params['rog_server']
    n = int(srv['workers'])
    specs = [NodeSpec('rog_server', 'rog_server', _strip(srv), 'server')]
    wrk = params['rog_worker']
    for r in range(n):
        specs.append(NodeSpec(f'rog_worker_{r}', 'rog_worker', {'rank': r, **_strip(wrk)},
                              'worker', r))
    mon = params['netmon']
    if mon['netmon']:
        nodes = mon['nodes'] if mon['nodes'] is not None else list(range(n))
        specs.append(NodeSpec(netmon_name(), 'netmon', {**_strip(mon), 'nodes': nodes},
                              'netmon'))
    return specs


def _strip(params: dict) -> dict:
    return {k: v for k, v in params.items() if k != 'netmon'}


LAUNCH_ARGUMENTS = dict(settings.launch_arguments(),
                        config="ROS 2 parameter file (default: this launch file's "
                               'config/*.yaml)')
"""Launch arguments of launch/*.launch.py -> description (one per setting, plus config)."""


def launch_overrides(values: dict) -> dict:
    """
    Return overrides from launch-argument strings: empty means "not given", values are parsed.

    ``config`` is not an override (it names the file); ValueError names a bad value.
    """
    for key in values:
        if key != 'config' and key not in LAUNCH_ARGUMENTS:
            raise ValueError(f'unknown launch argument {key!r}')
    return settings.launch_overrides({k: v for k, v in values.items() if k != 'config'})
