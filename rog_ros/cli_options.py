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
Options and checks shared by ``rog sim``, ``rog compare``, ``rog reproduce`` and ``rog bench``.

The option adders and checks of the simulator's commands, and the helpers with which each
command refuses bad input in one line and holds its output folder.
"""

from __future__ import annotations

import sys


WORKLOAD_CHOICES = ('workload: mpcol, eacol, glyphs, toy, chaos, or your own builder as '
                    'module:function (docs/workloads.md)')
MAX_ITERATIONS = 1_000_000
"""Most --iterations of `rog sim`, `rog compare` and `rog reproduce`: a simulated run stops at
its budget of 10 million events (SimConfig.max_events), and a worker-iteration takes about 10
of them, so a larger budget could only fail, after hours."""
MAX_EVALUATIONS = 100_000
"""Most --evaluations of `rog sim` and `rog compare`."""
MAX_JOBS = 1024
"""Most --jobs (runs in parallel) of `rog compare` and `rog bench faults`."""


def add_init_model_option(p) -> None:
    """Add ``--init-model`` to the parser ``p``."""
    p.add_argument('--init-model', default=None,
                   help="start from these weights instead of the workload's pre-trained "
                        "checkpoint: a state_dict file or a fleet run's --out directory (its "
                        'model.pt)')


def init_model_error(args) -> str | None:
    """Why ``--init-model`` does not fit the workload, or None (checked before any run)."""
    if not getattr(args, 'init_model', None):
        return None
    from rog_ros.sim.simulator import config_workload, SimConfig
    try:
        config_workload(SimConfig(workload=args.workload, init_model=args.init_model,
                                  workload_options=workload_options(args)))
    except (ValueError, KeyError) as err:      # KeyError: a plug-in's registry
        return f'--init-model: {one_line(err)}'
    return None


def one_line(err: Exception) -> str:
    """Return an error's message on one line; a KeyError's without the quotes str() adds."""
    text = err.args[0] if isinstance(err, KeyError) and len(err.args) == 1 else err
    return ' '.join(str(text).split())


def add_evaluations_option(p) -> None:
    """Add ``--evaluations`` to the parser ``p``."""
    p.add_argument('--evaluations', type=int, default=None,
                   help=f'evaluations of the shared model over each run, 1 to '
                        f'{MAX_EVALUATIONS} (default 24). Time '
                        'to target is read from the 3-evaluation moving average, which '
                        'lags the model by one to two evaluation intervals: raise this for '
                        'a short iteration budget (EACOL: 80, one per iteration)')


def add_model_options(p) -> None:
    """Add ``--model``, ``--real-compute`` and ``--workload-option`` to the parser ``p``."""
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


def workload_options(args) -> dict:
    """Workload options from --model/--real-compute and --workload-option."""
    opts = {}
    if getattr(args, 'model', None) is not None:
        opts['model'] = args.model
        if args.model != 'convmlp-cpu' and not args.real_compute:
            opts['surrogate'] = True
    opts.update(getattr(args, 'workload_options_given', None) or {})
    return opts


def check_workload_options(args, systems) -> None:
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
        raise checks.ConfigError(f'--workload-option: {one_line(err)}') from None
    if args.workload == 'eacol' and 'model' in given:
        raise checks.ConfigError(f'--workload-option model={given["model"]}: give the EACOL '
                                 'model with --model (it simulates a big model with surrogate '
                                 'compute; add --real-compute to run it)')
    own = [s for s in systems if lookup(s) is not None]
    if own:
        raise checks.ConfigError(f'--workload-option does not apply to {", ".join(own)} (the '
                                 "reference systems' runners train the workload's defaults)")
    args.workload_options_given = given


def sim_options(args) -> dict:
    """Return the SimConfig fields set on the command line (``--evaluations``)."""
    if getattr(args, 'evaluations', None) is None:
        return {}
    return {'evaluations': args.evaluations}


def bad_model(args) -> str | None:
    """Why --model cannot be used here, or None."""
    if getattr(args, 'model', None) is None:
        return None
    if args.workload != 'eacol':
        return '--model applies to --workload eacol'
    from rog_ros.workloads.eacol import _MODELS
    if args.model not in _MODELS:
        return f'unknown EACOL model {args.model!r}; expected one of {sorted(_MODELS)}'
    return None


def valid(prog: str, check, args) -> bool:
    """Run ``check(args)``; on a bad option print one line naming it and return False."""
    from rog_ros.checks import ConfigError
    try:
        check(args)
    except ConfigError as err:
        print(f'{prog}: {err}', file=sys.stderr)
        return False
    return True


def check_common(args) -> None:
    """Check the options sim, compare and reproduce share, each bounded: they reach torch."""
    from rog_ros import checks
    checks.integer('--workers', args.workers, 1, 1024)
    if args.iterations is not None:
        checks.count('--iterations', args.iterations, 1, MAX_ITERATIONS)
    if getattr(args, 'evaluations', None) is not None:
        checks.count('--evaluations', args.evaluations, 1, MAX_EVALUATIONS)


def check_real_compute(args) -> None:
    """Refuse ``--real-compute`` without a ``--model``."""
    from rog_ros import checks
    if getattr(args, 'real_compute', False) and getattr(args, 'model', None) is None:
        raise checks.ConfigError('--real-compute applies to a --model (e.g. --workload eacol '
                                 '--model convmlp-m --real-compute); give --model or leave '
                                 '--real-compute out')


def held(out: str | None, command: str):
    """
    Hold ``out`` for one run (``output_lock.held_output``), or nothing when there is none.

    Two runs into one directory would race for its runs and reports (the last writer won);
    a folder this call made is removed again if the run leaves nothing in it (Ctrl-C before
    the first result, or input found bad once the run started).
    """
    import contextlib
    from rog_ros.nodes.output_lock import held_output
    return held_output(out, command) if out else contextlib.nullcontext()
