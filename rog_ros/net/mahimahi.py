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
Read Mahimahi packet-delivery traces (``mm-link``'s format) as rate traces.

Most public records of real wireless links (cellular and Wi-Fi captures recorded with the
Saturator tool, the Pantheon and Puffer traces) are in this format: one integer per line, the
millisecond at which one MTU-sized packet (1,500 bytes) could cross the link, repeated when
several could, and the file wraps around at its last timestamp. ``load_trace`` recognises such
a file and turns it into Mbit/s over bins of ``BIN_S`` (packet counts per bin, so no byte is
gained or lost), which keeps the sub-second swings Wi-Fi has and that ATP reacts to.

The log ``mm-link`` writes of a run (``--downlink-log``, as Pantheon keeps them) is read too:
after its ``# base timestamp:`` line, one event per line, ``ms + bytes`` (a packet arrived),
``ms # bytes`` (the link could deliver that many bytes then) and ``ms - bytes delay`` (a packet
left). The link's rate is that of its ``#`` lines, binned the same way from the base timestamp
to the last event: what the link could carry, whatever the run sent.

One integer per line is also what a logger's bare list of rates looks like, so a file is read
as Mahimahi only if ``mm-link`` would play it as a recording: its timestamps never go back, the
last one (the period) is above 0 ms, and a file whose timestamps differ spans at least
``MIN_RECORD_MS``. Anything else raises ``NotMahimahi``, which ``load_trace`` reports as no
recognised format. A file whose stamps run past ``MAX_RECORD_MS`` (clock times in ms since
1970, say) is refused with a ``ValueError`` that says so, before any bin is allocated.
"""

from __future__ import annotations

import re

import numpy as np

PACKET_BITS = 1500 * 8
"""One delivery opportunity carries one MTU-sized packet."""

BIN_S = 0.1
"""Width of the rate bins: a 2 Mbit/s link still delivers 17 packets per bin."""

MIN_RECORD_MS = 1000
"""Shortest Mahimahi recording read: 1 s, ten ``BIN_S`` bins. Public records last minutes; a
rising list of integers that ends below 1000 (``12, 15, 20, 25``) is far likelier rates or
counters without times, and a rising list of rates in Mbit/s does not reach 1000. Files whose
timestamps are all equal are ``mm-link``'s constant-rate idiom (``1``: one packet per ms, 12
Mbit/s; ``5``: 2.4 Mbit/s) and may be shorter."""


MAX_RECORD_MS = 86_400_000
"""Longest Mahimahi recording read: 24 h (864,000 ``BIN_S`` bins). Public records last minutes
and a day of them is a file of tens of millions of lines; a stamp beyond this is a clock time
or a typo, and binning up to it would allocate gigabytes (epoch ms: 127 GiB)."""


class NotMahimahi(ValueError):
    """One integer per line, but not a trace ``mm-link`` would play; the message says why."""


def _is_stamp(text: str) -> bool:
    """Tell whether ``text`` is one unsigned integer in ASCII digits, as ``mm-link`` reads."""
    return text.isascii() and text.isdigit()    # str.isdigit alone takes a superscript two


def is_mahimahi(lines) -> bool:
    """Tell whether ``lines`` look like a Mahimahi trace: the first data line is one integer."""
    for line in lines:
        text = line.strip()
        if text and not text.startswith('#'):
            return _is_stamp(text)
    return False


def read_mahimahi(path, lines, bin_s: float = BIN_S) -> tuple:
    """
    Return ``(times_s, rates_mbps, end_s)`` of a Mahimahi trace's lines.

    The period is the last timestamp, as ``mm-link`` wraps; the last bin may be shorter than
    ``bin_s``. A line that is not one integer raises ``ValueError`` naming the line, and so do
    stamps beyond ``MAX_RECORD_MS``; a timestamp that goes back, a last timestamp of 0 ms, or a
    recording shorter than ``MIN_RECORD_MS`` raises ``NotMahimahi``.
    """
    stamps = []
    for lineno, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text or text.startswith('#'):
            continue
        if not _is_stamp(text):
            raise ValueError(f'{path}:{lineno}: read as a Mahimahi trace (its first line is one '
                             f'integer), which has one integer (ms) per line; got {text[:60]!r}')
        ms = int(text)
        if stamps and ms < stamps[-1]:
            raise NotMahimahi(f'{path}:{lineno}: one integer per line, but {ms} follows '
                              f'{stamps[-1]}: not a Mahimahi trace (its ms timestamps never go '
                              'back)')
        stamps.append(ms)
    if not stamps:
        raise ValueError(f'{path}: no packet delivery opportunities')
    period_ms = stamps[-1]
    _check_span(path, stamps[0], period_ms)
    if period_ms == 0:
        raise NotMahimahi(f'{path}: one integer per line, but not a Mahimahi trace: its last '
                          'timestamp (the period mm-link loops) is 0 ms, a trace that lasts no '
                          'time')
    if stamps[0] != period_ms and period_ms < MIN_RECORD_MS:
        raise NotMahimahi(f'{path}: one integer per line spanning {period_ms} ms: too short for '
                          f'a Mahimahi trace (a recording spans at least {MIN_RECORD_MS} ms; a '
                          'constant rate repeats one timestamp, e.g. "1" for 12 Mbit/s)')
    bin_ms = min(bin_s * 1000.0, float(period_ms))
    n_bins = int(np.ceil(period_ms / bin_ms - 1e-9))
    index = np.minimum((np.asarray(stamps, dtype=np.float64) // bin_ms).astype(np.int64),
                       n_bins - 1)
    counts = np.bincount(index, minlength=n_bins)
    starts_ms = np.arange(n_bins) * bin_ms
    widths_ms = np.minimum(starts_ms + bin_ms, period_ms) - starts_ms
    rates = counts * PACKET_BITS / (widths_ms * 1e3)     # bits per ms / 1e3 = Mbit/s
    return (starts_ms / 1e3).tolist(), rates.tolist(), period_ms / 1e3


def _check_span(path, first_ms: int, period_ms: int) -> None:
    """Refuse stamps past ``MAX_RECORD_MS``: clock times, or a span no recording has."""
    if first_ms > MAX_RECORD_MS:
        raise ValueError(f'{path}: its first timestamp {first_ms} is {first_ms / 86_400_000:,.0f} '
                         'days: the stamps look like clock times (ms since 1970), but Mahimahi '
                         'stamps are milliseconds from the start of the recording (at most '
                         f'{MAX_RECORD_MS} ms, 24 h): subtract the first stamp from every line')
    if period_ms > MAX_RECORD_MS:
        raise ValueError(f'{path}: its timestamps span {period_ms} ms '
                         f'({period_ms / 3_600_000:.3g} h); a Mahimahi recording read here lasts '
                         f'at most {MAX_RECORD_MS} ms (24 h): cut it into shorter files')


_LOG_EVENT = re.compile(r'(\d+) ([-+#]) (\d+)(?: \d+)?')
"""An event of an ``mm-link`` log: ``ms + bytes``, ``ms # bytes``, ``ms - bytes delay``."""


