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
r"""
One robot of a real fleet: which nodes it runs, their environment, and ``rog robot``.

    ros2 launch rog_ros robot.launch.py role:=worker rank:=1 workers:=3 server_host:=10.0.0.10
    rog robot --role worker --rank 1 --workers 3 --server-host 10.0.0.10      # without ROS 2

The server robot runs ``rog_server`` and ``netmon``; worker robot K runs ``rog_worker`` (node
``rog_worker_K``) and ``netmon`` (node ``netmon_K``, reporting for rank K). Parameters merge
as everywhere (:mod:`rog_ros.nodes.settings`): defaults < config file < arguments. Links are
real: nothing is shaped unless a ``trace`` is given. Unless the user set them, the environment
selects Cyclone DDS (``RMW_IMPLEMENTATION=rmw_cyclonedds_cpp``) with the shipped Wi-Fi
configuration (``CYCLONEDDS_URI``); ``server_host`` and ``peers`` are added as unicast
discovery peers (for access points that drop multicast) to that file or to the user's own
``CYCLONEDDS_URI``. ``robot.launch.py`` and ``rog robot`` both use :func:`robot_plan` and
:func:`robot_environment`, so they start the same processes. ``rog robot --role server``
moves an earlier run in its ``out`` to ``out/previous`` before its nodes start, its own nodes'
logs (in ``--logs``) with its results, as ``rog fleet`` does, unless its server resumes from
the checkpoint in its ``state_dir``; ``rog robot --role worker`` moves its own nodes' earlier
logs and its model file (``--model-out``, as ``rog_worker_K.model.pt``; copied when it is the
``--init-model``) to ``LOGS/previous`` (``./rog_robot_logs/previous``), unless its worker
resumes from its state file in ``state_dir``.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

from rog_ros.nodes import settings
from rog_ros.nodes.plan import check_given_staleness, NodeSpec, resolve, validate
from rog_ros.nodes.respawn import (
    check_respawn, crashed, describe_exit, MAX_RESPAWNS, parse_respawn, RESPAWN_DELAY_S)
from rog_ros.nodes.routing import netmon_name

ROLES = ('server', 'worker')
ROBOT_ARGUMENTS = {
    'role': 'server or worker: which robot of the fleet this is',
    'rank': 'worker rank 0..N-1 (worker robots)',
    'server_host': 'address of the server robot: a unicast DDS discovery peer (workers)',
    'peers': 'comma-separated addresses of the other robots: unicast discovery peers',
    'config': 'ROS 2 parameter file (default: config/fleet.yaml of this package)',
    'respawn': 'restart the training node after a crash, at most this many times (0: never); '
               'needs state_dir',
}
"""Launch arguments of robot.launch.py besides the settings."""
RMW = 'rmw_cyclonedds_cpp'
_STOPPED_BY = {130: 'interrupted', 143: 'terminated (SIGTERM)', 129: 'hung up (SIGHUP)'}
"""Exit status of a stopped ``rog robot`` -> how its closing line says it."""
ROBOT_MODEL = 'rog_robot_model.pt'
"""Where ``rog robot --role worker`` writes the robot's trained model unless told otherwise."""
ROBOT_NODE_SETTINGS = {
    'server_timeout': 'worker robots',
    'interface': "the robot's netmon",
}
"""Settings of one node of the robot (not the fleet's) that ``rog robot`` takes as flags too:
the ones a robot's own hardware or coverage decides, so far only in a --config file."""


