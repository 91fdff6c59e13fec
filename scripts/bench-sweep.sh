#!/usr/bin/env bash
# Policy sweep on the real services: starts one verifier and the drafter(s) once, then for each
# policy restarts the router over the same workers and runs `splitspec bench` over every
# workload and request rate; finally writes a Markdown table and PNG plots of the speedup over
# `none` (bench/sweep_report.py, matplotlib from Debian's /usr/bin/python3). Every router
# drafts serially (--pipeline off), so each policy is measured on its own.
#
#   scripts/bench-sweep.sh [--build-dir build] [--target DIR --draft DIR]
#       [--policies none,static:1,static:3,static:5,sglang-tiers,smartspec,analytical]
#       [--workloads chat,qa] [--rates 0.5,1,2,4] [--duration 30] [--drain 60] [--max-tokens 64]
#       [--drafters model|ngram|model,ngram] [--policy-config-dir configs/policies]
#       [--latency-model FILE] [--no-pin] [--out DIR] [--title TEXT]
#
# Models: --target/--draft, else models/{target,draft} (the trained pair) when present, else
# models/default/{target,draft}, else a random small pair made once with `splitspec make-model`.
# Placement (2+ cores, unless --no-pin): the verifier on CPU 1 and the drafters on CPU 0, one
# engine thread each (taskset); the router and the load generator are not pinned.
# Policy configs: a policy P uses DIR/P.json when it exists (smartspec -> smartspec-batch.json).
# `none` is plain decoding: its router gets no drafter at all (the same verifier).
# Output: OUT/<workload>/<policy>.{json,csv} and _requests.csv, OUT/logs/, OUT/sweep.md,
# OUT/speedup_<workload>.png. Every bench level is bounded (duration + drain); all on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build
target=""
draft=""
policies="none,static:1,static:3,static:5,sglang-tiers,smartspec,analytical"
workloads="chat,qa"
rates="0.5,1,2,4"
duration=30
drain=60
max_tokens=64
drafter_kinds=model
config_dir=configs/policies
latency_model=""
pin=1
out=""
title=""
while (($#)); do
  case "$1" in
    --build-dir) build="$2"; shift ;;
    --target) target="$2"; shift ;;
    --draft) draft="$2"; shift ;;
    --policies) policies="$2"; shift ;;
    --workloads) workloads="$2"; shift ;;
    --rates) rates="$2"; shift ;;
    --duration) duration="$2"; shift ;;
    --drain) drain="$2"; shift ;;
    --max-tokens) max_tokens="$2"; shift ;;
    --drafters) drafter_kinds="$2"; shift ;;
    --policy-config-dir) config_dir="$2"; shift ;;
    --latency-model) latency_model="$2"; shift ;;
    --no-pin) pin=0 ;;
    --out) out="$2"; shift ;;
    --title) title="$2"; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

bin="$build/bin"
for b in splitspec splitspec-verifier splitspec-drafter splitspec-router; do
  [ -x "$bin/$b" ] || { echo "missing $bin/$b: build it first (or pass --build-dir)" >&2; exit 1; }
done
[ -n "$out" ] || out="out/bench-sweep-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out/logs"

# The model pair.
if [ -z "$target" ]; then
  if [ -f models/target/config.json ] && [ -f models/draft/config.json ]; then
    target=models/target draft=models/draft
  elif [ -f models/default/target/config.json ] && [ -f models/default/draft/config.json ]; then
    target=models/default/target draft=models/default/draft
  else
    cache="${XDG_CACHE_HOME:-$HOME/.cache}/splitspec/models"
    target="$cache/small-target" draft="$cache/small-draft"
    if [ ! -f "$draft/config.json" ]; then
      echo "== making a random model pair in $cache (once)"
      "$bin/splitspec" make-model --preset small --out "$target" > /dev/null
      "$bin/splitspec" make-model --draft-of "$target" --layers 1 --out "$draft" > /dev/null
    fi
  fi
fi
[ -n "$draft" ] || { echo "--target needs --draft" >&2; exit 2; }

