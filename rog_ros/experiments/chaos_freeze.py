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
The freeze scenario: SIGSTOP one worker mid-push for longer than the absence timeout, SIGCONT.

A frozen robot (a process stopped by a debugger, a starved scheduler, a robot's computer
suspended) is not a killed one: it keeps its state, its DDS participant and the push it had
in flight, and its first messages after it thaws are from that same, live run, possibly
after the server suspended it (``absence_timeout``) and after the DDS lease of its
participant (10 s, Cyclone's default) expired at its peers. The scenario checks that

* the others keep training while it is frozen (Rog and its baselines: more than the S + 1
  iterations the staleness rule would let them run past a member that counts; the push
  systems, which hold nobody: more than one push each);
* the server suspended it (rog, ssp, bsp, flown: ``worker_suspended`` in ``events.csv``)
  within the absence timeout after the freeze began (``suspended_after_s``, at most
  ``FREEZE_ABSENCE_S + SUSPEND_SLACK_S``), and readmitted it after SIGCONT within ``THAW_S``
  of when it could be (``readmitted_after_s``, ``readmissible_after_s``);
* it computes again after SIGCONT (``recover_s``: SIGCONT to its first new push), and the
  run finishes with nothing lost and nothing applied twice (the ledger, or for a push system
  the pushes on the wire: :mod:`.chaos_push`).
"""

from __future__ import annotations

import math
import os
import re
import signal
import time

import numpy as np

from rog_ros.experiments.chaos_fleet import ChaosConfig, PUSH_CHAOS_SYSTEMS, wait_for
from rog_ros.experiments.chaos_fleet_scenario import fleet_scenario, VICTIM
from rog_ros.experiments.chaos_ledger_folder import count_records, read_ledger_file, \
    wait_new_record
from rog_ros.experiments.chaos_link_outage import iteration_times
from rog_ros.experiments.chaos_push import PUSH_PACE, PushWatch, WatchUnion
from rog_ros.nodes.settings import LEAST_ABSENCE_TIMEOUT_S

FREEZE_ABSENCE_S = LEAST_ABSENCE_TIMEOUT_S
"""The server's ``absence_timeout`` in the freeze (rog, ssp, bsp, flown): the shortest sound one
(two pokes of a waiting worker, 16 s), which keeps the scenario short."""
FREEZE_S = FREEZE_ABSENCE_S + 5.0
"""Seconds the victim stays stopped: past the absence timeout by a few seconds, so that the
server suspends it and the others train on without it for a while before it thaws."""
THAW_S = 10.0
"""Seconds the others must still train after the victim thawed, for it to push again: its DDS
participant's lease (10 s) ran out at its peers while it was stopped, and they find it again
only at the next discovery announcement. Measured from SIGCONT to its next computation (2
workers, a loaded 2-core machine): 0.02 s for rog, 2 s ssp, 8 s flown, 20 s bsp, 0.3-5.4 s
for the push systems. bsp's 20 s was Cyclone 11 pinging a dropped peer every 30 s; with the
2 s ``SPDPInterval`` of the shipped configurations a peer is heard 2 s after it is back at most
(docs/faults.md, "A robot back after its lease"); the budget still allows the 10 s."""
PUSH_AFTER = 5
"""Pushes each robot of a push fleet should have left when the victim thaws."""
SUSPEND_SLACK_S = 3.0
"""Seconds past the absence timeout the suspension may come after SIGSTOP: the server looks at
its deadlines every loop step (20 ms), late on a loaded machine (its progress rows up to 0.56 s
apart measured on a 2-core machine shared with other jobs, docs/faults.md; nothing bounds a
machine at load 10), its log's ``active`` line that places its clock comes after the clock
started, and the SIGSTOP after ``stop`` was noted. 16 + 3 s is still 2 s before the SIGCONT."""
EARLY_S = 0.5
"""A suspension or readmission up to this long before SIGSTOP or SIGCONT still counts as after
it (the placement of the server's clock): one earlier than that is another's, or wrong."""
_ACTIVE = re.compile(r'^\[\w+\] \[([0-9]+(?:\.[0-9]*)?)\] \[[^\]]*\]: active$')


def freeze_iterations(cfg: ChaosConfig) -> int:
    """
    Return the budget (per robot) of the freeze's fleet: the others must outlast the freeze.

    Once the victim is suspended the others run at up to 20 iterations a second (the chaos
    workload, 2 workers) and must still be training when it thaws and pushes again: with a
    budget of 40 they finished 2.5 s into the freeze and the victim was stopped with the fleet.
    As link-outage's: 80, and 30 a second for the time they train without it, which for rog
    is the whole freeze (outage-aware RSP suspended the stopped robot at once, for its link)
    and for ssp, bsp and flown what is left of it after the absence timeout, and ``THAW_S``.
    A push system's budget is the fleet's (that times the robots): the victim freezes a quarter
    into it, and the other three quarters must last while the others push through the freeze
    and the thaw at up to ``PUSH_PACE`` and leave ``PUSH_AFTER`` each (with 16 a robot, 2
    adacomp robots, the other used it up 11 s after the thaw).
    """
    if cfg.sync in PUSH_CHAOS_SYSTEMS:
        n = cfg.workers
        need = (n - 1) / n * PUSH_PACE * (FREEZE_S + THAW_S) + PUSH_AFTER
        return max(cfg.iterations, int(math.ceil(4 / 3 * need)))
    unheld_s = FREEZE_S if cfg.sync == 'rog' else FREEZE_S - FREEZE_ABSENCE_S
    return max(cfg.iterations, int(80 + 30 * (unheld_s + THAW_S)))


def freeze(cfg: ChaosConfig) -> dict:
    """Run the freeze scenario: SIGSTOP the victim mid-push for ``FREEZE_S``, then SIGCONT."""
    window = {}
    push = cfg.sync in PUSH_CHAOS_SYSTEMS
    iterations = freeze_iterations(cfg)
    name = f'rog_worker_{VICTIM}'

    def inject(fleet):
        # the guard that thaws the victim should this process be killed outright during the
        # freeze, started before it is due (arming it is a pipe write)
        guard = fleet.thaw_guard(name)
        try:
            return frozen(fleet, guard)
        finally:
            guard.kill()
            guard.wait()
            guard.stdin.close()

    def frozen(fleet, guard):
        """Freeze the victim on its next push for ``FREEZE_S``; return inject's outcome."""
        target = max(3, iterations // 4)
        if fleet.push:
            watch = fleet.watch
            if not wait_for(lambda: watch.count(VICTIM) >= target, 90, fleet):
                return None, f'worker {VICTIM} never pushed {target} times'
            seen = watch.count(VICTIM)
            # on its next push's first chunk on the wire: frozen with that push in flight
            if not wait_for(lambda: watch.count(VICTIM) > seen, 30, fleet):
                return None, f'worker {VICTIM} stopped pushing'
        else:
            path = os.path.join(fleet.ledger_dir, f'worker_{VICTIM}.jsonl')
            if not wait_for(lambda: count_records(path, 'computed') >= target, 90, fleet):
                return None, f'worker {VICTIM} never reached iteration {target}'
            wait_new_record(path, 'computed', 10)      # its push about to leave
        window['stop'] = time.monotonic()
        window['wall_minus_mono'] = time.time() - window['stop']
        try:
            fleet.freeze(name, FREEZE_S, guard)
            while time.monotonic() < window['stop'] + FREEZE_S:
                if any(c not in (None, 0) for c in fleet.codes().values()):
                    return None, 'a node failed while the victim was frozen'
                time.sleep(0.1)
        finally:        # never left stopped (the fleet's stop could not end it but by SIGKILL)
            fleet.signal(name, signal.SIGCONT)
            window['cont'] = time.monotonic()
        if fleet.push:      # a watch the thawed robot is matched with at once (WatchUnion)
            fleet.watch = WatchUnion([fleet.watch, PushWatch(
                fleet.domain, fleet.namespace, fleet.cfg.workers,
                node_name='rog_chaos_push_watch_thawed')])

        def resumed():
            """Tell whether the victim computed (a push system's: pushed) since SIGCONT."""
            return any(t > window['cont'] for t in iteration_times(fleet, VICTIM))
        if not wait_for(lambda: resumed() or fleet.codes().get(name) == 0, 90, fleet) or \
                not resumed():
            return None, (f'worker {VICTIM} did not push again after SIGCONT (the fleet '
                          'finished without it: raise --iterations)'
                          if fleet.codes().get(name) == 0 else
                          f'worker {VICTIM} did not push again after SIGCONT')
        first = min(t for t in iteration_times(fleet, VICTIM) if t > window['cont'])
        return round(first - window['cont'], 3), ''

    def judged(res, fleet):
        """Check that the others trained through the freeze and the server suspended it."""
        if 'cont' not in window:
            return []
        return freeze_problems(res, fleet, window['stop'], window['cont'],
                               window['wall_minus_mono'])
    server_extra = {} if push else {'absence_timeout': FREEZE_ABSENCE_S}
    return fleet_scenario('freeze', cfg, inject, extra_check=judged, iterations=iterations,
                          server_extra=server_extra)


def freeze_problems(res: dict, fleet, stop: float, cont: float,
                    wall_minus_mono: float | None = None) -> list:
    """
    Put what the freeze did into ``res``; return what it found wrong.

    ``stop`` and ``cont``: when SIGSTOP and SIGCONT were sent, on this host's monotonic clock
    (the ledgers' ``mono`` stamps and the wire watcher's times share it); ``wall_minus_mono``:
    this host's wall clock less its monotonic one (default: now), which places the server's
    log stamps. ``res`` gets ``victim_iterations`` (before, during, after the freeze),
    ``others_during_freeze`` and, for a system with membership, ``victim_suspended`` (the
    reason, or None), ``suspended_after_s`` (SIGSTOP to the suspension) and
    ``readmitted_after_s`` (SIGCONT to the readmission; None: none, or not placed) and
    ``readmissible_after_s`` (SIGCONT to when it could be: :func:`readmissible_at`).
    """
    workers = fleet.cfg.workers
    times = iteration_times(fleet, VICTIM)
    # the push it was frozen on: its first chunk may reach the watcher just after SIGSTOP
    during = [t for t in times if stop + 0.5 < t < cont]
    res['victim_iterations'] = {'before': sum(1 for t in times if t <= stop + 0.5),
                                'during': len(during),
                                'after': sum(1 for t in times if t >= cont)}
    others = {r: sum(1 for t in iteration_times(fleet, r) if stop < t < cont)
              for r in range(workers) if r != VICTIM}
    res['others_during_freeze'] = others
    problems = []
    if during:
        problems.append(f'worker {VICTIM} computed {len(during)} iterations while stopped: '
                        'the freeze did not hold it')
    if not res['victim_iterations']['after']:
        problems.append(f'worker {VICTIM} computed nothing after SIGCONT')
    server = fleet.specs['rog_server'].parameters
    # a member that counts holds the others S + 1 iterations past its last push (BSP: 1);
    # a push system holds nobody, and a robot pushing at all shows it
    held = 1 if fleet.push else int(server.get('staleness') or 0) + 1
    slow = {r: n for r, n in others.items() if n <= held}
    if slow:
        problems.append(f'workers {sorted(slow)} trained only {slow} iterations while worker '
                        f'{VICTIM} was frozen (at most {held} would be held; the server did '
                        'not let them go on)')
    if not fleet.push:
        if wall_minus_mono is None:
            wall_minus_mono = time.time() - time.monotonic()
        victim_at, victim_clock = computed_clocks(fleet, VICTIM)
        others_at, others_clock = {}, {}
        for r in range(workers):
            if r != VICTIM:
                others_at[r], others_clock[r] = computed_clocks(fleet, r)
        due = readmissible_at(victim_at, others_at, cont, held, victim_clock, others_clock)
        problems += membership_problems(res, fleet.dir, stop, cont, wall_minus_mono, due)
    return problems


def computed_clocks(fleet, rank: int) -> tuple:
    """
    Return when worker ``rank`` computed its iterations (monotonic) and the clock of each.

    The ledger's ``computed`` records and their ``clock``: the iteration number, which a Rog
    robot thawed far behind sets to the fleet's when it pulls the newest model (measured: 253
    before the freeze, 538 at its first iteration after it), so that it is not the count.
    """
    path = os.path.join(fleet.ledger_dir, f'worker_{rank}.jsonl')
    rows = [r for r in read_ledger_file(path) if r['kind'] == 'computed']
    return [r['mono'] for r in rows], [float(r.get('clock', k + 1)) for k, r in enumerate(rows)]


def _clock_at(times, clocks, grid: np.ndarray) -> np.ndarray:
    """Return a worker's clock (its last computed iteration's) at each of ``grid`` (0 before)."""
    t = np.asarray(times, dtype=float)
    c = np.arange(1.0, len(t) + 1) if clocks is None else np.asarray(clocks, dtype=float)
    if not len(t):
        return np.zeros(len(grid))
    order = np.argsort(t, kind='stable')
    t, c = t[order], c[order]
    i = np.searchsorted(t, grid, side='right')
    return np.where(i > 0, c[np.maximum(i - 1, 0)], 0.0)


def readmissible_at(victim: list, others: dict, cont: float, held: int,
                    victim_clock: list | None = None, others_clock: dict | None = None) -> float:
    """
    Return when (monotonic) the thawed victim may be readmitted, by the iterations computed.

    A worker suspended as absent is readmitted once heard again with its rows within the
    staleness bound of the active workers: from SIGCONT on, the first moment at which its
    clock is at most ``held`` behind that of every other that still trains (one past its last
    iteration gates nobody). ``victim`` and ``others`` (rank -> times) are when each computed;
    ``victim_clock`` and ``others_clock`` (rank -> clocks) the clock of each of those
    iterations (:func:`computed_clocks`; default: the count). A suspended victim trains free
    behind the others at their pace, so under SSP it caught up only when they finished
    (measured: ssp, 2 robots, readmitted 40.1 s after SIGCONT, 0.07 s after the other's last
    iteration, 69 behind it); a Rog robot pulls the newest model and its clock with it, and
    may be back at its first iteration after SIGCONT (measured 2.1 s, readmitted 2.2 s).
    """
    others_clock = others_clock or {}
    lists = {r: np.asarray(t, dtype=float) for r, t in others.items()}
    grid = np.unique(np.concatenate([np.array([cont]), np.asarray(victim, dtype=float)]
                                    + list(lists.values())))
    grid = grid[grid >= cont]
    v = _clock_at(victim, victim_clock, grid)
    ok = np.ones(len(grid), dtype=bool)
    for r, t in lists.items():
        if len(t):
            ok &= (grid >= t.max()) | (v >= _clock_at(t, others_clock.get(r), grid) - held)
    return float(grid[np.argmax(ok)]) if ok.any() else math.inf


def membership_problems(res: dict, run_dir: str, stop: float, cont: float,
                        wall_minus_mono: float, due: float | None = None) -> list:
    """
    Put when the server suspended and readmitted the victim into ``res``; return what is wrong.

    The absence rule suspends a worker heard from last ``FREEZE_ABSENCE_S`` ago, and the victim
    was heard last before SIGSTOP: the suspension must come at most that (and
    ``SUSPEND_SLACK_S``) after it. It is readmitted once heard with its rows within the
    staleness bound: after SIGCONT, at most ``THAW_S`` (its rediscovery, its pushes) after
    ``due`` (:func:`readmissible_at`; None: SIGCONT). ``events.csv`` counts from the server's
    start: the server log's ``active`` line (its wall stamp) places that on this host's
    monotonic clock.
    """
    problems = []
    times = membership_times(run_dir, stop, wall_minus_mono)
    reason, suspended_at, readmitted_at = times
    res['victim_suspended'] = reason
    res['suspended_after_s'] = None if suspended_at is None else round(suspended_at - stop, 3)
    res['readmitted_after_s'] = None if readmitted_at is None else round(readmitted_at - cont,
                                                                         3)
    due = cont if due is None else max(cont, due)
    res['readmissible_after_s'] = round(due - cont, 3) if math.isfinite(due) else None
    if reason is None:
        problems.append(f'the server did not suspend worker {VICTIM} while it was frozen '
                        f'({FREEZE_S:g} s, absence timeout {FREEZE_ABSENCE_S:g} s)')
        return problems
    if suspended_at is None:
        problems.append(f'cannot tell when the server suspended worker {VICTIM}: no "active" '
                        "line in logs/rog_server.log to place events.csv's times")
        return problems
    bound = FREEZE_ABSENCE_S + SUSPEND_SLACK_S
    if suspended_at - stop > bound:
        problems.append(f'the server suspended worker {VICTIM} {suspended_at - stop:.1f} s '
                        f'after it froze, past the absence timeout ({FREEZE_ABSENCE_S:g} s '
                        f'+ {SUSPEND_SLACK_S:g} s)')
    if readmitted_at is None:
        problems.append(f'the server did not readmit worker {VICTIM} after SIGCONT')
    elif readmitted_at < cont - EARLY_S:
        problems.append(f'the server readmitted worker {VICTIM} {cont - readmitted_at:.1f} s '
                        'before SIGCONT, while it was frozen')
    elif readmitted_at - due > THAW_S:
        problems.append(f'the server readmitted worker {VICTIM} {readmitted_at - cont:.1f} s '
                        f'after SIGCONT, past {THAW_S:g} s after it could be '
                        f'({due - cont:.1f} s: within the staleness bound, or the others '
                        'done)')
    return problems


def server_start_wall(run_dir: str):
    """Return the wall time of the server log's first ``active`` line (its clock's 0), or None."""
    try:
        with open(os.path.join(run_dir, 'logs', 'rog_server.log'), encoding='utf-8',
                  errors='replace') as fh:
            for line in fh:
                m = _ACTIVE.match(line.rstrip('\n'))
                if m:
                    return float(m.group(1))
    except OSError:
        pass
    return None


def membership_times(run_dir: str, stop: float, wall_minus_mono: float) -> tuple:
    """
    Return ``(reason, suspended, readmitted)`` of the victim's suspension after ``stop``.

    ``reason``: why the server suspended it (its first ``worker_suspended`` from ``EARLY_S``
    before ``stop`` on; before this check was timed, from any time), None: never.
    ``suspended`` and ``readmitted`` (its first ``worker_readmitted`` after that): on this
    host's monotonic clock, None where there is none or the server's start is unknown (then
    ``reason`` is its first suspension at any time).
    """
    from rog_ros.experiments.membership import read_events
    try:
        events = read_events(os.path.join(run_dir, 'events.csv'))
    except (OSError, ValueError):
        return None, None, None
    mine = [e for e in events if e['robot'] == VICTIM]
    start = server_start_wall(run_dir)
    if start is None:
        return suspension(run_dir), None, None
    for e in mine:
        e['mono'] = start + e['time_s'] - wall_minus_mono
    suspended = next((e for e in mine if e.get('event') == 'worker_suspended'
                      and e['mono'] >= stop - EARLY_S), None)
    if suspended is None:
        return None, None, None
    back = next((e for e in mine if e.get('event') == 'worker_readmitted'
                 and e['time_s'] >= suspended['time_s']), None)
    return (suspended['info'].get('reason') or 'unknown', suspended['mono'],
            None if back is None else back['mono'])


def suspension(run_dir: str):
    """
    Return why the server suspended the victim (its first ``worker_suspended``), or None.

    ``events.csv`` times count from the server's start, on a clock this process does not share,
    so the event is not placed inside the freeze: the others' iterations during it, more than
    a member that counts would let them run, are what place it there.
    """
    from rog_ros.experiments.membership import read_events
    try:
        events = read_events(os.path.join(run_dir, 'events.csv'))
    except (OSError, ValueError):
        return None
    for e in events:
        if e.get('event') == 'worker_suspended' and e['robot'] == VICTIM:
            return e['info'].get('reason') or 'unknown'
    return None
