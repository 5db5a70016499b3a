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
"""A run is computed once per configuration; old runs are redone; bars say whose they are."""

import json
import os

import pytest
from rog_ros.experiments import compare as compare_mod
from rog_ros.experiments import reproduce as reproduce_mod
from rog_ros.experiments.compare import compare, run_config, RUN_VERSION
from rog_ros.experiments.comparison_folder import run_dir

TOY = {'iterations': 3, 'jobs_parallel': 1, 'sim_options': {'evaluations': 2}}
"""A toy comparison's settings: three iterations, two evaluations, in this process."""


def _count_runs(monkeypatch) -> list:
    """Run compare's simulations in this process; return the list their configs go to."""
    made = []
    real = compare_mod.simulate

    def counted(cfg, progress=None):
        """Simulate ``cfg`` and note its configuration."""
        made.append(run_config(cfg))
        return real(cfg, progress)
    monkeypatch.setattr(compare_mod, 'simulate', counted)
    monkeypatch.setattr(os, 'cpu_count', lambda: 1)      # reproduce's compares: no processes
    return made


def _files(d: str) -> dict:
    """Return the bytes of every file of run directory ``d``, by name (not its folders)."""
    out = {}
    for name in sorted(os.listdir(d)):
        if os.path.isdir(os.path.join(d, name)):
            continue
        with open(os.path.join(d, name), 'rb') as f:
            out[name] = f.read()
    return out


def _add_report_files(stale: str) -> None:
    """Give the run in ``stale`` a report and a plot of its own, and a folder below it."""
    for name in ('report.md', 'accuracy_vs_time.png'):
        with open(os.path.join(stale, name), 'w') as f:
            f.write('of the run made with latency_s 0.01\n')
    os.makedirs(os.path.join(stale, 'previous'))


def _summary(d: str) -> dict:
    """Return the ``summary.json`` of directory ``d``."""
    with open(os.path.join(d, 'summary.json')) as f:
        return json.load(f)


def test_a_run_of_the_identical_configuration_is_copied_and_no_other(tmp_path, monkeypatch,
                                                                     capsys):
    # Prepare: a finished comparison of bsp and rog:4
    made = _count_runs(monkeypatch)
    a, b = str(tmp_path / 'a'), str(tmp_path / 'b')
    compare('toy', 'clean', ['bsp', 'rog:4'], 2, [0], a, quiet=True, **TOY)
    assert [c['label'] for c in made] == ['bsp', 'rog:4']
    made.clear()
    # Execute: another comparison that shares rog:4, seed 0
    compare('toy', 'clean', ['rog:4', 'ssp:4'], 2, [0], b, reuse_from=[a, b], **TOY)
    # Assert: only ssp:4 was run; rog:4's files are a's, byte for byte; the part is complete
    assert [c['label'] for c in made] == ['ssp:4']
    assert _files(run_dir(b, 'rog:4', 0)) == _files(run_dir(a, 'rog:4', 0))
    err = capsys.readouterr().err
    assert f'rog compare: 1 run of the identical configuration copied from {a}' in err
    assert f'1 finished run in {os.path.join(b, "runs")} reused, 1 to run' in err
    table = {r['system']: r for r in _summary(b)['systems']}
    assert sorted(table) == ['rog:4', 'ssp:4']
    assert table['rog:4']['runs'] == 1 and table['rog:4']['failed'] == 0
    assert table['rog:4']['bytes_up'] == _summary(run_dir(a, 'rog:4', 0))['bytes_up']
    # Execute / Assert: a copy cut short (no summary yet) is copied again, not run
    made.clear()
    os.remove(os.path.join(run_dir(b, 'rog:4', 0), 'summary.json'))
    compare('toy', 'clean', ['rog:4', 'ssp:4'], 2, [0], b, quiet=True, reuse_from=[a], **TOY)
    assert made == []
    assert _files(run_dir(b, 'rog:4', 0)) == _files(run_dir(a, 'rog:4', 0))
    # Execute / Assert: the same label with any other setting is run, never copied
    run_config_of_a = _summary(run_dir(a, 'rog:4', 0))['run_config']
    made.clear()
    others = [({'overrides': {'rog:4': {'ordering': False}}}, TOY),
              ({'labels': {'rog:4#x': 'rog:4'}, 'systems': ['rog:4#x']}, TOY),
              ({}, dict(TOY, iterations=4)),
              ({}, dict(TOY, sim_options={'evaluations': 3})),
              ({}, dict(TOY, sim_options={'evaluations': 2, 'latency_s': 0.01}))]
    for i, (options, toy) in enumerate(others):
        systems = options.pop('systems', ['rog:4'])
        compare('toy', 'clean', systems, 2, [0], str(tmp_path / f'c{i}'), quiet=True,
                reuse_from=[a], **options, **toy)
    assert len(made) == len(others)
    assert all(c['label'] == 'rog:4' and c != run_config_of_a for c in made)


