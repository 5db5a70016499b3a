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
"""Tests of the workload plumbing: registry, toy workload, partitions, equalisation, cache."""
import os

import pytest
from rog_ros import workloads
from rog_ros.workloads import cache
from rog_ros.workloads.equalise import balance_batch_sizes, suggest_sleep
from rog_ros.workloads.partition import (dirichlet_split, group_split, label_shards,
                                         pachinko_clients)
from rog_ros.workloads.training import emulate_fleet
import torch


def test_registry_builtins_get_and_register():
    assert {'mpcol', 'eacol', 'toy'} <= set(workloads.names())
    toy = workloads.get('toy', features=8, classes=3)
    assert toy.name == 'toy' and toy.describe()['parameters'] == 8 * 3 + 3

    workloads.register('my-toy', lambda **kw: workloads.get('toy', **kw))
    try:
        assert 'my-toy' in workloads.names()
        assert workloads.get('my-toy', classes=5).describe()['classes'] == 5
    finally:
        workloads._FACTORIES.pop('my-toy')
    with pytest.raises(ValueError, match='unknown workload'):
        workloads.get('nope')


def test_described_rows_are_the_rows_rog_synchronises():
    # 'rows' counted every tensor row (4 here); Rog makes each small tensor one row (2)
    from rog_ros.protocol.policies import make_policy
    from rog_ros.protocol.policies.base import layout_for
    for w in (workloads.get('toy', features=8, classes=3),
              workloads.get('toy', features=600, classes=4)):
        shapes = [tuple(p.shape) for p in w.make_model().parameters()]
        described = w.describe()
        assert described['rows'] == layout_for(make_policy('rog:4'), shapes).n_rows
        assert described['tensor_rows'] == sum(s[0] if len(s) >= 2 else 1 for s in shapes)
    assert (described['rows'], described['tensor_rows']) == (5, 5)
    small = workloads.get('toy', features=8, classes=3).describe()
    assert (small['rows'], small['tensor_rows']) == (2, 4)


def test_get_reuses_built_workloads_unless_fresh():
    a = workloads.get('toy', seed=3)

    assert workloads.get('toy', seed=3) is a
    assert workloads.get('toy', seed=4) is not a
    fresh = workloads.get('toy', fresh=True, seed=3)
    assert fresh is not a and fresh.target_accuracy == a.target_accuracy


def test_toy_workload_interface_and_learning():
    toy = workloads.get('toy')
    a, b = toy.make_model(), toy.make_model()
    batches = toy.worker_batches(rank=1, n_workers=4, seed=7)
    x, y = next(batches)
    again = next(toy.worker_batches(rank=1, n_workers=4, seed=7))

    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert x.shape == (toy.batch_size, 16) and torch.equal(x, again[0])
    # Label-sorted shards: worker 1 of 4 sees only label 1 (4 classes).
    assert set(y.tolist()) == {1}
    assert toy.loss(a, (x, y)).dim() == 0
    history = emulate_fleet(toy, n_workers=4, iterations=30, eval_every=30, seed=0)
    assert history[0][1]['accuracy'] < 0.6
    assert history[-1][1]['accuracy'] >= toy.target_accuracy


