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
The ``rog trace`` command: generate, summarise and plot bandwidth traces.

    rog trace gen PRESET --duration S --seed N --out FILE.csv
    rog trace stats FILE_OR_PRESET[,FILE_OR_PRESET...] [--json] [--compare PRESET]
    rog trace plot FILE_OR_PRESET --out FILE.png
    rog trace replay RECORD --out FILE.csv [--rank K] [--scale 0.7] [--no-holds]
    rog trace convert FILE --out FILE.csv [--scale X] [--node NAME]
    rog trace convert BAG --out DIR/                (one CSV per robot, and the --trace list)

A FILE may be a ROS 2 bag entry as ``--trace`` takes it (``rog_ros.net.trace_spec``):
``run.mcap#netmon_2`` one robot of it, ``run.mcap#emulated`` the rate its emulator enforced.

``rog_ros/cli.py`` calls ``add_parser(subparsers)`` and then ``run(args)`` (also stored as
``args.func``). Bad input (missing file, malformed line, unknown preset, an --out that is a
directory or the input file itself, a --scale whose file the loader would refuse) prints one
line that names the problem and returns 2, before anything is written.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import sys

import numpy as np

from rog_ros.atomic import atomic_write_bytes
from rog_ros.net import iperf, ros_bag, trace_spec, traces
from rog_ros.net.replay import HOLD_DRAW_ABOVE, HOLD_RANGE_S, MAX_REPLAY_STEPS, replay

MAX_SAMPLES = 2_000_000
"""Most samples (segments) one command generates: 10^6 take about 10 s and 0.4 GB to write
and summarise, so more than this is a typo in --duration or --dt, not a trace."""
PRESET_DT_S = 0.1
"""Resolution of a preset that stats and plot generate (``traces.generate``'s default)."""

SHARE = '% of time'
"""Unit printed after a share of the trace's time: the table shows it in percent."""
_ROWS = [
    ('mean', 'mean', 'Mbit/s'), ('median', 'median', 'Mbit/s'), ('p10', 'p10', 'Mbit/s'),
    ('p90', 'p90', 'Mbit/s'), ('share_below_5mbps', 'time below 5 Mbit/s', SHARE),
    ('outage_share', 'time at 0 Mbit/s', SHARE),
    ('hold_time_share_10s', 'time in holds >= 10 s', SHARE),
    ('near_zero_share_30s', 'time in >= 30 s stretches < 0.5 Mbit/s', SHARE),
    ('longest_near_zero_s', 'longest stretch < 0.5 Mbit/s', 's'),
    ('mean_time_to_20pct_change_s', 'mean time to >=20% change', 's'),
    ('mean_time_to_40pct_change_s', 'mean time to >=40% change', 's'),
    ('transfer_slowdown_p99', 'p99 slowdown of a 1.43 s transfer', 'x'),
    ('duration_s', 'duration', 's'), ('resolution_s', 'resolution', 's'),
    ('segments', 'segments (trace rows, each one rate)', ''),
]
"""Rows of the stats table: ``stats`` key, label, unit (the JSON keeps the keys and values)."""
JSON_UNITS = {key: 'fraction of time' if unit == SHARE else unit or 'count'
              for key, _, unit in _ROWS}
