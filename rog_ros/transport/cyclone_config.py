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
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
import re
import socket
import sys
from typing import NamedTuple
from xml.sax.saxutils import escape, quoteattr

CONFIGS = ('loopback', 'wifi')
MAX_DOMAIN_ID = 232
"""Highest DDS domain ID a participant can take (RTPS port arithmetic: 7400 + 250 * 232 + ...
stays below 65536); ``ROS_DOMAIN_ID`` and ``rog fleet --domain-id`` are refused above it."""


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


_TAG_NAME = re.compile(r'</?\s*([^\s/>]+)')
_DURATION_UNITS = {'ns': 1, 'us': 10 ** 3, 'ms': 10 ** 6, 's': 10 ** 9, 'min': 60 * 10 ** 9,
                   'hr': 3600 * 10 ** 9, 'day': 86400 * 10 ** 9}
"""Cyclone's duration units (``unittab_duration``: ``10 s``, ``500ms``, ``1 min``), in ns."""
_LEASE_DEFAULT_UNIT = 10 ** 6
"""A LeaseDuration without a unit is in milliseconds (Cyclone's default for it, deprecated)."""
_LEASE_MAX_NS = 3600 * 10 ** 9
"""Longest LeaseDuration Cyclone takes (``uf_duration_ms_1hr``: 0 to 1 hr; no ``inf``)."""
_XML_SPACE = ' \t\v\r\n'
"""What Cyclone's XML parser trims from both ends of an element's text (``qq_isspace``)."""
_XML_REF = re.compile(r'&(?:#x([0-9a-fA-F]+)|#([0-9]+)|(lt|gt|amp|apos|quot));')
"""The references Cyclone's XML parser replaces (``unescape_insitu``): by number or name."""
_XML_NAMED = {'lt': '<', 'gt': '>', 'amp': '&', 'apos': "'", 'quot': '"'}
_XML_CDATA = re.compile(r'<!\[CDATA\[(.*?)\]\]>', re.S)
_EXPANSION_DEPTH = 20
"""How deeply Cyclone expands ``${X:-${Y:-...}}`` before it refuses the value."""


def lease_duration_s(uri: str | None = None) -> float | None:
    """
    Return the participant ``LeaseDuration`` that ``$CYCLONEDDS_URI`` (or ``uri``) sets, in s.

    The last one of its sources wins, as in Cyclone; None when none sets it (Cyclone's
    default, 10 s), a file cannot be read or the value is not a finite duration. The
    engines wait that long at the 4 MiB bound for an acknowledgement before a transfer's
    END (``transfer.BOUND_END_S``): a robot back within its lease is still matched. Read
    as Cyclone reads it (:func:`_configured`): element names in any case, comments left
    out, a ``Domain`` of another id than ``$ROS_DOMAIN_ID``'s skipped, and ``${VAR}``,
    ``${VAR:-default}`` in the value expanded. The number is read by the rules Cyclone reads
    every number with a unit by (:func:`_number_with_unit`), between 0 and 1 hr; a lease
    of 0 (which Cyclone takes) is None here too: no lease to wait for, the bound's 10 s
    stand. :func:`read_settings` reads it with the fragment size in one pass.
    """
    return read_settings(uri).lease_s


def _lease_s(text: str | None) -> float | None:
    """Return a LeaseDuration's text (expanded) as Cyclone reads it, in s; None: 0 or none."""
    ns = None if text is None else _number_with_unit(
        text, _DURATION_UNITS, _LEASE_DEFAULT_UNIT, 0, _LEASE_MAX_NS)
    return ns / 1e9 if ns else None


_MEMSIZE_UNITS = {'B': 1, 'KiB': 1 << 10, 'kB': 1 << 10, 'MiB': 1 << 20, 'MB': 1 << 20,
                  'GiB': 1 << 30, 'GB': 1 << 30}
