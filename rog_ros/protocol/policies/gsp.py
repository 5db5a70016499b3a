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
GSP (grouping synchronous parallel) and GDS (grouping dynamic sparsification) as engines.

specs/adacomp_gsp.md, paper 002 (Gui et al.). Two-level parameter server, all of it on the
server host (``GspServer``, one engine holding the group servers and the global server, whose
mutual messages are local calls); workers are ``GspNode`` engines.

* **Grouping.** Unless an assignment is given, the server profiles: for ``profile_iterations``
  iterations every node trains asynchronously (each gradient applied at the global server) while
  the server measures each node's iteration time (interval between its pushes: what the server
  can observe, computation plus communication). Then it groups the nodes by
  :func:`rog_ros.core.grouping.density_peaks` on times relative to the fastest node.
* **Group server p** (Algorithm 2 with G1-G5 resolved): on a gradient, optionally apply it to
  the group model (``group_local_apply``, Algorithm 3 line 12; default True), add it to
  ``phi_p``, and once ``k_p`` gradients are in (G1 fixed; ``counter='literal'`` keeps the
  paper's k_p + 1) send ``phi_p`` (sum, G3; or mean) to the global server, whose momentum-SGD
  step (G5) is answered with the global model, which becomes the group model. A node's next
  model ("Ready") is held while ``clock_n - min clock of its group > ssp_threshold`` (G4).
* **GDS** (Algorithm 3, D1-D10): nodes upload the top ``dens_p`` of a local residual; a
  controller at the global server (:mod:`rog_ros.core.gds`) updates, at every epoch (G6:
  samples merged / epoch size), an EMA of each group's iteration time and sets next epoch's
  densities by rule A (default: ``min(s * t_slowest / t_p, s_max)``), B (sparsity arithmetic)
  or the literal formula, with the warm-up schedule 0.25, 0.0625, 0.015625 (max 0.35, 0.1225,
  0.042875), then 0.004 (0.015).

Baselines on the same engine: BSP = one group, ``ssp_threshold`` 0, mean, no local apply; SSP =
one group forwarding every gradient; ASP = every node its own group (see :func:`baseline`).

Messages: pushes are ``RowChunk`` (KIND_GRAD, ``clock`` = the node's iteration, dense fp32 or
codec TOPK_CODEC_ID); "Ready" is a ``RowChunk`` (KIND_UPDATE, dense group model); the end is a
``Schedule`` with ``stop``. The density a GDS node must use travels in :class:`UploadDensity`,
a message the wire format (msg/) does not have yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math

import numpy as np
from rog_ros.core.compress import topk
from rog_ros.core.gds import (
    GDS_RULES, GdsController, group_densities, WARMUP_BASE, warmup_densities)
from rog_ros.core.grouping import density_peaks
from rog_ros.protocol.actions import Log, Send
from rog_ros.protocol.messages import (
    FLAG_END, KIND_GRAD, KIND_UPDATE, MessageError, RowChunk, Schedule, SERVER)
from rog_ros.protocol.policies.async_ps import PushServer, PushWorker
import torch


@dataclass(frozen=True)
class GspConfig:
    """Knobs of GSP / GSP+GDS (defaults: spec 002 recommendations)."""

    assignment: tuple | None = None   # group id per node; None: profile, then density peaks
    n_groups: int | None = None       # requested group count (None: Algorithm 1's P)
    dis_thr: float = 0.2              # clustering radius, in iteration times relative to the
    #                                   fastest node (not given by the paper)
    profile_iterations: int = 3       # measured iteration intervals per node before grouping
    ssp_threshold: int = 3            # SSP inside a group (paper's SSP baseline value)
    group_local_apply: bool = True    # G2: group server applies each gradient (Alg. 3 l. 12)
    aggregate: str = 'sum'            # G3: 'sum' (literal) or 'mean' of the k_p gradients
    counter: str = 'fixed'            # G1: 'fixed' sends every k_p; 'literal' every k_p + 1
    forward_every: int | None = None  # send phi_p every this many gradients (None: k_p)
    gds: bool = False                 # GSP+GDS: sparse residual uploads
    gds_rule: str = 'A'               # D2: 'A' (default), 'B', 'literal'
    beta: float = 0.9                 # EMA factor of group times (not given; placeholder)
    exact_final_density: bool = False  # 0.00390625/0.01500625 instead of 0.004/0.015 (D8)
    gds_scope: str = 'global'         # D6: 'global' top-m (Algorithm 3) or 'per_tensor'
    gds_sampled: bool = False         # D5: threshold from a sample instead of exact top-m
    sample_ratio: float = 0.01        # D5: the paper's 1 %
    epoch_samples: int | None = None  # G6: samples per epoch (None: the caller's data size)

    def __post_init__(self):
        if self.gds_rule not in GDS_RULES:
            raise ValueError(f'gds_rule must be one of {GDS_RULES}, got {self.gds_rule!r}')
        if self.aggregate not in ('sum', 'mean'):
            raise ValueError("aggregate must be 'sum' or 'mean'")
        if self.counter not in ('fixed', 'literal'):
            raise ValueError("counter must be 'fixed' or 'literal'")
        if self.ssp_threshold < 0 or self.profile_iterations < 1:
            raise ValueError('ssp_threshold must be >= 0 and profile_iterations >= 1')
        if not 0.0 <= self.beta < 1.0:
            raise ValueError(f'beta must be in [0, 1), got {self.beta}')
        if not self.dis_thr > 0:
            raise ValueError('dis_thr must be positive')
        if self.forward_every is not None and self.forward_every < 1:
            raise ValueError('forward_every must be >= 1')
        if self.gds_scope not in topk.SCOPES:
            raise ValueError(f'gds_scope must be one of {topk.SCOPES}')


def baseline(name: str, n: int) -> GspConfig:
    """Return a dense baseline on the GSP engine: 'bsp', 'ssp' (threshold 3) or 'asp'."""
    if name == 'bsp':
        return GspConfig(assignment=(0,) * n, ssp_threshold=0, aggregate='mean',
                         group_local_apply=False)
    if name == 'ssp':
        return GspConfig(assignment=(0,) * n, ssp_threshold=3, forward_every=1,
                         group_local_apply=False)
    if name == 'asp':
        return GspConfig(assignment=tuple(range(n)), forward_every=1, group_local_apply=False)
    raise ValueError(f'unknown GSP baseline {name!r}')


@dataclass
class UploadDensity:
    """Group server -> node: the GDS upload density from now on (not in msg/ yet)."""

    worker: int
    epoch: int
    density: float

    def wire_size(self) -> int:
        return 64 + 16


@dataclass
class _Group:
    members: list
    omega: torch.Tensor
    phi: torch.Tensor
    counter: int = 0
    clocks: dict = field(default_factory=dict)     # node -> pushes since grouping
    held: dict = field(default_factory=dict)       # node -> time its Ready was held
    forwards: int = 0              # group -> global messages during training
    flushes: int = 0               # partial sums sent when training ended
    pushes: int = 0
    epoch_time: float = 0.0
    epoch_count: int = 0


class GspServer(PushServer):
    """
    The group servers and the global server of GSP (one engine on the server host).

    Parameters
    ----------
    w0 : Tensor
        Flat initial model.
    n_nodes : int
        N.
    config : GspConfig
        Grouping, SSP, aggregation and GDS options.
    lr, momentum : float
        Global server's momentum SGD (G5); group servers apply plain SGD with the same lr.
    max_pushes : int
        Training ends once the nodes have pushed this many gradients in all.
    batch_size, epoch_samples : int
        Samples per gradient and per epoch (G6), for the GDS controller.

    """

    CLOCK_REFUSED = 'node {w} pushes iteration {clock}, expected {expected}'

    def __init__(self, w0: torch.Tensor, n_nodes: int, config: GspConfig, lr: float,
                 momentum: float, max_pushes: int, batch_size: int = 1,
                 epoch_samples: int = 1):
        if n_nodes < 1 or max_pushes < 1:
            raise ValueError('need at least one node and one push')
        if not (math.isfinite(lr) and lr > 0) or not 0.0 <= momentum < 1.0:
            raise ValueError('lr must be positive and momentum in [0, 1)')
        if config.assignment is not None and len(config.assignment) != n_nodes:
            raise ValueError(f'assignment has {len(config.assignment)} entries for '
                             f'{n_nodes} nodes')
        self.cfg = config
        self.n = int(n_nodes)
        self.lr, self.momentum = float(lr), float(momentum)
        self.omega = w0.detach().to(torch.float32).clone()
        self.n_params = self.omega.numel()
        self.buf = torch.zeros_like(self.omega) if momentum > 0 else None
        self.max_pushes = int(max_pushes)
        self.batch_size = int(batch_size)
        self.epoch_samples = int(config.epoch_samples or epoch_samples)
        self.clock = [0] * self.n                     # pushes per node
        self.last_push = [None] * self.n
        self.intervals = [[] for _ in range(self.n)]
        self.groups: list = []
        self.group_of = [-1] * self.n
        self.grouping = None
        self.controller = None
        self.node_density = [None] * self.n           # density last told to each node
        self.total_pushes = 0
        self.samples_merged = 0
        self.global_steps = 0
        self.finished = False
        self.diverged = False          # the global model became non-finite: training stops
        self.stopped = [False] * self.n
        self._init_runs(self.n)
        # metrics
        self.rejects = 0
        self.dense_bytes = 0           # 4 |g| per upload
        self.upload_bytes = 0          # payload + C_0 per upload
        self.steady_dense = 0          # the same after the warm-up epochs
        self.steady_upload = 0
        self.stall_time = 0.0
        if config.assignment is not None:
            self._form_groups(list(config.assignment), now=0.0)

    # ------------------------------------------------------------------ engine API
    def model(self) -> torch.Tensor:
        """Return omega, the global server's parameters (a view)."""
        return self.omega

    @property
    def epoch(self) -> int:
        return self.samples_merged // max(self.epoch_samples, 1)

    # ------------------------------------------------------------------ checkpoints
    _COUNTERS = ('total_pushes', 'samples_merged', 'global_steps', 'rejects', 'dense_bytes',
                 'upload_bytes', 'steady_dense', 'steady_upload', 'stall_time', 'resent')
    """The counts a checkpoint keeps besides models and clocks (``stats`` and G6 read them)."""
    _GROUP_COUNTS = ('counter', 'forwards', 'flushes', 'pushes', 'epoch_time', 'epoch_count')

    def state_dict(self, copy: bool = True) -> dict:
        """
        Return what a restarted server needs to go on as this one (a node's checkpoint).

        omega and its momentum buffer, each node's push count (a push is applied only at the
        iteration its node is at: one applied before the checkpoint and sent again after a
        restart is never applied twice), the profiled intervals, the groups (their models,
        partial sums, SSP clocks and the nodes held), the runs taken and the figures of
        ``stats``. ``copy=False``: the engine's own tensors, for a caller that serialises
        them at once. GSP+GDS (its controller's state) is not kept: ValueError.
        """
        if self.cfg.gds:
            raise ValueError('GSP+GDS keeps no durable state (its density controller)')
        take = (lambda t: t.clone()) if copy else (lambda t: t)
        groups = [dict({k: getattr(g, k) for k in self._GROUP_COUNTS},
                       members=list(g.members), omega=take(g.omega), phi=take(g.phi),
                       clocks=[[int(m), int(c)] for m, c in g.clocks.items()],
                       held=[[int(m), float(t)] for m, t in g.held.items()])
                  for g in self.groups]
        sd = {'n': self.n, 'n_params': self.n_params, 'omega': take(self.omega),
              'clock': list(self.clock), 'intervals': [list(iv) for iv in self.intervals],
              'groups': groups, 'group_of': list(self.group_of),
              'stopped': list(self.stopped), 'finished': bool(self.finished),
              'diverged': bool(self.diverged), 'runs': self._runs_state(),
              'counters': {k: getattr(self, k) for k in self._COUNTERS}}
        if self.buf is not None:
            sd['buf'] = take(self.buf)
        return sd

    def load_state_dict(self, sd: dict) -> None:
        """
        Go on from ``state_dict``'s state (ValueError, nothing changed, if of another fleet).

        The pushes applied after the checkpoint are lost; each node's first push after it is
        admitted as a new run's (``PushServer._admit``): applied at the iteration the node
        is at here, else dropped and answered with its group's model (a node held at the
        checkpoint stays held until its group lets it go). The time since each node's last
        push is no iteration time: its next interval starts afresh.
        """
        system = self._system_of(sd)
        if system != 'gsp' or (int(sd['n']), int(sd['n_params'])) != (self.n, self.n_params):
            raise ValueError(f"checkpoint of {system} with {sd.get('n', '?')} nodes and "
                             f"{sd.get('n_params', '?')} parameters; this server runs gsp "
                             f'with {self.n} and {self.n_params}')
        if ('buf' in sd) != (self.buf is not None) or len(sd['clock']) != self.n:
            raise ValueError('checkpoint of another momentum setting or fleet size')
        self._load_runs_state(sd['runs'])
        self.omega.copy_(sd['omega'])
        if self.buf is not None:
            self.buf.copy_(sd['buf'])
        self.clock = [int(c) for c in sd['clock']]
        self.last_push = [None] * self.n
        self.intervals = [[float(t) for t in iv] for iv in sd['intervals']]
        self.groups = []
        for g in sd['groups']:
            grp = _Group(members=[int(m) for m in g['members']], omega=g['omega'].clone(),
                         phi=g['phi'].clone(), clocks={int(m): int(c) for m, c in g['clocks']},
                         held={int(m): float(t) for m, t in g['held']})
            for k in self._GROUP_COUNTS:
                setattr(grp, k, type(getattr(grp, k))(g[k]))
            self.groups.append(grp)
        self.group_of = [int(p) for p in sd['group_of']]
        self.stopped = [bool(b) for b in sd['stopped']]
        self.finished = bool(sd['finished'])
        self.diverged = bool(sd['diverged'])
        for k in self._COUNTERS:
            setattr(self, k, type(getattr(self, k))(sd['counters'][k]))

    def replay_state(self) -> dict:
        """
        Return the runs' replay flags and each node's last push time (``PushServer``'s).

        Why: a push replayed from the journal profiles its interval since the node's last
        push, as the push did the first time (``load_state_dict`` forgets those times).
        """
        return dict(super().replay_state(),
                    last_push=[None if t is None else float(t) for t in self.last_push])

    def begin_replay(self, state: dict) -> None:
        """Take ``replay_state``'s values back before a journal replay (why: an exact one)."""
        last = [None if t is None else float(t) for t in state['last_push']]
        if len(last) != self.n:
            raise ValueError(f'replay state of {len(last)} nodes, this server has {self.n}')
        super().begin_replay(state)
        self.last_push = last

    def end_replay(self) -> None:
        """
        End a journal replay as a restore ends: last push times forgotten.

        Why: the restored server's clock is another process's; a push's interval since a
        time of the crashed one is no iteration time.
        """
        super().end_replay()
        self.last_push = [None] * self.n

    # ------------------------------------------------------------------ grouping
    def _form_groups(self, labels, now: float) -> None:
        ids = sorted(set(labels))
        remap = {g: k for k, g in enumerate(ids)}
        self.groups = []
        for g in ids:
            members = [n for n in range(self.n) if labels[n] == g]
            self.groups.append(_Group(members=members, omega=self.omega.clone(),
                                      phi=torch.zeros_like(self.omega),
                                      clocks={m: 0 for m in members}))
        self.group_of = [remap[g] for g in labels]
        if self.cfg.gds:
            self.controller = GdsController(len(self.groups), self.cfg.gds_rule, self.cfg.beta,
                                            self.cfg.exact_final_density)
            # epochs spent profiling count: the warm-up schedule follows the global epoch
            self.controller.epoch = self.epoch
            self.controller.densities = [warmup_densities(
                self.epoch, self.cfg.exact_final_density)[0]] * len(self.groups)

    def _maybe_group(self, now: float) -> list:
        need = self.cfg.profile_iterations
        if any(len(iv) < need for iv in self.intervals):
            return []
        times = np.array([np.mean(iv[:need]) for iv in self.intervals])
        rel = times / times.min()
        self.grouping = density_peaks(rel, self.cfg.dis_thr, self.cfg.n_groups)
        self._form_groups(self.grouping.labels.tolist(), now)
        return [Log('grouped', float(len(self.groups)), -1,
                    {'groups': [g.members for g in self.groups],
                     'relative_times': rel.round(3).tolist()})]

    # ------------------------------------------------------------------ pushes
    def _decode(self, msg: RowChunk):
        """Return a push's dense gradient: a sparse top-k one's values put in zeros, or all."""
        if msg.codec == topk.TOPK_CODEC_ID:
            idx, vals = topk.decode(msg.payload, self.n_params)
            g = torch.zeros(self.n_params, dtype=torch.float32)
            g[idx] = vals
            return g
        if msg.codec == 0:
            return topk.decode_dense(msg.payload, self.n_params)
        raise MessageError(f'unknown codec {msg.codec}')

    def _on_push(self, msg: RowChunk, now: float) -> list:
        n = msg.sender
        if not 0 <= n < self.n or msg.receiver != SERVER:
            raise MessageError(f'push from unknown node {n}')
        g, dropped = self._admit(n, msg, self.clock[n])
        wire = msg.wire_size()
        if dropped:
            return self._rejoin(n, int(msg.clock), wire, now)
        out = [Log('push_done', 1.0, n, {'bytes': wire})]
        if self.finished:
            self.stopped[n] = True
            return out + [self._stop(n)]
        self.clock[n] += 1
        self.total_pushes += 1
        dense = 4 * self.n_params
        upload = len(msg.payload) + 8 * len(msg.tensor_ids)     # C_0: the shape header
        self.dense_bytes += dense
        self.upload_bytes += upload
        if self.epoch >= len(WARMUP_BASE):
            self.steady_dense += dense
            self.steady_upload += upload
        if self.last_push[n] is not None:
            self.intervals[n].append(now - self.last_push[n])
        self.last_push[n] = now
        if not self.groups:                  # profiling: asynchronous, global step per push
            self._global_step(g, 1)
            out += self._maybe_group(now)
            out += self._finish_if_done(now)
            if self.finished:
                self.stopped[n] = True
                return out + [self._stop(n)]
            return out + self._ready(n)
        p = self.group_of[n]
        grp = self.groups[p]
        if self.intervals[n]:
            grp.epoch_time += self.intervals[n][-1]
            grp.epoch_count += 1
        grp.pushes += 1
        grp.clocks[n] += 1
        if self.cfg.group_local_apply:
            grp.omega.sub_(g, alpha=self.lr)
        grp.phi += g
        grp.counter += 1
        k = self.cfg.forward_every or len(grp.members)
        if self.cfg.counter == 'literal':
            k += 1
        if grp.counter >= k:
            out += self._forward(p)
        out += self._finish_if_done(now)
        if self.finished:
            self.stopped[n] = True
            return out + [self._stop(n)]
        grp.held[n] = now
        return out + self._release(p, now)

    def _rejoin(self, n: int, clock: int, wire: int, now: float) -> list:
        """
        Drop the push of a run of node ``n`` new to us and send it its group's model.

        A restarted node's first push (iteration 0, computed at its starting model), or a
        node's push to a restarted server. GSP has no staleness weight to scale such a
        gradient by (a group sums its members' gradients at full step): applied, a gradient
        of a model long gone would land at full strength. Its iteration count stays: the
        node goes on at ``clock[n]`` with the model Ready gives it, when its group's SSP
        bound lets it (a node held before its restart stays held until the group catches
        up). The time since its last push is no iteration time: its next interval starts
        afresh. Counted in ``rejoins`` and the ``worker_restart`` log.
        """
        out = [self._rejoin_log(n, clock, self.clock[n], wire)]
        self.last_push[n] = None
        self.node_density[n] = None          # a GDS density is told again to the new run
        if self.finished:
            self.stopped[n] = True
            return out + [self._stop(n)]
        if self.groups and n in self.groups[self.group_of[n]].held:
            out[0].info['held'] = True         # (the log says the model follows later)
            return out
        return out + self._ready(n)

    def _global_step(self, phi: torch.Tensor, k: int) -> None:
        step = phi / k if (self.cfg.aggregate == 'mean' and k > 1) else phi
        if self.buf is not None:
            self.buf.mul_(self.momentum).add_(step)
            step = self.buf
        self.omega.sub_(step, alpha=self.lr)
        if not bool(torch.isfinite(self.omega).all()):
            self.diverged = True
        epoch_before = self.epoch
        self.samples_merged += k * self.batch_size
        self.global_steps += 1
        if self.controller is not None and self.epoch > epoch_before:
            for _ in range(self.epoch - epoch_before):
                times = [grp.epoch_time / grp.epoch_count if grp.epoch_count else None
                         for grp in self.groups]
                self.controller.end_epoch(times)
                for grp in self.groups:
                    grp.epoch_time, grp.epoch_count = 0.0, 0

    def _forward(self, p: int, final: bool = False) -> list:
        grp = self.groups[p]
        if grp.counter == 0:
            return []
        self._global_step(grp.phi, grp.counter)
        grp.phi.zero_()
        grp.counter = 0
        if final:
            grp.flushes += 1
        else:
            grp.forwards += 1
        grp.omega.copy_(self.omega)          # the global server's reply becomes omega_p
        return []

    def _release(self, p: int, now: float) -> list:
        grp = self.groups[p]
        low = min(grp.clocks.values())
        out = []
        for m in sorted(grp.held):
            if grp.clocks[m] - low <= self.cfg.ssp_threshold:
                since = grp.held.pop(m)
                if now > since:
                    self.stall_time += now - since
                    out.append(Log('stall_s', now - since, m))
                out += self._ready(m)
            elif grp.held[m] == now:
                out.append(Log('trigger', 1.0, m, {'clock': grp.clocks[m]}))
        return out

    def _ready(self, n: int) -> list:
        out = []
        if self.cfg.gds:
            dens = (self.controller.densities[self.group_of[n]] if self.controller is not None
                    else WARMUP_BASE[0])
            if dens != self.node_density[n]:
                self.node_density[n] = dens
                out.append(Send(n, UploadDensity(worker=n, epoch=self.epoch, density=dens)))
        model = self.groups[self.group_of[n]].omega if self.groups else self.omega
        out.append(Send(n, RowChunk(transfer_id=self.clock[n], seq=0, sender=SERVER,
                                    receiver=n, kind=KIND_UPDATE, clock=self.clock[n],
                                    flags=FLAG_END, codec=0,
                                    payload=topk.encode_dense(model))))
        return out

    def _stop(self, n: int) -> Send:
        return Send(n, Schedule(worker=n, clock=self.clock[n], push_deadline_s=-1.0, stop=True))

    def _finish_if_done(self, now: float) -> list:
        if self.finished or (self.total_pushes < self.max_pushes and not self.diverged):
            return []
        self.finished = True
        if not self.diverged:
            for p in range(len(self.groups)):
                self._forward(p, final=True)     # partial sums are not lost
        out = [Log('diverged' if self.diverged else 'training_done', float(self.total_pushes))]
        for grp in self.groups:
            for m in sorted(grp.held):
                grp.held.pop(m)
                self.stopped[m] = True
                out.append(self._stop(m))
        return out

    # ------------------------------------------------------------------ metrics
    def stats(self) -> dict:
        """Return grouping, communication and compression figures for the run summary."""
        per_node = [[self.clock[m] for m in g.members] for g in self.groups]
        means = [float(np.mean(c)) for c in per_node if c]
        out = {
            'groups': [g.members for g in self.groups],
            'group_mean_iterations': means,
            'group_gap': (max(means) - min(means)) if means else 0.0,
            'group_forwards': [g.forwards for g in self.groups],
            'group_pushes': [g.pushes for g in self.groups],
            'global_steps': self.global_steps,
            'epochs': self.epoch,
            'gcr': self.dense_bytes / self.upload_bytes if self.upload_bytes else None,
            'gcr_after_warmup': (self.steady_dense / self.steady_upload
                                 if self.steady_upload else None),
            'upload_bytes_per_push': self.upload_bytes / max(self.total_pushes, 1),
            'server_rejects': self.rejects,
            'diverged': self.diverged,
        }
        if self.controller is not None:
            out['final_densities'] = list(self.controller.densities)
        return out


class GspNode(PushWorker):
    """
    A GSP node: compute at the model of its group, push (dense, or GDS-sparse), wait for Ready.

    Parameters
    ----------
    rank : int
        This node.
    w0 : Tensor
        Flat initial model; ``self.w`` is the model held, updated in place.
    sizes : list of int
        Tensor sizes (per-tensor GDS scope).
    config : GspConfig
        ``gds``, ``gds_scope``, ``gds_sampled``, ``sample_ratio`` matter here.
    seed : int
        Seed of the threshold sampling.

    """

    def __init__(self, rank: int, w0: torch.Tensor, sizes, config: GspConfig, seed: int = 0):
        self.rank = int(rank)
        self.cfg = config
        self.w = w0.detach().to(torch.float32).clone()
        self.n_params = self.w.numel()
        self.sizes = [int(s) for s in sizes]
        self.n_tensors = len(self.sizes)
        self.clock = 0
        self.density = WARMUP_BASE[0]
        self.residual = (topk.ResidualTopK(self.n_params, self.sizes, config.gds_scope,
                                           config.gds_sampled, config.sample_ratio,
                                           seed=seed * 7919 + rank)
                         if config.gds else None)
        self.stopped = False
        self.diverged = False
        self._sent_at = 0.0

    def _push(self, g: torch.Tensor, now: float) -> list:
        if self.residual is not None:
            idx, vals = self.residual.step(g, self.density)
            payload, codec = topk.encode(idx, vals), topk.TOPK_CODEC_ID
            tensor_ids = np.arange(self.n_tensors, dtype=np.uint32)   # shape header: C_0
        else:
            payload, codec = topk.encode_dense(g), 0
            tensor_ids = np.zeros(0, dtype=np.uint32)
        self._sent_at = now
        return [Send(SERVER, RowChunk(transfer_id=self.clock + 1, seq=0, sender=self.rank,
                                      receiver=SERVER, kind=KIND_GRAD, clock=self.clock,
                                      flags=FLAG_END, codec=codec, tensor_ids=tensor_ids,
                                      payload=payload))]

    def on_message(self, msg, now: float) -> list:
        if isinstance(msg, UploadDensity) and not self.stopped:
            if not 0.0 < msg.density <= 1.0:
                return [Log('reject', 1.0, self.rank, {'error': 'bad density'})]
            self.density = float(msg.density)
            return []
        return super().on_message(msg, now)

    def _pulled(self, msg: RowChunk) -> int:
        """
        Take the iteration of the model just pulled; return it (the next push carries it).

        Ready carries the server's count of this node's pushes: one more than before in a
        run with no restart, what the server counted for the node when it takes a restarted
        node (or a node of a restarted server) back.
        """
        self.clock = int(msg.clock)
        return self.clock


__all__ = ['GspConfig', 'GspServer', 'GspNode', 'GdsController', 'UploadDensity', 'baseline',
           'group_densities', 'warmup_densities']
