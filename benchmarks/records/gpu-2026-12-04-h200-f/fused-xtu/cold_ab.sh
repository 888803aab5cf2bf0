#!/bin/bash
# Focused cold A/B, old (HEAD) vs new (X'u in the fused pass): reference none, streaming and wide none as controls.
source .devrun/common.sh; mkdir -p build
R=$OUT/r28; mkdir -p $R
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
