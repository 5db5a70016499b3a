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
The trace-driven simulator behind ``rog sim``: real engines, real training, virtual time.

Each robot gets a half-duplex Wi-Fi link (``FluidLink``) that follows its own bandwidth trace
(a preset generated with a per-robot seed, or a recorded file replayed at per-robot offsets that
differ between seeds, ``file_offsets``; robots recorded together, of one bag, replay in step).
By default (``duplex='shared'``) its two directions queue separately and share the airtime
(``DuplexLink``), so acknowledgements cross a long transfer as on a real station; ``'fifo'``
keeps the older model, one queue for both directions, where acks wait behind the whole window
and throughput estimates taken from their spacing are far too high.
Every iteration really runs forward/backward on the workload's model on that worker's data
partition, but is charged the device profile's compute time (e.g. Jetson Xavier NX), so the
accuracy curve is real while the clock is the robots'. Deterministic for a seed.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
import gc
import hashlib
import math
import os
import threading

import numpy as np
from rog_ros.core.compress import make_codec
from rog_ros.core.slack import slack_summary
from rog_ros.metrics import RunRecorder
from rog_ros.net import links, ros_bag, trace_spec, traces
from rog_ros.protocol.policies import layout_for, make_policy
from rog_ros.protocol.ps import ServerEngine
from rog_ros.protocol.worker import WorkerEngine
from rog_ros.sim import systems
from rog_ros.sim.harness import Harness
from rog_ros.workloads.base import checkpoint_source
from rog_ros.workloads.start_model import fingerprint
import torch


DUPLEX_MODES = ('shared', 'fifo')

DEFAULT_ITERATIONS = 300
"""Adaptation budget per worker when neither the config nor the workload names one. The
outdoor presets hold a rate for 10-90 s (a new rate every ~25 s on average) and ``outages``
silences a robot for 30-100 s; at MPCOL's 0.3-0.5 s per iteration, 300 iterations are
90-150 s of robot time, i.e. 4-6 holds per robot (120, the earlier default, crossed only 2-3,
so one unlucky alignment decided a run). A run costs 35-100 s of one core by machine; the
default ``rog compare`` (4 systems x 5 seeds) 7 to 17 minutes on 2 cores."""


DEFAULT_EVALUATIONS = 24
"""Evaluations of the shared model over a run. Time to target is read from the 3-evaluation
moving average (``rog_ros.metrics``), which lags the model by one to two evaluation
intervals: with EACOL's 80-iteration budget 3-7 iterations, 20-40 s of a 160-190 s time to
target on the raw record, so short budgets want more (``rog compare --evaluations``)."""


def config_workload(cfg, options: bool = True):
    """
    Return the workload a run trains: the registry's, from ``cfg.init_model``'s weights if set.

    ``options=False`` leaves ``cfg.workload_options`` out (the reference systems' runners).
    ValueError names what is wrong with the file (``workloads.start_model``).
    """
    from rog_ros import workloads
    wl = workloads.get(cfg.workload, **(cfg.workload_options if options else {}))
    return wl.starting_from(cfg.init_model) if cfg.init_model else wl


@dataclass
class SimConfig:
    """One simulated run. Defaults follow the paper's setting (1 server + 4 workers)."""

    workload: str = 'mpcol'         # registry name (rog_ros.workloads.names())
    workload_options: dict = field(default_factory=dict)   # e.g. {'model': 'convmlp-m'}
    init_model: str | None = None   # start from these weights (a state_dict file, a run dir)
    system: str = 'rog:4'           # 'bsp', 'ssp:S', 'rog:S', 'flown:S', a reference system;
    #                                 '#tag': a label, '#field=value': an option (make_policy,
    #                                 the runners' tag_overrides)
    workers: int = 4
    trace: str = 'outdoors'         # preset name or a trace file (CSV or artifact format)
    seed: int = 0
    iterations: int | None = None   # per worker; None: the workload's adaptation budget
    time_budget_s: float | None = None  # stop after this much simulated time as well
    evaluations: int = DEFAULT_EVALUATIONS   # evaluations of the shared model over the run
    eval_samples: int | None = 1152  # evaluation-set prefix per evaluation (None: all)
    final_eval_samples: int | None = None   # the final accuracy, on the whole set by default:
    #                                 it is the headline figure, so it gets the full precision
    compute_time_s: float | None = None  # None: the workload's device profile
    latency_s: float = 0.005        # one-way Wi-Fi latency
    chunk_bytes: int = 16 * 1024
    window: int = 4
    lr: float | None = None         # None: the workload's suggestion
    momentum: float | None = None
    weight_decay: float = 5e-4
    policy_overrides: dict = field(default_factory=dict)   # e.g. {'balance': 'none'}
    label: str | None = None        # name in reports (default: the system spec)
    duplex: str = 'shared'          # 'shared': a queue per direction, shared airtime
    #                                 (DuplexLink); 'fifo': one queue for both directions
    max_events: int = 10_000_000    # event budget: a run that needs more fails loudly
    max_quiet_s: float = 3600.0     # fail when nothing arrives and nothing is computed so long

    def __post_init__(self):
        if self.duplex not in DUPLEX_MODES:
            raise ValueError(f'duplex must be one of {DUPLEX_MODES}, got {self.duplex!r}')
        for name in ('eval_samples', 'final_eval_samples'):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f'{name} must be >= 1 or None (the whole set), got {value}')


