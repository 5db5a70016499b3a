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
Readers for CIFAR-100 (python-pickle layout) and Fed-CIFAR100 (TFF HDF5 layout), local only.

Nothing is ever downloaded: users place the files themselves (e.g. on a robot without internet).

* CIFAR-100: the official `cifar-100-python/` folder with pickled dicts `train`, `test` and
  `meta` (keys b'data' (N, 3072) uint8 in CHW order, b'fine_labels', b'coarse_labels';
  b'fine_label_names', b'coarse_label_names').
* Fed-CIFAR100: TensorFlow Federated's `fed_cifar100_{train,test}.h5`, with groups
  `examples/<client_id>/image` (n, 32, 32, 3) uint8 and `.../label` (n,) int. The client of each
  sample is returned, since the clients are the Pachinko-allocated shards of the paper. Needs
  `h5py`, imported only when this reader is called.
"""

from __future__ import annotations

from pathlib import Path
import pickle

import numpy as np
import torch


FINE_CLASSES = 100
COARSE_CLASSES = 20
IMAGE_BYTES = 3 * 32 * 32


def cifar_folder(root):
    """Return ``root/cifar-100-python`` if that folder exists, else ``root`` itself."""
    root = Path(root).expanduser()
    return root / 'cifar-100-python' if (root / 'cifar-100-python').is_dir() else root


def _unpickle(path):
    """
    Return the dict pickled in ``path``; ValueError names the file if it is none.

    Unpickling runs code chosen by whoever wrote the file: read only CIFAR-100 copies you
    trust (the official archive). The format is the official one, so pickle it stays.
    """
    try:
        with open(path, 'rb') as f:
            data = pickle.load(f, encoding='bytes')
    except OSError as err:
        raise ValueError(f'{path}: cannot read it ({err.strerror or err})') from err
    except Exception as err:    # a garbled or truncated pickle raises almost anything
        raise ValueError(f'{path}: not a CIFAR-100 pickle ({type(err).__name__}: {err}); '
                         "unpack the official 'python version' archive again") from err
    if not isinstance(data, dict):
        raise ValueError(f'{path}: not a CIFAR-100 pickle (it holds a {type(data).__name__}, '
                         'not a dict)')
    return data


def _field(data, key, path):
    """Return ``data[key]``; ValueError names the file and the key if it is missing."""
    if key not in data:
        have = ', '.join(sorted(k.decode(errors='replace') if isinstance(k, bytes) else str(k)
                                for k in data)) or 'none'
        raise ValueError(f'{path}: not a CIFAR-100 file: no {key.decode()!r} entry (it has '
                         f'{have})')
    return data[key]


def _labels(values, n, classes, what, path):
    """Return ``values`` as int64 (n,); ValueError names the file where they do not fit."""
    return torch.from_numpy(_label_array(values, n, classes, f'{path}: {what}'))


def _label_array(values, n, classes, named):
    """Return ``values`` as an int64 array (n,) of labels below ``classes``; else say so."""
    try:
        labels = np.asarray(values)
    except (TypeError, ValueError) as err:
        raise ValueError(f'{named} are not numbers ({err})') from err
    if labels.shape != (n,) or labels.dtype.kind not in 'iu':
        raise ValueError(f'{named} must be {n} integers (one per image), got '
                         f'{labels.dtype} of shape {labels.shape}')
    bad = np.nonzero((labels < 0) | (labels >= classes))[0]
    if len(bad):
        raise ValueError(f'{named} must be 0..{classes - 1}; image {bad[0]} has '
                         f'{labels[bad[0]]}')
    return labels.astype(np.int64)


def load_cifar100(root, split='train'):
    """
    Read CIFAR-100 `split` ('train' or 'test') from `root` (or `root/cifar-100-python`).

    The files are Python pickles (the official format): unpickling can run code chosen by
    whoever wrote them, so read only copies you trust. A file that is no CIFAR-100 pickle,
    lacks an entry, has rows that are not 3 x 32 x 32 bytes or labels out of range is a
    ValueError naming the file.

    Returns
    -------
    dict
        'images' uint8 (N, 3, 32, 32), 'labels' int64 (N,), 'coarse_labels' int64 (N,),
        'label_names' list of str, 'coarse_of_fine' int64 (100,) (coarse label of each fine one).

    """
    if split not in ('train', 'test'):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if root is None:
        raise ValueError("dataset='cifar100' needs data_dir: the folder holding (or being) "
                         'cifar-100-python/')
    folder = cifar_folder(root)
    missing = [name for name in (split, 'meta') if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f'{root}: no CIFAR-100 here ({" and ".join(missing)} missing in {folder}); '
            "data_dir is the folder holding cifar-100-python/ (the 'python version' archive, "
            'unpacked: train, test, meta); nothing is downloaded')
    path, meta_path = folder / split, folder / 'meta'
    data, meta = _unpickle(path), _unpickle(meta_path)
    names = _field(meta, b'fine_label_names', meta_path)
    if not isinstance(names, (list, tuple)) or len(names) != FINE_CLASSES or not all(
            isinstance(n, (bytes, str)) for n in names):
        raise ValueError(f'{meta_path}: fine_label_names must be {FINE_CLASSES} names')
    raw = _field(data, b'data', path)
    try:
        pixels = np.asarray(raw)
    except (TypeError, ValueError) as err:
        raise ValueError(f'{path}: data is not an array of bytes ({err})') from err
    if pixels.ndim != 2 or pixels.shape[1] != IMAGE_BYTES or not _bytes(pixels):
        raise ValueError(f'{path}: data must be rows of {IMAGE_BYTES} bytes 0..255 (3 x 32 x 32 '
                         f'per image), got {pixels.dtype} of shape {pixels.shape}')
    n = len(pixels)
    images = torch.from_numpy(pixels.astype(np.uint8, copy=False).reshape(-1, 3, 32, 32))
    labels = _labels(_field(data, b'fine_labels', path), n, FINE_CLASSES, 'fine_labels', path)
    coarse = _labels(_field(data, b'coarse_labels', path), n, COARSE_CLASSES, 'coarse_labels',
                     path)
    coarse_of_fine = torch.full((FINE_CLASSES,), -1, dtype=torch.long)
    coarse_of_fine[labels] = coarse
    return {'images': images, 'labels': labels, 'coarse_labels': coarse,
            'label_names': [n.decode() if isinstance(n, bytes) else n for n in names],
            'coarse_of_fine': coarse_of_fine}


def load_fed_cifar100(path):
    """
    Read a TFF Fed-CIFAR100 HDF5 file (`examples/<client_id>/{image,label}`).

    A file that is no HDF5 file, or one without that layout, 32 x 32 x 3 uint8 images and
    labels 0..99, is a ValueError naming the file (a missing one FileNotFoundError).

    Returns
    -------
    dict
        'images' uint8 (N, 3, 32, 32), 'labels' int64 (N,), 'clients' int64 (N,) (index into
        'client_ids'), 'client_ids' list of str in file order.

    """
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError('reading Fed-CIFAR100 needs h5py: pip install h5py') from exc
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (train_h5 and test_h5 name TFF's "
                                'fed_cifar100_train.h5 and fed_cifar100_test.h5)')
    images, labels, clients, ids = [], [], [], []
    try:
        f = h5py.File(path, 'r')
    except OSError as err:
        raise ValueError(f"{path}: not an HDF5 file ({err}); train_h5 and test_h5 name TFF's "
                         'fed_cifar100_train.h5 and fed_cifar100_test.h5') from err
    try:
        with f:
            examples = f.get('examples')
            if not isinstance(examples, h5py.Group):
                raise ValueError(f'{path}: not a Fed-CIFAR100 file: no examples/ group')
            for i, cid in enumerate(sorted(examples.keys())):
                img, lab = _client(examples[cid], f'{path}: examples/{cid}')
                images.append(img)
                labels.append(lab)
                clients.append(np.full(len(img), i, dtype=np.int64))
                ids.append(cid)
    except (OSError, KeyError, TypeError) as err:   # a damaged file inside
        raise ValueError(f'{path}: cannot read it ({type(err).__name__}: {err})') from err
    if not ids:
        raise ValueError(f'{path}: no clients under examples/')
    images = torch.from_numpy(np.concatenate(images)).permute(0, 3, 1, 2).contiguous()
    return {'images': images, 'labels': torch.from_numpy(np.concatenate(labels)),
            'clients': torch.from_numpy(np.concatenate(clients)), 'client_ids': ids}


def _client(group, where):
    """Return one client's images (n, 32, 32, 3) uint8 and labels (n,) int64, checked."""
    for key in ('image', 'label'):
        if key not in group:
            raise ValueError(f'{where}: no {key!r} entry (a client has image and label)')
    img, lab = np.asarray(group['image']), np.asarray(group['label'])
    if img.ndim != 4 or img.shape[1:] != (32, 32, 3) or not _bytes(img):
        raise ValueError(f'{where}/image must be bytes 0..255 of shape (n, 32, 32, 3), got '
                         f'{img.dtype} of shape {img.shape}')
    lab = _label_array(lab.reshape(-1), len(img), FINE_CLASSES, f'{where}/label')
    return img.astype(np.uint8, copy=False), lab


def _bytes(array) -> bool:
    """Tell whether ``array`` holds integers 0..255 only (uint8, or wider ones that fit)."""
    if array.dtype == np.uint8:
        return True
    return array.dtype.kind in 'iu' and (array.size == 0 or (
        int(array.min()) >= 0 and int(array.max()) <= 255))
