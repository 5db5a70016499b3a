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
"""Two processes configured with one rank: the server says so once, and the run still ends."""

import collections
import logging

from protocol_fixtures import build
import pytest
from rog_ros.protocol.events import describe
from rog_ros.sim.harness import LinkSpec

TWIN = 2        # harness node of the second process; it runs as rank 1, as node 1 does


def run_with_a_twin(spec, iters=200, twin_starts_at=1.0, twin=True):
    """Run 2 ranks; a third process, configured as rank 1 too, starts at ``twin_starts_at``."""
    harness, server, _, _, _ = build(spec, n=2, iters=iters)
    harness.log_events = True
    if twin:
        second = harness.new_worker(1)
        harness.workers.append(second)
        harness.compute_s.append(0.06)
        harness.up.append(LinkSpec(0.001, 0.5e6))
        harness.down.append(LinkSpec(0.001, 0.5e6))
        harness.stats.compute_s.append(0.0)
        harness.stats.iterations.append(0)
        harness.stopped.append(False)
        harness._gen.append(0)
        grad_fn, send = harness.grad_fn, harness._send
        harness.grad_fn = lambda node, w, clock: grad_fn(min(node, 1), w, clock)

        def both_hear_rank_1(src, dst, msg):     # one topic per rank: both subscribe
            send(src, dst, msg)
            if dst == 1:
                send(src, TWIN, msg)
        harness._send = both_hear_rank_1
        harness.at(twin_starts_at, lambda: harness._handle(TWIN, second.start(harness.now)))
    stats = harness.run(until=300)
    events = collections.Counter(a.name for _, node, a in stats.logs if node < 0)
    return harness, stats, events


@pytest.mark.parametrize('spec', ['bsp', 'ssp:2', 'rog:2', 'flown:2'])
def test_two_processes_with_one_rank_are_named_once_and_the_run_ends(spec):
    harness, stats, events = run_with_a_twin(spec)
    assert stats.error is None and harness.server.finished
    # each process retired the other at least once, and was taken back: a ping-pong
    assert harness.server.revivals >= 2
    assert harness.server.duplicate_ranks == {1}
    assert events['duplicate_rank'] == 1          # said once, not at every turn
    log = next(a for _, node, a in stats.logs if a.name == 'duplicate_rank')
    level, sentence = describe(log)
    assert 'two processes run as robot 1' in sentence and 'rank' in sentence
    # the turns after it are told quietly, not as a warning every few seconds
    later = [describe(a) for t, _, a in stats.logs
             if a.name == 'worker_revived' and t > next(
                 t2 for t2, _, a2 in stats.logs if a2.name == 'duplicate_rank')]
    assert later and all(lvl == logging.INFO and 'two processes' in text for lvl, text in later)


def test_one_process_per_rank_raises_no_alarm():
    harness, stats, events = run_with_a_twin('rog:2', twin=False)
    assert stats.error is None and harness.server.finished
    assert harness.server.revivals == 0 and not harness.server.duplicate_ranks
    assert events['duplicate_rank'] == 0
