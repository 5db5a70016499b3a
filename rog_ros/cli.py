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
The ``rog`` command: simulate, benchmark and inspect fleet training.

    rog sim --toy [--systems bsp,ssp:4,rog:4]   protocol engines on a toy problem
    rog sim --workload mpcol --sync rog ...      one simulated run (summary.json, CSVs)
    rog compare --workload mpcol --out DIR        systems x seeds, report and plots
    rog reproduce [PAPER] --out DIR               the paper's experiment set, one report
    rog report RUN_DIR                            report.md and plots of a fleet or sim run
    rog fleet --workload mpcol --sync rog ...     server, workers, netmon as real processes
    rog robot --role server|worker ...            one robot's nodes of a real fleet
    rog chaos --scenario all [--json]             fault scenarios against a real local fleet
    rog bench overhead|codec|transport|server|faults
                                                  what rows, DEFSGDM, DDS, the server cost;
                                                  random fault sweeps of the engines
    rog trace gen|stats|plot|replay|convert       bandwidth traces
    rog security key|keystore                     fleet key, SROS2 keystore
    rog doctor                                    is this machine ready, and what to fix
    rog --version                                 the installed version
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys

from rog_ros.nodes.output_lock import OutputInUse

TOY_SYSTEMS = 'bsp,ssp:4,rog:4'
"""Systems `rog sim --toy` runs unless --systems names others."""
DEFAULT_COMPARE_SYSTEMS = 'bsp,ssp:4,flown:4,rog:4'
"""Systems of `rog compare` unless --systems names others: BSP, SSP-4, FLOWN-4 and Rog-4, the
four of issue 10's acceptance (the paper's threshold 20 too: `rog reproduce`). With 5 seeds
of 300 iterations, 20 runs of 35-100 s of one core by machine: 7-9 minutes on 2 cores of the
AMD EPYC machines (issue 3 asks for under 10; ssp:20 and rog:20 as well took 13.4 minutes), 14
to 17 on the slower Intel Xeon ones, where each of two runs at once takes a fifth longer than
one alone."""
SIM_DEFAULTS = {'workload': 'mpcol', 'sync': 'rog', 'trace': 'outdoors', 'staleness': 4}
"""Defaults of `rog sim` options that --toy does not use (argparse leaves them None, so that
an option the user gave can be told from a default)."""
_WORKLOAD_CHOICES = ('workload: mpcol, eacol, glyphs, toy, chaos, or your own builder as '
                     'module:function (docs/workloads.md)')
MAX_ITERATIONS = 1_000_000
"""Most --iterations of `rog sim`, `rog compare` and `rog reproduce`: a simulated run stops at
its budget of 10 million events (SimConfig.max_events), and a worker-iteration takes about 10
of them, so a larger budget could only fail, after hours."""


class _OneLineParser(argparse.ArgumentParser):
    """
    An ArgumentParser whose usage errors are one line: the command, the error, where to look.

    argparse prints the whole usage before the error: 18 lines for ``rog fleet``, with the
    mistyped option somewhere in the middle. Subcommands' parsers are of this class too
    (``add_subparsers`` makes them of its parser's class), so each names itself.
    """

    def error(self, message: str):
        """Print ``PROG: MESSAGE`` (with the closest option to a mistyped one); exit 2."""
        hint = _closest_options(self, message) if message.startswith('unrecognized') else ''
        self.exit(2, f'{self.prog}: {message}{hint}; see {self.prog} --help\n')


def _closest_options(parser, message: str) -> str:
    """
    Return `` (did you mean --x?)`` for the options ``message`` names that are near one.

    A flag given in part (``--iter``: options are taken in full only, ``allow_abbrev`` off) is
    near the options it begins.
    """
    import difflib
    known = [o for o in parser._option_string_actions if o.startswith('--')]
    guesses = []
    for word in message.split(':', 1)[-1].split():
        flag = word.split('=')[0]
        if word.startswith('--') and flag not in known:
            begun = sorted(o for o in known if o.startswith(flag)) if len(flag) > 3 else []
            guesses += begun or difflib.get_close_matches(flag, known, n=1, cutoff=0.75)
    return f' (did you mean {", ".join(guesses)}?)' if guesses else ''


def _add_sim(sub) -> None:
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
                   help=f'{_WORKLOAD_CHOICES} (default mpcol)')
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
                        'time,rx_bytes counter, a sar -n DEV report; gzip-compressed too), '
                        'or a comma-separated list of them, robot r taking entry r mod k; a '
                        'file is replayed from a different offset per robot and seed, '
                        'looping (default outdoors)')
    p.add_argument('--iterations', type=int, default=None,
                   help='iterations per worker (default: the workload budget; --toy: 40)')
    p.add_argument('--seed', type=int, default=0, help='random seed (default 0)')
    p.add_argument('--out', default=None,
                   help='write summary.json, timeseries.csv and events.csv here')
    _add_init_model_option(p)
    _add_evaluations_option(p)
    _add_model_options(p)
    p.set_defaults(func=_cmd_sim)


