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
Read ``sar -n DEV`` reports (sysstat) as rate traces.

``sar -n DEV 1 > dev.txt`` is how many engineers watch a robot's interfaces: every interval a
block of lines, one per interface, ``11:23:07 AM  wlan0  812.00  401.00  1187.53  32.11 ...``,
under a header that names the columns (``IFACE rxpck/s txpck/s rxkB/s txkB/s ...``). A line's
rates are the means over the interval that ends at its time. The trace takes the interface's
larger direction, ``max(rxkB/s, txkB/s)`` in kB/s of 1000 bytes, as netmon records the
throughput of a robot's link; the interface is the only one besides ``lo``, or the only
Wi-Fi one (``wl...``), else the report is refused naming them. Times are times of day (12 or
24 hours, as the locale wrote them); a time that goes back is the next day; a decimal comma
reads as a point. ``Average:`` lines
are left out; a time far later than the one before (sar restarted) is warned about as a gap
(``rog_ros.net.gaps``). Like netmon's throughput, it is the traffic the robot moved, not the link's
capacity: record while the link is loaded.
"""

from __future__ import annotations

import math
import re

from rog_ros.net.gaps import warn_gaps

_TIME = re.compile(r'(\d\d):(\d\d):(\d\d)(?:\s+([AP]M))?\s+', re.IGNORECASE)
"""The time of day that starts each line of a report: ``11:23:07 AM`` or ``23:23:07``."""
_HEAD = 10
"""Lines at the top of a file searched for the header that tells a ``sar -n DEV`` report."""


def _header(text: str):
    """Return the column names after the time of a header line (``IFACE rxkB/s ...``), or None."""
    match = _TIME.match(text)
    words = text[match.end():].split() if match else []
    return words if words[:1] == ['IFACE'] and 'rxkB/s' in words else None


def is_sar(lines) -> bool:
    """Tell whether ``lines`` are a ``sar -n DEV`` report: a header line near the top."""
    seen = 0
    for line in lines:
        text = line.strip()
        if not text:
            continue
        if _header(text) is not None:
            return True
        seen += 1
        if seen >= _HEAD:
            return False
    return False


def _seconds(match) -> float:
    """Return the seconds since midnight of a time of day matched by ``_TIME``."""
    hour, minute, second = int(match[1]), int(match[2]), int(match[3])
    if match[4]:
        hour = hour % 12 + (12 if match[4].upper() == 'PM' else 0)
    return hour * 3600.0 + minute * 60.0 + second


def _number(text: str) -> float:
    """Read a rate, with a decimal point or, as sar writes in many locales, a comma."""
    return float(text.replace(',', '.', 1) if '.' not in text else text)


def _interface(path, rows) -> str:
    """Pick the interface of the trace: the only one but ``lo``, or the only Wi-Fi one."""
    names = sorted({name for name, *_ in rows} - {'lo'})
    if len(names) == 1:
        return names[0]
    wifi = [name for name in names if name.startswith('wl')]
    if len(wifi) == 1:
        return wifi[0]
    raise ValueError(f'{path}: a sar -n DEV report of {len(names)} interfaces ('
                     f'{", ".join(names) or "none but lo"}) and not one Wi-Fi interface (wl...) '
                     'among them; keep one: grep -E "IFACE|wlan0" FILE > link.txt')


def read_sar(path, lines) -> tuple:
    """
    Return ``(times_s, rates_mbps, end_s)`` of a ``sar -n DEV`` report's lines.

    A line between headers that is not a time, an interface and as many numbers as the header
    names raises ``ValueError`` naming the line; so does a rate that is not a finite number
    >= 0, or two lines of the interface at one time.
    """
    names, rows, day, last = None, [], 0.0, None
    for lineno, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text or text.startswith('Average:') or 'RESTART' in text:
            continue
        header = _header(text)
        if header is not None:
            names = header
            continue
        match = _TIME.match(text)
        if names is None or match is None:
            continue                        # the banner (Linux ..., the date, the CPUs)
        fields = text[match.end():].split()
        try:
            if len(fields) != len(names):
                raise ValueError
            rx = _number(fields[names.index('rxkB/s')])
            tx = _number(fields[names.index('txkB/s')])
        except ValueError:
            raise ValueError(f'{path}:{lineno}: expected a time, an interface and '
                             f'{len(names) - 1} numbers as the header {" ".join(names)} says, '
                             f'got {text[:60]!r}') from None
        if not (math.isfinite(rx) and math.isfinite(tx) and rx >= 0 and tx >= 0):
            raise ValueError(f'{path}:{lineno}: need finite rates >= 0, got {text[:60]!r}')
        t = _seconds(match)
        if last is not None and t + day < last:
            day += 86400.0                  # past midnight
        last = t + day
        rows.append((fields[0], lineno, last, max(rx, tx) * 8e-3))
    if not rows:
        raise ValueError(f'{path}: a sar -n DEV report without interface lines')
    name = _interface(path, rows)
    mine = [row for row in rows if row[0] == name]
    ends = [t for _, _, t, _ in mine]
    for (_, lineno, t, _), before in zip(mine[1:], ends):
        if t <= before:
            raise ValueError(f'{path}:{lineno}: {name} again at {t % 86400:.0f} s of the day, '
                             'a time that does not increase')
    step = ends[1] - ends[0] if len(ends) > 1 else 1.0
    starts = [ends[0] - step] + ends[:-1]       # a line's rates are over the interval before it
    rates = [rate for *_, rate in mine]
    warn_gaps(path, starts, rates, GAP_ADVICE)
    return starts, rates, ends[-1]


GAP_ADVICE = ('sar was stopped or restarted (a reboot) and its line after the gap is the rate '
              'of one interval; if the link was down then, write it as a table (rog trace '
              'convert FILE --out link.csv) and add a row with rate 0 where the gap starts')
"""What to do about a gap in a ``sar -n DEV`` report (``warn_gaps``)."""
