#!/usr/bin/env bash
# The standard profile's streaming and wide shapes against the peer's CuPy backend (9 rounds each) on a
# fresh machine start with nothing else running (run as SKIP_LARGE=1 LIMIT=170; without
# SKIP_LARGE it runs the large profile first). The load average and the busiest processes
# before and after each run, in load.txt.
set -uo pipefail
mkdir -p "$OUT/n"; t0=$(date +%s); LIMIT=${LIMIT:-470}
left() { local l=$(( LIMIT - ($(date +%s) - t0) )); echo $(( l > 1 ? l : 1 )); }
pack() { echo "$1 rc $2 at $(( $(date +%s) - t0 )) s" >> "$OUT/n/times.txt"; tar czf "$OUT/callN.tgz" -C "$OUT" n; }
load() { { echo "== $1"; cat /proc/loadavg; ps -eo pcpu,pid,etimes,comm --sort=-pcpu | head -6; } >> "$OUT/n/load.txt"; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,compute_cap --format=csv; nproc; lscpu | grep "Model name"; free -g | head -2; git log --oneline -1; git status --short | head; } > "$OUT/n/host.txt" 2>&1
load start
deps=(); for w in .whl/*.whl; do case "$w" in .whl/renewable_huber-*) ;; *) deps+=("$w");; esac; done
python3 -m pip install --quiet --no-index --no-deps --break-system-packages "${deps[@]}" > "$OUT/n/deps.txt" 2>&1
python3 -m pip install --quiet --no-index --no-deps --target /tmp/rh-peer-site .whl/peer/renewable_huber-0.7.1-*.whl >> "$OUT/n/deps.txt" 2>&1
( cmake -S . -B build/dev -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_TESTS=OFF -DRH_BUILD_CUDA=ON && cmake --build build/dev --target rh_cuda rh_cpu -j16 ) > "$OUT/n/build.txt" 2>&1; pack build $?
export RH_CPU_LIBRARY=$(find build/dev -name librh_cpu.so | head -1) RH_CUDA_LIBRARY=$(find build/dev -name librh_cuda.so | head -1) PYTHONPATH=$PWD/python
timeout 60 python3 benchmarks/roofline.py --measure-device "$OUT/n/device.json" > "$OUT/n/device.txt" 2>&1; pack device $?
load before-large
[ -n "${SKIP_LARGE:-}" ] || timeout "$(left)" python3 benchmarks/ab.py --baseline-engine peer_cupy --candidate-engine native_cuda \
  --baseline-python python3 --baseline-pythonpath /tmp/rh-peer-site --profile large \
  --penalties none,l1 --transports host,device --dtypes float32,float64 --lifecycles cold \
  --operations partial_fit --rounds 9 --no-progress --data-dir /tmp \
  --out-dir "$OUT/n/large-peer" > "$OUT/n/large.log" 2>&1; pack large $?
load after-large
for shape in streaming wide reference latency; do
  [ "$(left)" -gt 50 ] || break
  timeout "$(left)" python3 benchmarks/ab.py --baseline-engine peer_cupy --candidate-engine native_cuda \
    --baseline-python python3 --baseline-pythonpath /tmp/rh-peer-site --profile standard --shapes $shape \
    --penalties none,l1 --transports host,device --dtypes float32,float64 --lifecycles cold \
    --operations partial_fit --rounds 9 --no-progress --data-dir /tmp \
    --out-dir "$OUT/n/standard-peer/$shape" > "$OUT/n/standard-$shape.log" 2>&1; pack $shape $?
  load after-$shape
done
[ -n "${SKIP_LARGE:-}" ] || python3 benchmarks/roofline.py --record "$OUT/n/large-peer/merged.json" --device "$OUT/n/device.json" \
  --out "$OUT/n/large-peer/roofline.md" --json "$OUT/n/large-peer/roofline.json" > "$OUT/n/roofline.txt" 2>&1
python3 benchmarks/goals.py "$OUT/n" --device "$OUT/n/device.json" --json "$OUT/n/goals.json" > "$OUT/n/goals.md" 2>&1; pack goals $?
cat "$OUT/n/times.txt" "$OUT/n/load.txt"; tail -18 "$OUT/n/large.log"; cat "$OUT/n/goals.md"
