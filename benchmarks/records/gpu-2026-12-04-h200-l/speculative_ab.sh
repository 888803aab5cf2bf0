#!/usr/bin/env bash
# Newton's speculative whole step with the incremental Gram (large-stream: 262,144 x 129
# batches), against the engine before it. Run from the repository root on the GPU host:
#   bash benchmarks/records/gpu-2026-12-04-h200-l/speculative_ab.sh OUTDIR OLD_ENGINES
# OLD_ENGINES: the engines/ directory of the commit before the change. Writes to OUTDIR:
# numerics.txt (test_cuda_numerics of this tree), timeline-{old,new,cusolver}.txt (CUDA activity
# record of one cold stream per case; "cusolver": this tree's test build with P = 129 factored
# by cuSOLVER's potrf instead of the one-block kernel; WITH_CUSOLVER=0 leaves it out) and the cold streams of both builds
# alternating (cold.jsonl, cold-summary.txt); hostgap.txt: where a batch's host time goes in
# this tree's large-stream float64 stream (record gpu-2026-12-04-h200-e's host_gaps.py).
set -u
out=$1
old_src=$2
mkdir -p "$out"
. benchmarks/records/gpu-2026-12-04-h200-f/ab_common.sh
old_and_new_libraries "$old_src" l- test_cuda_numerics test_cuda_entry_points || exit 1
TESTING=$PWD/build/l-new/engines/cuda/librh_cuda_testing.so

cases="large-stream:float64:none large-stream:float32:none"
for side in old new; do
  lib=$OLD; [ $side = new ] && lib=$NEW
  RH_CUDA_LIBRARY=$lib timeout 120 python3 benchmarks/micro/cuda_stream_timeline.py run \
    "build/l-timeline-$side" $cases > "$out/timeline-$side.txt" 2>&1
done
if [ "${WITH_CUSOLVER:-1}" = 1 ]; then
  RH_CUDA_TEST_SMALL_DENSE_MAX=128 RH_CUDA_TEST_CLUSTER_CHOLESKY_MAX=0 RH_CUDA_LIBRARY=$TESTING \
    timeout 120 python3 benchmarks/micro/cuda_stream_timeline.py run build/l-timeline-cusolver \
    $cases > "$out/timeline-cusolver.txt" 2>&1
fi

RH_CUDA_LIBRARY=$NEW timeout 120 python3 benchmarks/records/gpu-2026-12-04-h200-e/host-time/host_gaps.py \
  "$out" large-stream:float64:none > "$out/hostgap.txt" 2>&1

for t in test_cuda_numerics test_cuda_entry_points; do
  timeout 300 "build/l-new/engines/cuda/tests/$t" > "$out/$t.txt" 2>&1
  echo "$t rc $?" >> "$out/$t.txt"
done

cold_rounds "$out" "$OLD" "$NEW" "${ROUNDS:-2}" cold-summary.txt --profile large \
  --shapes large-stream --penalties none --repetitions 3
