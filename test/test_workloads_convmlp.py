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
"""Tests of the ConvMLP models: exact parameter, tensor and row counts, shapes, determinism."""
import pytest
from rog_ros.workloads.convmlp import convmlp, convmlp_small_cpu
import torch


def _rows(model, min_row_elements=0):
    """Row count under the DESIGN section 4 rule (dim-0 slices; small tensors one row)."""
    params = list(model.parameters())
    return sum(p.shape[0] if p.dim() >= 2 and p.numel() >= min_row_elements else 1
               for p in params)


@pytest.fixture(scope='module')
def convmlp_m():
    return convmlp('m', num_classes=100)


@pytest.mark.parametrize('size, expected', [
    # specs/rog.md section 8.1: counts of the reference implementation with a 100-class head.
    ('s', 8_561_220),
    ('l', 42_036_340),
])
def test_parameter_counts_s_l(size, expected):
    model = convmlp(size, num_classes=100)

    assert sum(p.numel() for p in model.parameters()) == expected


def test_convmlp_m_counts_tensors_and_rows(convmlp_m):
    params = list(convmlp_m.parameters())
    row_lengths = [p[0].numel() if p.dim() >= 2 else p.numel() for p in params]

    assert sum(p.numel() for p in params) == 16_948_804
    assert len(params) == 226
    # The artifact's 33,307 rows: tensors under 1000 elements are one row (DESIGN section 4).
    assert _rows(convmlp_m, min_row_elements=1000) == 33_307
    # The bare dim-0 rule splits the (32, 3, 3, 3) tokenizer conv into 32 more rows.
    assert _rows(convmlp_m) == 33_338
    assert min(row_lengths) == 9
    assert max(row_lengths) == 2304


def test_head_size_changes_count_by_head_only():
    delta = (sum(p.numel() for p in convmlp('s', num_classes=1000).parameters())
             - sum(p.numel() for p in convmlp('s', num_classes=100).parameters()))

    assert delta == 900 * (512 + 1)


def test_forward_shape_and_eval_determinism(convmlp_m):
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    convmlp_m.eval()

    with torch.no_grad():
        out = convmlp_m(x)
        assert out.shape == (2, 100)
        assert torch.equal(out, convmlp_m(x))


def test_same_seed_same_weights_across_sizes():
    for size in ('s', 'cpu'):
        a, b = convmlp(size, num_classes=10, seed=5), convmlp(size, num_classes=10, seed=5)
        assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_small_cpu_variant_is_small_and_seeded():
    a, b, c = convmlp_small_cpu(20, seed=1), convmlp_small_cpu(20, seed=1), convmlp_small_cpu(20)
    n = sum(p.numel() for p in a.parameters())

    assert 200_000 < n < 400_000
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters()))
    assert a(torch.zeros(3, 3, 32, 32)).shape == (3, 20)


def test_batchnorm_statistics_frozen_in_training_mode():
    model = convmlp_small_cpu(10)
    model.train()
    bn = next(m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d))
    before = bn.running_mean.clone()

    model(torch.randn(8, 3, 32, 32) * 5 + 3)

    assert model.training and not bn.training
    assert torch.equal(bn.running_mean, before)
