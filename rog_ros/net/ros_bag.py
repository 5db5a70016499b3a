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
Read a robot's link from a ROS 2 bag of the LinkStats that its netmon published.

The bag is MCAP (``rog fleet --record``, ``ros2 bag record`` from Iron on) or SQLite (``.db3``,
``ros2 bag record`` before Iron). Of the folder that ``ros2 bag record -o NAME`` writes, its
file is read (``NAME/NAME_0.mcap``); the folder is refused, naming the file.

netmon publishes a LinkStats ten times a second on ``.../status/<netmon>/link_stats``; the
rate read is what netmon records by default (``record_source`` ``throughput``): the larger of
the interface's two directions, ``max(tx_mbps, rx_mbps)``, from the message's ``stamp`` on.
The first message of each netmon run (a new ``incarnation``) is left out, as netmon leaves it
out of its own record: its counters had no earlier reading, so its rates are no measurement.
Messages whose stamp does not increase (a message recorded twice) are left out too, but a
stamp more than :data:`STEP_BACK_NS` behind the last one read (of its netmon run or of the run
before it) is the robot's wall clock stepping back (NTP): the samples after it go on one
sampling period after the last (not left out until the clock caught up; docs/faults.md,
"Clocks"), so a run recorded after a reboot whose clock is behind is joined to the run before
it end to end. A step forward cannot be told from a pause of netmon and is kept as a gap. The
runs of a bag that holds several (netmon restarted) follow one another on the stamps' time
axis: ``load_trace`` warns of the gap between them, as of a gap in a table. A bag with the
links of several robots (each robot's netmon recorded together; ``rog fleet --record`` on one
machine reports every robot, but each with this machine's interface, the links being emulated)
is read for one robot only when it is told which (``node``); else it is refused, naming them.
``read_bag_links`` reads every robot's link at once (``rog trace convert BAG --out DIR``).

The CDR of a LinkStats is read here field by field (XCDR1, as ``rog_ros.transport.idl``
writes it and ROS 2 does), so reading a bag needs no DDS. MCAP needs the ``mcap`` package
(``pip install mcap``); a recording cut short (a recorder killed, a disk full) is read up to
its last whole chunk.
"""

from __future__ import annotations

import collections
import hashlib
import io
import os
import re
import sqlite3
import struct
import tempfile
import threading

from rog_ros import file_identity
from rog_ros.net import iperf
from rog_ros.protocol.messages import SCHEMA_VERSION

MCAP_MAGIC = b'\x89MCAP0\r\n'
SQLITE_MAGIC = b'SQLite format 3\x00'
LINK_STATS_TYPE = 'rog_ros/msg/LinkStats'
BAG_SUFFIXES = ('.mcap', '.db3')
STEP_BACK_NS = 10 ** 9
"""A stamp this far behind the last one read (this netmon run's or the one before) is a clock
step, not a message recorded twice or out of order."""
NETMON_PERIOD_NS = 10 ** 8
"""netmon's sampling period at its default 10 Hz."""


FIELDS = ('throughput', 'emulated', 'bitrate')
"""Which rate of a LinkStats a trace follows, by netmon's ``record_source`` names: the measured
``max(tx_mbps, rx_mbps)`` (the default), ``emulated_mbps`` (the rate the link emulator
enforced) or ``bitrate_mbps`` (the Wi-Fi bitrate); the last two are -1 when not known."""
ROBOT_TAG = 'robot='
"""Written before a robot's name in a ``--trace`` entry, ``BAG#robot=NAME``: the robot ``NAME``
even when that is one of ``FIELDS`` (``rog_ros.net.trace_spec.parse``)."""
FIELD_NAMES = {'throughput': 'max(tx_mbps, rx_mbps)', 'emulated': 'emulated_mbps',
               'bitrate': 'bitrate_mbps'}
"""The LinkStats field (or fields) each of ``FIELDS`` reads."""


_UNKNOWN = {'emulated': 'its link was not emulated: netmon reports the rate that --trace '
                        'enforces on a worker rank', 'bitrate': 'iw gave no Wi-Fi bitrate'}
"""Why a LinkStats field of ``FIELDS`` holds -1."""


class BagError(ValueError):
    """A bag that holds no link this reader can take; the message says what to do."""


class NoRateError(BagError):
    """A robot whose LinkStats hold no value of the rate asked for (every one -1)."""


def bag_kind(path) -> str | None:
    """Return 'MCAP bag' or 'SQLite bag' by a regular file's first bytes, else None."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path, 'rb') as fh:
            head = fh.read(16)
    except OSError:
        return None
    return bag_kind_of(head)


def bag_kind_of(data: bytes) -> str | None:
    """Return 'MCAP bag' or 'SQLite bag' by a file's first bytes ``data``, else None."""
    if data.startswith(MCAP_MAGIC):
        return 'MCAP bag'
    if data.startswith(SQLITE_MAGIC):
        return 'SQLite bag'
    return None


def bag_files(folder) -> list:
    """
    Return the bag files of a ``ros2 bag record`` folder, in order; [] if it is none.

    A recorder killed before it closed the bag (Humble writes ``metadata.yaml`` at the end)
    left no ``metadata.yaml``: then its files are told by their first bytes.
    """
    try:
        names = [n for n in os.listdir(folder) if n.endswith(BAG_SUFFIXES)]
    except OSError:
        return []
    paths = [os.path.join(folder, n) for n in sorted(names, key=lambda n: (len(n), n))]
    if os.path.isfile(os.path.join(folder, 'metadata.yaml')):
        return paths
    return [path for path in paths if bag_kind(path)]


def link_stats(data: bytes, field: str = 'throughput') -> tuple:
    """
    Return ``(node, stamp_ns, rate_mbps, incarnation)`` of a LinkStats's CDR bytes.

    ``rate_mbps`` is ``max(tx_mbps, rx_mbps)``, or the field ``field`` names (``FIELDS``; None:
    the tuple of the three).
    Raises ``ValueError`` for bytes too short, an encapsulation other than plain CDR, or
    another ``schema_version``.
    """
    if len(data) < 4 or data[0] != 0 or data[1] not in (0, 1):
        raise ValueError('not plain CDR')
    order = '<' if data[1] == 1 else '>'
    body = memoryview(data)[4:]

    def read(fmt: str, pos: int, align: int) -> tuple:
        pos = (pos + align - 1) // align * align
        return struct.unpack_from(order + fmt, body, pos), pos + struct.calcsize(order + fmt)

    (version,), pos = read('H', 0, 2)
    if version != SCHEMA_VERSION:
        raise ValueError(f'schema_version {version}, not {SCHEMA_VERSION}')
    (node,), pos = read('q', pos, 8)
    (length,), pos = read('I', pos, 4)
    (sec, nanosec), pos = read('iI', pos + length, 4)
    (_, _, tx, rx, bitrate, _, emulated, incarnation), pos = read('qqdddddQ', pos, 8)
    rates = (max(tx, rx), emulated, bitrate)       # FIELDS' order
    return node, sec * 10 ** 9 + nanosec, rates if field is None else rates[
        FIELDS.index(field)], incarnation


def _mcap_messages(path, cut: list, data: bytes | None = None):
    """
    Yield ``(topic, type, data)`` of an MCAP file; ``cut`` gets a note if it ends early.

    ``data``: the file's bytes, read already (else ``path`` is read).
    """
    try:
        from mcap.exceptions import UnsupportedCompressionError
        from mcap.reader import NonSeekingReader
    except ImportError:
        raise BagError(f'{path}: an MCAP bag; reading one needs the mcap package (pip install '
                       'mcap)') from None
    with (open(path, 'rb') if data is None else io.BytesIO(data)) as fh:
        try:        # in file order: sorting by time first read it all, and a cut, nothing
            for schema, channel, message in NonSeekingReader(fh, validate_crcs=True).iter_messages(
                    log_time_order=False):      # (a damaged chunk: not read as garbled rates)
                yield channel.topic, schema.name if schema else '', message.data
        except UnsupportedCompressionError as exc:      # lz4 chunks without the lz4 package
            raise BagError(f'{path}: {exc}; install the package for it (pip install lz4) or '
                           'record the bag uncompressed or with zstd') from None
        except Exception as exc:  # noqa: B902 - the decompressors' own (zstandard.ZstdError)
            text = str(exc).strip().splitlines()
            cut.append(f'{type(exc).__name__}: {text[0][:80]}' if text else type(exc).__name__)


def _sqlite_messages(path, topics: set, shown=None):
    """
    Yield ``(topic, type, data)`` of the LinkStats in a rosbag2 SQLite file, in time order.

    Every topic's name goes into ``topics``; ``shown`` is the file's name in messages (default
    ``path``: another when ``path`` is a private copy). Only LinkStats are read: ``ros2 bag
    record -a`` of a fleet holds its row chunks too, gigabytes the reader does not need.
    """
    try:
        con = sqlite3.connect(f'file:{os.path.abspath(path)}?mode=ro', uri=True)
        try:
            topics.update(name for name, in con.execute('SELECT name FROM topics'))
            rows = con.execute('SELECT t.name, t.type, m.data FROM messages m JOIN topics t '
                               'ON m.topic_id = t.id WHERE t.type = ? ORDER BY m.timestamp',
                               (LINK_STATS_TYPE,)).fetchall()
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise BagError(f'{shown or path}: a SQLite file but not a readable ROS 2 bag ({exc}); '
                       'record the link with netmon (record_trace:=link.csv) instead') from None
    yield from rows


def read_bag(path, lines=None, node=None, data: bytes | None = None,
             field: str = 'throughput') -> tuple:
    """
    Return ``(times_s, rates_mbps, end_s)`` of the LinkStats in a bag (``lines`` unused).

    ``node``: the robot whose link to read (None: the bag's only one), by its name
    (``robots``) or the rank in its LinkStats (an int, or a str of one); ``data``: the bag's
    bytes, read already (a SQLite bag's are read from a private copy); ``field``: the rate
    read (``FIELDS``). Raises ``BagError`` when the bag has no LinkStats, several robots and
    no ``node``, a ``node`` it does not hold, no value of ``field``, or LinkStats of another
    version; a file cut short is read up to the cut, with a warning.
    """
    links = _links(path, data, field)
    if node is None and len(links) > 1:
        raise BagError(f'{path}: a ROS 2 bag with the links of {len(links)} robots '
                       f'({_listed(links)}); a trace is one link: pick one robot with '
                       f'--trace {path}#NAME, or give the bag to rog sim / compare / fleet, '
                       'whose robot r follows the bag robot of rank r'
                       + _robot_tags(path, links))
    who = next(iter(links)) if node is None else pick(path, links, node)
    return _link(path, who, links[who][1], field)


def read_bag_links(path, data: bytes | None = None, field: str = 'throughput',
                   only=None) -> dict:
    """
    Return ``{name: (times_s, rates_mbps, end_s)}`` of every robot in a bag, reading it once.

    In ``robots``'s order; ``only``: the names of the robots to read (None: every one).
    Raises ``BagError`` as ``read_bag`` does, also when one robot has too few LinkStats.
    """
    links = _links(path, data, field)
    return {who: _link(path, who, links[who][1], field) for who in links
            if only is None or who in only}


def robots(path, data: bytes | None = None) -> list:
    """
    Return ``[(name, rank), ...]`` of the robots whose links a bag holds, sorted by name.

    A robot's name is its netmon's node name, the topic's segment before ``link_stats``
    (``netmon_2``, ``netmon``); a netmon that reported several robots (``rog fleet`` on one
    machine reports every worker) gives each ``NETMON:RANK`` (``netmon:0``). ``rank`` is the
    ``node`` its LinkStats carry: the worker's rank, -1 for a netmon that reported its own
    robot alone (the server's). Names sort with their numbers in numeric order.
    """
    return [(name, rank) for name, (rank, _) in _parsed(path, data)[1].items()]


def rank_plan(path, named: list) -> tuple:
    """
    Return ``(names, note)``: robot r of a fleet follows ``names[r % len(names)]`` of a bag.

    ``named``: the bag's ``robots``. Robot r follows the bag's robot of rank r (the node in
    its LinkStats; the server's netmon, rank -1, is no worker's link) when the bag holds
    workers' links, else (netmons that reported their robot alone) the r-th robot by name.
    ``note`` says so in one line ('' for a bag of one robot). Raises ``BagError`` when ranks
    are missing (0, 1, 3: robot 2 would take robot 3's link and every later robot its
    neighbour's) or repeat (two netmons reported one rank).
    """
    if len(named) == 1:
        return [named[0][0]], ''
    workers = sorted((rank, name) for name, rank in named if rank >= 0)
    shown = ', '.join(f'{name} (rank {rank})' for name, rank in named)
    explicit = (f'give each robot its own with a --trace list, '
                f'{robot_entry(path, named[0][0])},{robot_entry(path, named[1][0])},...')
    if not workers:
        names = [name for name, _ in named]
        return names, (f'{path}: its {len(names)} robots carry no worker rank (each netmon '
                       f'reported its own robot); robot r follows the r-th by name, mod '
                       f'{len(names)}: {", ".join(names)}')
    ranks = [rank for rank, _ in workers]
    if len(set(ranks)) < len(ranks):
        twice = sorted({rank for rank in ranks if ranks.count(rank) > 1})
        raise BagError(f'{path}: rank {twice[0]} has the links of several robots ({shown}); '
                       f'{explicit}')
    missing = sorted(set(range(ranks[-1] + 1)) - set(ranks))
    if missing:
        raise BagError(f'{path}: no link of rank {missing[0]} in the bag ({shown}), so robot '
                       f'{missing[0]} has none and robot r cannot follow rank r; {explicit}')
    names = [name for _, name in workers]
    server = [name for name, rank in named if rank < 0]
    return names, (f'{path}: robot r follows the bag robot of rank r mod {len(names)} '
                   f'({", ".join(names)})'
                   + (f'; {", ".join(server)} (rank -1, the server\'s) is no worker\'s link'
                      if server else ''))


def pick(path, links, node) -> str:
    """
    Return the name of the robot ``node`` selects among a bag's ``links`` (or ``robots``).

    ``node``: a robot's name, or a rank (an int, or a str of digits) that one robot carries.
    Raises ``BagError`` naming the robots present when none or several match.
    """
    named = ({name: rank for name, (rank, _) in links.items()} if isinstance(links, dict)
             else dict(links))
    if str(node) in named:
        return str(node)
    if re.fullmatch(r'-?\d+', str(node).strip()):
        match = [name for name, rank in named.items() if rank == int(node)]
        if len(match) == 1:
            return match[0]
        if match:
            raise BagError(f'{path}: several robots carry rank {node} ({", ".join(match)}); '
                           'pick one by its name')
    shown = ', '.join(f'{name} (rank {rank})' for name, rank in named.items())
    raise BagError(f'{path}: no robot {node} in the bag; its robots: {shown}')


def robot_entry(path, name: str) -> str:
    """Return the ``--trace`` entry of the bag ``path``'s robot ``name``: ``path#name``."""
    tag = ROBOT_TAG if name in FIELDS or name.startswith(ROBOT_TAG) else ''
    return f'{path}#{tag}{name}'


def reserved_note(path, field: str, data: bytes | None = None) -> str:
    """
    Return a line saying that ``#field`` is a rate, not the bag's robot of that name ('').

    ``BAG#emulated`` reads the rate ``emulated`` (``rog_ros.net.trace_spec.parse``), so a
    netmon node named ``emulated`` (or ``throughput``, ``bitrate``) is ``BAG#robot=emulated``.
    """
    named = dict(robots(path, data))
    if field not in named:
        return ''
    return (f'{path}#{field} reads the rate {FIELD_NAMES[field]} ({", ".join(FIELDS)} are '
            f"rates); the bag's robot named {field} is {robot_entry(path, field)}")


def _robot_tags(path, links: dict) -> str:
    """Return how to pick the robots of ``links`` named like a rate ('' when none is)."""
    named = [name for name in links if name in FIELDS]
    if not named:
        return ''
    return '; ' + ', '.join(f'{name} is a rate, so the robot named {name} is '
                            f'{robot_entry(path, name)}' for name in named)


def _listed(links: dict) -> str:
    """Return the robots of ``links`` as messages list them: ``netmon_0 (rank 0), ...``."""
    return ', '.join(f'{name} (rank {rank})' for name, (rank, _) in links.items())


def _natural(name: str) -> list:
    """Return a sort key of ``name`` whose digit runs compare as numbers (netmon_2 < _10)."""
    return [(int(part), '') if part.isdigit() else (-1, part)
            for part in re.split(r'(\d+)', name)]


def _netmon(topic: str) -> str:
    """Return the netmon node name of a LinkStats topic (``/rog/status/netmon_2/link_stats``)."""
    parts = [p for p in str(topic).split('/') if p]
    return parts[-2] if len(parts) >= 2 else str(topic)


def _links(path, data: bytes | None, field: str = 'throughput') -> dict:
    """
    Return ``{name: (rank, [(stamp_ns, rate_mbps, incarnation), ...])}`` of a bag's robots.

    ``rate_mbps`` is the rate ``field`` names. A bag's messages are parsed once per process
    while its bytes stay (``CACHE_SIZE`` bags, keyed by their SHA-256): a run that resolves a
    bag of several robots reads its robots and then each robot's link, and a parse of an
    hour of three robots' LinkStats takes seconds.
    """
    if field not in FIELDS:
        raise BagError(f'{path}: no rate {field!r} in a LinkStats; one of {", ".join(FIELDS)}')
    return _rates(_parsed(path, data)[1], field)


def _rates(parsed: dict, field: str) -> dict:
    """Return ``_links``'s result of a bag's ``_parse`` result ``parsed``."""
    index = FIELDS.index(field)
    return {name: (rank, [(stamp, rates[index], run) for stamp, rates, run in messages])
            for name, (rank, messages) in parsed.items()}


def _parsed(path, data: bytes | None) -> tuple:
    """
    Return ``(key, _parse's result)`` of a bag, parsed once while its bytes stay.

    The key is the bag's bytes' digest alone: one bag named by two paths (a link, a copy) is
    parsed once. A bag read by path that changes while it is hashed and parsed (a recorder
    still writing it) is parsed again at the next call, not kept under the hash of what it
    held before.
    """
    kind = bag_kind(path) if data is None else None
    wal = _wal(path, data)
    before = _stat_key(path, kind) if kind else None
    if data is not None:        # (as _file_digest hashes the file and its -wal)
        key = data_digest(data, wal)
    else:       # (hashed and parsed in blocks: a bag of gigabytes is not held in memory)
        key = _file_digest(path, kind) if kind else None
    with _CACHE_LOCK:
        parsed = _CACHE.get(key) if key else None
        if parsed is not None:
            _CACHE.move_to_end(key)
    if parsed is None:
        parsed = _parse(path, data, wal)
        if before is not None and not _unchanged(path, kind, before):
            key = None      # (neither it nor its clock is kept: _clock)
        if key:
            with _CACHE_LOCK:
                _CACHE[key] = parsed
                while len(_CACHE) > CACHE_SIZE:
                    _CACHE.popitem(last=False)
    return key, parsed


def _unchanged(path, kind, before: tuple) -> bool:
    """Return whether a bag's files still have the ``_stat_key`` ``before``."""
    try:
        return _stat_key(path, kind) == before
    except OSError:
        return False


def _file_digest(path, kind: str) -> bytes:
    """
    Return the SHA-256 of the bag file ``path`` (of ``bag_kind`` ``kind``), read in blocks.

    A bag of gigabytes (``ros2 bag record -a`` holds the fleet's row chunks) is not held in
    memory: it is parsed from the file too, as it was before the cache. A SQLite bag's
    ``-wal`` file is hashed with it: SQLite reads both (a bag whose recorder still runs, or
    was killed, has its last messages there). Without one, the key is the one of the file's
    bytes read already (``data_digest``): a bag read both ways is parsed once. Hashed once
    per process while the files stay as they were (``_identity``).
    """
    return _identity(path, kind)[0]


def file_digest(path) -> bytes:
    """
    Return ``data_digest(file_bytes(path))`` of the bag ``path``, hashed in blocks.

    The same value, without the bag in memory (a bag of gigabytes, ``ros2 bag record -a``),
    and hashed once per process while the bag (and a SQLite bag's -wal) stays as it was
    (``_identity``). Raises ``FileNotFoundError`` for a path that is no file (a bag removed
    since it was read) and ``BagError`` for a file that is no bag.
    """
    kind = bag_kind(path)
    if not kind and not os.path.isfile(path):
        raise FileNotFoundError(f'no such file: {path}')
    if not kind:
        raise BagError(f'{path}: not a ROS 2 bag (MCAP or SQLite)')
    return _file_digest(path, kind)


def data_digest(data: bytes, wal: bytes | None = None) -> bytes:
    """
    Return the SHA-256 that keys a file's bytes ``data`` (``file_bytes``'s), its -wal's too.

    ``wal``: a SQLite bag's ``-wal`` bytes (default: those ``file_bytes`` read with ``data``).
    A file without one is keyed by ``hashlib.sha256(data)``, as it always was; with one, by
    both, as ``_file_digest`` hashes a bag read by path.
    """
    digest = hashlib.sha256(data)
    wal = getattr(data, 'wal', None) if wal is None else wal
    if wal is not None:         # (not joined: a copy of a -wal of megabytes)
        digest.update(b'\0-wal\0')
        digest.update(wal)
    return digest.digest()


class BagBytes(bytes):
    """The bytes of a SQLite bag with those of its ``-wal`` file (``wal``), read together."""

    wal = None


def file_bytes(path) -> bytes:
    """
    Return the bytes of the file ``path`` that a reader reads: a SQLite bag's with its -wal.

    A SQLite bag whose recorder still runs (or was killed) has its last messages in its
    ``-wal``: a ``BagBytes`` carries them, so that what is hashed (``data_digest``) is what is
    parsed (``read_bag(data=...)``), even when the ``-wal`` grows in between. Its ``-shm`` is
    not read: a bag given as bytes is read from a private copy of the two (``_parse``).
    The two are read again while the bag file changed as they were read (``READS``): a
    checkpoint in between (the recorder's SQLite moving the -wal's messages into the file)
    gave the file before it and the -wal after it, a bag without those messages (a -wal that
    only grew is read with the file it belongs to).
    """
    for _ in range(READS):
        before = _stat_key(path, None)
        with open(path, 'rb') as fh:
            data = fh.read()
        if bag_kind_of(data) != 'SQLite bag':
            return data
        data = BagBytes(data)
        try:
            with open(f'{path}-wal', 'rb') as fh:
                data.wal = fh.read()
        except FileNotFoundError:
            pass
        if _unchanged(path, None, before):
            break
    return data


READS = 3
"""Reads of a SQLite bag and its -wal that ``file_bytes`` tries for an unchanged pair."""


IDENTITY_CACHE_SIZE = 16
"""Bags whose hashes a process keeps by the files' stat (``_identity``)."""
_IDENTITIES = collections.OrderedDict()     # _stat_key -> (bag digest, recording id's hex)


def _stat_key(path, kind) -> tuple:
    """Return what says that a bag (and a SQLite bag's -wal) is the file it was: its stat."""
    key = ()
    for k, name in enumerate((str(path),) + ((f'{path}-wal',) if kind == 'SQLite bag' else ())):
        try:
            key += (file_identity.identity(name),)
        except FileNotFoundError:
            if not k:
                raise
            key += (None,)
    return key


def _identity(path, kind) -> tuple:
    """
    Return ``(digest, recording)`` of a bag: ``_file_digest``'s, and ``recording_id``'s hex.

    Both are hashed in one pass over the bag, read in blocks, once per process per bag file
    (its path, inode, size, mtime and ctime, and its -wal's): ``link_for`` resolves a bag for
    every rank and ``recordings`` names its id for each, and a bag of gigabytes (``ros2 bag
    record -a``) took seconds to hash each time. A bag rewritten while it is read is hashed
    again at the next call, and so is a bag written within ``file_identity.RACY_NS`` of the
    call: a rewrite of as many bytes in the same tick of the filesystem's clock (2 s on FAT)
    would keep its stat, and the old hash was used (``file_identity.racy``).
    """
    taken = file_identity.now_ns()
    before = _stat_key(path, kind)
    with _CACHE_LOCK:
        found = _IDENTITIES.get(before)
    if found is not None:
        return found
    digest, recording = hashlib.sha256(), hashlib.sha256(CLOCK_VERSION)
    for k, name in enumerate((str(path),) + ((f'{path}-wal',) if kind == 'SQLite bag' else ())):
        try:
            with open(name, 'rb') as fh:
                if k:
                    digest.update(b'\0-wal\0')
                for block in iter(lambda: fh.read(1 << 20), b''):
                    digest.update(block)
                    if not k:
                        recording.update(block)
        except FileNotFoundError:
            if not k:
                raise
    found = digest.digest(), recording.hexdigest()[:16]
    if _unchanged(path, kind, before) and not file_identity.racy(before, taken):
        with _CACHE_LOCK:
            _IDENTITIES[before] = found
            while len(_IDENTITIES) > IDENTITY_CACHE_SIZE:
                _IDENTITIES.popitem(last=False)
    return found


CACHE_SIZE = 2
"""Bags whose parsed LinkStats a process keeps (``_links``)."""
_CACHE = collections.OrderedDict()      # data_digest of a bag's bytes -> _parse's result
_CLOCKS = {}                            # data_digest of a bag's bytes -> _clock's
_CACHE_LOCK = threading.Lock()


def _wal(path, data: bytes | None) -> bytes | None:
    """
    Return the ``-wal`` file's bytes of a SQLite bag given as its bytes ``data``, else None.

    A recorder killed before it closed the bag left its last messages there (all of them, in
    a short recording): SQLite reads them with the file, so a bag read from its bytes is read
    with them too, as it is read by path (``_file_digest``).
    """
    if data is None or bag_kind_of(data) != 'SQLite bag':
        return None
    if isinstance(data, BagBytes):      # (read with the bag: file_bytes)
        return data.wal
    try:
        with open(f'{path}-wal', 'rb') as fh:
            return fh.read()
    except OSError:
        return None


def _parse(path, data: bytes | None, wal: bytes | None = None) -> dict:
    """Return ``{name: (rank, [(stamp_ns, rates, incarnation), ...])}``, rates per FIELDS."""
    cut, topics = [], set()
    if data is not None and bag_kind_of(data) == 'SQLite bag':
        with tempfile.TemporaryDirectory(prefix='rog_bag_') as folder:    # SQLite opens files
            copy = os.path.join(folder, os.path.basename(str(path)))
            for name, content in ((copy, data), (f'{copy}-wal', wal)):
                if content is not None:
                    with open(name, 'wb') as fh:
                        fh.write(content)
            return _collect(path, _sqlite_messages(copy, topics, path), cut, topics)
    mcap = (bag_kind(path) if data is None else bag_kind_of(data)) == 'MCAP bag'
    messages = _mcap_messages(path, cut, data) if mcap else _sqlite_messages(path, topics)
    return _collect(path, messages, cut, topics)


def _collect(path, messages, cut: list, topics: set) -> dict:
    """Return ``_parse``'s result of a bag's ``messages`` (``(topic, type, data)``)."""
    links, bad, first = {}, 0, ''
    for topic, type_name, data in messages:
        topics.add(topic)
        if type_name != LINK_STATS_TYPE:
            continue
        try:
            who, stamp, rates, incarnation = link_stats(bytes(data), None)
        except (ValueError, struct.error) as exc:
            bad += 1
            first = first or str(exc)
            continue
        links.setdefault((_netmon(topic), who), []).append((stamp, rates, incarnation))
    if cut and links:
        iperf.warn(f'{path}: the bag ends early or is damaged there ({cut[0]}; its recorder '
                   'was stopped?); its messages before that are read')
    if not links:
        listed = ', '.join(sorted(topics)[:4]) + (', ...' if len(topics) > 4 else '')
        why = (f': its LinkStats do not read ({first}; recorded by another version of '
               'rog_ros?)' if bad else f' (its topics: {listed})' if topics
               else ' (it holds no message)')
        if cut and not bad:
            raise BagError(f'{path}: a ROS 2 bag that ends early or is damaged before its first '
                           f'LinkStats ({cut[0]}); record it again, or record the link with '
                           'netmon (record_trace:=link.csv)')
        raise BagError(f'{path}: a ROS 2 bag without a LinkStats{why}; record '
                       "netmon's .../link_stats topic in it, or record the link with netmon "
                       '(record_trace:=link.csv)')
    per_netmon = {}
    for netmon, who in links:
        per_netmon[netmon] = per_netmon.get(netmon, 0) + 1
    named = {(netmon if per_netmon[netmon] == 1 else f'{netmon}:{who}'): (who, messages)
             for (netmon, who), messages in links.items()}
    return {name: named[name] for name in sorted(named, key=_natural)}


def recording_id(path) -> str | None:
    """
    Return the recording id of the bag ``path`` of several robots, else None.

    The files ``rog trace convert`` writes of a bag's robots carry it (``traces.save_trace``)
    so that a list of them, or of them and the bag's robots, replays in step, as the bag does
    (``rog_ros.net.trace_spec.recordings``). Every conversion of one bag is on its one clock
    (``placement``: whatever the rate read, --scale or robot), so all share the id; the
    clock's version is hashed in, so files written before the clock was the whole
    recording's (2026-12-06, each conversion's robots') are no recording of these. The bag is
    read in blocks, not held in memory, and hashed once per process while it stays as it was
    (``_identity``, in the pass that keys its parse: ``robots``). Of a SQLite bag the id is
    of the bag file alone, its ``-wal`` not hashed in (as it always was).
    """
    if len(robots(path)) < 2:
        return None
    return _identity(path, bag_kind(path))[1]


CLOCK_VERSION = b'rog_ros recording clock 2\0'
"""Hashed into a recording id with the bag's bytes (``recording_id``)."""


def placement(path, node, data: bytes | None = None, field: str = 'throughput') -> tuple:
    """
    Return ``(lead_s, period_s)`` of robot ``node`` of a bag of several robots on its clock.

    The recording's clock, on which its robots replay in step (``traces.in_step``): time 0
    is the earliest first sample of any robot of the bag, and ``period_s`` ends with the
    latest end of any robot's link (``read_bag``'s ``end_s`` after its first stamp), both of
    the measured rate, which every LinkStats carries: one clock for the whole recording,
    whichever robots a run uses and whichever rate (``FIELDS``) it reads, so that a bag and
    the files ``rog trace convert`` wrote of it replay alike. ``lead_s``: the time on it of
    the robot's first sample (``read_bag``'s time 0); stamps are subtracted in whole ns, so a
    time is the recording's to the ns, not to the 0.2 us of an epoch in float seconds. A robot
    with fewer than two samples is no link and does not count. ``node``, ``data`` and
    ``field`` as ``read_bag`` takes them. ``(None, None)`` for a bag of one robot, which is its
    own clock. The bag is hashed and looked up once (``_parsed``: a bag read by path is read
    in blocks), and its clock computed once per bag bytes.
    """
    key, parsed = _parsed(path, data)
    if len(parsed) < 2:
        return None, None
    links = _rates(parsed, field)
    who = pick(path, links, node)
    start_ns, period_s = _clock(path, key, parsed)
    return (_stamps(path, who, links[who][1], field)[0][0] - start_ns) * 1e-9, period_s


def _clock(path, key, parsed: dict) -> tuple:
    """Return ``(start_ns, period_s)`` of a bag's ``_parsed`` result (``placement``)."""
    with _CACHE_LOCK:
        clock = _CLOCKS.get(key) if key else None
    if clock is not None:
        return clock
    spans = []
    for who, (_, messages) in _rates(parsed, 'throughput').items():
        try:
            stamps, _ = _stamps(path, who, messages)
        except BagError:
            continue
        times = [(ns - stamps[0]) * 1e-9 for ns in stamps]      # (as _link: its end_s)
        step = sorted(b - a for a, b in zip(times, times[1:]))[(len(times) - 1) // 2]
        spans.append((stamps[0], times[-1] + step))
    if not spans:
        raise BagError(f'{path}: no robot of the bag has two or more LinkStats; a trace needs '
                       'two or more (netmon publishes ten a second)')
    start = min(first for first, _ in spans)
    clock = start, max((first - start) * 1e-9 + end for first, end in spans)
    if key:
        with _CACHE_LOCK:
            _CLOCKS[key] = clock
            while len(_CLOCKS) > CACHE_SIZE:
                _CLOCKS.pop(next(iter(_CLOCKS)))
    return clock


def _link(path, who: str, messages: list, field: str = 'throughput') -> tuple:
    """Return ``(times_s, rates_mbps, end_s)`` of robot ``who``'s LinkStats ``messages``."""
    stamps, rates = _stamps(path, who, messages, field)
    times = [(ns - stamps[0]) * 1e-9 for ns in stamps]   # whole ns: exact before the float
    step = sorted(b - a for a, b in zip(times, times[1:]))[(len(times) - 1) // 2]
    return times, rates, times[-1] + step


def _stamps(path, who: str, messages: list, field: str = 'throughput') -> tuple:
    """Return ``(stamps_ns, rates_mbps)`` of robot ``who``'s samples (``_link``'s rules)."""
    if field != 'throughput' and all(m[1] < 0 for m in messages):
        raise NoRateError(f'{path}: robot {who} has no {FIELD_NAMES[field]} in its '
                          f'LinkStats (every one -1: {_UNKNOWN[field]}); drop "#{field}" to '
                          'read the measured rate')
    stamps, rates, seen = [], [], set()
    shift, run = 0, None     # ns added to a run's stamps after its clock stepped back
    for stamp, rate, incarnation in messages:
        if incarnation not in seen:
            seen.add(incarnation)        # netmon's first message of a run measured nothing
            continue
        if rate < 0 and field != 'throughput':   # -1: not emulated (yet), bitrate unknown
            continue
        if incarnation != run:
            shift, run = 0, incarnation
        ns = stamp + shift
        if stamps and ns <= stamps[-1] - STEP_BACK_NS:      # the clock stepped back
            period = _period_ns(stamps)
            shift += stamps[-1] + period - ns
            ns = stamps[-1] + period
        if stamps and ns <= stamps[-1]:
            continue
        stamps.append(ns)
        rates.append(rate)
    if len(stamps) < 2:
        raise BagError(f'{path}: robot {who} has {len(stamps)} LinkStats with a measured rate; '
                       'a trace needs two or more (netmon publishes ten a second)')
    return stamps, rates


def _period_ns(stamps) -> int:
    """Return the median gap of the last stamps (ns), netmon's 0.1 s before there are two."""
    last = stamps[-51:]
    gaps = sorted(b - a for a, b in zip(last, last[1:]))
    return gaps[len(gaps) // 2] if gaps else NETMON_PERIOD_NS
