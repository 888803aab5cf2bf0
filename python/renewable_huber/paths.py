"""Where an installed wheel keeps what C and C++ builds need, as pybind11 and NumPy tell it:

    cmake -DCMAKE_PREFIX_PATH="$(renewable-huber info --cmake-dir)"
    cc -I"$(python -c 'import renewable_huber; print(renewable_huber.get_include())')" ...

A wheel holds the engines in renewable_huber/_lib (librh_cpu.so.2, and librh_cuda.so.2 in a CUDA
wheel), the header in renewable_huber/include and the CMake package renewable_huber in
renewable_huber/cmake; `renewable-huber info --include-dir` and `--cmake-dir` print the same.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def get_include() -> str:
    """The folder holding rh_cuda.h."""
    return str(_existing(_PACKAGE / "include", "rh_cuda.h"))


def get_cmake_dir() -> str:
    """The folder to put on CMAKE_PREFIX_PATH (or to pass as renewable_huber_DIR's parent) for
    find_package(renewable_huber 2 CONFIG)."""
    return str(_existing(_PACKAGE / "cmake", "renewable_huber/renewable_huberConfig.cmake"))


def get_library_dir() -> str:
    """The folder holding the engine libraries."""
    return str(_PACKAGE / "_lib")


def _existing(folder: Path, member: str) -> Path:
    if not (folder / member).is_file():
        raise FileNotFoundError(
            f"{folder / member} is missing: this renewable_huber was not installed from a wheel "
            "or `pip install .` (a source checkout has the header in abi/ and builds the CMake "
            "package with `cmake --install`)"
        )
    return folder
