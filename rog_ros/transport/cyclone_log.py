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
What Cyclone DDS logged before a process failed: its own reason, found in the process's output.

Cyclone prints why it refused a configuration on a line of its own before Python's traceback,
whose last lines only say ``DDS_RETCODE_ERROR``; the supervisor and ``rog doctor`` show that line.
"""

import re

_CYCLONE_LINE = re.compile(r'^\s*\d+\.\d+ \[\d*\]\s+[^:\s][^:]*: (?P<msg>.*\S)')
"""A line Cyclone DDS logs to stderr: ``<seconds>.<micro> [<domain>] <thread>: <message>``."""
_TRACEBACK = 'Traceback (most recent call last):'
_CHAINED = ('During handling of the above exception, another exception occurred:',
            'The above exception was the direct cause of the following exception:')


def cyclone_said(text: str, whole: bool = False, window: int = 8) -> list:
    """
    Return the lines Cyclone DDS logged just before a process failed (its own reason).

    Cyclone prints why it refused a configuration (``wlan0: does not match an available
    interface.``, ``can't open configuration file ...``, ``config: ... unknown element``) on
    one line of its own, before the Python traceback, whose last lines only say
    ``DDS_RETCODE_ERROR``. Looks at the ``window`` lines before the last traceback (the first
    of a chain), or before the end of ``text`` when there is none (Cyclone aborted the
    process). Returns the messages, or the whole lines when ``whole``; [] when Cyclone said
    nothing there.
    """
    lines = text.splitlines()
    end = len(lines)
    starts = [i for i, line in enumerate(lines) if line.strip() == _TRACEBACK]
    if starts:
        end = starts[-1]
        while True:
            before = end - 1
            while before >= 0 and not lines[before].strip():
                before -= 1
            earlier = [i for i in starts if i < before]
            if before < 0 or lines[before].strip() not in _CHAINED or not earlier:
                break
            end = earlier[-1]
    out = []
    for line in lines[max(0, end - window):end]:
        match = _CYCLONE_LINE.match(line)
        if match:
            out.append(line.strip() if whole else match.group('msg'))
    return out
