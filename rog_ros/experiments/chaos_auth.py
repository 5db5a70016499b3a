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
The fleet key of ``rog chaos``'s scenarios, and the checks that every node held it.

The nodes of a scenario authenticate their messages as ``rog fleet``'s do (docs/security.md)
when given a fleet key: ``given_key`` takes one as ``rog fleet`` does, ``scenario_key`` hands
it, or a new one per scenario, to the nodes. A fleet with one key must never drop its own
messages for their authentication, so every scenario also reads its nodes' logs: each named
the key (and ``robot_keys``) every time it started, and none dropped a message of the fleet
but a ``replay`` (a duplicate, which the faults make), except in the flood, whose forgeries
must be dropped.
"""

from __future__ import annotations

import glob
import os

from rog_ros.experiments.chaos_fleet import ChaosConfig
from rog_ros.protocol.auth import REASONS
from rog_ros.transport.auth_bus import DROP_LINE

AUTH_DROPS = tuple(r for r in REASONS if r != 'replay')
"""Reject reasons of the authentication that a fleet with one key must never count: a
``replay`` is a copy of a message already taken (the faults duplicate messages, and a sender
may resend one unchanged), the others a message of another key or of none."""


def given_key(cfg: ChaosConfig, environ=None) -> tuple:
    """
    Return ``(path, key)``: the fleet key given, as ``rog fleet`` takes one, or ``(None, None)``.

    ``--fleet-key-file`` (``cfg.fleet_key_file``), else ``$ROG_FLEET_KEY_FILE`` (``path`` is
    then the absolute path), else ``$ROG_FLEET_KEY`` (``path`` None: the nodes inherit the
    variable). Raises FleetKeyError (a ValueError, one line) for a key that cannot be read or
    that is a robot's (the server holds the fleet key).
    """
    from rog_ros.nodes import fleet_key as auth
    from rog_ros.protocol.robot_keys import keyring_for
    env = os.environ if environ is None else environ
    path = cfg.fleet_key_file or env.get(auth.KEY_FILE_ENV) or None
    if path:
        path = os.path.abspath(path)
        key = auth.read_key_file(path)
    else:
        key = auth.load_fleet_key(environ={auth.KEY_ENV: env.get(auth.KEY_ENV, '')})
    if key is not None:
        keyring_for(key, cfg.robot_keys, None,
                    f'fleet key file {path}' if path else f'${auth.KEY_ENV}')
    return path, key


def scenario_key(cfg: ChaosConfig, run_dir: str, fresh: bool = False) -> tuple:
    """
    Return ``(env, key)``: the variables that hand the scenario's nodes their key, and the key.

    The key given (``given_key``), else with ``cfg.auth``, ``cfg.robot_keys`` or ``fresh``
    a new one in ``run_dir/fleet.key``, one per scenario (as ``rog fleet`` makes one per
    run), else none: ``key`` None, and ``env`` clears both variables.
    """
    from rog_ros.nodes import fleet_key as auth
    path, key = given_key(cfg)
    if path:
        return {auth.KEY_FILE_ENV: path, auth.KEY_ENV: ''}, key
    if key is not None:
        return {}, key              # $ROG_FLEET_KEY, which the nodes inherit
    if cfg.auth or cfg.robot_keys or fresh:
        return _fresh_key_env(run_dir)
    return {auth.KEY_FILE_ENV: '', auth.KEY_ENV: ''}, None


def _fresh_key_env(run_dir: str) -> tuple:
    """
    Return ``(env, key)``: a fresh fleet key file for the nodes, or ``({}, None)``.

    ``({}, None)`` means this build has no message authentication (rog_ros.nodes.fleet_key).
    """
    try:
        from rog_ros.nodes import fleet_key as auth
    except ImportError:
        return {}, None
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, 'fleet.key')
    if os.path.lexists(path):
        os.unlink(path)
    key = auth.write_key_file(path)
    return {auth.KEY_FILE_ENV: path, auth.KEY_ENV: ''}, key


def auth_drops(rejects: dict, log_dir: str) -> dict:
    """
    Return ``{reason: count}`` of the messages the nodes dropped for their authentication.

    The nodes' final reports (``rejects``, summed) miss a node killed on the way (its
    restarted process reports only its own): its log's drop lines count too, as a least count.
    """
    out = {r: int(rejects.get(r, 0)) for r in AUTH_DROPS}
    for path in sorted(glob.glob(os.path.join(log_dir, '*.log'))):
        with open(path, encoding='utf-8', errors='replace') as fh:
            for line in fh:
                m = DROP_LINE.search(line)
                if m and m.group(1) in out:
                    out[m.group(1)] = max(out[m.group(1)], int(m.group(2)))
    return {r: n for r, n in out.items() if n}


def key_problems(log_dir: str, names, key, robot_keys: bool) -> list:
    """
    Return what is wrong with the key of the nodes ``names`` (their logs in ``log_dir``).

    Every node logs the key it holds at start, by the fleet key's fingerprint (with
    ``robot_keys`` as ``robot keys: ...``), or warns that it has none: each must name
    ``key``, every time it started.
    """
    if key is None:
        return []
    from rog_ros.nodes.connect import NO_KEY_WARNING
    want = f'fleet key {key.fleet_fingerprint or key.fingerprint}'
    problems = []
    for name in names:
        try:
            with open(os.path.join(log_dir, f'{name}.log'), encoding='utf-8',
                      errors='replace') as fh:
                text = fh.read()
        except OSError:
            problems.append(f'{name}: no log')
            continue
        if NO_KEY_WARNING in text or want not in text:
            problems.append(f'{name} did not hold the fleet key ({want})')
        elif robot_keys and 'robot keys: ' not in text:
            problems.append(f'{name} did not turn robot_keys on')
    return problems


def auth_result(res: dict, log_dir: str, names, key, robot_keys: bool,
                expect_drops: bool = False) -> list:
    """Note the key in ``res``; return its problems (``expect_drops``: the flood's)."""
    res.update(fleet_key=key.fingerprint if key is not None else None, robot_keys=robot_keys)
    problems = key_problems(log_dir, names, key, robot_keys)
    drops = auth_drops(res['rejected'], log_dir)
    if drops and not expect_drops:
        problems.append('messages of the fleet dropped for their authentication: ' +
                        ', '.join(f'{r}={n}' for r, n in sorted(drops.items())))
    return problems
