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
AuthBus end to end on the embedded DDS transport: hostile RowChunks are dropped and counted.

A signed worker, an attacker on a plain DdsBus (no key) and a server behind an AuthBus share
one loopback domain and the fleet's uplink topic. Deadlines only bound waiting.
"""

import json
import os
from pathlib import Path
import subprocess
import sys
import time

import dds_domains
import numpy as np
import pytest

from rog_ros.nodes.driver import EngineDriver
from rog_ros.nodes.outbox import Outbox
from rog_ros.protocol import auth
from rog_ros.protocol import messages as m
from rog_ros.protocol.robot_keys import derive_robot_key

pytest.importorskip('cyclonedds')
dds_bus = pytest.importorskip('rog_ros.transport.dds_bus')
cyclone_config = pytest.importorskip('rog_ros.transport.cyclone_config')
auth_bus = pytest.importorskip('rog_ros.transport.auth_bus')

KEY = auth.FleetKey(os.urandom(32))
WAIT_S = 20.0
TOPIC = 'up/chunks'


def _domain(offset: int) -> int:
    """Return this module's domain ``offset`` (:func:`dds_domains.domain`)."""
    return dds_domains.domain(f'{__name__}:{offset}')


def _chunk(seq: int, sender: int = 1) -> m.RowChunk:
    return m.RowChunk(transfer_id=5, seq=seq, sender=sender, receiver=m.SERVER,
                      kind=m.KIND_GRAD, clock=3,
                      row_ranges=np.array([2 * seq, 2 * seq + 1], dtype=np.uint32),
                      payload=bytes([seq % 256]) * 64, incarnation=42)


def _wait_matched(buses, deadline):
    while any(b.matched(TOPIC) < 2 for b in buses):  # each sees both of the others
        assert time.monotonic() < deadline, 'no DDS match'
        time.sleep(0.01)


def _drain(bus, want, deadline, settle_s=0.5):
    got = []
    while len(got) < want and time.monotonic() < deadline:
        got += [msg for _, msg in bus.poll(0.2)]
    end = time.monotonic() + settle_s          # anything more (e.g. a replay) shows up here
    while time.monotonic() < end:
        got += [msg for _, msg in bus.poll(0.1)]
    return got


@pytest.fixture()
def fleet():
    """Server (AuthBus), honest worker (AuthBus) and an attacker (plain DdsBus)."""
    config = str(cyclone_config.config_path('loopback'))
    domain = _domain(0)
    ns = f'/rog_sec_{os.getpid()}'
    server = auth_bus.AuthBus(dds_bus.DdsBus(namespace=ns, domain_id=domain, config=config),
                              KEY)
    worker = auth_bus.AuthBus(dds_bus.DdsBus(namespace=ns, domain_id=domain, config=config),
                              KEY)
    attacker = dds_bus.DdsBus(namespace=ns, domain_id=domain, config=config)
    server.subscribe(TOPIC)
    attacker.subscribe(TOPIC)                   # to record honest traffic for a replay
    worker.advertise(TOPIC)
    attacker.advertise(TOPIC)
    _wait_matched([server, worker, attacker], time.monotonic() + WAIT_S)
    yield server, worker, attacker
    for bus in (attacker, worker, server):
        bus.close()


