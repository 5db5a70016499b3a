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
"""The default MPCOL and EACOL starts are the shipped ones everywhere; damaged files are not."""

import pytest

torch = pytest.importorskip('torch')

from rog_ros import file_identity  # noqa: E402
from rog_ros.workloads import cache, eacol, mpcol, shipped  # noqa: E402


def _default_key(name: str = 'mpcol') -> str:
    """Return the cache key of a workload's default configuration under this code."""
    if name == 'eacol':
        return cache.cache_key('eacol', eacol._checkpoint_options(), eacol.CODE_VERSION)
    return cache.cache_key('mpcol', mpcol._options(), mpcol.CODE_VERSION)


def test_a_start_is_shipped_for_the_default_configuration_of_this_code():
    # raising CODE_VERSION (other data or pre-training) without shipping again would leave
    # every machine pre-training its own start, as before the files were shipped
    start = shipped.shipped_start('mpcol', _default_key())
    assert start is not None
    model = mpcol.PlanningPolicy(8, (400, 256))
    model.load_state_dict(start['state'])           # the policy's exact parameters
    assert sum(p.numel() for p in model.parameters()) == 801_716
    assert set(start['made_with']) == {'torch', 'python', 'cpu', 'date'}
    net = eacol._model_fn(eacol._checkpoint_options(), 20)()
    net.load_state_dict(shipped.shipped_start('eacol', _default_key('eacol'))['state'])
    listed = shipped._recorded_sums(shipped.SHIPPED_DIR)
    assert sorted(listed) == sorted(p.name for p in shipped.SHIPPED_DIR.glob('*.pt')) == sorted(
        shipped.file_name(n, _default_key(n)) for n in shipped.SHIPPED_WORKLOADS)


def _built_without_pretraining(name, tmp_path, monkeypatch):
    """Build workload ``name``'s default in a fresh cache, failing on any pre-training."""
    monkeypatch.setenv('ROG_CACHE_DIR', str(tmp_path))
    module = {'mpcol': mpcol, 'eacol': eacol}[name]

    def no_pretraining(*args, **kwargs):
        """Fail: the default configuration must not pre-train."""
        raise AssertionError('pre-trained although a start is shipped')
    monkeypatch.setattr(module, 'pretrain', no_pretraining)
    w = module.make_mpcol() if name == 'mpcol' else module.make_eacol()
    # the model starts from the shipped weights, bit for bit, and says so
    start = shipped.shipped_start(name, _default_key(name))
    state = w.make_model().state_dict()
    assert all(torch.equal(state[k], start['state'][k]) for k in start['state'])
    assert w.describe()['pretrained'].startswith('shipped (torch ')
    return w


def test_the_default_build_takes_the_shipped_start_and_never_pretrains(tmp_path, monkeypatch):
    w = _built_without_pretraining('mpcol', tmp_path, monkeypatch)
    assert 0.6 < w.describe()['accuracy_before'] < 0.7 < w.target_accuracy


def test_the_default_eacol_build_takes_the_shipped_start(tmp_path, monkeypatch):
    w = _built_without_pretraining('eacol', tmp_path, monkeypatch)
    assert w.describe()['accuracy_before'] < w.target_accuracy < w.describe()['clean_accuracy']


def test_other_options_pretrain_here(monkeypatch):
    calls = []

    def noted(model, *args, **kwargs):
        """Note a pre-training instead of running it."""
        calls.append(kwargs['steps'])
        return 0.5
    monkeypatch.setattr(mpcol, 'pretrain', noted)
    monkeypatch.setattr(mpcol, 'Observer', lambda maps, radius: None)
    parts = {'pretrain': (torch.zeros(1, 3), torch.zeros(1, 4))}
    for opts in (mpcol._options(pretrain_steps=10), mpcol._options(seed=1)):
        _, loss, where = mpcol._pretrained(opts, None, parts)
        assert (loss, where) == (0.5, 'here')
    assert calls == [10, 1200]


def test_a_damaged_or_unlisted_file_is_not_used_and_said_once(tmp_path, capsys):
    state = {'w': torch.arange(6.0).reshape(2, 3)}
    path = shipped.write_shipped('unit', 'k1', state, 0.25, folder=tmp_path)
    shipped.write_shipped('unit', 'k2', {'w': torch.ones(1)}, 0.5, folder=tmp_path)
    start = shipped.shipped_start('unit', 'k1', folder=tmp_path)
    assert torch.equal(start['state']['w'], state['w']) and start['pretrain_loss'] == 0.25
    assert capsys.readouterr().err == ''
    assert shipped.shipped_start('unit', 'absent', folder=tmp_path) is None   # silently
    assert capsys.readouterr().err == ''
    # one byte changed: refused, one line
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert shipped.shipped_start('unit', 'k1', folder=tmp_path) is None
    err = capsys.readouterr().err
    assert err == (f'rog_ros: the shipped pre-trained start {path} does not match its SHA-256 '
                   'in SHA256SUMS: pre-training here instead\n')
    # a file the sums do not list: refused too; the other entry still loads
    (tmp_path / 'unit-k3.pt').write_bytes(b'not listed')
    assert shipped.shipped_start('unit', 'k3', folder=tmp_path) is None
    assert 'is not listed in SHA256SUMS' in capsys.readouterr().err
    assert shipped.shipped_start('unit', 'k2', folder=tmp_path)['pretrain_loss'] == 0.5


def test_a_listed_file_that_is_not_a_start_is_not_used(tmp_path, capsys):
    path = shipped.write_shipped('unit', 'k', {'w': torch.ones(2)}, 0.1, folder=tmp_path)
    torch.save({'weights': [1, 2]}, path)                       # no state_dict
    sums = (tmp_path / 'SHA256SUMS').read_text().replace(
        (tmp_path / 'SHA256SUMS').read_text().split()[0], file_identity.sha256_hex(path))
    (tmp_path / 'SHA256SUMS').write_text(sums)
    assert shipped.shipped_start('unit', 'k', folder=tmp_path) is None
    assert 'holds no state_dict' in capsys.readouterr().err
