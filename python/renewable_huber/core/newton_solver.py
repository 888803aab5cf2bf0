"""Damped Newton for penalty "none" (spec/ALGORITHM.md, "Unpenalised solver")."""

from __future__ import annotations

from .convergence import step_converged
from .linear_solve import solve_linear
from .objective import RenewableProblem, gradient, hessian, objective, residual
from .solver_result import SolverResult

# t = 1, 1/2, ..., 2^-26: the spec's 27 trials (the next halving would fall below 1e-8).
LINE_SEARCH_TRIALS = 27


def solve_newton(problem: RenewableProblem, max_iter: int, tol: float) -> SolverResult:
    xp = problem.xp
    beta = problem.beta0
    r = residual(problem, beta)
    F = objective(problem, beta, r)
    used_fallback = False
    for iteration in range(1, max_iter + 1):
        solution = solve_linear(xp, hessian(problem, beta, r), gradient(problem, beta, r))
        used_fallback = used_fallback or solution.used_regularized_fallback
        accepted = None
        t = 1.0
        for _ in range(LINE_SEARCH_TRIALS):
            candidate = beta - t * solution.x
            candidate_r = residual(problem, candidate)
            candidate_F = objective(problem, candidate, candidate_r)
            # Plain non-increase, no Armijo slope term: the spec fixes this acceptance rule.
            if candidate_F <= F:
                accepted = candidate, candidate_r, candidate_F
                break
            t *= 0.5
        if accepted is None:
            return SolverResult(beta, r, iteration, False, F, used_fallback)
        step = accepted[0] - beta
        beta, r, F = accepted
        if step_converged(xp, step, beta, tol):
            return SolverResult(beta, r, iteration, True, F, used_fallback)
    return SolverResult(beta, r, max_iter, False, F, used_fallback)
