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
file atomically with a header of its own epoch (``reset``). A record's body starts with its
kind, its time and (format 2) ``synced``: the file's size when the fsync that covers it
began, every byte before it on disk, its answers out. A damaged record that no record after
it shows synced (a crash mid-append: none of the records from it on had its answer sent) is
dropped with those after it, with a note; a damaged record that a later one shows synced
(its answer may have left), or another fleet's journal, is refused naming the file, with
nothing changed. Format 3 appends a mark (``OP_SYNCED``, 27 bytes, not fsynced) after each
batch once its fsync returned, before any answer leaves: a damaged record that a mark after
it covers was on disk whole when its answer may have left (damage, not a crash mid-append),
and is refused though no batch came after it (it was dropped as torn: an answered push lost
without a word). The node's evaluation rows go in too (``OP_EVALUATION``): the restored
state includes the model they measured, and the run's ``timeseries.csv`` keeps them. Format
4 journals each evaluation handed to the evaluator too (``OP_EVAL_SUBMITTED``): one still
running at a crash is evaluated again by the restored server, of the model the replay holds
at that record, for the same row.
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
FORMAT = 4
"""The format written. 1 (before 2026-12-07's torn-batch fix): records without ``synced``;
2: without the marks of ``OP_SYNCED``; 3: without ``OP_EVAL_SUBMITTED`` (before 2026-12-08).
All still read (and appended to in their own format until the next checkpoint's header)."""
MAGIC = b'RJ'
_FRAME = struct.Struct('<2sII')
_OPS = {1: struct.Struct('<Bd'), 2: struct.Struct('<BdQ'),    # (kind, time[, synced])
        3: struct.Struct('<BdQ'), 4: struct.Struct('<BdQ')}
MARK_SIZE = _FRAME.size + _OPS[3].size
"""The bytes of one ``OP_SYNCED`` mark (27)."""
_LEN = struct.Struct('<Q')

OP_MESSAGE = 1      # a message the transfers handed the engine (a push), at ``now``
OP_REVIVE = 2       # a run taken back (``engine.revive(worker, run)``)
OP_STOP_AGAIN = 3   # a stop order sent again (``stops_repeated``)
OP_RESTORED = 4     # the server was restored here: the records after it met a restored engine
OP_EVALUATION = 5   # an evaluation the node recorded (a timeseries row: no engine input)
OP_SYNCED = 6       # a mark (format 3): the fsync of the records before it returned
OP_EVAL_SUBMITTED = 7   # an evaluation handed to the evaluator (format 4): its row is owed


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


def _json_plain(v):
    """Return ``v`` (a numpy array or scalar of a run record) as plain JSON values."""
    if isinstance(v, (np.ndarray, np.generic)):
        return v.tolist()
    raise TypeError(f'{type(v).__name__} is not JSON serializable')


def value_pieces(value) -> list:
    """Return a small input's record body (``OP_REVIVE``'s pair, ``OP_STOP_AGAIN``'s robot)."""
    return [json.dumps(value).encode()]