"""Unit of each value of ``--json``'s ``stats`` (shares are fractions there, 0..1)."""
OUTAGE_MBPS = traces.NEAR_ZERO_MBPS
"""Plot shades the time below this rate as outage: at 0 Mbit/s a rate line lies on the axis."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``trace`` (``gen``, ``stats``, ``plot``, ``replay``, ``convert``) to subparsers."""
    parser = subparsers.add_parser('trace', allow_abbrev=False,
                                   help='generate, summarise and plot bandwidth traces')
    sub = parser.add_subparsers(dest='trace_command',
                                metavar='{gen,stats,plot,replay,convert}')
    sub.required = True
    presets = ', '.join(traces.PRESETS)

    gen = sub.add_parser(
        'gen', allow_abbrev=False, help='write a synthetic trace CSV from a preset',
        description='Write a seeded synthetic trace of PRESET as t_seconds,mbps CSV (the same '
                    'seed gives the same trace). The presets are calibrated to the Rog '
                    "paper's indoor and outdoor links over long spans (hours): an outdoor "
                    'preset holds a rate 25 s on average, so a few minutes of it are a handful '
                    'of rates and differ widely from seed to seed. rog trace stats FILE shows '
                    "what you got; rog trace stats PRESET --duration 36000 the preset's "
                    'statistics against their targets.')
    gen.add_argument('preset', help=f'one of: {presets}')
    gen.add_argument('--out', required=True, help='output CSV file')
    _add_source_options(gen)
    gen.add_argument('--scale', type=float, default=1.0,
                     help='rate multiplier, > 0 (outdoors x 1/0.7 = the unscaled record; '
                          'default 1)')
    gen.add_argument('--dt', type=float, default=0.1, help='resolution in s (default 0.1)')

    st = sub.add_parser('stats', allow_abbrev=False,
                        help='statistics of a trace file or a preset, or of each '
                        'entry of a per-robot list side by side',
                        description='Print the statistics of a trace file or a preset (mean, '
                                    'quantiles, outages, holds, time to a 20%/40% change, '
                                    'p99 transfer slowdown), or of each entry of a per-robot '
                                    'list side by side.')
    st.add_argument('source', metavar='FILE_OR_PRESET',
                    help='a file or preset, or a comma-separated list (the --trace of rog sim '
                         'and rog fleet: robot r follows entry r mod k); a ROS 2 bag of '
                         'several robots shows each side by side, BAG#NAME one of them, '
                         'BAG#emulated its emulated_mbps')
    st.add_argument('--json', action='store_true', help='print JSON instead of a table')
    st.add_argument('--compare', metavar='PRESET',
                    help="check against a preset's calibration targets (default: the preset "
                         'itself when FILE_OR_PRESET is a preset)')
    _add_source_options(st, STATS_DURATION_S, ': a preset is calibrated over hours')

    plot = sub.add_parser('plot', allow_abbrev=False,
                          help='plot rate vs time and the rate histogram (PNG)',
                          description='Plot the rate of a trace file or a preset over time, '
                                      f'outages (below {OUTAGE_MBPS:g} Mbit/s) shaded, next '
                                      'to the share of time spent at each rate.')
    plot.add_argument('source', metavar='FILE_OR_PRESET',
                      help='a trace file (any format --trace takes, BAG#NAME for one robot '
                           'of a ROS 2 bag) or a preset')
    plot.add_argument('--out', required=True,
                      help='output image: FILE.png (.png is added to a name without an '
                           'extension; .pdf and .svg work too)')
    _add_source_options(plot)

    rep = sub.add_parser(
        'replay', allow_abbrev=False,
        help="replay a record file the way the Rog authors' testbed did",
        description="Write the rates robot RANK saw when the authors' testbed replayed RECORD "
                    '(specs/rog_artifact.md 5.1): start at RANK/6 of the record, rates x 0.7, '
                    'and after each step, with probability 1/2, the rate held another 10-90 s '
                    "(Python's random seeded with RANK + 2, draw for draw). Pass the output to "
                    '--trace of rog compare / sim / fleet to measure the replayed regime.')
    rep.add_argument('record', metavar='RECORD',
                     help='record file: CSV "t_seconds,mbps" or the artifact\'s "t bw" lines')
    rep.add_argument('--out', required=True, help='output CSV file')
    rep.add_argument('--rank', type=int, default=0,
                     help='worker rank: start offset and seed rank + 2 (default 0)')
    rep.add_argument('--seed', type=int, default=None,
                     help="the holds' seed instead of rank + 2 (another sample)")
    rep.add_argument('--scale', type=float, default=0.7,
                     help="rate multiplier (default 0.7, the testbed's; 1: the record's rates)")
    rep.add_argument('--no-holds', action='store_true', help='no random holds')
    rep.add_argument('--duration', type=float, default=None,
                     help='replay at least this many seconds (default: one pass)')
    conv = sub.add_parser(
        'convert', allow_abbrev=False,
        help='write any trace file the loader reads as a plain t_seconds,mbps CSV',
        description='Read FILE as --trace would (CSV or a headed table with units, "t bw" '
                    'lines, a testbed replay log, a Mahimahi trace, an iperf3 -J report, '
                    'iperf text output, an HSDPA or 4G/LTE drive log, a G-NetTrack Pro or '
                    'Lumos5G CSV, a time,rx_bytes counter, a sar -n DEV report, a tshark -z '
                    "io,stat table; gzip-compressed too; or a ROS 2 bag of netmon's LinkStats) "
                    'and write it as t_seconds,mbps: to see exactly what a fleet will replay, to '
                    'edit it, or to share it without the original tool.')
    conv.add_argument('file', metavar='FILE',
                      help='the trace file to read; of a ROS 2 bag, BAG#NAME reads robot NAME '
                           '(its netmon node name, or its rank; BAG#robot=NAME for a robot '
                           'named like a rate), BAG#emulated the rate its link emulator '
                           'enforced (emulated_mbps), BAG#bitrate the Wi-Fi bitrate; default: '
                           'the measured max(tx_mbps, rx_mbps), BAG#throughput. A robot of a '
                           "bag of several is written on the bag's clock, with its id, as "
                           'with --out DIR/; a file converted so keeps its id')
    conv.add_argument('--out', required=True,
                      help='output CSV file; for a ROS 2 bag of several robots, a folder (an '
                           'existing one, or a path ending in /): one CSV per robot, '
                           'NAME_nodeK.csv (K its rank), and the --trace list that gives robot '
                           'r the link of rank r is printed')
    conv.add_argument('--node', default=None, metavar='NAME',
                      help="the robot whose link to write from a ROS 2 bag of several robots' "
                           'LinkStats into one CSV file: its name (netmon_2) or rank (2); '
                           'the same as FILE#NAME')
    conv.add_argument('--scale', type=float, default=1.0,
                      help='rate multiplier, > 0 (default 1)')
    parser.set_defaults(func=run)
    return parser


