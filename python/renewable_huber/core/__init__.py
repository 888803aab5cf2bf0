"""The reference algorithm of docs/algorithm.md, written once against an array namespace
`xp` (numpy or cupy). Every engine is checked against this code run on NumPy."""

from .design import design_matrix, penalty_mask
from .gram import weighted_gram
from .huber import (
    bandwidth,
    huber_loss,
    huber_score,
    lambda_value,
    smoothed_curvature,
    soft_threshold,
)
from .lamm_solver import solve_lamm
from .linear_solve import LinearSolution, minimum_norm_solve, solve_linear
from .meat import batch_meat
from .newton_solver import solve_newton
from .objective import (
    RenewableProblem,
    gradient,
    hessian,
    objective,
    residual,
)
from .solver_result import SolverResult
from .transition import renewable_update

__all__ = [
    "LinearSolution",
    "RenewableProblem",
    "SolverResult",
    "bandwidth",
    "batch_meat",
    "design_matrix",
    "gradient",
    "hessian",
    "huber_loss",
    "huber_score",
    "lambda_value",
    "minimum_norm_solve",
    "objective",
    "penalty_mask",
    "renewable_update",
    "residual",
    "smoothed_curvature",
    "soft_threshold",
    "solve_lamm",
    "solve_linear",
    "solve_newton",
    "weighted_gram",
]
