"""Finding, loading and version-checking engine shared libraries.

`load_engine_library("native_cpu" | "native_cuda")` looks in one place only when the
environment names a library (RH_CPU_LIBRARY / RH_CUDA_LIBRARY): an explicit override that fails
must not fall back silently to a different engine. Without an override it tries the libraries
that `pip install .` puts in renewable_huber/_lib. `load_library_path(path)` loads any engine
library (the conformance kit drives third-party engines with it).

Every library is asked rh_cuda_abi_version() before any other call and refused with
BackendUnavailableError unless it answers the binding's ABI_VERSION; only then are the 17
signatures declared. Loaded libraries are cached by resolved path (a shared library cannot be
unloaded portably anyway), and the library found for a kind by the kind and its override
variable's value; failures are not cached, so fixing the environment takes effect.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from pathlib import Path

from . import _abi
from ._backend_facts import FACTS, NATIVE_BACKENDS
from .exceptions import BackendUnavailableError

# native backend -> the environment variable that names its library, and its base file name
ENVIRONMENT_OVERRIDES = {kind: FACTS[kind].library_variable for kind in NATIVE_BACKENDS}
_BASE_NAMES = {kind: FACTS[kind].library_name for kind in NATIVE_BACKENDS}
PACKAGE_LIBRARY_DIR = Path(__file__).resolve().parent / "_lib"

_cache: dict[str, ctypes.CDLL] = {}
# (kind, override or package folder) -> the library load_engine_library found: a cold estimator
# asks for its engine several times per fit, and the path search (is_file, resolve) cost ~0.2 ms
# each.
_found: dict[tuple[str, str], ctypes.CDLL] = {}
_cache_lock = threading.Lock()


def _check_kind(kind: str) -> None:
    if kind not in ENVIRONMENT_OVERRIDES:
        raise BackendUnavailableError(
            f"unknown native engine {kind!r}; expected one of {sorted(ENVIRONMENT_OVERRIDES)}"
        )


def library_candidates(kind: str) -> list[Path]:
    """Paths load_engine_library(kind) would try, in order."""
    _check_kind(kind)
    override = os.environ.get(ENVIRONMENT_OVERRIDES[kind])
    if override:
        return [Path(override)]
    return [PACKAGE_LIBRARY_DIR / name for name in library_file_names(kind)]


def library_file_names(kind: str, platform: str = sys.platform) -> list[str]:
    """The file names of `kind`'s engine on `platform`: the one carrying the ABI major (what a
    wheel installs) first, then the development name a build folder also has."""
    base = _BASE_NAMES[kind]
    if platform.startswith("win"):
        return [f"{base}.dll", f"lib{base}.dll"]
    if platform == "darwin":
        return [f"lib{base}.{_abi.ABI_VERSION}.dylib", f"lib{base}.dylib"]
    return [f"lib{base}.so.{_abi.ABI_VERSION}", f"lib{base}.so"]


def load_engine_library(kind: str) -> ctypes.CDLL:
    """The bound engine library for `kind`; BackendUnavailableError naming every path tried."""
    _check_kind(kind)
    key = (kind, os.environ.get(ENVIRONMENT_OVERRIDES[kind]) or str(PACKAGE_LIBRARY_DIR))
    found = _found.get(key)
    if found is not None:
        return found
    candidates = library_candidates(kind)
    failures = []
    for path in candidates:
        if not path.is_file():
            failures.append(f"{path} (no such file)")
            continue
        try:
            library = load_library_path(path)
        except BackendUnavailableError as error:
            failures.append(f"{path} ({error})")
            continue
        _found[key] = library
        return library
    override = ENVIRONMENT_OVERRIDES[kind]
    origin = (
        f"from ${override}" if os.environ.get(override) else f"(set {override} to choose one)"
    )
    raise BackendUnavailableError(
        f"{kind} engine library not loaded {origin}; tried: " + "; ".join(failures)
    )


def load_library_path(path: str | os.PathLike) -> ctypes.CDLL:
    """Load, version-check and bind the engine library at `path` (cached by resolved path)."""
    resolved = str(Path(path).resolve())
    with _cache_lock:
        cached = _cache.get(resolved)
        if cached is not None:
            return cached
        try:
            with _bounded_openmp_spinning():
                library = ctypes.CDLL(resolved)
        except OSError as error:
            raise BackendUnavailableError(f"cannot load {resolved}: {error}") from error
        _require_abi_version(library, resolved)
        _abi.bind(library)
        _cache[resolved] = library
        return library


@contextlib.contextmanager
def _bounded_openmp_spinning():
    """GOMP_SPINCOUNT=10000 while the engine (and with it libgomp) is loaded, then the
    environment exactly as it was.

    libgomp's default lets idle threads spin for a long time between parallel regions; on a
    small or shared machine a spinning thread steals the core the other one needs, and
    librh_cpu with 2 threads ran 4-5x slower than with 1 (reference shape, 2 busy cores).
    libgomp reads the variable once, when it is loaded, so it is set only around that load and
    removed afterwards: the process environment (and what child processes inherit) is never
    changed. A GOMP_SPINCOUNT the user set is used as it is; where libgomp was already loaded
    by another library, its setting stands (docs/decisions.md, "Threads").
    """
    if "GOMP_SPINCOUNT" in os.environ:
        yield
        return
    os.environ["GOMP_SPINCOUNT"] = "10000"
    try:
        yield
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)


def _require_abi_version(library: ctypes.CDLL, path: str) -> None:
    # Declared on a fresh function pointer: bind() must not run before the version is known,
    # since a different ABI may give the other symbols different signatures.
    try:
        abi_version = library.rh_cuda_abi_version
    except AttributeError as error:
        raise BackendUnavailableError(
            f"{path} does not export rh_cuda_abi_version; it is not an rh_cuda engine"
        ) from error
    abi_version.restype = ctypes.c_uint32
    abi_version.argtypes = []
    found = int(abi_version())
    if found != _abi.ABI_VERSION:
        raise BackendUnavailableError(
            f"{path} implements rh_cuda ABI version {found}, but this renewable_huber binding "
            f"needs version {_abi.ABI_VERSION}; install an engine built from the same release"
        )
