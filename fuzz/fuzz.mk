# Reliability harnesses (fuzz/README.md). Included from the top-level Makefile, or run alone:
#   make -f fuzz/fuzz.mk fuzz-asan        ABI fuzzer + its self-tests + the allocation-failure
#                                         sweep under ASan + UBSan + LSan (~30 s)
#   make -f fuzz/fuzz.mk fuzz-cuda-faults the CUDA fault sweep and device fuzzer, plain and under
#                                         compute-sanitizer, logs in build/fault-logs (GPU host)
#   make -f fuzz/fuzz.mk fuzz-long        10^7 fuzzed calls under ASan + UBSan (long mode)
#   make -f fuzz/fuzz.mk fuzz-tsan        librh_cpu under ThreadSanitizer, threaded driver
#   make -f fuzz/fuzz.mk fuzz-python      checkpoint fuzzing, crash consistency, concurrency
#   make -f fuzz/fuzz.mk fuzz-python-long the same with RH_FUZZ_LONG=1 (many more examples)
# Each build has its own folder (build/fuzz-asan, build/fuzz-tsan, build/fuzz).

VENV ?= .venv
VENV_PY ?= $(VENV)/bin/python
JOBS ?= 2
FUZZ_SEED ?= 1
FUZZ_LONG_CALLS ?= 10000000
FUZZ_CMAKE = PATH="$(CURDIR)/$(VENV)/bin:$$PATH" cmake
FUZZ_CTEST = PATH="$(CURDIR)/$(VENV)/bin:$$PATH" ctest

.PHONY: fuzz-asan fuzz-cuda-faults fuzz-long fuzz-tsan fuzz-build-plain fuzz-python fuzz-python-long

fuzz-asan:
	$(FUZZ_CMAKE) -S . -B build/fuzz-asan -G Ninja -DRH_BUILD_TESTS=ON -DRH_BUILD_CUDA=OFF \
	  -DRH_SANITIZE=ON
	$(FUZZ_CMAKE) --build build/fuzz-asan --parallel $(JOBS) --target rh_abi_fuzz rh_abi_fuzz_selftest \
	  test_fault_injection
	$(FUZZ_CTEST) --test-dir build/fuzz-asan --output-on-failure \
	  -R '^(fuzz\.|cpu_c\.test_fault_injection$$)'

fuzz-cuda-faults:
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" engines/cuda/tests/run_fault_sweep.sh build/fault-logs \
	  build/fault-cuda

# The seed and the call count are arguments: FUZZ_SEED=7 make -f fuzz/fuzz.mk fuzz-long
fuzz-long: fuzz-asan
	ASAN_OPTIONS=allocator_may_return_null=1 build/fuzz-asan/fuzz/rh_abi_fuzz \
	  --calls $(FUZZ_LONG_CALLS) --seed $(FUZZ_SEED)

# gcc's ThreadSanitizer cannot run the ifunc resolvers of target_clones (they run before it is
# initialised and crash in the dynamic loader), so this build compiles the engine without
# multiversioning (RH_NO_MULTIVERSION): the same code, one instruction-set level.
fuzz-tsan:
	$(FUZZ_CMAKE) -S . -B build/fuzz-tsan -G Ninja -DRH_BUILD_TESTS=ON -DRH_BUILD_CUDA=OFF \
	  "-DCMAKE_C_FLAGS=-fsanitize=thread -fno-omit-frame-pointer -DRH_NO_MULTIVERSION" \
	  -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
	  -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread
	$(FUZZ_CMAKE) --build build/fuzz-tsan --parallel $(JOBS) --target rh_thread_stress
	$(FUZZ_CTEST) --test-dir build/fuzz-tsan --output-on-failure -R tsan

# A plain librh_cpu for the Python harnesses (native_cpu backend), run from the source tree.
fuzz-build-plain:
	$(FUZZ_CMAKE) -S . -B build/fuzz -G Ninja -DRH_BUILD_TESTS=ON -DRH_BUILD_CUDA=OFF
	$(FUZZ_CMAKE) --build build/fuzz --parallel $(JOBS) --target rh_cpu

FUZZ_PYTESTS = python/tests/test_fuzz_checkpoints.py python/tests/test_crash_consistency.py \
  python/tests/test_concurrency.py

fuzz-python: fuzz-build-plain
	PYTHONPATH=python RH_BUILD_DIR=build/fuzz $(VENV_PY) -m pytest -q $(FUZZ_PYTESTS)

fuzz-python-long: fuzz-build-plain
	RH_FUZZ_LONG=1 PYTHONPATH=python RH_BUILD_DIR=build/fuzz $(VENV_PY) -m pytest -q $(FUZZ_PYTESTS)