def is_mm_log(lines) -> bool:
    """Tell whether ``lines`` are an ``mm-link`` log: its ``# base timestamp:`` header line."""
    return any(line.startswith('# base timestamp:') for line in lines[:20])


def _base_timestamp(path, lineno: int, text: str) -> int:
    """Return the ms of a ``# base timestamp: MS`` line; ``ValueError`` naming it if none."""
    value = text.split(':', 1)[1].strip()
    if not value.isdigit():
        raise ValueError(f'{path}:{lineno}: an mm-link log whose base timestamp is not a whole '
                         f'number of ms ({value[:30]!r}); it is the first line of the log '
                         'mm-link writes: check that the file is not edited or cut')
    return int(value)


def read_mm_log(path, lines, bin_s: float = BIN_S) -> tuple:
    """
    Return ``(times_s, rates_mbps, end_s)`` of the delivery opportunities of an ``mm-link`` log.

    Each ``#`` line's bytes go into the bin of its time since the base timestamp; the record
    ends at the last event. Raises ``ValueError`` naming the line of an event that is none of
    the three, and for a log without a ``#`` line or shorter than ``MIN_RECORD_MS``.
    """
    base, last, stamps, sizes = None, None, [], []
    for lineno, raw in enumerate(lines, 1):
        text = raw.strip()
        if text.startswith('# base timestamp:'):
            base = _base_timestamp(path, lineno, text)
        if not text or text.startswith('#'):
            continue
        event = _LOG_EVENT.fullmatch(text)
        if event is None or base is None:
            raise ValueError(f'{path}:{lineno}: read as an mm-link log (it has a "# base '
                             'timestamp:" line), whose events follow that line as "ms + bytes", '
                             f'"ms # bytes" or "ms - bytes delay"; got {text[:60]!r}')
        ms = int(event[1]) - base
        last = ms if last is None else max(last, ms)
        if event[2] == '#':
            stamps.append(ms)
            sizes.append(int(event[3]))
    if not stamps:
        raise ValueError(f'{path}: an mm-link log without a delivery opportunity (a line "ms # '
                         'bytes"): it holds what was sent, not what the link could carry')
    _check_span(path, max(stamps[0], 0), last)
    if last < MIN_RECORD_MS:
        raise ValueError(f'{path}: an mm-link log whose events span {max(last, 0)} ms from its '
                         f'base timestamp: too short to replay (a recording spans at least '
                         f'{MIN_RECORD_MS} ms); log a longer run')
    bin_ms = min(bin_s * 1000.0, float(last))
    n_bins = int(np.ceil(last / bin_ms - 1e-9))
    index = np.clip((np.asarray(stamps, dtype=np.float64) // bin_ms).astype(np.int64), 0,
                    n_bins - 1)
    bits = np.bincount(index, weights=np.asarray(sizes, dtype=np.float64) * 8, minlength=n_bins)
    starts_ms = np.arange(n_bins) * bin_ms
    widths_ms = np.minimum(starts_ms + bin_ms, last) - starts_ms
    return (starts_ms / 1e3).tolist(), (bits / (widths_ms * 1e3)).tolist(), last / 1e3
