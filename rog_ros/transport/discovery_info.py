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
The ROS 2 graph entry of an embedded participant: its node on DDS topic ``ros_discovery_info``.

Why: ``ros2 node list``, ``ros2 node info`` and the node column of ``ros2 topic info -v`` are
not built from DDS discovery but from ``ros_discovery_info``, where every ROS 2 participant
(rmw_cyclonedds, rmw_fastrtps) publishes one ``rmw_dds_common/msg/ParticipantEntitiesInfo``:
its GID and, per node, the node's name, namespace and the GIDs of its readers and writers.
The embedded nodes published none, so a ROS 2 machine saw their topics but no node of theirs.
Here a :class:`~rog_ros.transport.dds_bus.DdsBus` publishes the same entry, as rmw_cyclonedds
does: reliable, transient-local, keep-last 1 (a late ``ros2`` daemon gets it), no autodispose,
the participant's GID and one node, republished whenever the bus creates a reader or writer.
A GID is the entity's 16-byte DDS GUID, as ``convert_guid_to_gid`` of rmw_cyclonedds copies
it.

The distributions disagree on ``Gid``: ``char[24] data`` up to Humble (the GUID, then 8 zero
bytes), ``char[16] data`` from Iron on (rmw_dds_common 2.0), under the same DDS type name, so
each side misreads the other's samples. ``$ROS_DISTRO`` picks the layout (foxy, galactic and
humble: 24 bytes); unset or any other, 16 bytes, the Iron-and-newer layout whose RIHS01 type
hashes (:mod:`rog_ros.transport.typehash`) the embedded transport sends already. A Humble
machine watching embedded nodes that run without ROS 2 needs ``ROS_DISTRO=humble`` in their
environment. ``ROG_DISCOVERY_INFO=0`` turns the entry off.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import time

from cyclonedds.core import DDSException
from cyclonedds.pub import DataWriter
from cyclonedds.qos import Policy, Qos
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from rog_ros.transport import raw_take
from rog_ros.transport.graph_entry import parse_entry
from rog_ros.transport.idl import build_types
from rog_ros.transport.msgdef import parse_msg
from rog_ros.transport.topics import namesake_line, qualified
from rog_ros.transport.typehash import rihs01

TOPIC = 'ros_discovery_info'
"""The DDS topic (no ``rt/`` prefix: rmw creates it avoiding the ROS namespace conventions)."""
ENV = 'ROG_DISCOVERY_INFO'
"""``0`` (or ``off``, ``false``, ``no``) here: publish no graph entry."""
LEGACY_DISTROS = ('foxy', 'galactic', 'humble')
"""``$ROS_DISTRO`` values whose ``rmw_dds_common/Gid`` holds 24 bytes (16 for the others)."""
MESSAGES = {
    'rmw_dds_common/Gid': 'char[{gid_size}] data\n',
    'rmw_dds_common/NodeEntitiesInfo': ('string<=256 node_namespace\n'
                                        'string<=256 node_name\n'
                                        'Gid[] reader_gid_seq\n'
                                        'Gid[] writer_gid_seq\n'),
    'rmw_dds_common/ParticipantEntitiesInfo': ('Gid gid\n'
                                               'NodeEntitiesInfo[] node_entities_info_seq\n'),
}
"""The ``.msg`` files of ros2/rmw_dds_common (branches humble, iron, jazzy, rolling)."""
PARTICIPANT_INFO = 'rmw_dds_common/ParticipantEntitiesInfo'
_NODE_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]{0,255}')
_NAMESPACE = re.compile(r'/|(/[A-Za-z_][A-Za-z0-9_]*)+')
LOG = logging.getLogger('rog_ros.dds')


def enabled(env=None) -> bool:
    """Say whether to publish the graph entry (``$ROG_DISCOVERY_INFO`` not 0/off/false/no)."""
    value = (os.environ if env is None else env).get(ENV, '').strip().lower()
    return value not in ('0', 'off', 'false', 'no')


def gid_size(env=None) -> int:
    """Return the bytes of a ``Gid`` for ``$ROS_DISTRO``: 24 up to Humble, else 16."""
    distro = (os.environ if env is None else env).get('ROS_DISTRO', '').strip().lower()
    return 24 if distro in LEGACY_DISTROS else 16


@functools.lru_cache(maxsize=None)
def message_types(size: int) -> tuple:
    """Return ``(ParticipantEntitiesInfo, NodeEntitiesInfo, Gid classes, RIHS01 hash)``."""
    defs = {name: parse_msg(text.format(gid_size=size), name)
            for name, text in MESSAGES.items()}
    types = build_types(defs)
    return (types[PARTICIPANT_INFO], types['rmw_dds_common/NodeEntitiesInfo'],
            types['rmw_dds_common/Gid'], rihs01(PARTICIPANT_INFO, defs))


