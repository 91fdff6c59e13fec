#!/usr/bin/env bash
# Tokens/s and mean accept length of each speculation policy on the real services, for a
# draft-model workload and an n-gram (repetitive text) workload, with the router's per-step
# overhead (step wall time, with the router's time since the previous step, minus the compute
# the step waited for) at p50 / p99.
# Starts the verifier and both drafters once, then one router per policy (drafting serially,
# --pipeline off), all on loopback.
#
#   scripts/policy-table.sh [--build-dir build] [--target DIR --draft DIR]
#                           [--policies "none static:1 ..."] [--max-tokens N] [--threads N]
set -euo pipefail
cd "$(dirname "$0")/.."

build=build
target=models/target
draft=models/draft
policies="none static:1 static:2 static:3 static:4 static:5"
max_tokens=128
threads=1
while (($#)); do
  case "$1" in
    --build-dir) build="$2"; shift ;;
    --target) target="$2"; shift ;;
    --draft) draft="$2"; shift ;;
    --policies) policies="$2"; shift ;;
    --max-tokens) max_tokens="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
bin="$build/bin"
export OMP_WAIT_POLICY=passive
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# Starts a service with --port 0 and prints the address from its first stdout line.
start() {
  local name=$1; shift
  "$@" --port 0 --metrics-port 0 > "$tmp/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 300); do
    if grep -q "listening on" "$tmp/$name.log"; then
      grep -m1 "listening on" "$tmp/$name.log" | awk '{print $4}'
      return 0
    fi
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  echo "error: $name did not start:" >&2; cat "$tmp/$name.log" >&2; exit 1
}

verifier=$(start verifier "$bin/splitspec-verifier" --model "$target" --expose-model-path --threads "$threads")
model_drafter=$(start model-drafter "$bin/splitspec-drafter" --model "$draft" --threads "$threads")
ngram_drafter=$(start ngram-drafter "$bin/splitspec-drafter" --ngram)

# A code prompt (the draft model's regime) and a repetitive text (prompt lookup's regime).
code_prompt=$'def parse_arguments(argv):\n    """Parse the command line."""\n    parser = argparse.ArgumentParser()\n'
ngram_prompt="The router sends each request to the verifier. The router sends each request to the drafter. The router sends each request to the"

echo "| workload | policy | tokens/s | mean accept length | overhead p50 (us) | overhead p99 (us) |"
echo "|---|---|---|---|---|---|"
for workload in draft-model ngram; do
  if [ "$workload" = draft-model ]; then pool=model; prompt=$code_prompt; else pool=ngram; prompt=$ngram_prompt; fi
  for policy in $policies; do
    router_log="$tmp/router-$workload-${policy/:/-}.log"
    "$bin/splitspec-router" --verifier "$verifier" --drafter "model=$model_drafter" --drafter "ngram=$ngram_drafter" \
      --policy "$policy" --pipeline off --port 0 --metrics-port 0 > "$router_log" 2>&1 &
    router_pid=$!
    for _ in $(seq 1 300); do grep -q "metrics on" "$router_log" && break; sleep 0.1; done
    router=$(grep -m1 "listening on" "$router_log" | awk '{print $4}')
    metrics=$(grep -m1 "metrics on" "$router_log" | awk '{print $4}')
    # One warm-up request, then the measured one.
    "$bin/splitspec" generate --router "$router" --prompt "$prompt" --max-tokens 16 --drafter "$pool" > /dev/null 2>&1 || true
    summary=$("$bin/splitspec" generate --router "$router" --prompt "$prompt" --max-tokens "$max_tokens" \
      --drafter "$pool" 2>&1 | grep "mean accept length" | tail -1)
    info=$(/usr/bin/python3 -c "import json,urllib.request; d=json.load(urllib.request.urlopen('http://$metrics/server_info')); print(round(d.get('overhead_p50_us',0)), round(d.get('overhead_p99_us',0)))")
    tps=$(sed -E 's/.* ([0-9.]+) tokens\/s.*/\1/' <<< "$summary")
    accept=$(sed -E 's/.*mean accept length ([0-9.]+).*/\1/' <<< "$summary")
    echo "| $workload | $policy | $tps | $accept | ${info% *} | ${info#* } |"
    kill "$router_pid" 2>/dev/null || true
    wait "$router_pid" 2>/dev/null || true
  done
done
