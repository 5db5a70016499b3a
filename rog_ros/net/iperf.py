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
Read iperf reports as rate traces: iperf3's JSON, iperf3's and iperf2's text, iperf2's CSV.

iperf is how most engineers measure a robot's Wi-Fi: ``iperf3 -c server -t 600 -i 0.5 -J >
link.json`` on the robot while it drives its route. Each report interval becomes one segment
at the rate iperf measured over it; the run's own summary lines (``sender`` / ``receiver``,
iperf2's whole-run line) and the ``-O`` warm-up intervals (TCP slow start, not the link) are
left out. Several runs appended to one file (a loop of ``iperf3 -J >> link.json``) play one
after the other. With parallel streams (``-P``) the ``[SUM]`` lines are the link (iperf 2.1's
``[SUM-2]``, transfer id -1 in iperf2's CSV); with
``--bidir`` the first direction in the file is kept.

A UDP client's intervals are the rate it *sent* (``-b``), not what the link delivered, so a
report that says so is refused: JSON by its ``protocol`` and ``sender`` (in older iperf3 versions,
which wrote no ``sender``, by ``connecting_to`` without ``reverse``), iperf3's text by its
client's interval header (``Total Datagrams`` without ``Jitter``), iperf2's by the lines only
its UDP client writes (``Client connecting to ..., UDP port``, ``Sending 1470 byte
datagrams``, ``Sent 179 datagrams``); record UDP on the server side (``iperf3 -s -J``) or use
TCP.

A report in which iperf wrote an error (``"error"`` in the JSON, an ``iperf3: error - ...`` line
in the text) is refused with iperf's words. A run stopped by Ctrl-C (``interrupt - the client
has terminated``) keeps the intervals it measured, with a one-line warning on stderr.
"""

from __future__ import annotations

import json
import re

import numpy as np
from rog_ros.net.gaps import warn_gaps
from rog_ros.net.notices import _warned, note, warn  # noqa: F401 - iperf.warn, as before

_UNIT = {'': 1.0, 'K': 1e3, 'M': 1e6, 'G': 1e9, 'T': 1e12}
_LINE = re.compile(
    r'\[\s*(?P<id>\d+|SUM)(?:-\d+)?\](?P<role>\[[A-Z-]+\])?\s+(?P<a>[\d.]+)\s*-\s*'
    r'(?P<b>[\d.]+)\s+sec\s+[\d.]+\s+[KMGT]?Bytes\s+(?P<rate>[\d.]+)\s+(?P<unit>[KMGT]?)'
    r'(?P<kind>bits|Bytes)/sec(?P<rest>.*)$')
_CSV_INTERVAL = re.compile(r'^(?P<a>[\d.]+)-(?P<b>[\d.]+)$')
_UDP_CLIENT = re.compile(r'^(?:Client connecting to .*, UDP port \d+|Sending \d+ byte datagrams.*|'
                         r'\[\s*\d+\] Sent \d+ datagrams|\[ ID\] Interval\s+Transfer\s+'
                         r'(?:Bitrate|Bandwidth)\s+Total Datagrams)$')
"""Lines only a UDP client writes: iperf2's banner, its count of datagrams sent, and iperf3's
interval header (a server's, or a client's with -R, says ``Jitter  Lost/Total Datagrams``)."""
_ERROR = re.compile(r'^iperf3?: (?P<kind>error|interrupt) - (?P<message>.*)$')
"""iperf3's own error lines: ``iperf3: error - unable to connect to server: ...``."""
EPS_S = 1e-6


def _interrupted(error) -> bool:
    """Tell whether iperf3's error text says the run was stopped (Ctrl-C), not that it failed."""
    return str(error).strip().lower().startswith('interrupt')


_ANY_INTERVAL = re.compile(r'[\d.]-[\d.]')
"""What an iperf2 ``-y C`` interval holds, in any script's digits (as ``_CSV_INTERVAL``)."""
_DIGIT_OR_POINT = np.zeros(256, dtype=bool)
_DIGIT_OR_POINT[list(b'0123456789.')] = True


