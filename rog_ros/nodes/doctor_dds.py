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
DDS round trips for ``rog doctor``: two participants of one child process exchange a message.

A child, because Cyclone aborts the whole process on a configuration it cannot use (a peer that
does not resolve) and discovery can hang; the parent reads one JSON line or reports how the
child ended. Checked: the loopback file ``rog fleet`` uses, and what robots use, the user's
``CYCLONEDDS_URI`` or, unset, the shipped Wi-Fi file that ``rog robot`` sets.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from rog_ros.nodes.doctor_checks import cyclone_unusable, Finding

ROUND_TRIP_TIMEOUT_S = 30.0
"""How long the child may take: discovery, one message and Cyclone's start and stop."""


def round_trip(config: str, domain: int, timeout_s: float = 10.0) -> dict:
    """
    Publish one message between two participants of this process; return what happened.

    ``config``: a configuration for ``DdsBus`` (a path or XML), or '' for the environment's
    (``$CYCLONEDDS_URI`` or Cyclone's defaults). Run in a child (``--round-trip``).
    """
    from rog_ros.protocol import messages as m
    from rog_ros.transport.dds_bus import DdsBus
    namespace = f'/rog_doctor_{os.getpid()}'
    start = time.monotonic()
    a = DdsBus(namespace=namespace, domain_id=domain, config=config or None,
               node_name='rog_doctor_a')
    b = DdsBus(namespace=namespace, domain_id=domain, config=config or None,
               node_name='rog_doctor_b')
    try:
        b.subscribe('doctor/train_status')
        a.advertise('doctor/train_status')
        deadline = start + timeout_s
        while a.matched('doctor/train_status') < 1:
            if time.monotonic() > deadline:
                return {'ok': False, 'why': f'the two participants did not discover each '
                        f'other within {timeout_s:g} s'}
            time.sleep(0.02)
        discovered = time.monotonic() - start
        sent = time.monotonic()
        a.publish('doctor/train_status', m.TrainStatus(node=7, stamp=1.0))
        while time.monotonic() < deadline:
            for _, msg in b.poll(0.05):
                if getattr(msg, 'node', None) == 7:
                    return {'ok': True, 'discovery_s': discovered,
                            'latency_ms': 1e3 * (time.monotonic() - sent)}
        return {'ok': False, 'why': f'discovered, but the message did not arrive within '
                f'{timeout_s:g} s'}
    finally:
        a.close()
        b.close()


def _round_trip_child(uri: str, label: str, fix: str):
    """
    Run ``round_trip`` in a child with ``CYCLONEDDS_URI=uri``; a crash or hang is a finding too.

    The child gets the variable exactly as the nodes do (not a path of its own), so the round
    trip reads the configuration the way they will. When it fails, Cyclone's own reason (the
    line it logs before the traceback) is quoted: the traceback's last line says only
    ``DDS_RETCODE_ERROR``.
    """
    from rog_ros.transport.cyclone_log import cyclone_said
    domain = 150 + os.getpid() % 80        # away from 0 and from rog fleet's domains
    cmd = [sys.executable, '-m', 'rog_ros.nodes.doctor_dds', '--round-trip', '',
           '--domain', str(domain)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=ROUND_TRIP_TIMEOUT_S,
                              env=dict(os.environ, CYCLONEDDS_URI=uri))
    except subprocess.TimeoutExpired:
        return Finding(label, 'fail', f'DDS round trip hung for {ROUND_TRIP_TIMEOUT_S:g} s', fix)
    lines = done.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        said = cyclone_said(done.stderr or '')
        tail = ' '.join((done.stderr or done.stdout).strip().splitlines()[-2:])[:300]
        if said:
            tail = 'Cyclone DDS said: ' + ' / '.join(said)[:500]
        how = (f'was killed by signal {-done.returncode} (Cyclone aborts on a configuration '
               'it cannot use)' if done.returncode < 0 else f'ended with status {done.returncode}')
        return Finding(label, 'fail', f'DDS round trip {how}: {tail or "no output"}', fix)
    if not result.get('ok'):
        return Finding(label, 'fail', f'DDS round trip failed: {result.get("why")}', fix)
    return Finding(label, 'ok', f'DDS round trip: discovery {result["discovery_s"]:.2f} s, '
                   f'one message {result["latency_ms"]:.1f} ms')


def check_dds():
    """Run a round trip with each configuration the nodes of this machine would get."""
    if cyclone_unusable():
        return []                           # said by the cyclonedds check
    from rog_ros.nodes.robot import robot_environment
    from rog_ros.transport.cyclone_config import cyclone_uri, uri_problem
    out = [_round_trip_child(cyclone_uri('loopback'), 'dds (rog fleet)',
                             'see docs/troubleshooting.md, "Robots do not see each other"; '
                             'in a container: a loopback interface with multicast')]
    uri = os.environ.get('CYCLONEDDS_URI', '')
    if not uri:                             # what rog robot sets when the user has not
        out.append(_round_trip_child(robot_environment({})['CYCLONEDDS_URI'], 'dds (rog robot)',
                                     'rog robot uses config/cyclonedds_wifi.xml when '
                                     'CYCLONEDDS_URI is unset; see docs/troubleshooting.md'))
    else:
        problem = uri_problem(uri)          # the check rog robot makes before it starts nodes
        if problem:
            out.append(Finding('dds (CYCLONEDDS_URI)', 'fail',
                               problem.rsplit('; fix the path', 1)[0],
                               'point it at an existing file (config/cyclonedds_wifi.xml), '
                               'or unset it'))
        else:
            out.append(_round_trip_child(uri, 'dds (CYCLONEDDS_URI)',
                                         'check the configuration CYCLONEDDS_URI gives: '
                                         'its <Interfaces>, and every <Peer> must resolve'))
    return out


def _child(argv) -> int:
    p = argparse.ArgumentParser(prog='python -m rog_ros.nodes.doctor_dds', allow_abbrev=False)
    p.add_argument('--round-trip', required=True, metavar='CONFIG',
                   help="DdsBus configuration ('' for the environment's)")
    p.add_argument('--domain', type=int, required=True)
    args = p.parse_args(argv)
    print(json.dumps(round_trip(args.round_trip, args.domain)), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(_child(sys.argv[1:]))
