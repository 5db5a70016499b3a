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
How long two DDS participants take to hear each other again after one was silent.

A robot silent for longer than the participant lease (SIGSTOP, a Wi-Fi outage) is dropped by
its peers, and is heard again only once a participant announcement (SPDP) of one side reaches
the other. This measures that wait with two plain processes on this machine, each writing a
beat (its monotonic send time) every 50 ms on a RELIABLE topic and logging what it takes:

* ``--outage stop``: SIGSTOP the victim for ``--silence`` seconds, then SIGCONT (the chaos
  freeze; both processes on the loopback interface, or in two network namespaces with
  ``--netns``);
* ``--outage link``: both processes in network namespaces joined by a veth pair (root only),
  the victim's end down for ``--silence`` seconds (a radio out of range: both sides run on).

Reported per repeat: seconds from the end of the silence to the first beat sent after it that
arrived at the peer (``to_peer``), at the victim (``to_victim``), and the larger of the two
(``both``). The processes need only the ``cyclonedds`` binding (0.10.x or 11.x), so one
command line measures either series::

    python -m rog_ros.experiments.rediscovery --config loopback --silence 21 --repeats 3

``--config`` is ``loopback``, ``wifi`` (the shipped files, ``wifi`` with ``--netns``), or
any ``CYCLONEDDS_URI`` value; ``--extra`` appends XML (e.g. another ``SPDPInterval``).
Interrupted (Ctrl-C, SIGTERM) or failing, it resumes and ends both processes and deletes the
namespaces it made; what went wrong is said in one line (exit status 1).
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

BEAT_S = 0.05
"""Seconds between two beats of one process."""
READY_TIMEOUT_S = 30.0
"""Seconds the two processes may take to hear each other at the start."""
NETNS_PREFIX = 'rd%d' % (os.getpid() % 10 ** 7)
"""Name prefix of the two network namespaces (peer: the fleet's server, victim: its worker 0)
of ``--netns`` and ``--outage link``: named after this process, so that two runs at once do
not delete each other's."""
PHASE_S = 8.0
"""Default spread of the silence's start (s): Cyclone's default announcement interval with a
10 s lease."""


def child(name: str, config: str, domain: int, run_s: float) -> int:
    """
    Write a beat every ``BEAT_S`` and print each beat of the other process as it arrives.

    One line per beat taken, ``<sender> <sent> <taken>`` (monotonic seconds, one clock for
    the host, network namespaces included), so the parent can tell beats sent after the
    silence from those queued during it. Runs ``run_s`` seconds.
    """
    from dataclasses import dataclass

    from cyclonedds.qos import Policy, Qos
    from cyclonedds.domain import Domain, DomainParticipant
    from cyclonedds.idl import IdlStruct
    from cyclonedds.pub import DataWriter
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    from cyclonedds.util import duration

    @dataclass
    class Beat(IdlStruct, typename='rogrd.Beat'):
        """One beat: who sent it and when (monotonic seconds)."""

        sender: str
        sent: float

    keep = Domain(domain, config)
    participant = DomainParticipant(domain)
    qos = Qos(Policy.Reliability.Reliable(duration(seconds=1)), Policy.History.KeepLast(8))
    topic = Topic(participant, 'rogrd_beats', Beat, qos=qos)
    writer = DataWriter(participant, topic, qos=qos)
    reader = DataReader(participant, topic, qos=qos)
    end = time.monotonic() + run_s
    nxt = time.monotonic()
    while time.monotonic() < end:
        now = time.monotonic()
        if now >= nxt:
            writer.write(Beat(sender=name, sent=now))
            nxt = now + BEAT_S
        for beat in reader.take(N=64):
            if beat.sender != name:
                print(f'{beat.sender} {beat.sent:.6f} {time.monotonic():.6f}', flush=True)
        time.sleep(0.005)
    del keep
    return 0


def _config(value: str, extra: str) -> str:
    """Return the ``CYCLONEDDS_URI`` value of ``--config`` and ``--extra``."""
    if value in ('loopback', 'wifi'):
        from rog_ros.transport.cyclone_config import cyclone_uri
        value = cyclone_uri(value)
    return ','.join(part for part in (value, extra) if part)


