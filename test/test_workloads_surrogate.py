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
"""Surrogate compute: a small real model carrying a big model's parameters as ballast."""

import pytest
from rog_ros import workloads
from rog_ros.sim.simulator import SimConfig, simulate
from rog_ros.workloads.eacol import _with_ballast
from rog_ros.workloads.surrogate import Ballasted, model_shapes
import torch

BALLAST = [(40, 30), (40,), (7, 3, 3, 3), (25, 13)]


def test_ballast_gradient_is_the_real_gradient_tiled():
    net = Ballasted(torch.nn.Linear(5, 3), BALLAST)
    x = torch.randn(8, 5)
    assert torch.equal(net(x), net.inner(x))          # the ballast is not in the forward pass
    torch.nn.functional.cross_entropy(net(x), torch.randint(0, 3, (8,))).backward()
    net.fill_surrogate_grads()
    real = torch.cat([p.grad.reshape(-1) for p in net.inner.parameters()])
    ballast = torch.cat([p.grad.reshape(-1) for p in net.ballast])
    assert ballast.numel() == sum(torch.Size(s).numel() for s in BALLAST)
    reps = ballast.numel() // real.numel() + 1
    assert torch.equal(ballast, real.repeat(reps)[:ballast.numel()])
    assert real.abs().sum() > 0
    # a second pass (after zero_grad) overwrites, never accumulates
    net.zero_grad(set_to_none=False)
    torch.nn.functional.cross_entropy(net(2 * x), torch.randint(0, 3, (8,))).backward()
    net.fill_surrogate_grads()
    real2 = torch.cat([p.grad.reshape(-1) for p in net.inner.parameters()])
    assert torch.equal(net.ballast[0].grad.reshape(-1)[:real2.numel()], real2)


def test_simulated_messages_carry_the_ballast_and_training_is_real():
    toy = workloads.get('toy')
    big = _ballasted_toy(toy)
    workloads.register('toy-ballast', lambda: big)
    try:
        rec = simulate(SimConfig(workload='toy-ballast', system='rog:2', workers=2,
                                 trace='indoors', iterations=12, evaluations=3))
    finally:
        workloads._FACTORIES.pop('toy-ballast', None)
    s = rec.summary()
    inner = sum(p.numel() for p in toy.make_model().parameters())
    assert s['params'] == inner + sum(torch.Size(sh).numel() for sh in BALLAST)
    assert s['message_bytes'] > s['params'] // 8            # 1 bit per element, ballast too
    assert rec.rows[-1]['accuracy'] > rec.rows[0]['accuracy'] + 0.05


def _ballasted_toy(toy):
    """Return the toy workload carrying BALLAST (as _with_ballast does for EACOL)."""
    toy._info.setdefault('classes', 4)
    toy._info.setdefault('what', 'toy')
    orig = model_shapes.__globals__['_SHAPES']
    orig[('test', 4)] = BALLAST
    from rog_ros.workloads import eacol
    eacol._MODELS['test-ballast'] = 'test'
    try:
        return _with_ballast(toy, 'test-ballast')
    finally:
        del eacol._MODELS['test-ballast']


def test_eacol_surrogate_has_convmlp_m_messages(tmp_path, monkeypatch):
    monkeypatch.setenv('ROG_CACHE_DIR', str(tmp_path))
    w = workloads.get('eacol', model='convmlp-m', surrogate=True, num_classes=6,
                      pretrain_samples=64, adapt_samples=96, eval_samples=16, pretrain_steps=1,
                      pretrain_batch=8, batch_size=8)
    d = w.describe()
    m = sum(torch.Size(s).numel() for s in model_shapes('m', 6))
    assert m == 16_948_804 - 94 * 513                    # ConvMLP-M with 6 classes
    small = sum(torch.Size(s).numel() for s in model_shapes('cpu', 6))
    assert d['parameters'] == m + small and small < m // 50
    assert w.describe()['surrogate_for'] == 'convmlp-m'
    # the simulator's budget for it: EACOL's, not the 300 of a 0.1 s/iteration workload
    assert w.adaptation_iterations == 80
    plain = workloads.get('eacol', num_classes=6, pretrain_samples=64, adapt_samples=96,
                          eval_samples=16, pretrain_steps=1, pretrain_batch=8, batch_size=8)
    assert not hasattr(plain, 'adaptation_iterations')
    with pytest.raises(ValueError, match='unknown EACOL model'):
        workloads.get('eacol', model='convmlp-xl', surrogate=True)
