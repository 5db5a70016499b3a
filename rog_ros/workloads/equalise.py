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
Compute-time equalisation across heterogeneous workers (artifact section 1.10, paper ref [41]).

A fast worker that finishes early only waits at the next synchronisation point, so the fleet
gives every worker the same compute time per iteration: either it sleeps the difference
(`suggest_sleep`, what the artifact's parameter server sends) or it gets a batch size in
proportion to its speed (`balance_batch_sizes`, dynamic batching). Afterwards all remaining
heterogeneity is network. Both functions are pure.
"""

from __future__ import annotations

import math


def suggest_sleep(compute_times):
    """
    Seconds each worker should sleep after computing so that all finish with the slowest.

    Parameters
    ----------
    compute_times : sequence of float
        Per worker: compute + compress + decompress seconds of its last iteration.

    Returns
    -------
    list of float
        `max(compute_times) - t` per worker (0 for the slowest).

    """
    times = [float(t) for t in compute_times]
    if not times or any(t < 0 or not math.isfinite(t) for t in times):
        raise ValueError(f'compute times must be finite and >= 0, got {compute_times!r}')
    slowest = max(times)
    return [slowest - t for t in times]


def balance_batch_sizes(seconds_per_sample, total_batch, min_batch=1):
    """
    Batch sizes proportional to worker speed, summing to `total_batch` (largest remainder).

    Parameters
    ----------
    seconds_per_sample : sequence of float
        Per worker: measured (or profiled) compute seconds per sample, > 0.
    total_batch : int
        Samples the fleet processes per iteration (the global batch).
    min_batch : int
        Lower bound per worker; default 1 (a worker with no data would only add staleness).

    Returns
    -------
    list of int
        Batch sizes; worker i then computes for about `batch[i] * seconds_per_sample[i]` s,
        which is the same for every worker up to rounding.

    """
    speeds = [1.0 / float(s) for s in seconds_per_sample]
    if not speeds or any(not math.isfinite(v) or v <= 0 for v in speeds):
        raise ValueError(f'seconds per sample must be finite and > 0: {seconds_per_sample!r}')
    if total_batch < min_batch * len(speeds):
        raise ValueError(f'total batch {total_batch} < {min_batch} x {len(speeds)} workers')
    ideal = [total_batch * v / sum(speeds) for v in speeds]
    sizes = [max(min_batch, int(math.floor(b))) for b in ideal]
    # Hand out what rounding left over (or take back what `min_batch` added), one sample at a
    # time, always to the worker whose compute time stays lowest (or from the highest).
    while sum(sizes) < total_batch:
        i = min(range(len(sizes)), key=lambda j: (sizes[j] + 1) / speeds[j])
        sizes[i] += 1
    while sum(sizes) > total_batch:
        i = max((j for j in range(len(sizes)) if sizes[j] > min_batch),
                key=lambda j: sizes[j] / speeds[j])
        sizes[i] -= 1
    return sizes
