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
netmon's recorded trace: its source, its clock, its summary and where it is written.

The probes are replaced by fakes (counters that grow as a test says, an ``iw`` that reports
what a test says, clocks a test steps), so nothing here needs Wi-Fi, ``iw`` or a bus.
"""

import argparse
import logging
import os
import shutil

import numpy as np
import pytest
from rog_ros.net.traces import load_trace, Trace
from rog_ros.nodes import linkprobe, monitor, netmon
from rog_ros.nodes.monitor import NetMonitor, record_summary


class _Clock:
    """Wall and monotonic clocks a test steps: ``wall`` may jump back, ``mono`` never does."""

    def __init__(self):
        self.wall, self.mono = 1_800_000_000.0, 100.0

    def step(self, dt: float, wall_jump: float = 0.0) -> None:
        """Advance both clocks by ``dt``; the wall clock also by ``wall_jump`` (NTP)."""
        self.mono += dt
        self.wall += dt + wall_jump


class _Requests:
    """A SignalRequests that installs no handler in the test process."""

    shutdown_requested = False

    def install(self):
        """Return self, as SignalRequests.install does."""
        return self


def _args(**kw) -> argparse.Namespace:
    """Return the settings NetMonitor reads, no trace by default."""
    base = {'trace': None, 'trace_scale': 1.0, 'epoch': None, 'workers': 2, 'seed': 0,
            'node_name': 'netmon'}
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.fixture
def probes(monkeypatch):
    """Fake counters on 'wlan9' (``mbps`` per sample of 0.1 s) and a fake ``iw``."""
    clock = _Clock()
    state = {'bytes': 0, 'mbps': [], 'bitrate': [], 'clock': clock}

    def counters():
        """Return the fake counters."""
        return {'lo': (0, 0), 'wlan9': (state['bytes'], 0)}

    def iw_link(interface):
        """Return the next bitrate a test gave (-1: none), at -60 dBm."""
        return (state['bitrate'].pop(0) if state['bitrate'] else -1.0), -60.0

    monkeypatch.setattr(linkprobe, 'read_counters', counters)
    monkeypatch.setattr(linkprobe, 'iw_link', iw_link)
    monkeypatch.setattr(monitor, 'IW_PERIOD_S', 0.0)          # read iw at every sample
    monkeypatch.setattr(monitor.time, 'time', lambda: clock.wall)
    monkeypatch.setattr(monitor.time, 'monotonic', lambda: clock.mono)
    return state


def _run(mon: NetMonitor, probes, mbps) -> None:
    """Sample ``mon`` once per rate in ``mbps`` (Mbit/s over the 0.1 s before the sample)."""
    for rate in mbps:
        probes['clock'].step(0.1)
        probes['bytes'] += int(rate * 1e6 / 8 * 0.1)
        mon.sample()


def test_a_wall_clock_stepped_back_leaves_the_recorded_times_increasing(probes, tmp_path):
    # NTP stepped the clock back 30 s mid-recording: the save raised "times must start at 0
    # and increase strictly" and the whole record was lost
    mon = NetMonitor(None, 'wlan9', [0], _args())
    _run(mon, probes, [0.0, 8.0, 8.0])
    probes['clock'].step(0.1, wall_jump=-30.0)
    probes['bytes'] += 100_000
    mon.sample()
    _run(mon, probes, [16.0, 16.0])
    trace = mon.save(str(tmp_path / 'link.csv'))
    assert trace.t_s.tolist() == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])
    assert trace.mbps.tolist() == pytest.approx([8.0, 8.0, 8.0, 16.0, 16.0])
    assert load_trace(tmp_path / 'link.csv').mbps.tolist() == pytest.approx(trace.mbps)


def test_bitrate_without_iw_or_wifi_is_refused_when_netmon_starts(probes, monkeypatch):
    monkeypatch.setattr(shutil, 'which', lambda name: None)
    with pytest.raises(ValueError, match='bitrate with iw, which is not installed'):
        NetMonitor(None, 'wlan9', [0], _args(), 'bitrate')
    monkeypatch.setattr(shutil, 'which', lambda name: '/usr/sbin/iw')
    monkeypatch.setattr(linkprobe, 'is_wireless', lambda interface: False)
    with pytest.raises(ValueError, match='needs a Wi-Fi interface; wlan9 is not one'):
        NetMonitor(None, 'wlan9', [0], _args(), 'bitrate')


def test_emulated_without_a_trace_is_refused_when_netmon_starts(probes):
    # it wrote a trace of zeros (-1 "no emulated rate" clipped to 0) and said "recorded"
    with pytest.raises(ValueError, match='--record-source emulated records the rate that '
                                         '--trace enforces, but no reported node has one'):
        NetMonitor(None, 'wlan9', [0, 1], _args(), 'emulated')
    with pytest.raises(ValueError, match='no reported node has one'):
        NetMonitor(None, 'wlan9', [-1], _args(trace='indoors'), 'emulated')
    mon = NetMonitor(None, 'wlan9', [-1, 1], _args(trace='indoors'), 'emulated')
    _run(mon, probes, [0.0, 0.0, 0.0])
    assert [rate > 0 for _, rate in mon.samples] == [True] * 3     # worker 1's emulated rate


def test_a_moment_without_a_bitrate_is_left_out_not_recorded_as_zero(probes, monkeypatch,
                                                                     caplog):
    monkeypatch.setattr(shutil, 'which', lambda name: '/usr/sbin/iw')
    monkeypatch.setattr(linkprobe, 'is_wireless', lambda interface: True)
    mon = NetMonitor(None, 'wlan9', [0], _args(), 'bitrate', logging.getLogger('netmon'))
    probes['bitrate'] = [144.4, -1.0, -1.0, 65.0, -1.0, 72.2]
    with caplog.at_level(logging.WARNING, logger='netmon'):
        _run(mon, probes, [0.0] * 6)
    assert [rate for _, rate in mon.samples] == [144.4, 65.0, 72.2]
    assert mon.left_out == 3
    said = [r.getMessage() for r in caplog.records]
    assert said == ['iw reports no bitrate for wlan9 now (not associated?); samples without '
                    'one are left out of the recorded trace']                    # once


def test_the_summary_gives_mean_median_and_zero_share_and_warns_of_an_idle_recording():
    busy = Trace(np.arange(10) * 0.1, [40.0] * 8 + [0.0, 20.0], 1.0)
    summary, warnings = record_summary(busy)
    assert summary == ('10 samples over 1.0 s (throughput): mean 34 Mbit/s, median 40 Mbit/s, '
                       '10% of the time at 0')
    assert warnings == []
    idle = Trace(np.arange(10) * 0.1, [0.0] * 6 + [0.2, 0.1, 30.0, 30.0], 1.0)
    summary, warnings = record_summary(idle)
    assert summary.endswith('mean 6.03 Mbit/s, median 0 Mbit/s, 60% of the time at 0')
    assert len(warnings) == 1
    assert warnings[0].startswith('the recording is mostly idle: 80% of the time below 0.5 '
                                  'Mbit/s; the throughput is the traffic this robot moved, '
                                  'not what its link could carry: load the link while '
                                  'recording (e.g. iperf3')
    dead = Trace([0.0, 0.1], [0.0, 0.0], 0.2)
    assert record_summary(dead, 'bitrate')[1][1] == ('every sample is 0 Mbit/s: --trace and '
                                                     'rog sim refuse this trace')


def _main(monkeypatch, argv) -> tuple:
    """Run netmon's main in this process (no signal handlers); its status and monitor."""
    made = []

    class Spy(NetMonitor):
        """The NetMonitor main makes, kept for the test to look at."""

        def __init__(self, *a, **kw):
            """Make the monitor and keep it."""
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(netmon, 'SignalRequests', _Requests)
    monkeypatch.setattr(netmon, 'NetMonitor', Spy)
    return netmon.main(['--bus', 'none', '--interface', 'lo'] + argv), made


