# Sourced by this record's scripts, run from the repository root: the release library's build
# (rh_cuda only; a build directory that already holds it is reused).
libbuild() {  # src build-dir
  [ -f "$2/engines/cuda/librh_cuda.so" ] && return 0
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRH_BUILD_CUDA=ON \
    -DRH_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 > "$2.cfg.log" 2>&1 &&
    cmake --build "$2" --target rh_cuda -j "${JOBS:-8}" > "$2.log" 2>&1
}
