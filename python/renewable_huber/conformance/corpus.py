"""Golden corpora: locating, loading and typing them (schema in conformance/schema/).

The JSON holds the estimator-level view of a stream (X without the intercept column, the
estimator's constructor parameters); this module turns it into typed cases with NumPy
arrays in the case's working dtype, so every engine driver sees the same inputs.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from ..exceptions import ValidationError

SCHEMA_NAME = "renewable-huber-native-golden"
DEFAULT_CORPUS_NAMES = (
    "native_core_v1.json",
    "native_core_v2.json",
    "native_core_v3.json",
    "native_core_v4.json",
)
# An ExpectedState's meat when its corpus records none (schema versions 1 to 3): nothing to
# compare. A recorded null is None: the engine must report that it holds no K.
NOT_RECORDED = "not recorded"

_PACKAGE_DATA = Path(__file__).resolve().parent / "data"
_REPO_ROOT = Path(__file__).resolve().parents[3]


def data_file(relative_in_repo: str) -> Path:
    """Find a kit data file: the copy installed beside the package (wheels), else the file in
    the source tree (development checkouts). Raises FileNotFoundError naming both places."""
    name = Path(relative_in_repo).name
    candidates = [_PACKAGE_DATA / name, _REPO_ROOT / relative_in_repo]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(f"conformance data file {name!r} not found (tried {tried})")


def default_corpus_paths() -> list[Path]:
    return [data_file(f"conformance/corpora/{name}") for name in DEFAULT_CORPUS_NAMES]


@dataclasses.dataclass(frozen=True)
class Batch:
    X: np.ndarray
    y: np.ndarray
    sample_weight: np.ndarray | None


@dataclasses.dataclass(frozen=True)
class ExpectedState:
    coefficients: np.ndarray
    information: np.ndarray
    n_samples_seen: int
    batch_count: int
    previous_lambda: float
    weight_sum: float
    iterations: int
    converged: bool
    objective: float
    lambda_value: float
    bandwidth: float
    # K after the batch (float64), None for "the stream has none", or NOT_RECORDED
    meat: np.ndarray | None | str = NOT_RECORDED


@dataclasses.dataclass(frozen=True)
class GoldenCase:
    corpus: str
    id: str
    description: str
    rtol: float
    atol: float
    config: dict
    batches: tuple[Batch, ...]
    probe_X: np.ndarray
    states: tuple[ExpectedState, ...]
    predictions: np.ndarray

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.config["dtype"])

    @property
    def n_features_in(self) -> int:
        return int(self.batches[0].X.shape[1])

    @property
    def fit_intercept(self) -> bool:
        return bool(self.config["fit_intercept"])

    @property
    def n_parameters(self) -> int:
        return self.n_features_in + int(self.fit_intercept)

    @property
    def qualified_id(self) -> str:
        return f"{self.corpus}/{self.id}"


def _array(values, dtype, what: str, ndim: int) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != ndim:
        raise ValidationError(f"{what}: expected a {ndim}-D array, got shape {array.shape}")
    # float32 corpora store float32 values exactly, so this cast is lossless.
    return np.ascontiguousarray(array.astype(dtype))


def _case_from_json(corpus: str, raw: dict) -> GoldenCase:
    dtype = np.dtype(raw["config"]["dtype"])
    where = f"{corpus}/{raw['id']}"
    batches = tuple(
        Batch(
            X=_array(b["X"], dtype, f"{where} batch {i} X", 2),
            y=_array(b["y"], dtype, f"{where} batch {i} y", 1),
            sample_weight=None
            if b["sample_weight"] is None
            else _array(b["sample_weight"], dtype, f"{where} batch {i} sample_weight", 1),
        )
        for i, b in enumerate(raw["batches"])
    )
    states = tuple(
        ExpectedState(
            coefficients=_array(s["coefficients"], dtype, f"{where} state {i} coefficients", 1),
            information=_array(s["information"], dtype, f"{where} state {i} information", 2),
            n_samples_seen=int(s["n_samples_seen"]),
            batch_count=int(s["batch_count"]),
            previous_lambda=float(s["previous_lambda"]),
            weight_sum=float(s["weight_sum"]),
            iterations=int(s["diagnostics"]["iterations"]),
            converged=bool(s["diagnostics"]["converged"]),
            objective=float(s["diagnostics"]["objective"]),
            lambda_value=float(s["diagnostics"]["lambda_value"]),
            bandwidth=float(s["diagnostics"]["bandwidth"]),
            meat=_meat(s, f"{where} state {i} meat"),
        )
        for i, s in enumerate(raw["expected"]["states"])
    )
    if len(states) != len(batches):
        raise ValidationError(
            f"{where}: {len(batches)} batches but {len(states)} expected states (one per batch)"
        )
    return GoldenCase(
        corpus=corpus,
        id=raw["id"],
        description=raw["description"],
        rtol=float(raw["rtol"]),
        atol=float(raw["atol"]),
        config=dict(raw["config"]),
        batches=batches,
        probe_X=_array(raw["probe_X"], dtype, f"{where} probe_X", 2),
        states=states,
        predictions=_array(raw["expected"]["predictions"], dtype, f"{where} predictions", 1),
    )


def _meat(state: dict, what: str):
    if "meat" not in state:
        return NOT_RECORDED
    if state["meat"] is None:
        return None
    return _array(state["meat"], np.float64, what, 2)


def load_corpus(path: str | Path) -> list[GoldenCase]:
    """Read one corpus file. Raises ValidationError naming the file for anything that is not a
    renewable-huber golden corpus (the full structural check is the JSON Schema's job)."""
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValidationError(f"corpus {path}: not valid JSON ({error})") from error
    if not isinstance(document, dict) or document.get("schema") != SCHEMA_NAME:
        raise ValidationError(f"corpus {path}: top-level 'schema' must be {SCHEMA_NAME!r}")
    name = f"{path.stem}"
    try:
        return [_case_from_json(name, raw) for raw in document["cases"]]
    except (KeyError, TypeError) as error:
        raise ValidationError(f"corpus {path}: missing or malformed field {error}") from error
