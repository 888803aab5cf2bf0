"""Pickle-free checkpoints: one .npz (a zip of .npy members) with `coefficients`,
`information` (row-major) and `metadata` (a JSON string).

Formats: 6 (written) adds the estimator's `standardize` parameter to the config and the
stream's `feature_scaling` to the metadata: null, or {"center": [...], "scale": [...]} with
one number per feature (the first batch's centre and scale, renewable_huber._feature_scaling),
present exactly when the config says standardize true; the arrays then hold the state of the
standardised problem. Formats 1 to 5 read as standardize false. 5 adds the estimator's
`inference` parameter to the config (whether the
stream accumulates K; a checkpoint with `has_meat` true must say inference true). Formats 1 to
4 have no such key: it reads as true for a format 4 checkpoint that carries K (those streams
computed K unasked) and false otherwise. 4 adds the stream's meat matrix K (the sandwich
covariance's middle, docs/algorithm.md "Inference") as a float64 member `meat`, present
exactly when the metadata's `has_meat` is true (a stream that has no K, e.g. one fitted with
inference=False or resumed from an older checkpoint, writes `has_meat` false and no member);
the digest covers it. Formats 1 to 3 are read with K absent, so a stream resumed from them has
no standard errors. 3 adds `payload_sha256`, a digest over the arrays and the metadata, so a
payload edited after it was written is refused, and may carry an optional `source` record
(the data file the stream last read and how many of its rows are in the model: see
validate_source; the command line writes it, estimator.save() never does); 2 adds
`weight_sum`; 1 (renewable-huber 0.7.x's first format, also without feature names) is read with
unit weights. Formats 1 and 2 carry no digest and are read on their own checks.

A checkpoint is a complete description of a stream: what the estimator's state_dict()
returns is what is written, and what load_checkpoint returns has passed every check that
the estimator would otherwise need, so a loaded payload can be restored on any backend.

Reading treats the file as hostile: only a regular file is opened, the zip directory and every
.npy header are checked before any array is read, the metadata is capped in size, the arrays'
shapes must be the ones the metadata implies (so a small file cannot declare a huge matrix),
and counters must fit the engines' int64.
"""

from __future__ import annotations

import glob
import hashlib
import json
import math
import os
import re
import stat
import tempfile
import zipfile
from typing import Any

import numpy as np

from ._feature_scaling import FeatureScaling
from ._validation import DEFAULT_PARAMS, PARAM_NAMES, validate_params
from .exceptions import RenewableHuberError, ValidationError

FORMAT_VERSION = 6
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)
INT64_MAX = 2**63 - 1
# The metadata is a few hundred bytes; feature names of a very wide table stay far below this.
MAX_METADATA_CHARACTERS = 1 << 22
# Array data is read in pieces of this size, so a lying header costs at most one piece.
_READ_PIECE = 1 << 20

