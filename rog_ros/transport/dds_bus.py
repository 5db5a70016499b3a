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
DdsBus: the Bus on Cyclone DDS through its Python binding, wire-compatible with ROS 2.

Topic ``/rog/chunks`` is DDS topic ``rt/rog/chunks`` with type ``rog_ros::msg::dds_::RowChunk_``
(XCDR1), and readers/writers carry ``typehash=RIHS01_...;`` in USER_DATA as ``rmw_cyclonedds``
does on Iron and newer, so ``ros2 topic echo /rog/chunks`` and rosbag2 see ordinary ROS 2
traffic. One DDS participant per bus; one writer per published topic and one reader per
subscribed topic, created on first use; the bus's node, with those readers and writers, is
published on ``ros_discovery_info`` (:mod:`rog_ros.transport.discovery_info`), so
``ros2 node list`` shows it. See :mod:`rog_ros.transport.bus` for the threading contract.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import re
import time

from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication, \
    BuiltinTopicDcpsSubscription
from cyclonedds.core import DDSException, InstanceState, ReadCondition, SampleState, \
    ViewState, WaitSet
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.qos import Policy, Qos
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from rog_ros.transport import idl
from rog_ros.transport.bus import Bus, BusError, guid_prefix_text, matched_of_this_build
from rog_ros.transport.convert import decode, DecodeError, from_sample, to_sample
from rog_ros.transport.cyclone_config import discovery_config, domain_id_from_env, \
    file_uri, peer_resolves
from rog_ros.transport.cyclone_settings import taken_index
from rog_ros.transport.discovery_info import open_info, open_namesakes
from rog_ros.transport.raw_take import ddspy_take, TAKE_BATCH as _TAKE_BATCH, \
    take_serialised as _raw_take
from rog_ros.transport.topics import dds_topic_name, DEFAULT_NAMESPACE, resolve, topic_qos, \
    topic_type


_DOMAINS = {}
"""Domain id -> (config, Domain or handle): a configured domain lives as long as the process."""
LOG = logging.getLogger('rog_ros.dds')
_LOGGED = set()
"""Warnings about the discovery variables already logged by this process (once each)."""

# How often to ask again when a peer matches between the binding's count and its copy.
_MATCH_RETRIES = 8
_RETCODE_TIMEOUT = -10
"""``DDS_RETCODE_TIMEOUT``: a reliable write waited ``max_blocking_time`` for acknowledgements."""
_HELD_WARN_S = 2.0
"""A publish held this long by unacknowledged data is logged (seconds)."""
_HELD_REPEAT_S = 60.0
"""After a held publish was logged, the next on its topic is logged this much later at most
(seconds), with the count held in between: over a slow link every write may wait seconds."""
_QOS_CHECK_S = 1.0
"""How often poll() looks for peers whose QoS cannot match (seconds)."""
_RIHS01 = re.compile('RIHS01_[0-9a-f]{64}')
"""A USER_DATA ``typehash=`` that can be compared with this build's (``typehash.rihs01``)."""
_POLICIES = {1: 'USER_DATA', 2: 'DURABILITY', 3: 'PRESENTATION', 4: 'DEADLINE',
             5: 'LATENCY_BUDGET', 6: 'OWNERSHIP', 8: 'LIVELINESS', 10: 'PARTITION',
             11: 'RELIABILITY', 12: 'DESTINATION_ORDER', 13: 'HISTORY', 21: 'LIFESPAN',
             24: 'TYPE_CONSISTENCY', 25: 'DATA_REPRESENTATION'}
"""The names of DDS QoS policy ids (``dds_qos_policy_id_t``), as rclpy's warnings give them."""


WRITER_WATERMARKS = ('<CycloneDDS><Domain Id="any"><Internal><Watermarks>'
                     '<WhcHighInit>8MB</WhcHighInit><WhcHigh>8MB</WhcHigh>'
                     '<WhcAdaptive>false</WhcAdaptive></Watermarks></Internal></Domain>'
                     '</CycloneDDS>')
"""
Cyclone's writer-history high watermark, first in every domain's configuration (the user's wins).

A reliable writer blocks in write() while its unacknowledged data is past the mark: with
Cyclone's defaults (30 kB when a writer starts, adapting up to 500 kB) a robot whose link died
while a downlink transfer to it was on its way held the server's one loop, and so every robot,
at its next write to that robot for ``publish_timeout_s`` (measured: 10 s, with ``rog fleet
--netns``; docs/faults.md), the straggler wait outage-aware RSP exists to end. The engines
bound what a robot is sent past its last acknowledgement, whatever the model's size: at most
``transfer.MAX_WINDOW_BYTES`` (4 MiB) per transfer (a silent robot's transfer stops there and
sends its END a lease later, ``transfer.BOUND_END_S``), which bounds a live one's windows
too, and ``transfer.PEER_MAX_WIRE_BYTES`` on the wire (64 KiB under the mark, ``MB`` being
2**20 bytes to Cyclone) for all transfers to one robot together (``transfer.PeerLink``).
"""

