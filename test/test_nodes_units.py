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
Pure parts of the nodes, without DDS or processes.

Lifecycle, routing, outbox shaping, ROS argument stripping, link probes and the engine driver
on a fake bus.
"""

import dataclasses
import math
import time

import numpy as np
import pytest
from rog_ros.net.shaper import TokenBucketShaper
from rog_ros.net.traces import Trace
from rog_ros.nodes import lifecycle as lc
from rog_ros.nodes import linkprobe, routing
from rog_ros.nodes.driver import EngineDriver
from rog_ros.nodes.outbox import Outbox
from rog_ros.nodes.params import strip_ros_args
from rog_ros.protocol import messages as m
from rog_ros.protocol.actions import Log, Send, StartCompute, Stopped
import torch


# ---------------------------------------------------------------------------------- lifecycle
def test_lifecycle_follows_the_managed_node_graph():
    # Prepare
    seen = []
    life = lc.Lifecycle(on_change=lambda old, new, tr: seen.append((tr, old, new)))
    # Execute
    life.trigger('configure')
    life.trigger('activate')
    assert life.training
    life.trigger('deactivate')
    paused = life.training
    life.trigger('activate')
    life.trigger('shutdown')
    # Assert
    assert not paused
    assert life.finished and life.state == lc.FINALIZED
    assert [s[0] for s in seen] == ['configure', 'activate', 'deactivate', 'activate',
                                    'shutdown']
    assert seen == life.history


@pytest.mark.parametrize('state_path,transition', [
    ([], 'activate'), (['configure'], 'deactivate'), (['configure', 'activate'], 'configure'),
    (['shutdown'], 'activate'), (['shutdown'], 'shutdown')])
def test_lifecycle_rejects_transitions_from_wrong_states(state_path, transition):
    life = lc.Lifecycle()
    for tr in state_path:
        life.trigger(tr)
    before = life.state
    with pytest.raises(lc.LifecycleError):
        life.trigger(transition)
    assert life.state == before
    assert life.request(transition) is False


def test_lifecycle_unknown_transition_is_a_value_error():
    with pytest.raises(ValueError):
        lc.Lifecycle().trigger('explode')


# ---------------------------------------------------------------------------------- routing
def _chunk(dest_receiver=m.SERVER, n=100):
    return m.RowChunk(transfer_id=1, seq=0, sender=0, receiver=dest_receiver,
                      kind=m.KIND_GRAD, clock=1, payload=bytes(n))


def test_routing_one_topic_per_direction_and_worker():
    ack = m.TransferAck(transfer_id=1, sender=m.SERVER, receiver=2, seq=0)
    sched = m.Schedule(worker=2, clock=1, push_deadline_s=-1.0)
    assert routing.topic_for(m.SERVER, _chunk()) == 'up/chunks'
    assert routing.topic_for(2, ack) == 'w2/acks'
    assert routing.topic_for(2, sched) == 'w2/schedule'
    inbox = set(routing.worker_inbox(2))
    assert inbox == {'w2/chunks', 'w2/acks', 'w2/schedule', 'w2/versions'}
    assert inbox.isdisjoint(routing.worker_inbox(1))
    assert set(routing.server_outbox(3)) == set().union(*(routing.worker_inbox(r)
                                                        for r in range(3)))
    assert routing.worker_outbox() == routing.server_inbox() == ['up/chunks', 'up/acks']
    with pytest.raises(ValueError):
        routing.prefix(-5)


# ---------------------------------------------------------------------------------- outbox
def test_outbox_unshaped_releases_at_once_in_fifo_order():
    box = Outbox()
    for k in range(3):
        box.put(0, 'w0/chunks', _chunk(0, k + 1), now=1.0)
    got = box.due(1.0)
    assert [len(msg.payload) for _, _, msg in got] == [1, 2, 3]
    assert box.next_release() is None and box.pending() == 0


def test_outbox_shaped_link_follows_the_trace_rate():
    # Prepare: 1 Mbit/s = 125,000 B/s, bucket of 1000 B, messages of 10,000 B (wire size)
    trace = Trace(np.array([0.0]), np.array([1.0]), 10.0)
    box = Outbox({m.SERVER: TokenBucketShaper(trace, 1000)})
    msg = _chunk(n=10_000 - _chunk(n=0).wire_size())
    assert msg.wire_size() == 10_000
    # Execute: 50 messages queued at t=0, then released as time goes by
    for _ in range(50):
        box.put(m.SERVER, 'up/chunks', msg, now=0.0)
    released, t = [], 0.0
    while box.pending():
        t = box.next_release()
        released += [(t, x) for x in box.due(t)]
    # Assert: 500,000 B minus the 1000 B burst take (500,000 - 1000) / 125,000 s
    assert math.isclose(released[-1][0], (500_000 - 1000 - 9_000) / 125_000, rel_tol=1e-6)
    rate = 8 * 10_000 * 49 / (released[-1][0] - released[0][0]) / 1e6
    assert rate == pytest.approx(1.0, rel=1e-6)
    assert box.bytes_sent[m.SERVER] == 500_000


def test_outbox_permanent_outage_is_reported_not_sent():
    trace = Trace(np.array([0.0]), np.array([0.0]), 10.0)
    box = Outbox({0: TokenBucketShaper(trace, 100)})
    for _ in range(2):      # none goes: an outage empties the bucket, full as it is
        box.put(0, 'w0/chunks', _chunk(0, 1000), now=0.0)
    assert box.due(0.0) == []
    assert box.stuck() and box.due(1e9) == []
    assert box.drop(0) == 2 and box.pending() == 0


# ---------------------------------------------------------------------------------- params
def test_strip_ros_args_removes_every_ros_block():
    argv = ['--rank', '1', '--ros-args', '-r', '__node:=w1', '--params-file', 'x.yaml', '--',
            '--workers', '3', '--ros-args', '-p', 'a:=1']
    assert strip_ros_args(argv) == ['--rank', '1', '--workers', '3']


# ---------------------------------------------------------------------------------- probes
NET_DEV = ('Inter-|   Receive    |  Transmit\n'
           ' face |bytes    packets errs drop fifo frame compressed multicast|bytes    '
           'packets errs drop fifo colls carrier compressed\n'
           '    lo: 1000      10    0    0    0     0          0         0     2000      20  0  0'
           '  0  0  0  0\n'
           ' wlan0: 123456789 1000  0    0    0     0          0         0 987654321    900  0  0'
           '  0  0  0  0\n')
IW_LINK = """Connected to 11:22:33:44:55:66 (on wlan0)
        SSID: lab
        freq: 5180
        signal: -57 dBm
        rx bitrate: 390.0 MBit/s VHT-MCS 9 80MHz short GI VHT-NSS 1
        tx bitrate: 433.3 MBit/s VHT-MCS 9 80MHz short GI VHT-NSS 1
