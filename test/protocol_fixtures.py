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
"""Helpers shared by the protocol tests: a fleet of engines on a small problem."""

from rog_ros.protocol.actions import StartCompute
from rog_ros.protocol.messages import SERVER
from rog_ros.sim import fault_fleet
import torch

build = fault_fleet.quadratic_fleet          # the tests' short names for the package's builders
random_faults = fault_fleet.random_faults
SHAPES = fault_fleet.SHAPES


def at_compute_start(harness, check):
    """
    Call ``check(rank, clock)`` as each worker asks for a computation (``StartCompute``).

    RSP admits a computation when it starts: a suspension, a readmission or a lower slack
    that arrives while it runs changes the rules for the next one, not for this one, because
    the model it computes on does not change meanwhile (rows that arrive wait for its end;
    asserted here when its gradient is taken). A check of the bounds at that later moment
    would see a column readmitted under the computation, stale by the time it was out, and
    call a legal computation illegal.
    """
    handle, inner = harness._handle, harness.grad_fn
    started = {}

    def watching(node, actions):
        for a in actions:
            if isinstance(a, StartCompute) and node != SERVER:
                check(node, a.clock)
                started[node] = (a.clock, harness.workers[node].w.clone())
        return handle(node, actions)

    def grad_fn(rank, w, clock):
        clock_at_start, w_at_start = started[rank]
        assert clock == clock_at_start and torch.equal(w, w_at_start), \
            f'worker {rank}: the model changed while it computed {clock}'
        return inner(rank, w, clock)
    harness._handle, harness.grad_fn = watching, grad_fn
