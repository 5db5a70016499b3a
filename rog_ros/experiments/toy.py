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
``rog sim --toy``: the protocol engines on a small convex problem, in virtual time.

A first end-to-end look at BSP / SSP / Rog without any workload or network trace: four workers
with links of different speeds fit a quadratic model over the in-memory harness. The table it
prints is real output of the engines (time, stalls, triggers, bytes, final loss and how far it
is above the problem's optimum).

The workers run plain SGD (momentum 0): the toy compares the protocols. With the workloads'
momentum 0.9 and the 1-bit codec, BSP oscillated on this problem (its loss rose from 40 to 400
iterations, back near the start) while the stale systems, whose momentum is compensated down
to 0.6, converged: a ranking of optimiser settings, not of synchronisation.
"""

from __future__ import annotations

from dataclasses import dataclass

from rog_ros.core.compress import make_codec
from rog_ros.protocol.policies import layout_for, make_policy
from rog_ros.protocol.ps import ServerEngine
from rog_ros.protocol.worker import WorkerEngine
from rog_ros.sim.harness import Harness, LinkSpec, quadratic_problem
from rog_ros.workloads.training import single_thread
import torch

TOY_SHAPES = [(64, 3, 3, 3), (64,), (128, 64, 3, 3), (128,), (256, 128), (256,), (10, 256),
              (10,)]


@dataclass
class ToyResult:
    system: str
    sim_time_s: float
    iterations: int
    loss: float
    excess: float           # loss above the problem's optimum
    stall_s: float
    triggers: int
    bytes_up: int
    bytes_down: int

    def row(self) -> list:
        return [self.system, f'{self.sim_time_s:.2f}', str(self.iterations),
                f'{self.sim_time_s / max(self.iterations, 1):.3f}', f'{self.loss:.4g}',
                f'{self.excess:.4g}', f'{self.stall_s:.2f}', str(self.triggers),
                f'{(self.bytes_up + self.bytes_down) / 1e6:.2f}']


HEADER = ['system', 'sim time s', 'iters', 's/iter', 'loss', 'above optimum', 'stall s',
          'triggers', 'MB']


def run_toy(system: str, workers: int = 4, iterations: int = 40, seed: int = 0,
            bandwidths_mbps=(8.0, 2.0, 16.0, 1.0), compute_s: float = 0.2,
            lr: float = 0.05, momentum: float = 0.0) -> ToyResult:
    """
    One toy run of ``system`` ('bsp', 'ssp:4', 'rog:4', ...), on one torch thread.

    The toy's tensors are small: on a machine whose cores were busy, torch's thread per core
    spun against the other load and `rog sim --toy --systems bsp` took 20-43 s instead of 3 s
    (measured on 2 cores at load 2.5 and 7), with the same table either way.
    """
    with single_thread():
        return _run_toy(system, workers, iterations, seed, bandwidths_mbps, compute_s, lr,
                        momentum)


def _run_toy(system, workers, iterations, seed, bandwidths_mbps, compute_s, lr, momentum):
    """Run the toy as :func:`run_toy` describes, on the caller's torch threads."""
    policy = make_policy(system)
    layout = layout_for(policy, TOY_SHAPES)
    codec = make_codec('defsgdm')
    w0 = torch.zeros(layout.n_params)
    server = ServerEngine(layout, codec, policy, workers, w0, lr=lr, max_iterations=iterations,
                          chunk_bytes=1024)
    engines = [WorkerEngine(r, workers, layout, codec, policy, w0, momentum=momentum,
                            chunk_bytes=1024) for r in range(workers)]
    grad_fn, optimum, loss_fn = quadratic_problem(workers, layout, seed=seed, noise=0.1)
    bw = [bandwidths_mbps[r % len(bandwidths_mbps)] * 1e6 for r in range(workers)]
    links = [LinkSpec(0.002, b) for b in bw]
    stats = Harness(server, engines, grad_fn, compute_s=compute_s, up=links, down=links).run()
    if stats.error is not None:
        raise RuntimeError(f'{system} did not finish: {stats.error}')
    loss = loss_fn(server.consensus_model())
    return ToyResult(policy.name, stats.end_time, max(stats.iterations), loss,
                     loss - loss_fn(optimum), sum(server.stall_time),
                     sum(server.triggers), server.bytes_up, server.bytes_down)


def format_table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    line = '  '.join(h.ljust(w) for h, w in zip(header, widths))
    sep = '  '.join('-' * w for w in widths)
    body = ['  '.join(c.rjust(w) if k else c.ljust(w) for k, (c, w) in
                      enumerate(zip(r, widths))) for r in rows]
    return '\n'.join([line, sep] + body)
