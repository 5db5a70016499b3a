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
Tests of EACOL's data: CIFAR-100 / Fed-CIFAR100 readers, object renderer, corruptions.

The readers are tested on small fixtures written here in the exact on-disk formats (python
pickle `cifar-100-python/{train,test,meta}`, TFF HDF5 `examples/<client>/{image,label}`).
"""
import pickle
import re

import numpy as np
import pytest
from rog_ros.workloads.cifar import load_cifar100, load_fed_cifar100
from rog_ros.workloads.corruptions import blur, BLUR_LADDER, corrupt
from rog_ros.workloads.objects import CLASS_NAMES, render_objects
import torch


def _write_cifar(root, n_train=30, n_test=10):
    folder = root / 'cifar-100-python'
    folder.mkdir()
    rng = np.random.default_rng(0)
    for split, n in (('train', n_train), ('test', n_test)):
        fine = rng.integers(0, 100, n).tolist()
        data = {b'data': rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                b'fine_labels': fine, b'coarse_labels': [f // 5 for f in fine],
                b'filenames': [f'{i}.png'.encode() for i in range(n)],
                b'batch_label': split.encode()}
        with open(folder / split, 'wb') as f:
            pickle.dump(data, f)
    meta = {b'fine_label_names': [f'class{i}'.encode() for i in range(100)],
            b'coarse_label_names': [f'super{i}'.encode() for i in range(20)]}
    with open(folder / 'meta', 'wb') as f:
        pickle.dump(meta, f)
    with open(folder / 'train', 'rb') as f:
        return pickle.load(f, encoding='bytes')


def test_cifar100_pickle_reader(tmp_path):
    raw = _write_cifar(tmp_path)

    data = load_cifar100(tmp_path, 'train')

    assert data['images'].shape == (30, 3, 32, 32) and data['images'].dtype == torch.uint8
    # CHW order: the first 1024 bytes are the red plane of image 0.
    assert torch.equal(data['images'][0, 0].flatten(),
                       torch.from_numpy(raw[b'data'][0, :1024].copy()))
    assert data['labels'].tolist() == raw[b'fine_labels']
    assert data['label_names'][7] == 'class7'
    known = data['coarse_of_fine'] >= 0
    assert torch.equal(data['coarse_of_fine'][known], torch.nonzero(known).flatten() // 5)
    assert len(load_cifar100(tmp_path / 'cifar-100-python', 'test')['labels']) == 10


def test_fed_cifar100_hdf5_reader(tmp_path):
    h5py = pytest.importorskip('h5py')
    path = tmp_path / 'fed_cifar100_train.h5'
    rng = np.random.default_rng(1)
    sizes = {'0': 3, '1': 5, '10': 2}
    images = {c: rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8) for c, n in sizes.items()}
    with h5py.File(path, 'w') as f:
        for c, n in sizes.items():
            f.create_dataset(f'examples/{c}/image', data=images[c])
            f.create_dataset(f'examples/{c}/label', data=np.arange(n, dtype=np.int64) + 40)
            f.create_dataset(f'examples/{c}/coarse_label', data=np.zeros(n, dtype=np.int64))

    data = load_fed_cifar100(path)

    assert data['client_ids'] == ['0', '1', '10']
    assert data['images'].shape == (10, 3, 32, 32)
    assert data['clients'].tolist() == [0] * 3 + [1] * 5 + [2] * 2
    assert data['labels'].tolist() == [40, 41, 42, 40, 41, 42, 43, 44, 40, 41]
    # HWC in the file, CHW out.
    assert torch.equal(data['images'][3].permute(1, 2, 0), torch.from_numpy(images['1'][0]))


def test_objects_balanced_deterministic_and_varied():
    a, la = render_objects(240, num_classes=24, seed=3)
    b, lb = render_objects(240, num_classes=24, seed=3)
    c, _ = render_objects(240, num_classes=24, seed=4)

    assert a.shape == (240, 3, 32, 32) and a.dtype == torch.uint8
    assert torch.equal(a, b) and torch.equal(la, lb) and not torch.equal(a, c)
    assert torch.bincount(la, minlength=24).tolist() == [10] * 24
    assert len(CLASS_NAMES) == 24
    # Images of one class differ (pose, colour, background), not copies.
    same = a[la == 0].float()
    assert (same[1:] - same[:1]).abs().mean() > 20


def test_blur_ladder_levels_and_smoothing():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4, 3, 32, 32, generator=g)
    flat = torch.full((1, 3, 16, 16), 0.3)

    for level in BLUR_LADDER:
        y = blur(x, level)
        assert y.shape == x.shape
        # Blurs are averaging filters: less pixel-to-pixel variation, constants preserved.
        assert (y.diff(dim=-1).abs().mean() < 0.8 * x.diff(dim=-1).abs().mean()), level
        assert torch.allclose(blur(flat, level), flat, atol=1e-5), level
    with pytest.raises(ValueError):
        corrupt(x, 'blur:11')


def test_corrupt_presets_deterministic_and_strength_ordered():
    images, _ = render_objects(64, seed=1)

    fog1 = corrupt(images, 'fog:1', seed=5)
    again = corrupt(images, 'fog:1', seed=5)
    other = corrupt(images, 'fog:1', seed=6)
    fog8 = corrupt(images, 'fog:8', seed=5)

    assert fog1.dtype == torch.uint8 and torch.equal(fog1, again)
    assert not torch.equal(fog1, other)
    diff = [(f.float() - images.float()).abs().mean() for f in (fog1, fog8)]
    assert 0 < diff[0] < diff[1]
    # Fog lowers contrast: per-image standard deviation shrinks.
    assert fog8.float().std(dim=(1, 2, 3)).mean() < 0.6 * images.float().std(dim=(1, 2, 3)).mean()
    for spec in ('blur', 'mixed', 'brightness:3', 'contrast:2', 'rotation:5', 'translation:2'):
        assert not torch.equal(corrupt(images, spec), images), spec


def _rewrite(path, change):
    """Rewrite the pickled dict in ``path`` with ``change(dict)`` applied."""
    with open(path, 'rb') as f:
        data = pickle.load(f, encoding='bytes')
    change(data)
    with open(path, 'wb') as f:
        pickle.dump(data, f)


def _garble(path):
    """Overwrite ``path`` with bytes that are no pickle."""
    path.write_bytes(b'this is not a pickle at all')


def _truncate(path):
    """Cut ``path`` to half its length."""
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def _drop_data(path):
    """Remove the images of the pickled split."""
    _rewrite(path, lambda d: d.pop(b'data'))


def _narrow_rows(path):
    """Give the split rows of 3000 bytes instead of 3072."""
    _rewrite(path, lambda d: d.update({b'data': d[b'data'][:, :3000].copy()}))


def _label_100(path):
    """Give image 4 the fine label 100 (CIFAR-100 has 0..99)."""
    _rewrite(path, lambda d: d[b'fine_labels'].__setitem__(4, 100))


def _short_labels(path):
    """Drop the last coarse label."""
    _rewrite(path, lambda d: d[b'coarse_labels'].pop())


@pytest.mark.parametrize('damage, message', [
    (_garble, r'not a CIFAR-100 pickle \(UnpicklingError: .*\); unpack the official'),
    (_truncate, r'not a CIFAR-100 pickle \((EOFError|UnpicklingError): '),
    (_drop_data, r"not a CIFAR-100 file: no 'data' entry \(it has batch_label, coarse_labels, "
                 r'filenames, fine_labels\)$'),
    (_narrow_rows, r'data must be rows of 3072 bytes 0\.\.255 \(3 x 32 x 32 per image\), got '
                   r'uint8 of shape \(30, 3000\)$'),
    (_label_100, r'fine_labels must be 0\.\.99; image 4 has 100$'),
    (_short_labels, r'coarse_labels must be 30 integers \(one per image\), got int64 of shape '
                    r'\(29,\)$'),
])
def test_a_damaged_cifar100_file_is_one_line_naming_it(tmp_path, damage, message):
    _write_cifar(tmp_path)
    path = tmp_path / 'cifar-100-python' / 'train'
    damage(path)

    with pytest.raises(ValueError) as err:
        load_cifar100(tmp_path, 'train')

    text = str(err.value)
    assert text.startswith(f'{path}: ') and '\n' not in text
    assert re.search(message, text), text
    assert len(load_cifar100(tmp_path, 'test')['labels']) == 10      # the other split reads


def _fed_file(path, image_shape=(4, 32, 32, 3), labels=(1, 2, 3, 4)):
    """Write a one-client Fed-CIFAR100 file with these image shape and labels."""
    h5py = pytest.importorskip('h5py')
    with h5py.File(path, 'w') as f:
        f.create_dataset('examples/c0/image', data=np.zeros(image_shape, dtype=np.uint8))
        f.create_dataset('examples/c0/label', data=np.asarray(labels, dtype=np.int64))


@pytest.mark.parametrize('write, message', [
    (lambda p: p.write_text('not hdf5\n'), r'not an HDF5 file \(.*\); train_h5 and test_h5 '
                                           r"name TFF's fed_cifar100_train\.h5"),
    (lambda p: _fed_file(p, labels=(1, 2, 100, 4)),
     r'examples/c0/label must be 0\.\.99; image 2 has 100$'),
    (lambda p: _fed_file(p, image_shape=(4, 32, 32)),
     r'examples/c0/image must be bytes 0\.\.255 of shape \(n, 32, 32, 3\), got uint8 of shape '
     r'\(4, 32, 32\)$'),
])
def test_a_damaged_fed_cifar100_file_is_one_line_naming_it(tmp_path, write, message):
    pytest.importorskip('h5py')
    path = tmp_path / 'fed_cifar100_train.h5'
    write(path)

    with pytest.raises(ValueError) as err:
        load_fed_cifar100(path)

    text = str(err.value)
    assert text.startswith(f'{path}: ') and '\n' not in text
    assert re.search(message, text), text
