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
Exactly-once accounting under lost, duplicated and late messages (DESIGN section 4).

Worker side: everything computed == delivered + accumulated + error (rows in flight still sit
in the accumulator until the server's final ack). Server side, once the network is quiet:
every worker's model == the server's mirror of it (w_srv + G[r] + E[r]), and the server's
reference model holds exactly the pushes the workers saw acknowledged: no update was applied
twice or lost.
"""

import numpy as np
from protocol_fixtures import build, random_faults
import pytest
from rog_ros.protocol.messages import RowChunk, TransferAck
from rog_ros.sim.fault_sweep import conservation_problems
import torch


def check_invariants(harness, server, workers):
    problems = conservation_problems(harness, server, workers)
    assert not problems, problems


@pytest.mark.parametrize('spec', ['rog:2', 'rog:4', 'ssp:2', 'bsp', 'flown:2'])
@pytest.mark.parametrize('seed', [0, 1])
def test_conservation_with_faults_everywhere(spec, seed):
    harness, server, workers, _, _ = build(spec, n=3, iters=12, dtype=torch.float64,
                                           fault=random_faults(seed), seed=seed)
    stats = harness.run(until=300)
    assert server.finished                           # faults slow it down but never wedge it
    # a worker suspended for its link goes on from the fleet's clock (fewer computations)
    assert stats.iterations == [12, 12, 12] or server.outage_suspensions
    check_invariants(harness, server, workers)


@pytest.mark.parametrize('spec', ['rog:4', 'ssp:2'])
def test_conservation_with_the_per_tensor_codec(spec):
    # the artifact's one scale per tensor ('defsgdm-tensor'), kept as an ablation
    harness, server, workers, _, _ = build(spec, n=3, iters=12, dtype=torch.float64,
                                           fault=random_faults(0), seed=0, codec='sign')
    harness.run(until=300)
    assert server.finished
    check_invariants(harness, server, workers)


FRAGMENT_CASES = [('ssp:2', 'row', 16, False), ('ssp:2', 'identity', 256, False),
                  ('rog:2', 'row', 16, False), ('rog:2', 'identity', 256, False),
                  ('rog:4', 'row', 16, True), ('rog:4', 'identity', 256, True)]
# (SSP's one 43 kB lossless row in 170 fragments under 5% loss makes no progress after
# iteration 3, before these fixes as well: left open, see the issue note)


@pytest.mark.parametrize('spec, codec, chunk_bytes, faults', FRAGMENT_CASES)
def test_conservation_with_rows_split_into_fragments(spec, codec, chunk_bytes, faults):
    # Rows larger than a chunk travel as fragments. A row that ATP's deadline cut between
    # its fragments must leave the final ack (acked, the sender counted it delivered and its
    # mass was lost); and a lossless codec's bytes must not alias the server's scratch p
    # (they did: every later downlink rewrote the bytes of one still in flight).
    harness, server, workers, _, _ = build(spec, n=3, iters=12, dtype=torch.float64,
                                           codec=codec, chunk_bytes=chunk_bytes, seed=0,
                                           fault=random_faults(1) if faults else None)
    stats = harness.run(until=3000)    # (many small chunks: losses cost end timeouts)
    assert server.finished
    assert stats.iterations == [12, 12, 12] or server.outage_suspensions
    check_invariants(harness, server, workers)


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_conservation_with_ack_faults_only(seed):
    harness, server, workers, _, _ = build(
        'rog:3', n=4, iters=10, dtype=torch.float64, seed=seed,
        fault=random_faults(seed, p_drop=0.2, p_dup=0.2, p_late=0.2, only=TransferAck))
    harness.run(until=300)
    check_invariants(harness, server, workers)


def _partial_delivery_run(commit_patch=None):
    """
    Drop 30% of uplink data chunks; return the rows each partial push left behind.

    Checks, at every final ack, that the rows sent but not delivered keep their urgency
    (withheld > 0: they are still owed) and the delivered ones are reset, and at the end that
    every left-behind row was delivered by a later push of the same worker.
    """
    import random
    rng = random.Random(3)

    def fault(msg, src, dst, now):
        if isinstance(msg, RowChunk) and msg.payload and rng.random() < 0.3:
            return []
        return [0.0]
    harness, server, workers, _, _ = build('rog:4', n=3, iters=10, dtype=torch.float64,
                                           fault=fault)
    missed = []                   # (worker, rows sent but not delivered)
    later = [[] for _ in workers]  # per worker: delivered row sets, in order

    def watch(w, commit):
        def wrapped(delivered, tr):
            sent = tr.sent_rows()
            commit(delivered, tr)
            lost = np.setdiff1d(sent, delivered)
            assert bool((w.withheld[torch.from_numpy(lost)] > 0).all()), 'owed rows forgotten'
            if delivered.size:
                assert int(w.withheld[torch.from_numpy(delivered)].max()) == 0
            later[w.rank].append(delivered)
            if lost.size:
                missed.append((w.rank, len(later[w.rank]), lost))
        return wrapped
    for w in workers:
        commit = w._commit_push if commit_patch is None else commit_patch(w)
        w._commit_push = watch(w, commit)
    harness.run(until=300)
    assert missed, 'the fault hook lost no rows: the test would check nothing'
    resent = 0
    for rank, k, lost in missed:
        after = later[rank][k:]
        if after and np.isin(lost, np.concatenate(after)).all():
            resent += 1
    assert resent >= 1, 'no left-behind row was delivered later'
    check_invariants(harness, server, workers)
    return missed


def test_partial_delivery_keeps_undelivered_rows():
    missed = _partial_delivery_run()
    assert sum(lost.size for _, _, lost in missed) > 10


def test_partial_delivery_check_catches_forgotten_rows():
    # Planted bug: a worker that treats every row it *sent* as delivered (clears their
    # urgency and residual) loses the rows of lost chunks; the check must notice.
    def plant(w):
        real = w._commit_push

        def commit(delivered, tr):
            real(tr.sent_rows(), tr)
        return commit
    with pytest.raises(AssertionError):
        _partial_delivery_run(commit_patch=plant)


def test_invariant_is_not_vacuous():
    # Corrupt the accumulator: the residual must notice.
    harness, server, workers, _, _ = build('rog:4', n=2, iters=3, dtype=torch.float64)
    harness.run()
    workers[0].residual[5] += 1e-3
    assert workers[0].conservation_residual() > 1e-6


def test_server_invariants_are_not_vacuous():
    # A push applied twice, or a downlink committed without the worker applying it, must fail.
    harness, server, workers, _, _ = build('rog:4', n=2, iters=3, dtype=torch.float64)
    harness.run()
    harness.quiesce()
    check_invariants(harness, server, workers)
    server.w_srv[7] -= 1e-3
    with pytest.raises(AssertionError):
        check_invariants(harness, server, workers)
    server.w_srv[7] += 1e-3
    server.mirror[1, 3] -= 1e-3
    with pytest.raises(AssertionError):
        check_invariants(harness, server, workers)
