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
``rog fleet``: a whole fleet on this machine, one OS process per node, on the embedded DDS.

    rog fleet --workload mpcol --sync rog --staleness 4 --workers 3 --trace indoors \\
        --iterations 200 --out runs/rog4

Starts the nodes of the fleet plan (:mod:`rog_ros.nodes.plan`: server, workers,
netmon) with a loopback Cyclone configuration and a DDS domain of their own, shows a progress
line from their TrainStatus/LinkStats topics, and leaves ``summary.json`` and
``timeseries.csv`` (the simulator's files) in ``--out``; node logs go to ``--out/logs``. An
earlier run's results and node logs there move to ``--out/previous`` first (replacing the run
it held), unless its server resumes from the checkpoint in its ``--state-dir``.
Ctrl-C stops every node (SIGINT, then SIGTERM, then SIGKILL, each after a grace period; a
second Ctrl-C skips the wait); none outlives this command, and ``summary.json`` is written
from what exists, with an ``error`` saying the run was interrupted.
``--netns`` (root) runs each robot in its own network namespace behind a veth pair that the
kernel shapes (a ``tbf`` gate over an ``htb`` class, :mod:`rog_ros.net.netns`) instead of
shaping in the application: the nodes run with no trace, and ``summary.json`` gets the run's
``trace`` and ``trace_followed`` once they have stopped.

Every message is authenticated with a fleet key (docs/security.md): ``--fleet-key-file``,
else ``$ROG_FLEET_KEY_FILE``, else ``$ROG_FLEET_KEY`` (which the nodes inherit), else a new
random key written (mode 0600) to ``--out/fleet.key`` for this run; the nodes get a file by
its path in ``$ROG_FLEET_KEY_FILE``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time

from rog_ros import checks
from rog_ros.nodes import settings
from rog_ros.nodes.fleet_progress import (
    closing_lines, every_evaluation_failed, finished_lines, legend, Progress)
from rog_ros.nodes.output_lock import OutputLock, refuse_held
from rog_ros.nodes.plan import check_given_staleness, load_parameter_file, plan
from rog_ros.nodes.respawn import describe_exit
from rog_ros.nodes.run_outputs import LOG_DIR, set_aside_unless_resuming
from rog_ros.nodes.state_dir import check_state_dir, finished_run, resumes
from rog_ros.nodes.stop_requests import StopRequests
from rog_ros.nodes.supervisor import repo_pythonpath, Supervisor
from rog_ros.transport.cyclone_config import MAX_DOMAIN_ID

BUS_CLOSE_S = 2.0        # the progress display's DDS bus gets this long to close
"""Ctrl-C stops the fleet within the supervisor's grace periods (``supervisor.STOP_GRACE_S``
+ ``TERM_GRACE_S`` + ``KILL_WAIT_S``) plus BUS_CLOSE_S."""
WORKERS_AFTER_SERVER_S = 20.0
FLEET_OWN = ('out', 'netmon', 'fleet_key_file')
"""Fleet settings with a spelling of the fleet's own (``--out`` default, ``--no-netmon``)."""


def add_parser(subparsers):
    """Add the ``fleet`` subcommand."""
    p = subparsers.add_parser('fleet', allow_abbrev=False,
                              help='run a fleet of node processes on this machine',
                              description=__doc__.split('\n\n')[0].split('\n', 1)[1].strip()
                              .replace('``', ''))
    for s in settings.for_role('fleet'):      # generated from the settings table
        text = s.help_text                    # with its range, as the nodes' --help
        if s.name == 'workload_options':      # and --workload-option KEY=VALUE, repeatable
            settings.add_workload_options(p, None, text)
        elif s.name not in FLEET_OWN:
            p.add_argument(s.flag, default=None, metavar=s.kind.__name__.upper(), help=text)
    p.add_argument('--out', default='rog_fleet_run',
                   help='output directory (default rog_fleet_run)')
    p.add_argument('--config', default=None,
                   help='ROS 2 parameter file to start from, such as config/fleet.yaml '
                        '(default: none; the flags and the built-in defaults)')
    p.add_argument('--domain-id', type=int, default=None, metavar='INT',
                   help='DDS domain.' + settings.range_note(settings.range_text(0, MAX_DOMAIN_ID))
                   + ' (default: a free-looking one derived from the pid)')
    p.add_argument('--no-netmon', action='store_true', help='do not start netmon')
    p.add_argument('--netns', action='store_true',
                   help='kernel shaping: one network namespace per robot (root only)')
    p.add_argument('--timeout', type=float, default=1800.0, metavar='FLOAT',
                   help='give up after this many seconds.' +
                   settings.range_note(settings.range_text(0, None, low_open=True)) +
                   ' (default 1800)')
    p.add_argument('--quiet', action='store_true', help='no progress line')
    p.add_argument('--fleet-key-file', default=None,
                   help='fleet key file (0600) for message authentication (default: '
                        '$ROG_FLEET_KEY_FILE, $ROG_FLEET_KEY, else a new key in OUT/fleet.key)')
    p.set_defaults(func=run)
    return p


def _overrides(args, out: str) -> dict:
    over = {s.name: getattr(args, s.name, None) for s in settings.for_role('fleet')
            if s.name not in FLEET_OWN + ('record',)}
    over.update(out=out, bus='dds', epoch=time.time())
    if args.state_dir:
        over['state_dir'] = os.path.abspath(args.state_dir)
    if args.no_netmon:
        over['netmon'] = False
    return over


def default_domain() -> int:
    """Pick a DDS domain id for this run: spread by pid so parallel runs do not meet (1..200)."""
    return 1 + (os.getpid() * 7919 + int(time.time())) % 200


NODE_MEMORY_GB = 0.35
"""What one training node (the server or a robot: torch, MPCOL's model and data) holds: the
README's fleet measured 375 MB resident in its server, 317-325 MB in each robot (netmon 59 MB,
left out); bigger workloads hold more, so a fleet this figure fits may still not fit."""


