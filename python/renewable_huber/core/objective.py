"""The renewable objective of one batch: f, its gradient g and the Newton matrix H.

A RenewableProblem freezes everything f depends on besides beta (the batch, the previous
state, N, tau, h, the historical L1 subgradient), so solvers and tests evaluate exactly the
same function. Every evaluation accepts the residual r = y - X beta when the caller already
has it, because the row pass dominates the cost and a line search needs r for f and then,
on acceptance, for g and H at the same beta.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..config import UpdateConfig
from ..state import RenewableState
from .design import penalty_mask
from .gram import weighted_gram
from .huber import checked_bandwidth, huber_loss, huber_score, lambda_value, smoothed_curvature


@dataclasses.dataclass(frozen=True)
class RenewableProblem:
    """One batch's renewable objective (docs/algorithm.md, "Renewable objective").

    X (n, P), y (n,), w (n,): the batch in the working dtype. beta0 (P,), information (P, P):
    the previous state. weight_sum: N = W0 + sum(w). historical: (W0/N) lambda0 sign(beta0) m,
    or None when the term is absent (penalty "none" or no previous sample).
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
        previous_weight = float(state.weight_sum)
        weight_sum = previous_weight + batch_weight
        tau = float(config.tau)
        mask = penalty_mask(xp, config.n_parameters, config.fit_intercept, dtype)
        historical = None
        if config.penalty == "l1" and state.n_samples_seen > 0:
            scale = previous_weight / weight_sum * float(state.previous_lambda)
            historical = scale * xp.sign(state.coefficients) * mask
        return cls(
            xp=xp,
            X=X_design,
            y=y,
            w=w,
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
        )

    @property
    def dtype(self):
        return self.beta0.dtype

    @property
    def n_parameters(self) -> int:
        return int(self.beta0.shape[0])


def residual(problem: RenewableProblem, beta):
    """r = y - X beta."""
    return problem.y - problem.X @ beta


def objective(problem: RenewableProblem, beta, r=None) -> float:
    """f(beta) = [sum w rho(r) + delta' J delta / 2] / N - <historical, delta> (smooth part only;
    the L1 penalty of the current batch is added by the caller that needs it)."""
    xp = problem.xp
    if r is None:
        r = residual(problem, beta)
    delta = beta - problem.beta0
    loss = xp.sum(problem.w * huber_loss(xp, r, problem.tau))
    quadratic = delta @ (problem.information @ delta)
    value = (loss + 0.5 * quadratic) / problem.weight_sum
    if problem.historical is not None:
        value = value - problem.historical @ delta
    return float(value)


def gradient(problem: RenewableProblem, beta, r=None):
    """g(beta) = [-X' (w psi(r)) + J delta] / N - historical, a (P,) array."""
    xp = problem.xp
    if r is None:
        r = residual(problem, beta)
    score = problem.w * huber_score(xp, r, problem.tau)
    delta = beta - problem.beta0
    g = (problem.information @ delta - problem.X.T @ score) / problem.weight_sum
    if problem.historical is not None:
        g = g - problem.historical
    return g


def curvature_weights(problem: RenewableProblem, r):
    """w * c(r) with this batch's bandwidth: the row weights of the Hessian and of J_new."""
    return problem.w * smoothed_curvature(problem.xp, r, problem.tau, problem.bandwidth)


def hessian(problem: RenewableProblem, beta, r=None):
    """H(beta) = [X' diag(w c(r)) X + J] / N + ridge I, ridge added after dividing by N."""
    xp = problem.xp
    if r is None:
        r = residual(problem, beta)
    gram = weighted_gram(xp, problem.X, curvature_weights(problem, r))
    h = (gram + problem.information) / problem.weight_sum
    if problem.ridge != 0.0:
        h = h + problem.ridge * xp.eye(problem.n_parameters, dtype=problem.dtype)
    return h
