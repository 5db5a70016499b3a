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
Procedural 2-D worlds for MPCOL: occupancy grids of several obstacle families, vectorised.

A "working space" is a family of obstacle patterns; entering a new one (a family held out of
pre-training) is what makes the fleet re-train its planning policy (Rog paper section 7).
Families, each generated for a whole batch of maps at once with tensor operations:

* `clutter`: scattered boxes (a storage yard);
* `pillars`: a jittered lattice of columns, some missing (a warehouse or car park);
* `rooms`: rooms and corridors with walls and doorways (an office floor);
* `rubble`: a damaged building: room walls broken in places, round debris heaps across them;
* `caves`: organic blobs from thresholded smooth noise (a mine, rocks);
* `maze`: one-cell corridors (a collapsed building's remaining passages): a binary-tree maze
  (every cell opens north or east, so it is built for all cells at once), with a few extra
  openings that create loops. Routes often lead away from the goal, which local policies
  trained on open families get wrong: the default new working space of MPCOL.

Maps are bool tensors (B, S, S), True = obstacle; the world outside the map is an obstacle.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

FAMILIES = ('clutter', 'pillars', 'rooms', 'rubble', 'caves', 'maze')


def _boxes(n, size, count, lo, hi, g):
    # Union of `count` random axis-aligned boxes with sides in [lo, hi] per map.
    x0 = torch.randint(0, size, (n, count, 1, 1), generator=g)
    y0 = torch.randint(0, size, (n, count, 1, 1), generator=g)
    w = torch.randint(lo, hi + 1, (n, count, 1, 1), generator=g)
    h = torch.randint(lo, hi + 1, (n, count, 1, 1), generator=g)
    ax = torch.arange(size)
    inside = ((ax[None, None, None] >= x0) & (ax[None, None, None] < x0 + w)
              & (ax[None, None, :, None] >= y0) & (ax[None, None, :, None] < y0 + h))
    return inside.any(1)


def _discs(n, size, count, r_lo, r_hi, g):
    # Union of `count` random discs with radii in [r_lo, r_hi] per map.
    cx = torch.rand(n, count, 1, 1, generator=g) * size
    cy = torch.rand(n, count, 1, 1, generator=g) * size
    r = r_lo + (r_hi - r_lo) * torch.rand(n, count, 1, 1, generator=g)
    ax = torch.arange(size) + 0.5
    return (((ax[None, None, None] - cx) ** 2 + (ax[None, None, :, None] - cy) ** 2)
            <= r * r).any(1)


def _walls(n, size, g, door=2):
    # Room walls every `period` cells (per map 6..10) with one doorway per wall segment.
    period = torch.randint(6, 11, (n, 1), generator=g)
    offset = torch.randint(0, 6, (n, 1), generator=g)
    ax = torch.arange(size)
    cell = (ax - offset) % period  # (n, size): position inside the room along an axis
    seg = torch.div(ax - offset, period, rounding_mode='floor') + 1  # (n, size): room index
    span = size // 6 + 3
    bi = torch.arange(n)[:, None, None]
    on_line = cell == 0  # (n, size): coordinate lies on a wall line

    def doorway(seg_line, seg_along, cell_along):
        # Free cells of wall lines: per (map, wall line, segment) one doorway of `door` cells.
        first = 1 + (torch.rand(n, span, span, generator=g) * (period[:, :, None] - door - 1)
                     ).long()
        start = first[bi, seg_line, seg_along]
        return (cell_along >= start) & (cell_along < start + door)

    horizontal = on_line[:, :, None] & ~doorway(seg[:, :, None], seg[:, None, :],
                                                cell[:, None, :])
    vertical = on_line[:, None, :] & ~doorway(seg[:, None, :], seg[:, :, None],
                                              cell[:, :, None])
    return horizontal | vertical


def _maze(n, size, g, loops=0.1):
    # Binary-tree maze on cells (2i+1, 2j+1): each cell opens its north or its east wall.
    cells = (size - 1) // 2
    grid = torch.ones(n, size, size, dtype=torch.bool)
    centre = torch.arange(cells) * 2 + 1
    grid[:, centre[:, None], centre[None, :]] = False
    north = torch.rand(n, cells, cells, generator=g) < 0.5
    north[:, 0, :] = False  # top row: open east
    north[:, :, -1] = True  # right column: open north
    north[:, 0, -1] = False
    east = ~north
    east[:, 0, -1] = False  # the root cell opens nothing
    bi, ci, cj = torch.nonzero(north, as_tuple=True)
    grid[bi, 2 * ci, 2 * cj + 1] = False
    bi, ci, cj = torch.nonzero(east, as_tuple=True)
    grid[bi, 2 * ci + 1, 2 * cj + 2] = False
    # Loops: open a fraction of the remaining walls between two cells.
    inner = torch.zeros(size, size, dtype=torch.bool)
    inner[1:2 * cells, 1:2 * cells] = True
    between = ((torch.arange(size)[:, None] + torch.arange(size)[None]) % 2 == 1) & inner
    grid &= ~(between & (torch.rand(n, size, size, generator=g) < loops))
    return grid


def generate(family, n, size=32, seed=0):
    """
    Generate `n` maps of one family.

    Parameters
    ----------
    family : str
        One of `FAMILIES`.
    n, size : int
        Number of maps and their side in cells.
    seed : int
        Same seed, same maps.

    Returns
    -------
    bool tensor (n, size, size), True = obstacle.

    """
    g = torch.Generator().manual_seed(seed)
    if family == 'clutter':
        return _boxes(n, size, size * size // 60, 1, 3, g)
    if family == 'pillars':
        period = torch.randint(4, 7, (n, 1, 1), generator=g)
        ox, oy = (torch.randint(0, 4, (n, 1, 1), generator=g) for _ in range(2))
        ax = torch.arange(size)
        on_x, on_y = ((ax - ox) % period < 2), ((ax - oy) % period < 2)
        keep = torch.rand(n, size, size, generator=g) < 0.85
        lattice = on_y[:, 0, :, None] & on_x[:, 0, None, :]
        # Remove whole pillars at random: a pillar's cells share the anchor of their top-left.
        anchor_y = (ax - (ax - oy) % period).clamp(0, size - 1)[:, 0]
        anchor_x = (ax - (ax - ox) % period).clamp(0, size - 1)[:, 0]
        bi = torch.arange(n)[:, None, None]
        return lattice & keep[bi, anchor_y[:, :, None], anchor_x[:, None, :]]
    if family == 'rooms':
        return _walls(n, size, g) | _boxes(n, size, 3, 1, 2, g)
    if family == 'rubble':
        walls = _walls(n, size, g, door=3)
        broken = F.max_pool2d((torch.rand(n, 1, size, size, generator=g) < 0.03).float(), 5, 1,
                              2)[:, 0] > 0
        return (walls & ~broken) | _discs(n, size, 6, 1.0, 2.6, g)
    if family == 'caves':
        noise = torch.rand(n, 1, size // 4, size // 4, generator=g)
        smooth = F.interpolate(noise, size=(size, size), mode='bicubic', align_corners=False)
        fine = 0.15 * torch.rand(n, 1, size, size, generator=g)
        return (smooth + fine)[:, 0] > 0.72
    if family == 'maze':
        return _maze(n, size, g)
    raise ValueError(f'unknown world family {family!r}; expected one of {FAMILIES}')
