"""The interleaved runner both the sweep and the A/B tool use.

Every side (an engine of one installation) lives in its own worker process. For each case the
sides are prepared (warm-ups, repetitions frozen), then sampled round by round with the order
rotated every round (for two sides: alternating), so slow drifts of a shared machine hit every
side alike and samples of the same round form aligned pairs.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from . import datagen
from .engines import Engine
from .measurement import MIN_SAMPLE_SECONDS, repetitions_for, summarize
from .profiles import Shape

WORKER_SCRIPT = Path(__file__).resolve().parent / "worker.py"
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS",
                         "BLIS_NUM_THREADS")
LIFECYCLES = ("cold", "steady")
OPERATIONS = ("fit", "partial_fit")
TRANSPORTS = ("host", "device")
PENALTIES = ("none", "l1")
DTYPES = ("float32", "float64")


class WorkerError(RuntimeError):
    """A worker refused a request or died; the message carries its reason."""


@dataclasses.dataclass(frozen=True)
class Side:
    """One measured party: an engine of the renewable_huber importable by `python` with
    `pythonpath` (None: inherit this process's PYTHONPATH; peers never inherit it)."""

    label: str
    engine: Engine
    python: str = sys.executable
    pythonpath: str | None = None
    n_jobs: int | None = None

    def environment(self) -> dict:
        env = dict(os.environ)
        if self.engine.is_peer:
            env.pop("PYTHONPATH", None)
        if self.pythonpath is not None:
            env["PYTHONPATH"] = self.pythonpath
        if self.engine.pins_blas:
            env.update({name: "1" for name in BLAS_THREAD_VARIABLES})
        return env

    def describe(self) -> dict:
        return {"label": self.label, "engine": self.engine.name, "backend": self.engine.backend,
                "device": self.engine.device, "python": self.python,
                "pythonpath": self.pythonpath, "n_jobs": self.n_jobs}


class WorkerProcess:
    def __init__(self, side: Side) -> None:
        self.side = side
        self.log = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(
            [side.python, "-u", str(WORKER_SCRIPT)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, text=True, env=side.environment())

    def request(self, op: str, **payload) -> dict:
        try:
            self.process.stdin.write(json.dumps({"op": op, **payload}) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            raise WorkerError(f"worker for {self.side.label} exited: {self._log_tail()}")
        reply = json.loads(line)
        if not reply.pop("ok"):
            raise WorkerError(reply["error"])
        return reply

    def _log_tail(self) -> str:
        self.log.seek(0)
        text = self.log.read().strip()
        return text[-2000:] if text else f"exit status {self.process.poll()}"

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.process.stdin.close()
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        self.log.close()


@dataclasses.dataclass(frozen=True)
class CaseSpec:
    shape: Shape
    dtype: str
    penalty: str
    lifecycle: str
    operation: str
    transport: str

    def worker_case(self) -> dict:
        return {"dtype": self.dtype, "penalty": self.penalty, "lifecycle": self.lifecycle,
                "operation": self.operation, "transport": self.transport,
                "batch_size": self.shape.batch_size}

    def describe(self) -> str:
        return (f"{self.shape.name} {self.dtype} {self.penalty} {self.lifecycle} "
                f"{self.operation} {self.transport}")


@dataclasses.dataclass
class Plan:
    shapes: tuple[Shape, ...]
    dtypes: tuple[str, ...]
    penalties: tuple[str, ...]
    lifecycles: tuple[str, ...]
    operations: tuple[str, ...]
    transports: tuple[str, ...]

    def __post_init__(self) -> None:
        for axis, values, allowed in (("dtypes", self.dtypes, DTYPES),
                                      ("penalties", self.penalties, PENALTIES),
                                      ("lifecycles", self.lifecycles, LIFECYCLES),
                                      ("operations", self.operations, OPERATIONS),
                                      ("transports", self.transports, TRANSPORTS)):
            bad = [v for v in values if v not in allowed]
            if bad or not values:
                raise ValueError(f"{axis} must be a non-empty subset of {allowed}, got {values}")

    def specs(self, shape: Shape, dtype: str) -> tuple[list[CaseSpec], list[dict]]:
        """The measurable combinations for one dataset, and the combinations left out with
        why (a steady engine is only ever fed partial_fit batches)."""
        specs, skipped = [], []
        for penalty, lifecycle, operation, transport in itertools.product(
                self.penalties, self.lifecycles, self.operations, self.transports):
            spec = CaseSpec(shape, dtype, penalty, lifecycle, operation, transport)
            if lifecycle == "steady" and operation == "fit":
                skipped.append({"case": spec.describe(), "reason":
                                "the steady lifecycle measures partial_fit only"})
            else:
                specs.append(spec)
        return specs, skipped

    def count(self) -> int:
        per_dataset = len(self.specs(self.shapes[0], self.dtypes[0])[0]) if self.shapes else 0
        return per_dataset * len(self.shapes) * len(self.dtypes)


def _side_order(sides: list[Side], round_index: int) -> list[Side]:
    if not sides:
        return []
    shift = round_index % len(sides)
    return sides[shift:] + sides[:shift]


class InterleavedRunner:
    def __init__(self, sides: list[Side], *, rounds: int, warmups: int = 2,
                 min_sample_seconds: float = MIN_SAMPLE_SECONDS, data_dir: Path | None = None,
                 progress: bool = True) -> None:
        if len({s.label for s in sides}) != len(sides):
            raise ValueError("side labels must be unique")
        if rounds < 1 or warmups < 0:
            raise ValueError(f"rounds must be >= 1 and warmups >= 0, got {rounds}, {warmups}")
        self.sides = sides
        self.rounds = rounds
        self.warmups = warmups
        self.min_sample_seconds = min_sample_seconds
        self.data_dir = data_dir
        self.progress = progress
        self.workers: dict[str, WorkerProcess] = {}
        self.worker_info: dict[str, dict] = {}
        self.cases: list[dict] = []
        self.skipped: list[dict] = []
        self.unavailable: list[dict] = []

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> list[Side]:
        """Starts every worker; returns the sides whose engine is usable here."""
        usable = []
        for side in self.sides:
            worker = WorkerProcess(side)
            try:
                hello = worker.request("hello", backend=side.engine.backend, n_jobs=side.n_jobs,
                                       pin_blas=side.engine.pins_blas)
            except WorkerError as error:
                worker.close()
                self.unavailable.append({"engine": side.engine.name, "label": side.label,
                                         "reason": str(error)})
                continue
            self.worker_info[side.label] = hello
            if not hello["available"]:
                worker.close()
                self.unavailable.append({"engine": side.engine.name, "label": side.label,
                                         "reason": hello["reason"]})
                continue
            self.workers[side.label] = worker
            usable.append(side)
        return usable

    def close(self) -> None:
        for worker in self.workers.values():
            worker.close()
        self.workers.clear()

    # ------------------------------------------------------------------ running

    def run(self, plan: Plan) -> None:
        usable = self.start()
        try:
            self._run_plan(plan, usable)
        finally:
            self.close()

    def _run_plan(self, plan: Plan, usable: list[Side]) -> None:
        for side in usable:
            for transport in plan.transports:
                if not side.engine.supports_transport(transport):
                    self.skipped.append({"engine": side.engine.name, "label": side.label,
                                         "transport": transport, "reason":
                                         f"{side.engine.name} runs on the CPU: no device "
                                         "transport"})
        bar = _progress_bar(plan.count() * self.rounds, self.progress)
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.data_dir, prefix="rh-bench-") as folder:
            for shape in plan.shapes:
                for dtype in plan.dtypes:
                    dataset = datagen.generate(shape, dtype)
                    paths = datagen.write_npy(dataset, Path(folder))
                    specs, skipped = plan.specs(shape, dtype)
                    self.skipped.extend(skipped)
                    for spec in specs:
                        bar.set_description(spec.describe())
                        self._run_case(spec, dataset, paths,
                                       [s for s in usable
                                        if s.engine.supports_transport(spec.transport)])
                        bar.update(self.rounds)
                    del dataset
                    for path in paths:
                        path.unlink()
        bar.close()

    def _run_case(self, spec: CaseSpec, dataset: datagen.Dataset, paths, sides: list[Side]) -> None:
        measured: dict[str, dict] = {}
        for side in sides:
            worker = self.workers[side.label]
            try:
                worker.request("load", x=str(paths[0]), y=str(paths[1]), sha256=dataset.sha256,
                               transport=spec.transport)
                prepared = worker.request("prepare", case=spec.worker_case(),
                                          warmups=self.warmups)
                repetitions = repetitions_for(prepared["calibration_seconds"],
                                              self.min_sample_seconds)
                worker.request("freeze", repetitions=repetitions)
            except WorkerError as error:
                self._skip_case(spec, side, f"prepare failed: {error}")
                continue
            measured[side.label] = {"repetitions": repetitions, "samples": [],
                                    "rounds": [], "iterations": prepared["iterations"],
                                    "converged": prepared["converged"]}
        for round_index in range(self.rounds):
            for side in _side_order([s for s in sides if s.label in measured], round_index):
                try:
                    sample = self.workers[side.label].request("sample")
                except WorkerError as error:
                    # No retries: the side leaves this case, and the record says why.
                    self._skip_case(spec, side, f"sample in round {round_index} failed: {error}")
                    del measured[side.label]
                    continue
                entry = measured[side.label]
                entry["samples"].append(sample["seconds"])
                entry["rounds"].append(round_index)
                entry["iterations"] = sample["iterations"]
                entry["converged"] = entry["converged"] and sample["converged"]
        for side in sides:
            if side.label in measured:
                self.cases.append(_case_record(spec, dataset, side, measured[side.label],
                                               self.warmups))

    def _skip_case(self, spec: CaseSpec, side: Side, reason: str) -> None:
        self.skipped.append({"engine": side.engine.name, "label": side.label,
                             "case": spec.describe(), "reason": reason})


def _case_record(spec: CaseSpec, dataset: datagen.Dataset, side: Side, measured: dict,
                 warmups: int) -> dict:
    iterations = [int(i) for i in measured["iterations"]]
    return {
        "shape": spec.shape.as_dict(),
        "seed": spec.shape.seed,
        "dataset_sha256": dataset.sha256,
        "dtype": spec.dtype,
        "penalty": spec.penalty,
        "engine": side.engine.name,
        "label": side.label,
        "device": side.engine.device,
        "lifecycle": spec.lifecycle,
        "operation": spec.operation,
        "transport": spec.transport,
        "host_input": spec.transport == "host",
        "includes_transfer": spec.transport == "host" and side.engine.device == "cuda",
        "warmups": warmups,
        "repetitions": measured["repetitions"],
        "samples": measured["samples"],
        "rounds": measured["rounds"],
        **summarize(measured["samples"]),
        "iterations": iterations,
        "iterations_total": sum(iterations),
        "converged": bool(measured["converged"]),
    }


class _NoBar:
    def set_description(self, _text: str) -> None:
        pass

    def update(self, _n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bar(total: int, enabled: bool):
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, unit="sample", dynamic_ncols=True)
