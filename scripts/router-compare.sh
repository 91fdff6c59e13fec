#!/usr/bin/env bash
# Speculation policies compared on the real services, a few (request rate, duration) levels
# each: starts one verifier and one draft-model drafter once, then for each level and policy a
# fresh router over them (with --latency-model) and one `splitspec bench` run; finally writes
# Markdown tables (bench/compare_report.py): mean / p50 / p99 end-to-end latency, output
# tokens/s, mean drafted tokens per decode step (k) and mean accept length per cell.
#
#   scripts/router-compare.sh [--build-dir build] [--target DIR --draft DIR]
#       [--policies none,static:1,static:3,static:5,sglang-tiers,smartspec,smartspec:request,
#                   smartspec:noprefix,analytical]
#       [--workload mix] [--levels 1:30,4:10,16:3] [--passes 2] [--drain 90] [--max-tokens 64]
#       [--latency-model configs/latency/cpu-2core-epyc-f32-pair.json] [--no-pin] [--unix] [--out DIR]
#       [--router-flags "--max-k 32 ..."] [--worker-flags "--step-spin-us 0 ..."]
#       [--drafter-flags "--quantize int8 ..."] [--temperature T [--top-k K]]
#
# --levels RATE:SECONDS,...: Poisson arrivals at RATE req/s for SECONDS each, so every cell
# gets about RATE * SECONDS requests; a level cN:SECONDS is closed-loop instead: N clients, each
# sending its next request when the last one finished (`splitspec bench --concurrency N`). Policies run level by level, one after the other, and
# each pass reverses the order of the one before, so that a load change on a shared machine
# does not land on the same policies every time; the report pools the passes' requests.
# Policy configs: smartspec = configs/policies/smartspec-batch.json; smartspec:request = smartspec
# with smartspec-request.json; smartspec:noprefix = smartspec-batch.json with
# "prefix_search": false (the candidate-batch search off); smartspec:chains = smartspec-batch.json
# with "trees": false (chains only); P = configs/policies/P.json when it
# exists; every policy drafts serially (--pipeline off) unless it ends in `+pipeline`
# (static:3+pipeline: the same policy with --pipeline on, its drafts made ahead covering the
# router's defaults of other outcomes; static:3+pipeline+alt4: four for greedy and sampled
# requests alike (--draft-ahead-alternatives 4 --draft-ahead-sampled-alternatives 4), +alt0 the
# hypothesis alone), a
# `+line` suffix (smartspec+line) with --latency-residual off (the refitted line alone), a
# `+sleep` suffix (none+sleep) with --step-spin-us 0 (the router sleeps until each step socket
# answer instead of polling around when it is due), a `+grpc` suffix (none+grpc; last of the
# suffixes) with --step-sockets off (with --unix: every call over gRPC instead of the workers'
# step sockets). An `@FILE` ending (smartspec@/tmp/profiled.json; after every suffix) runs
# the policy with --latency-model FILE instead of --latency-model's.
# --unix: the services listen on Unix sockets in OUT/sockets instead of loopback TCP ports (one
# host skips the TCP stack; the load generator talks to the router over its socket too), and the
# routers send Verify and Propose over the workers' step sockets (unless `+grpc`).
# --router-flags are added to every router (e.g. --max-k 32 for trees of 32 nodes), --worker-flags
# to the verifier and the drafter, --drafter-flags to the drafter only (e.g. --draft models/target
# --drafter-flags "--quantize int8": the target's own weights in 8 bits as the draft). `none`
# gets no drafter (plain decoding; see docs/benchmarks.md). --temperature T samples every request
# at T (`splitspec bench --temperature`, each request seeded from its prompt), --top-k K with it.
# Placement as scripts/bench-sweep.sh: verifier on CPU 1, drafter on CPU 0, one engine thread
# each; router and load generator unpinned.
# Every metrics server takes a free loopback port, so it runs beside other services. Kept for
# each cell: the router's /server_info and /metrics at its end, and the workers' /metrics before
# and after it (their step socket requests' pickups in the report). Output:
# OUT/pass<N>/<policy>-<rate>.{json,csv,server_info.json,metrics.txt,router_cpu (its CPU
# seconds),{verifier,drafter}.{before,after}.metrics.txt}, OUT/logs/, OUT/compare.md.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build
target=models/target
draft=models/draft
policies="none,static:1,static:3,static:5,sglang-tiers,smartspec,smartspec:request,smartspec:noprefix,analytical"
workload=mix
levels="1:30,4:10,16:3"
passes=2
drain=90
max_tokens=64
latency_model=configs/latency/cpu-2core-epyc-f32-pair.json
pin=1
unix=0
out=""
router_extra=""
worker_extra=""
drafter_extra=""
sampling_flags=()
while (($#)); do
  case "$1" in
    --build-dir) build="$2"; shift ;;
    --target) target="$2"; shift ;;
    --draft) draft="$2"; shift ;;
    --policies) policies="$2"; shift ;;
    --workload) workload="$2"; shift ;;
    --levels) levels="$2"; shift ;;
    --passes) passes="$2"; shift ;;
    --drain) drain="$2"; shift ;;
    --max-tokens) max_tokens="$2"; shift ;;
    --latency-model) latency_model="$2"; shift ;;
    --no-pin) pin=0 ;;
    --unix) unix=1 ;;
    --out) out="$2"; shift ;;
    --router-flags) router_extra="$2"; shift ;;
    --worker-flags) worker_extra="$2"; shift ;;
    --drafter-flags) drafter_extra="$2"; shift ;;
    --temperature) sampling_flags+=(--temperature "$2"); shift ;;
    --top-k) sampling_flags+=(--top-k "$2"); shift ;;
    -h|--help) sed -n '2,48p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

