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
The independent ledger: what the workers computed against what the server applied and holds.

`rog chaos` must not trust the engines' own counters to say that nothing was lost or doubled,
so the nodes keep a ledger of their own, written from what they observe of the engine's
buffers (the files are written by :mod:`rog_ros.nodes.chaos_hooks`; this module is the pure
arithmetic). Every quantity is a vector of float64 projections onto fixed directions: channel
0 is the plain sum, channels 1.. are seeded Gaussian directions (:func:`projections`).

Worker records (one append-only file per worker, across its incarnations):

* ``computed``: per iteration, what entered the residual, ``fl32(res + d) - res`` (exact in
  float64), keyed by the process run id and the clock;
* ``commit``: per push whose final ack arrived, what left the residual, keyed by
  ``(rank, incarnation, transfer id)``;
* a final report per worker: the residual it still holds, and its push still in flight.

Server records: ``applied`` per push, ``(w_before - w_after) N / lr`` (the workers' units),
keyed like commits; ``checkpoint``/``restore`` markers (a restore voids what was applied after
the checkpoint it loads); a final report with ``(w0 - w_srv) N / lr``.

:func:`reconcile` then checks, in float64 with an fp32 rounding tolerance:

1. per worker, ``computed = committed + held`` (a restart that dropped residual mass breaks it);
2. per push, committed vs applied: committed but never applied is *lost*; applied but never
   committed (and not the push still in flight at the end), or applied twice, is *duplicated*;
3. the server's records add up to its final model (``sum applied = (w0 - w_srv) N / lr``).

Lost and duplicated mass is reported in units of one mean iteration's update (norm over the
projections), so ``1.0`` reads "about one iteration of one worker".
"""

from __future__ import annotations

from dataclasses import dataclass, field
import json
import math

import numpy as np

CHANNELS = 5
"""Projection channels: the sum plus four random directions (a loss hiding in all of them
at once would have to be orthogonal to four random Gaussian vectors: probability 0)."""
SEED = 20261126
FP32_UNIT_ROUNDOFF = 2.0 ** -24
Z_SIGMAS = 10.0
"""Tolerance in standard deviations of the accumulated fp32 rounding (see fp32_tolerance)."""
MARGIN = 4.0
"""Residual and weight magnitudes are known at the end only; allow them 4x larger mid-run."""
F64_RELATIVE = 1e-9
"""Float64 sums of a few thousand exact entries: relative error far below this."""


def projections(n_params: int, channels: int = CHANNELS, seed: int = SEED) -> np.ndarray:
    """Return the ``(channels, n_params)`` float64 directions: a row of ones, then Gaussians."""
    if n_params < 1 or channels < 1:
        raise ValueError('projections need n_params >= 1 and channels >= 1')
    rng = np.random.default_rng(seed)
    out = np.empty((channels, n_params), dtype=np.float64)
    out[0] = 1.0
    out[1:] = rng.standard_normal((channels - 1, n_params))
    return out


def project(vec, proj: np.ndarray) -> np.ndarray:
    """Float64 projections of a flat vector (NumPy array or CPU tensor) onto ``proj``."""
    if hasattr(vec, 'detach'):
        vec = vec.detach().cpu().double().numpy()
    v = np.asarray(vec, dtype=np.float64).reshape(-1)
    if v.size != proj.shape[1]:
        raise ValueError(f'vector of {v.size} values, projections of {proj.shape[1]}')
    return proj @ v


def fp32_tolerance(norms, n_commits: int, n_applied: int, residual_max: float,
                   weight_max: float, scale: float) -> np.ndarray:
    """
    Per-channel tolerance of a sum of commits and applied pushes, from fp32 rounding.

    The worker's ledger entries are exact: each is the float64 difference of two fp32
    residuals. What rounds is (a) each commit ``res = fl32(res - q)``: at most half an ulp,
    ``u |res|`` with ``u = 2^-24``, per element and commit; (b) on the server each applied push
    ``w = fl32(w - fl32(q lr / N))``: ``2 u |w|`` in weight units, ``2 u |w| N / lr``
    (``scale``) in the workers' units. Round-to-nearest errors are zero-mean and close to
    independent, so their sum over ``k`` operations has a standard deviation of about
    ``sqrt(k / 3)`` times the bound (uniform error); a projection with direction ``p``
    multiplies it by ``||p||_2`` (``norms``). We allow ``Z_SIGMAS = 10`` standard deviations,
    with magnitudes ``MARGIN = 4`` times their final values. For the chaos model (4k
    parameters, a few hundred pushes) that is ~1e-3 of one iteration's projected update, so
    one lost or doubled row stands out.
    """
    sigma_res = FP32_UNIT_ROUNDOFF * MARGIN * residual_max * math.sqrt(max(n_commits, 1) / 3.0)
    sigma_w = (2.0 * FP32_UNIT_ROUNDOFF * MARGIN * weight_max * scale
               * math.sqrt(max(n_applied, 1) / 3.0))
    sigma = math.hypot(sigma_res, sigma_w)
    return Z_SIGMAS * sigma * np.asarray(norms, np.float64) + 1e-12


def line(kind: str, **fields) -> str:
    """One ledger line: a JSON object with ``kind``, newline-terminated (arrays as lists)."""
    rec = {'kind': kind}
    for k, v in fields.items():
        rec[k] = [float(x) for x in v] if isinstance(v, (np.ndarray, list, tuple)) else v
    return json.dumps(rec) + '\n'


def read_records(lines) -> list:
    """Parse ledger lines; a torn last line (a killed writer) and junk are skipped."""
    out = []
    for text in lines:
        text = text.strip()
        if not text:
            continue
        try:
            rec = json.loads(text)
        except ValueError:
            continue
        if isinstance(rec, dict) and 'kind' in rec:
            out.append(rec)
    return out


def push_key(rank, incarnation, transfer_id) -> str:
    """Key of one push: ``'rank:incarnation:transfer'``."""
    return f'{int(rank)}:{int(incarnation)}:{int(transfer_id)}'


def valid_applied(server_records) -> list:
    """Return the server's ``applied`` records that survived its restarts, in order."""
    kept, marks = [], {}
    for rec in server_records:
        kind = rec['kind']
        if kind == 'applied':
            kept.append(rec)
        elif kind == 'checkpoint':
            marks[rec['id']] = len(kept)
        elif kind == 'restore':
            kept = kept[:marks.get(rec.get('id'), 0)]   # applied after that checkpoint: gone
    return kept


