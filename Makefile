# Thin wrapper over CMake. `make run`: build Release and print the benchmark
# table against standard attention. `make test`: build, run every test, then
# again under AddressSanitizer + UndefinedBehaviorSanitizer. `make install
# PREFIX=/opt/flashattn`: build Release and install the header, both
# libraries, the CMake package and the pkg-config file (DESTDIR works too).
BUILD ?= build
ASAN_BUILD ?= build-asan
CLANG_BUILD ?= build-clang
FUZZ_BUILD ?= build-fuzz
TSAN_BUILD ?= build-tsan
ARM_BUILD ?= build-arm
FUZZ_SECONDS ?= 60
FUZZ_OPT ?= -O0
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BENCH_ARGS ?= --seq 512,1024,2048,4096 --heads 8 --head-dim 128 --reps 3
VENV ?= $(BUILD)/venv
# TEST_TORCH=1 (CI sets it): torch and transformers go into the test
# environment as well, and their tests may not skip.
TEST_TORCH ?=
PREFIX ?= /usr/local

.PHONY: all build run test test-release asan-build test-asan python-env test-python \
	test-python-asan test-clang fuzz test-tsan test-arm install clean

all: build

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

run: build
	OMP_PROC_BIND=spread OMP_PLACES=cores $(BUILD)/flashattn bench $(BENCH_ARGS)

test: test-release test-asan test-python test-python-asan test-clang test-tsan test-arm

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

asan-build:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DFLASHATTN_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

test-asan: asan-build
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS)

# The Python package, installed by `pip install .` into its own virtual
# environment. torch (several GB with its CUDA libraries) goes there only
# with TEST_TORCH=1; without it the torch and transformers tests skip.
python-env:
	test -x $(VENV)/bin/python || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q numpy ml_dtypes pytest scikit-build-core
	if [ -n "$(TEST_TORCH)" ]; then $(VENV)/bin/pip install -q torch transformers; fi
	$(VENV)/bin/pip install -q --no-build-isolation -C build-dir=$(BUILD)/python .

# FLASHATTN_REQUIRE_EXTENSION: the compiled helper (python/ext/fast.c, built
# where Python's headers are) must be there, so its tests cannot skip.
test-python: python-env
	FLASHATTN_REQUIRE_EXTENSION=1 FLASHATTN_REQUIRE_TORCH=$(TEST_TORCH) $(VENV)/bin/pytest -q python/tests

# The Python suite again on the sanitizer build's library: the package's
# memory errors (a prototype that passes a wrong size, a buffer too small)
# happen in C, where only ASan sees them. The interpreter is not built with
# ASan, so its runtime is preloaded (the one the library was linked
# against), and its own leaks are not reported. libstdc++ is preloaded
# after it: ASan intercepts __cxa_throw, and when torch brings libstdc++ in
# later the interceptor has no real function to call and aborts the run.
# --capture=sys: a report written to fd 2 by a dying process would be lost
# in pytest's capture.
test-python-asan: python-env asan-build
	asan=$$(ldd $(ASAN_BUILD)/libflashattn.so | awk '/libasan/ {print $$3}'); \
	test -n "$$asan" || { echo "$(ASAN_BUILD)/libflashattn.so is not linked against libasan"; exit 1; }; \
	LD_PRELOAD="$$asan libstdc++.so.6" ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
		FLASHATTN_LIBRARY=$(CURDIR)/$(ASAN_BUILD)/libflashattn.so FLASHATTN_REQUIRE_EXTENSION=1 \
		FLASHATTN_REQUIRE_TORCH=$(TEST_TORCH) $(VENV)/bin/pytest -q --capture=sys python/tests

