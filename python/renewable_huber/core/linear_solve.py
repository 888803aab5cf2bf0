"""The Newton step's linear solve: Cholesky -> LU with partial pivoting -> SVD, the last two on
the equilibrated system (docs/decisions.md, "Linear solve ladder").

The ladder and its pivot thresholds are fixed in docs/decisions.md. The thresholds exist so
that exactly singular systems (collinear columns with ridge 0) reach the SVD
deterministically instead of being "solved" through a factorisation of rounding noise.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy

from .numerical_error import numerical_error
from .rules import equilibration_factors, pivot_floor, rank_cutoff


@dataclasses.dataclass(frozen=True)
class LinearSolution:
    """x solving A x = b, which rung of the ladder produced it ("cholesky", "lu", "svd"), and
    whether that rung dropped singular values (an SVD solve of numerical rank below n: x then
    ignores b's part in the dropped directions)."""

    x: Any
    method: str
    truncated: bool = False

    @property
    def used_regularized_fallback(self) -> bool:
        return self.method == "svd"


def _pivots_acceptable(xp, pivots, floor: float) -> bool:
    # NaN pivots (CuPy's Cholesky reports failure through NaN, not an exception) fail both tests.
    if not bool(xp.all(xp.isfinite(pivots))):
        return False
    return float(xp.min(pivots)) > floor * float(xp.max(pivots))


def _solve_triangular(xp, T, b):
    # NumPy has no triangular solver; a general solve of a triangular factor is backward
    # stable and keeps this file namespace-generic, at a cost that is negligible next to
    # the Gram.
    return xp.linalg.solve(T, b)


def cholesky_solve(xp, A, b, eps: float):
    """x from the Cholesky factor of symmetric A, or None when the factorisation is refused at
    the pivot floor of machine epsilon eps."""
    try:
        L = xp.linalg.cholesky(A)
    except numpy.linalg.LinAlgError:
        return None
    # Each squared pivot against its own column's diagonal: the share of that column left
    # once the earlier ones are projected out. The test is invariant under diagonal scaling,
    # so features in raw units (1e5 next to the intercept's 1) are not taken for collinear.
    pivots = xp.diagonal(L) ** 2
    diagonal = xp.diagonal(A)
    if not bool(xp.all(xp.isfinite(pivots))):
        return None
    if not bool(xp.all(pivots > pivot_floor(A.shape[0], eps) * diagonal)):
        return None
    return _solve_triangular(xp, L.T, _solve_triangular(xp, L, b))


def lu_factor(xp, A):
    """Doolittle LU with partial pivoting: (LU packed in one matrix, row permutation).

    Returns None as soon as a column has no non-zero pivot (exactly singular). The row updates
    are one outer product per column, so the Python loop runs P times, never per element.
    """
    n = A.shape[0]
    lu = xp.array(A, copy=True)
    order = numpy.arange(n)
    for k in range(n):
        pivot = k + int(xp.argmax(xp.abs(lu[k:, k])))
        if pivot != k:
            lu[[k, pivot]] = lu[[pivot, k]]
            order[[k, pivot]] = order[[pivot, k]]
        if float(lu[k, k]) == 0.0:
            return None
        lu[k + 1 :, k] /= lu[k, k]
        lu[k + 1 :, k + 1 :] -= xp.outer(lu[k + 1 :, k], lu[k, k + 1 :])
    return lu, order


def lu_solve(xp, A, b, eps: float):
    """x from the partially pivoted LU of A, or None when a pivot is below the floor of machine
    epsilon eps."""
    factored = lu_factor(xp, A)
    if factored is None:
        return None
    lu, order = factored
    n = A.shape[0]
    if not _pivots_acceptable(xp, xp.abs(xp.diagonal(lu)), pivot_floor(n, eps)):
        return None
    lower = xp.tril(lu, -1) + xp.eye(n, dtype=lu.dtype)
    upper = xp.triu(lu)
    permuted = b[xp.asarray(order)]
    return _solve_triangular(xp, upper, _solve_triangular(xp, lower, permuted))


def minimum_norm_solve(xp, A, b, eps: float | None = None):
    """The minimum-norm least-squares solution with singular values <= eps * P * sigma_max
    dropped (eps: A's dtype's unless given), and the number of singular values kept (the
    numerical rank)."""
    if eps is None:
        eps = float(numpy.finfo(A.dtype).eps)
    U, s, Vt = xp.linalg.svd(A)
    keep = s > rank_cutoff(A.shape[0], eps, float(s.max()))
    inverse = xp.where(keep, 1.0 / xp.where(keep, s, 1.0), 0.0).astype(A.dtype, copy=False)
    return Vt.T @ (inverse * (U.T @ b)), int(xp.count_nonzero(keep))


def solve_linear(xp, A, b, eps: float | None = None) -> LinearSolution:
    """Solve A x = b along the ladder of docs/decisions.md ("Linear solve ladder"): Cholesky
    when A is bitwise symmetric; then, on the equilibrated system, pivoted LU, then the SVD
    (always finite). The system is solved in float64 (x is float64) with the thresholds of
    machine epsilon eps: the caller's rules.ladder_epsilon, A's own dtype's when not given.

    Raises EngineError (NUMERICAL_ERROR) when A or b already holds Inf/NaN (overflow upstream),
    where no rung could produce a meaningful step.
    """
    if eps is None:
        eps = float(numpy.finfo(A.dtype).eps)
    A = A.astype(xp.float64, copy=False)
    b = b.astype(xp.float64, copy=False)
    if not (bool(xp.all(xp.isfinite(A))) and bool(xp.all(xp.isfinite(b)))):
        raise numerical_error("the Newton system holds non-finite values (overflow)")
    if bool(xp.all(A == A.T)):
        x = cholesky_solve(xp, A, b, eps)
        if x is not None:
            return LinearSolution(x, "cholesky")
    # LU's pivot test and the SVD's rank cutoff compare columns with each other, so they run
    # on the equilibrated system diag(d) A diag(d) y = d b, x = d y: raw units alone never make
    # a system look singular.
    d = equilibration_factors(xp, xp.diagonal(A)).astype(A.dtype, copy=False)
    scaled = A * d[:, None] * d[None, :]
    if not bool(xp.all(xp.isfinite(scaled))):
        # No Newton matrix overflows so (|A_ij| <= sqrt(A_ii A_jj) when A is positive
        # semi-definite); whatever did goes on unscaled.
        d = xp.ones_like(d)
        scaled = A
    y = lu_solve(xp, scaled, d * b, eps)
    if y is not None:
        return LinearSolution(d * y, "lu")
    y, rank = minimum_norm_solve(xp, scaled, d * b, eps)
    if rank < A.shape[0] and scaled is not A:
        # Rank deficient after equilibration. Where the cutoff on A itself keeps the same
        # rank (collinear columns of like scale), the step is A's minimum-norm solution, the
        # norm of beta; where raw units make it cut more, the equilibrated one.
        x, raw_rank = minimum_norm_solve(xp, A, b, eps)
        if raw_rank == rank:
            return LinearSolution(x, "svd", truncated=True)
    return LinearSolution(d * y, "svd", truncated=rank < A.shape[0])
