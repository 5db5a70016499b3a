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
Start, watch and stop node processes: the ``rog fleet`` fleet, ``rog robot`` and ``rog chaos``.

Each node runs in its own session (signals reach it and whatever it starts), writes one log
file that a restart appends to, and dies with its parent (``rog_ros.children``). Stopping is
bounded whatever a node does: SIGINT, then SIGTERM, then SIGKILL, each after a grace period.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from rog_ros.children import dies_with_this_process

STOP_GRACE_S = 10.0      # SIGINT -> SIGTERM
TERM_GRACE_S = 5.0       # SIGTERM -> SIGKILL
KILL_WAIT_S = 5.0        # SIGKILL -> give up waiting (the kernel reaps it)
LOG_TAIL_LINES = 15


def repo_pythonpath() -> str:
    """Return ``$PYTHONPATH`` with this checkout first, so node processes import this code."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.pathsep.join(p for p in [root, os.environ.get('PYTHONPATH', '')] if p)


class Supervisor:
    """Start, watch and stop the node processes; keep their logs."""

    def __init__(self, specs, log_dir: str, env_for, prefix_for=lambda spec: [],
                 python: str = sys.executable):
        self.specs = {s.name: s for s in specs}
        self.log_dir = log_dir
        self.env_for, self.prefix_for, self.python = env_for, prefix_for, python
        self.procs = {}

    def start(self, resuming: str | None = None) -> None:
        """
        Start every node; each log starts afresh, or goes on when ``resuming`` says why.

        A run resumed from its state directory keeps the logs of the run it resumes (the
        crashed run's server log told what happened before the crash, and a fresh start
        overwrote it): they go on after a line with the time and ``resuming``.
        """
        os.makedirs(self.log_dir, exist_ok=True)
        for name in self.specs:
            if resuming:
                with open(self.log_path(name), 'ab') as log:
                    stamp = time.strftime('%Y-%m-%d %H:%M:%S')
                    log.write(f'\n--- {stamp}: started again, {resuming} ---\n'.encode())
            self._spawn(name, 'ab' if resuming else 'wb')

    def restart(self, name: str) -> None:
        """Start node ``name`` again (it exited); its log goes on in the same file."""
        self._spawn(name, 'ab')

    def _spawn(self, name: str, mode: str) -> None:
        spec = self.specs[name]
        with open(self.log_path(name), mode) as log:
            self.procs[name] = subprocess.Popen(
                self.prefix_for(spec) + spec.command(self.python), stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env_for(spec),
                start_new_session=True, preexec_fn=dies_with_this_process())

    def kill(self, name: str, sig=signal.SIGKILL) -> None:
        """Send ``sig`` to node ``name`` and what it started, and wait for it (a fault)."""
        try:
            os.killpg(self.procs[name].pid, sig)
        except ProcessLookupError:
            pass
        self.procs[name].wait(timeout=30)

    def log_path(self, name: str) -> str:
        return os.path.join(self.log_dir, f'{name}.log')

    def codes(self) -> dict:
        """Node name -> exit code (None while running)."""
        return {name: proc.poll() for name, proc in self.procs.items()}

    def stop(self, names=None, hurry=lambda: False) -> list:
        """
        SIGINT, wait, SIGTERM, wait, SIGKILL: every named (default: all) live process.

        Bounded: returns within STOP_GRACE_S + TERM_GRACE_S + KILL_WAIT_S whatever the nodes
        do; once ``hurry()`` is true (the user pressed Ctrl-C again) the grace periods are
        skipped. Returns ``[(signal name, nodes it was sent to)]``.
        """
        names = list(self.procs) if names is None else names
        sent = []
        for sig, grace in ((signal.SIGINT, STOP_GRACE_S), (signal.SIGTERM, TERM_GRACE_S),
                           (signal.SIGKILL, KILL_WAIT_S)):
            alive = [n for n in names if self.procs[n].poll() is None]
            if not alive:
                return sent
            for n in alive:
                try:
                    os.killpg(self.procs[n].pid, sig)   # the node and anything it started
                except (ProcessLookupError, PermissionError):
                    pass
            sent.append((sig.name, alive))
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(self.procs[n].poll() is None
                                                      for n in alive):
                if sig != signal.SIGKILL and hurry():
                    break
                time.sleep(0.05)
        return sent

    def tail(self, name: str, lines: int = LOG_TAIL_LINES) -> str:
        """
        Return the last ``lines`` lines of node ``name``'s log, after Cyclone's reason.

        Cyclone DDS says why it refused a configuration on a line of its own before the
        node's traceback (``wlan0: does not match an available interface.``); the traceback's
        last lines say only ``DDS_RETCODE_ERROR``. Such lines that the tail cut off come
        first, then ``...``.
        """
        from rog_ros.transport.cyclone_log import cyclone_said
        try:
            with open(self.log_path(name), errors='replace') as fh:
                text = fh.read()
        except OSError:
            return ''
        last = text.splitlines(keepends=True)[-lines:]
        shown = {line.strip() for line in last}
        said = [line for line in cyclone_said(text, whole=True) if line not in shown]
        return ''.join([f'{line}\n' for line in said] + (['...\n'] if said else []) + last)