def _add_init_model_option(p) -> None:
    p.add_argument('--init-model', default=None,
                   help="start from these weights instead of the workload's pre-trained "
                        "checkpoint: a state_dict file or a fleet run's --out directory (its "
                        'model.pt)')


def _init_model_error(args) -> str | None:
    """Why ``--init-model`` does not fit the workload, or None (checked before any run)."""
    if not getattr(args, 'init_model', None):
        return None
    from rog_ros.sim.simulator import config_workload, SimConfig
    try:
        config_workload(SimConfig(workload=args.workload, init_model=args.init_model,
                                  workload_options=_workload_options(args)))
    except (ValueError, KeyError) as err:      # KeyError: a plug-in's registry
        return f'--init-model: {_one_line(err)}'
    return None


def _one_line(err: Exception) -> str:
    """Return an error's message on one line; a KeyError's without the quotes str() adds."""
    text = err.args[0] if isinstance(err, KeyError) and len(err.args) == 1 else err
    return ' '.join(str(text).split())


def _add_evaluations_option(p) -> None:
    p.add_argument('--evaluations', type=int, default=None,
                   help='evaluations of the shared model over each run (default 24). Time '
                        'to target is read from the 3-evaluation moving average, which '
                        'lags the model by one to two evaluation intervals: raise this for '
                        'a short iteration budget (EACOL: 80, one per iteration)')


def _add_model_options(p) -> None:
    p.add_argument('--model', default=None,
                   help='EACOL model (convmlp-cpu, convmlp-s, convmlp-m, convmlp-l). A big '
                        'model is simulated with surrogate compute: convmlp-cpu trains for '
                        'real and carries the big model as ballast, so messages have its '
                        'size and rows (rog_ros.workloads.surrogate). Not for the reference '
                        'systems (adacomp, gsp, aet, ...): they train the default model')
    p.add_argument('--real-compute', action='store_true',
                   help='with --model: run the real model (hours on a CPU for convmlp-m)')
    p.add_argument('--workload-option', action='append', default=None, metavar='KEY=VALUE',
                   help="an option of the workload's builder, repeatable: e.g. "
                        '--workload-option dataset=cifar100 --workload-option '
                        'data_dir=~/data for EACOL on your CIFAR-100 copy, or size=48 for '
                        'larger MPCOL maps; values are numbers, true/false, comma-separated '
                        'lists or text (docs/workloads.md lists the options)')


def _workload_options(args) -> dict:
    """Workload options from --model/--real-compute and --workload-option."""
    opts = {}
    if getattr(args, 'model', None) is not None:
        opts['model'] = args.model
        if args.model != 'convmlp-cpu' and not args.real_compute:
            opts['surrogate'] = True
    opts.update(getattr(args, 'workload_options_given', None) or {})
    return opts


def _check_workload_options(args, systems) -> None:
    """
    Parse and check --workload-option against the workload (sets workload_options_given).

    The reference systems' runners train the workload's defaults, so --model (and with it
    --real-compute) and --workload-option are refused when ``systems`` names one, before any
    run (``rog compare`` would otherwise compare different models under one setting).
    """
    from rog_ros import checks
    from rog_ros.sim.systems import lookup
    from rog_ros.workloads import options
    texts = getattr(args, 'workload_option', None)
    args.workload_options_given = {}
    own = [s for s in systems if lookup(s) is not None]
    if own and getattr(args, 'model', None) is not None:
        flags = '--model' + (' and --real-compute' if args.real_compute else '')
        other = ('' if getattr(args, 'sync', None) is not None else
                 f', or run {", ".join(own)} in a comparison of their own')
        raise checks.ConfigError(
            f'{flags} {"do" if args.real_compute else "does"} not apply to {", ".join(own)} '
            f"(the reference systems' runners train the workload's default model, not "
            f'{args.model}); leave {flags} out{other}')
    if not texts:
        return
    taken = {'model': '--model', 'surrogate': '--model'} if args.model is not None else {}
    try:
        given = options.parse_all(texts, taken)
        options.check(args.workload, given, texts)
    except (ValueError, KeyError) as err:      # KeyError: a plug-in's registry
        raise checks.ConfigError(f'--workload-option: {_one_line(err)}') from None
    if args.workload == 'eacol' and 'model' in given:
        raise checks.ConfigError(f'--workload-option model={given["model"]}: give the EACOL '
                                 'model with --model (it simulates a big model with surrogate '
                                 'compute; add --real-compute to run it)')
    own = [s for s in systems if lookup(s) is not None]
    if own:
        raise checks.ConfigError(f'--workload-option does not apply to {", ".join(own)} (the '
                                 "reference systems' runners train the workload's defaults)")
    args.workload_options_given = given


def _sim_options(args) -> dict:
    """Return the SimConfig fields set on the command line (``--evaluations``)."""
    if getattr(args, 'evaluations', None) is None:
        return {}
    return {'evaluations': args.evaluations}


def _bad_model(args) -> str | None:
    """Why --model cannot be used here, or None."""
    if getattr(args, 'model', None) is None:
        return None
    if args.workload != 'eacol':
        return '--model applies to --workload eacol'
    from rog_ros.workloads.eacol import _MODELS
    if args.model not in _MODELS:
        return f'unknown EACOL model {args.model!r}; expected one of {sorted(_MODELS)}'
    return None


