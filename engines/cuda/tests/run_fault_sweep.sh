#!/usr/bin/env bash
# The CUDA engine's reliability harnesses on the GPU host, with their logs: the fault-injection
# sweep (cuda_fault_sweep: every CUDA / cuBLAS / cuSOLVER call and allocation of create, restore,
# update and predict made to fail in turn) and the ABI fuzzer's device variant (cuda_device_fuzz),
# each plainly and under compute-sanitizer memcheck (with --leak-check full) so that no failure
# path reads, writes or leaks device memory it should not. OUTDIR/summary.txt has one line per
# step; the other logs are the programs' own output.
#
#   engines/cuda/tests/run_fault_sweep.sh OUTDIR [BUILD_DIR] [FUZZ_CALLS] [FUZZ_SEED]
set -u
OUTDIR=${1:?usage: run_fault_sweep.sh OUTDIR [BUILD_DIR] [FUZZ_CALLS] [FUZZ_SEED]}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
BUILD=${2:-/tmp/rh-fault-build}
CALLS=${3:-20000}
SEED=${4:-1}
JOBS=$(nproc 2>/dev/null || echo 4)
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
SUMMARY="$OUTDIR/summary.txt"
: >"$SUMMARY"
FAILED=0
note() { echo "$*" | tee -a "$SUMMARY"; }
step() {  # name log command...
  local name=$1 log=$2
  shift 2
  local start=$SECONDS
  "$@" >"$OUTDIR/$log" 2>&1
  local rc=$?
  local verdict=PASS
  [ $rc -eq 0 ] || { verdict=FAIL; FAILED=$((FAILED + 1)); }
  note "$(printf '%-28s %-4s rc %-3s %4ss  %s' "$name" "$verdict" "$rc" "$((SECONDS - start))" \
    "$(grep -E 'injected failures|finding\(s\)|ERROR SUMMARY|LEAK SUMMARY|^SKIP|^FAIL' "$OUTDIR/$log" | tail -2 | tr '\n' ' ')")"
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
  echo "compute-sanitizer: $(compute-sanitizer --version 2>/dev/null | tail -1)"
} | tee -a "$SUMMARY"

if ! { cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_CUDA=ON \
         -DRH_BUILD_TESTS=ON -DRH_FAULT_INJECTION=ON &&
       cmake --build "$BUILD" -j "$JOBS" --target cuda_fault_sweep cuda_device_fuzz; } \
     >"$OUTDIR/build.log" 2>&1; then
  note "build FAIL (see build.log)"
  exit 1
fi
SWEEP="$BUILD/engines/cuda/tests/cuda_fault_sweep"
FUZZ="$BUILD/engines/cuda/tests/cuda_device_fuzz"
SANITIZE=(compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9)

step fault_sweep fault_sweep.log "$SWEEP"
step fault_sweep_memcheck fault_sweep_memcheck.log "${SANITIZE[@]}" "$SWEEP"
step device_fuzz device_fuzz.log "$FUZZ" --calls "$CALLS" --seed "$SEED"
step device_fuzz_memcheck device_fuzz_memcheck.log "${SANITIZE[@]}" "$FUZZ" \
  --calls $((CALLS / 10)) --seed "$SEED"
note "FAILED STEPS: $FAILED"
[ $FAILED -eq 0 ]
