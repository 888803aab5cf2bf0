"""The conformance kit on an engine of the INSTALLED renewable_huber, never a checkout's:

    python packaging/run_conformance.py native_cpu|native_cuda

Runs from any folder; refuses when `renewable_huber` is imported from outside site-packages
or an engine override (RH_CPU_LIBRARY / RH_CUDA_LIBRARY) is set, so a pass speaks for the
wheel. The engine's capabilities file comes from this checkout (conformance/capabilities).
Exit status: the kit's (0 CONFORMS, 1 DOES NOT CONFORM, 2 bad input), or 2 for a refusal.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

CAPABILITIES = {"native_cpu": "cpu.json", "native_cuda": "cuda.json"}
HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in CAPABILITIES:
        print(f"usage: run_conformance.py {{{'|'.join(CAPABILITIES)}}}", file=sys.stderr)
        return 2
    kind = argv[0]
    import renewable_huber
    from renewable_huber._loader import ENVIRONMENT_OVERRIDES, library_file_names
    from renewable_huber.conformance import main as conformance_main

    package = Path(renewable_huber.__file__).resolve().parent
    site = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    if package.parent not in site:
        print(f"renewable_huber imported from {package}, not from site-packages {sorted(site)}",
              file=sys.stderr)
        return 2
    if os.environ.get(ENVIRONMENT_OVERRIDES[kind]):
        print(f"{ENVIRONMENT_OVERRIDES[kind]} is set: unset it to test the wheel's engine",
              file=sys.stderr)
        return 2
    library = Path(renewable_huber.get_library_dir()) / library_file_names(kind)[0]
    capabilities = HERE.parent / "conformance" / "capabilities" / CAPABILITIES[kind]
    print(f"conformance of {library} ({capabilities.name})", flush=True)
    return int(conformance_main(["--library", str(library), "--capabilities", str(capabilities)]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
