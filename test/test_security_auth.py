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
"""Fleet key, HMAC tags and replay window of rog_ros.protocol.auth."""

import copy
import dataclasses
import os

import numpy as np
import pytest

from rog_ros.nodes import fleet_key
from rog_ros.protocol import auth
from rog_ros.protocol import messages as m

KEY = auth.FleetKey(bytes(range(32)))
OTHER = auth.FleetKey(bytes(range(1, 33)))


def sample_messages():
    """One instance per message type, every field away from its default."""
    return [
        m.RowChunk(transfer_id=2**40 + 7, seq=3, sender=2, receiver=m.SERVER, kind=m.KIND_GRAD,
                   clock=41, flags=m.FLAG_FRAGMENT, codec=2,
                   row_ranges=np.array([0, 3, 10, 400], dtype=np.uint32),
                   frag_offset=65536, tensor_ids=np.array([1, 7], dtype=np.uint32),
                   scales=np.array([0.125, -3.5e-5], dtype=np.float32),
                   payload=bytes(range(256)) * 3, rate_bps=1e6, incarnation=2**63 + 5,
                   target_incarnation=77),
        m.RowVersions(transfer_id=9, receiver=1, n_workers=3,
                      run_starts=np.array([0, 17], dtype=np.uint32),
                      run_lengths=np.array([5, 1], dtype=np.uint32),
                      versions=np.array([4, -1, 3, 2, 2, 2], dtype=np.int32),
                      staleness_slack=np.array([0, 0, 6], dtype=np.uint16), part=1, parts=2,
                      schema_version=m.VERSIONS_PARTS_SCHEMA, incarnation=3,
                      target_incarnation=4),
        m.TransferAck(transfer_id=9, sender=m.SERVER, receiver=1, seq=12, final=True,
                      bytes_received=123456789012,
                      chunk_ranges=np.array([0, 5, 6, 12], dtype=np.uint32),
                      receive_time=1234.5678, incarnation=5, target_incarnation=6),
        m.Schedule(worker=3, clock=77, push_deadline_s=0.731, compute_sleep_s=0.05,
                   urgent_rows=np.array([5, 9], dtype=np.uint32), stop=True,
                   checkpoint_transfer=4, incarnation=7, target_incarnation=8),
        m.LinkStats(node=2, interface='wlan0', stamp=17.25, tx_bytes=10**12, rx_bytes=5,
                    tx_mbps=54.5, rx_mbps=1.25, bitrate_mbps=866.7, signal_dbm=-61.0,
                    emulated_mbps=12.0, incarnation=9),
        m.TrainStatus(node=m.SERVER, stamp=99.5, iteration=1000, loss=0.693, accuracy=0.5,
                      stall_s=1.5, compute_s=200.25, comm_s=30.0, bytes_up=2**33, bytes_down=7,
                      triggers=4, state='stalled', incarnation=10),
    ]


