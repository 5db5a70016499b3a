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
Near-valid messages a fuzzer of the engines found harmful, one test each.

Each case was a message that a receiver took although its sender could never have sent it:
a fragment counted twice, a chunk numbered past its transfer's END, an END of another clock,
a NaN in a row that never completed, a push of a worker that had been stopped. Every one
now leaves the model as it was, and no worker waits for ever.
"""

import copy

import numpy as np
from rog_ros.core.compress import make_codec
from rog_ros.core.rows import RowLayout
from rog_ros.protocol import messages as m
from rog_ros.protocol.actions import Send
from rog_ros.protocol.policies import make_policy
from rog_ros.protocol.ps import ServerEngine
from rog_ros.protocol.worker import WorkerEngine
import torch

SHAPES = [(16, 3, 3, 3), (16,), (32, 16, 3, 3), (32,), (10, 32), (10,)]


def _fleet(codec='row_sign', chunk_bytes=256, **server_options):
    """Return a rog:4 server engine and its two workers, started, on a small CNN layout."""
    policy, coder = make_policy('rog:4'), make_codec(codec)
    layout = RowLayout(SHAPES)
    w0 = torch.zeros(layout.n_params)
    server = ServerEngine(layout, coder, policy, 2, w0, lr=0.1, chunk_bytes=chunk_bytes,
                          **server_options)
    workers = [WorkerEngine(r, 2, layout, coder, policy, w0, chunk_bytes=chunk_bytes)
               for r in range(2)]
    for w in workers:
        w.start(0.0)
    return server, workers


def _deliver(server, workers, queue, now, intercept=None):
    """Deliver ``queue``'s sends and everything they cause; ``intercept(msg)`` -> keep it."""
    uplink = []
    while queue:
        send = queue.pop(0)
        if intercept is not None and not intercept(send.msg):
            continue
        if send.dest == m.SERVER:
            uplink.append(copy.deepcopy(send.msg))
            out = server.on_message(send.msg, now)
        else:
            out = workers[send.dest].on_message(send.msg, now)
        queue += [a for a in out if isinstance(a, Send)]
    return uplink


def _iterate(server, workers, gen, now, intercept=None):
    """Run one iteration of both workers (random gradients); return the uplink messages."""
    queue = [a for w in workers
             for a in w.on_compute_done(torch.randn(w.w.numel(), generator=gen), now)
             if isinstance(a, Send)]
    return _deliver(server, workers, queue, now, intercept)


def _once(sender, wanted, act):
    """
    Return ``(intercept, acted)``: ``act(msg)`` on the first uplink chunk ``wanted`` of it.

    ``intercept`` is `_deliver`'s: it lets every message through after ``act`` ran on it;
    ``acted`` lists the messages ``act`` ran on (one at most).
    """
    acted = []

    def intercept(msg):
        """Run ``act`` on the first matching chunk; deliver every message."""
        if not acted and msg.TYPE == 'RowChunk' and msg.sender == sender and \
                msg.receiver == m.SERVER and wanted(msg):
            acted.append(msg)
            act(msg)
        return True
    return intercept, acted


def _data(msg):
    """Tell whether ``msg`` is a data chunk (not an END)."""
    return not msg.flags & m.FLAG_END


def _copy_to(server, **changes):
    """Return an act that sends the server a copy of the chunk with ``changes``, first."""
    def act(msg):
        """Send the changed copy before the chunk itself."""
        other = copy.deepcopy(msg)
        for name, value in changes.items():
            setattr(other, name, value(msg) if callable(value) else value)
        server.on_message(other, 1.0)
    return act


def _tick(server, workers, start, seconds):
    """Tick every engine every 50 ms for ``seconds`` (retries, pokes); return the time."""
    now = start
    for _ in range(int(seconds / 0.05)):
        now += 0.05
        queue = [a for e in [*workers, server] for a in e.on_tick(now) if isinstance(a, Send)]
        _deliver(server, workers, queue, now)
    return now


def _chunk(server, workers, rank, **fields):
    """Return a RowChunk of worker ``rank`` to the server with the engines' incarnations."""
    head = {'transfer_id': 10 ** 4, 'sender': rank, 'receiver': m.SERVER,
            'kind': m.KIND_GRAD, 'clock': server.clock[rank], 'codec': 2,
            'incarnation': workers[rank].incarnation,
            'target_incarnation': server.incarnation}
    return m.RowChunk(**{**head, **fields})


