#!/usr/bin/env bash
# Then, on the same machine start: device constants, the large profile against the peer's CuPy
# backend (9 rounds), roofline and goals; timelines of large-stream L1 and streaming.
set -uo pipefail
mkdir -p "$OUT/l"; t0=$(date +%s); LIMIT=${LIMIT:-585}
left() { local l=$(( LIMIT - ($(date +%s) - t0) )); echo $(( l > 1 ? l : 1 )); }
pack() { echo "$1 rc $2 at $(( $(date +%s) - t0 )) s" >> "$OUT/l/times.txt"; tar czf "$OUT/callM.tgz" -C "$OUT" l; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,compute_cap --format=csv; nproc; git log --oneline -1; git status --short | head; } > "$OUT/l/host.txt" 2>&1
deps=(); for w in .whl/*.whl; do case "$w" in .whl/renewable_huber-*) ;; *) deps+=("$w");; esac; done
python3 -m pip install --quiet --no-index --no-deps --break-system-packages "${deps[@]}" > "$OUT/l/deps.txt" 2>&1
python3 -m pip install --quiet --no-index --no-deps --target /tmp/rh-peer-site .whl/peer/renewable_huber-0.7.1-*.whl >> "$OUT/l/deps.txt" 2>&1; pack peer $?
[ -f build/dev/engines/cuda/librh_cuda.so ] || { BUILD_DIR=$PWD/build/dev JOBS=16 bash runbooks/scripts/build_engines.sh ON > "$OUT/l/build.txt" 2>&1; }
export RH_CPU_LIBRARY=$(find build/dev -name librh_cpu.so | head -1) RH_CUDA_LIBRARY=$(find build/dev -name librh_cuda.so | head -1) PYTHONPATH=$PWD/python
timeout 60 python3 benchmarks/roofline.py --measure-device "$OUT/l/device.json" > "$OUT/l/device.txt" 2>&1; pack device $?
timeout $(( $(left) - 170 )) python3 benchmarks/ab.py --baseline-engine peer_cupy --candidate-engine native_cuda \
  --baseline-python python3 --baseline-pythonpath /tmp/rh-peer-site --profile large \
  --penalties none,l1 --transports host,device --dtypes float32,float64 --lifecycles cold \
  --operations partial_fit --rounds ${ROUNDS:-9} --no-progress --data-dir /tmp \
  --out-dir "$OUT/l/large" > "$OUT/l/ab-large.log" 2>&1; pack ab-large $?
python3 benchmarks/roofline.py --record "$OUT/l/large/merged.json" --device "$OUT/l/device.json" \
  --out "$OUT/l/large/roofline.md" --json "$OUT/l/large/roofline.json" > "$OUT/l/roofline.txt" 2>&1
python3 benchmarks/goals.py "$OUT/l" --device "$OUT/l/device.json" --json "$OUT/l/goals.json" > "$OUT/l/goals.md" 2>&1; pack goals $?
cat "$OUT/l/times.txt"; tail -3 "$OUT/l/device.txt"; tail -22 "$OUT/l/ab-large.log"; cat "$OUT/l/goals.md"

timeout 150 python3 benchmarks/micro/cuda_stream_timeline.py run /tmp/tlM large-stream:float32:l1 large-stream:float64:l1 streaming:float64:none streaming:float64:l1 > "$OUT/l/timelines.txt" 2>&1; pack timelines $?
grep -E "^## |busy" "$OUT/l/timelines.txt"
