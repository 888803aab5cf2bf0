"""scikit-learn compatibility: check_estimator passes every check, the package's exceptions and
warnings are also scikit-learn's once scikit-learn is imported, and the input messages users of
scikit-learn expect (None, masked, column y, 1-D X, empty data)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from renewable_huber import (
    DataConversionWarning,
    NotFittedError,
    RenewableHuberRegressor,
    ValidationError,
)

sklearn_exceptions = pytest.importorskip("sklearn.exceptions")
estimator_checks = pytest.importorskip("sklearn.utils.estimator_checks")

X = np.random.default_rng(0).normal(size=(30, 3))
Y = X @ [1.0, -1.0, 0.5] + 0.1


def test_check_estimator_passes_every_check():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = estimator_checks.check_estimator(
            RenewableHuberRegressor(backend="numpy"), on_fail=None
        )
    failed = {r["check_name"]: str(r["exception"])[:200] for r in results
              if r["status"] == "failed"}
    assert len(results) > 50 and failed == {}


def test_not_fitted_is_sklearns_not_fitted_error_too():
    with pytest.raises(sklearn_exceptions.NotFittedError) as caught:
        RenewableHuberRegressor().predict(X)
    assert isinstance(caught.value, NotFittedError)


def test_a_column_y_warns_data_conversion_and_fits_as_1d():
    with pytest.warns(sklearn_exceptions.DataConversionWarning, match="column-vector y") as got:
        column = RenewableHuberRegressor(backend="numpy").fit(X, Y[:, None])
    assert isinstance(got[0].message, DataConversionWarning)
    flat = RenewableHuberRegressor(backend="numpy").fit(X, Y)
    np.testing.assert_array_equal(column.coef_, flat.coef_)


@pytest.mark.parametrize("X_, y_, message", [
    (None, Y, "X is None: expected array-like"),
    (X, None, "y is None: RenewableHuberRegressor requires y to be passed"),
    (np.ma.masked_array(X, mask=X > 1.5), Y, "X is a masked array; its mask would be dropped"),
    (X, np.ma.masked_array(Y), "y is a masked array"),
    (X[:, 0], Y, "Reshape your data"),
    (X.astype(complex), Y, "Complex data not supported"),
])
def test_inputs_sklearn_users_get_wrong_are_named(X_, y_, message):
    model = RenewableHuberRegressor(backend="numpy")
    with pytest.raises(ValidationError, match=message):
        model.fit(X_, y_)
    assert not hasattr(model, "coef_")


def test_non_numeric_objects_are_a_type_error_and_a_validation_error():
    bad = X.astype(object)
    bad[0, 0] = {"a": 1}
    with pytest.raises(TypeError, match="argument must be .* string.* number") as caught:
        RenewableHuberRegressor(backend="numpy").fit(bad, Y)
    assert isinstance(caught.value, ValidationError)