SPDP_INTERVAL = ('<CycloneDDS><Domain Id="any"><Discovery><SPDPInterval>2s</SPDPInterval>'
                 '</Discovery></Domain></CycloneDDS>')
"""
A participant announcement (SPDP) every 2 s, first in every configuration (the user's wins).

A robot silent for longer than its participant lease (10 s: a Wi-Fi outage, a frozen process)
is dropped by its peers and heard again only when an announcement of one side reaches the
other, sent every 8 s with Cyclone's default interval (80% of the lease). Cyclone 11 sends the
periodic one only to multicast and to peers it knows, and pings the address of a peer it
dropped at its lease every 30 s: a robot back after 21 s of SIGSTOP waited 19 s on loopback
(3 times in 5; 0.06 s when its own announcement went out before it dropped its peers); with
2 s, 2 s at most (docs/faults.md, "A robot back after its lease"). The shipped configurations
(``config/*.xml``), which ROS 2 nodes read through ``$CYCLONEDDS_URI``, set it too and win:
``loopback`` 2 s, ``wifi`` 4 s, where every announcement costs airtime (with Cyclone 0.10,
32 unicasts to each peer host given without a port; the server is listed at its node's port,
one: 32 robots spend 7.2% of the air every 4 s, 14.5% every 2 s, before 32% and 64%).
"""

LOCATOR_PRUNE = ('<CycloneDDS><Domain Id="any"><Discovery>'
                 '<InitialLocatorPruneDelay>inf</InitialLocatorPruneDelay>'
                 '<DiscoveredLocatorPruneDelay>inf</DiscoveredLocatorPruneDelay>'
                 '</Discovery></Domain></CycloneDDS>')
"""
Keep pinging configured peers and peers dropped at their lease, on Cyclone 11 only.

Cyclone 11 pings a configured peer (``server_host``, ``Peers``) where no participant answered
only for ``InitialLocatorPruneDelay`` (30 s): without multicast (an access point that drops
it), a robot listing only the server never met a server started 40 s after it (nothing
either way in 25 s; 5 s after it: 3.2 s; Cyclone 0.10.5, which keeps its configured peers for
good: 0.27 s, docs/faults.md). With ``inf`` it pings them every interval as 0.10 does (the
same 40 s: 4.2 s and 0.2 s).

Cyclone 11 without multicast (``loopback``, or ``wifi`` with unicast peers) pings the address
of a participant it dropped at its lease for ``DiscoveredLocatorPruneDelay`` (60 s) and then
forgets it: two participants silent to each other for more than the lease and 60 s never met
again (an 80 s link outage: nothing either way in the 60 s after; with ``inf``, 0.07 s).
Cyclone 0.10 keeps its configured peers for good and refuses a configuration that names the
elements, so they go only where the binding is 11 (:data:`idl.LEGACY_BINDING` false), and the
shipped files cannot carry them.
"""


def _configure_domain(domain_id: int, config=None):
    """
    Configure domain ``domain_id`` as rmw_cyclonedds does: ROS 2's discovery fragment, ``config``.

    ``config`` (XML text, ``file://`` URI or a path) stands where rmw_cyclonedds reads
    ``$CYCLONEDDS_URI`` and creates the domain here (it lives as long as the process, as
    before). With None, Cyclone creates the domain from ``$CYCLONEDDS_URI`` with the first
    participant and frees it with the last, as before: the value returned
    (:data:`WRITER_WATERMARKS`, :data:`SPDP_INTERVAL`, :data:`LOCATOR_PRUNE` on Cyclone 11 and
    the discovery fragment before the variable's value) is what that participant must be
    created under (``_uri_for_creation``). A domain created here once was kept for ever:
    buses opened and closed in turn leaked 8 descriptors and 5 threads each, and a later
    ``config`` on the same domain was refused. What is wrong with the variables is logged
    once per process.
    """
    if config is not None and os.path.exists(config):
        config = file_uri(config)
    known = _DOMAINS.get(domain_id)
    if known is not None and config is None:
        return None
    notes = []
    full = discovery_config(config, warn=notes.append, resolves=peer_resolves,
                            unicast_loopback=_unicast_loopback(),
                            pin_loopback=not idl.LEGACY_BINDING)
    ours = (WRITER_WATERMARKS, SPDP_INTERVAL) + (() if idl.LEGACY_BINDING else (LOCATOR_PRUNE,))
    full = ','.join(part for part in ours + (full,) if part)
    for note in notes:
        if note not in _LOGGED:
            _LOGGED.add(note)
            LOG.warning(note)
    if config is None:
        return None if full == os.environ.get('CYCLONEDDS_URI', '') else full
    if known is not None:
        if known[0] != full:
            raise BusError(f'domain {domain_id} already configured differently in this process')
        return None
    try:
        _DOMAINS[domain_id] = (full, _create_domain(domain_id, full))
    except DDSException as exc:
        reason = taken_index(full, domain_id)
        if reason:
            raise BusError(reason) from exc
        raise BusError(f'cannot configure DDS domain {domain_id} (a participant created '
                       f'before with another configuration?): {exc}') from exc
    return None


