"""Benchmark data follows docs/benchmarks.md: seeds, dtype, noise and outlier design."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import datagen, profiles  # noqa: E402


def test_profiles_hold_the_specified_shapes():
    standard = {s.name: (s.rows, s.features, s.batch_size) for s in profiles.PROFILES["standard"]}
    assert standard == {"latency": (4_096, 16, 4_096), "reference": (100_000, 90, 32_768),
                        "wide": (16_384, 256, 4_096), "streaming": (1_000_000, 32, 65_536)}
    assert [s.n_batches for s in profiles.PROFILES["standard"]] == [1, 4, 4, 16]
    assert [s.seed for s in profiles.PROFILES["smoke"]] == [42, 43]
    with pytest.raises(ValueError, match="unknown shape"):
        profiles.shapes_of("smoke", ["latency"])


def test_outlier_stride():
    assert datagen.outlier_stride(2_048) == 100
    assert datagen.outlier_stride(1_000_000) == 10_000


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_noise_and_outliers_have_the_specified_spread(dtype):
    shape = profiles.PROFILES["smoke"][1]  # 8,192 x 32
    data = datagen.generate(shape, dtype)
    assert data.X.dtype == data.y.dtype == np.dtype(dtype)
    assert data.X.shape == (shape.rows, shape.features)
    assert abs(float(data.X.mean())) < 0.01 and abs(float(data.X.std()) - 1) < 0.01
    outliers = np.zeros(shape.rows, bool)
    outliers[::datagen.outlier_stride(shape.rows)] = True
    design = np.column_stack([data.X.astype(np.float64), np.ones(shape.rows)])
    clean = ~outliers
    coef, *_ = np.linalg.lstsq(design[clean], data.y[clean].astype(np.float64), rcond=None)
    residual = data.y.astype(np.float64) - design @ coef
    assert np.std(residual[clean]) == pytest.approx(0.2, rel=0.05)
    # 82 outlier rows: their spread is 8 within sampling error
    assert 6.0 < np.std(residual[outliers]) < 10.0


def test_data_is_deterministic_and_its_hash_detects_any_change():
    shape = profiles.PROFILES["smoke"][0]
    first, second = datagen.generate(shape, "float64"), datagen.generate(shape, "float64")
    assert first.sha256 == second.sha256
    assert np.array_equal(first.X, second.X)
    changed = first.y.copy()
    changed[5] = np.nextafter(changed[5], np.inf)
    assert datagen.dataset_sha256(first.X, changed) != first.sha256
    assert datagen.generate(profiles.PROFILES["smoke"][1], "float64").sha256 != first.sha256


def test_bad_dtype_is_refused():
    with pytest.raises(ValueError, match="float16"):
        datagen.generate(profiles.PROFILES["smoke"][0], "float16")


def test_a_shape_is_found_by_name_in_whichever_profile_holds_it():
    assert profiles.profile_of("large-wide") == "large"
    assert profiles.profile_of("reference") == "standard"
    assert profiles.profile_of("nowhere") is None
    assert profiles.shape_named("large-wide").features == 1_024
    with pytest.raises(ValueError, match="no profile has a shape 'nowhere'"):
        profiles.shape_named("nowhere")
