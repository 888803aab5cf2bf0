"""Inference is opt-in: RenewableHuberRegressor(inference=False) by default accumulates no meat
matrix K on any engine (K costs an extra Gram's worth of work per batch), refuses standard
errors with a message saying how to get them, and records the setting in checkpoints; with
inference=True everything works as before. The expected standard errors of an opted-in stream
come from an independent NumPy sandwich (test_inference.independent_sandwich)."""

from __future__ import annotations

import ctypes
import importlib
import json

import numpy as np
import pytest
from test_inference import independent_sandwich, stream_data

from renewable_huber import (
    InferenceUnavailableError,
    RenewableHuberRegressor,
    ValidationError,
)
from renewable_huber import checkpoint as checkpoint_module
from renewable_huber._engine import StateLanding

NOT_REQUESTED = r"not requested: this stream has inference=False.*inference=True"


def inference_calls(model):
    return (lambda: model.bse_, model.cov_params, model.conf_int, model.summary)


def read_members(path):
    with np.load(path) as archive:
        arrays = {name: archive[name] for name in archive.files}
    return arrays, json.loads(str(arrays.pop("metadata")[()]))


def write_members(path, metadata, arrays):
    np.savez(path, metadata=np.array(json.dumps(metadata)), **arrays)


def redigest(metadata, arrays):
    metadata["payload_sha256"] = checkpoint_module.payload_digest(
        arrays["coefficients"], arrays["information"], metadata, arrays.get("meat"))


# -- the default ----------------------------------------------------------------------------


def test_the_default_model_refuses_inference_and_says_how_to_get_it():
    X, y = stream_data(n=600, seed=30)
    model = RenewableHuberRegressor(backend="numpy").fit(X, y)
    assert model.get_params()["inference"] is False
    for call in inference_calls(model):
        with pytest.raises(InferenceUnavailableError, match=NOT_REQUESTED):
            call()
    # L1 keeps its own reason, which an inference=True refit would not cure
    l1 = RenewableHuberRegressor(backend="numpy", penalty="l1").fit(X, y)
    with pytest.raises(InferenceUnavailableError, match="penalty='none' only"):
        l1.cov_params()


def test_inference_false_leaves_no_k_in_the_state_or_the_checkpoint(tmp_path):
    X, y = stream_data(n=900, seed=31)
    model = RenewableHuberRegressor(backend="numpy")
    for rows in np.array_split(np.arange(len(y)), 3):
        model.partial_fit(X[rows], y[rows])
    assert model.state_.meat is None
    assert model.state_dict()["meat"] is None
    assert model.state_dict()["config"]["inference"] is False
    model.save(tmp_path / "m.npz")
    arrays, metadata = read_members(tmp_path / "m.npz")
    assert "meat" not in arrays
    assert metadata["has_meat"] is False and metadata["config"]["inference"] is False
    loaded = RenewableHuberRegressor.load(tmp_path / "m.npz")
    assert loaded.inference is False
    with pytest.raises(InferenceUnavailableError, match=NOT_REQUESTED):
        loaded.cov_params()


def test_the_estimates_do_not_depend_on_the_setting():
    X, y = stream_data(n=1500, seed=32)
    fitted = {}
    for flag in (False, True):
        model = RenewableHuberRegressor(backend="numpy", tol=1e-10, inference=flag)
        for rows in np.array_split(np.arange(len(y)), 3):
            model.partial_fit(X[rows], y[rows])
        fitted[flag] = model
    np.testing.assert_array_equal(fitted[False].coef_, fitted[True].coef_)
    np.testing.assert_array_equal(fitted[False].state_.information,
                                  fitted[True].state_.information)


def test_numpy_backend_without_inference_never_computes_the_meat(monkeypatch):
    # the module (the package re-exports the function objective under the same name)
    objective_module = importlib.import_module("renewable_huber.core.objective")
    calls = []
    original = objective_module.batch_meat

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(objective_module, "batch_meat", counting)
    X, y = stream_data(n=900, seed=33)
    model = RenewableHuberRegressor(backend="numpy")
    for rows in np.array_split(np.arange(len(y)), 3):
        model.partial_fit(X[rows], y[rows])
    model.fit(X, y)
    assert calls == []
    opted = RenewableHuberRegressor(backend="numpy", inference=True)
    for rows in np.array_split(np.arange(len(y)), 3):
        opted.partial_fit(X[rows], y[rows])
    assert len(calls) == 3


# -- opting in ------------------------------------------------------------------------------