bin="$build/bin"
for b in splitspec splitspec-verifier splitspec-drafter splitspec-router; do
  [ -x "$bin/$b" ] || { echo "missing $bin/$b: build it first (or pass --build-dir)" >&2; exit 1; }
done
[ -f "bench/workloads/$workload.jsonl" ] || { echo "no workload bench/workloads/$workload.jsonl" >&2; exit 2; }
[ -z "$latency_model" ] || [ -f "$latency_model" ] || { echo "no latency model $latency_model" >&2; exit 2; }
[ -n "$out" ] || out="out/router-compare-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out/logs"
export OMP_WAIT_POLICY=passive

verifier_pin=() drafter_pin=() threads=0
if ((pin)) && command -v taskset > /dev/null && [ "$(nproc)" -ge 2 ]; then
  verifier_pin=(taskset -c 1) drafter_pin=(taskset -c 0) threads=1
  placement="verifier pinned to CPU 1, drafter to CPU 0, 1 engine thread each; router and bench unpinned"
else
  placement="no pinning; engine threads = all cores"
fi
if ((unix)); then placement+="; services on Unix sockets"; fi

source scripts/lib/services.sh  # pids, stop_pid, stop_all (EXIT trap), start NAME CMD...

# http_get URL: the body, on standard output (no curl on a bare machine).
http_get() {
  /usr/bin/python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())" "$1"
}

# listen_flags NAME: where a service listens (a free loopback port, or a socket under OUT).
listen_flags() {
  if ((unix)); then
    mkdir -p "$out/sockets"
    rm -f "$out/sockets/$1.sock"
    echo "--host unix://$(cd "$out/sockets" && pwd)/$1.sock"
  else
    echo "--port 0"
  fi
}

echo "== workers: target $target, draft $draft ($placement)"
# shellcheck disable=SC2046,SC2086  # listen_flags is two words; the worker flags are split
start verifier "${verifier_pin[@]}" "$bin/splitspec-verifier" --model "$target" --expose-model-path $(listen_flags verifier) \
  --threads "$threads" --metrics-port 0 --metrics-host 127.0.0.1 $worker_extra
