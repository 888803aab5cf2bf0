"""Generate (--write) or verify (--check) the golden corpora from the NumPy reference core.

    python golden/generate.py --check            # regenerate in memory, compare under the
                                                 # rounding model (any machine; make test)
    python golden/generate.py --check --exact    # byte for byte (the recording host only)
    python golden/generate.py --write            # rewrite the corpora (v1 is frozen: below)
    python golden/generate.py --write --out-dir /tmp/g

The data of every case comes from a fixed-seed PCG64 stream rounded to three decimals, so the
inputs are short, readable and identical on every platform; the expected states come from
renewable_huber.core, the executable form of docs/algorithm.md. What a corpus promises and how
engines are judged against it is conformance/README.md.

The rounding model of --check
-----------------------------
Generation is deterministic on one machine: two runs write identical bytes. Another machine,
or the same one with another OpenBLAS kernel family (OPENBLAS_CORETYPE), runs the same
operations but rounds dot products, Gram matrices and factorisations differently (summation
order, FMA). The corpora therefore hold for every kernel under this model, and --check
regenerates in memory and compares with it:

* exact: the document's structure (keys, lengths, types), its metadata (schema,
  schema_version, oracle), every case's id, description, config, rtol and atol, the inputs
  (X, y, sample_weight, probe_X: PCG64 and decimal rounding, no BLAS), the counters
  n_samples_seen and batch_count, and the converged flags;
* iterations: within ITERATION_WINDOW of the committed count. A step whose size lies within
  rounding of the stopping threshold tol (1 + ||beta||) passes on one kernel and not on the
  next; Newton then ends one iteration apart, and float32 LAMM, whose late steps stall at
  float32 resolution, a few apart (up to 2 seen on five kernel families). The conformance kit
  reports iteration differences and never fails on them;
* every other number (coefficients, information, previous_lambda, weight_sum, objective,
  lambda_value, bandwidth, predictions): |regenerated - committed| <= atol + rtol |committed|
  with the tolerance the conformance kit's `reference` profile gives the case
  (renewable_huber.conformance.tolerances: the case's rtol/atol; float32 at least
  REFERENCE_FLOAT32_FLOOR, derived there from FLOAT32_ORACLE_SLACK by the triangle
  inequality). `--check` and `renewable-huber conformance --reference` thus apply one rule.

The case tolerance is derived from the dtype and the case (_derived_tolerance): a solve with
the Newton matrix H = J / N + ridge I amplifies rounding by its condition number, so an
unpenalised float64 case gets rtol = max(1e-9, CONDITION_FACTOR eps kappa), rounded up to a
power of ten, kappa the largest condition number of H over the batches after diagonal
equilibration (Cholesky and LU are accurate to the equilibrated condition, so raw units alone
do not loosen it; singular values below the SVD cutoff are left out, as the minimum-norm solve
leaves them out); atol = rtol / 100. LAMM takes no linear solve, so an L1 case keeps the base
tolerance. v1 and v2 record the base tolerance (float64 1e-9 / 1e-11, float32 1e-4 / 1e-5)
and the generator refuses them if their derived tolerance ever exceeded it.

v1 is frozen: its numbers never change. --check also compares the committed v1 with
FROZEN_DIGESTS (a SHA-256 over everything but the "oracle" metadata), and --write keeps the
committed v1's numbers, refreshing only that metadata, after checking that the reference still
reproduces them under the rounding model (it refuses otherwise). The oracle text is metadata:
it changed once, when it stopped citing files outside the repository, and v1's digest does not
cover it. v2 and v3 are written from this machine's regeneration: run --write on the recording
host (check with --check --exact), elsewhere their last digits move within the model.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

GOLDEN_DIR = Path(__file__).resolve().parent
# The oracle is the reference in this source tree, never an installed copy that may lag it.
sys.path.insert(0, str(GOLDEN_DIR.parent / "python"))

from renewable_huber.config import UpdateConfig  # noqa: E402
from renewable_huber.conformance.tolerances import (  # noqa: E402
    FLOAT32_ORACLE_SLACK,
    Tolerance,
    prediction_scales,
)
from renewable_huber.core import design_matrix, renewable_update  # noqa: E402
from renewable_huber.core.huber import bandwidth as huber_bandwidth  # noqa: E402
from renewable_huber.state import RenewableState  # noqa: E402

SCHEMA_NAME = "renewable-huber-native-golden"
ORACLE = {
    "implementation": "renewable_huber.core (NumPy reference, spec/ALGORITHM.md)",
    "role": "oracle: every engine behind the ABI must reproduce these states within the "
    "tolerances of spec/GOLDEN.md",
}
# The base case tolerance, recorded by v1 and v2: tight enough that the engine profiles (C CPU,
# CUDA) dominate the max(), loose enough that the reference on another BLAS kernel reproduces
# its own well-conditioned corpus (the float32 reference floor covers float32's flat optimum).
CASE_TOLERANCES = {"float64": (1e-9, 1e-11), "float32": (1e-4, 1e-5)}
# kappa eps is the first-order relative error of a backward-stable solve; 64 is the margin the
# algorithm uses for rounding elsewhere (the pivot floor, the rounding floor of the solvers).
CONDITION_FACTOR = 64.0
ITERATION_WINDOW = 2
PROBE_ROWS = 5


def _estimator_config(**overrides) -> dict:
    # Spelled out, not taken from the estimator's defaults: the committed corpora must not move
    # when a default does.
    config = {
        "tau": 1.345,
        "penalty": "none",
        "lambda_scale": 1.0,
        "bandwidth_scale": 1.0,
        "fit_intercept": True,
        "max_iter": 100,
        "tol": 1e-6,
        "ridge": 1e-8,
        "backend": "numpy",
        "device": "cpu",
        "dtype": "float64",
        "n_jobs": None,
        "cuda_graphs": False,
        "cuda_fast_math": False,
    }
    unknown = set(overrides) - set(config)
    if unknown:
        raise KeyError(f"not estimator parameters: {sorted(unknown)}")
    config.update(overrides)
    return config


def _rounded(values: np.ndarray) -> np.ndarray:
    return np.round(values, 3)


class _Stream:
    """Synthetic batches y = X beta + intercept + noise, with optional gross outliers.

    scales and offsets (v3): column j is offsets[j] + scales[j] z, z standard normal, the
    features of a table in raw units; batch(scaled=True) draws that batch with unit scales and
    no offsets instead (the same coefficients on standardised columns)."""

    def __init__(
        self,
        seed: int,
        beta: list[float],
        intercept: float,
        noise: float = 0.5,
        scales: list[float] | None = None,
        offsets: list[float] | None = None,
    ):
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.beta = np.asarray(beta, dtype=np.float64)
        self.intercept = intercept
        self.noise = noise
        self.scales = None if scales is None else np.asarray(scales, dtype=np.float64)
        self.offsets = None if offsets is None else np.asarray(offsets, dtype=np.float64)

    def features(self, n: int, scaled: bool = False) -> np.ndarray:
        z = self.rng.standard_normal((n, self.beta.size))
        if self.scales is not None and not scaled:
            z = z * self.scales
            if self.offsets is not None:
                z = z + self.offsets
        return _rounded(z)

    def batch(
        self, n: int, outliers: int = 0, weights: list[float] | None = None, scaled: bool = False
    ) -> dict:
        X = self.features(n, scaled)
        y = X @ self.beta + self.intercept + self.noise * self.rng.standard_normal(n)
        if outliers:
            rows = self.rng.choice(n, size=outliers, replace=False)
            y[rows] += self.rng.choice([-1.0, 1.0], size=outliers) * 25.0
        w = None
        if weights is not None:
            w = np.asarray(self.rng.choice(weights, size=n), dtype=np.float64)
            w[:2] = 0.0  # every weighted stream must exercise zero-weight rows
        return {"X": X, "y": _rounded(y), "sample_weight": w}


def _v1_cases() -> list[dict]:
    weighted = _Stream(101, [1.5, -2.0, 0.5], intercept=0.7)
    l1 = _Stream(102, [2.0, 0.0, 0.0, -1.5, 0.0], intercept=1.0)
    f32 = _Stream(103, [0.8, -1.2, 0.0, 2.5], intercept=0.0)
    collinear = _Stream(104, [1.0, -1.0], intercept=0.5)

    def collinear_batch(n: int) -> dict:
        b = collinear.batch(n)
        # Exact duplicates (x3 = x1, x4 = 2 x2 is exact in binary) make the Gram singular
        # to the last bit, so ridge 0 must take the minimum-norm path.
        b["X"] = np.column_stack([b["X"], b["X"][:, 0], 2.0 * b["X"][:, 1]])
        return b

    return [
        {
            "id": "weighted-none-intercept-two-batches",
            "description": "Unpenalised weighted stream with an intercept, response outliers, "
            "zero and non-unit weights, two batches, tol 1e-10.",
            "config": _estimator_config(tol=1e-10),
            "batches": [
                weighted.batch(30, outliers=3, weights=[0.0, 0.5, 1.0, 2.0, 3.0]),
                weighted.batch(30, outliers=3, weights=[0.0, 0.5, 1.0, 2.0, 3.0]),
            ],
            "probe_X": weighted.features(PROBE_ROWS),
        },
        {
            "id": "l1-intercept-two-batches",
            "description": "L1 stream with an intercept over two batches; the second batch "
            "uses the first batch's lambda in the historical subgradient. Tol 1e-10 with "
            "max_iter 60, so LAMM may legitimately stop unconverged.",
            "config": _estimator_config(penalty="l1", lambda_scale=1.0, tol=1e-10, max_iter=60),
            "batches": [l1.batch(40, outliers=2), l1.batch(40, outliers=2)],
            "probe_X": l1.features(PROBE_ROWS),
        },
        {
            "id": "float32-none-no-intercept-one-batch",
            "description": "Float32 unpenalised fit without an intercept, response outliers, "
            "one batch.",
            "config": _estimator_config(dtype="float32", fit_intercept=False, tol=1e-5),
            "batches": [f32.batch(40, outliers=4)],
            "probe_X": f32.features(PROBE_ROWS),
        },
        {
            "id": "rank-deficient-ridge0-min-norm",
            "description": "Collinear design (duplicated and doubled columns) with ridge 0: "
            "the Newton system is singular and the minimum-norm (SVD) fallback must run.",
            "config": _estimator_config(ridge=0.0, tol=1e-10),
            "batches": [collinear_batch(30), collinear_batch(30)],
            "probe_X": collinear_batch(PROBE_ROWS)["X"],
        },
    ]


def _v2_cases() -> list[dict]:
    weighted = _Stream(201, [1.0, -0.8, 0.0, 1.6], intercept=-0.5)
    # Low noise and no outliers keep the float32 objective's rounding far below LAMM's
    # acceptance margin, so the float32 oracle converges where float64 does (see
    # _float32_oracle_problem); with gross outliers it stops early at a poor point.
    f32 = _Stream(202, [1.8, 0.0, -1.1, 0.0, 0.0, 0.9], intercept=0.0, noise=0.05)
    sparse = _Stream(203, [2.5, 0.0, 0.0, 0.0, -2.0, 0.0, 0.0, 0.0], intercept=5.0)
    unpenalised = _Stream(204, [0.6, -1.4, 2.2], intercept=1.5)
    l1 = {"penalty": "l1", "tol": 1e-6, "max_iter": 1000}
    return [
        {
            "id": "l1-weighted-three-batches",
            "description": "Weighted L1 stream, float64, intercept, zero and non-unit "
            "weights, three batches.",
            "config": _estimator_config(**l1),
            "batches": [
                weighted.batch(30, outliers=2, weights=[0.0, 0.25, 1.0, 2.0, 4.0]) for _ in range(3)
            ],
            "probe_X": weighted.features(PROBE_ROWS),
        },
        {
            "id": "l1-float32-no-intercept-true-zeros",
            "description": "Float32 L1 stream without an intercept, three of six true "
            "coefficients zero, low noise, three batches.",
            "config": _estimator_config(dtype="float32", fit_intercept=False, **l1),
            "batches": [f32.batch(40) for _ in range(3)],
            "probe_X": f32.features(PROBE_ROWS),
        },
        {
            "id": "l1-sparse-truth-unpenalised-intercept",
            "description": "Sparse truth (2 of 8 non-zero) with a large intercept that must "
            "stay unpenalised, float64, two batches, lambda_scale 0.5.",
            "config": _estimator_config(lambda_scale=0.5, **l1),
            "batches": [sparse.batch(40, outliers=3) for _ in range(2)],
            "probe_X": sparse.features(PROBE_ROWS),
        },
        {
            "id": "l1-lambda-scale-zero-stream",
            "description": "L1 solver with lambda_scale 0 (lambda = 0: LAMM on the plain "
            "renewable Huber objective), float64, intercept, three batches.",
            "config": _estimator_config(lambda_scale=0.0, **l1),
            "batches": [unpenalised.batch(30, outliers=2) for _ in range(3)],
            "probe_X": unpenalised.features(PROBE_ROWS),
        },
    ]


def _update_config(config: dict, n_features_in: int) -> UpdateConfig:
    return UpdateConfig(
        n_features_in=n_features_in,
        fit_intercept=config["fit_intercept"],
        tau=config["tau"],
        bandwidth_scale=config["bandwidth_scale"],
        tol=config["tol"],
        ridge=config["ridge"],
        max_iter=config["max_iter"],
        penalty=config["penalty"],
        lambda_scale=config["lambda_scale"],
    )


def _vector(values: np.ndarray) -> list[float]:
    return [float(v) for v in np.asarray(values).ravel()]


def _matrix(values: np.ndarray) -> list[list[float]]:
    return [_vector(row) for row in np.asarray(values)]


def _typed_batches(spec: dict) -> list[dict]:
    dtype = np.dtype(spec["config"]["dtype"])
    return [
        {
            "X": np.asarray(b["X"], dtype=dtype),
            "y": np.asarray(b["y"], dtype=dtype),
            "sample_weight": None
            if b["sample_weight"] is None
            else np.asarray(b["sample_weight"], dtype=dtype),
        }
        for b in spec["batches"]
    ]


def _equilibrated_condition(information, weight_sum: float, ridge: float) -> float:
    """Condition number of H = J / N + ridge I after scaling it to a unit diagonal, over the
    singular values the minimum-norm solve keeps (> P eps sigma_max)."""
    H = np.asarray(information, dtype=np.float64) / weight_sum + ridge * np.eye(len(information))
    d = np.sqrt(np.diag(H))
    d[d == 0.0] = 1.0
    s = np.linalg.svd(H / np.outer(d, d), compute_uv=False)
    kept = s[s > len(s) * np.finfo(np.float64).eps * s[0]]
    return float(kept[0] / kept[-1])


def _derived_tolerance(config: dict, states: list[dict]) -> tuple[float, float]:
    """The case tolerance the rounding model justifies (module docstring)."""
    base_rtol, base_atol = CASE_TOLERANCES[config["dtype"]]
    if config["penalty"] != "none":
        return base_rtol, base_atol
    eps = float(np.finfo(np.dtype(config["dtype"])).eps)
    kappa = max(
        _equilibrated_condition(s["information"], s["weight_sum"], config["ridge"])
        for s in states
    )
    amplified = CONDITION_FACTOR * eps * kappa
    if amplified <= base_rtol:
        return base_rtol, base_atol
    # a power of ten keeps the corpus text short; it only rounds the bound up
    rtol = 10.0 ** math.ceil(math.log10(amplified))
    return rtol, rtol * (base_atol / base_rtol)


@dataclasses.dataclass(frozen=True)
class _RunFacts:
    """What the generator checks about a run but does not store in the corpus."""

    used_svd: list[bool]
    derived_tolerance: tuple[float, float]


def _run_case(spec: dict, tolerance: tuple[float, float] | None) -> tuple[dict, _RunFacts]:
    """Stream the case through the reference. tolerance: the recorded case tolerance (v1, v2)
    or None to derive it (v3)."""
    config = spec["config"]
    dtype = np.dtype(config["dtype"])
    batches = _typed_batches(spec)
    p = batches[0]["X"].shape[1]
    update_config = _update_config(config, p)
    state = RenewableState.empty(update_config.n_parameters, dtype)
    states, used_svd = [], []
    for b in batches:
        design = design_matrix(np, b["X"], config["fit_intercept"])
        state, diagnostics = renewable_update(
            np, state, design, b["y"], b["sample_weight"], update_config
        )
        used_svd.append(bool(diagnostics.used_regularized_fallback))
        states.append(
            {
                "coefficients": _vector(state.coefficients),
                "information": _matrix(state.information),
                "n_samples_seen": int(state.n_samples_seen),
                "batch_count": int(state.batch_count),
                "previous_lambda": float(state.previous_lambda),
                "weight_sum": float(state.weight_sum),
                "diagnostics": {
                    "iterations": int(diagnostics.iterations),
                    "converged": bool(diagnostics.converged),
                    "objective": float(diagnostics.objective),
                    "lambda_value": float(diagnostics.lambda_value),
                    "bandwidth": float(diagnostics.bandwidth),
                },
            }
        )
    probe = np.asarray(spec["probe_X"], dtype=dtype)
    predictions = design_matrix(np, probe, config["fit_intercept"]) @ state.coefficients
    derived = _derived_tolerance(config, states)
    rtol, atol = derived if tolerance is None else tolerance
    case = {
        "id": spec["id"],
        "description": spec["description"],
        "rtol": rtol,
        "atol": atol,
        "config": config,
        "batches": [
            {
                "X": _matrix(b["X"]),
                "y": _vector(b["y"]),
                "sample_weight": None
                if b["sample_weight"] is None
                else _vector(b["sample_weight"]),
            }
            for b in batches
        ],
        "probe_X": _matrix(probe),
        "expected": {"states": states, "predictions": _vector(predictions)},
    }
    return case, _RunFacts(used_svd, derived)


def _float32_oracle_problem(spec: dict, case: dict) -> str | None:
    """A float32 oracle must lie within FLOAT32_ORACLE_SLACK of the float64 computation on the
    same float32 data, on every value the kit compares: engines that accumulate in double are
    then never judged against rounding noise of the oracle (the cpu float32 floor is four times
    the slack), and the reference float32 floor of the rounding model follows from it."""
    as64 = dict(spec, config=dict(spec["config"], dtype="float64"))
    as64["batches"] = [
        {
            k: None if v is None else np.asarray(v, dtype=np.float32).astype(np.float64)
            for k, v in b.items()
        }
        for b in spec["batches"]
    ]
    as64["probe_X"] = np.asarray(spec["probe_X"], dtype=np.float32).astype(np.float64)
    reference64, _ = _run_case(as64, CASE_TOLERANCES["float64"])
    rtol, atol = FLOAT32_ORACLE_SLACK

    def close(a, b) -> bool:
        return bool(np.allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol))

    pairs = zip(case["expected"]["states"], reference64["expected"]["states"], strict=True)
    for index, (state32, state64) in enumerate(pairs):
        for key in ("coefficients", "information", "previous_lambda", "weight_sum"):
            if not close(state32[key], state64[key]):
                worst = float(np.max(np.abs(np.asarray(state32[key]) - state64[key])))
                return f"batch {index + 1} {key} differs from float64 by up to {worst:.3g}"
        for key in ("objective", "lambda_value", "bandwidth"):
            if not close(state32["diagnostics"][key], state64["diagnostics"][key]):
                return f"batch {index + 1} {key} differs from float64"
        if state32["diagnostics"]["converged"] != state64["diagnostics"]["converged"]:
            return f"batch {index + 1} converged differs from float64"
    # predictions within what the coefficients' slack allows (prediction_scales)
    magnitude, atol_scale = prediction_scales(
        _probe_design(case), reference64["expected"]["states"][-1]["coefficients"]
    )
    gap = np.abs(np.asarray(case["expected"]["predictions"]) - reference64["expected"]["predictions"])
    if np.any(gap > atol * atol_scale + rtol * magnitude):
        return f"the predictions differ from float64 by up to {float(np.max(gap)):.3g}"
    return None


def _probe_design(case: dict) -> np.ndarray:
    probe = np.asarray(case["probe_X"], dtype=np.float64)
    if case["config"]["fit_intercept"]:
        probe = np.column_stack([probe, np.ones(len(probe))])
    return probe


def _check_expectations(
    name: str, specs: list[dict], cases: list[dict], facts: list[_RunFacts]
) -> None:
    """The properties conformance/README.md promises about each corpus; a violated one means
    the cases no longer test what they claim, so generation stops."""
    problems = []
    converged = [[s["diagnostics"]["converged"] for s in c["expected"]["states"]] for c in cases]
    if name == "native_core_v1.json":
        if not any(facts[3].used_svd):
            problems.append("v1 case 4 did not use the minimum-norm (SVD) fallback")
        if any(any(f.used_svd) for f in facts[:3]):
            problems.append("a well-posed v1 case used the minimum-norm fallback")
        for index in (0, 2, 3):
            if not all(converged[index]):
                problems.append(f"v1 case {index + 1} ({cases[index]['id']}) did not converge")
    elif name == "native_core_v2.json":
        for case, flags in zip(cases, converged, strict=True):
            if not all(flags):
                problems.append(f"v2 case {case['id']} did not converge (the corpus requires it)")
    if name in ("native_core_v1.json", "native_core_v2.json"):
        for case, fact in zip(cases, facts, strict=True):
            # the recorded base tolerance must still be what the rounding model justifies
            if fact.derived_tolerance[0] > case["rtol"]:
                problems.append(
                    f"{case['id']}: recorded rtol {case['rtol']:g} is below the derived "
                    f"{fact.derived_tolerance[0]:g}"
                )
    for spec, case in zip(specs, cases, strict=True):
        check = spec.get("check")
        if check is not None:
            problem = check(case)
            if problem:
                problems.append(f"{case['id']}: {problem}")
    if problems:
        raise RuntimeError(f"{name}: " + "; ".join(problems))


@dataclasses.dataclass(frozen=True)
class _Corpus:
    name: str
    version: int
    specs: Callable[[], list[dict]]
    recorded_tolerance: bool  # v1, v2: the base tolerance is stored; v3: derived per case
    frozen: bool = False


CORPORA = (
    _Corpus("native_core_v1.json", 1, _v1_cases, recorded_tolerance=True, frozen=True),
    _Corpus("native_core_v2.json", 2, _v2_cases, recorded_tolerance=True),
)
CORPUS_NAMES = tuple(corpus.name for corpus in CORPORA)
_BY_NAME = {corpus.name: corpus for corpus in CORPORA}

# SHA-256 of the frozen corpora without their "oracle" metadata (_content_digest).
FROZEN_DIGESTS = {
    "native_core_v1.json": "87765f9bd82d303a31a7978db02cedd0566e65fd516a24f8354390359dd01545",
}


def build_document(name: str) -> dict:
    corpus = _BY_NAME[name]
    specs = corpus.specs()
    results = []
    for spec in specs:
        recorded = CASE_TOLERANCES[spec["config"]["dtype"]] if corpus.recorded_tolerance else None
        results.append(_run_case(spec, recorded))
    cases = [case for case, _ in results]
    _check_expectations(name, specs, cases, [facts for _, facts in results])
    for spec, case in zip(specs, cases, strict=True):
        problem = case["config"]["dtype"] == "float32" and _float32_oracle_problem(spec, case)
        if problem:
            raise RuntimeError(f"{name} case {case['id']}: poor float32 oracle: {problem}")
    return {
        "schema": SCHEMA_NAME,
        "schema_version": corpus.version,
        "oracle": dict(ORACLE),
        "cases": cases,
    }


def dumps(document: dict) -> str:
    return json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"


def build_corpus(name: str) -> str:
    """The corpus regenerated on this machine, as the text --write would write for a corpus
    that is not frozen."""
    return dumps(build_document(name))


def _content_digest(document: dict) -> str:
    content = {key: value for key, value in document.items() if key != "oracle"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------- the rounding model

_CLOSE_STATE_KEYS = frozenset({"coefficients", "information", "previous_lambda", "weight_sum"})
_CLOSE_DIAGNOSTIC_KEYS = frozenset({"objective", "lambda_value", "bandwidth"})


@dataclasses.dataclass
class Comparison:
    """The differences found (each a line naming the path) and what matched within rounding."""

    differences: list[str] = dataclasses.field(default_factory=list)
    compared: int = 0
    identical: int = 0
    worst: float = 0.0
    worst_where: str = ""
    iteration_notes: list[str] = dataclasses.field(default_factory=list)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _exact(a, b, path: str, found: Comparison) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a:
                found.differences.append(f"{path}.{key}: only in the regenerated corpus")
            elif key not in b:
                found.differences.append(f"{path}.{key}: only in the committed corpus")
            else:
                _exact(a[key], b[key], f"{path}.{key}", found)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            found.differences.append(f"{path}: length {len(a)} committed, {len(b)} regenerated")
            return
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            _exact(x, y, f"{path}[{index}]", found)
        return
    if a != b or type(a) is not type(b):
        found.differences.append(f"{path}: committed {a!r}, regenerated {b!r}")


def _close(
    a, b, path: str, tolerance: Tolerance, extra_rtol: float, found: Comparison, scales=None
) -> None:
    """scales: per element (magnitude, atol_scale) replacing (|a|, 1), for predictions."""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            found.differences.append(f"{path}: length {len(a)} committed, {len(b)} regenerated")
            return
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            scale = None if scales is None else (scales[0][index], scales[1][index])
            _close(x, y, f"{path}[{index}]", tolerance, extra_rtol, found, scale)
        return
    if not (_is_number(a) and _is_number(b)) or type(a) is not type(b):
        _exact(a, b, path, found)
        return
    found.compared += 1
    difference = abs(a - b)
    if difference == 0.0:
        found.identical += 1
        return
    magnitude, atol_scale = (abs(a), 1.0) if scales is None else scales
    allowance = max(
        tolerance.atol * atol_scale + tolerance.rtol * magnitude, extra_rtol * max(1.0, abs(a))
    )
    ratio = difference / allowance if allowance > 0 else math.inf
    if ratio > found.worst:
        found.worst, found.worst_where = ratio, path
    if ratio > 1.0:
        found.differences.append(
            f"{path}: committed {a!r}, regenerated {b!r} ({ratio:.3g}x the rounding-model "
            f"tolerance rtol {tolerance.rtol:g} atol {tolerance.atol:g})"
        )


def _compare_case(a: dict, b: dict, path: str, extra_rtol: float, found: Comparison) -> None:
    _exact({k: v for k, v in a.items() if k != "expected"},
           {k: v for k, v in b.items() if k != "expected"}, path, found)
    if found.differences or "expected" not in a or "expected" not in b:
        # another id, config or input: the values below would not be comparable
        _exact(a.get("expected"), b.get("expected"), f"{path}.expected", found)
        return
    tolerance = Tolerance.for_case(a["rtol"], a["atol"], "reference", a["config"]["dtype"])
    expected_a, expected_b = a["expected"], b["expected"]
    _exact(sorted(expected_a), sorted(expected_b), f"{path}.expected keys", found)
    states_a, states_b = expected_a.get("states", []), expected_b.get("states", [])
    scales = None
    if states_a and len(expected_a.get("predictions", [])) == len(a["probe_X"]):
        scales = prediction_scales(_probe_design(a), states_a[-1]["coefficients"])
    _close(expected_a.get("predictions"), expected_b.get("predictions"),
           f"{path}.expected.predictions", tolerance, extra_rtol, found, scales)
    if len(states_a) != len(states_b):
        found.differences.append(
            f"{path}.expected.states: length {len(states_a)} committed, {len(states_b)} "
            "regenerated"
        )
        return
    for index, (sa, sb) in enumerate(zip(states_a, states_b, strict=True)):
        where = f"{path}.expected.states[{index}]"
        _exact(sorted(sa), sorted(sb), f"{where} keys", found)
        for key in sorted(set(sa) & set(sb)):
            if key in _CLOSE_STATE_KEYS:
                _close(sa[key], sb[key], f"{where}.{key}", tolerance, extra_rtol, found)
            elif key != "diagnostics":
                _exact(sa[key], sb[key], f"{where}.{key}", found)
        da, db = sa.get("diagnostics", {}), sb.get("diagnostics", {})
        _exact(sorted(da), sorted(db), f"{where}.diagnostics keys", found)
        for key in sorted(set(da) & set(db)):
            here = f"{where}.diagnostics.{key}"
            if key in _CLOSE_DIAGNOSTIC_KEYS:
                _close(da[key], db[key], here, tolerance, extra_rtol, found)
            elif key == "iterations" and _is_number(da[key]) and _is_number(db[key]):
                step = db[key] - da[key]
                if abs(step) > ITERATION_WINDOW:
                    found.differences.append(
                        f"{here}: committed {da[key]}, regenerated {db[key]} (more than "
                        f"{ITERATION_WINDOW} apart)"
                    )
                elif step:
                    found.iteration_notes.append(f"{a.get('id')} batch {index + 1}: {step:+d}")
            else:
                _exact(da[key], db[key], here, found)


def compare_documents(committed: dict, regenerated: dict, extra_rtol: float = 0.0) -> Comparison:
    """committed vs regenerated under the rounding model (module docstring). extra_rtol > 0
    additionally accepts values within extra_rtol * max(1, |value|) (the older --rtol)."""
    found = Comparison()
    if not (isinstance(committed, dict) and isinstance(regenerated, dict)):
        _exact(committed, regenerated, "$", found)
        return found
    _exact({k: v for k, v in committed.items() if k != "cases"},
           {k: v for k, v in regenerated.items() if k != "cases"}, "$", found)
    cases_a, cases_b = committed.get("cases"), regenerated.get("cases")
    if not (isinstance(cases_a, list) and isinstance(cases_b, list)) or len(cases_a) != len(
        cases_b
    ):
        _exact(cases_a if not isinstance(cases_a, list) else len(cases_a),
               cases_b if not isinstance(cases_b, list) else len(cases_b), "$.cases", found)
        return found
    for index, (a, b) in enumerate(zip(cases_a, cases_b, strict=True)):
        if isinstance(a, dict) and isinstance(b, dict):
            _compare_case(a, b, f"$.cases[{index}]", extra_rtol, found)
        else:
            _exact(a, b, f"$.cases[{index}]", found)
    return found


def _without_oracle(document: dict) -> dict:
    return {key: value for key, value in document.items() if key != "oracle"}


# ------------------------------------------------------------------------ check and write


def _print_differences(path: Path, differences: list[str], what: str) -> None:
    print(f"FAIL {path}: {len(differences)} difference(s) {what}")
    for line in differences[:20]:
        print(f"     {line}")
    if len(differences) > 20:
        print(f"     ... and {len(differences) - 20} more")


def _frozen_problem(name: str, document: dict) -> str | None:
    digest = FROZEN_DIGESTS.get(name)
    if digest is None:
        return None
    actual = _content_digest(document)
    if actual != digest:
        return (
            f"{name} is frozen but its content (everything but the oracle metadata) has "
            f"SHA-256 {actual}, not {digest}"
        )
    return None


def check(out_dir: Path, exact: bool = False, extra_rtol: float = 0.0) -> int:
    """Compare every committed corpus with its regeneration: under the rounding model by
    default, byte for byte with exact=True (the recording host)."""
    failed = False
    for name in CORPUS_NAMES:
        path = out_dir / name
        regenerated_document = build_document(name)
        regenerated = dumps(regenerated_document)
        if not path.is_file():
            print(f"FAIL {path}: missing (run golden/generate.py --write)")
            failed = True
            continue
        committed = path.read_text(encoding="utf-8")
        try:
            committed_document = json.loads(committed)
        except json.JSONDecodeError as error:
            print(f"FAIL {path}: not valid JSON ({error})")
            failed = True
            continue
        frozen = _frozen_problem(name, committed_document)
        if frozen:
            print(f"FAIL {path}: {frozen}")
            failed = True
            continue
        if exact:
            if committed == regenerated:
                print(f"OK   {path} (byte-identical)")
                continue
            found = Comparison()
            _exact(committed_document, regenerated_document, "$", found)
            differences = found.differences or [
                "same values, different bytes (formatting, key order or newline)"
            ]
            failed = True
            _print_differences(path, differences, "from the regenerated corpus (--exact)")
            continue
        if committed != dumps(committed_document):
            print(f"FAIL {path}: not in the canonical format (indent 2, sorted keys, newline)")
            failed = True
            continue
        found = compare_documents(committed_document, regenerated_document, extra_rtol)
        if found.differences:
            failed = True
            _print_differences(path, found.differences, "beyond the rounding model")
            continue
        if committed == regenerated:
            print(f"OK   {path} (byte-identical)")
            continue
        detail = (
            f"{found.compared - found.identical} of {found.compared} values within rounding, "
            f"worst {found.worst:.2g}x tolerance at {found.worst_where}"
        )
        if found.iteration_notes:
            detail += "; iterations " + ", ".join(found.iteration_notes)
        print(f"OK   {path} (rounding model: {detail})")
    return 1 if failed else 0


def write(out_dir: Path) -> int:
    """Write every corpus from this machine's regeneration; a frozen corpus keeps the numbers
    of its committed copy (out_dir's, else golden/'s) and takes only the new metadata, after
    the regeneration reproduced them under the rounding model."""
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = False
    for corpus in CORPORA:
        path = out_dir / corpus.name
        document = build_document(corpus.name)
        if corpus.frozen:
            base = path if path.is_file() else GOLDEN_DIR / corpus.name
            if base.is_file():
                committed = json.loads(base.read_text(encoding="utf-8"))
                problem = _frozen_problem(corpus.name, committed)
                if problem is None:
                    found = compare_documents(_without_oracle(committed), _without_oracle(document))
                    if found.differences:
                        problem = (
                            "the reference no longer reproduces it: "
                            + "; ".join(found.differences[:5])
                        )
                if problem:
                    print(f"FAIL {path}: not written: {problem}")
                    failed = True
                    continue
                document = dict(committed, oracle=document["oracle"])
        path.write_text(dumps(document), encoding="utf-8", newline="\n")
        print(f"wrote {path}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="write the corpora")
    mode.add_argument("--check", action="store_true", help="compare with the committed corpora")
    parser.add_argument(
        "--out-dir", type=Path, default=GOLDEN_DIR, help="folder of the corpora (default: golden/)"
    )
    parser.add_argument(
        "--exact",
        action="store_true",
        help="with --check: byte-for-byte instead of the rounding model (the recording host)",
    )
    parser.add_argument(
        "--rtol",
        type=float,
        default=0.0,
        help="with --check: also accept values within this relative difference of "
        "max(1, |value|), on top of the rounding model (default 0)",
    )
    args = parser.parse_args(argv)
    if args.rtol < 0 or args.rtol >= 1e-3:
        parser.error(f"--rtol must be in [0, 1e-3), got {args.rtol}")
    if args.write and (args.exact or args.rtol):
        parser.error("--exact and --rtol apply to --check only")
    if args.exact and args.rtol:
        parser.error("--exact compares bytes; --rtol does not apply")
    if args.write:
        return write(args.out_dir)
    return check(args.out_dir, exact=args.exact, extra_rtol=args.rtol)


if __name__ == "__main__":
    sys.exit(main())
