"""Damped Newton for penalty "none", with the majoriser fallback of docs/algorithm.md
("Unpenalised"): when no halving of the Newton step decreases f, the same iteration retries
with a matrix that majorises f, whose step decreases f wherever beta is not optimal."""

from __future__ import annotations

import numpy

from .linear_solve import solve_linear
from .objective import (
    RenewableProblem,
    expect_line_search,
    gradient,
    hessian,
    in_working_dtype,
    majoriser_matrix,
    objective,
    residual,
    wide,
)
from .rules import (
    LINE_SEARCH_TRIALS,
    decrease_settled,
    rejected_direction_converged,
    step_converged,
)
from .solver_result import SolverResult

# After the trial of this index is rejected, expect_line_search is told of this many next ones
# (growing blocks: a search that accepts soon after wastes little, a long one costs few hints).
_HINTS_AFTER = {1: 4, 5: 8, 13: LINE_SEARCH_TRIALS}


def line_search_candidate(problem: RenewableProblem, beta, t: float, direction):
    """beta - t d, formed in float64 and rounded once to the working dtype."""
    return in_working_dtype(problem, wide(problem.xp, beta) - t * direction)


def _line_search(problem: RenewableProblem, beta, F: float, direction, strict: bool = False):
    """The first of beta - t d, t = 1, 1/2, ..., 2^-26, with f <= F (plain non-increase, no
    slope term: the contract fixes this acceptance rule; f < F when strict), as
    (beta, r, F, t); None when all fail."""
    t = 1.0
    for trial in range(LINE_SEARCH_TRIALS):
        candidate = line_search_candidate(problem, beta, t, direction)
        candidate_r = residual(problem, candidate)
        candidate_F = objective(problem, candidate, candidate_r)
        if candidate_F < F or (candidate_F == F and not strict):
            return candidate, candidate_r, candidate_F, t
        t *= 0.5
        if trial in _HINTS_AFTER:
            # Rejected twice (then 4 and 8 more times): the search may go on halving (rounding
            # noise near the optimum); a problem whose trials cost a round trip each can sum
            # the next ones at once.
            count = min(_HINTS_AFTER[trial], LINE_SEARCH_TRIALS - 1 - trial)
            expect_line_search(problem, beta, direction, t, count)
    return None


def _majoriser_check(problem: RenewableProblem, beta, r, F: float, eps: float, tol: float):
    """The confirmation of docs/algorithm.md ("Unpenalised", rule 5) at an accepted beta: the
    majoriser's direction there, solve(M(beta), g(beta)), and whether it passes the test of a
    rejected direction (rules.rejected_direction_converged), which lets the solve end."""
    g = gradient(problem, beta, r, in_float64=True)
    check = solve_linear(problem.xp, majoriser_matrix(problem, r), g, problem.ladder_epsilon)
    confirmed = rejected_direction_converged(problem.xp, 0.5 * float(g @ check.x), F, eps,
                                             check.x, beta, tol)
    return check, confirmed


def solve_newton(problem: RenewableProblem, max_iter: int, tol: float) -> SolverResult:
    xp = problem.xp
    eps = float(numpy.finfo(problem.dtype).eps)
    beta = problem.beta0
    r = residual(problem, beta)
    F = objective(problem, beta, r)
    used_fallback = False
    # The majoriser's direction at beta when a confirmation refused to end the solve: the next
    # iteration searches along it instead of solving with H.
    pending = None
    for iteration in range(1, max_iter + 1):
        g = gradient(problem, beta, r, in_float64=True)
        if pending is not None:
            solution, pending = pending, None
            newton_direction = False
            accepted = _line_search(problem, beta, F, solution.x)
        else:
            solution = solve_linear(xp, hessian(problem, beta, r), g, problem.ladder_epsilon)
            used_fallback = used_fallback or solution.used_regularized_fallback
            newton_direction = True
            accepted = _line_search(problem, beta, F, solution.x)
            # A zero Newton direction (a singular H, e.g. ridge 0 with every residual beyond
            # tau + h) gives way to a majoriser step that strictly decreases f; without one the
            # zero step stands (beta is then optimal to rounding).
            stalled = accepted is not None and not bool(xp.any(solution.x))
            if accepted is None or stalled:
                newton_direction = False
                fallback = solve_linear(xp, majoriser_matrix(problem, r), g,
                                        problem.ladder_epsilon)
                used_fallback = used_fallback or fallback.used_regularized_fallback
                retry = _line_search(problem, beta, F, fallback.x, strict=stalled)
                if retry is not None or not stalled:
                    solution, accepted = fallback, retry
        if accepted is None:
            converged = rejected_direction_converged(xp, 0.5 * float(g @ solution.x), F, eps,
                                                     solution.x, beta, tol)
            return SolverResult(beta, r, iteration, converged, F, used_fallback)
        candidate, candidate_r, candidate_F, t = accepted
        step = wide(xp, candidate) - wide(xp, beta)
        # A step the line search cut short ends the solve only when it also changed f by at
        # most tol |f|: short because of the cut, it says nothing of the distance to the
        # optimum, which a first-order decrease of f reveals.
        settled = t == 1.0 or decrease_settled(F, candidate_F, tol)
        beta, r, F = candidate, candidate_r, candidate_F
        if settled and step_converged(xp, step, beta, tol):
            if not (newton_direction and solution.truncated):
                return SolverResult(beta, r, iteration, True, F, used_fallback)
            # A direction the SVD truncated ignores g's part in the dropped directions, so its
            # short step says nothing of the distance to the optimum: the majoriser, whose
            # matrix weights every row, confirms it or gives the next direction.
            check, confirmed = _majoriser_check(problem, beta, r, F, eps, tol)
            used_fallback = used_fallback or check.used_regularized_fallback
            if confirmed:
                return SolverResult(beta, r, iteration, True, F, used_fallback)
            pending = check
    return SolverResult(beta, r, max_iter, False, F, used_fallback)
