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

import ctypes
import sys
from typing import Any, NamedTuple

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

# ctypes.pythonapi raises the Python exception a function sets (PyCapsule_GetPointer: ValueError).
_pythonapi = ctypes.pythonapi
_PyCapsule_GetPointer = _pythonapi.PyCapsule_GetPointer
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_PyCapsule_SetName = _pythonapi.PyCapsule_SetName
_PyCapsule_SetName.restype = ctypes.c_int
_PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_void_p]
_USED_CAPSULE_NAME_ADDRESS = ctypes.addressof(_USED_CAPSULE_NAME)


class BorrowedTensor(NamedTuple):
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


def check_dlpack_device(array: Any, name: str, device_id: int):
    """Refuse `array` unless __dlpack_device__() says CUDA device `device_id`; returns the
    array's bound __dlpack__, for the export that follows."""
    query = getattr(array, "__dlpack_device__", None)
    export = None if query is None else getattr(array, "__dlpack__", None)
    if not callable(export):
        raise BackendContractError(
            f"{name}: {type(array).__name__} does not implement the DLPack protocol "
            "(__dlpack__ and __dlpack_device__); pass a NumPy array or a CUDA array such as "
            "CuPy or PyTorch"
        )
    device_type, found_id = map(int, query())
    _require_device(name, device_type, found_id, device_id)
    return export


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


def _consume_capsule(capsule: Any, name: str) -> DLManagedTensor:
    """The capsule's DLManagedTensor, read in place; the capsule is renamed "used_dltensor"."""
    try:
        # Checks what PyCapsule_IsValid does (a capsule, named "dltensor", non-NULL) and raises
        # ValueError otherwise: one call instead of two.
        address = _PyCapsule_GetPointer(capsule, CAPSULE_NAME)
    except ValueError:
        raise BackendContractError(
            f"{name}: __dlpack__() did not return an unused 'dltensor' capsule "
            "(a capsule can be consumed once only)"
        ) from None
    if _PyCapsule_SetName(capsule, _USED_CAPSULE_NAME_ADDRESS) != 0:
        raise BackendContractError(f"{name}: could not mark the DLPack capsule as used")
    return DLManagedTensor.from_address(address)


def _signed_element_stride(stride: int, itemsize: int) -> int:
    """The stride a producer meant. Some producers (CuPy) divide a negative byte stride by the
    element size in unsigned arithmetic and export (2**64 + bytes) // itemsize, e.g.
    2305843009213693948 for -4 float64 elements; such a value is mapped back to its sign."""
    wrapped = stride * itemsize - 2**64
    if stride > 0 and -(2**63) <= wrapped < 0 and wrapped % itemsize == 0:
        return wrapped // itemsize
    return stride


def _not_contiguous(name: str, shape: tuple, strides, itemsize: int) -> str:
    signed = tuple(_signed_element_stride(int(s), itemsize) for s in strides)
    note = ""
    if signed != tuple(strides):
        note = (f"; the producer exported {tuple(strides)}, a negative byte stride divided as "
                "an unsigned number")
    hint = " (a reversed view)" if any(s < 0 for s in signed) else ""
    return (f"{name} is not C-contiguous (shape {shape}, strides {signed} in elements{note})"
            f"{hint}; device input is never copied: make it contiguous first "
            f"(e.g. {name}.copy())")


