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
The push systems' dense messages as windowed chunked transfers (``rog fleet`` only).

AdaComp, ASGD, Comp-ASGD and GSP engines (``policies/adacomp.py``, ``policies/gsp.py``) send
each pull's dense model, and ASGD's and GSP's pushes their dense gradient, as one
``RowChunk`` (codec 0, raw fp32, ``FLAG_END``): 4 bytes a parameter, 37.9 MB for a model of
9.46 M parameters. As one DDS message that passes the transport's 8 MiB writer-history mark
(``transport.dds_bus.WRITER_WATERMARKS``) by itself, and a reliable write to a robot whose link
is down then blocks the sending node's one loop. ``PushTransfers`` sits between such an engine
and the bus: it sends every dense message as one transfer of Rog's chunk machinery
(``transfer.OutgoingTransfer``: ``chunk_bytes`` chunks, a window of them unacknowledged, never
more than ``MAX_WINDOW_BYTES`` past the last acknowledged chunk, END a lease later at that
bound), reassembles the transfers it receives (``transfer.Receiver``, per-chunk and final
``TransferAck``) and hands the engine the very message its peer's engine sent. AdaComp's and
Comp-ASGD's sparse top-k pushes (codec 2: 0.76 MB for that model at c = 0.01, past the mark
from about 105 M parameters on) travel the same way when the fleet's entry count is given
(``sparse_entries``), as chunks of ``SPARSE_WIRE_CODEC``; ``Schedule`` passes unchanged.
Every chunk carries its sender's run (``incarnation``), so that the server sees a robot's
restart in its first chunk whatever it sends, and its engine gets each push with the run
that sent it (``policies/async_ps.py`` takes a restarted robot back). The simulator drives
the engines without it and charges each message's wire size to the link, as before.

On the wire: the dense vector of ``n`` fp32 values is cut into rows of ``PUSH_ROW_ELEMENTS``
values in vector order, the last row holding the rest (``dense_layout``), so that the rows'
bytes, in row id order, are the vector's bytes; codec 0, no scales, flags 0. The receiver
hands its engine the message only when every row arrived; a transfer that ended with rows
missing (chunks lost, a robot silent past the lease) is followed by a new transfer of the
rows the peer's run lacks, which adds them to the rows it kept (whole again if another run
of the peer answered). One
transfer at a time per peer: a second message to a peer waits for the first. The transfers
to one peer share one ``transfer.PeerLink``, the ledger of wire bytes written to that peer's
writer and not yet covered by an ack, as Rog's server and robots keep it: no data chunk goes
past ``PEER_MAX_WIRE_BYTES`` of them, and an ack of any transfer to that peer frees room and
tells a transfer at its bound that the peer is alive. At that bound END goes ``lease_s``
after the peer's last ack: the nodes give ``connect.transfer_lease_s()``, the DDS
``LeaseDuration`` of ``CYCLONEDDS_URI``, never less than ``BOUND_END_S`` (10 s). Every
END goes twice at once (``END_COPIES``): one lost, or its final ack, costs no END timeout.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import NamedTuple
import warnings

import numpy as np
from rog_ros.core.atp import Ewma
from rog_ros.core.compress import topk
from rog_ros.core.compress.identity import Identity
from rog_ros.core.rows import RowLayout
from rog_ros.protocol.actions import Log, Send
from rog_ros.protocol.messages import (
    FLAG_END, KIND_GRAD, KIND_UPDATE, MessageError, new_incarnation, RowChunk, SERVER, TransferAck)
from rog_ros.protocol.policies.async_ps import KEEP_RUNS
from rog_ros.protocol.revival import (
    DuplicateRanks, POKE_END_TIMEOUTS, RevivalWatch, REVIVE_AFTER_POKES)
from rog_ros.protocol.transfer import (
    BOUND_END_S, fragment_bytes_checked, lease_seconds, MAX_WINDOW_BYTES,
    OutgoingTransfer, PeerLink, Receiver, RowBytes, WHC_FRAGMENT_BYTES)
import torch

PUSH_ROW_ELEMENTS = 1024
"""fp32 values per row of a dense push-system message on the wire (4 KiB; the last row more)."""
PUSH_CHUNK_BYTES = 65000
"""
Chunk payload cap of a dense push-system transfer unless ``chunk_bytes`` is set otherwise.

The ``chunk_bytes`` setting's top: the largest payload below DDS's 64 KiB fragment-free
limit (15 rows, 60 KiB). A push system's message is used only whole, with no deadline to cut
it at a finer grain, so Rog's 16 KiB default only multiplies the per-message costs (writing,
reading, validating, acknowledging each chunk): asgd with 2 robots and a 37.9 MB model took
18.1 s per iteration with 16 KiB chunks against 6.4 s as one message.
"""
PUSH_WINDOW = MAX_WINDOW_BYTES // PUSH_CHUNK_BYTES
"""
Unacknowledged chunks of a dense push-system transfer unless ``window`` is set otherwise.

64 chunks of ``PUSH_CHUNK_BYTES``: the 4 MiB bound from the first transfer on, where Rog's
4 grow only once a transfer measured the link (4 x 16 KiB per round trip before).
"""


HELD_RUNS = 2
"""
Runs of one peer whose unfinished message's rows a receiver holds: its last two runs heard.

A message that ended with rows missing is sent again with those rows only, so its rows held
here must outlive the transfers of the peer's other runs: two live processes of one robot
(``duplicate_rank``) each push, and a revived run's message is finished after the transfers
of the run it had replaced. Held per (peer, run), not per peer: with one message per peer,
each run's transfer dropped the other's rows, and neither message was ever whole (each
robot, every row acknowledged, took its push as delivered). Two, not ``KEEP_RUNS`` + 1: each
is a model-sized buffer (37.9 MB for the large model); the runs held are those the
transfers take back first (the current one and the one it replaced, the two alternating
runs of a rank given twice). A replaced run's are freed once it is retired for good
(``RETIRE_LEASES``).

A run past the two (a third live process of one rank: a robot restarted twice while an old
process still sends, a respawn race) loses its held rows, as a retired one does, with a
note of the transfer they ended at (``freed``: one integer, ``FREED_NOTES`` a peer, past the
``KEEP_RUNS`` + 1 runs remembered too): its rest is answered with no row, and its push goes
again whole (``_rest_of_freed``). Dropped without the note, its rest was held alone and answered as
arrived: the robot took its push as delivered and the server never had it (three runs
that each lost a chunk: none of their pushes arrived). Memory stays two model-sized
buffers a peer, whatever the number of its live processes.
"""

FREED_NOTES = 4 * (KEEP_RUNS + 1)
"""
Notes of freed held rows (``PushTransfers.freed``, one integer each) kept per sender, at most.

Why: a run whose held rows were freed (``_prune_held``, ``_retire``) and that lives on sends
its rest; the note makes it draw a final ack of no row, and the message goes again whole.
Kept only while the run was among the ``KEEP_RUNS`` + 1 remembered (9 runs), a run past them
(nine more runs of its rank heard: a respawn loop while its process lives on) sent its rest
to no note: held alone and answered as arrived, its robot took the push as delivered and the
server never had it. Kept past them now, oldest dropped first: 36 integers a sender.
"""

