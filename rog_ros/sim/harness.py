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
A deterministic in-memory harness: 1 server + N worker engines, an event queue, no threads.

Messages travel over per-direction FIFO links (``latency + bytes / bandwidth``, serialised, so a
big transfer occupies its link); compute takes a fixed per-worker time. Everything happens in
virtual time, so a run is exactly reproducible and fast. Faults are injected per message with
a ``fault(msg, src, dst, now) -> list of extra delays`` hook: ``[]`` drops the message,
``[0.0]`` delivers it normally, ``[0.0, 0.5]`` delivers it and a duplicate 0.5 s later.

Crashes (issue 9): ``kill(node)`` stops a node (messages to it are lost, its computation and
timers vanish); ``revive(node, engine)`` puts a new engine (a new incarnation, typically
restored from ``saved[node]``, the state it last asked to persist with ``SaveState``) in its
place and starts it; ``at(t, fn)`` runs ``fn()`` at virtual time t (scripted faults).

The trace-driven simulator (``rog sim``) builds on the same loop with real link models; this
harness is what the protocol tests and ``rog sim --toy`` use.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
import heapq
import itertools
import math
from typing import Callable

from rog_ros.protocol.actions import Log, SaveState, Send, StartCompute, Stopped
from rog_ros.protocol.messages import SERVER
import torch

QUIESCE_HORIZON_S = 600.0
"""Virtual time ``Harness.quiesce`` delivers for: every transfer in flight ends within a few
round trips and retransmission timeouts (seconds) once faults are off."""

FaultHook = Callable[[object, int, int, float], list]


@dataclass
class LinkSpec:
    """
    One direction of a link: fixed latency and bandwidth (bits/s), FIFO.

    Any object with ``transmit(start_s, nbytes) -> arrival_s`` (and optionally ``dropped()``)
    can stand in for it, e.g. ``rog_ros.net.links.FluidLink`` following a bandwidth trace. For a
    half-duplex Wi-Fi station pass the ``up`` and ``down`` directions of one
    ``rog_ros.net.links.DuplexLink``; the same ``FluidLink`` as both is one FIFO for both
    directions, where an acknowledgement waits behind everything the other side queued.
    """

    latency_s: float = 0.001
    bandwidth_bps: float = 100e6
    busy_until: float = 0.0

    def transmit(self, start_s: float, nbytes: int) -> float:
        begin = max(start_s, self.busy_until)
        self.busy_until = begin + 8.0 * nbytes / self.bandwidth_bps
        return self.busy_until + self.latency_s


@dataclass
class RunStats:
    """What happened, per worker: compute, stall, iterations; plus the event log."""

    compute_s: list = field(default_factory=list)
    iterations: list = field(default_factory=list)
    logs: list = field(default_factory=list)
    end_time: float = 0.0
    events: int = 0
    error: str | None = None     # why the run ended before every worker finished (or None)


