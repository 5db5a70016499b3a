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
A worker's emulated link: the bandwidth trace it follows and the token bucket that enforces it.

Every node that shapes or reports a link needs these (server, workers, netmon); netmon needs
nothing else of a training node. Kept apart from ``nodes.assembly`` (which builds the model and
the policy) so that netmon does not import torch: on a robot that saves the memory and the
seconds of a torch import in a process that never trains.
"""

from __future__ import annotations

from dataclasses import dataclass
import os
import time

from rog_ros.net.shaper import TokenBucketShaper
from rog_ros.net.trace_spec import entry_for, parse, recordings, resolve, source_for
from rog_ros.net.traces import generate, load_entry, PRESETS, Trace

PRESET_DURATION_S = 600.0   # generated preset traces loop after this long


@dataclass
class EmulatedLink:
    """The trace one worker's link follows, read at ``t + offset_s`` (t: seconds since epoch)."""

    trace: Trace
    offset_s: float = 0.0
    name: str = ''

    def rate_mbps(self, t_s: float) -> float:
        """Rate the emulator enforces at ``t_s`` seconds after the epoch."""
        return float(self.trace.rate_at(t_s + self.offset_s))


def link_for(spec: str, rank: int, n_workers: int, seed: int = 0,
             scale: float = 1.0) -> EmulatedLink | None:
    """
    Return the emulated link of worker ``rank``: None, a preset or a file.

    ``spec`` may list one entry per worker, and name one robot or rate of a ROS 2 bag
    (``rog_ros.net.trace_spec``: worker r follows entry r mod k, of a bag of several robots
    its robot of rank r), resolved as the simulator resolves it. Presets are generated per
    worker (seed ``1000 * seed + rank``, the simulator's) so robots fluctuate independently,
    and ``outages`` takes one robot out at a time as in the simulator; a file is read with a
    per-worker offset of ``rank / N`` of its period for the same reason. Robots of one
    recording (two or more robots of a bag) replay it in step, as in the simulator: on the
    bag's clock, all from the offset of the lowest rank among them (``recordings``; 0 for a
    bag that has a robot for every worker), so outages they had together they have together.
    """
    if spec in (None, '', 'none'):
        return None
    entry = source_for(spec, rank)
    if entry in PRESETS:
        trace = generate(entry, PRESET_DURATION_S, seed=1000 * seed + rank, robot=rank,
                         fleet=max(n_workers, rank + 1))
        offset = 0.0
    elif os.path.isfile(parse(entry).source):
        entry = resolve(entry, rank)
        trace, leader = _in_step(spec, entry, rank, n_workers)
        offset = leader * trace.end_s / max(n_workers, 1)
    else:
        raise ValueError(f'--trace {entry!r} is neither a preset ({", ".join(PRESETS)}) nor a '
                         f'file')
    if scale != 1.0:
        trace = trace.scaled(scale)
    return EmulatedLink(trace, offset, entry)


def _in_step(spec: str, entry: str, rank: int, n_workers: int) -> tuple:
    """
    Return ``(trace, leader)`` of worker ``rank``'s file ``entry``: its rank's offset rule.

    ``leader`` is ``rank`` unless the worker is one of several robots of one recording
    (``recordings``): then the lowest rank of its copy of the recording, as the simulator's
    ``_replay_plan`` has it. A bag's robot is read on the bag's clock (``load_entry``), the
    bag in blocks (a bag of gigabytes, ``ros2 bag record -a``, is not held in memory),
    hashed once per process while its file stays as it was and parsed once per bag bytes
    (``ros_bag``'s caches: a server builds every rank's link, each resolving every rank).
    """
    entries = [entry_for(spec, r) for r in range(max(n_workers, rank + 1))]
    return load_entry(entry), recordings(entries)[rank]


def epoch_to_monotonic(epoch: float | None) -> float:
    """Return the monotonic-clock reading at wall time ``epoch`` (now if None)."""
    mono = time.monotonic()
    return mono if epoch is None else mono - (time.time() - float(epoch))


def shaper_for(link: EmulatedLink | None, epoch_mono: float, burst_bytes: int):
    """Return a token bucket on the monotonic clock whose trace time 0 is ``epoch_mono``."""
    if link is None:
        return None
    now = time.monotonic()
    return TokenBucketShaper(link.trace, burst_bytes, start_s=now,
                             time_offset_s=link.offset_s - epoch_mono)
