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
Sans-I/O engine shells of an asynchronous parameter server and its pushing workers.

Why it exists: AdaComp (policies/adacomp.py) and GSP (policies/gsp.py) were written in
parallel and share their whole engine face. The server accepts one message, a gradient push
(``RowChunk`` of KIND_GRAD), turns anything else, and any push its ``_on_push`` refuses with
``MessageError`` or ``ValueError``, into one counted ``reject`` log, and keeps no timers. A
worker computes at the model it holds, stops loudly on a non-finite gradient, pushes, and on
the server's dense model (``RowChunk`` of KIND_UPDATE, codec 0) starts the next computation;
a ``Schedule`` with ``stop`` ends it. Those shells live here once; what differs (how a push is
applied, what a worker sends and when) stays in the algorithms' own modules.
"""

from __future__ import annotations

from rog_ros.core.compress import topk
from rog_ros.protocol.actions import Log, StartCompute, Stopped
from rog_ros.protocol.messages import KIND_GRAD, KIND_UPDATE, MessageError, RowChunk, Schedule
import torch

KEEP_RUNS = 8
"""
How many past runs of one peer the push systems remember, to tell a late message of one.

The one depth of both histories, each keeping this many runs before the current one: the
server's engine in ``PushServer.past_runs`` (their late pushes refused, never taken for a
restart), ``push_transfers.PushTransfers.peer_runs`` with the current one last (a late
chunk of an earlier one superseded, or its run taken back), so both know the same runs.
The transfers kept this many with the current one among them: after 9 restarts a late
chunk of the oldest run the engine knew was new to them, taken as a new run's, and the
live run was displaced until taken back.
"""


class PushServer:
    """
    Base of a server engine that only answers gradient pushes and has no timers.

    A subclass sets ``self.rejects = 0`` in its constructor, calls ``_init_runs(n)`` and
    implements ``_on_push(msg, now) -> list`` for a ``RowChunk`` of KIND_GRAD, which checks
    the push's run and clock with ``_admit``, and ``_decode(msg)``, which ``_admit`` calls.
    """

    rejects: int
    runs: list
    past_runs: list
    rejoins: int

    CLOCK_REFUSED = 'worker {w} pushes clock {clock}, expected {expected}'
    """The error of a push of the current run at another clock, in the algorithm's terms."""

    def _init_runs(self, n: int) -> None:
        """Start with no run known of any of the ``n`` workers (0: none, or no incarnation)."""
        self.runs = [0] * int(n)
        self.past_runs = [[] for _ in range(int(n))]
        self.rejoins = 0
        self.resumed = [False] * int(n)
        self.resent = 0            # pushes sent again that a restored server had answered
        self._resent = False       # the push ``_admit`` just took is one of them

    def _runs_state(self) -> dict:
        """
        Return the runs' part of a checkpoint (plain lists): which run of each worker we take.

        Kept so that a restored server refuses the late pushes of runs it had retired, and
        takes the live runs' pushes at the clocks it holds (``_admit``).
        """
        return {'runs': list(self.runs), 'past_runs': [list(p) for p in self.past_runs],
                'rejoins': int(self.rejoins)}

    @staticmethod
    def _system_of(sd: dict) -> str:
        """
        Return which system wrote checkpoint ``sd`` (AdaComp's mode, gsp, or a Rog engine's).

        Why: a checkpoint of another ``--sync`` was refused naming only a key it lacks
        (``('clock')``, ``('mode')``); the error names the system that wrote it.
        """
        if sd.get('mode') is not None:
            return str(sd['mode'])
        if 'omega' in sd:
            return 'gsp'
        return 'rog, ssp, bsp or flown' if 'w_srv' in sd else 'an unknown system'

    def _load_runs_state(self, sd: dict) -> None:
        """
        Restore ``_runs_state``'s part of a checkpoint; every worker's next push is unsure.

        A server restored from a checkpoint lost what it did after it: a worker may push at a
        clock this server never handed it (a pull sent after the checkpoint), or push again a
        push applied before it whose answer the crash lost. Each worker's first push after
        the restore is therefore admitted as a new run's (``resumed``): applied at the clock
        the worker holds here, else dropped and answered with the current model; refused,
        it was never answered, and its robot waited for good.
        """
        if len(sd['runs']) != len(self.runs) or len(sd['past_runs']) != len(self.runs):
            raise ValueError(f"checkpoint of {len(sd['runs'])} workers, this server has "
                             f'{len(self.runs)}')
        self.runs = [int(r) for r in sd['runs']]
        self.past_runs = [[int(r) for r in p] for p in sd['past_runs']]
        self.rejoins = int(sd['rejoins'])
        self.resumed = [True] * len(self.runs)

    def replay_state(self) -> dict:
        """
        Return what a journal replay needs besides the checkpoint (plain values).

        Why: a checkpoint restored marks every worker's next push unsure (``resumed``); the
        journal's pushes after it met the engine as it was then (``begin_replay``), and are
        replayed so, or a replayed push was taken for a restarted run's.
        """
        return {'resumed': [bool(b) for b in self.resumed]}

    def begin_replay(self, state: dict) -> None:
        """
        Take ``replay_state``'s values back, after ``load_state_dict``, before a replay.

        Why: the journal's inputs must meet the engine as they met it the first time.
        """
        resumed = [bool(b) for b in state['resumed']]
        if len(resumed) != len(self.runs):
            raise ValueError(f'replay state of {len(resumed)} workers, this server has '
                             f'{len(self.runs)}')
        self.resumed = resumed

    def end_replay(self) -> None:
        """
        Make the replayed engine a restored one: every worker's next push unsure.

        Why: a push the journal holds may have lost its answer with the crash; its robot
        sends it again (``push_resent``), as after any restore (``_load_runs_state``).
        """
        self.resumed = [True] * len(self.runs)
        self._resent = False

    def _admit(self, w: int, msg: RowChunk, expected: int) -> tuple:
        """
        Return ``(self._decode(msg), whether to drop it as a new run's)`` for ``w``'s push.

        The one check of a push's run for every push server (AdaComp's and GSP's were two
        copies): a push of the run we take pushes from must come at ``expected`` (the
        timestamp or iteration ``w`` is at), else it is refused (``MessageError``); a run
        new to us (``_run_of``) pushes at any clock, and becomes the run we take once its
        push decoded (a malformed one changes nothing). Its push at ``expected`` is applied
        as any; at another clock it was computed at a model we never handed it: the caller
        drops it and answers (``_rejoin``). The first push of each worker after a restore
        from a checkpoint is admitted the same way (``_load_runs_state``).
        """
        fresh = self._run_of(w, msg.incarnation)
        unsure = fresh or self.resumed[w]     # (the first push after a restore: as a new run's)
        clock = int(msg.clock)
        if not unsure and clock != expected:
            raise MessageError(self.CLOCK_REFUSED.format(w=w, clock=clock, expected=expected))
        decoded = self._decode(msg)
        if fresh:
            self._take_run(w, msg.incarnation)
        # a push of the run the checkpoint holds, at a clock before the one it holds: this
        # server answered it (the clock moved on past it), and the crash lost the answer
        self._resent = self.resumed[w] and not fresh and clock < expected
        self.resumed[w] = False
        return decoded, unsure and clock != expected

    def _decode(self, msg: RowChunk):
        """Return what a push carries, in the algorithm's form; ``MessageError`` if malformed."""
        raise NotImplementedError

    def _run_of(self, w: int, incarnation: int) -> bool:
        """
        Tell whether a push of run ``incarnation`` is the first of a run new to us (no change).

        0 (the simulator's messages, an older node's sparse push) is no run: never new. A run
        we took pushes from before another is refused (``MessageError``): its late push would
        otherwise be taken for a restart, and the robot's current run answered twice.
        """
        inc = int(incarnation)
        if not inc or inc == self.runs[w]:
            return False
        if inc in self.past_runs[w]:
            raise MessageError(f'push of an earlier run of worker {w} (it restarted since)')
        return True

    def _take_run(self, w: int, incarnation: int) -> None:
        """Make ``incarnation`` the run of worker ``w`` whose pushes we take."""
        if self.runs[w]:
            self.past_runs[w].append(self.runs[w])
            del self.past_runs[w][:-KEEP_RUNS]
        self.runs[w] = int(incarnation)

    def revive(self, w: int, incarnation: int) -> bool:
        """
        Take back run ``incarnation`` of worker ``w``, retired by mistake; True if it was.

        No change if unknown. The server node checkpoints a revival (``ServerAdapter``'s
        ``durable_progress``): a checkpoint without it retired the run again.

        The transfers tell (``PushTransfers._revive``): a late push of a run that died
        before it, heard after it, made it a run past, and its pushes were refused for good.
        Its next push is taken as a new run's: applied only at the timestamp ``w`` holds,
        else dropped and answered with the current model, so none is applied twice.
        """
        if 0 <= w < len(self.past_runs) and int(incarnation) in self.past_runs[w]:
            self.past_runs[w].remove(int(incarnation))
            return True
        return False

    def _rejoin_log(self, w: int, clock: int, expected: int, nbytes: int) -> Log:
        """
        Count and return the log of a dropped push of a run new to us (``worker_restart``).

        After a restore, a push this server had answered before its checkpoint and that
        its robot sent again (the answer lost with the crash) is no restart and no loss: it
        is in the model once, counted in ``resent`` and logged as ``push_resent`` (``rog
        chaos`` tells it from a push taken twice).
        """
        if self._resent:
            self._resent = False
            self.resent += 1
            return Log('push_resent', 1.0, w, {'clock': int(clock), 'expected': int(expected),
                                               'bytes': int(nbytes)})
        self.rejoins += 1
        return Log('worker_restart', 1.0, w, {'dropped_pushes': 1, 'clock': int(clock),
                                              'expected': int(expected), 'bytes': int(nbytes)})

    def on_message(self, msg, now: float) -> list:
        try:
            if not isinstance(msg, RowChunk) or msg.kind != KIND_GRAD:
                raise MessageError(f'server does not accept {type(msg).__name__}')
            return self._on_push(msg, now)
        except (MessageError, ValueError) as err:
            self.rejects += 1
            return [Log('reject', 1.0, getattr(msg, 'sender', -1), {'error': str(err)})]

    def on_tick(self, now: float) -> list:
        return []

    def next_wakeup(self):
        return None

    def _on_push(self, msg: RowChunk, now: float) -> list:
        raise NotImplementedError


