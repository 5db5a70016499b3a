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
"""A durable push server (its journal, K = 1, 4 or 10) crashed after every message it took."""

from collections import deque
import os

import pytest
from rog_ros.nodes.chaos_hooks import ServerHooks
from rog_ros.nodes.push_journal import JOURNAL_FILE
from rog_ros.nodes.push_systems import ServerAdapter
from rog_ros.protocol.actions import Send, StartCompute
from rog_ros.protocol.messages import Schedule
from test_protocol_push_restart import _applied, _pair, _push, SYSTEMS
from test_push_durable import _Through
import torch

ROBOTS = 3
BUDGET = 9


class _Bus(_Through):
    """``_Through`` with the transfers' timeouts (why: the stop orders' repeats read them)."""

    end_timeout_s, lease_s = 2.0, 10.0


def _server(system, folder, every=1):
    """
    Return a new run of a three-robot push server on ``folder``, restored.

    ``every``: its ``--checkpoint-every``; with the journal, as the node keeps it for every
    K (``ServerAdapter.journal_in``; with K = 1 the checkpoint before each answer holds
    each input, and no record is written for it).
    """
    return durable_server(_pair(system, n_workers=ROBOTS, budget=BUDGET)[0], folder, every)


def durable_server(engine, folder, every, journal=True):
    """
    Return ``engine``'s push server on state folder ``folder``, restored (why: as the node).

    ``every``: its ``--checkpoint-every``; ``journal``: whether it keeps its journal there
    (``ServerAdapter.journal_in``). Shared with test_push_journal.
    """
    adapter = ServerAdapter(engine, ROBOTS, 0.1, _Bus())
    if journal:
        adapter.journal_in(str(folder))
    hooks = ServerHooks(adapter, engine.model().clone(), state_dir=str(folder),
                        checkpoint_every=every)
    hooks.restore()
    return hooks


def _files(folder):
    """Return the state folder's files' bytes by name (why: a crash before they changed)."""
    return {name: open(os.path.join(folder, name), 'rb').read()
            for name in ('server.pt', JOURNAL_FILE)
            if os.path.exists(os.path.join(folder, name))}


def _put_back(folder, saved):
    """Make the state folder's files ``saved`` again; remove those it did not hold."""
    for name in ('server.pt', JOURNAL_FILE):
        path = os.path.join(folder, name)
        if name in saved:
            with open(path, 'wb') as f:
                f.write(saved[name])
        elif os.path.exists(path):
            os.remove(path)


def _run(system, folder, crashes=(), before=False, reborn=False, every=1):
    """
    Drive the fleet in a fixed order; the server dies after each message index in ``crashes``.

    Why: the same order with and without crashes makes the final model comparable bit for
    bit. A crash loses the server's answer to the message it just took (``before``: and
    its checkpoint and journal record of it: the state files as they were before the
    message) and the robot
    sends its push again to the restored server first (``reborn``: the robot restarted
    too, and its new run pushes at its starting model). Return the server, the robots'
    pushes computed, and how many stop orders each robot took.
    """
    os.makedirs(folder, exist_ok=True)
    srv = _server(system, folder, every)
    worker = _pair(system, n_workers=ROBOTS, budget=BUDGET)[1]
    robots = [worker(r) for r in range(ROBOTS)]
    steps, stops, q, taken = [0] * ROBOTS, [0] * ROBOTS, deque(), 0
    runs = [11 + r for r in range(ROBOTS)]

    def compute(rank):
        """Queue robot ``rank``'s next push (why: each pull starts a computation)."""
        q.append(_push(robots[rank], runs[rank], steps[rank]))
        steps[rank] += 1

    for r in range(ROBOTS):
        compute(r)
    while q and taken < 200:
        msg = q.popleft()
        saved = _files(folder) if before else None
        out = srv.on_message(msg, 0.0)
        if taken in crashes:
            if before:
                if srv.engine.journal is not None:
                    srv.engine.journal.close()
                _put_back(folder, saved)
            srv = _server(system, folder, every)
            if reborn:
                r = msg.sender
                robots[r], runs[r] = worker(r), 61 + r
                msg = _push(robots[r], runs[r], steps[r])
                steps[r] += 1
            q.appendleft(msg)                 # its answer lost: the robot sends it again
            taken += 1
            continue
        taken += 1
        for a in out:
            if not isinstance(a, Send):
                continue
            wk = robots[a.dest]
            if isinstance(a.msg, Schedule) and a.msg.stop:
                stops[a.dest] += 1
            for b in wk.on_message(a.msg, 0.0):
                if isinstance(b, StartCompute):
                    compute(a.dest)
    assert not q, f'{system}: {len(q)} messages left after {taken}'
    return srv, steps, stops


@pytest.mark.parametrize('every', [1, 4, 10])
@pytest.mark.parametrize('before', [False, True])
@pytest.mark.parametrize('system', SYSTEMS)
def test_a_crash_after_any_message_loses_no_push_and_applies_none_twice(
        system, before, every, tmp_path):
    # K = 1, or K = 4 and 10 with the journal: a crash after the server took any message,
    # with its answer lost (and, before: its checkpoint and journal record of it too), then
    # the robot's push sent again: the run ends with the very model of the run without a
    # crash, every push applied once, every robot stopped
    calm, calm_steps, calm_stops = _run(system, tmp_path / 'calm', every=every)
    assert _applied(calm.engine.engine) == BUDGET and all(calm_stops)
    for k in range(calm.engine.pushes_received):
        srv, steps, stops = _run(system, tmp_path / f'c{k}', crashes=(k,), before=before,
                                 every=every)
        assert srv.restored is not None or srv.engine.replayed > 0 or (before and k == 0), k
        assert _applied(srv.engine.engine) == BUDGET, k
        assert torch.equal(srv.engine.engine.model(), calm.engine.engine.model()), k
        assert steps == calm_steps and all(stops), (k, steps, stops)
        assert srv.engine.worker_restarts == 0 and srv.engine.rejects == 0, k


@pytest.mark.parametrize('every', [1, 10])
@pytest.mark.parametrize('system', SYSTEMS)
def test_two_crashes_in_a_row_lose_no_push(system, every, tmp_path):
    # the restored server dies again after the first message it took, its answer lost too
    calm = _run(system, tmp_path / 'calm', every=every)[0]
    for k in range(calm.engine.pushes_received - 1):
        srv, _, stops = _run(system, tmp_path / f'c{k}', crashes=(k, k + 1), every=every)
        assert _applied(srv.engine.engine) == BUDGET and all(stops), k
        assert torch.equal(srv.engine.engine.model(), calm.engine.engine.model()), k


@pytest.mark.parametrize('every', [1, 10])
@pytest.mark.parametrize('system', SYSTEMS)
def test_a_robot_restarted_with_the_server_trains_on_and_nothing_is_applied_twice(
        system, every, tmp_path):
    # the robot whose answer the crash lost restarted too: its new run's first push (at its
    # starting model) is applied only at the clock the restored server holds for it, else
    # dropped (one worker_restart); the budget is reached, every robot stops, no reject
    for k in range(BUDGET):
        srv, _, stops = _run(system, tmp_path / f'c{k}', crashes=(k,), reborn=True,
                             every=every)
        adapter = srv.engine
        assert _applied(adapter.engine) == BUDGET and all(stops), k
        assert adapter.worker_restarts <= 1 and adapter.rejects == 0, k