def test_inference_true_gives_the_independent_sandwich_and_auto_tau_works():
    X, y = stream_data(n=2000, seed=34)
    model = RenewableHuberRegressor(backend="numpy", tol=1e-10, tau="auto", inference=True)
    states = []
    for rows in np.array_split(np.arange(len(y)), 4):
        model.partial_fit(X[rows], y[rows])
        states.append(model.state_)
    expected = independent_sandwich(X, y, 4, states, model.tau_)
    np.testing.assert_allclose(model.cov_params(), expected, rtol=1e-9, atol=1e-15)
    assert model.get_params()["tau"] == "auto"


def test_the_parameter_is_validated_cloned_pickled_and_fixed_per_stream():
    import pickle

    from sklearn.base import clone

    X, y = stream_data(n=600, seed=35)
    with pytest.raises(ValidationError, match="inference must be True or False"):
        RenewableHuberRegressor(backend="numpy", inference="yes").fit(X, y)
    assert clone(RenewableHuberRegressor(inference=True)).inference is True
    assert "inference=True" in repr(RenewableHuberRegressor(inference=True))
    model = RenewableHuberRegressor(backend="numpy", inference=True).fit(X, y)
    twin = pickle.loads(pickle.dumps(model))
    assert twin.inference is True
    np.testing.assert_array_equal(twin.bse_, model.bse_)
    plain = pickle.loads(pickle.dumps(RenewableHuberRegressor(backend="numpy").fit(X, y)))
    with pytest.raises(InferenceUnavailableError, match=NOT_REQUESTED):
        plain.cov_params()
    # switching inference mid-stream is refused: K would miss the batches already folded
    model.inference = False
    before = model.state_
    with pytest.raises(ValidationError,
                       match="inference or standardize changed since this stream started"):
        model.partial_fit(X, y)
    np.testing.assert_array_equal(model.state_.coefficients, before.coefficients)
    # set_params starts a new stream with the new setting
    model.set_params(inference=True).partial_fit(X, y)
    assert model.bse_.shape == (4,)
    model.set_params(inference=False).partial_fit(X, y)
    assert model.state_.meat is None


def test_pickles_from_before_the_parameter_keep_their_k():
    X, y = stream_data(n=600, seed=36)
    model = RenewableHuberRegressor(backend="numpy", inference=True).fit(X, y)
    pickled = model.__getstate__()
    del pickled["params"]["inference"]
    old = RenewableHuberRegressor.__new__(RenewableHuberRegressor)
    old.__setstate__(pickled)
    assert old.inference is True
    np.testing.assert_array_equal(old.bse_, model.bse_)


# -- checkpoints ----------------------------------------------------------------------------


def test_an_inference_checkpoint_resumes_with_k(tmp_path):
    X, y = stream_data(n=1500, seed=37)
    parts = np.array_split(np.arange(len(y)), 3)
    straight = RenewableHuberRegressor(backend="numpy", inference=True)
    for rows in parts:
        straight.partial_fit(X[rows], y[rows])
    first = RenewableHuberRegressor(backend="numpy", inference=True).partial_fit(
        X[parts[0]], y[parts[0]])
    first.save(tmp_path / "m.npz")
    resumed = RenewableHuberRegressor.load(tmp_path / "m.npz")
    assert resumed.inference is True
    for rows in parts[1:]:
        resumed.partial_fit(X[rows], y[rows])
    np.testing.assert_array_equal(resumed.cov_params(), straight.cov_params())


def test_format_4_checkpoints_read_inference_from_their_k(tmp_path):
    X, y = stream_data(n=800, seed=38)
    model = RenewableHuberRegressor(backend="numpy", inference=True).fit(X, y)
    model.save(tmp_path / "m.npz")
    arrays, metadata = read_members(tmp_path / "m.npz")
    del metadata["config"]["inference"], metadata["config"]["standardize"]
    del metadata["feature_scaling"]
    metadata["format_version"] = 4
    redigest(metadata, arrays)
    write_members(tmp_path / "v4.npz", metadata, arrays)
    with_k = RenewableHuberRegressor.load(tmp_path / "v4.npz")
    assert with_k.inference is True
    np.testing.assert_array_equal(with_k.bse_, model.bse_)
    del arrays["meat"]
    metadata["has_meat"] = False
    redigest(metadata, arrays)
    write_members(tmp_path / "v4-no-k.npz", metadata, arrays)
    without_k = RenewableHuberRegressor.load(tmp_path / "v4-no-k.npz")
    assert without_k.inference is False
    with pytest.raises(InferenceUnavailableError, match=NOT_REQUESTED):
        _ = without_k.bse_
    # a format 4 config may not name the parameter; a format 5 one must
    metadata["config"]["inference"] = False
    redigest(metadata, arrays)
    write_members(tmp_path / "bad4.npz", metadata, arrays)
    with pytest.raises(ValidationError, match="config must hold exactly the parameters"):
        RenewableHuberRegressor.load(tmp_path / "bad4.npz")


