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
r"""
``rog chaos``: a real local fleet under faults; nothing may be lost, doubled or hung.

    rog chaos --scenario all --json
    rog chaos --scenario link-outage --outage-s 90

Every scenario starts the fleet of :mod:`rog_ros.nodes.plan` (server and workers as
OS processes on the embedded Cyclone DDS, loopback, a DDS domain of their own) on the small
``chaos`` workload, with links shaped to a slow constant rate so that a transfer spans several
chunks and tens of milliseconds, injects its fault, and waits for the fleet to finish:

* ``worker-restart``: ``kill -9`` a worker right after it started a push, start it again
  (it restores its ``--state-dir``);
* ``freeze``: SIGSTOP a worker right after it started a push, for longer than the server's
  absence timeout (which it sets), then SIGCONT: it keeps its state, its push in flight and
  its DDS participant; the others must train on meanwhile, and it must push again after
  (:mod:`.chaos_freeze`);
* ``server-restart``: ``kill -9`` the server after a checkpoint, start it again from it; the
  workers reconnect (a push system's server checkpoints every
  ``chaos_scenarios.PUSH_CHECKPOINT_EVERY`` pushes answered and journals each between: its
  restart is exactly-once);
* ``link-outage``: one worker's link at 0 Mbit/s for ``--outage-s`` seconds (default 90;
  planned again from the measured start and pace if the fleet was not training throughout
  it);
* ``loss-dup-reorder``: every node drops, duplicates and reorders its outgoing chunks and acks
  (seeded; the nodes' hidden ``--chaos-faults``);
* ``flood``: this tool publishes fuzzed messages and unauthenticated ones on the fleet's
  topics while it trains; every one must be rejected and counted;
* ``ctrl-c``: SIGINT to a ``rog fleet`` supervisor: every node stops within a bound and the
  summary is written.

The nodes authenticate their messages as ``rog fleet``'s do (docs/security.md) when given a
fleet key: ``--fleet-key-file``, else ``$ROG_FLEET_KEY_FILE``, else ``$ROG_FLEET_KEY``, else,
with ``--auth`` or ``--robot-keys true``, a new key per scenario in ``OUT/<scenario>/fleet.key``
(the flood makes one anyway; ``rog fleet``, in ctrl-c, too); ``--robot-keys true`` turns
``robot_keys`` on at every node. With a key every node's log must name it, and no message may
have been dropped for its authentication (``bad_tag``, ``unauthenticated``, ``too_old``,
``malformed``; a ``replay`` is a duplicate, which the faults make), except in the flood, whose
forgeries must be.

``lost`` and ``duplicated`` come from the independent ledger
(:mod:`rog_ros.nodes.chaos_ledger`), in units of one worker's mean iteration update; for the
push systems (adacomp, asgd, comp-asgd, gsp) from the pushes seen on the wire against the
server's summary, in pushes (:mod:`.chaos_push`);
``recover_s`` is the time from the end of the fault to the affected node's next iteration
(ctrl-c: the time the fleet took to stop); ``rejected`` sums the nodes' reject counts by
reason. ``outcome`` is ``ok`` only when the fleet finished (ctrl-c: stopped cleanly), the
ledger balances and every check of the scenario held. With ``--json`` the last line printed is
one JSON object ``{"scenarios": [...]}``; ``OUT/chaos.json`` holds it too (after Ctrl-C: the
scenarios finished before it, with ``"interrupted": true``). Each scenario runs in a fresh
``OUT/<scenario>/``: an earlier run's folder is moved to ``OUT/<scenario>.previous`` first,
kept but never reused.

This module is the command: its options, the run of the scenarios one after the other and
the table. The scenarios are :mod:`.chaos_scenarios` (link-outage: :mod:`.chaos_link_outage`),
each on the fleet of :mod:`.chaos_fleet`, judged from the ledger (:mod:`.chaos_ledger_folder`)
and the key (:mod:`.chaos_auth`), in a folder of :mod:`.chaos_folders`.
"""

from __future__ import annotations

import json
import os
import sys

from rog_ros import checks
from rog_ros.atomic import atomic_write_text
from rog_ros.experiments.chaos_auth import given_key
from rog_ros.experiments.chaos_fleet import CHAOS_SYSTEMS, ChaosConfig, PUSH_CHAOS_SYSTEMS
from rog_ros.experiments.chaos_fleet_scenario import result_row
from rog_ros.experiments.chaos_folders import fresh_scenario_dir
from rog_ros.experiments.chaos_scenarios import RUNNERS, SCENARIOS
from rog_ros.nodes import settings