def _add_source_options(parser, duration_s: float = 300.0, why: str = ''):
    parser.add_argument('--duration', type=float, default=duration_s,
                        help=f'seconds to generate for a preset (default {duration_s:g}{why})')
    parser.add_argument('--seed', type=int, default=0, help='generator seed (default 0)')


def _unknown(name):
    """Return the line that refuses an unknown preset ``name`` and lists the known ones."""
    return f'unknown preset {name!r}; known presets: {", ".join(traces.PRESETS)}'


def _positive(name: str, value) -> None:
    """Refuse a value that is not a finite number > 0 (``rog_ros.checks`` is a layer above)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f'{name} must be a number, got {value!r}')
    if not math.isfinite(value):
        raise ValueError(f'{name} must be finite, got {value}')
    if not value > 0:
        raise ValueError(f'{name} must be > 0, got {value:g}')


def _check_span(duration_s, dt_s: float | None = None) -> None:
    """
    Refuse a --duration/--dt that is not finite and positive or needs too many samples.

    ``dt_s`` None: the command has no --dt (``stats``, ``plot`` of a preset, sampled every
    ``PRESET_DT_S``), so the messages speak of --duration alone.
    """
    _positive('--duration', duration_s)
    own_dt = dt_s is not None
    dt_s = dt_s if own_dt else PRESET_DT_S
    _positive('--dt', dt_s)
    if dt_s > duration_s:
        raise ValueError(f'--dt {dt_s:g} exceeds --duration {duration_s:g}' if own_dt else
                         f'--duration {duration_s:g} is shorter than one sample of a preset '
                         f'({dt_s:g} s); give at least {dt_s:g}')
    samples = duration_s / dt_s
    if samples > MAX_SAMPLES:
        raise ValueError(f'--duration {duration_s:g} s at --dt {dt_s:g} s is {samples:.3g} '
                         f'samples; at most {MAX_SAMPLES:,} are generated (shorten --duration '
                         'or coarsen --dt)' if own_dt else
                         f'--duration {duration_s:g} s is {samples:.3g} samples of '
                         f'{dt_s:g} s; at most {MAX_SAMPLES:,} are generated (at most '
                         f'{MAX_SAMPLES * dt_s:,.0f} s)')


def _check_replay_span(args, record) -> None:
    """Refuse a replay --duration that is not finite and positive or needs too many segments."""
    if args.duration is None:
        return
    _positive('--duration', args.duration)
    usable = len(record) - 2       # (fewer than 3 steps: replay refuses the record itself)
    if usable < 1:
        return
    steps = np.diff(np.append(record.t_s, record.end_s))[:usable]
    hold = 0.0 if args.no_holds else (20 - HOLD_DRAW_ABOVE) / 20 * sum(HOLD_RANGE_S) / 2
    segments = args.duration / (float(steps.mean()) + hold)
    limit = min(MAX_SAMPLES, MAX_REPLAY_STEPS)
    if segments > limit:
        raise ValueError(f'--duration {args.duration:g} s is about {segments:.3g} replayed '
                         f'segments of this record; at most {limit:,} are generated (shorten '
                         '--duration)')


def _source(args, src=None):
    """Trace from a file path or a preset name; returns (trace, preset name or None)."""
    src = args.source if src is None else src
    if os.path.isfile(src):
        return traces.load_trace(src), None
    if src not in traces.PRESETS and os.path.isfile(trace_spec.parse(src).source):
        return traces.load_entry(src), None
    if src in traces.PRESETS:
        _check_span(args.duration)
        return traces.generate(src, args.duration, args.seed), src
    if os.path.exists(src):
        traces.check_trace_file(src)    # a directory or a device: says which
    if os.sep in src or os.path.splitext(src)[1]:
        raise FileNotFoundError(f'no such file: {src}')
    raise KeyError(f'{src!r} is neither a file nor a preset; known presets: '
                   f'{", ".join(traces.PRESETS)}')


def _fmt(value):
    """Return ``value`` as the table prints it: 5 significant digits, words for nan."""
    if isinstance(value, (int, np.integer)):
        return str(value)
    if math.isnan(value):
        return 'no change'              # the change times of a trace that never changes so
    if not math.isfinite(value):
        return str(value)
    return f'{value:.5g}'


def _shown(value, unit):
    """Return ``value`` in the unit the table prints: a share (0..1) in percent."""
    return value * 100.0 if unit == SHARE else value


def _unit(value, unit):
    """Return the unit printed after ``value``: none after 'no change', a reason after inf."""
    if isinstance(value, (int, np.integer)) or math.isfinite(value):
        return unit
    return '(never delivers)' if unit == 'x' and value > 0 else ''


def _check_seed(args):
    """Refuse a negative --seed."""
    if args.seed < 0:
        raise ValueError(f'--seed must be >= 0, got {args.seed}')


def _check_scale(scale):
    """Refuse a --scale that is not a finite number > 0."""
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f'--scale must be a positive number, got {scale}')


def _check_median(trace, scale):
    """Refuse to write a trace whose median rate ``load_trace`` would refuse to read back."""
    median = float(np.median(trace.mbps))           # what load_trace computes on the file
    if median <= traces.PLAUSIBLE_MEDIAN_MBPS:
        return
    limit = scale * traces.PLAUSIBLE_MEDIAN_MBPS / median
    step = 10.0 ** (math.floor(math.log10(limit)) - 3)
    raise ValueError(f'--scale {scale:g} gives a median rate of {median:.6g} Mbit/s, above the '
                     f'{traces.PLAUSIBLE_MEDIAN_MBPS:g} Mbit/s that rog trace stats and --trace '
                     f'accept (rates are Mbit/s); use a --scale of at most '
                     f'{math.floor(limit / step) * step:.4g}')


def _out_file(out, example):
    """Refuse an --out that cannot be a file: empty, or an existing directory."""
    if not out.strip():
        raise ValueError(f'--out is empty; name the output file, e.g. {example}')
    if os.path.isdir(out):
        raise ValueError(f'--out {out} is a directory; name a file in it, e.g. '
                         f'{os.path.join(out, example)}')


def _not_the_input(out, src):
    """Refuse an --out that is the input file: writing it would replace what is being read."""
    try:
        same = os.path.samefile(src, out)
    except OSError:                     # no --out file yet: the same path, through links
        same = os.path.realpath(src) == os.path.realpath(out)
    if same:
        raise ValueError(f'--out {out} is the input file {src}; name another file (writing it '
                         'would replace the record being read)')


def _out_image(out, source):
    """Return the path and format plot writes: .png added when ``out`` has no extension."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    name = os.path.splitext(os.path.basename(source.rstrip(os.sep)))[0] or 'trace'
    _out_file(out, f'{name}.png')
    ext = os.path.splitext(out)[1]
    if not ext:
        return out + '.png', 'png'
    kinds = FigureCanvasAgg.get_supported_filetypes()
    if ext[1:].lower() not in kinds:
        raise ValueError(f'--out {out}: cannot write a {ext} image; use .png (or one of '
                         f'{", ".join(sorted(kinds))})')
    return out, ext[1:].lower()


