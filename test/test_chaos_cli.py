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
``rog chaos`` around its scenarios: fresh folders, options, an interrupted run.

No fleet starts here: the scenario runners are replaced by stand-ins (test_chaos_fleet.py
runs the real ones).
"""

import argparse
import json
import os

import pytest
from rog_ros import cli
from rog_ros.experiments import (chaos, chaos_auth, chaos_fleet, chaos_fleet_scenario,
                                 chaos_folders, chaos_scenarios)
from rog_ros.nodes import settings


def _stand_in(seen, outcome='ok'):
    """Return a scenario runner that notes what its folder held, then leaves state in it."""
    def runner(cfg):
        name = runner.name
        run_dir = os.path.join(cfg.out, name)
        seen[name] = sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else None
        for sub in ('state', 'ledger'):
            os.makedirs(os.path.join(run_dir, sub), exist_ok=True)
        with open(os.path.join(run_dir, 'ledger', 'worker_0.jsonl'), 'a') as fh:
            fh.write(f'{cfg.seed}\n')
        return chaos_fleet_scenario.result_row(name, outcome=outcome, runtime_s=0.1)
    return runner


def _stand_ins(monkeypatch, seen, names=chaos_scenarios.SCENARIOS):
    for name in names:
        runner = _stand_in(seen)
        runner.name = name
        monkeypatch.setitem(chaos_scenarios.RUNNERS, name, runner)


def test_every_scenario_starts_from_a_fresh_folder_and_the_earlier_one_is_kept(
        tmp_path, monkeypatch):
    # A second run into the same --out restored the first one's state files and appended to
    # its ledgers (a false failure or a false 'lost'); only link-outage set its folder aside.
    seen = {}
    _stand_ins(monkeypatch, seen)
    for seed in (1, 2, 3):
        cfg = chaos_fleet.ChaosConfig(out=str(tmp_path), seed=seed)
        rows = chaos.run_scenarios(list(chaos_scenarios.SCENARIOS), cfg)
        assert [r['outcome'] for r in rows] == ['ok'] * len(chaos_scenarios.SCENARIOS)
        # nothing there at start
        assert seen == {name: None for name in chaos_scenarios.SCENARIOS}
        for name in chaos_scenarios.SCENARIOS:
            with open(tmp_path / name / 'ledger' / 'worker_0.jsonl') as fh:
                assert fh.read() == f'{seed}\n'                      # this run's alone
            if seed > 1:                                             # one generation kept
                with open(tmp_path / f'{name}.previous' / 'ledger' / 'worker_0.jsonl') as fh:
                    assert fh.read() == f'{seed - 1}\n'
        seen.clear()


def test_a_replanned_link_outage_first_run_goes_with_its_generation(tmp_path):
    (tmp_path / 'link-outage' / 'state').mkdir(parents=True)
    (tmp_path / 'link-outage.first' / 'ledger').mkdir(parents=True)
    (tmp_path / 'link-outage.previous.first').mkdir()      # two runs ago: must not stay
    (tmp_path / 'link-outage.previous.first' / 'old').write_text('x')
    run_dir = chaos_folders.fresh_scenario_dir(str(tmp_path), 'link-outage')
    assert run_dir == str(tmp_path / 'link-outage') and not os.path.exists(run_dir)
    assert not os.path.exists(run_dir + '.first')
    assert os.listdir(tmp_path / 'link-outage.previous') == ['state']
    assert os.listdir(tmp_path / 'link-outage.previous.first') == ['ledger']
    # a folder that is not there moves nothing and removes nothing
    assert chaos_folders.fresh_scenario_dir(str(tmp_path), 'link-outage') == run_dir
    assert sorted(os.listdir(tmp_path)) == ['link-outage.previous', 'link-outage.previous.first']


def test_a_folder_that_cannot_be_set_aside_fails_its_scenario_only(tmp_path, monkeypatch):
    seen = {}
    _stand_ins(monkeypatch, seen, ('flood', 'ctrl-c'))
    (tmp_path / 'flood').mkdir()

    def refuse(src, dst):
        raise PermissionError(13, 'Permission denied', src)
    monkeypatch.setattr(chaos_folders.os, 'replace', refuse)
    rows = chaos.run_scenarios(['flood', 'ctrl-c'], chaos_fleet.ChaosConfig(out=str(tmp_path)))
    assert rows[0]['outcome'] == 'failed' and 'Permission denied' in rows[0]['detail']
    assert 'flood' not in seen                        # not run on the earlier folder
    assert rows[1]['outcome'] == 'ok'


class _Started(Exception):
    pass


def test_the_ctrl_c_fleet_gets_the_chosen_system(tmp_path, monkeypatch):
    # `rog chaos --sync flown` ran the ctrl-c scenario's fleet with rog's default system
    started, envs = [], []

    def popen(cmd, **kw):
        started.append(cmd)
        envs.append(kw['env'])
        raise _Started
    monkeypatch.setattr(chaos_scenarios.subprocess, 'Popen', popen)
    monkeypatch.setenv('ROG_CHAOS_LEDGER', str(tmp_path / 'inherited'))
    for sync in chaos_fleet.CHAOS_SYSTEMS:
        cfg = chaos_fleet.ChaosConfig(out=str(tmp_path), sync=sync, seed=7)
        with pytest.raises(_Started):
            chaos_scenarios.ctrl_c(cfg)
        cmd = started[-1]
        # the ledger is the scenario's own; a push fleet keeps none, not even an inherited one
        ledger = envs[-1].get('ROG_CHAOS_LEDGER')
        if sync in chaos_fleet.PUSH_CHAOS_SYSTEMS:
            assert ledger is None
        else:
            assert ledger and ledger.startswith(str(tmp_path)) and 'inherited' not in ledger
        assert cmd[1:3] == ['-m', 'rog_ros.nodes.fleet']
        # what rog fleet itself reads from that command line
        args, extra = cli.build_parser().parse_known_args(['fleet'] + cmd[3:])
        assert not extra and args.sync == sync and args.seed == '7'
        assert args.workers == str(cfg.workers)


BAD = [
    (['--workers', '2000'], '--workers must be in [2, 1024]'),
    (['--workers', '1025'], '--workers must be in [2, 1024]'),
    (['--workers', '1'], '--workers must be in [2, 1024]'),
    (['--seed', '-1'], '--seed must be in [0, 2147483647]'),
    (['--seed', str(2 ** 31)], '--seed must be in [0, 2147483647]'),
    (['--iterations', '9'], '--iterations must be >= 10'),
    # each scenario's fleet trained until stopped
    (['--iterations', str(10 ** 12)], '--iterations must be in [10, 100000], got 1000000000000'),
    # one line said both ranges whichever was wrong, without the value
    (['--outage-s', 'nan'], '--outage-s must be in (0, 3600] seconds, got nan'),
    (['--scenario', 'flood', '--flood-s', '0'], '--flood-s must be in (0, 600] seconds, got 0'),
    # given for a run without its scenario, they changed nothing, silently
    (['--scenario', 'flood', '--outage-s', '5'], '--outage-s applies to the link-outage'),
    (['--scenario', 'ctrl-c', '--flood-s', '5'], '--flood-s applies to the flood scenario'),
    # run twice, the second moved the first one's folder aside
    (['--scenario', 'ctrl-c,flood,ctrl-c'], '--scenario lists ctrl-c more than once'),
    # said 'the push systems keep no state' of rog's threshold
    (['--sync', 'rog:4'], "got 'rog:4' (the scenarios run its default threshold; give the name"),
]


@pytest.mark.parametrize('argv,text', BAD, ids=[' '.join(c[0]) for c in BAD])
def test_out_of_range_workers_and_seed_are_one_usage_line(argv, text, tmp_path, monkeypatch,
                                                          capsys):
    # they were one failed row per scenario (every fleet refused them), exit status 1
    def forbidden(*args, **kwargs):
        raise AssertionError('ran scenarios although the options were bad')
    monkeypatch.setattr(chaos, 'run_scenarios', forbidden)
    out = tmp_path / 'out'
    assert cli.main(['chaos', '--out', str(out)] + argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count('\n') == 0 and err.startswith('rog chaos: ') and text in err, err
    assert not out.exists()


def test_the_bounds_are_rog_fleets_own(tmp_path, monkeypatch):
    from rog_ros.checks import ConfigError
    from rog_ros.nodes.plan import plan
    workers, seed = settings.BY_NAME['workers'], settings.BY_NAME['seed']
    assert (workers.high, seed.low, seed.high) == (1024, 0, 2 ** 31 - 1)
    with pytest.raises(ConfigError, match='workers'):
        plan(overrides={'workers': workers.high + 1, 'out': str(tmp_path)})
    with pytest.raises(ConfigError, match='seed'):
        plan(overrides={'seed': seed.low - 1, 'out': str(tmp_path)})
    # and the edges themselves are taken
    seen = {}
    _stand_ins(monkeypatch, seen, ('flood',))
    for argv in (['--workers', str(workers.high)], ['--seed', str(seed.high)],
                 ['--seed', '0', '--workers', '2']):
        assert cli.main(['chaos', '--scenario', 'flood', '--out', str(tmp_path / 'o')]
                        + argv) == 0
    assert 'flood' in seen


@pytest.mark.parametrize('stop, status', [(KeyboardInterrupt(), 130),
                                          (cli.Terminated(15), 143)])
def test_an_interrupted_run_writes_the_scenarios_it_finished(stop, status, tmp_path,
                                                             monkeypatch, capsys):
    seen = {}
    _stand_ins(monkeypatch, seen, ('worker-restart',))

    def interrupted(cfg):
        raise stop
    monkeypatch.setitem(chaos_scenarios.RUNNERS, 'flood', interrupted)
    out = tmp_path / 'out'
    argv = ['chaos', '--scenario', 'worker-restart,flood,ctrl-c', '--out', str(out), '--json']
    assert cli.main(argv) == status
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1].startswith('rog chaos: ')
    assert 'Traceback' not in captured.err
    with open(out / 'chaos.json') as fh:
        doc = json.load(fh)
    assert doc['interrupted'] is True
    assert [r['scenario'] for r in doc['scenarios']] == ['worker-restart']
    assert doc['scenarios'][0]['outcome'] == 'ok'


def test_a_finished_run_is_not_marked_interrupted(tmp_path, monkeypatch, capsys):
    seen = {}
    _stand_ins(monkeypatch, seen, ('flood',))
    parser = argparse.ArgumentParser()
    chaos.add_parser(parser.add_subparsers())
    args = parser.parse_args(['chaos', '--scenario', 'flood', '--out', str(tmp_path), '--json'])
    assert chaos.run(args) == 0
    with open(tmp_path / 'chaos.json') as fh:
        doc = json.load(fh)
    assert 'interrupted' not in doc and doc['scenarios'][0]['scenario'] == 'flood'
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == doc


def test_run_scenarios_hands_back_the_rows_as_they_finish(tmp_path, monkeypatch):
    seen = {}
    _stand_ins(monkeypatch, seen, ('worker-restart',))

    def interrupted(cfg):
        raise KeyboardInterrupt
    monkeypatch.setitem(chaos_scenarios.RUNNERS, 'flood', interrupted)
    rows = []
    with pytest.raises(KeyboardInterrupt):
        chaos.run_scenarios(['worker-restart', 'flood'],
                            chaos_fleet.ChaosConfig(out=str(tmp_path)), rows=rows)
    assert [r['scenario'] for r in rows] == ['worker-restart']


def test_a_folder_a_live_run_holds_is_not_moved(tmp_path):
    """Refuse to set aside a scenario folder (or its .previous) that a live fleet holds."""
    from test_output_lock import held_by_another_process
    for held in ('flood', 'flood.previous'):
        base = tmp_path / held.replace('.', '_')
        (base / 'flood' / 'state').mkdir(parents=True)
        (base / 'flood.previous').mkdir()
        with held_by_another_process(str(base / held), 'rog fleet') as holder:
            with pytest.raises(OSError, match=f'{base / held} is in use by a run still going '
                                              rf'\(rog fleet, pid {holder.pid}, since '):
                chaos_folders.fresh_scenario_dir(str(base), 'flood')
            assert (base / 'flood' / 'state').is_dir()         # nothing moved
            assert (base / 'flood.previous').is_dir()          # nothing removed
        chaos_folders.fresh_scenario_dir(str(base), 'flood')           # its run ended: set aside
        assert (base / 'flood.previous' / 'state').is_dir()


# ---------------------------------------------------------------------------------- the key
def _no_key_around(monkeypatch):
    """Remove a fleet key of the environment the tests run in."""
    for var in ('ROG_FLEET_KEY', 'ROG_FLEET_KEY_FILE'):
        monkeypatch.delenv(var, raising=False)


def _key_file(path, text=None):
    """Write a fleet key file (0600) at ``path``; return the key."""
    from rog_ros.nodes.fleet_key import write_key_file
    return write_key_file(path, text)


def _config_of(monkeypatch, argv) -> tuple:
    """Run ``rog chaos argv`` with the scenarios replaced; return (status, the config)."""
    got = []

    def capture(names, cfg, progress=None, rows=None):
        """Note the config instead of running the scenarios."""
        got.append(cfg)
        return []
    monkeypatch.setattr(chaos, 'run_scenarios', capture)
    status = cli.main(['chaos'] + argv)
    return status, (got[0] if got else None)


def test_the_key_options_are_rog_fleets_and_reach_the_config(tmp_path, monkeypatch):
    _no_key_around(monkeypatch)
    _key_file(tmp_path / 'fleet.key')
    out = str(tmp_path / 'o')
    status, cfg = _config_of(monkeypatch, ['--out', out])
    assert status == 0 and (cfg.fleet_key_file, cfg.auth, cfg.robot_keys) == ('', False, False)
    status, cfg = _config_of(monkeypatch, ['--out', out, '--fleet-key-file',
                                           str(tmp_path / 'fleet.key'), '--robot-keys', 'true'])
    assert status == 0 and cfg.fleet_key_file == str(tmp_path / 'fleet.key') and cfg.robot_keys
    status, cfg = _config_of(monkeypatch, ['--out', out, '--auth'])
    assert status == 0 and cfg.auth and not cfg.robot_keys
    # the same names as rog fleet's (and rog robot's)
    fleet_args = cli.build_parser().parse_args(['fleet', '--fleet-key-file', 'k',
                                                '--robot-keys', 'true'])
    assert (fleet_args.fleet_key_file, fleet_args.robot_keys) == ('k', 'true')


def _robot_key(tmp_path):
    """Write robot 0's key file made from a fleet key; return its path."""
    from rog_ros.protocol.robot_keys import robot_key_text
    fleet = _key_file(tmp_path / 'made_from.key')
    _key_file(tmp_path / 'robot0.key', robot_key_text(fleet, 0))
    return str(tmp_path / 'robot0.key')


