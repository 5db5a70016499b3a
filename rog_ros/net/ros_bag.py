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

import io
import os
import sqlite3
import struct
import tempfile

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


class BagError(ValueError):
    """A bag that holds no link this reader can take; the message says what to do."""


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


def link_stats(data: bytes) -> tuple:
    """
    Return ``(node, stamp_ns, rate_mbps, incarnation)`` of a LinkStats's CDR bytes.

    ``rate_mbps`` is ``max(tx_mbps, rx_mbps)``. Raises ``ValueError`` for bytes too short, an
    encapsulation other than plain CDR, or another ``schema_version``.
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
    (_, _, tx, rx, _, _, _, incarnation), pos = read('qqdddddQ', pos, 8)
    return node, sec * 10 ** 9 + nanosec, max(tx, rx), incarnation


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
            for schema, channel, message in NonSeekingReader(fh).iter_messages(
                    log_time_order=False):
                yield channel.topic, schema.name if schema else '', message.data
        except UnsupportedCompressionError as exc:      # lz4 chunks without the lz4 package
            raise BagError(f'{path}: {exc}; install the package for it (pip install lz4) or '
                           'record the bag uncompressed or with zstd') from None
        except Exception as exc:  # noqa: B902 - the decompressors' own (zstandard.ZstdError)
            cut.append(type(exc).__name__)


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


def read_bag(path, lines=None, node=None, data: bytes | None = None) -> tuple:
    """
    Return ``(times_s, rates_mbps, end_s)`` of the LinkStats in a bag (``lines`` unused).

    ``node``: the robot whose link to read (None: the bag's only one); ``data``: the bag's
    bytes, read already (a SQLite bag's are read from a private copy). Raises ``BagError``
    when the bag has no LinkStats, several robots and no ``node``, or LinkStats of another
    version; a file cut short is read up to the cut, with a warning.
    """
    links = _links(path, data)
    nodes = ', '.join(map(str, sorted(links)))
    if node is None and len(links) > 1:
        raise BagError(f'{path}: a ROS 2 bag with the links of {len(links)} robots (nodes '
                       f'{nodes}); a trace is one link: write one trace per robot with "rog '
                       'trace convert BAG --out DIR" and give the --trace list it prints (or '
                       'pick one robot with --node K)')
    who = next(iter(links)) if node is None else node
    if who not in links:
        raise BagError(f'{path}: no LinkStats of node {who} in it (its nodes: {nodes})')
    return _link(path, who, links[who])


def read_bag_links(path, data: bytes | None = None) -> dict:
    """
    Return ``{node: (times_s, rates_mbps, end_s)}`` of every robot in a bag, reading it once.

    Raises ``BagError`` as ``read_bag`` does, also when one robot has too few LinkStats.
    """
    links = _links(path, data)
    return {who: _link(path, who, links[who]) for who in sorted(links)}


def _links(path, data: bytes | None) -> dict:
    """Return ``{node: [(stamp_ns, rate_mbps, incarnation), ...]}`` of a bag's LinkStats."""
    cut, topics = [], set()
    if data is not None and bag_kind_of(data) == 'SQLite bag':
        with tempfile.TemporaryDirectory(prefix='rog_bag_') as folder:    # SQLite opens files
            copy = os.path.join(folder, os.path.basename(str(path)))
            with open(copy, 'wb') as fh:
                fh.write(data)
            return _collect(path, _sqlite_messages(copy, topics, path), cut, topics)
    mcap = (bag_kind(path) if data is None else bag_kind_of(data)) == 'MCAP bag'
    messages = _mcap_messages(path, cut, data) if mcap else _sqlite_messages(path, topics)
    return _collect(path, messages, cut, topics)


def _collect(path, messages, cut: list, topics: set) -> dict:
    """Return ``_links``'s result of a bag's ``messages`` (``(topic, type, data)``)."""
    links, bad, first = {}, 0, ''
    for topic, type_name, data in messages:
        topics.add(topic)
        if type_name != LINK_STATS_TYPE:
            continue
        try:
            who, stamp, rate, incarnation = link_stats(bytes(data))
        except (ValueError, struct.error) as exc:
            bad += 1
            first = first or str(exc)
            continue
        links.setdefault(who, []).append((stamp, rate, incarnation))
    if cut:
        iperf.warn(f'{path}: the bag ends early or is damaged there ({cut[0]}: its recorder '
                   'was stopped?); its messages before that are read')
    if not links:
        listed = ', '.join(sorted(topics)[:4]) + (', ...' if len(topics) > 4 else '')
        why = (f': its LinkStats do not read ({first}; recorded by another version of '
               'rog_ros?)' if bad else f' (its topics: {listed})' if topics
               else ' (it holds no message)')
        raise BagError(f'{path}: a ROS 2 bag without a LinkStats{why}; record '
                       "netmon's .../link_stats topic in it, or record the link with netmon "
                       '(record_trace:=link.csv)')
    return links


def _link(path, who: int, messages: list) -> tuple:
    """Return ``(times_s, rates_mbps, end_s)`` of robot ``who``'s LinkStats ``messages``."""
    stamps, rates, seen = [], [], set()
    shift, run = 0, None     # ns added to a run's stamps after its clock stepped back
    for stamp, rate, incarnation in messages:
        if incarnation not in seen:
            seen.add(incarnation)        # netmon's first message of a run measured nothing
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
    times = [(ns - stamps[0]) * 1e-9 for ns in stamps]   # whole ns: exact before the float
    if len(times) < 2:
        raise BagError(f'{path}: node {who} has {len(times)} LinkStats with a measured rate; '
                       'a trace needs two or more (netmon publishes ten a second)')
    step = sorted(b - a for a, b in zip(times, times[1:]))[(len(times) - 1) // 2]
    return times, rates, times[-1] + step


def _period_ns(stamps) -> int:
    """Return the median gap of the last stamps (ns), netmon's 0.1 s before there are two."""
    last = stamps[-51:]
    gaps = sorted(b - a for a, b in zip(last, last[1:]))
    return gaps[len(gaps) // 2] if gaps else NETMON_PERIOD_NS
