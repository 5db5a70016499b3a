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
r"""
Robot keys: each robot's messages tagged with a key of its own, so a robot speaks for itself only.

With one shared fleet key every node can tag any message, so a robot that is taken over can
speak in every other robot's name and in the server's: stamp a message far ahead in another
robot's name and that robot's own messages are dropped as ``too_old`` for ever, open a
transfer at a clock far ahead, close one with a transfer id near 2^32 (docs/security.md). No
bound on sequence numbers, clocks or transfer ids closes that while they may lawfully jump
(after an outage, a restore), so the keys change instead (``robot_keys``):

* the server holds the fleet key K and derives robot r's key
  ``k_r = HMAC-SHA256(K, b'rog-robot-key-1\0' + decimal r)`` (32 bytes);
* a message is tagged with the key of the robot whose link it crosses (``auth.robot_of``): a
  worker's chunks, acks and status with its own, the server's chunks, acks, versions and
  schedules *to* robot r with ``k_r``, a netmon's report on robot r's link with ``k_r``; the
  server's own status with K;
* robot r holds ``k_r`` only (a robot key file, ``rog security key --robot R``), so it can
  neither tag a message of another robot nor one of the server to another robot.

What a taken-over robot can still do is spoil its own contributions, as before. The tag, the
canonical encoding and the replay windows are ``auth``'s, unchanged: only the choice of key
differs, so the wire format is the same and a fleet without ``robot_keys`` is unchanged.
"""

from __future__ import annotations

import hmac

from rog_ros.protocol.auth import (compute_tag, FleetKey, FleetKeyError, ROBOT_KEY_HEADER,
                                   robot_of)

_DERIVE = b'rog-robot-key-1\0'
_MAX_CACHED = 4096
_HINT_RANKS = 64
"""A bad tag's hint tries the keys of ranks below this and of this many ranks heard from."""
MAX_RANK = 9999
"""Highest rank a robot key is made for (a robot key file writes at most 4 digits)."""


def derive_robot_key(fleet: FleetKey, rank: int) -> FleetKey:
    """Return robot ``rank``'s key, derived from the fleet key (only its holder can)."""
    return FleetKey(_derived_secret(fleet, rank), robot=int(rank),
                    fleet_fingerprint=fleet.fingerprint)


def robot_key_text(fleet: FleetKey, rank: int) -> str:
    """Return the one line of robot ``rank``'s key file (``auth.parse_key`` reads it)."""
    return (f'{ROBOT_KEY_HEADER.decode("ascii")}rank={int(rank)} fleet={fleet.fingerprint} '
            f'{_derived_secret(fleet, rank).hex()}')


def _derived_secret(fleet: FleetKey, rank: int) -> bytes:
    r"""Return ``HMAC-SHA256(K, b'rog-robot-key-1\0' + decimal rank)``; refuse what cannot be."""
    if fleet.robot is not None:
        raise FleetKeyError(f"robot {fleet.robot}'s key cannot make another robot's key; "
                            'the fleet key makes them')
    if not 0 <= int(rank) <= MAX_RANK:
        raise FleetKeyError(f'a robot key is for a worker rank in 0..{MAX_RANK}, got {rank}')
    mac = fleet.mac()
    mac.update(_DERIVE + str(int(rank)).encode('ascii'))
    return mac.digest()


class FleetKeyring:
    """The server's keys (and a fleet-wide netmon's): K for its own messages, ``k_r`` for r's."""

    def __init__(self, fleet: FleetKey):
        if fleet.robot is not None:
            raise FleetKeyError(f"the server needs the fleet key, not robot {fleet.robot}'s "
                                'key')
        self.fleet = fleet
        self.fingerprint = fleet.fingerprint
        self._robots = {}

    def key_for(self, msg) -> FleetKey:
        """Return the key that tags ``msg``: K for the server's own, else its robot's key."""
        rank = robot_of(msg)
        if rank < 0:
            return self.fleet
        return self.key_for_rank(rank)

    def key_for_rank(self, rank: int) -> FleetKey:
        """Return robot ``rank``'s key (derived once, kept for the few ranks of a fleet)."""
        key = self._robots.get(rank)
        if key is None:
            if len(self._robots) >= _MAX_CACHED:    # forged ranks: derive again, keep few
                self._robots.clear()
            key = self._robots[rank] = derive_robot_key(self.fleet, rank)
        return key

    def __repr__(self) -> str:
        return f'FleetKeyring(fleet={self.fleet.fingerprint})'


class RobotKeyring:
    """Robot ``rank``'s key: it tags and verifies the messages of that robot's link only."""

    def __init__(self, key: FleetKey, rank: int):
        if key.robot != int(rank):
            raise FleetKeyError(f'a key of robot {key.robot} given to robot {rank}')
        self.key, self.rank = key, int(rank)
        self.fingerprint = key.fingerprint

    def key_for(self, msg):
        """Return the robot's key for a message of its link, None for any other message."""
        return self.key if robot_of(msg) == self.rank else None

    def __repr__(self) -> str:
        return f'RobotKeyring(robot={self.rank}, key={self.fingerprint})'