@contextlib.contextmanager
def _uri_for_creation(uri):
    """
    Set ``$CYCLONEDDS_URI`` to ``uri`` for the ``with`` block, then restore it (None: as is).

    Cyclone reads the variable when a participant's domain does not exist yet; the process's
    own value (what its children inherit) stays the user's.
    """
    if uri is None:
        yield
        return
    before = os.environ.get('CYCLONEDDS_URI')
    os.environ['CYCLONEDDS_URI'] = uri
    try:
        yield
    finally:
        if before is None:
            os.environ.pop('CYCLONEDDS_URI', None)
        else:
            os.environ['CYCLONEDDS_URI'] = before


def _unicast_loopback() -> bool:
    """
    Say whether this Cyclone must be told that the loopback interface has no multicast.

    rmw_cyclonedds pins 127.0.0.1 for Humble's ROS_LOCALHOST_ONLY=1 and leaves the rest to
    its Cyclone 0.10, which finds Linux's ``lo`` without multicast and discovers by unicast;
    the Cyclone of bindings 0.11 and newer presumes multicast works on a loopback interface,
    so it has to be told when ``lo`` lacks the flag (IFF_MULTICAST), or unreadably so.
    """
    if idl.LEGACY_BINDING:
        return False                 # the binding's own Cyclone 0.10 decides as rmw's does
    try:
        with open('/sys/class/net/lo/flags') as flags:
            return not int(flags.read(), 16) & 0x1000
    except (OSError, ValueError):
        return True


def _create_domain(domain_id: int, config: str):
    """
    Create a Cyclone domain with ``config``; return what keeps it (a Domain or its handle).

    The binding hands a configuration to Cyclone as ASCII only, so one naming a file in a
    folder with an accent (``rv é/cyclonedds_loopback.xml``) raised UnicodeEncodeError; such a
    configuration goes to ``dds_create_domain`` as UTF-8, the bytes Cyclone opens the file by.
    """
    try:
        config.encode('ascii')
    except UnicodeEncodeError:
        pass
    else:
        return Domain(domain_id, config)
    from cyclonedds.internal import DDS, dds_c_t
    call = DDS._dll_handle.dds_create_domain
    call.argtypes = [dds_c_t.domainid, ctypes.c_char_p]
    call.restype = dds_c_t.entity
    handle = call(domain_id, config.encode('utf-8'))
    if handle < 0:
        raise DDSException(handle, f'Occurred upon creating domain {domain_id}')
    return handle


def _qos(profile, msg_type: str, block_s: float = 10.0, writer: bool = False) -> Qos:
    """
    Return the DDS QoS equal to the ROS 2 profile, with the ROS 2 type hash USER_DATA.

    ``IgnoreLocal.Participant``: a bus never receives what it published itself. A ``writer``'s
    has ``WriterDataLifecycle(autodispose=False)``, as rmw_cyclonedds sets it: a writer that
    closes leaves its readers NOT_ALIVE_NO_WRITERS, not NOT_ALIVE_DISPOSED.
    """
    if profile.reliable:
        reliability = Policy.Reliability.Reliable(max_blocking_time=duration(seconds=block_s))
    else:
        reliability = Policy.Reliability.BestEffort
    history = Policy.History.KeepAll if profile.depth == 0 else \
        Policy.History.KeepLast(profile.depth)
    policies = [reliability, history, Policy.Durability.Volatile,
                Policy.DataRepresentation(use_cdrv0_representation=True),
                Policy.IgnoreLocal.Participant, Policy.Userdata(data=idl.user_data(msg_type))]
    if writer:
        policies.append(Policy.WriterDataLifecycle(autodispose=False))
    return Qos(*policies)


