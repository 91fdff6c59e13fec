#!/usr/bin/env bash
# splitspec-router refuses flag values it cannot serve with before it reaches any worker: exit
# status 2 and the flag named, at once (the verifier address given is one nobody listens on, so
# a router that went on would wait for it instead). --max-running 0 used to start a router that
# admitted nothing, every request waiting forever.
# Usage: router_flag_ranges_test.sh ROUTER
set -uo pipefail
router=$1
failures=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# expect_refused "FLAG VALUE" MESSAGE
expect_refused() {
  local flag_value=$1 message=$2
  # shellcheck disable=SC2086  # "FLAG VALUE" splits into its two words on purpose
  timeout 5 "$router" --verifier 127.0.0.1:9 --port 0 --metrics-port -1 $flag_value > "$out" 2>&1
  local rc=$?
  if [ "$rc" -ne 2 ]; then
    echo "FAIL: '$flag_value' exited $rc, not 2: $(head -c 300 "$out")"
    failures=$((failures + 1))
  elif ! grep -qF -- "error: $message" "$out"; then
    echo "FAIL: '$flag_value' did not say '$message': $(head -c 300 "$out")"
    failures=$((failures + 1))
  fi
}

expect_refused "--max-running 0" "--max-running must be at least 1"
expect_refused "--max-queue -1" "--max-queue must be at least 1"
expect_refused "--max-k -1" "--max-k must be in [0, 1024]"
expect_refused "--max-k 5000" "--max-k must be in [0, 1024]"
expect_refused "--default-max-tokens 0" "--default-max-tokens must be at least 1"
expect_refused "--deadline-factor 0" "--deadline-factor must be > 0"
expect_refused "--worker-timeout-seconds nan" "--worker-timeout-seconds must be > 0"
expect_refused "--failover-wait-seconds -1" "--failover-wait-seconds must be >= 0"
expect_refused "--probe-interval-seconds 0" "--probe-interval-seconds must be > 0"
expect_refused "--resolve-interval-seconds 0" "--resolve-interval-seconds must be > 0"

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "every out-of-range router flag refused"