"""Cyclone's memory-size units (``unittab_memsize``: a kB is 1024 bytes), case as written."""
_SCANF_INT = re.compile(r'[ \t\n\v\f\r]*([+-]?[0-9]+)')
"""A whole number as glibc's ``sscanf`` ``%lld`` takes it: white space, a sign, digits."""
_SCANF_FLOAT = re.compile(
    r'[ \t\n\v\f\r]*([+-]?)(?:0[xX](?:([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)'
    r'(?:[pP]([+-]?[0-9]*))?|\.)|(?!0[xX])([0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE]([+-]?[0-9]*))?)')
"""
A number as glibc's ``sscanf`` ``%lf`` takes it: decimal or C99 hexadecimal (``0x258``,
``0x1.2cp9``), an exponent marker without digits taken and worth nothing (``600e``: 600),
``0x.`` taken as 0 (``0x`` alone, ``0xg`` are no number: a leading ``0x`` is hexadecimal).
Infinities and NaN are left out: Cyclone refuses them as out of range.
"""
MAX_FRAGMENT_BYTES = 65535
"""Largest ``General/FragmentSize`` Cyclone takes (a 16-bit size, ``uf_memsize16``)."""


def fragment_size_bytes(uri: str | None = None) -> int | None:
    """
    Return the ``General/FragmentSize`` that ``$CYCLONEDDS_URI`` (or ``uri``) sets, in bytes.

    Cyclone counts each sample in a writer's history as its CDR plus 80 bytes per fragment of
    this size (``dds_whc.c``, ``whcn_size``), so the nodes count what they wrote to a robot
    with it (``transfer.PeerLink``). Read as :func:`lease_duration_s` reads the lease (the
    last source's, for our domain, references expanded), the value as Cyclone takes a memory
    size: a number, then a unit of ``B``, ``KiB``, ``kB``, ``MiB``, ``MB``, ``GiB``, ``GB``
    (case as written; none: bytes), a fraction rounded (:func:`_number_with_unit`). None
    when none sets it (Cyclone's default, 1344 B), a file cannot be read or the value is not
    one Cyclone takes, or is 0. :func:`read_settings` reads it with the lease in one pass.
    """
    return read_settings(uri).fragment_bytes


def _fragment_bytes(text: str | None) -> int | None:
    """Return a FragmentSize's text (expanded) as Cyclone reads it, in bytes; None: 0 or none."""
    size = None if text is None else _number_with_unit(
        text, _MEMSIZE_UNITS, 1, 0, MAX_FRAGMENT_BYTES)
    return size or None


class CycloneSettings(NamedTuple):
    """The settings of a Cyclone configuration the nodes' engines count with (None: unset)."""

    lease_s: float | None
    """``Discovery/LeaseDuration`` in s (:func:`lease_duration_s`)."""
    fragment_bytes: int | None
    """``General/FragmentSize`` in bytes (:func:`fragment_size_bytes`)."""


def read_settings(uri: str | None = None) -> CycloneSettings:
    """
    Return the lease and the fragment size ``$CYCLONEDDS_URI`` (or ``uri``) sets, read once.

    A node gives its engines both: each read opened the configuration's files and walked
    their tags again, twice at every node's start. One walk finds both elements
    (:func:`_configured`); each is read as :func:`lease_duration_s` and
    :func:`fragment_size_bytes` say.
    """
    found = _configured(uri, ('leaseduration', 'fragmentsize'))
    return CycloneSettings(_lease_s(found['leaseduration']),
                           _fragment_bytes(found['fragmentsize']))


