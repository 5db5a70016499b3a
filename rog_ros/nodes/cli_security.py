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
``rog security``: make a fleet key, or an SROS2 keystore for ROS 2 robots.

    rog security key fleet.key                  # 32 random bytes as hex, mode 0600
    rog security keystore keys/ --namespace /rog [--domain-id 7] [--per-rank 4]

See docs/security.md: the fleet key authenticates every message on any transport; the
keystore adds DDS Security (authentication, access control, encryption) where the RMW has it.
"""

from __future__ import annotations

import os
import shlex
import sys

from rog_ros.transport.cyclone_config import MAX_DOMAIN_ID


def add_parser(subparsers):
    """Add the ``security`` subcommand."""
    p = subparsers.add_parser('security', allow_abbrev=False, help='fleet key and SROS2 keystore',
                              description=__doc__.split('\n')[1].replace('``', ''))
    sub = p.add_subparsers(dest='security_command', metavar='WHAT')
    sub.required = True
    k = sub.add_parser('key', allow_abbrev=False,
                       help='write a new random fleet key file (mode 0600), or with '
                            '--robot a robot key file made from the fleet key')
    k.add_argument('file', help='key file to create (must not exist)')
    k.add_argument('--robot', type=int, default=None, metavar='RANK',
                   help="write worker robot RANK's key (robot_keys: that robot can then tag "
                        'only its own messages), made from --fleet-key')
    k.add_argument('--fleet-key', default=None, metavar='FILE',
                   help='the fleet key file a robot key is made from (with --robot)')
    k.set_defaults(func=_cmd_key)
    s = sub.add_parser('keystore', allow_abbrev=False,
                       help='SROS2 keystore: CA, enclaves, signed governance and '
                            'permissions for /rog_ros/server, worker, netmon')
    s.add_argument('directory', help='new (or empty) keystore directory')
    s.add_argument('--namespace', default='/rog', help='fleet topic namespace (default /rog)')
    s.add_argument('--domain-id', type=int, action='append', default=None,
                   help=f'allowed DDS domain (repeatable; default all 0..{MAX_DOMAIN_ID})')
    s.add_argument('--per-rank', type=int, default=0,
                   help='also make /rog_ros/worker_<r> enclaves, r < N, each reading only its '
                        'own downlink (default 0)')
    s.add_argument('--days', type=int, default=3650, help='validity (default 3650)')
    s.set_defaults(func=_cmd_keystore)
    return p


def _cmd_key(args) -> int:
    from rog_ros.nodes.fleet_key import FleetKeyError, read_key_file, write_key_file
    if _names_a_directory(args.file):
        name = 'fleet.key' if args.robot is None else f'robot{args.robot}.key'
        example = shlex.quote(os.path.join(args.file, name))
        print(f'rog security key: {args.file} names a directory; give the path of the key '
              f'file to create, such as {example}', file=sys.stderr)
        return 2
    if (args.robot is None) != (args.fleet_key is None):
        print('rog security key: --robot RANK and --fleet-key FILE go together (a robot key '
              'is made from the fleet key)', file=sys.stderr)
        return 2
    text = None
    _remove_leftovers(args.file)
    try:
        if args.robot is not None:
            from rog_ros.protocol.robot_keys import robot_key_text
            text = robot_key_text(read_key_file(args.fleet_key), args.robot)
        key = write_key_file(args.file, text)
    except FleetKeyError as err:
        print(f'rog security key: {err}', file=sys.stderr)
        return 2
    except OSError as err:
        print(f'rog security key: cannot create {args.file}: {err.strerror}', file=sys.stderr)
        return 2
    path = shlex.quote(os.path.abspath(args.file))     # pasted into a shell, on a robot
    if args.robot is not None:
        print(f"rog security key: wrote {args.file}, robot {args.robot}'s key (fingerprint "
              f'{key.fingerprint}, from fleet key {key.fleet_fingerprint}); give robot '
              f'{args.robot} only this file (--fleet-key-file {path}) and every node '
              '--robot-keys true; the server keeps the fleet key')
        return 0
    print(f'rog security key: wrote {args.file} (fingerprint {key.fingerprint}); give every '
          f'node --fleet-key-file {path} or ROG_FLEET_KEY_FILE={path}')
    return 0


def _remove_leftovers(path: str) -> None:
    """
    Remove, saying so, the temporary key files a killed ``rog security key`` left by ``path``.

    Each holds a key (mode 0600) under a name no node reads; a SIGKILL midway left one
    beside the key file, which then stayed (:func:`rog_ros.atomic.remove_new_file_leftovers`).
    """
    from rog_ros.atomic import remove_new_file_leftovers
    folder = os.path.dirname(os.path.abspath(path))
    removed = remove_new_file_leftovers(folder, os.path.basename(path))
    if removed:
        print(f'rog security key: removed {removed} temporary key file(s) that an interrupted '
              f'run left in {folder}', file=sys.stderr)


def _names_a_directory(path: str) -> bool:
    """Tell whether ``path`` is an existing directory or is written as one (ends in /)."""
    return os.path.isdir(path) or path.endswith(('/', os.sep))


def _check_keystore(args) -> None:
    from rog_ros import checks
    from rog_ros.nodes.keystore import MAX_DAYS, MAX_PER_RANK
    checks.integer('--per-rank', args.per_rank, 0, MAX_PER_RANK)
    checks.integer('--days', args.days, 1, MAX_DAYS)
    for domain in args.domain_id or ():
        checks.integer('--domain-id', domain, 0, MAX_DOMAIN_ID)


def _cmd_keystore(args) -> int:
    from rog_ros.checks import ConfigError
    from rog_ros.nodes.keystore import create_keystore, KeystoreError
    try:
        _check_keystore(args)
    except ConfigError as err:
        print(f'rog security keystore: {err}', file=sys.stderr)
        return 2
    try:
        enclaves = create_keystore(args.directory, namespace=args.namespace,
                                   domain_ids=args.domain_id, per_rank=args.per_rank,
                                   days=args.days)
    except KeystoreError as err:
        print(f'rog security keystore: {err}', file=sys.stderr)
        return 2
    except OSError as err:
        print(f'rog security keystore: cannot create {args.directory}: '
              f'{err.strerror or err}', file=sys.stderr)
        return 2
    print(f'rog security keystore: {args.directory} with enclaves {", ".join(enclaves)}; on '
          f'each robot: export ROS_SECURITY_KEYSTORE='
          f'{shlex.quote(os.path.abspath(args.directory))} '
          f'ROS_SECURITY_ENABLE=true ROS_SECURITY_STRATEGY=Enforce and start the node with '
          f'--ros-args --enclave <enclave>')
    return 0