def robot_plan(role: str, rank: int = 0, file_params=None, overrides=None) -> list:
    """
    Return the NodeSpecs of one robot: ``[rog_server, netmon]`` or ``[rog_worker_K, netmon_K]``.

    Raises ValueError (one line) for an unknown role, a rank outside 0..workers-1 or a bad
    parameter.
    """
    if role not in ROLES:
        raise ValueError(f'role must be server or worker, got {role!r}')
    overrides = dict(overrides or {})
    params = resolve(file_params, overrides)
    validate(params)
    n = params['rog_server']['workers']
    mon = {k: v for k, v in params['netmon'].items() if k != 'netmon'}
    if role == 'server':
        srv = {k: v for k, v in params['rog_server'].items() if k != 'netmon'}
        specs = [NodeSpec('rog_server', 'rog_server', srv, 'server')]
        mon['nodes'] = [-1]
        name = netmon_name()
    else:
        if not 0 <= int(rank) < n:
            raise ValueError(f'rank must be in 0..{n - 1}, got {rank}')
        wrk = {k: v for k, v in params['rog_worker'].items() if k != 'netmon'}
        specs = [NodeSpec(f'rog_worker_{rank}', 'rog_worker', dict(wrk, rank=int(rank)),
                          'worker', int(rank))]
        mon['nodes'] = [int(rank)]
        name = netmon_name(rank)
    if params['netmon']['netmon']:
        specs.append(NodeSpec(name, 'netmon', mon, 'netmon', int(rank) if role == 'worker'
                              else -1))
    return specs


def robot_environment(environ, server_host: str = '', peers=()) -> dict:
    """
    Return the variables to set for the robot's nodes (the user's own settings win).

    ``RMW_IMPLEMENTATION`` when not already in ``environ``; ``CYCLONEDDS_URI``: the shipped
    Wi-Fi file when not in ``environ``, and ``server_host`` and ``peers`` as unicast peers in
    either case. Added after the user's own value (Cyclone merges comma-separated sources),
    the peers join the user's configuration instead of being dropped for it (as in the
    images, whose entry point always sets ``CYCLONEDDS_URI``).

    ``server_host`` is listed at the server node's port in ``$ROS_DOMAIN_ID``'s domain
    (:func:`rog_ros.transport.cyclone_settings.server_peer`): one datagram per announcement
    instead of 32 with Cyclone 0.10 (33 with 11), every worker robot on the air; the server
    node takes that index (:func:`server_node_environment`). A ``peers`` entry naming the
    server's host without a port (every robot listed on every robot) is that one entry: listed
    without a port it cost 32 datagrams more per announcement (33 with 11). Other robots stay
    listed without a port: their participants take the first free index, which no robot knows
    of another (docs/faults.md); a user who knows one gives ``host:port``.
    """
    from rog_ros.transport.cyclone_config import cyclone_uri, domain_id_from_env, peer_fragment
    from rog_ros.transport.cyclone_settings import server_peer
    out = {}
    if not environ.get('RMW_IMPLEMENTATION'):
        out['RMW_IMPLEMENTATION'] = RMW
    hosts = [h.strip() for h in peers if h and h.strip()]
    if server_host and server_host.strip():
        hosts = [h for h in hosts if not _names_host(h, server_host)]
        hosts.append(server_peer(server_host, domain_id_from_env(environ),
                                 environ.get('CYCLONEDDS_URI', '')))
    if not environ.get('CYCLONEDDS_URI'):
        out['CYCLONEDDS_URI'] = cyclone_uri('wifi', hosts)
    elif hosts:
        out['CYCLONEDDS_URI'] = f"{environ['CYCLONEDDS_URI']},{peer_fragment(hosts)}"
    return out


def _names_host(peer: str, server_host: str) -> bool:
    """Say whether ``peer`` is the host of ``server_host`` with no port (``h``, ``[v6]``)."""
    from rog_ros.transport.cyclone_config import _host_of
    peer, host = peer.strip(), _host_of(server_host).strip().lower()
    bare = peer[1:-1] if peer.startswith('[') and peer.endswith(']') else peer
    return _host_of(peer) == peer.strip('[]') and bare.lower() == host != ''