class PushJournal:
    """
    One push server's journal file: read and checked at ``read``, appended, reset.

    ``fleet``: plain values that name the fleet the records are for (system, robots,
    parameters); a journal of another is refused. ``appends``, ``append_s`` and
    ``append_bytes`` measure what it costs; ``dropped`` notes the torn records ``read`` cut.
    """

    def __init__(self, path: str, fleet: dict):
        self.path = os.fspath(path)
        self.fleet = dict(fleet)
        self.epoch = 0
        self.records = []          # (offset, length) of each record's body after the header
        self.dropped = None        # a note: the torn records dropped at ``read``
        self.dropped_records = 0   # how many (the torn one and those after it)
        # the torn records earlier restores dropped from this file (their ``OP_RESTORED``)
        self.dropped_before = 0
        self._cut = None           # (end, size): the torn bytes the next append cuts off
        self._last_restored = None  # (offset, frame size, body) of the last OP_RESTORED read
        self.format = FORMAT       # the format of the file's header (records appended so)
        self.header = {}           # the header read (``read``)
        # what a fresh run's header (epoch 0) adds: the node's run record (``ServerHooks``)
        self.header_extra = None
        self.appends = 0
        self.append_s = 0.0
        self.append_bytes = 0
        self._f = None
        self._durable = 0          # the file's size at the last fsync that returned
        self.found = False         # ``read`` found a journal (else: written at the first append)

    # ------------------------------------------------------------------ reading
    def read(self) -> None:
        """
        Read and check the journal (none: an empty one of epoch 0, written at the first append).

        Every record's frame and checksum is checked before anything is replayed, so a bad
        file is refused with nothing changed (``JournalError`` naming it). A damaged record
        (cut short, its checksum wrong, zeros, no record at all) that no intact record after
        it shows synced is taken as torn by a crash mid-append: it and every record after it
        were written since the last fsync, so none of their answers left. They are counted
        in ``dropped_records``, noted in ``dropped``, and cut off the file by the next append
        (``append_restored``, which says how many: ``dropped_before`` at the next read).

        Why the rule: one fsync covers the records of one message (``append_all``), and a
        power cut may keep any of that batch's blocks and lose others, so a torn record may
        sit before intact ones; until 2026-12-07 only a last one was dropped and such a
        journal was refused (the server could not start). A record after the damaged one
        whose ``synced`` lies past it was appended after an fsync that covered the damaged
        one: that record's answer may have left, so dropping it could lose an acknowledged
        push; refused instead (the damage is no crash mid-append). So is a damaged record of
        the last batch whose mark (format 3, ``append_all``) is there: its fsync returned.
        Format 1 journals carry no ``synced``: a damaged record before the last is refused
        there, as before. Marks are not records (``records`` leaves them out).

        Why not written at once when there is none: the checkpoint beside it is loaded after
        this, and one of another fleet (a Rog run's, another push system's from before the
        journal) is refused with the folder as it was.
        """
        self.dropped_before, self._last_restored, self._cut = 0, None, None
        self.found = os.path.exists(self.path)
        if not self.found:
            self.epoch, self.records, self.format = 0, [], FORMAT
            return
        try:
            with open(self.path, 'rb') as f:
                size = os.fstat(f.fileno()).st_size
                frames, end, dropped = self._frames(f, size)
        except OSError as err:
            raise JournalError(f'journal {self.path} is unreadable ({err.strerror or err}); '
                               f'{_fix(self.path)}') from None
        self.records = frames[1:]
        if dropped and self._cut_unfinished(end, size):
            dropped = 0         # (a restore killed mid-cut: its ``OP_RESTORED`` counted them)
        if dropped:
            self.dropped_records = dropped
            self.dropped = (f'journal {self.path}: dropped {dropped} record(s) from byte {end} '
                            f'of {size}, the first cut short or damaged (a crash while they '
                            'were written, before their fsync: their answers never left)')
        if self.epoch == 0 and not self.records:
            # (a fresh run's header alone: its server died before its first record was
            # whole. The next start is a new run, whose first record writes the header
            # again with its own run record: appended to this one, a crash of the new run
            # before its first checkpoint resumed it from the dead run's record.)
            if end < size:
                with open(self.path, 'r+b') as f:
                    f.truncate(end)
                    f.flush()
                    os.fsync(f.fileno())
            return
        if end < size:
            # (the torn records, or a torn last mark: cut off by the next append, which
            # writes its record over them first, ``append_restored``: a restore killed
            # before it counts them again, none counted twice, ``dropped_before``)
            self._cut = (end, size)
            return
        self._f = open(self.path, 'ab')
        # (the records read may be a killed server's, never fsynced: on disk before a
        # record appended now says so in its ``synced``)
        os.fsync(self._f.fileno())
        self._durable = self._f.tell()

    def _header(self, body) -> None:
        """Check the header's body and take its epoch and format (``JournalError`` if not)."""
        fmt = None
        try:
            head = json.loads(body)
            epoch, fleet, fmt = int(head['epoch']), head['fleet'], head.get('format')
            ok = fmt in _OPS
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok and isinstance(fmt, int) and fmt > FORMAT:
            # (a newer build's journal: moving the folder away, _fix, would lose its pushes)
            raise JournalError(f'journal {self.path} is of format {fmt}, written by a newer '
                               f'rog_ros (this one reads formats 1 to {FORMAT}): resume the '
                               'run with the rog_ros that wrote it')
        if not ok:
            raise JournalError(f'journal {self.path} has an unknown format; {_fix(self.path)}')
        if fleet != self.fleet:
            raise JournalError(f'journal {self.path} is of another fleet ({fleet}; this one: '
                               f'{self.fleet}); {_fix(self.path)}')
        self.epoch, self.format, self.header = epoch, fmt, head

    def _frames(self, f, size: int) -> tuple:
        """
        Return ``([(body offset, length), ...], end of the records kept, records dropped)``.

        The header is the first frame (checked at once: its format says how a damaged record
        is judged). One record in memory at a time (a journal of K pushes of a large model is
        K models). A damaged record is torn or refused as ``read`` says (``_torn``).
        """
        frames, pos, after_record = [], 0, False
        while pos < size:
            body = self._record_at(f, pos, size)
            if frames and body is not None and len(body) < _OPS[self.format].size:
                # (no record: a magic whose length and checksum a power cut left zeros, which
                # crc32 of no bytes matches; taken whole, its replay failed)
                body = None
            if body is None:
                if not frames:
                    self._no_header(f)
                if after_record and self._torn_mark(f, pos, size):
                    return frames, pos, 0
                return frames, pos, self._torn(f, pos, size)
            if not frames:
                self._header(body)
            after_record = bool(frames) and body[0] != OP_SYNCED   # (a mark follows one)
            if not frames or self.format < 3 or body[0] != OP_SYNCED:
                frames.append((pos + _FRAME.size, len(body)))   # (a mark is no record)
            if frames[1:] and body[0] == OP_RESTORED:
                self._restored_at(pos, body)
            pos += _FRAME.size + len(body)
        if not frames:
            self._no_header(f)
        return frames, pos, 0

    def _restored_at(self, pos: int, body: bytes) -> None:
        """Take the torn records the ``OP_RESTORED`` record at ``pos`` says its restore cut."""
        try:
            cut = json.loads(bytes(body[_OPS[self.format].size:]) or b'{}')
        except ValueError:
            cut = {}
        cut = cut if isinstance(cut, dict) else {}
        self.dropped_before += int(cut.get('dropped', 0))
        self._last_restored = (pos, _FRAME.size + len(body), cut)

    def _cut_unfinished(self, end: int, size: int) -> bool:
        """
        Tell whether the torn bytes at ``end`` are those a restore was cutting when killed.

        ``append_restored`` writes its record over the torn bytes, then truncates the file
        after it: a kill between the two leaves the file of its size then (``cut``) with
        the record (at ``at``, its own offset) right before the rest of the torn bytes,
        which its ``dropped`` counted already.
        """
        last = self._last_restored
        if last is None:
            return False
        pos, n, cut = last
        return pos + n == end and cut.get('at') == pos and cut.get('cut') == size

    def _no_header(self, f) -> None:
        """Refuse a file with no intact header: empty or zeros, or damaged at byte 0."""
        if self._zeros(f, 0):
            raise JournalError(f'journal {self.path} has no header (not a push server '
                               f'journal); {_fix(self.path)}')
        raise JournalError(f'journal {self.path} is damaged at byte 0 (no header starts there: '
                           f'not a push server journal); {_fix(self.path)}')

    @staticmethod
    def _record_at(f, pos: int, size: int):
        """Return the body of the intact record at ``pos`` (None: none there, or damaged)."""
        if pos + _FRAME.size > size:
            return None
        f.seek(pos)
        magic, n, crc = _FRAME.unpack(f.read(_FRAME.size))
        if magic != MAGIC or pos + _FRAME.size + n > size:
            return None
        body = f.read(n)
        return body if zlib.crc32(body) == crc else None

    def _torn(self, f, pos: int, size: int) -> int:
        """
        Return the records dropped from the damaged record at ``pos`` on, or refuse them.

        Format 2, 3: looks for intact records after it (``_later_records``); the first whose
        ``synced`` lies past ``pos`` proves the damaged record was synced (refused): a record
        of a later batch, or (format 3) the mark of its own batch's fsync, which left before
        any answer (the torn never-synced batch has none: dropped). Format 1
        (no ``synced``): torn only if nothing but zeros follows it or it is the last record
        (cut short, or its checksum wrong at the file's end), as before.
        """
        if self.format == 1:
            if not (self._zeros(f, pos) or self._ends_file(f, pos, size)):
                raise JournalError(f'journal {self.path} is damaged at byte {pos} (a record '
                                   'before the last: its checksum does not match or no record '
                                   f'starts there); {_fix(self.path)}')
            return 1
        found = 0
        for at, synced, kind in self._later_records(f, pos, size):
            if kind == OP_SYNCED and synced > pos:
                raise JournalError(
                    f'journal {self.path} is damaged at byte {pos} (its checksum does not match '
                    'or no record starts there) after the fsync of its batch returned (the '
                    f'mark at byte {at} says so): data an answer promised is gone, a push '
                    f'answered may be lost; {_fix(self.path)}')
            if synced > pos:
                raise JournalError(
                    f'journal {self.path} is damaged at byte {pos} (its checksum does not match '
                    f'or no record starts there), and the record at byte {at}, appended after '
                    'an fsync that covered it, says its answer may have left; '
                    f'{_fix(self.path)}')
            found += kind != OP_SYNCED
        return 1 + found

    def _torn_mark(self, f, pos: int, size: int) -> bool:
        """
        Tell whether the file ends at ``pos`` with a torn mark (format 3): no record lost.

        A power cut after a batch's fsync returned may keep part of its mark (not fsynced)
        and zeros for the rest: counted as a dropped record, it said an answer never left
        where none was at stake. The mark at ``pos`` is known byte for byte (its ``synced``
        is ``pos``): the file's bytes from there must each be its own or zero, and a record
        must come before it (``_frames``: a mark follows a batch, never a mark or the header).
        """
        if self.format < 3 or size - pos > MARK_SIZE:
            return False
        body = _OPS[3].pack(OP_SYNCED, 0.0, pos)
        mark = _FRAME.pack(MAGIC, len(body), zlib.crc32(body)) + body
        f.seek(pos)
        rest = f.read(size - pos)
        return all(b in (0, m) for b, m in zip(rest, mark))

    @staticmethod
    def _ends_file(f, pos: int, size: int) -> bool:
        """Tell whether the frame at ``pos`` is cut short or its body ends the file."""
        if pos + _FRAME.size > size:
            return True
        f.seek(pos)
        magic, n, _ = _FRAME.unpack(f.read(_FRAME.size))
        return magic == MAGIC and pos + _FRAME.size + n >= size

    @staticmethod
    def _later_records(f, pos: int, size: int):
        """
        Yield ``(offset, synced, kind)`` of each intact record (format 2, 3) after byte ``pos``.

        Found by their magic at any offset (the damaged record's length cannot be trusted),
        then checked: a body long enough, within the file, of a known kind, its ``synced`` at
        or before it (so a magic in a push's bytes, one per 64 KiB of random data, is almost
        never read whole), then its checksum. A record found is skipped whole; one body in
        memory at a time. Each block is read once and searched for every magic in it (a
        block read again from each magic that was no record read a torn push whose bytes
        hold the magic densely once per magic: 100 MB for a 20 KB record).
        """
        head = _FRAME.size + _OPS[2].size
        at, block = pos + 1, 1 << 20
        while at < size:
            f.seek(at)
            chunk = f.read(block + head - 1)        # (a candidate's head from the block)
            i = chunk.find(MAGIC)
            while 0 <= i < block:
                synced, n, kind = PushJournal._candidate(f, at + i, chunk[i:i + head], size)
                if n:
                    break
                i = chunk.find(MAGIC, i + 1)
            else:
                at += block
                continue
            yield at + i, synced, kind
            at += i + _FRAME.size + n

    @staticmethod
    def _candidate(f, at: int, raw: bytes, size: int) -> tuple:
        """
        Return ``(synced, body length, kind)`` of the intact record at ``at`` (0, 0, 0: none).

        ``raw``: the file's bytes from ``at``, its frame and record head (fewer at the end).
        """
        op = _OPS[2]
        if len(raw) < _FRAME.size + op.size:
            return 0, 0, 0
        _, n, crc = _FRAME.unpack_from(raw, 0)
        kind, _, synced = op.unpack_from(raw, _FRAME.size)
        if not (n >= op.size and at + _FRAME.size + n <= size
                and OP_MESSAGE <= kind <= OP_EVAL_SUBMITTED and synced <= at):
            return 0, 0, 0
        f.seek(at + _FRAME.size)
        return (synced, n, kind) if zlib.crc32(f.read(n)) == crc else (0, 0, 0)

    @staticmethod
    def _zeros(f, pos: int) -> bool:
        """Tell whether the file holds only zero bytes from ``pos`` on (why: ``_torn``)."""
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
        (OP_STOP_AGAIN), None (OP_RESTORED), the row's dict (OP_EVALUATION: no input), the
        evaluation's ``time_s``, ``iteration`` and ``counters`` (OP_EVAL_SUBMITTED: none).
        Read one at a time (a journal of K pushes of a large model is not held in memory at
        once); frames are checked again.
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
                op, now = _OPS[self.format].unpack_from(body, 0)[:2]
                rest = body[_OPS[self.format].size:]
                if op == OP_MESSAGE:
                    yield op, now, decode_message(rest)
                elif op == OP_REVIVE:
                    w, run = json.loads(bytes(rest))
                    yield op, now, (int(w), int(run))
                elif op == OP_STOP_AGAIN:
                    yield op, now, int(json.loads(bytes(rest)))
                elif op == OP_RESTORED:
                    yield op, now, None
                elif op in (OP_EVALUATION, OP_EVAL_SUBMITTED):
                    yield op, now, json.loads(bytes(rest))
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
        sent again) precede one answer. Each record carries ``synced``, the file's size at
        the last fsync that returned: a record of the batch torn by a power cut is dropped at
        ``read`` with those after it (none synced, no answer out), while one that a later
        batch's ``synced`` shows on disk is refused (``_torn``).

        Format 3: once the fsync returned, a mark (``OP_SYNCED``, its ``synced`` the size
        the fsync covered) is appended and handed to the kernel, not fsynced, before the
        answer leaves. Found after a damaged record of the batch, it proves that record was
        on disk whole (refused, not dropped as torn); lost with a power cut, it proves
        nothing, as before. Its cost: one write of 27 bytes, no fsync. The next batch's
        ``synced`` is the size before the mark (the mark itself may not be on disk).
        """
        if not records:
            return
        t0 = time.perf_counter()
        nbytes = 0
        cut, self._cut = self._cut, None
        try:
            if cut is not None:       # (torn bytes at ``read``: written over, then cut off)
                self._f = open(self.path, 'r+b')
                os.fsync(self._f.fileno())      # (the records kept: on disk, ``read``'s)
                self._f.seek(cut[0])
                self._durable = cut[0]
            elif self._f is None:     # (none found at ``read``: written now, header first)
                self._write_header(self.epoch)
                self._f = open(self.path, 'ab')
                self._durable = self._f.tell()
            f = self._f
            synced = self._durable      # (every byte before it is on disk: ``read``'s rule)
            for op, now, pieces in records:
                head = (op, float(now)) + ((synced,) if self.format >= 2 else ())
                pieces = [_OPS[self.format].pack(*head)] + list(pieces)
                crc, n = 0, 0
                for p in pieces:
                    crc = zlib.crc32(p, crc)
                    n += len(p) if isinstance(p, bytes) else memoryview(p).nbytes
                f.write(_FRAME.pack(MAGIC, n, crc))
                for p in pieces:
                    f.write(p)
                nbytes += n + _FRAME.size
            f.flush()
            end = f.tell()
            if cut is not None:
                f.truncate(end)
            os.fsync(f.fileno())
            self._durable = end
            if self.format >= 3:
                body = _OPS[3].pack(OP_SYNCED, 0.0, end)
                f.write(_FRAME.pack(MAGIC, len(body), zlib.crc32(body)) + body)
                f.flush()           # (to the kernel: a killed server's mark stays)
                nbytes += MARK_SIZE
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

    def append_evaluation(self, now: float, row: dict) -> None:
        """
        Append an evaluation row the node is about to record (``OP_EVALUATION``), fsynced.

        Why: the journal restores the model state past the checkpoint, and the rows of the
        evaluations of that state were in memory only (the checkpoint's run record): a
        restored run's ``timeseries.csv`` lacked them. One record an evaluation.
        """
        self.append(OP_EVALUATION, now, value_pieces(row))

    def append_submitted(self, info: dict) -> bool:
        """
        Append an evaluation the node handed its evaluator (``OP_EVAL_SUBMITTED``); True if.

        ``info``: the row's ``time_s``, ``iteration`` and ``counters``. Why: a server killed
        while it ran left no row of it, and the restore evaluated another model at another
        time. Replayed, the record stands where the model it measured is the replayed
        engine's (``ServerAdapter._replay``), and the restored server evaluates that model
        for the same row (until its ``OP_EVALUATION`` says the row was recorded). Not in a
        journal of an older format (read and appended to until the next checkpoint): an
        older build would refuse the record's kind with the wrong fix.
        """
        if self.format < 4:
            return False
        self.append(OP_EVAL_SUBMITTED, float(info['time_s']), value_pieces(info))
        return True

    def append_restored(self) -> None:
        """
        Append ``OP_RESTORED``: the records after it meet a restored engine (``ServerAdapter``).

        Where ``read`` found torn records, the record says how many (``dropped``) and is
        written over them before they are cut off (``cut``: the file's size, ``at``: the
        record's offset): their count is on disk with the cut, so a restore after a second
        crash before the next checkpoint counts each once (``dropped_before``). Until
        2026-12-08 the cut came first and the count lived in memory until a checkpoint.
        """
        if self._cut is None:
            self.append(OP_RESTORED, 0.0, [])
            return
        end, size = self._cut
        cut = {'dropped': int(self.dropped_records), 'at': int(end), 'cut': int(size)}
        self.append(OP_RESTORED, 0.0, value_pieces(cut))

    @property
    def dropped_total(self) -> int:
        """Return the torn records dropped from this file, by this read and the earlier."""
        return self.dropped_before + self.dropped_records

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
            self._durable = self._f.tell()
        except OSError as err:
            raise StateWriteError(
                f'cannot empty the journal {self.path} after checkpoint {epoch}: '
                f'{err.strerror or err}; free space there or give another --state-dir (the '
                'checkpoint is on disk, and the same command resumes from it)') from err

    def _write_header(self, epoch: int) -> None:
        """
        Write a journal holding only its header (temp file, fsync, rename).

        A fresh run's (epoch 0) also holds ``header_extra()``: the run record as of its
        first record (``ServerHooks`` gives it), the one thing a journal replayed with no
        checkpoint beside it lacked to go on with the run's clock, ``timeseries.csv`` and
        ``events.csv`` (they started again at the restart until 2026-12-07).
        """
        head = {'format': FORMAT, 'epoch': int(epoch), 'fleet': self.fleet}
        if int(epoch) == 0 and self.header_extra is not None:
            head.update(self.header_extra())
        body = json.dumps(head, default=_json_plain).encode()
        atomic_write_bytes(self.path, _FRAME.pack(MAGIC, len(body), zlib.crc32(body)) + body)
        self.epoch, self.format, self.header = int(epoch), FORMAT, head
        self.records, self._cut, self.dropped_before = [], None, 0

    def close(self) -> None:
        """Close the file (idempotent)."""
        f, self._f = self._f, None
        if f is not None:
            f.close()

    def stats(self) -> dict:
        """Return the appends, their mean cost in milliseconds and the bytes written."""
        return {'appends': self.appends, 'append_bytes': self.append_bytes,
                'append_ms_mean': 1e3 * self.append_s / self.appends if self.appends else 0.0}


__all__ = ['JOURNAL_FILE', 'JournalError', 'MARK_SIZE', 'OP_EVAL_SUBMITTED', 'OP_EVALUATION',
           'OP_MESSAGE', 'OP_RESTORED', 'OP_REVIVE', 'OP_STOP_AGAIN', 'OP_SYNCED',
           'PushJournal', 'decode_message', 'encode_message', 'value_pieces']