"""


def test_parse_proc_net_dev_and_iw_link():
    counters = linkprobe.parse_net_dev(NET_DEV)
    assert counters == {'lo': (1000, 2000), 'wlan0': (123456789, 987654321)}
    assert linkprobe.parse_iw_link(IW_LINK) == (433.3, -57.0)
    assert linkprobe.parse_iw_link('Not connected.') == (-1.0, 0.0)


def test_rate_meter_never_reports_negative_rates():
    meter = linkprobe.RateMeter()
    assert meter.update(0.0, 0, 0) == (0.0, 0.0)
    assert meter.update(1.0, 125_000, 250_000) == pytest.approx((1.0, 2.0))
    assert meter.update(2.0, 10, 10) == (0.0, 0.0)     # counter reset


def test_read_counters_has_loopback():
    assert 'lo' in linkprobe.read_counters()


# ---------------------------------------------------------------------------------- driver
class FakeBus:

    def __init__(self):
        self.published, self.inbox = [], []

    def publish(self, topic, msg):
        self.published.append((topic, msg))

    def poll(self, timeout_s=0.0):
        out, self.inbox = self.inbox, []
        return out


class FakeEngine:
    """Answers every message with a Send back and asks for one computation."""

    def __init__(self):
        self.got, self.grads, self.ticks = [], [], 0
        self.wake = None

    def on_message(self, msg, now):
        self.got.append(msg)
        return [Send(m.SERVER, msg), StartCompute(clock=1, sleep_s=0.0), Log('x', 1.0)]

    def on_tick(self, now):
        self.ticks += 1
        self.wake = None
        return []

    def next_wakeup(self):
        return self.wake

    def on_compute_done(self, grad, now):
        self.grads.append(grad)
        return [Stopped('done')]


def test_driver_executes_actions_and_respects_pause():
    # Prepare
    bus, engine, clock = FakeBus(), FakeEngine(), [0.0]
    paused, logs = [True], []
    driver = EngineDriver(bus, engine, Outbox(), compute=lambda c: torch.ones(2),
                          may_compute=lambda: not paused[0],
                          on_log=lambda now, log: logs.append(log.name), clock=lambda: clock[0])
    bus.inbox = [('w0/chunks', _chunk(0, 5))]
    engine.wake = 0.0
    # Execute: a message arrives while the node is paused
    driver.step(0.0)
    # Assert: echoed on the uplink topic, tick ran, no computation while paused
    assert [t for t, _ in bus.published] == ['up/chunks']
    assert engine.ticks == 1 and logs == ['x'] and engine.grads == []
    # Execute: resume
    paused[0] = False
    driver.step(0.0)
    # Assert
    assert len(engine.grads) == 1 and driver.stopped


def test_driver_keeps_the_loop_running_while_the_compute_thread_computes():
    # Prepare: a computation that waits until the loop has handled a message meanwhile
    import threading
    bus, engine = FakeBus(), FakeEngine()
    handled, threads = threading.Event(), []

    def compute(clock):
        threads.append(threading.current_thread().name)
        assert handled.wait(5.0), 'the loop did not run during the computation'
        return torch.full((2,), float(clock))
    driver = EngineDriver(bus, engine, Outbox(), compute=compute, compute_thread=True)
    driver.handle([StartCompute(clock=3, sleep_s=0.0)], 0.0)
    # Execute: the computation starts; a message arrives and is answered meanwhile
    driver.step(0.0)
    assert driver.computing is not None and engine.grads == []
    bus.inbox = [('w0/chunks', _chunk(0, 5))]
    driver.step(0.0)
    handled.set()
    deadline = time.monotonic() + 5.0
    while not driver.stopped and time.monotonic() < deadline:
        driver.step(0.0)
    driver.close()
    # Assert: answered while computing, the gradient taken once, on the loop's thread
    assert [t for t, _ in bus.published][:1] == ['up/chunks']
    assert len(engine.grads) == 1 and float(engine.grads[0][0]) == 3.0
    assert threads and threads[0].startswith('rog_compute') and driver.stopped


def test_driver_defers_what_may_change_the_model_until_the_computation_ends():
    # Prepare: acks reach the engine during a threaded computation, nothing else does
    import threading
    bus, engine = FakeBus(), FakeEngine()
    release = threading.Event()

    def compute(clock):
        release.wait(5.0)
        return torch.ones(2)
    driver = EngineDriver(bus, engine, Outbox(), compute=compute, compute_thread=True,
                          while_computing=(m.TransferAck,))
    driver.handle([StartCompute(clock=1, sleep_s=0.0)], 0.0)
    driver.step(0.0)
    ack = m.TransferAck(transfer_id=1, seq=0, sender=m.SERVER, receiver=0)
    bus.inbox = [('w0/chunks', _chunk(0, 5)), ('w0/acks', ack)]
    driver.step(0.0)
    # Assert: the ack went in, the chunk waits
    assert engine.got == [ack]
    # Execute: the computation ends
    release.set()
    deadline = time.monotonic() + 5.0
    while not driver.stopped and time.monotonic() < deadline:
        driver.step(0.0)
    driver.close()
    # Assert: the gradient first, then the chunk that waited
    assert len(engine.grads) == 1 and len(engine.got) == 2
    assert isinstance(engine.got[1], m.RowChunk)


def _worker_engine():
    """Return a fresh Rog worker engine (rank 0 of 2): real reject paths for the driver."""
    from rog_ros.core.compress import make_codec
    from rog_ros.core.rows import RowLayout
    from rog_ros.protocol.policies import make_policy
    from rog_ros.protocol.worker import WorkerEngine
    layout = RowLayout([(4, 3), (4,)])
    return WorkerEngine(0, 2, layout, make_codec('row_sign'),
                        make_policy('rog:4', outage_aware=False), torch.zeros(layout.n_params))


def test_driver_counts_only_messages_the_engine_took_as_heard():
    # last_receive is the worker node's give-up timer ("no message from the server"): every
    # message received moved it, the ones the engine refused too, so a server run that sent
    # nothing but garbage kept a robot waiting for ever
    bus, engine, clock = FakeBus(), _worker_engine(), [0.0]
    driver = EngineDriver(bus, engine, Outbox(), may_compute=lambda: False,
                          clock=lambda: clock[0])
    driver.handle(engine.start(0.0), 0.0)
    garbage = m.Schedule(worker=1, clock=0, push_deadline_s=1.0, incarnation=7)
    hello = m.Schedule(worker=0, clock=0, push_deadline_s=1.0, incarnation=7,
                       target_incarnation=engine.incarnation)
    heard = []
    for t, msg in ((1.0, garbage), (2.0, hello), (3.0, garbage), (4.0, garbage)):
        clock[0] = t
        bus.inbox = [('w0/schedule', msg)]
        driver.step(0.0)
        heard.append(driver.last_receive)
    assert heard == [None, 2.0, 2.0, 2.0] and engine.rejects == 3
    # a message the engine raised on (not a MessageError) is no sign of life either
    engine.on_message = lambda msg, now: 1 / 0
    clock[0] = 5.0
    bus.inbox = [('w0/schedule', hello)]
    driver.step(0.0)
    assert driver.engine_errors == 1 and driver.last_receive == 2.0


def test_driver_counts_only_the_live_server_runs_messages_as_heard():
    # a retired server run's well-formed messages (a replaced server's zombie, late copies)
    # were taken as signs of life, so a robot whose live server fell silent waited for ever:
    # one of another fleet size is never taken back, an unknown run's is never adopted
    bus, engine, clock = FakeBus(), _worker_engine(), [0.0]
    driver = EngineDriver(bus, engine, Outbox(), may_compute=lambda: False,
                          clock=lambda: clock[0])
    driver.handle(engine.start(0.0), 0.0)
    ours = engine.incarnation

    def hello(run, target=ours):
        """Return a well-formed schedule of server run ``run`` for this robot."""
        return m.Schedule(worker=0, clock=0, push_deadline_s=1.0, incarnation=run,
                          target_incarnation=target)

    other_fleet = m.RowVersions(transfer_id=1, receiver=0, n_workers=5, incarnation=7,
                                target_incarnation=ours)
    heard = []
    for t, msg in ((1.0, hello(7)), (2.0, hello(9)),        # run 9 replaces run 7
                   (3.0, hello(7)), (4.0, hello(7)),        # run 7's late copies
                   (30.0, other_fleet), (60.0, other_fleet),  # never our server again
                   (61.0, hello(11, target=0)),             # an unverified run
                   (62.0, hello(7)),                        # run 7 kept speaking: taken back
                   (63.0, hello(9))):                       # run 9 is now the retired one
        clock[0] = t
        bus.inbox = [('w0/schedule', msg)]
        driver.step(0.0)
        heard.append(driver.last_receive)
    assert heard == [1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 62.0, 62.0]
    assert engine.server_incarnation == 7 and engine.server_heard == 3
    assert engine.rejects == 0 and engine.superseded == 6


def test_driver_behind_chaos_hooks_counts_no_refused_message_as_heard():
    # the nodes drive their engine through chaos hooks, whose rejects is their own tally by
    # reason, one dict changed in place: compared with itself it never showed a refusal, so
    # every message a push robot received, garbage too, reset its give-up timer
    from rog_ros.nodes.chaos_hooks import WorkerHooks
    from rog_ros.nodes.push_systems import WorkerAdapter
    from rog_ros.protocol.policies.adacomp import AdaCompConfig, AdaCompWorker
    n = 50
    robot = WorkerAdapter(AdaCompWorker(0, torch.zeros(n), [n], AdaCompConfig(c=1e-3)))
    hooks, bus, clock = WorkerHooks(robot, 0), FakeBus(), [0.0]
    driver = EngineDriver(bus, hooks, Outbox(), may_compute=lambda: False,
                          clock=lambda: clock[0])
    driver.handle(hooks.start(0.0), 0.0)
    garbage = m.Schedule(worker=0, clock=0, push_deadline_s=1.0)     # no stop: not for it
    stop = m.Schedule(worker=0, clock=0, push_deadline_s=1.0, stop=True)
    heard = []
    for t, msg in ((1.0, garbage), (2.0, garbage), (3.0, stop)):
        clock[0] = t
        bus.inbox = [('w0/schedule', msg)]
        driver.step(0.0)
        heard.append(driver.last_receive)
    assert heard == [None, None, 3.0] and robot.rejects == 2
    assert hooks.rejects == {'invalid': 2} and driver.stopped


def test_a_robot_that_heard_only_superseded_messages_does_not_say_it_heard_nothing():
    # a robot started afresh (a new run, no state) whose server answers only its earlier run
    # sets every message aside (superseded, not a reject): none moves its give-up timer, and
    # its last line said it had heard nothing from the server since it started
    from types import SimpleNamespace

    from rog_ros.nodes.worker_node import WorkerNode
    engine = _worker_engine()
    engine.start(0.0)
    for t in (1.0, 2.0, 3.0):
        engine.on_message(m.Schedule(worker=0, clock=0, push_deadline_s=1.0, incarnation=7,
                                     target_incarnation=engine.incarnation + 1), t)
    assert engine.superseded == 3 and engine.server_heard == 0 and engine.rejects == 0

    def node(last_receive):
        """Return the parts of a worker node its give-up line reads."""
        return SimpleNamespace(engine=engine, driver=SimpleNamespace(last_receive=last_receive),
                               reject_counts=lambda: {'bad_tag': 0, 'invalid': engine.rejects})
    said = WorkerNode._drops_said(node(None))
    assert 'heard nothing' not in said
    assert said.startswith('; it heard from the server only 3 messages it set aside as '
                           'superseded (addressed to an earlier run of this robot')
    assert WorkerNode._drops_said(node(2.5)) == ''      # its live server spoke once
    engine.superseded = 0
    assert 'heard nothing from the server since it started' in WorkerNode._drops_said(node(None))


def _push_robot_and_pulls(run=9):
    """
    Return run ``run`` of push robot 0 and what two server runs, 101 and 202, pull to it.

    Each pull is the chunks (the END twice) of one dense model, as a push server's transfers
    send it: the messages whose server run a push robot's transfers check.
    """
    from rog_ros.nodes.push_systems import WorkerAdapter
    from rog_ros.protocol.policies.adacomp import AdaCompConfig, AdaCompWorker
    from rog_ros.protocol.push_transfers import PushTransfers
    n, cfg = 3000, AdaCompConfig(mode='asgd', c=1.0)
    robot = WorkerAdapter(AdaCompWorker(0, torch.zeros(n), [n], cfg),
                          PushTransfers(0, n, chunk_bytes=4096, incarnation=run))
    pulls = []
    for server_run in (101, 202):
        model = m.RowChunk(transfer_id=1, seq=0, sender=m.SERVER, receiver=0,
                           kind=m.KIND_UPDATE, clock=1, flags=m.FLAG_END, codec=0,
                           payload=torch.ones(n).numpy().tobytes())
        server = PushTransfers(m.SERVER, n, chunk_bytes=4096, incarnation=server_run)
        pulls.append([a.msg for a in server.outgoing([Send(0, model)], 0.0)])
    return robot, pulls


def test_a_push_robot_counts_only_its_live_server_runs_messages_as_heard():
    # a replaced push server run's late chunks (set aside as superseded, no rejects) reset
    # the robot's give-up timer, so a robot whose live server run fell silent waited as long
    # as a dead run's copies came; a retired run that keeps speaking counts once taken back
    from rog_ros.nodes.chaos_hooks import WorkerHooks
    robot, (a, b) = _push_robot_and_pulls()
    hooks, bus, clock = WorkerHooks(robot, 0), FakeBus(), [0.0]
    driver = EngineDriver(bus, hooks, Outbox(), may_compute=lambda: False,
                          clock=lambda: clock[0])
    driver.handle(hooks.start(0.0), 0.0)
    heard = []
    for t, msg in ((1.0, a[0]), (2.0, b[0]),        # run 202 replaces run 101
                   (3.0, a[1]), (4.0, a[2]),        # run 101's late chunks
                   (30.0, a[-2]), (31.0, a[-1])):   # run 101 kept speaking: taken back
        clock[0] = t
        bus.inbox = [('w0/model', msg)]
        driver.step(0.0)
        heard.append(driver.last_receive)
    assert heard == [1.0, 2.0, 2.0, 2.0, 30.0, 31.0]
    assert robot.transfers.peer_runs[m.SERVER] == [202, 101] and robot.transfers.revived == 1
    assert robot.server_heard == 4 and robot.superseded == 2 and robot.rejects == 0


def test_a_push_robot_that_heard_only_superseded_messages_does_not_say_it_heard_nothing():
    # a push robot started afresh whose server answers only its earlier run sets every
    # chunk aside (foreign, no reject): none is a sign of life, and its give-up line said
    # it had heard nothing from the server since it started (push adapters had no count)
    from types import SimpleNamespace

    from rog_ros.nodes.worker_node import WorkerNode
    robot, (a, _) = _push_robot_and_pulls(run=10)
    robot.start(0.0)
    for k, chunk in enumerate(a):
        chunk.target_incarnation = 9            # the run of it the server knows
        robot.on_message(chunk, 1.0 + k)
    assert robot.superseded == len(a) == 5 and robot.server_heard == robot.rejects == 0
    node = SimpleNamespace(engine=robot, driver=SimpleNamespace(last_receive=None),
                           reject_counts=lambda: {'bad_tag': 0, 'invalid': robot.rejects})
    assert WorkerNode._drops_said(node).startswith(
        '; it heard from the server only 5 messages it set aside as superseded')


def test_a_model_part_of_two_final_models_is_not_written_as_the_fleets(tmp_path):
    # a robot stopped holding rows of a restored server's second final model and the rest
    # of the first (given up by it, final_model_missed) wrote that mix as "the fleet's
    # final model"; with its saved state it takes back the last one it held whole (the
    # hooks: test_protocol_final_model), and its line says which
    from types import SimpleNamespace

    from rog_ros.nodes.worker_node import WorkerNode
    said = []
    log = SimpleNamespace(info=lambda s: said.append(('info', s)),
                          warning=lambda s: said.append(('warning', s)))
    model = torch.nn.Linear(2, 1)
    for mixed, kept, line in (
            (False, None, ('info', "wrote the fleet's final model to")),
            (True, None, ('warning', "wrote this robot's own model to")),
            (False, 46, ('warning', "wrote the fleet's final model to"))):
        engine = SimpleNamespace(holds_final=True, final_mixed=mixed)
        node = SimpleNamespace(engine=engine, hooks=SimpleNamespace(kept_final=kept),
                               gradients=SimpleNamespace(copy=False), model=model, log=log)
        said.clear()
        WorkerNode._save_model(node, str(tmp_path / 'robot.pt'))
        assert len(said) == 1 and said[0][0] == line[0], said
        assert said[0][1].startswith(line[1]), said
        assert ('not the fleet' in said[0][1]) is mixed, said
        assert ('46 rows owed' in said[0][1]) is (kept is not None), said


def test_a_push_robot_giving_up_says_it_set_aside_a_replaced_server_runs_stop_orders():
    # 153658c: a push robot obeys the server run it follows (it took its model, run 202)
    # and sets a replaced run's (101, a zombie) repeated stop aside; if 202 stays silent it
    # gives up at server_timeout (exit 1). Its last line said only that the server was
    # silent, while the zombie's orders kept coming: it now says it set them aside.
    from types import SimpleNamespace

    from rog_ros.nodes.worker_node import WorkerNode
    robot, (a, b) = _push_robot_and_pulls()
    robot.start(0.0)
    for k, chunk in enumerate(a + b):
        robot.on_message(chunk, 1.0 + 0.1 * k)           # 202's model taken last
    assert robot.following == 202 and robot.transfers.peer_runs[m.SERVER] == [101, 202]
    for k in range(6):
        stop = m.Schedule(worker=0, clock=5, push_deadline_s=-1.0, stop=True,
                          incarnation=101, target_incarnation=9)
        assert robot.on_message(stop, 5.0 + 2.0 * k) == []
    assert not robot.engine.stopped and robot.stops_set_aside == 6 and robot.rejects == 0
    node = SimpleNamespace(engine=robot, driver=SimpleNamespace(last_receive=2.0),
                           reject_counts=lambda: {'bad_tag': 0, 'invalid': robot.rejects})
    assert WorkerNode._drops_said(node) == (
        '; it set aside 6 stop orders of a server run it no longer follows (a replaced '
        'server process still running?)')


def test_a_push_server_serves_on_until_a_robot_whose_stop_order_was_lost_has_stopped(
        tmp_path, monkeypatch):
    """Repeat a lost stop order to a robot that still speaks; leave once it has left."""
    # The engine sends each robot one stop order and the server node left LEAVE_TIMEOUT_S
    # after the last: robot 0, its stop order lost, waited for a pull that never came,
    # poking a server gone, and gave up at server_timeout (120 s). The server now serves on
    # while the robot is owed its stop (ServerAdapter.stops_owed), repeating it every END
    # timeout (2 s), and leaves once the robot has left.
    from test_nodes_lifecycle import in_memory_fleet, server_and_worker
    from rog_ros.nodes import server_node
    in_memory_fleet(monkeypatch)
    monkeypatch.setattr(server_node, 'LEAVE_TIMEOUT_S', 0.2)
    push = ['--sync', 'asgd']
    srv, wrk = server_and_worker(tmp_path, '/lost_stop', push + ['--iterations', '3'], push)
    lost, publish = [], srv.bus.publish

    def losing(topic, msg):
        """Publish ``msg``, unless it is the first stop order (lost on the way)."""
        if isinstance(msg, m.Schedule) and msg.stop and not lost:
            lost.append(msg)
            return
        publish(topic, msg)

    monkeypatch.setattr(srv.bus, 'publish', losing)
    step = srv.driver.step

    def both(max_wait_s=0.02):
        """Turn the server's loop, and the robot's (one thread for both), until it left."""
        step(max_wait_s)
        if wrk.bus is not None and not wrk.spin_once():
            wrk.shutdown()                   # (its bus closed: its uplink writers gone)

    try:
        assert srv.activate() and wrk.activate()
        deadline = time.monotonic() + 60.0
        while srv.spin_once() and time.monotonic() < deadline:
            wrk.spin_once()
        assert srv.engine.finished and len(lost) == 1 and not wrk.driver.stopped
        monkeypatch.setattr(srv.driver, 'step', both)
        start = time.monotonic()
        summary = srv.finish()
        took = time.monotonic() - start
    finally:
        if wrk.bus is not None:
            wrk.shutdown()
        srv.shutdown()
    assert wrk.driver.stopped and not wrk.failure
    assert summary['completed'] is True and summary['stops_repeated'] >= 1
    assert 2.0 <= took < 30.0


def test_a_replaced_push_server_leaves_without_serving_its_stop_orders_on(
        tmp_path, monkeypatch):
    """Leave LEAVE_TIMEOUT_S after the end once another server run serves the robots."""
    # A zombie (a replaced server process, finished) served on for STOP_PATIENCE_S (60 s)
    # repeating stop orders its robot set aside: the robot follows the server run that
    # replaced it. Told so (PushTransfers.replaced_by: its robots' acks name that run), it
    # owes no stop and leaves. Every stop order is lost here: the robot never stops.
    from test_nodes_lifecycle import in_memory_fleet, server_and_worker
    from rog_ros.nodes import push_systems, server_node
    in_memory_fleet(monkeypatch)
    monkeypatch.setattr(server_node, 'LEAVE_TIMEOUT_S', 0.2)
    monkeypatch.setattr(push_systems, 'STOP_PATIENCE_S', 6.0)
    push = ['--sync', 'asgd']
    srv, wrk = server_and_worker(tmp_path, '/zombie', push + ['--iterations', '3'], push)
    publish = srv.bus.publish
    monkeypatch.setattr(srv.bus, 'publish', lambda topic, msg: None if (
        isinstance(msg, m.Schedule) and msg.stop) else publish(topic, msg))
    step = srv.driver.step

    def both(max_wait_s=0.02):
        """Turn the server's loop, and the robot's (one thread for both)."""
        step(max_wait_s)
        wrk.spin_once()

    try:
        assert srv.activate() and wrk.activate()
        deadline = time.monotonic() + 60.0
        while srv.spin_once() and time.monotonic() < deadline:
            wrk.spin_once()
        assert srv.engine.finished and srv.engine.stops_owed(srv.driver.clock()) == [0]
        srv.engine.transfers.replaced_by = 202        # as its robots' acks to run 202 told
        srv.engine.transfers.replaced_heard = srv.driver.clock()      # (told just now)
        monkeypatch.setattr(srv.driver, 'step', both)
        start = time.monotonic()
        summary = srv.finish()
        took = time.monotonic() - start
    finally:
        wrk.shutdown()
        srv.shutdown()
    assert not wrk.driver.stopped and summary['stops_repeated'] == 0
    assert took < 3.0


@pytest.mark.parametrize('state, left', [
    ('finalized:stopped', True), ('active:stopped', True), ('finalized:pushing', True),
    ('active:pushing', False), ('inactive:computing', False)])
def test_a_push_server_owes_no_stop_order_to_a_robot_whose_status_says_it_stopped(
        tmp_path, monkeypatch, state, left):
    """Take a robot's status saying its engine stopped, or its node left, as its sign."""
    # the server serves on at its end while a robot is owed its stop order; a robot that
    # says it stopped (or that is finalized: it leaves whatever it was doing) is owed none
    from test_nodes_lifecycle import in_memory_fleet
    in_memory_fleet(monkeypatch)
    node = _configured_node(tmp_path, 'server', 'asgd')
    try:
        engine = node.engine
        stop = m.Schedule(worker=1, clock=3, push_deadline_s=-1.0, stop=True)
        engine._count([Send(1, stop)], 10.0)         # as the engine sends it
        assert engine.stops_owed(10.0) == [1] and engine.next_wakeup() == 12.0
        node._on_status(m.TrainStatus(node=1, stamp=1.0, state=state))
        assert engine.stops_owed(10.0) == ([] if left else [1])
        assert engine.stops_owed(30.0) == []       # silent for linger_s: owed no more
    finally:
        node.shutdown()


