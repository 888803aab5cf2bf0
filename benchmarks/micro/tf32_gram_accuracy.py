"""What a TF32 Gram does to float32 fits: the accuracy that decides whether librh_cuda's float32
Gram may run on the TF32 tensor cores (it does only for engines created with FAST_MATH,
`cuda_fast_math=True`).

TF32 keeps float32's exponent and 10 of its 23 mantissa bits: a GEMM in TF32 reads each input
element rounded to 11 significant bits and accumulates the exact products in float32. A
FAST_MATH engine sets cuBLAS's TF32 math mode, which changes its float32 GEMMs: in librh_cuda
that is the Gram, the GEMM of the scaled rows sqrt(w c) x (FAST_MATH also routes the Gram of
up to 128 parameters there, away from the fused row pass). The gradient, the objective, the
line search and the state's renewable terms do not change, so the solve still stops where the
float32 gradient vanishes; what the rounding changes is the curvature the Newton steps use
and the information the state carries into the next batch.

    PYTHONPATH=python python3 benchmarks/micro/tf32_gram_accuracy.py \
        [--profile standard|large] [--shapes streaming,...] [--penalties none,l1] \
        [--engine emulated|native_cuda]
    PYTHONPATH=python python3 benchmarks/micro/tf32_gram_accuracy.py --corpora

`emulated` (the default, any host): the reference core on NumPy in float32, which sums its
Grams in float64 from the widened float32 rows (as librh_cuda's fused Gram does up to 128
parameters), then the same fit with the core's weighted Gram replaced by a float32 GEMM of
the scaled rows (cuBLAS's SIMT SGEMM, librh_cuda's float32 Gram above 128 parameters), and
by the TF32 GEMM: the scaled rows rounded to TF32 both ways a conversion may round (to
nearest with ties away from zero, as the cvt.rna.tf32.f32 instruction does, and toward zero,
the first 10 mantissa bits as they lie), the products summed in float32. `native_cuda` (a GPU
host): librh_cuda's float32 engine without and with FAST_MATH. Every variant is set beside
the reference core's float64 fit of the same rows (cuda_cold_streams.shape_data, every batch
of the shape folded into one stream) and beside the first float32 variant: per case and
variant, the coefficients' largest difference (relative to the largest coefficient of the
fit compared with), the information's (Frobenius norm, relative), and the solver iterations
of the stream.
`--corpora` replays every float32 case of the golden corpora against the reference core with
each emulated Gram, as the conformance kit replays them against a GPU engine (its `cuda`
tolerance profile), and prints per case the worst value as a fraction of its tolerance (above
1 fails). A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import itertools
import sys
from pathlib import Path

import numpy as np

# Run as a script from anywhere: the repository root holds the benchmarks package.
if str(Path(__file__).resolve().parents[2]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.micro.cuda_cold_streams import shape_data  # noqa: E402
from benchmarks.profiles import shapes_of  # noqa: E402

from renewable_huber import RenewableHuberRegressor  # noqa: E402

# The module whose weighted_gram the emulation replaces (the package exports a function of the
# same name as the module).
objective = importlib.import_module("renewable_huber.core.objective")

# The low 13 of float32's 23 mantissa bits, which TF32 drops.
_DROPPED = np.uint32(0x1FFF)
_HALF = np.uint32(0x1000)


def tf32(values: np.ndarray, rounding: str) -> np.ndarray:
    """float32 `values` rounded to TF32 (returned as float32): "nearest" rounds to the nearest
    TF32 number, ties away from zero; "zero" drops the low 13 mantissa bits. Finite inputs
    whose rounding would overflow are not expected here (the scaled rows are far from
    float32's largest value)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    if rounding == "nearest":
        bits = bits + _HALF  # the sign bit is untouched: magnitudes round half away from zero
    elif rounding != "zero":
        raise ValueError(f"rounding {rounding!r}: expected 'nearest' or 'zero'")
    return (bits & ~_DROPPED).view(np.float32)


def float32_weighted_gram(rounding: str | None):
    """A replacement for the core's weighted_gram (objective.weighted_gram, which sums the
    float32 fits' Grams in float64 from the widened rows): X' diag(v) X as a float32 GEMM of the
    scaled rows sqrt(v) x, each rounded to float32 and then, unless `rounding` is None, to TF32
    (tf32), mirrored to exact symmetry as the original is, returned in float64."""
    def weighted_gram(xp, X, v):
        scaled = (np.sqrt(v)[:, None] * X).astype(np.float32)
        if rounding is not None:
            scaled = tf32(scaled, rounding)
        gram = (scaled.T @ scaled).astype(np.float64)
        return xp.triu(gram) + xp.triu(gram, 1).T
    return weighted_gram


@contextlib.contextmanager
def float32_gram(rounding: str | None):
    """The reference core computes its weighted Grams as float32_weighted_gram(rounding) does
    inside the block."""
    original = objective.weighted_gram
    objective.weighted_gram = float32_weighted_gram(rounding)
    try:
        yield
    finally:
        objective.weighted_gram = original


def fit_stream(X, y, shape, dtype: str, penalty: str, **params):
    """Every batch of `shape` folded into a new estimator; (coefficients, information,
    iterations) of the final state, in float64."""
    model = RenewableHuberRegressor(dtype=dtype, penalty=penalty, **params)
    iterations = 0
    for start in range(0, shape.rows, shape.batch_size):
        model.partial_fit(X[start:start + shape.batch_size], y[start:start + shape.batch_size])
        iterations += model.n_iter_
    state = model._state
    return (np.asarray(state.coefficients, dtype=np.float64),
            np.asarray(state.information, dtype=np.float64), iterations)


def differences(fit, reference) -> tuple[float, float]:
    """(largest coefficient difference / largest reference coefficient, Frobenius norm of the
    information's difference / the reference information's)."""
    coef, info, _ = fit
    ref_coef, ref_info, _ = reference
    scale = max(float(np.max(np.abs(ref_coef))), np.finfo(np.float64).tiny)
    return (float(np.max(np.abs(coef - ref_coef))) / scale,
            float(np.linalg.norm(info - ref_info)) / float(np.linalg.norm(ref_info)))


def variants(engine: str):
    """(label, fit parameters, context) of each float32 variant, the plain one first."""
    if engine == "emulated":
        core = {"backend": "numpy"}
        return [("float32, Gram summed in float64", core, contextlib.nullcontext),
                ("float32 GEMM", core, lambda: float32_gram(None)),
                ("TF32 nearest", core, lambda: float32_gram("nearest")),
                ("TF32 toward zero", core, lambda: float32_gram("zero"))]
    cuda = {"backend": "native_cuda", "device": "cuda"}
    return [("float32", cuda, contextlib.nullcontext),
            ("float32 FAST_MATH", {**cuda, "cuda_fast_math": True}, contextlib.nullcontext)]


HEADER = ["| case | variant | coef vs float64 | info vs float64 | coef vs float32 | "
          "info vs float32 | iterations |", "|---|---|---:|---:|---:|---:|---:|"]


def rows(shapes, penalties, engine: str):
    """The table's lines after HEADER, one at a time as each fit ends."""
    for shape in shapes:
        X, y = shape_data(shape)
        X32, y32 = X.astype(np.float32), y.astype(np.float32)
        for penalty in penalties:
            reference = fit_stream(X, y, shape, "float64", penalty, backend="numpy")
            yield (f"| {shape.name} {penalty} | float64 (reference core) | | | | | "
                   f"{reference[2]} |")
            plain = None
            for label, params, context in variants(engine):
                with context():
                    fit = fit_stream(X32, y32, shape, "float32", penalty, **params)
                if plain is None:
                    plain = fit
                c64, i64 = differences(fit, reference)
                c32, i32 = differences(fit, plain)
                yield (f"| {shape.name} {penalty} | {label} | {c64:.2e} | {i64:.2e} | "
                       f"{c32:.2e} | {i32:.2e} | {fit[2]} |")


CORPUS_VARIANTS = (("float32 GEMM", None), ("TF32 nearest", "nearest"),
                   ("TF32 toward zero", "zero"))


def corpus_rows():
    """Per float32 case of the shipped corpora: the worst value of its replay against the
    reference core with each emulated Gram of CORPUS_VARIANTS, as a fraction of the `cuda`
    profile's tolerance (the table's lines, header first)."""
    from renewable_huber.conformance.corpus import default_corpus_paths, load_corpus
    from renewable_huber.conformance.reference_engine import ReferenceEngine
    from renewable_huber.conformance.replay import replay_case

    yield "| float32 case | " + " | ".join(label for label, _ in CORPUS_VARIANTS) + " |"
    yield "|---|" + "---:|" * len(CORPUS_VARIANTS)
    for path in default_corpus_paths():
        for case in load_corpus(path):
            if case.dtype != np.float32:
                continue
            cells = []
            for _, rounding in CORPUS_VARIANTS:
                with float32_gram(rounding):
                    result = replay_case(ReferenceEngine(), case, "cuda")
                worst = "-" if result.worst is None else f"{result.worst:.3g}"
                cells.append(worst + ("" if result.outcome == "PASS" else f" {result.outcome}"))
            yield f"| {case.qualified_id} | " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="standard", choices=("standard", "large"))
    parser.add_argument("--shapes", default=None, help="comma-separated shape names")
    parser.add_argument("--penalties", default="none,l1")
    parser.add_argument("--engine", default="emulated", choices=("emulated", "native_cuda"))
    parser.add_argument("--corpora", action="store_true",
                        help="replay the golden corpora's float32 cases instead")
    args = parser.parse_args(argv)
    if args.corpora:
        for line in corpus_rows():
            print(line, flush=True)
        return 0
    try:
        shapes = shapes_of(args.profile, args.shapes.split(",") if args.shapes else None)
    except ValueError as error:
        parser.error(str(error))
    penalties = args.penalties.split(",")
    if any(p not in ("none", "l1") for p in penalties):
        parser.error(f"--penalties: expected none and/or l1, got {args.penalties!r}")
    for line in itertools.chain(HEADER, rows(shapes, penalties, args.engine)):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