def test_one_fragment_counted_twice_is_refused_and_applies_nothing():
    # the same 11 bytes of a 22-byte row under seqs 0 and 1 made the row "complete": the
    # 11 bytes never sent decoded as sign bits and were applied
    server, workers = _fleet('row_sign', chunk_bytes=16)
    _iterate(server, workers, torch.Generator().manual_seed(5), 0.0)
    row = 36
    assert int(server.receiver.row_nbytes[row]) == 22
    before, rejects = server.w_srv.clone(), server.rejects
    fragment = np.float32(1.0).tobytes() + b'\xff' * 7
    tensor = np.array([int(server.layout.row_tensor[row])], np.uint32)
    for seq in (0, 1):
        server.on_message(_chunk(server, workers, 0, seq=seq, flags=m.FLAG_FRAGMENT,
                                 frag_offset=0, payload=fragment, tensor_ids=tensor,
                                 scales=np.ones(1, np.float32),
                                 row_ranges=np.array([row, row + 1], np.uint32)), 1.0)
    out = server.on_message(_chunk(server, workers, 0, seq=2, flags=m.FLAG_END), 1.0)
    assert server.rejects == rejects + 1
    finals = [a.msg for a in out if isinstance(a, Send) and a.msg.TYPE == 'TransferAck']
    # half a row is acked as nothing: the sender keeps the row for its next push
    assert [list(f.chunk_ranges) for f in finals] == [[]]
    assert torch.equal(server.w_srv, before)        # the half row is not applied


def test_a_chunk_carrying_rows_of_another_chunk_is_refused():
    server, workers = _fleet('scaled_sign')
    gen = torch.Generator().manual_seed(1)
    _iterate(server, workers, gen, 0.0)
    intercept, copied = _once(1, _data, _copy_to(server, seq=lambda msg: msg.seq + 1000))
    rejects = server.rejects
    _iterate(server, workers, gen, 1.0, intercept)
    # the copy came first and opened the transfer; the real chunk carries the same rows
    assert copied and server.rejects == rejects + 1


def test_a_chunk_numbered_past_the_end_leaves_no_worker_waiting():
    # an ack naming chunk 40 of a 10-chunk push was refused by the worker, whose END
    # retries got the same answer for ever: it stayed in 'pushing' although the server
    # had applied the push
    server, workers = _fleet('scaled_sign')
    gen = torch.Generator().manual_seed(1)
    _iterate(server, workers, gen, 0.0)
    intercept, copied = _once(1, _data, _copy_to(server, seq=40))
    _iterate(server, workers, gen, 1.0, intercept)
    _tick(server, workers, 1.0, 20.0)
    assert copied
    assert workers[1].push is None and workers[1].state != 'pushing'
    assert min(server.clock) >= 2


def test_an_end_of_another_clock_does_not_close_the_transfer():
    server, workers = _fleet('scaled_sign')
    gen = torch.Generator().manual_seed(2)
    _iterate(server, workers, gen, 0.0)
    rejects = server.rejects
    intercept, copied = _once(0, lambda msg: not _data(msg),
                              _copy_to(server, clock=lambda msg: msg.clock + 2000))
    _iterate(server, workers, gen, 1.0, intercept)
    assert copied and server.rejects == rejects + 1
    assert server.clock[0] == 2                     # the real END closed it at its clock


def test_a_nan_fragment_of_a_row_that_never_completed_leaves_the_model_finite():
    # the identity codec zeroed the rows left out by multiplying by the mask: NaN x 0 = NaN
    server, workers = _fleet('identity')
    gen = torch.Generator().manual_seed(5)
    _iterate(server, workers, gen, 0.0)
    intercept, spoiled = _once(0, lambda msg: msg.flags & m.FLAG_FRAGMENT,
                               lambda msg: setattr(msg, 'payload', b'\xff' * len(msg.payload)))
    _iterate(server, workers, gen, 1.0, intercept)
    assert spoiled
    assert bool(torch.isfinite(server.w_srv).all())


def test_a_push_of_a_stopped_worker_changes_nothing():
    server, workers = _fleet('row_sign', max_iterations=1)
    uplink = _iterate(server, workers, torch.Generator().manual_seed(0), 0.0)
    assert server.finished and all(server.stopped)
    model, clock = server.w_srv.clone(), list(server.clock)
    for msg in [x for x in uplink if x.TYPE == 'RowChunk' and x.sender == 0]:
        msg = copy.deepcopy(msg)
        msg.transfer_id += 7
        msg.clock = 2
        out = server.on_message(msg, 5.0)
        if msg.flags & m.FLAG_END:      # answered with the stop order
            assert [a.msg.stop for a in out if isinstance(a, Send)] == [True]
    assert torch.equal(server.w_srv, model) and server.clock == clock


