"""LAMM proximal gradient for penalty "l1" (Fan, Liu, Sun & Zhang 2018), as docs/algorithm.md
("Penalised") fixes it: a quadratic majoriser with curvature phi, doubled until it majorises f,
and after 40 rejections attempts from the curvature bound of f's Hessian, so no scale of the
data can exhaust the doublings before phi majorises."""

from __future__ import annotations

import numpy

from .huber import soft_threshold
from .objective import RenewableProblem, curvature_bound, gradient, objective, residual
from .rules import (
    LAMM_ATTEMPTS,
    LAMM_BOUND_ATTEMPTS,
    LAMM_INITIAL_PHI,
    lamm_accepts,
    lamm_relaxed_phi,
    lamm_upper,
    step_converged,
    within_rounding,
)
from .solver_result import SolverResult


def solve_lamm(problem: RenewableProblem, max_iter: int, tol: float) -> SolverResult:
    xp = problem.xp
    eps = float(numpy.finfo(problem.dtype).eps)
    beta = problem.beta0
    r = residual(problem, beta)
    F = objective(problem, beta, r)
    phi = LAMM_INITIAL_PHI
    bound = None  # computed the first time 40 attempts are rejected
    for iteration in range(1, max_iter + 1):
        g = gradient(problem, beta, r)
        accepted = None
        for attempt in range(LAMM_ATTEMPTS + LAMM_BOUND_ATTEMPTS):
            if attempt == LAMM_ATTEMPTS:
                if bound is None:
                    bound = curvature_bound(problem)
                phi = max(phi, bound)
            # The mask zeroes the intercept's threshold: it is never penalised.
            threshold = (problem.lambda_value / phi) * problem.mask
            candidate = soft_threshold(xp, beta - g / phi, threshold)
            step = candidate - beta
            squared = float(step @ step)
            majoriser = lamm_upper(F, float(g @ step), phi, squared)
            candidate_r = residual(problem, candidate)
            candidate_F = objective(problem, candidate, candidate_r)
            if lamm_accepts(candidate_F, majoriser):
                accepted = candidate, candidate_r, candidate_F
                break
            phi *= 2.0
        if accepted is None:
            # phi was doubled after the last rejected attempt: its model used phi / 2.
            converged = within_rounding(0.25 * phi * squared, F, eps)
            return SolverResult(beta, r, iteration, converged, F)
        beta, r, F = accepted
        phi = lamm_relaxed_phi(phi)
        if step_converged(xp, step, beta, tol):
            return SolverResult(beta, r, iteration, True, F)
    return SolverResult(beta, r, max_iter, False, F)
