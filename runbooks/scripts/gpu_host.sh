#!/usr/bin/env bash
# Both GPU stages as ONE command on the GPU host; everything worth keeping is packed into
# $OUT/gpu-DATE-HOST.tar.gz (one file to copy back) plus the log:
#   OUT=/path/to/results bash runbooks/scripts/gpu_host.sh    (with .whl/ from
#   prepare_device_wheels.sh in the checkout when the host cannot install packages)
# Stage 2 runs only when stage 1 passed. STAGES="1 2" (default) or "2" alone (a second call when
# one call cannot hold both: stage 2 then builds the engines itself); PROFILES, DTYPES, ROUNDS
# pass through to stage 2; an exported RH_CUDA_LIBRARY skips stage 2's build. Exit status: 0 all
# passed, 1 stage 1 failed, 2 stage 2 gates failed, 3 the engine build failed.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
: "${OUT:?OUT must name the folder for the results (copy it back afterwards)}"
RESULTS="$OUT/gpu-$DATE-$HOST_TAG"
mkdir -p "$RESULTS"
export RESULTS
# The test and record-validator dependencies the device lacks (jsonschema and its own), carried
# as wheels; the machine is disposable, so they go into the system Python. The project's wheel
# is not installed here: stage 1 installs it into a clean venv for the smoke test.
deps=(); for w in .whl/*.whl; do case "$w" in .whl/renewable_huber-*) ;; *) deps+=("$w");; esac; done
if [ ${#deps[@]} -gt 0 ]; then
  python3 -m pip install --quiet --no-index --no-deps --break-system-packages "${deps[@]}"
fi
LOG="$RESULTS/gpu-host.log"
{ nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv; \
  nvcc --version | tail -n 2; } >"$RESULTS/host.txt" 2>&1 || true
STAGES="${STAGES:-1 2}"
code=0
: >"$LOG"
if [[ " $STAGES " == *" 1 "* ]] && ! bash runbooks/scripts/gpu_stage1.sh 2>&1 | tee -a "$LOG"; then
  code=1
elif [[ " $STAGES " == *" 2 "* ]]; then
  # A no-op rebuild after stage 1; the whole build when stage 2 runs alone, unless the caller
  # built librh_cuda itself and exported RH_CUDA_LIBRARY. A failed build must stop here: an
  # empty eval would leave the loader to report a missing library for every case instead.
  if [ -z "${RH_CUDA_LIBRARY:-}" ]; then
    if exports="$(runbooks/scripts/build_engines.sh ON 2>>"$LOG")"; then
      eval "$exports"
    else
      echo "engine build failed: see gpu-host.log" | tee -a "$LOG"
      code=3
    fi
  fi
  if [ "$code" -eq 0 ]; then
    export RH_CPU_LIBRARY="${RH_CPU_LIBRARY:-}" RH_CUDA_LIBRARY
    RESULTS="$RESULTS/stage2" bash runbooks/scripts/gpu_stage2.sh 2>&1 | tee -a "$LOG" || code=2
  fi
fi
tar -C "$OUT" -czf "$OUT/gpu-$DATE-$HOST_TAG.tar.gz" "gpu-$DATE-$HOST_TAG"
cp "$LOG" "$OUT/gpu-host.log"
rm -rf "$RESULTS"
echo "gpu_host.sh exit $code (0 pass, 1 stage 1 failed, 2 gates failed, 3 build failed)"
exit "$code"