def test_netmon_records_a_trace_that_load_trace_replays(tmp_path):
    # Prepare
    import subprocess
    import sys
    from rog_ros.net.traces import load_trace
    out = tmp_path / 'rec.csv'
    # Execute: emulated rate of worker 1 on an indoors link, 10 Hz for ~1.2 s, no bus
    proc = subprocess.run([sys.executable, '-m', 'rog_ros.nodes.netmon', '--bus', 'none',
                           '--interface', 'lo', '--nodes', '1', '--trace', 'indoors',
                           '--workers', '3', '--record-trace', str(out), '--record-source',
                           'emulated', '--duration', '1.2'], capture_output=True, text=True,
                          timeout=60)
    # Assert
    assert proc.returncode == 0, proc.stderr
    trace = load_trace(out)
    assert 8 <= len(trace) <= 14
    assert 10.0 < float(trace.mbps.mean()) < 400.0        # indoors rates, not counters


def test_server_node_rejects_a_quorum_larger_than_the_fleet(capsys):
    from rog_ros.nodes import rog_server
    with pytest.raises(SystemExit) as exc:
        rog_server.main(['--workers', '3', '--min-workers', '4'])
    assert exc.value.code == 2
    assert '--min-workers 4 exceeds --workers 3' in capsys.readouterr().err


