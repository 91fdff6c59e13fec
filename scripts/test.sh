#!/usr/bin/env bash
# Sets up (apt + build) and runs every test with ctest. This is what CI runs.
#   1. the Release build of everything, all tests;
#   2. an AddressSanitizer + UBSan build (clang, build-fuzz/) of the CPU core (engine, tokenizer,
#      model files, sampling, speculative core), its unit tests and the fuzz corpus replays;
#   3. a ThreadSanitizer build of the CUDA backend over the CPU emulation and its kernel-level
#      tests (every CUDA thread a TSan fiber: a missing barrier is a reported race). The
#      model-scale forward tests run the same kernels and stay in step 1 (under TSan they
#      would add minutes);
#   4. the libFuzzer targets, built in step 2's build and run right after its tests
#      (scripts/fuzz.sh), SPLITSPEC_FUZZ_SECONDS (10) each.
# SPLITSPEC_SKIP_ASAN=1 / SPLITSPEC_SKIP_TSAN=1 / SPLITSPEC_SKIP_FUZZ=1 skip step 2 / 3 / 4 for a
# quick local run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Services and tests share the cores: passive OpenMP waits keep oversubscribed threads from
# spinning against each other.
export OMP_WAIT_POLICY=passive

echo "== running tests (Release)"
ctest --test-dir build --output-on-failure -j 2 --timeout 900

# One clang build with ASan + UBSan and fuzzing coverage serves steps 2 and 4 (scripts/fuzz.sh).
if [ "${SPLITSPEC_SKIP_ASAN:-0}" != 1 ] || [ "${SPLITSPEC_SKIP_FUZZ:-0}" != 1 ]; then
  fuzz_args=()
  [ "${SPLITSPEC_SKIP_ASAN:-0}" = 1 ] || fuzz_args+=(--with-tests)
  fuzz_seconds=${SPLITSPEC_FUZZ_SECONDS:-10}
  [ "${SPLITSPEC_SKIP_FUZZ:-0}" != 1 ] || fuzz_seconds=0
  scripts/fuzz.sh "${fuzz_args[@]}" "$fuzz_seconds"
fi

if [ "${SPLITSPEC_SKIP_TSAN:-0}" != 1 ]; then
  echo "== building the emulated CUDA backend with ThreadSanitizer (build-tsan/)"
  # -O1 with minimal debug info (line tables, for the reports' stack traces) compiles about a
  # third faster than RelWithDebInfo's -O2 -g, and the tests run in under a minute either way.
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Sanitizer "-DCMAKE_C_FLAGS_SANITIZER=-O1 -g1" \
    "-DCMAKE_CXX_FLAGS_SANITIZER=-O1 -g1" -DSPLITSPEC_SANITIZE=thread -DSPLITSPEC_CUDA=OFF \
    "-DSPLITSPEC_COMPONENTS=common/engine;tests" "-DSPLITSPEC_TEST_FILTER=^unit/cuda$" > build-tsan-configure.log 2>&1 ||
    { cat build-tsan-configure.log; exit 1; }
  cmake --build build-tsan -j "$(nproc)" --target cuda_emulated_test
  echo "== running the emulated CUDA kernel tests (ThreadSanitizer)"
  # One OpenMP thread: the CPU reference backend's libgomp is not instrumented.
  OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1 \
    ctest --test-dir build-tsan --output-on-failure -j 2 --timeout 900 -L cuda_emulated -E CudaForwardTest
fi
