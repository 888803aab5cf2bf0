#!/bin/bash
# Focused cold A/B, old (the parent commit) vs new, both as ab_and_timelines.sh built them: reference none, streaming and wide none as controls.
# Run from the repository root: OUTDIR for the logs; OLD_SRC a copy of the parent commit's
# engines/ directory (the "old" side). Needs the package importable (PYTHONPATH=python), CuPy
# and PyTorch (the timeline's profiler), CMake, Ninja and nvcc.
OUT=${1:?usage: script OUTDIR [OLD_SRC]}; OLD_SRC=${2:-}
export PYTHONPATH=$PWD/python
libbuild() {  # src build-dir
  [ -f $2/engines/cuda/librh_cuda.so ] && return 0
  cmake -S $1 -B $2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_CUDA=ON -DRH_BUILD_TESTS=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 > $2.cfg.log 2>&1 && cmake --build $2 --target rh_cuda -j ${JOBS:-8} > $2.log 2>&1
}
mkdir -p build
R=$OUT; mkdir -p $R
ls build/old/engines/cuda/librh_cuda.so build/n/engines/cuda/librh_cuda.so || exit 1
NEW=$PWD/build/n/engines/cuda/librh_cuda.so; OLD=$PWD/build/old/engines/cuda/librh_cuda.so
for r in 1 2 3 4 5 6 7 8 9 10; do
  order="old new"; [ $((r % 2)) = 0 ] && order="new old"
  for side in $order; do
    LIB=$OLD; [ $side = new ] && LIB=$NEW
    RH_CUDA_LIBRARY=$LIB timeout 60 python3 benchmarks/micro/cuda_cold_streams.py $side --repetitions 15 --penalties none --shapes reference,streaming,wide >> $R/cold.jsonl 2>/dev/null
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