def file_offsets(duration_s: float, n: int, seed: int) -> list:
    """
    Per-robot replay offsets of a trace file for one seed (seeded, deterministic).

    Robot r starts at ``((r + u_r) / n + phase) * duration`` (mod the duration) with ``u_r``
    and ``phase`` uniform in [0, 1) from the seed: the robots stay in different n-ths of the
    record, as in the artifact's replay (rank k at k/6), but every seed sees another alignment
    of good and bad stretches, so seeds are samples of the record rather than one replay.
    """
    rng = np.random.default_rng([seed, n, 0x7ace])
    phase = rng.random()
    frac = (np.arange(n) + rng.random(n)) / n + phase
    return [float(f % 1.0) * duration_s for f in frac]


TRACE_CACHE_SIZE = 4
"""Trace files a process keeps parsed (by path and bytes): a run's, and a compare's few."""
_trace_cache = collections.OrderedDict()     # (path, data_digest of its bytes) -> Trace, newest
_bag_robots_cache = {}      # (path, data_digest of its bytes) -> ros_bag.robots of a bag
_trace_cache_lock = threading.Lock()    # (runs in threads: a lookup, a move and an eviction)
_runs = threading.local()   # .pins: per simulate() in progress in this thread, the trace
#                             files it read first, {path: (sha256, Trace)}


def _pins_of_runs() -> list:
    """Return this thread's stack of the runs' pinned trace files (``trace_file``)."""
    if not hasattr(_runs, 'pins'):
        _runs.pins = []
    return _runs.pins


def trace_file(path: str, read: dict | None = None) -> traces.Trace:
    """
    Return the looping trace of the file ``path``, read once per process while its bytes stay.

    ``path`` is an entry of a ``--trace`` value that names a file (``trace_spec``: a bag's
    robot and rate after ``#``, ``run.mcap#netmon_2``). A run reads its trace files twice (its
    links, and where each robot's replay starts) and ``rog compare``'s workers run many: a
    record of a million rows took seconds each time.
    The key is the file's bytes (their hash), so a file rewritten under its name is read anew;
    the bytes hashed are the bytes parsed (read once), so a file rewritten between the two is
    never cached under the hash of what it held before. A SQLite bag's bytes are its file's
    and its ``-wal``'s (``ros_bag.file_bytes``): a recorder that is still writing adds its
    messages to the ``-wal`` alone. A bag is not held in memory (``_read``: hashed and parsed
    in blocks, a bag of gigabytes, ``ros2 bag record -a``, as the nodes read it), and is read
    from its bytes only when it changes while it is parsed. ``read``: ``{file: (digest,
    bytes)}`` read already by the caller's other entries (``rank_entries``): one file (a bag's
    robots) is read once a call. Inside
    ``simulate`` a file is read once per run: its links, its offsets and its digest in the
    summary are of the same bytes, even when the file is rewritten during the run.
    """
    pins = _pins_of_runs()[-1] if _pins_of_runs() else None
    if pins is not None and path in pins:
        return pins[path][1]
    source = trace_spec.parse(path).source
    digest, data = _read(source, read)
    key = (path, digest)
    with _trace_cache_lock:
        trace = _trace_cache.get(key)
        if trace is not None:
            _trace_cache.move_to_end(key)
    if trace is None:       # (parsed outside the lock)
        digest, trace = _parse_read(source, read, digest, data,
                                    lambda data: traces.load_entry(path, loop=True, data=data))
        key = (path, digest)
        with _trace_cache_lock:
            _trace_cache[key] = trace
            while len(_trace_cache) > TRACE_CACHE_SIZE:
                _trace_cache.popitem(last=False)
    if pins is not None:
        pins[path] = (key[1], trace)
    return trace


