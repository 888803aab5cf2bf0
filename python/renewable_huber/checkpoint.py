"""Pickle-free checkpoints: one .npz with `coefficients`, `information` (row-major) and
`metadata` (a JSON string). Format 2 adds `weight_sum`; format 1 (unit weights) is read.

A checkpoint is a complete description of a stream: what the estimator's state_dict()
returns is what is written, and what load_checkpoint returns has passed every check that
the estimator would otherwise need, so a loaded payload can be restored on any backend.
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
from typing import Any

import numpy as np

from ._validation import DEFAULT_PARAMS, PARAM_NAMES, validate_params
from .exceptions import RenewableHuberError, ValidationError

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)

_ARRAY_NAMES = ("coefficients", "information")
_MEMBERS = frozenset((*_ARRAY_NAMES, "metadata"))
_METADATA_KEYS = (
    "format_version",
    "config",
    "n_samples_seen",
    "batch_count",
    "previous_lambda",
    "n_features_in",
    "fit_intercept",
    "weight_sum",
    "feature_names_in",
)


class _Corrupt(Exception):
    """Internal: one reason a checkpoint is rejected; wrapped with the path by the loader."""


# ---------------------------------------------------------------------------------------
# Writing


def save_checkpoint(path, payload: dict[str, Any]) -> None:
    """Write `payload` (the estimator's state_dict) to `path` atomically.

    The bytes go to a temporary file in the destination folder, are flushed and fsynced,
    and only then renamed over `path`: a crash at any point leaves either the previous file
    or the new one, never a truncated mix, and no temporary file behind.
    """
    path = os.fspath(path)
    arrays = {name: np.ascontiguousarray(payload[name]) for name in _ARRAY_NAMES}
    metadata = {key: payload[key] for key in _METADATA_KEYS if key != "format_version"}
    metadata = {"format_version": FORMAT_VERSION, **metadata}
    text = json.dumps(metadata, allow_nan=False, sort_keys=True)

    folder = os.path.dirname(os.path.abspath(path))
    descriptor, temporary = tempfile.mkstemp(
        dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "wb") as handle:
            np.savez(handle, metadata=np.array(text), **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        _copy_mode(path, temporary)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(folder)


def _copy_mode(path: str, temporary: str) -> None:
    # mkstemp creates 0600; an overwritten checkpoint keeps its permissions, a new one gets
    # the usual rw-r--r-- instead of a surprising owner-only file.
    try:
        mode = os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    os.chmod(temporary, mode)


def _fsync_directory(folder: str) -> None:
    # Makes the rename itself durable; directories cannot be opened this way on Windows.
    if os.name == "nt":
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the data itself is synced
    finally:
        os.close(descriptor)


# ---------------------------------------------------------------------------------------
# Reading


def load_checkpoint(path) -> dict[str, Any]:
    """Read and fully validate a checkpoint; returns the payload in format-2 form.

    Raises FileNotFoundError for a missing path and ValidationError starting with
    "invalid or corrupted checkpoint" for anything that is not a well-formed checkpoint.
    """
    path = os.fspath(path)
    with open(path, "rb") as handle:
        content = handle.read()
    try:
        arrays, metadata = _read_members(content)
        return _validated_payload(arrays, metadata)
    except _Corrupt as reason:
        raise ValidationError(f"invalid or corrupted checkpoint {path!r}: {reason}") from None


def _read_members(content: bytes) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    # Any failure while parsing untrusted bytes (zip structure, CRC, npy headers, pickled
    # object arrays refused by allow_pickle=False, absurd shapes) means the same thing.
    try:
        archive = np.load(io.BytesIO(content), allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise _Corrupt("not an .npz archive")
        with archive:
            names = set(archive.files)
            if names != _MEMBERS:
                raise _Corrupt(
                    f"expected members {sorted(_MEMBERS)}, found {sorted(names)}"
                )
            members = {name: archive[name] for name in sorted(names)}
    except _Corrupt:
        raise
    except Exception as error:
        raise _Corrupt(f"{type(error).__name__}: {error}") from None
    text = members.pop("metadata")
    if text.shape != () or text.dtype.kind != "U":
        raise _Corrupt("metadata must be a JSON string")
    try:
        metadata = json.loads(str(text[()]), parse_constant=_refuse_constant)
    except ValueError as error:
        raise _Corrupt(f"metadata is not valid JSON: {error}") from None
    if not isinstance(metadata, dict):
        raise _Corrupt("metadata must be a JSON object")
    return members, metadata


def _refuse_constant(name: str):
    raise ValueError(f"non-finite number {name}")


def _integer(metadata: dict, key: str, minimum: int) -> int:
    value = metadata[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _Corrupt(f"{key} must be an integer >= {minimum}, got {value!r}")
    return value


def _nonnegative_real(metadata: dict, key: str) -> float:
    value = metadata[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Corrupt(f"{key} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise _Corrupt(f"{key} must be finite and >= 0, got {value!r}")
    return float(value)


def _check_keys(metadata: dict, version: int) -> None:
    expected = set(_METADATA_KEYS)
    if version == 1:
        expected.discard("weight_sum")
    missing = sorted(expected - set(metadata))
    unknown = sorted(set(metadata) - expected)
    if missing:
        raise _Corrupt(f"metadata lacks {missing}")
    if unknown:
        raise _Corrupt(f"metadata has unexpected keys {unknown}")


def _config(metadata: dict, version: int) -> dict[str, Any]:
    config = metadata["config"]
    if not isinstance(config, dict):
        raise _Corrupt("config must be a JSON object")
    if version == 1:
        # Format 1 may predate some parameters; they take their defaults.
        config = {**{k: v for k, v in DEFAULT_PARAMS.items() if k not in config}, **config}
    elif set(config) != set(PARAM_NAMES):
        raise _Corrupt(
            f"config must hold exactly the parameters {list(PARAM_NAMES)}, got {sorted(config)}"
        )
    try:
        return validate_params(config).as_config_dict()
    except RenewableHuberError as error:
        raise _Corrupt(f"config: {error}") from None


def _validated_payload(arrays: dict[str, np.ndarray], metadata: dict[str, Any]) -> dict[str, Any]:
    version = metadata.get("format_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise _Corrupt(f"format_version must be one of {READABLE_VERSIONS}, got {version!r}")
    _check_keys(metadata, version)
    config = _config(metadata, version)

    n_features_in = _integer(metadata, "n_features_in", 1)
    fit_intercept = metadata["fit_intercept"]
    if not isinstance(fit_intercept, bool) or fit_intercept != config["fit_intercept"]:
        raise _Corrupt(
            f"fit_intercept is {fit_intercept!r} but the config says {config['fit_intercept']!r}"
        )
    n_parameters = n_features_in + int(fit_intercept)
    coefficients, information = arrays["coefficients"], arrays["information"]
    _check_array("coefficients", coefficients, (n_parameters,), config["dtype"])
    _check_array("information", information, (n_parameters, n_parameters), config["dtype"])

    n_samples_seen = _integer(metadata, "n_samples_seen", 0)
    batch_count = _integer(metadata, "batch_count", 0)
    previous_lambda = _nonnegative_real(metadata, "previous_lambda")
    weight_sum = (
        float(n_samples_seen) if version == 1 else _nonnegative_real(metadata, "weight_sum")
    )
    _check_counters(n_samples_seen, batch_count, previous_lambda, weight_sum)
    feature_names = _feature_names(metadata["feature_names_in"], n_features_in)

    return {
        "format_version": version,
        "config": config,
        "coefficients": np.ascontiguousarray(coefficients),
        "information": np.ascontiguousarray(information),
        "n_samples_seen": n_samples_seen,
        "batch_count": batch_count,
        "previous_lambda": previous_lambda,
        "n_features_in": n_features_in,
        "fit_intercept": fit_intercept,
        "weight_sum": weight_sum,
        "feature_names_in": feature_names,
    }


def _check_array(name: str, array: np.ndarray, shape: tuple[int, ...], dtype_name: str) -> None:
    if array.shape != shape:
        raise _Corrupt(f"{name} has shape {array.shape}, expected {shape}")
    if array.dtype != np.dtype(dtype_name):
        raise _Corrupt(f"{name} has dtype {array.dtype}, but the config says {dtype_name}")
    if not np.isfinite(array).all():
        raise _Corrupt(f"{name} contains NaN or infinity")


def _check_counters(n_samples_seen: int, batch_count: int, previous_lambda: float,
                    weight_sum: float) -> None:
    if (batch_count == 0) != (n_samples_seen == 0):
        raise _Corrupt(
            f"batch_count {batch_count} and n_samples_seen {n_samples_seen} disagree "
            "(both are 0 before the first batch, both positive after it)"
        )
    if batch_count > n_samples_seen:
        raise _Corrupt(
            f"batch_count {batch_count} exceeds n_samples_seen {n_samples_seen} "
            "(every batch has at least one row)"
        )
    if (weight_sum > 0) != (batch_count > 0):
        raise _Corrupt(
            f"weight_sum {weight_sum!r} is inconsistent with batch_count {batch_count} "
            "(every batch has a positive weight)"
        )
    if batch_count == 0 and previous_lambda != 0:
        raise _Corrupt(f"previous_lambda is {previous_lambda!r} before any batch")


def _feature_names(value, n_features_in: int) -> list[str] | None:
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) != n_features_in
        or not all(isinstance(name, str) for name in value)
    ):
        raise _Corrupt(
            f"feature_names_in must be null or a list of {n_features_in} strings, got {value!r}"
        )
    return value
