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
Lifecycle transitions drive the engines on the embedded path (no ROS, no DDS).

A server and a worker node run in this process over an in-memory bus; the test applies the
transitions that signals (or ``ros2 lifecycle set``) request and watches the engines: pause
stops computation and pushes, activate resumes them, shutdown writes the summary.
"""

import copy
import json
import os
import time

import pytest

from rog_ros.nodes import rog_server, rog_worker, server_node, worker_node
from rog_ros.nodes.lifecycle import ACTIVE, FINALIZED, INACTIVE
from rog_ros.transport.bus import Bus
from rog_ros.transport.topics import resolve


class Hub:
    """Delivers every publication to the other buses' subscriptions (copies, in order)."""

    def __init__(self):
        self.buses = []
        self.published = {}          # absolute topic -> count

    def bus(self, kind, namespace, *rest, **kw):
        bus = HubBus(self, namespace)
        self.buses.append(bus)
        return bus


class HubBus(Bus):
    """One node's bus on the Hub."""

    def __init__(self, hub, namespace):
        super().__init__(namespace)
        self.hub, self.subs, self.queue, self.writers = hub, {}, [], set()

    def advertise(self, topic):
        """Create the writer of ``topic``: peers' readers count it in ``matched`` from now."""
        self.writers.add(resolve(topic, self.namespace))

    def publish(self, topic, msg):
        full = resolve(topic, self.namespace)
        self.writers.add(full)
        self.hub.published[full] = self.hub.published.get(full, 0) + 1
        for bus in self.hub.buses:
            if bus is not self and full in bus.subs:
                bus.queue.append((full, copy.deepcopy(msg)))

    def subscribe(self, topic, callback=None, qos=None):
        self.subs[resolve(topic, self.namespace)] = callback

    def poll(self, timeout_s=0.0):
        out, queue, self.queue = [], self.queue, []
        for topic, msg in queue:
            callback = self.subs[topic]
            if callback is None:
                out.append((topic, msg))
            else:
                callback(msg)
        return out

    def matched(self, topic):
        """
        Count the other buses' endpoints that match ours on ``topic``, one per endpoint.

        As DDS does: readers for our writer, writers for our reader. A constant would let a
        server start with workers missing, and never see them leave.
        """
        full = resolve(topic, self.namespace)
        return sum((full in self.writers and full in bus.subs)
                   + (full in self.subs and full in bus.writers)
                   for bus in self.hub.buses if bus is not self)

    def close(self):
        self.hub.buses.remove(self)


def in_memory_fleet(monkeypatch) -> Hub:
    """Make server and worker nodes built next talk over one Hub (no key, no idle sleep)."""
    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE'):
        monkeypatch.delenv(var, raising=False)
    hub = Hub()
    monkeypatch.setattr(server_node, 'open_bus', hub.bus)
    monkeypatch.setattr(worker_node, 'open_bus', hub.bus)
    monkeypatch.setattr('rog_ros.nodes.driver.IDLE_POLL_S', 0.0)
    return hub


def server_and_worker(out, namespace, server_args=(), worker_args=()) -> tuple:
    """Return a configured toy server and worker 0 of a one-worker fleet (in_memory_fleet)."""
    srv, workers = server_and_workers(out, namespace, 1, server_args, worker_args)
    return srv, workers[0]


def server_and_workers(out, namespace, n, server_args=(), worker_args=()) -> tuple:
    """Return a configured toy server and its ``n`` workers (in_memory_fleet)."""
    common = ['--workload', 'toy', '--workers', str(n), '--namespace', namespace]
    srv = server_node.ServerNode(rog_server.build_parser().parse_args(
        common + ['--out', str(out), *server_args]))
    workers = [worker_node.WorkerNode(rog_worker.build_parser().parse_args(
        common + ['--rank', str(r), *worker_args])) for r in range(n)]
    srv.configure()
    for wrk in workers:
        wrk.configure()
    return srv, workers


