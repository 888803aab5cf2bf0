"""The language-neutral conformance kit's runner (contract: conformance/README.md).

from renewable_huber.conformance import AbiEngine, run_conformance
summary = run_conformance(AbiEngine("build/ctest/engines/cpu_c/librh_cpu.so"))  # make test-c
"""

from .abi_engine import AbiEngine
from .capabilities import Capabilities, load_capabilities
from .command_line import main
from .corpus import GoldenCase, default_corpus_paths, load_corpus
from .reference_engine import ReferenceEngine
from .report import CheckResult
from .runner import RunSummary, run_conformance

__all__ = [
    "AbiEngine",
    "Capabilities",
    "CheckResult",
    "GoldenCase",
    "ReferenceEngine",
    "RunSummary",
    "default_corpus_paths",
    "load_capabilities",
    "load_corpus",
    "main",
    "run_conformance",
]
