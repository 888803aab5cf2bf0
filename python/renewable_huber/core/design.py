"""The design matrix and the penalty mask: where the intercept lives (the LAST column)."""

from __future__ import annotations


def design_matrix(xp, X, fit_intercept: bool):
    """(n, p) -> (n, P): a copy with an all-ones last column when fit_intercept, else X itself."""
    if not fit_intercept:
        return X
    n = X.shape[0]
    return xp.concatenate([X, xp.ones((n, 1), dtype=X.dtype)], axis=1)


def penalty_mask(xp, n_parameters: int, fit_intercept: bool, dtype):
    """m: 1 for every coefficient, 0 for the trailing intercept, which is never penalised."""
    mask = xp.ones(n_parameters, dtype=dtype)
    if fit_intercept:
        mask[-1] = 0.0
    return mask
