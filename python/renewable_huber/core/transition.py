"""One renewable batch transition: solve, then fold the batch into the state."""

from __future__ import annotations

from ..config import UpdateConfig
from ..diagnostics import Diagnostics
from ..exceptions import ValidationError
from ..state import RenewableState
from .lamm_solver import solve_lamm
from .newton_solver import solve_newton
from .numerical_error import numerical_error
from .objective import RenewableProblem, curvature_gram, in_working_dtype, meat_gram, wide


def _check_consistent(state: RenewableState, X_design, y, sample_weight, config: UpdateConfig):
    # The caller validated values; these cheap checks catch a caller that mixed dtypes or
    # forgot the intercept column, which would otherwise promote silently or mis-broadcast.
    P = config.n_parameters
    dtype = state.coefficients.dtype
    if state.coefficients.shape != (P,) or state.information.shape != (P, P):
        raise ValidationError(
            f"state has coefficients {state.coefficients.shape} and information "
            f"{state.information.shape}; the config needs ({P},) and ({P}, {P})"
        )
    if state.meat is not None and state.meat.shape != (P, P):
        raise ValidationError(f"state meat has shape {state.meat.shape}; expected ({P}, {P})")
    if state.information.dtype != dtype:
        raise ValidationError(
            f"state information is {state.information.dtype} but coefficients are {dtype}"
        )
    if X_design.ndim != 2 or X_design.shape[1] != P:
        raise ValidationError(
            f"X_design has shape {X_design.shape}; expected (n, {P}) "
            f"(intercept column appended: {config.fit_intercept})"
        )
    n = X_design.shape[0]
    arrays = {"X_design": X_design, "y": y}
    if sample_weight is not None:
        arrays["sample_weight"] = sample_weight
    for name, array in arrays.items():
        if array.dtype != dtype:
            raise ValidationError(
                f"{name} is {array.dtype} but the state's working dtype is {dtype}"
            )
        if name != "X_design" and array.shape != (n,):
            raise ValidationError(f"{name} has shape {array.shape}; expected ({n},)")
    if config.penalty not in ("none", "l1"):
        raise ValidationError(f"penalty must be 'none' or 'l1', got {config.penalty!r}")


def renewable_update(xp, state: RenewableState, X_design, y, sample_weight, config: UpdateConfig):
    """One renewable batch transition (docs/algorithm.md).

    xp: numpy or cupy. state: coefficients (P,) and information (P, P) as xp arrays of the
    working dtype. X_design: (n, P), intercept column already LAST when fit_intercept.
    y: (n,). sample_weight: (n,) or None for unit weights. Inputs are never mutated.
    Returns (new RenewableState with xp arrays, Diagnostics).
    """
    _check_consistent(state, X_design, y, sample_weight, config)
    problem = RenewableProblem.from_batch(xp, state, X_design, y, sample_weight, config)
    return solve_problem(problem, state, config, int(X_design.shape[0]))


def solve_problem(problem: RenewableProblem, state: RenewableState, config: UpdateConfig,
                  n_rows: int):
    """The transition once the batch is a problem: solve, then fold the batch's information
    into the state. n_rows: the batch's row count (zero-weight rows included)."""
    xp = problem.xp
    solve = solve_lamm if config.penalty == "l1" else solve_newton
    result = solve(problem, int(config.max_iter), float(config.tol))

    # Summed in float64 (the batch's Gram is a float64 sum) and rounded once to the state's dtype.
    batch_information = curvature_gram(problem, result.residual)
    information = in_working_dtype(problem, wide(xp, state.information) + batch_information)
    if not (bool(xp.all(xp.isfinite(result.beta))) and bool(xp.all(xp.isfinite(information)))):
        raise numerical_error("the batch produced non-finite coefficients or information")
    meat = _next_meat(problem, state, result.residual, config)
    lam = problem.lambda_value
    reported_objective = result.objective
    if config.penalty == "l1":
        reported_objective += lam * float(xp.sum(xp.abs(result.beta) * problem.mask))
    new_state = RenewableState(
        # a solver whose first iteration accepts nothing returns beta0 itself, and the new
        # state must never alias the caller's arrays
        coefficients=xp.array(result.beta, copy=True),
        information=information,
        n_samples_seen=int(state.n_samples_seen) + n_rows,
        batch_count=int(state.batch_count) + 1,
        previous_lambda=lam,
        weight_sum=problem.weight_sum,
        meat=meat,
    )
    diagnostics = Diagnostics(
        iterations=result.iterations,
        converged=result.converged,
        objective=reported_objective,
        lambda_value=lam,
        bandwidth=problem.bandwidth,
        used_regularized_fallback=result.used_regularized_fallback,
    )
    return new_state, diagnostics


def _next_meat(problem: RenewableProblem, state: RenewableState, residual, config):
    """K after this batch, or None (inference unavailable) when the state had no K or the
    batch is L1-penalised: post-selection intervals are not valid, so an L1 batch ends K."""
    if state.meat is None or config.penalty != "none":
        return None
    xp = problem.xp
    meat = state.meat + meat_gram(problem, residual)
    if not bool(xp.all(xp.isfinite(meat))):
        raise numerical_error("the batch produced a non-finite meat matrix K")
    return meat
