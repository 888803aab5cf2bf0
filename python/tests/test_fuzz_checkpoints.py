"""Checkpoint fuzzing: files written by RenewableHuberRegressor.save, damaged or crafted.

Properties, for every damaged or crafted file:
  * loading raises ValidationError and nothing else (FileNotFoundError only for a missing path);
  * tracemalloc's peak while loading stays a small multiple of the file's verified size (the
    uncompressed member sizes the zip directory declares, or the file size): a small file must
    not make the loader allocate a huge array;
  * damage (truncation, byte flips, member bytes, metadata or arrays edited without recomputing
    the digest) never yields a wrong model: a load that succeeds returns the original state bit
    for bit, because format-3 checkpoints carry a SHA-256 digest of everything they say;
  * a crafted file whose digest was recomputed (so only the validators stand between it and the
    engines) loads only when it is a state every backend restores: RenewableHuberRegressor.load
    then succeeds on numpy and native_cpu and holds exactly what the file says.

RH_FUZZ_LONG=1 multiplies the number of examples (the default run takes a few seconds).
"""

from __future__ import annotations

import io
import json
import os
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from renewable_huber import RenewableHuberRegressor, ValidationError
from renewable_huber import checkpoint as checkpoint_module

LONG = bool(os.environ.get("RH_FUZZ_LONG"))
EXAMPLES = 2000 if LONG else 60
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# The loader's own working memory (zipfile buffers, JSON, the validators) is well below this;
# what the bound exists to catch is an allocation sized by a declared shape (gigabytes).
OVERHEAD_BYTES = 2 << 20
MEMORY_FACTOR = 4


class _Table:
    """Just enough of a data frame (to_numpy, columns) for the estimator to record names."""

    def __init__(self, values, columns):
        self._values = values
        self.columns = list(columns)
        self.shape = values.shape

    def to_numpy(self, dtype=None, copy=False):
        return self._values if dtype is None else self._values.astype(dtype, copy=copy)


def _batches(p, seed, n_batches=3, n=40):
    rng = np.random.default_rng(seed)
    beta = np.linspace(-1.0, 2.0, p)
    for _ in range(n_batches):
        X = rng.normal(size=(n, p))
        yield X, X @ beta + 0.5 + rng.standard_t(3, size=n)


# Four originals that differ in everything a checkpoint records: dtype, penalty, intercept,
# feature names, sample weights.
_ORIGINALS = [
    dict(params=dict(backend="numpy"), p=3, names=False, weights=False),
    dict(params=dict(backend="numpy", dtype="float32", penalty="l1", tau=0.9), p=2, names=True,
         weights=False),
    dict(params=dict(backend="numpy", fit_intercept=False, ridge=1e-3), p=4, names=False,
         weights=True),
    dict(params=dict(backend="numpy", penalty="l1", lambda_scale=0.3), p=1, names=True,
         weights=True),
    dict(params=dict(backend="numpy", standardize=True, inference=True), p=3, names=False,
         weights=True),
]


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    """(file bytes, state_dict) of each original, written by save()."""
    folder = tmp_path_factory.mktemp("originals")
    out = []
    for index, spec in enumerate(_ORIGINALS):
        model = RenewableHuberRegressor(**spec["params"])
        for X, y in _batches(spec["p"], seed=index):
            weights = np.linspace(0.5, 2.0, len(y)) if spec["weights"] else None
            data = _Table(X, [f"f{j}" for j in range(X.shape[1])]) if spec["names"] else X
            model.partial_fit(data, y, sample_weight=weights)
        path = folder / f"original{index}.npz"
        model.save(path)
        out.append((path.read_bytes(), model.state_dict()))
    return out


# ----------------------------------------------------------------------------- helpers


