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
only records the request, and the loop applies it at its next turn. SIGINT/SIGTERM/SIGHUP
request ``shutdown`` (a second one while shutting down raises KeyboardInterrupt: the user
insists), SIGUSR1 ``deactivate`` (pause training, e.g. while the robot drives), SIGUSR2
``activate``. SIGHUP is what a node started from an SSH session gets when the session drops:
by default it ended the node on the spot, and its ``--record`` bag stayed empty. A hang-up
asks once and never insists (a dropped session sends several: the shell's, the kernel's). A
SIGHUP ignored when the node starts (``nohup``) stays ignored: the node outlives the session.

A second shutdown signal insists only when it comes ``INSIST_AFTER_S`` or more after the
first. Signals that arrive together are one request: a supervisor killed with SIGKILL sends
its children the parent-death signal once per thread that ends (``children.die_with_parent``;
``rog fleet``'s progress display runs threads), and three SIGTERMs at once made every node
leave without writing its summary and model.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

INSIST_AFTER_S = 1.0
"""A shutdown signal this long or longer after the first one insists (KeyboardInterrupt)."""

SIGNAL_TRANSITIONS = {
    signal.SIGINT: 'shutdown',
    signal.SIGTERM: 'shutdown',
    signal.SIGHUP: 'shutdown',     # the terminal (an SSH session) went away
    signal.SIGUSR1: 'deactivate',
    signal.SIGUSR2: 'activate',
}


def nohup(signum) -> bool:
    """Tell whether ``signum`` is SIGHUP and ignored (``nohup``): the process keeps running."""
    return signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN


def quiet_if_hung_up(streams=None) -> list:
    """
    Point stdout/stderr at /dev/null where their terminal hung up; return the fds moved.

    After SIGHUP from a dropped SSH session every write to the terminal fails (EIO): a
    ``print`` on the way out raised, and the cleanup after it (closing the bag, deleting the
    network namespaces) never ran. A hung-up terminal (or a pipe whose reader left) polls as
    POLLHUP/POLLERR; a live terminal, a file or a pipe is left alone, so ``kill -HUP`` from a
    shell still shows the closing lines.
    """
    moved = []
    for stream in (sys.stdout, sys.stderr) if streams is None else streams:
        try:
            fd = stream.fileno()
            poller = select.poll()
            poller.register(fd, select.POLLOUT)
            events = sum(ev for _, ev in poller.poll(0))
            if not events & (select.POLLHUP | select.POLLERR):
                continue
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, fd)
            finally:
                os.close(devnull)
            moved.append(fd)
        except (AttributeError, OSError, ValueError):   # no real file (a test's capture)
            continue
    return moved


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
            if not nohup(signum):
                signal.signal(signum, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        """Record the transition ``signum`` asks for (the loop applies it)."""
        if signum == signal.SIGHUP:
            quiet_if_hung_up()
            if self._shutdown_at is not None:
                return                  # a hang-up asks once; it never insists
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