def _json_num(value):
    """Numbers for strict JSON: nan/inf (never changed, no change found) become null."""
    return value if isinstance(value, int) or math.isfinite(value) else None


def _cmd_gen(args, out):
    """Write a seeded synthetic trace of a preset (``rog trace gen``)."""
    if args.preset not in traces.PRESETS:
        raise KeyError(_unknown(args.preset))
    _check_seed(args)
    _check_scale(args.scale)
    _out_file(args.out, f'{args.preset}.csv')
    _check_span(args.duration, args.dt)
    trace = traces.generate(args.preset, args.duration, args.seed, dt_s=args.dt, scale=args.scale)
    _check_median(trace, args.scale)
    traces.save_trace(trace, args.out)
    print(f'wrote {args.out}: {args.preset}, {trace.duration_s:g} s, seed {args.seed}, '
          f'mean {trace.mean_mbps:.1f} Mbit/s', file=out)
    return 0


def _cmd_stats_list(args, entries, out, bag: bool = False):
    """
    Print the statistics of each entry of a per-robot list, one column per entry.

    ``bag``: the entries are the robots of the one ROS 2 bag ``args.source``.
    """
    if args.compare:
        raise ValueError('--compare takes one trace; run rog trace stats on each entry')
    rows = [traces.stats(_source(args, entry)[0]) for entry in entries]
    if args.json:
        doc = {'source': args.source, 'entries': [
            {'source': e, 'stats': {k: _json_num(v) for k, v in st.items()}}
            for e, st in zip(entries, rows)], 'units': JSON_UNITS}
        print(json.dumps(doc, indent=2), file=out)
        return 0
    print(f'trace {args.source}: a ROS 2 bag of {len(entries)} robots' if bag else
          f'trace list {args.source} (robot r follows entry r mod {len(entries)})', file=out)
    width = 11
    labels = ([trace_spec.parse(e).robot for e in entries] if bag else
              [f'entry {i}' for i in range(len(entries))])
    width = max([width] + [len(label) + 1 for label in labels])
    for label, entry in zip(labels, entries):
        print(f'  {label}: {entry}', file=out)
    print(f'  {"":40s} ' + ' '.join(f'{label:>{width}s}' for label in labels),
          file=out)
    for key, label, unit in _ROWS:
        cells = ' '.join(f'{_fmt(_shown(st[key], unit)):>{width}s}' for st in rows)
        print(f'  {label:40s} {cells} {unit}'.rstrip(), file=out)
    return 0


