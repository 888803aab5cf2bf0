"""The DLPack borrowing rules, checked without a GPU: hand-built DLManagedTensors in real
PyCapsules stand in for a CUDA producer, and NumPy's own __dlpack__ gives a genuine CPU tensor
that native_cuda must refuse."""

from __future__ import annotations

import ctypes
import gc
import sys

import numpy as np
import pytest
from dlpack_fakes import (
    FAKE_DEVICE_ADDRESS,
    FakeCudaProducer,
    capsule_is_named,
    other_capsule_name,
)

from renewable_huber import _dlpack
from renewable_huber.exceptions import BackendContractError


def _borrow(producer, *, bits=64, ndim=2, device_id=0, engine_stream=0):
    return _dlpack.borrow(
        producer, "X", device_id=device_id, engine_stream=engine_stream, bits=bits, ndim=ndim
    )


def test_struct_layout_follows_dlpack_h():
    # dlpack.h on a 64-bit platform: DLDevice 8 bytes, DLDataType 4, DLTensor 48, and the
    # managed tensor appends manager_ctx and deleter.
    assert ctypes.sizeof(_dlpack.DLDevice) == 8
    assert ctypes.sizeof(_dlpack.DLDataType) == 4
    assert ctypes.sizeof(_dlpack.DLTensor) == 48
    fields = _dlpack.DLTensor._fields_
    offsets = [(name, getattr(_dlpack.DLTensor, name).offset) for name, _ in fields]
    assert offsets == [
        ("data", 0), ("device", 8), ("ndim", 16), ("dtype", 20), ("shape", 24), ("strides", 32),
        ("byte_offset", 40),
    ]
    assert ctypes.sizeof(_dlpack.DLManagedTensor) == 64
    assert _dlpack.DLManagedTensor.deleter.offset == 56


def test_borrow_yields_pointer_with_byte_offset_and_consumes_capsule_once():
    producer = FakeCudaProducer((3, 4), byte_offset=64, strides=(4, 1))
    with _borrow(producer, engine_stream=0xABC0) as view:
        assert view.data_pointer == FAKE_DEVICE_ADDRESS + 64
        assert view.shape == (3, 4)
        assert producer.deleter_calls == 0
    assert producer.deleter_calls == 1
    assert producer.streams == [0xABC0]
    assert capsule_is_named(producer.capsule, b"used_dltensor")
    assert not capsule_is_named(producer.capsule, b"dltensor")


def test_engine_on_the_legacy_default_stream_asks_for_stream_1():
    producer = FakeCudaProducer((2, 2))
    with _borrow(producer, engine_stream=0):
        pass
    assert producer.streams == [1]


def test_null_strides_mean_c_contiguous():
    producer = FakeCudaProducer((5, 3), strides=None)
    with _borrow(producer) as view:
        assert view.shape == (5, 3)


def test_stride_of_a_length_one_axis_is_ignored():
    producer = FakeCudaProducer((1, 3), strides=(99, 1))
    with _borrow(producer) as view:
        assert view.shape == (1, 3)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"bits": 32}, "float32"),
        ({"code": _dlpack.kDLInt}, "int64"),
        ({"strides": (1, 3)}, "not C-contiguous"),
        ({"strides": (8, 2)}, "not C-contiguous"),
        ({"byte_offset": 4}, "not aligned"),
        ({"exported_device": (_dlpack.kDLCUDA, 1)}, "device 1"),
        ({"exported_device": (_dlpack.kDLCUDAHost, 0)}, "kDLCUDAHost"),
    ],
)
def test_violations_are_contract_errors_and_the_capsule_is_still_released(kwargs, message):
    producer = FakeCudaProducer((3, 4), **kwargs)
    with pytest.raises(BackendContractError, match=message):
        with _borrow(producer):
            pytest.fail("the body must not run for an invalid tensor")
    assert producer.deleter_calls == 1


def test_wrong_ndim_is_a_contract_error():
    producer = FakeCudaProducer((12,))
    with pytest.raises(BackendContractError, match="must be 2-D, got 1-D"):
        with _borrow(producer, ndim=2):
            pass
    assert producer.deleter_calls == 1


def test_wrong_device_is_refused_before_anything_is_exported():
    producer = FakeCudaProducer((3, 4), device=(_dlpack.kDLCUDA, 2))
    with pytest.raises(BackendContractError, match="CUDA device 2.*device 0"):
        with _borrow(producer, device_id=0):
            pass
    assert producer.streams == []


def test_numpy_array_is_refused_as_a_cpu_tensor():
    array = np.zeros((3, 2))
    before = sys.getrefcount(array)
    with pytest.raises(BackendContractError, match="kDLCPU"):
        with _borrow(array):
            pass
    assert sys.getrefcount(array) == before


def test_object_without_dlpack_is_refused():
    with pytest.raises(BackendContractError, match="does not implement the DLPack protocol"):
        with _borrow([[1.0, 2.0]]):
            pass


