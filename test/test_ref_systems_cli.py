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
"""AdaComp and GSP systems in ``rog compare`` and ``rog reproduce`` next to Rog's engines."""

from __future__ import annotations

import json
import os

from rog_ros import cli
from rog_ros.sim import systems


def test_registered_names():
    names = systems.names()
    for name in ('adacomp', 'asgd', 'comp-asgd', 'gsp', 'gsp+gds', 'asp'):
        assert name in names
    assert systems.lookup('adacomp:0.1#x') is systems.lookup('adacomp')
    assert systems.lookup('rog:4') is None


def test_compare_runs_rog_and_reference_systems_on_one_workload(tmp_path, capsys):
    out = str(tmp_path / 'cmp')
    rc = cli.main(['compare', '--workload', 'toy', '--trace', 'clean', '--systems',
                   'ssp:2,adacomp,gsp+gds', '--workers', '3', '--seeds', '0',
                   '--iterations', '6', '--jobs', '1', '--out', out])
    assert rc == 0
    with open(os.path.join(out, 'summary.json')) as f:
        table = json.load(f)['systems']
    assert [r['system'] for r in table] == ['ssp:2', 'adacomp', 'gsp+gds']
    assert all(r['bytes_up'] > 0 and r['final_accuracy'] is not None for r in table)
    assert 'adacomp' in capsys.readouterr().out


def test_bad_names_are_one_line_errors(tmp_path, capsys):
    rc = cli.main(['compare', '--systems', 'nosuch', '--out', str(tmp_path / 'x')])
    assert rc == 2 and 'unknown sync system' in capsys.readouterr().err
    rc = cli.main(['reproduce', 'nosuch', '--out', str(tmp_path / 'y')])
    assert rc == 2 and 'unknown paper' in capsys.readouterr().err
    assert not os.path.exists(tmp_path / 'y')
    rc = cli.main(['sim', '--workload', 'toy', '--sync', 'adacomp:2', '--iterations', '2'])
    assert rc == 2 and 'compression ratio' in capsys.readouterr().err


def test_sim_runs_a_reference_system_with_its_own_defaults(capsys):
    rc = cli.main(['sim', '--workload', 'toy', '--trace', 'clean', '--sync', 'gsp',
                   '--workers', '3', '--iterations', '4'])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary['system'] == 'gsp' and summary['staleness'] == 3
