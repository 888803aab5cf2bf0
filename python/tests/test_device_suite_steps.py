"""engines/cuda/tests/run_device_suite.sh's step selection (RH_SUITE_STEPS), run here with stand-ins
for the GPU host's tools (cmake, ctest, compute-sanitizer, nvidia-smi, nvcc and python3) on PATH:
what runs, the SKIP line of every step left out, the exit status, and the refusal of an unknown
step. The suite itself runs on a GPU host (runbooks/gpu-host.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tool_stand_ins import write_stand_ins

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "engines" / "cuda" / "tests" / "run_device_suite.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the suite is a bash script")

# Each stand-in logs its call to $CALLS and answers the way the suite reads the real tool.
STUBS = {
    "cmake": r"""
echo "cmake $*" >> "$CALLS"
if [ "$1" = --build ]; then
  mkdir -p "$2/engines/cpu_c" "$2/engines/cuda/tests"
  : > "$2/engines/cpu_c/librh_cpu.so"
  : > "$2/engines/cuda/librh_cuda.so"
  : > "$2/engines/cuda/librh_cuda_testing.so"
  for tool in cuda_update_timing test_cuda_entry_points; do
    printf '#!/bin/sh\necho "%s $*" >> "$CALLS"\n' "$tool" > "$2/engines/cuda/tests/$tool"
    chmod +x "$2/engines/cuda/tests/$tool"
  done
fi
exit 0
""",
    "ctest": r"""
echo "ctest $*" >> "$CALLS"
if [ "$1" = -N ]; then echo "  Test  #1: test_cuda_numerics"; exit 0; fi
if [ -n "${STUB_CTEST_FAILS:-}" ]; then echo "0% tests passed, 1 tests failed out of 1"; exit 8; fi
echo "100% tests passed, 0 tests failed out of 1"
""",
    "compute-sanitizer": r"""
echo "compute-sanitizer $*" >> "$CALLS"
echo "========= ERROR SUMMARY: 0 errors"
""",
    "nvidia-smi": 'echo "Stand-in GPU, 9.0, 0.0, 1 MiB, 1 MHz"\n',
    "nvcc": 'echo "Build stand-in"\n',
    "python3": r"""
echo "python3 $*" >> "$CALLS"
case "$*" in
  --version) echo "Python 3.stand-in" ;;
  "-c import numpy"*) echo "0.stand-in" ;;
  *"-m pytest"*) echo "3 passed in 0.01s" ;;
  *"-m renewable_huber conformance"*) echo "CONFORMS: 1 passed, 0 failed, 0 skipped" ;;
esac
exit 0
""",
}

VERDICTS = [
    "ctest", "sanitizer-memcheck", "sanitizer-memcheck-solves", "sanitizer-memcheck-switches",
    "sanitizer-racecheck", "sanitizer-racecheck-solves", "sanitizer-racecheck-switches",
    "exports-librh_cuda.so", "exports-librh_cpu.so", "pytest-cuda", "conformance-cuda", "timing",
    "pytest-all",
]


@pytest.fixture()
def host(tmp_path):
    bin_dir = write_stand_ins(tmp_path / "bin", STUBS)

    def run(**env):
        calls = tmp_path / "calls.txt"
        calls.write_text("")
        out = tmp_path / "out"
        shutil.rmtree(out, ignore_errors=True)
        environment = {
            key: value for key, value in os.environ.items()
            if not key.startswith("RH_SUITE_")
        }
        environment.update(PATH=f"{bin_dir}:{os.environ['PATH']}", CALLS=str(calls), **env)
        done = subprocess.run(
            ["bash", str(SUITE), str(out), str(tmp_path / "build")], env=environment,
            capture_output=True, text=True, timeout=60, check=False,
        )
        summary = (out / "summary.txt").read_text() if (out / "summary.txt").exists() else ""
        status = {}
        for line in summary.splitlines():
            fields = line.split()
            if len(fields) >= 2 and fields[0] in VERDICTS + ["build"]:
                status[fields[0]] = fields[1]
        return done, status, calls.read_text()

    return run


def test_every_step_runs_by_default(host, tmp_path):
    done, status, calls = host()
    assert done.returncode == 0, done.stdout + done.stderr
    assert status == dict.fromkeys(["build", *VERDICTS], "PASS")
    assert "compute-sanitizer --tool racecheck" in calls and "cuda_update_timing 10" in calls
    # The switches' run: the test build's library, the switch, the incremental streams alone.
    assert ("compute-sanitizer --tool memcheck --error-exitcode 9 env RH_CUDA_LIBRARY="
            f"{tmp_path}/build/engines/cuda/librh_cuda_testing.so RH_CUDA_TEST_GRAM_FLIPS=device "
            "python3") in calls
    assert "sanitizer_solve_paths.py --incremental-only" in calls


def test_only_the_named_steps_run_and_the_others_say_skip(host):
    done, status, calls = host(RH_SUITE_STEPS="exports,timing")
    assert done.returncode == 0, done.stdout + done.stderr
    ran = {"build", "exports-librh_cuda.so", "exports-librh_cpu.so", "timing"}
    assert {name for name, verdict in status.items() if verdict == "PASS"} == ran
    assert {name for name, verdict in status.items() if verdict == "SKIP"} == set(VERDICTS) - ran
    # Nothing of a skipped step was started: no test run, no sanitizer, no Python suite.
    assert "ctest --output-on-failure" not in calls
    assert "compute-sanitizer" not in calls and "-m pytest" not in calls
    assert "RH_SUITE_STEPS=exports,timing" in done.stdout


def test_full_pytest_off_skips_only_the_full_suite(host):
    done, status, _ = host(RH_SUITE_FULL_PYTEST="0")
    assert done.returncode == 0
    assert status.pop("pytest-all") == "SKIP"
    assert set(status.values()) == {"PASS"}


def test_a_failed_step_fails_the_suite(host):
    done, status, _ = host(RH_SUITE_STEPS="ctest,timing", STUB_CTEST_FAILS="1")
    assert done.returncode != 0
    assert (status["ctest"], status["timing"]) == ("FAIL", "PASS")
    assert "FAILED STEPS: 1" in done.stdout


def test_an_unknown_step_is_refused_before_anything_runs(host):
    done, status, calls = host(RH_SUITE_STEPS="ctest,sanitizers")
    assert done.returncode == 2
    assert "unknown step 'sanitizers'" in done.stderr and "memcheck racecheck" in done.stderr
    assert status == {} and calls == ""
