"""The renewable objective of one batch: f, its gradient g and the Newton matrix H.

A RenewableProblem freezes everything f depends on besides beta (the batch, the previous
state, N, tau, h, the historical L1 subgradient), so solvers and tests evaluate exactly the
same function. Every evaluation accepts the residual r = y - X beta when the caller already
has it, because the row pass dominates the cost and a line search needs r for f and then,
on acceptance, for g and H at the same beta.

The solvers reach the batch's rows only through the row functions below (residual and the
five sums over rows); f, g, H, the majoriser and LAMM's curvature bound combine their results
with the state. f and the residual are in the working dtype; the Newton system (g, H, the
majoriser, and the sums they are made of) is float64 for every working dtype, as in the native
engines (docs/decisions.md, "The Newton system's precision"). Each row function dispatches on
the problem's type, so a problem whose rows live elsewhere (renewable_huber.dask: partitions on
a cluster, r an opaque handle) registers its own and runs the same solvers unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import numpy

from ..config import UpdateConfig
from ..state import RenewableState
from .design import penalty_mask
from .gram import weighted_gram
from .huber import checked_bandwidth, huber_loss, huber_score, lambda_value, smoothed_curvature
from .meat import batch_meat
from .rules import history_scale, ladder_epsilon, lamm_phi_bound, majoriser_weights


@dataclasses.dataclass(frozen=True)
class RenewableProblem:
    """One batch's renewable objective (docs/algorithm.md, "Renewable objective").

    X (n, P), y (n,), w (n,): the batch in the working dtype. beta0 (P,), information (P, P):
    the previous state. weight_sum: N = W0 + sum(w). historical: (W0/N) lambda0 sign(beta0) m,
    or None when the term is absent (penalty "none" or no previous sample). ladder_epsilon: the
    eps of the Newton ladder's thresholds (rules.ladder_epsilon; unused by a problem that only
    sums rows).
    """

    xp: Any
    X: Any
    y: Any
    w: Any
    beta0: Any
    information: Any
    weight_sum: float
    tau: float
    bandwidth: float
    ridge: float
    lambda_value: float
    mask: Any
    historical: Any
    ladder_epsilon: float = math.nan

    @classmethod
    def from_batch(
        cls, xp, state: RenewableState, X_design, y, sample_weight, config: UpdateConfig
    ) -> RenewableProblem:
        dtype = state.coefficients.dtype
        n = X_design.shape[0]
        w = xp.ones(n, dtype=dtype) if sample_weight is None else sample_weight
        # Summed in double like the native engines do: N enters every scale (h, lambda, 1/N),
        # and a float32 running sum over many rows would drift.
        batch_weight = float(n) if sample_weight is None else float(xp.sum(w, dtype=xp.float64))
        return cls.for_state(xp, state, config, batch_weight, X=X_design, y=y, w=w)

    @classmethod
    def for_state(cls, xp, state: RenewableState, config: UpdateConfig, batch_weight: float,
                  **rows) -> RenewableProblem:
        """The problem of a batch of total weight batch_weight after `state`; `rows` are the
        fields that hold the batch (X, y, w here; a subclass may add its own)."""
        dtype = state.coefficients.dtype
        previous_weight = float(state.weight_sum)
        weight_sum = previous_weight + batch_weight
        tau = float(config.tau)
        mask = penalty_mask(xp, config.n_parameters, config.fit_intercept, dtype)
        stream_start = int(state.batch_count) == 0 and not bool(xp.any(state.information))
        historical = None
        if config.penalty == "l1" and state.n_samples_seen > 0:
            scale = history_scale(previous_weight, weight_sum, float(state.previous_lambda))
            historical = scale * xp.sign(state.coefficients) * mask
        return cls(
            xp=xp,
            **rows,
            beta0=state.coefficients,
            information=state.information,
            weight_sum=weight_sum,
            tau=tau,
            bandwidth=checked_bandwidth(
                float(config.bandwidth_scale), weight_sum, config.n_features_in, tau
            ),
            ridge=float(config.ridge),
            lambda_value=lambda_value(
                config.penalty, float(config.lambda_scale), tau, weight_sum, config.n_features_in
            ),
            mask=mask,
            historical=historical,
            ladder_epsilon=ladder_epsilon(stream_start, float(numpy.finfo(dtype).eps)),
        )

    @property
    def dtype(self):
        return self.beta0.dtype

    @functools.cached_property
    def wide_rows(self):
        """(X, w) in float64, made once per batch: the rows of the Newton system's sums (X and
        w themselves when they are float64)."""
        return wide(self.xp, self.X), wide(self.xp, self.w)

    @property
    def n_parameters(self) -> int:
        return int(self.beta0.shape[0])


# -- row functions: the only code that reads the batch's rows ---------------------------------


@functools.singledispatch
def residual(problem: RenewableProblem, beta):
    """r = y - X beta."""
    return problem.y - problem.X @ beta


@functools.singledispatch
def expect_line_search(problem: RenewableProblem, beta, direction, t: float, count: int) -> None:
    """A hint from the line search after rejected trials: it may next ask for the objective at
    beta - t d, beta - (t / 2) d, ... (`count` points, each formed exactly so). A problem
    whose rows are in memory ignores it; one whose rows are on a cluster (dask/problem.py)
    sums the loss at all of them in one pass instead of one pass per trial."""
    return None


@functools.singledispatch
def loss_sum(problem: RenewableProblem, r):
    """sum_i w_i rho(r_i)."""
    xp = problem.xp
    return xp.sum(problem.w * huber_loss(xp, r, problem.tau))


def wide(xp, a):
    """a in float64, the dtype of the Newton system (a itself when it is float64 already)."""
    return a.astype(xp.float64, copy=False)


def _wide_rows(problem: RenewableProblem, r):
    """(X, w, r) in float64: the rows of the Newton system's sums."""
    return (*problem.wide_rows, wide(problem.xp, r))


