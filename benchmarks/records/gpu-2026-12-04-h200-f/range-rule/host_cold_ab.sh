#!/bin/bash
# Host-input cold streams, the package before and after the range rule's sliced sum, one library.
# Run from the repository root: OUTDIR for the logs; OLD_VALIDATION the package's
# _validation.py before the change. Needs CuPy, CMake, Ninja and nvcc.
OUT=${1:?usage: script OUTDIR OLD_VALIDATION}; OLD_VALIDATION=${2:?}
source "$(dirname "$0")/../ab_common.sh"
mkdir -p build
R=$OUT; mkdir -p $R
T0=$(date +%s)
JOBS=16 libbuild $PWD build/lib; echo "built at $(( $(date +%s) - T0 )) s"
rm -rf build/oldpy && mkdir -p build/oldpy && cp -r python build/oldpy/ && cp "$OLD_VALIDATION" build/oldpy/python/renewable_huber/_validation.py
export RH_CUDA_LIBRARY=$PWD/build/lib/engines/cuda/librh_cuda.so
for r in 1 2 3 4 5 6 7 8; do
  order="old new"; [ $((r % 2)) = 0 ] && order="new old"
  for side in $order; do
    PY=$PWD/python; [ $side = old ] && PY=$PWD/build/oldpy/python
    PYTHONPATH=$PY timeout 90 python3 benchmarks/micro/cuda_cold_streams.py $side --transport host --repetitions 7 --penalties none --shapes streaming,reference,wide,latency >> $R/cold.jsonl 2>$R/err-$side.log
  done
done
python3 benchmarks/micro/cuda_cold_streams.py --summarize $R/cold.jsonl | tee $R/cold-ab.txt
tail -3 $R/err-new.log
echo "done at $(( $(date +%s) - T0 )) s"