class DdsBus(Bus):
    """
    The Bus on Cyclone DDS (the embedded default: no ROS install, no broker, no root).

    Parameters
    ----------
    namespace : str, default '/rog'
        Prefix of relative topic names.
    domain_id : int or None, default None
        DDS domain; None takes ``$ROS_DOMAIN_ID`` (0 when unset) like ROS 2 does.
    config : str or None, default None
        Cyclone configuration for the domain (XML, ``file://`` URI or path); None uses
        ``$CYCLONEDDS_URI`` or Cyclone's defaults. A process can configure a domain only
        before its first participant in that domain exists, and only once.
    publish_timeout_s : float, default 10.0
        How long one try of a reliable publish may block on unacknowledged data.
    publish_give_up_s : float, default 120.0
        How long a reliable publish keeps trying before :class:`BusError`: a reader that
        stopped acknowledging (a suspended or vanished ``ros2 topic echo``) holds every write
        until DDS drops it at the end of its participant's lease, which that participant
        chooses (Cyclone's default 10 s, longer on many Wi-Fi set-ups).
    node_name : str or None, default 'rog_bus'
        The ROS 2 node this bus is: published on ``ros_discovery_info`` with the bus's readers
        and writers, so ``ros2 node list`` shows it
        (:mod:`rog_ros.transport.discovery_info`); None publishes no node.
    node_namespace : str or None, default None
        The node's ROS 2 namespace; None: the bus's ``namespace`` (``/rog``), so that the
        nodes of two fleets on one domain have different names (``rog_ros.nodes.ros_names``).

    """

    def __init__(self, namespace: str = DEFAULT_NAMESPACE, domain_id=None, config=None,
                 publish_timeout_s: float = 10.0, publish_give_up_s: float = 120.0,
                 node_name='rog_bus', node_namespace=None):
        super().__init__(namespace)
        self.domain_id = domain_id_from_env() if domain_id is None else int(domain_id)
        uri = _configure_domain(self.domain_id, config)   # with ROS 2's discovery settings
        self._publish_timeout_s = publish_timeout_s
        self._publish_give_up_s = publish_give_up_s
        qos = Qos(Policy.Userdata(data=b'enclave=/;'))  # as rmw_cyclonedds (Iron+) does
        with _uri_for_creation(uri):
            try:
                self._participant = DomainParticipant(self.domain_id, qos=qos)
            except DDSException as exc:
                reason = taken_index(os.environ.get('CYCLONEDDS_URI', ''), self.domain_id)
                if reason:
                    raise BusError(reason) from exc
                raise
        self._waitset = WaitSet(self._participant)
        self._discovery = _discovery_readers(self._participant)
        self._graph = open_info(self._participant, node_name,   # None: no ROS 2 node entry
                                self.namespace if node_namespace is None else node_namespace)
        # (another node of this name on the domain: said once, from the peer check)
        self._namesakes = open_namesakes(self._graph, self._participant, self.domain_id)
        self._foreign_types = {}  # absolute ROS topic -> {(side, type hash)} of other builds
        # remote endpoints seen by discovery, by (side, absolute ROS topic): {endpoint key:
        # (participant GUID prefix, their type hash when it is another build's, else None)}
        self._endpoints = {}
        self._endpoint_topic = {}   # (side, endpoint key) -> the topic it is filed under
        self._own_prefix = _guid_prefix(getattr(self._participant, 'guid', None))
        self._types_warned = set()
        self._topics = {}     # DDS topic name -> Topic
        self._writers = {}    # absolute ROS topic -> DataWriter
        self._readers = {}    # absolute ROS topic -> (DataReader, ReadCondition, callback)
        self._reader_qos = {}  # absolute ROS topic -> the QoS profile its reader was given
        self._incompatible = {}   # (absolute ROS topic, is writer) -> peers refused so far
        self._qos_warned = set()  # (absolute ROS topic, is writer, policy) already logged
        self._next_qos_check = 0.0
        self._held = {}     # absolute ROS topic -> (when a held publish was last logged, since)
        self._closed = False

    def _topic(self, ros_topic: str) -> Topic:
        name = dds_topic_name(ros_topic)
        if name not in self._topics:
            self._topics[name] = Topic(self._participant, name,
                                       idl.dds_type(topic_type(ros_topic)))
        return self._topics[name]

    def _check_open(self):
        if self._closed:
            raise BusError('bus is closed')

    def _writer(self, ros_topic: str) -> DataWriter:
        writer = self._writers.get(ros_topic)
        if writer is None:
            qos = _qos(topic_qos(ros_topic), topic_type(ros_topic), self._publish_timeout_s,
                       writer=True)
            writer = DataWriter(self._participant, self._topic(ros_topic), qos=qos)
            self._writers[ros_topic] = writer
            if self._graph is not None:
                self._graph.add(writer, writer=True)
        return writer

    def advertise(self, topic: str) -> None:
        self._check_open()
        self._writer(resolve(topic, self.namespace))

    def publish(self, topic: str, msg) -> None:
        self._check_open()
        ros_topic = resolve(topic, self.namespace)
        msg_type = topic_type(ros_topic)
        if msg.TYPE != msg_type:
            raise ValueError(f'{ros_topic} carries {msg_type}, not {msg.TYPE}')
        writer = self._writer(ros_topic)
        self._check_peers_now_and_then()   # a node that only publishes (netmon) polls never
        sample, start = to_sample(msg), time.monotonic()
        while True:
            try:
                writer.write(sample)
                break
            except DDSException as exc:
                held = time.monotonic() - start
                if getattr(exc, 'code', None) != _RETCODE_TIMEOUT:
                    raise BusError(f'publish on {ros_topic} failed: {exc}') from exc
                if held >= self._publish_give_up_s:
                    raise BusError(f'{_held_hint(ros_topic, held)}; gave up') from exc
                LOG.warning(f'{_held_hint(ros_topic, held)}; still trying')
        held = time.monotonic() - start
        if held >= _HELD_WARN_S:
            self._say_held(ros_topic, held)

    def _say_held(self, ros_topic: str, held: float) -> None:
        """Log a publish on ``ros_topic`` held ``held`` s, once per ``_HELD_REPEAT_S`` at most."""
        now = time.monotonic()
        said_at, since = self._held.get(ros_topic, (None, 0))
        if said_at is not None and now - said_at < _HELD_REPEAT_S:
            self._held[ros_topic] = (said_at, since + 1)
            return
        more = f' ({since} more held since it was last said)' if since else ''
        LOG.warning(_held_hint(ros_topic, held) + more)
        self._held[ros_topic] = (now, 0)

    def subscribe(self, topic: str, callback=None, qos=None) -> None:
        self._check_open()
        ros_topic = resolve(topic, self.namespace)
        if ros_topic in self._readers:
            raise ValueError(f'already subscribed to {ros_topic}')
        profile = topic_qos(ros_topic, qos)
        reader = DataReader(self._participant, self._topic(ros_topic),
                            qos=_qos(profile, topic_type(ros_topic)))
        condition = ReadCondition(reader, SampleState.Any | ViewState.Any | InstanceState.Any)
        self._waitset.attach(condition)
        self._readers[ros_topic] = (reader, condition, callback)
        self._reader_qos[ros_topic] = profile
        if self._graph is not None:
            self._graph.add(reader, writer=False)

    def _take(self, reader) -> list:
        """Take everything ``reader`` holds, as messages; undecodable ones are counted."""
        if ddspy_take is None:  # pragma: no cover - other binding versions
            samples = []
            for sample in reader.take(N=_TAKE_BATCH):
                try:
                    samples.append(from_sample(sample))
                except Exception:  # noqa: B902 - malformed input must not crash the node
                    self.rejects += 1
            return samples
        data_type = reader.topic.data_type
        samples = []
        while True:
            raw = _raw_take(reader._ref)
            if isinstance(raw, int):
                raise BusError(f'take failed with DDS return code {raw}')
            for data, info in raw:
                if not info.valid_data:
                    continue
                try:
                    samples.append(decode(data_type, data))
                except DecodeError:
                    self.rejects += 1
            if len(raw) < _TAKE_BATCH:
                return samples

    def _drain(self) -> tuple:
        """Take from every reader; return (messages for poll's caller, number delivered)."""
        out, delivered = [], 0
        for ros_topic, (reader, _, callback) in list(self._readers.items()):
            for msg in self._take(reader):
                delivered += 1
                if callback is None:
                    out.append((ros_topic, msg))
                else:
                    callback(msg)
        return out, delivered

    def poll(self, timeout_s: float = 0.0) -> list:
        self._check_open()
        self._check_peers_now_and_then()
        out, delivered = self._drain()
        if delivered or timeout_s <= 0 or not self._readers:
            return out
        self._waitset.wait(duration(seconds=timeout_s))
        return self._drain()[0]

    def matched(self, topic: str) -> int:
        """
        Return the remote endpoints matched on ``topic``, at most those of this build.

        A peer that gives Cyclone no type information (a ROS 2 node on rmw_cyclonedds, whose
        sertype has none, or the 0.10 binding) is matched by type name alone, so an endpoint
        of another build whose types keep their names was counted: a robot of an older
        ROS 2 rog_ros passed for one of this build at the server's start, and a server of
        another build for the server at a robot's. Once discovery saw an endpoint of another
        build on the topic (its USER_DATA ``typehash=``), the count is at most the remote
        endpoints of this build there (:meth:`_of_this_build`).
        """
        self._check_open()
        ros_topic = resolve(topic, self.namespace)
        self._take_discovery()
        self._check_qos(ros_topic)
        count = 0
        if ros_topic in self._writers:
            count += self._of_this_build('reader', ros_topic,
                                         _matched_peers(self._writers[ros_topic], writer=True))
        if ros_topic in self._readers:
            count += self._of_this_build('writer', ros_topic, _matched_peers(
                self._readers[ros_topic][0], writer=False))
        return count

    def _of_this_build(self, side: str, ros_topic: str, count: int) -> int:
        """Return ``count`` matched ``side`` endpoints, at most the known ones of this build."""
        known = self._endpoints.get((side, ros_topic), {})
        return matched_of_this_build(   # (the rule RclpyBus follows too)
            count, [foreign is not None for _, foreign in known.values()]
            if self._discovery else None,
            any(s == side for s, _ in self._foreign_types.get(ros_topic, ())))

    def _check_peers_now_and_then(self) -> None:
        """Look for peers that cannot match or are of another build, once a second at most."""
        if time.monotonic() < self._next_qos_check:
            return
        self._next_qos_check = time.monotonic() + _QOS_CHECK_S
        if self._namesakes is not None and not self._namesakes.look():
            self._namesakes.close()
            self._namesakes = None
        self._take_discovery()
        for ros_topic in set(self._writers) | set(self._readers):
            self._check_qos(ros_topic)

    def _take_discovery(self) -> None:
        """
        Note the remote endpoints whose ``typehash=`` differs from this build's, on any topic.

        rmw_cyclonedds (Iron and newer) and this bus put the RIHS01 hash of the message type
        in each endpoint's USER_DATA, and neither refuses a peer whose hash differs: a node
        built from other msg/ files matched by type name, and what it sent was dropped by
        Cyclone (``deserialization ... failed``, on stderr only) or read with fields missing
        or shifted, and only ``schema_version`` (when bumped) said so, at the first message.
        A peer of another DDS type name (a renamed message, which DDS does not match) is
        another build's too, hash or none; peers without a hash and of this build's type
        names (Humble) are taken as they come (:func:`_other_build`).
        """
        for side, reader in list(self._discovery.items()):
            while True:
                try:
                    endpoints = reader.take(N=_TAKE_BATCH)
                except DDSException as exc:
                    self._drop_discovery(exc)
                    return
                for endpoint in endpoints:
                    self._note_endpoint(side, endpoint)
                if len(endpoints) < _TAKE_BATCH:
                    break

    def _note_endpoint(self, side: str, endpoint) -> None:
        """Keep (or forget, once it is gone) one remote endpoint that discovery reported."""
        key = getattr(endpoint, 'key', None)
        info = getattr(endpoint, 'sample_info', None)
        if info is not None and info.instance_state != InstanceState.Alive:
            topic = self._endpoint_topic.pop((side, key), None)  # deleted, or lease ended
            if topic is not None:
                self._endpoints[(side, topic)].pop(key, None)
            return
        name = getattr(endpoint, 'topic_name', None) or ''
        prefix = _guid_prefix(getattr(endpoint, 'participant_key', None))
        if not name.startswith('rt/') or prefix == self._own_prefix:
            return
        foreign = _other_build(name[2:], getattr(endpoint, 'type_name', None),
                               getattr(endpoint, 'qos', None))
        if foreign is not None:
            self._foreign_types.setdefault(name[2:], set()).add((side, foreign))
        self._endpoint_topic[(side, key)] = name[2:]
        self._endpoints.setdefault((side, name[2:]), {})[key] = (prefix, foreign)

    def participants(self, topic: str, writer: bool):
        self._check_open()
        if not self._discovery:
            return None                  # no discovery readers: this bus cannot tell
        ros_topic = resolve(topic, self.namespace)
        self._take_discovery()
        known = self._endpoints.get(('writer' if writer else 'reader', ros_topic), {})
        return {prefix for prefix, foreign in known.values() if foreign is None}

    def foreign_readers(self, topic: str) -> list:
        return self._foreign('reader', topic)

    def foreign_writers(self, topic: str) -> list:
        return self._foreign('writer', topic)

    def other_builds(self, topic: str, writer: bool) -> list:
        self._check_open()
        ros_topic = resolve(topic, self.namespace)
        self._take_discovery()
        known = self._endpoints.get(('writer' if writer else 'reader', ros_topic), {})
        return sorted({foreign for _, foreign in known.values() if foreign is not None})

    def _foreign(self, side: str, topic: str) -> list:
        """Return the GUID prefixes of ``side``'s endpoints on ``topic`` of another build."""
        self._check_open()
        ros_topic = resolve(topic, self.namespace)
        self._take_discovery()
        if ros_topic not in self._foreign_types:
            return []                    # (no endpoint of another build was ever seen there)
        known = self._endpoints.get((side, ros_topic), {})
        return sorted({prefix for prefix, foreign in known.values() if foreign is not None})

    def _drop_discovery(self, exc) -> None:
        """
        Delete the discovery readers after one failed (``exc``): say so once, carry on without.

        A failing reader raised its raw DDSException from publish(), poll() or matched(), the
        once-a-second check's callers, so a check that only names a peer of another build
        ended the node. The QoS check (the C library's status counts) stays.
        """
        readers, self._discovery = list(self._discovery.values()), {}
        # (no longer kept up to date: a peer of another build that left would stay named,
        # and the server would give up the robot beside it: Bus.foreign_readers says [])
        self._endpoints, self._endpoint_topic = {}, {}
        for reader in readers:
            with contextlib.suppress(DDSException):
                reader.__del__()
        LOG.warning(_NO_TYPE_CHECK.format(exc=exc))

    def _check_qos(self, ros_topic: str) -> None:
        """
        Log, once per topic, side and policy, a peer whose QoS cannot match ours on a topic.

        DDS matches no such pair and tells neither side's user: a ROS 2 node (rclpy warns on
        its own side) or tool that subscribes to a best-effort status topic with RELIABLE, or
        publishes row chunks BEST_EFFORT, got no data, and this node, no data from it, without
        a word. Says what the topic's QoS is and what a ROS 2 node uses to match it.
        """
        for writer, entities in ((True, self._writers), (False, self._readers)):
            entity = entities.get(ros_topic)
            if entity is None:
                continue
            total, policy_id = _incompatible_status(entity if writer else entity[0], writer)
            if total <= self._incompatible.get((ros_topic, writer), 0):
                continue
            self._incompatible[(ros_topic, writer)] = total
            policy = _POLICIES.get(policy_id, f'policy {policy_id}')
            if (ros_topic, writer, policy) in self._qos_warned:
                continue
            self._qos_warned.add((ros_topic, writer, policy))
            profile = topic_qos(ros_topic) if writer else self._reader_qos[ros_topic]
            LOG.warning(_qos_hint(ros_topic, writer, policy, profile))
        for side, theirs in sorted(self._foreign_types.get(ros_topic, ())):
            if (ros_topic, side, theirs) not in self._types_warned:
                self._types_warned.add((ros_topic, side, theirs))
                msg_type = topic_type(ros_topic)
                ours = idl.type_hash(msg_type) if theirs.startswith('RIHS') else \
                    idl.dds_type_name(msg_type)
                what = 'type hash' if theirs.startswith('RIHS') else 'type'
                LOG.warning(f'a {side} on {ros_topic} has {what} {theirs}, this node '
                            f'{ours}: its {msg_type} was built from other '
                            '.msg files (another rog_ros version?), so the messages between '
                            'it and this node are dropped or misread; run the same rog_ros '
                            'on every robot')

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        entities = []
        for reader, condition, _ in self._readers.values():
            self._waitset.detach(condition)
            entities += [condition, reader]
        entities += list(self._writers.values()) + [self._waitset]
        entities += list(self._discovery.values())
        if self._namesakes is not None:
            self._namesakes.close()
        entities += self._graph.entities() if self._graph is not None else []
        entities += list(self._topics.values()) + [self._participant]
        for entity in entities:  # children first: the binding deletes entities in __del__
            entity.__del__()
        self._readers, self._writers, self._topics = {}, {}, {}


