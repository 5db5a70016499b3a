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

ROS 2's discovery range variables (``ROS_LOCALHOST_ONLY``, ``ROS_AUTOMATIC_DISCOVERY_RANGE``,
``ROS_STATIC_PEERS``) are not in ``CYCLONEDDS_URI``: ``rmw_cyclonedds`` puts a fragment of its
own before that value when it creates a domain, and ``DdsBus`` does the same with
:func:`discovery_config`, so both see each other under any setting.

What a ``CYCLONEDDS_URI`` value sets (the lease, the fragment size) is read in
:mod:`rog_ros.transport.cyclone_settings`; what Cyclone logged, in
:mod:`rog_ros.transport.cyclone_log`.
"""

from __future__ import annotations

import os
from pathlib import Path
import re
import socket
import sys
from xml.sax.saxutils import escape, quoteattr

CONFIGS = ('loopback', 'wifi')
MAX_DOMAIN_ID = 232
"""Highest DDS domain ID a participant can take (RTPS port arithmetic: 7400 + 250 * 232 + ...
stays below 65536); ``ROS_DOMAIN_ID`` and ``rog fleet --domain-id`` are refused above it."""
SERVER_PARTICIPANT_INDEX = 50
"""Participant index of the server node on a robot (:func:`server_index_fragment`): fixed, so
that a worker robot lists the server with one port
(:func:`~rog_ros.transport.cyclone_settings.server_peer`) rather than with
every port of the indices Cyclone assigns itself (0..32 in the shipped files: 32 datagrams per
announcement with Cyclone 0.10, 33 with 11). Above those, so no other participant of the
server's host takes it first; at most 62, so domain 232's ports stay below 65536."""


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


def server_index_fragment() -> str:
    """
    Return the Cyclone XML fragment that gives the server node its fixed participant index.

    Appended to the server node's ``CYCLONEDDS_URI`` (after the user's, so it wins): the worker
    robots list the server at that index's port
    (:func:`~rog_ros.transport.cyclone_settings.server_peer`).
    """
    return (f'<Discovery><ParticipantIndex>{SERVER_PARTICIPANT_INDEX}</ParticipantIndex>'
            '</Discovery>')


def peer_resolves(peer: str) -> bool:
    """
    Say whether peer address ``peer`` is one Cyclone takes (it aborts the process if not).

    Its host must resolve, and a port after it (``host:7410``, ``[v6]:7410``) lie in 1..65535.
    """
    host = _host_of(peer)
    rest = peer.strip()[len(host) + (2 if peer.strip().startswith('[') else 0):]
    if rest and not (rest.startswith(':') and rest[1:].isdigit()
                     and 1 <= int(rest[1:]) <= 65535):
        return False
    try:
        socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError):
        return False
    return True


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


DISCOVERY_RANGES = ('OFF', 'LOCALHOST', 'SUBNET', 'SYSTEM_DEFAULT')
"""Values of ``$ROS_AUTOMATIC_DISCOVERY_RANGE`` (ROS 2 Iron and newer; unset is SUBNET)."""
_HUMBLE_DISTROS = ('foxy', 'galactic', 'humble')
"""``$ROS_DISTRO`` values whose rmw_cyclonedds reads only ``ROS_LOCALHOST_ONLY``."""
_LOCALHOST_ONLY_DISTROS = ('iron', 'jazzy')
"""Later ``$ROS_DISTRO`` values whose rcl still honours ``ROS_LOCALHOST_ONLY`` (deprecated in
Iron and Jazzy, removed after Jazzy)."""
_STATIC_PEER_MAX = 255
"""Longest ``$ROS_STATIC_PEERS`` entry rcl keeps (RMW_DISCOVERY_OPTIONS_STATIC_PEERS_MAX_LENGTH
less its terminating zero)."""
_HUMBLE_LOCALHOST = ('<CycloneDDS><Domain><General><Interfaces>'
                     '<NetworkInterface address="127.0.0.1"/>'
                     '</Interfaces></General></Domain></CycloneDDS>')
"""What rmw_cyclonedds (Humble) puts before ``$CYCLONEDDS_URI`` for ROS_LOCALHOST_ONLY=1."""


_LOOPBACK_PIN = ('<Interfaces><NetworkInterface address="127.0.0.1" multicast="false"/>'
                 '</Interfaces>')
"""The loopback interface, unicast only, for ``discovery_fragment``'s ``pin_loopback``."""