def test_a_netmon_started_alone_reports_its_own_robot_unless_told(monkeypatch, tmp_path):
    # alone, '--nodes' empty is this robot (-1): as every worker, one machine's counters
    # would reach a FLOWN server as every link's; given the ranks, it reports for them
    status, made = _main(monkeypatch, ['--workers', '2', '--duration', '0.05'])
    assert status == 0 and made[0].nodes == [-1]
    out = tmp_path / 'emulated.csv'
    status, made = _main(monkeypatch, ['--trace', 'indoors', '--workers', '2', '--nodes', '0,1',
                                       '--duration', '0.35', '--rate-hz', '20',
                                       '--record-trace', str(out),
                                       '--record-source', 'emulated'])
    assert status == 0 and made[0].nodes == [0, 1]
    stats = made[0].sample()
    assert [s.node for s in stats] == [0, 1] and min(s.emulated_mbps for s in stats) > 0
    assert float(load_trace(out).mbps.min()) > 0
    status, made = _main(monkeypatch, ['--nodes', '-1', '--duration', '0.05'])
    assert status == 0 and made[0].nodes == [-1]


@pytest.mark.parametrize('where, what', [
    ('nodir/x.csv', 'the folder {tmp}/nodir does not exist'),
    ('', 'is a directory'),
])
def test_a_record_trace_path_that_cannot_be_written_is_refused_at_start(
        monkeypatch, tmp_path, caplog, where, what):
    # the session ran to its end, then a FileNotFoundError traceback lost the samples
    with caplog.at_level(logging.ERROR):
        status, made = _main(monkeypatch, ['--duration', '30', '--record-trace',
                                           os.path.join(str(tmp_path), where)])
    assert status == 2 and made == []                      # refused before it measured
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(said) == 1 and said[0].startswith('--record-trace ')
    assert what.format(tmp=tmp_path) in said[0]