def memory_warning(training_nodes: int, available_gb) -> str:
    """
    Return the warning for a fleet whose training nodes may not fit in memory ('' if they do).

    ``--workers`` admits 1024 whatever the machine: too many for its memory started them all,
    and the out-of-memory killer then ended some mid-run with a SIGKILL their logs do not
    show. Said before the nodes start, with the number that fits (not refused: the estimate
    is rough, and memory may be freed meanwhile).
    """
    need = training_nodes * NODE_MEMORY_GB
    if available_gb is None or need <= available_gb:
        return ''
    fit = int(available_gb / NODE_MEMORY_GB) - 1
    fewer = (f'--workers {fit} or fewer fit' if fit >= 1 else
             f'even --workers 1 needs {2 * NODE_MEMORY_GB:g} GB: close other programs')
    robots = training_nodes - 1     # (the need as precise as the figure: 0.7 GB, not 1 GB)
    return (f'warning: {training_nodes} training processes (the server and {robots} '
            f"robot{'s' if robots != 1 else ''}) need {round(need, 2):g} GB or more, "
            f'{NODE_MEMORY_GB:g} GB each, and {available_gb:.1f} GB is available: the '
            f'out-of-memory killer may end some mid-run; {fewer}')


def ros2_watch_line(domain: int) -> str:
    """
    Say how a ROS 2 shell on this machine sees the fleet's topics.

    The nodes talk on the loopback interface (multicast off) in a domain of their own: a ROS 2
    install with its default discovery, or another machine, sees nothing, and the domain was
    said nowhere. rmw_cyclonedds's own localhost settings use the same loopback discovery.
    """
    return (f'DDS domain {domain}, this machine only; ROS 2 here sees its topics with '
            f'ROS_DOMAIN_ID={domain} and ROS_LOCALHOST_ONLY=1 (Humble) or '
            'ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST (Iron and newer) and '
            'RMW_IMPLEMENTATION=rmw_cyclonedds_cpp, e.g. ros2 topic list; --domain-id chooses '
            'the domain')


def fleet_key_env(args, out: str) -> tuple:
    """
    Return ``(key, env)``: the fleet's key and the variables that hand it to every node.

    A key the user gives is used: ``--fleet-key-file`` or ``$ROG_FLEET_KEY_FILE`` reach the
    nodes as a path in ``$ROG_FLEET_KEY_FILE``; ``$ROG_FLEET_KEY`` stays where the user put
    it, in the environment the nodes inherit (``env`` is empty: written into ``out``, a
    long-lived secret would outlive the run in a folder that gets archived and shared).
    Without one a fresh random key is written to ``out/fleet.key`` (0600), one per run.
    """
    from rog_ros.nodes import fleet_key as auth
    given = args.fleet_key_file or os.environ.get(auth.KEY_FILE_ENV)
    if given:
        path = os.path.abspath(given)
        return auth.read_key_file(path), {auth.KEY_FILE_ENV: path}
    key = auth.load_fleet_key(environ={auth.KEY_ENV: os.environ.get(auth.KEY_ENV, '')})
    if key is not None:
        return key, {}
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, 'fleet.key')
    if os.path.lexists(path):
        os.unlink(path)     # one key per run: traffic recorded in earlier runs never verifies
    return auth.write_key_file(path), {auth.KEY_FILE_ENV: path}


def _check_fleet_key(args, parameters: dict) -> None:
    """Check the key the nodes will get (FleetKeyError, one line) before anything is made."""
    from rog_ros.nodes.fleet_key import key_source, load_fleet_key
    path = os.path.abspath(args.fleet_key_file) if args.fleet_key_file else None
    key = load_fleet_key(path)       # read again when the nodes get it (fleet_key_env)
    if key is not None:       # (none: rog fleet makes one)
        _watch_key(key, parameters, key_source(args.fleet_key_file))


def _watch_key(key, parameters: dict, source: str = 'the fleet key file'):
    """
    Return what ``rog fleet`` verifies the status topics with: the server's keys.

    With ``robot_keys`` every robot on this machine holds only its own key, derived from
    the fleet key, and ``rog fleet`` holds the fleet key as the server does; a robot key
    file given to ``rog fleet`` is refused (FleetKeyError), with or without ``robot_keys``:
    the server needs the fleet key (the node's rule said 'set robot_keys true' without it,
    which a fleet on one machine cannot follow).
    """
    from rog_ros.nodes.fleet_key import FleetKeyError
    from rog_ros.protocol.robot_keys import keyring_for
    if key.robot is not None:
        raise FleetKeyError(f"{source} is robot {key.robot}'s key (a robot key file, for "
                            f'rog robot --role worker --rank {key.robot}); rog fleet runs the '
                            'server and every robot, and needs the fleet key the robot keys '
                            'are made from')
    return keyring_for(key, bool(parameters.get('robot_keys')), None, source)


def _without_key(env: dict, key_env: dict) -> None:
    """
    Leave ``$ROG_FLEET_KEY`` out of a node's ``env`` when the nodes get a key file.

    And tell the workers that their holding the fleet key (with ``robot_keys``) is meant: every
    robot is on this machine, the fleet key with them (``connect.FLEET_KEY_SAID_ENV``).
    """
    from rog_ros.nodes.connect import FLEET_KEY_SAID_ENV
    from rog_ros.nodes.fleet_key import KEY_ENV, KEY_FILE_ENV
    if KEY_FILE_ENV in key_env:
        env.pop(KEY_ENV, None)
    env[FLEET_KEY_SAID_ENV] = '1'


