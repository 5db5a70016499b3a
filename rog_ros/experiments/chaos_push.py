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
``rog chaos`` for the push systems: a wire watcher instead of the ledger, and their verdict.

The push systems (adacomp, asgd, comp-asgd, gsp) are exactly-once across a server restart
when their server keeps its state: a checkpoint every K pushes answered and a write-ahead
journal of every push between (server-restart runs them with K =
``chaos_scenarios.PUSH_CHECKPOINT_EVERY``, the fleet default; before the journal only K = 1
was), and their robots keep no state (a robot started again is a new run: its
first push is dropped and answered with the current model, ``worker_restart``). Their
engines hold no residual, so the independent ledger of :mod:`rog_ros.nodes.chaos_ledger`
cannot account their gradient mass either. What a scenario checks instead is what "exactly
once" means for them:

* each engine push is applied at most once. A push is named on the wire by
  ``(rank, run, clock)`` (its chunks carry the sender's run and the timestamp it computed
  at; a push sent again after a lost END is the same push under another transfer id), and
  the server's engine applies a run's push only at the timestamp that robot holds, which
  moves on once applied. ``PushWatch`` joins the fleet's DDS domain as one more reader and
  records every push it sees that the server acknowledged a chunk of (a flood's forged
  pushes are never acknowledged); the server's summary says how many it applied
  (``pushes_applied``) and dropped as a restarted run's (``worker_restarts``), and how
  many its engine was handed (``pushes_received``) and refused (``pushes_refused``). What
  the engine took (handed less refused: applied, dropped, or answered with a stop order
  after training ended; never less than applied plus dropped) beyond the distinct pushes
  seen is ``duplicated`` (in pushes). The server stops at its budget, so a push applied
  twice leaves ``pushes_applied`` at the budget and shows only as one taken more than sent;
* a push in flight when its robot was killed is lost, not applied twice: ``lost`` counts
  the pushes seen that the engine never took, and may not exceed the kills;
* the run finishes: every robot was told to stop (the watcher saw a stop order for each
  rank), every process exited 0, and the server applied its whole budget and no more
  (``pushes_applied`` equals ``--iterations`` times the robots).

A push system's robot stops with the model of its last pull: the server sends no final
model (the reference algorithms end with a stop order), so there is none to check.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import re
import threading
import time

from rog_ros.experiments.chaos_ledger_folder import read_json
from rog_ros.protocol.messages import (KIND_GRAD, KIND_UPDATE, RowChunk, Schedule, SERVER,
                                       TransferAck)
from rog_ros.transport.topics import DEFAULT_TOPIC

PUSH_PACE = 0.7
"""Pushes a second of one push system's robot at most in ``rog chaos`` (adacomp: 0.62 while
another robot was frozen; asgd, dense both ways at the shaped 0.1 Mbit/s: about 0.4): what the
freeze and link-outage budgets plan the others' pushes with."""
WORKER_DROPS = re.compile(r'dropped messages (\{[^}]*\})')
"""A worker's last log line of what it dropped, by reason (a dict, as Python prints it)."""


