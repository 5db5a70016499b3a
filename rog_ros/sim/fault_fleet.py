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
A fleet of protocol engines on a small problem, and the crashes a real fleet meets.

The engines promise exactly-once uplinks, a model on every worker that is the one the server
holds for it, and a run that ends, also when robots reboot mid-push and the server comes back
from a checkpoint a moment old. Those are claims about runs nobody scripted, so they are
checked on many random ones: this module builds them in virtual time (``sim.harness``) on a
convex problem small enough for a run a second on two cores, in float64 so that gradient mass
balances to 1e-10. The protocol tests and ``rog bench faults`` both build their runs here.
"""

from __future__ import annotations

import copy
import random

from rog_ros.core.compress import Identity, RowScaledSign, ScaledSign
from rog_ros.core.rows import RowLayout
from rog_ros.protocol.actions import Send
from rog_ros.protocol.messages import Schedule, SERVER
from rog_ros.protocol.policies import make_policy
from rog_ros.protocol.ps import ServerEngine
from rog_ros.protocol.worker import WorkerEngine
from rog_ros.sim.harness import Harness, LinkSpec, quadratic_problem
import torch

SHAPES = [(16, 3, 3, 3), (16,), (32, 16, 3, 3), (32,), (10, 32), (10,)]
"""A small CNN's parameter shapes: split tensors of several row sizes and small ones."""


def quadratic_fleet(spec, n=4, iters=20, codec='row', dtype=torch.float32, lr=0.2,
                    chunk_bytes=256, window=4, momentum=0.9, weight_decay=5e-4,
                    bandwidths=(1e6, 0.5e6, 2e6, 0.3e6), compute=(0.05, 0.07, 0.11, 0.06),
                    latency=0.001, fault=None, seed=0, noise=0.1, policy=None,
                    end_timeout_s=0.5, track=True, save_states=False, absence_timeout_s=None,
                    min_workers=1, final_model=False, let_go_silent=None):
    """
    Build a server and ``n`` workers of system ``spec`` (``rog:4``, ``bsp``, ...) in a harness.

    Returns ``(harness, server, workers, loss_fn, layout)``. The harness gets ``new_server()``
    and ``new_worker(r)`` for restarts: engines of the same settings under fresh incarnations
    (drawn from ``seed``, so a run replays exactly). ``save_states`` makes workers persist
    their state and join on start, as the nodes do; ``track`` keeps the conservation ledgers
    that ``fault_sweep`` balances.
    """
    pol = policy or make_policy(spec)
    layout = RowLayout(SHAPES, whole_model=pol.whole_model)
    c = {'row': RowScaledSign, 'sign': ScaledSign}.get(codec, lambda: Identity(dtype))()
    w0 = torch.zeros(layout.n_params, dtype=dtype)
    incarnations = random.Random(seed + 7919)      # reproducible runs, fresh ids per restart

    def new_server():
        return ServerEngine(layout, c, pol, n, w0, lr=lr, max_iterations=iters,
                            chunk_bytes=chunk_bytes, window=window,
                            end_timeout_s=end_timeout_s, absence_timeout_s=absence_timeout_s,
                            min_workers=min_workers, track_conservation=track,
                            final_model=final_model, let_go_silent=let_go_silent,
                            incarnation=incarnations.getrandbits(64) or 1)

    def new_worker(r):
        return WorkerEngine(r, n, layout, c, pol, w0, momentum=momentum,
                            weight_decay=weight_decay, chunk_bytes=chunk_bytes, window=window,
                            end_timeout_s=end_timeout_s, track_conservation=track,
                            save_state_actions=save_states, keep_undurable=True,
                            join_on_start=save_states,
                            incarnation=incarnations.getrandbits(64) or 1)
    server = new_server()
    workers = [new_worker(r) for r in range(n)]
    grad_fn, optimum, loss_fn = quadratic_problem(n, layout, seed=seed, noise=noise,
                                                  dtype=dtype)
    bw = list(bandwidths)[:n]
    harness = Harness(server, workers, grad_fn, compute_s=list(compute)[:n],
                      up=[LinkSpec(latency, b) for b in bw],
                      down=[LinkSpec(latency, b) for b in bw], fault=fault)
    harness.new_server, harness.new_worker = new_server, new_worker
    return harness, server, workers, loss_fn, layout


def random_faults(seed, p_drop=0.05, p_dup=0.05, p_late=0.05, only=None):
    """Return a harness fault hook that drops, duplicates or delays messages at random."""
    rng = random.Random(seed)

    def fault(msg, src, dst, now):
        if only is not None and not isinstance(msg, only):
            return [0.0]
        u = rng.random()
        if u < p_drop:
            return []
        if u < p_drop + p_dup:
            return [0.0, rng.random() * 0.3]
        if u < p_drop + p_dup + p_late:
            return [rng.random() * 0.5]
        return [0.0]
    return fault