class PushWorker:
    """
    Base of a worker engine that pushes gradients and computes again at each model pulled.

    A subclass sets ``rank``, ``n_params``, ``w`` (the flat model held), ``stopped``,
    ``diverged`` and ``_sent_at`` (when its last push left) and implements
    ``_push(g, now) -> list`` for a finite flat fp32 gradient and ``_pulled(msg) -> int``
    (book-keeping after ``w`` took the pulled model; returns the clock to compute next).
    """

    rank: int
    n_params: int
    w: torch.Tensor
    stopped: bool
    diverged: bool
    _sent_at: float

    def start(self, now: float) -> list:
        return [StartCompute(clock=0)]

    def next_wakeup(self):
        return None

    def on_tick(self, now: float) -> list:
        return []

    def on_compute_done(self, grad: torch.Tensor, now: float) -> list:
        if self.stopped:
            return []
        g = grad.reshape(-1).to(torch.float32)
        if not bool(torch.isfinite(g).all()):     # the model diverged: stop, loudly
            self.stopped = self.diverged = True
            return [Log('diverged', 1.0, self.rank), Stopped('non-finite gradient')]
        return self._push(g, now)

    def on_message(self, msg, now: float) -> list:
        if self.stopped:
            return []
        if isinstance(msg, Schedule) and msg.stop:
            self.stopped = True
            return [Stopped('server says training is over')]
        if (not isinstance(msg, RowChunk) or msg.kind != KIND_UPDATE or msg.codec != 0
                or msg.receiver != self.rank):
            return [Log('reject', 1.0, self.rank, {'error': 'unexpected message'})]
        try:
            model = topk.decode_dense(msg.payload, self.n_params)
        except ValueError as err:
            return [Log('reject', 1.0, self.rank, {'error': str(err)})]
        self.w.copy_(model)
        clock = self._pulled(msg)
        return [Log('pull_done', 1.0, self.rank,
                    {'bytes': msg.wire_size(), 'seconds': now - self._sent_at}),
                StartCompute(clock=clock)]

    def _push(self, g: torch.Tensor, now: float) -> list:
        raise NotImplementedError

    def _pulled(self, msg: RowChunk) -> int:
        raise NotImplementedError


__all__ = ['KEEP_RUNS', 'PushServer', 'PushWorker']
