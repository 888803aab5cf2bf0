#!/bin/bash
# The A/B of this record's lamm-trials/ folder, run from the repository root of the new tree on
# the GPU host: OLD_SRC is the engines/ directory of the commit before (e.g. `git archive
# 41f22cf engines | tar -x -C OLD`, then OLD/engines). Both release libraries are built, each
# side's CUDA activity timeline of cold L1 streams is taken (benchmarks/micro/
# cuda_stream_timeline.py), then cold streams alternate process by process
# (benchmarks/micro/cuda_cold_streams.py through ab_common.sh's cold_rounds), each line with the
# last stream's state digest, so that "state digest equal: True" says both builds fitted the
# same bits.
OLD_SRC=${1:?usage: lamm_ab.sh OLD_SRC OUTDIR}
OUT=${2:?usage: lamm_ab.sh OLD_SRC OUTDIR}
source benchmarks/records/gpu-2026-12-04-h200-f/ab_common.sh
old_and_new_libraries "$OLD_SRC"
mkdir -p "$OUT/std" "$OUT/ls" "$OUT/lw"
for side in old new; do
  lib=$OLD; [ $side = new ] && lib=$NEW
  RH_CUDA_LIBRARY=$lib python3 benchmarks/micro/cuda_stream_timeline.py run "/tmp/tl-$side" \
    large-wide:float64:l1 large-wide:float32:l1 large-stream:float32:l1 streaming:float32:l1 \
    > "$OUT/timeline-$side.txt" 2>&1
done
cold_rounds "$OUT/lw" "$OLD" "$NEW" 3 summary.txt --profile large --shapes large-wide \
  --penalties l1 --repetitions 3
cold_rounds "$OUT/ls" "$OLD" "$NEW" 2 summary.txt --profile large --shapes large-stream \
  --penalties l1 --repetitions 3
cold_rounds "$OUT/std" "$OLD" "$NEW" 3 summary.txt --penalties l1 --repetitions 5
