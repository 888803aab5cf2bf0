#!/usr/bin/env bash
# Builds the engines (and the C tests) with cmake into BUILD_DIR (default build/runbook).
# Usage: build_engines.sh [cuda=ON|OFF|AUTO]   prints the library paths as shell exports.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
CUDA="${1:-AUTO}"
BUILD_DIR="${BUILD_DIR:-$REPO_ROOT/build/runbook}"
JOBS="${JOBS:-2}"
step "cmake configure (RH_BUILD_CUDA=$CUDA) -> $BUILD_DIR" >&2
cmake -S "$REPO_ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_TESTS=ON \
  -DRH_BUILD_CUDA="$CUDA" >&2
step "cmake build -j$JOBS" >&2
cmake --build "$BUILD_DIR" -j"$JOBS" >&2
cpu_lib="$(find "$BUILD_DIR" -name 'librh_cpu.so' -print -quit)"
cuda_lib="$(find "$BUILD_DIR" -name 'librh_cuda.so' -print -quit)"
[ -n "$cpu_lib" ] || fail "librh_cpu.so was not built under $BUILD_DIR"
echo "export RH_CPU_LIBRARY=$cpu_lib"
if [ -n "$cuda_lib" ]; then echo "export RH_CUDA_LIBRARY=$cuda_lib"; fi
if [ "$CUDA" = ON ] && [ -z "$cuda_lib" ]; then fail "librh_cuda.so was not built"; fi
