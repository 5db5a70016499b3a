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
Tests of the EACOL workload at a small size: checkpoint, corruption cost, adaptation, options.

Sizes are cut down (6 classes, 250 pre-training steps) so the module runs in seconds; the
defaults' numbers are measured by docs/workloads.md's benchmark, not here.
"""
import hashlib
import os
import pickle
import time

import numpy as np
import pytest
from rog_ros import file_identity, workloads
from rog_ros.workloads import eacol as eacol_module
from rog_ros.workloads.training import emulate_fleet
import torch

SMALL = {'num_classes': 6, 'pretrain_samples': 3000, 'adapt_samples': 1200, 'eval_samples': 300,
         'pretrain_steps': 250, 'batch_size': 16}


@pytest.fixture(scope='module')
def cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp('rog_cache')
        mp.setenv('ROG_CACHE_DIR', str(path))
        yield path


@pytest.fixture(scope='module')
def eacol(cache_dir):
    return workloads.get('eacol', **SMALL)


def test_interface_and_description(eacol):
    d = eacol.describe()

    assert eacol.name == 'eacol' and eacol.batch_size == 16
    assert eacol.compute_time_s == pytest.approx(2.18)
    assert d['classes'] == 6 and d['adaptation_samples'] == 1200
    assert d['parameters'] == sum(p.numel() for p in eacol.make_model().parameters())
    assert d['target_accuracy'] == pytest.approx(
        d['accuracy_before'] + 0.5 * (d['clean_accuracy'] - d['accuracy_before']), abs=1e-3)


def test_make_model_is_the_pretrained_checkpoint_every_time(eacol):
    a, b = eacol.make_model(), eacol.make_model()
    fresh = eacol_module.convmlp('cpu', num_classes=6, seed=0)

    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), fresh.parameters()))
    a.parameters().__next__().data.add_(1.0)  # models are independent copies
    assert not torch.equal(next(a.parameters()), next(b.parameters()))


def test_fog_costs_accuracy_and_evaluate_agrees(eacol):
    d = eacol.describe()
    live = eacol.evaluate(eacol.make_model())

    assert d['clean_accuracy'] > 0.4  # pre-training learned the clean task (chance: 0.17)
    assert d['accuracy_before'] <= d['clean_accuracy'] - 0.10
    assert live['accuracy'] == pytest.approx(d['accuracy_before'])
    assert 0 < live['loss'] < 20 and live['samples'] == 300


def test_fleet_adaptation_recovers_half_the_loss(eacol):
    history = emulate_fleet(eacol, n_workers=4, iterations=40, eval_every=40, seed=0)

    assert history[-1][1]['accuracy'] >= eacol.target_accuracy


def test_label_sorted_partitions_are_disjoint_label_ranges(eacol):
    labels = [set(next(eacol.worker_batches(r, 3, seed=0))[1].tolist()) for r in range(3)]

    assert labels[0] <= {0, 1} and labels[1] <= {2, 3} and labels[2] <= {4, 5}


def test_cached_build_skips_pretraining(eacol, monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError('pre-training ran although the checkpoint is cached')

    monkeypatch.setattr(eacol_module, 'pretrain', boom)
    again = workloads.get('eacol', fresh=True, **SMALL)

    assert again.target_accuracy == eacol.target_accuracy
    assert all(torch.equal(p, q) for p, q in zip(again.make_model().parameters(),
                                                 eacol.make_model().parameters()))


@pytest.mark.parametrize('partition', ['dirichlet', 'pachinko'])
def test_other_partitions(cache_dir, partition):
    w = workloads.get('eacol', partition=partition, **SMALL)

    parts = w.partition(4)
    idx = torch.cat(parts)
    assert len(idx) == len(torch.unique(idx)) and len(idx) >= 1100
    assert all(len(p) > 0 for p in parts)


def test_convmlp_m_option_has_the_papers_size(cache_dir):
    w = workloads.get('eacol', model='convmlp-m', num_classes=20, pretrain_samples=64,
                      adapt_samples=64, eval_samples=16, pretrain_steps=1, pretrain_batch=8)

    d = w.describe()
    # 16,948,804 with CIFAR-100's 100 classes; the head has 80 x 513 fewer with 20.
    assert d['parameters'] == 16_948_804 - 80 * 513
    assert d['parameter_tensors'] == 226


def _write_cifar(root, n_train, n_test):
    folder = root / 'cifar-100-python'
    folder.mkdir()
    rng = np.random.default_rng(0)
    for split, n in (('train', n_train), ('test', n_test)):
        fine = (np.arange(n) % 100).tolist()
        with open(folder / split, 'wb') as f:
            pickle.dump({b'data': rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                         b'fine_labels': fine, b'coarse_labels': [x // 5 for x in fine]}, f)
    with open(folder / 'meta', 'wb') as f:
        pickle.dump({b'fine_label_names': [b'c%d' % i for i in range(100)],
                     b'coarse_label_names': [b's%d' % i for i in range(20)]}, f)


def test_cifar100_dataset_option(cache_dir, tmp_path):
    _write_cifar(tmp_path, 400, 100)

    w = workloads.get('eacol', dataset='cifar100', data_dir=tmp_path, pretrain_steps=2,
                      eval_samples=50, partition='pachinko')

    d = w.describe()
    assert d['classes'] == 100 and d['adaptation_samples'] == 400
    assert d['evaluation_samples'] == 50
    assert sum(len(p) for p in w.partition(2)) == 400


def test_a_target_from_a_pre_training_that_learned_little_is_said(
        cache_dir, tmp_path, capsys):
    # two pre-training steps on random images learn nothing: the target is the starting
    # accuracy, and every run read "already at the target" without a word
    _write_cifar(tmp_path, 400, 100)
    w = workloads.get('eacol', dataset='cifar100', data_dir=tmp_path, pretrain_steps=2,
                      eval_samples=50, partition='pachinko')
    said = capsys.readouterr().err
    assert 'so the target (' in said and 'is no test of adaptation' in said
    assert f'({w.target_accuracy:.4f})' in said
    workloads.get('eacol', fresh=True, dataset='cifar100', data_dir=tmp_path,
                  pretrain_steps=2, eval_samples=50, partition='pachinko', target_accuracy=0.5)
    assert 'no test of adaptation' not in capsys.readouterr().err   # a target given: silent


def test_num_classes_is_refused_for_a_real_dataset(tmp_path):
    with pytest.raises(ValueError, match="eacol: num_classes applies to dataset='objects' only"):
        workloads.get('eacol', dataset='cifar100', data_dir=tmp_path, num_classes=5)


def test_fed_cifar100_dataset_option(cache_dir, tmp_path):
    h5py = pytest.importorskip('h5py')
    rng = np.random.default_rng(0)
    for name, clients in (('train.h5', 8), ('test.h5', 2)):
        with h5py.File(tmp_path / name, 'w') as f:
            for c in range(clients):
                f.create_dataset(f'examples/{c}/image',
                                 data=rng.integers(0, 256, (10, 32, 32, 3), dtype=np.uint8))
                f.create_dataset(f'examples/{c}/label', data=rng.integers(0, 100, 10))

    w = workloads.get('eacol', dataset='fed-cifar100', train_h5=tmp_path / 'train.h5',
                      test_h5=tmp_path / 'test.h5', partition='clients', pretrain_steps=2)

    parts = w.partition(4)
    assert [len(p) for p in parts] == [20] * 4  # two whole clients of 10 images each
    assert w.describe()['evaluation_samples'] == 20


def _checkpoints_built(monkeypatch):
    """Count EACOL's pre-trainings from now on (the list grows by one per build)."""
    built = []
    real = eacol_module._build_checkpoint

    def counting(opts, data):
        """Pre-train as EACOL does, and count it."""
        built.append(opts['data_dir'])   # the path as keyed
        return real(opts, data)
    monkeypatch.setattr(eacol_module, '_build_checkpoint', counting)
    return built