RETIRE_LEASES = 2
"""
Silences after which a replaced run of a peer is retired for good: its held rows are freed.

A replaced run silent for this many of ``max(lease_s, poke interval)`` since its last chunk
and since a newer run of its peer spoke (``PushTransfers.on_tick``) loses its held rows and
open receive buffers. A live run speaks at least once in each: at the bound its END goes a
lease after the last ack, and then again every ``end_timeout_s``; a waiting robot pokes each
poke interval; two of them leave room for a lost one. Before, a dead run's buffer was freed
only when two newer runs of its peer had been heard: after one restart of each robot, a
server kept the dead runs' 37.9 MB each for good (8 robots: 0.3 GB more on an 8 GB Jetson).
A retired run alive after all (taken back) sends its message again whole (``_rest_of_freed``).
"""

END_COPIES = 2
"""
Copies of each END a push transfer sends, one after the other.

A transfer ends only when its END reaches the receiver and the final ack comes back: a lost
one of either cost ``end_timeout_s`` (2 s), when END went again. Each message that lost a
chunk takes a transfer more (its missing rows), each with its END and final ack: under
``rog chaos``'s loss-dup-reorder (5 % of the chunks and acks lost) those waits were 53 s of
a one-robot ASGD run of 30 iterations (virtual time, 5 seeds' mean), 7 s with two copies
(the receiver answers each one, a closed transfer's from its record). An END is some 100
bytes on the wire; its copy is never a second message for the engine. A waiting robot's
poke (``_pokes``) goes as many times: one lost cost a poke interval (8 s).
"""

REPLACED_AFTER_END_TIMEOUTS = 2
"""
END timeouts over which our robots' acks to another server run must keep coming: replaced.

A server run that our robots answer (acks name their transfer's sender run) is the one they
follow; acks to a run other than ours, more than ``REVIVE_AFTER_POKES`` of them over this
many END timeouts (4 s by default), say that a server run serves the fleet in our stead
(``PushTransfers.replaced_by``): a replaced server process alive after all, finished (a
zombie), repeated its stop order to robots that set it aside, for up to
``push_systems.STOP_PATIENCE_S`` (60 s). A dead run's late acks all come within a
network delay (``revival``), and a robot acks the chunks of the run it takes as current only:
a live one keeps answering its pulls, each iteration.
"""

SPARSE_WIRE_CODEC = 3
"""
``RowChunk.codec`` of the chunks of a sparse top-k message (an engine's codec 2 payload).

Not 2: a node of the revision before sparse pushes were chunked hands a codec 2 RowChunk to
its engine as a whole push, and the first chunk of one (its first rows: indices, then
indices read as values) decoded as one. Codec 3 is unknown there: each chunk a reject.
"""


class RawValues(Identity):
    """
    Codec 0 as the push transfers move it: each value's 4 bytes as they are, never judged.

    The engines validate the whole message they are handed (``topk.decode_dense`` refuses a
    non-finite value, one ``reject``), as they did when it travelled as one message. Judged
    per chunk here as well, as Rog's float codec is, a non-finite value was refused in its
    chunk, never acknowledged, and the transfer ended with its rows missing: sent again,
    whole, at once, forever (a 37.9 MB model over and over). An integer element type of the
    same size leaves the bytes to the engine (``check_chunk`` finds every integer finite).
    """

    def __init__(self):
        super().__init__(torch.int32)

    def bad_rows(self, layout: RowLayout, rowbytes: torch.Tensor) -> torch.Tensor:
        """Return that no row is bad: a row assembled from fragments is the engine's to judge."""
        return torch.zeros(layout.n_rows, dtype=torch.bool)


class SparseWords(RawValues):
    """The words of a sparse top-k payload (int32 indices, then fp32 values), as they are."""

    codec_id = SPARSE_WIRE_CODEC


def dense_layout(n_values: int) -> RowLayout:
    """
    Return the row layout of a dense message of ``n_values`` fp32 values.

    Rows of ``PUSH_ROW_ELEMENTS`` values in vector order and a last row of the rest
    (``PUSH_ROW_ELEMENTS`` to twice that, less one): rows are numbered shortest first, so the
    longer rest must come last for the row order to be the vector's (one row below twice
    ``PUSH_ROW_ELEMENTS``). The payload's bytes are then the rows' bytes as they are.
    """
    n = int(n_values)
    if n < 1:
        raise ValueError(f'a dense message needs at least one value, got {n}')
    c = PUSH_ROW_ELEMENTS
    if n < 2 * c:
        return RowLayout([(n,)])
    rows = n // c - 1
    return RowLayout([(rows, c), (n - rows * c,)])


class RunRevived(NamedTuple):
    """
    A robot's run the server's transfers took back: its engine must take it back too.

    Handed over by ``PushTransfers.take_revived`` (``ServerAdapter`` calls the engine's
    ``revive``), not read from the ``worker_revived`` log, which is the operator's.
    """

    worker: int
    run: int
    retired: int


class _Form:
    """
    One form of message the transfers carry: dense fp32 (codec 0), or sparse top-k.

    ``codec`` is the engine's (``RowChunk.codec`` of the message handed over), ``wire`` the
    row codec of its chunks, ``nbytes`` the payload size, ``receiver`` its transfers in.
    """

    def __init__(self, me: int, codec: int, wire: RawValues, n_words: int):
        self.codec = int(codec)
        self.wire = wire
        self.layout = dense_layout(n_words)
        self.nbytes = 4 * int(n_words)
        self.receiver = Receiver(me, self.layout, wire)


class _Sending:
    """
    One peer's transfer under way: the message it carries, its form and sender half.

    ``got``: the rows of the message that earlier transfers of it delivered to the peer's run
    ``got_by`` (None: none yet); this transfer carries the others only.
    """

    def __init__(self, msg: RowChunk, form: _Form, transfer: OutgoingTransfer,
                 got: np.ndarray | None = None, got_by: int | None = None):
        self.msg = msg
        self.form = form
        self.transfer = transfer
        self.got = got
        self.got_by = got_by


