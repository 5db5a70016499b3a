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
"""Timers fire at the very time next_wakeup() returned (no float-rounding livelock)."""

from protocol_fixtures import build
import pytest
from rog_ros.core.compress import ScaledSign
from rog_ros.core.rows import RowLayout
from rog_ros.protocol.actions import Log, Send
from rog_ros.protocol.messages import KIND_GRAD, SERVER
from rog_ros.protocol.transfer import OutgoingTransfer
from rog_ros.sim.harness import Harness, LinkSpec
from rog_ros.sim.simulator import SimConfig, simulate
import torch

# (T + 30) - T < 30 in binary floating point: the old ``now - last >= period`` test failed
# exactly at the wake-up time that ``last + period`` announced.
T_ROUNDS_DOWN = 26.252


def test_the_rounding_case_exists():
    assert (T_ROUNDS_DOWN + 30.0) - T_ROUNDS_DOWN < 30.0


def _exchange(engines, actions_of, now):
    """Deliver every Send among ``engines`` (SERVER or rank -> engine) at one instant."""
    queue = list(actions_of)
    logs = []
    while queue:
        src, a = queue.pop(0)
        if isinstance(a, Send) and a.dest in engines:
            queue += [(a.dest, b) for b in engines[a.dest].on_message(a.msg, now)]
        elif isinstance(a, Log):
            logs.append(a)
    return logs


def _stalled_server(t0, stall_warn_s=30.0):
    """BSP, 2 workers: worker 0 pushes at t0 and waits for worker 1, who never comes."""
    _, server, workers, _, layout = build('bsp', n=2, track=False)
    server.stall_warn_s = stall_warn_s
    w = workers[0]
    w.start(t0)
    grad = torch.ones(layout.n_params)
    logs = _exchange({SERVER: server, 0: w},
                     [(0, a) for a in w.on_compute_done(grad, t0)], t0)
    assert any(a.name == 'trigger' for a in logs)   # the server stalls worker 0
    return server


@pytest.mark.parametrize('t0', [T_ROUNDS_DOWN, 0.1, 1e6 + 0.3])
def test_server_stall_warning_fires_at_its_wakeup(t0):
    server = _stalled_server(t0)
    for _ in range(3):
        wake = server.next_wakeup()
        assert wake is not None and wake > t0
        out = server.on_tick(wake)
        assert [a.name for a in out if isinstance(a, Log)] == ['stall_diagnostic']
        assert server.next_wakeup() > wake           # the timer moved on


def _transfer(now=T_ROUNDS_DOWN, window=1, deadline=float('inf'), n_mandatory=None,
              end_timeout_s=30.0):
    layout = RowLayout([(8, 4), (8,)], whole_model=False)
    codec = ScaledSign()
    p = torch.randn(layout.n_params, generator=torch.Generator().manual_seed(0))
    trs = layout.tensor_row_abs_sum(p)
    scales = codec.scales(layout, p, trs)
    rowbytes = codec.encode(layout, p, scales)
    order = torch.arange(layout.n_rows)
    return OutgoingTransfer(transfer_id=1, sender=0, receiver=SERVER, kind=KIND_GRAD, clock=1,
                            layout=layout, codec=codec, rowbytes=rowbytes, scales=scales,
                            order=order, n_mandatory=(layout.n_rows if n_mandatory is None
                                                      else n_mandatory),
                            deadline=deadline, now=now, window=window, chunk_bytes=1,
                            end_timeout_s=end_timeout_s)


def test_transfer_window_release_fires_at_its_wakeup():
    tr = _transfer()
    first = tr.pump(T_ROUNDS_DOWN)
    assert len(first) == 1 and tr.in_flight() == 1         # window full, no acks come
    wake = tr.next_wakeup()
    out = tr.on_tick(wake)
    assert len(out) == 1 and out[0].seq == 1               # slot released, next chunk out
    assert tr.next_wakeup() > wake


def test_transfer_end_retransmission_fires_at_its_wakeup():
    tr = _transfer(window=1000)
    tr.pump(T_ROUNDS_DOWN)
    assert tr.end_sent_at is not None
    for _ in range(3):
        wake = tr.next_wakeup()
        out = tr.on_tick(wake)
        assert len(out) == 1 and out[0].flags & 1          # END again (FLAG_END)
        assert tr.next_wakeup() > wake


