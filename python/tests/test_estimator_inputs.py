"""Input rules of spec/PYTHON.md: shapes, finiteness, dtype, sparse, weights, tables and
device arrays, and the transactional guarantee when any of them is violated."""

import numpy as np
import pytest

from renewable_huber import (
    BackendContractError,
    NotFittedError,
    RenewableHuberRegressor,
    ValidationError,
)

RNG = np.random.default_rng(7)
X = RNG.normal(size=(40, 3))
Y = X @ np.array([1.0, -2.0, 0.5]) + 0.3 + RNG.normal(size=40)


def fitted(**params):
    return RenewableHuberRegressor(backend="numpy", **params).partial_fit(X[:20], Y[:20])


def snapshot(estimator):
    """Every fitted attribute and the state, copied, to compare after a failure."""
    state = estimator.state_
    return {
        "coef_": estimator.coef_.copy(),
        "intercept_": estimator.intercept_,
        "n_features_in_": estimator.n_features_in_,
        "n_samples_seen_": estimator.n_samples_seen_,
        "n_iter_": estimator.n_iter_,
        "backend_": estimator.backend_,
        "diagnostics_": dict(estimator.diagnostics_),
        "feature_names_in_": getattr(estimator, "feature_names_in_", None),
        "coefficients": state.coefficients.copy(),
        "information": state.information.copy(),
        "counters": (state.n_samples_seen, state.batch_count, state.previous_lambda,
                     state.weight_sum),
    }


def assert_unchanged(before, after):
    assert before.keys() == after.keys()
    for key in before:
        if isinstance(before[key], np.ndarray):
            np.testing.assert_array_equal(before[key], after[key])
        else:
            assert before[key] == after[key], key


def with_nan(array, index):
    array = np.array(array, dtype=float)
    array[index] = np.nan
    return array


BAD_BATCHES = [
    ("X 1-D", X[:, 0], Y, None, ValidationError, r"X must be 2-D .*X.reshape\(-1, 1\)"),
    ("X 3-D", X.reshape(40, 3, 1), Y, None, ValidationError, "X must be 2-D"),
    ("X no rows", X[:0], Y[:0], None, ValidationError, "at least 1 row and 1 column"),
    ("X no columns", X[:, :0], Y, None, ValidationError, "at least 1 row and 1 column"),
    ("X NaN", with_nan(X, (3, 1)), Y, None, ValidationError,
     r"X contains NaN or infinity \(first at row 3, column 1\)"),
    ("X inf", np.where(X > 2, np.inf, X), Y, None, ValidationError, "X contains NaN or infinity"),
    ("X complex", X + 1j, Y, None, ValidationError, "X is complex"),
    ("X text", X.astype(str), Y, None, ValidationError, "X must be numeric"),
    ("X ragged", [[1.0, 2.0], [3.0]], Y[:2], None, ValidationError, "X could not be read"),
    ("y NaN", X, with_nan(Y, 5), None, ValidationError,
     r"y contains NaN or infinity \(first at index 5\)"),
    ("y complex", X, Y + 0j, None, ValidationError, "y is complex"),
    ("y 2 columns", X, np.c_[Y, Y], None, ValidationError,
     r"y must be 1-D \(n_samples,\) or a single column"),
    ("y short", X, Y[:-1], None, ValidationError, "X has 40 rows but y has 39 entries"),
    ("w NaN", X, Y, with_nan(np.ones(40), 2), ValidationError,
     r"sample_weight contains NaN or infinity \(first at index 2\)"),
    ("w negative", X, Y, np.r_[np.ones(39), -1.0], ValidationError,
     r"sample_weight must be >= 0, got .*-1.0.* at index 39"),
    ("w all zero", X, Y, np.zeros(40), ValidationError, "sample_weight is all zero"),
    ("w 2-D", X, Y, np.ones((40, 1)), ValidationError, r"sample_weight must be 1-D"),
    ("w scalar", X, Y, 1.0, ValidationError, r"sample_weight must be 1-D"),
    ("w short", X, Y, np.ones(39), ValidationError,
     "X has 40 rows but sample_weight has 39 entries"),
    ("w complex", X, Y, np.ones(40, dtype=complex), ValidationError, "sample_weight is complex"),
]


