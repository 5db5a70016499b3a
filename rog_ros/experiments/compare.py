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
``rog compare``: several systems x seeds on one workload and trace, with a report.

Each (system, seed) run is a ``simulate`` call writing its own ``summary.json`` and
``timeseries.csv`` under ``DIR/runs/<system>-seed<k>/``. The comparison writes
``DIR/summary.json`` (per system: mean, standard deviation, median and interquartile range over
seeds, and how many seeds reached the target), ``DIR/report.md`` and PNG plots.
A finished run in DIR is reused, so an interrupted comparison resumes; one made with other
settings (another trace, fleet size, budget, workload options, starting weights or
evaluation count: a rerun into the same DIR) or by an older simulator (``RUN_VERSION``) is run
again, and the comparison says so. A caller running several comparisons (``rog reproduce``)
names the others' directories in ``reuse_from``: a run they hold of the identical
configuration is copied, not run again.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict
import json
import math
import os
import sys
import time

from rog_ros.atomic import copy_whole, remove_write_leftovers
from rog_ros.children import run_in_processes
from rog_ros.experiments.comparison_folder import comparison_meta, run_dir
from rog_ros.experiments.comparison_report import write_comparison
from rog_ros.metrics import atomic_write
from rog_ros.nodes.output_lock import LOCK_FILE
from rog_ros.sim import systems
from rog_ros.sim.simulator import (config_workload, DEFAULT_EVALUATIONS, iteration_budget,
                                   option_tags, SimConfig, simulate, trace_digest,
                                   trace_offsets)
from rog_ros.workloads.base import checkpoint_source


DEFAULT_SEEDS = (0, 1, 2, 3, 4)
"""Seeds of a default ``rog compare``: five, so that a median and an interquartile range mean
something (outdoor traces hold a rate for 10-90 s, and one unlucky alignment moves a mean)."""


RUN_VERSION = 2
"""
Version of the numbers a comparison's run records, written to its summary as ``run_version``.

A stored run of another version is run again, not reused: its numbers would not be this
simulator's for the same configuration. 2: bytes are the server engine's counts (commit
01bc429: 3-13 % above the earlier counts, which were the engines' rate samples' and could
leave a transfer's first chunk out; times and accuracies identical), so a resumed comparison
would mix two byte counts in its MB column. A run with no ``run_version`` counts as 1: that
holds every run made before the field was written, including the few made after 01bc429,
which cannot be told apart. Raise it, and say why here, when a change alters what a run of the
same configuration records.
"""


class _Workload:
    """
    The workload a comparison's runs train, built when first asked for, once per comparison.

    Reuse needs it only when a finished run is there: for its budget without ``--iterations``
    (the workload's own) and for its starting model's fingerprint, which must be this
    workload's (a user's builder or a checkpoint changed under the same name starts elsewhere).
    """

    def __init__(self, cfg: SimConfig):
        """Remember ``cfg``: its workload, workload options and starting weights."""
        self._cfg = cfg
        self._built = {}

    def get(self):
        """Return the workload, or None when it cannot be built (its runs then say why)."""
        if 'wl' not in self._built:
            try:
                self._built['wl'] = config_workload(self._cfg)
            except Exception:  # noqa: B902 - a run that cannot build it is redone and says why
                self._built['wl'] = None
        return self._built['wl']

    def data_fingerprint(self) -> str | None:
        """Return the hash of the workload's data (None: cannot be built, or not arrays)."""
        wl = self.get()
        return None if wl is None else wl.data_fingerprint()

    def start_fingerprint(self) -> str | None:
        """Return the fingerprint of the workload's starting model (None: cannot be built)."""
        if 'fingerprint' not in self._built:
            from rog_ros.workloads.start_model import fingerprint
            wl = self.get()
            self._built['fingerprint'] = None if wl is None else fingerprint(wl.make_model())
        return self._built['fingerprint']


def _stored_summary(d: str) -> dict | None:
    """Return the summary of the run in ``d`` (None: none, unreadable or not an object)."""
    try:
        with open(os.path.join(d, 'summary.json')) as f:
            s = json.load(f)
    except (OSError, ValueError):
        return None
    return s if isinstance(s, dict) else None


