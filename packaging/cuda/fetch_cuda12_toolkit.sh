#!/usr/bin/env bash
# A private CUDA 12 compiler for the renewable-huber-cuda12 wheel, on a Debian or Ubuntu
# (x86-64) host that has no CUDA 12 toolkit installed.
#
#   packaging/cuda/fetch_cuda12_toolkit.sh [DEST]      (default DEST: build/cuda12-toolkit)
#
# PyPI carries no CUDA 12 nvcc, but Debian 13 (trixie) packages NVIDIA's CUDA 12.4 toolkit in
# its non-free component. This script downloads the pinned packages below with apt-get,
# through an apt configuration of its own under DEST/apt (the system's apt sources, state and
# installed packages are never touched; nothing is installed), so apt checks every package
# against the archive's signed Release file. It then unpacks the compiler (nvcc, cicc, ptxas,
# ...), the CUDA runtime's headers and static library and libcu++'s headers into DEST in the
# layout of an NVIDIA toolkit (bin/, nvvm/, include/, lib64/) with an nvcc.profile for that
# location, checks that the compiler runs, and prints the path of its nvcc on stdout.
#
# cuBLAS and cuSOLVER are not taken from here: the wheel builds against NVIDIA's wheels
# (packaging/cuda/sdk-cu12.txt). The host C++ compiler is g++, or CUDAHOSTCXX when set (nvcc
# 12.4 accepts GCC 6 to 13; CMake reads the same variable). A second run with the same pins does
# nothing but print the path.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEST="${1:-$ROOT/build/cuda12-toolkit}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
KEYRING="${DEBIAN_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}"
PACKAGES=(
  "nvidia-cuda-toolkit=12.4.131~12.4.1-2"   # nvcc, cudafe++, cicc, ptxas, fatbinary, nvlink
  "nvidia-cuda-dev=12.4.127~12.4.1-2"       # runtime headers, libcudart_static.a
  "libcudart12=12.4.127~12.4.1-2"           # libcudart.so.12 (CMake's toolkit search wants it)
  "libcu++-dev=2.3.2-2"                     # <nv/target>, <cuda/std/...> used by cuda_fp16.h
)
stamp_text="$(printf '%s\n' "$MIRROR" "${PACKAGES[@]}")"
nvcc="$DEST/bin/nvcc"

fail() { echo "fetch_cuda12_toolkit: $*" >&2; exit 2; }

if [ -x "$nvcc" ] && [ "$(cat "$DEST/.complete" 2>/dev/null)" = "$stamp_text" ]; then
  echo "$nvcc"
  exit 0
fi

[ "$(uname -m)" = x86_64 ] || fail "the packaged CUDA 12 toolkit is for x86-64; this machine is $(uname -m)"
command -v apt-get >/dev/null || fail "apt-get not found: this script needs a Debian or Ubuntu host; elsewhere install a CUDA 12 toolkit and pass its compiler as NVCC=/path/to/nvcc"
command -v dpkg-deb >/dev/null || fail "dpkg-deb not found (package dpkg)"
[ -r "$KEYRING" ] || fail "$KEYRING not found: install the debian-archive-keyring package (or set DEBIAN_KEYRING to Debian's archive keyring)"

rm -rf "$DEST"
apt_dir="$DEST/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs"
echo "deb [signed-by=$KEYRING] $MIRROR trixie main non-free" >"$apt_dir/sources.list"
apt_options=(
  -o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::State::status=/dev/null"
  -o "Dir::Cache=$apt_dir/cache" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=$(id -un)"
  -o "Acquire::Languages=none"
)
echo "== Debian trixie package index (main, non-free) (private apt configuration in $apt_dir)" >&2
apt-get "${apt_options[@]}" update >&2 || fail "apt-get update of Debian trixie failed"
echo "== downloading ${PACKAGES[*]}" >&2
(cd "$apt_dir/debs" && apt-get "${apt_options[@]}" download "${PACKAGES[@]}" >&2) \
  || fail "download failed: the pinned versions may have left the archive (see PACKAGES in $0)"

deb() { ls "$apt_dir/debs/$1"_*.deb; }
stage="$DEST/stage"
mkdir -p "$stage"
unpack() {  # unpack DEB [tar patterns...] into the stage
  local file="$1"; shift
  dpkg-deb --fsys-tarfile "$file" | tar -x -C "$stage" --wildcards "$@"
}
echo "== unpacking into $DEST" >&2
unpack "$(deb nvidia-cuda-toolkit)" './usr/bin/*' './usr/include/*' \
  './usr/lib/nvidia-cuda-toolkit/bin/*' './usr/lib/nvidia-cuda-toolkit/libdevice/*'
