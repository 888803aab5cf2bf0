"""The DLPack borrowing rules, checked without a GPU: hand-built DLManagedTensors in real
PyCapsules stand in for a CUDA producer, and NumPy's own __dlpack__ gives a genuine CPU tensor
that native_cuda must refuse."""

from __future__ import annotations

import ctypes
import sys

import numpy as np
import pytest

from renewable_huber import _dlpack
from renewable_huber.exceptions import BackendContractError

_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_PyCapsule_IsValid = ctypes.pythonapi.PyCapsule_IsValid
_PyCapsule_IsValid.restype = ctypes.c_int
_PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_CAPSULE_NAME = ctypes.create_string_buffer(b"dltensor")

FAKE_DEVICE_ADDRESS = 0x7F0000000000


class FakeCudaProducer:
    """A DLPack producer claiming CUDA memory at a fake address (never dereferenced)."""

    def __init__(self, shape, *, bits=64, code=_dlpack.kDLFloat, strides=None, byte_offset=0,
                 device=(_dlpack.kDLCUDA, 0), exported_device=None, data=FAKE_DEVICE_ADDRESS):
        self.device = device
        ndim = len(shape)
        self._shape = (ctypes.c_int64 * ndim)(*shape)
        self._strides = (ctypes.c_int64 * ndim)(*strides) if strides is not None else None
        self.deleter_calls = 0
        self.streams = []
        self._deleter = _dlpack._Deleter(self._delete)
        exported = exported_device or device
        self.managed = _dlpack.DLManagedTensor(
            dl_tensor=_dlpack.DLTensor(
                data=data,
                device=_dlpack.DLDevice(*exported),
                ndim=ndim,
                dtype=_dlpack.DLDataType(code, bits, 1),
                shape=self._shape,
                strides=self._strides,
                byte_offset=byte_offset,
            ),
            deleter=self._deleter,
        )
        self.capsule = None

    def _delete(self, managed):
        self.deleter_calls += 1

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None):
        self.streams.append(stream)
        self.capsule = _PyCapsule_New(
            ctypes.addressof(self.managed), ctypes.addressof(_CAPSULE_NAME), None
        )
        return self.capsule


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
    assert [(name, getattr(_dlpack.DLTensor, name).offset) for name, _ in _dlpack.DLTensor._fields_] == [
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
    assert _PyCapsule_IsValid(producer.capsule, b"used_dltensor") == 1
    assert _PyCapsule_IsValid(producer.capsule, b"dltensor") == 0


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
