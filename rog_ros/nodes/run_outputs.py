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
wrote (``logs/rog_server.log``, ...) with the results (:func:`set_aside_unless_resuming`);
its server then finds nothing to move. ``rog robot --role server`` does the same for the
server robot, with the logs of its own nodes only, from its ``--logs`` folder (a worker robot
on the same machine may write its logs beside them). A server started alone keeps its logs
where its supervisor put them. Whenever ``previous/`` takes a run, the older run there goes,
its node logs with its results: ``previous/`` holds one run, not parts of two.

A worker robot has no output directory, only its nodes' logs (``./rog_robot_logs`` unless
``--logs``), which a rerun of ``rog robot --role worker`` started afresh: the log of the run
that went wrong was gone. A fresh worker robot run therefore moves its own nodes' earlier logs
to ``LOGS/previous/`` (:func:`set_aside_unless_worker_resumes`), replacing the older logs of
these nodes there as a server run replaces the older run, unless its node restores its state
file, and holds its logs (:class:`NodeLogLock`) first, as a server
robot holds its ``out``: a second robot of the same rank pointed at the same folder is
refused instead of moving the live log of the first. Its model file (``--model-out``,
``./rog_robot_model.pt``) is its result, as ``model.pt`` is the server's: it goes to
``LOGS/previous/`` with the logs, so that a rerun that ends before writing its own leaves no
earlier model in its place. Not by quite the same rule, since a model is worth more than a log
and a worker robot's ``previous/`` may be shared: the model is stored there under its rank's
name (``rog_worker_K.model.pt``, :func:`previous_model_name`: ranks sharing one ``--logs``
with models named alike in other folders keep each their own); an older model there is
replaced only by a newer model of the same rank (a rerun that failed before writing one moves
its logs, and the last good model stays); and a model that is this run's ``--init-model`` (it
goes on from its last model) is copied, not moved, so that its node still finds it.
"""

from __future__ import annotations

import os
import re
import sys

from rog_ros.atomic import copy_whole, fsync_dir, move_whole, remove_write_leftovers
from rog_ros.metrics import PREVIOUS_RUN_DIR
from rog_ros.nodes.model_file import MODEL_FILE
from rog_ros.nodes.output_lock import hold_lock_file, let_go_of_lock_file
from rog_ros.nodes.state_dir import resuming_line

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


def node_logs(folder: str, nodes=None) -> list:
    """
    Return the names of the node logs a fleet writes that ``folder`` holds (sorted).

    Only these move with a run: a file the user keeps beside them is not the fleet's to move.
    ``nodes`` (node names) narrows them to those nodes' logs: a server robot's supervisor
    wrote ``rog_server.log`` and ``netmon.log``, not the ``rog_worker_K.log`` that a worker
    robot on the same machine may be writing in the same folder.
    """
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    mine = None if nodes is None else {f'{node}.log' for node in nodes}
    return sorted(name for name in names if _NODE_LOG.fullmatch(name)
                  and (mine is None or name in mine)
                  and os.path.isfile(os.path.join(folder, name)))


def set_aside_earlier_results(out: str, logs=None, nodes=None) -> list:
    """
    Move the results of an earlier run in ``out`` to ``out/previous``, replacing older ones.

    Returns the names moved (none when ``out`` holds no results). The older run in
    ``out/previous`` goes, its results and its node logs (``previous/logs``), so that
    ``previous`` holds one run. Files that are not a run's results or node logs (keys,
    recordings, the user's own, in ``out`` or in ``out/previous``) stay where they are, and so
    do the earlier run's logs unless ``logs`` names the folder its supervisor wrote them to:
    then its node logs there (:func:`node_logs`, of ``nodes`` only when given) move to
    ``out/previous/logs`` with the results, named ``logs/NAME`` in the list.
    """
    found = earlier_results(out)
    if not found:
        return []
    previous = os.path.join(out, PREVIOUS)
    os.makedirs(previous, exist_ok=True)
    for name in RESULT_FILES:         # the generation before: its results only, nothing else
        if os.path.isfile(os.path.join(previous, name)):
            os.unlink(os.path.join(previous, name))
    old_logs = os.path.join(previous, LOG_DIR)
    for name in node_logs(old_logs):  # ... and its node logs, whoever sets this run aside
        os.unlink(os.path.join(old_logs, name))
    for name in found:
        os.replace(os.path.join(out, name), os.path.join(previous, name))
    _synced(previous, out)
    if logs is None:
        return found
    moving = node_logs(logs, nodes)
    if moving:
        os.makedirs(old_logs, exist_ok=True)
    for name in moving:     # (a robot's --logs may be on another file system)
        move_whole(os.path.join(logs, name), os.path.join(old_logs, name))
    if moving:
        _synced(old_logs, logs)
    return found + [f'{LOG_DIR}/{name}' for name in moving]


def _synced(*folders) -> None:
    """
    Sync the entries of ``folders`` (the folders renames went to, then from).

    A rename is durable only once its folders are synced: after a power cut on ext4 the
    earlier run's results could be back in ``out`` beside the new run's, or gone from both.
    """
    for folder in dict.fromkeys(os.path.abspath(f) for f in folders):
        fsync_dir(folder)


def set_aside_earlier_run(out: str, logs: str, nodes=None) -> str:
    """
    Set an earlier run in ``out`` aside, its node logs in ``logs`` too; return the line to say.

    '' when ``out`` holds no results. The line says where they went, and when ``previous/``
    held a run already, that this older run was replaced: a third run into one ``--out``
    removed it without a word.
    """
    previous = os.path.join(out, PREVIOUS)
    older = earlier_results(previous) or node_logs(os.path.join(previous, LOG_DIR))
    moved = set_aside_earlier_results(out, logs, nodes)
    if not moved:
        return ''
    what = 'its results and logs' if any(m.startswith(LOG_DIR + '/') for m in moved) \
        else 'its results'
    line = f'{out} held an earlier run; {what} moved to {previous}'
    return line + (' (the older run there is replaced)' if older else '')


def set_aside_unless_resuming(who: str, out: str, state_dir, logs: str, nodes=None):
    """
    Set an earlier run in ``out`` aside before a supervisor starts its nodes' logs afresh.

    Returns the ``resuming`` text for ``Supervisor.start`` ('' for a fresh run), or None when
    the earlier run could not be moved: starting would overwrite its logs. Each outcome is one
    line on stderr, after ``who`` (``rog fleet``, ``rog robot``). A run whose server restores
    its checkpoint from ``state_dir`` (:func:`rog_ros.nodes.state_dir.resumes`) moves nothing:
    its results and its logs go on. Why one function: the supervisors decided a resume each in
    its own way, from any state file, while the server resumes only from its checkpoint.
    """
    resuming = resuming_line(state_dir)
    if resuming:
        print(f'{who}: {resuming}; the logs go on', file=sys.stderr)
        return resuming
    try:
        said = set_aside_earlier_run(out, logs, nodes)
    except OSError as err:
        print(f'{who}: {out} holds an earlier run, which could not be moved to {PREVIOUS}/: '
              f'{err.strerror or err}', file=sys.stderr)
        return None
    if said:
        print(f'{who}: {said}', file=sys.stderr)
    return ''


def previous_model_name(rank: int) -> str:
    """Return the name a worker robot's model of rank ``rank`` has in ``LOGS/previous``."""
    return f'rog_worker_{int(rank)}.{MODEL_FILE}'