# The runtime's headers only: cuBLAS, cuSOLVER and the other libraries' headers come with their
# NVIDIA wheels, and an older copy here must not shadow them.
unpack "$(deb nvidia-cuda-dev)" --exclude='./usr/include/cublas*' --exclude='./usr/include/cusolver*' \
  --exclude='./usr/include/cusparse*' --exclude='./usr/include/cufft*' \
  --exclude='./usr/include/curand*' --exclude='./usr/include/npp*' --exclude='./usr/include/nvjpeg*' \
  --exclude='./usr/include/nvblas*' \
  './usr/include/*' \
  './usr/lib/x86_64-linux-gnu/libcudart_static.a' './usr/lib/x86_64-linux-gnu/libcudadevrt.a' \
  './usr/lib/x86_64-linux-gnu/libculibos.a' './usr/lib/x86_64-linux-gnu/stubs/libcuda.so'
unpack "$(deb libcudart12)" './usr/lib/x86_64-linux-gnu/libcudart.so.*'
unpack "$(deb libcu++-dev)" './usr/include/*'

mkdir -p "$DEST/bin" "$DEST/nvvm/bin" "$DEST/lib64/stubs"
for tool in bin2c cu++filt cudafe++ cuobjdump fatbinary nvdisasm nvlink nvprune ptxas; do
  mv "$stage/usr/bin/$tool" "$DEST/bin/"
done
# /usr/bin/nvcc is Debian's wrapper script; the compiler itself lives beside cicc.
mv "$stage/usr/lib/nvidia-cuda-toolkit/bin/nvcc" "$DEST/bin/nvcc"
mv "$stage/usr/lib/nvidia-cuda-toolkit/bin/crt" "$DEST/bin/crt"
mv "$stage/usr/lib/nvidia-cuda-toolkit/bin/cicc" "$DEST/nvvm/bin/cicc"
mv "$stage/usr/lib/nvidia-cuda-toolkit/libdevice" "$DEST/nvvm/libdevice"
rm -rf "$stage/usr/include/cuda-gdb"
mv "$stage/usr/include" "$DEST/include"
lib="$stage/usr/lib/x86_64-linux-gnu"
mv "$lib"/libcudart_static.a "$lib"/libcudadevrt.a "$lib"/libculibos.a "$lib"/libcudart.so.* "$DEST/lib64/"
ln -s libcudart.so.12 "$DEST/lib64/libcudart.so"
mv "$lib/stubs/libcuda.so" "$DEST/lib64/stubs/"
rm -rf "$stage"

# nvcc reads nvcc.profile beside itself; _HERE_ is that folder, so the toolkit is relocatable.
cat >"$DEST/bin/nvcc.profile" <<'PROFILE'
TOP                = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH   += $(TOP)/lib64:
PATH              += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES          +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES          =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
CUDAFE_FLAGS      +=
PTXAS_FLAGS       +=
PROFILE

# The compiler must run here (NVIDIA's binaries are built for old glibc) and compile device code.
probe="$DEST/probe"
mkdir -p "$probe"
printf '%s\n' '#include <cuda_runtime.h>' '#include <cuda_fp16.h>' \
  '__global__ void twice(double *x) { x[threadIdx.x] *= 2.0; }' \
  'int main() { double *x = nullptr; twice<<<1, 1>>>(x); return cudaGetLastError() == cudaSuccess ? 0 : 1; }' \
  >"$probe/probe.cu"
"$nvcc" --version >&2 || fail "$nvcc does not run on this host"
host=()
[ -z "${CUDAHOSTCXX:-}" ] || host=(-ccbin "$CUDAHOSTCXX")
"$nvcc" "${host[@]}" -arch=sm_70 -cudart static -o "$probe/probe" "$probe/probe.cu" >&2 \
  || fail "$nvcc failed to compile and link a test kernel with host compiler ${CUDAHOSTCXX:-g++} (nvcc 12.4 takes GCC 6 to 13: set CUDAHOSTCXX to one)"
rm -rf "$probe" "$apt_dir/debs" "$apt_dir/cache"  # the packages (1 GB) are not needed any more
printf '%s\n' "$stamp_text" >"$DEST/.complete"
echo "$nvcc"
