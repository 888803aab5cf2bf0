#!/usr/bin/env bash
# Run on a machine with network access and scikit-build-core, before the GPU stages, when the
# GPU host has neither: builds this project's wheel and fetches the pure-Python wheels the host
# lacks (jsonschema and its dependencies, for the record validator; dask.array and distributed
# with their dependencies, for the Dask GPU partition engines' CUDA tests) into .whl/ (ignored by git),
# and the competitor stage 2 measures, renewable-huber 0.7.1 (pure Python; its CuPy backend), into
# .whl/peer/ (installed apart: it has the same package name); copy .whl/ into the checkout on the
# GPU host.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
WHEELS="$REPO_ROOT/.whl"
rm -rf "$WHEELS" && mkdir -p "$WHEELS"
step "project wheel (librh_cpu inside; librh_cuda is built on the device with cmake)"
python3 -m pip wheel --no-deps --quiet -w "$WHEELS" "$REPO_ROOT"
step "jsonschema for the device's Python 3.12"
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$WHEELS" \
  jsonschema jsonschema-specifications referencing rpds-py attrs typing-extensions
step "dask.array and distributed for the device's Python 3.12 (NumPy comes from the host)"
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$WHEELS" \
  dask distributed cloudpickle fsspec packaging partd locket toolz pyyaml click \
  msgpack psutil sortedcontainers tblib tornado zict \
  jinja2 markupsafe
step "the peer, renewable-huber 0.7.1, for stage 2's comparison with its CuPy backend"
python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$WHEELS/peer" \
  "renewable-huber==0.7.1"
ls -lR "$WHEELS"
