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
Rows a push withheld, sent while the worker computes (``SyncPolicy.late_rows``).

A late push must keep every invariant of a push (exactly-once, conservation, also across
faults and server restarts), must not count as an iteration (no pull answers it, the
server's pace and compute estimates ignore it), must stamp the rows it delivers with the
sender's clock, and must shorten the other workers' waits where a slow link withholds rows.
"""

import random

import numpy as np
from protocol_fixtures import build, random_faults
import pytest
from rog_ros.net.links import DuplexLink, FluidLink
from rog_ros.net.traces import Trace
from rog_ros.protocol.messages import FLAG_JOIN, FLAG_LATE, KIND_GRAD, RowChunk, SERVER
from rog_ros.protocol.policies import make_policy
from rog_ros.sim.fault_fleet import checkpoint_every, schedule_server_crashes
from test_protocol_conservation import check_invariants
import torch

# compute long enough, and links slow enough, that pushes withhold rows and the uplink has
# idle time to send them during the next computation
SLOW = {'compute': (0.3, 0.3, 0.3), 'bandwidths': (0.4e6, 0.4e6, 0.03e6), 'latency': 0.005}


def watch_late_chunks(harness):
    """Record (sender, clock, worker clock, its state) of every late-push chunk sent."""
    seen = []
    send = harness._send

    def sending(src, dst, msg):
        if isinstance(msg, RowChunk) and msg.flags & FLAG_LATE and msg.kind == KIND_GRAD:
            seen.append((src, int(msg.clock), harness.workers[src].clock,
                         harness.workers[src].state))
        send(src, dst, msg)
    harness._send = sending
    return seen


@pytest.mark.parametrize('spec', ['rog:2', 'rog:4'])
@pytest.mark.parametrize('seed', [0, 1])
def test_late_rows_keep_exactly_once_under_faults(spec, seed):
    pol = make_policy(spec + '#late_rows=1')
    harness, server, workers, _, _ = build(spec, n=3, iters=12, dtype=torch.float64,
                                           fault=random_faults(seed), seed=seed, policy=pol,
                                           **SLOW)
    seen = watch_late_chunks(harness)
    stats = harness.run(until=600)
    assert server.finished and stats.error is None
    assert seen, 'no late push was sent'
    # a late push carries the clock the worker last pushed, sent while it computes the next
    assert all(c == wc and state == 'computing' for _, c, wc, state in seen)
    check_invariants(harness, server, workers)


def test_late_rows_ask_for_no_pull_and_stamp_the_rows():
    pol = make_policy('rog:4#late_rows=1')
    harness, server, workers, _, _ = build('rog:4', n=3, iters=10, dtype=torch.float64,
                                           policy=pol, **SLOW)
    harness.log_events = True
    stats = harness.run(until=600)
    assert server.finished and stats.error is None
    logs = [(node, a) for _, node, a in harness.stats.logs]
    late = [(node, a) for node, a in logs if a.name == 'late_rows_applied']
    assert late and sum(a.value for _, a in late) > 0
    # one pull per iteration but the last (answered by the stop), as without late rows: a
    # late push is not an iteration
    for r in range(3):
        pulls = [a for node, a in logs if node == r and a.name == 'pull_applied']
        assert len(pulls) == stats.iterations[r] - 1, (r, len(pulls), stats.iterations[r])
        pushes = [a for node, a in logs if node == r and a.name == 'push_done'
                  and not a.info.get('late')]
        assert len(pushes) == stats.iterations[r] + workers[r].followups
    check_invariants(harness, server, workers)


def test_a_late_push_stamps_its_rows_with_the_senders_clock():
    pol = make_policy('rog:4#late_rows=1')
    harness, server, workers, _, _ = build('rog:4', n=3, iters=10, dtype=torch.float64,
                                           policy=pol, **SLOW)
    checked = []
    apply = server._apply_late_rows

    def checking(inc, n_rows, chunk_ranges, info, now):
        stamps = server.versions.v[:, inc.sender]
        checked.append((int(inc.clock), int(stamps.max()), n_rows))
        return apply(inc, n_rows, chunk_ranges, info, now)
    server._apply_late_rows = checking
    harness.run(until=600)
    assert server.finished and checked
    # the newest stamp of the sender is the late push's clock (its rows were stamped with it)
    assert all(clock == newest for clock, newest, n in checked if n > 0)
    assert any(n > 0 for _, _, n in checked)


@pytest.mark.parametrize('seed', range(3))
def test_late_rows_across_server_restarts_keep_exactly_once(seed):
    # (and late pulls: Rog's default sends both)
    pol = make_policy('rog:2#late_rows=1')
    assert pol.late_pulls
    harness, _, _, _, _ = build('rog:2', n=3, iters=10, dtype=torch.float64, seed=seed,
                                policy=pol, **SLOW)
    seen = watch_late_chunks(harness)
    pulled, send = [], harness._send

    def sending(src, dst, msg):
        if src == SERVER and isinstance(msg, RowChunk) and msg.flags & FLAG_LATE:
            pulled.append(dst)
        send(src, dst, msg)
    harness._send = sending
    checkpoint_every(harness, 0.3)
    crashes = schedule_server_crashes(harness, random.Random(seed), 3, 1.5)
    harness.run(until=3000)
    server = harness.server
    assert len(crashes) >= 2 and server.finished and seen and pulled
    check_invariants(harness, server, harness.workers)


def fluctuating_links(harness, n, seed, good=0.4, bad=0.02, step=0.5, period=40.0):
    """Half-duplex stations whose rate jumps between good and bad every ``step`` seconds."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, period, step)
    stations = []
    for r in range(n):
        rates = np.where(rng.random(t.size) < 0.35, bad, good)
        trace = Trace(t, rates, period)
        stations.append(DuplexLink(FluidLink(trace, latency_s=0.005, seed=seed + r)))
    harness.up = [st.up for st in stations]
    harness.down = [st.down for st in stations]


def test_late_rows_shorten_the_waits_where_the_slowest_link_changes():
    # Where the slowest link changes every half second, a worker that withheld rows holds the
    # others' staleness checks until it sends them; sent while it computes, they do not.
    # (measured: 10.1 s of stall over the two seeds without, 6.3 s with; runs as long or
    # shorter, the computation being most of these toy iterations)
    stall, end = {False: 0.0, True: 0.0}, {False: 0.0, True: 0.0}
    for seed in (0, 1):
        for late in (False, True):
            pol = make_policy(f'rog:4#late_rows={int(late)}')
            harness, server, workers, _, _ = build('rog:4', n=4, iters=40,
                                                   dtype=torch.float64, policy=pol, seed=seed,
                                                   compute=(0.6, 0.6, 0.6, 0.6))
            fluctuating_links(harness, 4, seed)
            stats = harness.run(until=5000)
            assert server.finished and stats.error is None
            stall[late] += float(sum(server.stall_time))
            end[late] += stats.end_time
            check_invariants(harness, server, workers)
    assert stall[True] < 0.75 * stall[False], stall
    assert end[True] <= end[False], end


def test_late_rows_are_rogs_default_and_never_sent_by_whole_model_systems():
    assert make_policy('rog:4').late_rows is True
    assert make_policy('rog:4#late_rows=0').late_rows is False      # the ablation
    for spec in ('ssp:4', 'bsp', 'flown:4'):
        assert make_policy(spec).late_rows is False
    for spec in ('ssp:2', 'bsp', 'flown:2'):
        pol = make_policy(spec + '#late_rows=1')
        harness, server, workers, _, _ = build(spec, n=3, iters=6, dtype=torch.float64,
                                               policy=pol, **SLOW)
        seen = watch_late_chunks(harness)
        harness.run(until=600)
        assert server.finished and not seen, spec


def kill_on_sight(harness, rng, victim, delays, times=3):
    """
    Kill a worker when a message it sends or gets is put on a link, and restart it.

    ``victim(src, dst, msg)`` names the worker to kill for that message (or None). Each kill
    comes after one of ``delays`` and the worker restarts 0.3 s later from its saved state;
    a worker is killed again only after its restart. Return the list of (worker, now).
    """
    from rog_ros.sim.fault_fleet import restart_worker
    kills, doomed = [], set()
    send = harness._send

    def revive(r):
        doomed.discard(r)
        restart_worker(harness, r)

    def sending(src, dst, msg):
        send(src, dst, msg)
        r = victim(src, dst, msg)
        if r is not None and len(kills) < times and r not in doomed and rng.random() < 0.3:
            kills.append((r, harness.now))
            doomed.add(r)
            delay = rng.choice(delays)
            harness.at(harness.now + delay, lambda: harness.kill(r))
            harness.at(harness.now + delay + 0.3, lambda: revive(r))
    harness._send = sending
    return kills


@pytest.mark.parametrize('seed', range(3))
def test_worker_killed_with_a_late_push_in_flight_loses_and_doubles_nothing(seed):
    # A worker dies while its late push is on the link (some chunks out, END maybe sent) and
    # comes back from its last saved state under a new incarnation: the server applied the
    # late rows at most once and the restored worker commits exactly what it applied.
    pol = make_policy('rog:2#late_rows=1')
    harness, server, _, _, _ = build('rog:2', n=3, iters=10, dtype=torch.float64, seed=seed,
                                     policy=pol, save_states=True, **SLOW)
    flags, in_flight, spoke = {}, [], {}

    def victim(src, dst, msg):
        """Kill the sender of a late push's chunk; note each worker run that sent anything."""
        if src != SERVER:
            spoke.setdefault(src, []).append(int(msg.incarnation))
        if (isinstance(msg, RowChunk) and msg.kind == KIND_GRAD and src != SERVER
                and not msg.flags & FLAG_JOIN):      # (a JOIN names the push it recovers)
            key = (src, msg.transfer_id, int(msg.clock))   # (ids recur after a restore)
            flags.setdefault(key, set()).add(bool(msg.flags & FLAG_LATE))
            if msg.flags & FLAG_LATE:
                tr = harness.workers[src].push
                in_flight.append(tr is not None and bool(tr.flags & FLAG_LATE))
                return src
        return None
    kills = kill_on_sight(harness, random.Random(seed), victim, (0.0, 0.01, 0.05))
    harness.run(until=3000)
    server = harness.server
    assert len(kills) == 3 and all(in_flight), kills
    assert server.finished
    # every restart that sent a message under its own run was seen (one killed at once,
    # while it re-sent its saved push's END under the run before, never spoke: since the
    # saves after commits went, a restored robot recovers its push more often)
    for r, runs in spoke.items():
        said = list(dict.fromkeys(runs))                  # (in order, once each)
        assert server.retired[r][-len(said) + 1:] + [server.worker_inc[r]] == said[-8:], r
    assert 2 <= sum(len(x) for x in server.retired) <= 3
    check_invariants(harness, server, harness.workers)
    # a restored late push stays late: every chunk of a transfer, END included, says so
    mixed = {key for key, kinds in flags.items() if len(kinds) > 1}
    assert not mixed, mixed
