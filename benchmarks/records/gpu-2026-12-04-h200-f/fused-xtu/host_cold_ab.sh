#!/bin/bash
# Host input: fa80896's engine against the final tree's, one package (reference and wide, both dtypes).
# Run from the repository root: OUTDIR for the logs; OLD_SRC a copy of fa80896's engines/
# directory (the "old" side). Needs CuPy, CMake, Ninja and nvcc.
OUT=${1:?usage: script OUTDIR OLD_SRC}; OLD_SRC=${2:?}
export PYTHONPATH=$PWD/python
source "$(dirname "$0")/../ab_common.sh"
mkdir -p build
R=$OUT; mkdir -p $R
T0=$(date +%s)
oldtree "$OLD_SRC"
JOBS=8 libbuild $PWD build/new & JOBS=8 libbuild $PWD/build/oldtree build/old; wait; echo "built at $(( $(date +%s) - T0 )) s"
cold_rounds "$R" "$PWD/build/old/engines/cuda/librh_cuda.so" "$PWD/build/new/engines/cuda/librh_cuda.so" \
  6 cold-ab-host.txt --transport host --repetitions 5 --penalties none --shapes reference,wide