def _read(path: str, read: dict | None = None) -> tuple:
    """
    Return ``(digest, bytes)`` of the trace file ``path`` (a directory or a pipe: says which).

    ``digest`` is ``ros_bag.data_digest`` of its bytes (a SQLite bag's with its -wal's). A
    bag's bytes are None: it is hashed in blocks (``ros_bag.file_digest``, once per process
    while it stays as it was) and parsed from its file, not held in memory (``_parse_read``).
    ``read``: ``{path: (digest, bytes)}`` of the files read already in this call (None: none
    kept).
    """
    if read is not None and path in read:
        return read[path]
    traces.check_trace_file(path)       # (open would wait on a pipe)
    if ros_bag.bag_kind(path):
        got = ros_bag.file_digest(path), None
    else:
        data = ros_bag.file_bytes(path)
        got = ros_bag.data_digest(data), data
    if read is not None:
        read[path] = got
    return got


def _parse_read(path: str, read: dict | None, digest: bytes, data, parse) -> tuple:
    """
    Return ``(digest, parse(data))`` of the file ``path`` that ``_read`` gave ``digest``.

    A bag (``data`` None) is parsed from its file: when it is no longer the file hashed (a
    recorder still writing it), it is read once into memory, and that is hashed and parsed,
    so that a parse is never kept under the hash of other bytes.
    """
    parsed = parse(data)
    if data is not None or ros_bag.file_digest(path) == digest:
        return digest, parsed
    data = ros_bag.file_bytes(path)
    digest = ros_bag.data_digest(data)
    if read is not None:
        read[path] = digest, data
    return digest, parse(data)


def _bag_robots(path: str, read: dict | None = None) -> list:
    """Return the robots of the bag ``path`` (``trace_spec.resolve``), read once per bytes."""
    digest, data = _read(path, read)
    key = (path, digest)
    with _trace_cache_lock:
        named = _bag_robots_cache.get(key)
    if named is None:
        digest, named = _parse_read(path, read, digest, data,
                                    lambda data: ros_bag.robots(path, data=data))
        key = (path, digest)
        with _trace_cache_lock:
            if len(_bag_robots_cache) >= TRACE_CACHE_SIZE:
                _bag_robots_cache.clear()
            _bag_robots_cache[key] = named
    return named


def rank_entries(spec: str, n: int, read: dict | None = None) -> list:
    """
    Return the entry of the ``--trace`` value ``spec`` that each of ``n`` robots follows.

    Robot r follows entry r mod k (``trace_spec``), a bag of several robots named without
    one its robot of rank r (``trace_spec.resolve``), as the nodes' ``link_for`` does.
    A preset name wins over a file of that name, as in the nodes and the checks.
    ``read``: ``{file: (digest, bytes)}``, where the files read are kept for the caller's
    ``trace_file`` (``_read``: a file is read once, not once per robot and once per robot's
    link; a bag of gigabytes, ``ros2 bag record -a``, took seconds each time).
    """
    if read is None:
        read = {}
    entries = trace_spec.sources(spec)
    for entry in entries:
        source = trace_spec.parse(entry).source
        if not os.path.exists(source) and source not in traces.PRESETS:
            raise ValueError(f'unknown trace {entry!r}: not a file and not one of '
                             f'{sorted(traces.PRESETS)}')
        if source in traces.PRESETS and source != entry:
            raise ValueError(f'trace {entry!r}: a preset takes no #tag (a robot or a rate is '
                             "picked only from a ROS 2 bag of netmon's LinkStats)")
    return [entries[r % len(entries)] if entries[r % len(entries)] in traces.PRESETS
            else trace_spec.resolve(entries[r % len(entries)], r,
                                    lambda path: _bag_robots(path, read))
            for r in range(n)]


def make_traces(spec: str, n: int, seed: int, duration_s: float = 3600.0) -> list:
    """
    One ``(trace, offset_s)`` per robot: presets with per-robot seeds, files at seeded offsets.

    ``spec`` may list one entry per robot (``rog_ros.net.trace_spec``); robot r follows entry
    r mod k (``rank_entries``), a file at its offset ``file_offsets(...)[r]`` and a preset
    generated for robot r. Robots of one recording (two or more robots of a bag) replay it in
    step: on the bag's clock, all from the offset of the lowest rank among them
    (``trace_spec.recordings``), so outages they had together they have together.
    """
    read = {}
    entries = rank_entries(spec, n, read)
    files = {e: trace_file(e, read) for e in set(entries) if e not in traces.PRESETS}
    out = []
    for r, (entry, trace, offset) in enumerate(_replay_plan(entries, n, seed, files)):
        if offset is not None:
            out.append((trace, offset))
        else:
            out.append((traces.generate(entry, duration_s=duration_s, seed=seed * 1000 + r,
                                        robot=r, fleet=n), 0.0))
    return out