def _cmd_stats(args, out):
    """Print the statistics of one trace or of a per-robot list (``rog trace stats``)."""
    _check_seed(args)
    entries = trace_spec.sources(args.source)
    if len(entries) > 1:
        return _cmd_stats_list(args, entries, out)
    if entries[0] not in traces.PRESETS and len(trace_spec.bag_entries(entries[0])) > 1:
        return _cmd_stats_list(args, trace_spec.bag_entries(entries[0]), out, bag=True)
    trace, preset = _source(args)
    compare = args.compare or preset
    if compare is not None and compare not in traces.TARGETS:
        raise KeyError(_unknown(compare))
    st = traces.stats(trace)
    verdict = traces.check(st, compare) if compare else {}
    if args.json:
        doc = {'source': args.source, 'stats': {k: _json_num(v) for k, v in st.items()},
               'units': JSON_UNITS}
        if compare:
            doc['targets'] = {'preset': compare, 'rel_tol': 0.15, 'checks': {
                k: {'target': t, 'achieved': _json_num(a), 'ok': ok}
                for k, (t, a, ok) in verdict.items()}}
            note = _short_span_note(st, verdict)
            if note:
                doc['targets']['note'] = note
        print(json.dumps(doc, indent=2), file=out)
        return 0
    read_as = (f' (read as {traces.trace_file_format(trace_spec.parse(args.source).source)})'
               if preset is None else '')
    print(f'trace {args.source}{read_as}'
          + (f' (targets: {compare}, within 15%)' if compare else ''), file=out)
    for key, label, unit in _ROWS:
        line = f'  {label:40s} {_fmt(_shown(st[key], unit)):>10s} {_unit(st[key], unit):10s}'
        if key in verdict:
            target, _, ok = verdict[key]
            line += (f' target {_fmt(_shown(target, unit)):>8s} {unit:9s}  '
                     f'{"ok" if ok else "OFF"}')
        print(line.rstrip(), file=out)
    note = _short_span_note(st, verdict)
    if note:
        print(note, file=out)
    return 0


STATS_DURATION_S = 36000.0
"""Default span of ``rog trace stats PRESET``: ten hours (1,505 rates of ``outdoors``, seed 0: 6
of 7 targets met; 300 s were 16 rates, and missed 6 of 7)."""


def _short_span_note(st: dict, verdict: dict) -> str:
    """Say why a trace misses targets that a preset meets over thousands of hours ('' if not)."""
    missed = sum(1 for _, _, ok in verdict.values() if not ok)
    if not missed:
        return ''
    hours = st.get('duration_s', 0.0) / 3600.0
    return (f'note: {missed} of {len(verdict)} targets missed over {st.get("segments")} '
            f'rate segments ({hours:.3g} h); the presets meet them over thousands of hours: '
            'an outdoor preset keeps a rate 25 s on average and stays in a regime for '
            'minutes, so even hours of one seed vary widely (try other --seed values); '
            'report the statistics of the trace you ran')


