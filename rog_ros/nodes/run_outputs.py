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

``rog fleet`` writes its nodes' logs to ``OUT/logs`` and starts them afresh, before its server
could move anything: the earlier run's logs (where the README sends a user to see who was
suspended) were lost while its results were kept. The fleet, which holds ``OUT`` for the whole
run, therefore sets the earlier run aside itself before its nodes start, the node logs it
wrote (``logs/rog_server.log``, ...) with the results (:func:`set_aside_earlier_run`); its
server then finds nothing to move. ``rog robot --role server`` does the same for the server
robot. A server started alone keeps its logs where its supervisor put them.
"""

from __future__ import annotations

import os
import re

from rog_ros.metrics import PREVIOUS_RUN_DIR
from rog_ros.nodes.model_file import MODEL_FILE

RESULT_FILES = ('summary.json', 'timeseries.csv', 'events.csv', MODEL_FILE, 'report.md',
                'accuracy_vs_time.png', 'accuracy_vs_time_log.png',
                'accuracy_vs_iteration.png', 'time_composition.png', 'triggers.png',
                'time_to_target.png', 'membership.png')
"""Files of one run's results: the server's record and model, and ``rog report``'s."""
PREVIOUS = PREVIOUS_RUN_DIR
"""Sub-directory of the output directory that holds the earlier run's results."""
LOG_DIR = 'logs'
"""Sub-directory of the output directory where ``rog fleet`` writes its nodes' logs."""
_NODE_LOG = re.compile(r'(rog_server|rog_worker_[0-9]+|netmon|netmon_[0-9]+)\.log')


def earlier_results(out: str) -> list:
    """Return the names of the run results that ``out`` holds (``RESULT_FILES`` order)."""
    return [name for name in RESULT_FILES if os.path.isfile(os.path.join(out, name))]


def node_logs(folder: str) -> list:
    """
    Return the names of the node logs a fleet writes that ``folder`` holds (sorted).

    Only these move with a run: a file the user keeps beside them is not the fleet's to move.
    """
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(name for name in names if _NODE_LOG.fullmatch(name)
                  and os.path.isfile(os.path.join(folder, name)))


def set_aside_earlier_results(out: str, logs: bool = False) -> list:
    """
    Move the results of an earlier run in ``out`` to ``out/previous``, replacing older ones.

    Returns the names moved (none when ``out`` holds no results). Files that are not a run's
    results (keys, recordings, the user's own, in ``out`` or in ``out/previous``) stay where
    they are, and so do the logs unless ``logs``: then the node logs the fleet wrote in
    ``out/logs`` (:func:`node_logs`) move to ``out/previous/logs`` with the results, named
    ``logs/NAME`` in the list, replacing the older run's node logs there.
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
    if not logs:
        return found
    old_logs, new_logs = os.path.join(previous, LOG_DIR), os.path.join(out, LOG_DIR)
    for name in node_logs(old_logs):
        os.unlink(os.path.join(old_logs, name))
    moving = node_logs(new_logs)
    if moving:
        os.makedirs(old_logs, exist_ok=True)
    for name in moving:
        os.replace(os.path.join(new_logs, name), os.path.join(old_logs, name))
    return found + [f'{LOG_DIR}/{name}' for name in moving]


def set_aside_earlier_run(out: str) -> str:
    """
    Set an earlier fleet run in ``out`` aside, its node logs too; return the line to say.

    '' when ``out`` holds no results. The line says where they went, and when ``previous/``
    held a run already, that this older run was replaced: a third run into one ``--out``
    removed it without a word.
    """
    previous = os.path.join(out, PREVIOUS)
    older = earlier_results(previous) or node_logs(os.path.join(previous, LOG_DIR))
    moved = set_aside_earlier_results(out, logs=True)
    if not moved:
        return ''
    what = 'its results and logs' if any(m.startswith(LOG_DIR + '/') for m in moved) \
        else 'its results'
    line = f'{out} held an earlier run; {what} moved to {previous}'
    return line + (' (the older run there is replaced)' if older else '')