def _system_spec(sync: str, staleness: int) -> str:
    """``--sync`` with ``--staleness`` joined where it has none: rog#tag -> rog:4#tag."""
    from rog_ros.sim.systems import lookup
    name, hash_, tags = sync.partition('#')
    if name == 'bsp' or ':' in name or lookup(sync) is not None or lookup(name) is not None:
        return sync                                                  # own engines: own defaults
    return f'{name}:{staleness}{hash_}{tags}'


def _valid(prog: str, check, args) -> bool:
    """Run ``check(args)``; on a bad option print one line naming it and return False."""
    from rog_ros.checks import ConfigError
    try:
        check(args)
    except ConfigError as err:
        print(f'{prog}: {err}', file=sys.stderr)
        return False
    return True


def _check_common(args) -> None:
    """Check the options sim, compare and reproduce share, each bounded: they reach torch."""
    from rog_ros import checks
    checks.integer('--workers', args.workers, 1, 1024)
    if args.iterations is not None:
        checks.integer('--iterations', args.iterations, 1, MAX_ITERATIONS)
    if getattr(args, 'evaluations', None) is not None:
        checks.integer('--evaluations', args.evaluations, 1, 100_000)


def _check_sim(args) -> None:
    from rog_ros import checks
    _check_common(args)
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
    _check_real_compute(args)
    _check_workload_options(args, [args.sync])
    if args.out is not None:
        checks.output_dir('--out', args.out)


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


def _check_real_compute(args) -> None:
    from rog_ros import checks
    if getattr(args, 'real_compute', False) and getattr(args, 'model', None) is None:
        raise checks.ConfigError('--real-compute applies to a --model (e.g. --workload eacol '
                                 '--model convmlp-m --real-compute); give --model or leave '
                                 '--real-compute out')


def _check_compare(args) -> None:
    from rog_ros import checks
    _check_common(args)
    checks.workload('--workload', args.workload)
    checks.trace('--trace', args.trace)
    specs = checks.name_list('--systems', args.systems)
    for system in specs:
        checks.system('--systems', system)
    checks.distinct('--systems', specs, checks.system_key)     # rog and rog:4: one system
    checks.distinct('--seeds', checks.int_list('--seeds', args.seeds, 0, checks.max_seed()))
    if args.jobs is not None:
        checks.integer('--jobs', args.jobs, 1, 1024)
    _check_real_compute(args)
    _check_workload_options(args, checks.name_list('--systems', args.systems))
    checks.output_dir('--out', args.out)


REPRODUCE_ROG_ONLY = {'workloads': 'mpcol', 'workers': 4, 'iterations': None,
                      'no_eacol_m': False}
"""Options of `rog reproduce` (with their defaults) that only the Rog paper's set takes."""


def _check_reproduce(args) -> None:
    from rog_ros import checks
    from rog_ros.experiments.reproduce import REPRODUCTIONS
    if args.what not in REPRODUCTIONS:
        raise checks.ConfigError(f'unknown paper {args.what!r}; choose one of '
                                 f'{sorted(REPRODUCTIONS)}')
    if args.what != 'rog':
        given = [f'--{k.replace("_", "-")}' for k in REPRODUCE_ROG_ONLY
                 if getattr(args, k) not in (None, False)]
        if given:
            raise checks.ConfigError(f'{", ".join(given)}: rog reproduce {args.what} runs its '
                                     "paper's own settings; these apply to the Rog set only")
    for key, default in REPRODUCE_ROG_ONLY.items():
        if getattr(args, key) is None:
            setattr(args, key, default)
    _check_common(args)
    for wl in checks.name_list('--workloads', args.workloads):
        checks.workload('--workloads', wl)
    if args.seeds is not None:
        checks.distinct('--seeds', checks.int_list('--seeds', args.seeds, 0, checks.max_seed()))
    checks.output_dir('--out', args.out)


def _cmd_sim(args) -> int:
    if not _valid('rog sim', _check_sim, args):
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
    if _bad_model(args):
        print(f'rog sim: {_bad_model(args)}', file=sys.stderr)
        return 2
    cfg = SimConfig(workload=args.workload, system=_system_spec(args.sync, args.staleness),
                    workers=args.workers, trace=args.trace, seed=args.seed,
                    iterations=args.iterations, workload_options=_workload_options(args),
                    init_model=args.init_model, **_sim_options(args))
    bad = _init_model_error(args)
    if bad:
        print(f'rog sim: {bad}', file=sys.stderr)
        return 2

    progress = _SimProgress(sys.stderr)
    try:
        with _held(args.out, 'rog sim'):
            try:
                rec = simulate(cfg, progress=progress)
            except (ValueError, KeyError, FileNotFoundError) as err:
                progress.close()
                print(f'rog sim: {_one_line(err)}', file=sys.stderr)
                return 2
            progress.close()
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


