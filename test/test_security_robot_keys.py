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
Robot keys: a robot that holds its own key can speak for itself only.

With one fleet key a taken-over robot could silence another (a message in its name stamped far
ahead moves its replay window past everything it will send) or forge the server's messages to
it. With ``robot_keys`` those forgeries fail the tag check, while every message of a real
exchange verifies (``rog_ros.protocol.robot_keys``).
"""

import copy
import dataclasses
import os

import numpy as np
import pytest
from rog_ros import cli
from rog_ros.core.compress import make_codec
from rog_ros.core.rows import RowLayout
from rog_ros.protocol import auth
from rog_ros.protocol import messages as m
from rog_ros.protocol.actions import Send
from rog_ros.protocol.policies import make_policy
from rog_ros.protocol.ps import ServerEngine
from rog_ros.protocol.robot_keys import (
    derive_robot_key, FleetKeyring, keyring_for, robot_key_text, robot_of, RobotKeyring)
from rog_ros.protocol.worker import WorkerEngine
import torch

FLEET = auth.FleetKey(bytes(range(32)))
SHAPES = [(16, 3, 3, 3), (16,), (10, 16), (10,)]


def _chunk(sender, receiver, seq=1, incarnation=7):
    """Return a small RowChunk from ``sender`` to ``receiver``."""
    return m.RowChunk(transfer_id=3, seq=0, sender=sender, receiver=receiver,
                      kind=m.KIND_GRAD if receiver == m.SERVER else m.KIND_UPDATE, clock=2,
                      codec=1, row_ranges=np.array([0, 2], dtype=np.uint32),
                      payload=b'\x01' * 8, incarnation=incarnation)


def test_a_robot_key_file_reads_back_as_that_robots_key():
    text = robot_key_text(FLEET, 3)
    key = auth.parse_key(text)
    assert text.startswith(f'rog-robot-key-1 rank=3 fleet={FLEET.fingerprint} ')
    assert key == derive_robot_key(FLEET, 3) and key.robot == 3
    assert key.fleet_fingerprint == FLEET.fingerprint and key != FLEET
    assert derive_robot_key(FLEET, 2) != key           # one key per robot
    with pytest.raises(auth.FleetKeyError, match='malformed robot key'):
        auth.parse_key(text.replace('rank=3', 'rank=x'))
    with pytest.raises(auth.FleetKeyError, match="robot 3's key cannot make"):
        derive_robot_key(key, 1)


def test_the_silencing_forgery_works_with_one_fleet_key_and_fails_with_robot_keys():
    # robot 1, taken over, stamps a message in robot 0's name far ahead
    genuine = auth.Signer(FLEET, first_seq=100).sign(_chunk(0, m.SERVER))
    later = auth.Signer(FLEET, first_seq=101).sign(_chunk(0, m.SERVER))
    forged = auth.sign(_chunk(0, m.SERVER), FLEET, 10 ** 9)
    shared = auth.Verifier(FLEET)
    assert [shared.check(x) for x in (genuine, forged, later)] == [None, None, 'too_old']
    # with robot keys robot 1 holds k_1 only: what it tags in robot 0's name is refused
    own = {r: keyring_for(FLEET, True, r) for r in (0, 1)}
    genuine = auth.Signer(own[0], first_seq=100).sign(_chunk(0, m.SERVER))
    later = auth.Signer(own[0], first_seq=101).sign(_chunk(0, m.SERVER))
    forged = auth.sign(_chunk(0, m.SERVER), own[1].key, 10 ** 9)
    server = auth.Verifier(keyring_for(FLEET, True))
    assert [server.check(x) for x in (genuine, forged, later)] == [None, 'bad_tag', None]
    with pytest.raises(ValueError, match='signs for its own robot only'):
        auth.Signer(own[1]).sign(_chunk(0, m.SERVER))


def test_a_robot_cannot_forge_the_servers_messages_to_another_robot():
    server = keyring_for(FLEET, True)
    to_zero = [_chunk(m.SERVER, 0),
               m.TransferAck(transfer_id=3, sender=m.SERVER, receiver=0, seq=1),
               m.RowVersions(receiver=0, n_workers=2, transfer_id=3),
               m.Schedule(worker=0, clock=2, push_deadline_s=1.0)]
    robot0, robot1 = (auth.Verifier(keyring_for(FLEET, True, r)) for r in (0, 1))
    for i, msg in enumerate(to_zero):
        assert robot0.check(auth.Signer(server, 10 + i).sign(msg)) is None
        # robot 1 holds k_1: its tag on a message to robot 0 is not k_0's
        assert robot0.check(auth.sign(copy.deepcopy(msg), keyring_for(FLEET, True, 1).key,
                                      10 ** 9 + i)) == 'bad_tag'
        assert robot1.check(auth.Signer(server, 20 + i).sign(msg)) == 'bad_tag'


@pytest.mark.parametrize('msg, robot', [
    (_chunk(2, m.SERVER), 2), (_chunk(m.SERVER, 1), 1),
    (m.TransferAck(transfer_id=1, sender=1, receiver=m.SERVER, seq=0), 1),
    (m.TransferAck(transfer_id=1, sender=m.SERVER, receiver=2, seq=0), 2),
    (m.RowVersions(transfer_id=1, receiver=3, n_workers=4), 3),
    (m.Schedule(worker=0, clock=1, push_deadline_s=0.0), 0),
    (m.LinkStats(node=2, interface='wlan0', stamp=m.Time()), 2),
    (m.TrainStatus(node=1, stamp=m.Time()), 1),
    (m.TrainStatus(node=-1, stamp=m.Time()), m.SERVER),
])
def test_each_message_belongs_to_the_robot_whose_link_it_crosses(msg, robot):
    assert robot_of(msg) == robot
    keys = FleetKeyring(FLEET)
    assert keys.key_for(msg) == (FLEET if robot == m.SERVER else derive_robot_key(FLEET, robot))


def _send_signed(signers, verifiers, sends, server, workers, now, seen):
    """Deliver ``sends`` (and what they cause), each signed by its sender, verified first."""
    queue = [(src, a) for src, a in sends]
    while queue:
        src, send = queue.pop(0)
        msg = signers[src].sign(copy.deepcopy(send.msg))
        assert verifiers[send.dest].check(msg) is None, (src, send.dest, msg.TYPE)
        seen.add(msg.TYPE)
        engine = server if send.dest == m.SERVER else workers[send.dest]
        out = engine.on_message(dataclasses.replace(send.msg), now)
        queue += [(send.dest, a) for a in out if isinstance(a, Send)]


def test_every_message_of_a_real_exchange_verifies_under_robot_keys():
    policy, codec, layout = make_policy('rog:2'), make_codec('row_sign'), RowLayout(SHAPES)
    w0 = torch.zeros(layout.n_params)
    server = ServerEngine(layout, codec, policy, 2, w0, lr=0.1, chunk_bytes=128)
    workers = [WorkerEngine(r, 2, layout, codec, policy, w0, chunk_bytes=128)
               for r in range(2)]
    keys = {m.SERVER: keyring_for(FLEET, True), 0: keyring_for(FLEET, True, 0),
            1: auth.parse_key(robot_key_text(FLEET, 1))}
    keys[1] = keyring_for(keys[1], True, 1)               # robot 1 from its key file
    signers = {node: auth.Signer(k, 1000) for node, k in keys.items()}
    verifiers = {node: auth.Verifier(k) for node, k in keys.items()}
    gen, seen = torch.Generator().manual_seed(0), set()
    for w in workers:
        w.start(0.0)
    for step in range(4):
        sends = [(w.rank, a) for w in workers
                 for a in w.on_compute_done(torch.randn(layout.n_params, generator=gen),
                                            float(step)) if isinstance(a, Send)]
        _send_signed(signers, verifiers, sends, server, workers, float(step), seen)
    assert server.clock == [4, 4]
    assert {'RowChunk', 'TransferAck', 'RowVersions'} <= seen
    assert all(v.rejected == 0 for v in verifiers.values())


@pytest.mark.parametrize('key, robot_keys, rank, problem', [
    (derive_robot_key(FLEET, 1), False, 1, 'set robot_keys true on every node'),
    (derive_robot_key(FLEET, 1), True, None, 'the server (and a netmon'),
    (derive_robot_key(FLEET, 1), True, 0, "robot 1's key, given to robot 0: give robot 0 "
                                          'its own key file (rog security key --robot 0'),
    (None, True, 0, 'robot_keys needs a fleet key'),
])
def test_a_key_that_does_not_fit_the_node_is_refused_in_one_line(
        key, robot_keys, rank, problem):
    with pytest.raises(auth.FleetKeyError, match=problem.replace('(', r'\(')):
        keyring_for(key, robot_keys, rank)


def test_without_robot_keys_the_fleet_key_tags_everything():
    assert keyring_for(FLEET, False, 2) is FLEET and keyring_for(None, False) is None
    assert isinstance(keyring_for(FLEET, True, 2), RobotKeyring)


def test_rog_security_key_writes_a_robot_key_file(tmp_path, capsys):
    fleet, robot = tmp_path / 'fleet.key', tmp_path / 'robot2.key'
    assert cli.main(['security', 'key', str(fleet)]) == 0
    assert cli.main(['security', 'key', '--robot', '2', '--fleet-key', str(fleet),
                     str(robot)]) == 0
    assert "robot 2's key" in capsys.readouterr().out
    assert os.stat(robot).st_mode & 0o777 == 0o600
    from rog_ros.nodes.fleet_key import read_key_file
    assert read_key_file(robot) == derive_robot_key(read_key_file(fleet), 2)
    for argv, problem in (
            (['--robot', '1', str(tmp_path / 'x.key')], 'go together'),
            (['--robot', '1', '--fleet-key', str(robot), str(tmp_path / 'y.key')],
             "robot 2's key cannot make another robot's key")):
        assert cli.main(['security', 'key'] + argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and problem in err[0], err
    assert not (tmp_path / 'x.key').exists() and not (tmp_path / 'y.key').exists()


@pytest.mark.parametrize('node, argv, problem', [
    ('rog_worker', ['--rank', '0'], "robot 1's key, given to robot 0"),
    ('netmon', ['--nodes', '0'], "robot 1's key, given to robot 0"),
    ('netmon', ['--nodes', '0,1'], 'a netmon reporting for several robots'),
    ('rog_server', [], 'the server (and a netmon'),
])
def test_a_node_given_a_key_that_is_not_its_own_stops_in_one_line(
        tmp_path, capsys, node, argv, problem):
    import importlib
    from rog_ros.nodes.fleet_key import write_key_file
    path = tmp_path / 'robot1.key'
    write_key_file(path, robot_key_text(FLEET, 1))
    main = importlib.import_module(f'rog_ros.nodes.{node}').main
    with pytest.raises(SystemExit) as stop:
        main(argv + ['--robot-keys', 'true', '--fleet-key-file', str(path)])
    assert stop.value.code == 2
    assert problem in capsys.readouterr().err


class _Inbox:
    """A bus that hands out ``received`` once (what an AuthBus wraps)."""

    namespace, rejects = '/rog', 0

    def __init__(self, received):
        self.received = received

    def poll(self, timeout_s=0.0):
        """Return the received messages once."""
        out, self.received = self.received, []
        return out


def _bad_tag_hints(keys, sent, caplog):
    """Return the hints an AuthBus holding ``keys`` logs for four copies of ``sent``."""
    import logging
    from rog_ros.transport.auth_bus import AuthBus
    received = [('t/chunks', sent(i)) for i in range(4)]
    bus = AuthBus(_Inbox(received), keys, logger=logging.getLogger('rog_robot_keys_test'))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger='rog_robot_keys_test'):
        assert bus.poll() == []
    return [r.getMessage().split('so far)', 1)[1] for r in caplog.records][1:]


def test_a_robot_keys_setting_that_differs_between_nodes_is_named_not_a_key(caplog):
    """Name robot_keys on at one end only; the old hint blamed a key both ends share."""
    server_on, worker_off = keyring_for(FLEET, True), keyring_for(FLEET, False, 0)
    hints = _bad_tag_hints(worker_off, lambda i: auth.Signer(server_on, 10 + i).sign(
        _chunk(m.SERVER, 0)), caplog)
    assert len(hints) == 2 and all("robot 0's key: robot_keys is on at its sender and "
                                   'off here' in h for h in hints), hints
    hints = _bad_tag_hints(server_on, lambda i: auth.Signer(worker_off, 10 + i).sign(
        _chunk(0, m.SERVER)), caplog)
    assert hints and all('robot_keys is off at its sender and on here' in h
                         for h in hints), hints


def test_a_robot_that_drops_the_servers_messages_names_the_fleet_key_it_was_made_from(caplog):
    """Name the fleet fingerprint a robot key comes from, the one the server logs."""
    other = auth.FleetKey(bytes(range(1, 33)))
    robot = keyring_for(auth.parse_key(robot_key_text(FLEET, 0)), True, 0)
    hints = _bad_tag_hints(robot, lambda i: auth.Signer(keyring_for(other, True), 10 + i).sign(
        _chunk(m.SERVER, 0)), caplog)
    assert hints and all(f'made from fleet key {FLEET.fingerprint}' in h for h in hints)
    assert not any(robot.fingerprint in h for h in hints), hints
    server = keyring_for(other, True)
    hints = _bad_tag_hints(server, lambda i: auth.Signer(robot, 10 + i).sign(
        _chunk(0, m.SERVER)), caplog)
    assert hints and all(f'fleet={other.fingerprint}' in h for h in hints), hints


def test_a_robot_key_file_whose_rank_was_edited_is_named_by_the_servers_hint(caplog):
    """Name whose secret a robot's edited key file carries; the hint blamed the fleet key."""
    edited = auth.parse_key(robot_key_text(FLEET, 3).replace('rank=3', 'rank=1'))
    robot = keyring_for(edited, True, 1)          # starts: its label says robot 1
    hints = _bad_tag_hints(keyring_for(FLEET, True), lambda i: auth.Signer(robot, 10 + i).sign(
        _chunk(1, m.SERVER)), caplog)
    assert hints and all("tagged with robot 3's key, not robot 1's" in h and
                         '--robot 1 ' in h for h in hints), hints
    assert not any('different fleet key' in h for h in hints), hints
    # the robot's own hint asks whether its file was made for it
    hints = _bad_tag_hints(robot, lambda i: auth.Signer(keyring_for(FLEET, True), 10 + i).sign(
        _chunk(m.SERVER, 1)), caplog)
    assert hints and all('its rank= not edited' in h for h in hints), hints


