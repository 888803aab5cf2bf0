"""LAMM proximal gradient for penalty "l1" (spec/ALGORITHM.md, "L1 solver"; Fan, Liu, Sun &
Zhang 2018): a quadratic majoriser with curvature phi, doubled until it majorises f."""

from __future__ import annotations

from .convergence import step_converged
from .huber import soft_threshold
from .objective import RenewableProblem, gradient, objective, residual
from .solver_result import SolverResult

MAJORISATION_ATTEMPTS = 40
# Absolute slack on the majorisation test, so rounding in f cannot reject an exact majoriser.
MAJORISATION_SLACK = 1e-12
PHI_FLOOR = 1e-8


def solve_lamm(problem: RenewableProblem, max_iter: int, tol: float) -> SolverResult:
    xp = problem.xp
    beta = problem.beta0
    r = residual(problem, beta)
    F = objective(problem, beta, r)
    phi = 1.0
    for iteration in range(1, max_iter + 1):
        g = gradient(problem, beta, r)
        accepted = None
        for _ in range(MAJORISATION_ATTEMPTS):
            # The mask zeroes the intercept's threshold: it is never penalised.
            threshold = (problem.lambda_value / phi) * problem.mask
            candidate = soft_threshold(xp, beta - g / phi, threshold)
            step = candidate - beta
            majoriser = F + float(g @ step) + 0.5 * phi * float(step @ step)
            candidate_r = residual(problem, candidate)
            candidate_F = objective(problem, candidate, candidate_r)
            if candidate_F <= majoriser + MAJORISATION_SLACK:
                accepted = candidate, candidate_r, candidate_F
                break
            phi *= 2.0
        if accepted is None:
            return SolverResult(beta, r, iteration, False, F)
        beta, r, F = accepted
        phi = max(phi / 2.0, PHI_FLOOR)
        if step_converged(xp, step, beta, tol):
            return SolverResult(beta, r, iteration, True, F)
    return SolverResult(beta, r, max_iter, False, F)
