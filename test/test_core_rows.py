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
"""RowLayout: row counts, grouping, flat views and vectorised row-set operations."""

import pytest
from rog_ros.core.rows import RowLayout
import torch

SMALL = [(4, 3, 3, 3), (4,), (10, 4), (10,), (2, 2)]


def test_hand_counted_rows():
    # Prepare: conv 4 filters (4 rows of 27), bias (1 row), linear 10x4 (10 rows of 4),
    # bias (1 row of 10), 2x2 (2 rows of 2) -> 18 rows.
    layout = RowLayout(SMALL)
    # Assert
    assert layout.n_rows == 18
    assert layout.n_tensors == 5
    assert layout.n_params == 4 * 27 + 4 + 40 + 10 + 4
    assert sorted(layout.row_len.tolist()) == sorted([27] * 4 + [4] + [4] * 10 + [10] + [2] * 2)
    # groups are dense [rows, length] blocks covering everything once
    assert sum(g.n_rows * g.length for g in layout.groups) == layout.n_params
    assert [g.length for g in layout.groups] == sorted({2, 4, 10, 27})


def test_small_tensor_threshold_and_whole_model():
    # 108-element conv keeps its 4 rows; 40-, 10-, 4- and 4-element tensors become one row each
    assert RowLayout(SMALL, small_tensor_threshold=50).n_rows == 4 + 1 + 1 + 1 + 1
    whole = RowLayout(SMALL, whole_model=True)
    assert whole.n_rows == 1 and whole.row_len.tolist() == [whole.n_params]


def test_convmlp_m_rows():
    convmlp = pytest.importorskip('rog_ros.workloads.convmlp')
    model = convmlp.convmlp('m', num_classes=100)
    shapes = [tuple(p.shape) for p in model.parameters()]
    # DESIGN/spec count: with the artifact's small-tensor threshold of 1000 elements (the
    # policies' default) the 32x3x3x3 stem conv is one row; the pure dim-0 rule gives 31 more.
    layout = RowLayout(shapes, small_tensor_threshold=1000)
    assert layout.n_tensors == 226
    assert layout.n_rows == 33_307
    assert layout.n_params == 16_948_804
    assert int(layout.row_len.min()) == 9 and int(layout.row_len.max()) == 2304
    assert RowLayout(shapes).n_rows == 33_307 + 31


def test_views_flatten_roundtrip_and_bind():
    layout = RowLayout(SMALL)
    tensors = [torch.randn(s) for s in SMALL]
    flat = layout.flatten(tensors)
    for a, b in zip(tensors, layout.views(flat)):
        assert torch.equal(a, b)
    module = torch.nn.ParameterList([torch.nn.Parameter(t.clone()) for t in tensors])
    w = torch.empty(layout.n_params)
    layout.bind(module, w)
    w.add_(1.0)                                   # an update of the flat vector ...
    assert torch.equal(module[2].data, tensors[2] + 1.0)   # ... is the model


def test_gather_scatter_and_masks():
    layout = RowLayout(SMALL)
    flat = torch.randn(layout.n_params)
    rows = torch.tensor([0, 3, 5, 13, 17])
    values = layout.gather_rows(flat, rows)
    assert values.numel() == int(layout.row_len[rows].sum())
    out = torch.zeros_like(flat)
    layout.scatter_rows_(out, rows, values)
    mask = torch.zeros(layout.n_rows, dtype=torch.bool)
    mask[rows] = True
    expect = flat.clone()
    layout.mask_rows_(expect, mask)
    assert torch.equal(out, expect)
    # where_rows picks per row
    b = torch.full_like(flat, 7.0)
    res = layout.where_rows(mask, flat, b, out=torch.empty_like(flat))
    assert torch.equal(res, expect + layout.mask_rows_(b.clone(), ~mask))


def test_row_abs_sum_matches_definition():
    layout = RowLayout(SMALL)
    flat = torch.randn(layout.n_params)
    sums = layout.row_abs_sum(flat)
    starts = layout.row_start.tolist()
    lens = layout.row_len.tolist()
    ref = torch.stack([flat[s:s + n].abs().sum() for s, n in zip(starts, lens)])
    assert torch.allclose(sums, ref, rtol=1e-6)


def test_bad_input_is_rejected():
    with pytest.raises(ValueError):
        RowLayout([])
    with pytest.raises(ValueError):
        RowLayout([(3, 0)])
    layout = RowLayout(SMALL)
    with pytest.raises(ValueError):
        layout.views(torch.zeros(5))


def test_long_row_sums_do_not_depend_on_the_rows_beside_them_and_are_accurate():
    from rog_ros.core.rows import LONG_ROW, ROW_BLOCK
    length = 2 * ROW_BLOCK + 1000                   # two whole blocks and a remainder
    assert length >= LONG_ROW
    w = torch.randn(40, length, generator=torch.Generator().manual_seed(3))
    alone = RowLayout([(2, length)]).tensor_row_abs_sum(w[:2].reshape(-1).clone())
    among = RowLayout([(40, length), (7,)]).tensor_row_abs_sum(
        RowLayout([(40, length), (7,)]).flatten([w, torch.ones(7)]))
    assert torch.equal(alone, among[1:3])           # (the 7-element row sorts first)
    exact = w.double().abs().sum(dim=1)
    assert torch.allclose(among[1:].double(), exact, rtol=1e-5)
    whole = RowLayout([(40, length), (7,)], whole_model=True)
    assert torch.equal(whole.tensor_row_abs_sum(whole.flatten([w, torch.ones(7)])), among)
