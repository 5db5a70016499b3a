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
import socket
import sys
from urllib.parse import unquote
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
    parts = [config_path(kind).as_uri()]
    for peer in peers:  # Cyclone aborts the process on a peer it cannot resolve
        try:
            socket.getaddrinfo(_host_of(peer), None)
        except (socket.gaierror, UnicodeError) as exc:
            raise ValueError(f'DDS peer {peer!r} does not resolve: {exc}') from exc
    if peers:
        parts.append('<Discovery><Peers>%s</Peers></Discovery>'
                     % ''.join('<Peer address=%s/>' % quoteattr(p) for p in peers))
    return ','.join(parts)


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


def uri_problem(uri: str | None = None) -> str | None:
    """
    Say why ``$CYCLONEDDS_URI`` (or ``uri``) names a configuration file that is not there.

    Cyclone reads the files when a node opens its first participant, so a typo in the path
    ended every node in a DDS traceback after the robot had started them. Inline XML and
    files that exist are not judged here (``rog doctor`` opens a participant with them).
    """
    value = os.environ.get('CYCLONEDDS_URI', '') if uri is None else uri
    for part in value.split(','):
        part = part.strip()
        if not part.startswith('file://'):
            continue
        path = part[len('file://'):]
        # as typed, or percent-encoded as Path.as_uri writes it (a folder with a space)
        if not (os.path.isfile(path) or os.path.isfile(unquote(path))):
            return (f'CYCLONEDDS_URI names {part}, which is not a file; fix the path or '
                    'unset CYCLONEDDS_URI')
    return None