def test_a_negative_scale_is_refused():
    # a scale is a mean magnitude (or 1): negative, it flipped every sign of its rows
    server, workers = _fleet('scaled_sign')
    _iterate(server, workers, torch.Generator().manual_seed(3), 0.0)
    before, rejects = server.w_srv.clone(), server.rejects
    row = 0
    size = int(server.receiver.row_nbytes[row])
    out = server.on_message(_chunk(server, workers, 0, seq=0, codec=server.codec.codec_id,
                                   payload=bytes(size),
                                   tensor_ids=np.array([server.layout.row_tensor[row]],
                                                       np.uint32),
                                   scales=np.array([-1.0], np.float32),
                                   row_ranges=np.array([row, row + 1], np.uint32)), 1.0)
    assert [a.info for a in out] == [{'error': 'negative scale'}]
    assert server.rejects == rejects + 1 and not server.receiver.open
    assert torch.equal(server.w_srv, before)


def test_a_schedule_asking_for_a_day_of_sleep_is_refused():
    server, workers = _fleet()
    _iterate(server, workers, torch.Generator().manual_seed(4), 0.0)
    worker = workers[0]
    rejects, sleep = worker.rejects, worker.compute_sleep_s
    worker.on_message(m.Schedule(worker=0, clock=worker.clock, push_deadline_s=-1.0,
                                 compute_sleep_s=86400.0,
                                 incarnation=server.incarnation,
                                 target_incarnation=worker.incarnation), 1.0)
    assert worker.rejects == rejects + 1 and worker.compute_sleep_s == sleep


def test_a_refused_slot_request_leaves_the_workers_run_in_place():
    # a rog server schedules no slots: the request was refused after its new incarnation had
    # retired the worker's live run, whose next push was then dropped as superseded
    server, workers = _fleet()
    gen = torch.Generator().manual_seed(0)
    _iterate(server, workers, gen, 0.0)
    live, rejects = server.worker_inc[0], server.rejects
    server.on_message(m.RowChunk(transfer_id=5, seq=0, sender=0, receiver=m.SERVER,
                                 kind=m.KIND_GRAD, clock=1, flags=m.FLAG_REQUEST, codec=2,
                                 incarnation=12345), 1.0)
    assert server.rejects == rejects + 1
    assert server.worker_inc[0] == live and live not in server.retired[0]
    _iterate(server, workers, gen, 1.1)
    assert server.superseded == 0 and server.clock == [2, 2]


def test_the_join_book_keeps_only_runs_the_engine_knows():
    # every made-up run of a worker left an entry: 20,000 acks, 20,001 entries
    server, workers = _fleet()
    _iterate(server, workers, torch.Generator().manual_seed(0), 0.0)
    for i in range(200):
        server.on_message(m.TransferAck(transfer_id=0, sender=0, receiver=m.SERVER, seq=0,
                                        incarnation=1000 + i), 1.0)
    assert server.worker_inc[0] == 1199
    assert set(server.join_tid[0]) <= {1199, *server.retired[0]}
    assert len(server.join_tid[0]) <= 1 + len(server.retired[0]) <= 9


def test_a_refused_first_message_does_not_name_the_server_run():
    # a worker took the incarnation of the first server message it saw before checking it:
    # after one malformed RowVersions the real server's first message was a "server restart"
    server, workers = _fleet()
    worker = workers[0]
    assert worker.server_incarnation == 0
    worker.on_message(m.RowVersions(receiver=1, n_workers=2, transfer_id=3,
                                    incarnation=server.incarnation + 5), 0.0)
    assert worker.rejects == 1 and worker.server_incarnation == 0
    _iterate(server, workers, torch.Generator().manual_seed(0), 0.0)
    assert worker.server_incarnation == server.incarnation and worker.retired_servers == []
    assert server.clock == [1, 1] and worker.clock == 1


def _worker_of_a_restarted_server():
    """
    Return worker 0, its dead server run and the live one, after the server restarted.

    The scene of the tests of a retired server run's late messages: one iteration with the
    first server run, then a schedule of a new run, which retires the first.
    """
    server, workers = _fleet()
    worker = workers[0]
    _iterate(server, workers, torch.Generator().manual_seed(0), 0.0)
    dead, live = server.incarnation, server.incarnation + 7
    worker.on_message(m.Schedule(worker=0, clock=1, push_deadline_s=1.0, incarnation=live,
                                 target_incarnation=worker.incarnation), 0.5)
    assert worker.server_incarnation == live and dead in worker.retired_servers
    return worker, dead, live