def writer_qos(type_hash: str) -> Qos:
    """Return the QoS rmw_cyclonedds gives its ``ros_discovery_info`` writer."""
    return Qos(Policy.Reliability.Reliable(max_blocking_time=duration(seconds=1)),
               Policy.History.KeepLast(1), Policy.Durability.TransientLocal,
               Policy.DurabilityService(cleanup_delay=0, history=Policy.History.KeepLast(1),
                                        max_samples=-1, max_instances=-1,
                                        max_samples_per_instance=-1),
               Policy.DataRepresentation(use_cdrv0_representation=True),
               Policy.WriterDataLifecycle(autodispose=False),
               Policy.Userdata(data=f'typehash={type_hash};'.encode('ascii')))


def reader_qos() -> Qos:
    """
    Return the QoS of a ``ros_discovery_info`` reader: every participant's entry, late too.

    It accepts XCDR1 and XCDR2: DDS matches a writer whose first offered representation the
    reader lists, and with XCDR1 alone a writer offering XCDR2 only (an XTypes rmw) went
    unmatched, its node unseen, though :func:`~rog_ros.transport.graph_entry.parse_entry`
    reads both. XCDR1 writers (rmw_cyclonedds, rmw_fastrtps of Humble, this package's) match
    as before; what this package writes stays XCDR1 (:func:`writer_qos`).
    """
    return Qos(Policy.Reliability.Reliable(duration(seconds=1)), Policy.History.KeepAll,
               Policy.Durability.TransientLocal,
               Policy.DataRepresentation(use_cdrv0_representation=True,
                                         use_xcdrv2_representation=True))


def open_reader(participant, size: int, topic=None) -> DataReader:
    """
    Return a reader of the ``size``-byte layout's entries (``rog doctor``, :class:`Namesakes`).

    ``topic``: the participant's ``ros_discovery_info`` Topic where it has one (a participant
    has one type per topic name); None makes it.
    """
    if topic is None:
        topic = Topic(participant, TOPIC, message_types(size)[0])
    return DataReader(participant, topic, qos=reader_qos())


class DiscoveryInfo:
    """
    The ``ros_discovery_info`` writer of one participant that holds one ROS 2 node.

    Parameters
    ----------
    participant : cyclonedds.domain.DomainParticipant
        The bus's participant; its GUID is the participant GID.
    node_name : str
        The node's ROS 2 name (``rog_server``, ``rog_worker_0``, ``netmon_1``).
    node_namespace : str, default '/'
        The node's ROS 2 namespace (the nodes' is their fleet namespace, or ``-r __ns:=``'s:
        :mod:`rog_ros.nodes.ros_names`).
    size : int or None, default None
        Bytes of a GID; None follows ``$ROS_DISTRO`` (:func:`gid_size`).

    """

    def __init__(self, participant, node_name: str, node_namespace: str = '/',
                 size=None):
        self.size = gid_size() if size is None else int(size)
        self._types = message_types(self.size)
        self.node_name, self.node_namespace = node_name, node_namespace
        self.gid = self._gid(participant)
        self._readers, self._writers = [], []
        self._failed = False
        self._topic = Topic(participant, TOPIC, self._types[0])
        self._writer = DataWriter(participant, self._topic, qos=writer_qos(self._types[3]))
        self.publish()

    def _gid(self, entity) -> bytes:
        """Return the GID of a DDS entity: its GUID, zero-padded to ``size`` bytes."""
        return entity.guid.bytes.ljust(self.size, b'\0')

    def add(self, entity, writer: bool) -> None:
        """Add a reader or ``writer`` of the node, and publish the entry again."""
        (self._writers if writer else self._readers).append(self._gid(entity))
        self.publish()

    def sample(self):
        """Return the ``ParticipantEntitiesInfo`` sample of the entry as it stands."""
        info, node, gid = self._types[:3]
        return info(gid=gid(data=list(self.gid)), node_entities_info_seq=[node(
            node_namespace=self.node_namespace, node_name=self.node_name,
            reader_gid_seq=[gid(data=list(g)) for g in self._readers],
            writer_gid_seq=[gid(data=list(g)) for g in self._writers])])

    def publish(self) -> None:
        """Write the entry; a failure is said once (tools lose the node, the node goes on)."""
        try:
            self._writer.write(self.sample())
        except DDSException as exc:
            if not self._failed:
                self._failed = True
                LOG.warning(f'cannot publish this node on {TOPIC} ({exc}): ros2 node list '
                            'may not show it; its topics work as before')

    def entities(self) -> list:
        """Return the DDS entities to delete, children first."""
        return [self._writer, self._topic]


