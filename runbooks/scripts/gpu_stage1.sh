#!/usr/bin/env bash
# GPU host stage 1, correctness. Writes its log lines to stdout; exit 0 only when every step
# passed. Needs: nvcc + cuBLAS/cuSOLVER, cmake, compute-sanitizer, .whl/ from
# prepare_device_wheels.sh.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$REPO_ROOT"
step "1.1 build both engines and the C tests"
eval "$(runbooks/scripts/build_engines.sh ON)"
export RH_CPU_LIBRARY RH_CUDA_LIBRARY
BUILD_DIR="${BUILD_DIR:-$REPO_ROOT/build/runbook}"

step "1.2 ctest (C engines, ABI layout probe)"
ctest --test-dir "$BUILD_DIR" --output-on-failure

step "1.3 CUDA device suite (engines/cuda/tests/run_device_suite.sh)"
[ -x engines/cuda/tests/run_device_suite.sh ] || fail "engines/cuda/tests/run_device_suite.sh missing"
engines/cuda/tests/run_device_suite.sh "$BUILD_DIR"

step "1.4 full Python test suite against the cmake-built engines"
PYTHONPATH="$REPO_ROOT/python" python3 -m pytest -q -x python/tests

step "1.5 conformance of librh_cuda (golden corpora, negative cases)"
PYTHONPATH="$REPO_ROOT/python" python3 -m renewable_huber conformance --library "$RH_CUDA_LIBRARY"

step "1.6 compute-sanitizer memcheck and racecheck on a CUDA conformance replay"
for tool in memcheck racecheck; do
  PYTHONPATH="$REPO_ROOT/python" compute-sanitizer --tool "$tool" --error-exitcode 99 \
    --target-processes all python3 -m renewable_huber conformance --library "$RH_CUDA_LIBRARY"
done

step "1.7 export table: exactly the 17 ABI symbols"
for lib in "$RH_CPU_LIBRARY" "$RH_CUDA_LIBRARY"; do
  exported="$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TW]$/ {print $3}' | sort)"
  expected="$(python3 -c "import json; print('\n'.join(sorted(s['name'] for s in json.load(open('abi/rh_cuda_contract.json'))['symbols'])))")"
  diff <(echo "$expected") <(echo "$exported") || fail "$lib exports differ from the ABI"
  echo "$lib: $(echo "$exported" | wc -l) symbols, as the ABI declares"
done

step "1.8 wheel smoke test in a clean venv (wheel built off-device, engines from cmake)"
ls .whl/renewable_huber-*.whl >/dev/null 2>&1 || fail "no wheel in .whl/: run prepare_device_wheels.sh"
rm -rf /tmp/rh-smoke-venv
# --system-site-packages only for NumPy/CuPy: the device has no network to fetch them.
python3 -m venv --system-site-packages /tmp/rh-smoke-venv
/tmp/rh-smoke-venv/bin/pip install --quiet --no-index --no-deps .whl/renewable_huber-*.whl
(cd /tmp && /tmp/rh-smoke-venv/bin/python "$REPO_ROOT/runbooks/scripts/wheel_smoke.py")
step "stage 1 PASSED"
