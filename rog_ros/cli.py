# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
"""The ``rog`` command: simulate, benchmark and inspect fleet training.

    rog sim --toy [--systems bsp,ssp:4,rog:4]   protocol engines on a toy problem
    rog bench overhead|codec                      what row granularity and DEFSGDM cost (JSON)
    rog trace gen|stats|plot                      bandwidth traces
"""

import argparse
import json
import sys


def _add_sim(sub) -> None:
    p = sub.add_parser('sim', help='run the protocol in virtual time',
                       description='Run synchronisation systems in virtual time and print a '
                                   'result table. --toy uses a small convex problem.')
    p.add_argument('--toy', action='store_true', help='toy convex problem (no workload)')
    p.add_argument('--systems', default='bsp,ssp:4,rog:4',
                   help='comma-separated systems, e.g. bsp,ssp:4,rog:4 (default)')
    p.add_argument('--workers', type=int, default=4, help='number of workers (default 4)')
    p.add_argument('--iterations', type=int, default=40, help='iterations (default 40)')
    p.add_argument('--seed', type=int, default=0, help='random seed (default 0)')
    p.set_defaults(func=_cmd_sim)


def _cmd_sim(args) -> int:
    from rog_ros.experiments.toy import HEADER, format_table, run_toy
    if not args.toy:
        print('rog sim: only --toy is available in this build (workload runs come with the '
              'simulator)', file=sys.stderr)
        return 2
    if args.workers < 1 or args.iterations < 1:
        print('rog sim: --workers and --iterations must be >= 1', file=sys.stderr)
        return 2
    rows = []
    for system in [s.strip() for s in args.systems.split(',') if s.strip()]:
        try:
            res = run_toy(system, workers=args.workers, iterations=args.iterations,
                          seed=args.seed)
        except ValueError as err:
            print(f'rog sim: {err}', file=sys.stderr)
            return 2
        rows.append(res.row())
        print(f'  {system}: done', file=sys.stderr)
    print(format_table(rows, HEADER))
    return 0


def _add_bench(sub) -> None:
    p = sub.add_parser('bench', help='benchmarks (JSON on stdout)')
    bsub = p.add_subparsers(dest='bench_command', metavar='{overhead,codec}')
    bsub.required = True
    o = bsub.add_parser('overhead', help='per-iteration cost of row granularity vs SSP')
    o.add_argument('--model', default='convmlp-m', help='convmlp-s|m|l (default convmlp-m)')
    o.add_argument('--workers', type=int, default=4, help='workers (default 4)')
    o.add_argument('--staleness', type=int, default=4, help='threshold S (default 4)')
    o.add_argument('--iterations', type=int, default=8, help='iterations (default 8)')
    o.set_defaults(func=_cmd_bench_overhead)
    c = bsub.add_parser('codec', help='DEFSGDM encode + decode time of a whole model')
    c.add_argument('--params', type=int, default=16_948_804,
                   help='model size (default: ConvMLP-M, 16,948,804)')
    c.add_argument('--repeats', type=int, default=5, help='timed repeats (default 5)')
    c.set_defaults(func=_cmd_bench_codec)


def _cmd_bench_overhead(args) -> int:
    from rog_ros.experiments.bench import bench_overhead
    try:
        res = bench_overhead(args.model, args.workers, args.staleness, args.iterations)
    except ValueError as err:
        print(f'rog bench overhead: {err}', file=sys.stderr)
        return 2
    print(json.dumps(res, indent=2))
    return 0


def _cmd_bench_codec(args) -> int:
    from rog_ros.experiments.bench import bench_codec
    if args.params < 1:
        print('rog bench codec: --params must be >= 1', file=sys.stderr)
        return 2
    print(json.dumps(bench_codec(args.params, args.repeats), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='rog', description='Rog fleet training for ROS 2: simulate, benchmark, inspect.')
    sub = parser.add_subparsers(dest='command', metavar='COMMAND')
    sub.required = True
    _add_sim(sub)
    _add_bench(sub)
    from rog_ros.net import cli_trace
    cli_trace.add_parser(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, 'command', None) == 'trace':
        from rog_ros.net import cli_trace
        return cli_trace.run(args)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