_NO_TYPE_CHECK = ('DDS discovery reader failed ({exc}); this node carries on without checking '
                  'peers for the type hash of another rog_ros build (peers whose QoS cannot '
                  'match are still named)')


def _discovery_readers(participant) -> dict:
    """
    Return ``{'writer': reader, 'reader': reader}`` of DDS's built-in endpoint topics.

    Readers that cannot be created are said once and left out ({}): the bus works without
    the type-hash check they feed (:meth:`DdsBus._take_discovery`).
    """
    readers = {}
    try:
        for side, builtin in (('writer', BuiltinTopicDcpsPublication),
                              ('reader', BuiltinTopicDcpsSubscription)):
            readers[side] = BuiltinDataReader(participant, builtin)
    except DDSException as exc:
        for reader in readers.values():
            with contextlib.suppress(DDSException):
                reader.__del__()
        LOG.warning(_NO_TYPE_CHECK.format(exc=exc))
        return {}
    return readers


def _held_hint(ros_topic: str, held: float) -> str:
    """Say that a publish on ``ros_topic`` waited ``held`` seconds for a reader, and why."""
    return (f'publish on {ros_topic} held {held:.0f} s: a reliable reader of it does not '
            'acknowledge (a robot out of range, or a ROS 2 tool that was suspended, killed or '
            'lost its link, such as ros2 topic echo or ros2 bag record), and DDS keeps this '
            "node's writes until it does or its participant's lease ends; tools should read "
            'data topics best effort (ros2 topic echo --qos-reliability best_effort)')


