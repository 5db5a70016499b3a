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
Benchmarks behind ``rog bench``: what row granularity and the codec cost, as JSON.

Timing goals are checked here, not in unit tests (DESIGN section 8). Every benchmark prints
one JSON object with its inputs, the machine's thread count and the figures.
"""

from __future__ import annotations

import time

from rog_ros.core.compress import make_codec
from rog_ros.core.rows import RowLayout
from rog_ros.protocol.policies import layout_for, make_policy
from rog_ros.protocol.ps import ServerEngine
from rog_ros.protocol.worker import WorkerEngine
from rog_ros.sim.harness import Harness, LinkSpec
import torch


def model_shapes(name: str) -> tuple[list, torch.nn.Module | None]:
    """Parameter shapes (and the module) of a benchmark model by name."""
    from rog_ros.workloads import convmlp as cm
    sizes = {'convmlp-s': 's', 'convmlp-m': 'm', 'convmlp-l': 'l'}
    if name not in sizes:
        raise ValueError(f'unknown model {name!r}; choose one of {sorted(sizes)}')
    model = cm.convmlp(sizes[name], num_classes=100)
    return [tuple(p.shape) for p in model.parameters()], model


def synthetic_shapes(n_params: int) -> list:
    """ConvMLP-M's shapes when ``n_params`` matches it, else a mix of conv/linear shapes."""
    shapes, _ = model_shapes('convmlp-m')
    if sum(int(torch.tensor(s).prod()) for s in shapes) == n_params:
        return shapes
    out, left = [], n_params
    pattern = [(256, 256, 3, 3), (256,), (768, 256), (768,), (256, 768), (256,)]
    while left > 0:
        for s in pattern:
            n = int(torch.tensor(s).prod())
            if n > left:
                out.append((left,))
                left = 0
                break
            out.append(s)
            left -= n
    return out


