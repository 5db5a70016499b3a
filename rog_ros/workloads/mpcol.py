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
MPCOL: robots share a route-planning policy and adapt it in a new working space.

Rog paper section 7: robots plan routes to goals while avoiding collisions (e.g. in a damaged
building); entering a new working space, the fleet adapts the shared policy to the new obstacle
patterns with distributed training. Here the policy (`policy.PlanningPolicy`, ~0.8 M parameters,
the paper's 3.2 MB of gradients) imitates the exact BFS expert (`planning.py`) from local
observations. It is pre-trained on known obstacle families (`worlds.py`) and adapted on a family
it has never seen, each worker on the maps it explores itself (non-IID by map).

Metrics: next-move accuracy (the top move is one of the expert's optimal moves) and loss on
held-out maps of the new family (`evaluate`, fast), and closed-loop roll-outs there
(`rollout_metrics`: success, collision rate, path-length ratio to the expert).

Target accuracy: before + `target_fraction` (0.55) of the gap to the pre-trained policy's accuracy
on held-out maps of the known families, measured when the checkpoint is built and stored with it.
"""

from __future__ import annotations

import time

from rog_ros.workloads import cache, shipped
from rog_ros.workloads.base import seeded, Workload
from rog_ros.workloads.options import check_training, integer, one_of
from rog_ros.workloads.partition import group_split
from rog_ros.workloads.planning import distance_fields, Observer, optimal_moves, UNREACHABLE
from rog_ros.workloads.policy import optimal_set_loss, picks_optimal, PlanningPolicy, rollout
from rog_ros.workloads.training import pretrain
from rog_ros.workloads.worlds import FAMILIES, generate
import torch

CODE_VERSION = 'mpcol-3'  # 3: the default start is shipped (``shipped``), not pre-trained here
# Assumed Jetson Xavier NX seconds per MPCOL iteration (the paper gives none). Our MPCOL is
# supervised imitation, so an iteration is the 0.8 M-parameter policy's forward/backward on
# 64 samples (about 10 ms on the NX GPU) plus batch preparation and DEFSGDM compression: we
# assume 0.1 s.
XAVIER_NX_SECONDS = 0.1
# Smallest map side: below it a map of caves may have no free cell with a goal 8 steps away
# for the roll-out episodes (measured: size 10 failed for seed 0, 12 and 16 held for seeds
# 0-2); 16 leaves a margin.
MIN_SIZE = 16
MAX_SIZE = 256


def _samples(obstacles, first_map, per_map, g, min_distance=1):
    """Rows (map, y, x, gy, gx) and optimal-move masks: one goal per map, `per_map` starts."""
    n, s, _ = obstacles.shape
    flat_free = (~obstacles).flatten(1).float()
    goal = torch.multinomial(flat_free, 1, generator=g)[:, 0]
    goals = torch.stack([goal // s, goal % s], 1)
    dist = distance_fields(obstacles, goals)
    ok = ((dist >= min_distance) & (dist < UNREACHABLE)).flatten(1)
    keep = torch.nonzero(ok.sum(1) >= 4).flatten()  # skip goals walled into a pocket
    pick = torch.multinomial(ok[keep].float(), per_map, replacement=True, generator=g)
    field = keep[:, None].expand(-1, per_map).flatten()
    pos = torch.stack([pick.flatten() // s, pick.flatten() % s], 1)
    rows = torch.cat([(field + first_map)[:, None], pos, goals[field]], 1)
    return rows.to(torch.int32), optimal_moves(dist, pos, field)


def _build_data(opts):
    """All maps (known families, then new family) and the sample rows of every split."""
    g = torch.Generator().manual_seed(opts['seed'])
    size, seed = opts['size'], opts['seed']
    maps, parts, first = [], {}, 0

    def add(name, family, n, per_map, family_seed, min_distance=1):
        nonlocal first
        obstacles = generate(family, n, size, seed=family_seed)
        rows, labels = _samples(obstacles, first, per_map, g, min_distance)
        maps.append(obstacles)
        first += n
        prev = parts.get(name)
        parts[name] = (rows, labels) if prev is None else (
            torch.cat([prev[0], rows]), torch.cat([prev[1], labels]))

    for i, family in enumerate(opts['known']):
        add('pretrain', family, opts['pretrain_maps'], opts['per_map'], seed * 100 + i)
        add('known_eval', family, opts['eval_maps'] // len(opts['known']), opts['per_map'],
            seed * 100 + 50 + i)
    new = opts['new']
    add('adapt', new, opts['adapt_maps'], opts['per_map'], seed * 100 + 90)
    add('eval', new, opts['eval_maps'], opts['per_map'], seed * 100 + 91)
    # Roll-out episodes: one per held-out map of the new family, expert path >= 8 steps.
    add('episodes', new, opts['episodes'], 1, seed * 100 + 92, min_distance=8)
    return torch.cat(maps), parts


@torch.no_grad()
def _accuracy(model, observe, rows, labels):
    model.eval()
    acc = float(picks_optimal(model(observe(rows)), labels).float().mean())
    model.train()
    return acc


def _pretrained(opts, maps, parts, use_shipped=True):
    """
    Return ``(model, pre-training loss, where it was pre-trained)`` for ``opts``.

    The default configuration starts from the weights shipped with rog_ros (``shipped``):
    every machine and torch release then starts from the same model. Other options, or a
    shipped file that cannot be used, pre-train here.
    """
    model = seeded(opts['seed'], lambda: PlanningPolicy(opts['radius'], tuple(opts['hidden'])))
    start = shipped.start_for('mpcol', opts, CODE_VERSION) if use_shipped else None
    if start is not None:
        model.load_state_dict(start['state'])
        return model, float(start.get('pretrain_loss', float('nan'))), shipped.origin(start)
    rows, labels = parts['pretrain']
    loss = pretrain(model, rows, labels, optimal_set_loss, steps=opts['pretrain_steps'],
                    batch_size=opts['pretrain_batch'], lr=opts['pretrain_lr'],
                    seed=opts['seed'], transform=Observer(maps, opts['radius']),
                    weight_decay=1e-4)
    return model, loss, 'here'


def _build_checkpoint(opts):
    t0 = time.perf_counter()
    maps, parts = _build_data(opts)
    observe = Observer(maps, opts['radius'])
    model, loss, where = _pretrained(opts, maps, parts)
    episodes = _episodes(maps, parts)
    return {'state': model.state_dict(), 'maps': maps,
            'parts': {k: v for k, v in parts.items() if k != 'pretrain'},
            'pretrain_loss': loss, 'pretrain_seconds': time.perf_counter() - t0,
            'pretrained': where,
            'known_accuracy': _accuracy(model, observe, *parts['known_eval']),
            'accuracy_before': _accuracy(model, observe, *parts['eval']),
            'rollout_before': rollout(model, *episodes, opts['radius'])}


def pretrain_default():
    """
    Pre-train the default configuration here, ignoring any shipped weights.

    Returns ``(cache key, state_dict, loss)``: what ``python -m rog_ros.workloads.shipped
    mpcol`` ships.
    """
    opts = _options()
    maps, parts = _build_data(opts)
    model, loss, _ = _pretrained(opts, maps, parts, use_shipped=False)
    return cache.cache_key('mpcol', opts, CODE_VERSION), model.state_dict(), loss


def _episodes(maps, parts):
    rows = parts['episodes'][0].long()
    return maps[rows[:, 0]], rows[:, 1:3], rows[:, 3:5]


class MpcolWorkload(Workload):
    """The MPCOL `Workload`, plus closed-loop roll-outs in held-out maps of the new family."""

    def __init__(self, maps, episodes, radius, **kwargs):
        super().__init__(**kwargs)
        self._maps, self._episodes, self._radius = maps, episodes, radius

    def rollout_metrics(self, model):
        """
        Run closed-loop episodes with `model`.

        Returns {'success_rate', 'collision_rate', 'path_length_ratio', 'episodes'}; ~1-3 s on CPU.
        """
        return rollout(model, *self._episodes, self._radius)


def _options(known=('clutter', 'pillars', 'rooms'), new='maze', size=32, radius=8,
             hidden=(400, 256), pretrain_maps=200, adapt_maps=200, eval_maps=48, per_map=48,
             episodes=128, pretrain_steps=1200, pretrain_batch=128, pretrain_lr=1e-3, seed=0):
    """Return the options that make the data and the pre-trained start (the cache key's)."""
    return {'known': list(known), 'new': new, 'size': size, 'radius': radius,
            'hidden': list(hidden), 'pretrain_maps': pretrain_maps, 'adapt_maps': adapt_maps,
            'eval_maps': eval_maps, 'per_map': per_map, 'episodes': episodes,
            'pretrain_steps': pretrain_steps, 'pretrain_batch': pretrain_batch,
            'pretrain_lr': pretrain_lr, 'seed': seed}


def make_mpcol(known=('clutter', 'pillars', 'rooms'), new='maze', size=32, radius=8,
               hidden=(400, 256), pretrain_maps=200, adapt_maps=200, eval_maps=48, per_map=48,
               episodes=128, pretrain_steps=1200, pretrain_batch=128, pretrain_lr=1e-3,
               batch_size=64, lr=0.01, momentum=0.9, target_fraction=0.55,
               target_accuracy=None, compute_time_s=XAVIER_NX_SECONDS, seed=0):
    """
    Build the MPCOL workload (data on first use, the shipped start or pre-training, cached).

    Parameters
    ----------
    known : tuple of str
        Obstacle families of pre-training (`worlds.FAMILIES`).
    new : str
        The new working space, held out of pre-training; default 'maze' (one-cell corridors, the
        remaining passages of a collapsed building).
    size, radius : int
        Map side in cells; observation window radius (window 2 radius + 1).
    hidden : tuple of int
        Policy MLP widths; (400, 256) gives 801,716 parameters (3.2 MB fp32).
    pretrain_maps, adapt_maps, eval_maps, per_map, episodes : int
        Maps per known family, maps of the adaptation pool and of the evaluation set, samples
        per map, and closed-loop episodes (one per extra held-out map).
    pretrain_steps, pretrain_batch, pretrain_lr : int, int, float
        Imitation pre-training on the known families (AdamW, cosine).
    batch_size, lr, momentum : int, float, float
        Per-worker adaptation batch and suggested adaptation optimiser settings.
    target_fraction, target_accuracy : float
        Target = before + fraction x (known - before), unless `target_accuracy` is given.
    compute_time_s : float
        Device profile in seconds per iteration (assumed 0.1 s on Jetson Xavier NX).
    seed : int
        Seed of worlds, samples, initialisation and pre-training.

    Every option is checked first (ValueError, one line), before data or pre-training.

    """
    known = [known] if isinstance(known, str) else known
    _check_mpcol(locals())
    opts = _options(known, new, size, radius, hidden, pretrain_maps, adapt_maps, eval_maps,
                    per_map, episodes, pretrain_steps, pretrain_batch, pretrain_lr, seed)
    ckpt = cache.load_or_build('mpcol', opts, CODE_VERSION, lambda: _build_checkpoint(opts))
    maps, parts = ckpt['maps'], ckpt['parts']
    observe = Observer(maps, radius)
    adapt_rows, adapt_labels = parts['adapt']
    before, known_acc = ckpt['accuracy_before'], ckpt['known_accuracy']
    target = target_accuracy if target_accuracy is not None else round(
        before + target_fraction * max(known_acc - before, 0.0), 4)
    return MpcolWorkload(
        maps, _episodes(maps, parts), radius, name='mpcol',
        model_fn=lambda: seeded(seed, lambda: PlanningPolicy(radius, tuple(hidden))),
        initial_state=ckpt['state'],
        train=(adapt_rows, adapt_labels),
        partitions=lambda n: group_split(adapt_rows[:, 0], n), evaluation=parts['eval'],
        batch_size=batch_size, target_accuracy=target, compute_time_s=compute_time_s, lr=lr,
        momentum=momentum, transform=observe, loss_fn=optimal_set_loss,
        correct_fn=picks_optimal,
        info={'what': f'imitation of a BFS planner; pre-trained on {list(known)}, '
                      f'adapting to {new!r}',
              'known_families': list(known), 'new_family': new,
              'known_accuracy': known_acc, 'accuracy_before': before,
              'rollout_before': ckpt['rollout_before'],
              'pretrain_seconds': ckpt['pretrain_seconds'],
              'pretrained': ckpt.get('pretrained', 'here')})


def _check_mpcol(o):
    """Refuse an option of `make_mpcol` (``o``: its arguments) out of its range."""
    known = o['known']
    if not isinstance(known, (list, tuple)) or not known:
        raise ValueError(f'mpcol: known={known!r}: expected a comma-separated list of '
                         f'families from {", ".join(FAMILIES)}')
    for family in known:
        one_of('mpcol', 'known', family, FAMILIES)
    if len(set(known)) < len(known):
        raise ValueError(f'mpcol: known={list(known)!r}: a family is given twice')
    one_of('mpcol', 'new', o['new'], FAMILIES)
    if o['new'] in known:
        raise ValueError(f"mpcol: the new working space {o['new']!r} must not be a "
                         f'pre-training family (known={list(known)!r})')
    integer('mpcol', 'size', o['size'], MIN_SIZE, MAX_SIZE)
    integer('mpcol', 'radius', o['radius'], 1, 64)
    hidden = o['hidden']
    if not isinstance(hidden, (list, tuple)) or len(hidden) != 2:
        raise ValueError(f'mpcol: hidden={hidden!r}: expected two widths, e.g. hidden=400,256')
    for width in hidden:
        integer('mpcol', 'hidden', width, 1, 100_000)
    for name in ('pretrain_maps', 'adapt_maps', 'per_map', 'episodes'):
        integer('mpcol', name, o[name], 1, 100_000)
    # split over the known families: each needs at least one held-out map
    integer('mpcol', 'eval_maps', o['eval_maps'], len(known), 100_000)
    integer('mpcol', 'pretrain_steps', o['pretrain_steps'], 1, 10_000_000)
    check_training('mpcol', o, batch_max=1_000_000)