def _number_with_unit(text: str, units: dict, default_unit: int, low: int,
                      high: int) -> int | None:
    """
    Return a number and its unit as Cyclone reads them, in the table's base unit; None: refused.

    One reader for every such setting, so a lease and a fragment size are read alike: the
    rules of Cyclone's ``uf_int64_unit`` (``src/core/ddsi/src/ddsi_config.c``, with
    ``lookup_multiplier``; ``units`` is its unit table, ``unittab_duration`` in ns or
    ``unittab_memsize`` in bytes). First a whole number (``_SCANF_INT``), then the unit
    after any spaces, its name as written; if that is no unit of the table, a number as
    ``%lf`` reads it (``_SCANF_FLOAT``) and the unit, rounded half away from zero. No unit
    at all: 0 stays 0, any other number is in ``default_unit`` (0: a unit is required).
    Nothing may follow the unit (the XML parser trims the element's text, an environment
    reference's value is not). Outside ``low``..``high`` the value is refused, as is one
    whose scaled magnitude reaches 2**63 (an infinity, NaN). ``inf`` is a word only some
    durations take (``uf_duration_inf``); LeaseDuration and FragmentSize do not.
    """
    match = _SCANF_INT.match(text)
    if match is not None:
        number = _scanf_int(match.group(1))
        multiplier = _unit_multiplier(text[match.end():], units, default_unit, number == 0)
        if multiplier:        # (a number past int64 is out of any range we are given)
            number *= multiplier
            return number if low <= number <= high else None
    match = _SCANF_FLOAT.match(text)
    if match is None:
        return None
    sign, hex_digits, hex_exp, digits, exp = match.groups()
    exp = (hex_exp if hex_digits else exp) or ''
    exp = exp if exp.lstrip('+-') else '0'       # (glibc: 'e' without digits is no exponent)
    try:
        value = float.fromhex(f'{sign}{hex_digits}p{exp}') if hex_digits else \
            float(f'{sign}{digits}e{exp}') if digits else float(f'{sign}0')    # ('0x.')
    except OverflowError:
        return None
    multiplier = _unit_multiplier(text[match.end():], units, default_unit, value == 0)
    scaled = abs(value) * float(multiplier) + 0.5
    if not multiplier or not scaled < 2.0 ** 63:
        return None
    number = int(scaled) * (-1 if value < 0 else 1)
    return number if low <= number <= high else None


def _scanf_int(digits: str) -> int:
    """
    Return a whole number's text (a sign, digits) as glibc's ``%lld`` reads it, in int64.

    Saturated past int64, as glibc does; leading zeros are nothing to it. ``int()`` of the
    text raised a ValueError past 4300 digits (Python's limit) out of a node's start, where
    Cyclone reads 4400 zeros and ``10 s`` as 10 s.
    """
    magnitude = digits.lstrip('+-').lstrip('0')
    value = int(magnitude or '0') if len(magnitude) < 20 else 1 << 63
    value = -value if digits.startswith('-') else value
    return max(-(1 << 63), min((1 << 63) - 1, value))


def _unit_multiplier(unit: str, units: dict, default_unit: int, is_zero: bool) -> int:
    """
    Return what the ``unit`` after a number multiplies it by; 0 where Cyclone finds no unit.

    Spaces before it are skipped (only spaces, as Cyclone does); none: 1 for a zero (0 needs
    no unit), else ``default_unit``; else its name as written in ``units``.
    """
    unit = unit.lstrip(' ')
    if not unit:
        return 1 if is_zero else default_unit
    return units.get(unit, 0)


def _configured(uri: str | None, elements) -> dict:
    """
    Return ``{element: value}``: what Cyclone takes for each of ``elements`` (lower case).

    From ``$CYCLONEDDS_URI``, or ``uri``, read once for all of them. The last such element
    of the sources, in order, for our domain, its text trimmed and its environment
    references expanded as Cyclone does (:func:`expand_env`); None when no source sets it,
    or its expansion fails, every one None at a ``Domain`` ``Id``, element or attribute
    Cyclone refuses (it refuses the configuration then; :func:`_setting_texts`). Unreadable
    files are passed over (Cyclone says why).
    """
    value = os.environ.get('CYCLONEDDS_URI', '') if uri is None else uri
    try:
        domain_id = domain_id_from_env()
    except ValueError:
        domain_id = None                    # (the node says so where it opens its domain)
    found = dict.fromkeys(elements)
    for is_file, source in _uri_sources(value):
        if is_file:
            try:
                with open(source, encoding='utf-8', errors='replace') as f:
                    source = f.read()
            except (OSError, ValueError):
                continue
        if not _setting_texts(source, domain_id, found, is_file):
            return dict.fromkeys(found)         # what Cyclone refuses refuses all
    for element, raw in found.items():
        text = None if raw is None else _xml_text(raw)
        found[element] = None if text is None else expand_env(text.strip(_XML_SPACE),
                                                              domain_id)
    return found