def _replay_plan(entries: list, n: int, seed: int, files: dict) -> list:
    """
    Return each robot's ``(entry, trace, offset_s)``; a preset's trace and offset are None.

    ``entries``: robot r's at ``r``, ``rank_entries``'s. Robot r follows a file from its
    seeded offset ``file_offsets(...)[r]``; robots of one recording its link on the
    recording's clock from the offset of their leader (``trace_spec.recordings``). One plan
    for ``make_traces``, which builds the links, and ``trace_offsets``, which says where they
    started, so the two cannot drift apart.
    """
    leaders = trace_spec.recordings(entries)
    plan = []
    for r in range(n):
        entry = entries[r % len(entries)]
        if entry not in files:
            plan.append((entry, None, None))
            continue
        leader = leaders[r]
        trace = files[entry]        # (a bag's robot is on the bag's clock: load_entry)
        plan.append((entry, trace, file_offsets(trace.duration_s, n, seed)[leader]))
    return plan


def trace_offsets(spec: str, n: int, seed: int) -> list | None:
    """
    Return where in its trace file each robot's replay starts (s), as ``make_traces`` does.

    One entry per robot: ``file_offsets(...)[r]`` for a robot that replays a file (looping at
    its end; robots of one recording: their leader's, on the recording's clock), None for one
    that follows a preset (generated for it, from its start). None when no robot replays a
    file.
    """
    read = {}
    entries = rank_entries(spec, n, read)
    files = {e: trace_file(e, read) for e in set(entries)
             if e not in traces.PRESETS and os.path.exists(trace_spec.parse(e).source)}
    if not files:
        return None
    return [offset for _, _, offset in _replay_plan(entries, n, seed, files)]


def iteration_budget(cfg: SimConfig, wl) -> int:
    """
    Return the per-worker budget a run of ``cfg`` on workload ``wl`` is given.

    ``cfg.iterations``, else the workload's own ``adaptation_iterations`` (an EACOL surrogate
    sets one), else DEFAULT_ITERATIONS. ``rog compare`` asks the same, so that a run made with
    another budget is not reused for a run without ``--iterations``.
    """
    return int(cfg.iterations or getattr(wl, 'adaptation_iterations', DEFAULT_ITERATIONS))


def trace_digest(spec, pins=None) -> str | None:
    """
    Return a short digest of the bytes of the trace files ``spec`` names; None if it names none.

    A summary records the spec's text, which stays the same when a file is rewritten under its
    name: ``rog compare`` reuses a run only if the files hold what they held for it. Presets
    (a preset name wins over a file of that name) and missing files have no bytes to digest.
    ``pins``: ``{path: (sha256, trace)}`` of the bytes a run replayed, digested instead of the
    file's bytes now. A SQLite bag's bytes include its ``-wal``'s (``ros_bag.data_digest``),
    so a run of a bag whose recorder went on writing is not reused; a bag is hashed in
    blocks (``ros_bag.file_digest``: the same digest, without the bag in memory).
    """
    try:
        entries = trace_spec.sources(spec)
    except ValueError:
        return None
    digest, files = hashlib.sha256(), 0
    pinned = {trace_spec.parse(e).source: sha for e, (sha, _) in (pins or {}).items()}
    for entry in entries:
        if entry in traces.PRESETS:
            continue
        try:
            path = trace_spec.parse(entry).source
        except ValueError:
            continue
        if path in pinned:
            digest.update(pinned[path])
            files += 1
            continue
        if not os.path.isfile(path):
            continue
        try:
            digest.update(ros_bag.file_digest(path) if ros_bag.bag_kind(path)   # (in blocks)
                          else ros_bag.data_digest(ros_bag.file_bytes(path)))
        except OSError:
            continue
        files += 1
    return digest.hexdigest()[:12] if files else None