def run_to_the_end(srv, workers, before_finish=lambda: None) -> dict:
    """
    Activate ``srv`` and ``workers``, spin them until all are idle, finish; the summary.

    ``before_finish`` runs between the last spin and ``finish``. Every node is shut down,
    whatever happens. Wall clock bounds the spinning: the run waits on real timers.
    """
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline:
            busy = [w.spin_once() for w in workers]
            if not srv.spin_once() and not any(busy):
                break
        before_finish()
        return srv.finish()
    finally:
        for w in workers:
            w.shutdown()
        srv.shutdown()


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    hub = in_memory_fleet(monkeypatch)
    srv, wrk = server_and_worker(tmp_path, '/lc', ['--iterations', '10000', '--eval-every', '5'])
    assert srv.activate() and wrk.activate()
    yield hub, srv, wrk
    wrk.shutdown()
    srv.shutdown()


def _turns(srv, wrk, n):
    for _ in range(n):
        assert wrk.spin_once() and srv.spin_once()


def _pushes(hub):
    return hub.published.get('/lc/up/chunks', 0)


def test_pause_stops_pushes_activate_resumes_shutdown_writes_summary(fleet, tmp_path):
    hub, srv, wrk = fleet
    # Prepare: train a few iterations
    while wrk.engine.clock < 3:
        _turns(srv, wrk, 1)
    # Execute: pause (SIGUSR1 / ros2 lifecycle set rog_worker_0 deactivate)
    wrk.requests.request('deactivate')
    _turns(srv, wrk, 50)                      # a transfer in flight may finish
    clock, pushes, computed = wrk.engine.clock, _pushes(hub), wrk.compute_s
    _turns(srv, wrk, 300)
    # Assert: nothing new starts while inactive, but the protocol keeps being served
    assert wrk.life.state == INACTIVE
    assert (wrk.engine.clock, _pushes(hub), wrk.compute_s) == (clock, pushes, computed)
    assert wrk.driver.compute_at is not None  # the due computation waits for activate
    # Execute: resume (SIGUSR2 / activate)
    wrk.requests.request('activate')
    while wrk.engine.clock < clock + 3:
        _turns(srv, wrk, 1)
    assert wrk.life.state == ACTIVE and _pushes(hub) > pushes
    # Execute: shut the server down (SIGINT / shutdown) mid-run
    srv.requests.request('shutdown')
    assert srv.spin_once() is False
    summary = srv.finish()
    # Assert: the summary of what was measured so far is written
    on_disk = json.loads((tmp_path / 'summary.json').read_text())
    assert srv.life.state == FINALIZED
    assert on_disk['completed'] is False and summary['completed'] is False
    assert on_disk['evaluations'] >= 2
    assert [t for t, _, _ in wrk.life.history] == ['configure', 'activate', 'deactivate',
                                                   'activate']


def test_paused_worker_reports_it_on_diagnostics(fleet):
    from rog_ros.nodes.diagnostics import worker_statuses
    hub, srv, wrk = fleet
    _turns(srv, wrk, 5)
    wrk.requests.request('deactivate')
    _turns(srv, wrk, 1)
    training = worker_statuses(wrk, 0.0)[0]
    values = {kv.key: kv.value for kv in training.values}
    assert training.level == 1 and 'paused' in training.message
    assert values['lifecycle'] == INACTIVE and int(values['staleness_headroom']) <= 4


def test_worker_link_diagnostics_report_the_emulated_rate(monkeypatch):
    import time
    from rog_ros.nodes.diagnostics import worker_statuses
    hub = Hub()
    monkeypatch.setattr(worker_node, 'open_bus', hub.bus)
    wrk = worker_node.WorkerNode(rog_worker.build_parser().parse_args(
        ['--workload', 'toy', '--workers', '2', '--rank', '1', '--trace', 'indoors']))
    wrk.configure()
    try:
        link = [s for s in worker_statuses(wrk, time.monotonic()) if s.name.endswith('link')][0]
    finally:
        wrk.shutdown()
    values = {kv.key: kv.value for kv in link.values}
    assert link.message.startswith('emulated') and float(values['emulated_mbps']) > 0
    assert values['trace'] == 'indoors'


