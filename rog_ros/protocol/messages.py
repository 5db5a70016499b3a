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
Protocol messages: Python dataclasses mirroring ``msg/*.msg`` field for field.

The engines speak only these types. Transports (``rog_ros.transport``) convert them to and
from ROS 2 / DDS samples; the simulator passes them as they are and charges ``wire_size()``
bytes on the link. Array fields are NumPy arrays of a fixed dtype (they map to ``uint32[]``,
``float32[]`` ... in the .msg files) and payloads are ``bytes`` (``uint8[]`` on the wire), never
lists of floats.

Every message carries ``schema_version``: DDS does not detect layout drift between builds, so a
receiver rejects a message whose version it does not speak (see ``validate``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math
import random
from typing import ClassVar, Union

import numpy as np

SCHEMA_VERSION = 3
"""Wire layout version of RowChunk, RowVersions, TransferAck, Schedule and LinkStats."""
TRAIN_STATUS_SCHEMA = 4
"""TrainStatus's own layout version (4 added ``start_model``). Versions are per message type,
so that a layout change stops only peers that read that type the old way: a client that
speaks the row protocol at version 3 is not cut off by a new status field."""
VERSIONS_PARTS_SCHEMA = 4
"""Layout version of a RowVersions sent in parts (``parts`` > 1): its ``part`` and ``parts``
fill the padding after ``schema_version``, so a whole copy (``parts`` 0) is the version-3
message byte for byte in plain CDR (XCDR1, the only representation the bus and ROS 2 use; not
in XCDR2, which aligns ``transfer_id`` to 4 and so moves it from byte 4 to 8), and a robot
built before parts refuses a part by its version, in one line, instead of taking it for the
whole versions of its downlink (where DDS matches it at all: with type information it
matches no reader of the old layout, and the bus says so)."""
MAX_VERSIONS_PARTS = 65535
"""Most parts one RowVersions is split into (``parts`` is a uint16)."""
SERVER = -1
"""Address of the parameter server in ``sender``/``receiver`` fields; workers are 0..N-1."""

KIND_GRAD = 0
"""RowChunk kind: worker -> server, accumulated gradient rows (uplink)."""
KIND_UPDATE = 1
"""RowChunk kind: server -> worker, aggregated update rows (downlink)."""

FLAG_END = 1
"""RowChunk flag: end of transfer; ``seq`` holds the number of data chunks that were sent."""
FLAG_FRAGMENT = 2
"""RowChunk flag: the payload is bytes [frag_offset, frag_offset+len) of one row larger than a
chunk; the row counts as delivered only when all of its bytes arrived."""
FLAG_REQUEST = 4
"""RowChunk flag (no payload): the worker asks for a transfer slot to push ``clock`` (FLOWN);
the server grants it with a Schedule."""
FLAG_SNAPSHOT = 8
"""RowChunk flag (downlink): the rows are the server's model itself, raw little-endian floats
of the model's dtype (lossless), which *replace* the worker's rows instead of being subtracted:
a rejoining worker ends up holding exactly the server's view of it (DESIGN section 10)."""
FLAG_JOIN = 16
"""RowChunk flag (uplink, no rows): a (re)joining worker says hello; the server answers with
a Schedule carrying ``checkpoint_transfer`` and makes the worker's next pull a snapshot. With
``tensor_ids = [low 32 bits, high 32 bits]`` of an earlier incarnation of the sender, it only
asks which pushes of that run the server's checkpoint holds (answer addressed to that run).
Its payload is empty, but with ``FLAG_FINAL`` (below)."""
FLAG_LATE = 32
"""RowChunk flag (uplink): rows of the sender's pushed iteration ``clock`` that its push withheld,
sent while it computes the next one (``SyncPolicy.late_rows``). The server applies and stamps
them like any push, but they ask for no pull and do not count as an iteration of the sender.
Downlink: rows changed since the worker's pull of ``clock``, sent while it computes
(``SyncPolicy.late_pulls``); it acknowledges them at once and applies them when the
computation ends; they are not a pull (no Schedule, no pace or compute sample)."""

FLAG_FREE = 64
"""RowChunk flag (downlink): the server does not hold the receiver to the staleness bound (it
is suspended for its link and runs free: ``SyncPolicy.async_when_out``, ``free_stragglers``).
The server sends the MTA prefix of its order and repairs nothing, so the worker must not wait
for rows its own check would need, and a catch-up to the fleet's clock does not age its rows.
The server decides; the worker follows the flag of the pull it applied last."""
FLAG_FINAL = 128
"""RowChunk flag (downlink, with ``FLAG_SNAPSHOT``): the snapshot is the fleet's final model,
sent after the whole fleet finished training (``ServerEngine`` ``final_model``): once every
row of it arrived the worker computes no more and waits for its stop order, so that it stops
holding exactly the model the server evaluates last and writes to ``model.pt``. Uplink, on a
``FLAG_JOIN``: the sender holds a final model (restarted after it arrived), and the payload
says which: ``ps_final.final_model_id`` of it (8 bytes, BLAKE2b of its raw little-endian
values); a server that still owes it the model counts it delivered and stops it when that is
its own final model's id, and else (another id, or none: a sender before 2026-12-08) sends it
its final model. Older servers ignore the payload (they count it delivered)."""

MAX_CLOCK = 2 ** 31 - 2
"""Largest iteration clock any node accepts: versions are int32 and -1 is reserved."""
MAX_SLACK = 1000
"""Largest straggler slack (extra staleness, ``RowVersions.staleness_slack``) a node accepts."""

_HEADER_BYTES = 64
"""Approximate fixed cost of a message on the wire (RTPS submessage + CDR scalars); used by
``wire_size`` so that simulated byte counts include per-message overhead."""


def _u32(values=()) -> np.ndarray:
    return np.asarray(values, dtype=np.uint32)


def _u16(values=()) -> np.ndarray:
    return np.asarray(values, dtype=np.uint16)


def _f32(values=()) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def _i32(values=()) -> np.ndarray:
    return np.asarray(values, dtype=np.int32)


class MessageError(ValueError):
    """A message failed validation; the receiver drops it and counts a reject."""


class FleetSizeError(MessageError):
    """
    A message sized for another number of workers.

    The nodes were started with different ``workers`` settings, which no amount of retrying
    mends (the worker node stops on it); ``theirs`` is the sender's number.
    """


@dataclass
class RowChunk:
    """
    One chunk of a row transfer (gradients up, aggregated updates down).

    A transfer is a sequence of data chunks ``seq = 0, 1, ...`` followed by one chunk with
    ``FLAG_END``. Row ids within a data chunk are ascending and given as half-open ranges
    ``row_ranges = [start0, end0, start1, end1, ...]``; the payload holds each row's encoded
    bytes in that order. ``tensor_ids``/``scales`` give the codec scale of every tensor the
    chunk touches (codec 1: one fp32 scale per tensor; codec 2, the default: 1.0, the scales
    travel inside each row's bytes).
    """

    TYPE: ClassVar[str] = 'RowChunk'
    transfer_id: int            # unique per (sender, receiver) pair, increasing
    seq: int                    # data chunk number; on FLAG_END: number of data chunks sent
    sender: int                 # worker rank, or SERVER
    receiver: int               # worker rank, or SERVER
    kind: int                   # KIND_GRAD or KIND_UPDATE
    clock: int                  # sender's iteration clock (uplink: the stamp v[i][s] gets)
    flags: int = 0              # bit set of the FLAG_* constants above
    codec: int = 0              # codec id (see rog_ros.core.compress)
    row_ranges: np.ndarray = field(default_factory=_u32)   # uint32 pairs, ascending
    frag_offset: int = 0        # FLAG_FRAGMENT: byte offset inside the row
    tensor_ids: np.ndarray = field(default_factory=_u32)   # uint32, tensors touched
    scales: np.ndarray = field(default_factory=_f32)       # float32, one per tensor_ids entry
    payload: bytes = b''        # encoded row bytes
    rate_bps: float = 0.0       # FLAG_END: sender's smoothed throughput estimate, 0 = unknown
    schema_version: int = SCHEMA_VERSION
    incarnation: int = 0        # sender's run id (random 64-bit); a new one = it restarted
    target_incarnation: int = 0  # receiver's run id as the sender knows it (0 = unknown)
    auth_seq: int = 0           # per-sender counter for the replay window (0 = no auth)
    auth_tag: bytes = b''       # HMAC over the message with auth_tag empty (empty = none)

    def wire_size(self) -> int:
        return (_HEADER_BYTES + len(self.payload) + 4 * len(self.row_ranges)
                + 8 * len(self.tensor_ids) + len(self.auth_tag))


@dataclass
class RowVersions:
    """
    Versions ``V_i`` of the rows of one downlink transfer (Alg. 1 sends ``w_i, V_i``).

    Run-length encoded over ascending row ids: run k covers rows
    ``[run_starts[k], run_starts[k] + run_lengths[k])`` which all have the version vector
    ``versions[k*N:(k+1)*N]`` (newest iteration of each of the N workers included). Workers use
    it for their own RSP safety check and for diagnostics.

    A copy larger than ``VERSIONS_PART_BYTES`` on the wire goes in ``parts`` messages
    (``part`` 0 .. parts - 1, consecutive runs each, ``VERSIONS_PARTS_SCHEMA``): the worker
    acts only once it holds them all (``transfer.split_versions``).
    """

    TYPE: ClassVar[str] = 'RowVersions'
    transfer_id: int
    receiver: int
    n_workers: int
    run_starts: np.ndarray = field(default_factory=_u32)
    run_lengths: np.ndarray = field(default_factory=_u32)
    versions: np.ndarray = field(default_factory=_i32)
    staleness_slack: np.ndarray = field(default_factory=_u16)  # per worker, extra staleness
    #                                  the receiver's check tolerates in that column (empty:
    #                                  none; ``core/slack.py``)
    part: int = 0               # which part of the versions this is (parts > 1), from 0
    parts: int = 0              # how many parts they were split into (0: a whole copy)
    schema_version: int = SCHEMA_VERSION
    incarnation: int = 0        # sender's run id (random 64-bit); a new one = it restarted
    target_incarnation: int = 0  # receiver's run id as the sender knows it (0 = unknown)
    auth_seq: int = 0           # per-sender counter for the replay window (0 = no auth)
    auth_tag: bytes = b''       # HMAC over the message with auth_tag empty (empty = none)

    def wire_size(self) -> int:
        return (_HEADER_BYTES + 4 * len(self.run_starts) + 4 * len(self.run_lengths)
                + 4 * len(self.versions) + 2 * len(self.staleness_slack))


@dataclass
class TransferAck:
    """
    Receiver -> sender.

    Per data chunk (``final=False``): drives flow control and
    throughput. Final (``final=True``, answer to FLAG_END): the authoritative list of chunks the
    receiver applied, as ascending half-open ``chunk_ranges``; only this moves rows from
    *in flight* to *delivered* (exactly-once accounting).
    """

    TYPE: ClassVar[str] = 'TransferAck'
    transfer_id: int
    sender: int                 # the acknowledging node
    receiver: int               # the node that sent the transfer
    seq: int                    # acked chunk (per-chunk acks); number of chunks on final
    final: bool = False
    bytes_received: int = 0     # payload bytes of the acked chunk / of the whole transfer
    chunk_ranges: np.ndarray = field(default_factory=_u32)
    receive_time: float = 0.0   # receiver's clock (seconds) when the chunk / END arrived
    schema_version: int = SCHEMA_VERSION
    incarnation: int = 0        # sender's run id (random 64-bit); a new one = it restarted
    target_incarnation: int = 0  # receiver's run id as the sender knows it (0 = unknown)
    auth_seq: int = 0           # per-sender counter for the replay window (0 = no auth)
    auth_tag: bytes = b''       # HMAC over the message with auth_tag empty (empty = none)

    def wire_size(self) -> int:
        return _HEADER_BYTES + 4 * len(self.chunk_ranges)


@dataclass
class Schedule:
    """Server -> worker, sent at the start of each pull: how to behave in the next iteration."""

    TYPE: ClassVar[str] = 'Schedule'
    worker: int
    clock: int                  # the worker clock this schedule answers; answer to a JOIN:
    #                             -1 - the JOIN's transfer_id
    push_deadline_s: float      # MTA time: keep pushing rows until this long after push start;
    #                             negative = no deadline (send everything)
    compute_sleep_s: float = 0.0  # compute equalisation: idle this long before computing
    urgent_rows: np.ndarray = field(default_factory=_u32)  # row ranges the server waits for
    stop: bool = False          # training is over; the worker shuts down
    checkpoint_transfer: int = -1  # newest push of this worker the server's last durable
    #                                 checkpoint includes (-1 = none): resend what came after
    schema_version: int = SCHEMA_VERSION
    incarnation: int = 0        # sender's run id (random 64-bit); a new one = it restarted
    target_incarnation: int = 0  # receiver's run id as the sender knows it (0 = unknown)
    auth_seq: int = 0           # per-sender counter for the replay window (0 = no auth)
    auth_tag: bytes = b''       # HMAC over the message with auth_tag empty (empty = none)

    def wire_size(self) -> int:
        return _HEADER_BYTES + 4 * len(self.urgent_rows)


@dataclass
class Time:
    """``builtin_interfaces/Time``: a ROS 2 stamp, seconds and nanoseconds since the epoch."""

    sec: int = 0                # whole seconds (int32 on the wire)
    nanosec: int = 0            # 0..999999999

    @classmethod
    def from_seconds(cls, seconds: float) -> 'Time':
        """Return the stamp of ``seconds`` (e.g. ``time.time()``), rounded to 1 ns."""
        ns = int(round(float(seconds) * 1e9))
        return cls(ns // 1_000_000_000, ns % 1_000_000_000)

    def seconds(self) -> float:
        """Return the stamp as a float number of seconds."""
        return self.sec + self.nanosec * 1e-9


def as_time(value) -> Time:
    """Return ``value`` as a :class:`Time` (a Time, or seconds as a number)."""
    return value if isinstance(value, Time) else Time.from_seconds(value)


@dataclass
class LinkStats:
    """netmon -> all: what one robot's network interface is doing (10 Hz)."""

    TYPE: ClassVar[str] = 'LinkStats'
    node: int
    interface: str
    stamp: Time                 # when the counters were read (seconds are accepted and converted)
    tx_bytes: int = 0
    rx_bytes: int = 0
    tx_mbps: float = 0.0        # measured from counters over the last period
    rx_mbps: float = 0.0
    bitrate_mbps: float = -1.0  # Wi-Fi link bitrate (iw), -1 when unknown
    signal_dbm: float = 0.0     # Wi-Fi RSSI, 0 when unknown
    emulated_mbps: float = -1.0  # rate the emulator enforces now, -1 when not emulated
    schema_version: int = SCHEMA_VERSION
    incarnation: int = 0        # sender's run id (random 64-bit); a new one = it restarted
    auth_seq: int = 0           # per-sender counter for the replay window (0 = no auth)
    auth_tag: bytes = b''       # HMAC over the message with auth_tag empty (empty = none)

    def __post_init__(self):
        self.stamp = as_time(self.stamp)

    def wire_size(self) -> int:
        return _HEADER_BYTES + len(self.interface)


@dataclass
class TrainStatus:
    """Every node: training progress for dashboards, bags and `rog fleet`'s progress bar."""

    TYPE: ClassVar[str] = 'TrainStatus'
    node: int
    stamp: Time                 # publisher's wall clock (seconds are accepted and converted)
    iteration: int = 0
    loss: float = float('nan')
    accuracy: float = float('nan')
    stall_s: float = 0.0
    compute_s: float = 0.0
    comm_s: float = 0.0
    bytes_up: int = 0
    bytes_down: int = 0
    triggers: int = 0
    state: str = ''
    start_model: str = ''       # fingerprint of the starting weights ('' = not known)
    schema_version: int = TRAIN_STATUS_SCHEMA
    incarnation: int = 0        # sender's run id (random 64-bit); a new one = it restarted
    auth_seq: int = 0           # per-sender counter for the replay window (0 = no auth)
    auth_tag: bytes = b''       # HMAC over the message with auth_tag empty (empty = none)

    def __post_init__(self):
        self.stamp = as_time(self.stamp)

    def wire_size(self) -> int:
        return _HEADER_BYTES + len(self.state) + len(self.start_model)


def train_status_problem(msg: TrainStatus, max_iteration: int | None = None) -> str | None:
    """
    Return why ``msg``'s numbers cannot be a node's progress, or None when they can.

    A status steers nothing, but the server copies a worker's iteration and compute time
    into the run's record (``summary.json``) and ``rog fleet`` shows the accuracy: one
    status with ``iteration`` 10^9 or ``accuracy`` 7.0 (a bug, a foreign publisher on the
    topic, a key holder) would have gone into both. NaN stands for "not measured yet" in the
    loss and the accuracy and is accepted there; so is any loss, infinite ones included (a
    diverging run's, which is shown, never summed).
    """
    it = int(msg.iteration)
    if it < 0 or (max_iteration is not None and it > max_iteration):
        return (f'iteration {it} outside [0, {max_iteration}]' if max_iteration is not None
                else f'iteration {it} below 0')
    acc = float(msg.accuracy)
    if not (math.isnan(acc) or 0.0 <= acc <= 1.0):
        return f'accuracy {acc} outside [0, 1]'
    for name in ('stall_s', 'compute_s', 'comm_s'):
        v = float(getattr(msg, name))
        if not (math.isfinite(v) and v >= 0.0):
            return f'{name} {v} is not a duration'
    for name in ('bytes_up', 'bytes_down', 'triggers'):
        if int(getattr(msg, name)) < 0:
            return f'{name} {int(getattr(msg, name))} below 0'
    return None


Message = Union[RowChunk, RowVersions, TransferAck, Schedule, LinkStats, TrainStatus]


def ranges_from_sorted(ids: np.ndarray) -> np.ndarray:
    """Compress ascending integer ids into half-open ranges ``[s0, e0, s1, e1, ...]``."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0:
        return _u32()
    breaks = np.flatnonzero(np.diff(ids) != 1) + 1
    starts = ids[np.concatenate(([0], breaks))]
    ends = ids[np.concatenate((breaks - 1, [ids.size - 1]))] + 1
    return np.stack([starts, ends], axis=1).reshape(-1).astype(np.uint32)


def ids_from_ranges(ranges: np.ndarray, limit: int | None = None) -> np.ndarray:
    """
    Expand half-open ranges back into ascending int64 ids (vectorised).

    With ``limit``, the ranges are checked first (see ``validate_ranges``: ascending, inside
    ``[0, limit)``), so the ids allocated can never exceed ``limit``: one forged message cannot
    make the receiver allocate more than its model's row count.
    """
    if limit is not None:
        validate_ranges(ranges, limit, 'ranges')
    r = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
    if r.size == 0:
        return np.zeros(0, dtype=np.int64)
    lengths = r[:, 1] - r[:, 0]
    offsets = np.repeat(r[:, 0] - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return np.arange(int(lengths.sum()), dtype=np.int64) + offsets


def validate_ranges(ranges: np.ndarray, limit: int, what: str) -> None:
    """Raise MessageError unless ``ranges`` are ascending, non-empty and inside [0, limit)."""
    r = np.asarray(ranges, dtype=np.int64)
    if r.size % 2:
        raise MessageError(f'{what}: odd number of range bounds ({r.size})')
    r = r.reshape(-1, 2)
    if r.size == 0:
        return
    if np.any(r[:, 1] <= r[:, 0]):
        raise MessageError(f'{what}: empty or reversed range')
    if r[0, 0] < 0 or r[-1, 1] > limit:
        raise MessageError(f'{what}: range outside [0, {limit})')
    if r.shape[0] > 1 and np.any(r[1:, 0] < r[:-1, 1]):
        raise MessageError(f'{what}: ranges not ascending / overlapping')


def check_versions(msg: RowVersions, n_rows: int, n_workers: int, max_clock: int = MAX_CLOCK
                   ) -> None:
    """
    Validate a RowVersions completely (sizes, runs inside the model, version bounds).

    Raises MessageError. Receivers call it on arrival, before storing the message, so the
    versions can be applied later, at the END of their transfer, without any check failing
    after the transfer's rows were applied (issue 9 defect 5). A version of -1 is allowed: it
    marks a worker suspended from the staleness rules.
    """
    if msg.n_workers != n_workers:
        err = FleetSizeError(f'RowVersions for {msg.n_workers} workers, the fleet has '
                             f'{n_workers}')
        err.theirs = int(msg.n_workers)
        raise err
    starts = np.asarray(msg.run_starts, dtype=np.int64)
    lengths = np.asarray(msg.run_lengths, dtype=np.int64)
    versions = np.asarray(msg.versions, dtype=np.int64)
    if starts.size != lengths.size or versions.size != starts.size * n_workers:
        raise MessageError('RowVersions: runs and versions differ in length')
    if starts.size > n_rows:
        raise MessageError('RowVersions: more runs than rows')
    validate_ranges(np.stack([starts, starts + lengths], 1).reshape(-1), n_rows,
                    'RowVersions runs')
    if versions.size and (versions.min() < -1 or versions.max() > max_clock):
        raise MessageError(f'RowVersions: version outside [-1, {max_clock}]')
    slack = np.asarray(msg.staleness_slack, dtype=np.int64)
    if slack.size not in (0, n_workers):
        raise MessageError(f'RowVersions: staleness_slack for {slack.size} workers, the fleet '
                           f'has {n_workers}')
    if slack.size and (slack.min() < 0 or slack.max() > MAX_SLACK):
        raise MessageError(f'RowVersions: staleness_slack outside [0, {MAX_SLACK}]')
    part, parts = int(msg.part), int(msg.parts)
    if not (0 <= parts <= MAX_VERSIONS_PARTS and 0 <= part < max(parts, 1)) or parts == 1:
        raise MessageError(f'RowVersions: part {part} of {parts} (parts: 0 for a whole copy, '
                           f'else 2..{MAX_VERSIONS_PARTS}, part below it)')


def schema_version_of(type_name: str) -> int:
    """Return the layout version this build speaks for message type ``type_name``."""
    return TRAIN_STATUS_SCHEMA if type_name == 'TrainStatus' else SCHEMA_VERSION


def check_schema(msg) -> None:
    """Refuse a message of another layout version (a part of RowVersions: its own, 4)."""
    want = schema_version_of(msg.TYPE)
    if msg.TYPE == 'RowVersions' and int(getattr(msg, 'parts', 0)) > 1:
        want = VERSIONS_PARTS_SCHEMA
    if msg.schema_version != want:
        raise MessageError(
            f'{msg.TYPE}: schema_version {msg.schema_version}, this build speaks '
            f'{want}; rebuild all nodes from the same release')


def new_incarnation() -> int:
    """Draw a random non-zero 64-bit incarnation id (drivers: one per process start)."""
    return random.SystemRandom().getrandbits(64) or 1


def stamp_incarnations(msg, incarnation: int, target_incarnation: int | None) -> None:
    """
    Fill the run ids a message leaves unset (0) before it is sent.

    ``incarnation`` becomes the message's ``incarnation``; ``target_incarnation`` (the
    receiver's run id as the sender knows it) that of a directed message, unless it is None
    (receiver not addressable). The server and the worker engines stamp every send this way.
    """
    if not msg.incarnation:
        msg.incarnation = incarnation
    if (target_incarnation is not None and hasattr(msg, 'target_incarnation')
            and not msg.target_incarnation):
        msg.target_incarnation = target_incarnation
