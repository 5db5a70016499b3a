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
A reliable reader that stops acknowledging holds a DdsBus's writes until DDS drops it; no crash.

What a ROS 2 tool does to a fleet: ``ros2 topic echo /rog/up/chunks`` and ``ros2 bag record``
read RELIABLE (they take the publishers' QoS), and when such a process is suspended (Ctrl-Z),
killed or loses its link, DDS keeps every write of the topic's writers until the reader
acknowledges or its participant's lease ends, a lease that participant chooses. A write waited
one ``publish_timeout_s`` (10 s, Cyclone's default lease too) and raised: with a 30 s lease on
the tool's side a worker exited with ``publish on /rog/up/chunks failed: [DDS_RETCODE_TIMEOUT]``
and the fleet stopped (found by an outside ROS 2 client, 2026-12-06). The tool here is a plain
Cyclone reader in a child process, with a lease longer than one try; the bus is under test.
"""

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time

import dds_domains
import numpy as np
import pytest

from rog_ros.protocol import messages as m
from rog_ros.protocol.transfer import (
    split_versions, versions_wire_bytes, VersionsLink, WRITER_MARK_BYTES)
from rog_ros.transport.topics import topic_type

pytest.importorskip('cyclonedds')
dds_bus = pytest.importorskip('rog_ros.transport.dds_bus')
cyclone_config = pytest.importorskip('rog_ros.transport.cyclone_config')

LEASE_S = 4
TRY_S = 1.0

_TOOL = """
import sys, time
from cyclonedds.domain import DomainParticipant
from cyclonedds.qos import Policy, Qos
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration
from rog_ros.transport import idl
participant = DomainParticipant(int(sys.argv[1]))
topic = Topic(participant, sys.argv[2], idl.dds_type(sys.argv[3]))
reader = DataReader(participant, topic, qos=Qos(
    Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(10),
    Policy.Durability.Volatile, Policy.DataRepresentation(use_cdrv0_representation=True)))
print('up', flush=True)
while True:
    reader.take(N=100)
    time.sleep(0.01)
"""


def _chunk(seq: int) -> m.RowChunk:
    """Return a 16 KiB downlink chunk numbered ``seq``."""
    return m.RowChunk(transfer_id=1, seq=seq, sender=-1, receiver=0, kind=1, clock=0, flags=0,
                      codec=0, row_ranges=np.array([0, 1], dtype=np.uint32),
                      payload=bytes(16384))


@contextlib.contextmanager
def _suspended_tool(bus, domain: int, lease_s: float, topic: str = 'w0/chunks'):
    """
    Match a reliable reader of ``topic`` with a lease of ``lease_s`` to ``bus``, then stop it.

    The reader runs in a child process (the tool) and is suspended (SIGSTOP, as Ctrl-Z) once
    the bus's writer has matched it; on leaving, the tool is killed and the bus closed.
    """
    lease = (f'<CycloneDDS><Domain><Discovery><LeaseDuration>{lease_s}s</LeaseDuration>'
             '</Discovery></Domain></CycloneDDS>')
    loopback = cyclone_config.config_path('loopback')
    env = dict(os.environ, CYCLONEDDS_URI=f'{cyclone_config.file_uri(loopback)},{lease}')
    tool = subprocess.Popen([sys.executable, '-c', _TOOL, str(domain),
                             f'rt{bus.namespace}/{topic}', topic_type(topic)], env=env,
                            stdout=subprocess.PIPE)
    try:
        assert tool.stdout.readline().strip() == b'up'
        bus.advertise(topic)
        deadline = time.monotonic() + 20
        while bus.matched(topic) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert bus.matched(topic) == 1
        os.kill(tool.pid, signal.SIGSTOP)            # the tool goes silent: Ctrl-Z
        yield tool
    finally:
        tool.kill()
        tool.wait()
        bus.close()


def test_a_suspended_reliable_reader_holds_writes_until_its_lease_ends_without_a_crash(caplog):
    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    loopback = cyclone_config.config_path('loopback')
    domain = dds_domains.domain(f'{__name__}:0')
    bus = dds_bus.DdsBus(namespace=f'/rog_silent_{os.getpid()}', domain_id=domain,
                         config=str(loopback), publish_timeout_s=TRY_S)
    with _suspended_tool(bus, domain, LEASE_S):
        start = time.monotonic()
        seq = 0
        while time.monotonic() - start < LEASE_S + 4:
            bus.publish('w0/chunks', _chunk(seq))   # raised BusError after TRY_S
            seq += 1
        assert bus.matched('w0/chunks') == 0        # DDS dropped it at the end of its lease
        held = [r.getMessage() for r in caplog.records if 'held' in r.getMessage()]
        assert held, 'a held publish says so'
        assert held[0].startswith(f'publish on {bus.namespace}/w0/chunks held ')
        assert 'does not acknowledge' in held[0] and '--qos-reliability best_effort' in held[0]
        assert seq > 100                             # and goes on once it was dropped


def test_a_publish_gives_up_with_the_cause_after_publish_give_up_s():
    loopback = cyclone_config.config_path('loopback')
    domain = dds_domains.domain(f'{__name__}:1')
    bus = dds_bus.DdsBus(namespace=f'/rog_silent_{os.getpid()}_b', domain_id=domain,
                         config=str(loopback), publish_timeout_s=0.5, publish_give_up_s=1.0)
    with _suspended_tool(bus, domain, 60):
        with pytest.raises(dds_bus.BusError, match=r'^publish on /rog_silent_\d+_b/w0/chunks '
                           r'held [1-9] s: a reliable reader .*; gave up$'):
            for seq in range(100000):
                bus.publish('w0/chunks', _chunk(seq))


def test_held_publishes_are_logged_once_a_minute_per_topic(caplog, monkeypatch):
    # every publish held over 2 s was logged: over a slow link (the writer waits for the
    # acknowledgements of half a megabyte) that is a warning every few seconds of a push
    caplog.set_level(logging.WARNING, logger='rog_ros.dds')
    monkeypatch.setattr(dds_bus, '_HELD_WARN_S', 0.0)       # every publish counts as held
    loopback = cyclone_config.config_path('loopback')
    domain = dds_domains.domain(f'{__name__}:2')
    bus = dds_bus.DdsBus(namespace=f'/rog_silent_{os.getpid()}_c', domain_id=domain,
                         config=str(loopback))
    try:
        for seq in range(20):
            bus.publish('w0/chunks', _chunk(seq))
            bus.publish('w1/chunks', _chunk(seq))
        held = [r.getMessage() for r in caplog.records if ' held ' in r.getMessage()]
        assert [h.split(' held ')[0] for h in held] == [
            f'publish on {bus.namespace}/w0/chunks', f'publish on {bus.namespace}/w1/chunks']
        monkeypatch.setattr(dds_bus, '_HELD_REPEAT_S', 0.0)
        bus.publish('w0/chunks', _chunk(20))
        assert caplog.records[-1].getMessage().endswith(' (19 more held since it was last said)')
    finally:
        bus.close()


def test_a_robot_that_falls_silent_mid_transfer_does_not_block_the_next_write():
    # A robot's link dies while a downlink transfer to it is on its way (measured with rog
    # fleet --netns, docs/faults.md): its reader stops acknowledging the chunks written, and
    # the engine writes the rest of the transfer, one 4 x 16 KiB window per 2 s, then its END.
    # Past Cyclone's adaptive high watermark (30 kB when a writer starts) each such write
    # blocked the server's one loop, and so every robot, for publish_timeout_s (10 s) until
    # the robot's lease ended: every robot stalled 10 s for one robot's outage
    loopback = cyclone_config.config_path('loopback')
    domain = dds_domains.domain(f'{__name__}:3')
    bus = dds_bus.DdsBus(namespace=f'/rog_silent_{os.getpid()}_d', domain_id=domain,
                         config=str(loopback), publish_timeout_s=TRY_S, publish_give_up_s=TRY_S)
    with _suspended_tool(bus, domain, 60):
        for seq in range(32):                         # 512 KiB: 8 windows, 16 s of an outage
            start = time.monotonic()
            bus.publish('w0/chunks', _chunk(seq))     # raised BusError after TRY_S
            assert time.monotonic() - start < 0.5, seq


def _versions_scene(k: int, suffix: str, n: int = 8):
    """
    Return ``(bus, domain, versions)``: a loopback bus and ConvMLP-M's RowVersions, ``n`` robots.

    The versions writer tests' one scene: 33,307 rows in as many runs, 1,334,216 bytes a copy
    on loopback (60000-byte fragments); ``k`` and ``suffix`` keep each test's domain and
    namespace apart from the others'.
    """
    loopback = cyclone_config.config_path('loopback')
    domain = dds_domains.domain(f'{__name__}:{k}')
    bus = dds_bus.DdsBus(namespace=f'/rog_silent_{os.getpid()}_{suffix}', domain_id=domain,
                         config=str(loopback), publish_timeout_s=TRY_S, publish_give_up_s=TRY_S)
    rows = 33307
    versions = m.RowVersions(transfer_id=1, receiver=0, n_workers=n,
                             run_starts=np.arange(rows, dtype=np.uint32),
                             run_lengths=np.ones(rows, np.uint32),
                             versions=np.zeros(rows * n, np.int32), auth_tag=bytes(16))
    return bus, domain, versions


def test_the_versions_writer_blocks_where_versions_wire_bytes_says():
    # The server repeats a downlink's RowVersions before every repeated END on a writer of
    # its own (w<r>/versions): Cyclone counts each copy as its CDR and 80 bytes per fragment
    # (transfer.versions_wire_bytes; 60000-byte fragments on loopback) and blocks the write
    # that finds more than the 8 MiB mark unacknowledged. ConvMLP-M's 33,307 rows in as many
    # runs for 8 robots: 1,334,216 bytes a copy here, 7 copies (9,339,512) and the 8th blocks
    bus, domain, versions = _versions_scene(4, 'e')
    copy = versions_wire_bytes(versions, 60000)
    assert copy == 1334216
    written = 0
    with _suspended_tool(bus, domain, 60, topic='w0/versions'):
        with pytest.raises(dds_bus.BusError, match='held 1 s'):
            for _ in range(20):
                bus.publish('w0/versions', versions)
                written += 1
    assert (written - 1) * copy <= WRITER_MARK_BYTES < written * copy
    assert written == 7


def test_a_robot_heard_but_not_reached_keeps_the_versions_writer_under_the_mark():
    # A robot whose messages reach the server but which nothing reaches (a one-way link)
    # keeps its reader matched and acknowledges nothing: here a suspended reader of
    # w0/versions with a 60 s lease. The server's VersionsLink, told the robot is heard
    # every 8 s (its pull pokes) and never acked, over 300 s of its clock with an END every
    # 2 s: ConvMLP-M's 1,334,216-byte copies for 8 robots. It counted the writer afresh
    # each lease after the newest copy: a copy at 0, 16, 32, ... s, and the 8th write
    # blocked (BusError, held 1 s). Now the first copy and one a lease later only
    bus, domain, versions = _versions_scene(5, 'f')
    link = VersionsLink(fragment_bytes=60000)
    written = []
    with _suspended_tool(bus, domain, 60, topic='w0/versions'):
        for k in range(150):
            now = 2.0 * k
            if k and k % 4 == 0:
                link.heard(now, 10.0, now - 8.0)          # a poke, within its lease
            if link.send(versions, now, k == 0):
                bus.publish('w0/versions', versions)      # raised BusError at the 8th
                written.append(now)
    assert written == [0.0, 16.0] and link.withheld == 148
    assert link.since_ack == 2 * 1334216 < WRITER_MARK_BYTES


def test_versions_past_the_mark_go_in_parts_that_keep_the_writer_under_it():
    # ConvMLP-M's versions for 64 robots: 8,804,904 bytes a copy on loopback, past the 8 MiB
    # mark on its own. To a robot whose reader is matched and acknowledges nothing (here
    # suspended, 60 s lease) the first copy went whole and the next write found the writer
    # past the mark: BusError, held 1 s (the server's loop blocked). Split at
    # VERSIONS_PART_BYTES, a part goes only within the bound past what the robot
    # acknowledged: over 300 s with an END every 2 s and the robot heard every 8 s, the
    # first part and the same part a lease later, nothing blocked
    bus, domain, whole = _versions_scene(6, 'g', n=64)
    assert versions_wire_bytes(whole, 60000) == 8804904 > WRITER_MARK_BYTES
    link = VersionsLink(fragment_bytes=60000)
    parts = split_versions(whole, link.part_bytes, 60000)
    assert len(parts) == 5
    written = []
    with _suspended_tool(bus, domain, 60, topic='w0/versions'):
        bus.publish('w0/versions', whole)
        with pytest.raises(dds_bus.BusError, match='held 1 s'):
            bus.publish('w0/versions', whole)           # the write after a whole copy
    bus, domain, whole = _versions_scene(7, 'h', n=64)
    with _suspended_tool(bus, domain, 60, topic='w0/versions'):
        for k in range(150):
            now = 2.0 * k
            if k and k % 4 == 0:
                link.heard(now, 10.0, now - 8.0)          # a poke, within its lease
            for part in link.send_parts(parts, now, k == 0):
                bus.publish('w0/versions', part)
                written.append((now, part.part))
    assert written == [(0.0, 0), (16.0, 0)]
    assert link.since_ack == 2 * versions_wire_bytes(parts[0], 60000) < WRITER_MARK_BYTES
