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
Readers the server cannot serve: a robot of another rog_ros build, a tool that only reads.

Over the in-memory bus of the node tests, whose buses say (as ``DdsBus`` does from DDS
discovery) which participants read and write a topic, and which read one with another type
hash: a robot of an older rog_ros, which DDS never matches.
"""

import csv
import time

import pytest

from rog_ros.nodes import server_node
from rog_ros.nodes.chaos_hooks import stops_sent
from rog_ros.nodes.fleet_progress import notable_clauses
from rog_ros.nodes.ros_node import failure_status
from rog_ros.protocol import ps_final
from rog_ros.protocol.ps_membership import IncompatibleWatch
from rog_ros.transport.topics import resolve
from test_nodes_lifecycle import HubBus, in_memory_fleet, server_and_workers
from test_push_fleet_restart import (_durable_fleet, _kill, _restarted_server,
                                     _serve_until_told, _spin)

OLD = 'c0ffee00:00000001:00000002'


def _participants(self, topic, writer):
    """Return the ids of the other buses with a writer (``writer``) or reader on ``topic``."""
    full = resolve(topic, self.namespace)
    return {str(id(bus)) for bus in self.hub.buses
            if bus is not self and full in (bus.writers if writer else bus.subs)}


def _foreign_readers(self, topic):
    """Return the participants that read ``topic`` with another type hash (the hub's)."""
    return list(getattr(self.hub, 'foreign', {}).get(resolve(topic, self.namespace), ()))


def _foreign_writers(self, topic):
    """Return the participants that write ``topic`` with another type hash (the hub's)."""
    return list(getattr(self.hub, 'foreign_up', {}).get(resolve(topic, self.namespace), ()))


@pytest.fixture
def hub(monkeypatch):
    """Return an in-memory fleet whose buses tell participants and readers of another build."""
    monkeypatch.setattr(HubBus, 'participants', _participants, raising=False)
    monkeypatch.setattr(HubBus, 'foreign_readers', _foreign_readers, raising=False)
    monkeypatch.setattr(HubBus, 'foreign_writers', _foreign_writers, raising=False)
    return in_memory_fleet(monkeypatch)


def test_the_watch_gives_a_robot_up_once_after_its_bound():
    watch = IncompatibleWatch(2, 3.0)
    assert watch.observe(1, 10.0, [OLD], matched=False) == []
    assert watch.observe(1, 12.9, [OLD], matched=False) == []
    (log,) = watch.observe(1, 13.0, [OLD], matched=False)
    assert (log.name, log.worker, log.value) == ('worker_incompatible', 1, 3.0)
    assert log.info['participants'] == [OLD] and 'upgrade' in log.info['hint']
    # (it may be another fleet's robot of that rank: this fleet's own is taken back)
    assert log.info['hint'].endswith('takes it back when a robot of this build is heard for '
                                     'that rank'), log.info['hint']
    assert watch.observe(1, 20.0, [OLD], matched=False) == []       # once
    assert watch.given_up == {1} and not watch.all_given_up([0, 1])
    # a matched reader of this build (the robot upgraded) starts it again
    assert watch.observe(1, 21.0, [OLD], matched=True) == [] and watch.given_up == set()
    # robot 0: a reader of this build matched beside one of another build: never given up
    assert all(watch.observe(0, t, [OLD], matched=True) == [] for t in (0.0, 5.0, 50.0))
    assert watch.observe(0, 60.0, [], matched=False) == []
    with pytest.raises(ValueError):
        watch.observe(2, 0.0, [OLD], matched=False)
    with pytest.raises(ValueError):
        IncompatibleWatch(2, 0.0)


def _old_robot(hub, namespace, rank, tool=False):
    """
    Make a robot of another build read robot ``rank``'s downlink: never matched.

    It writes the uplink too (with its own types), as a robot does; with ``tool``, only
    reads (an older ``ros2 topic echo`` of that downlink).
    """
    from rog_ros.nodes.routing import server_inbox, worker_inbox
    hub.foreign = {resolve(t, namespace): [OLD] for t in worker_inbox(rank)}
    hub.foreign_up = {} if tool else {resolve(t, namespace): [OLD] for t in server_inbox()}


@pytest.mark.parametrize('sync', ['rog', 'bsp', 'adacomp', 'gsp'])  # (one ServerAdapter)
def test_an_old_robot_is_given_up_and_the_fleet_trains_without_it(
        hub, tmp_path, monkeypatch, sync):
    # Robot 1 runs an older rog_ros: its downlink reader has another type hash and DDS does
    # not match it. The server waited for it until startup_timeout and failed the fleet
    # (PeerTimeout, exit 1; for ever with a long timeout). It gives robot 1 up after 3
    # leases (scaled to 0.3 s), says so, and robot 0 trains the run to its end.
    monkeypatch.setattr(server_node, 'INCOMPATIBLE_SCALE', 0.01, raising=False)
    monkeypatch.setattr(ps_final, 'FINAL_PATIENCE_S', 0.5)
    srv, workers = server_and_workers(tmp_path, '/inc', 2, ['--sync', sync, '--iterations', '6',
                                                            '--startup-timeout', '5'],
                                      ['--sync', sync])
    old = workers.pop(1)
    old.shutdown()                            # robot 1's process is another build's
    _old_robot(hub, '/inc', 1)
    nodes = [srv] + workers
    try:
        start = time.monotonic()
        assert srv.activate() and workers[0].activate()
        waited = time.monotonic() - start
        _spin(nodes, lambda: srv.engine.finished)
        trained = time.monotonic() - start
        assert srv.engine.finished
        summary = srv.finish()
    finally:
        for node in nodes:
            node.shutdown()
    assert waited < 4.5                       # 3 leases (0.3 s here), not startup_timeout (5)
    # the push systems let it go at once: not given up DONE_PATIENCE_S (60 s) after the
    # others as a robot whose stop order was missed (stops_missed)
    assert trained < 20.0 and summary.get('stops_missed', 0) == 0, (trained, summary)
    assert summary['completed'] is True and summary['workers_incompatible'] == [1]
    assert srv.engine.clock[0] >= 6
    with open(tmp_path / 'events.csv') as f:
        rows = [r for r in csv.DictReader(f) if r['event'] == 'worker_incompatible']
    assert len(rows) == 1 and OLD in str(rows[0]), rows
    line = ''.join(notable_clauses(summary))        # rog fleet's result line
    assert 'robot 1 ran an incompatible rog_ros' in line and 'events.csv' in line, line
    assert 'the fleet trained without it: upgrade it' in line, line   # (not: robot 1 trained)
    two = ''.join(notable_clauses({'workers_incompatible': [1, 3]}))
    assert 'robots 1, 3 ran an incompatible rog_ros, so the fleet trained without them' in two
    assert 'incompatible' not in ''.join(notable_clauses({'workers_incompatible': []}))


def test_a_fleet_of_old_robots_only_fails_with_its_own_exit_status(
        hub, tmp_path, monkeypatch, caplog):
    # Only robots of another build are heard: the server says so after 3 leases (0.3 s
    # here), waits for robots of its own build until startup_timeout (2 s: the old ones may
    # be another fleet's), then fails with exit 4, not the plain timeout's 1. Until
    # 2026-12-07 it failed after the 3 leases.
    monkeypatch.setattr(server_node, 'INCOMPATIBLE_SCALE', 0.01, raising=False)
    srv, workers = server_and_workers(tmp_path, '/inc2', 1, ['--startup-timeout', '2'])
    workers[0].shutdown()
    _old_robot(hub, '/inc2', 0)
    try:
        start = time.monotonic()
        with pytest.raises(server_node.FleetIncompatible) as err:
            srv.activate()
        took = time.monotonic() - start
    finally:
        srv.shutdown()
    assert 1.95 < took < 4.0, took                  # startup_timeout, not 3 leases
    text = str(err.value)
    assert text.startswith('no robot of this build after startup_timeout 2 s: every robot '
                           'this server waits for (0) runs an incompatible rog_ros'), text
    assert '\n' not in text
    assert failure_status(err.value) == 4 == server_node.FleetIncompatible.exit_status
    said = [r.getMessage() for r in caplog.records if 'waits for robots of its build' in
            r.getMessage()]
    assert len(said) == 1 and 'until startup_timeout, 2 s from its start' in said[0], said


def test_a_server_waits_for_its_own_late_robot_beside_another_fleets(
        hub, tmp_path, monkeypatch):
    # A second fleet of another build shares the namespace and domain: its robot 0 is
    # heard first, this fleet's robot 0 comes 1 s later. The server gave robot 0 up after 3
    # leases (0.3 s here) and, every robot given up, refused the fleet with FleetIncompatible
    # (exit 4, not respawned) while its own robot was still booting. It waits for robots of
    # its build until startup_timeout (3 s), starts with its own and trains the run.
    monkeypatch.setattr(server_node, 'INCOMPATIBLE_SCALE', 0.01, raising=False)
    srv, workers = server_and_workers(tmp_path, '/inc6', 1, ['--startup-timeout', '3',
                                                             '--iterations', '4'])
    robot = workers[0]
    hub.buses.remove(robot.bus)                # (not there yet: still booting)
    _old_robot(hub, '/inc6', 0)                # the other fleet's robot 0
    look, came, start = srv._look_for_incompatible, [], time.monotonic()

    def later(ranks, now=None):
        if not came and time.monotonic() - start >= 1.0:
            hub.buses.append(robot.bus)
            came.append(time.monotonic() - start)
        return look(ranks, now)
    monkeypatch.setattr(srv, '_look_for_incompatible', later)
    try:
        assert srv.activate()
        took = time.monotonic() - start
        assert robot.activate()
        _spin([srv, robot], lambda: srv.engine.finished)
        assert srv.engine.finished
        summary = srv.finish()
    finally:
        if not came:
            hub.buses.append(robot.bus)        # (its shutdown closes it there)
        for node in (srv, robot):
            node.shutdown()
    assert came and 1.0 <= took < 2.5, took
    assert srv.engine.clock[0] >= 4 and summary['completed'] is True
    assert summary['workers_incompatible'] == []


def test_a_tool_reading_a_downlink_does_not_hold_a_restored_server(hub, tmp_path, monkeypatch):
    # Both robots took their stop orders and left; the server, killed before its results,
    # is restored. A `ros2 topic echo` of each robot's downlink matched the restored
    # server's writers as the robots would: it served on for the patience (4 s here, 20 s
    # by default) for robots gone. It counts only participants that write the uplink too,
    # so it leaves at the discovery bound (2 s here, 10 s by default).
    hub_, srv, workers, server_args = _durable_fleet(tmp_path, monkeypatch, 'rog', '/echo', 1)
    monkeypatch.setattr(server_node, 'HEAR_SCALE', 0.2)
    monkeypatch.setattr(server_node, 'LEAVE_TIMEOUT_S', 0.2)
    nodes, back = [srv] + workers, None
    echo = HubBus(hub_, '/echo')
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        _spin(nodes, lambda: srv.engine.finished)
        assert srv.engine.finished
        _kill(hub_, srv, nodes)
        _spin(nodes, lambda: all(w.engine.state == 'stopped' for w in workers))
        for w in workers:
            assert w.engine.state == 'stopped'
            w.shutdown()
            nodes.remove(w)
        hub_.buses.append(echo)
        for rank in range(2):
            echo.subscribe(f'w{rank}/chunks')
        back = _restarted_server(tmp_path, '/echo', server_args)
        assert back.activate()
        assert back._told_before == {0, 1}
        assert back.bus.matched('w0/chunks') == 1        # the tool matches as a robot would
        start = time.monotonic()
        summary = back.finish()
        took = time.monotonic() - start
    finally:
        for node in nodes + [n for n in (srv, back) if n is not None and n not in nodes]:
            node.shutdown()
    discovery, patience = back.hear_bounds_s()
    assert (discovery, patience) == (2.0, 4.0)
    assert summary['completed'] is True
    assert discovery - 0.1 < took < patience - 0.2, took      # (loaded machines: slack)


def test_a_robot_missing_beside_an_old_one_times_out_as_before(hub, tmp_path, monkeypatch):
    # Robot 0 never starts, robot 1 runs another build: robot 1 is given up, robot 0 is
    # waited for until startup_timeout (2 s) from the start, not from the give-up, and the
    # error says both (robot 1 given up after 0.9 s here, so 1 s was left of the wait).
    monkeypatch.setattr(server_node, 'INCOMPATIBLE_SCALE', 0.03, raising=False)
    srv, workers = server_and_workers(tmp_path, '/inc3', 2, ['--startup-timeout', '2'])
    for w in workers:
        w.shutdown()
    _old_robot(hub, '/inc3', 1)
    try:
        start = time.monotonic()
        with pytest.raises(server_node.PeerTimeout) as err:
            srv.activate()
        took = time.monotonic() - start
    finally:
        srv.shutdown()
    assert not isinstance(err.value, server_node.FleetIncompatible)
    assert 1.9 < took < 6.0, took
    text = str(err.value)
    assert 'no peer on w0/chunks' in text and 'w1/' not in text and ' after 2 s:' in text
    assert text.endswith('(given up as running an incompatible rog_ros: robots 1)'), text


def test_an_old_tool_reading_the_downlink_of_a_late_robot_does_not_give_it_up(
        hub, tmp_path, monkeypatch):
    # An older rog_ros workspace's `ros2 topic echo /rog/w0/chunks` (another type hash, only
    # a reader) runs while robot 0 is late: robot 0 was given up as another build after 3
    # leases and this one-robot fleet failed with FleetIncompatible (exit 4, not respawned)
    # although the robot was only booting. Only a participant that also writes the uplink
    # is taken as the old robot: the server waits startup_timeout as for any late robot.
    monkeypatch.setattr(server_node, 'INCOMPATIBLE_SCALE', 0.01, raising=False)
    srv, workers = server_and_workers(tmp_path, '/inc4', 1, ['--startup-timeout', '1.5'])
    workers[0].shutdown()                     # robot 0 not up yet
    _old_robot(hub, '/inc4', 0, tool=True)
    try:
        start = time.monotonic()
        with pytest.raises(server_node.PeerTimeout) as err:
            srv.activate()
        took = time.monotonic() - start
    finally:
        srv.shutdown()
    assert not isinstance(err.value, server_node.FleetIncompatible), err.value
    assert failure_status(err.value) == 1
    assert 1.4 < took < 6.0, took
    assert srv.incompatible.given_up == set() and 'incompatible' not in str(err.value)


def test_an_old_robot_upgraded_is_waited_for_again(hub, tmp_path, monkeypatch):
    # Robot 1, of another build, is given up: a push server lets it go (its stop order can
    # never reach it, and the run could not end). Upgraded, its old reader gone and the new
    # robot's participant reading its downlink and writing the uplink, it is taken back and
    # waited for at the end again. Before, the watch was asked whether it was matched only
    # while a reader of another build was there: it stayed given up for good, and a push
    # server could end without sending the upgraded robot its stop order.
    from rog_ros.nodes.routing import server_inbox, worker_inbox

    monkeypatch.setattr(server_node, 'INCOMPATIBLE_SCALE', 0.01, raising=False)
    srv, workers = server_and_workers(tmp_path, '/inc5', 2, ['--sync', 'adacomp'],
                                      ['--sync', 'adacomp'])
    workers[1].shutdown()
    _old_robot(hub, '/inc5', 1)
    try:
        bound = srv.incompatible.bound_s
        assert srv._look_for_incompatible([1], now=1000.0) == []
        assert srv._look_for_incompatible([1], now=1001.0 + bound) == [1]
        srv.engine.stop_sent[0] = True                 # robot 0 was told to stop
        assert srv.engine.finished                     # robot 1 let go: the run can end
        hub.foreign, hub.foreign_up = {}, {}           # the old robot left; upgraded:
        upgraded = HubBus(hub, '/inc5')
        hub.buses.append(upgraded)
        for topic in worker_inbox(1):
            upgraded.subscribe(topic)
        for topic in server_inbox():
            upgraded.advertise(topic)
        assert srv._look_for_incompatible([1], now=1010.0 + bound) == []
        assert srv.incompatible.given_up == set()
        assert not srv.engine.finished                 # waits for robot 1's stop again
    finally:
        for node in [srv] + workers:
            node.shutdown()


@pytest.mark.parametrize('sync', ['rog', 'adacomp'])
def test_a_robot_told_to_stop_that_left_beside_another_fleets_is_not_given_up(
        hub, tmp_path, monkeypatch, sync):
    # This fleet's robot 1 trains beside another fleet's robot 1 (another build: a reader of
    # its downlink, a writer of the uplink). It is told to stop and leaves while the run
    # goes on (robot 0 trains on). Before, the other fleet's robot, then alone on w1, gave
    # robot 1 up 3 leases later: a worker_incompatible event and summary.json's
    # workers_incompatible named this fleet's robot, which trained, to be upgraded. A robot
    # told to stop is done: nothing on its downlink says more of it.
    monkeypatch.setattr(server_node, 'INCOMPATIBLE_SCALE', 0.01, raising=False)
    srv, workers = server_and_workers(tmp_path, '/inc8', 2, ['--sync', sync],
                                      ['--sync', sync])
    _old_robot(hub, '/inc8', 1)                # the other fleet's robot 1
    try:
        bound = srv.incompatible.bound_s
        assert srv._look_for_incompatible([1], now=1000.0) == []
        assert srv._look_for_incompatible([1], now=1001.0 + bound) == []   # robot 1 there
        told = list(stops_sent(srv.engine))
        told[1] = True                             # robot 1 was told to stop
        monkeypatch.setattr(server_node, 'stops_sent', lambda engine: told)
        workers.pop(1).shutdown()                  # and left
        assert srv._look_for_incompatible([1], now=1010.0) == []
        assert srv._look_for_incompatible([1], now=1011.0 + bound) == []
        assert srv.incompatible.given_up == set()
        told[1] = False                            # (not told: given up, as before)
        assert srv._look_for_incompatible([1], now=1020.0) == []
        assert srv._look_for_incompatible([1], now=1021.0 + bound) == [1]
    finally:
        for node in [srv] + workers:
            node.shutdown()


def test_a_robot_given_up_then_taken_back_leaves_the_timeout_naming_the_whole_wait():
    # Robot 1 of another build given up (another fleet's, heard alone) ends the first wait;
    # the wait goes on for robot 0 with what is left of startup_timeout, and robot 1,
    # taken back (this fleet's own came), is no more given up. Robot 0 never comes: the
    # timeout said "no peer on ... after 1 s" (the last wait's), though the server waited
    # startup_timeout (2 s); only a timeout with a robot still given up said the whole wait
    from types import SimpleNamespace
    from rog_ros.nodes.connect import PeerTimeout
    node = server_node.ServerNode.__new__(server_node.ServerNode)   # what the wait uses
    node.args = SimpleNamespace(startup_timeout=2.0, workers=2, state_dir='/s', out='/o',
                                namespace='/n')
    node.hooks = SimpleNamespace(restored=None)
    node._finished_before = False
    node.requests = SimpleNamespace(shutdown_requested=False)
    node.incompatible = SimpleNamespace(given_up=set())
    start = time.monotonic()

    def look(ranks):
        """Give robot 1 up from 0.7 s to 1.2 s, then take it back."""
        since = time.monotonic() - start
        if 0.7 <= since < 1.2 and 1 not in node.incompatible.given_up:
            node.incompatible.given_up.add(1)
            return [1]
        if since >= 1.2:
            node.incompatible.given_up.discard(1)
        return []

    node._look_for_incompatible = look
    node._uplink_writers = lambda other_builds=True: None
    node._robot_there = lambda rank, writers=False: False
    node.bus = SimpleNamespace(namespace='/n', matched=lambda topic: 0)
    with pytest.raises(PeerTimeout) as err:
        node._wait_for_robots([0, 1])
    said = str(err.value)
    assert time.monotonic() - start >= 2.0
    assert ' after 2 s: is the other side running' in said, said
    assert 'given up' not in said and '\n' not in said


@pytest.mark.parametrize('sync', ['rog', 'bsp', 'adacomp', 'gsp'])
def test_a_robot_given_up_beside_another_fleets_and_then_heard_is_taken_back_whole(
        hub, tmp_path, monkeypatch, sync):
    # Robot 1 of this fleet is late; another fleet's robot 1 (another build) reads w1 and
    # writes the uplink. The server gives robot 1 up after 3 leases (0.3 s here) and starts
    # with robot 0; this fleet's robot 1 comes 1 s later, the other one still there. It is
    # taken back whole: Rog's family trains it to its budget and sends it the final model;
    # a push server, whose budget is the fleet's (robot 0 spent it), still serves and tells
    # it to stop. Before, a push server let robot 1 go when it gave it up and ended at
    # once (0.6 s), before this fleet's robot 1 came, though it would have waited for it
    # until startup_timeout (5 s) had the other fleet not been there; and summary.json
    # listed robot 1 in workers_incompatible (to be upgraded) when it came and left
    # within the half second between two looks.
    monkeypatch.setattr(server_node, 'INCOMPATIBLE_SCALE', 0.01, raising=False)
    monkeypatch.setattr(ps_final, 'FINAL_PATIENCE_S', 5.0)
    srv, workers = server_and_workers(tmp_path, '/inc7', 2,
                                      ['--sync', sync, '--iterations', '8',
                                       '--startup-timeout', '5'], ['--sync', sync])
    late = workers[1]
    hub.buses.remove(late.bus)                 # (not there yet: still booting)
    _old_robot(hub, '/inc7', 1)                # the other fleet's robot 1
    nodes = [srv, workers[0]]
    try:
        start = time.monotonic()
        assert srv.activate() and workers[0].activate()
        assert time.monotonic() - start < 2.0 and srv.incompatible.given_up == {1}
        _spin(nodes, lambda: time.monotonic() - start >= 1.0, limit_s=5.0)
        assert not srv.engine.finished         # (a push server ended here before)
        hub.buses.append(late.bus)
        nodes.append(late)
        assert late.activate()
        _spin(nodes, lambda: srv.engine.finished)
        assert srv.engine.finished
        if not hasattr(late.engine, 'holds_final'):
            _serve_until_told(srv, workers)     # (told to stop, they leave: as processes do)
        summary = srv.finish()
    finally:
        if late not in nodes:
            hub.buses.append(late.bus)
        for node in [srv] + workers:
            node.shutdown()
    assert srv.incompatible.given_up == set() and summary['workers_incompatible'] == []
    assert summary['completed'] is True and all(w.driver.stopped for w in workers)
    if hasattr(late.engine, 'holds_final'):                   # (Rog's family)
        assert late.engine.clock >= 8, late.engine.clock      # trained to its budget
        assert late.engine.holds_final and workers[0].engine.holds_final
    else:                                                     # (the fleet's budget)
        assert sum(srv.engine.clock) >= 16, srv.engine.clock
