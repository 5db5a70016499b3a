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
  with ``compute_thread`` on a thread of its own, so that the loop goes on sending and
  receiving meanwhile (late rows use the idle link, ``SyncPolicy.late_rows``);
* ``Log``: passed to ``on_log``; ``Stopped``: ends the loop.

The bus belongs to the loop (see the Bus threading contract): only the loop's thread touches
the bus and the engine. Without ``compute_thread`` computation blocks the loop, while DDS keeps
receiving; with it, ``compute(clock)`` must not touch the bus or the engine either (it reads
the model, which the engine leaves alone while it computes: no pull is answered before the
gradient is pushed).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
import time

from rog_ros.nodes.routing import topic_for
from rog_ros.protocol.actions import Log, Send, StartCompute, Stopped

IDLE_POLL_S = 0.05
"""Longest single wait in ``bus.poll``, so that signals and lifecycle changes act quickly."""
COMPUTE_POLL_S = 0.002
"""Longest single wait in ``bus.poll`` while a computation runs on the compute thread: its end
is noticed within this (the thread cannot wake the poll)."""


class EngineFailure(RuntimeError):
    """The engine stopped because it cannot go on (``Stopped.failed``): the node exits with 3."""


class StateWriteError(RuntimeError):
    """
    The node could not save its durable state (a full disk): it stops, exit status 1.

    Not bad input: ``deliver`` lets it through. Caught there as one, it dropped the message
    and the engine's answer, and a worker on a full disk waited out its server timeout while
    its log blamed the server; a robot that trained on could not have resumed after a crash.
    """


def _refused(engine):
    """
    Return how many messages ``engine`` refused so far (None: it counts none).

    The nodes drive their engine through chaos hooks, whose ``rejects`` is their own tally
    by reason, one dict changed in place: compared with itself it never showed a refusal,
    so every message a push robot received, garbage too, reset its give-up timer.
    """
    rejects = getattr(engine, 'rejects', None)
    return sum(rejects.values()) if isinstance(rejects, dict) else rejects


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
    compute_thread : bool, default False
        Run ``compute`` on a thread of its own (one computation at a time) instead of in the
        loop.
    while_computing : tuple of types or callable, default ()
        With ``compute_thread``: the message types the engine gets while a computation runs,
        or a predicate on the message (the worker: ``WorkerEngine.receives_while_computing``,
        acknowledgements of its late push and a late pull's rows, which it applies after the
        computation). Every other message waits, in order, until the gradient was handed
        over, as when the computation blocked the loop: nothing can change the model under
        a computation.

    """

    def __init__(self, bus, engine, outbox, compute=None, may_compute=None, on_log=None,
                 on_stopped=None, clock=time.monotonic, compute_thread: bool = False,
                 while_computing=()):
        self.bus, self.engine, self.outbox = bus, engine, outbox
        self.compute = compute
        self.may_compute = may_compute or (lambda: True)
        self.on_log = on_log or (lambda now, log: None)
        self.on_stopped = on_stopped or (lambda now, stopped: None)
        self.clock = clock
        self.compute_at = None       # when the requested computation may start
        self.compute_clock = None    # the iteration it computes
        self.stopped = False
        self.last_receive = None     # time of the last message the engine took (liveness;
        #                              the robot's: of its live server run)
        self.published = 0
        self.engine_errors = 0       # messages whose handling raised (dropped, counted)
        self.compute_thread = bool(compute_thread)
        self.computing = None        # Future of the computation on the compute thread
        if callable(while_computing):
            self.while_computing = while_computing
        else:
            types = tuple(while_computing)
            self.while_computing = lambda msg: isinstance(msg, types)
        self._deferred: list = []    # messages that arrived during it, not yet delivered
        self._pool: ThreadPoolExecutor | None = None

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
        ``reject`` with the error, so no message can end the node's loop. Only a message the
        engine took (its ``rejects`` unchanged; behind chaos hooks, the total of their tally)
        is a sign of its sender's life (``last_receive``: the worker node's give-up timer): a
        server run that sent nothing but garbage kept a robot waiting for ever. An engine
        that counts ``server_heard`` (the robot's) says which of them came from its live
        server run: a retired run's well-formed messages (a replaced server's zombie, late
        copies) kept a robot waiting for ever although the live run was silent.
        """
        rejects = _refused(self.engine)
        heard = getattr(self.engine, 'server_heard', None)
        try:
            actions = self.engine.on_message(msg, now)
            if (self.engine.server_heard != heard if heard is not None
                    else _refused(self.engine) == rejects):
                self.last_receive = now
            return actions
        except StateWriteError:
            raise
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
        if self.computing is not None:
            wait = min(wait, COMPUTE_POLL_S)
        received = self.bus.poll(wait)
        for _, msg in received:
            if self.computing is not None and not self.while_computing(msg):
                self._deferred.append(msg)
                continue
            self.handle(self.deliver(msg, self.clock()), self.clock())
        now = self.clock()
        wake = self.engine.next_wakeup()
        if wake is not None and now >= wake:
            self.handle(self.engine.on_tick(now), now)
        if self.computing is not None and self.computing.done():
            done, self.computing = self.computing, None
            grad = done.result()         # (an exception of the computation raises here)
            now = self.clock()
            self.handle(self.engine.on_compute_done(grad, now), now)
            deferred, self._deferred = self._deferred, []
            for msg in deferred:
                self.handle(self.deliver(msg, self.clock()), self.clock())
        if (self.compute_at is not None and self.clock() >= self.compute_at
                and self.may_compute() and not self.stopped and self.computing is None):
            self.compute_at = None
            if self.compute_thread:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(1, thread_name_prefix='rog_compute')
                self.computing = self._pool.submit(self.compute, self.compute_clock)
                return
            grad = self.compute(self.compute_clock)
            now = self.clock()
            self.handle(self.engine.on_compute_done(grad, now), now)

    def close(self) -> None:
        """Let the compute thread go (a computation still running finishes unused)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def run(self, until=lambda: False, max_wait_s: float = IDLE_POLL_S) -> None:
        """Step until the engine stopped or ``until()`` is true."""
        while not self.stopped and not until():
            self.step(max_wait_s)
