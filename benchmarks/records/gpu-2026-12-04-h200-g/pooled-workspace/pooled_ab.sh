#!/bin/bash
# The workspace carried by the pooled resource set: old (the parent commit's engine) vs new
# (5606fa6) builds; the entry-point, lifecycle and staging tests on the new build;
# cuda_lifecycle_timing on both, alternating; cold streams of both, alternating.
# Run from the repository root: OUTDIR for the logs; OLD_SRC a copy of the parent commit's
# engines/ directory (the "old" side). Needs the package importable, CuPy, CMake, Ninja, nvcc.
OUT=${1:?usage: script OUTDIR OLD_SRC}; OLD_SRC=${2:?usage: script OUTDIR OLD_SRC}
export PYTHONPATH=$PWD/python
source "$(dirname "$0")/../../gpu-2026-12-04-h200-f/ab_common.sh"  # oldtree, cold_rounds
mkdir -p build "$OUT"
oldtree "$OLD_SRC"
cfg() {
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_CUDA=ON -DRH_BUILD_TESTS=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 > "$2.cfg.log" 2>&1
}
{ cfg . build/n && cmake --build build/n --target rh_cuda test_cuda_entry_points cuda_lifecycle_timing -j 10; } > "$OUT/build-new.log" 2>&1 &
{ cfg build/oldtree build/o && cmake --build build/o --target rh_cuda cuda_lifecycle_timing -j 6; } > "$OUT/build-old.log" 2>&1
wait
for a in "" --lifecycle --staging; do
  build/n/engines/cuda/tests/test_cuda_entry_points $a > "$OUT/entry$a.txt" 2>&1
done
for r in 1 2; do for side in o n; do
  echo "== $side round $r"; build/$side/engines/cuda/tests/cuda_lifecycle_timing 30 lifecycle
done; done > "$OUT/lifecycle.txt" 2>&1
NEW=$PWD/build/n/engines/cuda/librh_cuda.so; OLD=$PWD/build/o/engines/cuda/librh_cuda.so
cold_rounds "$OUT" "$OLD" "$NEW" 6 cold-ab.txt --repetitions 11 --penalties none \
  --shapes streaming,reference,wide,latency
