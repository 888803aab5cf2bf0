"""What the package knows about each backend, in one table.

Every module that needs a backend's device, whether it takes device arrays as they are, whether
its engine refuses NaN/Inf itself, or where its compiled library comes from reads it here; the
tuples below are derived from the table once, at import, for the checks made on every batch.

Only the standard library is imported: the validation layer, the loader and the command line
read this module before (and without) any backend.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class BackendFacts:
    #: the backend's name, as the estimator's `backend` parameter spells it
    name: str
    #: "cpu" or "cuda": the only device it runs on
    device: str
    #: takes device arrays (CuPy, PyTorch CUDA tensors) as they are; the others compute on the
    #: host and get NumPy arrays
    accepts_device_arrays: bool
    #: its engine refuses NaN/Inf in X, y and sample_weight before committing anything, naming
    #: the array and the first bad position (docs/decisions.md, "Data checks"), so arrays that
    #: reach it unchanged are not scanned twice (see _validation)
    checks_finite: bool
    #: the environment variable naming its engine library (compiled engines only), else None
    library_variable: str | None = None
    #: the library's base file name (librh_cpu.so: "rh_cpu"; compiled engines only), else None
    library_name: str | None = None


FACTS: dict[str, BackendFacts] = {
    facts.name: facts
    for facts in (
        BackendFacts("numpy", "cpu", accepts_device_arrays=False, checks_finite=False),
        BackendFacts("cupy", "cuda", accepts_device_arrays=True, checks_finite=False),
        BackendFacts(
            "native_cpu",
            "cpu",
            accepts_device_arrays=False,
            checks_finite=True,
            library_variable="RH_CPU_LIBRARY",
            library_name="rh_cpu",
        ),
        BackendFacts(
            "native_cuda",
            "cuda",
            accepts_device_arrays=True,
            checks_finite=True,
            library_variable="RH_CUDA_LIBRARY",
            library_name="rh_cuda",
        ),
    )
}

#: every backend, in the order the documentation and the command line list them
BACKENDS: tuple[str, ...] = tuple(FACTS)
#: the `backend` parameter's values: "auto" and every backend
BACKEND_CHOICES: tuple[str, ...] = ("auto", *BACKENDS)
#: the backends driven through a compiled engine library (the ABI)
NATIVE_BACKENDS: tuple[str, ...] = tuple(
    name for name, facts in FACTS.items() if facts.library_variable is not None
)
DEVICE_INPUT_BACKENDS: tuple[str, ...] = tuple(
    name for name, facts in FACTS.items() if facts.accepts_device_arrays
)
ENGINE_CHECKS_FINITE_BACKENDS: tuple[str, ...] = tuple(
    name for name, facts in FACTS.items() if facts.checks_finite
)
