#!/bin/bash
# The A/B of this record's pair-only/ and pair-opening/ folders, run on the GPU host from the
# repository root of the new tree: e7b558b for pair-opening/; for pair-only/, e7b558b with
# lamm_solver.cu queuing every iteration with the pair (that build was never committed: the
# opening group of 8 came after its measurement). OLD_SRC is the engines/ directory of 047cc60
# (`git archive 047cc60 engines | tar -x -C OLD`, then OLD/engines). Both release libraries are
# built; each side's CUDA activity timeline of the L1 large-stream streams is taken
# (benchmarks/micro/cuda_stream_timeline.py); then cold L1 streams alternate process by process
# (cuda_cold_streams.py through ab_common.sh's cold_rounds), each line with the last stream's
# state digest, on the large-stream shape and on every standard shape. TIMELINE_SIDES (default
# "old new"): the sides whose timeline is taken (pair-opening/ took only the new side's; the old
# side's is pair-only/timeline-old.txt, the same library).
OLD_SRC=${1:?usage: lamm_pair_ab.sh OLD_SRC OUTDIR}
OUT=${2:?usage: lamm_pair_ab.sh OLD_SRC OUTDIR}
source benchmarks/records/gpu-2026-12-04-h200-f/ab_common.sh
old_and_new_libraries "$OLD_SRC" || exit 1
for side in ${TIMELINE_SIDES:-old new}; do
  lib=$OLD; [ $side = new ] && lib=$NEW
  RH_CUDA_LIBRARY=$lib timeout 120 python3 benchmarks/micro/cuda_stream_timeline.py run \
    "/tmp/tl-$side" large-stream:float32:l1 large-stream:float64:l1 \
    > "$OUT/timeline-$side.txt" 2>&1
done
mkdir -p "$OUT/ls" "$OUT/std"
cold_rounds "$OUT/ls" "$OLD" "$NEW" 3 summary.txt --profile large --shapes large-stream \
  --penalties l1 --repetitions 3
cold_rounds "$OUT/std" "$OLD" "$NEW" 3 summary.txt --penalties l1 --repetitions 5
