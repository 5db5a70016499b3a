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
Kernel link emulation: one network namespace per robot, veth pairs to the server, tbf rates.

``rog fleet --netns`` (root only) replaces application-level shaping by real kernel shaping:

* namespace ``<prefix>s`` holds the server, ``<prefix>w<r>`` worker r;
* a veth pair per worker (``<prefix>d<r>`` on the server's side: downlink egress,
  ``<prefix>u<r>`` on the worker's side: uplink egress), created *inside* the namespaces
  (``ip -n <srv> link add ... peer ... netns <wrk>``), so no interface ever appears in, or is
  taken from, the host; the namespaces have no route out, so traffic stays inside;
* shaping qdiscs on both ends of each pair (uplink: worker side, downlink: server side)
  whose rate a :class:`RateFollower` updates from the worker's trace (see "Shaping" below);
* Cyclone DDS in each namespace binds its veth address(es) and lists the other end as a
  unicast peer (:func:`cyclone_xml`): no multicast, datagrams below the 1500-byte MTU.

Names are unique per fleet (random prefix, at most 15 characters per interface) and
everything is deleted again by :meth:`NetnsFleet.delete` (also on errors, via ``with``).
Symptom -> knob: "Operation not permitted" -> run as root (CAP_NET_ADMIN and CAP_SYS_ADMIN);
"ip: not found" -> apt-get install iproute2.

Shaping, and how it differs from the application-level :class:`~rog_ros.net.shaper.
TokenBucketShaper`: each shaped end is a ``tbf`` *gate* (root, ``1:``) over an ``htb`` class
(``2:1``, the link's rate) over a ``bfifo`` (``3:``, the queue: 200 ms of the rate).

* A rate change is ``tc class change`` of the htb class, which keeps its tokens: a
  backlogged sender gets the trace's bytes across changes. (A ``tc qdisc replace`` of tbf,
  the shaper until 2026-12-07, refilled its bucket at every change: measured 11.4 kB more
  than the trace per change, 8% of a trace alternating 10 / 12 Mbit/s every 0.1 s.) The
  bucket (:func:`tbf_burst_bytes`: two frames or 4 ms of the rate) only bounds what an idle
  link may send at once. htb counts its tokens in time, not bytes: a class whose last frame
  cost more than it had waits out that frame's time *at the old rate* before the new rate
  applies (the user-space bucket repays the bytes at the new rate). After a slow rate that is
  long: a 9014-byte frame is 3.6 s at 0.02 Mbit/s (the ``outages`` preset's windows go down
  to 0.0008 Mbit/s; htb caps a debt at 60 s), and a link back at 20 Mbit/s sent nothing for
  the 2 s after the change from 0.01 Mbit/s. So a change up from a rate whose frame takes
  over :data:`CLASS_RESET_LAG_S` (0.72 Mbit/s for 9000-byte frames), unless an outage since
  has repaid that time, makes the class again (full tokens; the frames it held, at most
  :func:`queue_limit` of the slow rate, are dropped: DDS repairs them).
* An outage (rate 0) closes the gate: tbf with a 1-byte bucket (:func:`gate_args`), so that
  no frame fits it. Frames queued before the outage stay queued and leave after it at the
  next rate; frames sent during it are dropped at the gate (a radio out of range drops them
  after its retries; a reliable DDS writer repairs them after the outage). tbf refills its
  bucket at every change, so a gate that admits frames lets one out as it closes (measured
  with the one-frame outage bucket used until 2026-12-07: one 9000-byte frame 0.06 ms after
  each outage's tc returned); a bucket no frame fits lets out none. The gate is otherwise
  open at :data:`GATE_OPEN_RATE`, above any trace, so the htb class alone sets the rate (a
  trace above 10 Gbit/s gets 10 Gbit/s). The kernel logs "sch_tbf: burst 1 is lower than
  device ... mtu" (rate-limited) as a gate closes: that is the point of the 1-byte bucket.
* A change does not wake a qdisc that had scheduled its next dequeue at the old rate (the
  closed gate's is minutes away): a backlogged sender with a full socket buffer queued
  nothing to wake it (measured: nothing for 3.5 s of an 8 Mbit/s stretch). Each change
  therefore sends one empty UDP datagram (42 bytes on the wire) from that end
  (:meth:`NetnsFleet.kick`), whose enqueue runs the qdiscs at the new rate: from port
  ``KICK_PORT`` (10) to the peer's discard port (9), both below every DDS port (7400 on),
  where nothing listens.

The three qdiscs of an end are set in one ``tc -batch`` process (a change: one or two lines).
A batch that fails part-way (a class deleted, its add refused) leaves the kernel out of step
with what the fleet recorded: the end is made again from scratch (:func:`rebuild_lines`,
counted in :attr:`NetnsFleet.rebuilds`). If that fails too, :meth:`NetnsFleet.set_rate` raises
(which end, both errors), the :class:`RateFollower` stops and its :meth:`RateFollower.failure`
says so in one line: ``rog fleet`` ends the run there (exit status 1) and marks its summary,
unless the run's results were complete before it (the server's final summary written: then a
warning, ``rog_ros.nodes.fleet._FollowerCheck``). A kick that cannot be sent while the fleet
is live is said once and counted (:meth:`NetnsFleet.kick`).
:func:`shaping_unavailable_reason` says whether this kernel has ``sch_tbf`` and ``sch_htb``.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
import logging
import os
import secrets
import shutil
import socket
import subprocess
import threading
import time

SUBNET = '10.231'          # 10.231.<rank>.1 (server end) / .2 (worker end), inside the namespaces
MAX_BUCKET_S = 200.0       # tc keeps a bucket's time (burst / rate) in 32 bits of 64 ns: < 274 s
ETH_HEADER = 14
DISCARD_PORT = 9           # where a kick goes: an empty datagram, answered by port unreachable
KICK_PORT = 10             # where it comes from: not an ephemeral port, which a DDS port can be
CLONE_NEWNET = 0x40000000
DEFAULT_MTU = 9000         # veth MTU: see NetnsFleet
UDP_IP_HEADERS = 28
RTPS_HEADROOM = 128        # RTPS header + INFO_TS/INFO_DST + DATA_FRAG, with margin
GATE_OPEN_RATE = '10gbit'  # the tbf gate when open: above any trace, the htb class shapes
GATE_CLOSED_BURST = 1      # the gate's bucket in an outage: no frame fits, none leaves
PROBE_MTU = 65535          # shaping_unavailable_reason's lines: lo's MTU is 65536
CLASS_RESET_LAG_S = 0.1    # longest wait at an old rate a change up may inherit (else: remake)
HTB_MAX_DEBT_S = 60.0      # htb's mbuffer: no class owes more time than this
REBUILD_HANDLE = '4:'      # the closed gate that clears an end before it is made again
LOG = logging.getLogger('rog_ros.netns')


class NetnsError(RuntimeError):
    """Namespaces cannot be created or changed here; the message says why and what to do."""


def unavailable_reason() -> str | None:
    """Why kernel emulation cannot run here (None when it can): root, ``ip``, ``tc``."""
    if os.geteuid() != 0:
        return 'needs root (network namespaces and tc need CAP_NET_ADMIN/CAP_SYS_ADMIN)'
    missing = [tool for tool in ('ip', 'tc') if shutil.which(tool) is None]
    if missing:
        return f'{" and ".join(missing)} not found: apt-get install iproute2'
    return None


def check_available() -> None:
    """Raise :class:`NetnsError` with the reason when kernel emulation cannot run."""
    reason = unavailable_reason()
    if reason is not None:
        raise NetnsError(f'--netns {reason}; without root use the default application-level '
                         f'shaping')


def _run(cmd: list, stdin: str | None = None) -> str:
    """Run a setup command (``stdin``: its input); return its output or raise NetnsError."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False,
                              input=stdin)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetnsError(f'{" ".join(cmd)}: {exc}') from exc
    if proc.returncode != 0:
        said = '; '.join(line.strip() for line in (proc.stderr.strip() or proc.stdout.strip())
                         .splitlines() if line.strip())
        hint = ''
        if cmd[:1] == ['tc'] and 'qdisc kind is unknown' in said:
            hint = ' (this kernel lacks sch_tbf or sch_htb: modprobe sch_tbf sch_htb)'
        raise NetnsError(f'{" ".join(cmd)} failed: {said}{hint}')
    return proc.stdout


def tbf_burst_bytes(rate_mbps: float, mtu: int = DEFAULT_MTU) -> int:
    """
    Return the htb bucket for ``rate_mbps`` on a veth of ``mtu``: 4 ms of traffic, >= 2 frames.

    What a link idle long enough may send at once (a change keeps the tokens): two frames
    absorb a late timer without losing rate.
    """
    return int(max(2 * (mtu + ETH_HEADER), rate_mbps * 125_000 * 0.004))


def outage_rate_bits(mtu: int = DEFAULT_MTU) -> int:
    """
    Return the closed gate's tbf rate (bit/s) on a veth of ``mtu``: one frame in 200 s.

    tbf takes no zero rate; the closed gate's bucket (:data:`GATE_CLOSED_BURST`) holds no frame
    whatever the rate, and a rate this low keeps its watchdog off (the next change kicks it).
    """
    return int(-(-(mtu + ETH_HEADER) * 8 // MAX_BUCKET_S))


def configured_mbps(mbps: float) -> float:
    """Return the rate :meth:`NetnsFleet.set_rate` records for ``mbps``: kbit/s, 0 outage."""
    return max(0, int(round(mbps * 1000))) / 1000.0


def queue_limit(mbps: float, mtu: int = DEFAULT_MTU) -> int:
    """Return the queue (bytes) of a link at ``mbps``: 200 ms of traffic, >= 4 buckets."""
    return max(4 * tbf_burst_bytes(mbps, mtu), int(mbps * 125_000 * 0.2))


def frame_seconds(mbps: float, mtu: int = DEFAULT_MTU) -> float:
    """Return the time (s) one frame of ``mtu`` takes at ``mbps`` (> 0), htb's cap at most."""
    return min(HTB_MAX_DEBT_S, (mtu + ETH_HEADER) * 8 / (mbps * 1e6))


def gate_args(open_: bool, mtu: int = DEFAULT_MTU) -> list:
    """
    Return the ``tbf`` arguments of an end's gate: open (:data:`GATE_OPEN_RATE`) or closed.

    Closed, its bucket is :data:`GATE_CLOSED_BURST` bytes: no frame fits, so none leaves
    (the htb below keeps what it holds) and any sent meanwhile is dropped.
    """
    frame = mtu + ETH_HEADER
    if open_:
        return ['rate', GATE_OPEN_RATE, 'burst', str(max(4 * frame, 65536)),
                'limit', str(4 * frame)]
    return ['rate', f'{outage_rate_bits(mtu)}bit', 'burst', str(GATE_CLOSED_BURST),
            'limit', str(4 * frame)]


def class_args(mbps: float, mtu: int = DEFAULT_MTU) -> list:
    """Return the ``htb`` class arguments of a link at ``mbps`` (> 0) on ``mtu``."""
    burst = str(tbf_burst_bytes(mbps, mtu))
    return ['rate', f'{int(round(mbps * 1000))}kbit', 'burst', burst, 'cburst', burst,
            'quantum', str(mtu + ETH_HEADER)]


def shaping_lines(dev: str, mbps: float, mtu: int = DEFAULT_MTU, state=None) -> list:
    """
    Return the ``tc -batch`` lines that set end ``dev`` to ``mbps`` (0: an outage).

    ``state`` is what the end had: ``None`` (nothing: the gate, class and queue are made),
    else a tuple ``(gate_open, queue_limit)`` or ``(gate_open, queue_limit, class_mbps,
    owed_s)``: the class's rate and the longest it may still wait at that rate (its last
    frame's time, less any outage since). A rate changes the class (and the queue when it is
    off by over 2x), opening the gate after it; a rate above ``class_mbps`` with ``owed_s``
    over :data:`CLASS_RESET_LAG_S` makes the class and its queue again (see the module's
    "Shaping"); an outage closes the gate only.
    """
    kbit = int(round(mbps * 1000))
    limit = queue_limit(mbps, mtu) if kbit > 0 else None
    lines = []
    if state is None:
        first = max(kbit, 1) / 1000.0       # an outage first: any rate, the gate is shut
        lines += [['qdisc', 'replace', 'dev', dev, 'root', 'handle', '1:', 'tbf']
                  + gate_args(True, mtu),
                  ['qdisc', 'replace', 'dev', dev, 'parent', '1:1', 'handle', '2:', 'htb',
                   'default', '1', 'direct_qlen', '0'],    # (no class: dropped, not sent)
                  ['class', 'replace', 'dev', dev, 'parent', '2:', 'classid', '2:1', 'htb']
                  + class_args(first, mtu),
                  ['qdisc', 'replace', 'dev', dev, 'parent', '2:1', 'handle', '3:', 'bfifo',
                   'limit', str(limit or queue_limit(first, mtu))]]
        state = (True, limit)
        if kbit > 0:
            return lines
    gate_open, set_limit = state[:2]
    class_mbps, owed_s = tuple(state[2:4]) or (None, 0.0)
    if kbit <= 0:
        if gate_open:
            lines.append(['qdisc', 'change', 'dev', dev, 'root', 'handle', '1:', 'tbf']
                         + gate_args(False, mtu))
        return lines
    if class_mbps is not None and mbps > class_mbps and owed_s > CLASS_RESET_LAG_S:
        lines += [['class', 'del', 'dev', dev, 'classid', '2:1'],
                  ['class', 'add', 'dev', dev, 'parent', '2:', 'classid', '2:1', 'htb']
                  + class_args(mbps, mtu),
                  ['qdisc', 'add', 'dev', dev, 'parent', '2:1', 'handle', '3:', 'bfifo',
                   'limit', str(limit)]]
        set_limit = limit
    else:
        lines.append(['class', 'change', 'dev', dev, 'parent', '2:', 'classid', '2:1', 'htb']
                     + class_args(mbps, mtu))
    if not set_limit or not set_limit / 2 <= limit <= 2 * set_limit:
        lines.append(['qdisc', 'change', 'dev', dev, 'parent', '2:1', 'handle', '3:', 'bfifo',
                      'limit', str(limit)])
    if not gate_open:
        lines.append(['qdisc', 'change', 'dev', dev, 'root', 'handle', '1:', 'tbf']
                     + gate_args(True, mtu))
    return lines


def rebuild_lines(dev: str, mbps: float, mtu: int = DEFAULT_MTU) -> list:
    """
    Return the ``tc -batch`` lines that make end ``dev``'s shaping again at ``mbps``.

    For an end whose last batch failed part-way (what the kernel holds is not known): a
    closed gate under a handle of its own (:data:`REBUILD_HANDLE`) replaces the root, which
    deletes whatever tree was there (or makes one where there was none), then the gate, htb
    class and queue are made as for a new end (:func:`shaping_lines`), which replaces it.
    Every line succeeds whatever the end held (htb cannot be changed in place, so the new
    tree's handles must be free). Frames the old tree held are dropped, those sent meanwhile
    too (the closed gate; the htb's ``direct_qlen 0``): none leaves unshaped.
    """
    return ([['qdisc', 'replace', 'dev', dev, 'root', 'handle', REBUILD_HANDLE, 'tbf']
             + gate_args(False, mtu)] + shaping_lines(dev, mbps, mtu))


def shaping_unavailable_reason(lines=None) -> str | None:
    """
    Return why this kernel cannot shape a link (no ``sch_tbf`` or ``sch_htb``), else None.

    Tries ``lines`` (``tc -batch`` lines for device ``lo``; default: the fleet's, see
    :func:`shaping_lines`) in a namespace of its own, deleted after. Raises
    :class:`NetnsError` for any other failure (no root, no ``ip``, a bad line): those are not
    a kernel without the qdiscs.
    """
    check_available()
    if lines is None:       # (lo's MTU: a gate's burst below it is a kernel warning per try)
        lines = shaping_lines('lo', 1.0, PROBE_MTU)
    ns = 'rgprobe' + secrets.token_hex(3)
    _run(['ip', 'netns', 'add', ns])
    try:
        try:
            _run(['tc', '-n', ns, '-batch', '-'], ''.join(' '.join(x) + '\n' for x in lines))
        except NetnsError as exc:
            if 'unknown' in str(exc).lower() and 'qdisc' in str(exc).lower():
                return (f'this kernel lacks a qdisc it needs (sch_tbf, sch_htb: modprobe them '
                        f'or use a kernel that has them): {exc}')
            raise
        return None
    finally:
        subprocess.run(['ip', 'netns', 'del', ns], capture_output=True, check=False,
                       timeout=30)


def _socket_in(ns: str) -> socket.socket:
    """Open a UDP socket in network namespace ``ns`` (root), from a thread that enters it."""
    libc = ctypes.CDLL(None, use_errno=True)
    box = {}

    def enter():
        try:
            fd = os.open(f'/var/run/netns/{ns}', os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f'setns into {ns}')
                box['sock'] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            finally:
                os.close(fd)
        except OSError as exc:          # the thread ends in the namespace: nothing else runs there
            box['error'] = exc
    thread = threading.Thread(target=enter, name=f'netns-{ns}', daemon=True)
    thread.start()
    thread.join()
    if 'error' in box:
        raise NetnsError(f'cannot open a socket in {ns}: {box["error"]}')
    sock = box['sock']
    try:    # (ports 32768-60999, DDS's 7400 + 250 * domain + ... for ROS_DOMAIN_ID 102-232)
        sock.bind(('0.0.0.0', KICK_PORT))
    except OSError as exc:
        sock.close()
        raise NetnsError(f'cannot bind port {KICK_PORT} in {ns}: {exc}') from exc
    sock.setblocking(False)
    return sock


@dataclass(frozen=True)
class VethLink:
    """One worker's link: a veth pair between its namespace and the server's."""

    rank: int
    server_ns: str
    worker_ns: str
    server_if: str           # the server's end (its egress = downlink to the worker)
    worker_if: str           # the worker's end (its egress = uplink to the server)
    server_ip: str
    worker_ip: str


class NetnsFleet:
    """
    Namespaces and veth pairs for one server and ``n_workers`` workers.

    Parameters
    ----------
    n_workers : int
        Number of worker namespaces (at most 250).
    prefix : str, optional
        Unique name prefix (default: ``'rg'`` + 6 random hex digits).
    mtu : int, default 9000
        veth MTU. Traces are goodput (iperf) rates, while tbf meters every byte on the wire;
        with 1500-byte frames DDS's per-datagram headers (Ethernet, IP, UDP, RTPS: ~140 B per
        ~1230 B fragment) take 10% of the rate, with 9000-byte frames under 2%, so the
        application sees the trace's rate. Use 1500 to study fragmentation on a Wi-Fi MTU.
    multicast : bool, default False
        Also turn multicast on at both ends of every pair, for a Cyclone configuration that
        discovers by multicast (the shipped ``wifi``) rather than :func:`cyclone_xml`'s peers.
    say : callable, optional
        Where the one line about the first kick that could not be sent while the fleet was
        live goes (:meth:`kick`); default: a warning on the ``rog_ros.netns`` logger.

    """

    def __init__(self, n_workers: int, prefix: str | None = None, mtu: int = DEFAULT_MTU,
                 multicast: bool = False, say=None):
        if not 1280 <= mtu <= 65535:
            raise ValueError(f'mtu must be in 1280..65535, got {mtu}')
        self.mtu = int(mtu)
        self.multicast = bool(multicast)
        if not 1 <= n_workers <= 250:
            raise ValueError(f'n_workers must be in 1..250, got {n_workers}')
        self.prefix = prefix or 'rg' + secrets.token_hex(3)
        if len(self.prefix) > 9 or not self.prefix.isalnum():
            raise ValueError('prefix must be alphanumeric and at most 9 characters')
        self.server_ns = f'{self.prefix}s'
        self.links = [VethLink(r, self.server_ns, f'{self.prefix}w{r}', f'{self.prefix}d{r}',
                               f'{self.prefix}u{r}', f'{SUBNET}.{r}.1', f'{SUBNET}.{r}.2')
                      for r in range(n_workers)]
        self.created = []        # namespaces we created (deleted by delete())
        self.rates = {}          # (rank, 'up'|'down') -> configured Mbit/s (0: an outage)
        self.limits = {}         # (rank, 'up'|'down') -> its queue's limit (bytes)
        self._closed = set()     # (rank, 'up'|'down') whose gate is closed (an outage)
        self._class = {}         # (rank, 'up'|'down') -> (htb class Mbit/s, outage began or None)
        self.kick_errors = 0     # kicks that could not be sent (live or not: see kick())
        self.live_kick_errors = 0   # of those, while the fleet was live (not going away)
        self.kick_error = None   # the first live one's cause (a line), said once via ``say``
        self.say = say if say is not None else LOG.warning
        self.rebuilds = []       # ((rank, 'up'|'down'), error): ends made again after a failed tc
        self._kickers = {}       # namespace -> UDP socket inside it (NetnsFleet.kick)
        self._kick_lock = threading.Lock()   # the follower kicks while delete() may close
        self._kicking = False    # True from create() to delete(): no socket opened after

    # ------------------------------------------------------------------ set-up / tear-down
    def create(self) -> 'NetnsFleet':
        """Create namespaces, veth pairs and addresses; on failure delete what was made."""
        check_available()
        try:
            for ns in [self.server_ns] + [link.worker_ns for link in self.links]:
                _run(['ip', 'netns', 'add', ns])
                self.created.append(ns)
                _run(['ip', '-n', ns, 'link', 'set', 'lo', 'up'])
            for link in self.links:
                _run(['ip', '-n', link.server_ns, 'link', 'add', link.server_if, 'type', 'veth',
                      'peer', 'name', link.worker_if, 'netns', link.worker_ns])
                _run(['ip', '-n', link.server_ns, 'addr', 'add', f'{link.server_ip}/24', 'dev',
                      link.server_if])
                _run(['ip', '-n', link.worker_ns, 'addr', 'add', f'{link.worker_ip}/24', 'dev',
                      link.worker_if])
                mcast = ['multicast', 'on'] if self.multicast else []
                _run(['ip', '-n', link.server_ns, 'link', 'set', link.server_if, 'mtu',
                      str(self.mtu)] + mcast + ['up'])
                _run(['ip', '-n', link.worker_ns, 'link', 'set', link.worker_if, 'mtu',
                      str(self.mtu)] + mcast + ['up'])
        except BaseException:
            self.delete()
            raise
        with self._kick_lock:
            self._kicking = True
        return self

    def delete(self) -> None:
        """Delete every namespace we created (their veth ends go with them). Idempotent."""
        with self._kick_lock:     # a kick racing this (a follower not yet stopped) opens none
            self._kicking = False
            kickers, self._kickers = self._kickers, {}
        for sock in kickers.values():
            sock.close()          # (a socket inside a namespace would keep it, and its veths)
        for ns in reversed(self.created):
            subprocess.run(['ip', 'netns', 'del', ns], capture_output=True, check=False,
                           timeout=30)
        self.created = []

    def __enter__(self) -> 'NetnsFleet':
        return self.create()

    def __exit__(self, *exc) -> bool:
        self.delete()
        return False

    # ------------------------------------------------------------------ shaping
    def set_rate(self, rank: int, mbps: float, direction: str = 'both') -> None:
        """Set worker ``rank``'s uplink, downlink or both to ``mbps`` (0: an outage)."""
        link = self.links[rank]
        ends = {'up': [(link.worker_ns, link.worker_if)],
                'down': [(link.server_ns, link.server_if)]}
        ends['both'] = ends['up'] + ends['down']
        if direction not in ends:
            raise ValueError(f"direction must be 'up', 'down' or 'both', got {direction!r}")
        peers = {link.worker_ns: link.server_ip, link.server_ns: link.worker_ip}
        for d, (ns, dev) in zip((('up', 'down') if direction == 'both' else (direction,)),
                                ends[direction]):
            key = (rank, d)
            now = time.monotonic()
            state = None
            if key in self.limits:
                class_mbps, out_since = self._class.get(key, (None, None))
                owed = 0.0 if class_mbps is None else frame_seconds(class_mbps, self.mtu)
                if out_since is not None:         # an outage repays the class's wait
                    owed -= now - out_since
                state = (key not in self._closed, self.limits[key], class_mbps, owed)
            lines = shaping_lines(dev, mbps, self.mtu, state)
            if lines:
                lines = self._apply(key, ns, dev, mbps, lines)
            for line in lines:
                if line[-2:] == ['limit', line[-1]] and 'bfifo' in line:
                    self.limits[key] = int(line[-1])
            if configured_mbps(mbps) > 0:
                self._closed.discard(key)
                self._class[key] = (configured_mbps(mbps), None)
            else:
                self._closed.add(key)
                if key in self._class and self._class[key][1] is None:
                    self._class[key] = (self._class[key][0], now)
            self.rates[key] = configured_mbps(mbps)
            self.kick(ns, peers[ns])

    def _apply(self, key: tuple, ns: str, dev: str, mbps: float, lines: list) -> list:
        """
        Run one end's ``tc -batch`` ``lines``; return the lines that set what it now holds.

        A batch that fails part-way (a class deleted, its add refused) leaves the end out of
        step with what :meth:`set_rate` recorded, and the next change would fail on it: the
        end is made again (:func:`rebuild_lines`), counted in :attr:`rebuilds`. If that fails
        too, its record is dropped (the next change makes it from scratch) and NetnsError
        says which end, and both errors.
        """
        try:
            _run(['tc', '-n', ns, '-batch', '-'], ''.join(' '.join(x) + '\n' for x in lines))
            return lines
        except NetnsError as exc:
            first = exc
        rank, d = key
        rebuilt = rebuild_lines(dev, mbps, self.mtu)
        try:
            _run(['tc', '-n', ns, '-batch', '-'], ''.join(' '.join(x) + '\n' for x in rebuilt))
        except NetnsError as exc:
            for record in (self.limits, self._class, self.rates):
                record.pop(key, None)
            self._closed.discard(key)
            again = ('the same way' if str(exc).split(' failed: ')[-1]
                     == str(first).split(' failed: ')[-1] else f'too: {exc}')
            raise NetnsError(f'worker {rank} {d}link ({dev}): {first}; making it again failed '
                             f'{again}') from exc
        self._class.pop(key, None)          # a new class: it owes nothing
        self.rebuilds.append((key, str(first)))
        return rebuilt

    def kick(self, ns: str, peer: str) -> None:
        """
        Send an empty datagram from namespace ``ns`` to ``peer``: its enqueue runs the qdisc.

        A qdisc does not wake on a change: a gate that last scheduled a frame at an outage's
        rate would hold its queue until the sender queued more (see the module's "Shaping").

        A kick that cannot be sent is counted in :attr:`kick_errors`. One that fails while the
        fleet is live (between :meth:`create` and :meth:`delete`: a full socket buffer, a
        socket that could not be opened or bound), not as it goes away, is counted in
        :attr:`live_kick_errors` too: that change may take effect only when the end next
        sends a frame. The first such is said in one line (``say``) with its cause, kept in
        :attr:`kick_error`; ``rog fleet`` writes the count into summary.json.
        """
        first = None
        with self._kick_lock:
            live = self._kicking
            try:
                if not live:
                    raise NetnsError('the fleet is not created, or deleted')
                if ns not in self._kickers:
                    self._kickers[ns] = _socket_in(ns)
                self._kickers[ns].sendto(b'', (peer, DISCARD_PORT))
            except (OSError, NetnsError) as exc:   # a full socket buffer, a namespace deleted
                self.kick_errors += 1
                if live:
                    self.live_kick_errors += 1
                    if self.kick_error is None:
                        self.kick_error = first = ' '.join(
                            f'from {ns} to {peer}: {type(exc).__name__}: {exc}'.split())
        if first is not None:       # (outside the lock: say may take its time)
            self.say(f'--netns: a kick (the empty datagram that makes a link end apply a rate '
                     f'change at once) could not be sent {first}; that change may take effect '
                     'only when the end next sends a frame (further failures are counted: '
                     'netns_kick_errors in summary.json)')

    def set_link(self, rank: int, up: bool) -> None:
        """
        Set worker ``rank``'s end of its pair up or down: its radio back or out of range.

        Down, nothing crosses either way while both sides run on (a link outage, not a stop).
        """
        link = self.links[rank]
        _run(['ip', '-n', link.worker_ns, 'link', 'set', link.worker_if,
              'up' if up else 'down'])

    def exec_prefix(self, ns: str) -> list:
        """Command prefix that runs a program inside namespace ``ns``."""
        return ['ip', 'netns', 'exec', ns]

    def worker_ns(self, rank: int) -> str:
        """Namespace of worker ``rank``."""
        return self.links[rank].worker_ns

    def server_addresses(self) -> list:
        """Return the server's veth addresses, one per worker."""
        return [link.server_ip for link in self.links]


def cyclone_xml(addresses, peers, mtu: int = DEFAULT_MTU) -> str:
    """
    Return the Cyclone DDS configuration for a node inside a namespace.

    Binds ``addresses`` (its veth ends), unicast only, the peers' addresses for discovery,
    datagrams below the veth ``mtu`` (no IP fragmentation).
    """
    max_msg = mtu - UDP_IP_HEADERS
    frag = max_msg - RTPS_HEADROOM
    ifaces = ''.join(f'<NetworkInterface address="{a}" multicast="false"/>' for a in addresses)
    peer_xml = ''.join(f'<Peer address="{p}"/>' for p in peers)
    return ('<CycloneDDS><Domain Id="any"><General>'
            f'<Interfaces>{ifaces}</Interfaces><AllowMulticast>false</AllowMulticast>'
            f'<MaxMessageSize>{max_msg}B</MaxMessageSize><FragmentSize>{frag}B</FragmentSize>'
            '</General><Internal><SocketReceiveBufferSize min="default" max="8MB"/>'
            '</Internal><Discovery><ParticipantIndex>auto</ParticipantIndex>'
            f'<MaxAutoParticipantIndex>32</MaxAutoParticipantIndex><Peers>{peer_xml}</Peers>'
            '</Discovery></Domain></CycloneDDS>')


class RateFollower:
    """
    A thread that keeps every link's kernel rate equal to its trace (``rate_at(t)``).

    Parameters
    ----------
    fleet : NetnsFleet
    links : dict
        Rank -> object with ``rate_mbps(t_since_epoch)`` (e.g. ``EmulatedLink``).
    epoch : float
        Wall time (``time.time()``) at which the traces start; read once, onto the
        monotonic clock, as the nodes' own links do (a later NTP step moves neither).
    period_s : float, optional
        How often the traces are read, on a fixed schedule (a round's tc calls do not push
        the next one later): a change is applied within ``period_s`` and the time its tc
        calls take (~2-5 ms per end). Default: 20 ms (the presets change every 0.1 s), or
        1.5 ms per link if more (reading a link's trace costs ~30 us: at most 2% of a core).

    """

    def __init__(self, fleet: NetnsFleet, links: dict, epoch: float,
                 period_s: float | None = None):
        if period_s is None:
            period_s = max(0.02, 0.0015 * len(links))
        self.fleet, self.links, self.epoch, self.period_s = fleet, links, epoch, period_s
        self.origin = time.monotonic() - (time.time() - float(epoch))   # trace time 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name='netns-rate', daemon=True)
        self.updates = 0
        self.error = None        # the error that stopped it mid-run (None: it follows)
        self.failed_at = None    # (trace time s, wall time) of the round that failed

    def trace_time(self) -> float:
        """Return the traces' time now: seconds since the epoch, on the monotonic clock."""
        return time.monotonic() - self.origin

    def start(self) -> 'RateFollower':
        self.apply(self.trace_time())
        self._thread.start()
        return self

    def apply(self, t: float) -> None:
        """Set every link to its trace rate at ``t`` seconds after the epoch (if it changed)."""
        for rank, link in self.links.items():
            mbps = link.rate_mbps(t)
            if self.fleet.rates.get((rank, 'up')) != configured_mbps(mbps):
                self.fleet.set_rate(rank, mbps)
                self.updates += 1

    def _run(self) -> None:
        due = time.monotonic()
        while True:
            due += self.period_s
            now = time.monotonic()
            if due < now:               # a round ran long: the next one now, then on schedule
                due = now
            if self._stop.wait(due - now):
                return
            t, wall = self.trace_time(), time.time()
            try:
                self.apply(t)
            except Exception as exc:  # noqa: B902 - a tc, or anything: the links stay at
                # their last rates, and failure() says so (a thread that died of an unexpected
                # error said nothing: the links froze silently, as a failed tc did before).
                # From the round's start, not from when its tc calls (a rebuild) returned:
                # the links stopped following at t (rog fleet compares this wall time with
                # when the run's results were complete)
                if not self._stop.is_set():     # (not the namespaces deleted as the run ends)
                    self.failed_at = (t, wall)
                    self.error = exc
                return

    def failure(self) -> str | None:
        """
        Return one line on why the links stopped following their traces mid-run, else None.

        From when (trace time and UTC), and the error, which names the link (worker and
        direction, :meth:`NetnsFleet.set_rate`) and what tc said: from then on every link kept
        its last rate, so what the run measured no longer follows its trace.
        """
        if self.error is None:
            return None
        t, wall = self.failed_at
        when = time.strftime('%H:%M:%S', time.gmtime(wall))
        said = (str(self.error) if isinstance(self.error, NetnsError)
                else f'{type(self.error).__name__}: {self.error}')
        return (f'--netns: the links stopped following their traces {t:.1f} s into the trace '
                f'({when} UTC): {" ".join(said.split())}; every link kept its last rate from '
                'then on')

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