@pytest.mark.parametrize('node, field', [('rog_server', 'outage_aware'),
                                         ('rog_server', 'readmit_backoff'),
                                         ('rog_worker', 'late_rows'),
                                         ('rog_worker', 'late_pulls')])
def test_rog_only_settings_reach_the_rog_policy_only(node, field):
    import importlib
    from rog_ros.nodes.assembly import build_training
    parse = importlib.import_module(f'rog_ros.nodes.{node}').build_parser().parse_args
    assert getattr(build_training(parse(['--sync', 'rog'])).policy, field) is True
    off = parse(['--sync', 'rog', '--' + field.replace('_', '-'), 'false'])
    assert getattr(build_training(off).policy, field) is False
    assert getattr(build_training(parse(['--sync', 'ssp'])).policy, field) is False


@pytest.mark.parametrize('node', ['rog_server', 'rog_worker'])
@pytest.mark.parametrize('field, default', [('straggler_slack', True),
                                            ('async_when_out', False)])
def test_rog_switches_keep_their_default_turn_and_stay_rog_only(node, field, default):
    import importlib
    from rog_ros.nodes.assembly import build_training
    from rog_ros.protocol.policies import make_policy
    parse = importlib.import_module(f'rog_ros.nodes.{node}').build_parser().parse_args
    flag = '--' + field.replace('_', '-')
    assert getattr(build_training(parse(['--sync', 'rog'])).policy, field) is default
    turned = parse(['--sync', 'rog', flag, str(not default).lower()])
    assert getattr(build_training(turned).policy, field) is (not default)
    ssp = parse(['--sync', 'ssp', flag, 'true'])
    assert getattr(build_training(ssp).policy, field) is False
    # simulator and nodes agree
    assert getattr(make_policy('rog:4'), field) is default
    assert getattr(make_policy(f'rog:4#{field}={int(not default)}'), field) is (not default)