def test_the_last_evaluation_is_of_the_model_the_run_leaves(tmp_path, monkeypatch):
    """A late ack that changes the consensus while the workers leave is evaluated too."""
    import torch
    from rog_ros.nodes.assembly import load_workload
    from rog_ros.nodes.model_file import load_trained
    in_memory_fleet(monkeypatch)
    monkeypatch.setattr(server_node, 'LEAVE_TIMEOUT_S', 0.2)
    # (without the final model: with it every worker holds w_srv, and so does the consensus)
    srv, wrk = server_and_worker(tmp_path, '/last', ['--iterations', '10', '--eval-every', '5',
                                                     '--final-model', 'false'])
    try:
        assert srv.activate() and wrk.activate()
        while not srv.engine.finished:
            _turns(srv, wrk, 1)
        srv.spin_once()                       # the periodic evaluation at iteration 10
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():                 # as a late pull's ack would change it
            srv.engine.mirror[0] += 0.2 * torch.randn(srv.engine.mirror.shape[1], generator=g)
        summary = srv.finish()
    finally:
        wrk.shutdown()
        srv.shutdown()
    model = load_trained('toy', tmp_path / 'model.pt')
    assert summary['final_accuracy'] == load_workload('toy').evaluate(model)['accuracy']


@pytest.mark.parametrize('final', [True, False])
def test_each_robot_leaves_with_the_model_the_server_leaves(tmp_path, monkeypatch, caplog,
                                                            final):
    """With final_model, every robot's model_out file is the server's model.pt, bit for bit."""
    import logging
    import torch
    in_memory_fleet(monkeypatch)
    monkeypatch.setattr(server_node, 'LEAVE_TIMEOUT_S', 0.2)
    robots = tmp_path / 'robots'
    srv, workers = server_and_workers(
        tmp_path / 'run', '/final', 2,
        ['--iterations', '12', '--eval-every', '6', '--final-model', str(final).lower()],
        ['--model-out', str(robots) + os.sep])
    caplog.set_level(logging.INFO)
    summary = run_to_the_end(srv, workers)
    server_model = torch.load(tmp_path / 'run' / 'model.pt', weights_only=True)
    robot_model = torch.load(robots / 'model.pt', weights_only=True)   # the last robot's
    gap = max(float((server_model[k] - robot_model[k]).abs().max()) for k in server_model)
    said = [r.getMessage() for r in caplog.records if 'model to' in r.getMessage()]
    if final:
        assert summary['final_model_delivered'] == 2 and summary['final_model_missed'] == 0
        assert gap == 0.0
        assert len(said) == 2 and all("the fleet's final model" in m for m in said), said
    else:
        assert summary['final_model_delivered'] == 0
        assert gap > 1e-6                 # the robot stopped with its own model
        assert len(said) == 2 and all("this robot's own model" in m for m in said), said


def test_timeseries_bytes_count_the_uplink_as_the_summary_does(tmp_path, monkeypatch):
    """A fleet's ``bytes`` column is the server's uplink plus downlink count, as in summary."""
    import csv
    in_memory_fleet(monkeypatch)
    monkeypatch.setattr(server_node, 'LEAVE_TIMEOUT_S', 0.2)
    srv, workers = server_and_workers(tmp_path, '/bytes', 2, ['--iterations', '10',
                                                              '--eval-every', '5'])

    def evaluate_at_the_end():
        """Make finish() evaluate after the last transfer, as the run's last row."""
        srv._last_evaluated = None
    summary = run_to_the_end(srv, workers, evaluate_at_the_end)
    with open(tmp_path / 'timeseries.csv', newline='') as f:
        rows = list(csv.DictReader(f))
    assert summary['completed'] and summary['bytes_up'] > 0
    assert [float(r['bytes']) for r in rows] == sorted(float(r['bytes']) for r in rows)
    assert float(rows[-1]['bytes']) == summary['bytes_up'] + summary['bytes_down']


