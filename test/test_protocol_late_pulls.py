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
Rows sent to a worker while it computes (``SyncPolicy.late_pulls``).

A late pull must keep every invariant of a pull (the server's mirror of each worker equals
the worker's model, exactly-once, also across faults and restarts), must not count as a
pull (no Schedule, no pace or compute sample), must never change the model a computation
reads, and must leave the next pull less to carry.
"""

import random

from protocol_fixtures import build, random_faults
import pytest
from rog_ros.protocol.actions import StartCompute
from rog_ros.protocol.messages import FLAG_LATE, FLAG_SNAPSHOT, KIND_UPDATE, RowChunk, \
    RowVersions, SERVER, TransferAck
from rog_ros.protocol.policies import make_policy
from test_protocol_conservation import check_invariants
from test_protocol_late_rows import fluctuating_links, kill_on_sight, SLOW
import torch


def watch_late_pulls(harness):
    """Record (worker, worker state) for every late-pull chunk the server puts on a link."""
    seen = []
    send = harness._send

    def sending(src, dst, msg):
        if isinstance(msg, RowChunk) and msg.kind == KIND_UPDATE and msg.flags & FLAG_LATE:
            seen.append((dst, harness.workers[dst].state))
        send(src, dst, msg)
    harness._send = sending
    return seen


def guard_the_computed_model(harness):
    """Fail if a worker's model changes between StartCompute and the gradient's computation."""
    at_start, changed = {}, []
    handle, grad_fn = harness._handle, harness.grad_fn

    def handling(node, actions):
        for a in actions:
            if isinstance(a, StartCompute) and node != SERVER:
                at_start[node] = harness.workers[node].w.clone()
        handle(node, actions)

    def computing(node, w, clock):
        if node in at_start and not torch.equal(at_start.pop(node), w):
            changed.append((node, clock))
        return grad_fn(node, w, clock)
    harness._handle, harness.grad_fn = handling, computing
    return changed


@pytest.mark.parametrize('spec', ['rog:2', 'rog:4'])
@pytest.mark.parametrize('seed', [0, 1])
def test_late_pulls_keep_the_mirrors_exact_under_faults(spec, seed):
    pol = make_policy(spec + '#late_pulls=1')
    harness, server, workers, _, _ = build(spec, n=3, iters=12, dtype=torch.float64,
                                           fault=random_faults(seed), seed=seed, policy=pol,
                                           **SLOW)
    seen = watch_late_pulls(harness)
    changed = guard_the_computed_model(harness)
    stats = harness.run(until=600)
    assert server.finished and stats.error is None
    assert seen and server.late_pulls > 0, 'no late pull was sent'
    assert not changed, f'a model changed under a computation: {changed[:5]}'
    check_invariants(harness, server, workers)


def test_late_pulls_are_not_pulls_and_never_change_a_computed_model():
    pol = make_policy('rog:4#late_pulls=1')
    harness, server, workers, _, _ = build('rog:4', n=3, iters=10, dtype=torch.float64,
                                           policy=pol, **SLOW)
    harness.log_events = True
    seen = watch_late_pulls(harness)
    changed = guard_the_computed_model(harness)
    stats = harness.run(until=600)
    assert server.finished and stats.error is None and not changed
    logs = [(node, a) for _, node, a in harness.stats.logs]
    late = [a for node, a in logs if a.name == 'late_pull_applied']
    assert len(late) == server.late_pulls > 0
    # some arrived while the worker computed (applied at its end), none outside a worker's
    # computation or its push (the server starts one only after a pull, cuts it at a push)
    assert any(a.info['deferred'] for a in late)
    assert {state for _, state in seen} <= {'computing', 'pushing'}
    for r in range(3):
        pulls = [a for node, a in logs if node == r and a.name == 'pull_applied']
        assert len(pulls) == stats.iterations[r] - 1, (r, len(pulls), stats.iterations[r])
        done = [a for node, a in logs if a.worker == r and a.name == 'pull_done'
                and node == SERVER and not a.info.get('late')]
        assert len(done) == len(pulls)
    check_invariants(harness, server, workers)


# (server restarts with late pulls: test_protocol_late_rows, Rog's default has both)


@pytest.mark.parametrize('seed', range(3))
def test_worker_killed_with_a_late_pull_in_flight(seed):
    # The worker dies while rows of a late pull are on their way (or held for its
    # computation) and comes back from its saved state: it rejoins exactly.
    pol = make_policy('rog:2#late_pulls=1')
    harness, server, _, _, _ = build('rog:2', n=3, iters=10, dtype=torch.float64, seed=seed,
                                     policy=pol, save_states=True, **SLOW)

    def victim(src, dst, msg):
        late_pull = (isinstance(msg, RowChunk) and msg.kind == KIND_UPDATE
                     and msg.flags & FLAG_LATE)
        return dst if late_pull else None
    kills = kill_on_sight(harness, random.Random(seed), victim, (0.0, 0.02, 0.2))
    harness.run(until=3000)
    server = harness.server
    assert len(kills) == 3 and server.finished
    assert sum(len(x) for x in server.retired) == 3
    check_invariants(harness, server, harness.workers)


def test_a_saved_state_counts_the_late_pulls_held_for_the_computation():
    pol = make_policy('rog:4#late_pulls=1')
    _, _, workers, _, _ = build('rog:4', n=2, policy=pol, dtype=torch.float64)
    w = workers[0]
    w._late_q = torch.full_like(w.w, 0.25)
    w._late_q_pending = True
    saved = w.state_dict()
    assert torch.equal(saved['w'], w.w - 0.25)       # the model it will hold, as vloc says
    w._apply_late_pulls()
    assert torch.equal(w.w, saved['w']) and not w._late_q_pending
    assert float(w._late_q.abs().sum()) == 0.0


def test_a_late_pull_waits_for_the_late_push_and_yields_to_the_pull():
    # One transfer at a time on a half-duplex station: a late pull starts when the worker
    # has no late push to send or when it has ended, and a push that arrives (the
    # computation is over) winds it up, so every regular pull starts without waiting for it.
    pol = make_policy('rog:4#late_pulls=1')
    harness, server, workers, _, _ = build('rog:4', n=4, iters=30, dtype=torch.float64,
                                           policy=pol, compute=(0.6, 0.6, 0.6, 0.6))
    fluctuating_links(harness, 4, 0)
    overlaps, late_chunks = [], []
    send = harness._send

    def sending(src, dst, msg):
        if (src == SERVER and isinstance(msg, RowChunk) and msg.kind == KIND_UPDATE
                and msg.flags & FLAG_LATE and msg.seq == 0):
            late_chunks.append(dst)
            rx = harness.server.receiver.open
            if any(k[0] == dst and inc.flags & FLAG_LATE for k, inc in rx.items()):
                overlaps.append((harness.now, dst))
        send(src, dst, msg)
    harness._send = sending
    # computations get shorter now and then: pushes arrive before a late pull's deadline
    for k in range(1, 12):
        harness.at(2.0 * k, lambda k=k: harness.compute_s.__setitem__(
            slice(None), [0.15 if k % 2 else 0.6] * 4))
    cut, not_cut = [], []
    apply_push = server._apply_push

    def applying(inc, now):
        out = apply_push(inc, now)
        dl = server.downlinks[inc.sender]
        if dl is not None and dl.transfer.flags & FLAG_LATE and not inc.flags & FLAG_LATE:
            # an iteration's push: no more optional chunks, END once those out are acked
            (cut if dl.transfer.deadline <= now else not_cut).append(now)
        return out
    server._apply_push = applying
    stats = harness.run(until=5000)
    assert server.finished and stats.error is None
    assert len(late_chunks) > 20 and server.late_pulls > 20
    assert not overlaps, overlaps[:5]
    assert cut and not not_cut, (len(cut), not_cut[:5])
    check_invariants(harness, server, workers)


def test_late_pulls_are_never_sent_by_whole_model_systems_or_flown():
    assert make_policy('rog:4').late_pulls is (make_policy('rog:4').late_pulls is True)
    for spec in ('ssp:2', 'bsp', 'flown:2'):
        pol = make_policy(spec + '#late_pulls=1')
        harness, server, _, _, _ = build(spec, n=3, iters=6, dtype=torch.float64,
                                         policy=pol, **SLOW)
        seen = watch_late_pulls(harness)
        harness.run(until=600)
        assert server.finished and not seen and server.late_pulls == 0, spec


def test_a_computing_worker_takes_late_pull_rows_and_acks_only():
    _, _, workers, _, _ = build('rog:4', n=2, policy=make_policy('rog:4#late_pulls=1'))
    w = workers[0]
    late = RowChunk(transfer_id=3, seq=0, sender=SERVER, receiver=0, kind=KIND_UPDATE,
                    clock=1, flags=FLAG_LATE, codec=1)
    plain = RowChunk(transfer_id=3, seq=0, sender=SERVER, receiver=0, kind=KIND_UPDATE,
                     clock=1, flags=0, codec=1)
    assert w.receives_while_computing(late)
    assert w.receives_while_computing(TransferAck(transfer_id=1, seq=0, sender=SERVER,
                                                  receiver=0))
    assert w.receives_while_computing(RowVersions(receiver=0, n_workers=2, transfer_id=3))
    assert not w.receives_while_computing(plain)
    # a snapshot replaces model rows as it closes: never under a computation, late or not
    forged = RowChunk(transfer_id=3, seq=0, sender=SERVER, receiver=0, kind=KIND_UPDATE,
                      clock=1, flags=FLAG_LATE | FLAG_SNAPSHOT, codec=1)
    assert not w.receives_while_computing(forged)