def server_node_environment(env, warn=None) -> dict:
    """
    Return the variables the server node gets on top of its robot's ``env``: its fixed index.

    The worker robots list the server host at the port of participant index
    :data:`~rog_ros.transport.cyclone_config.SERVER_PARTICIPANT_INDEX` only, so the server
    node must take that index (appended after the robot's ``CYCLONEDDS_URI``, so it wins),
    not the first free one Cyclone would give it. Where another process of the domain holds
    the index on this host (the server robot of a second fleet under another namespace, which
    architecture.md allows, or a server node still running), Cyclone refuses the participant:
    the server node would not start at all. It then keeps the first free index, as before
    the fixed one, and ``warn`` (if given) says that the worker robots reach it by multicast
    only.
    """
    from rog_ros.transport.cyclone_config import domain_id_from_env, server_index_fragment
    from rog_ros.transport.cyclone_settings import index_port_taken
    uri = env.get('CYCLONEDDS_URI', '')
    full = ','.join(p for p in (uri, server_index_fragment()) if p)
    taken = index_port_taken(full, domain_id_from_env(env))
    if taken is None:
        return {'CYCLONEDDS_URI': full}
    if warn is not None:
        index, domain, port = taken
        warn(f'DDS participant index {index} of domain {domain} (UDP port {port}) is taken on '
             "this host (another fleet's server node, or this one still running): the server "
             'node takes the first free index instead, and worker robots given this host '
             '(--server-host, server_host:=) reach it by multicast only; stop the other one, '
             'or run this fleet on another ROS_DOMAIN_ID')
    return {}


def split_peers(text) -> list:
    """Split comma-separated addresses: ``'a, b'`` -> ``['a', 'b']``."""
    return [p.strip() for p in str(text or '').split(',') if p.strip()]


# ---------------------------------------------------------------------- rog robot
def add_parser(subparsers):
    """Add the ``robot`` subcommand: the nodes of one robot, without ROS 2."""
    p = subparsers.add_parser('robot', allow_abbrev=False,
                              help="run one robot's nodes (server or worker robot)",
                              description=__doc__.strip().split('\n')[0].replace('``', ''))
    p.add_argument('--role', required=True, choices=ROLES, help=ROBOT_ARGUMENTS['role'])
    rank = settings.BY_NAME['rank']
    p.add_argument('--rank', type=int, default=None, metavar='INT',
                   help=ROBOT_ARGUMENTS['rank'] + '.' + settings.range_note(rank.range_text()))
    p.add_argument('--server-host', default=None, help=ROBOT_ARGUMENTS['server_host'])
    p.add_argument('--peers', default=None, help=ROBOT_ARGUMENTS['peers'])
    p.add_argument('--config', default=None,
                   help='ROS 2 parameter file to start from, such as config/fleet.yaml '
                        '(default: none; the flags and the built-in defaults)')
    p.add_argument('--respawn', default=0, metavar='INT',
                   help=ROBOT_ARGUMENTS['respawn'] + '.' +
                   settings.range_note(settings.range_text(0, MAX_RESPAWNS)))
    p.add_argument('--logs', default=None, help='node logs directory (default: OUT/logs on '
                                                'the server, ./rog_robot_logs otherwise); a '
                                                "worker robot's earlier logs there move to "
                                                'LOGS/previous unless it resumes, its model '
                                                'too, as rog_worker_K.model.pt')
    p.add_argument('--model-out', default=None, metavar='PATH',
                   help="worker robots: write the robot's trained model here when training "
                        f'ends (default: model_out of --config, else ./{ROBOT_MODEL}); '
                        "an earlier run's model there moves to LOGS/previous (as "
                        'rog_worker_K.model.pt; copied if it is the --init-model) unless it '
                        'resumes')
    for s in settings.for_role('fleet'):
        text = s.help_text                    # with its range, as rog fleet --help
        if s.name == 'workload_options':      # and --workload-option KEY=VALUE, repeatable
            settings.add_workload_options(p, None, text)
        elif s.name not in ('rank',):
            p.add_argument(s.flag, default=None, metavar=s.kind.__name__.upper(), help=text)
    for name, whose in ROBOT_NODE_SETTINGS.items():   # with its range too (help_text)
        s = settings.BY_NAME[name]
        p.add_argument(s.flag, default=None, metavar=s.kind.__name__.upper(),
                       help=f'{whose}: {s.help_text[0].lower()}{s.help_text[1:]}')
    p.set_defaults(func=run)
    return p


