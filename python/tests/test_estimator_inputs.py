"""The input rules (renewable_huber._validation): shapes, finiteness, range, dtype, sparse,
weights, tables and device arrays, and the transactional guarantee when any is violated."""

import math
import warnings

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
    ("X no rows", X[:0], Y[:0], None, ValidationError,
     r"X has 0 sample\(s\) \(shape=\(0, 3\)\) while a minimum of 1 is required"),
    ("X no columns", X[:, :0], Y, None, ValidationError,
     r"X has 0 feature\(s\) \(shape=\(40, 0\)\) while a minimum of 1 is required"),
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
    with pytest.raises(ValidationError, match="X has 2 features, but RenewableHuberRegressor is "
                                              "expecting 3 features as input"):
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


# ---------------------------------------------- native_cpu: NaN/Inf left to the engine's check
# An array that reaches librh_cpu unchanged (already the working dtype, C-contiguous) is not
# scanned in Python: the engine refuses it and the backend names the user's array. A cast or a
# copy is still scanned in Python. Either way the user sees the same ValidationError and
# nothing changes, in the estimator or in the engine.
NONFINITE_PLACES = [
    ("X", (3, 1), r"row 3, column 1", r"RhCudaHostBatch\.x_design\[3, 1\] is {value}"),
    ("y", (5,), r"index 5", r"RhCudaHostBatch\.y\[5\] is {value}"),
    # Weights reach the engine only with their sum: a non-finite sum is traced to its first
    # bad weight before the call (the engine would refuse the sum without a position).
    ("sample_weight", (2,), r"index 2", None),
]
# (estimator dtype, input dtype, memory order): the first two reach the engine unchanged.
NATIVE_INPUT_PATHS = {
    "float64 unchanged": ("float64", np.float64, "C"),
    "float32 unchanged": ("float32", np.float32, "C"),
    "float64 to float32 cast": ("float32", np.float64, "C"),
    "Fortran-order copy": ("float64", np.float64, "F"),
}


def native_batch(rows, input_dtype, order, place=None, value=None):
    """Rows `rows` of X, Y with unit weights, as the caller would pass them; `value` written at
    `place` = (array name, index) first."""
    arrays = {
        "X": np.array(X[rows], dtype=input_dtype, order=order),
        "y": np.array(Y[rows], dtype=input_dtype),
        "sample_weight": np.ones(len(Y[rows]), dtype=input_dtype),
    }
    if place is not None:
        arrays[place[0]][place[1]] = value
    return arrays["X"], arrays["y"], arrays["sample_weight"]


def engine_state(estimator):
    """The committed state read back from the engine itself (not the estimator's copy)."""
    state = estimator._backend.state()
    return (state.coefficients.copy(), state.information.copy(), state.n_samples_seen,
            state.batch_count, state.previous_lambda, state.weight_sum)


def assert_same_engine_state(before, after):
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])
    assert before[2:] == after[2:]


def expected_nonfinite_message(path, place, value):
    name, index, where, engine_text = place
    dtype, input_dtype, order = NATIVE_INPUT_PATHS[path]
    pattern = rf"^{name} contains NaN or infinity \(first at {where}\)"
    unchanged = np.dtype(input_dtype) == np.dtype(dtype) and (order == "C" or name != "X")
    if engine_text is not None and unchanged:
        # The engine found it: its own text (call, status, field) follows the user's name.
        return (pattern + r": rh_cuda_engine_update_host_with_state failed with "
                r"INVALID_ARGUMENT: " + engine_text.format(value=value)
                + ": values must be finite$")
    return pattern + "$"


# A -inf weight is negative first: test_native_cpu_negative_weights.
NONFINITE_CASES = [
    pytest.param(path, place, value, id=f"{path}-{place[0]}-{value}")
    for path in NATIVE_INPUT_PATHS
    for place in NONFINITE_PLACES
    for value in (np.nan, np.inf, -np.inf)
    if not (place[0] == "sample_weight" and value < 0)
]


@pytest.mark.parametrize(("path", "place", "value"), NONFINITE_CASES)
def test_native_cpu_nonfinite_first_batch_names_the_array_and_fits_nothing(
    cpu_library, path, place, value
):
    dtype, input_dtype, order = NATIVE_INPUT_PATHS[path]
    estimator = RenewableHuberRegressor(backend="native_cpu", dtype=dtype, n_jobs=1)
    bad = native_batch(slice(0, 20), input_dtype, order, place[:2], value)
    message = expected_nonfinite_message(path, place, value)
    with pytest.raises(ValidationError, match=message):
        estimator.partial_fit(*bad)
    assert not hasattr(estimator, "coef_") and estimator._backend is None
    with pytest.raises(NotFittedError):
        estimator.predict(X)
    with pytest.raises(ValidationError, match=message):
        estimator.fit(*bad)
    assert not hasattr(estimator, "coef_")