@pytest.mark.parametrize('drops, heard, said', [
    ({'bad_tag': 7, 'undecodable': 0}, False, '; yet it dropped 7 received messages (bad_tag 7)'),
    ({'bad_tag': 0, 'undecodable': 0}, False, '; it heard nothing from the server since it '
                                              'started'),
    ({'bad_tag': 0, 'undecodable': 0}, True, None),
    ({'bad_tag': 0, 'invalid': 5}, True, '; yet it dropped 5 received messages (invalid 5): '
                                         'see the warnings above')])
def test_a_worker_that_hears_the_server_only_as_drops_says_so_when_it_gives_up(
        tmp_path, monkeypatch, drops, heard, said):
    # every message of a server with another fleet key (or robot_keys set otherwise) fails its
    # tag: the worker's last line said only that the server had been silent for 120 s. A
    # server that drops every message of the worker (robot_keys on there, off here) sends it
    # nothing at all: the line said only that, too. Messages the engine refused (a second
    # robot of the same rank) were blamed on the keys
    in_memory_fleet(monkeypatch)
    srv, wrk = server_and_worker(tmp_path, '/quiet', worker_args=['--server-timeout', '0.3'])
    # the server is configured (its endpoints on the hub) but never spun: the worker starts
    # and hears nothing
    monkeypatch.setattr(wrk.bus, 'reject_counts', lambda: dict(drops), raising=False)
    try:
        assert wrk.activate()
        if heard:                     # as if the server had spoken once, then fallen silent
            wrk.driver.last_receive = wrk.driver.clock()
        wrk.engine.rejects = drops.get('invalid', 0)     # the engine counts these itself
        deadline = time.monotonic() + 30.0
        with pytest.raises(TimeoutError) as err:
            while time.monotonic() < deadline:
                wrk.spin_once()
    finally:
        wrk.shutdown()
        srv.shutdown()
    message = str(err.value)
    assert message.startswith('worker 0: no message from the server for 0 s')
    if said is None:
        assert message.endswith(')'), message      # the engine's state and clock, nothing more
    elif drops.get('invalid'):        # refused by the engine: nothing to do with the keys
        assert message.endswith(said), message
    else:
        assert said in message and 'fleet key' in message, message
        assert 'robot_keys' in message, message


def _state_args(tmp_path, monkeypatch) -> list:
    """
    Make an in-memory fleet with a short leave and a state dir; return its --state-dir.

    The robots restarted after the end need their saves to come back from, and a server
    that leaves at once to end the test quickly.
    """
    in_memory_fleet(monkeypatch)
    monkeypatch.setattr(server_node, 'LEAVE_TIMEOUT_S', 0.2)
    (tmp_path / 'state').mkdir()
    return ['--state-dir', str(tmp_path / 'state')]


def _fleet_with_state(tmp_path, namespace, state) -> tuple:
    """Return a toy server of 8 iterations and its 2 workers, all saving under ``state``."""
    return server_and_workers(tmp_path / 'run', namespace, 2,
                              ['--iterations', '8', '--eval-every', '4', *state], state)


