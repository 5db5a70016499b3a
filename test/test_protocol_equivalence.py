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


def test_bsp_identity_is_synchronous_sgd_with_averaged_gradients():
    n, iters, lr, mu, wd = 4, 12, 0.2, 0.9, 5e-4
    harness, server, workers, _, layout = build(
        'bsp', n=n, iters=iters, codec='identity', dtype=torch.float64, lr=lr,
        momentum=mu, weight_decay=wd, **BIG_CHUNKS)
    grad_fn = harness.grad_fn
    # Reference: plain synchronous SGD with per-worker Nesterov momentum, averaged.
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
    assert torch.allclose(server.w_srv, w, rtol=0, atol=1e-12)
    assert grad_fn is not ref_grad
