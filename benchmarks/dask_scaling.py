"""One batch fitted on a LocalCluster of 1 and 2 worker processes against the in-process
engines, and the client's memory while a batch persisted on the workers is fitted.

    PYTHONPATH=python python3 benchmarks/dask_scaling.py --out benchmarks/records/X.json

Every shape is generated in fixed blocks of --block-rows rows, block i from the seed
(seed, i), so every cluster size and the in-process engines see the same rows in the same
partitions (and the cluster fits reduce in the same order). Per shape and side the record
holds the fit times of --samples repetitions (the in-process sides first, then each
cluster), the iterations, the solver passes (map-reduces over the partitions) and the
numbers they ship back; the largest relative coefficient difference to the in-process fit
of the same arithmetic (numpy for the workers' NumPy sums, native_cpu for librh_cpu's row-
statistics extension, cupy and native_cuda for the GPU engines' sums over partitions held on
the GPU, each cluster fit once per worker engine the machine has); the latency
of one pass over tiny partitions; and, for the first cluster fit of the first shape on the
largest cluster, the client's peak memory growth while fitting (resident set sampled every 2 ms, and
tracemalloc's peak of Python and NumPy allocations). Timings are records, never assertions.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fingerprint import environment  # noqa: E402

from renewable_huber import RenewableHuberRegressor  # noqa: E402
from renewable_huber.backends import unavailable_reason  # noqa: E402
from renewable_huber.dask import batch as dask_batch  # noqa: E402
from renewable_huber.dask.partitions import (  # noqa: E402
    GPU_ENGINES,
    PARTITION_ENGINE_VARIABLE,
    gpu_engine_unavailable_reason,
)

SCHEMA = "renewable-huber-dask-scaling"


def make_block(index: int, rows: int, p: int, seed: int):
    """Block `index` of a shape: X standard normal, y = X beta + 1 + t(3) noise with 2% of
    the rows replaced by outliers."""
    beta = np.random.default_rng(seed).normal(size=p)
    rng = np.random.default_rng([seed, index])
    X = rng.standard_normal((rows, p))
    noise = rng.standard_t(3, size=rows)
    noise[::50] = 40.0
    return X, X @ beta + 1.0 + noise


def local_batch(n: int, p: int, block: int, seed: int):
    pieces = [make_block(i, min(block, n - i * block), p, seed)
              for i in range(-(-n // block))]
    return np.concatenate([x for x, _ in pieces]), np.concatenate([y for _, y in pieces])


def cluster_batch(client, n: int, p: int, block: int, seed: int):
    """The same rows generated and persisted on the workers (never on the client)."""
    import dask
    import dask.array as da

    X_parts, y_parts = [], []
    for i in range(-(-n // block)):
        rows = min(block, n - i * block)
        pair = dask.delayed(make_block, nout=2)(i, rows, p, seed)
        X_parts.append(da.from_delayed(pair[0], shape=(rows, p), dtype=np.float64))
        y_parts.append(da.from_delayed(pair[1], shape=(rows,), dtype=np.float64))
    X, y = client.persist([da.concatenate(X_parts), da.concatenate(y_parts)])
    from distributed import wait

    wait([X, y])
    return X, y


class PassCounter:
    """Counts the solver's map-reduces (sums at one beta, and the line search's losses at
    several) and the numbers they bring back."""

    def __init__(self):
        self.passes = 0
        self.numbers = 0
        self._original = dask_batch.DaskBatch._reduce

    def __enter__(self):
        counter = self

        def counted(batch, function, **kwargs):
            totals = counter._original(batch, function, **kwargs)
            counter.passes += 1
            size = sum(int(np.size(value)) for value in totals.values())
            counter.numbers += size * len(batch.futures)
            return totals

        dask_batch.DaskBatch._reduce = counted
        return self

    def __exit__(self, *exc):
        dask_batch.DaskBatch._reduce = self._original


class PeakMemory:
    """The client's resident set sampled every 2 ms, and tracemalloc's peak."""

    def __init__(self):
        import psutil

        self._process = psutil.Process()
        self._stop = threading.Event()

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._process.memory_info().rss)
            time.sleep(0.002)

    def __enter__(self):
        self.start = self.peak = self._process.memory_info().rss
        tracemalloc.start()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.traced_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        self.growth = self.peak - self.start


def timed_fit(make_model, X, y, samples_out, counter=None):
    model = make_model()
    begin = time.perf_counter()
    model.fit(X, y)
    samples_out.append(time.perf_counter() - begin)
    return model


def pass_latency(client, repeats: int = 30) -> float:
    """Seconds of one map-reduce over tiny partitions (2 rows x 2 columns each)."""
    import dask.array as da

    X = da.ones((8, 2), chunks=(2, 2))
    with dask_batch.prepare_batch(X, X[:, 0], dtype=np.float64, fit_intercept=True) as batch:
        beta = np.zeros(3)
        batch.sums(beta, ("loss", "score", "curvature"), 1.0, 0.1)
        begin = time.perf_counter()
        for _ in range(repeats):
            batch.sums(beta, ("loss", "score", "curvature"), 1.0, 0.1)
        return (time.perf_counter() - begin) / repeats


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="600000x40,200000x128",
                        help="ROWSxFEATURES,... (default 600000x40,200000x128)")
    parser.add_argument("--workers", default="1,2", help="cluster sizes (default 1,2)")
    parser.add_argument("--block-rows", type=int, default=50_000)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--partition-engines", default="numpy,native_cpu",
                        help="the workers' engines to measure (RH_DASK_PARTITION_ENGINE "
                             "values: numpy, native_cpu, cupy, native_cuda; one cluster fit "
                             "per engine; those that cannot run here are left out)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster

    shapes = [tuple(int(v) for v in text.split("x")) for text in args.shapes.split(",")]
    worker_counts = [int(v) for v in args.workers.split(",")]
    engines = [e for e in ("numpy", "native_cpu", "cupy", "native_cuda")
               if unavailable_reason(e) is None]
    # The workers' sums: NumPy's (the reference's row functions), librh_cpu's extension, or on
    # the GPU CuPy's or librh_cuda's (the local workers share this host's GPU, so what runs
    # here runs there); the client keeps the model in the backend of the same arithmetic.
    partition_engines = [e for e in args.partition_engines.split(",") if e in engines
                         and (e not in GPU_ENGINES or gpu_engine_unavailable_reason(e) is None)]
    skipped = sorted(set(args.partition_engines.split(",")) - set(partition_engines))
    if skipped:
        print(f"not measured here: {', '.join(skipped)}", file=sys.stderr)
    record = {
        "schema": SCHEMA, "schema_version": 1, "environment": environment(),
        "load_average_before": os.getloadavg(), "settings": vars(args), "cases": [],
        "pass_latency_seconds": {}, "client_memory": None,
    }
    cases = {shape: {"rows": shape[0], "features": shape[1], "sides": {}} for shape in shapes}
    references = {}
    for shape in shapes:
        X, y = local_batch(*shape, args.block_rows, args.seed)
        for engine in engines:
            side = cases[shape]["sides"].setdefault(f"in-process {engine}", {"seconds": []})
            for _ in range(args.samples):
                model = timed_fit(lambda e=engine: RenewableHuberRegressor(backend=e), X, y,
                                  side["seconds"])
            side["iterations"] = int(model.n_iter_)
            references[shape, engine] = model.state_.coefficients
        del X, y
    for workers in worker_counts:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        with cluster, Client(cluster) as client:
            record["pass_latency_seconds"][str(workers)] = pass_latency(client)
            for (index, shape), engine in itertools.product(enumerate(shapes),
                                                            partition_engines):
                os.environ[PARTITION_ENGINE_VARIABLE] = engine
                X, y = cluster_batch(client, *shape, args.block_rows, args.seed)
                side = cases[shape]["sides"].setdefault(
                    f"cluster {workers} workers, {engine} sums", {"seconds": []})
                for sample in range(args.samples):
                    measure = (index == 0 and sample == 0 and workers == max(worker_counts)
                               and engine == partition_engines[0])
                    with PassCounter() as counter:
                        if measure:
                            with PeakMemory() as memory:
                                model = timed_fit(
                                    lambda e=engine: RenewableHuberRegressor(backend=e), X, y,
                                    side["seconds"])
                            record["client_memory"] = {
                                "shape": list(shape), "workers": workers,
                                "batch_bytes": shape[0] * (shape[1] + 1) * 8,
                                "rss_growth_bytes": memory.growth,
                                "rss_before_bytes": memory.start,
                                "tracemalloc_peak_bytes": memory.traced_peak,
                            }
                        else:
                            model = timed_fit(lambda e=engine: RenewableHuberRegressor(backend=e),
                                              X, y, side["seconds"])
                side.update(iterations=int(model.n_iter_), passes=counter.passes,
                            numbers_shipped=counter.numbers, partitions=len(X.chunks[0]))
                reference = references[shape, engine]
                side["max_relative_difference_to_in_process"] = float(
                    np.max(np.abs(model.state_.coefficients - reference))
                    / np.max(np.abs(reference)))
                client.cancel([X, y])
                del X, y
    for case in cases.values():
        for side in case["sides"].values():
            side["median_seconds"] = float(np.median(side["seconds"]))
        record["cases"].append(case)
    os.environ.pop(PARTITION_ENGINE_VARIABLE, None)
    record["load_average_after"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(json.dumps({"cases": record["cases"], "client_memory": record["client_memory"],
                      "pass_latency_seconds": record["pass_latency_seconds"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
