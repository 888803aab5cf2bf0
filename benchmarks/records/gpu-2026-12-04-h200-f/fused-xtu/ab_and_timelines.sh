#!/bin/bash
# X'u in the fused row pass at every width: old (the parent commit) vs new builds, test_cuda_numerics, timelines, cold A/B.
# Run from the repository root: OUTDIR for the logs; OLD_SRC a copy of the parent commit's
# engines/ directory (the "old" side). Needs the package importable (PYTHONPATH=python), CuPy
# and PyTorch (the timeline's profiler), CMake, Ninja and nvcc.
OUT=${1:?usage: script OUTDIR [OLD_SRC]}; OLD_SRC=${2:-}
export PYTHONPATH=$PWD/python
source "$(dirname "$0")/../ab_common.sh"
mkdir -p build
R=$OUT; mkdir -p $R
T0=$(date +%s)
mkdir -p build/oldtree && tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C build/oldtree && cp -r "$OLD_SRC" build/oldtree/
{ cmake -S . -B build/n -G Ninja -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_CUDA=ON -DRH_BUILD_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build/n --target rh_cuda test_cuda_numerics -j 12; } > $R/build.log 2>&1 &
JOBS=4 libbuild $PWD/build/oldtree build/old; wait; echo "build new rc: $(tail -1 $R/build.log) at $(( $(date +%s) - T0 )) s"
timeout 150 build/n/engines/cuda/tests/test_cuda_numerics > $R/test_cuda_numerics.txt 2>&1; echo "numerics rc $? at $(( $(date +%s) - T0 )) s"
grep -E "FAIL|^PASS|CHECK failed" $R/test_cuda_numerics.txt | head -20
NEW=$PWD/build/n/engines/cuda/librh_cuda.so; OLD=$PWD/build/old/engines/cuda/librh_cuda.so
for side in old new; do
  LIB=$OLD; [ $side = new ] && LIB=$NEW
  mkdir -p $R/tl-$side
  RH_CUDA_LIBRARY=$LIB timeout 60 python3 benchmarks/micro/cuda_stream_timeline.py run $R/tl-$side reference:float64:none reference:float32:none reference:float64:l1 streaming:float64:none > $R/timeline-$side.txt 2>&1
  echo "== $side"; grep -E "^## |busy|row_gram|gemv|splitK|dot_kernel" $R/timeline-$side.txt
done
rm -rf $R/tl-*
echo "at $(( $(date +%s) - T0 )) s"
for r in 1 2 3 4 5 6; do
  order="old new"; [ $((r % 2)) = 0 ] && order="new old"
  for side in $order; do
    LIB=$OLD; [ $side = new ] && LIB=$NEW
    RH_CUDA_LIBRARY=$LIB timeout 60 python3 benchmarks/micro/cuda_cold_streams.py $side --repetitions 11 --penalties none,l1 --shapes reference,streaming,wide >> $R/cold.jsonl 2>/dev/null
  done
done
python3 benchmarks/micro/cuda_cold_streams.py --summarize $R/cold.jsonl | tee $R/cold-ab.txt
echo "done at $(( $(date +%s) - T0 )) s"
