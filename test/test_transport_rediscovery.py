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
The rediscovery measurement (``python -m rog_ros.experiments.rediscovery``) on this machine.

Two processes on the loopback configuration, one stopped for a second (below the 10 s lease:
both stay matched): the tool must see both directions again at once. The long silences it
exists for (docs/faults.md, "A robot back after its lease") take a minute a run and are not
run here.
"""

import json
import os

import pytest

from rog_ros.experiments import rediscovery

pytest.importorskip('cyclonedds')


def test_a_silence_within_the_lease_is_over_as_soon_as_the_victim_runs(capsys):
    """Both directions carry a beat sent after SIGCONT within a second (measured: 0.02 s)."""
    domain = 10 + (os.getpid() * 7 + 90) % 200
    assert rediscovery.main(['--silence', '1', '--repeats', '1', '--wait', '10', '--phase', '0',
                             '--domain', str(domain)]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row['outage'] == 'stop' and row['silence'] == 1.0
    assert 0 <= row['to_peer'] < 1.0 and 0 <= row['to_victim'] < 1.0
    assert row['both'] == max(row['to_peer'], row['to_victim'])


def test_bad_options_are_refused_in_one_line(capsys):
    """A silence of 0 or no repeat is refused before any process starts, naming the fix."""
    for argv in (['--silence', '0'], ['--repeats', '0'], ['--phase', '-1'], ['--outage', 'cable']):
        with pytest.raises(SystemExit) as stop:
            rediscovery.main(argv)
        assert stop.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert '--silence' in err or '--outage' in err