def _pyplot():
    """
    Return matplotlib's pyplot on the Agg backend, or say in one line why it cannot be had.

    Not only a missing matplotlib: one whose own import fails (Pillow missing, a broken
    install raising RuntimeError) is quoted with its error, not taken for a missing one.
    """
    try:
        import matplotlib
        matplotlib.use('Agg')
        from matplotlib import pyplot
    except ImportError as exc:
        if exc.name == 'matplotlib':
            raise ValueError('plot needs matplotlib (a dependency of rog_ros that this Python '
                             'lacks): pip install matplotlib') from None
        fix = ('pip install pillow' if (exc.name or '').split('.')[0] == 'PIL' else
               'install or repair what it names')
        raise ValueError(f'plot needs matplotlib, whose import failed: {_first_line(exc)} '
                         f'({fix})') from None
    except Exception as exc:            # a broken install raises anything, not a traceback
        raise ValueError(f'plot needs matplotlib, whose import failed: {_first_line(exc)} '
                         '(pip install --force-reinstall matplotlib)') from None
    return pyplot


def _first_line(exc: BaseException) -> str:
    """Return ``Type: message`` of ``exc``, its first line only (errors are one line)."""
    text = str(exc).strip().splitlines()
    return f'{type(exc).__name__}: {text[0]}' if text else type(exc).__name__


def _plain(text) -> None:
    """
    Draw a matplotlib Text as written: a file name with two ``$`` is no TeX formula.

    matplotlib 3.5 and later take ``parse_math=False``; before, a string with no unescaped
    ``$`` is drawn as is (its ``$`` then show a backslash, which beats failing to plot).
    """
    if hasattr(text, 'set_parse_math'):
        text.set_parse_math(False)
    else:
        text.set_text(text.get_text().replace('$', r'\$'))


def outage_spans(trace, below: float = OUTAGE_MBPS) -> list:
    """Return ``[(start_s, end_s), ...]`` of the stretches where the rate is below ``below``."""
    low = trace.mbps < below
    edges = np.append(trace.t_s, trace.end_s)
    change = np.flatnonzero(low[1:] != low[:-1]) + 1
    starts = np.concatenate(([0], change))
    ends = np.concatenate((change, [len(low)]))
    return [(float(edges[a]), float(edges[b])) for a, b in zip(starts, ends) if low[a]]


def _figure(plt, trace, source: str):
    """
    Draw the rate of ``trace`` over time and its histogram; return the figure.

    An outage is drawn where it can be seen: the time below ``OUTAGE_MBPS`` is shaded over the
    whole height, with a legend entry that gives its share of time, and the rate axis starts
    a little below 0 (a 0 Mbit/s stretch lay on the x axis itself, out of sight).
    """
    fig, (ax_t, ax_h) = plt.subplots(1, 2, figsize=(12, 4),
                                     gridspec_kw={'width_ratios': [3, 1]})
    t = np.append(trace.t_s, trace.end_s)
    r = np.append(trace.mbps, trace.mbps[-1])
    ax_t.step(t, r, where='post', linewidth=0.7, zorder=3, label='rate')
    ax_t.set_xlabel('time (s)')
    ax_t.set_ylabel('capacity (Mbit/s)')
    _plain(ax_t.set_title(f'{source}: mean {trace.mean_mbps:.1f} Mbit/s'))
    ax_t.set_xlim(0, trace.end_s)
    top = 1.05 * max(float(r.max()), OUTAGE_MBPS)
    bottom = -0.04 * top
    ax_t.set_ylim(bottom, top)
    spans = outage_spans(trace)
    if spans:
        share = sum(end - start for start, end in spans) / trace.end_s
        ax_t.broken_barh([(start, end - start) for start, end in spans], (bottom, top - bottom),
                         facecolor='tab:red', alpha=0.3, linewidth=0, zorder=2,
                         label=f'outage (< {OUTAGE_MBPS:g} Mbit/s): {100 * share:.3g}% of time')
        ax_t.legend(loc='upper right', fontsize='small')
    weights = 100.0 * np.diff(t) / trace.end_s
    ax_h.hist(trace.mbps, bins=50, weights=weights, orientation='horizontal')
    if spans:
        ax_h.axhspan(bottom, OUTAGE_MBPS, facecolor='tab:red', alpha=0.3, linewidth=0)
    ax_h.set_xlabel('% of time')
    ax_h.set_ylim(ax_t.get_ylim())
    fig.tight_layout()
    return fig