pids+=("$started_pid")
verifier_addr="$started_addr"
# shellcheck disable=SC2046,SC2086
start drafter "${drafter_pin[@]}" "$bin/splitspec-drafter" --model "$draft" $(listen_flags drafter) \
  --threads "$threads" --metrics-port 0 --metrics-host 127.0.0.1 $worker_extra $drafter_extra
pids+=("$started_pid")
drafter_addr="$started_addr"
# worker_metrics NAME: the HOST:PORT of a worker's metrics server, from its log.
worker_metrics() { grep -m1 'metrics on' "$out/logs/$1.log" | sed 's/.*metrics on \([^ ]*\).*/\1/'; }

cat > "$out/settings.json" << EOF
{"target": "$target", "draft": "$draft", "policies": "$policies", "workload": "$workload",
 "levels": "$levels", "passes": $passes, "drain_s": $drain, "max_tokens": $max_tokens,
 "latency_model": "$latency_model", "placement": "$placement",
 "machine": "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), load average at start $(cut -d' ' -f1-3 /proc/loadavg)"}
EOF

IFS=',' read -r -a policy_list <<< "$policies"
IFS=',' read -r -a level_list <<< "$levels"
# The batch config with the candidate-batch search off, for smartspec:noprefix; with trees off,
# for smartspec:chains.
sed 's/"granularity": "batch",/"granularity": "batch", "prefix_search": false,/' \
  configs/policies/smartspec-batch.json > "$out/smartspec-noprefix.json"
sed 's/"granularity": "batch",/"granularity": "batch", "trees": false,/' \
  configs/policies/smartspec-batch.json > "$out/smartspec-chains.json"

