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
Connect: open a node's bus and wait until its peers' endpoints are matched.

RELIABLE + VOLATILE topics deliver only to readers that are matched when the sample is
written, so a worker must not push before the server's reader has been discovered (and the
server's downlink writer must be matched before it can answer). Waiting for the match, with a
timeout and a diagnostic naming the topics still unmatched, replaces guessed start-up sleeps.
"""

from __future__ import annotations

import logging
import os
import sys
import time

from rog_ros.nodes.fleet_key import key_source, load_fleet_key
from rog_ros.protocol.auth import REASONS as AUTH_REASONS
from rog_ros.transport.bus import RecordError
from rog_ros.transport.choose import make_bus
from rog_ros.transport.cyclone_settings import read_settings

NO_KEY_WARNING = 'no fleet key: messages are not authenticated'
"""What a node says at start without a fleet key (docs/security.md)."""
FLEET_KEY_SAID_ENV = 'ROG_FLEET_KEY_SAID'
"""Set (``1``) by what starts worker nodes and has said itself what a worker holding the fleet
key with ``robot_keys`` on means (``rog robot``), or starts the whole fleet on one machine,
where it means nothing (``rog fleet``, ``rog chaos``, fleet.launch.py): the worker node does
not warn (``fleet_key_on_robot``)."""


def fleet_key_on_robot(key, rank) -> str:
    """Return the warning for worker robot ``rank`` holding the fleet ``key`` (robot_keys on)."""
    return (f'robot_keys is on, but this worker robot holds the fleet key ({key.fingerprint}), '
            "from which every robot's key is made: taken over, it still speaks for all; give "
            f'it only its own key file (rog security key --robot {rank} --fleet-key FLEET_KEY '
            'FILE) and keep the fleet key on the server robot')


class PeerTimeout(RuntimeError):
    """The peers did not appear in time."""


def open_bus(kind: str, namespace: str, key=None, record=None, node=None, executor=None,
             node_name=None, node_namespace=None):
    """
    Open the node's bus (``auto``: rclpy when ROS 2 is sourced, else the embedded DDS).

    With a fleet ``key`` (:func:`fleet_key`) the bus is wrapped in an
    :class:`~rog_ros.transport.auth_bus.AuthBus`: what the node publishes is signed, and
    what it receives is verified before the engine sees it. With ``record`` (a path) the
    status, link, schedule and diagnostics traffic the node sees is also written to that
    ROS 2 MCAP file (:class:`~rog_ros.transport.bag.RecordingBus`). With an rclpy ``node``
    (the process's lifecycle node) the bus is an RclpyBus on that node, which spins
    ``executor`` (the one the node was added to; None: a private one). Without ``node``,
    ``node_name`` and ``node_namespace`` (the node's ``args.node_name`` and
    ``args.node_namespace``) name the bus's own ROS 2 node, the one ``ros2 node list`` shows
    (an embedded bus publishes it on ``ros_discovery_info``).
    """
    if node is not None:
        from rog_ros.transport.rclpy_bus import RclpyBus
        bus = RclpyBus(namespace=namespace, node=node, executor=executor)
    else:
        names = {'node_name': node_name} if node_name else {}
        if node_name and node_namespace:
            names['node_namespace'] = node_namespace
        bus = make_bus(kind, namespace=namespace, **names)
    if key is not None:
        from rog_ros.transport.auth_bus import AuthBus
        bus = AuthBus(bus, key)
    if record:
        try:
            from rog_ros.transport.bag import McapRecorder, RecordingBus
        except ImportError as err:       # the rclpy path runs without the DDS binding
            bus.close()
            raise RecordError(f'--record {record}: the bag writer needs the Cyclone DDS Python '
                              f'binding, which does not import here ({err}); pip install '
                              'cyclonedds, or record with `ros2 bag record`') from None
        bus = RecordingBus(bus, McapRecorder(_keep_earlier_recording(bus, record)))
    return bus


def _keep_earlier_recording(bus, record: str) -> str:
    """
    Keep an earlier recording at ``record`` under a numbered name, as ``rog fleet`` does.

    A restarted node (or ``rog robot --record`` run again) truncated it before. Return
    ``record``; RecordError, with ``bus`` closed, when no numbered name is free.
    """
    from rog_ros.atomic import keep_earlier_file
    try:
        kept = keep_earlier_file(record, what='recording')
    except OSError as err:
        bus.close()
        raise RecordError(f'--record {record}: {getattr(err, "strerror", None) or err}') \
            from None
    if kept:
        print(f'--record {record}: kept the earlier recording as {kept}', file=sys.stderr)
    return record


def fleet_key(args, log=None, rank=None, worker=False):
    """
    Return the fleet key: ``--fleet-key-file``, else ``$ROG_FLEET_KEY_FILE``/``$ROG_FLEET_KEY``.

    None when none is configured (the node runs unauthenticated). With ``robot_keys`` a
    keyring instead (``rog_ros.protocol.robot_keys.keyring_for``): the server's (``rank``
    None) or robot ``rank``'s. Raises ``rog_ros.protocol.auth.FleetKeyError`` (a ValueError;
    the message never holds the key). Says on ``log`` (default: the logger of
    ``args.node_name``) which key the node holds, by its fingerprint, so mismatched keys show
    in the nodes' logs, or warns that there is none. A ``worker`` node (robot ``rank``) given
    the fleet key with ``robot_keys`` on also warns that the whole fleet key is on its robot,
    as ``rog robot`` does, unless what started it said so already (``$ROG_FLEET_KEY_SAID``).
    """
    from rog_ros.protocol.robot_keys import keyring_for
    path = getattr(args, 'fleet_key_file', None)
    key = load_fleet_key(path)
    robot_keys = bool(getattr(args, 'robot_keys', False))
    keys = keyring_for(key, robot_keys, rank, key_source(path))
    if log is None:
        log = logging.getLogger(getattr(args, 'node_name', None) or 'rog_ros')
    if key is None:
        log.warning(NO_KEY_WARNING)
    elif robot_keys:
        log.info(f'robot keys: {keys!r} (fleet key {key.fleet_fingerprint or key.fingerprint})')
        if worker and key.robot is None and not os.environ.get(FLEET_KEY_SAID_ENV):
            log.warning(fleet_key_on_robot(key, rank))
    else:
        log.info(f'fleet key {key.fingerprint}')
    return keys


def transfer_limits(uri=None) -> dict:
    """
    Return ``{'lease_s': ..., 'fragment_bytes': ...}``: what a node gives its engines.

    :func:`transfer_lease_s` and :func:`transfer_fragment_bytes` from one read of
    ``CYCLONEDDS_URI`` (``uri`` overrides it): a node asked for each, and the configuration
    (its files opened, its tags walked) was read twice at every start. The keywords the
    engines and ``push_systems``' builders take: ``ServerEngine(..., **transfer_limits())``.
    """
    settings = read_settings(uri)
    return {'lease_s': _lease_at_least_bound(settings.lease_s),
            'fragment_bytes': _fragment_at_most_whc(settings.fragment_bytes)}


def transfer_lease_s(uri=None) -> float:
    """
    Return the lease a node's transfers wait at the 4 MiB bound before their END.

    The DDS lease configured in ``CYCLONEDDS_URI`` (``uri`` overrides it), never less than
    ``BOUND_END_S``: a robot back within its lease is still matched and acks what the
    writer held, so an END sooner would cut it back; past the lease DDS may have dropped it.
    A node takes it with the fragment size from :func:`transfer_limits`.
    """
    return _lease_at_least_bound(read_settings(uri).lease_s)


def _lease_at_least_bound(lease_s) -> float:
    """
    Return the configured lease ``lease_s`` (None: unset), never less than ``BOUND_END_S``.

    Imported here: the transfers' module brings torch, and a launch process imports this
    module without training anything.
    """
    from rog_ros.protocol.transfer import BOUND_END_S
    return max(BOUND_END_S, lease_s or 0.0)


def transfer_fragment_bytes(uri=None) -> int:
    """
    Return the DDS fragment size a node's engines count their writers' bytes with.

    Cyclone counts each sample against a writer's 8 MiB mark as its CDR plus 80 bytes per
    fragment of ``General/FragmentSize``: the one configured in ``CYCLONEDDS_URI`` (``uri``
    overrides it), never more than ``WHC_FRAGMENT_BYTES`` (1 KiB: a count a little high
    costs a little room under the mark, one too low blocks the node's loop there). A 600-byte
    FragmentSize counted as 1 KiB left 880 bytes of every 16 KiB chunk out (28 fragments of
    80 bytes each in Cyclone's count, 17 in ours). A node takes it with the lease from
    :func:`transfer_limits`.
    """
    return _fragment_at_most_whc(read_settings(uri).fragment_bytes)


def _fragment_at_most_whc(fragment_bytes) -> int:
    """
    Return the configured ``fragment_bytes`` (None: unset), never more than 1 KiB.

    Imported here, as in :func:`_lease_at_least_bound` (torch stays out of launch processes).
    """
    from rog_ros.protocol.transfer import WHC_FRAGMENT_BYTES
    return min(WHC_FRAGMENT_BYTES, fragment_bytes or WHC_FRAGMENT_BYTES)


NODE_REJECT_REASONS = ('undecodable',) + AUTH_REASONS + ('invalid', 'engine_error')
"""Why a server or worker node drops a message (:func:`node_reject_counts`), in order."""


def reject_counts(bus) -> dict:
    """Return ``{reason: count}`` of the messages ``bus`` dropped (empty without a bus)."""
    if bus is None:
        return {}
    counts = getattr(bus, 'reject_counts', None)
    return dict(counts()) if counts is not None else {'undecodable': bus.rejects}


def node_reject_counts(node) -> dict:
    """
    Return ``{reason: count}`` of every message a server or worker node dropped.

    ``undecodable`` and the authentication reasons come from the bus, ``invalid`` from the
    engine's validation, ``engine_error`` from the driver (the engine raised); the server
    node adds ``invalid_status`` (``ServerNode.reject_counts``). Every reason of
    :data:`NODE_REJECT_REASONS` is there, 0 when none (a bus without a fleet key has no
    authentication reasons of its own), so ``summary.json`` always has the same keys.
    """
    counts = dict.fromkeys(NODE_REJECT_REASONS, 0)
    counts.update(reject_counts(getattr(node, 'bus', None)))
    if getattr(node, 'engine', None) is not None:
        counts['invalid'] = node.engine.rejects
    if getattr(node, 'driver', None) is not None:
        counts['engine_error'] = node.driver.engine_errors
    return counts


def wait_matched(bus, topics, timeout_s: float, keep_waiting=lambda: True,
                 poll_s: float = 0.02, minimum=None) -> float:
    """
    Wait until every topic in ``topics`` has its least number of matched remote endpoints.

    That least number is one, or ``minimum[topic]`` (a ``{topic: count}`` mapping; its topics
    are waited for too). One matched endpoint is proof of a peer only on a topic that no one
    else takes part in: any reader (``ros2 topic echo``) matches a writer. A topic on which
    this bus only reads counts the writers, one per peer process, so a node that needs N
    peers asks for N there (the server: one uplink writer per worker).

    Returns the seconds waited; raises :class:`PeerTimeout` naming the topics still short,
    with how many peers it saw of how many it needs, or returns early (``-1``) when
    ``keep_waiting()`` turns false (shutdown requested).
    """
    need = dict.fromkeys(topics, 1)
    need.update(minimum or {})
    start = time.monotonic()
    while True:
        short = []
        for topic, least in need.items():
            seen = bus.matched(topic)
            if seen < least:
                short.append((topic, seen, least))
        if not short:
            return time.monotonic() - start
        if not keep_waiting():
            return -1.0
        if time.monotonic() - start > timeout_s:
            raise PeerTimeout(f'{_shortfall(short)} after {timeout_s:.0f} s: is the other side '
                              f'running with the same namespace ({bus.namespace}) and '
                              'ROS_DOMAIN_ID, and can DDS discovery reach it?')
        time.sleep(poll_s)


def _shortfall(short) -> str:
    """
    Say which topics lack peers: ``no peer on a, b; too few peers on c (1 of 3)``.

    A topic that needs one peer reads as before (``no peer on ...``, which the docs' trouble
    table quotes); one that needs several says how many were seen, so a fleet short of one
    robot is told apart from a fleet that is not there at all.
    """
    none = [t for t, _, n in short if n <= 1]
    few = [f'{t} ({seen} of {n})' for t, seen, n in short if n > 1]
    parts = ([f'no peer on {", ".join(none)}'] if none else []) + \
        ([f'too few peers on {", ".join(few)}'] if few else [])
    return '; '.join(parts)