def _may_be_iperf(lines, block: int = 16384) -> bool:
    """
    Tell whether some line may pass ``is_iperf``'s tests: False only where none can.

    Each test needs something in its line: a ``{``, ``bits/sec`` or ``Bytes/sec``, ``iperf``,
    or eight commas and an iperf2 ``-y C`` interval (``0.0-1.0``: a digit or point, a hyphen,
    a digit or point). Looked for ``block`` lines at a time with C loops and numpy, so that a
    table of a million rows is not split line by line into fields.
    """
    for start in range(0, len(lines), block):
        text = ''.join(lines[start:start + block])
        if '{' in text or 'bits/sec' in text or 'Bytes/sec' in text or 'iperf' in text:
            return True
        if text.count(',') < 8:
            continue
        if not text.isascii():      # re's \d (so _CSV_INTERVAL's) takes any script's digits
            if _ANY_INTERVAL.search(text):
                return True
            continue
        raw = np.frombuffer(text.encode('utf-8', 'surrogatepass'), dtype=np.uint8)
        at = np.flatnonzero(raw[1:-1] == ord('-')) + 1
        if np.any(_DIGIT_OR_POINT[raw[at - 1]] & _DIGIT_OR_POINT[raw[at + 1]]):
            return True
    return False


def is_iperf(lines) -> bool:
    """Tell whether ``lines`` look like an iperf report (JSON, text or iperf2's ``-y C``)."""
    if not _may_be_iperf(lines):
        return False        # (a table of a million rows: 0.5 to 2 s line by line)
    for line in lines:
        text = line.strip()
        if not text:
            continue
        if text.startswith('{'):
            return True
        if _LINE.search(text) or _csv_fields(text) is not None or _ERROR.match(text):
            return True
    return False


def read_iperf(path, lines) -> tuple:
    """
    Return ``(times_s, rates_mbps, end_s)`` of an iperf report's lines.

    Raises ``ValueError`` naming the file (and the line or interval) when the report holds an
    error iperf wrote, no interval, a UDP client's sending rate, or intervals that go back. An
    interrupted run with intervals is read, with a warning (``warn``).
    """
    text = ''.join(lines)
    if text.lstrip().startswith('{'):
        intervals = _json_intervals(path, text)
    else:
        intervals = _text_intervals(path, lines)
    if not intervals:
        raise ValueError(f'{path}: an iperf report without intervals (nothing was measured)')
    times, rates = [a for a, _, _ in intervals], [r for _, _, r in intervals]
    warn_gaps(path, times, rates, GAP_ADVICE)
    return times, rates, intervals[-1][1]


GAP_ADVICE = ('the report has no interval then (lines left out of it?); if the link was down '
              'then, write it as a table (rog trace convert FILE --out link.csv) and add a row '
              'with rate 0 where the gap starts')
"""What to do about a gap between an iperf report's intervals (``warn_gaps``)."""


# ----------------------------------------------------------------------------------------- JSON

def _documents(path, text):
    """Yield the JSON objects of ``text``: one ``-J`` report, several appended, or a stream."""
    decoder, at = json.JSONDecoder(), 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return
        try:
            doc, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            raise ValueError(f'{path}:{exc.lineno}: not iperf3 JSON ({exc.msg})') from None
        if not isinstance(doc, dict):
            raise ValueError(f'{path}: not iperf3 JSON (a {type(doc).__name__} at the top)')
        yield doc


_JSON_TYPES = ((dict, 'an object'), (list, 'a list'), (str, 'a string'), (bool, 'a boolean'),
               ((int, float), 'a number'), (type(None), 'null'))
"""JSON's names of the types ``json`` decodes to, for errors (bool before int: it is one)."""


def _json_type(value) -> str:
    """Name the JSON type of a decoded ``value``: 'an object', 'a list', 'a number', ..."""
    return next(name for kind, name in _JSON_TYPES if isinstance(value, kind))


