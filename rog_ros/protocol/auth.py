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
Message authentication: a fleet key, HMAC tags over every message, a replay window (no I/O).

Every node of a fleet holds the same secret *fleet key* (>= 32 bytes). A sender stamps each
outgoing message with a per-node, monotonically increasing ``auth_seq`` and
``auth_tag = HMAC-SHA256(key, canonical(msg))[:16]``; a receiver recomputes the tag, compares
it in constant time and then checks ``auth_seq`` against a sliding window, so a forged,
altered, unauthenticated or replayed message is dropped before any engine sees it.

Canonical encoding (what the tag covers)
----------------------------------------
Not the CDR bytes (the rclpy path has no CDR serialiser of its own in Python), but a
deterministic encoding of the dataclass that both sides compute from the same field values::

    b'rog-auth-1\0' + TYPE + b'\0'
    then, for every field in the order of the message's dataclass (``messages``), which is
    not the order of its .msg file, except auth_tag:
        name + b'\0' + kind (1 byte) + length (8 bytes, little endian) + value bytes

Names are the dataclass fields' (LinkStats ``interface``, not the wire's ``interface_name``);
:func:`encoding_reference` lists every type's fields in order with their kinds and array
dtypes (docs/security.md carries it, tested equal), so that a client written from the docs
alone computes the same tags.

with ints as minimal little-endian two's complement, floats as IEEE binary64 (the bit pattern,
so NaN payloads count), stamps as int32 sec + uint32 nanosec, bools as one byte, strings as
UTF-8, ``bytes`` as they are and arrays converted to their wire dtype (the dtype of the field's
default, which is the ``.msg`` type) in little-endian order. It covers header and payload: type
name, addressing, transfer ids, clocks, flags, row ranges, scales, payload, ``incarnation`` and
``auth_seq``.