def _guid_prefix(guid) -> str:
    """Return a participant's GUID prefix as Cyclone's logs write it (``a1b2c3d4:...``), or ''."""
    return guid_prefix_text(getattr(guid, 'bytes', None))


def _other_build(ros_topic: str, type_name, qos):
    """
    Return what tells an endpoint on ``ros_topic`` of another build (None: of this build).

    Its DDS type name when it differs from this build's (a renamed message: Cyclone does not
    match it), else its USER_DATA ``typehash=`` when that differs from this build's. The
    type information that Cyclone compares (``type_id``) is not used: a ROS 2 node on
    rmw_cyclonedds sends none (Cyclone matches it by type name alone), while Iron and newer
    send the hash in USER_DATA; a peer with neither (Humble, same names) is of this build,
    and so is one whose hash cannot be compared (empty, or of another hash version than this
    build's ``RIHS01_<64 hex>``: it says nothing of the peer's ``.msg`` files).
    """
    try:
        msg_type = topic_type(ros_topic)
        ours_name, ours = idl.dds_type_name(msg_type), idl.type_hash(msg_type)
    except (KeyError, ValueError):
        return None                      # (not a topic of this build's: nothing to compare)
    if type_name and type_name != ours_name:
        return type_name
    theirs = _typehash(qos)
    if theirs is None or not _RIHS01.fullmatch(theirs):
        return None
    return theirs if theirs != ours else None