class PushWatch:
    """
    Watch a fleet's pushes and stop orders on its DDS domain, from a thread of its own.

    Start it before the fleet, so that its readers match the nodes' writers before the
    first push (reliable topics deliver to matched readers only); ``close`` when it ended.
    """

    def __init__(self, domain: int, namespace: str, workers: int,
                 node_name: str = 'rog_chaos_push_watch'):
        """Join ``domain`` and subscribe; ``node_name``: its ROS 2 name (one per watch)."""
        from rog_ros.transport.cyclone_config import config_path, file_uri
        from rog_ros.transport.dds_bus import DdsBus
        self.workers = int(workers)
        self.bus = DdsBus(namespace=namespace, domain_id=domain,
                          config=file_uri(config_path('loopback')),
                          node_name=node_name)
        self.bus.subscribe(f'up/{DEFAULT_TOPIC["RowChunk"]}')
        self.bus.subscribe(f'up/{DEFAULT_TOPIC["TransferAck"]}')
        for r in range(self.workers):
            self.bus.subscribe(f'w{r}/{DEFAULT_TOPIC["Schedule"]}')
            self.bus.subscribe(f'w{r}/{DEFAULT_TOPIC["RowChunk"]}')
            self.bus.subscribe(f'w{r}/{DEFAULT_TOPIC["TransferAck"]}')
        self._lock = threading.Lock()
        self.pushes = {}        # (rank, run, clock) -> monotonic time its first chunk was seen
        self.transfers = {}     # (rank, run, transfer id) of a push -> its clock
        self.acked = set()      # (rank, run, transfer id) the server acknowledged a chunk of
        self.stops = set()      # ranks told to stop
        self.pulls = {}         # (rank, run it answers, transfer id) -> first chunk seen
        self.pulled = set()     # (rank, transfer id) of the final acks robots sent the server
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name='push-watch', daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """Take what the readers hold until closed (a failing take ends the watch)."""
        while not self._stop.is_set():
            try:
                got = self.bus.poll(0.05)
            except Exception:  # noqa: B902 - the bus closed under us: the watch is over
                return
            now = time.monotonic()
            with self._lock:
                for _, msg in got:
                    self._note(msg, now)

    def _note(self, msg, now: float) -> None:
        """Record one message: a push chunk's push, a model chunk, a robot's final ack, a stop."""
        if isinstance(msg, RowChunk) and msg.kind == KIND_GRAD and msg.receiver == SERVER:
            if 0 <= msg.sender < self.workers and msg.incarnation:   # (0: no run, forged)
                self.pushes.setdefault((int(msg.sender), int(msg.incarnation),
                                        int(msg.clock)), now)
                self.transfers.setdefault((int(msg.sender), int(msg.incarnation),
                                           int(msg.transfer_id)), int(msg.clock))
        elif isinstance(msg, RowChunk) and msg.kind == KIND_UPDATE and msg.sender == SERVER:
            self.pulls.setdefault((int(msg.receiver), int(msg.target_incarnation),
                                   int(msg.transfer_id)), now)
        elif isinstance(msg, TransferAck) and msg.final and msg.receiver == SERVER:
            self.pulled.add((int(msg.sender), int(msg.transfer_id)))
        elif isinstance(msg, TransferAck) and msg.sender == SERVER and msg.target_incarnation:
            self.acked.add((int(msg.receiver), int(msg.target_incarnation),
                            int(msg.transfer_id)))
        elif isinstance(msg, Schedule) and msg.stop and 0 <= msg.worker < self.workers:
            self.stops.add(int(msg.worker))

    def confirmed(self) -> set:
        """
        Return the pushes ``(rank, run, clock)`` the server acknowledged a chunk of.

        What the verdict counts: a chunk on the uplink may be a forgery (the flood sends
        plausible pushes of real robots, which the server drops before its transfers and
        never acknowledges, and a node stamps its run on every chunk and ack, never 0, which
        an unauthenticated forgery leaves unset); a push killed mid-way counts once the
        server acked any chunk.
        """
        with self._lock:
            return {(r, run, clock) for (r, run, tid), clock in self.transfers.items()
                    if (r, run, tid) in self.acked}

    def count(self, rank: int) -> int:
        """Return the distinct pushes of ``rank`` seen (what the scenarios wait on)."""
        with self._lock:
            return sum(1 for (r, _, _) in self.pushes if r == rank)

    def runs(self, rank: int) -> list:
        """Return the runs of ``rank`` seen pushing, in the order first seen."""
        with self._lock:
            seen = sorted((t, run) for (r, run, _), t in self.pushes.items() if r == rank)
        out = []
        for _, run in seen:
            if run not in out:
                out.append(run)
        return out

    def first_times(self, rank: int) -> list:
        """Return the times the pushes of ``rank`` were first seen, in order."""
        with self._lock:
            return sorted(t for (r, _, _), t in self.pushes.items() if r == rank)

    def answered(self, rank: int, since: float) -> bool:
        """Tell whether a model sent to ``rank`` after ``since`` arrived (its final ack seen)."""
        with self._lock:
            return any(r == rank and t >= since and (r, tid) in self.pulled
                       for (r, _, tid), t in self.pulls.items())

    def close(self) -> None:
        """Stop the thread and leave the domain."""
        self._stop.set()
        self._thread.join(timeout=5.0)
        self.bus.close()


class WatchUnion:
    """
    Several ``PushWatch`` of one fleet read as one: what any of them saw.

    A DDS participant stopped (SIGSTOP) past its lease (Cyclone's default 10 s) is dropped by
    its peers, the watch's among them, and each pair finds it again only at the next
    discovery announcement of either (up to Cyclone's SPDP interval): in a freeze of an
    adacomp robot the server heard it 5 pushes before the one watch did, and the verdict,
    missing those, took them for pushes applied twice. A new watch, started at the thaw,
    announces itself to every participant at once and is matched within a second.
    """

    def __init__(self, watches):
        """Keep the watches (the first: the one matched before the fleet started)."""
        self.watches = list(watches)
        self.workers = self.watches[0].workers

    @property
    def stops(self) -> set:
        """Return the ranks any watch saw told to stop."""
        return set().union(*(w.stops for w in self.watches))

    def _pushes(self) -> dict:
        """Return every push seen, at the first time any watch saw it."""
        out = {}
        for w in self.watches:
            with w._lock:
                for key, t in w.pushes.items():
                    out[key] = min(t, out.get(key, t))
        return out

    def confirmed(self) -> set:
        """Return the pushes whose chunk one watch saw and whose ack one (maybe another) did."""
        transfers, acked = {}, set()
        for w in self.watches:
            with w._lock:
                transfers.update(w.transfers)
                acked |= w.acked
        return {(r, run, clock) for (r, run, tid), clock in transfers.items()
                if (r, run, tid) in acked}

    def count(self, rank: int) -> int:
        """Return the distinct pushes of ``rank`` any watch saw."""
        return sum(1 for (r, _, _) in self._pushes() if r == rank)

    def first_times(self, rank: int) -> list:
        """Return the times the pushes of ``rank`` were first seen, in order."""
        return sorted(t for (r, _, _), t in self._pushes().items() if r == rank)

    def runs(self, rank: int) -> list:
        """Return the runs of ``rank`` seen pushing, in the order first seen."""
        out = []
        for _, run in sorted((t, run) for (r, run, _), t in self._pushes().items()
                             if r == rank):
            if run not in out:
                out.append(run)
        return out

    def answered(self, rank: int, since: float) -> bool:
        """Tell whether any watch saw a model sent to ``rank`` after ``since`` arrive."""
        pulls, pulled = {}, set()
        for w in self.watches:
            with w._lock:
                pulls.update(w.pulls)
                pulled |= w.pulled
        return any(r == rank and t >= since and (r, tid) in pulled
                   for (r, _, tid), t in pulls.items())

    def close(self) -> None:
        """Close every watch."""
        for w in self.watches:
            w.close()


