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
Straggler slack: extra staleness for a robot whose link holds the others chronically.

Outage-aware RSP suspends a robot whose link holds a stalled robot *continuously* for
``outage_bound`` fleet iterations: a dead link. A slow link that is not dead (a robot at the
edge of the access point's range: 2-6 Mbit/s where the others have 20-100) holds the others a
few seconds in every iteration instead, and since it stretches the fleet's iteration time by
exactly what it costs, no continuous stall ever outlasts the bound (docs/scheduling.md, "A
slow link that is never an outage"). Suspending it anyway (a trigger on the share of time it
holds the others) reaches the target sooner but costs EACOL 3-4 points of final accuracy: its
contributions arrive late and damped.

Slack is the middle way (on for Rog, ``SyncPolicy.straggler_slack``; docs/scheduling.md,
"Straggler slack", has what it costs and gains): the robot stays in the staleness
check, with a larger bound ``S + slack``. Every robot's check tolerates that much more
staleness in the slow robot's column, the slow robot's own check and downlink tolerate it in
every column, and its pushes carry the smaller MTA of ``S + slack`` (the rows it must send per
iteration fall like ln(S)/S: 0.28 of the model at S = 4, 0.12 at 16), so its link needs fewer
bytes per iteration and stops setting the fleet's pace. Its contributions keep arriving,
undamped, within a bound.

The controller is additive-increase, slow-decrease on the share of the others' time a robot
held them: each stall of a pull is attributed to the robots whose rows held it, and a decaying
sum over a window of ``outage_bound`` fleet iterations, divided by the window and the number of
others, is that share (scale-free, so the stretched iteration time does not hide it). Above
``threshold`` the slack rises by ``step`` (at most once per window); below a quarter of it for
two windows it falls by one. It never rises while a robot is suspended for its link (the
server withholds leave to rise): slack quickens the fleet, and a suspended robot returns
only once its link keeps the fleet's pace. Suspension and slack share one bound: a suspended
robot with slack returns, is weighted and catches up at ``S + slack``, the bound of its
column. Soft state: a restarted server starts from zero.
"""

from __future__ import annotations

import math

from rog_ros.core.sync_constants import DEFAULT_MAX_SLACK
import torch

DEFAULT_THRESHOLD = 0.3
"""Share of the others' time a robot may hold them before its slack rises."""
DEFAULT_STEP = 2
"""Slack added per window in which the robot held the others too long."""


class StragglerSlack:
    """Per-robot extra staleness, raised for robots that hold the others (module docstring)."""

    def __init__(self, n_workers: int, threshold: float = DEFAULT_THRESHOLD,
                 max_slack: int = DEFAULT_MAX_SLACK, step: int = DEFAULT_STEP):
        if n_workers < 1:
            raise ValueError('need at least one worker')
        if not 0.0 < threshold < 1.0:
            raise ValueError(f'slack threshold must be in (0, 1), got {threshold}')
        if int(max_slack) < 0:
            raise ValueError(f'max slack must be >= 0, got {max_slack}')
        if int(step) < 1:
            raise ValueError(f'slack step must be >= 1, got {step}')
        self.threshold, self.max_slack, self.step = float(threshold), int(max_slack), int(step)
        self.slack = torch.zeros(n_workers, dtype=torch.int32)
        self._held = [0.0] * n_workers        # decayed seconds it held the others
        self._held_at = [0.0] * n_workers     # ... as of this time
        self._changed_at = [-math.inf] * n_workers
        self.raises = 0

    @property
    def granted(self) -> bool:
        """Whether some robot has slack (the checks then need the per-column path)."""
        return bool(self.slack.any())

    def bounds(self, staleness: int, receiver: int) -> torch.Tensor:
        """
        Per-column staleness bounds ``[N]`` for ``receiver``'s check.

        Column s tolerates ``S + slack[s]`` (s's link is slow), and a robot with slack of its
        own tolerates it in every column (its downlink is the same slow link).
        """
        return int(staleness) + torch.clamp(self.slack, min=int(self.slack[receiver]))

    def _decayed(self, s: int, now: float, window: float) -> float:
        return self._held[s] * math.exp(-max(0.0, now - self._held_at[s]) / window)

    def held(self, blockers, seconds: float, now: float, window: float) -> None:
        """Charge a pull's stall of ``seconds`` (ending ``now``) to the ``blockers``."""
        if window <= 0 or seconds <= 0:
            return
        for s in blockers:
            self._held[s] = self._decayed(s, now, window) + float(seconds)
            self._held_at[s] = now

    def share(self, s: int, now: float, window: float, others: int) -> float:
        """Share of the others' time within the last ``window`` that robot s held them."""
        if window <= 0 or others < 1:
            return 0.0
        return self._decayed(s, now, window) / (window * others)

    def update(self, now: float, window: float, others: int, candidates,
               may_raise=None) -> list:
        """
        Raise or lower the candidates' slack; return ``(robot, new slack, share)`` changes.

        ``window`` is ``outage_bound`` fleet iterations (seconds); ``others`` how many robots
        a robot can hold (the active ones but itself); ``may_raise`` the candidates whose
        slack may rise (those held back by their link; None: all).
        """
        if window <= 0:
            return []
        changes = []
        for s in candidates:
            share = self.share(s, now, window, others)
            e = int(self.slack[s])
            since = now - self._changed_at[s]
            if (share > self.threshold and e < self.max_slack and since >= window
                    and (may_raise is None or s in may_raise)):
                e = min(self.max_slack, e + self.step)
                self.raises += 1
            elif share < self.threshold / 4 and e > 0 and since >= 2 * window:
                e -= 1
            else:
                continue
            self.slack[s] = e
            self._changed_at[s] = now
            changes.append((s, e, share))
        return changes


def slack_summary(slack) -> dict:
    """Return a run summary's slack fields: raises and final slack per robot (None: none)."""
    if slack is None:
        return {}
    return {'slack_raises': slack.raises, 'slack_final': slack.slack.tolist()}