def test_hostile_chunks_are_dropped_and_counted_honest_ones_flow(fleet):
    # Prepare
    server, worker, attacker = fleet
    deadline = time.monotonic() + WAIT_S
    for seq in range(3):
        worker.publish(TOPIC, _chunk(seq))
    recorded = [msg for _, msg in attacker.poll(0.0)]
    while len(recorded) < 3 and time.monotonic() < deadline:
        recorded += [msg for _, msg in attacker.poll(0.2)]
    first = _drain(server, 3, deadline, settle_s=0.0)
    forged = _chunk(7)
    forged.auth_seq, forged.auth_tag = 10**18, os.urandom(auth.TAG_BYTES)
    tampered = recorded[2]
    tampered = m.RowChunk(**{**vars(tampered), 'payload': b'\xff' * 64})
    wrong_key = auth.sign(_chunk(8), auth.FleetKey(os.urandom(32)), 10**18)
    # Execute
    attacker.publish(TOPIC, _chunk(9))         # unauthenticated
    attacker.publish(TOPIC, forged)            # made-up tag
    attacker.publish(TOPIC, tampered)          # honest tag, altered payload
    attacker.publish(TOPIC, wrong_key)         # signed with another key
    attacker.publish(TOPIC, recorded[0])       # replay of an honest chunk
    attacker.publish(TOPIC, recorded[2])       # replay of another
    worker.publish(TOPIC, _chunk(3))           # honest traffic keeps flowing
    later = _drain(server, 1, deadline)
    # Assert
    assert len(recorded) == 3 and all(len(c.auth_tag) == auth.TAG_BYTES for c in recorded)
    assert [c.seq for c in first] == [0, 1, 2]
    assert [c.seq for c in later] == [3]
    assert server.reject_counts() == {'undecodable': 0, 'unauthenticated': 1, 'bad_tag': 3,
                                      'replay': 2, 'too_old': 0, 'malformed': 0}
    assert server.rejects == 6
    assert server.verifier.accepted == 4


def test_callbacks_see_only_authenticated_messages(fleet):
    # Prepare
    server, worker, attacker = fleet
    got = []
    server.subscribe('status/train_status', callback=got.append)
    worker.advertise('status/train_status')
    attacker.advertise('status/train_status')
    deadline = time.monotonic() + WAIT_S
    while (worker.matched('status/train_status') == 0
           or attacker.matched('status/train_status') == 0):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    # Execute (best effort topic: repeat until something arrives)
    while not got and time.monotonic() < deadline:
        attacker.publish('status/train_status', m.TrainStatus(node=0, stamp=1.0))
        worker.publish('status/train_status', m.TrainStatus(node=1, stamp=1.0))
        server.poll(0.1)
    # Assert
    assert got and {s.node for s in got} == {1}
    assert server.reject_counts()['unauthenticated'] >= 1


class _Raising:
    """An engine whose validation has a hole: it raises something other than MessageError."""

    rejects = 0

    def __init__(self):
        self.seen = []

    def on_message(self, msg, now):
        self.seen.append(msg)
        if msg.seq == 1:
            raise IndexError('index 99 is out of bounds')
        return []

    def next_wakeup(self):
        return None


class _ListBus:
    namespace = '/rog'
    rejects = 0

    def __init__(self, batches):
        self.batches = list(batches)

    def poll(self, timeout_s=0.0):
        return self.batches.pop(0) if self.batches else []


def test_driver_survives_an_engine_exception_and_counts_it():
    # Prepare
    logs = []
    engine = _Raising()
    bus = _ListBus([[(TOPIC, _chunk(0)), (TOPIC, _chunk(1)), (TOPIC, _chunk(2))]])
    driver = EngineDriver(bus, engine, Outbox({}), on_log=lambda now, log: logs.append(log))
    # Execute
    driver.step(0.0)
    # Assert
    assert [c.seq for c in engine.seen] == [0, 1, 2]     # the loop went on after the error
    assert driver.engine_errors == 1
    assert [(log.name, log.info['where']) for log in logs] == [('reject', 'engine')]
    assert 'IndexError' in logs[0].info['error']


def test_nodes_refuse_an_unusable_key_file_in_one_line(tmp_path, capsys):
    # Prepare
    from rog_ros.nodes import netmon, rog_server
    from rog_ros.nodes.params import check_fleet_args
    loose = tmp_path / 'loose.key'
    loose.write_text('ab' * 32)
    os.chmod(loose, 0o644)
    parser = rog_server.build_parser()
    args = parser.parse_args(['--fleet-key-file', str(loose)])
    # Execute / Assert
    with pytest.raises(SystemExit) as exit_server:
        check_fleet_args(parser, args)
    err = capsys.readouterr().err
    assert exit_server.value.code == 2 and 'chmod 600' in err and 'ab' * 32 not in err
    with pytest.raises(SystemExit) as exit_netmon:
        netmon.main(['--bus', 'none', '--fleet-key-file', str(tmp_path / 'missing.key')])
    assert exit_netmon.value.code == 2 and 'cannot read' in capsys.readouterr().err


