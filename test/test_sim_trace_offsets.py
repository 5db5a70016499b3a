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
"""A run's summary says where in a trace file each robot's replay started."""

import os

import pytest
from rog_ros import cli
from rog_ros.sim.simulator import file_offsets, make_traces, SimConfig, simulate


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fifty_second_trace(path):
    """Write a 50 s trace file: 50 Mbit/s for 10 s, then 2 Mbit/s."""
    with open(path, 'w') as f:
        f.write(''.join(f'{t},{50 if t < 10 else 2}\n' for t in range(0, 50, 5)))


def _summary(trace: str, system: str = 'bsp', seed: int = 0) -> dict:
    """Return the summary of a tiny four-robot toy run of ``system`` on ``trace``."""
    return simulate(SimConfig(workload='toy', system=system, workers=4, trace=trace, seed=seed,
                              iterations=3, evaluations=1, eval_samples=32)).summary()


@pytest.mark.parametrize('system', ['bsp', 'adacomp'])
def test_a_file_traces_offsets_are_in_the_summary(tmp_path, system):
    trace = str(tmp_path / 'fifty.csv')
    _fifty_second_trace(trace)
    for seed in (0, 1):
        offsets = _summary(trace, system, seed)['trace_offsets_s']
        assert offsets == pytest.approx(file_offsets(50, 4, seed))
        assert offsets == pytest.approx([off for _, off in make_traces(trace, 4, seed)])
    assert _summary(trace)['trace_offsets_s'] == pytest.approx([4.6, 13.3, 26.7, 43.0],
                                                               abs=0.05)


def test_presets_are_not_offset(tmp_path):
    trace = str(tmp_path / 'fifty.csv')
    _fifty_second_trace(trace)
    assert _summary('indoors')['trace_offsets_s'] is None
    mixed = _summary(f'{trace},indoors')['trace_offsets_s']
    assert mixed[1] is None and mixed[3] is None
    assert mixed[0] == pytest.approx(file_offsets(50, 4, 0)[0])
    assert mixed[2] == pytest.approx(file_offsets(50, 4, 0)[2])


@pytest.mark.parametrize('command', ['sim', 'compare'])
def test_trace_help_says_a_file_is_replayed_from_per_robot_offsets(command, capsys, monkeypatch):
    monkeypatch.setenv('COLUMNS', '400')           # one line per option: no wrapping
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args([command, '--help'])
    text = ' '.join(capsys.readouterr().out.split())
    assert 'a file is replayed from a different offset per robot and seed, looping' in text


def test_readme_says_a_file_is_replayed_from_per_robot_offsets():
    with open(os.path.join(ROOT, 'README.md')) as f:
        text = ' '.join(f.read().split())
    assert 'a file is replayed from a different offset per robot and seed, looping' in text
    assert '`trace_offsets_s`' in text


def test_a_trace_file_is_read_once_while_its_bytes_stay(tmp_path, monkeypatch):
    # a run read its file twice (links, offsets) and rog compare's workers once per run: a
    # record of a million rows took seconds each time
    from rog_ros.net import traces
    from rog_ros.sim import simulator
    reads = []
    real = traces.load_trace

    def counting(path, *args, **kwargs):
        """Count the reads of ``path`` and read it."""
        reads.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(traces, 'load_trace', counting)
    trace = str(tmp_path / 'fifty.csv')
    _fifty_second_trace(trace)
    for seed in (0, 1):
        make_traces(trace, 4, seed)
        simulator.trace_offsets(trace, 4, seed)
    assert reads == [trace]
    with open(trace, 'a') as f:
        f.write('50,7\n')                # rewritten under its name: read anew
    assert make_traces(trace, 1, 0)[0][0].duration_s == pytest.approx(55.0)
    assert reads == [trace, trace]


