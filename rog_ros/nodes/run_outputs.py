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
What a run leaves in its output directory, and the earlier run's results set aside.

Why: ``rog fleet --out runs/fleet`` run twice (the README's command is meant to be run
again) wrote the second run's results over the first one's only at its end. A second run that
crashed or was stopped before its server wrote anything left the first run's
``summary.json`` (``completed: true``), its model and its curves in place, as if they were
its own: a script, ``rog report`` and the user then read the earlier run. A fresh server run
(one that restored no checkpoint) therefore moves an earlier run's results to
``OUT/previous/`` before it trains: what is in ``OUT`` is always this run's, and the earlier
run's stay one generation (nothing is lost to a typo in ``--out``).
"""

from __future__ import annotations

import os

from rog_ros.metrics import PREVIOUS_RUN_DIR
from rog_ros.nodes.model_file import MODEL_FILE

RESULT_FILES = ('summary.json', 'timeseries.csv', 'events.csv', MODEL_FILE, 'report.md',
                'accuracy_vs_time.png', 'accuracy_vs_time_log.png',
                'accuracy_vs_iteration.png', 'time_composition.png', 'triggers.png',
                'time_to_target.png', 'membership.png')
"""Files of one run's results: the server's record and model, and ``rog report``'s."""
PREVIOUS = PREVIOUS_RUN_DIR
"""Sub-directory of the output directory that holds the earlier run's results."""


def earlier_results(out: str) -> list:
    """Return the names of the run results that ``out`` holds (``RESULT_FILES`` order)."""
    return [name for name in RESULT_FILES if os.path.isfile(os.path.join(out, name))]


def set_aside_earlier_results(out: str) -> list:
    """
    Move the results of an earlier run in ``out`` to ``out/previous``, replacing older ones.

    Returns the names moved (none when ``out`` holds no results). Files that are not a run's
    results (logs, keys, recordings, the user's own, in ``out`` or in ``out/previous``) stay
    where they are.
    """
    found = earlier_results(out)
    if not found:
        return []
    previous = os.path.join(out, PREVIOUS)
    os.makedirs(previous, exist_ok=True)
    for name in RESULT_FILES:         # the generation before: its results only, nothing else
        if os.path.isfile(os.path.join(previous, name)):
            os.unlink(os.path.join(previous, name))
    for name in found:
        os.replace(os.path.join(out, name), os.path.join(previous, name))
    return found