def test_transfer_deadline_fires_at_its_wakeup():
    deadline = T_ROUNDS_DOWN + 30.0
    tr = _transfer(window=1, deadline=deadline, n_mandatory=0, end_timeout_s=1e9)
    tr.pump(T_ROUNDS_DOWN)
    assert tr.end_sent_at is None
    wake = tr.next_wakeup()
    assert wake == deadline
    tr.on_tick(wake)
    assert tr.end_sent_at == wake                           # END at the deadline


def test_worker_pull_poke_fires_at_its_wakeup():
    _, server, workers, _, layout = build('bsp', n=2, track=False, end_timeout_s=7.5)
    w = workers[0]
    w.start(T_ROUNDS_DOWN)
    _exchange({SERVER: server, 0: w},
              [(0, a) for a in w.on_compute_done(torch.ones(layout.n_params), T_ROUNDS_DOWN)],
              T_ROUNDS_DOWN)
    assert w.state == 'pulling'
    for _ in range(3):
        wake = w.next_wakeup()
        out = w.on_tick(wake)
        assert any(isinstance(a, Log) and a.name == 'pull_poke' for a in out)
        assert w.next_wakeup() > wake


def test_worker_slot_request_repeats_at_its_wakeup():
    _, _, workers, _, layout = build('flown:4', n=2, track=False, end_timeout_s=7.5)
    w = workers[0]
    w.start(T_ROUNDS_DOWN)
    w.on_compute_done(torch.ones(layout.n_params), T_ROUNDS_DOWN)
    assert w.state == 'awaiting_grant'
    for _ in range(3):
        wake = w.next_wakeup()
        out = w.on_tick(wake)
        assert len(out) == 1 and isinstance(out[0], Send)
        assert w.next_wakeup() > wake


class _StuckEngine:
    """An engine whose timer never fires: the harness must stop, not spin."""

    def __init__(self):
        self.ticks = 0

    def on_tick(self, now):
        self.ticks += 1
        return []

    def next_wakeup(self):
        return 1.0


def test_harness_refuses_a_timer_that_does_not_fire():
    _, server, workers, _, _ = build('bsp', n=2, track=False)
    stuck = _StuckEngine()
    harness = Harness(stuck, workers, lambda r, w, c: torch.zeros_like(w), compute_s=5.0,
                      up=[LinkSpec(), LinkSpec()], down=[LinkSpec(), LinkSpec()])
    harness._handle(SERVER, [])
    stats = harness.run(max_events=10_000)
    assert stats.error is not None and 'timer' in stats.error
    assert stuck.ticks <= 3


def _write_stall_trace(path):
    """4 robots replay one file at offsets 0, 100, 200, 300 s; robot 1 starts in a hole."""
    with open(path, 'w') as fh:
        fh.write('t_seconds,mbps\n')
        for t in range(400):
            rate = 0.017 if 100 <= t < 120 else (0.0 if 120 <= t < 166 else 50.0)
            fh.write(f'{t},{rate}\n')


@pytest.mark.parametrize('system', ['bsp', 'ssp:4', 'rog:4'])
def test_long_stall_does_not_end_the_simulation(tmp_path, system):
    path = str(tmp_path / 'stall.csv')
    _write_stall_trace(path)
    rec = simulate(SimConfig(workload='toy', system=system, workers=4, trace=path,
                             iterations=40, compute_time_s=2.0, evaluations=2,
                             max_events=200_000))
    summary = rec.summary()
    assert 'error' not in summary
    # outage-aware RSP (rog) suspends robot 1 and moves it to the fleet's clock when it is
    # back: it computes fewer iterations
    assert summary['iterations'] == 40 or summary['outage_suspensions'] > 0
    assert summary['iterations'] >= 30
    assert summary['sim_time_s'] > 166.0 - 100.0     # it lived through robot 1's outage


class _QuietBus:
    """A bus with no traffic (what EngineDriver needs of it)."""

    def poll(self, timeout_s=0.0):
        return []

    def publish(self, topic, msg):
        pass


def test_node_driver_ticks_at_the_engines_wakeup():
    from rog_ros.nodes.driver import EngineDriver
    from rog_ros.nodes.outbox import Outbox
    server = _stalled_server(T_ROUNDS_DOWN)
    now = [server.next_wakeup()]
    logs = []
    driver = EngineDriver(_QuietBus(), server, Outbox(), clock=lambda: now[0],
                          on_log=lambda t, log: logs.append(log.name))
    for _ in range(3):
        wake = server.next_wakeup()
        now[0] = wake                     # the wall clock reads exactly the wake-up time
        driver.step(max_wait_s=0.0)
        assert logs[-1] == 'stall_diagnostic'
        assert server.next_wakeup() > wake
    assert logs.count('stall_diagnostic') == 3
