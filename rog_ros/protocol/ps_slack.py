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
Straggler slack and the too-slow rule: extra staleness for robots that hold the others.

A controller pass (throttled to a tenth of its window) raises the slack of a robot whose
link, not its computer, held the others for more than a share of the window, and lowers it
once it stops (``core/slack.py`` keeps the numbers). A robot whose link could not keep the
fleet's pace at the largest slack is let go instead and runs free (``free_stragglers``); it
is readmitted once its measured link could keep up (``TOO_SLOW_BACK``).

``SlackMixin`` is one part of ``ServerEngine`` (``ps.py``) and works on its state.
"""

from __future__ import annotations

import math

import numpy as np
from rog_ros.core.slack import StragglerSlack
from rog_ros.protocol.actions import Log
import torch

TOO_SLOW = 1.5
"""A robot whose time per iteration at the largest slack is this many times the fleet's
median runs free instead of holding the others (``SyncPolicy.free_stragglers``)."""
TOO_SLOW_BACK = 1.2
"""... and is readmitted once it needs less than this many times (hysteresis)."""


class SlackMixin:
    """Per-column staleness bounds and the slack controller of a ``ServerEngine``."""

    def _init_slack(self, n_workers: int) -> None:
        policy = self.policy
        self.slack = (StragglerSlack(n_workers, max_slack=policy.slack_max)
                      if policy.straggler_slack and not policy.whole_model
                      and policy.staleness > 0 and self.slots is None else None)
        self._blockers: dict[int, list] = {}       # stalled worker -> robots holding it
        self._slack_looked_at = -math.inf          # last controller pass (throttled)
        self._free_due: list = []           # too slow for any slack, found by the
        #                                     controller, not yet out

    def _bounds(self, r: int):
        """Staleness bound of r's check: S, or per column ``[N]`` while a robot has slack."""
        if self.slack is None or not self.slack.granted:
            return self.policy.staleness
        return self.slack.bounds(self.policy.staleness, r)

    def _own_slack(self, r: int) -> int:
        return 0 if self.slack is None else int(self.slack.slack[r])

    def _slack_window(self) -> float:
        """Return the controller's window: ``outage_bound`` fleet iterations (0 unmeasured)."""
        return self.policy.outage_bound * self.iteration_time()

    def _holding(self, r: int, c: int) -> list:
        """Active robots (other than r) whose rows hold r's pull at clock c."""
        held = self.versions.v < (c - self._bounds_tensor(r)).to(torch.int32).unsqueeze(0)
        held &= self.active.unsqueeze(0)
        held[:, r] = False
        return torch.nonzero(held.any(dim=0)).reshape(-1).tolist()

    def _bounds_tensor(self, r: int) -> torch.Tensor:
        b = self._bounds(r)
        return b if isinstance(b, torch.Tensor) else torch.full((self.n,), int(b))

    def _update_slack(self, now: float) -> list:
        """
        Raise the slack of robots that held the others too long, lower it once they stop.

        At most once per tenth of the controller's window: a pass is O(N), and per pull it
        would make the server's cost per worker-iteration grow with the fleet. No slack rises
        while a robot is suspended for its link: slack quickens the fleet, and a suspended
        robot returns only once its link keeps the fleet's pace, so a faster fleet keeps it
        out (measured on EACOL, docs/scheduling.md: two or three of four robots out for a
        third to a half of a run, their label shards learned less).
        """
        if self.slack is None:
            return []
        window = self._slack_window()
        if window <= 0 or now - self._slack_looked_at < window / 10:
            return []
        self._slack_looked_at = now
        running = [a for a in self.active_workers() if not self.stopped[a]]
        # while a robot is out for its link nobody has leave to rise: slack may only fall
        held = [] if self._out_for_link() else [
            a for a in running
            if self.slack.share(a, now, window, len(running) - 1) > self.slack.threshold]
        link_bound = self._link_bound(running) if held else set()
        self._free_due = self._too_slow_for_slack(held, link_bound, running)
        if self._free_due:
            return []               # suspended by the caller, once its pull is served
        out = []
        for s, e, share in self.slack.update(now, window, len(running) - 1, running,
                                             link_bound):
            out.append(Log('straggler_slack', float(e), s, {
                'held_share': round(share, 3), 'staleness': self.policy.staleness + e}))
        return out

    def _link_time(self, a: int, slack: int) -> float | None:
        """Seconds a's link needs for the MTA rows of ``slack``, up and down (None: unknown)."""
        up, down = self.thr_up[a].value_bps, self.thr_down[a].value_bps
        if up <= 0 or down <= 0 or not self.compute_est[a].samples:
            return None
        bits = 8.0 * self.total_row_bytes * self.policy.mta_for(slack)
        return bits / up + bits / down

    def _pace(self, a: int, slack: int) -> float | None:
        """Seconds robot a needs per iteration at ``slack``: compute, MTA rows up and down."""
        link = self._link_time(a, slack)
        return None if link is None else self.compute_est[a].value + link

    def _too_slow_for_slack(self, held: list, link_bound: set, running: list) -> list:
        """
        Robots whose link cannot keep the fleet's pace at any slack: ``(robot, pace, fleet)``.

        Slack helps a robot whose link is slow for a while: with a wider bound it carries
        fewer rows per iteration and catches up. A robot whose link needs, at the largest
        slack, ``TOO_SLOW`` times the fleet's median time per iteration or more (compute
        plus the mandatory rows up and down, at the measured throughputs) falls a bound
        behind whatever the bound, and then holds every other robot at its pace (EACOL on
        per-robot testbed logs: one robot at 1.4-3 Mbit/s iterated every 7 s against the
        others' 2.5 and held them 46-58% of their time while its slack rose to 8). Such a
        robot is suspended for its link and runs free (``_free_too_slow``). Only robots that
        do hold the others (``held``) and are slow for their link (``link_bound``) qualify,
        and only under outage-aware RSP (without it nobody is suspended for a link).
        """
        pol = self.policy
        if not (pol.free_stragglers and pol.outage_aware) or len(running) < 3 or not held:
            return []
        fleet = self._fleet_pace(running)
        if fleet is None:
            return []
        due = []
        for s in held:
            pace = self._pace_at_most_slack(s) if s in link_bound else None
            if pace is not None and pace >= TOO_SLOW * fleet:
                due.append((s, pace, fleet))
        return due

    def _pace_at_most_slack(self, s: int) -> float | None:
        """
        Seconds per iteration robot s would need at the largest slack.

        Its measured push period, scaled by what the largest slack saves in the model of
        ``_pace``: the model counts only the mandatory rows, while a push and a pull carry
        what their deadlines allow, and the measured period counts it all (a robot the model
        put at 3.4 s iterated every 7).
        """
        now_pace, most = self._pace(s, self._own_slack(s)), self._pace(s, self.policy.slack_max)
        if now_pace is None or most is None or not self.iter_est[s].samples:
            return most
        return max(most, self.iter_est[s].value * most / now_pace)

    def _keeps_pace(self, r: int) -> bool:
        """
        Tell whether robot r, out as too slow for any slack, could now keep the fleet's pace.

        Its rows keep within its bound of the fleet's clock whenever it has just pushed them,
        so that alone would readmit it at once and let it hold the others again; its link
        must also carry the mandatory rows of the largest slack, up and down at the measured
        throughputs, with its computation, in less than ``TOO_SLOW_BACK`` times the fleet's
        time (``_pace``). Not its measured push period, as when it was let go: running free,
        that stays long after its link recovered (a pull of the MTA prefix, a push of what
        ATP sends), and a robot judged by it stayed out twice as long on EACOL ``outdoors``
        (146-492 s on seed 3) and cost 1-3 points more (docs/scheduling.md).
        """
        fleet = self._fleet_pace([a for a in self.active_workers() if not self.stopped[a]])
        pace = self._pace(r, self.policy.slack_max)
        return fleet is None or pace is None or pace < TOO_SLOW_BACK * fleet

    def _fleet_pace(self, running: list) -> float | None:
        """Median of ``_pace`` over the ``running`` robots at their slack (None: unmeasured)."""
        paces = sorted(p for p in (self._pace(a, self._own_slack(a)) for a in running)
                       if p is not None)
        return paces[len(paces) // 2] if len(paces) >= 2 else None

    def _free_too_slow(self, now: float) -> list:
        """
        Suspend the robots ``_too_slow_for_slack`` found; they run free (``_runs_free``).

        Nobody waits for such a robot and it pushes at its own pace; it returns once its
        rows keep within its bound and its link could keep the pace (``_keeps_pace``). The
        readmission backoff applies as for any link suspension, and at least two robots
        stay in the check.
        """
        due, self._free_due = self._free_due, []
        out = []
        for s, pace, fleet in due:
            if not self.active[s] or int(self.active.sum()) <= max(self.min_workers, 2):
                continue
            self.outage_suspensions += 1
            self.too_slow_suspensions += 1
            self._hold_out(s, now, self.policy.outage_bound * self.iteration_time())
            self._too_slow.add(s)
            out += self.suspend(s, now, 'link')
            out.append(Log('too_slow_for_slack', pace, s, {
                'fleet_pace_s': round(fleet, 3), 'slack': self._own_slack(s),
                'clock': self.clock[s], 'fleet_clock': self._fleet_clock()}))
        return out

    def _link_bound(self, running: list) -> set:
        """
        Robots that trail the fleet because of their link, not their computer.

        Slack lowers the bytes a robot must move per iteration; it does nothing for a slow
        computer but let the others run further ahead of it. A robot qualifies when the time
        its link needs for an iteration's mandatory rows (up and down, at the measured
        throughputs) exceeds the fleet's median by more than its computation time exceeds
        the median computation time.
        """
        if len(running) < 2:
            return set()
        link, comp = {}, {}
        for a in running:
            t = self._link_time(a, 0)
            if t is None:
                continue
            link[a] = t
            comp[a] = self.compute_est[a].value
        if len(link) < 2:
            return set()
        mid_link = sorted(link.values())[len(link) // 2]
        mid_comp = sorted(comp.values())[len(comp) // 2]
        return {a for a in link if link[a] - mid_link > max(0.0, comp[a] - mid_comp)}

    def _set_bounds(self, r: int, dl) -> None:
        """
        Fix the slack a downlink's RowVersions carries and the bounds its check uses.

        The worker checks with the slack of the versions it applied, the server with the
        bounds of the same downlink: both sides decide on the same numbers even when the
        slack changes meanwhile.
        """
        if self.slack is None or not self.slack.granted:
            return
        dl.slack = self.slack.slack.numpy().astype(np.uint16)
        dl.bounds = self.slack.bounds(self.policy.staleness, r)
