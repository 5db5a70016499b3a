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
"""DeliveredVersions: bit-identical to the dense N x M x N ``sent`` table it replaces."""

from __future__ import annotations

import random

from protocol_fixtures import build
import pytest
from rog_ros.core.delivered import DeliveredVersions
from test_protocol_membership import outage
import torch


def _run(depth: int, seed: int, steps: int = 400, m: int = 13, n: int = 5):
    """Random pushes, downlinks (partial rows, partial membership), resets; compare."""
    rnd = random.Random(seed)
    dv = DeliveredVersions(m, n, depth=depth)
    v = torch.zeros(m, n, dtype=torch.int32)
    ref = torch.zeros(n, m, n, dtype=torch.int32)        # the old dense table
    clock = [0] * n
    open_dl = {}                                         # r -> (v_snap clone, event)
    for _ in range(steps):
        op = rnd.random()
        if op < 0.45:
            s = rnd.randrange(n)
            clock[s] += rnd.choice([0, 1, 1, 2])
            rows = torch.tensor(sorted(rnd.sample(range(m), rnd.randint(0, m))),
                                dtype=torch.int64)
            mask = torch.zeros(m, dtype=torch.bool)
            mask[rows] = True
            col = v[:, s].clone()
            expect = torch.where(mask, torch.clamp(col, min=clock[s]), col)
            dv.stamp(v, s, rows, clock[s])
            assert torch.equal(v[:, s], expect)
        elif op < 0.7:
            r = rnd.randrange(n)
            open_dl[r] = (v.clone(), dv.pin(('dl', r)))
        elif op < 0.95 and open_dl:
            r = rnd.choice(sorted(open_dl))
            v_snap, event = open_dl.pop(r)
            assert torch.equal(dv.pinned_snapshot(('dl', r), event), v_snap)
            some = torch.tensor(sorted(rnd.sample(range(m), 5)), dtype=torch.int64)
            assert torch.equal(dv.pinned_rows(('dl', r), event, some, v), v_snap[some])
            rows = torch.rand(m, generator=torch.Generator().manual_seed(rnd.randrange(99))) < 0.5
            active = torch.ones(n, dtype=torch.bool)
            if rnd.random() < 0.3:
                active[rnd.randrange(n)] = False
            keep = rows.unsqueeze(1) & active.unsqueeze(0)
            ref[r] = torch.where(keep, v_snap, ref[r])
            dv.commit(r, rows, ('dl', r), event, active)
            dv.unpin(('dl', r))
        else:
            r = rnd.randrange(n)
            ref[r].zero_()
            dv.reset(r)
            open_dl.pop(r, None)
            dv.unpin(('dl', r))
        for r in range(n):
            assert torch.equal(dv.sent(r), ref[r]), (r, depth, seed)
            new, oldest = dv.new_and_oldest(r, v)
            assert torch.equal(new, (v > ref[r]).any(dim=1))
            assert torch.equal(oldest, ref[r].min(dim=1).values)
    return dv


@pytest.mark.parametrize('depth', [2, 3, 8])
def test_matches_dense_table(depth):
    for seed in range(3):
        dv = _run(depth, seed)
        if depth == 2:
            assert dv.materialised_rows > 0          # the exception path ran, and was exact


def test_state_is_linear_in_workers():
    m = 1000
    sizes = [DeliveredVersions(m, n).nbytes() for n in (10, 20, 40)]
    assert sizes[1] / sizes[0] == pytest.approx(2.0, rel=0.01)
    assert sizes[2] / sizes[1] == pytest.approx(2.0, rel=0.01)
    # the dense table for 100 workers on ConvMLP-M's row count
    # (33,307 rows x 100 workers x 100 workers x 4 bytes = 1.33 GB); the history is ~10x less
    assert DeliveredVersions(33307, 100).nbytes() < 0.15e9


def test_restored_table_is_the_history():
    v0 = torch.arange(12, dtype=torch.int32).reshape(4, 3)
    dv = DeliveredVersions(4, 3, depth=2, v0=v0)
    assert torch.equal(dv.snapshot(dv.event), v0)
    with pytest.raises(ValueError):
        DeliveredVersions(4, 3, depth=1)


def test_engine_is_the_same_with_a_shallow_history():
    """The engine's decisions do not depend on how much history is kept (exact exceptions)."""
    results = []
    for depth in (2, 64):
        harness, server, _, _, _ = build('rog:2', n=3, iters=10, dtype=torch.float64,
                                         fault=outage(2, 0.4, 30.0), absence_timeout_s=1.0)
        server.delivered = DeliveredVersions(server.layout.n_rows, 3, depth=depth)
        harness.log_events = True
        harness.run(until=400)
        assert server.finished
        names = [(round(t, 9), node, a.name) for t, node, a in harness.stats.logs]
        results.append((server.w_srv.clone(), server.mirror.clone(), names,
                        server.delivered.materialised_rows))
        assert any(n[2] == 'worker_suspended' for n in names)
    (w2, m2, n2, mat2), (w64, m64, n64, mat64) = results
    assert mat2 > 0 and mat64 == 0
    assert torch.equal(w2, w64) and torch.equal(m2, m64) and n2 == n64


def test_bench_server_reports_growth_and_rejects_bad_input(capsys):
    from rog_ros.cli import main
    from rog_ros.experiments.bench_server import bench_server
    res = bench_server(workers=(2, 4), model='convmlp-s', iterations=1, row_params=2)
    assert [r['workers'] for r in res['runs']] == [2, 4]
    assert all(r['server_cpu_s_per_worker_iteration'] > 0 for r in res['runs'])
    assert res['runs'][1]['per_row_state_bytes'] < 2.5 * res['runs'][0]['per_row_state_bytes']
    # two sizes a factor 2 apart: no fit (4 and 5 workers once fitted -5.8 from noise)
    assert res['growth_exponent'] is None and res['at_most_linear'] is None and res['ok']
    fitted = bench_server(workers=(2, 4, 8), model='convmlp-s', iterations=1, row_params=2)
    assert isinstance(fitted['growth_exponent'], float)
    assert isinstance(fitted['at_most_linear'], bool)
    assert main(['bench', 'server', '--workers', '0']) == 2
    assert 'rog bench server:' in capsys.readouterr().err