def discovery_fragment(environ=None, pid=None, warn=None, resolves=None,
                       unicast_loopback: bool = False, pin_loopback: bool = False) -> str:
    """
    Return the Cyclone XML that rmw_cyclonedds puts before ``$CYCLONEDDS_URI`` for ``environ``.

    Mirrors ``check_create_domain`` of rmw_cyclonedds_cpp and the variables rcl reads for it:
    on Humble (``$ROS_DISTRO`` humble, or only ``ROS_LOCALHOST_ONLY`` set and no distribution
    named) ``ROS_LOCALHOST_ONLY=1`` pins the 127.0.0.1 interface; on Iron and newer
    ``ROS_AUTOMATIC_DISCOVERY_RANGE`` (LOCALHOST, SUBNET, OFF, SYSTEM_DEFAULT; unset is
    SUBNET) and ``ROS_STATIC_PEERS`` (``;``-separated) set multicast, participant indices,
    the peers and, for OFF, a discovery tag with the process id ``pid`` (default: this
    process's); an enabled ``ROS_LOCALHOST_ONLY`` wins over both, as in Jazzy. '' when nothing
    applies. A bad or conflicting value gets what ROS 2 makes of it (an unknown range is
    LOCALHOST, as rcl has it) and one line to ``warn``; ``resolves``, if given, says whether a
    static peer resolves (Cyclone aborts the process on one that does not): the others are
    left out, each with a line to ``warn``.

    ``unicast_loopback`` marks Humble's 127.0.0.1 interface ``multicast="false"``: the Cyclone
    0.10 under rmw_cyclonedds finds Linux's ``lo`` without multicast and discovers by unicast
    to localhost, where Cyclone 0.11 and newer presume multicast works on a loopback interface
    and would never meet it; the mark makes them do as 0.10 does.

    ``pin_loopback`` adds that interface (``multicast="false"``) to the LOCALHOST range when no
    static peer is listed (nothing but this machine is to be reached): Cyclone 0.11 and newer
    drop discovery packets that arrive on an interface they do not use, and rmw's Cyclone
    0.10 sends its localhost announcements to 127.0.0.1, so a ROS 2 node that started after
    the bus was never met (0 matches in 40 s; with the pin, a match in 0.05-0.3 s).
    """
    env = os.environ if environ is None else environ
    warn = warn if warn is not None else _ignore
    distro = env.get('ROS_DISTRO', '').strip().lower()
    localhost = env.get('ROS_LOCALHOST_ONLY', '')
    span = env.get('ROS_AUTOMATIC_DISCOVERY_RANGE', '')
    listed = env.get('ROS_STATIC_PEERS', '')
    if distro in _HUMBLE_DISTROS or (not distro and not span and not listed):
        if localhost not in ('', '0', '1'):
            warn(f'ROS_LOCALHOST_ONLY={localhost!r} is neither 1 nor 0; ROS 2 takes it as 0')
        if distro and (span or listed):
            warn(f'ROS_AUTOMATIC_DISCOVERY_RANGE and ROS_STATIC_PEERS are ignored on ROS 2 '
                 f'{distro} (rmw_cyclonedds reads them from Iron on)')
        if localhost != '1':
            return ''
        if unicast_loopback:
            return _HUMBLE_LOCALHOST.replace('"127.0.0.1"/>', '"127.0.0.1" multicast="false"/>')
        return _HUMBLE_LOCALHOST
    if localhost and distro and distro not in _LOCALHOST_ONLY_DISTROS:
        warn(f'ROS_LOCALHOST_ONLY is ignored on ROS 2 {distro} (removed after Jazzy); '
             'ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST does what it did')
        localhost = ''
    if localhost not in ('', '0', '1'):
        warn(f'ROS_LOCALHOST_ONLY={localhost!r} is neither 1 nor 0; ROS 2 takes it as '
             + ('1' if localhost.startswith('1') else '0'))
    if localhost.startswith('1'):
        if span or listed:
            warn('ROS_LOCALHOST_ONLY=1 wins: ROS_AUTOMATIC_DISCOVERY_RANGE and ROS_STATIC_PEERS '
                 'are ignored (as ROS 2 does)')
        span, peers = 'LOCALHOST', []
    else:
        if span and span not in DISCOVERY_RANGES:
            warn(f'ROS_AUTOMATIC_DISCOVERY_RANGE={span!r} is not one of '
                 f'{", ".join(DISCOVERY_RANGES)}; assuming LOCALHOST, as ROS 2 does')
            span = 'LOCALHOST'
        span = span or 'SUBNET'
        # rcl does not read the peers for OFF (rmw_cyclonedds would ignore them anyway)
        peers = [p for p in listed.split(';') if p] if span == 'OFF' else \
            _static_peers(listed, warn)
        if span in ('OFF', 'SYSTEM_DEFAULT') and peers:
            warn(f'ROS_STATIC_PEERS is ignored: ROS_AUTOMATIC_DISCOVERY_RANGE={span}')
            peers = []
    if resolves is not None:
        for peer in [p for p in peers if not resolves(p)]:
            warn(f'ROS_STATIC_PEERS: {peer!r} does not resolve; left out')
            peers.remove(peer)
    return _range_fragment(span, peers, os.getpid() if pid is None else pid,
                           pin_loopback and span == 'LOCALHOST' and not peers)


