#!/usr/bin/env bash
# The shipped split teams (57d52ab) against the engine before them. Run from the repository
# root on the GPU host:
#   bash benchmarks/records/gpu-2026-12-04-h200-m/team8/team8_ab.sh OUTDIR OLD_ENGINES
# OLD_ENGINES: the engines/ directory of fc0e162. Writes test_cuda_numerics and
# test_cuda_entry_points of this tree, cold large-stream streams of both builds alternating (2
# rounds, both penalties: cold.jsonl, cold-summary.txt) and this tree's CUDA activity record of
# one cold large-stream stream per dtype without a penalty (timeline-new.txt).
set -u
out=$1
mkdir -p "$out" build
. benchmarks/records/gpu-2026-12-04-h200-f/ab_common.sh
old_and_new_libraries "$2" m- test_cuda_numerics test_cuda_entry_points || exit 1
tests=build/m-new/engines/cuda/tests
timeout 200 $tests/test_cuda_numerics > "$out/test_cuda_numerics.txt" 2>&1
echo "test_cuda_numerics rc $?" >> "$out/test_cuda_numerics.txt"
cold_rounds "$out" "$OLD" "$NEW" 2 cold-summary.txt --profile large --shapes large-stream \
  --penalties none,l1 --repetitions 3 > /dev/null
timeout 100 $tests/test_cuda_entry_points > "$out/test_cuda_entry_points.txt" 2>&1
echo "test_cuda_entry_points rc $?" >> "$out/test_cuda_entry_points.txt"
RH_CUDA_LIBRARY=$NEW timeout 100 python3 benchmarks/micro/cuda_stream_timeline.py run \
  build/m-timeline large-stream:float64:none large-stream:float32:none > "$out/timeline-new.txt" 2>&1