# Everything built by clang as well (library, tools, tests), and the tests
# that are quick there; the long sweeps (forward, backward, varlen,
# determinism, modifiers, the CLI and its benchmarks) run on the gcc builds.
CLANG_SKIP = ^(test_forward|test_backward|test_varlen|test_determinism|test_modifiers|test_cli|test_bench.*|test_tune|test_baseline)$$
test-clang:
	cmake -S . -B $(CLANG_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(CLANG_BUILD) -j $(JOBS)
	cd $(CLANG_BUILD) && ctest --output-on-failure -j $(JOBS) -E '$(CLANG_SKIP)'

# libFuzzer over the C API and the .npy reader (docs/reliability.md), each
# harness FUZZ_SECONDS, starting from the corpus in the tree; what it adds
# stays in $(FUZZ_BUILD)/corpus, crashes land in $(FUZZ_BUILD)/crash-*.
# -O0 by default: clang 14 takes ten minutes over the AVX-512 kernels at
# -O1 under ASan, which runs the harness twice as fast. pointer-overflow is
# left to the gcc sanitizer build (it alone makes clang take minutes there).
FUZZ_FLAGS = -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=pointer-overflow \
	-fno-sanitize-recover=undefined -fno-omit-frame-pointer
fuzz:
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
		-DCMAKE_C_FLAGS_DEBUG="-g $(FUZZ_OPT)" -DCMAKE_C_FLAGS="$(FUZZ_FLAGS)" -DFLASHATTN_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_api fuzz_npy
	for h in api npy; do \
		mkdir -p $(FUZZ_BUILD)/corpus/$$h && \
		LSAN_OPTIONS=suppressions=tests/fuzz/lsan.supp \
		$(FUZZ_BUILD)/tests/fuzz_$$h -max_total_time=$(FUZZ_SECONDS) -timeout=60 -rss_limit_mb=4096 -max_len=2048 \
			-artifact_prefix=$(FUZZ_BUILD)/ $(FUZZ_BUILD)/corpus/$$h tests/fuzz/corpus/$$h || exit 1; \
	done

# The concurrency test under ThreadSanitizer (clang), OpenMP off: libomp is
# not instrumented, so TSan would report its internals; the test's own
# threads are the callers at once.
test-tsan:
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
		-DCMAKE_C_FLAGS_DEBUG="-g -O1" -DCMAKE_C_FLAGS="-fsanitize=thread" -DFLASHATTN_OPENMP=OFF >/dev/null
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target test_concurrency
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" $(TSAN_BUILD)/tests/test_concurrency

# The Arm paths (neon, sve at three vector lengths, scalar), cross-built
# with the distribution's aarch64 gcc and run under user-mode qemu
# (tests/CMakeLists.txt: the arm_* tests; docs/arm.md). Without the tools
# it is skipped, except in CI (CI or ARM_REQUIRED set), where .ci/run
# installs them and a missing tool is a failure.
ARM_TESTS = test_kernels test_gemm_nt test_gemm_bf16 test_quant_cache test_int8_qk test_forward test_backward test_decode
test-arm:
	@if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null; then \
		if [ -n "$$CI$(ARM_REQUIRED)" ]; then \
			echo "test-arm: aarch64-linux-gnu-gcc or qemu-aarch64 missing (.ci/run installs them)"; exit 1; \
		fi; \
		echo "test-arm: skipped: no aarch64-linux-gnu-gcc or qemu-aarch64 (apt-get install gcc-aarch64-linux-gnu qemu-user)"; \
		exit 0; \
	fi; \
	cmake -S . -B $(ARM_BUILD) -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release >/dev/null && \
	cmake --build $(ARM_BUILD) -j $(JOBS) --target $(ARM_TESTS) && \
	cd $(ARM_BUILD) && ctest --output-on-failure -j $(JOBS) -R '^arm_'

# The prefix is given at configure time too: GNUInstallDirs picks the library
# directory from it (lib/<multiarch> for /usr on Debian).
install:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(CLANG_BUILD) $(FUZZ_BUILD) $(TSAN_BUILD) $(ARM_BUILD)
