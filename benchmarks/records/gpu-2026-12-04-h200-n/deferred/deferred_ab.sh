#!/usr/bin/env bash
# Device input checked by the objective at beta0 (this tree) against the validation pass over X
# (OLD_ENGINES: the engines/ directory of c500ccc). Run from the repository root on the GPU host
# with the package importable (PYTHONPATH=python):
#   bash benchmarks/records/gpu-2026-12-04-h200-n/deferred/deferred_ab.sh OUTDIR OLD_ENGINES [MODE]
# Both builds once per machine start (ab_common.sh reuses them), then by MODE:
#   tests (default)  this tree's test_cuda_entry_points and test_cuda_numerics, then cold standard
#                    streams (device input, both penalties) of both builds alternating, 3 rounds
#                    (tests/, standard-1/)
#   timelines        each build's CUDA activity record of one cold latency float32, reference
#                    float64 and streaming float64 stream without a penalty (timelines/)
#   standard         3 rounds, old then new in every round: the reference shape alone (7 streams
#                    a case: ref.jsonl), then latency, reference, streaming and wide (5: all.jsonl),
#                    without a penalty (standard-2/)
#   large            cold large-stream streams (both penalties), 2 rounds alternating, and this
#                    tree's CUDA activity record of one cold large-stream and one standard
#                    streaming stream without a penalty (large/)
set -u
out=$1
mode=${3:-tests}
mkdir -p "$out" build
. benchmarks/records/gpu-2026-12-04-h200-f/ab_common.sh
old_and_new_libraries "$2" n- test_cuda_numerics test_cuda_entry_points || exit 1
tests=build/n-new/engines/cuda/tests
case $mode in
  tests)
    timeout 150 $tests/test_cuda_entry_points > "$out/test_cuda_entry_points.txt" 2>&1
    echo "test_cuda_entry_points rc $?" >> "$out/test_cuda_entry_points.txt"
    timeout 240 $tests/test_cuda_numerics > "$out/test_cuda_numerics.txt" 2>&1
    echo "test_cuda_numerics rc $?" >> "$out/test_cuda_numerics.txt"
    cold_rounds "$out" "$OLD" "$NEW" 3 cold-summary-standard.txt --profile standard \
      --penalties none,l1 --repetitions 5 > /dev/null
    ;;
  timelines)
    for side in old new; do
      lib=$OLD; [ $side = new ] && lib=$NEW
      RH_CUDA_LIBRARY=$lib timeout 150 python3 benchmarks/micro/cuda_stream_timeline.py run \
        "build/tl-$side" latency:float32:none reference:float64:none streaming:float64:none \
        > "$out/timeline-$side.txt" 2>&1
    done
    ;;
  standard)
    for r in 1 2 3; do
      for side in old new; do
        lib=$OLD; [ $side = new ] && lib=$NEW
        RH_CUDA_LIBRARY=$lib python3 benchmarks/micro/cuda_cold_streams.py $side --profile standard \
          --shapes reference --penalties none --repetitions 7 >> "$out/ref.jsonl"
        RH_CUDA_LIBRARY=$lib python3 benchmarks/micro/cuda_cold_streams.py $side --profile standard \
          --shapes reference,latency,streaming,wide --penalties none --repetitions 5 \
          >> "$out/all.jsonl"
      done
    done
    ;;
  large)
    cold_rounds "$out" "$OLD" "$NEW" 2 cold-summary-large.txt --profile large \
      --shapes large-stream --penalties none,l1 --repetitions 3 > /dev/null
    RH_CUDA_LIBRARY=$NEW timeout 120 python3 benchmarks/micro/cuda_stream_timeline.py run \
      build/n-timeline large-stream:float64:none streaming:float64:none > "$out/timeline-new.txt" 2>&1
    ;;
esac
