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
Topic names, their message types and QoS profiles, shared by every Bus implementation.

A bus lives under a namespace (default ``/rog``). Its users name topics either relative
(``'up/chunks'``, a worker's uplink) or absolute (``'/rog/w3/chunks'``, worker 3's downlink:
``rog_ros.nodes.routing``); the *last* path segment selects the message type and default QoS
from :data:`TOPICS`. On DDS a ROS 2 topic ``/rog/up/chunks`` is the DDS topic
``rt/rog/up/chunks``.

QoS (equal to the ROS 2 profiles a ROS 2 node must use to match):

* ``reliable``: RELIABLE, KEEP_ALL, VOLATILE -- row chunks, acks, versions, schedules: a lost
  sample would stall exactly-once accounting until a timeout, so DDS retransmits;
* ``best_effort``: BEST_EFFORT, KEEP_LAST(10), VOLATILE -- link statistics and training status:
  periodic, only the newest matters, never worth a retransmission on a congested link.
"""

from __future__ import annotations

from dataclasses import dataclass
import re

DEFAULT_NAMESPACE = '/rog'


@dataclass(frozen=True)
class QosProfile:
    """A transport-neutral QoS profile (the subset of ROS 2 QoS this project uses)."""

    name: str
    reliable: bool   # RELIABLE (retransmit) or BEST_EFFORT
    depth: int       # KEEP_LAST depth; 0 = KEEP_ALL


RELIABLE = QosProfile('reliable', reliable=True, depth=0)
BEST_EFFORT = QosProfile('best_effort', reliable=False, depth=10)
SYSTEM_DEFAULT = QosProfile('default', reliable=True, depth=10)
"""ROS 2's default profile (RELIABLE, KEEP_LAST(10)): what /diagnostics subscribers use."""
PROFILES = {p.name: p for p in (RELIABLE, BEST_EFFORT, SYSTEM_DEFAULT)}

TOPICS = {
    'chunks': ('RowChunk', RELIABLE),
    'versions': ('RowVersions', RELIABLE),
    'acks': ('TransferAck', RELIABLE),
    'schedule': ('Schedule', RELIABLE),
    'link_stats': ('LinkStats', BEST_EFFORT),
    'train_status': ('TrainStatus', BEST_EFFORT),
    'diagnostics': ('diagnostic_msgs/DiagnosticArray', SYSTEM_DEFAULT),
}
"""Last topic segment -> (message type, default QoS profile)."""

DEFAULT_TOPIC = {msg_type: name for name, (msg_type, _) in TOPICS.items()}
"""Message type -> relative topic name it is published on by default."""

_SEGMENT = re.compile(r'^[A-Za-z][A-Za-z0-9_]*$')


def resolve(topic: str, namespace: str = DEFAULT_NAMESPACE) -> str:
    """Return the absolute ROS 2 topic name: ``'chunks'`` -> ``'/rog/chunks'``."""
    if not topic:
        raise ValueError('empty topic name')
    full = topic if topic.startswith('/') else namespace.rstrip('/') + '/' + topic
    segments = full.strip('/').split('/')
    if full.endswith('/') or not all(_SEGMENT.match(s) and '__' not in s for s in segments):
        raise ValueError(f'invalid ROS 2 topic name {full!r}')
    return full


def dds_topic_name(ros_topic: str) -> str:
    """Return the DDS topic of an absolute ROS 2 topic: ``/rog/chunks`` -> ``rt/rog/chunks``."""
    if not ros_topic.startswith('/'):
        raise ValueError(f'not an absolute topic name: {ros_topic!r}')
    return 'rt' + ros_topic


def topic_type(topic: str) -> str:
    """Return the message type carried on ``topic`` (chosen by its last segment)."""
    last = topic.rstrip('/').rsplit('/', 1)[-1]
    try:
        return TOPICS[last][0]
    except KeyError:
        raise ValueError(f'unknown topic {topic!r}: its last segment must be one of '
                         f'{sorted(TOPICS)}') from None


def topic_qos(topic: str, qos=None) -> QosProfile:
    """Return the QoS profile of ``topic``: ``qos`` (a name or profile) or its default."""
    if qos is None:
        topic_type(topic)            # an unknown topic: the same one-line refusal
        return TOPICS[topic.rstrip('/').rsplit('/', 1)[-1]][1]
    if isinstance(qos, QosProfile):
        return qos
    try:
        return PROFILES[qos]
    except KeyError:
        raise ValueError(f'unknown QoS {qos!r}; use one of {sorted(PROFILES)}') from None


def qualified(namespace: str, name: str) -> str:
    """Return the fully qualified node name: ``/rog`` and ``rog_server`` -> ``/rog/rog_server``."""
    return f'{namespace.rstrip("/")}/{name}'


NAMESAKE_FIX = ('two fleets on one domain need two namespaces (namespace:=, --namespace) or '
                'domains (ROS_DOMAIN_ID); a renamed node needs a -r __ns:= of its own; see '
                'docs/architecture.md, "Node names and namespaces"')
"""What to set where two nodes have one fully qualified name (a node's warning, rog doctor's)."""
NAMESAKE_LOOK_S = 5.0
"""How long after its start an rclpy bus looks for another node of its name once a second."""
NAMESAKE_LATER_S = 5.0
"""How often an rclpy bus looks for one after that, for as long as it runs (seconds)."""


def namesake_line(domain, name: str) -> str:
    """Return the one-line warning of a node whose fully qualified ``name`` another announces."""
    return (f'another participant on DDS domain {domain} already announces a node named {name} '
            '(a second fleet or robot with this namespace on this domain?): ROS 2 tools mix '
            f'the two up and their traffic mixes; {NAMESAKE_FIX}')