def _xml_text(raw: str) -> str | None:
    """
    Return an element's text as Cyclone's parser hands it on; None where it refuses it.

    References replaced outside CDATA sections, whose text stands as it is (Cyclone 11.0.1
    reads ``&#54;00B`` and ``<![CDATA[600B]]>`` as 600 B); trimmed by the caller.
    """
    parts = _XML_CDATA.split(raw)           # text, CDATA, text, ... (comments gone)
    out = []
    for k, part in enumerate(parts):
        part = part if k % 2 else _xml_unescape(part)
        if part is None:
            return None
        out.append(part)
    return ''.join(out)


def _xml_unescape(text: str) -> str | None:
    """
    Return XML text with its references replaced, as Cyclone's parser does; None: refused.

    ``&lt;`` ``&gt;`` ``&amp;`` ``&apos;`` ``&quot;`` and ``&#N;``, ``&#xN;`` (at most 16
    characters after the ``&``, a Unicode code point); any other ``&`` is a parser error.
    """
    out, pos = [], 0
    while True:
        amp = text.find('&', pos)
        if amp < 0:
            return ''.join(out) + text[pos:]
        ref = _XML_REF.match(text, amp)
        if ref is None or ref.end() - amp > 17:
            return None
        hex_cp, dec_cp, name = ref.groups()
        code = None if name else int(hex_cp, 16) if hex_cp else int(dec_cp)
        if code is not None and code > 0x10FFFF:
            return None
        out.append(text[pos:amp] + (_XML_NAMED[name] if name else chr(code)))
        pos = ref.end()


def expand_env(value: str, domain_id: int | None = None, environ=None) -> str | None:
    """
    Return a Cyclone configuration ``value`` with its environment references expanded.

    Cyclone expands every element's text and attribute (``ddsrt_expand_envvars``, called by
    ``proc_update_cfgelem`` of ``ddsi_config.c``): ``${X}`` (empty when unset), ``${X:-Y}``
    (Y when X is unset or empty), ``${X:+Y}`` (Y when X is set and not empty, else empty),
    ``${X:?Y}`` (an error when X is unset or empty); Y is expanded in turn, and a ``$`` not
    followed by ``{`` stays as it is (``$X`` is not expanded). Unset, ``CYCLONEDDS_PID`` (and
    ``$``) is the process id and ``CYCLONEDDS_DOMAIN_ID`` the domain id ``domain_id``. None
    where Cyclone refuses the value: an unclosed or malformed reference, ``${X:?Y}`` with X
    unset or empty, references nested over 20 deep. File names in ``CYCLONEDDS_URI`` are
    opened as they are, unexpanded. ``environ``: the variables (default ``os.environ``).
    """
    env = os.environ if environ is None else environ
    return _expand(value, env, domain_id, 0)


def _expand(value: str, env, domain_id: int | None, depth: int) -> str | None:
    """Expand ``value`` at nesting ``depth`` (:func:`expand_env`); None: Cyclone refuses it."""
    if depth >= _EXPANSION_DEPTH:
        return None
    out, pos = [], 0
    while True:
        start = value.find('${', pos)
        if start < 0:
            return ''.join(out) + value[pos:]
        out.append(value[pos:start])
        end = start + 2
        while end < len(value) and value[end] not in ':}':
            end += 1
        if end >= len(value):
            return None                                  # unclosed
        name, op, alt = value[start + 2:end], None, None
        if value[end] == ':':
            if value[end + 1:end + 2] not in ('-', '+', '?'):
                return None                              # ${X:Y}
            op, end, nest = value[end + 1], end + 2, 0
            alt_start = end
            while end < len(value) and (value[end] != '}' or nest > 0):
                if value[end] == '{':
                    nest += 1
                elif value[end] == '}':
                    nest -= 1
                elif value[end] == '\\':
                    end += 1                             # (kept: Y is not unescaped)
                end += 1
            if end >= len(value):
                return None
            alt = value[alt_start:end]
        got = _env_value(name, env, domain_id)
        if op is None:
            part = got or ''
        elif op == '-':
            part = got if got else _expand(alt, env, domain_id, depth + 1)
        elif op == '+':
            part = _expand(alt, env, domain_id, depth + 1) if got else ''
        else:
            part = got or None                           # ${X:?message}: refused
        if part is None:
            return None
        out.append(part)
        pos = end + 1


