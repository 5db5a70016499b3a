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
Node main: the wiring every training node shares (parse, log, configure, activate, spin, finish).

``rog_server`` and ``rog_worker`` differ only in their core class; their ``main()`` is one
call to :func:`run_node`. With ROS 2 (``--bus rclpy``, or ``auto`` with rclpy importable) the
core runs inside a managed ``rclpy`` lifecycle node (:mod:`rog_ros.nodes.ros_node`); otherwise
the same lifecycle is driven by signals: SIGUSR1 deactivate (pause), SIGUSR2 activate,
SIGINT/SIGTERM shutdown. Either way a shutdown writes the summary (server) before leaving.
"""

from __future__ import annotations

import logging
import os
import sys
import time

from rog_ros.nodes.connect import PeerTimeout
from rog_ros.nodes.driver import EngineFailure, StateWriteError
from rog_ros.nodes.params import check_fleet_args, node_parser
from rog_ros.nodes.respawn import ENGINE_FAILED
from rog_ros.nodes.signals import SignalRequests
from rog_ros.transport.bus import RecordError

LOG_FORMAT = '[%(levelname)s] [%(created).3f] [%(name)s]: %(message)s'
"""Like ROS 2's console output, so logs of both paths read alike."""


def setup_logging(name: str) -> logging.Logger:
    """Configure the ``logging`` module once (stderr, INFO) and return the node's logger."""
    if not logging.getLogger().handlers:
        level = os.environ.get('ROG_LOG_LEVEL', 'INFO').upper()
        logging.basicConfig(stream=sys.stderr, format=LOG_FORMAT,
                            level=getattr(logging, level, logging.INFO))
    return logging.getLogger(name)


def bus_kind(args) -> str:
    """
    Return the transport asked for: ``bus``, its ``auto`` replaced by ``$ROG_BUS`` when set.

    ``$ROG_BUS`` is the default of ``bus``, so it decides here as it does in ``make_bus``:
    else ``ROG_BUS=rclpy`` opened an RclpyBus in a node not started as an rclpy node. Raises
    ValueError for a value ``make_bus`` does not know.
    """
    from rog_ros.transport.choose import BUS_KINDS
    if args.bus != 'auto':
        return args.bus
    kind = os.environ.get('ROG_BUS', 'auto')
    if kind not in BUS_KINDS:
        raise ValueError(f'ROG_BUS (the default of --bus): unknown bus kind {kind!r}; use '
                         f'{", ".join(BUS_KINDS)}, or unset ROG_BUS')
    return kind


def use_ros(args) -> bool:
    """Tell whether this node runs as an rclpy node (``bus`` rclpy, or auto with ROS 2)."""
    kind = bus_kind(args)
    if kind != 'auto':
        return kind == 'rclpy'
    from rog_ros.transport.choose import rclpy_available
    return rclpy_available()


def ros_path(parser, args, lifecycle: bool = True) -> bool:
    """
    Tell whether this node runs as an rclpy node; refuse ``--bus rclpy`` where it cannot.

    ``auto`` on a ROS 2 that cannot host the node (Foxy and Galactic have no
    ``rclpy.lifecycle``) falls back to the embedded transport, which speaks the same topics
    and types, with a warning; ``--bus rclpy`` (or ``ROG_BUS=rclpy`` under ``--bus auto``)
    there is a usage error (exit 2) instead of a traceback from ``rclpy.init``, and so is an
    unknown ``ROG_BUS``.
    """
    try:
        kind = bus_kind(args)
    except ValueError as err:
        parser.error(str(err))
    if not use_ros(args):
        return False
    from rog_ros.nodes import ros_node
    missing = ros_node.missing_ros(lifecycle)
    if missing is None:
        return True
    if kind == 'rclpy':
        asked, instead = (('--bus rclpy', '--bus dds') if args.bus == 'rclpy'
                          else ('ROG_BUS=rclpy', 'ROG_BUS=dds'))
        parser.error(f'{asked}: {missing}; or run with {instead} (the embedded transport: '
                     'the same ROS 2 topics and types)')
    setup_logging(args.node_name).warning(
        f'{missing}; running on the embedded DDS transport (the same ROS 2 topics and types)')
    args.bus = 'dds'
    return False


def run_node(role: str, doc: str, core_class, argv=None, extend=None, usage_errors=()) -> int:
    """
    Run one training node; return its exit status.

    Parameters
    ----------
    role : str
        ``'rog_server'`` or ``'rog_worker'`` (selects the settings and the node name).
    doc : str
        The executable's module docstring (its first line is the ``--help`` description).
    core_class : type
        ServerNode or WorkerNode: ``configure()``, ``activate()``, ``spin_once()``,
        ``finish()``, ``shutdown()``, ``requests``, ``life``.
    argv : list, optional
        Command line (default ``sys.argv[1:]``), ``--ros-args`` included.
    extend : callable, optional
        ``extend(parser) -> check`` adds options that are not settings (test hooks) and
        returns ``check(parser, args)`` or None.
    usage_errors : tuple of exception types
        Raised by the core for unusable input (a bad state file): one line, exit 2.

    Returns
    -------
    int
        0 when training completed or a shutdown was requested, 1 when the peers did not
        appear or the server went silent, 3 when the engine cannot go on (a worker whose
        training diverged); argparse exits with 2 on a usage error.

    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = node_parser(role, role, doc)
    check = extend(parser) if extend is not None else None
    args = parser.parse_args(argv)
    check_fleet_args(parser, args)
    if check is not None:
        check(parser, args)
    if ros_path(parser, args):
        from rog_ros.nodes import ros_node
        return ros_node.run(role, args, core_class, argv, finish, usage_errors)
    log = setup_logging(args.node_name)
    if getattr(args, 'namespace_note', None):
        log.warning(args.namespace_note)
    requests = SignalRequests().install()
    core = core_class(args, requests)
    core.log = log
    try:
        core.configure()
        if not getattr(args, 'autostart', True):
            log.info('configured; waiting for SIGUSR2 (activate)')
            while not requests.shutdown_requested and 'activate' not in requests.take():
                time.sleep(0.1)
        if core.activate():
            log.info('active')
            core.spin()
            finish(core, log)
    except KeyboardInterrupt:
        log.warning('interrupted twice; leaving without the final write')
    except EngineFailure as err:
        log.error(str(err))
        return ENGINE_FAILED
    except (PeerTimeout, TimeoutError, StateWriteError) as err:
        log.error(str(err))
        return getattr(err, 'exit_status', 1)     # (4: robots' or server's rog_ros differs)
    except tuple(usage_errors) + (RecordError,) as err:
        log.error(str(err))
        return 2
    finally:
        core.shutdown()
    return 0


def finish(core, log) -> None:
    """Let the core write its results (the server: the summary), then log them."""
    summary = core.finish() if hasattr(core, 'finish') else None
    if summary:
        keys = ('system', 'iterations', 'final_accuracy', 'threshold_triggers', 'stall_cost',
                'sim_time_s', 'completed')
        shown = {k: summary.get(k) for k in keys}
        log.info(f'summary: {shown}')   # one string: rclpy loggers take no %-arguments
