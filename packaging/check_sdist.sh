#!/usr/bin/env bash
# Builds a wheel from the sdist in a clean temporary folder, with the defaults a user's
# `pip install renewable_huber-X.tar.gz` gets, and checks what came out:
#   - the CMake summary line ("renewable-huber: building ...") is in the build log;
#   - the wheel holds librh_cpu, and holds librh_cuda exactly when that line says it was built
#     (a CUDA toolkit with cuBLAS and cuSOLVER was found).
#   packaging/check_sdist.sh SDIST [PIP-WHEEL-OPTION...]   (PYTHON: interpreter with pip)
# Options go to `pip wheel`, e.g. -C cmake.define.RH_CUDA_LIBRARY_ROOT=PREFIX for a toolkit whose
# cuBLAS and cuSOLVER live elsewhere.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
sdist="$(cd "$(dirname "${1:?usage: check_sdist.sh SDIST}")" && pwd)/$(basename "$1")"
shift
[ -f "$sdist" ] || { echo "check_sdist.sh: $sdist: no such file" >&2; exit 2; }
work="$(mktemp -d /tmp/rh-sdist-check.XXXXXX)"
trap 'rm -rf "$work"' EXIT
tar -xzf "$sdist" -C "$work"
source_dir="$(ls -d "$work"/renewable_huber-*/)"
(cd "$work" && "$PYTHON" -m pip wheel --disable-pip-version-check --no-deps -v -w "$work/out" \
  "$@" "$source_dir" >"$work/build.log" 2>&1) || {
  tail -n 60 "$work/build.log" >&2; echo "wheel build from the sdist failed" >&2; exit 1; }
summary="$(grep -o "renewable-huber: building .*" "$work/build.log" | head -n1)"
[ -n "$summary" ] || { echo "no 'renewable-huber: building' line in the build log" >&2; exit 1; }
echo "$summary"
wheel="$(ls "$work"/out/renewable_huber-*.whl)"
members="$("$PYTHON" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$wheel")"
grep -qx "renewable_huber/_lib/librh_cpu.so.2" <<<"$members" || {
  echo "$(basename "$wheel") has no renewable_huber/_lib/librh_cpu.so.2" >&2; exit 1; }
has_cuda=0; grep -qx "renewable_huber/_lib/librh_cuda.so.2" <<<"$members" && has_cuda=1
said_cuda=0; [[ "$summary" == *"; librh_cuda ("* ]] && said_cuda=1
if [ "$has_cuda" != "$said_cuda" ]; then
  echo "the build log and the wheel disagree about librh_cuda (log: $said_cuda, wheel: $has_cuda)" >&2
  exit 1
fi
echo "sdist check passed: $(basename "$wheel") from $(basename "$sdist") holds librh_cpu$([ "$has_cuda" = 1 ] && echo " and librh_cuda")"