_ARRAY_NAMES = ("coefficients", "information")
_MEAT = "meat"
_MEMBERS = frozenset((*_ARRAY_NAMES, "metadata"))
_DIGEST_KEY = "payload_sha256"
_HAS_MEAT_KEY = "has_meat"
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
    "feature_scaling",
)
_SOURCE_KEY = "source"
# Keys a format may lack, and keys only a format may have.
_ABSENT_IN = {
    1: {"weight_sum", _DIGEST_KEY, _HAS_MEAT_KEY, "feature_scaling"},
    2: {_DIGEST_KEY, _HAS_MEAT_KEY, "feature_scaling"},
    3: {_HAS_MEAT_KEY, "feature_scaling"},
    4: {"feature_scaling"},
    5: {"feature_scaling"},
    6: set(),
}
# renewable-huber 0.7.x wrote format 1 with or without feature names; format 3 has a source
# record only when the writer passed one (the command line does, estimator.save() does not).
_OPTIONAL_IN = {
    1: {"feature_names_in"}, 2: set(), 3: {_SOURCE_KEY}, 4: {_SOURCE_KEY}, 5: {_SOURCE_KEY},
    6: {_SOURCE_KEY},
}
# The first format whose config holds the `inference` parameter, and `standardize`.
_INFERENCE_IN_CONFIG = 5
_STANDARDIZE_IN_CONFIG = 6
# The source record: the data file (path, size) and a SHA-256 of its first prefix_bytes bytes,
# plus the number of its data rows the model holds. See validate_source.
SOURCE_KEYS = ("path", "size", "prefix_bytes", "prefix_sha256", "rows")
# Written by `fit --dask` only: how many leading partitions of the dataset the model holds,
# (with --batch-size, when a batch ended inside a partition) how many leading rows of the
# next partition it holds too, and a short fingerprint of each of the dataset's files.
# Optional, so every earlier record stays valid.
SOURCE_OPTIONAL_KEYS = ("partitions", "partition_rows", "files")
# At most this many file fingerprints are recorded (a larger dataset records none).
MAX_SOURCE_FILES = 65_536
_FILE_FINGERPRINT = re.compile(r"[0-9a-f]{16}")
FINGERPRINT_TAIL_BYTES = 1 << 16
_MAX_SOURCE_PATH = 4096
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def file_fingerprint(size: int, tail: bytes) -> str:
    """A file's entry in a source record's `files`: the first 16 hexadecimal digits of a
    SHA-256 over its size (8 bytes, little-endian) and its last 64 KiB (`tail`)."""
    return hashlib.sha256(int(size).to_bytes(8, "little") + tail).hexdigest()[:16]


def local_file_fingerprint(path) -> str:
    """file_fingerprint of a local file."""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - FINGERPRINT_TAIL_BYTES))
        return file_fingerprint(size, handle.read())


def payload_digest(coefficients: np.ndarray, information: np.ndarray, metadata: dict,
                   meat: np.ndarray | None = None) -> str:
    """SHA-256 over the arrays' dtype, shape and bytes and the metadata without the digest
    (canonical JSON), so any change to what a checkpoint says changes the digest. The meat
    array, when there is one, is hashed after the other two (format 3 has none)."""
    digest = hashlib.sha256(b"renewable-huber checkpoint\0")
    arrays = (coefficients, information) if meat is None else (coefficients, information, meat)
    for array in arrays:
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    body = {key: value for key, value in metadata.items() if key != _DIGEST_KEY}
    digest.update(json.dumps(body, allow_nan=False, sort_keys=True).encode())
    return digest.hexdigest()


class _Corrupt(Exception):
    """Internal: one reason a checkpoint is rejected; wrapped with the path by the loader."""


# ---------------------------------------------------------------------------------------
# Writing


def save_checkpoint(path, payload: dict[str, Any], *, source: dict | None = None) -> None:
    """Write `payload` (the estimator's state_dict) to `path` atomically.

    `source`, when given, is stored as the metadata's `source` record (checked first with
    validate_source, so an invalid record raises ValidationError and writes nothing); it is
    covered by the payload digest like the rest of the metadata. A `source` key inside
    `payload` is ignored: only the keyword writes one, so a state_dict never carries a stale
    record into a new file.

    The bytes go to a temporary file in the destination folder, are flushed and fsynced,
    and only then renamed over `path`: a crash at any point leaves either the previous file
    or the new one, never a truncated mix. Temporary files a killed process left for the same
    target are removed first (one writer per target is assumed). A symbolic link is followed:
    the file it points to is replaced and the link stays, as editors and most tools do.
    """
    path = os.path.realpath(os.fspath(path))
    arrays = {name: np.ascontiguousarray(payload[name]) for name in _ARRAY_NAMES}
    meat = payload.get(_MEAT)
    if meat is not None:
        arrays[_MEAT] = np.ascontiguousarray(meat, dtype=np.float64)
    metadata = {key: payload[key] for key in _METADATA_KEYS if key != "format_version"}
    metadata = {"format_version": FORMAT_VERSION, **metadata, _HAS_MEAT_KEY: meat is not None}
    if source is not None:
        metadata[_SOURCE_KEY] = validate_source(source)
    metadata[_DIGEST_KEY] = payload_digest(
        arrays["coefficients"], arrays["information"], metadata, arrays.get(_MEAT)
    )
    text = json.dumps(metadata, allow_nan=False, sort_keys=True)

    folder, name = os.path.split(path)
    prefix, suffix = f".{name}.", ".tmp"
    for orphan in glob.glob(os.path.join(glob.escape(folder), glob.escape(prefix) + "*" + suffix)):
        try:
            os.unlink(orphan)
        except OSError:
            pass
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=suffix)
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
    """Read and fully validate a checkpoint; returns the payload in the current form.

    Raises FileNotFoundError for a missing path and ValidationError starting with
    "invalid or corrupted checkpoint" for anything that is not a well-formed checkpoint.
    """
    path = os.fspath(path)
    with open(path, "rb") as handle:
        try:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise _Corrupt("not a regular file")
            return _read(handle)
        except _Corrupt as reason:
            raise ValidationError(
                f"invalid or corrupted checkpoint {path!r}: {reason}"
            ) from None