def test_a_robot_cannot_silence_the_servers_messages_to_others_where_several_are_watched():
    """Keep one replay window per robot for the server's messages (rog fleet's watcher)."""
    server = auth.Signer(keyring_for(FLEET, True), 100)
    watcher = auth.Verifier(keyring_for(FLEET, True))

    def schedule(worker):
        """Return a Schedule of the server's run 77 to ``worker``."""
        return m.Schedule(worker=worker, clock=1, push_deadline_s=1.0, incarnation=77)

    assert watcher.check(server.sign(schedule(0))) is None
    # robot 1 stamps a message to itself (its own key) far ahead in the server's name
    assert watcher.check(auth.sign(schedule(1), keyring_for(FLEET, True, 1).key,
                                   10 ** 12)) is None
    assert [watcher.check(server.sign(schedule(w))) for w in (0, 2)] == [None, None]


@pytest.mark.parametrize('digits', [62, 66, 128])
def test_a_robot_key_file_with_more_or_fewer_than_64_hex_digits_is_refused(digits):
    """Refuse a robot key of another length: it would be another key, every tag bad."""
    text = robot_key_text(FLEET, 3)
    head, secret = text.rsplit(' ', 1)
    with pytest.raises(auth.FleetKeyError, match='64 hex digits'):
        auth.parse_key(f'{head} {(secret * 2)[:digits]}')


