"""native_cuda's Python side (estimator, NativeBackend, DLPack borrowing) against a scripted
engine, so it runs without a GPU or librh_cuda: the library object NativeBackend loads is a
Python stand-in that answers the ABI calls, counts CUDA Graph replays and can refuse a batch.
Device arrays are dlpack_fakes producers (fake addresses, never dereferenced).

What is pinned: every fitted attribute (cuda_features_ included, with its graph counters) is
current after every batch and untouched by a failed one; each borrowed array is exported once
per batch with the engine's stream, stays alive while the engine runs, and has its deleter run
exactly once, on success and on every error path; returned states are never overwritten."""

from __future__ import annotations

import copy
import ctypes

import numpy as np
import pytest
from dlpack_fakes import FAKE_DEVICE_ADDRESS, FakeCudaProducer

from renewable_huber import RenewableHuberRegressor, _abi, _dlpack
from renewable_huber.backends import native
from renewable_huber.config import UpdateConfig
from renewable_huber.exceptions import BackendContractError, ValidationError

N_ROWS, N_FEATURES = 6, 3


class ScriptedCudaLibrary:
    """The librh_cuda calls NativeBackend makes, answered in Python (float64 engines only).

    Each successful update adds 1 to every coefficient, counts rows and weight, and replays a
    CUDA Graph when the engine was created with the graphs flag. `refuse_next` makes the next
    update fail with (status, message) after moving the graph counter, as an engine may.
    `on_update` is called with the batch fields while the engine "reads" the batch.
    """

    ENGINE = 0x5EED

    def __init__(self, stream: int = 0):
        self.stream = stream
        self.flags = 0
        self.n_parameters = 0
        self.coefficients = None
        self.information = None
        self.counters = {"n_samples_seen": 0, "batch_count": 0, "previous_lambda": 0.0,
                         "weight_sum": 0.0}
        self.graph_replays = 0
        self.refuse_next = None
        self.on_update = None
        self.batches = []
        self.error = b""

    # ------------------------------------------------------------------ ABI stand-ins
    def rh_cuda_is_available(self, available):
        available._obj.value = 1
        return _abi.RH_CUDA_SUCCESS

    def rh_cuda_device_count(self, count):
        count._obj.value = 1
        return _abi.RH_CUDA_SUCCESS

    def rh_cuda_last_error(self):
        return b""

    def rh_cuda_engine_create(self, options, handle):
        assert options._obj.dtype == _abi.RH_CUDA_DTYPE_FLOAT64
        self.flags = options._obj.reserved0
        self.n_parameters = P = options._obj.n_parameters
        self.coefficients, self.information = np.zeros(P), np.zeros((P, P))
        handle._obj.value = self.ENGINE
        return _abi.RH_CUDA_SUCCESS

    def rh_cuda_engine_destroy(self, engine):
        return _abi.RH_CUDA_SUCCESS

    def rh_cuda_engine_stream(self, engine, stream):
        stream._obj.value = self.stream
        return _abi.RH_CUDA_SUCCESS

    def rh_cuda_engine_restore(self, engine, view):
        state, P = view._obj, self.n_parameters
        self.coefficients = self._array(state.coefficients, (P,)).copy()
        self.information = self._array(state.information, (P, P)).copy()
        for name in self.counters:
            self.counters[name] = getattr(state, name)
        return _abi.RH_CUDA_SUCCESS

    def rh_cuda_engine_copy_state(self, engine, state):
        self._export_state(state._obj)
        return _abi.RH_CUDA_SUCCESS

    def rh_cuda_engine_update_device_with_state(self, engine, batch, config, diagnostics, state):
        fields = {name: getattr(batch._obj, name) for name, _ in _abi.RhCudaDeviceBatch._fields_}
        self.batches.append(fields)
        if self.on_update is not None:
            self.on_update(fields)
        if self.refuse_next is not None:
            (status, message), self.refuse_next = self.refuse_next, None
            self.graph_replays += 2
            self.error = message.encode()
            return status
        self.coefficients = self.coefficients + 1.0
        self.information = self.information + np.eye(self.n_parameters)
        self.counters["n_samples_seen"] += fields["n_rows"]
        self.counters["batch_count"] += 1
        self.counters["weight_sum"] += fields["batch_weight"]
        if self.flags & _abi.RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS:
            self.graph_replays += 1
        out = diagnostics._obj
        out.iterations = 2 + self.counters["batch_count"]
        out.converged = 1
        out.objective = 0.5 * self.counters["batch_count"]
        out.lambda_value = 0.0
        out.bandwidth = 0.25
        out.used_regularized_fallback = 0
        self._export_state(state._obj)
        return _abi.RH_CUDA_SUCCESS

    def rh_cuda_engine_features(self, engine, features):
        out = features._obj
        out.requested_flags = out.enabled_flags = self.flags
        out.graph_captures = 1 if self.graph_replays else 0
        out.graph_replays = self.graph_replays
        out.graph_fallbacks = 0
        return _abi.RH_CUDA_SUCCESS

    def rh_cuda_engine_last_error(self, engine):
        return self.error

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _array(address, shape):
        count = int(np.prod(shape))
        return np.ctypeslib.as_array((ctypes.c_double * count).from_address(address)).reshape(shape)

    def _export_state(self, out):
        P = self.n_parameters
        self._array(out.coefficients, (P,))[:] = self.coefficients
        self._array(out.information, (P, P))[:] = self.information
        for name, value in self.counters.items():
            setattr(out, name, value)