def watch(sup, main: str, limit: int = 0, sleep=time.sleep) -> int:
    """
    Wait for the training node ``main`` to end, restarting it after a crash; its exit status.

    At most ``limit`` restarts (``respawn``), each ``RESPAWN_DELAY_S`` after the crash; the
    node restores its ``state_dir`` (``check_respawn`` made sure it has one). A helper node
    (netmon) that ends while ``main`` runs is reported once, with its log's last lines, and
    the training goes on without it.
    """
    left = limit
    ended = set()
    while True:
        codes = sup.codes()
        code = codes[main]
        for name, helper in codes.items():
            if code is None and name != main and helper is not None and name not in ended:
                ended.add(name)
                _helper_ended(sup, name, helper)
        if code is None:
            sleep(0.2)
            continue
        if not (crashed(code) and left > 0):
            return code
        left -= 1
        print(f'rog robot: {main} {describe_exit(code)}; restarting it from its state in '
              f'{RESPAWN_DELAY_S:g} s ({left} more restarts allowed)', file=sys.stderr)
        sleep(RESPAWN_DELAY_S)
        sup.restart(main)


def _helper_ended(sup, name: str, code: int) -> None:
    """Say that helper node ``name`` ended and why, as ``rog fleet`` does; training goes on."""
    print(f'rog robot: {name} {describe_exit(code)}; the training goes on without it; last '
          f'lines of its log ({sup.log_path(name)}):\n{sup.tail(name)}', file=sys.stderr)


def run(args) -> int:
    """Start the robot's nodes, wait for its training node, stop the rest; exit status."""
    from rog_ros import checks
    from rog_ros.nodes.plan import load_parameter_file
    over = {s.name: getattr(args, s.name, None) for s in settings.for_role('fleet')
            if s.name not in ('rank', 'fleet_key_file', 'record')}
    over.update({name: getattr(args, name, None) for name in ROBOT_NODE_SETTINGS})
    try:
        _check_robot_args(args)
        file_params = load_parameter_file(args.config, '--config') if args.config else {}
        specs = robot_plan(args.role, args.rank or 0, file_params, over)
        check_given_staleness(specs[0].parameters['sync'], args.staleness)
        limit = parse_respawn(args.respawn)
        check_respawn(limit, specs)
        env = dict(os.environ, PYTHONUNBUFFERED='1',
                   **robot_environment(os.environ, args.server_host or '',
                                       split_peers(args.peers)))
        logs = args.logs or (os.path.join(specs[0].parameters['out'], 'logs')
                             if args.role == 'server' else 'rog_robot_logs')
        if args.role == 'server':
            checks.output_dir('--out', specs[0].parameters['out'])
        else:
            _check_model_out(args, specs[0])
        checks.output_dir('--logs', logs)
        _check_robot_environment(args, env, specs[0])
        _check_interface(specs)
    except (OSError, ValueError) as err:
        print(f'rog robot: {err}', file=sys.stderr)
        return 2
    if args.role == 'server' and _finished_before(specs[0].parameters):
        return 0                # nothing to train: no node starts, nothing is written
    try:                        # one server run at a time in its --out (output_lock), one
        lock = _hold(args, specs, logs)     # worker robot of a rank in its --logs
    except OSError as err:
        print(f'rog robot: {err}', file=sys.stderr)
        return 2
    try:
        if args.role == 'server':
            resuming = _set_aside_earlier_run(specs, logs)
        else:
            resuming = _set_aside_earlier_logs(args, specs, logs)
        if resuming is None:
            return 2
        return _run_nodes(args, specs, env, logs, limit, resuming)
    finally:
        if lock is not None:
            lock.release()