def _other_settings(d: str, cfg: SimConfig, start_fingerprint: str | None = None,
                    workload: _Workload | None = None, summary: dict | None = None) -> str | None:
    """
    Return None if run directory ``d`` holds a finished run of ``cfg``, else why not.

    '' when there is none or it failed (run it); a short phrase when the run there was made
    with other settings, which a comparison must not mix in: another trace (or the same trace
    file with other contents), fleet size, budget (without ``cfg.iterations``: the workload's
    own), workload options, starting weights, data (``data_fingerprint``, when recorded) or
    evaluation count (its time to target would not be comparable; a summary without the
    count is from the default 24).
    ``start_fingerprint``: the fingerprint of ``cfg``'s starting model when the caller has it
    (None: ``workload``'s, worked out only if a run's start is to be checked). ``workload``:
    ``cfg``'s, shared by the runs of one comparison so that it is built at most once (default:
    built here when needed). ``summary``: ``d``'s, when the caller read it already.
    """
    s = summary if summary is not None else _stored_summary(d)
    if s is None or s.get('error'):
        return ''
    workload = workload or _Workload(cfg)
    wl = None if cfg.iterations else workload.get()
    if not cfg.iterations and wl is None:
        return ''       # its budget cannot be told: run it again, and the run says why
    want = iteration_budget(cfg, wl)     # the budget a run of cfg would be given
    start = s.get('start_model') or {}
    evaluations = s.get('evaluations', DEFAULT_EVALUATIONS)
    # the budget the run was given (a summary before it was recorded: what the robots
    # computed on average, fewer than the budget when a robot skipped ahead after an outage)
    budget = s.get('iteration_budget', s.get('iterations'))
    checks = [   # (the same?, what the run there was made with)
        (s.get('trace', cfg.trace) == cfg.trace, f'trace {s.get("trace")}'),
        (s.get('trace', cfg.trace) != cfg.trace or _same_trace_files(s, cfg.trace),
         f'trace {s.get("trace")} as it was before its file changed'),
        (s.get('trace', cfg.trace) != cfg.trace or s.get('workers', cfg.workers) != cfg.workers
         or _same_offsets(s, cfg),
         f'trace {s.get("trace")} replayed from other offsets (robots of one recording '
         'replay in step since 2026-12-06)'),
        (s.get('workers', cfg.workers) == cfg.workers, f'{s.get("workers")} workers'),
        (budget == want, f'{budget} iterations'),
        ((s.get('workload_options') or {}) == dict(cfg.workload_options or {}),
         f'workload options {s.get("workload_options") or {}}'),
        (_same_start(start, cfg, start_fingerprint, workload),
         f'weights from {start.get("source")}'),
        # (a run before it was recorded is taken as it is; other data under equal options
        # come from a user's builder reading files that changed)
        (s.get('data_fingerprint') is None
         or s.get('data_fingerprint') == workload.data_fingerprint(),
         'other data (its data_fingerprint differs)'),
        (int(evaluations) == int(cfg.evaluations), f'{evaluations} evaluations'),
        (_same_option_tags(s, cfg.system), 'its #tags ignored (made before they applied)'),
    ]
    wrong = [why for ok, why in checks if not ok]
    return ', '.join(wrong) if wrong else None


def _not_reusable(d: str, cfg: SimConfig, workload: _Workload | None = None) -> str | None:
    """
    Return None if run directory ``d`` holds a finished run of ``cfg`` to reuse, else why not.

    The reuse check of a comparison: the settings ``_other_settings`` compares, a run of this
    ``RUN_VERSION``, and every other field of its recorded ``run_config`` equal to ``cfg``'s
    (policy overrides, latency, learning rate...: a rerun into the same DIR with any of them
    changed runs again) ('' when there is no finished run: run it).
    """
    return _reuse_check(d, cfg, workload)[0]


def _reuse_check(d: str, cfg: SimConfig, workload: _Workload | None = None) -> tuple:
    """Return ``(_not_reusable's answer, the summary it read)``: ``d``'s summary read once."""
    summary = _stored_summary(d)
    if summary is None:
        return '', None          # none (or unreadable): run it, without a second look
    why = _other_settings(d, cfg, workload=workload, summary=summary)
    if why is not None:
        return why, summary
    return _other_run(summary, cfg), summary


def _other_run(summary: dict, cfg: SimConfig) -> str | None:
    """Return why a finished run of ``cfg``'s settings is still another run (None: not)."""
    version = summary.get('run_version', 1)
    if version != RUN_VERSION:
        return (f'an older rog, run version {version} not {RUN_VERSION}: its byte counts were '
                "not the server engine's")
    recorded, wanted = summary.get('run_config') or {}, run_config(cfg)
    other = sorted(k for k in wanted.keys() - _CHECKED_APART
                   if recorded.get(k, wanted[k]) != wanted[k])
    if other:
        return ', '.join(f'{k} {recorded[k]!r}' for k in other)
    return None


_CHECKED_APART = frozenset({'trace', 'iterations', 'init_model', 'workers', 'evaluations',
                            'workload_options'})
