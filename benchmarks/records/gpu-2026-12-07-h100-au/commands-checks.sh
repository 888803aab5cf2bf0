#!/usr/bin/env bash
# The checks of 03f6935 (4db6654's engines) on the H100 host (Intel Xeon with AVX-512): golden
# --check under the default, SkylakeX and Haswell kernels, the conformance kit on librh_cuda and
# (SkylakeX) librh_cpu, .ci/blas-kernels for SkylakeX, racecheck of the incremental-Gram streams,
# pytest -m cuda. Writes under $OUT.
set -uo pipefail
mkdir -p "$OUT/m"; t0=$(date +%s)
pack() { echo "$1 rc $2 at $(( $(date +%s) - t0 )) s" >> "$OUT/m/times.txt"; tar czf "$OUT/callL.tgz" -C "$OUT" m; }
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,compute_cap --format=csv; nvcc --version | tail -2; nproc; lscpu | grep -E "Model name|Flags" | sed 's/Flags:.*\(avx512[a-z]*\).*/avx512 flags present: \1/'; python3 --version; python3 -c "import numpy, cupy; print('numpy', numpy.__version__, 'cupy', cupy.__version__)"; git log --oneline -1; git status --short | head -20; } > "$OUT/m/host.txt" 2>&1
grep -o 'avx512[a-z]*' /proc/cpuinfo | sort -u | tr '\n' ' ' >> "$OUT/m/host.txt"
deps=(); for w in .whl/*.whl; do case "$w" in .whl/renewable_huber-*) ;; *) deps+=("$w");; esac; done
python3 -m pip install --quiet --no-index --no-deps --break-system-packages "${deps[@]}" > "$OUT/m/deps.txt" 2>&1
python3 -m pip install --quiet --no-index --no-deps --target /tmp/rh-peer-site .whl/peer/renewable_huber-0.7.1-*.whl >> "$OUT/m/deps.txt" 2>&1
BUILD_DIR=$PWD/build/dev JOBS=16 bash runbooks/scripts/build_engines.sh ON > "$OUT/m/build.txt" 2>&1; pack build $?
eval "$(grep '^export' "$OUT/m/build.txt")"
export RH_CPU_LIBRARY RH_CUDA_LIBRARY PYTHONPATH=$PWD/python
for fam in default SkylakeX Haswell; do
  if [ $fam = default ]; then E=(); else E=(OPENBLAS_CORETYPE=$fam); fi
  env "${E[@]}" python3 -c "import numpy; numpy.show_runtime()" > "$OUT/m/golden-$fam.txt" 2>&1
  env "${E[@]}" timeout 60 python3 golden/generate.py --check >> "$OUT/m/golden-$fam.txt" 2>&1; pack golden-$fam $?
done
timeout 60 python3 -m renewable_huber conformance --library "$RH_CUDA_LIBRARY" --capabilities conformance/capabilities/cuda.json > "$OUT/m/conformance-cuda.txt" 2>&1; pack conformance-cuda $?
OPENBLAS_CORETYPE=SkylakeX timeout 40 python3 -m renewable_huber conformance --library "$RH_CPU_LIBRARY" > "$OUT/m/conformance-cpu-skx.txt" 2>&1; pack conformance-cpu-skx $?
PYTHON=python3 RH_BUILD_DIR=build/dev RH_BLAS_FAMILIES="SkylakeX" RH_BLAS_LOG_DIR=$OUT/m/blas timeout 170 bash .ci/blas-kernels > "$OUT/m/blas-kernels.txt" 2>&1; pack blas-kernels $?
timeout 240 compute-sanitizer --tool racecheck --error-exitcode 9 python3 engines/cuda/tests/sanitizer_solve_paths.py --incremental-only > "$OUT/m/racecheck-incremental.txt" 2>&1; pack racecheck-incremental $?
timeout $(( 585 - ($(date +%s) - t0) )) python3 -m pytest -m cuda -rs -q -p no:cacheprovider python/tests > "$OUT/m/pytest-cuda.txt" 2>&1; pack pytest-cuda $?
cat "$OUT/m/times.txt"; tail -2 "$OUT/m/host.txt"
for fam in default SkylakeX Haswell; do echo "== $fam"; grep -iE "core|architecture" "$OUT/m/golden-$fam.txt" | head -3; tail -3 "$OUT/m/golden-$fam.txt"; done
grep -E "CONFORMS|DOES NOT" "$OUT/m/conformance-cuda.txt" "$OUT/m/conformance-cpu-skx.txt" | tail -2; tail -8 "$OUT/m/blas-kernels.txt"
grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$OUT/m/racecheck-incremental.txt" | tail -1; tail -3 "$OUT/m/racecheck-incremental.txt"; tail -3 "$OUT/m/pytest-cuda.txt"