def init_model_file(init_model) -> str:
    """
    Return the file the node starts from for setting ``init_model`` ('' when none).

    A folder names its ``model.pt``, as the node resolves it
    (:func:`rog_ros.workloads.start_model.resolve_path`, which imports torch).
    """
    if not init_model:
        return ''
    path = os.fspath(init_model)
    return os.path.join(path, MODEL_FILE) if os.path.isdir(path) else path


def _same_file(path: str, other: str) -> bool:
    """Return whether ``path`` and ``other`` are one existing file (False if either is not)."""
    try:
        return bool(other) and os.path.samefile(path, other)
    except OSError:
        return False


def set_aside_node_logs(logs: str, nodes, model=None, model_as=None, keep_model=False) -> list:
    """
    Move the logs of ``nodes`` in ``logs`` to ``logs/previous``, replacing their older ones.

    Returns the names of the logs moved (sorted), then ``model`` when it went; [] when nothing
    did. The older logs of ``nodes`` in ``previous`` go whenever one of their logs moves; the
    logs of other nodes (another robot's, in a shared folder) and the user's files stay.
    ``model``: the path of the robot's model file, which goes to ``previous/`` as ``model_as``
    (default: its own name) when it exists (not one written into ``previous/`` itself),
    replacing the older model of that name there; copied instead of moved when
    ``keep_model`` (the run starts from it). An older model there stays when this run has
    none: it is the last model that run's rank left.
    """
    moving = node_logs(logs, nodes)
    previous = os.path.join(logs, PREVIOUS)
    if model and os.path.dirname(os.path.abspath(model)) == os.path.abspath(previous):
        model = None                  # (one written into previous/ itself: it stays there)
    here = bool(model) and os.path.isfile(model)
    if not moving and not here:
        return []
    if moving:
        for name in node_logs(previous, nodes):
            os.unlink(os.path.join(previous, name))
    os.makedirs(previous, exist_ok=True)
    for name in moving:
        os.replace(os.path.join(logs, name), os.path.join(previous, name))
    if moving:
        _synced(previous, logs)
    if not here:
        return moving
    target = os.path.join(previous, model_as or os.path.basename(model))
    remove_write_leftovers(previous, os.path.basename(target))    # (a copy killed midway's)
    if keep_model:                    # (a whole copy or none: the run starts from the model)
        copy_whole(model, target)
    else:     # (--model-out may be on another file system than --logs)
        move_whole(model, target)
        _synced(previous, os.path.dirname(os.path.abspath(model)))
    return moving + [model]


