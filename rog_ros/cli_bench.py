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
"""``rog bench``: its subcommands' options, checks and commands (JSON on stdout)."""

from __future__ import annotations

import json
import sys

from rog_ros.checks import max_staleness
from rog_ros.cli_options import MAX_JOBS, valid


def add_parser(sub) -> None:
    """Add ``rog bench`` and its subcommands to the subcommands ``sub``."""
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
    o.add_argument('--workers', type=int, default=4,
                   help=f'workers, 1 to {MAX_WORKERS} (default 4)')
    o.add_argument('--staleness', type=int, default=4,
                   help=f'threshold S, 0 to {max_staleness()} (default 4)')
    o.add_argument('--iterations', type=int, default=8,
                   help=f'iterations, 1 to {MAX_ITERATIONS} (default 8)')
    o.add_argument('--repeats', type=int, default=3,
                   help='alternating rog/ssp runs; medians are reported (1 to '
                        f'{MAX_REPEATS}, default 3)')
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
    c.add_argument('--repeats', type=int, default=5,
                   help=f'timed repeats, 1 to {MAX_REPEATS} (default 5)')
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
                   help='largest fleet; runs 4, 8, ... doubling up to it (1 to '
                        f'{MAX_WORKERS}, default 64)')
    v.add_argument('--iterations', type=int, default=3,
                   help=f'iterations per worker, 1 to {MAX_ITERATIONS} (default 3)')
    v.add_argument('--staleness', type=int, default=4,
                   help=f'threshold S, 0 to {max_staleness()} (default 4)')
    v.add_argument('--row-params', type=int, default=4,
                   help=f'values per row of a split tensor, 1 to {MAX_ROW_PARAMS} (default 4; '
                        f'the fleet holds at most {MAX_FLEET_VALUES:,} model values in all)')
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
                   help='seeds, each once, e.g. 0-99 or 3,7 (default 0-9: 100 runs, about 75 s '
                        'on 2 cores)')
    f.add_argument('--final-model', choices=('on', 'off'), default='on',
                   help="send every robot the fleet's final model, as fleets do (default on)")
    f.add_argument('--jobs', type=int, default=None,
                   help=f'runs in parallel, 1 to {MAX_JOBS} (default: one per CPU core)')
    f.set_defaults(func=_cmd_bench_faults)


MAX_ITERATIONS = 10_000
"""Most ``--iterations`` of ``rog bench overhead`` and ``rog bench server`` (their defaults: 8
and 3; 10**12 ran for days, or filled the memory with the server's history)."""
MAX_REPEATS = 10_000
"""Most ``--repeats`` of ``rog bench overhead`` and ``rog bench codec`` (defaults 3 and 5)."""
MAX_WORKERS = 1024
"""Most ``--workers`` of ``rog bench server``: the most a fleet runs."""
MAX_ROW_PARAMS = 65_536
"""Most ``--row-params`` of ``rog bench server`` (ConvMLP-M's real rows hold about 500)."""
MAX_FLEET_VALUES = 2 ** 30
"""Most model values, all synthetic workers together, of ``rog bench server`` (4 GiB a copy):
``--row-params`` 10**12 asked torch for 132 PB and ended in a traceback."""


def _cmd_bench_faults(args) -> int:
    from rog_ros.experiments.bench_faults import bench_faults, parse_seeds
    from rog_ros.protocol.policies import make_policy
    from rog_ros.sim.fault_sweep import KINDS
    from rog_ros import checks
    systems = [s.strip() for s in args.systems.split(',') if s.strip()]
    try:
        seeds = parse_seeds(args.seeds)
        if not systems:
            raise ValueError('--systems: none given')
        for spec in systems:
            try:
                make_policy(spec)
            except ValueError as err:
                raise ValueError(f'--systems: {err}') from None
        # as rog compare: a system given twice (or rog and rog:4) was run once, silently
        checks.distinct('--systems', systems, checks.system_key)
        if args.jobs is not None:
            checks.count('--jobs', args.jobs, 1, MAX_JOBS)
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
    if not valid('rog bench transport', _check_bench_transport, args):
        return 2
    from rog_ros.experiments.bench_transport import bench_transport
    print(json.dumps(bench_transport(args.duration), indent=2))
    return 0


def _check_bench_server(args) -> None:
    from rog_ros import checks
    from rog_ros.experiments.bench_server import scaled_layout
    from rog_ros.protocol.policies import make_policy
    checks.count('--workers', args.workers, 1, MAX_WORKERS)
    checks.count('--iterations', args.iterations, 1, MAX_ITERATIONS)
    checks.integer('--staleness', args.staleness, 0, checks.max_staleness())
    checks.count('--row-params', args.row_params, 1, MAX_ROW_PARAMS)
    try:
        layout = scaled_layout(args.model, make_policy(f'rog:{args.staleness}')
                               .small_tensor_threshold, args.row_params)
    except ValueError:
        return                  # (an unknown model: bench_server says so)
    if layout.n_params * args.workers > MAX_FLEET_VALUES:
        raise checks.ConfigError(
            f'--workers {args.workers} with --row-params {args.row_params} is '
            f'{layout.n_params * args.workers:,} model values in the fleet ({args.model}), '
            f'more than the {MAX_FLEET_VALUES:,} this benchmark holds; lower --workers or '
            '--row-params')


def _cmd_bench_server(args) -> int:
    if not valid('rog bench server', _check_bench_server, args):
        return 2
    from rog_ros.experiments.bench_server import bench_server
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
    checks.count('--workers', args.workers, 1, MAX_WORKERS)
    checks.integer('--staleness', args.staleness, 0, checks.max_staleness())
    checks.count('--iterations', args.iterations, 1, MAX_ITERATIONS)
    checks.count('--repeats', args.repeats, 1, MAX_REPEATS)
    if args.threads is not None:        # torch's thread pool crashes (SIGSEGV) at 32768
        checks.integer('--threads', args.threads, 1, MAX_THREADS)


MAX_THREADS = 1024
"""Most torch intra-op threads ``rog bench overhead --threads`` takes (the fleet's most
workers): torch.set_num_threads(32768) ended the process with a segmentation fault."""


def _cmd_bench_overhead(args) -> int:
    if not valid('rog bench overhead', _check_bench_overhead, args):
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
    checks.count('--repeats', args.repeats, 1, MAX_REPEATS)


def _cmd_bench_codec(args) -> int:
    if not valid('rog bench codec', _check_bench_codec, args):
        return 2
    from rog_ros.experiments.bench import bench_codec
    print(json.dumps(bench_codec(args.params, args.repeats), indent=2))
    return 0
