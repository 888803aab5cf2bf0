#!/usr/bin/env bash
# GPU host stage 1, correctness. Writes its log lines to stdout; exit 0 only when every step
# passed. Needs: nvcc + cuBLAS/cuSOLVER, cmake, compute-sanitizer, .whl/ from
# prepare_device_wheels.sh. RESULTS (set by gpu_host.sh) is where the device suite's logs go.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$REPO_ROOT"
BUILD_DIR="${BUILD_DIR:-$REPO_ROOT/build/runbook}"
SUITE_DIR="${RESULTS:-$BUILD_DIR}/device-suite"

step "1.1 build both engines and the C tests"
eval "$(JOBS="$(nproc)" runbooks/scripts/build_engines.sh ON)"
export RH_CPU_LIBRARY RH_CUDA_LIBRARY

# One pass does ctest (CPU + CUDA, a CUDA skip counts as a failure), compute-sanitizer
# memcheck and racecheck on the CUDA smoke test, the export table of both libraries, pytest
# -m cuda and the full suite, the conformance kit on librh_cuda, and the per-batch timing.
step "1.2 CUDA device suite (engines/cuda/tests/run_device_suite.sh) -> $SUITE_DIR"
engines/cuda/tests/run_device_suite.sh "$SUITE_DIR" "$BUILD_DIR" || fail "device suite: see $SUITE_DIR/summary.txt"

step "1.3 wheel smoke test in a clean venv (wheel built off-device, librh_cuda from cmake)"
ls .whl/renewable_huber-*.whl >/dev/null 2>&1 || fail "no wheel in .whl/: run prepare_device_wheels.sh"
rm -rf /tmp/rh-smoke-venv
python3 -m venv /tmp/rh-smoke-venv
/tmp/rh-smoke-venv/bin/pip install --quiet --no-index --no-deps .whl/renewable_huber-*.whl
# The device has no network to fetch NumPy/CuPy: the host's copies are appended through a .pth
# file (after the venv's own site-packages, so the wheel's package is the one imported).
venv_site="$(/tmp/rh-smoke-venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
python3 "$REPO_ROOT"/packaging/array_library_folders.py >"$venv_site/host-array-libraries.pth"
# native_cpu must come from the wheel itself, not the cmake build exported above.
(cd /tmp && env -u RH_CPU_LIBRARY /tmp/rh-smoke-venv/bin/python "$REPO_ROOT/runbooks/scripts/wheel_smoke.py")
step "stage 1 PASSED"
