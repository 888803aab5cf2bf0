"""Feature standardisation fixed by a stream's first batch (the estimator's standardize=True).

The engines fit z_j = (x_j - center_j) / scale_j instead of the raw columns x_j. The centre
and scale come from the first batch of the stream and never change afterwards: the renewable
state (coefficients, information J, meat K) is a quadratic summary in one fixed
parametrisation, so every later batch, prediction and checkpoint uses the same numbers.

First batch, weights w (ones without sample_weight):
  fit_intercept=True:  center_j = sum_i w_i x_ij / sum_i w_i,
                       scale_j  = sqrt(sum_i w_i (x_ij - center_j)^2 / sum_i w_i);
  fit_intercept=False: center_j = 0 (without an intercept, centring would change the model),
                       scale_j  = sqrt(sum_i w_i x_ij^2 / sum_i w_i).
A column whose scale is zero, or below 10 machine epsilons of the working dtype times its
centre's magnitude (constant up to rounding), keeps scale 1.

Fitted coefficients g (and intercept b) on the standardised columns map to raw units as
  coef_j = g_j / scale_j,   intercept = b - sum_j center_j coef_j,
the linear map `jacobian()` (raw = A @ standardised), so a covariance maps as A V A'.
Without a penalty the two parametrisations describe the same Huber fit; with the L1 penalty
the penalty applies to g: lambda * sum_j |g_j| = lambda * sum_j scale_j |coef_j| in raw units.
The target is never transformed: tau stays in the target's units.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from .exceptions import ValidationError
from .tau import row_stride

# A column constant up to this many rounding units of its centre keeps scale 1.
CONSTANT_COLUMN_EPSILONS = 10.0

RECORD_KEYS = ("center", "scale")


class Moments(NamedTuple):
    """Weighted column moments of some rows, float64: the weight sum, the weighted means (zeros
    without an intercept: nothing is centred) and the weighted sums of squares about them."""

    weight: float
    mean: np.ndarray
    m2: np.ndarray


def column_moments(X: np.ndarray, sample_weight: np.ndarray | None, *,
                   fit_intercept: bool) -> Moments:
    """The moments of a validated host batch (or one partition of it)."""
    X64 = np.asarray(X, dtype=np.float64)
    weights = (np.ones(X64.shape[0]) if sample_weight is None
               else np.asarray(sample_weight, dtype=np.float64))
    weight = float(weights.sum())
    if fit_intercept and weight > 0:
        mean = (weights @ X64) / weight
        spread = X64 - mean
    else:
        mean = np.zeros(X64.shape[1])
        spread = X64
    return Moments(weight, mean, weights @ (spread * spread))


def combine_moments(a: Moments, b: Moments) -> Moments:
    """The moments of two disjoint sets of rows (Chan, Golub and LeVeque's pairwise update:
    no sum of squares about zero is ever differenced)."""
    if a.weight == 0:
        return b
    if b.weight == 0:
        return a
    weight = a.weight + b.weight
    delta = b.mean - a.mean
    mean = a.mean + delta * (b.weight / weight)
    return Moments(weight, mean, a.m2 + b.m2 + delta * delta * (a.weight * b.weight / weight))


class FeatureScaling(NamedTuple):
    """The centre and scale of each feature, float64 (p,) arrays, scale > 0."""

    center: np.ndarray
    scale: np.ndarray

    @classmethod
    def from_batch(cls, X: np.ndarray, sample_weight: np.ndarray | None, *,
                   fit_intercept: bool) -> FeatureScaling:
        """The scaling a stream fixes from its first (validated, host) batch."""
        return cls.from_moments(column_moments(X, sample_weight, fit_intercept=fit_intercept),
                                X.dtype)

    @classmethod
    def from_moments(cls, moments: Moments, dtype: np.dtype) -> FeatureScaling:
        """The scaling of a first batch with these moments, in the stream's working dtype."""
        center = np.array(moments.mean, dtype=np.float64)
        scale = np.sqrt(moments.m2 / moments.weight) if moments.weight > 0 else np.ones_like(
            center)
        rounding = CONSTANT_COLUMN_EPSILONS * np.finfo(dtype).eps * np.abs(center)
        constant = ~(scale > rounding) | ~(scale >= np.finfo(dtype).tiny)
        scale[constant] = 1.0
        return cls(center, scale)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """(X - center) / scale in X's dtype, a new C-contiguous array; ValidationError naming
        the first row that the transform takes beyond the dtype's range."""
        dtype = X.dtype
        with np.errstate(over="ignore", invalid="ignore"):
            standardised = np.subtract(X, self.center.astype(dtype), dtype=dtype)
            np.divide(standardised, self.scale.astype(dtype), out=standardised)
        # From finite X, centre and scale the only non-finite results are overflows to +-inf,
        # which the max and the min reveal without an n x p temporary.
        if standardised.size and not (np.isfinite(standardised.max())
                                      and np.isfinite(standardised.min())):
            row, column = np.unravel_index(int(np.argmin(np.isfinite(standardised))),
                                           standardised.shape)
            raise self._overflow(X, int(row), int(column))
        return standardised

    def _overflow(self, X: np.ndarray, row: int, column: int) -> ValidationError:
        return ValidationError(
            f"X[{row}, {column}] = {float(X[row, column])!r} overflows {X.dtype.name} once "
            f"standardised with the stream's first-batch centre {float(self.center[column])!r} "
            f"and scale {float(self.scale[column])!r} (standardize=True); this batch is far "
            "outside the range of the stream's first batch"
        )

    def raw_parameters(self, parameters: np.ndarray, fit_intercept: bool) -> np.ndarray:
        """The parameters (coefficients, then the intercept when fitted) in raw units,
        float64."""
        return self.jacobian(fit_intercept) @ np.asarray(parameters, dtype=np.float64)

    def jacobian(self, fit_intercept: bool) -> np.ndarray:
        """A with raw parameters = A @ standardised parameters, (P, P) float64."""
        p = self.scale.shape[0]
        size = p + int(fit_intercept)
        A = np.zeros((size, size))
        A[np.arange(p), np.arange(p)] = 1.0 / self.scale
        if fit_intercept:
            A[p, :p] = -self.center / self.scale
            A[p, p] = 1.0
        return A

    def as_record(self) -> dict[str, list[float]]:
        """JSON-ready form (a checkpoint's `feature_scaling`)."""
        return {"center": self.center.tolist(), "scale": self.scale.tolist()}

    @classmethod
    def from_record(cls, record: Any, n_features: int, fit_intercept: bool) -> FeatureScaling:
        """A checked record (as_record's form); ValidationError saying what is wrong."""
        if not isinstance(record, dict) or set(record) != set(RECORD_KEYS):
            raise ValidationError(
                f"feature_scaling must be an object with exactly the keys {list(RECORD_KEYS)}"
            )
        arrays = {}
        for key in RECORD_KEYS:
            values = record[key]
            if (not isinstance(values, list) or len(values) != n_features or not all(
                    isinstance(value, (int, float)) and not isinstance(value, bool)
                    for value in values)):
                raise ValidationError(
                    f"feature_scaling.{key} must be a list of {n_features} numbers (one per "
                    "feature)"
                )
            arrays[key] = np.array(values, dtype=np.float64)
            if not np.isfinite(arrays[key]).all():
                raise ValidationError(f"feature_scaling.{key} must be finite")
        normal = arrays["scale"] >= np.finfo(np.float64).tiny
        if not normal.all():
            j = int(np.argmin(normal))
            raise ValidationError(
                f"feature_scaling.scale[{j}] is {float(arrays['scale'][j])!r}; every scale "
                "must be a positive normal number (a first batch never gives a smaller one)"
            )
        if not fit_intercept and arrays["center"].any():
            raise ValidationError(
                "feature_scaling.center must be all zeros without an intercept "
                "(fit_intercept=False streams are scaled, never centred)"
            )
        return cls(arrays["center"], arrays["scale"])


