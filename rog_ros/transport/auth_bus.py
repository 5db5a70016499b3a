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
AuthBus: a Bus wrapper that signs what a node publishes and verifies what it receives.

This is where messages enter and leave a node: every ``publish`` goes out signed with the
node's :class:`~rog_ros.protocol.auth.Signer` (per-node increasing ``auth_seq``), and every
received message (returned by ``poll`` or passed to a subscription callback) is checked by a
:class:`~rog_ros.protocol.auth.Verifier` first; unauthenticated, forged and replayed messages
are dropped, counted by reason and logged (reason and counts only, never the key), so no
engine or callback ever sees them. Works over any Bus (``DdsBus``, ``RclpyBus``).
"""

from __future__ import annotations

import logging
import re
import time

from rog_ros.protocol.auth import DEFAULT_WINDOW, sender_of, Signer, Verifier
from rog_ros.transport.bus import Bus

LOG = logging.getLogger('rog_ros.auth')
DROP_LINE = re.compile(r'dropped \S+ on \S+ claiming sender \S+: (\w+) \((\d+) \1 so far\)(; )?')
"""The form of this bus's warning for a dropped message (logged at the 1st, 2nd, 4th, ...
drop of a reason): groups the reason, its count so far, and ``'; '`` where a hint follows.
What reads the nodes' logs (``rog fleet``'s closing lines, ``rog chaos``'s verdicts) parses
them with it."""


class AuthBus(Bus):
    """
    Sign outgoing and verify incoming messages of ``inner`` with the fleet key ``key``.

    Parameters
    ----------
    inner : Bus
        The bus that moves the bytes; owned by this wrapper from now on (``close`` closes it).
    key : rog_ros.protocol.auth.FleetKey
        The fleet key, or a keyring of ``rog_ros.protocol.robot_keys`` (``robot_keys``).
    window : int, default 1024
        Replay window in sequence numbers.
    logger : logging.Logger, optional
        Where rejects are reported (``rog_ros.auth`` by default); a reason is reported on its
        1st, 2nd, 4th, 8th, ... occurrence, so a flood cannot flood the log.

    """

    def __init__(self, inner: Bus, key, window: int = DEFAULT_WINDOW, logger=None):
        # no Bus.__init__: namespace and rejects come from ``inner``
        if key is None:
            raise ValueError('AuthBus needs a fleet key')
        self.inner = inner
        self.namespace = inner.namespace
        self.signer = Signer(key, first_seq=max(1, int(time.time() * 1e6)))  # see Signer
        self.verifier = Verifier(key, window)
        self.log = logger or LOG

    # ------------------------------------------------------------------ counters
    @property
    def rejects(self) -> int:
        """Received messages dropped: undecodable (inner bus) plus failed authentication."""
        return self.inner.rejects + self.verifier.rejected

    def reject_counts(self) -> dict:
        """Return ``{reason: count}``: ``undecodable`` and the reasons of ``auth.REASONS``."""
        out = {'undecodable': self.inner.rejects}
        out.update(self.verifier.rejects)
        return out

    def _accept(self, topic: str, msg) -> bool:
        if _is_standard(msg):        # /diagnostics: standard ROS 2 telemetry, never acted on
            return True
        reason = self.verifier.check(msg)
        if reason is None:
            return True
        count = self.verifier.rejects[reason]
        if count & (count - 1) == 0:
            try:
                sender = sender_of(msg)
            except (TypeError, ValueError, AttributeError):
                sender = '?'
            self.log.warning('dropped %s on %s claiming sender %s: %s (%d %s so far)%s',
                             getattr(msg, 'TYPE', type(msg).__name__), topic, sender, reason,
                             count, reason, self._hint(reason, count, msg))
        return False

    def _hint(self, reason: str, count: int, msg) -> str:
        """
        Return what a ``bad_tag`` drop most likely means ('' otherwise), from the first on.

        One tag more per logged drop (the 1st, 2nd, 4th, ...); the first drop is the one a
        user reads first, and the closing lines of a run quote it.
        """
        if reason != 'bad_tag':
            return ''
        from rog_ros.protocol.robot_keys import bad_tag_hint
        return '; ' + bad_tag_hint(self.verifier.key, msg)

    # ------------------------------------------------------------------ Bus
    def publish(self, topic: str, msg) -> None:
        self.inner.publish(topic, msg if _is_standard(msg) else self.signer.sign(msg))

    def advertise(self, topic: str) -> None:
        self.inner.advertise(topic)

    def subscribe(self, topic: str, callback=None, qos=None) -> None:
        if callback is not None:
            inner_callback = callback

            def callback(msg, _topic=topic):
                if self._accept(_topic, msg):
                    inner_callback(msg)
        self.inner.subscribe(topic, callback, qos)

    def poll(self, timeout_s: float = 0.0) -> list:
        return [(t, msg) for t, msg in self.inner.poll(timeout_s) if self._accept(t, msg)]

    def matched(self, topic: str) -> int:
        return self.inner.matched(topic)

    def participants(self, topic: str, writer: bool):
        return self.inner.participants(topic, writer)

    def foreign_readers(self, topic: str) -> list:
        return self.inner.foreign_readers(topic)

    def foreign_writers(self, topic: str) -> list:
        return self.inner.foreign_writers(topic)

    def other_builds(self, topic: str, writer: bool) -> list:
        return self.inner.other_builds(topic, writer)

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return f'AuthBus({type(self.inner).__name__}, {self.verifier!r})'


def _is_standard(msg) -> bool:
    """Tell if ``msg`` is a standard ROS 2 message (``'pkg/Type'``): neither signed nor checked."""
    return '/' in getattr(msg, 'TYPE', '')


def signer_of(bus):
    """
    Return the Signer of the AuthBus that ``bus`` is or wraps (``inner``), or None.

    A worker saves its number with its state and its restored run goes on above it
    (:meth:`rog_ros.protocol.auth.Signer.continue_after`), whatever the wall clock says.
    """
    seen = 0
    while bus is not None and seen < 16:
        if isinstance(bus, AuthBus):
            return bus.signer
        bus, seen = getattr(bus, '__dict__', {}).get('inner'), seen + 1
    return None