def test_the_outage_bound_setting_reaches_the_rog_policy():
    from rog_ros.nodes import rog_server
    from rog_ros.nodes.assembly import build_training
    parse = rog_server.build_parser().parse_args
    assert build_training(parse(['--sync', 'rog'])).policy.outage_bound == 3.0
    off = parse(['--sync', 'rog', '--outage-bound', '2'])
    assert build_training(off).policy.outage_bound == 2.0
    with pytest.raises(SystemExit):
        parse(['--sync', 'rog', '--outage-bound', '0.1'])     # below the policy's range


@pytest.mark.parametrize('timeout', [5.0, 15.9])
def test_the_server_refuses_an_absence_timeout_a_waiting_robot_outlasts(timeout, capsys):
    """Refuse, as a usage error, a timeout below two pokes of a waiting robot (16 s)."""
    from rog_ros.nodes import rog_server
    argv = ['--workload', 'toy', '--workers', '2', '--absence-timeout', str(timeout)]
    with pytest.raises(SystemExit) as stop:
        rog_server.build_parser().parse_args(argv)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert stop.value.code == 2
    assert f'absence_timeout (--absence-timeout) {timeout:g}: ' in err
    assert 'a poke every 8 s' in err and 'give at least 16, or 0 for never' in err


@pytest.mark.parametrize('timeout', [16.0, 0.0, None])
def test_the_server_takes_an_absence_timeout_of_two_pokes_or_none_without_a_word(
        timeout, caplog, tmp_path, monkeypatch):
    """Take 16 s (two pokes of a waiting robot), 0 and no timeout, warning of none."""
    from rog_ros.nodes import rog_server, server_node
    from test_nodes_lifecycle import in_memory_fleet
    in_memory_fleet(monkeypatch)
    argv = ['--workload', 'toy', '--workers', '2', '--out', str(tmp_path)]
    if timeout is not None:
        argv += ['--absence-timeout', str(timeout)]
    node = server_node.ServerNode(rog_server.build_parser().parse_args(argv))
    with caplog.at_level('WARNING'):
        node.configure()
    assert node.engine.absence_timeout_s == (timeout or None)
    node.shutdown()
    assert not [r for r in caplog.records if 'absence_timeout' in r.getMessage()]


