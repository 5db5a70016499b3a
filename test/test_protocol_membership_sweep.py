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
A random sweep of crashes with membership: absence timeouts, link outages, restarts.

The crash sweep of ``test_protocol_server_restart.random_crash_run`` runs without absence
timeouts and never kills the server once a worker was told to stop. This one does both, as a
fleet meets them: absence timeouts of 0.5-2 s (shorter than a waiting worker's poke interval,
so suspensions and readmissions come and go), 0-3 link outages of 0.5-6 s, worker crashes
that outlast the absence timeout, and server crashes at any time before the end, with the
server checkpointing before each stop order as the node's ``ServerHooks`` does. Every run
must finish with exactly-once uplinks and every worker holding the model the server holds
for it, except a worker the server still owes a rejoin snapshot: one that rejoined after the
fleet had finished is stopped without it (docs/faults.md). ``random_membership_run`` is the
sweep; CI replays runs it failed on, and a handful of others.
"""

import copy
import random

from protocol_fixtures import build, random_faults
import pytest
from rog_ros.protocol.actions import Send
from rog_ros.protocol.messages import Schedule, SERVER
from test_protocol_restart import schedule_worker_crashes
from test_protocol_server_restart import checkpoint_every, restart_server
import torch


def random_membership_run(spec, seed, final_model=False):
    """Build and run one sweep case; the harness, run to its end."""
    rng = random.Random(seed * 7919 + 13)
    n, iters = rng.choice([3, 4, 5]), rng.choice([10, 12, 16])
    p, absence = rng.choice([0.0, 0.05, 0.1]), rng.choice([0.5, 1.0, 2.0])
    faults = random_faults(seed, p_drop=p, p_dup=p, p_late=p) if p else None
    outages = []
    for _ in range(rng.choice([0, 1, 2, 3])):
        t0 = rng.uniform(0.1, 4.0)
        outages.append((rng.randrange(n), t0, t0 + rng.uniform(0.5, 6.0)))

    def fault(msg, src, dst, now):
        if any(w in (src, dst) and t0 <= now < t1 for w, t0, t1 in outages):
            return []
        return [0.0] if faults is None else faults(msg, src, dst, now)
    harness, _, _, _, _ = build(spec, n=n, iters=iters, dtype=torch.float64, seed=seed,
                                save_states=True, absence_timeout_s=absence,
                                bandwidths=(1e6, 0.5e6, 2e6, 0.3e6, 0.8e6),
                                compute=(0.05, 0.07, 0.11, 0.06, 0.09), fault=fault,
                                final_model=final_model)
    schedule_worker_crashes(harness, rng, rng.choice([2, 4, 8]), 4.0, (0.02, 4.0))
    if rng.random() < 0.6:
        checkpoint_every(harness, rng.choice([0.1, 0.25, 0.5]))
        _checkpoint_before_stop_orders(harness)
        for t in sorted(rng.uniform(0.1, 6.0) for _ in range(rng.choice([1, 2, 3]))):
            harness.at(t, lambda down=rng.uniform(0.02, 0.3): _crash_server(harness, down))
    harness.run(until=900)
    return harness


def _checkpoint_before_stop_orders(harness):
    handle = harness._handle

    def handle_and_checkpoint(node, actions):
        if node == SERVER and any(isinstance(a, Send) and isinstance(a.msg, Schedule)
                                  and a.msg.stop for a in actions):
            state = copy.deepcopy(harness.server.state_dict())
            harness.checkpoint = state
            harness.server.checkpoint_confirmed(state['state_id'])
        return handle(node, actions)
    harness._handle = handle_and_checkpoint


def _crash_server(harness, down):
    if SERVER in harness.dead or all(harness.stopped):
        return
    harness.kill(SERVER)
    harness.at(harness.now + down, lambda: restart_server(harness))


def check_membership_run(harness):
    """Finished, exactly-once, and each worker's model the server's view of it (if synced)."""
    server = harness.server
    assert server.finished, harness.stats.error
    harness.fault = None
    harness.quiesce()
    owed = {r for r in range(server.n) if server.unsynced[r] is not None}
    for r, w in enumerate(harness.workers):
        assert w.conservation_residual() < 1e-9
        assert r in owed or torch.allclose(w.w, server.worker_model(r), atol=1e-10, rtol=0), r
    applied = sum(w.delivered_total for w in harness.workers) * (server.lr / server.n)
    if server.discarded is not None:
        applied = applied - server.discarded
    assert torch.allclose(server.w_srv, -applied, atol=1e-10, rtol=0)
    assert not server.duplicate_ranks


@pytest.mark.parametrize('spec, seed', [
    ('flown:2', 53), ('flown:3', 1001), ('rog:2', 210), ('rog:4', 41), ('bsp', 4),
    ('ssp:2', 2), ('rog:4', 69)])
def test_runs_of_the_membership_sweep(spec, seed):
    # flown:2 53 served a pull twice (a readmission outside FLOWN's slots) until 2026-11-29;
    # the others are a sample of the four systems (the sweep's first 480 runs found that
    # defect 15 times, and a server restored from before a stop order that waited for ever);
    # rog:4 69 hung until 2026-12-02: a robot readmitted just before its last push stopped
    # with rows too old for the others' last pulls (``_counted`` leaves them out)
    check_membership_run(random_membership_run(spec, seed))