def _key_line(key, env: dict) -> str:
    """Return the closing line naming where the fleet key is and its fingerprint."""
    from rog_ros.nodes.fleet_key import KEY_ENV, KEY_FILE_ENV
    where = env[KEY_FILE_ENV] if KEY_FILE_ENV in env else f'from ${KEY_ENV}'
    return f'fleet key {where} (fingerprint {key.fingerprint})'


def run_namespace(namespace: str, out: str) -> str:
    """
    Return the ROS 2 namespace of one run's nodes: the fleet namespace, then the --out folder.

    ``/rog`` and ``runs/a`` -> ``/rog/a`` (``/rog/a/rog_server``): two fleets on one domain
    and one fleet namespace (``--domain-id`` given alike) share no node name, since they
    cannot share ``--out`` (unless two ``--out`` folders have one name: ``runs/a``,
    ``old/a``); the folder's name made a ROS 2 name (letters, digits, single ``_``:
    ``mpcol--rog4`` is ``mpcol_rog4``).
    """
    import re
    from rog_ros.nodes.ros_names import NAMESPACE, qualified
    tag = re.sub(r'[^A-Za-z0-9_]', '_', os.path.basename(os.path.abspath(out)))
    tag = re.sub(r'__+', '_', tag) or 'run'     # (rcl's remap rules refuse __ in a name)
    tag = 'run_' + tag if tag[0].isdigit() else tag
    ns = qualified(namespace.rstrip('/') or '/', tag)
    return ns if NAMESPACE.fullmatch(ns) else '/' + tag


def _status_bus(namespace: str, domain: int, config, key=None, node_namespace=None):
    """Open a bus of our own to watch the fleet's status topics (None if DDS is unavailable)."""
    try:
        from rog_ros.transport.auth_bus import AuthBus
        from rog_ros.transport.dds_bus import DdsBus
        bus = DdsBus(namespace=namespace, domain_id=domain, config=config, node_name='rog_fleet',
                     node_namespace=node_namespace)
        return bus if key is None else AuthBus(bus, key)
    except Exception as exc:  # noqa: B902 - the fleet runs without a progress display
        print(f'rog fleet: no progress display ({exc})', file=sys.stderr)
        return None


def run(args) -> int:
    """Run the fleet; 0 when every node exited 0 and the summary was written."""
    out = os.path.abspath(args.out)
    try:   # the whole plan is checked before any node starts (one line, exit 2)
        checks.number('--timeout', args.timeout, positive=True)
        if args.domain_id is not None:
            checks.integer('--domain-id', args.domain_id, 0, MAX_DOMAIN_ID)
        file_params = load_parameter_file(args.config, '--config') if args.config else {}
        # the workload options are checked where the workload is built (prepare, below)
        specs = plan(file_params, _overrides(args, out), built_later=True)
        check_given_staleness(specs[0].parameters['sync'], args.staleness)
        checks.output_dir('--out', args.out)
        if specs[0].parameters.get('state_dir'):    # (a file, a damaged state: nodes untouched)
            check_state_dir('--state-dir', specs[0].parameters['state_dir'])
        _check_fleet_key(args, specs[0].parameters)
        if getattr(args, 'record', None):
            checks.output_file('--record', args.record)
    except (OSError, ValueError) as err:
        print(f'rog fleet: {" ".join(str(err).split())}', file=sys.stderr)
        return 2
    state_dir = specs[0].parameters.get('state_dir')
    done = finished_run(state_dir)
    if done is not None:        # nothing to train: no node starts, nothing is written
        for line in finished_lines(state_dir, done, out):
            print(f'rog fleet: {line}')
        return 0
    try:        # said at once, though --out is taken once the workload is built
        refuse_held(out)
    except OSError as err:
        print(f'rog fleet: {err}', file=sys.stderr)
        return 2
    failed = _prepare(specs[0])
    if failed:      # a bad workload option, a broken builder: one line, no node, no --out
        print(f'rog fleet: {failed}', file=sys.stderr)
        return 2
    try:      # before anything is written there: the key, the logs, the earlier results
        lock = OutputLock.take(out, 'rog fleet')
    except OSError as err:
        print(f'rog fleet: {err}', file=sys.stderr)
        return 2
    try:
        return _run_in(args, out, specs)
    finally:
        lock.release()


def _completed(out: str) -> bool:
    """Tell whether ``out`` holds the results of a completed run (nothing left to resume)."""
    try:
        with open(os.path.join(out, 'summary.json')) as f:
            return json.load(f).get('completed') is True
    except (OSError, ValueError, AttributeError):
        return False


def _completed_anyway(out: str, failed, workload: str, log_dir: str, log_names) -> list:
    """
    Return the result lines of a run that completed although nodes in ``failed`` failed.

    A robot frozen for good (SIGSTOP, a hung driver) is let go by the server and the run
    completes, but its process never exits and is killed: ``rog fleet``'s exit status says
    so (1), and these lines still give the result, the model and the report. Empty when the
    run did not complete or nothing failed.
    """
    if not failed or not _completed(out):
        return []
    return closing_lines(out, workload, log_dir, log_names) + [
        f'the run completed; rog fleet exits with status 1 because {", ".join(failed)} '
        'failed (above)']


def _prepare(server) -> str | None:
    """
    Build (and cache) the workload of the ``server`` NodeSpec once; None, or why not (a line).

    Once, not in every node at the same time; in a child process, so that this one, which
    supervises the whole run, holds no torch. With init_model the plan's check did that
    already (plan._check_init_model: a child built the same workload with the same options,
    self-check included, then read the weights): a second child built a user's workload once
    more for nothing (6 builds for 3 workers). The child checks the workload options first
    (refused in plan's words): plan leaves them to it (``built_later``), a child of its own
    loaded torch and the user's module once more (about 2 s before the first node). It runs
    before ``--out`` is taken (``refuse_held`` says another run's hold first), so that a
    refused option leaves no ``--out`` (a lock taken first made the folder and its lock file).
    """
    from rog_ros.nodes.prepare_workload import prepare
    if server.parameters.get('init_model'):
        return None
    return prepare(server.parameters['workload'], server.parameters.get('workload_options'))


