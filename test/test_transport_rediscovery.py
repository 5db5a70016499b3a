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
import signal
import subprocess
import sys
import time

import dds_domains
import pytest

from rog_ros.experiments import rediscovery

pytest.importorskip('cyclonedds')


def test_a_silence_within_the_lease_is_over_as_soon_as_the_victim_runs(capsys):
    """Both directions carry a beat sent after SIGCONT within a second (measured: 0.02 s)."""
    domain = _domain(90)
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
        assert argv[0] in err


def test_a_link_outage_on_the_loopback_configuration_is_refused(capsys):
    """
    ``--outage link`` (or ``--netns``) with the default ``--config loopback`` is refused at once.

    The two processes sit in two network namespaces there, which 127.0.0.1 cannot reach
    across: the run waited 30 s for them to meet and ended in a traceback.
    """
    for argv in (['--outage', 'link'], ['--netns', '--config', 'loopback'], ['--domain', '233']):
        with pytest.raises(SystemExit) as stop:
            rediscovery.main(argv + ['--repeats', '1'])
        assert stop.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert ('--config wifi' in err) if argv[0] != '--domain' else ('0..232' in err)


def _domain(offset: int) -> int:
    """Return a DDS domain of this test process (others run at once on this machine)."""
    return dds_domains.domain(f'{__name__}:{offset}')


def test_a_configuration_cyclone_refuses_is_said_in_one_line_at_once(capsys):
    """
    A process whose Cyclone refuses the configuration ends the run at once, saying why.

    Before, its stderr went nowhere and the run waited 30 s for the two to meet, then raised.
    """
    bad = ('<CycloneDDS><Domain Id="any"><Discovery><NoSuchSetting>1</NoSuchSetting>'
           '</Discovery></Domain></CycloneDDS>')
    start = time.monotonic()
    assert rediscovery.main(['--extra', bad, '--silence', '1', '--repeats', '1', '--phase', '0',
                             '--domain', str(_domain(91))]) == 1
    assert time.monotonic() - start < 20
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'before the two met' in err[0] and 'NoSuchSetting' in err[0]


def _children(pid: int) -> list:
    """Return the ids of the processes whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open(f'/proc/{entry}/stat') as stat:
                    fields = stat.read().rsplit(')', 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def _state(pid: int) -> str:
    """Return the state letter of process ``pid`` ('' when it is gone or a zombie)."""
    try:
        with open(f'/proc/{pid}/stat') as stat:
            state = stat.read().rsplit(')', 1)[1].split()[0]
    except OSError:
        return ''
    return '' if state in 'ZX' else state


def test_sigterm_during_a_silence_ends_both_processes(tmp_path):
    """
    SIGTERM while the victim is stopped resumes it and ends both measuring processes.

    Before, the run died at once: the victim stayed stopped for good and the peer wrote beats
    for a minute and a half.
    """
    tool = subprocess.Popen([sys.executable, '-m', 'rog_ros.experiments.rediscovery',
                             '--silence', '30', '--repeats', '1', '--phase', '0',
                             '--domain', str(_domain(92))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kids = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(_state(k) == 'T' for k in kids):
            kids = _children(tool.pid)
            time.sleep(0.1)
        assert any(_state(k) == 'T' for k in kids), 'the victim was never stopped'
        tool.send_signal(signal.SIGTERM)
        assert tool.wait(timeout=20) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_state(k) for k in kids):
            time.sleep(0.1)
        assert [k for k in kids if _state(k)] == []
    finally:
        for pid in [tool.pid] + kids:   # what the run left (before the fix: the two)
            if _state(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        tool.wait(timeout=10)
