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
The parameter server's pull path: the staleness check, stalls and downlink transfers.

A worker's pull waits until its RSP/SSP check holds (a *stall*, counted as a threshold
trigger); then a downlink carries ``G[r] + E[r]`` in ATP order, or a lossless snapshot after a
rejoin, with the version table of the rows it carries (``encode_versions``). On the worker's
final ack the delivered rows are committed to its mirror. Late pulls send changed rows while
the worker computes.

``DownlinkMixin`` is one part of ``ServerEngine`` (``ps.py``) and works on its state.
"""

from __future__ import annotations

import numpy as np
from rog_ros.core.atp import expected_rows, infinite_mask, mta_time, priority_order
from rog_ros.core.encoding_cache import rows_written
from rog_ros.core.mta import mandatory_rows, row_budget
from rog_ros.core.row_updates import decode_delivered, few_rows, sub_rows_
from rog_ros.core.versions import columns_satisfy
from rog_ros.protocol.actions import Log, Send
from rog_ros.protocol.messages import (
    FLAG_END, FLAG_FINAL, FLAG_FREE, FLAG_LATE, FLAG_SNAPSHOT, KIND_UPDATE, MessageError,
    ranges_from_sorted, RowVersions, Schedule, SERVER, TransferAck)
from rog_ros.protocol.transfer import OutgoingTransfer, split_versions
import torch


class OpenDownlink:
    """An open downlink transfer to one worker and the snapshots it must commit."""

    def __init__(self, transfer: OutgoingTransfer, rowbytes: torch.Tensor,
                 scales: torch.Tensor, v_snap: torch.Tensor | None, active: torch.Tensor,
                 snapshot: bool = False, event: int = 0):
        self.transfer, self.rowbytes, self.v_snap = transfer, rowbytes, v_snap
        # what the worker decodes with: per chunk and tensor if the transfer has chunk
        # scales (never for lossless snapshots), else ``scales`` per tensor
        self.scales, self.per_row = transfer.commit_scales()
        self.event = event            # server event of the versions it carries (v_snap None)
        self.active = active          # membership the worker's RSP check will use
        self.bounds = None            # ... and its per-column bounds (straggler slack), or
        #                               None: the policy's S in every column
        self.slack = np.zeros(0, np.uint16)   # the slack its RowVersions carries (empty: none)
        self.snapshot = snapshot      # rows replace the worker's (rejoin), lossless
        self.versions: RowVersions | None = None
        self.parts: list = []         # ... or its parts (a copy past VERSIONS_PART_BYTES)


class DownlinkMixin:
    """Serving pulls of a ``ServerEngine``."""

    def _forget_encoding(self, r: int) -> None:
        """Drop the encoding kept for a worker that is done (no delta pull goes to it again)."""
        if self._encodings:
            self._encodings[r].clear()

    def _try_serve(self, r: int, now: float) -> list:
        if r in self.pending and self.stopped[r]:
            # a worker let go at the end (``_let_go``) whose push crossed its stop order:
            # stopped once, never served, done or owed a final model again
            del self.pending[r]
            return self._answer_stopped(r)
        if r not in self.pending or self.downlinks[r] is not None:
            return []
        if self.slots is not None:
            # FLOWN serves a pull only in its slot (``_dispatch_slots``): a membership change
            # that served it here as well sent the worker the same pull twice, and it
            # applied both (absence suspensions under FLOWN; the crash sweep with membership)
            return []
        c = self.pending[r]
        out_after_fleet = (not self.active[r] and self.suspended_reason.get(r) == 'link'
                           and self._fleet_finished())
        if self.max_iterations is not None and (c >= self.max_iterations or out_after_fleet):
            del self.pending[r]
            self.stopped[r] = True
            self._forget_encoding(r)
            self._end_stall(r, now)
            out = self._stop_order(r, c) + [Log('worker_done', float(c), r)]
            if out_after_fleet:
                out.append(Log('stopped_after_fleet', float(self.max_iterations - c), r))
            elif self._fleet_finished():
                # the last worker that counted is done: robots out for their link and
                # waiting for a pull stop now (the others at their next pull)
                for q in [q for q in self.pending
                          if not self.active[q] and self.suspended_reason.get(q) == 'link']:
                    out += self._try_serve(q, now)
            return out + self._start_final(now)
        # A suspended worker catching up is served without quorum: it must get back in.
        quorum = self._quorum() or not self.active[r]
        if not quorum or not self.versions.satisfied(c, self._bounds(r), self._counted(r, c)):
            if r not in self.stall_since:
                self.stall_since[r] = now
                self.triggers[r] += 1
                if self.slack is not None and quorum:
                    self._blockers[r] = self._holding(r, c)
                info = {'clock': c}
                if not quorum:
                    info['quorum'] = f'{int(self.active.sum())} of {self.min_workers} active'
                return [Log('trigger', 1.0, r, info)] + self._ask_own_rows(r, c)
            return []
        out = self._end_stall(r, now) + self._update_slack(now)
        del self.pending[r]
        if not self.active[r] and self.suspended_reason.get(r) == 'link':
            # Catching up after an outage: the worker goes on from the fleet's clock. Its
            # rows age by the jump, so its next pushes carry every row older than S and
            # bring its versions within the bound of the fleet's clock: it is readmitted
            # (``_maybe_readmit``) as soon as its link keeps the fleet's pace. (From the
            # fleet's clock minus S, its rows trailed the fleet by more than S for good: a
            # robot whose link had recovered stayed suspended, its pushes weighted down,
            # until the others finished.) A robot with straggler slack may trail the fleet
            # by its slack: it goes on from there and skips that many fewer iterations.
            ahead = self._fleet_clock() - self._own_slack(r)
            # ... but no further than the versions held here allow: a pull at clock c needs
            # every active worker's rows at c - S or newer, and the fleet's newest clock may
            # be a push whose own pull still waits for them (a repair loop otherwise)
            act = self.active
            if bool(act.any()):
                ahead = min(ahead, int(self.versions.v[:, act].min()) + self.policy.staleness)
            if self.max_iterations is not None:
                ahead = min(ahead, int(self.max_iterations) - 1)
            c = max(c, ahead)
        out += self._start_downlink(r, c, now)
        return out + self._free_too_slow(now) if self._free_due else out

    def _counted(self, r: int, c: int) -> torch.Tensor:
        """
        Return the columns r's pull at clock c is checked against (bool ``[N]``).

        The active workers, less any that is done training with rows too old for that
        pull: a done worker sends no row again. Its rows are normally within the bound of
        every clock the others still reach (its last push carried every row older than its
        clock - S), but not after a catch-up (outage-aware RSP) left rows behind and a
        readmission came just before its last push: the others' pulls then waited for rows
        that never came (membership sweep, rog:4 seed 69, since before 2026-12-02). The pull
        marks such a column suspended, so the worker's own check leaves it out too.
        """
        act = self.active
        if not any(self.stopped):          # (every pull until the first worker is done)
            return act
        done = [d for d in range(self.n) if self.stopped[d] and bool(act[d])]
        if not done:
            return act
        floor = (c - self._bounds_tensor(r)).to(torch.int32)
        stale = [d for d in done if int(self.versions.v[:, d].min()) < int(floor[d])]
        if not stale:
            return act
        act = act.clone()
        act[stale] = False
        return act

    def _end_stall(self, r: int, now: float) -> list:
        t0 = self.stall_since.pop(r, None)
        self.stall_warned.pop(r, None)
        blockers = self._blockers.pop(r, None)
        if t0 is None:
            return []
        if blockers:
            self.slack.held(blockers, now - t0, now, self._slack_window())
        self.stall_time[r] += now - t0
        return [Log('stall_s', now - t0, r)]

    def _ask_own_rows(self, r: int, c: int) -> list:
        """
        Ask worker r for its rows that hold its own pull (``Schedule.urgent_rows``).

        Its pull at clock c needs every row's version of r at c - S or newer. A worker keeps
        its rows within that bound by its own count of withheld iterations, which can fall
        behind ours after it restarts from a saved state: then nothing else would ever send
        those rows and the pull would wait for ever (seen as a fleet whose restarted robot
        stays at one clock). Rows other workers owe are not asked for: their own pulls and
        pushes bring them.
        """
        if self.policy.whole_model or not self.active[r]:
            return []
        own = self.versions.v[:, r] < c - self.policy.staleness - self._own_slack(r)
        if not bool(own.any()):
            return []
        rows = torch.nonzero(own).reshape(-1).numpy()
        return [Send(r, Schedule(worker=r, clock=c, push_deadline_s=self._push_deadline(r, c),
                                 urgent_rows=ranges_from_sorted(rows).astype(np.uint32))),
                Log('urgent_rows', float(rows.size), r, {'clock': c})]

    def resync(self, r: int, info: dict | None = None) -> list:
        """
        Make worker r's next pull the server's model: it holds weights we do not know.

        A robot that started from other weights than the server (another ``init_model``
        file; a pre-trained checkpoint its machine computed differently) adds every update to
        its own copy and trains apart from the fleet for the whole run. Its next pull becomes
        a lossless snapshot, as a rejoining worker's, after which it holds exactly the
        server's view of it. A pull under way finishes first; a snapshot already owed (a
        rejoin) serves as well. ``info`` goes into the event (the nodes: both fingerprints).
        """
        if not 0 <= r < self.n:
            raise ValueError(f'no worker {r} in a fleet of {self.n}')
        if not self.stopped[r]:
            self._resync_owed.add(r)
        then = 'stopped' if self.stopped[r] else 'next pull'
        return [Log('start_mismatch', 1.0, r, {**(info or {}), 'resync': then})]

    def _start_downlink(self, r: int, c: int, now: float,
                        late_deadline: float | None = None) -> list:
        late = late_deadline is not None
        if r in self._resync_owed and not late:
            self._resync_owed.discard(r)
            if self.unsynced[r] is None:      # (a rejoin's snapshot is owed already)
                self._holds_unknown(r)
        if self.absence_timeout_s is not None and not late:
            self.absent_at[r] = now + self.absence_timeout_s   # its silence counts again
        if self.unsynced[r] is not None:
            return [] if late else self._start_snapshot(r, max(c, self.clock[r]), now)
        pol, layout = self.policy, self.layout
        v = self.versions.v
        act = self._counted(r, c).clone()
        bounds = None if late else self._bounds(r)
        per_column = isinstance(bounds, torch.Tensor)
        every = bool(act.all()) and not per_column
        if every:     # O(M): per-row change stamps against r's delivery stamps
            new_data, oldest = self.delivered.new_and_oldest(r, v)
        else:
            # (masked reductions over [M, N]: no copies of the active columns)
            sent_r = self.delivered.sent(r)           # a fresh table: changed in place
            cols = act.unsqueeze(0)
            new_data = ((v > sent_r) & cols).any(dim=1)
            if per_column:    # a column with slack ages slower: urgency against its bound
                sent_r += (bounds - pol.staleness).to(sent_r.dtype).unsqueeze(0)
            oldest = (sent_r.masked_fill_(~cols, torch.iinfo(sent_r.dtype).max).amin(dim=1)
                      if bool(act.any())
                      else torch.full((layout.n_rows,), c, dtype=torch.int32))
        candidates = torch.nonzero(new_data).reshape(-1)
        if late and candidates.numel() == 0:
            return []                               # nothing changed since its pull
        # Only the candidates can go (a late pull's are often a chunk or two): p, its row sums
        # and its bytes are then taken on those rows alone (the same bits on those rows).
        # Of those, the rows unchanged since r's last downlink keep their bytes (the cache).
        sources = (self.mirror, self.w_srv)
        cache = self._encodings[r] if self._encodings else None
        fresh = None if cache is None else cache.stale_rows(layout, self.codec, sources,
                                                            candidates)
        alone = self.codec.encodes_rows_alone and few_rows(layout, candidates)
        if fresh is not None or alone:
            rows = candidates if fresh is None else fresh
            p = layout.scatter_rows_(self._p, rows,
                                     layout.gather_rows(self.mirror[r], rows)
                                     - layout.gather_rows(self.w_srv, rows))
            if fresh is not None:
                rowbytes, trs = cache.encode(layout, self.codec, p, fresh)
            else:
                trs = layout.tensor_row_abs_sum_of(p, candidates)
        else:
            p = torch.sub(self.mirror[r], self.w_srv, out=self._p)     # G[r] + E[r]
            trs = layout.tensor_row_abs_sum(p)
        row_sums = layout.row_abs_sum(p, trs)
        if pol.whole_model or not pol.ordering:
            order = candidates
            n_inf = 0
            if not pol.whole_model and self.slots is None:
                # rows the worker's RSP check needs come first (downlink repair)
                must = new_data & (oldest < c - pol.staleness)
                n_inf = int(must.sum())
                if n_inf:
                    order = torch.cat([torch.nonzero(must).reshape(-1),
                                       torch.nonzero(new_data & ~must).reshape(-1)])
        else:
            urgency = c - oldest
            inf = infinite_mask(urgency, pol.staleness, pol.convention)
            order = priority_order(urgency, row_sums, inf, use_magnitude=pol.use_magnitude,
                                   multiply=False, candidates=candidates)
            n_inf = int((inf & new_data).sum())
        if self._runs_free(r):
            n_inf = 0          # the MTA prefix of its order (stalest rows first) is enough
        k_min = min(mandatory_rows(layout.n_rows, pol.mta_for(self._own_slack(r)), n_inf),
                    int(order.numel()))
        deadline = self._downlink_deadline(r, k_min, order, now)
        if late:                       # optional rows only, for as long as it computes
            k_min, deadline = 0, late_deadline
        if pol.balance == 'budget' and not pol.whole_model and not late:
            k_min = max(k_min, min(int(order.numel()), self._budget_rows(self.thr_down, r)))
        row_mask = None
        if pol.scale_sent_rows and not pol.whole_model and not pol.chunk_scales:
            budget = deadline - now if pol.balance == 'deadline' else 0.0
            k_est = expected_rows(order, self.row_nbytes, k_min, budget,
                                  self.thr_down[r].value_bps)
            row_mask = torch.zeros(layout.n_rows, dtype=torch.bool)
            row_mask[order[:k_est]] = True
        scales = self.codec.scales(layout, p, trs, row_mask)
        if fresh is None:
            rowbytes = (self.codec.encode_rows(layout, p, candidates, trs) if alone
                        else self.codec.encode(layout, p, scales, trs))
            if cache is not None:
                cache.store(rowbytes, trs, sources, candidates if alone else None)
        self.next_tid[r] += 1
        tr = OutgoingTransfer(transfer_id=self.next_tid[r], sender=SERVER, receiver=r,
                              kind=KIND_UPDATE, clock=c, layout=layout, codec=self.codec,
                              rowbytes=rowbytes, scales=scales, order=order,
                              n_mandatory=k_min, deadline=deadline, now=now,
                              window=self.window, chunk_bytes=self.chunk_bytes,
                              end_timeout_s=self.end_timeout_s,
                              rate_bps=self.thr_down[r].value_bps,
                              peer=self.peers[r], lease_s=self.lease_s,
                              tensor_row_sums=trs if pol.chunk_scales else None,
                              flags=((FLAG_LATE if late else 0)
                                     | (FLAG_FREE if self._runs_free(r) else 0)))
        self.downlinks[r] = OpenDownlink(tr, rowbytes, scales, None, act,
                                         event=self.delivered.pin(('dl', r)))
        self._set_bounds(r, self.downlinks[r])
        out = [] if late else [Send(r, Schedule(worker=r, clock=c,
                                                push_deadline_s=self._push_deadline(r, c)))]
        return out + self._sends(r, self.downlinks[r], tr.pump(now), now)

    def _start_late_pull(self, r: int, c: int, now: float) -> list:
        """
        Send worker r, while it computes, rows that changed since its pull (``late_pulls``).

        A sequential worker's link is idle while it computes, and its next pull must carry
        every row the others changed meanwhile. Rows sent now, in priority order, none
        mandatory, until the computation is expected to end (less one round trip for the
        final ack), shorten that pull. The worker applies them when its computation ends
        (``WorkerEngine._apply_pull``); they carry ``FLAG_LATE`` and the clock of its pull,
        and answer nothing: no Schedule, no pace or compute sample, no repair. Started again
        when one ends with time left, so rows changed by pushes that arrive meanwhile follow.
        """
        pol = self.policy
        if (not pol.late_pulls or pol.whole_model or self.slots is not None or pol.overlap
                or self.downlinks[r] is not None or r in self.pending or self.stopped[r]
                or not self.active[r] or self.unsynced[r] is not None):
            return []
        rate = self.thr_down[r].value_bps
        deadline = self._late_pull_until[r] - self.rtt_down[r].value
        if rate <= 0 or (deadline - now) * rate / 8.0 < self.chunk_bytes:
            return []                   # not one chunk's worth of idle link
        return self._start_downlink(r, c, now, late_deadline=deadline)

    def _holds_unknown(self, r: int) -> None:
        """Worker r holds a model we do not know (rejoin, restart, resync): snapshot it."""
        self.delivered.reset(r)           # what it holds is unknown: the snapshot says all
        self.delivered.unpin(('dl', r))
        self._new_snapshot_epoch(r)

    def _new_snapshot_epoch(self, r: int) -> None:
        self.unsynced[r] = torch.ones(self.snap_layout.n_rows, dtype=torch.bool)
        self.snap_v[r] = None
        self.delivered.unpin(('snap', r))

    def _start_snapshot(self, r: int, c: int, now: float) -> list:
        """
        Rejoin pull: the rows of ``w_srv`` worker r still lacks, lossless (``FLAG_SNAPSHOT``).

        They replace the worker's rows; on the final ack ``mirror[r]`` takes exactly the
        delivered values (so the worker holds exactly the server's view of it), and the rows
        still missing go out in the next snapshot before the worker may compute. Snapshots
        always use tensor rows (``snapshot_layout``), also for whole-model policies, so that a
        lost chunk costs one row, not the whole model. Every snapshot of one rejoin carries the
        version table taken at its first transfer, for every row (the oldest the rows may be);
        both sides adopt it when the last row arrived.
        """
        layout = self.snap_layout
        rows = torch.nonzero(self.unsynced[r]).reshape(-1)
        if self.snap_v[r] is None:
            self.snap_v[r] = self.versions.v.clone()
            self.snap_event[r] = self.delivered.pin(('snap', r))
        values = self._snapshot_values(r)      # w_srv; the final model (ps_final)
        rowbytes = self._snapshot_bytes(values)
        scales = torch.zeros(layout.n_tensors, dtype=torch.float32)
        self.next_tid[r] += 1
        tr = OutgoingTransfer(transfer_id=self.next_tid[r], sender=SERVER, receiver=r,
                              kind=KIND_UPDATE, clock=c, layout=layout, codec=self.snap_codec,
                              rowbytes=rowbytes, scales=scales, order=rows,
                              n_mandatory=int(rows.numel()), deadline=now, now=now,
                              window=self.window, chunk_bytes=self.chunk_bytes,
                              end_timeout_s=self.end_timeout_s,
                              rate_bps=self.thr_down[r].value_bps,
                              peer=self.peers[r], lease_s=self.lease_s,
                              flags=FLAG_SNAPSHOT | (FLAG_FINAL if r in self._owed_final else 0))
        dl = OpenDownlink(tr, rowbytes, scales, self.snap_v[r], self._counted(r, c).clone(),
                          snapshot=True)
        dl.values = values
        self._set_bounds(r, dl)
        self.downlinks[r] = dl
        sched = Schedule(worker=r, clock=c, push_deadline_s=self._push_deadline(r, c))
        return [Send(r, sched), Log('snapshot', float(rows.numel()), r)] + \
            self._sends(r, dl, tr.pump(now), now)

    def _sends(self, r: int, dl: OpenDownlink, chunks: list, now: float) -> list:
        """
        Build the sends for downlink chunks.

        The transfer's RowVersions goes right before its END, and again before every
        retransmitted END: a worker does not accept an END whose versions it lacks. A repeat
        only within ``VERSIONS_MAX_WIRE_BYTES`` past the copies r is known to hold
        (``VersionsLink``): to a silent robot every copy stays in the writer until its lease
        ends, and DDS delivers the first one when its link is back.
        """
        out = []
        for ch in chunks:
            if ch.flags & FLAG_END:
                first = dl.versions is None
                if first:
                    rows = (np.arange(self.layout.n_rows) if dl.snapshot
                            else dl.transfer.sent_rows())
                    v_rows = None
                    if dl.v_snap is None and rows.size:    # only the rows it carries
                        v_rows = self.delivered.pinned_rows(
                            ('dl', r), dl.event, torch.from_numpy(rows), self.versions.v)
                    dl.versions = encode_versions(
                        dl.transfer.transfer_id, r,
                        self._v_snap(r, dl) if v_rows is None else None, rows, dl.active,
                        v_rows=v_rows)
                    dl.versions.staleness_slack = dl.slack
                    link = self.version_links[r]
                    dl.parts = split_versions(dl.versions, link.part_bytes, link.fragment_bytes)
                    if len(dl.parts) == 1:
                        dl.parts = []
                out += self._versions_sends(r, dl, now, first)
            out.append(Send(r, ch))
        return out

    def _versions_sends(self, r: int, dl: OpenDownlink, now: float, first: bool) -> list:
        """
        Return the sends of a downlink's RowVersions that its ``VersionsLink`` lets go now.

        A copy, or, for versions past ``VERSIONS_PART_BYTES``, the parts the robot lacks
        that keep its writer within the bound (more go as it acknowledges them, ``_on_ack``).
        """
        link = self.version_links[r]
        if dl.parts:
            return [Send(r, p) for p in link.send_parts(dl.parts, now, first)]
        return [Send(r, dl.versions)] if link.send(dl.versions, now, first) else []

    def _downlink_deadline(self, r, k_min, order, now) -> float:
        if self.policy.balance != 'deadline' or self.policy.whole_model:
            return now
        mand = self._mandatory_vector(k_min, own=r)
        thr = self._paced(r, self.thr_down)
        floor = self.policy.floor_s(self.compute_est[r].value, self.rtt_down[r].value)
        return now + max(mta_time(mand, thr), floor)

    def _push_deadline(self, r: int, c: int) -> float:
        """
        MTA time for worker r's next push, the one of clock c + 1 (negative: send everything).

        A worker's last push goes whole: rows it withholds then would never be sent, and the
        fleet's final model would miss up to S iterations of its low-priority rows.
        """
        pol = self.policy
        if self.max_iterations is not None and c + 1 >= self.max_iterations:
            return -1.0
        if pol.whole_model or pol.balance == 'none':
            return 0.0 if not pol.whole_model else -1.0
        if pol.balance == 'budget':
            return 0.0
        k_min = mandatory_rows(self.layout.n_rows, pol.mta, 0)
        return mta_time(self._mandatory_vector(k_min), self._paced(r, self.thr_up))

    def _mandatory_vector(self, k_min: int, own: int | None = None) -> torch.Tensor:
        """
        Return the mandatory bytes per worker that the MTA time is computed from.

        ``k_min`` rows each, less, for a robot with straggler slack, the rows its smaller
        MTA(S + slack) spares (the MTA time, which the others fill with optional rows, shrinks
        with it). ``own``: the worker whose ``k_min`` this is, already counted with its slack.
        """
        rows = torch.full((self.n,), float(k_min), dtype=torch.float64)
        if self.slack is not None and self.slack.granted:
            n_rows, pol = self.layout.n_rows, self.policy
            base = mandatory_rows(n_rows, pol.mta, 0)
            for s, e in enumerate(self.slack.slack.tolist()):     # O(N), not O(rows)
                if e and s != own:
                    rows[s] -= base - mandatory_rows(n_rows, pol.mta_for(e), 0)
        return rows.clamp_(min=0) * (self.total_row_bytes / max(self.layout.n_rows, 1))

    def _paced(self, r: int, estimators) -> torch.Tensor:
        """
        Throughputs that set the MTA time for worker r (0 = ignored).

        With outage-aware RSP a worker suspended for its link no longer sets the pace of the
        others (it does its own).
        """
        thr = torch.tensor([e.value_bps for e in estimators], dtype=torch.float64)
        if self.policy.outage_aware and not bool(self.active.all()):
            keep = self.active.clone()
            keep[r] = True
            thr[~keep] = 0.0
        return thr

    def _budget_rows(self, estimators, r: int) -> int:
        vals = [e.value_bps for e in estimators if e.value_bps > 0]
        if not vals or estimators[r].value_bps <= 0:
            return 0
        q = estimators[r].value_bps / min(vals)
        return row_budget(q, self.policy.mta, self.layout.n_rows)

    def _on_ack(self, ack: TransferAck, now: float) -> list:
        r = ack.sender
        if not 0 <= r < self.n or ack.receiver != SERVER:
            raise MessageError(f'ack from unknown worker {r}')
        # any ack: what we write reaches r; a final one: r held that transfer's versions
        self.version_links[r].on_ack(ack, now)          # (and all written before them)
        dl = self.downlinks[r]
        if dl is None or ack.transfer_id != dl.transfer.transfer_id:
            # late or duplicate, or of a downlink dropped uncommitted whose chunks stayed in
            # the writer ahead of the open one: it frees the writer and says r is alive
            if self.peers[r].on_ack(ack, now) and dl is not None:
                return self._sends(r, dl, dl.transfer.pump(now), now)
            return []
        if r in self._final_heard:
            self._final_heard[r] = now                 # its final model goes on arriving
        if not ack.final:
            if ack.seq < 0 and dl.parts:
                # a part of its versions arrived: the next ones that fit go
                return self._versions_sends(r, dl, now, False)
            return self._sends(r, dl, dl.transfer.on_ack(ack, now), now)
        delivered = dl.transfer.on_final(ack, now)
        if delivered is None:
            return []
        self._commit_downlink(r, dl, delivered)
        if dl.transfer.flags & FLAG_LATE:
            return self._late_pull_done(r, dl, delivered, now)
        nbytes, secs = dl.transfer.throughput_sample()
        self.bytes_down += dl.transfer.bytes_sent
        if nbytes:
            self.thr_down[r].update(nbytes, secs)
        rtt = dl.transfer.round_trip_sample()
        if rtt is not None:
            self.rtt_down[r].update(rtt)
        self.downlinks[r] = None
        c = dl.transfer.clock
        if dl.snapshot and self.unsynced[r] is not None:
            return [Log('snapshot_partial', float(delivered.size), r)] + \
                self._start_snapshot(r, c, now)
        if dl.snapshot and r in self._owed_final:
            return self._final_sent(r, self.snap_layout.n_rows)
        if (self.slots is None and not dl.transfer.flags & FLAG_FREE
                and not self._worker_rsp_ok(r, c, dl.active, dl.bounds)):
            # Mandatory rows were lost on the way: the worker waits for them. Whether it
            # checks is what this pull told it (FLAG_FREE), not whether it runs free now: a
            # robot let go while its pull was under way checks that pull, and without a
            # repair it waited for ever (free_stragglers under message loss, 3 robots).
            self.repairs += 1
            return [Log('downlink_repair', float(delivered.size), r, {'clock': c})] + \
                self._start_downlink(r, c, now)
        self._pull_done_at[r] = now
        out = [Log('pull_done', float(delivered.size), r,
                   {'bytes': nbytes, 'seconds': secs, 'rows_total': self.layout.n_rows,
                    'duration': now - dl.transfer.start_time, 'round_trip': rtt})]
        if self.slots is not None:
            self.slots.release(r, 'pull')
            return out + self._dispatch_slots(now)
        out += self._try_serve(r, now)
        if self.policy.late_pulls and self.downlinks[r] is None:
            self._late_pull_until[r] = now + self.compute_est[r].value
            self._late_pull_clock[r] = c
            if not (self.policy.late_rows and self._withholds(r)):
                out += self._start_late_pull(r, c, now)
            # else its late push goes first (one transfer at a time on a half-duplex
            # station, and that one frees the others); the late pull follows it
        return out

    def _withholds(self, r: int) -> bool:
        """Whether worker r's last push withheld rows (its late push will send them)."""
        return bool((self.versions.v[:, r] < self.clock[r]).any())

    def _late_pull_done(self, r: int, dl: OpenDownlink, delivered: np.ndarray,
                        now: float) -> list:
        """
        Finish a late pull: committed like a pull, but not one (see ``_start_late_pull``).

        Its throughput is not sampled: a late pull is often a chunk or two, mostly round
        trip, as a late push is.
        """
        self.bytes_down += dl.transfer.bytes_sent
        self.downlinks[r] = None
        self.late_pulls += 1
        self.late_pull_rows += int(delivered.size)
        out = [Log('pull_done', float(delivered.size), r,
                   {'bytes': dl.transfer.bytes_sent, 'rows_total': self.layout.n_rows,
                    'duration': now - dl.transfer.start_time, 'late': True})]
        if r in self.pending:
            return out + self._try_serve(r, now)    # it pushed meanwhile: its pull is due
        return out + self._start_late_pull(r, dl.transfer.clock, now)

    def _worker_rsp_ok(self, r: int, c: int, active: torch.Tensor,
                       bounds: torch.Tensor | None = None) -> bool:
        """Check the worker-side RSP on what r holds (``sent[r]`` = its ``vloc``)."""
        if bounds is None and bool(active.all()):
            return bool(self.delivered.dl_min[r].min() >= c - self.policy.staleness)
        # (per column: the bounds its RowVersions carried)
        return columns_satisfy(self.delivered.sent(r).amin(dim=0), c,
                               self.policy.staleness if bounds is None else bounds, active)

    def _commit_downlink(self, r: int, dl: OpenDownlink, delivered: np.ndarray) -> None:
        """Delivered rows: G[r] + E[r] -= C(p), i.e. mirror[r] -= C(p); sent[r] = versions."""
        if delivered.size == 0:
            if not dl.snapshot:
                self.delivered.unpin(('dl', r))
            return
        layout = self.snap_layout if dl.snapshot else self.layout
        mask = torch.zeros(layout.n_rows, dtype=torch.bool)
        mask[torch.from_numpy(delivered)] = True
        full = delivered.size == layout.n_rows
        if dl.snapshot:
            # the worker's rows are now exactly the values sent
            if full:
                self.mirror[r].copy_(dl.values)
            else:
                layout.where_rows(mask, dl.values, self.mirror[r], out=self.mirror[r])
            self.unsynced[r] &= ~mask
            if not bool(self.unsynced[r].any()):
                self.unsynced[r] = None
                every = torch.ones(self.layout.n_rows, dtype=torch.bool)
                self.delivered.commit(r, every, ('snap', r), self.snap_event[r], dl.active,
                                      v_snap=dl.v_snap)
                self.delivered.unpin(('snap', r))
                self.snap_v[r] = None
            return
        else:
            rows, q = decode_delivered(self.codec, layout, dl.rowbytes, dl.scales, mask,
                                       self._scratch, per_row=dl.per_row)
            with rows_written(self._encodings, (self.mirror, self.w_srv),
                              lambda i: mask if i == r else None):
                sub_rows_(layout, self.mirror[r], rows, q)   # the values the worker subtracted
        # Suspended workers' columns travel as -1: the worker keeps its old versions there.
        self.delivered.commit(r, mask, ('dl', r), dl.event, dl.active)
        self.delivered.unpin(('dl', r))

    def _v_snap(self, r: int, dl: OpenDownlink) -> torch.Tensor:
        """Return the version table a downlink carries (``[M, N]``)."""
        if dl.v_snap is not None:
            return dl.v_snap
        return self.delivered.pinned_snapshot(('dl', r), dl.event)

    def _stall_diagnostic(self, r: int, now: float) -> Log:
        c = self.pending.get(r, self.clock[r])
        pairs = self.versions.violating_pairs(c, self._bounds(r), self.active)
        waiting_for = sorted(set(pairs[:, 1].tolist()))
        return Log('stall_diagnostic', now - self.stall_since[r], r, {
            'clock': c, 'violating_rows': int(pairs[:, 0].unique().numel()),
            'waiting_for_workers': waiting_for,
            'worker_clocks': list(self.clock),
            'active_workers': self.active_workers(), 'min_workers': self.min_workers,
            'hint': 'a worker is far behind or its link is down; check its LinkStats, or '
                    'raise the staleness threshold'})


def encode_versions(transfer_id: int, receiver: int, v: torch.Tensor | None, rows: np.ndarray,
                    active: torch.Tensor | None = None,
                    v_rows: torch.Tensor | None = None) -> RowVersions:
    """
    Run-length encode the version vectors of ascending ``rows`` (vectorised).

    Workers not in ``active`` (suspended from the staleness rules) get version -1 in every
    run: the worker's RSP check ignores them, and keeps its old versions for them. Without
    rows, one run for row 0 (not delivered, so not applied) still carries that membership.

    A run breaks only where the version vector changes, and spans the row ids in between that
    the transfer does not carry: the worker applies versions to delivered rows only, so those
    are ignored. ``v_rows``: ``v[rows]`` already gathered (then ``v`` may be None). A partial
    transfer skips rows all over the model; breaking runs at every gap
    cost a straggler's pull ~140 runs (3.5 kB, 3 % of the model) where ~25 suffice.
    """
    n = (v if v_rows is None else v_rows).shape[1]
    if rows.size == 0:
        if active is None or bool(active.all()):
            return RowVersions(transfer_id=transfer_id, receiver=receiver, n_workers=n)
        rows = np.zeros(1, dtype=np.int64)
    vv = (v[torch.from_numpy(rows)] if v_rows is None else v_rows).numpy()
    if active is not None and not bool(active.all()):
        vv = vv.copy()
        vv[:, ~active.numpy()] = -1
    new_run = np.ones(rows.size, dtype=bool)
    new_run[1:] = np.any(vv[1:] != vv[:-1], axis=1)
    starts = np.flatnonzero(new_run)
    ends = np.append(rows[starts[1:]], rows[-1] + 1)
    return RowVersions(transfer_id=transfer_id, receiver=receiver, n_workers=n,
                       run_starts=rows[starts].astype(np.uint32),
                       run_lengths=(ends - rows[starts]).astype(np.uint32),
                       versions=vv[starts].reshape(-1).astype(np.int32))
