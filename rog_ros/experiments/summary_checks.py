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
The checks of a run summary's figures that the reports compute with.

A ``summary.json`` edited by hand (or not written by rog) can hold a string where a time
belongs, ``NaN``, ``1e400`` workers or a count below 0; averaged, such a value failed far from
its cause ('could not convert string to float'). Each field the reports read has its check
here, and a summary that fails one is refused in one line naming the file, the field, its
value and what it should be.
"""

from __future__ import annotations

import math

from rog_ros.experiments.seed_stats import KEYS, MEMBERSHIP_KEYS


def expected_number(value) -> str | None:
    """Return what a figure should be when ``value`` is not a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 'a number'
    try:
        return None if math.isfinite(float(value)) else 'a finite number'
    except OverflowError:             # an integer of hundreds of digits
        return 'a finite number'


def _count(value) -> str | None:
    """Return what a per-run count should be when ``value`` is not one, else None."""
    if expected_number(value) == 'a number':
        return 'a number'
    ok = not expected_number(value) and value >= 0 and float(value).is_integer()
    return None if ok else 'an integer >= 0'


def _fleet_size(value) -> str | None:
    """Return what ``workers`` should be when ``value`` is not a fleet size, else None."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1024
    return None if ok else 'an integer from 1 to 1024'


def _mapping(value) -> str | None:
    """Return 'a JSON object' when ``value`` is not one, else None."""
    return None if isinstance(value, dict) else 'a JSON object'


def _sequence(value) -> str | None:
    """Return 'a JSON list' when ``value`` is not one, else None."""
    return None if isinstance(value, list) else 'a JSON list'


SUMMARY_FIELDS = ((KEYS + ('target_accuracy',), expected_number), (MEMBERSHIP_KEYS, _count),
                  (('workers',), _fleet_size),
                  (('rejects_by_reason', 'started_apart', 'start_model'), _mapping),
                  (('duplicate_ranks',), _sequence))
"""The fields of a run's summary that the report computes with, each with its check."""


def check_figures(path: str, summary: dict) -> None:
    """Refuse a summary whose fields the report reads are of the wrong kind, naming them."""
    for keys, check in SUMMARY_FIELDS:
        for key in keys:
            value = summary.get(key)
            expected = None if value is None else check(value)
            if expected:
                shown = repr(value)
                shown = shown if len(shown) <= 60 else shown[:57] + '...'
                raise ValueError(f'{path}: {key} is {shown}, not {expected} (a summary.json '
                                 'edited by hand, or not written by rog?)')
