#!/usr/bin/env bash
# Candidate "both" (benchmarks/records/gpu-2026-12-07-h100-as/both.patch, the working tree): Newton's full-Gram row pass at 33-128
# columns forms the Gram's last column beside X'u (no gemv over the scaled rows). Builds: c1 (the
# tree, 1 block/SM, full build with tests), c2 (RH_BOTH_SUMS_BLOCKS=2, library only), base (the
# patch reversed, library only). Then alternating cold large-stream none streams (3 rounds), a
# timeline of c1.
set -uo pipefail
mkdir -p "$OUT/j"; t0=$(date +%s)
pack() { echo "$1 rc $2 at $(( $(date +%s) - t0 )) s" >> "$OUT/j/times.txt"; tar czf "$OUT/callJ.tgz" -C "$OUT" j; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,compute_cap --format=csv; nvcc --version | tail -2; nproc; python3 --version; git log --oneline -1; git status --short | head -20; } > "$OUT/j/host.txt" 2>&1
deps=(); for w in .whl/*.whl; do case "$w" in .whl/renewable_huber-*) ;; *) deps+=("$w");; esac; done
python3 -m pip install --quiet --no-index --no-deps --break-system-packages "${deps[@]}" > "$OUT/j/deps.txt" 2>&1
REPO=$PWD; rm -rf /tmp/base && mkdir /tmp/base && cp -r abi engines cmake CMakeLists.txt python /tmp/base/ && (cd /tmp/base && patch -R -p1 -s < "$REPO/benchmarks/records/gpu-2026-12-07-h100-as/both.patch") > "$OUT/j/base-patch.txt" 2>&1
grep -c kBothSums /tmp/base/engines/cuda/src/row_kernels.cu >> "$OUT/j/base-patch.txt"
( cmake -S /tmp/base -B /tmp/base/build -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_TESTS=OFF -DRH_BUILD_CUDA=ON > "$OUT/j/build-base.txt" 2>&1 && cmake --build /tmp/base/build --target rh_cuda -j5 >> "$OUT/j/build-base.txt" 2>&1; echo "base rc $?" >> "$OUT/j/build-base.txt" ) &
( cmake -S . -B build/c2 -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_TESTS=OFF -DRH_BUILD_CUDA=ON -DCMAKE_CUDA_FLAGS=-DRH_BOTH_SUMS_BLOCKS=2 > "$OUT/j/build-c2.txt" 2>&1 && cmake --build build/c2 --target rh_cuda -j5 >> "$OUT/j/build-c2.txt" 2>&1; echo "c2 rc $?" >> "$OUT/j/build-c2.txt" ) &
BUILD_DIR=$PWD/build/dev JOBS=8 bash runbooks/scripts/build_engines.sh ON > "$OUT/j/build.txt" 2>&1; pack build $?
wait; pack builds-all 0
eval "$(grep '^export' "$OUT/j/build.txt")"
export RH_CPU_LIBRARY PYTHONPATH=$PWD/python
C1=$RH_CUDA_LIBRARY; C2=$(find build/c2 -name librh_cuda.so | head -1); BASE=$(find /tmp/base/build -name librh_cuda.so | head -1)
echo "c1 $C1 c2 $C2 base $BASE" >> "$OUT/j/times.txt"
for r in 1 2 3; do
  for side in base c1 c2; do
    case $side in base) L=$BASE;; c1) L=$C1;; c2) L=$C2;; esac
    RH_CUDA_LIBRARY=$L timeout 40 python3 benchmarks/micro/cuda_cold_streams.py $side --repetitions 5 --penalties none --profile large --shapes large-stream >> "$OUT/j/streams.jsonl" 2>>"$OUT/j/streams.err"
  done
  pack round$r 0
done
python3 benchmarks/micro/cuda_cold_streams.py --summarize "$OUT/j/streams.jsonl" --baseline base --candidate c1 > "$OUT/j/summary-c1.txt" 2>&1
python3 benchmarks/micro/cuda_cold_streams.py --summarize "$OUT/j/streams.jsonl" --baseline base --candidate c2 > "$OUT/j/summary-c2.txt" 2>&1
RH_CUDA_LIBRARY=$C1 timeout 60 python3 benchmarks/micro/cuda_stream_timeline.py run /tmp/tlJ large-stream:float64:none large-stream:float32:none > "$OUT/j/timelines-c1.txt" 2>&1; pack timelines $?
cat "$OUT/j/times.txt"; tail -3 "$OUT/j/build-base.txt" "$OUT/j/build-c2.txt"; cat "$OUT/j/base-patch.txt"; cat "$OUT/j/summary-c1.txt" "$OUT/j/summary-c2.txt"
grep -E "^## |busy|row_pass_kernel|gemvx" "$OUT/j/timelines-c1.txt" | head -20
