"""The engines a benchmark can measure, and which competitor each native engine must beat."""

from __future__ import annotations

import dataclasses

PEER_PREFIX = "peer_"
OWN_ENGINES = ("numpy", "cupy", "native_cpu", "native_cuda")
PEER_ENGINES = tuple(PEER_PREFIX + name for name in OWN_ENGINES)

#: native engine -> the reference it must be no slower than on the same transport
COMPETITORS = {
    "native_cpu": ("numpy", "peer_native_cpu", "peer_numpy"),
    "native_cuda": ("cupy", "peer_native_cuda", "peer_cupy"),
}


@dataclasses.dataclass(frozen=True)
class Engine:
    name: str

    def __post_init__(self) -> None:
        if self.name not in OWN_ENGINES + PEER_ENGINES:
            raise ValueError(f"unknown engine {self.name!r}; choose from "
                             f"{', '.join(OWN_ENGINES + PEER_ENGINES)}")

    @property
    def is_peer(self) -> bool:
        return self.name.startswith(PEER_PREFIX)

    @property
    def backend(self) -> str:
        """The backend name the estimator of this engine's package takes."""
        return self.name[len(PEER_PREFIX):] if self.is_peer else self.name

    @property
    def device(self) -> str:
        return "cuda" if self.backend in ("cupy", "native_cuda") else "cpu"

    @property
    def pins_blas(self) -> bool:
        # NumPy's multithreaded BLAS is erratic on a few shared cores (docs/benchmarks.md).
        return self.backend == "numpy"

    @property
    def threaded(self) -> bool:
        return self.backend == "native_cpu"

    def supports_transport(self, transport: str) -> bool:
        return transport == "host" or self.device == "cuda"


def engine_device(name: str) -> str:
    return Engine(name).device


def is_competitor_pair(candidate: str, baseline: str) -> bool:
    return baseline in COMPETITORS.get(candidate, ())


def parse_engines(text: str) -> list[Engine]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError("no engine named")
    if len(set(names)) != len(names):
        raise ValueError(f"engine listed twice in {text!r}")
    return [Engine(n) for n in names]
