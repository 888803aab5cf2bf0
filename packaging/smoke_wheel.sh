#!/usr/bin/env bash
# Installs built wheels into a clean virtual environment (binary wheels only: nothing is
# compiled, no cmake involved) and runs, from a folder outside the checkout:
#   renewable-huber info; the conformance kit on each engine of --engines; a fit with every
#   available engine checked against the NumPy reference (runbooks/scripts/wheel_smoke.py);
#   with a CUDA wheel installed, a load of librh_cuda that must resolve cuBLAS and cuSOLVER
#   through its RUNPATH from NVIDIA's wheels inside the venv, and, when native_cuda is not in
#   --engines (no GPU here), a clean "unavailable" reason instead of a load failure.
#
#   packaging/smoke_wheel.sh [--engines native_cpu[,native_cuda]] [--offline] WHEEL...
#
# Online (default): pip resolves everything else from the package index, the CUDA wheel's
# NVIDIA dependencies included (the wheels' own folder is a --find-links source).
# --offline: nothing is downloaded. The wheels go in with --no-deps; NumPy (and CuPy, if any)
# are borrowed from $PYTHON's site-packages through a .pth file placed after the venv's own;
# for a CUDA wheel, RH_SMOKE_CUDA_LIBDIR must name a folder holding cuBLAS, cuSOLVER,
# cuSPARSE and nvJitLink of the wheel's CUDA major (a toolkit's lib64, or NVIDIA's wheels
# installed elsewhere): they are linked into the venv where NVIDIA's wheels put them.
# PYTHON: the interpreter that creates the venv (default python3). RH_SMOKE_VENV: its folder
# (default: a new temporary one).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
engines="native_cpu"
offline=0
wheels=()
while [ $# -gt 0 ]; do
  case "$1" in
    --engines) engines="$2"; shift 2 ;;
    --offline) offline=1; shift ;;
    -*) echo "smoke_wheel.sh: unknown option $1" >&2; exit 2 ;;
    *) wheels+=("$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"); shift ;;
  esac
done
[ ${#wheels[@]} -gt 0 ] || { echo "usage: smoke_wheel.sh [--engines E1,E2] [--offline] WHEEL..." >&2; exit 2; }
cuda_major=""
for w in "${wheels[@]}"; do
  [ -f "$w" ] || { echo "smoke_wheel.sh: $w: no such wheel" >&2; exit 2; }
  case "$(basename "$w")" in
    renewable_huber_cuda*-*) cuda_major="$(basename "$w" | sed -E 's/^renewable_huber_cuda([0-9]+)-.*/\1/')" ;;
  esac
done

venv="${RH_SMOKE_VENV:-$(mktemp -d /tmp/rh-wheel-smoke.XXXXXX)}"
run_dir="$(mktemp -d /tmp/rh-wheel-smoke-run.XXXXXX)"
# A venv this script chose is removed afterwards; one named by RH_SMOKE_VENV is kept.
trap 'rm -rf "$run_dir"; [ -n "${RH_SMOKE_VENV:-}" ] || rm -rf "$venv"' EXIT
rm -rf "$venv"
"$PYTHON" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)
if [ "$offline" = 0 ]; then
  find_links=()
  for w in "${wheels[@]}"; do find_links+=(--find-links "$(dirname "$w")"); done
  "${pip[@]}" install --only-binary=:all: "${find_links[@]}" "${wheels[@]}"
else
  "${pip[@]}" install --no-index --no-deps "${wheels[@]}"
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  "$PYTHON" "$ROOT"/packaging/array_library_folders.py >"$site/zz-borrowed-array-libraries.pth"
  if [ -n "$cuda_major" ]; then
    libdir="${RH_SMOKE_CUDA_LIBDIR:?--offline with a CUDA wheel needs RH_SMOKE_CUDA_LIBDIR}"
    link_into() {  # link_into FOLDER PATTERN...: NVIDIA's wheel layout, filled from libdir
      local folder="$site/$1"; shift
      mkdir -p "$folder"
      for pattern in "$@"; do
        for f in "$libdir"/$pattern; do [ -e "$f" ] && ln -sf "$(readlink -f "$f")" "$folder/$(basename "$f")"; done
      done
    }
    if [ "$cuda_major" -ge 13 ]; then
      link_into "nvidia/cu$cuda_major/lib" "libcublas*.so.*" "libcusolver.so.*" "libcusparse.so.*" "libnvJitLink.so.*"
    else
      link_into nvidia/cublas/lib "libcublas*.so.*"
      link_into nvidia/cusolver/lib "libcusolver.so.*"
      link_into nvidia/cusparse/lib "libcusparse.so.*"
      link_into nvidia/nvjitlink/lib "libnvJitLink.so.*"
    fi
  fi
fi

cd "$run_dir"
export PATH="$venv/bin:$PATH"
unset RH_CPU_LIBRARY RH_CUDA_LIBRARY RH_BUILD_DIR PYTHONPATH
echo "== renewable-huber info (venv $venv)"
renewable-huber info
if [ -n "$cuda_major" ]; then
  echo "== librh_cuda resolves cuBLAS/cuSOLVER from NVIDIA's wheels in the venv"
  load='from renewable_huber import _loader; _loader.load_engine_library("native_cuda")'
  trace="$(LD_DEBUG=libs python -c "$load" 2>&1)" || { echo "$trace" | tail -n 20; echo "librh_cuda did not load" >&2; exit 1; }
  for lib in libcublas.so libcusolver.so; do
    found="$(printf '%s\n' "$trace" | sed -n "s/.*calling init: \(.*\/$lib\.[0-9]*\)$/\1/p" | head -n1)"
    # The loader reports the RUNPATH entry as it was expanded (.../_lib/../../nvidia/...).
    [ -z "$found" ] || found="$(realpath -s -m "$found")"
    echo "  $lib -> ${found:-not loaded}"
    case "$found" in
      "$venv"/*/site-packages/nvidia/*) ;;
      *) echo "$lib was not loaded from the venv's NVIDIA wheels" >&2; exit 1 ;;
    esac
  done
  if [[ ",$engines," != *",native_cuda,"* ]]; then
    python - <<'PY'
from renewable_huber.backends import unavailable_reason
reason = unavailable_reason("native_cuda")
print(f"  native_cuda without a GPU: {reason}")
if reason is None:
    raise SystemExit("native_cuda reports a device; run with --engines native_cpu,native_cuda")
if "cannot load" in reason or "not loaded" in reason:
    raise SystemExit("librh_cuda failed to load instead of reporting the missing device")
PY
  fi
fi
IFS=',' read -r -a engine_list <<<"$engines"
for engine in "${engine_list[@]}"; do
  echo "== conformance kit: $engine"
  python "$ROOT/packaging/run_conformance.py" "$engine" >"$run_dir/conformance-$engine.log" || {
    grep -v '^PASS' "$run_dir/conformance-$engine.log" | tail -n 40; exit 1; }
  tail -n 1 "$run_dir/conformance-$engine.log"
done
echo "== fit with every available engine against the NumPy reference"
python "$ROOT/runbooks/scripts/wheel_smoke.py" --require "$engines"
echo "wheel smoke passed: ${wheels[*]##*/} (engines: $engines)"