class _Log:
    """The beats one child printed, read on a thread: (sent, taken) of the other's beats."""

    def __init__(self, proc):
        """Start reading ``proc``'s stdout."""
        self.proc = proc
        self.beats = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        """Append each beat line; ignore anything else (Cyclone's warnings)."""
        for line in self.proc.stdout:
            parts = line.split()
            if len(parts) == 3:
                try:
                    beat = (float(parts[1]), float(parts[2]))
                except ValueError:
                    continue
                with self.lock:
                    self.beats.append(beat)

    def first_after(self, t0: float):
        """Return when the first beat sent at or after ``t0`` was taken (None: none yet)."""
        with self.lock:
            taken = [b[1] for b in self.beats if b[0] >= t0]
        return min(taken) if taken else None


def netns_up():
    """
    Return the two namespaces and their veth pair, made (lo up in each, multicast on).

    A :class:`rog_ros.net.netns.NetnsFleet` of one worker, 1500-byte frames (a Wi-Fi MTU) and
    multicast on, as the shipped ``wifi`` configuration discovers by it.
    """
    from rog_ros.net import netns
    return netns.NetnsFleet(1, prefix=NETNS_PREFIX, mtu=1500, multicast=True).create()


def one_repeat(uri: str, outage: str, silence_s: float, wait_s: float, domain: int,
               net, python: str, phase_s: float = 0.0) -> dict:
    """
    Start the two processes, silence the victim, and measure how long until both hear again.

    The silence starts ``phase_s`` seconds (and 2 s) after they first met: both announce
    themselves at fixed intervals from their start, so a silence at the same moment of every
    repeat ends at the same moment of that schedule (every 21 s outage of one series ended
    0.7-0.9 s before an announcement); :func:`main` draws it over one interval. Returns
    ``to_peer``, ``to_victim``, ``both`` (seconds after the silence, None where nothing
    arrived within ``wait_s``) and ``ready_s`` (how long the first meeting took). ``net``:
    the namespaces of :func:`netns_up` the two run in, or None (this machine's loopback).
    """
    env = dict(os.environ, CYCLONEDDS_URI=uri)
    env['PYTHONPATH'] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))]
        + [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p])
    run_s = READY_TIMEOUT_S + 2 + silence_s + wait_s + 5
    procs, logs, errs = [], [], []
    try:
        for i, name in enumerate(('peer', 'victim')):
            cmd = [python, '-m', 'rog_ros.experiments.rediscovery', '--child', name,
                   '--config', uri, '--domain', str(domain), '--run-s', str(run_s)]
            if net is not None:
                cmd = net.exec_prefix((net.server_ns, net.worker_ns(0))[i]) + cmd
            errs.append(tempfile.TemporaryFile(mode='w+'))
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                    stderr=errs[-1], universal_newlines=True)
            procs.append(proc)
            logs.append(_Log(proc))
        t_start = time.monotonic()
        while not (logs[0].first_after(0) and logs[1].first_after(0)):
            _check_running(procs, errs)
            if time.monotonic() - t_start > READY_TIMEOUT_S:
                raise RuntimeError('the two processes did not meet within '
                                   f'{READY_TIMEOUT_S:.0f} s (--config reaches from one to '
                                   'the other?)')
            time.sleep(0.05)
        ready_s = time.monotonic() - t_start
        time.sleep(2.0 + phase_s)
        victim = procs[1]
        if outage == 'stop':
            os.kill(victim.pid, signal.SIGSTOP)
            try:
                time.sleep(silence_s)
            finally:
                os.kill(victim.pid, signal.SIGCONT)
        else:
            net.set_link(0, up=False)
            try:
                time.sleep(silence_s)
            finally:
                net.set_link(0, up=True)
        t_back = time.monotonic()
        while time.monotonic() - t_back < wait_s:
            if logs[0].first_after(t_back) and logs[1].first_after(t_back):
                break
            time.sleep(0.02)
        to_peer, to_victim = (log.first_after(t_back) for log in logs)
        result = {'to_peer': _since(to_peer, t_back), 'to_victim': _since(to_victim, t_back),
                  'ready_s': round(ready_s, 3), 'phase_s': round(phase_s, 3)}
        both = [result['to_peer'], result['to_victim']]
        result['both'] = None if None in both else max(both)
        return result
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for err in errs:
            err.close()


