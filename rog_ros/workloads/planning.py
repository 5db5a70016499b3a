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
Expert motion planning on occupancy grids: BFS distance fields, optimal moves, observations.

The expert is exact shortest-path planning (what A* returns) on a 4-connected grid, computed for
a whole batch of (map, goal) pairs at once as a distance field: repeated min-relaxation over the
four neighbours, which is breadth-first search run in parallel over every cell. From a field, the
optimal next moves at any cell are the neighbours one step closer; several can tie, so labels are
a mask of all optimal moves and a policy is right when it picks any of them.

A robot observes an egocentric window of the occupancy grid (outside the map counts as obstacle)
and the goal: a goal channel in the window (the goal cell, or where the straight line to it
leaves the window) and the relative goal vector. `Observer` builds that for any batch of
(map, position, goal) rows with one gather.
"""

from __future__ import annotations

import torch

# Moves: north, east, south, west as (dy, dx).
MOVES = torch.tensor([[-1, 0], [0, 1], [1, 0], [0, -1]])
UNREACHABLE = 1 << 20


def distance_fields(obstacles, goals):
    """
    Compute shortest-path step counts to the goal from every cell (BFS, 4-connected).

    Parameters
    ----------
    obstacles : bool tensor (B, S, S)
        True = obstacle.
    goals : int tensor (B, 2)
        Goal cell (y, x) per map; must be free.

    Returns
    -------
    int32 tensor (B, S, S)
        Steps to the goal; `UNREACHABLE` for obstacles and cells cut off from the goal.

    """
    b, s, _ = obstacles.shape
    dist = torch.full((b, s + 2, s + 2), UNREACHABLE, dtype=torch.int32)
    dist[torch.arange(b), goals[:, 0] + 1, goals[:, 1] + 1] = 0
    inner = dist[:, 1:-1, 1:-1]  # a view: relaxation updates `dist` in place
    blocked = obstacles.bool()
    while True:
        before = inner.clone()
        for _ in range(8):  # check for convergence only every 8 sweeps: checks cost a sweep
            near = torch.minimum(torch.minimum(dist[:, :-2, 1:-1], dist[:, 2:, 1:-1]),
                                 torch.minimum(dist[:, 1:-1, :-2], dist[:, 1:-1, 2:]))
            near.add_(1).masked_fill_(blocked, UNREACHABLE)
            torch.minimum(inner, near, out=near)
            inner.copy_(near)
        if torch.equal(before, inner):
            return inner.clone()


def optimal_moves(dist, pos, field=None):
    """
    Mark the moves from `pos` that are one step closer to the goal.

    Parameters
    ----------
    dist : int tensor (F, S, S)
        Distance fields.
    pos : int tensor (B, 2)
        Cells (y, x).
    field : int tensor (B,) or None
        Field of each row; None means row i uses field i (F == B).

    Returns
    -------
    bool tensor (B, 4)
        Optimal moves in `MOVES` order (none at the goal itself).

    """
    s = dist.shape[1]
    field = torch.arange(len(pos)) if field is None else field
    nxt = pos[:, None, :] + MOVES[None]
    inside = ((nxt >= 0) & (nxt < s)).all(-1)
    ny, nx = nxt[..., 0].clamp(0, s - 1), nxt[..., 1].clamp(0, s - 1)
    here = dist[field, pos[:, 0], pos[:, 1]]
    there = dist[field[:, None], ny, nx]
    return inside & (there == here[:, None] - 1) & (here[:, None] < UNREACHABLE)


class Observer:
    """
    Policy inputs for (map, position, goal) rows over a fixed set of maps.

    The maps are padded with obstacles once, so each call is a single gather.

    Parameters
    ----------
    obstacles : bool or uint8 tensor (M, S, S)
        All maps the rows may refer to.
    radius : int
        Window radius; the window is W = 2 radius + 1 cells wide.

    """

    def __init__(self, obstacles, radius):
        m, s, _ = obstacles.shape
        self.radius, self.size = int(radius), s
        self.padded = torch.ones((m, s + 2 * radius, s + 2 * radius), dtype=torch.bool)
        self.padded[:, radius:s + radius, radius:s + radius] = obstacles.bool()

    def __call__(self, rows):
        """
        Build inputs for int rows (N, 5) = (map index, y, x, goal y, goal x).

        Returns float (N, 2 W W + 4): flattened [occupancy window, goal channel] followed by
        the goal vector (dy, dx) / S, its length / S and 1 / (1 + length).
        """
        r, s = self.radius, self.size
        w = 2 * r + 1
        rows = rows.long()
        off = torch.arange(w)
        k, y, x = rows[:, 0], rows[:, 1], rows[:, 2]
        window = self.padded[k[:, None, None], (y[:, None] + off)[:, :, None],
                             (x[:, None] + off)[:, None, :]]
        d = (rows[:, 3:5] - rows[:, 1:3]).float()
        norm = d.norm(dim=1, keepdim=True)
        # Goal channel: the goal cell if inside the window, else where the ray leaves it.
        shrink = torch.clamp(r / d.abs().amax(1, keepdim=True).clamp_min(1), max=1.0)
        spot = torch.round(d * shrink).long() + r
        goal = torch.zeros((len(rows), w, w))
        goal[torch.arange(len(rows)), spot[:, 0], spot[:, 1]] = 1.0
        feats = torch.cat([d / s, norm / s, 1 / (1 + norm)], dim=1)
        return torch.cat([window.float().flatten(1), goal.flatten(1), feats], dim=1)