def _add_compare(sub) -> None:
    p = sub.add_parser('compare', allow_abbrev=False,
                       help='several systems x seeds, with report and plots',
                       description='Compare synchronisation systems on one workload and '
                                   'trace in the simulator; writes DIR/summary.json, '
                                   'DIR/report.md and PNG plots. Finished runs of the same '
                                   'settings are reused (an interrupted comparison resumes); '
                                   'runs in DIR made with other settings are run again.')
    p.add_argument('--workload', default='mpcol',
                   help=f'{_WORKLOAD_CHOICES} (default mpcol)')
    p.add_argument('--trace', default='outdoors',
                   help='trace preset or file (any format --trace of rog sim takes), or a '
                        'comma-separated list, robot r taking entry r mod k; a file is '
                        'replayed from a different offset per robot and seed, looping '
                        '(default outdoors)')
    p.add_argument('--systems', default=DEFAULT_COMPARE_SYSTEMS,
                   help=f'comma-separated systems (default {DEFAULT_COMPARE_SYSTEMS}, 5 '
                        'seeds in 7 to 17 minutes on 2 cores, by machine; add ssp:20,rog:20 '
                        "for the paper's threshold 20)")
    p.add_argument('--workers', type=int, default=4, help='workers (default 4)')
    p.add_argument('--seeds', default='0,1,2,3,4',
                   help='comma-separated seeds (default 0,1,2,3,4: medians need several)')
    p.add_argument('--iterations', type=int, default=None,
                   help='iterations per worker (default: the workload budget)')
    p.add_argument('--jobs', type=int, default=None,
                   help='runs in parallel (default: one per CPU core)')
    p.add_argument('--out', required=True, help='output directory')
    _add_init_model_option(p)
    _add_evaluations_option(p)
    _add_model_options(p)
    p.set_defaults(func=_cmd_compare)


def _cmd_compare(args) -> int:
    if not _valid('rog compare', _check_compare, args):
        return 2
    from rog_ros.experiments.compare import compare
    from rog_ros.experiments.report_table import table_markdown
    seeds = [int(s) for s in args.seeds.split(',') if s.strip()]
    systems = [s.strip() for s in args.systems.split(',') if s.strip()]
    bad = _bad_model(args) or _init_model_error(args)
    if bad:
        print(f'rog compare: {bad}', file=sys.stderr)
        return 2
    sim_options = _sim_options(args)
    if args.init_model:
        sim_options['init_model'] = args.init_model
    try:
        with _held(args.out, 'rog compare'):
            res = compare(args.workload, args.trace, systems, args.workers, seeds, args.out,
                          iterations=args.iterations, jobs_parallel=args.jobs,
                          workload_options=_workload_options(args), sim_options=sim_options)
    except OutputInUse as err:
        print(f'rog compare: {err}', file=sys.stderr)
        return 2
    except (ValueError, KeyError) as err:      # KeyError: a plug-in's workload registry
        print(f'rog compare: {_one_line(err)}', file=sys.stderr)
        return 2
    print(table_markdown(res['systems']))
    print(f'\nreport: {args.out}/report.md')
    failed = sum(r.get('failed', 0) for r in res['systems'])
    if failed:
        runs = sum(r.get('runs', 0) for r in res['systems'])
        print(f'rog compare: {failed} of {runs} runs failed (excluded from the means; see '
              f'{args.out}/report.md)', file=sys.stderr)
        return 1
    return 0


def _reproduce_seeds_help() -> str:
    """Return ``--seeds``' help, written from the seeds each paper runs (it cannot drift)."""
    from rog_ros.experiments.reproduce import DEFAULT_SEEDS
    papers = {}
    for name, seeds in DEFAULT_SEEDS.items():
        papers.setdefault(','.join(map(str, seeds)), []).append(name)
    said = '; '.join(f'{", ".join(names)}: {seeds}' for seeds, names in papers.items())
    return f'comma-separated seeds (default by PAPER: {said})'


def _add_reproduce(sub) -> None:
    p = sub.add_parser('reproduce', allow_abbrev=False,
                       help="the paper's experiment set in the simulator",
                       description='Indoors/outdoors comparisons, threshold sensitivity and '
                                   'ablations on MPCOL (and EACOL with --workloads), EACOL '
                                   'with ConvMLP-M messages on outdoors, one report. '
                                   'Interrupted runs resume.')
    p.add_argument('what', nargs='?', default='rog', metavar='PAPER',
                   help='which paper (default rog); adacomp, gsp, aet, fleet: another '
                        "reference paper's headline trend, small scale on generated data")
    p.add_argument('--out', required=True, help='output directory')
    p.add_argument('--workloads', default=None,
                   help='comma-separated (default mpcol; rog only)')
    p.add_argument('--seeds', default=None, help=_reproduce_seeds_help())
    p.add_argument('--workers', type=int, default=None, help='workers (default 4; rog only)')
    p.add_argument('--iterations', type=int, default=None,
                   help='iterations per worker (rog only)')
    p.add_argument('--quick', action='store_true',
                   help='one seed, fewer thresholds: 29 MPCOL runs (24 computed, 5 copies of '
                        'an identical run another part made) and 4 EACOL ConvMLP-M runs, '
                        '14 to 25 minutes on 2 cores, by machine (without --quick: 5 seeds '
                        'and all '
                        'thresholds, hours); interrupted, it resumes when run again into the '
                        'same --out')
    p.add_argument('--no-eacol-m', action='store_true',
                   help='skip EACOL with ConvMLP-M messages (surrogate compute, outdoors; rog '
                        'only)')
    p.set_defaults(func=_cmd_reproduce)


