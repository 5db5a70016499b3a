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
StopRequests: Ctrl-C and SIGTERM as a counter that a supervising loop reads.

``rog fleet`` watches node processes over a DDS bus of its own; an exception raised by a
signal could unwind through the DDS binding mid-call, a counter cannot.
"""

from __future__ import annotations

import signal
import time


class StopRequests:
    """
    SIGINT/SIGTERM handlers of ``rog fleet``: count the requests, raise nothing.

    A KeyboardInterrupt could unwind through the DDS binding in the middle of a call and leave
    it unable to close; a counter the watch loop reads cannot. A second request cuts the grace
    periods short (the user insists).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.count = 0
        self.first_at = None      # monotonic time of the first request
        self.first_signal = None  # the signal of the first request (its exit status)
        self._old = {}

    def _handle(self, signum, frame) -> None:
        self.count += 1
        if self.first_at is None:
            self.first_at = time.monotonic()
            self.first_signal = signum

    def exit_status(self) -> int:
        """
        Return the exit status of a stopped command: 128 + the signal number, as a shell's.

        130 for Ctrl-C (SIGINT), 143 for SIGTERM (``kill``, a job scheduler, docker stop):
        a script or a service manager tells from it why the command ended.
        """
        return 128 + int(self.first_signal or signal.SIGINT)

    def install(self) -> 'StopRequests':
        for sig in self.SIGNALS:
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:        # not the main thread: keep the defaults
                pass
        return self

    def restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}
