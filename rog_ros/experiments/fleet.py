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

from rog_ros.experiments import checks
from rog_ros.nodes.params import DEFAULT_DEADLINE_FLOOR

FLEET_KEYS = ('workload', 'sync', 'staleness', 'workers', 'seed', 'lr', 'chunk_bytes', 'window',
              'deadline_floor', 'namespace', 'bus', 'startup_timeout')
"""Parameters every node of a fleet must agree on."""
LINK_KEYS = ('trace', 'trace_scale', 'epoch', 'burst_bytes')
ROLE_KEYS = {
    'rog_server': FLEET_KEYS + LINK_KEYS + ('iterations', 'eval_every', 'out'),
    'rog_worker': FLEET_KEYS + LINK_KEYS + ('server_timeout',),
    'netmon': ('namespace', 'bus', 'workers', 'seed', 'interface', 'rate_hz', 'nodes',
               'record', 'trace', 'trace_scale', 'epoch'),
}
"""Executable -> parameters it accepts."""

DEFAULTS = {
    'workload': 'toy', 'sync': 'rog', 'staleness': 4, 'workers': 3, 'seed': 0, 'lr': None,
    'chunk_bytes': 16384, 'window': 4, 'deadline_floor': DEFAULT_DEADLINE_FLOOR,
    'namespace': '/rog', 'bus': 'auto',
    'startup_timeout': 60.0, 'trace': 'none', 'trace_scale': 1.0, 'epoch': None,
    'burst_bytes': 65536, 'iterations': 100, 'eval_every': 10, 'out': 'rog_run',
    'server_timeout': 120.0, 'interface': 'auto', 'rate_hz': 10.0, 'nodes': None,
    'record': None, 'netmon': True,
}
ALL_NODES = '/**'


@dataclass(frozen=True)
class NodeSpec:
    """One process of the fleet."""

    name: str                       # unique node name: rog_server, rog_worker_0, netmon
    executable: str                 # rog_server | rog_worker | netmon (console script)
    parameters: dict = field(default_factory=dict)   # key -> value (None: not passed)
    role: str = ''                  # 'server', 'worker', 'netmon'
    rank: int = -1                  # worker rank, -1 otherwise

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
        return [python, '-m', self.module] + self.argv()


def yaml_parameters(doc: dict) -> dict:
    """
    Return ``{node_name: {key: value}}`` from a ROS 2 parameter file's parsed YAML.

    Accepts ``node: {ros__parameters: {...}}`` and the wildcard ``/**``; rejects anything
    else with a message naming the offending entry.
    """
    out = {}
    for node, body in (doc or {}).items():
        if not isinstance(body, dict) or 'ros__parameters' not in body:
            raise ValueError(f'parameter file: {node!r} needs a ros__parameters mapping')
        params = body['ros__parameters'] or {}
        if not isinstance(params, dict):
            raise ValueError(f'parameter file: {node}.ros__parameters must be a mapping')
        out[node.lstrip('/') if node != ALL_NODES else node] = dict(params)
    return out


def load_parameter_file(path) -> dict:
    """Read a ROS 2 parameter YAML file (see :func:`yaml_parameters`)."""
    import yaml
    with open(path, encoding='utf-8') as fh:
        try:
            doc = yaml.safe_load(fh)
        except yaml.YAMLError as err:
            mark = getattr(err, 'problem_mark', None)
            where = f' line {mark.line + 1}' if mark is not None else ''
            raise checks.ConfigError(f'parameter file {path}{where}: not valid YAML '
                                     f'({getattr(err, "problem", None) or "syntax"})') from None
    if doc is not None and not isinstance(doc, dict):
        raise checks.ConfigError(f'parameter file {path}: expected a mapping of node names')
    return yaml_parameters(doc)


def resolve(file_params=None, overrides=None) -> dict:
    """
    Return per-executable parameters after merging defaults, file sections and overrides.

    Returns ``{'rog_server': {...}, 'rog_worker': {...}, 'netmon': {...}}`` with every
    accepted key; unknown keys raise ValueError (a typo must not be silently ignored).
    """
    file_params = file_params or {}
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    known = set(DEFAULTS)
    for section, params in list(file_params.items()) + [('overrides', overrides)]:
        unknown = sorted(set(params) - known)
        if unknown:
            raise ValueError(f'unknown parameter(s) {unknown} in {section}; known: '
                             f'{sorted(known)}')
    resolved = {}
    for exe, keys in ROLE_KEYS.items():
        merged = dict(DEFAULTS)
        merged.update(file_params.get(ALL_NODES, {}))
        merged.update(file_params.get(exe, {}))
        merged.update(overrides)
        resolved[exe] = dict({k: merged[k] for k in keys}, netmon=merged['netmon'])
    return resolved


def _opt(key: str) -> str:
    return f"{key} (--{key.replace('_', '-')})"


def _check_nodes(name, value, n):
    if not isinstance(value, (list, tuple)):
        raise checks.ConfigError(f'{name} must be a list of node ranks, got {value!r}')
    for v in value:
        checks.integer(name, v, -1, n - 1)


