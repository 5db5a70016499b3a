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
WorkerNode: one robot's training process (WorkerEngine + workload + bus + wall clock).

Holds no protocol logic: the engine decides what to send and when to compute; this class
runs the real forward/backward pass when asked, shapes its uplink with the emulated link,
publishes TrainStatus and follows the lifecycle (``inactive`` = paused: the protocol keeps
running, no new computation starts).
"""

from __future__ import annotations

import logging
import os
import time

from rog_ros.nodes import lifecycle as lc, push_systems
from rog_ros.nodes.assembly import build_training, epoch_to_monotonic, link_for, shaper_for
from rog_ros.nodes.chaos_hooks import maybe_faulty, WorkerHooks
from rog_ros.nodes.compute_device import DeviceGradients, resolve_device
from rog_ros.nodes.connect import (fleet_key, node_reject_counts, open_bus, PeerTimeout,
                                   transfer_limits, wait_matched)
from rog_ros.nodes.diagnostics import DiagnosticsPublisher, worker_statuses
from rog_ros.nodes.driver import EngineDriver, EngineFailure
from rog_ros.nodes.durable import let_go_in_turn, StateHold
from rog_ros.nodes.model_file import model_out_file, save_state_dict
from rog_ros.nodes.outbox import Outbox
from rog_ros.nodes.reject_notes import RejectNotes
from rog_ros.nodes.respawn import INCOMPATIBLE_FLEET
from rog_ros.nodes.routing import train_status, worker_inbox, worker_name, worker_outbox
from rog_ros.nodes.signals import SignalRequests
from rog_ros.nodes.state_dir import train_again, worker_state_file
from rog_ros.protocol.events import say as say_event
from rog_ros.protocol.messages import new_incarnation, SERVER, TrainStatus, TransferAck
from rog_ros.protocol.ps_membership import INCOMPATIBLE_LEASES, IncompatibleWatch
from rog_ros.protocol.worker import WorkerEngine
from rog_ros.transport.auth_bus import signer_of
from rog_ros.transport.field_plans import full_name, TYPE_HASHES
from rog_ros.transport.topics import topic_type
import torch

STATUS_PERIOD_S = 0.5
DOWNLINK_GRACE_S = 10.0
"""Seconds a worker waits for the server's writers on its topics once the server's readers
are matched: both are created in one step and discovered together, so far longer than a
discovery round (``WorkerNode._wait_for_downlink``)."""
INCOMPATIBLE_SCALE = 1.0   # the bound before a server of another build is given up, scaled
INCOMPATIBLE_LOOK_S = 0.5  # how often the bus is asked about the server's build
OTHER_SERVER_SAY_S = 60.0  # how often a robot served by another build only says so again


class FleetMismatch(ValueError):
    """This worker and the server were started for fleets of different sizes (exit 2)."""


class ServerIncompatible(PeerTimeout):
    """The server runs an incompatible rog_ros, another message build (exit status 4)."""

    exit_status = INCOMPATIBLE_FLEET


def _dropped_said(counts: dict) -> str:
    """Say the received messages a robot dropped, by reason (``counts``: the non-zero ones)."""
    if not counts:
        return ''
    said = ', '.join(f'{reason} {n}' for reason, n in sorted(counts.items()))
    # only a failed tag points at the keys; messages the engine refused (invalid) do not
    cause = (" (a fleet key, or robot_keys, other than the server's?)"
             if counts.get('bad_tag') else '')
    return (f'; yet it dropped {sum(counts.values())} received messages ({said}): see the '
            f'warnings above{cause}')


class WorkerNode:
    """
    A worker: ``configure()``, ``activate()``, ``spin()``, ``shutdown()``.

    Parameters
    ----------
    args : argparse.Namespace
        Fleet, link and worker options (see ``rog_ros.nodes.rog_worker``).
    requests : SignalRequests, optional
        Where lifecycle requests come from (signals, tests).

    """

    def __init__(self, args, requests=None):
        self.args = args
        self.rank = args.rank
        self.requests = requests or SignalRequests()
        self.life = lc.Lifecycle(on_change=lambda old, new, tr: self._publish_status())
        self.bus = None
        self.state_hold = StateHold()  # the state file's: from configure to cleanup/shutdown
        self.ros_node = None         # set by rog_ros.nodes.ros_node under ROS 2
        self.ros_executor = None     # and the executor of that node, which the bus spins
        self.reject_notes = RejectNotes(sender='the server')   # why a message was dropped
        self._misconfigured = 0       # the server's fleet size, where it differs from ours
        self._key_said = False        # the fleet key's warning was given (fleet_key)
        self.log = logging.getLogger(getattr(args, 'node_name', f'rog_worker_{args.rank}'))
        self.engine = None
        self.server_watch = None     # a server of another build (configure makes it)
        self._beside_own = {}        # another build's server: (first, last) heard beside ours
        self.compute_s = 0.0
        self.compute_before_s = 0.0   # compute time of the run before a restore (its state)
        self._computing_since = None  # start of the computation under way (compute thread)
        self._comm_s = 0.0            # the comm_s last published: it only grows
        # this process's id on its statuses where the engine has none (the push systems')
        self.run_id = new_incarnation()
        self.loss = float('nan')
        self.started_at = None
        self._status_due = 0.0      # next periodic status (a stored deadline)
        self._progress_at = 0.0

    def reject_counts(self) -> dict:
        """Return ``{reason: count}`` of every message this node dropped (see connect)."""
        return node_reject_counts(self)

    # ------------------------------------------------------------------ lifecycle
    def configure(self) -> None:
        """Build model, engine, bus and emulated link; create every endpoint."""
        # (a failure lets go of what it took, the state file last: StateHold.configuring;
        # the hooks of a cleaned-up run are not its own: their ledger reports at shutdown)
        kept = getattr(self, 'hooks', None)
        self.state_hold.configuring(
            self._configure, lambda: self.life.state == lc.UNCONFIGURED,
            undo=lambda: self._let_go(failed=getattr(self, 'hooks', None) is not kept))

    def _configure(self) -> None:
        """Build model, engine, bus and emulated link; create every endpoint."""
        a = self.args
        if getattr(a, 'state_dir', None):   # one node per state file, held before anything
            self.state_hold.take(os.path.join(a.state_dir, worker_state_file(self.rank)),
                                 f'rog_worker {self.rank}')   # (refused: no bus)
        tr = build_training(a)
        durable_run = bool(getattr(a, 'state_dir', None))   # nodes may restart: see durable
        limits = transfer_limits()
        if push_systems.is_push(a.sync):      # AdaComp, GSP: their own engines, same wire
            self.engine = push_systems.worker_engine(a, tr, self.rank, **limits)
        else:
            self.engine = WorkerEngine(self.rank, a.workers, tr.layout, tr.codec, tr.policy,
                                       tr.w0, momentum=tr.workload.momentum,
                                       chunk_bytes=a.chunk_bytes, window=a.window,
                                       save_state_actions=durable_run,
                                       keep_undurable=durable_run, join_on_start=durable_run,
                                       **limits)
        # (the server as one robot is to the server: the watch's rank 0)
        self.server_watch = IncompatibleWatch(
            1, INCOMPATIBLE_LEASES * limits['lease_s'] * INCOMPATIBLE_SCALE)
        self._next_server_look = 0.0
        self._other_said = 0.0       # when a server of another build only was last said
        self._waiting_to_start = False   # activate waits for the server (its patience said)
        self.model, self.layout, self.workload = tr.model, tr.layout, tr.workload
        self.log.info(tr.start_line())
        self.start_fingerprint = tr.fingerprint   # in every status: the server compares it
        self.device = resolve_device(getattr(a, 'device', 'cpu'))
        self.gradients = DeviceGradients(self.model, self.layout, self.engine.w, self.device)
        if self.device.type != 'cpu':
            name = torch.cuda.get_device_name(self.device)
            self.log.info(f'computing gradients on {self.device} ({name})')
        self.batches = self.workload.worker_batches(self.rank, a.workers, a.seed)
        link = link_for(a.trace, self.rank, a.workers, a.seed, a.trace_scale)
        epoch = epoch_to_monotonic(a.epoch)
        self.outbox = Outbox({SERVER: shaper_for(link, epoch, a.burst_bytes)} if link else {})
        # (the warning of a worker robot holding the fleet key: once, not at a configure again)
        keys = fleet_key(a, self.log, self.rank, worker=not self._key_said)
        self._key_said = True
        self.bus = open_bus(a.bus, a.namespace, keys, getattr(a, 'record', None),
                            self.ros_node, self.ros_executor,
                            node_name=getattr(a, 'node_name', None),
                            node_namespace=getattr(a, 'node_namespace', None))
        self.bus = maybe_faulty(self.bus, a, salt=self.rank)   # (kept first: closed if refused)
        replaced = getattr(self, 'hooks', None)       # (a cleaned-up run's: its ledger closed)
        self.hooks = WorkerHooks(self.engine, self.rank, getattr(a, 'state_dir', None),
                                 getattr(a, 'chaos_ledger', None))
        if replaced is not None:
            replaced.close_replaced()
        self.hooks.node_state = self._node_state
        # Versions first: a poll hands topics over in subscription order, and the engine takes
        # a downlink END only once its RowVersions is in (both are sent back to back).
        for topic in sorted(worker_inbox(self.rank), key=lambda t: not t.endswith('versions')):
            self.bus.subscribe(topic)
        self.status_topic = train_status(worker_name(self.rank))
        for topic in worker_outbox() + [self.status_topic]:
            self.bus.advertise(topic)
        self.diagnostics = DiagnosticsPublisher(self.bus, lambda now: worker_statuses(self, now),
                                                getattr(a, 'diagnostics_hz', 1.0))
        # Rog's family computes on a thread of its own, so the loop keeps the link busy
        # meanwhile (late rows); no message changes its model during a computation. Push
        # systems apply what arrives to the model at any time: they compute in the loop.
        threaded = not push_systems.is_push(a.sync)
        self.driver = EngineDriver(self.bus, self.hooks, self.outbox, compute=self._compute,
                                   may_compute=lambda: self.life.training,
                                   compute_thread=threaded,
                                   while_computing=getattr(self.engine,
                                                           'receives_while_computing',
                                                           (TransferAck,)),
                                   on_log=self._on_log, on_stopped=self._on_stopped)
        self.failure = ''
        self._finished_before = False   # a restored robot that the server had told to stop
        self.life.trigger('configure')

    def _on_stopped(self, now: float, stopped) -> None:
        if stopped.failed:
            self.failure = f'worker {self.rank}: {stopped.reason}'
        elif getattr(self.args, 'model_out', None):
            self._save_model(self.args.model_out)

    def _save_model(self, path: str) -> None:
        """
        Write this robot's model (``model_out``): the reason the robot trained.

        With the server's ``final_model`` (the default) it is the fleet's trained model, the
        very ``model.pt`` of the server; else this robot's own, the others' last updates
        missing. A directory gets ``model.pt`` inside.
        """
        try:
            path = model_out_file(path)
        except ValueError as err:          # (checked at start; changed since)
            self.log.warning(f"could not write this robot's model: {err}")
            return
        if self.gradients.copy:
            self.gradients.work.copy_(self.engine.w)    # the parameters live on the device
        try:
            size = save_state_dict(path, self.model)
        except OSError as err:
            self.log.warning(f"could not write this robot's model to {path}: {err}")
            return
        kept = getattr(getattr(self, 'hooks', None), 'kept_final', None)
        if getattr(self.engine, 'final_mixed', False):
            # (a restored server's second final model came in part, none was saved whole)
            self.log.warning(f"wrote this robot's own model to {path} ({size / 1e6:.1f} MB; "
                             "not the fleet's final model: part of a second final model from "
                             'a restored server replaced it, the rest never came, and no '
                             'whole one was saved (--state-dir))')
        elif getattr(self.engine, 'holds_final', False) and kept is not None:
            self.log.warning(f"wrote the fleet's final model to {path} ({size / 1e6:.1f} MB): "
                             'the last one it took whole, from its saved state; another, '
                             f'from a restored server, came in part ({kept} rows owed)')
        elif getattr(self.engine, 'holds_final', False):
            self.log.info(f"wrote the fleet's final model to {path} ({size / 1e6:.1f} MB)")
        else:
            self.log.info(f"wrote this robot's own model to {path} ({size / 1e6:.1f} MB; not "
                          "the fleet's final model: the server sent none, see its log)")

    def _on_log(self, now: float, log) -> None:
        """Say the notable engine events in this robot's log (``rog_ros.protocol.events``)."""
        say_event(self.log, log)
        self.reject_notes.on_log(log, self.log)
        if log.name == 'reject' and isinstance(log.info, dict) and log.info.get('fleet_size'):
            self._misconfigured = int(log.info['fleet_size'])

    def _starting(self) -> bool:
        """
        Tell whether to go on waiting for peers: no shutdown requested meanwhile.

        Looks for a server of another build meanwhile (:meth:`_look_for_server`: said, not
        refused, before ``startup_timeout``).
        """
        self._look_for_server()
        return not self.requests.shutdown_requested

    def _other_server(self) -> list:
        """
        Return the participants that serve this robot with another build, when only they do.

        A server of an older (or newer) rog_ros whose message types differ reads the uplink
        and writes this robot's downlink with another type hash: Cyclone with type
        information does not match it, rmw_cyclonedds (none) matches it by name and the
        messages are dropped or misread. A participant that reads the uplink with another
        type hash (``Bus.foreign_readers``) and writes this robot's downlink (of either
        build) is such a server; one that only reads the uplink (an older ``ros2 topic
        echo``) is a tool. [] when there is none, or when a server of this build is there
        too (:meth:`_server_there`): a second fleet of another build on this namespace and
        ROS_DOMAIN_ID does not stand between a robot and its own server. Nor, later, one
        heard beside a server of this build for ``IncompatibleWatch.bound_s`` (3 leases,
        ``_beside_own``): that is another fleet's, not this robot's own server replaced, and
        a robot whose own server went out of reach (a Wi-Fi outage, a restart) for
        ``server_timeout`` took it for the replacement and exited 4 (not respawned) where it
        exits 1 (respawned: it rejoins its server). A replacement heard beside the server it
        replaces only while that one's participant lingers (a killed server's, until its
        lease ends) is still refused.
        """
        foreign = {p for t in worker_outbox() for p in self.bus.foreign_readers(t)}
        if foreign:
            writers = self._downlink_writers()
            if writers is not None:
                foreign &= writers           # a server, not a tool that only reads
        now = time.monotonic()
        if foreign and self._server_there():
            for p in foreign:                # (first and last heard beside it)
                self._beside_own[p] = (self._beside_own.get(p, (now,))[0], now)
            return []
        bound = getattr(self.server_watch, 'bound_s', 0.0)
        return sorted(p for p in foreign
                      if p not in self._beside_own or
                      self._beside_own[p][1] - self._beside_own[p][0] < bound)

    def _look_for_server(self, now=None) -> None:
        """
        Say so when the only server there runs another build: at first, then now and then.

        A participant of another build serving this robot (:meth:`_other_server`), with no
        server of this build, for ``INCOMPATIBLE_LEASES`` leases (``IncompatibleWatch``, as
        the server watches its robots) is said in a warning, again every
        ``OTHER_SERVER_SAY_S``. It is not refused then: the robot waits for a server of its
        own build as long as it would wait for any (``startup_timeout`` at the start,
        ``server_timeout`` during the run), and only then ends, with exit status 4
        (:meth:`_refuse_other_server`). At most every ``INCOMPATIBLE_LOOK_S``.
        """
        now = time.monotonic() if now is None else now
        if getattr(self, 'server_watch', None) is None or now < self._next_server_look:
            return                       # (not configured: no bus to ask)
        self._next_server_look = now + INCOMPATIBLE_LOOK_S
        other = self._other_server()
        watch = self.server_watch
        if watch.observe(0, now, other, not other):
            self._other_said = now - OTHER_SERVER_SAY_S      # (said at once below)
        elif not other or 0 not in watch.given_up:
            return
        if now - self._other_said < OTHER_SERVER_SAY_S:
            return
        self._other_said = now
        then = 'exits (status 4)'
        if self._waiting_to_start:
            patience = f'startup_timeout, {self.args.startup_timeout:.3g} s from its start'
        else:
            patience = (f'server_timeout, {self.args.server_timeout:.3g} s after the last '
                        'message of its server')
            if self._other_fleet_robots(other):
                then = ('exits as for a silent server (status 1: robots of that build are '
                        "heard too, so that server is most likely another fleet's)")
        self.log.warning(f'{self._other_server_said(other)}; this robot waits for a server '
                         f'of its build until {patience}, then, if only that server is still '
                         f'heard, {then}')

    def _other_fleet_robots(self, other) -> list:
        """
        Return the participants of another build that write the uplink, the servers aside.

        Only robots write the uplink: these are robots of another build (a server ``other``
        that writes it too is left out). A server of another build that replaced this
        robot's own serves this robot's fleet, whose robots run this build; one heard with
        robots of its build beside it is another fleet's on this namespace and
        ROS_DOMAIN_ID, or this fleet's partly upgraded (its server and some robots).
        """
        writers = {p for t in worker_outbox() for p in self.bus.foreign_writers(t)}
        return sorted(writers - set(other))

    def _other_server_said(self, other) -> str:
        """Say that ``other`` serves this robot with another build: both builds' types."""
        uplink, downlink = worker_outbox(), worker_inbox(self.rank)
        ours = ', '.join(f'{t} {TYPE_HASHES[full_name(topic_type(t))]}'
                         for t in uplink[:1] + downlink[:1])
        told = [(t, self.bus.other_builds(t, writer))
                for t, writer in ((uplink[0], False), (downlink[0], True))]
        theirs = ', '.join(f'{t} {" / ".join(kinds)}' for t, kinds in told if kinds)
        return (f'the only server heard runs another rog_ros build: its participant '
                f'{", ".join(other)} reads {", ".join(uplink)} and writes '
                f'{", ".join(downlink)} with message types built from other .msg files '
                f"(its types: {theirs or 'not told'}; this robot's type hashes: {ours}), so "
                'nothing can pass between them (a server upgraded or restarted with another '
                'rog_ros version, or the server of another fleet on this namespace and '
                'ROS_DOMAIN_ID)')

    def _refuse_other_server(self, waited: str) -> str:
        """
        Raise :class:`ServerIncompatible` when the only server there runs another build.

        Called once the robot's patience is over (``waited`` says which): at the start (no
        server of this build within ``startup_timeout``: it waited until then with ``no
        peer on ...``, exit 1, and under respawn was started again and again) or during the
        run (no message of its server within ``server_timeout``: the server replaced by one
        of another build, which the robot noticed only at its start). One line naming both
        builds, exit status 4: not restarted.

        During the run, a server of another build first heard while this robot's own was
        silent is this robot's server replaced, or another fleet's come while its own was
        out of reach: nothing on the wire names a fleet (the other's messages cannot be
        read, its participant's GUID prefix is random), but robots of that build writing
        the uplink beside it (:meth:`_other_fleet_robots`) say a fleet of that build is
        there. Then the robot does not refuse: it returns the clause that says so, for the
        silent server's line (exit 1, restarted under respawn, which gives its own server
        ``startup_timeout`` more to come back; a server that did replace its own, with part
        of the fleet upgraded, is refused by the restarted robot at its start, exit 4).
        '' when no server of another build is the only one there.
        """
        other = self._other_server()     # (a look of now, not of the last half second)
        robots = [] if self._waiting_to_start or not other else self._other_fleet_robots(other)
        if robots:
            return (f'; the only server heard since, participant {", ".join(other)}, runs '
                    f'another rog_ros build, beside robots of that build (participants '
                    f"{', '.join(robots)}): most likely another fleet's on this namespace "
                    "and ROS_DOMAIN_ID, not this robot's server replaced, so it ends as for "
                    'a silent server (restarted under respawn; if that server did replace '
                    'its own, the restarted robot refuses it at its start, exit status 4)')
        if other:
            raise ServerIncompatible(
                f'{waited}: {self._other_server_said(other)}; upgrade the server or this '
                'robot so both run the same rog_ros version (rog doctor prints the version '
                'each runs); not restarted (exit status 4)')
        return ''

    def _downlink_writers(self):
        """Return the participants writing this robot's downlink, of any build (None: unknown)."""
        writers = set()
        for topic in worker_inbox(self.rank):
            theirs = self.bus.participants(topic, writer=True)
            if theirs is None:
                return None
            writers |= theirs | set(self.bus.foreign_writers(topic))
        return writers

    def _server_there(self) -> bool:
        """
        Tell whether a server of this build is there: it reads the uplink, writes the downlink.

        Where the bus can tell (``Bus.participants``); else a matched reader on the uplink.
        A participant with an endpoint of another build there is of that build: a server
        of a build that changed ``RowChunk`` alone reads ``up/acks`` and writes
        ``wK/acks`` as this build does, and passed for a server of this build (never
        refused: the robot ended with exit 1, respawned again and again).
        """
        readers = [self.bus.participants(t, writer=False) for t in worker_outbox()]
        writers = [self.bus.participants(t, writer=True) for t in worker_inbox(self.rank)]
        if any(p is None for p in readers + writers):
            return any(self.bus.matched(t) for t in worker_outbox())
        others = ({p for t in worker_outbox() for p in self.bus.foreign_readers(t)} |
                  {p for t in worker_inbox(self.rank) for p in self.bus.foreign_writers(t)})
        return bool((set().union(*readers) & set().union(*writers)) - others)

    def _wait_for_downlink(self, waited: float) -> float:
        """
        Wait for the server's writers on this worker's topics, once its readers are matched.

        A server creates its readers and every worker's writers in one step, so they are
        discovered together. A server that reads the uplink and writes nothing to this rank
        long after most likely runs a smaller fleet (rank beyond its ``workers``): the log
        says so then, and the start-up timeout's error too, instead of blaming discovery
        alone. It is not taken for proof: a recorder (``ros2 bag record``) reads the uplink as
        well, with no server behind it; such a recorder of this build beside a server of
        another build brings the robot here, and at ``startup_timeout``
        :class:`ServerIncompatible` ends this wait as it ends the uplink's (``activate``).
        """
        left = self.args.startup_timeout - waited
        downlink = worker_inbox(self.rank)
        hint = (f'the uplink ({", ".join(worker_outbox())}) has a reader, so a server is most '
                f"likely running, but nothing writes to this worker's topics: if the server "
                f'runs a fleet smaller than workers={self.args.workers}, it has no worker '
                f'{self.rank}; give every robot of the fleet the same --workers (or workers in '
                'its --config)')
        grace = min(left, DOWNLINK_GRACE_S)
        for first, wait_s in ((True, grace), (False, left - grace)):
            try:
                return wait_matched(self.bus, downlink, wait_s, keep_waiting=self._starting)
            except PeerTimeout:
                if first and grace < left:
                    self.log.warning(f'no writer on {", ".join(downlink)} {grace:.0f} s after '
                                     f"the server's readers matched: {hint}")
        raise PeerTimeout(f'no peer on {", ".join(downlink)} after '
                          f'{self.args.startup_timeout:.0f} s: {hint}')

    def _node_state(self) -> dict:
        """
        Return what the state file keeps of the node: its compute time, its ``auth_seq``.

        The restored run signs above that number whatever its wall clock says (a robot
        rebooted before NTP set its clock): the END it re-sends for its earlier run's push
        was ``too_old`` for that run's replay window, and the push was never settled.
        """
        signer = signer_of(self.bus)
        out = {'compute_s': self.compute_s}
        if signer is not None:
            out['auth_seq'] = int(signer.seq)
        return out

    def activate(self) -> bool:
        """Wait for the server's endpoints, then start training; False if shut down first."""
        if self.hooks.finished_before():
            self.log.warning(f'robot {self.rank} had already finished the run in '
                             f'{self.args.state_dir} (the server told it to stop): nothing to '
                             f'resume; {train_again(self.args.state_dir)}')
            self._finished_before = True
            self.life.trigger('activate')
            return True
        self._waiting_to_start = True
        try:
            waited = wait_matched(self.bus, worker_outbox(), self.args.startup_timeout,
                                  keep_waiting=self._starting)
            if waited < 0 or self._wait_for_downlink(waited) < 0:
                return False
        except PeerTimeout:
            self._refuse_other_server(f'no server of this build after startup_timeout '
                                      f'{self.args.startup_timeout:.3g} s')
            raise
        finally:
            self._waiting_to_start = False
        self.life.trigger('activate')
        if self.hooks.restore():
            restored = self.hooks.restored_node_state
            self.compute_s = float(restored.get('compute_s', 0.0))
            self.compute_before_s = self.compute_s
            signer = signer_of(self.bus)
            if signer is not None and 'auth_seq' in restored:   # (not in states before it)
                try:
                    signer.continue_after(int(restored['auth_seq']))
                except (TypeError, ValueError, OverflowError) as err:   # (int of inf)
                    self.log.warning(f"the state file's auth_seq is not used ({err}): this "
                                     'run signs from its clock, as a run without one does')
        self.started_at = self._progress_at = time.monotonic()
        self.driver.handle(self.hooks.start(self.started_at), self.started_at)
        return True

    def spin(self) -> None:
        """Run until the server stops training or a shutdown is requested."""
        while self.spin_once():
            pass

    def spin_once(self) -> bool:
        """
        One turn: apply lifecycle requests, then run the protocol; False when done.

        ``inactive`` (paused) keeps answering the protocol but starts no computation, so no
        new push either; ``activate`` resumes with the computation that was due.
        """
        if self._finished_before:
            return False
        if self.driver.stopped:
            if self.failure:
                raise EngineFailure(self.failure)
            return False
        if self._misconfigured:
            raise FleetMismatch(
                f'worker {self.rank}: started with workers={self.args.workers}, but the '
                f'server runs a fleet of {self._misconfigured}; give every robot of the fleet '
                'the same --workers (or workers in its --config)')
        for transition in self.requests.take():
            self.life.request(transition)
        if self.life.finished:
            return False
        self.driver.step()
        self.diagnostics.maybe_publish()
        progress = max(self.driver.last_receive or 0.0, self._progress_at)
        # for the server, not for the robot
        waiting = self.driver.compute_at is None and self.driver.computing is None
        self._look_for_server()
        if waiting and time.monotonic() - progress > self.args.server_timeout:
            other = self._refuse_other_server(f'worker {self.rank}: no message from its '
                                              'server for server_timeout '
                                              f'{self.args.server_timeout:.3g} s')
            raise TimeoutError(f'worker {self.rank}: no message from the server for '
                               f'{self.args.server_timeout:.0f} s (engine state '
                               f'{self.engine.state}, clock {self.engine.clock})'
                               f'{self._drops_said()}{other}')
        if time.monotonic() >= self._status_due:
            self._publish_status()
        return True

    def _drops_said(self) -> str:
        """
        Say what this robot dropped of what it received, or that it received nothing at all.

        A fleet key or ``robot_keys`` that differ between the robots make every message of the
        server fail its tag: the robot hears nothing it can use, and the line it ends with
        said only that the server was silent (the warnings that name the cause were above).
        Messages the engine set aside as superseded are no drops and no sign of the live
        server run's life (``server_heard``): a robot that heard only those said it had heard
        nothing since it started. A push robot whose followed server run fell silent while a
        replaced run (a zombie) repeated its stop gave up saying only that the server was
        silent: it says the stop orders it set aside (``stops_set_aside``).
        """
        counts = {k: v for k, v in self.reject_counts().items() if v}
        others = int(getattr(self.engine, 'superseded', 0) or 0)
        stops = int(getattr(self.engine, 'stops_set_aside', 0) or 0)
        if stops and self.driver.last_receive is not None:
            # a push robot obeys the server run it follows: a replaced one's stop (a zombie
            # still running) is set aside, and the robot gives up here if its run is silent
            zombie = (f'; it set aside {stops} stop orders of a server run it no longer '
                      'follows (a replaced server process still running?)')
            return zombie + _dropped_said(counts)
        if not counts and self.driver.last_receive is None and others:
            # well-formed, but none of its live server run's: "heard nothing" was untrue
            return (f'; it heard from the server only {others} messages it set aside as '
                    'superseded (addressed to an earlier run of this robot, or of a server run '
                    'that was replaced or that does not know this run of it)')
        if not counts and self.driver.last_receive is None:
            # the server answers its robots only: one that drops all of this robot's messages
            # (another fleet key, robot_keys set otherwise) sends it nothing to drop
            return ('; it heard nothing from the server since it started: is the server '
                    'running, with the same namespace and ROS_DOMAIN_ID? if its log shows '
                    "bad_tag drops of this robot's messages, its fleet key or robot_keys "
                    "differs from this robot's")
        return _dropped_said(counts)

    def cleanup(self) -> None:
        """Lifecycle ``cleanup`` (inactive -> unconfigured): release the bus and the engine."""
        self.life.trigger('cleanup')
        self._let_go()
        self.state_hold.release()      # (configure takes it again)

    def _let_go(self, failed: bool = False) -> None:
        """
        Let go of what configure took, the state file aside, in reverse order (idempotent).

        ``failed``: of a configure that failed after making its hooks, whose chaos ledger is
        closed too (a cleaned-up run's hooks, kept by a configure again that failed before
        making its own, keep their ledger for shutdown's final report).

        A cleanup's, and a failed configure's: one that failed after opening the bus (an
        endpoint refused, a ledger folder not writable) left it open, and the configure
        asked again opened a second participant (or set of rclpy endpoints) beside it.
        """
        hooks, driver, bus = (getattr(self, 'hooks', None), getattr(self, 'driver', None),
                              self.bus)
        self.bus, self.engine = None, None
        ledger = getattr(hooks, 'ledger', None) if failed else None
        if ledger is not None:     # (a cleaned-up node's: its final report, at shutdown)
            hooks.ledger = None       # (shutdown writes no final report of an unrun engine)
        let_go_in_turn(self.log, [('the compute thread', driver), ('the chaos ledger', ledger),
                                  ('the bus', bus)])

    def shutdown(self) -> None:
        """Leave: final status, release the bus and the state file. Idempotent."""
        if self.bus is None:       # (never configured, or cleaned up: a ledger to report)
            try:
                if getattr(self, 'hooks', None) is not None:
                    self.hooks.close(self.reject_counts())
            finally:
                self.state_hold.release()
            return
        self.life.request('shutdown')
        try:
            deadline = time.monotonic() + 1.0   # let released messages (final acks) go out
            while self.outbox.pending() and time.monotonic() < deadline:
                self.driver.flush(time.monotonic())
                time.sleep(0.01)
            for _ in range(3):                  # best effort topic: say it more than once
                self._publish_status()
                time.sleep(0.05)
        finally:
            counts = {k: v for k, v in self.reject_counts().items() if v}
            if counts:
                self.log.warning(f'dropped messages {counts}')   # rclpy loggers: one string
            try:       # (a ledger report that fails still lets go of the bus and the file)
                self.hooks.close(self.reject_counts(), getattr(self.bus, 'injected', None))
            finally:
                bus, self.bus = self.bus, None
                try:
                    self.driver.close()
                    bus.close()
                finally:
                    self.state_hold.release()

    # ------------------------------------------------------------------ work
    def _compute(self, clock: int) -> torch.Tensor:
        """One real forward/backward pass on this worker's data; the flat gradient."""
        t0 = self._computing_since = time.monotonic()
        grad, self.loss = self.gradients.compute(self.workload.loss, next(self.batches))
        self._progress_at = time.monotonic()
        self.compute_s += self._progress_at - t0
        self._computing_since = None
        self._status_due = 0.0      # the loop publishes it (only its thread uses the bus)
        return grad

    def _publish_status(self) -> None:
        if self.bus is None or self.engine is None:
            return
        now = time.monotonic()
        self._status_due = now + STATUS_PERIOD_S
        wall = now - self.started_at if self.started_at else 0.0
        e = self.engine
        # comm: this process's wall time less what it computed itself, the computation under
        # way included (it counted as comm until it ended, and the next status took it back:
        # the .msg's cumulative comm_s went down); never below what an earlier status said
        since = self._computing_since
        self._comm_s = max(self._comm_s, wall - (self.compute_s - self.compute_before_s)
                           - (now - since if since is not None else 0.0))
        self.bus.publish(self.status_topic, TrainStatus(
            node=self.rank, stamp=time.time(), iteration=e.clock, loss=self.loss,
            compute_s=self.compute_s, comm_s=self._comm_s,
            bytes_up=e.bytes_up, bytes_down=e.bytes_down, state=f'{self.life.state}:{e.state}',
            start_model=self.start_fingerprint,
            incarnation=getattr(e, 'incarnation', None) or self.run_id))