def test_a_copy_over_a_run_of_other_settings_leaves_none_of_its_files_and_says_so(
        tmp_path, monkeypatch, capsys):
    """Replace every file of a stale run by the copy, and count it among the stale runs."""
    # the copy overwrote only the files its source had: an older report.md and plot stayed
    # beside the copied data, and the stale run it replaced went unmentioned
    made = _count_runs(monkeypatch)
    a, b = str(tmp_path / 'a'), str(tmp_path / 'b')
    compare('toy', 'clean', ['rog:4'], 2, [0], a, quiet=True, **TOY)
    slow = dict(TOY, sim_options={'evaluations': 2, 'latency_s': 0.01})
    compare('toy', 'clean', ['rog:4', 'ssp:4'], 2, [0], b, quiet=True, **slow)
    stale = run_dir(b, 'rog:4', 0)
    _add_report_files(stale)
    made.clear()
    # Execute: b again at the default latency, with a to copy from
    compare('toy', 'clean', ['rog:4', 'ssp:4'], 2, [0], b, reuse_from=[a], **TOY)
    # Assert: rog:4 is a's copy, file for file (the folder below is kept); ssp:4 ran again
    assert [c['label'] for c in made] == ['ssp:4']
    assert _files(stale) == _files(run_dir(a, 'rog:4', 0)) and 'report.md' not in _files(stale)
    assert os.path.isdir(os.path.join(stale, 'previous'))
    assert not any(n.endswith('.part') for n in os.listdir(stale))
    err = capsys.readouterr().err
    assert (f'rog compare: 2 run(s) in {os.path.join(b, "runs")} were made with other settings '
            '(latency_s 0.01): replacing them (1 with copies, 1 run again)') in err
    # Execute / Assert: only a copy replaces it: said so
    compare('toy', 'clean', ['rog:4'], 2, [0], b, quiet=True, **slow)
    made.clear()
    compare('toy', 'clean', ['rog:4'], 2, [0], b, reuse_from=[a], **TOY)
    assert made == []
    assert (f'rog compare: 1 run(s) in {os.path.join(b, "runs")} were made with other settings '
            '(latency_s 0.01): replacing them with copies') in capsys.readouterr().err
    assert _files(stale) == _files(run_dir(a, 'rog:4', 0))


def test_a_rerun_over_a_run_of_other_settings_leaves_none_of_its_files(tmp_path, monkeypatch):
    """Replace every file of a stale run that is run again, as a copy over it does."""
    # a rerun wrote its three files over the stale run's: its report.md and plots stayed
    made = _count_runs(monkeypatch)
    out = str(tmp_path / 'cmp')
    compare('toy', 'clean', ['rog:4'], 2, [0], out, quiet=True,
            **dict(TOY, sim_options={'evaluations': 2, 'latency_s': 0.01}))
    stale = run_dir(out, 'rog:4', 0)
    _add_report_files(stale)
    made.clear()
    # Execute: the comparison at the default latency
    compare('toy', 'clean', ['rog:4'], 2, [0], out, quiet=True, **TOY)
    # Assert: run again; only its own files are left, and the folder below
    assert len(made) == 1
    assert sorted(_files(stale)) == ['events.csv', 'summary.json', 'timeseries.csv']
    assert _summary(stale)['run_config']['latency_s'] == 0.005
    assert os.path.isdir(os.path.join(stale, 'previous'))


def test_a_stale_run_stays_until_its_rerun_has_finished(tmp_path, monkeypatch):
    """Keep a stale run's files while its replacement runs: a failed start loses nothing."""
    _count_runs(monkeypatch)
    out = str(tmp_path / 'cmp')
    compare('toy', 'clean', ['bsp'], 2, [0], out, quiet=True,
            **dict(TOY, sim_options={'evaluations': 2, 'latency_s': 0.01}))
    stale = run_dir(out, 'bsp', 0)
    before = _files(stale)
    seen = []

    def interrupted(cfg, progress=None):
        """Look at the run's folder as the run starts, then stop as Ctrl-C would."""
        seen.append(_files(stale))
        raise KeyboardInterrupt
    monkeypatch.setattr(compare_mod, 'simulate', interrupted)
    # Execute
    with pytest.raises(KeyboardInterrupt):
        compare('toy', 'clean', ['bsp'], 2, [0], out, quiet=True, **TOY)
    # Assert: the stale run was whole while the new one ran, and still is
    assert seen == [before] and _files(stale) == before