"""
Configuration fields ``_other_settings`` checks on what they mean, not as recorded.

A trace file's contents, the budget (None: the workload's), the starting weights' fingerprint
(the same weights under another path are the same start) and so on; every other field of a
recorded ``run_config`` must equal the new run's for the run to be reused.
"""


def run_config(cfg: SimConfig) -> dict:
    """Return every field of ``cfg`` as JSON data: a run's identity, as its summary records it."""
    return json.loads(json.dumps(asdict(cfg), sort_keys=True, default=str))


def _same_run(d: str, cfg: SimConfig, workload: _Workload) -> bool:
    """
    Tell whether run directory ``d`` (another comparison's) holds a run to copy for ``cfg``.

    It must pass this comparison's own reuse check and have recorded a ``run_config`` equal to
    ``cfg``'s in every field (system spec, policy overrides, seed, trace, budget, label...):
    a run whose configuration differs in any way is not the same run.
    """
    why, summary = _reuse_check(d, cfg, workload)
    return why is None and summary.get('run_config') == run_config(cfg)


def _clear_run(d: str) -> None:
    """
    Remove the files of an earlier run in ``d`` before another run's are written there.

    Its summary goes first, then every other file (a ``report.md``, a plot or an
    ``events.csv`` of a run of other settings would stay beside the new run's data), so that
    a process killed in between leaves no finished run (a run is finished when its summary
    says so). Folders (``previous/``) and the lock of a run in progress (``output_lock``) are
    left alone.
    """
    os.makedirs(d, exist_ok=True)
    summary = os.path.join(d, 'summary.json')
    if os.path.exists(summary):
        os.remove(summary)
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        if name != LOCK_FILE and (os.path.isfile(path) or os.path.islink(path)):
            os.remove(path)


def _copy_run(src: str, dst: str) -> None:
    """
    Copy the finished run in ``src`` into ``dst`` (cleared first), its ``summary.json`` last.

    A copy cut short leaves no finished run behind: the next call copies it again. Each file
    is copied whole or not at all (:func:`rog_ros.atomic.copy_whole`); hidden files (the
    temporaries of writes going on there or killed, a lock file) are not copied.
    """
    _clear_run(dst)
    names = sorted(n for n in os.listdir(src) if n != 'summary.json' and not n.startswith('.')
                   and os.path.isfile(os.path.join(src, n)))
    for name in names + ['summary.json']:
        copy_whole(os.path.join(src, name), os.path.join(dst, name))


def _remove_leftovers(d: str) -> None:
    """
    Remove what writes into run folder ``d`` that a kill cut short left there.

    The temporaries of atomic writes no live process writes (a run's files, a copy's:
    :func:`rog_ros.atomic.remove_write_leftovers`, which keeps a live writer's, another
    ``rog compare``'s included), and the ``.NAME.part`` files copies made before 2026-12-07
    (``shutil.copy2`` then a rename): a kill left them beside the run for ever. Those are
    only removed with the run's ``summary.json`` there and newer (the copy they belong to
    ended, or was cut short by a kill).
    """
    if not os.path.isdir(d):
        return
    remove_write_leftovers(d)
    summary = os.path.join(d, 'summary.json')
    for name in os.listdir(d):
        path = os.path.join(d, name)
        if not (name.startswith('.') and name.endswith('.part')) or not os.path.isfile(path):
            continue
        with contextlib.suppress(OSError):
            if os.path.getmtime(summary) >= os.path.getmtime(path):
                os.unlink(path)


def _same_trace_files(summary: dict, spec: str) -> bool:
    """
    Tell whether the trace files ``spec`` names hold what they held for a run's ``summary``.

    Only a run that recorded a ``trace_digest`` can be told: a summary from before it was
    recorded is reused as it was, and presets and generator specs have no file to compare.
    """
    recorded = summary.get('trace_digest')
    if not recorded:
        return True          # made before digests were recorded: reused as it always was
    now = trace_digest(spec)
    return now is None or now == recorded      # None: presets only, or the file is gone


def _same_offsets(summary: dict, cfg: SimConfig) -> bool:
    """
    Tell whether a run's robots started their trace files where a run of ``cfg`` would.

    The files' bytes can be the same while the placement changed: robots of one recording
    (a bag's) replay in step since 2026-12-06, and a run made before that has each robot at
    its own offset. Only a run that recorded ``trace_offsets_s`` can be told (one made before
    is reused as it was); a run of presets only recorded None. A trace file gone since (or one
    that cannot be read now) cannot be told either: reused, as ``_same_trace_files`` has it.
    """
    recorded = summary.get('trace_offsets_s')
    if recorded is None:
        return True
    try:
        now = trace_offsets(cfg.trace, cfg.workers, cfg.seed)
    except (OSError, ValueError):
        return True     # a file is gone or unreadable now: _same_trace_files' answer
    if now is None or len(now) != len(recorded):
        return now is None      # the files are gone (_same_trace_files' answer) or other n
    return all((a is None) == (b is None) and (a is None or math.isclose(a, b, abs_tol=1e-6))
               for a, b in zip(recorded, now))