@dataclass
class Verdict:
    """What :func:`reconcile` found; ``lost``/``duplicated`` in mean-iteration units."""

    lost: float = 0.0
    duplicated: float = 0.0
    discarded: float = 0.0                 # left out of weighted late pushes on purpose
    entries: int = 0                       # iterations computed, all workers
    pushes: int = 0                        # pushes committed by workers
    problems: list = field(default_factory=list)   # one line per finding

    @property
    def ok(self) -> bool:
        """Tell whether nothing was lost and nothing doubled."""
        return self.lost == 0.0 and self.duplicated == 0.0


def _vec(x) -> np.ndarray:
    return np.asarray(x, np.float64)


def reconcile(worker_records: dict, worker_finals: dict, server_records: list,
              server_final: dict) -> Verdict:
    """
    Check the ledger (see the module docstring); every argument is parsed JSON.

    Parameters
    ----------
    worker_records : dict
        rank -> list of records from that worker's ledger file.
    worker_finals : dict
        rank -> final report: ``held`` (projections), ``inflight`` (push key or None),
        ``residual_max``.
    server_records : list
        The server's ledger records.
    server_final : dict
        ``applied`` (projections of ``(w0 - w_srv) N / lr``), ``n_params``, ``scale``
        (``N / lr``), ``weight_max``.

    Notes
    -----
    Mass that left a residual under one push key and reached the server under another (a
    push re-sent after a restart) balances out: unmatched commits, net of mass returned to a
    residual (``uncommit`` records), must equal unmatched applied pushes.

    """
    v = Verdict()
    channels = len(server_final['applied'])
    norms = np.linalg.norm(projections(int(server_final['n_params']), channels), axis=1)
    zero = np.zeros(channels)
    scale = float(server_final['scale'])
    wmax = float(server_final['weight_max'])
    rmax = max([float(f.get('residual_max', 0.0)) for f in worker_finals.values()] + [0.0])
    commits, sizes, returned = _worker_ledgers(v, worker_records, worker_finals, zero)
    v.entries, v.pushes = len(sizes), len(commits)
    unit = float(np.mean(sizes)) if sizes else 1.0
    applied, weights, twice = _applied_pushes(v, server_records, zero)
    if np.any(twice != 0):
        _add(v, 'duplicated', twice)
    # 2. per push; unmatched mass must balance
    inflight = {f['inflight'] for f in worker_finals.values() if f.get('inflight')}
    _match_pushes(v, commits, applied, weights, inflight, returned,
                  lambda n: fp32_tolerance(norms, n, n, rmax, wmax, scale))
    # 3. the server's records add up to its model
    total_applied = sum(applied.values(), zero) + twice
    d = _vec(server_final['applied']) - total_applied
    tol = fp32_tolerance(norms, 0, max(len(applied), 1), 0.0, wmax, scale)
    if np.any(np.abs(d) > tol):
        v.problems.append('server model != its applied records')
        _add(v, 'lost' if d @ total_applied < 0 else 'duplicated', d)
    v.lost, v.duplicated = v.lost / unit, v.duplicated / unit
    v.discarded /= unit
    return v


