#!/usr/bin/env bash
# The released wheels on a GPU host: the base wheel and the CUDA wheel built elsewhere
# (`make wheel` and `make wheel-cuda CUDA=13` or `CUDA=12`, both into dist/) installed into a
# clean virtual environment, binary wheels only (no compiler, no cmake), then, from outside the
# checkout:
#   renewable-huber info (native_cuda must report the GPU), librh_cuda resolving cuBLAS and
#   cuSOLVER through its RUNPATH from NVIDIA's wheels inside the venv, the conformance kit on
#   native_cpu and native_cuda, and a fit with every engine against the NumPy reference.
#
#   bash runbooks/scripts/gpu_wheel_smoke.sh [DIST]        (default DIST: dist)
#
# CUDA_MAJOR picks the CUDA wheel renewable_huber_cudaMAJOR (12 or 13; default 13). With a
# reachable package index, pip installs NumPy and NVIDIA's cuBLAS/cuSOLVER wheels (the CUDA
# wheel's own dependencies). Without one (RH_SMOKE_OFFLINE=1, or the index does not answer),
# NumPy and CuPy are borrowed from the host's python3 and the host's cuBLAS/cuSOLVER of that
# CUDA major (RH_SMOKE_CUDA_LIBDIR, else NVIDIA's wheels in the host's python3, ldconfig,
# CUDA_HOME, /usr/local/cuda-MAJOR or /usr/local/cuda) are linked into the venv where
# NVIDIA's wheels put them, so the RUNPATH lookup is still the one exercised.
# Exit status 0 only when every step passed; the log says which step failed.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
DIST="$(cd "${1:-$REPO_ROOT/dist}" && pwd)"
CUDA_MAJOR="${CUDA_MAJOR:-13}"
base="$(ls "$DIST"/renewable_huber-*.whl 2>/dev/null | head -n1)"
cuda="$(ls "$DIST"/renewable_huber_cuda"$CUDA_MAJOR"-*.whl 2>/dev/null | head -n1)"
[ -n "$base" ] || fail "no renewable_huber-*.whl in $DIST (make wheel)"
[ -n "$cuda" ] || fail "no renewable_huber_cuda$CUDA_MAJOR-*.whl in $DIST (make wheel-cuda CUDA=$CUDA_MAJOR)"

step "host"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader || true
python3 --version

mode=()
cublas_wheel=nvidia-cublas
[ "$CUDA_MAJOR" -ge 13 ] || cublas_wheel="nvidia-cublas-cu$CUDA_MAJOR"
if [ "${RH_SMOKE_OFFLINE:-}" = 1 ] || ! timeout 30 python3 -m pip index versions "$cublas_wheel" >/dev/null 2>&1; then
  mode=(--offline)
  if [ -z "${RH_SMOKE_CUDA_LIBDIR:-}" ]; then
    cublas="$(ldconfig -p 2>/dev/null | sed -n "s/.*libcublas\.so\.$CUDA_MAJOR .*=> \(.*\)/\1/p" | head -n1)"
    # NVIDIA's wheels already in the host's python3 (CuPy's CUDA libraries, for one) first.
    host_wheels="$(python3 -c 'import os, nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null || true)"
    host_wheel_libs="${host_wheels:-/nonexistent}/cu$CUDA_MAJOR/lib"
    if [ "$CUDA_MAJOR" -lt 13 ] && [ -e "${host_wheels:-/nonexistent}/cublas/lib/libcublas.so.$CUDA_MAJOR" ]; then
      # CUDA 12 wheels keep one folder per library: gather their libraries into one folder.
      host_wheel_libs="$(mktemp -d /tmp/rh-cuda$CUDA_MAJOR-libs.XXXXXX)"
      trap 'rm -rf "$host_wheel_libs"' EXIT
      for lib_dir in "$host_wheels"/{cublas,cusolver,cusparse,nvjitlink}/lib; do
        for f in "$lib_dir"/lib*.so.*; do
          if [ -e "$f" ]; then ln -sf "$f" "$host_wheel_libs/"; fi
        done
      done
    fi
    for candidate in "$host_wheel_libs" \
        "$(dirname "${cublas:-/nonexistent/x}")" "${CUDA_HOME:-/nonexistent}/lib64" \
        /usr/local/cuda-"$CUDA_MAJOR"/lib64 /usr/local/cuda-"$CUDA_MAJOR"/targets/x86_64-linux/lib \
        /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
      if ls "$candidate"/libcublas.so."$CUDA_MAJOR" >/dev/null 2>&1; then
        RH_SMOKE_CUDA_LIBDIR="$candidate"; break
      fi
    done
  fi
  [ -n "${RH_SMOKE_CUDA_LIBDIR:-}" ] || fail "offline and no libcublas.so.$CUDA_MAJOR found: set RH_SMOKE_CUDA_LIBDIR"
  export RH_SMOKE_CUDA_LIBDIR
  echo "offline: NumPy/CuPy from the host's python3, cuBLAS/cuSOLVER from $RH_SMOKE_CUDA_LIBDIR"
else
  echo "online: NumPy and NVIDIA's wheels from the package index"
fi

step "wheel smoke: $(basename "$base") + $(basename "$cuda")"
PYTHON=python3 "$REPO_ROOT/packaging/smoke_wheel.sh" --engines native_cpu,native_cuda \
  "${mode[@]}" "$base" "$cuda"
step "GPU wheel smoke PASSED"
