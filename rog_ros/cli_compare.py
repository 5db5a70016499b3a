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
"""``rog compare`` and ``rog reproduce``: their options, checks and commands."""

from __future__ import annotations

import os
import sys

from rog_ros.cli_options import (add_evaluations_option, add_init_model_option,
                                 add_model_options, bad_model, check_common,
                                 check_real_compute, check_workload_options, held,
                                 init_model_error, MAX_ITERATIONS, MAX_JOBS, one_line,
                                 sim_options, valid,
                                 WORKLOAD_CHOICES, workload_options)
from rog_ros.nodes.output_lock import OutputInUse


DEFAULT_COMPARE_SYSTEMS = 'bsp,ssp:4,flown:4,rog:4'
"""Systems of `rog compare` unless --systems names others: BSP, SSP-4, FLOWN-4 and Rog-4, the
four of issue 10's acceptance (the paper's threshold 20 too: `rog reproduce`). With 5 seeds
of 300 iterations, 20 runs of 35-100 s of one core by machine: 7-9 minutes on 2 cores of the
AMD EPYC machines (issue 3 asks for under 10; ssp:20 and rog:20 as well took 13.4 minutes), 14
to 17 on the slower Intel Xeon ones, where each of two runs at once takes a fifth longer than
one alone."""


def add_parser(sub) -> None:
    """Add ``rog compare`` and ``rog reproduce`` to the subcommands ``sub``."""
    _add_compare(sub)
    _add_reproduce(sub)


def _check_compare(args) -> None:
    from rog_ros import checks
    check_common(args)
    checks.workload('--workload', args.workload)
    checks.trace('--trace', args.trace)
    specs = checks.name_list('--systems', args.systems)
    for system in specs:
        checks.system('--systems', system)
    checks.distinct('--systems', specs, checks.system_key)     # rog and rog:4: one system
    checks.distinct('--seeds', checks.int_list('--seeds', args.seeds, 0, checks.max_seed()))
    if args.jobs is not None:
        checks.count('--jobs', args.jobs, 1, MAX_JOBS)
    check_real_compute(args)
    check_workload_options(args, checks.name_list('--systems', args.systems))
    checks.output_dir('--out', args.out)
    check_comparison_folder(args.out)


COMPARISON_FILES = ('summary.json', 'report.md')
"""Files a comparison writes in its folder (besides its plots), and its folder of runs."""
COMPARISON_FOLDERS = ('runs',)


def check_comparison_folder(out: str) -> None:
    """
    Refuse an ``--out`` that a comparison cannot write, or holds one run's results.

    A fleet's or a simulated run's ``summary.json`` (it names its ``system``) was replaced by
    the comparison's, and its ``model.pt`` stayed beside a comparison that did not make it.
    """
    import json
    from rog_ros import checks
    checks.result_paths('--out', out, COMPARISON_FILES, COMPARISON_FOLDERS)
    try:
        with open(os.path.join(out, 'summary.json'), encoding='utf-8') as fh:
            summary = json.load(fh)
    except (OSError, ValueError):
        return
    if isinstance(summary, dict) and 'system' in summary:
        driver = 'a fleet run' if summary.get('driver') == 'fleet' else 'a run'
        raise checks.ConfigError(f'--out {out}: holds the results of {driver} '
                                 f'({summary["system"]}: its summary.json), which a comparison '
                                 'would overwrite; give another folder')


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
    check_common(args)
    for wl in checks.distinct('--workloads', checks.name_list('--workloads', args.workloads)):
        checks.workload('--workloads', wl)
    if args.seeds is not None:
        checks.distinct('--seeds', checks.int_list('--seeds', args.seeds, 0, checks.max_seed()))
    checks.output_dir('--out', args.out)