def _same_start(start: dict, cfg: SimConfig, start_fingerprint: str | None,
                workload: _Workload) -> bool:
    """
    Tell whether a run's recorded ``start_model`` is the start ``cfg`` asks for.

    Both sides are the fingerprint of the starting model as loaded (an ``init_model`` file's
    weights in the model's order and dtypes, not the file's bytes), compared whenever the run
    recorded one: a user's builder or a checkpoint that changed under the same name records
    the same source. A run from the workload's checkpoint records the registry name asked for.
    Engine runs of an alias (chaos, glyphs-lenet5) made before recorded the name of the
    workload its builder makes (toy, glyphs) instead: such a run is the same start only if its
    model's fingerprint is this workload's starting model's, since a run of that other
    workload records the same.
    """
    if not start:
        return True

    def same_model():
        """Tell whether the run's starting model is ``cfg``'s (built here at most once)."""
        want = start_fingerprint or workload.start_fingerprint()
        return want is not None and start['fingerprint'] == want
    if cfg.init_model:
        return bool(start.get('fingerprint')) and same_model()
    if start.get('source') != checkpoint_source(cfg.workload):
        wl = workload.get() if start.get('fingerprint') else None
        if wl is None or start.get('source') != wl.describe_start():
            return False
    # a reference system's run records no fingerprint of a checkpoint start: its source tells
    return not start.get('fingerprint') or same_model()


def _same_option_tags(summary: dict, spec: str) -> bool:
    """
    Tell whether a reference system's run applied the ``#field=value`` tags of ``spec``.

    Runs of AdaComp, GSP, AET and FLEET made before the runners applied their tags ran with
    the defaults under the tagged label; their summaries record no ``option_tags``. Rog's
    engines always applied theirs.
    """
    if systems.lookup(spec) is None:
        return True
    return summary.get('option_tags', []) == option_tags(spec)


def _run_one(cfg: SimConfig, out_dir: str) -> dict:
    """
    Simulate one configuration and write its files (runs in a worker process).

    A run that raises is a failed run, not a failed comparison: its summary says why. A run
    records ``RUN_VERSION`` and its ``run_config``, which reuse and copies check. A stale
    run of other settings in ``out_dir`` stays until this one has finished, then its files
    give way to this run's (``_clear_run``).
    """
    try:
        rec = simulate(cfg)
        rec.extra['run_version'] = RUN_VERSION
        rec.extra['run_config'] = run_config(cfg)
        _clear_run(out_dir)
        return rec.write(out_dir)
    except Exception as err:  # noqa: B902 - any failure of one run is reported, not raised
        return _failed_run(cfg, out_dir, err)


def _failed_run(cfg: SimConfig, out_dir: str, err: Exception) -> dict:
    """Write and return the summary of a run that failed with ``err`` (or whose process died)."""
    summary = {'system': cfg.label or cfg.system, 'seed': cfg.seed,
               'error': f'{type(err).__name__}: {" ".join(str(err).split())}'}
    _clear_run(out_dir)
    atomic_write(os.path.join(out_dir, 'summary.json'), json.dumps(summary, indent=2) + '\n')
    return summary


