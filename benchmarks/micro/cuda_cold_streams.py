"""Cold streams of a profile's shapes on native_cuda, device (CuPy) input or, with
--transport host, host (NumPy) input: a new estimator per stream, every batch of the shape
folded in, the device synchronised at the end. For comparing two builds of librh_cuda (or one
build under different test switches, or two trees of the package) on one host.

    RH_CUDA_LIBRARY=build/.../librh_cuda.so PYTHONPATH=python \
        python3 benchmarks/micro/cuda_cold_streams.py LABEL [--repetitions 5] [--penalties none] \
        [--profile standard|large] [--shapes large-wide,...] [--transport device|host] \
        [--cuda-graphs]

Prints one JSON line per case: the label, the case, the median wall time of --repetitions streams
after one warm-up stream, the iterations of the last stream, its first coefficient and a digest
of its state's bits (coefficients and information: whether two builds fit alike to the last
bit). Run the builds alternately, several rounds: these streams take
milliseconds and a shared host is noisy. A script, not a test: nothing is asserted.

    python3 benchmarks/micro/cuda_cold_streams.py --summarize ROUNDS.jsonl \
        [--baseline old] [--candidate new]

reads the lines of alternating runs and prints, per case, both sides' times round by round, their
medians and ratio (baseline / candidate), the rounds the candidate won, and whether the last
iterations, first coefficient and state digest agreed.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from renewable_huber import RenewableHuberRegressor

# Run as a script from anywhere: the repository root holds the benchmarks package.
if str(Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.profiles import shape_named, shapes_of  # noqa: E402


def shape_data(shape):
    """The host rows every native_cuda micro script streams for `shape`: normal features, a
    uniform slope and t(3) noise, from a fixed seed, in float64."""
    rng = np.random.default_rng(11)
    X = rng.standard_normal((shape.rows, shape.features))
    y = X @ rng.uniform(-1, 1, shape.features) + rng.standard_t(3, shape.rows)
    return X, y


def device_rows(cp, shape_name: str, dtype: str):
    """(shape, X, y) of a standard or large shape, its shape_data rows on the device in
    `dtype`."""
    shape = shape_named(shape_name)
    X, y = shape_data(shape)
    return shape, cp.asarray(X.astype(dtype)), cp.asarray(y.astype(dtype))


def stream(cp, shape, X, y, dtype: str, penalty: str, mark=None, options=None):
    """One cold stream: a new estimator, every batch of the shape; (model, total iterations).
    mark (optional): called once per batch for a context manager that encloses its partial_fit
    call (a profiler's range). options (optional): more estimator parameters (engine flags such
    as cuda_graphs)."""
    model = RenewableHuberRegressor(backend="native_cuda", device="cuda", dtype=dtype,
                                    penalty=penalty, **(options or {}))
    iterations = 0
    for start in range(0, shape.rows, shape.batch_size):
        stop = start + shape.batch_size
        batch_x, batch_y = X[start:stop], y[start:stop]
        with mark() if mark is not None else contextlib.nullcontext():
            model.partial_fit(batch_x, batch_y)
        iterations += model.n_iter_
    cp.cuda.Device().synchronize()
    return model, iterations


def state_digest(model) -> str:
    """The first 16 hex digits of the SHA-256 of a fitted model's coefficients and information
    (their bytes as the state holds them)."""
    state = model._state
    digest = hashlib.sha256(np.ascontiguousarray(state.coefficients).tobytes())
    digest.update(np.ascontiguousarray(state.information).tobytes())
    return digest.hexdigest()[:16]


def timed_streams(cp, shape, X, y, dtype: str, penalty: str, *, warmups: int,
                  repetitions: int, options=None):
    """`warmups` untimed cold streams, then `repetitions` timed ones (each stream ends with the
    device synchronised), with the estimator `options` if any; (wall seconds of each timed
    stream, the last model, its iterations)."""
    for _ in range(warmups):
        stream(cp, shape, X, y, dtype, penalty, options=options)
    walls = []
    model = iterations = None
    for _ in range(repetitions):
        began = time.perf_counter()
        model, iterations = stream(cp, shape, X, y, dtype, penalty, options=options)
        walls.append(time.perf_counter() - began)
    return walls, model, iterations


def summarize_ab(lines, baseline: str = "old", candidate: str = "new") -> list[str]:
    """One line per case of two labels' alternating runs (JSON lines of main's output, in run
    order: round k of a side is its k-th line for the case)."""
    times = collections.defaultdict(list)
    fits = {}
    for line in lines:
        record = json.loads(line)
        key = (record["case"], record["side"])
        times[key].append(record["ms"])
        fits[key] = (record["iters"], record["coef0"], record.get("state"))
    out = []
    def listed(values):
        return [f"{t:.3f}" for t in values]

    for case in sorted({case for case, _ in times}):
        old, new = times[(case, baseline)], times[(case, candidate)]
        wins = sum(a > b for a, b in zip(old, new, strict=False))
        ratio = statistics.median(old) / statistics.median(new)
        out.append(
            f"{case}: {baseline} {listed(old)} {candidate} {listed(new)}; "
            f"medians {statistics.median(old):.3f} -> "
            f"{statistics.median(new):.3f} ({ratio:.3f}x), {candidate} faster in "
            f"{wins}/{len(old)} rounds; iterations, coef0 and state digest equal: "
            f"{fits[(case, baseline)] == fits[(case, candidate)]}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("label", nargs="?")
    parser.add_argument("--summarize", metavar="JSONL",
                        help="summarise alternating runs of --baseline and --candidate instead")
    parser.add_argument("--baseline", default="old")
    parser.add_argument("--candidate", default="new")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--penalties", default="none,l1")
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--profile", default="standard", choices=("standard", "large"))
    parser.add_argument("--shapes", default=None,
                        help="comma-separated shape names of the profile (default: all)")
    parser.add_argument("--transport", default="device", choices=("device", "host"))
    parser.add_argument("--cuda-graphs", action="store_true",
                        help="streams with the engine's CUDA_GRAPHS flag (cuda_graphs=True); "
                             "run under its own LABEL against one without")
    args = parser.parse_args()
    if args.summarize is not None:
        with open(args.summarize) as rounds:
            print("\n".join(summarize_ab(rounds, args.baseline, args.candidate)))
        return
    if args.label is None:
        parser.error("a LABEL is needed (or --summarize)")
    only = args.shapes.split(",") if args.shapes else None
    try:
        shapes = shapes_of(args.profile, only)
    except ValueError as error:
        parser.error(str(error))
    for option, given, known in (("--dtypes", args.dtypes, ("float32", "float64")),
                                 ("--penalties", args.penalties, ("none", "l1"))):
        unknown = [v for v in given.split(",") if v not in known]
        if unknown:
            parser.error(f"{option}: unknown {unknown}; choose from {list(known)}")
    import cupy as cp

    for shape in shapes:
        X, y = shape_data(shape)
        for dtype in args.dtypes.split(","):
            Xd, yd = X.astype(dtype), y.astype(dtype)
            if args.transport == "device":
                Xd, yd = cp.asarray(Xd), cp.asarray(yd)
            for penalty in args.penalties.split(","):
                walls, model, iterations = timed_streams(
                    cp, shape, Xd, yd, dtype, penalty, warmups=1, repetitions=args.repetitions,
                    options={"cuda_graphs": True} if args.cuda_graphs else None,
                )
                print(json.dumps({
                    "side": args.label,
                    "case": f"{shape.name} {dtype} {penalty}"
                            + ("" if args.transport == "device" else " host"),
                    "ms": 1e3 * statistics.median(walls), "iters": iterations,
                    "coef0": float(np.asarray(model.coef_)[0]),
                    "state": state_digest(model),
                }), flush=True)


if __name__ == "__main__":
    main()