def set_aside_unless_worker_resumes(who: str, logs: str, state_dir, rank: int, nodes,
                                    model=None, init_model=None):
    """
    Set a worker robot's earlier logs and model aside before its run starts them afresh.

    Returns the ``resuming`` text for ``Supervisor.start`` ('' for a fresh run), or None when
    the earlier logs or model could not be set aside (starting would overwrite them). Each
    outcome that changes or keeps something is one line on stderr, after ``who``. ``model``
    (the file the worker writes its model to) goes to ``LOGS/previous`` with the logs, as a
    server run's ``model.pt`` goes with its results: a rerun that crashed before writing its
    own left the earlier run's model in place, as if it were its own, and a rerun that
    finished replaced it. There it is ``rog_worker_RANK.model.pt`` (:func:`previous_model_name`:
    ranks that share ``logs`` keep their own), replacing only an older model of this rank,
    and it is copied, not moved, when it is the file ``init_model`` names (the run goes on
    from it: :func:`init_model_file`). A worker whose node restores its own state file from
    ``state_dir`` (``resumes(state_dir, rank)``) sets nothing aside: its logs and model go on,
    as a resuming server's do.
    """
    resuming = resuming_line(state_dir, rank)
    if resuming:
        print(f'{who}: {resuming}; the logs go on', file=sys.stderr)
        return resuming
    previous = os.path.join(logs, PREVIOUS)
    name = previous_model_name(rank)
    keep = bool(model) and _same_file(model, init_model_file(init_model))
    older_logs = node_logs(previous, nodes)
    older_model = os.path.isfile(os.path.join(previous, name))
    try:
        moved = set_aside_node_logs(logs, nodes, model, name, keep)
    except OSError as err:
        what = 'the logs of an earlier run' + (f' (or {model}, its model)' if model else '')
        print(f'{who}: {logs} holds {what}, which could not be set aside in {PREVIOUS}/: '
              f'{err.strerror or err}', file=sys.stderr)
        return None
    with_model = bool(model) and model in moved
    logs_moved = moved[:-1] if with_model else moved
    how = (f'copied to {previous} as {name} (this run starts from it)' if keep
           else f'moved to {previous} as {name}')
    if logs_moved and with_model:
        said = (f"{logs} held an earlier run's logs ({', '.join(logs_moved)}), moved to "
                f'{previous}, and {model} its model, {how}')
    elif logs_moved:
        said = f"{logs} held an earlier run's logs ({', '.join(logs_moved)}); moved to {previous}"
    elif with_model:
        said = f"{model} is an earlier run's model; {how}"
    else:
        return ''
    replaced = (older_logs and logs_moved) or (older_model and with_model)
    print(f'{who}: {said}' + (' (the older ones there are replaced)' if replaced else ''),
          file=sys.stderr)
    return ''


class NodeLogLock:
    """
    Hold one node's log in a folder for this process: one writer per log.

    Why: two ``rog robot --role worker --rank K`` pointed at one ``--logs`` (a second
    terminal, a script) wrote one log file, and the second moved the first's live log to
    ``previous/``. The lock is an advisory ``flock`` on ``LOGS/.NODE.lock``, as
    :mod:`rog_ros.nodes.output_lock` holds an output directory: the kernel drops it when the
    holder ends, however it ends, so nothing stale is left to clean up.
    """

    def __init__(self, fd):
        """Keep the locked file descriptor (None: a hold of no file, as ``fcntl`` is missing)."""
        self.fd = fd

    @classmethod
    def take(cls, logs: str, node: str, command: str) -> 'NodeLogLock':
        """
        Hold ``logs/NODE.log`` for ``command``; raise OSError (one line) if a run holds it.

        ``logs`` is created if missing. A file system without ``flock`` is held by file
        (:func:`rog_ros.nodes.output_lock.hold_by_file`).
        """
        os.makedirs(logs, exist_ok=True)
        fd, holder = hold_lock_file(os.path.join(logs, f'.{node}.lock'), command)
        if holder is not None:
            raise OSError(f'{os.path.join(logs, node)}.log is being written by another run '
                          f'({holder}); give this one another --logs, or wait until that one '
                          'ends')
        return cls(fd)

    def release(self) -> None:
        """Let the log go (idempotent): unlocked, so that no forked child keeps it."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            let_go_of_lock_file(fd)
