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
Acceptance check of the built-in workloads: preparation time, accuracy drop and fleet recovery.

`python -m rog_ros.workloads.acceptance [--fresh] [--iterations 200] [mpcol eacol ...]` prints
one JSON object per workload: preparation time from scratch (with `--fresh`, in a temporary
cache; wall-clock and CPU seconds, which differ on a busy machine) and from the cache, accuracy
on the source domain (clean / known families), before adaptation, the target, and the accuracy
curve of a reference fleet (4 workers, synchronous SGD, averaged gradients;
`training.emulate_fleet`) with the first iteration at the target.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from rog_ros import workloads
from rog_ros.workloads.training import emulate_fleet, single_thread


def check(name, iterations=200, eval_every=10, n_workers=4, **options):
    """
    Measure one workload; returns a JSON-able dict (see module docstring).

    Parameters
    ----------
    name : str
        Registered workload name.
    iterations, eval_every, n_workers : int
        Reference fleet budget, evaluation period and size.
    **options
        Passed to the workload factory.

    """
    t0, c0 = time.perf_counter(), time.process_time()
    w = workloads.get(name, fresh=True, **options)
    prepared, prepared_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    w = workloads.get(name, fresh=True, **options)
    cached = time.perf_counter() - t0
    model = w.make_model()
    t0 = time.perf_counter()
    with single_thread():
        w.evaluate(model)
    evaluate_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    history, adapted = emulate_fleet(w, n_workers, iterations, seed=0, eval_every=eval_every,
                                     return_model=True)
    fleet_s = time.perf_counter() - t0
    reached = next((i for i, e in history if e['accuracy'] >= w.target_accuracy), None)
    d = w.describe()
    out = {'workload': name, 'options': {k: str(v) for k, v in options.items()},
           'prepare_s': round(prepared, 1), 'prepare_cpu_s': round(prepared_cpu, 1),
           'prepare_cached_s': round(cached, 2),
           'evaluate_s': round(evaluate_s, 3), 'fleet_s': round(fleet_s, 1),
           'parameters': d['parameters'], 'target_accuracy': w.target_accuracy,
           'accuracy_before': d['accuracy_before'],
           'source_accuracy': d.get('clean_accuracy', d.get('known_accuracy')),
           'target_reached_at_iteration': reached,
           'final_accuracy': history[-1][1]['accuracy'],
           'curve': [(i, round(e['accuracy'], 4)) for i, e in history]}
    if hasattr(w, 'rollout_metrics'):
        out['rollout_before'] = d['rollout_before']
        out['rollout_after'] = w.rollout_metrics(adapted)
    return out


def main(argv=None):
    """Run the acceptance check from the command line; prints JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0].replace('``', ''),
                                     allow_abbrev=False)
    parser.add_argument('names', nargs='*', default=['mpcol', 'eacol'])
    parser.add_argument('--iterations', type=int, default=200)
    parser.add_argument('--eval-every', type=int, default=10)
    parser.add_argument('--fresh', action='store_true',
                        help='build in an empty temporary cache (measures pre-training)')
    args = parser.parse_args(argv)
    tmp = tempfile.TemporaryDirectory() if args.fresh else None
    if tmp is not None:
        os.environ['ROG_CACHE_DIR'] = tmp.name
    try:
        for name in args.names:
            print(json.dumps(check(name, args.iterations, args.eval_every)), flush=True)
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == '__main__':
    main()