def _add_compare(sub) -> None:
    p = sub.add_parser('compare', allow_abbrev=False,
                       help='several systems x seeds, with report and plots',
                       description='Compare synchronisation systems on one workload and '
                                   'trace in the simulator; writes DIR/summary.json, '
                                   'DIR/report.md and PNG plots. Finished runs of the same '
                                   'settings are reused (an interrupted comparison resumes); '
                                   'runs in DIR made with other settings are run again.')
    p.add_argument('--workload', default='mpcol',
                   help=f'{WORKLOAD_CHOICES} (default mpcol)')
    p.add_argument('--trace', default='outdoors',
                   help='trace preset or file (any format --trace of rog sim takes: a ROS 2 '
                        "bag of several robots' links as it is, BAG#NAME one robot of it), "
                        'or a comma-separated list, robot r taking entry r mod k; a file is '
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
                   help=f'iterations per worker, 1 to {MAX_ITERATIONS} (default: the '
                        'workload budget)')
    p.add_argument('--jobs', type=int, default=None,
                   help=f'runs in parallel, 1 to {MAX_JOBS} (default: one per CPU core)')
    p.add_argument('--out', required=True, help='output directory')
    add_init_model_option(p)
    add_evaluations_option(p)
    add_model_options(p)
    p.set_defaults(func=_cmd_compare)


def unreached_line(res: dict) -> str:
    """
    Return the line that says why times to target read ``>`` ('' when every run reached it).

    The table marks a median or quartile that falls on a run that never reached the target
    with ``>``, explained only in report.md: a short --iterations budget gave a terminal of
    ``> [>->]`` cells and no word of what to change.
    """
    rows = res.get('systems', [])
    runs = sum(int(r.get('runs') or 0) - int(r.get('failed') or 0) for r in rows)
    missed = runs - sum(int(r.get('reached_target_count') or 0) for r in rows)
    if missed <= 0:
        return ''
    meta = res.get('meta', {})
    target, budget = meta.get('target_accuracy'), meta.get('iteration_budget')
    within = f' within {budget} iterations' if budget else ''
    accuracy = f' {target:g}' if isinstance(target, (int, float)) else ''
    return (f'{missed} of {runs} runs did not reach the target accuracy{accuracy}{within} '
            "('>' in the table: a time past the run's end); more --iterations give them "
            'the time')


def _cmd_compare(args) -> int:
    if not valid('rog compare', _check_compare, args):
        return 2
    from rog_ros.experiments.compare import compare
    from rog_ros.experiments.report_table import table_terminal
    seeds = [int(s) for s in args.seeds.split(',') if s.strip()]
    systems = [s.strip() for s in args.systems.split(',') if s.strip()]
    bad = bad_model(args) or init_model_error(args)
    if bad:
        print(f'rog compare: {bad}', file=sys.stderr)
        return 2
    options = sim_options(args)
    if args.init_model:
        options['init_model'] = args.init_model
    try:
        with held(args.out, 'rog compare'):
            res = compare(args.workload, args.trace, systems, args.workers, seeds, args.out,
                          iterations=args.iterations, jobs_parallel=args.jobs,
                          workload_options=workload_options(args), sim_options=options)
    except OutputInUse as err:
        print(f'rog compare: {err}', file=sys.stderr)
        return 2
    except (ValueError, KeyError) as err:      # KeyError: a plug-in's workload registry
        print(f'rog compare: {one_line(err)}', file=sys.stderr)
        return 2
    print(table_terminal(res['systems']))
    print(f'\nreport (every column, plots): {args.out}/report.md')
    unreached = unreached_line(res)
    if unreached:
        print(f'rog compare: {unreached}', file=sys.stderr)
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
                   help=f'iterations per worker, 1 to {MAX_ITERATIONS} (rog only)')
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
    if not valid('rog reproduce', _check_reproduce, args):
        return 2
    from rog_ros.experiments.reproduce import DEFAULT_SEEDS, REPRODUCTIONS
    try:
        with held(args.out, f'rog reproduce {args.what}'):
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
        print(f'rog reproduce: {one_line(err)}', file=sys.stderr)
        return 2
    print(f'report: {path}')
    return 0
