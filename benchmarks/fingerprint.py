"""The environment fingerprint stored in every record: enough to tell two hosts, builds or
BLAS set-ups apart when comparing records later. Every probe degrades to a reason string;
a missing GPU or library is a fact to record, not an error."""

from __future__ import annotations

import ctypes
import datetime as _dt
import io
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS",
                    "RAYON_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES")
LIBRARY_VARIABLES = {"librh_cpu": "RH_CPU_LIBRARY", "librh_cuda": "RH_CUDA_LIBRARY"}


def _run(args: list[str], cwd: Path | None = None) -> str | None:
    if shutil.which(args[0]) is None:
        return None
    try:
        done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_revision() -> dict:
    revision = _run(["git", "rev-parse", "HEAD"], REPO_ROOT)
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], REPO_ROOT)
    return {"revision": revision, "dirty": bool(status) if status is not None else None}


def cpu_model() -> dict:
    model = None
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        match = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.MULTILINE)
        model = match.group(1).strip() if match else None
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"model": model or platform.processor() or None, "logical_cpus": os.cpu_count(),
            "affinity_cpus": affinity, "machine": platform.machine()}


def cpu_jiffies(stat_text: str) -> tuple[int, int] | None:
    """(busy, total) clock ticks of the aggregate `cpu` line of a /proc/stat text: user, nice,
    system, idle, iowait, irq, softirq and steal, of which idle and iowait are idle (guest
    time is already counted in user and nice). None without that line."""
    for line in stat_text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            ticks = [int(value) for value in fields[1:9]]
            return sum(ticks) - ticks[3] - ticks[4], sum(ticks)
    return None


def busy_cpus(before: tuple[int, int], after: tuple[int, int], cpus: int) -> float | None:
    """How many of `cpus` CPUs were busy on average between two cpu_jiffies readings."""
    total = after[1] - before[1]
    if total <= 0:
        return None
    return cpus * (after[0] - before[0]) / total


# Other work keeping more CPUs than this busy before a run (cpu_busy_sample) makes the run's
# CPU-bound timings, host input above all, not this host's: ab.py warns, and goals.py leaves
# such a run's host-input cases out. An idle host shows a few hundredths.
BUSY_CPUS_LIMIT = 1.0


def cpu_busy_sample(seconds: float = 0.5, stat: Path = Path("/proc/stat")) -> dict:
    """The CPUs busy on average over `seconds` while this process sleeps: other work on the
    host (a build, tests left running). Taken before a benchmark starts, it tells a record
    whose host-input times (the CPU's copies into pinned memory) shared the CPUs. Where
    /proc/stat cannot be read, the reason instead."""
    try:
        before = cpu_jiffies(stat.read_text())
        time.sleep(seconds)
        after = cpu_jiffies(stat.read_text())
    except (OSError, ValueError) as error:
        return {"window_s": seconds, "busy_cpus": None, "reason": f"{stat}: {error}"}
    if before is None or after is None:
        return {"window_s": seconds, "busy_cpus": None, "reason": f"{stat} has no cpu line"}
    busy = busy_cpus(before, after, os.cpu_count() or 1)
    return {"window_s": seconds, "busy_cpus": None if busy is None else round(busy, 3)}


def numpy_blas() -> dict:
    info: dict = {"version": np.__version__}
    try:
        config = np.show_config(mode="dicts")
        deps = config.get("Build Dependencies", {})
        info["blas"] = deps.get("blas")
        info["lapack"] = deps.get("lapack")
    except TypeError:
        buffer = io.StringIO()
        with redirect_stdout(buffer):
            np.show_config()
        info["show_config"] = buffer.getvalue()
    try:
        from threadpoolctl import threadpool_info

        info["threadpools"] = [{k: p.get(k) for k in ("user_api", "internal_api", "version",
                                                        "num_threads", "threading_layer")}
                               for p in threadpool_info()]
    except ImportError:
        info["threadpools"] = "threadpoolctl not installed"
    return info


