"""Hand-made records with chosen timings, for exercising the validator, gates and plots
without running any engine (tests, and dry runs of a new gate or plot)."""

from __future__ import annotations

from . import record
from .engines import engine_device
from .measurement import summarize
from .profiles import shape_named

SHA = "ab" * 32


def environment() -> dict:
    return {
        "created": "2026-01-01T00:00:00+00:00",
        "host": "synthetic",
        "platform": "synthetic",
        "git": {"revision": "0" * 40, "dirty": False},
        "python": {"version": "3.11.0"},
        "numpy": {"version": "2.0.0"},
        "thread_variables": {},
        "cpu": {"model": "synthetic", "logical_cpus": 2},
        "gpu": {"device_count": 0},
        "engine_libraries": {},
    }


def case(*, label: str, engine: str, samples: list[float], shape: str = "latency",
         dtype: str = "float64", penalty: str = "none", lifecycle: str = "cold",
         operation: str = "partial_fit", transport: str = "host",
         iterations: list[int] | None = None, converged: bool = True,
         rounds: list[int] | None = None) -> dict:
    found = shape_named(shape)
    n_batches = found.n_batches if operation == "partial_fit" else 1
    iterations = iterations if iterations is not None else [5] * n_batches
    device = engine_device(engine)
    return {
        "shape": found.as_dict(),
        "seed": found.seed,
        "dataset_sha256": SHA,
        "dtype": dtype,
        "penalty": penalty,
        "engine": engine,
        "label": label,
        "device": device,
        "lifecycle": lifecycle,
        "operation": operation,
        "transport": transport,
        "host_input": transport == "host",
        "includes_transfer": transport == "host" and device == "cuda",
        "warmups": 2,
        "repetitions": 10,
        "samples": list(samples),
        "rounds": list(rounds) if rounds is not None else list(range(len(samples))),
        **summarize(samples),
        "iterations": iterations,
        "iterations_total": sum(iterations),
        "converged": converged,
    }


def side(label: str, engine: str) -> dict:
    return {"label": label, "engine": engine, "backend": engine.removeprefix("peer_"),
            "device": engine_device(engine), "python": "python3", "pythonpath": None,
            "n_jobs": None}


def build(sides: list[tuple[str, str]], cases: list[dict], rounds: int | None = None,
          skipped: list[dict] | None = None, unavailable: list[dict] | None = None) -> dict:
    """A valid record of `cases` measured by `sides` ((label, engine) pairs)."""
    rounds = rounds if rounds is not None else max(
        (max(c["rounds"]) + 1 for c in cases), default=1)
    return record.build(tool="ab", environment=environment(), arguments={}, rounds=rounds,
                        sides=[side(label, engine) for label, engine in sides], workers={},
                        cases=cases, skipped=skipped or [], unavailable=unavailable or [])