@pytest.mark.parametrize('final', ['true', 'false'])
def test_the_server_lets_a_robot_gone_for_good_go_with_or_without_the_final_model(
        final, tmp_path, monkeypatch):
    """Build the server's engine with the let-go rule on whatever ``--final-model`` says."""
    from rog_ros.nodes import rog_server, server_node
    from test_nodes_lifecycle import in_memory_fleet
    in_memory_fleet(monkeypatch)
    argv = ['--workload', 'toy', '--workers', '2', '--out', str(tmp_path),
            '--final-model', final]
    node = server_node.ServerNode(rog_server.build_parser().parse_args(argv))
    node.configure()
    try:
        assert node.engine.final_model is (final == 'true')
        assert node.engine.let_go_silent is True
    finally:
        node.shutdown()


def _configured_node(tmp_path, role, sync):
    """Return the configured ``role`` node of ``sync`` (toy, two robots, robot 1 a worker)."""
    from rog_ros.nodes import rog_server, rog_worker, server_node, worker_node
    argv = ['--workload', 'toy', '--workers', '2', '--sync', sync]
    if role == 'server':
        node = server_node.ServerNode(rog_server.build_parser().parse_args(
            argv + ['--out', str(tmp_path)]))
    else:
        node = worker_node.WorkerNode(rog_worker.build_parser().parse_args(
            argv + ['--rank', '1']))
    node.configure()
    return node


