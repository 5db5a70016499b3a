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
Write-ahead journal of a push server's engine inputs between its checkpoints.

Why: with ``--checkpoint-every 1`` a push server wrote its whole state (a model, AdaComp's
per-robot counters: 4 P (N + 2) bytes) before every answer; with K > 1 a crash lost up to K
pushes answered. The journal keeps what the engine took since the last checkpoint, each
record appended and fsynced before the answer leaves (the push's own bytes), so a restore
(the checkpoint, then the journal replayed through the same engine code) loses no answered
push whatever K is. The file handling lives here (node layer); a record is an engine input
(``ServerAdapter``: a message the transfers handed the engine with its time, a run taken
back, a stop order repeated), never the engine's state.

File ``DIR/server.journal``: records ``MAGIC, u32 body length, u32 crc32(body), body``. The
first is the header (JSON: ``format``, ``epoch``, ``fleet``): ``epoch`` names the checkpoint
the records follow (``ServerAdapter.state_dict``'s ``journal_epoch``; 0: none, a fresh run),
``fleet`` the system, robots and parameters the records are for. A checkpoint replaces the
file atomically with a header of its own epoch (``reset``). A last record cut short (a crash
mid-append: its answer never left) is dropped with a note; any other damage, or another
fleet's journal, is refused naming the file, with nothing changed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import time
import zlib

import numpy as np
from rog_ros.atomic import atomic_write_bytes
from rog_ros.nodes.driver import StateWriteError
from rog_ros.nodes.durable import StateError
from rog_ros.protocol import messages

JOURNAL_FILE = 'server.journal'
"""The journal's name in the server's ``--state-dir``, beside ``server.pt``."""
FORMAT = 1
MAGIC = b'RJ'
_FRAME = struct.Struct('<2sII')
_OP = struct.Struct('<Bd')
_LEN = struct.Struct('<Q')

OP_MESSAGE = 1      # a message the transfers handed the engine (a push), at ``now``
OP_REVIVE = 2       # a run taken back (``engine.revive(worker, run)``)
OP_STOP_AGAIN = 3   # a stop order sent again (``stops_repeated``)
OP_RESTORED = 4     # the server was restored here: the records after it met a restored engine


class JournalError(StateError):
    """A journal file cannot be used (damaged, of another fleet or of another checkpoint)."""


def _fix(path: str) -> str:
    """Return what to do about an unusable journal (why: one line that names the fix)."""
    return (f'move the whole state directory {os.path.dirname(os.path.abspath(path))} away '
            'to start the run afresh (the checkpoint without its journal would lose the '
            'pushes answered since it)')


def encode_message(msg) -> list:
    """
    Return ``msg`` (a dataclass of ``rog_ros.protocol.messages``) as a list of byte pieces.

    Scalars in a JSON head (Python ints of any size, floats exactly: ``repr``), arrays and
    bytes after it raw (no copy of a push's payload). Why not pickle: a journal read back
    must not be able to run code, as the state files cannot (``weights_only``).
    """
    head, blobs = {'type': type(msg).TYPE}, []
    for f in dataclasses.fields(msg):
        v = getattr(msg, f.name)
        if isinstance(v, np.ndarray):
            a = np.ascontiguousarray(v)
            head[f.name] = ['nd', a.dtype.str, int(a.size)]
            blobs.append(memoryview(a).cast('B'))
        elif isinstance(v, (bytes, bytearray, memoryview)):
            head[f.name] = ['b']
            blobs.append(memoryview(v).cast('B'))
        else:
            head[f.name] = v
    js = json.dumps(head).encode()
    out = [_LEN.pack(len(js)), js]
    for b in blobs:
        out += [_LEN.pack(b.nbytes), b]
    return out


def decode_message(body: memoryview):
    """
    Return the message ``encode_message`` wrote (ValueError if malformed).

    Its arrays and bytes are views of ``body`` (a push's payload is a memoryview, as the
    transfers hand it to the engine live): a replayed push of the 37.9 MB model cost two
    copies more (``bytes`` of the slice, then the array's ``copy``). ``body`` writable (a
    bytearray's view, ``PushJournal.inputs``) gives writable arrays, as live.
    """
    (n,), pos = _LEN.unpack_from(body, 0), _LEN.size
    head = json.loads(bytes(body[pos:pos + n]))
    pos += n
    cls = getattr(messages, str(head.pop('type', '')), None)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ValueError('a message of no known type')
    kw = {}
    for name, v in head.items():
        if isinstance(v, list) and v and v[0] in ('nd', 'b'):
            (size,) = _LEN.unpack_from(body, pos)
            raw = body[pos + _LEN.size:pos + _LEN.size + size]
            if raw.nbytes != size:
                raise ValueError('a message cut short')
            pos += _LEN.size + size
            kw[name] = raw if v[0] == 'b' else np.frombuffer(raw, dtype=v[1])
        else:
            kw[name] = v
    return cls(**kw)


def value_pieces(value) -> list:
    """Return a small input's record body (``OP_REVIVE``'s pair, ``OP_STOP_AGAIN``'s robot)."""
    return [json.dumps(value).encode()]


class PushJournal:
    """
    One push server's journal file: read and checked at ``read``, appended, reset.

    ``fleet``: plain values that name the fleet the records are for (system, robots,
    parameters); a journal of another is refused. ``appends``, ``append_s`` and
    ``append_bytes`` measure what it costs; ``dropped`` is the note of a torn last record.
    """

    def __init__(self, path: str, fleet: dict):
        self.path = os.fspath(path)
        self.fleet = dict(fleet)
        self.epoch = 0
        self.records = []          # (offset, length) of each record's body after the header
        self.dropped = None        # a note: the torn last record dropped at ``read``
        self.appends = 0
        self.append_s = 0.0
        self.append_bytes = 0
        self._f = None
        self.found = False         # ``read`` found a journal (else: written at the first append)

    # ------------------------------------------------------------------ reading
    def read(self) -> None:
        """
        Read and check the journal (none: an empty one of epoch 0, written at the first append).

        Every record's frame and checksum is checked before anything is replayed, so a bad
        file is refused with nothing changed (``JournalError`` naming it). A last record cut
        short (its length past the end, or its checksum wrong: a crash mid-append, whose
        answer never left) is cut off the file and noted in ``dropped``.

        Why not written at once when there is none: the checkpoint beside it is loaded after
        this, and one of another fleet (a Rog run's, another push system's from before the
        journal) is refused with the folder as it was.
        """
        self.found = os.path.exists(self.path)
        if not self.found:
            self.epoch, self.records = 0, []
            return
        try:
            with open(self.path, 'rb') as f:
                size = os.fstat(f.fileno()).st_size
                frames, end, torn, first = self._frames(f, size)
        except OSError as err:
            raise JournalError(f'journal {self.path} is unreadable ({err.strerror or err}); '
                               f'{_fix(self.path)}') from None
        if not frames:
            raise JournalError(f'journal {self.path} has no header (not a push server '
                               f'journal); {_fix(self.path)}')
        try:
            head = json.loads(first)
            epoch, fleet = int(head['epoch']), head['fleet']
            ok = head.get('format') == FORMAT
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            raise JournalError(f'journal {self.path} has an unknown format; {_fix(self.path)}')
        if fleet != self.fleet:
            raise JournalError(f'journal {self.path} is of another fleet ({fleet}; this one: '
                               f'{self.fleet}); {_fix(self.path)}')
        self.epoch = epoch
        self.records = frames[1:]
        if torn:
            self.dropped = (f'journal {self.path}: dropped a last record cut short at byte '
                            f'{end} of {size} (a crash while it was written; its answer '
                            'never left)')
            with open(self.path, 'r+b') as f:
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
        self._f = open(self.path, 'ab')

    def _frames(self, f, size: int) -> tuple:
        """
        Return ``([(body offset, length), ...], end of the last whole record, torn, header)``.

        One record in memory at a time (a journal of K pushes of a large model is K models).
        Why torn or refused: a damaged record before the last is no crash mid-append:
        refused. A tail of zeros where a record should start is one (the file's size
        reached the disk, its bytes not).
        """
        frames, pos, first = [], 0, b''
        while pos < size:
            last_frame = pos + _FRAME.size
            if last_frame > size:
                return frames, pos, True, first
            f.seek(pos)
            magic, n, crc = _FRAME.unpack(f.read(_FRAME.size))
            body_end = last_frame + n
            if magic != MAGIC:
                if self._zeros(f, pos):
                    return frames, pos, True, first   # (a size grown, its bytes unwritten)
                raise JournalError(f'journal {self.path} is damaged at byte {pos} (no record '
                                   f'starts there); {_fix(self.path)}')
            if body_end > size:
                return frames, pos, True, first
            body = f.read(n)
            if zlib.crc32(body) != crc:
                if body_end == size:
                    return frames, pos, True, first
                raise JournalError(f'journal {self.path} is damaged at byte {pos} (a checksum '
                                   f'that does not match); {_fix(self.path)}')
            if not frames:
                first = body
            frames.append((last_frame, n))
            pos = body_end
        return frames, pos, False, first

    @staticmethod
    def _zeros(f, pos: int) -> bool:
        """Tell whether the file holds only zero bytes from ``pos`` on (why: ``_frames``)."""
        f.seek(pos)
        while True:
            block = f.read(1 << 20)
            if not block:
                return True
            if block.strip(b'\0'):
                return False

    def inputs(self):
        """
        Yield each record after the header as ``(op, now, value)``, in the order appended.

        ``value``: the message (OP_MESSAGE), ``(worker, run)`` (OP_REVIVE), the robot
        (OP_STOP_AGAIN), None (OP_RESTORED). Read one at a time (a journal of K pushes of a
        large model is not held in memory at once); frames are checked again.
        """
        if not self.records:
            return
        with open(self.path, 'rb') as f:
            for off, n in self.records:
                f.seek(off)
                body = memoryview(bytearray(n))     # (writable: the message's arrays view it)
                if f.readinto(body) != n:
                    raise JournalError(f'journal {self.path} changed while it was read; '
                                       f'{_fix(self.path)}')
                op, now = _OP.unpack_from(body, 0)
                rest = body[_OP.size:]
                if op == OP_MESSAGE:
                    yield op, now, decode_message(rest)
                elif op == OP_REVIVE:
                    w, run = json.loads(bytes(rest))
                    yield op, now, (int(w), int(run))
                elif op == OP_STOP_AGAIN:
                    yield op, now, int(json.loads(bytes(rest)))
                elif op == OP_RESTORED:
                    yield op, now, None
                else:
                    raise JournalError(f'journal {self.path}: a record of unknown kind {op}; '
                                       f'{_fix(self.path)}')

    # ------------------------------------------------------------------ writing
    def append(self, op: int, now: float, pieces: list) -> None:
        """
        Append one record and fsync it: on disk before the answer it precedes leaves.

        Why fsync: the checkpoint path fsyncs (``atomic_write_with``); a record only in the
        page cache would be lost with a power cut while its answer was out.
        """
        self.append_all([(op, now, pieces)])

    def append_all(self, records) -> None:
        """
        Append ``records`` (``(op, now, pieces)`` each), in order, then fsync once.

        Why one fsync: the inputs of one message (a run taken back, the push, a stop order
        sent again) precede one answer; a record cut short by a crash is dropped at ``read``,
        and those after it were not synced either (their answer never left).
        """
        if not records:
            return
        t0 = time.perf_counter()
        nbytes = 0
        try:
            if self._f is None:       # (none found at ``read``: written now, header first)
                self._write_header(self.epoch)
                self._f = open(self.path, 'ab')
            f = self._f
            for op, now, pieces in records:
                pieces = [_OP.pack(op, float(now))] + list(pieces)
                crc, n = 0, 0
                for p in pieces:
                    crc = zlib.crc32(p, crc)
                    n += len(p) if isinstance(p, bytes) else memoryview(p).nbytes
                f.write(_FRAME.pack(MAGIC, n, crc))
                for p in pieces:
                    f.write(p)
                nbytes += n + _FRAME.size
            f.flush()
            os.fsync(f.fileno())
        except OSError as err:
            raise StateWriteError(
                f'cannot append to the journal {self.path}: {err.strerror or err}; free space '
                'there or give another --state-dir (the checkpoint and the records before '
                'this one are kept, and the same command resumes from them)') from err
        self.appends += len(records)
        self.append_bytes += nbytes
        self.append_s += time.perf_counter() - t0

    def append_message(self, msg, now: float) -> None:
        """Append a message the engine took at ``now`` (``OP_MESSAGE``)."""
        self.append(OP_MESSAGE, now, encode_message(msg))

    def append_value(self, op: int, now: float, value) -> None:
        """Append a small input (``OP_REVIVE``'s pair, ``OP_STOP_AGAIN``'s robot) as JSON."""
        self.append(op, now, value_pieces(value))

    def reset(self, epoch: int) -> None:
        """
        Replace the journal by an empty one following checkpoint ``epoch``, atomically.

        Called once the checkpoint is on disk: a crash before the rename leaves the old
        journal, whose epoch (older than the checkpoint's) says its records are in it.
        A full disk is ``StateWriteError`` (the node stops, naming the fix): an OSError was
        taken for a bad message by the driver, whose answer it dropped, and the server went
        on with its journal closed. The next append writes the header if this could not.
        """
        f, self._f = self._f, None
        if f is not None:
            f.close()
        self.epoch, self.records = int(epoch), []
        try:
            self._write_header(int(epoch))
            self._f = open(self.path, 'ab')
        except OSError as err:
            raise StateWriteError(
                f'cannot empty the journal {self.path} after checkpoint {epoch}: '
                f'{err.strerror or err}; free space there or give another --state-dir (the '
                'checkpoint is on disk, and the same command resumes from it)') from err

    def _write_header(self, epoch: int) -> None:
        """Write a journal holding only its header (temp file, fsync, rename)."""
        body = json.dumps({'format': FORMAT, 'epoch': int(epoch),
                           'fleet': self.fleet}).encode()
        atomic_write_bytes(self.path, _FRAME.pack(MAGIC, len(body), zlib.crc32(body)) + body)
        self.epoch = int(epoch)
        self.records = []

    def close(self) -> None:
        """Close the file (idempotent)."""
        f, self._f = self._f, None
        if f is not None:
            f.close()

    def stats(self) -> dict:
        """Return the appends, their mean cost in milliseconds and the bytes written."""
        return {'appends': self.appends, 'append_bytes': self.append_bytes,
                'append_ms_mean': 1e3 * self.append_s / self.appends if self.appends else 0.0}


__all__ = ['JOURNAL_FILE', 'JournalError', 'OP_MESSAGE', 'OP_RESTORED', 'OP_REVIVE',
           'OP_STOP_AGAIN', 'PushJournal', 'decode_message', 'encode_message', 'value_pieces']
