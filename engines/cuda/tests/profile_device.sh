#!/usr/bin/env bash
# Where librh_cuda's time goes, on the GPU host: per-update timing on the standard batch shapes,
# an ncu per-kernel summary of one eager update per shape, and a cProfile of the Python
# estimator's partial_fit on device input. A measurement tool, not a test.
#
#   engines/cuda/tests/profile_device.sh OUTDIR [BUILD_DIR]
set -u
OUTDIR=${1:?usage: profile_device.sh OUTDIR [BUILD_DIR]}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
BUILD=${2:-$ROOT/build/device-profile}
mkdir -p "$OUTDIR"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_CUDA=ON -DRH_BUILD_TESTS=ON \
  >"$OUTDIR/build.log" 2>&1 && cmake --build "$BUILD" -j "$(nproc)" >>"$OUTDIR/build.log" 2>&1 \
  || { tail -40 "$OUTDIR/build.log"; exit 1; }
TIMING=$(find "$BUILD" -name cuda_update_timing -type f -print -quit)
export RH_CPU_LIBRARY=$(find "$BUILD" -name librh_cpu.so -print -quit)
export RH_CUDA_LIBRARY=$(find "$BUILD" -name librh_cuda.so -print -quit)
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
echo "tools: $(command -v nsys || echo 'no nsys') $(command -v ncu || echo 'no ncu')" | tee "$OUTDIR/summary.txt"
"$TIMING" ${REPS:-7} all both both >"$OUTDIR/timing.log" 2>&1
cat "$OUTDIR/timing.log"
for shape in ${NCU_SHAPES:-latency wide reference}; do
  timeout 150 ncu --metrics gpu__time_duration.sum --print-summary per-kernel --launch-count 300 \
    "$TIMING" 1 "$shape" eager f64 >"$OUTDIR/ncu-$shape.log" 2>&1
  echo "ncu $shape rc=$?" | tee -a "$OUTDIR/summary.txt"
done
python3 "$ROOT/engines/cuda/tests/profile_estimator.py" >"$OUTDIR/estimator-profile.log" 2>&1
echo "estimator profile rc=$?" | tee -a "$OUTDIR/summary.txt"
tail -60 "$OUTDIR/estimator-profile.log"
