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
"""MTA rules, urgency, priority order, mandatory prefix and budgets."""

import pytest
from rog_ros.core.atp import Ewma, infinite_mask, mta_time, priority_order
from rog_ros.core.mta import mandatory_rows, mta, PAPER_TABLE, row_budget
import torch


PAPER_TABLE_1 = {2: 0.5, 3: 0.38, 4: 0.32, 5: 0.28, 6: 0.25, 7: 0.22, 8: 0.2}
"""Table 1 of the paper, typed in here (not read from rog_ros)."""


def _independent_root(exponent):
    """Root in (0, 1) of (1-P)^exponent = P by Newton's method (not the library's bisection)."""
    p = 0.5
    for _ in range(60):
        f = (1.0 - p) ** exponent - p
        df = -exponent * (1.0 - p) ** (exponent - 1) - 1.0
        p -= f / df
    return p


def _check_paper_table(mta_fn):
    for s, printed in PAPER_TABLE_1.items():
        root = _independent_root(s - 1)
        assert abs((1 - root) ** (s - 1) - root) < 1e-12
        assert round(root, 2) == printed              # the paper's table is the rounded root
        assert mta_fn(s) == printed, s
    assert mta_fn(0) == 1.0
    assert mta_fn(1) == 0.5 and mta_fn(1, mta_at_one=1.0) == 1.0


def test_paper_table():
    _check_paper_table(mta)
    assert set(PAPER_TABLE) == set(PAPER_TABLE_1)


def test_paper_table_check_catches_a_wrong_entry(monkeypatch):
    from rog_ros.core import mta as mta_module
    monkeypatch.setitem(mta_module.PAPER_TABLE, 5, 0.3)     # planted: a mistyped entry
    with pytest.raises(AssertionError):
        _check_paper_table(mta)


@pytest.mark.parametrize('s', [3, 4, 8, 20, 40])
def test_exact_roots(s):
    root = _independent_root(s - 1)
    assert mta(s, 'exact_root_printed') == pytest.approx(root, abs=1e-9)
    p = mta(s, 'exact_root_printed')
    assert (1 - p) ** (s - 1) == pytest.approx(p, rel=1e-9)


def test_default_beyond_table_is_exact_root():
    assert mta(20) == pytest.approx(_independent_root(19), abs=1e-9)
    assert mta(9) == pytest.approx(_independent_root(8), abs=1e-9)


def test_shifted_and_round_robin():
    assert mta(1, 'exact_root_shifted') == pytest.approx(0.5, abs=1e-9)
    assert mta(3, 'exact_root_shifted') == pytest.approx(_independent_root(3), abs=1e-9)
    assert mta(4, 'round_robin') == pytest.approx(0.2)
    assert mta(0, 'round_robin') == 1.0
    with pytest.raises(ValueError):
        mta(3, 'nonsense')
    with pytest.raises(ValueError):
        mta(-1)


def test_mandatory_rows_and_budget():
    assert mandatory_rows(1000, 0.32, 10) == 320
    assert mandatory_rows(1000, 0.32, 500) == 500
    assert mandatory_rows(10, 1.0, 0) == 10
    assert row_budget(2.0, 0.32, 1000) == 640
    assert row_budget(5.0, 0.32, 1000) == 1000
    assert row_budget(0.5, 0.32, 1000) == 320     # q < 1 is clamped: never below MTA


def test_infinite_rule_conventions():
    u = torch.tensor([0, 1, 2, 3, 4, 5])
    assert infinite_mask(u, 4, 'gt').tolist() == [False] * 4 + [True] * 2
    assert infinite_mask(u, 4, 'ge').tolist() == [False] * 3 + [True] * 3


def test_priority_order_uplink():
    # rows: urgency, magnitude
    u = torch.tensor([1, 3, 2, 4, 4, 0])
    mag = torch.tensor([10.0, 1.0, 2.0, 0.5, 2.0, 100.0])
    inf = infinite_mask(u, 4)
    order = priority_order(u, mag, inf, multiply=True).tolist()
    # infinite rows 3 and 4 first (equal urgency: larger magnitude first), then u*mag:
    # row0 10, row1 3, row2 4, row5 0 -> 0, 2, 1, 5
    assert order == [4, 3, 0, 2, 1, 5]


def test_priority_order_downlink_and_candidates():
    u = torch.tensor([2, 2, 1, 3])
    mag = torch.tensor([1.0, 5.0, 9.0, 0.0])
    inf = infinite_mask(u, 4)
    assert priority_order(u, mag, inf, multiply=False).tolist() == [3, 1, 0, 2]
    cand = torch.tensor([0, 2])
    assert priority_order(u, mag, inf, multiply=False, candidates=cand).tolist() == [0, 2]
    # ablation: no magnitude -> ties broken by row id
    assert priority_order(u, mag, inf, use_magnitude=False).tolist() == [3, 0, 1, 2]


def test_mta_time_is_the_straggler_prefix_time():
    mand = torch.tensor([1e6, 1e6, 1e6])
    thr = torch.tensor([8e6, 4e6, 0.0])            # 1 MB at 8 Mbit/s = 1 s; at 4 = 2 s
    assert mta_time(mand, thr) == pytest.approx(2.0)
    assert mta_time(mand, torch.zeros(3)) == 0.0


def test_ewma():
    e = Ewma(alpha=0.5)
    assert e.value_bps == 0
    e.update(1e6, 1.0)
    assert e.value_bps == pytest.approx(8e6)
    e.update(1e6, 2.0)
    assert e.value_bps == pytest.approx(6e6)
    with pytest.raises(ValueError):
        Ewma(alpha=0)
