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
``rog bench faults``: the fault sweeps of docs/faults.md as one command, with a verdict.

Robustness claims (exactly-once after any crash, every robot holding the model the server
holds for it, no run that never ends) are only as good as the runs they were checked on.
This runs the random crash and membership sweeps (``rog_ros.sim.fault_sweep``) over systems
and seeds, one process per core, and prints one JSON object: how many runs broke an
invariant, which, and the command that replays each. Exit status 1 when any did.
"""

from __future__ import annotations

import os
import sys
import time

from rog_ros.checks import max_seed, repeated
from rog_ros.children import run_in_processes
from rog_ros.sim.fault_sweep import sweep_case

MAX_SEEDS = 100_000     # (ten runs a seed by default: a week of a 2-core machine)

_COUNTS = ('workers', 'held_final_model', 'final_model_missed', 'worker_crashes',
           'server_crashes')


def parse_seeds(text: str, name: str = '--seeds') -> list:
    """
    Read seeds from ``'0-19'``, ``'3,7,9'`` or a mix (``'0-4,10'``); ValueError if bad.

    A seed listed twice (``0-2,1``) is refused as ``rog compare`` refuses one
    (``checks.repeated``): it was merged quietly, so the runs were fewer than the list said.
    """
    seeds = set()       # (a list grew with every repeat: 0-99999 given 80 times took 20 s)
    for part in (p.strip() for p in str(text).split(',')):
        if not part:
            continue
        if part.startswith('-') or '--' in part:    # was said to be 'not a number'
            raise ValueError(f'{name}: {part!r}: seeds are non-negative (0, 1, ...); give a '
                             'number or a range like 0-19')
        lo, sep, hi = part.partition('-')
        try:
            first, last = int(lo), int(hi if sep else lo)
        except ValueError:
            raise ValueError(f'{name}: {part!r} is not a number or a range like 0-19') from None
        if last < first:
            raise ValueError(f'{name}: {part!r} ends below its start; write the range low-high '
                             f'({last}-{first})')
        if last > max_seed():       # numpy's generators refused it: a 'broken' run
            raise ValueError(f'{name}: {part!r}: seeds go up to {max_seed()} (what torch and '
                             'numpy take)')
        if last - first >= MAX_SEEDS:
            raise ValueError(f'{name}: {part!r} is more than {MAX_SEEDS:,} seeds')
        again = _first_in(seeds, first, last)
        if again is not None:
            raise repeated(name, again)
        seeds.update(range(first, last + 1))
        if len(seeds) > MAX_SEEDS:
            # (each range was bounded, not their sum: 0-99999,100000-199999 passed)
            raise ValueError(f'{name}: {_short(text)!r} is more than {MAX_SEEDS:,} seeds')
    if not seeds:
        raise ValueError(f'{name}: none given')
    return sorted(seeds)


def _first_in(seeds: set, first: int, last: int):
    """Return the smallest seed of ``first..last`` already in ``seeds``, or None."""
    if len(seeds) < last - first + 1:       # the smaller side: at most MAX_SEEDS steps
        inside = [s for s in seeds if first <= s <= last]
        return min(inside) if inside else None
    return next((s for s in range(first, last + 1) if s in seeds), None)


def _short(text: str, most: int = 60) -> str:
    """Return ``text``, cut to ``most`` characters with '...' (an error line stays one line)."""
    text = str(text)
    return text if len(text) <= most else text[:most - 3] + '...'


def bench_faults(kinds, systems, seeds, final_model: bool = True, jobs: int | None = None,
                 progress: bool = True) -> dict:
    """Run every (kind, system, seed) case and summarise; see the module docstring."""
    cases = [(k, s, seed) for seed in seeds for k in kinds for s in systems]
    t0 = time.monotonic()
    n_jobs = max(1, min(jobs or os.cpu_count() or 1, len(cases)))
    bar = _progress_bar(len(cases)) if progress else None
    results = []
    calls = [(k, s, seed, final_model) for k, s, seed in cases]
    try:
        finished = (run_in_processes(sweep_case, calls, n_jobs) if n_jobs > 1
                    else ((i, sweep_case(*c)) for i, c in enumerate(calls)))
        for _, case in finished:
            results.append(case)
            _advance(bar, case)
    finally:
        if bar is not None:
            bar.close()
    return summarise(results, kinds, systems, seeds, final_model, n_jobs, time.monotonic() - t0)


def summarise(results, kinds, systems, seeds, final_model, jobs, wall_s) -> dict:
    """Build the JSON object of a sweep: totals per kind and system, every broken run."""
    order = {(k, s, seed): i for i, (k, s, seed) in
             enumerate((k, s, seed) for seed in seeds for k in kinds for s in systems)}
    results = sorted(results, key=lambda c: order.get((c['kind'], c['system'], c['seed']), 0))
    broken = [c for c in results if c['problems']]
    per_kind = {}
    for k in kinds:
        mine = [c for c in results if c['kind'] == k]
        per_kind[k] = {'runs': len(mine), 'broken': sum(bool(c['problems']) for c in mine),
                       **{name: sum(c[name] for c in mine) for name in _COUNTS}}
    per_system = {s: {'runs': sum(c['system'] == s for c in results),
                      'broken': sum(c['system'] == s for c in broken)} for s in systems}
    return {
        'benchmark': 'faults', 'kinds': list(kinds), 'systems': list(systems),
        'seeds': _seed_text(seeds), 'final_model': final_model, 'jobs': jobs,
        'runs': len(results), 'broken': len(broken), 'passed': not broken,
        'per_kind': per_kind, 'per_system': per_system,
        'broken_runs': [{'kind': c['kind'], 'system': c['system'], 'seed': c['seed'],
                         'problems': c['problems'],
                         'replay': (f"rog bench faults --kind {c['kind']} --systems "
                                    f"{c['system']} --seeds {c['seed']}"
                                    + ('' if final_model else ' --final-model off'))}
                        for c in broken],
        'wall_s': round(wall_s, 1),
    }


def _seed_text(seeds) -> str:
    """Seeds as the shortest ``--seeds`` text that gives them back."""
    parts, i = [], 0
    while i < len(seeds):
        j = i
        while j + 1 < len(seeds) and seeds[j + 1] == seeds[j] + 1:
            j += 1
        parts.append(str(seeds[i]) if i == j else f'{seeds[i]}-{seeds[j]}')
        i = j + 1
    return ','.join(parts)


def _progress_bar(total: int):
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc='rog bench faults', unit='run', file=sys.stderr)


def _advance(bar, case: dict) -> None:
    if bar is None:
        return
    bar.set_postfix_str(f"{case['kind']} {case['system']} seed {case['seed']}"
                        + (' BROKEN' if case['problems'] else ''))
    bar.update(1)
