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
I-Prof (FLEET's profiler) and the MAUI baseline: mini-batch bounds from time and energy SLOs.

Spec: specs/aetsgd_fleet.md B2.2. The cost of a learning task is linear in its mini-batch size,
``t = alpha * n``; the slope ``alpha`` depends on the device and its state and is predicted as
``alpha_hat = x^T theta`` from device features x (min-max scaled, plus a constant 1):

* cold start: one model fitted by ordinary least squares on an offline data set of
  ``(x, alpha)`` pairs, re-fitted as data arrive (every ``refit_every`` reports);
* personalisation per device *model* (e.g. 'Galaxy S7'): a passive-aggressive regressor
  bootstrapped from the cold-start parameters at that model's first report, then updated
  incrementally with Eq. (2): no change inside the epsilon band, otherwise the smallest step
  that puts the prediction back on the band's edge;
* the bound (Eq. 1, for time and, when an energy SLO is set, for energy; both must hold):
  ``n = min(max(1, floor(t_SLO/alpha_t)), max(1, floor(E_SLO/alpha_E)))``.

MAUI's profiler, the baseline: one device-agnostic linear regression ``t = theta0 + theta1*n``
over every report, ``n = (SLO - theta0) / theta1``.
"""

from __future__ import annotations

import math

import numpy as np

KINDS = ('time', 'energy')


def ols_fit(x, y) -> np.ndarray:
    """Least-squares ``theta`` with ``x @ theta ~= y`` (x already holds a constant column)."""
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    theta, *_ = np.linalg.lstsq(x, y, rcond=None)
    return theta


def pa_update(theta, x, target: float, eps: float) -> np.ndarray:
    """
    Return the passive-aggressive regression step of Eq. (2) (PA without slack).

    ``loss = max(0, |x.theta - target| - eps)``;
    ``theta' = theta + sign(target - x.theta) * loss / |x|^2 * x``, so that afterwards the
    prediction lies exactly on the edge of the epsilon band (or is unchanged inside it).
    """
    theta = np.asarray(theta, np.float64)
    x = np.asarray(x, np.float64)
    err = float(target - x @ theta)
    loss = abs(err) - eps
    sq = float(x @ x)
    if loss <= 0.0 or sq == 0.0:
        return theta.copy()
    return theta + math.copysign(loss / sq, err) * x


def bound_from_slope(slo: float, alpha: float, max_batch: int) -> int:
    """Eq. (1): ``max(1, floor(slo / alpha))``, capped at ``max_batch``."""
    if not alpha > 0.0:
        return int(max_batch)
    return int(min(max_batch, max(1, math.floor(slo / alpha))))


class _Scaler:
    """Min-max scaling of features, fitted on the offline set, plus a constant column."""

    def __init__(self, x):
        x = np.asarray(x, np.float64)
        self.lo = x.min(0)
        span = x.max(0) - self.lo
        self.span = np.where(span > 0, span, 1.0)

    def __call__(self, x) -> np.ndarray:
        z = (np.asarray(x, np.float64) - self.lo) / self.span
        return np.concatenate([z, np.ones(z.shape[:-1] + (1,))], -1)


class IProf:
    """
    FLEET's I-Prof for the time SLO and, optionally, the energy SLO.

    Parameters
    ----------
    t_slo : float
        Computation-time SLO in seconds (paper: 3 s).
    e_slo : float, optional
        Energy SLO per task (paper: 0.075 % battery); None disables the energy bound.
    eps_time, eps_energy : float
        Epsilon bands of the passive-aggressive regressors (paper: 0.1 and 6e-5), in the
        units of the slope alpha (seconds or energy per sample).
    max_batch : int
        Upper cap of the bound (also the local data size cap).
    refit_every : int
        Re-fit the cold-start OLS model after this many new reports (0: never).

    """

    def __init__(self, t_slo: float = 3.0, e_slo: float | None = None, eps_time: float = 0.1,
                 eps_energy: float = 6e-5, max_batch: int = 100_000, refit_every: int = 1):
        if t_slo <= 0 or (e_slo is not None and e_slo <= 0):
            raise ValueError('SLOs must be > 0')
        if eps_time < 0 or eps_energy < 0:
            raise ValueError('epsilon bands must be >= 0')
        self.slo = {'time': float(t_slo), 'energy': None if e_slo is None else float(e_slo)}
        self.eps = {'time': float(eps_time), 'energy': float(eps_energy)}
        self.max_batch = int(max_batch)
        self.refit_every = int(refit_every)
        self.data = {k: ([], []) for k in KINDS}        # offline (x, alpha) per kind
        self.scaler = {}
        self.cold = {}                                 # kind -> OLS theta
        self.personal = {k: {} for k in KINDS}         # kind -> device model -> PA theta
        self._new = {k: 0 for k in KINDS}

    def fit_offline(self, kind: str, features, alphas) -> None:
        """Pre-train the cold-start model of ``kind`` on an offline set of (x, alpha)."""
        self._check_kind(kind)
        features = np.asarray(features, np.float64)
        alphas = np.asarray(alphas, np.float64)
        if features.ndim != 2 or len(features) != len(alphas) or len(alphas) < 2:
            raise ValueError('offline data: need >= 2 rows of features and as many alphas')
        self.data[kind] = (list(features), list(alphas))
        self.scaler[kind] = _Scaler(features)
        self._refit(kind)

    def _refit(self, kind: str) -> None:
        xs, ys = self.data[kind]
        self.cold[kind] = ols_fit(self.scaler[kind](np.asarray(xs)), ys)
        self._new[kind] = 0

    def _check_kind(self, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f'kind must be one of {KINDS}, got {kind!r}')

    def predict_alpha(self, kind: str, x, device_model: str) -> float:
        """
        Predict the slope: the device model's PA regressor, or the cold start if none yet.

        The prediction is floored at the smallest slope in the data seen so far.
        """
        self._check_kind(kind)
        if kind not in self.cold:
            raise ValueError(f'I-Prof has no {kind} model: call fit_offline first')
        theta = self.personal[kind].get(device_model, self.cold[kind])
        # a linear model extrapolates to near-zero or negative slopes on unusual devices (a
        # huge mini-batch); no device is faster than the fastest slope ever observed
        return max(float(self.scaler[kind](x) @ theta), min(self.data[kind][1]))

    def predict_bound(self, x_time, device_model: str, x_energy=None) -> int:
        """Return the largest mini-batch size within the time SLO (and the energy SLO, if set)."""
        n = bound_from_slope(self.slo['time'], self.predict_alpha('time', x_time, device_model),
                             self.max_batch)
        if self.slo['energy'] is not None and x_energy is not None:
            n = min(n, bound_from_slope(self.slo['energy'],
                                        self.predict_alpha('energy', x_energy, device_model),
                                        self.max_batch))
        return n

    def update(self, kind: str, x, device_model: str, cost: float, batch: int) -> None:
        """Learn from a finished task: observed slope ``cost / batch`` at features x."""
        self._check_kind(kind)
        if batch < 1 or not math.isfinite(cost):
            raise ValueError(f'bad report: cost {cost}, batch {batch}')
        alpha = cost / batch
        z = self.scaler[kind](x)
        theta = self.personal[kind].get(device_model)
        if theta is None:                       # bootstrap from the cold-start model
            theta = self.cold[kind]
        self.personal[kind][device_model] = pa_update(theta, z, alpha, self.eps[kind])
        xs, ys = self.data[kind]
        xs.append(np.asarray(x, np.float64))
        ys.append(alpha)
        self._new[kind] += 1
        if self.refit_every and self._new[kind] >= self.refit_every:
            self._refit(kind)


class Maui:
    """
    MAUI's profiler as FLEET's baseline: one global ``cost = theta0 + theta1 * n`` by OLS.

    Parameters
    ----------
    slo : float
        The SLO (time or energy) the bound aims at.
    max_batch : int
        Upper cap of the bound.

    """

    def __init__(self, slo: float = 3.0, max_batch: int = 100_000):
        if slo <= 0:
            raise ValueError('SLO must be > 0')
        self.slo = float(slo)
        self.max_batch = int(max_batch)
        self.n, self.cost = [], []
        self.theta = np.zeros(2)

    def fit(self, batches, costs) -> None:
        """(Re-)fit on (mini-batch size, cost) pairs, keeping them for later updates."""
        self.n, self.cost = list(map(float, batches)), list(map(float, costs))
        self._refit()

    def _refit(self) -> None:
        n = np.asarray(self.n)
        self.theta = ols_fit(np.stack([np.ones_like(n), n], 1), np.asarray(self.cost))

    def predict_bound(self, *_ignored) -> int:
        """``n = (SLO - theta0) / theta1``, at least 1 (device features are ignored)."""
        theta0, theta1 = self.theta
        if not theta1 > 0:
            return self.max_batch
        return int(min(self.max_batch, max(1, math.floor((self.slo - theta0) / theta1))))

    def update(self, batch: int, cost: float) -> None:
        """Add a report and re-fit."""
        self.n.append(float(batch))
        self.cost.append(float(cost))
        self._refit()