def test_worker_batches_cover_partition_each_epoch():
    toy = workloads.get('toy', pool=256, batch_size=16)
    part = toy.partition(4)[2]
    stream = toy.worker_batches(2, 4, seed=0)
    seen = torch.cat([next(stream)[0] for _ in range(len(part) // 16)])

    assert len(seen) == len(part)
    assert torch.equal(torch.sort(seen[:, 0]).values, torch.sort(toy._train_x[part, 0]).values)


def test_label_shards_are_contiguous_label_ranges():
    labels = torch.arange(1000) % 100

    shards = label_shards(labels, 4)

    assert [len(s) for s in shards] == [250] * 4
    for k, s in enumerate(shards):
        assert set(labels[s].tolist()) == set(range(25 * k, 25 * k + 25))


def test_dirichlet_split_is_a_partition_and_skewed():
    labels = torch.arange(5000) % 10

    parts = dirichlet_split(labels, 4, alpha=0.1, seed=1)
    again = dirichlet_split(labels, 4, alpha=0.1, seed=1)

    allidx = torch.cat(parts)
    assert len(allidx) == 5000 and len(torch.unique(allidx)) == 5000
    assert all(torch.equal(p, q) for p, q in zip(parts, again))
    # alpha = 0.1: most of each worker's data comes from few classes.
    top = [torch.bincount(labels[p], minlength=10).sort(descending=True).values[:3].sum()
           / len(p) for p in parts if len(p)]
    assert min(top) > 0.5  # IID would give 0.3


def test_pachinko_clients_sizes_and_coarse_skew():
    labels = torch.arange(10000) % 100
    coarse_of_fine = torch.arange(100) // 5

    client = pachinko_clients(labels, coarse_of_fine, n_clients=50, per_client=100, seed=0)

    assert torch.bincount(client[client >= 0]).tolist() == [100] * 50
    # Dirichlet(0.1) over 20 coarse labels: a client's data sits in few super-classes.
    shares = [torch.bincount(coarse_of_fine[labels[client == k]], minlength=20).max() / 100
              for k in range(50)]
    assert sum(shares) / 50 > 0.5
    workers = group_split(client, 5)
    assert [len(torch.unique(client[w])) for w in workers] == [10] * 5
    assert sum(len(w) for w in workers) == 5000


def test_suggest_sleep_equalises_to_slowest():
    sleeps = suggest_sleep([1.1, 0.66, 0.58, 1.2])

    assert sleeps == pytest.approx([0.1, 0.54, 0.62, 0.0])
    with pytest.raises(ValueError):
        suggest_sleep([1.0, -1.0])


def test_balance_batch_sizes_equal_compute_time():
    sec_per_sample = [0.09, 0.045, 0.0275, 0.09]

    sizes = balance_batch_sizes(sec_per_sample, total_batch=58)

    assert sum(sizes) == 58
    times = [b * s for b, s in zip(sizes, sec_per_sample)]
    assert max(times) - min(times) <= max(sec_per_sample) + 1e-9
    assert balance_batch_sizes([1.0, 1.0], total_batch=3, min_batch=1) in ([2, 1], [1, 2])


def test_cache_builds_once_and_writes_atomically(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    calls = []

    def build():
        calls.append(1)
        return {'w': torch.arange(3)}

    first = cache.load_or_build('unit', {'a': 1}, 'v1', build)
    said = capsys.readouterr().err
    second = cache.load_or_build('unit', {'a': 1}, 'v1', build)
    cache.load_or_build('unit', {'a': 2}, 'v1', build)
    cache.load_or_build('unit', {'a': 1}, 'v2', build)

    assert len(calls) == 3 and torch.equal(first['w'], second['w'])
    # a build says so (tens of seconds of silence otherwise), a cache hit says nothing
    assert said.startswith('rog_ros: preparing unit on first use') and 'unit ready in' in said
    assert capsys.readouterr().err.count('preparing unit') == 2
    files = sorted(f for f in os.listdir(tmp_path) if not f.endswith('.lock'))
    assert len(files) == 3 and all(f.startswith('unit-') and f.endswith('.pt') for f in files)
    # A torn entry is rebuilt, not fatal.
    (tmp_path / files[0]).write_bytes(b'garbage')
    for opts, code in (({'a': 1}, 'v1'), ({'a': 2}, 'v1'), ({'a': 1}, 'v2')):
        cache.load_or_build('unit', opts, code, build)
    assert len(calls) == 4


BUILD_ONCE = """
import os, sys, time
import torch
from rog_ros.workloads import cache

def build():
    with open(sys.argv[1], 'a') as log:
        log.write('built\\n')
    # stay in the build until every process has asked for the entry: without the lock each
    # would be building it now
    end = time.monotonic() + 60
    while len(os.listdir(sys.argv[2])) < 3 and time.monotonic() < end:
        time.sleep(0.05)
    return {'w': torch.arange(5)}

open(os.path.join(sys.argv[2], sys.argv[3]), 'w').close()
print(cache.load_or_build('unit', {'a': 1}, 'v1', build)['w'].sum().item())
"""


def test_processes_starting_together_build_an_entry_once(tmp_path):
    # a fresh machine's fleet or parallel tests: the first process pre-trains, the others
    # wait for its entry instead of each pre-training the same one again
    import subprocess
    import sys
    log, arrived = tmp_path / 'builds.txt', tmp_path / 'arrived'
    arrived.mkdir()
    env = dict(os.environ, **{cache.CACHE_ENV: str(tmp_path / 'cache')})
    procs = [subprocess.Popen([sys.executable, '-c', BUILD_ONCE, str(log), str(arrived), str(i)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert [o.strip() for o, _ in outs] == ['10'] * 3
    assert log.read_text().count('built') == 1


def test_a_build_reports_its_pre_training_every_fifth_and_nothing_else_does(
        tmp_path, monkeypatch, capsys):
    from rog_ros.workloads.training import pretrain
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    x, y = torch.randn(64, 3), torch.randint(0, 2, (64,))

    def build():
        net = torch.nn.Linear(3, 2)
        pretrain(net, x, y, torch.nn.functional.cross_entropy, steps=30, batch_size=8,
                 lr=0.01)
        return {'state': net.state_dict()}
    cache.load_or_build('unit', {'p': 1}, 'v1', build)
    lines = capsys.readouterr().err.splitlines()
    assert [ln for ln in lines if 'pre-training ' in ln] == [
        f'rog_ros: preparing unit: pre-training {p} %' for p in (20, 40, 60, 80, 100)]
    build()                                     # outside a cache build: quiet
    assert capsys.readouterr().err == ''


def test_an_unusable_cache_folder_falls_back_to_the_temporary_one(tmp_path, monkeypatch, capsys):
    # a container's user often cannot write its home: warn once and cache elsewhere, not a
    # traceback before training
    blocker = tmp_path / 'a_file'
    blocker.write_text('')
    monkeypatch.setenv(cache.CACHE_ENV, str(blocker / 'cache'))
    monkeypatch.setattr(cache.tempfile, 'gettempdir', lambda: str(tmp_path / 'tmp'))
    calls = []

    def build():
        calls.append(1)
        return {'w': torch.ones(2)}

    assert torch.equal(cache.load_or_build('unit', {}, 'v1', build)['w'], torch.ones(2))
    assert torch.equal(cache.load_or_build('unit', {}, 'v1', build)['w'], torch.ones(2))
    assert len(calls) == 1                          # the fallback folder cached it
    assert len(list((tmp_path / 'tmp').glob('rog_ros_cache_*/unit-*.pt'))) == 1
    err = capsys.readouterr().err
    assert err.count('cannot use the cache folder') == 2 and 'Traceback' not in err
    assert f'set {cache.CACHE_ENV} to a writable folder' in err
    # neither folder usable: built every time, still no traceback
    monkeypatch.setattr(cache.tempfile, 'gettempdir', lambda: str(blocker))
    assert torch.equal(cache.load_or_build('other', {}, 'v1', build)['w'], torch.ones(2))
    assert 'building without a cache' in capsys.readouterr().err and len(calls) == 2
    # a fallback folder that others may write is not used (its files are unpickled)
    shared = tmp_path / 'shared'
    (shared / f'rog_ros_cache_{os.getuid()}').mkdir(parents=True)
    (shared / f'rog_ros_cache_{os.getuid()}').chmod(0o777)
    monkeypatch.setattr(cache.tempfile, 'gettempdir', lambda: str(shared))
    assert torch.equal(cache.load_or_build('third', {}, 'v1', build)['w'], torch.ones(2))
    assert 'building without a cache' in capsys.readouterr().err and len(calls) == 3
    assert not list(shared.glob('*/third-*'))


def test_a_cache_folder_everyone_may_write_is_not_read(tmp_path, monkeypatch, capsys):
    # Prepare: $HOME=/tmp: another user made ~/.cache/rog_ros writable by all and planted an
    # entry under the (predictable) key; entries are unpickled, so it must not be loaded
    shared = tmp_path / 'home_cache'
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv(cache.CACHE_ENV, str(shared))
    monkeypatch.setattr(cache.tempfile, 'gettempdir', lambda: str(tmp_path / 'tmp'))
    entry = f'unit-{cache.cache_key("unit", {}, "v1")}.pt'
    torch.save({'w': torch.zeros(2)}, shared / entry)
    calls = []

    def build():
        calls.append(1)
        return {'w': torch.ones(2)}
    # Execute
    got = cache.load_or_build('unit', {}, 'v1', build)
    # Assert: built and cached in the private temporary folder, the planted entry left alone
    assert torch.equal(got['w'], torch.ones(2)) and len(calls) == 1
    assert 'everyone may write it' in capsys.readouterr().err
    assert len(list((tmp_path / 'tmp').glob(f'rog_ros_cache_*/{entry}'))) == 1


def test_a_cached_entry_that_is_a_symbolic_link_is_not_read(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / 'cache'))
    (tmp_path / 'cache').mkdir()
    planted = tmp_path / 'elsewhere.pt'
    torch.save({'w': torch.zeros(2)}, planted)
    entry = tmp_path / 'cache' / f'unit-{cache.cache_key("unit", {}, "v1")}.pt'
    entry.symlink_to(planted)
    got = cache.load_or_build('unit', {}, 'v1', lambda: {'w': torch.ones(2)})
    assert torch.equal(got['w'], torch.ones(2))
    assert 'not reading the cached' in capsys.readouterr().err


def test_a_cache_that_cannot_be_written_still_gives_the_workload(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(cache.tempfile, 'gettempdir', lambda: str(tmp_path / 'tmp'))

    def full_disk(obj, path):
        raise OSError(28, 'No space left on device')

    monkeypatch.setattr(cache, 'atomic_save', full_disk)
    assert cache.load_or_build('unit', {}, 'v1', lambda: {'x': 3}) == {'x': 3}
    assert (f'rog_ros: could not cache unit in {tmp_path} (No space left on device); the next '
            'run prepares it again') in capsys.readouterr().err
    assert not list(tmp_path.glob('**/unit-*'))


def _read_only(folder):
    """Return a ``tempfile.mkstemp`` that fails in ``folder`` as a read-only mount does."""
    real = cache.tempfile.mkstemp

    def mkstemp(*args, **kwargs):
        if os.path.abspath(str(kwargs.get('dir'))) == os.path.abspath(str(folder)):
            raise OSError(30, 'Read-only file system')
        return real(*args, **kwargs)
    return mkstemp


def test_a_read_only_cache_folder_caches_in_the_temporary_one_and_reads_it_back(
        tmp_path, monkeypatch, capsys):
    # a root-owned ~/.cache/rog_ros from a container volume: the folder exists, writes fail;
    # every node start must not pre-train again
    folder, tmp = tmp_path / 'cache', tmp_path / 'tmp'
    folder.mkdir()
    monkeypatch.setenv(cache.CACHE_ENV, str(folder))
    monkeypatch.setattr(cache.tempfile, 'gettempdir', lambda: str(tmp))
    monkeypatch.setattr(cache.tempfile, 'mkstemp', _read_only(folder))
    calls = []

    def build():
        calls.append(1)
        return {'w': torch.ones(2)}

    assert torch.equal(cache.load_or_build('unit', {}, 'v1', build)['w'], torch.ones(2))
    assert torch.equal(cache.load_or_build('unit', {}, 'v1', build)['w'], torch.ones(2))
    assert len(calls) == 1
    spare = tmp / f'rog_ros_cache_{os.getuid()}'
    key = cache.cache_key('unit', {}, 'v1')
    assert [p.name for p in spare.glob('unit-*')] == [f'unit-{key}.pt']
    assert not list(folder.iterdir())
    err = capsys.readouterr().err
    assert err.count(f'rog_ros: cannot use the cache folder {folder} (Read-only file system); '
                     f'caching in {spare} instead') == 2
    assert f'cached in {spare}, later runs skip this' in err and 'could not cache' not in err
    # entries the read-only folder holds are still read from it, without a warning
    torch.save({'w': torch.zeros(1)}, folder / f'held-{cache.cache_key("held", {}, "v1")}.pt')
    assert torch.equal(cache.load_or_build('held', {}, 'v1', build)['w'], torch.zeros(1))
    assert len(calls) == 1 and capsys.readouterr().err == ''


def test_a_write_that_fails_in_a_writable_looking_folder_is_cached_in_the_temporary_one(
        tmp_path, monkeypatch, capsys):
    # the probe file fits, the entry does not (a full disk, a root-squashed home): the entry
    # goes to the fallback, where the next run finds it
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / 'cache'))
    monkeypatch.setattr(cache.tempfile, 'gettempdir', lambda: str(tmp_path / 'tmp'))
    real_save = cache.atomic_save

    def full_here(obj, path):
        if os.path.dirname(str(path)) == str(tmp_path / 'cache'):
            raise OSError(28, 'No space left on device')
        real_save(obj, path)

    monkeypatch.setattr(cache, 'atomic_save', full_here)
    calls = []

    def build():
        calls.append(1)
        return {'x': 3}

    assert cache.load_or_build('unit', {}, 'v1', build) == {'x': 3}
    assert cache.load_or_build('unit', {}, 'v1', build) == {'x': 3}
    assert len(calls) == 1
    spare = tmp_path / 'tmp' / f'rog_ros_cache_{os.getuid()}'
    assert (f'could not cache unit in {tmp_path / "cache"} (No space left on device); cached '
            f'in {spare} instead') in capsys.readouterr().err
    assert len(list(spare.glob('unit-*.pt'))) == 1
    assert not list((tmp_path / 'cache').glob('unit-*.pt'))


READ_ONLY_RUN = """
import sys
import torch
from rog_ros.nodes import doctor_checks
from rog_ros.workloads import cache
builds = [0]
def build():
    builds[0] += 1
    return {'w': torch.ones(2)}
for _ in range(2):
    cache.load_or_build('unit', {}, 'v1', build)
(found,) = doctor_checks.check_cache()
print(builds[0], found.level, found.detail)
"""


def test_a_read_only_mount_as_cache_folder_pre_trains_once(tmp_path):
    # as on a robot: a real read-only bind mount (root in a private mount namespace)
    import shutil
    import subprocess
    import sys
    if not hasattr(os, 'geteuid') or os.geteuid() != 0 or not shutil.which('unshare'):
        pytest.skip('needs root and unshare for a read-only bind mount')
    folder, tmp = tmp_path / 'cache', tmp_path / 'tmp'
    folder.mkdir()
    torn = f'unit-{cache.cache_key("unit", {}, "v1")}.pt'
    (folder / torn).write_bytes(b'garbage')     # cannot be removed there: no traceback
    script = tmp_path / 'run.py'
    script.write_text(READ_ONLY_RUN)
    shell = (f'mount --bind {folder} {folder} && mount -o remount,ro,bind {folder} || exit 77; '
             f'"{sys.executable}" {script}')
    env = dict(os.environ, ROG_CACHE_DIR=str(folder), TMPDIR=str(tmp))
    tmp.mkdir()
    done = subprocess.run(['unshare', '-m', 'sh', '-c', shell], env=env, capture_output=True,
                          text=True, timeout=300)
    if done.returncode == 77 or 'unshare failed' in done.stderr:
        pytest.skip(f'no read-only bind mount here: {done.stderr.strip()[-200:]}')
    assert done.returncode == 0, done.stderr
    builds, level, detail = done.stdout.strip().split(' ', 2)
    assert (builds, level) == ('1', 'warn')
    spare = tmp / f'rog_ros_cache_{os.getuid()}'
    assert f'cannot write the cache folder {folder} (Read-only file system)' in detail
    assert f'in the temporary folder instead ({spare};' in detail
    assert 'could not cache' not in done.stderr and 'Traceback' not in done.stderr
    assert len(list(spare.glob('unit-*.pt'))) == 1
    assert sorted(p.name for p in folder.iterdir()) == [torn]
    assert 'runs read the entries it holds (1), and cache' in detail