class Harness:
    """
    Drive a ServerEngine and WorkerEngines in virtual time.

    Parameters
    ----------
    server, workers
        Engines (``rog_ros.protocol.ps.ServerEngine``, ``worker.WorkerEngine``).
    grad_fn : callable
        ``grad_fn(rank, w, clock) -> flat gradient`` (layout order) at worker parameters w.
    compute_s : float or list of float
        Virtual seconds one iteration's computation takes on each worker.
    up, down : LinkSpec or list of LinkSpec
        Worker->server and server->worker link of each worker.
    fault : FaultHook, optional
        Message fault injection (see module docstring).

    """

    def __init__(self, server, workers, grad_fn, compute_s=0.1, up=None, down=None,
                 fault: FaultHook | None = None, log_events: bool = False, recorder=None,
                 eval_fn=None, eval_every_s: float | None = None,
                 eval_every_iterations: float | None = None):
        self.server, self.workers = server, list(workers)
        n = len(self.workers)
        self.grad_fn = grad_fn
        self.compute_s = compute_s if isinstance(compute_s, list) else [compute_s] * n
        self.up = up if isinstance(up, list) else [up or LinkSpec() for _ in range(n)]
        self.down = down if isinstance(down, list) else [down or LinkSpec() for _ in range(n)]
        self.recorder, self.eval_fn, self.eval_every_s = recorder, eval_fn, eval_every_s
        self.eval_every_iterations = eval_every_iterations
        self._next_eval_iteration = 0.0
        self.fault = fault
        self.log_events = log_events
        self.now = 0.0
        self._q: list = []
        self._seq = itertools.count()
        self._tick_at: dict[int, float] = {}
        self.stats = RunStats(compute_s=[0.0] * n, iterations=[0] * n)
        self.stopped = [False] * n
        self._started = False
        self.saved: dict = {}          # node -> the state it last asked to persist
        self.dead: set = set()         # killed nodes
        self._gen = [0] * n            # a revived worker ignores its predecessor's compute

    # ------------------------------------------------------------------ plumbing
    def _push(self, t: float, kind: str, *payload) -> None:
        heapq.heappush(self._q, (t, next(self._seq), kind, payload))

    def _engine(self, node: int):
        return self.server if node == SERVER else self.workers[node]

    def _link(self, src: int, dst: int) -> LinkSpec:
        return self.up[src] if dst == SERVER else self.down[dst]

    def _send(self, src: int, dst: int, msg) -> None:
        link = self._link(src, dst)
        arrival = link.transmit(self.now, msg.wire_size())
        if getattr(link, 'loss', 0.0) and link.dropped():
            return
        delays = [0.0] if self.fault is None else self.fault(msg, src, dst, self.now)
        for extra in delays:
            self._push(arrival + extra, 'deliver', src, dst, msg)

    def _with_counts(self, log: Log) -> Log:
        """
        Return a robot's ``stopped_after_fleet`` log with what it computed, its clock and budget.

        Its value is the budget minus its clock, and its clock is not what it computed: a robot
        that catches up after an outage skips to the fleet's clock minus S, so the sentence
        says both (``iterations_per_robot`` of the summary is ``computed``).
        """
        budget = getattr(self.server, 'max_iterations', None)
        if budget is None or not 0 <= log.worker < len(self.stats.iterations):
            return log
        info = dict(log.info, computed=int(self.stats.iterations[log.worker]),
                    budget=int(budget), clock=int(budget - log.value))
        return replace(log, info=info)

    def _handle(self, node: int, actions: list) -> None:
        for a in actions:
            if isinstance(a, SaveState):
                self.saved[node] = copy.deepcopy(self._engine(node).state_dict())
            elif isinstance(a, Send):
                self._send(node, a.dest, a.msg)
            elif isinstance(a, StartCompute):
                t = self.now + a.sleep_s + self.compute_s[node]
                # overlapped: the engine's model may change before t; take the gradient of
                # the model as it is now (a real node computes on it from now on)
                grad = (self.grad_fn(node, self.workers[node].w, a.clock)
                        if a.overlapped else None)
                self._push(t, 'compute', node, a.clock, self._gen[node], grad)
            elif isinstance(a, Log):
                if a.name == 'stopped_after_fleet':
                    a = self._with_counts(a)
                if self.recorder is not None:
                    self.recorder.on_log(self.now, node, a)
                if self.log_events:
                    self.stats.logs.append((self.now, node, a))
                elif a.name in ('trigger', 'stall_s', 'stall_diagnostic', 'reject',
                                'followup_push'):
                    self.stats.logs.append((self.now, node, a))
            elif isinstance(a, Stopped):
                if node != SERVER:
                    self.stopped[node] = True
        wake = self._engine(node).next_wakeup()
        if wake is not None and wake < self._tick_at.get(node, float('inf')):
            self._tick_at[node] = max(wake, self.now)
            self._push(max(wake, self.now), 'tick', node)

    # ------------------------------------------------------------------ crashes
    def at(self, t: float, fn: Callable[[], None]) -> None:
        """Run ``fn()`` at virtual time ``t``."""
        self._push(t, 'call', fn)

    def kill(self, node: int) -> None:
        """Crash ``node`` now: what is sent to it is lost, its computation and timers vanish."""
        self.dead.add(node)
        self._tick_at.pop(node, None)
        if node != SERVER:
            self._gen[node] += 1

    def revive(self, node: int, engine) -> None:
        """Put ``engine`` (a new incarnation) in place of killed ``node`` and start it."""
        self.dead.discard(node)
        self._tick_at.pop(node, None)
        if node == SERVER:
            self.server = engine
            self._handle(node, [])
        else:
            self.workers[node] = engine
            self.stopped[node] = False
            self._handle(node, engine.start(self.now))

    # ------------------------------------------------------------------ running
    def start(self) -> None:
        self._started = True
        for r, w in enumerate(self.workers):
            self._handle(r, w.start(self.now))
        if self.eval_fn is not None and (self.eval_every_s or self.eval_every_iterations):
            self._evaluate()

    def _evaluate(self) -> None:
        mean_iter = sum(self.stats.iterations) / len(self.workers)
        metrics = self.eval_fn()
        if self.recorder is not None:
            self.recorder.on_eval(self.now, mean_iter, metrics)
        if self.eval_every_s:
            self._push(self.now + self.eval_every_s, 'eval')
        if self.eval_every_iterations:
            self._next_eval_iteration = mean_iter + self.eval_every_iterations

    def run(self, until: float = float('inf'), max_events: int = 10_000_000,
            max_quiet_s: float = float('inf')) -> RunStats:
        """
        Process events until every worker stopped, time ``until`` or ``max_events``.

        A run that ends otherwise (the event budget is spent, nothing is pending while a
        worker is unfinished, or an engine's timer did not fire at the time its
        ``next_wakeup`` named, or for ``max_quiet_s`` of virtual time no message arrived
        and no computation finished) sets ``stats.error`` to a one-line reason: it did not
        finish, and must not be reported as if it had. Reaching ``until`` is not an error.
        """
        if not self._started:
            self.start()
        reached_until = False
        last_progress = self.now
        while self._q and self.stats.events < max_events:
            if all(self.stopped):
                break
            t, _, kind, payload = self._q[0]
            if t > until:
                reached_until = True
                break
            if t == math.inf:        # only what a dead link carries is left
                self.stats.error = (f'no event before t=inf after t={self.now:.3f}s: a link '
                                    f'never delivers and workers '
                                    f'{[r for r, d in enumerate(self.stopped) if not d]} '
                                    f'are unfinished (deadlock)')
                break
            if t - last_progress > max_quiet_s:
                self.stats.error = (f'no message delivered and no computation finished from '
                                    f't={last_progress:.3f}s to t={t:.3f}s; workers '
                                    f'{[r for r, d in enumerate(self.stopped) if not d]} '
                                    f'unfinished')
                break
            if kind in ('deliver', 'compute'):
                last_progress = t
            heapq.heappop(self._q)
            self.now = t
            self.stats.events += 1
            if kind == 'deliver':
                src, dst, msg = payload
                if (dst != SERVER and self.stopped[dst]) or dst in self.dead:
                    continue
                self._handle(dst, self._engine(dst).on_message(msg, t))
            elif kind == 'call':
                payload[0]()
            elif kind == 'compute':
                node, clock, gen, grad = payload
                if gen != self._gen[node] or node in self.dead:
                    continue
                w = self.workers[node]
                if grad is None:
                    grad = self.grad_fn(node, w.w, clock)
                self.stats.compute_s[node] += self.compute_s[node]
                self.stats.iterations[node] += 1
                if self.recorder is not None:
                    self.recorder.on_compute(node, self.compute_s[node])
                self._handle(node, w.on_compute_done(grad, t))
                if (self.eval_every_iterations and self.eval_fn is not None and
                        sum(self.stats.iterations) / len(self.workers)
                        >= self._next_eval_iteration):
                    self._evaluate()
            elif kind == 'tick':
                (node,) = payload
                if self._tick_at.get(node) == t:
                    del self._tick_at[node]
                if node in self.dead:
                    continue
                engine = self._engine(node)
                actions = engine.on_tick(t)
                wake = engine.next_wakeup()
                if not actions and wake is not None and wake <= t:
                    # The tick changed nothing and the engine wants it again at once: it
                    # would spin at this instant for ever (DESIGN 8: fire at the deadline).
                    self.stats.error = (f'timer livelock: node {node} asked to wake at '
                                        f'{wake!r} but its tick at t={t!r} did nothing')
                    break
                self._handle(node, actions)
            elif kind == 'eval':
                self._evaluate()
        if self.stats.error is None and not all(self.stopped) and not reached_until:
            left = [r for r, done in enumerate(self.stopped) if not done]
            if self._q:
                self.stats.error = (f'event budget of {max_events} events spent at '
                                    f't={self.now:.3f}s; workers {left} unfinished')
            else:
                self.stats.error = (f'no pending event at t={self.now:.3f}s while workers '
                                    f'{left} are unfinished (deadlock)')
        self.stats.end_time = self.now
        if self.recorder is not None:
            self.recorder.end_time_s = self.now
        return self.stats

    def quiesce(self, max_events: int = 1_000_000, horizon_s: float = QUIESCE_HORIZON_S) -> None:
        """
        Deliver everything in flight (no new computation): for invariant checks.

        Stops ``horizon_s`` of virtual time after it starts: a worker stopped with a push in
        flight that the server no longer takes resends its END for ever (a node exits at its
        stop order; the harness keeps the engine, whose resends are how the checks learn of
        acks lost before the stop), and a million of those events took minutes.
        """
        end = self.now + horizon_s
        while self._q and max_events > 0 and self._q[0][0] <= end:
            t, _, kind, payload = heapq.heappop(self._q)
            max_events -= 1
            self.now = t
            if kind == 'deliver':
                src, dst, msg = payload
                if dst in self.dead:
                    continue
                self._handle(dst, self._engine(dst).on_message(msg, t))
            elif kind == 'tick':
                (node,) = payload
                self._tick_at.pop(node, None)
                if node in self.dead:
                    continue
                self._handle(node, self._engine(node).on_tick(t))
            # compute and eval events are dropped: the workers simply stop computing