def _ignore(message: str) -> None:
    """Drop ``message`` (the default of :func:`discovery_fragment`'s ``warn``)."""


def _static_peers(value: str, warn) -> list:
    """Split ``$ROS_STATIC_PEERS`` as rcl does: at ``;``, empty parts dropped, long ones too."""
    peers = []
    for peer in (p for p in value.split(';') if p):
        if len(peer) > _STATIC_PEER_MAX:
            warn(f'ROS_STATIC_PEERS: {peer[:40]!r}... is longer than {_STATIC_PEER_MAX} '
                 'characters; skipped, as ROS 2 does')
        else:
            peers.append(peer)
    return peers


def _range_fragment(span: str, peers: list, pid: int, pin_loopback: bool = False) -> str:
    """
    Build rmw_cyclonedds's (Iron and newer) fragment for range ``span``, element by element.

    ``pin_loopback``: with the loopback interface as well (``discovery_fragment``).
    """
    add_localhost = span == 'LOCALHOST'
    add_peers = span in ('LOCALHOST', 'SUBNET')
    no_multicast = span in ('LOCALHOST', 'OFF')
    if not (add_localhost or add_peers or no_multicast):
        return ''                                        # SYSTEM_DEFAULT: Cyclone's own
    text = '<CycloneDDS><Domain>'
    if no_multicast:
        pin = _LOOPBACK_PIN if pin_loopback else ''
        text += f'<General>{pin}<AllowMulticast>false</AllowMulticast></General>'
    if no_multicast and not add_localhost and not add_peers:
        text += '<Discovery><ParticipantIndex>none</ParticipantIndex>'
        text += f'<Tag>ros_discovery_off_{pid}</Tag>'
    else:
        text += '<Discovery><ParticipantIndex>auto</ParticipantIndex>'
        text += '<MaxAutoParticipantIndex>32</MaxAutoParticipantIndex>'
    if (add_peers and peers) or add_localhost:
        text += '<Peers>'
        if add_localhost:
            text += '<Peer address="localhost"/>'
        for peer in peers:
            text += '<Peer address="%s"/>' % escape(peer, {'"': '&quot;'})
        text += '</Peers>'
    return text + '</Discovery></Domain></CycloneDDS>'


