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
One scenario on a fresh fleet: start it, inject the fault, wait, and judge the result row.

Every scenario but ctrl-c (which starts ``rog fleet`` itself) is ``fleet_scenario`` with an
``inject`` and an ``extra_check`` of its own, so that all are judged alike: a row
(``result_row``: the columns ``rog chaos`` prints) is ``ok`` only when the fleet finished, the
ledger balances, every node held the fleet key and the scenario's own checks held.
"""

from __future__ import annotations

import os
import time

from rog_ros.experiments.chaos_auth import auth_result, scenario_key
from rog_ros.experiments.chaos_fleet import ChaosConfig, Fleet, RATE_MBPS, write_trace
from rog_ros.experiments.chaos_ledger_folder import check_ledger
from rog_ros.experiments.chaos_push import push_rejects, push_verdict, PushWatch

VICTIM = 1               # the worker that is killed / loses its link
PUSH_WAIT_FACTOR = 3.0   # a push system's fleet is given this many times ``timeout_s``


def ledger_problems(res: dict, verdict) -> list:
    """Put the server's ledger verdict into ``res``; return what it found wrong."""
    if verdict is None:
        return ['no ledger report from the server']
    res.update(lost=round(verdict.lost, 6), duplicated=round(verdict.duplicated, 6),
               discarded=round(verdict.discarded, 6))
    return list(verdict.problems[:5])


def result_row(name: str, **kw) -> dict:
    """Return a scenario's result row: failed and empty, but for ``kw``."""
    out = {'scenario': name, 'outcome': 'failed', 'lost': None, 'duplicated': None,
           'recover_s': None, 'rejected': {}, 'runtime_s': None, 'detail': ''}
    out.update(kw)
    return out


def fleet_scenario(name: str, cfg: ChaosConfig, inject, extra=None, outage=None,
                   extra_check=None, iterations=None, server_extra=None,
                   flood: bool = False) -> dict:
    """
    Start a fleet, run ``inject(fleet) -> (recover_s, detail)``, wait, check the ledger.

    The fleet's key is ``scenario_key``'s; ``flood``: a key always, and the drops that its
    authentication counts are the flood's (``extra_check`` judges them).
    """
    run_dir = os.path.abspath(os.path.join(cfg.out, name))
    trace = os.path.join(run_dir, 'trace.csv')
    os.makedirs(run_dir, exist_ok=True)
    write_trace(trace, cfg.workers, RATE_MBPS, outage)
    key_env, key = scenario_key(cfg, run_dir, fresh=flood)
    fleet = Fleet(cfg, run_dir, trace, extra, key_env, iterations, server_extra)
    t0 = time.monotonic()
    recover, detail, finished, reason = None, '', False, ''
    # a push system's fleet is watched on the wire (no ledger): matched before it starts
    fleet.watch = (PushWatch(fleet.domain, fleet.namespace, cfg.workers) if fleet.push
                   else None)
    fleet.kills = 0
    try:
        fleet.start()
        recover, detail = inject(fleet)
        # a push system's every pull is the whole dense model (16 kB, 1.3 s at the shaped
        # rate; and its dense pushes as much): 90 pushes took 60-111 s without faults
        wait_s = cfg.timeout_s * (PUSH_WAIT_FACTOR if fleet.push else 1.0)
        finished, reason = fleet.wait(wait_s + (3 * outage[2] if outage else 0.0))
    finally:
        fleet.stop()
        if fleet.watch is not None:
            fleet.watch.close()
    if fleet.push:
        verdict, rejects, injected, saves = None, push_rejects(run_dir), {}, {}
    else:
        verdict, rejects, injected, saves = check_ledger(fleet.ledger_dir)
    res = result_row(name, recover_s=recover, rejected=rejects,
                     runtime_s=round(time.monotonic() - t0, 1), injected=injected,
                     state_saves=saves)
    problems = [detail] if detail else []
    if not finished:
        problems.append(reason)
        problems += [f'{n}: {fleet.tail(n, 3).strip()}' for n, c in fleet.codes().items()
                     if c not in (None, 0)]
    if fleet.push:
        problems += push_verdict(res, fleet.watch, run_dir, cfg.workers, fleet.iterations,
                                 fleet.kills)
    else:
        problems += ledger_problems(res, verdict)
    problems += auth_result(res, os.path.join(run_dir, 'logs'), list(fleet.specs), key,
                            cfg.robot_keys, expect_drops=flood)
    if extra_check is not None:
        problems += extra_check(res, fleet)
    ok = finished and (fleet.push or verdict is not None and verdict.ok) and not problems
    res['outcome'] = 'ok' if ok else 'failed'
    res['detail'] = '; '.join(p for p in problems if p)[:600]
    return res