def test_a_run_writes_its_summary_after_its_curves(tmp_path, monkeypatch):
    """Write ``summary.json`` last: it marks the run finished for reuse and reports."""
    from rog_ros import metrics
    order = []
    real = metrics.atomic_write

    def noted(path, data, *args, **kwargs):
        """Note the file's name, then write it."""
        order.append(os.path.basename(path))
        return real(path, data, *args, **kwargs)
    monkeypatch.setattr(metrics, 'atomic_write', noted)
    compare('toy', 'clean', ['bsp'], 2, [0], str(tmp_path / 'cmp'), quiet=True, **TOY)
    assert order[-3:] == ['timeseries.csv', 'events.csv', 'summary.json']


def test_a_run_made_before_the_server_engines_byte_counts_is_run_again(tmp_path, monkeypatch,
                                                                       capsys):
    # Prepare: a finished run, made as before run_version was recorded, with its old bytes
    made = _count_runs(monkeypatch)
    out = str(tmp_path / 'cmp')
    compare('toy', 'clean', ['bsp'], 2, [0], out, quiet=True, **TOY)
    path = os.path.join(run_dir(out, 'bsp', 0), 'summary.json')
    summary = _summary(run_dir(out, 'bsp', 0))
    assert summary['run_version'] == RUN_VERSION == 2
    new_bytes = summary['bytes_up']
    del summary['run_version']
    summary['bytes_up'] = new_bytes - 1000
    with open(path, 'w') as f:
        json.dump(summary, f)
    made.clear()
    # Execute: the comparison again
    compare('toy', 'clean', ['bsp'], 2, [0], out, **TOY)
    # Assert: run again, and said why; its bytes are the server engine's again
    assert len(made) == 1
    err = capsys.readouterr().err
    said = ('an older rog, run version 1 not 2: its byte counts were not the server '
            "engine's")
    assert (f'1 run(s) in {os.path.join(out, "runs")} were made with other settings ({said}): '
            'running them again') in err
    summary = _summary(run_dir(out, 'bsp', 0))
    assert summary['bytes_up'] == new_bytes and summary['run_version'] == RUN_VERSION
    # a run of this version is reused
    made.clear()
    compare('toy', 'clean', ['bsp'], 2, [0], out, quiet=True, **TOY)
    assert made == []


def test_a_rerun_into_the_same_folder_with_another_policy_or_latency_runs_again(
        tmp_path, monkeypatch, capsys):
    # Prepare: a finished rog:4 run
    made = _count_runs(monkeypatch)
    out = str(tmp_path / 'cmp')
    compare('toy', 'clean', ['rog:4'], 2, [0], out, quiet=True, **TOY)
    made.clear()
    # Execute: the same label into the same folder with other policy overrides, then latency
    compare('toy', 'clean', ['rog:4'], 2, [0], out,
            overrides={'rog:4': {'ordering': False}}, **TOY)
    err = capsys.readouterr().err
    compare('toy', 'clean', ['rog:4'], 2, [0], out, quiet=True,
            **dict(TOY, sim_options={'evaluations': 2, 'latency_s': 0.01}))
    # Assert: each ran again (the stored run's setting named), and the last one is reused
    assert [(c['policy_overrides'], c['latency_s']) for c in made] == [
        ({'ordering': False}, 0.005), ({}, 0.01)]
    assert 'other settings (policy_overrides {}): running them again' in err
    made.clear()
    compare('toy', 'clean', ['rog:4'], 2, [0], out, quiet=True,
            **dict(TOY, sim_options={'evaluations': 2, 'latency_s': 0.01}))
    assert made == []


def test_the_progress_bar_and_the_lines_carry_the_callers_label(tmp_path, capsys):
    out = str(tmp_path / 'cmp')
    compare('toy', 'clean', ['bsp'], 2, [0], out, prefix='reproduce: thresholds', **TOY)
    err = capsys.readouterr().err
    assert 'reproduce: thresholds: 100%' in err and '1/1' in err
    assert 'rog compare' not in err