class PushTransfers:
    """
    Chunked transfers of one node's dense push-system messages (sans-I/O, no clock).

    Parameters
    ----------
    me : int
        This node's address (a worker rank, or ``SERVER``).
    n_values : int
        Values of the model (and of a dense gradient).
    window, chunk_bytes, end_timeout_s : as Rog's transfers (``OutgoingTransfer``); None:
        ``PUSH_WINDOW`` and ``PUSH_CHUNK_BYTES`` (larger than Rog's defaults).
    incarnation : int or None
        Stamped on chunks and acks (the receiver keys transfers by it); None draws one.
    lease_s : float
        The peers' DDS lease (``BOUND_END_S`` by default): a transfer at its bound sends its
        END that long after the peer's last ack, as Rog's transfers do.
    fragment_bytes : int
        The DDS ``FragmentSize`` each peer's writer counts with (``transfer.PeerLink``;
        ``WHC_FRAGMENT_BYTES`` by default): the nodes pass a smaller one their Cyclone
        configuration sets (``connect.transfer_fragment_bytes``), as Rog's engines take it.
    sparse_entries : int or None
        Entries of every sparse top-k push of the fleet (AdaComp: the per-tensor k summed;
        Comp-ASGD: the global k), the same on every node: those pushes travel chunked too
        (``SPARSE_WIRE_CODEC``). None: none travel chunked (ASGD, GSP push dense).
    n_workers : int or None
        Robots of the fleet (ranks ``0 .. n_workers - 1``): a server's transfers take chunks
        and acks from them only, a robot's from ``SERVER`` only; any other is refused before
        anything is allocated for it (a ``reject``). Without a fleet key a forged chunk of
        each unknown rank opened a model-sized receive buffer, and its END held one more.
        None: any sender (the engine-level tests).

    """

    def __init__(self, me: int, n_values: int, window: int | None = None,
                 chunk_bytes: int | None = None, end_timeout_s: float = 2.0,
                 incarnation: int | None = None, lease_s: float = BOUND_END_S,
                 sparse_entries: int | None = None,
                 fragment_bytes: int = WHC_FRAGMENT_BYTES, n_workers: int | None = None):
        lease_s = lease_seconds(lease_s)
        if n_workers is not None and (isinstance(n_workers, bool) or
                                      not isinstance(n_workers, numbers.Integral) or
                                      n_workers < 1):
            raise ValueError(f'n_workers must be a whole number of robots, at least 1 (the '
                             f'fleet size, --workers), or None for any rank; got {n_workers!r}')
        self.n_workers = None if n_workers is None else int(n_workers)
        self.fragment_bytes = fragment_bytes_checked(fragment_bytes)
        if sparse_entries is not None and not 1 <= int(sparse_entries) <= int(n_values):
            raise ValueError(f'sparse_entries must be in [1, {int(n_values)}] (the values of '
                             f'the model), got {sparse_entries}')
        self.me = int(me)
        self.lease_s = lease_s
        dense = _Form(self.me, 0, RawValues(), n_values)
        self.forms = {dense.wire.codec_id: dense}   # by the codec of the chunks
        if sparse_entries is not None:        # int32 index and fp32 value: 2 words an entry
            sparse = _Form(self.me, topk.TOPK_CODEC_ID, SparseWords(), 2 * int(sparse_entries))
            self.forms[sparse.wire.codec_id] = sparse
        self.layout, self.nbytes = dense.layout, dense.nbytes
        self.codec, self.receiver = dense.wire, dense.receiver
        self.window = int(window) if window is not None else PUSH_WINDOW
        self.chunk_bytes = int(chunk_bytes) if chunk_bytes is not None else PUSH_CHUNK_BYTES
        self.end_timeout_s = float(end_timeout_s)
        self.incarnation = int(incarnation) if incarnation is not None else new_incarnation()
        self.sending: dict = {}          # peer -> _Sending
        self.waiting: dict = {}          # peer -> messages queued behind it
        self.next_tid: dict = {}         # peer -> last transfer id used
        self.rate: dict = {}             # peer -> Ewma of its transfers' throughput
        self.peers: dict = {}            # peer -> PeerLink, shared by its transfers
        self.peer_incarnation: dict = {}   # sender -> incarnation of its latest chunk
        self.peer_runs: dict = {}        # peer -> its runs heard, current last (KEEP_RUNS + 1)
        self.rejects = 0                 # chunks or acks refused (validation)
        self.resent = 0                  # messages sent again after rows went missing
        self.foreign = 0                 # chunks of pulls for an earlier run of ours
        self.superseded = 0              # chunks of a peer's run replaced by a newer one
        self.dropped_pulls = 0           # pulls to a peer's earlier run, dropped
        self.revival = RevivalWatch()    # replaced runs that keep speaking
        self.revived = 0                 # replaced runs taken back (they were the live one)
        self.revived_runs: list = []     # robots' RunRevived not yet taken (take_revived)
        self._duplicates = DuplicateRanks()   # two live processes of one robot (revival)
        self.duplicate_ranks: set = self._duplicates.ranks   # robots they were seen to share
        self.settled: dict = {}          # peer -> [_Sending, next poke]: push done, no answer
        self.partial: dict = {}          # (sender, run) -> (key, tid, rows, bytes): unfinished
        self.run_heard: dict = {}        # (sender, run) -> when it, or a newer run, last spoke
        self.retired = 0                 # replaced runs whose buffers were freed (silent)
        self.freed: dict = {}            # (sender, run) -> id of the transfer whose rows went
        #                                  (FREED_NOTES a sender, past the runs remembered)
        self.pokes = 0                   # ENDs of a settled push repeated (still no answer)
        self.other_servers: dict = {}    # server run our robots' acks name -> [first, acks]
        self.replaced_by = 0             # a server run that serves our robots instead of us
        self.replaced_heard = 0.0        # when our robots last acked that run
        self.replaced_spoke = None       # a robot's first word to us since (None: none)
        self.replaced_acked: dict = {}   # robot -> (run, when): its last word, an ack to run

    def carries(self, msg) -> bool:
        """Tell whether ``msg`` travels chunked (a dense model or gradient, a sparse push)."""
        return self._form_of(msg) is not None

    def _form_of(self, msg) -> _Form | None:
        """
        Return the form ``msg`` travels in, None if it goes as one message.

        A RowChunk of one of our forms' codec and size, with no tensor list (the receiver
        rebuilds the message without one): a dense model or gradient, a sparse push of the
        fleet's entry count.
        """
        if not isinstance(msg, RowChunk) or len(msg.tensor_ids):
            return None
        for form in self.forms.values():
            if msg.codec == form.codec and len(msg.payload) == form.nbytes:
                return form
        return None

    # ------------------------------------------------------------------ sending
    def outgoing(self, actions: list, now: float) -> list:
        """Return ``actions`` with every dense message replaced by its transfer's chunks."""
        out = []
        for a in actions:
            form = self._form_of(a.msg) if isinstance(a, Send) else None
            if form is not None:
                if a.dest in self.sending:
                    self.waiting.setdefault(a.dest, []).append(a.msg)
                else:
                    out += self._start(a.dest, a.msg, now)
            else:
                out.append(a)
        return out

    def _start(self, dest: int, msg: RowChunk, now: float, got: np.ndarray | None = None,
               got_by: int | None = None) -> list:
        """
        Open the transfer of ``msg`` to ``dest`` and return its first chunks.

        ``got``: the rows ``dest``'s run ``got_by`` already holds (an earlier transfer of
        ``msg`` delivered them): the transfer carries the others only.
        """
        form = self._form_of(msg)
        tid = self.next_tid.get(dest, 0) + 1
        self.next_tid[dest] = tid
        with warnings.catch_warnings():   # read only: torch warns of the immutable bytes
            warnings.simplefilter('ignore', UserWarning)
            rowbytes = torch.frombuffer(msg.payload, dtype=torch.uint8)
        layout = form.layout
        order = (torch.arange(layout.n_rows) if got is None
                 else torch.from_numpy(np.flatnonzero(~got)))
        tr = OutgoingTransfer(transfer_id=tid, sender=self.me, receiver=dest, kind=msg.kind,
                              clock=msg.clock, layout=layout, codec=form.wire,
                              rowbytes=rowbytes,
                              scales=torch.zeros(layout.n_tensors, dtype=torch.float32),
                              order=order, n_mandatory=int(order.numel()),
                              deadline=now, now=now, window=self.window,
                              chunk_bytes=self.chunk_bytes, end_timeout_s=self.end_timeout_s,
                              rate_bps=self._rate(dest).value_bps,
                              incarnation=self.incarnation, peer=self._peer(dest),
                              lease_s=self.lease_s)
        self.sending[dest] = _Sending(msg, form, tr, got, got_by)
        self.settled.pop(dest, None)
        return self._sends(dest, tr.pump(now))

    def _sends(self, dest: int, chunks) -> list:
        """
        Return sends of our chunks to ``dest``, a pull's stamped for the run it answers.

        A pull answers a push of the run it goes to (``target_incarnation``: ``dest``'s
        newest run heard); a new run of that robot refuses it (it starts at its own model
        and would take a model arriving mid-computation as its next). A push is for the
        server whatever its run: 0, taken by any.

        Every END goes twice (``END_COPIES``), each copy counted in the peer's writer ledger
        as any END (the final ack covers both).
        """
        runs = self.peer_runs.get(dest)
        target = runs[-1] if runs else 0
        out = []
        for ch in chunks:
            if ch.kind == KIND_UPDATE:
                ch.target_incarnation = target
            out.append(Send(dest, ch))
            if ch.flags & FLAG_END:
                tr = self.sending[dest].transfer
                for _ in range(END_COPIES - 1):
                    again = dataclasses.replace(ch)      # (a bus may stamp each one it sends)
                    tr.wire_end[-1] = tr.peer.write(tr.peer.wire_bytes(again))
                    out.append(Send(dest, again))
        return out

    def _rate(self, peer: int) -> Ewma:
        """Return the throughput estimate of ``peer``'s link (grows the window when fast)."""
        if peer not in self.rate:
            self.rate[peer] = Ewma()
        return self.rate[peer]

    def _peer(self, peer: int) -> PeerLink:
        """Return the ledger of ``peer``'s writer, one for all transfers to it (created)."""
        if peer not in self.peers:
            self.peers[peer] = PeerLink(fragment_bytes=self.fragment_bytes)
        return self.peers[peer]

    def _finished(self, dest: int, delivered: np.ndarray, now: float, by: int,
                  empty: bool = False) -> list:
        """
        Start the next message to ``dest`` after a final ack, or the rows it lacks if any.

        ``delivered``: the rows this transfer delivered to ``dest``'s run ``by``, which
        holds those of the message's earlier transfers too if it took them (its receiver
        keeps a message's rows until it has all), unless its final ack took no byte at all
        (``empty``): the receiver may have freed them (``_rest_of_freed``), and the message
        goes again whole (a rest whose chunks were all lost, its END not, goes whole too).
        Sent again whole, a message of ``k`` chunks arrived only when no chunk of one
        transfer was lost: with 5 % lost and 63 chunks, one try in 25, and a push system's
        fleet stalled (``rog chaos`` loss-dup-reorder).
        """
        sending = self.sending.pop(dest)
        tr = sending.transfer
        nbytes, secs = tr.throughput_sample()
        if nbytes:
            self._rate(dest).update(nbytes, secs)
        rows = sending.form.layout.n_rows
        got = (sending.got.copy() if sending.got is not None and sending.got_by == by
               and not empty else np.zeros(rows, dtype=bool))
        got[delivered] = True
        if not bool(got.all()):
            return self._resend(dest, sending.msg, int((~got).sum()), now, got, by)
        queue = self.waiting.get(dest)
        if queue:
            return self._start(dest, queue.pop(0), now)
        if sending.msg.kind == KIND_GRAD:        # its answer (a pull, a stop) is awaited
            self.settled[dest] = [sending, now + self._poke_s()]
        return []

    def _resend(self, dest: int, msg: RowChunk, missing: int, now: float,
                got: np.ndarray | None = None, got_by: int | None = None) -> list:
        """
        Send ``msg`` to ``dest`` again (``missing`` rows lacked): counted and logged.

        Whole, or the rows ``got`` lacks where ``dest``'s run ``got_by`` holds the others.
        """
        self.resent += 1
        return [Log('push_resent', float(missing), dest)] + self._start(dest, msg, now, got,
                                                                        got_by)

    def _poke_s(self) -> float:
        """Return how long a settled push waits for its answer before its END goes again."""
        return POKE_END_TIMEOUTS * self.end_timeout_s

    def _pokes(self, now: float) -> list:
        """
        Repeat the END of each settled push whose answer is overdue (a push system's poke).

        A robot whose push the server acknowledged waits for the pull; a server that died
        before sending it and started again (push systems keep no state) knew nothing of
        that robot, which sent nothing more and gave up at ``server_timeout``. The server's
        run that took the push answers the END with its final ack again, or with nothing
        (closed long ago); a new one, which never had the rows, with a final ack of none:
        the push then goes again whole (``_take_ack``) and the new server takes the robot
        back (``policies/async_ps.py``). As Rog's waiting robots repeat their END, each one
        counted in the peer's ``PeerLink`` (the writer holds it until an ack covers it).
        Each poke goes ``END_COPIES`` times, as every END does: a lost one left a robot of a
        restarted server idle a poke interval more (the receiver answers the copy from its
        record).
        """
        out = []
        for dest in sorted(self.settled):
            entry = self.settled[dest]
            if now < entry[1]:
                continue
            entry[1] = now + self._poke_s()
            tr = entry[0].transfer
            self.pokes += 1
            end = RowChunk(
                transfer_id=tr.transfer_id, seq=tr.next_seq, sender=self.me, receiver=dest,
                kind=tr.kind, clock=tr.clock, flags=FLAG_END, codec=tr.codec_id,
                incarnation=self.incarnation)
            for _ in range(END_COPIES):      # a lost one cost a poke interval (8 s)
                again = dataclasses.replace(end)
                # in the writer's ledger as any END, covered by the final ack it draws
                tr.wire_end[-1] = tr.peer.write(tr.peer.wire_bytes(again))
                out.append(Send(dest, again))
        return out

    def on_tick(self, now: float) -> list:
        """Drive every transfer's timers (window release, END at the bound, END repeats)."""
        out = []
        for dest in sorted(self.sending):
            out += self._sends(dest, self.sending[dest].transfer.on_tick(now))
        self._retire(now)
        return out + self._pokes(now) + self._replaced_gone(now)

    def _replaced_gone(self, now: float) -> list:
        """
        Forget ``replaced_by`` once our robots stopped acking that run; the log (once).

        Why: ``replaced_by`` never reset: the run that replaced us died (no robot acks it),
        we were the live server run again, and owed no robot its stop and sent none for
        good. Unacked as long as a replaced robot run is silent before it is retired
        (``_retire_s``: 20 s by default; a live run's pulls are acked every iteration, its
        stop orders by the robots' pokes) while our robots speak to us, it is taken for
        gone: counted from a robot's first word since the last ack to it
        (``replaced_spoke``), not from that ack. A fleet that computed longer than that
        (slow robots ack nothing while they compute) made us take the live run for gone
        each iteration, and answer pushes with our stop order again until the acks proved
        it anew: a robot restarted then that heard our answer first stopped. O(1).
        """
        if (not self.replaced_by or self.replaced_spoke is None
                or now < self.replaced_spoke + self._retire_s()):
            return []
        run, self.replaced_by, self.replaced_spoke = self.replaced_by, 0, None
        self.other_servers, self.replaced_acked = {}, {}
        return [Log('server_not_replaced', 1.0, SERVER,
                    {'run': int(run), 'silent_s': float(now - self.replaced_heard)})]

    def served_by_replacing(self, peer: int, now: float, within_s: float) -> bool:
        """
        Note that robot ``peer``'s live run said it is alive (its status) at ``now``.

        Why: ``_replaced_gone`` took the run that replaced us for gone once our robots spoke
        to us (pokes) and acked it nothing for ``_retire_s`` (20 s): a GSP robot held by
        the live run (its group's slowest robot computes) pokes and acks nothing until it
        is let go, and the slowest computes on, acking nothing either, so 20 s of holding
        made us serve again and send our stop orders while the live run trained on. A
        robot whose last word to us was an ack to that run (the model it pulled: it
        computes on it), and that still says it is alive, was served by that run within
        one of its iterations: the silence restarts (``replaced_spoke``). Only within
        ``within_s`` of that ack (``push_systems.STATUS_PATIENCE_S``): a hung computation's
        statuses come for ever. A robot that pushed or poked since is not counted: once
        every robot waits for a pull (the run that replaced us dead), 20 s of their
        pokes unanswered by acks to it end it as before. An ack later than ``now`` is not
        counted (a checkpoint's from another boot, before ``ServerAdapter.load_state_dict``
        moved such times onto this boot's clock; a damaged one). True when counted. O(1).
        """
        run, acked = self.replaced_acked.get(peer, (0, None))
        if (not self.replaced_by or run != self.replaced_by
                or not 0.0 <= now - acked <= within_s):
            return False
        self.replaced_spoke = None
        return True

    def _retire_s(self) -> float:
        """Return how long a replaced run must be silent to be retired for good (freed)."""
        return RETIRE_LEASES * max(self.lease_s, self._poke_s())

    def _replaced_buffers(self) -> set:
        """
        Return the ``(sender, run)`` of every replaced run holding rows or open buffers.

        Why: those are the model-sized buffers ``_retire`` may free; O(held + open transfers),
        a few per sender (``HELD_RUNS``, the receivers' bound of open transfers).
        """
        slots = set(self.partial)
        for form in self.forms.values():
            slots.update(k[:2] for k in form.receiver.open)
        return {(s, r) for s, r in slots
                if r and self.peer_runs.get(s) and r != self.peer_runs[s][-1]}

    def _retire(self, now: float) -> None:
        """
        Free the held rows and open receive buffers of replaced runs silent for good.

        A replaced run silent ``_retire_s`` since its last chunk and since a newer run of its
        sender spoke (``run_heard``) is dead: a live one (a rank given twice, a run to be
        taken back) speaks within that (``RETIRE_LEASES``) and keeps its rows. Before, they
        were freed only when two newer runs of its sender had been heard (``_prune_held``).
        """
        limit = self._retire_s()
        for slot in self._replaced_buffers():
            heard = self.run_heard.get(slot)
            if heard is None or now < heard + limit:
                continue
            held = self.partial.pop(slot, None)
            if held is not None:
                self.freed[slot] = held[1]
                self._bound_freed(slot[0])
            for form in self.forms.values():
                form.receiver.drop_open(*slot)
            self.retired += 1

    def _spoke(self, sender: int, run: int, now: float, newer: bool = False) -> None:
        """
        Note that ``sender``'s run ``run`` spoke at ``now`` (``newer``: its other runs too).

        Why: a replaced run is retired once silent for ``_retire_s`` after both its own last
        chunk and the first word of the run that replaced it (``_retire``). Kept for the
        sender's runs remembered (``peer_runs``) only: O(``KEEP_RUNS``).
        """
        runs = self.peer_runs.get(sender, [])
        if run in runs:
            self.run_heard[(sender, run)] = now
        if not newer:
            return
        for other in runs:
            self.run_heard[(sender, other)] = now
        for slot in [k for k in self.run_heard if k[0] == sender and k[1] not in runs]:
            del self.run_heard[slot]
        self._bound_freed(sender)

    def _bound_freed(self, sender: int) -> None:
        """
        Keep ``sender``'s last ``FREED_NOTES`` notes of freed rows, oldest dropped first.

        Why: a note outlives its run's place among the runs remembered (``FREED_NOTES``);
        the bound keeps a rank that restarts for ever from piling them up. O(notes).
        """
        mine = [k for k in self.freed if k[0] == sender]
        for slot in mine[:-FREED_NOTES]:
            del self.freed[slot]

    def next_wakeup(self) -> float | None:
        """Return when ``on_tick`` is next due, None when no transfer waits for a timer."""
        times = [t for t in (s.transfer.next_wakeup() for s in self.sending.values())
                 if t is not None] + [poke for _, poke in self.settled.values()]
        limit = self._retire_s()
        times += [self.run_heard[slot] + limit for slot in self._replaced_buffers()
                  if slot in self.run_heard]         # a replaced run's buffers to free
        if self.replaced_by and self.replaced_spoke is not None:
            times.append(self.replaced_spoke + limit)   # the run that replaced us gone
        return min(times) if times else None

    def bytes_past_ack(self, dest: int) -> int:
        """Return what the transfer under way to ``dest`` has sent past its last ack (0: none)."""
        sending = self.sending.get(dest)
        return sending.transfer.bytes_past_ack() if sending is not None else 0

    def wire_past_ack(self, dest: int) -> int:
        """Return the wire bytes of every transfer to ``dest`` not yet covered by an ack."""
        link = self.peers.get(dest)
        return link.unacked() if link is not None else 0

    # ------------------------------------------------------------------ receiving
    def take_revived(self) -> list:
        """
        Return the robots' runs taken back since the last call (``RunRevived``), and forget them.

        The server's engine refuses the pushes of a run it retired until told it is the live
        one (``PushServer.revive``): its driver takes these after each ``on_message``, by this
        call rather than by the ``worker_revived`` log's name, which a rename would silently
        make miss (the robot's pushes then refused for good).
        """
        taken, self.revived_runs = self.revived_runs, []
        return taken

    def on_message(self, msg, now: float):
        """
        Take one message from the bus: ``(message for the engine or None, actions)``.

        Acks of our transfers move them on; chunks of a peer's transfer are acknowledged, and
        its last one (END) yields the whole message for the engine once every row arrived,
        with the final ack among the actions (sent after the engine took the message).
        An END with a payload, an older revision's whole dense message, is refused (a
        ``reject`` naming the cause). Anything else is the engine's.
        """
        sender = getattr(msg, 'sender', self.me)
        if self.replaced_by and sender != self.me and self.replaced_spoke is None:
            self.replaced_spoke = now        # (``_replaced_gone``; an ack to that run: None)
        if self.replaced_acked and sender != self.me:
            # (``served_by_replacing``: its last word; an ack to another run notes it again)
            self.replaced_acked.pop(sender, None)
        if isinstance(msg, TransferAck):
            return None, self._on_ack(msg, now)
        form = self.forms.get(msg.codec) if isinstance(msg, RowChunk) else None
        if form is None:
            self.settled.pop(getattr(msg, 'sender', SERVER), None)    # answered (a stop)
            return msg, []
        if msg.target_incarnation and msg.target_incarnation != self.incarnation:
            # a pull for an earlier run of ours (the server had not heard of this one yet):
            # never ours to take, nor to acknowledge (its sender drops it on our first word)
            self.foreign += 1
            return None, []
        runs = self.peer_runs.get(msg.sender)
        started = []
        try:
            self._precheck(msg, form, current=bool(runs) and msg.incarnation == runs[-1])
        except MessageError as err:
            self.rejects += 1
            return None, [Log('reject', 1.0, msg.sender, {'error': str(err)})]
        self._spoke(msg.sender, msg.incarnation, now)
        if runs and msg.incarnation in runs[:-1]:
            # a late chunk of a run the sender replaced: taken, it made that run the current
            # one again and dropped the new run's transfer under way (sent again whole);
            # unless that run keeps speaking: then it is the live one (_revive)
            if not self.revival.alive((msg.sender, msg.incarnation), now, self.end_timeout_s):
                self.superseded += 1
                return None, []
            started = self._revive(msg.sender, msg.incarnation, now)
        try:
            started += self._heard(msg.sender, msg.incarnation, now)
            self._superseded(msg.sender, msg.incarnation)
            acks, closed = form.receiver.on_chunk(msg, now)
        except MessageError as err:
            self.rejects += 1
            return None, started + [Log('reject', 1.0, msg.sender, {'error': str(err)})]
        if closed is None:
            return None, started + self._stamped(acks, msg.sender, msg.incarnation)
        complete, buf, _, ranges = closed.close()
        if self._rest_of_freed(msg.sender, closed, np.asarray(complete)):
            # no chunk taken: its sender sends the message again whole (``_finished``)
            final = form.receiver.final_ack(closed, np.zeros(0, dtype=ranges.dtype), now)
            final.bytes_received = 0             # (recorded: its END's copy gets the same)
            return None, started + self._stamped([final], msg.sender, msg.incarnation)
        final = form.receiver.final_ack(closed, ranges, now)
        whole = None
        complete, data = self._with_earlier(msg.sender, closed, form, np.asarray(complete),
                                            buf.numpy())
        if bool(complete.all()):
            whole = RowChunk(transfer_id=closed.transfer_id, seq=0, sender=closed.sender,
                             receiver=self.me, kind=closed.kind, clock=closed.clock,
                             flags=FLAG_END, codec=form.codec,
                             payload=data.data, incarnation=closed.incarnation)
            self.settled.pop(msg.sender, None)       # answered (a pull)
        return whole, started + self._stamped([final], msg.sender, msg.incarnation)

    def _rest_of_freed(self, sender: int, closed, complete: np.ndarray) -> bool:
        """
        Tell whether ``closed`` carried the rest of a message whose held rows were freed.

        Why: a replaced run silent past ``RETIRE_LEASES`` loses its held rows (``_retire``);
        alive after all (its link down, taken back), it sends the rows missing only, in the
        next transfer id. Held alone and answered as arrived, they made its robot take the
        push as delivered while the server never had it whole (the push lost; the robot
        waited for a pull for good). Answered with no row, the robot sends it again whole
        (``_finished``).
        """
        slot = (sender, int(closed.incarnation))
        tid = self.freed.get(slot)
        if tid is None or int(closed.transfer_id) < tid + 1:
            return False
        del self.freed[slot]
        return int(closed.transfer_id) == tid + 1 and not bool(complete.all())

    def _with_earlier(self, sender: int, closed, form: _Form, complete: np.ndarray,
                      data: np.ndarray) -> tuple:
        """
        Return ``(rows held, bytes)`` of the message ``closed`` carried, with earlier rows.

        A message that ended with rows missing is sent again with those rows only
        (``_finished``): its rows delivered before are kept here, one message per sender's
        run (``HELD_RUNS`` of its runs at most, ``_prune_held``), by what names it (the run,
        kind, clock and codec) and the id of its last transfer, and the new ones added.
        Kept until whole; a transfer of another message of that run replaces them, one of
        another run leaves them. A transfer continues the message held only if it is the
        next of that run (its id one more): the rows missing go at once after the final ack
        of the transfer that lacked them, and one transfer at a time goes to a peer. A pull
        dropped half-way (the robot's run replaced, then taken back) left rows held under
        the key of the next model of that clock (GSP's Ready): arrived whole, that model
        took them in its stead; arrived with rows missing too, it was completed with the
        dropped model's rows, a mix of the two handed to the engine. Its sender skips an id
        after a pull it drops (``_drop_pulls``), so that the next never reads as its rest.

        A transfer of that run closed again (its answer forgotten: the run was taken back,
        ``_revive``, and its END came again) continues the message held if it is the held
        one's, and leaves it alone if older. Taken as another message's, it dropped the rows
        held of the transfers before, which its sender, told they arrived, never sent again:
        the message was never whole, and the robot took its push as delivered.
        """
        run = int(closed.incarnation)
        key = (run, int(closed.kind), int(closed.clock), form.codec)
        tid = int(closed.transfer_id)
        earlier = self.partial.get((sender, run))
        if earlier is not None and tid < earlier[1]:
            return complete, data
        self.partial.pop((sender, run), None)
        if (earlier is not None and earlier[0] == key and tid - earlier[1] in (0, 1)
                and not bool(complete.all())):
            _, _, held, kept = earlier
            new = np.flatnonzero(complete & ~held)
            if new.size:
                rows = RowBytes(form.layout, closed.row_nbytes)
                rows.scatter(kept, new, rows.gather(data, new))
            complete, data = held | complete, kept
        if not bool(complete.all()):
            self.partial[(sender, run)] = (key, tid, complete, data)
            self._prune_held(sender)
        return complete, data

    def _prune_held(self, sender: int) -> None:
        """
        Drop the held rows of ``sender``'s runs other than its last ``HELD_RUNS`` heard.

        Called whenever its runs change (``_heard``, ``_revive``) or rows are held: each held
        message is a model-sized buffer, so a robot that restarts mid-transfer again and again
        must not pile them up. A run sending no incarnation (0, never heard as a run) has one.
        Each drop is noted in ``freed`` (as ``_retire``'s): that run, alive after all, sends
        its message again whole instead of a rest the server could never complete.
        """
        recent = set(self.peer_runs.get(sender, [])[-HELD_RUNS:]) | {0}
        for slot in [k for k in self.partial if k[0] == sender and k[1] not in recent]:
            self.freed.pop(slot, None)               # (the newest note last: kept longest)
            self.freed[slot] = self.partial.pop(slot)[1]
        self._bound_freed(sender)

    def _precheck(self, msg: RowChunk, form: _Form, current: bool) -> None:
        """
        Refuse a chunk that no run of its sender could have sent us (``MessageError``).

        Stateless, before anything changes for its run: a malformed chunk of a replaced run
        counted towards taking that run back (``RevivalWatch``), and could do it, before it
        was checked; one of a run new to us dropped the current run's open transfers and
        pulls and held its ledger. Every chunk is checked for what needs no state (its
        receiver, an END without payload); one of a run that is not its sender's current
        also as its transfer's first chunk is (``Receiver.check_first``: clock, codec, sizes,
        rows, scales) and for what the engine refuses of any message (a server takes
        gradients from robots, a robot models). A current run's chunks are checked as
        before, once, by the receiver; the bus refused a forged one already (fleet key).
        """
        if msg.receiver != self.me:
            raise MessageError(f'chunk for {msg.receiver}, not for {self.me}')
        self._check_rank(msg.sender, 'chunk')
        if msg.flags & FLAG_END and len(msg.payload):
            # Before chunked push transfers a dense message was one RowChunk, END and
            # payload at once (no schema_version tells): taken as a transfer's END it
            # closed with no rows and was dropped without a word.
            raise MessageError(
                f'a dense message sent whole ({len(msg.payload)} bytes in its END): its '
                f'sender runs a rog_ros from before chunked push-system transfers; '
                f'run every robot from the same revision')
        if current:
            return
        kind = KIND_GRAD if self.me == SERVER else KIND_UPDATE
        if msg.kind != kind:
            raise MessageError(f'chunk of kind {msg.kind}, but {self.me} takes kind {kind} only')
        if self.me == SERVER and msg.sender < 0:
            raise MessageError(f'chunk from unknown worker {msg.sender}')
        if self.me != SERVER and form.codec != 0:
            raise MessageError(f'chunk of codec {msg.codec}: a robot takes dense models only')
        form.receiver.check_first(msg)

    def _check_rank(self, sender: int, what: str) -> None:
        """
        Refuse (``MessageError``) a ``what`` from a sender that is no peer of ours in the fleet.

        Asked before anything is kept for its sender: a rank past the fleet's (a forgery, a
        robot started with another ``--workers``) opened a model-sized receive buffer per
        rank, and held rows too, without bound. A robot hears its server alone (its inbox
        has no other writer), and a server its robots: another robot's rank let a forger make
        a robot hold buffers for every rank of the fleet, and hand its engine their message.
        """
        if self.n_workers is None:
            return
        if self.me != SERVER:
            if sender == SERVER:
                return
            raise MessageError(f'{what} from rank {sender} to robot {self.me}: a robot takes '
                               f'chunks and acks from its server only (a forgery: give the '
                               f'fleet a key, --fleet-key-file)')
        if 0 <= sender < self.n_workers:
            return
        if sender == SERVER:
            raise MessageError(f'{what} from the server to the server: only robots send to it '
                               f'(a forgery: give the fleet a key, --fleet-key-file)')
        raise MessageError(f'{what} from rank {sender}, outside this fleet of '
                           f'{self.n_workers} robots (ranks 0..{self.n_workers - 1}): give '
                           f'every node the same --workers')

    def _superseded(self, sender: int, incarnation: int) -> None:
        """
        Drop the open transfers of ``sender``'s other runs once a chunk of a new run came.

        A robot restarted mid-transfer never finishes its earlier run's transfer: its
        model-sized buffer stayed open for good, and after two such restarts the receiver's
        bound of two open transfers per sender refused every transfer of that robot.
        """
        if self.peer_incarnation.get(sender) == incarnation:
            return
        self.peer_incarnation[sender] = incarnation
        for form in self.forms.values():
            receiver = form.receiver
            for inc in {k[1] for k in receiver.open if k[0] == sender} - {incarnation}:
                receiver.drop_open(sender, inc)

    def _heard(self, peer: int, incarnation: int, now: float) -> list:
        """
        Note a run of ``peer`` that spoke; a new one after another holds its ledger a lease.

        It also ends our pulls to the earlier run (``_drop_pulls``); returns what that starts.

        As Rog's engines do (``PeerLink.hold``): a peer that crashed and came back within
        its lease keeps its old reader matched, and our writer keeps for it all written
        since its last ack, until that lease ends. The new run's acks freed it: a pull sent
        again went on, and the writer held 13 MB for the dead run, past the 8 MiB mark.
        """
        runs = self.peer_runs.setdefault(peer, [])
        if not incarnation or incarnation in runs:
            self._spoke(peer, incarnation, now)
            return []
        earlier = bool(runs)
        runs.append(incarnation)
        del runs[:-(KEEP_RUNS + 1)]            # as the engine: KEEP_RUNS past and the current
        self._prune_held(peer)
        self._spoke(peer, incarnation, now, newer=True)
        if not earlier:
            return []
        self._peer(peer).hold(now + self.lease_s)
        return self._drop_pulls(peer, now)

    def _revive(self, peer: int, incarnation: int, now: float) -> list:
        """
        Take back run ``incarnation`` of ``peer``, replaced by mistake; return what that starts.

        Runs are random ids, heard in the order the network brings them: a late chunk of a
        run that died before its successor was first heard (a push still on the way when
        the robot restarted) made that dead run the newest, and the live one's chunks were
        dropped for good (its robot stalled, repeating its END, until it gave up). A dead
        run's late chunks all come within a network delay; a live one keeps repeating its
        END (``RevivalWatch``, as Rog's server and robots tell them apart). Pulls under way
        to the run it replaced go (they answer the dead run); the server's engine is told
        by a ``RunRevived`` record (``take_revived``, ``ServerAdapter``), the operator by the
        ``worker_revived`` log; two live processes of one robot by ``duplicate_rank``
        (``revival.DuplicateRanks``).
        """
        runs = self.peer_runs[peer]
        replaced = runs[-1]
        runs.remove(incarnation)
        runs.append(incarnation)
        self._prune_held(peer)
        self._spoke(peer, incarnation, now, newer=True)
        self.revived += 1
        self.revival.keep(lambda key: key[0] != peer or key[1] in runs[:-1])
        self._peer(peer).hold(now + self.lease_s)
        if peer == SERVER:
            return [Log('server_revived', 1.0, self.me,
                        {'run': int(incarnation), 'retired': int(replaced)})] + \
                self._drop_pulls(peer, now)
        for form in self.forms.values():
            # its pushes' answers (a pull, or a model for a new run's) went to the run it
            # replaced and were dropped with it: its next END, answered with the cached final
            # ack of a push applied, sent nothing again and it waited for a pull for good.
            # Its END now draws a final ack of nothing; the push goes again whole and the
            # engine, told, takes it as a new run's (dropped and answered: not applied twice)
            form.receiver.forget_closed(peer, incarnation)
        said = peer in self.duplicate_ranks
        self.revived_runs.append(RunRevived(int(peer), int(incarnation), int(replaced)))
        return [Log('worker_revived', 1.0, peer,
                    {'run': int(incarnation), 'retired': int(replaced), 'duplicate': said})] + \
            self._duplicates.revived(peer, int(incarnation), int(replaced)) + \
            self._drop_pulls(peer, now)

    def _drop_pulls(self, peer: int, now: float) -> list:
        """
        Forget the pulls under way or queued to ``peer``'s earlier run (a new one spoke).

        A pull answers a push of the run it goes to: that run is gone, and the new one
        refuses it (``target_incarnation``); sent on, the transfer would repeat its END for
        good, and a queued one would go to the new run after its own. The server's engine
        answers the new run's first push with its own pull. Pushes to a restarted server
        stay: they are for the server whatever its run. Counted in ``dropped_pulls``; returns
        the first chunks of a message that waited behind a dropped one. A transfer id is
        skipped after a pull dropped under way: the peer's run, if it lives after all, holds
        the rows that pull brought, and takes a transfer of the next id for their rest
        (``_with_earlier``).
        """
        sending = self.sending.get(peer)
        if sending is not None and sending.msg.kind == KIND_UPDATE:
            del self.sending[peer]
            self.next_tid[peer] += 1
            self.dropped_pulls += 1
        queue = self.waiting.pop(peer, [])
        kept = [m for m in queue if m.kind != KIND_UPDATE]
        self.dropped_pulls += len(queue) - len(kept)
        if kept:
            self.waiting[peer] = kept
        if peer not in self.sending and kept:
            return self._start(peer, self.waiting[peer].pop(0), now)
        return []

    def _stamped(self, acks: list, peer: int, target: int) -> list:
        """Return sends of ``acks`` to run ``target`` of ``peer``, stamped with our run."""
        for ack in acks:
            ack.incarnation = self.incarnation
            ack.target_incarnation = target
        return [Send(peer, ack) for ack in acks]

    def _on_ack(self, ack: TransferAck, now: float) -> list:
        """
        Move our transfer to the acknowledging peer on (late or foreign acks: nothing).

        An ack for an earlier run of ours (``target_incarnation``) is foreign: our transfer
        ids start at 1 in every run, so its final ack, taken, ended our transfer of the same
        id as delivered, rows the peer never had, and the message was never sent again.
        Nor is its sender's run noted (``_heard``): it answered a run of ours that is gone,
        and may be gone itself (a dead server run's late ack to our run before a restart);
        noted, a run never heard otherwise became the peer's newest and retired its live
        run, whose acks never take it back (only its chunks do): a robot then set the live
        server's stop orders aside. An ack from a peer we never sent a transfer to (no
        writer ledger: garbage, forged) answers nothing of ours: noted, its rank and runs
        grew ``peer_runs`` and ``peers`` without bound. One from a rank outside the fleet is
        refused (``_check_rank``).
        """
        if ack.receiver != self.me:
            return []
        try:
            self._check_rank(ack.sender, 'ack')
        except MessageError as err:
            self.rejects += 1
            return [Log('reject', 1.0, ack.sender, {'error': str(err)})]
        if ack.sender not in self.peers:
            return []
        if ack.target_incarnation != self.incarnation:
            if self.me == SERVER and ack.target_incarnation:
                return self._another_server(ack, now)
            return []
        started = self._heard(ack.sender, ack.incarnation, now)
        return started + self._take_ack(ack, now)

    def _another_server(self, ack: TransferAck, now: float) -> list:
        """
        Note a robot's ack to another server run; set ``replaced_by`` once proved (its log).

        Why: a replaced server run (a zombie) cannot tell from its own state that another
        serves its robots. Acks to that run that keep coming (``REPLACED_AFTER_END_TIMEOUTS``)
        prove it; a late burst does not. Counted only from the robot's run we take as live
        (``peer_runs``): an old process of that rank (a robot restarted while its old one
        still runs) that answers a zombie server's pulls made the live server, which serves
        the robot's live run, take itself for replaced, and leave its stop orders unrepeated.
        Said once (``server_replaced``: the node's log, ``events.csv``). O(1): ``KEEP_RUNS``
        other runs noted at most. Once replaced, acks to a third run proved as long name
        it (a newer run replaced the one that replaced us: ``replaced_by`` follows it), and
        those to the run named keep it (``_replaced_gone``: silent, it is forgotten).
        """
        runs = self.peer_runs.get(ack.sender)
        if not runs or ack.incarnation != runs[-1]:
            return []
        run = int(ack.target_incarnation)
        self.replaced_acked[ack.sender] = (run, now)     # (``served_by_replacing``)
        if run == self.replaced_by:
            self.replaced_heard, self.replaced_spoke = now, None
            return []
        seen = self.other_servers.setdefault(run, [now, 0])
        seen[1] += 1
        if len(self.other_servers) > KEEP_RUNS:
            del self.other_servers[min(self.other_servers,
                                       key=lambda r: self.other_servers[r][0])]
        if (seen[1] <= REVIVE_AFTER_POKES
                or now - seen[0] < REPLACED_AFTER_END_TIMEOUTS * self.end_timeout_s):
            return []
        self.replaced_by, self.replaced_heard, self.replaced_spoke = run, now, None
        self.other_servers = {}
        return [Log('server_replaced', 1.0, SERVER,
                    {'run': run, 'acks': int(seen[1]), 'span_s': float(now - seen[0]),
                     'robot': int(ack.sender)})]

    def _take_ack(self, ack: TransferAck, now: float) -> list:
        """Move our transfer to ``ack``'s sender on with an ack for our run."""
        sending = self.sending.get(ack.sender)
        settled = self.settled.get(ack.sender)
        if (sending is None and settled is not None and ack.final
                and ack.transfer_id == settled[0].transfer.transfer_id
                and ack.bytes_received < int(settled[0].transfer.plan.nbytes.sum())):
            # the answer to a poke of a run that never had the push (a restarted server):
            # it read the pokes, so it covers them in the ledger (and says the peer is alive).
            # Fewer bytes than that transfer carried: a push's last transfer may carry only
            # the rows an earlier one lost, and its answer then has fewer than the push's
            # bytes from the very run that took it (sent whole again, refused: invalid)
            self.peers[ack.sender].on_ack(ack, now)
            del self.settled[ack.sender]
            return self._resend(ack.sender, settled[0].msg, settled[0].form.layout.n_rows, now)
        if sending is None or ack.transfer_id != sending.transfer.transfer_id:
            # late or duplicate, of an earlier transfer to that peer: it covers what was
            # written before it and says the peer is alive (a chunk held at the bound goes)
            link = self.peers.get(ack.sender)
            if link is not None and link.on_ack(ack, now) and sending is not None:
                return self._sends(ack.sender, sending.transfer.pump(now))
            return []
        tr = sending.transfer
        if not ack.final:
            return self._sends(ack.sender, tr.on_ack(ack, now))
        delivered = tr.on_final(ack, now)
        if delivered is None:
            return []
        return self._finished(ack.sender, delivered, now, int(ack.incarnation),
                              empty=not ack.bytes_received and not len(ack.chunk_ranges))


__all__ = ['FREED_NOTES', 'PUSH_CHUNK_BYTES', 'PUSH_ROW_ELEMENTS', 'PUSH_WINDOW', 'PushTransfers',
           'RawValues', 'REPLACED_AFTER_END_TIMEOUTS', 'RunRevived', 'SPARSE_WIRE_CODEC',
           'SparseWords', 'dense_layout']
