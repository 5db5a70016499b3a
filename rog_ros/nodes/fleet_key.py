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
Fleet key files: create, load and check the secret that authenticates a fleet's messages.

A node takes its key from ``--fleet-key-file``, else ``$ROG_FLEET_KEY_FILE`` (a path), else
``$ROG_FLEET_KEY`` (the key itself), else runs unauthenticated. A key file holds 64 hex digits
(``rog security key FILE`` writes one) or other text of at least 32 bytes (the rule is
:func:`rog_ros.protocol.auth.parse_key`'s), and must not be accessible by other users (mode
0600), as ssh requires of its keys. Errors name the file, never its content. The key
itself is a :class:`rog_ros.protocol.auth.FleetKey`.
"""

from __future__ import annotations

import os
import re
import secrets
import stat

from rog_ros.atomic import create_new_bytes
from rog_ros.protocol.auth import (FleetKey, FleetKeyError, MIN_KEY_BYTES, parse_key,
                                   ROBOT_KEY_HEADER)

KEY_ENV = 'ROG_FLEET_KEY'
"""Environment variable holding the fleet key itself (hex, or text of >= 32 bytes)."""
KEY_FILE_ENV = 'ROG_FLEET_KEY_FILE'
"""Environment variable holding the path of a fleet key file."""
MAX_KEY_FILE_BYTES = 4096
"""Largest key file read (a key is 64 hex digits; a larger file is the wrong file)."""

__all__ = ['FleetKey', 'FleetKeyError', 'KEY_ENV', 'KEY_FILE_ENV', 'generate_key_text',
           'key_source', 'load_fleet_key', 'read_key_file', 'write_key_file']


def generate_key_text() -> str:
    """Return a new random fleet key as 64 hex digits (32 bytes)."""
    return secrets.token_hex(MIN_KEY_BYTES)


def read_key_file(path) -> FleetKey:
    """
    Load a fleet key file; refuse one that other users may read (like ssh does).

    The opened file is checked (no race between a check and the open), and one larger than
    :data:`MAX_KEY_FILE_BYTES` is refused rather than read in part. Raises
    :class:`FleetKeyError` with a one-line reason.
    """
    path = os.fspath(path)
    try:
        with open(path, 'rb') as fh:
            st = os.fstat(fh.fileno())
            if os.name == 'posix' and st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise FleetKeyError(f'fleet key file {path} is accessible by other users (mode '
                                    f'{stat.S_IMODE(st.st_mode):o}); run chmod 600 {path}')
            text = fh.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as err:
        if _names_a_key(path):
            raise FleetKeyError(
                'cannot read the fleet key file: the path given is a key itself (its name is '
                'a key, not repeated here), not the path of a key file; write the key to a '
                'file with mode 0600 and give that path (--fleet-key-file or '
                f'${KEY_FILE_ENV}), or give the key itself in ${KEY_ENV}') from None
        raise FleetKeyError(f'cannot read fleet key file {path}: {err.strerror}') from None
    if len(text) > MAX_KEY_FILE_BYTES:
        raise FleetKeyError(f'fleet key file {path} is larger than {MAX_KEY_FILE_BYTES} bytes; '
                            'a key file holds one key (64 hex digits)')
    return parse_key(text, f'fleet key file {path}')


def _names_a_key(path: str) -> bool:
    """
    Tell whether ``path`` (one that cannot be read) is a key rather than a file's path.

    The key given where its file's path belongs (``ROG_FLEET_KEY_FILE`` for ``ROG_FLEET_KEY``)
    was printed and logged in 'cannot read fleet key file KEY'. A name of 64 or more hex digits
    (``rog security key``, ``openssl rand -hex 32``) or a robot key's line is taken for one.
    """
    name = os.path.basename(os.fspath(path).rstrip(os.sep)) or os.fspath(path)
    return bool(_KEY_LIKE.fullmatch(name)) or ROBOT_KEY_HEADER.decode('ascii') in path


_KEY_LIKE = re.compile(r'\s*[0-9a-fA-F]{64,}\s*')


def write_key_file(path, text=None) -> FleetKey:
    """
    Create ``path`` (mode 0600, must not exist) holding ``text`` or a new random key.

    Whole or not at all (:func:`rog_ros.atomic.create_new_bytes`): the key is written to a
    temporary file, synced, then given its name and the folder synced. Created in place
    before, a key file cut short by a power cut or SIGKILL was left empty (a retry met
    'File exists'), and its name was never synced (after a power cut it could be gone while
    ``rog security key`` had said it was written).
    """
    text = generate_key_text() if text is None else text
    key = parse_key(text)
    create_new_bytes(path, (text.strip() + '\n').encode(), 0o600)
    return key


def load_fleet_key(path=None, environ=None):
    """
    Return the fleet key: from ``path``, else ``$ROG_FLEET_KEY_FILE``, else ``$ROG_FLEET_KEY``.

    Returns None when none is configured (the node then runs unauthenticated). Raises
    :class:`FleetKeyError` when one is configured but unusable.
    """
    env = os.environ if environ is None else environ
    if path:
        return read_key_file(path)
    if env.get(KEY_FILE_ENV):
        return read_key_file(env[KEY_FILE_ENV])
    if env.get(KEY_ENV):
        if _names_a_file(env[KEY_ENV]):
            raise FleetKeyError(
                f'${KEY_ENV} holds the path of a file, not a key (the value is not repeated '
                f"here): a key file's path goes in ${KEY_FILE_ENV} (or --fleet-key-file); "
                f'${KEY_ENV} holds the key itself (64 hex digits, `rog security key FILE` '
                'writes one)')
        return parse_key(env[KEY_ENV], f'${KEY_ENV}')
    return None


def _names_a_file(text: str) -> bool:
    """
    Tell whether ``$ROG_FLEET_KEY``'s ``text`` is the path of an existing file.

    A key file's path put there (``/etc/rog/fleet.key``) was taken as a passphrase once 32
    characters long: the fleet's key was then a text anyone who knows the path has.
    """
    try:
        return os.path.isfile(os.path.expanduser(text.strip()))
    except (ValueError, OSError):          # (a NUL byte, a name too long: not a path)
        return False


def key_source(path=None, environ=None) -> str:
    """
    Name where :func:`load_fleet_key` takes the key from, for a line that refuses it.

    A robot key of another rank given in ``$ROG_FLEET_KEY_FILE`` (as docs/robots-commands.md
    sets it) was named 'the fleet key', which said neither the variable nor the file.
    """
    env = os.environ if environ is None else environ
    if path:
        return f'fleet key file {path}'
    if env.get(KEY_FILE_ENV):
        return f'fleet key file {env[KEY_FILE_ENV]} (${KEY_FILE_ENV})'
    if env.get(KEY_ENV):
        return f'${KEY_ENV}'
    return 'the fleet key'
