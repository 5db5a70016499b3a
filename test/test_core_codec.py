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
"""DEFSGDM scaled sign, Identity, error feedback, framing and momentum preconditioning."""

import math

import pytest
from rog_ros.core.compress import frame, Identity, MomentumPreconditioner, ScaledSign, unframe
from rog_ros.core.compress.scaled_sign import (_pack_signbits_torch, pack_signbits,
                                               unpack_signs)
from rog_ros.core.rows import RowLayout
import torch

SHAPES = [(8, 3, 3, 3), (8,), (16, 8, 3, 3), (16,), (10, 144), (10,), (7,)]


@pytest.mark.parametrize('n', [1, 7, 8, 9, 1000, 4097])
def test_block_size_is_ceil_n_over_8_plus_scale(n):
    x = torch.randn(n)
    data = ScaledSign.pack_tensor(x)
    assert len(data) == math.ceil(n / 8) + 4
    y = ScaledSign.unpack_tensor(data, n)
    scale = x.abs().mean()
    assert torch.allclose(y, torch.where(x >= 0, scale, -scale), rtol=1e-5)


def test_row_aligned_encoding_size_and_roundtrip():
    layout = RowLayout(SHAPES)
    codec = ScaledSign()
    p = torch.randn(layout.n_params)
    p[3] = -0.0                                   # the sign bit decides, -0.0 is negative
    scales = codec.scales(layout, p)
    enc = codec.encode(layout, p, scales)
    assert enc.numel() == int(((layout.row_len + 7) // 8).sum())
    out = torch.empty_like(p)
    codec.decode(layout, enc, scales, out)
    assert torch.equal(out, codec.quantize(layout, p, scales))
    # value check: per tensor mean |p| with p's sign
    for v, q in zip(layout.views(p), layout.views(out)):
        s = v.abs().mean()
        assert torch.allclose(q, torch.copysign(s.expand_as(v), v), rtol=1e-6)


def test_whole_model_layout_gives_identical_bits():
    rows = RowLayout(SHAPES)
    whole = RowLayout(SHAPES, whole_model=True)
    codec = ScaledSign()
    tensors = [torch.randn(s) for s in SHAPES]
    p1, p2 = rows.flatten(tensors), whole.flatten(tensors)
    s1, s2 = codec.scales(rows, p1), codec.scales(whole, p2)
    assert torch.equal(s1, s2)
    q1, q2 = codec.quantize(rows, p1, s1), codec.quantize(whole, p2, s2)
    for a, b in zip(rows.views(q1), whole.views(q2)):
        assert torch.equal(a, b)


def test_pack_unpack_bits():
    x = torch.randn(5, 13)
    packed = pack_signbits(x)
    assert packed.shape == (5, 2)
    signs = unpack_signs(packed, 13)
    assert torch.equal(signs, torch.where(torch.signbit(x), -1.0, 1.0))


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize('length', [1, 7, 8, 9, 64, 100])
def test_pack_signbits_is_the_ieee_sign_bit(dtype, length):
    """
    Bit k of byte j is signbit(x[8j + k]), -0.0 and negative NaN included; pad bits 0.

    numpy packs on the CPU, torch alone elsewhere and for bfloat16: both give these bits.
    """
    gen = torch.Generator().manual_seed(length)
    x = torch.randn(6, length, generator=gen).to(dtype)
    x[0, 0] = -0.0
    x[-1, -1] = -torch.tensor(float('nan'))
    x[1, 0] = float('-inf')
    packed = pack_signbits(x)
    nb = (length + 7) // 8
    assert packed.shape == (6, nb) and packed.dtype == torch.uint8
    bits = (packed.unsqueeze(2).to(torch.int32) >> torch.arange(8)) & 1
    bits = bits.reshape(6, nb * 8)
    assert torch.equal(bits[:, :length].bool(), torch.signbit(x))
    assert not bits[:, length:].any()
    assert torch.equal(_pack_signbits_torch(x), packed)
    # a strided view packs as its contiguous copy does
    wide = torch.randn(6, 2 * length, generator=gen).to(dtype)
    assert torch.equal(pack_signbits(wide[:, ::2]), pack_signbits(wide[:, ::2].contiguous()))


def _reference_sign(layout, p):
    """Scaled sign computed independently of the codec: per tensor, sign(p) * mean |p|."""
    parts = []
    for v in layout.views(p):
        scale = v.abs().mean()
        parts.append(torch.where(v >= 0, scale, -scale))
    return layout.flatten(parts)


def _error_feedback_run(codec, steps=200):
    """Error feedback over random inputs; each step checked against independent values."""
    torch.manual_seed(1)
    layout = RowLayout(SHAPES)
    e = torch.zeros(layout.n_params, dtype=torch.float64)
    sum_in = torch.zeros_like(e)
    sum_out = torch.zeros_like(e)
    worst = 0.0
    for _ in range(steps):
        g = torch.randn(layout.n_params, dtype=torch.float64)
        p = g + e
        scales = codec.scales(layout, p)
        q = codec.quantize(layout, p, scales)
        # what the codec claims it sends is the scaled sign of p ...
        assert torch.allclose(q, _reference_sign(layout, p), rtol=1e-6, atol=0)
        # ... and exactly what a receiver decodes from the bytes it sends
        out = torch.empty_like(p)
        assert torch.equal(codec.decode(layout, codec.encode(layout, p, scales), scales, out), q)
        e = p - q
        sum_in += g
        sum_out += q
        worst = max(worst, float((sum_in - sum_out).abs().max()))
    return worst


def test_error_feedback_tracks_the_input_sum():
    # The decoded sum follows the input sum: the gap (the error buffer) stays bounded by a
    # few step sizes instead of growing with the 200 steps.
    assert _error_feedback_run(ScaledSign()) < 12.0


class _ScaleTooSmall(ScaledSign):
    """Planted bug: quantize and decode agree, but the magnitude is 10% short."""

    def quantize(self, layout, p, scales, out=None, row_mask=None):
        return super().quantize(layout, p, scales * 0.9, out, row_mask)

    def decode(self, layout, rowbytes, scales, out, row_mask=None, factor=1.0):
        return super().decode(layout, rowbytes, scales * 0.9, out, row_mask, factor)


class _DecodeDisagrees(ScaledSign):
    """Planted bug: the receiver decodes something else than the sender committed."""

    def decode(self, layout, rowbytes, scales, out, row_mask=None, factor=1.0):
        return super().decode(layout, rowbytes, scales, out, row_mask, -factor)


@pytest.mark.parametrize('codec', [_ScaleTooSmall(), _DecodeDisagrees()],
                         ids=['scale', 'decode'])
def test_error_feedback_check_catches_planted_codec_bugs(codec):
    with pytest.raises(AssertionError):
        _error_feedback_run(codec, steps=3)


def test_identity_is_exact():
    layout = RowLayout(SHAPES)
    codec = Identity(torch.float64)
    p = torch.randn(layout.n_params, dtype=torch.float64)
    out = torch.empty_like(p)
    codec.decode(layout, codec.encode(layout, p, codec.scales(layout, p)), None, out)
    assert torch.equal(out, p)
    assert int(codec.row_nbytes(layout).sum()) == 8 * layout.n_params


def test_zstd_framing():
    data = bytes(1000)
    framed = frame(data)
    assert len(framed) < 100 and unframe(framed) == data
    noise = torch.randint(0, 256, (1000,), dtype=torch.uint8).numpy().tobytes()
    assert unframe(frame(noise)) == noise and len(frame(noise)) == 1001
    assert unframe(frame(data, level=None)) == data
    with pytest.raises(ValueError):
        unframe(b'\x07abc')


def test_nesterov_momentum_and_weight_decay():
    pre = MomentumPreconditioner(3, momentum=0.9, nesterov=True, weight_decay=0.1)
    w = torch.tensor([1.0, 0.0, -1.0])
    g = torch.tensor([1.0, 2.0, 3.0])
    out = pre(g, w, torch.empty(3))
    # m = g; d = g + 0.9 m + 0.1/(1-0.9) w = 1.9 g + w
    assert torch.allclose(out, 1.9 * g + w)
    out = pre(g, w, torch.empty(3))
    # m = 0.9 g + g = 1.9 g; d = g + 0.9 * 1.9 g + w
    assert torch.allclose(out, g + 1.71 * g + w)
    with pytest.raises(ValueError):
        MomentumPreconditioner(3, momentum=1.0)


def test_momentum_changes_between_gradients_keep_the_buffer_or_create_one():
    w, g = torch.zeros(3), torch.tensor([1.0, 2.0, 3.0])
    pre = MomentumPreconditioner(3, momentum=0.0, weight_decay=0.0)
    assert pre.buf is None
    pre(g, w, torch.empty(3))
    pre.set_momentum(0.5, 0.0, like=w)           # from 0: a buffer appears, zeros
    assert torch.equal(pre.buf, torch.zeros(3))
    out = pre(g, w, torch.empty(3))             # m = g; d = g + 0.5 m
    assert torch.allclose(out, 1.5 * g)
    pre.set_momentum(0.8, 0.0, like=w)           # the buffer is kept
    out = pre(g, w, torch.empty(3))             # m = 0.8 g + g; d = g + 0.8 m
    assert torch.allclose(out, g + 0.8 * 1.8 * g)
    for bad in ((1.0, 0.0), (-0.1, 0.0), (0.5, -1.0)):
        with pytest.raises(ValueError):
            pre.set_momentum(*bad, like=w)
    assert pre.momentum == 0.8 and pre.weight_decay == 0.0    # a refused change changes nothing