def test_a_file_rewritten_between_its_hash_and_its_read_is_not_cached_under_the_old_bytes(
        tmp_path, monkeypatch):
    # the cache hashed the file and then read it again: a file rewritten in between was
    # cached under the old bytes' hash, and every later run on those bytes got the new trace
    import hashlib
    from rog_ros.sim import simulator
    trace = str(tmp_path / 'fifty.csv')
    _fifty_second_trace(trace)
    with open(trace, 'rb') as f:
        first = f.read()
    real = hashlib.sha256

    class Rewriting:
        """A hashlib whose sha256 rewrites the trace file once it has hashed its bytes."""

        @staticmethod
        def sha256(data=b''):
            """Hash ``data``, then append a row to the file (a writer beside the run)."""
            digest = real(data)
            with open(trace, 'a') as f:
                f.write('50,7\n')
            return digest

    monkeypatch.setattr(simulator, 'hashlib', Rewriting)
    simulator.trace_file(trace)
    monkeypatch.setattr(simulator, 'hashlib', hashlib)
    with open(trace, 'wb') as f:
        f.write(first)                  # the bytes hashed first, again
    assert simulator.trace_file(trace).duration_s == pytest.approx(50.0)


def test_a_run_records_the_offsets_and_digest_of_the_bytes_it_replayed(tmp_path, monkeypatch):
    # the summary's offsets were worked out after the run from the file read again, and its
    # digest from the file read before the run: a file rewritten meanwhile (a recorder still
    # writing it) gave a summary of other bytes than the ones replayed
    import hashlib
    from rog_ros.net import traces
    trace = str(tmp_path / 'fifty.csv')
    _fifty_second_trace(trace)
    with open(trace, 'rb') as f:
        replayed = hashlib.sha256(hashlib.sha256(f.read()).digest()).hexdigest()[:12]
    real = traces.load_trace

    def rewriting(path, *args, **kwargs):
        """Read ``path``, then append a row to it (a writer beside the run)."""
        out = real(path, *args, **kwargs)
        with open(path, 'a') as f:
            f.write(f'{out.duration_s:g},7\n')
        return out

    monkeypatch.setattr(traces, 'load_trace', rewriting)
    summary = _summary(trace)
    assert summary['trace_offsets_s'] == pytest.approx(file_offsets(50, 4, 0))
    assert summary['trace_digest'] == replayed


def test_the_trace_cache_serves_threads_at_once(tmp_path, monkeypatch):
    # the cache (an lru_cache before) looked a file up and then moved it to the newest end:
    # another thread's eviction in between raised a KeyError out of trace_file
    import collections
    import threading
    from rog_ros.net import traces
    from rog_ros.sim import simulator
    files = []
    for k in range(3):
        files.append(str(tmp_path / f'{k}.csv'))
        with open(files[-1], 'w') as f:
            f.write(f'0,{k + 1}\n1,{k + 2}\n2,{k + 3}\n')
    parsed = {path: traces.load_trace(path) for path in files}
    monkeypatch.setattr(traces, 'load_trace', lambda path, **_: parsed[path])
    monkeypatch.setattr(simulator, 'TRACE_CACHE_SIZE', 2)
    other = threading.Thread(target=lambda: [simulator.trace_file(p) for p in files[1:]])

    class Interleaved(collections.OrderedDict):
        """A cache whose first hit lets another thread read the two other files first."""

        def get(self, key, default=None):
            """Look ``key`` up; at the first hit, run the other thread (1 s at most)."""
            got = super().get(key, default)
            if got is not None and not other.is_alive() and other.ident is None:
                other.start()
                other.join(timeout=1.0)     # (it waits for the cache where that is locked)
            return got

    monkeypatch.setattr(simulator, '_trace_cache', Interleaved())
    simulator.trace_file(files[0])
    # Execute: a hit, and another thread that evicts it meanwhile
    got = simulator.trace_file(files[0])
    other.join()
    # Assert
    assert got is parsed[files[0]]
    assert all(simulator.trace_file(p) is parsed[p] for p in files)
