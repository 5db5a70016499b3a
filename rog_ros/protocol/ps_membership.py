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
Who counts in the parameter server's staleness check (DESIGN section 10, docs/faults.md).

A worker silent for ``absence_timeout_s`` is suspended (reason ``absent``); outage-aware RSP
suspends one whose link holds the others (reason ``link``, ``ps_outage.py``). A suspended
worker's version column is ignored by every check; it keeps pushing and pulling and is
readmitted once its rows are within its bound again, after a backoff that doubles for a
worker that flaps. Pulls are served only while ``min_workers`` workers count (the quorum).

``MembershipMixin`` is one part of ``ServerEngine`` (``ps.py``) and works on its state.
"""

from __future__ import annotations

import math

from rog_ros.protocol.actions import Log
import torch

# Readmission backoff (``SyncPolicy.readmit_backoff``): a suspension within FLAP_WINDOW
# outage bounds of the worker's readmission is a flap; the k-th flap in a row keeps it out
# for 2**k bounds (at most 2**FLAP_MAX_DOUBLINGS) before it may be readmitted.
FLAP_WINDOW = 4.0
FLAP_MAX_DOUBLINGS = 5


class MembershipMixin:
    """Suspension, readmission (with backoff) and the quorum of a ``ServerEngine``."""

    def _init_membership(self, n_workers: int, absence_timeout_s: float | None,
                         min_workers: int) -> None:
        self.absence_timeout_s = absence_timeout_s
        self.min_workers = int(min_workers)
        self.active = torch.ones(n_workers, dtype=torch.bool)
        self.suspended_reason: dict[int, str] = {}
        self.absent_at: list[float | None] = [None] * n_workers   # absence deadlines
        self.last_heard: list[float | None] = [None] * n_workers  # last message admitted
        self._absence_unarmed = False   # restored: deadlines to set at the first look
        self._readmitted_at: dict[int, float] = {}  # readmission backoff: when, how many
        self._flaps: dict[int, int] = {}            # quick re-suspensions in a row, and the
        self._hold_until: dict[int, float] = {}     # earliest readmission that follows

    def _heard(self, r: int, now: float) -> list:
        self.last_heard[r] = now
        if self.absence_timeout_s is not None:
            self.absent_at[r] = now + self.absence_timeout_s
        if not self.active[r] and self.suspended_reason.get(r) in ('absent', 'link'):
            return self._maybe_readmit(r, now)
        return []

    def _arm_absence(self, now: float) -> None:
        """
        Set the absence deadline of every worker a restored server has not heard yet.

        Deadlines are set when a worker is heard and are not checkpointed: a robot that went
        silent before a server restart (frozen, powered off) was never suspended as absent
        by the restored server, so the others' run never ended. Its silence counts from the
        restored server's first look.
        """
        if not self._absence_unarmed:
            return
        self._absence_unarmed = False
        if self.absence_timeout_s is None:
            return
        for r in range(self.n):
            if self.absent_at[r] is None and not self.stopped[r]:
                self.absent_at[r] = now + self.absence_timeout_s

    def _absence_arm_deadline(self) -> float | None:
        """Return 0.0 (at once) while a restored server's absence deadlines are to be set."""
        return 0.0 if self._absence_unarmed and self.absence_timeout_s is not None else None

    def _absence_watch(self) -> list:
        """Workers whose silence counts: active, not done, not held by us (a pull stall)."""
        return [r for r, t in enumerate(self.absent_at)
                if t is not None and self.active[r] and not self.stopped[r]
                and r not in self.pending]

    def active_workers(self) -> list:
        """Ranks that count in the staleness rules now."""
        return torch.nonzero(self.active).reshape(-1).tolist()

    def suspend(self, worker: int, now: float, reason: str) -> list:
        """
        Suspend ``worker`` from the staleness rules (absent, or its link is dead).

        The others' RSP/SSP checks ignore its version column from now on; its own pushes are
        still applied and its pulls served. It is re-admitted by ``readmit`` or, for
        ``reason='absent'``, automatically once it is heard again and its rows are within the
        staleness bound of the active workers. Returns the actions (stalls that clear now).
        """
        if not 0 <= worker < self.n:
            raise ValueError(f'no worker {worker}')
        if reason != 'link':
            # silent or crashed: membership, not its link, keeps it out now (also when it was
            # already out as too slow: its readmission must not wait for the pace of a link
            # measured before it went silent)
            self._too_slow.discard(worker)
        if not self.active[worker]:
            self.suspended_reason[worker] = reason
            return []
        self.active[worker] = False
        self.suspended_reason[worker] = reason
        out = [Log('worker_suspended', 1.0, worker,
                   {'reason': reason, 'active': self.active_workers()})]
        if not self._quorum():
            out.append(Log('quorum_lost', float(int(self.active.sum())), -1,
                           {'min_workers': self.min_workers, 'active': self.active_workers(),
                            'hint': 'training waits until enough workers are back'}))
        for r in sorted(self.pending):
            out += self._try_serve(r, now)
        return self._out(out)

    def readmit(self, worker: int, now: float) -> list:
        """Count ``worker`` in the staleness rules again (it must not block the others)."""
        if not 0 <= worker < self.n:
            raise ValueError(f'no worker {worker}')
        if self.active[worker]:
            return []
        self.active[worker] = True
        self.suspended_reason.pop(worker, None)
        self._too_slow.discard(worker)
        self._readmitted_at[worker] = now
        out = [Log('worker_readmitted', 1.0, worker, {'active': self.active_workers()})]
        for r in sorted(self.pending):
            out += self._try_serve(r, now)
        return self._out(out)

    def _maybe_readmit(self, r: int, now: float) -> list:
        """
        Readmit r once its rows are within the bound of every active worker's clock.

        The bound is the one its column is checked against once it is back: ``S`` plus its
        straggler slack (a robot with slack that had to be within S to return would stay out
        while it kept the very pace the others' checks admit).
        """
        if self.active[r] or now < self._hold_until.get(r, -math.inf):
            return []
        if self.stopped[r]:
            # done training: back in the check, its rows would hold the others for ever (a
            # robot waiting for its final model, or whose stop order was lost, still pokes)
            return []
        if self.suspended_reason.get(r) == 'link' and self._fleet_finished():
            return []                 # it stops at its next pull (``_fleet_finished``)
        clocks = [self.clock[a] for a in self.active_workers() if not self.stopped[a]]
        # its own clock counts too: readmitted with rows stale by its own clock, it would
        # hold itself (the rows-within-one-worker level)
        bound = max(clocks + [self.clock[r]]) - self.policy.staleness - self._own_slack(r)
        if int(self.versions.v[:, r].min()) >= bound:
            if r in self._too_slow and not self._keeps_pace(r):
                return []             # its rows are fresh, its link is still too slow
            return self.readmit(r, now)
        return []

    def _hold_out(self, s: int, now: float, bound: float) -> None:
        """
        Readmission backoff: a worker suspended again soon after its readmission stays out longer.

        Readmitted as soon as its rows are fresh, a robot whose link stays poor (slow, not
        dead) holds the fleet for another ``bound`` and is suspended again, in turn, for as
        long as its link stays poor: each flap costs the fleet a bound of stall. A flap (a
        suspension within ``FLAP_WINDOW`` bounds of its readmission) doubles the time it must
        stay out before it may be readmitted (route-flap damping); a suspension after a
        longer stay in starts over. Soft state: a restarted server forgets it; a restarted
        robot does not make it forget (``_reset_worker`` keeps it: the link is the same one).
        """
        if not self.policy.readmit_backoff:
            return
        t_r = self._readmitted_at.get(s)
        flap = t_r is not None and now - t_r < FLAP_WINDOW * bound
        k = self._flaps.get(s, 0) + 1 if flap else 0
        self._flaps[s] = k
        if k:
            self._hold_until[s] = now + bound * 2 ** min(k, FLAP_MAX_DOUBLINGS)

    def _quorum(self) -> bool:
        return int(self.active.sum()) >= self.min_workers


