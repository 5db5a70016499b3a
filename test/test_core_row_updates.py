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
Applying a transfer's delivered rows alone gives the bits the whole-model kernels give.

A late push or pull carries a chunk or two; the engines decode and apply those rows only
(``rog_ros.core.row_updates``). Any difference in the last bit would make the simulator's runs
depend on how many rows a transfer happened to carry, so equality here is exact.
"""

import pytest
from rog_ros.core import row_updates
from rog_ros.core.compress import Identity, make_codec
from rog_ros.core.rows import RowLayout
import torch

SHAPES = [(8, 3, 3, 3), (8,), (16, 8, 3, 3), (16,), (10, 144), (10,), (7,), (3, 20000), (5, 5)]
CODECS = ['identity', 'scaled_sign', 'row_sign']


def _codec(name, dtype):
    return Identity(dtype) if name == 'identity' else make_codec(name)


def _bits(x):
    return x.view(torch.int64 if x.dtype == torch.float64 else torch.int32)


def _encoded(codec, layout, p, per_row, gen):
    trs = layout.tensor_row_abs_sum(p)
    if per_row:
        scales = torch.rand(layout.n_rows, generator=gen) + 0.5
    else:
        scales = codec.scales(layout, p, trs)
    return trs, scales, codec.encode(layout, p, scales, trs)


@pytest.mark.parametrize('name', CODECS)
@pytest.mark.parametrize('threshold', [0, 100])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
@pytest.mark.parametrize('per_row', [False, True])
def test_decode_and_quantize_of_some_rows_equal_the_whole_model_kernels(name, threshold,
                                                                        dtype, per_row):
    if per_row and name == 'identity':
        pytest.skip('the identity codec has no scales')
    gen = torch.Generator().manual_seed(threshold + 7 * per_row)
    layout = RowLayout(SHAPES, small_tensor_threshold=threshold)
    codec = _codec(name, dtype)
    p = torch.randn(layout.n_params, generator=gen, dtype=dtype)
    p[3] = -0.0
    trs, scales, enc = _encoded(codec, layout, p, per_row, gen)
    for trial in range(12):
        mask = torch.rand(layout.n_rows, generator=gen) < (0.05, 0.3, 0.9)[trial % 3]
        rows = torch.nonzero(mask).reshape(-1)
        factor = 0.37 if trial % 2 else 1.0
        full = codec.decode(layout, enc, scales, torch.empty_like(p), row_mask=mask,
                            factor=factor, per_row=per_row)
        some = codec.decode_rows(layout, enc, scales, rows, dtype, factor=factor,
                                 per_row=per_row)
        assert torch.equal(_bits(layout.gather_rows(full, rows)), _bits(some))
        q = codec.quantize(layout, p, scales, row_mask=mask, per_row=per_row,
                           tensor_row_sums=trs if trial % 3 else None)
        qs = codec.quantize_rows(layout, p, scales, rows, per_row=per_row,
                                 tensor_row_sums=trs if trial % 2 else None)
        assert torch.equal(_bits(layout.gather_rows(q, rows)), _bits(qs))


@pytest.mark.parametrize('most', [False, True])
def test_applying_delivered_rows_changes_exactly_what_the_whole_model_path_changes(most):
    gen = torch.Generator().manual_seed(1)
    layout = RowLayout(SHAPES)
    codec = make_codec('row_sign')
    p = torch.randn(layout.n_params, generator=gen)
    _, scales, enc = _encoded(codec, layout, p, False, gen)
    mask = torch.zeros(layout.n_rows, dtype=torch.bool)
    if most:
        mask[1:] = True           # all rows but one: the whole-model kernels
    else:
        mask[[2, 9, 30]] = True   # a few rows: alone
    rows, values = row_updates.decode_delivered(codec, layout, enc, scales, mask,
                                                torch.empty_like(p), factor=0.25)
    assert (rows is None) == most
    w = torch.randn(layout.n_params, generator=gen)
    expected = w - codec.decode(layout, enc, scales, torch.empty_like(p), row_mask=mask,
                                factor=0.25)
    got = row_updates.sub_rows_(layout, w.clone(), rows, values)
    assert torch.equal(_bits(got), _bits(expected))
    ledger = torch.zeros(layout.n_params, dtype=torch.float64)
    row_updates.add_rows_(layout, ledger, rows, values, alpha=0.5)
    untouched = ~torch.repeat_interleave(mask, layout.row_len)
    assert bool((ledger[untouched] == 0).all())
    assert torch.allclose(ledger, 0.5 * (w - expected).to(torch.float64), rtol=1e-6)


def test_a_few_rows_are_applied_alone_and_many_or_whole_model_rows_are_not():
    layout = RowLayout(SHAPES)
    few = torch.zeros(layout.n_rows, dtype=torch.bool)
    few[:3] = True
    assert torch.equal(row_updates.delivered_rows(layout, few), torch.arange(3))
    assert row_updates.delivered_rows(layout, torch.ones(layout.n_rows, dtype=torch.bool)) is None
    whole = RowLayout(SHAPES, whole_model=True)
    assert row_updates.delivered_rows(whole, torch.ones(1, dtype=torch.bool)) is None
    first = torch.zeros(1, dtype=torch.int64)
    with pytest.raises(ValueError, match='row layout'):
        make_codec('row_sign').decode_rows(whole, torch.zeros(8, dtype=torch.uint8),
                                           torch.ones(len(SHAPES)), first, torch.float32)


def test_row_byte_blocks_refuse_an_encoding_of_another_size():
    layout = RowLayout(SHAPES)
    codec = make_codec('scaled_sign')
    widths = [(g.length + 7) // 8 for g in layout.groups]
    enc = torch.zeros(int(codec.row_nbytes(layout).sum()) + 1, dtype=torch.uint8)
    with pytest.raises(ValueError, match='encoded bytes'):
        list(layout.row_byte_blocks(enc, widths, torch.arange(2)))


@pytest.mark.parametrize('spec', ['rog:2#late_rows=1', 'rog:4'])
def test_a_run_applying_rows_alone_ends_with_the_bits_of_whole_model_decoding(spec, monkeypatch):
    from rog_ros.protocol.policies import make_policy
    from rog_ros.sim.fault_fleet import quadratic_fleet

    def run(fraction):
        monkeypatch.setattr(row_updates, 'SUBSET_FRACTION', fraction)
        counts = {'decode_rows': 0, 'encode_rows': 0}
        for name in counts:
            monkeypatch.setattr(type(codec), name, counted(name, counts))
        harness, server, workers, _, _ = quadratic_fleet(
            spec.split('#')[0], n=3, iters=12, policy=make_policy(spec), seed=3,
            compute=(0.3, 0.3, 0.3), bandwidths=(0.4e6, 0.4e6, 0.03e6), latency=0.005)
        stats = harness.run()
        assert stats.error is None
        return (server.w_srv.clone(), [w.w.clone() for w in workers],
                [w.residual.clone() for w in workers], counts)

    codec = make_codec('row_sign')
    plain = {name: getattr(type(codec), name) for name in ('decode_rows', 'encode_rows')}

    def counted(name, counts):
        def call(self, *args, **kwargs):
            counts[name] += 1
            return plain[name](self, *args, **kwargs)
        return call

    whole = run(0.0)            # every transfer decoded and encoded as a whole model
    alone = run(1.01)           # every transfer's rows alone where they can be
    assert whole[3] == {'decode_rows': 0, 'encode_rows': 0}
    assert alone[3]['decode_rows'] > 0 and alone[3]['encode_rows'] > 0
    assert torch.equal(_bits(whole[0]), _bits(alone[0]))
    for a, b in zip(whole[1] + whole[2], alone[1] + alone[2]):
        assert torch.equal(_bits(a), _bits(b))


@pytest.mark.parametrize('changed', [False, True])
def test_a_push_commit_uses_the_push_row_sums_only_while_the_residual_is_unchanged(changed):
    import numpy as np
    from rog_ros.sim.fault_fleet import quadratic_fleet
    _, _, workers, _, layout = quadratic_fleet('rog:4', n=2, iters=3)
    w = workers[0]
    w.residual.copy_(torch.randn(layout.n_params, generator=torch.Generator().manual_seed(5)))
    w._start_push(0.0)
    if changed:      # (no engine path does this today: the guard keeps it exact if one does)
        w.residual.mul_(3.0)
    p = w.residual.clone()
    delivered = np.arange(2, dtype=np.int64)
    mask = torch.zeros(layout.n_rows, dtype=torch.bool)
    mask[:2] = True
    expected = p - w.codec.quantize(layout, p, w._push_scales, row_mask=mask,
                                    per_row=w._push_per_row)
    w._commit_push(delivered, w.push)
    assert torch.equal(_bits(w.residual), _bits(expected))


@pytest.mark.parametrize('threshold', [0, 100])
def test_encoding_some_rows_writes_their_bytes_as_the_whole_encoding_and_zeros_elsewhere(
        threshold):
    gen = torch.Generator().manual_seed(threshold)
    layout = RowLayout(SHAPES, small_tensor_threshold=threshold)
    codec = make_codec('row_sign')
    assert codec.encodes_rows_alone and not make_codec('scaled_sign').encodes_rows_alone
    p = torch.randn(layout.n_params, generator=gen)
    full_sums = layout.tensor_row_abs_sum(p)
    full = codec.encode(layout, p, codec.scales(layout, p), full_sums)
    offset = codec.row_byte_offset(layout)
    width = codec.row_nbytes(layout)
    for trial in range(6):
        rows = torch.nonzero(torch.rand(layout.n_rows, generator=gen) < 0.2).reshape(-1)
        sums = layout.tensor_row_abs_sum_of(p, rows)
        assert torch.equal(sums[rows], full_sums[rows])
        assert int(torch.count_nonzero(sums)) <= rows.numel()
        some = codec.encode_rows(layout, p, rows, sums)
        assert some.numel() == full.numel()
        picked = torch.zeros(full.numel(), dtype=torch.bool)
        for r in rows.tolist():
            picked[int(offset[r]):int(offset[r] + width[r])] = True
        assert torch.equal(some[picked], full[picked])
        assert not bool(some[~picked].any())
