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
The Bus interface: publish/subscribe of protocol messages (``choose.make_bus`` picks one).

Nodes talk to each other only through a :class:`Bus`; ``DdsBus`` (Cyclone DDS through its
Python binding, the embedded default) and ``RclpyBus`` (rclpy, on ROS 2 installs) implement
it with the same topic names, types and QoS, so either side interoperates with the other.

Threading contract
------------------
A bus belongs to the thread that created it (the node's engine thread); no method may be
called concurrently from another thread. Nothing is ever delivered on another thread:
messages are queued by the middleware and handed over only inside :meth:`Bus.poll`, either
returned from it or passed to a subscription's callback, which ``poll`` calls in the calling
thread before returning. Per topic and sender, messages arrive in publication order;
RELIABLE topics deliver each message exactly once while the peers stay matched.

Own publications: ``DdsBus`` never delivers a message to the bus that published it; rclpy
cannot promise that, so receivers must check the addressing fields (``receiver``,
``worker``), which the engines validate anyway. Topics with one direction each
(``'/rog/up/chunks'``, ``'/rog/w3/down/chunks'``: the last segment picks the type) avoid
the question and keep robots from receiving traffic meant for others.
"""

from __future__ import annotations

import abc

from rog_ros.transport.topics import DEFAULT_NAMESPACE


class BusError(RuntimeError):
    """The middleware refused an operation (e.g. a reliable publish timed out)."""


class RecordError(OSError, ValueError):
    """The ``--record`` file cannot be written (one line, the path and the reason)."""


class Bus(abc.ABC):
    """
    Publish/subscribe of ``rog_ros.protocol.messages`` dataclasses under one namespace.

    Parameters
    ----------
    namespace : str, default '/rog'
        Prefix of relative topic names: ``'chunks'`` is ``'/rog/chunks'``.

    """

    def __init__(self, namespace: str = DEFAULT_NAMESPACE):
        if not namespace.startswith('/'):
            raise ValueError(f'namespace must be absolute, got {namespace!r}')
        self.namespace = namespace
        self.rejects = 0  # received samples that could not be decoded (dropped, counted)

    @abc.abstractmethod
    def publish(self, topic: str, msg) -> None:
        """
        Send ``msg`` (a protocol dataclass) on ``topic``; may block on a full reliable queue.

        Raises :class:`BusError` when a reliable publish cannot complete in time, and
        ``ValueError`` when the topic does not carry ``msg``'s type.
        """

    def advertise(self, topic: str) -> None:
        """
        Create the writer of ``topic`` now, so that peers discover it before the first publish.

        Optional: :meth:`publish` creates it on first use otherwise.
        """

    @abc.abstractmethod
    def subscribe(self, topic: str, callback=None, qos=None) -> None:
        """
        Start receiving ``topic``.

        ``callback(msg)``, if given, is called by :meth:`poll` for each message of the topic,
        which ``poll`` then does not return. ``qos`` is ``'reliable'``, ``'best_effort'`` or
        None for the topic's default profile (see :mod:`rog_ros.transport.topics`).
        """

    @abc.abstractmethod
    def poll(self, timeout_s: float = 0.0) -> list:
        """
        Deliver what has arrived, waiting up to ``timeout_s`` for the first message.

        Returns ``[(topic, msg), ...]`` (``topic`` absolute, e.g. ``'/rog/chunks'``) for the
        subscriptions without a callback, in arrival order per topic; messages of
        subscriptions with a callback are passed to it instead. Returns an empty list when
        nothing arrived before the timeout.
        """

    @abc.abstractmethod
    def matched(self, topic: str) -> int:
        """
        Return how many remote endpoints match this bus's writer/reader on ``topic``.

        One per endpoint, not one per topic: for a topic this bus only reads, the remote
        writers (each peer process has its own), for one it only writes, the remote readers
        (a tool such as ``ros2 topic echo`` among them). Nodes count their peers with it
        (the server waits for one uplink writer per worker), so a bus must not round it.
        """

    def participants(self, topic: str, writer: bool):
        """
        Return the GUID prefixes of the remote participants with a writer or reader on ``topic``.

        ``writer`` picks the side. Only endpoints of this build's message type count (not a
        peer of another rog_ros version: :meth:`foreign_readers`); None when this bus cannot
        tell (the server then counts matched endpoints instead). Used to tell a robot, whose
        participant reads its downlink and writes the uplink, from a tool that only reads.
        """
        return None

    def foreign_readers(self, topic: str) -> list:
        """
        Return the GUID prefixes of the participants reading ``topic`` with another type hash.

        Such a reader was built from other .msg files (another rog_ros version): DDS does not
        match it, or it misreads what it gets. [] when none, or when this bus cannot tell.
        """
        return []

    def foreign_writers(self, topic: str) -> list:
        """
        Return the GUID prefixes of the participants writing ``topic`` with another type hash.

        As :meth:`foreign_readers`, for writers: a robot of another rog_ros writes the uplink
        (of whichever build), a tool that only reads a robot's downlink does not.
        """
        return []

    def other_builds(self, topic: str, writer: bool) -> list:
        """
        Return what tells the endpoints of another build on ``topic`` apart, sorted.

        ``writer`` picks the side; each is the endpoint's type hash (``RIHS01_...``) or, for a
        renamed message, its type name, as the bus saw it: what a line naming the other
        build gives. [] when none, or when this bus cannot tell.
        """
        return []

    @abc.abstractmethod
    def close(self) -> None:
        """Release all middleware resources; the bus is unusable afterwards. Idempotent."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def guid_prefix_text(data) -> str:
    """
    Return a participant's 12-byte GUID prefix as Cyclone's logs write it (``a1b2c3d4:...``).

    ``data``: the bytes of a DDS GUID or an rmw GID (a GUID copied), the prefix first. '' when
    it is shorter or all zeros (no participant named). Both buses name participants so.
    """
    data = bytes(data or b'')[:12]
    if len(data) < 12 or not any(data):
        return ''
    return ':'.join(data[i:i + 4].hex() for i in range(0, 12, 4))


def matched_of_this_build(count: int, others, other_seen: bool) -> int:
    """
    Return ``count`` matched endpoints, at most the known ones of this build: both buses' rule.

    ``count``: the middleware's count (a ROS 2 node on rmw_cyclonedds gives Cyclone no type
    information, so DDS matches an endpoint of another build whose types keep their names,
    and rcl's ``count_publishers`` counts every writer of the topic, of any type). ``others``:
    for each endpoint known on that side of the topic (DDS discovery, rclpy's graph), whether
    it is of another build (None: the bus cannot tell). ``other_seen``: one of another build
    was ever seen on that side of the topic. Until one was, the middleware's count stands: a
    peer matched before discovery (or the graph) reported it is not taken away; from then on
    the count is at most the endpoints of this build known there.
    """
    if others is None or not other_seen:
        return count
    return min(count, sum(1 for other in others if not other))
