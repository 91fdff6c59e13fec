#!/usr/bin/env bash
# Every binary and every `splitspec` subcommand answers --help (and -h) with its usage on
# stdout, exit status 0 and nothing on stderr, and the usage names the flags the binary reads.
# Usage: help_test.sh SPLITSPEC VERIFIER DRAFTER ROUTER
set -uo pipefail
cli=$1 verifier=$2 drafter=$3 router=$4
failures=0
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect_help NAME -- COMMAND... -- FLAG...: runs COMMAND, checks exit 0, empty stderr,
# "usage: NAME" on stdout and every FLAG on stdout.
expect_help() {
  local name=$1
  shift 2
  local cmd=()
  while [ "$1" != -- ]; do cmd+=("$1"); shift; done
  shift
  "${cmd[@]}" > "$out" 2> "$err"
  local rc=$?
  [ "$rc" -eq 0 ] || fail "'${cmd[*]}' exited $rc (stderr: $(head -c 300 "$err"))"
  [ -s "$err" ] && fail "'${cmd[*]}' wrote to stderr: $(head -c 300 "$err")"
  grep -q "^usage: $name" "$out" || fail "'${cmd[*]}' printed no 'usage: $name' line"
  local flag
  for flag in "$@"; do
    grep -q -- "$flag\b" "$out" || fail "'${cmd[*]}' usage does not mention $flag"
  done
}

verifier_flags=(--model --device --host --port --max-draft-tokens --kv-blocks --block-size --threads --tp
  --tp-rank --tp-id-file --drain-seconds --metrics-port --metrics-host)
drafter_flags=(--model --device --ngram --ngram-min --ngram-max --host --port --max-draft-tokens --kv-blocks
  --block-size --threads --drain-seconds --metrics-port --metrics-host)
router_flags=(--verifier --drafter --host --port --policy --policy-config --tokenizer --latency-model
  --max-queue --max-running --max-k --default-max-tokens --worker-timeout-seconds --wait-seconds
  --drain-seconds --metrics-port --metrics-host)

for help in --help -h; do
  expect_help splitspec-verifier -- "$verifier" "$help" -- "${verifier_flags[@]}"
  expect_help splitspec-drafter -- "$drafter" "$help" -- "${drafter_flags[@]}"
  expect_help splitspec-router -- "$router" "$help" -- "${router_flags[@]}"
done
# --help wins wherever it stands, even after flags that need values.
expect_help splitspec-router -- "$router" --verifier 127.0.0.1:1 --port 0 --help -- --verifier

# The CLI: the command list, then each listed command's own usage.
expect_help splitspec -- "$cli" --help --
commands=$(awk '/^commands:/ {on = 1; next} on && NF {print $1}' "$out")
[ -n "$commands" ] || fail "'splitspec --help' lists no commands"
declare -A command_flags=(
  [bench]="--router --workload --rates --concurrency --duration --out-prefix"
  [bench-engine]="--model --device --context --steps --threads"
  [generate]="--model --router --prompt --max-tokens --temperature --top-k --top-p --seed --device"
  [generate-remote]="--router --prompt --max-tokens --stop --ignore-eos --drafter --seed --quiet"
  [make-model]="--out --preset --dtype --seed --draft-of --layers --corpus"
  [profile]="--verifier --drafter --out --batch-sizes --contexts --depths --repeats"
  [simulate]="--policies --rates --requests --latency-model --json"
)
for command in $commands; do
  # shellcheck disable=SC2086 # the flag list splits on spaces
  expect_help "splitspec $command" -- "$cli" "$command" --help -- ${command_flags[$command]:-}
  grep -q -- '--[a-z]' <(grep -v -- '--help' "$out") || fail "'splitspec $command --help' lists no flags"
done

# Help is not a blanket exit 0: mistakes still fail.
"$router" --no-such-flag 1 > /dev/null 2>&1 && fail "splitspec-router accepted an unknown flag"
"$cli" no-such-command > /dev/null 2>&1 && fail "splitspec accepted an unknown command"

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all binaries and $(echo "$commands" | wc -w) commands answer --help"
