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
The hostile publisher of `rog chaos`'s flood scenario: fuzzed and unauthenticated messages.

It joins the fleet's DDS domain as one more participant, without the fleet key, and publishes
on every protocol topic the fleet uses (uplink chunks and acks, every worker's downlink
chunks, acks, schedules and versions):

* *fuzzed* messages: every field drawn at random over its whole wire type (ids, clocks,
  ranges, scales with NaN and infinities, payload bytes) and a random 16-byte tag;
* *unauthenticated* messages: plausible protocol messages (a real worker as sender, sane
  ranges) with no tag at all.

A node with a fleet key must drop and count every one of them before its engine sees it.
"""

from __future__ import annotations

import random
import time

import numpy as np
from rog_ros.nodes.routing import DOWNLINK_TYPES, UPLINK_TYPES
from rog_ros.protocol.messages import RowChunk, RowVersions, Schedule, SERVER, TransferAck
from rog_ros.transport.topics import DEFAULT_TOPIC

RATE_HZ = 100.0          # hostile messages per second (the nodes must keep training)


def _topics(workers: int) -> list:
    """(relative topic, message type) for every protocol topic of the fleet."""
    out = [(f'up/{DEFAULT_TOPIC[t]}', t) for t in UPLINK_TYPES]
    out += [(f'w{r}/{DEFAULT_TOPIC[t]}', t) for r in range(workers) for t in DOWNLINK_TYPES]
    return out


def _i64(rng) -> int:
    return rng.choice([rng.randint(-2 ** 63, 2 ** 63 - 1), rng.randint(-3, 3),
                       rng.randint(0, 2 ** 31)])


def _u64(rng) -> int:
    return rng.choice([rng.randint(0, 2 ** 64 - 1), rng.randint(0, 3)])


def _u32s(rng, n) -> np.ndarray:
    return np.array([rng.randint(0, 2 ** 32 - 1) for _ in range(n)], dtype=np.uint32)


def _f32s(rng, n) -> np.ndarray:
    pool = [float('nan'), float('inf'), -float('inf'), 0.0, 1e38, -1.0]
    return np.array([rng.choice(pool + [rng.uniform(-10, 10)]) for _ in range(n)],
                    dtype=np.float32)


def fuzzed(msg_type: str, rng: random.Random):
    """Return a message of ``msg_type`` with every field random over its wire type."""
    common = {'incarnation': _u64(rng), 'target_incarnation': _u64(rng),
              'auth_seq': _u64(rng), 'auth_tag': bytes(rng.getrandbits(8) for _ in range(16)),
              'schema_version': rng.choice([2, 2, 2, rng.randint(0, 65535)])}
    if msg_type == 'RowChunk':
        return RowChunk(transfer_id=_i64(rng), seq=_i64(rng), sender=_i64(rng),
                        receiver=_i64(rng), kind=_i64(rng), clock=_i64(rng), flags=_i64(rng),
                        codec=_i64(rng), row_ranges=_u32s(rng, rng.randint(0, 8)),
                        frag_offset=_i64(rng), tensor_ids=_u32s(rng, rng.randint(0, 4)),
                        scales=_f32s(rng, rng.randint(0, 4)),
                        payload=bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300))),
                        rate_bps=rng.choice([float('nan'), -1.0, 1e300]), **common)
    if msg_type == 'TransferAck':
        return TransferAck(transfer_id=_i64(rng), sender=_i64(rng), receiver=_i64(rng),
                           seq=_i64(rng), final=rng.random() < 0.5,
                           bytes_received=_i64(rng),
                           chunk_ranges=_u32s(rng, rng.randint(0, 8)),
                           receive_time=rng.choice([float('nan'), -1e9, 0.0]), **common)
    if msg_type == 'Schedule':
        return Schedule(worker=_i64(rng), clock=_i64(rng),
                        push_deadline_s=rng.choice([float('nan'), float('inf'), -5.0, 1e9]),
                        compute_sleep_s=rng.choice([float('nan'), 1e9, 0.0]),
                        urgent_rows=_u32s(rng, rng.randint(0, 6)), stop=rng.random() < 0.5,
                        checkpoint_transfer=_i64(rng), **common)
    n = rng.randint(0, 6)
    return RowVersions(transfer_id=_i64(rng), receiver=_i64(rng), n_workers=_i64(rng),
                       run_starts=_u32s(rng, n), run_lengths=_u32s(rng, n),
                       versions=np.array([rng.randint(-2 ** 31, 2 ** 31 - 1)
                                          for _ in range(rng.randint(0, 12))], dtype=np.int32),
                       staleness_slack=np.array([rng.randint(0, 65535)
                                                 for _ in range(rng.randint(0, 6))], np.uint16),
                       part=rng.choice([0, rng.randint(0, 3), rng.randint(0, 65535)]),
                       parts=rng.choice([0, rng.randint(1, 4), rng.randint(0, 65535)]),
                       **common)


def unauthenticated(msg_type: str, topic: str, workers: int, rng: random.Random):
    """Return a plausible message for ``topic`` with no authentication tag."""
    rank = int(topic[1:].split('/')[0]) if topic.startswith('w') else rng.randrange(workers)
    tid = rng.randint(1, 50)
    if msg_type == 'RowChunk':
        up = topic.startswith('up/')
        return RowChunk(transfer_id=tid, seq=0, sender=rank if up else SERVER,
                        receiver=SERVER if up else rank, kind=0 if up else 1,
                        clock=rng.randint(1, 20), flags=1)
    if msg_type == 'TransferAck':
        up = topic.startswith('up/')
        return TransferAck(transfer_id=tid, sender=rank if up else SERVER,
                           receiver=SERVER if up else rank, seq=0, final=True)
    if msg_type == 'Schedule':
        return Schedule(worker=rank, clock=rng.randint(1, 20), push_deadline_s=-1.0, stop=True)
    return RowVersions(transfer_id=tid, receiver=rank, n_workers=workers)


def flood(domain: int, namespace: str, workers: int, seconds: float, seed: int = 0,
          rate_hz: float = RATE_HZ) -> dict:
    """
    Publish hostile messages on the fleet's topics for ``seconds``; return counts by kind.

    Waits (up to 20 s) until every topic has its subscriber, so that every message published
    reaches a node (reliable topics deliver to matched readers).
    """
    from rog_ros.transport.cyclone_config import config_path, file_uri
    from rog_ros.transport.dds_bus import DdsBus
    rng = random.Random(seed)
    sent = {'fuzzed': 0, 'unauthenticated': 0}
    topics = _topics(workers)
    bus = DdsBus(namespace=namespace, domain_id=domain,
                 config=file_uri(config_path('loopback')), node_name='rog_chaos_flood')
    try:
        for topic, _ in topics:
            bus.advertise(topic)
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline and any(bus.matched(t) == 0 for t, _ in topics):
            time.sleep(0.05)
        end = time.monotonic() + seconds
        nxt = time.monotonic()
        while time.monotonic() < end:
            topic, msg_type = rng.choice(topics)
            if rng.random() < 0.5:
                bus.publish(topic, fuzzed(msg_type, rng))
                sent['fuzzed'] += 1
            else:
                bus.publish(topic, unauthenticated(msg_type, topic, workers, rng))
                sent['unauthenticated'] += 1
            nxt += 1.0 / rate_hz
            time.sleep(max(0.0, nxt - time.monotonic()))
        time.sleep(0.5)      # let the last samples arrive before the bus goes
    finally:
        bus.close()
    return sent