def discovery_config(config=None, environ=None, warn=None, resolves=None,
                     unicast_loopback: bool = False, pin_loopback: bool = False) -> str:
    """
    Return the configuration rmw_cyclonedds would create a domain with, ``config`` as the user's.

    That is :func:`discovery_fragment`, a comma, then ``config`` (``$CYCLONEDDS_URI`` of
    ``environ`` when None): Cyclone reads the sources in order and later ones override, so
    the user's configuration and ours (``loopback``, ``wifi``) still have the last word.
    """
    env = os.environ if environ is None else environ
    fragment = discovery_fragment(env, warn=warn, resolves=resolves,
                                  unicast_loopback=unicast_loopback, pin_loopback=pin_loopback)
    uri = env.get('CYCLONEDDS_URI', '') if config is None else config
    if fragment and _selects_loopback(uri):
        # a configuration that keeps to the loopback interface (rog fleet's) decides discovery
        # itself: a second loopback pin makes Cyclone refuse the domain, and OFF's tag of one
        # process kept the fleet's own nodes from ever meeting
        fragment = ''
    return ','.join(part for part in (fragment, uri) if part)


_LOOPBACK_INTERFACE = re.compile(
    r'<NetworkInterface\b[^>]*\b(address\s*=\s*["\'](127\.0\.0\.1|localhost)["\']'
    r'|name\s*=\s*["\']lo["\'])'
    r'|<NetworkInterfaceAddress>\s*(127\.0\.0\.1|localhost|lo)\s*<')


def _selects_loopback(uri: str) -> bool:
    """
    Say whether a ``CYCLONEDDS_URI`` value selects the loopback interface (``loopback`` does).

    Humble's ROS_LOCALHOST_ONLY=1 fragment selects it too, and Cyclone refuses a domain that
    selects one interface twice (``lo: the same interface may not be selected twice``; under
    rmw_cyclonedds the node fails), so the fragment is left out where the configuration
    already does what it asks. A file that cannot be read counts as not selecting it.
    """
    texts = [uri]
    for path in uri_files(uri):
        try:
            with open(path, encoding='utf-8', errors='replace') as source:
                texts.append(source.read())
        except OSError:
            continue
    return any(_LOOPBACK_INTERFACE.search(re.sub(r'<!--.*?-->', '', text, flags=re.S))
               for text in texts)


def domain_id_from_env(environ=None) -> int:
    """Return ``$ROS_DOMAIN_ID`` (the ROS 2 convention) of ``environ``, 0 when unset."""
    value = (os.environ if environ is None else environ).get('ROS_DOMAIN_ID', '').strip()
    if not value:
        return 0
    try:
        domain_id = int(value)
    except ValueError:
        raise ValueError(f"ROS_DOMAIN_ID={value!r} is not a number; give the fleet's domain, "
                         f'0..{MAX_DOMAIN_ID} (0..101 leaves room for many nodes per robot), '
                         'or unset it') from None
    if not 0 <= domain_id <= MAX_DOMAIN_ID:
        raise ValueError(f'ROS_DOMAIN_ID={domain_id} outside 0..{MAX_DOMAIN_ID}')
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
    return [value for is_file, value in _uri_sources(uri) if is_file]


def _uri_sources(uri: str):
    """
    Yield ``(is_file, value)`` for each source of a ``CYCLONEDDS_URI`` value, in order.

    A file's path as Cyclone opens it, or inline XML's text; the rules of :func:`uri_files`,
    kept in one place for the readers of file names and of settings.
    """
    pos = 0
    while pos < len(uri):
        if uri[pos] in ' \t\r\n,':
            pos += 1
        elif uri[pos] == '<':
            end = _xml_end(uri, pos)
            if end is None:
                break
            yield False, uri[pos:end]
            pos = end
        else:
            end = uri.find(',', pos)
            end = len(uri) if end < 0 else end
            part = uri[pos:end]
            yield True, part[len('file://'):] if part.startswith('file://') else part
            pos = end


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