def _cmd_plot(args, out):
    """Plot one trace's rate over time and its histogram to an image (``rog trace plot``)."""
    if len(trace_spec.sources(args.source)) > 1:
        raise ValueError(f'plot takes one trace, got the list {args.source!r}; plot each entry '
                         f'(rog trace stats shows a list side by side)')
    _check_seed(args)
    trace, _ = _source(args)          # (its checks first: they need no matplotlib)
    plt = _pyplot()

    path, kind = _out_image(args.out, args.source)
    fig = _figure(plt, trace, args.source)
    image = io.BytesIO()
    fig.savefig(image, format=kind, dpi=100)
    plt.close(fig)
    atomic_write_bytes(path, image.getvalue())
    print(f'wrote {path}', file=out)
    return 0


def _cmd_replay(args, out):
    """Write the rates a testbed robot saw replaying a record (``rog trace replay``)."""
    if args.seed is not None:
        _check_seed(args)        # (Python's random takes |seed|: -1 would replay seed 1)
    traces.check_trace_file(args.record)
    _check_scale(args.scale)
    _out_file(args.out, 'replayed.csv')
    _not_the_input(args.out, args.record)
    record = traces.load_trace(args.record)
    _check_replay_span(args, record)
    trace = replay(record, rank=args.rank, scale=args.scale, holds=not args.no_holds,
                   duration_s=args.duration, seed=args.seed)
    _check_median(trace, args.scale)
    traces.save_trace(trace, args.out)
    st = traces.stats(trace)
    print(f'wrote {args.out}: {args.record} replayed for rank {args.rank}, '
          f'{trace.duration_s:.0f} s ({record.duration_s:.0f} s of record), mean '
          f'{trace.mean_mbps:.1f} Mbit/s, {st["hold_time_share_10s"]:.0%} of the time in holds '
          f'>= 10 s, {st["share_below_5mbps"]:.0%} below 5 Mbit/s', file=out)
    return 0


def _cmd_convert(args, out):
    """Write a trace file the loader reads as plain CSV (``rog trace convert``)."""
    parsed = trace_spec.parse(args.file)
    path, field = parsed.source, parsed.field
    if args.node is not None and parsed.robot is not None and args.node != parsed.robot:
        raise ValueError(f'--node {args.node} and {args.file} name two robots; name one')
    node = parsed.robot if args.node is None else args.node
    traces.check_trace_file(path)
    _check_scale(args.scale)
    name = os.path.splitext(os.path.basename(path))[0]
    fleet = os.path.isdir(args.out) or args.out.endswith(('/', os.sep))
    if fleet and node is None and ros_bag.bag_kind(path):
        return _convert_fleet(args, path, field, name, out)
    _out_file(args.out, f'{name}_mbps.csv')
    _not_the_input(args.out, path)
    if ros_bag.bag_kind(path):      # a robot of several on the bag's clock, with its id
        trace = traces.load_trace(path, node=node, field=field)     # (read in blocks)
        recording = ros_bag.recording_id(path) if node is not None else None
        robot, rate = None, field
        if recording:
            trace = traces.on_clock(trace_spec.Entry(path, str(node), field).text, trace)
            robot = ros_bag.pick(path, ros_bag.robots(path), node)     # (by its name)
    else:                           # a file converted before keeps its recording's id
        trace = traces.load_trace(path, node=node, field=field)     # (refuses a tag)
        recording = trace_spec.recording_of(path)
        robot, rate = trace_spec.link_of(path)
    read_as = traces.trace_file_format(path)      # (before --out is written)
    if node is not None:
        read_as += f', robot {node}'
    if field is not None:
        read_as += f', {ros_bag.FIELD_NAMES[field]}'
    if args.scale != 1.0:
        trace = traces.Trace(trace.t_s, trace.mbps * args.scale, trace.end_s, trace.loop,
                             trace.resolution_s)
        _check_median(trace, args.scale)
    traces.save_trace(trace, args.out, recording, robot, rate)
    print(f'wrote {args.out}: {path} read as {read_as}, {len(trace)} segments over'
          f' {trace.duration_s:.6g} s, mean {trace.mean_mbps:.1f} Mbit/s', file=out)
    return 0


