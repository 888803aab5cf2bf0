"""Input rules for device arrays, checked without a GPU: objects that report a CUDA device
through DLPack, with NumPy's dtypes (as CuPy has) or PyTorch-style dtype objects. The dtype
names are remembered per dtype object; these tests pin that the answers never change."""

from __future__ import annotations

import numpy as np
import pytest

from renewable_huber import _validation
from renewable_huber._validation import validate_batch
from renewable_huber.exceptions import BackendContractError, ValidationError


class TorchStyleDtype:
    """Spelled like PyTorch's dtypes ("torch.float64"), which NumPy cannot interpret."""

    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"


class DeviceArray:
    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = dtype

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, *, stream=None):
        raise AssertionError("validation must not export")


def validate(X, y, dtype="float64", sample_weight=None):
    return validate_batch(
        X, y, sample_weight, dtype=np.dtype(dtype), accepts_device=True,
        backend_name="native_cuda", n_features_expected=None, engine_checks_finite=True,
    )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_device_arrays_in_the_working_dtype_pass_untouched(dtype):
    X, y = DeviceArray((5, 2), np.dtype(dtype)), DeviceArray((5,), np.dtype(dtype))
    for _ in range(3):
        batch = validate(X, y, dtype)
        assert batch.X is X and batch.y is y and batch.on_device
        assert batch.sample_weight is None and batch.feature_names is None


def test_an_equal_dtype_object_that_is_not_numpys_singleton_is_accepted():
    # Big- and little-endian float64 are both named float64, as before.
    swapped = np.dtype("float64").newbyteorder()
    assert swapped is not np.dtype("float64")
    batch = validate(DeviceArray((5, 2), swapped), DeviceArray((5,), swapped))
    assert batch.on_device


@pytest.mark.parametrize("repeat", range(3))
def test_wrong_device_dtype_is_a_contract_error_every_time(repeat):
    X = DeviceArray((5, 2), np.dtype("float32"))
    with pytest.raises(BackendContractError) as caught:
        validate(X, DeviceArray((5,), np.dtype("float32")))
    assert str(caught.value) == (
        "X is a device array of dtype float32 but the estimator works in float64; device input "
        "is never cast: convert it on the device first (e.g. X.astype('float64')) or set "
        "dtype='float32'"
    )


def test_complex_device_array_is_a_validation_error():
    message = r"^Complex data not supported: y is complex \(complex128\); only real"
    with pytest.raises(ValidationError, match=message):
        validate(DeviceArray((5, 2), np.dtype("float64")),
                 DeviceArray((5,), np.dtype("complex128")))


def test_torch_style_dtypes_are_named_by_their_spelling():
    float64, float32, complex64 = (TorchStyleDtype(n) for n in ("float64", "float32", "complex64"))
    for _ in range(3):
        batch = validate(DeviceArray((4, 3), float64), DeviceArray((4,), float64))
        assert batch.on_device
        with pytest.raises(BackendContractError, match="device array of dtype float32 .* float64"):
            validate(DeviceArray((4, 3), float32), DeviceArray((4,), float64))
        with pytest.raises(BackendContractError, match="y is a device array of dtype float64 .*"
                                                       "works in float32"):
            validate(DeviceArray((4, 3), float32), DeviceArray((4,), float64), dtype="float32")
        with pytest.raises(ValidationError, match=r"X is complex \(complex64\)"):
            validate(DeviceArray((4, 3), complex64), DeviceArray((4,), float64))


def test_remembered_names_are_bounded_and_stay_right():
    dtypes = [TorchStyleDtype(f"float{bits}") for bits in (32, 64) for _ in range(100)]
    for dtype in dtypes:
        assert _validation._dtype_name(dtype) == dtype.name
    assert len(_validation._DTYPE_NAMES) <= _validation._DTYPE_NAMES_LIMIT
    for dtype in dtypes:
        assert _validation._dtype_name(dtype) == dtype.name


def test_a_reused_identity_is_never_taken_for_the_remembered_object():
    first = TorchStyleDtype("float32")
    assert _validation._dtype_name(first) == "float32"
    # Another object at the remembered identity would need the first one gone; the memo holds
    # it, so an equal identity always means the same object.
    if id(first) in _validation._DTYPE_NAMES:
        assert _validation._DTYPE_NAMES[id(first)][0] is first
    del first
    second = TorchStyleDtype("float64")
    assert _validation._dtype_name(second) == "float64"


class InterfaceArray(DeviceArray):
    """A device array that exposes a CUDA array interface at a given address; any library
    call on it fails the test (the alignment check must come first)."""

    def __init__(self, shape, dtype, address):
        super().__init__(shape, dtype)
        self.__cuda_array_interface__ = {
            "shape": self.shape, "typestr": np.dtype(dtype).str, "data": (address, False),
            "version": 3,
        }