def test_replaced_cifar100_files_are_pre_trained_afresh(cache_dir, tmp_path, monkeypatch):
    built = _checkpoints_built(monkeypatch)
    _an_hour_later(monkeypatch)     # (files written within RACY_NS are keyed by their bytes)
    (tmp_path / 'a' / 'data').mkdir(parents=True)
    (tmp_path / 'b' / 'data').mkdir(parents=True)
    _write_cifar(tmp_path / 'a' / 'data', 200, 50)
    _write_cifar(tmp_path / 'b' / 'data', 300, 50)
    options = {'dataset': 'cifar100', 'data_dir': 'data', 'pretrain_steps': 2,
               'eval_samples': 20, 'seed': 7}

    monkeypatch.chdir(tmp_path / 'a')
    first = workloads.get('eacol', fresh=True, **options)
    workloads.get('eacol', fresh=True, **options)                 # same files: cached
    assert len(built) == 1
    # the same relative name in another folder is other data
    monkeypatch.chdir(tmp_path / 'b')
    workloads.get('eacol', fresh=True, **options)
    assert len(built) == 2
    assert built == [str(tmp_path / 'a' / 'data'), str(tmp_path / 'b' / 'data')]
    # files replaced in place: pre-trained on the new ones, not the stale checkpoint
    monkeypatch.chdir(tmp_path / 'a')
    folder = tmp_path / 'a' / 'data' / 'cifar-100-python'
    for name in ('train', 'test', 'meta'):
        (folder / name).unlink()
    folder.rmdir()
    _write_cifar(tmp_path / 'a' / 'data', 400, 50)
    again = workloads.get('eacol', fresh=True, **options)
    assert len(built) == 3 and again.describe()['adaptation_samples'] == 400
    assert first.describe()['adaptation_samples'] == 200


