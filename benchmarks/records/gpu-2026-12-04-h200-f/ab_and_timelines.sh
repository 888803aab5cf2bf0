#!/bin/bash
# One engine change's A/B as this record ran it for two changes (fused-xtu/ and
# staged-row-pass/, whose ab_and_timelines.sh give the cases): builds of the old side (OLD_SRC, a
# copy of the parent commit's engines/ directory) and of this tree, test_cuda_numerics on the new
# one, one profiled cold stream per case and build (cuda_stream_timeline.py), then ROUNDS
# rounds of cold streams alternating the builds.
# Run from the repository root: OUTDIR for the logs. Set TIMELINE_CASES (shape:dtype:penalty
# ...), TIMELINE_LINES and NUMERICS_LINES (grep patterns of the lines to print), ROUNDS and
# COLD_SHAPES. Needs the package importable, CuPy and PyTorch (the timeline's profiler), CMake,
# Ninja and nvcc.
OUT=${1:?usage: ab_and_timelines.sh OUTDIR OLD_SRC}; OLD_SRC=${2:?usage: ab_and_timelines.sh OUTDIR OLD_SRC}
: "${TIMELINE_CASES:?}" "${TIMELINE_LINES:?}" "${NUMERICS_LINES:?}" "${ROUNDS:?}" "${COLD_SHAPES:?}"
export PYTHONPATH=$PWD/python
source "$(dirname "$0")/ab_common.sh"
mkdir -p build "$OUT"
oldtree "$OLD_SRC"
{ cmake -S . -B build/n -G Ninja -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_CUDA=ON -DRH_BUILD_TESTS=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build/n --target rh_cuda test_cuda_numerics -j 12; } > "$OUT/build.log" 2>&1 &
JOBS=4 libbuild "$PWD/build/oldtree" build/old; wait
timeout 150 build/n/engines/cuda/tests/test_cuda_numerics > "$OUT/test_cuda_numerics.txt" 2>&1
grep -E "$NUMERICS_LINES" "$OUT/test_cuda_numerics.txt" | head -50
NEW=$PWD/build/n/engines/cuda/librh_cuda.so; OLD=$PWD/build/old/engines/cuda/librh_cuda.so
for side in old new; do
  LIB=$OLD; [ $side = new ] && LIB=$NEW
  mkdir -p "$OUT/tl-$side"
  RH_CUDA_LIBRARY=$LIB timeout 60 python3 benchmarks/micro/cuda_stream_timeline.py run "$OUT/tl-$side" \
    $TIMELINE_CASES > "$OUT/timeline-$side.txt" 2>&1
  echo "== $side"; grep -E "$TIMELINE_LINES" "$OUT/timeline-$side.txt"
done
rm -rf "$OUT"/tl-*
cold_rounds "$OUT" "$OLD" "$NEW" "$ROUNDS" cold-ab.txt --repetitions 11 --penalties none,l1 \
  --shapes "$COLD_SHAPES"
