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
What a ``--trace`` value names: a preset, a file, or one of either per robot.

Real records are per link: the Rog testbed logged one per worker, and robots that stand in
different places have links with different statistics (in the logs of one of its runs one
worker's median rate was 3 Mbit/s and another's 61). One record replayed at per-robot offsets
gives every robot the same statistics; a comma-separated list ``a.txt,b.txt,c.txt`` gives
robot r the entry r mod k, so a fleet can be replayed on the links it had. Presets may be
listed too (``indoors,through_wall``: one robot behind a wall). A file whose name contains a
comma is read as one file when it exists.

An entry that is a ROS 2 bag of netmon's LinkStats may name what to read of it after ``#``:
``run.mcap#netmon_2`` is the link of the bag's robot ``netmon_2`` (its netmon's node name, or
a rank its LinkStats carry: ``run.mcap#2``), ``run.mcap#emulated`` the rate its link emulator
enforced (``emulated_mbps``) instead of the measured one (``#throughput``, the default; also
``#bitrate``, the Wi-Fi bitrate), and both combine (``run.mcap#netmon_2#emulated``). Those
three tags are reserved: a robot whose netmon is named like one is ``run.mcap#robot=emulated``
(``ROBOT``; any robot may be written so) or its rank; spaces around a tag and the ``=`` are
no part of it, and a tag with a space inside is refused (``parse``). A bag of
several robots named without one gives robot r the bag's robot of rank r
(``rog_ros.net.ros_bag.rank_plan``: a rank missing from the bag is refused, not filled by
the next robot's link). A file whose name contains ``#`` is read as one file when it exists,
and takes tags after its name (``run#1.mcap#netmon_0``: the longest leading part that is a
file is the file).

Every consumer resolves a robot's entry here (``entry_for``) and reads it with
``rog_ros.net.traces.load_entry``: the simulator (``make_traces``), the nodes and netns
emulation (``link_for``), the checks and ``rog trace``; a file's offset is each one's own
rule, so a list or a bag means the same in all of them.

Robots of one recording are replayed in step (``recordings``): the links of two or more
robots of one bag (all of a bag given alone, or ``run.mcap#netmon_0,run.mcap#netmon_1``, or
the files ``rog trace convert run.mcap --out DIR/`` wrote of it, which carry its id) were
recorded together, on one clock, and an outage that hit them together (the fleet drove into
one building) must hit them together in the replay, or a run sees a fleet whose robots never
lose their links at once. A bag's robot is read on the bag's clock (``traces.load_entry``,
``traces.in_step``, ``ros_bag.placement``: time 0 is the first sample of any robot of
the bag and the period ends with its last, whichever robots a run uses and whatever time each
netmon started), as ``rog trace convert`` writes it, and the robots of one recording share one
offset, that of the lowest rank among them, where unrelated files (and one robot's link
replayed by every robot) keep one offset per robot. A robot that follows a link already
followed by a lower rank (robot 3 of 4 on a bag of 3) replays the recording's next copy, in
step with the other robots of that copy. A robot's link is one link at whatever rate or scale
it is read (``run.mcap#netmon_1``, ``run.mcap#netmon_1#emulated``, a file converted of it
with ``--scale``): given to two robots, it is followed twice, each from its own offset, as
one file listed twice is, whichever other robots of the recording are listed with it.
"""

from __future__ import annotations

import gzip
import os
import re
from typing import NamedTuple

from rog_ros.net import iperf, ros_bag

SEPARATOR = ','
TAG = '#'
"""Separates a bag from the robot and the rate read of it: ``run.mcap#netmon_2#emulated``."""


ROBOT = ros_bag.ROBOT_TAG
"""Marks a tag as a robot's name: ``run.mcap#robot=emulated`` is the robot named ``emulated``,
where ``run.mcap#emulated`` is the rate (``ros_bag.FIELDS`` are the reserved tags)."""


class Entry(NamedTuple):
    """One entry of a ``--trace`` value: its ``source`` (a preset or a file) and tags."""

    source: str
    robot: str | None = None        # a bag's robot: its name or a rank
    field: str | None = None        # the rate read of a bag (ros_bag.FIELDS); None: measured

    @property
    def text(self) -> str:
        """Return the entry as written: ``source[#robot][#field]`` (``parse`` reads it back)."""
        robot = self.robot
        if robot is not None and (robot in ros_bag.FIELDS or robot.startswith(ROBOT)):
            robot = ROBOT + robot           # (a robot named like a rate)
        return TAG.join([self.source] + [t for t in (robot, self.field) if t])


def sources(spec) -> list:
    """
    Return the entries of a ``--trace`` value: ``[spec]``, or the list's entries in order.

    Raises ``ValueError`` for an empty entry (``a.txt,,b.txt``, a trailing comma): skipping it
    would shift every later robot onto another robot's link. Spaces around an entry are no
    part of it, of a list's entries as of one entry (``' indoors'``, a YAML value's
    newline), unless an existing file's name has them.
    """
    spec = str(spec)
    if os.path.exists(spec):
        return [spec]
    if SEPARATOR not in spec:
        return [spec.strip()]
    parts = [p.strip() for p in spec.split(SEPARATOR)]
    if not all(parts):
        raise ValueError(f'trace list {spec!r} has an empty entry (robot r takes entry r mod '
                         f'the number of entries, so none may be left out)')
    return parts


def source_for(spec, rank: int) -> str:
    """Return the entry robot ``rank`` follows: entry ``rank`` mod the number of entries."""
    if rank < 0:
        raise ValueError(f'rank must be >= 0, got {rank}')
    entries = sources(spec)
    return entries[rank % len(entries)]


def parse(entry) -> Entry:
    """
    Return the ``Entry`` of one entry of a ``--trace`` value (``run.mcap#netmon_2#emulated``).

    Tags after ``#`` are a rate (``ros_bag.FIELDS``) or else a robot; ``robot=NAME`` is the
    robot ``NAME`` even when that is a rate's name. Spaces around a tag and around the ``=``
    of ``robot=`` are no part of it (``BAG# robot = x`` is ``BAG#robot=x``). Raises
    ``ValueError`` for an empty tag, two robots, two rates or a tag with a space inside it
    (no robot's name and no rate holds one: ``BAG#net mon_0``).
    """
    entry = str(entry)
    if os.path.exists(entry):
        return Entry(entry)
    if TAG not in entry:
        return Entry(entry.strip())         # (as sources has it)
    parts = entry.split(TAG)
    cut = next((k for k in range(len(parts) - 1, 1, -1)      # a file whose name holds a '#'
                if os.path.isfile(TAG.join(parts[:k]))), 1)
    source, *tags = [TAG.join(parts[:cut]).strip()] + [part.strip() for part in parts[cut:]]
    robot = field = None
    for tag in tags:
        if not tag or not source:
            raise ValueError(f'trace {entry!r}: an empty {"tag" if source else "file"}; write '
                             'BAG#ROBOT, BAG#RATE or BAG#ROBOT#RATE (RATE one of '
                             f'{", ".join(ros_bag.FIELDS)})')
        named = _ROBOT_FORM.match(tag)
        if named:
            tag = tag[named.end():].strip()
            if not tag:
                raise ValueError(f'trace {entry!r}: {ROBOT} names no robot; write '
                                 f'{source}#{ROBOT}NAME')
        elif tag in ros_bag.FIELDS:
            if field is not None:
                raise ValueError(f'trace {entry!r} names two rates, {field} and {tag}; '
                                 f'name one (a robot named {field} is '
                                 f'{source}#{ROBOT}{field})')
            field = tag
            continue
        if any(c.isspace() for c in tag):
            raise ValueError(f'trace {entry!r}: the tag {tag!r} holds a space, and no robot '
                             'name or rate does; write BAG#ROBOT, BAG#robot=ROBOT, BAG#RATE or '
                             f'BAG#ROBOT#RATE (ROBOT a name or rank, RATE one of '
                             f'{", ".join(ros_bag.FIELDS)})')
        if robot is not None:
            raise ValueError(f'trace {entry!r} names two robots, {robot} and {tag} (or a '
                             f'rate not one of {", ".join(ros_bag.FIELDS)}); a trace is one '
                             f'link: list them, {Entry(source, robot).text},'
                             f'{Entry(source, tag).text}')
        else:
            robot = tag
    return Entry(source, robot, field)


def resolve(entry, rank: int, robots_of=None) -> str:
    """
    Return ``entry`` with the bag robot that robot ``rank`` follows named, when it has none.

    Only a bag of several robots changes: robot ``rank`` follows the bag's robot of that rank
    (``ros_bag.rank_plan``, which also says so once on stderr). ``robots_of(path)`` returns a
    bag's ``ros_bag.robots`` (default: read the file). Raises ``ros_bag.BagError`` (a
    ``ValueError``) for a bag that misses a rank.
    """
    parsed = parse(entry)
    if parsed.robot is not None or not ros_bag.bag_kind(parsed.source):
        return str(entry)
    named = (robots_of or ros_bag.robots)(parsed.source)
    if parsed.field in dict(named):     # (BAG#emulated: the rate, not a robot so named)
        iperf.note(ros_bag.reserved_note(parsed.source, parsed.field))
    if len(named) == 1:
        return str(entry)
    names, note = ros_bag.rank_plan(parsed.source, named)
    iperf.note(note)
    return parsed._replace(robot=names[rank % len(names)]).text


def entry_for(spec, rank: int, robots_of=None) -> str:
    """Return the entry robot ``rank`` follows: ``source_for``'s, a bag's robot resolved."""
    return resolve(source_for(spec, rank), rank, robots_of)


def bag_entries(entry, robots_of=None) -> list:
    """Return one entry per robot of a bag named without a robot, else ``[entry]``."""
    parsed = parse(entry)
    if parsed.robot is not None or not ros_bag.bag_kind(parsed.source):
        return [str(entry)]
    named = (robots_of or ros_bag.robots)(parsed.source)
    return [parsed._replace(robot=name).text if len(named) > 1 else str(entry)
            for name, _ in named]


_ROBOT_FORM = re.compile(r'robot\s*=\s*')
"""``ROBOT`` as ``parse`` reads it: spaces around its ``=`` are no part of the name."""


RECORDING = re.compile(r'#\s*rog_ros trace:.*\brecording=([0-9A-Za-z_-]+)')
"""The recording a ``save_trace`` file's link was cut from, on its ``# rog_ros trace:`` line."""


def recording_of(path) -> str | None:
    """
    Return the recording id ``save_trace`` wrote into a trace file's first line, else None.

    Files with one id hold links of robots recorded together, on that recording's clock
    (``rog trace convert BAG --out DIR/``): ``recordings`` replays them in step.
    A gzip-compressed file (``load_trace`` reads it decompressed) is read so too.
    """
    match = RECORDING.match(_head(path))
    return match.group(1) if match else None


LINK = re.compile(r'#\s*rog_ros trace:.*\brecording=\S+(?: robot=(\S+))?(?: rate=(\S+))?')
"""The robot and rate of a recording a ``save_trace`` file holds (after its ``recording=``)."""


def link_of(path) -> tuple:
    """
    Return ``(robot, rate)`` of the recording's link a converted file holds, else ``(None, None)``.

    ``rog trace convert`` writes them with the recording's id (since 2026-12-06; a file
    converted before has none): the file is that robot's link, the one ``BAG#ROBOT#RATE``
    names (``rate``: ``throughput`` when the file names none).
    """
    match = LINK.match(_head(path))
    if not match or match.group(1) is None:
        return None, None
    return match.group(1), match.group(2) or 'throughput'


def _head(path) -> str:
    """Return the first line of a trace file, decompressed if gzipped ('' if unreadable)."""
    try:
        with open(path, 'rb') as fh:
            head = fh.readline(4096)
            if head[:2] == b'\x1f\x8b':
                fh.seek(0)
                with gzip.GzipFile(fileobj=fh) as unzipped:
                    head = unzipped.readline(4096)
    except (OSError, EOFError):
        return ''
    return head.decode('utf-8', 'replace')


def recordings(entries) -> list:
    """
    Return, for each robot's resolved entry, its leader: the robot it replays in step with.

    ``entries``: robot r's at ``r`` (``entry_for``'s). A robot that follows one of two or more
    links of one recording (robots of one bag, by whichever path it is named, files that
    ``rog trace convert BAG --out DIR/`` wrote of one bag, ``recording_of``, or both: one
    ``ros_bag.recording_id``) gets the lowest
    rank of the robots of its copy of the recording (copy c: the robots that follow a link c
    lower ranks followed already), where its replay starts; each is on the recording's clock
    already (``traces.load_entry``). Any other robot r gets r.
    One link is one link however it is named: a bag's robot by its rank or its name
    (``run.mcap#0``, ``run.mcap#netmon_0``), a bag or a file by two paths, a robot and the
    file converted of it (``link_of``), at any rate and scale (``run.mcap#netmon_0#emulated``,
    a file converted with ``--scale``: the same robot's link, its outages at the same times);
    named twice it is followed twice, as one file listed twice is (``a.csv,a.csv``: an offset
    per robot), whichever other robots are listed with it.
    """
    parsed = [parse(entry) for entry in entries]
    keys, links, ids, same = [], {}, {}, []
    for p in parsed:
        if p.robot is not None and ros_bag.bag_kind(p.source):
            real = os.path.realpath(p.source)
            if real not in ids:         # (hashed once a process, by any path: _identity)
                ids[real] = ros_bag.recording_id(p.source)
            key, link = ids[real], _robot_name(p)
        elif os.path.isfile(p.source) and not ros_bag.bag_kind(p.source):
            key, (link, _) = recording_of(p.source), link_of(p.source)
            if link is None:    # (converted before files named their robot)
                link = os.path.realpath(p.source)
        else:
            key, link = None, None
        keys.append(key)
        same.append((key, link))     # (not its rate: the robot's link, however measured)
        if keys[-1]:
            links.setdefault(key, set()).add(link)
    out, leaders = [], {}
    for r, key in enumerate(keys):
        if key is None or len(links[key]) < 2:
            out.append(r)
            continue
        copy = sum(1 for other in same[:r] if other == same[r])
        out.append(leaders.setdefault((key, copy), r))
    return out


def _robot_name(parsed: Entry) -> str:
    """Return the name of the bag robot ``parsed`` names by its name or its rank."""
    try:
        return ros_bag.pick(parsed.source, ros_bag.robots(parsed.source), parsed.robot)
    except ros_bag.BagError:    # (refused where its link is read)
        return parsed.robot