def _start_of(cfg: SimConfig) -> dict:
    """Return where a run's starting weights come from (a reference system's runner's run)."""
    if not cfg.init_model:
        return {'source': checkpoint_source(cfg.workload)}
    from rog_ros.workloads.start_model import resolve_path
    # the model the runner started from, as an engine run records it: the file's weights in
    # the model's order and dtypes (the file's own bytes differ for reordered or float64 keys)
    return {'source': resolve_path(cfg.init_model),
            'fingerprint': fingerprint(config_workload(cfg, options=False).make_model())}


def _params_grad(model) -> list:
    return [p.grad if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]


def simulate(cfg: SimConfig, progress=None) -> RunRecorder:
    """Run one configuration; returns the filled RunRecorder (``.summary()``, ``.write()``)."""
    torch.manual_seed(cfg.seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)     # small per-worker tensors: one thread is faster and steadier
    _pins_of_runs().append({})      # the trace files' bytes this run reads first, by path
    try:
        rec = _simulate(cfg, progress)
        digest = trace_digest(cfg.trace, _pins_of_runs()[-1])   # of the bytes it replayed
        if digest is not None:      # what rog compare checks of a file rewritten under its name
            rec.extra.setdefault('trace_digest', digest)
        # what rog compare's reuse compares (the reference systems' runners record neither)
        rec.extra.setdefault('evaluations', int(cfg.evaluations))
        if 'iteration_budget' not in rec.extra:    # a reference system's runner: resolved as
            # the runners do (they refuse workload options, so the registry's default build)
            # so that a default-budget run is known as one and not reused for another budget
            from rog_ros import workloads
            rec.extra['iteration_budget'] = iteration_budget(
                cfg, None if cfg.iterations else workloads.get(cfg.workload))
        rec.extra.setdefault('workload_options', dict(cfg.workload_options or {}))
        rec.extra.setdefault('start_model', _start_of(cfg))
        # where each robot's replay of a trace file started (None: presets only)
        rec.extra.setdefault('trace_offsets_s', trace_offsets(cfg.trace, cfg.workers, cfg.seed))
        return rec
    finally:
        _pins_of_runs().pop()
        torch.set_num_threads(threads)
        # The engines, harness and closures of a run form reference cycles that hold its
        # model-sized buffers (3 GB for EACOL with ConvMLP-M messages): without a collection
        # a process running several simulations in a row (rog compare's pool workers) grew
        # by one run's memory per run until the OOM killer ended it.
        gc.collect()


def option_tags(spec: str) -> list:
    """Return the sorted ``field=value`` tags of a system spec (``adacomp#alpha=0.5``)."""
    return sorted(t.strip() for t in spec.split('#')[1:] if '=' in t)