BAD_KEYS = [
    (lambda p: ['--fleet-key-file', str(p / 'missing.key')], {},
     'cannot read fleet key file'),
    (lambda p: ['--fleet-key-file', str(p / 'short.key')], {}, 'too short'),
    (lambda p: ['--fleet-key-file', str(p / 'open.key')], {}, 'chmod 600'),
    (lambda p: ['--fleet-key-file', _robot_key(p), '--robot-keys', 'true'], {},
     'the server (and a netmon'),
    (lambda p: ['--fleet-key-file', _robot_key(p)], {}, 'set robot_keys true'),
    (lambda p: [], {'ROG_FLEET_KEY_FILE': 'missing.key'}, 'cannot read fleet key file'),
    (lambda p: [], {'ROG_FLEET_KEY': 'short'}, '$ROG_FLEET_KEY: fleet key too short'),
    (lambda p: ['--robot-keys', 'maybe'], {}, "'maybe' is not a bool"),
]


@pytest.mark.parametrize('argv, env, text', BAD_KEYS, ids=[c[2] for c in BAD_KEYS])
def test_a_key_the_nodes_could_not_use_is_one_line_before_anything_starts(
        argv, env, text, tmp_path, monkeypatch, capsys):
    _no_key_around(monkeypatch)
    (tmp_path / 'short.key').write_text('abcd\n')
    (tmp_path / 'short.key').chmod(0o600)
    (tmp_path / 'open.key').write_text('ab' * 32 + '\n')
    (tmp_path / 'open.key').chmod(0o644)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    out = tmp_path / 'out'
    status, cfg = _config_of(monkeypatch, ['--out', str(out)] + argv(tmp_path))
    assert status == 2 and cfg is None
    err = capsys.readouterr().err.strip()
    assert err.count('\n') == 0 and err.startswith('rog chaos: ') and text in err, err
    assert not out.exists()


