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
Rog: row-granulated SSP (RSP) with ATP (priority order, MTA prefix, MTA-time deadline).

The MTA is the exact root of (1-P)^S = P (``exact_root_shifted``; 0.2755 for S = 4), not the
paper's Table 1, which solves (1-P)^(S-1) = P (0.32): the table's argument assumes a row
triggers once it has waited S iterations, while our RSP predicate (like SSP's) triggers at
S + 1, and the same argument for that trigger gives the shifted equation (specs/rog.md 5.4,
findings 3 and 5). The infinite-urgency rule still sends every row before it can trigger.
Fewer mandatory rows shorten the straggler's transfers, which set the pace of the whole fleet
under RSP: MPCOL, outdoors, 4 workers, seed 0, time to target 29.8 s -> 27.2 s.
The round-robin bound 1/(S+1) is faster still in the simulator (24.8 s) but below the 1/S
that the infinite-urgency rule forces under the S+1 trigger, and it made real fleets unstable.
The MTA-time deadline is the paper's, with one floor: a transfer keeps sending optional rows
for at least ``rtt_floor`` (2) measured round trips of its link, which it pays anyway; the
same default in the simulator and in fleets, and ``deadline_floor`` (compute times, 0) a
tuning knob (docs/scheduling.md). ``mta_rule='paper_table'`` reproduces the paper.
Rows a push withholds go out while the worker computes its next gradient (``late_rows``, not
in the paper; ``rog:4#late_rows=0`` turns it off): the uplink is idle then, and withheld rows
are what holds the other robots' staleness checks (docs/scheduling.md, "Late rows").
A robot suspended for its link again soon after its readmission stays out for a hold that
doubles with each such flap (``readmit_backoff``; ``rog:4#readmit_backoff=0`` turns it off).
Straggler slack (``straggler_slack``; ``rog:4#straggler_slack=0`` turns it off): a robot on a
slow, not dead, link gets a wider staleness bound instead of a suspension, and no slack rises
while a robot is suspended for its link. It reached EACOL's target 24% sooner on the seed where
one link stays at 2-6 Mbit/s, and changed no other time or final accuracy measured beyond the
noise (docs/scheduling.md, "Straggler slack").
A robot out for its link may run free (``async_when_out``, off: ``rog:4#async_when_out=1``): not
held to the bound itself, it pulls and pushes what ATP sends instead of the whole model after
each catch-up. On per-robot testbed logs with two slow robots it reached EACOL's target 16%
sooner and 2.4 points more accurate than without; on EACOL ``outdoors`` and a one-slow-robot
log it cost 0.6-0.8 points where several robots stay out long, and MPCOL ``outdoors`` 2 s of
median (docs/scheduling.md, "A robot out for its link may run free"), so it is not the
default. The server tells a robot it runs free on its pulls (``FLAG_FREE``); the worker
follows it whatever its own settings.
A robot whose link is too slow to keep the fleet's pace at any slack is let go
(``free_stragglers``, on; ``rog:4#free_stragglers=0`` is the ablation): suspended for its
link, it runs free until its link could keep the pace. It took EACOL ``outdoors`` seeds 10-14
from 1.45x to 0.89x FLOWN-4 and the two-slow-robot testbed logs from 1.02x to 0.94x, left
every other median measured where it was or lower, and costs 0.3-0.8 points of EACOL's mean
final accuracy where a robot it lets go stays out long (docs/scheduling.md, "A link too slow
for any slack").
"""

from __future__ import annotations

from rog_ros.protocol.policies.base import SyncPolicy
from rog_ros.protocol.policy_defaults import ROG_FREE_STRAGGLERS


def rog(staleness: int = 4, **overrides) -> SyncPolicy:
    return SyncPolicy(**{'name': f'rog:{staleness}', 'staleness': staleness,
                         'whole_model': False, 'balance': 'deadline',
                         'mta_rule': 'exact_root_shifted', 'outage_aware': True,
                         'late_rows': True, 'late_pulls': True, 'readmit_backoff': True,
                         'straggler_slack': True, 'free_stragglers': ROG_FREE_STRAGGLERS,
                         **overrides})