def _env_value(name: str, env, domain_id: int | None) -> str | None:
    """Return what Cyclone looks up for ``name``: the variable, else its own two names."""
    if name in env:
        return env[name]
    if name in ('$', 'CYCLONEDDS_PID'):
        return str(os.getpid())
    if name == 'CYCLONEDDS_DOMAIN_ID' and domain_id is not None:
        return str(domain_id)
    return None


def _is_domain(attribute: str, domain_id: int) -> bool | None:
    """
    Return whether a ``Domain`` whose ``Id`` is ``attribute`` applies to ``domain_id``.

    None where Cyclone refuses the configuration (``uf_domainId`` of ``ddsi_config.c``): its
    references decoded and expanded (:func:`expand_env`), the value is ``any`` (any case, as
    written) or a number as ``sscanf``'s ``%u`` reads it with nothing after it
    (:func:`_scanf_u32`): ``'07'``, ``'+7'``, ``' 7'`` are domain 7 (the text compared with
    ``'7'`` skipped their settings), ``'-2'`` is 2**32 - 2. Refused (Cyclone 11.0.1):
    2**32 - 1, which ``'-1'`` and any number past 2**64 read as (they counted as another
    domain here, and one of 4301 digits raised a ValueError out of every node's configure),
    ``'default'``, ``'0x1'``, ``''``, ``'7 '``, ``' any'``, and a reference that cannot be
    decoded or expanded (the reader took the Domain's settings for the last three).
    """
    text = _xml_unescape(attribute)
    return None if text is None else _is_domain_text(text, domain_id)


def _is_domain_text(text: str, domain_id: int) -> bool | None:
    """Return :func:`_is_domain` of an ``Id`` already decoded (a ``Domain/Id`` element's)."""
    text = expand_env(text, domain_id)
    if text is None:
        return None
    if text.isascii() and text.lower() == 'any':
        return True
    number = _SCANF_INT.fullmatch(text)
    value = None if number is None else _scanf_u32(number.group(1))
    if value is None or value == (1 << 32) - 1:
        return None
    return value == domain_id


def _scanf_u32(digits: str) -> int:
    """
    Return a whole number's text (a sign, digits) as glibc's ``%u`` reads it, in uint32.

    As ``strtoul``: a magnitude past 2**64 - 1 saturates to it whatever the sign, a negative
    one is negated modulo 2**64; the assignment keeps the low 32 bits. Leading zeros are
    nothing to it; ``int()`` of the whole text raised a ValueError past 4300 digits.
    """
    magnitude = digits.lstrip('+-').lstrip('0')
    value = int(magnitude or '0') if len(magnitude) <= 20 else 1 << 64
    if value >= 1 << 64:
        value = (1 << 64) - 1
    elif digits.startswith('-'):
        value = -value
    return value % (1 << 32)


