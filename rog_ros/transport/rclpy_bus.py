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
RclpyBus: the Bus on rclpy, for robots with ROS 2 and the built ``rog_ros`` interfaces.

Importing this module raises ``ImportError`` unless ``rclpy`` and the generated
``rog_ros.msg`` classes import (``colcon build`` of this package, workspace sourced);
:func:`rog_ros.transport.choose.make_bus` uses that to fall back to ``DdsBus``. Topic names,
QoS profiles and the threading contract are those of :mod:`rog_ros.transport.bus`: callbacks of
the rclpy executor only queue messages, and :meth:`RclpyBus.poll` spins the executor in the
calling thread and hands the queue over.
"""

from __future__ import annotations

import array
from collections import deque
import dataclasses
import importlib
import os
import time

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from rog_ros import msg as ros_msg
from rog_ros.protocol import messages
from rog_ros.transport import topics
from rog_ros.transport.bus import Bus, BusError, guid_prefix_text, matched_of_this_build
from rog_ros.transport.field_plans import FIELD_PLANS, full_name, MESSAGE_CLASSES, \
    TYPE_HASHES
from rog_ros.transport.standard_msgs import from_sample
from rog_ros.transport.topics import DEFAULT_NAMESPACE, namesake_line, qualified, resolve, \
    topic_qos, topic_type

try:
    ROS_CLASSES = {name: getattr(ros_msg, name) for name in MESSAGE_CLASSES}
    """Generated rclpy message class per message type."""
except AttributeError as exc:  # rog_ros/msg exists but holds no generated interfaces
    raise ImportError(f'rog_ros.msg has no generated interfaces: {exc}') from exc

_TYPECODES = {
    np.dtype(np.int8): 'b', np.dtype(np.int16): 'h', np.dtype(np.uint16): 'H',
    np.dtype(np.int32): 'i', np.dtype(np.uint32): 'I', np.dtype(np.int64): 'q',
    np.dtype(np.uint64): 'Q', np.dtype(np.float32): 'f', np.dtype(np.float64): 'd',
}
"""``array.array`` typecode that rclpy uses for each numeric sequence element type."""

GID_IS_GUID = ('rmw_cyclonedds_cpp', 'rmw_fastrtps_cpp', 'rmw_fastrtps_dynamic_cpp',
               'rmw_connextdds')
"""rmw implementations whose endpoint GID is the DDS GUID (its first 12 bytes: the participant).