def _an_hour_later(monkeypatch):
    """Take files' identities an hour after now: the files a test wrote are old, not racy."""
    monkeypatch.setattr(file_identity, 'now_ns', lambda: time.time_ns() + 3600 * 10 ** 9)


def test_a_data_file_rewritten_within_a_tick_of_its_filesystems_clock_is_other_data(
        tmp_path, monkeypatch):
    # the checkpoint was keyed by each data file's size and mtime: a file rewritten with as
    # many bytes within one tick of its filesystem's clock (2 s on FAT; os.utime here) kept
    # its key, and the checkpoint pre-trained on the old data was reused. A file that young
    # is waited for until the tick is over (its stat then keys the bytes read after it), and
    # keyed by its bytes too when it was rewritten during the wait
    train, test = tmp_path / 'train.h5', tmp_path / 'test.h5'
    train.write_bytes(b'a' * 64)
    test.write_bytes(b't' * 64)
    mtime, clock, waits = os.stat(train).st_mtime_ns, [time.time_ns()], []
    monkeypatch.setattr(file_identity, 'now_ns', lambda: clock[0])

    def rewritten(seconds):
        """Wait ``seconds`` (on ``clock``); train.h5 rewritten within its tick in the wait."""
        waits.append(seconds)
        clock[0] += round(seconds * 1e9)
        if len(waits) == 1:     # (its mtime set back; its change time late in the wait)
            train.write_bytes(b'b' * 64)
            os.utime(train, ns=(mtime, mtime))
            clock[0] = os.stat(train).st_ctime_ns + file_identity.RACY_NS // 2

    def key():
        """Return the data files' entry of the checkpoint's key."""
        return eacol_module._data_key('fed-cifar100', None, str(train), str(test))['data_files']

    monkeypatch.setattr(time, 'sleep', rewritten)
    young = key()
    assert 0 < waits[0] <= file_identity.RACY_NS / 1e9 + 0.01, waits
    assert young == [[str(train), 64, mtime, hashlib.sha256(b'b' * 64).hexdigest()],
                     [str(test), 64, os.stat(test).st_mtime_ns]]


def test_a_data_file_placed_just_before_a_run_has_the_key_of_later_runs(tmp_path, monkeypatch):
    # a data file written in the last RACY_NS was keyed by its SHA-256 too, and by its size
    # and mtime alone once old: a run started just after the data was placed (tar x, cp)
    # pre-trained a checkpoint that every later run missed, and they pre-trained again. It is
    # waited for until it is old (at most RACY_NS), once
    train, test = tmp_path / 'train.h5', tmp_path / 'test.h5'
    train.write_bytes(b'a' * 64)
    test.write_bytes(b't' * 64)

    def key():
        """Return the data files' entry of the checkpoint's key."""
        return eacol_module._data_key('fed-cifar100', None, str(train), str(test))['data_files']

    start = time.monotonic()
    first = key()
    waited = time.monotonic() - start
    assert file_identity.RACY_NS / 1e9 - 1 < waited < file_identity.RACY_NS / 1e9 + 1, waited
    start = time.monotonic()
    assert key() == first
    assert time.monotonic() - start < 0.5        # (old now: no wait)
    _an_hour_later(monkeypatch)
    assert first == key() == [[str(train), 64, os.stat(train).st_mtime_ns],
                              [str(test), 64, os.stat(test).st_mtime_ns]]


