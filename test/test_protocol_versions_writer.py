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
"""What the server writes to a silent robot on each topic stays under the DDS writer mark."""

import collections
import dataclasses

import numpy as np
from protocol_fixtures import build
import pytest

from rog_ros.core.compress import RowScaledSign
from rog_ros.core.rows import RowLayout
from rog_ros.nodes.routing import topic_for
from rog_ros.protocol.actions import Send
from rog_ros.protocol.messages import (
    FLAG_END, FLAG_JOIN, KIND_GRAD, MAX_CLOCK, RowChunk, RowVersions, SERVER, TransferAck)
from rog_ros.protocol.policies import make_policy
from rog_ros.protocol.ps import ServerEngine
from rog_ros.protocol.revival import POKE_END_TIMEOUTS
from rog_ros.protocol.transfer import (
    BOUND_END_S, PEER_MAX_WIRE_BYTES, split_versions, VERSIONS_MAX_WIRE_BYTES,
    VERSIONS_PART_BYTES, versions_wire_bytes, VersionsLink, wire_bytes, WRITER_MARK_BYTES)
from rog_ros.sim.fault_sweep import conservation_problems
import torch

CONVMLP_M_ROWS = 33307
"""ConvMLP-M's rows (docs/workloads.md, eacol): the paper's model."""
ROBOT = 1
"""The robot whose link dies in these tests."""


def _server(rows=CONVMLP_M_ROWS, n=8, **extra):
    """
    Return a server of ``n`` robots with a model of ``rows`` one-parameter rows.

    Every row's version vector differs from the next one's, so a downlink's RowVersions
    has a run per row: the most a model of that many rows puts in one (a Rog pull of MPCOL
    carried runs for up to half its rows, the version table had them for two thirds).
    """
    layout = RowLayout([(rows, 1)])
    server = ServerEngine(layout, RowScaledSign(), make_policy('rog:4'), n,
                          torch.zeros(layout.n_params), lr=0.1, window=64, **extra)
    server.versions.v[:, 0] = (torch.arange(rows) % 2).to(server.versions.v.dtype)
    return server


def _count(sent, per_topic, copies, now):
    """
    Add the wire bytes of the sends to ROBOT to ``per_topic``; note each RowVersions copy.

    As ``(transfer id, time, bytes its writer held before it)``: a write that finds the
    writer past the mark blocks until the robot acknowledges or its lease ends.
    """
    for a in sent:
        if not isinstance(a, Send) or a.dest != ROBOT:
            continue
        topic = topic_for(a.dest, a.msg)
        if isinstance(a.msg, RowVersions):
            copies.append((a.msg.transfer_id, round(now, 2), per_topic[topic]))
            per_topic[topic] += versions_wire_bytes(a.msg)
        elif topic.endswith('/chunks'):
            per_topic[topic] += wire_bytes(a.msg)
        else:
            per_topic[topic] += 1          # Schedules and acks: counted as messages


def _silent_snapshot(server, seconds, heard=(), sends=None):
    """
    Start a snapshot to ROBOT, which answers nothing for ``seconds``; return what it was sent.

    Ticked every 50 ms, as the nodes' loop would be. ``heard``: times at which a message of
    the robot (a per-chunk ack of the snapshot) arrives all the same; ``sends``: the message
    that arrives at each of them instead (by time), to see what counts as heard. Returns
    wire bytes per topic, the RowVersions copies (``_count``) and the times of the ENDs.
    """
    server._holds_unknown(ROBOT)
    per_topic, copies, ends = collections.Counter(), [], []
    out = server._start_snapshot(ROBOT, 0, 0.0)
    tid = server.downlinks[ROBOT].transfer.transfer_id
    inc = 77
    for step in range(int(round(seconds / 0.05)) + 1):
        now = step * 0.05
        if step:
            out = server.on_tick(now)
        for t in heard:
            if abs(t - now) < 1e-9:
                out += server.on_message((sends or {}).get(t) or TransferAck(
                    transfer_id=tid, sender=ROBOT, receiver=SERVER, seq=0, incarnation=inc,
                    target_incarnation=server.incarnation), now)
        _count(out, per_topic, copies, now)
        ends += [round(now, 2) for a in out if isinstance(a, Send) and a.dest == ROBOT
                 and not isinstance(a.msg, RowVersions) and getattr(a.msg, 'flags', 0) & FLAG_END]
    return per_topic, copies, ends