def test_scenario_key_takes_the_key_as_rog_fleet_does(tmp_path, monkeypatch):
    from rog_ros.nodes.fleet_key import KEY_ENV, KEY_FILE_ENV, read_key_file
    _no_key_around(monkeypatch)
    run_dir = str(tmp_path / 'flood')
    # none given: no key, and none inherited; the flood (fresh) makes one
    env, key = chaos_auth.scenario_key(chaos_fleet.ChaosConfig(out=str(tmp_path)), run_dir)
    assert key is None and env == {KEY_FILE_ENV: '', KEY_ENV: ''}
    assert not os.path.exists(run_dir)
    for cfg, fresh in ((chaos_fleet.ChaosConfig(out=str(tmp_path)), True),
                       (chaos_fleet.ChaosConfig(out=str(tmp_path), auth=True), False),
                       (chaos_fleet.ChaosConfig(out=str(tmp_path), robot_keys=True), False)):
        env, key = chaos_auth.scenario_key(cfg, run_dir, fresh=fresh)
        path = os.path.join(run_dir, 'fleet.key')
        assert env[KEY_FILE_ENV] == path and read_key_file(path) == key
        assert os.stat(path).st_mode & 0o077 == 0
        assert chaos_auth.scenario_key(cfg, run_dir, fresh=fresh)[1] != key   # one per scenario
    # given: --fleet-key-file, else $ROG_FLEET_KEY_FILE, else $ROG_FLEET_KEY
    given = _key_file(tmp_path / 'given.key')
    other = _key_file(tmp_path / 'other.key')
    monkeypatch.setenv(KEY_FILE_ENV, str(tmp_path / 'other.key'))
    cfg = chaos_fleet.ChaosConfig(out=str(tmp_path), fleet_key_file=str(tmp_path / 'given.key'))
    assert chaos_auth.scenario_key(cfg, run_dir, fresh=True) == (
        {KEY_FILE_ENV: str(tmp_path / 'given.key'), KEY_ENV: ''}, given)
    cfg = chaos_fleet.ChaosConfig(out=str(tmp_path), auth=True)
    assert chaos_auth.scenario_key(cfg, run_dir) == (
        {KEY_FILE_ENV: str(tmp_path / 'other.key'), KEY_ENV: ''}, other)
    monkeypatch.delenv(KEY_FILE_ENV)
    monkeypatch.setenv(KEY_ENV, 'cd' * 32)
    env, key = chaos_auth.scenario_key(cfg, run_dir)
    assert env == {} and key.fingerprint == chaos_auth.given_key(cfg)[1].fingerprint


