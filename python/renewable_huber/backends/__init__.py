"""Backend registry: which backends exist, which work here, how "auto" resolves, and
construction of the chosen one. Optional backends are imported only when asked for."""

from __future__ import annotations

import os
import warnings

from .._backend_facts import BACKENDS, FACTS
from .._validation import UnknownBackendError, validate_backend_name
from ..exceptions import BackendUnavailableError, ValidationError, caller_stacklevel
from .base import Backend

_DEVICES = ("auto", "cpu", "cuda")


def _native_module():
    from . import native

    return native


def unavailable_reason(name: str) -> str | None:
    """Why backend `name` cannot be used on this machine, or None when it can."""
    if name not in BACKENDS:
        raise UnknownBackendError(f"unknown backend {name!r}; known: {list(BACKENDS)}")
    if name == "numpy":
        return None
    if name == "cupy":
        from .cupy_backend import cupy_unavailable_reason

        return cupy_unavailable_reason()
    try:
        native = _native_module()
    except ImportError as error:
        return f"the native engine binding could not be imported ({error})"
    return native.unavailable_reason(name)


def _engine_was_expected(name: str) -> bool:
    """A native engine is expected when the environment names its library or an installed
    library file exists: falling back from it then hides a broken setup, where a NumPy-only
    install falling back is the documented choice of "auto"."""
    variable = FACTS[name].library_variable
    if variable is None:
        return False
    from .. import _loader

    if os.environ.get(variable):
        return True
    return any(path.is_file() for path in _loader.library_candidates(name))


def choose_backend(backend: str, device: str) -> tuple[str, str]:
    """Resolve the backend/device request to (backend name, device), checking availability.

    "auto" never picks CUDA unless device="cuda": on the CPU it prefers native_cpu when its
    library loads, else numpy; on CUDA native_cuda, else cupy. Falling back from a native engine
    whose library is installed or named by the environment warns (RuntimeWarning), since that
    library failed to load. A backend that cannot run on the requested device is unavailable
    there (BackendUnavailableError), as in renewable-huber 0.7.
    """
    if device not in _DEVICES:
        raise ValidationError(f"device must be one of {list(_DEVICES)}, got {device!r}")
    if backend == "auto":
        candidates = ("native_cuda", "cupy") if device == "cuda" else ("native_cpu", "numpy")
        reasons = []
        for name in candidates:
            reason = unavailable_reason(name)
            if reason is None:
                if reasons and _engine_was_expected(candidates[0]):
                    warnings.warn(
                        f"backend='auto' uses {name}: {reasons[0]} (fix the library, or choose "
                        f"backend={name!r} to silence this)",
                        RuntimeWarning,
                        stacklevel=caller_stacklevel(),
                    )
                return name, FACTS[name].device
            reasons.append(f"{candidates[0] if not reasons else name}: {reason}")
        raise BackendUnavailableError(
            f"no backend is available for device={device!r} ({'; '.join(reasons)})"
        )
    validate_backend_name(backend)
    native_device = FACTS[backend].device
    if device not in ("auto", native_device):
        raise BackendUnavailableError(
            f"backend {backend!r} runs on device {native_device!r}, not {device!r}; "
            f"use device='{native_device}' or 'auto', or another backend"
        )
    reason = unavailable_reason(backend)
    if reason is not None:
        raise BackendUnavailableError(f"backend {backend!r} is unavailable: {reason}")
    return backend, native_device


def create_backend(
    name: str,
    *,
    dtype,
    n_parameters: int,
    n_jobs: int | None,
    cuda_graphs: bool,
    cuda_fast_math: bool,
    available: bool = False,
) -> Backend:
    """Construct backend `name` for `n_parameters` parameters (P, intercept included).

    available=True: the caller has just had `name` from choose_backend, which asked
    unavailable_reason; asking again would repeat the library's probes (a new stream's
    first batch makes both calls).
    """
    if not available:
        reason = unavailable_reason(name)
        if reason is not None:
            raise BackendUnavailableError(f"backend {name!r} is unavailable: {reason}")
    if name == "numpy":
        from .numpy_backend import NumpyBackend

        return NumpyBackend(dtype=dtype, n_parameters=n_parameters)
    if name == "cupy":
        from .cupy_backend import CupyBackend

        return CupyBackend(dtype=dtype, n_parameters=n_parameters)
    return _native_module().NativeBackend(
        name,
        dtype=dtype,
        n_parameters=n_parameters,
        n_jobs=n_jobs,
        cuda_graphs=cuda_graphs,
        cuda_fast_math=cuda_fast_math,
    )


__all__ = ["BACKENDS", "Backend", "choose_backend", "create_backend", "unavailable_reason"]