@pytest.fixture
def engine(monkeypatch):
    library = ScriptedCudaLibrary()
    load = native.load_engine_library
    monkeypatch.setattr(
        native, "load_engine_library",
        lambda kind: library if kind == "native_cuda" else load(kind),
    )
    return library


def device_batch(n=N_ROWS, p=N_FEATURES, **y_options):
    return FakeCudaProducer((n, p)), FakeCudaProducer((n,), **y_options)


def fitted_snapshot(estimator):
    return {
        "coef_": estimator.coef_.copy(),
        "intercept_": estimator.intercept_,
        "n_samples_seen_": estimator.n_samples_seen_,
        "n_iter_": estimator.n_iter_,
        "diagnostics_": copy.deepcopy(estimator.diagnostics_),
        "cuda_features_": copy.deepcopy(estimator.cuda_features_),
        "state_": estimator.state_,
    }


def assert_same_snapshot(before, after):
    for key in ("coef_", "intercept_", "n_samples_seen_", "n_iter_", "diagnostics_",
                "cuda_features_"):
        np.testing.assert_array_equal(after[key], before[key], err_msg=key)
    np.testing.assert_array_equal(after["state_"].coefficients, before["state_"].coefficients)
    assert after["state_"].batch_count == before["state_"].batch_count


def test_every_fitted_attribute_is_current_after_every_device_batch(engine):
    estimator = RenewableHuberRegressor(backend="native_cuda", cuda_graphs=True)
    seen_while_engine_read = []
    for batch in range(1, 4):
        X, y = device_batch()
        engine.on_update = lambda fields, X=X, y=y: seen_while_engine_read.append(
            (fields["x_design"], fields["y"], X.deleter_calls, y.deleter_calls)
        )
        estimator.partial_fit(X, y)
        np.testing.assert_array_equal(estimator.coef_, np.full(N_FEATURES, float(batch)))
        assert estimator.intercept_ == float(batch)
        assert estimator.n_samples_seen_ == N_ROWS * batch
        assert estimator.n_iter_ == 2 + batch
        assert estimator.diagnostics_ == {
            "iterations": 2 + batch, "converged": True, "objective": 0.5 * batch,
            "lambda_value": 0.0, "bandwidth": 0.25, "used_regularized_fallback": False,
            "stop_reason": None,
        }
        assert estimator.cuda_features_ == {
            "requested_flags": 1, "enabled_flags": 1, "graph_captures": 1,
            "graph_replays": batch, "graph_fallbacks": 0,
            "requested": ["cuda_graphs"], "enabled": ["cuda_graphs"],
        }
        assert estimator.state_.batch_count == batch
        assert estimator.backend_ == "native_cuda" and estimator.device_ == "cuda"
        # Exported once, with the engine's stream (0, the legacy default: asked for as 1),
        # released once after the engine call.
        for producer in (X, y):
            assert producer.streams == [1]
            assert producer.deleted_pointers == [producer.managed_address]
        # A caller that changes this batch's cuda_features_ changes only its own copy: the
        # next batch's is checked above.
        features = estimator.cuda_features_
        features["requested"].append("changed by the caller")
        features.clear()
    assert seen_while_engine_read == [(FAKE_DEVICE_ADDRESS, FAKE_DEVICE_ADDRESS, 0, 0)] * 3
    assert [b["n_rows"] for b in engine.batches] == [N_ROWS] * 3
    assert all(b["n_columns"] == N_FEATURES and b["sample_weight"] is None for b in engine.batches)
    assert all(b["batch_weight"] == float(N_ROWS) for b in engine.batches)


