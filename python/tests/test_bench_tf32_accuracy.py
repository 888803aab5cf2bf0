"""benchmarks/micro/tf32_gram_accuracy.py's TF32 rounding and its Gram replacement, on numbers
whose TF32 roundings are worked out by hand from the float32 bit layout."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.micro import tf32_gram_accuracy as tf32_accuracy  # noqa: E402
from benchmarks.profiles import shape_named  # noqa: E402

# TF32's spacing at [1, 2) is 2^-10; float32's is 2^-23.
STEP = 2.0 ** -10


def test_tf32_rounds_to_nearest_ties_away_or_toward_zero():
    values = np.array([1.0,                    # representable: unchanged
                       1.0 + STEP / 2,         # a tie: away from zero, or down
                       1.0 + STEP / 2 - 2.0 ** -23,  # just below the tie: down either way
                       1.0 + STEP - 2.0 ** -23,      # just below the next: up, or down
                       -(1.0 + STEP / 2),      # the tie's mirror: its magnitude rounds alike
                       3.0 * 2.0 ** -30,       # small numbers keep their exponent
                       0.0], dtype=np.float32)
    nearest = tf32_accuracy.tf32(values, "nearest")
    zero = tf32_accuracy.tf32(values, "zero")
    assert nearest.dtype == np.float32 and zero.dtype == np.float32
    np.testing.assert_array_equal(
        nearest, np.array([1.0, 1.0 + STEP, 1.0, 1.0 + STEP, -(1.0 + STEP),
                           3.0 * 2.0 ** -30, 0.0], dtype=np.float32))
    np.testing.assert_array_equal(
        zero, np.array([1.0, 1.0, 1.0, 1.0, -1.0, 3.0 * 2.0 ** -30, 0.0], dtype=np.float32))
    with pytest.raises(ValueError, match="rounding 'up': expected 'nearest' or 'zero'"):
        tf32_accuracy.tf32(values, "up")


def test_float32_gram_replaces_the_cores_gram_only_inside_the_block():
    original = tf32_accuracy.objective.weighted_gram
    with tf32_accuracy.float32_gram("zero"):
        assert tf32_accuracy.objective.weighted_gram is not original
    assert tf32_accuracy.objective.weighted_gram is original
    with pytest.raises(RuntimeError), tf32_accuracy.float32_gram(None):
        raise RuntimeError
    assert tf32_accuracy.objective.weighted_gram is original


def test_the_replacement_grams_round_the_scaled_rows():
    # Rows of small integers and weights that are squares: sqrt(v) x is exact and representable
    # in TF32, so every variant gives the exact Gram.
    X = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 4.0]])
    v = np.array([1.0, 4.0, 0.25])
    exact = X.T @ (v[:, None] * X)
    for rounding in (None, "nearest", "zero"):
        gram = tf32_accuracy.float32_weighted_gram(rounding)(np, X, v)
        assert gram.dtype == np.float64
        np.testing.assert_array_equal(gram, exact)
    # One row x = 1 + 3 STEP / 4 (weight 1): float32 keeps it, TF32 rounds it to 1 + STEP to
    # nearest and to 1 toward zero; the Gram is its square, mirrored to exact symmetry.
    x = 1.0 + 0.75 * STEP
    X = np.array([[x, 1.0]])
    grams = {r: tf32_accuracy.float32_weighted_gram(r)(np, X, np.ones(1))
             for r in (None, "nearest", "zero")}
    for rounded, gram in ((x, grams[None]), (1.0 + STEP, grams["nearest"]), (1.0, grams["zero"])):
        expected = np.array([[rounded * rounded, rounded], [rounded, 1.0]], dtype=np.float32)
        np.testing.assert_array_equal(gram, expected.astype(np.float64))
        assert np.array_equal(gram, gram.T)


def test_rows_compare_each_float32_variant_with_the_float64_fit():
    # A small stand-in shape: every variant is fitted and set beside the float64 fit.
    shape = shape_named("latency")
    small = type(shape)(shape.name, 512, 4, 256, shape.index)
    lines = list(tf32_accuracy.rows([small], ["none"], "emulated"))
    assert [line.split(" | ")[1] for line in lines] == [
        "float64 (reference core)", "float32, Gram summed in float64", "float32 GEMM",
        "TF32 nearest", "TF32 toward zero"]
    plain = lines[1].split(" | ")
    assert plain[4:6] == ["0.00e+00", "0.00e+00"]  # the first float32 variant against itself
    for line in lines[1:]:
        coef64, info64 = (float(cell) for cell in line.split(" | ")[2:4])
        assert 0 <= coef64 < 1e-3 and 0 <= info64 < 1e-2


def test_corpus_rows_replay_every_float32_case_with_each_gram():
    lines = list(tf32_accuracy.corpus_rows())
    assert lines[0] == "| float32 case | float32 GEMM | TF32 nearest | TF32 toward zero |"
    cases = [line.split(" | ") for line in lines[2:]]
    assert cases and all(row[0].startswith("| native_core_v") for row in cases)
    assert all("float32" in row[0] for row in cases)
    # A float32 GEMM of the scaled rows (librh_cuda's Gram above 128 parameters) replays the
    # corpora within the GPU tolerance profile.
    assert all("FAIL" not in row[1] and float(row[1]) < 1 for row in cases)
