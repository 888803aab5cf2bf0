"""Borrowing device arrays through DLPack, for native_cuda (never a copy, cast or move).

The structs mirror dlpack.h's unversioned ABI (DLDevice, DLDataType, DLTensor,
DLManagedTensor), which every producer returns when the consumer does not ask for a
max_version. The Python protocol followed (array API standard, DLPack Python spec):

  1. ask __dlpack_device__() first, so a wrong device is refused before anything is exported;
  2. call __dlpack__(stream=<the engine's stream>) so the producer orders its pending work
     before the engine's stream (CUDA: 1 means the legacy default stream, so an engine on
     stream 0 asks for 1; 0 itself is not allowed by the spec);
  3. take the capsule named "dltensor" exactly once and rename it "used_dltensor", which tells
     the producer's capsule destructor that the consumer now owns the DLManagedTensor;
  4. keep the producer object referenced while the engine reads the memory, then call the
     managed tensor's deleter exactly once.

Anything that does not match what the engine reads in place (device type and id, dtype,
C-contiguous strides, alignment, shape) is a BackendContractError.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .exceptions import BackendContractError

# DLDeviceType values from dlpack.h (only those named in messages).
kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3
kDLROCM = 10
kDLCUDAManaged = 13
DEVICE_TYPE_NAMES = {
    kDLCPU: "kDLCPU",
    kDLCUDA: "kDLCUDA",
    kDLCUDAHost: "kDLCUDAHost",
    kDLROCM: "kDLROCM",
    kDLCUDAManaged: "kDLCUDAManaged",
}

# DLDataTypeCode values from dlpack.h.
kDLInt = 0
kDLUInt = 1
kDLFloat = 2
kDLBfloat = 4
kDLComplex = 5
kDLBool = 6
_TYPE_CODE_NAMES = {
    kDLInt: "int",
    kDLUInt: "uint",
    kDLFloat: "float",
    kDLBfloat: "bfloat",
    kDLComplex: "complex",
    kDLBool: "bool",
}

CAPSULE_NAME = b"dltensor"
# PyCapsule_SetName stores the pointer, not a copy: the new name must outlive every capsule.
_USED_CAPSULE_NAME = ctypes.create_string_buffer(b"used_dltensor")

# DLPack asks CUDA consumers to pass 1 for the legacy default stream, never 0.
_CUDA_LEGACY_DEFAULT_STREAM = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _Deleter),
]

_pythonapi = ctypes.pythonapi
_PyCapsule_IsValid = _pythonapi.PyCapsule_IsValid
_PyCapsule_IsValid.restype = ctypes.c_int
_PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_PyCapsule_GetPointer = _pythonapi.PyCapsule_GetPointer
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_PyCapsule_SetName = _pythonapi.PyCapsule_SetName
_PyCapsule_SetName.restype = ctypes.c_int
_PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_void_p]


@dataclass(frozen=True)
class BorrowedTensor:
    """What the engine needs of one borrowed array: its first element and its shape."""

    data_pointer: int
    shape: tuple[int, ...]


def dtype_description(code: int, bits: int, lanes: int) -> str:
    name = f"{_TYPE_CODE_NAMES.get(code, f'code{code}')}{bits}"
    return name if lanes == 1 else f"{name}x{lanes}"


def dlpack_stream_argument(engine_stream: int) -> int:
    """The __dlpack__(stream=...) value that names `engine_stream` for a CUDA producer."""
    return _CUDA_LEGACY_DEFAULT_STREAM if engine_stream == 0 else engine_stream


def detach_if_requires_grad(array: Any) -> Any:
    """PyTorch refuses to export tensors that require grad; the engine only reads them."""
    if getattr(array, "requires_grad", False) and callable(getattr(array, "detach", None)):
        return array.detach()
    return array


def check_dlpack_device(array: Any, name: str, device_id: int) -> None:
    """Refuse `array` unless __dlpack_device__() says CUDA device `device_id`."""
    query = getattr(array, "__dlpack_device__", None)
    if query is None or not callable(getattr(array, "__dlpack__", None)):
        raise BackendContractError(
            f"{name}: {type(array).__name__} does not implement the DLPack protocol "
            "(__dlpack__ and __dlpack_device__); pass a NumPy array or a CUDA array such as "
            "CuPy or PyTorch"
        )
    device_type, found_id = (int(value) for value in query())
    _require_device(name, device_type, found_id, device_id)


def _require_device(name: str, device_type: int, found_id: int, device_id: int) -> None:
    if device_type != kDLCUDA:
        kind = DEVICE_TYPE_NAMES.get(device_type, f"device type {device_type}")
        raise BackendContractError(
            f"{name} lives on {kind}, but native_cuda reads device memory in place "
            f"(kDLCUDA, device {device_id}); move it to the GPU or pass a NumPy array"
        )
    if found_id != device_id:
        raise BackendContractError(
            f"{name} is on CUDA device {found_id}, but the engine runs on device {device_id}; "
            "the engine never moves data between devices"
        )


def _consume_capsule(capsule: Any, name: str) -> ctypes.POINTER(DLManagedTensor):
    if not _PyCapsule_IsValid(capsule, CAPSULE_NAME):
        raise BackendContractError(
            f"{name}: __dlpack__() did not return an unused 'dltensor' capsule "
            "(a capsule can be consumed once only)"
        )
    address = _PyCapsule_GetPointer(capsule, CAPSULE_NAME)
    if _PyCapsule_SetName(capsule, ctypes.addressof(_USED_CAPSULE_NAME)) != 0:
        raise BackendContractError(f"{name}: could not mark the DLPack capsule as used")
    return ctypes.cast(address, ctypes.POINTER(DLManagedTensor))


def describe_tensor(
    tensor: DLTensor, name: str, *, device_id: int, bits: int, ndim: int
) -> BorrowedTensor:
    """Check `tensor` against what the engine reads in place; BackendContractError otherwise."""
    _require_device(name, tensor.device.device_type, tensor.device.device_id, device_id)
    dtype = tensor.dtype
    if (dtype.code, dtype.bits, dtype.lanes) != (kDLFloat, bits, 1):
        raise BackendContractError(
            f"{name} has dtype {dtype_description(dtype.code, dtype.bits, dtype.lanes)}, but the "
            f"engine works in float{bits}; device input is never cast: convert it first "
            f"(e.g. x.astype('float{bits}'))"
        )
    if tensor.ndim != ndim:
        raise BackendContractError(f"{name} must be {ndim}-D, got {tensor.ndim}-D")
    shape = tuple(int(tensor.shape[axis]) for axis in range(ndim))
    if tensor.strides:
        expected = 1
        for axis in reversed(range(ndim)):
            # A stride along a length-1 axis is never used to address memory, so producers may
            # report anything there (PyTorch does).
            if shape[axis] != 1 and tensor.strides[axis] != expected:
                strides = tuple(int(tensor.strides[a]) for a in range(ndim))
                raise BackendContractError(
                    f"{name} is not C-contiguous (shape {shape}, strides {strides} in elements); "
                    "device input is never copied: make it contiguous first"
                )
            expected *= shape[axis]
    address = (tensor.data or 0) + int(tensor.byte_offset)
    if address % (bits // 8):
        raise BackendContractError(
            f"{name} starts at address {address:#x}, not aligned to its {bits // 8}-byte elements"
        )
    return BorrowedTensor(data_pointer=address, shape=shape)


@contextlib.contextmanager
def borrow(
    array: Any, name: str, *, device_id: int, engine_stream: int, bits: int, ndim: int
) -> Iterator[BorrowedTensor]:
    """Borrow `array`'s device memory for the duration of the with-block.

    The producer object stays referenced for the whole block and the DLManagedTensor's deleter
    runs exactly once on exit, whether the block (or a check) succeeded or not.
    """
    producer = detach_if_requires_grad(array)
    check_dlpack_device(producer, name, device_id)
    capsule = producer.__dlpack__(stream=dlpack_stream_argument(engine_stream))
    managed = _consume_capsule(capsule, name)
    try:
        yield describe_tensor(
            managed.contents.dl_tensor, name, device_id=device_id, bits=bits, ndim=ndim
        )
    finally:
        deleter = managed.contents.deleter
        if deleter:
            deleter(managed)
