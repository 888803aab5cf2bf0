#!/usr/bin/env bash
# The copy team's workers sleep at once after a state export and after a batch's last staged
# chunk (AfterCopy::Sleep, export-poll/after-copy-sleep.patch, applied to this tree for the run;
# not shipped) instead of polling for 100 us, against the engine before it. Run from the
# repository root on the GPU host:
#   bash benchmarks/records/gpu-2026-12-04-h200-l/export_poll_ab.sh OUTDIR OLD_ENGINES
# OLD_ENGINES: the engines/ directory of the commit before the change. Writes to OUTDIR:
# tests.txt (test_copy_team, test_cuda_entry_points of this tree), hostgap-{old,new}.txt
# (record gpu-2026-12-04-h200-e's host_gaps.py, large-stream float64) and the cold streams of
# both builds alternating: large-stream without a penalty on device input (cold.jsonl,
# cold-summary.txt), then on host input (host/).
set -u
out=$1
mkdir -p "$out/host"
. benchmarks/records/gpu-2026-12-04-h200-f/ab_common.sh
old_and_new_libraries "$2" p- test_copy_team test_cuda_entry_points || exit 1
for t in test_copy_team test_cuda_entry_points; do
  timeout 200 "build/p-new/engines/cuda/tests/$t" > "$out/$t.log" 2>&1
  echo "$t rc $?" >> "$out/tests.txt"
  tail -n 3 "$out/$t.log" >> "$out/tests.txt"
  rm -f "$out/$t.log"
done
gaps=benchmarks/records/gpu-2026-12-04-h200-e/host-time/host_gaps.py
for side in old new; do
  lib=$OLD; [ $side = new ] && lib=$NEW
  RH_CUDA_LIBRARY=$lib timeout 100 python3 $gaps "$out" large-stream:float64:none \
    > "$out/hostgap-$side.txt" 2>&1
done
cold_rounds "$out" "$OLD" "$NEW" "${ROUNDS:-3}" cold-summary.txt --profile large \
  --shapes large-stream --penalties none --repetitions 3
cold_rounds "$out/host" "$OLD" "$NEW" "${HOST_ROUNDS:-2}" cold-summary.txt --profile large \
  --shapes large-stream --penalties none --repetitions 2 --transport host
