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
The ROS 2 graph for ``rog doctor``: node names and GID layouts on this machine's DDS domain.

``ros2 node list`` is built from the ``ros_discovery_info`` samples every participant
publishes (:mod:`rog_ros.transport.discovery_info`). Two mistakes there cost hours and DDS
does not report either:

* **a node name twice** (two fleets on one domain and one namespace, two robots whose nodes
  were renamed alike): ROS 2 warns, tools mix the two nodes up, and two such fleets' traffic
  mixes too;
* **the other GID layout** (``Gid`` is 24 bytes up to Humble, 16 from Iron on, under one type
  name): each side misreads the other's samples, so a Humble ``ros2 node list`` shows none of
  the embedded nodes, or an Iron one none of Humble's.

A child process (Cyclone aborts the process on a configuration it cannot use) listens on
``$ROS_DOMAIN_ID`` with the configuration the robots' nodes get for :data:`LISTEN_S`, with one
reader per layout (Cyclone does not match readers and writers of the two layouts), and parses
each sample's CDR bytes itself: the layout is the one whose parse uses up the sample exactly.
A participant whose sample did not arrive is still placed by its writer's USER_DATA
(``typehash=``: Iron and newer; none: Humble or older). The parent turns what was seen into
one line per problem (:func:`graph_findings`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from rog_ros.nodes.doctor_checks import cyclone_unusable, Finding
from rog_ros.transport.graph_entry import LAYOUTS, parse_entry
from rog_ros.transport.topics import NAMESAKE_FIX, qualified

CHECK = 'ros graph'
LISTEN_S = 3.0
"""How long the child listens: discovery on a quiet network, then the transient-local samples."""
CHILD_TIMEOUT_S = 30.0
"""How long the child may take in all (Cyclone's start and stop included)."""
HUMBLE_OR_OLDER = 'Humble or older'
ROS_DISTRO_FOR = {16: 'iron, jazzy or newer: unset ROS_DISTRO, or set the distribution the '
                      'ROS 2 side runs', 24: 'ROS_DISTRO=humble'}
"""What to set where this machine's embedded nodes must use the peers' layout."""


def _layout_of_writer(user_data: bytes):
    """Return the GID size a ``ros_discovery_info`` writer's USER_DATA implies."""
    from rog_ros.transport.discovery_info import message_types
    text = bytes(user_data or b'').decode('ascii', 'replace')
    if 'typehash=' not in text:
        return 24                      # rmw before Iron sends no type hash
    for size in LAYOUTS:
        if f'typehash={message_types(size)[3]};' in text:
            return size
    return None                        # a hash of neither: not a layout we know


def read_graph(domain: int, listen_s: float = LISTEN_S) -> dict:
    """
    Listen to ``ros_discovery_info`` on ``domain`` for ``listen_s``; return what was seen.

    ``{'participants': {GUID hex: {'layout': 16, 24 or None, 'nodes': [[ns, name], ...]}}}``;
    a participant known from its writer only has no ``nodes``. Run in a child (``--read``).
    """
    from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication
    from cyclonedds.domain import DomainParticipant
    from cyclonedds.qos import Policy

    from rog_ros.transport.raw_take import take_serialised
    from rog_ros.transport.discovery_info import open_reader, TOPIC

    participants, readers, seen = [], [], {}
    for size in LAYOUTS:     # one participant per layout: one topic name, two types
        participants.append(DomainParticipant(domain))
        readers.append(open_reader(participants[-1], size))
    publications = BuiltinDataReader(participants[0], BuiltinTopicDcpsPublication)
    ours = {p.guid.bytes for p in participants}
    end = time.monotonic() + listen_s
    while True:
        for reader in readers:
            for data, info in take_serialised(reader._ref):
                parsed = parse_entry(bytes(data)) if info.valid_data else None
                if parsed is not None and parsed[1] not in ours:
                    seen[parsed[1].hex()] = {'layout': parsed[0],
                                             'nodes': [list(n) for n in parsed[2]]}
        for pub in publications.take(N=256):
            key = pub.participant_key.bytes if pub.participant_key else None
            if pub.topic_name == TOPIC and key and key not in ours and key.hex() not in seen:
                user_data = pub.qos[Policy.Userdata]
                seen[key.hex()] = {'layout': _layout_of_writer(
                    user_data.data if user_data else b''), 'nodes': None}
        if time.monotonic() >= end:
            break
        time.sleep(0.1)
    return {'participants': seen}


def _names(fqns, most: int = 4) -> str:
    """Return ``fqns`` for one line: the first ``most``, then how many more."""
    fqns = list(fqns)
    shown = ', '.join(fqns[:most])
    return shown + (f' and {len(fqns) - most} more' if len(fqns) > most else '')


def graph_findings(result: dict, domain: int, size: int, distro: str) -> list:
    """
    Return the findings of :func:`read_graph`'s ``result``: duplicates, layouts, or all well.

    ``size``: the GID bytes this machine's embedded nodes publish (``$ROS_DISTRO``:
    ``distro``).
    """
    participants = result.get('participants') or {}
    where = f'domain {domain}'
    out = []
    holders = {}
    for key, p in participants.items():
        for ns, name in p.get('nodes') or []:
            holders.setdefault(qualified(ns, name), []).append(key)
    twice = {fqn: keys for fqn, keys in holders.items() if len(keys) > 1}
    if twice:
        said = _names(f'{fqn} ({len(keys)}x)' for fqn, keys in sorted(twice.items()))
        out.append(Finding(CHECK, 'warn', f'{where}: node names used more than once: {said}; '
                           'ROS 2 tools mix such nodes up', NAMESAKE_FIX))
    other = {k: p for k, p in participants.items() if p.get('layout') not in (size, None)}
    if other:
        theirs = 24 if size == 16 else 16
        nodes = [qualified(ns, name) for p in other.values() for ns, name in p['nodes'] or []]
        what = f' ({_names(nodes)})' if nodes else ''
        release = HUMBLE_OR_OLDER if theirs == 24 else 'Iron or newer'
        here = f'ROS_DISTRO={distro}' if distro else 'ROS_DISTRO unset'
        out.append(Finding(CHECK, 'warn', f'{where}: {len(other)} participant(s){what} publish '
                           f'{theirs}-byte GIDs (ROS 2 {release}), the nodes here {size} '
                           f'({here}): ros2 node list on either side shows none of the '
                           'nodes of the other',
                           'start the embedded nodes of rog_ros (rog fleet, rog robot) with '
                           f'{ROS_DISTRO_FOR[theirs]}'))
    if not out:
        named = sum(len(p.get('nodes') or []) for p in participants.values())
        detail = (f'{where}: {len(participants)} other participant(s), {named} node(s), no name '
                  f'twice, {size}-byte GIDs as here' if participants else
                  f'{where}: no other ROS 2 participant seen in {LISTEN_S:g} s')
        out.append(Finding(CHECK, 'ok', detail))
    return out


def check_graph():
    """Read this domain's ROS 2 graph in a child; one line per problem, one if it failed."""
    if cyclone_unusable():
        return []                           # said by the cyclonedds check
    from rog_ros.nodes.robot import robot_environment
    from rog_ros.transport.cyclone_config import domain_id_from_env, uri_problem
    from rog_ros.transport.discovery_info import gid_size
    try:
        domain = domain_id_from_env()
    except ValueError:
        return []                           # said by the environment check
    uri = os.environ.get('CYCLONEDDS_URI', '')
    if uri and uri_problem(uri):
        return []                           # said by the dds check
    env = dict(os.environ, CYCLONEDDS_URI=uri or robot_environment({})['CYCLONEDDS_URI'])
    cmd = [sys.executable, '-m', 'rog_ros.nodes.doctor_graph', '--read', str(domain)]
    why = None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env,
                              timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        why = f'the reader hung for {CHILD_TIMEOUT_S:g} s'
    else:
        try:
            result = json.loads(done.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            tail = ' '.join((done.stderr or '').strip().splitlines()[-1:])[:200]
            why = f'the reader ended with status {done.returncode}'
            why += f': {tail}' if tail else ''
    if why is not None:
        return [Finding(CHECK, 'warn', f'domain {domain}: cannot read ros_discovery_info '
                        f'({why}); node names and GID layouts not checked')]
    return graph_findings(result, domain, gid_size(), os.environ.get('ROS_DISTRO', ''))


def _child(argv) -> int:
    p = argparse.ArgumentParser(prog='python -m rog_ros.nodes.doctor_graph', allow_abbrev=False)
    p.add_argument('--read', type=int, required=True, metavar='DOMAIN')
    p.add_argument('--listen', type=float, default=LISTEN_S, metavar='S')
    args = p.parse_args(argv)
    print(json.dumps(read_graph(args.read, args.listen)), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(_child(sys.argv[1:]))