def quadratic_problem(n_workers: int, layout, seed: int = 0, noise: float = 0.1,
                      dtype=torch.float32):
    """
    Build a small convex problem: worker r minimises 0.5*|w - t_r|^2 (+ gradient noise).

    Returns ``(grad_fn, optimum, loss_fn)`` in ``layout``'s flat order; targets and noise are
    drawn per tensor in model order, so two layouts of the same shapes see the same problem.
    ``loss_fn`` is the training objective, the workers' mean loss; its minimum, at the mean
    target, is the spread of the targets (non-IID data), not zero.
    """
    g = torch.Generator().manual_seed(seed)
    targets = [layout.flatten([torch.randn(s, generator=g, dtype=dtype)
                               for s in layout.shapes]) for _ in range(n_workers)]
    optimum = torch.stack(targets).mean(0)
    noise_gen = [torch.Generator().manual_seed(seed * 1000 + r + 1) for r in range(n_workers)]

    def grad_fn(rank, w, clock):
        grad = w - targets[rank]
        if noise:
            eps = layout.flatten([torch.randn(s, generator=noise_gen[rank], dtype=dtype)
                                  for s in layout.shapes])
            grad += noise * eps
        return grad

    floor = float(sum(0.5 * ((t - optimum) ** 2).sum() for t in targets) / n_workers)

    def loss_fn(w):
        return float(0.5 * ((w - optimum) ** 2).sum()) + floor

    return grad_fn, optimum, loss_fn
