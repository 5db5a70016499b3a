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
Wall-clock steps, as robots see them (docs/faults.md, "Clocks").

A Jetson with a flat RTC boots at 1970 or at its image's build date and NTP steps its clock
minutes or years later; robots' clocks disagree by seconds. Durations must not follow such a
step. Each test steps the wall clock (``time.time``) of one module with monkeypatch, so no
other clock of the process moves.
"""

import os
import time
import types

import pytest

from rog_ros.nodes import rog_worker, server_node, worker_node
from rog_ros.protocol import auth
from rog_ros.protocol import messages as m
from test_nodes_lifecycle import Hub, server_and_workers

YEAR_S = 365.0 * 86400.0


def _stepped(offset_s: float):
    """Return a stand-in for the ``time`` module whose wall clock is ``offset_s`` off."""
    return types.SimpleNamespace(time=lambda: time.time() + offset_s, monotonic=time.monotonic,
                                 perf_counter=time.perf_counter, sleep=time.sleep)


def _signed_fleet(monkeypatch, key):
    """Make nodes built next talk over one Hub, every bus an AuthBus with ``key``."""
    from rog_ros.transport.auth_bus import AuthBus
    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE'):
        monkeypatch.delenv(var, raising=False)
    hub = Hub()

    def open_bus(kind, namespace, *rest, **kw):
        """Open a signed bus on the hub."""
        return AuthBus(hub.bus(kind, namespace), key)

    monkeypatch.setattr(server_node, 'open_bus', open_bus)
    monkeypatch.setattr(worker_node, 'open_bus', open_bus)
    monkeypatch.setattr('rog_ros.nodes.driver.IDLE_POLL_S', 0.0)
    return hub


@pytest.mark.parametrize('damaged', [None, -5, float('inf')])
def test_a_worker_restored_on_a_clock_a_year_back_settles_its_push(tmp_path, monkeypatch,
                                                                   caplog, damaged):
    # A robot crashed with its push's END out, rebooted with a flat RTC (a year back) and
    # restarted from its state: the END it re-sends for its earlier run (the only way to
    # learn what became of its push), signed from the wall clock, was too_old for that
    # run's replay window at the server, every 2 s, and the robot waited for ever.
    # (damaged: a state whose auth_seq cannot be used, below 0 or not even an integer, is
    # said, and the clock signs)
    import logging
    from rog_ros.transport import auth_bus
    caplog.set_level(logging.WARNING)
    _signed_fleet(monkeypatch, auth.FleetKey(os.urandom(32)))
    monkeypatch.setattr(server_node, 'LEAVE_TIMEOUT_S', 0.2)
    state = ['--state-dir', str(tmp_path / 'state')]
    (tmp_path / 'state').mkdir()
    server_args = ['--iterations', '10', '--eval-every', '5']
    srv, (wrk,) = server_and_workers(tmp_path / 'run', '/clk', 1, server_args, state)
    restored = None
    try:
        assert srv.activate() and wrk.activate()
        deadline = time.monotonic() + 60.0
        while wrk.engine.clock < 3 or wrk.hooks.state.load()['engine']['push'] is None:
            assert time.monotonic() < deadline, 'no push in flight'
            assert wrk.spin_once()
            if wrk.engine.clock < 3 or wrk.hooks.state.load()['engine']['push'] is None:
                assert srv.spin_once()
        assert srv.spin_once()           # the server applies the push and answers; the
        wrk.bus.close()                  # robot loses power before the answer arrives
        wrk.bus = None
        if damaged is not None:
            saved = wrk.hooks.state.load()
            saved['node']['auth_seq'] = damaged
            wrk.hooks.state.save(saved)
        else:
            monkeypatch.setattr(auth_bus, 'time', _stepped(-YEAR_S))   # and boots a year back
        restored = worker_node.WorkerNode(rog_worker.build_parser().parse_args(
            ['--workload', 'toy', '--workers', '1', '--namespace', '/clk', '--rank', '0',
             *state]))
        restored.configure()
        assert restored.activate() and restored.hooks.restored
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            busy = restored.spin_once()
            if not srv.spin_once() and not busy:
                break
        # Assert
        assert srv.engine.finished, f'the run did not end: {srv.reject_counts()}'
        assert srv.reject_counts().get('too_old', 0) == 0
        assert restored.engine.clock == 10
        said = [r.getMessage() for r in caplog.records if 'auth_seq is not used' in r.getMessage()]
        assert len(said) == int(damaged is not None), said
    finally:
        for node in (restored, wrk, srv):
            if node is not None:
                node.shutdown()


def test_a_restored_signer_goes_on_above_its_saved_number_and_never_back():
    # Prepare
    key = auth.FleetKey(os.urandom(32))
    early = auth.Signer(key, first_seq=1000)          # a clock a year back
    late = auth.Signer(key, first_seq=10 ** 16)       # a clock already far above
    # Execute
    early.continue_after(5 * 10 ** 15)
    late.continue_after(5 * 10 ** 15)
    # Assert
    assert early.sign(m.TrainStatus(node=1, stamp=1.0)).auth_seq == 5 * 10 ** 15 + 2 ** 32 + 1
    assert late.sign(m.TrainStatus(node=1, stamp=1.0)).auth_seq == 10 ** 16
    for bad in (-1, 2 ** 63):
        with pytest.raises(ValueError, match='saved auth_seq'):
            early.continue_after(bad)


def _record_across_a_step(tmp_path, monkeypatch, offset_s, same_boot=True):
    """
    Return the (run time, time away) a restored server takes from its record.

    The record was saved just before the wall clock stepped by ``offset_s``.
    """
    _signed_fleet(monkeypatch, auth.FleetKey(os.urandom(32)))
    srv, (wrk,) = server_and_workers(tmp_path / 'run', '/away', 1)
    try:
        srv.t0 = time.monotonic() - 7.0           # 7 s into the run
        saved = srv._run_record()
        if not same_boot:
            saved['boot_id'] = 'another boot'
        real = time.time
        with monkeypatch.context() as step:       # every module's wall clock, this once
            step.setattr(time, 'time', lambda: real() + offset_s)
            srv._resume_record(saved)
        return srv._resumed
    finally:
        wrk.shutdown()
        srv.shutdown()


def test_a_restored_server_counts_its_time_away_on_the_boot_clock(tmp_path, monkeypatch):
    # NTP stepped the clock an hour (or a year) forward while the server was away: the
    # run's clock went on an hour (a year) later, time to target and timeseries.csv with it
    for step in (3600.0, YEAR_S, -3600.0):
        # Execute
        elapsed, away = _record_across_a_step(tmp_path / str(step), monkeypatch, step)
        # Assert
        assert 0.0 <= away < 5.0 and 7.0 <= elapsed < 12.0, (step, elapsed, away)


def test_across_a_reboot_a_stepped_wall_clock_is_not_counted_as_time_away(
        tmp_path, monkeypatch, caplog):
    import logging
    caplog.set_level(logging.WARNING)
    # Execute: a reboot of a minute (counted), then one the clock says took a year or -1 h
    _, minute = _record_across_a_step(tmp_path / 'a', monkeypatch, 60.0, same_boot=False)
    _, year = _record_across_a_step(tmp_path / 'b', monkeypatch, YEAR_S, same_boot=False)
    _, back = _record_across_a_step(tmp_path / 'c', monkeypatch, -3600.0, same_boot=False)
    # Assert
    assert 60.0 <= minute < 65.0 and year == 0.0 and back == 0.0
    said = [r.getMessage() for r in caplog.records if 'was away is unknown' in r.getMessage()]
    assert len(said) == 2 and 'the wall clock says 31536' in said[0], said


class _Fleet:
    """The part of a NetnsFleet a RateFollower uses: the rates it set, per rank."""

    def __init__(self):
        self.rates, self.set = {}, []

    def set_rate(self, rank, mbps):
        """Record the rate set."""
        self.set.append(mbps)
        self.rates[(rank, 'up')] = mbps


class _Ramp:
    """A link whose rate in Mbit/s is its trace time in seconds (plus 1)."""

    def rate_mbps(self, t):
        """Return ``1 + t``."""
        return 1.0 + t


def test_rog_fleet_netns_links_follow_the_trace_on_the_monotonic_clock(monkeypatch):
    # NTP stepped the clock an hour forward: rog fleet --netns set every link to the rate
    # its trace has an hour later, while the nodes' own clocks (monotonic) went on from now
    from rog_ros.net import netns
    fleet = _Fleet()
    follower = netns.RateFollower(fleet, {0: _Ramp()}, time.time() - 2.0, period_s=60.0)
    real = time.time
    # Execute
    monkeypatch.setattr(time, 'time', lambda: real() + 3600.0)
    follower.start()
    follower.stop()
    # Assert
    assert len(fleet.set) == 1 and 3.0 <= fleet.set[0] < 8.0, fleet.set


@pytest.mark.parametrize('boot_s', [-1e12, float('-inf'), float('nan'), 1e15])
def test_a_boot_clock_stamp_that_cannot_be_of_this_boot_falls_back_to_the_wall_clock(boot_s):
    # a damaged checkpoint's boot_s (below 0, past now, not finite) was taken as this boot's:
    # -1e12 gave a run's clock 30,000 years on, -inf an infinite one
    from rog_ros.nodes import clocks
    saved = dict(clocks.stamp(), boot_s=boot_s)
    # Execute
    away, how = clocks.seconds_since(saved)
    # Assert
    assert how == 'wall clock' and 0.0 <= away < 5.0, (away, how)


def test_a_monotonic_stamp_of_this_boot_shifts_nothing_and_one_of_another_by_the_time_away(
        monkeypatch):
    # the real boot id and clocks: one boot keeps a checkpoint's monotonic times exactly
    from rog_ros.nodes import clocks
    saved = clocks.mono_stamp()
    if not saved['boot_id']:
        pytest.skip('no boot id here (no /proc)')
    # Execute / Assert
    assert clocks.mono_shift(saved) == (0.0, 'same boot')
    # another boot 10 s later (its boot clock 4 s): times move by the wall's 10 s
    monkeypatch.setattr(clocks, 'boot_clock', lambda: 4.0)
    other = dict(saved, boot_id='0' * 8, wall_time=time.time() - 10.0,
                 mono_s=time.monotonic() + 500.0)
    shift, how = clocks.mono_shift(other)
    assert how == 'another boot' and -510.1 < shift < -509.9
    with pytest.raises(ValueError, match='boot_id'):
        clocks.mono_shift(dict(saved, boot_id='two words'))


def test_a_monotonic_stamp_across_a_stepped_wall_clock_shifts_by_the_time_away_given(
        monkeypatch):
    # another boot, the wall clock an hour back (a Jetson before NTP): no shift (None),
    # or, given a time away (the logs': 0, as the run's clock takes then), now - then - it
    from rog_ros.nodes import clocks
    monkeypatch.setattr(clocks, 'boot_id', lambda: 'boot-b')
    monkeypatch.setattr(clocks, '_wall', lambda: 1.7e9 - 3600.0)
    monkeypatch.setattr(clocks, '_monotonic', lambda: 20.0)
    monkeypatch.setattr(clocks, 'boot_clock', lambda: 5.0)
    saved = {'boot_id': 'boot-a', 'wall_time': 1.7e9, 'boot_s': 314.0, 'mono_s': 314.0}
    # Execute
    unknown, why = clocks.mono_shift(saved)
    run, why_too = clocks.mono_shift(saved, stepped_away=0.0)
    later, _ = clocks.mono_shift(saved, stepped_away=6.0)
    # Assert
    assert unknown is None and 'stepped' in why and why_too == why
    assert run == -294.0 and later == -300.0
