"""`renewable-huber conformance ...`: the runner from the command line."""

from __future__ import annotations

import argparse
import sys

from ..exceptions import RenewableHuberError
from .capabilities import Capabilities, load_capabilities
from .runner import run_conformance
from .tolerances import shipped_profiles

PROG = "renewable-huber conformance"


def _parser(engine_profiles: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Replay the golden corpora, checkpoint migrations and negative cases "
        "against an engine driven only through the rh_cuda ABI (see conformance/README.md).",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--library", metavar="PATH", help="shared library exporting the 17 ABI symbols"
    )
    target.add_argument(
        "--reference", action="store_true", help="check the NumPy reference against the corpora"
    )
    parser.add_argument(
        "--corpus", nargs="+", metavar="FILE", help="corpus files (default: native_core_v1 to v4)"
    )
    parser.add_argument("--device", type=int, metavar="N", help="device_id for engine_create")
    parser.add_argument(
        "--capabilities", metavar="FILE", help="capabilities JSON (default: full host contract)"
    )
    parser.add_argument(
        "--tolerance-profile",
        choices=["auto", *engine_profiles],
        default="auto",
        help="engine tolerance floors (the engine profiles of conformance/tolerances.json); "
        "auto: cuda for a CUDA library or a host with devices, else cpu",
    )
    parser.add_argument("--negative-cases", metavar="FILE", help="negative cases JSON")
    return parser


def _engine(args):
    if args.reference:
        from .reference_engine import ReferenceEngine

        return ReferenceEngine()
    from .abi_engine import AbiEngine

    return AbiEngine(args.library, device=args.device)


def main(argv: list[str]) -> int:
    try:
        engine_profiles = shipped_profiles().engine_profiles()
    except (RenewableHuberError, FileNotFoundError) as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    args = _parser(engine_profiles).parse_args(argv)
    try:
        engine = _engine(args)
        capabilities = (
            load_capabilities(args.capabilities)
            if args.capabilities
            else Capabilities.everything_on_host()
        )
        profile = None if args.tolerance_profile == "auto" else args.tolerance_profile
        print(f"engine: {engine.description}")
        print(f"tolerance profile: {profile or engine.default_profile()}")
        summary = run_conformance(
            engine,
            corpus_paths=args.corpus,
            capabilities=capabilities,
            profile=profile,
            negative_cases_path=args.negative_cases,
            report=lambda result: print(result.line(), flush=True),
        )
    except (RenewableHuberError, FileNotFoundError, PermissionError, ValueError) as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    verdict = "CONFORMS" if summary.passed else "DOES NOT CONFORM"
    print(f"{verdict}: {summary.line()}")
    return 0 if summary.passed else 1
