#!/usr/bin/env bash
# Mutation check of the emulated CUDA conformance tests: breaks the CUDA backend on purpose,
# one mutation at a time (an off-by-one in the attention's key loop, dropped barriers, a wrong
# shuffle tree, a wrong cuBLAS transpose, ...), rebuilds cuda_emulated_test and expects the op
# tests to fail; a dropped barrier counts as caught when the tests fail or ThreadSanitizer
# reports a data race (the emulation's fixed thread order can hide a missing barrier from the
# results; TSan sees the missing happens-before whatever the order).
# Every source file is restored afterwards, whatever happens.
#   scripts/cuda_mutation_check.sh [BUILD_DIR] [TSAN_BUILD_DIR]
# BUILD_DIR (default build/) and TSAN_BUILD_DIR (default build-tsan/, skipped if absent) must
# be configured already (see scripts/test.sh). Exit status 1 if any mutation survives.
# SPLITSPEC_BUILD_LOCK=FILE runs each build under `flock FILE` (machines shared by builders).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tsan_build=${2:-build-tsan}
filter='CudaOpsTest.*:CublasSemanticsTest.*'

# file | exact text | replacement | whether TSan must see a race | what it breaks
mutations=(
  "common/engine/cuda/attention.cu|for (int32_t r = first + threadIdx.x; r < last; r += blockDim.x) {
    const int32_t p|for (int32_t r = first + threadIdx.x; r < last - 1; r += blockDim.x) {
    const int32_t p|no|attention: off-by-one in the key loop (the last key of each chunk is never scored)"
  "common/engine/cuda/attention.cu|  __syncthreads();

  float local_max = -INFINITY;|
  float local_max = -INFINITY;|yes|attention: barrier after loading the query head dropped"
  "common/engine/cuda/attention.cu|      acc += expf(partials[s * stride] - max_score) * partials[s * stride + kPartialHeader + d];|      acc += partials[s * stride + kPartialHeader + d];|no|attention: chunks' sums of V added without rescaling to the common max"
  "common/engine/cuda/attention.cu|for (int w = 1; w < n_warps; ++w)|for (int w = 1; w < n_warps - 1; ++w)|no|attention: the last warp's partial sum of V dropped"
  "common/engine/cuda/attention.cu|  __syncthreads();
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = partials[d];|  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = partials[d];|yes|attention: barrier before adding the warps' partial sums dropped"
  "common/engine/cuda/common.cuh|  __syncthreads();  // scratch may still be read|  // scratch may still be read|yes|BlockReduce: barrier before reusing the scratch of a previous reduction dropped"
  "common/engine/cuda/common.cuh|  if (lane == 0) scratch[warp] = v;
  __syncthreads();|  if (lane == 0) scratch[warp] = v;|yes|BlockReduce: barrier between the warp partials and their sum dropped"
  "common/engine/cuda/sampling.cu|    __syncthreads();
  }|  }|yes|argmax: barrier inside the tree reduction dropped"
  "common/engine/cuda/common.cuh|  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync|  for (int offset = 8; offset > 0; offset >>= 1) v += __shfl_xor_sync|no|WarpSum: shuffle tree starts at offset 8 (half the lanes never summed)"
  "common/engine/cuda/matmul.cu|    const int64_t t = t0 + min(j, n_tile - 1);
    x_rows[j] = x +|    const int64_t t = t0 + min(j + 1, n_tile - 1);
    x_rows[j] = x +|no|warp matmul: token tile rows shifted by one"
  "common/engine/cuda/cuda_backend.cc|cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N|cublasGemmEx(cublas_, CUBLAS_OP_N, CUBLAS_OP_N|no|cuBLAS path: weights not transposed"
  "common/engine/cuda/rope.cu|  const int64_t t = head / n_heads;|  const int64_t t = index / n_heads;|no|rope: token index from the pair index"
)

build_target() {
  if [ -n "${SPLITSPEC_BUILD_LOCK:-}" ]; then
    flock "$SPLITSPEC_BUILD_LOCK" cmake --build "$1" -j2 --target cuda_emulated_test
  else
    cmake --build "$1" -j2 --target cuda_emulated_test
  fi
}

backup=$(mktemp -d)
restore() {
  if [ -n "${current:-}" ] && [ -f "$backup/file" ]; then cp "$backup/file" "$current"; fi
  rm -rf "$backup"
}
trap restore EXIT

export OMP_WAIT_POLICY=passive
survived=0
for m in "${mutations[@]}"; do
  IFS='|' read -r -d '' file old new want_race what < <(printf '%s\0' "$m") || true
  current=$file
  cp "$file" "$backup/file"
  OLD="$old" NEW="$new" /usr/bin/python3 - "$file" <<'EOF'
import os, sys
path = sys.argv[1]
text = open(path).read()
old, new = os.environ["OLD"], os.environ["NEW"]
if text.count(old) != 1:
    sys.exit(f"mutation text found {text.count(old)} times in {path}: {old!r}")
open(path, "w").write(text.replace(old, new))
EOF
  echo "== mutation: $what"
  build_target "$build" > "$backup/build.log" 2>&1 || { cat "$backup/build.log"; exit 1; }
  caught=0
  if OMP_NUM_THREADS=1 "$build/bin/cuda_emulated_test" --gtest_filter="$filter" > "$backup/run.log" 2>&1; then
    echo "   the emulated tests pass"
  else
    caught=1
    echo "   caught: $(grep -c '^\[  FAILED  \] .*(' "$backup/run.log" || true) failing test(s): $(grep -o '^\[  FAILED  \] [A-Za-z.]*' "$backup/run.log" | sed 's/.*\] //' | sort -u | tr '\n' ' ')"
  fi
  if [ "$want_race" = yes ] && [ -d "$tsan_build" ]; then
    build_target "$tsan_build" > "$backup/build.log" 2>&1 || { cat "$backup/build.log"; exit 1; }
    OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1 "$tsan_build/bin/cuda_emulated_test" --gtest_filter="$filter" \
      > "$backup/tsan.log" 2>&1 || true
    if grep -q "WARNING: ThreadSanitizer: data race" "$backup/tsan.log"; then
      echo "   caught by TSan: $(grep -m1 'SUMMARY: ThreadSanitizer' "$backup/tsan.log" | sed 's/.*data race //')"
      caught=1
    else
      echo "   TSan: no race reported"
    fi
  fi
  if [ "$caught" = 0 ]; then
    echo "   SURVIVED"
    survived=1
  fi
  cp "$backup/file" "$file"
  current=""
done
# Leave the builds matching the restored sources.
build_target "$build" > /dev/null 2>&1
[ -d "$tsan_build" ] && build_target "$tsan_build" > /dev/null 2>&1
exit "$survived"
