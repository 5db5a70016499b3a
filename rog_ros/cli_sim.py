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
"""``rog sim``: its options, checks, progress line and command."""

from __future__ import annotations

import json
import os
import sys

from rog_ros.cli_options import (add_evaluations_option, add_init_model_option,
                                 add_model_options, bad_model, check_common,
                                 check_real_compute, check_workload_options, held,
                                 init_model_error, MAX_ITERATIONS, one_line, sim_options,
                                 valid,
                                 WORKLOAD_CHOICES, workload_options)
from rog_ros.nodes.output_lock import OutputInUse


TOY_SYSTEMS = 'bsp,ssp:4,rog:4'
"""Systems `rog sim --toy` runs unless --systems names others."""
SIM_DEFAULTS = {'workload': 'mpcol', 'sync': 'rog', 'trace': 'outdoors', 'staleness': 4}
"""Defaults of `rog sim` options that --toy does not use (argparse leaves them None, so that
an option the user gave can be told from a default)."""


def add_parser(sub) -> None:
    """Add ``rog sim`` to the subcommands ``sub``."""
    p = sub.add_parser('sim', allow_abbrev=False, help='run the protocol in virtual time',
                       description='Run one synchronisation system on a workload over '
                                   'trace-driven Wi-Fi links in virtual time (real training, '
                                   'device-profile compute time), or --toy: BSP/SSP/Rog on a '
                                   'small convex problem.')
    p.add_argument('--toy', action='store_true', help='toy convex problem, several systems')
    p.add_argument('--systems', default=None,
                   help=f'--toy: comma-separated systems (default {TOY_SYSTEMS}); one system of '
                        'a workload is --sync, several are rog compare')
    p.add_argument('--workload', default=None,
                   help=f'{WORKLOAD_CHOICES} (default mpcol)')
    p.add_argument('--sync', default=None,
                   help='bsp | ssp | rog | flown, or a system with its own engines such as '
                        'adacomp[:c], asgd, comp-asgd[:c], gsp, gsp+gds, asp (default rog)')
    p.add_argument('--staleness', type=int, default=None,
                   help='threshold S of ssp, rog and flown (default 4); --sync may name it '
                        'instead (rog:8), not both with different values')
    p.add_argument('--workers', type=int, default=4, help='number of workers (default 4)')
    p.add_argument('--trace', default=None,
                   help='bandwidth trace: preset name or file (CSV t_seconds,mbps or a '
                        'table with units in its header, "t bw" lines, a testbed bw_replay '
                        'log, a Mahimahi trace, an iperf3 -J report or iperf output, an '
                        'HSDPA or 4G/LTE drive log, a G-NetTrack Pro or Lumos5G CSV, a '
                        'time,rx_bytes counter, a sar -n DEV report; gzip-compressed too; a '
                        "ROS 2 bag of netmon's LinkStats, robot r taking the bag's robot of "
                        'rank r, BAG#NAME one robot, BAG#emulated the emulated_mbps), '
                        'or a comma-separated list of them, robot r taking entry r mod k; a '
                        'file is replayed from a different offset per robot and seed, '
                        'looping (default outdoors)')
    p.add_argument('--iterations', type=int, default=None,
                   help=f'iterations per worker, 1 to {MAX_ITERATIONS} (default: the workload '
                        'budget; --toy: 40)')
    p.add_argument('--seed', type=int, default=0, help='random seed (default 0)')
    p.add_argument('--out', default=None,
                   help='write summary.json, timeseries.csv and events.csv here (an '
                        "earlier run's results there move to OUT/previous first)")
    add_init_model_option(p)
    add_evaluations_option(p)
    add_model_options(p)
    p.set_defaults(func=_cmd_sim)


def _system_spec(sync: str, staleness: int) -> str:
    """``--sync`` with ``--staleness`` joined where it has none: rog#tag -> rog:4#tag."""
    from rog_ros.sim.systems import lookup
    name, hash_, tags = sync.partition('#')
    if name == 'bsp' or ':' in name or lookup(sync) is not None or lookup(name) is not None:
        return sync                                                  # own engines: own defaults
    return f'{name}:{staleness}{hash_}{tags}'


