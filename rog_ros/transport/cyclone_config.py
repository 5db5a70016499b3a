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
Cyclone DDS configurations shipped in ``config/`` and the ``CYCLONEDDS_URI`` they set.

``loopback``: a fleet on one machine (``rog fleet``, CI, tests). ``wifi``: robots on Wi-Fi
(datagrams below the MTU, large receive buffers, unicast data, optional unicast peers). The
variable must be set before the process creates its first DDS participant; both
``rmw_cyclonedds`` (ROS 2 nodes) and ``DdsBus`` read it.

Symptom -> knob: a node sees no peers on Wi-Fi -> pass ``peers`` (the access point drops
multicast); transfers stall for ~30 s after losses -> you are not using ``wifi`` (IP
fragmentation); Cyclone warns about the receive buffer -> raise ``net.core.rmem_max``.
"""

from __future__ import annotations

import os
from pathlib import Path
import re
import socket
import sys
from xml.sax.saxutils import quoteattr

CONFIGS = ('loopback', 'wifi')


def config_path(kind: str) -> Path:
    """Return the path of ``config/cyclonedds_<kind>.xml`` (source tree or installed)."""
    if kind not in CONFIGS:
        raise ValueError(f'unknown Cyclone configuration {kind!r}; use one of {CONFIGS}')
    name = f'cyclonedds_{kind}.xml'
    here = Path(__file__).resolve().parent.parent  # .../rog_ros
    prefixes = [p for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
    candidates = [here / 'config' / name, here.parent / 'config' / name]
    candidates += [Path(p) / 'share' / 'rog_ros' / 'config' / name
                   for p in prefixes + [sys.prefix]]
    for cand in candidates:
        if cand.is_file():
            return cand
    raise FileNotFoundError(f'{name} not found; looked in: '
                            + ', '.join(str(c) for c in candidates))


def cyclone_uri(kind: str, peers=()) -> str:
    """
    Return a ``CYCLONEDDS_URI`` value: the file of ``kind`` plus a unicast peer fragment.

    ``peers`` (addresses or host names of the other robots) are appended to the file's peer
    list: Cyclone merges comma-separated configuration sources in order. To pin the network
    interface of a multi-homed robot, edit ``<Interfaces>`` in a copy of the file instead.
    """
    parts = [file_uri(config_path(kind))]
    if peers:
        parts.append(peer_fragment(peers))
    return ','.join(parts)


def file_uri(path) -> str:
    """
    Return ``file://`` and ``path`` as Cyclone reads it: not percent-encoded.

    Cyclone opens what follows ``file://`` as it stands, so ``Path.as_uri`` (``%20`` for a
    space, ``%C3%A9`` for an accented letter) named a file that is not there and every node of
    a checkout in such a folder failed at its first participant.
    """
    return 'file://' + os.path.abspath(os.fspath(path))


def peer_fragment(peers) -> str:
    """
    Return the Cyclone XML fragment that adds ``peers`` as unicast discovery peers.

    Appended after a comma to any ``CYCLONEDDS_URI`` (the shipped file or the user's own):
    Cyclone merges the sources, so the peers join the peer list the others give. Raises
    ValueError (one line) for a peer that does not resolve.
    """
    for peer in peers:  # Cyclone aborts the process on a peer it cannot resolve
        try:
            socket.getaddrinfo(_host_of(peer), None)
        except (socket.gaierror, UnicodeError) as exc:
            raise ValueError(f'DDS peer {peer!r} does not resolve: {exc}') from exc
    return ('<Discovery><Peers>%s</Peers></Discovery>'
            % ''.join('<Peer address=%s/>' % quoteattr(p) for p in peers))


def _host_of(peer: str) -> str:
    """
    Return the host part of a Cyclone peer address: ``host``, ``host:port``, ``[v6]:port``.

    Cyclone takes a port after the address (a robot whose DDS runs on another domain's
    ports); only the host is resolved here.
    """
    peer = peer.strip()
    if peer.startswith('['):                       # [fe80::1]:7410 or [fe80::1]
        return peer[1:].split(']', 1)[0]
    host, colon, port = peer.rpartition(':')
    if colon and port.isdigit() and ':' not in host:
        return host                                  # host:7410 (an IPv6 literal has more)
    return peer


def use_cyclone_config(kind: str, peers=(), force: bool = False) -> str:
    """
    Set ``CYCLONEDDS_URI`` for this process (and its children); return the value.

    A value the user already set wins unless ``force``. Call before the first participant.
    """
    if os.environ.get('CYCLONEDDS_URI') and not force:
        return os.environ['CYCLONEDDS_URI']
    os.environ['CYCLONEDDS_URI'] = cyclone_uri(kind, peers)
    return os.environ['CYCLONEDDS_URI']


def domain_id_from_env(environ=None) -> int:
    """Return ``$ROS_DOMAIN_ID`` (the ROS 2 convention) of ``environ``, 0 when unset."""
    value = (os.environ if environ is None else environ).get('ROS_DOMAIN_ID', '').strip()
    if not value:
        return 0
    try:
        domain_id = int(value)
    except ValueError:
        raise ValueError(f"ROS_DOMAIN_ID={value!r} is not a number; give the fleet's domain, "
                         '0..232 (0..101 leaves room for many nodes per robot), or unset '
                         'it') from None
    if not 0 <= domain_id <= 232:
        raise ValueError(f'ROS_DOMAIN_ID={domain_id} outside 0..232')
    return domain_id


def uri_files(uri: str) -> list:
    """
    Return the files a ``CYCLONEDDS_URI`` value names, each as Cyclone will open it.

    Cyclone reads the value source by source, skipping white space and commas between them:
    a source that starts with ``<`` is XML and ends where its outermost element closes (commas
    inside it, as in ``<Category>config,discovery</Category>``, are its own); any other runs
    to the next comma and is a file: after ``file://``, or a bare path. Nothing is decoded
    (``%20`` stays three characters) and trailing white space is part of the name. XML whose
    end cannot be found stops the listing (Cyclone will say what is wrong with it).
    """
    files, pos = [], 0
    while pos < len(uri):
        if uri[pos] in ' \t\r\n,':
            pos += 1
        elif uri[pos] == '<':
            pos = _xml_end(uri, pos)
            if pos is None:
                break
        else:
            end = uri.find(',', pos)
            end = len(uri) if end < 0 else end
            part = uri[pos:end]
            files.append(part[len('file://'):] if part.startswith('file://') else part)
            pos = end
    return files


_XML_TAG = re.compile(r'<!--.*?-->|<\?.*?\?>|<!\[CDATA\[.*?\]\]>|<(/?)[^<>]*?(/?)>', re.S)


def _xml_end(text: str, pos: int):
    """Return the index after the XML element that starts at ``pos`` (None: not closed)."""
    depth = 0
    for match in _XML_TAG.finditer(text, pos):
        if match.start() != pos and depth == 0:
            return None                      # text between sources that is not XML
        closing, empty = match.group(1), match.group(2)
        if closing is None:                  # a comment, declaration or CDATA
            pos = match.end()
            continue
        depth += -1 if closing else (0 if empty else 1)
        pos = match.end()
        if depth <= 0:
            return pos
    return None


def uri_problem(uri: str | None = None) -> str | None:
    """
    Say why ``$CYCLONEDDS_URI`` (or ``uri``) names a configuration file that is not there.

    Cyclone reads the files when a node opens its first participant, so a typo in the path
    ended every node in a DDS traceback after the robot had started them. Each file is
    checked exactly as Cyclone will open it (:func:`uri_files`); a directory is refused too
    (Cyclone reads it as an empty configuration). Inline XML and files that exist are not
    judged here (``rog doctor`` opens a participant with them).
    """
    value = os.environ.get('CYCLONEDDS_URI', '') if uri is None else uri
    for path in uri_files(value):
        if not os.path.isfile(path):
            shown = f'file://{path}' if f'file://{path}' in value else path
            why = 'is a directory' if os.path.isdir(path) else 'is not a file'
            if path != path.rstrip():
                why += ' (the name ends in white space)'
            elif '%' in path:
                why += ' (Cyclone does not decode %-escapes: write the path as it is)'
            return f'CYCLONEDDS_URI names {shown}, which {why}; fix the path or unset ' \
                'CYCLONEDDS_URI'
    return None


_CYCLONE_LINE = re.compile(r'^\s*\d+\.\d+ \[\d*\]\s+[^:\s][^:]*: (?P<msg>.*\S)')
"""A line Cyclone DDS logs to stderr: ``<seconds>.<micro> [<domain>] <thread>: <message>``."""
_TRACEBACK = 'Traceback (most recent call last):'
_CHAINED = ('During handling of the above exception, another exception occurred:',
            'The above exception was the direct cause of the following exception:')


def cyclone_said(text: str, whole: bool = False, window: int = 8) -> list:
    """
    Return the lines Cyclone DDS logged just before a process failed (its own reason).

    Cyclone prints why it refused a configuration (``wlan0: does not match an available
    interface.``, ``can't open configuration file ...``, ``config: ... unknown element``) on
    one line of its own, before the Python traceback, whose last lines only say
    ``DDS_RETCODE_ERROR``. Looks at the ``window`` lines before the last traceback (the first
    of a chain), or before the end of ``text`` when there is none (Cyclone aborted the
    process). Returns the messages, or the whole lines when ``whole``; [] when Cyclone said
    nothing there.
    """
    lines = text.splitlines()
    end = len(lines)
    starts = [i for i, line in enumerate(lines) if line.strip() == _TRACEBACK]
    if starts:
        end = starts[-1]
        while True:
            before = end - 1
            while before >= 0 and not lines[before].strip():
                before -= 1
            earlier = [i for i in starts if i < before]
            if before < 0 or lines[before].strip() not in _CHAINED or not earlier:
                break
            end = earlier[-1]
    out = []
    for line in lines[max(0, end - window):end]:
        match = _CYCLONE_LINE.match(line)
        if match:
            out.append(line.strip() if whole else match.group('msg'))
    return out
