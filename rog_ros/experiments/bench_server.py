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
``rog bench server``: the parameter server's CPU time per worker-iteration as the fleet grows.

Synthetic workers, no training: every worker pushes fixed random gradients, encoded by the real
codec, through the real WorkerEngine and ServerEngine message flow, in memory (the virtual-time
harness, fast links). Only the server's handlers are timed (process CPU time).

The model layout keeps ConvMLP-M's row and tensor counts (33,307 rows, its tensors) but gives
every split tensor rows of ``row_params`` values: the per-row bookkeeping, which is what grows
with the number of workers, is ConvMLP-M's, while the model-sized buffers (one mirror per
worker) stay small enough for 64 workers on a laptop. Per-parameter costs (decode, encode) do
not depend on N per worker-iteration and are measured by ``rog bench codec``.
"""

from __future__ import annotations

import math
import time

import numpy as np
from rog_ros.core.compress import make_codec
from rog_ros.core.rows import RowLayout
from rog_ros.experiments.bench import _TimedEngine, model_shapes
from rog_ros.protocol.policies import make_policy
from rog_ros.protocol.ps import ServerEngine
from rog_ros.protocol.worker import WorkerEngine
from rog_ros.sim.harness import Harness, LinkSpec
import torch


def scaled_layout(model: str, threshold: int, row_params: int) -> RowLayout:
    """``model``'s rows and tensors, with ``row_params`` values per row of a split tensor."""
    shapes, _ = model_shapes(model)
    out = []
    for s in shapes:
        n = int(np.prod(s))
        if len(s) >= 2 and n >= threshold:
            out.append((int(s[0]), row_params))
        else:
            out.append((min(n, row_params),))
    return RowLayout(out, small_tensor_threshold=0)


def server_seconds(spec: str, layout: RowLayout, n_workers: int, iterations: int,
                   seed: int = 0) -> dict:
    """Server CPU seconds per worker-iteration of one synthetic run with ``n_workers``."""
    policy = make_policy(spec)
    codec = make_codec('defsgdm')
    w0 = torch.zeros(layout.n_params)
    server = ServerEngine(layout, codec, policy, n_workers, w0, lr=0.01,
                          max_iterations=iterations)
    workers = [WorkerEngine(r, n_workers, layout, codec, policy, w0) for r in range(n_workers)]
    gen = torch.Generator().manual_seed(seed)
    grads = [torch.randn(layout.n_params, generator=gen) * 1e-2 for _ in range(4)]
    timed = _TimedEngine(server)
    link = LinkSpec(0.001, 1e9)
    harness = Harness(timed, workers, lambda r, w, c: grads[(r + c) % len(grads)],
                      compute_s=[0.1 * (1 + 0.05 * (r % 7)) for r in range(n_workers)],
                      up=link, down=link)
    stats = harness.run()
    if stats.error is not None:
        raise RuntimeError(f'benchmark run did not finish: {stats.error}')
    iters = sum(stats.iterations)
    return {'workers': n_workers, 'worker_iterations': iters,
            'server_cpu_s_per_worker_iteration': timed.cpu_seconds / iters,
            'server_wall_s_per_worker_iteration': timed.seconds / iters,
            'per_row_state_bytes': server.delivered.nbytes() + server.versions.v.numel() * 4,
            'materialised_rows': server.delivered.materialised_rows,
            'dense_sent_table_bytes': n_workers * layout.n_rows * n_workers * 4,
            'triggers': sum(server.triggers)}


FIT_MIN_SIZES, FIT_MIN_SPAN = 3, 4
"""The growth with N is fitted over at least this many fleet sizes, largest / smallest at least
this much: between close sizes the timing noise decides the slope."""


def bench_server(workers=(4, 8, 16, 32, 64), model: str = 'convmlp-m', staleness: int = 4,
                 iterations: int = 3, row_params: int = 4) -> dict:
    """Server CPU time per worker-iteration for each fleet size, and its growth with N."""
    workers = sorted({int(n) for n in workers})
    if not workers or workers[0] < 1:
        raise ValueError('workers must be positive')
    if iterations < 1 or row_params < 1:
        raise ValueError('iterations and row_params must be >= 1')
    spec = f'rog:{staleness}'
    layout = scaled_layout(model, make_policy(spec).small_tensor_threshold, row_params)
    t0 = time.perf_counter()
    runs = [server_seconds(spec, layout, n, iterations) for n in workers]
    ns = np.asarray([r['workers'] for r in runs], dtype=np.float64)
    ts = np.asarray([r['server_cpu_s_per_worker_iteration'] for r in runs])
    out = {'benchmark': 'server', 'model_layout': f'{model} rows/tensors, {row_params} '
           'values per split row', 'rows': layout.n_rows, 'tensors': layout.n_tensors,
           'params': layout.n_params, 'sync': spec, 'iterations': iterations, 'runs': runs,
           'threads': torch.get_num_threads()}
    if len(runs) < FIT_MIN_SIZES or ns[-1] / ns[0] < FIT_MIN_SPAN:
        # 4 and 5 workers fitted an exponent of -5.8 from timing noise, and it passed
        out.update({'growth_exponent': None, 'at_most_linear': None,
                    'fit': f'needs at least {FIT_MIN_SIZES} fleet sizes spanning a factor of '
                           f'{FIT_MIN_SPAN} (--workers 16 or more)'})
    else:
        slope, icept = np.polyfit(ns, ts, 1)
        expo = np.polyfit(np.log(ns), np.log(ts), 1)[0]
        out.update({
            'linear_fit_s_per_worker': float(slope), 'linear_fit_intercept_s': float(icept),
            # t ~ N^k: k <= 1 means at most linear growth per worker-iteration
            'growth_exponent': float(expo),
            'ratio_t_max_over_t_min': float(ts[-1] / ts[0]),
            'ratio_n_max_over_n_min': float(ns[-1] / ns[0]),
            'at_most_linear': bool(expo <= 1.0 + 0.1 or ts[-1] / ts[0] <= ns[-1] / ns[0])})
    out['bench_wall_s'] = time.perf_counter() - t0
    out['ok'] = all(math.isfinite(r['server_cpu_s_per_worker_iteration']) for r in runs)
    return out
