"""The conformance runner without a native library: the NumPy reference replays the corpora,
tampered corpora are caught, capabilities turn cases into visible SKIPs, tolerances behave."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from renewable_huber.conformance import (
    Capabilities,
    ReferenceEngine,
    load_capabilities,
    main,
    run_conformance,
)
from renewable_huber.conformance.tolerances import Comparison, Tolerance, prediction_scales
from renewable_huber.exceptions import ValidationError

REPO = Path(__file__).resolve().parents[2]
CORPORA = REPO / "conformance" / "corpora"
V1 = CORPORA / "native_core_v1.json"
V2 = CORPORA / "native_core_v2.json"
V4 = CORPORA / "native_core_v4.json"


def _tampered(tmp_path: Path, source: Path, edit) -> Path:
    document = json.loads(source.read_text())
    edit(document)
    path = tmp_path / source.name
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    return path


def test_reference_replays_every_corpus_case_and_migration():
    summary = run_conformance(ReferenceEngine())
    kinds = [(r.kind, r.outcome) for r in summary.results]
    # 22 cases; migrations: one per cut point (batches - 1) and per source (corpus, engine):
    # v1: 2+2+1+2 batches -> 3 cuts; v2: 3+3+2+3 batches -> 7 cuts; v3: ten of 2 -> 10 cuts;
    # v4: 3+2+2+2 batches -> 5 cuts.
    assert kinds.count(("replay", "PASS")) == 22
    assert kinds.count(("migration", "PASS")) == 2 * (3 + 7 + 10 + 5)
    assert summary.count("FAIL") == 0 and summary.passed
    # The reference is not an ABI library: the negative cases are one visible SKIP line.
    (negative,) = [r for r in summary.results if r.kind == "negative"]
    assert negative.outcome == "SKIP" and "ABI" in negative.detail
    # ... and so are the optional ABI extensions' checks.
    (extension,) = [r for r in summary.results if r.kind == "extension"]
    assert extension.outcome == "SKIP" and "ABI library" in extension.detail


def test_main_reference_prints_one_line_per_case_and_exits_zero(capsys):
    assert main(["--reference", "--corpus", str(V1)]) == 0
    lines = capsys.readouterr().out.splitlines()
    replay = [line for line in lines if " replay " in line]
    assert len(replay) == 4 and all(line.startswith("PASS") for line in replay)
    assert any("native_core_v1/rank-deficient-ridge0-min-norm" in line for line in replay)
    assert lines[-1].startswith("CONFORMS")


def test_a_tampered_coefficient_fails_with_the_case_named(tmp_path, capsys):
    def edit(document):
        state = document["cases"][0]["expected"]["states"][1]
        state["coefficients"][2] *= 1 + 1e-6

    path = _tampered(tmp_path, V1, edit)
    assert main(["--reference", "--corpus", str(path)]) == 1
    out = capsys.readouterr().out
    failing = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert failing and all("weighted-none-intercept-two-batches" in line for line in failing)
    assert "batch 2 coefficients[2]" in failing[0]
    assert out.splitlines()[-1].startswith("DOES NOT CONFORM")


def test_a_tampered_meat_entry_fails_as_a_fraction_of_the_largest_entry(tmp_path):
    def edit(document):
        # ten times the case's own rtol, as a fraction of the largest entry
        case = document["cases"][0]
        meat = case["expected"]["states"][2]["meat"]
        largest = max(abs(v) for row in meat for v in row)
        meat[0][1] += 10 * case["rtol"] * largest
        meat[1][0] += 10 * case["rtol"] * largest

    summary = run_conformance(ReferenceEngine(), corpus_paths=[_tampered(tmp_path, V4, edit)])
    replay = next(r for r in summary.results if r.kind == "replay")
    assert replay.outcome == "FAIL" and "batch 3 meat[0, 1]" in replay.detail


def test_meat_recorded_null_must_be_reported_unavailable(tmp_path):
    def edit(document):
        case = document["cases"][0]
        case["expected"]["states"][0]["meat"] = None

    summary = run_conformance(ReferenceEngine(), corpus_paths=[_tampered(tmp_path, V4, edit)])
    replay = next(r for r in summary.results if r.kind == "replay")
    assert replay.outcome == "FAIL" and "batch 1 meat available: got True, expected False" in (
        replay.detail)


def test_a_converged_flag_mismatch_fails(tmp_path):
    def edit(document):
        diagnostics = document["cases"][0]["expected"]["states"][0]["diagnostics"]
        diagnostics["converged"] = not diagnostics["converged"]

    summary = run_conformance(ReferenceEngine(), corpus_paths=[_tampered(tmp_path, V2, edit)])
    replay = next(r for r in summary.results if r.kind == "replay")
    assert replay.outcome == "FAIL" and "converged" in replay.detail


def test_a_counter_mismatch_fails_even_by_one(tmp_path):
    def edit(document):
        document["cases"][2]["expected"]["states"][0]["n_samples_seen"] += 1

    summary = run_conformance(ReferenceEngine(), corpus_paths=[_tampered(tmp_path, V2, edit)])
    failed = [r for r in summary.results if r.failed]
    assert failed and all("n_samples_seen" in r.detail for r in failed)


def test_iteration_differences_are_reported_not_failed(tmp_path):
    def edit(document):
        document["cases"][0]["expected"]["states"][1]["diagnostics"]["iterations"] += 2

    # On the recording host the untampered replay differs by (0, 0); on another BLAS kernel
    # a stopping test can flip and move a count by one (the rounding model), so the
    # expectation is the untampered replay's differences shifted by the edit.
    untampered = run_conformance(ReferenceEngine(), corpus_paths=[V1])
    first, second = next(r for r in untampered.results if r.kind == "replay").iteration_differences
    summary = run_conformance(ReferenceEngine(), corpus_paths=[_tampered(tmp_path, V1, edit)])
    replay = next(r for r in summary.results if r.kind == "replay")
    assert replay.outcome == "PASS" and replay.iteration_differences == (first, second - 2)
    assert f"iterations engine-corpus=[{first:+d},{second - 2:+d}]" in replay.line()


def test_undeclared_dtype_is_skipped_with_its_reason(tmp_path, capsys):
    capabilities = tmp_path / "caps.json"
    capabilities.write_text(
        json.dumps(
            {
                "schema": "renewable-huber-capabilities",
                "schema_version": 1,
                "dtypes": ["float64"],
                "penalties": ["none", "l1"],
                "device_input": False,
                "device_predict": False,
            }
        )
    )
    assert main(["--reference", "--capabilities", str(capabilities)]) == 0
    skipped = [line for line in capsys.readouterr().out.splitlines() if line.startswith("SKIP")]
    assert any(
        "float32-none-no-intercept-one-batch" in line and "dtype float32" in line
        for line in skipped
    )
    assert any("l1-float32-no-intercept-true-zeros@2" in line for line in skipped)


def test_shipped_capabilities_files_load():
    cpu = load_capabilities(REPO / "conformance" / "capabilities" / "cpu.json")
    cuda = load_capabilities(REPO / "conformance" / "capabilities" / "cuda.json")
    assert cpu == Capabilities.everything_on_host()
    assert cuda.device_input and cuda.device_predict and cuda.dtypes == cpu.dtypes


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(extra=True), "keys must be exactly"),
        (lambda d: d.update(dtypes=["float16"]), "'dtypes'"),
        (lambda d: d.update(penalties=[]), "'penalties'"),
        (lambda d: d.update(device_input="yes"), "'device_input'"),
        (lambda d: d.update(schema_version=2), "version 1"),
    ],
)
def test_bad_capabilities_files_are_refused_with_the_field_named(tmp_path, edit, message):
    document = json.loads((REPO / "conformance" / "capabilities" / "cpu.json").read_text())
    edit(document)
    path = tmp_path / "caps.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValidationError, match=message):
        load_capabilities(path)


def test_missing_library_is_one_clear_error_line(tmp_path, capsys):
    missing = tmp_path / "librh_nothing.so"
    assert main(["--library", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing.name) in err and err.count("\n") == 1


def test_tolerance_takes_the_looser_of_case_and_profile():
    assert Tolerance.for_case(1e-4, 1e-5, "cpu", "float32") == Tolerance(4e-4, 4e-5)
    assert Tolerance.for_case(1e-9, 1e-11, "cuda", "float64") == Tolerance(1e-8, 2e-9)
    assert Tolerance.for_case(1e-3, 1e-11, "cpu", "float64") == Tolerance(1e-3, 3e-9)
    assert Tolerance.for_case(1e-9, 1e-11, "reference", "float64") == Tolerance(1e-9, 1e-11)
    # the reference's own float32 floor: twice the float32 oracle slack (triangle inequality
    # through the float64 replay) with room for second-order terms, below both engine floors
    reference32 = Tolerance.for_case(1e-4, 1e-5, "reference", "float32")
    assert reference32 == Tolerance(2.5e-4, 2.5e-5)
    assert reference32.rtol < Tolerance.for_case(0, 0, "cuda", "float32").rtol


def test_prediction_allowance_follows_from_the_coefficients():
    # x = (2, -2, 1), beta = (1, 1, 0.5): the prediction 0.5 cancels terms of size 4.5, so
    # its allowance is atol ||x||_1 + rtol |x|.|beta| = 5 atol + 4.5 rtol, not atol + 0.5 rtol
    magnitude, atol_scale = prediction_scales(
        np.array([[2.0, -2.0, 1.0]]), np.array([1.0, 1.0, 0.5])
    )
    assert magnitude.tolist() == [4.5] and atol_scale.tolist() == [5.0]
    comparison = Comparison(Tolerance(rtol=1e-3, atol=1e-6))
    comparison.close("p", np.array([0.5 + 4e-3]), np.array([0.5]), (magnitude, atol_scale))
    assert comparison.passed
    comparison.close("p", np.array([0.5 + 5e-3]), np.array([0.5]), (magnitude, atol_scale))
    assert not comparison.passed


def test_comparison_ratio_is_difference_over_allowance():
    comparison = Comparison(Tolerance(rtol=1e-3, atol=1e-6))
    comparison.close("x", np.array([1.0005, 2.0]), np.array([1.0, 2.0]))
    assert comparison.worst == pytest.approx(0.0005 / (1e-6 + 1e-3), rel=1e-9)
    assert comparison.passed and "x[0]" in comparison.worst_where
    comparison.close("y", 1.0 + 2.5e-3, 1.0)
    assert not comparison.passed and "y" in comparison.failure_summary()


def test_comparison_refuses_non_finite_and_shape_changes():
    comparison = Comparison(Tolerance(rtol=1.0, atol=1.0))
    comparison.close("nan", np.array([np.nan]), np.array([0.0]))
    comparison.close("shape", np.zeros(3), np.zeros(4))
    assert not comparison.passed and len(comparison.mismatches) == 2
