#!/usr/bin/env bash
# Device input checked by the objective at beta0 (this tree) against the validation pass over X
# (OLD_ENGINES: the engines/ directory of c500ccc). Run from the repository root on the GPU host
# with the package importable (PYTHONPATH=python):
#   bash benchmarks/records/gpu-2026-12-04-h200-n/deferred/deferred_ab.sh OUTDIR OLD_ENGINES [large]
# Without `large`: this tree's test_cuda_entry_points and test_cuda_numerics, then cold standard
# streams (device input, both penalties) of both builds alternating, 3 rounds. With `large`:
# cold large-stream streams (both penalties), 2 rounds, and this tree's CUDA activity record of
# one cold large-stream and one standard streaming stream without a penalty.
set -u
out=$1
mkdir -p "$out" build
. benchmarks/records/gpu-2026-12-04-h200-f/ab_common.sh
old_and_new_libraries "$2" n- test_cuda_numerics test_cuda_entry_points || exit 1
tests=build/n-new/engines/cuda/tests
if [ "${3:-}" = large ]; then
  cold_rounds "$out" "$OLD" "$NEW" 2 cold-summary-large.txt --profile large --shapes large-stream \
    --penalties none,l1 --repetitions 3 > /dev/null
  RH_CUDA_LIBRARY=$NEW timeout 120 python3 benchmarks/micro/cuda_stream_timeline.py run \
    build/n-timeline large-stream:float64:none streaming:float64:none > "$out/timeline-new.txt" 2>&1
  exit 0
fi
timeout 150 $tests/test_cuda_entry_points > "$out/test_cuda_entry_points.txt" 2>&1
echo "test_cuda_entry_points rc $?" >> "$out/test_cuda_entry_points.txt"
timeout 240 $tests/test_cuda_numerics > "$out/test_cuda_numerics.txt" 2>&1
echo "test_cuda_numerics rc $?" >> "$out/test_cuda_numerics.txt"
cold_rounds "$out" "$OLD" "$NEW" 3 cold-summary-standard.txt --profile standard \
  --penalties none,l1 --repetitions 5 > /dev/null
