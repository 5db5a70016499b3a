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
"""RowScaledSign: DEFSGDM with one fp32 scale per tensor row, carried inside the row's bytes."""

import numpy as np
import pytest
from rog_ros.core.compress import make_codec, RowScaledSign, ScaledSign
from rog_ros.core.compress.row_sign import tensor_row_means
from rog_ros.core.rows import RowLayout
from rog_ros.protocol.messages import RowChunk
from rog_ros.protocol.transfer import check_chunk, MessageError
import torch

SHAPES = [(8, 3, 3, 3), (8,), (16, 8, 3, 3), (16,), (10, 144), (10,), (7,), (3, 20000)]


def _layouts():
    return [RowLayout(SHAPES), RowLayout(SHAPES, small_tensor_threshold=100),
            RowLayout(SHAPES, whole_model=True)]


def test_default_defsgdm_is_the_row_codec_and_the_tensor_one_stays_selectable():
    assert isinstance(make_codec('defsgdm'), RowScaledSign)
    assert isinstance(make_codec('defsgdm-tensor'), ScaledSign)
    assert RowScaledSign.codec_id not in (0, ScaledSign.codec_id)


@pytest.mark.parametrize('layout', _layouts(), ids=['rows', 'small-merged', 'whole'])
def test_roundtrip_is_bit_exact_and_each_tensor_row_has_its_own_mean(layout):
    codec = RowScaledSign()
    tensors = [torch.randn(s) * (1 + torch.arange(s[0]).view(-1, *[1] * (len(s) - 1)))
               for s in SHAPES]                  # rows of one tensor differ in magnitude
    p = layout.flatten(tensors)
    p[5] = -0.0
    scales = codec.scales(layout, p)
    enc = codec.encode(layout, p, scales)
    assert enc.numel() == int(codec.row_nbytes(layout).sum())
    n_tensor_rows = layout.n_tensor_rows
    assert enc.numel() == 4 * n_tensor_rows + sum(
        g.n_rows * ((g.length + 7) // 8) for g in layout.tensor_groups)
    out = codec.decode(layout, enc, scales, torch.empty_like(p))
    assert torch.equal(out, codec.quantize(layout, p, scales))     # e = p - C(p) is exact
    for v, q in zip(layout.views(p), layout.views(out)):
        rows = v.reshape(v.shape[0], -1) if v.dim() >= 2 and v.numel() >= \
            layout.small_tensor_threshold else v.reshape(1, -1)
        mean = rows.abs().mean(1, keepdim=True)
        assert torch.allclose(q.reshape(rows.shape), torch.copysign(mean.expand_as(rows), rows),
                              rtol=1e-5)


def test_row_subset_decodes_like_quantize_and_garbage_outside_the_mask_is_ignored():
    layout = RowLayout(SHAPES)
    codec = RowScaledSign()
    p = torch.randn(layout.n_params)
    scales = codec.scales(layout, p)
    enc = codec.encode(layout, p, scales)
    mask = torch.zeros(layout.n_rows, dtype=torch.bool)
    mask[::3] = True
    bad = enc.clone()
    offs = codec.row_byte_offset(layout)
    for r in torch.nonzero(~mask).reshape(-1)[:5].tolist():        # NaN scale bytes
        bad[offs[r]:offs[r] + 4] = torch.tensor([0, 0, 192, 127], dtype=torch.uint8)
    got = codec.decode(layout, bad, scales, torch.empty_like(p), row_mask=mask, factor=0.25)
    want = codec.quantize(layout, p, scales, row_mask=mask) * 0.25
    assert torch.isfinite(got).all()
    assert torch.allclose(got, want, rtol=1e-6, atol=0)
    assert bool((layout.row_abs_sum(got)[~mask] == 0).all())


def test_error_feedback_residual_stays_bounded_under_persistent_partial_sends():
    # The worker sends only the top quarter of rows each step; the residual of the rest must
    # not grow without bound (each row is sent within a few steps once it is large).
    layout = RowLayout([(64, 32), (32, 16)])
    codec = RowScaledSign()
    torch.manual_seed(0)
    residual = torch.zeros(layout.n_params)
    norms = []
    for _ in range(400):
        residual += torch.randn(layout.n_params)
        sums = layout.row_abs_sum(residual)
        mask = torch.zeros(layout.n_rows, dtype=torch.bool)
        mask[torch.argsort(sums, descending=True)[:layout.n_rows // 4]] = True
        residual -= codec.quantize(layout, residual, codec.scales(layout, residual),
                                   row_mask=mask)
        norms.append(float(residual.norm()))
    assert max(norms[200:]) < 1.5 * max(norms[:200])


def test_per_row_scales_track_the_rows_better_than_one_per_tensor():
    layout = RowLayout([(20, 64)])
    torch.manual_seed(1)
    p = torch.randn(20, 64) * torch.logspace(-3, 0, 20).view(-1, 1)
    p = layout.flatten([p])
    err_row = (RowScaledSign().quantize(layout, p, torch.ones(1)) - p).norm()
    tensor = ScaledSign()
    err_tensor = (tensor.quantize(layout, p, tensor.scales(layout, p)) - p).norm()
    assert err_row < 0.8 * err_tensor


def _chunk(layout, codec, payload, rows):
    return RowChunk(transfer_id=1, seq=0, sender=0, receiver=-1, kind=0, clock=1, flags=0,
                    codec=codec.codec_id,
                    row_ranges=np.array([rows[0], rows[-1] + 1], dtype=np.uint32),
                    frag_offset=0, tensor_ids=np.zeros(1, np.uint32),
                    scales=np.ones(1, np.float32), payload=payload)


@pytest.mark.parametrize('value', [float('nan'), float('inf'), -1.0])
def test_a_chunk_with_a_non_finite_or_negative_embedded_scale_is_refused(value):
    layout = RowLayout([(6, 16)])
    codec = RowScaledSign()
    p = torch.randn(layout.n_params)
    enc = codec.encode(layout, p, codec.scales(layout, p)).numpy().copy()
    nb = codec.row_nbytes(layout).numpy()
    rows = np.arange(layout.n_rows)
    ok = _chunk(layout, codec, enc.tobytes(), rows)
    check_chunk(ok, layout, codec, nb)
    enc[int(nb[0]) * 2:int(nb[0]) * 2 + 4] = np.frombuffer(np.float32(value).tobytes(), np.uint8)
    with pytest.raises(MessageError, match='row scale'):
        check_chunk(_chunk(layout, codec, enc.tobytes(), rows), layout, codec, nb)


def test_embedded_scales_are_the_tensor_row_means():
    layout = RowLayout(SHAPES, whole_model=True)
    codec = RowScaledSign()
    p = torch.randn(layout.n_params)
    enc = codec.encode(layout, p, codec.scales(layout, p))
    assert torch.equal(codec.embedded_scales(layout, enc), tensor_row_means(layout, p))
    assert not bool(codec.bad_rows(layout, enc).any())


def test_the_policy_chooses_the_codec_the_simulator_runs():
    # the ablation 'rog:4#tensor-scales' (rog reproduce's 'rog:4-tensor-scales') must really
    # run the per-tensor codec, and unknown codecs are refused up front
    from rog_ros.protocol.policies import layout_for, make_policy
    from rog_ros.sim.simulator import SimConfig, simulate
    from rog_ros import workloads
    shapes = [tuple(p.shape) for p in workloads.get('toy').make_model().parameters()]
    got = {}
    for spec, codec in (('rog:4', RowScaledSign()), ('rog:4#tensor-scales', ScaledSign())):
        rec = simulate(SimConfig(workload='toy', system=spec, workers=2, trace='clean',
                                 iterations=3))
        layout = layout_for(make_policy(spec), shapes)
        got[spec] = rec.extra['message_bytes']
        assert got[spec] == int(codec.row_nbytes(layout).sum())
    assert got['rog:4'] > got['rog:4#tensor-scales']          # the 4 scale bytes per row
    with pytest.raises(ValueError, match='codec must be one of'):
        make_policy('rog:4', codec='zstd')


def test_a_whole_model_row_with_a_bad_scale_in_a_fragment_is_not_delivered():
    # whole-model transfers arrive as fragments, checked once assembled: a NaN scale inside a
    # fragment keeps the row out of the delivered set and its chunks out of the final ack
    from rog_ros.protocol.transfer import IncomingTransfer, OutgoingTransfer
    layout = RowLayout(SHAPES, whole_model=True)
    codec = RowScaledSign()
    p = torch.randn(layout.n_params)
    scales = codec.scales(layout, p)

    def chunks():
        rowbytes = codec.encode(layout, p, scales)
        out = OutgoingTransfer(transfer_id=1, sender=0, receiver=-1, kind=0, clock=1,
                               layout=layout, codec=codec, rowbytes=rowbytes, scales=scales,
                               order=torch.arange(1), n_mandatory=1,
                               deadline=float('inf'), now=0.0, window=10 ** 6,
                               chunk_bytes=512)
        return [c for c in out.pump(0.0) if not c.flags & 1]

    def receive(cs):
        inc = IncomingTransfer(transfer_id=1, sender=0, kind=0, clock=1, layout=layout,
                               codec=codec, now=0.0)
        for c in cs:
            inc.on_chunk(c, 0.0)
        return inc.close()

    good = chunks()
    assert len(good) > 3
    mask, _, _, seqs = receive(good)
    assert bool(mask.all()) and len(seqs)
    bad = chunks()
    whole = codec.encode(layout, p, scales).numpy()
    widths = [4 + (g.length + 7) // 8 for g in layout.tensor_groups for _ in range(g.n_rows)]
    scale_at = np.cumsum([0] + widths)[:-1]            # byte offset of every embedded scale
    k, pos = next((k, int(x)) for k, c in enumerate(bad) if c.frag_offset > 0
                  for x in scale_at
                  if c.frag_offset <= x <= c.frag_offset + len(c.payload) - 4)
    off = int(bad[k].frag_offset)
    payload = bytearray(whole[off:off + len(bad[k].payload)].tobytes())
    payload[pos - off:pos - off + 4] = np.float32('nan').tobytes()
    bad[k].payload = bytes(payload)
    mask, _, _, seqs = receive(bad)
    assert not bool(mask.any())
    assert len(seqs) == 0                         # nothing acknowledged: the sender keeps it


@pytest.mark.parametrize('name', ['row_sign', 'scaled_sign', 'identity'])
@pytest.mark.parametrize('layout', _layouts(), ids=['rows', 'small-merged', 'whole'])
def test_encode_with_the_callers_row_sums_writes_the_same_bytes(name, layout):
    # the engines pass the row sums they computed for the schedule instead of a second pass
    codec = make_codec(name)
    p = layout.flatten([torch.randn(s) for s in SHAPES])
    sums = layout.tensor_row_abs_sum(p)
    scales = codec.scales(layout, p, sums)
    assert torch.equal(codec.encode(layout, p, scales, sums), codec.encode(layout, p, scales))
    if name == 'row_sign':       # the sums are used: others' sums give other bytes
        assert not torch.equal(codec.encode(layout, p, scales, 2 * sums),
                               codec.encode(layout, p, scales))