def bench_codec(n_params: int = 16_948_804, repeats: int = 5) -> dict:
    """Encode (scales + sign packing) and decode of a whole model with DEFSGDM scaled sign."""
    layout = RowLayout(synthetic_shapes(n_params), small_tensor_threshold=1000)
    codec = make_codec('defsgdm')
    p = torch.randn(layout.n_params)
    out = torch.empty_like(p)
    enc_t, dec_t = [], []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        scales = codec.scales(layout, p)
        enc = codec.encode(layout, p, scales)
        t1 = time.perf_counter()
        codec.decode(layout, enc, scales, out)
        t2 = time.perf_counter()
        enc_t.append(t1 - t0)
        dec_t.append(t2 - t1)
    enc_s, dec_s = sorted(enc_t[1:])[repeats // 2], sorted(dec_t[1:])[repeats // 2]
    nbytes = int(enc.numel()) + 4 * layout.n_tensors
    return {'benchmark': 'codec', 'codec': 'defsgdm', 'params': layout.n_params,
            'rows': layout.n_rows, 'encode_s': enc_s, 'decode_s': dec_s,
            'total_s': enc_s + dec_s, 'bytes': nbytes, 'ratio': nbytes / (4 * layout.n_params),
            'target_total_s': 0.1, 'threads': torch.get_num_threads()}


class _TimedEngine:
    """Wraps an engine and accumulates the wall and CPU seconds spent in its handlers."""

    def __init__(self, engine):
        self.engine = engine
        self.seconds = 0.0
        self.cpu_seconds = 0.0

    def __getattr__(self, name):
        attr = getattr(self.engine, name)
        if name not in ('on_message', 'on_tick', 'on_compute_done', 'start'):
            return attr

        def timed(*args, **kwargs):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return attr(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
                self.cpu_seconds += time.process_time() - c0
        return timed


def protocol_seconds(spec: str, shapes, n_workers: int, iterations: int,
                     bandwidths_mbps: list) -> dict:
    """Per-iteration protocol CPU time of one worker plus the server's share for it."""
    policy = make_policy(spec)
    layout = layout_for(policy, shapes)
    codec = make_codec('defsgdm')
    w0 = torch.zeros(layout.n_params)
    server = ServerEngine(layout, codec, policy, n_workers, w0, lr=0.01,
                          max_iterations=iterations)
    workers = [WorkerEngine(r, n_workers, layout, codec, policy, w0) for r in range(n_workers)]
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(layout.n_params, generator=gen) * 1e-2 for _ in range(3)]
    timed_server = _TimedEngine(server)
    timed_workers = [_TimedEngine(w) for w in workers]
    links = [LinkSpec(0.002, b * 1e6) for b in bandwidths_mbps[:n_workers]]
    harness = Harness(timed_server, timed_workers,
                      lambda r, w, c: grads[(r + c) % len(grads)], compute_s=0.28,
                      up=links, down=links)
    stats = harness.run()
    if stats.error is not None:
        raise RuntimeError(f'benchmark run did not finish: {stats.error}')
    iters = sum(stats.iterations)
    per_worker = (sum(t.seconds for t in timed_workers) + timed_server.seconds) / iters
    cpu = (sum(t.cpu_seconds for t in timed_workers) + timed_server.cpu_seconds) / iters
    return {'seconds_per_iteration': per_worker, 'cpu_seconds_per_iteration': cpu,
            'worker_s': sum(t.seconds for t in timed_workers) / iters,
            'server_share_s': timed_server.seconds / iters,
            'sim_time_s': stats.end_time, 'iterations': iters,
            'triggers': sum(server.triggers)}


def compute_seconds(model: torch.nn.Module, batch: int = 24, repeats: int = 3
                    ) -> tuple[float, float]:
    """Forward + backward of ``model`` on ``batch`` 32x32 colour images: median (wall, CPU) s."""
    x = torch.randn(batch, 3, 32, 32)
    y = torch.randint(0, 100, (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()
    times, cpu = [], []
    for _ in range(repeats + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        model.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return sorted(times[1:])[repeats // 2], sorted(cpu[1:])[repeats // 2]


def bench_overhead(model: str = 'convmlp-m', n_workers: int = 4, staleness: int = 4,
                   iterations: int = 8, bandwidths_mbps=(40.0, 15.0, 80.0, 5.0),
                   repeats: int = 3, threads: int | None = None) -> dict:
    """
    Measure what row granularity costs: (rog_s - ssp_s) / compute_s (target < 0.05).

    ``ratio`` is rog's default against ssp; ``ratio_rows`` the same without late rows and
    late pulls (rows sent while the robots compute: more transfers per iteration, each a
    pass over the model), i.e. what row granularity itself costs.

    rog and ssp runs alternate ``repeats`` times and each figure is the median, so that a
    burst of load from another process skews both sides alike instead of one of them.
    ``threads`` sets torch's intra-op threads for the protocol and the compute alike.
    """
    if repeats < 1:
        raise ValueError('repeats must be >= 1')
    if threads is not None:
        if threads < 1:
            raise ValueError('threads must be >= 1')
        torch.set_num_threads(threads)
    shapes, module = model_shapes(model)
    bw = list(bandwidths_mbps) * (n_workers // len(bandwidths_mbps) + 1)
    # rog's default sends rows while the robots compute (late rows and late pulls): more
    # transfers per iteration, each a pass over the model; 'rog_rows' leaves them out, to
    # show what row granularity itself costs
    specs = {'rog': f'rog:{staleness}', 'ssp': f'ssp:{staleness}',
             'rog_rows': f'rog:{staleness}#late_rows=0#late_pulls=0'}
    runs = {name: [] for name in specs}
    for _ in range(repeats):
        for name, spec in specs.items():
            runs[name].append(protocol_seconds(spec, shapes, n_workers, iterations, bw))
    rog, ssp, rows = (sorted(runs[name], key=lambda d: d['seconds_per_iteration'])[repeats // 2]
                      for name in ('rog', 'ssp', 'rog_rows'))
    compute, compute_cpu = compute_seconds(module)
    rog_cpu = sorted(d['cpu_seconds_per_iteration'] for d in runs['rog'])[repeats // 2]
    ssp_cpu = sorted(d['cpu_seconds_per_iteration'] for d in runs['ssp'])[repeats // 2]
    return {'benchmark': 'overhead', 'model': model, 'workers': n_workers,
            'staleness': staleness, 'params': sum(int(torch.tensor(s).prod()) for s in shapes),
            'rog_s': rog['seconds_per_iteration'], 'ssp_s': ssp['seconds_per_iteration'],
            'compute_s': compute,
            'ratio': (rog['seconds_per_iteration'] - ssp['seconds_per_iteration']) / compute,
            'target_ratio': 0.05,
            # The same in process CPU time: robust to other load on the machine.
            'rog_cpu_s': rog_cpu, 'ssp_cpu_s': ssp_cpu, 'compute_cpu_s': compute_cpu,
            'ratio_cpu': (rog_cpu - ssp_cpu) / compute_cpu,
            # row granularity alone (no late transfers), and what late transfers add
            'rog_rows_s': rows['seconds_per_iteration'],
            'ratio_rows': (rows['seconds_per_iteration'] - ssp['seconds_per_iteration'])
            / compute,
            'late_transfers_s': rog['seconds_per_iteration'] - rows['seconds_per_iteration'],
            'repeats': repeats, 'rog_detail': rog, 'ssp_detail': ssp,
            'rog_runs_s': [d['seconds_per_iteration'] for d in runs['rog']],
            'ssp_runs_s': [d['seconds_per_iteration'] for d in runs['ssp']],
            'threads': torch.get_num_threads()}
