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
``rog reproduce``: the paper's experiment set in the simulator, one report.

Parts (each a ``compare`` in its own sub-directory, so an interrupted run resumes; a run
whose configuration is identical to one another part holds, such as ``rog:4`` on
``outdoors`` in the main comparison, the thresholds and the ablations, is run once and copied
into the other parts, so that each part's directory holds all of its runs):

1. indoors and outdoors comparisons of BSP, SSP, FLOWN and Rog;
2. threshold sensitivity: Rog and SSP at S = 2..8, 20, 30, 40;
3. ablations of Rog-4: no importance ordering, no gradient magnitude, no MTA-time balancing,
   the paper's deadline without our compute-time floor, and one DEFSGDM scale per tensor
   (the artifact's codec) instead of one per tensor row;
4. EACOL with ConvMLP-M messages (2.16 MB, surrogate compute: ``rog_ros.workloads.surrogate``)
   on ``outdoors``: BSP, SSP-4, FLOWN-4 and Rog-4 in the network-bound regime the paper
   studies (device-profile compute 2.18 s per iteration).

``rog reproduce PAPER`` runs another reference paper's headline experiment instead (see
``PAPERS``; e.g. ``adacomp``, ``gsp`` in :mod:`rog_ros.experiments.reproduce_refs`).
"""

from __future__ import annotations

import os

from rog_ros.atomic import atomic_write_text

MAIN_SYSTEMS = ['bsp', 'ssp:4', 'ssp:20', 'flown:4', 'rog:4', 'rog:20']
THRESHOLDS = [2, 3, 4, 5, 6, 7, 8, 20, 30, 40]
ABLATIONS = {
    'rog:4': {},
    'rog:4-no-ordering': {'ordering': False},
    'rog:4-no-magnitude': {'use_magnitude': False},
    'rog:4-no-mta-time': {'balance': 'none'},
    'rog:4-paper-deadline': {'deadline_floor': 0.0, 'rtt_floor': 0.0},
    'rog:4-compute-floor': {'deadline_floor': 3.0, 'rtt_floor': 0.0},   # the earlier default floor
    'rog:4-tensor-scales': {'codec': 'defsgdm-tensor', 'chunk_scales': False},
}
EACOL_M_SYSTEMS = ['bsp', 'ssp:4', 'flown:4', 'rog:4']
EACOL_M_OPTIONS = {'model': 'convmlp-m', 'surrogate': True}
EACOL_M_ITERATIONS = None
"""None: the surrogate workload's own budget (``eacol.SURROGATE_ITERATIONS``, 80)."""


DEFAULT_SEEDS = {'rog': (0, 1, 2, 3, 4), 'adacomp': (0, 1, 2), 'gsp': (0,), 'aet': (0,),
                 'fleet': (0, 1, 2)}
"""Seeds each ``rog reproduce NAME`` runs without ``--seeds``; its help is written from them."""


def _paper(module: str, func: str, default_seeds=(0,)):
    def run(out, seeds=default_seeds, quick=False):
        import importlib
        return getattr(importlib.import_module(module), func)(out, seeds=seeds, quick=quick)
    return run


PAPERS = {
    'adacomp': _paper('rog_ros.experiments.reproduce_refs', 'reproduce_adacomp',
                      DEFAULT_SEEDS['adacomp']),
    'gsp': _paper('rog_ros.experiments.reproduce_refs', 'reproduce_gsp', DEFAULT_SEEDS['gsp']),
}
"""Reference papers ``rog reproduce PAPER`` knows: name -> ``run(out, seeds, quick)``."""


def reproduce(out: str, workloads=('mpcol',), seeds=DEFAULT_SEEDS['rog'], workers: int = 4,
              iterations: int | None = None, quick: bool = False, eacol_m: bool = True) -> str:
    """Run everything and write ``out/report.md``; returns its path."""
    # here, not at the top: rog's help reads DEFAULT_SEEDS and must not import torch
    from rog_ros.experiments.compare import compare
    from rog_ros.experiments.report_ratios import ratios_markdown
    from rog_ros.experiments.report_table import table_markdown
    os.makedirs(out, exist_ok=True)
    if quick:
        seeds = seeds[:1]
    sections = ['# rog reproduce', '',
                f'Simulated, {workers} workers, seeds {list(seeds)}. Each section links its own '
                'report with plots.', '']
    parts = [os.path.join(out, f'{wl}-{part}') for wl in workloads
             for part in ('indoors', 'outdoors', 'thresholds', 'ablations')]
    parts += [os.path.join(out, 'eacol-convmlp-m-outdoors')] if eacol_m else []

    def run_part(d, wl, trace, systems, iterations, **options):
        """Compare in part ``d``, copying runs the other parts hold of the same configuration."""
        return compare(wl, trace, systems, workers, list(seeds), d, iterations,
                       reuse_from=parts, prefix=f'reproduce: {os.path.basename(d)}', **options)
    for wl in workloads:
        for trace in ('indoors', 'outdoors'):
            d = os.path.join(out, f'{wl}-{trace}')
            res = run_part(d, wl, trace, MAIN_SYSTEMS, iterations, title=f'{wl} {trace}')
            sections += [f'## {wl}, {trace}', '', table_markdown(res['systems']), '',
                         ratios_markdown(res['systems']), '',
                         f'[details]({os.path.relpath(d, out)}/report.md)', '']
        thresholds = THRESHOLDS[:4] + [20] if quick else THRESHOLDS
        systems = [f'rog:{s}' for s in thresholds] + [f'ssp:{s}' for s in thresholds]
        d = os.path.join(out, f'{wl}-thresholds')
        res = run_part(d, wl, 'outdoors', systems, iterations,
                       title=f'{wl} threshold sensitivity')
        sections += [f'## {wl}: threshold sensitivity (outdoors)', '',
                     table_markdown(res['systems']), '',
                     f'[details]({os.path.relpath(d, out)}/report.md)', '']
        d = os.path.join(out, f'{wl}-ablations')
        # 'rog:4#name' runs rog:4 with the ablation's policy overrides, labelled 'name'; the
        # baseline is plain rog:4, the very run of the main comparison (copied, not rerun)
        specs = {k: k if k == 'rog:4' else f'rog:4#{k}' for k in ABLATIONS}
        res = run_part(d, wl, 'outdoors', list(specs.values()), iterations,
                       overrides={specs[k]: v for k, v in ABLATIONS.items()},
                       labels={spec: k for k, spec in specs.items()}, title=f'{wl} ablations')
        sections += [f'## {wl}: ablations (outdoors)', '', table_markdown(res['systems']), '',
                     f'[details]({os.path.relpath(d, out)}/report.md)', '']
    if eacol_m:
        d = os.path.join(out, 'eacol-convmlp-m-outdoors')
        res = run_part(d, 'eacol', 'outdoors', EACOL_M_SYSTEMS,
                       iterations or EACOL_M_ITERATIONS, workload_options=EACOL_M_OPTIONS,
                       title='eacol, ConvMLP-M messages (surrogate compute), outdoors')
        sections += ['## eacol with ConvMLP-M messages, outdoors', '',
                     'convmlp-cpu trains for real and carries ConvMLP-M as ballast '
                     '(2.16 MB messages, 33.5 k rows); see rog_ros/workloads/surrogate.py.',
                     '', table_markdown(res['systems']), '', ratios_markdown(res['systems']),
                     '', f'[details]({os.path.relpath(d, out)}/report.md)', '']
    path = os.path.join(out, 'report.md')
    atomic_write_text(path, '\n'.join(sections))
    return path


def _aet(out, quick=False, seeds=DEFAULT_SEEDS['aet'], **_ignored):
    from rog_ros.experiments.repro_aet import reproduce_aet
    return reproduce_aet(out, quick=quick, seeds=tuple(seeds))


def _fleet(out, quick=False, seeds=DEFAULT_SEEDS['fleet'], **_ignored):
    from rog_ros.experiments.repro_fleet import reproduce_fleet
    return reproduce_fleet(out, quick=quick, seeds=tuple(seeds))


REPRODUCTIONS = {
    'rog': lambda out, quick=False, seeds=DEFAULT_SEEDS['rog'], workloads=('mpcol',), workers=4,
    iterations=None, eacol_m=True: reproduce(out, workloads, seeds, workers, iterations, quick,
                                             eacol_m=eacol_m),
    'aet': _aet,
    'fleet': _fleet,
    **PAPERS,
}
"""``rog reproduce NAME``: name -> function(out, quick=, seeds=, **options) -> report path."""