def describe_tensor(
    tensor: DLTensor, name: str, *, device_id: int, bits: int, ndim: int
) -> BorrowedTensor:
    """Check `tensor` against what the engine reads in place; BackendContractError otherwise."""
    # Every ctypes field read builds a new Python object: each field is read once.
    device = tensor.device
    _require_device(name, device.device_type, device.device_id, device_id)
    dtype = tensor.dtype
    code, dtype_bits, lanes = dtype.code, dtype.bits, dtype.lanes
    if code != kDLFloat or dtype_bits != bits or lanes != 1:
        raise BackendContractError(
            f"{name} has dtype {dtype_description(code, dtype_bits, lanes)}, but the "
            f"engine works in float{bits}; device input is never cast: convert it first "
            f"(e.g. x.astype('float{bits}'))"
        )
    found_ndim = tensor.ndim
    if found_ndim != ndim:
        raise BackendContractError(f"{name} must be {ndim}-D, got {found_ndim}-D")
    shape = tuple(tensor.shape[:ndim])
    strides_pointer = tensor.strides
    if strides_pointer:
        strides = strides_pointer[:ndim]
        expected = 1
        for axis in range(ndim - 1, -1, -1):
            # A stride along a length-1 axis is never used to address memory, so producers may
            # report anything there (PyTorch does).
            if shape[axis] != 1 and strides[axis] != expected:
                raise BackendContractError(_not_contiguous(name, shape, strides, bits // 8))
            expected *= shape[axis]
    address = (tensor.data or 0) + tensor.byte_offset
    if address % (bits // 8):
        raise BackendContractError(
            f"{name} starts at address {address:#x}, not aligned to its {bits // 8}-byte elements"
        )
    return BorrowedTensor(address, shape)


class Borrow:
    """The context manager borrow() returns; entering it exports and checks the array.

    A small class rather than contextlib.contextmanager: this runs for every array of every
    batch, and a generator-based context manager costs several times more.
    """

    __slots__ = ("_array", "_name", "_device_id", "_engine_stream", "_bits", "_ndim",
                 "_producer", "_capsule", "_managed")

    def __init__(
        self, array: Any, name: str, device_id: int, engine_stream: int, bits: int, ndim: int
    ):
        self._array = array
        self._name = name
        self._device_id = device_id
        self._engine_stream = engine_stream
        self._bits = bits
        self._ndim = ndim
        self._producer = self._capsule = self._managed = None

    def __enter__(self) -> BorrowedTensor:
        name = self._name
        producer = detach_if_requires_grad(self._array)
        export = check_dlpack_device(producer, name, self._device_id)
        capsule = export(stream=dlpack_stream_argument(self._engine_stream))
        managed = _consume_capsule(capsule, name)
        # From here the DLManagedTensor is ours: its deleter runs exactly once, in _release.
        self._producer, self._capsule, self._managed = producer, capsule, managed
        try:
            return describe_tensor(
                managed.dl_tensor, name, device_id=self._device_id, bits=self._bits,
                ndim=self._ndim,
            )
        except BaseException:
            self._release()
            raise

    def __exit__(self, *exc_info) -> None:
        self._release()

    def _release(self) -> None:
        managed, self._managed = self._managed, None
        if managed is None:
            return
        deleter = managed.deleter
        if deleter:
            deleter(managed)
        # The producer (and its capsule) stayed referenced until the engine was done reading.
        self._producer = self._capsule = None


def borrow(
    array: Any, name: str, *, device_id: int, engine_stream: int, bits: int, ndim: int
) -> Borrow:
    """Borrow `array`'s device memory for the duration of a with-block:
    `with borrow(...) as view:` gives the BorrowedTensor.

    The producer object stays referenced for the whole block and the DLManagedTensor's deleter
    runs exactly once on exit, whether the block (or a check) succeeded or not.
    """
    return Borrow(array, name, device_id, engine_stream, bits, ndim)


class CupyBatchReader:
    """The addresses of a CuPy X and y that need nothing the DLPack path would refuse, read from
    the arrays' own attributes instead of two DLPack borrows (on an H200 host the Python side of
    a 65,536 x 32 float64 batch fell from 67.0 to 32.8 us: docs/decisions.md, "Device input from
    CuPy").

    `pointers` answers None for anything else (another array library, a weight vector, a wrong
    dtype, device, shape or layout, a misaligned start, no rows): the caller then borrows
    through DLPack, whose checks and messages stay the one home of every refusal.

    Ordering is what a DLPack export asked for the engine's stream gives: when CuPy's current
    stream on the engine's device is not the engine's own, one event recorded on it and waited
    for by the engine's stream orders the work that produced X and y before the engine reads
    them (one event per batch for both arrays, reused across batches). The engine reads the
    arrays only during the update call, which returns after its stream synchronises, while the
    caller still holds them.
    """

    __slots__ = ("_device_id", "_engine_stream", "_dtype", "_itemsize", "_cupy", "_event",
                 "_disabled")

    def __init__(self, device_id: int, engine_stream: int, dtype):
        self._device_id = device_id
        self._engine_stream = engine_stream
        self._dtype = dtype
        self._itemsize = dtype.itemsize
        self._cupy = self._event = None
        # An engine on the legacy default stream (0) is left to DLPack, whose stream protocol
        # names that stream 1 to the producer.
        self._disabled = engine_stream == 0

    def _prepare(self, cupy) -> bool:
        """The event, and a check that this CuPy has the calls `pointers` makes; False (and
        DLPack from then on) where it has not."""
        try:
            with cupy.cuda.Device(self._device_id):
                self._event = cupy.cuda.Event(disable_timing=True)
            cupy.cuda.get_current_stream(self._device_id)
            runtime = cupy.cuda.runtime
            usable = hasattr(runtime, "eventRecord") and hasattr(runtime, "streamWaitEvent")
        except Exception:
            usable = False
        if not usable:
            self._disabled = True
            return False
        self._cupy = cupy
        return True

    def pointers(self, X, y, n_columns: int) -> tuple[int, int, int] | None:
        """(X's address, y's address, rows) when both are CuPy arrays the engine reads in
        place as they are, after ordering their producer's stream before the engine's; else
        None."""
        if self._disabled:
            return None
        cupy = self._cupy
        if cupy is None:
            cupy = sys.modules.get("cupy")
            if cupy is None or type(X) is not getattr(cupy, "ndarray", None):
                return None
            if not self._prepare(cupy):
                return None
        array = cupy.ndarray
        if type(X) is not array or type(y) is not array:
            return None
        dtype = self._dtype
        if X.dtype != dtype or y.dtype != dtype or X.ndim != 2 or y.ndim != 1:
            return None
        n, columns = X.shape
        if n == 0 or columns != n_columns or y.shape[0] != n:
            return None
        if not (X.flags.c_contiguous and y.flags.c_contiguous):
            return None
        device_id = self._device_id
        if X.device.id != device_id or y.device.id != device_id:
            return None
        x_pointer, y_pointer = X.data.ptr, y.data.ptr
        if x_pointer % self._itemsize or y_pointer % self._itemsize:
            return None
        producer = cupy.cuda.get_current_stream(device_id).ptr
        if producer != self._engine_stream:
            runtime, event = cupy.cuda.runtime, self._event.ptr
            runtime.eventRecord(event, producer)
            runtime.streamWaitEvent(self._engine_stream, event)
        return x_pointer, y_pointer, n
