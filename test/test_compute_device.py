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
Gradients computed on a device copy of the flat model equal the bound CPU path's, bit for bit.

The GPU path (``DeviceGradients`` with a copy) is forced on the CPU here, where no GPU exists:
everything but the device string is the code a Jetson runs.
"""

from collections import namedtuple

import pytest
from rog_ros.core.rows import RowLayout
from rog_ros.nodes.compute_device import DeviceGradients, resolve_device, to_device
import torch


def _model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8),
                               torch.nn.ReLU(), torch.nn.Linear(8, 3))


def _loss(model, batch):
    inputs, targets = batch
    return torch.nn.functional.cross_entropy(model(inputs), targets)


def test_the_copy_path_gives_the_bound_paths_gradients_as_the_model_moves():
    grads = {True: [], False: []}
    gen = torch.Generator().manual_seed(3)
    batches = [(torch.randn(5, 6, generator=gen), torch.randint(0, 3, (5,), generator=gen))
               for _ in range(4)]
    runs = {}
    for copy in (False, True):
        model = _model(0)
        layout = RowLayout([tuple(p.shape) for p in model.parameters()])
        flat = layout.flatten([p.detach() for p in model.parameters()]).clone()
        runs[copy] = DeviceGradients(model, layout, flat, torch.device('cpu'), copy=copy)
    for batch in batches:
        for copy, run in runs.items():
            grad, loss = run.compute(_loss, batch)
            grads[copy].append((grad.clone(), loss))
            run.flat.sub_(0.1 * grad)          # the engine moves the model between steps
    # Assert: the copy path reads the engine's vector at each computation (not a stale copy)
    for (g0, l0), (g1, l1) in zip(grads[False], grads[True]):
        assert torch.equal(g0, g1) and l0 == l1
    assert runs[True].work is not runs[True].flat and runs[False].work is runs[False].flat
    assert grads[True][0][0].device.type == 'cpu'
    assert not torch.equal(grads[True][0][0], grads[True][-1][0])


def test_to_device_moves_tensors_in_nested_batches():
    Pair = namedtuple('Pair', 'x y')
    batch = {'a': (torch.ones(2), [torch.zeros(1), 'label']), 'b': Pair(torch.ones(1), 3)}
    moved = to_device(batch, torch.device('cpu'))
    assert isinstance(moved['b'], Pair) and moved['b'].y == 3
    assert moved['a'][1][1] == 'label' and torch.equal(moved['a'][0], torch.ones(2))


def test_auto_is_the_cpu_without_cuda_and_cuda_is_refused_clearly(monkeypatch):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    assert resolve_device('auto') == torch.device('cpu')
    assert resolve_device(' CPU ') == torch.device('cpu')
    with pytest.raises(ValueError, match='sees no CUDA device .*use auto or cpu'):
        resolve_device('cuda')
    for bad in ('gpu0', 'mps', ''):
        with pytest.raises(ValueError, match='not a device'):
            resolve_device(bad)


def test_auto_picks_cuda_when_torch_sees_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 1)
    assert resolve_device('auto') == torch.device('cuda')
    assert resolve_device('cuda:0') == torch.device('cuda', 0)
    with pytest.raises(ValueError, match='sees 1 CUDA'):
        resolve_device('cuda:1')


def test_a_worker_asked_for_cuda_without_one_exits_2_with_one_line(capsys, monkeypatch):
    from rog_ros.nodes import rog_worker
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    with pytest.raises(SystemExit) as stop:
        rog_worker.main(['--workload', 'toy', '--workers', '1', '--device', 'cuda'])
    assert stop.value.code == 2
    assert '--device' in capsys.readouterr().err


def test_a_fleet_asked_for_cuda_without_one_is_refused_before_anything_starts(monkeypatch):
    from rog_ros import checks
    from rog_ros.nodes.plan import plan
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    with pytest.raises(checks.ConfigError, match=r'device \(--device\): .*no CUDA device'):
        plan({}, {'device': 'cuda', 'workload': 'toy'})
    assert [s.parameters['device'] for s in plan({}, {'workload': 'toy'})
            if s.role == 'worker'] == ['auto'] * 3
