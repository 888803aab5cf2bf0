#!/bin/bash
# The vectorised validation pass: old (the parent commit's engine) vs new (0178b74) builds, the
# entry-point and staging tests on the new build, Nsight Compute's validation times per launch on
# both, and cold streams of both alternating.
# Run from the repository root: OUTDIR for the logs; OLD_SRC a copy of the parent commit's
# engines/ directory (the "old" side). Needs the package importable, CuPy, Nsight Compute (ncu),
# CMake, Ninja and nvcc.
OUT=${1:?usage: script OUTDIR OLD_SRC}; OLD_SRC=${2:?usage: script OUTDIR OLD_SRC}
export PYTHONPATH=$PWD/python
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../gpu-2026-12-04-h200-f/ab_common.sh"  # libbuild, oldtree, cold_rounds
mkdir -p build "$OUT"
oldtree "$OLD_SRC"
{ cmake -S . -B build/n -G Ninja -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_CUDA=ON -DRH_BUILD_TESTS=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build/n --target rh_cuda test_cuda_entry_points -j 11; } > "$OUT/build.log" 2>&1 &
JOBS=5 libbuild "$PWD/build/oldtree" build/old; wait
build/n/engines/cuda/tests/test_cuda_entry_points > "$OUT/entry_points.txt" 2>&1
build/n/engines/cuda/tests/test_cuda_entry_points --staging > "$OUT/staging.txt" 2>&1
NEW=$PWD/build/n/engines/cuda/librh_cuda.so; OLD=$PWD/build/old/engines/cuda/librh_cuda.so
for side in old new; do
  LIB=$OLD; [ $side = new ] && LIB=$NEW
  for c in "streaming float64" "streaming float32" "reference float64" "wide float64"; do
    RH_CUDA_LIBRARY=$LIB ncu --clock-control none --nvtx --nvtx-include "measure/" -k regex:validate_rows \
      --metrics gpu__time_duration.sum --print-summary per-kernel \
      python3 benchmarks/micro/cuda_stream_kernels.py run $c none > "$OUT/ncu-$side-${c// /-}.log" 2>&1
    echo "$side $c: $(python3 benchmarks/micro/cuda_stream_kernels.py summarize "$OUT/ncu-$side-${c// /-}.log" | head -2 | tr '\n' ' ')"
  done
  RH_CUDA_LIBRARY=$LIB ncu --clock-control none --nvtx --nvtx-include "measure/" -k regex:validate_rows \
    --metrics gpu__time_duration.sum python3 "$HERE/large_validate.py" > "$OUT/ncu-$side-large.log" 2>&1
  echo "$side large: $(grep -E 'gpu__time_duration|^float' "$OUT/ncu-$side-large.log" | tr -s ' ' | tr '\n' ' ')"
done | tee "$OUT/ncu-validation.txt"
cold_rounds "$OUT" "$OLD" "$NEW" 6 cold-ab.txt --repetitions 11 --penalties none \
  --shapes streaming,reference,wide,latency