def test_a_checkpoint_with_k_but_inference_false_is_refused(tmp_path):
    X, y = stream_data(n=800, seed=39)
    RenewableHuberRegressor(backend="numpy", inference=True).fit(X, y).save(tmp_path / "m.npz")
    arrays, metadata = read_members(tmp_path / "m.npz")
    metadata["config"]["inference"] = False
    redigest(metadata, arrays)
    write_members(tmp_path / "bad.npz", metadata, arrays)
    with pytest.raises(ValidationError, match="has_meat is true but the config says inference"):
        RenewableHuberRegressor.load(tmp_path / "bad.npz")
    del metadata["config"]["inference"]
    redigest(metadata, arrays)
    write_members(tmp_path / "missing.npz", metadata, arrays)
    with pytest.raises(ValidationError, match="config must hold exactly the parameters"):
        RenewableHuberRegressor.load(tmp_path / "missing.npz")


# -- native_cpu -----------------------------------------------------------------------------


def _meat_available(backend) -> int:
    """The engine's own meat_available flag, read through rh_cuda_engine_copy_state."""
    landing = StateLanding(backend.n_parameters, backend.dtype)
    backend._engine.call("rh_cuda_engine_copy_state", ctypes.byref(landing.struct))
    return int(landing.struct.meat_available)


@pytest.mark.usefixtures("cpu_library")
def test_native_cpu_without_inference_accumulates_no_k():
    X, y = stream_data(n=1200, seed=40)
    model = RenewableHuberRegressor(backend="native_cpu", tol=1e-10)
    model.partial_fit(X[:600], y[:600])
    assert _meat_available(model._backend) == 0
    model.partial_fit(X[600:], y[600:])
    assert _meat_available(model._backend) == 0 and model.state_.meat is None
    # reset keeps the engine for the next stream, still without K
    model.reset().fit(X, y)
    assert _meat_available(model._backend) == 0
    opted = RenewableHuberRegressor(backend="native_cpu", tol=1e-10, inference=True)
    opted.partial_fit(X[:600], y[:600]).partial_fit(X[600:], y[600:])
    assert _meat_available(opted._backend) == 1
    reference = RenewableHuberRegressor(backend="numpy", tol=1e-10, inference=True)
    reference.partial_fit(X[:600], y[:600]).partial_fit(X[600:], y[600:])
    np.testing.assert_allclose(opted.bse_, reference.bse_, rtol=1e-7)
    opted.reset().fit(X, y)
    assert _meat_available(opted._backend) == 1


# -- command line ---------------------------------------------------------------------------


def test_cli_fit_prints_standard_errors_only_with_inference(tmp_path, capsys):
    from cli_support import run, write_csv

    X, y = stream_data(n=600, seed=41)
    path = tmp_path / "data.csv"
    write_csv(path, X, y)
    common = [str(path), "--target", "y", "--batch-size", "200", "--backend", "numpy",
              "--no-progress"]
    status, out, err = run(["fit", *common, "--checkpoint", str(tmp_path / "m.npz")], capsys)
    assert status == 0, err
    assert "standard errors: not computed (fit with --inference)" in out
    assert "std err" not in out
    status, out, err = run(["fit", *common, "--json"], capsys)
    document = json.loads(out)
    assert document["standard_errors"] is None
    assert document["inference_unavailable"] == "not computed (fit with --inference)"
    assert document["config"]["inference"] is False
    status, out, err = run(["inspect", str(tmp_path / "m.npz")], capsys)
    assert status == 0, err
    assert "standard errors: not computed (fit with --inference)" in out
    status, out, err = run(["fit", *common, "--inference"], capsys)
    assert status == 0, err
    assert "std err" in out and "not computed" not in out
    # the checkpoint fixes the configuration: --inference cannot change a resumed stream
    status, out, err = run(["fit", *common, "--inference", "--resume",
                            str(tmp_path / "m.npz")], capsys)
    assert status == 2
    assert "--inference cannot be combined with --resume" in err
