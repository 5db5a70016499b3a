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
SyncPolicy: the knobs that distinguish BSP, SSP and Rog on the shared engines.

specs/rog.md 4.9: SSP is the Rog algorithm with one row per model, MTA = 1 and no deadline;
BSP is SSP with S = 0. Keeping one engine pair makes the comparison strict: same codec, same
plumbing, same accounting; only the synchronisation unit and the scheduling differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rog_ros.core import mta as mta_rules
from rog_ros.core.sync_constants import CONVENTIONS, DEFAULT_MAX_SLACK
from rog_ros.protocol.messages import MAX_SLACK
from rog_ros.protocol.policy_defaults import (  # noqa: F401 - re-exported
    DEFAULT_DEADLINE_FLOOR, DEFAULT_OUTAGE_BOUND, DEFAULT_RTT_FLOOR, OUTAGE_BOUND_RANGE)

if TYPE_CHECKING:                       # pragma: no cover - annotations only
    from rog_ros.core.rows import RowLayout

BALANCE_MODES = ('deadline', 'budget', 'none')
CODEC_NAMES = ('defsgdm', 'defsgdm-tensor')
MOMENTUM_RELEASE_WINDOW = (1 / 3, 1 / 2)
"""Fractions of the iteration budget between which ``SyncPolicy.momentum_at`` releases the
momentum compensation (after the MPCOL/EACOL targets, which fall in the first fifth to third)."""


