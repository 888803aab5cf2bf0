#!/usr/bin/env bash
# The shipped tree (836e07d's engines): build, timelines of the cases nearest their goals
# (large-stream float64 none / float32 l1 / float64 l1, streaming float64 none), and the cold
# large-stream none digests for judging candidates.
set -uo pipefail
mkdir -p "$OUT/i"; t0=$(date +%s)
pack() { echo "$1 rc $2 at $(( $(date +%s) - t0 )) s" >> "$OUT/i/times.txt"; tar czf "$OUT/callI.tgz" -C "$OUT" i; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,compute_cap --format=csv; nvcc --version | tail -2; nproc; lscpu | grep -E "Model name|Socket|NUMA node\(s\)"; python3 --version; git log --oneline -1; git status --short | head -20; } > "$OUT/i/host.txt" 2>&1
deps=(); for w in .whl/*.whl; do case "$w" in .whl/renewable_huber-*) ;; *) deps+=("$w");; esac; done
python3 -m pip install --quiet --no-index --no-deps --break-system-packages "${deps[@]}" > "$OUT/i/deps.txt" 2>&1
BUILD_DIR=$PWD/build/dev JOBS=16 bash runbooks/scripts/build_engines.sh ON > "$OUT/i/build.txt" 2>&1; pack build $?
eval "$(grep '^export' "$OUT/i/build.txt")"
export RH_CPU_LIBRARY RH_CUDA_LIBRARY PYTHONPATH=$PWD/python
timeout 150 python3 benchmarks/micro/cuda_stream_timeline.py run /tmp/tlI large-stream:float64:none large-stream:float64:l1 large-stream:float32:none streaming:float64:none > "$OUT/i/timelines.txt" 2>&1; pack timelines $?
timeout 60 python3 benchmarks/micro/cuda_cold_streams.py base --repetitions 5 --penalties none --profile large --shapes large-stream > "$OUT/i/streams.jsonl" 2>"$OUT/i/streams.err"; pack streams $?
cat "$OUT/i/times.txt"; cat "$OUT/i/streams.jsonl"
grep -E "^## |busy" "$OUT/i/timelines.txt"
