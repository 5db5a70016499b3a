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
The link-outage scenario: one worker's link at 0 Mbit/s, planned again when it missed.

The outage tests the fleet only when it falls inside the victim's training while the other
robots train through it. A fixed trace time and a fixed budget cannot promise that on every
machine (the trace clock starts before the processes do, and a machine's pace is its own), so
a run that missed is run once more, planned from what it measured (``link_outage``).
"""

from __future__ import annotations

import math
import os
import time

from rog_ros.experiments.chaos_fleet import ChaosConfig, PUSH_CHAOS_SYSTEMS, wait_for
from rog_ros.experiments.chaos_fleet_scenario import fleet_scenario, VICTIM
from rog_ros.experiments.chaos_folders import FIRST_SUFFIX, set_aside
from rog_ros.experiments.chaos_ledger_folder import read_ledger_file
from rog_ros.experiments.chaos_push import PUSH_PACE

LINK_OUTAGE_START_S = 8.0
"""Trace time of the link outage: about when an idle machine's fleet starts training."""
PUSH_OUTAGE_BASE = 10
"""A push system's link-outage budget per robot besides the others' pushes during the outage."""
PUSH_LEAST_DURING = 2
"""Pushes each other robot of a push system must make inside the outage (it holds nobody)."""
LATE_MARGIN_S = 4.0
"""Seconds of the outage the others need left when they start training for a run to count."""


def link_outage(cfg: ChaosConfig) -> dict:
    """
    Run the link-outage scenario; once more, planned from what the first run measured.

    The outage sits at a fixed trace time and the budget is fixed, while the trace clock
    starts before the processes do and a machine's pace is its own. On a slow or loaded
    machine the other robots began training 8-9 s in (CI, stop 51), a few seconds more and
    the outage is over before they could train through it; on a fast one they may finish
    their budget before it is over, and the victim, still out, stops with them. Either way the
    scenario did not happen as written. Such a failed run is planned again
    (``_link_outage_replan``: the outage after the measured start, a budget for the
    measured pace), and the second run is judged as the first; the row says so
    (``replanned``, with the first run's detail; its files in ``link-outage.first``).
    """
    # Enough iterations that training outlasts start-up, reaches the outage and goes on after
    # it. The others, not held, run at up to 17 iterations a second during it (idle 2-core
    # machine, 2 workers): with a fixed 80 they finished during a 6 s outage after the
    # victim's 54 before it, and the victim, still out, stopped with the fleet (one iteration
    # after the outage on an idle machine, none on a CI run); 80 + 30 per outage second
    # left it 69 after (the fleet's wait grows by the outage twice over, for the rest)
    plan = {'start_s': LINK_OUTAGE_START_S, 'iterations': outage_iterations(cfg)}
    seen = {}
    row = _link_outage_from(cfg, plan, seen)
    again = None if row['outcome'] == 'ok' else _link_outage_replan(plan, seen, cfg.outage_s)
    if again is None:
        return row
    run_dir = os.path.abspath(os.path.join(cfg.out, 'link-outage'))
    set_aside(run_dir, run_dir + FIRST_SUFFIX)
    second = _link_outage_from(cfg, again, {})
    second['replanned'] = dict(again, measured={k: round(v, 3) for k, v in seen.items()},
                               first_detail=row['detail'])
    return second


def outage_iterations(cfg: ChaosConfig) -> int:
    """
    Return a link-outage run's budget (per robot): training must meet the outage and outlast it.

    Rog and its baselines: 80 + 30 per outage second (``link_outage``). A push system's budget
    is the whole fleet's (``--iterations`` times the robots) and its robots are slow (a dense
    pull of the chaos model, 16 kB at the shaped 0.1 Mbit/s, per push): ``PUSH_OUTAGE_BASE``
    each, and what the others push during the outage at up to ``PUSH_PACE``, so that some is
    left for the victim after it. At 80 + 30 per second a 90 s outage of 3 robots would have
    been 8,340 pushes, about two hours.
    """
    if cfg.sync in PUSH_CHAOS_SYSTEMS:
        n = cfg.workers
        return max(cfg.iterations, PUSH_OUTAGE_BASE + int(math.ceil(
            (n - 1) / n * PUSH_PACE * cfg.outage_s)))
    return max(cfg.iterations, 80 + int(30 * cfg.outage_s))


def _link_outage_replan(plan: dict, seen: dict, outage_s: float) -> dict | None:
    """
    Plan a link-outage run again from the first one's measurements, or None if it was valid.

    ``seen``: ``training_s`` (trace time at which the other robots began training),
    ``end_s`` (... at which the last of them finished) and ``period_s`` (their median
    seconds per iteration). The first run did not test the scenario if the others began
    training with less than ``LATE_MARGIN_S`` of the outage left (their first period holds
    their start-up, and the rule lets them go only after S + 1 iterations and its bound),
    or finished less than a second after it. Others that began inside the outage with
    more of it left make a valid run (a robot whose link is dead from its start: stop 51's
    failure was that case, a bug in the server's pace, and must stay a failure). The new
    plan puts the outage ``LINK_OUTAGE_START_S`` after the measured start (never earlier than
    before) and gives a budget for 1.5x the measured pace to last from the start to 8 s
    after the outage (never smaller than before).
    """
    if not {'training_s', 'end_s', 'period_s'} <= set(seen) or seen['period_s'] <= 0:
        return None
    start, iterations = plan['start_s'], plan['iterations']
    late = seen['training_s'] > start + outage_s - LATE_MARGIN_S
    early = seen['end_s'] < start + outage_s + 1.0
    if not (late or early):
        return None
    if late:
        start = seen['training_s'] + LINK_OUTAGE_START_S
    need = (start + outage_s + 8.0 - seen['training_s']) / seen['period_s']
    return {'start_s': start, 'iterations': max(iterations, int(math.ceil(1.5 * need)))}


def iteration_times(fleet, rank: int) -> list:
    """
    Return when worker ``rank`` computed its iterations, on this host's monotonic clock.

    The ledger's ``computed`` records; a push system's fleet keeps no ledger, and each of
    its iterations is one push: when the wire watcher first saw each (``PushWatch``).
    """
    if fleet.push:
        return fleet.watch.first_times(rank)
    path = os.path.join(fleet.ledger_dir, f'worker_{rank}.jsonl')
    return [r['mono'] for r in read_ledger_file(path) if r['kind'] == 'computed']


def _link_outage_from(cfg: ChaosConfig, plan: dict, seen: dict) -> dict:
    """Run the link-outage scenario as ``plan`` says; note the others' timing in ``seen``."""
    start_s = plan['start_s']
    window = {}

    def inject(fleet):
        # on the monotonic clock, as the ledgers' ``mono`` stamps (a step of the wall clock
        # during the run would move wall-clock stamps against the nodes' trace time)
        epoch = fleet.epoch_mono
        window.update(down=epoch + start_s, up=epoch + start_s + cfg.outage_s)
        while time.monotonic() < window['up'] + 1.0:
            if any(c not in (None, 0) for c in fleet.codes().values()):
                return None, 'a node failed during the outage'
            time.sleep(0.1)
        wait_for(lambda: any(t > window['up'] for t in iteration_times(fleet, VICTIM))
                 or fleet.codes().get(f'rog_worker_{VICTIM}') == 0, 60, fleet)
        return None, ''

    def measure(fleet):
        """Note when the others trained, in trace time, and their pace."""
        epoch = window['down'] - start_s
        runs = [[t - epoch for t in iteration_times(fleet, r)]
                for r in range(cfg.workers) if r != VICTIM]
        runs = [sorted(t) for t in runs if len(t) >= 2]
        if runs:
            periods = sorted(b - a for t in runs for a, b in zip(t, t[1:]))
            seen.update(training_s=min(t[0] for t in runs), end_s=max(t[-1] for t in runs),
                        period_s=periods[len(periods) // 2])

    def hit(res, fleet):
        """Check that the outage fell inside the victim's training and stopped it."""
        times = iteration_times(fleet, VICTIM)
        before = [t for t in times if t < window['down']]
        measure(fleet)
        during = [t for t in times if window['down'] + 0.5 < t < window['up']]
        after = [t for t in times if t >= window['up']]
        if after:
            res['recover_s'] = round(after[0] - window['up'], 3)
        res['victim_iterations'] = {'before': len(before), 'during': len(during),
                                    'after': len(after)}
        # outage-aware RSP: the others go on training while the victim's link is down
        # (the paper's RSP would hold them S + 1 iterations after the victim's last push)
        res['others_during_outage'] = {
            r: sum(1 for t in iteration_times(fleet, r) if window['down'] + 0.5 < t < window['up'])
            for r in range(cfg.workers) if r != VICTIM}
        if not after:    # (none before: the outage covered the start of its training)
            return [f"the outage did not fall inside worker {VICTIM}'s training "
                    f'({len(before)} iterations before it, {len(after)} after)']
        if len(during) > 1:
            return [f'worker {VICTIM} computed {len(during)} iterations with its link down']
        if fleet.push:      # asynchronous: nobody waits for the victim
            few = {r: n for r, n in res['others_during_outage'].items()
                   if n < PUSH_LEAST_DURING}
            return [f'workers {sorted(few)} pushed only {few} times during the outage (at '
                    f'least {PUSH_LEAST_DURING} each)'] if few else []
        server = fleet.specs['rog_server'].parameters
        held = {r: n for r, n in res['others_during_outage'].items()
                if n <= int(server['staleness']) + 1}
        if server.get('outage_aware') and server.get('sync') == 'rog' and held:
            return [f'workers {sorted(held)} were held during the outage ({held} iterations): '
                    'outage-aware RSP did not suspend the victim']
        return []
    return fleet_scenario('link-outage', cfg, inject, extra_check=hit,
                          outage=(VICTIM, start_s, cfg.outage_s),
                          iterations=plan['iterations'])
