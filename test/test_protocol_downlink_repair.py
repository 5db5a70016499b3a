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
"""Issue 9 defect 6: lost mandatory downlink rows are repaired before the worker computes."""

import dataclasses
import random

from protocol_fixtures import at_compute_start, build
import pytest
from rog_ros.protocol.messages import KIND_UPDATE, RowChunk, RowVersions, SERVER
from rog_ros.protocol.policies import make_policy
from test_protocol_conservation import check_invariants
import torch


def downlink_dropper(seed, p, only_worker=None):
    """Drop downlink data chunks (and some RowVersions) at random."""
    rng = random.Random(seed)

    def fault(msg, src, dst, now):
        if src != SERVER or (only_worker is not None and dst != only_worker):
            return [0.0]
        if isinstance(msg, RowChunk) and msg.kind == KIND_UPDATE and msg.payload:
            return [] if rng.random() < p else [0.0]
        if isinstance(msg, RowVersions):
            return [] if rng.random() < p / 2 else [0.0]
        return [0.0]
    return fault


def rsp_checking(harness, workers, staleness):
    """
    Check each computation as it starts: computing iteration c+1 needs c - vloc <= S.

    Per column S + the straggler slack the server granted (a link that keeps losing rows is
    a slow link), never more than ``slack_max`` above S; all workers are active here. The
    model must not change until the gradient is taken (``at_compute_start`` asserts it).
    """
    seen = {'checks': 0}

    def started(rank, clock):
        c = clock - 1
        bounds = workers[rank]._bounds()
        assert int(bounds.min()) >= staleness
        assert int(bounds.max()) <= staleness + workers[rank].policy.slack_max
        stale = int((workers[rank].vloc < (c - bounds).unsqueeze(0)).sum())
        assert stale == 0, f'worker {rank} computes iteration {clock} with {stale} stale rows'
        seen['checks'] += 1
    at_compute_start(harness, started)
    return seen


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_lost_mandatory_rows_are_resent_before_computing(seed):
    # outage-aware RSP off: a worker whose pulls keep losing rows is not suspended here
    harness, server, workers, _, _ = build('rog:2', n=3, iters=12, dtype=torch.float64,
                                           fault=downlink_dropper(seed, 0.35), seed=seed,
                                           policy=make_policy('rog:2', outage_aware=False))
    seen = rsp_checking(harness, workers, 2)
    stats = harness.run(until=500)
    assert stats.iterations == [12, 12, 12]
    assert seen['checks'] == 36
    assert server.repairs > 0                 # the faults did hit mandatory rows
    check_invariants(harness, server, workers)


def test_end_that_delivered_nothing_does_not_start_computing():
    # Every data chunk of worker 1's third and fourth downlinks is lost.
    count = {'dl': 0}

    def fault(msg, src, dst, now):
        if src == SERVER and dst == 1 and isinstance(msg, RowVersions):
            count['dl'] += 1
        if (src == SERVER and dst == 1 and isinstance(msg, RowChunk) and msg.payload
                and 2 <= count['dl'] <= 3):
            return []
        return [0.0]

    # (pulls counted by their versions: late pulls, which have versions too, are off)
    harness, server, workers, _, _ = build('rog:1', n=2, iters=8, dtype=torch.float64,
                                           fault=fault,
                                           policy=make_policy('rog:1#late_pulls=0'))
    seen = rsp_checking(harness, workers, 1)
    stats = harness.run(until=500)
    assert stats.iterations == [8, 8] and seen['checks'] == 16
    assert workers[1].rsp_waits >= 1
    check_invariants(harness, server, workers)


def test_versions_after_their_end_do_not_cost_a_retransmission():
    # On DDS, RowVersions and RowChunk are different topics: an END may overtake its
    # versions. The worker holds that END until they come instead of waiting for the
    # server's END retransmission (end_timeout_s per pull).
    def late_versions(msg, src, dst, now):
        return [0.02] if isinstance(msg, RowVersions) else [0.0]

    base, *_ = build('rog:2', n=2, iters=10, dtype=torch.float64)
    base_time = base.run(until=500).end_time
    harness, server, workers, _, _ = build('rog:2', n=2, iters=10, dtype=torch.float64,
                                           fault=late_versions)
    stats = harness.run(until=500)
    assert stats.iterations == [10, 10]
    assert stats.end_time < base_time + 10 * 0.03        # (end_timeout_s is 0.5 here)
    check_invariants(harness, server, workers)