def _setting_texts(text: str, domain_id: int | None, found: dict, is_file: bool = False) -> bool:
    """
    Put in ``found`` the text of the last of each of its elements in ``text``, for our domain.

    An element ``text`` does not set keeps its value. Walks the tags once, as Cyclone's
    parser does: a commented-out setting is no setting, a blank one (no text once its
    references are decoded, comments left out and white space trimmed) gives no value, so the
    one before it stands, and a ``Domain`` whose ``Id`` (expanded) is neither ``any`` nor
    ``domain_id`` does not apply, from there on where it is an ``Id`` element (moved to the
    attribute; another domain's after data set since the last element in ``CycloneDDS``
    refuses the configuration, ``uf_domainId``). A setting counts only in its place
    (``LeaseDuration`` in ``CycloneDDS/Domain/Discovery``, ``FragmentSize`` in
    ``CycloneDDS/Domain/General``; :func:`_config_place`). False, at once, where Cyclone
    refuses the whole configuration: a ``Domain`` ``Id`` it refuses (:func:`_is_domain`),
    or an element or attribute that no build of Cyclone 0.10.x or 11.0.x knows on the way to
    those places (a file's top element other than ``CycloneDDS``; :data:`_CONFIG_CHILDREN`):
    the robots and ROS 2 Humble run 0.10.x, this venv 11.0.1, and a name only one of them
    knows must not drop the settings.
    """
    stack, start = [], None               # (element, skipped, place) per open element
    first, data = True, False             # data: set since the last element in CycloneDDS
    for match in _XML_TAG.finditer(text):
        closing = match.group(1)
        named = _TAG_NAME.match(match.group(0))
        if closing is None or named is None:
            continue                        # a comment, declaration or CDATA
        tag, name = named.group(1), named.group(1).lower()
        if closing:
            if stack and stack[-1][0] == name:
                if start is not None and not stack[-1][1]:
                    raw = re.sub(r'<!--.*?-->', '', text[start:match.start()], flags=re.S)
                    body = _xml_text(raw)
                    if body is None or body.strip(_XML_SPACE):    # (blank: no value)
                        setting = _PLACE_SETTINGS.get(stack[-1][2])
                        if setting in found:
                            found[setting] = raw
                        if stack[-1][2] == 'cyclonedds/domain/id' and domain_id is not None:
                            applies = None if body is None else _is_domain_text(
                                body.strip(_XML_SPACE), domain_id)
                            if applies is None or (not applies and data):
                                return False    # refused, or another domain's after data
                            if not applies and len(stack) > 1:
                                stack[-2] = (stack[-2][0], True, stack[-2][2])
                            data = data or applies
                        else:
                            data = True
                stack.pop()
            start = None
            continue
        skipped = bool(stack) and stack[-1][1]
        place = None
        if not skipped:
            parent = stack[-1][2] if stack else _implicit_parent(tag, is_file, first)
            place = _config_place(parent, tag, not is_file)
            if place is False:
                return False                # an element Cyclone does not know: refused
            data = data and parent != 'cyclonedds'
            for attribute in _XML_ATTRIBUTE.finditer(match.group(0), named.end()):
                known = _config_attribute(place, attribute.group(1), not is_file)
                if known is False:
                    return False            # (one after an Id of another domain is not read)
                if known == 'id' and domain_id is not None:
                    applies = _is_domain(attribute.group(2) if attribute.group(3) is None
                                         else attribute.group(3), domain_id)
                    if applies is None:
                        return False
                    if not applies:
                        skipped = True
                        break
                data = True
        first = False
        if not match.group(2):
            stack.append((name, skipped, place))
            start = match.end()
    return True