def test_malformed_messages_of_a_retired_server_run_do_not_revive_it():
    # the worker counted a retired server run's message towards its revival before checking
    # it (and un-retired the run before _precheck refused the message): schedules for
    # another robot and acks to another robot of a server run that died proved it alive, and
    # its one late well-formed message then made it this robot's server again
    from rog_ros.protocol.revival import POKE_END_TIMEOUTS
    worker, dead, live = _worker_of_a_restarted_server()
    poke = POKE_END_TIMEOUTS * worker.end_timeout_s
    bad = [m.Schedule(worker=1, clock=1, push_deadline_s=1.0, incarnation=dead,
                      target_incarnation=worker.incarnation),
           m.TransferAck(transfer_id=1, sender=m.SERVER, receiver=1, seq=0, incarnation=dead,
                         target_incarnation=worker.incarnation)]
    rejects = worker.rejects
    for k, msg in enumerate(bad):              # one interval apart
        worker.on_message(msg, 1.0 + k * poke)
    assert worker.rejects == rejects + 2 and dead in worker.retired_servers
    good = m.Schedule(worker=0, clock=1, push_deadline_s=1.0, incarnation=dead,
                      target_incarnation=worker.incarnation)
    out = worker.on_message(good, 1.0 + 2 * poke)    # the dead run's one late message
    assert worker.server_incarnation == live and dead in worker.retired_servers
    assert [a.name for a in out if hasattr(a, 'name')] == ['superseded']


def test_a_chunk_without_the_scales_of_its_rows_is_refused_not_acked_as_applied():
    # its rows stayed without a scale, so they were not applied, but the final ack listed the
    # chunk as arrived and the worker dropped them: lost gradient, and a pull that never came
    server, workers = _fleet()
    intercept, acted = _once(0, _data, _strip_scales)
    _iterate(server, workers, torch.Generator().manual_seed(6), 0.0, intercept)
    assert acted and server.rejects == 1
    now = _tick(server, workers, 0.0, 6.0)            # the END's retry: the rows again
    _iterate(server, workers, torch.Generator().manual_seed(7), now)
    assert server.clock == [2, 2] and server.rejects == 1


def _strip_scales(msg):
    """Take the tensor ids and scales out of a chunk, as an independent sender did."""
    msg.tensor_ids = np.zeros(0, dtype=np.uint32)
    msg.scales = np.zeros(0, dtype=np.float32)


def test_well_formed_messages_of_a_retired_server_run_are_superseded_not_refused():
    # _precheck runs before a retired server run's message counts (2fa191b): every message
    # such a run legitimately sends (a schedule, an ack, a chunk, a fragment past a row's
    # first bytes too, its RowVersions) still passes and is answered as before, superseded.
    # A retired run of another fleet size (the server restarted with the workers count its
    # FleetMismatch asked for) was refused with fleet_size, and the node stops on that: a
    # dead run's late message stopped the robot that the live server counts on
    worker, dead, live = _worker_of_a_restarted_server()
    to_me = {'incarnation': dead, 'target_incarnation': worker.incarnation}
    versions = dict(transfer_id=90, receiver=0, n_workers=2,
                    run_starts=np.array([0], np.uint32), run_lengths=np.array([3], np.uint32),
                    versions=np.array([1, 1], np.int32), **to_me)
    good = [m.Schedule(worker=0, clock=1, push_deadline_s=1.0, **to_me),
            m.TransferAck(transfer_id=1, sender=m.SERVER, receiver=0, seq=0, final=True,
                          **to_me),
            m.RowChunk(transfer_id=90, seq=3, sender=m.SERVER, receiver=0,
                       kind=m.KIND_UPDATE, clock=1, flags=m.FLAG_FRAGMENT, frag_offset=4,
                       row_ranges=np.array([0, 1], np.uint32), payload=b'\x01',
                       codec=worker.codec.codec_id, **to_me),
            m.RowVersions(**versions),
            m.RowVersions(**dict(versions, n_workers=3, versions=np.array([1, 1, 1], np.int32)))]
    rejects = worker.rejects
    for msg in good:                            # all at once: no revival
        out = worker.on_message(msg, 1.0)
        assert [a.name for a in out] == ['superseded'], (type(msg).__name__, out)
    assert worker.rejects == rejects and worker.server_incarnation == live
