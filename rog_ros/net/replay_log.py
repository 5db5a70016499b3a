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
Read the Rog testbed's logged replays (``bw_replay-<rank>.txt``) as traces.

The authors' outdoor record is not public, but every run of their artifact logged the rates
its replay applied to each worker's link (specs/rog_artifact.md 5.2): these logs are the only
real outdoor Wi-Fi rates of that testbed anyone can measure on. A log is a stream of

* ``YYYY-MM-DD HH:MM:SS,mmm <Mbit/s>``: the rate applied from that moment (already x 0.7),
* ``Stop for N seconds``: the replay held the rate N more seconds (the next stamp already
  includes the hold, so it only tells how long the last rate lasted),
* start-up output of ``tc`` and the interface lookup (``wnic_name ...``, ``Error: ...``,
  ``RTNETLINK answers ...``), which the testbed ignored and so does this reader.

A stamp far later than the one before, beyond the hold its ``Stop`` line logged, is warned
about as a gap (``rog_ros.net.gaps``). ``load_trace`` recognises a log by its first stamped
line and reads it here, so ``--trace bw_replay-1.txt`` replays that worker's link as the
testbed applied it.
"""

from __future__ import annotations

from datetime import datetime
import math
import re

from rog_ros.net.gaps import warn_gaps

STAMPED = re.compile(r'^(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:[,.](\d{1,6}))?\s+(\S+)$')
"""A value line: wall-clock stamp (milliseconds after a comma, as Python's logging writes them)
and the applied rate."""

STOP = re.compile(r'^Stop for (\d+) seconds?$')


def is_replay_log(lines) -> bool:
    """Tell whether ``lines`` are a log: the first line starting with a digit is stamped."""
    for line in lines:
        text = line.strip()
        if text[:1].isdigit():
            return STAMPED.match(text) is not None
    return False


def read_replay_log(path, lines) -> tuple:
    """
    Return ``(times_s, rates_mbps, end_s)`` of a logged replay, times on the log's clock.

    The last rate lasts its ``Stop`` when one follows it (the run ended during that hold);
    else ``end_s`` is None and ``Trace.from_samples`` holds it one median step. A line that
    starts with a digit and is not a value line, or a rate that is not a finite number >= 0,
    raises ``ValueError`` naming the line: such a log is damaged, and skipping it would shift
    the rates that follow.
    """
    times, rates, last_stop, holds = [], [], None, []
    for lineno, raw in enumerate(lines, 1):
        text = raw.strip()
        stop = STOP.match(text)
        if stop:
            last_stop = float(stop.group(1))
            continue
        if not text[:1].isdigit():
            continue                  # tc / interface start-up output, as the testbed did
        m = STAMPED.match(text)
        try:
            if m is None:
                raise ValueError
            stamp = datetime.strptime(m.group(1).replace('T', ' '), '%Y-%m-%d %H:%M:%S')
            t = (stamp - datetime(1970, 1, 1)).total_seconds()
            t += float('0.' + m.group(2)) if m.group(2) else 0.0
            rate = float(m.group(3))
        except ValueError:
            raise ValueError(f'{path}:{lineno}: expected "YYYY-MM-DD HH:MM:SS,mmm <Mbit/s>" in a '
                             f'testbed replay log, got {text[:60]!r}') from None
        if not (math.isfinite(rate) and rate >= 0.0):
            raise ValueError(f'{path}:{lineno}: need a finite rate >= 0, got {text[:60]!r}')
        if times and t <= times[-1]:
            raise ValueError(f'{path}:{lineno}: time stamp does not increase')
        if times:
            holds.append(last_stop or 0.0)      # the step before t held this long on purpose
        times.append(t)
        rates.append(rate)
        last_stop = None
    if not times:
        raise ValueError(f'{path}: no stamped rates')
    warn_gaps(path, times, rates, GAP_ADVICE, explained=holds)
    return times, rates, (times[-1] + last_stop if last_stop is not None else None)


GAP_ADVICE = ('the log has no rate then beyond its "Stop for N seconds" holds (the run was '
              'paused, or lines were cut out); the testbed applied that rate through it')
"""What to do about a gap in a testbed replay log (``warn_gaps``)."""