def _cmd_reproduce(args) -> int:
    if not _valid('rog reproduce', _check_reproduce, args):
        return 2
    from rog_ros.experiments.reproduce import DEFAULT_SEEDS, REPRODUCTIONS
    try:
        with _held(args.out, f'rog reproduce {args.what}'):
            if args.what != 'rog':
                opts = {} if args.seeds is None else {
                    'seeds': [int(s) for s in args.seeds.split(',') if s.strip()]}   # theirs
                path = REPRODUCTIONS[args.what](args.out, quick=args.quick, **opts)
            else:
                seeds = ([int(s) for s in args.seeds.split(',') if s.strip()] if args.seeds
                         else list(DEFAULT_SEEDS['rog']))
                path = REPRODUCTIONS['rog'](
                    args.out, quick=args.quick, seeds=seeds,
                    workloads=[w for w in args.workloads.split(',') if w],
                    workers=args.workers, iterations=args.iterations,
                    eacol_m=not args.no_eacol_m)
    except OutputInUse as err:
        print(f'rog reproduce: {err}', file=sys.stderr)
        return 2
    except (ValueError, KeyError) as err:      # KeyError: a plug-in's workload registry
        print(f'rog reproduce: {_one_line(err)}', file=sys.stderr)
        return 2
    print(f'report: {path}')
    return 0


def _add_bench(sub) -> None:
    p = sub.add_parser('bench', allow_abbrev=False, help='benchmarks (JSON on stdout)')
    bsub = p.add_subparsers(dest='bench_command',
                            metavar='{overhead,codec,transport,server,faults}')
    bsub.required = True
    o = bsub.add_parser('overhead', allow_abbrev=False,
                        help='per-iteration cost of row granularity vs SSP',
                        description='Run rog and ssp alternately on synthetic workers of a '
                                    'model in virtual time and report what row granularity '
                                    'costs per iteration, relative to the compute time '
                                    '(target < 5%). Prints JSON.')
    o.add_argument('--model', default='convmlp-m', help='convmlp-s|m|l (default convmlp-m)')
    o.add_argument('--workers', type=int, default=4, help='workers (default 4)')
    o.add_argument('--staleness', type=int, default=4, help='threshold S (default 4)')
    o.add_argument('--iterations', type=int, default=8, help='iterations (default 8)')
    o.add_argument('--repeats', type=int, default=3,
                   help='alternating rog/ssp runs; medians are reported (default 3)')
    o.add_argument('--threads', type=int, default=None,
                   help="torch intra-op threads (default: torch's own choice)")
    o.set_defaults(func=_cmd_bench_overhead)
    c = bsub.add_parser('codec', allow_abbrev=False,
                        help='DEFSGDM encode + decode time of a whole model',
                        description='Time DEFSGDM scaled-sign encoding (scales and sign '
                                    'packing) and decoding of a whole model of --params values. '
                                    'Prints JSON.')
    c.add_argument('--params', type=int, default=16_948_804,
                   help='model size (default: ConvMLP-M, 16,948,804)')
    c.add_argument('--repeats', type=int, default=5, help='timed repeats (default 5)')
    c.set_defaults(func=_cmd_bench_codec)
    t = bsub.add_parser('transport', allow_abbrev=False,
                        help='RowChunk goodput and latency over DDS and netns',
                        description='Measure RowChunk goodput over loopback Cyclone DDS, '
                                    'goodput over a trace-shaped veth pair between network '
                                    'namespaces (root only; skipped otherwise) and p95 chunk '
                                    'latency, between two processes. Prints JSON.')
    t.add_argument('--duration', type=float, default=3.0,
                   help='seconds of the loopback goodput measurement (default 3); the '
                        'netns one runs 4 s, one period of its 40/15 Mbit/s trace')
    t.set_defaults(func=_cmd_bench_transport)
    v = bsub.add_parser('server', allow_abbrev=False,
                        help='server CPU time per worker-iteration vs fleet size',
                        description="Time the parameter server's handlers (process CPU time) "
                                    'per worker-iteration for fleets of 4, 8, ... up to '
                                    '--workers synthetic workers, without training. Prints '
                                    'JSON.')
    v.add_argument('--workers', type=int, default=64,
                   help='largest fleet; runs 4, 8, ... doubling up to it (default 64)')
    v.add_argument('--iterations', type=int, default=3, help='iterations per worker (default 3)')
    v.add_argument('--staleness', type=int, default=4, help='threshold S (default 4)')
    v.add_argument('--row-params', type=int, default=4,
                   help='values per row of a split tensor (default 4)')
    v.add_argument('--model', default='convmlp-m',
                   help='model whose rows and tensors to use (default convmlp-m)')
    v.set_defaults(func=_cmd_bench_server)
    f = bsub.add_parser('faults', allow_abbrev=False,
                        help='random crash and membership sweeps: invariants kept?',
                        description='Random runs of the protocol engines in virtual time '
                                    'with message loss, duplication and reordering, worker '
                                    'and server crashes and restores, link outages and '
                                    'absence timeouts (docs/faults.md). Each run must end '
                                    'with exactly-once uplinks, every worker holding the '
                                    "model the server holds for it, and the fleet's final "
                                    'model bit for bit. Prints JSON; exit status 1 if any '
                                    'run broke one, with the command that replays it.')
    f.add_argument('--kind', choices=('crash', 'membership', 'both'), default='both',
                   help='which sweep (default both)')
    f.add_argument('--systems', default='rog:2,rog:4,ssp:2,bsp,flown:2',
                   help='comma-separated systems (default rog:2,rog:4,ssp:2,bsp,flown:2)')
    f.add_argument('--seeds', default='0-9',
                   help='seeds, e.g. 0-99 or 3,7 (default 0-9: 100 runs, about 75 s '
                        'on 2 cores)')
    f.add_argument('--final-model', choices=('on', 'off'), default='on',
                   help="send every robot the fleet's final model, as fleets do (default on)")
    f.add_argument('--jobs', type=int, default=None,
                   help='runs in parallel (default: one per CPU core)')
    f.set_defaults(func=_cmd_bench_faults)


