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
Only a valid message of a robot's live run counts as hearing it (membership, RowVersions).

A run that sends nothing but malformed messages after it joined (a damaged radio, a fuzzer, a
robot of another revision) was never suspended as absent: each message pushed its absence
deadline before it was refused, could readmit it once suspended, and reset its versions'
lease count. Now it is as absent as a silent robot, to the tick.

The robot's engine keeps no presence of its own, but a message of a new or a retired server
run that passed its stateless checks and was refused only later had already retired the live
run (or counted towards a retired run's revival): now those checks refuse what its handlers
would without state.
"""

import copy

import numpy as np
import pytest
from rog_ros.core.compress import make_codec
from rog_ros.core.rows import RowLayout
from rog_ros.protocol import messages as m
from rog_ros.protocol.actions import Log, Send
from rog_ros.protocol.policies import make_policy
from rog_ros.protocol.ps import ServerEngine
from rog_ros.protocol.worker import WorkerEngine
import torch

SHAPES = [(16, 3, 3, 3), (16,), (32, 16, 3, 3), (32,), (10, 32), (10,)]
ABSENT_S = 20.0     # absence timeout (seconds)
JOINED_AT = 0.5     # every robot's first iteration, pushed and pulled
STEP = 0.25         # the server's tick, and the garbage sender's pace


def _fleet():
    """Return a rog:4 server (absence timeout ABSENT_S) and 3 robots, all past one iteration."""
    policy, coder = make_policy('rog:4', outage_aware=False), make_codec('row_sign')
    layout = RowLayout(SHAPES)
    w0 = torch.zeros(layout.n_params)
    server = ServerEngine(layout, coder, policy, 3, w0, lr=0.1, chunk_bytes=256,
                          absence_timeout_s=ABSENT_S)
    workers = [WorkerEngine(r, 3, layout, coder, policy, w0, chunk_bytes=256)
               for r in range(3)]
    for w in workers:
        w.start(0.0)
    gen = torch.Generator().manual_seed(0)
    queue = [a for w in workers
             for a in w.on_compute_done(torch.randn(w.w.numel(), generator=gen), JOINED_AT)
             if isinstance(a, Send)]
    sent = []
    while queue:
        send = queue.pop(0)
        sent.append(copy.deepcopy(send.msg))
        if send.dest == m.SERVER:
            out = server.on_message(send.msg, JOINED_AT)
        else:
            out = workers[send.dest].on_message(send.msg, JOINED_AT)
        queue += [a for a in out if isinstance(a, Send)]
    assert server.clock == [1, 1, 1] and not server.pending    # all pulled: all computing
    return server, workers, sent


def _garbage(server, workers, uplink, kind):
    """Return a message of robot 2's live run that the server must refuse, of ``kind``."""
    bad = copy.deepcopy(_data_chunk(uplink, 2, m.SERVER))
    bad.transfer_id += 10                     # a push the server does not know yet
    n_rows = server.layout.n_rows
    if kind == 'codec':
        bad.codec = 99
    elif kind == 'rows':
        bad.row_ranges = np.array([n_rows, n_rows + 1], dtype=np.uint32)
    elif kind == 'truncated':
        bad.payload = bad.payload[:-1]
    else:                                     # an ack, addressed to another robot
        bad = m.TransferAck(transfer_id=0, sender=2, receiver=1, seq=0, final=False,
                            incarnation=workers[2].incarnation,
                            target_incarnation=server.incarnation)
    return bad


def _data_chunk(sent, sender, receiver):
    """Return the first data chunk (not an END) from ``sender`` to ``receiver`` in ``sent``."""
    return next(c for c in sent if c.TYPE == 'RowChunk' and c.sender == sender
                and c.receiver == receiver and not c.flags & m.FLAG_END)


def _suspensions(out):
    """Return the workers ``out`` suspends as absent (the logs of the suspension)."""
    return [a.worker for a in out if isinstance(a, Log) and a.name == 'worker_suspended'
            and a.info['reason'] == 'absent']


def _run(server, bad, start, until):
    """Send ``bad`` (a copy) and tick the server every STEP; return {worker: suspended at}."""
    suspended, now = {}, start
    while now < until:
        now += STEP
        out = server.on_message(copy.deepcopy(bad), now)
        assert [a.name for a in out] == ['reject'], out
        for r in _suspensions(server.on_tick(now)):
            suspended.setdefault(r, now)
    return suspended


@pytest.mark.parametrize('kind', ['codec', 'rows', 'truncated', 'misaddressed_ack'])
def test_a_robot_that_sends_only_garbage_is_suspended_as_a_silent_one(kind):
    server, workers, uplink = _fleet()
    bad = _garbage(server, workers, uplink, kind)
    suspended = _run(server, bad, JOINED_AT, JOINED_AT + 2 * ABSENT_S)
    # robots 0 and 1 are silent: robot 2 is suspended with them, at its absence deadline
    assert suspended == {0: JOINED_AT + ABSENT_S, 1: JOINED_AT + ABSENT_S,
                         2: JOINED_AT + ABSENT_S}
    assert server.last_heard[2] == JOINED_AT and not server.active[2]
    assert server.rejects == int(2 * ABSENT_S / STEP)


@pytest.mark.parametrize('numbered', ['late', 'duplicate'])
@pytest.mark.parametrize('kind', ['codec', 'rows', 'truncated'])
def test_garbage_numbered_as_a_copy_is_checked_too(kind, numbered):
    # dropped unread (a late copy of the push closed, a duplicate of a chunk held), it kept
    # the robot present
    server, workers, sent = _fleet()
    bad = _garbage(server, workers, sent, kind)
    if numbered == 'late':
        bad.transfer_id -= 10                 # the push the server closed at JOINED_AT
        assert server.receiver.cached_answer(2, bad.incarnation, bad.transfer_id)
    else:
        opened = copy.deepcopy(_data_chunk(sent, 2, m.SERVER))
        opened.transfer_id += 10              # valid, and heard with the push
        assert [a.msg.TYPE for a in server.on_message(opened, JOINED_AT)] == ['TransferAck']
    counted = (server.receiver.late_chunks, server.receiver.duplicate_chunks)
    suspended = _run(server, bad, JOINED_AT, JOINED_AT + 2 * ABSENT_S)
    assert suspended[2] == JOINED_AT + ABSENT_S and server.last_heard[2] == JOINED_AT
    assert server.rejects == int(2 * ABSENT_S / STEP)
    assert (server.receiver.late_chunks, server.receiver.duplicate_chunks) == counted


def test_garbage_never_readmits_a_robot_suspended_as_absent():
    server, workers, uplink = _fleet()
    for r in _suspensions(server.on_tick(JOINED_AT + ABSENT_S)):
        assert r in (0, 1, 2)
    assert server.active.tolist() == [False, False, False]
    for kind in ('codec', 'rows', 'truncated', 'misaddressed_ack'):
        _run(server, _garbage(server, workers, uplink, kind), JOINED_AT + ABSENT_S,
             JOINED_AT + ABSENT_S + 5.0)
        assert not server.active[2] and server.suspended_reason[2] == 'absent'
    assert server.rejects == 4 * int(5.0 / STEP)
    # A well-formed message of its run (an ack of a pull long done) is a sign of life.
    now = JOINED_AT + ABSENT_S + 6.0
    ack = m.TransferAck(transfer_id=0, sender=2, receiver=m.SERVER, seq=0, final=False,
                        incarnation=workers[2].incarnation,
                        target_incarnation=server.incarnation)
    out = server.on_message(ack, now)
    assert [a.worker for a in out if isinstance(a, Log) and a.name == 'worker_readmitted'] \
        == [2]
    assert server.active[2] and server.last_heard[2] == now
    assert server.absent_at[2] == now + ABSENT_S


def _link_state(link) -> dict:
    """Return a copy of ``link``'s attributes, arrays as lists, so two states compare with ==."""
    return {k: (v.tolist() if isinstance(v, np.ndarray) else copy.deepcopy(v))
            for k, v in vars(link).items()}


def test_an_end_of_another_clock_leaves_presence_and_the_versions_lease_as_they_were():
    server, workers, uplink = _fleet()
    opened = copy.deepcopy(_data_chunk(uplink, 2, m.SERVER))
    opened.transfer_id += 10
    t_open = JOINED_AT + 1.0
    assert [a.msg.TYPE for a in server.on_message(opened, t_open)] == ['TransferAck']
    link = _link_state(server.version_links[2])
    # a lease later, an END of that push at another clock: refused, and no sign of life
    end = copy.deepcopy(opened)
    end.flags, end.seq, end.clock = m.FLAG_END, 1, opened.clock + 1
    end.row_ranges, end.payload = np.zeros(0, dtype=np.uint32), b''
    end.tensor_ids, end.scales = np.zeros(0, dtype=np.uint32), np.zeros(0, dtype=np.float32)
    now = t_open + server.lease_s + 1.0
    out = server.on_message(end, now)
    assert [a.name for a in out] == ['reject'] and server.rejects == 1
    assert 'END clock/kind differs' in out[0].info['error']
    assert server.last_heard[2] == t_open and server.absent_at[2] == t_open + ABSENT_S
    assert _link_state(server.version_links[2]) == link
    assert (2, workers[2].incarnation, opened.transfer_id) in server.receiver.open


def _server_garbage(sent, robot, run, kind):
    """Return a message of server run ``run`` to ``robot`` that the robot must refuse."""
    if kind == 'schedule':     # finite, but a day of sleep
        return m.Schedule(worker=robot.rank, clock=robot.clock, push_deadline_s=1.0,
                          compute_sleep_s=86400.0, incarnation=run,
                          target_incarnation=robot.incarnation)
    bad = copy.deepcopy(_data_chunk(sent, m.SERVER, robot.rank))
    bad.incarnation, bad.target_incarnation = run, robot.incarnation
    if kind == 'codec':
        bad.codec = 99
    else:                      # rows the model does not have
        n_rows = robot.layout.n_rows
        bad.row_ranges = np.array([n_rows, n_rows + 1], dtype=np.uint32)
    return bad


@pytest.mark.parametrize('kind', ['schedule', 'codec', 'rows'])
def test_garbage_of_a_new_server_run_does_not_retire_the_live_one(kind):
    server, workers, sent = _fleet()
    robot = workers[2]
    state, live = robot.state, robot.server_incarnation
    assert live == server.incarnation
    out = robot.on_message(_server_garbage(sent, robot, live + 1, kind), JOINED_AT + 1.0)
    assert [a.name for a in out] == ['reject'] and robot.rejects == 1
    assert robot.server_incarnation == live and robot.retired_servers == []
    assert robot.state == state


@pytest.mark.parametrize('kind', ['schedule', 'codec', 'rows'])
def test_garbage_of_a_retired_server_run_never_revives_it(kind):
    server, workers, sent = _fleet()
    robot = workers[2]
    old, new = robot.server_incarnation, robot.server_incarnation + 1
    hello = m.Schedule(worker=2, clock=robot.clock, push_deadline_s=1.0, incarnation=new,
                       target_incarnation=robot.incarnation)
    robot.on_message(hello, JOINED_AT + 1.0)
    assert robot.server_incarnation == new and robot.retired_servers == [old]
    bad = _server_garbage(sent, robot, old, kind)
    now, names = JOINED_AT + 1.0, []
    for _ in range(40):        # one a second: 5 poke intervals of the default end timeout
        now += 1.0
        names += [a.name for a in robot.on_message(copy.deepcopy(bad), now)]
    assert names == ['reject'] * 40 and robot.rejects == 40
    assert robot.server_incarnation == new and robot.retired_servers == [old]


@pytest.mark.parametrize('kind', ['codec', 'rows', 'truncated'])
def test_garbage_sent_before_a_rejoin_is_refused_with_nothing_counted(kind):
    # A restored server drops a data chunk of a push sent before its run's rejoin unread
    # (counted in ``superseded``): garbage numbered so was counted superseded, and then
    # refused too (``rejects``): a refused message must change nothing but ``rejects``.
    server, workers, sent = _fleet()
    restored = ServerEngine(server.layout, server.codec, server.policy, 3,
                            torch.zeros(server.layout.n_params), lr=0.1, chunk_bytes=256,
                            absence_timeout_s=ABSENT_S)
    restored.load_state_dict(server.state_dict())
    good = copy.deepcopy(_data_chunk(sent, 2, m.SERVER))
    good.transfer_id += 10
    good.target_incarnation = restored.incarnation      # it heard the hello, not yet JOINed
    out = restored.on_message(copy.deepcopy(good), JOINED_AT + 1.0)
    assert [a.name for a in out] == ['superseded'] and restored.superseded == 1
    bad = _garbage(restored, workers, sent, kind)
    bad.target_incarnation = restored.incarnation
    for i in range(4):
        out = restored.on_message(copy.deepcopy(bad), JOINED_AT + 2.0 + i)
        assert [a.name for a in out] == ['reject'], out
    assert restored.rejects == 4 and restored.superseded == 1
    assert restored.last_heard[2] == JOINED_AT + 1.0
