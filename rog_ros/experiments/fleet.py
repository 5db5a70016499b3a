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

from rog_ros.nodes.params import DEFAULT_DEADLINE_FLOOR

FLEET_KEYS = ('workload', 'sync', 'staleness', 'workers', 'seed', 'lr', 'chunk_bytes', 'window',
              'deadline_floor', 'namespace', 'bus', 'startup_timeout')
"""Parameters every node of a fleet must agree on."""
LINK_KEYS = ('trace', 'trace_scale', 'epoch', 'burst_bytes')
ROLE_KEYS = {
    'rog_server': FLEET_KEYS + LINK_KEYS + ('iterations', 'eval_every', 'out', 'state_dir',
                                            'checkpoint_every'),
    'rog_worker': FLEET_KEYS + LINK_KEYS + ('server_timeout', 'state_dir'),
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
    'record': None, 'netmon': True, 'state_dir': None, 'checkpoint_every': 10,
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
        return yaml_parameters(yaml.safe_load(fh))


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
        resolved[exe] = {k: merged[k] for k in keys} | {'netmon': merged['netmon']}
    return resolved


def plan(file_params=None, overrides=None) -> list:
    """Return the fleet's NodeSpecs: server, workers 0..N-1, then netmon (if enabled)."""
    params = resolve(file_params, overrides)
    srv = params['rog_server']
    n = int(srv['workers'])
    if n < 1:
        raise ValueError(f'workers must be >= 1, got {n}')
    floor = float(srv['deadline_floor'])
    if not 0.0 <= floor <= 10.0:
        raise ValueError(f'deadline_floor must be in [0, 10], got {floor:g}')
    if int(srv['checkpoint_every']) < 1:
        raise ValueError(f'checkpoint_every must be >= 1, got {srv["checkpoint_every"]}')
    for exe in ROLE_KEYS:
        if params[exe].get('workers', n) != n:
            raise ValueError('every node of a fleet needs the same number of workers')
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
