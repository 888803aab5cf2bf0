#!/usr/bin/env bash
# The CUDA wheel renewable-huber-cudaMAJOR: librh_cuda alone, compiled with nvcc against
# cuBLAS and cuSOLVER from NVIDIA's wheels, finding them at run time through its RUNPATH in
# site-packages/nvidia/... (where those wheels install), repaired by auditwheel with NVIDIA's
# libraries excluded (they are dependencies, never bundled), then checked
# (packaging/check_wheel.py --kind cuda).
#
#   packaging/build_cuda_wheel.sh 12|13 [OUTDIR]       (default OUTDIR: dist)
#
# PYTHON: interpreter with pip and auditwheel (`make wheel-cuda` passes the venv's).
# NVCC: the CUDA compiler of that major (default: nvcc on PATH, then /usr/local/cuda/bin/nvcc;
# for CUDA 12 without a toolkit, packaging/cuda/fetch_cuda12_toolkit.sh provides one).
# CUDA_ARCHITECTURES: CMake's list (default below: every architecture the toolkit's cuBLAS
# supports as machine code, plus PTX of the newest for later GPUs).
# The CUDA toolkit provides nvcc, the runtime (linked statically) and its headers; cuBLAS and
# cuSOLVER are the pinned wheels of packaging/cuda/sdk-cuMAJOR.txt, installed once into
# build/cuda-sdk-MAJOR.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MAJOR="${1:?usage: build_cuda_wheel.sh 12|13 [OUTDIR]}"
case "$MAJOR" in 12|13) ;; *) echo "CUDA major must be 12 or 13, got '$MAJOR'" >&2; exit 2 ;; esac
OUTDIR="$(mkdir -p "${2:-$ROOT/dist}" && cd "${2:-$ROOT/dist}" && pwd)"
PYTHON="${PYTHON:-python3}"
SDK="$ROOT/build/cuda-sdk-$MAJOR"
WORK="$ROOT/build/cuda-wheel-$MAJOR"
PINS="$ROOT/packaging/cuda/sdk-cu$MAJOR.txt"

NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
[ -x "$NVCC" ] || { echo "no nvcc found (set NVCC to the CUDA $MAJOR compiler)" >&2; exit 2; }
nvcc_release="$("$NVCC" --version | sed -n 's/.*release \([0-9][0-9]*\)\.\([0-9]*\).*/\1.\2/p')"
if [ "${nvcc_release%%.*}" != "$MAJOR" ]; then
  echo "$NVCC is CUDA $nvcc_release, not CUDA $MAJOR: set NVCC to a CUDA $MAJOR nvcc" >&2
  if [ "$MAJOR" = 12 ]; then
    echo "(PyPI has no CUDA 12 nvcc; on Debian/Ubuntu, packaging/cuda/fetch_cuda12_toolkit.sh fetches one and prints its path, which \`make wheel-cuda CUDA=12\` does by itself when NVCC is not set)" >&2
  fi
  exit 2
fi
if [ -z "${CUDA_ARCHITECTURES:-}" ]; then
  if [ "$MAJOR" = 13 ]; then
    CUDA_ARCHITECTURES="75-real;80-real;86-real;89-real;90-real;100-real;120-real;120-virtual"
  else
    CUDA_ARCHITECTURES="70-real;75-real;80-real;86-real;89-real;90-real;90-virtual"
  fi
fi

echo "== cuBLAS/cuSOLVER wheels for CUDA $MAJOR -> $SDK"
if ! cmp -s "$PINS" "$SDK/pins.txt" 2>/dev/null; then
  rm -rf "$SDK"
  "$PYTHON" -m pip install --disable-pip-version-check --quiet --no-deps --only-binary=:all: \
    --target "$SDK/site" -r "$PINS"
  cp "$PINS" "$SDK/pins.txt"
