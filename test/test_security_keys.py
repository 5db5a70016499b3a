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
What the nodes, ``rog fleet``, ``rog security`` and the keystore do with fleet keys and paths.

Each test names the defect it guards against: a node that never said which key it held, a
fleet whose nodes might not hold its own key, a keystore that a Ctrl-C left half made.
"""

import importlib.util
import json
import logging
import os
from types import SimpleNamespace

import pytest

from rog_ros import cli
from rog_ros.nodes import connect, fleet, fleet_key, keystore
from rog_ros.protocol import auth
from rog_ros.protocol import messages as m
from rog_ros.transport.auth_bus import AuthBus

HEX = 'cd' * 32
KEY = auth.parse_key(HEX)


@pytest.fixture
def no_env_key(monkeypatch):
    """Run without a fleet key in the environment."""
    for var in (fleet_key.KEY_ENV, fleet_key.KEY_FILE_ENV):
        monkeypatch.delenv(var, raising=False)


def _key_file(path, text=HEX):
    """Write a private key file ``path`` holding ``text``; return its path as a string."""
    path.write_text(text + '\n')
    os.chmod(path, 0o600)
    return str(path)


# ---------------------------------------------------------------------- nodes say their key
def test_a_node_logs_its_key_fingerprint_or_warns_without_one(tmp_path, caplog, no_env_key):
    log = logging.getLogger('rog_key_test')
    args = SimpleNamespace(fleet_key_file=_key_file(tmp_path / 'k.key'))
    with caplog.at_level(logging.INFO, logger='rog_key_test'):
        assert connect.fleet_key(args, log) == KEY
        assert connect.fleet_key(SimpleNamespace(fleet_key_file=None), log) is None
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, f'fleet key {KEY.fingerprint}'),
        (logging.WARNING, 'no fleet key: messages are not authenticated')]


def test_netmon_says_it_on_the_logger_of_its_node_name(caplog, monkeypatch):
    monkeypatch.delenv(fleet_key.KEY_FILE_ENV, raising=False)
    monkeypatch.setenv(fleet_key.KEY_ENV, HEX)
    with caplog.at_level(logging.INFO, logger='netmon_3'):
        connect.fleet_key(SimpleNamespace(node_name='netmon_3'))
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ('netmon_3', f'fleet key {KEY.fingerprint}')]


def test_a_server_node_says_its_key_when_it_opens_its_bus(tmp_path, caplog, monkeypatch,
                                                          no_env_key):
    from rog_ros.nodes import rog_server, server_node
    from test_nodes_lifecycle import Hub
    monkeypatch.setattr(server_node, 'open_bus', Hub().bus)
    args = rog_server.build_parser().parse_args([
        '--workload', 'toy', '--workers', '1', '--namespace', '/rk', '--iterations', '10',
        '--out', str(tmp_path / 'run'), '--fleet-key-file', _key_file(tmp_path / 'k.key')])
    node = server_node.ServerNode(args)
    with caplog.at_level(logging.INFO, logger=node.log.name):
        node.configure()
    node.shutdown()
    said = [r.getMessage() for r in caplog.records if 'fleet key' in r.getMessage()]
    assert said == [f'fleet key {KEY.fingerprint}']


# ---------------------------------------------------------------------- mismatched keys
def test_bad_tags_suggest_a_different_fleet_key_from_the_first_drop_on(caplog):
    other = auth.Signer(auth.FleetKey(b'another fleet key of 32 bytes...'))
    received = [('up/link', other.sign(m.LinkStats(node=1, interface='x', stamp=1.0)))
                for _ in range(4)]
    inner = SimpleNamespace(namespace='/rk', rejects=0, poll=lambda timeout_s: received)
    bus = AuthBus(inner, KEY, logger=logging.getLogger('rog_auth_test'))
    with caplog.at_level(logging.WARNING, logger='rog_auth_test'):
        assert bus.poll() == []
    said = [r.getMessage() for r in caplog.records]
    hint = (f'; a different fleet key? this node holds {KEY.fingerprint}: compare the '
            'fingerprints the nodes log at start')
    assert said == [
        'dropped LinkStats on up/link claiming sender 1: bad_tag (1 bad_tag so far)' + hint,
        'dropped LinkStats on up/link claiming sender 1: bad_tag (2 bad_tag so far)' + hint,
        'dropped LinkStats on up/link claiming sender 1: bad_tag (4 bad_tag so far)' + hint]


# ---------------------------------------------------------------------- rog fleet
def test_an_environment_key_stays_in_the_environment_and_is_never_written(
        tmp_path, monkeypatch):
    # a long-lived key written into OUT would outlive the run in a folder that gets shared
    monkeypatch.delenv(fleet_key.KEY_FILE_ENV, raising=False)
    monkeypatch.setenv(fleet_key.KEY_ENV, '\ufeff' + HEX)
    key, env = fleet.fleet_key_env(SimpleNamespace(fleet_key_file=None), str(tmp_path / 'o'))
    assert key == KEY and env == {} and not (tmp_path / 'o').exists()
    monkeypatch.setenv(fleet_key.KEY_FILE_ENV, 'rel.key')       # a path: handed on, absolute
    monkeypatch.chdir(tmp_path)
    _key_file(tmp_path / 'rel.key')
    assert fleet.fleet_key_env(SimpleNamespace(fleet_key_file=None), 'o')[1] == {
        fleet_key.KEY_FILE_ENV: str(tmp_path / 'rel.key')}


@pytest.mark.parametrize('text, problem', [
    ('ab' * 24, 'fleet key too short (24 bytes from 48 hex digits'),
    ('ab' * 31 + 'a', 'malformed hex key: odd number of hex digits (63)')])
def test_a_bad_environment_key_stops_the_fleet_before_anything_is_made(
        tmp_path, monkeypatch, capsys, text, problem):
    # before, the workload was prepared and OUT locked first, then it failed
    monkeypatch.delenv(fleet_key.KEY_FILE_ENV, raising=False)
    monkeypatch.setenv(fleet_key.KEY_ENV, text)

    def forbidden(*args, **kwargs):
        """Fail: the key was to be checked before this."""
        raise AssertionError('prepared the workload despite a bad key')
    monkeypatch.setattr('rog_ros.nodes.prepare_workload.prepare', forbidden)
    out = tmp_path / 'run'
    assert cli.main(['fleet', '--out', str(out), '--quiet']) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f'rog fleet: ${fleet_key.KEY_ENV}: {problem}')
    assert text not in err[0] and not out.exists()


@pytest.mark.parametrize('given', ['environment', 'option'])
def test_a_key_given_where_its_files_path_belongs_is_not_printed(
        tmp_path, monkeypatch, capsys, given):
    # (ROG_FLEET_KEY_FILE for ROG_FLEET_KEY: 'cannot read fleet key file KEY' printed it)
    monkeypatch.delenv(fleet_key.KEY_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    args = ['fleet', '--out', str(tmp_path / 'run'), '--quiet']
    if given == 'environment':
        monkeypatch.setenv(fleet_key.KEY_FILE_ENV, HEX)
    else:
        monkeypatch.delenv(fleet_key.KEY_FILE_ENV, raising=False)
        args += ['--fleet-key-file', HEX]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'the path given is a key itself' in err[0]
    assert HEX not in err[0] and fleet_key.KEY_ENV in err[0]
    robot = auth.ROBOT_KEY_HEADER.decode() + f'rank=0 fleet={KEY.fingerprint} {HEX}'
    with pytest.raises(auth.FleetKeyError, match='a key itself') as err:
        fleet_key.read_key_file(robot)
    assert HEX not in str(err.value)
    with pytest.raises(auth.FleetKeyError, match='cannot read fleet key file nothing.key: No '):
        fleet_key.read_key_file('nothing.key')          # a file's path is named, as before


def test_a_key_files_path_given_as_the_key_is_refused(tmp_path, monkeypatch):
    # (a path of 32 or more characters was taken as a passphrase: a key anyone may know)
    (tmp_path / 'config').mkdir()
    path = _key_file(tmp_path / 'config' / 'fleet.key')
    assert len(path) >= 32
    monkeypatch.setenv('HOME', str(tmp_path))
    said = f'holds the path of a file, not a key.*{fleet_key.KEY_FILE_ENV}'
    for given in (path, f' {path}\n', '~/config/fleet.key'):
        with pytest.raises(auth.FleetKeyError, match=said) as err:
            fleet_key.load_fleet_key(environ={fleet_key.KEY_ENV: given})
        assert path not in str(err.value)
    missing = '/nowhere/on/this/robot/rog/fleet.key'      # a passphrase, as it always was
    assert fleet_key.load_fleet_key(environ={fleet_key.KEY_ENV: missing}) == \
        auth.parse_key(missing)


class _FakeSupervisor:
    """Stands in for the fleet's Supervisor: records the nodes' environments, runs nothing."""

    envs = {}

    def __init__(self, specs, log_dir, env_of, prefix_of):
        self.specs, self.log_dir, self.env_of = specs, log_dir, env_of

    def start(self, resuming):
        """Record every node's environment and leave a completed summary."""
        _FakeSupervisor.envs = {s.name: self.env_of(s) for s in self.specs}
        out = os.path.dirname(self.log_dir)
        with open(os.path.join(out, 'summary.json'), 'w') as fh:
            json.dump({'completed': True}, fh)

    def stop(self, hurry):
        """Stop nothing."""
        return []

    def codes(self):
        """Say every node exited 0."""
        return {s.name: 0 for s in self.specs}


