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
Bag: record bus traffic as a ROS 2 MCAP file that ``ros2 bag`` and Foxglove open.

Every channel is a ROS 2 topic (``/rog/status/rog_worker_0/train_status``) with
``message_encoding='cdr'`` and a ``ros2msg`` schema named ``pkg/msg/Type`` whose text is the
``.msg`` definition followed by those of the types it uses (the ``MSG: pkg/Type`` sections that
rosbag2 writes), and the ``offered_qos_profiles`` metadata of rosbag2. Messages are the same
CDR bytes (with encapsulation header) that the DDS transport puts on the wire.

A recording survives the recorder's crash: the file is written in small chunks
(:data:`CHUNK_BYTES`), and with the first message :data:`FLUSH_EVERY_S` seconds or more after
the last flush the open chunk is closed and the file flushed to the kernel. A recorder killed
with SIGKILL, or by the kernel out of memory, leaves a file without its summary whose complete
chunks an MCAP reader still reads in streaming (non-seeking) mode
(``mcap.reader.NonSeekingReader``; ``mcap recover`` writes a whole file of them). The mcap
library's default 1 MiB chunk, never flushed, kept an hour of 10 Hz LinkStats in memory, and
a killed recorder left a file of 0 bytes.
"""

from __future__ import annotations

import threading
import time

from rog_ros.transport import field_plans
from rog_ros.transport.bus import RecordError
from rog_ros.transport.convert import to_sample
from rog_ros.transport.msgdef import msg_dir, STANDARD_DIR, WELL_KNOWN
from rog_ros.transport.topics import topic_qos, topic_type

_SEPARATOR = '=' * 80
RECORDED_SUFFIXES = ('train_status', 'link_stats', 'schedule', 'diagnostics')
"""Topics ``--record`` keeps (by last segment): status, link, schedule and diagnostics."""
CHUNK_BYTES = 64 * 1024
"""Size (uncompressed) at which the recorder writes the open chunk to the file."""
FLUSH_EVERY_S = 5.0
"""Seconds after which the open chunk is written and the file flushed, however small."""


def msg_text(name: str) -> str:
    """Return the ``.msg`` text of ``pkg/Type`` (ours, well-known or standard)."""
    if name in WELL_KNOWN:
        return WELL_KNOWN[name]
    pkg, typ = name.split('/')
    path = (msg_dir() if pkg == 'rog_ros' else STANDARD_DIR / pkg) / f'{typ}.msg'
    return path.read_text(encoding='utf-8')


def schema_text(name: str) -> str:
    """Return the ros2msg schema of ``pkg/Type``: its text, then each type it uses once."""
    seen, order, pending = {name}, [], [name]
    while pending:
        for fdef in field_plans.msg_def(pending.pop(0)).fields:
            if fdef.nested and fdef.base not in seen:
                seen.add(fdef.base)
                order.append(fdef.base)
                pending.append(fdef.base)
    parts = [msg_text(name).rstrip('\n')]
    for dep in order:
        parts += [_SEPARATOR, f'MSG: {dep}', msg_text(dep).rstrip('\n')]
    return '\n'.join(parts) + '\n'


def _ros_name(name: str) -> str:
    pkg, typ = (name if '/' in name else f'rog_ros/{name}').split('/')
    return f'{pkg}/msg/{typ}'


def qos_metadata(topic: str) -> str:
    """Return rosbag2's ``offered_qos_profiles`` YAML for the topic's QoS profile."""
    profile = topic_qos(topic)
    never = '\n  '.join(f'{k}:\n    sec: 2147483647\n    nsec: 4294967295'
                        for k in ('deadline', 'lifespan', 'liveliness_lease_duration'))
    return ('- history: {h}\n  depth: {d}\n  reliability: {r}\n  durability: 2\n'
            '  {never}\n  liveliness: 1\n  avoid_ros_namespace_conventions: false\n').format(
                h=2 if profile.depth == 0 else 1, d=profile.depth,
                r=1 if profile.reliable else 2, never=never)


def recorded(topic: str) -> bool:
    """Tell whether ``--record`` keeps ``topic``."""
    return topic.rstrip('/').rsplit('/', 1)[-1] in RECORDED_SUFFIXES


class McapRecorder:
    """
    Write messages of absolute ROS 2 topics to an MCAP file (``close()`` finishes it).

    Parameters
    ----------
    path : str
        Output file (``.mcap``).

    """

    def __init__(self, path: str, flush_every_s: float = FLUSH_EVERY_S,
                 clock=time.monotonic):
        from mcap.writer import Writer
        self.path = path
        try:
            self._fh = open(path, 'wb')
        except OSError as err:
            raise RecordError(f'cannot write the recording {path}: '
                              f'{err.strerror or err}') from None
        self._writer = Writer(self._fh, chunk_size=CHUNK_BYTES)
        self._writer.start(profile='ros2', library='rog_ros')
        self._schemas, self._channels = {}, {}
        self.counts = {}             # topic -> messages written
        self._lock = threading.Lock()   # bus callbacks may write from their own threads
        self._clock, self.flush_every_s = clock, flush_every_s
        self._flushed_at = clock()

    def _channel(self, topic: str) -> int:
        channel = self._channels.get(topic)
        if channel is None:
            type_name = topic_type(topic)
            schema = self._schemas.get(type_name)
            if schema is None:
                schema = self._writer.register_schema(
                    name=_ros_name(type_name), encoding='ros2msg',
                    data=schema_text(field_plans.msg_def(type_name).name).encode('utf-8'))
                self._schemas[type_name] = schema
            channel = self._writer.register_channel(
                topic=topic, message_encoding='cdr', schema_id=schema,
                metadata={'offered_qos_profiles': qos_metadata(topic)})
            self._channels[topic] = channel
        return channel

    def write(self, topic: str, msg, stamp_ns: int = None) -> None:
        """Append ``msg`` (a dataclass the bus carries) on absolute ``topic``."""
        now = time.time_ns() if stamp_ns is None else int(stamp_ns)
        data = bytes(to_sample(msg).serialize())
        with self._lock:
            if self._writer is None:
                return
            channel = self._channel(topic)
            self.counts[topic] = self.counts.get(topic, 0) + 1
            self._writer.add_message(channel, log_time=now, publish_time=now, data=data,
                                     sequence=self.counts[topic])
            if self._clock() - self._flushed_at >= self.flush_every_s:
                self._flush()

    def flush(self) -> None:
        """Write the open chunk and flush the file (what is recorded so far survives a kill)."""
        with self._lock:
            if self._writer is not None:
                self._flush()

    def _flush(self) -> None:
        """Close the open chunk and hand the file's buffer to the kernel (lock held)."""
        finish_chunk = getattr(self._writer, 'flush', None)    # (mcap < 1.5: none)
        if finish_chunk is not None:
            finish_chunk()
        self._fh.flush()
        self._flushed_at = self._clock()

    def close(self) -> None:
        """Write the summary and close the file. Idempotent."""
        with self._lock:
            if self._writer is not None:
                writer, self._writer = self._writer, None
                try:
                    writer.finish()
                finally:
                    self._fh.close()


class RecordingBus:
    """
    A Bus wrapper that also writes what it publishes and receives on recorded topics.

    ``nodes --record FILE.mcap``: the node's own view of the status, link, schedule and
    diagnostics topics.
    """

    def __init__(self, inner, recorder: McapRecorder):
        self.inner, self.recorder = inner, recorder

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _full(self, topic: str) -> str:
        from rog_ros.transport.topics import resolve
        return resolve(topic, self.inner.namespace)

    def publish(self, topic: str, msg) -> None:
        self.inner.publish(topic, msg)
        if recorded(topic):
            self.recorder.write(self._full(topic), msg)

    def subscribe(self, topic: str, callback=None, qos=None) -> None:
        full = self._full(topic)
        if callback is not None and recorded(topic):
            inner_callback = callback

            def callback(msg):
                self.recorder.write(full, msg)
                inner_callback(msg)
        self.inner.subscribe(topic, callback, qos)

    def poll(self, timeout_s: float = 0.0) -> list:
        out = self.inner.poll(timeout_s)
        for topic, msg in out:
            if recorded(topic):
                self.recorder.write(topic, msg)
        return out

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            self.recorder.close()