def _run_in(args, out: str, specs) -> int:
    """Run the checked fleet ``specs`` with ``out`` held and its workload built."""
    from rog_ros.transport.cyclone_config import config_path
    server = specs[0]
    try:
        key, key_env = fleet_key_env(args, out)
        watch_key = _watch_key(key, server.parameters)
    except (OSError, ValueError) as err:
        print(f'rog fleet: {err}', file=sys.stderr)
        return 2
    recorder = _recorder(args)
    if recorder is False:
        return 2
    log_dir = os.path.join(out, LOG_DIR)
    # before the nodes start their logs afresh (the server would move no log); every node-log
    # name: the fleet owns OUT/logs, and a rerun may have fewer workers than the earlier run
    resuming = set_aside_unless_resuming('rog fleet', out, server.parameters.get('state_dir'),
                                         log_dir)
    if resuming is None:
        if recorder:
            recorder.close()
        return 2
    n, iterations = server.parameters['workers'], server.parameters['iterations']
    namespace = server.parameters['namespace']
    domain = args.domain_id if args.domain_id is not None else default_domain()
    loopback = 'file://' + str(config_path('loopback'))    # unencoded, as Cyclone reads it
    graph_ns = run_namespace(namespace, out)      # the nodes' place in the ROS 2 graph
    specs = [dataclasses.replace(s, ros_args=('-r', f'__ns:={graph_ns}')) for s in specs]
    started = time.time()       # (before any node: a summary written from now on is this run's)
    placed = _node_environments(args, specs, domain, loopback, key_env)
    if placed is None:
        return 2
    specs, envs, prefixes, cleanup, checks = placed
    for env in envs.values():       # no namespace warning for the place rog fleet chose
        env[settings.FLEET_PLACED_ENV] = graph_ns
    sup = Supervisor(specs, log_dir, lambda s: envs[s.name],
                     lambda s: prefixes.get(s.name, []))
    progress = Progress(n, iterations)
    from rog_ros.nodes.doctor_checks import mem_available_gb
    crowded = memory_warning(n + 1, mem_available_gb())
    if crowded:
        print(f'rog fleet: {crowded}', file=sys.stderr)
    _announce(args, server, specs, domain, log_dir)
    watching = not args.quiet or recorder
    bus = _status_bus(namespace, domain, loopback, watch_key, graph_ns) if watching else None
    if bus is not None:
        _watch_topics(bus, specs, n, progress, recorder)
    failed, reason = [], ''
    stop = StopRequests().install()
    try:
        sup.start(resuming)
        failed, reason = _watch(sup, bus, progress, args, n, stop, checks)
    except KeyboardInterrupt:       # a signal before our handlers were in place
        stop.count += 1
    finally:
        t_stop = time.monotonic()
        broken = _broken(checks)    # (not a tc failing as the nodes stop: they measured before)
        sent = sup.stop(hurry=lambda: stop.count > 1)
        stop.restore()
        if not args.quiet:
            progress.show(force=True)
            progress.close()
        _close_bounded(bus)
        if recorder:
            recorder.close()
            print(f'rog fleet: recorded {sum(recorder.counts.values())} messages on '
                  f'{len(recorder.counts)} topics to {args.record}', file=sys.stderr)
        for fn in reversed(cleanup):
            fn()
    earlier = _earlier_run_s(out, checks, started)  # (before one is made from what exists)
    if broken:          # the run's results do not follow its trace: the summary says so
        reason = broken if reason in ('', broken) else f'{reason}; {broken}'
        if not earlier:     # (never into an earlier run's summary: _left_earlier_summary)
            _summary_from_what_exists(out, progress, n, iterations, error=broken)
    if args.netns:      # the nodes were given no trace: the kernel followed this one
        keys = _netns_keys(checks, earlier)     # (its warning line said all the same)
        if not earlier:
            _record_kernel_trace(out, server.parameters.get('trace'), not broken, keys)
    codes = sup.codes()
    failed = sorted(set(failed) | {k for k, c in codes.items() if c not in (0, None)})
    if stop.count:
        return _interrupted(out, progress, server, sup, stop, sent, t_stop,
                            _key_line(key, key_env), earlier)
    killed = {name for sig, names in sent if sig == 'SIGKILL' for name in names}
    return _outcome(out, server, specs, sup, codes, failed, reason, _key_line(key, key_env),
                    killed, said_why=bool(broken) and not failed, earlier=earlier)


def _node_environments(args, specs, domain: int, loopback: str, key_env: dict):
    """
    Return ``(specs, envs, prefixes, cleanup, checks)``: each node's environment, its place.

    Every node gets the fleet's domain, the key (``key_env``) and the loopback DDS
    configuration; with ``--netns`` each lives in a namespace of its own (``_netns_setup``:
    the specs to start, the command prefixes that enter them, what undoes them, and the
    ``checks`` :func:`_watch` asks whether the links still follow their traces). None once a
    set-up failure is said (what was set up is undone).
    """
    base_env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROG_BUS='dds',
                    PYTHONUNBUFFERED='1', OMP_NUM_THREADS=os.environ.get('OMP_NUM_THREADS', '1'),
                    PYTHONPATH=repo_pythonpath(), **key_env)
    _without_key(base_env, key_env)
    envs = {s.name: dict(base_env, CYCLONEDDS_URI=loopback) for s in specs}
    prefixes, cleanup, checks = {}, [], []
    if args.netns:
        try:
            specs = _netns_setup(specs, envs, prefixes, cleanup, base_env, checks)
        except Exception as err:  # noqa: B902 - any set-up failure: clean up and explain
            for fn in reversed(cleanup):
                fn()
            print(f'rog fleet: {err}', file=sys.stderr)
            return None
    return specs, envs, prefixes, cleanup, checks