@pytest.mark.parametrize('given', ['file', 'environment', 'none'])
def test_every_node_gets_the_fleets_key_and_the_end_names_it(tmp_path, monkeypatch, capsys,
                                                             given):
    # Prepare
    monkeypatch.delenv(fleet_key.KEY_FILE_ENV, raising=False)
    monkeypatch.delenv(fleet_key.KEY_ENV, raising=False)
    argv = ['fleet', '--out', str(tmp_path / 'run'), '--quiet', '--workers', '2']
    if given == 'file':
        _key_file(tmp_path / 'k.key')
        argv += ['--fleet-key-file', str(tmp_path / 'k.key')]
        monkeypatch.setenv(fleet_key.KEY_ENV, 'ab' * 40)       # below the file: left out
    elif given == 'environment':
        monkeypatch.setenv(fleet_key.KEY_ENV, HEX)
    monkeypatch.setattr('rog_ros.nodes.prepare_workload.prepare',
                        lambda workload, options=None: '')
    monkeypatch.setattr(fleet, 'Supervisor', _FakeSupervisor)
    # Execute
    assert cli.main(argv) == 0
    # Assert: each node reads the key the fleet holds (what its status bus verifies with)
    envs = _FakeSupervisor.envs
    assert set(envs) >= {'rog_server', 'rog_worker_0', 'rog_worker_1'}
    keys = {fleet_key.load_fleet_key(environ=env) for env in envs.values()}
    assert len(keys) == 1
    key = keys.pop()
    where = {'file': str(tmp_path / 'k.key'), 'environment': f'from ${fleet_key.KEY_ENV}',
             'none': str(tmp_path / 'run' / 'fleet.key')}[given]
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == f'rog fleet: fleet key {where} (fingerprint {key.fingerprint})'
    assert (key == KEY) == (given != 'none')
    assert (tmp_path / 'run' / 'fleet.key').exists() == (given == 'none')
    if given == 'file':
        assert all(fleet_key.KEY_ENV not in env for env in envs.values())


