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
The launch descriptions of launch/*.launch.py: fleet and robot plans as launch_ros Nodes.

Import-guarded: without ROS 2 this module imports fine and ``generate*`` raise a clear error,
so the launch files can be parsed and tested anywhere. Every setting of
:mod:`rog_ros.nodes.settings` is a launch argument (empty = from the config file, else the
default). Nodes receive their parameters as command-line flags; launch_ros appends
``--ros-args -r __node:=<name>`` (and ``-r __ns:=`` under a ``PushRosNamespace`` of an
including launch file), which the nodes resolve like rcl does (:mod:`rog_ros.nodes.ros_names`:
the node moves in the graph, its topics stay the fleet's). Unless the user set
them, ``RMW_IMPLEMENTATION`` selects Cyclone DDS and ``CYCLONEDDS_URI`` the shipped Wi-Fi
configuration; ``server_host:=`` and ``peers:=`` are added to either configuration as unicast
peers (:func:`rog_ros.nodes.robot.robot_environment`).
"""

from __future__ import annotations

import difflib
import os
import sys
import time

from rog_ros.nodes.plan import LAUNCH_ARGUMENTS, launch_overrides, \
    load_parameter_file, plan
from rog_ros.nodes.respawn import (
    check_respawn, crashed, describe_exit, parse_respawn, RESPAWN_DELAY_S)
from rog_ros.nodes.robot import (ROBOT_ARGUMENTS, robot_environment, robot_plan,
                                 server_node_environment, split_peers)

try:
    from launch import LaunchDescription
    from launch.actions import (
        DeclareLaunchArgument, IncludeLaunchDescription, LogInfo, OpaqueFunction,
        RegisterEventHandler, SetEnvironmentVariable, TimerAction)
    from launch.event_handlers import OnProcessExit
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node
except ImportError:  # no ROS 2 here: generate() explains
    LaunchDescription = None

ROBOT_LAUNCH_ARGUMENTS = dict(LAUNCH_ARGUMENTS, **ROBOT_ARGUMENTS)
"""Launch arguments of robot.launch.py: every setting, role, rank, server_host, peers."""
FLEET_LAUNCH_ARGUMENTS = dict(LAUNCH_ARGUMENTS, peers=ROBOT_ARGUMENTS['peers'])
"""Launch arguments of fleet.launch.py, mpcol.launch.py and eacol.launch.py."""
LAUNCH_SYSTEM_ARGUMENTS = frozenset(('launch-prefix', 'launch-prefix-filter', 'emulate_tty',
                                     'ros_namespace'))
"""Launch arguments that launch and launch_ros read themselves, declared by no launch file:
``ros2 launch --launch-prefix P`` adds ``launch-prefix:=P`` (``--launch-prefix-filter``
likewise) to the file's arguments, every process honours ``launch-prefix`` and
``emulate_tty``, every Node ``ros_namespace``. Never refused as unknown."""
SIGTERM_AFTER_S = 30
"""Seconds ``ros2 launch`` waits after forwarding Ctrl-C (SIGINT) before it sends SIGTERM.

A stopped server writes its summary, model and checkpoint then, a worker its model; launch's
default of 5 s cut a large model's write short, and a node that gets a second signal leaves
without writing. ``docker stop`` must allow more (docker/compose.yaml: 60 s)."""


def config_file(name: str) -> str:
    """``config/<name>``: installed share directory of rog_ros, else the source tree."""
    try:
        from ament_index_python.packages import get_package_share_directory
        path = os.path.join(get_package_share_directory('rog_ros'), 'config', name)
        if os.path.isfile(path):
            return path
    except (ImportError, LookupError):
        pass
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(root, 'config', name)


def node_specs(values: dict, default_config: str) -> list:
    """Return the fleet plan for launch-argument strings ``values`` (pure)."""
    config = values.get('config') or default_config
    overrides = launch_overrides({k: v for k, v in values.items() if k in LAUNCH_ARGUMENTS})
    overrides.setdefault('epoch', time.time())   # one trace clock for every node of this launch
    return plan(load_parameter_file(config) if config else {}, overrides)


def robot_node_specs(values: dict, default_config: str) -> list:
    """Return one robot's NodeSpecs for launch-argument strings ``values`` (pure)."""
    config = values.get('config') or default_config
    overrides = launch_overrides({k: v for k, v in values.items() if k in LAUNCH_ARGUMENTS})
    role = str(values.get('role') or '').strip()
    rank = str(values.get('rank') or '').strip()
    # as rog robot: a worker robot says which one it is (two robots left at a default 0
    # would both train as worker 0), a server robot has no rank
    if role == 'worker' and not rank:
        raise ValueError('role:=worker needs rank:=K (0..workers-1), the worker rank of this '
                         'robot')
    if role == 'server' and rank:
        raise ValueError(f'role:=server takes no rank (got rank:={rank}); leave rank:= out')
    if rank and not rank.isdigit():
        raise ValueError(f'launch argument rank:={rank!r} is not a non-negative integer')
    return robot_plan(role, int(rank or 0), load_parameter_file(config) if config else {},
                      overrides)


def launch_environment(values: dict, environ=None, one_host: bool = False) -> dict:
    """
    Return the environment a launch sets: defaults, and the peers added to the DDS settings.

    The user's variables win, except that ``server_host`` and ``peers`` are appended to a
    ``CYCLONEDDS_URI`` of the user's (or of the images' entry point) instead of being ignored.
    ``one_host`` (fleet.launch.py: every robot on this machine, as ``rog fleet``'s): its
    workers holding the fleet key with ``robot_keys`` on is meant, and they do not warn.
    """
    from rog_ros.nodes.connect import FLEET_KEY_SAID_ENV
    environ = os.environ if environ is None else environ
    env = robot_environment(environ, str(values.get('server_host') or ''),
                            split_peers(values.get('peers')))
    if one_host:
        env[FLEET_KEY_SAID_ENV] = '1'
    return env


def command_line_arguments(context, launch_file: str, argv=None) -> dict:
    """
    Return ``{name: value}`` of the ``name:=value`` arguments given to ``launch_file`` itself.

    ``ros2 launch`` keeps its command line's launch arguments in ``context.argv`` and passes
    them to the file it was given, which is ``launch_file`` when the command line (``argv``,
    default ``sys.argv``) names it: ``rog_ros <file name>`` or a path to it. Launched from
    another launch file (which includes ours), the command line's arguments are that file's,
    and its entries in the launch configurations (its own, ``SetLaunchConfiguration``'s) say
    nothing of ours: nothing is returned then, nor without a command line (a plain dict).
    """
    given = getattr(context, 'argv', None)
    if not given or not launch_file:
        return {}
    argv = sys.argv if argv is None else argv
    words = [w for w in argv if ':=' not in w]
    base = os.path.basename(launch_file)
    ours = any(a == 'rog_ros' and b == base for a, b in zip(words, words[1:])) or any(
        os.path.basename(w) == base and _same_file(w, launch_file) for w in words)
    if not ours:
        return {}
    return dict(a.split(':=', 1) for a in given if ':=' in a and not a.startswith(':='))


def _same_file(path: str, other: str) -> bool:
    """Tell whether ``path`` and ``other`` are one existing file (False if either is not)."""
    try:
        return os.path.isfile(path) and os.path.samefile(path, other)
    except OSError:
        return False


def unknown_arguments(given: dict, declared, launch_file: str) -> str:
    """
    Say which of ``given`` (``{name: value}``) ``launch_file`` does not declare ('' if none).

    ``ros2 launch`` ignores an argument no launch file declares: ``stalenes:=3`` ran with the
    default staleness, without a word. Each unknown one is named with the closest declared
    argument (``difflib``), or with the launch file of ours that takes it (``role:=`` is
    robot.launch.py's). Those of the launch system (``LAUNCH_SYSTEM_ARGUMENTS``) are known.
    """
    name = os.path.basename(launch_file)
    parts = []
    for key, value in given.items():
        if key in declared or key in LAUNCH_SYSTEM_ARGUMENTS:
            continue
        part = f'{key}:={value}'
        if key in ROBOT_LAUNCH_ARGUMENTS:
            part += ' (an argument of robot.launch.py, one robot of a fleet)'
        else:
            close = difflib.get_close_matches(key, list(declared), n=1)
            part += f' (did you mean {close[0]}?)' if close else ''
        parts.append(part)
    if not parts:
        return ''
    return (f'{name} has no launch argument {", ".join(parts)}; ros2 launch would ignore it '
            f'and run with the default: ros2 launch rog_ros {name} --show-args lists those '
            'it takes')


def declared_arguments(description) -> set | None:
    """
    Return the names of the launch arguments ``description`` declares, its includes' too.

    ``ros2 launch`` gives its command line's arguments to every launch file it includes, as
    ``--show-args`` lists them: an argument that a launch file included by ours declares is
    taken there, and was refused (only the file's own were known). Followed as launch follows
    them (``describe_sub_entities``, conditional ones too, an include read without a launch
    context). None when an include cannot be read so (its path needs a launch
    configuration): its arguments are unknown, and nothing is refused.

    An included file is read once: launch loads it again at each look, new objects each
    time. Every entity seen is kept until the walk ends: an ``id`` names one object only
    while it lives, and a later include's objects at the addresses of freed ones were taken
    for seen (their arguments refused).
    """
    names, seen, stack = set(), {}, [description]
    while stack:
        entity = stack.pop()
        if id(entity) in seen:
            continue
        seen[id(entity)] = entity
        if isinstance(entity, DeclareLaunchArgument):
            names.add(entity.name)
        if isinstance(entity, IncludeLaunchDescription):
            included = (entity.launch_description_source
                        .try_get_launch_description_without_context())
            if included is None:
                return None
            stack.append(included)          # (its describe_sub_entities: a second load)
        else:
            stack.extend(entity.describe_sub_entities())
        for _, entities in entity.describe_conditional_sub_entities():
            stack.extend(entities)
    return names


def _require_ros() -> None:
    if LaunchDescription is None:
        raise RuntimeError('launch files need ROS 2 (launch, launch_ros); without ROS 2 run '
                           '`rog fleet` (one host) or `rog robot` (one robot), which start the '
                           'same nodes')


def _describe(arguments: dict, specs_of, one_host: bool = False,
              launch_file: str = None) -> object:
    def _nodes(context):
        given = command_line_arguments(context, launch_file)
        declared = declared_arguments(description) if given else None
        unknown = unknown_arguments(given, declared, launch_file or '') if declared else ''
        if unknown:     # before any node starts or any setting is read
            raise ValueError(unknown)
        values = {k: LaunchConfiguration(k).perform(context) for k in arguments}
        variables = launch_environment(values, one_host=one_host)
        env = [SetEnvironmentVariable(k, v) for k, v in variables.items()]
        specs = specs_of(values)
        server_env = {}                             # (a worker robot has no server node)
        if any(spec.role == 'server' for spec in specs):
            server_env = server_node_environment(
                dict(os.environ, **variables),
                lambda said: print(f'[WARN] [launch]: {said}', file=sys.stderr))
        limit = parse_respawn(values.get('respawn'))
        check_respawn(limit, specs)
        out = env
        for spec in specs:
            def make(spec=spec):
                extra = {'additional_env': server_env} if spec.role == 'server' and server_env \
                    else {}
                return Node(package='rog_ros', executable=spec.executable, name=spec.name,
                            arguments=spec.argv(), output='screen',
                            sigterm_timeout=str(SIGTERM_AFTER_S), **extra)
            if limit and spec.role in ('server', 'worker'):
                out += respawning(make, spec.name, limit)
            else:
                out.append(make())
        return out

    args = [DeclareLaunchArgument(k, default_value='', description=d)
            for k, d in arguments.items()]
    # (checked as the launch file leaves it: one that adds an include to it is seen)
    description = LaunchDescription(args + [OpaqueFunction(function=_nodes)])
    return description


def respawning(make, name: str, limit: int) -> list:
    """
    Return ``make()``'s Node and a handler that starts it again after a crash (``respawn``).

    launch_ros's ``respawn=True`` would also restart a node that finished, and Humble cannot
    limit it: this handler restarts only crashes (``rog_ros.nodes.respawn.crashed``), at most
    ``limit`` times, ``RESPAWN_DELAY_S`` after each.
    """
    left = [limit]

    def watch(node):
        return RegisterEventHandler(OnProcessExit(target_action=node, on_exit=on_exit))

    def on_exit(event, context):
        code = event.returncode
        if not crashed(code):
            return None
        if left[0] <= 0:
            return [LogInfo(msg=f'{name} {describe_exit(code)}; not restarted: its {limit} '
                                'restarts (respawn) are used up')]
        left[0] -= 1
        again = make()
        return [LogInfo(msg=f'{name} {describe_exit(code)}; restarting it from its state in '
                            f'{RESPAWN_DELAY_S:g} s ({left[0]} more restarts allowed)'),
                TimerAction(period=RESPAWN_DELAY_S, actions=[again, watch(again)])]

    first = make()
    return [first, watch(first)]


def generate(default_config: str, launch_file: str = None):
    """
    Return the one-host fleet's LaunchDescription (server, workers, netmon).

    ``launch_file``: the calling launch file (``__file__``), whose command-line arguments are
    checked against those it declares, with the launch files it includes
    (``declared_arguments``, ``unknown_arguments``); None checks nothing.
    """
    _require_ros()
    return _describe(FLEET_LAUNCH_ARGUMENTS, lambda values: node_specs(values, default_config),
                     one_host=True, launch_file=launch_file)


def generate_robot(default_config: str, launch_file: str = None):
    """Return one robot's LaunchDescription (``role:=server|worker rank:=K``), as ``generate``."""
    _require_ros()
    return _describe(ROBOT_LAUNCH_ARGUMENTS,
                     lambda values: robot_node_specs(values, default_config),
                     launch_file=launch_file)