def test_the_key_and_robot_keys_reach_every_node_of_a_scenario(tmp_path, monkeypatch):
    from rog_ros.nodes import rog_server, rog_worker
    from rog_ros.nodes.fleet_key import KEY_FILE_ENV, load_fleet_key
    _no_key_around(monkeypatch)
    _key_file(tmp_path / 'fleet.key')
    cfg = chaos_fleet.ChaosConfig(out=str(tmp_path), workers=3, robot_keys=True,
                                  fleet_key_file=str(tmp_path / 'fleet.key'))
    run_dir = str(tmp_path / 'worker-restart')
    trace = str(tmp_path / 'trace.csv')
    chaos_fleet.write_trace(trace, cfg.workers, chaos_fleet.RATE_MBPS)
    key_env, key = chaos_auth.scenario_key(cfg, run_dir)
    fleet = chaos_fleet.Fleet(cfg, run_dir, trace, key_env=key_env)
    assert sorted(fleet.specs) == ['rog_server', 'rog_worker_0', 'rog_worker_1', 'rog_worker_2']
    for name, spec in fleet.specs.items():
        env = fleet.sup.env_for(spec)                      # what the supervisor gives it
        assert env[KEY_FILE_ENV] == str(tmp_path / 'fleet.key')
        assert load_fleet_key(environ=env) == key          # what the node reads
        node = rog_server if spec.role == 'server' else rog_worker
        args, _ = node.build_parser().parse_known_args(spec.command()[3:])   # (hidden ones)
        assert args.robot_keys is True, name


