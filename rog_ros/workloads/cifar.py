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


def _cifar_folder(root):
    root = Path(root).expanduser()
    return root / 'cifar-100-python' if (root / 'cifar-100-python').is_dir() else root


def load_cifar100(root, split='train'):
    """
    Read CIFAR-100 `split` ('train' or 'test') from `root` (or `root/cifar-100-python`).

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
    folder = _cifar_folder(root)
    missing = [name for name in (split, 'meta') if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f'{root}: no CIFAR-100 here ({" and ".join(missing)} missing in {folder}); '
            "data_dir is the folder holding cifar-100-python/ (the 'python version' archive, "
            'unpacked: train, test, meta); nothing is downloaded')
    with open(folder / split, 'rb') as f:
        data = pickle.load(f, encoding='bytes')
    with open(folder / 'meta', 'rb') as f:
        meta = pickle.load(f, encoding='bytes')
    images = torch.from_numpy(np.asarray(data[b'data'], dtype=np.uint8).reshape(-1, 3, 32, 32))
    labels = torch.as_tensor(data[b'fine_labels'], dtype=torch.long)
    coarse = torch.as_tensor(data[b'coarse_labels'], dtype=torch.long)
    n_fine = len(meta[b'fine_label_names'])
    coarse_of_fine = torch.full((n_fine,), -1, dtype=torch.long)
    coarse_of_fine[labels] = coarse
    return {'images': images, 'labels': labels, 'coarse_labels': coarse,
            'label_names': [n.decode() for n in meta[b'fine_label_names']],
            'coarse_of_fine': coarse_of_fine}


def load_fed_cifar100(path):
    """
    Read a TFF Fed-CIFAR100 HDF5 file (`examples/<client_id>/{image,label}`).

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
    images, labels, clients, ids = [], [], [], []
    with h5py.File(Path(path).expanduser(), 'r') as f:
        for i, cid in enumerate(sorted(f['examples'].keys())):
            group = f['examples'][cid]
            img = np.asarray(group['image'], dtype=np.uint8)
            images.append(img)
            labels.append(np.asarray(group['label'], dtype=np.int64).reshape(-1))
            clients.append(np.full(len(img), i, dtype=np.int64))
            ids.append(cid)
    if not ids:
        raise ValueError(f'{path}: no clients under examples/')
    images = torch.from_numpy(np.concatenate(images)).permute(0, 3, 1, 2).contiguous()
    return {'images': images, 'labels': torch.from_numpy(np.concatenate(labels)),
            'clients': torch.from_numpy(np.concatenate(clients)), 'client_ids': ids}
