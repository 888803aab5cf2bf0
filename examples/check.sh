#!/usr/bin/env bash
# Installs the engines into a temporary prefix, then builds and runs the C and C++ examples
# against it twice, as a user outside this tree would: with CMake (find_package) and with a
# plain compiler line from pkg-config. Usage: examples/check.sh [build-folder]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
work="${1:-$root/build/examples-check}"
rm -rf "$work"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
prefix="$work/prefix"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)

cmake -S "$root" -B "$work/engines" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DRH_BUILD_TESTS=OFF -DRH_BUILD_CUDA=OFF >/dev/null
cmake --build "$work/engines" --parallel 2 >/dev/null
cmake --install "$work/engines" --prefix "$prefix" >/dev/null

echo "== CMake: find_package(renewable_huber 2 CONFIG)"
cmake -S "$here" -B "$work/cmake" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake" >/dev/null
"$work/cmake/stream_c"
"$work/cmake/l1_standardised_c"
"$work/cmake/stream_cpp"

echo "== pkg-config rh_cpu"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
for dir in lib lib64; do
  [ -f "$prefix/$dir/pkgconfig/rh_cpu.pc" ] && export PKG_CONFIG_PATH="$prefix/$dir/pkgconfig"
done
libdir="$(pkg-config --variable=libdir rh_cpu)"
# shellcheck disable=SC2046  # pkg-config's flags are meant to split
cc -std=c11 -Wall -Wextra -Werror "$here/c/stream.c" $(pkg-config --cflags --libs rh_cpu) -lm \
  -Wl,-rpath,"$libdir" -o "$work/stream_c"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$here/c/l1_standardised.c" $(pkg-config --cflags --libs rh_cpu) \
  -lm -Wl,-rpath,"$libdir" -o "$work/l1_standardised_c"
# shellcheck disable=SC2046
c++ -std=c++17 -Wall -Wextra -Werror "$here/cpp/stream.cpp" $(pkg-config --cflags --libs rh_cpu) \
  -Wl,-rpath,"$libdir" -o "$work/stream_cpp"
"$work/stream_c"
"$work/l1_standardised_c"
"$work/stream_cpp"
echo "examples: 6 builds ran ok"