def _cmd_bench_faults(args) -> int:
    from rog_ros.experiments.bench_faults import bench_faults, parse_seeds
    from rog_ros.protocol.policies import make_policy
    from rog_ros.sim.fault_sweep import KINDS
    systems = list(dict.fromkeys(s.strip() for s in args.systems.split(',') if s.strip()))
    try:
        seeds = parse_seeds(args.seeds)
        if not systems:
            raise ValueError('--systems: none given')
        for spec in systems:
            try:
                make_policy(spec)
            except ValueError as err:
                raise ValueError(f'--systems: {err}') from None
        if args.jobs is not None and args.jobs < 1:
            raise ValueError('--jobs must be >= 1')
    except ValueError as err:
        print(f'rog bench faults: {err}', file=sys.stderr)
        return 2
    kinds = KINDS if args.kind == 'both' else (args.kind,)
    res = bench_faults(kinds, systems, seeds, final_model=args.final_model == 'on',
                       jobs=args.jobs)
    print(json.dumps(res, indent=2))
    if res['broken']:
        print(f"rog bench faults: {res['broken']} of {res['runs']} runs broke an invariant "
              f"(replay one: {res['broken_runs'][0]['replay']})", file=sys.stderr)
        return 1
    return 0


def _check_bench_transport(args) -> None:
    from rog_ros.experiments.bench_transport import check_duration
    check_duration(args.duration)


def _cmd_bench_transport(args) -> int:
    if not _valid('rog bench transport', _check_bench_transport, args):
        return 2
    from rog_ros.experiments.bench_transport import bench_transport
    print(json.dumps(bench_transport(args.duration), indent=2))
    return 0


def _cmd_bench_server(args) -> int:
    from rog_ros.experiments.bench_server import bench_server
    if args.workers < 1 or args.iterations < 1 or args.row_params < 1 or args.staleness < 0:
        print('rog bench server: --workers, --iterations and --row-params must be >= 1, '
              '--staleness >= 0', file=sys.stderr)
        return 2
    sizes, n = [], min(4, args.workers)
    while n < args.workers:
        sizes.append(n)
        n *= 2
    try:
        res = bench_server(sizes + [args.workers], args.model, args.staleness,
                           args.iterations, args.row_params)
    except ValueError as err:
        print(f'rog bench server: {err}', file=sys.stderr)
        return 2
    print(json.dumps(res, indent=2))
    return 0


def _check_bench_overhead(args) -> None:
    from rog_ros import checks
    checks.integer('--workers', args.workers, 1, 1024)
    checks.integer('--staleness', args.staleness, 0)
    checks.integer('--iterations', args.iterations, 1)
    checks.integer('--repeats', args.repeats, 1)
    if args.threads is not None:
        checks.integer('--threads', args.threads, 1)


def _cmd_bench_overhead(args) -> int:
    if not _valid('rog bench overhead', _check_bench_overhead, args):
        return 2
    from rog_ros.experiments.bench import bench_overhead
    try:
        res = bench_overhead(args.model, args.workers, args.staleness, args.iterations,
                             repeats=args.repeats, threads=args.threads)
    except ValueError as err:
        print(f'rog bench overhead: {err}', file=sys.stderr)
        return 2
    print(json.dumps(res, indent=2))
    return 0


def _check_bench_codec(args) -> None:
    from rog_ros import checks
    checks.integer('--params', args.params, 1, 500_000_000)     # (2 GB per fp32 vector)
    checks.integer('--repeats', args.repeats, 1)


