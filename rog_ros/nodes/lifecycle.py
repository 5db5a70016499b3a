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
Lifecycle: the managed-node state machine of every rog_ros node, pure and unit-tested.

Robots train only while they have nothing better to do, so a node must be able to pause
training (the robot drives, plans, grasps) without leaving the fleet. The states mirror
ROS 2 managed nodes (``unconfigured -> inactive <-> active -> finalized``):

* ``configure``: load the workload, build the engine, create the bus (nothing is sent yet);
* ``activate``: train (compute and exchange rows);
* ``deactivate``: pause: keep answering the protocol (acks, transfers in flight finish) but
  start no new computation, so the fleet sees a slow worker, never a lost one;
* ``shutdown``: leave; from any state but ``finalized``.

The machine holds no I/O: nodes ask it what is allowed and record transitions; signals
(SIGUSR1 = deactivate, SIGUSR2 = activate, SIGINT/SIGTERM = shutdown) or a ROS 2 lifecycle
service request transitions.
"""

from __future__ import annotations

UNCONFIGURED = 'unconfigured'
INACTIVE = 'inactive'
ACTIVE = 'active'
FINALIZED = 'finalized'

STATES = (UNCONFIGURED, INACTIVE, ACTIVE, FINALIZED)

TRANSITIONS = {
    'configure': ((UNCONFIGURED,), INACTIVE),
    'activate': ((INACTIVE,), ACTIVE),
    'deactivate': ((ACTIVE,), INACTIVE),
    'cleanup': ((INACTIVE,), UNCONFIGURED),
    'shutdown': ((UNCONFIGURED, INACTIVE, ACTIVE), FINALIZED),
}
"""Transition name -> (states it may start from, state it ends in)."""


class LifecycleError(RuntimeError):
    """A transition was requested from a state that does not allow it."""


class Lifecycle:
    """
    The current lifecycle state and its allowed transitions.

    Parameters
    ----------
    on_change : callable, optional
        ``on_change(old, new, transition)`` after each successful transition (logging,
        publishing TrainStatus).

    """

    def __init__(self, on_change=None):
        self.state = UNCONFIGURED
        self.history = []            # (transition, old, new): for diagnostics and tests
        self._on_change = on_change

    def can(self, transition: str) -> bool:
        """Tell whether ``transition`` is allowed now."""
        sources, _ = _lookup(transition)
        return self.state in sources

    def trigger(self, transition: str) -> str:
        """Apply ``transition``; return the new state, raise LifecycleError if not allowed."""
        sources, target = _lookup(transition)
        if self.state not in sources:
            raise LifecycleError(f'cannot {transition} from state {self.state!r} '
                                 f'(allowed from {", ".join(sources)})')
        old, self.state = self.state, target
        self.history.append((transition, old, target))
        if self._on_change is not None:
            self._on_change(old, target, transition)
        return target

    def request(self, transition: str) -> bool:
        """Apply ``transition`` if allowed (signals may arrive in any state); tell if it did."""
        if not self.can(transition):
            return False
        self.trigger(transition)
        return True

    @property
    def training(self) -> bool:
        """Tell whether new computation may start (only in ``active``)."""
        return self.state == ACTIVE

    @property
    def finished(self) -> bool:
        """Tell whether the node has shut down."""
        return self.state == FINALIZED


def _lookup(transition: str):
    try:
        return TRANSITIONS[transition]
    except KeyError:
        raise ValueError(f'unknown transition {transition!r}; use one of '
                         f'{sorted(TRANSITIONS)}') from None
