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
"""Output folders a command cannot write, or would overwrite: one line, before any work."""

import errno
import json
import os

import pytest
from rog_ros import cli, cli_sim
from rog_ros.experiments import compare as compare_mod
from rog_ros.sim import simulator

SIM = ['sim', '--workload', 'toy', '--iterations', '2']
COMPARE = ['compare', '--workload', 'toy', '--iterations', '2', '--seeds', '0',
           '--systems', 'rog:4']
FLEET_SUMMARY = {'system': 'rog:4', 'driver': 'fleet', 'workload': 'toy'}


@pytest.fixture
def nothing_runs(monkeypatch):
    """Fail the test if a simulated run or a comparison would start."""
    def forbidden(*args, **kwargs):
        raise AssertionError('started work although the output folder was bad')
    monkeypatch.setattr(simulator, 'simulate', forbidden)
    monkeypatch.setattr(compare_mod, 'compare', forbidden)


def _one_line(capsys, command: str) -> str:
    """Return the one stderr line of ``rog COMMAND``, after checking that it is one."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f'rog {command}: '), err
    return err[0]


@pytest.mark.parametrize('argv, in_the_way, kind', [
    (SIM, 'summary.json', 'dir'),
    (SIM, 'timeseries.csv', 'dir'),
    (SIM, 'events.csv', 'dir'),
    (COMPARE, 'summary.json', 'dir'),
    (COMPARE, 'report.md', 'dir'),
    (COMPARE, 'runs', 'file'),
])
def test_a_result_name_taken_by_the_other_kind_is_refused_before_the_run(
        argv, in_the_way, kind, nothing_runs, capsys, tmp_path):
    # before: the run went through and its write ended in a traceback (IsADirectoryError,
    # NotADirectoryError from compare's runs/<run>)
    out = tmp_path / 'out'
    out.mkdir()
    path = out / in_the_way
    path.mkdir() if kind == 'dir' else path.write_text('mine')
    assert cli.main(argv + ['--out', str(out)]) == 2
    line = _one_line(capsys, argv[0])
    assert f'{path} is a {"folder" if kind == "dir" else "file"}' in line
    assert 'move it away or give another folder' in line
    assert sorted(os.listdir(out)) == [in_the_way]


@pytest.mark.parametrize('in_the_way, kind', [
    ('previous', 'file'), ('previous/summary.json', 'dir')])
def test_sim_refuses_an_earlier_run_it_could_not_move_to_previous_before_the_run(
        in_the_way, kind, nothing_runs, capsys, tmp_path):
    # before: the whole run went, then moving the earlier run failed with a traceback
    # (FileExistsError: OUT/previous) and the run's results were not written
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'summary.json').write_text('{}')
    path = out / in_the_way
    if kind == 'dir':
        path.mkdir(parents=True)
    else:
        path.write_text('mine')
    assert cli.main(SIM + ['--out', str(out)]) == 2
    line = _one_line(capsys, 'sim')
    assert f'{path} is a {"folder" if kind == "dir" else "file"}' in line, line
    assert (out / 'summary.json').read_text() == '{}'


def test_compare_refuses_a_fleet_runs_folder_and_leaves_it_as_it_was(nothing_runs, capsys,
                                                                     tmp_path):
    # before: the comparison's summary.json replaced the fleet's, beside the fleet's model.pt
    out = tmp_path / 'fleet'
    out.mkdir()
    (out / 'summary.json').write_text(json.dumps(FLEET_SUMMARY))
    (out / 'model.pt').write_bytes(b'weights')
    assert cli.main(COMPARE + ['--out', str(out)]) == 2
    line = _one_line(capsys, 'compare')
    assert 'holds the results of a fleet run (rog:4' in line and 'give another folder' in line
    assert json.loads((out / 'summary.json').read_text()) == FLEET_SUMMARY
    assert sorted(os.listdir(out)) == ['model.pt', 'summary.json']


def test_sim_refuses_a_comparison_folder(nothing_runs, capsys, tmp_path, monkeypatch):
    out = tmp_path / 'cmp'
    out.mkdir()
    monkeypatch.setattr('rog_ros.experiments.comparison_folder.comparison_meta',
                        lambda folder: {'workload': 'toy'} if folder == str(out) else None)
    assert cli.main(SIM + ['--out', str(out)]) == 2
    assert 'holds a comparison of rog compare' in _one_line(capsys, 'sim')
    assert not os.listdir(out)


def test_sim_moves_an_earlier_runs_results_to_previous(capsys, tmp_path):
    # before: they were overwritten, and the earlier run's report and model stayed beside
    # the new results
    out = tmp_path / 'run'
    out.mkdir()
    (out / 'summary.json').write_text(json.dumps(FLEET_SUMMARY))
    (out / 'model.pt').write_bytes(b'weights')
    (out / 'report.md').write_text('the fleet run')
    (out / 'notes.txt').write_text('mine')
    assert cli.main(SIM + ['--out', str(out)]) == 0
    err = capsys.readouterr().err
    assert f'{out} held an earlier run; its results moved to {out}/previous' in err
    previous = out / 'previous'
    assert json.loads((previous / 'summary.json').read_text()) == FLEET_SUMMARY
    assert (previous / 'model.pt').read_bytes() == b'weights'
    assert sorted(os.listdir(previous)) == ['model.pt', 'report.md', 'summary.json']
    assert json.loads((out / 'summary.json').read_text())['workload'] == 'toy'
    assert (out / 'notes.txt').read_text() == 'mine'
    assert not (out / 'model.pt').exists() and not (out / 'report.md').exists()


@pytest.mark.parametrize('code, said', [(errno.EISDIR, 'it is a folder'),
                                        (errno.ENOTDIR, 'it is under a file, not a folder')])
def test_a_path_in_the_way_found_late_is_one_line_not_a_traceback(monkeypatch, capsys,
                                                                  tmp_path, code, said):
    # the line for what the up-front checks did not foresee (before: a traceback)
    def write(args):
        raise OSError(code, os.strerror(code), str(tmp_path / 'tmp'), None,
                      str(tmp_path / 'summary.json'))
    monkeypatch.setattr(cli_sim, '_cmd_sim', write)
    monkeypatch.setattr(cli_sim, 'add_parser', _parser_with(write))
    assert cli.main(['sim', '--toy']) == 1
    line = _one_line(capsys, 'sim')
    assert line == (f'rog sim: cannot write {tmp_path / "summary.json"}: {said}; move what is '
                    'in the way or choose another output folder')


def _parser_with(func):
    """Return an ``add_parser`` for ``rog sim`` that runs ``func``."""
    def add_parser(sub):
        """Add a ``rog sim`` that takes ``--toy`` and runs ``func``."""
        p = sub.add_parser('sim')
        p.add_argument('--toy', action='store_true')
        p.set_defaults(func=func)
    return add_parser


def _a_run(folder) -> None:
    """Write a simulated run's summary.json and timeseries.csv into ``folder``."""
    folder.mkdir()
    (folder / 'summary.json').write_text(json.dumps({'system': 'rog:4', 'workload': 'toy'}))
    (folder / 'timeseries.csv').write_text('time_s,iteration,accuracy\n0,0,0.5\n1,1,0.6\n')


def test_report_into_a_folder_it_cannot_write_says_why_and_what_to_do(capsys, tmp_path,
                                                                      monkeypatch):
    # before: 'rog report: [Errno 30] Read-only file system: .../accuracy_vs_time.png'
    run = tmp_path / 'run'
    _a_run(run)

    def read_only(path, *args, **kwargs):
        raise OSError(errno.EROFS, 'Read-only file system', str(path))
    monkeypatch.setattr('rog_ros.experiments.report.report_run', read_only)
    assert cli.main(['report', str(run)]) == 2
    line = _one_line(capsys, 'report')
    assert line == (f'rog report: cannot write {run} (Read-only file system): the report and '
                    f'its plots are written into {run}; make it writable, or copy the run to a '
                    'folder you can write and report that')


def test_report_names_a_folder_in_the_way(capsys, tmp_path):
    # before: 'rog report: [Errno 21] Is a directory: ...'
    run = tmp_path / 'run'
    _a_run(run)
    (run / 'report.md').mkdir()
    assert cli.main(['report', str(run)]) == 2
    line = _one_line(capsys, 'report')
    assert line == (f'rog report: {run / "report.md"} is a folder, where the report reads or '
                    'writes a file; move it away')