@pytest.mark.parametrize('sync', ['rog:4', 'adacomp'])
@pytest.mark.parametrize('role', ['server', 'worker'])
def test_every_node_counts_its_writers_with_the_configured_fragment_size(
        tmp_path, monkeypatch, role, sync):
    """Build each node's engine with ``CYCLONEDDS_URI``'s FragmentSize and lease."""
    # 10bf6d7 passed connect.transfer_fragment_bytes() to the server's engine, and no other
    # node's: a robot's ledger of its pushes and the push systems' transfers counted 1 KiB
    # fragments whatever Cyclone was told, and two transfers to a silent robot pass the
    # 8 MiB mark on Cyclone's count at 600 B; a line no test reached either
    from test_nodes_lifecycle import in_memory_fleet
    in_memory_fleet(monkeypatch)
    monkeypatch.delenv('ROS_DOMAIN_ID', raising=False)
    monkeypatch.setenv('FRAG', '600B')
    monkeypatch.setenv('CYCLONEDDS_URI', '<General><FragmentSize>${FRAG}</FragmentSize>'
                       '</General><Discovery><LeaseDuration>30 s</LeaseDuration></Discovery>')
    # the node read the configuration twice (once for the lease, once for the fragment size)
    from rog_ros.transport import cyclone_settings
    reads = []
    sources = cyclone_settings._uri_sources
    monkeypatch.setattr(cyclone_settings, '_uri_sources',
                        lambda uri: reads.append(uri) or sources(uri))
    node = _configured_node(tmp_path, role, sync)
    try:
        assert len(reads) == 1, reads
        if sync == 'adacomp':
            engine = node.engine.transfers
            assert engine.fragment_bytes == 600
        else:
            engine = node.engine
            peers = engine.peers if role == 'server' else [engine.peer]
            assert [p.fragment_bytes for p in peers] == [600] * len(peers) and peers
        assert engine.lease_s == 30.0
    finally:
        node.shutdown()