@pytest.mark.parametrize(
    ("X_bad", "y_bad", "w_bad", "error", "message"),
    [case[1:] for case in BAD_BATCHES],
    ids=[case[0] for case in BAD_BATCHES],
)
def test_bad_first_batch_is_rejected_and_nothing_is_fitted(X_bad, y_bad, w_bad, error, message):
    estimator = RenewableHuberRegressor(backend="numpy")
    with pytest.raises(error, match=message):
        estimator.partial_fit(X_bad, y_bad, sample_weight=w_bad)
    assert not hasattr(estimator, "coef_")
    with pytest.raises(NotFittedError):
        estimator.predict(X)


@pytest.mark.parametrize(
    ("X_bad", "y_bad", "w_bad", "error", "message"),
    [case[1:] for case in BAD_BATCHES],
    ids=[case[0] for case in BAD_BATCHES],
)
def test_bad_later_batch_leaves_state_and_every_attribute_untouched(
    X_bad, y_bad, w_bad, error, message
):
    estimator = fitted()
    before = snapshot(estimator)
    with pytest.raises(error, match=message):
        estimator.partial_fit(X_bad, y_bad, sample_weight=w_bad)
    assert_unchanged(before, snapshot(estimator))
    # fit() validates before resetting: a bad fit keeps the previous stream too.
    with pytest.raises(error, match=message):
        estimator.fit(X_bad, y_bad, sample_weight=w_bad)
    assert_unchanged(before, snapshot(estimator))


def test_nan_in_second_batch_keeps_predictions_of_the_first():
    estimator = fitted()
    predictions = estimator.predict(X)
    with pytest.raises(ValidationError, match="X contains NaN"):
        estimator.partial_fit(with_nan(X[20:], (0, 0)), Y[20:])
    np.testing.assert_array_equal(estimator.predict(X), predictions)
    # The stream continues as if the bad batch never came.
    expected = fitted().partial_fit(X[20:], Y[20:])
    estimator.partial_fit(X[20:], Y[20:])
    np.testing.assert_array_equal(estimator.coef_, expected.coef_)


def test_float32_overflow_is_reported_as_such():
    big = X.copy()
    big[1, 2] = 1e300
    with pytest.raises(ValidationError, match=r"row 1, column 2 .* overflows float32"):
        RenewableHuberRegressor(backend="numpy", dtype="float32").fit(big, Y)


def test_feature_count_must_stay_the_same():
    estimator = fitted()
    with pytest.raises(ValidationError, match="X has 2 features, but the estimator was fitted "
                                              "with 3 features"):
        estimator.partial_fit(X[:, :2], Y)
    with pytest.raises(ValidationError, match="X has 4 features"):
        estimator.predict(np.c_[X, X[:, 0]])
    with pytest.raises(ValidationError, match="X has 2 features"):
        estimator.score(X[:, :2], Y)


def test_y_column_vector_is_accepted_and_equals_1d():
    column = RenewableHuberRegressor(backend="numpy").fit(X, Y.reshape(-1, 1))
    flat = RenewableHuberRegressor(backend="numpy").fit(X, Y)
    np.testing.assert_array_equal(column.coef_, flat.coef_)
    assert column.intercept_ == flat.intercept_


def test_lists_and_integer_arrays_are_cast_once_to_the_working_dtype():
    integers = np.round(X * 10).astype(np.int64)
    from_int = RenewableHuberRegressor(backend="numpy").fit(integers, Y)
    from_list = RenewableHuberRegressor(backend="numpy").fit(integers.tolist(), Y.tolist())
    from_float = RenewableHuberRegressor(backend="numpy").fit(integers.astype(float), Y)
    np.testing.assert_array_equal(from_int.coef_, from_float.coef_)
    np.testing.assert_array_equal(from_list.coef_, from_float.coef_)


def test_non_contiguous_input_equals_contiguous():
    wide = np.asfortranarray(np.repeat(X, 2, axis=1))[:, ::2]
    assert not wide.flags.c_contiguous
    a = RenewableHuberRegressor(backend="numpy").fit(wide, Y)
    b = RenewableHuberRegressor(backend="numpy").fit(np.ascontiguousarray(X), Y)
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_scipy_sparse_is_refused_with_a_toarray_hint():
    sparse = pytest.importorskip("scipy.sparse")
    estimator = RenewableHuberRegressor(backend="numpy")
    with pytest.raises(TypeError, match=r"X is a SciPy sparse matrix.*call X.toarray\(\)"):
        estimator.fit(sparse.csr_matrix(X), Y)
    with pytest.raises(TypeError, match=r"call X.toarray\(\)"):
        estimator.fit(sparse.csr_array(X), Y)
    assert not hasattr(estimator, "coef_")
    estimator = fitted()
    with pytest.raises(TypeError, match="sparse"):
        estimator.predict(sparse.csr_matrix(X))


