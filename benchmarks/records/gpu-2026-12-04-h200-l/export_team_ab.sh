#!/usr/bin/env bash
# Does the copy team's export of the state (P = 129: 133 KB float64, 66 KB float32, two threads
# at 64 KiB each) cost the large-stream's batches host time? One test build of this tree,
# default copy threads ("team") against RH_CUDA_STAGING_THREADS=1 ("one": every export copied by
# the calling thread), alternating process by process. Run from the repository root on the GPU
# host:
#   bash benchmarks/records/gpu-2026-12-04-h200-l/export_team_ab.sh OUTDIR
# Writes hostgap-{team,one}.txt (record gpu-2026-12-04-h200-e's host_gaps.py) and the cold
# streams (cold.jsonl, cold-summary.txt).
set -u
out=$1
mkdir -p "$out"
. benchmarks/records/gpu-2026-12-04-h200-f/ab_common.sh
mkdir -p build
JOBS=16 libbuild . build/l-team rh_cuda_testing || { tail -20 build/l-team.log; exit 1; }
export RH_CUDA_LIBRARY=$PWD/build/l-team/engines/cuda/librh_cuda_testing.so
gaps=benchmarks/records/gpu-2026-12-04-h200-e/host-time/host_gaps.py
timeout 100 python3 $gaps "$out" large-stream:float64:none > "$out/hostgap-team.txt" 2>&1
RH_CUDA_STAGING_THREADS=1 timeout 100 python3 $gaps "$out" large-stream:float64:none \
  > "$out/hostgap-one.txt" 2>&1
for r in $(seq "${ROUNDS:-3}"); do
  order="team one"; [ $((r % 2)) = 0 ] && order="one team"
  for side in $order; do
    if [ $side = one ]; then export RH_CUDA_STAGING_THREADS=1; else unset RH_CUDA_STAGING_THREADS; fi
    timeout 90 python3 benchmarks/micro/cuda_cold_streams.py $side --profile large \
      --shapes large-stream --penalties none --repetitions 3 >> "$out/cold.jsonl" 2>> "$out/err.log"
  done
done
unset RH_CUDA_STAGING_THREADS
python3 benchmarks/micro/cuda_cold_streams.py --summarize "$out/cold.jsonl" --baseline team \
  --candidate one | tee "$out/cold-summary.txt"