# The L1 solver (LAMM) is first-order: its steps are scaled by a curvature bound of order the
# largest column's mean square, so on a design far from standardised it crawls along the
# other columns and may report convergence next to its starting zeros (docs/python.md, "L1
# fits need standardised features"). A first batch whose columns' mean squares (the
# intercept's is 1) spread beyond SPREAD_LIMIT, or with a column nearly parallel to the
# intercept (squared cosine beyond PARALLEL_LIMIT, i.e. |mean| >= 10 standard deviations),
# is far from standardised. The first batches of the golden corpora's L1 cases spread at most
# 9.1 with squared cosines at most 0.15, except the two in raw units (8.5e9 and 5.7e12); the
# real tables in raw units spread 7.5e3 to 1.6e11. Both limits are two orders of magnitude
# from a standardised design, so the moments come from at most CHECK_ROWS evenly spaced rows:
# the check costs a fixed amount per column instead of a pass over the batch (on a 2-core AMD
# EPYC, a 32,768 x 90 float32 batch 5.6 -> 0.1 ms, 50,000 x 1,024 89 -> 0.7 ms; the whole pass
# had made the standard reference stream with L1 and host input 3x slower on an H200 host).
SPREAD_LIMIT = 100.0
PARALLEL_LIMIT = 100.0 / 101.0
CHECK_ROWS = 1024


