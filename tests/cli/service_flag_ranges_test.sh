#!/usr/bin/env bash
# The three services refuse flag values they cannot serve with before they reach a worker or
# load a model: exit status 2 and the flag named, at once. The router is given a verifier address
# nobody listens on and the drafter runs the n-gram proposer, so a binary that went on would wait
# for its verifier or serve until the timeout instead; the verifier checks with --check-flags.
# Before these checks --max-running 0 started a router that admitted nothing (every request
# waited forever), and --port 70000 served on port 4464 (the value wrapped modulo 65536).
# Usage: service_flag_ranges_test.sh ROUTER VERIFIER DRAFTER
set -uo pipefail
router=$1
verifier=$2
drafter=$3
failures=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# expect_refused BINARY "BASE FLAGS" "FLAG VALUE" MESSAGE
expect_refused() {
  local binary=$1 base=$2 flag_value=$3 message=$4
  # shellcheck disable=SC2086  # the flag strings split into their words on purpose
  timeout 5 "$binary" $base $flag_value > "$out" 2>&1
  local rc=$?
  if [ "$rc" -ne 2 ]; then
    echo "FAIL: $(basename "$binary") '$flag_value' exited $rc, not 2: $(head -c 300 "$out")"
    failures=$((failures + 1))
  elif ! grep -qF -- "error: $message" "$out"; then
    echo "FAIL: $(basename "$binary") '$flag_value' did not say '$message': $(head -c 300 "$out")"
    failures=$((failures + 1))
  fi
}

router_base="--verifier 127.0.0.1:9 --port 0 --metrics-port -1"
expect_router() { expect_refused "$router" "$router_base" "$1" "$2"; }
expect_router "--max-running 0" "--max-running must be at least 1, got 0"
expect_router "--max-queue -1" "--max-queue must be at least 1, got -1"
expect_router "--max-k -1" "--max-k must be in [0, 1024], got -1"
expect_router "--max-k 5000" "--max-k must be in [0, 1024], got 5000"
expect_router "--default-max-tokens 0" "--default-max-tokens must be at least 1, got 0"
expect_router "--deadline-factor 0" "--deadline-factor must be > 0"
expect_router "--worker-timeout-seconds 0" "--worker-timeout-seconds must be > 0"
expect_router "--worker-timeout-seconds nan" "--worker-timeout-seconds expects a number, got 'nan'"
expect_router "--failover-wait-seconds -1" "--failover-wait-seconds must be at least 0, got -1"
expect_router "--probe-interval-seconds 0" "--probe-interval-seconds must be > 0"
expect_router "--resolve-interval-seconds 0" "--resolve-interval-seconds must be > 0"
expect_router "--draft-ahead-alternatives 9" "--draft-ahead-alternatives must be in [0, 8], got 9"
expect_router "--draft-ahead-sampled-alternatives -1" "--draft-ahead-sampled-alternatives must be in [0, 8], got -1"
expect_refused "$router" "--verifier 127.0.0.1:9 --metrics-port -1" "--port 70000" "--port must be in [0, 65535], got 70000"
expect_router "--max-queue 4294967297" "--max-queue is out of range, got 4294967297"
expect_router "--http-threads 1000000" "--http-threads must be in [1, 4096], got 1000000"

verifier_base="--model /nonexistent --check-flags --port 0 --metrics-port -1"
expect_verifier() { expect_refused "$verifier" "$verifier_base" "$1" "$2"; }
expect_refused "$verifier" "--model /nonexistent --check-flags --metrics-port -1" "--port 70000" "--port must be in [0, 65535], got 70000"
expect_verifier "--threads -2" "--threads must be in [0, 4096], got -2"
expect_verifier "--kv-blocks 0" "--kv-blocks must be at least 1, got 0"
expect_verifier "--block-size 0" "--block-size must be in [1, 4096], got 0"
expect_verifier "--max-draft-tokens -1" "--max-draft-tokens must be in [0, 4096], got -1"
expect_verifier "--max-sessions 0" "--max-sessions must be at least 1, got 0"
expect_verifier "--max-context -1" "--max-context must be at least 0, got -1"
expect_verifier "--tp 0" "--tp must be in [1, 1024], got 0"
expect_verifier "--drain-seconds -1" "--drain-seconds must be at least 0, got -1"
expect_verifier "--session-lease-seconds nan" "--session-lease-seconds expects a number, got 'nan'"

drafter_base="--ngram --port 0 --metrics-port -1"
expect_drafter() { expect_refused "$drafter" "$drafter_base" "$1" "$2"; }
expect_refused "$drafter" "--ngram --metrics-port -1" "--port 65536" "--port must be in [0, 65535], got 65536"
expect_drafter "--threads -2" "--threads must be in [0, 4096], got -2"
expect_drafter "--ngram-min 0" "--ngram-min must be at least 1, got 0"
expect_drafter "--max-sessions 0" "--max-sessions must be at least 1, got 0"
expect_drafter "--max-history-tokens 0" "--max-history-tokens must be at least 1, got 0"
expect_drafter "--max-draft-tokens 5000" "--max-draft-tokens must be in [0, 4096], got 5000"
expect_drafter "--drain-seconds -0.5" "--drain-seconds must be at least 0, got -0.5"
expect_drafter "--kv-blocks 99999999999" "--kv-blocks is out of range, got 99999999999"

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "every out-of-range service flag refused"