def test_a_record_that_cannot_be_written_at_the_end_is_kept_in_the_temp_folder(
        probes, monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(netmon.tempfile, 'tempdir', str(tmp_path))
    mon = NetMonitor(None, 'wlan9', [0], _args())
    _run(mon, probes, [0.0, 8.0, 16.0, 8.0])
    gone = tmp_path / 'gone'            # the folder was there at start, removed since
    with caplog.at_level(logging.INFO):
        status = netmon.save_record(mon, str(gone / 'link.csv'), logging.getLogger('netmon'))
    spare = tmp_path / f'netmon-{os.getpid()}-link.csv'
    assert status == 1 and load_trace(spare).mbps.tolist() == pytest.approx([8.0, 16.0, 8.0])
    said = [r.getMessage() for r in caplog.records]
    assert said[0].startswith(f'could not write the recorded trace to {gone}/link.csv (No such '
                              f'file or directory); saved it to {spare} instead')
    assert said[1].startswith(f'recorded {spare}: 3 samples over 0.3 s (throughput): mean 10.7')
    assert not gone.exists()


def test_an_interrupt_during_the_recording_still_saves_it(monkeypatch, tmp_path):
    # a second Ctrl-C (KeyboardInterrupt) ends the loop; the samples so far are written
    out = tmp_path / 'link.csv'
    calls = []
    sample = NetMonitor.sample

    def sample_then_interrupt(self):
        """Sample, as the 4th call raise what a second Ctrl-C raises."""
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return sample(self)

    monkeypatch.setattr(NetMonitor, 'sample', sample_then_interrupt)
    status, made = _main(monkeypatch, ['--trace', 'clean', '--workers', '1', '--nodes', '0',
                                       '--rate-hz', '50',
                                       '--record-source', 'emulated', '--record-trace',
                                       str(out), '--duration', '30'])
    assert status == 0 and len(calls) == 4
    assert len(load_trace(out)) == 3


def test_link_stats_carry_this_runs_incarnation(probes):
    """Stamp every LinkStats with the run of netmon that measured it (it said 0)."""
    first, second = NetMonitor(None, 'wlan9', [0, 1], _args()), NetMonitor(
        None, 'wlan9', [0], _args())
    probes['clock'].step(0.1)
    stats = first.sample()
    assert len(stats) == 2 and {m.incarnation for m in stats} == {first.incarnation}
    assert 0 not in (first.incarnation, second.incarnation)
    assert first.incarnation != second.incarnation


def test_a_wall_clock_step_does_not_move_the_emulated_rate_it_reports(probes):
    # NTP stepped the clock an hour forward mid-run: netmon read the trace at wall time
    # minus the epoch and reported the rate an hour later, while the nodes' own links, whose
    # trace time is on the monotonic clock, went on enforcing the rate of now
    mon = NetMonitor(None, 'wlan9', [0], _args(trace='outages'))
    link = mon.links[0]
    jump = 3600.5                 # (the presets repeat within an hour)
    late = [t for t in (0.4, 0.5, 0.6) if link.rate_mbps(t) != link.rate_mbps(t + jump)]
    assert late, 'pick trace times whose rates differ a jump apart'
    _run(mon, probes, [1.0] * 3)
    # Execute
    probes['clock'].step(late[0] - 0.3, wall_jump=jump)
    msg = mon.sample()[0]
    # Assert
    assert msg.emulated_mbps == pytest.approx(link.rate_mbps(late[0]))
