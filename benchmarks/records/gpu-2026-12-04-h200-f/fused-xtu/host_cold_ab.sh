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
mkdir -p build/oldtree && tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C build/oldtree && cp -r "$OLD_SRC" build/oldtree/
JOBS=8 libbuild $PWD build/new & JOBS=8 libbuild $PWD/build/oldtree build/old; wait; echo "built at $(( $(date +%s) - T0 )) s"
for r in 1 2 3 4 5 6; do
  order="old new"; [ $((r % 2)) = 0 ] && order="new old"
  for side in $order; do
    RH_CUDA_LIBRARY=$PWD/build/$side/engines/cuda/librh_cuda.so timeout 60 python3 benchmarks/micro/cuda_cold_streams.py $side --transport host --repetitions 5 --penalties none --shapes reference,wide >> $R/cold.jsonl 2>$R/err-$side.log
  done
done
python3 benchmarks/micro/cuda_cold_streams.py --summarize $R/cold.jsonl | tee $R/cold-ab-host.txt
echo "done at $(( $(date +%s) - T0 )) s"
