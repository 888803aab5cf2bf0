"""Record validator: the JSON Schema (structure) plus the semantic checks a schema cannot
express (duplicates, timings that are not positive finite numbers, statistics that disagree
with their samples, labels that contradict each other).

    python benchmarks/validate.py benchmarks/records/*.json
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

if __package__ in (None, ""):
    from cli_common import ensure_importable

    ensure_importable()

from benchmarks.engines import OWN_ENGINES, PEER_ENGINES, engine_device  # noqa: E402
from benchmarks.measurement import summarize  # noqa: E402
from benchmarks.record import case_key  # noqa: E402

SCHEMA_PATH = Path(__file__).resolve().parent / "schema" / "shape_sweep_v2.schema.json"
TIMING_FIELDS = ("median", "min", "max")


def schema_problems(record) -> list[str]:
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    return [f"schema: at /{'/'.join(str(p) for p in error.absolute_path)}: {error.message}"
            for error in sorted(validator.iter_errors(record), key=lambda e: list(e.path))]


def _is_positive_finite(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def _case_problems(index: int, case: dict, labels: dict[str, str], rounds: int) -> list[str]:
    where = f"case {index} ({case.get('engine')} {case.get('shape', {}).get('name')})"
    found = []
    samples = case.get("samples", [])
    for field in TIMING_FIELDS:
        if not _is_positive_finite(case.get(field)):
            found.append(f"{where}: {field} = {case.get(field)!r} is not a positive finite time")
    bad = [s for s in samples if not _is_positive_finite(s)]
    if bad:
        found.append(f"{where}: samples hold non-positive or non-finite times {bad[:3]}")
    elif samples:
        stats = summarize(samples)
        for field in (*TIMING_FIELDS, "rel_mad"):
            value = case.get(field)
            if _is_positive_finite(value) or field == "rel_mad":
                if not isinstance(value, (int, float)) or not math.isclose(
                        value, stats[field], rel_tol=1e-9, abs_tol=1e-15):
                    found.append(f"{where}: {field} = {value!r} disagrees with its samples "
                                 f"({stats[field]!r})")
    case_rounds = case.get("rounds", [])
    if len(case_rounds) != len(samples):
        found.append(f"{where}: {len(samples)} samples but {len(case_rounds)} round indices")
    if case_rounds != sorted(set(case_rounds)) or any(r >= rounds for r in case_rounds):
        found.append(f"{where}: round indices {case_rounds} are not distinct, increasing and "
                     f"below rounds = {rounds}")
    engine = case.get("engine")
    if engine in OWN_ENGINES + PEER_ENGINES:
        device = engine_device(engine)
        if case.get("device") != device:
            found.append(f"{where}: device {case.get('device')!r} but {engine} runs on {device}")
        if case.get("transport") == "device" and device == "cpu":
            found.append(f"{where}: device transport on CPU engine {engine}")
        if case.get("includes_transfer") != (case.get("transport") == "host" and device == "cuda"):
            found.append(f"{where}: includes_transfer = {case.get('includes_transfer')!r} "
                         f"contradicts transport {case.get('transport')!r} on {device}")
    if case.get("host_input") != (case.get("transport") == "host"):
        found.append(f"{where}: host_input = {case.get('host_input')!r} contradicts transport "
                     f"{case.get('transport')!r}")
    if case.get("lifecycle") == "steady" and case.get("operation") == "fit":
        found.append(f"{where}: the steady lifecycle measures partial_fit only, got fit")
    label = case.get("label")
    if label not in labels:
        found.append(f"{where}: label {label!r} names no side of the record")
    elif labels[label] != engine:
        found.append(f"{where}: label {label!r} belongs to engine {labels[label]!r}, "
                     f"not {engine!r}")
    shape = case.get("shape", {})
    if isinstance(shape, dict) and "index" in shape and case.get("seed") != 42 + shape["index"]:
        found.append(f"{where}: seed {case.get('seed')!r} is not 42 + shape index {shape['index']}")
    iterations = case.get("iterations", [])
    if isinstance(iterations, list) and case.get("iterations_total") != sum(
            i for i in iterations if isinstance(i, int)):
        found.append(f"{where}: iterations_total disagrees with iterations")
    if isinstance(shape, dict) and case.get("operation") == "partial_fit" and shape.get("rows"):
        expected = -(-shape["rows"] // shape["batch_size"])
        if len(iterations) != expected:
            found.append(f"{where}: {len(iterations)} per-batch iteration counts for "
                         f"{expected} batches")
    return found


def semantic_problems(record: dict) -> list[str]:
    found = []
    labels = {s.get("label"): s.get("engine") for s in record.get("sides", [])}
    if len(labels) != len(record.get("sides", [])):
        found.append("sides: a label appears twice")
    seen: dict[tuple, int] = {}
    datasets: dict[tuple, str] = {}
    for index, case in enumerate(record.get("cases", [])):
        try:
            key = case_key(case)
        except (KeyError, TypeError):
            continue
        if key in seen:
            found.append(f"case {index}: duplicate measurement key {key} (first at case "
                         f"{seen[key]})")
        seen.setdefault(key, index)
        data_key = (case["shape"]["name"], case["dtype"])
        if datasets.setdefault(data_key, case.get("dataset_sha256")) != case.get("dataset_sha256"):
            found.append(f"case {index}: dataset_sha256 differs from another case of "
                         f"{data_key[0]} {data_key[1]}: the sides saw different data")
        found.extend(_case_problems(index, case, labels, record.get("rounds", 0)))
    return found


def problems(record) -> list[str]:
    """Every reason `record` is not a valid v2 record (empty when valid)."""
    found = schema_problems(record)
    if isinstance(record, dict) and not any("at /:" in p for p in found):
        found.extend(semantic_problems(record))
    return found


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: validate.py RECORD.json [...]", file=sys.stderr)
        return 2
    failed = False
    for path in paths:
        try:
            record = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            print(f"{path}: unreadable: {error}")
            failed = True
            continue
        found = problems(record)
        failed = failed or bool(found)
        print(f"{path}: {'valid' if not found else f'{len(found)} problem(s)'}")
        for problem in found:
            print(f"  {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
