"""The solve ladder of docs/decisions.md: which rung runs, and what it returns."""

import numpy as np
import pytest

from renewable_huber import core
from renewable_huber.exceptions import EngineError


def spd(rng, n):
    A = rng.normal(size=(n, n))
    M = A @ A.T + n * np.eye(n)
    return (M + M.T) / 2


def test_symmetric_positive_definite_takes_cholesky():
    rng = np.random.default_rng(0)
    A = spd(rng, 6)
    b = rng.normal(size=6)
    solution = core.solve_linear(np, A, b)
    assert solution.method == "cholesky"
    assert not solution.used_regularized_fallback
    np.testing.assert_allclose(solution.x, np.linalg.solve(A, b), rtol=1e-12)


def test_asymmetric_matrix_is_solved_as_is_through_lu():
    rng = np.random.default_rng(1)
    A = spd(rng, 7) + rng.normal(scale=2.0, size=(7, 7))
    b = rng.normal(size=7)
    solution = core.solve_linear(np, A, b)
    assert solution.method == "lu"
    np.testing.assert_allclose(solution.x, np.linalg.solve(A, b), rtol=1e-11)


def test_lu_pivots_on_a_zero_leading_entry():
    A = np.array([[0.0, 2.0, 1.0], [1.0, 1.0, 0.0], [3.0, 0.0, 5.0]])
    b = np.array([1.0, 2.0, 3.0])
    solution = core.solve_linear(np, A, b)
    assert solution.method == "lu"
    np.testing.assert_allclose(A @ solution.x, b, rtol=1e-14, atol=1e-14)


def test_symmetric_indefinite_falls_back_to_lu():
    A = np.array([[1.0, 2.0], [2.0, 1.0]])
    b = np.array([3.0, 3.0])
    solution = core.solve_linear(np, A, b)
    assert solution.method == "lu"
    np.testing.assert_allclose(solution.x, [1.0, 1.0], rtol=1e-14)


def test_exactly_singular_symmetric_takes_the_minimum_norm_svd():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 3))
    X = np.hstack([X, X[:, :1] + X[:, 1:2]])  # rank 3 of 4
    A = X.T @ X
    A = np.triu(A) + np.triu(A, 1).T
    b = A @ rng.normal(size=4)  # consistent right-hand side
    solution = core.solve_linear(np, A, b)
    assert solution.method == "svd"
    assert solution.used_regularized_fallback
    np.testing.assert_allclose(solution.x, np.linalg.pinv(A) @ b, rtol=1e-9, atol=1e-12)


def test_singular_asymmetric_takes_the_svd_and_stays_finite():
    A = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    b = np.array([1.0, 0.0, 2.0])  # inconsistent: least squares
    solution = core.solve_linear(np, A, b)
    assert solution.method == "svd"
    np.testing.assert_allclose(solution.x, np.linalg.lstsq(A, b, rcond=None)[0], rtol=1e-10)


def test_zero_matrix_gives_the_zero_solution():
    solution = core.solve_linear(np, np.zeros((3, 3)), np.ones(3))
    assert solution.method == "svd"
    np.testing.assert_array_equal(solution.x, np.zeros(3))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_system_is_solved_in_float64_whatever_its_dtype(dtype):
    """The Newton system is float64 for every working dtype: a float32 matrix is solved as the
    float64 matrix of the same values, to float64 accuracy."""
    rng = np.random.default_rng(3)
    A = spd(rng, 5).astype(dtype)
    b = rng.normal(size=5).astype(dtype)
    for matrix in (A, A + np.triu(np.ones((5, 5), dtype=dtype), 1)):
        solution = core.solve_linear(np, matrix, b)
        assert solution.x.dtype == np.float64
        np.testing.assert_allclose(
            solution.x, np.linalg.solve(matrix.astype(np.float64), b.astype(np.float64)),
            rtol=1e-11,
        )


def test_non_finite_system_is_a_numerical_error():
    A = np.array([[np.inf, 0.0], [0.0, 1.0]])
    with pytest.raises(EngineError, match="NUMERICAL_ERROR"):
        core.solve_linear(np, A, np.ones(2))
    with pytest.raises(EngineError, match="NUMERICAL_ERROR"):
        core.solve_linear(np, np.eye(2), np.array([1.0, np.nan]))


def test_inputs_are_not_modified():
    rng = np.random.default_rng(4)
    A = spd(rng, 4) + np.triu(rng.normal(size=(4, 4)), 1)
    b = rng.normal(size=4)
    A_before, b_before = A.copy(), b.copy()
    core.solve_linear(np, A, b)
    np.testing.assert_array_equal(A, A_before)
    np.testing.assert_array_equal(b, b_before)