# -- tables -----------------------------------------------------------------------------


@pytest.fixture
def pd():
    return pytest.importorskip("pandas")


def test_string_column_names_are_recorded(pd):
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    estimator = RenewableHuberRegressor(backend="numpy").fit(frame, pd.Series(Y))
    assert list(estimator.feature_names_in_) == ["a", "b", "c"]
    assert estimator.feature_names_in_.dtype == object
    array_fit = RenewableHuberRegressor(backend="numpy").fit(X, Y)
    np.testing.assert_array_equal(estimator.coef_, array_fit.coef_)
    np.testing.assert_array_equal(estimator.predict(frame), array_fit.predict(X))


def test_non_string_or_mixed_names_are_not_recorded(pd):
    for columns in ([0, 1, 2], ["a", 1, "c"]):
        frame = pd.DataFrame(X, columns=columns)
        estimator = RenewableHuberRegressor(backend="numpy").fit(frame, Y)
        assert not hasattr(estimator, "feature_names_in_")
        assert estimator.n_features_in_ == 3


def test_names_are_only_recorded_from_the_first_batch(pd):
    estimator = fitted()
    estimator.partial_fit(pd.DataFrame(X[20:], columns=["a", "b", "c"]), Y[20:])
    assert not hasattr(estimator, "feature_names_in_")


def test_later_tables_must_use_the_same_names_in_the_same_order(pd):
    estimator = RenewableHuberRegressor(backend="numpy").partial_fit(
        pd.DataFrame(X[:20], columns=["a", "b", "c"]), Y[:20]
    )
    before = snapshot(estimator)
    reordered = pd.DataFrame(X[20:], columns=["b", "a", "c"])
    with pytest.raises(ValidationError, match="feature names must be in the same order"):
        estimator.partial_fit(reordered, Y[20:])
    renamed = pd.DataFrame(X[20:], columns=["a", "b", "z"])
    with pytest.raises(ValidationError, match=r"unexpected \['z'\], missing \['c'\]"):
        estimator.partial_fit(renamed, Y[20:])
    with pytest.raises(ValidationError, match="feature names must be in the same order"):
        estimator.predict(reordered)
    with pytest.raises(ValidationError, match="feature names differ"):
        estimator.score(renamed, Y[20:])
    with pytest.raises(ValidationError, match="feature names differ"):
        estimator.predict(pd.DataFrame(X[20:]))
    assert_unchanged(before, snapshot(estimator))
    # Plain arrays carry no names and are accepted.
    estimator.partial_fit(X[20:], Y[20:])
    assert estimator.n_samples_seen_ == 40


def test_table_with_missing_values_is_rejected(pd):
    frame = pd.DataFrame({"a": [1.0, None, 3.0], "b": pd.array([1, None, 2], dtype="Int64")})
    with pytest.raises(ValidationError, match="X"):
        RenewableHuberRegressor(backend="numpy").fit(frame, [1.0, 2.0, 3.0])


# -- device arrays on host backends -----------------------------------------------------


class FakeDeviceArray:
    """Quacks like a CUDA tensor: DLPack reports a CUDA device (type 2)."""

    def __init__(self, array):
        self._array = array
        self.shape = array.shape
        self.dtype = array.dtype

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        raise AssertionError("a host backend must not consume a device array")


def test_device_arrays_are_refused_by_host_backends():
    estimator = RenewableHuberRegressor(backend="numpy")
    with pytest.raises(BackendContractError, match=r"X is a device array .* computes on the host"):
        estimator.fit(FakeDeviceArray(X), Y)
    assert not hasattr(estimator, "coef_")
    estimator = fitted()
    before = snapshot(estimator)
    with pytest.raises(BackendContractError, match="device array"):
        estimator.partial_fit(X, FakeDeviceArray(Y))
    with pytest.raises(BackendContractError, match="device array"):
        estimator.predict(FakeDeviceArray(X))
    assert_unchanged(before, snapshot(estimator))


def test_unfitted_estimator_raises_not_fitted():
    estimator = RenewableHuberRegressor()
    for call in (
        lambda: estimator.predict(X),
        lambda: estimator.score(X, Y),
        lambda: estimator.state_dict(),
        lambda: estimator.save("never-written.npz"),
        lambda: estimator.state_,
    ):
        with pytest.raises(NotFittedError, match="not fitted yet"):
            call()
    assert not hasattr(estimator, "state_")