# run_cell PASS POLICY RATE SECONDS: a fresh router for POLICY, one bench level, router stopped.
run_cell() {
  local pass="$1" policy="$2" rate="$3" seconds="$4"
  local safe="${policy//[:\/]/-}" label="$policy"
  local router_flags pipeline_flags=(--pipeline off) residual_flags=() transport_flags=()
  local cell_latency_model="$latency_model"
  if [[ "$policy" == *@* ]]; then
    cell_latency_model="${policy#*@}"
    policy="${policy%%@*}"
  fi
  if [[ "$policy" == *+grpc ]]; then
    transport_flags=(--step-sockets off)
    policy="${policy%+grpc}"
  fi
  if [[ "$policy" == *+sleep ]]; then
    transport_flags+=(--step-spin-us 0)
    policy="${policy%+sleep}"
  fi
  if [[ "$policy" == *+line ]]; then
    residual_flags=(--latency-residual off)
    policy="${policy%+line}"
  fi
  if [[ "$policy" =~ ^(.*)\+alt([0-9]+)$ ]]; then
    pipeline_flags+=(--draft-ahead-alternatives "${BASH_REMATCH[2]}" --draft-ahead-sampled-alternatives "${BASH_REMATCH[2]}")
    policy="${BASH_REMATCH[1]}"
  fi
  if [[ "$policy" == *+pipeline ]]; then
    pipeline_flags[1]=on
    policy="${policy%+pipeline}"
  fi
  case "$policy" in
    smartspec) router_flags=(--policy smartspec --policy-config configs/policies/smartspec-batch.json) ;;
    smartspec:request) router_flags=(--policy smartspec --policy-config configs/policies/smartspec-request.json) ;;
    smartspec:noprefix) router_flags=(--policy smartspec --policy-config "$out/smartspec-noprefix.json") ;;
    smartspec:chains) router_flags=(--policy smartspec --policy-config "$out/smartspec-chains.json") ;;
    *)
      router_flags=(--policy "$policy")
      [ -f "configs/policies/$policy.json" ] && router_flags+=(--policy-config "configs/policies/$policy.json")
      ;;
  esac
  [ -n "$cell_latency_model" ] && router_flags+=(--latency-model "$cell_latency_model")
  router_flags+=("${pipeline_flags[@]}" "${residual_flags[@]}" "${transport_flags[@]}")
  # shellcheck disable=SC2206  # word splitting of the extra flags is the point
  [ -n "$router_extra" ] && router_flags+=($router_extra)
  local pool_flags=(--drafter "model=$drafter_addr")
  [ "$policy" = none ] && pool_flags=()
  # shellcheck disable=SC2046
  start "router-$pass-$safe-$rate" "$bin/splitspec-router" --verifier "$verifier_addr" "${pool_flags[@]}" \
    $(listen_flags router) --metrics-port 0 --metrics-host 127.0.0.1 "${router_flags[@]}" > /dev/null
  local router_pid="$started_pid"
  mkdir -p "$out/pass$pass"
  # A level with failed or dropped requests exits 3: keep going, the report shows them.
  # The workers serve every cell: their counters before and after this one.
  local worker
  for worker in verifier drafter; do
    http_get "http://$(worker_metrics $worker)/metrics" > "$out/pass$pass/$safe-$rate.$worker.before.metrics.txt" \
      2> /dev/null || true
  done
  local load_flags=(--rates "$rate")
  [[ "$rate" == c* ]] && load_flags=(--concurrency "${rate#c}")
  "$bin/splitspec" bench --router "$started_addr" --workload "bench/workloads/$workload.jsonl" \
    "${load_flags[@]}" --duration "$seconds" --drain "$drain" --max-tokens "$max_tokens" \
    --max-inflight 256 --ignore-eos --seed 1 --no-progress --label "$label@$rate" ${sampling_flags[@]+"${sampling_flags[@]}"} \
    --out-prefix "$out/pass$pass/$safe-$rate" > "$out/logs/bench-$pass-$safe-$rate.txt" 2>&1 ||
    echo "   (bench exited with $? for $policy @ $rate req/s)"
  for worker in verifier drafter; do
    http_get "http://$(worker_metrics $worker)/metrics" > "$out/pass$pass/$safe-$rate.$worker.after.metrics.txt" \
      2> /dev/null || true
  done
  # The router's own account of the cell (policy state: shapes chosen, estimates, overhead).
  local metrics_addr
  metrics_addr="$(grep -m1 'metrics on' "$out/logs/router-$pass-$safe-$rate.log" | sed 's/.*metrics on \([^ ]*\).*/\1/')"
  http_get "http://$metrics_addr/server_info" > "$out/pass$pass/$safe-$rate.server_info.json" 2> /dev/null ||
    echo "   (no /server_info from the router for $policy @ $rate)"
  # Its Prometheus metrics too (the step stages' histograms: where a step's time went).
  http_get "http://$metrics_addr/metrics" > "$out/pass$pass/$safe-$rate.metrics.txt" 2> /dev/null || true
  # The router's CPU seconds over the cell (user + system; fields 14-15 of /proc/PID/stat, in
  # clock ticks): what its planning and bookkeeping cost, per step in the report.
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$router_pid/stat" \
    > "$out/pass$pass/$safe-$rate.router_cpu" 2> /dev/null || true
  stop_pid "$router_pid"
  echo "   pass $pass  level $rate  $label  done (load $(cut -d' ' -f1 /proc/loadavg))"
}

for ((pass = 1; pass <= passes; pass++)); do
  order=("${policy_list[@]}")
  if ((pass % 2 == 0)); then
    order=()
    for ((i = ${#policy_list[@]} - 1; i >= 0; i--)); do order+=("${policy_list[i]}"); done
  fi
  for level in "${level_list[@]}"; do
    for policy in "${order[@]}"; do
      run_cell "$pass" "$policy" "${level%%:*}" "${level##*:}"
    done
  done
done
stop_all

/usr/bin/python3 bench/compare_report.py "$out" | tee "$out/compare.md"
