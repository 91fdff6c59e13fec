#!/usr/bin/env bash
# Every binary and every `splitspec` subcommand answers --help (and -h) with its usage on
# stdout, exit status 0 and nothing on stderr, and the usage names every flag the binary reads
# (found in its main.cc, common/rpc/serving_flags.cc / tools/cmd_<command>.cc, so a new flag
# without help text fails here).
# Usage: help_test.sh SPLITSPEC VERIFIER DRAFTER ROUTER SOURCE_DIR
set -uo pipefail
cli=$1 verifier=$2 drafter=$3 router=$4 src=$5
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

# The flags a source file reads: flags.GetX("name") in the services, args.GetX("name") in the CLI.
flags_read_by() {
  grep -o -E '(flags|args)\.(Has|GetString|GetInt|GetIntInRange|GetUint64|GetPositiveIntList|GetDouble|GetDoubleAtLeast|GetOnOff|GetAll|Require)\("[a-z0-9-]+"' "$1" |
    sed -E 's/.*\("([a-z0-9-]+)"/--\1/' | sort -u
}
# Every service also reads the shared serving flags (TLS, health port, reflection).
mapfile -t serving_flags < <(flags_read_by "$src/common/rpc/serving_flags.cc")
[ "${#serving_flags[@]}" -gt 3 ] || fail "found only ${#serving_flags[@]} flags in common/rpc/serving_flags.cc"
mapfile -t verifier_flags < <(flags_read_by "$src/verifier/main.cc"; printf '%s\n' "${serving_flags[@]}")
mapfile -t drafter_flags < <(flags_read_by "$src/drafter/main.cc"; printf '%s\n' "${serving_flags[@]}")
mapfile -t router_flags < <(flags_read_by "$src/router/main.cc"; printf '%s\n' "${serving_flags[@]}")
for list in verifier_flags drafter_flags router_flags; do
  declare -n flags_ref=$list
  [ "${#flags_ref[@]}" -gt 5 ] || fail "found only ${#flags_ref[@]} flags for ${list%_flags} in its main.cc"
done

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
for command in $commands; do
  source_file="$src/tools/cmd_${command//-/_}.cc"
  command_flags=()
  [ -f "$source_file" ] && mapfile -t command_flags < <(flags_read_by "$source_file")
  expect_help "splitspec $command" -- "$cli" "$command" --help -- "${command_flags[@]}"
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
