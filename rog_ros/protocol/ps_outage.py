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
Outage-aware RSP: a robot whose link holds the fleet is let go (DESIGN section 4).

The server measures the fleet's iteration time (median push period of the robots that
count); a robot whose rows hold a stalled pull for ``outage_bound`` of those is suspended for
its link (``MembershipMixin.suspend``). Its late pushes are applied at ``late_weight``, the
others' at ``outage_scale`` (the mean over the robots that count), and the difference goes to
the conservation ledger ``discarded``. When every robot that counts has trained its budget,
one still out for its link stops instead of training on alone.

``OutageAwareMixin`` is one part of ``ServerEngine`` (``ps.py``) and works on its state.
"""

from __future__ import annotations

import math

from rog_ros.core.atp import Smoothed
from rog_ros.protocol.actions import Log
import torch

PACE_OUTLIER = 4.0
"""A push period this many times off a robot's pace is not taken at face value."""


class OutageAwareMixin:
    """Outage watch, late weights and outage rescaling of a ``ServerEngine``."""

    def _init_outage(self, n_workers: int, track_conservation: bool = False) -> None:
        self.iter_est = [Smoothed() for _ in range(n_workers)]   # seconds between pushes
        self._last_push_at: list[float | None] = [None] * n_workers
        self.last_push_weight = 1.0   # factor of the push applied last (late_weight x
        #                               outage_scale)
        # float64 [P]: (1 - weight) x lr/N x push, signed (a rescaled push adds mass); kept
        # only with ``track_conservation`` (tests), else None
        self.track_conservation = bool(track_conservation)
        self.discarded: torch.Tensor | None = None
        self.outage_suspensions = 0
        self.too_slow_suspensions = 0     # ... of them for a link too slow for any slack
        self._outage_from: dict[int, float] = {}   # stalled worker -> watch restarted at
        self._too_slow: set[int] = set()   # out for a link too slow for any slack: runs free
        self.weighted_pushes = 0
        self.rescaled_pushes = 0      # active pushes applied at lr/(N - k) (outage_scale)

    def _fleet_finished(self) -> bool:
        """
        Tell whether every worker that counts has trained its budget.

        Then the run's model is final, and a robot still suspended for its link stops at its
        next pull instead of training on: alone (readmitted against no one) it would move the
        shared model toward its own data for as long as its slow link takes to finish its
        budget (EACOL on a real testbed log: two robots out from iteration 5 went on for
        214 s after the others finished, and the final accuracy fell from 0.448 to 0.351).
        A robot suspended as absent (crashed, silent) is membership's: it comes back, is
        readmitted and finishes, as before.
        """
        act = self.active_workers()
        return self.max_iterations is not None and bool(act) and all(self.stopped[a] for a in act)

    def _fleet_clock(self) -> int:
        """Newest clock among the active workers still training (the fleet's clock)."""
        clocks = [self.clock[a] for a in self.active_workers() if not self.stopped[a]]
        return max(clocks) if clocks else max(self.clock)

    def late_weight(self, worker: int, clock: int) -> float:
        """
        Weight of a push of ``worker`` made at ``clock`` (outage-aware RSP, DESIGN section 4).

        ``tau = fleet clock - clock`` is its staleness. Within its bound ``S + slack`` (what
        RSP admits anyway; slack 0 unless it has straggler slack) the weight is 1; beyond it
        ``1 / (1 + tau - S - slack)`` (cf. FLEET's Lambda(tau)): a robot back from a 60 s
        outage adds its stale gradients at a fraction, not in full. Only pushes of workers
        suspended for a dead link are weighted; the rest of such a push is discarded on purpose
        and recorded in ``discarded`` (the conservation ledger).
        """
        if (not self.policy.outage_aware or self.active[worker]
                or self.suspended_reason.get(worker) != 'link'):
            return 1.0
        excess = (self._fleet_clock() - int(clock) - self.policy.staleness
                  - self._own_slack(worker))
        return 1.0 if excess <= 0 else 1.0 / (1.0 + excess)

    def _runs_free(self, r: int) -> bool:
        """
        Tell whether worker r, suspended for its link, is not held to the staleness bound.

        Every robot out for its link with ``SyncPolicy.async_when_out``; with
        ``free_stragglers``, a robot out because its link is too slow for any slack
        (``_too_slow_for_slack``). The worker learns it from the pulls (``FLAG_FREE``).

        Nobody waits for a robot out for its link, and it need not wait for anything either
        (``SyncPolicy.async_when_out``). Held to its own check, each catch-up to the fleet's
        clock made every row it holds and every row it owns stale at once: its pulls and its
        pushes carried the whole model, so on a slow link each iteration took several times
        longer, and its pushes, made further behind the fleet, were weighted down further
        (EACOL on per-robot testbed logs: robot 0 at 5.9 Mbit/s pushed every 22 s at weights
        0.07-0.33, 7 pushes' worth in a run the others did 80 in). Free, its pulls carry the
        MTA prefix of its priority order (its stalest rows first, then by magnitude) and its
        pushes what ATP sends. It returns (``_maybe_readmit``) once every row of its column
        is within its bound of the fleet's clock, that is once its link has kept the
        fleet's pace for about S iterations.
        """
        return (not bool(self.active[r]) and self.suspended_reason.get(r) == 'link'
                and (self.policy.async_when_out or r in self._too_slow))

    def _note_push_period(self, worker: int, period: float) -> None:
        """
        Fold one push-to-push period of ``worker`` into its pace (``iter_est``).

        A period more than ``PACE_OUTLIER`` times the pace so far counts as that much: a push
        after a long hold (an outage) must not inflate the fleet's pace. The first period is
        the one exception the other way round: it holds the robot's start-up (the first pull
        of the whole model, waiting for the fleet to form, warming up), so when the second is
        ``PACE_OUTLIER`` times shorter the pace starts again from the second. Seeded with the
        start-up, the pace stayed several times too slow for a dozen pushes (EWMA 0.3), and so
        did the outage bound: a robot whose link was dead from the start held the others for
        2.0 s on an idle machine where the bound is 0.2 s, and past a 6 s outage on a loaded
        one (the chaos link-outage scenario).
        """
        est = self.iter_est[worker]
        if est.samples == 1 and est.value > PACE_OUTLIER * period:
            est = self.iter_est[worker] = Smoothed(est.alpha)
        est.update(min(period, PACE_OUTLIER * est.value) if est.samples else period)

    def _free_share(self, r: int, now: float | None, t_it: float) -> float:
        """
        Share of a fleet iteration's pushes that worker r, running free, still makes.

        Its push period (the smoothed one, or the time since its last push if longer: a
        dead link pushes nothing) against the fleet's iteration time ``t_it``, at most 1; 0
        for a robot not running free, or without a time to measure against.
        """
        if now is None or not self._runs_free(r):
            return 0.0
        last = self._last_push_at[r]
        if t_it <= 0 or last is None:
            return 0.0
        period = max(self.iter_est[r].value, now - last)
        return min(1.0, t_it / period) if period > 0 else 1.0

    def outage_scale(self, worker: int, now: float | None = None) -> float:
        """
        Factor on an active ``worker``'s push while others are suspended for a dead link.

        Every push is applied at lr/N, so with k of N robots out the fleet's step per
        iteration shrinks to (N - k)/N of the synchronous one, for as long as the outage
        lasts (on MPCOL ``outdoors`` a robot can be out for most of a run). N / (N - k) makes
        it the mean over the robots that count, as synchronous SGD with backup workers
        averages the gradients that arrived (Chen et al., 2016). The suspended robots' own
        late pushes keep their ``late_weight`` at lr/N. Workers suspended as absent (crashed,
        silent) are not counted out: that is membership, not a link outage. A robot running
        free (``async_when_out``) still pushes: it counts out only by the share of the
        fleet's pushes it no longer makes (``_free_share``, from its push period at ``now``),
        or the others' step would be raised for gradients that still arrive (EACOL on
        per-robot testbed logs: three robots out but pushing, the fourth's pushes applied at
        4 x, its label shards dominated the model).
        """
        if (not self.policy.outage_aware or not self.policy.outage_rescale
                or not self.active[worker]):
            return 1.0
        out_for_link = [r for r, why in self.suspended_reason.items()   # O(suspended)
                        if why == 'link' and not self.active[r]]
        if not out_for_link:
            return 1.0
        t_it = (self.iteration_time() if self.policy.async_when_out or self._too_slow
                else 0.0)   # (sorts N)
        out = sum(1.0 - self._free_share(r, now, t_it) for r in out_for_link)
        return self.n / (self.n - out) if 0 < out < self.n else 1.0

    def _out_for_link(self) -> int:
        """Robots suspended now because their link could not keep the fleet's pace."""
        return sum(1 for r, why in self.suspended_reason.items()     # O(suspended), not O(N)
                   if why == 'link' and not self.active[r])

    def iteration_time(self) -> float:
        """Return the fleet's iteration time: median push period of active workers."""
        vals = sorted(self.iter_est[a].value for a in self.active_workers()
                      if self.iter_est[a].samples and not self.stopped[a])
        return vals[len(vals) // 2] if vals else 0.0

    def _outage_deadline(self) -> float | None:
        """When the oldest stall outlasts the outage bound (None: no outage watch)."""
        if not self.policy.outage_aware or not self.stall_since or self.slots is not None:
            return None
        t_it = self.iteration_time()
        if t_it <= 0:
            return None
        return min(self._watch_start(r) for r in self.stall_since) + \
            self.policy.outage_bound * t_it

    def _watch_start(self, r: int) -> float:
        return max(self.stall_since[r], self._outage_from.get(r, -math.inf))

    def _outage_check(self, now: float) -> list:
        """
        Suspend the workers that have held a stalled worker longer than the outage bound.

        The bound is ``outage_bound`` x the fleet's iteration time (measured, per worker, from
        its push period). A worker whose rows block an active worker's pull that long has a
        link that cannot deliver its mandatory rows in time (a dead or near-dead link, or a
        pull to it that does not get through): it is suspended (reason ``link``) through the
        same path as absence, keeps computing and pushing, and is re-admitted once its rows
        are within the bound again.
        """
        deadline = self._outage_deadline()
        if deadline is None or now < deadline:
            return []
        bound = self.policy.outage_bound * self.iteration_time()
        out = []
        self._outage_from = {r: t for r, t in self._outage_from.items() if r in self.stall_since}
        for r in sorted(self.stall_since):
            if r not in self.stall_since:
                continue                   # a suspension just now served it
            t0 = self._watch_start(r)
            if now < t0 + bound:           # the very sum next_wakeup returned (no livelock)
                continue
            self._outage_from[r] = now     # looked at now: next look one bound later
            if not self.active[r] or r not in self.pending:
                continue
            pairs = self.versions.violating_pairs(self.pending[r], self._bounds(r),
                                                  self.active)
            for s in sorted(set(pairs[:, 1].tolist())):
                if s == r or not self.active[s] or self.stopped[s]:
                    continue
                if int(self.active.sum()) <= self.min_workers:
                    break
                self.outage_suspensions += 1
                self._hold_out(s, now, bound)
                out += self.suspend(s, now, 'link')
                out.append(Log('outage_suspend', now - t0, s, {
                    'held': r, 'bound_s': bound, 'clock': self.clock[s],
                    'fleet_clock': self._fleet_clock()}))
        return out