def _broken(checks) -> str | None:
    """Return the first line a check in ``checks`` says (the run broke), else None."""
    for check in checks:
        said = check()
        if said:
            return said
    return None


def _announce(args, server, specs, domain: int, log_dir: str) -> None:
    """
    Say, before the nodes start, how to watch them and how to read the progress line.

    With ``--netns`` the status topics are out of reach: it says where the progress is
    instead, and the run goes on quiet.
    """
    if args.netns and not args.quiet:
        print('rog fleet: --netns: the nodes live in their own namespaces; progress is in '
              f'{log_dir}', file=sys.stderr)
        args.quiet = True
    if not args.quiet:
        print(f'rog fleet: {ros2_watch_line(domain)}', file=sys.stderr)
        emulated = server.parameters.get('trace') not in (None, '', 'none') and any(
            s.role == 'netmon' for s in specs)      # netmon reports the emulated rates
        print(f'rog fleet: {legend(emulated)}', file=sys.stderr)


def _interrupted(out: str, progress: Progress, server, sup: Supervisor, stop, sent,
                 t_stop: float, key_line: str, earlier: bool = False) -> int:
    """
    Say how a run stopped on request (Ctrl-C, SIGTERM) ended; its exit status.

    How soon every node stopped after the first request (and what it took: ``sent``), the
    summary written from what exists, and the key: the same command resumes the run, and it
    must hold the same key to be heard. ``earlier``: ``out``'s summary is an earlier run's
    (:func:`_earlier_run_s`), left as it is (:func:`_left_earlier_summary`).
    """
    if earlier:
        print(f'rog fleet: {_left_earlier_summary(out)}', file=sys.stderr)
        summary = 'none of this run (above)'
    else:
        summary = _summary_from_what_exists(out, progress, server.parameters['workers'],
                                            server.parameters['iterations'])
    escalated = ', '.join(f'{sig} to {len(names)}' for sig, names in sent[1:])
    since = stop.first_at if stop.first_at is not None else t_stop
    print(f'rog fleet: interrupted; every node stopped {time.monotonic() - since:.1f} s '
          f'after the request' + (f' ({escalated})' if escalated else '')
          + f'; logs in {sup.log_dir}; summary {summary}', file=sys.stderr)
    print(f'rog fleet: {key_line}', file=sys.stderr)
    return stop.exit_status()


def _outcome(out: str, server, specs, sup: Supervisor, codes: dict, failed: list, reason: str,
             key_line: str, killed=(), said_why: bool = False, earlier: bool = False) -> int:
    """
    Say how a run that was not interrupted ended; its exit status (0, or 1 on any failure).

    Each failed node with its log's last lines (one SIGKILLed but not among ``killed``, the
    nodes the stop sent it to, with who sends it: its log ends mid-run and says nothing), and
    the reason the watch stopped; then the result as a clean run gives it (also of a run
    that completed although a node failed), whether the same command resumes it, and the key.
    ``said_why``: ``reason`` names the cause (a tc that failed), so no ``rog doctor`` hint.
    ``earlier``: ``out``'s summary is an earlier run's (:func:`_earlier_run_s`): this run has
    none, and its results are not that summary's (:func:`_left_earlier_summary`).
    """
    for name in failed:
        said = describe_exit(codes[name]) if codes[name] is not None else 'did not finish'
        if said == 'was killed by SIGKILL' and name not in killed:
            said += (' (not by rog fleet: the out-of-memory killer sends it, `dmesg` names the '
                     f'process it killed, or another program did; {len(specs)} nodes run here: '
                     'fewer --workers need less memory)')
        print(f'rog fleet: {name} {said}; last lines of its log '
              f'({sup.log_path(name)}):\n{sup.tail(name)}', file=sys.stderr)
    if reason:
        print(f'rog fleet: {reason}', file=sys.stderr)
    summary = os.path.join(out, 'summary.json')
    if earlier and (failed or reason):
        print(f'rog fleet: {_left_earlier_summary(out)}', file=sys.stderr)
    state_dir = server.parameters.get('state_dir')
    completed = not earlier and _completed(out)
    if (failed or reason) and resumes(state_dir) and not completed:
        print(f"rog fleet: the run's state is in {state_dir}: the same command resumes it "
              '(once the cause is mended)', file=sys.stderr)
    workload = server.parameters['workload']
    log_names = [s.name for s in specs if s.name != server.name]
    if failed or reason or not os.path.exists(summary):
        anyway = [] if earlier else _completed_anyway(out, failed, workload, sup.log_dir,
                                                      log_names)
        for line in anyway:           # the result, as a clean run prints it
            print(f'rog fleet: {line}')
        print(f'rog fleet: {key_line}', file=sys.stderr)
        if not anyway and not said_why:
            print('rog fleet: if the cause is not in the lines above, `rog doctor` checks this '
                  'machine (torch, a DDS round trip, buffers) and says what to fix',
                  file=sys.stderr)
        return 1
    for line in closing_lines(out, workload, sup.log_dir, log_names):
        print(f'rog fleet: {line}')
    print(f'rog fleet: {key_line}')
    if every_evaluation_failed(summary):
        print('rog fleet: every evaluation failed, so nothing says how well the model '
              f"trained; the server's log says why ({sup.log_path(server.name)})",
              file=sys.stderr)
        return 1
    return 0


def _recorder(args):
    """Return the MCAP recorder of ``--record`` (None without; False after an error)."""
    if not getattr(args, 'record', None):
        return None
    if args.netns:
        print('rog fleet: --record needs the status topics in this namespace; it is not '
              'available with --netns', file=sys.stderr)
        return False
    try:
        from rog_ros.transport.bag import McapRecorder
        _keep_earlier_recording(args.record)
        return McapRecorder(args.record)
    except (ImportError, OSError) as err:
        hint = ' (pip install mcap)' if isinstance(err, ImportError) else ''
        print(f'rog fleet: --record {args.record}: {err}{hint}', file=sys.stderr)
        return False