def unstandardised_design(X: np.ndarray, sample_weight: np.ndarray | None, *,
                          fit_intercept: bool) -> str | None:
    """Why the (validated, host) batch's columns are far from standardised (the spread of
    their mean squares, then the column most nearly parallel to the intercept), or None,
    judged on at most CHECK_ROWS evenly spaced rows (weighted by their sample weights)."""
    step = row_stride(X.shape[0], CHECK_ROWS)
    rows = np.asarray(X[::step], dtype=np.float64)
    weighted, total = rows, float(rows.shape[0])
    if sample_weight is not None:
        weights = np.asarray(sample_weight[::step], dtype=np.float64)
        weight_sum = float(weights.sum())
        if weight_sum > 0:  # else every sampled row has weight zero: judge the rows themselves
            weighted, total = rows * weights[:, None], weight_sum
    square = np.einsum("ij,ij->j", weighted, rows) / total
    reasons = []
    with_intercept = np.append(square, 1.0) if fit_intercept else square
    used = np.flatnonzero(with_intercept > 0)
    if used.size >= 2:
        high = used[np.argmax(with_intercept[used])]
        low = used[np.argmin(with_intercept[used])]
        if not with_intercept[high] <= SPREAD_LIMIT * with_intercept[low]:
            def name(j):
                return "the intercept column" if j == X.shape[1] else f"column {j}"

            reasons.append(f"the mean squares of its columns span {with_intercept[low]:.3g} "
                           f"({name(low)}) to {with_intercept[high]:.3g} ({name(high)})")
    if fit_intercept:
        # einsum's column sums: a third of ndarray.sum(axis=0)'s time on these few rows (24 ->
        # 7.5 us on 1,024 x 16 on an H100 host, where the whole check took 52-68 us)
        mean = np.einsum("ij->j", weighted) / total
        with np.errstate(invalid="ignore", divide="ignore"):
            parallel = np.where(square > 0, mean * mean / square, 0.0)
        j = int(np.argmax(parallel))
        if parallel[j] > PARALLEL_LIMIT:
            spread = math.sqrt(max(square[j] - mean[j] ** 2, 0.0))
            reasons.append(f"column {j} is nearly parallel to the intercept (mean "
                           f"{mean[j]:.4g}, standard deviation {spread:.4g})")
    return "; ".join(reasons) or None