@pytest.mark.parametrize(("path", "place", "value"), NONFINITE_CASES)
def test_native_cpu_nonfinite_later_batch_changes_nothing(cpu_library, path, place, value):
    dtype, input_dtype, order = NATIVE_INPUT_PATHS[path]
    estimator = RenewableHuberRegressor(backend="native_cpu", dtype=dtype, n_jobs=1)
    estimator.partial_fit(*native_batch(slice(0, 20), input_dtype, order))
    before, engine_before = snapshot(estimator), engine_state(estimator)
    bad = native_batch(slice(20, 30), input_dtype, order, place[:2], value)
    message = expected_nonfinite_message(path, place, value)
    for call in (estimator.partial_fit, estimator.fit):
        with pytest.raises(ValidationError, match=message):
            call(*bad)
        assert_unchanged(before, snapshot(estimator))
        assert_same_engine_state(engine_before, engine_state(estimator))
    # The stream goes on exactly as if the bad batch never came.
    estimator.partial_fit(*native_batch(slice(30, 40), input_dtype, order))
    clean = RenewableHuberRegressor(backend="native_cpu", dtype=dtype, n_jobs=1)
    clean.partial_fit(*native_batch(slice(0, 20), input_dtype, order))
    clean.partial_fit(*native_batch(slice(30, 40), input_dtype, order))
    np.testing.assert_array_equal(estimator.coef_, clean.coef_)
    assert_same_engine_state(engine_state(clean), engine_state(estimator))


def test_native_cpu_reports_float32_overflow_of_a_cast(cpu_library):
    big = X.copy()
    big[1, 2] = 1e300
    estimator = RenewableHuberRegressor(backend="native_cpu", dtype="float32")
    with pytest.raises(ValidationError, match=r"row 1, column 2 .* overflows float32"):
        estimator.fit(big, Y)
    assert not hasattr(estimator, "coef_")


@pytest.mark.parametrize("first_bad", [-1.0, -np.inf])
def test_native_cpu_negative_weights(cpu_library, first_bad):
    estimator = RenewableHuberRegressor(backend="native_cpu").partial_fit(X[:20], Y[:20])
    before, engine_before = snapshot(estimator), engine_state(estimator)
    weights = np.ones(20)
    weights[[4, 9]] = [first_bad, np.nan]
    with pytest.raises(ValidationError, match=r"^sample_weight must be >= 0, got .* at index 4$"):
        estimator.partial_fit(X[20:], Y[20:], sample_weight=weights)
    with pytest.raises(ValidationError, match="^sample_weight is all zero"):
        estimator.partial_fit(X[20:], Y[20:], sample_weight=np.zeros(20))
    assert_unchanged(before, snapshot(estimator))
    assert_same_engine_state(engine_before, engine_state(estimator))


# ------------------------------------------------------------------ range rule (overflow)


@pytest.fixture(params=["numpy", "native_cpu"])
def host_backend(request):
    if request.param == "native_cpu":
        request.getfixturevalue("cpu_library")
    return request.param


def range_error(backend, X_batch, y_batch, sample_weight=None, later=True, **params):
    """The ValidationError text of a first batch and (later=True) of a later one, which must
    change nothing; returns the texts. X's part of the rule explains an engine's refusal, and
    on a later batch rows far from the fit have zero curvature and never enter the Gram, so
    the X cases check first batches only."""
    texts = []
    fresh = RenewableHuberRegressor(backend=backend, **params)
    with pytest.raises(ValidationError) as first:
        fresh.fit(X_batch, y_batch, sample_weight=sample_weight)
    assert not hasattr(fresh, "coef_") and fresh._backend is None
    texts.append(str(first.value))
    if not later:
        return texts
    dtype = params.get("dtype", "float64")
    estimator = RenewableHuberRegressor(backend=backend, **params).partial_fit(
        X[:20].astype(dtype), Y[:20].astype(dtype))
    held = engine_state if backend == "native_cpu" else snapshot  # what the backend holds
    before, engine_before = snapshot(estimator), held(estimator)
    with pytest.raises(ValidationError) as later:
        estimator.partial_fit(X_batch, y_batch, sample_weight=sample_weight)
    assert_unchanged(before, snapshot(estimator))
    if backend == "native_cpu":
        assert_same_engine_state(engine_before, engine_state(estimator))
    texts.append(str(later.value))
    return texts


def test_an_x_whose_gram_overflows_is_refused_with_the_same_text_everywhere(host_backend):
    """Every row 1e200 times X: the engine's Gram overflows, the engine refuses the batch, and
    the range rule names X and its largest row, whatever the engine."""
    texts = range_error(host_backend, X * 1e200, Y, later=False)
    # Every row's squared norm is inf in float64: the first row is named.
    expected = (
        "X is too large for float64: the engines form X'WX, and this batch's sum of "
        "(||x_i||^2 + 1) over its rows is inf, above the limit 1.8e+302 (the largest float64 / "
        f"1e+06); the largest row is row 0 (value {X[0, np.argmax(np.abs(X[0]))] * 1e200:.6g} "
        "at column " f"{int(np.argmax(np.abs(X[0])))}); rescale the data (e.g. divide each column "
        "by its scale)"
    )
    assert texts == [expected]