def _read(handle) -> dict[str, Any]:
    try:
        archive = zipfile.ZipFile(handle)
    # NotImplementedError: zipfile's answer to a directory entry naming an unknown zip version
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as error:
        raise _Corrupt(f"not an .npz archive ({error})") from None
    with archive:
        names = [info.filename for info in archive.infolist()]
        allowed = sorted(f"{member}.npy" for member in (*_MEMBERS, _MEAT))
        if not set(names) <= set(allowed) or len(set(names)) != len(names):
            raise _Corrupt(f"expected members {allowed[:2] + allowed[3:]} (and {_MEAT}.npy in "
                           f"formats 4 and 5 with {_HAS_MEAT_KEY}), found {sorted(names)}")
        metadata = _read_metadata(archive)
        payload = _validated_metadata(metadata)
        members = set(_MEMBERS) | ({_MEAT} if metadata.get(_HAS_MEAT_KEY) is True else set())
        expected = sorted(f"{member}.npy" for member in members)
        if sorted(names) != expected:
            raise _Corrupt(f"expected members {expected}, found {sorted(names)}")
        n_parameters = payload["n_features_in"] + int(payload["fit_intercept"])
        dtype = np.dtype(payload["config"]["dtype"])
        square = (n_parameters, n_parameters)
        coefficients = _read_array(archive, "coefficients", (n_parameters,), dtype)
        information = _read_array(archive, "information", square, dtype)
        meat = (_read_array(archive, _MEAT, square, np.dtype(np.float64))
                if _MEAT in members else None)
    _check_information(information)
    if meat is not None:
        _check_information(meat, _MEAT, "a meat matrix K (a sum of X' diag(w psi^2) X)")
    if payload["format_version"] >= 3:
        if metadata[_DIGEST_KEY] != payload_digest(coefficients, information, metadata, meat):
            raise _Corrupt(
                "the payload digest does not match: the file was changed after it was written"
            )
    payload["coefficients"] = coefficients
    payload["information"] = information
    payload[_MEAT] = meat
    return payload


def _member_header(archive: zipfile.ZipFile, name: str):
    """(shape, fortran_order, dtype) of a member's .npy header, read without its data."""
    try:
        with archive.open(f"{name}.npy") as member:
            version = np.lib.format.read_magic(member)
            if version == (1, 0):
                return np.lib.format.read_array_header_1_0(member)
            if version == (2, 0):
                return np.lib.format.read_array_header_2_0(member)
            raise _Corrupt(f"{name}: unsupported .npy version {version}")
    except _Corrupt:
        raise
    except Exception as error:
        raise _Corrupt(f"{name}: not a .npy member ({type(error).__name__}: {error})") from None


def _load_member(archive: zipfile.ZipFile, name: str) -> np.ndarray:
    """The member's array, its header checked by the caller. Read in bounded pieces: memory
    grows with the bytes the member really holds, never with what its header declares, and a
    member holding more or fewer bytes than declared is refused."""
    try:
        with archive.open(f"{name}.npy") as member:
            version = np.lib.format.read_magic(member)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran_order, dtype = read_header(member)
            expected = math.prod(shape) * dtype.itemsize
            data = bytearray()
            while len(data) < expected:
                piece = member.read(min(_READ_PIECE, expected - len(data)))
                if not piece:
                    break
                data += piece
            surplus = member.read(1)
    except Exception as error:
        raise _Corrupt(f"{name}: {type(error).__name__}: {error}") from None
    if len(data) != expected or surplus:
        raise _Corrupt(
            f"{name}: its header declares {expected} bytes of data, the member holds "
            f"{len(data)}{' or more' if surplus else ''}"
        )
    array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran_order else "C")
    # copy, not ascontiguousarray: that would turn the 0-d metadata into a 1-d array.
    return array.copy(order="C")


