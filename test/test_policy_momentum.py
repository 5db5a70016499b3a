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


RELEASE = 5 / 6      # the value measured in docs/scheduling.md (off by default)


@pytest.mark.parametrize('spec,n,clock,budget,want', [
    ('rog:4', 4, 1, 300, 0.6),          # compensated while the adaptation is fast
    ('rog:4', 4, 100, 300, 0.6),        # ... up to a third of the budget
    ('rog:4', 4, 125, 300, 0.6 + RELEASE * 0.5 * 0.3),   # linear release
    ('rog:4', 4, 150, 300, 0.85),       # 5/6 of the compensation given back at half
    ('rog:4', 4, 300, 300, 0.85),
    ('rog:4', 4, 300, None, 0.6),       # no budget known: compensated to the end
    ('ssp:4', 4, 300, 300, 0.85),       # the same rule for every stale system
    ('bsp', 4, 300, 300, 0.9),          # nothing to release
    ('rog:4', 12, 1, 300, 0.0),
    ('rog:4', 12, 200, 300, 0.75),      # from 0: 5/6 of 0.9
])
def test_momentum_compensation_is_released_over_the_middle_of_the_budget(
        spec, n, clock, budget, want):
    pol = make_policy(spec, momentum_release=RELEASE)
    assert pol.momentum_at(0.9, n, clock, budget) == pytest.approx(want)


@pytest.mark.parametrize('spec', ['rog:4', 'ssp:4', 'flown:4'])
def test_momentum_release_is_off_by_default_checked_and_taggable(spec):
    assert make_policy(spec).momentum_at(0.9, 4, 299, 300) == pytest.approx(0.6)
    with pytest.raises(ValueError, match='momentum_release'):
        make_policy(spec, momentum_release=1.5)
    assert make_policy(spec + '#momentum_release=0.5').momentum_release == 0.5


@pytest.mark.parametrize('n,first', [(4, 0.6), (12, 0.0)])
def test_worker_follows_the_schedule_and_keeps_the_decay_strength(n, first):
    from rog_ros.core.rows import RowLayout
    from rog_ros.core.compress.row_sign import RowScaledSign
    from rog_ros.protocol.worker import WorkerEngine
    import torch
    layout = RowLayout([(8, 4), (4,)])
    w0 = torch.zeros(layout.n_params)
    pol = make_policy('rog:4', momentum_release=RELEASE)
    eng = WorkerEngine(0, n, layout, RowScaledSign(), pol, w0, momentum=0.9,
                       weight_decay=5e-4, max_iterations=30)
    assert eng.precondition.momentum == pytest.approx(first)
    eng.start(0.0)
    eng.clock = 14                      # the next gradient is iteration 15 of 30: released
    g = torch.ones(layout.n_params)
    eng.on_compute_done(g, 0.1)
    want = first + RELEASE * (0.9 - first)
    assert eng.precondition.momentum == pytest.approx(want)
    assert eng.precondition.buf is not None and float(eng.precondition.buf.sum()) != 0.0
    # decay added after momentum as wd' / (1 - mu) keeps the strength wd / (1 - 0.9)
    assert eng.precondition.weight_decay / (1 - want) == pytest.approx(5e-4 / (1 - 0.9))


def test_a_restored_worker_keeps_the_momentum_a_release_gave_it():
    # 12 workers start compensated to 0 (no buffer); the release creates one, and a worker
    # restored from the saved state must get it back, not silently start from no momentum.
    from rog_ros.core.rows import RowLayout
    from rog_ros.core.compress.row_sign import RowScaledSign
    from rog_ros.protocol.worker import WorkerEngine
    import torch
    layout = RowLayout([(8, 4), (4,)])
    pol = make_policy('rog:4', momentum_release=RELEASE)

    def engine():
        return WorkerEngine(0, 12, layout, RowScaledSign(), pol, torch.zeros(layout.n_params),
                            momentum=0.9, max_iterations=30)
    eng = engine()
    eng.start(0.0)
    eng.clock = 14
    eng.on_compute_done(torch.arange(layout.n_params, dtype=torch.float32), 0.1)
    saved = eng.state_dict()
    assert saved['momentum'] is not None and float(saved['momentum'].abs().sum()) > 0
    fresh = engine()
    assert fresh.precondition.buf is None
    fresh.load_state_dict(saved)
    assert torch.equal(fresh.precondition.buf, saved['momentum'])
    # a momentum buffer of another model is refused before anything is restored
    bad = dict(saved, momentum=torch.ones(layout.n_params + 1))
    other = engine()
    with pytest.raises(ValueError, match='another model'):
        other.load_state_dict(bad)
    assert other.precondition.buf is None and float(other.residual.abs().sum()) == 0.0