def push_verdict(res: dict, watch: PushWatch, run_dir: str, workers: int, iterations: int,
                 kills: int = 0) -> list:
    """
    Put the push accounting into ``res``; return what it found wrong (``kills``: robots killed).

    ``res`` gets ``lost`` and ``duplicated`` (in pushes, the unit of a push system: each
    push is one whole gradient) and ``pushes`` (``seen``, ``received``, ``refused``,
    ``applied``, ``dropped``, ``budget``, ``stopped``, ``kills``: the numbers they come
    from).
    """
    try:
        with open(os.path.join(run_dir, 'summary.json'), encoding='utf-8') as fh:
            summary = json.load(fh)
    except (OSError, ValueError) as err:
        return [f'no summary.json from the server ({err})']
    extra = summary.get('extra', summary)
    applied = int(extra.get('pushes_applied', -1))
    dropped = int(extra.get('worker_restarts', 0))
    received = int(extra.get('pushes_received', -1))
    refused = int(extra.get('pushes_refused', -1))
    # pushes sent again to a restored server that had answered them before its checkpoint
    # (the answer lost with the crash): taken by both server runs, applied by one
    resent = int(extra.get('pushes_resent', 0))
    seen = len(watch.confirmed())
    budget = int(iterations) * int(workers)
    # what the engine took: applied, dropped, or answered with a stop order unapplied (each
    # robot's push after training ended); the server stops at its budget, so a push applied
    # twice leaves ``applied`` at the budget and shows only here, as one more than was sent
    took = max(received - max(refused, 0) - resent, applied + dropped)
    duplicated = max(0, took - seen)
    lost = max(0, seen - took)
    res.update(lost=lost, duplicated=duplicated,
               pushes={'seen': seen, 'received': received, 'refused': refused,
                       'applied': applied, 'dropped': dropped, 'resent': resent,
                       'budget': budget, 'stopped': sorted(watch.stops), 'kills': kills})
    problems = []
    if min(applied, received, refused) < 0:
        problems.append('summary.json does not say how many pushes the server received, '
                        'refused and applied (pushes_received, pushes_refused, pushes_applied)')
    if duplicated:
        problems.append(f'the server took {took} pushes ({received} received, {refused} '
                        f'refused; {applied} applied, {dropped} dropped), but only {seen} '
                        'distinct pushes were sent: a push was applied twice')
    if lost > kills:
        problems.append(f'{lost} pushes sent were neither applied nor dropped nor answered '
                        f'by the server ({kills} robots killed: at most one in flight each)')
    if applied != budget:
        problems.append(f'the server applied {applied} pushes, its budget is {budget}')
    missing = sorted(set(range(int(workers))) - watch.stops)
    if missing:
        problems.append(f'no stop order seen for robots {missing}')
    return problems


def push_rejects(run_dir: str) -> dict:
    """
    Return the messages the nodes dropped, ``{reason: count}`` summed over the nodes.

    Without the ledger, whose final reports carry every node's counts, a push system's fleet
    leaves them in the server's ``summary.json`` (``rejects_by_reason``) and in each worker's
    last ``dropped messages {...}`` log line (it says it at exit; a killed run says nothing,
    its restarted one its own).
    """
    out = {}
    summary = read_json(os.path.join(run_dir, 'summary.json')) or {}
    counts = [summary.get('rejects_by_reason') or {}]
    for path in sorted(glob.glob(os.path.join(run_dir, 'logs', 'rog_worker_*.log'))):
        with open(path, encoding='utf-8', errors='replace') as fh:
            said = WORKER_DROPS.findall(fh.read())
        if said:
            try:
                counts.append(ast.literal_eval(said[-1]))
            except (ValueError, SyntaxError):
                continue
    for by_reason in counts:
        for reason, n in by_reason.items():
            if isinstance(n, int) and n:
                out[str(reason)] = out.get(str(reason), 0) + n
    return out
