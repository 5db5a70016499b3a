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
A robot that started from other weights gets the server's model at its next pull (``resync``).

Without it, such a robot adds every update to its own copy and trains apart for the whole
run: its model never equals the server's view of it. The checks are the conservation suite's:
every worker's model equals the server's mirror of it, and every push was applied once.
"""

from protocol_fixtures import build, random_faults
import pytest
from rog_ros.protocol.actions import Log
from test_protocol_conservation import check_invariants
import torch


def _start_apart(workers, rank, seed=5):
    """Move one worker's starting weights (another init_model file, say)."""
    g = torch.Generator().manual_seed(seed)
    w = workers[rank].w
    w += 0.01 * torch.randn(w.shape, generator=g, dtype=w.dtype)


@pytest.mark.parametrize('spec', ['rog:4', 'ssp:2', 'bsp', 'flown:2'])
def test_a_worker_started_apart_holds_the_servers_model_after_a_resync(spec):
    harness, server, workers, _, _ = build(spec, n=3, iters=10, dtype=torch.float64)
    _start_apart(workers, 1)
    out = server.resync(1, {'fingerprint': 'aaaa', 'server': 'bbbb'})
    assert [(a.name, a.worker, a.info['resync']) for a in out if isinstance(a, Log)] == \
        [('start_mismatch', 1, 'next pull')]
    harness.run(until=300)
    assert server.finished
    check_invariants(harness, server, workers)


@pytest.mark.parametrize('spec', ['rog:4', 'flown:2'])
def test_a_resync_during_the_run_waits_for_the_next_pull_and_survives_faults(spec):
    harness, server, workers, _, _ = build(spec, n=3, iters=12, dtype=torch.float64,
                                           fault=random_faults(3), seed=3)
    _start_apart(workers, 2)
    harness.run(until=0.4)                      # pulls and pushes are under way
    assert not server.finished
    server.resync(2)
    harness.run(until=300)
    assert server.finished
    check_invariants(harness, server, workers)


def test_without_a_resync_the_worker_trains_apart():
    """The check above can fail: a worker started apart never meets the server's view."""
    harness, server, workers, _, _ = build('rog:4', n=3, iters=10, dtype=torch.float64)
    _start_apart(workers, 1)
    harness.run(until=300)
    assert server.finished
    harness.fault = None
    harness.quiesce()
    gap = float((workers[1].w - server.worker_model(1)).abs().max())
    assert gap > 1e-3
    assert float((workers[0].w - server.worker_model(0)).abs().max()) < 1e-10


def test_a_resync_of_a_stopped_or_unknown_worker():
    harness, server, workers, _, _ = build('rog:4', n=2, iters=3, dtype=torch.float64)
    harness.run(until=300)
    assert server.finished
    out = server.resync(0)
    assert out[0].info['resync'] == 'stopped' and not server._resync_owed
    with pytest.raises(ValueError, match='no worker 2'):
        server.resync(2)
