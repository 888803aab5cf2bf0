#!/usr/bin/env bash
# The working tree (both2: float64 only): build with tests, ctest -L cuda, memcheck and racecheck
# on the solve paths (and the device-flips switch), conformance, cold large-stream none streams
# (float32's digest must be 836e07d's 2a8476c717de582a, float64's record as's c1 e6c5e45830543ed2),
# pytest -m cuda in the time left.
set -uo pipefail
mkdir -p "$OUT/k"; t0=$(date +%s)
pack() { echo "$1 rc $2 at $(( $(date +%s) - t0 )) s" >> "$OUT/k/times.txt"; tar czf "$OUT/callK1.tgz" -C "$OUT" k; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,compute_cap --format=csv; nvcc --version | tail -2; nproc; python3 --version; python3 -c "import numpy, cupy; print('numpy', numpy.__version__, 'cupy', cupy.__version__)"; git log --oneline -1; git status --short | head -20; } > "$OUT/k/host.txt" 2>&1
deps=(); for w in .whl/*.whl; do case "$w" in .whl/renewable_huber-*) ;; *) deps+=("$w");; esac; done
python3 -m pip install --quiet --no-index --no-deps --break-system-packages "${deps[@]}" > "$OUT/k/deps.txt" 2>&1
BUILD_DIR=$PWD/build/dev JOBS=16 bash runbooks/scripts/build_engines.sh ON > "$OUT/k/build.txt" 2>&1; pack build $?
eval "$(grep '^export' "$OUT/k/build.txt")"
export RH_CPU_LIBRARY RH_CUDA_LIBRARY PYTHONPATH=$PWD/python
TESTING_LIB=$(find build/dev -name 'librh_cuda_testing.so' -print -quit)
(cd build/dev && timeout 150 ctest -L cuda -j8 --output-on-failure --timeout 140 > "$OUT/k/ctest-cuda.txt" 2>&1); pack ctest $?
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 python3 engines/cuda/tests/sanitizer_solve_paths.py > "$OUT/k/$tool-solves.txt" 2>&1; pack $tool-solves $?
  timeout 90 env RH_CUDA_LIBRARY="$TESTING_LIB" RH_CUDA_TEST_GRAM_FLIPS=device compute-sanitizer --tool $tool --error-exitcode 9 python3 engines/cuda/tests/sanitizer_solve_paths.py --incremental-only > "$OUT/k/$tool-switches.txt" 2>&1; pack $tool-switches $?
done
timeout 60 python3 -m renewable_huber conformance --library "$RH_CUDA_LIBRARY" --capabilities conformance/capabilities/cuda.json > "$OUT/k/conformance.txt" 2>&1; pack conformance $?
timeout 40 python3 benchmarks/micro/cuda_cold_streams.py cand --repetitions 5 --penalties none --profile large --shapes large-stream > "$OUT/k/streams.jsonl" 2>"$OUT/k/streams.err"; pack streams $?
timeout $(( 400 - ($(date +%s) - t0) )) python3 -m pytest -m cuda -rs -q -p no:cacheprovider python/tests > "$OUT/k/pytest-cuda.txt" 2>&1; pack pytest-cuda $?
cat "$OUT/k/times.txt"; grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/k/ctest-cuda.txt" | head
for f in memcheck-solves memcheck-switches racecheck-solves racecheck-switches; do echo "$f: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/k/$f.txt" | tail -1)"; done
grep -E "CONFORMS|DOES NOT" "$OUT/k/conformance.txt" | tail -1; cat "$OUT/k/streams.jsonl"; tail -2 "$OUT/k/pytest-cuda.txt"
