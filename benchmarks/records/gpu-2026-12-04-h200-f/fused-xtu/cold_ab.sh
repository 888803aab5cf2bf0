#!/bin/bash
# Focused cold A/B, old (the parent commit) vs new, both as ab_and_timelines.sh built them: reference none, streaming and wide none as controls.
# Run from the repository root: OUTDIR for the logs; OLD_SRC a copy of the parent commit's
# engines/ directory (the "old" side). Needs the package importable (PYTHONPATH=python), CuPy
# and PyTorch (the timeline's profiler), CMake, Ninja and nvcc.
OUT=${1:?usage: script OUTDIR [OLD_SRC]}; OLD_SRC=${2:-}
export PYTHONPATH=$PWD/python
source "$(dirname "$0")/../ab_common.sh"
mkdir -p build
R=$OUT; mkdir -p $R
ls build/old/engines/cuda/librh_cuda.so build/n/engines/cuda/librh_cuda.so || exit 1
NEW=$PWD/build/n/engines/cuda/librh_cuda.so; OLD=$PWD/build/old/engines/cuda/librh_cuda.so
cold_rounds "$R" "$OLD" "$NEW" 10 cold-ab.txt --repetitions 15 --penalties none \
  --shapes reference,streaming,wide