def test_a_data_file_on_a_server_whose_clock_is_ahead_is_waited_for_too(tmp_path, monkeypatch):
    # a file server's clock a few milliseconds ahead of this machine's stamps a copy made just
    # now after now: it was not waited for, keyed by its SHA-256 too, then by its size and
    # mtime once old (a second pre-training). One ahead by up to RACY_NS is waited for
    train, test = tmp_path / 'train.h5', tmp_path / 'test.h5'     # (test.h5 missing)
    train.write_bytes(b'a' * 64)
    clock, waits = [os.stat(train).st_ctime_ns - 10 ** 9], []     # (the server 1 s ahead)
    monkeypatch.setattr(file_identity, 'now_ns', lambda: clock[0])

    def wait(seconds):
        """Wait ``seconds`` on ``clock``."""
        waits.append(seconds)
        clock[0] += round(seconds * 1e9)

    monkeypatch.setattr(time, 'sleep', wait)
    got = eacol_module._data_key('fed-cifar100', None, str(train), str(test))['data_files']
    assert len(waits) == 1 and 4 <= waits[0] <= 4 + 0.01, waits
    assert got == [[str(train), 64, os.stat(train).st_mtime_ns], [str(test), None]]


def test_a_young_folder_given_as_a_data_file_is_left_to_the_reader(tmp_path, monkeypatch):
    # a data file still young after the wait was hashed outside the stat's error handling: a
    # folder given as train_h5 (or a file unreadable or gone since its stat) was an
    # IsADirectoryError traceback, where the reader says in one line what is wrong
    folder, test = tmp_path / 'train.h5', tmp_path / 'test.h5'
    folder.mkdir()
    test.write_bytes(b't' * 64)
    ahead = os.stat(folder).st_ctime_ns - 10 * 10 ** 9     # (its change time ahead: no wait)
    monkeypatch.setattr(file_identity, 'now_ns', lambda: ahead)
    got = eacol_module._data_key('fed-cifar100', None, str(folder), str(test))['data_files']
    tested = [str(test), 64, os.stat(test).st_mtime_ns, hashlib.sha256(b't' * 64).hexdigest()]
    assert got == [[str(folder), None], tested]


@pytest.mark.parametrize('options, message', [
    ({'data_dir': '/data'}, "eacol: data_dir is read by dataset='cifar100' only, not by "
                            "dataset='objects' (the built-in images): add dataset=cifar100, or "
                            'leave data_dir out'),
    ({'train_h5': '/t.h5', 'test_h5': '/e.h5'},
     "eacol: train_h5 is read by dataset='fed-cifar100' only, not by dataset='objects' (the "
     'built-in images): add dataset=fed-cifar100, or leave train_h5 out'),
    ({'dataset': 'cifar100', 'data_dir': '/data', 'test_h5': '/e.h5'},
     "eacol: test_h5 is read by dataset='fed-cifar100' only, not by dataset='cifar100': add "
     'dataset=fed-cifar100, or leave test_h5 out'),
    ({'dataset': 'fed-cifar100', 'train_h5': '/t.h5', 'test_h5': '/e.h5', 'data_dir': '/d'},
     "eacol: data_dir is read by dataset='cifar100' only, not by dataset='fed-cifar100': add "
     'dataset=cifar100, or leave data_dir out'),
])
def test_a_data_file_the_dataset_does_not_read_is_refused(cache_dir, monkeypatch, options,
                                                          message):
    monkeypatch.setattr(eacol_module, '_load', None)     # refused before any data is read
    with pytest.raises(ValueError) as err:
        workloads.get('eacol', fresh=True, **options)
    assert str(err.value) == message


def test_fed_cifar100_without_h5py_is_one_line_before_any_data(cache_dir, monkeypatch):
    """Refuse dataset='fed-cifar100' up front when h5py is missing (was an ImportError)."""
    real = eacol_module.importlib.util.find_spec
    monkeypatch.setattr(eacol_module.importlib.util, 'find_spec',
                        lambda name, *a: None if name == 'h5py' else real(name, *a))
    monkeypatch.setattr(eacol_module, '_load', None)     # refused before any data is read
    with pytest.raises(ValueError, match=r"dataset='fed-cifar100' reads HDF5 files and needs "
                                         r'h5py, which is not installed: pip install h5py'):
        workloads.get('eacol', fresh=True, dataset='fed-cifar100', train_h5='/t.h5',
                      test_h5='/e.h5')