def _cmd_bench_codec(args) -> int:
    if not _valid('rog bench codec', _check_bench_codec, args):
        return 2
    from rog_ros.experiments.bench import bench_codec
    print(json.dumps(bench_codec(args.params, args.repeats), indent=2))
    return 0


def _add_report(sub) -> None:
    p = sub.add_parser('report', allow_abbrev=False,
                       help='plots and a Markdown summary of a fleet or sim run',
                       description='Write report.md and PNG plots into RUN_DIR from every '
                                   'summary.json/timeseries.csv below it; with events.csv, '
                                   'also who was suspended, let go or readmitted, and when '
                                   '(membership.png). A rog compare folder gets its '
                                   'comparison report written again from its runs (RUN_DIR/'
                                   "runs: the runs' report, with membership.png). Runs of "
                                   'several settings (runs/cmp beside a fleet of another '
                                   'size) get a row per system and setting; rows of two '
                                   'comparisons get no ratios between them. Refused: a '
                                   'folder where one row (a system at one setting) would '
                                   'average runs of two comparisons, or of a comparison and '
                                   'runs outside it; the line names the row and the folders. '
                                   "A system's seed run twice below RUN_DIR counts once, the "
                                   'newest run (one warning line).')
    p.add_argument('run_dir', metavar='RUN_DIR', help='output directory of rog fleet, '
                   'rog_server, rog sim or rog compare')
    p.set_defaults(func=_cmd_report)


