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
An encoding refreshed from the cache is the encoding taken afresh, to the bit.

``EncodingCache`` re-encodes only the rows changed since its last encoding; a stale row left
in would send a robot bytes of another model, and no loss curve would show it at once. So the
bytes and row sums are compared exactly with a whole encoding, and every write the cache is
not told of must make it step aside.
"""

import pytest
from rog_ros.core import row_updates
from rog_ros.core.compress import make_codec
from rog_ros.core.encoding_cache import EncodingCache, rows_written
from rog_ros.core.row_updates import sub_rows_
from rog_ros.core.rows import RowLayout
import torch

SHAPES = [(8, 3, 3, 3), (8,), (16, 8, 3, 3), (16,), (40, 144), (10,), (7,), (30, 200), (5, 5)]


def _setup(dtype=torch.float32, seed=0):
    layout = RowLayout(SHAPES)
    codec = make_codec('row_sign')
    gen = torch.Generator().manual_seed(seed)
    p = torch.randn(layout.n_params, generator=gen).to(dtype)
    cache = EncodingCache(layout.n_rows)
    trs = layout.tensor_row_abs_sum(p)
    cache.store(codec.encode(layout, p, codec.scales(layout, p, trs), trs), trs, (p,))
    return layout, codec, p, cache, gen


def _fresh(layout, codec, p):
    trs = layout.tensor_row_abs_sum(p)
    return codec.encode(layout, p, codec.scales(layout, p, trs), trs), trs


def _change_rows(layout, p, cache, rows, gen):
    mask = torch.zeros(layout.n_rows, dtype=torch.bool)
    mask[rows] = True
    values = torch.randn(layout.rows_numel(rows), generator=gen).to(p.dtype)
    with rows_written([cache], (p,), lambda i: mask):
        sub_rows_(layout, p, rows, values)
    return mask


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_refreshing_the_changed_rows_gives_the_bits_of_a_whole_encoding(dtype):
    layout, codec, p, cache, gen = _setup(dtype)
    old = cache.rowbytes.clone()
    kept = cache.rowbytes
    rows = torch.tensor([0, 5, 40, 41, 90, layout.n_rows - 1])
    _change_rows(layout, p, cache, rows, gen)
    fresh = cache.stale_rows(layout, codec, (p,), None)
    assert torch.equal(fresh, rows)
    rowbytes, trs = cache.encode(layout, codec, p, fresh)
    want_bytes, want_trs = _fresh(layout, codec, p)
    assert torch.equal(rowbytes, want_bytes)
    assert torch.equal(trs, want_trs)
    assert not torch.equal(rowbytes, old)
    assert torch.equal(kept, old)          # the earlier buffer (a transfer's) is not written
    assert cache.stale_rows(layout, codec, (p,), None).numel() == 0
    assert (cache.hits, cache.rows_refreshed) == (1, rows.numel())


def test_only_the_needed_rows_are_refreshed_and_the_others_stay_stale():
    layout, codec, p, cache, gen = _setup()
    _change_rows(layout, p, cache, torch.tensor([3, 50, 60]), gen)
    need = torch.tensor([1, 2, 3, 60, 70])
    fresh = cache.stale_rows(layout, codec, (p,), need)
    assert fresh.tolist() == [3, 60]
    rowbytes, _ = cache.encode(layout, codec, p, fresh)
    want, _ = _fresh(layout, codec, p)
    widths = [4 + (g.length + 7) // 8 for g in layout.groups]
    got = [b for *_, b in layout.row_byte_blocks(rowbytes, widths, need)]
    exp = [b for *_, b in layout.row_byte_blocks(want, widths, need)]
    assert all(torch.equal(a, b) for a, b in zip(got, exp))
    assert cache.stale_rows(layout, codec, (p,), None).tolist() == [50]


def test_a_write_the_cache_was_not_told_of_drops_it():
    layout, codec, p, cache, gen = _setup()
    p[7] += 1.0                                      # no rows_written
    assert cache.stale_rows(layout, codec, (p,), None) is None
    _change_rows(layout, p, cache, torch.tensor([2]), gen)    # marked, but after the other
    assert cache.rowbytes is None
    assert cache.stale_rows(layout, codec, (p,), None) is None


def test_another_tensor_or_a_write_that_raised_drops_it():
    layout, codec, p, cache, gen = _setup()
    assert cache.stale_rows(layout, codec, (p.clone(),), None) is None
    mask = torch.zeros(layout.n_rows, dtype=torch.bool)
    with pytest.raises(RuntimeError):
        with rows_written([cache], (p,), lambda i: mask):
            p.add_(1.0)
            raise RuntimeError('write failed half way')
    assert cache.stale_rows(layout, codec, (p,), None) is None


def test_many_changed_rows_or_a_codec_with_tensor_scales_are_encoded_as_without_it():
    layout, codec, p, cache, gen = _setup()
    _change_rows(layout, p, cache, torch.arange(layout.n_rows // 2, layout.n_rows), gen)
    assert not row_updates.few_rows(layout, torch.arange(layout.n_rows // 2, layout.n_rows))
    assert cache.stale_rows(layout, codec, (p,), None) is None
    assert not EncodingCache.applies(layout, make_codec('scaled_sign'))
    assert not EncodingCache.applies(RowLayout(SHAPES, whole_model=True), codec)
    assert EncodingCache.applies(layout, codec)


def test_encode_rows_into_a_buffer_of_the_wrong_size_is_refused():
    layout, codec, p, cache, _ = _setup()
    trs = layout.tensor_row_abs_sum(p)
    with pytest.raises(ValueError, match='out must be uint8'):
        codec.encode_rows(layout, p, torch.tensor([1]), trs,
                          out=torch.zeros(3, dtype=torch.uint8))


@pytest.mark.parametrize('spec', ['rog:2#late_rows=1', 'rog:4'])
def test_a_run_with_the_cache_ends_with_the_bits_of_one_without(spec, monkeypatch):
    """Whole engine runs (late pushes, late pulls, follow-ups): identical models."""
    from rog_ros.protocol.policies import make_policy
    from rog_ros.sim.fault_fleet import quadratic_fleet

    def run(use_cache):
        if not use_cache:
            monkeypatch.setattr(EncodingCache, 'stale_rows', lambda *a, **k: None)
        harness, server, workers, _, _ = quadratic_fleet(
            spec.split('#')[0], n=3, iters=12, policy=make_policy(spec), seed=3,
            compute=(0.3, 0.3, 0.3), bandwidths=(0.4e6, 0.4e6, 0.03e6), latency=0.005)
        stats = harness.run()
        assert stats.error is None
        hits = sum(c.hits for c in server._encodings + [
            c for w in workers for c in w._encodings])
        return (server.w_srv.clone(), [w.w.clone() for w in workers],
                [w.residual.clone() for w in workers], hits)

    cached = run(True)
    plain = run(False)
    assert cached[3] > 0 and plain[3] == 0
    assert torch.equal(cached[0], plain[0])
    for a, b in zip(cached[1] + cached[2], plain[1] + plain[2]):
        assert torch.equal(a, b)


@pytest.mark.parametrize('spec', ['rog:4', 'flown:4#whole_model=0'])   # (FLOWN: slot grants)
def test_the_server_drops_the_encoding_of_a_worker_that_is_done(spec):
    """A done worker gets no delta pull again: its encoding (a model's bytes) is not kept."""
    from rog_ros.protocol.policies import make_policy
    from rog_ros.sim.fault_fleet import quadratic_fleet
    harness, server, workers, _, _ = quadratic_fleet(
        spec.split(':')[0], n=3, iters=8, policy=make_policy(spec), seed=1,
        compute=(0.3, 0.3, 0.3), bandwidths=(0.4e6, 0.4e6, 0.03e6), latency=0.005)
    stats = harness.run()
    assert stats.error is None and all(bool(s) for s in server.stopped)
    assert len(server._encodings) == 3
    if spec.startswith('rog'):          # late pulls: the caches served this run
        assert sum(c.hits for c in server._encodings) > 0
    assert all(c.rowbytes is None and c.trs is None for c in server._encodings)
    assert not bool(server._encodings_valid.any())
