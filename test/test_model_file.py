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
"""The trained model file: a plain state_dict that loads into the workload's own module."""

import pytest
from rog_ros.nodes.assembly import load_workload
from rog_ros.nodes.model_file import load_trained, save_state_dict
import torch


def test_a_saved_model_loads_back_bit_for_bit_with_weights_only(tmp_path):
    model = load_workload('toy').make_model()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p))           # not the initial weights
    size = save_state_dict(tmp_path / 'sub' / 'model.pt', model)   # makes the folder
    assert size == (tmp_path / 'sub' / 'model.pt').stat().st_size
    assert [p.name for p in tmp_path.joinpath('sub').iterdir()] == ['model.pt']  # no temp
    back = load_trained('toy', tmp_path / 'sub' / 'model.pt')
    assert not back.training
    for (name, a), (name_b, b) in zip(model.state_dict().items(), back.state_dict().items()):
        assert name == name_b and torch.equal(a, b)


def test_a_model_of_another_workload_is_refused(tmp_path):
    save_state_dict(tmp_path / 'model.pt', torch.nn.Linear(3, 2))
    with pytest.raises(RuntimeError, match='state_dict'):
        load_trained('toy', tmp_path / 'model.pt')
