#!/usr/bin/env bash
# Decode and 16-token forward of splitspec's engine against llama.cpp, interleaved per weight
# format in each round, both with 2 threads at context 64 and the same protocol (median of
# per-step times; bench/llamacpp/step_bench.cpp for llama.cpp, `splitspec bench-engine` for
# splitspec). See bench/llamacpp/README.md for the setup that makes MODELS and STEP_BENCH.
#   bench/llamacpp/compare.sh MODELS_DIR STEP_BENCH [ROUNDS]
# MODELS_DIR holds f32/ f16/ bf16/ (splitspec model dirs) and f32.gguf f16.gguf bf16.gguf
# q8_0.gguf; int8 is splitspec's --quantize int8 of f32/ against llama.cpp's Q8_0.
# PAIRED_BENCH=PATH (bench/llamacpp/paired_bench.cpp, built) adds to each format a step-paired
# run: both engines in one process, their decode steps alternating (PAIRED_STEPS pairs, 40).
set -euo pipefail
models="${1:?MODELS_DIR}" step_bench="${2:?STEP_BENCH}" rounds="${3:-3}"
bin="${BUILD_DIR:-build}/bin"
# Both engines wait for their threads by spinning (OpenMP); passive waiting slows both ~2x.
unset OMP_WAIT_POLICY
export OMP_NUM_THREADS=2
for ((round = 1; round <= rounds; round++)); do
  echo "## round $round"
  for fmt in f32 f16 bf16 int8; do
    dir="$models/$fmt" quantize=() gguf="$models/$fmt.gguf"
    if [ "$fmt" = int8 ]; then dir="$models/f32" quantize=(--quantize int8) gguf="$models/q8_0.gguf"; fi
    echo "== $fmt (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    "$bin/splitspec" bench-engine --model "$dir" "${quantize[@]}" --threads 2 --steps 16 2>&1 |
      grep -E "^1 |read bandwidth ceiling|batch-1 decode reads|^paired|^step breakdown|^16 "
    "$step_bench" "$gguf" 2 64 16 2>&1 | tail -1
    if [ -n "${PAIRED_BENCH:-}" ]; then
      "$PAIRED_BENCH" "$dir" "$gguf" "${quantize[@]}" 2 64 "${PAIRED_STEPS:-40}" 2>/dev/null | tail -1
    fi
  done
done