def _tampered(value):
    """Return a different value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1 if value < 2**64 - 1 else value - 1
    if isinstance(value, float):
        return value + 0.5
    if isinstance(value, str):
        return value + 'x'
    if isinstance(value, bytes):
        return bytes([value[0] ^ 1]) + value[1:] if value else b'\0'
    if isinstance(value, np.ndarray):
        out = value.copy()
        out[0] = out[0] + 1
        return out
    if isinstance(value, m.Time):
        return m.Time(value.sec, value.nanosec + 1)
    raise AssertionError(type(value))


FIELDS = [(msg.TYPE, f.name) for msg in sample_messages() for f in dataclasses.fields(msg)
          if f.name != 'auth_tag']


@pytest.mark.parametrize('type_name,name', FIELDS)
def test_tampering_any_single_field_is_detected(type_name, name):
    # Prepare
    msg = next(x for x in sample_messages() if x.TYPE == type_name)
    auth.sign(msg, KEY, 100)
    verifier = auth.Verifier(KEY)
    forged = copy.deepcopy(msg)
    setattr(forged, name, _tampered(getattr(forged, name)))
    # Execute
    reason = verifier.check(forged)
    # Assert
    assert reason == 'bad_tag'
    assert verifier.check(msg) is None       # the genuine one still passes afterwards
    assert verifier.rejects['bad_tag'] == 1 and verifier.accepted == 1


def test_every_message_type_passes_and_types_are_not_interchangeable():
    # Prepare
    verifier = auth.Verifier(KEY)
    msgs = [auth.sign(x, KEY, 5) for x in sample_messages()]
    # Execute
    reasons = [verifier.check(x) for x in msgs]
    # Assert
    assert reasons == [None] * len(msgs)
    assert len({x.auth_tag for x in msgs}) == len(msgs)
    assert all(len(x.auth_tag) == auth.TAG_BYTES for x in msgs)


def test_tag_is_the_same_after_wire_dtypes_and_python_scalars():
    # Prepare: a sender with int64 arrays and numpy scalars; the receiver gets wire dtypes
    loose = m.RowChunk(transfer_id=np.int64(3), seq=0, sender=1, receiver=-1, kind=0, clock=2,
                       row_ranges=np.array([0, 4], dtype=np.int64), payload=bytearray(b'ab'))
    strict = m.RowChunk(transfer_id=3, seq=0, sender=1, receiver=-1, kind=0, clock=2,
                        row_ranges=np.array([0, 4], dtype=np.uint32), payload=b'ab')
    # Execute
    auth.sign(loose, KEY, 9)
    strict.auth_seq, strict.auth_tag = 9, loose.auth_tag
    # Assert
    assert auth.Verifier(KEY).check(strict) is None


def test_replay_is_rejected_and_reordering_within_the_window_accepted():
    # Prepare
    verifier = auth.Verifier(KEY, window=64)
    signer = auth.Signer(KEY, first_seq=1)
    msgs = [signer.sign(m.TrainStatus(node=1, stamp=float(i))) for i in range(200)]
    order = list(range(100))
    order[10:20] = reversed(order[10:20])            # reordered inside the window
    # Execute
    first = [verifier.check(msgs[i]) for i in order]
    replays = [verifier.check(msgs[i]) for i in (99, 50, 40)]
    old = verifier.check(msgs[30])   # seq 31 vs top 100 with window 64: replayed AND too old
    jump = verifier.check(msgs[199])
    stale = verifier.check(msgs[100])
    # Assert
    assert first == [None] * 100
    assert replays == ['replay'] * 3
    assert old == 'too_old'
    assert jump is None
    assert stale == 'too_old'    # 100 behind 200 with a 64-wide window
    assert verifier.rejects == {'unauthenticated': 0, 'bad_tag': 0, 'replay': 3,
                                'too_old': 2, 'malformed': 0}
    assert verifier.accepted == 101


def test_missing_tag_other_key_and_counts():
    # Prepare
    verifier = auth.Verifier(KEY)
    plain = m.TrainStatus(node=1, stamp=1.0)
    other = auth.sign(m.TrainStatus(node=1, stamp=1.0), OTHER, 1)
    seq_only = m.TrainStatus(node=1, stamp=1.0, auth_seq=3)
    short = auth.sign(m.TrainStatus(node=1, stamp=1.0), KEY, 4)
    short.auth_tag = short.auth_tag[:8]
    bad_seq = auth.sign(m.TrainStatus(node=1, stamp=1.0), KEY, 5)
    bad_seq.auth_seq = 'x'
    # Execute
    reasons = [verifier.check(x) for x in (plain, other, seq_only, short, bad_seq)]
    # Assert
    assert reasons == ['unauthenticated', 'bad_tag', 'unauthenticated', 'bad_tag', 'malformed']
    assert verifier.rejected == 5 and verifier.accepted == 0
    assert auth.Verifier(None).check(plain) is None     # no key configured: no checks


def test_windows_are_per_sender_incarnation_and_type():
    # Prepare
    verifier = auth.Verifier(KEY)
    a = auth.sign(m.TrainStatus(node=1, stamp=1.0, incarnation=1), KEY, 50)
    b = auth.sign(m.TrainStatus(node=2, stamp=1.0, incarnation=1), KEY, 50)
    c = auth.sign(m.TrainStatus(node=1, stamp=1.0, incarnation=2), KEY, 50)
    d = auth.sign(m.LinkStats(node=1, interface='x', stamp=1.0, incarnation=1), KEY, 50)
    # Execute / Assert
    assert [verifier.check(x) for x in (a, b, c, d)] == [None] * 4
    assert [verifier.check(x) for x in (a, b, c, d)] == ['replay'] * 4


def test_signer_copies_and_a_later_start_is_not_a_replay():
    # Prepare
    first = auth.Signer(KEY, first_seq=1000)
    msg = m.TrainStatus(node=1, stamp=1.0)
    # Execute
    signed = first.sign(msg)
    second = auth.Signer(KEY, first_seq=5000)       # the restarted node (AuthBus: clock us)
    later = second.sign(m.TrainStatus(node=1, stamp=1.0))
    # Assert
    assert msg.auth_tag == b'' and msg.auth_seq == 0        # caller's object untouched
    assert (signed.auth_seq, later.auth_seq) == (1000, 5000)
    with pytest.raises(ValueError):
        auth.Signer(KEY, first_seq=0)
    verifier = auth.Verifier(KEY)
    assert verifier.check(signed) is None and verifier.check(later) is None


def test_key_never_appears_in_repr_or_errors(tmp_path):
    # Prepare
    text = fleet_key.generate_key_text()
    key = auth.parse_key(text)
    secret_hex = text.lower()
    # Execute
    shown = [repr(key), str(key), repr(auth.Signer(key)), repr(auth.Verifier(key))]
    short = 'ab' * 10
    with pytest.raises(auth.FleetKeyError) as err:
        auth.parse_key(short)
    # Assert
    assert all(secret_hex not in s and secret_hex[:16] not in s for s in shown)
    assert short not in str(err.value)
    with pytest.raises(TypeError):
        copy.copy(key)


def test_key_sources(tmp_path):
    # Prepare
    path = tmp_path / 'fleet.key'
    key = fleet_key.write_key_file(path)
    loose = tmp_path / 'loose.key'
    loose.write_text(fleet_key.generate_key_text())
    os.chmod(loose, 0o644)
    # Execute
    from_file = fleet_key.load_fleet_key(str(path), environ={})
    from_file_env = fleet_key.load_fleet_key(environ={fleet_key.KEY_FILE_ENV: str(path)})
    from_env = fleet_key.load_fleet_key(environ={fleet_key.KEY_ENV: path.read_text()})
    passphrase = 'a passphrase of at least 32 chars!'
    raw_text = fleet_key.load_fleet_key(environ={fleet_key.KEY_ENV: passphrase})
    # Assert
    assert (os.stat(path).st_mode & 0o777) == 0o600
    assert from_file == key == from_file_env == from_env
    assert raw_text is not None and raw_text != key
    assert fleet_key.load_fleet_key(environ={}) is None
    with pytest.raises(auth.FleetKeyError, match='chmod 600'):
        fleet_key.load_fleet_key(str(loose), environ={})
    with pytest.raises(auth.FleetKeyError, match='cannot read'):
        fleet_key.load_fleet_key(str(tmp_path / 'missing'), environ={})
    with pytest.raises(FileExistsError):
        fleet_key.write_key_file(path)


HEX64 = 'ab' * 32


@pytest.mark.parametrize('text', [HEX64, HEX64.upper(), f'\ufeff{HEX64}', f'{HEX64}\r\n',
                                  f'\ufeff{HEX64}\r\n', f'  {HEX64}\n'.encode(),
                                  b'\xef\xbb\xbf' + HEX64.encode() + b'\r\n',
                                  # pairs split by whitespace: read as hex before, and now
                                  ' '.join([HEX64[:32], HEX64[32:]]),
                                  HEX64[:60] + '\n' + HEX64[60:] + '\n',        # xxd -p
                                  ' '.join(HEX64[i:i + 2] for i in range(0, 64, 2))])
def test_a_hex_key_reads_the_same_with_a_bom_crlf_or_spaces(text):
    # a BOM in front made the text non-hex: it was taken raw, another key (all bad_tag)
    assert auth.parse_key(text) == auth.FleetKey(bytes.fromhex(HEX64))


@pytest.mark.parametrize('text, problem', [
    (HEX64[:-1], 'malformed hex key: odd number of hex digits (63)'),
    ('ab' * 24, 'fleet key too short (24 bytes from 48 hex digits, need 32 bytes = 64 hex '
                'digits)'),
    ('0x' + HEX64, 'malformed hex key: it starts with 0x'),
    (HEX64[:31] + ' ' + HEX64[31:], 'malformed hex key: hex digits split by spaces'),
    (HEX64[:31] + '\n' + HEX64[31:], 'malformed hex key: hex digits split by spaces'),
    (':'.join(HEX64[i:i + 2] for i in range(0, 64, 2)), 'malformed hex key: hex digits split'),
    (HEX64[:20] + 'O' + HEX64[21:], 'malformed hex key: 1 character(s) that are not hex '
                                    'digits among 64'),
])
def test_a_damaged_or_short_hex_key_is_refused_in_one_line(text, problem):
    # each was read as raw bytes before (or, 48 digits, refused without saying why): a key
    # that lost a digit, or a 32-byte key with a pair split, would differ between robots
    with pytest.raises(auth.FleetKeyError) as err:
        auth.parse_key(text, 'fleet key file k')
    message = str(err.value)
    assert message.startswith('fleet key file k: ' + problem), message
    assert '\n' not in message and HEX64[:16] not in message


def test_text_that_is_not_hex_is_still_a_raw_key():
    passphrase = 'a passphrase of at least 32 chars!'
    assert auth.parse_key(passphrase) == auth.FleetKey(passphrase.encode())
    assert auth.parse_key('\ufeff' + passphrase + '\r\n') == auth.FleetKey(passphrase.encode())
    uuid = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-extra'       # hex and '-', not 64 digits
    assert auth.parse_key(uuid) == auth.FleetKey(uuid.encode())
    with pytest.raises(auth.FleetKeyError, match=r'too short \(31 bytes, need 32\)'):
        auth.parse_key('x' * 31)


@pytest.mark.parametrize('stamp', [m.Time(sec=2 ** 31, nanosec=0), m.Time(sec=-2 ** 31 - 1),
                                   m.Time(sec=0, nanosec=-1), m.Time(sec=0, nanosec=2 ** 32)])
def test_a_stamp_out_of_range_is_malformed_not_an_exception(stamp):
    # struct.error escaped the verifier (and its bus's receive loop) before
    signed = auth.sign(m.LinkStats(node=1, interface='x', stamp=m.Time(sec=5)), KEY, 9)
    signed.stamp = stamp
    verifier = auth.Verifier(KEY)
    assert verifier.check(signed) == 'malformed'
    assert verifier.rejects['malformed'] == 1
    with pytest.raises(ValueError, match=r'^LinkStats\.stamp cannot be encoded: sec=.* out of '
                                         r'range \(int32 sec, uint32 nanosec\)$'):
        auth.sign(m.LinkStats(node=1, interface='x', stamp=stamp), KEY, 10)


def test_a_key_file_larger_than_4_kib_is_refused_not_cut(tmp_path):
    path = tmp_path / 'big.key'
    path.write_text(HEX64 + '\n' + '#' * 4096)
    os.chmod(path, 0o600)
    with pytest.raises(auth.FleetKeyError) as err:
        fleet_key.read_key_file(path)
    assert str(err.value) == (f'fleet key file {path} is larger than 4096 bytes; a key file '
                              'holds one key (64 hex digits)')
    path.write_text(HEX64 + ' ' * (4096 - 64))                # 4096 bytes exactly: fine
    assert fleet_key.read_key_file(path) == auth.FleetKey(bytes.fromhex(HEX64))


def test_the_mode_checked_is_that_of_the_file_opened(tmp_path, monkeypatch):
    # stat, then open: a file swapped in between was read unchecked; now the opened file's
    # own mode (fstat) is what counts
    import builtins
    path = tmp_path / 'k.key'
    path.write_text(HEX64)
    os.chmod(path, 0o600)
    loose = tmp_path / 'loose.key'
    loose.write_text('cd' * 32)
    os.chmod(loose, 0o644)

    def swapping_open(file, *args, **kwargs):
        """Open ``file`` after another user's file has taken its place (the race)."""
        os.replace(loose, path)
        return builtins.open(file, *args, **kwargs)
    monkeypatch.setattr(fleet_key, 'open', swapping_open, raising=False)
    with pytest.raises(auth.FleetKeyError, match='mode 644.*chmod 600'):
        fleet_key.read_key_file(path)


