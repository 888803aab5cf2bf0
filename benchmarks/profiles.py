"""The shape matrix of docs/benchmarks.md.

A shape's index is its position inside its profile; the data seed is 42 + that index, so a
profile's data never depends on which other profiles exist.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Shape:
    name: str
    rows: int
    features: int
    batch_size: int
    index: int

    @property
    def seed(self) -> int:
        return 42 + self.index

    @property
    def n_batches(self) -> int:
        return -(-self.rows // self.batch_size)

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "rows": self.rows,
            "features": self.features,
            "batch_size": self.batch_size,
            "index": self.index,
        }


def _profile(*entries: tuple[str, int, int, int]) -> tuple[Shape, ...]:
    return tuple(Shape(name, rows, features, batch, i) for i, (name, rows, features, batch) in
                 enumerate(entries))


PROFILES: dict[str, tuple[Shape, ...]] = {
    "smoke": _profile(
        ("latency-smoke", 2_048, 8, 1_024),
        ("reference-smoke", 8_192, 32, 4_096),
    ),
    "standard": _profile(
        ("latency", 4_096, 16, 4_096),
        ("reference", 100_000, 90, 32_768),
        ("wide", 16_384, 256, 4_096),
        ("streaming", 1_000_000, 32, 65_536),
    ),
    # GPU only: a CPU engine at these sizes measures nothing the standard profile does not.
    "large": _profile(
        ("large-stream", 4_000_000, 128, 262_144),
        ("large-wide", 200_000, 1_024, 50_000),
    ),
}

GPU_ONLY_PROFILES = frozenset({"large"})


def shapes_of(profile: str, only: list[str] | None = None) -> tuple[Shape, ...]:
    """The shapes of `profile`, optionally restricted to the names in `only`."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {sorted(PROFILES)}")
    shapes = PROFILES[profile]
    if only:
        known = {s.name for s in shapes}
        unknown = [n for n in only if n not in known]
        if unknown:
            raise ValueError(f"unknown shape(s) {unknown} in profile {profile!r}; "
                             f"it has {sorted(known)}")
        shapes = tuple(s for s in shapes if s.name in only)
    return shapes


def profile_of(shape_name: str) -> str | None:
    """The profile holding the shape called `shape_name`, or None (shape names are unique)."""
    return next((profile for profile, shapes in PROFILES.items()
                 if any(s.name == shape_name for s in shapes)), None)


def shape_named(shape_name: str) -> Shape:
    """The shape called `shape_name`, in whichever profile holds it."""
    for shapes in PROFILES.values():
        for shape in shapes:
            if shape.name == shape_name:
                return shape
    raise ValueError(f"no profile has a shape {shape_name!r}")
