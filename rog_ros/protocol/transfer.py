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
Row transfers: the sender half (chunking, window, deadline) and the receiver half.

One transfer moves an ordered set of encoded rows from one node to another:

* The sender plans chunks over the rows in priority order, keeps at most ``window`` chunks
  unacknowledged, and stops after the mandatory chunks once the MTA-time deadline has passed;
  then it sends an END chunk carrying the number of data chunks sent. Checking the deadline
  between chunks, with a small window, keeps a stopped transfer from draining a queue of stale
  bytes after its deadline (an artifact mistake, specs/rog_artifact.md 7.2); on a fast link the
  window grows to ~20 ms of data at the measured rate (``window_for_rate``).
* The receiver reassembles chunks (deduplicated by sequence number; late chunks after END are
  dropped) and closes the transfer at END. Its final TransferAck lists exactly the chunks it
  applied. Only that list moves rows from *in flight* to *delivered* on the sender, so a row is
  counted once even when acks are lost (the sender repeats END; the receiver repeats its
  answer), duplicated or late.
"""

from __future__ import annotations

import dataclasses
import math
import operator

import numpy as np
from rog_ros.core.compress.base import RowCodec
from rog_ros.core.packing import ChunkPlan, DEFAULT_CHUNK_BYTES, plan_chunks
from rog_ros.core.rows import RowLayout
from rog_ros.protocol.auth import TAG_BYTES
from rog_ros.protocol.messages import (
    FLAG_END, FLAG_FRAGMENT, ids_from_ranges, MAX_CLOCK, MAX_VERSIONS_PARTS, MessageError,
    ranges_from_sorted, RowChunk, RowVersions, TransferAck, validate_ranges,
    VERSIONS_PARTS_SCHEMA)
import torch

MAX_CHUNKS = 1 << 24
"""Largest chunk sequence number accepted (a transfer of 16 M chunks is far beyond a model)."""


def snapshot_layout(layout: RowLayout) -> RowLayout:
    """
    Return the row layout of rejoin snapshots: ``layout``, with tensor rows if whole-model.

    Same flat order (whole-model only changes what a row is), so a lost snapshot chunk costs
    one tensor row, not the whole model.
    """
    if not layout.whole_model:
        return layout
    return RowLayout(layout.shapes, layout.small_tensor_threshold, whole_model=False)


WINDOW_DRAIN_S = 0.02
"""A window may hold this much time at the measured link rate (more than ``window`` chunks)."""
MAX_WINDOW = 64
MAX_WINDOW_BYTES = 4 << 20
"""
Most payload bytes one transfer keeps unacknowledged, whatever ``window`` x ``chunk_bytes``.

