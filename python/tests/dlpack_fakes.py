"""A DLPack producer standing in for a CUDA array, without a GPU: a hand-built DLManagedTensor
in a real "dltensor" PyCapsule per __dlpack__ call, with a Python deleter that records its calls.
Its memory lives at a fake address and is never dereferenced."""

from __future__ import annotations

import ctypes

import numpy as np

from renewable_huber import _dlpack

_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_PyCapsule_IsValid = ctypes.pythonapi.PyCapsule_IsValid
_PyCapsule_IsValid.restype = ctypes.c_int
_PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
# PyCapsule_New keeps the pointer: the names must outlive every capsule.
_CAPSULE_NAME = ctypes.create_string_buffer(b"dltensor")
_OTHER_CAPSULE_NAME = ctypes.create_string_buffer(b"something_else")

FAKE_DEVICE_ADDRESS = 0x7F0000000000


def capsule_is_named(capsule, name: bytes) -> bool:
    return _PyCapsule_IsValid(capsule, name) == 1


class FakeCudaProducer:
    """A DLPack producer claiming CUDA memory at a fake address.

    shape and dtype are what validation reads (NumPy's dtype for float tensors, as CuPy does);
    `device` is what __dlpack_device__ says, `exported_device` what the tensor itself says.
    deleter_calls counts the deleter, deleted_pointers records the pointer it was given, and
    `streams` the stream argument of every __dlpack__ call.
    """

    def __init__(self, shape, *, bits=64, code=_dlpack.kDLFloat, strides=None, byte_offset=0,
                 device=(_dlpack.kDLCUDA, 0), exported_device=None, data=FAKE_DEVICE_ADDRESS,
                 capsule_name=_CAPSULE_NAME):
        self.device = device
        self.shape = tuple(shape)
        kind = "float" if code == _dlpack.kDLFloat else "int"
        self.dtype = np.dtype(f"{kind}{bits}")
        ndim = len(shape)
        self._shape = (ctypes.c_int64 * ndim)(*shape)
        self._strides = (ctypes.c_int64 * ndim)(*strides) if strides is not None else None
        self.deleter_calls = 0
        self.deleted_pointers = []
        self.streams = []
        self._deleter = _dlpack._Deleter(self._delete)
        self._capsule_name = capsule_name
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

    @property
    def managed_address(self) -> int:
        return ctypes.addressof(self.managed)

    def _delete(self, managed):
        self.deleter_calls += 1
        self.deleted_pointers.append(ctypes.cast(managed, ctypes.c_void_p).value)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None):
        self.streams.append(stream)
        self.capsule = _PyCapsule_New(
            ctypes.addressof(self.managed), ctypes.addressof(self._capsule_name), None
        )
        return self.capsule


def other_capsule_name():
    """A capsule name that is not "dltensor", for producers that export something else."""
    return _OTHER_CAPSULE_NAME
