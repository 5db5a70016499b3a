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
Every robot leaves with the fleet's final model (``ServerEngine`` ``final_model``).

Robots fine-tune a model in order to use it, but a worker's own model is not the run's
product: it stops with the others' last updates still missing (up to S iterations of their
rows under RSP), and only the server held the trained model (``model.pt``, the consensus:
the mean of the workers' models, the model every evaluation measured). With
``final_model``, the stop order of a worker that has trained its budget waits until the
whole fleet has; the server then takes the consensus once and sends it to every worker
losslessly, a snapshot flagged ``FLAG_FINAL`` (the worker computes no more once it has every
row), and the stop order when the snapshot is acknowledged. From then on the consensus is
that model (``consensus_model``): the server's last evaluation and ``model.pt`` are exactly
what every robot holds, also when one was given up or is absent.

Why the consensus and not ``w_srv`` (every push applied): the run's record measured the
consensus, and one measured fleet closed 0.74 points lower on ``w_srv`` (MPCOL, 100
iterations; the mean of lagging views is an average of recent iterates), which would have
added a dip of its own at the end of every run.

Never at the cost of ending: a robot that restarts meanwhile (but one whose JOIN says it
holds a final model: ``_owed_restarted``), or whose snapshot gets no acknowledgement for
``FINAL_PATIENCE_S``, gets its stop order without the model (``final_model_missed``; one
that restarts holding a final model after that is owed it again: ``_missed_restarted``);
robots suspended for absence are not waited for, nor are those out for their link once
silent for ``FINAL_PATIENCE_S`` (until then their last pushes may still change the model).

A robot gone for good (out for its link or absent, and silent for ``FINAL_PATIENCE_S`` once
the others finished) is let go so that the run ends, with or without a final model
(``let_go_silent``, which the server node turns on also when ``final_model`` is off; the
simulator leaves both off, so its runs end where they did).

``FinalModelMixin`` is one part of ``ServerEngine`` (``ps.py``) and works on its state.
"""

from __future__ import annotations

import hashlib
import sys

from rog_ros.protocol.actions import Log, Send
from rog_ros.protocol.messages import FLAG_FINAL, FLAG_JOIN, RowChunk, Schedule
import torch

FINAL_PATIENCE_S = 60.0
"""Seconds without an acknowledgement of a robot's final model before it is given up (a
snapshot over a slow link keeps acknowledging chunks; a dead link says nothing; pokes do not
count: a robot whose pokes arrive while its model does not would otherwise hold the end)."""
FINAL_ID_BYTES = 8
"""Length of a final model's fingerprint (``final_model_id``), the payload of a JOIN with
``FLAG_FINAL``."""


def final_model_id(values: torch.Tensor) -> bytes:
    """
    Return which final model ``values`` is: BLAKE2b (8 bytes) of its raw little-endian values.

    The bytes a lossless snapshot carries, so a robot that took a final model whole and the
    server that sent it compute the same id, and two final models differing in any bit get
    different ones (but with a chance of 2**-64). A robot's JOIN with ``FLAG_FINAL`` carries it
    as its payload. Hashed in place (no model-sized copy) for a contiguous CPU tensor on a
    little-endian machine; else a copy is hashed.
    """
    t = values.detach().reshape(-1)
    if t.device.type != 'cpu' or not t.is_contiguous():
        t = t.cpu().contiguous()
    if sys.byteorder == 'little' or t.element_size() == 1:
        raw = t.view(torch.uint8).numpy()
    else:       # (as integers of its size: numpy has no bfloat16)
        a = t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]).numpy()
        raw = a.astype(a.dtype.newbyteorder('<'))
    return hashlib.blake2b(raw, digest_size=FINAL_ID_BYTES).digest()


class FinalModelMixin:
    """The final model of a ``ServerEngine``'s robots before their stop orders."""

    def _init_final(self, final_model: bool, let_go_silent: bool | None = None) -> None:
        self.final_model = bool(final_model)
        self.let_go_silent = self.final_model if let_go_silent is None else bool(let_go_silent)
        self._owed_final: dict = {}      # worker -> clock: done, stop order held for the model
        self._final_heard: dict = {}     # worker -> its model's last progress (ack), under way
        self._missed_final: dict = {}    # worker -> clock: given up while owed the model
        self.final_delivered = 0         # robots that received the final model
        self.final_missed = 0            # ... and that were given up
        self.let_go = 0                  # robots out and silent, stopped to end the run
        self._first_looked: dict = {}    # worker -> when a restored server, never having
        #                                  heard it, first counted its silence
        self.final_values = None         # the model sent, taken once when the fleet is done
        self._final_bytes = None         # (final_values, its snapshot encoding): one for all
        self._final_id = None            # (final_values, final_model_id of it)
        self._final_checked = 0.0        # when _start_final last looked (timers after it)

    def stop_orders_sent(self) -> list:
        """
        Return, per worker, whether its stop order went out (stopped, no final model owed).

        A worker owed its final model is stopped but holds no order yet; the order leaves
        with the model's acknowledgement. The server node checkpoints before each order
        leaves and, restored, waits only for the workers without one (they left).
        """
        return [bool(s) and r not in self._owed_final for r, s in enumerate(self.stopped)]

    def _stop_order(self, r: int, c: int) -> list:
        """
        Stop worker r, done at clock c: the order, or nothing while its final model is owed.

        The caller then calls ``_start_final``: the model goes out once the fleet is done.
        """
        if not self.final_model:
            return [Send(r, Schedule(worker=r, clock=c, push_deadline_s=-1.0, stop=True))]
        self._owed_final[r] = c
        return []

    def _final_waits_for(self, now: float) -> list:
        """
        Workers that may still change the model: training, or out for their link.

        One out for its link still pushes (its last push comes with its catch-up), unless
        it has been silent for ``FINAL_PATIENCE_S`` (dead, not slow: a crashed robot is
        suspended for its link before any absence timeout). Absent ones are not waited for.
        """
        waits = []
        for a in range(self.n):
            if self.stopped[a]:
                continue
            if bool(self.active[a]):
                waits.append(a)
            elif self.suspended_reason.get(a) == 'link':
                heard = self.last_heard[a]
                if heard is not None and now < heard + FINAL_PATIENCE_S:
                    waits.append(a)
        return waits

    def _start_final(self, now: float) -> list:
        """Send the final model to every done worker that has none under way, once due."""
        self._final_checked = now
        if not self._owed_final or self._final_waits_for(now):
            return []
        if self.final_values is None:
            self.final_values = self.mirror.mean(0)     # the consensus, once (model-sized)
        out = []
        for r, c in sorted(self._owed_final.items()):
            if r in self._final_heard or self.downlinks[r] is not None:
                continue
            self._final_heard[r] = now
            self._holds_unknown(r)           # every row goes out, raw (a snapshot)
            out += self._start_snapshot(r, c, now)
        return out

    def _final_sent(self, r: int, rows: int) -> list:
        """Worker r acknowledged its final model: now its stop order."""
        c = self._owed_final.pop(r)
        self._final_heard.pop(r, None)
        self.final_delivered += 1
        return [Log('final_model', float(rows), r),
                Send(r, Schedule(worker=r, clock=c, push_deadline_s=-1.0, stop=True))]

    def _owed_restarted(self, r: int, msg) -> list:
        """
        Worker r restarted while owed its final model: delivered if its JOIN holds ours.

        A robot killed after it applied the final model (saved with its state, before its
        acknowledgement) JOINs with ``FLAG_FINAL`` and the model's id (``final_model_id``) as
        its payload: when it is ours, its model is the final model bit for bit, and counting
        it without (``final_model_missed``) was one robot too many. Another id is another
        final model: one a server restored from a checkpoint older than ours took and sent
        before it died (the simulator's sweeps, or an older state folder put back by hand),
        which that robot saved. Counted delivered until 2026-12-08, its mirror set to ours: it
        left holding the first, ``model.pt`` the second. Such a robot, or one that says no id
        (a release before it), is sent ours now (``final_model_resent``; ``_final_tick`` starts
        it at once, after the answer to its JOIN), and stopped once it acknowledges it.
        Without ``final_values`` (a checkpoint from before it was taken) the robot's cannot be
        vouched for, and it is given up as any other restart.
        """
        if (self.final_values is None or not isinstance(msg, RowChunk)
                or not msg.flags & FLAG_JOIN or not msg.flags & FLAG_FINAL):
            return self._give_up_final(r, 'restarted')
        if bytes(msg.payload) == self._final_model_id():
            self.mirror[r].copy_(self.final_values)      # what it holds (a rejoin: unknown)
            return self._final_sent(r, self.snap_layout.n_rows)
        self._final_heard.pop(r, None)       # its model again, from its first row
        said = ('another final model' if len(msg.payload) == FINAL_ID_BYTES
                else 'a final model it does not name')
        return [Log('final_model_resent', 1.0, r, {'reason': f'restarted holding {said}'})]

    def _missed_restarted(self, r: int, msg) -> list:
        """
        Worker r, given up while owed its final model, restarted holding a final model.

        Given up (``final_model_missed``: silent for ``FINAL_PATIENCE_S``, or restarted
        before this server held its final model), it is stopped at its JOIN, and one that
        holds a final model keeps it: another one (a restored server's first) its node
        wrote as the fleet's final model, ``model.pt`` holding ours. Its JOIN says which it
        holds (``final_model_id``): ours, and it is counted delivered after all; another, or
        none, and it is owed ours again while the fleet is not done (a finished server
        leaves), sent it as in ``_owed_restarted`` and given up again as any robot owed it.
        A JOIN without ``FLAG_FINAL`` (no final model: its node says it holds its own)
        changes nothing.
        """
        if (r not in self._missed_final or self.final_values is None
                or not isinstance(msg, RowChunk) or not msg.flags & FLAG_JOIN
                or not msg.flags & FLAG_FINAL):
            return []
        ours = bytes(msg.payload) == self._final_model_id()
        if not ours and not self._owes_final_again(r, msg):
            return []
        self._owed_final[r] = self._missed_final.pop(r)
        self.final_missed -= 1                  # owed again: delivered, or given up again
        if ours:
            self.mirror[r].copy_(self.final_values)
            return self._final_sent(r, self.snap_layout.n_rows)
        said = ('another final model' if len(msg.payload) == FINAL_ID_BYTES
                else 'a final model it does not name')
        return [Log('final_model_resent', 1.0, r,
                    {'reason': f'restarted after it was given up, holding {said}'})]

    def _owes_final_again(self, r: int, msg) -> bool:
        """
        Tell whether ``msg``, a new run's JOIN, makes worker r, given up, owed our model again.

        So that the answer to its JOINs addressed to our predecessor (``_hello``, no state
        change) does not stop it before one reaches us (``_missed_restarted``).
        """
        return (r in self._missed_final and self.final_values is not None
                and not self.finished and isinstance(msg, RowChunk)
                and bool(msg.flags & FLAG_JOIN) and bool(msg.flags & FLAG_FINAL)
                and bytes(msg.payload) != self._final_model_id())

    def _final_model_id(self) -> bytes:
        """Return ``final_model_id(final_values)``, computed once per final model."""
        if self._final_id is None or self._final_id[0] is not self.final_values:
            self._final_id = (self.final_values, final_model_id(self.final_values))
        return self._final_id[1]

    def _give_up_final(self, r: int, reason: str) -> list:
        """Stop worker r without its final model (restarted, or silent too long)."""
        c = self._owed_final.pop(r)
        self._missed_final[r] = c
        self._final_heard.pop(r, None)
        dl = self.downlinks[r]
        if dl is not None and dl.snapshot:
            self.downlinks[r] = None
        self.final_missed += 1
        return [Log('final_model_missed', 1.0, r, {'reason': reason}),
                Send(r, Schedule(worker=r, clock=c, push_deadline_s=-1.0, stop=True))]

    def _answer_stopped(self, r: int) -> list:
        """
        Answer a poke of a worker we stopped: the stop order, or, while its model is owed, hello.

        A done worker waits for the others silently but for its pokes; answering them keeps
        it from giving up on the server (``server_timeout``) while the fleet finishes.
        """
        if r not in self._owed_final:
            return [Send(r, Schedule(worker=r, clock=self.clock[r], push_deadline_s=-1.0,
                                     stop=True))]      # the stop order may have been lost
        return [Send(r, self._hello(r))]

    def _snapshot_values(self, r: int):
        """
        Return what a snapshot to worker r carries: the final model, or ``w_srv`` (rejoin).

        The final model itself (nothing changes it once taken), a copy of ``w_srv``.
        """
        if r in self._owed_final and self.final_values is not None:
            return self.final_values
        return self.w_srv.clone()

    def _snapshot_bytes(self, values):
        """
        Return the lossless encoding of snapshot ``values``: the final model's once for all.

        Every robot's final snapshot carries the same bytes, which no transfer changes; each
        robot's copy of the values and of their bytes were 2 N model sizes at the end of a
        run (N robots; 4 x 37.9 MB with 2), on top of the server's steady state.
        """
        if values is not self.final_values:
            return self.snap_codec.encode(self.snap_layout, values, None)
        if self._final_bytes is None or self._final_bytes[0] is not values:
            self._final_bytes = (values, self.snap_codec.encode(self.snap_layout, values, None))
        return self._final_bytes[1]

    def _final_tick(self, now: float) -> list:
        """Give up the final model of robots whose model made no progress for the patience."""
        out = self._start_final(now)      # a robot out and silent may be let go
        for r, heard in sorted(self._final_heard.items()):
            if now >= heard + FINAL_PATIENCE_S:
                out += self._give_up_final(r, f'silent for {now - heard:.0f} s')
        for r in self._gone_for_good(now):
            out += self._let_go(r, now)
        return out

    def _out_and_silent(self) -> list:
        """Workers not stopped, before their budget, out (for their link, or absent)."""
        if not self.let_go_silent or not self._fleet_finished():
            return []
        return [a for a in range(self.n)
                if not self.stopped[a] and a not in self._owed_final and not self.active[a]
                and self.suspended_reason.get(a) in ('link', 'absent')]

    def _gone_for_good(self, now: float) -> list:
        """
        Workers out, silent for the patience (from when each was last heard).

        Only once the fleet finished (``_out_and_silent``).

        One out for its link stops at its next pull (``stopped_after_fleet``), but one whose
        uplink died for good before its budget (frozen, powered off, a dead radio) never
        pulls: it held the server's end for ever once the others had theirs (a fleet with one
        robot frozen ran into its 240 s timeout). So did one suspended as absent (the
        absence timeout, or SSP, BSP and FLOWN, which suspend nobody for a link). It is let
        go as its final model would be. A server restored from a checkpoint never heard it:
        its silence counts from the restored server's first look.
        """
        gone = []
        for a in self._out_and_silent():
            since = self._silent_since(a)
            if since is None:
                self._first_looked[a] = now
            elif now >= since + FINAL_PATIENCE_S:
                gone.append(a)
        return gone

    def _silent_since(self, a: int) -> float | None:
        """When worker a was last heard, or a restored server first looked (None: neither)."""
        heard = self.last_heard[a]
        return heard if heard is not None else self._first_looked.get(a)

    def _let_go(self, r: int, now: float) -> list:
        """Stop worker r, out and silent, without its final model."""
        self.stopped[r] = True
        self.pending.pop(r, None)
        self._forget_encoding(r)
        self._end_stall(r, now)
        out_for = ('out for its link' if self.suspended_reason.get(r) == 'link'
                   else 'absent')
        reason = f'silent for {now - self._silent_since(r):.0f} s, {out_for} before its budget'
        self.let_go += 1
        if self.final_model:
            self.final_missed += 1
            said = Log('final_model_missed', 1.0, r, {'reason': reason})
        else:
            said = Log('worker_let_go', 1.0, r, {'reason': reason})
        return [said] + self._answer_stopped(r)      # its stop order, should it ever hear it

    def _final_deadline(self) -> float | None:
        """When a final model is due or given up, or the silence of one out ends."""
        times = [t + FINAL_PATIENCE_S for t in self._final_heard.values()]
        if self._owed_final:
            checked = self._final_checked
            waits = self._final_waits_for(checked)
            if not waits and any(r not in self._final_heard and self.downlinks[r] is None
                                 for r in self._owed_final):
                # owed, due and not under way: a server restored during the end (its
                # checkpoint, taken before a stop order, owes the others their model and
                # restores no transfer) sent it nothing and waited for ever: look at once
                times.append(checked)
            times += [t for t in (self.last_heard[a] + FINAL_PATIENCE_S
                                  for a in waits if not self.active[a]) if t > checked]
        times += [self._final_checked if self._silent_since(a) is None      # look at once
                  else self._silent_since(a) + FINAL_PATIENCE_S for a in self._out_and_silent()]
        return min(times) if times else None