def _read_metadata(archive: zipfile.ZipFile) -> dict[str, Any]:
    shape, _, dtype = _member_header(archive, "metadata")
    if shape != () or dtype.kind != "U":
        raise _Corrupt("metadata must be a JSON string")
    if dtype.itemsize // 4 > MAX_METADATA_CHARACTERS:
        raise _Corrupt(f"metadata declares {dtype.itemsize // 4} characters, over the limit")
    text = _load_member(archive, "metadata")
    try:
        metadata = json.loads(str(text[()]), parse_constant=_refuse_constant)
    except ValueError as error:
        raise _Corrupt(f"metadata is not valid JSON: {error}") from None
    if not isinstance(metadata, dict):
        raise _Corrupt("metadata must be a JSON object")
    return metadata


def _read_array(archive: zipfile.ZipFile, name: str, shape: tuple[int, ...],
                dtype: np.dtype) -> np.ndarray:
    found_shape, fortran_order, found_dtype = _member_header(archive, name)
    if found_shape != shape:
        raise _Corrupt(f"{name} has shape {found_shape}, expected {shape}")
    if found_dtype != dtype:
        raise _Corrupt(f"{name} has dtype {found_dtype}, but the config says {dtype.name}")
    array = np.ascontiguousarray(_load_member(archive, name))
    if not np.isfinite(array).all():
        raise _Corrupt(f"{name} contains NaN or infinity")
    return array


def _check_information(information: np.ndarray, name: str = "information",
                       what: str = "an information matrix") -> None:
    # J is a sum of X' diag(w c) X with w, c >= 0 (K one of X' diag(w psi^2) X): its diagonal
    # is never negative.
    diagonal = np.diagonal(information)
    if (diagonal < 0).any():
        j = int(np.argmax(diagonal < 0))
        raise _Corrupt(
            f"{name}[{j}, {j}] is {diagonal[j]!r}: {what} has no negative diagonal entry"
        )


def _refuse_constant(name: str):
    raise ValueError(f"non-finite number {name}")


