"""The shared stopping rule of both solvers."""

from __future__ import annotations


def step_converged(xp, step, beta, tol: float) -> bool:
    """||step||_2 <= tol * (1 + ||beta||_2), beta the newly accepted iterate."""
    return float(xp.linalg.norm(step)) <= tol * (1.0 + float(xp.linalg.norm(beta)))
