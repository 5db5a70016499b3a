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
EngineDriver: runs a sans-I/O engine on a Bus and the wall clock (the node's I/O loop).

This is ``rog_ros.sim.harness`` for the real world and holds no protocol logic: messages
from the bus go to ``engine.on_message``, ``engine.on_tick`` runs when the engine's own
wake-up time has come, and the engine's actions are executed:

* ``Send(dest, msg)``: queued in the :class:`~rog_ros.nodes.outbox.Outbox` (which applies
  the link emulation) and published on the destination's topic once released;
* ``StartCompute(clock, sleep_s)``: the node's ``compute(clock)`` runs ``sleep_s`` later,
  only while the lifecycle allows training (a paused robot keeps answering the protocol);
* ``Log``: passed to ``on_log``; ``Stopped``: ends the loop.

One thread: the bus belongs to the loop (see the Bus threading contract); computation blocks
the loop like it blocks a robot's single training process, while DDS keeps receiving.
"""

from __future__ import annotations

import time

from rog_ros.nodes.routing import topic_for
from rog_ros.protocol.actions import Log, Send, StartCompute, Stopped

IDLE_POLL_S = 0.05
"""Longest single wait in ``bus.poll``, so that signals and lifecycle changes act quickly."""


class EngineDriver:
    """
    Drive ``engine`` with ``bus`` on a monotonic clock.

    Parameters
    ----------
    bus : rog_ros.transport.bus.Bus
        The node's bus; subscriptions are made by the node before the loop starts.
    engine
        A ServerEngine or WorkerEngine.
    outbox : Outbox
        Outgoing queues (shaped or not).
    compute : callable, optional
        Worker only: ``compute(clock) -> flat gradient``.
    may_compute : callable, optional
        ``may_compute() -> bool``; False defers a due computation (lifecycle ``inactive``).
    on_log, on_stopped : callable, optional
        ``on_log(now, log)``; ``on_stopped(now, stopped)``.
    clock : callable, default time.monotonic
        Seconds; injectable for tests.

    """

    def __init__(self, bus, engine, outbox, compute=None, may_compute=None, on_log=None,
                 on_stopped=None, clock=time.monotonic):
        self.bus, self.engine, self.outbox = bus, engine, outbox
        self.compute = compute
        self.may_compute = may_compute or (lambda: True)
        self.on_log = on_log or (lambda now, log: None)
        self.on_stopped = on_stopped or (lambda now, stopped: None)
        self.clock = clock
        self.compute_at = None       # when the requested computation may start
        self.compute_clock = None    # the iteration it computes
        self.stopped = False
        self.last_receive = None     # time of the last message (liveness diagnostics)
        self.published = 0
        self.engine_errors = 0       # messages whose handling raised (dropped, counted)

    # ------------------------------------------------------------------ actions
    def handle(self, actions, now: float) -> None:
        """Execute engine actions at time ``now``."""
        for action in actions:
            if isinstance(action, Send):
                self.outbox.put(action.dest, topic_for(action.dest, action.msg), action.msg,
                                now)
            elif isinstance(action, StartCompute):
                self.compute_at = now + max(0.0, action.sleep_s)
                self.compute_clock = action.clock
            elif isinstance(action, Log):
                self.on_log(now, action)
            elif isinstance(action, Stopped):
                self.stopped = True
                self.on_stopped(now, action)
        self.flush(now)

    def flush(self, now: float) -> None:
        """Publish every released message."""
        for _, topic, msg in self.outbox.due(now):
            self.bus.publish(topic, msg)
            self.published += 1

    def deliver(self, msg, now: float) -> list:
        """
        Feed one received message to the engine; return its actions.

        The engines reject bad input with ``MessageError`` (counted in ``engine.rejects``);
        anything else they raise is caught here, counted in ``engine_errors`` and logged as a
        ``reject`` with the error, so no message can end the node's loop.
        """
        try:
            return self.engine.on_message(msg, now)
        except Exception as err:  # noqa: B902 - bad input must never crash the node
            self.engine_errors += 1
            sender = getattr(msg, 'sender', getattr(msg, 'node', -1))
            self.on_log(now, Log('reject', 1.0, sender if isinstance(sender, int) else -1,
                                 {'error': f'{type(err).__name__}: {err}'[:300],
                                  'where': 'engine'}))
            return []

    # ------------------------------------------------------------------ loop
    def _deadline(self) -> float | None:
        times = [self.engine.next_wakeup(), self.outbox.next_release()]
        if self.compute_at is not None and self.may_compute():
            times.append(self.compute_at)
        times = [t for t in times if t is not None]
        return min(times) if times else None

    def step(self, max_wait_s: float = IDLE_POLL_S) -> None:
        """One turn: wait for traffic or the next deadline, then feed the engine."""
        now = self.clock()
        self.flush(now)
        deadline = self._deadline()
        wait = max_wait_s if deadline is None else min(max_wait_s, max(0.0, deadline - now))
        received = self.bus.poll(wait)
        if received:
            self.last_receive = self.clock()
        for _, msg in received:
            self.handle(self.deliver(msg, self.clock()), self.clock())
        now = self.clock()
        wake = self.engine.next_wakeup()
        if wake is not None and now >= wake:
            self.handle(self.engine.on_tick(now), now)
        if (self.compute_at is not None and self.clock() >= self.compute_at
                and self.may_compute() and not self.stopped):
            self.compute_at = None
            grad = self.compute(self.compute_clock)
            now = self.clock()
            self.handle(self.engine.on_compute_done(grad, now), now)

    def run(self, until=lambda: False, max_wait_s: float = IDLE_POLL_S) -> None:
        """Step until the engine stopped or ``until()`` is true."""
        while not self.stopped and not until():
            self.step(max_wait_s)