def run_scenarios(names, cfg: ChaosConfig, progress=None, rows=None) -> list:
    """
    Run the named scenarios one after the other; return their result rows.

    Each scenario starts from a fresh folder (``fresh_scenario_dir``). The rows are appended
    to ``rows`` when given, one as each scenario finishes: a caller interrupted (Ctrl-C, a
    KeyboardInterrupt that this lets through) still has those finished before.
    """
    rows = [] if rows is None else rows
    for name in names:
        if progress:
            progress(f'rog chaos: {name} ...')
        try:
            fresh_scenario_dir(cfg.out, name)
            row = RUNNERS[name](cfg)
        except Exception as err:  # noqa: B902 - one broken scenario must not hide the others
            row = result_row(name, detail=f'{type(err).__name__}: {err}'[:600])
        rows.append(row)
        if progress:
            progress(f'rog chaos: {name}: {row["outcome"]} ({row["runtime_s"]} s) '
                     f'{row["detail"][:200]}')
    return rows


# ---------------------------------------------------------------------------------- the CLI
def add_parser(subparsers):
    """Add the ``chaos`` subcommand."""
    p = subparsers.add_parser('chaos', allow_abbrev=False,
                              help='fault scenarios against a real local fleet',
                              description=__doc__.split('\n\n')[0].split('\n', 1)[1].strip()
                              .replace('``', ''))
    p.add_argument('--scenario', default='all',
                   help=f'one of {", ".join(SCENARIOS)}, a comma-separated list, or all '
                        f'(default all)')
    p.add_argument('--json', action='store_true', help='print one JSON object last')
    p.add_argument('--out', default='rog_chaos', help='run directory (default rog_chaos)')
    p.add_argument('--workers', type=int, default=3, help='workers (default 3)')
    p.add_argument('--iterations', type=int, default=30,
                   help=f'iterations, {MIN_ITERATIONS} to {MAX_ITERATIONS} (default 30)')
    p.add_argument('--outage-s', type=float, default=None,
                   help=f'link-outage: seconds at 0 Mbit/s (default {OUTAGE_S[0]:g})')
    p.add_argument('--flood-s', type=float, default=None,
                   help=f'flood: seconds of hostile traffic (default {FLOOD_S[0]:g})')
    p.add_argument('--seed', type=int, default=0, help='seed (default 0)')
    p.add_argument('--sync', default='rog',
                   help=f'the fleet\'s system: {", ".join(CHAOS_SYSTEMS)} (default rog; the '
                        f'push systems {", ".join(PUSH_CHAOS_SYSTEMS)} are judged by the '
                        f'pushes on the wire)')
    p.add_argument('--fleet-key-file', default=None,
                   help="fleet key file (0600) every scenario's nodes authenticate their "
                        "messages with, as rog fleet's (default: $ROG_FLEET_KEY_FILE, "
                        '$ROG_FLEET_KEY, else none, or with --auth a new one per scenario)')
    p.add_argument('--auth', action='store_true',
                   help='with no key given, a new fleet key per scenario in '
                        'OUT/SCENARIO/fleet.key (as rog fleet makes one per run)')
    p.add_argument('--robot-keys', default=None, metavar='BOOL',
                   help='robot_keys on every node: each robot tags with a key of its own, '
                        'derived from the fleet key (docs/security.md; default false; true '
                        'with no key given implies --auth)')
    p.set_defaults(func=run)
    return p


MIN_ITERATIONS, MAX_ITERATIONS = 10, 100_000
"""``--iterations``: fewer leave a scenario no time for its fault; 10**12 was taken, and each
scenario's fleet trained until it was stopped (the default is 30)."""
OUTAGE_S = (ChaosConfig.outage_s, 3600.0)
"""``--outage-s``: its default and its largest value."""
FLOOD_S = (ChaosConfig.flood_s, 600.0)
"""``--flood-s``: its default and its largest value."""


def _scenario_seconds(args, names: list) -> tuple:
    """
    Return ``(outage_s, flood_s)``: the defaults where not given; ValueError for a bad one.

    Each must be in (0, largest]; before, one line said both ranges whichever was wrong, and
    not the value. One given for a run without its scenario is refused: it changed nothing.
    """
    out = []
    for flag, value, (default, high), scenario in (
            ('--outage-s', args.outage_s, OUTAGE_S, 'link-outage'),
            ('--flood-s', args.flood_s, FLOOD_S, 'flood')):
        if value is None:
            out.append(default)
            continue
        if not 0 < value <= high:
            raise ValueError(f'{flag} must be in (0, {high:g}] seconds, got {value:g}')
        if scenario not in names:
            raise ValueError(f'{flag} applies to the {scenario} scenario, which this run '
                             f'does not include ({", ".join(names)}); leave {flag} out or '
                             f'add {scenario} to --scenario')
        out.append(value)
    return tuple(out)


