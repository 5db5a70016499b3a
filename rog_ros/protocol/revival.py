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
Revival: telling a live run that was retired by mistake from a dead run's late messages.

Incarnations (DESIGN section 10) are random, not ordered. When two runs of one process race
(a run dies while it rejoins, its successor is already up), a late message of the dead run
can make a peer take it for the newer run and retire the live one, whose messages the peer
would then refuse for ever. Server and worker both guard against it the same way: a dead
run's late copies all arrive within a network delay of its death, while a live run keeps
poking (JOINs, ENDs, slot requests, answers) once per poke interval. A retired run whose
messages keep arriving for ``REVIVE_AFTER_POKES`` poke intervals, more than that many of
them, is the live one and is taken back.
"""

from __future__ import annotations

from typing import Callable, Hashable

from rog_ros.protocol.actions import Log

REVIVE_AFTER_POKES = 2
"""How many poke intervals (and more messages than that) a retired run must keep speaking."""

POKE_END_TIMEOUTS = 4
"""A waiting worker repeats its END (or JOIN, or slot request) every this many end timeouts;
the server serves a pull again to a worker that still waits after as long."""


def shortest_sound_absence_s(end_timeout_s: float) -> float:
    """
    Return the shortest absence timeout that a live, waiting worker always outlasts.

    A worker that waits for its pull sends nothing but its poke, once per poke interval; an
    absence timeout below two of them suspends such a worker and readmits it at its next poke,
    over and over (harmless for the model, but every turn is an event in the log).
    """
    return 2 * POKE_END_TIMEOUTS * float(end_timeout_s)


class RevivalWatch:
    """Count the messages of retired runs and say when one of them has proved it is alive."""

    def __init__(self) -> None:
        self._seen: dict = {}      # retired run key -> [first message since, messages]

    def alive(self, key: Hashable, now: float, end_timeout_s: float) -> bool:
        """
        Record one message of retired run ``key``; True once that run has proved it lives.

        The count starts at the run's first message after it was retired and is dropped
        once the run is taken back, so a run retired again starts over.
        """
        seen = self._seen.setdefault(key, [now, 0])
        seen[1] += 1
        span = REVIVE_AFTER_POKES * POKE_END_TIMEOUTS * end_timeout_s
        if now - seen[0] < span or seen[1] <= REVIVE_AFTER_POKES:
            return False
        del self._seen[key]
        return True

    def keep(self, still_retired: Callable[[Hashable], bool]) -> None:
        """Forget the counts of runs that are no longer retired (taken back or pruned)."""
        self._seen = {k: v for k, v in self._seen.items() if still_retired(k)}


class DuplicateRanks:
    """
    Tell two live processes of one robot (a rank given twice) from a robot that restarted.

    A dead run is never taken back (its late messages stop within a network delay), so when
    a revival retires the very run an earlier revival of that robot took back, and takes
    back the run that one retired, both runs keep speaking: two processes run as that robot,
    and each is taken back from the other in turn. Rog's server and the push systems'
    transfers both ask here, so that both say it the same way, once per robot.
    """

    def __init__(self) -> None:
        self.ranks: set = set()      # robots two live processes were seen to share
        self._last: dict = {}        # robot -> (run taken back, run retired), its last revival

    def revived(self, rank: int, run: int, retired: int) -> list:
        """Note that ``rank``'s run ``run`` was taken back from ``retired``; the log, once."""
        ping_pong = self._last.get(rank) == (retired, run)
        self._last[rank] = (run, retired)
        if not ping_pong or rank in self.ranks:
            return []
        self.ranks.add(rank)
        return [Log('duplicate_rank', 1.0, rank, {'runs': [retired, run]})]
