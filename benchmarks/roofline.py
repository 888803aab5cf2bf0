"""Roofline table of the CUDA engine: achieved time against what the hardware allows.

    python benchmarks/roofline.py --measure-device device.json          # needs CuPy and a GPU
    python benchmarks/roofline.py --record merged.json --device device.json --out roofline.md

``--measure-device`` measures the device constants the model needs and writes them with the
device's fingerprint (name, compute capability, memory, driver and runtime versions):

- HBM bandwidth: a device-to-device copy (read + write bytes) and a read-only reduction kernel,
  best of several runs each; the model uses the larger of the two.
- GEMM peak: cuBLAS through ``cupy.matmul`` on large square float64 and float32 matrices (no
  TF32 unless the environment enabled it), best of several runs: 2 m^3 flops per product.
- launch floor: a bare empty-kernel launch, per launch in a loop of launches (host clock) and
  inside a captured CUDA graph (device clock); the model uses the smaller. Synchronisation
  floor: one empty launch followed by a stream synchronisation (a host round trip).
- host-to-device copy from pinned memory (and, for reference, from pageable memory).

``--record`` reads a shape-sweep record (sweep.py / ab.py) and, for every case of one engine
(native_cuda unless ``--engine`` or ``--label`` says otherwise), sets its median time against
two floors built from the same device constants. Per batch of n rows, c features,
P = c + 1 (the benchmark fits an intercept), s bytes per value (4 or 8), k the recorded
iterations of that batch, the floor is

    bytes / bandwidth + flops / GEMM peak (of the case's dtype)
        + launches x launch floor + synchronisations x synchronisation floor
        + host bytes / pinned host-to-device bandwidth (host transport only)

summed over the batches (the terms are added: the passes of a solve depend on each other, so
none hides another).

Ideal floor: what any engine running the same iterations must do. Each iteration reads the
batch once (X and y: n (c + 1) s bytes) and, for Newton (penalty none), forms one Gram
(2 n P^2 flops, a full GEMM); LAMM (penalty l1) needs no Gram per iteration, only one at the
solution for the information. At least one iteration's work is counted even when k = 0. One
launch per iteration (a whole iteration in one launch or graph) and one synchronisation per
batch (the state export). Host input adds the batch's bytes over the PCIe link: every iteration
reads every row, so the solve cannot start before the last row arrived.

Engine floor: the passes librh_cuda actually queues with its default settings (eager
launches, inference off), mirrored from engines/cuda/src:

- per batch: on host input a validation pass (reads X, y; device input, which the benchmarks
  pass unweighted, is checked by the objective at beta0 instead), then a row pass at the
  starting beta;
- a row pass reads X and y, writes the residuals (8 n bytes) and forms X'u itself (per-block
  partials, not counted) up to c = 1,024 (the fused row pass, which forms the Gram too: for every
  P it takes); otherwise it writes the scores (n s) that cuBLAS's gemv then reads with X again;
- the Gram (Newton's at every iteration, LAMM's once): up to P = 128 the row pass forms it
  itself (2 n P^2 flops on the tensor cores) and writes one padded partial Gram per block
  (8 pad^2 bytes each), which one more kernel reads and sums; above, the row pass writes the
  scaled rows sqrt(w c) x (n P s) and a cuBLAS GEMM reads them (2 n P^2 flops), in row chunks
  summed by one more kernel (after Newton's row passes that sum runs in the gradient's launch,
  one launch fewer); from 512 parameters one GEMM per column block of about 256
  columns, over the rows up to the block's last column (the upper triangle: 2 n sum c1 (c1 -
  c0) flops, each block reading c1 / P of the scaled rows). Where P is one past whole 64-column
  tiles (129, 257, 513, 1,025) the GEMM forms the first P - 1 columns and a gemv, reading the
  scaled rows once more (bytes, not GEMM flops), the last; the row pass forms that column itself
  (per-block partials, not counted), so its Gram has no gemv, in LAMM's final row pass (no X'u)
  up to P = 1,024 and in Newton's float64 passes (beside X'u) up to 128 stored columns;
- Newton iteration: the Cholesky attempt and solve (one kernel for P <= the one-block limit,
  160 on an H200; above it the cluster kernel up to its limit, 383 on an H200, which also
  judges the factor and solves; beyond, assemble, cuSOLVER potrf and one kernel for the
  acceptance test and both triangular solves; then J dir), the 27 line-search trials in one
  pass (reads X and the residuals), the select kernel, the row pass and Gram at the new beta,
  the gradient kernel. From a stream's second batch on (a fitted beta0) the iteration is
  speculative: the solve also forms the candidate beta - dir (above the one-block limit a
  kernel of its own in place of J dir), the row pass and Gram run at the candidate and the
  gradient's launch judges the whole step; the trials and the select kernel run only after a
  rejection, which the record does not count, so every speculative iteration is counted as
  accepted and on that path the engine floor is a lower bound (with Newton's incremental Gram
  too, where a rejection also costs a synchronisation and the update of the rows its candidate
  changed);
- LAMM iteration: two groups of three launches for the 40 attempts (four above 2^22 stored
  values a batch, J delta then launched apart from the trials; the first group's 8
  candidates read X and y once; the second group returns at once), the row pass without the
  Gram, the gradient kernel; for rows of 9 to 128 stored columns the first group's trials
  also form X'psi at their 8 candidates (per-block partials, not counted) and the row pass
  returns at once (counted as a launch, every iteration taken as accepted in the first group:
  a lower bound); after every chunk the Gram's GEMM (and, in the chunk that ended
  the solve, its row pass), or, when cuBLAS forms it (P > 128) and 2 n P^2 > 2e9, a status
  readback after every chunk and the final row pass, GEMM and commit once, after the
  synchronisation that showed the end;
- Newton's heavy cuBLAS Gram (P > 128, 2 n P^2 > 2e9) is kept incrementally: the batch's first
  row pass forms it in full and records every row's curvature weight (8 n bytes); later row
  passes write no scaled rows and form no Gram, they read the recorded weights (8 n) and flag
  the rows whose weight changed (n), and CUB's select (two launches, reading the n flags) lists
  them; their update runs after the chunk's synchronisation, one iteration per chunk (with
  DEVICE_GRAM_FLIPS, up to the one-block limit: on the device right after the pass, two
  launches, in the chunks of any Newton update). The record does not say how many rows
  changed, so the engine floor counts that update at zero rows (and no second commit after the
  host's): on this path it is a lower bound;
- iterations are queued in chunks with one synchronisation each: the first chunk as long as the
  engine's previous update needed (4, or 2 above the one-block limit, for a new engine; capped
  at 8, 2 above that limit, 1 there when 2 n P^2 > 2e9), later chunks 2 (Newton), 1 (Newton
  above the one-block limit) or 4 (LAMM). An iteration queued after the solve ended still costs
  its launches (the kernels return at once), and its cuBLAS GEMM / gemv run in full;
- host input: the pinned-copy term, as in the ideal floor.

Not modelled: on host input, the host's copy of pageable rows into the pinned chunks (host
memory bandwidth; the transfer term prices only the DMA), engine creation (cold lifecycle: a
new engine inside the timer), the latency of the factor above the one-block limit (the cluster
Cholesky's kernel or cuSOLVER's potrf, each counted as one launch), Python's per-call
overhead, the fallback paths (majoriser, LU / SVD, LAMM's curvature bound). The table's gap
column names the largest term of the engine floor and what the achieved time leaves beyond it.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    from cli_common import ensure_importable

    ensure_importable()

from benchmarks import record as records  # noqa: E402

DEVICE_SCHEMA = "renewable-huber-device-constants"
DEVICE_VERSION = 1

# librh_cuda's constants that decide its passes and launches (engines/cuda/src).
# X'u inside the row pass up to this many stored columns (the fused row pass, which forms the
# Gram, forms X'u for every P it takes)
ROW_PASS_XTU_MAX_COLUMNS = 1024
# Newton's float64 row passes that write the scaled rows form the Gram's last column beside X'u
# (where the GEMM leaves it out) up to this many stored columns
ROW_PASS_COLUMN_WITH_XTU_MAX_COLUMNS = 128
SMALL_DENSE_MAX = 160  # the one-block Cholesky's limit on an H200 (device dependent)
CLUSTER_CHOLESKY_MAX = 383  # the cluster Cholesky's limit on an H200 (device dependent)
# above it: one iteration per chunk above the one-block limit, LAMM's Gram once
HEAVY_GRAM_FLOPS = 2e9
# LAMM's trials form J delta in their launch up to this many stored values a batch
LAMM_MERGED_TRIALS_MAX_VALUES = 1 << 22
# LAMM's first trials on the float64 tensor cores (rows of 9 to 128 stored columns) also form
# X'psi at their candidates: an iteration that accepts among them runs no row pass
LAMM_TRIALS_GRADIENT_COLUMNS = (9, 128)
INCREMENTAL_GRAM = True  # Newton's heavy cuBLAS Gram kept incrementally (UpdateContext)
# Its changed rows added on the device up to the one-block limit (the test build's
# RH_CUDA_TEST_GRAM_FLIPS=device; measured, not faster: the shipped library adds them on the
# host)
DEVICE_GRAM_FLIPS = False
FUSED_GRAM_MAX_P = 128  # the row pass forms the Gram itself up to this P
FUSED_GRAM_SLOTS = (2, 3, 5, 8, 12, 16)  # its padded widths, in 8-column blocks
GRAM_CHUNK_ROWS = 128
GRAM_TARGET_TILES = 264
GRAM_MAX_CHUNKS = 256
GRAM_COLUMN_BLOCK = 256  # from twice this P, the GEMM runs by column blocks of the upper triangle
GRAM_TRIANGLE_COLUMNS = 128  # a float32 Gram's GEMM from this many columns: two column blocks
GRAM_TRIANGLE_END = 256  # ... below this many (at 256 one GEMM over the square measured faster)
MAX_ITER = 100  # the estimator's default
ITEMSIZE = {"float32": 4, "float64": 8}

TERMS = ("memory", "gram", "launch", "sync", "transfer")
BOUND_NAMES = {
    "memory": "bandwidth-bound",
    "gram": "Gram-bound",
    "launch": "launch-bound",
    "sync": "synchronisation-bound",
    "transfer": "PCIe-bound",
}


class MissingDependency(RuntimeError):
    """CuPy (the optional `gpu` extra) is needed to measure a device."""


# ---------------------------------------------------------------------------- device constants


@dataclass(frozen=True)
class DeviceConstants:
    bandwidth: float  # bytes / s
    gemm_flops: dict  # dtype -> flops / s
    launch: float  # s per bare launch
    sync: float  # s per launch + synchronisation
    host_to_device: float  # bytes / s, pinned

    @classmethod
    def from_json(cls, data: dict) -> DeviceConstants:
        if data.get("schema") != DEVICE_SCHEMA or data.get("version") != DEVICE_VERSION:
            raise ValueError(f"not a {DEVICE_SCHEMA} v{DEVICE_VERSION} file "
                             f"(schema {data.get('schema')!r}, version {data.get('version')!r})")
        model = data.get("model")
        if not isinstance(model, dict):
            raise ValueError("device file has no 'model' object")
        values = {}
        for key in ("bandwidth_bytes_per_s", "gemm_float64_flops_per_s",
                    "gemm_float32_flops_per_s", "launch_s", "sync_s",
                    "host_to_device_bytes_per_s"):
            value = model.get(key)
            if (not isinstance(value, (int, float)) or isinstance(value, bool)
                    or not math.isfinite(value) or value <= 0):
                raise ValueError(f"device model value {key!r} = {value!r} is not a positive "
                                 "finite number")
            values[key] = float(value)
        return cls(bandwidth=values["bandwidth_bytes_per_s"],
                   gemm_flops={"float64": values["gemm_float64_flops_per_s"],
                               "float32": values["gemm_float32_flops_per_s"]},
                   launch=values["launch_s"], sync=values["sync_s"],
                   host_to_device=values["host_to_device_bytes_per_s"])


# ---------------------------------------------------------------------------- the model


@dataclass
class Work:
    """What a solve moves and launches; seconds() prices it on a device."""

    bytes: float = 0.0
    flops: float = 0.0
    launches: int = 0
    syncs: int = 0
    transfer_bytes: float = 0.0

    def add(self, other: Work) -> None:
        self.bytes += other.bytes
        self.flops += other.flops
        self.launches += other.launches
        self.syncs += other.syncs
        self.transfer_bytes += other.transfer_bytes

    def seconds(self, device: DeviceConstants, dtype: str) -> dict:
        terms = {
            "memory": self.bytes / device.bandwidth,
            "gram": self.flops / device.gemm_flops[dtype],
            "launch": self.launches * device.launch,
            "sync": self.syncs * device.sync,
            "transfer": self.transfer_bytes / device.host_to_device,
        }
        terms["total"] = sum(terms[t] for t in TERMS)
        return terms


def batch_rows(shape: dict, operation: str) -> list[int]:
    """Rows of every batch of a case: fit is one batch of all rows."""
    rows, batch = shape["rows"], shape["batch_size"]
    if operation == "fit":
        return [rows]
    return [min(batch, rows - lo) for lo in range(0, rows, batch)]


def gram_gemm_columns(P: int) -> int:
    """The columns of a P x P Gram that librh_cuda's GEMM forms (gram_gemm_columns): all but the
    last where P is one past whole 64-column tiles, whose last column a gemv forms."""
    return P - 1 if P > 64 and P % 64 == 1 else P


def gram_split(n: int, P: int, s: int) -> tuple[int, int]:
    """(chunks, rows per chunk) of librh_cuda's Gram GEMM over n scaled rows of s bytes a value
    (gram_split): a float32 Gram in two column blocks by the first."""
    width = gram_column_blocks(P, s)[0][1] if _gram_in_halves(P, s) else gram_gemm_columns(P)
    tiles = ((width + 63) // 64) ** 2
    chunks = min(GRAM_TARGET_TILES // tiles, n // GRAM_CHUNK_ROWS)
    chunks = max(1, min(chunks, GRAM_MAX_CHUNKS))
    rows = -(-n // chunks)
    return -(-n // rows), rows


def _gram_in_halves(P: int, s: int) -> bool:
    """A float32 Gram of GRAM_TRIANGLE_COLUMNS to GRAM_TRIANGLE_END - 1 GEMM columns: two
    column blocks, the row chunks sized by the first."""
    return s == 4 and GRAM_TRIANGLE_COLUMNS <= gram_gemm_columns(P) < GRAM_TRIANGLE_END


def gram_column_blocks(P: int, s: int) -> list[tuple[int, int]]:
    """[(c0, c1)] of librh_cuda's Gram GEMMs over values of s bytes: rows 0 .. c1 - 1 of
    columns c0 .. c1 - 1 each (gram_upper; one block, the GEMM's whole part, below 2 x
    GRAM_COLUMN_BLOCK of its columns, except two for float32 of GRAM_TRIANGLE_COLUMNS to
    GRAM_TRIANGLE_END - 1; the last column, where gram_gemm_columns leaves it out, is the
    gemv's)."""
    columns = gram_gemm_columns(P)
    count = 2 if _gram_in_halves(P, s) else max(1, columns // GRAM_COLUMN_BLOCK)
    bounds = [b * columns // count // 64 * 64 for b in range(count)] + [columns]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def lamm_group_launches(n: int, c: int) -> int:
    """Launches of one LAMM attempt group: the candidates, the trials, the pick, and J delta
    in the trials' launch up to LAMM_MERGED_TRIALS_MAX_VALUES stored values, else its own
    (lamm_trials_with_quadratic)."""
    return 3 if n * c <= LAMM_MERGED_TRIALS_MAX_VALUES else 4


def fused_gram_blocks(n: int, P: int) -> tuple[int, int]:
    """(blocks, padded P) of librh_cuda's fused row pass over n rows (fused_gram_blocks)."""
    slots = next(s for s in FUSED_GRAM_SLOTS if P <= 8 * s)
    pad = 8 * slots
    target = 264 if pad <= 64 else 132
    tile = 32 * (2 if slots <= 8 else 1)
    rows = -(-n // target)
    rows = -(-rows // tile) * tile
    return -(-n // rows), pad


def chunk_sizes(*, l1: bool, above_one_block: bool, n: int, P: int,
                hint: int) -> tuple[int, int]:
    """(first, later) iterations queued per synchronisation (update_pipeline's chunk_sizes)."""
    cap = (1 if 2.0 * n * P * P > HEAVY_GRAM_FLOPS else 2) if above_one_block else 8
    first = hint if hint > 0 else (2 if above_one_block else 4)
    later = 4 if l1 else (1 if above_one_block else 2)
    return min(first, cap), later


def queued_iterations(k: int, first: int, later: int, max_iter: int = MAX_ITER) -> tuple[int, int]:
    """(iterations queued, synchronisations) for a solve that needed k iterations."""
    if not 0 <= k <= max_iter:
        raise ValueError(f"{k} iterations in a batch: the engine stops at max_iter {max_iter}")
    queued = min(first, max_iter)
    syncs = 1
    while queued < k:
        queued += min(later, max_iter - queued)
        syncs += 1
    return queued, syncs


def ideal_work(n: int, c: int, s: int, k: int, *, l1: bool, host: bool) -> Work:
    """One read of the batch and (Newton) one Gram per iteration, one launch per iteration,
    one synchronisation per batch."""
    P = c + 1
    iterations = max(k, 1)
    batch_bytes = n * (c + 1) * s
    gram = 2.0 * n * P * P
    return Work(bytes=iterations * batch_bytes,
                flops=gram if l1 else iterations * gram,
                launches=iterations, syncs=1,
                transfer_bytes=batch_bytes if host else 0.0)


def engine_work(n: int, c: int, s: int, k: int, *, l1: bool, host: bool, hint: int,
                small_dense_max: int = SMALL_DENSE_MAX,
                cluster_cholesky_max: int = CLUSTER_CHOLESKY_MAX,
                max_iter: int = MAX_ITER, fitted_start: bool = False) -> Work:
    """The passes and launches librh_cuda queues for one batch (module docstring);
    fitted_start: the batch starts from a fitted beta0 (a stream's second batch on)."""
    P = c + 1

    def xtu_in_pass(fused_pass: bool) -> bool:
        return fused_pass or c <= ROW_PASS_XTU_MAX_COLUMNS

    batch_bytes = n * (c + 1) * s
    scaled_bytes = n * P * s
    gemv_bytes = n * c * s + n * s  # cuBLAS's X'u: X and the scores
    chunks, chunk_rows = gram_split(n, P, s)
    padding_rows = chunks * chunk_rows - n  # zeroed once per batch (cudaMemsetAsync)
    fused = P <= FUSED_GRAM_MAX_P
    column_blocks = gram_column_blocks(P, s)
    gram_flops = 2.0 * n * (P * P if fused else sum(c1 * (c1 - c0) for c0, c1 in column_blocks))
    if fused:
        blocks, pad = fused_gram_blocks(n, P)
        partial_bytes = 8 * blocks * pad * pad  # written by the row pass, read by its sum
    last_by_gemv = gram_gemm_columns(P) < P
    # Launches of a row pass with the Gram, beyond the row pass itself: the fused pass's sum,
    # or cuBLAS's GEMMs (one per column block), the last column's gemv where there is one and
    # the sum of its chunks (one chunk too: the sum writes the Gram only when the row pass ran).
    gram_launches = 1 if fused else len(column_blocks) + int(last_by_gemv) + 1
    # The scaled rows written once, then read by each GEMM up to its block's last column, and
    # in full by the last column's gemv.
    gram_reads = sum(c1 for _, c1 in column_blocks) / P + int(last_by_gemv)
    # The row pass forms that last column itself (row_pass_gram_column): no gemv, no read of
    # the rows. LAMM's finish pass (the one row pass without X'u) up to ROW_PASS_XTU_MAX_COLUMNS
    # parameters; Newton's passes (beside X'u) in float64 up to
    # ROW_PASS_COLUMN_WITH_XTU_MAX_COLUMNS stored columns.
    final_column_in_pass = last_by_gemv and not fused and P <= ROW_PASS_XTU_MAX_COLUMNS
    newton_column_in_pass = (final_column_in_pass and s == 8
                             and c <= ROW_PASS_COLUMN_WITH_XTU_MAX_COLUMNS)

    def row_pass(with_gram: bool, with_xtu: bool, sum_in_gradient: bool = False) -> Work:
        # residuals; scaled rows for cuBLAS's Gram; scores unless the pass forms X'u itself.
        # sum_in_gradient: Newton's passes, whose Gram sum runs in the gradient's launch.
        in_pass = with_xtu and xtu_in_pass(with_gram and fused)
        written = 8 * n + (0 if in_pass else n * s)
        work = Work(bytes=batch_bytes + written, launches=1)
        if with_xtu and not in_pass:
            work.add(Work(bytes=gemv_bytes, launches=1))
        if with_gram:
            work.add(gram_of_the_pass(newton_column_in_pass))
            if sum_in_gradient:
                work.launches -= 1
        return work

    def gram_of_the_pass(column_in_pass: bool) -> Work:
        if fused:
            return Work(bytes=2 * partial_bytes, flops=gram_flops, launches=gram_launches)
        return Work(bytes=(1 + gram_reads - int(column_in_pass)) * scaled_bytes,
                    flops=gram_flops, launches=gram_launches - int(column_in_pass))

    above_one_block = not l1 and P > small_dense_max
    first, later = chunk_sizes(l1=l1, above_one_block=above_one_block, n=n, P=P, hint=hint)
    incremental = (INCREMENTAL_GRAM and not l1 and not fused
                   and 2.0 * n * P * P > HEAVY_GRAM_FLOPS)
    device_flips = incremental and DEVICE_GRAM_FLIPS and P <= small_dense_max
    if incremental and not device_flips:
        first, later = 1, 1
    # An incremental Gram's later row passes: the recorded weights read, the flags written, and
    # CUB's select over the flags (two launches); the changed rows' update counted at zero rows
    # (on the device: two launches more).
    flagged = Work(bytes=8 * n + n + n, launches=4 if device_flips else 2)
    queued, syncs = queued_iterations(k, first, later, max_iter)
    wasted = queued - k

    # begin_update, after the validation pass on host input (device input: none, unweighted).
    work = Work(bytes=batch_bytes if host else 0.0, launches=2 if host else 1, syncs=syncs,
                transfer_bytes=batch_bytes if host else 0.0)
    if padding_rows > 0 and not fused:  # cuBLAS's Gram reads the zeroed padding rows
        work.add(Work(bytes=padding_rows * P * s, launches=1))
    work.add(row_pass(with_gram=not l1, with_xtu=True, sum_in_gradient=not l1))
    if incremental:
        work.add(Work(bytes=8 * n))  # the first pass records every row's weight
    work.add(Work(launches=1))  # gradient
    work.add(Work(launches=syncs))  # the commit after every chunk
    if l1:
        # Real iterations: the two attempt groups' launches (the first group's trials read the
        # batch), the row pass with X'u, the gradient. Where the first trials form X'psi
        # (LAMM_TRIALS_GRADIENT_COLUMNS) the row pass returns at once: every iteration is counted
        # as accepted in the first group (the record does not say which group accepted), so the
        # engine floor is a lower bound there.
        group_launches = lamm_group_launches(n, c)
        low, high = LAMM_TRIALS_GRADIENT_COLUMNS
        trials_gradient = low <= c <= high
        for _ in range(k):
            work.add(Work(bytes=batch_bytes, launches=2 * group_launches))
            if trials_gradient:
                work.add(Work(launches=1))
            else:
                work.add(row_pass(with_gram=False, with_xtu=True))
            work.add(Work(launches=1))
        # Iterations queued past the end: every launch, and cuBLAS's gemv in full.
        lamm_gemv = 0 if xtu_in_pass(False) else 1
        per_iteration_launches = 2 * group_launches + 1 + lamm_gemv + 1
        work.add(Work(bytes=wasted * lamm_gemv * gemv_bytes,
                      launches=wasted * per_iteration_launches))
        # The final Gram's row pass (residuals, scores; no X'u) runs once.
        final = Work(bytes=batch_bytes + 8 * n + n * s)
        final.add(gram_of_the_pass(final_column_in_pass))
        if 2.0 * n * P * P > HEAVY_GRAM_FLOPS and not fused:
            # A heavy Gram waits for a status readback that shows the end: one more
            # synchronisation and one row pass + Gram + commit, once.
            work.add(Work(syncs=1, launches=2))  # the readback copy, the final commit
            work.add(Work(launches=1))  # the row pass
            work.add(final)
        else:
            # Queued after every chunk: the row pass (and the fused pass's sum) return at once
            # but in the last chunk; cuBLAS's GEMM runs in full every time.
            work.add(Work(launches=syncs * (1 + final.launches)))
            final.launches = 0
            work.add(final)
            if not fused:
                work.add(Work(bytes=(syncs - 1) * (gram_reads - int(final_column_in_pass))
                              * scaled_bytes, flops=(syncs - 1) * gram_flops))
        return work
    # the one-block kernel | the cluster kernel (factor, acceptance test and solves), J dir |
    # assemble, potrf, the acceptance test and solves, J dir
    if not above_one_block:
        solve_launches = 1
    else:
        solve_launches = 2 if P <= cluster_cholesky_max else 4
    # Speculative iterations (module docstring) skip the trials pass and the select kernel.
    speculative = fitted_start
    trials = Work() if speculative else Work(bytes=n * c * s + 8 * n, launches=2)
    for _ in range(k):
        work.add(Work(launches=solve_launches))
        work.add(trials)
        work.add(row_pass(with_gram=not incremental, with_xtu=True, sum_in_gradient=True))
        if incremental:
            work.add(flagged)
        work.add(Work(launches=1))  # gradient (and the Gram's sum)
    # Iterations queued past the end: every launch; cuBLAS's GEMM (and the last column's gemv
    # where the row pass does not form it) in full (the fused row pass and its sum return at
    # once), CUB's select in full.
    newton_gram = gram_of_the_pass(newton_column_in_pass)
    # the sum: in the gradient's launch
    pass_launches = flagged.launches if incremental else newton_gram.launches - 1
    newton_gemv = 0 if xtu_in_pass(fused) else 1
    per_iteration_launches = solve_launches + trials.launches + 1 + newton_gemv + pass_launches + 1
    if incremental:
        wasted_gram = Work(bytes=n)  # the select's read of the flags
    elif fused:
        wasted_gram = Work()
    else:
        # the Gram's reads of the scaled rows, which the skipped row pass did not write
        wasted_gram = Work(bytes=newton_gram.bytes - scaled_bytes, flops=gram_flops)
    work.add(Work(bytes=wasted * (wasted_gram.bytes + newton_gemv * gemv_bytes),
                  flops=wasted * wasted_gram.flops,
                  launches=wasted * per_iteration_launches))
    return work


def case_floors(case: dict, device: DeviceConstants, *,
                small_dense_max: int = SMALL_DENSE_MAX,
                cluster_cholesky_max: int = CLUSTER_CHOLESKY_MAX,
                max_iter: int = MAX_ITER) -> dict:
    """Ideal and engine floors (seconds per term) of one record case, summed over batches."""
    shape = case["shape"]
    dtype = case["dtype"]
    if dtype not in ITEMSIZE:
        raise ValueError(f"case {shape['name']}: unknown dtype {dtype!r}")
    if case["penalty"] not in ("none", "l1"):
        raise ValueError(f"case {shape['name']}: unknown penalty {case['penalty']!r}")
    rows = batch_rows(shape, case["operation"])
    iterations = case["iterations"]
    if len(iterations) != len(rows):
        raise ValueError(f"case {shape['name']} {dtype} {case['penalty']} {case['operation']}: "
                         f"{len(iterations)} iteration counts for {len(rows)} batches")
    l1 = case["penalty"] == "l1"
    host = case["transport"] == "host"
    s = ITEMSIZE[dtype]
    c = shape["features"]
    ideal, engine = Work(), Work()
    # The engine's first chunk follows its previous update: a new engine has none (cold), a
    # primed one (steady) last ran the previous repetition's final batch.
    previous = iterations[-1] if case["lifecycle"] == "steady" else 0
    # Every stream starts from an empty state, so its first batch starts from beta = 0.
    for index, (n, k) in enumerate(zip(rows, iterations, strict=True)):
        ideal.add(ideal_work(n, c, s, k, l1=l1, host=host))
        engine.add(engine_work(n, c, s, k, l1=l1, host=host, hint=previous,
                               small_dense_max=small_dense_max,
                               cluster_cholesky_max=cluster_cholesky_max, max_iter=max_iter,
                               fitted_start=index > 0))
        previous = k
    return {"ideal": ideal.seconds(device, dtype), "engine": engine.seconds(device, dtype),
            "ideal_work": vars(ideal), "engine_work": vars(engine),
            "factor": dense_factor(c + 1, l1, small_dense_max, cluster_cholesky_max)}


def dense_factor(P: int, l1: bool, small_dense_max: int, cluster_cholesky_max: int) -> str | None:
    """Who factors Newton's system outside the one-block kernel, if anyone."""
    if l1 or P <= small_dense_max:
        return None
    return "cluster Cholesky" if P <= cluster_cholesky_max else "cuSOLVER"


def gap_text(case: dict, floors: dict) -> str:
    engine = floors["engine"]
    dominant = max(TERMS, key=lambda t: engine[t])
    share = engine[dominant] / engine["total"]
    text = f"{BOUND_NAMES[dominant]} ({share:.0%} of the engine floor)"
    beyond = case["median"] - engine["total"]
    if beyond <= 0:
        return text + "; at the engine floor"
    causes = []
    if case["transport"] == "host":
        # The transfer term prices the batch at the pinned DMA rate; pageable rows first go
        # through the host's own copy into the pinned chunks, bound by host memory bandwidth.
        causes.append("the host's copy of pageable rows into pinned chunks")
    if case["lifecycle"] == "cold":
        causes.append("engine creation")
    if floors["factor"] is not None:
        causes.append(f"{floors['factor']} latency")
    causes.append("per-call host work")
    return (text + f"; {beyond * 1e3:.3g} ms beyond it ({beyond / case['median']:.0%}: "
            + ", ".join(causes) + ")")


# ---------------------------------------------------------------------------- the table


def select_cases(record: dict, engine: str | None, label: str | None) -> list[dict]:
    if label is not None:
        cases = [c for c in record["cases"] if c["label"] == label]
        what = f"label {label!r}"
    else:
        engine = engine or "native_cuda"
        cases = [c for c in record["cases"] if c["engine"] == engine]
        what = f"engine {engine!r}"
    if not cases:
        present = sorted({f"{c['label']} ({c['engine']})" for c in record["cases"]})
        raise ValueError(f"the record has no case of {what}; it has {present}")
    labels = {c["label"] for c in cases}
    if len(labels) > 1:
        raise ValueError(f"{what} has cases of several sides {sorted(labels)}: pick one with "
                         "--label")
    order = {"none": 0, "l1": 1, "float64": 0, "float32": 1, "cold": 0, "steady": 1,
             "partial_fit": 0, "fit": 1, "device": 0, "host": 1}
    return sorted(cases, key=lambda c: (c["shape"]["index"], c["shape"]["name"],
                                        order[c["dtype"]], order[c["penalty"]],
                                        order[c["lifecycle"]], order[c["operation"]],
                                        order[c["transport"]]))


def table_rows(cases: list[dict], device: DeviceConstants, **model) -> list[dict]:
    rows = []
    for case in cases:
        floors = case_floors(case, device, **model)
        rows.append({
            "shape": case["shape"]["name"], "rows": case["shape"]["rows"],
            "features": case["shape"]["features"], "batch_size": case["shape"]["batch_size"],
            "dtype": case["dtype"], "penalty": case["penalty"], "lifecycle": case["lifecycle"],
            "operation": case["operation"], "transport": case["transport"],
            "iterations": list(case["iterations"]), "achieved_s": case["median"],
            "ideal_s": floors["ideal"]["total"], "engine_s": floors["engine"]["total"],
            "achieved_over_ideal": case["median"] / floors["ideal"]["total"],
            "achieved_over_engine": case["median"] / floors["engine"]["total"],
            "ideal_terms_s": floors["ideal"], "engine_terms_s": floors["engine"],
            "ideal_work": floors["ideal_work"], "engine_work": floors["engine_work"],
            "gap": gap_text(case, floors),
        })
    return rows


def host_transfer_rows(rows: list[dict]) -> list[dict]:
    """Host-input cases beside their device-input twins (same shape, dtype, penalty, lifecycle
    and operation): the time host input adds, against the pinned-copy floor of its bytes."""
    def key(r: dict) -> tuple:
        return (r["shape"], r["dtype"], r["penalty"], r["lifecycle"], r["operation"])

    device = {key(r): r for r in rows if r["transport"] == "device"}
    paired = []
    for r in rows:
        twin = device.get(key(r)) if r["transport"] == "host" else None
        if twin is None:
            continue
        extra = r["achieved_s"] - twin["achieved_s"]
        floor = r["engine_terms_s"]["transfer"]
        paired.append({"shape": r["shape"], "rows": r["rows"], "features": r["features"],
                       "batch_size": r["batch_size"], "dtype": r["dtype"],
                       "penalty": r["penalty"], "lifecycle": r["lifecycle"],
                       "operation": r["operation"], "host_s": r["achieved_s"],
                       "device_s": twin["achieved_s"], "extra_s": extra,
                       "transfer_floor_s": floor, "extra_over_floor": extra / floor})
    return paired


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def render(rows: list[dict], device_data: dict, record: dict, side: str) -> str:
    m = device_data["model"]
    fp = device_data["fingerprint"]
    env = record["environment"]
    lines = [
        f"# Roofline: {side}",
        "",
        f"Record: created {env.get('created')}, host {env.get('host')}, revision "
        f"{env.get('git', {}).get('revision', '?')[:12]}"
        f"{' (dirty)' if env.get('git', {}).get('dirty') else ''}; "
        f"gpu {json.dumps(env.get('gpu'))}.",
        f"Device constants: {fp.get('name')}, compute capability "
        f"{fp.get('compute_capability')}, {fp.get('memory_bytes', 0) / 2**30:.1f} GiB, driver "
        f"{fp.get('driver_version')}, runtime {fp.get('runtime_version')}, measured "
        f"{device_data.get('created')}: bandwidth {m['bandwidth_bytes_per_s'] / 1e9:.0f} GB/s, "
        f"GEMM float64 {m['gemm_float64_flops_per_s'] / 1e12:.1f} TFLOP/s, float32 "
        f"{m['gemm_float32_flops_per_s'] / 1e12:.1f} TFLOP/s, launch "
        f"{m['launch_s'] * 1e6:.2f} us, launch + synchronise {m['sync_s'] * 1e6:.2f} us, "
        f"pinned host-to-device {m['host_to_device_bytes_per_s'] / 1e9:.1f} GB/s.",
        "",
        "Floor = bytes / bandwidth + Gram flops / GEMM peak + launches x launch floor + "
        "synchronisations x synchronisation floor + host bytes / pinned host-to-device "
        "bandwidth, summed over the batches with each batch's recorded iterations. "
        "**ideal**: one read of the batch (X, y) per iteration, one Gram (2 n P^2) per Newton "
        "iteration (LAMM: one at the solution), one launch per iteration, one "
        "synchronisation per batch. **engine**: the passes, launches and synchronisations "
        "librh_cuda queues (validation pass, row passes writing the scaled rows, line-search "
        "pass, chunked GEMM, X'u by gemv where the row pass does not form it, iterations queued "
        "past the end of a "
        "chunk); engine terms in ms: memory / Gram / launch / sync / PCIe. Times are medians "
        "of the record's samples, per case (the whole stream).",
        "",
        "| case | iterations | achieved ms | ideal ms | x ideal | engine ms | x engine | "
        "engine terms ms | gap |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        name = (f"{r['shape']} {r['rows']:,}x{r['features']} ({r['batch_size']:,}) "
                f"{r['dtype']} {r['penalty']} {r['lifecycle']} {r['operation']} "
                f"{r['transport']}")
        t = r["engine_terms_s"]
        terms = " / ".join(_ms(t[k]) for k in TERMS)
        its = r["iterations"]
        iterations = (f"{sum(its)} ({', '.join(map(str, its))})" if len(its) <= 8
                      else f"{sum(its)} over {len(its)} batches")
        lines.append(f"| {name} | {iterations} | {_ms(r['achieved_s'])} | {_ms(r['ideal_s'])} "
                     f"| {r['achieved_over_ideal']:.2f} | {_ms(r['engine_s'])} "
                     f"| {r['achieved_over_engine']:.2f} | {terms} | {r['gap']} |")
    if rows:
        over_ideal = [r["achieved_over_ideal"] for r in rows]
        over_engine = [r["achieved_over_engine"] for r in rows]
        lines += ["", f"Median achieved / ideal {statistics.median(over_ideal):.2f}, achieved / "
                  f"engine {statistics.median(over_engine):.2f}, worst achieved / ideal "
                  f"{max(over_ideal):.2f}."]
    paired = host_transfer_rows(rows)
    if paired:
        lines += ["", "## Host input over device input", "",
                  "What host input adds to the same case on device input (host median minus "
                  "device median), against the pinned-copy floor of its bytes (batch bytes / "
                  "pinned host-to-device bandwidth).", "",
                  "| case | host ms | device ms | extra ms | copy floor ms | x floor |",
                  "|---|---|---|---|---|---|"]
        for p in paired:
            name = (f"{p['shape']} {p['rows']:,}x{p['features']} ({p['batch_size']:,}) "
                    f"{p['dtype']} {p['penalty']} {p['lifecycle']} {p['operation']}")
            lines.append(f"| {name} | {_ms(p['host_s'])} | {_ms(p['device_s'])} "
                         f"| {_ms(p['extra_s'])} | {_ms(p['transfer_floor_s'])} "
                         f"| {p['extra_over_floor']:.2f} |")
        ratios = [p["extra_over_floor"] for p in paired]
        lines += ["", f"Median extra / copy floor {statistics.median(ratios):.2f}, worst "
                  f"{max(ratios):.2f}."]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- measuring


def _import_cupy():
    try:
        import cupy
    except ImportError as exc:  # the optional `gpu` extra
        raise MissingDependency(
            "--measure-device needs CuPy (pip install 'renewable-huber[gpu]' or a cupy-cudaXX "
            f"wheel) and a CUDA GPU: {exc}") from exc
    return cupy


_READ_KERNEL = r"""
extern "C" __global__ void read_all(const double2* a, long long n, double* out) {
  __shared__ double partial[256];
  double acc = 0.0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const double2 v = a[i];
    acc += v.x + v.y;
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int step = blockDim.x / 2; step > 0; step /= 2) {
    if (threadIdx.x < step) partial[threadIdx.x] += partial[threadIdx.x + step];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}
extern "C" __global__ void empty_kernel() {}
"""


def _best_event_seconds(cp, run, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        run()
        end.record()
        end.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(start, end) / 1e3)
    return best


def measure_device(*, repeats: int = 5, bandwidth_bytes: int = 2 << 30, gemm_size: int = 8192,
                   launches: int = 2000, copy_bytes: int = 256 << 20) -> dict:
    cp = _import_cupy()
    import numpy as np

    runtime = cp.cuda.runtime
    device = cp.cuda.Device()
    props = runtime.getDeviceProperties(device.id)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    fingerprint = {
        "name": name,
        "compute_capability": f"{props['major']}.{props['minor']}",
        "memory_bytes": int(props["totalGlobalMem"]),
        "multiprocessors": int(props["multiProcessorCount"]),
        "driver_version": runtime.driverGetVersion(),
        "runtime_version": runtime.runtimeGetVersion(),
        "cupy_version": cp.__version__,
        "device_id": device.id,
        "platform": platform.platform(),
    }
    module = cp.RawModule(code=_READ_KERNEL)
    read_all = module.get_function("read_all")
    empty = module.get_function("empty_kernel")

    # HBM bandwidth: copy (read + write) and read-only.
    count = bandwidth_bytes // 8
    a = cp.ones(count, dtype=cp.float64)
    b = cp.empty_like(a)
    b[...] = a  # warm
    copy_s = _best_event_seconds(cp, lambda a=a, b=b: cp.copyto(b, a), repeats)
    out = cp.zeros(1, dtype=cp.float64)
    blocks = 8 * fingerprint["multiprocessors"]
    pairs = count // 2
    read_all((blocks,), (256,), (a, np.int64(pairs), out))
    read_s = _best_event_seconds(
        cp, lambda a=a: read_all((blocks,), (256,), (a, np.int64(pairs), out)), repeats)
    copy_bw = 2 * count * 8 / copy_s
    read_bw = pairs * 16 / read_s
    del a, b

    # GEMM peaks.
    gemm = {}
    for dtype in ("float64", "float32"):
        x = cp.random.default_rng(0).standard_normal((gemm_size, gemm_size)).astype(dtype)
        y = cp.empty_like(x)
        cp.matmul(x, x, out=y)
        seconds = _best_event_seconds(cp, lambda x=x, y=y: cp.matmul(x, x, out=y), repeats)
        gemm[dtype] = 2.0 * gemm_size ** 3 / seconds
        del x, y

    # Launch floors.
    stream = cp.cuda.get_current_stream()
    empty((1,), (1,), ())
    stream.synchronize()
    loop_best = sync_best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(launches):
            empty((1,), (1,), ())
        stream.synchronize()
        loop_best = min(loop_best, (time.perf_counter() - t0) / launches)
        t0 = time.perf_counter()
        for _ in range(launches // 4):
            empty((1,), (1,), ())
            stream.synchronize()
        sync_best = min(sync_best, (time.perf_counter() - t0) / (launches // 4))
    graph_launch = None
    graph_error = None
    try:
        capture = cp.cuda.Stream(non_blocking=True)
        with capture:
            capture.begin_capture()
            for _ in range(launches):
                empty((1,), (1,), ())
            graph = capture.end_capture()
        graph.launch(capture)
        capture.synchronize()
        best = math.inf
        for _ in range(repeats):
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record(capture)
            graph.launch(capture)
            end.record(capture)
            end.synchronize()
            best = min(best, cp.cuda.get_elapsed_time(start, end) / 1e3)
        graph_launch = best / launches
    except Exception as exc:  # graph capture is optional evidence
        graph_error = f"{type(exc).__name__}: {exc}"

    # Host-to-device copies.
    pinned_mem = cp.cuda.alloc_pinned_memory(copy_bytes)
    pinned = np.frombuffer(pinned_mem, dtype=np.uint8, count=copy_bytes)
    pinned[:] = 1
    pageable = np.ones(copy_bytes, dtype=np.uint8)
    target = cp.empty(copy_bytes, dtype=cp.uint8)
    h2d = {}
    for kind, source in (("pinned", pinned), ("pageable", pageable)):
        target.set(source)
        best = math.inf
        for _ in range(repeats):
            stream.synchronize()
            t0 = time.perf_counter()
            target.set(source)
            stream.synchronize()
            best = min(best, time.perf_counter() - t0)
        h2d[kind] = copy_bytes / best

    launch = min(loop_best, graph_launch) if graph_launch is not None else loop_best
    return {
        "schema": DEVICE_SCHEMA,
        "version": DEVICE_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        "fingerprint": fingerprint,
        "measurements": {
            "repeats": repeats,
            "copy_bytes_per_s": copy_bw, "copy_array_bytes": count * 8,
            "read_bytes_per_s": read_bw,
            "gemm_size": gemm_size,
            "gemm_float64_flops_per_s": gemm["float64"],
            "gemm_float32_flops_per_s": gemm["float32"],
            "launch_loop_s": loop_best, "launch_graph_s": graph_launch,
            "launch_graph_error": graph_error, "launch_sync_s": sync_best,
            "launches": launches,
            "host_to_device_pinned_bytes_per_s": h2d["pinned"],
            "host_to_device_pageable_bytes_per_s": h2d["pageable"],
            "host_copy_bytes": copy_bytes,
        },
        "model": {
            "bandwidth_bytes_per_s": max(copy_bw, read_bw),
            "gemm_float64_flops_per_s": gemm["float64"],
            "gemm_float32_flops_per_s": gemm["float32"],
            "launch_s": launch,
            "sync_s": sync_best,
            "host_to_device_bytes_per_s": h2d["pinned"],
        },
    }


# ---------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measure-device", type=Path, metavar="OUT.json",
                        help="measure the device constants (needs CuPy and a GPU)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--record", type=Path, help="a shape-sweep record (sweep.py / ab.py)")
    parser.add_argument("--device", type=Path, help="device constants from --measure-device")
    parser.add_argument("--engine", default=None, help="engine whose cases are tabled "
                        "(default native_cuda)")
    parser.add_argument("--label", default=None, help="side label whose cases are tabled")
    parser.add_argument("--small-dense-max", type=int, default=SMALL_DENSE_MAX,
                        help="the one-block Cholesky's P limit of the device (H200: 160)")
    parser.add_argument("--cluster-cholesky-max", type=int, default=CLUSTER_CHOLESKY_MAX,
                        help="the cluster Cholesky's P limit of the device (H200: 384)")
    parser.add_argument("--out", type=Path, default=None, help="Markdown table (else stdout)")
    parser.add_argument("--json", type=Path, default=None,
                        help="per-case floors and terms with the device constants")
    args = parser.parse_args(argv)
    if (args.measure_device is None) == (args.record is None):
        parser.error("give exactly one of --measure-device OUT.json or --record R.json")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.small_dense_max < 0 or args.cluster_cholesky_max < 0:
        parser.error("--small-dense-max and --cluster-cholesky-max must be >= 0")
    if args.measure_device is not None:
        try:
            data = measure_device(repeats=args.repeats)
        except MissingDependency as exc:
            print(f"roofline: {exc}", file=sys.stderr)
            return 2
        except RuntimeError as exc:  # CuPy's CUDA errors: no device, no driver, out of memory
            print(f"roofline: measuring the device failed: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            return 2
        args.measure_device.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        print(json.dumps(data["model"], indent=2))
        return 0
    if args.device is None:
        parser.error("--record needs --device D.json (from --measure-device)")
    try:
        device_data = json.loads(args.device.read_text(encoding="utf-8"))
        device = DeviceConstants.from_json(device_data)
        record = records.load(args.record)
        if record.get("schema") != records.SCHEMA_NAME:
            raise ValueError(f"{args.record} is not a {records.SCHEMA_NAME} record")
        cases = select_cases(record, args.engine, args.label)
        rows = table_rows(cases, device, small_dense_max=args.small_dense_max,
                          cluster_cholesky_max=args.cluster_cholesky_max)
    except (OSError, ValueError, KeyError) as exc:
        print(f"roofline: {exc}", file=sys.stderr)
        return 2
    side = f"{cases[0]['label']} ({cases[0]['engine']})"
    text = render(rows, device_data, record, side)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    if args.json is not None:
        args.json.write_text(json.dumps({
            "schema": "renewable-huber-roofline", "version": 1, "side": side,
            "record_environment": record["environment"], "device": device_data,
            "small_dense_max": args.small_dense_max,
            "cluster_cholesky_max": args.cluster_cholesky_max, "cases": rows,
            "host_transfer": host_transfer_rows(rows)}, indent=2) + "\n",
            encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