def test_many_moderate_values_whose_products_overflow_are_refused(host_backend):
    # No value is near float64's maximum; their squares are.
    texts = range_error(host_backend, np.full((40, 3), 1.2e155), Y, later=False)
    assert all(t.startswith("X is too large for float64") for t in texts)
    assert all("the largest row is row 0 (value 1.2e+155 at column 0)" in t for t in texts)


def test_huge_y_is_refused_naming_its_index(host_backend):
    target = Y.copy()
    target[5] = 1e160
    texts = range_error(host_backend, X, target)
    assert texts[0] == texts[1]
    assert texts[0].startswith("y is too large for float64: the Huber loss is r^2/2 within tau")
    assert "the largest entry is at index 5 (value 1e+160)" in texts[0]


@pytest.mark.parametrize("weighted", [False, True])
def test_the_range_rule_reaches_every_slice_of_a_long_batch(host_backend, weighted):
    # Past 10,000 rows sum w y^2 is summed 10,000 entries at a time: a huge target in a later
    # slice is still found and named, before any engine sees the batch.
    rng = np.random.default_rng(3)
    rows = 25_000
    design = rng.standard_normal((rows, 2))
    target = design @ np.array([1.0, -1.0]) + rng.standard_normal(rows)
    target[15_001] = 1e160
    model = RenewableHuberRegressor(backend=host_backend)
    with pytest.raises(ValidationError,
                       match=r"^y is too large for float64.*index 15001 \(value 1e\+160"):
        model.fit(design, target, sample_weight=np.full(rows, 2.0) if weighted else None)
    assert model._backend is None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_square_sum_of_a_long_batch_is_its_definition(dtype):
    from renewable_huber._validation import _square_sum

    rng = np.random.default_rng(4)
    y = rng.standard_normal(25_001).astype(dtype)
    weights = rng.uniform(0.5, 2.0, 25_001).astype(dtype)
    exact = math.fsum(float(v) ** 2 for v in y)
    exact_weighted = math.fsum(float(w) * float(v) ** 2 for w, v in zip(weights, y, strict=True))
    tolerance = 1e-12 if dtype == np.float64 else 1e-5
    assert _square_sum(y, None) == pytest.approx(exact, rel=tolerance)
    assert _square_sum(y, weights) == pytest.approx(exact_weighted, rel=tolerance)
    assert _square_sum(y[:9_999], None) == pytest.approx(
        math.fsum(float(v) ** 2 for v in y[:9_999]), rel=tolerance)


def test_finite_weights_whose_sum_overflows_are_refused_naming_sample_weight(host_backend):
    texts = range_error(host_backend, X, Y, sample_weight=np.full(40, 1e308))
    assert texts[0] == texts[1]
    assert texts[0].startswith("sample_weight is too large for float64")
    assert "the largest weight is at index 0 (1e+308)" in texts[0]


def test_large_but_safe_values_pass_the_range_rule(host_backend):
    # 1e100 squared is 1e200, far below the limit: the rule must not refuse it (the weights
    # make the fast bound fail, so the exact per-row sum decides).
    scaled = X * 1e100
    weights = np.ones(40)
    weights[0] = 1e100
    model = RenewableHuberRegressor(backend=host_backend, max_iter=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(scaled, Y, sample_weight=weights)
    assert model.n_samples_seen_ == 40


def test_nan_with_huge_values_still_gets_the_nan_message(host_backend):
    bad = X.copy()
    bad[2, 0] = 1e300
    bad[9, 1] = np.nan
    estimator = RenewableHuberRegressor(backend=host_backend)
    with pytest.raises(ValidationError, match=r"^X contains NaN or infinity \(first at row 9"):
        estimator.fit(bad, Y)


def test_prediction_that_overflows_is_refused_naming_the_row(host_backend):
    estimator = RenewableHuberRegressor(backend=host_backend).fit(X, Y)
    rows = X[:4].copy()
    rows[2] = [1e308, -1e308, 1e308]  # finite input; X @ coef_ (signs 1, -2, 0.5) is not
    with pytest.raises(ValidationError, match=r"^the prediction for X row 2 overflows float64"):
        estimator.predict(rows)
    with pytest.raises(ValidationError, match=r"^the prediction for X row 2 overflows float64"):
        estimator.score(rows, Y[:4])
    # Large but representable predictions are returned as they are.
    assert np.isfinite(estimator.predict(X[:4] * 1e200)).all()
