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

A checkpoint that keeps times of the monotonic clock (a push server's robots' last acks)
stamps them with :func:`mono_stamp`; :func:`mono_shift` puts them on the loading process's
monotonic clock: unchanged within one boot, moved by the time away across a reboot (whose
monotonic clock starts again near 0), or unknown where the wall clock stepped.
"""

from __future__ import annotations

import math
import re
import time

MAX_WALL_AWAY_S = 86400.0
"""Longest time away taken from the wall clock across a reboot; beyond it (or below 0) the
wall clock stepped between the two stamps, and the time away is unknown."""
_BOOT_ID = '/proc/sys/kernel/random/boot_id'
_BOOT_ID_FORM = re.compile(r'[0-9A-Za-z-]{0,64}')


def _wall() -> float:
    """Return ``time.time()`` (read here at each call: a test steps either)."""
    return time.time()


def _monotonic() -> float:
    """Return ``time.monotonic()`` (read here at each call: a test steps either)."""
    return time.monotonic()


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
    return {'wall_time': _wall(), 'boot_id': boot_id(), 'boot_s': boot_clock()}


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
    away = _wall() - wall
    if 0.0 <= away <= MAX_WALL_AWAY_S:
        return away, 'wall clock'
    return None, (f'the wall clock says {away:.0f} s: it stepped between the checkpoint and '
                  'now (NTP setting a clock that booted at 1970 or at an image date?)')


def mono_stamp() -> dict:
    """Return :func:`stamp` and the monotonic clock now (``mono_s``), for :func:`mono_shift`."""
    return dict(stamp(), mono_s=_monotonic())


def mono_shift(saved, stepped_away=None) -> tuple:
    """
    Return ``(seconds to add to a monotonic time of a checkpoint, how)`` or ``(None, why)``.

    ``saved`` is the :func:`mono_stamp` taken with the checkpoint. Its times, plus the
    shift, are times of this process's monotonic clock. One boot (both boot ids read and
    equal): 0, the clock went on. Another boot, or one that cannot be told (a boot id
    unreadable then or now: '' in the stamp, or no /proc here): the monotonic clock started
    again, so the shift takes each time to its age at the checkpoint plus the time away,
    from the wall clock (``time.time()`` now less at the stamp) when that lies in
    [0, MAX_WALL_AWAY_S]; across a known reboot, never less than this boot's age (the
    boot clock now: the checkpoint came before this boot), so an age is never understated.
    A wall clock that stepped (a difference below 0 or past the bound): ``None``, the
    ages unknown: the caller treats those times as old; or, given ``stepped_away``, the
    shift with that time away (the logs' times: 0, as the run's clock then goes on from
    the checkpoint without the downtime, ``ServerNode._resume_record``, so each log keeps
    its place in the run's record). ValueError naming the field for
    a stamp that is not one (a boot id not a string of at most 64 letters, digits and
    dashes; a time not a finite number); nothing is read from it then.
    """
    try:
        sid = saved['boot_id']
        wall, mono = float(saved['wall_time']), float(saved['mono_s'])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f'checkpoint clock stamp {saved!r:.120}: no wall_time, mono_s and '
                         f'boot_id ({err!r})') from None
    if not isinstance(sid, str) or not _BOOT_ID_FORM.fullmatch(sid):
        raise ValueError(f'checkpoint clock stamp boot_id {sid!r:.80}: not a boot id (at '
                         'most 64 letters, digits and dashes; empty where none was read)')
    if not (math.isfinite(wall) and math.isfinite(mono)):
        raise ValueError(f'checkpoint clock stamp wall_time {wall!r}, mono_s {mono!r}: '
                         'not finite')
    here = boot_id()
    if here and sid == here:
        return 0.0, 'same boot'
    away = _wall() - wall
    if not 0.0 <= away <= MAX_WALL_AWAY_S:
        why = (f'the wall clock says {away:.0f} s since the checkpoint, taken in '
               f'{"another" if here and sid else "an unknown"} boot: it stepped, so '
               'its monotonic times are of unknown age')
        if stepped_away is None:
            return None, why
        return _monotonic() - mono - float(stepped_away), why
    if here and sid:
        away = max(away, boot_clock())      # (this boot began after the checkpoint)
    return _monotonic() - mono - away, ('another boot' if here and sid else 'unknown boot')