def compare(workload: str, trace: str, systems: list[str], workers: int, seeds: list[int],
            out: str, iterations: int | None = None, overrides: dict | None = None,
            labels: dict | None = None, quiet: bool = False, title: str | None = None,
            jobs_parallel: int | None = None, sim_options: dict | None = None,
            workload_options: dict | None = None, reuse_from: list | None = None,
            prefix: str = 'rog compare') -> dict:
    """
    Run every system x seed (resuming finished runs) and write the report.

    ``sim_options`` sets further SimConfig fields of every run (e.g. ``evaluations``);
    ``workload_options`` is passed to the workload (e.g. the EACOL model, surrogate compute).
    ``reuse_from``: other comparisons' directories; a run to run here whose configuration is
    identical to a finished run's there (``_same_run``) is copied into ``out`` instead.
    ``prefix``: what the progress bar and the messages on stderr are labelled with.
    """
    os.makedirs(out, exist_ok=True)
    remove_write_leftovers(out)   # (killed report writes: a reproduction's are in no --out)
    labels = labels or {}
    overrides = overrides or {}
    others = [o for o in (reuse_from or ()) if os.path.abspath(o) != os.path.abspath(out)]
    jobs = [(s, seed) for s in systems for seed in seeds]
    t_start = time.monotonic()
    todo, stale, copied = [], [], []
    replaced = 0      # of the stale runs, those a copy replaced
    built = None      # the runs' workload, shared so that reuse builds it at most once
    for system, seed in jobs:
        label = labels.get(system, system)
        d = run_dir(out, label, seed)
        _remove_leftovers(d)
        cfg = SimConfig(workload=workload, system=system, workers=workers,
                        workload_options=dict(workload_options or {}),
                        trace=trace, seed=seed, iterations=iterations, label=label,
                        policy_overrides=overrides.get(system, {}), **(sim_options or {}))
        built = built or _Workload(cfg)
        why = _not_reusable(d, cfg, workload=built)
        if why is None:
            continue
        if why:             # a run of other settings there, replaced by a rerun or a copy
            stale.append(why)
        same = [o for o in others if _same_run(run_dir(o, label, seed), cfg, built)]
        if same:
            _copy_run(run_dir(same[0], label, seed), d)
            copied.append(same[0])
            if why:
                replaced += 1
            continue
        todo.append(cfg)
    if stale and not quiet:
        again = ('running them again' if not replaced else 'replacing them with copies'
                 if replaced == len(stale) else
                 f'replacing them ({replaced} with copies, {len(stale) - replaced} run again)')
        print(f'{prefix}: {len(stale)} run(s) in {os.path.join(out, "runs")} were made with '
              f'other settings ({stale[0]}): {again}', file=sys.stderr)
    if copied and not quiet:
        print(f'{prefix}: {len(copied)} run{"" if len(copied) == 1 else "s"} of the identical '
              f'configuration copied from {", ".join(sorted(set(copied)))}, not run again',
              file=sys.stderr)
    reused = len(jobs) - len(todo)
    if reused and not quiet:
        print(f'{prefix}: {reused} finished run{"" if reused == 1 else "s"} in '
              f'{os.path.join(out, "runs")} reused, {len(todo)} to run', file=sys.stderr)
    bar = None
    if todo and not quiet:      # the runs to run only: reused ones take no time
        try:
            from tqdm import tqdm
            bar = tqdm(total=len(todo), desc=prefix, unit='run', file=sys.stderr)
        except ImportError:
            bar = None
    n_jobs = max(1, min(jobs_parallel or (os.cpu_count() or 1), len(todo) or 1))
    calls = [(cfg, run_dir(out, cfg.label, cfg.seed)) for cfg in todo]
    try:
        # each run is single-threaded and independent: one process per core
        finished = (run_in_processes(_run_one, calls, n_jobs,
                                     on_death=lambda i, err: _failed_run(*calls[i], err))
                    if n_jobs > 1
                    else ((i, _run_one(*c)) for i, c in enumerate(calls)))
        for i, _ in finished:
            if bar is not None:
                bar.set_postfix_str(f'{todo[i].label} seed {todo[i].seed}')
                bar.update(1)
    except BaseException:
        if bar is not None:
            bar.close()            # (Ctrl-C: the CLI's last line goes below the bar)
        raise
    if bar is not None:
        bar.close()
    this_call = time.monotonic() - t_start
    earlier = (comparison_meta(out) or {}) if reused else {}
    meta = {'workload': workload, 'trace': trace, 'workers': workers, 'seeds': seeds,
            'workload_options': dict(workload_options or {}),
            'systems': [labels.get(s, s) for s in systems],
            # the time the comparison took: a call that reuses runs adds its own to the time
            # of the call(s) that made them, so that a rerun does not record 0.03 s
            'wall_s': _number(earlier.get('wall_s')) + this_call,
            'wall_s_this_call': this_call, 'runs_reused': reused}
    if title:
        meta['title'] = title
    table = write_comparison(
        out, meta, say=None if quiet else
        lambda line: print(f'{prefix}: {line}', file=sys.stderr))
    return {'meta': meta, 'systems': table}


def _number(value) -> float:
    """Return ``value`` as a float, 0.0 for a missing or non-numeric one."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def ratio(table: list[dict], key: str, a: str, b: str) -> float | None:
    """table[a][key] / table[b][key] (None if either is missing)."""
    rows = {r['system']: r for r in table}
    if a not in rows or b not in rows:
        return None
    x, y = rows[a].get(key), rows[b].get(key)
    return None if x is None or not y else x / y