def _members(blob: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def _zip(members, compression=zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # duplicate names are made on purpose
        with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
            for name, data in members:
                archive.writestr(name, data)
    return buffer.getvalue()


def _npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _npy_header_only(shape, descr="<f8", fortran=False) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": descr, "fortran_order": fortran, "shape": tuple(shape)}
    )
    return buffer.getvalue()


def _metadata_of(members) -> dict:
    return json.loads(str(np.load(io.BytesIO(members["metadata.npy"]))[()]))


def _verified_size(blob: bytes) -> int:
    """What the loader may legitimately hold: the uncompressed sizes the zip directory
    declares (they bound every member's read), or the file itself."""
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as archive:
            declared = sum(info.file_size for info in archive.infolist())
    except Exception:  # not a zip at all: the loader must refuse it from its first bytes
        declared = 0
    return max(declared, len(blob))


def _load(path, blob: bytes):
    """load_checkpoint under tracemalloc: (payload or the ValidationError, peak bytes).
    Any other exception propagates and fails the test."""
    path.write_bytes(blob)
    tracemalloc.start()
    try:
        try:
            result = checkpoint_module.load_checkpoint(path)
        except ValidationError as error:
            result = error
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak


def _assert_bounded(blob: bytes, peak: int) -> None:
    limit = MEMORY_FACTOR * _verified_size(blob) + OVERHEAD_BYTES
    assert peak <= limit, f"loading a {len(blob)}-byte file peaked at {peak} bytes (> {limit})"


def _assert_equal_payload(payload: dict, original: dict) -> None:
    """Bit for bit: arrays (dtype, shape, bytes), counters, config, names."""
    for name in ("coefficients", "information"):
        got, want = np.asarray(payload[name]), np.asarray(original[name])
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert got.tobytes() == want.tobytes(), name
    for key in ("n_samples_seen", "batch_count", "n_features_in", "fit_intercept",
                "feature_names_in", "feature_scaling", "config"):
        assert payload[key] == original[key], key
    for key in ("previous_lambda", "weight_sum"):
        assert np.float64(payload[key]).tobytes() == np.float64(original[key]).tobytes(), key


def _check_damaged(tmp_path, blob: bytes, original: dict) -> None:
    """Damage without a recomputed digest: refused, or the original exactly."""
    result, peak = _load(tmp_path / "fuzzed.npz", blob)
    _assert_bounded(blob, peak)
    event(f"loaded: {not isinstance(result, ValidationError)}")
    if not isinstance(result, ValidationError):
        _assert_equal_payload(result, original)


# -------------------------------------------------------------------- damaged bytes


@FUZZ
@given(data=st.data())
def test_truncated_files_are_refused(originals, tmp_path_factory, data):
    blob, original = data.draw(st.sampled_from(originals))
    cut = data.draw(st.integers(0, len(blob) - 1))
    tmp = tmp_path_factory.mktemp("t")
    result, peak = _load(tmp / "fuzzed.npz", blob[:cut])
    _assert_bounded(blob[:cut], peak)
    # Every byte of a stored .npz matters up to the end of the central directory.
    assert isinstance(result, ValidationError)
    assert "invalid or corrupted checkpoint" in str(result)


@FUZZ
@given(data=st.data())
def test_byte_flips_never_give_a_wrong_model(originals, tmp_path_factory, data):
    blob, original = data.draw(st.sampled_from(originals))
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(blob) - 1), st.integers(1, 255)),
                               min_size=1, max_size=8))
    damaged = bytearray(blob)
    for offset, mask in flips:
        damaged[offset] ^= mask
    # Flips in bytes the reader never interprets (a zip timestamp, the CRC of a stored member
    # when zipfile reads it, padding of the .npy header) may leave the file loadable: then it
    # must be the original model, bit for bit.
    _check_damaged(tmp_path_factory.mktemp("f"), bytes(damaged), original)


@FUZZ
@given(data=st.data())
def test_spliced_bytes_never_give_a_wrong_model(originals, tmp_path_factory, data):
    blob, original = data.draw(st.sampled_from(originals))
    start = data.draw(st.integers(0, len(blob)))
    removed = data.draw(st.integers(0, 64))
    inserted = data.draw(st.binary(max_size=64))
    spliced = blob[:start] + inserted + blob[start + removed:]
    assume(spliced != blob)
    _check_damaged(tmp_path_factory.mktemp("s"), spliced, original)


# -------------------------------------------------------------------- damaged members


_MEMBER_NAMES = ("metadata.npy", "coefficients.npy", "information.npy")