MAX_KEPT_RECORDINGS = 10_000
"""Most numbered names tried for an earlier ``--record`` file (then the run is refused)."""


def _keep_earlier_recording(path: str) -> str | None:
    """
    Move an earlier recording at ``path`` to its first free numbered name; return that name.

    ``--record FILE`` truncated FILE: resuming a fleet with the same command (``--state-dir``)
    lost the recording of the run before. Refusing would break that command, so the earlier
    file goes to ``run.1.mcap`` (``run.2.mcap`` if taken, ...), and one line says where
    (:func:`rog_ros.atomic.keep_earlier_file`, which the nodes' ``--record`` use too).
    OSError when no name is free.
    """
    from rog_ros.atomic import keep_earlier_file
    kept = keep_earlier_file(path, MAX_KEPT_RECORDINGS, 'recording')
    if kept:
        print(f'rog fleet: --record {path}: kept the earlier recording as {kept}',
              file=sys.stderr)
    return kept


def _watch_topics(bus, specs, n: int, progress: Progress, recorder) -> None:
    """Subscribe to every node's status topics (progress) and what ``--record`` keeps."""
    from rog_ros.nodes.diagnostics import DIAGNOSTICS
    from rog_ros.nodes.routing import link_stats, train_status, worker_name
    from rog_ros.transport.topics import resolve

    def tee(topic, callback=None):
        full = resolve(topic, bus.namespace)

        def on_message(msg):
            if callback is not None:
                callback(msg)
            if recorder:
                recorder.write(full, msg)
        bus.subscribe(topic, callback=on_message)

    for name in ['rog_server'] + [worker_name(r) for r in range(n)]:
        tee(train_status(name), progress.on_status)
    for spec in specs:
        if spec.role == 'netmon':
            tee(link_stats(spec.name), progress.on_link)
    if recorder:
        for r in range(n):
            tee(f'w{r}/schedule')
        tee(DIAGNOSTICS)


def _close_bounded(bus, timeout_s: float = BUS_CLOSE_S) -> None:
    """Close the progress bus, but never wait on it longer than ``timeout_s``."""
    if bus is None:
        return
    import threading
    closer = threading.Thread(target=bus.close, name='rog-fleet-bus-close', daemon=True)
    closer.start()
    closer.join(timeout_s)


def _summary_from_what_exists(out: str, progress: Progress, n: int, iterations: int,
                              error: str | None = None) -> str:
    """
    Make sure an interrupted run leaves a summary, marked as such.

    The server writes its own on SIGINT (with what it measured); if it could not (killed, or
    stopped before it trained), write one from the last status the fleet published. Either way
    the summary carries ``error``: an interrupted run is not a result (``rog compare`` and the
    reports leave it out). ``error`` (a line: the links stopped following the trace) goes first
    in it, the server's own after, and ``trace_followed`` is false.
    """
    from rog_ros.atomic import atomic_write_text
    path = os.path.join(out, 'summary.json')
    try:
        with open(path) as fh:
            summary = json.load(fh)
    except (OSError, ValueError):
        s = progress.server
        summary = {
            'driver': 'fleet', 'completed': False, 'workers': n,
            'target_iterations': iterations,
            'iterations': int(s.iteration) if s is not None else 0,
            'final_accuracy': (float(s.accuracy) if s is not None and math.isfinite(s.accuracy)
                               else None),
            'stall_time_s': float(s.stall_s) if s is not None else None,
            'bytes_up': int(s.bytes_up) if s is not None else 0,
            'bytes_down': int(s.bytes_down) if s is not None else 0,
            'source': 'rog fleet (the server wrote no summary)',
        }
    if error:
        before = summary.get('error')
        summary['error'] = error + (f' (then: {before})' if before and before != error else '')
        summary['trace_followed'] = False
    elif summary.get('completed') is not True and not summary.get('error'):
        summary['error'] = 'interrupted (Ctrl-C): training did not complete'
    os.makedirs(out, exist_ok=True)
    atomic_write_text(path, json.dumps(summary, indent=2, default=str) + '\n')
    return path


def _left_earlier_summary(out: str) -> str:
    """
    Return the line that says ``out``'s summary.json is an earlier run's, left as it was.

    A run taken up again in the ``--out`` of an earlier one (:func:`_earlier_run_s`) whose
    server wrote no summary before it broke (``--netns``) or was stopped (Ctrl-C):
    until 2026-12-08 ``rog fleet`` wrote this run's ``error`` (and ``trace_followed`` false)
    into the earlier run's summary, which then called that run's complete results broken
    (``rog compare`` and the reports left them out) beside its model and timeseries. No run
    writes into a summary it did not start; nor does it put one of its own in its place (the
    folder's model, timeseries and events are still the earlier run's, and the same command
    resumes this one): the error goes to stderr, above this line, and the exit status is 1.
    """
    path = os.path.join(out, 'summary.json')
    _, stamp = _results_stamp(out)
    when = '' if stamp is None else time.strftime(' %Y-%m-%d %H:%M:%S', time.localtime(stamp))
    return (f'{path} is an earlier run\'s (written{when or " before this run"}), left as it '
            "was: this run's server wrote no summary, and this run's error is not written "
            'into one it did not start')