def test_a_push_robots_status_counts_as_its_word_at_the_server(tmp_path, monkeypatch):
    """Count a push robot's status as its live run's word (``ServerAdapter.robot_alive``)."""
    # A robot computing past the budget sends nothing but its status (every 0.5 s): the
    # server counted only its messages and gave it up DONE_PATIENCE_S after its last one.
    # Its status now names the run its messages carry (WorkerAdapter.incarnation) and the
    # server node hands it to the engine; one that says it stopped is not its word.
    from test_nodes_lifecycle import in_memory_fleet, server_and_worker
    in_memory_fleet(monkeypatch)
    push = ['--sync', 'asgd']
    srv, wrk = server_and_worker(tmp_path, '/alive', push + ['--iterations', '50'], push)
    try:
        assert srv.activate() and wrk.activate()
        assert wrk.engine.incarnation == wrk.engine.transfers.incarnation
        deadline = time.monotonic() + 20.0
        while srv.engine.transfers.peer_runs.get(0) is None and time.monotonic() < deadline:
            srv.spin_once()
            wrk.spin_once()
        said = []
        monkeypatch.setattr(wrk.bus, 'publish', lambda topic, msg: said.append(msg))
        wrk._publish_status()
        (status,) = [msg for msg in said if isinstance(msg, m.TrainStatus)]
        srv.engine._status_at[0] = -1.0
        srv._on_status(status)
        assert srv.engine._status_at[0] > 0.0
        srv.engine._status_at[0] = -1.0
        srv._on_status(dataclasses.replace(status, state='active:stopped'))
        assert srv.engine._status_at[0] == -1.0
        srv.engine.transfers.peer_runs[0].append(12345)   # (another run is the live one now)
        srv._on_status(status)
        assert srv.engine._status_at[0] == -1.0
    finally:
        wrk.shutdown()
        srv.shutdown()
