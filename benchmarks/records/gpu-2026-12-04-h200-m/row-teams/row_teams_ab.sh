#!/usr/bin/env bash
# The X'u row pass's team shapes up to 128 columns, as Nsight Compute times them. Run from the
# repository root on the GPU host:
#   bash benchmarks/records/gpu-2026-12-04-h200-m/row-teams/row_teams_ab.sh OUTDIR OLD_ENGINES
# OLD_ENGINES: the engines/ directory of fc0e162 (a warp per row holding two rows: v0).
# variants.patch (against fc0e162) makes the team shape a build switch: RH_TEAM lanes per row,
# RH_KROWS rows a team holds at once, RH_BPS blocks per SM. v1: 16 lanes, one row, 3 blocks;
# v2: 16 lanes, two rows, 2 blocks; v3: 8 lanes, one row, 2 blocks (what 57d52ab ships).
# Writes test_cuda_numerics of each variant (numerics-vN.txt) and the row passes' time in one
# stream per case and variant (rowpass.txt: ncu's gpu__time_duration.sum, ../ncu_tables.py).
set -u
out=$1
here=benchmarks/records/gpu-2026-12-04-h200-m
mkdir -p "$out" build
. benchmarks/records/gpu-2026-12-04-h200-f/ab_common.sh
oldtree "$2" || exit 1
rm -rf build/teams-src && mkdir -p build/teams-src &&
  tar -C build/oldtree --exclude=./build -cf - . | tar -xf - -C build/teams-src &&
  patch -d build/teams-src -p1 < $here/row-teams/variants.patch > /dev/null || exit 1
variant() {  # src build-dir flags test-targets...
  JOBS=4 CUDA_FLAGS=$3 libbuild "$1" "$2" "${@:4}"
  echo "$2 rc $?"
}
variant build/oldtree build/teams-v0 "" &
variant build/teams-src build/teams-v1 "-DRH_TEAM=16 -DRH_KROWS=1 -DRH_BPS=3" test_cuda_numerics &
variant build/teams-src build/teams-v2 "-DRH_TEAM=16 -DRH_KROWS=2 -DRH_BPS=2" test_cuda_numerics &
variant build/teams-src build/teams-v3 "-DRH_TEAM=8 -DRH_KROWS=1 -DRH_BPS=2" test_cuda_numerics &
wait
for v in v1 v2 v3; do
  timeout 300 build/teams-$v/engines/cuda/tests/test_cuda_numerics > "$out/numerics-$v.txt" 2>&1
  echo "numerics $v rc $?" >> "$out/tests.txt"
done
export PYTHONPATH=$PWD/python:$PWD
for case in "large large-stream float64" "large large-stream float32" \
            "standard reference float64" "standard reference float32"; do
  set -- $case
  for v in v0 v1 v2 v3; do
    RH_CUDA_LIBRARY=$PWD/build/teams-$v/engines/cuda/librh_cuda.so timeout 120 \
      ncu --metrics gpu__time_duration.sum --kernel-name regex:row_pass_kernel --csv \
      python3 $here/stream_once.py $1 $2 $3 > "$out/t-$2-$3-$v.csv" 2> "$out/t-$2-$3-$v.err"
    echo "## $2 $3 $v $(grep -o 'iterations [0-9]*' "$out/t-$2-$3-$v.csv")" >> "$out/rowpass.txt"
    python3 $here/ncu_tables.py durations "$out/t-$2-$3-$v.csv" >> "$out/rowpass.txt" 2>&1
  done
done