def _integer(metadata: dict, key: str, minimum: int) -> int:
    value = metadata[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _Corrupt(f"{key} must be an integer >= {minimum}, got {value!r}")
    if value > INT64_MAX:
        raise _Corrupt(f"{key} is {value}, beyond the engines' 64-bit counters (2**63 - 1)")
    return value


def _nonnegative_real(metadata: dict, key: str) -> float:
    value = metadata[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Corrupt(f"{key} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise _Corrupt(f"{key} must be finite and >= 0, got {value!r}")
    return float(value)


def _check_keys(metadata: dict, version: int) -> None:
    expected = set(_METADATA_KEYS) | {_DIGEST_KEY, _HAS_MEAT_KEY}
    optional = _OPTIONAL_IN[version]
    required = expected - _ABSENT_IN[version] - optional
    missing = sorted(required - set(metadata))
    unknown = sorted(set(metadata) - (required | optional))
    if missing:
        raise _Corrupt(f"metadata lacks {missing}")
    if unknown:
        raise _Corrupt(f"metadata has unexpected keys {unknown}")


def _config(metadata: dict, version: int) -> dict[str, Any]:
    config = metadata["config"]
    if not isinstance(config, dict):
        raise _Corrupt("config must be a JSON object")
    has_meat = metadata.get(_HAS_MEAT_KEY) is True
    # Before format 5 the config had no `inference`: a stream carried K whenever it could.
    # Before format 6 it had no `standardize`: no stream was standardised.
    later = {name for name, first in (("inference", _INFERENCE_IN_CONFIG),
                                      ("standardize", _STANDARDIZE_IN_CONFIG))
             if version < first}
    expected = tuple(name for name in PARAM_NAMES if name not in later)
    if version == 1:
        # Format 1 may predate some parameters; they take their defaults.
        if later & set(config):
            raise _Corrupt(f"config has {sorted(later & set(config))}, which format 1 does "
                           "not have")
        config = {**{k: v for k, v in DEFAULT_PARAMS.items() if k not in config}, **config}
    elif set(config) != set(expected):
        raise _Corrupt(
            f"config must hold exactly the parameters {list(expected)}, got {sorted(config)}"
        )
    if version < _INFERENCE_IN_CONFIG:
        config = {**config, "inference": has_meat}
    if version < _STANDARDIZE_IN_CONFIG:
        config = {**config, "standardize": False}
    try:
        config = validate_params(config).as_config_dict()
    except RenewableHuberError as error:
        raise _Corrupt(f"config: {error}") from None
    if has_meat and not config["inference"]:
        raise _Corrupt(
            f"{_HAS_MEAT_KEY} is true but the config says inference=False (a stream fitted "
            "without inference has no meat matrix K)"
        )
    return config


def _validated_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """Everything but the arrays, checked; the arrays' shapes and dtype follow from it."""
    version = metadata.get("format_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise _Corrupt(f"format_version must be one of {READABLE_VERSIONS}, got {version!r}")
    _check_keys(metadata, version)
    if version >= 3 and not isinstance(metadata[_DIGEST_KEY], str):
        raise _Corrupt(f"{_DIGEST_KEY} must be a hexadecimal string")
    if version >= 4 and not isinstance(metadata[_HAS_MEAT_KEY], bool):
        raise _Corrupt(f"{_HAS_MEAT_KEY} must be true or false, got {metadata[_HAS_MEAT_KEY]!r}")
    config = _config(metadata, version)

    n_features_in = _integer(metadata, "n_features_in", 1)
    fit_intercept = metadata["fit_intercept"]
    if not isinstance(fit_intercept, bool) or fit_intercept != config["fit_intercept"]:
        raise _Corrupt(
            f"fit_intercept is {fit_intercept!r} but the config says {config['fit_intercept']!r}"
        )
    n_samples_seen = _integer(metadata, "n_samples_seen", 0)
    batch_count = _integer(metadata, "batch_count", 0)
    previous_lambda = _nonnegative_real(metadata, "previous_lambda")
    # Format 1 predates sample weights: unit weights are the only faithful reading.
    weight_sum = (
        float(n_samples_seen) if version == 1 else _nonnegative_real(metadata, "weight_sum")
    )
    _check_counters(n_samples_seen, batch_count, previous_lambda, weight_sum)
    feature_names = _feature_names(metadata.get("feature_names_in"), n_features_in)
    scaling = metadata.get("feature_scaling")
    if (scaling is None) == config["standardize"]:
        raise _Corrupt(
            f"the config says standardize={config['standardize']} but feature_scaling is "
            f"{'null' if scaling is None else 'present'}: a standardised stream, and only "
            "one, records its feature scaling"
        )
    if scaling is not None:
        try:
            scaling = FeatureScaling.from_record(scaling, n_features_in, fit_intercept)
        except ValidationError as error:
            raise _Corrupt(str(error)) from None

    payload = {
        "format_version": version,
        "config": config,
        "n_samples_seen": n_samples_seen,
        "batch_count": batch_count,
        "previous_lambda": previous_lambda,
        "n_features_in": n_features_in,
        "fit_intercept": fit_intercept,
        "weight_sum": weight_sum,
        "feature_names_in": feature_names,
        "feature_scaling": None if scaling is None else scaling.as_record(),
    }
    # Only present when the file has one, so a payload read back from estimator.save() has
    # exactly the keys of state_dict().
    if _SOURCE_KEY in metadata:
        payload[_SOURCE_KEY] = _source(metadata[_SOURCE_KEY])
    return payload


def validate_source(record) -> dict[str, Any]:
    """The checked copy of a source record, or ValidationError saying what is wrong.

    A source record is a JSON object with exactly these keys:
      path           the data file as the writer named it (1 to 4096 characters), for people:
                     whether a later file is the same source is decided by its bytes
      size           the file's size in bytes when the record was written (>= 0)
      prefix_bytes   how many leading bytes of the file the digest covers (1 <= n <= size)
      prefix_sha256  SHA-256 of those bytes, 64 lowercase hexadecimal digits
      rows           how many leading data rows of the file the model holds or was told to
                     skip (>= 0)
    and optionally
      partitions     (fit --dask) the source is a partitioned dataset: path names it, size is
                     its bytes, prefix_bytes == size, prefix_sha256 fingerprints its files,
                     and the model holds its first `partitions` partitions (`rows` rows)
      partition_rows (fit --dask, only with partitions, >= 1) the model also holds the first
                     partition_rows rows of partition `partitions` (counted in `rows`): a
                     batch of --batch-size rows ended inside it
      files          (fit --dask, only with partitions) the dataset's files, each as the first
                     16 hexadecimal digits of a SHA-256 over its size and last 64 KiB, in the
                     dataset's order (at most MAX_SOURCE_FILES)
    """
    try:
        return _source(record)
    except _Corrupt as reason:
        raise ValidationError(f"invalid source record: {reason}") from None


def _source(record) -> dict[str, Any]:
    if (not isinstance(record, dict) or not set(SOURCE_KEYS) <= set(record)
            or not set(record) <= set(SOURCE_KEYS + SOURCE_OPTIONAL_KEYS)):
        keys = sorted(record) if isinstance(record, dict) else type(record).__name__
        raise _Corrupt(f"source must be an object with exactly the keys {list(SOURCE_KEYS)}, "
                       f"and optionally {list(SOURCE_OPTIONAL_KEYS)}, got {keys}")
    path = record["path"]
    if not isinstance(path, str) or not 0 < len(path) <= _MAX_SOURCE_PATH or "\0" in path:
        raise _Corrupt(f"source.path must be a non-empty string of at most {_MAX_SOURCE_PATH} "
                       f"characters without NUL, got {path!r:.80}")
    size = _source_integer(record, "size", 0)
    prefix_bytes = _source_integer(record, "prefix_bytes", 1)
    if prefix_bytes > size:
        raise _Corrupt(f"source.prefix_bytes {prefix_bytes} exceeds source.size {size}")
    digest = record["prefix_sha256"]
    if not isinstance(digest, str) or not _SHA256_HEX.fullmatch(digest):
        raise _Corrupt(f"source.prefix_sha256 must be 64 lowercase hexadecimal digits, got "
                       f"{digest!r:.80}")
    rows = _source_integer(record, "rows", 0)
    checked = {"path": path, "size": size, "prefix_bytes": prefix_bytes,
               "prefix_sha256": digest, "rows": rows}
    if "partitions" in record:
        checked["partitions"] = _source_integer(record, "partitions", 0)
    if "partition_rows" in record:
        if "partitions" not in record:
            raise _Corrupt("source.partition_rows needs source.partitions")
        checked["partition_rows"] = _source_integer(record, "partition_rows", 1)
        if checked["partition_rows"] > rows:
            raise _Corrupt(f"source.partition_rows {checked['partition_rows']} exceeds "
                           f"source.rows {rows}")
    if "files" in record:
        files = record["files"]
        if "partitions" not in record:
            raise _Corrupt("source.files needs source.partitions")
        if (not isinstance(files, list) or not 0 < len(files) <= MAX_SOURCE_FILES
                or not all(isinstance(f, str) and _FILE_FINGERPRINT.fullmatch(f)
                           for f in files)):
            raise _Corrupt(f"source.files must be a list of 1 to {MAX_SOURCE_FILES} strings of "
                           f"16 lowercase hexadecimal digits, got {str(files)!r:.80}")
        checked["files"] = list(files)
    return checked


def _source_integer(record: dict, key: str, minimum: int) -> int:
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= INT64_MAX:
        raise _Corrupt(f"source.{key} must be an integer from {minimum} to 2**63 - 1, got "
                       f"{value!r:.80}")
    return value


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
