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
"""DuplexLink: a half-duplex station whose two directions queue apart and share airtime."""

import pytest
from rog_ros.core.compress import ScaledSign
from rog_ros.core.rows import RowLayout
from rog_ros.net.links import DuplexLink, FluidLink, SharedMedium
from rog_ros.net.traces import Trace
from rog_ros.protocol.policies import make_policy
from rog_ros.protocol.ps import ServerEngine
from rog_ros.protocol.worker import WorkerEngine
from rog_ros.sim.harness import Harness, quadratic_problem
from rog_ros.sim.simulator import SimConfig
import torch


def _station(mbps=8.0, latency_s=0.01, **kw):
    return DuplexLink(FluidLink(Trace([0.0], [mbps], 100.0), latency_s=latency_s, **kw))


def test_one_direction_alone_is_the_fluid_link():
    st = _station()                                  # 8 Mbit/s = 1 MB/s
    ref = FluidLink(Trace([0.0], [8.0], 100.0), latency_s=0.01)
    for start, nbytes in [(0.0, 500_000), (0.0, 500_000), (5.0, 1_000_000), (6.0, 0)]:
        assert st.up.transmit(start, nbytes) == pytest.approx(ref.transmit(start, nbytes))
    assert st.link.sent_bytes == ref.sent_bytes == 2_000_000


def test_an_ack_crosses_a_long_transfer_at_half_the_rate():
    st = _station()
    assert st.up.transmit(0.0, 1_000_000) == pytest.approx(1.01)
    # One FIFO for both directions would deliver this at 1.011, after the whole push.
    assert st.down.transmit(0.1, 1_000) == pytest.approx(0.1 + 0.002 + 0.01)
    # The uplink's next message lost the airtime the ack took.
    assert st.up.busy_until == pytest.approx(1.001)
    assert st.up.transmit(0.5, 1_000) == pytest.approx(1.002 + 0.01)


def test_long_messages_both_ways_conserve_capacity_for_later_ones():
    st = _station(latency_s=0.0)
    assert st.up.transmit(0.0, 1_000_000) == pytest.approx(1.0)
    # Half of the rate until the uplink drains at 1.0 (0.5 MB), then all of it.
    assert st.down.transmit(0.0, 1_000_000) == pytest.approx(1.5)
    # 2 MB took 1.5 s on a 1 MB/s link (overcommitted), but nothing more fits before 1.5 s.
    assert st.up.transmit(0.0, 0) == pytest.approx(1.5)
    assert st.up.transmit(0.0, 500_000) == pytest.approx(2.0)


def test_outages_hold_both_directions():
    st = DuplexLink(FluidLink(Trace([0.0], [8.0], 100.0), latency_s=0.0, outages=[(0.5, 1.5)]))
    assert st.up.transmit(0.0, 1_000_000) == pytest.approx(2.0)
    assert st.down.transmit(3.0, 1_000_000) == pytest.approx(4.0)


def test_loss_is_the_stations_and_bad_use_is_refused():
    st = _station(loss=1.0)
    assert st.up.loss == st.down.loss == 1.0
    assert st.up.dropped() and st.down.dropped()
    with pytest.raises(ValueError):
        st.up.transmit(0.0, -1)
    with pytest.raises(ValueError):
        st.transmit(2, 0.0, 10)
    shared = FluidLink(Trace([0.0], [8.0], 100.0), medium=SharedMedium(10.0))
    with pytest.raises(ValueError, match='SharedMedium'):
        DuplexLink(shared)


def test_simulator_validates_the_duplex_mode():
    assert SimConfig().duplex == 'shared'
    SimConfig(duplex='fifo')
    with pytest.raises(ValueError, match='duplex'):
        SimConfig(duplex='full')


def test_rog_measures_the_real_link_rate_on_a_shared_station():
    """Acks that cross the transfer give a rate estimate at or below the link's capacity."""
    n, pol = 2, make_policy('rog:2')
    layout = RowLayout([(200, 400)], whole_model=False)       # 200 rows, 10 kB signed
    codec, w0 = ScaledSign(), torch.zeros(layout.n_params)
    server = ServerEngine(layout, codec, pol, n, w0, lr=0.1, max_iterations=8,
                          chunk_bytes=1024, window=4)
    workers = [WorkerEngine(r, n, layout, codec, pol, w0, chunk_bytes=1024, window=4)
               for r in range(n)]
    grad_fn, _, _ = quadratic_problem(n, layout)
    stations = [_station(mbps=1.0, latency_s=0.001) for _ in range(n)]
    Harness(server, workers, grad_fn, compute_s=0.05, up=[s.up for s in stations],
            down=[s.down for s in stations]).run()
    for est in [w.thr_up for w in workers] + server.thr_down:
        assert 0.5e6 < est.value_bps <= 1.0e6, est.value_bps
