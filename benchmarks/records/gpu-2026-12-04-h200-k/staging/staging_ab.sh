#!/bin/bash
# The staging A/B of section 1 (ab/), run from the repository root with staging-ahead.patch
# applied to the tree and OLD_SRC an engines/ directory of the baseline commit
# (git archive 5f43112 engines | tar -x -C DIR; OLD_SRC=DIR/engines). Writes to OUTDIR.
set -u
OUTDIR=${1:?usage: staging_ab.sh OUTDIR}
mkdir -p "$OUTDIR"
source benchmarks/records/gpu-2026-12-04-h200-f/ab_common.sh
rm -rf build/oldtree
oldtree "${OLD_SRC:?set OLD_SRC to an engines directory of the baseline}" || exit 1
tbuild() {  # src dir: the release library and the lifecycle tool (the test build's library)
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_CUDA=ON -DRH_BUILD_TESTS=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 > "$2.cfg.log" 2>&1 &&
    cmake --build "$2" --target rh_cuda cuda_lifecycle_timing -j 8 > "$2.log" 2>&1
}
tbuild build/oldtree build/staging-old & tbuild . build/staging-new & wait
# Host against device input of one update, 1,000,000 x 32, 32,768 x 90, 65,536 x 32 float64,
# four rounds, the order alternating.
for r in 1 2 3 4; do
  order="old new"; [ $((r % 2)) = 0 ] && order="new old"
  for v in $order; do
    echo "== staging-$v round $r" >> "$OUTDIR/lifecycle-staging.txt"
    timeout 100 "build/staging-$v/engines/cuda/tests/cuda_lifecycle_timing" 10 staging \
      >> "$OUTDIR/lifecycle-staging.txt" 2>&1
  done
done
# Cold host-input streams of the large profile, two rounds.
cold_rounds "$OUTDIR" "$PWD/build/staging-old/engines/cuda/librh_cuda.so" \
  "$PWD/build/staging-new/engines/cuda/librh_cuda.so" 2 summary-large-host.txt \
  --profile large --penalties none --transport host --repetitions 3
