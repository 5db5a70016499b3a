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
Protocol events worth a line in a node's log, in words.

The engines report everything as ``Log`` actions, and most of them are metrics (a trigger per
pull, a stall, a push applied) that only the run recorder wants. A few change who trains with
whom: a robot suspended from the staleness check or back in it, let go as too slow for any
slack, given straggler slack, the quorum lost, a robot restarting or joining; and a robot's
gradient that was not finite. Someone watching a fleet (``logs/rog_server.log`` of ``rog
fleet``, or the console of ``ros2 run``) wants those as they happen, with the numbers that
decided them; before this module the server's log said "active" and, at the end, a summary,
and a robot let go twice in a run left no trace but a count. ``describe`` turns one ``Log``
into a log level and a sentence, or None for the rest; the nodes log it (``say``), and
``RunRecorder`` keeps it for ``events.csv`` next to ``summary.json`` (simulated runs too, where
nothing else would show it).
"""

from __future__ import annotations

import logging
import math
from typing import Optional, Tuple

INFO, WARNING = logging.INFO, logging.WARNING


def _robots(ranks) -> str:
    ranks = list(ranks or [])
    return ', '.join(str(r) for r in ranks) if ranks else 'none'


def _suspended(log) -> Tuple[int, str]:
    why = log.info.get('reason', '?')
    cause = {'link': "its link, or a CPU too busy, cannot keep the fleet's pace",
             'absent': 'not heard from within the absence timeout'}.get(why, why)
    return INFO, (f'robot {log.worker} suspended from the staleness check ({cause}); '
                  f'robots in the check: {_robots(log.info.get("active"))}')


def _readmitted(log) -> Tuple[int, str]:
    return INFO, (f'robot {log.worker} is back in the staleness check; robots in the check: '
                  f'{_robots(log.info.get("active"))}')


def _too_slow(log) -> Tuple[int, str]:
    i = log.info
    return INFO, (f'robot {log.worker} runs free: it needs {log.value:.2f} s per iteration at '
                  f'the largest slack against the fleet\'s {float(i.get("fleet_pace_s", 0)):.2f}'
                  f' s (clock {i.get("clock")}, fleet at {i.get("fleet_clock")}); nobody waits '
                  'for it until its link keeps the pace')


def _seconds(value) -> str:
    """Say a duration: to 0.1 s from 0.95 s up, else to two figures (0.049 s, not 0.0 s)."""
    v = float(value)
    if not math.isfinite(v) or v >= 0.95:
        return f'{v:.1f} s'
    return f'{v:.2g} s' if v == 0.0 or v >= 0.01 else 'under 0.01 s'


def _outage(log) -> Tuple[int, str]:
    i = log.info
    return INFO, (f'robot {log.worker} held robot {i.get("held")} for {_seconds(log.value)} '
                  f'(outage bound {_seconds(i.get("bound_s", 0))}; clock {i.get("clock")}, '
                  f'fleet at {i.get("fleet_clock")})')


def _slack(log) -> Tuple[int, str]:
    i = log.info
    return INFO, (f'robot {log.worker} straggler slack now {int(log.value)} (its bound '
                  f'{i.get("staleness")}; it held the others '
                  f'{100 * float(i.get("held_share", 0)):.0f}% of their time)')


def _quorum(log) -> Tuple[int, str]:
    i = log.info
    return WARNING, (f'quorum lost: {int(log.value)} robots in the staleness check, '
                     f'{i.get("min_workers")} needed ({_robots(i.get("active"))}); '
                     f'{i.get("hint", "training waits")}')


def _restart(log) -> Tuple[int, str]:
    i = log.info
    if 'dropped_pushes' in i:        # a push system's server (protocol/policies/async_ps.py)
        return INFO, (f'robot {log.worker} is on a run new to this server (it restarted, or '
                      f'the server did): its push at timestamp {i.get("clock", "?")} '
                      f'(expected {i.get("expected", "?")}) dropped unapplied, '
                      + ('the model of its group sent once its SSP bound lets it go'
                         if i.get('held') else 'the current model sent'))
    return INFO, (f'robot {log.worker} restarted (a new incarnation): '
                  f'{i.get("dropped_uplinks", 0)} unfinished pushes dropped'
                  + (', its pull under way dropped' if i.get('dropped_downlink') else ''))


def _resent(log) -> Tuple[int, str]:
    i = log.info
    return INFO, (f'robot {log.worker} sent again its push at timestamp {i.get("clock", "?")}, '
                  'which this server had answered before its checkpoint (the answer was lost '
                  f'with the crash; it holds {i.get("expected", "?")}): not applied again, the '
                  'current model sent')


def _revived(log) -> Tuple[int, str]:
    if log.info.get('duplicate'):     # the duplicate_rank warning said why, once
        return INFO, (f'robot {log.worker}: the other process of this rank taken back '
                      '(two processes run as this robot)')
    # Rog's server retires a live run for a late JOIN of a run that died rejoining; the push
    # systems' transfers (their log carries 'run') for a late push of one that died pushing
    died = 'with a push on its way' if 'run' in log.info else 'while rejoining'
    return WARNING, (f'robot {log.worker}: its live run had been retired for a late message of '
                     f'a run that died {died}; it kept asking, and was taken back (if '
                     f'this repeats, two processes may run as robot {log.worker})')


def _duplicate_rank(log) -> Tuple[int, str]:
    return WARNING, (f'two processes run as robot {log.worker}: each keeps being taken back '
                     'from the other, and training keeps replacing one with the other; give '
                     'every robot its own rank (rank:= / --rank) and restart the one that '
                     'has the wrong one')


def _server_revived(log) -> Tuple[int, str]:
    return WARNING, (f'robot {log.worker}: it had taken a late message of a server run that '
                     'had died for a newer run; the live server kept answering and was taken '
                     'back')


def _server_replaced(log) -> Tuple[int, str]:
    i = log.info
    return WARNING, (f'this server run was replaced by server run {i.get("run", "?")}, started '
                     f'in its stead: its robots answer that run (robot {i.get("robot", "?")}, '
                     f'{i.get("acks", "?")} acks over {_seconds(i.get("span_s", 0))}); this '
                     'one sends no stop order and leaves at the end of its training')


def _server_not_replaced(log) -> Tuple[int, str]:
    i = log.info
    return WARNING, (f'server run {i.get("run", "?")}, which replaced this one, is taken for '
                     f'gone: no robot acked it for {_seconds(i.get("silent_s", 0))}; this '
                     'server run serves its robots again (its stop orders go again)')


def _pull_repeated(log) -> Tuple[int, str]:
    return WARNING, (f'robot {log.worker} still waited after its pull of iteration '
                     f'{log.info.get("clock")} was served: served again (its staleness check '
                     "and the server's disagreed; please report it with the run's logs)")


def _join(log) -> Tuple[int, str]:
    return INFO, f'robot {log.worker} joined'


def _nonfinite(log) -> Tuple[int, str]:
    return WARNING, (f'robot {log.worker} computed a non-finite gradient: dropped, the '
                     'iteration is computed again (lower the learning rate if it repeats)')


def _diverged(log) -> Tuple[int, str]:
    who = 'the server' if log.worker < 0 else f'robot {log.worker}'
    return WARNING, f'{who}: training diverged (non-finite values); the run stops'


def _after_fleet(log) -> Tuple[int, str]:
    short = int(log.value)
    i = log.info
    if i.get('computed') is not None and i.get('budget') is not None:    # the simulator's
        clock = i.get('clock', int(i['budget']) - short)
        caught_up = (f' (its clock {clock}: it caught up with the fleet)'
                     if clock != i['computed'] else '')
        return INFO, (f'robot {log.worker} stopped having computed {i["computed"]} of its '
                      f'{i["budget"]} iterations{caught_up}: the fleet finished while it was '
                      'out for its link')
    # (its clock, not its computations: a robot that catches up after an outage skips to the
    # fleet's clock minus S, so it computed fewer iterations than the clock says)
    done = (f'with its clock {short} iterations short of its budget' if short > 0
            else 'at its budget')
    return INFO, (f'robot {log.worker} stopped {done}: the fleet finished while it was out '
                  'for its link')


def _server_restored(log) -> Tuple[int, str]:
    i = log.info
    n = i.get('evaluations')
    return WARNING, (f'the server restarted from its checkpoint {i.get("checkpoint")} after '
                     f'{log.value:.1f} s away; the run record goes on after its {n} '
                     f'evaluation{"" if n == 1 else "s"}')


def _start_mismatch(log) -> Tuple[int, str]:
    i = log.info
    what = (f'robot {log.worker} started from other weights than the server (fingerprint '
            f"{i.get('fingerprint', '?')}, the server's {i.get('server', '?')}: another "
            '--init-model file, or a checkpoint its machine computed differently)')
    then = {'next pull': "; its next pull is the server's model",
            'stopped': '; it has stopped already',
            'unsupported': ('; this system cannot send it a model, so it trains apart: give '
                            'every node the same --init-model')}
    return WARNING, what + then.get(i.get('resync'), '')


def _final_model(log) -> Tuple[int, str]:
    return INFO, f"robot {log.worker} holds the fleet's final model"


def _final_missed(log) -> Tuple[int, str]:
    return WARNING, (f"robot {log.worker} stopped without the fleet's final model "
                     f"({log.info.get('reason', '?')}); the server's model.pt has it")


def _final_resent(log) -> Tuple[int, str]:
    return WARNING, (f"robot {log.worker} {log.info.get('reason', 'restarted')}: the server "
                     "sends it the fleet's final model again")


def _let_go(log) -> Tuple[int, str]:
    return WARNING, (f'robot {log.worker} was let go so that the run could end '
                     f"({log.info.get('reason', '?')})")


def _stop_missed(log) -> Tuple[int, str]:
    return WARNING, (f'robot {log.worker} was given up with its training done and its stop '
                     f'order not sent (silent {log.value:.0f} s: it had left)')


def _incompatible(log) -> Tuple[int, str]:
    who = ', '.join(log.info.get('participants') or ()) or '?'
    return WARNING, (f'robot {log.worker} runs an incompatible rog_ros: for {log.value:.0f} s '
                     f'its downlink had only readers of another message build (participant '
                     f"{who}); taken as absent: {log.info.get('hint', '')}")


_DESCRIBE = {
    'worker_suspended': _suspended,
    'worker_readmitted': _readmitted,
    'too_slow_for_slack': _too_slow,
    'outage_suspend': _outage,
    'straggler_slack': _slack,
    'quorum_lost': _quorum,
    'worker_restart': _restart,
    'push_resent': _resent,
    'join': _join,
    'worker_revived': _revived,
    'duplicate_rank': _duplicate_rank,
    'pull_repeated': _pull_repeated,
    'server_revived': _server_revived,
    'server_replaced': _server_replaced,
    'server_not_replaced': _server_not_replaced,
    'stopped_after_fleet': _after_fleet,
    'nonfinite_gradient': _nonfinite,
    'diverged': _diverged,
    'server_restored': _server_restored,
    'start_mismatch': _start_mismatch,
    'final_model': _final_model,
    'final_model_missed': _final_missed,
    'final_model_resent': _final_resent,
    'worker_let_go': _let_go,
    'stop_missed': _stop_missed,
    'worker_incompatible': _incompatible,
}

NOTABLE = frozenset(_DESCRIBE)
"""Event names ``describe`` puts into words (every other ``Log`` is a metric)."""


def describe(log) -> Optional[Tuple[int, str]]:
    """Return ``(logging level, sentence)`` for a notable event, None for a metric."""
    fn = _DESCRIBE.get(log.name)
    return None if fn is None else fn(log)


def say(logger, log) -> None:
    """
    Log a notable event's sentence on ``logger`` (nothing for a metric).

    ``.info`` / ``.warning`` only: the nodes' logger is Python's ``logging`` or, under ROS 2,
    rclpy's, which has no ``.log(level, ...)``.
    """
    said = describe(log)
    if said is not None:
        level, text = said
        (logger.warning if level >= WARNING else logger.info)(text)