def test_a_finished_run_started_again_from_its_state_ends_at_once_for_every_robot(
        tmp_path, monkeypatch, caplog):
    # the server said the run had finished and left; its robots, restored, waited for it
    # until rog fleet killed them and exited with status 1 ("did not exit after the server
    # finished")
    import logging
    state = _state_args(tmp_path, monkeypatch)
    srv, workers = _fleet_with_state(tmp_path, '/again', state)
    assert run_to_the_end(srv, workers)['iterations'] == 8
    caplog.set_level(logging.WARNING)
    srv, workers = _fleet_with_state(tmp_path, '/again', state)
    try:
        started = time.monotonic()
        assert srv.activate() and all(w.activate() for w in workers)
        assert not any(w.spin_once() for w in workers)
        assert time.monotonic() - started < 5.0
    finally:
        for w in workers:
            w.shutdown()
        srv.shutdown()
    said = [r.getMessage() for r in caplog.records
            if 'had already finished the run' in r.getMessage()]
    assert [m.split(' had')[0] for m in said] == ['robot 0', 'robot 1'], said
    # in the words of rog fleet and rog robot --role server (state_dir.train_again)
    assert all(m.endswith(f'nothing to resume; to train again, move {tmp_path / "state"} away '
                          'or give another --state-dir') for m in said), said


def test_a_robot_restarted_after_the_final_model_came_writes_it_as_the_fleets(
        tmp_path, monkeypatch, caplog):
    # holds_final was not in the robot's state: one restarted after the final model came
    # (its ack sent, the stop order lost with it) was stopped at its JOIN holding the final
    # model, and wrote it as "this robot's own model ... not the fleet's final model"
    import logging
    import torch
    state = _state_args(tmp_path, monkeypatch)
    robot = state + ['--model-out', str(tmp_path / 'robot1.pt')]
    common = ['--workload', 'toy', '--workers', '2', '--namespace', '/restarted']
    srv, workers = _fleet_with_state(tmp_path, '/restarted', state)
    workers[1] = worker_node.WorkerNode(rog_worker.build_parser().parse_args(
        common + ['--rank', '1', *robot]))
    workers[1].configure()
    caplog.set_level(logging.INFO)
    again = None
    try:
        assert srv.activate() and all(w.activate() for w in workers)
        deadline = time.monotonic() + 120.0
        while not workers[1].engine.holds_final:
            assert time.monotonic() < deadline
            workers[0].spin_once()
            workers[1].spin_once()
            srv.spin_once()
        workers[1].shutdown()                  # its final ack out, the stop order lost
        again = worker_node.WorkerNode(rog_worker.build_parser().parse_args(
            common + ['--rank', '1', *robot]))
        again.configure()
        assert again.activate() and again.hooks.restored and again.engine.holds_final
        while again.spin_once() or workers[0].spin_once():
            assert time.monotonic() < deadline
            srv.driver.step(0.0)               # (finished: the server still answers)
        assert again.engine.state == 'stopped' and again.engine.bytes_up == 0
        summary = srv.finish()
    finally:
        for w in workers + [again]:
            if w is not None:
                w.shutdown()
        srv.shutdown()
    assert summary['final_model_delivered'] == 2
    said = [r.getMessage() for r in caplog.records if 'model to' in r.getMessage()]
    assert len(said) == 1 and "wrote the fleet's final model to" in said[0], said
    server_model = torch.load(tmp_path / 'run' / 'model.pt', weights_only=True)
    robot_model = torch.load(tmp_path / 'robot1.pt', weights_only=True)
    assert all(torch.equal(server_model[k], robot_model[k]) for k in server_model)


def _keyed_worker(tmp_path, monkeypatch, key_file, robot_keys='true', bus=None):
    """Return worker 1 of two, given ``key_file`` (robot_keys as said), on ``bus`` or a Hub."""
    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE', 'ROG_FLEET_KEY_SAID'):
        monkeypatch.delenv(var, raising=False)
    if bus is None:
        monkeypatch.setattr(worker_node, 'open_bus', Hub().bus)
    argv = ['--workload', 'toy', '--workers', '2', '--rank', '1', '--fleet-key-file',
            str(key_file), '--robot-keys', robot_keys]
    return worker_node.WorkerNode(rog_worker.build_parser().parse_args(
        argv + (['--bus', bus, '--namespace', f'/rog_key_{os.getpid()}'] if bus else [])))