def gpu() -> dict:
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
        props = cupy.cuda.runtime.getDeviceProperties(0) if count else None
        return {
            "device_count": count,
            "name": props["name"].decode() if props else None,
            "compute_capability": f"{props['major']}.{props['minor']}" if props else None,
            "total_memory_bytes": int(props["totalGlobalMem"]) if props else None,
            "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
            "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
            "cupy": cupy.__version__,
        }
    except Exception as error:  # noqa: BLE001 - CuPy missing or no GPU: record why
        smi = _run(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version",
                    "--format=csv,noheader"])
        return {"device_count": 0 if smi is None else len(smi.splitlines()),
                "nvidia_smi": smi, "cupy": f"unavailable: {type(error).__name__}: {error}"}


def _library_candidates(stem: str) -> list[Path]:
    """Where the estimator's loader looks: the environment override, else the installed
    package's _lib. Build folders are never guessed: one may hold a sanitizer build, which
    aborts any process that loads it without its runtime."""
    override = os.environ.get(LIBRARY_VARIABLES[stem])
    if override:
        return [Path(override)]
    try:
        from renewable_huber import _loader
    except ImportError:
        return []
    kind = {"librh_cpu": "native_cpu", "librh_cuda": "native_cuda"}[stem]
    if not hasattr(_loader, "library_file_names"):  # a release before the ABI-major names
        return [_loader.PACKAGE_LIBRARY_DIR / f"{stem}.so"]
    return [_loader.PACKAGE_LIBRARY_DIR / name for name in _loader.library_file_names(kind)]


class _RuntimeInfo(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_uint32), ("struct_size", ctypes.c_uint32),
                ("runtime_version", ctypes.c_int32), ("driver_version", ctypes.c_int32),
                ("device_count", ctypes.c_int32), ("reserved0", ctypes.c_int32)]


def engine_library(stem: str) -> dict:
    """ABI and runtime facts of one engine library, read through its own exported queries."""
    candidates = [p for p in _library_candidates(stem) if p.exists()]
    if not candidates:
        return {"loaded": False, "reason": f"{stem} not found in the installed package "
                f"(set {LIBRARY_VARIABLES[stem]})"}
    path = candidates[0]
    try:
        lib = ctypes.CDLL(str(path))
        lib.rh_cuda_abi_version.restype = ctypes.c_uint32
        abi = int(lib.rh_cuda_abi_version())
        info = _RuntimeInfo(abi_version=abi, struct_size=ctypes.sizeof(_RuntimeInfo))
        lib.rh_cuda_runtime_info.restype = ctypes.c_int32
        status = lib.rh_cuda_runtime_info(ctypes.byref(info))
    except (OSError, AttributeError) as error:
        return {"loaded": False, "path": str(path), "reason": f"{type(error).__name__}: {error}"}
    facts = {"loaded": True, "path": str(path), "abi_version": abi}
    if status == 0:
        facts.update(runtime_version=info.runtime_version, driver_version=info.driver_version,
                     device_count=info.device_count)
    return facts


def environment(cpu_busy_before_run: dict | None = None) -> dict:
    """The fingerprint; with `cpu_busy_before_run` (a cpu_busy_sample taken before the run)
    also that sample."""
    env = {
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "git": git_revision(),
        "python": {"version": sys.version.split()[0], "implementation":
                   platform.python_implementation(), "executable": sys.executable},
        "numpy": numpy_blas(),
        "thread_variables": {k: os.environ[k] for k in THREAD_VARIABLES if k in os.environ},
        "cpu": cpu_model(),
        "gpu": gpu(),
        "engine_libraries": {stem: engine_library(stem) for stem in LIBRARY_VARIABLES},
    }
    if cpu_busy_before_run is not None:
        env["cpu_busy_before_run"] = cpu_busy_before_run
    return env
