# Sourced by the A/B scripts of this record and of gpu-2026-12-04-h200-g, run from the repository
# root. The release library's build (rh_cuda only; a build directory that already holds it is
# reused); with more targets after the build directory (test tools such as
# cuda_lifecycle_timing), the tests' build with rh_cuda and those targets, never reused.
# CUDA_FLAGS (optional): the build's CMAKE_CUDA_FLAGS (a variant's switches).
libbuild() {  # src build-dir [test targets...]
  local tests=OFF
  if [ $# -gt 2 ]; then
    tests=ON
  elif [ -f "$2/engines/cuda/librh_cuda.so" ]; then
    return 0
  fi
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_CUDA=ON \
    -DRH_BUILD_TESTS=$tests -DCMAKE_CUDA_ARCHITECTURES=90 ${CUDA_FLAGS:+"-DCMAKE_CUDA_FLAGS=$CUDA_FLAGS"} \
    > "$2.cfg.log" 2>&1 &&
    cmake --build "$2" --target rh_cuda "${@:3}" -j "${JOBS:-8}" > "$2.log" 2>&1
}
# The "old" side's tree in build/oldtree: this tree with OLD_SRC (a copy of an older commit's
# engines/ directory) copied over it.
oldtree() {  # OLD_SRC
  # Given any other directory, the copy below would land beside engines/ and the "old" side
  # would build this tree's engines: an A/A comparison under an A/B's labels.
  if [ "$(basename "$1")" != engines ] || [ ! -d "$1/cuda" ]; then
    echo "oldtree: OLD_SRC must be an engines/ directory, not $1" >&2
    return 1
  fi
  mkdir -p build/oldtree &&
    tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C build/oldtree &&
    cp -r "$1" build/oldtree/
}
# The old side (OLD_SRC's engines over this tree) and this tree, built at once into
# build/PREFIXold and build/PREFIXnew (PREFIX empty when not given); test targets after PREFIX
# go to this tree's build (libbuild). OLD and NEW name their librh_cuda.
old_and_new_libraries() {  # OLD_SRC [PREFIX [test targets...]]
  local prefix=${2:-}
  oldtree "$1" || return 1
  JOBS=8 libbuild build/oldtree "build/${prefix}old" &
  JOBS=8 libbuild . "build/${prefix}new" "${@:3}" &
  wait
  OLD=$PWD/build/${prefix}old/engines/cuda/librh_cuda.so
  NEW=$PWD/build/${prefix}new/engines/cuda/librh_cuda.so
  ls "$OLD" "$NEW" > /dev/null || { tail -20 "build/${prefix}old.log" "build/${prefix}new.log"; return 1; }
}
# ROUNDS rounds of cold streams (benchmarks/micro/cuda_cold_streams.py with the arguments after
# SUMMARY), the old and the new librh_cuda alternating process by process (old first in odd
# rounds), appended to OUTDIR/cold.jsonl; then their summary, printed and kept in
# OUTDIR/SUMMARY.
cold_rounds() {  # OUTDIR OLD_LIBRARY NEW_LIBRARY ROUNDS SUMMARY cuda_cold_streams.py-arguments...
  local out=$1 old=$2 new=$3 rounds=$4 summary=$5 r side order lib
  shift 5
  for r in $(seq "$rounds"); do
    order="old new"; [ $((r % 2)) = 0 ] && order="new old"
    for side in $order; do
      lib=$old; [ $side = new ] && lib=$new
      RH_CUDA_LIBRARY=$lib timeout 90 python3 benchmarks/micro/cuda_cold_streams.py $side "$@" \
        >> "$out/cold.jsonl" 2>> "$out/err-$side.log"
    done
  done
  python3 benchmarks/micro/cuda_cold_streams.py --summarize "$out/cold.jsonl" | tee "$out/$summary"
}
