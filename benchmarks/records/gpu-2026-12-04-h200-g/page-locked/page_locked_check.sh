#!/bin/bash
# Page-locked host input read in place: the entry-point tests (staging, lifecycle, default) on a
# build of the tree, then pinned_probe.py on its librh_cuda.
# Run from the repository root: OUTDIR for the logs. Needs CuPy, CMake, Ninja and nvcc.
OUT=${1:?usage: page_locked_check.sh OUTDIR}
export PYTHONPATH=$PWD/python
mkdir -p build "$OUT"
cmake -S . -B build/n -G Ninja -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_CUDA=ON -DRH_BUILD_TESTS=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/cfg.log" 2>&1 &&
  cmake --build build/n --target rh_cuda test_cuda_entry_points -j 16 > "$OUT/build.log" 2>&1
for a in --staging --lifecycle ""; do
  build/n/engines/cuda/tests/test_cuda_entry_points $a > "$OUT/entry$a.txt" 2>&1
done
RH_CUDA_LIBRARY=$PWD/build/n/engines/cuda/librh_cuda.so \
  python3 "$(dirname "$0")/pinned_probe.py" > "$OUT/probe.txt" 2>&1