What it does not do: it gives no confidentiality (payloads travel in clear), and one key is
shared by the whole fleet, so it authenticates membership of the fleet, not which member sent
a message. With robot keys (``rog_ros.protocol.robot_keys``) each robot's messages, and the
server's messages to it, are tagged with a key of that robot's own, derived from the fleet key,
which only the server holds: a robot can then speak only for itself.
"""

from __future__ import annotations

from collections import OrderedDict
import dataclasses
import hashlib
import hmac
import re
import struct

import numpy as np

from rog_ros.protocol import messages

MIN_KEY_BYTES = 32
TAG_BYTES = 16
DEFAULT_WINDOW = 1024
REASONS = ('unauthenticated', 'bad_tag', 'replay', 'too_old', 'malformed')
"""Why a message was rejected; :attr:`Verifier.rejects` counts each."""

_DOMAIN = b'rog-auth-1\0'
_KINDS = {'int': b'i', 'float': b'f', 'bool': b'b', 'str': b's', 'bytes': b'y',
          'np.ndarray': b'a', 'Time': b't'}
_BOM = b'\xef\xbb\xbf'
_HEX = re.compile(rb'[0-9a-fA-F]+')
_NOT_HEX = re.compile(rb'[^0-9a-fA-F]')
_SEPARATORS = re.compile(rb'[\s:-]+')
_SPACED_HEX = re.compile(rb'[0-9a-fA-F]+(?:\s+[0-9a-fA-F]+)+')
_TYPOS = 2
"""Most stray characters in an otherwise hex text of >= 62 characters that make it refused
as a damaged hex key rather than taken raw (no passphrase looks like that)."""
_SENDER_FIELD = {'RowChunk': 'sender', 'TransferAck': 'sender', 'LinkStats': 'node',
                 'TrainStatus': 'node'}
"""Field naming the sending node; RowVersions and Schedule come from the server."""


class FleetKeyError(ValueError):
    """The fleet key could not be loaded (the message never contains the key)."""


class FleetKey:
    """
    The fleet's shared secret. ``repr``/``str`` show only a short fingerprint, never the key.

    Parameters
    ----------
    secret : bytes
        At least :data:`MIN_KEY_BYTES` bytes.

    """

    __slots__ = ('_secret', 'fingerprint', 'robot', 'fleet_fingerprint')

    def __init__(self, secret: bytes, robot: int | None = None,
                 fleet_fingerprint: str = ''):
        if not isinstance(secret, (bytes, bytearray)):
            raise FleetKeyError('fleet key must be bytes')
        if len(secret) < MIN_KEY_BYTES:
            raise FleetKeyError(f'fleet key too short: {len(secret)} bytes, need at least '
                                f'{MIN_KEY_BYTES} (make one: rog security key FILE)')
        self._secret = bytes(secret)
        self.fingerprint = hashlib.sha256(b'rog-key-id\0' + self._secret).hexdigest()[:12]
        """Public identifier of the key (to compare nodes' keys in logs); not secret."""
        self.robot = robot
        """The rank whose robot key this is (``robot_keys``); None for a fleet key."""
        self.fleet_fingerprint = fleet_fingerprint
        """A robot key's fleet key, by its fingerprint ('' for a fleet key)."""

    def key_for(self, msg) -> FleetKey:
        """Return the key that tags ``msg``: this one, for every message (one shared key)."""
        return self

    def mac(self):
        """Return a fresh HMAC-SHA256 object keyed with the secret."""
        return hmac.new(self._secret, digestmod=hashlib.sha256)

    def __repr__(self) -> str:
        robot = '' if self.robot is None else f', robot={self.robot}'
        return f'FleetKey(fingerprint={self.fingerprint}{robot})'

    __str__ = __repr__

    def __reduce__(self):
        raise TypeError('a FleetKey is not picklable')

    def __eq__(self, other) -> bool:
        return isinstance(other, FleetKey) and hmac.compare_digest(self._secret, other._secret)

    def __hash__(self) -> int:
        return hash(self.fingerprint)


def parse_key(text, source: str = 'fleet key') -> FleetKey:
    """
    Return the FleetKey of ``text`` (a key file's content, or ``$ROG_FLEET_KEY``).

    The rule (docs/security.md): a leading UTF-8 byte-order mark and surrounding whitespace
    are dropped; text made only of hex digits is hex, and must decode to >= 32 bytes (64
    digits), as must hex digit pairs split by whitespace (``xxd -p``; earlier versions read
    them so); 64 hex digits split otherwise (``:``, ``-``, a pair split in two), a ``0x``
    prefix or at most :data:`_TYPOS` stray characters among >= 62 are refused, since taking
    them raw would silently give another key; anything else is raw bytes (>= 32).
    ``source`` names where it came from in the error message (never the key itself).
    """
    raw = text.encode('utf-8') if isinstance(text, str) else bytes(text)
    raw = raw.strip()
    if raw.startswith(_BOM):
        raw = raw[len(_BOM):].strip()
    if raw.startswith(ROBOT_KEY_HEADER):
        return _robot_key(raw, source)
    if _HEX.fullmatch(raw):
        return FleetKey(_from_hex(raw, source))
    spaced = _spaced_hex(raw)
    if spaced is not None:             # as earlier versions read it: pairs split by whitespace
        return FleetKey(_long_enough(spaced, source, f'{2 * len(spaced)} hex digits'))
    problem = _almost_hex(raw)
    if problem:
        raise FleetKeyError(f'{source}: malformed hex key: {problem}; a key is 64 hex digits '
                            'on one line (make one with `rog security key FILE`)')
    if len(raw) < MIN_KEY_BYTES:
        raise FleetKeyError(f'{source}: fleet key too short ({len(raw)} bytes, need '
                            f'{MIN_KEY_BYTES}); make one with `rog security key FILE`')
    return FleetKey(raw)


ROBOT_KEY_HEADER = b'rog-robot-key-1 '
"""How a robot key file starts: ``rog-robot-key-1 rank=R fleet=FINGERPRINT HEX`` (one line)."""
_ROBOT_KEY = re.compile(rb'rog-robot-key-1 rank=(\d{1,4}) fleet=([0-9a-f]{12}) ([0-9a-fA-F]+)')


def _robot_key(raw: bytes, source: str) -> FleetKey:
    """Parse a robot key file's line (``robot_keys.robot_key_text`` writes it)."""
    m = _ROBOT_KEY.fullmatch(raw)
    if m is None:
        raise FleetKeyError(f'{source}: malformed robot key: it must be one line '
                            '"rog-robot-key-1 rank=R fleet=FINGERPRINT HEX", as `rog security '
                            'key --robot R --fleet-key FLEET_KEY FILE` writes it')
    digits = m.group(3)
    if len(digits) != 2 * MIN_KEY_BYTES:    # an HMAC-SHA256: any other length is another key
        raise FleetKeyError(f'{source}: malformed robot key: {len(digits)} hex digits; a robot '
                            f'key is {2 * MIN_KEY_BYTES} hex digits (some lost or added?)')
    return FleetKey(bytes.fromhex(digits.decode('ascii')), robot=int(m.group(1)),
                    fleet_fingerprint=m.group(2).decode('ascii'))


def _from_hex(digits: bytes, source: str) -> bytes:
    """Decode all-hex ``digits``; refuse an odd count or fewer than 32 bytes in one line."""
    if len(digits) % 2:
        raise FleetKeyError(f'{source}: malformed hex key: odd number of hex digits '
                            f'({len(digits)}); a key is {2 * MIN_KEY_BYTES} hex digits '
                            '(one lost or added?)')
    return _long_enough(bytes.fromhex(digits.decode('ascii')), source,
                        f'{len(digits)} hex digits')


def _long_enough(secret: bytes, source: str, read_from: str) -> bytes:
    """Return a decoded hex ``secret`` of >= 32 bytes; refuse a shorter one in one line."""
    if len(secret) < MIN_KEY_BYTES:
        raise FleetKeyError(f'{source}: fleet key too short ({len(secret)} bytes from '
                            f'{read_from}, need {MIN_KEY_BYTES} bytes = '
                            f'{2 * MIN_KEY_BYTES} hex digits); make one with '
                            '`rog security key FILE`')
    return secret


def _spaced_hex(raw: bytes):
    """
    Decode hex digit pairs split by ASCII whitespace (``xxd -p`` wraps at 60); else None.

    Earlier versions read such text as hex (``bytes.fromhex`` skips whitespace between
    pairs), so fleets set up with one keep their key.
    """
    if not _SPACED_HEX.fullmatch(raw):
        return None
    try:
        return bytes.fromhex(raw.decode('ascii'))
    except ValueError:                 # a pair split in two: not a key that ever decoded
        return None


def _almost_hex(raw: bytes) -> str:
    """Say how ``raw`` (not all hex) looks like a hex key with a flaw; '' when it does not."""
    if len(raw) > 2 and raw[:2] in (b'0x', b'0X') and _HEX.fullmatch(raw[2:]):
        return 'it starts with 0x'
    digits = _SEPARATORS.sub(b'', raw)
    if _HEX.fullmatch(digits) and len(digits) == 2 * MIN_KEY_BYTES:
        # a 32-byte key written with separators (a UUID, 32 digits and '-', stays a passphrase)
        return 'hex digits split by spaces, line breaks, : or -'
    stray = len(_NOT_HEX.findall(raw))
    if len(raw) >= 2 * MIN_KEY_BYTES - _TYPOS and stray <= _TYPOS:
        return f'{stray} character(s) that are not hex digits among {len(raw)}'
    return ''


# ---------------------------------------------------------------------- canonical encoding
_IF_SET = {('RowVersions', 'part'), ('RowVersions', 'parts')}
"""Fields hashed only when not 0: a RowVersions part's ``part`` and ``parts``. A whole copy
(both 0) keeps the tag it had before parts existed, so a robot of that release checks it."""


def _plan(cls) -> tuple:
    """Return each hashed field of ``cls`` as (name, head, kind, dtype, hashed only if set)."""
    plan = []
    for f in dataclasses.fields(cls):
        if f.name == 'auth_tag':
            continue
        kind = f.type if isinstance(f.type, str) else getattr(f.type, '__name__', '')
        if kind not in _KINDS:
            raise TypeError(f'{cls.__name__}.{f.name}: no canonical encoding for {kind}')
        dtype = None
        if kind == 'np.ndarray':
            dtype = f.default_factory().dtype.newbyteorder('<')
        plan.append((f.name, f.name.encode('ascii') + b'\0' + _KINDS[kind], kind, dtype,
                     (cls.TYPE, f.name) in _IF_SET))
    return tuple(plan)


_PLANS = {cls.TYPE: _plan(cls) for cls in (
    messages.RowChunk, messages.RowVersions, messages.TransferAck, messages.Schedule,
    messages.LinkStats, messages.TrainStatus)}
_LEN = struct.Struct('<Q')
_F64 = struct.Struct('<d')
_TIME = struct.Struct('<iI')


_KIND_WORDS = {'int': 'integer', 'float': 'float64', 'bool': 'bool', 'str': 'UTF-8 text',
               'bytes': 'bytes', 'np.ndarray': 'array', 'Time': 'time'}


def encoding_reference() -> str:
    """
    Return the canonical encoding's field table (markdown): per type, the fields in order.

    Each field as ``name`` kind-byte (what it holds); arrays name their little-endian dtype.
    docs/security.md holds this text; a test keeps the two equal.
    """
    lines = ['| type | fields hashed, in this order: name, kind byte (value) |', '|---|---|']
    for type_name, plan in _PLANS.items():
        cells = []
        for name, _, kind, dtype, if_set in plan:
            what = f'{dtype.name} array' if kind == 'np.ndarray' else _KIND_WORDS[kind]
            what += ', only when not 0' if if_set else ''
            cells.append(f'`{name}` {_KINDS[kind].decode()} ({what})')
        lines.append(f'| `{type_name}` | {", ".join(cells)} |')
    return '\n'.join(lines) + '\n'


def _value_bytes(kind: str, dtype, value):
    if kind == 'int':
        v = int(value)
        return v.to_bytes(v.bit_length() // 8 + 1, 'little', signed=True)
    if kind == 'float':
        return _F64.pack(float(value))
    if kind == 'bool':
        return b'\1' if value else b'\0'
    if kind == 'str':
        return str(value).encode('utf-8', 'surrogatepass')
    if kind == 'bytes':
        return value if isinstance(value, bytes) else bytes(value)
    if kind == 'Time':
        sec, nanosec = int(value.sec), int(value.nanosec)
        if not (-2 ** 31 <= sec < 2 ** 31 and 0 <= nanosec < 2 ** 32):
            raise ValueError(f'sec={sec}, nanosec={nanosec} out of range (int32 sec, uint32 '
                             'nanosec)')
        return _TIME.pack(sec, nanosec)
    return memoryview(np.ascontiguousarray(value, dtype=dtype).reshape(-1)).cast('B')


def compute_tag(msg, key: FleetKey) -> bytes:
    """
    Return the 16-byte tag of ``msg`` (its current ``auth_seq`` included, ``auth_tag`` not).

    Raises TypeError, or ValueError naming the field, for a message that cannot be encoded.
    """
    plan = _PLANS.get(getattr(msg, 'TYPE', None))
    if plan is None:
        raise TypeError(f'not a rog_ros message: {type(msg).__name__}')
    h = key.mac()
    h.update(_DOMAIN + msg.TYPE.encode('ascii') + b'\0')
    for name, head, kind, dtype, if_set in plan:
        if if_set and not getattr(msg, name):
            continue
        try:
            value = _value_bytes(kind, dtype, getattr(msg, name))
        except (ValueError, OverflowError, struct.error) as err:
            raise ValueError(f'{msg.TYPE}.{name} cannot be encoded: {err}') from None
        h.update(head)
        h.update(_LEN.pack(len(value) if kind != 'np.ndarray' else value.nbytes))
        h.update(value)
    return h.digest()[:TAG_BYTES]


def sign(msg, key: FleetKey, seq: int):
    """
    Set ``msg.auth_seq = seq`` (>= 1) and ``msg.auth_tag``; return ``msg``.

    Raises ValueError naming the field when one cannot be encoded (a stamp out of range).
    """
    if not 1 <= int(seq) < 2 ** 64:
        raise ValueError(f'auth_seq must be in [1, 2^64), got {seq}')
    msg.auth_seq = int(seq)
    msg.auth_tag = b''
    msg.auth_tag = compute_tag(msg, key)
    return msg


def _robot_of(msg) -> str:
    """Say which robot ``msg`` belongs to, for an error message ('?' if it cannot)."""
    try:
        return str(robot_of(msg))
    except (AttributeError, TypeError, ValueError):
        return '?'


def robot_of(msg) -> int:
    """
    Return the robot whose link ``msg`` crosses: its rank, or SERVER for the server's own.

    Chunks and acks belong to the worker end (the sender, or the receiver when the server
    sent it), versions and schedules to the robot they are for, link reports and training
    status to the node they report on.
    """
    kind = msg.TYPE
    if kind in ('RowChunk', 'TransferAck'):
        sender = int(msg.sender)
        return int(msg.receiver) if sender == messages.SERVER else sender
    if kind == 'RowVersions':
        return int(msg.receiver)
    if kind == 'Schedule':
        return int(msg.worker)
    if kind in ('LinkStats', 'TrainStatus'):
        return int(msg.node)
    raise TypeError(f'not a rog_ros message: {type(msg).__name__}')


def sender_of(msg) -> int:
    """Return the node that sent ``msg`` (a rank, or SERVER for RowVersions/Schedule)."""
    name = _SENDER_FIELD.get(msg.TYPE)
    return messages.SERVER if name is None else int(getattr(msg, name))


RESTART_GAP = 2 ** 32
"""How far above the number its saved state names a restored node's signer goes on
(:meth:`Signer.continue_after`): more messages than a node can send between two saves."""


class Signer:
    """
    Stamp outgoing messages of one node with increasing sequence numbers from ``first_seq``.

    Nodes start at the wall clock in microseconds (``AuthBus`` does), so a restarted node
    continues above every number it used before as long as its clock did not step back
    and it sent fewer than a million messages a second. That matters only for what a
    restarted node sends under the incarnation of its earlier run (a worker's recovered
    push END; every other message has a window of its own incarnation): a robot rebooted
    with a flat RTC starts at 1970 or its image's build date, before NTP sets its clock, and
    its END fell below the window of its earlier run (``too_old``). A node that saves
    state therefore saves :attr:`seq` with it, and its restored run calls
    :meth:`continue_after`, whatever its clock says.
    """

    def __init__(self, key, first_seq: int = 1):
        if not 1 <= int(first_seq) < 2 ** 63:
            raise ValueError(f'first_seq must be in [1, 2^63), got {first_seq}')
        self.key = key
        self.seq = int(first_seq) - 1
        self.signed = 0

    def continue_after(self, seq: int) -> None:
        """
        Go on above ``seq`` + :data:`RESTART_GAP` (a number this node's saved state names).

        Never goes back: a signer already above (a clock that did not step back) stays.
        """
        floor = int(seq) + RESTART_GAP
        if not 0 <= int(seq) or floor >= 2 ** 63:
            raise ValueError(f'a saved auth_seq must be in [0, 2^63 - 2^32), got {seq}')
        self.seq = max(self.seq, floor)

    def sign(self, msg):
        """Return a signed shallow copy of ``msg`` (the caller's object is left alone)."""
        key = self.key.key_for(msg)
        if key is None:
            raise ValueError(f'{self.key!r} cannot sign a {msg.TYPE} of robot '
                             f'{_robot_of(msg)}: a robot key signs for its own robot only')
        self.seq += 1
        self.signed += 1
        return sign(dataclasses.replace(msg), key, self.seq)

    def __repr__(self) -> str:
        return f'Signer(key={self.key!r}, seq={self.seq})'


class _Window:
    """Sliding replay window: the highest sequence number seen and a bitmap below it."""

    __slots__ = ('top', 'bits')

    def __init__(self, seq: int):
        self.top, self.bits = seq, 1


class Verifier:
    """
    Check tags and replay windows of incoming messages; count rejects by reason.

    One window per (message type, sender, incarnation): each type travels on its own topic,
    whose order DDS keeps per writer, so a slow topic cannot push another's messages out of
    the window. With robot keys, also one per robot whose key tags the message: the
    server's messages to robot r, which r can tag too, cannot move those to robot s where
    both are verified (``rog fleet``'s watcher holds the fleet key). A window accepts a
    sequence number once, in any order, while it is within ``window`` of the highest one
    seen.

    Parameters
    ----------
    key : FleetKey, a keyring of ``robot_keys`` or None
        None: no key configured, every message is accepted as it is. A keyring tags each
        message with its robot's key; a message no key of it may tag is ``bad_tag``.
    window : int, default 1024
        Width of the replay window in sequence numbers.
    max_windows : int, default 4096
        Windows kept (least recently used evicted); bounds memory under a flood of
        authenticated senders/incarnations.

    """

    def __init__(self, key, window: int = DEFAULT_WINDOW, max_windows: int = 4096):
        if window < 1 or max_windows < 1:
            raise ValueError('window and max_windows must be >= 1')
        self.key = key
        self.window = int(window)
        self.max_windows = int(max_windows)
        self._mask = (1 << self.window) - 1
        self._windows = OrderedDict()
        self.rejects = {reason: 0 for reason in REASONS}
        self.accepted = 0

    def check(self, msg):
        """Return None when ``msg`` is accepted (and record its seq), else the reason."""
        reason = self._check(msg)
        if reason is None:
            self.accepted += 1
        else:
            self.rejects[reason] += 1
        return reason

    def accept(self, msg) -> bool:
        """``check(msg) is None``."""
        return self.check(msg) is None

    def _check(self, msg):
        if self.key is None:
            return None
        try:
            tag, seq = msg.auth_tag, int(msg.auth_seq)
            if not tag or seq <= 0:
                return 'unauthenticated'
            if not isinstance(tag, bytes) or len(tag) != TAG_BYTES:
                return 'bad_tag'
            try:
                key = self.key.key_for(msg)
            except FleetKeyError:      # a rank no robot key is made for: none tags it
                return 'bad_tag'
            if key is None:
                return 'bad_tag'
            expected = compute_tag(msg, key)
            # (robot keys: the server's messages to each robot have windows of their own,
            # so one robot's cannot move another's; key.robot is None for a fleet key)
            slot = (msg.TYPE, sender_of(msg), key.robot, int(msg.incarnation))
        except (AttributeError, TypeError, ValueError, OverflowError, struct.error):
            return 'malformed'
        if not hmac.compare_digest(expected, tag):
            return 'bad_tag'
        return self._slide(slot, seq)

    def _slide(self, slot, seq: int):
        win = self._windows.get(slot)
        if win is None:
            self._windows[slot] = _Window(seq)
            if len(self._windows) > self.max_windows:
                self._windows.popitem(last=False)
            return None
        self._windows.move_to_end(slot)
        if seq > win.top:
            shift = seq - win.top
            win.bits = ((win.bits << shift) | 1) & self._mask if shift < self.window else 1
            win.top = seq
            return None
        back = win.top - seq
        if back >= self.window:
            return 'too_old'
        if (win.bits >> back) & 1:
            return 'replay'
        win.bits |= 1 << back
        return None

    @property
    def rejected(self) -> int:
        """Total messages rejected."""
        return sum(self.rejects.values())

    def __repr__(self) -> str:
        return (f'Verifier(key={self.key!r}, window={self.window}, accepted={self.accepted}, '
                f'rejects={self.rejects})')