def test_engine_stream_is_the_stream_asked_of_the_producers(engine):
    engine.stream = 0xABC0
    X, y = device_batch()
    RenewableHuberRegressor(backend="native_cuda").partial_fit(X, y)
    assert X.streams == y.streams == [0xABC0]


def test_without_graphs_the_counters_stay_zero_and_no_flag_is_named(engine):
    estimator = RenewableHuberRegressor(backend="native_cuda")
    for _ in range(2):
        estimator.partial_fit(*device_batch())
    assert estimator.cuda_features_ == {
        "requested_flags": 0, "enabled_flags": 0, "graph_captures": 0, "graph_replays": 0,
        "graph_fallbacks": 0, "requested": [], "enabled": [],
    }


def test_refused_batch_changes_no_attribute_though_the_engine_counters_moved(engine):
    estimator = RenewableHuberRegressor(backend="native_cuda", cuda_graphs=True)
    estimator.partial_fit(*device_batch())
    before = fitted_snapshot(estimator)
    engine.refuse_next = (_abi.RH_CUDA_INVALID_ARGUMENT,
                          "RhCudaDeviceBatch.x_design[4, 2] is inf: values must be finite")
    X, y = device_batch()
    with pytest.raises(ValidationError, match=(
        r"^X contains NaN or infinity \(first at row 4, column 2\): "
        r"rh_cuda_engine_update_device_with_state failed with INVALID_ARGUMENT: "
        r"RhCudaDeviceBatch\.x_design\[4, 2\] is inf: values must be finite$"
    )):
        estimator.partial_fit(X, y)
    assert X.deleter_calls == y.deleter_calls == 1
    assert_same_snapshot(before, fitted_snapshot(estimator))
    # The next batch reports the engine's counters as they are by then.
    estimator.partial_fit(*device_batch())
    assert estimator.cuda_features_["graph_replays"] == 1 + 2 + 1
    assert estimator.n_samples_seen_ == 2 * N_ROWS


def test_numerical_failure_is_an_engine_error_and_changes_nothing(engine):
    estimator = RenewableHuberRegressor(backend="native_cuda")
    estimator.partial_fit(*device_batch())
    before = fitted_snapshot(estimator)
    engine.refuse_next = (_abi.RH_CUDA_NUMERICAL_ERROR, "the information matrix overflowed")
    X, y = device_batch()
    with pytest.raises(native.RenewableHuberError, match="NUMERICAL_ERROR: the information"):
        estimator.partial_fit(X, y)
    assert X.deleter_calls == y.deleter_calls == 1
    assert_same_snapshot(before, fitted_snapshot(estimator))


@pytest.mark.parametrize(
    ("y_options", "message"),
    [
        ({"byte_offset": 4}, "y starts at address .* not aligned"),
        ({"strides": (2,)}, "y is not C-contiguous"),
        ({"exported_device": (_dlpack.kDLCUDA, 1)}, "y is on CUDA device 1"),
    ],
)
def test_contract_violation_in_y_releases_x_and_y_and_changes_nothing(engine, y_options, message):
    estimator = RenewableHuberRegressor(backend="native_cuda")
    estimator.partial_fit(*device_batch())
    before = fitted_snapshot(estimator)
    X, y = device_batch(**y_options)
    with pytest.raises(BackendContractError, match=message):
        estimator.partial_fit(X, y)
    assert X.deleter_calls == y.deleter_calls == 1
    assert len(engine.batches) == 1
    assert_same_snapshot(before, fitted_snapshot(estimator))