def _finished_before(server: dict) -> bool:
    """
    Say so and return True when the server's ``state_dir`` holds a run that had finished.

    As ``rog fleet`` does (:func:`state_dir.finished_run`, read without torch): the robot
    started its nodes, and its server node then said the run had finished. A worker robot
    is told by its own node, which ends at once (status 0).
    """
    from rog_ros.nodes.fleet_progress import finished_lines
    from rog_ros.nodes.state_dir import finished_run
    state_dir = server.get('state_dir')
    done = finished_run(state_dir)
    if done is None:
        return False
    for line in finished_lines(state_dir, done, os.path.abspath(server['out']), 'node'):
        print(f'rog robot: {line}')
    return True


def _hold(args, specs, logs: str):
    """
    Hold what this robot writes for its run; return the lock (``release()`` lets it go).

    The server robot holds its ``out`` (:class:`OutputLock`); a worker robot its training
    node's log in ``logs`` (:class:`NodeLogLock`), so that a second robot of its rank pointed
    at the same folder is refused before it moves or overwrites the first one's live logs.
    OSError (one line) naming the run that holds it.
    """
    if args.role == 'server':
        from rog_ros.nodes.output_lock import OutputLock
        return OutputLock.take(os.path.abspath(specs[0].parameters['out']),
                               'rog robot --role server')
    from rog_ros.nodes.run_outputs import NodeLogLock
    try:
        return NodeLogLock.take(os.path.abspath(logs), specs[0].name,
                                f'rog robot --role worker --rank {args.rank}')
    except OSError as err:     # a copied command line: the other robot meant another rank
        raise OSError(f'{err}; or, if this is another robot, give it a rank of its own '
                      f'(--rank: 0..workers-1, each once; two robots of rank {args.rank} '
                      'would keep replacing each other)') from None


def _set_aside_earlier_logs(args, specs, logs: str):
    """
    Move a worker robot's earlier logs and model to ``logs/previous`` unless it resumes.

    Why: the supervisor starts the logs afresh, so a rerun of ``rog robot --role worker``
    overwrote the logs of the run before (the one that went wrong) while the server robot
    kept its own. The logs of this rank's nodes move (its netmon's too, whether or not it
    runs this time), not those of another robot writing in the same folder, and so does the
    robot's model file (``--model-out``): a rerun that ended before writing its own left the
    earlier run's model where this run's is said to be, which the server robot's rerun does
    not (its ``model.pt`` moves with its results). The model is kept there as
    ``rog_worker_K.model.pt`` (ranks may share ``logs``), replaces only an older model of
    rank K, and is copied, not moved, when it is this run's ``--init-model``. A worker whose
    node restores its state file from ``state_dir`` moves nothing and its logs go on. Returns
    ``resuming``; None when the earlier logs or model could not be set aside (one line).
    """
    from rog_ros.nodes.model_file import model_out_file
    from rog_ros.nodes.routing import worker_name
    from rog_ros.nodes.run_outputs import set_aside_unless_worker_resumes
    rank = int(args.rank)
    model_out = _model_out(args, specs[0])
    folder = os.sep if model_out.endswith(os.sep) else ''    # 'models/': model.pt in it
    return set_aside_unless_worker_resumes('rog robot', os.path.abspath(logs),
                                           specs[0].parameters.get('state_dir'), rank,
                                           [worker_name(rank), netmon_name(rank)],
                                           model_out_file(os.path.abspath(model_out) + folder),
                                           specs[0].parameters.get('init_model'))


