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
README's test command really runs the wall-clock tests one at a time.

conftest.py schedules pytest-xdist by its own units; the `xdist_group` marks it used before
were silently ignored under pytest 9 (the wall-clock tests ran two at once, every module
fixture once per worker). This runs a small suite under the same command and checks on which
worker, in which order and how often each thing ran.
"""

import os
from pathlib import Path
import re
import subprocess
import sys

from conftest import scheduling_unit, WALL_CLOCK_GROUP
import pytest

pytest.importorskip('xdist')

RECORDER = """
import os, time
import pytest


def record(what):
    with open(os.environ['RECORD'], 'a') as f:
        f.write(f"{what} {os.environ.get('PYTEST_XDIST_WORKER', '-')} {time.monotonic()}\\n")
"""

WALL_CLOCK_MODULE = RECORDER + """

@pytest.fixture(scope='module', params=['a', 'b', 'c'])
def fleet(request):
    record('setup-' + request.param)
    return request.param


@pytest.mark.parametrize('i', range(3))
def test_uses_the_fleet(fleet, i):
    record('start')
    time.sleep(0.05)
    record('end')


def test_alone():
    record('start')
    time.sleep(0.05)
    record('end')
"""

VIRTUAL_TIME_MODULE = RECORDER + """

@pytest.fixture(scope='module')
def simulation():
    record('setup-simulation')


@pytest.mark.parametrize('i', range(12))
def test_reads_the_simulation(simulation, i):
    time.sleep(0.05)
"""


def test_the_units_are_virtual_time_modules_and_one_wall_clock_group():
    root = Path(__file__).resolve().parent.parent
    # a module fixture: the module is one unit; otherwise each test is one
    assert scheduling_unit('test/test_sim_regime.py::test_x', root) == 'test/test_sim_regime.py'
    assert scheduling_unit('test/test_outage_rsp.py::test_y[1]', root) == \
        'test/test_outage_rsp.py::test_y[1]'
    assert scheduling_unit('test/test_lint.py::test_flake8', root) == \
        'test/test_lint.py::test_flake8'
    assert scheduling_unit('test/test_fleet_run.py::test_z[rog]') == WALL_CLOCK_GROUP
    assert scheduling_unit('test/test_chaos_fleet.py::test_a') == WALL_CLOCK_GROUP
    # a module whose name only starts like a virtual-time pattern's prefix is not one
    assert scheduling_unit('test/test_simulated_fleet.py::t') == WALL_CLOCK_GROUP


def test_readmes_command_runs_the_wall_clock_tests_one_at_a_time_on_one_worker(tmp_path):
    suite = tmp_path / 'suite'
    suite.mkdir()
    (suite / 'conftest.py').write_text((Path(__file__).parent / 'conftest.py').read_text())
    (suite / 'test_fleet_things.py').write_text(WALL_CLOCK_MODULE)
    (suite / 'test_more_fleet_things.py').write_text(WALL_CLOCK_MODULE)
    (suite / 'test_sim_things.py').write_text(VIRTUAL_TIME_MODULE)
    record = tmp_path / 'record.txt'
    proc = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
                           '-n', '2', '--dist', 'loadgroup', str(suite)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, 'RECORD': str(record)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [line.split() for line in record.read_text().splitlines()]
    setups = sorted(what for what, _, _ in lines if what.startswith('setup-'))
    # each module fixture once per parameter and module: not once per worker
    assert setups == ['setup-a', 'setup-a', 'setup-b', 'setup-b', 'setup-c', 'setup-c',
                      'setup-simulation'], setups
    events = [(float(t), what, worker) for what, worker, t in lines
              if what in ('start', 'end')]
    assert len(events) == 2 * 2 * 10
    assert len({worker for _, _, worker in events}) == 1, events      # one worker
    events.sort()
    kinds = [what for _, what, _ in events]
    assert kinds == ['start', 'end'] * 20, kinds                      # never two at once


def test_tests_spread_one_by_one_share_no_module_state():
    # A module spread test by test may run its tests on different workers, in any order: a
    # module-level set or list one test fills and another reads (test_protocol_restart's
    # crash states did) sees only part of the run. Such a module must share through a cached
    # helper or a wider fixture (which keeps it one unit), or not share at all.
    root = Path(__file__).resolve().parent.parent
    mutable = re.compile(r'^[A-Za-z_]\w*(\s*:[^=\n]+)?\s*=\s*'
                         r'(set\(\)|\[\]|\{\}|dict\(\)|list\(\)|(collections\.)?'
                         r'(defaultdict|Counter|deque)\()', re.MULTILINE)
    offenders = []
    for module in sorted((root / 'test').glob('test_*.py')):
        nodeid = f'test/{module.name}::t'
        if scheduling_unit(nodeid, root) == nodeid and mutable.search(module.read_text()):
            offenders.append(module.name)
    assert not offenders, offenders