@functools.singledispatch
def score_product(problem: RenewableProblem, r, wide_sum: bool = True):
    """X' (w psi(r)), a (P,) array: summed in float64 (the Newton system's), or in the working
    dtype when not wide_sum (LAMM's gradient)."""
    X, w, r = _wide_rows(problem, r) if wide_sum else (problem.X, problem.w, r)
    return X.T @ (w * huber_score(problem.xp, r, problem.tau))


@functools.singledispatch
def curvature_gram(problem: RenewableProblem, r):
    """X' diag(w c(r)) X in float64: the data part of H and the batch's information."""
    X, w, r = _wide_rows(problem, r)
    curvature = smoothed_curvature(problem.xp, r, problem.tau, problem.bandwidth)
    return weighted_gram(problem.xp, X, w * curvature)


@functools.singledispatch
def majoriser_gram(problem: RenewableProblem, r):
    """X' diag(w m(r)) X in float64, m = max(c(r), min(1, tau / |r|)): the data part of the
    majoriser."""
    xp = problem.xp
    X, w, r = _wide_rows(problem, r)
    curvature = smoothed_curvature(xp, r, problem.tau, problem.bandwidth)
    return weighted_gram(xp, X, w * majoriser_weights(xp, r, problem.tau, curvature))


@functools.singledispatch
def weighted_squared_norm(problem: RenewableProblem) -> float:
    """sum_i w_i ||x_i||^2, summed in double (the intercept column counted)."""
    X, w = problem.wide_rows
    return float(w @ problem.xp.sum(X * X, axis=1))


@functools.singledispatch
def meat_gram(problem: RenewableProblem, r):
    """X' diag(w psi(r)^2) X in float64 at the batch's solution: its part of K (core/meat.py)."""
    X, w = problem.wide_rows  # the float64 rows the Newton system's sums already made
    return batch_meat(problem.xp, X, r, w, problem.tau)


# -- the renewable objective, assembled from the row functions and the state -----------------


def objective(problem: RenewableProblem, beta, r=None) -> float:
    """f(beta) = [sum w rho(r) + delta' J delta / 2] / N - <historical, delta> (smooth part only;
    the L1 penalty of the current batch is added by the caller that needs it)."""
    if r is None:
        r = residual(problem, beta)
    delta = beta - problem.beta0
    loss = loss_sum(problem, r)
    quadratic = delta @ (problem.information @ delta)
    value = (loss + 0.5 * quadratic) / problem.weight_sum
    if problem.historical is not None:
        value = value - problem.historical @ delta
    return float(value)


def gradient(problem: RenewableProblem, beta, r=None, in_float64: bool = False):
    """g(beta) = [-X' (w psi(r)) + J delta] / N - historical, a (P,) array: in the working
    dtype (LAMM's), or in float64 (the right-hand side of the Newton system)."""
    if r is None:
        r = residual(problem, beta)
    cast = (lambda a: wide(problem.xp, a)) if in_float64 else (lambda a: a)
    delta = cast(beta) - cast(problem.beta0)
    score = score_product(problem, r, in_float64)
    g = (cast(problem.information) @ delta - score) / problem.weight_sum
    if problem.historical is not None:
        g = g - cast(problem.historical)
    return g


def _newton_matrix(problem: RenewableProblem, gram):
    """[gram + J] / N + ridge I in float64, ridge added after dividing by N."""
    xp = problem.xp
    matrix = (gram + wide(xp, problem.information)) / problem.weight_sum
    if problem.ridge != 0.0:
        matrix = matrix + problem.ridge * xp.eye(problem.n_parameters, dtype=xp.float64)
    return matrix


def hessian(problem: RenewableProblem, beta, r=None):
    """H(beta) = [X' diag(w c(r)) X + J] / N + ridge I (float64)."""
    if r is None:
        r = residual(problem, beta)
    return _newton_matrix(problem, curvature_gram(problem, r))


def majoriser_matrix(problem: RenewableProblem, r):
    """M = [X' diag(w m(r)) X + J] / N + ridge I, m = max(c(r), min(1, tau / |r|)) (float64)."""
    return _newton_matrix(problem, majoriser_gram(problem, r))


def in_working_dtype(problem: RenewableProblem, point):
    """A candidate formed in float64 (beta - t d, LAMM's soft threshold), rounded once to the
    working dtype: every candidate is a point of the state's dtype."""
    return point.astype(problem.dtype, copy=False)


def curvature_bound(problem: RenewableProblem) -> float:
    """(sum_i w_i ||x_i||^2 + trace J) / N, summed in double."""
    xp = problem.xp
    trace = float(xp.trace(problem.information.astype(xp.float64, copy=False)))
    return lamm_phi_bound(weighted_squared_norm(problem), trace, problem.weight_sum)