def _check_running(procs, errs) -> None:
    """
    Raise, with the last line it wrote on stderr, if a process already ended.

    A process whose Cyclone refused the configuration (a wrong ``--extra``) ends at once, and
    waiting for it to meet the other took 30 s and said nothing of why.
    """
    for proc, err in zip(procs, errs):
        if proc.poll() is not None:
            err.seek(0)
            lines = [line.strip() for line in err.read().splitlines() if line.strip()]
            cyclone = [line for line in lines if 'config:' in line][:1]   # what it refused
            said = '; '.join(dict.fromkeys(cyclone + lines[-1:])) or 'nothing on stderr'
            raise RuntimeError(f'a measuring process ended with status {proc.returncode} '
                               f'before the two met: {said}')


def _since(t, t0):
    """Return ``t - t0`` rounded to ms (None stays None)."""
    return None if t is None else round(t - t0, 3)


def main(argv=None) -> int:
    """Parse the command line; measure ``--repeats`` silences; print one JSON line each."""
    ap = argparse.ArgumentParser(prog='python -m rog_ros.experiments.rediscovery',
                                 description=__doc__.split('\n\n')[0].strip(),
                                 allow_abbrev=False)
    ap.add_argument('--config', default='loopback',
                    help='loopback, wifi, or a CYCLONEDDS_URI value (default loopback)')
    ap.add_argument('--extra', default='', help='XML appended to the configuration')
    ap.add_argument('--outage', choices=('stop', 'link'), default='stop',
                    help='stop: SIGSTOP the victim; link: set its veth link down (implies '
                    '--netns, needs --config wifi; default stop)')
    ap.add_argument('--silence', type=float, default=21.0, help='seconds (default 21)')
    ap.add_argument('--wait', type=float, default=45.0,
                    help='seconds to wait for the first beats after the silence (default 45)')
    ap.add_argument('--repeats', type=int, default=3, help='silences measured (default 3)')
    ap.add_argument('--phase', type=float, default=PHASE_S,
                    help='the silence starts 2 s plus a random 0..PHASE seconds after the two '
                    f'met (default {PHASE_S:.0f}: one default announcement interval)')
    ap.add_argument('--seed', type=int, default=None, help='seed of those random phases')
    ap.add_argument('--domain', type=int, default=77,
                    help='DDS domain of the two processes, 0..232 (default 77)')
    ap.add_argument('--netns', action='store_true',
                    help='run the two processes in network namespaces (root; --outage link '
                    'implies it)')
    ap.add_argument('--python', default=sys.executable,
                    help='the interpreter of the processes (another binding series)')
    ap.add_argument('--child', help=argparse.SUPPRESS)
    ap.add_argument('--run-s', type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child, args.config, args.domain, args.run_s)
    if args.silence <= 0 or args.wait <= 0 or args.repeats < 1 or args.phase < 0:
        ap.error('--silence and --wait must be > 0, --phase >= 0 and --repeats >= 1')
    if not 0 <= args.domain <= 232:
        ap.error(f'--domain {args.domain} is not a DDS domain id: give 0..232')
    netns = args.netns or args.outage == 'link'
    if netns and args.config == 'loopback':
        ap.error('--outage link and --netns put the two processes in two network namespaces, '
                 'which the loopback configuration cannot reach across: add --config wifi')
    draw = random.Random(args.seed)
    uri = _config(args.config, args.extra)
    before = signal.signal(signal.SIGTERM, _terminated)
    net = None
    try:
        if netns:
            net = netns_up()
        for _ in range(args.repeats):
            result = one_repeat(uri, args.outage, args.silence, args.wait, args.domain,
                                net, args.python, draw.uniform(0.0, args.phase))
            print(json.dumps(dict(result, outage=args.outage, silence=args.silence)),
                  flush=True)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f'{ap.prog}: error: {exc}', file=sys.stderr)
        return 1
    finally:
        if net is not None:
            net.delete()
        signal.signal(signal.SIGTERM, before)
    return 0


def _terminated(signum, frame) -> None:
    """
    Turn SIGTERM into SystemExit, so the ``finally`` blocks run as on Ctrl-C.

    Killed without them, the run left the victim stopped for good (SIGSTOP, no SIGCONT), the
    peer writing beats for a minute and a half, and the namespaces in place.
    """
    raise SystemExit(128 + signum)


if __name__ == '__main__':
    sys.exit(main())
