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
"""RSP predicate: stalls exactly at staleness S+1, both levels; SSP and BSP reductions."""

from rog_ros.core.versions import VersionTable
import torch


def table(rows, workers, value):
    t = VersionTable(rows, workers)
    t.v.fill_(value)
    return t


def test_same_row_across_workers_level():
    S = 3
    t = table(5, 3, 10)
    t.v[2, 1] = 7            # worker 1 last pushed row 2 at its iteration 7
    assert t.satisfied(10, S)            # staleness 3 == S: allowed
    assert not t.satisfied(11, S)        # staleness 4 == S+1: stall
    pairs = t.violating_pairs(11, S).tolist()
    assert pairs == [[2, 1]]             # exactly the violating (row, worker)


def test_rows_within_one_worker_level():
    S = 2
    t = table(4, 2, 9)
    t.v[3, 0] = 7            # worker 0's own row 3 withheld since iteration 7
    assert t.satisfied(9, S)
    assert not t.satisfied(10, S)
    assert t.violating_pairs(10, S).tolist() == [[3, 0]]


def test_ssp_and_bsp_reductions():
    # One row per model: the predicate is c - min_s c_s <= S.
    t = VersionTable(1, 4)
    t.v[0] = torch.tensor([5, 8, 6, 9], dtype=torch.int32)
    assert t.satisfied(9, 4) and not t.satisfied(10, 4)
    # BSP (S = 0): everybody must have pushed the current iteration.
    assert not t.satisfied(9, 0)
    t.v[0] = 9
    assert t.satisfied(9, 0)


def test_stamp_is_monotone():
    t = VersionTable(3, 2)
    t.stamp(1, torch.tensor([True, False, True]), 5)
    t.stamp(1, torch.tensor([True, True, False]), 4)    # late, older push
    assert t.v[:, 1].tolist() == [5, 4, 5]
    assert t.min_version().tolist() == [0, 0, 0]