def _check_sim(args) -> None:
    from rog_ros import checks
    check_common(args)
    given = [k for k in SIM_DEFAULTS if getattr(args, k) is not None]
    for key in SIM_DEFAULTS:
        if getattr(args, key) is None:
            setattr(args, key, SIM_DEFAULTS[key])
    checks.integer('--staleness', args.staleness, 0, checks.max_staleness())
    checks.integer('--seed', args.seed, 0, checks.max_seed())
    if args.toy:
        if args.evaluations is not None:
            raise checks.ConfigError('--evaluations does not apply to --toy (it reports the '
                                     'final loss only)')
        if args.init_model is not None:
            raise checks.ConfigError('--init-model does not apply to --toy (a convex problem '
                                     'without a model file)')
        ignored = [f'--{k}' for k in given] + [
            flag for flag, used in (('--out', args.out is not None),
                                    ('--model', args.model is not None),
                                    ('--real-compute', args.real_compute),
                                    ('--workload-option', bool(args.workload_option)))
            if used]
        if ignored:
            one = len(ignored) == 1
            raise checks.ConfigError(f'{", ".join(ignored)} {"does" if one else "do"} not apply '
                                     'to --toy (it runs --systems on a convex problem and '
                                     f'prints a table); leave {"it" if one else "them"} out, or '
                                     'drop --toy')
        if args.systems is None:
            args.systems = TOY_SYSTEMS
        _check_toy_systems(args.systems)
        return
    if args.systems is not None:
        raise checks.ConfigError(f'--systems {args.systems} applies to --toy only: run one '
                                 'system with --sync (e.g. --sync adacomp), several with '
                                 'rog compare --systems')
    checks.workload('--workload', args.workload)
    if 'staleness' in given:
        _check_staleness_fits_sync(args.sync, args.staleness)
    checks.system('--sync', args.sync)          # the name as typed, before a threshold joins it
    checks.system('--sync/--staleness', _system_spec(args.sync, args.staleness))
    checks.trace('--trace', args.trace)
    check_real_compute(args)
    check_workload_options(args, [args.sync])
    if args.out is not None:
        checks.output_dir('--out', args.out)
        checks.result_paths('--out', args.out, SIM_RESULTS)
        _check_not_a_comparison(args.out)
        _check_previous(args.out)


def _check_previous(out: str) -> None:
    """
    Refuse an ``--out`` whose earlier run cannot be moved to ``out/previous`` at the run's end.

    A file named ``previous`` there (or a folder named like a result in it) failed the move
    after the whole run, with a traceback, and the run's results were not written.
    """
    from rog_ros import checks
    from rog_ros.nodes.run_outputs import earlier_results, PREVIOUS, RESULT_FILES
    if earlier_results(out):
        checks.result_paths('--out', out, folders=(PREVIOUS,))
        if os.path.isdir(os.path.join(out, PREVIOUS)):
            checks.result_paths('--out', os.path.join(out, PREVIOUS), RESULT_FILES)


SIM_RESULTS = ('summary.json', 'timeseries.csv', 'events.csv')
"""The files ``rog sim --out`` writes."""


def _check_not_a_comparison(out: str) -> None:
    """Refuse an ``--out`` that holds a comparison: the run's summary.json would replace its."""
    from rog_ros import checks
    from rog_ros.experiments.comparison_folder import comparison_meta
    if comparison_meta(out) is not None:
        raise checks.ConfigError(f'--out {out}: holds a comparison of rog compare (its '
                                 'summary.json, report.md and runs/), which this run would '
                                 'overwrite; give another folder')


def _check_toy_systems(text: str) -> None:
    """Check every system of ``rog sim --toy --systems`` before the first one runs."""
    from rog_ros import checks
    from rog_ros.sim import systems
    specs = checks.name_list('--systems', text)
    for system in specs:
        if systems.lookup(system) is not None:
            raise checks.ConfigError(f'--systems: {system} has engines of its own, which --toy '
                                     'does not run; --toy runs bsp, ssp:S, rog:S and flown:S '
                                     f'(default {TOY_SYSTEMS}); run {system} with --sync')
        checks.system('--systems', system)
    checks.distinct('--systems', specs, checks.system_key)


_THRESHOLD_IN_NAME = {'gsp': ('the SSP threshold inside its groups', 3),
                      'gsp+gds': ('the SSP threshold inside its groups', 3),
                      'aet': ('the delay checkpoint (rounds a neighbour may lag)', 1)}
"""Reference systems whose ``name:N`` plays the part of a threshold: (what N is, default)."""


def _check_staleness_fits_sync(sync: str, staleness: int) -> None:
    """Refuse an explicit --staleness that --sync overrides or does not use."""
    from rog_ros import checks
    from rog_ros.sim import systems
    name, colon, threshold = sync.split('#')[0].partition(':')
    in_name = _THRESHOLD_IN_NAME.get(name.strip().lower())
    if in_name is not None:
        what, default = in_name
        raise checks.ConfigError(f'--staleness does not apply to --sync {sync}: {what} goes in '
                                 f'its name, --sync {name.strip()}:{staleness} (default '
                                 f'{default})')
    if name.strip().lower() == 'bsp' or systems.lookup(sync) is not None:
        raise checks.ConfigError(f'--staleness does not apply to --sync {sync} (it has no '
                                 'staleness threshold); leave --staleness out')
    if colon and threshold.strip().lstrip('-').isdigit() and int(threshold) != staleness:
        raise checks.ConfigError(f'--staleness {staleness} conflicts with the threshold in '
                                 f'--sync {sync}; give the threshold once (--sync '
                                 f'{name.strip()}:S, or --sync {name.strip()} --staleness S)')


