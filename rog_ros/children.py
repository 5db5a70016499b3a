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
Child processes die with the process that started them.

``rog fleet`` starts the node processes, and ``rog compare`` and the reproduction runners start
pools that each run a simulation for minutes. Ctrl-C reaches the whole process group, but a
parent stopped with SIGTERM or SIGKILL (``kill``, a CI timeout, a job scheduler) left them
running as orphans, each holding a core (and a fleet's nodes their DDS traffic) for the rest of
its run. ``die_with_parent`` is the pools' initializer and the fleet's ``preexec_fn``: on
Linux the kernel sends the process SIGTERM when its parent exits (``PR_SET_PDEATHSIG``);
elsewhere it does nothing. A leaf module: the nodes and the experiments both use it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_GET_PDEATHSIG = 2


def die_with_parent() -> None:
    """Ask the kernel for SIGTERM when this process's parent exits (Linux; a no-op elsewhere)."""
    if not sys.platform.startswith('linux'):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return                       # no prctl here: orphans stay possible, nothing breaks
    if os.getppid() == 1:            # the parent died before we asked: go now
        os._exit(1)


def death_signal() -> int:
    """Return the signal this process gets when its parent exits (0: none, or not Linux)."""
    if not sys.platform.startswith('linux'):
        return 0
    sig = ctypes.c_int(0)
    ctypes.CDLL(None, use_errno=True).prctl(PR_GET_PDEATHSIG, ctypes.byref(sig), 0, 0, 0)
    return int(sig.value)
