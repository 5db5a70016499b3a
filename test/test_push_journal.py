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
"""A push server's write-ahead journal: replayed exactly, torn tail dropped, bad ones refused."""

from collections import deque
import errno
import json
import os
import shutil
import struct
import tracemalloc
import zlib

import numpy as np
import pytest
from rog_ros.nodes import durable
from rog_ros.nodes.driver import StateWriteError
from rog_ros.nodes.push_journal import (FORMAT, JOURNAL_FILE, JournalError, MARK_SIZE,
                                        OP_MESSAGE, PushJournal)
from rog_ros.nodes.state_dir import SERVER_STATE_FILE
from rog_ros.protocol.actions import Log, Send, StartCompute
from rog_ros.protocol.messages import KIND_GRAD, RowChunk, Schedule, SERVER
from rog_ros.protocol.policies.gsp import GspConfig, GspNode, GspServer
from test_protocol_push_restart import _applied, _pair, _push, N, SYSTEMS
from test_push_crash_sweep import durable_server
import torch

ROBOTS = 3
EVERY = 4


def _engines(system, budget):
    """
    Return ``system``'s server engine and its robots' maker; 'gsp-profiling' groups by time.

    Why the profiling GSP: its groups come from the intervals between each node's pushes,
    so a replay must give each push the time it was taken at and the last push times the
    checkpoint's process held (``replay_state``).
    """
    if system != 'gsp-profiling':
        return _pair(system, n_workers=ROBOTS, budget=budget)
    w0 = torch.linspace(-1.0, 1.0, N)
    cfg = GspConfig(profile_iterations=2, ssp_threshold=3)
    srv = GspServer(w0, ROBOTS, cfg, lr=0.1, momentum=0.5, max_pushes=budget)
    return srv, lambda rank: GspNode(rank, w0, [N // 2, N - N // 2], cfg)


def _server(system, folder, budget):
    """Return a new run of a journaled push server (K = ``EVERY``) on ``folder``, restored."""
    return durable_server(_engines(system, budget)[0], folder, EVERY)


def _state(adapter):
    """
    Return the adapter's checkpoint less ``replay``, tensors kept for a bitwise check.

    Why less: a restored engine's robots are all unsure of their next push on purpose
    (``end_replay``).
    """
    sd = adapter.state_dict(copy=True)
    del sd['replay']
    sd.pop('unrecorded_logs', None)     # (the last call's logs: a restored one made none)
    sd.pop('clock_stamp', None)         # (when it was taken: a restored one's is later)
    return sd


def _same(a, b, where='state'):
    """Assert ``a`` and ``b`` are equal, tensors bit for bit (why: an exact replay)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype, where
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert sorted(a) == sorted(b), where
        for k in a:
            _same(a[k], b[k], f'{where}.{k}')
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f'{where}[{i}]')
    else:
        assert a == b, (where, a, b)


def _drive(system, folder, budget, each=None, make=None):
    """
    Run the fleet in a fixed order, each message at its own time; return the server.

    ``each(k, srv, before)`` is called after message k with the server's state before it;
    a server it returns goes on in place of ``srv`` (why: a crash and a restore mid-run).

    Why the times: GSP keeps them (intervals, held nodes), and a replay must give each
    input the time it was taken at. ``make(folder)``: the server (None: ``_server``).
    """
    os.makedirs(folder, exist_ok=True)
    srv = _server(system, folder, budget) if make is None else make(folder)
    worker = _engines(system, budget)[1]
    robots = [worker(r) for r in range(ROBOTS)]
    steps, q, k = [0] * ROBOTS, deque(), 0

    def compute(rank):
        """Queue robot ``rank``'s next push (why: each pull starts a computation)."""
        q.append(_push(robots[rank], 11 + rank, steps[rank]))
        steps[rank] += 1

    for r in range(ROBOTS):
        compute(r)
    while q and k < 200:
        msg = q.popleft()
        before = _state(srv.engine)
        out = srv.on_message(msg, 0.5 + 0.25 * k + 0.125 * msg.sender)
        if each is not None:
            srv = each(k, srv, before) or srv
        k += 1
        for a in out:
            if isinstance(a, Send):
                for b in robots[a.dest].on_message(a.msg, 0.0):
                    if isinstance(b, StartCompute):
                        compute(a.dest)
    return srv


@pytest.mark.parametrize('system', SYSTEMS + ('gsp-profiling',))
def test_the_checkpoint_and_its_journal_replayed_are_the_state_without_the_crash(
        system, tmp_path):
    # after every message: a server started on a copy of the state folder (the checkpoint
    # every EVERY pushes answered, the journal since) holds the very state of the server
    # that did not crash: every count, clock and stop order, tensors bit for bit
    replayed = []

    def crash(k, srv, before):
        """Restore a copy of the folder as it is now; compare (why: a crash right here)."""
        copy = tmp_path / f'k{k}'
        shutil.copytree(tmp_path / 'live', copy)
        back = _server(system, copy, budget)
        _same(_state(back.engine), _state(srv.engine), f'message {k}')
        replayed.append(back.engine.replayed)

    budget = 18 if system == 'gsp-profiling' else 9
    srv = _drive(system, tmp_path / 'live', budget, crash)
    assert _applied(srv.engine.engine) == budget and srv.engine.finished
    assert max(replayed) == EVERY - 1 and 0 in replayed       # (journals of 0 to K - 1)
    if system == 'gsp-profiling':
        assert len(srv.engine.engine.groups) >= 1 and srv.engine.engine.intervals[0]


@pytest.mark.parametrize('system', SYSTEMS + ('gsp-profiling',))
def test_a_restored_server_that_crashes_again_before_its_checkpoint_is_restored_exactly(
        system, tmp_path):
    # a server restored from a checkpoint and its journal appends to that journal; crashed
    # again before its next checkpoint, its restore replays both runs' records: those of
    # the restored run must meet the engine as they met it (every robot's next push unsure,
    # GSP's last push times forgotten), else counts and GSP's profiled intervals differ
    budget = 18 if system == 'gsp-profiling' else 9
    spans = []
    for first in range(budget - 1):
        live, runs = tmp_path / f'live{first}', []

        def crash(k, srv, before):
            """Restore in place at message ``first``; then compare a copy's restore."""
            if k == first:
                srv.engine.journal.close()
                runs.append(_server(system, live, budget))
                return runs[-1]
            if runs and k > first:
                copy = tmp_path / f'c{first}-{k}'
                shutil.copytree(live, copy)
                back = _server(system, copy, budget)
                _same(_state(back.engine), _state(srv.engine), f'{first}, message {k}')
                spans.append(back.engine.replayed - runs[0].engine.replayed)
            return None
        _drive(system, live, budget, crash)
    assert max(spans) >= 2 and any(runs)


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_push_costs_its_own_bytes_and_a_checkpoint_every_k(system, tmp_path):
    # between checkpoints a push answered costs one journal record of about its wire size;
    # a checkpoint every EVERY pushes answered empties the journal
    sizes = []

    def watch(k, srv, before):
        """Note the journal's bytes and the checkpoints after message k (why: the cost)."""
        sizes.append((srv.engine.journal.append_bytes, srv.state.saves,
                      os.path.getsize(tmp_path / 's' / JOURNAL_FILE)))

    srv = _drive(system, tmp_path / 's', 9, watch)
    record = sizes[1][0] - sizes[0][0]
    push = srv.engine.bytes_up / srv.engine.pushes_received
    assert push < record < push + 1024, (record, push)
    assert [s for _, s, _ in sizes][:EVERY] == [0] * (EVERY - 1) + [1]
    assert sizes[EVERY - 1][2] < 200 < sizes[EVERY - 2][2]   # (emptied by the checkpoint)


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_last_record_cut_short_is_dropped_with_a_note(system, tmp_path, capsys):
    # a crash while a record was written (its answer never left): the restored server drops
    # it, says so, cuts it off the file and holds the state before that message
    cut = {}

    def tear(k, srv, before):
        """At message 5, keep a copy of the folder with half its last record (why: torn)."""
        if k != 5:
            return
        copy = tmp_path / 'torn'
        shutil.copytree(tmp_path / 'live', copy)
        path = copy / JOURNAL_FILE
        size = os.path.getsize(path)
        with open(path, 'r+b') as f:
            f.truncate(size - (srv.engine.journal.append_bytes - cut.get('bytes', 0)) // 2)
        cut['state'] = before

    def track(k, srv, before):
        """Tear at message 5 and note the journal's bytes (why: the record's size)."""
        tear(k, srv, before)
        cut['bytes'] = srv.engine.journal.append_bytes

    _drive(system, tmp_path / 'live', 9, track)
    back = _server(system, tmp_path / 'torn', 9)
    cut['state']['counts']['journal_records_dropped'] = 1     # (counted: summary.json's)
    _same(_state(back.engine), cut['state'], 'torn')
    note = back.engine.journal.dropped
    assert 'torn' in note and 'cut short' in note
    assert 'dropped 1 record(s)' in capsys.readouterr().err
    assert back.engine.replayed == 1      # (message 4 after checkpoint 4; 5 dropped)


def _stopped_after(system, folder, n):
    """Drive ``system``'s fleet on ``folder`` for ``n`` messages, then drop the server."""
    def stop(k, srv, before):
        """Copy the folder after message ``n - 1`` (why: a journal of records, mid-run)."""
        if k == n - 1:
            shutil.copytree(folder, str(folder) + '-mid')
    _drive(system, folder, 9, stop)
    return str(folder) + '-mid'


def _bytes(folder):
    """Return every file of ``folder`` by name (why: nothing changed after a refusal)."""
    return {n: open(os.path.join(folder, n), 'rb').read() for n in sorted(os.listdir(folder))}


@pytest.mark.parametrize('system', ['asgd', 'gsp'])
def test_a_damaged_journal_is_refused_naming_it_and_nothing_changes(system, tmp_path):
    # a record before the last whose checksum does not match, a file that is no journal:
    # one line naming the journal and the fix; the folder's files are left as they were
    mid = _stopped_after(system, tmp_path / 'live', 7)      # (checkpoint 4, 3 records)
    path = os.path.join(mid, JOURNAL_FILE)
    data = bytearray(open(path, 'rb').read())
    data[200] ^= 0xFF                                       # (in the first record after it)
    open(path, 'wb').write(bytes(data))
    was = _bytes(mid)
    with pytest.raises(JournalError, match=r'journal .*server\.journal is damaged at byte '
                                           r'.*checksum.*move the whole state directory'):
        _server(system, mid, 9)
    assert _bytes(mid) == was
    open(path, 'wb').write(b'not a journal at all' * 10)
    was = _bytes(mid)
    with pytest.raises(JournalError, match=r'server\.journal is damaged at byte 0'):
        _server(system, mid, 9)
    assert _bytes(mid) == was


def test_a_checkpoint_of_another_system_without_a_journal_leaves_the_folder_as_it_was(
        tmp_path):
    # an asgd checkpoint with no journal beside it (written before the journal) given to an
    # adacomp server: refused, and no journal of adacomp left in the folder (a journal was
    # written before the checkpoint was found not to fit)
    mid = _stopped_after('asgd', tmp_path / 'a', 7)
    os.remove(os.path.join(mid, JOURNAL_FILE))
    was = _bytes(mid)
    with pytest.raises(durable.StateError, match=r'server\.pt does not fit this fleet'):
        _server('adacomp', mid, 9)
    assert _bytes(mid) == was


def test_a_full_disk_when_the_journal_is_emptied_stops_the_server(tmp_path, monkeypatch):
    # the checkpoint is on disk, the empty journal replacing the old one cannot be written:
    # StateWriteError (the node stops, exit 1, naming the fix), not an OSError that the
    # driver took for a bad message (its answer dropped, the server going on with its
    # journal closed); the folder restores the state the server had
    from rog_ros.nodes import push_journal
    seen = {}

    def full(path, data):
        """Fail as a full disk does (why: the journal's reset)."""
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fill(k, srv, before):
        """Fill the disk before message EVERY - 1 (why: its checkpoint empties the journal)."""
        if k == EVERY - 2:
            monkeypatch.setattr(push_journal, 'atomic_write_bytes', full)
            seen['srv'] = srv
    with pytest.raises(StateWriteError, match=r'cannot empty the journal .*server\.journal '
                                              r'after checkpoint 1: No space left'):
        _drive('asgd', tmp_path / 'a', 9, fill)
    monkeypatch.undo()
    assert seen['srv'].state.saves == 1
    back = _server('asgd', tmp_path / 'a', 9)
    _same(_state(back.engine), _state(seen['srv'].engine), 'after the full disk')


def test_another_fleets_journal_is_refused_naming_it(tmp_path):
    # asgd's journal beside an adacomp server's checkpoint: refused (its inputs are not
    # this engine's), the folder left as it was
    mid = _stopped_after('asgd', tmp_path / 'a', 7)
    other = _stopped_after('adacomp', tmp_path / 'b', 7)
    shutil.copy(os.path.join(mid, JOURNAL_FILE), os.path.join(other, JOURNAL_FILE))
    was = _bytes(other)
    with pytest.raises(JournalError, match=r"server\.journal is of another fleet .*'asgd'"):
        _server('adacomp', other, 9)
    assert _bytes(other) == was


def test_a_journal_without_its_checkpoint_is_refused(tmp_path):
    # the journal follows checkpoint 1 and server.pt is gone: replaying it on the starting
    # model would make up a state; refused, naming both
    mid = _stopped_after('asgd', tmp_path / 'a', 7)
    os.remove(os.path.join(mid, 'server.pt'))
    was = _bytes(mid)
    with pytest.raises(JournalError, match=r'follows checkpoint 1, and there is no '
                                           r'checkpoint beside it; put server\.pt back'):
        _server('asgd', mid, 9)
    assert _bytes(mid) == was


def test_a_journal_newer_than_its_checkpoint_is_refused(tmp_path):
    # an older server.pt put back beside a later journal: the restore refuses it (the
    # checkpoint would miss what the journal's epoch says it holds)
    early = _stopped_after('asgd', tmp_path / 'a', 5)      # (checkpoint 1)
    late = _stopped_after('asgd', tmp_path / 'b', 9)       # (checkpoint 3: at 4, 8, stops)
    shutil.copy(os.path.join(early, 'server.pt'), os.path.join(late, 'server.pt'))
    with pytest.raises(durable.StateError, match=r'journal .*server\.journal follows '
                                                 r'checkpoint \d, newer than the checkpoint 1'):
        _server('asgd', late, 9)


def test_a_stop_order_sent_again_is_journaled(tmp_path):
    # the stop orders' repeats are counted in the checkpoint (stops_repeated): a restore
    # replays them from the journal
    mid = tmp_path / 'a'
    _drive('asgd', mid, 9)
    srv = _server('asgd', mid, 9)
    adapter = srv.engine
    owed = adapter.stops_owed(0.0)
    assert adapter.finished and isinstance(adapter._stops[0], Schedule)
    adapter._spoke = [0.0] * ROBOTS
    adapter._stop_due = [0.0] * ROBOTS
    sent = adapter._stops_due(1.0)
    adapter.write_journal()      # (as the hooks do before the repeats leave: ``_observe``)
    assert len(sent) == len(owed) == ROBOTS and adapter.stops_repeated == ROBOTS
    back = _server('asgd', mid, 9)
    assert back.engine.stops_repeated == ROBOTS and back.engine.replayed == ROBOTS


def test_a_replayed_push_is_read_once_its_arrays_views_of_the_record(tmp_path):
    # a push's record read back for the replay: its payload and arrays are views of the one
    # buffer read (a 37.9 MB push cost three model-sized buffers: the read, bytes of the
    # payload's slice, an array's copy), writable as the live message's, equal to it
    size = 8 << 20
    payload = np.arange(size // 4, dtype=np.float32)
    msg = RowChunk(transfer_id=3, seq=0, sender=1, receiver=SERVER, kind=KIND_GRAD, clock=2,
                   row_ranges=np.array([0, size // 4], dtype=np.uint32),
                   payload=memoryview(payload).cast('B'), incarnation=7)
    j = PushJournal(str(tmp_path / JOURNAL_FILE), {'system': 'asgd'})
    j.read()
    j.append_message(msg, 1.5)
    j.close()
    back = PushJournal(str(tmp_path / JOURNAL_FILE), {'system': 'asgd'})
    back.read()
    tracemalloc.start()
    try:
        ((op, now, got),) = list(back.inputs())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1.25 * size, peak
    assert (op, now, got.clock, got.incarnation) == (OP_MESSAGE, 1.5, 2, 7)
    assert np.array_equal(np.frombuffer(got.payload, dtype=np.float32), payload)
    assert got.row_ranges.tolist() == [0, size // 4] and got.row_ranges.flags.writeable


def test_a_tail_of_zeros_is_a_record_cut_short(tmp_path):
    # the file's new size reached the disk, the record's bytes did not (zeros): dropped as a
    # record cut short, the records before it replayed
    mid = _stopped_after('asgd', tmp_path / 'a', 7)          # (checkpoint 1, 3 records)
    shutil.copytree(mid, tmp_path / 'zeros')
    with open(tmp_path / 'zeros' / JOURNAL_FILE, 'ab') as f:
        f.write(bytes(4096))
    whole = _server('asgd', mid, 9)
    back = _server('asgd', tmp_path / 'zeros', 9)
    assert back.engine.replayed == whole.engine.replayed == 3
    expected = _state(whole.engine)
    expected['counts']['journal_records_dropped'] = 1       # (the zeros: one torn record)
    _same(_state(back.engine), expected, 'zeros')
    assert 'cut short' in back.engine.journal.dropped and whole.engine.journal.dropped is None
    # (cut off: the restore's OP_RESTORED, written over the zeros, says how many it cut)
    size = os.path.getsize(os.path.join(mid, JOURNAL_FILE))    # (+ OP_RESTORED, its mark)
    at = size - 2 * MARK_SIZE                               # (an empty OP_RESTORED: 27 too)
    cut = json.dumps({'dropped': 1, 'at': at, 'cut': at + 4096})
    assert os.path.getsize(tmp_path / 'zeros' / JOURNAL_FILE) == size + len(cut)


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_journal_without_a_checkpoint_is_a_resume_of_its_run(system, tmp_path):
    # a server that crashed before its first checkpoint left a journal alone: replayed,
    # the start was still taken for a new run (restored None: the node set the earlier
    # results aside, started its run record and waited as for a new run). It is a resume of
    # that run from checkpoint 0; the next checkpoint goes on from the replayed pushes.
    def crash(k, srv, before):
        """Restore a copy of the folder after the second message (no checkpoint yet)."""
        if k == 1:
            assert srv.state.saves == 0
            shutil.copytree(tmp_path / 'live', tmp_path / 'copy')
            back = _server(system, tmp_path / 'copy', 9)
            assert back.restored == 0 and back.engine.replayed == 2
            assert back.engine.replayed_without_checkpoint
            assert back.next_at == EVERY and back.checkpoint_id == 0
            _same(_state(back.engine), _state(srv.engine), 'journal alone')
        return None

    _drive(system, tmp_path / 'live', 9, crash)
    fresh = _server(system, tmp_path / 'fresh', 9)      # no journal: a new run
    assert fresh.restored is None and not fresh.engine.replayed_without_checkpoint


@pytest.mark.parametrize('system', SYSTEMS)
def test_with_a_checkpoint_every_push_each_push_is_written_once(system, tmp_path):
    # K = 1 wrote every push twice: its journal record (the push's bytes, fsynced), then
    # the whole checkpoint, which emptied the journal again. The checkpoint alone holds it:
    # no record is written for an input the checkpoint taken before its answer holds, and
    # a crash after any message still restores the state of the server that did not crash
    writes = []

    def crash(k, srv, before):
        """Note the writes after message k; restore a copy of the folder and compare."""
        writes.append((srv.engine.journal.appends, srv.state.saves))
        copy = tmp_path / f'k{k}'
        shutil.copytree(tmp_path / 'live', copy)
        back = durable_server(_engines(system, 9)[0], copy, 1)
        _same(_state(back.engine), _state(srv.engine), f'message {k}')
        back.engine.journal.close()

    def server(folder):
        """Return the journaled server with K = 1 (why: the node's)."""
        return durable_server(_engines(system, 9)[0], folder, 1)

    os.makedirs(tmp_path / 'live')
    srv = _drive(system, tmp_path / 'live', 9, crash, make=server)
    assert _applied(srv.engine.engine) == 9 and srv.engine.finished
    # (each message: a push answered, or a stop order sent after the budget)
    assert [a for a, _ in writes] == [0] * len(writes), writes          # no record
    assert [s for _, s in writes] == list(range(1, len(writes) + 1)), writes   # one save


@pytest.mark.parametrize('system', SYSTEMS)
def test_a_refused_message_counts_toward_k(system, tmp_path):
    # a message the engine refused (a push sent twice: its timestamp gone) was journaled
    # (a push's bytes) but not counted toward K: refused messages grew the journal past K
    # records without bound. It counts now (inputs_refused, in durable_progress): the K-th
    # input, answered or refused, is checkpointed and gets no record; its counts restored
    srv = durable_server(_engines(system, 9)[0], tmp_path, 2)
    robot = _engines(system, 9)[1](0)
    push = _push(robot, 11, 0)
    srv.on_message(push, 0.5)
    assert srv.state.saves == 0 and srv.engine.journal.appends == 1
    rejects = srv.engine.rejects
    srv.on_message(push, 0.75)                  # the same push again: refused
    assert srv.engine.rejects == rejects + 1 and srv.engine.inputs_refused == 1
    assert srv.state.saves == 1 and srv.engine.journal.appends == 1   # checkpointed
    srv.engine.journal.close()
    back = durable_server(_engines(system, 9)[0], tmp_path, 2)
    assert back.engine.replayed == 0 and back.engine.rejects == rejects + 1
    assert back.engine.inputs_refused == 1 and back.next_at == 4


@pytest.mark.parametrize('system', SYSTEMS)
def test_the_logs_of_the_inputs_replayed_are_kept_for_the_run_record(system, tmp_path):
    # a restore replayed the journal's inputs and dropped the engine's logs: events.csv
    # (worker_restart, push_resent, training_done) and the transfer figures (push_done)
    # missed the events between the checkpoint and the crash. The replay keeps them with
    # the times they were taken at (replayed_logs), those of the live run's, in order. The
    # logs of the message a checkpoint was taken for come first: the checkpoint keeps them
    # (its run record was taken before the node recorded them; until 2026-12-07 they were
    # missing from events.csv after a restore)
    live = []

    def crash(k, srv, before):
        """Note the logs since the last checkpoint; restore a copy and compare."""
        copy = tmp_path / f'k{k}'
        shutil.copytree(tmp_path / 'live', copy)
        back = _server(system, copy, 9)
        got = [(round(now, 6), g.name, g.worker) for now, g in back.engine.replayed_logs]
        assert got == live, (k, got, live)
        back.engine.journal.close()

    def server(folder):
        """Return the server whose outputs' logs are noted (why: the live logs)."""
        hooks = _server(system, folder, 9)
        on_message = hooks.on_message

        def noted(msg, now):
            """Hand ``msg`` on; note the logs of its answer (why: compared with the replay)."""
            before = hooks.state.saves
            out = on_message(msg, now)
            if hooks.state.saves > before:
                live.clear()                  # (in the checkpoint, but for this answer's)
            live.extend((round(now, 6), g.name, g.worker) for g in out if isinstance(g, Log))
            return out
        hooks.on_message = noted
        return hooks

    os.makedirs(tmp_path / 'live')
    _drive(system, tmp_path / 'live', 9, crash, make=server)


@pytest.mark.parametrize('system', SYSTEMS)
def test_the_logs_replayed_after_a_reboot_are_moved_as_the_checkpoints_are(
        system, tmp_path, monkeypatch):
    # The live run's checkpoints are stamped at monotonic 100 s of boot A; each copy is
    # restored in boot B 10 s later by the wall clock, at 20 s of its monotonic clock: the
    # checkpoint's own logs (unrecorded_logs) and those of the journal's records written by
    # the checkpoint's process are of one clock, so both move by 20 - 100 - 10 = -90 s and
    # keep their order and spacing (before: the journal's stayed on boot A's clock, the
    # node clamped them into the run, after the checkpoint's logs that came before them)
    from rog_ros.nodes import clocks
    t, live, checked = 1.7e9, [], []

    def at(boot, wall, mono):
        """Make ``clocks`` read ``boot``, ``wall`` and ``mono`` (the boot clock 5 s)."""
        monkeypatch.setattr(clocks, 'boot_id', lambda: boot)
        monkeypatch.setattr(clocks, '_wall', lambda: wall)
        monkeypatch.setattr(clocks, '_monotonic', lambda: mono)
        monkeypatch.setattr(clocks, 'boot_clock', lambda: 5.0)

    def crash(k, srv, before):
        """Restore a copy in boot B; compare its replayed logs' times with the live ones."""
        if not os.path.isfile(tmp_path / 'live' / SERVER_STATE_FILE):
            return            # (a journal alone: the test below)
        copy = tmp_path / f'k{k}'
        shutil.copytree(tmp_path / 'live', copy)
        at('boot-b', t + 10.0, 20.0)
        back = _server(system, copy, 9)
        at('boot-a', t, 100.0)
        got = [(round(now, 6), g.name, g.worker) for now, g in back.engine.replayed_logs]
        assert got == [(round(now - 90.0, 6), name, w) for now, name, w in live], (k, got)
        checked.append(back.engine.replayed)
        back.engine.journal.close()

    def server(folder):
        """Return the server whose outputs' logs are noted (why: the live logs)."""
        hooks = _server(system, folder, 9)
        on_message = hooks.on_message

        def noted(msg, now):
            """Hand ``msg`` on; note the logs of its answer (why: compared with the replay)."""
            before = hooks.state.saves
            out = on_message(msg, now)
            if hooks.state.saves > before:
                live.clear()                  # (in the checkpoint, but for this answer's)
            live.extend((round(now, 6), g.name, g.worker) for g in out if isinstance(g, Log))
            return out
        hooks.on_message = noted
        return hooks

    at('boot-a', t, 100.0)
    os.makedirs(tmp_path / 'live')
    _drive(system, tmp_path / 'live', 9, crash, make=server)
    assert max(checked) >= 2        # (journal records replayed, not only the checkpoint)


def test_rog_fleet_takes_a_journal_alone_for_the_resume_the_server_makes(tmp_path):
    # A push server killed before its first checkpoint resumes from its journal alone
    # (checkpoint 0), but ``rog fleet`` asked only for server.pt: it took the folder for a
    # fresh run's, set the run's logs and results aside, and never said that the same
    # command resumes it. A journal with a record is a resume; one with its header alone,
    # or none, is not (the server starts afresh on them).
    from rog_ros.nodes import push_journal, state_dir
    assert state_dir.JOURNAL_FILE == JOURNAL_FILE
    assert state_dir._JOURNAL_FRAME.format == push_journal._FRAME.format
    assert push_journal.MAGIC == b'RJ'
    folder = str(tmp_path)
    assert not state_dir.resumes(folder) and state_dir.resuming_line(folder) == ''
    journal = PushJournal(os.path.join(folder, JOURNAL_FILE), {'system': 'asgd'})
    journal.read()
    journal._write_header(0)
    assert not state_dir.resumes(folder) and state_dir.resuming_line(folder) == ''
    journal._f = open(journal.path, 'ab')
    journal.append_value(push_journal.OP_STOP_AGAIN, 1.0, 0)
    journal.close()
    assert state_dir.resumes(folder) and not state_dir.resumes(folder, rank=0)
    assert state_dir.resuming_line(folder) == (f'resuming from the state in {folder} '
                                               '(server.journal)')
    (tmp_path / 'server.pt').write_bytes(b'x')
    assert state_dir.resuming_line(folder) == (f'resuming from the state in {folder} '
                                               '(server.pt, server.journal)')


def _regroup(folder, batches):
    """
    Write ``folder``'s journal again with its records in fsync batches of ``batches`` sizes.

    Why: a live message's inputs (a run taken back, its push, a stop order sent again) share
    one fsync; a test fleet's each have their own. Returns each record's frame offset.
    """
    path = os.path.join(folder, JOURNAL_FILE)
    with open(path, 'rb') as f:
        f.seek(10)
        head = json.loads(f.read(struct.unpack('<2sII', open(path, 'rb').read(10))[1]))
    j = PushJournal(path, head['fleet'])
    j.read()
    j.close()
    bodies = []
    with open(path, 'rb') as f:
        for off, n in j.records:
            f.seek(off)
            bodies.append(f.read(n))
    assert sum(batches) == len(bodies)
    j._write_header(head['epoch'])
    j._f = open(path, 'ab')
    offsets, k = [], 0
    from rog_ros.nodes.push_journal import _OPS
    op = _OPS[2]
    for size in batches:
        batch = []
        for body in bodies[k:k + size]:
            kind, now, _ = op.unpack_from(body, 0)
            batch.append((kind, now, [body[op.size:]]))
        offsets.append(j._f.tell())
        j.append_all(batch)
        k += size
    j.close()
    return offsets


def _unsynced(path):
    """
    Cut the mark off the end of the journal at ``path`` (why: a power cut before it).

    A batch's mark (``OP_SYNCED``) is appended once its fsync returned, before any answer
    leaves: a test that tears the last batch stands for a crash before that fsync returned,
    whose mark was never written.
    """
    from rog_ros.nodes.push_journal import _OPS, MARK_SIZE, OP_SYNCED
    size = os.path.getsize(path)
    with open(path, 'r+b') as f:
        f.seek(size - MARK_SIZE + 10)
        assert _OPS[3].unpack(f.read())[0] == OP_SYNCED       # (a mark ends the file)
        f.truncate(size - MARK_SIZE)


def _flip(path, at):
    """Flip a byte of the record at ``at`` (why: a block the power cut did not write)."""
    data = bytearray(open(path, 'rb').read())
    data[at + 30] ^= 0xFF
    open(path, 'wb').write(bytes(data))


@pytest.mark.parametrize('system', ['asgd', 'gsp'])
def test_a_torn_record_before_the_last_of_its_fsync_is_dropped_with_those_after(
        system, tmp_path):
    # one fsync covers a message's records: a power cut may tear the first and keep the
    # second. Neither was answered (no answer leaves before the fsync): the intact prefix is
    # replayed, the torn record and those after it dropped, said once and counted. Before
    # 2026-12-07's fix the whole journal was refused and the server could not start.
    mid = _stopped_after(system, tmp_path / 'live', 7)      # (checkpoint 1, 3 records)
    shutil.copytree(mid, tmp_path / 'prefix')
    offsets = _regroup(mid, [1, 2])                          # (records 2 and 3: one fsync)
    _unsynced(os.path.join(mid, JOURNAL_FILE))               # (cut before its fsync returned)
    with open(os.path.join(tmp_path / 'prefix', JOURNAL_FILE), 'r+b') as f:
        f.truncate(offsets[1])                               # (what the restore should keep)
    _regroup(tmp_path / 'prefix', [1])
    _flip(os.path.join(mid, JOURNAL_FILE), offsets[1])
    whole = _server(system, tmp_path / 'prefix', 9)
    back = _server(system, mid, 9)
    assert back.engine.replayed == whole.engine.replayed == 1
    expected = _state(whole.engine)
    expected['counts']['journal_records_dropped'] = 2
    _same(_state(back.engine), expected, 'torn batch')
    assert back.engine.journal.dropped_records == 2
    assert 'dropped 2 record(s)' in back.engine.journal.dropped
    assert back.engine.stats()['journal_records_dropped'] == 2
    assert back.engine.state_dict()['counts']['journal_records_dropped'] == 2
    again = _server(system, mid, 9)                          # (cut off the file: said once)
    assert again.engine.journal.dropped is None
    # (no checkpoint since: the count is the restore's OP_RESTORED's, 0 until 2026-12-08)
    assert again.engine.stats()['journal_records_dropped'] == 2


def test_the_torn_records_a_restore_dropped_stay_counted_past_a_second_crash(tmp_path):
    # The restore cuts the torn records off the file, so the next read finds none: their
    # count (summary.json's journal_records_dropped) lived in memory only until the next
    # checkpoint, K pushes later, and a second crash before it lost it (0 after the second
    # restore). The restored server checkpoints at its first step once it dropped records.
    mid = _stopped_after('asgd', tmp_path / 'live', 7)      # (checkpoint 1, 3 records)
    offsets = _regroup(mid, [1, 2])
    _unsynced(os.path.join(mid, JOURNAL_FILE))
    _flip(os.path.join(mid, JOURNAL_FILE), offsets[1])
    back = _server('asgd', mid, 9)
    assert back.engine.stats()['journal_records_dropped'] == 2
    saves = back.state.saves
    stale = _push(_engines('asgd', 9)[1](0), 11, 0)         # (its first input: refused)
    back.on_message(stale, 10.0)
    assert back.state.saves == saves + 1 and not back.dropped_unsaved
    back.engine.journal.close()                             # (killed: nothing more written)
    again = _server('asgd', mid, 9)
    assert again.engine.journal.dropped is None and not again.dropped_unsaved
    assert again.engine.stats()['journal_records_dropped'] == 2


@pytest.mark.parametrize('system', ['asgd', 'gsp'])
def test_torn_records_are_counted_once_over_any_number_of_restores(system, tmp_path):
    # A restore cut the torn records off the file and kept their count in memory until its
    # first checkpoint: killed before it (a restored node waits for its robots at activate
    # first), the next restore found none (0 for 2). Now the restore's OP_RESTORED, written
    # over them before the cut, says how many: each counted once over any number of
    # restores, and a restore killed between that write and the cut does not count the
    # rest of the torn bytes again (2, not 4)
    mid = _stopped_after(system, tmp_path / 'live', 7)      # (checkpoint 1, 3 records)
    offsets = _regroup(mid, [1, 2])
    path = os.path.join(mid, JOURNAL_FILE)
    _unsynced(path)
    _flip(path, offsets[1])
    torn = open(path, 'rb').read()
    shutil.copytree(mid, tmp_path / 'midcut')
    for k in range(3):          # (restored, killed before its first step: no checkpoint)
        back = _server(system, mid, 9)
        assert back.engine.replayed == 1, k
        assert back.engine.stats()['journal_records_dropped'] == 2, k
        assert back.engine.state_dict()['counts']['journal_records_dropped'] == 2, k
        assert (back.engine.journal.dropped is None) == (k > 0), k
        back.engine.journal.close()
    data = open(path, 'rb').read()
    end = offsets[1]
    n = 10 + struct.unpack_from('<I', data, end + 2)[0]     # (the cut's OP_RESTORED frame)
    said = json.loads(data[end + 10 + 17:end + n])
    assert said == {'dropped': 2, 'at': end, 'cut': len(torn)}
    assert len(torn) > end + n
    midcut = os.path.join(tmp_path / 'midcut', JOURNAL_FILE)
    open(midcut, 'wb').write(torn[:end] + data[end:end + n] + torn[end + n:])
    for k in range(2):          # (killed between the write and the cut, then as above)
        back = _server(system, tmp_path / 'midcut', 9)
        assert back.engine.replayed == 1, k
        assert back.engine.stats()['journal_records_dropped'] == 2, k
        back.engine.journal.close()
    assert os.path.getsize(midcut) < len(torn)              # (cut off at last)
    back = _server(system, tmp_path / 'midcut', 9)
    back.checkpoint()                                       # (the count in it, journal reset)
    back.engine.journal.close()
    again = _server(system, tmp_path / 'midcut', 9)
    assert again.engine.stats()['journal_records_dropped'] == 2


@pytest.mark.parametrize('kept', [1, 20, 'all'])
def test_a_power_cut_in_the_cut_s_own_write_counts_the_torn_records_once(kept, tmp_path):
    # the restore's OP_RESTORED (written over the torn records, then the file cut) lost to a
    # power cut before its fsync: none of it, part of it (a torn record itself) or all of it
    # kept with the file of its old size. Each restore after counts the torn batch once (2:
    # the record the write covered is longer than it), replays the intact record, never
    # refuses; the mid-cut case (all of it kept) is not counted twice
    mid = _stopped_after('asgd', tmp_path / 'live', 7)      # (checkpoint 1, 3 records)
    offsets = _regroup(mid, [1, 2])
    path = os.path.join(mid, JOURNAL_FILE)
    _unsynced(path)
    _flip(path, offsets[1])
    torn = open(path, 'rb').read()
    back = _server('asgd', mid, 9)
    assert back.engine.stats()['journal_records_dropped'] == 2
    back.engine.journal.close()
    data, end = open(path, 'rb').read(), offsets[1]
    n = 10 + struct.unpack_from('<I', data, end + 2)[0]     # (the cut's OP_RESTORED frame)
    assert end + n < len(torn)
    k = n if kept == 'all' else kept
    open(path, 'wb').write(torn[:end] + data[end:end + k] + torn[end + k:])
    for _ in range(2):
        again = _server('asgd', mid, 9)
        assert again.engine.replayed == 1
        assert again.engine.stats()['journal_records_dropped'] == 2
        again.engine.journal.close()
    assert os.path.getsize(path) < len(torn)


def test_a_damaged_record_a_later_fsync_shows_synced_is_refused(tmp_path):
    # the first of two records in one fsync damaged, and a record of a later fsync intact:
    # that later fsync covered the damaged one, whose answer may have left: refused (an
    # acknowledged push is not dropped silently), the folder left as it was. The mark of the
    # first fsync, which says as much, lost (zeros: a power cut that took its block)
    from rog_ros.nodes.push_journal import MARK_SIZE
    mid = _stopped_after('asgd', tmp_path / 'live', 7)
    offsets = _regroup(mid, [2, 1])
    path = os.path.join(mid, JOURNAL_FILE)
    with open(path, 'r+b') as f:
        f.seek(offsets[1] - MARK_SIZE)
        f.write(bytes(MARK_SIZE))
    _flip(path, offsets[0])
    was = _bytes(mid)
    with pytest.raises(JournalError, match=r'server\.journal is damaged at byte \d+ .*the '
                                           r'record at byte \d+, appended after an fsync'):
        _server('asgd', mid, 9)
    assert _bytes(mid) == was


def test_records_are_written_with_the_size_synced_before_their_fsync(tmp_path):
    # each record carries the file's size before its batch (what tells a torn batch from an
    # acknowledged record at the restore); the first batch's mark is not (not fsynced)
    from rog_ros.nodes.push_journal import _OPS, MARK_SIZE
    path = str(tmp_path / JOURNAL_FILE)
    j = PushJournal(path, {'system': 'x'})
    j.read()
    j.append_all([(OP_MESSAGE, 1.0, [b'a']), (OP_MESSAGE, 2.0, [b'bb'])])
    first = os.path.getsize(path)
    j.append_all([(OP_MESSAGE, 3.0, [b'c'])])
    j.close()
    back = PushJournal(path, {'system': 'x'})
    back.read()
    with open(path, 'rb') as f:
        synced = []
        for off, n in back.records:
            f.seek(off)
            synced.append(_OPS[2].unpack(f.read(_OPS[2].size))[2])
    header = back.records[0][0] - 10
    assert synced == [header, header, first - MARK_SIZE]


def test_a_format_1_journal_is_read_and_appended_to_in_its_format(tmp_path):
    # a journal written before the records carried their fsync's start (format 1): read and
    # replayed, appended to in its own format until a checkpoint's header starts format 2; a
    # damaged record before its last is still refused (nothing shows it unsynced)
    path = str(tmp_path / JOURNAL_FILE)
    fleet = {'system': 'x'}
    head = json.dumps({'format': 1, 'epoch': 0, 'fleet': fleet}).encode()
    rec = struct.pack('<Bd', OP_MESSAGE, 1.5) + b'old'
    with open(path, 'wb') as f:
        for body in (head, rec):
            f.write(struct.pack('<2sII', b'RJ', len(body), zlib.crc32(body)) + body)
    j = PushJournal(path, fleet)
    j.read()
    assert j.format == 1 and len(j.records) == 1
    j.append(OP_MESSAGE, 2.5, [b'new'])
    j.close()
    back = PushJournal(path, fleet)
    back.read()
    got = [(op, now) for op, now, _ in _raw_inputs(back)]
    assert got == [(OP_MESSAGE, 1.5), (OP_MESSAGE, 2.5)]
    off = back.records[0][0]
    back.close()
    data = bytearray(open(path, 'rb').read())
    data[off + 9] ^= 0xFF
    open(path, 'wb').write(bytes(data))
    with pytest.raises(JournalError, match='a record before the last'):
        PushJournal(path, fleet).read()
    back.reset(1)
    assert PushJournal(path, fleet).format == FORMAT and back.format == FORMAT


def _raw_inputs(j):
    """Yield ``(op, now, body rest)`` of ``j``'s records (why: bodies that are no message)."""
    from rog_ros.nodes.push_journal import _OPS
    op = _OPS[j.format]
    with open(j.path, 'rb') as f:
        for off, n in j.records:
            f.seek(off)
            body = f.read(n)
            yield op.unpack_from(body, 0)[:2] + (body[op.size:],)


def test_a_fresh_runs_header_keeps_the_run_record_for_a_resume_from_the_journal_alone(
        tmp_path):
    # a server killed before its first checkpoint had no run record to go on from: its
    # clock, timeseries.csv and events.csv started again. The header of a fresh run's journal
    # (epoch 0), written at its first record, keeps it (arrays as lists); a checkpoint's does
    # not (the checkpoint holds it)
    path = str(tmp_path / JOURNAL_FILE)
    fleet = {'system': 'x'}
    j = PushJournal(path, fleet)
    j.read()
    j.header_extra = lambda: {'run_record': {'elapsed_s': 2.5,
                                             'record': {'rows_up': np.array([0.5, 1.0])}}}
    j.append(OP_MESSAGE, 1.0, [b'a'])
    back = PushJournal(path, fleet)
    back.read()
    assert back.header['run_record'] == {'elapsed_s': 2.5, 'record': {'rows_up': [0.5, 1.0]}}
    j.reset(1)
    again = PushJournal(path, fleet)
    again.read()
    assert 'run_record' not in again.header and again.epoch == 1


@pytest.mark.parametrize('cut', ['header only', 'first record torn'])
def test_a_new_run_on_a_journal_left_without_records_writes_its_own_header(cut, tmp_path):
    # a fresh run's header is written at its first record with the run record of that
    # moment. A server killed before that record was whole left the header alone (or with a
    # torn record, dropped): the next start is a new run (nothing to resume: its node sets
    # the results aside, its clock starts again), but it appended to that file, so a crash
    # of the new run before its first checkpoint resumed it from the dead run's record (its
    # clock and rows, from before the results were set aside). The new run's first record
    # writes the header again, with its own run record.
    path = str(tmp_path / JOURNAL_FILE)
    fleet = {'system': 'x'}
    dead = PushJournal(path, fleet)
    dead.read()
    dead.header_extra = lambda: {'run_record': {'elapsed_s': 9.0, 'run': 'dead'}}
    dead.append(OP_MESSAGE, 1.0, [b'a' * 100])
    dead.close()
    _unsynced(path)
    with open(path, 'r+b') as f:
        f.truncate(os.path.getsize(path) - 1)    # (the first record torn)
    if cut == 'header only':
        with open(path, 'r+b') as f:
            f.seek(2)
            f.truncate(10 + struct.unpack('<I', f.read(4))[0])
    new = PushJournal(path, fleet)
    new.read()
    assert new.records == [] and new.dropped_records == (cut != 'header only')
    new.header_extra = lambda: {'run_record': {'elapsed_s': 0.5, 'run': 'new'}}
    new.append(OP_MESSAGE, 2.0, [b'b'])
    new.close()
    back = PushJournal(path, fleet)
    back.read()
    assert back.header['run_record'] == {'elapsed_s': 0.5, 'run': 'new'}
    assert [now for _, now, _ in _raw_inputs(back)] == [2.0]
    back.close()


def test_a_torn_record_full_of_magics_is_read_past_once(tmp_path, monkeypatch):
    # the search for records after a damaged one (its length cannot be trusted) read a
    # block of up to 1 MiB again from every magic that was no record: a torn push whose
    # bytes hold the magic densely (a constant array) was read once per magic, about
    # size * size / 4 bytes (100 MB for this 20 KB record, hours for a model's)
    import io
    from rog_ros.nodes import push_journal
    path = str(tmp_path / JOURNAL_FILE)
    fleet = {'system': 'x'}
    j = PushJournal(path, fleet)
    j.read()
    j.append(OP_MESSAGE, 1.0, [b'ok'])
    j.append(OP_MESSAGE, 2.0, [b'RJ' * 10000])
    j.close()
    _unsynced(path)
    with open(path, 'r+b') as f:
        f.seek(-1, os.SEEK_END)
        f.write(b'\xff')                         # (its checksum wrong: torn)
    size, got = os.path.getsize(path), [0]

    class Counted(io.FileIO):

        def readinto(self, b):
            n = super().readinto(b)
            got[0] += n or 0
            return n

    def counted_open(p, mode='r', *args, **kwargs):
        if mode == 'rb':
            return io.BufferedReader(Counted(p, 'r'))
        return open(p, mode, *args, **kwargs)

    monkeypatch.setattr(push_journal, 'open', counted_open, raising=False)
    back = PushJournal(path, fleet)
    back.read()
    assert back.dropped_records == 1 and len(back.records) == 1
    assert got[0] < 5 * size, (got[0], size)
    back.close()


def test_the_records_read_are_on_disk_before_a_record_appended_says_so(tmp_path, monkeypatch):
    # a record's ``synced`` says every byte before its batch is on disk. A server killed
    # (not a power cut) leaves its last records in the page cache, unsynced, and its restart
    # reads them whole and appends after them: until its first fsync a power cut could tear
    # one of them under an intact record that says it was synced, and the journal was
    # refused (the server could not start). ``read`` fsyncs the file it appends to.
    path = str(tmp_path / JOURNAL_FILE)
    fleet = {'system': 'x'}
    j = PushJournal(path, fleet)
    j.read()
    j.append(OP_MESSAGE, 1.0, [b'a'])
    j.close()
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.path.realpath(f'/proc/self/fd/{fd}'))
        real(fd)

    monkeypatch.setattr(os, 'fsync', fsync)
    back = PushJournal(path, fleet)
    back.read()
    assert synced == [os.path.realpath(path)]
    back.close()


@pytest.mark.parametrize('tail', [b'', b'\0' * 100])
def test_a_magic_left_alone_by_a_power_cut_is_no_record(tail, tmp_path):
    # a power cut that wrote the first bytes of a record's frame (its magic) and not the
    # next (zeros: a sector or block not written) leaves a frame of length 0 and checksum 0,
    # which crc32 of no bytes matches: it was taken for a whole record (too short to hold
    # its kind and time), kept, and the replay failed on it (struct.error) instead of
    # dropping it as torn
    path = str(tmp_path / JOURNAL_FILE)
    fleet = {'system': 'x'}
    j = PushJournal(path, fleet)
    j.read()
    j.append(OP_MESSAGE, 1.0, [b'a'])
    j.close()
    with open(path, 'ab') as f:
        f.write(b'RJ' + b'\0' * 8 + tail)
    back = PushJournal(path, fleet)
    back.read()
    assert len(back.records) == 1 and back.dropped_records == 1
    assert [(op, now) for op, now, _ in _raw_inputs(back)] == [(OP_MESSAGE, 1.0)]
    back.close()


def _random_bytes(rng, n):
    """
    Return ``n`` random bytes of ``rng`` (why: ``Random.randbytes`` is Python 3.9's).

    Python 3.8's ``getrandbits`` refuses 0 bits (3.9 gives 0): no bytes are drawn for none.
    """
    return rng.getrandbits(8 * n).to_bytes(n, 'little') if n > 0 else b''


@pytest.mark.parametrize('block', [64, 512])
def test_a_power_cut_in_any_batch_keeps_every_answered_record(block, tmp_path):
    # random runs of fsync batches (some holding the magic densely, some emptied by a
    # checkpoint), then a power cut in the batch being written: its size reached any point
    # and any of its blocks left zeros. The restore keeps every answered record (their
    # batches' fsyncs returned), keeps at most a prefix of the batch cut, refuses nothing,
    # and goes on appending; 1 to 3 such cuts a run
    import random
    from rog_ros.nodes.push_journal import _OPS
    path, fleet = str(tmp_path / JOURNAL_FILE), {'system': 'x'}

    def kept(j):
        with open(path, 'rb') as f:
            out = []
            for off, n in j.records:
                f.seek(off)
                out.append(f.read(n)[_OPS[j.format].size:])
            return out

    for seed in range(200):
        rng = random.Random(seed)
        if os.path.exists(path):
            os.remove(path)
        j, answered = PushJournal(path, fleet), []
        j.read()
        for cut in range(rng.randint(1, 3)):
            for _ in range(rng.randint(0, 5)):
                batch = [_random_bytes(rng, rng.randint(0, 8 * block)) +
                         b'RJ' * rng.randint(0, 40) for _ in range(rng.randint(1, 3))]
                j.append_all([(OP_MESSAGE, 1.0, [b]) for b in batch])
                answered += batch
            if rng.random() < 0.3:
                j.reset(j.epoch + 1)
                answered = []
            start = os.path.getsize(path) if os.path.exists(path) else None
            if j._cut is not None:                    # (the last cut's torn bytes: cut now)
                start = j._cut[0]
            batch = [_random_bytes(rng, rng.randint(0, 4 * block))
                     for _ in range(rng.randint(1, 4))]
            j.append_all([(OP_MESSAGE, 2.0, [b]) for b in batch])
            j.close()
            _unsynced(path)                           # (cut before its fsync returned)
            with open(path, 'rb') as f:
                data = bytearray(f.read())
            if start is None:                         # (the header came with the batch)
                start = 10 + struct.unpack_from('<I', data, 2)[0]
            tail = data[start:rng.randint(start, len(data))]
            for k in range(0, len(tail), block):
                if rng.random() < 0.5:
                    tail[k:k + block] = bytes(len(tail[k:k + block]))
            with open(path, 'wb') as f:
                f.write(bytes(data[:start] + tail))
            j = PushJournal(path, fleet)
            j.read()
            got = kept(j)
            assert got[:len(answered)] == answered, (seed, cut)
            assert got[len(answered):] == batch[:len(got) - len(answered)], (seed, cut)
            answered = got
        j.close()


@pytest.mark.parametrize('block', [64, 512])
def test_damage_to_an_answered_last_batch_is_refused_while_its_mark_is_there(block, tmp_path):
    # the last batch's fsync returned (its answer may have left), then one of its records
    # was damaged (a block the disk lost later, a bit flipped), no batch after it. That was
    # dropped as a torn batch (counted, journal_records_dropped), an answered push lost
    # without a word. The mark appended after the fsync returned proves the batch was on
    # disk: refused in one line, the file unchanged. A power cut may lose the mark itself
    # (not fsynced: cut off or zeros), and then nothing tells: dropped, as before
    import random
    from rog_ros.nodes.push_journal import MARK_SIZE
    path, fleet = str(tmp_path / JOURNAL_FILE), {'system': 'x'}
    refused = dropped = 0
    for seed in range(120):
        rng = random.Random(seed)
        if os.path.exists(path):
            os.remove(path)
        j = PushJournal(path, fleet)
        j.read()
        for _ in range(rng.randint(0, 3)):
            j.append_all([(OP_MESSAGE, 1.0, [_random_bytes(rng, rng.randint(1, 4 * block))])
                          for _ in range(rng.randint(1, 3))])
        start = os.path.getsize(path) if os.path.exists(path) else None
        last = [_random_bytes(rng, rng.randint(1, 4 * block)) for _ in range(rng.randint(1, 3))]
        j.append_all([(OP_MESSAGE, 2.0, [b]) for b in last])
        j.close()
        data = bytearray(open(path, 'rb').read())
        if start is None:
            start = 10 + struct.unpack_from('<I', data, 2)[0]
        end = len(data) - MARK_SIZE                   # (the batch's records end here)
        data[rng.randrange(start, end)] ^= 1 << rng.randrange(8)    # (damage after it)
        mark = rng.choice(['kept', 'kept', 'cut off', 'zeros'])
        if mark == 'cut off':
            del data[end:]
        elif mark == 'zeros':
            data[end:] = bytes(MARK_SIZE)
        open(path, 'wb').write(bytes(data))
        back = PushJournal(path, fleet)
        if mark == 'kept':
            with pytest.raises(JournalError) as err:
                back.read()
            said = str(err.value)
            assert 'after the fsync of its batch returned' in said, (seed, said)
            assert 'data an answer promised is gone' in said and '\n' not in said
            assert open(path, 'rb').read() == bytes(data), seed     # (nothing changed)
            refused += 1
        else:
            back.read()
            assert 1 <= back.dropped_records <= len(last), (seed, mark)
            assert back.dropped_records + len(back.records) >= len(last), seed
            back.close()
            dropped += 1
    assert refused > 30 and dropped > 30, (refused, dropped)


def test_a_format_2_journal_is_read_and_appended_to_in_its_format(tmp_path):
    # a journal of the format before the marks (2): read, its torn last batch dropped as
    # before, appended to without marks (its records' synced as format 2 wrote them) until a
    # checkpoint's header starts format 3
    from rog_ros.nodes.push_journal import _OPS, MARK_SIZE
    path = str(tmp_path / JOURNAL_FILE)
    fleet = {'system': 'x'}
    head = json.dumps({'format': 2, 'epoch': 0, 'fleet': fleet}).encode()
    h = 10 + len(head)
    recs = [_OPS[2].pack(OP_MESSAGE, 1.5, h) + b'old', _OPS[2].pack(OP_MESSAGE, 2.5, h) + b'x']
    with open(path, 'wb') as f:
        for body in [head] + recs:
            f.write(struct.pack('<2sII', b'RJ', len(body), zlib.crc32(body)) + body)
    with open(path, 'r+b') as f:
        f.truncate(os.path.getsize(path) - 1)        # (the second record torn)
    j = PushJournal(path, fleet)
    j.read()
    assert j.format == 2 and len(j.records) == 1 and j.dropped_records == 1
    size = sum(j.records[-1])               # (the torn record: cut off by the next append)
    j.append(OP_MESSAGE, 3.5, [b'new'])
    j.close()
    assert os.path.getsize(path) == size + 10 + _OPS[2].size + 3      # (no mark)
    back = PushJournal(path, fleet)
    back.read()
    got = [(op, now) for op, now, _ in _raw_inputs(back)]
    assert got == [(OP_MESSAGE, 1.5), (OP_MESSAGE, 3.5)]
    back.reset(1)
    back.append(OP_MESSAGE, 4.5, [b'n'])
    back.close()
    again = PushJournal(path, fleet)
    again.read()
    assert again.format == FORMAT and [now for _, now, _ in _raw_inputs(again)] == [4.5]
    assert open(path, 'rb').read()[-MARK_SIZE:][:2] == b'RJ'      # (its mark)
    again.close()


@pytest.mark.parametrize('keep', [1, 10, 26])
def test_a_mark_torn_by_a_power_cut_is_cut_off_uncounted(keep, tmp_path):
    # the last batch's fsync returned, its mark (not fsynced) torn by the power cut: part of
    # it kept, zeros for some of it. No record is lost: it was counted as a dropped record
    # (journal_records_dropped, "their answers never left"). Cut off, uncounted, and the
    # next append goes on where the records end
    from rog_ros.nodes.push_journal import MARK_SIZE
    path, fleet = str(tmp_path / JOURNAL_FILE), {'system': 'x'}
    j = PushJournal(path, fleet)
    j.read()
    j.append_all([(OP_MESSAGE, 1.0, [b'a' * 50]), (OP_MESSAGE, 2.0, [b'b' * 50])])
    j.close()
    data = bytearray(open(path, 'rb').read())
    end = len(data) - MARK_SIZE
    del data[end + keep:]
    data[end + keep // 2] = 0                        # (a zero where the power cut left one)
    open(path, 'wb').write(bytes(data))
    back = PushJournal(path, fleet)
    back.read()
    assert back.dropped_records == 0 and back.dropped is None and len(back.records) == 2
    assert os.path.getsize(path) == end + keep        # (cut off by the next append)
    back.append(OP_MESSAGE, 3.0, [b'c'])
    back.close()
    again = PushJournal(path, fleet)
    again.read()
    assert [now for _, now, _ in _raw_inputs(again)] == [1.0, 2.0, 3.0]
    again.close()


def test_a_journal_of_a_newer_format_says_so_and_does_not_send_the_folder_away(tmp_path):
    # format 3 (the marks) is the first format an older build refuses; a journal of a format
    # newer than this build's said 'unknown format' and told the user to move the whole
    # state folder away (losing the pushes answered since the checkpoint), where running
    # the newer rog_ros that wrote it resumes the run. Said in one line, nothing changed
    path, fleet = str(tmp_path / JOURNAL_FILE), {'system': 'x'}
    head = json.dumps({'format': FORMAT + 1, 'epoch': 0, 'fleet': fleet}).encode()
    data = struct.pack('<2sII', b'RJ', len(head), zlib.crc32(head)) + head + b'later'
    open(path, 'wb').write(data)
    with pytest.raises(JournalError) as err:
        PushJournal(path, fleet).read()
    said = str(err.value)
    assert f'is of format {FORMAT + 1}, written by a newer rog_ros' in said, said
    assert f'reads formats 1 to {FORMAT}' in said and 'move the whole' not in said
    assert '\n' not in said and open(path, 'rb').read() == data
    head = json.dumps({'format': 'x', 'epoch': 0, 'fleet': fleet}).encode()
    open(path, 'wb').write(struct.pack('<2sII', b'RJ', len(head), zlib.crc32(head)) + head)
    with pytest.raises(JournalError, match='has an unknown format; move the whole'):
        PushJournal(path, fleet).read()


@pytest.mark.parametrize('system', ['asgd', 'gsp'])
def test_an_evaluation_owed_at_a_crash_is_restored_with_its_model(system, tmp_path):
    # an evaluation handed to the evaluator is owed until its row is journaled: restored
    # from the journal (its replay rebuilds the model at the OP_EVAL_SUBMITTED record), or
    # from a checkpoint taken while it ran (with its snapshot); its row settles it
    info = {'time_s': 1.25, 'iteration': 2.0, 'counters': {'bytes': 7, 'stall_s': 0.5}}
    seen = {}

    def each(k, srv, before):
        """Submit at message 4; copy the folder at 5 (journal) and at 9 (checkpoint)."""
        if k == 4:
            seen['model'] = srv.engine.consensus_model()
            srv.engine.journal_submitted(dict(info), seen['model'])
            assert srv.engine.journal.format == 4
        if k in (5, 9):
            shutil.copytree(tmp_path / 'live', tmp_path / f'at{k}')
            seen[k] = srv.state.saves

    _drive(system, tmp_path / 'live', 9, each)
    assert seen[9] > seen[5]                      # (a checkpoint between: it holds it)
    for k in (5, 9):
        back = _server(system, tmp_path / f'at{k}', 9)
        [(got, model)] = back.engine.owed_evaluations
        assert got == info and torch.equal(model, seen['model']), k
        assert not torch.equal(model, back.engine.consensus_model()), k   # (pushes since)
        back.engine.journal_evaluation(dict(info, metrics={'loss': 1.0}))
        assert back.engine.owed_evaluations == []
        back.engine.journal.close()
        again = _server(system, tmp_path / f'at{k}', 9)
        assert again.engine.owed_evaluations == [], k      # (its row journaled: settled)
        again.engine.journal.close()


def test_a_format_3_journal_gets_no_evaluation_submissions(tmp_path):
    # an older build (format 3) refuses a record kind it does not know with the wrong fix:
    # a format 3 journal read is appended to without OP_EVAL_SUBMITTED until the next
    # checkpoint's header starts format 4
    from rog_ros.nodes.push_journal import OP_EVAL_SUBMITTED
    path, fleet = str(tmp_path / JOURNAL_FILE), {'system': 'x'}
    head = json.dumps({'format': 3, 'epoch': 0, 'fleet': fleet}).encode()
    body = struct.pack('<BdQ', OP_MESSAGE, 1.5, 10 + len(head)) + b'old'
    with open(path, 'wb') as f:
        for b in (head, body):
            f.write(struct.pack('<2sII', b'RJ', len(b), zlib.crc32(b)) + b)
    j = PushJournal(path, fleet)
    j.read()
    size = os.path.getsize(path)
    info = {'time_s': 2.0, 'iteration': 1.0, 'counters': {}}
    assert not j.append_submitted(info) and os.path.getsize(path) == size
    j.reset(1)
    assert j.append_submitted(info)
    j.close()
    back = PushJournal(path, fleet)
    back.read()
    assert back.format == 4 and list(back.inputs()) == [(OP_EVAL_SUBMITTED, 2.0, info)]
    back.close()


def test_a_checkpoint_taken_while_an_evaluation_runs_holds_its_snapshot_once_uncopied(
        tmp_path):
    # What an owed evaluation costs a checkpoint (docs/faults.md, 2026-12-08: measured, kept
    # in server.pt rather than a file of its own): the evaluator's own snapshot, not a copy
    # (no memory beyond the model the evaluator holds anyway), one model's bytes more per
    # evaluation running (two queued: two), none once its row is journaled
    srv = _server('asgd', tmp_path, 50)
    model_bytes = N * 4
    sizes, snaps = [], []
    for owed in range(3):
        if owed:
            snaps.append(srv.engine.consensus_model())
            srv.engine.journal_submitted({'time_s': float(owed), 'iteration': float(owed),
                                          'counters': {}}, snaps[-1])
        sd = srv.engine.state_dict(copy=False)
        assert len(sd['owed_evaluations']) == len(snaps) == owed
        assert all(a is b for (_, a), b in zip(sd['owed_evaluations'], snaps))
        srv.checkpoint()
        sizes.append(os.path.getsize(tmp_path / 'server.pt'))
    for info in ({'time_s': 1.0, 'iteration': 1.0}, {'time_s': 2.0, 'iteration': 2.0}):
        srv.engine.journal_evaluation(dict(info, metrics={'loss': 1.0}))
    srv.checkpoint()
    sizes.append(os.path.getsize(tmp_path / 'server.pt'))
    grown = [b - a for a, b in zip(sizes, sizes[1:])]
    assert all(model_bytes <= g < model_bytes + 4096 for g in grown[:2]), (grown, model_bytes)
    assert abs(sizes[3] - sizes[0]) < 4096 and srv.engine.owed_evaluations == []
    srv.engine.journal.close()


@pytest.mark.parametrize('system', SYSTEMS)
def test_the_logs_of_a_journal_alone_replayed_after_a_reboot_are_moved_by_its_stamp(
        system, tmp_path, monkeypatch):
    # A push server killed before its first checkpoint resumes from its journal alone; its
    # header keeps the run record (``header_extra``), stamped (``clocks.mono_stamp``) at the
    # journal's first record, at monotonic 100 s of boot A. Restored in boot B 10 s later by
    # the wall clock, at 20 s: the replayed logs move by 20 - 100 - 10 = -90 s, as those of
    # a journal beside a checkpoint do (before: they stayed on boot A's clock, and the node
    # clamped them into the run, at its restart)
    from rog_ros.nodes import clocks
    t, live, checked = 1.7e9, [], []

    def at(boot, wall, mono):
        """Make ``clocks`` read ``boot``, ``wall`` and ``mono`` (the boot clock 5 s)."""
        monkeypatch.setattr(clocks, 'boot_id', lambda: boot)
        monkeypatch.setattr(clocks, '_wall', lambda: wall)
        monkeypatch.setattr(clocks, '_monotonic', lambda: mono)
        monkeypatch.setattr(clocks, 'boot_clock', lambda: 5.0)

    def crash(k, srv, before):
        """Restore a copy of the journal alone in boot B; compare its logs' times."""
        if os.path.isfile(tmp_path / 'live' / SERVER_STATE_FILE):
            return            # (a checkpoint beside it: the test above)
        copy = tmp_path / f'k{k}'
        shutil.copytree(tmp_path / 'live', copy)
        at('boot-b', t + 10.0, 20.0)
        back = _server(system, copy, 9)
        at('boot-a', t, 100.0)
        assert back.engine.replayed_without_checkpoint
        got = [(round(now, 6), g.name, g.worker) for now, g in back.engine.replayed_logs]
        assert got == [(round(now - 90.0, 6), name, w) for now, name, w in live], (k, got)
        checked.append(len(got))
        back.engine.journal.close()

    def server(folder):
        """Return the server, its journal's header stamped, its logs noted (why: compared)."""
        hooks = _server(system, folder, 9)
        hooks.engine.journal.header_extra = lambda: {'run_record': clocks.mono_stamp()}
        on_message = hooks.on_message

        def noted(msg, now):
            """Hand ``msg`` on; note the logs of its answer (why: compared with the replay)."""
            out = on_message(msg, now)
            live.extend((round(now, 6), g.name, g.worker) for g in out if isinstance(g, Log))
            return out
        hooks.on_message = noted
        return hooks

    at('boot-a', t, 100.0)
    os.makedirs(tmp_path / 'live')
    _drive(system, tmp_path / 'live', 9, crash, make=server)
    assert checked and max(checked) >= 1        # (logs replayed from the journal alone)
    # a stamp that is not one: refused in one line, naming the journal, nothing changed
    refused = []

    def restore_bad(k, srv, before):
        """Restore a copy of the journal alone whose header's stamp is damaged."""
        if k:
            return
        copy = tmp_path / 'bad-copy'
        shutil.copytree(tmp_path / 'bad', copy)
        kept = open(copy / JOURNAL_FILE, 'rb').read()
        with pytest.raises(JournalError, match='boot_id') as err:
            _server(system, copy, 9)
        assert '\n' not in str(err.value) and str(copy / JOURNAL_FILE) in str(err.value)
        assert open(copy / JOURNAL_FILE, 'rb').read() == kept
        refused.append(k)

    def bad_server(folder):
        """Return the server, its journal's header stamped with no boot id (why: damaged)."""
        hooks = _server(system, folder, 9)
        hooks.engine.journal.header_extra = lambda: {
            'run_record': dict(clocks.mono_stamp(), boot_id='not a boot id')}
        return hooks

    _drive(system, tmp_path / 'bad', 9, restore_bad, make=bad_server)
    assert refused == [0]