def test_rog_robot_warns_when_a_worker_robot_is_given_the_fleet_key(tmp_path, capsys):
    """Warn that a worker robot holding the fleet key keeps every robot's key with it."""
    from types import SimpleNamespace
    from rog_ros.nodes import robot
    from rog_ros.nodes.fleet_key import write_key_file
    from rog_ros.nodes.plan import NodeSpec
    path = tmp_path / 'fleet.key'
    write_key_file(path, FLEET.mac().digest().hex())
    args = SimpleNamespace(fleet_key_file=str(path), record=None)
    worker = NodeSpec('rog_worker_2', 'rog_worker', {'robot_keys': True}, 'worker', 2)
    robot._check_robot_environment(args, {}, worker)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'the fleet key' in err[0] and '--robot 2' in err[0], err
    write_key_file(tmp_path / 'robot2.key', robot_key_text(auth.parse_key(
        path.read_text()), 2))
    for key_file, spec in ((tmp_path / 'robot2.key', worker),
                           (path, NodeSpec('rog_server', 'rog_server', {'robot_keys': True},
                                           'server'))):
        robot._check_robot_environment(SimpleNamespace(fleet_key_file=str(key_file),
                                                       record=None), {}, spec)
        assert capsys.readouterr().err == ''


def test_a_robot_key_of_another_rank_in_the_environment_is_named_by_its_file(
        tmp_path, capsys, monkeypatch):
    """Name the key file of $ROG_FLEET_KEY_FILE: the line said only 'the fleet key'."""
    from rog_ros.nodes.fleet_key import write_key_file
    path = tmp_path / 'robot2.key'
    write_key_file(path, robot_key_text(FLEET, 2))
    monkeypatch.setenv('ROG_FLEET_KEY_FILE', str(path))
    monkeypatch.delenv('ROG_FLEET_KEY', raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(['robot', '--role', 'worker', '--rank', '1', '--workers', '3',
                     '--robot-keys', 'true']) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f'{path} ($ROG_FLEET_KEY_FILE)' in err[0], err
    assert "robot 2's key, given to robot 1" in err[0], err
    assert not (tmp_path / 'rog_robot_logs').exists()      # refused before anything started


@pytest.mark.parametrize('robot_keys', ['true', 'false'])
def test_rog_fleet_given_a_robot_key_file_says_it_needs_the_fleet_key(
        tmp_path, capsys, monkeypatch, robot_keys):
    """Refuse a robot key file in rog fleet with what it needs, robot_keys on or off."""
    # off, the refusal said to set robot_keys true, which rog fleet then refused as well
    from rog_ros.nodes.fleet_key import write_key_file
    path = tmp_path / 'robot0.key'
    write_key_file(path, robot_key_text(FLEET, 0))
    monkeypatch.delenv('ROG_FLEET_KEY_FILE', raising=False)
    monkeypatch.delenv('ROG_FLEET_KEY', raising=False)
    assert cli.main(['fleet', '--workers', '2', '--robot-keys', robot_keys, '--fleet-key-file',
                     str(path), '--out', str(tmp_path / 'run'), '--quiet']) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0], err
    assert 'rog fleet runs the server and every robot, and needs the fleet key' in err[0], err
    assert 'set robot_keys true' not in err[0], err
    assert not (tmp_path / 'run').exists()


@pytest.mark.parametrize('rank', [10 ** 4, 1703797118])
def test_a_forgery_claiming_a_rank_no_robot_key_is_made_for_is_a_bad_tag(rank):
    """Count a forged message of a rank past MAX_RANK as bad_tag, as the fleet key does."""
    def forged(kind):
        """Return a message of ``kind`` in the name of robot ``rank`` with a made-up tag."""
        msg = {'RowChunk': _chunk(rank, m.SERVER),
               'RowChunk to': _chunk(m.SERVER, rank),
               'TrainStatus': m.TrainStatus(node=rank, stamp=1.0, incarnation=7)}[kind]
        msg.auth_seq, msg.auth_tag = 5, b'\x07' * auth.TAG_BYTES
        return msg
    kinds = ('RowChunk', 'RowChunk to', 'TrainStatus')
    # (the flood of rog chaos sends these: with robot keys they were counted malformed)
    for key in (FLEET, keyring_for(FLEET, True), keyring_for(FLEET, True, 0)):
        verifier = auth.Verifier(key)
        assert [verifier.check(forged(k)) for k in kinds] == ['bad_tag'] * 3, key