fi
# One prefix with include/ and lib/ for CMake (RH_CUDA_LIBRARY_ROOT), whatever the wheels'
# layout: CUDA 13 wheels share nvidia/cu13, CUDA 12 wheels have a folder per library. The
# wheels carry only SONAME files, so the linker's libX.so names are added here.
prefix="$SDK/prefix"
rm -rf "$prefix" && mkdir -p "$prefix/include" "$prefix/lib"
for dir in "$SDK"/site/nvidia/*/include; do
  for f in "$dir"/*; do ln -sf "$f" "$prefix/include/"; done
done
for dir in "$SDK"/site/nvidia/*/lib; do
  for f in "$dir"/lib*.so.*; do
    [ -e "$f" ] || continue
    ln -sf "$f" "$prefix/lib/"
    ln -sf "$f" "$prefix/lib/$(basename "${f%%.so.*}").so"
  done
done

echo "== project for renewable-huber-cuda$MAJOR (nvcc $nvcc_release, architectures $CUDA_ARCHITECTURES)"
rm -rf "$WORK" && mkdir -p "$WORK/project" "$WORK/raw"
"$PYTHON" - "$ROOT" "$MAJOR" "$prefix" "$NVCC" "$CUDA_ARCHITECTURES" "$WORK/project" <<'PY'
import re, shutil, sys
from pathlib import Path

root, major, prefix, nvcc, architectures, project = sys.argv[1:]
text = (Path(root) / "pyproject.toml").read_text()
version = re.search(r'^version = "([^"]+)"', text, re.M).group(1)
urls_table = re.search(r"^\[project\.urls\]\n((?:.+\n)+)", text, re.M)
urls = urls_table.group(1).strip() if urls_table else ""
dependencies = {
    "12": ['"nvidia-cublas-cu12>=12.1,<13"', '"nvidia-cusolver-cu12>=11.4,<12"'],
    "13": ['"nvidia-cublas>=13,<14"', '"nvidia-cusolver>=12,<13"'],
}[major]
template = (Path(root) / "packaging/cuda/pyproject.toml.in").read_text()
values = {"MAJOR": major, "VERSION": version, "URLS": urls, "SOURCE_DIR": root,
          "SDK_PREFIX": prefix, "NVCC": nvcc, "ARCHITECTURES": architectures,
          "DEPENDENCIES": ",\n".join(f"  {d}" for d in dependencies)}
rendered = re.sub(r"@([A-Z_]+)@", lambda m: values[m.group(1)], template)
Path(project, "pyproject.toml").write_text(rendered)
shutil.copy(Path(root) / "LICENSE", Path(project, "LICENSE"))
Path(project, "README.md").write_text(
    f"# renewable-huber-cuda{major}\n\n"
    f"librh_cuda, the CUDA {major} engine of renewable-huber, built for NVIDIA's cuBLAS and "
    f"cuSOLVER wheels of CUDA {major}. Install it as `pip install renewable-huber[cuda{major}]`; "
    "it adds the `native_cuda` backend to the renewable_huber package of the same version.\n")
PY

echo "== wheel"
"$PYTHON" -m pip wheel --disable-pip-version-check --no-deps -v -w "$WORK/raw" \
  -C build-dir="$WORK/cmake" "$WORK/project" >"$WORK/build.log" 2>&1 || {
  tail -n 60 "$WORK/build.log" >&2; echo "CUDA wheel build failed (log: $WORK/build.log)" >&2; exit 1; }
grep "renewable-huber: building" "$WORK/build.log"
raw="$(ls "$WORK"/raw/*.whl)"

echo "== auditwheel repair (NVIDIA's libraries excluded: they come from NVIDIA's wheels)"
rm -f "$OUTDIR"/renewable_huber_cuda"$MAJOR"-*.whl
excludes=()
for pattern in 'libcublas.so.*' 'libcublasLt.so.*' 'libcusolver.so.*' 'libcusparse.so.*' \
               'libnvJitLink.so.*' 'libcudart.so.*' 'libcuda.so.*'; do
  excludes+=(--exclude "$pattern")
done
"$PYTHON" -m auditwheel repair "${excludes[@]}" -w "$OUTDIR" "$raw"
wheel="$(ls "$OUTDIR"/renewable_huber_cuda"$MAJOR"-*.whl)"
"$PYTHON" -m auditwheel show "$wheel"
"$PYTHON" "$ROOT/packaging/check_wheel.py" --kind cuda --cuda-major "$MAJOR" --auditwheel "$wheel"
echo "built: $wheel"