INCOMPATIBLE_LEASES = 3
"""Leases a robot's downlink may have only readers of another build before it is given up."""


class IncompatibleWatch:
    """
    Decide when a robot that runs another rog_ros build is given up (sans-I/O).

    A robot of an older rog_ros whose message types differ reads its downlink with another
    type hash: Cyclone (with type information) does not match its reader to the server's
    writer, so nothing reaches it, and the server waited for it for ever, with one warning
    at discovery. The node reports, per robot, the GUID prefixes of the downlink readers of
    another build and whether a reader of this build is matched (:meth:`observe`); a robot
    seen with only foreign readers for ``bound_s`` (:data:`INCOMPATIBLE_LEASES` leases) is
    given up once: a ``worker_incompatible`` Log that says which participant and what to do,
    which the server takes as the robot's absence (``MembershipMixin.suspend``, reason
    ``absent``: heard again after an upgrade, it is readmitted by the absence rules).

    Parameters
    ----------
    n_workers : int
        The fleet's robots (ranks 0..n_workers-1).
    bound_s : float
        Seconds with only foreign readers before a robot is given up.

    """

    def __init__(self, n_workers: int, bound_s: float):
        if not bound_s > 0:
            raise ValueError(f'bound_s must be positive, got {bound_s}')
        self.bound_s = float(bound_s)
        self.since: list = [None] * int(n_workers)   # when only foreign readers were seen
        self.given_up: set = set()

    def observe(self, rank: int, now: float, foreign, matched: bool) -> list:
        """
        Take what the bus sees of robot ``rank`` now; return the Logs of a robot given up.

        ``foreign``: GUID prefixes of its downlink's readers of another build; ``matched``:
        a reader of this build is matched there (the robot, or a newer one, is there).
        """
        if not 0 <= rank < len(self.since):
            raise ValueError(f'no worker {rank}')
        foreign = sorted(foreign or ())
        if matched or not foreign:
            self.since[rank] = None
            if matched:
                self.given_up.discard(rank)     # upgraded: it may be given up again later
            return []
        if rank in self.given_up:
            return []
        if self.since[rank] is None:
            self.since[rank] = now
            return []
        waited = now - self.since[rank]
        if waited < self.bound_s:
            return []
        self.given_up.add(rank)
        return [Log('worker_incompatible', waited, rank, {
            'participants': foreign,
            'hint': 'it runs another rog_ros version, whose messages differ from this '
                    "server's (or it is another fleet's robot of that rank on this namespace "
                    "and ROS_DOMAIN_ID); upgrade it to this server's version (rog doctor on "
                    'the robot says which it runs); the fleet trains on without it, and takes '
                    'it back when a robot of this build is heard for that rank'})]

    def all_given_up(self, ranks) -> bool:
        """Tell whether every rank of ``ranks`` (one at least) was given up."""
        ranks = list(ranks)
        return bool(ranks) and all(r in self.given_up for r in ranks)
