"""Benchmark data exactly as docs/benchmarks.md defines it.

Draw order from one PCG64 generator seeded with 42 + shape index: X (rows x features, drawn
directly in the target dtype), the true coefficients (features, then the intercept, float64),
the noise (float64, sd 0.2), then the outlier values (float64, sd 8) that REPLACE the noise on
rows 0, stride, 2*stride, ... with stride = max(100, rows // 100). y is formed in float64 and
rounded once to the target dtype, so float32 and float64 data share their signal.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np

from .profiles import Shape

NOISE_SD = 0.2
OUTLIER_SD = 8.0


@dataclasses.dataclass(frozen=True)
class Dataset:
    shape: Shape
    dtype: str
    X: np.ndarray
    y: np.ndarray
    sha256: str


def outlier_stride(rows: int) -> int:
    return max(100, rows // 100)


def dataset_sha256(X: np.ndarray, y: np.ndarray) -> str:
    """SHA-256 of X's bytes then y's bytes (C order), the identity every worker re-checks."""
    digest = hashlib.sha256()
    digest.update(np.ascontiguousarray(X).data)
    digest.update(np.ascontiguousarray(y).data)
    return digest.hexdigest()


def generate(shape: Shape, dtype: str) -> Dataset:
    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    rng = np.random.default_rng(shape.seed)
    X = rng.standard_normal((shape.rows, shape.features), dtype=np.dtype(dtype))
    coef = rng.standard_normal(shape.features)
    intercept = rng.standard_normal()
    noise = NOISE_SD * rng.standard_normal(shape.rows)
    outlier_rows = np.arange(0, shape.rows, outlier_stride(shape.rows))
    noise[outlier_rows] = OUTLIER_SD * rng.standard_normal(outlier_rows.size)
    y = (X.astype(np.float64, copy=False) @ coef + intercept + noise).astype(dtype)
    return Dataset(shape, dtype, X, y, dataset_sha256(X, y))


def write_npy(dataset: Dataset, folder: Path) -> tuple[Path, Path]:
    """Writes X and y as .npy files for worker processes; returns their paths."""
    stem = f"{dataset.shape.name}-{dataset.dtype}"
    x_path, y_path = folder / f"{stem}-X.npy", folder / f"{stem}-y.npy"
    np.save(x_path, dataset.X)
    np.save(y_path, dataset.y)
    return x_path, y_path
