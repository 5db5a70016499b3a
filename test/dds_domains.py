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
DDS domain ids for the tests of one process, none handed out to two keys.

Why: a bus that configures its domain (``config=``) keeps it for the life of the process
(``dds_bus._DOMAINS``) and refuses it later under another configuration (ROS 2 variables a
test sets are part of it), and Cyclone refuses to configure a domain a live participant
created from ``$CYCLONEDDS_URI``. pytest-xdist runs many modules in one worker process, and
modules that each drew numbers from the process id alone collided (a fresh-clone CI failed
'domain 138 already configured differently in this process' when two modules' formulas met).
Every key now gets its own domain, distinct from every other key's in the process and from
any a bus of the process configured otherwise. Concurrent test processes of the host (the
other xdist workers, a second checkout's suite) each hold a lock on the domains they were
given, for their life, so none hands out a domain another one holds: a fixed participant
index's port another process held failed a test of the server node's index so.
"""

import fcntl
import os
import sys
import tempfile

LOW = 10
"""Lowest domain handed out."""

SPAN = 200
"""Domains handed out: ``LOW`` .. ``LOW + SPAN - 1`` (210..231 stay the discovery-range
module's children, and a domain's ports must stay below 65536)."""

LOCKS = os.path.join(tempfile.gettempdir(), 'rog_ros_test_domains')
"""Folder of one lock file per domain; a process holds the locks of its domains until exit."""

_GIVEN = {}
_HELD = []


def domain(key: str) -> int:
    """
    Return the domain of ``key`` in this process: the same for the same key, another for each.

    ``key`` names the user, such as ``'test_wire_qos_mismatch:3'``.
    """
    if key in _GIVEN:
        return _GIVEN[key]
    taken = set(_GIVEN.values()) | _configured()
    start = os.getpid() * 37 % SPAN
    for step in range(SPAN):
        candidate = LOW + (start + step) % SPAN
        if candidate not in taken and _lock(candidate):
            _GIVEN[key] = candidate
            return candidate
    raise RuntimeError(f'no DDS domain left in {LOW}..{LOW + SPAN - 1} for this test process')


def _lock(candidate: int) -> bool:
    """
    Take ``candidate``'s lock for this process's life; False when another process holds it.

    A folder that cannot be used takes no lock and refuses no domain (as before the locks).
    """
    try:
        os.makedirs(LOCKS, exist_ok=True)
        fd = os.open(os.path.join(LOCKS, f'{candidate}.lock'), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _HELD.append(fd)
    return True


def _configured() -> set:
    """Return the domains a bus of this process configured (none before the bus is loaded)."""
    loaded = sys.modules.get('rog_ros.transport.dds_bus')
    return set(getattr(loaded, '_DOMAINS', {}))