def _typehash(qos):
    """Return the ``typehash=`` of an endpoint's USER_DATA (``RIHS01_<hex>``), or None."""
    try:
        data = qos[Policy.Userdata].data if qos is not None and Policy.Userdata in qos else b''
    except (KeyError, TypeError, AttributeError):
        return None
    for part in bytes(data).decode('ascii', 'replace').split(';'):
        if part.startswith('typehash='):
            return part[len('typehash='):]
    return None


def _qos_hint(ros_topic: str, writer: bool, policy: str, profile) -> str:
    """Say that a peer's QoS cannot match this bus's ``writer`` or reader, and what would."""
    peer = 'a reader of' if writer else 'a writer on'
    if policy == 'TYPE_CONSISTENCY':
        return (f'{peer} {ros_topic} has a {topic_type(ros_topic)} of other members, so DDS '
                'does not match it with this node: it was built from other .msg files '
                '(another rog_ros version?); run the same rog_ros on every robot')
    if policy == 'DATA_REPRESENTATION':
        return (f'{peer} {ros_topic} uses XCDR2 only, so DDS does not match it with this '
                'node, which uses plain CDR (XCDR1) as ROS 2 does; give it XCDR1')
    if profile.reliable:
        qos, ros2 = 'RELIABLE, VOLATILE', "rclpy's default profile (a depth, e.g. 10)"
    else:
        qos, ros2 = 'BEST_EFFORT, VOLATILE', 'qos_profile_sensor_data'
    if writer:
        return (f'a reader of {ros_topic} asks for QoS that this writer does not offer '
                f'({policy}), so it receives nothing from this node: {ros_topic} is {qos}; '
                f'subscribe with that (a ROS 2 node: {ros2}; ros2 topic echo picks it itself)')
    return (f'a writer on {ros_topic} offers QoS that this reader does not accept ({policy}), '
            f'so nothing it publishes reaches this node: {ros_topic} is {qos}; publish with '
            f'that (a ROS 2 node: {ros2})')


