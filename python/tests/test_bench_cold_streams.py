"""benchmarks/micro/cuda_cold_streams.py's summary of alternating runs, on hand-written lines
(medians, ratios and rounds won worked out by hand below)."""

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.micro import cuda_cold_streams  # noqa: E402


def line(side, case, ms, iters=5, coef0=0.25, state="0123456789abcdef"):
    return json.dumps({"side": side, "case": case, "ms": ms, "iters": iters, "coef0": coef0,
                       "state": state})


def test_summary_pairs_rounds_and_compares_the_fits():
    lines = [
        # Round 1, old first; round 2, new first; round 3, old first.
        line("old", "wide float64 none", 4.0), line("new", "wide float64 none", 3.0),
        line("old", "latency float32 none", 1.0), line("new", "latency float32 none", 1.5),
        line("new", "wide float64 none", 5.0), line("old", "wide float64 none", 6.0),
        line("new", "latency float32 none", 0.5), line("old", "latency float32 none", 2.0),
        line("old", "wide float64 none", 2.0), line("new", "wide float64 none", 2.5),
        line("old", "latency float32 none", 3.0),
        line("new", "latency float32 none", 1.0, iters=6),
    ]
    out = cuda_cold_streams.summarize_ab(lines)
    # Cases sorted; wide: medians 4.0 and 3.0 (1.333x), new faster in rounds 1 and 2.
    # Latency: medians 2.0 and 1.0 (2.000x), new faster in rounds 2 and 3; the last new stream
    # took 6 iterations against 5.
    assert out == [
        "latency float32 none: old ['1.000', '2.000', '3.000'] new ['1.500', '0.500', '1.000']; "
        "medians 2.000 -> 1.000 (2.000x), new faster in 2/3 rounds; "
        "iterations, coef0 and state digest equal: False",
        "wide float64 none: old ['4.000', '6.000', '2.000'] new ['3.000', '5.000', '2.500']; "
        "medians 4.000 -> 3.000 (1.333x), new faster in 2/3 rounds; "
        "iterations, coef0 and state digest equal: True",
    ]


def test_summary_names_its_sides():
    lines = [line("head", "reference float64 none host", 3.0),
             line("patch", "reference float64 none host", 2.0)]
    assert cuda_cold_streams.summarize_ab(lines, "head", "patch") == [
        "reference float64 none host: head ['3.000'] patch ['2.000']; medians 3.000 -> 2.000 "
        "(1.500x), patch faster in 1/1 rounds; iterations, coef0 and state digest equal: True"]


def test_summary_tells_a_state_that_differs_in_its_bits():
    lines = [line("old", "streaming float32 l1", 3.0), line("new", "streaming float32 l1", 2.0,
                                                           state="fedcba9876543210")]
    assert cuda_cold_streams.summarize_ab(lines)[0].endswith(
        "iterations, coef0 and state digest equal: False")


def test_state_digest_reads_every_bit_of_coefficients_and_information():
    class Model:
        pass

    def model(coefficients, information):
        fitted = Model()
        fitted._state = Model()
        fitted._state.coefficients = np.asarray(coefficients)
        fitted._state.information = np.asarray(information)
        return fitted

    base = cuda_cold_streams.state_digest(model([1.0, 2.0], np.eye(2)))
    assert len(base) == 16
    assert cuda_cold_streams.state_digest(model([1.0, 2.0], np.eye(2))) == base
    # One ulp in a coefficient, a sign of zero in the information.
    assert cuda_cold_streams.state_digest(model([1.0, np.nextafter(2.0, 3.0)], np.eye(2))) != base
    signed_zero = np.eye(2)
    signed_zero[0, 1] = -0.0
    assert cuda_cold_streams.state_digest(model([1.0, 2.0], signed_zero)) != base


def test_timed_streams_times_only_the_streams_after_the_warmups(monkeypatch):
    calls = []

    def fake_stream(cp, shape, X, y, dtype, penalty, options=None):
        calls.append((shape, dtype, penalty))
        return f"model {len(calls)}", 10 * len(calls)

    monkeypatch.setattr(cuda_cold_streams, "stream", fake_stream)
    walls, model, iterations = cuda_cold_streams.timed_streams(
        None, "shape", None, None, "float32", "l1", warmups=3, repetitions=4
    )
    assert calls == [("shape", "float32", "l1")] * 7
    assert len(walls) == 4 and all(w >= 0.0 for w in walls)
    assert (model, iterations) == ("model 7", 70)


def test_timed_streams_hands_estimator_options_to_every_stream(monkeypatch):
    seen = []

    def fake_stream(cp, shape, X, y, dtype, penalty, options=None):
        seen.append(options)
        return "model", 1

    monkeypatch.setattr(cuda_cold_streams, "stream", fake_stream)
    cuda_cold_streams.timed_streams(None, "shape", None, None, "float64", "none", warmups=1,
                                    repetitions=2, options={"cuda_graphs": True})
    assert seen == [{"cuda_graphs": True}] * 3
