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
# The release library and the lifecycle tool (the test build's library), both sides at once.
libbuild build/oldtree build/staging-old cuda_lifecycle_timing &
libbuild . build/staging-new cuda_lifecycle_timing &
wait
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
