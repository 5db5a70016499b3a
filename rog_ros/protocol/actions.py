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
"""Actions: what a sans-I/O engine asks its driver (simulator or node) to do."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Send:
    """Put ``msg`` on the wire to ``dest`` (a worker rank or messages.SERVER)."""

    dest: int
    msg: Any


@dataclass(frozen=True)
class StartCompute:
    """
    Worker: run the next forward/backward pass (after idling ``sleep_s``).

    Then call ``engine.on_compute_done(grads, now)``. ``clock`` is the iteration about to be
    computed. ``overlapped``: the engine goes on receiving while this runs and may change its
    model meanwhile; the gradient is wanted on the model as it is when the computation starts
    (a driver that computes it later, like the simulator at the end of the virtual compute
    time, takes it now; one that blocks while it computes needs nothing).
    """

    clock: int
    sleep_s: float = 0.0
    overlapped: bool = False


@dataclass(frozen=True)
class Log:
    """A metric or event for telemetry: ``name`` with ``value`` for ``worker`` (-1: server)."""

    name: str
    value: float = 0.0
    worker: int = -1
    info: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Stopped:
    """
    The engine has finished (server: training over; worker: told to stop).

    ``failed``: it cannot go on (a worker whose training diverged); a node exits with an
    error instead of as a finished run.
    """

    reason: str = ''
    failed: bool = False


@dataclass(frozen=True)
class SaveState:
    """
    Worker: persist ``engine.state_dict()`` now, before performing any Send of this list.

    Emitted (when the engine was built with ``save_state_actions=True``) before the END of
    every push, when a server restart, a resend or a confirmed checkpoint changed what the
    worker keeps, once after a restarted worker recovered its push, and once when the final
    model arrives; a worker restarted from the newest saved state then loses nothing and
    doubles nothing (DESIGN section 10): it re-sends the saved push's END and commits what
    the server's answer lists, and its rejoin's snapshot replaces the model. Write it
    atomically (temp file, fsync, rename).
    """

    reason: str = ''