_CONFIG_CHILDREN = {
    '': ('CycloneDDS',),
    'cyclonedds': ('Domain', '>General', '>Partitioning@partitions', '>Threads', '>Sizing',
                   '>Compatibility', '>Discovery', '>Tracing', '>Internal|Unsupported',
                   '>TCP@tcp', '>DDSSecurity@security', '>SSL@ssl', '>SharedMemory@shm',
                   '>DDSI2E|DDSI2'),
    'cyclonedds/domain': ('Id', 'General', 'Security|DDSSecurity@security',
                          'Partitioning@partitions', 'Threads', 'Sizing', 'Compatibility',
                          'Discovery', 'Tracing', 'Internal|Unsupported', 'TCP@tcp', 'SSL@ssl',
                          'SharedMemory@shm'),
    'cyclonedds/domain/discovery': (
        'Tag', 'ExternalDomainId', 'DSGracePeriod', 'Peers', 'ParticipantIndex',
        'MaxAutoParticipantIndex', 'SPDPMulticastAddress', 'SPDPInterval',
        'DefaultMulticastAddress', 'InitialLocatorPruneDelay@11', 'DiscoveredLocatorPruneDelay@11',
        'Ports', 'EnableTopicDiscoveryEndpoints@topic', 'LeaseDuration'),
    'cyclonedds/domain/general': (
        'MulticastRecvNetworkInterfaceAddresses', 'Interfaces', 'AddrsetCosts@11',
        'ExternalNetworkAddress', 'ExternalNetworkMask', 'AllowMulticast', 'MulticastTimeToLive',
        'DontRoute', 'UseIPv6', 'Transport', 'EnableMulticastLoopback', 'MaxMessageSize',
        'MaxRexmitMessageSize', 'FragmentSize', 'RedundantNetworking', 'EntityAutoNaming'),
}
"""
The elements Cyclone knows on the way to our settings, in 0.10.x or 11.0.x, any build.

Cyclone 0.10.x (``ddsi_cfgelems.h``: ROS 2 Humble's ``rmw_cyclonedds``, the robots'
``cyclonedds`` 0.10.5) and 11.0.x (``ddsi__cfgelems.h``: this venv's 11.0.1), in their order,
aliases after ``|``; ``>``: moved (``CycloneDDS/Discovery`` is ``CycloneDDS/Domain/Discovery``,
``CycloneDDS/DDSI2E`` the ``Domain`` itself), with a warning. ``@`` names what the name needs
(:data:`_CYCLONE_BUILDS`): a build option (``TCP`` is always in 0.10.x and optional in 11.0.x,
``SharedMemory`` the other way round) or version 11 (``AddrsetCosts``, the two locator prune
delays). A name no build of either knows there refuses the configuration (0.10.x's
``Channels`` is in no build); what lies below the other elements is not judged here.
"""
_CYCLONE_BUILDS = tuple(
    frozenset(always + tuple(o for bit, o in enumerate(options) if k >> bit & 1))
    for always, options in ((('tcp',), ('ssl', 'shm', 'security', 'partitions', 'topic')),
                            (('11', 'shm'), ('tcp', 'ssl', 'security', 'partitions', 'topic')))
    for k in range(1 << len(options)))
"""
What each build of Cyclone 0.10.x and 11.0.x may know: its version and build options.

0.10.x: ``ENABLE_SSL``, ``ENABLE_SHM``, ``ENABLE_SECURITY``, ``ENABLE_NETWORK_PARTITIONS``,
``ENABLE_TOPIC_DISCOVERY``; 11.0.x: TCP, TCP_TLS (``SSL``), security, partitions, topic
discovery. The 0.10.5 wheel has TCP, partitions and topic discovery; the 11.0.1 wheel shared
memory, partitions and topic discovery.
"""
_CONFIG_ATTRIBUTES = {
    'cyclonedds': ('xmlns', 'xmlns:xsi', 'xsi:schemaLocation', 'xsi:noNamespaceSchemaLocation'),
    'cyclonedds/domain': ('Id',),
    'cyclonedds/domain/discovery': (), 'cyclonedds/domain/general': (),
    'cyclonedds/domain/discovery/leaseduration': (),
    'cyclonedds/domain/general/fragmentsize': (),
}
"""The attributes Cyclone 0.10.x and 11.0.x know on those elements (the same in both)."""
_PLACE_SETTINGS = {'cyclonedds/domain/discovery/leaseduration': 'leaseduration',
                   'cyclonedds/domain/general/fragmentsize': 'fragmentsize'}
"""The setting Cyclone takes at each place (elsewhere a same-named element is no setting)."""
_XML_ATTRIBUTE = re.compile(r'(?<![^\s"\'])([^\s=/>"\']+)\s*=\s*(?:"([^"]*)"|\'([^\']*)\')')
"""
An attribute in an opening tag, its value as written (Cyclone's parser trims none).

Its name starts after white space or a quote: tried from within a run of other characters,
the scan took time quadratic in the run (a 20 kB run: 10 s).
"""


def _implicit_parent(tag: str, is_file: bool, first: bool) -> str:
    """
    Return the place a source's top element opens in, as Cyclone's ``proc_elem_open`` has it.

    A file's is the root (only ``CycloneDDS`` is known there). Inline XML's first element,
    unless it is ``CycloneDDS``, gets an implicit ``CycloneDDS`` put around it, and unless it
    is ``Domain``, an implicit ``Domain`` too: ``<Discovery>...`` inline is the Domain's.
    The same in 0.10.x and 11.0.x.
    """
    if is_file or not first or _same_name(tag, 'CycloneDDS'):
        return ''
    return 'cyclonedds' if _same_name(tag, 'Domain') else 'cyclonedds/domain'


