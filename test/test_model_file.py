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


def _flipped_model(tmp_path, crc=True):
    """Save a toy-sized model (checksums on or off in torch), flip one weight's bit; its path."""
    model = torch.nn.Linear(25, 40)           # 1000 weights: one found by its bytes
    with torch.no_grad():
        model.weight.copy_(torch.arange(1000, dtype=torch.float32).reshape(40, 25))
    path = tmp_path / 'model.pt'
    if crc:                             # (torch < 2.5, as Jetson's 2.0: always written)
        save_state_dict(path, model)
        return _flip_weight_100(path, model)
    _crc_settable()
    was = torch.serialization.get_crc32_options()
    torch.serialization.set_crc32_options(crc)
    try:
        save_state_dict(path, model)
    finally:
        torch.serialization.set_crc32_options(was)
    return _flip_weight_100(path, model)


def _crc_settable():
    """Skip where torch cannot leave its checksums out (before 2.5: Jetson's 2.0, 2.1)."""
    if not hasattr(torch.serialization, 'set_crc32_options'):
        pytest.skip('torch < 2.5 always writes its checksums')


def _flip_weight_100(path, model):
    """Flip one bit of weight 100 of ``model`` in its file ``path``; the path."""
    data = bytearray(path.read_bytes())
    at = data.find(model.weight.detach().numpy().tobytes()[:64])
    assert at > 0
    data[at + 400] ^= 0x01              # one bit of weight 100
    path.write_bytes(bytes(data))
    return path


def test_a_model_file_rog_ros_wrote_with_a_flipped_bit_is_refused(tmp_path):
    # torch.load does not check the archive's checksums: a worn SD card's model loaded as valid
    from rog_ros.workloads.start_model import read_state
    path = _flipped_model(tmp_path)
    with pytest.raises(ValueError, match='is damaged .*fails its checksum') as err:
        read_state(path)                # init_model: every robot would start from it
    assert '\n' not in str(err.value)
    with pytest.raises(ValueError, match='is damaged .*fails its checksum'):
        load_trained('toy', path)


def test_rog_ros_writes_a_models_checksums_even_where_torch_was_told_not_to(tmp_path):
    # read back, they are checked: a model written without them would load damaged
    from rog_ros.workloads.start_model import read_state
    path = _flipped_model(tmp_path, crc=False)
    with pytest.raises(ValueError, match='fails its checksum'):
        read_state(path)


@pytest.mark.parametrize('how', ['crc-off', 'legacy'])
def test_a_users_model_file_without_checksums_is_read_as_before(tmp_path, how):
    # torch's older format, or an archive whose checksums were turned off: nothing to check
    from rog_ros.workloads.start_model import read_state
    model = load_workload('toy').make_model()
    path = tmp_path / 'mine.pt'
    if how == 'legacy':
        torch.save(model.state_dict(), path, _use_new_zipfile_serialization=False)
    else:
        _crc_settable()
        torch.serialization.set_crc32_options(False)
        try:
            torch.save(model.state_dict(), path)
        finally:
            torch.serialization.set_crc32_options(True)
    state = read_state(path)
    back = load_trained('toy', path)
    for name, t in model.state_dict().items():
        assert torch.equal(state[name], t) and torch.equal(back.state_dict()[name], t)


def test_a_model_is_written_without_a_copy_of_its_bytes_in_memory(tmp_path):
    # model.pt and a robot's model_out went through a BytesIO first: a 45 MB vision model
    # held its bytes once more in the server and every robot when the run ended
    import tracemalloc
    model = torch.nn.Linear(2048, 1024)      # 8 MiB of weights
    tracemalloc.start()
    try:
        size = save_state_dict(tmp_path / 'model.pt', model)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert size == (tmp_path / 'model.pt').stat().st_size > 8 << 20
    assert peak < 2 << 20                    # was > 8 MiB