def _incompatible_status(entity, writer: bool) -> tuple:
    """
    Return (peers refused so far, the last refusing policy's id) of a writer or reader.

    Asked of the C library, as :func:`_matched_status` does: bindings 0.10 cannot.
    """
    status = _c_status(entity, writer, ('dds_get_offered_incompatible_qos_status',
                                        'dds_get_requested_incompatible_qos_status'),
                       ('offered_incompatible_qos_status', 'requested_incompatible_qos_status'))
    if status is None:
        return 0, 0                  # a deleted entity: nothing to say
    return int(status.total_count), int(status.last_policy_id)


def _matched_peers(entity, writer: bool) -> int:
    """Count the readers a writer matched (``writer``), or the writers a reader matched."""
    get = getattr(entity, 'get_matched_subscriptions' if writer
                  else 'get_matched_publications', None)
    if get is not None:
        return _matched_count(get)
    return _matched_status(entity, writer)


def _matched_status(entity, writer: bool) -> int:
    """
    Ask the C library for the matched count: bindings 0.10 have no ``get_matched_*``.

    Why: the Cyclone DDS that ROS 2 Humble ships, and so the robots' images and Python 3.8
    (JetPack 5), pair with the 0.10 binding, whose entities cannot list their matches; the C
    call ``dds_get_{publication,subscription}_matched_status`` it wraps is in every version.
    """
    status = _c_status(entity, writer, ('dds_get_publication_matched_status',
                                        'dds_get_subscription_matched_status'),
                       ('publication_matched_status', 'subscription_matched_status'))
    if status is None:
        return 0                     # a deleted entity: nothing matched (callers poll)
    return int(status.current_count)


def _c_status(entity, writer: bool, calls: tuple, structs: tuple):
    """
    Return a status struct of ``entity`` read by the C library, or None for a deleted entity.

    ``calls`` and ``structs`` name the C function and its ``dds_c_t`` struct for a writer and
    for a reader, in that order; the binding wraps few of these calls, and 0.10 none.
    """
    from cyclonedds.internal import DDS, dds_c_t
    side = 0 if writer else 1
    status = getattr(dds_c_t, structs[side])()
    call = getattr(DDS._dll_handle, calls[side])
    call.argtypes = [dds_c_t.entity, ctypes.POINTER(type(status))]
    call.restype = ctypes.c_int32
    return status if call(entity._ref, ctypes.byref(status)) == 0 else None


def _matched_count(get_matched) -> int:
    """
    Count an entity's matched peers, asking again if one matched while the binding counted.

    The binding sizes a buffer from one call and fills it with a second; a peer that matches
    in between makes it index past the buffer (IndexError). Discovery settles within a few
    calls, so ask again; if it never does, report nothing matched yet (callers poll anyway).
    """
    for _ in range(_MATCH_RETRIES):
        try:
            return len(get_matched())
        except IndexError:
            continue
    return 0