def _set_aside_earlier_run(specs, logs: str):
    """
    Set an earlier run in the server's ``out`` aside as ``rog fleet`` does; return ``resuming``.

    Why: the nodes' logs (``--logs``, else ``OUT/logs``) start afresh before the server could
    move anything, so a rerun overwrote the earlier run's logs while its results were kept.
    Only this robot's nodes' logs move, from the folder its supervisor writes: a worker robot
    on the same machine may be writing its own beside them. A run whose server restores its
    checkpoint moves nothing and its logs go on: the returned text says so to the supervisor
    ('' for a fresh run). None when the earlier run could not be moved (said in one line):
    starting would overwrite its logs.
    """
    from rog_ros.nodes.run_outputs import set_aside_unless_resuming
    server = specs[0].parameters
    return set_aside_unless_resuming('rog robot', os.path.abspath(server['out']),
                                     server.get('state_dir'), os.path.abspath(logs),
                                     [spec.name for spec in specs])


def _run_nodes(args, specs, env: dict, logs: str, limit: int, resuming: str = '') -> int:
    """
    Start the checked robot ``specs``, watch its training node, stop; ``run``'s rest.

    ``resuming`` (the server robot's saved state) makes the logs go on instead of starting
    afresh: they are the run's that it resumes.
    """
    from rog_ros.nodes.supervisor import Supervisor
    if args.fleet_key_file:
        env['ROG_FLEET_KEY_FILE'] = os.path.abspath(args.fleet_key_file)
    if args.record:
        specs[0] = dataclasses.replace(specs[0], parameters=dict(specs[0].parameters,
                                                                 record=args.record))
    if args.role == 'worker':
        model_out = _model_out(args, specs[0])
        folder = os.sep if model_out.endswith(os.sep) else ''    # 'models/': model.pt in it
        specs[0] = dataclasses.replace(specs[0], parameters=dict(
            specs[0].parameters, model_out=os.path.abspath(model_out) + folder))
    server_env = env                                # (a worker robot has no server node)
    if any(spec.role == 'server' for spec in specs):
        server_env = dict(env, **server_node_environment(
            env, lambda said: print(f'rog robot: warning: {said}', file=sys.stderr)))
    sup = Supervisor(specs, logs, lambda spec: server_env if spec.role == 'server' else env)
    main = specs[0].name
    code = 1
    try:
        sup.start(resuming)
        print(f'rog robot: started {", ".join(s.name for s in specs)} (logs in {logs})',
              file=sys.stderr)
        code = watch(sup, main, limit)
    except KeyboardInterrupt as stop:       # Ctrl-C, or SIGTERM/SIGHUP (the CLI's Terminated)
        code = getattr(stop, 'exit_status', 130)
    finally:
        sup.stop()
    if code in _STOPPED_BY:
        print(f'rog robot: {_STOPPED_BY[code]}; '
              f'stopped {", ".join(s.name for s in specs)} (logs in {logs})', file=sys.stderr)
        _stopped_warnings(specs, logs)
    if code == 0 and args.role == 'server':
        _closing_lines(specs[0].parameters, logs)
    if code == 0 and args.role == 'worker':
        from rog_ros.nodes.model_file import model_out_file
        try:
            written = model_out_file(specs[0].parameters['model_out'])
        except ValueError:
            written = ''     # (changed under us; the node's log says what it could write)
        if written and os.path.exists(written):
            print(f"rog robot: this robot's model: {written}", file=sys.stderr)
    if code != 0 and code not in _STOPPED_BY:
        print(f'rog robot: {main} exited with {code}; last lines of its log:\n'
              f'{sup.tail(main)}', file=sys.stderr)
        print('rog robot: if the cause is not in the lines above, `rog doctor` checks this '
              'robot (torch, a DDS round trip with its configuration, buffers, clock)',
              file=sys.stderr)
    return code


def _stopped_warnings(specs, logs: str) -> None:
    """
    Name the warnings in the nodes' logs of a robot that was stopped, as a finished one does.

    A server that drops every message of its robots (another fleet key, ``robot_keys`` set
    otherwise) waits for them until it is stopped, and said on the console only that it was:
    its warnings, which name the cause, were in its log alone.
    """
    from rog_ros.nodes.fleet_progress import robot_warnings
    said = robot_warnings(logs, [spec.name for spec in specs])
    if said:
        print(f'rog robot: {said}', file=sys.stderr)


