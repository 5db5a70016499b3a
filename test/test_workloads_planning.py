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
"""Tests of MPCOL's worlds, expert planner, observations and closed-loop roll-outs."""
from collections import deque

import pytest
from rog_ros.workloads import policy as policy_module
from rog_ros.workloads.planning import (distance_fields, MOVES, Observer, optimal_moves,
                                        UNREACHABLE)
from rog_ros.workloads.policy import optimal_set_loss, picks_optimal, PlanningPolicy, rollout
from rog_ros.workloads.worlds import FAMILIES, generate
import torch


def _bfs(obstacles, goal):
    # Reference: textbook queue-based BFS on one map.
    s = obstacles.shape[0]
    dist = [[UNREACHABLE] * s for _ in range(s)]
    dist[goal[0]][goal[1]] = 0
    queue = deque([tuple(goal)])
    while queue:
        y, x = queue.popleft()
        for dy, dx in MOVES.tolist():
            ny, nx = y + dy, x + dx
            if 0 <= ny < s and 0 <= nx < s and not obstacles[ny, nx] and \
                    dist[ny][nx] == UNREACHABLE:
                dist[ny][nx] = dist[y][x] + 1
                queue.append((ny, nx))
    return torch.tensor(dist, dtype=torch.int32)


@pytest.mark.parametrize('family', FAMILIES)
def test_families_deterministic_distinct_and_passable(family):
    maps = generate(family, 16, 32, seed=3)

    assert maps.shape == (16, 32, 32) and maps.dtype == torch.bool
    assert torch.equal(maps, generate(family, 16, 32, seed=3))
    assert not torch.equal(maps, generate(family, 16, 32, seed=4))
    density = maps.float().mean()
    assert 0.03 < density < 0.6, density  # mazes: one-cell walls between one-cell corridors


def test_families_differ_in_obstacle_statistics():
    density = {f: generate(f, 64, 32, seed=0).float().mean().item() for f in FAMILIES}

    assert len({round(d, 2) for d in density.values()}) == len(FAMILIES)


def test_distance_field_matches_queue_bfs():
    maps = generate('rooms', 6, 24, seed=1)
    goals = torch.stack([torch.nonzero(~m)[7] for m in maps])

    dist = distance_fields(maps, goals)

    for m, g, d in zip(maps, goals, dist):
        assert torch.equal(d, _bfs(m, g.tolist()))


def test_optimal_moves_step_one_closer():
    maps = generate('clutter', 4, 16, seed=2)
    goals = torch.stack([torch.nonzero(~m)[0] for m in maps])
    dist = distance_fields(maps, goals)
    cells = torch.nonzero((dist > 0) & (dist < UNREACHABLE))
    field, pos = cells[:, 0], cells[:, 1:]

    best = optimal_moves(dist, pos, field)

    assert best.any(1).all()  # every reachable non-goal cell has a way forward
    nxt = (pos[:, None] + MOVES[None]).clamp(0, 15)
    there = dist[field[:, None], nxt[..., 0], nxt[..., 1]]
    here = dist[field, pos[:, 0], pos[:, 1]]
    assert torch.equal(best, (there == here[:, None] - 1) & ((pos[:, None] + MOVES[None]) >= 0)
                       .all(-1) & ((pos[:, None] + MOVES[None]) < 16).all(-1))


def test_observer_window_goal_channel_and_features():
    maps = torch.zeros(1, 10, 10, dtype=torch.bool)
    maps[0, 2, 3] = True
    observe = Observer(maps, radius=2)
    rows = torch.tensor([[0, 2, 2, 2, 9]])  # at (2, 2), goal 7 cells east

    x = observe(rows)

    window = x[0, :25].reshape(5, 5)
    goal = x[0, 25:50].reshape(5, 5)
    assert window[2, 3] == 1 and window[2, 2] == 0  # the obstacle east of the robot
    assert window.sum() == 1  # nothing else nearby, all inside the map
    assert goal[2, 4] == 1 and goal.sum() == 1  # goal beyond the window: on its east edge
    assert x[0, 50:54].tolist() == pytest.approx([0.0, 0.7, 0.7, 1 / 8])
    corner = observe(torch.tensor([[0, 0, 0, 1, 1]]))[0, :25].reshape(5, 5)
    assert corner[:2].sum() == 5 * 2 and corner[:, :2].sum() == 5 * 2  # outside = obstacle


def test_optimal_set_loss_and_metric():
    logits = torch.tensor([[5.0, 0.0, 0.0, 0.0], [0.0, 0.0, 3.0, 3.0]])
    optimal = torch.tensor([[True, False, False, False], [False, False, True, True]])

    assert picks_optimal(logits, optimal).tolist() == [True, True]
    assert optimal_set_loss(logits, optimal) < 0.1
    assert picks_optimal(logits, ~optimal).tolist() == [False, False]


def test_policy_size_is_papers_mpcol_gradient_size():
    n = sum(p.numel() for p in PlanningPolicy().parameters())

    assert n == 801_716
    assert abs(n * 4 / 1e6 - 3.2) / 3.2 < 0.03  # 3.2 MB of fp32 gradients (paper section 1)


class _SpyObserver(Observer):
    """Observer that remembers the rows of its last call (the robots' true states)."""

    last_rows = None

    def __call__(self, rows):
        type(self).last_rows = rows
        return super().__call__(rows)


class _FieldPolicy(torch.nn.Module):
    """Cheats with the true distance fields: behaves exactly like the expert."""

    def __init__(self, dist):
        super().__init__()
        self.dist = dist

    def forward(self, x):
        rows = _SpyObserver.last_rows
        return optimal_moves(self.dist, rows[:, 1:3], rows[:, 0]).float()


class _AlwaysWest(torch.nn.Module):
    """Always moves west: hits the map edge or an obstacle sooner or later."""

    def forward(self, x):
        return torch.tensor([0.0, 0.0, 0.0, 1.0]).expand(len(x), 4)


def test_rollout_metrics_for_expert_and_wall_hugger(monkeypatch):
    maps = generate('pillars', 8, 16, seed=0)
    free = [torch.nonzero(~m) for m in maps]
    starts = torch.stack([f[0] for f in free])
    goals = torch.stack([f[-1] for f in free])
    monkeypatch.setattr(policy_module, 'Observer', _SpyObserver)

    good = rollout(_FieldPolicy(distance_fields(maps, goals)), maps, starts, goals, radius=2)
    west = rollout(_AlwaysWest(), maps, starts, goals, radius=2)

    assert good['success_rate'] == 1.0 and good['collision_rate'] == 0.0
    assert good['path_length_ratio'] == pytest.approx(1.0)
    assert west['success_rate'] == 0.0 and west['collision_rate'] == 1.0
    assert west['path_length_ratio'] is None
