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
FLOWN as Rog's evaluation uses it: estimate-then-schedule whole-model transfers.

specs/rog.md 7.3: the server owns K concurrent transfer slots (artifact: 2) and a FIFO queue of
workers asking to push or pull. When a slot frees, a worker at the staleness limit
(``c_r <= max_s c_s - S``) goes first; otherwise the worker with the highest *estimated*
bandwidth (netmon's report, taken before the transfer). The schedule is fixed at decision time
and there is no explicit SSP wait: waiting comes from slot arbitration alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from rog_ros.protocol.policies.base import SyncPolicy


def flown(staleness: int = 4, **overrides) -> SyncPolicy:
    return SyncPolicy(**{'name': f'flown:{staleness}', 'staleness': staleness,
                         'whole_model': True, 'mta_override': 1.0, 'balance': 'none',
                         'scheduler': 'flown', 'slots': 2, **overrides})


@dataclass
class _Request:
    seq: int
    worker: int
    kind: str          # 'push' or 'pull'
    clock: int
    since: float


class SlotScheduler:
    """K transfer slots, FIFO queue, laggards first, then highest estimated bandwidth."""

    def __init__(self, slots: int, staleness: int):
        if slots < 1:
            raise ValueError(f'FLOWN needs at least one slot, got {slots}')
        self.slots, self.staleness = int(slots), int(staleness)
        self.queue: list[_Request] = []
        self.active: set[tuple[int, str]] = set()
        self._seq = 0

    def request(self, worker: int, kind: str, clock: int, now: float) -> None:
        """
        Queue a transfer (idempotent while queued: a repeated request keeps its place).

        A request may arrive while the same worker's previous transfer of that kind still
        holds a slot (e.g. its final ack is late); it waits until that slot is released.
        """
        if any(q.worker == worker and q.kind == kind for q in self.queue):
            return
        self._seq += 1
        self.queue.append(_Request(self._seq, worker, kind, clock, now))

    def release(self, worker: int, kind: str) -> None:
        self.active.discard((worker, kind))

    def grant(self, now: float, clocks: list, bandwidth: list) -> list:
        """
        Fill free slots; return [(worker, kind, waited_s, clock)] in grant order.

        ``clock`` is the one the request was made at: a grant names the transfer it answers.
        """
        out = []
        while len(self.active) < self.slots:
            ready = [q for q in self.queue if (q.worker, q.kind) not in self.active]
            if not ready:
                break
            limit = max(clocks) - self.staleness
            lagging = [q for q in ready if clocks[q.worker] <= limit]
            if lagging:
                pick = lagging[0]
            else:
                pick = max(ready, key=lambda q: (bandwidth[q.worker], -q.seq))
            self.queue.remove(pick)
            self.active.add((pick.worker, pick.kind))
            out.append((pick.worker, pick.kind, now - pick.since, pick.clock))
        return out