def test_an_interrupted_fleet_names_its_key_too(tmp_path, monkeypatch, capsys):
    # the same command resumes the run: the user needs to know which key it held
    monkeypatch.delenv(fleet_key.KEY_FILE_ENV, raising=False)
    monkeypatch.setenv(fleet_key.KEY_ENV, HEX)
    monkeypatch.setattr('rog_ros.nodes.prepare_workload.prepare',
                        lambda workload, options=None: '')
    monkeypatch.setattr(fleet, 'Supervisor', _FakeSupervisor)

    def ctrl_c(*args, **kwargs):
        """Interrupt the fleet as Ctrl-C does."""
        raise KeyboardInterrupt
    monkeypatch.setattr(fleet, '_watch', ctrl_c)
    status = cli.main(['fleet', '--out', str(tmp_path / 'run'), '--quiet', '--workers', '2'])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 130
    assert err[-2].startswith('rog fleet: interrupted; every node stopped')
    assert err[-1] == (f'rog fleet: fleet key from ${fleet_key.KEY_ENV} '
                       f'(fingerprint {KEY.fingerprint})')


# ---------------------------------------------------------------------- rog security key
@pytest.mark.parametrize('given', ['d', 'newdir/'])
def test_security_key_given_a_directory_says_a_file_path_is_expected(tmp_path, monkeypatch,
                                                                     capsys, given):
    # before: 'cannot create d: File exists' and 'cannot create newdir/: Is a directory'
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'd').mkdir()
    assert cli.main(['security', 'key', given]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    example = os.path.join(given, 'fleet.key')
    assert err == [f'rog security key: {given} names a directory; give the path of the key '
                   f'file to create, such as {example}']
    assert sorted(os.listdir(tmp_path)) == ['d'] and os.listdir(tmp_path / 'd') == []


# ---------------------------------------------------------------------- rog security keystore
needs_cryptography = pytest.mark.skipif(
    importlib.util.find_spec('cryptography') is None,
    reason='rog security keystore needs cryptography (pip install rog_ros[security])')


@needs_cryptography
def test_keystore_on_a_file_says_cannot_create_in_one_line(tmp_path, monkeypatch, capsys):
    # before: the raw "[Errno 20] Not a directory: 'fleet.key'"
    monkeypatch.chdir(tmp_path)
    _key_file(tmp_path / 'fleet.key')
    assert cli.main(['security', 'keystore', 'fleet.key']) == 2
    assert cli.main(['security', 'keystore', 'fleet.key/ks']) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ['rog security keystore: cannot create fleet.key: it exists and is not a '
                   'directory',
                   'rog security keystore: cannot create fleet.key/ks: fleet.key is not a '
                   'directory']
    assert os.listdir(tmp_path) == ['fleet.key']


@needs_cryptography
@pytest.mark.parametrize('namespace', ['/a//b', '/a__b', 'rog', '/1a', '/a b'])
def test_keystore_refuses_the_namespaces_the_nodes_refuse_with_their_words(tmp_path,
                                                                           namespace):
    from rog_ros import checks
    with pytest.raises(checks.ConfigError) as nodes_say:
        checks.namespace('--namespace', namespace)
    with pytest.raises(keystore.KeystoreError) as err:
        keystore.create_keystore(tmp_path / 'ks', namespace=namespace)
    assert str(err.value) == str(nodes_say.value)
    assert os.listdir(tmp_path) == []


def _interrupt_after(monkeypatch, calls):
    """Make the keystore's ``calls``-th file write raise KeyboardInterrupt (a Ctrl-C)."""
    real, count = keystore._write, []

    def write(path, data, mode=0o644):
        """Write, or be interrupted."""
        count.append(path)
        if len(count) == calls:
            raise KeyboardInterrupt
        real(path, data, mode)
    monkeypatch.setattr(keystore, '_write', write)


@needs_cryptography
@pytest.mark.parametrize('existing', [False, True])
def test_an_interrupted_keystore_leaves_nothing_and_a_rerun_works(tmp_path, monkeypatch,
                                                                  existing):
    # before, the half-made DIR blocked a rerun: 'exists and is not empty'
    root = tmp_path / 'ks'
    if existing:
        root.mkdir()                        # an empty directory is accepted, and kept
    _interrupt_after(monkeypatch, 6)
    with pytest.raises(KeyboardInterrupt):
        keystore.create_keystore(root)
    assert os.listdir(tmp_path) == (['ks'] if existing else [])
    assert not existing or os.listdir(root) == []
    monkeypatch.undo()
    assert keystore.create_keystore(root) == list(keystore.ENCLAVES)
    assert sorted(os.listdir(root)) == ['enclaves', 'private', 'public']
    assert os.listdir(tmp_path) == ['ks']                  # no working directory left over
    assert (root / 'enclaves' / 'rog_ros' / 'server' / 'identity_ca.cert.pem').read_bytes() \
        == (root / 'public' / 'ca.cert.pem').read_bytes()  # the links still resolve


@needs_cryptography
def test_a_keystore_that_fails_midway_is_removed_and_the_error_is_one_line(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def full_disk(*args, **kwargs):
        """Fail like a full disk."""
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(keystore, 'render', full_disk)
    assert cli.main(['security', 'keystore', 'keys']) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        'rog security keystore: cannot create keys: No space left on device']
    assert os.listdir(tmp_path) == []
