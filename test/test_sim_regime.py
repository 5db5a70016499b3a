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
Reduced version of the paper's comparison: MPCOL on the outdoors preset, 4 workers.

The regime must be network-bound (BSP spends >= 3x its compute on communication and
stalls), and Rog-4 must reach the target in well under half the time of SSP-4 and BSP.
"""

import pytest

from rog_ros.sim.simulator import SimConfig, simulate
import torch


def _draws_as_calibrated() -> bool:
    """Tell whether this torch draws what the pinned one does (MPCOL's maps come from it)."""
    g = torch.Generator().manual_seed(0)
    return torch.multinomial(torch.ones(64), 6, generator=g).tolist() == [58, 47, 41, 61, 22, 33]


# One seed of 100 iterations, its bounds calibrated on the data the pinned torch generates:
# torch 2.0.1 (the Jetsons') samples without replacement otherwise, so MPCOL's maps differ
# (the shipped start does not) and on them no system reaches the target in 100 iterations.
# The 5-seed comparisons of docs/scheduling.md are the claim; this is their smoke test.
pytestmark = pytest.mark.skipif(
    not _draws_as_calibrated(),
    reason=f'torch {torch.__version__} draws other MPCOL maps than the pinned torch 2.13 '
           'that calibrated these bounds')


@pytest.fixture(scope='module')
def results():
    out = {}
    for system in ('bsp', 'ssp:4', 'rog:4'):
        cfg = SimConfig(workload='mpcol', system=system, workers=4, trace='outdoors', seed=0,
                        iterations=100)
        out[system] = simulate(cfg).summary()
    return out


def test_regime_is_network_bound(results):
    assert results['bsp']['network_to_compute_ratio'] >= 3.0


def test_time_to_target_ordering(results):
    t = {k: v['time_to_target_s'] for k, v in results.items()}
    assert None not in t.values(), t
    # Rog well ahead of both (measured 12.6 s against 61.5 / 65.8 on an AMD EPYC, 8.7 s
    # against 50.1 / 65.8 on an Intel Xeon: another CPU, other floats from pre-training on).
    # SSP and BSP are close in the 5-seed median; their order on one seed is not a property
    # (it flips between those two machines), so it is not tested
    assert t['rog:4'] < 0.5 * min(t['ssp:4'], t['bsp']), t


def test_rog_iterates_faster_and_keeps_accuracy(results):
    rog, ssp = results['rog:4'], results['ssp:4']
    # deadline_floor 3 (the default since issue 10) sends more optional rows per iteration
    # than 1 did (0.64x SSP's s/iteration): fewer iterations to the target, BSP's accuracy
    # (docs/scheduling.md); measured here 0.84x
    assert rog['s_per_iteration'] < 0.9 * ssp['s_per_iteration']
    assert rog['stall_time_s'] < ssp['stall_time_s']
    assert rog['final_accuracy'] > ssp['final_accuracy'] - 0.02
