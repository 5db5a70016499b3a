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
Read rate records kept as columns: ``t_seconds,mbps``, ``t bw`` lines, and headed tables.

Our own files and the Rog artifact's records are two bare columns, seconds and Mbit/s. Records
that people keep of their own links are tables that a logging script wrote: a header that names
the columns, often with their units (``time_ms,throughput_kbps``, ``timestamp;rssi;bw
[Mbit/s]``), more columns than the rate (signal, PHY bitrate), and clock times
(``2026-11-29T08:00:00.250``). Read as two bare columns they were refused, or worse, a
``kbps`` column read as Mbit/s gave a link a thousand times too fast without a word. Here the
header decides: the time column is the one named like a time (else the first), the rate column
the one that names a rate unit or is called throughput, bandwidth and the like, and the units
in the names convert both to seconds and Mbit/s. A header that leaves the rate column open
(two rate columns) or names a byte count instead of a rate is refused with the names it saw,
and so is a second column named as something else (packets, frame lengths, a signal measure).
A byte counter that only grows (``rx_bytes``, ``tx_bytes``: an interface's statistics logged
with their time) becomes the rate of the bytes between one row and the next. G-NetTrack Pro's
drive logs (the Raca et al. 4G/5G datasets) name their rates ``DL_bitrate`` and ``UL_bitrate``
in kbit/s and write times as ``2019.12.16_11.23.06``; their download rate is the link (the
uplink carried the downloads' acknowledgements). The Lumos5G dataset's CSV names no time: its
``seq_num`` counts seconds within each ``run_num``, and its runs play one after the other.
speedtest-cli's ``--csv`` is read as its Download column in bit/s, one test per line. A quoted
field may hold the separator; Python logging's ``2026-03-29 00:59:50,123`` keeps its
milliseconds in a comma-separated file.
Separators: comma, semicolon (with decimal
commas, as spreadsheets in many locales save), tab or spaces. A last line cut short (no line
end, a field missing: the logger was stopped while writing it) is left out, and
``load_trace`` says so. Rows that repeat the time of the row before (a clock in whole seconds,
as G-NetTrack Pro's, under a logger that wrote two rows in one second) are one sample of their
mean rate, with a warning; times that go back are refused, saying what to do.
"""

from __future__ import annotations

import collections
import csv
from datetime import datetime, timezone
import itertools
import math
import re

import numpy as np

META = re.compile(r'(end_s|resolution_s|loop)=([^\s,;]+)')
"""``# rog_ros trace: end_s=... loop=... resolution_s=...``, written by ``save_trace``."""


def _unit_words(seconds: float, *words) -> dict:
    """Map each of ``words`` (spellings of one unit of time) to ``seconds``."""
    return dict.fromkeys(words, seconds)


_TIME_UNITS = {
    **_unit_words(1.0, 's', 'sec', 'secs', 'second', 'seconds'),
    **_unit_words(1e-3, 'ms', 'msec', 'msecs', 'milli', 'millis', 'millisec', 'millisecs',
                  'millisecond', 'milliseconds'),
    **_unit_words(1e-6, 'us', 'usec', 'usecs', 'micros', 'microsec', 'microsecs', 'microsecond',
                  'microseconds'),
    **_unit_words(1e-9, 'ns', 'nsec', 'nsecs', 'nanos', 'nanosec', 'nanosecs', 'nanosecond',
                  'nanoseconds'),
    **_unit_words(60.0, 'min', 'mins', 'minute', 'minutes'),
    **_unit_words(3600.0, 'h', 'hr', 'hrs', 'hour', 'hours'),
}
"""Seconds per unit named by a word of the time column (``time_ms``, ``elapsedMs``,
``timestamp_microsecond``, ``time (millisec)``, ``time_\u00b5s``: the micro sign is a u)."""
_TIME_WORDS = ({'t', 'time', 'times', 'timestamp', 'ts', 'elapsed', 'epoch', 'date', 'datetime',
                'clock'} | {w for w, f in _TIME_UNITS.items() if f <= 1.0})
"""Words that name a time column (minutes and hours only convert: "min" may be a minimum)."""
_UNKNOWN_TIME_UNIT = re.compile(r'[pfcdk]s|[a-z]{1,2}secs?|[a-z]{1,2}seconds?|'
                                r'(?:mill?i|micro|mikro|nano|pico|femto|centi|deci|kilo)'
                                r'(?:s|secs?|seconds?)?')
"""A word of the time column that looks like a unit of time but is none of ``_TIME_UNITS``
(another prefix, "ps", "ksec", "decisecond", a misspelt "milisec"): read as seconds before."""
_CAPACITY_WORDS = ('throughput', 'goodput', 'bandwidth', 'capacity', 'bw')
_LINK_WORDS = _CAPACITY_WORDS + ('rate', 'speed')     # 'rate' also names a PHY bitrate
_PREFIX = {'': 1.0, 'k': 1e3, 'm': 1e6, 'g': 1e9, 'ki': 1024.0, 'mi': 1024.0 ** 2,
           'gi': 1024.0 ** 3}
# A unit at the end of a header word: "Mbps", "kbit/s", "bits/sec", "MB/s", "KiBps", "bytes/s".
# Bits and bytes differ in case only in "Mbps"/"MBps", so the byte forms are case-sensitive.
_BITS = re.compile(r'([kKmMgG]i?)?(?:bps|b/s|b/sec|bits?/s|bits?/sec|BPS)$')
_BYTES = re.compile(r'([kKmMgG]i?)?(?:B/s|Bps|B/sec|[bB]ytes?/s|[bB]ytes?/sec)$')
# The same written out: "kbytes_per_s", "KB per sec", "Mbits per second", "megabit/second",
# or joined by an underscore to sec, as FCC Measuring Broadband America's "bytes_sec".
_PHRASE = re.compile(r'(?<![a-z])(kilo|mega|giga|kibi|mebi|gibi|[kmg]i?)?(bytes?|bits?|b)'
                     r'(?:[\s_]*(?:/|per)[\s_]*(?:s|secs?|seconds?)|_(?:secs?|seconds?))'
                     r'(?![a-z])', re.IGNORECASE)
_PREFIX_WORDS = {'kilo': 'k', 'mega': 'm', 'giga': 'g', 'kibi': 'ki', 'mebi': 'mi',
                 'gibi': 'gi'}
# Any other "... per second" or ".../s" names a rate in a unit this reader does not know.
_PER_SECOND = re.compile(r'(?:/|(?<![a-z])per)[\s_]*(?:s|secs?|seconds?)(?![a-z])',
                         re.IGNORECASE)
_COUNT = re.compile(r'(?i)(bytes?|bits?)$')
_COUNTER_WORDS = {'rx', 'tx', 'total', 'cumulative', 'counter', 'received', 'sent'}
"""Words that, beside ``bytes`` or ``bits``, name a counter that only grows (``rx_bytes``)."""
_NOT_RATE = {'packets', 'packet', 'pkts', 'pkt', 'frames', 'frame', 'len', 'length', 'size',
             'count', 'cnt', 'datagrams', 'rssi', 'snr', 'sinr', 'rsrp', 'rsrq', 'cqi', 'dbm',
             'db', 'mcs', 'channel', 'latency', 'rtt', 'ping', 'jitter', 'loss', 'retries'}
"""Words of a column that is not a rate (Wireshark's "All Packets", tshark's ``frame.len``, a
signal measure): with one other column, it was read as Mbit/s."""
_KNOWN_UNITS = {'dl_bitrate': 1e-3, 'ul_bitrate': 1e-3}
"""Columns whose unit the name does not say but a tool's format does: G-NetTrack Pro (the
Raca et al. 4G/5G drive datasets) writes kbit/s."""
_GNETTRACK_TIME = re.compile(r'(\d{4})\.(\d\d)\.(\d\d)_(\d\d)\.(\d\d)\.(\d\d)')
"""G-NetTrack Pro's time stamp, ``2019.12.16_11.23.06`` (read as UTC, as ISO times without a
zone are)."""
_FRACTION = re.compile(r'(\d\d:\d\d:\d\d)\.(\d+)')
EXCEL_SEPARATOR = re.compile(r'(?i)"?sep=.?"?')
"""The first line Excel writes to name a CSV file's separator (``sep=;``)."""
NO_TIME_HINT = ('one number per line has no time: give each rate its time, for a record '
                "sampled every 0.5 s: awk '{print (NR-1)*0.5\",\"$1}' FILE")
"""What to do with a logger's bare list of rates (the step between samples is not in it)."""


class ColumnError(ValueError):
    """
    A table whose header or lines cannot be read as time and rate; names file and line.

    ``before_samples``: the line is not a sample and none came before it, so the file may be
    no table at all (the output of a tool no reader knows).
    """

    def __init__(self, message: str, before_samples: bool = False):
        """Keep the message and whether the line came before any sample."""
        super().__init__(message)
        self.before_samples = before_samples


def rate_factor(name: str):
    """
    Return Mbit/s per unit of a column called ``name``, or None if it names no rate unit.

    ``kbps`` 1e-3, ``Mbit/s`` 1, ``Gbps`` 1e3, ``bps`` 1e-6, ``MB/s`` 8, ``KiB/s`` 8 * 1024 / 1e6,
    and G-NetTrack Pro's ``DL_bitrate`` 1e-3.
    """
    if name.strip().lower() in _KNOWN_UNITS:
        return _KNOWN_UNITS[name.strip().lower()]
    for word in re.split(r'[\s_()\[\],;:=-]+', name.strip()):
        for pattern, bits in ((_BITS, 1.0), (_BYTES, 8.0)):
            match = pattern.search(word)
            if match:
                prefix = (match.group(1) or '').lower()
                return _PREFIX[prefix] * bits / 1e6
    match = _PHRASE.search(name)
    if match:
        prefix = (match.group(1) or '').lower()
        unit = match.group(2)
        # a single letter is case-sensitive, as in "kB/s" and "kb/s": B a byte, b a bit
        bits = 8.0 if unit.lower().startswith('byte') or unit == 'B' else 1.0
        return _PREFIX[_PREFIX_WORDS.get(prefix, prefix)] * bits / 1e6
    return None


def _words(name: str, camel: bool = True) -> list:
    """
    Split a column name into lower-case words: ``elapsedMs`` is elapsed, ms; µs is us.

    ``camel=False`` leaves camelCase whole, so that a unit written with a capital inside
    (``mS``, ``uSec``) stays one word instead of becoming m, s (read as seconds).
    """
    if camel:
        name = re.sub(r'(?<=[a-z0-9])(?=[A-Z])', ' ', name)   # camelCase: timeMs, elapsedMs
    name = name.replace('\u00b5', 'u').replace('\u03bc', 'u')   # the micro sign, Greek mu
    return [w for w in re.split(r'[^a-z]+', name.lower()) if w]


def _time_factor(name: str) -> float:
    """Return seconds per unit of the time column ``name``; ValueError for an unknown unit."""
    for word in _words(name, camel=False) + _words(name):    # mS and uSec whole first
        if word in _TIME_UNITS:
            return _TIME_UNITS[word]
    for word in _words(name):
        if word not in _TIME_WORDS and _UNKNOWN_TIME_UNIT.fullmatch(word):
            raise ValueError(f'time column {name!r}: {word!r} looks like a unit of time that '
                             'this reader does not know (it would be read as seconds); name '
                             'the column with s, ms, us, ns, min or h (time_s, time_ms, '
                             'elapsed_us, ...)')
    return 1.0


def _is_time(name: str) -> bool:
    """Tell whether ``name`` names a time column (a word such as time, timestamp, ms)."""
    return any(w in _TIME_WORDS for w in _words(name))


def _is_link(name: str) -> bool:
    """Tell whether ``name`` names a link's rate (throughput, bandwidth, a rate unit)."""
    low = name.lower()
    return any(w in low for w in _LINK_WORDS) or rate_factor(name) is not None


def _split(line: str) -> list:
    """Split a line at its separator: semicolon, tab, comma, or else spaces; quotes group."""
    # ';' and tab before ',': their files write decimal commas ("0,5;35,2", "0,5<TAB>35,2")
    for sep in (';', '\t', ','):
        if sep in line:
            parts = next(csv.reader([line], delimiter=sep)) if '"' in line else line.split(sep)
            return [f.strip().strip('"') for f in parts]
    return [f.strip('"') for f in line.split()]


_LOGGING = re.compile(r'\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d')
"""A clock time that Python's logging follows with a comma and milliseconds (``asctime``): in a
comma-separated file the comma splits it, and the milliseconds are joined back."""
_SPEEDTEST_CLI = {'server id', 'sponsor', 'timestamp', 'download', 'upload'}
"""Columns of speedtest-cli's ``--csv`` (``--csv-header``): Download and Upload in bit/s; the
trace is the download rate, one test per line."""
_LUMOS5G = {'run_num', 'seq_num', 'throughput'}
_LUMOS5G_MORE = {'nrstatus', 'abstractsignalstr', 'nr_ssrsrp'}
"""Columns of the Lumos5G dataset's CSV (Narayanan et al., IMC 2020): Throughput in Mbit/s once
a second, numbered by seq_num within each run (run_num); no column is named like a time."""


class _NoRateColumn(ValueError):
    """A first line read as a header names no rate: perhaps no table at all."""


class Layout:
    """Which field is time and which is rate, and the factors to seconds and Mbit/s."""

    def __init__(self, names=None):
        self.names = names
        self.width, self.time, self.rate = 2, 0, 1
        self.time_factor, self.rate_factor = 1.0, 1.0
        self.time_named = False
        self.counter = 0.0              # Mbit per unit of a counter column (rx_bytes), or 0
        self.run = None                 # Lumos5G's run_num: its runs play one after the other
        self.rate_named = False         # the header names the rate's unit (kbps, Mbit/s, ...)
        if names is not None:
            self._choose(names)

    def _choose(self, names):
        """Pick the columns of a header; raise ``ValueError`` saying what is ambiguous."""
        self.width = len(names)
        times = [i for i, n in enumerate(names) if _is_time(n) and rate_factor(n) is None]
        low = [n.strip().lower() for n in names]
        if _LUMOS5G <= set(low) and set(low) & _LUMOS5G_MORE:
            times = [low.index('seq_num')]          # one sample per second, numbered per run
            self.run = low.index('run_num')
        self.time = times[0] if times else 0
        self.time_named = bool(times)
        others = [i for i in range(len(names)) if i != self.time]
        if len(names) == 2:
            rates = others
        else:
            rates = [i for i in others if rate_factor(names[i]) is not None]
            rates = rates or [i for i in others if _is_link(names[i])]
            if len(rates) > 1:      # "phy_rate_mbps,throughput_mbps": the link's, not the PHY's
                rates = [i for i in rates
                         if any(w in names[i].lower() for w in _CAPACITY_WORDS)] or rates
            if sorted(names[i].lower() for i in rates) == ['dl_bitrate', 'ul_bitrate']:
                rates = [i for i in rates if names[i].lower() == 'dl_bitrate']   # G-NetTrack
        forced = None
        if _SPEEDTEST_CLI <= set(low):
            rates, forced = [low.index('download')], 1e-6
        if len(rates) != 1:
            which = ', '.join(repr(names[i]) for i in rates) if rates else 'none'
            error = ValueError if rates else _NoRateColumn
            raise error(f'cannot tell the rate column among {names} (candidates: {which}); keep '
                        'two columns, time and rate in Mbit/s (for example with "cut -d, '
                        '-f1,3")')
        self.rate = rates[0]
        name = names[self.rate]
        factor = rate_factor(name) if forced is None else forced
        words = set(_words(name))
        if factor is None and _COUNT.search(name.strip()) and words & _COUNTER_WORDS:
            self.counter = (8.0 if _COUNT.search(name.strip())[1][:4].lower() == 'byte'
                            else 1.0) / 1e6
        elif factor is None and _COUNT.search(name.strip()):
            raise ValueError(f'column {name!r} holds a count, not a rate; a trace needs a rate '
                             'per time (Mbit/s, or a unit such as kbps or MB/s in the header); '
                             'a counter that only grows is read if named so (rx_bytes, '
                             'tx_bytes)')
        if factor is None and _PER_SECOND.search(name):
            raise ValueError(f'column {name!r} names a rate in a unit this reader does not '
                             'know; give it in bits or bytes per second (kbps, Mbit/s, MB/s, '
                             'kbytes_per_s, ...) or as Mbit/s without a unit')
        if factor is None and not self.counter and not _is_link(name) and words & _NOT_RATE:
            raise ValueError(f'column {name!r} is not a rate (it names packets, lengths or a '
                             'signal measure, read as Mbit/s it would make a link of them); a '
                             'trace needs a rate per time: Mbit/s, or a unit such as kbps or '
                             'MB/s in the header')
        self.rate_factor = 1.0 if factor is None else factor
        self.rate_named = factor is not None or self.run is not None   # Lumos5G: Mbit/s
        self.time_factor = _time_factor(names[self.time])


_GROUPED = re.compile(r'[+-]?\d{1,3}(?:\.\d{3})+,\d*')
"""A decimal comma after thousands grouped by points, as German spreadsheets write 1.234,5."""
_DOT_GROUPS = re.compile(r'[+-]?\d{1,3}(?:\.\d{3})+')
"""A number such as 1.234: a decimal point, or thousands grouped where commas are decimal."""


_THOUSANDS = re.compile(r'[+-]?\d{1,3}(?:,\d{3}){2,}(?:\.\d*)?|[+-]?\d{1,3}(?:,\d{3})+\.\d*')
"""A number whose commas can only group thousands: 1,234,567 or 1,234.5."""
_COMMA_GROUPS = re.compile(r'[+-]?\d{1,3},\d{3}')
"""A number such as 1,234: a decimal comma, or thousands grouped where points are decimal."""


def _number(text: str) -> float:
    """Read a number, with a decimal point or, as spreadsheets in many locales write, comma."""
    try:
        return float(text)
    except ValueError:
        if text.count(',') == 1 and '.' not in text:
            return float(text.replace(',', '.'))
        if _GROUPED.fullmatch(text):
            return float(text.replace('.', '').replace(',', '.'))
        raise


def _decimal_marks(path, lines, linenos, column: int, comma: int) -> None:
    """
    Refuse a column that mixes decimal commas with numbers such as 1.234 (thousands?).

    ``column`` is the field's index, ``comma`` the index in ``linenos`` (the rows read) of the
    first whose field has a decimal comma (the rows are re-split: only files with decimal
    commas come here): where commas are decimal, the point groups thousands, and 1.234 kbit/s
    read as a decimal was a thousand times too slow.
    """
    texts = [_split(lines[lineno - 1].strip())[column] for lineno in linenos]
    line = lines[linenos[comma] - 1]
    with_commas = [text for text in texts if ',' in text]
    if (';' not in line and '\t' not in line
            and all(_COMMA_GROUPS.fullmatch(text) for text in with_commas)):
        raise ColumnError(f'{path}:{linenos[comma]}: {texts[comma]!r} in a comma-separated '
                          'file, quoted: a thousands separator (as Excel writes 1,234) or a '
                          'decimal comma (1.234)? every such number of the column has three '
                          'digits after its comma, so either reads; write the numbers without '
                          'thousands separators, with a decimal point')
    dots = next((k for k, text in enumerate(texts) if _DOT_GROUPS.fullmatch(text)), None)
    if dots is not None:
        raise ColumnError(f'{path}:{linenos[dots]}: {texts[dots]!r} in a column whose decimal '
                          f'mark is a comma (line {linenos[comma]}: {texts[comma]!r}): a point '
                          'there groups thousands, or is a decimal point; write every number '
                          'of the column the same way, without thousands separators')


def _is_number(text: str) -> bool:
    try:
        _number(text)
    except ValueError:
        return False
    return True


def _seconds(text: str) -> float:
    """Read a time field: a number, or an ISO 8601 clock time (seconds since the epoch)."""
    try:
        return _number(text)
    except ValueError:
        pass
    stamp = text.strip().strip('"\'')
    gnettrack = _GNETTRACK_TIME.fullmatch(stamp)
    if gnettrack:
        when = datetime(*map(int, gnettrack.groups()), tzinfo=timezone.utc)
        return when.timestamp()
    if stamp.endswith('Z'):
        stamp = stamp[:-1] + '+00:00'
    # Python 3.8's parser takes fractions of exactly 3 or 6 digits only ("08:00:00.5" fails)
    stamp = _FRACTION.sub(lambda m: f'{m[1]}.{(m[2] + "000000")[:6]}', stamp)
    when = datetime.fromisoformat(stamp)        # ValueError when it is not one either
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def read_columns(path, lines) -> tuple:
    """
    Return ``(meta, times_s, rates_mbps)`` of a column file's lines.

    Without a header (or with one that names no unit, as ``time,throughput``) the file has two
    columns, seconds and Mbit/s. ``meta['rate_column']`` is the rate column's name in a header,
    ``meta['rate_unit']`` the same when it names
    a unit (``mbps``, ``throughput_kbps``), absent when Mbit/s is assumed. Raises
    ``ColumnError`` naming the file and line of the first line that is not a sample, and the
    header when it leaves the columns open.
    """
    meta, times, rates, linenos, commas, merged, same = {}, [], [], [], {}, {}, 1
    rows_read = []      # the line of every row read, a sample's or one merged into it
    layout, run, runs, offset, clock = Layout(), None, set(), 0.0, False
    numbered = enumerate(lines, 1)
    for lineno, raw in numbered:
        line = raw.strip()
        if not line:
            continue
        if line.startswith('#'):
            meta.update(META.findall(line))
            continue
        if lineno == 1 and EXCEL_SEPARATOR.fullmatch(line):
            continue          # Excel's "sep=;" line: the separator is found on every line
        fields = _split(line)
        if (len(fields) == layout.width + 1 and layout.time == 0 and _LOGGING.fullmatch(fields[0])
                and len(fields[1]) == 3 and fields[1].isdigit()):
            fields = [f'{fields[0]}.{fields[1]}'] + fields[2:]     # "08:00:00,250,35.5"
        try:
            if len(fields) != layout.width:
                raise ValueError
            t = _seconds(fields[layout.time]) * layout.time_factor
            r = _number(fields[layout.rate]) * layout.rate_factor
        except ValueError:
            if times and _cut_short(lines, lineno, fields, layout):
                meta['cut_short'] = (lineno, line)      # load_trace warns: read the rest
                break
            if not times and layout.names is None and not any(map(_is_number, fields)):
                try:
                    layout = Layout(fields)
                except ValueError as exc:
                    raise ColumnError(f'{path}:{lineno}: {exc}', before_samples=isinstance(
                        exc, _NoRateColumn)) from None
                continue
            rest = fields[:layout.time] + fields[layout.time + 1:]
            if (len(fields) == layout.width and any(map(_is_number, rest))
                    and not _is_time_field(fields[layout.time])):
                raise ColumnError(f'{path}:{lineno}: time {fields[layout.time]!r} is neither a '
                                  'number nor an ISO 8601 time; write times as seconds (or ms, '
                                  'with a header such as time_ms) or as ISO 8601, such as '
                                  '2026-11-29T08:00:00.250+01:00') from None
            hint = ''
            if len(fields) == 1 and _is_number(fields[0]) and layout.names is None:
                # a logger's bare list of rates: the step between samples is not in the file
                hint = f'; {NO_TIME_HINT}'
            grouped = next((f for f in fields if _THOUSANDS.fullmatch(f)), None)
            if grouped is not None:
                hint = (f'; {grouped!r} has thousands separators: write the numbers without '
                        'them, with a decimal point')
            raise ColumnError(f'{path}:{lineno}: {_expected(layout)}, got {line[:60]!r}'
                              f'{hint}', before_samples=not times and not hint) from None
        if layout.run is not None:          # Lumos5G: a new run starts a second after the last
            if times and fields[layout.run] != run:
                if fields[layout.run] in runs:
                    raise ColumnError(f'{path}:{lineno}: run_num {fields[layout.run]} again, '
                                      f'after run {run}: sort the rows by run_num, then '
                                      'seq_num (sort -t, -k1,1n -k2,2n)')
                offset = times[-1] + 1.0 - t
            run = fields[layout.run]
            runs.add(run)
            t += offset
        for column in (layout.time, layout.rate):
            if ',' in fields[column] and column not in commas:
                commas[column] = len(rows_read)
        if not (math.isfinite(t) and math.isfinite(r)) or r < 0:
            raise ColumnError(f'{path}:{lineno}: need a finite time and a finite rate '
                              f'>= 0, got {line[:60]!r}')
        if times and t == times[-1] and not _time_guess(layout):
            # a clock in whole seconds (G-NetTrack Pro's) under a logger that wrote two rows
            # in one second: one sample of their mean rate (a counter: its later reading)
            merged.setdefault('first', lineno)
            merged['rows'] = merged.get('rows', 0) + 1
            same += 1
            rates[-1] = r if layout.counter else rates[-1] + (r - rates[-1]) / same
            rows_read.append(lineno)
            continue
        if times and t <= times[-1]:
            raise ColumnError(f'{path}:{lineno}: time {t} does not increase '
                              f'(previous {times[-1]}){_order_advice(layout)}')
        same = 1
        if not times:
            clock = not _is_number(fields[layout.time])     # ISO 8601: seconds, no doubt
        times.append(t)
        rates.append(r)
        linenos.append(lineno)
        rows_read.append(lineno)
        if len(times) == 1 and not commas and layout.run is None:
            bulk = _plain_rows(lines, lineno, layout, fields, times[0])
            if bulk is not None:    # plain rows up to line upto: read at once, as the loop would
                upto = bulk[2]
                times.extend(bulk[0])
                rates.extend(bulk[1])
                linenos.extend(range(lineno + 1, lineno + 1 + len(bulk[0])))
                rows_read.extend(range(lineno + 1, lineno + 1 + len(bulk[0])))
                collections.deque(itertools.islice(numbered, upto - lineno), maxlen=0)  # skip
    for column, comma in commas.items():
        _decimal_marks(path, lines, rows_read, column, comma)
    if times and layout.time_factor == 1.0:
        times = _epoch_seconds(times)
    if layout.counter:
        times, rates, meta['counter_end'] = _counter_rates(path, layout, linenos, times, rates)
    if merged:
        meta['merged_rows'] = (merged['rows'], merged['first'])
    if layout.rate_named:
        meta['rate_unit'] = layout.names[layout.rate]
    if layout.names is not None:
        meta['rate_column'] = layout.names[layout.rate]
    name = layout.names[layout.time] if layout.names is not None else ''
    if not clock and not any(w in _TIME_UNITS for w in _words(name) + _words(name, False)):
        meta['time_unit_assumed'] = True       # seconds, or an epoch's unit told by its size
    return meta, times, rates


BULK_ROWS = 16384
"""Rows ``_plain_rows`` reads at a time (its temporary arrays stay a few MB)."""
_SEPARATORS = (';', '\t', ',')
"""The separators ``_split`` tries, in its order (else spaces)."""


def _plain_rows(lines: list, lineno: int, layout: Layout, fields: list, first: float):
    """
    Return ``(times, rates, upto)`` of the plain rows after line ``lineno``, or None if none.

    Plain: the same separator as the first sample's ``fields``, the layout's number of fields,
    ASCII, no quote, comment or blank line, time and rate fields that ``float`` reads, finite,
    rates >= 0, times that increase from ``first``. Rows are taken ``BULK_ROWS`` at a time
    while every row of a block is plain, up to line ``upto`` (the end of the file when all
    are: blank lines after the last row are skipped). Such rows give what ``read_columns``'s
    loop gives (the same ``float`` of the same text, the same factors), found with numpy and
    C loops instead of line by line; the loop reads the rows after ``upto`` (and refuses or
    warns, naming the line) as before, so a file whose last line was cut short (a logger that
    crashed) is read at once up to its last block.
    """
    sep = next((c for c in _SEPARATORS if c in lines[lineno - 1].strip()), None)
    if '"' in lines[lineno - 1] or len(fields) != layout.width:
        return None
    absent = _SEPARATORS[:_SEPARATORS.index(sep)] if sep else _SEPARATORS
    end = len(lines)
    while end > lineno and not lines[end - 1].strip():
        end -= 1                                    # trailing blank lines: skipped
    times, rates, upto, last = [], [], lineno, first
    for start in range(lineno, end, BULK_ROWS):
        block = _plain_block(lines[start:min(start + BULK_ROWS, end)], sep, absent, layout,
                             last)
        if block is None:
            break
        times.append(block[0])
        rates.append(block[1])
        upto, last = start + len(block[0]), float(block[0][-1])
    else:
        upto = len(lines)
    if upto == lineno:
        return None
    return (np.concatenate(times).tolist() if times else [],
            np.concatenate(rates).tolist() if rates else [], upto)


def _plain_block(block: list, sep, absent: tuple, layout: Layout, last: float):
    """Return ``(times, rates)`` arrays of ``block``'s lines if all are plain, else None."""
    chunk = list(map(str.strip, block))
    text = '\n'.join(chunk) + '\n'
    if ('"' in text or '#' in text or '' in chunk or any(c in text for c in absent)
            or not text.isascii()):
        return None
    if sep is None:
        values = _spaced_fields(chunk, layout)
    else:
        values = _separated_fields(text, len(chunk), sep, layout)
    if values is None:
        return None
    times, rates = values[0] * layout.time_factor, values[1] * layout.rate_factor
    if not (np.all(np.isfinite(times)) and np.all(np.isfinite(rates)) and np.all(rates >= 0)
            and np.all(np.diff(times, prepend=last) > 0)):
        return None
    return times, rates


def _separated_fields(text: str, rows: int, sep: str, layout: Layout):
    """
    Return the time and rate fields' floats of ``rows`` lines joined in ``text``, or None.

    None unless every line has the layout's number of fields (``sep`` between them) and its
    time and rate fields read as ``float``. The fields are found by the positions of the
    separators and line ends, not by splitting every line into strings.
    """
    width = layout.width
    raw = np.frombuffer(text.encode('ascii'), dtype=np.uint8)
    ends = np.flatnonzero((raw == ord(sep)) | (raw == 10))
    if ends.size != rows * width:
        return None
    ends = ends.reshape(rows, width)
    if not np.all(raw[ends[:, -1]] == 10):         # a line with more or fewer fields
        return None
    starts = np.empty_like(ends)
    starts[:, 1:] = ends[:, :-1] + 1
    starts[0, 0], starts[1:, 0] = 0, ends[:-1, -1] + 1
    out = []
    for column in (layout.time, layout.rate):
        pieces = map(text.__getitem__, map(slice, starts[:, column].tolist(),
                                           ends[:, column].tolist()))
        try:
            out.append(np.array(list(map(float, pieces)), dtype=np.float64))
        except ValueError:
            return None
    return out


def _spaced_fields(chunk: list, layout: Layout):
    """Return the time and rate floats of lines of fields between spaces, or None."""
    rows = list(map(str.split, chunk))
    if set(map(len, rows)) != {layout.width}:
        return None
    try:
        return [np.array([float(row[column]) for row in rows], dtype=np.float64)
                for column in (layout.time, layout.rate)]
    except ValueError:
        return None


def _is_time_field(text: str) -> bool:
    """Tell whether ``text`` reads as a time: a number or a clock time ``_seconds`` knows."""
    try:
        _seconds(text)
    except ValueError:
        return False
    return True


def _counter_rates(path, layout: Layout, linenos: list, times: list, counts: list) -> tuple:
    """
    Return ``(times, rates_mbps, end)`` of a counter column: the bytes between rows, per time.

    Row k's rate holds from its time to the next row's; a counter that goes down (a reset, a
    32-bit wrap, a reboot) raises ``ColumnError`` naming the line: what moved then is unknown.
    """
    name = layout.names[layout.rate]
    if len(counts) < 2:
        raise ColumnError(f'{path}: column {name!r} is a counter; the rate is the difference '
                          'of two rows, and it has fewer than two')
    value = np.asarray(counts, dtype=np.float64)
    grew = np.diff(value)
    if np.any(grew < 0):
        k = int(np.argmax(grew < 0)) + 1
        raise ColumnError(f'{path}:{linenos[k]}: counter {name!r} goes down ({counts[k]:.15g} '
                          f'after {counts[k - 1]:.15g}): a reset or a wrap, across which the '
                          'bytes moved are unknown; cut the file there into two records')
    t = np.asarray(times, dtype=np.float64)
    rates = grew * layout.counter / np.diff(t)
    return t[:-1].tolist(), rates.tolist(), float(t[-1])


EPOCH_UNITS = ((1e17, 1e-9), (1e14, 1e-6), (1e11, 1e-3))
"""Clock times with no unit in the header: a first time above 1e11 "seconds" (3,000 years
after 1970) is an epoch in ms, above 1e14 in us, above 1e17 in ns (loggers write all three)."""


def _epoch_seconds(times: list) -> list:
    """Return ``times`` in seconds when the first is an epoch in ms, us or ns (else as is)."""
    for above, factor in EPOCH_UNITS:
        if times[0] >= above:
            return [t * factor for t in times]
    return times


def _cut_short(lines: list, lineno: int, fields: list, layout: Layout) -> bool:
    """
    Tell whether line ``lineno`` is a last line cut short: a logger stopped while writing it.

    It is the file's last line, has no line end, and lacks a field (fewer than the layout's,
    or one empty): ``2,`` or ``2`` after rows of ``time_s,mbps``.
    """
    if lineno != len(lines) or lines[-1].endswith('\n'):
        return False
    return len(fields) < layout.width or not all(fields)


def _order_advice(layout: Layout) -> str:
    """Say what to do about a time that does not increase: which column, or the rows."""
    guess = _time_guess(layout)
    if guess:
        return guess
    return ('; the rows are out of order (sort them by time) or the clock was set back (cut '
            'the file there into two records)')


def _time_guess(layout: Layout) -> str:
    """Say which column was taken for the time when the header named none (else nothing)."""
    if layout.names is None or layout.time_named:
        return ''
    return (f'; no column of the header is named like a time, so the first, '
            f'{layout.names[layout.time]!r}, was read as seconds: name the time column (t, '
            'time_s, timestamp, time_ms) or, for one sample per second, number the lines')


def _expected(layout: Layout) -> str:
    """Say what a line of ``layout`` holds, for the error about a line that does not."""
    if layout.names is None:
        return 'expected two numbers "t_seconds,mbps" or "t bw"'
    count = 'two' if layout.width == 2 else str(layout.width)
    return (f'expected {count} numbers as the header {layout.names} says, a time in '
            f'{layout.names[layout.time]!r} and a rate in {layout.names[layout.rate]!r}')
