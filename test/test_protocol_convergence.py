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
"""4 workers on a convex problem reach the same loss under bsp, ssp:4 and rog:4."""

from protocol_fixtures import build
from protocol_fixtures import SHAPES
import pytest
from rog_ros.core.rows import RowLayout
from rog_ros.sim.harness import quadratic_problem


def _optimum():
    return quadratic_problem(4, RowLayout(SHAPES, whole_model=True), seed=0)[1]


class _Dropped:
    """Codec proxy whose decode yields zeros: the update it decodes is lost."""

    def __init__(self, codec):
        self.codec = codec

    def __getattr__(self, name):
        return getattr(self.codec, name)

    def decode(self, layout, rowbytes, scales, out, row_mask=None, factor=1.0, per_row=False):
        return out.zero_()


def lose_half_of_worker_3(server):
    """Planted bug: the server drops every other push of worker 3 (acks it all the same)."""
    real, count = server._apply_push, [0]

    def apply(inc, now):
        if inc.sender == 3:
            count[0] += 1
            if count[0] % 2:
                codec, server.codec = server.codec, _Dropped(server.codec)
                try:
                    return real(inc, now)
                finally:
                    server.codec = codec
        return real(inc, now)
    server._apply_push = apply


def final_loss(spec, plant=None):
    harness, server, workers, loss_fn, _ = build(spec, n=4, iters=60, lr=0.1, noise=0.05,
                                                 momentum=0.0, weight_decay=0.0,
                                                 chunk_bytes=1024)
    if plant is not None:
        plant(server)
    harness.run()
    return loss_fn(server.consensus_model()), harness


ROG_WHOLE = 'rog:4#deadline_floor=3#rtt_floor=0'
"""Rog with transfers that go (nearly) whole on these links: the same point as BSP is a
property of its accounting. With the default floor (the paper's deadline on these 0.3-2
Mbit/s links) the workers' models end a little behind the server's on the rows their last
partial pulls withheld (``test_default_rog_converges``)."""


def _excess_losses(plant=None):
    """Loss above the problem's floor per system, and the starting excess."""
    _, server, _, loss_fn, _ = build('bsp')
    floor = loss_fn(server.w_srv * 0 + _optimum())
    start = loss_fn(server.w_srv) - floor
    return {s: final_loss(s, plant)[0] - floor for s in ('bsp', 'ssp:4', ROG_WHOLE)}, start


def _check_same_convergence(excess, start):
    # The floor (the spread of the workers' targets, ~2016 here) dominates the loss, so a
    # relative tolerance on the loss hides lost updates; compare what is left above it.
    # Measured: bsp 14.3, ssp:4 8.7, rog:4 9.3 of 684 at the start; with half of worker 3's
    # pushes lost: 86, 71, 79.
    for s, value in excess.items():
        assert value < 0.03 * start, (s, value, start)         # converged
    for s in ('ssp:4', ROG_WHOLE):                             # and to the same point
        assert abs(excess[s] - excess['bsp']) < 0.015 * start, excess


def test_same_loss_under_all_systems():
    _check_same_convergence(*_excess_losses())


def test_default_rog_converges():
    # measured 25.5 of 684 (BSP 13.2); 35.3 before a worker's last push went whole
    _, server, _, loss_fn, _ = build('bsp')
    floor = loss_fn(server.w_srv * 0 + _optimum())
    start = loss_fn(server.w_srv) - floor
    assert final_loss('rog:4')[0] - floor < 0.05 * start


def test_convergence_check_catches_lost_updates():
    excess, start = _excess_losses(plant=lose_half_of_worker_3)
    with pytest.raises(AssertionError):
        _check_same_convergence(excess, start)
    assert all(v > 0.06 * start for v in excess.values())   # every system, by a margin
