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
Signals -> lifecycle transition requests, applied by the node's loop, never in the handler.

A handler may run between any two bytecodes, e.g. in the middle of a DDS publish; it therefore
only records the request, and the loop applies it at its next turn. SIGINT/SIGTERM request
``shutdown`` (a second one while shutting down raises KeyboardInterrupt: the user insists),
SIGUSR1 ``deactivate`` (pause training, e.g. while the robot drives), SIGUSR2 ``activate``.

A second shutdown signal insists only when it comes ``INSIST_AFTER_S`` or more after the
first. Signals that arrive together are one request: a supervisor killed with SIGKILL sends
its children the parent-death signal once per thread that ends (``children.die_with_parent``;
``rog fleet``'s progress display runs threads), and three SIGTERMs at once made every node
leave without writing its summary and model.
"""

from __future__ import annotations

import signal
import time

INSIST_AFTER_S = 1.0
"""A shutdown signal this long or longer after the first one insists (KeyboardInterrupt)."""

SIGNAL_TRANSITIONS = {
    signal.SIGINT: 'shutdown',
    signal.SIGTERM: 'shutdown',
    signal.SIGUSR1: 'deactivate',
    signal.SIGUSR2: 'activate',
}


class SignalRequests:
    """Collects transition requests from signals; ``take()`` hands them to the loop."""

    def __init__(self, clock=time.monotonic):
        self._pending = []
        self.shutdown_requested = False
        self._clock = clock
        self._shutdown_at = None     # when the first shutdown signal came

    def install(self) -> 'SignalRequests':
        """Install the handlers (main thread only); return self."""
        for signum in SIGNAL_TRANSITIONS:
            signal.signal(signum, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        transition = SIGNAL_TRANSITIONS[signum]
        if transition == 'shutdown':
            now = self._clock()
            if self._shutdown_at is not None:
                if now - self._shutdown_at >= INSIST_AFTER_S:
                    raise KeyboardInterrupt
                return                  # the same request, sent again at once
            self._shutdown_at = now
            self.shutdown_requested = True
        self._pending.append(transition)

    def request(self, transition: str) -> None:
        """Queue a transition from code (tests, ROS 2 lifecycle services)."""
        if transition == 'shutdown':
            self.shutdown_requested = True
        self._pending.append(transition)

    def take(self) -> list:
        """Return and clear the queued transitions, oldest first."""
        out, self._pending = self._pending, []
        return out