def _model_out(args, worker) -> str:
    """Return where the worker robot writes its model: --model-out, model_out, the default."""
    return args.model_out or worker.parameters.get('model_out') or ROBOT_MODEL


def _check_model_out(args, worker) -> None:
    """
    Refuse a model path the worker node could not write, before any node starts (one line).

    The node refused it at its start, after the robot had started every node; a model_out of
    a --config file is checked with the other parameters.
    """
    from rog_ros import checks
    from rog_ros.nodes.model_file import model_out_file
    try:
        model_out_file(_model_out(args, worker))
    except ValueError as err:
        name = ('--model-out' if args.model_out else 'model_out'
                if worker.parameters.get('model_out') else "the robot's model (--model-out)")
        raise checks.ConfigError(f'{name} {err}') from None


def _check_interface(specs) -> None:
    """
    Refuse an ``interface`` for the robot's netmon that this machine does not have.

    netmon ended at its start on a typo (``wlan9``) while the training ran on without it; its
    list is the one netmon reads (``/proc/net/dev``). Not checked where there is none.
    """
    from rog_ros import checks
    from rog_ros.nodes import linkprobe
    wanted = [s.parameters.get('interface') for s in specs if s.role == 'netmon']
    if not wanted or wanted[0] in (None, '', 'auto'):
        return
    try:
        have = sorted(linkprobe.read_counters())
    except OSError:
        return
    if wanted[0] not in have:
        raise checks.ConfigError(f'interface (--interface) {wanted[0]!r}: this machine has no '
                                 f'such network interface (it has {", ".join(have)}); give one '
                                 'of them, or auto')


def _check_robot_environment(args, env: dict, first) -> None:
    """
    Refuse what every node would trip over at its start, before any node starts.

    The fleet key, ``ROS_DOMAIN_ID``, a ``CYCLONEDDS_URI`` file and the ``--record`` path were
    read by the nodes themselves: a bad one ended each node in a usage message or a traceback
    after the robot had started them (and ``--respawn`` restarted them to fail again).
    ``first``: the robot's first node (its server or worker), whose rank a robot key must
    be made for. A worker robot given the fleet key with ``robot_keys`` on is warned (its
    nodes derive their own key, but the fleet key is on the robot), here on the terminal; its
    worker node, told so in ``env`` (``$ROG_FLEET_KEY_SAID``), does not warn again.
    """
    from rog_ros import checks
    from rog_ros.nodes.connect import FLEET_KEY_SAID_ENV, fleet_key_on_robot
    from rog_ros.nodes.fleet_key import key_source, load_fleet_key
    from rog_ros.protocol.robot_keys import keyring_for
    from rog_ros.transport.cyclone_config import domain_id_from_env, uri_problem
    key = load_fleet_key(args.fleet_key_file, env)   # FleetKeyError (a ValueError): one line
    robot_keys = bool(first.parameters.get('robot_keys'))
    keyring_for(key, robot_keys, first.rank if first.role == 'worker' else None,
                key_source(args.fleet_key_file, env))
    if robot_keys and first.role == 'worker' and key.robot is None:
        # the nodes derive their own key from it, but the fleet key stays on this robot
        print(f'rog robot: warning: {fleet_key_on_robot(key, first.rank)}', file=sys.stderr)
        env[FLEET_KEY_SAID_ENV] = '1'
    domain_id_from_env(env)                        # ValueError: one line
    problem = uri_problem(env.get('CYCLONEDDS_URI', ''))
    if problem:
        raise checks.ConfigError(problem)
    if args.record:
        checks.output_file('--record', args.record)