def _cmd_sim(args) -> int:
    if not valid('rog sim', _check_sim, args):
        return 2
    if args.toy:
        from rog_ros.experiments.toy import HEADER, format_table, run_toy
        rows = []
        for system in [s.strip() for s in args.systems.split(',') if s.strip()]:
            try:
                res = run_toy(system, workers=args.workers, iterations=args.iterations or 40,
                              seed=args.seed)
            except ValueError as err:
                print(f'rog sim: {err}', file=sys.stderr)
                return 2
            except RuntimeError as err:       # the run did not finish (DESIGN 8)
                print(f'rog sim: run failed: {err}', file=sys.stderr)
                return 1
            rows.append(res.row())
            print(f'  {system}: done', file=sys.stderr)
        print(format_table(rows, HEADER))
        return 0
    from rog_ros.sim.simulator import SimConfig, simulate
    if bad_model(args):
        print(f'rog sim: {bad_model(args)}', file=sys.stderr)
        return 2
    cfg = SimConfig(workload=args.workload, system=_system_spec(args.sync, args.staleness),
                    workers=args.workers, trace=args.trace, seed=args.seed,
                    iterations=args.iterations, workload_options=workload_options(args),
                    init_model=args.init_model, **sim_options(args))
    bad = init_model_error(args)
    if bad:
        print(f'rog sim: {bad}', file=sys.stderr)
        return 2

    progress = _SimProgress(sys.stderr)
    try:
        with held(args.out, 'rog sim'):
            try:
                rec = simulate(cfg, progress=progress)
            except (ValueError, KeyError, FileNotFoundError) as err:
                progress.close()
                print(f'rog sim: {one_line(err)}', file=sys.stderr)
                return 2
            progress.close()
            if args.out:
                _set_aside_earlier_run(args.out)
            summary = rec.write(args.out) if args.out else rec.summary()
    except OutputInUse as err:
        print(f'rog sim: {err}', file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=2, default=str))
    if summary.get('error'):       # truncated: the summary says so, and so does the exit code
        print(f'rog sim: run failed: {summary["error"]}', file=sys.stderr)
        return 1
    if args.out:                   # (the JSON above is for scripts; this is for the reader)
        from rog_ros.nodes.fleet_progress import result_line
        done = os.path.join(args.out, 'summary.json')
        print(f'rog sim: done; {done}\nrog sim: {result_line(done)} (simulated time)\n'
              f'rog sim: plots and a report: rog report {args.out}', file=sys.stderr)
    return 0


def _set_aside_earlier_run(out: str) -> None:
    """
    Move an earlier run's results in ``out`` to ``out/previous`` (as a fleet does), and say so.

    Before, this run's summary.json and CSVs replaced them, and the earlier run's report.md,
    plots and (a fleet's) model.pt stayed beside results they were not made from. Done just
    before writing: a run that fails or is stopped leaves the earlier one as it was.
    """
    from rog_ros.nodes.run_outputs import set_aside_earlier_run
    line = set_aside_earlier_run(out, None)
    if line:
        print(f'rog sim: {line}', file=sys.stderr)


class _SimProgress:
    """
    ``rog sim``'s progress: one line redrawn on a terminal, a line every 5 s in a log file.

    Redrawn with a carriage return into a file, the whole run's progress was one long line.
    """

    def __init__(self, stream, every_s: float = 5.0):
        """Write to ``stream``; off a terminal, at most one line per ``every_s`` seconds."""
        self.stream, self.every_s = stream, every_s
        self.tty = bool(getattr(stream, 'isatty', lambda: False)())
        self._shown, self._last = None, ''

    def __call__(self, now, iteration, metrics) -> None:
        """Show the simulated time, the mean iteration and the latest accuracy."""
        import time
        acc = metrics.get('accuracy', float('nan'))
        self._last = f'  t={now:8.1f}s  iteration {iteration:7.1f}  accuracy {acc:.3f}'
        if self.tty:
            self.stream.write('\r' + self._last)
        elif self._shown is None or time.monotonic() - self._shown >= self.every_s:
            self.stream.write(self._last + '\n')
            self._last = ''
        else:
            return
        self._shown = time.monotonic()
        self.stream.flush()

    def close(self) -> None:
        """End the line on a terminal; in a file, write the last state if it is not there."""
        if self.tty:
            self.stream.write('\n')
        elif self._last:
            self.stream.write(self._last + '\n')
        self.stream.flush()