def _log(log_dir, name, *lines):
    """Write node ``name``'s log in ``log_dir``."""
    os.makedirs(log_dir, exist_ok=True)
    with open(os.path.join(log_dir, f'{name}.log'), 'w') as fh:
        fh.write(''.join(f'[INFO] [1.0] [{name}]: {line}\n' for line in lines))


def test_a_node_without_the_key_or_dropping_the_fleets_messages_fails_the_scenario(tmp_path):
    from rog_ros.nodes.connect import NO_KEY_WARNING
    from rog_ros.protocol.auth import FleetKey
    key = FleetKey(bytes(range(32)))
    logs = str(tmp_path / 'logs')
    _log(logs, 'rog_server', f'fleet key {key.fingerprint}')
    _log(logs, 'rog_worker_0', f'fleet key {key.fingerprint}')
    _log(logs, 'rog_worker_1', NO_KEY_WARNING)
    names = ['rog_server', 'rog_worker_0', 'rog_worker_1', 'rog_worker_2']
    assert chaos_auth.key_problems(logs, names, key, False) == [
        f'rog_worker_1 did not hold the fleet key (fleet key {key.fingerprint})',
        'rog_worker_2: no log']
    assert chaos_auth.key_problems(logs, names[:2], key, True) == [
        'rog_server did not turn robot_keys on', 'rog_worker_0 did not turn robot_keys on']
    assert chaos_auth.key_problems(logs, names, None, False) == []        # no key: nothing to hold
    # drops: the final reports', and at least what a log says (a node killed on the way)
    _log(logs, 'rog_worker_0', f'fleet key {key.fingerprint}')
    with open(os.path.join(logs, 'rog_worker_0.log'), 'a') as fh:
        fh.write('[WARNING] [2.0] [rog_ros.auth]: dropped RowChunk on /ns/w0/chunks claiming '
                 'sender -1: bad_tag (4 bad_tag so far); a different fleet key?\n'
                 '[WARNING] [2.0] [rog_ros.auth]: dropped RowChunk on /ns/w0/chunks claiming '
                 'sender -1: replay (8 replay so far)\n')
    assert chaos_auth.auth_drops({'replay': 3, 'invalid': 2, 'too_old': 1}, logs) == {
        'bad_tag': 4, 'too_old': 1}
    res = chaos_fleet_scenario.result_row('worker-restart', rejected={'replay': 3})
    problems = chaos_auth.auth_result(res, logs, names[:2], key, False)
    assert problems == ['messages of the fleet dropped for their authentication: bad_tag=4']
    assert res['fleet_key'] == key.fingerprint and res['robot_keys'] is False
    flood = chaos_fleet_scenario.result_row('flood')
    assert chaos_auth.auth_result(flood, logs, names[:2], key, False, expect_drops=True) == []


def test_the_ctrl_c_fleet_gets_the_key_and_robot_keys(tmp_path, monkeypatch):
    _no_key_around(monkeypatch)
    _key_file(tmp_path / 'fleet.key')
    started = []

    def popen(cmd, **kw):
        """Note the command instead of starting rog fleet."""
        started.append(cmd)
        raise _Started
    monkeypatch.setattr(chaos_scenarios.subprocess, 'Popen', popen)
    for cfg in (chaos_fleet.ChaosConfig(out=str(tmp_path), robot_keys=True,
                                        fleet_key_file=str(tmp_path / 'fleet.key')),
                chaos_fleet.ChaosConfig(out=str(tmp_path), auth=True)):
        with pytest.raises(_Started):
            chaos_scenarios.ctrl_c(cfg)
        args, extra = cli.build_parser().parse_known_args(['fleet'] + started[-1][3:])
        assert not extra
        assert args.fleet_key_file == (cfg.fleet_key_file or None)   # none: rog fleet's own
        assert args.robot_keys == ('true' if cfg.robot_keys else None)
