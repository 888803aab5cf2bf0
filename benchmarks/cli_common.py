"""Argument handling shared by the sweep and A/B command lines."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def ensure_importable() -> None:
    """Lets `python benchmarks/sweep.py` import the benchmarks package like `python -m` does."""
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)


def csv_list(text: str) -> tuple[str, ...]:
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    if not values:
        raise argparse.ArgumentTypeError("expected a comma-separated, non-empty list")
    return values


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text}")
    return value


def add_stream_case_arguments(parser: argparse.ArgumentParser) -> None:
    """The positional arguments of one standard- or large-profile case: shape, dtype, penalty."""
    from .profiles import shapes_of

    parser.add_argument("shape",
                        choices=[s.name for p in ("standard", "large") for s in shapes_of(p)])
    parser.add_argument("dtype", choices=["float64", "float32"])
    parser.add_argument("penalty", choices=["none", "l1"])


def stream_case_commands(description: str, stream_command: str):
    """(parser, its subcommands) of a micro script whose command `stream_command` runs one
    standard- or large-profile case (add_stream_case_arguments); the caller adds the other
    commands."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    add_stream_case_arguments(commands.add_parser(stream_command))
    return parser, commands


def add_matrix_arguments(parser: argparse.ArgumentParser, *, default_lifecycles: str,
                         default_operations: str) -> None:
    parser.add_argument("--profile", default="smoke", choices=("smoke", "standard", "large"))
    parser.add_argument("--shapes", type=csv_list, default=None,
                        help="only these shape names of the profile")
    parser.add_argument("--dtypes", type=csv_list, default=("float64", "float32"))
    parser.add_argument("--penalties", type=csv_list, default=("none", "l1"))
    parser.add_argument("--lifecycles", type=csv_list, default=csv_list(default_lifecycles))
    parser.add_argument("--operations", type=csv_list, default=csv_list(default_operations))
    parser.add_argument("--transports", type=csv_list, default=("host",))
    parser.add_argument("--threads", type=positive_int, default=os.cpu_count() or 1,
                        help="n_jobs of native CPU engines, ours and the peer's (NumPy's BLAS "
                             "is always pinned to 1 thread)")
    parser.add_argument("--warmups", type=int, default=2)
    parser.add_argument("--min-sample-seconds", type=float, default=0.1)
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="where the .npy datasets handed to workers are written")
    parser.add_argument("--no-progress", action="store_true")