_CHECKS = {
    'workload': lambda k, v, n: checks.workload(k, v),
    'sync': lambda k, v, n: checks.text(k, v),
    'staleness': lambda k, v, n: checks.integer(k, v, 0),
    'workers': lambda k, v, n: checks.integer(k, v, 1, 1024),
    'seed': lambda k, v, n: checks.integer(k, v, 0),
    'lr': lambda k, v, n: v is None or checks.number(k, v, positive=True),
    'chunk_bytes': lambda k, v, n: checks.integer(k, v, 256, 65000),
    'window': lambda k, v, n: checks.integer(k, v, 1, 1024),
    'deadline_floor': lambda k, v, n: checks.number(k, v, 0.0, 10.0),
    'namespace': lambda k, v, n: checks.text(k, v),
    'bus': lambda k, v, n: _choice(k, v, ('auto', 'dds', 'rclpy')),
    'startup_timeout': lambda k, v, n: checks.number(k, v, positive=True),
    'trace': lambda k, v, n: checks.trace(k, v, allow_none=True),
    'trace_scale': lambda k, v, n: checks.number(k, v, positive=True),
    'epoch': lambda k, v, n: v is None or checks.number(k, v),
    'burst_bytes': lambda k, v, n: checks.integer(k, v, 1),
    'iterations': lambda k, v, n: checks.integer(k, v, 1),
    'eval_every': lambda k, v, n: checks.integer(k, v, 1),
    'out': lambda k, v, n: checks.text(k, v),
    'server_timeout': lambda k, v, n: checks.number(k, v, positive=True),
    'interface': lambda k, v, n: checks.text(k, v),
    'rate_hz': lambda k, v, n: checks.number(k, v, positive=True),
    'nodes': lambda k, v, n: v is None or _check_nodes(k, v, n),
    'record': lambda k, v, n: v is None or checks.text(k, v),
    'netmon': lambda k, v, n: _choice(k, v, (True, False)),
}
"""Parameter -> check(name, value, n_workers); each raises ConfigError naming the key."""


def _choice(name, value, options):
    if value not in options or isinstance(value, bool) != isinstance(options[0], bool):
        raise checks.ConfigError(f'{name} must be one of {", ".join(map(str, options))}, got '
                                 f'{value!r}')
    return value


def validate(params: dict) -> None:
    """
    Check every resolved parameter of every executable before anything starts.

    Raises ConfigError (a ValueError) with one line naming the key and option, e.g.
    ``trace (--trace): 'missing.csv' is neither a preset (...) nor an existing file``.
    """
    n = params['rog_server']['workers']
    checks.integer(_opt('workers'), n, 1, 1024)
    seen = {}
    for exe in ROLE_KEYS:
        for key, value in params[exe].items():
            if seen.get(key, object()) == (value,):
                continue                  # the same value, checked for another node
            _CHECKS[key](_opt(key), value, n)
            seen[key] = (value,)
    for exe in ROLE_KEYS:
        if params[exe].get('workers', n) != n:
            raise checks.ConfigError('every node of a fleet needs the same number of workers')
    srv = params['rog_server']
    from rog_ros.nodes.params import policy_spec
    try:
        from rog_ros.protocol.policies import make_policy
        make_policy(policy_spec(_Args(srv)))
    except ValueError as err:
        raise checks.ConfigError(f"{_opt('sync')}/{_opt('staleness')}: {err}") from None


class _Args:
    """Attribute view of a parameter dict (what the nodes' argparse namespace offers)."""

    def __init__(self, params: dict):
        self.__dict__.update(params)


def plan(file_params=None, overrides=None) -> list:
    """Return the fleet's NodeSpecs: server, workers 0..N-1, then netmon (if enabled)."""
    params = resolve(file_params, overrides)
    validate(params)
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
        specs.append(NodeSpec('netmon', 'netmon', {**_strip(mon), 'nodes': nodes}, 'netmon'))
    return specs


def _strip(params: dict) -> dict:
    return {k: v for k, v in params.items() if k != 'netmon'}


LAUNCH_ARGUMENTS = {
    'workload': 'workload name (toy, mpcol, eacol); empty: from the config file',
    'sync': 'rog, ssp or bsp; empty: from the config file',
    'staleness': 'staleness threshold S; empty: from the config file',
    'workers': 'number of workers; empty: from the config file',
    'trace': 'per-worker link trace: preset, CSV file or none; empty: from the config file',
    'namespace': 'topic namespace; empty: from the config file',
    'config': "ROS 2 parameter file (default: this launch file's config/*.yaml)",
}
"""Launch arguments of launch/*.launch.py -> description."""
_INT_KEYS = ('staleness', 'workers')


def launch_overrides(values: dict) -> dict:
    """
    Return overrides from launch-argument strings: empty means "not given", numbers are parsed.

    ``config`` is not an override (it names the file); ValueError names a bad number.
    """
    out = {}
    for key, text in values.items():
        if key == 'config' or text is None or str(text).strip() == '':
            continue
        if key not in LAUNCH_ARGUMENTS:
            raise ValueError(f'unknown launch argument {key!r}')
        text = str(text).strip()
        if key in _INT_KEYS:
            try:
                out[key] = int(text)
            except ValueError:
                raise ValueError(f'launch argument {key}:={text!r} is not an integer') from None
        else:
            out[key] = text
    return out
