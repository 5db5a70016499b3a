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
"""Helpers shared by the protocol tests: build a fleet of engines on a small model."""

import random

from rog_ros.core.compress import Identity, RowScaledSign, ScaledSign
from rog_ros.core.rows import RowLayout
from rog_ros.protocol.actions import StartCompute
from rog_ros.protocol.messages import SERVER
from rog_ros.protocol.policies import make_policy
from rog_ros.protocol.ps import ServerEngine
from rog_ros.protocol.worker import WorkerEngine
from rog_ros.sim.harness import Harness, LinkSpec, quadratic_problem
import torch

SHAPES = [(16, 3, 3, 3), (16,), (32, 16, 3, 3), (32,), (10, 32), (10,)]


def build(spec, n=4, iters=20, codec='row', dtype=torch.float32, lr=0.2, chunk_bytes=256,
          window=4, momentum=0.9, weight_decay=5e-4, bandwidths=(1e6, 0.5e6, 2e6, 0.3e6),
          compute=(0.05, 0.07, 0.11, 0.06), latency=0.001, fault=None, seed=0, noise=0.1,
          policy=None, end_timeout_s=0.5, track=True, save_states=False, absence_timeout_s=None,
          min_workers=1, final_model=False):
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
                            final_model=final_model,
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
    """Drop, duplicate or delay messages at random (optionally only some types)."""
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