def test_reproduce_runs_each_configuration_once_and_every_part_is_complete(tmp_path,
                                                                           monkeypatch, capsys):
    # Prepare: a small paper: rog:4 on outdoors, seed 0, is in the main comparison, the
    # thresholds and the ablations
    made = _count_runs(monkeypatch)
    monkeypatch.setattr(reproduce_mod, 'MAIN_SYSTEMS', ['bsp', 'rog:4'])
    monkeypatch.setattr(reproduce_mod, 'THRESHOLDS', [4, 8])
    monkeypatch.setattr(reproduce_mod, 'ABLATIONS',
                        {'rog:4': {}, 'rog:4-no-ordering': {'ordering': False}})
    out = str(tmp_path / 'repro')
    parts = {'toy-indoors': ['bsp', 'rog:4'], 'toy-outdoors': ['bsp', 'rog:4'],
             'toy-thresholds': ['rog:4', 'rog:8', 'ssp:4', 'ssp:8'],
             'toy-ablations': ['rog:4', 'rog:4-no-ordering']}

    def reproduce():
        """Reproduce the small paper with two robots and three iterations, on seed 0."""
        reproduce_mod.reproduce(out, workloads=('toy',), seeds=(0,), workers=2, iterations=3,
                                eacol_m=False)
    # Execute
    reproduce()
    # Assert: 10 runs in the parts, 8 computed, none twice; each part holds all of its runs
    keys = [json.dumps(c, sort_keys=True) for c in made]
    assert len(keys) == len(set(keys)) == 8
    assert sum(len(v) for v in parts.values()) == 10
    for part, labels in parts.items():
        assert _summary(os.path.join(out, part))['meta']['systems'] == labels
        assert all('error' not in _summary(run_dir(os.path.join(out, part), label, 0))
                   for label in labels)
    shared = [_files(run_dir(os.path.join(out, p), 'rog:4', 0))
              for p in ('toy-outdoors', 'toy-thresholds', 'toy-ablations')]
    assert shared[0] == shared[1] == shared[2]
    err = capsys.readouterr().err
    assert all(f'reproduce: {part}: 100%' in err for part in parts)
    assert 'rog compare' not in err
    # Execute / Assert: interrupted before the ablations' copy, and the main comparison's rog:4
    # lost: a rerun copies both from the thresholds and runs nothing
    made.clear()
    os.remove(os.path.join(run_dir(os.path.join(out, 'toy-ablations'), 'rog:4', 0),
                           'summary.json'))
    os.remove(os.path.join(run_dir(os.path.join(out, 'toy-outdoors'), 'rog:4', 0),
                           'summary.json'))
    reproduce()
    assert made == []
    assert [_files(run_dir(os.path.join(out, p), 'rog:4', 0))
            for p in ('toy-outdoors', 'toy-ablations')] == shared[1:]


@pytest.mark.parametrize('paper', ['adacomp', 'gsp'])
def test_the_reference_reproductions_show_progress_under_their_name(tmp_path, monkeypatch,
                                                                    paper):
    # Prepare: compare stood in for by a recorder that stops the reproduction
    from rog_ros.experiments import reproduce_refs
    asked = []

    def recorded(*args, **kw):
        """Note compare's options and stop the reproduction there."""
        asked.append(kw)
        raise KeyboardInterrupt
    monkeypatch.setattr(reproduce_refs, 'compare', recorded)
    run = getattr(reproduce_refs, f'reproduce_{paper}')
    # Execute
    with pytest.raises(KeyboardInterrupt):
        run(str(tmp_path / paper), quick=True)
    # Assert: its runs show a progress bar, labelled with the reproduction (it had none)
    assert len(asked) == 1
    assert not asked[0].get('quiet') and asked[0]['prefix'] == f'reproduce {paper}'


def test_a_stored_run_is_judged_from_one_read_of_its_summary(tmp_path, monkeypatch):
    # reuse read a stored summary up to three times (a file rewritten in between could
    # pass one check on one version and another on the next); one that is JSON but not an
    # object raised AttributeError out of rog compare
    a = str(tmp_path / 'a')
    compare('toy', 'clean', ['bsp'], 2, [0], a, quiet=True, **TOY)
    reads = []
    real = compare_mod._stored_summary

    def counted(d):
        """Read ``d``'s summary; note it."""
        reads.append(d)
        return real(d)
    monkeypatch.setattr(compare_mod, '_stored_summary', counted)
    made = _count_runs(monkeypatch)
    compare('toy', 'clean', ['bsp'], 2, [0], str(tmp_path / 'b'), quiet=True, reuse_from=[a],
            **TOY)
    assert made == [] and reads.count(run_dir(a, 'bsp', 0)) == 1
    # a summary missing at that one read (a concurrent comparison writes it just after)
    # is run, with no second look: the second read found it and the check then raised
    missing = {run_dir(a, 'bsp', 0)}
    monkeypatch.setattr(compare_mod, '_stored_summary',
                        lambda d: None if d in missing and not missing.discard(d) else real(d))
    compare('toy', 'clean', ['bsp'], 2, [0], str(tmp_path / 'c'), quiet=True, reuse_from=[a],
            **TOY)
    assert len(made) == 1
    made.clear()
    monkeypatch.setattr(compare_mod, '_stored_summary', counted)
    with open(os.path.join(run_dir(a, 'bsp', 0), 'summary.json'), 'w') as f:
        f.write('[1, 2]')
    compare('toy', 'clean', ['bsp'], 2, [0], a, quiet=True, **TOY)
    assert len(made) == 1 and _summary(run_dir(a, 'bsp', 0))['system'] == 'bsp'
