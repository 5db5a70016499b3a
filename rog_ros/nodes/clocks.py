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
Clocks that survive what robots' clocks do: NTP steps, flat RTC batteries, suspend.

Durations inside one run use ``time.monotonic()`` (no step moves it). A duration that spans a
process restart cannot: the monotonic clock's origin is per boot. This module measures such
a duration (how long a server was away between its checkpoint and its restart) on the boot
clock when both ends are in one boot (``CLOCK_BOOTTIME``: counts suspend, no NTP step moves
it) and by the wall clock only across a reboot, where a step the wall clock took (a Jetson
boots at 1970 or at its image's build date, then NTP sets it) shows as a negative or absurd
difference and is not counted (docs/faults.md, "Clocks").
"""

from __future__ import annotations

import time

MAX_WALL_AWAY_S = 86400.0
"""Longest time away taken from the wall clock across a reboot; beyond it (or below 0) the
wall clock stepped between the two stamps, and the time away is unknown."""
_BOOT_ID = '/proc/sys/kernel/random/boot_id'


def boot_id() -> str:
    """Return this boot's id (Linux), '' where there is none."""
    try:
        with open(_BOOT_ID, encoding='ascii') as f:
            return f.read().strip()
    except OSError:
        return ''


def boot_clock() -> float:
    """Return seconds on the boot clock: CLOCK_BOOTTIME where there is one, else monotonic."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):
        return time.monotonic()


def stamp() -> dict:
    """Return a stamp of now, for :func:`seconds_since` in a later process."""
    return {'wall_time': time.time(), 'boot_id': boot_id(), 'boot_s': boot_clock()}


def seconds_since(saved: dict) -> tuple:
    """
    Return ``(seconds since the stamp saved, how it was measured)``, or ``(None, why not)``.

    ``saved`` is a :func:`stamp` (or a dict with ``wall_time`` only, as older checkpoints
    have). One boot: the boot clock, exact whatever the wall clock did (a ``boot_s`` that no
    reading of it can be, below 0, past now or not a number, is taken as another boot's).
    Across a reboot: the wall clock, when the difference lies in [0, MAX_WALL_AWAY_S].
    Raises KeyError, TypeError or ValueError for a stamp that is not one.
    """
    wall = float(saved['wall_time'])
    here, now = boot_id(), boot_clock()
    if here and saved.get('boot_id') == here and saved.get('boot_s') is not None:
        then = float(saved['boot_s'])
        if 0.0 <= then <= now:      # else damaged: no reading of this boot's clock
            return now - then, 'boot clock'
    away = time.time() - wall
    if 0.0 <= away <= MAX_WALL_AWAY_S:
        return away, 'wall clock'
    return None, (f'the wall clock says {away:.0f} s: it stepped between the checkpoint and '
                  'now (NTP setting a clock that booted at 1970 or at an image date?)')
