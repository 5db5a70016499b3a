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
Outbox: messages waiting for their link, one FIFO per destination, shaped by a trace.

Application-level link emulation (``rog fleet`` without root): each link's token bucket
(:class:`rog_ros.net.shaper.TokenBucketShaper`, filled at the trace's rate) decides when a
message may leave; the node's loop publishes it then and sleeps until the next release in
between. The engines never wait for the network (they are sans-I/O), so shaping delays only
the bytes, exactly like a slow radio would. A link without a shaper releases at once.

Pure: times are passed in, nothing sleeps here.
"""

from __future__ import annotations

from collections import deque
import math


class Outbox:
    """
    Per-destination FIFO queues with release times.

    Parameters
    ----------
    shapers : dict, optional
        Destination (rank or SERVER) -> TokenBucketShaper; destinations not in it are unshaped.

    """

    def __init__(self, shapers=None):
        self.shapers = dict(shapers or {})
        self._queues = {}            # dest -> deque of (release_s, topic, msg)
        self.bytes_sent = {}         # dest -> bytes released so far (throughput display)

    def put(self, dest: int, topic: str, msg, now: float) -> float:
        """Queue ``msg`` for ``dest``; return its release time (inf: the link is down for good)."""
        shaper = self.shapers.get(dest)
        release = now if shaper is None else now + shaper.delay_for(msg.wire_size(), now)
        self._queues.setdefault(dest, deque()).append((release, topic, msg))
        return release

    def due(self, now: float) -> list:
        """Pop every ``(dest, topic, msg)`` whose release time has come, FIFO per destination."""
        out = []
        for dest, queue in self._queues.items():
            while queue and queue[0][0] <= now:
                _, topic, msg = queue.popleft()
                self.bytes_sent[dest] = self.bytes_sent.get(dest, 0) + msg.wire_size()
                out.append((dest, topic, msg))
        return out

    def next_release(self) -> float | None:
        """Earliest pending release time (None when empty; inf if only dead links wait)."""
        heads = [q[0][0] for q in self._queues.values() if q]
        return min(heads) if heads else None

    def pending(self, dest=None) -> int:
        """Count queued messages (for ``dest``, or all)."""
        if dest is not None:
            return len(self._queues.get(dest, ()))
        return sum(len(q) for q in self._queues.values())

    def drop(self, dest: int) -> int:
        """Forget everything queued for ``dest`` (it left the fleet); return how many."""
        queue = self._queues.pop(dest, None)
        return len(queue) if queue else 0

    def stuck(self) -> bool:
        """Tell whether something waits on a link that never comes back (trace outage)."""
        nxt = self.next_release()
        return nxt is not None and math.isinf(nxt)
