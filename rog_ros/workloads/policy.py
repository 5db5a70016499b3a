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
MPCOL's route-planning policy network and its closed-loop evaluation in grid worlds.

The policy maps an egocentric observation (occupancy window + goal channel + goal vector, see
`planning.Observer`) to logits over the four moves. Its size is the paper's MPCOL size: 3.2 MB
of fp32 gradients, i.e. ~0.8 M parameters (801,716 with the defaults), mostly in the first
fully connected layer, like the upstream collision-avoidance CNN of ref. [30].

`rollout` drives many robots at once (one batched forward pass per step) from start to goal in
held-out maps and reports success, collision and path-length ratio against the BFS expert.
"""

from __future__ import annotations

from rog_ros.workloads.planning import distance_fields, MOVES, Observer, UNREACHABLE
import torch
from torch import nn


class PlanningPolicy(nn.Module):
    """Conv trunk over the observation window, MLP head over trunk features + goal vector."""

    def __init__(self, radius=8, hidden=(400, 256)):
        super().__init__()
        self.width = 2 * radius + 1
        self.trunk = nn.Sequential(
            nn.Conv2d(2, 32, 3, 1, 1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(64, 64, 3, 2, 1), nn.ReLU(), nn.Flatten())
        side = (self.width + 1) // 2
        side = (side + 1) // 2
        self.head = nn.Sequential(
            nn.Linear(64 * side * side + 4, hidden[0]), nn.ReLU(),
            nn.Linear(hidden[0], hidden[1]), nn.ReLU(),
            nn.Linear(hidden[1], len(MOVES)))

    def forward(self, x):
        cells = 2 * self.width * self.width
        grid = x[:, :cells].reshape(-1, 2, self.width, self.width)
        return self.head(torch.cat([self.trunk(grid), x[:, cells:]], dim=1))


def optimal_set_loss(logits, optimal):
    """Negative log-probability of choosing any optimal move (ties share the target)."""
    masked = logits.masked_fill(~optimal, float('-inf'))
    return (torch.logsumexp(logits, 1) - torch.logsumexp(masked, 1)).mean()


def picks_optimal(logits, optimal):
    """Per-sample bool: the policy's top move is one of the optimal moves."""
    return optimal.gather(1, logits.argmax(1, keepdim=True))[:, 0]


@torch.no_grad()
def rollout(model, obstacles, starts, goals, radius, slack=2.0, extra=16):
    """
    Drive one robot per (map, start, goal) with the greedy policy; collect closed-loop metrics.

    A robot moves to the cell of its top move each step; moving into an obstacle or off the
    map is a collision and ends its episode; it succeeds on reaching the goal within
    `slack * expert length + extra` steps.

    Parameters
    ----------
    model : nn.Module
        The policy (inputs as `planning.Observer`).
    obstacles : bool tensor (E, S, S)
        One map per episode.
    starts, goals : int tensors (E, 2)
        Start and goal cells, free and connected.
    radius : int
        Observation window radius the policy was built for.
    slack, extra : float, int
        Step budget factor and allowance over the expert's path length.

    Returns
    -------
    dict
        'success_rate', 'collision_rate', 'path_length_ratio' (mean policy / expert steps over
        successful episodes, >= 1; None without successes), 'episodes'.

    """
    was_training = model.training
    model.eval()
    e, s, _ = obstacles.shape
    expert = distance_fields(obstacles, goals)[torch.arange(e), starts[:, 0], starts[:, 1]]
    if bool((expert >= UNREACHABLE).any()):
        raise ValueError('every start must be connected to its goal')
    budget = (slack * expert.float() + extra).long()
    pos, steps = starts.clone(), torch.zeros(e, dtype=torch.long)
    active = torch.ones(e, dtype=torch.bool)
    success = torch.zeros(e, dtype=torch.bool)
    collided = torch.zeros(e, dtype=torch.bool)
    observe = Observer(obstacles, radius)
    for _ in range(int(budget.max())):
        live = torch.nonzero(active).flatten()
        if len(live) == 0:
            break
        rows = torch.cat([live[:, None], pos[live], goals[live]], dim=1)
        move = MOVES[model(observe(rows)).argmax(1)]
        nxt = pos[live] + move
        off = ((nxt < 0) | (nxt >= s)).any(1)
        nxt_c = nxt.clamp(0, s - 1)
        hit = off | obstacles[live, nxt_c[:, 0], nxt_c[:, 1]]
        collided[live[hit]] = True
        pos[live[~hit]] = nxt_c[~hit]
        steps[live] += 1
        arrived = (pos[live] == goals[live]).all(1) & ~hit
        success[live[arrived]] = True
        active[live[hit | arrived | (steps[live] >= budget[live])]] = False
    model.train(was_training)
    ratio = float((steps[success].float() / expert[success].float()).mean()) \
        if success.any() else None
    return {'success_rate': float(success.float().mean()),
            'collision_rate': float(collided.float().mean()),
            'path_length_ratio': ratio, 'episodes': e}
