"""K, the "meat" of the sandwich covariance: one batch's contribution and its sum.

    K_b = X_b' diag(w_b * psi(r_b)^2) X_b,   r_b = y_b - X_b beta_b,

at the batch's committed estimate beta_b with its own tau (docs/algorithm.md, "Inference").
It is accumulated in float64 whatever the working dtype: psi^2 spans the square of the
residuals' range, which float32 would round heavily. Every engine computes this same sum; the
Dask driver and any other caller that forms a batch's state outside renewable_update calls
batch_meat.
"""

from __future__ import annotations

from .gram import weighted_gram
from .huber import huber_score


def batch_meat(xp, X_design, residual, sample_weight, tau: float):
    """X' diag(w psi(r)^2) X in float64, exactly symmetric.

    X_design: (n, P) with the intercept column LAST when there is one. residual: (n,) r at the
    batch's committed coefficients. sample_weight: (n,) or None for unit weights.
    tau: the batch's Huber threshold.
    """
    score = huber_score(xp, xp.asarray(residual, dtype=xp.float64), float(tau))
    scale = score * score
    if sample_weight is not None:
        scale = xp.asarray(sample_weight, dtype=xp.float64) * scale
    return weighted_gram(xp, xp.asarray(X_design, dtype=xp.float64), scale)