Half of the DDS writer-history mark (8 MiB, ``transport.dds_bus.WRITER_WATERMARKS``), so
that a second transfer to the same robot fits too (``PEER_MAX_WIRE_BYTES`` bounds what they
write together, headers counted): past the mark a reliable write blocks the
sending node's loop, every robot's, for ``publish_timeout_s`` while that robot's link is down.
``window`` 1024 (the setting's top) of 16 KiB chunks was 16 MiB. It bounds the window and,
for a peer that stopped answering, the bytes sent past the last acknowledged chunk
(``OutgoingTransfer.bytes_past_ack``): released window slots send no further window there.
"""
BOUND_END_S = 10.0
"""
Seconds a transfer at its bound waits for an ack from its peer before its END, by default.

DDS's default participant lease: a robot whose link comes back within it is still matched,
its writer kept the chunks and the acks resume, so the transfer goes on (waiting costs
nothing, the bound keeps the writer under its mark); past it DDS may have dropped them and
no ack would ever come. One ``end_timeout_s`` (2 s) ended the transfers of every robot
whose link was down for 4 s, the rest counted as lost. A longer configured lease is passed
to the engines (``lease_s``) and the wait follows it.
"""
WRITER_MARK_BYTES = 8 << 20
"""The DDS writer-history mark (``transport.dds_bus.WRITER_WATERMARKS``: 8MB, Cyclone's MB
is 2**20 bytes): what one robot's chunk writer may hold unacknowledged before a write blocks."""
PEER_END_ROOM = 64 << 10
"""Bytes under the mark kept for ENDs, which go whatever the bound (240 bytes each as Cyclone
counts them, 160 of CDR and one fragment's 80, one per ``end_timeout_s`` and transfer: 273 of
them, 9 minutes of ENDs at 2 s)."""
PEER_MAX_WIRE_BYTES = WRITER_MARK_BYTES - PEER_END_ROOM
"""
Most wire bytes of data chunks, all transfers together, sent to one peer past its last ack.

``MAX_WINDOW_BYTES`` counts one transfer's payload: two transfers at it to one silent robot
(a downlink dropped uncommitted by a JOIN or restart stays in the writer, the next one starts
behind it) held 8 MiB of payload plus their headers, past the mark. ``PeerLink`` counts
every chunk to one robot as it goes on the wire (headers and the auth tag too).
"""


def lease_seconds(lease_s) -> float:
    """
    Return ``lease_s``, the peers' DDS lease in seconds, as a float; refuse one that is not.

    One check for every engine that takes it (ServerEngine, WorkerEngine, PushTransfers,
    OutgoingTransfer): a lease of 0 or NaN would send END at the bound at once, or never.
    Each had a copy of it, one of them worded otherwise, and a lease that is no number
    (``'30'``, None) failed in ``math.isfinite`` with a TypeError naming no setting.
    """
    try:
        value = float(lease_s)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(lease_s, (str, bytes, bool)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f'lease_s must be positive and finite (the DDS LeaseDuration in '
                         f'seconds), got {lease_s!r}')
    return value


WHC_FRAGMENT_BYTES = 1024
"""
DDS fragment size a node counts what a chunk takes in the writer with, by default (bytes).

Cyclone counts each sample in its writer history as its CDR plus 80 bytes per fragment of
``General/FragmentSize`` (``dds_whc.c``, ``whcn_size``): 1344 bytes by default, 1280 in
``config/cyclonedds_wifi.xml``, 60000 on loopback, all counted here as 1 KiB (a little
more than Cyclone counts). A smaller ``FragmentSize`` made the count short by 80 bytes per
fragment of the difference: every node reads it (``connect.transfer_fragment_bytes``) and
gives it to its engine (``ServerEngine``, ``WorkerEngine``, the push systems'
``PushTransfers``: ``fragment_bytes``), whose ``PeerLink`` and ``VersionsLink`` count with
it; one built without it counts 1 KiB fragments.
"""
WHC_SAMPLE_OVERHEAD = 80
"""Bytes Cyclone adds per fragment of a sample in its writer-history count (``dds_whc.c``)."""
MAX_FRAGMENT_BYTES = 65535
"""Largest ``General/FragmentSize`` Cyclone takes (a 16-bit size; ``cyclone_settings``'s too)."""


def fragment_bytes_checked(fragment_bytes) -> int:
    """
    Return ``fragment_bytes``, the DDS fragment size in bytes, as an int; refuse one that is not.

    A whole number in 1..65535, as Cyclone's ``General/FragmentSize`` is: 0 would divide
    the count by zero, a fraction or a string count no fragment Cyclone makes.
    """
    try:
        value = operator.index(fragment_bytes)
    except TypeError:
        value = 0
    if isinstance(fragment_bytes, bool) or not 1 <= value <= MAX_FRAGMENT_BYTES:
        raise ValueError(f'fragment_bytes must be a whole number of bytes in '
                         f'1..{MAX_FRAGMENT_BYTES} (the DDS General/FragmentSize), got '
                         f'{fragment_bytes!r}')
    return int(value)


class PeerLink:
    """
    What one node has sent to one peer on its chunk topic, and how far the peer acknowledged.

    One DDS writer carries every transfer to that peer, reliable and in order: an ack of any
    chunk, of any transfer, means everything written before it left the writer, so the bytes
    the writer may still hold are those written since the highest such position. The
    transfers to one peer share a ``PeerLink`` (``OutgoingTransfer(peer=...)``): none sends a
    data chunk that would put more than ``PEER_MAX_WIRE_BYTES`` there, and ``last_ack_time``
    (an ack of any transfer) tells a transfer at its bound that the peer is alive.

    Except across a restart of the peer (``hold``): the writer drops a sample once every
    matched reader acknowledged it, and Cyclone never counts a reader as unresponsive, so a
    run that crashed keeps its reader matched, and everything written since its last ack in
    the writer, until its lease ends. The new run's acks free nothing before then.

    ``fragment_bytes``: the DDS ``FragmentSize`` the writer's count is made with
    (:func:`wire_bytes`): Cyclone counts 80 bytes per fragment, so a smaller one counts more
    (the engines' ``fragment_bytes``, from the node's configuration).
    """

    def __init__(self, max_wire_bytes: int = PEER_MAX_WIRE_BYTES, keep: int = 8,
                 fragment_bytes: int = WHC_FRAGMENT_BYTES):
        self.max_wire_bytes = int(max_wire_bytes)
        self.fragment_bytes = fragment_bytes_checked(fragment_bytes)
        self.keep = int(keep)           # transfers remembered for their acks (newest)
        self.sent = 0                   # wire bytes written to the peer so far
        self.acked = 0                  # position (in ``sent``) the peer acknowledged
        self.last_ack_time = -math.inf  # an ack of any transfer from the peer
        self.positions: dict[int, np.ndarray] = {}   # transfer id -> its ``wire_end``
        self.held_at: int | None = None   # what a previous run of the peer acknowledged
        self.hold_until = -math.inf       # when that run's lease ends at the latest

    def register(self, transfer_id: int, wire_end: np.ndarray) -> None:
        """
        Remember where a transfer's chunks lie, for its acks (the newest ``keep`` only).

        Only the positions (8 bytes a chunk): a dropped transfer's rows are not kept alive.
        """
        self.positions[int(transfer_id)] = wire_end
        for old in sorted(self.positions)[:max(0, len(self.positions) - self.keep)]:
            del self.positions[old]

    def unacked(self) -> int:
        """Return the wire bytes written to the peer after its last acknowledged position."""
        return self.sent - (self.acked if self.held_at is None else self.held_at)

    def hold(self, until: float) -> None:
        """
        Keep what the peer's previous run did not acknowledge counted until ``until``.

        The peer restarted (a new incarnation spoke): its previous run's reader may stay
        matched until that run's lease ends (``until``: now plus the lease), and the writer
        keeps for it everything written since its last ack, the new run's chunks too.
        """
        if self.held_at is None:
            self.held_at = self.acked
        self.hold_until = max(self.hold_until, float(until))

    def release(self, now: float) -> bool:
        """End a hold whose lease is over; return whether that freed room in the writer."""
        if self.held_at is None or now < self.hold_until:
            return False
        freed, self.held_at = self.acked > self.held_at, None
        return freed

    def wire_bytes(self, chunk: RowChunk) -> int:
        """Return what ``chunk`` takes in the writer's count, with this peer's fragment size."""
        return wire_bytes(chunk, self.fragment_bytes)

    def fits(self, wire: int) -> bool:
        """Return whether ``wire`` more bytes keep the peer within ``max_wire_bytes``."""
        past = self.unacked()
        return past == 0 or past + int(wire) <= self.max_wire_bytes

    def write(self, wire: int) -> int:
        """Count ``wire`` bytes written to the peer; return the position after them."""
        self.sent += int(wire)
        return self.sent

    def on_ack(self, ack: TransferAck, now: float) -> bool:
        """
        Take an ack from the peer (any transfer, stale ones too); return whether it moved on.

        A per-chunk ack covers everything written up to that chunk; a final ack everything
        up to the transfer's last END. Its time counts whatever it covers: the peer is alive.
        """
        self.last_ack_time = max(self.last_ack_time, float(now))
        where = self.positions.get(int(ack.transfer_id))
        k = int(ack.seq)
        if where is None or not (ack.final or 0 <= k < where.size - 1):
            return False
        pos = int(where[-1] if ack.final else where[k])   # (0: not sent, moves nothing)
        if pos <= self.acked:
            return False
        self.acked = pos
        return self.held_at is None        # (a hold frees it when the old lease ends)


def wire_bytes(chunk: RowChunk, fragment_bytes: int = WHC_FRAGMENT_BYTES) -> int:
    """
    Return what ``chunk`` takes in the DDS writer's history count, with its auth tag.

    Cyclone counts each sample against the mark as its CDR (with its 4-byte header) and 80
    bytes per fragment: XCDR1 of ``msg/RowChunk.msg``, whose fixed fields and alignment take
    76 to 83 bytes more than ``wire_size``, and 13 fragments of a 16 KiB chunk on Wi-Fi
    (1280-byte fragments), counted here with ``fragment_bytes`` (the peer's
    ``PeerLink.fragment_bytes``; 28 fragments of 600 bytes). Counting ``wire_size`` left them
    out: two transfers to a silent robot passed the 8 MiB mark.
    """
    # (the fields of RowChunk.msg, in order)
    return _whc_size(((2, 2), (8, 64), (4, 4 + 4 * len(chunk.row_ranges)), (8, 8),
                      (4, 4 + 4 * len(chunk.tensor_ids)), (4, 4 + 4 * len(chunk.scales)),
                      (4, 4 + len(chunk.payload)), (8, 8), (8, 24),
                      (4, 4 + (len(chunk.auth_tag) or TAG_BYTES))), fragment_bytes)


def _whc_size(fields, fragment_bytes: int) -> int:
    """
    Return Cyclone's writer-history count of a sample whose fields are ``fields``, in order.

    ``fields``: (alignment, size) of each field of the ``.msg`` (a sequence's size with its
    4-byte length): XCDR1 pads each to its alignment, the sample takes a 4-byte header, and
    Cyclone adds 80 bytes per fragment of ``fragment_bytes`` (``whcn_size``). One walk for
    every message a node counts (:func:`wire_bytes`, :func:`versions_wire_bytes`).
    """
    pos = 0
    for align, size in fields:
        pos = -(-pos // align) * align + size
    cdr = 4 + pos
    return cdr + -(-cdr // fragment_bytes) * WHC_SAMPLE_OVERHEAD


VERSIONS_MAX_WIRE_BYTES = WRITER_MARK_BYTES // 4
"""
Most wire bytes of RowVersions written to one robot past the newest copy it is known to hold.

A downlink's RowVersions goes before its END and again before every repeated END (every
``end_timeout_s``, 2 s), on a topic of its own (``w<r>/versions``), whose reliable writer
keeps what a silent robot does not acknowledge until its lease ends: 6 copies in Cyclone's
default 10 s lease, 31 in a 60 s one, and a write that finds it past the 8 MiB mark blocks
the server's loop. With ConvMLP-M's 33,307 rows in as many runs, one copy for 8 robots is
1,436,536 bytes (6: 8,619,216); for 2 robots one is 574,688, and in a 60 s lease the write
at 30 s found 15 (8,620,320). A repeat goes only while it keeps the writer within this bound
(``VersionsLink``); a transfer's first copy always goes. A quarter of the mark: a first copy
written past it, and what a re-matched robot's previous reader may still hold when the count
starts afresh, stay under the mark for copies of up to 2 MiB.
"""


def versions_wire_bytes(msg: RowVersions, fragment_bytes: int = WHC_FRAGMENT_BYTES) -> int:
    """
    Return what RowVersions ``msg`` takes in the DDS writer's history count, with its auth tag.

    Counted as :func:`wire_bytes` counts a chunk (Cyclone's ``whcn_size``): the XCDR1 of
    ``msg/RowVersions.msg`` with its 4-byte header and 80 bytes per fragment. 8 bytes per
    run and 4 per run and worker: ``wire_size`` leaves out the header, the padding and the tag.
    """
    # (the fields of RowVersions.msg, in order)
    return _whc_size(((2, 2), (8, 24), (4, 4 + 4 * len(msg.run_starts)),
                      (4, 4 + 4 * len(msg.run_lengths)), (4, 4 + 4 * len(msg.versions)),
                      (4, 4 + 2 * len(msg.staleness_slack)), (8, 24),
                      (4, 4 + (len(msg.auth_tag) or TAG_BYTES))), fragment_bytes)


VERSIONS_PART_BYTES = VERSIONS_MAX_WIRE_BYTES
"""
Largest RowVersions copy written whole, and the most wire bytes of each part of a larger one.

A copy takes 8 bytes per run and 4 per run and robot, so a large fleet passes the 8 MiB mark
with one copy (ConvMLP-M for 64 robots: 8,804,904 bytes on loopback; for 256: 34.5 MB), and
the next write to a robot that has not acknowledged it blocks the server's loop. Such a copy
goes in parts of at most this many bytes, each written only while the robot's writer stays
within ``VERSIONS_MAX_WIRE_BYTES`` past what it acknowledged (``VersionsLink.send_parts``):
a part at a time per round trip, none past the bound to a silent robot.
"""


def split_versions(msg: RowVersions, max_wire_bytes: int = VERSIONS_PART_BYTES,
                   fragment_bytes: int = WHC_FRAGMENT_BYTES) -> list:
    """
    Return ``[msg]``, or ``msg`` in parts of consecutive runs within ``max_wire_bytes`` each.

    Each part keeps the transfer, the receiver, the fleet size and the slack (the worker
    acts on the parts only once it holds them all, and then as on one copy), and takes
    ``part``/``parts`` and ``VERSIONS_PARTS_SCHEMA``. A part holds at least one run (a bound
    below one run's bytes splits into one run a part) and at most ``MAX_VERSIONS_PARTS``.
    """
    if versions_wire_bytes(msg, fragment_bytes) <= max_wire_bytes:
        return [msg]
    n_runs, n = len(msg.run_starts), int(msg.n_workers)
    fixed = versions_wire_bytes(dataclasses.replace(
        msg, run_starts=msg.run_starts[:0], run_lengths=msg.run_lengths[:0],
        versions=msg.versions[:0]), fragment_bytes)
    per_run = (8 + 4 * n) * (1.0 + WHC_SAMPLE_OVERHEAD / fragment_bytes)
    runs = max(1, int((max_wire_bytes - fixed - WHC_SAMPLE_OVERHEAD) // per_run),
               -(-n_runs // MAX_VERSIONS_PARTS))
    edges = np.arange(0, n_runs, runs)
    if edges.size < 2:
        return [msg]                   # one run past the bound: it cannot be split
    return [dataclasses.replace(
        msg, run_starts=msg.run_starts[a:a + runs], run_lengths=msg.run_lengths[a:a + runs],
        versions=msg.versions[a * n:(a + runs) * n], part=k, parts=int(edges.size),
        schema_version=VERSIONS_PARTS_SCHEMA) for k, a in enumerate(edges.tolist())]


class VersionsLink(PeerLink):
    """
    What the server wrote to one robot on its RowVersions topic, and what the robot holds.

    A robot that closed a downlink (its final ack) held a copy of that downlink's versions,
    and so, the writer being reliable and in order, everything written there before its
    first copy. Repeats of a copy the robot has not acknowledged add nothing while its reader
    stays matched (DDS retransmits the first one), so one goes only within
    ``VERSIONS_MAX_WIRE_BYTES`` past that. A reader matched anew after the robot's lease
    ended gets nothing written before (VOLATILE): a robot heard after a lease of silence
    may need the next copy, and the count starts afresh (``heard``). So does a robot heard a
    lease after the newest copy: a reader that lost the copies (matched anew within the
    lease: a restart, a shorter lease of its own, discovery after a short outage) would
    otherwise hold its END for ever (it closes nothing without them, and its pokes keep it
    heard); but not once what was written since the robot's last ack (of anything: it is
    reached) fills ``max_wire_bytes``, or a robot heard but not reached took a copy more
    each lease, kept by its matched reader without end. A restart keeps the previous run's
    reader matched for its lease, as for chunks (``hold``). When the robot was last heard is
    the server's (``last_heard``: the messages it admitted): a new run's malformed message,
    refused, or a retired run's, answered as such, says nothing of the live run's reader.
    """

    def __init__(self, max_wire_bytes: int = VERSIONS_MAX_WIRE_BYTES,
                 fragment_bytes: int = WHC_FRAGMENT_BYTES):
        super().__init__(max_wire_bytes, fragment_bytes=fragment_bytes)
        self.written_at = -math.inf            # when the newest copy was written
        self.withheld = 0                      # repeats not written (the bound)
        self.since_ack = 0                     # wire bytes written since the robot's last ack
        self.copies_since_ack = 0              # ... and how many copies
        self.part_bytes = VERSIONS_PART_BYTES  # a copy larger than this goes in parts
        self.parts_tid = None                  # the transfer whose parts the arrays are of
        self.part_held = np.zeros(0, bool)     # parts the robot acknowledged
        self.part_written = np.zeros(0, bool)  # parts written since the count went afresh
        self.part_end = np.zeros(0, np.int64)  # where each part's newest copy ends

    def wire_bytes(self, msg: RowVersions) -> int:
        """Return what ``msg`` takes in the writer's count, with this robot's fragment size."""
        return versions_wire_bytes(msg, self.fragment_bytes)

    def send(self, msg: RowVersions, now: float, first: bool) -> bool:
        """
        Return whether to write ``msg`` now, and count it if so.

        Its ``first`` copy always (the robot needs it to close the transfer), a repeat only
        within ``max_wire_bytes``, or when the robot holds everything written before.
        """
        self.release(now)
        wire = self.wire_bytes(msg)
        if not first and not self.fits(wire):
            self.withheld += 1
            return False
        pos = self.write(wire)
        self.written_at = float(now)
        self.since_ack += wire
        self.copies_since_ack += 1
        if first:
            self.register(msg.transfer_id, np.array([pos], dtype=np.int64))
        return True

    def send_parts(self, parts: list, now: float, first: bool) -> list:
        """
        Return the parts of one transfer's versions to write now, counted, in order.

        Those the robot has not acknowledged and that were not written since the count last
        went afresh (``heard``: a reader matched anew lost them), each while it keeps the
        writer within ``max_wire_bytes`` past what the robot acknowledged; the ``first``
        call's first part in any case, as a whole first copy. The robot acknowledges each
        part (``on_ack``), which lets the next one go: a part per round trip, and to a
        silent robot none past the bound, however large the versions.
        """
        self.release(now)
        tid = int(parts[0].transfer_id)
        if first or tid != self.parts_tid:
            self.parts_tid = tid
            self.part_held = np.zeros(len(parts), bool)
            self.part_written = np.zeros(len(parts), bool)
            self.part_end = np.zeros(len(parts), np.int64)
        out = []
        for k in np.flatnonzero(~(self.part_held | self.part_written)).tolist():
            wire = self.wire_bytes(parts[k])
            if not (first and not out) and not self.fits(wire):
                self.withheld += 1
                break
            self.part_end[k] = self.write(wire)
            if k == len(parts) - 1 and not self.part_written[k]:
                # the robot holds every part once it closes the transfer (its final ack):
                # everything written before the last part's first copy left the writer
                self.register(tid, np.array([self.part_end[k]], dtype=np.int64))
            self.part_written[k] = True
            self.written_at = float(now)
            self.since_ack += wire
            self.copies_since_ack += 1
            out.append(parts[k])
        return out

    def on_ack(self, ack: TransferAck, now: float) -> bool:
        """
        Take an ack from the robot, of any transfer and topic: what we write reaches it.

        Only a final one says which copies it held (``PeerLink.on_ack``); any one restarts
        the count of what was written since (``heard``). A robot that holds an END without
        its versions acknowledges that END (not finally): reached, it gets a copy again a
        lease after the newest, however many it lost; it sent nothing else while it waited.
        A part's ack (not final, ``seq`` = -1 - part) says the robot holds that part and,
        the writer being in order, everything written before its newest copy.
        """
        self.since_ack = self.copies_since_ack = 0
        k = -1 - int(ack.seq)
        if (ack.final or k < 0 or int(ack.transfer_id) != self.parts_tid
                or k >= self.part_held.size or not self.part_end[k]):
            return super().on_ack(ack, now)
        self.last_ack_time = max(self.last_ack_time, float(now))
        self.part_held[k] = True
        if self.part_end[k] <= self.acked:
            return False
        self.acked = int(self.part_end[k])
        return self.held_at is None

    def heard(self, now: float, lease_s: float, last_heard: float | None) -> None:
        """
        Note a message the server admitted from the robot, last heard at ``last_heard``.

        Count the writer afresh if the robot was silent for a lease (``last_heard``: the one
        before this message, None if never): its reader may have been dropped meanwhile
        (copies written before are gone, and the robot waits for the next) or never was
        (then it acknowledges them now). Also when the newest copy is a lease old: a robot
        that speaks has acknowledged what its reader got long since, and a reader matched
        anew got nothing written before (without this, one that missed a downlink's copies
        waited for ever: the robot's pokes are no silence). Afresh for a previous run's
        reader too (``hold``): this message may be a new run's, whose hold the server took
        just before; it holds from here, as when the count started afresh before the hold.

        Not for the newest copy's age once what was written since the robot's last ack fills
        ``max_wire_bytes`` (a first copy of any size goes once more): a robot the server
        hears but does not reach (no acks) keeps its reader matched, and each lease took
        one more copy, and the repeats after it, into the writer, without end.
        """
        silent = last_heard is not None and now - last_heard >= lease_s
        if silent or (now - self.written_at >= lease_s and (
                self.since_ack < self.max_wire_bytes or self.copies_since_ack < 2)):
            self.acked = self.sent
            if self.held_at is not None:
                self.held_at = self.sent
            self.part_written[:] = False    # parts not acknowledged go again
        if silent:
            self.since_ack = self.copies_since_ack = 0   # (a reader matched anew, if any)


def window_for_rate(window: int, rate_bps: float, chunk_bytes: int) -> int:
    """
    Return the unacknowledged-chunk window of a transfer: ``window``, or more on a fast link.

    A fixed window of 4 x 16 KiB caps a link at 64 KiB per round trip: ~46 Mbit/s with 5 ms
    of one-way latency, a third of the outdoor preset's high regime (docs/scheduling.md). The
    window grows to hold ``WINDOW_DRAIN_S`` of data at the measured rate, so it covers the
    bandwidth-delay product of a Wi-Fi round trip, while the bytes still queued when a
    deadline passes never take more than ~20 ms to drain (the reason for a small window).
    Never more than ``MAX_WINDOW_BYTES`` of chunks, however large ``window`` is.
    """
    cap = max(1, MAX_WINDOW_BYTES // chunk_bytes) if chunk_bytes > 0 else MAX_WINDOW
    base = min(max(1, int(window)), cap)
    if not rate_bps > 0 or chunk_bytes <= 0 or rate_bps == float('inf'):
        return base
    need = int(math.ceil(rate_bps * WINDOW_DRAIN_S / (8.0 * chunk_bytes)))
    return max(base, min(need, MAX_WINDOW, cap))


class RowBytes:
    """
    Where each row's encoded bytes lie, and vectorised cut/paste of row sets.

    Rows of one length group have the same encoded size and lie back to back, so a group is a
    ``[rows, bytes]`` matrix: the bytes of any ascending row set are one fancy index per group
    it touches (a chunk touches one to three), not an index per byte.
    """

    def __init__(self, layout: RowLayout, row_nbytes: np.ndarray):
        self.row_nbytes = row_nbytes
        self.row_offset = np.cumsum(row_nbytes) - row_nbytes
        self.total = int(row_nbytes.sum())
        self.bounds = layout.group_row_bounds
        first = self.bounds[:-1]
        self.group_nbytes = row_nbytes[first].astype(np.int64)
        self.group_start = self.row_offset[first].astype(np.int64)
        self.group_rows = np.diff(self.bounds)

    def _pieces(self, rows: np.ndarray):
        cut = np.searchsorted(rows, self.bounds)
        for g in np.flatnonzero(cut[1:] > cut[:-1]).tolist():
            nb, n = int(self.group_nbytes[g]), int(self.group_rows[g])
            start = int(self.group_start[g])
            yield (rows[cut[g]:cut[g + 1]] - self.bounds[g], start, start + n * nb, n, nb)

    def gather(self, buf: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Bytes of ascending ``rows``, concatenated."""
        parts = [buf[lo:hi].reshape(n, nb)[local].reshape(-1)
                 for local, lo, hi, n, nb in self._pieces(rows)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def scatter(self, buf: np.ndarray, rows: np.ndarray, payload: np.ndarray) -> None:
        """Write concatenated bytes of ascending ``rows`` into ``buf`` (inverse of gather)."""
        pos = 0
        for local, lo, hi, n, nb in self._pieces(rows):
            k = local.size * nb
            buf[lo:hi].reshape(n, nb)[local] = payload[pos:pos + k].reshape(local.size, nb)
            pos += k


class OutgoingTransfer:
    """Sender side of one transfer. Drive it with ``pump``, ``on_ack`` and ``on_final``."""

    def __init__(self, *, transfer_id: int, sender: int, receiver: int, kind: int, clock: int,
                 layout: RowLayout, codec: RowCodec, rowbytes: torch.Tensor,
                 scales: torch.Tensor, order: torch.Tensor, n_mandatory: int,
                 deadline: float, now: float, window: int = 4,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES, end_timeout_s: float = 2.0,
                 rate_bps: float = 0.0, flags: int = 0, incarnation: int = 0,
                 tensor_row_sums: torch.Tensor | None = None, peer: PeerLink | None = None,
                 lease_s: float = BOUND_END_S):
        lease_s = lease_seconds(lease_s)
        self.transfer_id, self.sender, self.receiver = transfer_id, sender, receiver
        self.flags = int(flags)       # extra flags on every chunk (FLAG_SNAPSHOT)
        self.incarnation = int(incarnation)   # stamped on its chunks (0: the engine stamps)
        self.n_mandatory_arg = int(n_mandatory)
        self.saved = False            # the engine asked its driver to persist it (END)
        self.kind, self.clock, self.codec_id = kind, clock, codec.codec_id
        self.layout = layout
        self.rowbytes = rowbytes.numpy()
        self.scales = scales.numpy().astype(np.float32)
        self.order = order.numpy().astype(np.int64)
        nb_all = codec.row_nbytes(layout).numpy()
        self.row_nbytes = nb_all
        self.bytes_of = RowBytes(layout, nb_all)
        self.row_offset = self.bytes_of.row_offset
        self.n_mandatory_rows = int(min(n_mandatory, self.order.size))
        self.plan: ChunkPlan = plan_chunks(nb_all[self.order], chunk_bytes,
                                           boundary=self.n_mandatory_rows)
        self.n_mandatory_chunks = self.plan.chunks_covering(self.n_mandatory_rows)
        self.row_scales = self._chunk_scales(codec, tensor_row_sums)
        self.deadline = float(deadline)
        self.window = window_for_rate(window, rate_bps, chunk_bytes)
        self.end_timeout_s = float(end_timeout_s)
        self.start_time = float(now)
        self.next_seq = 0
        self.acked = np.zeros(len(self.plan), dtype=bool)
        self.bytes_through = np.cumsum(self.plan.nbytes, dtype=np.int64)   # chunks 0..k
        self.highest_acked = -1       # the last chunk acknowledged (by seq): DDS keeps order
        self.n_acked = 0
        self.bytes_sent = 0
        self.bytes_acked = 0
        self.last_ack_time = float(now)
        self.end_sent_at: float | None = None
        self.end_retry_at = float('inf')   # when to repeat END (stored: fire at this value)
        self.released = 0             # window slots given up on (acks lost or very late)
        self.last_progress = float(now)
        self.finished = False
        self.delivered_rows: np.ndarray | None = None
        self.whole_model = layout.whole_model
        self.rate_hint_bps = 0.0      # reported in END (the sender's link estimate)
        self.rate_bps = float(rate_bps)   # link estimate used to pace optional chunks
        self.planned_bytes = 0        # payload bytes of the chunks sent so far
        self.first_ack_time, self.first_ack_bytes = 0.0, 0
        self.second_ack_time: float | None = None
        self.opening_chunks = 0       # chunks sent at the start, before any ack (round trip)
        self.bytes_acked_chunks = 0   # payload bytes of the chunks acknowledged so far
        self.lease_s = lease_s   # the peer's DDS lease: END at the bound after it
        self.peer = PeerLink() if peer is None else peer   # all transfers to that peer
        # the peer's position after each chunk, and after the last END (``[-1]``)
        self.wire_end = np.zeros(len(self.plan) + 1, dtype=np.int64)
        self._held: RowChunk | None = None   # next chunk, built, held by the peer's bound
        self.peer.register(self.transfer_id, self.wire_end)

    def _chunk_scales(self, codec: RowCodec, tensor_row_sums) -> np.ndarray | None:
        """
        Per-row scales, one per chunk and tensor (over the rows that chunk carries), or None.

        With ``tensor_row_sums`` (|p| summed per row) on a row layout, each chunk's scale for
        a tensor is the mean |p| of that tensor's rows *in the chunk*, so the values the
        receiver decodes, and the sender commits on ack, fit the rows that were sent. All
        fragments of a large row belong to its first chunk. Rows outside ``order`` (never
        sent) get a scale of their own group and are never committed.
        """
        if tensor_row_sums is None or self.layout.whole_model:
            return None
        group = np.full(self.layout.n_rows, len(self.plan), dtype=np.int64)
        group[self.order] = np.searchsorted(self.plan.rank_hi, np.arange(self.order.size),
                                            side='right')
        scales = codec.group_scales(self.layout, tensor_row_sums, torch.from_numpy(group))
        return None if scales is None else scales.numpy()

    def commit_scales(self) -> tuple[torch.Tensor, bool]:
        """(scales, per_row): what ``quantize``/``decode`` of the delivered rows must use."""
        if self.row_scales is not None:
            return torch.from_numpy(self.row_scales), True
        return torch.from_numpy(self.scales), False

    # ------------------------------------------------------------------ sending
    def in_flight(self) -> int:
        """Return how many sent chunks still hold a window slot (not acked, not released)."""
        return max(0, self.next_seq - self.n_acked - self.released)

    def bytes_past_ack(self) -> int:
        """
        Return the payload bytes sent after the highest-numbered chunk acknowledged.

        What the sending DDS writer may still hold for this transfer: a reliable writer
        delivers in order, so an ack of chunk k means chunks up to k left it. Released
        window slots (acks lost or a dead link) do not lower it, so it bounds what a peer
        that stopped answering is sent.
        """
        done = int(self.bytes_through[self.highest_acked]) if self.highest_acked >= 0 else 0
        return self.planned_bytes - done

    def _fits_bound(self) -> bool:
        """
        Return whether the next chunk keeps ``bytes_past_ack`` within ``MAX_WINDOW_BYTES``.

        Past that, a write to a robot whose link died could reach the DDS writer-history
        mark and block the sending node's loop. One chunk always fits when nothing is past
        the last ack (a chunk larger than the bound is still sent, alone).
        """
        past = self.bytes_past_ack()
        return past == 0 or past + int(self.plan.nbytes[self.next_seq]) <= MAX_WINDOW_BYTES

    def at_bound(self) -> bool:
        """
        Return whether chunks remain but the next one would pass a bound.

        ``MAX_WINDOW_BYTES`` of this transfer, or ``PEER_MAX_WIRE_BYTES`` of everything
        written to its peer (a chunk built and held back, ``_held``).
        """
        return (self.end_sent_at is None and not self.finished
                and self.next_seq < len(self.plan)
                and (not self._fits_bound() or (
                    self._held is not None
                    and not self.peer.fits(self.peer.wire_bytes(self._held)))))

    def _bound_wait_s(self) -> float:
        """Return how long after the last ack END goes at the bound: the lease, or more."""
        return max(self.lease_s, self.end_timeout_s)

    def _bound_since(self) -> float:
        """
        Return when the peer last showed it is alive: an ack of this or any transfer to it.

        Acks of another transfer written before this one's chunks (a slow link draining it)
        renew the peer's lease as ours would: DDS keeps our chunks and they follow in order.
        """
        return max(self.last_ack_time, self.peer.last_ack_time)

    def may_send_more(self, now: float) -> bool:
        """
        Return whether the deadline lets the next chunk go now (False: END is due).

        Mandatory chunks always; an optional chunk only if, at the estimated link rate, it
        is through before the deadline (so a straggler sends its mandatory prefix and no
        more, and nothing queued at the deadline keeps draining after it). The window and
        ``MAX_WINDOW_BYTES`` past the last ack (``_fits_bound``) hold back in ``pump`` any
        chunk, mandatory ones too, without ending the transfer.
        """
        k = self.next_seq
        if k >= len(self.plan):
            return False
        if k < self.n_mandatory_chunks:
            return True
        if now >= self.deadline:
            return False
        if self.rate_bps <= 0 or self.deadline == float('inf'):
            return True
        unacked = self.planned_bytes - self.bytes_acked_chunks
        return now + 8.0 * (unacked + int(self.plan.nbytes[k])) / self.rate_bps <= self.deadline

    def pump(self, now: float) -> list[RowChunk]:
        """Chunks to send now (window permitting), then END once nothing more may go."""
        out = []
        if self.end_sent_at is not None or self.finished:
            return out
        self.peer.release(now)
        while (self.in_flight() < self.window and self.may_send_more(now)
               and self._fits_bound()):
            chunk = self._held if self._held is not None else self._chunk(self.next_seq)
            wire = self.peer.wire_bytes(chunk)
            if not self.peer.fits(wire):
                self._held = chunk          # the peer's writer is full: wait for an ack
                break
            self._held = None
            out.append(chunk)
            self.bytes_sent += len(chunk.payload)
            self.wire_end[self.next_seq] = self.peer.write(wire)
            self.planned_bytes += int(self.plan.nbytes[self.next_seq])
            self.next_seq += 1
            self.last_progress = now
        if self.n_acked == 0 and now == self.start_time:
            self.opening_chunks = self.next_seq
        if not self.may_send_more(now):
            out.append(self._end(now))
        return out

    def next_wakeup(self) -> float | None:
        """
        Return when the driver must tick us, None when nothing is due.

        The END retransmission once END went out; else the earliest of: the window's release
        (``end_timeout_s`` without progress, acks may be lost), the END at the 4 MiB bound
        (``BOUND_END_S``, or ``end_timeout_s`` if longer, after the last ack), and the
        deadline of the optional chunks.
        """
        if self.finished:
            return None
        if self.end_sent_at is not None:
            return self.end_retry_at
        times = []
        if self.in_flight() >= self.window:
            times.append(self.last_progress + self.end_timeout_s)   # acks may be lost
        elif self.at_bound():
            times.append(self._bound_since() + self._bound_wait_s())
            if self.peer.held_at is not None:
                times.append(self.peer.hold_until)   # a restarted peer's old lease ends
        if self.next_seq >= self.n_mandatory_chunks and self.next_seq < len(self.plan):
            times.append(self.deadline)
        return min(times) if times else None

    def on_tick(self, now: float) -> list[RowChunk]:
        if self.finished:
            return []
        if self.end_sent_at is not None:
            if now >= self.end_retry_at:
                return [self._end(now)]        # lost END or lost final ack: ask again
            return []
        if self.in_flight() >= self.window and now >= self.last_progress + self.end_timeout_s:
            # No ack for a whole timeout: stop waiting for those slots. The final ack, not
            # the per-chunk acks, decides what was delivered, so nothing is lost by this.
            self.released += self.in_flight()
            self.last_progress = now
        self.peer.release(now)
        if self.at_bound() and now >= self._bound_since() + self._bound_wait_s():
            # A lease at the bound without an ack (BOUND_END_S): a peer back sooner is acking
            # again. END asks for the final ack; the rows never sent count as lost chunks
            # (as the rest sent into a dead link would), and nothing else piles up in the
            # writer. Without it nothing would end the transfer (DDS may have dropped
            # what it held when the peer's lease expired: no ack would ever come).
            return [self._end(now)]
        return self.pump(now)

    def _end(self, now: float) -> RowChunk:
        self.end_sent_at = now
        self.end_retry_at = now + self.end_timeout_s
        self._held = None
        end = RowChunk(transfer_id=self.transfer_id, seq=self.next_seq, sender=self.sender,
                       receiver=self.receiver, kind=self.kind, clock=self.clock,
                       flags=FLAG_END | self.flags, codec=self.codec_id,
                       rate_bps=self.rate_hint_bps, incarnation=self.incarnation)
        self.wire_end[-1] = self.peer.write(self.peer.wire_bytes(end))
        return end

    def _chunk(self, k: int) -> RowChunk:
        lo, hi = int(self.plan.rank_lo[k]), int(self.plan.rank_hi[k])
        rows = np.sort(self.order[lo:hi])
        flen = int(self.plan.frag_len[k])
        if flen >= 0:   # fragment of one large row
            off = int(self.plan.frag_offset[k])
            start = int(self.row_offset[rows[0]]) + off
            payload = self.rowbytes[start:start + flen].tobytes()
            flags, frag_offset = FLAG_FRAGMENT, off
            with_scales = off == 0
        else:
            payload = self.bytes_of.gather(self.rowbytes, rows).tobytes()
            flags, frag_offset, with_scales = 0, 0, True
        scales = np.zeros(0, np.float32)
        if not with_scales:
            tids = np.zeros(0, dtype=np.uint32)
        elif self.whole_model:
            tids = np.arange(self.layout.n_tensors, dtype=np.uint32)
        else:
            tids, first = np.unique(self.layout.row_tensor.numpy()[rows], return_index=True)
            tids = tids.astype(np.uint32)
            if self.row_scales is not None:
                scales = self.row_scales[rows[first]]
        if tids.size and not scales.size:
            scales = self.scales[tids]
        return RowChunk(transfer_id=self.transfer_id, seq=k, sender=self.sender,
                        receiver=self.receiver, kind=self.kind, clock=self.clock,
                        flags=flags | self.flags, incarnation=self.incarnation,
                        codec=self.codec_id, row_ranges=ranges_from_sorted(rows),
                        frag_offset=frag_offset, tensor_ids=tids, scales=scales,
                        payload=payload)

    # ------------------------------------------------------------------ acknowledgements
    def on_ack(self, ack: TransferAck, now: float) -> list[RowChunk]:
        """Handle a per-chunk ack: account throughput, open the window."""
        k = int(ack.seq)
        if self.finished or not 0 <= k < self.next_seq or self.acked[k]:
            return []           # late, duplicate or bogus: ignore
        if self.n_acked == 0:
            self.first_ack_time, self.first_ack_bytes = now, int(self.plan.nbytes[k])
        elif self.n_acked == 1:
            self.second_ack_time = now
        self.acked[k] = True
        self.n_acked += 1
        self.highest_acked = max(self.highest_acked, k)
        self.bytes_acked += int(self.plan.nbytes[k])
        self.bytes_acked_chunks += int(self.plan.nbytes[k])
        self.last_ack_time = now
        self.last_progress = now
        self.peer.on_ack(ack, now)
        return self.pump(now)

    def on_final(self, ack: TransferAck, now: float) -> np.ndarray | None:
        """
        Handle the receiver's authoritative answer.

        Returns delivered row ids (ascending), or None if this ack is not a valid final answer
        for this transfer.
        """
        if self.finished or self.end_sent_at is None:
            return None
        try:
            validate_ranges(ack.chunk_ranges, max(self.next_seq, 1), 'final ack chunks')
        except MessageError:
            return None
        got = np.zeros(len(self.plan), dtype=bool)
        got[ids_from_ranges(ack.chunk_ranges)] = True
        got[self.next_seq:] = False
        # A rank is delivered iff every chunk that carries (a part of) it arrived.
        n_ranks = int(self.plan.rank_hi[self.next_seq - 1]) if self.next_seq else 0
        bad = np.zeros(n_ranks + 1, dtype=np.int64)
        miss = ~got[:self.next_seq]
        np.add.at(bad, self.plan.rank_lo[:self.next_seq][miss], 1)
        np.add.at(bad, self.plan.rank_hi[:self.next_seq][miss], -1)
        ok = np.cumsum(bad[:n_ranks]) == 0
        self.delivered_rows = np.sort(self.order[:n_ranks][ok])
        self.finished = True
        self.bytes_acked = int(self.plan.nbytes[:self.next_seq][got[:self.next_seq]].sum())
        self.last_ack_time = max(self.last_ack_time, now)
        self.peer.on_ack(ack, now)
        return self.delivered_rows

    def sent_rows(self) -> np.ndarray:
        """Row ids of all data chunks sent so far (ascending)."""
        n_ranks = int(self.plan.rank_hi[self.next_seq - 1]) if self.next_seq else 0
        return np.sort(self.order[:n_ranks])

    def round_trip_sample(self) -> float | None:
        """
        Seconds one round trip of this link takes, without the time to put a chunk on it.

        The first ack comes a round trip plus one chunk's transmission after the start; when
        the transfer opened with two or more chunks, the second ack follows the first by one
        chunk's transmission (the chunks queue back to back), so their difference is the
        round trip alone: propagation, the receiver's processing and the transport's own
        delays, what every transfer pays however few rows it carries. None when the
        transfer opened with a single chunk or saw fewer than two acks.
        """
        if self.opening_chunks < 2 or self.second_ack_time is None:
            return None
        first = self.first_ack_time - self.start_time
        return max(0.0, first - (self.second_ack_time - self.first_ack_time))

    def throughput_sample(self) -> tuple[int, float]:
        """
        Return (bytes, seconds) that measure the link rate.

        Between the first and the last per-chunk ack when there are several: this excludes the
        first round trip, which dominates small transfers and would make a fast link look slow
        (and ATP then send too few rows). But only if the acks are spread over at least a
        quarter of the transfer: acks that arrive in a bunch (queued behind the sender's own
        window on a half-duplex link, or compressed by Wi-Fi block acks) say nothing about
        the rate, and their spacing would read many times the link's capacity, so that a
        straggler's deadline-bound transfer overshoots by a whole window. Otherwise, and for
        a single chunk, the sample counts from the transfer's start.
        """
        whole = max(self.last_ack_time - self.start_time, 1e-9)
        spread = self.last_ack_time - self.first_ack_time
        if self.n_acked >= 2 and spread > 0 and spread >= 0.25 * whole:
            return self.bytes_acked_chunks - self.first_ack_bytes, spread
        return self.bytes_acked, whole


class IncomingTransfer:
    """Receiver side of one transfer: validate, deduplicate and reassemble chunks."""

    def __init__(self, *, transfer_id: int, sender: int, kind: int, clock: int,
                 layout: RowLayout, codec: RowCodec, now: float, incarnation: int = 0,
                 flags: int = 0):
        self.transfer_id, self.sender, self.kind, self.clock = transfer_id, sender, kind, clock
        self.incarnation = incarnation
        self.flags = flags            # FLAG_SNAPSHOT for a lossless model snapshot
        self.layout, self.codec = layout, codec
        nb = codec.row_nbytes(layout).numpy()
        self.row_nbytes = nb
        self.bytes_of = RowBytes(layout, nb)
        self.row_offset = self.bytes_of.row_offset
        self.buf = np.zeros(self.bytes_of.total, dtype=np.uint8)
        self.have = np.zeros(layout.n_rows, dtype=np.int64)
        self.scales = np.full(layout.n_tensors, np.nan, dtype=np.float32)
        # Row layouts: a chunk's scale for tensor t holds for the rows of t that it carries
        # (one scale per chunk and tensor); close() then hands out per-row scales.
        self.per_row_scales = codec.lossy and not layout.whole_model
        self.row_scales = (np.full(layout.n_rows, np.nan, dtype=np.float32)
                           if self.per_row_scales else None)
        self.seqs: set[int] = set()
        self.fragments: dict[int, list] = {}   # fragmented row -> its chunks' seqs
        self.spans: dict[int, list] = {}       # fragmented row -> its (offset, end) received
        self.end_seq = None                    # the END's seq: chunks sent number 0..end_seq-1
        self.bytes = 0
        self.first_time = now
        self.last_time = now

    def on_chunk(self, chunk: RowChunk, now: float) -> bool:
        """Absorb a data chunk; False for a duplicate. Raises MessageError if malformed."""
        if chunk.clock != self.clock or chunk.kind != self.kind:
            raise MessageError('chunk clock/kind differs from its transfer')
        if chunk.seq in self.seqs:
            return False
        rows, tids, scales, payload = check_chunk(chunk, self.layout, self.codec,
                                                  self.row_nbytes)
        # A sender's chunk k always carries the same rows (its plan): data that another seq
        # of this transfer brought already is no copy of ours. Counted twice, a row was
        # "complete" with bytes never sent in it (and decoded them as updates).
        if chunk.flags & FLAG_FRAGMENT:
            r, off = int(rows[0]), int(chunk.frag_offset)
            end = off + payload.size
            if (r not in self.spans and self.have[r]) or any(
                    lo < end and off < hi for lo, hi in self.spans.get(r, ())):
                raise MessageError(f'fragment of row {r} overlaps data the transfer has')
        elif self.have[rows].any():
            raise MessageError('chunk carries rows the transfer has from another chunk')
        # Everything is validated: from here on nothing can fail half-way.
        if chunk.flags & FLAG_FRAGMENT:
            start = int(self.row_offset[r]) + off
            self.buf[start:start + payload.size] = payload
            self.have[r] += payload.size
            self.fragments.setdefault(r, []).append(int(chunk.seq))
            self.spans.setdefault(r, []).append((off, end))
        else:
            self.bytes_of.scatter(self.buf, rows, payload)
            self.have[rows] += self.row_nbytes[rows]
        if tids.size:
            self.scales[tids] = scales
            if self.row_scales is not None:
                self._set_row_scales(rows, tids, scales)
        if not self.codec.lossy and np.isnan(self.scales).any():
            self.scales[:] = 0.0
        self.seqs.add(int(chunk.seq))
        self.bytes += payload.size
        self.last_time = now
        return True

    def _set_row_scales(self, rows: np.ndarray, tids: np.ndarray, scales: np.ndarray) -> None:
        """Give each row of the chunk its tensor's scale in this chunk (if the chunk has one)."""
        order = np.argsort(tids, kind='stable')
        st, ss = tids[order], scales[order]
        rt = self.layout.row_tensor.numpy()[rows]
        pos = np.minimum(np.searchsorted(st, rt), st.size - 1)
        hit = st[pos] == rt
        self.row_scales[rows[hit]] = ss[pos[hit]]

    def close(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, np.ndarray]:
        """
        Return (delivered row mask [M] bool, row bytes of all rows, scales, chunk ranges).

        The scales are per row [M] if ``per_row_scales`` (decode with ``per_row=True``),
        else per tensor [T].
        """
        if self.end_seq is not None and self.seqs and max(self.seqs) >= self.end_seq:
            # a chunk numbered beyond the sender's last one is not the sender's: which rows
            # it brought cannot be told apart, so nothing counts (the sender keeps them all)
            self.seqs.clear()
            self.have[:] = 0
            self.fragments.clear()
        complete = self.have == self.row_nbytes
        if self.row_scales is not None:
            complete &= np.isfinite(self.row_scales)
            scales = np.nan_to_num(self.row_scales, nan=0.0)
        else:
            if self.codec.lossy:
                complete &= bool(np.isfinite(self.scales).all())
            scales = np.nan_to_num(self.scales, nan=0.0)
        embedded = getattr(self.codec, 'bad_rows', None)
        if (embedded is not None or not self.codec.lossy) and self.fragments:
            # A row assembled from fragments is checked once whole; a non-finite one is not
            # applied (the sender keeps the row, below).
            if embedded is not None:     # scales inside the rows (RowScaledSign)
                finite = ~embedded(self.layout, torch.from_numpy(self.buf)).numpy()
            else:
                values = torch.from_numpy(self.buf).view(self.codec.dtype)
                finite = torch.isfinite(self.layout.row_abs_sum(values)).numpy()
            complete &= finite
        for r, frag_seqs in self.fragments.items():
            if not complete[r]:
                # A fragmented row that is not applied (cut between its fragments by ATP's
                # deadline, a fragment lost, or not finite) leaves the final ack with all its
                # fragments, so the sender keeps the row: acked, they would count as
                # delivered and the row's mass would be lost.
                self.seqs.difference_update(frag_seqs)
        seqs = np.fromiter(sorted(self.seqs), dtype=np.int64, count=len(self.seqs))
        return (torch.from_numpy(complete), torch.from_numpy(self.buf),
                torch.from_numpy(scales), ranges_from_sorted(seqs))


def check_chunk(chunk: RowChunk, layout: RowLayout, codec: RowCodec, row_nbytes: np.ndarray):
    """
    Validate a data chunk completely, before any state change or field-sized allocation.

    Returns ``(rows, tensor_ids, scales, payload)``; raises MessageError. Lossless payloads
    are checked for finiteness here, so a NaN row is never written anywhere (issue 9).
    """
    if chunk.codec != codec.codec_id:
        raise MessageError(f'chunk codec {chunk.codec}, expected {codec.codec_id}')
    if chunk.seq < 0 or chunk.seq > MAX_CHUNKS:
        raise MessageError(f'chunk seq {chunk.seq} out of range')
    n_ranges = len(chunk.row_ranges)
    if n_ranges > 2 * layout.n_rows or len(chunk.tensor_ids) > layout.n_tensors:
        raise MessageError('chunk lists more rows or tensors than the model has')
    if len(chunk.payload) > int(row_nbytes.sum()):
        raise MessageError(f'payload of {len(chunk.payload)} bytes exceeds the model')
    rows = ids_from_ranges(chunk.row_ranges, layout.n_rows)
    if rows.size == 0:
        raise MessageError('data chunk without rows')
    tids = np.asarray(chunk.tensor_ids, dtype=np.int64)
    scales = np.asarray(chunk.scales, dtype=np.float32)
    if tids.size != scales.size or (tids.size and (tids.min() < 0 or
                                                   tids.max() >= layout.n_tensors)):
        raise MessageError('tensor_ids/scales malformed')
    if codec.lossy and not layout.whole_model and int(chunk.frag_offset) == 0 and \
            not np.isin(layout.row_tensor.numpy()[rows], tids).all():
        # the rows would stay without a scale: not applied, yet their chunk acked as arrived,
        # so the sender dropped them (a fragment's scale comes with its row's first fragment)
        raise MessageError('chunk without the scale of a tensor its rows belong to '
                           '(tensor_ids must list every tensor of its rows)')
    if not np.all(np.isfinite(scales)):
        raise MessageError('non-finite scale')
    if (scales < 0).any():          # (a mean magnitude, or 1: negative flips every sign)
        raise MessageError('negative scale')
    payload = np.frombuffer(chunk.payload, dtype=np.uint8)
    if chunk.flags & FLAG_FRAGMENT:
        if rows.size != 1:
            raise MessageError('fragment chunk must carry exactly one row')
        r, off = int(rows[0]), int(chunk.frag_offset)
        if off < 0 or off + payload.size > row_nbytes[r] or payload.size == 0:
            raise MessageError('fragment outside its row')
    else:
        need = int(row_nbytes[rows].sum())
        if payload.size != need:
            raise MessageError(f'payload {payload.size} bytes, rows need {need}')
    embedded = getattr(codec, 'chunk_rows_ok', None)
    if embedded is not None and not chunk.flags & FLAG_FRAGMENT:
        if not embedded(layout, rows, payload, row_nbytes):
            raise MessageError('non-finite or negative row scale in payload')
    if not codec.lossy and not chunk.flags & FLAG_FRAGMENT:
        # (fragments may split a value: their rows are checked once assembled, at close)
        values = np.frombuffer(chunk.payload, dtype=np.dtype(
            str(codec.dtype).replace('torch.', '')))
        if not np.all(np.isfinite(values)):
            raise MessageError('non-finite values in payload')
    return rows, tids, scales, payload


class Receiver:
    """
    All incoming transfers of one node: per-chunk acks, END handling, duplicate answers.

    ``on_chunk`` returns the acks to send and, when an END closes a transfer, the closed
    transfer for the engine to apply *before* its final ack goes out (the ack is the promise
    that the rows were applied).

    Transfers are keyed by (sender, sender incarnation, transfer id): a restarted sender
    counts its ids afresh, and its new transfers must never be answered from its previous
    run's records. The answers of closed transfers are cached per sender and incarnation, and
    pruned per sender and incarnation (never across senders, issue 9 defect 4: a slow sender's
    last answer must survive a fast sender closing many transfers).

    Bounds (DESIGN section 10), checked before anything is allocated: at most
    ``max_open_per_sender`` open transfers per sender (each holds a model-sized buffer),
    clocks in ``[0, max_clock]``, chunk sizes and row ranges within the model.
    """

    def __init__(self, me: int, layout: RowLayout, codec: RowCodec, keep_closed: int = 8,
                 max_open_per_sender: int = 2, max_clock: int = MAX_CLOCK,
                 keep_incarnations: int = 4):
        self.me, self.layout, self.codec = me, layout, codec
        self.row_nbytes = codec.row_nbytes(layout).numpy()
        self.open: dict[tuple[int, int, int], IncomingTransfer] = {}
        self.closed: dict[tuple[int, int], dict[int, TransferAck]] = {}
        self.newest_closed: dict[tuple[int, int], int] = {}
        self.keep_closed = int(keep_closed)
        self.max_open_per_sender = int(max_open_per_sender)
        self.max_clock = int(max_clock)
        self.keep_incarnations = int(keep_incarnations)
        self.late_chunks = 0
        self.duplicate_chunks = 0

    def cached_answer(self, sender: int, incarnation: int, transfer_id: int
                      ) -> TransferAck | None:
        """Return the final ack already given for a closed transfer, or None."""
        return self.closed.get((sender, incarnation), {}).get(transfer_id)

    def check_first(self, chunk: RowChunk) -> None:
        """
        Refuse (``MessageError``) what needs no state to refuse in a transfer's first chunk.

        Its clock in ``[0, max_clock]``; a data chunk's codec, sizes, rows and scales
        (``check_chunk``). ``on_chunk`` asks it before it opens a transfer; the push
        systems' transfers also before a chunk of a run not yet current changes anything.
        """
        if not 0 <= chunk.clock <= self.max_clock:
            raise MessageError(f'clock {chunk.clock} outside [0, {self.max_clock}]')
        if not chunk.flags & FLAG_END:
            check_chunk(chunk, self.layout, self.codec, self.row_nbytes)

    def check_end(self, chunk: RowChunk) -> None:
        """
        Refuse (``MessageError``) an END whose clock or kind differs from its open transfer's.

        ``on_chunk`` asks it before it closes the transfer; Rog's server also before the END
        counts as hearing its sender (``ps.ServerEngine._validate``): one reader of the rule.
        """
        open_tr = self.open.get((chunk.sender, chunk.incarnation, chunk.transfer_id))
        if open_tr is not None and (chunk.clock != open_tr.clock or chunk.kind != open_tr.kind):
            raise MessageError('END clock/kind differs from its transfer')

    def drops_unread(self, chunk: RowChunk) -> bool:
        """
        Tell whether ``on_chunk`` drops this data chunk without reading its rows.

        A late copy (its transfer answered, or older than the newest one closed) or a
        duplicate of a chunk its open transfer holds: a caller that must refuse garbage
        before anything counts it (Rog's server, ``ps.ServerEngine._check_unread``) checks
        such a chunk's rows itself, and asks here so as not to restate these rules.
        """
        s, inc, tid = chunk.sender, chunk.incarnation, chunk.transfer_id
        if self.cached_answer(s, inc, tid) is not None:
            return True
        if tid <= self.newest_closed.get((s, inc), -1):
            return True
        open_tr = self.open.get((s, inc, tid))
        return open_tr is not None and int(chunk.seq) in open_tr.seqs

    def on_chunk(self, chunk: RowChunk, now: float):
        """-> (list of TransferAck to send, closed info or None). Raises MessageError."""
        s, inc, tid = chunk.sender, chunk.incarnation, chunk.transfer_id
        key = (s, inc, tid)
        cached = self.cached_answer(s, inc, tid)
        if cached is not None:
            if chunk.flags & FLAG_END:
                return [cached], None                  # our final ack was lost: repeat it
            self.late_chunks += 1
            return [], None
        if tid <= self.newest_closed.get((s, inc), -1):
            self.late_chunks += 1                      # older than anything we closed
            return [], None
        inc_tr = self.open.get(key)
        if inc_tr is None:
            self.check_first(chunk)
            if not chunk.flags & FLAG_END:
                mine = [k for k in self.open if k[0] == s]
                if len(mine) >= self.max_open_per_sender:
                    raise MessageError(f'sender {s} already has {len(mine)} open transfers')
            inc_tr = IncomingTransfer(transfer_id=tid, sender=s, kind=chunk.kind,
                                      clock=chunk.clock, layout=self.layout, codec=self.codec,
                                      now=now, incarnation=inc,
                                      flags=chunk.flags & ~(FLAG_END | FLAG_FRAGMENT))
        if chunk.flags & FLAG_END:
            self.check_end(chunk)
            self.open.pop(key, None)
            inc_tr.end_seq = int(chunk.seq)
            return [], inc_tr
        fresh = inc_tr.on_chunk(chunk, now)
        self.open[key] = inc_tr
        if not fresh:
            self.duplicate_chunks += 1
        return [TransferAck(transfer_id=tid, sender=self.me, receiver=s, seq=chunk.seq,
                            final=False, bytes_received=len(chunk.payload),
                            receive_time=now)], None

    def final_ack(self, inc: IncomingTransfer, chunk_ranges: np.ndarray, now: float
                  ) -> TransferAck:
        """Record and return the authoritative answer for a transfer just applied."""
        ack = TransferAck(transfer_id=inc.transfer_id, sender=self.me, receiver=inc.sender,
                          seq=len(inc.seqs), final=True, bytes_received=inc.bytes,
                          chunk_ranges=chunk_ranges, receive_time=now)
        self.record(inc.sender, inc.incarnation, inc.transfer_id, ack)
        # Transfers of this sender still open but older than this one will never finish.
        for k in [k for k in self.open
                  if k[0] == inc.sender and k[1] == inc.incarnation and k[2] < inc.transfer_id]:
            del self.open[k]
        return ack

    def record(self, sender: int, incarnation: int, transfer_id: int, ack: TransferAck
               ) -> None:
        """Cache ``ack`` as the answer of a closed transfer (pruned per sender+incarnation)."""
        sk = (sender, incarnation)
        if sk not in self.closed:
            mine = [k for k in self.closed if k[0] == sender]
            for old in mine[:max(0, len(mine) - self.keep_incarnations + 1)]:
                del self.closed[old]               # insertion order: oldest incarnation first
                self.newest_closed.pop(old, None)
        book = self.closed.setdefault(sk, {})
        book[transfer_id] = ack
        self.newest_closed[sk] = max(self.newest_closed.get(sk, -1), transfer_id)
        if len(book) > self.keep_closed:
            for old in sorted(book)[:len(book) - self.keep_closed]:
                del book[old]

    def forget_closed(self, sender: int, incarnation: int) -> int:
        """
        Forget the answers of ``sender``'s closed transfers of run ``incarnation``; -> how many.

        A repeated END of one of them then closes an empty transfer, whose final ack of no
        chunks sends that message again whole (a run taken back after its answers were lost:
        ``push_transfers.PushTransfers._revive``).
        """
        book = self.closed.pop((sender, incarnation), {})
        self.newest_closed.pop((sender, incarnation), None)
        return len(book)

    def drop_open(self, sender: int, incarnation: int | None = None) -> int:
        """Forget ``sender``'s open transfers (of one incarnation, or all); -> how many."""
        gone = [k for k in self.open
                if k[0] == sender and (incarnation is None or k[1] == incarnation)]
        for k in gone:
            del self.open[k]
        return len(gone)

    def reset(self) -> None:
        """Forget everything (the peer restarted and reuses its transfer ids)."""
        self.open.clear()
        self.closed.clear()
        self.newest_closed.clear()
