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
"""Asynchrony-compensated worker momentum of stale-synchronous policies."""

from protocol_fixtures import build
import pytest
from rog_ros.protocol.policies import make_policy


@pytest.mark.parametrize('spec,n,want', [
    ('bsp', 4, 0.9),            # synchronous: no implicit momentum
    ('ssp:4', 1, 0.9),          # one worker: nothing interleaves
    ('rog:4', 3, 0.7),          # (1 - mu_e) = N (1 - mu)
    ('rog:4', 4, 0.6),
    ('flown:4', 4, 0.6),
    ('ssp:4', 4, 0.6),
    ('rog:4', 12, 0.0),         # never negative
])
def test_explicit_momentum_keeps_the_synchronous_product(spec, n, want):
    mu = make_policy(spec).explicit_momentum(0.9, n)
    assert mu == pytest.approx(want)
    if 0.0 < mu and spec != 'bsp' and n > 1:
        assert (1 - mu) * (1 / n) == pytest.approx(1 - 0.9)


def test_the_switch_turns_it_off_and_workers_use_it():
    assert make_policy('rog:4', momentum_compensation=False).explicit_momentum(0.9, 4) == 0.9
    _, _, workers, _, _ = build('rog:4', n=4, momentum=0.9, weight_decay=5e-4)
    w = workers[0]
    assert w.precondition.momentum == pytest.approx(0.6)
    # decay added after momentum as wd' / (1 - mu_e) keeps the strength wd / (1 - mu)
    assert w.precondition.weight_decay / (1 - 0.6) == pytest.approx(5e-4 / (1 - 0.9))
    _, _, bsp_workers, _, _ = build('bsp', n=4, momentum=0.9)
    assert bsp_workers[0].precondition.momentum == pytest.approx(0.9)