Another (rmw_zenoh_cpp hashes an endpoint's key expression into its GID) names no participant:
a robot's reader and writer would never be one participant, and ``participants`` would say no
robot is there. An RclpyBus on one reads no graph (as before: matched endpoints count)."""

GRAPH_CACHE_S = 0.02
"""How long one answer of rclpy's graph serves (a :meth:`RclpyBus.poll` forgets them sooner)."""

NO_TYPE_HASH = ('this ROS 2 (Humble or older) gives no type hash of a graph endpoint: a robot '
                'of another rog_ros build whose message types keep their names is not told '
                'apart (DDS matches it: taken as a robot of this build); one whose type names '
                'differ is')
"""Said once by an RclpyBus that reads the graph of an rclpy without ``topic_type_hash``."""


def _ros_qos(profile) -> QoSProfile:
    return QoSProfile(
        reliability=(ReliabilityPolicy.RELIABLE if profile.reliable
                     else ReliabilityPolicy.BEST_EFFORT),
        history=HistoryPolicy.KEEP_ALL if profile.depth == 0 else HistoryPolicy.KEEP_LAST,
        depth=max(profile.depth, 1),
        durability=DurabilityPolicy.VOLATILE)


def ros_class(msg_type: str):
    """Return the rclpy class of ``'RowChunk'`` (ours) or ``'pkg/Type'`` (standard)."""
    if '/' in msg_type:
        pkg, typ = msg_type.split('/')
        return getattr(importlib.import_module(f'{pkg}.msg'), typ)
    return ROS_CLASSES[msg_type]


_INTEGER_FIELDS = ('int8', 'uint8', 'int16', 'uint16', 'int32', 'uint32', 'int64', 'uint64')


def _ros_field(value, field_type: str):
    """
    Return ``value`` as the setter of a ``field_type`` field wants it.

    ``field_type`` is what ``get_fields_and_field_types()`` of a generated class says
    (``'octet'``, ``'int32'``, ``'string'``, ``'std_msgs/Header'``,
    ``'sequence<diagnostic_msgs/KeyValue>'``): rosidl's setters assert exact Python types, so
    an ``octet`` (``.msg`` ``byte``) takes ``bytes`` of length 1, never an int.
    """
    if field_type.startswith('sequence<'):
        element = field_type[len('sequence<'):-1].split(',')[0].strip()
        return [_ros_field(v, element) for v in value]
    if '/' in field_type:
        return _standard_to_ros(value, ros_class(field_type)) \
            if dataclasses.is_dataclass(value) else value
    if field_type == 'octet':
        return bytes([int(value)]) if isinstance(value, int) else bytes(value)
    if field_type in _INTEGER_FIELDS:
        return int(value)
    if field_type in ('float', 'double'):
        return float(value)
    if field_type == 'boolean':
        return bool(value)
    if field_type.startswith(('string', 'wstring')):
        return str(value)
    return value


def _standard_to_ros(obj, cls=None):
    """Convert a standard message dataclass (DiagnosticArray ...) field by field, as typed."""
    cls = cls or ros_class(getattr(obj, 'TYPE', 'builtin_interfaces/Time'))
    types = cls.get_fields_and_field_types()
    ros = cls()
    for f in dataclasses.fields(obj):
        setattr(ros, f.name, _ros_field(getattr(obj, f.name), types[f.name]))
    return ros


def to_ros(msg):
    """Return the generated rclpy message of a protocol (or standard) dataclass."""
    if '/' in msg.TYPE:
        return _standard_to_ros(msg)
    ros = ROS_CLASSES[msg.TYPE]()
    for dname, mname, kind, dtype in FIELD_PLANS[msg.TYPE]:
        value = getattr(msg, dname)
        if kind == 'bytes':
            value = array.array('B', bytes(value))
        elif kind == 'array':
            dtype = np.dtype(dtype)
            value = array.array(_TYPECODES[dtype], np.ascontiguousarray(value, dtype).tobytes())
        elif kind == 'time':
            from builtin_interfaces.msg import Time as RosTime   # with rclpy, always there
            stamp = messages.as_time(value)
            value = RosTime(sec=int(stamp.sec), nanosec=int(stamp.nanosec))
        else:
            value = {'str': str, 'bool': bool, 'float': float, 'int': int}[kind](value)
        setattr(ros, mname, value)
    return ros


def from_ros(type_name: str, ros):
    """Return the protocol (or standard) dataclass of a generated rclpy message."""
    if '/' in type_name:               # DiagnosticArray ...: converted as a DDS sample is
        return from_sample(ros, type_name)
    values = {}
    for dname, mname, kind, dtype in FIELD_PLANS[type_name]:
        value = getattr(ros, mname)
        if kind == 'bytes':
            value = value.tobytes() if isinstance(value, array.array) else bytes(value)
        elif kind == 'array':
            if isinstance(value, array.array):
                value = np.frombuffer(value, dtype=dtype).copy()
            else:
                value = np.asarray(value, dtype=dtype)
        elif kind == 'time':
            value = messages.Time(int(value.sec), int(value.nanosec))
        values[dname] = value
    return MESSAGE_CLASSES[type_name](**values)


class RclpyBus(Bus):
    """
    The Bus on rclpy (one node of its own, or a node the caller owns).

    Parameters
    ----------
    namespace : str, default '/rog'
        Prefix of relative topic names.
    node : rclpy.node.Node or None, default None
        Node to create publishers/subscriptions on; None creates ``node_name`` (initialising
        rclpy if needed) and destroys it on :meth:`close`.
    node_name : str, default 'rog_bus'
        Name of the node created when ``node`` is None.
    node_namespace : str or None, default None
        Its namespace; None: ``namespace`` (as DdsBus names its node).
    executor : rclpy.executors.Executor or None, default None
        The executor that ``node`` belongs to, which :meth:`poll` spins (the process's one
        executor: rclpy moves a node to every executor it is added to, so a second one would
        take the node away from the first). None creates a private SingleThreadedExecutor
        for the node. The bus neither adds the node to an executor it is given nor removes it
        from it, nor shuts it down.

    """

    def __init__(self, namespace: str = DEFAULT_NAMESPACE, node=None,
                 node_name: str = 'rog_bus', executor=None, node_namespace=None):
        super().__init__(namespace)
        self._own_node = node is None
        if node is None:
            if not rclpy.ok():
                rclpy.init()
            node = rclpy.create_node(node_name, namespace=node_namespace or namespace)
        self._node = node
        self._own_executor = executor is None
        if executor is None:
            executor = SingleThreadedExecutor(context=node.context)
            executor.add_node(node)
        self._executor = executor
        self._publishers = {}
        self._subscriptions = {}
        self._queue = deque()   # (topic, msg, callback) queued by executor callbacks
        self._closed = False
        # another node of this one's name in the graph: said once, looked for while it runs
        self._look_until = time.monotonic() + topics.NAMESAKE_LOOK_S
        self._next_look = 0.0
        self.namesake_said = None
        # rclpy's graph by (writer?, absolute topic): (when asked, _endpoints's list)
        self._graph = {}
        self._other_seen = set()      # (writer?, absolute topic) where another build was seen
        self._graph_off = False       # the graph query failed once: this bus cannot tell
        try:
            rmw = rclpy.get_rmw_implementation_identifier()
        except Exception:  # noqa: B902 - an rclpy without it, or its C extension failing
            rmw = 'an unknown rmw'
        if rmw not in GID_IS_GUID:
            self._graph_off = True
            node.get_logger().info(
                f'{rmw}: its GIDs do not name a DDS participant, so this node counts matched '
                'endpoints (a robot of another rog_ros build, or a tool that only reads a '
                "robot's downlink, is not told apart)")
        # this process's participant (its GUID prefix), learnt from this node's endpoints
        self._own = set()
        self.no_hash_said = None      # NO_TYPE_HASH, once said

    def _publisher(self, ros_topic: str):
        pub = self._publishers.get(ros_topic)
        if pub is None:
            msg_type = topic_type(ros_topic)
            pub = self._node.create_publisher(ros_class(msg_type), ros_topic,
                                              _ros_qos(topic_qos(ros_topic)))
            self._publishers[ros_topic] = pub
        return pub

    def advertise(self, topic: str) -> None:
        self._check_open()
        self._publisher(resolve(topic, self.namespace))

    def publish(self, topic: str, msg) -> None:
        self._check_open()
        ros_topic = resolve(topic, self.namespace)
        if msg.TYPE != topic_type(ros_topic):
            raise ValueError(f'{ros_topic} carries {topic_type(ros_topic)}, not {msg.TYPE}')
        self._look_for_namesakes()          # (a node that only publishes, netmon, polls never)
        try:
            self._publisher(ros_topic).publish(to_ros(msg))
        except Exception as exc:  # noqa: B902 - rclpy raises several unrelated types
            raise BusError(f'publish on {ros_topic} failed: {exc}') from exc

    def subscribe(self, topic: str, callback=None, qos=None) -> None:
        self._check_open()
        ros_topic = resolve(topic, self.namespace)
        if ros_topic in self._subscriptions:
            raise ValueError(f'already subscribed to {ros_topic}')
        msg_type = topic_type(ros_topic)

        def enqueue(ros, _topic=ros_topic, _type=msg_type, _cb=callback):
            try:
                self._queue.append((_topic, from_ros(_type, ros), _cb))
            except Exception:  # noqa: B902 - malformed input must not crash the node
                self.rejects += 1

        self._subscriptions[ros_topic] = self._node.create_subscription(
            ros_class(msg_type), ros_topic, enqueue, _ros_qos(topic_qos(ros_topic, qos)))

    def _look_for_namesakes(self) -> None:
        """
        Warn once if the graph holds another node of this node's name (as DdsBus does).

        Looked at once a second for ``NAMESAKE_LOOK_S`` after the bus starts, then every
        ``NAMESAKE_LATER_S`` for as long as it runs (the node already running warns of a
        namesake started later too), from :meth:`poll` and :meth:`publish` (nothing waits for
        it): ``get_node_names_and_namespaces`` lists this node, and every other of its fully
        qualified name (two robot fleets on one domain and one namespace). The list is rcl's
        graph cache, read without a round trip.
        """
        now = time.monotonic()
        if self._look_until is None or now < self._next_look:
            return
        self._next_look = now + (1.0 if now < self._look_until else topics.NAMESAKE_LATER_S)
        try:
            name = qualified(self._node.get_namespace(), self._node.get_name())
            count = sum(1 for n, ns in self._node.get_node_names_and_namespaces()
                        if qualified(ns, n) == name)
        except Exception:  # noqa: B902 - a graph query that fails only ends the look
            self._look_until = None
            return
        if count > 1:
            self.namesake_said = namesake_line(self._domain_id(), name)
            self._node.get_logger().warning(self.namesake_said)
            self._look_until = None

    def _domain_id(self):
        """Return this node's DDS domain, for a warning (``$ROS_DOMAIN_ID``'s where unread)."""
        try:
            return self._node.context.get_domain_id()
        except Exception:  # noqa: B902 - older rclpy (none), a context shut down (RCLError)
            return os.environ.get('ROS_DOMAIN_ID', 0)

    def poll(self, timeout_s: float = 0.0) -> list:
        self._check_open()
        self._look_for_namesakes()
        self._graph.clear()                 # (the graph answers serve until the next poll)
        deadline = time.monotonic() + max(timeout_s, 0.0)
        self._executor.spin_once(timeout_sec=0.0)
        while not self._queue and self._subscriptions and not self._closed:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._executor.spin_once(timeout_sec=left)
        while not self._closed:  # everything else that is ready, without waiting
            before = len(self._queue)
            self._executor.spin_once(timeout_sec=0.0)
            if len(self._queue) == before:
                break
        if self._closed:   # a callback of the shared executor closed it (lifecycle cleanup)
            self._queue.clear()
            return []
        out = []
        while self._queue:
            topic, msg, callback = self._queue.popleft()
            if callback is None:
                out.append((topic, msg))
            else:
                callback(msg)
        return out

    def matched(self, topic: str) -> int:
        """
        Return the remote endpoints matched on ``topic``, at most those of this build.

        rmw_cyclonedds matches by type name alone (its sertype gives Cyclone no type
        information to check), so a reader of another build whose types keep their names is
        in ``get_subscription_count``; rcl's ``count_publishers`` counts every writer of the
        topic, of any type. Counted, a robot of an older rog_ros was a robot there: the
        server's wait for its downlink readers and its uplink writers (one per robot) ended,
        and a fleet of old robots was never given up at the start (exit 4). Once the graph
        showed an endpoint of another build on that side of the topic (:meth:`_endpoints`),
        the count is at most the graph's endpoints of this build there, this node's own
        writer aside: ``bus.matched_of_this_build``, the rule ``DdsBus`` follows with DDS
        discovery (before, the graph's count capped it whenever the graph could be read, so
        a peer matched before the graph listed it was not counted here, and was by DdsBus).
        """
        self._check_open()
        ros_topic = resolve(topic, self.namespace)
        count = 0
        if ros_topic in self._publishers:
            count += self._of_this_build(
                topic, False, self._publishers[ros_topic].get_subscription_count())
        if ros_topic in self._subscriptions:
            own = ros_topic in self._publishers       # (count_publishers counts it)
            count += self._of_this_build(
                topic, True, max(self._node.count_publishers(ros_topic) - own, 0), own)
        return count

    def _of_this_build(self, topic: str, writer: bool, count: int, own: bool = False) -> int:
        """Return ``count`` matched endpoints on ``writer``'s side, at most this build's."""
        known = self._endpoints(topic, writer)
        others = None if known is None else [other for _, other in known]
        if own and others is not None and '' in others:
            others.remove('')                  # (this node's own writer of the topic)
        return matched_of_this_build(
            count, others, (writer, resolve(topic, self.namespace)) in self._other_seen)

    def participants(self, topic: str, writer: bool):
        """
        Return the GUID prefixes of the remote participants of this build on ``topic``.

        From rclpy's graph (``get_publishers_info_by_topic`` / ``..._subscriptions_...``):
        an endpoint's ``endpoint_gid`` starts with its participant's 12-byte GUID prefix
        (rmw_cyclonedds and rmw_fastrtps copy the DDS GUID into it), written as DdsBus
        writes it (``a1b2c3d4:...``). Endpoints of this process's participant (one a
        context: learnt from the endpoints named as this node) are left out, as DdsBus
        leaves its own out.
        None when rclpy's graph cannot be read.
        """
        known = self._endpoints(topic, writer)
        return None if known is None else {p for p, foreign in known if p and not foreign}

    def foreign_readers(self, topic: str) -> list:
        known = self._endpoints(topic, False)
        return sorted({p for p, foreign in known or () if p and foreign})

    def foreign_writers(self, topic: str) -> list:
        known = self._endpoints(topic, True)
        return sorted({p for p, foreign in known or () if p and foreign})

    def other_builds(self, topic: str, writer: bool) -> list:
        return sorted({other for _, other in self._endpoints(topic, writer) or () if other})

    def _endpoints(self, topic: str, writer: bool):
        """
        Return ``[(GUID prefix, what tells another build)]`` of the endpoints on ``topic``.

        One per endpoint, as rclpy lists them; the prefix is '' for one of this process's
        participant, or without a GID; what tells another build is its type name or hash
        ('' for an endpoint of this build).

        Another build: a ``topic_type`` other than this build's (``rog_ros/msg/RowChunk``), or
        a ``topic_type_hash`` (Iron and newer; version 0 or less: none sent, and a version
        other than 1: not comparable, both taken as they come) other than this build's
        (``typehash.rihs01`` of its ``.msg`` files, which DdsBus compares too). Humble's
        rclpy has no hash: said once (``NO_TYPE_HASH``), and only another type name tells.
        One rclpy answer per side and topic serves until the next :meth:`poll` or
        ``GRAPH_CACHE_S``: each query expands and remaps the name, scans rmw's graph cache
        and builds a TopicEndpointInfo (with its QoSProfile) per endpoint, and the server
        asks for the same topics several times in one step. None when the graph cannot be
        read (no such call, or it failed once: said once).
        """
        self._check_open()
        if self._graph_off:
            return None
        ros_topic = resolve(topic, self.namespace)
        now = time.monotonic()
        cached = self._graph.get((writer, ros_topic))
        if cached is not None and now - cached[0] < GRAPH_CACHE_S:
            return cached[1]
        ask = getattr(self._node, 'get_publishers_info_by_topic' if writer
                      else 'get_subscriptions_info_by_topic', None)
        try:
            infos = list(ask(ros_topic)) if ask is not None else None
            name, namespace = self._node.get_name(), self._node.get_namespace()
        except Exception as exc:  # noqa: B902 - rclpy raises several unrelated types
            self._node.get_logger().warning(
                f'rclpy graph query of {ros_topic} failed ({exc}): this node counts matched '
                'endpoints from now on (robots of another rog_ros build are not told apart)')
            infos = None
        if infos is None:
            self._graph_off = True
            return None
        ours = full_name(topic_type(ros_topic))           # 'rog_ros/RowChunk'
        our_hash = TYPE_HASHES.get(ours)
        ours = '{}/msg/{}'.format(*ours.split('/'))       # as rclpy names it
        self._own |= {_gid_prefix(i.endpoint_gid) for i in infos
                      if (i.node_name, i.node_namespace) == (name, namespace)}
        known = []
        for info in infos:
            prefix = _gid_prefix(info.endpoint_gid)
            prefix = '' if prefix in self._own else prefix
            theirs = self._type_hash(info)
            other = info.topic_type if info.topic_type != ours else (
                theirs if theirs is not None and our_hash is not None and theirs != our_hash
                else '')
            known.append((prefix, other))
        if any(other for _, other in known):
            self._other_seen.add((writer, ros_topic))   # (matched() caps from now on)
        self._graph[(writer, ros_topic)] = (now, known)
        return known

    def _type_hash(self, info):
        """
        Return ``info``'s ``RIHS01_<hex>`` type hash, None if none (said once on Humble).

        None too for a hash of another version (RIHS02 ...): this build computes RIHS01
        only, and a hash it cannot compare says nothing of the peer's ``.msg`` files.
        """
        hashed = getattr(info, 'topic_type_hash', None)
        if hashed is None:
            if self.no_hash_said is None:
                self.no_hash_said = NO_TYPE_HASH
                self._node.get_logger().info(NO_TYPE_HASH)
            return None
        version, value = getattr(hashed, 'version', -1), getattr(hashed, 'value', b'')
        if not isinstance(version, int) or version != 1 or not value:
            return None                  # (none sent, or not comparable: taken as it comes)
        return f'RIHS{version:02d}_{bytes(value).hex()}'

    def _check_open(self):
        if self._closed:
            raise BusError('bus is closed')

    def close(self) -> None:
        """
        Destroy this bus's publishers and subscriptions (and what it created itself).

        Safe from a callback of the executor (a lifecycle ``cleanup`` served while this bus
        polls): nothing here waits for callbacks. An executor the caller passed in stays as it
        is; a private one is shut down with ``timeout_sec=0``, since rclpy's
        ``Executor.shutdown()`` otherwise waits until no callback runs, the calling one too.
        """
        if self._closed:
            return
        self._closed = True
        for pub in self._publishers.values():
            self._node.destroy_publisher(pub)
        for sub in self._subscriptions.values():
            self._node.destroy_subscription(sub)
        self._publishers, self._subscriptions = {}, {}
        if self._own_executor:
            self._executor.remove_node(self._node)
            self._executor.shutdown(timeout_sec=0.0)
        if self._own_node:
            self._node.destroy_node()


def _gid_prefix(gid) -> str:
    """Return the GUID prefix of an rmw GID (its first 12 bytes) as DdsBus writes it, or ''."""
    try:
        return guid_prefix_text(gid)
    except (TypeError, ValueError):
        return ''
