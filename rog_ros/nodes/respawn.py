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
Restarting a robot's training node after a crash: which exits count, how often, with what.

A node killed by the kernel (out of memory), by a fault, or ended by an exception is started
again (``robot.launch.py respawn:=N``, ``rog robot --respawn N``) and restores its
``state_dir``: the server its checkpoint (and the run's record), a worker its state, so
exactly-once holds across the crash (docs/faults.md). Without a ``state_dir`` a restarted
server would start the run over from the starting model and a restarted worker would lose
what it had not yet pushed, so respawning needs one. A node that finished (exit 0), was
stopped by its user (SIGINT, SIGTERM), was given bad settings (exit 2) or whose training
diverged (exit 3) is not restarted: starting it again cannot help. launch_ros's own
``respawn=True`` restarts on every exit, a finished server included, and Humble has no limit
on it; hence this module.
"""

from __future__ import annotations

import signal

RESPAWN_DELAY_S = 2.0
"""Seconds between a crash and the restart (the dead process's DDS endpoints time out)."""
MAX_RESPAWNS = 100
USAGE_ERROR = 2
"""A node's exit status for unusable settings or state (argparse's, and ``run_node``'s)."""
ENGINE_FAILED = 3
"""A node's exit status when its engine cannot go on (a worker whose training diverged:
restarted from its state, it would diverge again)."""
INCOMPATIBLE_FLEET = 4
"""The server's exit status when every robot it waits for runs an incompatible rog_ros (its
downlink readers are of another message build), and a robot's when its server does (it reads
the uplink and writes the robot's downlink with another build's types): no robot can train,
and starting again cannot help until they are upgraded."""
_STOPPED = {0, USAGE_ERROR, ENGINE_FAILED, INCOMPATIBLE_FLEET, 128 + signal.SIGINT,
            128 + signal.SIGTERM, 128 + signal.SIGHUP, -signal.SIGINT, -signal.SIGTERM,
            -signal.SIGHUP}
"""Exit statuses of a node that was stopped (a hang-up too: its session ended) or cannot go
on, rather than one that crashed."""


def parse_respawn(value) -> int:
    """Return the restart limit of ``respawn`` (a launch argument string, a flag or None)."""
    text = '' if value is None else str(value).strip()
    if text in ('', 'false', 'False'):
        return 0
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f'respawn must be the number of restarts allowed (0: never), '
                         f'got {value!r}') from None
    if not 0 <= n <= MAX_RESPAWNS:
        raise ValueError(f'respawn must be in 0..{MAX_RESPAWNS}, got {n}')
    return n


def check_respawn(limit: int, specs) -> None:
    """Raise ValueError (one line) if a training node of ``specs`` would respawn statelessly."""
    if not limit:
        return
    for spec in specs:
        if spec.role in ('server', 'worker') and not spec.parameters.get('state_dir'):
            raise ValueError(
                f'respawn needs state_dir (--state-dir): restarted without it, {spec.name} '
                'would ' + ('start the run over from the starting model' if spec.role ==
                            'server' else 'lose the gradients it had not yet pushed'))


def crashed(returncode) -> bool:
    """Tell whether a node's exit status is a crash worth a restart."""
    return returncode is not None and int(returncode) not in _STOPPED


def describe_exit(returncode) -> str:
    """Say how a node ended: ``'was killed by SIGKILL'``, ``'exited with status 1'``."""
    code = int(returncode)
    if code < 0 or code > 128:
        num = -code if code < 0 else code - 128
        try:
            return f'was killed by {signal.Signals(num).name}'
        except ValueError:
            pass
    return f'exited with status {code}'