def _same_name(name: str, known: str) -> bool:
    """Say whether ``name`` is ``known`` to ``strcasecmp``: ASCII letters in any case."""
    return name.isascii() and name.lower() == known.lower()


@functools.lru_cache(maxsize=1024)
def _config_place(parent: str | None, tag: str, partial: bool):
    """
    Return the place of element ``tag`` opened in ``parent``; None: not judged; False: refused.

    ``parent`` None (below an element not judged) or not in :data:`_CONFIG_CHILDREN` is not
    judged. Else ``tag`` is matched as :func:`_cyclone_match` does (a prefix too for inline
    XML, ``partial``): refused only where no build knows it. Where builds differ on what it
    is (inline ``<DD>`` in ``CycloneDDS``: ``DDSI2E``, or ambiguous with ``DDSSecurity``),
    the first one on the way to a setting is taken. Cached: a tag name repeats.
    """
    if parent is None or parent not in _CONFIG_CHILDREN:
        return None
    names = _CONFIG_CHILDREN[parent]
    places = []
    for k in _cyclone_match(names, tag, partial):
        primary = names[k].split('@')[0].split('|')[0]
        places.append(f'{parent}/{primary.lower()}'.lstrip('/') if not primary.startswith('>')
                      else 'cyclonedds/domain' + ('' if primary == '>DDSI2E'
                                                  else '/' + primary[1:].lower()))
    on_the_way = [p for p in places if p in _CONFIG_CHILDREN or p in _PLACE_SETTINGS]
    return (on_the_way or places or [False])[0]


def _config_attribute(place, name: str, partial: bool):
    """Return the attribute ``name`` of element ``place`` is (lower case); False: refused."""
    if place is None or place not in _CONFIG_ATTRIBUTES:
        return None
    names = _CONFIG_ATTRIBUTES[place]
    found = _cyclone_match(names, name, partial)
    return names[found[0]].lower() if found else False


def _cyclone_match(names, name: str, partial: bool) -> list:
    """
    Return the indexes of ``names`` some build of Cyclone matches ``name`` to; [] for none.

    As ``find_cfgelem_by_name`` and ``matching_name_index`` of ``ddsi_config.c`` (the same
    in 0.10.x and 11.0.x), in each build (:data:`_CYCLONE_BUILDS`) with the names it has: a
    name or alias in any case; else, for inline XML only (``partial``), the entry whose
    primary name ``name`` is the longest prefix of (``<Disc>`` is ``Discovery``, ``<Lease>``
    is ``LeaseDuration``), none where two tie (``<D>`` in ``CycloneDDS``); with aliases, a
    ``name`` longer than the primary name that starts with it matches it too
    (``InternalX``). A name one build does not know or finds ambiguous another may take
    (inline ``<A>`` in ``General`` is ``AllowMulticast`` in 0.10.x, ambiguous with
    ``AddrsetCosts`` in 11.0.x): the reader refuses only what every build refuses.
    """
    exact, prefixes = [], []
    for k, entry in enumerate(names):
        entry, _, needs = entry.lstrip('>').partition('@')
        aliases = [a for a in entry.split('|') if a]
        if any(_same_name(name, alias) for alias in aliases):
            exact.append((k, needs))
            continue
        primary = aliases[0]
        cut = min(len(name), len(primary)) if len(aliases) > 1 else len(name)
        if cut <= len(primary) and _same_name(name[:cut], primary[:cut]):
            prefixes.append((k, needs, cut))
    found = []
    conditional = any(needs for _, needs in exact) or any(needs for _, needs, _ in prefixes)
    for build in _CYCLONE_BUILDS if conditional else _CYCLONE_BUILDS[:1]:
        here = [k for k, needs in exact if not needs or needs in build]
        if not here and partial:
            cuts = [(cut, k) for k, needs, cut in prefixes if not needs or needs in build]
            longest = max(cuts)[0] if cuts else 0
            here = [k for cut, k in cuts if cut == longest]
            here = here if len(here) == 1 else []
        found.extend(k for k in here[:1] if k not in found)
    return sorted(found)


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