def test_rog_fleet_makes_a_fresh_private_key_per_run_or_uses_the_given_one(tmp_path):
    # Prepare
    from argparse import Namespace
    from rog_ros.nodes.fleet import fleet_key_env
    from rog_ros.nodes import fleet_key
    given = tmp_path / 'given.key'
    given_key = fleet_key.write_key_file(given)
    env = {k: v for k, v in os.environ.items() if k not in (fleet_key.KEY_ENV,
                                                            fleet_key.KEY_FILE_ENV)}
    # Execute
    old = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        key1, env1 = fleet_key_env(Namespace(fleet_key_file=None), str(tmp_path / 'run'))
        key2, env2 = fleet_key_env(Namespace(fleet_key_file=None), str(tmp_path / 'run'))
        key3, env3 = fleet_key_env(Namespace(fleet_key_file=str(given)), str(tmp_path / 'run'))
    finally:
        os.environ.clear()
        os.environ.update(old)
    # Assert
    path = str(tmp_path / 'run' / 'fleet.key')
    assert env1 == env2 == {fleet_key.KEY_FILE_ENV: path}      # a path, never the key
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert key1 != key2 and fleet_key.read_key_file(path) == key2     # one key per run
    assert key3 == given_key and env3[fleet_key.KEY_FILE_ENV] == str(given)


# ---------------------------------------------------------------------- engines over DDS
SHAPES = [(16, 3, 3, 3), (16,), (10, 16), (10,)]


def _engines():
    import torch
    from rog_ros.core.compress import ScaledSign
    from rog_ros.core.rows import RowLayout
    from rog_ros.protocol.policies import make_policy
    from rog_ros.protocol.ps import ServerEngine
    from rog_ros.protocol.worker import WorkerEngine
    pol = make_policy('ssp:4')                  # whole model: the push content is fixed
    layout = RowLayout(SHAPES, whole_model=pol.whole_model)
    w0 = torch.zeros(layout.n_params)
    server = ServerEngine(layout, ScaledSign(), pol, 1, w0, lr=0.1, chunk_bytes=256)
    worker = WorkerEngine(0, 1, layout, ScaledSign(), pol, w0, chunk_bytes=256)
    grad = torch.linspace(-1.0, 1.0, layout.n_params)
    return server, worker, grad


def _reference():
    """Return the server model after one push with engines wired directly, and the uplink."""
    from rog_ros.protocol.actions import Send
    server, worker, grad = _engines()
    worker.start(0.0)
    queue, up = list(worker.on_compute_done(grad, 0.0)), []
    while queue and server.clock[0] < 1:
        a = queue.pop(0)
        if isinstance(a, Send) and a.dest == m.SERVER:
            up.append(a.msg)
            queue += server.on_message(a.msg, 0.0)
        elif isinstance(a, Send):
            queue += worker.on_message(a.msg, 0.0)
    return server.w_srv.clone(), up


def _train_one_push_under_attack(authenticate: bool, tag: str):
    """One push over DDS while an attacker first injects a forged copy of it."""
    from rog_ros.nodes.routing import server_inbox, server_outbox, worker_inbox, worker_outbox
    reference, up = _reference()
    config = str(cyclone_config.config_path('loopback'))
    domain, ns = _domain(3 if authenticate else 5), f'/rog_sec_{os.getpid()}_{tag}'

    def bus(auth_it):
        inner = dds_bus.DdsBus(namespace=ns, domain_id=domain, config=config)
        return auth_bus.AuthBus(inner, KEY) if auth_it else inner

    server_bus, worker_bus, attacker = bus(authenticate), bus(True), bus(False)
    try:
        server, worker, grad = _engines()
        for t in server_inbox():
            server_bus.subscribe(t)
        for t in worker_inbox(0):
            worker_bus.subscribe(t)
        for t in server_outbox(1):
            server_bus.advertise(t)
        for t in worker_outbox():
            worker_bus.advertise(t)
            attacker.advertise(t)
        deadline = time.monotonic() + WAIT_S
        while (any(server_bus.matched(t) < (2 if t == TOPIC else 1) for t in server_inbox())
               or any(worker_bus.matched(t) == 0 for t in worker_inbox(0))):
            assert time.monotonic() < deadline, 'no DDS match'
            time.sleep(0.01)
        for msg in up:                          # forged: same header, garbage payload
            forged = m.RowChunk(**vars(msg)) if msg.TYPE == 'RowChunk' else None
            if forged is not None:
                forged.payload = bytes(b ^ 0x5A for b in forged.payload)
                forged.auth_seq, forged.auth_tag = 2**62, os.urandom(auth.TAG_BYTES)
                attacker.publish(TOPIC, forged)
        time.sleep(0.3)                         # let the forgeries arrive first
        s_driver = EngineDriver(server_bus, server, Outbox({}))
        w_driver = EngineDriver(worker_bus, worker, Outbox({}), compute=lambda clock: grad)
        w_driver.handle(worker.start(time.monotonic()), time.monotonic())
        while server.clock[0] < 1 and time.monotonic() < deadline:
            w_driver.step(0.01)
            s_driver.step(0.01)
        return server, reference, server_bus
    finally:
        for b in (attacker, worker_bus, server_bus):
            b.close()