def _record_kernel_trace(out: str, trace: str | None, followed: bool,
                         keys: dict | None = None) -> None:
    """
    Record in ``out``'s summary the trace the kernel's links followed (``rog fleet --netns``).

    The nodes ran with ``trace`` ``none`` (the kernel shapes instead, so they must not emulate
    it too), and the server wrote that: the summary said ``"trace": "none"`` and ``rog
    compare`` and ``rog report`` took the run for one on unshaped links. Its ``trace`` is the
    run's setting now, and ``trace_followed`` says whether the links followed it to the end
    (of the run's results: :class:`_FollowerCheck`); ``keys`` (:func:`_netns_keys`) go in
    too. Nothing when there is no summary, or no trace (the links were not shaped).
    """
    from rog_ros.atomic import atomic_write_text
    if trace in (None, '', 'none'):
        return
    path = os.path.join(out, 'summary.json')
    try:
        with open(path) as fh:
            summary = json.load(fh)
    except (OSError, ValueError):
        return
    if not isinstance(summary, dict):
        return
    summary['trace'] = trace
    summary['trace_followed'] = bool(followed and summary.get('trace_followed', True))
    summary.update(keys or {})
    atomic_write_text(path, json.dumps(summary, indent=2, default=str) + '\n')


def _earlier_run_s(out: str, checks, started: float | None = None) -> bool:
    """
    Tell whether ``out``'s summary.json is an earlier run's.

    It is when it is one (a JSON object) and not written since this fleet started
    (:func:`written_since`, ``since`` of its :class:`_FollowerCheck`, else ``started``: when
    ``rog fleet`` started, before any node): a run taken up again whose server wrote no
    summary of its own. :func:`_record_kernel_trace` leaves it alone (it gave the earlier run
    this run's trace), and so does a Ctrl-C (:func:`_interrupted`; until 2026-12-08 one of a
    plain ``rog fleet``, or ``--netns`` without a trace, rewrote it). False without either
    time, and for a file that is no summary (one is made in its place for a broken run).
    """
    since = [c.since for c in checks or () if isinstance(c, _FollowerCheck)] + (
        [] if started is None else [started])
    return bool(since) and _results_stamp(out)[0] is not None \
        and not written_since(out, since[0])


def _results_stamp(out: str):
    """
    Return ``(summary, when it was written)`` of ``out``'s summary.json, else ``(None, None)``.

    When: its ``results_written_at``, the server's own ``time.time()`` (this host's clock);
    the file's modification time for a summary without the key (written before 2026-12-08);
    None for a stamp that is no finite number.
    """
    try:
        with open(os.path.join(out, 'summary.json')) as fh:
            written = os.fstat(fh.fileno()).st_mtime
            summary = json.load(fh)
    except (OSError, ValueError):
        return None, None
    if not isinstance(summary, dict):
        return None, None
    stamp = summary.get('results_written_at', written)
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) \
            or not math.isfinite(stamp):
        return summary, None
    return summary, float(stamp)


def written_since(out: str, since: float) -> bool:
    """
    Tell whether ``out``'s summary.json was written by this run: stamped at or after ``since``.

    ``since``: when this ``rog fleet`` started (its ``time.time()``, before any node). Only
    the server's ``results_written_at`` counts (its clock is this host's); a summary without
    it was written by an older server, so by an earlier run. A run given an ``--out`` whose
    earlier run finished (an older checkpoint that does not record that its run finished,
    taken up again) finds that run's complete summary there until its server writes its own.
    """
    summary, stamp = _results_stamp(out)
    return summary is not None and 'results_written_at' in summary and stamp is not None \
        and stamp >= since


def results_complete_at(out: str, since: float | None = None) -> float | None:
    """
    Return when the server wrote ``out``'s final summary.json (wall time), else None.

    Final: ``completed`` true and no ``error``. The server writes it last, once training
    ended, after its final evaluation and ``model.pt`` (``ServerNode.finish``): from then on
    the run's results are complete. When: its ``results_written_at``, the server's own
    ``time.time()`` (this host's clock, as the follower's failure time). Not the file's
    modification time, which the file system stamps: a network one with its own clock (a
    server seconds behind made a failure before the write look after it, and a broken run
    stood), a coarse one in whole seconds. The file's time only for a summary without the
    key (written before 2026-12-08). With ``since`` (when this fleet started): only a
    summary this run's server wrote (:func:`written_since`); an earlier run's complete
    summary in ``out`` made a tc failing mid-run look hours after the results.
    """
    summary, stamp = _results_stamp(out)
    if summary is None or stamp is None or summary.get('completed') is not True \
            or summary.get('error'):
        return None
    if since is not None and not written_since(out, since):
        return None
    return stamp


class _FollowerCheck:
    """
    The ``--netns`` check :func:`_watch` asks: whether the links stopped following mid-run.

    The rule: links that stopped following their traces (a tc failed, :class:`~rog_ros.net.
    netns.RateFollower`) at wall time T break the run (the check says the follower's line:
    the run ends, exit status 1, ``trace_followed`` false) unless its results were complete
    by T: the server had written the run's final summary.json (:func:`results_complete_at`,
    its ``results_written_at`` at or before T). A failure after that, while the nodes exit, is
    *late*: the results followed the trace to their end, so the run stands (status 0,
    ``trace_followed`` true); :meth:`late` says how long after, and ``rog fleet`` says it
    in a warning line and in ``trace_stopped_after_end_s``. Decided once per failure.
    ``since``: when this fleet started (``time.time()``, before any node); a summary written
    before it is an earlier run's (:func:`written_since`), neither complete results of this
    run nor one to write this run's keys into (:func:`_netns_keys`).
    """

    def __init__(self, follower, out: str, since: float | None = None):
        self.follower, self.out = follower, out
        self.since = time.time() if since is None else since
        self._decided = None        # (line that breaks the run or None, late seconds or None)

    def _decide(self) -> tuple:
        if self._decided is None:
            line = self.follower.failure()
            if line is None:
                return None, None
            written = results_complete_at(self.out, self.since)
            after = None if written is None else self.follower.failed_at[1] - written
            late = after is not None and after >= 0
            self._decided = (None, after) if late else (line, None)
        return self._decided

    def __call__(self) -> str | None:
        return self._decide()[0]

    def late(self) -> float | None:
        """Return how long (s) after the results were complete the links stopped, else None."""
        return self._decide()[1]