@dataclass(frozen=True)
class SyncPolicy:
    name: str                       # label used in reports ('rog:4', 'ssp:4', 'bsp')
    staleness: int                  # threshold S: a worker at clock c needs c - v[i][s] <= S
    whole_model: bool               # True: one row per model (SSP/BSP granularity)
    mta_rule: str = 'paper_table'   # see rog_ros.core.mta.RULES
    mta_override: float | None = None  # force the MTA fraction (1.0 = send every row)
    convention: str = 'gt'          # 'gt': trigger at staleness S+1 (SSP-consistent)
    balance: str = 'deadline'       # 'deadline': MTA-time; 'budget': q x MTA rows; 'none'
    ordering: bool = True           # importance ordering (False: ablation, row-id order)
    use_magnitude: bool = True      # gradient magnitude in priorities (False: ablation)
    # The MTA-time deadline is at least max(deadline_floor x measured compute time,
    # rtt_floor x the link's measured round trip) after a transfer starts (``floor_s``).
    # A transfer pays its round trips (first ack, END and final ack) whatever it carries, so
    # on a latency-bound link (DDS between loaded processes: 45 ms; Wi-Fi with retries) a
    # deadline of a few milliseconds saves almost no time and withholds most rows, while on
    # a bandwidth-bound link (10 ms round trip, 100 ms of bytes) the paper's deadline saves
    # whole round trips' worth of time. One default for simulator and fleets, chosen by
    # measurement (docs/scheduling.md); deadline_floor 0 is the paper's rule.
    deadline_floor: float = DEFAULT_DEADLINE_FLOOR
    rtt_floor: float = DEFAULT_RTT_FLOOR
    codec: str = 'defsgdm'          # 'defsgdm': one scale per tensor row inside the row's
    #                                 bytes (codec 2); 'defsgdm-tensor': one per tensor (codec
    #                                 1, the artifact's; the two fields below refine it)
    chunk_scales: bool = True       # defsgdm-tensor: scale per chunk and tensor, over the rows
    #                                 the chunk carries (False: one per tensor over all its
    #                                 rows, the artifact's; sent rows are under-scaled)
    scale_sent_rows: bool = False   # with chunk_scales False: per-tensor scale over the rows
    #                                 a transfer is expected to carry (experimental)
    scheduler: str = 'none'         # 'flown': server-arbitrated transfer slots
    slots: int = 2                  # FLOWN: concurrent transfers (artifact: 2)
    small_tensor_threshold: int = 1000  # tensors below this many elements form one row
    #                                  (artifact value; ConvMLP-M: 33,307 rows, 33,338 at 0)
    outage_aware: bool = False      # outage-aware RSP (DESIGN 4): a worker whose link holds
    #                                 the others longer than outage_bound x the fleet's
    #                                 iteration time is suspended from the staleness check;
    #                                 its late pushes are weighted 1 / (1 + max(0, tau - S))
    outage_bound: float = DEFAULT_OUTAGE_BOUND  # ... in fleet iteration times (median push
    #                                             period)
    readmit_backoff: bool = False   # a worker suspended for its link again soon after its
    #                                 readmission (a link that stays poor, not one that died
    #                                 and came back) stays out for a hold that doubles with
    #                                 each such flap (``ServerEngine._hold_out``)
    straggler_slack: bool = False   # a robot whose slow (not dead) link holds the others a
    #                                 large share of their time gets extra staleness instead
    #                                 of a suspension: its column tolerates S + slack and it
    #                                 pushes the smaller MTA of S + slack (``core/slack.py``;
    #                                 on for Rog, ``rog:4#straggler_slack=0`` is the ablation)
    slack_max: int = DEFAULT_MAX_SLACK  # the largest slack (12: S = 4 becomes at most 16)
    async_when_out: bool = False    # a worker suspended for its link is not held to the
    #                                 staleness bound itself: its pulls carry the MTA prefix
    #                                 of its priority order (stalest rows first) instead of
    #                                 every row its check would need, and a catch-up does not
    #                                 age its rows (its pushes stay ATP-sized); it returns
    #                                 once its link keeps the fleet's pace. Off
    #                                 (``rog:4#async_when_out=1``, measured in docs/scheduling.md;
    #                                 ``ServerEngine._runs_free``)
    free_stragglers: bool = False   # a robot that holds the others (straggler slack's
    #                                 share) on a link too slow to keep the fleet's pace even
    #                                 at the largest slack is suspended for its link and runs
    #                                 free (as ``async_when_out``, for that robot only); it
    #                                 returns once its link could keep the pace. On for Rog
    #                                 (``rog:4#free_stragglers=0`` the ablation; measured in
    #                                 docs/scheduling.md; ``ServerEngine._too_slow_for_slack``)
    outage_rescale: bool = True     # while k workers are suspended for a dead link, the
    #                                 active ones' pushes are applied at lr / (N - k) instead
    #                                 of lr / N: the mean over the robots that count, so an
    #                                 outage does not also shrink the fleet's step (with
    #                                 outage_aware only; ``ServerEngine.outage_scale``)
    overlap: bool = False           # compute the next gradient while a push and its pull
    #                                 run, when the model already satisfies RSP for it
    #                                 (``WorkerEngine._maybe_compute_ahead``). A simulator
    #                                 knob (``rog:4#overlap=1``), off for every system: a third
    #                                 shorter iterations but a fifth more of them to the target
    #                                 on MPCOL, 3.5 points lower on EACOL (docs/scheduling.md)
    late_rows: bool = False         # while a worker computes, its link is idle: send the
    #                                 rows its last push withheld then (``FLAG_LATE``), so
    #                                 they stop holding the others' staleness checks
    #                                 (``WorkerEngine._start_late_push``). On for Rog
    #                                 (``rog:4#late_rows=0`` is the ablation); whole-model
    #                                 systems withhold nothing, FLOWN's slots forbid it
    late_pulls: bool = False        # the same on the downlink: while a worker computes, the
    #                                 server sends it rows that changed since its pull
    #                                 (``FLAG_LATE`` updates, ``ServerEngine._start_late_pull``);
    #                                 the worker applies them when the computation ends, so
    #                                 its next pull carries less
    momentum_compensation: bool = True  # stale systems (S >= 1) lower the workers' explicit
    #                                     momentum by the implicit momentum of N workers'
    #                                     interleaved pushes (``explicit_momentum``)
    momentum_release: float = 0.0   # fraction of that lowering given back over the middle of
    #                                 a run whose iteration budget the worker knows (from a
    #                                 third to half of it, ``momentum_at``; the simulator passes
    #                                 it); 0 (default, every system): compensated to the end.
    #                                 A simulator experiment's knob (``rog:4#momentum_release=``):
    #                                 5/6 lifts simulated MPCOL's final accuracy but makes real
    #                                 fleets dip 3.5-4.9 points (docs/scheduling.md)

    def __post_init__(self):
        if self.staleness < 0:
            raise ValueError(f'staleness must be >= 0, got {self.staleness}')
        if self.convention not in CONVENTIONS:
            raise ValueError(f'convention must be one of {CONVENTIONS}')
        if self.balance not in BALANCE_MODES:
            raise ValueError(f'balance must be one of {BALANCE_MODES}, got {self.balance!r}')
        if self.mta_override is not None and not 0.0 < self.mta_override <= 1.0:
            raise ValueError(f'mta_override must be in (0, 1], got {self.mta_override}')
        if not 0.0 <= self.deadline_floor <= 10.0:
            raise ValueError(f'deadline_floor must be in [0, 10], got {self.deadline_floor}')
        if not 0.0 <= self.rtt_floor <= 100.0:
            raise ValueError(f'rtt_floor must be in [0, 100], got {self.rtt_floor}')
        if self.codec not in CODEC_NAMES:
            raise ValueError(f'codec must be one of {CODEC_NAMES}, got {self.codec!r}')
        if self.scheduler not in ('none', 'flown'):
            raise ValueError(f'unknown scheduler {self.scheduler!r}')
        lo, hi = OUTAGE_BOUND_RANGE
        if not lo <= self.outage_bound <= hi:
            raise ValueError(f'outage_bound must be in [{lo:g}, {hi:g}], got {self.outage_bound}')
        if not 0 <= self.slack_max <= MAX_SLACK:
            raise ValueError(f'slack_max must be in [0, {MAX_SLACK}], got {self.slack_max}')
        if not 0.0 <= self.momentum_release <= 1.0:
            raise ValueError(f'momentum_release must be in [0, 1], got {self.momentum_release}')
        if self.mta_rule not in mta_rules.RULES:
            raise ValueError(f'unknown MTA rule {self.mta_rule!r}')

    def floor_s(self, compute_s: float, round_trip_s: float) -> float:
        """Seconds an ATP transfer keeps sending optional rows at least (its deadline floor)."""
        return max(self.deadline_floor * compute_s, self.rtt_floor * round_trip_s)

    def explicit_momentum(self, momentum: float, n_workers: int) -> float:
        """
        Return the worker momentum that gives this policy the dynamics of ``momentum``.

        Asynchrony begets momentum (Mitliagkas et al., 2016): when N workers push in turn,
        each gradient is taken on a model that misses the others' pushes, and in expectation
        that adds a momentum of 1 - 1/N to whatever the workers apply. Stale-synchronous
        systems (SSP, Rog, FLOWN: S >= 1) therefore use mu_e with (1 - mu_e) = N (1 - mu),
        which keeps the product (1 - mu_e)(1 - mu_implicit) = 1 - mu, the synchronous
        optimiser's; BSP (S = 0) has no implicit part and keeps ``momentum``. Measured on
        MPCOL fleets (docs/scheduling.md): late-run accuracy dips of stale systems halve.
        """
        if not self.momentum_compensation or self.staleness == 0 or n_workers <= 1:
            return float(momentum)
        return max(0.0, 1.0 - n_workers * (1.0 - float(momentum)))

    def momentum_at(self, momentum: float, n_workers: int, clock: int,
                    budget: int | None) -> float:
        """
        Return the worker momentum for the gradient of iteration ``clock`` of ``budget``.

        The compensation of ``explicit_momentum`` buys speed early in an adaptation and costs
        accuracy late in the simulator: on MPCOL ``outdoors`` (5 seeds) BSP with the
        compensated momentum 0.6 instead of 0.9 ends 0.36 points lower, and every stale system
        (all compensated) ends 0.4-0.7 below BSP. From a third to half of the budget the
        momentum rises linearly by ``momentum_release`` of the compensation (5/6: 0.6 -> 0.85
        for 4 workers at 0.9). Off by default: with 5/6, simulated Rog-4 ended 0.856 instead of
        0.852 (BSP 0.859), but real fleets (3 robots, 400 iterations, ``indoors``) dipped
        3.5-4.9 points late in the run instead of 0.9-1.1 and ended 0.5-1 point lower: their
        real staleness most likely adds more implicit momentum than the simulator's
        (docs/scheduling.md; fleets had the budget at revision 18d2496, not since).
        A release from the staleness a run measures, not from the budget, is the open step.
        Without a budget (``None``) the compensation holds to the end.
        """
        mu_e = self.explicit_momentum(momentum, n_workers)
        if budget is None or budget <= 0 or not self.momentum_release or mu_e >= momentum:
            return mu_e
        lo, hi = MOMENTUM_RELEASE_WINDOW
        f = min(1.0, max(0.0, (clock / float(budget) - lo) / (hi - lo)))
        return mu_e + self.momentum_release * f * (float(momentum) - mu_e)

    @property
    def mta(self) -> float:
        """Fraction of rows every transfer must carry."""
        if self.mta_override is not None:
            return float(self.mta_override)
        return mta_rules.mta(self.staleness, self.mta_rule)

    def mta_for(self, slack: int) -> float:
        """Fraction of rows a robot with ``slack`` extra staleness must carry (MTA(S + slack))."""
        if self.mta_override is not None or not slack:
            return self.mta
        return mta_rules.mta(self.staleness + int(slack), self.mta_rule)


def layout_for(policy: SyncPolicy, shapes) -> RowLayout:
    """Return the RowLayout a policy synchronises: per-row, or one row for the whole model."""
    from rog_ros.core.rows import RowLayout      # (torch: making a policy needs none)
    return RowLayout(shapes, small_tensor_threshold=policy.small_tensor_threshold,
                     whole_model=policy.whole_model)
