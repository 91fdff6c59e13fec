#!/usr/bin/env bash
# Checks a CUDA build on a machine with a GPU, in one short run:
#   1. the CUDA conformance tests (cuda_test: every kernel, a whole forward and greedy
#      generation against the CPU backend, the graph cache, a one-rank NCCL group);
#   2. greedy generation on --device cuda against --device cpu, text for text, for the bundled
#      draft and for random models of the `medium` shape in F32, F16 and BF16;
#   3. bench-engine --device cuda on those models;
#   4. the services with --device cuda (verifier and drafters on the GPU, the router on the
#      host): greedy output equals the target alone on the CPU for policies none, static:3 and
#      smartspec with a one-layer draft (rejected drafts) and for static:3 and smartspec with
#      the target drafting for itself (accepted drafts), each also with --pipeline on; then a
#      short serving benchmark;
#   5. 8-bit weights (--quantize int8) on the GPU: a generation, bench-engine, and the services
#      with the 8-bit target verifying its own 8-bit drafts, greedy output equal to that
#      target's plain greedy output on the GPU.
# Every step has a time limit and the run goes on after a failure; the summary at the end lists
# each step's result, and the exit status is 1 if any failed.
#   scripts/cuda-check.sh [--bin DIR] [--out DIR] [--device cuda|cuda:N]
# --bin: the binaries (build/bin); --out: where logs and models go (a new temporary directory).
# CUDA_TEST_FILTER=PATTERN passes --gtest_filter to cuda_test. make-model needs spm_train.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

bin=build/bin
out=""
device=cuda
while (($#)); do
  case "$1" in
    --bin) bin="$2"; shift ;;
    --out) out="$2"; shift ;;
    --device) device="$2"; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$out" ] || out="$(mktemp -d "${TMPDIR:-/tmp}/splitspec-cuda-check.XXXXXX")"
mkdir -p "$out"
for b in splitspec splitspec-verifier splitspec-drafter splitspec-router cuda_test; do
  [ -x "$bin/$b" ] || { echo "missing $bin/$b: build with a CUDA toolkit first" >&2; exit 1; }
done
echo "== logs and models in $out"

results=()
record() {  # record NAME STATUS
  local verdict=ok
  (($2 == 0)) || verdict="FAILED ($2)"
  results+=("$1: $verdict")
  echo "-- $1: $verdict"
}

# step NAME SECONDS COMMAND...: runs COMMAND with a time limit, its output to NAME.log and here.
step() {
  local name="$1" limit="$2"
  shift 2
  echo "== $name"
  timeout --kill-after=5 "$limit" "$@" 2>&1 | tee "$out/$name.log"
  record "$name" "${PIPESTATUS[0]}"
}

# generated_text LOG SKIP: the generated text alone, without generate's summary line (the last)
# and the first SKIP lines (a local generation prints the prompt first).
generated_text() { head -n -1 "$1" | tail -n +$(($2 + 1)); }

