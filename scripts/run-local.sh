#!/usr/bin/env bash
# Starts splitspec on loopback: a verifier (target model), a draft-model drafter and an n-gram
# drafter, and a router over them; waits until each one serves, then keeps serving until
# Ctrl-C (or, with --demo, generates from a sample prompt and exits).
#
#   scripts/run-local.sh [--demo] [--policy smartspec] [--port 50050] [--build-dir build]
#                        [--target DIR --draft DIR] [--latency-model FILE] [--prompt TEXT] [--max-tokens N]
#
# Without --target/--draft it uses models/{target,draft} (the bundled trained pair) when present, otherwise a
# random pair made once with `splitspec make-model` under ${XDG_CACHE_HOME:-~/.cache}/splitspec.
# The router's latency model (which smartspec plans with, and refits as it runs) defaults to the
# bundled pair's profile, configs/latency/cpu-2core-epyc-f32-pair.json.
# Ports: router PORT (with --demo also a plain router on PORT+4); the verifier and the drafters
# listen on Unix sockets in the logs directory, so the router reaches them over their step sockets.
set -euo pipefail
cd "$(dirname "$0")/.."
# The services share the cores: idle OpenMP threads sleep instead of spinning (README, "Threads").
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"

build=build
policy=smartspec
latency_model=configs/latency/cpu-2core-epyc-f32-pair.json
port=50050
demo=0
target=""
draft=""
# Code is the bundled pair's strongest domain (and where its draft is accepted most).
prompt=$'class Stack:\n    """A last-in first-out stack."""\n\n    def __init__(self):\n'
max_tokens=64
while (($#)); do
  case "$1" in
    --demo) demo=1 ;;
    --policy) policy="$2"; shift ;;
    --port) port="$2"; shift ;;
    --build-dir) build="$2"; shift ;;
    --target) target="$2"; shift ;;
    --draft) draft="$2"; shift ;;
    --latency-model) latency_model="$2"; shift ;;
    --prompt) prompt="$2"; shift ;;
    --max-tokens) max_tokens="$2"; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

bin="$build/bin"
for b in splitspec splitspec-verifier splitspec-drafter splitspec-router; do
  [ -x "$bin/$b" ] || { echo "missing $bin/$b: build first (scripts/setup.sh)" >&2; exit 1; }
done

# The model pair.
if [ -z "$target" ]; then
  if [ -f models/target/config.json ] && [ -f models/draft/config.json ]; then
    target=models/target
    draft=models/draft
  else
    cache="${XDG_CACHE_HOME:-$HOME/.cache}/splitspec/models"
    target="$cache/small-target"
    draft="$cache/small-draft"
    if [ ! -f "$draft/config.json" ]; then
      echo "== making a random model pair in $cache (once)"
      "$bin/splitspec" make-model --preset small --out "$target" > /dev/null
      "$bin/splitspec" make-model --draft-of "$target" --layers 1 --out "$draft" > /dev/null
    fi
  fi
fi
[ -n "$draft" ] || { echo "--target needs --draft" >&2; exit 2; }

logs="$(mktemp -d "${TMPDIR:-/tmp}/splitspec-run.XXXXXX")"
pids=()
stop_all() {
  # Router first so it drains its requests while the workers are still there.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2> /dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2> /dev/null || true; done
}
trap 'stop_all' EXIT
trap 'exit 130' INT TERM

# start NAME CMD...: runs it with its output in $logs/NAME.log and waits for its
# "listening on" line (printed once it serves; the services also answer grpc.health.v1).
start() {
  local name="$1"
  shift
  "$@" > "$logs/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 600); do
    if grep -q "listening on" "$logs/$name.log" 2> /dev/null; then
      pids+=("$pid")
      echo "   $(grep -m1 'listening on' "$logs/$name.log")"
      return 0
    fi
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  echo "$name failed to start:" >&2
  cat "$logs/$name.log" >&2
  kill -TERM "$pid" 2> /dev/null || true
  return 1
}

echo "== starting services (logs in $logs)"
# The workers listen on Unix sockets beside the logs: on one host the router then sends each
# step's Verify and Propose over their step sockets (PATH.step), without gRPC's thread hand-offs.
verifier_addr="unix://$logs/verifier.sock"
model_addr="unix://$logs/drafter-model.sock"
ngram_addr="unix://$logs/drafter-ngram.sock"
start verifier "$bin/splitspec-verifier" --model "$target" --expose-model-path --host "$verifier_addr"
start drafter-model "$bin/splitspec-drafter" --model "$draft" --host "$model_addr"
# Metrics: router 9400, verifier 9402, model drafter 9401 (the defaults), n-gram drafter 9403
# (deploy/prometheus/prometheus.yml scrapes all four).
start drafter-ngram "$bin/splitspec-drafter" --ngram --host "$ngram_addr" --metrics-port 9403
start router "$bin/splitspec-router" --verifier "$verifier_addr" \
  --drafter "model=$model_addr" --drafter "ngram=$ngram_addr" \
  --policy "$policy" --latency-model "$latency_model" --port "$port"

# tokens_per_second LOG: the figure from the "[... N tokens/s ...]" line `generate` ends with.
tokens_per_second() { sed -n 's/.* \([0-9.]*\) tokens\/s.*/\1/p' "$1" | tail -1; }

if ((demo)); then
  # A second router over the same workers, never speculating: the same prompt through both shows
  # what speculation buys on this machine.
  start router-plain "$bin/splitspec-router" --verifier "$verifier_addr" \
    --drafter "model=$model_addr" --drafter "ngram=$ngram_addr" \
    --policy none --port $((port + 4)) --metrics-port 9404
  # Warm-up (first touch of the weights, thread start-up), so neither timing below pays for it.
  "$bin/splitspec" generate --router "127.0.0.1:$port" --prompt "$prompt" --max-tokens 8 > /dev/null
  echo "== prompt:"
  echo "$prompt"
  echo "== without speculation (policy none):"
  "$bin/splitspec" generate --router "127.0.0.1:$((port + 4))" --prompt "$prompt" --max-tokens "$max_tokens" \
    | tee "$logs/plain.out"
  echo "== with speculation (policy $policy):"
  "$bin/splitspec" generate --router "127.0.0.1:$port" --prompt "$prompt" --max-tokens "$max_tokens" \
    | tee "$logs/speculative.out"
  plain=$(tokens_per_second "$logs/plain.out")
  speculative=$(tokens_per_second "$logs/speculative.out")
  awk -v p="$plain" -v s="$speculative" 'BEGIN { if (p > 0) printf "== speculation: %.0f vs %.0f tokens/s (%.2fx)\n", s, p, s / p }'
  exit 0
fi
echo "== serving on 127.0.0.1:$port; try:"
echo "   $bin/splitspec generate --router 127.0.0.1:$port --prompt 'Hello' --max-tokens 32"
echo "   (Ctrl-C stops everything)"
wait "${pids[@]}"
