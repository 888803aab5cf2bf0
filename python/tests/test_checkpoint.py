"""Pickle-free checkpoints: exact round trip, resume equals the uninterrupted stream,
format 1 compatibility, strict rejection of damaged or foreign files, atomic writes."""

import io
import json
import os
import tracemalloc
import zipfile

import numpy as np
import pytest

from renewable_huber import BackendUnavailableError, RenewableHuberRegressor, ValidationError
from renewable_huber import checkpoint as checkpoint_module

CORRUPT = "invalid or corrupted checkpoint"


def make_batches(n_batches=4, n=50, p=3, seed=11):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_batches):
        X = rng.normal(size=(n, p))
        out.append((X, X @ np.array([2.0, -1.0, 0.5]) + 1.0 + rng.standard_t(2, size=n)))
    return out


def stream(estimator, batches):
    for X, y in batches:
        estimator.partial_fit(X, y)
    return estimator


def assert_same_state(a, b):
    np.testing.assert_array_equal(a.state_.coefficients, b.state_.coefficients)
    np.testing.assert_array_equal(a.state_.information, b.state_.information)
    assert a.state_.coefficients.dtype == b.state_.coefficients.dtype
    for counter in ("n_samples_seen", "batch_count", "previous_lambda", "weight_sum"):
        assert getattr(a.state_, counter) == getattr(b.state_, counter), counter


@pytest.fixture
def saved(tmp_path):
    estimator = stream(RenewableHuberRegressor(backend="numpy", penalty="l1", tau=1.1),
                       make_batches()[:2])
    path = tmp_path / "model.npz"
    estimator.save(path)
    return estimator, path