def _object(path, value, where: str) -> dict:
    """Return ``value`` (None as ``{}``) if it is a JSON object; else say what it is, not iperf."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f'{path}: {where} is {_json_type(value)} where iperf3 writes an object: '
                         'not an iperf3 -J report')
    return value


def _run_intervals(path, number: int, run: dict) -> list:
    """Return the ``sum`` objects of a run's intervals, or refuse a run that is not iperf3's."""
    intervals = run.get('intervals')
    if not isinstance(intervals, list):
        raise ValueError(f'{path}: run {number}: "intervals" is {_json_type(intervals)} where '
                         'iperf3 writes a list of objects: not an iperf3 -J report')
    return [_object(path, _object(path, interval, f'run {number}, interval {k}').get('sum'),
                    f'run {number}, interval {k}: "sum"')
            for k, interval in enumerate(intervals)]


def _json_intervals(path, text) -> list:
    """Return ``(start_s, end_s, mbps)`` of the intervals of iperf3's ``-J`` or stream JSON."""
    runs, stream = [], None          # --json-stream: {"event": ..., "data": ...} per line
    for doc in _documents(path, text):
        if 'event' in doc:
            if doc['event'] == 'start' or stream is None:
                stream = {'start': {}, 'intervals': []}
                runs.append(stream)
            if doc['event'] in ('start', 'interval'):
                data = _object(path, doc.get('data'), f'"data" of event "{doc["event"]}"')
            if doc['event'] == 'start':
                stream['start'] = data
            elif doc['event'] == 'interval':
                stream['intervals'].append(data)
            elif doc['event'] == 'error':
                if not _interrupted(doc.get('data')):
                    raise ValueError(f'{path}: iperf3 reported an error: {doc.get("data")}')
                stream['error'] = doc.get('data')
            continue
        if doc.get('error') and not (_interrupted(doc['error']) and doc.get('intervals')):
            raise ValueError(f'{path}: iperf3 reported an error: {doc["error"]}')
        if 'intervals' not in doc:
            raise ValueError(f'{path}: JSON without "intervals": not an iperf3 -J report')
        runs.append(doc)
    out, notes = [], []
    for number, run in enumerate(runs, 1):
        sums = _run_intervals(path, number, run)
        if run.get('error'):                # an interrupt (other errors were refused above)
            kept = sum(not total.get('omitted') for total in sums)
            if not kept:
                raise ValueError(f'{path}: iperf3 reported an error: {run["error"]}')
            notes.append(f'{path}: iperf3 run {number} was interrupted ({run["error"]}); '
                         f'using the {kept} intervals it measured')
        start = _object(path, run.get('start'), f'run {number}: "start"')
        test_start = _object(path, start.get('test_start'), f'run {number}: "test_start"')
        udp = test_start.get('protocol') == 'UDP'
        # older iperf3 wrote no "sender" in its sums: a client that did not -R sent them
        client_sent = 'connecting_to' in start and not test_start.get('reverse')
        offset, first = (out[-1][1] if out else 0.0), len(out)
        for k, total in enumerate(sums):
            if total.get('omitted'):
                continue
            if udp and total.get('sender', client_sent):
                raise ValueError(
                    f'{path}: run {number} is the report of a UDP client: its intervals are '
                    'the rate it sent (-b), not what the link delivered; record on the server '
                    'side (iperf3 -s -J) or use TCP')
            try:
                a, b = float(total['start']), float(total['end'])
                rate = float(total['bits_per_second']) / 1e6
            except (KeyError, TypeError, ValueError):
                raise ValueError(f'{path}: run {number}, interval {k}: no start, end and '
                                 'bits_per_second in its "sum"') from None
            _append(out, first, offset + a, offset + b, rate, f'{path}: run {number}, '
                                                              f'interval {k}')
    for said in notes:                      # once the report has been read without an error
        warn(said)
    return out


