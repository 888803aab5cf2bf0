# Sourced by this record's A/B scripts, run from the repository root: six rounds of cold
# device-input streams (no penalty; streaming, reference, wide and latency shapes), the old and
# new librh_cuda alternating process by process, and their summary (cuda_cold_streams.py).
cold_rounds() {  # OUTDIR OLD_LIBRARY NEW_LIBRARY
  local r side order lib
  for r in 1 2 3 4 5 6; do
    order="old new"; [ $((r % 2)) = 0 ] && order="new old"
    for side in $order; do
      lib=$2; [ $side = new ] && lib=$3
      RH_CUDA_LIBRARY=$lib python3 benchmarks/micro/cuda_cold_streams.py $side --repetitions 11 \
        --penalties none --shapes streaming,reference,wide,latency >> "$1/cold.jsonl" 2>/dev/null
    done
  done
  python3 benchmarks/micro/cuda_cold_streams.py --summarize "$1/cold.jsonl" --baseline old \
    --candidate new | tee "$1/cold-ab.txt"
}