InterfaceArray.__cuda_array_interface__ = None  # found on the type, as CuPy's is


@pytest.mark.parametrize("which", ["X", "y", "sample_weight"])
def test_a_misaligned_device_array_is_refused_before_any_kernel_runs(which):
    aligned = 0x7F0000000000
    arrays = {"X": InterfaceArray((5, 2), np.dtype("float64"), aligned),
              "y": InterfaceArray((5,), np.dtype("float64"), aligned + 64),
              "sample_weight": InterfaceArray((5,), np.dtype("float64"), aligned + 128)}
    arrays[which] = InterfaceArray(arrays[which].shape, np.dtype("float64"),
                                   arrays[which].__cuda_array_interface__["data"][0] + 1)
    with pytest.raises(BackendContractError, match=f"^{which} is a device array at address "
                                                   r"0x[0-9a-f]+, not aligned to its 8-byte"):
        validate(arrays["X"], arrays["y"], sample_weight=arrays["sample_weight"])


class _Pointer:
    def __init__(self, ptr):
        self.ptr = ptr


class CupyLike(DeviceArray):
    """CuPy's layout: data.ptr and itemsize; its CUDA array interface would synchronise, so
    reading it fails the test."""

    def __init__(self, shape, dtype, address):
        super().__init__(shape, dtype)
        self.data = _Pointer(address)
        self.itemsize = np.dtype(dtype).itemsize

    @property
    def __cuda_array_interface__(self):
        raise AssertionError("the alignment check must not synchronise through the interface")


class TorchLike(DeviceArray):
    def __init__(self, shape, dtype, address):
        super().__init__(shape, dtype)
        self._address = address

    def data_ptr(self):
        return self._address

    def element_size(self):
        return np.dtype(self.dtype).itemsize


@pytest.mark.parametrize("kind", [CupyLike, TorchLike])
def test_alignment_is_read_from_the_library_attributes_without_a_sync(kind):
    aligned = 0x7F0000000000
    X = kind((5, 2), np.dtype("float32"), aligned + 2)
    y = kind((5,), np.dtype("float32"), aligned)
    with pytest.raises(BackendContractError, match="^X is a device array .* 4-byte elements"):
        validate(X, y, "float32")


class PlainCupy(CupyLike):
    """Stands for cupy.ndarray itself once registered as the `cupy` module's ndarray, so that
    validation takes its branch for plain CuPy arrays."""

    def reshape(self, *shape):
        return PlainCupy((self.shape[0],), self.dtype, self.data.ptr)


def _outcome(X, y, accepts_device=True):
    """What validate_batch does with (X, y): the batch's fields, or the error, and warnings."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            batch = validate_batch(
                X, y, None, dtype=np.dtype("float64"), accepts_device=accepts_device,
                backend_name="native_cuda", n_features_expected=2, engine_checks_finite=True,
            )
            result = (batch.X is X, batch.y.shape, batch.feature_names, batch.on_device)
        except Exception as error:  # compared, never swallowed: both sides must match
            result = (type(error), str(error))
    return result, [str(w.message) for w in caught]


def _c(shape, dtype="float64", offset=0):
    return PlainCupy(shape, np.dtype(dtype), 0x7F0000000000 + offset)


@pytest.mark.parametrize(
    "X, y, accepts_device",
    [
        (_c((5, 2)), _c((5,)), True),
        (_c((5, 2)), _c((5, 1)), True),
        (_c((5, 2), "float32"), _c((5,)), True),
        (_c((5, 2)), _c((5,), "float32"), True),
        (_c((5, 2), offset=4), _c((5,)), True),
        (_c((5, 2)), _c((5,), offset=4), True),
        (_c((5, 3)), _c((5,)), True),
        (_c((5,)), _c((5,)), True),
        (_c((5, 2)), _c((4,)), True),
        (_c((5, 2)), _c((5, 2)), True),
        (_c((5, 2)), np.ones(5), True),
        (np.ones((5, 2)), _c((5,)), True),
        (_c((5, 2)), _c((5,)), False),
    ],
    ids=["valid", "column-y", "X-dtype", "y-dtype", "X-misaligned", "y-misaligned", "X-columns",
         "X-1d", "y-length", "y-2d", "host-y", "host-X", "host-backend"],
)
def test_plain_cupy_arrays_get_the_answers_of_the_general_checks(monkeypatch, X, y,
                                                                 accepts_device):
    import sys
    import types

    general = _outcome(X, y, accepts_device)  # PlainCupy is not cupy.ndarray here
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(ndarray=PlainCupy))
    assert _validation._plain_cupy_type() is PlainCupy
    assert _outcome(X, y, accepts_device) == general