def read_members(path):
    with np.load(path, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    metadata = json.loads(str(arrays.pop("metadata")[()]))
    return arrays, metadata


def write_members(path, metadata, **arrays):
    np.savez(path, metadata=np.array(json.dumps(metadata)), **arrays)


# -- format and round trip --------------------------------------------------------------


def downgrade_to_format_3(arrays, metadata):
    """The same checkpoint as format 3 wrote it: no meat member, no has_meat key."""
    arrays.pop("meat", None)
    metadata.pop("has_meat")
    metadata["config"].pop("inference")
    metadata["config"].pop("standardize")
    metadata.pop("feature_scaling")
    metadata["format_version"] = 3


def test_file_layout_is_format_6(saved):
    estimator, path = saved
    arrays, metadata = read_members(path)
    # an L1 stream has no meat matrix K: the member is absent and has_meat says so
    assert set(arrays) == {"coefficients", "information"}
    assert metadata["format_version"] == 6
    assert metadata.pop("has_meat") is False
    assert len(metadata.pop("payload_sha256")) == 64
    assert metadata["config"] == {
        "tau": 1.1, "penalty": "l1", "lambda_scale": 1.0, "bandwidth_scale": 1.0,
        "fit_intercept": True, "max_iter": 100, "tol": 1e-6, "ridge": 1e-8,
        "backend": "numpy", "device": "auto", "dtype": "float64", "n_jobs": None,
        "cuda_graphs": False, "cuda_fast_math": False, "inference": False,
        "standardize": False,
    }
    assert metadata["n_samples_seen"] == 100
    assert metadata["batch_count"] == 2
    assert metadata["weight_sum"] == 100.0
    assert metadata["n_features_in"] == 3
    assert metadata["fit_intercept"] is True
    assert metadata["feature_names_in"] is None
    assert metadata["feature_scaling"] is None
    assert metadata["previous_lambda"] == estimator.diagnostics_["lambda_value"] > 0
    np.testing.assert_array_equal(arrays["coefficients"], estimator.state_.coefficients)
    np.testing.assert_array_equal(arrays["information"], estimator.state_.information)
    assert arrays["information"].flags.c_contiguous


def test_state_dict_is_what_is_saved(saved):
    estimator, path = saved
    payload = estimator.state_dict()
    loaded = checkpoint_module.load_checkpoint(path)
    assert loaded.keys() == payload.keys()
    for key, value in payload.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(loaded[key], value)
        else:
            assert loaded[key] == value, key


def test_round_trip_restores_state_and_attributes(saved):
    estimator, path = saved
    loaded = RenewableHuberRegressor.load(path)
    assert_same_state(loaded, estimator)
    assert loaded.get_params() == estimator.get_params()
    np.testing.assert_array_equal(loaded.coef_, estimator.coef_)
    assert loaded.intercept_ == estimator.intercept_
    assert loaded.n_features_in_ == 3
    assert loaded.n_samples_seen_ == 100
    assert loaded.backend_ == "numpy"
    assert loaded.n_iter_ == 0 and loaded.diagnostics_ is None
    X = make_batches()[3][0]
    np.testing.assert_array_equal(loaded.predict(X), estimator.predict(X))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("penalty", ["none", "l1"])
def test_checkpoint_then_resume_equals_the_uninterrupted_stream(tmp_path, dtype, penalty):
    batches = make_batches()
    params = dict(backend="numpy", dtype=dtype, penalty=penalty)
    uninterrupted = stream(RenewableHuberRegressor(**params), batches)
    first_half = stream(RenewableHuberRegressor(**params), batches[:2])
    first_half.save(tmp_path / "half.npz")
    resumed = stream(RenewableHuberRegressor.load(tmp_path / "half.npz"), batches[2:])
    assert_same_state(resumed, uninterrupted)
    assert resumed.diagnostics_ == uninterrupted.diagnostics_


def test_weighted_stream_resumes_with_its_weight_sum(tmp_path):
    batches = make_batches()
    weights = [np.random.default_rng(i).uniform(0, 2, size=50) for i in range(4)]
    uninterrupted = RenewableHuberRegressor(backend="numpy")
    for (X, y), w in zip(batches, weights, strict=True):
        uninterrupted.partial_fit(X, y, w)
    half = RenewableHuberRegressor(backend="numpy")
    for (X, y), w in zip(batches[:2], weights[:2], strict=True):
        half.partial_fit(X, y, w)
    half.save(tmp_path / "w.npz")
    resumed = RenewableHuberRegressor.load(tmp_path / "w.npz")
    assert resumed.state_.weight_sum == float(weights[0].sum()) + float(weights[1].sum())
    for (X, y), w in zip(batches[2:], weights[2:], strict=True):
        resumed.partial_fit(X, y, w)
    assert_same_state(resumed, uninterrupted)


def test_feature_names_survive_a_checkpoint(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = make_batches(1)[0]
    frame = pd.DataFrame(X, columns=["x0", "x1", "x2"])
    RenewableHuberRegressor(backend="numpy").fit(frame, y).save(tmp_path / "n.npz")
    loaded = RenewableHuberRegressor.load(tmp_path / "n.npz")
    assert list(loaded.feature_names_in_) == ["x0", "x1", "x2"]
    with pytest.raises(ValidationError, match="feature names"):
        loaded.predict(frame[["x2", "x1", "x0"]])


def test_save_overwrites_and_accepts_str_paths(tmp_path, saved):
    estimator, path = saved
    estimator.partial_fit(*make_batches()[2])
    estimator.save(str(path))
    assert RenewableHuberRegressor.load(str(path)).n_samples_seen_ == 150
    assert sorted(os.listdir(path.parent)) == ["model.npz"]


# -- load overrides ---------------------------------------------------------------------


def test_load_overrides_dtype_and_casts_the_state(saved):
    estimator, path = saved
    loaded = RenewableHuberRegressor.load(path, dtype="float32")
    assert loaded.dtype == "float32"
    assert loaded.state_.coefficients.dtype == np.float32
    np.testing.assert_array_equal(
        loaded.state_.information, estimator.state_.information.astype(np.float32)
    )
    loaded.partial_fit(*make_batches()[2])
    assert loaded.coef_.dtype == np.float32


def test_overriding_backend_alone_resets_device_to_auto(tmp_path):
    X, y = make_batches(1)[0]
    RenewableHuberRegressor(backend="numpy", device="cpu").fit(X, y).save(tmp_path / "c.npz")
    assert RenewableHuberRegressor.load(tmp_path / "c.npz").device == "cpu"
    loaded = RenewableHuberRegressor.load(tmp_path / "c.npz", backend="numpy")
    assert loaded.backend == "numpy" and loaded.device == "auto"
    loaded = RenewableHuberRegressor.load(tmp_path / "c.npz", backend="numpy", device="cpu")
    assert loaded.device == "cpu"


def test_load_override_is_validated(saved):
    _, path = saved
    with pytest.raises(ValidationError, match="dtype must be 'float32' or 'float64'"):
        RenewableHuberRegressor.load(path, dtype="float16")
    with pytest.raises(BackendUnavailableError, match="runs on device 'cpu'"):
        RenewableHuberRegressor.load(path, backend="numpy", device="cuda")


def test_float32_override_that_overflows_is_refused(tmp_path, saved):
    _, path = saved
    arrays, metadata = read_members(path)
    arrays["information"][0, 0] = 1e300
    metadata["payload_sha256"] = checkpoint_module.payload_digest(
        arrays["coefficients"], arrays["information"], metadata)
    write_members(tmp_path / "big.npz", metadata, **arrays)
    with pytest.raises(ValidationError, match="overflows float32"):
        RenewableHuberRegressor.load(tmp_path / "big.npz", dtype="float32")


# -- format 1 -----------------------------------------------------------------------------


def test_format_1_without_weight_sum_is_read_as_unit_weights(tmp_path):
    batches = make_batches()
    uninterrupted = stream(RenewableHuberRegressor(backend="numpy"), batches)
    half = stream(RenewableHuberRegressor(backend="numpy"), batches[:2])
    half.save(tmp_path / "v2.npz")
    arrays, metadata = read_members(tmp_path / "v2.npz")
    downgrade_to_format_3(arrays, metadata)
    metadata["format_version"] = 1
    del metadata["weight_sum"]
    del metadata["payload_sha256"]
    del metadata["config"]["cuda_graphs"]  # older writers predate some parameters
    write_members(tmp_path / "v1.npz", metadata, **arrays)
    resumed = RenewableHuberRegressor.load(tmp_path / "v1.npz")
    assert resumed.state_.weight_sum == 100.0
    assert resumed.cuda_graphs is False
    assert_same_state(stream(resumed, batches[2:]), uninterrupted)


def test_format_1_of_0_7_without_weight_sum_or_feature_names_loads(tmp_path):
    """renewable-huber 0.7.x's first format: savez_compressed, no weight_sum, no
    feature_names_in; read with unit weights, as 0.7.1 reads it."""
    batches = make_batches()
    uninterrupted = stream(RenewableHuberRegressor(backend="numpy"), batches)
    half = stream(RenewableHuberRegressor(backend="numpy"), batches[:2])
    half.save(tmp_path / "v3.npz")
    arrays, metadata = read_members(tmp_path / "v3.npz")
    downgrade_to_format_3(arrays, metadata)
    for key in ("weight_sum", "feature_names_in", "payload_sha256"):
        del metadata[key]
    metadata["format_version"] = 1
    np.savez_compressed(tmp_path / "v1.npz", metadata=np.array(json.dumps(metadata)), **arrays)
    resumed = RenewableHuberRegressor.load(tmp_path / "v1.npz")
    assert resumed.state_.weight_sum == resumed.state_.effective_weight == 100.0
    assert not hasattr(resumed, "feature_names_in_")
    assert_same_state(stream(resumed, batches[2:]), uninterrupted)


def test_format_2_without_digest_still_loads(tmp_path, saved):
    estimator, path = saved
    arrays, metadata = read_members(path)
    downgrade_to_format_3(arrays, metadata)
    del metadata["payload_sha256"]
    metadata["format_version"] = 2
    write_members(tmp_path / "v2.npz", metadata, **arrays)
    assert_same_state(RenewableHuberRegressor.load(tmp_path / "v2.npz"), estimator)


def test_format_2_requires_weight_sum(tmp_path, saved):
    _, path = saved
    arrays, metadata = read_members(path)
    downgrade_to_format_3(arrays, metadata)
    del metadata["weight_sum"]
    del metadata["payload_sha256"]
    metadata["format_version"] = 2
    write_members(tmp_path / "bad.npz", metadata, **arrays)
    with pytest.raises(ValidationError, match=r"metadata lacks \['weight_sum'\]"):
        RenewableHuberRegressor.load(tmp_path / "bad.npz")


# -- damaged, tampered and foreign files --------------------------------------------------


def test_missing_path_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        RenewableHuberRegressor.load(tmp_path / "absent.npz")


@pytest.mark.parametrize("keep", [0, 10, 0.5, -1])
def test_truncated_file_is_corrupted(tmp_path, saved, keep):
    _, path = saved
    content = path.read_bytes()
    size = int(len(content) * keep) if isinstance(keep, float) else keep % (len(content) + 1)
    (tmp_path / "cut.npz").write_bytes(content[:size] if keep != -1 else content[:-1])
    with pytest.raises(ValidationError, match=CORRUPT):
        RenewableHuberRegressor.load(tmp_path / "cut.npz")


def test_a_directory_entry_with_an_unknown_zip_version_is_corrupted(tmp_path, saved):
    # byte 6 of a central directory entry is the version needed to extract; zipfile refuses
    # versions beyond its own (6.3) with NotImplementedError, found by the byte-flip fuzzer
    _, path = saved
    content = bytearray(path.read_bytes())
    entry = content.find(b"PK\x01\x02")
    assert entry > 0
    content[entry + 6] = 109  # "version 10.9"
    (tmp_path / "future-zip.npz").write_bytes(bytes(content))
    with pytest.raises(ValidationError, match=CORRUPT + ".*not an .npz archive"):
        RenewableHuberRegressor.load(tmp_path / "future-zip.npz")


def _member_data_offset(content: bytes, needle: bytes) -> int:
    offset = content.find(needle)
    assert offset > 0
    return offset


@pytest.mark.parametrize("target", ["coefficients", "information", "metadata"])
def test_bit_flip_in_any_member_is_corrupted(tmp_path, saved, target):
    estimator, path = saved
    content = bytearray(path.read_bytes())
    if target == "metadata":
        needle = '"batch_count": 2'.encode("utf-32-le")
    else:
        needle = getattr(estimator.state_, target).tobytes()[:16]
    offset = _member_data_offset(bytes(content), needle)
    content[offset + 1] ^= 0x04
    (tmp_path / "flipped.npz").write_bytes(bytes(content))
    with pytest.raises(ValidationError, match=CORRUPT):
        RenewableHuberRegressor.load(tmp_path / "flipped.npz")


def tampered(metadata, arrays, change):
    metadata = json.loads(json.dumps(metadata))
    arrays = {k: v.copy() for k, v in arrays.items()}
    change(metadata, arrays)
    return metadata, arrays


TAMPERING = {
    "coefficients wrong shape": (lambda m, a: a.update(coefficients=a["coefficients"][:-1]),
                                 r"coefficients has shape \(3,\), expected \(4,\)"),
    "information wrong shape": (lambda m, a: a.update(information=a["information"][:, :3]),
                                "information has shape"),
    "n_features_in disagrees": (lambda m, a: m.update(n_features_in=4), "has shape"),
    "fit_intercept disagrees": (lambda m, a: m.update(fit_intercept=False),
                                "fit_intercept is False but the config says True"),
    "NaN coefficient": (lambda m, a: a["coefficients"].__setitem__(1, np.nan),
                        "coefficients contains NaN or infinity"),
    "inf information": (lambda m, a: a["information"].__setitem__((0, 1), np.inf),
                        "information contains NaN or infinity"),
    "dtype disagrees": (lambda m, a: a.update(coefficients=a["coefficients"].astype(np.float32)),
                        "coefficients has dtype float32, but the config says float64"),
    "integer arrays": (lambda m, a: a.update(information=a["information"].astype(np.int64)),
                       "information has dtype int64"),
    "batch_count without samples": (lambda m, a: m.update(n_samples_seen=0),
                                    "batch_count 2 and n_samples_seen 0 disagree"),
    "more batches than rows": (lambda m, a: m.update(batch_count=101), "exceeds n_samples_seen"),
    "negative count": (lambda m, a: m.update(n_samples_seen=-5), "n_samples_seen must be"),
    "float count": (lambda m, a: m.update(batch_count=2.0), "batch_count must be an integer"),
    "zero weight_sum": (lambda m, a: m.update(weight_sum=0.0), "weight_sum 0.0 is inconsistent"),
    "negative lambda": (lambda m, a: m.update(previous_lambda=-1.0), "previous_lambda must be"),
    "bad config value": (lambda m, a: m["config"].update(tau=-1), "config: tau must be"),
    "unknown config key": (lambda m, a: m["config"].update(alpha=1), "config must hold exactly"),
    "unknown metadata key": (lambda m, a: m.update(extra=1), r"unexpected keys \['extra'\]"),
    "future version": (lambda m, a: m.update(format_version=7), "format_version must be one of"),
    "counter beyond int64": (lambda m, a: m.update(n_samples_seen=2**64 + 200),
                             "beyond the engines' 64-bit counters"),
    "counter at 2**63": (lambda m, a: m.update(n_samples_seen=2**63),
                         "beyond the engines' 64-bit counters"),
    "negated information": (lambda m, a: a.update(information=-a["information"]),
                            r"information\[0, 0\] is .* no negative diagonal entry"),
    "edited coefficient": (lambda m, a: a["coefficients"].__setitem__(0, 0.5),
                           "payload digest does not match"),
    "edited counter": (lambda m, a: m.update(n_samples_seen=99), "payload digest does not match"),
    "digest not a string": (lambda m, a: m.update(payload_sha256=1), "must be a hexadecimal"),
    "feature names wrong length": (lambda m, a: m.update(feature_names_in=["a"]),
                                   "feature_names_in must be null or a list of 3 strings"),
}


@pytest.mark.parametrize("case", sorted(TAMPERING))
def test_tampered_checkpoint_is_corrupted_with_a_reason(tmp_path, saved, case):
    _, path = saved
    change, reason = TAMPERING[case]
    metadata, arrays = tampered(*reversed(read_members(path)), change)
    write_members(tmp_path / "t.npz", metadata, **arrays)
    with pytest.raises(ValidationError, match=reason) as error:
        RenewableHuberRegressor.load(tmp_path / "t.npz")
    assert str(error.value).startswith(CORRUPT)


def test_non_finite_json_numbers_are_corrupted(tmp_path, saved):
    _, path = saved
    arrays, metadata = read_members(path)
    text = json.dumps(metadata).replace('"previous_lambda": ', '"previous_lambda": NaN, "x": ')
    np.savez(tmp_path / "nan.npz", metadata=np.array(text), **arrays)
    with pytest.raises(ValidationError, match=f"{CORRUPT}.*non-finite number NaN"):
        RenewableHuberRegressor.load(tmp_path / "nan.npz")


def test_pickled_object_arrays_are_refused(tmp_path, saved):
    _, path = saved
    arrays, metadata = read_members(path)
    arrays["coefficients"] = np.array([object()] * 4, dtype=object)
    write_members(tmp_path / "pickled.npz", metadata, **arrays)
    # Refused from the .npy header, before numpy could be asked to unpickle anything.
    with pytest.raises(ValidationError, match=f"{CORRUPT}.*coefficients has dtype object"):
        RenewableHuberRegressor.load(tmp_path / "pickled.npz")
    metadata_object = np.array({"format_version": 2}, dtype=object)
    np.savez(tmp_path / "pickled_meta.npz", metadata=metadata_object, **arrays)
    with pytest.raises(ValidationError, match=CORRUPT):
        RenewableHuberRegressor.load(tmp_path / "pickled_meta.npz")


def test_foreign_files_are_corrupted(tmp_path):
    np.savez(tmp_path / "other.npz", weights=np.ones(3), bias=np.zeros(1))
    (tmp_path / "notes.txt").write_text("coefficients: 1, 2, 3\n")
    np.save(tmp_path / "plain.npy", np.ones(4))
    with zipfile.ZipFile(tmp_path / "archive.npz", "w") as archive:
        archive.writestr("readme.txt", "hello")
    (tmp_path / "empty.npz").write_bytes(b"")
    for name, reason in [
        ("other.npz", "expected members"),
        ("notes.txt", ""),
        ("plain.npy", "not an .npz archive"),
        ("archive.npz", "expected members"),
        ("empty.npz", ""),
    ]:
        with pytest.raises(ValidationError, match=f"{CORRUPT} .*{reason}"):
            RenewableHuberRegressor.load(tmp_path / name)


def test_metadata_that_is_not_an_object_is_corrupted(tmp_path, saved):
    _, path = saved
    arrays, _ = read_members(path)
    np.savez(tmp_path / "list.npz", metadata=np.array("[1, 2]"), **arrays)
    with pytest.raises(ValidationError, match=f"{CORRUPT}.*JSON object"):
        RenewableHuberRegressor.load(tmp_path / "list.npz")
    np.savez(tmp_path / "bytes.npz", metadata=np.frombuffer(b"{}", dtype=np.uint8), **arrays)
    with pytest.raises(ValidationError, match=f"{CORRUPT}.*JSON string"):
        RenewableHuberRegressor.load(tmp_path / "bytes.npz")


# -- atomic writes -------------------------------------------------------------------------


def test_crash_mid_write_keeps_the_previous_checkpoint_and_no_temporary(
    tmp_path, saved, monkeypatch
):
    estimator, path = saved
    before = path.read_bytes()
    estimator.partial_fit(*make_batches()[2])

    def crashing_savez(handle, **arrays):
        handle.write(b"PK\x03\x04 half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint_module.np, "savez", crashing_savez)
    with pytest.raises(OSError, match="disk full"):
        estimator.save(path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["model.npz"]
    assert RenewableHuberRegressor.load(path).n_samples_seen_ == 100


def test_crash_before_rename_keeps_the_previous_checkpoint(tmp_path, saved, monkeypatch):
    estimator, path = saved
    before = path.read_bytes()

    def failing_replace(source, destination):
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint_module.os, "replace", failing_replace)
    with pytest.raises(KeyboardInterrupt):
        estimator.save(path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["model.npz"]


def test_save_fsyncs_the_file_before_renaming(tmp_path, saved, monkeypatch):
    estimator, path = saved
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(checkpoint_module.os, "fsync",
                        lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(checkpoint_module.os, "replace",
                        lambda a, b: (events.append("replace"), real_replace(a, b))[1])
    estimator.save(path)
    assert events[:2] == ["fsync", "replace"]
    assert RenewableHuberRegressor.load(path).n_samples_seen_ == 100


def test_checkpoint_bytes_are_a_plain_npz(saved):
    _, path = saved
    with zipfile.ZipFile(io.BytesIO(path.read_bytes())) as archive:
        assert sorted(archive.namelist()) == ["coefficients.npy", "information.npy",
                                              "metadata.npy"]


def test_a_flip_anywhere_is_refused_or_harmless(tmp_path, saved):
    # Zip bookkeeping (timestamps, version fields) is not covered by the CRC, so some flips
    # load; those must load the identical state. Everything else is a clean ValidationError.
    estimator, path = saved
    content = path.read_bytes()
    refused = 0
    for offset in range(0, len(content), 5):
        damaged = bytearray(content)
        damaged[offset] ^= 0x10
        (tmp_path / "d.npz").write_bytes(bytes(damaged))
        try:
            loaded = RenewableHuberRegressor.load(tmp_path / "d.npz")
        except ValidationError as error:
            assert str(error).startswith(CORRUPT)
            refused += 1
        else:
            assert_same_state(loaded, estimator)
    assert refused > len(content) // 5 * 0.8


# -- other engines ---------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["native_cpu", "cupy", "native_cuda"])
def test_numpy_checkpoint_resumes_on_another_engine(tmp_path, engine):
    from renewable_huber import backends

    reason = backends.unavailable_reason(engine)
    if reason is not None:
        pytest.skip(f"{engine} unavailable here: {reason}")
    batches = make_batches()
    uninterrupted = stream(RenewableHuberRegressor(backend="numpy"), batches)
    stream(RenewableHuberRegressor(backend="numpy"), batches[:2]).save(tmp_path / "h.npz")
    resumed = RenewableHuberRegressor.load(tmp_path / "h.npz", backend=engine)
    assert resumed.backend_ == engine
    stream(resumed, batches[2:])
    # Cross-engine equality is tolerance-based (docs/corpora.md, float64 engines).
    np.testing.assert_allclose(resumed.state_.coefficients, uninterrupted.state_.coefficients,
                               rtol=2e-8, atol=3e-9)
    np.testing.assert_allclose(resumed.state_.information, uninterrupted.state_.information,
                               rtol=2e-8, atol=3e-9)
    assert resumed.n_samples_seen_ == uninterrupted.n_samples_seen_
    assert resumed.state_.batch_count == 4
    resumed.save(tmp_path / "back.npz")
    assert RenewableHuberRegressor.load(tmp_path / "back.npz", backend="numpy").backend_ == "numpy"


# -- hostile files: bounded reads ----------------------------------------------------------


def _zip_with(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def test_members_that_are_not_npy_are_corrupted(tmp_path):
    _zip_with(tmp_path / "raw.npz", {"coefficients": b"x", "information": b"y", "metadata": b"{}"})
    with pytest.raises(ValidationError, match=f"{CORRUPT}.*expected members"):
        RenewableHuberRegressor.load(tmp_path / "raw.npz")
    _zip_with(tmp_path / "fake.npz", {f"{n}.npy": b"not npy" for n in
                                      ("coefficients", "information", "metadata")})
    with pytest.raises(ValidationError, match=f"{CORRUPT}.*metadata: not a .npy member"):
        RenewableHuberRegressor.load(tmp_path / "fake.npz")


def test_a_declared_huge_matrix_is_refused_before_it_is_read(tmp_path, saved):
    """A small file whose information header declares 16000 x 16000 (2 GB) while the metadata
    implies 4 x 4: refused from the header, without allocating the declared size."""
    _, path = saved
    arrays, metadata = read_members(path)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (16000, 16000)})
    members = {}
    for name, value in (("coefficients", arrays["coefficients"]),
                        ("metadata", np.array(json.dumps(metadata)))):
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, value)
        members[f"{name}.npy"] = buffer.getvalue()
    members["information.npy"] = header.getvalue() + bytes(1 << 20)
    _zip_with(tmp_path / "huge.npz", members)
    tracemalloc.start()
    try:
        with pytest.raises(ValidationError, match=r"information has shape \(16000, 16000\)"):
            RenewableHuberRegressor.load(tmp_path / "huge.npz")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_device_file_is_refused_without_reading_it():
    with pytest.raises(ValidationError, match=f"{CORRUPT}.*not a regular file"):
        RenewableHuberRegressor.load("/dev/zero")


# -- leftovers and links -------------------------------------------------------------------


def test_save_removes_temporaries_a_killed_save_left_behind(tmp_path, saved):
    estimator, path = saved
    orphans = [tmp_path / f".{path.name}.abc123.tmp", tmp_path / f".{path.name}.zz.tmp"]
    for orphan in orphans:
        orphan.write_bytes(b"partial")
    unrelated = tmp_path / ".other.npz.abc.tmp"
    unrelated.write_bytes(b"keep")
    estimator.save(path)
    assert not any(orphan.exists() for orphan in orphans)
    assert unrelated.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, unrelated.name])


@pytest.mark.skipif(os.name == "nt", reason="symbolic links need privileges on Windows")
def test_saving_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path, saved):
    estimator, path = saved
    (tmp_path / "models").mkdir()
    target = tmp_path / "models" / "v1.npz"
    target.write_bytes(b"old")
    link = tmp_path / "current.npz"
    link.symlink_to(target)
    estimator.save(link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert_same_state(RenewableHuberRegressor.load(target), estimator)