def open_info(participant, node_name, node_namespace: str = '/'):
    """
    Return the :class:`DiscoveryInfo` of ``participant``, or None where there is none to be.

    None when ``$ROG_DISCOVERY_INFO`` turns it off or ``node_name`` is None; a name ROS 2
    would refuse, or a writer DDS refuses, is said in one line and the bus goes on without.
    """
    if node_name is None or not enabled():
        return None
    if not _NODE_NAME.fullmatch(node_name) or not _NAMESPACE.fullmatch(node_namespace):
        LOG.warning(f'node name {node_name!r} in {node_namespace!r} is not a valid ROS 2 node '
                    'name (letters, digits and _, not starting with a digit): this node is '
                    f'not published on {TOPIC}, so ros2 node list does not show it')
        return None
    try:
        return DiscoveryInfo(participant, node_name, node_namespace)
    except DDSException as exc:
        LOG.warning(f'cannot create the {TOPIC} writer ({exc}): ros2 node list does not show '
                    'this node; its topics work as before')
        return None


LOOK_S = None
"""
How long a bus looks for another node of its name (seconds; None: for as long as it runs).

The look is one take a second, from the bus's peer check, of a reader that gets a sample only
when a participant's entry changes (it starts, or creates an endpoint): about 10 us when
nothing came. Looking for the bus's whole life, the node already running also warns of a
namesake started later, not that one alone.
"""


class Namesakes:
    """
    Look at the graph while a bus runs: warn once if its node's name is taken.

    Two robot fleets started on one DDS domain and one namespace have nodes of one fully
    qualified name (``/rog/rog_worker_0`` twice): ROS 2 tools mix them up and their traffic
    mixes, and only ``rog doctor`` said so. The bus reads the ``ros_discovery_info`` entries
    (what ``rog doctor``'s ros graph check reads) for :data:`LOOK_S` (its whole life), from
    its once-a-second peer check (:meth:`look`): nothing waits for it, and the reader is
    deleted once the warning is given. Each sample is read from its bytes in either GID
    layout (:func:`rog_ros.transport.graph_entry.parse_entry`): a writer of the other one
    that DDS matches (rmw_cyclonedds up to Humble sends no type information) was misread, or
    ended the look, and its node went unseen; one that DDS does not match (two builds that
    both send type information) is seen by ``rog doctor`` alone.

    Parameters
    ----------
    info : DiscoveryInfo
        The bus's own entry (its node's name, its participant's GID and topic).
    domain_id : int
        The DDS domain, for the warning.

    """

    def __init__(self, info: DiscoveryInfo, participant, domain_id: int, look_s=None):
        self.name = qualified(info.node_namespace, info.node_name)
        self.domain_id = domain_id
        self.said = None                  # the warning, once given
        self._own = bytes(info.gid[:16])
        look_s = LOOK_S if look_s is None else look_s
        self._until = None if look_s is None else time.monotonic() + look_s
        self._reader = open_reader(participant, info.size, info._topic)
        self._take = lambda: raw_take.take_serialised(self._reader._ref)

    def look(self, now=None) -> bool:
        """
        Take the entries that came; warn once for another node of this name. True: go on.

        A failing take ends the look (False), never the node: one that raises, or answers a
        DDS return code (an int) instead of samples.
        """
        try:
            samples = self._take()
        except Exception:  # noqa: B902 - the binding's take raises more than DDSException
            return False
        if isinstance(samples, int):
            return False
        for data, sample_info in samples:
            parsed = parse_entry(bytes(data)) if sample_info.valid_data else None
            if parsed is None:            # (an unregistered writer's, a layout of neither)
                continue
            _, gid, nodes = parsed
            if gid != self._own and self.name in {qualified(ns, n) for ns, n in nodes}:
                self.said = namesake_line(self.domain_id, self.name)
                LOG.warning(self.said)
                return False
        return self._until is None or (time.monotonic() if now is None else now) < self._until

    def close(self) -> None:
        """Delete the reader (idempotent)."""
        reader, self._reader = self._reader, None
        if reader is not None:
            with contextlib.suppress(DDSException):
                reader.__del__()


def open_namesakes(info, participant, domain_id: int):
    """Return the :class:`Namesakes` look of a bus's entry ``info`` (None: none, no reader)."""
    if info is None:
        return None
    try:
        return Namesakes(info, participant, domain_id)
    except DDSException as exc:
        LOG.debug(f'no look for another node of this name ({exc})')
        return None
