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
Read the public drive logs of mobile links (HSDPA and 4G/LTE) as traces.

Two collections of measured throughput are what most networking and streaming research
replays: HSDPA logs of commutes around Oslo (Riiser et al., MMSys 2013) and 4G/LTE logs of
routes around Ghent (van der Hooft et al., IEEE Communications Letters 2016). A client
downloaded as fast as it could and wrote, about once a second, what it had received since the
line before, with no header:

* HSDPA, six columns: ``unix_s  clock_ms  latitude  longitude  bytes  elapsed_ms``;
* 4G/LTE, five columns: ``unix_ms  latitude  longitude  bytes  elapsed_ms``.

Read as a table they were refused (no header, more than two numbers). They are links that
fade, hand over and drop out as a moving robot's do, which makes them stress records for a
fleet beside its own Wi-Fi records. Line i becomes the rate that carries its bytes from the
end of line i - 1 to its own end (the first line's interval is its ``elapsed_ms``), so the
trace delivers exactly the bytes of the log, also where the clock and ``elapsed_ms``
disagree by some jitter. A line far later than the one before (the client stopped) is warned
about as a gap (``rog_ros.net.gaps``).
"""

from __future__ import annotations

import math

from rog_ros.net.gaps import warn_gaps

FORMATS = {
    6: ('HSDPA log', 'unix_s clock_ms latitude longitude bytes elapsed_ms', 1, 1e-3, (1e8, 1e10)),
    5: ('4G/LTE log', 'unix_ms latitude longitude bytes elapsed_ms', 0, 1e-3, (1e11, 1e13)),
}
"""Per column count: name, columns, index of the clock column, its unit in seconds, and the
range of the first column (Unix time in seconds or in milliseconds) that tells the format."""


def _fields(text: str):
    """Return the line's numbers, or None when a field is not a number."""
    try:
        return [float(word) for word in text.split()]
    except ValueError:
        return None


def _looks_like(values) -> bool:
    """Tell whether one line's numbers are a line of the format its column count names."""
    spec = FORMATS.get(len(values)) if values else None
    if spec is None or not all(map(math.isfinite, values)):    # ('inf' and 'nan' parse)
        return False
    low, high = spec[4]
    lat, lon, count, elapsed = values[-4], values[-3], values[-2], values[-1]
    return (low <= values[0] < high and -90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0
            and count >= 0 and count == int(count) and elapsed == int(elapsed))


def log_name(lines) -> str | None:
    """'HSDPA log' or '4G/LTE log' when the first line that is not blank is one, else None."""
    for line in lines:
        if line.strip():
            values = _fields(line)
            return FORMATS[len(values)][0] if _looks_like(values) else None
    return None


def is_mobile_log(lines) -> bool:
    """Tell whether ``lines`` are an HSDPA or a 4G/LTE log (``log_name`` names which)."""
    return log_name(lines) is not None


def read_mobile_log(path, lines) -> tuple:
    """
    Return ``(times_s, rates_mbps, end_s)`` of an HSDPA or 4G/LTE log, on the log's clock.

    Blank lines are skipped. A line with another column count, a field that is not a number,
    a negative byte count, a first line whose ``elapsed_ms`` is not positive, or a clock that
    does not increase raises ``ValueError`` naming the line: skipping it would give its bytes
    to the next line's interval.
    """
    entries = [(lineno, raw.strip()) for lineno, raw in enumerate(lines, 1) if raw.strip()]
    if not entries:
        raise ValueError(f'{path}: no samples')
    width = len(entries[0][1].split())
    if width not in FORMATS:
        raise ValueError(f'{path}:{entries[0][0]}: {width} columns: not an HSDPA or 4G/LTE log')
    name, columns, clock_col, unit_s, _ = FORMATS[width]
    ends, counts = [], []
    for lineno, text in entries:
        values = _fields(text)
        if values is None or not _looks_like(values) or len(values) != width:
            raise ValueError(f'{path}:{lineno}: not a line of the {name} that the first line '
                             f'starts ("{columns}"); got {text[:60]!r}')
        end = values[clock_col] * unit_s
        if ends and end <= ends[-1]:
            raise ValueError(f'{path}:{lineno}: the clock does not increase ({values[clock_col]:g}'
                             f' after {ends[-1] / unit_s:g})')
        if not ends:
            first = values[-1] * 1e-3
            if first <= 0.0:
                raise ValueError(f'{path}:{lineno}: the first line must say how long it measured '
                                 f'(elapsed_ms > 0); got {text[:60]!r}')
            ends.append(end - first)
        ends.append(end)
        counts.append(values[-2])
    rates = [count * 8.0 / ((stop - start) * 1e6)
             for count, start, stop in zip(counts, ends, ends[1:])]
    warn_gaps(path, ends, rates, GAP_ADVICE)
    return ends[:-1], rates, ends[-1]


GAP_ADVICE = ('the log has no line then (the client stopped, or lost its connection): the '
              'bytes of the line after it are spread over it; if the link was down then, it '
              'replays as a slow link, not an outage')
"""What to do about a gap in a drive log (``warn_gaps``)."""
