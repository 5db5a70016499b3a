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
RejectNotes: say in a node's log why its engine dropped a message, once per kind.

The engines turn bad input into a ``reject`` Log and a count, and the nodes reported only the
counts when they stopped (``dropped messages {'invalid': 1}``): nothing a robot's operator
could act on. The first reject of each kind (its error text with the numbers that differ
between copies taken out) is now a warning naming the sender; at most ``limit`` kinds, then one
line saying that more were dropped, so a hostile flood cannot fill the log.
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r'\d+(\.\d+)?')


class RejectNotes:
    """Log the first ``reject`` of each kind (``.warning`` only: rclpy's logger has no more)."""

    def __init__(self, limit: int = 8, sender: str | None = None):
        self.limit = int(limit)
        self.sender = sender     # a worker hears the server only: its Logs carry its own rank
        self.kinds: set = set()
        self.capped = False

    def on_log(self, log, logger) -> None:
        """
        Take an engine Log; say a reject of a kind not said yet on ``logger``.

        The logger is passed each time: under ROS 2 the node's becomes rclpy's after start.
        """
        if log.name != 'reject':
            return
        info = log.info if isinstance(log.info, dict) else {}
        error = str(info.get('error', '')) or 'no reason given'
        kind = _NUMBER.sub('#', error)[:160]
        if kind in self.kinds:
            return
        if len(self.kinds) >= self.limit:
            if not self.capped:
                self.capped = True
                logger.warning(f'more kinds of message dropped than the {self.limit} '
                               'named above; their counts are in the last log line')
            return
        self.kinds.add(kind)
        who = self.sender or ('the server' if log.worker < 0 else f'robot {log.worker}')
        logger.warning(f'dropped a message (from {who}, first of its kind): {error}')