def parse_scenarios(text: str) -> list:
    """``'all'`` or a comma-separated list -> scenario names; ValueError names a bad one."""
    if text.strip() == 'all':
        return list(SCENARIOS)
    names = [s.strip() for s in text.split(',') if s.strip()]
    if 'all' in names:
        raise ValueError(f'scenario all runs every scenario and cannot be combined with others '
                         f'(got {text!r}); give all alone, or a list of '
                         f'{", ".join(SCENARIOS)}')
    bad = [s for s in names if s not in SCENARIOS]
    if bad or not names:
        raise ValueError(f'unknown scenario {", ".join(bad) or repr(text)}; choose from '
                         f'{", ".join(SCENARIOS)} or all')
    twice = sorted({s for s in names if names.count(s) > 1})
    if twice:       # the second run moved the first's folder aside: one row hid the other
        raise ValueError(f'--scenario lists {", ".join(twice)} more than once; list each once')
    return names


def format_table(rows) -> str:
    """Format the result rows as a fixed-width table."""
    head = ('scenario', 'outcome', 'lost', 'duplicated', 'recover_s', 'runtime_s', 'rejected')
    lines = [head]
    for r in rows:
        rej = ','.join(f'{k}={v}' for k, v in sorted(r['rejected'].items())) or '-'
        lines.append((r['scenario'], r['outcome'], _fmt(r['lost']), _fmt(r['duplicated']),
                      _fmt(r['recover_s']), _fmt(r['runtime_s']), rej))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ['  '.join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines]
    details = [f'  {r["scenario"]}: {r["detail"]}' for r in rows if r['detail']]
    return '\n'.join(out + details)


def _fmt(x) -> str:
    return '-' if x is None else f'{x:.4g}' if isinstance(x, float) else str(x)


def run(args) -> int:
    """Run the scenarios; 0 when every one is ok, 1 otherwise, 2 on bad options."""
    try:
        names = parse_scenarios(args.scenario)
        # the bounds of rog fleet itself (the settings table): beyond them every scenario's
        # fleet was refused, one failed row each, instead of one usage error here
        workers, seed = settings.BY_NAME['workers'], settings.BY_NAME['seed']
        if not 2 <= args.workers <= workers.high:
            raise ValueError(f'--workers must be in [2, {workers.high}] (at most what rog '
                             f'fleet runs), got {args.workers}')
        checks.count('--iterations', args.iterations, MIN_ITERATIONS, MAX_ITERATIONS)
        if not seed.low <= args.seed <= seed.high:
            raise ValueError(f'--seed must be in {seed.range_text()} (what rog fleet takes), '
                             f'got {args.seed}')
        outage_s, flood_s = _scenario_seconds(args, names)
        if args.sync not in CHAOS_SYSTEMS:
            name = args.sync.partition(':')[0].strip().lower()
            why = ('the scenarios run its default threshold; give the name alone'
                   if name in CHAOS_SYSTEMS else 'not a system the scenarios run')
            raise ValueError(f'--sync must be one of {", ".join(CHAOS_SYSTEMS)}, got '
                             f'{args.sync!r} ({why})')
        checks.output_dir('--out', args.out)
        robot_keys = bool(settings.BY_NAME['robot_keys'].parse(args.robot_keys))
        cfg = ChaosConfig(out=os.path.abspath(args.out), workers=args.workers,
                          iterations=args.iterations, outage_s=outage_s,
                          flood_s=flood_s, seed=args.seed, sync=args.sync,
                          fleet_key_file=os.path.abspath(args.fleet_key_file)
                          if args.fleet_key_file else '',
                          auth=args.auth, robot_keys=robot_keys)
        given_key(cfg)      # the nodes read it again: refused here, before any starts
    except ValueError as err:
        print(f'rog chaos: {" ".join(str(err).split())}', file=sys.stderr)
        return 2
    os.makedirs(cfg.out, exist_ok=True)
    rows = []
    try:
        run_scenarios(names, cfg, progress=lambda s: print(s, file=sys.stderr, flush=True),
                      rows=rows)
    except KeyboardInterrupt:
        # Ctrl-C, SIGTERM or SIGHUP: the scenarios finished so far are written, marked, and
        # the interrupt goes on to rog's main (one line; status 130, 143 or 129)
        atomic_write_text(os.path.join(cfg.out, 'chaos.json'),
                          json.dumps({'scenarios': rows, 'interrupted': True}, indent=1))
        raise
    atomic_write_text(os.path.join(cfg.out, 'chaos.json'),
                      json.dumps({'scenarios': rows}, indent=1))
    if args.json:
        print(json.dumps({'scenarios': rows}))
    else:
        print(format_table(rows))
    return 0 if all(r['outcome'] == 'ok' for r in rows) else 1
