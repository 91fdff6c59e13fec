#!/usr/bin/env bash
# Sets up (apt + build) and runs every test with ctest. This is what CI runs.
#   1. the Release build of everything, all tests;
#   2. an AddressSanitizer + UBSan build of the CPU core (engine, tokenizer, model files,
#      sampling, speculative core), its unit tests and the fuzz corpus replays;
#   3. the libFuzzer targets (scripts/fuzz.sh), SPLITSPEC_FUZZ_SECONDS (20) each.
# SPLITSPEC_SKIP_ASAN=1 skips step 2 and SPLITSPEC_SKIP_FUZZ=1 step 3, for a quick local run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Services and tests share the cores: passive OpenMP waits keep oversubscribed threads from
# spinning against each other.
export OMP_WAIT_POLICY=passive

echo "== running tests (Release)"
ctest --test-dir build --output-on-failure -j 2 --timeout 900

if [ "${SPLITSPEC_SKIP_ASAN:-0}" != 1 ]; then
  echo "== building the CPU core with AddressSanitizer + UBSan (build-asan/)"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPLITSPEC_SANITIZE=address,undefined \
    "-DSPLITSPEC_COMPONENTS=common/engine;common/spec;tests" \
    "-DSPLITSPEC_TEST_FILTER=^(unit/(engine|tokenizer|model_io|sampling|spec)|fuzz)$" > build-asan-configure.log 2>&1 ||
    { cat build-asan-configure.log; exit 1; }
  cmake --build build-asan -j "$(nproc)"
  echo "== running tests (ASan + UBSan)"
  ctest --test-dir build-asan --output-on-failure -j 2 --timeout 900
fi

if [ "${SPLITSPEC_SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzzing every decoder of untrusted bytes (clang, libFuzzer + ASan + UBSan, build-fuzz/)"
  scripts/fuzz.sh "${SPLITSPEC_FUZZ_SECONDS:-20}"
fi
