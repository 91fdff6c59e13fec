#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (AddressSanitizer + UBSan) in
# build-fuzz/ and runs each for SECONDS seconds, starting from its committed corpus
# (tests/fuzz/corpus/<target>/, only read). New inputs collect in build-fuzz/corpus/<target>/;
# a crash leaves its input in build-fuzz/crashes/<target>/ and the script exits 1 after
# running the other targets. Copy a crash input to tests/fuzz/corpus/<target>/crash-<what> so
# that the fuzz/<target> test replays it in every build.
#
#   scripts/fuzz.sh [--with-tests] [SECONDS per target (default 60)] [TARGET ...]   (default: every target)
#
# --with-tests first builds the CPU core's unit tests (engine, tokenizer, model files, sampling,
# speculative core, the step sockets and their shared memory) and the corpus replays in the same sanitized build and runs them with ctest:
# one sanitizer build serves both (scripts/test.sh). SECONDS 0 builds (and tests) without fuzzing.
#
# Prints one line per target: seconds, executions, corpus size, coverage, result.
set -euo pipefail
cd "$(dirname "$0")/.."
with_tests=0
if [ "${1:-}" = --with-tests ]; then
  with_tests=1
  shift
fi
seconds=${1:-60}
shift || true
cxx=$(command -v clang++-14 || command -v clang++ || true)
cc=$(command -v clang-14 || command -v clang || true)
[ -n "$cxx" ] && [ -n "$cc" ] || { echo "fuzz.sh needs clang (Debian: clang-14 libclang-rt-14-dev libomp-14-dev)" >&2; exit 2; }

all_targets=(safetensors_header model_config tokenizer_model tokenizer_text tokenizer_json chat_template draft_tree verify_request
  prefill_request propose_request http_request step_codec)
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")

echo "== configuring the sanitized build with $cxx (build-fuzz/)"
# -O1 with line tables only: what libFuzzer suggests, and it compiles faster than -O2 -g.
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Fuzz -DCMAKE_C_FLAGS_FUZZ="-O1 -gline-tables-only" \
  -DCMAKE_CXX_FLAGS_FUZZ="-O1 -gline-tables-only" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DSPLITSPEC_FUZZ=ON -DSPLITSPEC_SANITIZE=address,undefined -DSPLITSPEC_WERROR=OFF -DSPLITSPEC_CUDA=OFF \
  -DSPLITSPEC_CUDA_EMULATION=OFF \
  "-DSPLITSPEC_COMPONENTS=common/engine;common/spec;common/metrics;common/rpc;proto;router/http;tests" \
  "-DSPLITSPEC_TEST_FILTER=^(unit/(engine|tokenizer|model_io|sampling|spec|rpc)|fuzz)$" \
  > build-fuzz-configure.log 2>&1 || { cat build-fuzz-configure.log; exit 1; }
# What LeakSanitizer must not report (clang's OpenMP runtime): tests/fuzz/lsan.supp.
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
if ((with_tests)); then
  cmake --build build-fuzz -j "$(nproc)"
  echo "== running the CPU core's unit tests and the corpus replays (ASan + UBSan)"
  ctest --test-dir build-fuzz --output-on-failure -j 2 --timeout 900
fi
((seconds > 0)) || exit 0
echo "== building and running the fuzz targets, ${seconds}s each"
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

failed=()
for target in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$target
  crashes=build-fuzz/crashes/$target
  mkdir -p "$corpus" "$crashes"
  log=build-fuzz/$target.log
  status=ok
  # -rss_limit_mb / -timeout: a single input using more memory or time than a real request
  # could is a finding too.
  build-fuzz/bin/fuzz_"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$corpus" "tests/fuzz/corpus/$target" > "$log" 2>&1 || status=FAILED
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
  printf '%-20s %5ss %12s execs  corpus %5s  cov %6s  %s\n' "$target" "$seconds" "${execs:-?}" \
    "$(find "$corpus" -type f | wc -l)" "${cov:-?}" "$status"
  if [ "$status" != ok ]; then
    failed+=("$target")
    grep -E "ERROR|FUZZ_CHECK|runtime error|Test unit written" "$log" | head -5 | sed 's/^/    /' || true
  fi
done
if ((${#failed[@]})); then
  echo "fuzz targets that failed: ${failed[*]} (logs: build-fuzz/<target>.log, inputs: build-fuzz/crashes/)"
  exit 1
fi