def test_weights_from_an_unknown_device_library_release_the_borrowed_arrays(engine):
    estimator = RenewableHuberRegressor(backend="native_cuda")
    X, y = device_batch()

    class DeviceWeights(FakeCudaProducer):
        # What validation asks of weights (no negative, not all zero), answered as a device
        # library would, with arrays that have .any().
        def __lt__(self, other):
            return np.zeros(N_ROWS, dtype=bool)

        def __ne__(self, other):
            return np.ones(N_ROWS, dtype=bool)

    weights = DeviceWeights((N_ROWS,))
    with pytest.raises(BackendContractError, match="CuPy array or a PyTorch CUDA tensor"):
        estimator.partial_fit(X, y, sample_weight=weights)
    assert X.deleter_calls == y.deleter_calls == 1
    assert weights.streams == [] and weights.deleter_calls == 0
    assert not hasattr(estimator, "coef_") and engine.batches == []


def test_tensor_that_requires_grad_is_detached_before_export(engine):
    X, y = device_batch()

    class RequiresGrad:
        requires_grad = True
        shape, dtype = X.shape, X.dtype

        def detach(self):
            return X

        def __dlpack_device__(self):
            return (_dlpack.kDLCUDA, 0)

        def __dlpack__(self, *, stream=None):
            raise AssertionError("a tensor that requires grad must not be exported")

    estimator = RenewableHuberRegressor(backend="native_cuda").partial_fit(RequiresGrad(), y)
    assert estimator.n_samples_seen_ == N_ROWS
    assert X.deleter_calls == 1


def test_states_returned_earlier_are_never_overwritten(engine):
    backend = native.NativeBackend("native_cuda", dtype="float64", n_parameters=N_FEATURES + 1)
    config = UpdateConfig(n_features_in=N_FEATURES, fit_intercept=True, tau=1.345,
                          bandwidth_scale=1.0, tol=1e-6, ridge=1e-8, max_iter=100,
                          penalty="none", lambda_scale=1.0)
    first, first_diagnostics = backend.update(*device_batch(), None, config)
    kept = (first.coefficients.copy(), first.information.copy())
    second, second_diagnostics = backend.update(*device_batch(), None, config)
    np.testing.assert_array_equal(first.coefficients, kept[0])
    np.testing.assert_array_equal(first.information, kept[1])
    np.testing.assert_array_equal(second.coefficients, kept[0] + 1.0)
    assert not np.shares_memory(first.coefficients, second.coefficients)
    assert (first.batch_count, second.batch_count) == (1, 2)
    assert (first_diagnostics.iterations, second_diagnostics.iterations) == (3, 4)
    backend.close()


def test_features_are_read_from_the_engine_at_every_access(engine):
    backend = native.NativeBackend("native_cuda", dtype="float64", n_parameters=2,
                                   cuda_graphs=True, cuda_fast_math=False)
    first = backend.features
    first["enabled"].append("changed by the caller")
    engine.graph_replays = 7
    second = backend.features
    assert second is not first and second["enabled"] == ["cuda_graphs"]
    assert (first["graph_replays"], second["graph_replays"]) == (0, 7)
    backend.close()


def test_features_without_graphs_are_read_once(engine):
    reads = []
    answer = engine.rh_cuda_engine_features

    def counted(handle, features):
        reads.append(1)
        return answer(handle, features)

    engine.rh_cuda_engine_features = counted
    backend = native.NativeBackend("native_cuda", dtype="float64", n_parameters=2,
                                   cuda_graphs=False, cuda_fast_math=True)
    first = backend.features
    first["enabled"].append("changed by the caller")
    second = backend.features
    assert len(reads) == 1
    assert second is not first and second["enabled"] == ["fast_math"]
    assert second["requested_flags"] == _abi.RH_CUDA_ENGINE_FLAG_FAST_MATH
    assert (second["graph_captures"], second["graph_replays"], second["graph_fallbacks"]) == (
        0, 0, 0)
    backend.close()


def test_decode_flags_gives_a_new_list_every_time():
    flags = _abi.RH_CUDA_ENGINE_FLAG_CUDA_GRAPHS | _abi.RH_CUDA_ENGINE_FLAG_FAST_MATH | 0x10
    first = _abi.decode_flags(flags)
    assert first == ["cuda_graphs", "fast_math", "unknown(0x10)"]
    first.clear()
    assert _abi.decode_flags(flags) == ["cuda_graphs", "fast_math", "unknown(0x10)"]
    assert _abi.decode_flags(0) == []