def test_tensor_requiring_grad_is_detached_before_export():
    detached = FakeCudaProducer((2, 2))

    class NeedsGrad:
        requires_grad = True

        def detach(self):
            return detached

        def __dlpack__(self, *, stream=None):
            raise AssertionError("a tensor that requires grad must not be exported")

        def __dlpack_device__(self):
            return (_dlpack.kDLCUDA, 0)

    with _borrow(NeedsGrad()) as view:
        assert view.shape == (2, 2)
    assert detached.deleter_calls == 1


def test_capsule_already_consumed_is_refused():
    producer = FakeCudaProducer((2, 2))
    with _borrow(producer):
        pass
    used = producer.capsule

    class Replay:
        def __dlpack_device__(self):
            return (_dlpack.kDLCUDA, 0)

        def __dlpack__(self, *, stream=None):
            return used

    with pytest.raises(BackendContractError, match="consumed once"):
        with _borrow(Replay()):
            pass
    assert producer.deleter_calls == 1


def test_deleter_gets_the_managed_tensor_that_was_exported():
    producer = FakeCudaProducer((3, 4))
    with _borrow(producer):
        pass
    assert producer.deleted_pointers == [producer.managed_address]


def test_nothing_is_exported_before_the_with_block_starts():
    producer = FakeCudaProducer((3, 4))
    borrowed = _borrow(producer)
    assert producer.streams == [] and producer.deleter_calls == 0
    with borrowed as view:
        assert view.shape == (3, 4)
    assert producer.streams == [1] and producer.deleter_calls == 1


def test_error_in_the_block_releases_once_and_propagates():
    producer = FakeCudaProducer((3, 4))
    with pytest.raises(KeyError, match="engine failed"):
        with _borrow(producer):
            assert producer.deleter_calls == 0
            raise KeyError("engine failed")
    assert producer.deleter_calls == 1
    assert capsule_is_named(producer.capsule, b"used_dltensor")


def test_producer_stays_referenced_until_its_deleter_has_run():
    events = []

    class Exported(FakeCudaProducer):
        def _delete(self, managed):
            events.append(("deleter", len(alive)))
            super()._delete(managed)

        def __del__(self):
            alive.clear()

    alive = ["detached copy"]

    class NeedsGrad:
        # The detached tensor is referenced by nobody but the borrow.
        requires_grad = True

        def detach(self):
            return Exported((2, 2))

    with _borrow(NeedsGrad()) as view:
        assert view.shape == (2, 2) and alive
        events.append(("body", len(alive)))
    assert events == [("body", 1), ("deleter", 1)]
    gc.collect()  # the fake's deleter callback refers back to it
    assert not alive


def test_a_failing_second_borrow_releases_the_first():
    # The native backend borrows X and y in one with-statement.
    first = FakeCudaProducer((3, 4))
    second = FakeCudaProducer((3,), bits=32)
    with pytest.raises(BackendContractError, match="float32"):
        with _borrow(first) as x_view, _borrow(second, ndim=1) as y_view:
            pytest.fail(f"the body must not run ({x_view}, {y_view})")
    assert first.deleter_calls == 1 and second.deleter_calls == 1


def test_capsule_with_another_name_is_refused_and_left_alone():
    producer = FakeCudaProducer((2, 2), capsule_name=other_capsule_name())
    with pytest.raises(BackendContractError, match="did not return an unused 'dltensor' capsule"):
        with _borrow(producer):
            pass
    assert producer.deleter_calls == 0
    assert capsule_is_named(producer.capsule, b"something_else")


def test_exporter_returning_something_else_than_a_capsule_is_refused():
    class NotACapsule:
        def __dlpack_device__(self):
            return (_dlpack.kDLCUDA, 0)

        def __dlpack__(self, *, stream=None):
            return object()

    with pytest.raises(BackendContractError, match="did not return an unused 'dltensor' capsule"):
        with _borrow(NotACapsule()):
            pass


def test_every_borrow_exports_anew_and_is_released_once():
    producer = FakeCudaProducer((4, 2))
    for _ in range(3):
        with _borrow(producer, engine_stream=0xABC0) as view:
            assert (view.data_pointer, view.shape) == (FAKE_DEVICE_ADDRESS, (4, 2))
    assert producer.streams == [0xABC0] * 3
    assert producer.deleter_calls == 3


def test_check_dlpack_device_refuses_before_export():
    producer = FakeCudaProducer((3, 4), device=(_dlpack.kDLCUDA, 1))
    _dlpack.check_dlpack_device(producer, "X", 1)
    with pytest.raises(BackendContractError, match="CUDA device 1.*device 0"):
        _dlpack.check_dlpack_device(producer, "X", 0)
    with pytest.raises(BackendContractError, match="does not implement the DLPack protocol"):
        _dlpack.check_dlpack_device(np.zeros(3).tolist(), "X", 0)
    assert producer.streams == []