def _key_warnings(caplog, wrk, times=1) -> list:
    """Configure ``wrk`` (``times`` times, cleaning up between); return its key warnings."""
    import logging
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        try:
            for i in range(times):
                if i:
                    wrk.cleanup()
                wrk.configure()
        finally:
            wrk.shutdown()
    return [r.getMessage() for r in caplog.records if 'holds the fleet key' in r.getMessage()]


def test_a_worker_node_holding_the_fleet_key_with_robot_keys_on_warns_once(
        tmp_path, monkeypatch, caplog):
    # rog robot warned, the same worker started by ros2 launch / ros2 run said nothing: the
    # node itself warns now (both transports load the key in configure), once
    from rog_ros.nodes.fleet_key import write_key_file
    from rog_ros.protocol.robot_keys import robot_key_text
    key = write_key_file(tmp_path / 'fleet.key')
    wrk = _keyed_worker(tmp_path, monkeypatch, tmp_path / 'fleet.key')
    said = _key_warnings(caplog, wrk, times=2)
    assert len(said) == 1 and key.fingerprint in said[0] and '--robot 1' in said[0], said
    # what it should hold: its own key; or robot_keys off: the fleet key is what it needs
    write_key_file(tmp_path / 'robot1.key', robot_key_text(key, 1))
    assert _key_warnings(caplog, _keyed_worker(tmp_path, monkeypatch,
                                               tmp_path / 'robot1.key')) == []
    assert _key_warnings(caplog, _keyed_worker(tmp_path, monkeypatch, tmp_path / 'fleet.key',
                                               robot_keys='false')) == []
    # started by what said it already (rog robot), or a fleet on one machine: not again
    wrk = _keyed_worker(tmp_path, monkeypatch, tmp_path / 'fleet.key')
    monkeypatch.setenv('ROG_FLEET_KEY_SAID', '1')
    assert _key_warnings(caplog, wrk) == []


def test_a_worker_node_on_the_embedded_dds_warns_of_the_fleet_key(
        tmp_path, monkeypatch, caplog):
    pytest.importorskip('cyclonedds')
    from rog_ros.nodes.fleet_key import write_key_file
    key = write_key_file(tmp_path / 'fleet.key')
    wrk = _keyed_worker(tmp_path, monkeypatch, tmp_path / 'fleet.key', bus='dds')
    said = _key_warnings(caplog, wrk)
    assert len(said) == 1 and key.fingerprint in said[0], said


def test_what_starts_the_workers_tells_them_whether_the_fleet_key_was_said(tmp_path):
    from types import SimpleNamespace
    from rog_ros.nodes import fleet, launching, robot
    from rog_ros.nodes.connect import FLEET_KEY_SAID_ENV
    from rog_ros.nodes.fleet_key import write_key_file
    from rog_ros.nodes.plan import NodeSpec
    write_key_file(tmp_path / 'fleet.key')
    args = SimpleNamespace(fleet_key_file=str(tmp_path / 'fleet.key'), record=None)
    for params, said in (({'robot_keys': True}, True), ({'robot_keys': False}, False)):
        env = {}      # rog robot warned on its terminal: its worker node does not again
        robot._check_robot_environment(args, env, NodeSpec('rog_worker_2', 'rog_worker',
                                                           params, 'worker', 2))
        assert (env.get(FLEET_KEY_SAID_ENV) == '1') is said
    env = {}          # a fleet on one machine: every robot with the fleet key, as meant
    fleet._without_key(env, {})
    assert env[FLEET_KEY_SAID_ENV] == '1'
    assert launching.launch_environment({}, {}, one_host=True)[FLEET_KEY_SAID_ENV] == '1'
    assert FLEET_KEY_SAID_ENV not in launching.launch_environment({}, {})   # robot.launch.py