def restart_worker(harness, r):
    """Put a new incarnation of worker ``r`` in place, restored from what it last saved."""
    new = harness.new_worker(r)
    if r in harness.saved:
        new.load_state_dict(harness.saved[r])
    harness.revive(r, new)


def schedule_worker_crashes(harness, rng, n_crashes, t_max, downtime=(0.05, 1.0)):
    """
    Kill random workers at ``n_crashes`` random times before ``t_max``; each restarts later.

    Returns the list the crashes are recorded in as they happen: ``(time, rank, state)``
    (a crash drawn for a worker that is down or done is skipped).
    """
    n = len(harness.workers)
    crashes = []
    for t in sorted(rng.uniform(0.1, t_max) for _ in range(n_crashes)):
        r = rng.randrange(n)
        down = rng.uniform(*downtime)

        def crash(r=r, down=down):
            if r in harness.dead or harness.stopped[r]:
                return
            crashes.append((harness.now, r, harness.workers[r].state))
            harness.kill(r)
            harness.at(harness.now + down, lambda: restart_worker(harness, r))
        harness.at(t, crash)
    return crashes


def checkpoint_every(harness, period):
    """Checkpoint the server every ``period`` s of virtual time, as the server node does."""
    harness.checkpoint = None

    def tick():
        if SERVER not in harness.dead:
            _checkpoint_now(harness)
        harness.at(harness.now + period, tick)
    harness.at(0.0, tick)


def _checkpoint_now(harness):
    """
    Checkpoint the server now, as the node does: its state kept, then its id confirmed.

    The one checkpoint of every policy here (periodic, before stop orders, at the final
    model), so all three write what a restored server loads alike.
    """
    state = copy.deepcopy(harness.server.state_dict())   # write, fsync, rename
    harness.checkpoint = state
    harness.server.checkpoint_confirmed(state['state_id'])


def checkpoint_before_stop_orders(harness):
    """Also checkpoint the server before it sends a stop order (the node's ``ServerHooks``)."""
    handle = harness._handle

    def handle_and_checkpoint(node, actions):
        if node == SERVER and any(isinstance(a, Send) and isinstance(a.msg, Schedule)
                                  and a.msg.stop for a in actions):
            _checkpoint_now(harness)
        return handle(node, actions)
    harness._handle = handle_and_checkpoint


def checkpoint_at_the_final_model(harness):
    """
    Also checkpoint the server as it takes the fleet's final model (the node's ``ServerHooks``).

    Before any of it goes out: a server restored from an older checkpoint takes another (the
    mean of older mirrors) and would take a robot's ``FLAG_FINAL`` JOIN for the one it holds.
    """
    handle, taken_by = harness._handle, []

    def handle_and_checkpoint(node, actions):
        """Checkpoint once per server run that took the final model, then handle."""
        server = harness.server
        if (node == SERVER and getattr(server, 'final_values', None) is not None
                and not any(s is server for s in taken_by)):
            taken_by.append(server)
            _checkpoint_now(harness)
        return handle(node, actions)
    harness._handle = handle_and_checkpoint


def restart_server(harness):
    """Put a new server in place, restored from the last checkpoint it confirmed."""
    new = harness.new_server()
    new.load_state_dict(harness.checkpoint)
    harness.revive(SERVER, new)


def schedule_server_crashes(harness, rng, n, t_max, downtime=(0.02, 0.3)):
    """
    Kill the server at ``n`` random times before ``t_max`` while no worker has stopped.

    Each crash restores it from its checkpoint after a random downtime. Returns the list the
    crash times are recorded in as they happen.
    """
    crashes = []
    for t in sorted(rng.uniform(0.1, t_max) for _ in range(n)):
        down = rng.uniform(*downtime)

        def crash(down=down):
            if SERVER in harness.dead or any(harness.stopped):
                return     # (a stopped worker no longer resends: drivers checkpoint then)
            crashes.append(harness.now)
            harness.kill(SERVER)
            harness.at(harness.now + down, lambda: restart_server(harness))
        harness.at(t, crash)
    return crashes


def crash_server_once(harness, down, crashes=None):
    """Kill the server now, at any point before the fleet has ended; restore it ``down`` later."""
    if SERVER in harness.dead or all(harness.stopped):
        return
    if crashes is not None:
        crashes.append(harness.now)
    harness.kill(SERVER)
    harness.at(harness.now + down, lambda: restart_server(harness))
