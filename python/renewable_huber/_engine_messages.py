"""The one reader of the engines' refusals of data values (docs/abi.md, "Refused data values").

Every engine that refuses a value in one of its arrays (NaN or infinity in a batch, a negative
weight, a bad restored state or prediction design) starts its last-error text with

    <Struct>.<field>[<index>] is <kind>: <prose>
    <Struct>.<field>[<row>, <column>] is <kind>: <prose>

where <Struct> is the ABI struct the array came in (RhCudaHostBatch, RhCudaDeviceBatch,
RhCudaHostStateView, RhCudaPrediction), <field> its member, the indices decimal and 0-based
(row and column of a row-major matrix), and <kind> one of nan, inf, -inf, negative. The prose
after ": " is for people and is never read here. Anything else the engines write (struct
headers, scalars, CUDA failures) is prose as a whole, and parse_refused_value returns None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = ("nan", "inf", "-inf", "negative")

_PREFIX = re.compile(
    r"(?P<struct>RhCuda[A-Za-z]+)\.(?P<field>[A-Za-z_][A-Za-z0-9_]*)"
    r"\[(?P<first>0|[1-9][0-9]*)(?:, (?P<second>0|[1-9][0-9]*))?\]"
    r" is (?P<kind>nan|inf|-inf|negative): "
)


@dataclass(frozen=True)
class RefusedValue:
    """Where the refused value sits and what was wrong with it."""

    struct: str
    field: str
    position: tuple[int, ...]  # (index,) in a vector, (row, column) in a matrix
    kind: str  # one of KINDS

    @property
    def non_finite(self) -> bool:
        return self.kind != "negative"

    def where(self) -> str:
        """'row 3, column 1' or 'index 5', as the package's own messages say it."""
        if len(self.position) == 2:
            return f"row {self.position[0]}, column {self.position[1]}"
        return f"index {self.position[0]}"


def parse_refused_value(text: str | None) -> RefusedValue | None:
    """The refusal at the start of an engine's last-error `text`, or None if it is no refusal
    of a data value."""
    if not text:
        return None
    match = _PREFIX.match(text)
    if match is None:
        return None
    first, second = match["first"], match["second"]
    position = (int(first),) if second is None else (int(first), int(second))
    return RefusedValue(match["struct"], match["field"], position, match["kind"])