@FUZZ
@given(data=st.data())
def test_damaged_members_never_give_a_wrong_model(originals, tmp_path_factory, data):
    blob, original = data.draw(st.sampled_from(originals))
    members = _members(blob)
    names = list(members)
    operation = data.draw(st.sampled_from(
        ["replace", "truncate", "flip", "drop", "duplicate", "rename", "extra", "deflate",
         "reorder"]))
    target = data.draw(st.sampled_from(_MEMBER_NAMES))
    entries = [(name, members[name]) for name in names]
    if operation == "replace":
        entries = [(n, data.draw(st.binary(max_size=512)) if n == target else d)
                   for n, d in entries]
    elif operation == "truncate":
        entries = [(n, d[: data.draw(st.integers(0, max(len(d) - 1, 0)))] if n == target else d)
                   for n, d in entries]
    elif operation == "flip":
        def flip(d):
            at = data.draw(st.integers(0, len(d) - 1))
            return d[:at] + bytes([d[at] ^ data.draw(st.integers(1, 255))]) + d[at + 1:]
        entries = [(n, flip(d) if n == target else d) for n, d in entries]
    elif operation == "drop":
        entries = [(n, d) for n, d in entries if n != target]
    elif operation == "duplicate":
        entries = entries + [(target, members[target])]
    elif operation == "rename":
        new_name = data.draw(st.sampled_from(
            ["metadata", "coefficients.npz", "../information.npy", "x.npy", target.upper()]))
        entries = [(new_name if n == target else n, d) for n, d in entries]
    elif operation == "extra":
        entries = entries + [(data.draw(st.sampled_from(["extra.npy", "a/b.npy", "pickle.npy"])),
                              _npy(np.zeros(2)))]
    elif operation == "reorder":
        entries = list(reversed(entries))
    # "deflate" keeps every byte and only compresses: a legitimate variant of the same file
    compression = zipfile.ZIP_DEFLATED if operation == "deflate" else zipfile.ZIP_STORED
    rebuilt = _zip(entries, compression)
    result, peak = _load(tmp_path_factory.mktemp("m") / "fuzzed.npz", rebuilt)
    _assert_bounded(rebuilt, peak)
    if operation in ("deflate", "reorder"):
        assert not isinstance(result, ValidationError), result
    if not isinstance(result, ValidationError):
        _assert_equal_payload(result, original)


# ------------------------------------------------------------------- crafted contents

_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
    | st.sampled_from([0, 1, -1, 2**63 - 1, 2**63, 2**64, 1e308, -0.0, 5e-324, "float64",
                       "float32", "inf", "NaN"]),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6,
)

_COUNTER_KEYS = ("n_samples_seen", "batch_count", "previous_lambda", "weight_sum",
                 "n_features_in", "fit_intercept", "feature_names_in", "format_version")
_CONFIG_KEYS = ("tau", "penalty", "lambda_scale", "bandwidth_scale", "fit_intercept",
                "max_iter", "tol", "ridge", "backend", "device", "dtype", "n_jobs",
                "cuda_graphs", "cuda_fast_math", "inference", "standardize")
# Numbers a feature scaling record could hold: plausible, degenerate and extreme.
_SCALING_NUMBERS = st.sampled_from([1.0, 0.0, -1.0, 5e-324, 2.3e-308, 1e-39, 1e-300, 1e300,
                                    1.7e308, 3.4e38, 7.25]) | st.floats(allow_nan=False,
                                                                         allow_infinity=False)