def test_forged_push_is_dropped_and_the_model_is_what_the_worker_sent():
    # Execute
    server, reference, server_bus = _train_one_push_under_attack(True, 'auth')
    # Assert
    assert server.clock == [1]
    assert torch_equal(server.w_srv, reference)
    assert server_bus.reject_counts()['bad_tag'] >= 2 and server.rejects == 0


def test_control_without_authentication_the_same_forgery_corrupts_the_model():
    # Execute
    server, reference, _ = _train_one_push_under_attack(False, 'plain')
    # Assert: the test above can fail
    assert server.clock == [1]
    assert not torch_equal(server.w_srv, reference)


def torch_equal(a, b):
    import torch
    return bool(torch.equal(a, b))


class _Inner(_ListBus):

    def subscribe(self, topic, callback=None, qos=None):
        pass

    def close(self):
        pass


def test_rejects_are_logged_by_reason_and_count_never_the_key(caplog):
    # Prepare
    secret = os.urandom(32)
    key = auth.FleetKey(secret)
    forged = [auth.sign(_chunk(i), auth.FleetKey(os.urandom(32)), i + 1) for i in range(5)]
    bus = auth_bus.AuthBus(_Inner([[(TOPIC, c) for c in forged] + [(TOPIC, _chunk(9))]]), key)
    # Execute
    with caplog.at_level('WARNING', logger='rog_ros.auth'):
        got = bus.poll(0.0)
    # Assert
    assert got == []
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4        # bad_tag on its 1st, 2nd and 4th; unauthenticated on its 1st
    assert sum('bad_tag' in line for line in lines) == 3 and 'unauthenticated' in lines[-1]
    assert '(4 bad_tag so far)' in lines[2]
    text = ' '.join(lines) + repr(bus) + str(bus.reject_counts())
    assert secret.hex() not in text and secret.hex()[:8] not in text
    assert bus.reject_counts()['bad_tag'] == 5 and bus.rejects == 6


def test_a_fleet_with_robot_keys_trains_and_each_robot_holds_only_its_own_key(tmp_path):
    """Run a two-robot toy fleet with robot keys: it completes, nothing is refused."""
    # Prepare
    out = tmp_path / 'run'
    command = [sys.executable, '-m', 'rog_ros.cli', 'fleet', '--robot-keys', 'true',
               '--workers', '2', '--iterations', '6', '--namespace',
               f'/rog_test_{os.getpid()}_robot_keys', '--out', str(out), '--quiet']
    # Execute
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parent.parent)
    # Assert
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['completed'] and summary['authenticated'] and summary['rejects'] == 0
    fleet = auth.parse_key((out / 'fleet.key').read_text())
    for rank in (0, 1):
        log = (out / 'logs' / f'rog_worker_{rank}.log').read_text()
        own = derive_robot_key(fleet, rank).fingerprint
        assert f'RobotKeyring(robot={rank}, key={own})' in log
    server_log = (out / 'logs' / 'rog_server.log').read_text()
    assert f'FleetKeyring(fleet={fleet.fingerprint})' in server_log
