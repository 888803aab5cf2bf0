"""What an engine declares it supports; cases that need more are reported SKIP, never dropped.

File format (JSON, every key required, no others):
    {"schema": "renewable-huber-capabilities", "schema_version": 1,
     "dtypes": ["float32", "float64"], "penalties": ["none", "l1"],
     "device_input": false, "device_predict": false}
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..exceptions import ValidationError

SCHEMA_NAME = "renewable-huber-capabilities"
_DTYPES = ("float32", "float64")
_PENALTIES = ("none", "l1")
_KEYS = {"schema", "schema_version", "dtypes", "penalties", "device_input", "device_predict"}


@dataclasses.dataclass(frozen=True)
class Capabilities:
    dtypes: frozenset[str]
    penalties: frozenset[str]
    device_input: bool
    device_predict: bool

    @classmethod
    def everything_on_host(cls) -> Capabilities:
        """The default without a file: the full host contract (every engine must support it),
        no device memory."""
        return cls(frozenset(_DTYPES), frozenset(_PENALTIES), False, False)

    def missing_for(self, dtype: str, penalty: str | None = None) -> str | None:
        """The reason a case with this dtype/penalty cannot run here, or None when it can."""
        if dtype not in self.dtypes:
            return f"dtype {dtype} not in the declared capabilities {sorted(self.dtypes)}"
        if penalty is not None and penalty not in self.penalties:
            return f"penalty {penalty} not in the declared capabilities {sorted(self.penalties)}"
        return None

    def unmet(self, requires: dict) -> str | None:
        """Reason a negative case's `requires` (capability name -> required value) is unmet."""
        for name, wanted in sorted(requires.items()):
            have = getattr(self, name, None)
            if have is None:
                raise ValidationError(f"negative case requires unknown capability {name!r}")
            if have != wanted:
                return f"needs {name}={wanted!r}, the engine declares {have!r}"
        return None


def _strings(document: dict, key: str, allowed: tuple[str, ...], path: Path) -> frozenset[str]:
    values = document[key]
    if not isinstance(values, list) or not values or any(v not in allowed for v in values):
        raise ValidationError(
            f"capabilities {path}: {key!r} must be a non-empty list drawn from {list(allowed)}, "
            f"got {values!r}"
        )
    return frozenset(values)


def load_capabilities(path: str | Path) -> Capabilities:
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ValidationError(f"capabilities {path}: cannot read JSON ({error})") from error
    if not isinstance(document, dict) or set(document) != _KEYS:
        keys = sorted(document) if isinstance(document, dict) else type(document).__name__
        raise ValidationError(
            f"capabilities {path}: keys must be exactly {sorted(_KEYS)}, got {keys}"
        )
    if document["schema"] != SCHEMA_NAME or document["schema_version"] != 1:
        raise ValidationError(
            f"capabilities {path}: schema must be {SCHEMA_NAME!r} version 1, got "
            f"{document['schema']!r} version {document['schema_version']!r}"
        )
    for key in ("device_input", "device_predict"):
        if not isinstance(document[key], bool):
            raise ValidationError(f"capabilities {path}: {key!r} must be true or false")
    return Capabilities(
        dtypes=_strings(document, "dtypes", _DTYPES, path),
        penalties=_strings(document, "penalties", _PENALTIES, path),
        device_input=document["device_input"],
        device_predict=document["device_predict"],
    )
