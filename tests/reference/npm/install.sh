#!/usr/bin/env bash
# Installs the npm packages of the reference tests into a cache directory (never into the source
# tree), once: later runs find them there. Usage: install.sh CACHE_DIR PACKAGE...
# Exit status 77 means the npm registry cannot be reached (tests then skip, saying so).
#
# Tests run in parallel (ctest -j), and `npm install` rewrites node_modules while it works, so a
# test reading its packages while another test's install runs can see them half there. So the
# first test to need anything installs every package any test uses (packages.txt plus what it
# was asked for) in one go, under a lock; a test that finds something missing waits for that
# lock and looks again before installing, and after the first install nothing runs npm again.
set -euo pipefail
cache=$1
shift
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$cache"
missing_of() {
  local package
  for package in "$@"; do
    [ -f "$cache/node_modules/$package/package.json" ] || echo "$package"
  done
}
[ -n "$(missing_of "$@")" ] || exit 0
if ! command -v npm > /dev/null; then
  echo "npm is not installed" >&2
  exit 77
fi
exec 9> "$cache/.install.lock"
flock 9
[ -n "$(missing_of "$@")" ] || exit 0  # another test installed them while this one waited
if ! npm ping --fetch-timeout=15000 > /dev/null 2>&1; then
  echo "the npm registry cannot be reached" >&2
  exit 77
fi
mapfile -t everything < <( (grep -v '^#' "$here/packages.txt"; printf '%s\n' "$@") | sed '/^$/d' | sort -u)
mapfile -t missing < <(missing_of "${everything[@]}")
# --ignore-scripts: no package here needs its install scripts (some would download binaries).
# Saved to the cache's package.json, so a later install does not prune them.
npm install --prefix "$cache" --no-audit --no-fund --ignore-scripts "${missing[@]}" >&2