def _convert_fleet(args, path: str, field, name: str, out) -> int:
    """
    Write each robot's link of a ROS 2 bag into the folder ``--out``, one CSV per robot.

    Robot ``NAME`` of rank K gets ``BAG_nodeK.csv`` (``BAG_NAME.csv`` when ranks repeat; BAG:
    the bag's name, a comma made ``_``); the last line printed is the ``--trace`` list that
    gives robot r the link of rank r (``ros_bag.rank_plan``). A bag that misses a rank gets
    no list (robot r would take another robot's link): a warning says which rank is missing.
    The links are written on the bag's clock (``traces.in_step``) with an id of the bag, so
    that a list of them is replayed in step as the bag is (``trace_spec.recordings``).
    """
    folder = args.out
    if trace_spec.SEPARATOR in folder:
        raise ValueError(f'--out {folder}: a folder with a comma in its name cannot be in a '
                         '--trace list (its entries are separated by commas); name another')
    named = ros_bag.robots(path)
    if field is not None:       # a robot whose link was not emulated (the server's): left out
        left = []
        for who, _ in named:
            try:
                ros_bag.read_bag(path, node=who, field=field)
            except ros_bag.NoRateError:
                left.append(who)
        if len(left) < len(named) and left:
            named = [(who, rank) for who, rank in named if who not in left]
            iperf.warn(f'{path}: robot{"s" if len(left) > 1 else ""} {", ".join(left)} '
                       f'left out: no {ros_bag.FIELD_NAMES[field]} in its LinkStats (every one '
                       '-1)')
    links = traces.load_bag_traces(path, field=field, only=[who for who, _ in named])
    recording = ros_bag.recording_id(path)
    if recording:           # on the bag's clock, with its id: replayed in step, as the bag
        links = {who: traces.on_clock(trace_spec.Entry(path, who, field).text, trace)
                 for who, trace in links.items()}
    ranks = dict(named)
    read_as = traces.trace_file_format(path)
    if field is not None:
        read_as += f', {ros_bag.FIELD_NAMES[field]}'
    name = name.replace(trace_spec.SEPARATOR, '_')     # (a bag's: the list must split right)
    by_rank = len(set(ranks.values())) == len(ranks)
    files = {who: os.path.join(folder, f'{name}_node{ranks[who]}.csv' if by_rank else
                               f'{name}_{who.replace(":", "_")}.csv') for who in links}
    for file in files.values():
        _not_the_input(file, path)
    if args.scale != 1.0:
        links = {who: trace.scaled(args.scale) for who, trace in links.items()}
        for trace in links.values():
            _check_median(trace, args.scale)
    os.makedirs(folder, exist_ok=True)
    for who, trace in links.items():
        traces.save_trace(trace, files[who], recording, who, field)
        print(f'wrote {files[who]}: {path} read as {read_as}, robot {who} (rank {ranks[who]}),'
              f' {len(trace)} segments over {trace.duration_s:.6g} s, mean '
              f'{trace.mean_mbps:.1f} Mbit/s', file=out)
    try:
        plan, _ = ros_bag.rank_plan(path, named)
    except ros_bag.BagError as exc:
        iperf.warn(f'{exc}; no --trace list printed: list the files above in the order '
                   'of the ranks')
        return 0
    print(f'--trace {trace_spec.SEPARATOR.join(files[who] for who in plan)}', file=out)
    return 0


def run(args, out=None) -> int:
    """Execute a parsed ``rog trace ...`` command; returns the exit status."""
    out = sys.stdout if out is None else out
    command = {'gen': _cmd_gen, 'stats': _cmd_stats, 'plot': _cmd_plot,
               'replay': _cmd_replay, 'convert': _cmd_convert}[args.trace_command]
    try:
        return command(args, out)
    except BrokenPipeError:
        raise                 # the reader went away (| head): rog's main ends quietly
    except KeyError as exc:
        print(f'rog trace: {exc.args[0]}', file=sys.stderr)
    except (OSError, ValueError) as exc:  # TraceFormatError is a ValueError
        print(f'rog trace: {exc}', file=sys.stderr)
    return 2


def main(argv=None) -> int:
    """Stand-alone entry point: ``python -m rog_ros.net.cli_trace gen ...``."""
    parser = argparse.ArgumentParser(prog='rog', allow_abbrev=False)
    add_parser(parser.add_subparsers(dest='command', required=True))
    return run(parser.parse_args(['trace'] + list(sys.argv[1:] if argv is None else argv)))


if __name__ == '__main__':
    sys.exit(main())