# same_text NAME A SKIP_A B SKIP_B: both logs hold the same generated text.
same_text() {
  if diff <(generated_text "$2" "$3") <(generated_text "$4" "$5") > "$out/$1.diff"; then
    record "$1" 0
  else
    echo "   texts differ (see $out/$1.diff)"
    record "$1" 1
  fi
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee "$out/gpu.txt"

step cuda_test 240 "$bin/cuda_test" --gtest_brief=1 ${CUDA_TEST_FILTER:+--gtest_filter=$CUDA_TEST_FILTER}

echo "== models"
models=()
[ -f models/draft/config.json ] && models+=(models/draft)
for dtype in f32 f16 bf16; do
  dir="$out/medium-$dtype"
  if "$bin/splitspec" make-model --preset medium --dtype "$dtype" --seed 7 --out "$dir" > "$out/make-$dtype.log" 2>&1; then
    models+=("$dir")
  else
    record "make-model medium $dtype" 1
  fi
done

prompt=$'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
prompt_lines=2
for model in "${models[@]}"; do
  name="$(basename "$model")"
  step "generate-$name-cpu" 120 "$bin/splitspec" generate --model "$model" --device cpu \
    --prompt "$prompt" --max-tokens 48
  step "generate-$name-$device" 120 "$bin/splitspec" generate --model "$model" --device "$device" \
    --prompt "$prompt" --max-tokens 48
  same_text "greedy-$name-$device-equals-cpu" "$out/generate-$name-cpu.log" 0 "$out/generate-$name-$device.log" 0
done

for model in "${models[@]}"; do
  step "bench-engine-$(basename "$model")" 120 "$bin/splitspec" bench-engine --model "$model" \
    --device "$device" --context 256 --steps 32 --batches 1,8,32 --forward-tokens 1,2,4,8,16
done
# 8-bit weights (--quantize int8) on the GPU. Its text is not compared with the CPU's: the two
# backends' int8 forwards agree until an activation lands on the other side of a rounding
# boundary, and then differ by int8's own error (see cuda_forward_test.cc); the services below
# check what exactness needs, speculative greedy equal to plain greedy on the same backend.
if [ -f "$out/medium-f16/config.json" ]; then
  step "generate-medium-f16-int8-$device" 120 "$bin/splitspec" generate --model "$out/medium-f16" --quantize int8 \
    --device "$device" --prompt "$prompt" --max-tokens 48
  step "bench-engine-medium-f16-int8" 120 "$bin/splitspec" bench-engine --model "$out/medium-f16" --quantize int8 \
    --device "$device" --context 256 --steps 32 --batches 1,8,32 --forward-tokens 1,2,4,8,16
fi

# The services on the GPU: the medium F32 model as the target, its first layer as the draft.
target="$out/medium-f32"
draft="$out/medium-f32-draft"
if [ -f "$target/config.json" ] && "$bin/splitspec" make-model --draft-of "$target" --layers 1 --out "$draft" > /dev/null 2>&1; then
  pids=()
  stop_all() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2> /dev/null || true; done
    pids=()
  }
  trap stop_all EXIT
  start() {  # start NAME COMMAND...: waits up to 60 s for "listening on"
    local name="$1"
    shift
    "$@" > "$out/$name.log" 2>&1 &
    local pid=$!
    for _ in $(seq 1 600); do
      if grep -q "^splitspec-[a-z]* listening on" "$out/$name.log"; then
        pids+=("$pid")
        return 0
      fi
      kill -0 "$pid" 2> /dev/null || break
      sleep 0.1
    done
    kill -TERM "$pid" 2> /dev/null || true
    cat "$out/$name.log"
    return 1
  }
  sock="$out/sock"
  mkdir -p "$sock"
  if start verifier "$bin/splitspec-verifier" --model "$target" --device "$device" --host "unix://$sock/verifier" --expose-model-path \
       --metrics-port -1 &&
     start drafter "$bin/splitspec-drafter" --model "$draft" --device "$device" --host "unix://$sock/drafter" \
       --metrics-port -1 &&
     start self-drafter "$bin/splitspec-drafter" --model "$target" --device "$device" --host "unix://$sock/self" \
       --metrics-port -1 &&
     start verifier-int8 "$bin/splitspec-verifier" --model "$target" --quantize int8 --device "$device" --expose-model-path \
       --host "unix://$sock/verifier-int8" --metrics-port -1 &&
     start self-drafter-int8 "$bin/splitspec-drafter" --model "$target" --quantize int8 --device "$device" \
       --host "unix://$sock/self-int8" --metrics-port -1; then
    record "services start on $device" 0
    step "generate-services-reference-cpu" 120 "$bin/splitspec" generate --model "$target" --device cpu \
      --prompt "$prompt" --max-tokens 64
    port=50160
    declare -A router_port=()
    # serve_and_compare VERIFIER DRAFTER:POLICY[+pipeline] REFERENCE_LOG WHAT: a router over the
    # sockets VERIFIER and DRAFTER, one generation through it, and its text against
    # REFERENCE_LOG's (a local generation: the prompt first); the router's port goes in router_port.
    serve_and_compare() {
      local verifier="$1" run="$2" reference="$3" what="$4"
      local drafter_socket="${run%%:*}" policy="${run#*:}" pipeline=off
      if [[ "$policy" == *+pipeline ]]; then
        pipeline=on
        policy="${policy%+pipeline}"
      fi
      local tag="$drafter_socket-${policy//:/}"
      [ "$pipeline" = on ] && tag="$tag-pipeline"
      port=$((port + 1))
      if start "router-$tag" "$bin/splitspec-router" --verifier "unix://$sock/$verifier" \
           --drafter "model=unix://$sock/$drafter_socket" --policy "$policy" --pipeline "$pipeline" \
           --port "$port" --metrics-port -1; then
        router_port[$tag]=$port
        step "generate-services-$tag" 120 "$bin/splitspec" generate --router "127.0.0.1:$port" \
          --prompt "$prompt" --max-tokens 64
        same_text "services-$tag-greedy-equals-$what" "$reference" "$prompt_lines" "$out/generate-services-$tag.log" 0
      else
        record "router $tag start" 1
      fi
    }
    # The self drafter's drafts are the target's own tokens.
    for run in drafter:none drafter:static:3 drafter:smartspec drafter:static:3+pipeline \
               self:static:3 self:smartspec self:static:3+pipeline self:smartspec+pipeline; do
      serve_and_compare verifier "$run" "$out/generate-services-reference-cpu.log" cpu-target
    done
    # The 8-bit target on the GPU verifying its own 8-bit drafts: greedy output equals that
    # target's plain greedy output on the GPU.
    step "generate-int8-reference-$device" 120 "$bin/splitspec" generate --model "$target" --quantize int8 \
      --device "$device" --prompt "$prompt" --max-tokens 64
    for run in self-int8:static:3 self-int8:smartspec self-int8:static:3+pipeline; do
      serve_and_compare verifier-int8 "$run" "$out/generate-int8-reference-$device.log" int8-target
    done
    if [ -f bench/workloads/code.jsonl ]; then
      for tag in drafter-smartspec self-smartspec self-smartspec-pipeline; do
        [ -n "${router_port[$tag]:-}" ] || continue
        step "serving-bench-$tag" 120 "$bin/splitspec" bench --router "127.0.0.1:${router_port[$tag]}" \
          --workload bench/workloads/code.jsonl --concurrency 1,8 --duration 10 --drain 30 --max-tokens 64 \
          --no-progress --out-prefix "$out/serving-$tag"
      done
    fi
  else
    record "services start on $device" 1
  fi
  stop_all
else
  record "services (no target model)" 1
fi

echo "== summary ($out)"
failed=0
for r in "${results[@]}"; do
  echo "   $r"
  [[ "$r" == *FAILED* ]] && failed=1
done
exit $failed
