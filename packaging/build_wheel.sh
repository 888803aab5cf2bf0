#!/usr/bin/env bash
# The portable wheel of renewable-huber, built here the way the release builds it: an sdist
# first, the wheel from that sdist (so a file missing from the sdist fails here, not on a
# user's machine), then `auditwheel repair` (Linux) into OUTDIR.
#
#   packaging/build_wheel.sh [OUTDIR]      (default: dist)
#
# PYTHON names the interpreter (with pip, build and auditwheel; `make wheel` passes the project
# venv's). Which librh_cpu goes in depends on the glibc of this machine:
#   - glibc <= 2.28 (the manylinux_2_28 image cibuildwheel uses): OpenMP on, auditwheel bundles
#     that glibc's libgomp, the wheel is manylinux_2_28 at most;
#   - a newer glibc (a developer machine, this project's CI): its libgomp needs that newer glibc,
#     so the engine is built serial (RH_OPENMP=OFF) with its libm calls bound to their original
#     glibc symbol versions (RH_GLIBC_COMPAT=ON); auditwheel then finds manylinux_2_17.
# RH_WHEEL_OPENMP=ON|OFF overrides the choice (ON on a new glibc gives an honest but newer tag).
# librh_cuda never goes into this wheel (RH_BUILD_CUDA=OFF): CUDA wheels are separate
# distributions (packaging/build_cuda_wheel.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUTDIR="$(mkdir -p "${1:-$ROOT/dist}" && cd "${1:-$ROOT/dist}" && pwd)"
PYTHON="${PYTHON:-python3}"
WORK="$ROOT/build/wheel"
rm -rf "$WORK" && mkdir -p "$WORK/sdist" "$WORK/raw"

settings=(-C cmake.define.RH_BUILD_CUDA=OFF -C cmake.define.RH_BUILD_TESTS=OFF)
case "$(uname -s)" in
  Linux)
    glibc="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
    if [ -z "$glibc" ]; then
      echo "build_wheel.sh: not a glibc system (musl?): only manylinux wheels are built here" >&2
      exit 2
    fi
    newer="$(printf '%s\n' 2.28 "$glibc" | sort -V | tail -n1)"
    if [ "${RH_WHEEL_OPENMP:-}" = ON ] || { [ -z "${RH_WHEEL_OPENMP:-}" ] && [ "$newer" = 2.28 ]; }; then
      echo "glibc $glibc: OpenMP on, libgomp bundled by auditwheel"
      settings+=(-C cmake.define.RH_OPENMP=ON)
    else
      echo "glibc $glibc is newer than 2.28: serial librh_cpu (RH_OPENMP=OFF) with RH_GLIBC_COMPAT=ON"
      settings+=(-C cmake.define.RH_OPENMP=OFF -C cmake.define.RH_GLIBC_COMPAT=ON)
    fi
    ;;
  *) echo "build_wheel.sh builds Linux wheels; use cibuildwheel elsewhere (pyproject.toml)" >&2
     exit 2 ;;
esac

echo "== sdist"
"$PYTHON" -m build --sdist --outdir "$WORK/sdist" "$ROOT"
sdist="$(ls "$WORK"/sdist/*.tar.gz)"
echo "== wheel from $(basename "$sdist")"
# -v: the CMake summary line (what was built, OpenMP or not) belongs in the log.
"$PYTHON" -m pip wheel --disable-pip-version-check --no-deps -v -w "$WORK/raw" \
  "${settings[@]}" -C build-dir="$WORK/cmake" "$sdist" >"$WORK/build.log" 2>&1 || {
  tail -n 60 "$WORK/build.log" >&2; echo "wheel build failed (log: $WORK/build.log)" >&2; exit 1; }
grep "renewable-huber: building" "$WORK/build.log" || {
  echo "the CMake summary line is missing from $WORK/build.log" >&2; exit 1; }
raw="$(ls "$WORK"/raw/*.whl)"
echo "== auditwheel repair $(basename "$raw")"
rm -f "$OUTDIR"/renewable_huber-*.whl "$OUTDIR"/renewable_huber-*.tar.gz
"$PYTHON" -m auditwheel repair -w "$OUTDIR" "$raw"
cp "$sdist" "$OUTDIR/"
wheel="$(ls "$OUTDIR"/renewable_huber-*.whl)"
"$PYTHON" -m auditwheel show "$wheel"
echo "built: $wheel"
echo "built: $OUTDIR/$(basename "$sdist")"