def keyring_for(key, robot_keys: bool, rank=None, source: str = 'the fleet key'):
    """
    Return what a node signs and verifies with: a FleetKey, a keyring, or None (no key).

    ``rank``: the worker (or the one robot a netmon reports on) the node speaks for; None for
    the server and a fleet-wide netmon. Without ``robot_keys`` the fleet key tags everything
    (a robot key is then refused: the others would not know it). With it, the server holds
    the fleet key and a robot its own key, given as a robot key file or derived here from the
    fleet key (a fleet on one machine). FleetKeyError says what does not fit, in one line.
    """
    if key is None:
        if robot_keys:
            raise FleetKeyError('robot_keys needs a fleet key (--fleet-key-file); without '
                                'one nothing is authenticated')
        return None
    if key.robot is not None:
        if not robot_keys:
            raise FleetKeyError(f"{source} is robot {key.robot}'s key (a robot key file): "
                                'set robot_keys true on every node of the fleet, whose '
                                'server holds the fleet key')
        if rank is None:
            raise FleetKeyError(f"{source} is robot {key.robot}'s key; the server (and a "
                                'netmon reporting for several robots) needs the fleet key')
        if int(rank) != key.robot:
            raise FleetKeyError(f"{source} is robot {key.robot}'s key, given to robot {rank}: "
                                f'give robot {rank} its own key file (rog security key --robot '
                                f'{rank} --fleet-key FLEET_KEY FILE), or check its rank')
        return RobotKeyring(key, rank)
    if not robot_keys:
        return key
    if rank is None:
        return FleetKeyring(key)
    return RobotKeyring(derive_robot_key(key, rank), rank)


def bad_tag_hint(keys, msg) -> str:
    """
    Say what most likely made ``msg``'s tag fail with ``keys`` (the node's), for its log.

    Nodes that disagree on ``robot_keys`` hold the same fleet key and still drop each
    other's every message; a hint to compare fingerprints would find them equal. So this
    tries the key the other setting would tag with, where the node can make it: the fleet
    key itself (on here, off at the sender) or the sender's robot key (off here, on there).
    A robot can try neither (it holds its own key only); it names the fleet key its key was
    made from, which is the fingerprint the server logs. One tag more: call it only for the
    drops that are logged.
    """
    try:
        rank = robot_of(msg)
    except (AttributeError, TypeError, ValueError):
        rank = None
    if isinstance(keys, RobotKeyring):
        if rank is not None and rank != keys.rank:
            whose = "the server's own" if rank < 0 else f"robot {rank}'s"
            return (f"a message of {whose} link, which robot {keys.rank}'s key cannot check "
                    '(sent to this robot by mistake, or replayed)')
        return (f"this robot holds robot {keys.rank}'s key, made from fleet key "
                f'{keys.key.fleet_fingerprint}: does the server log that fleet key, with '
                f'robot_keys on, and was this key file made for robot {keys.rank} (rog '
                f'security key --robot {keys.rank}), its rank= not edited?')
    fleet = keys.fleet if isinstance(keys, FleetKeyring) else keys
    mine = isinstance(keys, FleetKeyring) or fleet.robot is None
    if mine and rank is not None and 0 <= rank <= MAX_RANK:
        if isinstance(keys, FleetKeyring):
            if _tagged_with(msg, fleet):
                return (f"tagged with the fleet key itself, not robot {rank}'s key: "
                        'robot_keys is off at its sender and on here; every node must agree')
            other = _other_robot_tagging(keys, msg, rank)
            if other is not None:
                return (f"tagged with robot {other}'s key, not robot {rank}'s: the robot "
                        f"that runs as robot {rank} holds robot {other}'s key file (its rank= "
                        f'edited, or its rank set wrong); give it its own (rog security key '
                        f'--robot {rank} --fleet-key FLEET_KEY FILE)')
        elif _tagged_with(msg, derive_robot_key(fleet, rank)):
            return (f"tagged with robot {rank}'s key: robot_keys is on at its sender and off "
                    'here; every node must agree')
    if isinstance(keys, FleetKeyring) and rank is not None and rank >= 0:
        return (f'a different fleet key? this node holds fleet key {fleet.fingerprint}; '
                f"robot {rank}'s key file must say fleet={fleet.fingerprint}")
    return (f'a different fleet key? this node holds {fleet.fingerprint}: compare the '
            'fingerprints the nodes log at start')


def _other_robot_tagging(keys: FleetKeyring, msg, rank: int):
    """
    Return the rank whose robot key tags ``msg`` (which claims robot ``rank``), or None.

    A robot key file's ``rank=`` is a label beside its secret: a file of robot 3 edited to
    say ``rank=1`` starts robot 1, and only the fleet key's holder can tell whose secret it
    carries. Tries the ranks the server has heard from and the first ``_HINT_RANKS`` (a few
    milliseconds, and only for the drops that are logged).
    """
    heard = list(keys._robots)[:_HINT_RANKS]      # forged ranks may fill the cache
    ranks = sorted(set(heard) | set(range(min(_HINT_RANKS, MAX_RANK + 1))))
    for other in ranks:
        if other != rank and _tagged_with(msg, keys.key_for_rank(other)):
            return other
    return None


def _tagged_with(msg, key: FleetKey) -> bool:
    """Tell whether ``msg``'s tag is ``key``'s."""
    try:
        return hmac.compare_digest(compute_tag(msg, key), bytes(msg.auth_tag))
    except (AttributeError, TypeError, ValueError):
        return False