@st.composite
def _crafted(draw, originals):
    """(original, crafted members, whether the digest was recomputed)."""
    blob, original = draw(st.sampled_from(originals))
    members = _members(blob)
    metadata = _metadata_of(members)
    coefficients = np.load(io.BytesIO(members["coefficients.npy"]))
    information = np.load(io.BytesIO(members["information.npy"]))
    meat = np.load(io.BytesIO(members["meat.npy"])) if "meat.npy" in members else None
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["counter", "plausible", "plausible", "config", "drop_key",
                                     "extra_key", "array", "array_value", "npy_header",
                                     "format", "scaling", "scaling"]))
        if kind == "counter":
            metadata[draw(st.sampled_from(_COUNTER_KEYS))] = draw(_JSON_VALUES)
        elif kind == "plausible":
            # values of the right type and range, so the consistency rules themselves are
            # what decides (and a state they accept must be one the engines restore)
            key = draw(st.sampled_from(("n_samples_seen", "batch_count", "previous_lambda",
                                        "weight_sum")))
            if key in ("n_samples_seen", "batch_count"):
                metadata[key] = draw(st.integers(0, 2**63 - 1) | st.integers(0, 100))
            else:
                metadata[key] = draw(st.floats(0.0, 1.7e308) | st.sampled_from([0.0, 5e-324]))
        elif kind == "config":
            if isinstance(metadata.get("config"), dict):
                metadata["config"][draw(st.sampled_from(_CONFIG_KEYS))] = draw(_JSON_VALUES)
        elif kind == "drop_key":
            key = draw(st.sampled_from(sorted(metadata)))
            metadata.pop(key)
        elif kind == "extra_key":
            metadata[draw(st.text(max_size=6))] = draw(_JSON_VALUES)
        elif kind == "array":
            shape = draw(st.sampled_from([(0,), (1,), (5,), (2, 2), (3, 3, 1), ()]))
            dtype = draw(st.sampled_from(["<f8", "<f4", ">f8", "<i8", "<c16", "|b1"]))
            array = np.zeros(shape, dtype=dtype)
            if draw(st.booleans()):
                coefficients = array
            else:
                information = array
        elif kind == "array_value":
            value = draw(st.sampled_from([np.nan, np.inf, -np.inf, -1.0, 1e308, -1e308, 0.0]))
            target = information if draw(st.booleans()) else coefficients
            if not isinstance(target, np.ndarray) or target.dtype.kind != "f":
                continue  # replaced above by a bare header or a non-float array
            target = np.array(target, copy=True)
            flat = target.reshape(-1)
            if flat.size:
                with np.errstate(over="ignore"):
                    flat[draw(st.integers(0, flat.size - 1))] = value
            if target.ndim == 2:
                information = target
            else:
                coefficients = target
        elif kind == "npy_header":
            # a header that promises far more data than the member has
            n = draw(st.sampled_from([10**3, 10**5, 2**31, 10**12]))
            shape = draw(st.sampled_from([(n,), (n, n), (n, 1)]))
            members["information.npy" if len(shape) == 2 else "coefficients.npy"] = (
                _npy_header_only(shape))
            coefficients = information = None  # members written as they are below
        elif kind == "format":
            metadata["format_version"] = draw(
                st.sampled_from([1, 2, 3, 4, 5, 6, 7, 0, "3", 3.0, True]))
        elif kind == "scaling":
            record = metadata.get("feature_scaling")
            if isinstance(record, dict) and record and draw(st.booleans()):
                key = draw(st.sampled_from(sorted(record)))
                values = record[key]
                if isinstance(values, list) and values and draw(st.booleans()):
                    values[draw(st.integers(0, len(values) - 1))] = draw(_SCALING_NUMBERS)
                else:
                    record[key] = draw(_JSON_VALUES)
            else:
                n = draw(st.integers(0, 5))
                metadata["feature_scaling"] = draw(
                    st.none() | _JSON_VALUES
                    | st.fixed_dictionaries({"center": st.lists(_SCALING_NUMBERS, min_size=n,
                                                                max_size=n),
                                             "scale": st.lists(_SCALING_NUMBERS, min_size=n,
                                                               max_size=n)}))
    recompute = draw(st.booleans())
    if recompute and isinstance(coefficients, np.ndarray) and isinstance(information,
                                                                          np.ndarray):
        try:
            metadata["payload_sha256"] = checkpoint_module.payload_digest(
                coefficients, information, metadata, meat)
        except (TypeError, ValueError):
            recompute = False  # a value JSON cannot encode (the file is refused anyway)
    else:
        recompute = False
    try:
        text = json.dumps(metadata)
    except (TypeError, ValueError):
        text = "{}"
    out = {"metadata.npy": _npy(np.array(text))}
    out["coefficients.npy"] = (_npy(coefficients) if isinstance(coefficients, np.ndarray)
                               else members["coefficients.npy"])
    out["information.npy"] = (_npy(information) if isinstance(information, np.ndarray)
                              else members["information.npy"])
    if meat is not None:
        out["meat.npy"] = members["meat.npy"]
    return original, _zip(out.items()), recompute


@FUZZ
@given(data=st.data())
def test_crafted_checkpoints_load_only_as_restorable_states(
        originals, tmp_path_factory, cpu_library, data):
    original, blob, recomputed = data.draw(_crafted(originals))
    folder = tmp_path_factory.mktemp("c")
    result, peak = _load(folder / "fuzzed.npz", blob)
    _assert_bounded(blob, peak)
    event(f"digest recomputed: {recomputed}; loaded: {not isinstance(result, ValidationError)}")
    if isinstance(result, ValidationError):
        return
    if not recomputed and result["format_version"] >= 3:
        # edited without a new digest: only an edit that changed nothing can load
        _assert_equal_payload(result, original)
    # Whatever loads is a state every backend restores, holding what the file says.
    for backend in ("numpy", "native_cpu"):
        model = RenewableHuberRegressor.load(folder / "fuzzed.npz", backend=backend)
        state = model.state_
        assert state.coefficients.tobytes() == np.asarray(
            result["coefficients"], dtype=state.coefficients.dtype).tobytes()
        assert state.n_samples_seen == result["n_samples_seen"]
        assert state.batch_count == result["batch_count"]
        assert state.weight_sum == result["weight_sum"]
        # A standardised stream's scaling is the file's, and its raw-unit numbers are finite.
        assert model.state_dict()["feature_scaling"] == result["feature_scaling"]
        assert np.isfinite(model.coef_).all() and np.isfinite(model.intercept_)


