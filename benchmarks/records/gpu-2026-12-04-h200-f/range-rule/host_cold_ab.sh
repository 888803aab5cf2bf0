#!/bin/bash
# Host-input cold streams, the package before and after the range rule's sliced sum, one library.
# Run from the repository root: OUTDIR for the logs; OLD_VALIDATION the package's
# _validation.py before the change. Needs CuPy, CMake, Ninja and nvcc.
OUT=${1:?usage: script OUTDIR OLD_VALIDATION}; OLD_VALIDATION=${2:?}
libbuild() {  # src build-dir
  [ -f $2/engines/cuda/librh_cuda.so ] && return 0
  cmake -S $1 -B $2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_CUDA=ON -DRH_BUILD_TESTS=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 > $2.cfg.log 2>&1 && cmake --build $2 --target rh_cuda -j ${JOBS:-8} > $2.log 2>&1
}
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
python3 - $R/cold.jsonl <<'PY' | tee $R/cold-ab.txt
import json, sys, statistics, collections
d = collections.defaultdict(list); it = {}
for l in open(sys.argv[1]):
    r = json.loads(l); d[(r["case"], r["side"])].append(r["ms"]); it[(r["case"], r["side"])] = (r["iters"], r["coef0"])
for case in sorted({c for c, _ in d}):
    o, n = d[(case, "old")], d[(case, "new")]
    wins = sum(a > b for a, b in zip(o, n))
    print(f"{case}: old {['%.3f' % x for x in o]} new {['%.3f' % x for x in n]}; medians {statistics.median(o):.3f} -> {statistics.median(n):.3f} ({statistics.median(o)/statistics.median(n):.3f}x), new faster in {wins}/{len(o)} rounds; iterations and coef0 equal: {it[(case,'old')] == it[(case,'new')]}")
PY
tail -3 $R/err-new.log
echo "done at $(( $(date +%s) - T0 )) s"
