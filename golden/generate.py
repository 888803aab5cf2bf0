"""Generate (--write) or verify (--check) the golden corpora from the NumPy reference core.

    python golden/generate.py --check            # CI: regenerate in memory, compare bytes
    python golden/generate.py --write            # rewrite both corpora (v1 is frozen: see below)
    python golden/generate.py --write --out-dir /tmp/g

The data of every case comes from a fixed-seed PCG64 stream rounded to three decimals, so the
inputs are short, readable and identical on every platform; the expected states come from
renewable_huber.core, the oracle of spec/ALGORITHM.md. Once committed, native_core_v1.json
never changes: --check fails if the reference drifts from it, which is the point.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

GOLDEN_DIR = Path(__file__).resolve().parent
# The oracle is the reference in this source tree, never an installed copy that may lag it.
sys.path.insert(0, str(GOLDEN_DIR.parent / "python"))

from renewable_huber.config import UpdateConfig  # noqa: E402
from renewable_huber.core import design_matrix, renewable_update  # noqa: E402
from renewable_huber.state import RenewableState  # noqa: E402

SCHEMA_NAME = "renewable-huber-native-golden"
ORACLE = {
    "implementation": "renewable_huber.core (NumPy reference, spec/ALGORITHM.md)",
    "role": "oracle: every engine behind the ABI must reproduce these states within the "
    "tolerances of spec/GOLDEN.md",
}
# Tight enough that the engine profiles (C CPU, CUDA) always dominate the max(), loose enough
# that the reference on another BLAS still reproduces its own corpus.
CASE_TOLERANCES = {"float64": (1e-9, 1e-11), "float32": (1e-4, 1e-5)}
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
    """Synthetic batches y = X beta + intercept + noise, with optional gross outliers."""

    def __init__(self, seed: int, beta: list[float], intercept: float, noise: float = 0.5):
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.beta = np.asarray(beta, dtype=np.float64)
        self.intercept = intercept
        self.noise = noise

    def features(self, n: int) -> np.ndarray:
        return _rounded(self.rng.standard_normal((n, self.beta.size)))

    def batch(self, n: int, outliers: int = 0, weights: list[float] | None = None) -> dict:
        X = self.features(n)
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
    # _check_float32_oracle); with gross outliers it stops early at a poor point.
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


def _run_case(spec: dict) -> tuple[dict, list[bool]]:
    """Stream the case through the reference; returns the JSON case and, per batch, whether
    the minimum-norm fallback ran (checked by the generator, not stored)."""
    config = spec["config"]
    dtype = np.dtype(config["dtype"])
    batches = [
        {
            "X": np.asarray(b["X"], dtype=dtype),
            "y": np.asarray(b["y"], dtype=dtype),
            "sample_weight": None
            if b["sample_weight"] is None
            else np.asarray(b["sample_weight"], dtype=dtype),
        }
        for b in spec["batches"]
    ]
    p = batches[0]["X"].shape[1]
    update_config = _update_config(config, p)
    state = RenewableState.empty(update_config.n_parameters, dtype)
    states, fallbacks = [], []
    for b in batches:
        design = design_matrix(np, b["X"], config["fit_intercept"])
        state, diagnostics = renewable_update(
            np, state, design, b["y"], b["sample_weight"], update_config
        )
        fallbacks.append(bool(diagnostics.used_regularized_fallback))
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
    rtol, atol = CASE_TOLERANCES[config["dtype"]]
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
    return case, fallbacks


# A float32 oracle must sit well inside the C engine's float32 tolerance (GOLDEN.md: rtol 4e-4,
# atol 4e-5) of the same stream computed in float64, or engines that accumulate in double
# would fail against rounding noise of the oracle rather than against a real difference.
FLOAT32_ORACLE_SLACK = (1e-4, 1e-5)


def _float32_oracle_problem(spec: dict, case: dict) -> str | None:
    as64 = dict(spec, config=dict(spec["config"], dtype="float64"))
    as64["batches"] = [
        {
            k: None if v is None else np.asarray(v, dtype=np.float32).astype(np.float64)
            for k, v in b.items()
        }
        for b in spec["batches"]
    ]
    as64["probe_X"] = np.asarray(spec["probe_X"], dtype=np.float32).astype(np.float64)
    reference64, _ = _run_case(as64)
    rtol, atol = FLOAT32_ORACLE_SLACK
    pairs = zip(case["expected"]["states"], reference64["expected"]["states"], strict=True)
    for index, (state32, state64) in enumerate(pairs):
        for key in ("coefficients", "information"):
            a, b = np.asarray(state32[key]), np.asarray(state64[key])
            if not np.allclose(a, b, rtol=rtol, atol=atol):
                worst = float(np.max(np.abs(a - b)))
                return f"batch {index + 1} {key} differs from float64 by up to {worst:.3g}"
        if state32["diagnostics"]["converged"] != state64["diagnostics"]["converged"]:
            return f"batch {index + 1} converged differs from float64"
    return None


def _check_expectations(name: str, cases: list[dict], fallbacks: list[list[bool]]) -> None:
    """The properties GOLDEN.md promises about each corpus; a violated one means the cases
    no longer test what they claim, so generation stops."""
    problems = []
    if name == "native_core_v1.json":
        if not any(fallbacks[3]):
            problems.append("v1 case 4 did not use the minimum-norm (SVD) fallback")
        if any(fallbacks[i][j] for i in range(3) for j in range(len(fallbacks[i]))):
            problems.append("a well-posed v1 case used the minimum-norm fallback")
        for index in (0, 2, 3):
            if not all(s["diagnostics"]["converged"] for s in cases[index]["expected"]["states"]):
                problems.append(f"v1 case {index + 1} ({cases[index]['id']}) did not converge")
    else:
        for case in cases:
            if not all(s["diagnostics"]["converged"] for s in case["expected"]["states"]):
                problems.append(f"v2 case {case['id']} did not converge (GOLDEN.md requires it)")
    if problems:
        raise RuntimeError(f"{name}: " + "; ".join(problems))


def build_corpus(name: str) -> str:
    version, specs = {"native_core_v1.json": (1, _v1_cases), "native_core_v2.json": (2, _v2_cases)}[
        name
    ]
    specs = specs()
    results = [_run_case(spec) for spec in specs]
    cases = [case for case, _ in results]
    _check_expectations(name, cases, [fallback for _, fallback in results])
    for spec, case in zip(specs, cases, strict=True):
        problem = case["config"]["dtype"] == "float32" and _float32_oracle_problem(spec, case)
        if problem:
            raise RuntimeError(f"{name} case {case['id']}: poor float32 oracle: {problem}")
    document = {"schema": SCHEMA_NAME, "schema_version": version, "oracle": ORACLE, "cases": cases}
    return json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"


CORPUS_NAMES = ("native_core_v1.json", "native_core_v2.json")


def _differences(committed, regenerated, path: str = "$", rtol: float = 0.0) -> list[str]:
    """Every value that differs; with rtol > 0, floats within rtol * max(1, |value|) match."""
    if isinstance(committed, dict) and isinstance(regenerated, dict):
        found = []
        for key in sorted(set(committed) | set(regenerated)):
            if key not in committed:
                found.append(f"{path}.{key}: only in the regenerated corpus")
            elif key not in regenerated:
                found.append(f"{path}.{key}: only in the committed corpus")
            else:
                found += _differences(committed[key], regenerated[key], f"{path}.{key}", rtol)
        return found
    if isinstance(committed, list) and isinstance(regenerated, list):
        if len(committed) != len(regenerated):
            return [f"{path}: length {len(committed)} committed, {len(regenerated)} regenerated"]
        found = []
        for index, (a, b) in enumerate(zip(committed, regenerated, strict=True)):
            found += _differences(a, b, f"{path}[{index}]", rtol)
        return found
    if rtol > 0 and isinstance(committed, float) and isinstance(regenerated, float):
        if abs(committed - regenerated) <= rtol * max(1.0, abs(regenerated)):
            return []
    if committed != regenerated or type(committed) is not type(regenerated):
        return [f"{path}: committed {committed!r}, regenerated {regenerated!r}"]
    return []


def check(out_dir: Path, rtol: float = 0.0) -> int:
    """Byte-for-byte by default (the machine that generated the corpora, and CI). rtol > 0 is for
    other machines, whose NumPy/BLAS round the reference differently in the last digits: values
    within rtol still match, so only a real change of the reference fails."""
    failed = False
    for name in CORPUS_NAMES:
        path = out_dir / name
        regenerated = build_corpus(name)
        if not path.is_file():
            print(f"FAIL {path}: missing (run golden/generate.py --write)")
            failed = True
            continue
        committed = path.read_text(encoding="utf-8")
        if committed == regenerated:
            print(f"OK   {path}")
            continue
        try:
            differences = _differences(json.loads(committed), json.loads(regenerated), rtol=rtol)
        except json.JSONDecodeError as error:
            differences = [f"committed file is not valid JSON: {error}"]
        if not differences and rtol > 0:
            print(f"OK   {path} (values within rtol {rtol:g}, not byte-identical)")
            continue
        failed = True
        if not differences:
            differences = ["same values, different bytes (formatting, key order or newline)"]
        print(f"FAIL {path}: {len(differences)} difference(s) from the regenerated corpus")
        for line in differences[:20]:
            print(f"     {line}")
        if len(differences) > 20:
            print(f"     ... and {len(differences) - 20} more")
    return 1 if failed else 0


def write(out_dir: Path) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in CORPUS_NAMES:
        path = out_dir / name
        path.write_text(build_corpus(name), encoding="utf-8", newline="\n")
        print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="write the corpora")
    mode.add_argument("--check", action="store_true", help="compare with the committed corpora")
    parser.add_argument(
        "--out-dir", type=Path, default=GOLDEN_DIR, help="folder of the corpora (default: golden/)"
    )
    parser.add_argument(
        "--rtol",
        type=float,
        default=0.0,
        help="with --check: accept values within this relative difference (other machines' "
        "BLAS rounding; default 0 = byte-for-byte)",
    )
    args = parser.parse_args(argv)
    if args.rtol < 0 or args.rtol >= 1e-3:
        parser.error(f"--rtol must be in [0, 1e-3), got {args.rtol}")
    return write(args.out_dir) if args.write else check(args.out_dir, args.rtol)


if __name__ == "__main__":
    sys.exit(main())
