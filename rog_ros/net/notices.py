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
Warnings and notes about trace records, each said once per process on stderr.

Every reader of a record (iperf reports, tables, bags, drive logs) and the gap check say what
they noticed through these two functions, so a file read twice in one process (checked, then
replayed) is warned about once.
"""

import sys

_warned = set()


def warn(message: str) -> None:
    """Print ``warning: message`` on stderr, once per message in this process."""
    if message not in _warned:
        _warned.add(message)
        print(f'warning: {message}', file=sys.stderr)


def note(message: str) -> None:
    """Print ``note: message`` on stderr, once per message in this process ('' prints none)."""
    if message and message not in _warned:
        _warned.add(message)
        print(f'note: {message}', file=sys.stderr)