def _simulate(cfg: SimConfig, progress=None) -> RunRecorder:
    runner = systems.lookup(cfg.system)
    if runner is not None:        # a system with engines of its own (AdaComp, GSP, ...): it
        rec = runner(cfg, progress)    # reads the spec's argument and tags itself
        # the tags it applied (rog compare reuses a run only if they are the same: before
        # 2026-12-04 the runners ignored them)
        rec.extra['option_tags'] = option_tags(cfg.system)
        return rec
    wl = config_workload(cfg)
    policy = make_policy(cfg.system, **cfg.policy_overrides)   # '#no-outage' etc.
    n = cfg.workers
    if n < 1:
        raise ValueError('need at least one worker')
    models = [wl.make_model() for _ in range(n)]
    shapes = [tuple(p.shape) for p in models[0].parameters()]
    layout = layout_for(policy, shapes)
    codec = make_codec(policy.codec)
    w0 = layout.flatten([p.detach() for p in models[0].parameters()])
    lr = cfg.lr if cfg.lr is not None else wl.lr
    momentum = cfg.momentum if cfg.momentum is not None else wl.momentum
    iterations = iteration_budget(cfg, wl)
    server = ServerEngine(layout, codec, policy, n, w0, lr=lr, max_iterations=iterations,
                          chunk_bytes=cfg.chunk_bytes, window=cfg.window)
    engines = [WorkerEngine(r, n, layout, codec, policy, w0, momentum=momentum,
                            weight_decay=cfg.weight_decay, chunk_bytes=cfg.chunk_bytes,
                            window=cfg.window, max_iterations=iterations) for r in range(n)]
    for m, e in zip(models, engines):
        layout.bind(m, e.w)
        m.train()
    batches = [wl.worker_batches(r, n, cfg.seed) for r in range(n)]
    # One flat gradient buffer per worker, refilled by each of its computations: a worker has
    # one computation in flight at a time and its engine copies what it keeps, so a fresh
    # model-sized tensor per gradient only cost an allocation (ConvMLP-M: 36 ms, page faults)
    grads = [torch.empty_like(w0) for _ in range(n)]

    def grad_fn(rank, w, clock):
        model = models[rank]
        model.zero_grad(set_to_none=False)
        loss = wl.loss(model, next(batches[rank]))
        loss.backward()
        fill = getattr(model, 'fill_surrogate_grads', None)   # rog_ros.workloads.surrogate
        if fill is not None:
            fill()
        return layout.flatten(_params_grad(model), out=grads[rank])

    eval_model = wl.make_model()
    eval_flat = torch.empty_like(w0)
    layout.bind(eval_model, eval_flat)

    def eval_fn(max_samples=cfg.eval_samples):
        server.consensus_model(out=eval_flat)
        for b_eval, b_w in zip(eval_model.buffers(), models[0].buffers()):
            b_eval.copy_(b_w)
        eval_model.eval()
        with torch.no_grad():
            out = wl.evaluate(eval_model, max_samples=max_samples)
        if progress is not None:
            progress(harness.now, sum(harness.stats.iterations) / n, out)
        return out

    link_list = []
    for r, (trace, offset) in enumerate(make_traces(cfg.trace, n, cfg.seed)):
        link_list.append(links.FluidLink(trace, latency_s=cfg.latency_s, seed=cfg.seed + r,
                                         time_offset_s=offset))
    if cfg.duplex == 'shared':
        stations = [links.DuplexLink(ln) for ln in link_list]
        up, down = [st.up for st in stations], [st.down for st in stations]
    else:
        up = down = link_list
    compute = cfg.compute_time_s or wl.compute_time_s
    recorder = RunRecorder(system=cfg.label or policy.name, n_workers=n,
                           staleness=policy.staleness, trace=cfg.trace, seed=cfg.seed,
                           workload=wl.users_code or wl.name, target_accuracy=wl.target_accuracy)
    recorder.extra['data_fingerprint'] = wl.data_fingerprint()   # (compare reuse)
    recorder.extra['message_bytes'] = int(codec.row_nbytes(layout).sum())
    recorder.extra['params'] = layout.n_params
    recorder.extra['rows'] = layout.n_rows
    recorder.extra['duplex'] = cfg.duplex
    if cfg.workload_options:
        recorder.extra['workload_options'] = dict(cfg.workload_options)
    # the budget asked for: 'iterations' is what the robots computed, fewer for a robot that
    # was out for its link and skipped ahead when it caught up
    recorder.extra['iteration_budget'] = int(iterations)
    # named by the registry name asked for, as the reference systems' runs (``_start_of``) and
    # rog compare's reuse check name it: an alias (chaos, glyphs-lenet5) builds a workload
    # named after its builder (toy, glyphs), whose runs would pass for the alias's otherwise
    recorder.extra['start_model'] = {'source': wl.describe_start(cfg.workload),
                                     'fingerprint': fingerprint(models[0])}
    harness = Harness(server, engines, grad_fn, compute_s=compute, up=up, down=down,
                      recorder=recorder, eval_fn=eval_fn,
                      eval_every_iterations=max(1.0, iterations / max(cfg.evaluations, 1)))
    # bytes as the server engine counts them, as a fleet's server records them (the engines'
    # transfer Logs carry their rate sample's bytes); harness.server: a revived one too
    recorder.traffic = lambda: (harness.server.bytes_up, harness.server.bytes_down)
    stats = harness.run(until=cfg.time_budget_s or math.inf, max_events=cfg.max_events,
                        max_quiet_s=cfg.max_quiet_s)
    if stats.error is not None:      # a truncated run: its summary says so (DESIGN 8)
        recorder.extra['error'] = stats.error
    recorder.on_eval(harness.now, sum(harness.stats.iterations) / n,
                     eval_fn(cfg.final_eval_samples))
    recorder.end_time_s = harness.now
    # kept as numbers: the source would hold the harness and its model-sized buffers
    (recorder.bytes_up, recorder.bytes_down), recorder.traffic = recorder.traffic_bytes(), None
    recorder.extra['server_rejects'] = server.rejects
    recorder.extra['outage_suspensions'] = server.outage_suspensions   # outage-aware RSP
    recorder.extra['too_slow_suspensions'] = server.too_slow_suspensions   # free_stragglers
    recorder.extra.update(slack_summary(getattr(server, 'slack', None)))   # straggler slack
    recorder.extra['weighted_pushes'] = server.weighted_pushes
    recorder.extra['rescaled_pushes'] = server.rescaled_pushes
    return recorder