def _cmd_report(args) -> int:
    from rog_ros.experiments.comparison_folder import comparison_meta
    from rog_ros.experiments.comparison_report import report_comparison
    from rog_ros.experiments.report import report_run

    def say(line: str) -> None:
        """Print a warning line of the report (plots skipped, settings mixed) to stderr."""
        print(f'rog report: {line}', file=sys.stderr)
    try:
        if comparison_meta(args.run_dir) is not None:
            # a rog compare folder: its own report again (ratios, equal-time accuracy, the
            # header that explains the columns), not the generic one of the runs below it
            path = report_comparison(args.run_dir, say=say)
        else:
            path = report_run(args.run_dir, say=say)
    except (OSError, ValueError) as err:
        print(f'rog report: {err}', file=sys.stderr)
        return 2
    print(path)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog='rog', allow_abbrev=False,
        description='Rog fleet training for ROS 2: simulate, benchmark, inspect.')
    parser.add_argument('--version', action='version', version=f'%(prog)s {_version()}')
    sub = parser.add_subparsers(dest='command', metavar='COMMAND')
    sub.required = True
    _add_sim(sub)
    _add_compare(sub)
    _add_reproduce(sub)
    _add_bench(sub)
    _add_report(sub)
    from rog_ros.nodes import fleet as cli_fleet
    cli_fleet.add_parser(sub)
    from rog_ros.experiments import chaos
    chaos.add_parser(sub)
    from rog_ros.net import cli_trace
    cli_trace.add_parser(sub)
    from rog_ros.nodes import cli_security
    cli_security.add_parser(sub)
    from rog_ros.nodes import robot
    robot.add_parser(sub)
    from rog_ros.nodes import doctor
    doctor.add_parser(sub)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a CI timeout, a job scheduler) or SIGHUP, handled as Ctrl-C is."""

    exit_status = 143       # 128 + SIGTERM (a plain KeyboardInterrupt: 130)

    def __init__(self, signum: int = 15):
        super().__init__()
        self.exit_status = 128 + int(signum)

    @property
    def what(self) -> str:
        """Return how the stop is said: ``terminated (SIGTERM)`` or ``hung up (SIGHUP)``."""
        return 'hung up (SIGHUP)' if self.exit_status == 129 else 'terminated (SIGTERM)'


def _raise_terminated(signum, frame) -> None:
    if signum == getattr(signal, 'SIGHUP', None):
        # A dropped session hangs up more than once (the shell's SIGHUP, then the kernel's):
        # the first one stops the command, the others must not cut its cleanup short; and
        # writes to the dead terminal would fail that cleanup with EIO. Ignoring comes
        # first: a second hang-up that came while this handler still imported ran it again
        # and raised in the middle of the cleanup (CI: status 129, no cleanup).
        signal.signal(signum, signal.SIG_IGN)
        _QUIET_IF_HUNG_UP[0]()
    raise Terminated(signum)


_QUIET_IF_HUNG_UP = [lambda: None]      # set by _sigterm_as_interrupt: no import in a handler


def _sigterm_as_interrupt() -> dict:
    """
    Make SIGTERM and SIGHUP unwind like Ctrl-C; return ``{signal: handler to restore}``.

    By default they ended the process on the spot: a pool of ``rog compare`` was never
    shut down (the resource tracker then reported leaked semaphores) and nothing was tidied,
    and a dropped SSH session (SIGHUP) left ``rog robot`` without its closing lines. Only the
    main thread can set handlers, and a handler someone else set (or ``nohup``'s ignored
    SIGHUP) is kept.
    """
    import threading
    if threading.current_thread() is not threading.main_thread():
        return {}
    from rog_ros.nodes.signals import quiet_if_hung_up
    _QUIET_IF_HUNG_UP[0] = quiet_if_hung_up
    previous = {}
    for sig in (signal.SIGTERM, getattr(signal, 'SIGHUP', None)):
        if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
            previous[sig] = signal.signal(sig, _raise_terminated)
    return previous


def _version() -> str:
    """Return the installed package's version (the source tree's when not installed)."""
    try:
        from importlib.metadata import version, PackageNotFoundError
        try:
            return version('rog_ros')
        except PackageNotFoundError:
            pass
    except ImportError:
        pass
    from rog_ros import __version__
    return __version__


def main(argv=None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:         # said by the subcommand's parser, with its usage line, not rog's
        _chosen_parser(parser, args).error(f'unrecognized arguments: {" ".join(extra)}')
    previous = _sigterm_as_interrupt()
    try:
        if getattr(args, 'command', None) == 'trace':
            from rog_ros.net import cli_trace
            return cli_trace.run(args)
        return args.func(args)
    except KeyboardInterrupt as stop:
        # Ctrl-C or SIGTERM: one line, not a traceback (finished runs of compare and
        # reproduce are kept and reused by the next call; rog fleet stops its nodes itself)
        name = _command_name(args, 'command', 'bench_command')
        kept = (_finished_runs(args.out) if getattr(args, 'command', None)
                in ('compare', 'reproduce') else 0)
        term = isinstance(stop, Terminated)
        try:
            print(f'\nrog {name}: {stop.what if term else "interrupted"}'
                  + (f'; {kept} finished run(s) in {args.out} are kept, and the same command '
                     'reuses them' if kept else ''), file=sys.stderr)
        except OSError:         # a terminal that went away: the status still says it
            pass
        return stop.exit_status if term else 130
    except BrokenPipeError:
        # The reader of stdout went away (rog doctor | grep -q fail, rog report | head):
        # end as a shell tool killed by SIGPIPE would, without a traceback; stdout goes to
        # /dev/null so that the interpreter's final flush does not raise again.
        _quiet_stdout()
        return 128 + getattr(signal, 'SIGPIPE', 13)
    except OSError as err:
        if err.errno not in _FULL_OR_READ_ONLY:
            raise
        # a full disk or a read-only one under the output: one line, status 1, what was
        # finished before stays (every result file is written whole or not at all)
        name = _command_name(args, 'command', 'bench_command', 'what')
        where = f': {err.filename}' if err.filename else ''
        try:
            print(f'rog {name}: cannot write{where}: {err.strerror}; free some space or choose '
                  'another output folder', file=sys.stderr)
        except OSError:         # stderr on the same full disk: the status still says it
            pass
        return 1
    except Exception as err:
        # rog_ros.children is imported only by the commands that start processes (it pulls
        # in multiprocessing and pickle): a ProcessDied can only come once it has been
        died = getattr(sys.modules.get('rog_ros.children'), 'ProcessDied', None)
        if died is None or not isinstance(err, died):
            raise
        # a run's process died (the out-of-memory killer's SIGKILL) in a pool without its own
        # handling of a death (rog reproduce aet|fleet, rog bench faults): one line, status 1
        name = _command_name(args, 'command', 'bench_command', 'what')
        print(f'rog {name}: a run failed: {_one_line(err)}', file=sys.stderr)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


_FULL_OR_READ_ONLY = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})
"""Write errors a command reports in one line: no space, no quota, a read-only disk, a file
over the size limit."""


def _command_name(args, *parts: str) -> str:
    """Name the command that ``args`` ran, from those of their ``parts`` that are set."""
    return ' '.join(str(getattr(args, a)) for a in parts if getattr(args, a, None))


def _chosen_parser(parser, args):
    """Return the parser of the (sub)command ``args`` chose, the deepest one."""
    while True:
        sub = next((a for a in parser._actions
                    if isinstance(a, argparse._SubParsersAction)), None)
        chosen = getattr(args, sub.dest, None) if sub is not None else None
        if chosen not in getattr(sub, 'choices', {}):
            return parser
        parser = sub.choices[chosen]


def _quiet_stdout() -> None:
    """Point stdout at /dev/null (after its reader closed the pipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):   # no real stdout (a test's capture)
        pass


def _held(out: str | None, command: str):
    """
    Hold ``out`` for one run (``output_lock.held_output``), or nothing when there is none.

    Two runs into one directory would race for its runs and reports (the last writer won);
    a folder this call made is removed again if the run leaves nothing in it (Ctrl-C before
    the first result, or input found bad once the run started).
    """
    import contextlib
    from rog_ros.nodes.output_lock import held_output
    return held_output(out, command) if out else contextlib.nullcontext()


def _finished_runs(out: str) -> int:
    """Count the finished runs below ``out``: a run's ``summary.json`` names its system."""
    count = 0
    for root, _, files in os.walk(out or ''):
        if 'summary.json' in files:
            try:
                with open(os.path.join(root, 'summary.json'), encoding='utf-8') as fh:
                    summary = json.load(fh)
            except (OSError, ValueError):
                continue
            count += isinstance(summary, dict) and 'system' in summary
    return count


if __name__ == '__main__':
    sys.exit(main())
