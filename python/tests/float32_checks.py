"""Float32 comparisons shared by the native-engine tests.

A float32 engine decides on float32 values (docs/decisions.md "Float32 oracle"): near the
optimum it stops where float32 no longer resolves progress, as the float32 NumPy reference
does, but not necessarily at the same place. Both are compared with the float64 computation on
the same float32 data, within the golden float32 tolerance plus the flat-optimum radius.
"""

from __future__ import annotations

import numpy as np


def scaled_atol(rtol: float, reference: np.ndarray) -> float:
    # Coefficients near zero (L1 zeros them exactly) need an absolute floor on the scale of the
    # vector, else a 1e-9 coefficient against 0 fails a purely relative test.
    return rtol * max(1.0, float(np.max(np.abs(reference))))


def assert_float32_close(actual, reference, what: str, slack: float = 0.0):
    reference = np.asarray(reference, dtype=np.float64)
    np.testing.assert_allclose(
        actual, reference, rtol=4e-4, atol=scaled_atol(4e-4, reference) + slack, err_msg=what
    )


def flat_radius(ref_state, config, dtype=np.float64) -> float:
    """How far apart two correct engines deciding on `dtype` values may stop:
    10 sqrt(eps cond(H)) (1 + ||beta||), eps of that dtype. sqrt(eps cond(H)) is an
    order-of-magnitude estimate; hypothesis found float64 gaps up to 1.5x it (p=203 and p=296,
    tau=0.8, first batches of 2P+5 rows), hence the factor 10. float32 (measured on 1089
    batches of these streams against the float64 core): native_cpu up to 2.7x, the float32
    core itself up to 7.3x. A real engine error (a wrong term, a wrong weight) is far larger."""
    eps = np.finfo(dtype).eps
    beta = ref_state.coefficients
    hessian = ref_state.information / ref_state.weight_sum + config.ridge * np.eye(beta.size)
    return float(10.0 * np.sqrt(eps * np.linalg.cond(hessian)) * (1.0 + np.linalg.norm(beta)))
