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
"""Tests of the MPCOL workload at a small size: policy size, new-space cost, adaptation."""
import pytest
from rog_ros import workloads
from rog_ros.workloads import mpcol as mpcol_module
from rog_ros.workloads.training import emulate_fleet
import torch

SMALL = {'pretrain_maps': 40, 'adapt_maps': 32, 'eval_maps': 24, 'per_map': 32, 'episodes': 16,
         'pretrain_steps': 150, 'pretrain_batch': 64}


@pytest.fixture(scope='module')
def mpcol(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv('ROG_CACHE_DIR', str(tmp_path_factory.mktemp('rog_cache')))
        yield workloads.get('mpcol', **SMALL)


def test_policy_has_the_papers_gradient_size(mpcol):
    d = mpcol.describe()

    assert d['parameters'] == 801_716
    assert d['gradient_mb_fp32'] == pytest.approx(3.2, rel=0.03)
    assert mpcol.compute_time_s == pytest.approx(0.1) and mpcol.batch_size == 64


def test_new_working_space_costs_accuracy(mpcol):
    d = mpcol.describe()
    live = mpcol.evaluate(mpcol.make_model())

    assert d['new_family'] == 'maze' and 'maze' not in d['known_families']
    assert d['known_accuracy'] > 0.85
    assert d['accuracy_before'] <= d['known_accuracy'] - 0.10
    assert live['accuracy'] == pytest.approx(d['accuracy_before'])


def test_workers_explore_disjoint_maps(mpcol):
    parts = mpcol.partition(4)
    maps = [set(mpcol._train_x[p, 0].tolist()) for p in parts]

    assert all(len(m) == 8 for m in maps)
    assert all(not (a & b) for i, a in enumerate(maps) for b in maps[i + 1:])


def test_batches_are_observations_with_optimal_move_masks(mpcol):
    x, y = next(mpcol.worker_batches(0, 4, seed=3))

    assert x.shape == (64, 2 * 17 * 17 + 4) and y.shape == (64, 4) and y.dtype == torch.bool
    assert y.any(1).all()
    loss = mpcol.loss(mpcol.make_model(), (x, y))
    assert loss.dim() == 0 and loss > 0


def test_fleet_adaptation_recovers_half_the_loss(mpcol):
    history = emulate_fleet(mpcol, n_workers=4, iterations=30, eval_every=30, seed=0)

    assert history[-1][1]['accuracy'] >= mpcol.target_accuracy


def test_rollout_metrics_are_rates(mpcol):
    before = mpcol.describe()['rollout_before']
    again = mpcol.rollout_metrics(mpcol.make_model())

    assert again == before
    assert 0 <= again['success_rate'] <= 1 and 0 <= again['collision_rate'] <= 1
    assert again['episodes'] == 16
    if again['success_rate'] > 0:
        assert again['path_length_ratio'] >= 1.0
    else:
        assert again['path_length_ratio'] is None


def test_make_model_leaves_global_rng_alone(mpcol):
    state = torch.random.get_rng_state()

    mpcol.make_model()

    assert torch.equal(torch.random.get_rng_state(), state)


def test_new_family_must_be_held_out():
    with pytest.raises(ValueError, match='must not be a pre-training family'):
        mpcol_module.make_mpcol(known=('maze', 'rooms'), new='maze')
