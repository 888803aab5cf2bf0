#!/usr/bin/env bash
# Where the large-stream row pass's time goes, and the review commit's GPU tests. Run from the
# repository root on the GPU host:  bash benchmarks/records/gpu-2026-12-04-h200-m/profile/profile.sh OUTDIR
# Builds this tree (rh_cuda, test_cuda_entry_points, test_cuda_numerics), runs the entry-point
# test in its four modes and test_cuda_numerics (tests.txt), then Nsight Compute's full set on
# launches 9-12 of row_pass_kernel in one large-stream stream of each dtype and on launch 5 of
# validate_rows_kernel (float64), summarised by ../ncu_tables.py into rowpass-ncu.txt.
set -u
out=$1
here=benchmarks/records/gpu-2026-12-04-h200-m
mkdir -p "$out" build
. benchmarks/records/gpu-2026-12-04-h200-f/ab_common.sh
libbuild . build/m-profile test_cuda_entry_points test_cuda_numerics || exit 1
tests=build/m-profile/engines/cuda/tests
for mode in "" --lifecycle --staging --allocation-failure; do
  timeout 300 $tests/test_cuda_entry_points $mode > "$out/entry$mode.txt" 2>&1
  echo "test_cuda_entry_points $mode rc $?" >> "$out/tests.txt"
done
timeout 300 $tests/test_cuda_numerics > "$out/numerics.txt" 2>&1
echo "test_cuda_numerics rc $?" >> "$out/tests.txt"
export RH_CUDA_LIBRARY=$PWD/build/m-profile/engines/cuda/librh_cuda.so PYTHONPATH=$PWD/python:$PWD
for dtype in float64 float32; do
  ncu --set full --import-source no --kernel-name regex:row_pass_kernel --launch-skip 8 \
    --launch-count 4 -o "$out/rp-$dtype" python3 $here/stream_once.py large large-stream $dtype
  ncu --import "$out/rp-$dtype.ncu-rep" --page details --csv > "$out/rp-$dtype-details.csv"
  ncu --import "$out/rp-$dtype.ncu-rep" --page source --csv --print-source sass > "$out/rp-$dtype-sass.csv"
done
ncu --set full --kernel-name regex:validate_rows_kernel --launch-skip 4 --launch-count 1 \
  -o "$out/val-float64" python3 $here/stream_once.py large large-stream float64
ncu --import "$out/val-float64.ncu-rep" --page details --csv > "$out/val-float64-details.csv"
{
  for dtype in float64 float32; do
    echo "## row_pass_kernel, large-stream $dtype (launches 9-12 of the process)"
    python3 $here/ncu_tables.py details "$out/rp-$dtype-details.csv"
    python3 $here/ncu_tables.py sass "$out/rp-$dtype-sass.csv"
  done
  echo "## validate_rows_kernel, large-stream float64 (launch 5)"
  python3 $here/ncu_tables.py details "$out/val-float64-details.csv"
} > "$out/rowpass-ncu.txt"