@st.composite
def _counters(draw):
    small = st.integers(0, 5)
    big = st.integers(0, 2**63 - 1) | st.sampled_from([2**63 - 1, 2**62])
    real = st.sampled_from([0.0, 5e-324, 1.0, 1e308, 1.7976931348623157e308]) | st.floats(0, 1e9)
    return {
        "n_samples_seen": draw(small | big),
        "batch_count": draw(small | big),
        "previous_lambda": draw(real),
        "weight_sum": draw(real),
    }


def _counters_consistent(c) -> bool:
    """The stream invariants, stated independently: nothing seen exactly when no batch was seen,
    every batch has a row and a positive weight, no penalty history before the first batch."""
    seen, batches = c["n_samples_seen"], c["batch_count"]
    return ((batches == 0) == (seen == 0) and batches <= seen
            and (c["weight_sum"] > 0) == (batches > 0)
            and (batches > 0 or c["previous_lambda"] == 0))


@FUZZ
@given(data=st.data())
def test_counters_with_a_recomputed_digest_load_exactly_when_consistent(
        originals, tmp_path_factory, cpu_library, data):
    blob, _ = data.draw(st.sampled_from(originals))
    counters = data.draw(_counters())
    members = _members(blob)
    metadata = {**_metadata_of(members), **counters}
    coefficients = np.load(io.BytesIO(members["coefficients.npy"]))
    information = np.load(io.BytesIO(members["information.npy"]))
    meat = np.load(io.BytesIO(members["meat.npy"])) if "meat.npy" in members else None
    metadata["payload_sha256"] = checkpoint_module.payload_digest(
        coefficients, information, metadata, meat)
    forged = _zip([("metadata.npy", _npy(np.array(json.dumps(metadata)))),
                   *[(name, members[name]) for name in members if name != "metadata.npy"]])
    folder = tmp_path_factory.mktemp("k")
    result, peak = _load(folder / "forged.npz", forged)
    _assert_bounded(forged, peak)
    consistent = _counters_consistent(counters)
    event(f"consistent: {consistent}")
    assert isinstance(result, ValidationError) != consistent, (counters, result)
    if consistent:
        # and the engines take the state as the checkpoint module promises
        for backend in ("numpy", "native_cpu"):
            state = RenewableHuberRegressor.load(folder / "forged.npz", backend=backend).state_
            assert (state.n_samples_seen, state.batch_count) == (
                counters["n_samples_seen"], counters["batch_count"])
            assert state.weight_sum == counters["weight_sum"]


# ------------------------------------------------------------------- targeted cases


def test_missing_path_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        checkpoint_module.load_checkpoint(tmp_path / "absent.npz")
    with pytest.raises(FileNotFoundError):
        RenewableHuberRegressor.load(tmp_path / "absent.npz")


def test_a_folder_or_a_fifo_is_refused(tmp_path):
    with pytest.raises((ValidationError, IsADirectoryError, PermissionError)):
        checkpoint_module.load_checkpoint(tmp_path)
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "pipe.npz"
        os.mkfifo(fifo)
        # opened non-blocking would be the loader's business; a FIFO with a writer is refused
        # as not a regular file. Here a writer end keeps open() from blocking.
        descriptor = os.open(fifo, os.O_RDWR)
        try:
            with pytest.raises(ValidationError, match="not a regular file"):
                checkpoint_module.load_checkpoint(fifo)
        finally:
            os.close(descriptor)


def test_unmodified_originals_load_bit_for_bit(originals, tmp_path):
    # the fuzz properties above would hold vacuously if the originals themselves did not load
    for blob, original in originals:
        result, peak = _load(tmp_path / "original.npz", blob)
        assert not isinstance(result, ValidationError), result
        _assert_equal_payload(result, original)
        _assert_bounded(blob, peak)


def test_a_header_promising_a_huge_array_is_refused_without_allocating_it(originals, tmp_path):
    # Found by this file: the loader trusted a .npy header for the size of what follows, so a
    # small member whose header matched a large declared n_features_in made numpy allocate the
    # whole array before the short read failed (200 MB here; 3.2 GB from a 160 KB file with
    # p = 20,000). The loader now reads members in bounded pieces.
    blob, _ = originals[0]
    members = _members(blob)
    metadata = _metadata_of(members)
    p = 5_000  # information 5,000^2 doubles: 200 MB promised by a 40 KB file
    metadata["n_features_in"] = p - 1 + (0 if metadata["fit_intercept"] else 1)
    forged = _zip([
        ("metadata.npy", _npy(np.array(json.dumps(metadata)))),
        ("coefficients.npy", _npy(np.zeros(p))),
        ("information.npy", _npy_header_only((p, p))),
    ])
    result, peak = _load(tmp_path / "forged.npz", forged)
    assert isinstance(result, ValidationError)
    _assert_bounded(forged, peak)
