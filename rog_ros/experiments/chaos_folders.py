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
A scenario's folder under ``--out``: fresh for every run, the run before kept one generation.

A second ``rog chaos`` into the same ``--out`` must neither reuse the first one's state files
and ledgers (its nodes would restore and append to them) nor lose its results: an earlier
folder is set aside as ``<scenario>.previous``. The link-outage scenario sets its first run
aside the same way (``<scenario>.first``) when it plans a second one.
"""

from __future__ import annotations

import os
import shutil

from rog_ros.nodes.output_lock import held_within, OutputInUse

PREVIOUS_SUFFIX = '.previous'
"""``OUT/<scenario>.previous``: the scenario's folder of the ``rog chaos`` before."""
FIRST_SUFFIX = '.first'
"""``OUT/link-outage.first``: the first run of a link-outage run that was planned again."""


def set_aside(path: str, aside: str) -> bool:
    """Move ``path`` to ``aside``, replacing what is there; False when there is no ``path``."""
    if not os.path.lexists(path):
        return False
    _remove(aside)
    os.replace(path, aside)
    return True


def _remove(path: str) -> None:
    """Remove the folder or file ``path`` (a link itself, never what it points to)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def fresh_scenario_dir(out: str, name: str) -> str:
    """
    Return scenario ``name``'s folder under ``out``, with nothing of an earlier run in it.

    A second ``rog chaos`` into the same ``--out`` reused the first one's folders: its nodes
    restored the earlier state files and appended to the earlier ledgers (a false failure,
    or a false ``lost``). An earlier folder is therefore moved to ``<name>.previous`` (its
    link-outage first run, ``<name>.first``, to ``<name>.previous.first``), replacing the
    generation before: the earlier results are kept, one generation, and never reused. A
    folder a live run still holds (its output lock) is neither moved nor removed:
    ``OutputInUse``, and the scenario fails.
    """
    run_dir = os.path.abspath(os.path.join(out, name))
    earlier = [p for p in (run_dir, run_dir + FIRST_SUFFIX) if os.path.lexists(p)]
    if earlier:
        previous = run_dir + PREVIOUS_SUFFIX
        for folder in earlier + [previous, previous + FIRST_SUFFIX]:
            # a fleet of an earlier run still going (its rog chaos killed, its nodes not)
            # would go on writing into a folder moved or removed under it
            held = held_within(folder)
            if held is not None:
                raise OutputInUse(f'{held[0]} is in use by a run still going ({held[1]}); '
                                  'stop it or wait until it ends, or give --out another '
                                  'folder')
        _remove(previous)          # one generation: none of the one before may stay beside it
        _remove(previous + FIRST_SUFFIX)
        set_aside(run_dir, previous)
        set_aside(run_dir + FIRST_SUFFIX, previous + FIRST_SUFFIX)
    return run_dir
