"""Assembling, reading, writing and merging shape-sweep records (schema version 2)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

SCHEMA_NAME = "renewable-huber-shape-sweep"
SCHEMA_VERSION = 2

#: the fields that identify one measurement inside a record
KEY_FIELDS = ("label", "engine", "dtype", "penalty", "lifecycle", "operation", "transport")


def case_key(case: dict) -> tuple:
    return (case["shape"]["name"],) + tuple(case[f] for f in KEY_FIELDS)


def comparison_key(case: dict) -> tuple:
    """What two sides must share for their samples to be compared: everything but who ran."""
    return (case["shape"]["name"], case["dataset_sha256"], case["dtype"], case["penalty"],
            case["lifecycle"], case["operation"], case["transport"])


def build(*, tool: str, environment: dict, arguments: dict, rounds: int, sides: list[dict],
          workers: dict, cases: list[dict], skipped: list[dict], unavailable: list[dict]) -> dict:
    return {
        "schema": SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "tool": tool,
        "run_id": uuid.uuid4().hex,
        "interleaved": True,
        "rounds": rounds,
        "environment": environment,
        "arguments": arguments,
        "sides": [{**side, "worker": workers.get(side["label"])} for side in sides],
        "cases": cases,
        "skipped": skipped,
        "unavailable": unavailable,
    }


def select(record: dict, labels: set[str]) -> dict:
    """The part of a record measured by the sides in `labels` (a stand-alone record)."""
    keep = dict(record)
    keep["sides"] = [s for s in record["sides"] if s["label"] in labels]
    keep["cases"] = [c for c in record["cases"] if c["label"] in labels]
    keep["skipped"] = [s for s in record["skipped"] if s.get("label", None) in labels
                       or "label" not in s]
    keep["unavailable"] = [u for u in record["unavailable"] if u["label"] in labels]
    return keep


def merge(records: list[dict]) -> dict:
    """One record holding every side of `records`; labels must not collide."""
    if not records:
        raise ValueError("nothing to merge")
    labels: set[str] = set()
    for record in records:
        if record.get("schema") != SCHEMA_NAME or record.get("version") != SCHEMA_VERSION:
            raise ValueError(f"can only merge {SCHEMA_NAME} v{SCHEMA_VERSION} records")
        mine = {s["label"] for s in record["sides"]}
        clash = labels & mine
        if clash:
            raise ValueError(f"side label(s) {sorted(clash)} appear in more than one record")
        labels |= mine
    merged = dict(records[0])
    merged["rounds"] = min(r["rounds"] for r in records)
    # Samples of separate runs were never interleaved with each other, whatever each claims.
    merged["interleaved"] = (all(r["interleaved"] for r in records)
                             and len({r["run_id"] for r in records}) == 1)
    for field in ("sides", "cases", "skipped", "unavailable"):
        merged[field] = [item for r in records for item in r[field]]
    return merged


def load(path: str | Path) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def write(record: dict, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(path.suffix + ".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1, allow_nan=False)
        handle.write("\n")
    temporary.replace(path)
