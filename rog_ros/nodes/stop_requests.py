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
StopRequests: Ctrl-C, SIGTERM and SIGHUP as a counter that a supervising loop reads.

``rog fleet`` watches node processes over a DDS bus of its own; an exception raised by a
signal could unwind through the DDS binding mid-call, a counter cannot. SIGHUP (the SSH
session of the command dropped) is a stop request as SIGTERM is: by default it ended the
command on the spot, with its ``--record`` bag empty and its ``--netns`` namespaces left behind
(under ``nohup`` SIGHUP stays ignored).
"""

from __future__ import annotations

import signal
import time

from rog_ros.nodes.signals import nohup, quiet_if_hung_up


class StopRequests:
    """
    SIGINT/SIGTERM/SIGHUP handlers of ``rog fleet``: count the requests, raise nothing.

    A KeyboardInterrupt could unwind through the DDS binding in the middle of a call and leave
    it unable to close; a counter the watch loop reads cannot. A second request cuts the grace
    periods short (the user insists).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.count = 0
        self.first_at = None      # monotonic time of the first request
        self.first_signal = None  # the signal of the first request (its exit status)
        self._old = {}

    def _handle(self, signum, frame) -> None:
        """Count one stop request (a hung-up terminal is first pointed at /dev/null)."""
        if signum == signal.SIGHUP:
            quiet_if_hung_up()
            if self.count:
                return          # a hang-up asks once; it never insists (cuts no grace short)
        self.count += 1
        if self.first_at is None:
            self.first_at = time.monotonic()
            self.first_signal = signum

    def exit_status(self) -> int:
        """
        Return the exit status of a stopped command: 128 + the signal number, as a shell's.

        130 for Ctrl-C (SIGINT), 143 for SIGTERM (``kill``, a job scheduler, docker stop),
        129 for SIGHUP (the terminal or SSH session went away): a script or a service
        manager tells from it why the command ended.
        """
        return 128 + int(self.first_signal or signal.SIGINT)

    def install(self) -> 'StopRequests':
        for sig in self.SIGNALS:
            if nohup(sig):            # started with nohup: outlive the session, as asked
                continue
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:        # not the main thread: keep the defaults
                pass
        return self

    def restore(self) -> None:
        """
        Put the previous handlers back; SIGHUP's stays counting once a stop was requested.

        A dropped session sends more than one SIGHUP (the shell to its jobs, the kernel to
        the foreground group when the shell has gone): a later one must neither kill the
        cleanup that follows the stop (closing the bag, deleting the network namespaces) nor
        cut the nodes' grace periods short.
        """
        for sig, old in self._old.items():
            if not (sig == signal.SIGHUP and self.count):
                signal.signal(sig, old)
        self._old = {}