def test_describe_tensor_reads_shape_strides_and_offset():
    producer = FakeCudaProducer((5, 1, 3), strides=(3, 7, 1), byte_offset=16)
    view = _dlpack.describe_tensor(producer.managed.dl_tensor, "X", device_id=0, bits=64, ndim=3)
    assert view.data_pointer == FAKE_DEVICE_ADDRESS + 16
    assert view.shape == (5, 1, 3) and all(type(extent) is int for extent in view.shape)


# ------------------------------------------------------------------ CuPy batches without DLPack
class _FakeCupy:
    """The few CuPy attributes CupyBatchReader reads, with a log of the stream calls."""

    def __init__(self, current_stream: int):
        fake = self
        self.calls: list = []
        self.current = current_stream

        class ndarray:  # noqa: N801 (CuPy's name)
            def __init__(self, shape, *, dtype=np.float64, address=0x1000, contiguous=True,
                         device=0):
                self.shape, self.ndim, self.dtype = shape, len(shape), np.dtype(dtype)
                self.flags = type("Flags", (), {"c_contiguous": contiguous})()
                self.device = type("Device", (), {"id": device})()
                self.data = type("Pointer", (), {"ptr": address})()

        class Event:
            def __init__(self, disable_timing):
                self.ptr = 0xE0
                fake.calls.append(("event", disable_timing))

        class runtime:  # noqa: N801 (CuPy's name)
            @staticmethod
            def eventRecord(event, stream):  # noqa: N802 (CuPy's name)
                fake.calls.append(("record", event, stream))

            @staticmethod
            def streamWaitEvent(stream, event):  # noqa: N802 (CuPy's name)
                fake.calls.append(("wait", stream, event))

        class Device:
            def __init__(self, device_id):
                pass

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

        def get_current_stream(device_id):
            return type("Stream", (), {"ptr": fake.current})()

        self.ndarray = ndarray
        self.cuda = type("cuda", (), {
            "Event": Event, "runtime": runtime, "Device": Device,
            "get_current_stream": staticmethod(get_current_stream),
        })


ENGINE_STREAM = 0x7000


def _reader(monkeypatch, current_stream=0):
    fake = _FakeCupy(current_stream)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return fake, _dlpack.CupyBatchReader(0, ENGINE_STREAM, np.dtype(np.float64))


def test_cupy_batch_is_read_from_its_attributes_and_ordered_once(monkeypatch):
    fake, reader = _reader(monkeypatch, current_stream=0)
    X, y = fake.ndarray((5, 3), address=0x2000), fake.ndarray((5,), address=0x3000)
    assert reader.pointers(X, y, 3) == (0x2000, 0x3000, 5)
    # CuPy's current stream (the default, 0) is not the engine's: one event recorded on it and
    # waited for by the engine's stream, for both arrays.
    assert fake.calls == [("event", True), ("record", 0xE0, 0), ("wait", ENGINE_STREAM, 0xE0)]
    fake.calls.clear()
    assert reader.pointers(X, y, 3) == (0x2000, 0x3000, 5)
    assert [c[0] for c in fake.calls] == ["record", "wait"]  # the event is reused


def test_cupy_batch_on_the_engines_own_stream_needs_no_event(monkeypatch):
    fake, reader = _reader(monkeypatch, current_stream=ENGINE_STREAM)
    X, y = fake.ndarray((4, 2)), fake.ndarray((4,), address=0x1800)
    assert reader.pointers(X, y, 2) == (0x1000, 0x1800, 4)
    assert fake.calls == [("event", True)]


@pytest.mark.parametrize("change", [
    "float32", "fortran", "other device", "misaligned", "columns", "rows", "empty", "y 2-D",
    "numpy",
])
def test_cupy_batch_the_engine_cannot_read_in_place_goes_to_dlpack(monkeypatch, change):
    # None sends the batch to the DLPack borrow, whose checks word every refusal; nothing is
    # ordered for a batch that is not read here.
    fake, reader = _reader(monkeypatch)
    rows = 0 if change == "empty" else 6
    X = fake.ndarray(
        (rows, 3),
        dtype=np.float32 if change == "float32" else np.float64,
        contiguous=change != "fortran",
        device=1 if change == "other device" else 0,
        address=0x1004 if change == "misaligned" else 0x1000,
    )
    y = fake.ndarray((rows, 1) if change == "y 2-D" else (rows + (change == "rows"),))
    if change == "numpy":
        X = np.zeros((rows, 3))
    assert reader.pointers(X, y, 4 if change == "columns" else 3) is None
    assert not [c for c in fake.calls if c[0] in ("record", "wait")]


def test_no_cupy_or_an_engine_on_the_default_stream_means_dlpack(monkeypatch):
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    reader = _dlpack.CupyBatchReader(0, ENGINE_STREAM, np.dtype(np.float64))
    assert reader.pointers(np.zeros((2, 2)), np.zeros(2), 2) is None
    fake = _FakeCupy(0)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    default = _dlpack.CupyBatchReader(0, 0, np.dtype(np.float64))
    assert default.pointers(fake.ndarray((2, 2)), fake.ndarray((2,)), 2) is None
    assert fake.calls == []
