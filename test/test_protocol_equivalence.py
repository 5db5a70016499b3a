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
"""Rog with MTA 1 and no deadline is SSP; SSP with S=0 is BSP; BSP + Identity is sync SGD."""

from protocol_fixtures import build
from rog_ros.protocol.policies import bsp, rog, ssp
import torch

BIG_CHUNKS = {'chunk_bytes': 1 << 24, 'window': 64, 'bandwidths': (1e15,) * 4,
              'compute': (0.10, 0.13, 0.17, 0.29)}


def final_params(harness, workers, layout):
    harness.run()
    return [[v.clone() for v in layout.views(w.w)] for w in workers]


def test_rog_with_mta_one_equals_ssp_bit_for_bit():
    for s in (1, 3):
        h1, _, w1, _, l1 = build('', policy=rog(s, mta_override=1.0, balance='none'),
                                 iters=15, **BIG_CHUNKS)
        h2, _, w2, _, l2 = build('', policy=ssp(s), iters=15, **BIG_CHUNKS)
        p1, p2 = final_params(h1, w1, l1), final_params(h2, w2, l2)
        for a, b in zip(p1, p2):
            for x, y in zip(a, b):
                assert torch.equal(x, y)
        assert h1.server.triggers == h2.server.triggers


def test_ssp_zero_equals_bsp():
    h1, s1, w1, _, l1 = build('', policy=ssp(0), iters=10, **BIG_CHUNKS)
    h2, s2, w2, _, l2 = build('', policy=bsp(), iters=10, **BIG_CHUNKS)
    for a, b in zip(final_params(h1, w1, l1), final_params(h2, w2, l2)):
        for x, y in zip(a, b):
            assert torch.equal(x, y)


def _sync_sgd_gap(plant=None):
    """Max |server model - plain synchronous SGD| after BSP + Identity; also the SGD model."""
    n, iters, lr, mu, wd = 4, 12, 0.2, 0.9, 5e-4
    harness, server, workers, _, layout = build(
        'bsp', n=n, iters=iters, codec='identity', dtype=torch.float64, lr=lr,
        momentum=mu, weight_decay=wd, **BIG_CHUNKS)
    if plant is not None:
        plant(harness, server, workers)
    # Reference: plain synchronous SGD with per-worker Nesterov momentum, averaged; its
    # gradients come from a second, independent copy of the problem (same seed).
    ref_harness, _, _, _, _ = build('bsp', n=n, iters=iters, codec='identity',
                                    dtype=torch.float64, **BIG_CHUNKS)
    ref_grad = ref_harness.grad_fn
    w = torch.zeros(layout.n_params, dtype=torch.float64)
    m = [torch.zeros_like(w) for _ in range(n)]
    for t in range(1, iters + 1):
        ds = []
        for r in range(n):
            g = ref_grad(r, w, t)
            m[r] = mu * m[r] + g
            ds.append(g + mu * m[r] + wd / (1 - mu) * w)
        w = w - lr / n * torch.stack(ds).sum(0)
    harness.run()
    # after the last push the server holds the final model; workers miss the last pull
    return float((server.w_srv - w).abs().max()), w


def test_bsp_identity_is_synchronous_sgd_with_averaged_gradients():
    gap, w = _sync_sgd_gap()
    assert gap <= 1e-12
    assert float(w.abs().max()) > 0.5          # a real trajectory, not two zero models


def _lose_one_update(harness, server, workers):
    """Planted bug: worker 3's 5th gradient is computed but never enters its residual."""
    w3 = workers[3]
    real = w3.on_compute_done

    def on_compute_done(grad, now):
        if w3.clock == 4:
            grad = torch.zeros_like(grad)
        return real(grad, now)
    w3.on_compute_done = on_compute_done


def _double_lr(harness, server, workers):
    """Planted bug: the server applies updates at 2 lr / N."""
    server.lr *= 2


def test_sync_sgd_check_catches_planted_bugs():
    for plant in (_lose_one_update, _double_lr):
        gap, _ = _sync_sgd_gap(plant)
        assert gap > 1e-6, plant.__name__