def test_a_pull_that_delivers_no_row_waits_for_its_versions():
    # A pull whose deadline let no row through is an END alone. Its versions still say who
    # is suspended (one run for row 0, applied to no row), and the server's post-pull check
    # used that membership: a worker that closed the END without them (it held only ENDs of
    # transfers with rows) kept checking the columns of robots the server no longer counted,
    # waited in rsp_wait, and no repair came (the crash-and-fault sweep, rog:3 seed 7075).
    import numpy as np
    from rog_ros.protocol.messages import FLAG_END
    from rog_ros.protocol.ps_downlink import encode_versions
    harness, server, _, _, _ = build('rog:2', n=3, iters=10)
    worker = harness.new_worker(0)
    tid = worker.newest_pull_tid + 1
    end = RowChunk(transfer_id=tid, seq=0, sender=SERVER, receiver=0, kind=KIND_UPDATE,
                   clock=0, flags=FLAG_END, codec=worker.codec.codec_id,
                   incarnation=server.incarnation, target_incarnation=worker.incarnation)
    out = worker.on_message(end, 0.1)
    assert [type(a).__name__ for a in out] == ['Send', 'Log']
    assert out[1].name == 'end_without_versions'
    ack = out[0].msg                           # (it came: the server knows it reaches us)
    assert (ack.transfer_id, ack.seq, ack.final, ack.receiver) == (tid, 0, False, SERVER)
    assert worker.newest_pull_tid == tid - 1                  # not closed
    versions = encode_versions(tid, 0, server.versions.v, np.zeros(0, dtype=np.int64),
                               torch.tensor([True, True, False]))
    versions.incarnation, versions.target_incarnation = server.incarnation, worker.incarnation
    out = worker.on_message(versions, 0.11)
    assert 'pull_applied' in [getattr(a, 'name', None) for a in out]
    assert worker.newest_pull_tid == tid
    assert worker.active.tolist() == [True, True, False]      # worker 2 no longer checked
    assert worker.on_message(end, 0.12)[0].msg.final         # a repeated END: answered


def test_a_late_pull_carries_versions_but_not_the_rules():
    # A late pull (rows changed since the last pull, sent while the worker computes or, as
    # here, while it still pushes) updates the versions of the rows it carries, not who is
    # suspended: the server checked our side of the last pull with that pull's rules. A
    # worker whose follow-up push was still under way took a readmission from a late pull,
    # checked the rows of a robot its pull had not counted, and waited for ever (the crash
    # sweep, rog:2 seed 8277 of the harder one). The next pull brings the new rules.
    import numpy as np
    from rog_ros.protocol.messages import FLAG_END, FLAG_LATE
    from rog_ros.protocol.ps_downlink import encode_versions
    harness, server, _, _, _ = build('rog:2', n=3, iters=10)
    worker = harness.new_worker(0)
    out_of_rules = torch.tensor([True, True, False])

    def pull(tid, flags):
        end = RowChunk(transfer_id=tid, seq=0, sender=SERVER, receiver=0, kind=KIND_UPDATE,
                       clock=0, flags=FLAG_END | flags, codec=worker.codec.codec_id,
                       incarnation=server.incarnation, target_incarnation=worker.incarnation)
        versions = encode_versions(tid, 0, server.versions.v, np.zeros(0, dtype=np.int64),
                                   out_of_rules)
        versions.staleness_slack = [0, 0, 3]
        for msg in (versions, end):
            msg.incarnation, msg.target_incarnation = server.incarnation, worker.incarnation
            worker.on_message(msg, 0.1)
        assert worker.newest_pull_tid == tid                    # closed

    pull(1, FLAG_LATE)
    assert worker.active.tolist() == [True, True, True]
    assert worker.slack.tolist() == [0, 0, 0]
    pull(2, 0)
    assert worker.active.tolist() == [True, True, False]
    assert worker.slack.tolist() == [0, 0, 3]


def test_a_worker_that_still_pokes_after_its_pull_is_served_again():
    # Defence in depth for a disagreement between the worker's check and ours (two such
    # defects were found by the crash sweep, each mended at its cause): a worker repeats its
    # newest push's END only while it waits; one that still pokes a poke interval after we
    # saw its pull through would wait for ever, so that pull is served again, with the
    # current rules. An END that comes sooner (a copy) changes nothing.
    harness, server, workers, _, _ = build('rog:2', n=3, iters=12, dtype=torch.float64)
    worker, t = workers[0], 0.0
    while not (server._pull_done_at[0] is not None and 0 not in server.pending
               and server.downlinks[0] is None and worker.state == 'computing'
               and worker._last_end is not None
               and worker._last_end.clock == server.clock[0]):
        t += 0.002
        assert t < 5.0
        harness.run(until=t)
    poke = dataclasses.replace(worker._last_end, incarnation=worker.incarnation,
                               target_incarnation=server.incarnation)   # as sent
    done = server._pull_done_at[0]
    early = server.on_message(poke, done + server.end_timeout_s)
    assert server.downlinks[0] is None and server.pull_repeats == 0
    assert [type(a.msg).__name__ for a in early] == ['TransferAck']    # its answer again
    out = server.on_message(poke, done + 4 * server.end_timeout_s)
    assert server.pull_repeats == 1 and server.downlinks[0] is not None
    assert [a.name for a in out if hasattr(a, 'name')] == ['pull_repeated']
    pulls = [a.msg for a in out if getattr(a, 'msg', None) is not None
             and isinstance(a.msg, RowChunk) and a.msg.kind == KIND_UPDATE]
    assert pulls and all(p.receiver == 0 and p.clock == server.clock[0] for p in pulls)
