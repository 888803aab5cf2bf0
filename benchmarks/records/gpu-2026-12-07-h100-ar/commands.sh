#!/usr/bin/env bash
# lammnext alone (the working tree: c4ed0b4 + each LAMM group's candidates formed in the launch
# before it): build, cold large-stream L1 streams (digests against c4ed0b4's known ones:
# float32 d997c787217ca59f, float64 5bb693c05a8f936e), a timeline, ctest -L cuda, memcheck.
set -uo pipefail
mkdir -p "$OUT/h"; t0=$(date +%s); LIMIT=${LIMIT:-160}
left() { local l=$(( LIMIT - ($(date +%s) - t0) )); echo $(( l > 1 ? l : 1 )); }
pack() { echo "$1 rc $2 at $(( $(date +%s) - t0 )) s" >> "$OUT/h/times.txt"; tar czf "$OUT/callH.tgz" -C "$OUT" h; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,compute_cap --format=csv; nvcc --version | tail -2; nproc; python3 --version; git log --oneline -1; git status --short | head -20; } > "$OUT/h/host.txt" 2>&1
deps=(); for w in .whl/*.whl; do case "$w" in .whl/renewable_huber-*) ;; *) deps+=("$w");; esac; done
python3 -m pip install --quiet --no-index --no-deps --break-system-packages "${deps[@]}" > "$OUT/h/deps.txt" 2>&1
BUILD_DIR=$PWD/build/dev JOBS=16 bash runbooks/scripts/build_engines.sh ON > "$OUT/h/build.txt" 2>&1; pack build $?
eval "$(grep '^export' "$OUT/h/build.txt")"
export RH_CPU_LIBRARY RH_CUDA_LIBRARY PYTHONPATH=$PWD/python
timeout 60 python3 benchmarks/micro/cuda_cold_streams.py lammnext --repetitions 5 --penalties l1 --profile large --shapes large-stream > "$OUT/h/streams.jsonl" 2>"$OUT/h/streams.err"; pack streams $?
timeout 40 python3 benchmarks/micro/cuda_stream_timeline.py run /tmp/tlH large-stream:float32:l1 > "$OUT/h/timelines.txt" 2>&1; pack timelines $?
(cd build/dev && timeout "$(( $(left) - 5 ))" ctest -L cuda -j8 --output-on-failure > "$OUT/h/ctest-cuda.txt" 2>&1); pack ctest $?
[ "$(left)" -ge 28 ] && timeout "$(left)" compute-sanitizer --tool memcheck --error-exitcode 9 python3 engines/cuda/tests/sanitizer_solve_paths.py > "$OUT/h/memcheck.txt" 2>&1; pack memcheck $?
cat "$OUT/h/times.txt"; cat "$OUT/h/streams.jsonl"; grep -E "tests passed|Failed|\*\*\*" "$OUT/h/ctest-cuda.txt" | head; tail -1 "$OUT/h/memcheck.txt"
grep -E "^## |GPU busy|lamm_|gradient_kernel" "$OUT/h/timelines.txt" | head -20
