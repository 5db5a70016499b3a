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
Read tshark's ``-z io,stat`` table: the bytes a capture moved per interval, as a rate.

``tshark -r capture.pcapng -q -z io,stat,0.5`` is how a packet capture becomes a link record
(``tcpdump -i wlan0 -w capture.pcap`` on the robot while it drives, or Wireshark's capture):
one row per interval, ``| 0.0 <> 0.5 |  frames | bytes |``, the last one ending at ``Dur``
(the capture's end) or at a time before a whole interval. The interval is in the header
(``| Interval: 0.5 secs``, ``| Interval size: ...`` in older versions); rows follow each other
without gaps, so a row's time is its index times the interval, which also reads the clock
times of ``-t a`` and ``-t ad``. The rate is the row's bytes, 8 bits each, over its length.
A table of several columns (one per filter, ``-z io,stat,1,tcp,udp``) or without bytes
(``FRAMES``, ``SUM(...)``) is refused, saying how to ask tshark for one column of bytes.
"""

from __future__ import annotations

import re

_TITLE = re.compile(r'\|\s*IO Statistics\s*\|')
_INTERVAL = re.compile(r'\|\s*Interval(?: size)?:\s*([0-9.]+)\s*secs')
_DURATION = re.compile(r'\|\s*Duration:\s*([0-9.]+)\s*secs')
_ROW = re.compile(r'\|\s*(?:([0-9.]+)\s*<>\s*([0-9.]+|Dur)|(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d)'
                  r'\s*\|')
"""A row: relative (``0.5 <> 1.0``, ``29 <> Dur``) or a clock time (``-t a``, ``-t ad``)."""
HINT = ('ask tshark for one column of bytes: tshark -r CAPTURE -q -z io,stat,0.5 (or with one '
        'filter: -z io,stat,0.5,tcp)')


def is_tshark_iostat(lines) -> bool:
    """Tell whether ``lines`` are tshark's ``-z io,stat`` output (its title in the first lines)."""
    return any(_TITLE.match(line.strip()) for line in lines[:12])


def read_tshark_iostat(path, lines) -> tuple:
    """
    Return ``(times_s, rates_mbps, end_s)`` of an ``io,stat`` table.

    Raises ``ValueError`` naming the file (and line) for a table without its interval, with no
    or several byte columns, or with a row that is not a number of bytes.
    """
    interval = duration = None
    bytes_at = None
    rows = []
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        found = _INTERVAL.match(line)
        if found and interval is None:
            interval = _seconds(path, lineno, found[1])
            continue
        found = _DURATION.match(line)
        if found:
            duration = _seconds(path, lineno, found[1])
            continue
        cells = [c.strip() for c in line.strip('|').split('|')]
        if bytes_at is None and any(c in ('Interval', 'Time', 'Date and time') for c in cells):
            named = [i for i, c in enumerate(cells) if c.lower() == 'bytes']
            if len(named) != 1:
                what = 'several columns of bytes' if named else 'no column of bytes'
                raise ValueError(f'{path}:{lineno}: a tshark io,stat table with {what} '
                                 f'({" | ".join(c for c in cells if c)}); {HINT}')
            bytes_at = named[0]
            continue
        row = _ROW.match(line) if bytes_at is not None else None
        if row is None:
            continue
        try:
            count = float(cells[bytes_at])
        except (IndexError, ValueError):
            raise ValueError(f'{path}:{lineno}: expected a number of bytes in the column '
                             f'Bytes, got {line[:60]!r}') from None
        rows.append((lineno, row[1], row[2], count))
    if interval is None or not interval > 0:
        raise ValueError(f'{path}: a tshark io,stat table without its interval (a line "| '
                         f'Interval: 0.5 secs"); {HINT}')
    if not rows:
        raise ValueError(f'{path}: a tshark io,stat table without rows; {HINT}')
    times = [k * interval for k in range(len(rows))]
    lengths = [interval] * len(rows)
    _, start, stop, _ = rows[-1]
    if start is not None and stop != 'Dur':
        last = _seconds(path, rows[-1][0], stop) - _seconds(path, rows[-1][0], start)
    elif duration is not None:
        last = duration - times[-1]
    else:
        last = interval
    if 0 < last < interval:        # the capture ended inside the last interval
        lengths[-1] = last
    rates = [count * 8 / 1e6 / length for (_, _, _, count), length in zip(rows, lengths)]
    return times, rates, times[-1] + lengths[-1]


def _seconds(path, lineno: int, text: str) -> float:
    """Return the seconds ``text`` of a table's line; ``ValueError`` naming the line if none."""
    try:
        return float(text)
    except ValueError:
        raise ValueError(f'{path}:{lineno}: a tshark io,stat table with {text!r} where a '
                         f'number of seconds belongs; {HINT}') from None
