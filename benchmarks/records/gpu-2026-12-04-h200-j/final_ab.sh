#!/bin/bash
# The A/B of this record's final/ folder, run from the repository root of the new tree on the GPU
# host: OLD_SRC is the engines/ directory of the commit before (e.g. `git archive 93961c2 engines
# | tar -x -C OLD`, then OLD/engines). Both release libraries are built, each side's CUDA
# activity timeline of cold streams is taken (benchmarks/micro/cuda_stream_timeline.py), then
# cold streams alternate process by process (benchmarks/micro/cuda_cold_streams.py through
# ab_common.sh's cold_rounds), each line with the last stream's state digest.
# final/timeline-row-pass-alone.txt and final/summary-nosplit.txt came from a third build of the
# new tree whose Gram kept its full-width GEMM (a temporary compile switch, not shipped).
OLD_SRC=${1:?usage: final_ab.sh OLD_SRC OUTDIR}
OUT=${2:?usage: final_ab.sh OLD_SRC OUTDIR}
source benchmarks/records/gpu-2026-12-04-h200-f/ab_common.sh
old_and_new_libraries "$OLD_SRC"
for side in old new; do
  lib=$OLD; [ $side = new ] && lib=$NEW
  RH_CUDA_LIBRARY=$lib python3 benchmarks/micro/cuda_stream_timeline.py run "/tmp/tl-$side" \
    large-stream:float32:l1 large-stream:float64:l1 large-stream:float32:none \
    large-stream:float64:none large-wide:float64:none wide:float64:none \
    > "$OUT/timeline-$side.txt" 2>&1
done
mkdir -p "$OUT/ls" "$OUT/lw" "$OUT/std"
cold_rounds "$OUT/ls" "$OLD" "$NEW" 2 summary.txt --profile large --shapes large-stream \
  --repetitions 3
cold_rounds "$OUT/lw" "$OLD" "$NEW" 2 summary.txt --profile large --shapes large-wide \
  --repetitions 3
cold_rounds "$OUT/std" "$OLD" "$NEW" 2 summary.txt --repetitions 3