def _check_robot_args(args) -> None:
    """Refuse what the role ignores or what would start the wrong robot (one line)."""
    from rog_ros import checks
    if args.role == 'worker' and args.rank is None:
        raise checks.ConfigError('--role worker needs --rank K (0..workers-1): every worker '
                                 'robot of a fleet has its own rank')
    if args.role == 'server' and args.rank is not None:
        raise checks.ConfigError('--rank applies to --role worker; the server robot has no '
                                 'rank: leave --rank out')
    if args.role == 'server' and args.model_out is not None:
        raise checks.ConfigError('--model-out applies to --role worker; the server robot '
                                 'writes the trained model to --out (model.pt): leave '
                                 '--model-out out')
    if args.role == 'server' and args.server_timeout is not None:
        raise checks.ConfigError('--server-timeout applies to --role worker (how long a worker '
                                 'robot waits for the server); leave it out on the server '
                                 'robot')
    if args.interface is not None and args.netmon is not None and \
            not settings.BY_NAME['netmon'].parse(args.netmon):
        raise checks.ConfigError("--interface is the interface the robot's netmon watches; "
                                 'with --netmon false no netmon runs: leave one of them out')
    if args.server_host is not None and not args.server_host.strip():
        raise checks.ConfigError('--server-host is empty; give the address of the server '
                                 'robot, or leave the option out')
    if args.peers is not None and not split_peers(args.peers):
        raise checks.ConfigError(f'--peers {args.peers!r} names no address; give '
                                 'comma-separated addresses, or leave the option out')
    if args.peers is not None and len(split_peers(args.peers)) != len(args.peers.split(',')):
        raise checks.ConfigError(f'--peers {args.peers!r} has an empty entry; give '
                                 'comma-separated addresses such as 10.0.0.11,10.0.0.12')
    _check_peer_addresses(args)
    _check_role_reads(args)


def _check_role_reads(args) -> None:
    """
    Refuse a flag that no node of this robot reads, in one line naming the robot that does.

    ``rog robot --role worker --iterations 500 --out runs/x`` started the worker as if they
    were not there (the server robot decides both), and ``--role server --device cuda`` the
    server: a robot's command line that says more than it does.
    """
    from rog_ros import checks
    nodes = {'server': (settings.SERVER, settings.NETMON),
             'worker': (settings.WORKER, settings.NETMON)}[args.role]
    for s in settings.for_role('fleet'):
        if getattr(args, s.name, None) is None or s.name == 'netmon' or \
                any(node in s.roles for node in nodes):
            continue
        other = 'the server robot' if settings.SERVER in s.roles else 'worker robots'
        raise checks.ConfigError(f'{s.flag} applies to {other}; no node of a {args.role} '
                                 f'robot reads it: leave it out here')


def _check_peer_addresses(args) -> None:
    """
    Refuse a ``--server-host`` or ``--peers`` address Cyclone DDS would abort on, in one line.

    A port outside 1..65535 (``10.0.0.10:99999``) passed: every node of the robot then died
    of SIGABRT at its first participant (``add_peer_address: not a valid address``), after
    the robot had started them and made its logs folder.
    """
    from rog_ros import checks
    from rog_ros.transport.cyclone_config import peer_resolves
    given = [('--server-host', args.server_host)] + [
        ('--peers', peer) for peer in split_peers(args.peers or '')]
    for flag, peer in given:
        if peer and peer.strip() and not peer_resolves(peer):
            raise checks.ConfigError(f'{flag} {peer.strip()!r}: not an address DDS can use (a '
                                     'host name or IP address that resolves here, with an '
                                     'optional :PORT in 1..65535); correct it, or leave it out')


def _closing_lines(server_params: dict, logs: str) -> None:
    """Print the server robot's last lines as ``rog fleet`` does: result, model, report."""
    from rog_ros.nodes.fleet_progress import closing_lines
    out = os.path.abspath(server_params['out'])
    if os.path.exists(os.path.join(out, 'summary.json')):
        for line in closing_lines(out, server_params['workload'], logs, ['rog_server']):
            print(f'rog robot: {line}')
