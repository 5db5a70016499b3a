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
Connect: open a node's bus and wait until its peers' endpoints are matched.

RELIABLE + VOLATILE topics deliver only to readers that are matched when the sample is
written, so a worker must not push before the server's reader has been discovered (and the
server's downlink writer must be matched before it can answer). Waiting for the match, with a
timeout and a diagnostic naming the topics still unmatched, replaces guessed start-up sleeps.
"""

from __future__ import annotations

import time

from rog_ros.transport.bus import make_bus


class PeerTimeout(RuntimeError):
    """The peers did not appear in time."""


def open_bus(kind: str, namespace: str):
    """Open the node's bus (``auto``: rclpy when ROS 2 is sourced, else the embedded DDS)."""
    return make_bus(kind, namespace=namespace)


def wait_matched(bus, topics, timeout_s: float, keep_waiting=lambda: True,
                 poll_s: float = 0.02) -> float:
    """
    Wait until every topic in ``topics`` has at least one matched remote endpoint.

    Returns the seconds waited; raises :class:`PeerTimeout` naming the unmatched topics, or
    returns early (``-1``) when ``keep_waiting()`` turns false (shutdown requested).
    """
    start = time.monotonic()
    while True:
        missing = [t for t in topics if bus.matched(t) == 0]
        if not missing:
            return time.monotonic() - start
        if not keep_waiting():
            return -1.0
        if time.monotonic() - start > timeout_s:
            raise PeerTimeout(f'no peer on {", ".join(missing)} after {timeout_s:.0f} s: is the '
                              f'other side running with the same namespace ({bus.namespace}) '
                              f'and ROS_DOMAIN_ID, and can DDS discovery reach it?')
        time.sleep(poll_s)