def test_a_failed_key_write_leaves_no_file_and_a_retry_works(tmp_path, monkeypatch):
    path = tmp_path / 'fleet.key'
    synced = []

    def full_disk(fd):
        """Fail like fsync on a full disk."""
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(fleet_key.os, 'fsync', full_disk)
    with pytest.raises(OSError, match='No space left'):
        fleet_key.write_key_file(path)
    assert not path.exists()                         # before: an empty file, 'File exists'
    monkeypatch.setattr(fleet_key.os, 'fsync', synced.append)
    key = fleet_key.write_key_file(path)
    assert len(synced) == 2 and fleet_key.read_key_file(path) == key   # the key, its folder


def _documented_plan() -> dict:
    """Read docs/security.md's field table: type -> [(name, kind byte, dtype or None)]."""
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parent.parent / 'docs' / 'security.md').read_text()
    plan = {}
    for type_name, cells in re.findall(r'^\| `(\w+)` \| (`.+) \|$', text, re.M):
        plan[type_name] = [(name, kind, dtype or None, 'only when not 0' in what)
                           for name, kind, what, dtype in re.findall(
                               r'`(\w+)` (\w) \(((?:(\w+) array)?[^)]*)\)', cells)]
    return plan


def _documented_tag(msg, secret: bytes) -> bytes:
    """Compute a tag as docs/security.md's words say, from its table (not from auth.py)."""
    import hashlib
    import hmac
    import struct
    digest = hmac.new(secret, b'rog-auth-1\0' + msg.TYPE.encode() + b'\0', hashlib.sha256)
    for name, kind, dtype, if_set in _documented_plan()[msg.TYPE]:
        value = getattr(msg, name)
        if if_set and not value:
            continue
        if kind == 'i':
            data = int(value).to_bytes(int(value).bit_length() // 8 + 1, 'little', signed=True)
        elif kind == 'f':
            data = struct.pack('<d', float(value))
        elif kind == 'b':
            data = b'\1' if value else b'\0'
        elif kind == 's':
            data = value.encode('utf-8')
        elif kind == 'y':
            data = bytes(value)
        elif kind == 't':
            data = struct.pack('<iI', value.sec, value.nanosec)
        else:
            data = np.asarray(value, dtype=np.dtype(dtype).newbyteorder('<')).tobytes()
        digest.update(name.encode() + b'\0' + kind.encode() + struct.pack('<Q', len(data)))
        digest.update(data)
    return digest.digest()[:16]


def test_the_documented_encoding_gives_the_tags_the_nodes_compute():
    # a client written from the docs got bad_tag on every message: the docs said "declaration
    # order", meaning the Python classes', and never listed the fields, names or kind bytes
    from pathlib import Path
    docs = (Path(__file__).resolve().parent.parent / 'docs' / 'security.md').read_text()
    assert auth.encoding_reference() in docs
    secret = bytes(range(32))
    for msg in sample_messages():
        signed = auth.sign(copy.deepcopy(msg), auth.FleetKey(secret), 4242)
        assert _documented_tag(signed, secret) == signed.auth_tag, msg.TYPE


def test_a_whole_versions_copy_keeps_the_tag_it_had_before_parts():
    # part and parts are hashed only when not 0: a whole copy (both 0) is tagged as the
    # release before parts tagged it (this tag computed there), so its robots check it
    msg = next(x for x in sample_messages() if x.TYPE == 'RowVersions')
    msg.part = msg.parts = 0
    msg.schema_version = m.SCHEMA_VERSION
    signed = auth.sign(msg, auth.FleetKey(bytes(range(32))), 4242)
    assert signed.auth_tag.hex() == '0ef768b64a519311a2bbf81b0e3abfcc'
    assert _documented_tag(signed, bytes(range(32))) == signed.auth_tag