def _append(out, first, a, b, rate, where):
    """Add interval ``[a, b)`` after the run's earlier ones (``out[first:]``) or refuse it."""
    if abs(b - a) <= EPS_S:
        return                          # iperf's empty last interval ("10.00-10.00 sec")
    if b < a or rate < 0:
        raise ValueError(f'{where}: interval {a:g}-{b:g} s at {rate:g} Mbit/s is not a sample')
    if len(out) > first and a < out[-1][1] - EPS_S:
        raise ValueError(f'{where}: starts at {a:g} s, before the previous interval ends '
                         f'({out[-1][1]:g} s)')
    out.append((a, b, rate))


# ----------------------------------------------------------------------------------------- text

def _csv_fields(text):
    """Return the interval, bytes and bit/s of an iperf2 ``-y C`` line, or None."""
    fields = text.split(',')
    if len(fields) < 9 or not _CSV_INTERVAL.match(fields[6]):
        return None
    try:
        return fields[6], float(fields[8])
    except ValueError:
        return None


def _text_intervals(path, lines) -> list:
    """Return ``(start_s, end_s, mbps)`` of the intervals of iperf3's or iperf2's text."""
    rows = []                                   # (lineno, stream, role, a, b, mbps, rest)
    interrupt = None
    for lineno, raw in enumerate(lines, 1):
        text = raw.strip()
        error = _ERROR.match(text)
        if error and error['kind'] == 'error':
            raise ValueError(f'{path}:{lineno}: iperf3 reported an error: {error["message"]}')
        if error:
            interrupt = interrupt or (lineno, error['message'])
            continue
        if _UDP_CLIENT.match(text):
            raise ValueError(f'{path}:{lineno}: the text of a UDP client: its intervals are the '
                             'rate it sent (-b), not what the link delivered; record on the '
                             'server side (iperf3 -s, iperf -s -u -i 0.5) or use TCP')
        match = _LINE.search(text)        # iperf3 --timestamps puts the time first
        if match:
            rate = float(match['rate']) * _UNIT[match['unit']] / 1e6
            rate *= 8.0 if match['kind'] == 'Bytes' else 1.0
            rows.append((lineno, match['id'], match['role'], float(match['a']),
                         float(match['b']), rate, match['rest']))
            continue
        csv = _csv_fields(text)
        if csv is not None:
            a, b = _CSV_INTERVAL.match(csv[0]).groups()
            stream = text.split(',')[5]
            stream = 'SUM' if stream == '-1' else stream      # the sum of -P streams
            rows.append((lineno, stream, None, float(a), float(b), csv[1] / 1e6, ''))
    roles = [row[2] for row in rows if row[2]]          # --bidir: [TX-C] and [RX-C]
    rows = [row for row in rows if row[2] == (roles[0] if roles else None)]
    streams = {row[1] for row in rows}
    if 'SUM' in streams:
        rows = [row for row in rows if row[1] == 'SUM']
    elif len(streams) > 1:
        raise ValueError(f'{path}: {len(streams)} iperf streams ({", ".join(sorted(streams))}) '
                         'and no [SUM] lines: keep one stream, or run with -P to get [SUM]')
    out, first, offset = [], 0, 0.0
    for lineno, _, _, a, b, rate, rest in rows:
        if 'sender' in rest or 'receiver' in rest or 'omitted' in rest:
            continue                            # iperf3's summary lines and -O warm-up
        if len(out) > first and a < out[-1][1] - offset - EPS_S:
            if b >= out[-1][1] - offset - EPS_S:
                continue                        # iperf2's whole-run line: overlaps the run
            first, offset = len(out), out[-1][1]  # a new run appended to the file
        _append(out, first, offset + a, offset + b, rate, f'{path}:{lineno}')
    if interrupt and not out:
        raise ValueError(f'{path}:{interrupt[0]}: iperf3 was interrupted ({interrupt[1]}) before '
                         'it measured an interval')
    if interrupt:
        warn(f'{path}:{interrupt[0]}: iperf3 was interrupted ({interrupt[1]}); using the '
             f'{len(out)} intervals it measured')
    return out