def _worker_ledgers(v: Verdict, worker_records: dict, worker_finals: dict, zero):
    """
    Balance each worker's ledger against its final report (check 1); the pushes it committed.

    Return ``(commits, sizes, returned)``: push key -> committed mass, the size of every
    computed gradient (the unit of the verdict), and the mass handed back to residuals
    (``uncommit``), which check 2 balances against unmatched pushes.
    """
    commits, sizes, returned = {}, [], zero.copy()
    for rank, recs in sorted(worker_records.items()):
        seen, computed, back, out, mag = set(), zero.copy(), zero.copy(), zero.copy(), 0.0
        for rec in recs:
            proj = _vec(rec.get('proj', zero))
            key = (rec['kind'], rec.get('run'), rec.get('seq'))
            if key in seen:
                continue            # re-appended from the saved state after a restart
            seen.add(key)
            mag += float(np.abs(proj).sum())
            if rec['kind'] == 'computed':
                computed += proj
                sizes.append(float(np.linalg.norm(proj)))
            elif rec['kind'] == 'commit':
                out += proj
                pk = push_key(rank, rec['incarnation'], rec['tid'])
                commits[pk] = commits.get(pk, zero) + proj
            elif rec['kind'] == 'uncommit':
                back += proj
        returned += back
        final = worker_finals.get(rank)
        held = _vec(final['held']) if final is not None else zero
        if final is None:
            v.problems.append(f'worker {rank}: no final report')
        # 1. exact telescoping: every change of the residual is a record (float64 sums only)
        d = out + held - computed - back
        if np.any(np.abs(d) > F64_RELATIVE * (mag + 1.0)):
            v.problems.append(f'worker {rank}: computed + returned != committed + held')
            _add(v, 'lost' if d @ computed < 0 else 'duplicated', d)
    return commits, sizes, returned


def _applied_pushes(v: Verdict, server_records: list, zero):
    """
    Return ``(applied, weights, twice)`` of the server's valid ``applied`` records.

    Push key -> applied mass and the weight it was applied at, and the mass of pushes applied
    a second time (each a problem of ``v``; not in ``applied``).
    """
    applied, weights, twice = {}, {}, zero.copy()
    for rec in valid_applied(server_records):
        key = push_key(rec['rank'], rec['incarnation'], rec['tid'])
        if key in applied:
            twice += _vec(rec['proj'])
            v.problems.append(f'push {key} applied twice')
            continue
        applied[key] = _vec(rec['proj'])
        # outage-aware RSP applies a suspended worker's late push at a weight in (0, 1] and
        # discards the rest on purpose, and an active worker's push while others are out at
        # N / (N - k) (outage_scale): compare and balance the push's whole mass
        weights[key] = float(rec.get('weight', 1.0))
        if not (0.0 < weights[key] and math.isfinite(weights[key])):
            v.problems.append(f'push {key}: weight {weights[key]} is not a positive factor')
            weights[key] = 1.0
    return applied, weights, twice


def _match_pushes(v: Verdict, commits: dict, applied: dict, weights: dict, inflight: set,
                  returned, tolerance) -> None:
    """
    Match each committed push with its applied one (check 2); the unmatched mass must balance.

    A push committed under one key may arrive under another (re-sent after a restart), so the
    unmatched commits, net of the ``returned`` mass, must equal the unmatched applied pushes
    (those still ``inflight`` at the end aside). ``tolerance(n)``: float32 rounding of ``n``
    pushes (``fp32_tolerance``).
    """
    left, arrived = -returned, np.zeros_like(returned)
    n_unmatched, tol_push = 0, tolerance(1)
    for key, c in commits.items():
        a = applied.get(key)
        if a is None:
            left += c
            n_unmatched += 1
        else:
            w = weights[key]
            if w < 1.0:
                v.discarded += float(np.linalg.norm((1.0 - w) * c))
            if np.any(np.abs(a - w * c) > tol_push):
                v.problems.append(f'push {key}: applied differs from committed')
                _add(v, 'lost' if (a - w * c) @ c < 0 else 'duplicated', a - w * c)
    for key, a in applied.items():
        if key not in commits and key not in inflight:
            arrived += a / weights[key]
            n_unmatched += 1
    d = arrived - left
    if np.any(np.abs(d) > tolerance(n_unmatched)):
        more_left = np.linalg.norm(left) > np.linalg.norm(arrived)
        v.problems.append('pushes committed but never applied' if more_left
                          else 'pushes applied but never committed')
        _add(v, 'lost' if more_left else 'duplicated', d)


def _add(v: Verdict, kind: str, d: np.ndarray) -> None:
    if kind == 'lost':
        v.lost += float(np.linalg.norm(d))
    else:
        v.duplicated += float(np.linalg.norm(d))