# Core placement.
verifier_pin=() drafter_pin=() threads=0
if ((pin)) && command -v taskset > /dev/null && [ "$(nproc)" -ge 2 ]; then
  verifier_pin=(taskset -c 1) drafter_pin=(taskset -c 0) threads=1
  placement="verifier pinned to CPU 1, drafters to CPU 0, 1 engine thread each; router and bench unpinned"
else
  placement="no pinning; engine threads = all cores"
fi

source scripts/lib/services.sh  # pids, stop_pid, stop_all (EXIT trap), start NAME CMD...

echo "== workers: target $target, draft $draft ($placement)"
start verifier "${verifier_pin[@]}" "$bin/splitspec-verifier" --model "$target" --expose-model-path --port 0 --threads "$threads"
pids+=("$started_pid")
verifier_addr="$started_addr"
drafter_flags=()
IFS=',' read -r -a kinds <<< "$drafter_kinds"
for kind in "${kinds[@]}"; do
  case "$kind" in
    model) start drafter-model "${drafter_pin[@]}" "$bin/splitspec-drafter" --model "$draft" --port 0 --threads "$threads" ;;
    ngram) start drafter-ngram "${drafter_pin[@]}" "$bin/splitspec-drafter" --ngram --port 0 --threads "$threads" ;;
    *) echo "unknown drafter kind '$kind' (model, ngram)" >&2; exit 2 ;;
  esac
  pids+=("$started_pid")
  drafter_flags+=(--drafter "$kind=$started_addr")
done

IFS=',' read -r -a policy_list <<< "$policies"
IFS=',' read -r -a workload_list <<< "$workloads"
for w in "${workload_list[@]}"; do
  [ -f "bench/workloads/$w.jsonl" ] || { echo "no workload bench/workloads/$w.jsonl" >&2; exit 2; }
  mkdir -p "$out/$w"
done

cat > "$out/settings.json" << EOF
{"target": "$target", "draft": "$draft", "policies": "$policies", "workloads": "$workloads",
 "rates": "$rates", "duration_s": $duration, "drain_s": $drain, "max_tokens": $max_tokens,
 "drafters": "$drafter_kinds", "placement": "$placement", "latency_model": "$latency_model",
 "machine": "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), load average at start $(cut -d' ' -f1-3 /proc/loadavg)",
 "title": "$title"}
EOF

for policy in "${policy_list[@]}"; do
  safe="${policy//:/-}"
  router_flags=(--policy "$policy")
  config="$config_dir/$policy.json"
  [ "$policy" = smartspec ] && [ ! -f "$config" ] && config="$config_dir/smartspec-batch.json"
  [ -f "$config" ] && router_flags+=(--policy-config "$config")
  [ -n "$latency_model" ] && router_flags+=(--latency-model "$latency_model")
  # The baseline runs without drafters: a router given a drafter keeps it in the loop (prefill and
  # token sync) even when the policy proposes nothing, which is not plain decoding.
  pool_flags=("${drafter_flags[@]}")
  [ "$policy" = none ] && pool_flags=()
  echo "== policy $policy ${router_flags[*]:2}${pool_flags[*]:+ ${pool_flags[*]}}"
  start "router-$safe" "$bin/splitspec-router" --verifier "$verifier_addr" "${pool_flags[@]}" --port 0 \
    --pipeline off "${router_flags[@]}"
  router_pid="$started_pid"
  router_addr="$started_addr"
  for w in "${workload_list[@]}"; do
    echo "-- $w @ $rates req/s, ${duration}s each"
    # A level with failed requests exits 3: keep going, the report shows the failures.
    "$bin/splitspec" bench --router "$router_addr" --workload "bench/workloads/$w.jsonl" --rates "$rates" \
      --duration "$duration" --drain "$drain" --max-tokens "$max_tokens" --max-inflight 256 --ignore-eos --seed 1 \
      --label "$policy/$w" --out-prefix "$out/$w/$safe" | tee "$out/logs/bench-$w-$safe.txt" | sed -n '/^level/,$p' \
      || echo "   (bench exited with $? for $policy/$w)"
  done
  stop_pid "$router_pid"
done
stop_all

echo "== report"
/usr/bin/python3 bench/sweep_report.py "$out"
