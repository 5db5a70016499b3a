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
"""Chunk planning: caps, priority order preserved, fragmentation, mandatory cover."""

import numpy as np
import pytest

from rog_ros.core.packing import plan_chunks


def test_chunks_respect_cap_and_order():
    rng = np.random.default_rng(0)
    nb = rng.integers(1, 300, size=500)
    plan = plan_chunks(nb, cap=1024)
    assert plan.nbytes.max() <= 1024
    assert plan.nbytes.sum() == nb.sum()
    # contiguous, ordered cover of all ranks
    assert plan.rank_lo[0] == 0 and plan.rank_hi[-1] == 500
    assert np.all(plan.rank_lo[1:] == plan.rank_hi[:-1])
    # greedy: a chunk could not have taken the next row
    nxt = nb[plan.rank_hi[:-1]]
    assert np.all(plan.nbytes[:-1] + nxt > 1024)


def test_large_rows_are_fragmented():
    plan = plan_chunks(np.array([10, 5000, 20]), cap=2048)
    assert plan.nbytes.tolist() == [10, 2048, 2048, 904, 20]
    assert plan.frag_len.tolist() == [-1, 2048, 2048, 904, -1]
    assert plan.frag_offset.tolist() == [0, 0, 2048, 4096, 0]
    # sending ranks [0, 2) needs every fragment of rank 1
    assert plan.chunks_covering(2) == 4
    assert plan.chunks_covering(1) == 1
    assert plan.chunks_covering(0) == 0


def test_bad_cap():
    with pytest.raises(ValueError):
        plan_chunks(np.array([1]), cap=0)


def test_boundary_starts_a_new_chunk():
    nb = np.full(10, 100)
    plan = plan_chunks(nb, cap=350, boundary=4)
    assert plan.rank_lo.tolist() == [0, 3, 4, 7]
    assert plan.rank_hi.tolist() == [3, 4, 7, 10]
    assert plan.chunks_covering(4) == 2          # exactly the mandatory rows
