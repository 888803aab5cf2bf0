"""Host arrays whose elements are not aligned to their size (np.frombuffer at an odd offset; Dask
and pickle can hand such buffers over) are valid input: the package copies them to aligned
memory before any BLAS kernel or engine reads them (the engines refuse misaligned pointers,
docs/abi.md), batches, states and the row statistics' rows and coefficients alike. OpenBLAS's
Prescott kernels read with
aligned vector loads and crashed the process on such arrays (in the range rule's dot products)
before the copy; .ci/blas-kernels runs this module under every kernel family the CPU has.
Expected values: the same fits on aligned copies of the same values, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from renewable_huber import BackendContractError, RenewableHuberRegressor, RenewableState
from renewable_huber._validation import validate_batch
from renewable_huber.backends import create_backend
from renewable_huber.config import UpdateConfig


def unaligned(values: np.ndarray, offset: int) -> np.ndarray:
    """A copy of `values` whose data start `offset` bytes into a fresh buffer (offset not a
    multiple of the itemsize: every element misaligned)."""
    buffer = bytearray(values.nbytes + offset)
    out = np.frombuffer(buffer, dtype=values.dtype, count=values.size, offset=offset)
    out = out.reshape(values.shape)
    out[...] = values
    assert not out.flags.aligned and out.flags.c_contiguous  # the premise
    return out


def data(dtype, rows=3_000, features=12, seed=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, features))
    y = X @ rng.uniform(-1.0, 1.0, features) + rng.standard_t(3, rows)
    w = rng.uniform(0.5, 2.0, rows)
    return X.astype(dtype), y.astype(dtype), w.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_validated_host_arrays_are_aligned_copies_of_the_values(dtype):
    X, y, w = data(dtype)
    batch = validate_batch(unaligned(X, 3), unaligned(y, 5), unaligned(w, 1),
                           dtype=np.dtype(dtype), accepts_device=False, backend_name="numpy",
                           check_range=True)
    for given, checked in ((X, batch.X), (y, batch.y), (w, batch.sample_weight)):
        assert checked.flags.aligned and checked.flags.c_contiguous
        np.testing.assert_array_equal(checked, given)
    # Aligned input in the working dtype is still taken as it is, without a copy.
    assert validate_batch(X, y, None, dtype=np.dtype(dtype), accepts_device=False,
                          backend_name="numpy").X is X


@pytest.fixture(params=["numpy", "native_cpu"])
def backend(request):
    if request.param == "native_cpu":
        request.getfixturevalue("cpu_library")
    return request.param


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_unaligned_batches_fit_and_predict_as_their_aligned_copies(backend, dtype):
    X, y, w = data(dtype)
    halves = ((slice(0, 1_500), 3), (slice(1_500, None), 7))
    aligned_model = RenewableHuberRegressor(backend=backend, dtype=dtype, tau=3.0)
    odd_model = RenewableHuberRegressor(backend=backend, dtype=dtype, tau=3.0)
    for rows, offset in halves:
        aligned_model.partial_fit(X[rows], y[rows], sample_weight=w[rows])
        odd_model.partial_fit(unaligned(X[rows], offset), unaligned(y[rows], offset + 2),
                              sample_weight=unaligned(w[rows], offset + 4))
    np.testing.assert_array_equal(odd_model.coef_, aligned_model.coef_)
    np.testing.assert_array_equal(odd_model.state_.information,
                                  aligned_model.state_.information)
    np.testing.assert_array_equal(odd_model.predict(unaligned(X[:100], 1)),
                                  aligned_model.predict(X[:100]))


# The backend API's update of data()'s 12 features with an intercept.
CONFIG = UpdateConfig(n_features_in=12, fit_intercept=True, tau=3.0, bandwidth_scale=1.0,
                      tol=1e-10, ridge=1e-8, max_iter=100, penalty="none", lambda_scale=1.0)


def _empty_engine(backend: str):
    engine = create_backend(backend, dtype=np.float64, n_parameters=13, n_jobs=None,
                            cuda_graphs=False, cuda_fast_math=False)
    engine.restore(RenewableState.empty(13, np.float64))
    return engine


def test_a_state_in_unaligned_arrays_restores_as_its_aligned_copy(backend):
    # The backend API (a caller's own state, as a checkpoint tool would pass it): the engine
    # reads an aligned copy; the next update equals the one from the aligned state.
    X, y, _ = data("float64")
    state, _ = _empty_engine(backend).update(X[:2_000], y[:2_000], None, CONFIG)
    odd = RenewableState(unaligned(state.coefficients, 3), unaligned(state.information, 5),
                         state.n_samples_seen, state.batch_count, state.previous_lambda,
                         state.weight_sum, None if state.meat is None else unaligned(state.meat, 1))
    resumed = []
    for start in (state, odd):
        engine = _empty_engine(backend)
        engine.restore(start)
        resumed.append(engine.update(X[2_000:], y[2_000:], None, CONFIG)[0])
    np.testing.assert_array_equal(resumed[1].coefficients, resumed[0].coefficients)
    np.testing.assert_array_equal(resumed[1].information, resumed[0].information)


def test_an_engine_refuses_unaligned_arrays_from_a_direct_caller(cpu_library):
    # Past the estimator's validation, a backend guards its engine: a clear contract error, not
    # a read of misaligned memory.
    X, y, _ = data("float64", rows=100)
    engine = _empty_engine("native_cpu")
    with pytest.raises(BackendContractError, match="X is not aligned to its 8-byte elements"):
        engine.update(unaligned(X, 4), y, None, CONFIG)
    with pytest.raises(BackendContractError, match="y is not aligned to its 8-byte elements"):
        engine.update(X, unaligned(y, 2), None, CONFIG)


def test_row_statistics_of_unaligned_rows_and_coefficients_equal_the_aligned_ones(cpu_library):
    # The Dask partitions' sums: the coefficients arrive through pickle and may be unaligned.
    from renewable_huber._loader import load_library_path
    from renewable_huber._row_statistics import RowStatistics

    X, y, w = data("float64", rows=500, features=5)
    design = np.ascontiguousarray(np.c_[X, np.ones(len(y))])
    beta = np.linspace(-0.5, 0.5, 6)
    engine = RowStatistics(load_library_path(cpu_library), np.float64, 6)
    kinds = ("loss", "score", "curvature", "meat")
    aligned = engine.compute(design, y, w, beta, kinds, 1.5, 0.1)
    odd = engine.compute(unaligned(design, 4), unaligned(y, 2), unaligned(w, 6),
                         unaligned(beta, 3), kinds, 1.5, 0.1)
    for kind in kinds:
        np.testing.assert_array_equal(odd[kind], aligned[kind])