@pytest.mark.parametrize('n, lease_s, copy', [
    (8, BOUND_END_S, 1436536),    # 6 copies, 8,619,216 bytes, past the mark at 10 s
    (16, BOUND_END_S, 2585560),   # the write at 8 s found 4 copies, 10,342,240 bytes
    (4, 30.0, 861944),            # the write at 20 s found 10 copies, 8,619,440 bytes
    (2, 60.0, 574688),            # the write at 30 s found 15 copies, 8,620,320 bytes
])
def test_the_versions_writer_of_a_silent_robot_stays_under_the_mark(n, lease_s, copy):
    # A downlink's RowVersions went before its END and again before every repeated END
    # (every 2 s, no backoff), on its own topic and reliable writer, counted nowhere: a
    # robot whose link died stays matched for its lease, and the writer keeps every copy.
    # ConvMLP-M's 33,307 rows in as many runs: a write that found the writer past the 8 MiB
    # mark within the lease blocked the server's loop, every robot's (dds_bus). Now a repeat
    # goes only within VERSIONS_MAX_WIRE_BYTES of what the robot is known to hold: while it
    # is matched, DDS delivers the first copy when its link is back
    server = _server(n=n, lease_s=lease_s)
    per_topic, copies, ends = _silent_snapshot(server, lease_s)
    assert versions_wire_bytes(server.downlinks[ROBOT].versions) == copy
    assert ends == [2.0 * k for k in range(int(lease_s // 2) + 1)]   # END still every 2 s
    assert [held for _, t, held in copies if t < lease_s and held > WRITER_MARK_BYTES] == []
    assert per_topic['w1/versions'] <= WRITER_MARK_BYTES
    parts = server.downlinks[ROBOT].parts
    if copy > VERSIONS_PART_BYTES:
        # past the part bound: in parts, the first one written, the next ones withheld at
        # each END (none fits until the robot acknowledges one)
        assert len(parts) == 2 and len(copies) == 1
        assert per_topic['w1/versions'] == versions_wire_bytes(parts[0]) <= VERSIONS_PART_BYTES
        assert server.version_links[ROBOT].withheld == len(ends)
    else:
        assert parts == [] and len(copies) == max(1, VERSIONS_MAX_WIRE_BYTES // copy) <= 3
        assert per_topic['w1/versions'] == len(copies) * copy
        assert server.version_links[ROBOT].withheld == len(ends) - len(copies)
    # every other topic to that robot: the chunks all counted by their own ledger (bounded
    # by PEER_MAX_WIRE_BYTES, test_protocol_window), the snapshot's Schedule, no acks
    assert per_topic['w1/chunks'] == server.peers[ROBOT].unacked() <= PEER_MAX_WIRE_BYTES
    assert per_topic['w1/schedule'] == 1 and set(per_topic) == {
        'w1/chunks', 'w1/versions', 'w1/schedule'}


def _copy_bytes(rows, n, fragment_bytes=1024):
    """Return the wire bytes of a RowVersions of ``rows`` runs for ``n`` robots."""
    return versions_wire_bytes(RowVersions(
        transfer_id=1, receiver=ROBOT, n_workers=n, run_starts=np.zeros(rows, np.uint32),
        run_lengths=np.zeros(rows, np.uint32), versions=np.zeros(rows * n, np.int32)),
        fragment_bytes)


@pytest.mark.parametrize('n', [1, 2, 8, 16])
def test_a_versions_copy_takes_8_bytes_per_run_and_4_per_run_and_robot(n):
    # docs/faults.md and versions_wire_bytes' docstring said 12 bytes per run and 4 per run
    # and robot (12 is a run's bytes with one robot): the CDR grows by 8 + 4 n per run, and
    # with 64 KiB fragments (one here) nothing else grows
    big, small = _copy_bytes(400, n, 65535), _copy_bytes(200, n, 65535)
    assert big - small == 200 * (8 + 4 * n)


@pytest.mark.parametrize('rows, n, within', [
    (6157, 2, 19),     # docs/workloads.md's 38 MB model: 106,368 bytes a copy
    (795, 4, 101),     # MPCOL: 20,696 bytes a copy (the simulator's runs: 9.6 kB at most)
    (6157, 8, 7),      # 265,656 bytes a copy: 31 of them were 8,235,336 bytes
])
def test_versions_that_fit_are_repeated_as_before_and_bounded_in_a_long_lease(
        rows, n, within):
    # Copies that fit go before every repeated END, as before: in the default 10 s lease a
    # model of up to 6,157 rows for up to 8 robots sends all 6. In a 60 s lease (31 ENDs)
    # they stop at VERSIONS_MAX_WIRE_BYTES
    copy = _copy_bytes(rows, n)
    assert VERSIONS_MAX_WIRE_BYTES // copy == within
    _, sent, ends = _silent_snapshot(_server(rows, n), BOUND_END_S)
    assert len(ends) == len(sent) == 6
    assert [t for _, t, _ in sent] == ends
    per_topic, sent, ends = _silent_snapshot(_server(rows, n, lease_s=60.0), 60.0)
    assert len(ends) == 31 and len(sent) == min(31, within)
    assert per_topic['w1/versions'] == len(sent) * copy <= VERSIONS_MAX_WIRE_BYTES


def test_a_robot_back_after_its_lease_gets_the_versions_with_the_next_end():
    # Past the lease DDS dropped the robot's reader and what the writer held for it; the new
    # reader gets nothing written before (VOLATILE) and the robot holds the END it gets
    # until its versions come. A message from it after a lease of silence lets the next
    # repeated END take them again. Heard within the lease, it is still matched: none
    server = _server()
    _, copies, ends = _silent_snapshot(server, 30.0, heard=(5.0, 25.0))
    assert ends[-1] == 30.0 and len(ends) == 16
    assert [t for _, t, _ in copies] == [0.0, 26.0]   # the first, and with the next END
    link = _server().version_links[ROBOT]
    link.heard(0.0, 10.0, None)
    link.acked, link.sent, link.written_at = 0, 100, 0.0    # a copy written at 0 s
    link.heard(9.9, 10.0, 0.0)
    assert link.unacked() == 100                    # heard within its lease
    link.heard(20.0, 10.0, 9.9)
    assert link.unacked() == 0                      # after a lease of silence


@pytest.mark.parametrize('bad', [
    TransferAck(transfer_id=0, sender=ROBOT, receiver=2, seq=0, incarnation=78),
    RowChunk(transfer_id=0, seq=0, sender=ROBOT, receiver=SERVER, kind=KIND_GRAD,
             clock=MAX_CLOCK + 1, flags=FLAG_JOIN, incarnation=78),
])
def test_a_malformed_message_after_a_lease_of_silence_lets_no_copy_through(bad):
    # The server noted every message of a robot in its versions link before it checked
    # it: a new run's malformed message (an ack to another robot, a JOIN past max_clock),
    # refused and counted for nothing else, after a lease of silence counted the writer
    # afresh, and the next END wrote one more copy (copies at 0 and 26 s) into a writer
    # the robot's reader may still hold. The link asks when the server last admitted one
    server = _server()
    _, copies, ends = _silent_snapshot(server, 30.0, heard=(5.0, 25.0), sends={25.0: bad})
    assert server.rejects == 1 and server.last_heard[ROBOT] == 5.0
    assert len(ends) == 16 and [t for _, t, _ in copies] == [0.0]
    assert server.version_links[ROBOT].withheld == 15


def test_a_final_ack_frees_what_was_written_before_that_transfers_versions():
    # A robot closes a downlink only with its versions (the worker holds an END without
    # them): its final ack says it holds them, and everything the writer took before
    link = VersionsLink(max_wire_bytes=1000)
    first = RowVersions(transfer_id=3, receiver=1, n_workers=2,
                        run_starts=np.arange(40, dtype=np.uint32),
                        run_lengths=np.ones(40, np.uint32), versions=np.zeros(80, np.int32))
    size = versions_wire_bytes(first)
    assert size == 816 == link.wire_bytes(first)
    assert link.send(first, 0.0, True) and not link.send(first, 2.0, False)
    assert link.withheld == 1 and link.unacked() == size
    second = RowVersions(transfer_id=4, receiver=1, n_workers=2)
    assert link.send(second, 3.0, True)
    link.on_ack(TransferAck(transfer_id=3, sender=1, receiver=SERVER, seq=0, final=True), 4.0)
    assert link.unacked() == versions_wire_bytes(second)
    assert link.send(second, 5.0, False)             # a repeat fits again
    link.on_ack(TransferAck(transfer_id=4, sender=1, receiver=SERVER, seq=0), 6.0)
    assert link.unacked() == 2 * versions_wire_bytes(second)    # a per-chunk ack: nothing
    # a restarted robot's previous reader keeps everything for its lease
    link.hold(20.0)
    link.on_ack(TransferAck(transfer_id=4, sender=1, receiver=SERVER, seq=0, final=True), 7.0)
    assert link.unacked() == 2 * versions_wire_bytes(second)
    assert link.release(20.0) and link.unacked() == versions_wire_bytes(second)


@pytest.mark.parametrize('fragment', [600, 1024, 1280, 60000])
def test_versions_are_counted_as_cyclone_counts_them(fragment):
    # Each sample's CDR as the binding serializes it (16-byte auth tag) and 80 bytes per
    # fragment (dds_whc.c, whcn_size), as for chunks
    pytest.importorskip('cyclonedds')
    import dataclasses
    from rog_ros.transport.convert import to_sample
    for runs, n, slack in ((0, 1, 0), (1, 3, 3), (795, 4, 4), (6157, 2, 0), (257, 5, 0)):
        msg = RowVersions(transfer_id=9, receiver=1, n_workers=n,
                          run_starts=np.arange(runs, dtype=np.uint32),
                          run_lengths=np.ones(runs, np.uint32),
                          versions=np.zeros(runs * n, np.int32),
                          staleness_slack=np.zeros(slack, np.uint16))
        cdr = len(to_sample(dataclasses.replace(msg, auth_tag=bytes(16))).serialize())
        assert versions_wire_bytes(msg, fragment) == cdr + -(-cdr // fragment) * 80
        assert VersionsLink(fragment_bytes=fragment).wire_bytes(msg) == \
            versions_wire_bytes(msg, fragment)
    assert _copy_bytes(CONVMLP_M_ROWS, 8) == 1436536
    assert _copy_bytes(CONVMLP_M_ROWS, 2) == 574688 and _copy_bytes(6157, 2) == 106368


def _two_robots(fault, max_wire_bytes):
    """
    Build a Rog-1 fleet of 2 robots (no late pulls) whose RowVersions bound is ``max_wire_bytes``.

    The tests of lost and unreached copies shrink the bound so that every copy fills it.
    """
    harness, server, _, _, _ = build('rog:1', n=2, iters=8, dtype=torch.float64, fault=fault,
                                     policy=make_policy('rog:1#late_pulls=0'))
    for link in server.version_links:
        link.max_wire_bytes = max_wire_bytes
    return harness, server


def _lost_copy_run(restart, until, lose=1):
    """
    Run 2 robots whose robot 1 loses a downlink's first RowVersions copy, and speaks on.

    What a reader matched anew gets of a copy written before (nothing, VOLATILE): a robot
    restarted within its lease whose new reader the server's writer had not matched yet
    (``restart``: the first downlink of the new run), or a reader DDS dropped and matched
    again while the server heard the robot within its own lease (a shorter lease on the
    robot, an outage just past the robot's lease: the third downlink). Every copy is taken
    as big as the bound (no repeat fits, as ConvMLP-M's for 8 robots). Returns the run's
    stats, the harness, the server, the lost copy's (transfer id, time) and how many copies
    of that transfer's versions were written. ``lose``: how many of that transfer's copies
    are lost, one after the other (a reader matched anew again before the next came).
    """
    state = {'seen': [], 'lost': None, 'copies': 0, 'restarted': not restart}

    def fault(msg, src, dst, now):
        """Drop the first copy of the chosen downlink's versions to robot 1."""
        if not (src == SERVER and dst == ROBOT and isinstance(msg, RowVersions)
                and state['restarted']):
            return [0.0]
        tid = int(msg.transfer_id)
        if tid not in state['seen']:
            state['seen'].append(tid)
            if len(state['seen']) == (1 if restart else 3):
                state['lost'] = (tid, now)
                state['copies'] += 1
                return []
        if state['lost'] is not None and tid == state['lost'][0]:
            state['copies'] += 1
            if state['copies'] <= lose:
                return []
        return [0.0]

    harness, server = _two_robots(fault, max_wire_bytes=1)

    def back():
        """Start a new run of robot 1 (its new reader misses the first copy)."""
        state['restarted'] = True
        harness.revive(ROBOT, harness.new_worker(ROBOT))
    if restart:
        harness.at(0.3, lambda: harness.kill(ROBOT))
        harness.at(0.4, back)
    stats = harness.run(until=until)
    return stats, harness, server, state['lost'], state['copies']


@pytest.mark.parametrize('restart', [False, True])
def test_a_robot_that_lost_a_downlinks_versions_gets_them_a_lease_later(restart):
    # The first copy always goes and DDS retransmits it while the reader stays matched; a
    # reader matched anew within the server's view of the lease got nothing written before,
    # and repeats past the bound were withheld while the robot spoke (its pull pokes): it
    # held that downlink's END for ever (before: robot 1 still waiting at 60 s, 117 repeats
    # withheld). A robot heard a lease after the newest copy gets the next END's versions
    stats, harness, server, lost, copies = _lost_copy_run(restart, 120.0)
    assert lost is not None and stats.error is None
    assert all(harness.stopped)                       # robot 1's downlink closed, the run over
    poke = POKE_END_TIMEOUTS * server.end_timeout_s
    assert harness.now <= lost[1] + server.lease_s + poke + 2 * server.end_timeout_s
    assert copies == 2                                # the lost one, one a lease later
    assert server.lease_s == BOUND_END_S


def test_a_first_copy_past_the_bound_goes_once_more_a_lease_later():
    # A robot whose new reader lost a downlink's first copy, as big as the bound, holds its
    # END until a copy a lease later (test_a_robot_that_lost_a_downlinks_versions_gets_them_
    # a_lease_later), and may have acked nothing since: what was written since its last ack
    # holds back no second copy, only a third. An ack (any) says it is reached again
    link = VersionsLink(max_wire_bytes=500)
    msg = RowVersions(transfer_id=3, receiver=1, n_workers=2,
                      run_starts=np.arange(40, dtype=np.uint32),
                      run_lengths=np.ones(40, np.uint32), versions=np.zeros(80, np.int32))
    assert link.send(msg, 0.0, True) and not link.send(msg, 2.0, False)
    link.heard(10.0, 10.0, 8.0)                     # the copy a lease old, the robot speaks
    assert link.send(msg, 10.0, False) and link.since_ack == 2 * 816
    link.heard(20.0, 10.0, 18.0)
    assert not link.send(msg, 20.0, False) and link.withheld == 2
    assert not link.on_ack(TransferAck(transfer_id=3, sender=1, receiver=SERVER, seq=0), 21.0)
    assert link.since_ack == 0 and link.unacked() == 816
    link.heard(30.0, 10.0, 28.0)
    assert link.send(msg, 30.0, False)


def test_a_robot_heard_but_not_reached_takes_no_copy_past_the_bound():
    # A robot whose messages arrive but which nothing reaches (no acks: a one-way link)
    # keeps its reader matched, and the writer keeps every copy. A lease after the newest
    # copy the count started afresh all the same: one more copy and the repeats after it,
    # each lease, without end (80 copies, 15,360 bytes, in 200 s with a bound of 1,000).
    # Now no copy goes once what was written since the robot's last ack fills the bound
    copies = []

    def fault(msg, src, dst, now):
        """Drop all the server sends robot 1 from 0.3 s on (its snapshot); note the copies."""
        if src == SERVER and dst == ROBOT and now >= 0.3:
            if isinstance(msg, RowVersions):
                copies.append(versions_wire_bytes(msg))
            return []
        return [0.0]
    harness, server = _two_robots(fault, max_wire_bytes=1000)
    stats = harness.run(until=200.0)
    link = server.version_links[ROBOT]
    assert stats.error is None and server.last_heard[ROBOT] > 199.0    # heard all along
    assert copies == [192] * 10                      # 5 within the bound, 5 a lease later
    assert link.since_ack == sum(copies) < 2 * link.max_wire_bytes
    assert link.withheld == 390 and link.copies_since_ack == 10


def test_a_robot_that_loses_copies_a_lease_apart_gets_the_next_one():
    # A reader matched anew again and again (outages just past a shorter robot lease) lost
    # a downlink's first copy (the last chunks' acks came after it) and the copies a lease
    # later, one after the other. The robot acked nothing while it held that END, so what
    # was written since its last ack (two copies past the bound) withheld every copy after
    # the second: robot 1 still waited at 120 s, heard all along (4 copies at 436acb1).
    # Now the robot acks each END it holds: it is reached, and the next copy goes
    stats, harness, server, lost, copies = _lost_copy_run(False, 120.0, lose=3)
    assert lost is not None and stats.error is None
    assert all(harness.stopped)                      # robot 1's downlink closed, the run over
    assert copies == 4                               # the 3 lost ones, one a lease later
    poke = POKE_END_TIMEOUTS * server.end_timeout_s
    assert harness.now <= lost[1] + 3 * (server.lease_s + poke + 2 * server.end_timeout_s)


@pytest.mark.parametrize('n, whole, parts', [(64, 9480184, 5), (256, 37058360, 18)])
def test_versions_past_the_mark_go_in_parts_within_it_to_a_silent_robot(n, whole, parts):
    # One copy of ConvMLP-M's versions for 64 robots takes 9,480,184 bytes (264 a run and
    # the fragments' 80), for 256 robots 37,058,360: past the 8 MiB mark on its own. To a
    # robot silent for its lease (60 s) the first copy went whole: its matched reader kept
    # all of it, and the next write on that writer (the next downlink's, a repeat once the
    # robot is back) found it past the mark and blocked the server's loop. Now a copy past
    # VERSIONS_PART_BYTES goes in parts, each only within the bound past what the robot
    # acknowledged (a part per round trip): the silent robot's writer holds one part
    server = _server(n=n, lease_s=60.0)
    per_topic, copies, ends = _silent_snapshot(server, 60.0)
    dl = server.downlinks[ROBOT]
    assert versions_wire_bytes(dl.versions) == whole > WRITER_MARK_BYTES
    assert len(dl.parts) == parts and {p.parts for p in dl.parts} == {parts}
    assert all(versions_wire_bytes(p) <= VERSIONS_PART_BYTES for p in dl.parts)
    assert per_topic['w1/versions'] == versions_wire_bytes(dl.parts[0]) <= WRITER_MARK_BYTES
    assert [(t, held) for _, t, held in copies] == [(0.0, 0)]
    assert server.version_links[ROBOT].withheld == len(ends) == 31


def _parts_run(part_bytes, fault=None, until=200.0):
    """
    Run 4 Rog robots whose RowVersions go in parts of at most ``part_bytes`` on the wire.

    Returns the run's stats, the harness, the server, the workers and every RowVersions
    the server sent (with its time), before ``fault`` (robot, message, time -> delays).
    """
    sent = []

    def note(msg, src, dst, now):
        """Note each RowVersions, then apply ``fault``."""
        if isinstance(msg, RowVersions):
            sent.append((dst, msg, now))
        return fault(msg, src, dst, now) if fault else [0.0]
    harness, server, workers, _, _ = build('rog:4', n=4, iters=8, dtype=torch.float64,
                                           fault=note)
    for link in server.version_links:
        link.part_bytes = part_bytes
    stats = harness.run(until=until)
    return stats, harness, server, workers, sent


def test_a_fleet_whose_versions_go_in_parts_trains_as_with_whole_copies():
    # Parts change how the versions travel, not what the robots hold: each robot acts on a
    # downlink's versions only once it holds all its parts, as on one copy (the parts' round
    # trips move the schedule: the models are not the whole copies' run's)
    whole, _, server0, workers0, sent0 = _parts_run(VERSIONS_PART_BYTES)
    stats, harness, server, workers, sent = _parts_run(300)
    assert stats.error is None and all(harness.stopped)
    assert {m.parts for _, m, _ in sent0} == {0}
    split = {(dst, m.transfer_id) for dst, m, _ in sent if m.parts}
    assert len(split) >= len({(dst, m.transfer_id) for dst, m, _ in sent}) // 2 > 0
    assert all(versions_wire_bytes(m) <= 300 for _, m, _ in sent if m.parts)
    assert [w.rejects for w in workers] == [0] * 4
    # the same iterations, every gradient accounted for once, and each robot's version
    # table the server's mirror of it (what the server checks the robot's RSP with)
    assert [w.clock for w in workers] == [w.clock for w in workers0] == [8] * 4
    assert conservation_problems(harness, server, workers) == []
    assert all(torch.equal(w.vloc, server.delivered.sent(r)) for r, w in enumerate(workers))


def test_a_lost_part_goes_again_a_lease_later():
    # The part of a downlink's versions that a reader matched anew lost: the robot holds
    # the END (acks it), and gets the part again a lease after the newest copy, as a lost
    # whole copy; it acts once it holds every part
    lost = []

    def fault(msg, src, dst, now):
        """Drop the first part 1 of robot 1's versions the server writes."""
        if isinstance(msg, RowVersions) and dst == ROBOT and msg.part == 1 and not lost:
            lost.append((int(msg.transfer_id), now))
            return []
        return [0.0]
    stats, harness, server, workers, sent = _parts_run(300, fault)
    assert lost and stats.error is None and all(harness.stopped)
    again = [t for dst, m, t in sent if dst == ROBOT and m.transfer_id == lost[0][0]
             and m.part == 1]
    assert len(again) == 2 and again[1] >= lost[0][1] + server.lease_s
    assert workers[ROBOT].rejects == 0


def test_split_versions_keeps_the_runs_in_order_and_each_part_within_the_bound():
    msg = RowVersions(transfer_id=5, receiver=1, n_workers=3,
                      run_starts=np.arange(0, 300, 3, dtype=np.uint32),
                      run_lengths=np.full(100, 3, np.uint32),
                      versions=np.arange(300, dtype=np.int32),
                      staleness_slack=np.array([0, 2, 0], np.uint16))
    assert split_versions(msg, versions_wire_bytes(msg)) == [msg]
    parts = split_versions(msg, 700)
    assert [p.part for p in parts] == list(range(len(parts))) and len(parts) == 5
    assert {p.parts for p in parts} == {5} and {p.schema_version for p in parts} == {4}
    assert all(versions_wire_bytes(p) <= 700 for p in parts)
    assert np.array_equal(np.concatenate([p.run_starts for p in parts]), msg.run_starts)
    assert np.array_equal(np.concatenate([p.versions for p in parts]), msg.versions)
    assert all(np.array_equal(p.staleness_slack, msg.staleness_slack) for p in parts)


def _parts_and_worker(bound=200):
    """
    Return a fresh worker (robot 1 of 4 Rog robots), its server's incarnation, and parts.

    The parts: versions of the worker's first downlink (4 runs) split at ``bound`` bytes.
    """
    _, server, workers, _, _ = build('rog:4', n=4, iters=8, dtype=torch.float64)
    msg = RowVersions(transfer_id=1, receiver=ROBOT, n_workers=4,
                      run_starts=np.arange(0, 8, 2, dtype=np.uint32),
                      run_lengths=np.full(4, 2, np.uint32), versions=np.arange(16, dtype=np.int32),
                      incarnation=server.incarnation)
    return workers[ROBOT], msg, split_versions(msg, bound)


def test_a_worker_acks_each_part_and_keeps_the_versions_once_it_holds_all():
    worker, msg, parts = _parts_and_worker()
    assert len(parts) == 4
    acks = []
    for p in parts[::-1]:                               # in any order
        assert worker.pending_versions == {}
        out = worker.on_message(p, 0.0)
        acks += [(a.msg.transfer_id, a.msg.seq, a.msg.final) for a in out]
    assert acks == [(1, -4, False), (1, -3, False), (1, -2, False), (1, -1, False)]
    whole = worker.pending_versions[1]
    assert (whole.part, whole.parts, whole.schema_version) == (0, 0, msg.schema_version)
    for name in ('run_starts', 'run_lengths', 'versions'):
        assert np.array_equal(getattr(whole, name), getattr(msg, name))
    assert worker.versions_parts == {} and worker.rejects == 0


@pytest.mark.parametrize('bad', ['other_split', 'overlap', 'schema_3', 'whole_schema_4'])
def test_parts_that_do_not_make_one_copy_are_refused(bad):
    # a part of another split of the same transfer, parts whose runs overlap, a part of the
    # old layout version (an old server's bytes cannot carry one), a whole copy of the new
    worker, msg, parts = _parts_and_worker()
    if bad == 'other_split':
        worker.on_message(parts[0], 0.0)
        wrong = dataclasses.replace(parts[1], parts=3)
    elif bad == 'overlap':
        for p in parts[:3]:
            worker.on_message(p, 0.0)
        wrong = dataclasses.replace(parts[3], run_starts=parts[0].run_starts)
    elif bad == 'schema_3':
        wrong = dataclasses.replace(parts[0], schema_version=3)
    else:
        wrong = dataclasses.replace(msg, schema_version=4)
    before = {k: {p: id(x) for p, x in v.items()} for k, v in worker.versions_parts.items()}
    out = worker.on_message(wrong, 0.0)
    assert worker.rejects == 1 and worker.pending_versions == {}
    assert [a.name for a in out] == ['reject']          # (no ack of the part)
    assert {k: {p: id(x) for p, x in v.items()}
            for k, v in worker.versions_parts.items()} == before     # nothing changed
    if bad in ('schema_3', 'whole_schema_4'):
        assert 'rebuild all nodes' in out[0].info['error']


@pytest.mark.parametrize('case', ['many_parts', 'many_runs', 'empty_part'])
def test_the_parts_a_worker_holds_are_bounded_by_one_copy(case):
    # A server (buggy, or holding the fleet key) that sends parts = 65,535, or parts of a
    # run per row each, or parts without a run: the robot held every one (a part is checked
    # alone, up to n_rows runs), as many runs as 65,535 parts of n_rows each, and each part
    # copied all the parts held before it. Now a transfer's parts hold at most n_rows runs
    # (their runs are disjoint rows), a part holds one at least, so more parts than rows are
    # refused at once: what a robot holds is bounded by one whole copy
    worker, msg, _ = _parts_and_worker()
    n_rows = worker.layout.n_rows
    one = {'run_starts': np.zeros(1, np.uint32), 'run_lengths': np.ones(1, np.uint32),
           'versions': np.zeros(4, np.int32)}
    every = {'run_starts': np.arange(n_rows, dtype=np.uint32),
             'run_lengths': np.ones(n_rows, np.uint32),
             'versions': np.zeros(4 * n_rows, np.int32)}
    empty = {'run_starts': np.zeros(0, np.uint32), 'run_lengths': np.zeros(0, np.uint32),
             'versions': np.zeros(0, np.int32)}
    count, runs, sent = {'many_parts': (65535, one, n_rows + 5),
                         'many_runs': (n_rows, every, 5),
                         'empty_part': (n_rows, empty, 5)}[case]
    for k in range(sent):
        worker.on_message(dataclasses.replace(msg, part=k, parts=count,
                                              schema_version=4, **runs), 0.0)
    held = [len(p.run_starts) for v in worker.versions_parts.values() for p in v.values()]
    assert sum(held) <= n_rows == 61
    expected = {'many_parts': sent, 'many_runs': sent - 1, 'empty_part': sent}[case]
    assert worker.rejects == expected
    assert worker.pending_versions == {}
    # a whole set within the bound (of the next transfer) is still taken
    for k, p in enumerate(split_versions(dataclasses.replace(msg, transfer_id=2), 200)):
        out = worker.on_message(p, 0.0)
        assert [a.msg.seq for a in out] == [-1 - k]
    assert worker.rejects == expected and list(worker.pending_versions) == [2]