def _netns_keys(checks, earlier: bool = False) -> dict:
    """
    Return the ``--netns`` summary keys of a run's follower check (say a late failure).

    ``netns_kick_errors``: kicks that could not be sent while the fleet was live
    (:meth:`~rog_ros.net.netns.NetnsFleet.kick`); ``trace_stopped_after_end_s``: only when
    the links stopped following after the results were complete (:class:`_FollowerCheck`).
    Both only into this run's summary (none when ``earlier``: the summary is an earlier
    run's, :func:`_earlier_run_s`, asked before rog fleet makes one from what exists): an
    earlier run's complete summary left in ``out`` (this run's server wrote none) was given
    this run's counts and a ``trace_stopped_after_end_s`` of hours. The warning line stands.
    """
    keys = {}
    for check in checks:
        if not isinstance(check, _FollowerCheck):
            continue
        if not earlier:
            keys['netns_kick_errors'] = int(check.follower.fleet.live_kick_errors)
        after = check.late()
        if after is not None:
            if not earlier:
                keys['trace_stopped_after_end_s'] = round(after, 3)
            print(f'rog fleet: warning: {check.follower.failure()} ({after:.2f} s after the '
                  "run's results were complete, summary.json written: the run stands)",
                  file=sys.stderr)
    return keys


def _watch(sup: Supervisor, bus, progress: Progress, args, n: int, stop=None,
           checks=()) -> tuple:
    """
    Wait for the training nodes; returns (failed node names, other failure reason).

    A line from one of ``checks`` (``--netns``: the links stopped following their traces)
    ends the run: its results would not be those of the trace it names.
    """
    deadline = time.monotonic() + args.timeout
    server_done_at = None
    training = ['rog_server'] + [f'rog_worker_{r}' for r in range(n)]
    while stop is None or not stop.count:
        broken = _broken(checks)
        if broken:
            return [], broken
        codes = sup.codes()
        failed = [k for k, c in codes.items() if c not in (None, 0)]
        if failed:
            return failed, ''
        if all(codes[k] == 0 for k in training):
            return [], ''
        if codes['rog_server'] == 0 and server_done_at is None:
            server_done_at = time.monotonic()
        if server_done_at and time.monotonic() - server_done_at > WORKERS_AFTER_SERVER_S:
            late = [k for k in training if codes[k] is None]
            return late, f'{", ".join(late)} did not exit after the server finished'
        if time.monotonic() > deadline:
            return [], f'timeout after {args.timeout:.0f} s'
        if bus is not None:
            bus.poll(0.2)
        else:
            time.sleep(0.2)
        if not args.quiet:
            progress.show()
    return [], ''                  # stop requested: run() stops the nodes


def _netns_setup(specs, envs, prefixes, cleanup, base_env, checks=None) -> list:
    """
    Create namespaces, veth pairs, the kernel rate follower and per-node Cyclone configurations.

    Returns the specs without application-level shaping (the kernel shapes instead); the
    follower's check (:class:`_FollowerCheck`: its failure, unless the results were complete
    before it) goes into ``checks``.
    """
    from rog_ros.net import netns
    from rog_ros.nodes.emulated_link import link_for
    server = specs[0].parameters
    n = server['workers']
    since = time.time()     # (before any node: a summary written from now on is this run's)
    fleet = netns.NetnsFleet(n, say=lambda line: print(f'rog fleet: {line}',
                                                       file=sys.stderr)).create()
    cleanup.append(fleet.delete)
    links = {r: link_for(server['trace'], r, n, server['seed'], server['trace_scale'])
             for r in range(n)}
    if all(link is not None for link in links.values()):
        follower = netns.RateFollower(fleet, links, server['epoch']).start()
        cleanup.append(lambda: _say_rebuilds(fleet))      # (once the follower has stopped)
        cleanup.append(follower.stop)
        if checks is not None:
            checks.append(_FollowerCheck(follower, server['out'], since))
    out = []
    for spec in specs:
        params = dict(spec.parameters)
        if spec.role == 'server':
            ns, addrs = fleet.server_ns, fleet.server_addresses()
            peers = [link.worker_ip for link in fleet.links]
            params['trace'] = 'none'
        elif spec.role == 'worker':
            link = fleet.links[spec.rank]
            ns, addrs, peers = link.worker_ns, [link.worker_ip], [link.server_ip]
            params['trace'] = 'none'
        else:  # one netmon, on the server side: it sees every veth
            ns, addrs = fleet.server_ns, fleet.server_addresses()
            peers = [link.worker_ip for link in fleet.links]
        spec = dataclasses.replace(spec, parameters=params)
        envs[spec.name] = dict(base_env, CYCLONEDDS_URI=netns.cyclone_xml(addrs, peers))
        prefixes[spec.name] = fleet.exec_prefix(ns)
        out.append(spec)
    return out


def _say_rebuilds(fleet) -> None:
    """Say in one line how many link ends were made again after a failed tc, and the first."""
    if fleet.rebuilds:
        (rank, d), error = fleet.rebuilds[0]
        print(f'rog fleet: --netns: {len(fleet.rebuilds)} link end(s) made again after a tc '
              f'batch failed, their queued frames dropped (first: worker {rank} {d}link: '
              f'{error})', file=sys.stderr)


def main(argv=None) -> int:
    """``python -m rog_ros.nodes.fleet ...``: ``rog fleet`` without the rog CLI."""
    import argparse
    parser = argparse.ArgumentParser(prog='rog', allow_abbrev=False)
    add_parser(parser.add_subparsers(dest='command', required=True))
    args = parser.parse_args(['fleet'] + list(sys.argv[1:] if argv is None else argv))
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
